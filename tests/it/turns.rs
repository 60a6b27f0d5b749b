//! Integration tests for sessions and turns ("Turns and sessions"): `rewind turn begin`,
//! `turn track-file`, `turn end`, `turns`, `undo` and `changes`.
//!
//! Every number is checked against git itself: per-file statuses and +/- counts against
//! `git diff --numstat --no-renames` / `--name-status` between the `before` and `after` trees that
//! `turns --json` reports, and the state after an undo against an oracle computed from
//! `git ls-tree` of those trees (paths changed by the undone turns take their entry from the
//! first undone turn's `before`, every other path keeps what it had).
//!
//! Helpers shared with the other test files live in tests/it/common.rs; the ones below are
//! specific to turns.

use crate::common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

// ---------------------------------------------------------------------------
// Running rewind
// ---------------------------------------------------------------------------

fn rw(p: &TestProject, args: &[&str]) -> Run {
    rw_at(p, None, args)
}

/// `rewind -C <project> --json ARGS` (with `REWIND_NOW=now` when given): must succeed.
fn rwj_at(p: &TestProject, now: Option<&str>, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let run = rw_at(p, now, &all);
    run.assert_success();
    one_json(&run)
}

fn rwj(p: &TestProject, args: &[&str]) -> Value {
    rwj_at(p, None, args)
}

/// `ARGS --dry-run`, then `ARGS` (both must succeed): their outcomes.
fn dry_then_real(p: &TestProject, args: &[&str]) -> (Value, Value) {
    (rwj(p, &[args, &["--dry-run"]].concat()), rwj(p, args))
}

/// `--session=<id>`: the `=` form, so that ids starting with `-` are values, not flags.
fn sess(id: &str) -> String {
    format!("--session={id}")
}

fn turn_arg(id: &str) -> String {
    format!("--turn={id}")
}

fn begin_at(p: &TestProject, now: Option<&str>, s: &str, t: &str) {
    rwj_at(p, now, &["turn", "begin", &sess(s), &turn_arg(t)]);
}

fn begin(p: &TestProject, s: &str, t: &str) {
    begin_at(p, None, s, t)
}

/// `turn end`: the per-file list it prints (its `files`).
/// `turn end --no-renames`: files one path a row, as this module's oracle (`git diff
/// --no-renames`) lists them (tests/it/renames.rs has the renames).
fn end_at(p: &TestProject, now: Option<&str>, s: &str, t: &str) -> Vec<Value> {
    let v = rwj_at(
        p,
        now,
        &["turn", "end", &sess(s), &turn_arg(t), "--no-renames"],
    );
    v["files"]
        .as_array()
        .unwrap_or_else(|| panic!("`turn end --json` must print the files, got {v}"))
        .clone()
}

fn end(p: &TestProject, s: &str, t: &str) -> Vec<Value> {
    end_at(p, None, s, t)
}

fn track_file(p: &TestProject, s: &str, t: &str, path: &str) {
    rwj(p, &["turn", "track-file", &sess(s), &turn_arg(t), path]);
}

/// One row of `turns --json`, parsed strictly.
#[derive(Debug, Clone)]
struct TurnRec {
    session: String,
    turn: String,
    started_at: String,
    ended_at: Option<String>,
    before: String,
    after: Option<String>,
    files: u64,
    additions: u64,
    deletions: u64,
    rolled_back: bool,
    json: Value,
}

impl TurnRec {
    fn parse(v: &Value) -> TurnRec {
        let s = |k: &str| -> String {
            v[k].as_str()
                .unwrap_or_else(|| panic!("turn without string {k:?}: {v}"))
                .to_string()
        };
        let opt = |k: &str| -> Option<String> {
            assert!(
                v.get(k).is_some(),
                "turn without {k:?} (null while open): {v}"
            );
            if v[k].is_null() {
                None
            } else {
                Some(s(k))
            }
        };
        let n = |k: &str| {
            v[k].as_u64()
                .unwrap_or_else(|| panic!("turn without number {k:?}: {v}"))
        };
        let rec = TurnRec {
            session: s("session"),
            turn: s("turn"),
            started_at: s("started_at"),
            ended_at: opt("ended_at"),
            before: s("before"),
            after: opt("after"),
            files: n("files"),
            additions: n("additions"),
            deletions: n("deletions"),
            rolled_back: v["rolled_back"]
                .as_bool()
                .unwrap_or_else(|| panic!("turn without bool \"rolled_back\": {v}")),
            json: v.clone(),
        };
        assert_oid(&rec.before, "turns --json before");
        if let Some(after) = &rec.after {
            assert_oid(after, "turns --json after");
        }
        // Open: both null. Ended: both set. A turn left open when its session began another
        // ended there: `after` set, `ended_at` null.
        assert!(
            rec.ended_at.is_none() || rec.after.is_some(),
            "an ended turn has an after: {v}"
        );
        rec
    }

    /// The turn's "after", or the project now for an open turn.
    fn after_or(&self, current: &str) -> String {
        self.after.clone().unwrap_or_else(|| current.to_string())
    }
}

/// `turns --json [--session=S]`, oldest first.
fn turns_at(p: &TestProject, now: Option<&str>, session: Option<&str>) -> Vec<TurnRec> {
    let filter = session.map(sess);
    // One path a row, as the oracle lists them (see `end_at`).
    let mut args = vec!["turns", "--no-renames"];
    if let Some(f) = &filter {
        args.push(f);
    }
    let v = rwj_at(p, now, &args);
    v.as_array()
        .unwrap_or_else(|| panic!("`turns --json` must print an array, got {v}"))
        .iter()
        .map(TurnRec::parse)
        .collect()
}

fn turns(p: &TestProject, session: Option<&str>) -> Vec<TurnRec> {
    turns_at(p, None, session)
}

/// The parsed `undo --json` outcome.
#[derive(Debug)]
struct Undo {
    written: BTreeSet<String>,
    deleted: BTreeSet<String>,
    conflicts: BTreeSet<String>,
    failed: Vec<Value>,
    undo: String,
    json: Value,
}

fn string_set(v: &Value, key: &str) -> BTreeSet<String> {
    v[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key:?} array in {v}"))
        .iter()
        .map(|e| {
            e.as_str()
                .unwrap_or_else(|| panic!("non-string in {key:?}: {v}"))
                .to_string()
        })
        .collect()
}

/// `undo --json --session=S EXTRA...`: must exit 0.
fn undo(p: &TestProject, s: &str, extra: &[&str]) -> Undo {
    let session = sess(s);
    let mut args = vec!["undo", session.as_str()];
    args.extend_from_slice(extra);
    let v = rwj(p, &args);
    let u = Undo {
        written: string_set(&v, "written"),
        deleted: string_set(&v, "deleted"),
        conflicts: string_set(&v, "conflicts"),
        failed: v["failed"]
            .as_array()
            .unwrap_or_else(|| panic!("no \"failed\" array in {v}"))
            .clone(),
        undo: v["undo"]
            .as_str()
            .unwrap_or_else(|| panic!("no \"undo\" id in {v}"))
            .to_string(),
        json: v.clone(),
    };
    assert_oid(&u.undo, "undo --json undo");
    assert!(u.failed.is_empty(), "undo failed for some files: {v}");
    u
}

/// Runs `rewind --json ARGS` expecting exit 1 with a JSON error; returns its code. Also checks
/// the plain (non-JSON) form exits 1 with a message on stderr.
fn expect_error_at(p: &TestProject, now: Option<&str>, args: &[&str]) -> String {
    let plain = rw_at(p, now, args);
    plain.assert_code(1);
    assert!(
        plain.stderr.trim_start().starts_with("rewind:"),
        "an error must be reported on stderr: {plain}"
    );
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let run = rw_at(p, now, &all);
    run.assert_code(1);
    let v = one_json(&run);
    let code = v["error"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("no error.code in {v}: {run}"))
        .to_string();
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "no error.message in {v}"
    );
    code
}

fn expect_error(p: &TestProject, args: &[&str]) -> String {
    expect_error_at(p, None, args)
}

// ---------------------------------------------------------------------------
// Git oracles on the store
// ---------------------------------------------------------------------------

/// `git ls-tree -r -z TREE`: path -> "mode type oid".
fn tree_entries(p: &TestProject, store: &std::path::Path, tree: &str) -> BTreeMap<String, String> {
    let run = p.sb.git_in_run(store, ["ls-tree", "-r", "-z", tree]);
    run.assert_success();
    run.stdout_bytes
        .split(|b| *b == 0)
        .filter(|e| !e.is_empty())
        .map(|e| {
            let e = String::from_utf8_lossy(e);
            let (meta, path) = e.split_once('\t').expect("ls-tree entry");
            (path.to_string(), meta.to_string())
        })
        .collect()
}

/// `git diff --numstat --no-renames -z A B`: path -> (additions, deletions), `None` where git
/// says binary (`-`).
fn numstat(
    p: &TestProject,
    store: &std::path::Path,
    a: &str,
    b: &str,
) -> BTreeMap<String, Option<(u64, u64)>> {
    let run =
        p.sb.git_in_run(store, ["diff", "--numstat", "--no-renames", "-z", a, b]);
    run.assert_success();
    run.stdout_bytes
        .split(|b| *b == 0)
        .filter(|e| !e.is_empty())
        .map(|e| {
            let e = String::from_utf8_lossy(e);
            let mut parts = e.splitn(3, '\t');
            let add = parts.next().unwrap();
            let del = parts.next().unwrap();
            let path = parts.next().expect("numstat path").to_string();
            let n = |s: &str| s.parse::<u64>().unwrap_or_else(|_| panic!("numstat: {e}"));
            let counts = (add != "-").then(|| (n(add), n(del)));
            (path, counts)
        })
        .collect()
}

/// `git diff --name-status --no-renames -z A B`: path -> added|deleted|modified.
fn name_status(
    p: &TestProject,
    store: &std::path::Path,
    a: &str,
    b: &str,
) -> BTreeMap<String, String> {
    let run =
        p.sb.git_in_run(store, ["diff", "--name-status", "--no-renames", "-z", a, b]);
    run.assert_success();
    let fields: Vec<String> = run
        .stdout_bytes
        .split(|b| *b == 0)
        .filter(|e| !e.is_empty())
        .map(|e| String::from_utf8_lossy(e).into_owned())
        .collect();
    fields
        .chunks(2)
        .map(|c| {
            let status = match c[0].as_str() {
                "A" => "added",
                "D" => "deleted",
                "M" | "T" => "modified",
                other => panic!("unexpected name-status {other:?}"),
            };
            (c[1].clone(), status.to_string())
        })
        .collect()
}

/// The paths that differ between two trees.
fn changed_paths(p: &TestProject, store: &std::path::Path, a: &str, b: &str) -> BTreeSet<String> {
    name_status(p, store, a, b).into_keys().collect()
}

/// A `[{file, status, additions, deletions}]` list as a map, each file once.
/// A file row: status, additions, deletions, binary.
type Row = (String, u64, u64, bool);

fn file_rows(files: &[Value], what: &str) -> BTreeMap<String, Row> {
    let mut out = BTreeMap::new();
    for f in files {
        let file = f["file"]
            .as_str()
            .unwrap_or_else(|| panic!("{what}: no file in {f}"));
        let status = f["status"]
            .as_str()
            .unwrap_or_else(|| panic!("{what}: no status in {f}"));
        let add = f["additions"]
            .as_u64()
            .unwrap_or_else(|| panic!("{what}: no additions in {f}"));
        let del = f["deletions"]
            .as_u64()
            .unwrap_or_else(|| panic!("{what}: no deletions in {f}"));
        let binary = f["binary"]
            .as_bool()
            .unwrap_or_else(|| panic!("{what}: no binary in {f}"));
        let prev = out.insert(file.to_string(), (status.to_string(), add, del, binary));
        assert!(prev.is_none(), "{what}: {file:?} listed twice");
    }
    out
}

/// What git says changed from `a` to `b`, in the same shape as [`file_rows`] (a binary file
/// counted 0 and 0).
fn git_rows(p: &TestProject, store: &std::path::Path, a: &str, b: &str) -> BTreeMap<String, Row> {
    let ns = numstat(p, store, a, b);
    let st = name_status(p, store, a, b);
    assert_eq!(
        ns.keys().collect::<Vec<_>>(),
        st.keys().collect::<Vec<_>>(),
        "numstat and name-status disagree"
    );
    st.into_iter()
        .map(|(path, status)| {
            let counts = ns[&path];
            let (a, d) = counts.unwrap_or_default();
            (path, (status, a, d, counts.is_none()))
        })
        .collect()
}

/// A turn's `turn end` output and its `turns` row agree with git's diff of before/after.
fn assert_turn_matches_git(
    p: &TestProject,
    store: &std::path::Path,
    rec: &TurnRec,
    end_output: Option<&[Value]>,
) {
    let after = rec.after.as_deref().expect("an ended turn");
    let want = git_rows(p, store, &rec.before, after);
    if let Some(files) = end_output {
        assert_eq!(
            file_rows(files, "turn end"),
            want,
            "`turn end` of {:?}/{:?} differs from `git diff --numstat {} {after}`",
            rec.session,
            rec.turn,
            rec.before
        );
    }
    let changed = rec.json["changed"].as_array().expect("changed rows");
    assert_eq!(
        file_rows(changed, "turns"),
        want,
        "`turns` row of {:?}/{:?}",
        rec.session,
        rec.turn
    );
    let adds: u64 = want.values().map(|r| r.1).sum();
    let dels: u64 = want.values().map(|r| r.2).sum();
    assert_eq!(
        (rec.files, rec.additions, rec.deletions),
        (want.len() as u64, adds, dels),
        "files/additions/deletions of {} disagree with git: {want:?}",
        rec.json
    );
}

/// The project as a tree map, via `rewind track` (which changes no file).
fn project_entries(p: &TestProject, store: &std::path::Path) -> (String, BTreeMap<String, String>) {
    let t = p.track();
    let entries = tree_entries(p, store, &t);
    (t, entries)
}

/// The oracle for `undo`: starting from `current`, every path that one of `undone` changed
/// (before -> after, or -> `current` while open) takes its entry in `undone[0].before`.
/// Returns (expected entries, expected `restored`, expected `deleted`).
fn undo_oracle(
    p: &TestProject,
    store: &std::path::Path,
    undone: &[TurnRec],
    current: &str,
) -> (BTreeMap<String, String>, BTreeSet<String>, BTreeSet<String>) {
    let now = tree_entries(p, store, current);
    let target = tree_entries(p, store, &undone[0].before);
    let mut touched = BTreeSet::new();
    for rec in undone {
        touched.extend(changed_paths(p, store, &rec.before, &rec.after_or(current)));
    }
    let mut want = now.clone();
    let mut restored = BTreeSet::new();
    let mut deleted = BTreeSet::new();
    for path in &touched {
        match (now.get(path), target.get(path)) {
            (a, b) if a == b => {}
            (_, Some(entry)) => {
                restored.insert(path.clone());
                want.insert(path.clone(), entry.clone());
            }
            (Some(_), None) => {
                deleted.insert(path.clone());
                want.remove(path);
            }
            (None, None) => unreachable!(),
        }
    }
    (want, restored, deleted)
}

fn assert_entries_eq(got: &BTreeMap<String, String>, want: &BTreeMap<String, String>, what: &str) {
    if got != want {
        let mut diffs = Vec::new();
        for (k, v) in want {
            match got.get(k) {
                None => diffs.push(format!("missing {k} (want {v})")),
                Some(g) if g != v => diffs.push(format!("{k}: got {g}, want {v}")),
                _ => {}
            }
        }
        for k in got.keys().filter(|k| !want.contains_key(*k)) {
            diffs.push(format!("unexpected {k}"));
        }
        panic!(
            "{what}: the project differs from the expected state:\n{}",
            diffs.join("\n")
        );
    }
}

/// Refs of the store below `prefix`.
fn refs_under(p: &TestProject, store: &std::path::Path, prefix: &str) -> BTreeSet<String> {
    p.sb.git_in(store, ["for-each-ref", "--format=%(refname)", prefix])
        .lines()
        .map(str::to_string)
        .collect()
}

/// Tree ids of every commit `git log --all` shows.
fn logged_trees(p: &TestProject, store: &std::path::Path) -> BTreeSet<String> {
    p.sb.git_in(store, ["log", "--all", "--format=%T"])
        .lines()
        .map(str::to_string)
        .collect()
}

/// Runs a shell script in the project (as an agent's tool call would).
fn shell(p: &TestProject, script: &str) {
    let mut cmd = p.sb.isolated("sh");
    cmd.current_dir(&p.path).args(["-c", script]);
    run_with_deadline(&mut cmd, DEFAULT_DEADLINE).assert_success();
}

fn lines(prefix: &str, n: usize) -> String {
    (1..=n).map(|i| format!("{prefix} {i}\n")).collect()
}

/// `text` with line `at` (1-based) replaced by `with` lines.
fn splice(text: &str, at: usize, remove: usize, with: &[&str]) -> String {
    let mut v: Vec<String> = text.lines().map(str::to_string).collect();
    let tail = v.split_off((at - 1).min(v.len()));
    v.extend(with.iter().map(|s| s.to_string()));
    v.extend(tail.into_iter().skip(remove));
    v.iter().map(|l| format!("{l}\n")).collect()
}

fn mode_of(p: &TestProject, rel: &str) -> u32 {
    fs::symlink_metadata(p.join(rel))
        .unwrap()
        .permissions()
        .mode()
        & 0o777
}

// ---------------------------------------------------------------------------
// Clock helpers (REWIND_NOW)
// ---------------------------------------------------------------------------

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

/// Seconds since the epoch of an RFC 3339 UTC time ("...Z" or "...+00:00"), fraction dropped.
fn epoch_secs(s: &str) -> i64 {
    let bad = || panic!("not an RFC 3339 UTC time: {s:?}");
    if s.len() < 20 {
        bad();
    }
    let num = |r: std::ops::Range<usize>| s[r].parse::<i64>().unwrap_or_else(|_| bad());
    let rest = &s[19..];
    let rest = rest
        .strip_prefix('.')
        .map_or(rest, |r| r.trim_start_matches(|c: char| c.is_ascii_digit()));
    if rest != "Z" && rest != "+00:00" {
        bad();
    }
    days_from_civil(num(0..4), num(5..7), num(8..10)) * 86400
        + num(11..13) * 3600
        + num(14..16) * 60
        + num(17..19)
}

/// The base time of the clock tests, shifted by `offset` seconds (|offset| < 9 days).
fn at(offset: i64) -> String {
    let total = 9 * 86400 + offset;
    assert!((0..20 * 86400).contains(&total));
    let (d, r) = (total / 86400, total % 86400);
    format!(
        "2030-01-{:02}T{:02}:{:02}:{:02}Z",
        1 + d,
        r / 3600,
        r % 3600 / 60,
        r % 60
    )
}

// ---------------------------------------------------------------------------
// The full cycle
// ---------------------------------------------------------------------------

