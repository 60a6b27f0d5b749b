//! Integration tests for `rewind restore` and `rewind revert` ("restore and revert that never
//! lose a byte"). Expected trees and bytes always come from git (`ls-tree`, `cat-file`) or from
//! the file system, never from hard-coded ids. Helpers shared with other test files live in
//! tests/it/common.rs; the ones below are specific to restore/revert.
//!
//! Random tests print their seed; `REWIND_TEST_SEED=<seed>` replays them.

use crate::common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------
// Running restore / revert
// ---------------------------------------------------------------------------

/// The parsed `--json` outcome of a restore or revert.
#[derive(Debug)]
struct Outcome {
    run: Run,
    hash: String,
    written: BTreeSet<String>,
    deleted: BTreeSet<String>,
    failed: Vec<(String, String)>,
    conflicts: BTreeSet<String>,
    undo: String,
}

impl Outcome {
    fn touched(&self) -> BTreeSet<String> {
        self.written.union(&self.deleted).cloned().collect()
    }

    fn assert_clean(&self) -> &Self {
        self.assert_clean_in("")
    }

    fn assert_clean_in(&self, what: &str) -> &Self {
        assert!(
            self.failed.is_empty() && self.conflicts.is_empty(),
            "{what}: expected no failures and no conflicts: {}",
            self.run
        );
        self
    }

    fn failed_paths(&self) -> BTreeSet<String> {
        self.failed.iter().map(|f| f.0.clone()).collect()
    }
}

fn string_set(json: &Value, key: &str, run: &Run) -> BTreeSet<String> {
    json[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key:?} array in the outcome: {run}"))
        .iter()
        .map(|s| {
            s.as_str()
                .unwrap_or_else(|| panic!("non-string in {key:?}: {run}"))
                .to_string()
        })
        .collect()
}

/// Parses a restore/revert outcome and checks the exit-code contract: 0 when `failed` is empty,
/// 1 otherwise (then stdout still holds the outcome and stderr a one-line message).
fn parse_outcome(run: Run) -> Outcome {
    assert_no_panic(&run);
    let json = one_json(&run);
    assert!(json.get("error").is_none(), "restore/revert failed: {run}");
    let failed: Vec<(String, String)> = json["failed"]
        .as_array()
        .unwrap_or_else(|| panic!("no \"failed\" array: {run}"))
        .iter()
        .map(|f| {
            let path = f["path"]
                .as_str()
                .unwrap_or_else(|| panic!("failed entry without path: {run}"));
            let error = f["error"]
                .as_str()
                .unwrap_or_else(|| panic!("failed entry without error: {run}"));
            assert!(
                !error.trim().is_empty(),
                "failed entry without a reason: {run}"
            );
            (path.to_string(), error.to_string())
        })
        .collect();
    if failed.is_empty() {
        run.assert_code(0);
    } else {
        run.assert_code(1);
        assert_one_line_stderr(&run);
    }
    let hash = json["hash"]
        .as_str()
        .unwrap_or_else(|| panic!("no hash: {run}"))
        .to_string();
    let undo = json["undo"]
        .as_str()
        .unwrap_or_else(|| panic!("no undo: {run}"))
        .to_string();
    assert_oid(&hash, "restore's \"hash\"");
    assert_oid(&undo, "restore's \"undo\"");
    Outcome {
        written: string_set(&json, "written", &run),
        deleted: string_set(&json, "deleted", &run),
        conflicts: string_set(&json, "conflicts", &run),
        failed,
        hash,
        undo,
        run,
    }
}

fn restore(p: &TestProject, hash: &str, force: bool) -> Outcome {
    let mut args = vec!["--json", "restore", hash];
    if force {
        args.push("--force");
    }
    parse_outcome(p.rewind(args))
}

fn revert_args<S: AsRef<OsStr>>(hash: &str, paths: &[S]) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec!["--json".into(), "revert".into(), hash.into(), "--".into()];
    args.extend(paths.iter().map(|s| s.as_ref().to_owned()));
    args
}

fn revert<S: AsRef<OsStr>>(p: &TestProject, hash: &str, paths: &[S]) -> Outcome {
    parse_outcome(p.rewind(revert_args(hash, paths)))
}

// ---------------------------------------------------------------------------
// The store, read with git
// ---------------------------------------------------------------------------

/// path -> (mode, oid) of every non-tree entry.
type TreeMap = BTreeMap<String, (String, String)>;

fn tree_map(sb: &Sandbox, store: &Path, tree: &str) -> TreeMap {
    ls_tree(sb, store, tree)
        .into_iter()
        .map(|(path, entry)| (String::from_utf8(path).expect("utf-8 path"), entry))
        .collect()
}

/// The bytes of each blob (by id), read with one `git cat-file --batch`.
fn cat_blobs<'s>(
    sb: &Sandbox,
    store: &Path,
    oids: impl IntoIterator<Item = &'s String>,
) -> BTreeMap<String, Vec<u8>> {
    let oids: BTreeSet<&String> = oids.into_iter().collect();
    let mut input = Vec::new();
    for o in &oids {
        input.extend_from_slice(o.as_bytes());
        input.push(b'\n');
    }
    let mut cmd = sb.git_command(None);
    cmd.arg("--git-dir")
        .arg(store)
        .args(["cat-file", "--batch"]);
    let run = run_with_stdin(&mut cmd, &input);
    run.assert_success();
    let out = &run.stdout_bytes;
    let mut at = 0;
    let mut blobs = BTreeMap::new();
    for o in oids {
        let nl = at + out[at..].iter().position(|b| *b == b'\n').expect("header");
        let header = String::from_utf8_lossy(&out[at..nl]).into_owned();
        at = nl + 1;
        assert!(
            !header.ends_with("missing"),
            "object {o} missing from the store"
        );
        let size: usize = header.rsplit(' ').next().unwrap().parse().expect("size");
        blobs.insert(o.clone(), out[at..at + size].to_vec());
        at += size + 1;
    }
    blobs
}

/// Trees of the undo points on `refs/rewind/undo`, newest first (empty when there are none).
fn undo_points(sb: &Sandbox, store: &Path) -> Vec<String> {
    let exists = sb.git_in_run(store, ["rev-parse", "--verify", "-q", "refs/rewind/undo"]);
    if !exists.status.success() {
        return Vec::new();
    }
    sb.git_in(store, ["log", "--format=%T", "refs/rewind/undo"])
        .lines()
        .map(str::to_string)
        .collect()
}

fn set_max_file_size(sb: &Sandbox, store: &Path, size: u64) {
    sb.git_in(store, ["config", "rewind.maxFileSize", &size.to_string()]);
}

// ---------------------------------------------------------------------------
// The file system
// ---------------------------------------------------------------------------

/// A file or symlink, as far as a snapshot can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    File { exec: bool, bytes: Vec<u8> },
    Link(Vec<u8>),
}

impl Node {
    fn of_fs(e: &FsEntry) -> Option<Node> {
        match e.kind {
            'f' => Some(Node::File {
                exec: e.mode & 0o100 != 0,
                bytes: e.content.clone().unwrap(),
            }),
            'l' => Some(Node::Link(
                e.link.as_ref().unwrap().as_os_str().as_bytes().to_vec(),
            )),
            _ => None,
        }
    }

    fn of_tree(mode: &str, bytes: &[u8]) -> Node {
        match mode {
            "120000" => Node::Link(bytes.to_vec()),
            "100755" => Node::File {
                exec: true,
                bytes: bytes.to_vec(),
            },
            "100644" => Node::File {
                exec: false,
                bytes: bytes.to_vec(),
            },
            other => panic!("unexpected mode {other}"),
        }
    }

    fn short(&self) -> String {
        let show = |b: &[u8]| {
            let s = String::from_utf8_lossy(&b[..b.len().min(40)]).into_owned();
            format!("{s:?}{}", if b.len() > 40 { "..." } else { "" })
        };
        match self {
            Node::File { exec, bytes } => {
                format!("file(exec={exec}, {} bytes: {})", bytes.len(), show(bytes))
            }
            Node::Link(t) => format!("symlink -> {}", show(t)),
        }
    }
}

/// [`fs_snapshot`] with string keys ("proj/a/b").
type Snap = BTreeMap<String, FsEntry>;

fn snap(root: &Path) -> Snap {
    fs_snapshot(root)
        .into_iter()
        .map(|(k, v)| (k.to_str().expect("utf-8 name").to_string(), v))
        .collect()
}

/// Nodes for the paths of `tree` (project-relative keys).
fn tree_nodes(sb: &Sandbox, store: &Path, tree: &TreeMap) -> BTreeMap<String, Node> {
    let blobs = cat_blobs(sb, store, tree.values().map(|(_, o)| o));
    tree.iter()
        .map(|(p, (m, o))| (p.clone(), Node::of_tree(m, &blobs[o])))
        .collect()
}

/// Asserts that the project (under `prefix` in `s`) holds exactly the nodes of `want` at those
/// paths (it may hold other, untracked things too).
fn assert_disk_has(s: &Snap, prefix: &str, want: &BTreeMap<String, Node>, what: &str) {
    let mut diffs = Vec::new();
    for (p, n) in want {
        let key = format!("{prefix}{p}");
        match s.get(&key).and_then(Node::of_fs) {
            Some(got) if &got == n => {}
            Some(got) => diffs.push(format!("{p}: {} instead of {}", got.short(), n.short())),
            None => diffs.push(format!(
                "{p}: {} instead of {}",
                s.get(&key)
                    .map_or("missing".to_string(), |e| format!("kind {}", e.kind)),
                n.short()
            )),
        }
    }
    assert!(diffs.is_empty(), "{what}:\n{}", diffs.join("\n"));
}

/// Every non-directory entry of `before` not in `touched` (keys of `before`) is identical in
/// `after` (kind, mode, size, mtime, bytes), and every new non-directory entry is in `touched`.
fn assert_untouched_except(before: &Snap, after: &Snap, touched: &BTreeSet<String>, what: &str) {
    let mut diffs = Vec::new();
    for (k, b) in before.iter().filter(|(_, e)| e.kind != 'd') {
        if touched.contains(k) {
            continue;
        }
        match after.get(k) {
            None => diffs.push(format!("removed: {k}")),
            Some(a) if a != b => diffs.push(format!(
                "changed: {k} (kind {}->{}, mode {:o}->{:o}, len {}->{}, mtime {:?}->{:?}, content {})",
                b.kind,
                a.kind,
                b.mode,
                a.mode,
                b.len,
                a.len,
                b.mtime,
                a.mtime,
                if a.content == b.content { "same" } else { "differs" }
            )),
            _ => {}
        }
    }
    for (k, a) in after.iter().filter(|(_, e)| e.kind != 'd') {
        if !before.contains_key(k) && !touched.contains(k) {
            diffs.push(format!("added: {k} ({})", a.kind));
        }
    }
    assert!(
        diffs.is_empty(),
        "{what}: entries it must not touch changed:\n{}",
        diffs.join("\n")
    );
}