#[test]
fn full_cycle_three_turns_undo_all_then_redo() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    let a0 = lines("alpha", 20);
    p.file("a.txt", &a0)
        .file("b.txt", lines("beta", 5))
        .file("c.txt", "to be deleted\n")
        .file("dir/d.txt", lines("delta", 8))
        .file("keep.txt", "never touched\n")
        .file("script.sh", "#!/bin/sh\necho hi\n");
    let store = p.store();
    let t0 = p.track();
    let s = "chat-42";

    // Turn 1: edit a, create new1, delete c.
    begin(&p, s, "1");
    p.file("a.txt", splice(&a0, 3, 2, &["ALPHA three", "ALPHA four"]));
    let a1 = String::from_utf8(p.read("a.txt")).unwrap();
    p.file("a.txt", splice(&a1, 11, 0, &["inserted 1", "inserted 2"]));
    p.file("new1.txt", lines("new one", 4));
    p.remove("c.txt");
    let end1 = end(&p, s, "1");

    // Turn 2: edit a again, edit b, create a file in a new directory, chmod +x.
    begin(&p, s, "2");
    let a2 = String::from_utf8(p.read("a.txt")).unwrap();
    p.file("a.txt", splice(&a2, 15, 3, &[]));
    p.file("b.txt", lines("BETA", 5));
    p.file("dir/sub/new2.txt", lines("new two", 3));
    p.chmod("script.sh", 0o755);
    let end2 = end(&p, s, "2");

    // Turn 3: delete what turn 1 created, edit d, add a symlink.
    begin(&p, s, "3");
    p.remove("new1.txt");
    p.file(
        "dir/d.txt",
        splice(&lines("delta", 8), 8, 1, &["DELTA eight", "delta nine"]),
    );
    p.symlink("link", "a.txt");
    let end3 = end(&p, s, "3");
    let after3_files = fs_snapshot(&p.path);

    let list = turns(&p, Some(s));
    assert_eq!(list.len(), 3, "three turns: {list:#?}");
    for (i, (rec, out)) in list.iter().zip([&end1, &end2, &end3]).enumerate() {
        assert_eq!(rec.session, s);
        assert_eq!(rec.turn, (i + 1).to_string(), "oldest first");
        assert!(rec.ended_at.is_some() && !rec.rolled_back, "{}", rec.json);
        assert_turn_matches_git(&p, &store, rec, Some(out));
        assert_tree_complete(&sb, &store, &rec.before);
    }
    assert_eq!(
        list[0].before, t0,
        "turn 1's before is the project before it"
    );
    assert_eq!(
        list[0].after.as_ref(),
        Some(&list[1].before),
        "nothing changed between turns"
    );
    assert_eq!(list[1].after.as_ref(), Some(&list[2].before));
    assert!(
        list[0].files == 3 && list[1].files == 4 && list[2].files == 3,
        "{list:#?}"
    );
    let after3 = list[2].after.clone().unwrap();
    assert_eq!(p.track(), after3, "turn 3's after is the project now");
    // The same list without --session (only one session exists).
    let all: Vec<_> = turns(&p, None).into_iter().map(|t| t.json).collect();
    assert_eq!(all, list.iter().map(|t| t.json.clone()).collect::<Vec<_>>());

    // The records are plain git: refs and commits that stock git shows.
    let refs = refs_under(&p, &store, "refs/rewind/sessions/");
    for r in ["head", "turns/1", "turns/2", "turns/3"] {
        assert!(
            refs.contains(&format!("refs/rewind/sessions/chat-42/{r}")),
            "{refs:?}"
        );
    }
    assert!(
        !refs.iter().any(|r| r.contains("/rolled-back/")),
        "{refs:?}"
    );
    let logged = logged_trees(&p, &store);
    for rec in &list {
        assert!(logged.contains(&rec.before) && logged.contains(rec.after.as_ref().unwrap()));
    }

    // Undo the whole session.
    let (want, restored, deleted) = undo_oracle(&p, &store, &list, &after3);
    let u = undo(&p, s, &[]);
    assert!(u.conflicts.is_empty(), "{}", u.json);
    assert_eq!(u.written, restored, "restored: {}", u.json);
    assert_eq!(u.deleted, deleted, "deleted: {}", u.json);
    assert_eq!(
        u.written,
        ["a.txt", "b.txt", "c.txt", "dir/d.txt", "script.sh"]
            .map(String::from)
            .into(),
    );
    assert_eq!(
        u.deleted,
        ["dir/sub/new2.txt", "link"].map(String::from).into()
    );
    let (now, entries) = project_entries(&p, &store);
    assert_entries_eq(&entries, &want, "after undo");
    assert_eq!(
        now, t0,
        "every change was made in a turn: undo brings back turn 1's before"
    );
    assert_eq!(p.read("a.txt"), a0.as_bytes());
    assert_eq!(p.read("c.txt"), b"to be deleted\n");
    assert!(!p.join("new1.txt").exists() && !p.join("link").exists());
    assert_eq!(mode_of(&p, "script.sh"), 0o644);
    assert!(
        turns(&p, Some(s)).iter().all(|t| t.rolled_back),
        "all turns rolled back"
    );
    let refs = refs_under(&p, &store, "refs/rewind/sessions/chat-42/rolled-back/");
    assert_eq!(refs.len(), 3, "{refs:?}");

    // Redo.
    let run = rw(&p, &["--json", "restore", &u.undo]);
    run.assert_success();
    assert_eq!(
        p.track(),
        after3,
        "`restore <undo>` brings back the state after turn 3"
    );
    let redone = fs_snapshot(&p.path);
    for (path, e) in &after3_files {
        let r = redone
            .get(path)
            .unwrap_or_else(|| panic!("{} missing after redo", path.display()));
        assert_eq!(
            (e.kind, e.mode & 0o777, &e.content, &e.link),
            (r.kind, r.mode & 0o777, &r.content, &r.link)
        );
    }
    assert_fsck_clean(&sb, &store);
}

#[test]
fn undo_of_a_middle_turn_takes_later_turns_too() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", lines("a", 6))
        .file("b.txt", lines("b", 6))
        .file("c.txt", lines("c", 6))
        .file("shared.txt", lines("shared", 10));
    let store = p.store();
    let t0 = p.track();
    let s = "middle";

    begin(&p, s, "1");
    p.file("a.txt", lines("A", 6)).file("x.txt", "x\n");
    end(&p, s, "1");
    let after1_a = p.read("a.txt");
    begin(&p, s, "2");
    p.file("b.txt", lines("B", 7));
    p.file(
        "shared.txt",
        splice(&lines("shared", 10), 2, 1, &["SHARED two"]),
    );
    end(&p, s, "2");
    begin(&p, s, "3");
    p.remove("c.txt");
    p.file(
        "shared.txt",
        splice(&String::from_utf8(p.read("shared.txt")).unwrap(), 9, 2, &[]),
    );
    p.file("y.txt", "y\n");
    end(&p, s, "3");

    let list = turns(&p, Some(s));
    assert_eq!(list.len(), 3);
    let current = p.track();
    let (want, restored, deleted) = undo_oracle(&p, &store, &list[1..], &current);
    let u = undo(&p, s, &["--turn=2"]);
    assert!(u.conflicts.is_empty(), "{}", u.json);
    assert_eq!(
        (&u.written, &u.deleted),
        (&restored, &deleted),
        "{}",
        u.json
    );
    let (_, entries) = project_entries(&p, &store);
    assert_entries_eq(&entries, &want, "after undo --turn 2");
    // Turn 1's work stays; turns 2 and 3 are gone.
    assert_eq!(p.read("a.txt"), after1_a);
    assert!(p.join("x.txt").exists());
    assert_eq!(p.read("b.txt"), lines("b", 6).as_bytes());
    assert_eq!(p.read("c.txt"), lines("c", 6).as_bytes());
    assert_eq!(p.read("shared.txt"), lines("shared", 10).as_bytes());
    assert!(!p.join("y.txt").exists());
    let flags: Vec<bool> = turns(&p, Some(s)).iter().map(|t| t.rolled_back).collect();
    assert_eq!(flags, [false, true, true]);

    // Undoing the rest (from the first turn) brings back the start.
    let u = undo(&p, s, &[]);
    assert!(u.conflicts.is_empty(), "{}", u.json);
    assert_eq!(
        u.written,
        BTreeSet::from(["a.txt".to_string()]),
        "{}",
        u.json
    );
    assert_eq!(
        u.deleted,
        BTreeSet::from(["x.txt".to_string()]),
        "{}",
        u.json
    );
    assert_eq!(p.track(), t0);
    assert!(turns(&p, Some(s)).iter().all(|t| t.rolled_back));
}

#[test]
fn edits_made_between_turns_by_the_user_survive_undo() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("agent1.txt", lines("one", 5))
        .file("agent2.txt", lines("two", 5))
        .file("user.txt", lines("user", 5))
        .file("user-deletes.txt", "bye\n");
    let store = p.store();
    let s = "between";

    begin(&p, s, "1");
    p.file("agent1.txt", lines("ONE", 5));
    end(&p, s, "1");
    // The user, between turns.
    p.file("user.txt", lines("user edited", 6));
    p.file("user-new.txt", "made by the user\n");
    p.remove("user-deletes.txt");
    begin(&p, s, "2");
    p.file("agent2.txt", lines("TWO", 3));
    p.file("agent-new.txt", "made by the agent\n");
    let end2 = end(&p, s, "2");
    assert_eq!(
        file_rows(&end2, "turn 2").into_keys().collect::<Vec<_>>(),
        ["agent-new.txt", "agent2.txt"],
        "edits between turns are in no turn"
    );

    let list = turns(&p, Some(s));
    let current = p.track();
    let (want, restored, deleted) = undo_oracle(&p, &store, &list, &current);
    let u = undo(&p, s, &[]);
    assert!(u.conflicts.is_empty(), "{}", u.json);
    assert_eq!(
        (&u.written, &u.deleted),
        (&restored, &deleted),
        "{}",
        u.json
    );
    let (_, entries) = project_entries(&p, &store);
    assert_entries_eq(&entries, &want, "after undo");
    assert_eq!(p.read("agent1.txt"), lines("one", 5).as_bytes());
    assert_eq!(p.read("agent2.txt"), lines("two", 5).as_bytes());
    assert!(!p.join("agent-new.txt").exists());
    assert_eq!(
        p.read("user.txt"),
        lines("user edited", 6).as_bytes(),
        "the user's edit stays"
    );
    assert_eq!(p.read("user-new.txt"), b"made by the user\n");
    assert!(
        !p.join("user-deletes.txt").exists(),
        "the user's deletion stays"
    );
}

#[test]
fn conflict_is_left_alone_then_force_overwrites_and_keeps_the_bytes() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("f.txt", lines("f", 4))
        .file("g.txt", lines("g", 4))
        .file("h.txt", lines("h", 4));
    let store = p.store();
    let s = "conflict";
    begin(&p, s, "1");
    p.file("f.txt", lines("F", 4)).file("g.txt", lines("G", 4));
    end(&p, s, "1");
    begin(&p, s, "2");
    p.file("h.txt", lines("H", 4));
    end(&p, s, "2");
    // The user edits a file the agent changed, after the last turn.
    let user_bytes = b"the user's own work\n\x00\xffbinary tail".to_vec();
    p.file("f.txt", &user_bytes);

    let u = undo(&p, s, &[]);
    assert_eq!(
        u.conflicts,
        BTreeSet::from(["f.txt".to_string()]),
        "{}",
        u.json
    );
    assert_eq!(
        u.written,
        BTreeSet::from(["g.txt".to_string(), "h.txt".to_string()]),
        "{}",
        u.json
    );
    assert!(u.deleted.is_empty());
    assert_eq!(p.read("f.txt"), user_bytes, "a conflict is left alone");
    assert_eq!(p.read("g.txt"), lines("g", 4).as_bytes());
    assert_eq!(p.read("h.txt"), lines("h", 4).as_bytes());
    assert_eq!(
        p.store_blob(&u.undo, "f.txt"),
        user_bytes,
        "the undo snapshot has the project as it was"
    );

    let forced = undo(&p, s, &["--force"]);
    assert!(forced.conflicts.is_empty(), "{}", forced.json);
    assert!(forced.written.contains("f.txt"), "{}", forced.json);
    assert_eq!(
        p.read("f.txt"),
        lines("f", 4).as_bytes(),
        "--force overwrites"
    );
    let blob = sb.git_in_run(
        &store,
        ["cat-file", "blob", &format!("{}:f.txt", forced.undo)],
    );
    blob.assert_success();
    assert_eq!(
        blob.stdout_bytes, user_bytes,
        "the overwritten bytes are in the undo snapshot"
    );

    // And `restore <undo>` gives them back.
    rw(&p, &["--json", "restore", &forced.undo]).assert_success();
    assert_eq!(p.read("f.txt"), user_bytes);
    assert_eq!(p.read("g.txt"), lines("g", 4).as_bytes());
}

/// Undo is a button a user may press twice. The first press leaves the user's file alone (a
/// conflict); the second press without --force must not overwrite it either: the file is still
/// not what the agent left there (the agent's turns are all rolled back now, so what the agent
/// left is the state from before them).
#[test]
fn undo_pressed_twice_still_leaves_a_conflict_alone() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("f.txt", "f0\n").file("g.txt", "g0\n");
    let s = "twice";
    begin(&p, s, "1");
    p.file("f.txt", "f1\n").file("g.txt", "g1\n");
    end(&p, s, "1");
    p.file("f.txt", "USER\n");

    let first = undo(&p, s, &[]);
    assert_eq!(
        first.conflicts,
        BTreeSet::from(["f.txt".to_string()]),
        "{}",
        first.json
    );
    assert_eq!(p.read("f.txt"), b"USER\n");
    let second = undo(&p, s, &[]);
    assert_eq!(
        p.read("f.txt"),
        b"USER\n",
        "a second undo without --force overwrote the user's edit: {}",
        second.json
    );
    assert_eq!(
        second.conflicts,
        BTreeSet::from(["f.txt".to_string()]),
        "{}",
        second.json
    );
}

#[test]
fn single_file_undo() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", lines("a", 5))
        .file("b.txt", lines("b", 5))
        .file("keep.txt", "keep\n")
        .file("sub/d.txt", lines("d", 3));
    let store = p.store();
    let t0 = p.track();
    let s = "one-file";
    begin(&p, s, "1");
    p.file("a.txt", lines("A", 5))
        .file("b.txt", lines("B", 5))
        .file("c.txt", "new\n");
    p.file("sub/d.txt", lines("D", 3));
    end(&p, s, "1");
    begin(&p, s, "2");
    p.file("a.txt", lines("AA", 2));
    end(&p, s, "2");
    let b_after = p.read("b.txt");

    let u = undo(&p, s, &["--file=a.txt"]);
    assert_eq!(
        u.written,
        BTreeSet::from(["a.txt".to_string()]),
        "{}",
        u.json
    );
    assert!(u.deleted.is_empty() && u.conflicts.is_empty(), "{}", u.json);
    assert_eq!(
        p.read("a.txt"),
        lines("a", 5).as_bytes(),
        "back to before the first turn"
    );
    assert_eq!(p.read("b.txt"), b_after, "other files stay");
    assert_eq!(p.read("c.txt"), b"new\n");
    assert!(
        turns(&p, Some(s)).iter().all(|t| !t.rolled_back),
        "--file marks no turn rolled back"
    );
    assert!(refs_under(&p, &store, "refs/rewind/sessions/one-file/rolled-back/").is_empty());

    // A file the turns created is deleted; a nested path works.
    let u = undo(&p, s, &["--file=c.txt"]);
    assert_eq!(
        u.deleted,
        BTreeSet::from(["c.txt".to_string()]),
        "{}",
        u.json
    );
    assert!(u.written.is_empty(), "{}", u.json);
    assert!(!p.join("c.txt").exists());
    let u = undo(&p, s, &["--turn=1", "--file=sub/d.txt"]);
    assert_eq!(
        u.written,
        BTreeSet::from(["sub/d.txt".to_string()]),
        "{}",
        u.json
    );
    assert_eq!(p.read("sub/d.txt"), lines("d", 3).as_bytes());
    assert_eq!(p.read("b.txt"), b_after);

    // Paths are project-relative, "./x" and absolute paths inside the project work too.
    let u = undo(&p, s, &["--file=./b.txt"]);
    assert_eq!(
        u.written,
        BTreeSet::from(["b.txt".to_string()]),
        "{}",
        u.json
    );
    assert_eq!(p.read("b.txt"), lines("b", 5).as_bytes());
    // Writing the agent's version back after the undo is someone else's edit now: --force.
    p.file("b.txt", &b_after);
    let abs = format!("--file={}", p.join("b.txt").display());
    let u = undo(&p, s, &[&abs]);
    assert_eq!(
        u.conflicts,
        BTreeSet::from(["b.txt".to_string()]),
        "{}",
        u.json
    );
    let u = undo(&p, s, &[&abs, "--force"]);
    assert_eq!(
        u.written,
        BTreeSet::from(["b.txt".to_string()]),
        "{}",
        u.json
    );
    // Outside the project: an error, nothing changes.
    let before = fs_snapshot(&p.path);
    let outside = format!("--file={}", sb.root.join("elsewhere.txt").display());
    for args in [
        ["undo", "--session=one-file", outside.as_str()],
        ["undo", "--session=one-file", "--file=../x"],
    ] {
        let code = expect_error(&p, &args);
        assert!(!code.is_empty());
    }
    assert_same_snapshot(&before, &fs_snapshot(&p.path), "the project");

    // A path no turn touched: not_found, and nothing changes.
    let before = fs_snapshot(&p.path);
    assert_eq!(
        expect_error(&p, &["undo", &sess(s), "--file=keep.txt"]),
        "not_found"
    );
    assert_same_snapshot(&before, &fs_snapshot(&p.path), "the project");

    // The rest of the session: every path is back already.
    let u = undo(&p, s, &[]);
    assert!(u.written.is_empty() && u.conflicts.is_empty(), "{}", u.json);
    assert_eq!(p.track(), t0);
}

#[test]
fn shell_made_changes_are_part_of_the_turn() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("old.txt", "old\n")
        .file("edit.txt", "x marks the spot\nsecond line\n")
        .file("mv-src.txt", lines("moved", 3))
        .file("keep.txt", "keep\n");
    let store = p.store();
    let t0 = p.track();
    let s = "shell";
    begin(&p, s, "1");
    shell(
        &p,
        "printf 'generated\\n' > gen.txt && rm old.txt && mkdir -p build/out && \
         seq 1 50 > build/out/nums.txt && sed -i 's/x/y/' edit.txt && mv mv-src.txt mv-dst.txt",
    );
    let out = end(&p, s, "1");
    let rows = file_rows(&out, "turn end");
    let status: BTreeMap<&str, &str> = rows
        .iter()
        .map(|(k, v)| (k.as_str(), v.0.as_str()))
        .collect();
    assert_eq!(
        status,
        BTreeMap::from([
            ("build/out/nums.txt", "added"),
            ("edit.txt", "modified"),
            ("gen.txt", "added"),
            ("mv-dst.txt", "added"),
            ("mv-src.txt", "deleted"),
            ("old.txt", "deleted"),
        ]),
        "{out:?}"
    );
    let list = turns(&p, Some(s));
    assert_turn_matches_git(&p, &store, &list[0], Some(&out));

    let u = undo(&p, s, &[]);
    assert!(u.conflicts.is_empty(), "{}", u.json);
    assert_eq!(p.track(), t0, "the shell's work is undone");
    assert!(!p.join("gen.txt").exists() && !p.join("build/out/nums.txt").exists());
    assert_eq!(p.read("old.txt"), b"old\n");
    assert_eq!(p.read("edit.txt"), b"x marks the spot\nsecond line\n");
}

// ---------------------------------------------------------------------------
// track-file
// ---------------------------------------------------------------------------

#[test]
fn track_file_keeps_the_first_version() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "version 1\n").file("b.txt", "b\n");
    let store = p.store();
    let t0 = p.track();
    let s = "tf";

    // No `turn begin`: track-file starts the turn.
    track_file(&p, s, "1", "a.txt");
    let list = turns(&p, Some(s));
    assert_eq!(list.len(), 1);
    assert!(
        list[0].ended_at.is_none() && list[0].after.is_none(),
        "{}",
        list[0].json
    );
    assert_eq!(
        list[0].before, t0,
        "the implicit begin snapshots the whole project"
    );
    p.file("a.txt", "version 2\n");
    track_file(&p, s, "1", "a.txt"); // later calls are no-ops
    p.file("a.txt", "version 3\nmore\n");
    track_file(&p, s, "1", "c.txt"); // a file about to be created
    p.file("c.txt", "c\n");
    begin(&p, s, "1"); // beginning an open turn again is a no-op too
    let out = end(&p, s, "1");

    let list = turns(&p, Some(s));
    assert_eq!(list.len(), 1, "one turn: {list:#?}");
    let rec = &list[0];
    assert_eq!(rec.before, t0);
    assert_eq!(
        p.store_blob(&rec.before, "a.txt"),
        b"version 1\n",
        "the first version wins"
    );
    assert_eq!(
        p.store_blob(rec.after.as_ref().unwrap(), "a.txt"),
        b"version 3\nmore\n"
    );
    assert_turn_matches_git(&p, &store, rec, Some(&out));
    assert_eq!(
        file_rows(&out, "end").into_keys().collect::<Vec<_>>(),
        ["a.txt", "c.txt"]
    );
    // One begin commit and one end commit on the session's chain.
    let count = sb.git_in(
        &store,
        ["rev-list", "--count", "refs/rewind/sessions/tf/head"],
    );
    assert_eq!(count.trim(), "2");

    undo(&p, s, &[]);
    assert_eq!(p.read("a.txt"), b"version 1\n");
    assert!(!p.join("c.txt").exists());

    // The turn has ended: track-file and begin are refused.
    assert_eq!(
        expect_error(&p, &["turn", "track-file", &sess(s), "--turn=1", "a.txt"]),
        "turn_state"
    );
    assert_eq!(
        expect_error(&p, &["turn", "begin", &sess(s), "--turn=1"]),
        "turn_state"
    );
}

/// Eight processes call `track-file` for the same new turn at the same moment: all succeed and
/// the turn is begun exactly once. Run twice: on a store that does not exist yet, then on an
/// existing one.
#[test]
fn concurrent_track_file_begins_the_turn_once() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    for i in 0..8 {
        p.file(format!("f{i}.txt"), format!("file {i}\n"));
    }
    let project = p.path.to_str().unwrap().to_string();
    let s = "race";
    let mut expected_commits = 0;
    for (round, turn) in ["t1", "t2"].into_iter().enumerate() {
        let before_files = fs_snapshot(&p.path);
        let mut gate = StartGate::new(&sb, &format!("gate-{round}"));
        let children: Vec<_> = (0..8)
            .map(|i| {
                let file = if i % 2 == 0 {
                    "f0.txt".to_string()
                } else {
                    format!("f{i}.txt")
                };
                let args: Vec<OsString> = [
                    "-C",
                    &project,
                    "--json",
                    "turn",
                    "track-file",
                    &sess(s),
                    &turn_arg(turn),
                    &file,
                ]
                .iter()
                .map(OsString::from)
                .collect();
                spawn_piped(&mut sb.rewind_command_gated(&gate, args))
            })
            .collect();
        gate.open(8, Duration::from_millis(300));
        for (i, child) in children.into_iter().enumerate() {
            let run = finish(
                child,
                DEFAULT_DEADLINE,
                &format!("track-file #{i} ({turn})"),
            );
            assert_no_panic(&run);
            run.assert_success();
        }
        let store = p.store();
        expected_commits += 1;
        let count = sb.git_in(
            &store,
            ["rev-list", "--count", "refs/rewind/sessions/race/head"],
        );
        assert_eq!(
            count.trim(),
            expected_commits.to_string(),
            "exactly one begin for {turn}"
        );
        let list = turns(&p, Some(s));
        assert_eq!(list.len(), round + 1, "{list:#?}");
        let rec = list.last().unwrap();
        assert_eq!(rec.turn, turn);
        assert!(rec.ended_at.is_none());
        assert_same_snapshot(
            &before_files,
            &fs_snapshot(&p.path),
            "the project (track-file)",
        );
        assert_eq!(rec.before, p.track());

        for i in 0..8 {
            p.file(format!("f{i}.txt"), format!("file {i} after {turn}\n"));
        }
        let out = end(&p, s, turn);
        expected_commits += 1;
        assert_eq!(out.len(), 8, "{out:?}");
        let list = turns(&p, Some(s));
        assert_turn_matches_git(&p, &store, list.last().unwrap(), Some(&out));
    }
    assert_fsck_clean(&sb, &p.store());
}

// ---------------------------------------------------------------------------
// Ids
// ---------------------------------------------------------------------------

fn odd_ids() -> Vec<String> {
    [
        "with/slash",
        "a/b/c/",
        "/",
        "a b  c",
        " ",
        "\t",
        "ünïcødé ✓ 日本語",
        "..",
        "../..",
        ".",
        ".hidden",
        "a..b",
        "~^:?*[\\",
        "%",
        "%41%2F",
        "50%",
        "@{u}",
        "@",
        "x.lock",
        "refs/heads/main",
        "HEAD",
        "-x",
        "--session",
        "line\nbreak",
        "trailing\n",
        "quote\"'`$(true)",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain(["x".repeat(200)])
    .collect()
}

#[test]
fn odd_ids_round_trip() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    let ids = odd_ids();
    for i in 0..ids.len() {
        p.file(format!("f{i}.txt"), "0\n");
    }
    p.file("shared.txt", "0\n");
    let store = p.store();
    // Session i has turns ids[i] and ids[i+1]: every id is used as a session and as a turn.
    let mut want = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let next = &ids[(i + 1) % ids.len()];
        begin(&p, id, id);
        p.file(format!("f{i}.txt"), "1\n");
        end(&p, id, id);
        track_file(&p, id, next, &format!("f{i}.txt"));
        p.file(format!("f{i}.txt"), "2\n");
        end(&p, id, next);
        want.push((id.clone(), id.clone()));
        want.push((id.clone(), next.clone()));
    }
    let all = turns(&p, None);
    let got: Vec<(String, String)> = all
        .iter()
        .map(|t| (t.session.clone(), t.turn.clone()))
        .collect();
    assert_eq!(
        got, want,
        "ids must round-trip exactly through `turns --json`, oldest first"
    );
    for (i, id) in ids.iter().enumerate() {
        let mine = turns(&p, Some(id));
        let got: Vec<&str> = mine.iter().map(|t| t.turn.as_str()).collect();
        assert_eq!(
            got,
            [id.as_str(), ids[(i + 1) % ids.len()].as_str()],
            "turns --session={id:?}"
        );
        assert!(mine.iter().all(|t| &t.session == id));
        for rec in &mine {
            assert_turn_matches_git(&p, &store, rec, None);
        }
        let ch = rwj(&p, &["changes", &sess(id)]);
        assert_eq!(ch["session"].as_str(), Some(id.as_str()), "{ch}");
        let files: Vec<&str> = ch["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["file"].as_str().unwrap())
            .collect();
        assert_eq!(files, [format!("f{i}.txt")], "{ch}");
    }
    // Undo a few of them; each touches only its own file.
    for (i, id) in ids.iter().enumerate().step_by(5) {
        let f = format!("f{i}.txt");
        let later = undo(&p, id, &[&turn_arg(&ids[(i + 1) % ids.len()])]);
        assert_eq!(
            later.written,
            BTreeSet::from([f.clone()]),
            "undo of {id:?}'s second turn: {}",
            later.json
        );
        assert_eq!(p.read(&f), b"1\n");
        let u = undo(&p, id, &[]);
        assert_eq!(
            u.written,
            BTreeSet::from([f.clone()]),
            "undo --session={id:?}: {}",
            u.json
        );
        assert!(u.conflicts.is_empty(), "{}", u.json);
        assert_eq!(p.read(&f), b"0\n");
        let flags: Vec<bool> = turns(&p, Some(id)).iter().map(|t| t.rolled_back).collect();
        assert_eq!(flags, [true, true], "{id:?}");
    }
    // Refs: one directory per session below refs/rewind/sessions, valid for stock git.
    let refs = refs_under(&p, &store, "refs/rewind/sessions/");
    let heads = refs
        .iter()
        .filter(|r| r.ends_with("/head") && r.matches('/').count() == 4)
        .count();
    assert_eq!(heads, ids.len(), "{refs:#?}");
    for r in &refs {
        sb.git(None, ["check-ref-format", r.as_str()]);
    }
    assert_fsck_clean(&sb, &store);
    let log = sb.git_in_run(&store, ["log", "--all", "--oneline"]);
    log.assert_success();
    assert!(log.stdout.lines().count() >= 4 * ids.len(), "{log}");
    let logged = logged_trees(&p, &store);
    assert!(all
        .iter()
        .all(|t| logged.contains(t.after.as_ref().unwrap())));
}

/// A turn may be called "head" (or "turns", "rolled-back"): nothing in an id is special.
#[test]
fn turn_ids_that_look_like_ref_parts_are_listed_once() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "0\n");
    let s = "S";
    for (i, t) in ["head", "turns", "rolled-back"].iter().enumerate() {
        begin(&p, s, t);
        p.file("a.txt", format!("{}\n", i + 1));
        end(&p, s, t);
    }
    undo(&p, s, &["--turn=rolled-back"]);
    let list = turns(&p, Some(s));
    let got: Vec<(&str, &str)> = list
        .iter()
        .map(|t| (t.session.as_str(), t.turn.as_str()))
        .collect();
    assert_eq!(
        got,
        [("S", "head"), ("S", "turns"), ("S", "rolled-back")],
        "{list:#?}"
    );
    let all = turns(&p, None);
    let got: Vec<(&str, &str)> = all
        .iter()
        .map(|t| (t.session.as_str(), t.turn.as_str()))
        .collect();
    assert_eq!(
        got,
        [("S", "head"), ("S", "turns"), ("S", "rolled-back")],
        "{all:#?}"
    );
}

/// Ids up to 200 bytes are valid, whatever bytes they are made of.
#[test]
fn ids_of_200_bytes_work_whatever_their_characters() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "0\n");
    let ids = [
        "é".repeat(100),
        " ".repeat(200),
        "/".repeat(200),
        "日本".repeat(33) + "xx",
    ];
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(id.len(), 200);
        let begun = rw(&p, &["--json", "turn", "begin", &sess(id), &turn_arg(id)]);
        assert!(
            begun.status.success(),
            "a 200-byte id ({:?}...) was refused: {begun}",
            id.chars().take(4).collect::<String>()
        );
        p.file("a.txt", format!("{}\n", i + 1));
        end(&p, id, id);
        let list = turns(&p, Some(id));
        assert_eq!(list.len(), 1);
        assert_eq!((&list[0].session, &list[0].turn), (id, id));
    }
    assert_fsck_clean(&sb, &p.store());
}

#[test]
fn invalid_ids_and_turn_states_are_errors() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n");
    let store = p.store();
    let long = "x".repeat(201);
    let long_utf8 = "€".repeat(67); // 201 bytes, 67 characters
    for bad in ["", long.as_str(), long_utf8.as_str()] {
        let cases: Vec<Vec<String>> = vec![
            vec!["turn".into(), "begin".into(), sess(bad), "--turn=1".into()],
            vec![
                "turn".into(),
                "begin".into(),
                "--session=s".into(),
                turn_arg(bad),
            ],
            vec![
                "turn".into(),
                "track-file".into(),
                sess(bad),
                "--turn=1".into(),
                "a.txt".into(),
            ],
            vec![
                "turn".into(),
                "track-file".into(),
                "--session=s".into(),
                turn_arg(bad),
                "a.txt".into(),
            ],
            vec!["turn".into(), "end".into(), sess(bad), "--turn=1".into()],
            vec![
                "turn".into(),
                "end".into(),
                "--session=s".into(),
                turn_arg(bad),
            ],
            vec!["turns".into(), sess(bad)],
            vec!["undo".into(), sess(bad)],
            vec!["changes".into(), sess(bad)],
        ];
        for args in cases {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            assert_eq!(expect_error(&p, &args), "invalid_name", "{args:?}");
        }
    }
    assert!(
        refs_under(&p, &store, "refs/rewind/").is_empty(),
        "refused ids leave no record"
    );
    assert_eq!(p.read("a.txt"), b"a\n");

    // track-file of a path outside the project is refused and begins nothing.
    let code = expect_error(
        &p,
        &[
            "turn",
            "track-file",
            "--session=s",
            "--turn=1",
            "../outside.txt",
        ],
    );
    assert!(!code.is_empty());
    assert!(
        refs_under(&p, &store, "refs/rewind/").is_empty(),
        "a refused track-file begins no turn"
    );

    // Turn states.
    assert_eq!(
        expect_error(&p, &["turn", "end", "--session=s", "--turn=never"]),
        "not_found"
    );
    begin(&p, "s", "1");
    begin(&p, "s", "1");
    p.file("a.txt", "b\n");
    let out = end(&p, "s", "1");
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(
        expect_error(&p, &["turn", "begin", "--session=s", "--turn=1"]),
        "turn_state"
    );
    assert_eq!(
        expect_error(&p, &["turn", "end", "--session=s", "--turn=1"]),
        "turn_state"
    );
    assert_eq!(
        expect_error(&p, &["turn", "end", "--session=s", "--turn=2"]),
        "not_found"
    );
    assert_eq!(
        expect_error(&p, &["turn", "end", "--session=other", "--turn=1"]),
        "not_found"
    );
    let count = sb.git_in(
        &store,
        ["rev-list", "--count", "refs/rewind/sessions/s/head"],
    );
    assert_eq!(
        count.trim(),
        "2",
        "begin twice is one begin; refused commands record nothing"
    );
    // A turn that changed nothing is still a turn.
    begin(&p, "s", "empty");
    assert!(end(&p, "s", "empty").is_empty());
    let list = turns(&p, Some("s"));
    assert_eq!(list.len(), 2);
    assert_eq!(
        (list[1].files, list[1].additions, list[1].deletions),
        (0, 0, 0)
    );
    assert_eq!(Some(&list[1].before), list[1].after.as_ref());

    // Undo of an unknown session or turn.
    for args in [
        vec!["undo", "--session=nobody"],
        vec!["undo", "--session=nobody", "--turn=1"],
        vec!["undo", "--session=s", "--turn=2"],
        vec!["undo", "--session=s", "--turn=2", "--file=a.txt"],
    ] {
        let code = expect_error(&p, &args);
        assert!(
            code == "turn_state" || code == "not_found",
            "{args:?}: code {code}"
        );
    }
    assert_eq!(p.read("a.txt"), b"b\n", "failed undos change nothing");
    assert!(!turns(&p, Some("s"))[0].rolled_back);
    // A malformed clock is an error for every command.
    assert_eq!(
        expect_error_at(&p, Some("yesterday"), &["turns"]),
        "bad_clock"
    );
    assert_eq!(
        expect_error_at(
            &p,
            Some("2030-13-01T00:00:00Z"),
            &["turn", "begin", "--session=s", "--turn=9"]
        ),
        "bad_clock"
    );
    // 200 ASCII bytes are fine.
    let max = "y".repeat(200);
    begin(&p, &max, &max);
    assert_eq!(turns(&p, Some(&max))[0].turn, max);
}

// ---------------------------------------------------------------------------
// Sessions side by side, unfinished turns
// ---------------------------------------------------------------------------

#[test]
fn two_interleaved_sessions_undo_independently() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("alpha.txt", lines("alpha", 4))
        .file("beta.txt", lines("beta", 4))
        .file("beta-old.txt", "old\n");
    let store = p.store();
    let t0 = p.track();

    begin(&p, "alpha", "1");
    p.file("alpha.txt", lines("ALPHA", 4))
        .file("alpha-new.txt", "a\n");
    end(&p, "alpha", "1");
    begin(&p, "beta", "1");
    p.file("beta.txt", lines("BETA", 2));
    end(&p, "beta", "1");
    begin(&p, "alpha", "2");
    p.file("alpha.txt", lines("ALPHA!", 5));
    end(&p, "alpha", "2");
    begin(&p, "beta", "2");
    p.file("beta-new.txt", "b\n");
    p.remove("beta-old.txt");
    end(&p, "beta", "2");
    let beta_state: Vec<_> = ["beta.txt", "beta-new.txt"]
        .iter()
        .map(|f| p.read(f))
        .collect();

    let all = turns(&p, None);
    let order: Vec<(&str, &str)> = all
        .iter()
        .map(|t| (t.session.as_str(), t.turn.as_str()))
        .collect();
    assert_eq!(
        order,
        [("alpha", "1"), ("beta", "1"), ("alpha", "2"), ("beta", "2")],
        "oldest first"
    );
    for rec in &all {
        assert_turn_matches_git(&p, &store, rec, None);
    }
    let alpha = turns(&p, Some("alpha"));
    assert_eq!(alpha.len(), 2);
    assert!(alpha.iter().all(|t| t.session == "alpha"));

    let current = p.track();
    let (want, restored, deleted) = undo_oracle(&p, &store, &alpha, &current);
    let u = undo(&p, "alpha", &[]);
    assert!(u.conflicts.is_empty(), "{}", u.json);
    assert_eq!(
        (&u.written, &u.deleted),
        (&restored, &deleted),
        "{}",
        u.json
    );
    assert_eq!(u.written, BTreeSet::from(["alpha.txt".to_string()]));
    assert_eq!(u.deleted, BTreeSet::from(["alpha-new.txt".to_string()]));
    let (_, entries) = project_entries(&p, &store);
    assert_entries_eq(&entries, &want, "after undo of alpha");
    let now: Vec<_> = ["beta.txt", "beta-new.txt"]
        .iter()
        .map(|f| p.read(f))
        .collect();
    assert_eq!(now, beta_state, "beta's files stay");
    assert!(!p.join("beta-old.txt").exists());
    let flags: Vec<(String, bool)> = turns(&p, None)
        .iter()
        .map(|t| (t.session.clone(), t.rolled_back))
        .collect();
    assert_eq!(
        flags,
        [
            ("alpha", true),
            ("beta", false),
            ("alpha", true),
            ("beta", false)
        ]
        .map(|(s, b)| (s.to_string(), b))
    );

    undo(&p, "beta", &[]);
    assert_eq!(p.track(), t0);
}