fn has_children(s: &Snap, dir: &str) -> bool {
    let prefix = format!("{dir}/");
    s.range(prefix.clone()..)
        .next()
        .is_some_and(|(k, _)| k.starts_with(&prefix))
}

/// No directory below `prefix` is empty after unless it already was before.
fn assert_no_dir_left_empty(before: &Snap, after: &Snap, prefix: &str, what: &str) {
    for (k, e) in after {
        if e.kind != 'd' || !k.starts_with(prefix) || has_children(after, k) {
            continue;
        }
        let was_empty = before.get(k).is_some_and(|b| b.kind == 'd') && !has_children(before, k);
        assert!(was_empty, "{what}: directory {k} was left empty");
    }
}

fn proj_keys(prefix: &str, paths: &BTreeSet<String>) -> BTreeSet<String> {
    paths.iter().map(|p| format!("{prefix}{p}")).collect()
}

fn write_mode(path: &Path, bytes: &[u8], mode: u32) {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).unwrap();
    }
    fs::write(path, bytes).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

fn exists(path: &Path) -> bool {
    path.symlink_metadata().is_ok()
}

fn remove_any(path: &Path) {
    let md = path.symlink_metadata().unwrap();
    if md.is_dir() {
        fs::remove_dir_all(path).unwrap();
    } else {
        fs::remove_file(path).unwrap();
    }
}

/// A project `world/proj` with a sibling directory `world/outside` that no command may touch.
struct World<'a> {
    sb: &'a Sandbox,
    p: TestProject<'a>,
    world: PathBuf,
    outside: PathBuf,
    store: PathBuf,
}

impl<'a> World<'a> {
    fn new(sb: &'a Sandbox) -> World<'a> {
        let p = sb.project("world/proj");
        let world = sb.root.join("world");
        let outside = world.join("outside");
        for name in ["a", "b", "file", "-rf", "c.txt", "sub/a", "sub/file"] {
            write_mode(
                &outside.join(name),
                format!("OUTSIDE {name}\n").as_bytes(),
                0o644,
            );
        }
        let store = p.store();
        // The world's nested repositories stand for what restore leaves alone: the setting
        // that leaves them out (under the default, their files are snapshotted: tests/it/nested.rs).
        p.store_git(["config", "rewind.nestedRepos", "skip"]);
        World {
            sb,
            p,
            world,
            outside,
            store,
        }
    }

    fn snap(&self) -> Snap {
        snap(&self.world)
    }

    fn tree(&self, tree: &str) -> TreeMap {
        tree_map(self.sb, &self.store, tree)
    }

    fn nodes(&self, tree: &TreeMap) -> BTreeMap<String, Node> {
        tree_nodes(self.sb, &self.store, tree)
    }

    /// `rewind track` equals `want`, and so does git's own tree of the directory (which reads
    /// every byte, so a stale stat cache cannot hide a wrong file).
    fn assert_state(&self, want: &str, what: &str) {
        let now = self.p.track();
        if now != want {
            let got = self.sb.git_in_run(
                &self.store,
                ["diff-tree", "-r", "--name-status", want, &now],
            );
            panic!(
                "{what}: the project's snapshot is {now}, expected {want}; diff:\n{}",
                got.stdout
            );
        }
        let oracle = self.p.git_tree();
        assert_eq!(
            oracle.id, want,
            "{what}: git's tree of the project differs:\n{}",
            oracle.listing
        );
    }
}

/// The paths written and deleted when going from `from` to `to`.
fn expected_changes(from: &TreeMap, to: &TreeMap) -> (BTreeSet<String>, BTreeSet<String>) {
    let written = to
        .iter()
        .filter(|(p, e)| from.get(*p) != Some(e))
        .map(|(p, _)| p.clone())
        .collect();
    let deleted = from
        .keys()
        .filter(|p| !to.contains_key(*p))
        .cloned()
        .collect();
    (written, deleted)
}

/// Everything that must hold after a restore or revert from snapshot `b` (whose tree is `tb`)
/// that should leave the project at `expected`:
/// * it reported exactly the differing paths, and no failure or conflict; `undo` is `b`;
/// * the files on disk are `expected`'s;
/// * nothing else in the world changed (ignored files, `.git`, nested repositories, the sibling
///   directory, unchanged files: same bytes, modes and mtimes);
/// * every overwritten or deleted byte is in the undo tree;
/// * no directory was left empty.
#[allow(clippy::too_many_arguments)] // one call site per property test, each naming every input
fn check_outcome(
    w: &World,
    what: &str,
    before: &Snap,
    after: &Snap,
    o: &Outcome,
    b: &str,
    tb: &TreeMap,
    expected: &TreeMap,
) {
    o.assert_clean_in(what);
    assert_eq!(
        undo_points(w.sb, &w.store).first(),
        Some(&o.undo),
        "{what}: the undo tree must be the newest undo point on refs/rewind/undo"
    );
    assert_eq!(
        o.undo, b,
        "{what}: undo must be the snapshot of the project from just before"
    );
    let (written, deleted) = expected_changes(tb, expected);
    assert_eq!(
        o.written, written,
        "{what}: \"written\" must list the differing paths: {}",
        o.run
    );
    assert_eq!(
        o.deleted, deleted,
        "{what}: \"deleted\" must list the removed paths: {}",
        o.run
    );
    assert_disk_has(
        after,
        "proj/",
        &w.nodes(expected),
        &format!("{what}: files on disk"),
    );
    assert_untouched_except(before, after, &proj_keys("proj/", &o.touched()), what);
    assert_no_dir_left_empty(before, after, "proj/", what);
    assert_recoverable(w, what, before, o);
}

/// For every path the outcome overwrote or deleted, its bytes from before are in the undo tree.
fn assert_recoverable(w: &World, what: &str, before: &Snap, o: &Outcome) {
    let undo = w.tree(&o.undo);
    let blobs = cat_blobs(w.sb, &w.store, undo.values().map(|(_, o)| o));
    for p in o.touched() {
        let Some(old) = before.get(&format!("proj/{p}")).and_then(Node::of_fs) else {
            continue; // created: nothing to keep
        };
        let (mode, oid) = undo.get(&p).unwrap_or_else(|| {
            panic!(
                "{what}: {p} was overwritten/deleted but is not in the undo tree {}",
                o.undo
            )
        });
        let saved = Node::of_tree(mode, &blobs[oid]);
        assert_eq!(
            saved, old,
            "{what}: the undo tree's {p} is not the bytes it replaced"
        );
    }
}

// ---------------------------------------------------------------------------
// Random trees
// ---------------------------------------------------------------------------

const POOL: &[&str] = &[
    "a",
    "b",
    "c.txt",
    "d.rs",
    "e",
    "ünï cødé",
    "日本",
    "sp ace",
    "-rf",
    "--help",
    "-",
    "x.y",
];
const LINK_TARGETS: &[&str] = &[
    "a",
    "../b",
    "/etc/hostname",
    "dangling/x",
    "日本/c.txt",
    ".",
    "-rf",
];

fn pick<'t, T>(rng: &mut XorShift, items: &'t [T]) -> &'t T {
    &items[rng.below(items.len() as u64) as usize]
}

fn rand_bytes(rng: &mut XorShift) -> Vec<u8> {
    let tag = rng.next_u64();
    let len = rng.below(200) as usize;
    let mut v: Vec<u8> = match rng.below(6) {
        0 => return Vec::new(),
        1 => (0..len).map(|_| b"abc \n"[rng.below(5) as usize]).collect(),
        2 => (0..len / 4)
            .flat_map(|i| format!("l{i}\r\n").into_bytes())
            .collect(),
        3 => (0..len).map(|_| rng.below(256) as u8).collect(),
        4 => filler(1000 + rng.below(30_000) as usize, tag as u8),
        _ => Vec::new(),
    };
    v.extend_from_slice(format!("#{tag:x}\n").as_bytes());
    v
}

fn rand_file(rng: &mut XorShift, abs: &Path) {
    let exec = rng.below(4) == 0;
    write_mode(abs, &rand_bytes(rng), if exec { 0o755 } else { 0o644 });
}

fn join(rel: &str, name: &str) -> String {
    if rel.is_empty() {
        name.to_string()
    } else {
        format!("{rel}/{name}")
    }
}

fn gen_dir(rng: &mut XorShift, root: &Path, rel: &str, depth: u32) {
    let n = 1 + rng.below(if depth == 0 { 8 } else { 4 });
    for _ in 0..n {
        let relp = join(rel, pick::<&str>(rng, POOL));
        let abs = root.join(&relp);
        if exists(&abs) {
            continue;
        }
        let r = rng.below(10);
        if r < 6 || depth >= 3 {
            rand_file(rng, &abs);
        } else if r < 9 {
            fs::create_dir(&abs).unwrap();
            gen_dir(rng, root, &relp, depth + 1);
        } else {
            std::os::unix::fs::symlink(*pick(rng, LINK_TARGETS), &abs).unwrap();
        }
    }
}

/// Top-level names that the random edits leave alone (ignored files, repositories, rules).
fn reserved(rel: &str) -> bool {
    let top = rel.split('/').next().unwrap();
    top == ".git"
        || top == ".gitignore"
        || top == "build"
        || top.starts_with("nested")
        || top.ends_with(".log")
        || top.ends_with(".tmp")
}

/// (path, kind) of the project's tracked-looking entries, sorted; symlinks are not followed.
fn entries(root: &Path) -> Vec<(String, char)> {
    snap(root)
        .into_iter()
        .filter(|(k, _)| !k.is_empty() && !reserved(k))
        .map(|(k, e)| (k, e.kind))
        .collect()
}

fn ignored_and_nested(rng: &mut XorShift, w: &World, k: u64) {
    let root = &w.p.path;
    match rng.below(4) {
        0 => write_mode(
            &root.join(format!("ign{}.log", k % 3)),
            &rand_bytes(rng),
            0o644,
        ),
        1 => write_mode(
            &root.join(format!("build/obj{}.o", k % 3)),
            &rand_bytes(rng),
            0o644,
        ),
        2 => write_mode(
            &root.join(format!("scratch{}.tmp", k % 3)),
            &rand_bytes(rng),
            0o644,
        ),
        _ => {
            let n = root.join(format!("nested{}", k % 3));
            if !exists(&n) {
                fs::create_dir(&n).unwrap();
                w.sb.git(Some(&n), ["init", "-q"]);
            }
            write_mode(&n.join("inner.txt"), &rand_bytes(rng), 0o644);
            write_mode(&n.join(*pick(rng, POOL)), &rand_bytes(rng), 0o644);
        }
    }
}

fn random_edit(rng: &mut XorShift, w: &World, k: u64) {
    let root = &w.p.path;
    let list = entries(root);
    let of = |kinds: &str| -> Vec<String> {
        list.iter()
            .filter(|(_, c)| kinds.contains(*c))
            .map(|(p, _)| p.clone())
            .collect()
    };
    let files = of("f");
    let dirs = of("d");
    let links = of("l");
    let any = of("fdl");
    match rng.below(13) {
        0 | 1 if !files.is_empty() => {
            let f = root.join(pick(rng, &files));
            let old = fs::read(&f).unwrap();
            let mut new = rand_bytes(rng);
            if new == old {
                new.push(b'!');
            }
            fs::write(&f, new).unwrap(); // keeps the mode
        }
        2 if !any.is_empty() => remove_any(&root.join(pick(rng, &any))),
        3 | 4 => {
            let mut dir = if dirs.is_empty() || rng.below(3) == 0 {
                String::new()
            } else {
                pick(rng, &dirs).clone()
            };
            for _ in 0..rng.below(3) {
                dir = join(&dir, pick::<&str>(rng, POOL));
            }
            let relp = join(&dir, pick::<&str>(rng, POOL));
            // Only where the whole way is free or real directories.
            let blocked = Path::new(&relp).ancestors().skip(1).any(|a| {
                let abs = root.join(a);
                abs.symlink_metadata().is_ok_and(|m| !m.is_dir())
            });
            if !blocked && !exists(&root.join(&relp)) {
                rand_file(rng, &root.join(&relp));
            }
        }
        5 if !files.is_empty() => {
            let f = root.join(pick(rng, &files));
            let mode = f.symlink_metadata().unwrap().permissions().mode() & 0o777;
            let mode = if mode & 0o100 != 0 { 0o644 } else { 0o755 };
            fs::set_permissions(&f, fs::Permissions::from_mode(mode)).unwrap();
        }
        6 if !files.is_empty() || !links.is_empty() => {
            let all: Vec<String> = files.iter().chain(&links).cloned().collect();
            let f = root.join(pick(rng, &all));
            let was_link = f.symlink_metadata().unwrap().file_type().is_symlink();
            fs::remove_file(&f).unwrap();
            if was_link {
                rand_file(rng, &f);
            } else {
                std::os::unix::fs::symlink(*pick(rng, LINK_TARGETS), &f).unwrap();
            }
        }
        7 if !files.is_empty() => {
            let rel = pick(rng, &files).clone();
            fs::remove_file(root.join(&rel)).unwrap();
            fs::create_dir(root.join(&rel)).unwrap();
            gen_dir(rng, root, &rel, 2);
        }
        8 if !dirs.is_empty() => {
            let d = root.join(pick(rng, &dirs));
            fs::remove_dir_all(&d).unwrap();
            rand_file(rng, &d);
        }
        9 if !dirs.is_empty() => {
            // A directory becomes a symlink to a directory outside the project that holds
            // files of the same names: writing through it would be caught.
            let d = root.join(pick(rng, &dirs));
            fs::remove_dir_all(&d).unwrap();
            let target = if rng.below(2) == 0 {
                w.outside.clone()
            } else {
                w.outside.join("sub")
            };
            std::os::unix::fs::symlink(target, &d).unwrap();
        }
        10 | 11 => ignored_and_nested(rng, w, k),
        _ => {
            // A new deep directory.
            let mut rel = format!("new{k}");
            for _ in 0..rng.below(4) {
                rel = join(&rel, pick::<&str>(rng, POOL));
            }
            fs::create_dir_all(root.join(&rel)).unwrap();
            gen_dir(rng, root, &rel, 2);
        }
    }
}

/// A fresh random project; returns snapshot A, after which random edits make the state B
/// (returned as well, tracked).
fn random_round(rng: &mut XorShift, w: &World) -> (String, String) {
    let root = &w.p.path;
    w.p.git_init();
    fs::write(root.join(".git/info/exclude"), "*.tmp\n").unwrap();
    fs::write(root.join(".gitignore"), "*.log\nbuild/\n").unwrap();
    gen_dir(rng, root, "", 0);
    for k in 0..rng.below(3) {
        ignored_and_nested(rng, w, k);
    }
    let a = w.p.track();
    for k in 0..1 + rng.below(10) {
        random_edit(rng, w, k + 10);
    }
    let b = w.p.track();
    (a, b)
}

/// Paths a revert may name: entries of either tree, their directories, and a path in neither;
/// leaving out paths below a file or symlink (of the current state), which cannot exist.
/// A path no round creates.
const ABSENT: &str = "no/such path";

fn revert_candidates(ta: &TreeMap, tb: &TreeMap, root: &Path) -> Vec<String> {
    let mut all = BTreeSet::new();
    for p in ta.keys().chain(tb.keys()) {
        for a in Path::new(p).ancestors() {
            if !a.as_os_str().is_empty() {
                all.insert(a.to_str().unwrap().to_string());
            }
        }
    }
    all.insert(ABSENT.to_string());
    all.into_iter()
        .filter(|s| {
            Path::new(s)
                .ancestors()
                .skip(1)
                .filter(|a| !a.as_os_str().is_empty())
                .all(|a| {
                    let a = a.to_str().unwrap();
                    !tb.contains_key(a)
                        && root.join(a).symlink_metadata().map_or(true, |m| m.is_dir())
                })
        })
        .collect()
}

fn within(p: &str, dir: &str) -> bool {
    p == dir || p.starts_with(&format!("{dir}/"))
}

/// For failure messages: what changed from A to B, and what the snapshot leaves out now.
fn describe(w: &World, a: &str, b: &str) -> String {
    let diff =
        w.sb.git_in(&w.store, ["diff-tree", "-r", "--name-status", a, b]);
    let skipped = w.p.track_json().json["skipped"].to_string();
    format!("A={a} B={b}; changes A->B:\n{diff}skipped now: {skipped}")
}

const ROUNDS: u64 = 25;

#[test]
fn property_restore_random_trees() {
    let mut rng = XorShift::from_time();
    for round in 0..ROUNDS {
        let sb = Sandbox::new();
        let w = World::new(&sb);
        let (a, b) = random_round(&mut rng, &w);
        let what = format!("round {round}: restore A\n{}", describe(&w, &a, &b));
        let (ta, tb) = (w.tree(&a), w.tree(&b));

        let before = w.snap();
        let o = restore(&w.p, &a, false);
        let after = w.snap();
        assert_eq!(o.hash, a, "{what}");
        check_outcome(&w, &what, &before, &after, &o, &b, &tb, &ta);
        w.assert_state(&a, &what);

        // And back: restore(undo) gives the tree from before the restore.
        let what = format!("round {round}: restore(undo)");
        let o2 = restore(&w.p, &o.undo, false);
        let back = w.snap();
        check_outcome(&w, &what, &after, &back, &o2, &a, &ta, &tb);
        w.assert_state(&b, &what);
        assert_disk_has(&back, "proj/", &w.nodes(&tb), &what);
        // Ignored files, .git, nested repos, the sibling dir: never touched by either.
        let both: BTreeSet<String> = proj_keys("proj/", &o.touched())
            .union(&proj_keys("proj/", &o2.touched()))
            .cloned()
            .collect();
        assert_untouched_except(&before, &back, &both, &what);
        w.p.assert_fsck_clean();
    }
}

#[test]
fn property_revert_random_paths() {
    let mut rng = XorShift::from_time();
    for round in 0..ROUNDS {
        let sb = Sandbox::new();
        let w = World::new(&sb);
        let (a, b) = random_round(&mut rng, &w);
        let (ta, tb) = (w.tree(&a), w.tree(&b));
        let candidates = revert_candidates(&ta, &tb, &w.p.path);
        let mut selected = BTreeSet::new();
        for _ in 0..1 + rng.below(4) {
            selected.insert(pick(&mut rng, &candidates).clone());
        }
        // A path in neither A nor the project: not_found, and nothing changes.
        if selected.remove(ABSENT) {
            let before = w.snap();
            let mut named: Vec<&str> = selected.iter().map(String::as_str).collect();
            named.push(ABSENT);
            expect_error(&w.p.rewind(revert_args(&a, &named)), "not_found");
            assert_untouched_except(&before, &w.snap(), &BTreeSet::new(), ABSENT);
            if selected.is_empty() {
                continue;
            }
        }
        // Name them in every accepted form.
        let args: Vec<OsString> = selected
            .iter()
            .map(|s| match rng.below(4) {
                0 => OsString::from(s),
                1 => OsString::from(format!("./{s}")),
                2 => w.p.path.join(s).into_os_string(),
                _ => OsString::from(format!("{s}/")),
            })
            .collect();
        let picks = |p: &str| selected.iter().any(|s| within(p, s));
        let what = format!(
            "round {round}: revert A -- {args:?}\n{}",
            describe(&w, &a, &b)
        );
        let expected: TreeMap = tb
            .iter()
            .filter(|(p, _)| !picks(p))
            .chain(ta.iter().filter(|(p, _)| picks(p)))
            .map(|(p, e)| (p.clone(), e.clone()))
            .collect();

        let before = w.snap();
        let o = revert(&w.p, &a, &args);
        let after = w.snap();
        assert_eq!(o.hash, a, "{what}");
        check_outcome(&w, &what, &before, &after, &o, &b, &tb, &expected);
        let now = w.p.track();
        assert_eq!(
            w.tree(&now),
            expected,
            "{what}: the project's snapshot after the revert"
        );
        let oracle = w.p.git_tree();
        assert_eq!(oracle.id, now, "{what}: git's tree of the project differs");

        let what = format!("round {round}: restore(undo) after revert");
        let o2 = restore(&w.p, &o.undo, false);
        let back = w.snap();
        check_outcome(&w, &what, &after, &back, &o2, &now, &expected, &tb);
        w.assert_state(&b, &what);
        w.p.assert_fsck_clean();
    }
}