/// An open turn rolled back, the user's edit to one of its files, a redo giving back the rest
/// (that file left alone), then `redo --force` taking the same undo again: the second redo
/// moved the turn's start to the project as it found it, after the first had written the
/// turn's new file back, so the turn listed that file `modified` and undoing the whole turn
/// kept it (forty-seventh hostile pass, r74 (3)). A turn a redo gave back already stays
/// reopened where that redo found the project.
#[test]
fn a_second_redo_of_an_undo_keeps_where_the_first_gave_an_open_turn_back() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("c.txt", "c\n");
    begin(&p, "B", "1");
    p.file("b1.txt", "b1\n");
    p.file("c.txt", "c\nB\n");
    rwj(&p, &["undo", "--session", "B", "--last"]);
    p.file("c.txt", "c\nUSER\n");
    let first = rwj(&p, &["redo", "--session", "B"]);
    assert_eq!(first["conflicts"], serde_json::json!(["c.txt"]), "{first}");
    assert_eq!(p.read("b1.txt"), b"b1\n", "{first}");
    let second = rwj(&p, &["redo", "--session", "B", "--force"]);
    assert_eq!(p.read("c.txt"), b"c\nB\n", "{second}");
    p.file("b1.txt", "b1\nmore\n");
    let files = end(&p, "B", "1");
    let status = |name: &str| {
        let file = files.iter().find(|f| f["file"] == name);
        file.map(|f| f["status"].clone())
    };
    assert_eq!(status("b1.txt"), Some("added".into()), "{files:?}");
    let u = rwj(&p, &["undo", "--session", "B", "--last"]);
    assert_eq!(u["conflicts"], serde_json::json!([]), "{u}");
    assert!(!p.join("b1.txt").exists(), "the turn's new file goes: {u}");
    assert_eq!(
        p.read("c.txt"),
        b"c\nUSER\n",
        "the turn's c.txt was over the user's: {u}"
    );
}

/// An undo killed before it changed a file, run again to its end (two undo records), then a
/// redo (of the second), then the user's edits, one putting back what the undos wrote: the
/// next redo (of the stopped undo) wrote over that edit without a conflict (forty-eighth
/// hostile pass, r75 f4): it took what the stopped undo planned for the session's last word
/// there, not what the first redo wrote after it. What any finished redo since wrote
/// is the session's last word.
#[test]
fn a_redo_of_a_stopped_undo_keeps_an_edit_made_after_a_later_redo() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a", "o\n").file("b", "o\n");
    begin(&p, "A", "1");
    p.file("a", "t\n").file("b", "t\n");
    end(&p, "A", "1");
    let args = ["undo", "--session", "A", "--last"];
    killed_at(&sb, &p, &args, ("renameat2", 1));
    rwj(&p, &args);
    assert_eq!(
        (p.read("a"), p.read("b")),
        (b"o\n".to_vec(), b"o\n".to_vec())
    );
    let first = rwj(&p, &["redo", "--session", "A"]);
    assert_eq!(
        (p.read("a"), p.read("b")),
        (b"t\n".to_vec(), b"t\n".to_vec()),
        "{first}"
    );
    p.file("a", "o\n");
    fs::remove_file(p.join("b")).unwrap();
    let second = rwj(&p, &["redo", "--session", "A"]);
    assert_eq!(p.read("a"), b"o\n", "the user's edit stays: {second}");
    assert!(!p.join("b").exists(), "{second}");
    assert_eq!(
        second["conflicts"],
        serde_json::json!(["a", "b"]),
        "{second}"
    );
}

/// A project whose turn 1 of session A added a line to x.txt.
fn turn_adding_a_line(sb: &Sandbox) -> TestProject<'_> {
    let p = sb.project("proj");
    p.file("x.txt", "x\n");
    begin(&p, "A", "1");
    p.file("x.txt", "x\nA1\n");
    end(&p, "A", "1");
    p
}

/// `rewind ARGS` on `p` run again after a kill, once the user wrote `edit` (if any) in x.txt:
/// the edit stays, a conflict; with none, the run finishes, x.txt holding `finished`.
fn run_again_after_an_edit(
    p: &TestProject,
    args: &[&str],
    edit: Option<&[u8]>,
    finished: &[u8],
) -> Value {
    if let Some(edit) = edit {
        p.file("x.txt", edit);
    }
    let run = rwj(p, args);
    let conflicts: &[&str] = if edit.is_some() { &["x.txt"] } else { &[] };
    assert_eq!(run["conflicts"], serde_json::json!(conflicts), "{run}");
    let holds = edit.unwrap_or(finished);
    assert_eq!(p.read("x.txt"), holds, "{run}");
    run
}

/// `redo` of session A on `p` ([`turn_adding_a_line`]) after a kill, once the user wrote `edit`
/// (if any) in x.txt: the edit stays, a conflict; with none, the turn is given back whole.
fn redo_after_an_edit(p: &TestProject, edit: Option<&[u8]>) {
    let r = run_again_after_an_edit(p, &["redo", "--session", "A"], edit, b"x\nA1\n");
    if edit.is_none() {
        assert!(!turns(p, Some("A"))[0].rolled_back, "given back: {r}");
    }
}

/// `rewind ARGS` on `p`, killed at `at` (see [`run_killed`]), which must come.
fn killed_at(sb: &Sandbox, p: &TestProject, args: &[&str], at: (&str, u64)) {
    let killed = run_killed(sb, &p.path, None, args, at, DEFAULT_DEADLINE);
    assert!(killed, "`{}` was killed at {at:?}", args.join(" "));
}

/// An undo of turn 2 killed before it wrote x/f back to turn 1's bytes, then another session's
/// turn writing exactly those bytes there, then `undo --turn 1`: it wrote over the other
/// session's edit without a conflict (fiftieth hostile pass, r77 f1), because what the stopped
/// undo planned had been taken for the session's own (the stop-43 fix of r75 (5), (6), (8),
/// taken back). A path holding what a stopped run planned is someone else's unless known to be
/// the session's: a false conflict at worst.
#[test]
fn an_undo_after_a_killed_undo_never_takes_another_sessions_edit_for_its_own() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("x/f", "o\n").file("y/g", "o\n");
    begin(&p, "s", "1");
    p.file("x/f", "t1\n");
    end(&p, "s", "1");
    begin(&p, "s", "2");
    p.file("x/f", "t2\n").file("y/g", "t2\n");
    end(&p, "s", "2");
    let args = ["undo", "--session", "s", "--last"];
    assert!(run_killed_on(
        &sb,
        &p.path,
        &args,
        ("renameat2", 1),
        &p.join("x")
    ));
    assert_eq!(p.read("x/f"), b"t2\n", "killed before x/f");
    begin(&p, "q", "1");
    track_file(&p, "q", "1", "x/f");
    p.file("x/f", "t1\n");
    end(&p, "q", "1");
    let u = rwj(&p, &["undo", "--session", "s", "--turn", "1"]);
    assert!(
        u["conflicts"].as_array().unwrap().contains(&"x/f".into()),
        "{u}"
    );
    assert_eq!(
        p.read("x/f"),
        b"t1\n",
        "the other session's edit stays: {u}"
    );
}

/// An open turn's undo (rolling it back while open) killed before it changed a file: `undo
/// --last` again wrote nothing, answered success, and left the turn listed rolled back with
/// its work on disk (forty-ninth hostile pass, r76 f6): a turn rolled back while open was taken
/// for over, whatever undo rolled it back. One a stopped undo rolled back keeps its work, up
/// to where that undo found the project, for the undo run again.
#[test]
fn a_rerun_of_a_killed_undo_of_an_open_turn_finishes_it() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a", "o\n").file("b", "o\n");
    begin(&p, "A", "1");
    p.file("a", "t\n").file("n", "t\n");
    let args = ["undo", "--session", "A", "--last"];
    // (At its first rename in the project: the undo point's own index write renames too.)
    let killed = run_killed_on(&sb, &p.path, &args, ("renameat2", 1), &p.path);
    assert!(killed, "the undo was killed at its first change");
    assert_eq!(
        (p.read("a"), p.read("n")),
        (b"t\n".to_vec(), b"t\n".to_vec())
    );
    assert_eq!(turns(&p, Some("A"))[0].json["undo_stopped"], true);
    let u = rwj(&p, &args);
    assert_eq!(u["conflicts"], serde_json::json!([]), "{u}");
    assert_eq!(p.read("a"), b"o\n", "{u}");
    assert!(!p.join("n").exists(), "{u}");
    let listed = turns(&p, Some("A"));
    assert!(listed[0].rolled_back, "{u}");
    assert_eq!(listed[0].json["undo_stopped"], false, "{u}");
    let r = rwj(&p, &["redo", "--session", "A"]);
    assert_eq!(
        (p.read("a"), p.read("n")),
        (b"t\n".to_vec(), b"t\n".to_vec()),
        "{r}"
    );
}

/// An undo killed after it wrote x/a and before y/b, run again and killed again before y/b,
/// the user putting the turn's bytes back in x/a between the kills or after the second: the
/// third run wrote over that edit without a conflict (forty-ninth hostile pass, r76 f1): only
/// the last stopped run's plan and time were looked at. Every undo stopped since the turn was
/// last rolled back to the end counts.
#[test]
fn a_third_run_of_an_undo_killed_twice_keeps_an_edit_after_the_first_kill() {
    let args = ["undo", "--session", "A", "--last"];
    for edit_between_kills in [true, false] {
        // Killed at its first rename in y/; x/a is swapped first, on another thread, most times.
        let killed_between = |sb: &Sandbox| {
            let p = sb.project("proj");
            p.file("x/a", "o\n").file("y/b", "o\n");
            begin(&p, "A", "1");
            p.file("x/a", "t\n").file("y/b", "t\n");
            end(&p, "A", "1");
            assert!(run_killed_on(
                sb,
                &p.path,
                &args,
                ("renameat2", 1),
                &p.join("y")
            ));
            p.read("x/a") == b"o\n" && p.read("y/b") == b"t\n"
        };
        let sb = (0..20)
            .map(|_| Sandbox::new())
            .find(killed_between)
            .expect("a kill landed between x/a and y/b");
        let p = sb.project("proj");
        if edit_between_kills {
            p.file("x/a", "t\n");
        }
        assert!(run_killed_on(
            &sb,
            &p.path,
            &args,
            ("renameat2", 1),
            &p.join("y")
        ));
        if !edit_between_kills {
            p.file("x/a", "t\n");
        }
        let u = rwj(&p, &args);
        assert_eq!(p.read("x/a"), b"t\n", "the user's edit stays: {u}");
        assert_eq!(u["conflicts"], serde_json::json!(["x/a"]), "{u}");
        assert_eq!(p.read("y/b"), b"o\n", "{u}");
    }
}

/// A redo killed after it wrote a file, then the user putting back by hand what the undo had
/// left: the next `redo`, which takes the same undo, wrote over that edit without a conflict
/// (the same cause as r73 (8), found beside it in stop 43). A stopped redo's commit names when
/// it was about to change files; a file it planned that changed since is a conflict, unless it
/// holds what the redo writes.
#[test]
fn a_rerun_of_a_killed_redo_keeps_an_edit_that_put_the_undos_bytes_back() {
    for user_edits in [true, false] {
        let sb = Sandbox::new();
        let p = turn_adding_a_line(&sb);
        rwj(&p, &["undo", "--session", "A", "--last"]);
        assert_eq!(p.read("x.txt"), b"x\n");
        let args = ["redo", "--session", "A"];
        killed_at(&sb, &p, &args, ("unlinkat", 1));
        assert_eq!(p.read("x.txt"), b"x\nA1\n", "the stopped redo wrote x.txt");
        redo_after_an_edit(&p, user_edits.then_some(&b"x\n"[..]));
    }
}

/// An undo killed before it changed a file, then the user writing by hand exactly what it
/// planned there, then `redo`: the redo wrote over the edit without a conflict (forty-ninth
/// hostile pass, r76 (3)): from the disk, the edit could not be told from the stopped run's own
/// write. The sweep after a kill records in the store which planned files the run certainly
/// did not write (their temp files still held the staged bytes), and the run's record names
/// its token. Without the edit, the redo gives the turn back with nothing to write.
#[test]
fn a_redo_after_an_undo_killed_before_it_wrote_keeps_an_edit_of_the_planned_bytes() {
    // (With the killed run's temp file removed by the user first, as `git clean` does: what
    // the run did is in its journal, not in what it left on disk; r80 (1).)
    for (user_edits, clean) in [(true, false), (true, true), (false, false)] {
        let sb = Sandbox::new();
        let p = turn_adding_a_line(&sb);
        // Killed at the swap of x.txt (in the project, not the undo point's index rename).
        let args = ["undo", "--session", "A", "--last"];
        assert!(run_killed_on(
            &sb,
            &p.path,
            &args,
            ("renameat2", 1),
            &p.path
        ));
        assert_eq!(p.read("x.txt"), b"x\nA1\n", "killed before x.txt");
        if clean {
            let temps = fs::read_dir(&p.path).unwrap().map(|e| e.unwrap().path());
            let temps: Vec<_> = temps
                .filter(|t| t.to_string_lossy().contains(".rewind-"))
                .collect();
            assert!(!temps.is_empty(), "the killed run's temp file is there");
            temps.iter().for_each(|t| fs::remove_file(t).unwrap());
        }
        redo_after_an_edit(&p, user_edits.then_some(&b"x\n"[..]));
    }
}

/// A turn that only made a file executable, its undo killed before it changed the mode, then
/// the user making it not executable by hand (what the undo planned), then `redo`: the redo made
/// it executable again without a conflict (fifty-third hostile pass, r80 (2)): the bytes were
/// the same, so what the run left on disk could not tell. What the run did is in its journal.
#[test]
fn a_redo_after_an_undo_killed_before_a_mode_change_keeps_the_users_mode() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a", "a\n").file("b", "b\n");
    begin(&p, "s", "1");
    fs::set_permissions(p.join("a"), fs::Permissions::from_mode(0o755)).unwrap();
    p.file("b", "b1\n");
    end(&p, "s", "1");
    let args = ["undo", "--session", "s", "--last"];
    assert!(run_killed_on(
        &sb,
        &p.path,
        &args,
        ("renameat2", 1),
        &p.path
    ));
    let mode = |p: &TestProject| fs::metadata(p.join("a")).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&p), 0o755, "killed before the mode changed");
    fs::set_permissions(p.join("a"), fs::Permissions::from_mode(0o644)).unwrap();
    let r = rwj(&p, &["redo", "--session", "s"]);
    assert!(
        r["conflicts"].as_array().unwrap().contains(&"a".into()),
        "{r}"
    );
    assert_eq!(mode(&p), 0o644, "the user's mode stays: {r}");
}

/// An undo killed at the end (its last record not written), the session going on, and a prune a
/// retention later dropping the store's record of what the run did (fifty-third hostile pass,
/// r80 (4)): its redo then took the run for one that did nothing, listed every file a conflict
/// and brought nothing back. A run a session's chain names keeps its record.
#[test]
fn a_prune_keeps_the_record_of_a_stopped_run_its_session_names() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a", "a0\n").file("k", "k\n");
    begin(&p, "s", "1");
    p.file("a", "a1\n").file("n", "new\n");
    end(&p, "s", "1");
    let args = ["undo", "--session", "s", "--last"];
    let journal = p.store().join("rewind-restore-journal");
    assert!(run_killed_on(&sb, &p.path, &args, ("unlink", 1), &journal));
    assert!(!p.join("n").exists(), "the stopped undo deleted n");
    p.track();
    let later = |days: i64| {
        let at = std::time::SystemTime::now() + Duration::from_secs(days as u64 * 86_400);
        let secs = at.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
        chrono::DateTime::from_timestamp(secs, 0)
            .unwrap()
            .to_rfc3339()
    };
    let at = |days: i64, args: &[&str]| {
        let run = p
            .rewind_command(args)
            .env("REWIND_NOW", later(days))
            .output()
            .unwrap();
        assert!(run.status.success(), "{args:?}: {run:?}");
    };
    at(6, &["turn", "begin", "--session", "s", "--turn", "2"]);
    p.file("z", "z\n");
    at(6, &["turn", "end", "--session", "s", "--turn", "2"]);
    at(8, &["prune"]);
    at(8, &["undo", "--session", "s", "--last"]);
    let mut redo = p.rewind_command(["--json", "redo", "--session", "s"]);
    let r = redo.env("REWIND_NOW", later(8)).output().unwrap();
    assert!(r.status.success(), "{r:?}");
    let mut redo = p.rewind_command(["--json", "redo", "--session", "s"]);
    let r = redo.env("REWIND_NOW", later(8)).output().unwrap();
    let out = String::from_utf8_lossy(&r.stdout);
    assert!(
        r.status.success() && out.contains("\"conflicts\":[]"),
        "{r:?}"
    );
    assert_eq!(
        (p.read("a"), p.read("n")),
        (b"a1\n".to_vec(), b"new\n".to_vec()),
        "{out}"
    );
}

/// An undo of many files killed before it changed one, the user putting every file back by hand
/// (what the undo planned), then a command whose sweep ran with the store's disk full: the record
/// of what the run did not do was cut short at a page, the journal removed all the same, and the
/// redo overwrote the edits missing from the record (fifty-third hostile pass, r80 (3)). The
/// record is written whole, and where it cannot be, the journal stays.
#[test]
fn a_sweep_on_a_full_disk_keeps_what_the_stopped_run_did_not_do() {
    let sb = Sandbox::new();
    fs::create_dir_all(&sb.data_dir).unwrap();
    let tmpfs = std::ffi::OsStr::new("tmpfs");
    let size = std::ffi::OsStr::new("size=8m");
    let _disk = Mounted::new(
        &[
            std::ffi::OsStr::new("-t"),
            tmpfs,
            "-o".as_ref(),
            size,
            tmpfs,
        ],
        &sb.data_dir,
    );
    let p = sb.project("proj");
    let long = "x".repeat(60);
    let names: Vec<String> = (0..150).map(|i| format!("y/{long}_{i}")).collect();
    for n in &names {
        p.file(n, format!("v0 {n}\n"));
    }
    begin(&p, "s", "1");
    for n in &names {
        p.file(n, format!("v1 {n}\n"));
    }
    end(&p, "s", "1");
    let args = ["undo", "--session", "s", "--last"];
    // (An undo and its redo first: the record of runs holds their lines, part of a page.)
    rwj(&p, &args);
    rwj(&p, &["redo", "--session", "s"]);
    assert!(run_killed(
        &sb,
        &p.path,
        None,
        &args,
        ("syncfs", 1),
        DEFAULT_DEADLINE
    ));
    for n in &names {
        p.file(n, format!("v0 {n}\n"));
    }
    let fill = sb.data_dir.join("fill");
    let filled = std::process::Command::new("dd")
        .args(["if=/dev/zero", "bs=4k", &format!("of={}", fill.display())])
        .output()
        .unwrap();
    assert!(!filled.status.success(), "dd stops at a full disk");
    let _ = p.rewind(["track"]); // its sweep, on the full disk
    fs::remove_file(&fill).unwrap();
    let r = rwj(&p, &["redo", "--session", "s"]);
    let overwritten: Vec<&String> = names
        .iter()
        .filter(|n| p.read(n.as_str()) != format!("v0 {n}\n").into_bytes())
        .collect();
    let conflicts = r["conflicts"].as_array().unwrap().len();
    assert!(
        overwritten.is_empty(),
        "{} overwritten, {conflicts} conflicts",
        overwritten.len()
    );
}

/// The same after an undo killed once it had finished its files and removed its journal, before
/// its own record said so: the record of what the run did not write is the run's own, written
/// before its journal goes. Without it, what the run wrote was taken for someone's edit (a
/// false conflict on every file).
#[test]
fn a_redo_after_an_undo_killed_before_its_last_record_takes_its_writes_for_its_own() {
    let sb = Sandbox::new();
    let p = turn_adding_a_line(&sb);
    let args = ["undo", "--session", "A", "--last"];
    // Killed as its last record takes `packed-refs.lock` (the record before its changes took
    // it twice), after the journal is removed.
    let lock = p.store().join("packed-refs.lock");
    let killed = run_killed_on(&sb, &p.path, &args, ("openat", 3), &lock);
    assert!(killed, "killed at its last record");
    assert!(!p.store().join("rewind-restore-journal").exists());
    assert_eq!(p.read("x.txt"), b"x\n", "the undo wrote x.txt");
    assert_eq!(turns(&p, Some("A"))[0].json["undo_stopped"], true);
    let r = rwj(&p, &["redo", "--session", "A"]);
    assert_eq!(r["conflicts"], serde_json::json!([]), "{r}");
    assert_eq!(p.read("x.txt"), b"x\nA1\n", "{r}");
}