// ---------------------------------------------------------------------------
// Cases
// ---------------------------------------------------------------------------

#[test]
fn revert_deletes_a_new_file_and_absent_paths_are_not_found() {
    let sb = Sandbox::new();
    let w = World::new(&sb);
    w.p.file("x.txt", "A\n").file("dir/y.txt", "A\n");
    let a = w.p.track();
    w.p.file("new.txt", "new\n")
        .file("x.txt", "B\n")
        .file("dir/new2.txt", "n\n");

    let o = revert(&w.p, &a, &["new.txt"]);
    o.assert_clean();
    assert_eq!(
        o.deleted,
        BTreeSet::from(["new.txt".to_string()]),
        "{}",
        o.run
    );
    assert!(o.written.is_empty(), "{}", o.run);
    assert!(!exists(&w.p.join("new.txt")));
    assert_eq!(w.p.read("x.txt"), b"B\n", "x.txt was not named: it stays");
    assert!(exists(&w.p.join("dir/new2.txt")));
    let saved = w.sb.git_in(
        &w.store,
        ["cat-file", "blob", &format!("{}:new.txt", o.undo)],
    );
    assert_eq!(
        saved, "new\n",
        "the deleted file's bytes are in the undo tree"
    );

    // A path in neither the snapshot nor the project is not_found (issue 17: it used to
    // "succeed" with nothing written), and nothing changes, not even for the paths named with it.
    let before = w.snap();
    for absent in ["never-existed", "no/such/deep/path", "dir/nope"] {
        let run = w.p.rewind(revert_args(&a, &["x.txt", absent]));
        let json = expect_error(&run, "not_found");
        let message = json["error"]["message"].as_str().unwrap();
        assert!(message.contains(absent), "names the path: {run}");
    }
    assert_untouched_except(
        &before,
        &w.snap(),
        &BTreeSet::new(),
        "revert of absent paths",
    );

    // A directory: its new file goes.
    let o = revert(&w.p, &a, &["dir"]);
    o.assert_clean();
    assert_eq!(
        o.deleted,
        BTreeSet::from(["dir/new2.txt".to_string()]),
        "{}",
        o.run
    );
    assert_eq!(w.p.read("dir/y.txt"), b"A\n");
    w.p.assert_fsck_clean();
}

#[test]
fn restore_removes_deep_new_directories_but_keeps_ignored_files() {
    let sb = Sandbox::new();
    let w = World::new(&sb);
    w.p.file("keep.txt", "A\n").file(".gitignore", "*.log\n");
    let a = w.p.track();
    w.p.file("a/b/c/d/e/f.txt", "deep\n")
        .file("a/b/x.txt", "x\n")
        .file("q/r/s/t/u/v.txt", "v\n")
        .file("w/v/new.txt", "new\n")
        .file("w/v/kept.log", "ignored: stays\n")
        .file("keep.txt", "B\n");
    let before = w.snap();
    let o = restore(&w.p, &a, false);
    o.assert_clean();
    let after = w.snap();
    assert!(!exists(&w.p.join("a")), "a/ must be gone entirely");
    assert!(!exists(&w.p.join("q")), "q/ must be gone entirely");
    assert_eq!(
        fs::read(w.p.join("w/v/kept.log")).unwrap(),
        b"ignored: stays\n"
    );
    assert!(!exists(&w.p.join("w/v/new.txt")));
    assert_no_dir_left_empty(&before, &after, "proj/", "restore");
    assert_untouched_except(
        &before,
        &after,
        &proj_keys("proj/", &o.touched()),
        "restore",
    );
    w.assert_state(&a, "after restore");

    // The same through revert of the directories.
    restore(&w.p, &o.undo, false).assert_clean();
    let before = w.snap();
    let o = revert(&w.p, &a, &["a", "q/r"]);
    o.assert_clean();
    let after = w.snap();
    assert!(
        !exists(&w.p.join("a")) && !exists(&w.p.join("q")),
        "a/ and q/ must be gone: {}",
        o.run
    );
    assert!(exists(&w.p.join("w/v/new.txt")), "w/ was not named");
    assert_no_dir_left_empty(&before, &after, "proj/", "revert");
    w.p.assert_fsck_clean();
}

/// r60 F2: snapshot A taken while the user's excludes file ignored `*.env`; the rule gone, a
/// new `.env`, then `restore A`: it deleted `.env`, judging what A could see by the rules as
/// they are now (A's own would have hidden it). Likewise a nested repository's `info/exclude`.
/// A snapshot records a digest of the rules from outside; while they differ, a path the target
/// lacks there is kept (said so), and once they are back, deleted as before.
#[test]
fn restore_keeps_a_new_file_when_the_rules_outside_the_project_changed_since_the_target() {
    let sb = Sandbox::new();
    sb.write_xdg_git_file("ignore", "*.env\n");
    let p = sb.project("p");
    p.file("a.txt", "a\n");
    let a = p.track();
    sb.write_xdg_git_file("ignore", "");
    p.file(".env", "NEW\n");
    let run = p.rewind(["--json", "restore", &a]);
    run.assert_success();
    let json = one_json(&run);
    assert_eq!(json["kept"], serde_json::json!([".env"]), "{run}");
    assert_eq!(fs::read(p.join(".env")).unwrap(), b"NEW\n", "{run}");
    sb.write_xdg_git_file("ignore", "*.env\n");
    p.file("b.txt", "b\n");
    let run = p.rewind(["--json", "restore", &a]);
    let json = one_json(&run);
    assert_eq!(json["deleted"], serde_json::json!(["b.txt"]), "{run}");
    assert_eq!(fs::read(p.join(".env")).unwrap(), b"NEW\n", "{run}");

    // A nested repository's `info/exclude` (its files held: `rewind.nestedRepos = include`).
    let q = sb.project("q");
    q.file("a.txt", "a\n").file("sub/f", "f\n");
    sb.git(Some(&q.join("sub")), ["init", "-q"]);
    fs::write(q.join("sub/.git/info/exclude"), "*.tmp\n").unwrap();
    sb.git(Some(&q.join("sub")), ["add", "f"]);
    sb.git(Some(&q.join("sub")), ["commit", "-qm", "f"]);
    let a = q.track();
    fs::write(q.join("sub/.git/info/exclude"), "").unwrap();
    q.file("sub/y.tmp", "T\n");
    let run = q.rewind(["--json", "restore", &a]);
    run.assert_success();
    let json = one_json(&run);
    assert_eq!(json["kept"], serde_json::json!(["sub/y.tmp"]), "{run}");
    assert_eq!(fs::read(q.join("sub/y.tmp")).unwrap(), b"T\n", "{run}");
}

/// r60 F1: `restore` of a directory's tree inside a snapshot (`git rev-parse $A:d`, or an id
/// picked from `git ls-tree`) took it as the whole project: every other file deleted, `d`'s
/// files moved to the root, exit 0. Only a tree a snapshot took is restored or reverted to.
#[test]
fn restore_and_revert_refuse_a_directorys_tree_that_no_snapshot_took() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("a", "a\n").file("d/b", "b\n");
    let a = p.track();
    let sub = p.store_git(["rev-parse", &format!("{a}:d")]);
    let sub = sub.trim();
    for args in [
        vec!["--json", "restore", sub],
        vec!["--json", "revert", sub, "--", "b"],
    ] {
        let run = p.rewind(&args);
        run.assert_code(1);
        let json = one_json(&run);
        assert_eq!(json["error"]["code"], "not_found", "{run}");
    }
    assert_eq!(fs::read(p.join("a")).unwrap(), b"a\n");
    assert_eq!(fs::read(p.join("d/b")).unwrap(), b"b\n");
    assert!(!p.join("b").exists());
    p.rewind(["restore", &a]).assert_success();
}

/// r61 F1: a `.gitignore` the snapshot left out (it ignores itself, or `info/exclude` names
/// it) hid `secret.env`; the user edited it, then `restore A` (or an undo) deleted
/// `secret.env`: A's rules were judged without that file's. A left-out `.gitignore` is
/// recorded, and what lies below its directory is kept.
#[test]
fn restore_keeps_what_a_gitignore_the_snapshot_left_out_hid() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.git_init();
    p.file(".gitignore", ".gitignore\nsecret.env\n")
        .file("secret.env", "SECRET\n")
        .file("a.txt", "a\n");
    let a = p.track();
    p.file(".gitignore", ".gitignore\n").file("a.txt", "a2\n");
    let run = p.rewind(["--json", "restore", &a]);
    run.assert_success();
    let json = one_json(&run);
    assert_eq!(json["kept"], serde_json::json!(["secret.env"]), "{run}");
    assert_eq!(
        fs::read(p.join("secret.env")).unwrap(),
        b"SECRET\n",
        "{run}"
    );
    assert_eq!(fs::read(p.join("a.txt")).unwrap(), b"a\n", "{run}");

    // The `.gitignore` hidden by `info/exclude`, and an undo of the turn that emptied it.
    let q = sb.project("q");
    q.git_init();
    fs::write(q.join(".git/info/exclude"), ".gitignore\n").unwrap();
    q.file(".gitignore", "secret.env\n")
        .file("secret.env", "SECRET\n")
        .file("a.txt", "a\n");
    q.rewind(["turn", "begin", "--session", "s", "--turn", "1"])
        .assert_success();
    q.file(".gitignore", "").file("a.txt", "a2\n");
    q.rewind(["turn", "end", "--session", "s", "--turn", "1"])
        .assert_success();
    let run = q.rewind(["--json", "undo", "--session", "s"]);
    run.assert_success();
    assert_eq!(
        fs::read(q.join("secret.env")).unwrap(),
        b"SECRET\n",
        "{run}"
    );
    assert_eq!(fs::read(q.join("a.txt")).unwrap(), b"a\n", "{run}");
}

const ODD_NAMES: &[&str] = &[
    "-rf",
    "--help",
    "-",
    "--",
    "ünïcødé file.txt",
    "日本語/ファイル.txt",
    "with space/a b.txt",
    "-dir/-n",
    " lead",
    "trail ",
    "emoji 😀.md",
];

#[test]
fn odd_names_restore_and_revert() {
    let sb = Sandbox::new();
    let w = World::new(&sb);
    for n in ODD_NAMES {
        w.p.file(n, format!("A {n}\n"));
    }
    let a = w.p.track();
    let new_names = ["-x new", "新しい/ファイル", "--version", "sp ace/-q"];
    let mutate = |w: &World| {
        for n in ODD_NAMES {
            w.p.file(n, format!("B {n}\n"));
        }
        for n in new_names {
            w.p.file(n, "new\n");
        }
    };
    mutate(&w);
    let b = w.p.track();
    let (ta, tb) = (w.tree(&a), w.tree(&b));

    // revert, every name after `--` (one of them absolute)
    let mut args: Vec<OsString> = ODD_NAMES
        .iter()
        .chain(&new_names)
        .map(OsString::from)
        .collect();
    args[4] = w.p.path.join(ODD_NAMES[4]).into_os_string();
    let before = w.snap();
    let o = revert(&w.p, &a, &args);
    let after = w.snap();
    check_outcome(&w, "revert odd names", &before, &after, &o, &b, &tb, &ta);
    w.assert_state(&a, "revert odd names");

    // restore
    mutate(&w);
    assert_eq!(w.p.track(), b);
    let before = w.snap();
    let o = restore(&w.p, &a, false);
    let after = w.snap();
    check_outcome(&w, "restore odd names", &before, &after, &o, &b, &tb, &ta);
    w.assert_state(&a, "restore odd names");
    w.p.assert_fsck_clean();
}

#[test]
fn revert_140_modified_and_140_new_files_at_once() {
    let sb = Sandbox::new();
    let w = World::new(&sb);
    for i in 0..140 {
        w.p.file(format!("m/f{i:03}.txt"), format!("A {i}\n"));
    }
    w.p.file("untouched.txt", "A\n");
    let a = w.p.track();
    let mut args = Vec::new();
    for i in 0..140 {
        w.p.file(format!("m/f{i:03}.txt"), format!("B {i}\n"));
        let new = format!("{}/n{i:03}.txt", ["m", "n", "n/deep"][i % 3]);
        w.p.file(&new, "new\n");
        args.push(format!("m/f{i:03}.txt"));
        args.push(new);
    }
    w.p.file("untouched.txt", "B\n");
    let b = w.p.track();
    let (ta, tb) = (w.tree(&a), w.tree(&b));
    let before = w.snap();
    let o = revert(&w.p, &a, &args);
    let after = w.snap();
    let mut expected = ta.clone();
    expected.insert("untouched.txt".into(), tb["untouched.txt"].clone());
    check_outcome(
        &w,
        "revert 280 paths",
        &before,
        &after,
        &o,
        &b,
        &tb,
        &expected,
    );
    assert_eq!(o.written.len(), 140);
    assert_eq!(o.deleted.len(), 140);
    assert!(!exists(&w.p.join("n")), "n/ held only new files: removed");
    assert_eq!(w.p.read("untouched.txt"), b"B\n");
    w.p.assert_fsck_clean();
}

/// A with x (file), y/ (dir), z (symlink), w/ (dir); B swaps each kind.
fn swap_world(w: &World) -> (String, String) {
    w.p.file("x", "A x\n")
        .file("y/a", "A y/a\n")
        .file("y/sub/b", "A y/sub/b\n")
        .symlink("z", "y")
        .file("w/1", "A w/1\n")
        .exec("v", "#!/bin/sh\n")
        .file("stay.txt", "same\n");
    let a = w.p.track();
    w.p.remove("x")
        .file("x/1", "B x/1\n")
        .file("x/deep/2", "B x/deep/2\n");
    w.p.remove("y").file("y", "B y is a file\n");
    w.p.remove("z").file("z/k", "B z/k\n");
    w.p.remove("w").symlink("w", "x");
    w.p.remove("v").symlink("v", "stay.txt");
    let b = w.p.track();
    (a, b)
}

#[test]
fn file_dir_swaps_restore() {
    let sb = Sandbox::new();
    let w = World::new(&sb);
    let (a, b) = swap_world(&w);
    let (ta, tb) = (w.tree(&a), w.tree(&b));
    let before = w.snap();
    let o = restore(&w.p, &a, false);
    let after = w.snap();
    check_outcome(
        &w,
        "restore across file/dir swaps",
        &before,
        &after,
        &o,
        &b,
        &tb,
        &ta,
    );
    w.assert_state(&a, "restore across file/dir swaps");

    let o2 = restore(&w.p, &o.undo, false);
    let back = w.snap();
    check_outcome(
        &w,
        "restore(undo) across file/dir swaps",
        &after,
        &back,
        &o2,
        &a,
        &ta,
        &tb,
    );
    w.assert_state(&b, "restore(undo) across file/dir swaps");
    w.p.assert_fsck_clean();
}

#[test]
fn file_dir_swaps_revert() {
    let sb = Sandbox::new();
    let w = World::new(&sb);
    let (a, b) = swap_world(&w);
    let (ta, tb) = (w.tree(&a), w.tree(&b));
    // One at a time, each a different swap.
    let mut prev = b.clone();
    let mut prev_tree = tb.clone();
    let mut named: Vec<&str> = Vec::new();
    for path in ["x", "y", "z", "w", "v"] {
        named.push(path);
        let expected: TreeMap = tb
            .iter()
            .filter(|(p, _)| !named.iter().any(|s| within(p, s)))
            .chain(
                ta.iter()
                    .filter(|(p, _)| named.iter().any(|s| within(p, s))),
            )
            .map(|(p, e)| (p.clone(), e.clone()))
            .collect();
        let what = format!("revert A -- {path}");
        let before = w.snap();
        let o = revert(&w.p, &a, &[path]);
        let after = w.snap();
        check_outcome(&w, &what, &before, &after, &o, &prev, &prev_tree, &expected);
        prev = w.p.track();
        prev_tree = w.tree(&prev);
        assert_eq!(prev_tree, expected, "{what}");
    }
    w.assert_state(&a, "all swaps reverted");
    w.p.assert_fsck_clean();
}

#[test]
fn revert_rejects_paths_escaping_the_project() {
    let sb = Sandbox::new();
    let w = World::new(&sb);
    w.p.file("good.txt", "A\n")
        .file("out/file", "A out/file\n")
        .file("sub/x", "A\n");
    let a = w.p.track();
    w.p.file("good.txt", "B\n")
        .remove("out")
        .symlink("out", &w.outside)
        .file("sub/x", "B\n");
    // A second outside place, reached through a link to an absolute temp dir.
    let elsewhere = tempfile::Builder::new()
        .prefix("rewind-x-")
        .tempdir()
        .unwrap();
    write_mode(&elsewhere.path().join("file"), b"ELSEWHERE\n", 0o644);
    w.p.symlink("out2", elsewhere.path());
    let proj = w.p.path.to_str().unwrap().to_string();
    let bad: Vec<Vec<String>> = vec![
        vec!["../outside/file".into()],
        vec!["..".into()],
        vec!["sub/../../outside/a".into()],
        vec!["/etc/passwd".into()],
        vec![w.outside.join("a").to_str().unwrap().into()],
        vec![format!("{proj}/../outside/file")],
        vec!["out/file".into()],
        vec!["out/sub/a".into()],
        vec![format!("{proj}/out/file")],
        vec!["out2/file".into()],
        vec!["out/".into(), "good.txt".into(), "out/file".into()],
        // one bad path among good ones: nothing is done
        vec!["good.txt".into(), "sub/x".into(), "../outside/b".into()],
    ];
    let outside_elsewhere = snap(elsewhere.path());
    for paths in &bad {
        let before = fs_snapshot(&w.world);
        let run = w.p.rewind(revert_args(&a, paths));
        expect_error(&run, "bad_path");
        assert_same_snapshot(
            &before,
            &fs_snapshot(&w.world),
            &format!("the world after `revert A -- {paths:?}`"),
        );
    }
    assert_eq!(
        snap(elsewhere.path()),
        outside_elsewhere,
        "{} was modified",
        elsewhere.path().display()
    );

    // The project's .git is never written, whatever the path.
    w.p.git_init();
    let before = w.snap();
    let run = w.p.rewind(revert_args(&a, &[".git/config"]));
    assert_no_panic(&run);
    assert_untouched_except(
        &before,
        &w.snap(),
        &BTreeSet::new(),
        "revert -- .git/config",
    );

    // The symlink itself is inside the project: reverting it replaces the link, not its target.
    let before = w.snap();
    let o = revert(&w.p, &a, &["out"]);
    o.assert_clean();
    assert!(
        fs::symlink_metadata(w.p.join("out")).unwrap().is_dir(),
        "out is a directory again"
    );
    assert_eq!(w.p.read("out/file"), b"A out/file\n");
    assert_eq!(o.deleted, BTreeSet::from(["out".to_string()]), "{}", o.run);
    assert_eq!(
        o.written,
        BTreeSet::from(["out/file".to_string()]),
        "{}",
        o.run
    );
    let after = w.snap();
    assert_untouched_except(
        &before,
        &after,
        &proj_keys("proj/", &o.touched()),
        "revert -- out",
    );
    assert_eq!(snap(elsewhere.path()), outside_elsewhere);
    w.p.assert_fsck_clean();
}