/// `changes` counted the user's lines written between two turns as the session's, labelled as
/// the turns' own (`unannounced`), and listed a file a turn created that an undo had since
/// removed (fifty-second hostile pass, r79 (1)). A rolled-back turn counts only for what its
/// undo left; a file edited between turns keeps its net totals (as `git diff --numstat` counts
/// them) and is `shared`.
#[test]
fn changes_leave_out_a_rolled_back_turn_and_call_a_file_edited_between_turns_shared() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("f", "1\n").file("g", "1\n");
    let first = p.track();
    begin(&p, "s", "1");
    p.file("f", "1\nturn 1\n").file("g", "1\nturn 1\n");
    end(&p, "s", "1");
    p.file("f", "1\nturn 1\nuser\nuser\n");
    begin(&p, "s", "2");
    p.file("f", "1\nturn 1\nuser\nuser\nturn 2\n");
    end(&p, "s", "2");
    begin(&p, "s", "3");
    p.file("n.txt", "new\n");
    end(&p, "s", "3");
    rwj(&p, &["undo", "--session", "s", "--last"]);
    assert!(!p.join("n.txt").exists());
    let last = p.track();
    let changes = rwj(&p, &["changes", "--session", "s"]);
    let files = changes["files"].as_array().unwrap();
    let listed: Vec<(&str, &str)> = files
        .iter()
        .map(|f| (f["file"].as_str().unwrap(), f["origin"].as_str().unwrap()))
        .collect();
    assert_eq!(listed, [("f", "shared"), ("g", "unannounced")], "{changes}");
    let numstat = git_numstat(&sb, &p.store(), &first, &last);
    for file in files {
        let path = file["file"].as_str().unwrap();
        let counts = (
            file["additions"].as_u64().unwrap(),
            file["deletions"].as_u64().unwrap(),
        );
        assert_eq!(numstat[path], Some(counts), "{path}: {changes}");
    }
}

/// Turn 2's `undo --last` killed after it wrote `y/d`, the user putting turn 2's bytes back,
/// the undo run again (it left `y/d` alone, a conflict), then `undo --last` again: that undo
/// (from turn 1, over turn 2's file left alone) wrote over the user's edit without a conflict
/// (fifty-third hostile pass, r80 (4)): the stopped undo stopped counting once a later one of
/// the turn finished, though that one left files alone. It counts until one rolls the turn back
/// to the end.
#[test]
fn an_undo_after_a_rerun_that_left_a_file_alone_keeps_the_edit_there() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a", "a0\n").file("y/d", "d0\n");
    begin(&p, "s", "1");
    p.file("a", "a1\n");
    end(&p, "s", "1");
    begin(&p, "s", "2");
    p.file("y/d", "d2\n");
    end(&p, "s", "2");
    let args = ["undo", "--session", "s", "--last"];
    assert!(run_killed_on(
        &sb,
        &p.path,
        &args,
        ("unlinkat", 1),
        &p.join("y")
    ));
    assert_eq!(p.read("y/d"), b"d0\n", "the stopped undo wrote y/d");
    p.file("y/d", "d2\n");
    let rerun = rwj(&p, &args);
    assert_eq!(rerun["conflicts"], serde_json::json!(["y/d"]), "{rerun}");
    let u = rwj(&p, &args);
    assert!(
        u["conflicts"].as_array().unwrap().contains(&"y/d".into()),
        "{u}"
    );
    assert_eq!(p.read("y/d"), b"d2\n", "the user's edit stays: {u}");
}

/// An undo killed after it changed every file, bringing back a file the turn had deleted, then
/// the user deleting it again, then `undo --last`: the rerun wrote the file back without a
/// conflict (forty-eighth hostile pass, r75 (1)): no change time stands at an absent path. By
/// the store's record the stopped run wrote the file; gone since, it was deleted since, a
/// conflict. Without the deletion, the rerun finishes.
#[test]
fn a_rerun_of_a_killed_undo_keeps_a_file_deleted_again_after_it() {
    for user_deletes in [true, false] {
        let sb = Sandbox::new();
        let p = sb.project("proj");
        p.file("x.txt", "x\n").file("gone.txt", "g\n");
        begin(&p, "A", "1");
        p.file("x.txt", "x\nA1\n");
        p.remove("gone.txt");
        end(&p, "A", "1");
        // Killed at the removal of its journal: every file changed, its last record not written.
        let args = ["undo", "--session", "A", "--last"];
        let journal = p.store().join("rewind-restore-journal");
        assert!(run_killed_on(&sb, &p.path, &args, ("unlink", 1), &journal));
        assert_eq!(p.read("gone.txt"), b"g\n", "the stopped undo wrote it back");
        assert_eq!(turns(&p, Some("A"))[0].json["undo_stopped"], true);
        if user_deletes {
            p.remove("gone.txt");
        }
        let u = rwj(&p, &args);
        let conflicts: &[&str] = if user_deletes { &["gone.txt"] } else { &[] };
        assert_eq!(u["conflicts"], serde_json::json!(conflicts), "{u}");
        assert_eq!(p.join("gone.txt").exists(), !user_deletes, "{u}");
        assert_eq!(p.read("x.txt"), b"x\n", "{u}");
    }
}

/// An undo killed after it wrote a file back, then the user putting the turn's bytes back in
/// that file by hand: `undo --last`, which takes the turn again, wrote over the user's edit
/// without a conflict (forty-sixth hostile pass, r73 (8)): the stopped run's own write could
/// not be told from the edit. A stopped undo's commit names when it was about to change files;
/// a file it planned that changed since is a conflict, unless it holds what the undo writes
/// (the stopped run's write, which the rerun finds done).
#[test]
fn a_rerun_of_a_killed_undo_keeps_an_edit_that_put_the_turns_bytes_back() {
    for user_edits in [true, false] {
        let sb = Sandbox::new();
        let p = turn_adding_a_line(&sb);
        // Killed once x.txt is swapped in, removing what came out (the swapping thread's first
        // `unlinkat`).
        let args = ["undo", "--session", "A", "--last"];
        killed_at(&sb, &p, &args, ("unlinkat", 1));
        assert_eq!(p.read("x.txt"), b"x\n", "the stopped undo wrote x.txt back");
        assert_eq!(turns(&p, Some("A"))[0].json["undo_stopped"], true);
        let edit = user_edits.then_some(&b"x\nA1\n"[..]);
        let u = run_again_after_an_edit(&p, &args, edit, b"x\n");
        if !user_edits {
            assert_eq!(turns(&p, Some("A"))[0].json["undo_stopped"], false, "{u}");
        }
    }
}

/// An undo killed once it had recorded itself (unfinished) and before its files all changed
/// left its turn marked rolled back: `undo --last` then said the session had no turn left to
/// undo though the files still held the turn's work (forty-second hostile pass, r69 (7)), and
/// `undo --last-session` took the turn before with it. A turn a stopped undo rolled back is
/// listed `undo_stopped`, and both take it again, alone, to the end.
#[test]
fn undo_last_finishes_an_undo_killed_before_its_files_changed() {
    for how in ["--last", "--last-session"] {
        let sb = Sandbox::new();
        let p = sb.project("proj");
        let names = ["a", "b", "c", "d"];
        p.file("earlier", "0\n");
        for name in names {
            p.file(name, "0\n");
        }
        begin(&p, "A", "1");
        p.file("earlier", "1\n");
        end(&p, "A", "1");
        begin(&p, "A", "2");
        for name in names {
            p.file(name, "1\n");
        }
        end(&p, "A", "2");
        // Killed at its first swap (each thread's first `renameat2`): recorded, unfinished.
        let args = ["undo", "--session", "A", "--last"];
        killed_at(&sb, &p, &args, ("renameat2", 1));
        let listed = turns(&p, Some("A"));
        assert!(listed[1].rolled_back, "recorded before the swap");
        assert_eq!(listed[1].json["undo_stopped"], true, "{}", listed[1].json);
        assert_eq!(listed[0].json["undo_stopped"], false, "{}", listed[0].json);
        let u = match how {
            "--last" => rwj(&p, &["undo", "--session", "A", "--last"]),
            _ => rwj(&p, &["undo", "--last-session"]),
        };
        assert_eq!(
            u["conflicts"].as_array().map(Vec::len),
            Some(0),
            "{how}: {u}"
        );
        for name in names {
            assert_eq!(p.read(name), b"0\n", "{how}: {name} undone: {u}");
        }
        assert_eq!(p.read("earlier"), b"1\n", "{how}: turn 1 stays: {u}");
        let listed = turns(&p, Some("A"));
        assert_eq!(listed[1].json["undo_stopped"], false, "{how}: finished");
        assert!(!listed[0].rolled_back, "{how}: turn 1 stays done");
        // Two undos took the turn back, each in part: each has its redo (the stopped one's
        // brings back what it changed before the kill), and the turn is back with the second.
        let redo = || rwj(&p, &["redo", "--session", "A"]);
        let (first, second) = (redo(), redo());
        for name in names {
            assert_eq!(
                p.read(name),
                b"1\n",
                "{how}: {name} redone: {first} {second}"
            );
        }
        assert!(
            !turns(&p, Some("A"))[1].rolled_back,
            "{how}: given back: {second}"
        );
    }
}

/// r73 F2: another session's undo stopped (killed) before it wrote `a`, then the turn's agent
/// wrote exactly what that undo had planned there: the turn's change looked like the undo's
/// and was hidden, and the other session's redo then wrote over it without a conflict. A
/// stopped undo's tree is only what it planned: it explains no change, and its redo does not
/// take it for what the undo left. (r74 F4: the same with the turn still open at the redo,
/// which the redo did not look at.)
#[test]
fn a_stopped_undo_neither_hides_nor_overwrites_a_turns_edit() {
    for ended in [true, false] {
        let sb = Sandbox::new();
        let p = sb.project("proj");
        p.file("a", "a\n").file("b", "b\n");
        begin(&p, "A", "1");
        p.file("a", "a\nA1\n").file("b", "b\nA1\n");
        end(&p, "A", "1");
        begin(&p, "B", "1");
        // Killed at its sync, after it recorded itself and before any file changed.
        let args = ["undo", "--session", "A", "--last"];
        killed_at(&sb, &p, &args, ("syncfs", 1));
        assert_eq!(p.read("a"), b"a\nA1\n", "nothing written");
        p.file("a", "a\n"); // B's agent: what the stopped undo had planned
        if ended {
            let files = end(&p, "B", "1");
            let listed: Vec<&str> = files.iter().filter_map(|f| f["file"].as_str()).collect();
            assert_eq!(listed, ["a"], "the turn's change: {files:?}");
        }
        let r = rwj(&p, &["redo", "--session", "A"]);
        assert_eq!(p.read("a"), b"a\n", "ended {ended}: B's edit stays: {r}");
        let conflicts = r["conflicts"].as_array().unwrap();
        assert!(conflicts.iter().any(|c| c == "a"), "ended {ended}: {r}");
    }
}

#[test]
fn unfinished_turns_are_listed_and_undoable() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", lines("a", 3)).file("b.txt", lines("b", 3));
    let store = p.store();
    let t0 = p.track();
    let s = "crashy";

    begin(&p, s, "1");
    p.file("a.txt", lines("A", 3));
    end(&p, s, "1");
    begin(&p, s, "2");
    p.file("b.txt", lines("B", 4)).file("c.txt", "c\n");
    // ... and the agent's runtime dies: turn 2 never ends.
    let list = turns(&p, Some(s));
    assert_eq!(list.len(), 2);
    assert!(list[0].ended_at.is_some());
    assert!(
        list[1].ended_at.is_none() && list[1].after.is_none(),
        "{}",
        list[1].json
    );
    assert_eq!(list[1].json["ended_at"], Value::Null);
    assert_eq!(list[1].json["after"], Value::Null);
    assert_eq!(list[1].before, list[0].after.clone().unwrap());

    // changes counts the open turn up to now.
    let ch = rwj(&p, &["changes", &sess(s)]);
    let rows = file_rows(ch["files"].as_array().unwrap(), "changes");
    assert_eq!(rows, git_rows(&p, &store, &t0, &p.track()), "{ch}");

    let current = p.track();
    let (want, _, _) = undo_oracle(&p, &store, &list, &current);
    let u = undo(&p, s, &[]);
    assert!(u.conflicts.is_empty(), "{}", u.json);
    assert_eq!(
        u.deleted,
        BTreeSet::from(["c.txt".to_string()]),
        "{}",
        u.json
    );
    let (now, entries) = project_entries(&p, &store);
    assert_entries_eq(&entries, &want, "after undo");
    assert_eq!(now, t0);
    assert!(turns(&p, Some(s)).iter().all(|t| t.rolled_back));

    // A crashed turn followed by a new one: both listed, both undone.
    let s = "crash-then-go-on";
    begin(&p, s, "x");
    p.file("a.txt", "crash edit\n");
    begin(&p, s, "y");
    p.file("b.txt", "y edit\n");
    end(&p, s, "y");
    let list = turns(&p, Some(s));
    let got: Vec<(&str, bool)> = list
        .iter()
        .map(|t| (t.turn.as_str(), t.ended_at.is_some()))
        .collect();
    assert_eq!(got, [("x", false), ("y", true)], "{list:#?}");
    // The crashed turn ended where the next began.
    assert_eq!(list[0].after.as_ref(), Some(&list[1].before), "{list:#?}");
    undo(&p, s, &[]);
    assert_eq!(p.track(), t0);
}

// ---------------------------------------------------------------------------
// changes
// ---------------------------------------------------------------------------

#[test]
fn changes_totals_match_git_numstat() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    let a0 = lines("a", 30);
    p.file("a.txt", &a0)
        .file("c.txt", lines("c", 7))
        .file("d.txt", lines("d", 5))
        .file("u.txt", "user\n")
        .file("m.txt", "mode\n")
        .file("g.bin", b"\0one\ntwo\n");
    let store = p.store();
    let s = "totals";

    begin(&p, s, "1");
    p.file("a.txt", splice(&a0, 5, 3, &["five", "six"]));
    p.file("d.txt", lines("D", 5));
    p.file("e.txt", lines("e", 4));
    p.file("g.bin", b"\0one\nthree\n"); // binary: git counts no lines (r116 (5))
    let end_1 = end(&p, s, "1");
    p.file("u.txt", "user edited between turns\n"); // not the agent's
    begin(&p, s, "2");
    p.file("b.txt", lines("b", 9));
    p.remove("c.txt");
    p.file("d.txt", lines("d", 5)); // back to the original: no net change
    let a1 = String::from_utf8(p.read("a.txt")).unwrap();
    p.file("a.txt", splice(&a1, 20, 0, &["x", "y", "z"]));
    end(&p, s, "2");
    begin(&p, s, "3");
    let b = String::from_utf8(p.read("b.txt")).unwrap();
    p.file("b.txt", splice(&b, 2, 2, &["B2"]));
    p.remove("e.txt"); // created in turn 1: no net change
    p.file("f.txt", "f\n");
    p.chmod("m.txt", 0o755);
    p.file("h.txt", "text\n".repeat(3));
    end(&p, s, "3");
    begin(&p, s, "4");
    p.file("h.txt", b"text\n\0binary now\n"); // text to binary
    end(&p, s, "4");

    let list = turns(&p, Some(s));
    assert_eq!(list.len(), 4);
    assert_turn_matches_git(&p, &store, &list[0], Some(&end_1));
    // Oracle: per path, git's numstat from the before of the first turn that touched it to the
    // after of the last one; paths with no net change are not listed.
    let mut want = BTreeMap::new();
    let mut touched: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for (i, rec) in list.iter().enumerate() {
        assert_turn_matches_git(&p, &store, rec, None);
        for path in changed_paths(&p, &store, &rec.before, rec.after.as_ref().unwrap()) {
            touched
                .entry(path)
                .and_modify(|e| e.1 = i)
                .or_insert((i, i));
        }
    }
    for (path, (first, last)) in &touched {
        let rows = git_rows(
            &p,
            &store,
            &list[*first].before,
            list[*last].after.as_ref().unwrap(),
        );
        if let Some(row) = rows.get(path) {
            want.insert(path.clone(), row.clone());
        }
    }
    assert_eq!(
        want.keys().collect::<Vec<_>>(),
        ["a.txt", "b.txt", "c.txt", "f.txt", "g.bin", "h.txt", "m.txt"],
        "test setup"
    );
    assert!(
        want["g.bin"].3 && want["h.txt"].3 && !want["a.txt"].3,
        "test setup: {want:?}"
    );

    let ch = rwj(&p, &["changes", &sess(s)]);
    assert_eq!(ch["session"].as_str(), Some(s));
    let got = file_rows(ch["files"].as_array().expect("files array"), "changes");
    assert_eq!(got, want, "per-file totals: {ch}");
    let adds: u64 = want.values().map(|r| r.1).sum();
    let dels: u64 = want.values().map(|r| r.2).sum();
    assert_eq!(ch["total_files"].as_u64(), Some(want.len() as u64), "{ch}");
    assert_eq!(ch["total_additions"].as_u64(), Some(adds), "{ch}");
    assert_eq!(ch["total_deletions"].as_u64(), Some(dels), "{ch}");
    // No edit was made between turns on an agent's path, so the whole session is also
    // git's diff from the first before to the last after, minus the user's file.
    let mut whole = git_rows(&p, &store, &list[0].before, list[3].after.as_ref().unwrap());
    whole.remove("u.txt");
    assert_eq!(got, whole);

    // Human output: a binary file says so in place of its counts; the totals line ends it.
    let run = rw(&p, &["changes", &sess(s)]);
    run.assert_success();
    for (path, row) in &want {
        let line = run
            .stdout
            .lines()
            .find(|l| l.ends_with(&format!(" {path}")));
        let line = line.unwrap_or_else(|| panic!("no line for {path}: {run}"));
        let counts = format!("+{:<5} -{}", row.1, row.2);
        let shown = if row.3 { "binary" } else { counts.as_str() };
        assert!(line.contains(shown), "{path}: {line:?}");
    }
    let last = run.stdout.lines().last().unwrap_or_default().to_string();
    assert!(
        last.contains(&format!("+{adds}"))
            && last.contains(&format!("-{dels}"))
            && last.contains(&want.len().to_string()),
        "{run}"
    );
}

// ---------------------------------------------------------------------------
// The human table and the fixed clock
// ---------------------------------------------------------------------------