#[test]
fn newly_ignored_file_is_a_conflict_unless_forced() {
    let sb = Sandbox::new();
    let w = World::new(&sb);
    w.p.git_init();
    w.p.file("cfg.local", "A cfg\n").file("keep.txt", "A\n");
    let a = w.p.track();
    // Ignored from now on (a rule outside any snapshot), and changed.
    fs::write(w.p.join(".git/info/exclude"), "cfg.local\n").unwrap();
    w.p.file("cfg.local", "B cfg: precious local secret\n")
        .file("keep.txt", "B\n");

    let before = w.snap();
    let o = restore(&w.p, &a, false);
    let after = w.snap();
    assert_eq!(
        o.conflicts,
        BTreeSet::from(["cfg.local".to_string()]),
        "{}",
        o.run
    );
    assert!(o.failed.is_empty(), "{}", o.run);
    assert_eq!(
        o.written,
        BTreeSet::from(["keep.txt".to_string()]),
        "{}",
        o.run
    );
    assert_eq!(w.p.read("keep.txt"), b"A\n");
    assert_untouched_except(
        &before,
        &after,
        &proj_keys("proj/", &o.touched()),
        "restore with a conflict",
    );

    // The same through revert.
    let o = revert(&w.p, &a, &["cfg.local"]);
    assert_eq!(
        o.conflicts,
        BTreeSet::from(["cfg.local".to_string()]),
        "{}",
        o.run
    );
    assert_eq!(w.p.read("cfg.local"), b"B cfg: precious local secret\n");

    // --force: overwritten, and its bytes are in the undo tree first.
    let o = restore(&w.p, &a, true);
    assert!(o.conflicts.is_empty() && o.failed.is_empty(), "{}", o.run);
    assert!(o.written.contains("cfg.local"), "{}", o.run);
    assert_eq!(w.p.read("cfg.local"), b"A cfg\n");
    let saved = w.sb.git_in(
        &w.store,
        ["cat-file", "blob", &format!("{}:cfg.local", o.undo)],
    );
    assert_eq!(
        saved, "B cfg: precious local secret\n",
        "the forced file's bytes must be in the undo tree"
    );
    assert!(
        undo_points(w.sb, &w.store).first() == Some(&o.undo),
        "the undo point is recorded"
    );

    // restore(undo) brings them back (the file is still ignored, so this needs --force too).
    let o2 = restore(&w.p, &o.undo, true);
    assert!(o2.failed.is_empty(), "{}", o2.run);
    assert_eq!(w.p.read("cfg.local"), b"B cfg: precious local secret\n");
    w.p.assert_fsck_clean();
}

#[test]
fn file_past_the_size_cap() {
    let sb = Sandbox::new();
    let w = World::new(&sb);
    set_max_file_size(w.sb, &w.store, 1000);
    w.p.file("big.bin", filler(500, 1)).file("other.txt", "A\n");
    let a = w.p.track();

    // Grown past the cap while in the previous snapshot: it stays in, so it is simply restored,
    // its big bytes kept in the undo tree.
    let big = filler(5000, 2);
    w.p.file("big.bin", &big).file("other.txt", "B\n");
    let o = restore(&w.p, &a, false);
    o.assert_clean();
    assert_eq!(w.p.read("big.bin"), filler(500, 1));
    let saved = w.sb.git_in_run(
        &w.store,
        ["cat-file", "blob", &format!("{}:big.bin", o.undo)],
    );
    assert_eq!(
        saved.stdout_bytes, big,
        "the grown file's bytes must be in the undo tree"
    );

    // New past the cap (absent from the previous snapshot): left out of snapshots, so restore
    // leaves it alone and reports it...
    w.p.remove("big.bin");
    w.p.track();
    w.p.file("big.bin", &big).file("other.txt", "C\n");
    w.p.track_json().assert_skipped("big.bin", "too_large");
    let before = w.snap();
    let o = restore(&w.p, &a, false);
    let after = w.snap();
    assert_eq!(
        o.conflicts,
        BTreeSet::from(["big.bin".to_string()]),
        "{}",
        o.run
    );
    assert_eq!(w.p.read("big.bin"), big);
    assert_eq!(w.p.read("other.txt"), b"A\n");
    assert_untouched_except(
        &before,
        &after,
        &proj_keys("proj/", &o.touched()),
        "restore past the cap",
    );

    // ... unless --force, which saves it first.
    let o = restore(&w.p, &a, true);
    assert!(o.conflicts.is_empty() && o.failed.is_empty(), "{}", o.run);
    assert_eq!(w.p.read("big.bin"), filler(500, 1));
    let saved = w.sb.git_in_run(
        &w.store,
        ["cat-file", "blob", &format!("{}:big.bin", o.undo)],
    );
    assert_eq!(
        saved.stdout_bytes, big,
        "the forced file's bytes must be in the undo tree"
    );
    let o2 = restore(&w.p, &o.undo, true);
    assert!(o2.failed.is_empty(), "{}", o2.run);
    assert_eq!(
        w.p.read("big.bin"),
        big,
        "restore(undo) brings the big file back"
    );
    w.p.assert_fsck_clean();
}

#[test]
fn crlf_bytes_come_back_exactly_despite_gitattributes() {
    let sb = Sandbox::new();
    let w = World::new(&sb);
    w.p.git_init();
    w.p.git(["config", "core.autocrlf", "true"]);
    let files: &[(&str, &[u8])] = &[
        ("crlf.txt", b"one\r\ntwo\r\n"),
        ("lf.txt", b"one\ntwo\n"),
        ("mixed.txt", b"a\r\nb\nc\rd\r\n\r\n"),
        ("lone-cr.txt", b"a\rb\r"),
        ("bin.dat", b"\x00\r\n\x00\n\r"),
        ("sub/nested.txt", b"x\r\n"),
    ];
    w.p.file(".gitattributes", "* text=auto eol=crlf\n");
    for (n, c) in files {
        w.p.file(n, c);
    }
    let a = w.p.track();
    w.assert_state(&a, "snapshot A");
    for (n, c) in files {
        let flipped: Vec<u8> = if c.contains(&b'\r') {
            c.iter().copied().filter(|b| *b != b'\r').collect()
        } else {
            c.iter()
                .flat_map(|b| {
                    if *b == b'\n' {
                        vec![b'\r', b'\n']
                    } else {
                        vec![*b]
                    }
                })
                .collect()
        };
        w.p.file(n, flipped);
    }
    w.p.remove("mixed.txt");
    let o = restore(&w.p, &a, false);
    o.assert_clean();
    for (n, c) in files {
        assert_eq!(w.p.read(n), *c, "{n} must be byte-identical");
    }
    w.assert_state(&a, "after restore");

    w.p.file("crlf.txt", "one\ntwo\n");
    let o = revert(&w.p, &a, &["crlf.txt"]);
    o.assert_clean();
    assert_eq!(w.p.read("crlf.txt"), b"one\r\ntwo\r\n");
    w.p.assert_fsck_clean();
}

#[test]
fn restore_then_undo_gives_back_the_start() {
    let sb = Sandbox::new();
    let w = World::new(&sb);
    w.p.file("a.txt", "A\n")
        .exec("run.sh", "#!/bin/sh\n")
        .symlink("l", "a.txt")
        .file("d/e/f", "A\n");
    let a = w.p.track();
    w.p.file("a.txt", "B\n")
        .chmod("run.sh", 0o644)
        .remove("l")
        .file("l", "now a file\n")
        .remove("d")
        .file("new/deep/file", "new\n")
        .file("d", "d is a file now\n");
    let start = w.p.track();
    let start_snap = w.snap();
    let o = restore(&w.p, &a, false);
    w.assert_state(&a, "restore A");
    let o2 = restore(&w.p, &o.undo, false);
    o2.assert_clean();
    w.assert_state(&start, "restore(undo)");
    let end_snap = w.snap();
    let nodes = |s: &Snap| -> BTreeMap<String, Node> {
        s.iter()
            .filter_map(|(k, e)| Node::of_fs(e).map(|n| (k.clone(), n)))
            .collect()
    };
    assert_eq!(
        nodes(&start_snap),
        nodes(&end_snap),
        "restore then restore(undo) must give back every file"
    );
    w.p.assert_fsck_clean();
}

#[test]
fn corrupt_or_missing_object_stops_the_restore_before_any_change() {
    let sb = Sandbox::new();
    let w = World::new(&sb);
    w.p.file("f.txt", "first\n")
        .file("g.txt", "g\n")
        .file("h/i.txt", "i\n");
    w.p.track(); // the first snapshot (written as a pack)
    w.p.file("f.txt", "content only snapshot A has\n");
    let a = w.p.track();
    let ta = w.tree(&a);
    let oid = ta["f.txt"].1.clone();
    let loose = w.store.join("objects").join(&oid[..2]).join(&oid[2..]);
    assert!(
        loose.is_file(),
        "precondition: {oid} is a loose object at {}",
        loose.display()
    );
    let good = fs::read(&loose).unwrap();
    // Changes a restore to A would make: f.txt rewritten, g.txt rewritten, new deleted, h/ gone.
    w.p.file("f.txt", "B\n")
        .file("g.txt", "B\n")
        .file("new.txt", "new\n")
        .remove("h");

    let damage: [(&str, Option<&[u8]>); 3] = [
        ("garbage", Some(b"this is not a zlib stream at all")),
        ("truncated", Some(&good[..good.len() / 2])),
        ("missing", None),
    ];
    for (how, bytes) in damage {
        match bytes {
            Some(b) => write_mode(&loose, b, 0o444),
            None => fs::remove_file(&loose).unwrap(),
        }
        for args in [
            revert_args(&a, &["g.txt", "f.txt", "new.txt"]),
            vec!["--json".into(), "restore".into(), a.clone().into()],
        ] {
            let before = fs_snapshot(&w.world);
            let run = w.p.rewind(&args);
            let json = expect_error(&run, "object");
            let msg = json["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            assert!(
                msg.contains(&oid) && msg.contains("f.txt"),
                "{how}: the error must name the object and the path: {run}"
            );
            assert!(
                run.stderr.contains(&oid),
                "{how}: stderr names the object: {run}"
            );
            assert_same_snapshot(
                &before,
                &fs_snapshot(&w.world),
                &format!("{how}: the world after a failed {args:?}"),
            );
        }
    }
    // An id the store does not have: an error, nothing touched.
    let before = fs_snapshot(&w.world);
    let run = w.p.rewind([
        "--json",
        "restore",
        "0123456789012345678901234567890123456789",
    ]);
    assert_no_panic(&run);
    run.assert_code(1);
    assert_same_snapshot(
        &before,
        &fs_snapshot(&w.world),
        "the world after restoring an unknown id",
    );

    write_mode(&loose, &good, 0o444);
    let o = restore(&w.p, &a, false);
    o.assert_clean();
    w.assert_state(&a, "restore after repair");
    w.p.assert_fsck_clean();
}

#[test]
fn exec_bits_are_restored() {
    let sb = Sandbox::new();
    let w = World::new(&sb);
    w.p.exec("run.sh", "#!/bin/sh\necho hi\n")
        .file("plain.txt", "plain\n")
        .exec("mode-only.sh", "#!/bin/sh\n")
        .exec("gone.sh", "#!/bin/sh\n")
        .exec("dir/tool", "#!/bin/sh\n");
    let a = w.p.track();
    w.p.chmod("run.sh", 0o644)
        .file("plain.txt", "changed\n")
        .chmod("plain.txt", 0o755)
        .chmod("mode-only.sh", 0o600)
        .remove("gone.sh")
        .remove("dir");
    let o = restore(&w.p, &a, false);
    o.assert_clean();
    for (n, exec) in [
        ("run.sh", true),
        ("plain.txt", false),
        ("mode-only.sh", true),
        ("gone.sh", true),
        ("dir/tool", true),
    ] {
        let mode = fs::metadata(w.p.join(n)).unwrap().permissions().mode();
        assert_eq!(mode & 0o100 != 0, exec, "{n}: mode {mode:o}");
        if !exec {
            assert_eq!(mode & 0o111, 0, "{n}: no exec bit at all, mode {mode:o}");
        }
    }
    assert!(
        o.written.contains("mode-only.sh"),
        "a mode-only change is a change: {}",
        o.run
    );
    w.assert_state(&a, "after restore");
    w.p.assert_fsck_clean();
}

#[test]
fn symlinks_are_restored_as_symlinks() {
    let sb = Sandbox::new();
    let w = World::new(&sb);
    let victim = w.outside.join("a");
    w.p.file("target.txt", "target\n")
        .symlink("link", "target.txt")
        .symlink("dangling", "no/such/thing")
        .symlink("dirlink", "sub")
        .file("sub/s.txt", "s\n")
        .symlink("abs", "/etc/passwd")
        .file("through", "A: a plain file\n")
        .symlink("deleted-link", "target.txt");
    let a = w.p.track();
    let passwd = fs::read("/etc/passwd").ok();
    w.p.remove("link")
        .file("link", "target.txt")
        .remove("dangling")
        .symlink("dangling", "elsewhere")
        .remove("dirlink")
        .file("dirlink/x", "dir now\n")
        .remove("abs")
        .file("abs", "now a file\n")
        .remove("through")
        .symlink("through", &victim)
        .remove("deleted-link");
    let before = w.snap();
    let o = restore(&w.p, &a, false);
    o.assert_clean();
    let after = w.snap();
    for (n, t) in [
        ("link", "target.txt"),
        ("dangling", "no/such/thing"),
        ("dirlink", "sub"),
        ("abs", "/etc/passwd"),
        ("deleted-link", "target.txt"),
    ] {
        let md = fs::symlink_metadata(w.p.join(n)).unwrap();
        assert!(md.file_type().is_symlink(), "{n} must be a symlink again");
        assert_eq!(
            fs::read_link(w.p.join(n)).unwrap(),
            Path::new(t),
            "{n}'s target"
        );
    }
    let md = fs::symlink_metadata(w.p.join("through")).unwrap();
    assert!(
        md.is_file(),
        "through is a regular file again (the link replaced, not followed)"
    );
    assert_eq!(w.p.read("through"), b"A: a plain file\n");
    assert_eq!(fs::read("/etc/passwd").ok(), passwd);
    assert_untouched_except(
        &before,
        &after,
        &proj_keys("proj/", &o.touched()),
        "restore of symlinks",
    );
    w.assert_state(&a, "after restore");
    w.p.assert_fsck_clean();
}

#[test]
fn unwritable_paths_go_to_failed_and_the_rest_continues() {
    let sb = Sandbox::new();
    let w = World::new(&sb);
    w.p.git_init();
    w.p.file("d/f", "A d/f\n")
        .file("g.txt", "A\n")
        .file("h.txt", "A h\n");
    let a = w.p.track();
    // d/ becomes an ignored FILE: d/f cannot be written without destroying it. Something
    // outside the snapshot is in the way, so d/f is a conflict and stays unwritten.
    fs::write(w.p.join(".git/info/exclude"), "/d\n").unwrap();
    w.p.remove("d")
        .file("d", "ignored file in the way\n")
        .file("g.txt", "B\n");
    let before = w.snap();
    let o = restore(&w.p, &a, false);
    let after = w.snap();
    assert!(o.failed_paths().is_empty(), "{}", o.run);
    assert!(
        o.run.stdout.contains("\"conflicts\":[\"d/f\"]"),
        "d/f is a conflict: {}",
        o.run
    );
    assert_eq!(w.p.read("g.txt"), b"A\n", "the others continue");
    assert_eq!(w.p.read("d"), b"ignored file in the way\n");
    let touched: BTreeSet<String> = proj_keys("proj/", &o.touched());
    assert!(!touched.contains("proj/d"));
    assert_untouched_except(&before, &after, &touched, "partial restore");

    // chattr +i: a file that can be neither replaced nor deleted.
    w.p.remove("d");
    fs::write(w.p.join(".git/info/exclude"), "").unwrap();
    restore(&w.p, &a, false).assert_clean();
    w.p.file("h.txt", "B h\n")
        .file("g.txt", "B\n")
        .file("new-file.txt", "new\n");
    let locked = (
        Immutable::set(&w.p.join("h.txt")),
        Immutable::set(&w.p.join("new-file.txt")),
    );
    let before = w.snap();
    let o = restore(&w.p, &a, false);
    let after = w.snap();
    assert_eq!(
        o.failed_paths(),
        BTreeSet::from(["h.txt".to_string(), "new-file.txt".to_string()]),
        "{}",
        o.run
    );
    assert_eq!(w.p.read("h.txt"), b"B h\n");
    assert!(exists(&w.p.join("new-file.txt")));
    assert_eq!(w.p.read("g.txt"), b"A\n", "the others continue");
    assert_untouched_except(
        &before,
        &after,
        &proj_keys("proj/", &BTreeSet::from(["g.txt".to_string()])),
        "restore with immutable files",
    );
    drop(locked);
    restore(&w.p, &a, false).assert_clean();
    w.assert_state(&a, "after chattr -i");
    w.p.assert_fsck_clean();
}

#[test]
fn nested_repository_is_never_written() {
    let sb = Sandbox::new();
    let w = World::new(&sb);
    w.p.file("sub/file", "A\n")
        .file("sub/other", "A other\n")
        .file("top.txt", "A\n");
    let a = w.p.track();
    w.sb.git(Some(&w.p.join("sub")), ["init", "-q"]);
    w.p.file("sub/file", "B: the nested repo's own work\n")
        .remove("sub/other")
        .file("top.txt", "B\n");
    let nested_before = fs_snapshot(&w.p.join("sub"));
    let o = restore(&w.p, &a, false);
    assert_eq!(w.p.read("top.txt"), b"A\n");
    assert_same_snapshot(
        &nested_before,
        &fs_snapshot(&w.p.join("sub")),
        &format!("the nested repository (outcome {})", o.run.stdout.trim()),
    );
    w.p.assert_fsck_clean();
}

#[test]
fn symlink_to_outside_replaced_by_a_directory_even_with_force() {
    // B has `out -> <outside dir>` where A has a real directory out/ with the same file name as
    // the outside dir. Nothing outside the project may be read or written, and the undo tree is
    // the project as it was (with the symlink).
    let sb = Sandbox::new();
    let w = World::new(&sb);
    w.p.file("out/file", "A out/file\n").file("keep", "k\n");
    let a = w.p.track();
    w.p.remove("out").symlink("out", &w.outside);
    let b = w.p.track();
    let (ta, tb) = (w.tree(&a), w.tree(&b));
    let secret = fs::read(w.outside.join("file")).unwrap();
    let outside_file = w.outside.join("file");
    let secret_id =
        w.sb.git(None, [OsStr::new("hash-object"), outside_file.as_os_str()]);
    let secret_id = secret_id.trim().to_string();
    for force in [true, false] {
        let what = format!("restore A{}", if force { " --force" } else { "" });
        let before = w.snap();
        let o = restore(&w.p, &a, force);
        let after = w.snap();
        check_outcome(&w, &what, &before, &after, &o, &b, &tb, &ta);
        w.assert_state(&a, &what);
        assert_eq!(fs::read(w.outside.join("file")).unwrap(), secret);
        let leaked = w.sb.git_in_run(&w.store, ["cat-file", "-e", &secret_id]);
        assert!(
            !leaked.status.success(),
            "{what}: a file outside the project was read into the store"
        );
        restore(&w.p, &o.undo, false).assert_clean();
        w.assert_state(&b, &format!("{what}, then restore(undo)"));
    }
    w.p.assert_fsck_clean();
}

#[test]
fn empty_directory_in_the_way_of_a_file_is_replaced() {
    // A directory holding nothing (not even in subdirectories) holds no bytes: it is not a
    // conflict, and restore must put the file of A there.
    let sb = Sandbox::new();
    let w = World::new(&sb);
    w.p.file("x", "A x\n").symlink("l", "x").file("keep", "k\n");
    let a = w.p.track();
    w.p.remove("x").dir("x/empty/deeper").remove("l").dir("l");
    let b = w.p.track();
    let (ta, tb) = (w.tree(&a), w.tree(&b));
    let before = w.snap();
    let o = restore(&w.p, &a, false);
    let after = w.snap();
    check_outcome(
        &w,
        "restore over empty directories",
        &before,
        &after,
        &o,
        &b,
        &tb,
        &ta,
    );
    w.assert_state(&a, "restore over empty directories");
    w.p.assert_fsck_clean();
}

/// Found by the eighty-first hostile pass (r108): the target holds `s/f`, and a file `s` that
/// the target could not have seen (its rules ignore a file so named) stands where its directory
/// goes. The restore keeps `s`, and so cannot write `s/f`: that is a conflict (`s` is in the
/// way, exit 0), not a failure, as for any file outside the snapshot in the way.
#[test]
fn a_write_below_a_file_the_restore_keeps_is_a_conflict_not_a_failure() {
    let sb = Sandbox::new();
    let w = World::new(&sb);
    // A file `s` is ignored, a directory `s` is not.
    w.p.file(".gitignore", "s\n!s/\n").file("s/f", "f\n");
    let a = w.p.track();
    w.p.remove(".gitignore")
        .remove("s")
        .file("s", "the user's\n");
    w.p.track();
    let run = w.p.rewind(["--json", "restore", a.as_str()]);
    let json = one_json(&run);
    run.assert_code(0);
    assert_eq!(json["failed"], serde_json::json!([]), "{run}");
    assert_eq!(json["conflicts"], serde_json::json!(["s/f"]), "{run}");
    assert_eq!(json["in_the_way"], serde_json::json!(["s/f"]), "{run}");
    assert_eq!(json["kept"], serde_json::json!(["s"]), "{run}");
    assert_eq!(w.p.read("s"), b"the user's\n");
    assert_eq!(w.p.read(".gitignore"), b"s\n!s/\n");
    w.p.assert_fsck_clean();
}