#[test]
fn turns_table_shows_relative_age_with_a_fixed_clock() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", lines("a", 4));
    let s = "clock";
    // "early" starts an hour before "late"; every command sees REWIND_NOW.
    begin_at(&p, Some(&at(-3600)), s, "early");
    p.file("a.txt", lines("A", 4));
    end_at(&p, Some(&at(-3500)), s, "early");
    begin_at(&p, Some(&at(0)), s, "late");
    p.file("a.txt", lines("A", 2)).file("b.txt", lines("b", 3));
    end_at(&p, Some(&at(20)), s, "late");

    let list = turns_at(&p, Some(&at(30)), Some(s));
    assert_eq!(list.len(), 2);
    assert_eq!(
        epoch_secs(&list[0].started_at),
        epoch_secs(&at(-3600)),
        "{}",
        list[0].json
    );
    assert_eq!(
        epoch_secs(list[0].ended_at.as_deref().unwrap()),
        epoch_secs(&at(-3500))
    );
    assert_eq!(
        epoch_secs(&list[1].started_at),
        epoch_secs(&at(0)),
        "{}",
        list[1].json
    );
    assert_eq!(
        epoch_secs(list[1].ended_at.as_deref().unwrap()),
        epoch_secs(&at(20))
    );

    // (seconds after "late" started, its age, the age of "early" (3600 s older))
    let cases = [
        (30, "just now", "1 hour ago"),
        (300, "5 minutes ago", "1 hour ago"),
        (3 * 3600, "3 hours ago", "4 hours ago"),
        (2 * 86400, "2 days ago", "2 days ago"),
    ];
    for (offset, late_age, early_age) in cases {
        let now = at(offset);
        let run = rw_at(&p, Some(&now), &["turns", &sess(s)]);
        run.assert_success();
        assert!(
            !run.stdout.contains('\x1b'),
            "no colours when stdout is not a terminal: {run}"
        );
        let row = |turn: &str| -> (usize, String) {
            let found: Vec<(usize, &str)> = run
                .stdout
                .lines()
                .enumerate()
                .filter(|(_, l)| l.split_whitespace().any(|w| w == turn))
                .collect();
            assert_eq!(found.len(), 1, "one row for {turn}: {run}");
            (found[0].0, found[0].1.to_string())
        };
        for (rec, age) in [(&list[0], early_age), (&list[1], late_age)] {
            let (_, line) = row(&rec.turn);
            assert!(
                line.trim_start().starts_with(age),
                "REWIND_NOW={now}: expected {age:?} in {line:?}\n{run}"
            );
            let words: Vec<&str> = line.split_whitespace().collect();
            for want in [
                s.to_string(),
                rec.files.to_string(),
                format!("+{}", rec.additions),
                format!("-{}", rec.deletions),
            ] {
                assert!(
                    words.contains(&want.as_str()),
                    "{want:?} missing from {line:?}\n{run}"
                );
            }
        }
        assert!(row("early").0 < row("late").0, "oldest first: {run}");
    }
}

/// `undo --last` is the "undo what the agent just did" button: pressed four times on a
/// four-turn session, it walks back one turn at a time.
#[test]
fn undo_last_four_times_walks_back_one_turn_at_a_time() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("f.txt", "v0\n");
    let s = "walk";
    for t in 1..=4 {
        begin(&p, s, &t.to_string());
        p.file("f.txt", format!("v{t}\n"));
        p.file(format!("t{t}.txt"), "made\n");
        end(&p, s, &t.to_string());
    }
    for t in (1..=4).rev() {
        let u = undo(&p, s, &["--last"]);
        assert_eq!(
            p.read("f.txt"),
            format!("v{}\n", t - 1).as_bytes(),
            "{}",
            u.json
        );
        assert!(!p.join(format!("t{t}.txt")).exists(), "{}", u.json);
        for earlier in 1..t {
            assert!(p.join(format!("t{earlier}.txt")).exists(), "{}", u.json);
        }
        let rolled: Vec<bool> = turns(&p, Some(s)).iter().map(|t| t.rolled_back).collect();
        let want: Vec<bool> = (1..=4).map(|n| n >= t).collect();
        assert_eq!(rolled, want, "{}", u.json);
    }
    assert_eq!(expect_error(&p, &["undo", &sess(s), "--last"]), "not_found");
}

/// One rule for unknown sessions: `not_found` in every operation. (A revert path in neither
/// snapshot stays a no-op: runtimes pass a patch's file list as it is, OpenCode's semantics.)
#[test]
fn unknown_sessions_are_not_found_everywhere() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n");
    begin(&p, "s", "1");
    p.file("a.txt", "b\n");
    end(&p, "s", "1");
    for args in [
        vec!["turns", "--session=nobody"],
        vec!["changes", "--session=nobody"],
        vec!["undo", "--session=nobody"],
        vec!["undo", "--session=nobody", "--last"],
    ] {
        assert_eq!(expect_error(&p, &args), "not_found", "{args:?}");
    }
    assert_eq!(p.read("a.txt"), b"b\n");
}

/// Issue 14, part 6: `turn begin --meta key=value` stores the runtime's metadata with the turn;
/// `turns` and `show` return it, git sees it in the commits, and it survives the rewrite of a
/// trimmed chain. Keys and values take any text (spaces, `=`, newlines, non-ASCII).
#[test]
fn turn_metadata_is_stored_with_the_turn_and_returned() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    let meta: BTreeMap<&str, &str> = [
        ("message_id", "msg_01"),
        ("tool calls", "call_1,call_2"),
        ("expr", "a=b"),
        ("model", "模型 v2\nsecond line"),
        ("empty", ""),
    ]
    .into();
    let mut args = vec!["turn", "begin", "--session", "s", "--turn", "1"];
    let pairs: Vec<String> = meta.iter().map(|(k, v)| format!("{k}={v}")).collect();
    for pair in &pairs {
        args.extend(["--meta", pair.as_str()]);
    }
    rwj(&p, &args);
    let expected = serde_json::to_value(&meta).unwrap();
    let listed = |p: &TestProject| rwj(p, &["turns", "--session", "s"]);
    assert_eq!(listed(&p)[0]["meta"], expected, "while open");
    p.file("a.txt", "agent\n");
    end(&p, "s", "1");
    assert_eq!(listed(&p)[0]["meta"], expected, "once ended");
    let shown = rwj(&p, &["show", "1", "--session", "s"]);
    assert_eq!(shown["meta"], expected, "{shown}");
    let human = rw(&p, &["show", "1", "--session", "s"]);
    human.assert_success();
    assert!(human.stdout.contains("message_id: msg_01\n"), "{human}");
    // git sees it: a trailer line in the turn's commits.
    let log = p.store_git(["log", "--format=%B", "refs/rewind/sessions/s/turns/1"]);
    assert!(log.contains("Rewind-Meta: message_id msg_01\n"), "{log}");

    // A turn without metadata has an empty map; trimming keeps the rest's.
    begin(&p, "s", "2");
    p.file("a.txt", "agent 2\n");
    end(&p, "s", "2");
    assert_eq!(listed(&p)[1]["meta"], serde_json::json!({}));
    let mut args = vec!["turn", "begin", "--session", "s", "--turn", "3"];
    args.extend(["--meta", "message_id=msg_03"]);
    rwj(&p, &args);
    end(&p, "s", "3");
    rwj(&p, &["prune", "--max-turns", "1"]);
    let left = listed(&p);
    assert_eq!(left.as_array().unwrap().len(), 1, "{left}");
    assert_eq!(left[0]["meta"], serde_json::json!({"message_id": "msg_03"}));
    p.assert_fsck_clean();

    // Malformed pairs are usage errors; a key over 200 bytes is refused.
    let begin_4 = |meta: &str| {
        let args = [
            "--json",
            "turn",
            "begin",
            "--session",
            "s",
            "--turn",
            "4",
            "--meta",
            meta,
        ];
        rw(&p, &args)
    };
    for bad in ["novalue", "=x"] {
        begin_4(bad).assert_code(2);
    }
    let run = begin_4(&format!("{}=v", "k".repeat(201)));
    crate::common::expect_error(&run, "invalid_name");
    assert_eq!(listed(&p).as_array().unwrap().len(), 1, "nothing begun");
}

/// The rule for an undo run again after a kill (stop 43), and for the redo after one (stop 44),
/// as a property: a turn's undo over six files (one the turn created, one it deleted) killed at a
/// rename or unlink in one of their two directories, then the user's random edits (the turn's
/// state or the state before it put back, other bytes, a deletion, or none), then `undo
/// --last` again or `redo`, without force. Every file an edit
/// changed holds the user's bytes (or stays deleted); one written again with the bytes it held
/// is as the run leaves it or left alone as a conflict (the change time cannot tell it from
/// the killed run's write put back); every other file is as the run leaves it: back as before
/// the turn (undo), or as the turn left it (redo).
#[test]
fn an_undo_or_redo_after_a_kill_never_overwrites_an_edit_made_after_it() {
    require_tool("strace", "to kill rewind at a chosen syscall");
    let seed = std::env::var("REWIND_TEST_SEED")
        .ok()
        .map(|s| s.parse().expect("REWIND_TEST_SEED must be a number"))
        .unwrap_or(1);
    let mut rng = XorShift::seeded(seed);
    let names = ["a", "b", "c", "d/e", "d/f", "g"];
    // What each file holds before the turn and after it (`None`: none there): the turn creates
    // d/f and deletes g.
    let state = |name: &str, when: &str| {
        let absent = (name, when) == ("d/f", "before") || (name, when) == ("g", "turn");
        (!absent).then(|| format!("{name} {when}\n").into_bytes())
    };
    let put = |p: &TestProject, name: &str, bytes: &Option<Vec<u8>>| match bytes {
        Some(bytes) => drop(p.file(name, bytes.as_slice())),
        None => drop(p.remove(name)),
    };
    let (mut killed_rounds, mut kept) = (0, 0);
    for round in 0..8 {
        let sb = Sandbox::new();
        let p = sb.project("proj");
        for name in names.iter().filter(|n| state(n, "before").is_some()) {
            put(&p, name, &state(name, "before"));
        }
        let turn = |args: &[&str]| rwj(&p, args);
        turn(&["turn", "begin", "--session", "A", "--turn", "1"]);
        for name in names {
            put(&p, name, &state(name, "turn"));
        }
        turn(&["turn", "end", "--session", "A", "--turn", "1"]);
        // (Each thread counts its own calls, and the swaps share eight: the first call in one
        // of the two directories.)
        let at = (["renameat2", "unlinkat"][rng.below(2) as usize], 1);
        let dir = [p.path.clone(), p.join("d")][rng.below(2) as usize].clone();
        let args = ["undo", "--session", "A", "--last"];
        let (again, leaves): (&[&str], _) = match rng.below(2) {
            0 => (&args, "before"),
            _ => (&["redo", "--session", "A"], "turn"),
        };
        let what =
            format!("round {round} (seed {seed}): killed at {at:?} in {dir:?}, then {again:?}");
        if !run_killed_on(&sb, &p.path, &args, at, &dir) {
            continue;
        }
        killed_rounds += 1;
        // What each edit that changed the file left there (`None`: deleted).
        let mut edited: BTreeMap<&str, Option<Vec<u8>>> = BTreeMap::new();
        // Written again with the bytes they held: left alone or done, never silently kept.
        let mut rewritten = BTreeSet::new();
        for name in names {
            let was = fs::read(p.join(name)).ok();
            let now = match rng.below(5) {
                0 => state(name, "turn"),
                1 => state(name, "before"),
                2 => Some(format!("{name} user {round}\n").into_bytes()),
                3 => None,
                _ => continue,
            };
            if now == was {
                // (Nothing to delete where nothing stands.)
                if now.is_some() {
                    put(&p, name, &now);
                    rewritten.insert(name);
                }
                continue;
            }
            put(&p, name, &now);
            edited.insert(name, now);
        }
        let u = rwj(&p, again);
        for name in names {
            let holds = fs::read(p.join(name)).ok();
            let left = state(name, leaves);
            let said = u["conflicts"].as_array().unwrap().contains(&name.into());
            let wanted = match edited.get(name) {
                Some(edit) => edit.clone(),
                None if rewritten.contains(name) && said => holds.clone(),
                None => left,
            };
            assert_eq!(holds, wanted, "{what}: {name}, edits {edited:?}: {u}");
        }
        kept += edited.len();
    }
    assert!(
        killed_rounds > 0 && kept > 0,
        "seed {seed}: {killed_rounds} kills, {kept} edits kept"
    );
}

/// Found by the eighty-second hostile pass (r109): a turn made file `s` a directory and moved
/// `d/a` into it as `s/x`; the user then put a file where directory `d` was. Undoing the turn
/// leaves `d/a` alone (the user's `d` is in the way), so `s/x`, its other name, stays too; the
/// write of `s` over the directory holding it was still decided as if `s/x` went, and failed
/// ("could not be restored", exit 1) where the dry run said `s` would be written. `s` is a
/// conflict now, in the dry run and the real run alike, and exit 0. The other shape: the turn
/// moved `d/a` to where directory `s` was (`s` a file now); the write of `s/x` below it.
#[test]
fn a_write_over_the_other_name_of_a_move_left_alone_is_a_conflict() {
    let sb = Sandbox::new();
    for shape in ["in place of its directory", "below it"] {
        let p = sb.project(&format!("proj-{}", shape.replace(' ', "-")));
        p.file("d/a", "content\n");
        begin(&p, "x", "1");
        match shape {
            "below it" => {
                p.file("s/x", "before\n");
                end(&p, "x", "1");
                begin(&p, "x", "2");
                // rm -r s; mv d/a s
                fs::remove_dir_all(p.join("s")).unwrap();
                fs::rename(p.join("d/a"), p.join("s")).unwrap();
            }
            _ => {
                p.file("s", "orig\n");
                end(&p, "x", "1");
                begin(&p, "x", "2");
                // rm s; mkdir s; mv d/a s/x
                fs::remove_file(p.join("s")).unwrap();
                fs::create_dir(p.join("s")).unwrap();
                fs::rename(p.join("d/a"), p.join("s/x")).unwrap();
            }
        }
        end(&p, "x", "2");
        p.remove("d").file("d", "user\n");
        let tree = p.track();
        let args = ["undo", "--session", "x", "--last"];
        let (dry, real) = dry_then_real(&p, &args);
        for (run, outcome) in [("dry run", &dry), ("real run", &real)] {
            assert_eq!(
                outcome["failed"],
                serde_json::json!([]),
                "{shape}, {run}: {outcome}"
            );
            assert_eq!(
                outcome["written"],
                serde_json::json!([]),
                "{shape}, {run}: {outcome}"
            );
            assert_eq!(
                outcome["deleted"],
                serde_json::json!([]),
                "{shape}, {run}: {outcome}"
            );
        }
        assert_eq!(dry["conflicts"], real["conflicts"], "{shape}");
        assert_eq!(p.read("d"), b"user\n", "{shape}");
        assert_eq!(p.track(), tree, "{shape}: nothing changed");
    }
}

/// r110 (2): a turn made file `a`, a later one made `a` a directory holding `a/x/d`. Undoing
/// from the first removes `a/x/d` and so the directory: the outcome listed `a` as `kept` ("the
/// snapshot could not see it") though the directory was the snapshot's and is gone.
#[test]
fn a_directory_the_snapshot_holds_is_not_reported_kept() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("keep", "base\n");
    begin(&p, "s", "1");
    p.file("a", "A\n");
    end(&p, "s", "1");
    begin(&p, "s", "2");
    p.remove("a").file("a/x/d", "D\n");
    end(&p, "s", "2");
    let args = ["undo", "--session", "s", "--turn", "1"];
    let (dry, real) = dry_then_real(&p, &args);
    for (run, outcome) in [("dry run", &dry), ("real run", &real)] {
        assert_eq!(
            outcome["deleted"],
            serde_json::json!(["a/x/d"]),
            "{run}: {outcome}"
        );
        assert_eq!(outcome["kept"], serde_json::json!([]), "{run}: {outcome}");
    }
    assert!(!p.join("a").exists(), "the emptied directory is removed");
    assert_eq!(p.read("keep"), b"base\n");
}

/// r110 (1): a turn replaced directory `a` by a file, a later turn rewrote the file, the user
/// removed it. `undo --merge` from the first turn writes `a/f` back and leaves `a` (a
/// conflict): the real run listed `a` in `in_the_way`, looked at after the run had made the
/// directory there; the dry run did not.
#[test]
fn a_directory_the_undo_itself_makes_is_not_reported_in_the_way() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a/f", "inner\n").file("keep", "base\n");
    p.track();
    begin(&p, "s", "1");
    p.remove("a").file("a", "A\n");
    end(&p, "s", "1");
    begin(&p, "s", "2");
    p.file("a", "A2\n");
    end(&p, "s", "2");
    p.remove("a");
    let args = ["undo", "--session", "s", "--turn", "1", "--merge"];
    let (dry, real) = dry_then_real(&p, &args);
    for (run, outcome) in [("dry run", &dry), ("real run", &real)] {
        assert_eq!(
            outcome["written"],
            serde_json::json!(["a/f"]),
            "{run}: {outcome}"
        );
        assert_eq!(
            outcome["conflicts"],
            serde_json::json!(["a"]),
            "{run}: {outcome}"
        );
        let in_the_way = outcome.get("in_the_way").cloned();
        assert!(
            in_the_way.is_none() || in_the_way == Some(serde_json::json!([])),
            "{run}: nothing stood at `a`: {outcome}"
        );
    }
    assert_eq!(p.read("a/f"), b"inner\n");
}

/// The hunt of stop 58 (r111 (4)): the user made file `f` between turns, turn 2 made it a
/// directory holding `f/x`. Undoing from turn 1 deletes `f/x` and so the directory, and
/// leaves `f` alone (the user's): `in_the_way` named `f`, where the run itself had emptied and
/// removed the only thing that stood.
#[test]
fn a_directory_the_undo_itself_removes_is_not_reported_in_the_way() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("z", "z\n");
    begin(&p, "s", "1");
    p.file("z", "z\nmore\n");
    end(&p, "s", "1");
    p.file("f", "USER\n");
    begin(&p, "s", "2");
    p.remove("f").file("f/x", "x\n");
    end(&p, "s", "2");
    let args = ["undo", "--session", "s", "--turn", "1"];
    let (dry, real) = dry_then_real(&p, &args);
    assert_eq!(real["deleted"], serde_json::json!(["f/x"]), "{real}");
    assert_eq!(real["conflicts"], serde_json::json!(["f"]), "{real}");
    assert!(!p.join("f").exists(), "nothing stands at f: {real}");
    let in_the_way = real.get("in_the_way").cloned();
    assert!(
        in_the_way.is_none() || in_the_way == Some(serde_json::json!([])),
        "the run removed what stood at f: {real}"
    );
    assert_eq!(dry["conflicts"], real["conflicts"]);
    assert_eq!(dry.get("in_the_way"), real.get("in_the_way"), "{dry}");
}