// ---------------------------------------------------------------------------
// kill -9
// ---------------------------------------------------------------------------

#[test]
fn kill_9_mid_restore_leaves_old_or_new_files_and_undo_works() {
    let sb = Sandbox::new();
    let w = World::new(&sb);
    let mut rng = XorShift::from_time();
    let n = 2000;
    for i in 0..n {
        let mut c = format!("A {i}\n").into_bytes();
        c.extend(filler(1500 + i % 700, i as u8));
        write_mode(&w.p.join(format!("d{:02}/f{:04}", i / 100, i)), &c, 0o644);
    }
    let a = w.p.track();
    for i in 0..n {
        let path = w.p.join(format!("d{:02}/f{:04}", i / 100, i));
        match i % 4 {
            0 | 1 => {
                let mut c = format!("B {i}\n").into_bytes();
                c.extend(filler(1200 + i % 900, (i + 7) as u8));
                fs::write(&path, c).unwrap();
            }
            2 if i % 8 == 2 => fs::remove_file(&path).unwrap(),
            _ => {}
        }
    }
    for i in 0..500 {
        write_mode(
            &w.p.join(format!("e{}/n{i:04}", i / 100)),
            format!("new {i}\n").as_bytes(),
            0o644,
        );
    }
    let b = w.p.track();
    let (ta, tb) = (w.tree(&a), w.tree(&b));
    let na = w.nodes(&ta);
    let nb = w.nodes(&tb);
    let paths: BTreeSet<String> = na.keys().chain(nb.keys()).cloned().collect();

    // How long a whole restore takes here.
    let t0 = Instant::now();
    restore(&w.p, &a, false).assert_clean();
    let full = t0.elapsed();
    restore(&w.p, &b, false).assert_clean();
    eprintln!("a full restore of {} paths takes {full:?}", paths.len());

    // Each round: state X, kill a restore to Y, check, restore(undo) -> X, restore Y -> Y.
    let (mut x, mut y) = ((b.clone(), &nb), (a.clone(), &na));
    let mut temp_leftovers = 0;
    let mut midway = 0;
    let mut undo_recorded = 0;
    for round in 0..10 {
        let undos_before = undo_points(w.sb, &w.store).len();
        let mut child = spawn_piped(&mut w.p.rewind_command(["--json", "restore", &y.0]));
        // Half the kills early (snapshot, undo point, first writes), half anywhere.
        let span = full.as_micros() as u64 * if round % 2 == 0 { 3 } else { 11 } / 10;
        let wait = Duration::from_micros(rng.below(span + 1));
        std::thread::sleep(wait);
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();

        let s = snap(&w.p.path);
        let (mut olds, mut news) = (0, 0);
        for p in &paths {
            let got = s.get(p.as_str()).and_then(Node::of_fs);
            let (old, new) = (x.1.get(p), y.1.get(p));
            if old != new {
                olds += usize::from(got.as_ref() == old);
                news += usize::from(got.as_ref() == new);
            }
            assert!(
                got.as_ref() == old || got.as_ref() == new,
                "round {round} (killed after {wait:?}): {p} is {} — neither the old ({}) nor the new ({})",
                got.as_ref().map_or("missing".into(), Node::short),
                old.map_or("missing".into(), Node::short),
                new.map_or("missing".into(), Node::short)
            );
        }
        for (k, e) in &s {
            if e.kind != 'd' && !paths.contains(k) {
                let name = Path::new(k).file_name().unwrap().to_str().unwrap();
                assert!(
                    name.starts_with(".rewind-"),
                    "round {round}: unexpected file {k}"
                );
                temp_leftovers += 1;
            }
        }
        midway += usize::from(olds > 0 && news > 0);
        let undos = undo_points(w.sb, &w.store);
        if undos.len() > undos_before {
            undo_recorded += 1;
            assert_eq!(
                undos[0], x.0,
                "round {round}: the undo point is the state before the restore"
            );
            let o = restore(&w.p, &undos[0], false);
            o.assert_clean();
        } else {
            // Killed before the undo point: nothing may have changed.
            assert_disk_has(
                &s,
                "",
                x.1,
                &format!("round {round}: killed before the undo point"),
            );
        }
        assert_eq!(
            w.p.track(),
            x.0,
            "round {round}: restore(undo) gives the state before"
        );
        restore(&w.p, &y.0, false).assert_clean();
        assert_eq!(
            w.p.track(),
            y.0,
            "round {round}: restore to the target works after the kill"
        );
        std::mem::swap(&mut x, &mut y);
    }
    eprintln!(
        "kill -9: {undo_recorded}/10 kills after the undo point, {midway} in the middle of the writes; \
         {temp_leftovers} temp files left by killed runs (removed by the next restore)"
    );
    w.assert_state(&x.0, "end");
    assert_disk_has(&snap(&w.p.path), "", x.1, "end");
    w.p.assert_fsck_clean();
}

/// r93 (3): a restore that puts a file where a tree of empty directories stands removed the
/// empty directories of a file system mounted in it (outside the project: a bind mount of a
/// cache layout), then failed on the mount point. A mount in the way is left whole.
#[test]
fn a_restore_never_removes_the_empty_directories_of_a_file_system_mounted_in_the_way() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("d", "d0\n");
    let with_file = p.track();
    fs::remove_file(p.path.join("d")).unwrap();
    fs::create_dir_all(p.path.join("d/e")).unwrap();
    let outside = sb.root.join("outside");
    fs::create_dir_all(outside.join("cache/objects/aa")).unwrap();
    fs::create_dir_all(outside.join("cache/tmp")).unwrap();
    let bind = OsStr::new("--bind");
    let mount = Mounted::new(
        &[bind, outside.join("cache").as_os_str()],
        &p.path.join("d/e"),
    );
    let r = p.rewind(["--json", "restore", &with_file]);
    drop(mount);
    assert!(outside.join("cache/objects/aa").is_dir(), "{r}");
    assert!(outside.join("cache/tmp").is_dir(), "{r}");
    assert!(p.path.join("d/e").is_dir(), "{r}");
}

/// Found by the hostile pass over the tree diff (r115 (1), (2)): a snapshot tree written into
/// the store by hand (by anything that can write it: an agent running as the user) with an
/// entry named `..` made `restore` write `../victim`, outside the project, and exit 0; an empty
/// name, a name holding `/`, an unknown mode, entries out of git's order or a name twice gave
/// a partial restore or a wrong report. Each is now an error (`object`) before any file
/// changes, and the project and what is around it stay as they were.
#[test]
fn a_snapshot_tree_written_by_hand_with_a_name_out_of_the_project_changes_nothing() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a", "good\n");
    p.track();
    let store = p.store();
    let write = |name: &str, data: &[u8], kind: &str| {
        let file = sb.root.join(format!("object-{name}"));
        fs::write(&file, data).unwrap();
        let args = [
            OsStr::new("hash-object"),
            OsStr::new("--literally"),
            OsStr::new("-t"),
            OsStr::new(kind),
            OsStr::new("-w"),
            file.as_os_str(),
        ];
        let id = sb.git_in(&store, args).trim().to_string();
        fs::remove_file(file).unwrap();
        (0..40)
            .step_by(2)
            .map(|i| u8::from_str_radix(&id[i..i + 2], 16).unwrap())
            .collect::<Vec<u8>>()
    };
    let entry = |mode: &str, name: &[u8], id: &[u8]| {
        [format!("{mode} ").as_bytes(), name, b"\0", id].concat()
    };
    let good = write("good", b"good\n", "blob");
    let escaped = write("escaped", b"ESCAPED\n", "blob");
    let victim = write("victim", &entry("100644", b"victim", &escaped), "tree");
    let cases: [(&str, Vec<u8>); 8] = [
        (
            "a directory named ..",
            [entry("40000", b"..", &victim), entry("100644", b"a", &good)].concat(),
        ),
        (
            "a directory named .",
            [entry("40000", b".", &victim), entry("100644", b"a", &good)].concat(),
        ),
        (
            "an empty name",
            [entry("40000", b"", &victim), entry("100644", b"a", &good)].concat(),
        ),
        (
            "a name with a slash",
            [
                entry("100644", b"a", &good),
                entry("100644", b"d/../../victim", &escaped),
            ]
            .concat(),
        ),
        (
            "a submodule's commit",
            [
                entry("100644", b"a", &good),
                entry("160000", b"sub", &escaped),
            ]
            .concat(),
        ),
        (
            "mode 0",
            [entry("100644", b"a", &good), entry("0", b"z", &escaped)].concat(),
        ),
        (
            "out of order",
            [
                entry("100644", b"b", &escaped),
                entry("100644", b"a", &good),
            ]
            .concat(),
        ),
        (
            "a name twice",
            [
                entry("100644", b"a", &good),
                entry("100644", b"a", &escaped),
            ]
            .concat(),
        ),
    ];
    let before = fs_snapshot(&sb.root.join("proj"));
    for (what, data) in cases {
        let tree = write(what, &data, "tree");
        let tree: String = tree.iter().map(|b| format!("{b:02x}")).collect();
        let commit = sb.git_in(&store, ["commit-tree", &tree, "-m", "rewind: snapshot"]);
        let record = format!("refs/rewind/snapshots/{tree}");
        sb.git_in(&store, ["update-ref", &record, commit.trim()]);
        for args in [
            vec!["--json", "restore", &tree],
            vec!["--json", "restore", &tree, "--force"],
        ] {
            let run = p.rewind(&args);
            let error = expect_error(&run, "object");
            assert!(
                error.to_string().contains(&tree[..7]) || !error.to_string().is_empty(),
                "{what}: {run}"
            );
            assert_eq!(
                fs_snapshot(&sb.root.join("proj")),
                before,
                "{what}: the project changed"
            );
            assert!(
                !sb.root.join("victim").exists(),
                "{what}: written outside the project"
            );
        }
        for args in [vec!["diff", &tree], vec!["patch", &tree]] {
            p.rewind(&args).assert_code(1);
        }
    }
}