/// The hunt of stop 58 (r111 (1)): the user made a file between turns, a later turn moved it.
/// An undo from the first turn deleted its new name and left its old one alone (the user's):
/// the user's bytes were in no file of the project. A moved file is undone under both names
/// or left alone under both.
#[test]
fn a_users_file_a_later_turn_moved_is_left_alone_under_both_names() {
    let sb = Sandbox::new();
    for shape in [
        "moved",
        "moved, a directory at its old name",
        "moved out of a directory",
    ] {
        let p = sb.project(&format!("proj-{}", shape.replace([' ', ','], "-")));
        let (user, moved_to) = match shape {
            "moved out of a directory" => {
                p.file("f", "A\n");
                begin(&p, "s", "1");
                p.file("f", "A\nmore\n");
                end(&p, "s", "1");
                p.remove("f").file("f/u", "U\n");
                begin(&p, "s", "2");
                fs::rename(p.join("f/u"), p.join("g")).unwrap();
                fs::remove_dir(p.join("f")).unwrap();
                ("U\n", "g")
            }
            _ => {
                p.file("z", "z\n");
                begin(&p, "s", "1");
                p.file("z", "z\nmore\n");
                end(&p, "s", "1");
                p.file("notes.txt", "my notes\n");
                begin(&p, "s", "2");
                fs::create_dir(p.join("old")).unwrap();
                fs::rename(p.join("notes.txt"), p.join("old/notes.txt")).unwrap();
                if shape.contains("directory at its old name") {
                    p.file("notes.txt/d/f", "n\n");
                }
                ("my notes\n", "old/notes.txt")
            }
        };
        end(&p, "s", "2");
        let args = ["undo", "--session", "s", "--turn", "1"];
        let (dry, real) = dry_then_real(&p, &args);
        assert_eq!(p.read(moved_to), user.as_bytes(), "{shape}: {real}");
        let conflicts = real["conflicts"].as_array().unwrap();
        assert!(
            conflicts.iter().any(|c| c == moved_to),
            "{shape}: the new name is left alone and said so: {real}"
        );
        for key in ["written", "deleted", "conflicts"] {
            assert_eq!(dry[key], real[key], "{shape}: {key}");
        }
    }
}

/// The hunt of stop 58 (r111 (2)): `undo --turn 1` rolled back turns 1 and 2; `undo --turn 2`
/// then wrote turn 2's "before" (turn 1's bytes) over the project, while `turns` still listed
/// turn 1 rolled back. Refused now, as `--only` refuses a turn undone already; after a redo
/// the same undo runs.
#[test]
fn an_undo_from_a_turn_undone_already_is_refused() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("f", "A\n");
    for (turn, text) in [("1", "B\n"), ("2", "C\n")] {
        begin(&p, "s", turn);
        p.file("f", text);
        end(&p, "s", turn);
    }
    rwj(&p, &["undo", "--session", "s", "--turn", "1"]);
    assert_eq!(p.read("f"), b"A\n");
    let tree = p.track();
    for extra in [&[][..], &["--file", "f"], &["--dry-run"]] {
        let args = [&["undo", "--session", "s", "--turn", "2"][..], extra].concat();
        assert_eq!(expect_error(&p, &args), "turn_state", "{extra:?}");
        let message = rw(&p, &args).stderr;
        assert!(message.contains("undone already"), "{message}");
        assert_eq!(p.read("f"), b"A\n", "{extra:?}: nothing written");
    }
    assert_eq!(p.track(), tree);
    rwj(&p, &["redo", "--session", "s"]);
    assert_eq!(p.read("f"), b"C\n");
    let undone = rwj(&p, &["undo", "--session", "s", "--turn", "2"]);
    assert_eq!(undone["written"], serde_json::json!(["f"]), "{undone}");
    assert_eq!(p.read("f"), b"B\n");
}

/// The hunt of stop 58 (r111 (3)): turn 1 edited file `f`, the user made `f` a directory
/// holding `f/u`, turn 2 moved `f/u` to `g` and removed `f`. `undo --merge --force` from turn
/// 1 planned both a file at `f` and `f/u` back: the dry run said both would be written, the
/// real run wrote `f/u` and failed on `f` (exit 1). Two writes, one below the other, are
/// left alone now (and the move's other name with them), the same in both runs.
#[test]
fn a_plan_that_writes_a_file_and_a_path_below_it_leaves_both_alone() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("f", "o1\no2\n");
    begin(&p, "s", "1");
    p.file("f", "o1\no2\nmore\n");
    end(&p, "s", "1");
    p.remove("f").file("f/u", "u1\nu2\n");
    begin(&p, "s", "2");
    fs::rename(p.join("f/u"), p.join("g")).unwrap();
    fs::remove_dir(p.join("f")).unwrap();
    end(&p, "s", "2");
    let tree = p.track();
    let args = [
        "undo",
        "--session",
        "s",
        "--turn",
        "1",
        "--merge",
        "--force",
    ];
    let (dry, real) = dry_then_real(&p, &args);
    for (run, outcome) in [("dry run", &dry), ("real run", &real)] {
        assert_eq!(outcome["failed"], serde_json::json!([]), "{run}: {outcome}");
        assert_eq!(
            outcome["written"],
            serde_json::json!([]),
            "{run}: {outcome}"
        );
        let mut conflicts: Vec<&str> = outcome["conflicts"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c.as_str())
            .collect();
        conflicts.sort_unstable();
        assert_eq!(conflicts, ["f", "f/u", "g"], "{run}: {outcome}");
    }
    assert_eq!(p.read("g"), b"u1\nu2\n");
    assert_eq!(p.track(), tree, "nothing changed");
}

/// The hunt of stop 58, after r111 (1)'s fix (r113 (1)): a turn that moved the user's file and
/// put a new file at its old name, or swapped the user's file with another, paired neither
/// name in a range undo (a turn's diff shows them rewritten, not moved): one name was deleted
/// or written, the other left alone, and the user's bytes were in no file of the project.
/// Paired now as `git diff -B -M` pairs them, as an undo of the turn alone does.
#[test]
fn a_users_file_a_turn_moved_aside_or_swapped_is_left_alone_under_both_names() {
    let sb = Sandbox::new();
    for shape in ["moved, a new file at its name", "swapped by a later turn"] {
        let p = sb.project(&format!("proj-{}", shape.replace([' ', ','], "-")));
        let user = "my notes\nline2\nline3\n";
        let holder = match shape {
            "swapped by a later turn" => {
                p.file("z", "z\n").file("g", "G1\nG2\nG3\n");
                begin(&p, "s", "1");
                p.file("z", "z\nmore\n");
                end(&p, "s", "1");
                p.file("notes", user);
                begin(&p, "s", "2");
                fs::rename(p.join("notes"), p.join("t")).unwrap();
                fs::rename(p.join("g"), p.join("notes")).unwrap();
                fs::rename(p.join("t"), p.join("g")).unwrap();
                end(&p, "s", "2");
                "g"
            }
            _ => {
                p.file("notes", user);
                begin(&p, "s", "1");
                fs::rename(p.join("notes"), p.join("x")).unwrap();
                p.file("notes", "agent\nnew\nnotes\n");
                end(&p, "s", "1");
                p.file("notes", "agent\nnew\nnotes\nuser edit\n");
                "x"
            }
        };
        let args = ["undo", "--session", "s", "--turn", "1"];
        let (dry, real) = dry_then_real(&p, &args);
        assert_eq!(p.read(holder), user.as_bytes(), "{shape}: {real}");
        let conflicts = real["conflicts"].as_array().unwrap();
        for name in ["notes", holder] {
            assert!(
                conflicts.iter().any(|c| c == name),
                "{shape}: {name}: {real}"
            );
        }
        assert_eq!(dry["conflicts"], real["conflicts"], "{shape}");
    }
}

/// The hunt of stop 58 (r113 (2)): `undo --turn 2` rolled back turns 2 and 3 and left the
/// user's edit of turn 3's file alone. An undo from turn 3 then ran (the turn counted as undone
/// in part) and wrote turn 3's "before", turn 2's line back; `undo --last --force` did the
/// same. Refused now, and `--last --force` takes that undo again from turn 2.
#[test]
fn an_undo_from_a_turn_an_undo_rolled_back_in_part_with_an_earlier_one_is_refused() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a", "0\n");
    let mut text = String::from("0\n");
    for turn in ["1", "2", "3"] {
        begin(&p, "s", turn);
        text.push_str(&format!("{turn}\n"));
        p.file("a", &text)
            .file(format!("f{turn}"), format!("{turn}\n"));
        end(&p, "s", turn);
    }
    p.file("f3", "user\n");
    let first = rwj(&p, &["undo", "--session", "s", "--turn", "2"]);
    assert_eq!(first["conflicts"], serde_json::json!(["f3"]), "{first}");
    assert_eq!(p.read("a"), b"0\n1\n");
    for extra in [&[][..], &["--file", "a"]] {
        let args = [&["undo", "--session", "s", "--turn", "3"][..], extra].concat();
        assert_eq!(expect_error(&p, &args), "turn_state", "{extra:?}");
        assert_eq!(p.read("a"), b"0\n1\n", "{extra:?}: nothing written");
    }
    let forced = rwj(&p, &["undo", "--session", "s", "--last", "--force"]);
    assert_eq!(
        forced["hash"], first["hash"],
        "the same undo, from turn 2: {forced}"
    );
    assert_eq!(p.read("a"), b"0\n1\n", "turn 2's line stays out: {forced}");
    assert!(!p.join("f3").exists(), "forced: {forced}");
}

/// Model seed 306 (stop 60): an undo that left files alone even with `--force` (a FIFO in the
/// way) rolled back turn 1 again and turn 2; its redo gave turn 2 back, while turn 1 stayed
/// rolled back by the undo before (which is not redone). `undo --last --force` then took that
/// undo again from turn 1 and wrote turn 1's "before" over the user's later edit: the last
/// turn is turn 2, given back, and undone from itself.
#[test]
fn undo_last_force_after_a_redo_gave_the_last_turn_back_undoes_that_turn_alone() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a", "0\n").file("b", "0\n").file("c", "0\n");
    begin(&p, "s", "1");
    p.file("a", "a1\n").file("b", "b1\n");
    end(&p, "s", "1");
    p.file("b", "user\n");
    let first = rwj(&p, &["undo", "--session", "s", "--last"]);
    assert_eq!(first["conflicts"], serde_json::json!(["b"]), "{first}");
    begin(&p, "s", "2");
    p.file("c", "c2\n");
    end(&p, "s", "2");
    let before_2 = turns(&p, Some("s"))[1].before.clone();
    shell(&p, "rm c && mkfifo c");
    let second = rwj(&p, &["undo", "--session", "s", "--turn", "1", "--force"]);
    assert_eq!(second["conflicts"], serde_json::json!(["c"]), "{second}");
    assert_eq!(p.read("b"), b"0\n", "forced: {second}");
    let redo = rwj(&p, &["redo", "--session", "s"]);
    assert_eq!(p.read("b"), b"user\n", "{redo}");
    let rolled: Vec<bool> = turns(&p, Some("s")).iter().map(|t| t.rolled_back).collect();
    assert_eq!(rolled, [true, false], "turn 2 given back, turn 1 not");
    std::fs::remove_file(p.join("c")).unwrap();
    p.file("c", "c2\n");
    let last = rwj(&p, &["undo", "--session", "s", "--last", "--force"]);
    assert_eq!(last["hash"], before_2, "undone from turn 2: {last}");
    assert_eq!(p.read("c"), b"0\n", "{last}");
    assert_eq!(p.read("b"), b"user\n", "turn 1's before stays out: {last}");
    assert_eq!(p.read("a"), b"0\n", "{last}");
}

/// The hunt of stop 59 (r116 (4)): a turn ran `git rm` on a file force-added inside an ignored
/// directory. Its end could not see the path (ignored, out of the index), so the undo cannot
/// tell what stood there then: left alone, said so (not "changed by someone else"), and
/// `--force` brings the file back.
#[test]
fn a_file_git_rm_took_out_of_an_ignored_directory_is_left_alone_as_unseen_until_forced() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file(".gitignore", "build/\n")
        .file("build/keep.txt", "keep\n");
    p.git_init();
    p.git(["add", "-f", "build/keep.txt", ".gitignore"]);
    p.git(["commit", "-qm", "init"]);
    begin(&p, "s", "1");
    p.git(["rm", "-q", "build/keep.txt"]);
    let files = end(&p, "s", "1");
    assert_eq!(
        file_rows(&files, "end").into_keys().collect::<Vec<_>>(),
        ["build/keep.txt"]
    );
    let left = rwj(&p, &["undo", "--session", "s", "--last", "--dry-run"]);
    assert_eq!(
        left["conflicts"],
        serde_json::json!(["build/keep.txt"]),
        "{left}"
    );
    assert_eq!(
        left["unseen"],
        serde_json::json!(["build/keep.txt"]),
        "{left}"
    );
    let plain = rw(&p, &["undo", "--session", "s", "--last"]);
    plain.assert_success();
    assert!(!p.join("build").exists(), "{plain}");
    assert!(
        plain
            .stderr
            .contains("build/keep.txt: the turn's end could not see it (ignored")
            && !plain.stderr.contains("changed by someone else"),
        "{plain}"
    );
    let forced = rwj(&p, &["undo", "--session", "s", "--last", "--force"]);
    assert_eq!(
        forced["written"],
        serde_json::json!(["build/keep.txt"]),
        "{forced}"
    );
    assert_eq!(p.read("build/keep.txt"), b"keep\n");
}

/// Model seed 402 (stop 60, two sessions, 800 steps): a turn made file `x` a directory holding
/// `x/inner`; the user put a FIFO at `x`; with a later turn open, an undo's dry run left
/// `x/inner` out of its conflicts while the real run listed it. The dry run's snapshot is not
/// recorded, and with no record it did not know the snapshot left `x` out; it reads what the
/// record would hold now.
#[test]
fn an_undo_dry_run_knows_what_the_snapshot_left_out_as_its_real_run_does() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("x", "0\n").file("a", "0\n");
    begin(&p, "s", "1");
    p.remove("x");
    p.file("x/inner", "inner\n").file("a", "1\n");
    end(&p, "s", "1");
    begin(&p, "s", "2");
    shell(&p, "rm -r x && mkfifo x");
    let args = ["undo", "--session", "s", "--turn", "1"];
    let (dry, real) = dry_then_real(&p, &args);
    let keys = [
        "written",
        "deleted",
        "conflicts",
        "in_the_way",
        "unseen",
        "kept",
        "conflict_details",
    ];
    for key in keys {
        assert_eq!(dry[key], real[key], "{key}: dry run {dry}\nreal run {real}");
    }
    assert_eq!(p.read("a"), b"0\n", "{real}");
    assert_eq!(real["in_the_way"], serde_json::json!(["x"]), "{real}");
}

/// Model seed 415 (stop 60, two sessions, 800 steps): a turn begun while nested repository
/// `sub` was in view (its begin commit records `Rewind-Nested: repo sub`) was rolled back while
/// open and reopened by a redo that found `sub/` ignored: its "before" is that project now.
/// An undo of it read the first begin commit's lines as its "before"'s, took `sub/f.txt` for a
/// file that "before" could see, and deleted it; the "before" could not see it, so it is kept.
#[test]
fn an_undo_of_a_reopened_turn_keeps_a_file_its_before_could_not_see() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a", "0\n").file("sub/f.txt", "nested\n");
    p.sb.git(Some(&p.join("sub")), ["init", "-q"]);
    begin(&p, "s", "1");
    p.file("a", "1\n");
    let undone = rwj(&p, &["undo", "--session", "s", "--turn", "1"]);
    assert_eq!(p.read("a"), b"0\n", "{undone}");
    p.file(".gitignore", "sub/\n");
    let redone = rwj(&p, &["redo", "--session", "s"]);
    assert_eq!(p.read("a"), b"1\n", "{redone}");
    let open = turns(&p, Some("s"));
    assert!(
        open[0].after.is_none() && !open[0].rolled_back,
        "reopened: {:?}",
        open[0].json
    );
    p.remove(".gitignore");
    let (dry, real) = dry_then_real(&p, &["undo", "--session", "s", "--turn", "1"]);
    for run in [&dry, &real] {
        assert_eq!(run["kept"], serde_json::json!(["sub/f.txt"]), "{run}");
        assert_eq!(run["deleted"], serde_json::json!([]), "{run}");
    }
    assert_eq!(p.read("sub/f.txt"), b"nested\n", "{real}");
    assert_eq!(p.read("a"), b"0\n", "{real}");
}

/// Model seed 457 (stop 60, r118 (4)): a turn rolled back while open; the user ignored `x` and
/// made it; `redo --force` wrote the turn's `.gitignore` back, which shows `x`. The turn's new
/// "before" (the project the redo found, with the redo's writes as the turn found them) lacks
/// `x`, and its own `.gitignore` does not hide it: the undo deleted the user's file as the
/// turn's. Such a "before" sees only what the project the redo found could see.
#[test]
fn an_undo_of_a_turn_reopened_by_a_redo_that_showed_an_ignored_file_keeps_it() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a", "0\n").file(".gitignore", "*.log\n");
    begin(&p, "s", "1");
    p.file(".gitignore", "*.log\nfoo\n").file("a", "1\n");
    let undone = rwj(&p, &["undo", "--session", "s"]);
    assert_eq!(p.read(".gitignore"), b"*.log\n", "{undone}");
    p.file(".gitignore", "*.log\nx\n").file("x", "the user's\n");
    let redone = rwj(&p, &["redo", "--session", "s", "--force"]);
    assert_eq!(p.read(".gitignore"), b"*.log\nfoo\n", "{redone}");
    end(&p, "s", "1");
    let (dry, real) = dry_then_real(&p, &["undo", "--session", "s"]);
    for run in [&dry, &real] {
        assert_eq!(run["kept"], serde_json::json!(["x"]), "{run}");
        assert_eq!(run["deleted"], serde_json::json!([]), "{run}");
    }
    assert_eq!(p.read("x"), b"the user's\n", "{real}");
    assert_eq!(p.read("a"), b"0\n", "{real}");
    assert_eq!(p.read(".gitignore"), b"*.log\n", "{real}");
}

/// The hostile pass of stop 61, over the first fix of r118 (4), which put what a made-up
/// "before" could see in that tree's snapshot record: where the redo found the project as the
/// turn's begin did but for `.gitignore`, that tree is the turn's first "before", a snapshot,
/// and its record then hid the user's rules' names from every later turn begun there: turn
/// 2's own `q` was kept by its undo. What the made-up tree sees is in the redo's commit now.
#[test]
fn a_later_turn_from_a_snapshot_a_redo_made_up_again_undoes_its_own_file() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a", "a\n").file(".gitignore", "");
    begin(&p, "s", "1");
    p.file(".gitignore", "y\n");
    rwj(&p, &["undo", "--session", "s"]);
    p.file(".gitignore", "q\n"); // the user's, while turn 1 is rolled back
    let redone = rwj(&p, &["redo", "--session", "s", "--force"]);
    assert_eq!(p.read(".gitignore"), b"y\n", "{redone}");
    end(&p, "s", "1");
    let undone = rwj(&p, &["undo", "--session", "s", "--turn", "1"]);
    assert_eq!(p.read(".gitignore"), b"", "{undone}");
    begin(&p, "s", "2");
    p.file("q", "agent\n");
    end(&p, "s", "2");
    let (dry, real) = dry_then_real(&p, &["undo", "--session", "s", "--turn", "2"]);
    for run in [&dry, &real] {
        assert_eq!(run["deleted"], serde_json::json!(["q"]), "{run}");
        assert_eq!(run["kept"], serde_json::json!([]), "{run}");
    }
    assert!(!p.join("q").exists(), "{real}");
}

/// The same pass: the record of a made-up "before" named the project the redo found, which
/// nothing kept for git; once `prune` dropped that project's record with its session and a
/// person ran `git gc --prune=now`, every undo to the made-up tree failed ("could not be
/// found"). The redo's commit names it now, and lives as long as what reads it.
#[test]
fn an_undo_to_a_made_up_before_works_after_its_session_expired_and_a_git_gc() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    let day = |d: u32| format!("2026-11-{d:02}T00:00:00Z");
    p.file("a", "a\n").file(".gitignore", "");
    rwj_at(&p, Some(&day(1)), &["track"]);
    begin_at(&p, Some(&day(1)), "s", "1");
    p.file(".gitignore", "y\n").file("b", "agent\n");
    rwj_at(&p, Some(&day(1)), &["undo", "--session", "s"]);
    p.file(".gitignore", "x\n").file("z", "user\n");
    rwj_at(&p, Some(&day(1)), &["redo", "--session", "s", "--force"]);
    end_at(&p, Some(&day(1)), "s", "1");
    let undone = rwj_at(&p, Some(&day(1)), &["undo", "--session", "s"]);
    assert_eq!(p.read(".gitignore"), b"", "{undone}");
    begin_at(&p, Some(&day(5)), "t", "1");
    p.file("c", "agent 2\n");
    end_at(&p, Some(&day(5)), "t", "1");
    let pruned = rwj_at(&p, Some(&day(9)), &["prune"]);
    assert_eq!(
        pruned["sessions_removed"],
        serde_json::json!(["s"]),
        "{pruned}"
    );
    p.store_git(["gc", "--prune=now", "-q"]);
    let undone = rwj_at(&p, Some(&day(9)), &["undo", "--session", "t"]);
    assert_eq!(undone["deleted"], serde_json::json!(["c"]), "{undone}");
    assert!(!p.join("c").exists(), "{undone}");
}

/// r120 (3): s1's turn, rolled back while open, was given back by s1's redo while s2's turn was
/// open. s2's turn listed s1's `b` as `shared`, and `undo --session s2 --force` deleted it,
/// where a redo of another session's is none of the turn's (as for one whose turn had ended).
/// Where s1's agent wrote `b` while s2's turn was open, before the undo and the redo, `b` stays
/// shared.
#[test]
fn a_redo_that_gives_another_sessions_turn_back_is_none_of_an_open_turns_work() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a", "a\n");
    begin(&p, "s1", "1");
    p.file("b", "s1's\n");
    rwj(&p, &["undo", "--session", "s1"]);
    begin(&p, "s2", "1");
    track_file(&p, "s2", "1", "c");
    p.file("c", "s2's\n");
    let redone = rwj(&p, &["redo", "--session", "s1"]);
    assert_eq!(p.read("b"), b"s1's\n", "{redone}");
    let files = end(&p, "s2", "1");
    let listed: Vec<&str> = files.iter().filter_map(|f| f["file"].as_str()).collect();
    assert_eq!(listed, ["c"], "{files:?}");
    let undone = rwj(&p, &["undo", "--session", "s2", "--force"]);
    assert_eq!(undone["deleted"], serde_json::json!(["c"]), "{undone}");
    assert_eq!(p.read("b"), b"s1's\n", "{undone}");

    // s1's agent writes `d` while s3's turn is open; then the undo and the redo.
    begin(&p, "s3", "1");
    begin(&p, "s1", "2");
    p.file("d", "s1's\n");
    rwj(&p, &["undo", "--session", "s1"]);
    rwj(&p, &["redo", "--session", "s1"]);
    let files = end(&p, "s3", "1");
    let d = files.iter().find(|f| f["file"] == "d");
    assert_eq!(
        d.map(|f| &f["origin"]),
        Some(&serde_json::json!("shared")),
        "{files:?}"
    );
}

/// r119 (the third hostile pass of stop 60): turn 1 made `c`, the user added a line, turn 2
/// deleted it; `undo --session s` left `c` deleted (the target holds no `c`), a conflict whose
/// hint named `--force`, which changes nothing there, and `--merge` changed nothing either: the
/// user's line was only in turn 2's "before". Undoing the turns one at a time, latest first,
/// gives the file back as the user left it, turn 1's part a conflict: `--merge` does that now,
/// and the hint says so.
#[test]
fn an_undo_merge_of_a_session_gives_back_the_users_edit_to_a_file_a_later_turn_deleted() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a", "0\n");
    begin(&p, "s", "1");
    p.file("c", "one\ntwo\n");
    end(&p, "s", "1");
    p.file("c", "one\ntwo\nthe user's\n");
    begin(&p, "s", "2");
    p.remove("c");
    end(&p, "s", "2");
    let plain = rw(&p, &["undo", "--session", "s", "--dry-run"]);
    assert!(
        plain
            .stderr
            .contains("use --merge to take the later turns' work out")
            && !plain.stderr.contains("--force"),
        "{plain}"
    );
    let (dry, real) = dry_then_real(&p, &["undo", "--session", "s", "--merge"]);
    for run in [&dry, &real] {
        assert_eq!(run["written"], serde_json::json!(["c"]), "{run}");
        assert_eq!(run["merged"], serde_json::json!(["c"]), "{run}");
        assert_eq!(run["conflicts"], serde_json::json!([]), "{run}");
        let detail = &run["conflict_details"][0];
        assert_eq!(detail["file"], "c", "{run}");
        assert_eq!(detail["merges_in_part"], true, "{run}");
        assert_eq!(detail["mergeable"], false, "{run}");
    }
    assert_eq!(p.read("c"), b"one\ntwo\nthe user's\n", "{real}");
    // Its undo point holds the project as it was: no `c`.
    rwj(&p, &["restore", real["undo"].as_str().unwrap()]);
    assert!(!p.join("c").exists());
}

/// Model seed 417 (stop 60, two sessions, 800 steps): an undo put file `d/e` back where a turn
/// had made `d` a file; the user replaced `d/e` by an empty directory, ignored; `redo --force`
/// wrote `d` over the directory (taking the empty `d/e` with it, as a write may) and said it
/// kept `d/e`. An empty directory holds no byte to keep, and is not said kept (r113 (4)).
#[test]
fn a_redo_that_writes_over_an_empty_ignored_directory_does_not_say_it_kept_it() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("d/e", "e0\n").file("a", "0\n");
    begin(&p, "s", "1");
    std::fs::remove_dir_all(p.join("d")).unwrap();
    p.file("d", "d1\n").file("a", "1\n");
    end(&p, "s", "1");
    let undone = rwj(&p, &["undo", "--session", "s", "--last"]);
    assert_eq!(p.read("d/e"), b"e0\n", "{undone}");
    std::fs::remove_file(p.join("d/e")).unwrap();
    std::fs::create_dir(p.join("d/e")).unwrap();
    p.file(".gitignore", "e/\n");
    let redone = rwj(&p, &["redo", "--session", "s", "--force"]);
    assert_eq!(p.read("d"), b"d1\n", "{redone}");
    assert_eq!(redone["kept"], serde_json::json!([]), "{redone}");
    assert_eq!(p.read("a"), b"1\n", "{redone}");
}

/// The hunt of stop 60: a turn made file `n`; the user put a directory there. `undo --last`
/// said `n` in the way; `undo --last --force` (which never takes a directory either) said
/// nothing of it, exit 0. It says the same as without `--force` now, and the user's file stays.
#[test]
fn undo_force_still_says_a_directory_in_the_way_where_the_turns_file_was() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a", "0\n");
    begin(&p, "s", "1");
    p.file("n", "t1\n");
    end(&p, "s", "1");
    p.remove("n");
    p.file("n/f", "user\n");
    for extra in [&[][..], &["--force"]] {
        let args = [&["undo", "--session", "s", "--last"][..], extra].concat();
        let (dry, real) = dry_then_real(&p, &args);
        for run in [&dry, &real] {
            assert_eq!(
                run["conflicts"],
                serde_json::json!(["n"]),
                "{extra:?}: {run}"
            );
            assert_eq!(
                run["in_the_way"],
                serde_json::json!(["n"]),
                "{extra:?}: {run}"
            );
        }
        assert_eq!(p.read("n/f"), b"user\n", "{extra:?}: {real}");
    }
}

/// The hunt of stop 60 (1): turn 1 undone, turn 2, then a redo of turn 1's undo (turn 1's
/// line back in `f0`), turn 3 appends to `f0`; `undo --turn 2` wrote `f0` as before turn 2,
/// taking out the line the redo gave back. A gap's undo or redo about none of the turns undone
/// is someone else's work to them: `f0` is a conflict that merges clean, and `--merge` takes
/// turn 3's line alone out.
#[test]
fn an_undo_of_later_turns_keeps_what_a_redo_of_an_earlier_turn_gave_back() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("f0", "base\n").file("g", "g\n");
    begin(&p, "s", "1");
    p.file("f0", "base\nA1\n");
    end(&p, "s", "1");
    rwj(&p, &["undo", "--session", "s", "--last"]);
    begin(&p, "s", "2");
    p.file("g", "g\nA2\n");
    end(&p, "s", "2");
    rwj(&p, &["redo", "--session", "s"]);
    assert_eq!(p.read("f0"), b"base\nA1\n");
    begin(&p, "s", "3");
    p.file("f0", "base\nA1\nA3\n");
    end(&p, "s", "3");
    let args = ["undo", "--session", "s", "--turn", "2"];
    let plain = rwj(&p, &[&args[..], &["--dry-run"]].concat());
    assert_eq!(plain["conflicts"], serde_json::json!(["f0"]), "{plain}");
    assert_eq!(plain["conflict_details"][0]["mergeable"], true, "{plain}");
    let (dry, _) = dry_then_real(&p, &[&args[..], &["--merge"]].concat());
    assert_eq!(dry["conflicts"], serde_json::json!([]), "{dry}");
    assert_eq!(
        p.read("f0"),
        b"base\nA1\n",
        "turn 3's line alone out: {dry}"
    );
    assert_eq!(p.read("g"), b"g\n");
}

/// The hunt of stop 60 (1), with the user's edit: turn 1 left alone (the user's line in
/// `f0`), forced, an empty turn 2, a redo (turn 1's line and the user's back), turn 3; `undo
/// --last` twice took turn 3 out, then undid the empty turn 2 by writing `f0` as before it,
/// the user's line gone without `--force`. Turn 2 changed nothing: nothing changes.
#[test]
fn an_undo_of_an_empty_turn_after_a_redo_keeps_the_users_line_the_redo_gave_back() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("f0", "base\n").file("h", "base\n");
    begin(&p, "s", "1");
    p.file("f0", "base\nA1\n").file("h", "base\nA1\n");
    end(&p, "s", "1");
    p.file("f0", "base\nA1\nUSER\n");
    rwj(&p, &["undo", "--session", "s", "--last"]);
    rwj(&p, &["undo", "--session", "s", "--last", "--force"]);
    assert_eq!(p.read("f0"), b"base\n");
    begin(&p, "s", "2");
    end(&p, "s", "2");
    rwj(&p, &["redo", "--session", "s"]);
    assert_eq!(p.read("f0"), b"base\nA1\nUSER\n");
    begin(&p, "s", "3");
    p.file("f0", "base\nA1\nUSER\nA3\n");
    end(&p, "s", "3");
    let third = rwj(&p, &["undo", "--session", "s", "--last"]);
    assert_eq!(p.read("f0"), b"base\nA1\nUSER\n", "{third}");
    let second = rwj(&p, &["undo", "--session", "s", "--last"]);
    assert_eq!(second["written"], serde_json::json!([]), "{second}");
    assert_eq!(p.read("f0"), b"base\nA1\nUSER\n", "{second}");
}

/// The hunt of stop 60 (2): `undo --turn 1 --file a` took turn 1's and turn 2's lines out of
/// `a`; `undo --last` (turn 2) then wrote `a` as before turn 2, turn 1's line back. The file
/// undo is about turn 1 alone: to an undo of turn 2 it is someone else's edit, and `a` is left
/// alone (the two overlap); turn 2's `b` is undone.
#[test]
fn an_undo_after_an_undo_file_of_an_earlier_turn_leaves_that_file_alone() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a", "a\n").file("b", "b\n");
    begin(&p, "s", "1");
    p.file("a", "a\nt1\n");
    end(&p, "s", "1");
    begin(&p, "s", "2");
    p.file("a", "a\nt1\nt2\n").file("b", "b\nt2\n");
    end(&p, "s", "2");
    rwj(
        &p,
        &["undo", "--session", "s", "--turn", "1", "--file", "a"],
    );
    assert_eq!(p.read("a"), b"a\n");
    let (dry, real) = dry_then_real(&p, &["undo", "--session", "s", "--last"]);
    for run in [&dry, &real] {
        assert_eq!(run["conflicts"], serde_json::json!(["a"]), "{run}");
        assert_eq!(run["written"], serde_json::json!(["b"]), "{run}");
    }
    assert_eq!(p.read("a"), b"a\n", "{real}");
    assert_eq!(p.read("b"), b"b\n", "{real}");
}

/// The hunt of stop 59 (r116 (1)): `.env` ignored; turn 2 removed `.gitignore` (`.env` came
/// into view), turn 3 deleted `.env`; `undo --turn 2` put `.gitignore` back and left `.env`
/// deleted, saying nothing. Turn 2's "before" could not see `.env`, so whether it was there
/// cannot be told (it may have been made while ignored, within the turns): it stays deleted,
/// and the undo says so, with the command that brings it back from turn 3's "before".
#[test]
fn a_file_unignored_then_deleted_by_the_turns_undone_is_said_to_stay_deleted() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file(".gitignore", ".env\n")
        .file(".env", "SECRET=1\n")
        .file("a", "0\n");
    begin(&p, "s", "1");
    p.file("a", "1\n");
    end(&p, "s", "1");
    begin(&p, "s", "2");
    p.remove(".gitignore");
    end(&p, "s", "2");
    begin(&p, "s", "3");
    p.remove(".env");
    end(&p, "s", "3");
    let before_3 = turns(&p, Some("s"))[2].before.clone();
    for dry in [true, false] {
        let mut args = vec!["undo", "--session", "s", "--turn", "2"];
        if dry {
            args.push("--dry-run");
        }
        let run = rw(&p, &args);
        run.assert_success();
        let hint = format!("`rewind revert {before_3} -- .env` brings it back");
        assert!(
            run.stderr.contains(".env stays deleted") && run.stderr.contains(&hint),
            "{dry}: {run}"
        );
    }
    assert_eq!(p.read(".gitignore"), b".env\n");
    assert!(!p.join(".env").exists());
    rwj(&p, &["revert", &before_3, "--", ".env"]);
    assert_eq!(p.read(".env"), b"SECRET=1\n");
}

/// Model seed 466 (stop 60, two sessions, 800 steps): a directory `d` in the way of an undo
/// (the user edited file `d` between the turns, and turn 2 made it a directory) whose run
/// deletes turn 2's `d/e` and writes `d/x.txt` back: the dry run took `d` for emptied by the
/// deletion, and left it out of `in_the_way`, which the real run lists. A write below it keeps
/// it standing.
#[test]
fn a_dry_run_keeps_a_directory_in_the_way_that_its_writes_fill() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("d/x.txt", "x0\n").file("a", "0\n");
    begin(&p, "s", "1");
    std::fs::remove_dir_all(p.join("d")).unwrap();
    p.file("d", "d1\n").file("a", "1\n");
    end(&p, "s", "1");
    p.file("d", "user\n");
    begin(&p, "s", "2");
    p.remove("d");
    p.file("d/e", "e2\n");
    end(&p, "s", "2");
    let (dry, real) = dry_then_real(&p, &["undo", "--session", "s", "--turn", "1"]);
    for key in ["written", "deleted", "conflicts", "in_the_way"] {
        assert_eq!(dry[key], real[key], "{key}: dry run {dry}\nreal run {real}");
    }
    assert_eq!(real["in_the_way"], serde_json::json!(["d"]), "{real}");
    assert_eq!(p.read("d/x.txt"), b"x0\n", "{real}");
}

/// The hunt of stop 60 over r117 (r118 (1)): `undo --turn 1 --file b` of a file turn 2 alone
/// changed, turn 3 writes `b`, then `undo --turn 2`: `b` was a conflict (the file undo counted
/// as about turn 1 only), where no earlier turn's work is at stake: it is written back.
#[test]
fn an_undo_after_an_undo_file_from_an_earlier_turn_of_a_later_turns_file_writes_it_back() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a", "a\n").file("b", "b\n");
    begin(&p, "s", "1");
    p.file("a", "a1\n");
    end(&p, "s", "1");
    begin(&p, "s", "2");
    p.file("b", "b2\n");
    end(&p, "s", "2");
    rwj(
        &p,
        &["undo", "--session", "s", "--turn", "1", "--file", "b"],
    );
    assert_eq!(p.read("b"), b"b\n");
    begin(&p, "s", "3");
    p.file("b", "b3\n");
    end(&p, "s", "3");
    let (dry, real) = dry_then_real(&p, &["undo", "--session", "s", "--turn", "2"]);
    for run in [&dry, &real] {
        assert_eq!(run["conflicts"], serde_json::json!([]), "{run}");
        assert_eq!(run["written"], serde_json::json!(["b"]), "{run}");
    }
    assert_eq!(p.read("b"), b"b\n", "{real}");
    assert_eq!(p.read("a"), b"a1\n", "{real}");
}

/// The hunt of stop 58 (r113 (3)): an empty directory at a conflicted path (the user's), or
/// one the run's deletions leave holding an empty directory: the real run listed it in
/// `in_the_way`, the dry run (which took any directory holding no file but deleted ones for
/// gone) did not.
#[test]
fn a_directory_the_run_leaves_standing_is_in_the_way_in_the_dry_run_too() {
    let sb = Sandbox::new();
    for shape in ["empty", "holding an empty directory"] {
        let p = sb.project(&format!("proj-{}", shape.replace(' ', "-")));
        match shape {
            "empty" => {
                p.file("f", "hello\n");
                begin(&p, "s", "1");
                p.file("f", "hello\nmore\n");
                end(&p, "s", "1");
                p.remove("f");
                fs::create_dir(p.join("f")).unwrap();
            }
            _ => {
                p.file("z", "z\n");
                begin(&p, "s", "1");
                p.file("z", "z\nmore\n");
                end(&p, "s", "1");
                p.file("f", "USER\n");
                begin(&p, "s", "2");
                p.remove("f").file("f/x", "x\n");
                fs::create_dir(p.join("f/e")).unwrap();
                end(&p, "s", "2");
            }
        }
        let args = ["undo", "--session", "s", "--turn", "1"];
        let (dry, real) = dry_then_real(&p, &args);
        assert!(p.join("f").is_dir(), "{shape}: {real}");
        assert_eq!(
            real["in_the_way"],
            serde_json::json!(["f"]),
            "{shape}: {real}"
        );
        assert_eq!(dry["in_the_way"], real["in_the_way"], "{shape}: {dry}");
    }
}

/// The hunt of stop 58 (r113 (4)): a turn replaced file `d` by `d/b/f`, the user replaced
/// `d/b/f` by an empty directory, and the undo put file `d` back: `kept` named `d/b/f`,
/// which the run removed (an empty directory holds no byte to keep).
#[test]
fn an_empty_directory_the_undo_writes_over_is_not_reported_kept() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("d", "dfile\n");
    begin(&p, "s", "1");
    p.remove("d").file("d/b/f", "x\n");
    end(&p, "s", "1");
    p.remove("d/b/f");
    fs::create_dir(p.join("d/b/f")).unwrap();
    let args = ["undo", "--session", "s", "--turn", "1"];
    let (dry, real) = dry_then_real(&p, &args);
    assert_eq!(p.read("d"), b"dfile\n", "{real}");
    for (run, outcome) in [("dry run", &dry), ("real run", &real)] {
        assert_eq!(
            outcome["written"],
            serde_json::json!(["d"]),
            "{run}: {outcome}"
        );
        assert_eq!(outcome["kept"], serde_json::json!([]), "{run}: {outcome}");
    }
}
