//! Model-based "no byte lost" property tests (docs/faults.md, "Model-based tests").
//!
//! `random_user_and_agent_actions_never_lose_a_byte` drives the `rewind` binary through random
//! sequences of user and agent actions on a temp project (files, modes, ignore rules, the
//! project's own git, nested repositories, file/dir/symlink swaps, FIFOs, big files, odd names)
//! interleaved with turns, `undo`, `restore`, `revert` and `restore <undo id>` (also while a
//! turn is open). After every
//! rewind operation it asserts the frame rule: every entry that was on disk just before is
//! byte-identical afterwards unless the operation reported the path (written, restored or
//! deleted), and every reported path's old version is readable from the operation's undo id.
//! It also checks what each operation promises (a complete restore gives the snapshot; undo
//! brings a path to its state before the turn and leaves someone else's edits alone;
//! `restore <undo id>` right after an operation puts back every path it reported), that
//! nothing outside the project changes, that no command hangs, and that snapshots equal git's
//! tree.
//!
//! `two_sessions_with_overlapping_turns_never_lose_a_byte` runs the model with two sessions whose
//! turns overlap: agents that announce their paths (`turn track-file`) or not, shell-like
//! multi-file edits, user edits between and during turns, `undo` (`--turn`, `--file`, `--last`,
//! `--force`) and `redo` of either session. The model records who last wrote each path; an undo
//! or redo without `--force` may change only its own session's paths, a redo only what its undo
//! changed and still holds what that undo left, and every turn end gives each file an origin
//! (never `shared` when no other session's turn overlapped, nor its undo or redo changed files
//! meanwhile).
//!
//! `kill_9_during_restore_and_undo_leaves_the_project_recoverable` kills `restore` and `undo`
//! at a random rename, unlink or rmdir (strace fault injection) and checks that the undo id recorded
//! in `refs/rewind/undo` brings back every byte, and that the store stays fsck-clean.
//!
//! Seeds: fixed by default, `REWIND_TEST_SEED=<n>` replays another one; `REWIND_MODEL_STEPS=<n>`
//! runs longer. `REWIND_MODEL_SKIP=ignore,git,...` (bug hunting only) leaves action classes out;
//! `REWIND_MODEL_KEEP_GOING=1` lists every violation instead of stopping at the first. A
//! violation prints the actions so far as a shell script, each rewind command's output beside
//! it as a comment: `tests/replay-model-log.sh <the test's output> [lines]` runs it without
//! the harness (the project and store as they were just before any step).

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::fs;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::*;

/// Seed used when `REWIND_TEST_SEED` is not set (CI runs this one). Against the build of
/// 2026-11-30 its run meets the `--force` hang, undo deleting a file that existed before the
/// turn, and `restore <undo id>` not going back (docs/faults.md), so a fix of one still leaves
/// the others to fail on.
const DEFAULT_SEED: u64 = 4;
/// Steps of the default run (about 20 s in a debug build on 2 cores, plus 10 s per hang).
const DEFAULT_STEPS: usize = 450;
/// Seed of the default two-session run (seeds 17 and 5 found the bugs of a turn rolled back
/// while open, seed 3 that of a file a later turn only un-ignored: docs/faults.md).
const TWO_SESSIONS_SEED: u64 = 3;
/// Steps of the default two-session run (about 10 s in a debug build on 2 cores).
const TWO_SESSIONS_STEPS: usize = 300;
/// No rewind command may take longer than this on a project of a few files (they take < 1 s).
const DEADLINE: Duration = Duration::from_secs(10);
/// A file over rewind's default size cap (2 MiB).
const BIG: usize = 3 << 20;

/// Paths the actions pick from: swaps (`x` file or dir, `d/e` file or dir), odd names, a big
/// file, a symlink slot, the nested repository's directory.
const NAMES: &[&[u8]] = &[
    b"a.txt",
    b"b.log",
    b"d",
    b"d/x.txt",
    b"d/e",
    b"d/e/y.txt",
    b"sp ace",
    b"new\nline",
    b"bin\xff.dat",
    b"sub/f.txt",
    b"big.bin",
    b"lnk",
    b"x",
    b"x/inner",
];

/// Patterns the ignore actions toggle in `.gitignore`.
const PATTERNS: &[&str] = &[
    "*.log", "a.txt", "d/", "big.bin", "x", "sp ace", "!b.log", "sub/", "e/", "*.dat", "lnk",
];

/// Symlink targets: inside, outside the project, absolute, dangling, a directory.
const LINK_TARGETS: &[&str] = &[
    "a.txt",
    "../outside/secret",
    "/etc/hostname",
    "nowhere",
    "d",
];

/// Action classes; `REWIND_MODEL_SKIP` may leave some out while hunting further bugs.
const CLASSES: &[&str] = &[
    "ignore", "git", "nested", "symlink", "fifo", "big", "odd", "chmod", "undo", "redo", "restore",
    "revert", "force", "midturn", "merge", "move",
];

/// What a path holds, as far as "no byte lost" is concerned (git keeps only the exec bit).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ver {
    File { exec: bool, bytes: Vec<u8> },
    Link(Vec<u8>),
    Special,
}

fn ver_of(e: &FsEntry) -> Option<Ver> {
    match e.kind {
        'f' => Some(Ver::File {
            exec: e.mode & 0o100 != 0,
            bytes: e.content.clone().unwrap(),
        }),
        'l' => Some(Ver::Link(
            e.link.as_ref().unwrap().as_os_str().as_bytes().to_vec(),
        )),
        'd' => None,
        _ => Some(Ver::Special),
    }
}

fn short(v: &Option<Ver>) -> String {
    match v {
        None => "absent".into(),
        Some(Ver::File { exec, bytes }) => format!(
            "file{} {:?}",
            if *exec { "(+x)" } else { "" },
            String::from_utf8_lossy(&bytes[..bytes.len().min(40)])
        ),
        Some(Ver::Link(t)) => format!("symlink -> {:?}", String::from_utf8_lossy(t)),
        Some(Ver::Special) => "special file".into(),
    }
}

type Listing = BTreeMap<PathBuf, FsEntry>;

fn ver_at(l: &Listing, p: &Path) -> Option<Ver> {
    l.get(p).and_then(ver_of)
}

/// Quotes bytes for a shell command line (`$'...'` when not plain).
fn q(b: &[u8]) -> String {
    if !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || b"./_-".contains(c))
    {
        return String::from_utf8(b.to_vec()).unwrap();
    }
    let mut s = String::from("$'");
    for &c in b {
        match c {
            b'\'' => s.push_str("\\'"),
            b'\\' => s.push_str("\\\\"),
            b'\n' => s.push_str("\\n"),
            0x20..=0x7e => s.push(c as char),
            _ => s.push_str(&format!("\\x{c:02x}")),
        }
    }
    s.push('\'');
    s
}

/// `printf FORMAT` writing exactly `b` (NUL bytes included, which `$'...'` cannot hold).
fn printf(b: &[u8]) -> String {
    let mut s = String::from("printf '");
    for &c in b {
        match c {
            b'%' => s.push_str("%%"),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e if c != b'\'' => s.push(c as char),
            _ => s.push_str(&format!("\\{c:03o}")),
        }
    }
    s.push('\'');
    s
}

fn qp(p: &Path) -> String {
    q(p.as_os_str().as_bytes())
}

fn lossy(p: &Path) -> String {
    String::from_utf8_lossy(p.as_os_str().as_bytes()).into_owned()
}

/// The path a (lossy) reported name stands for, found in either listing.
fn path_named(reported: &str, before: &Listing, after: &Listing) -> PathBuf {
    before
        .keys()
        .chain(after.keys())
        .find(|p| lossy(p) == reported)
        .cloned()
        .unwrap_or_else(|| PathBuf::from(reported))
}

/// One entry of a stored tree.
struct TreeEntry {
    mode: String,
    oid: String,
}

/// A turn the model began: its session and id, the project on disk when it began, and what
/// it announced (`turn track-file`).
struct TurnRec {
    session: &'static str,
    id: String,
    begin: Listing,
    announced: Vec<Vec<u8>>,
    /// Another session's turn was open at some moment while this one was (rewind's rule: its
    /// begin or end commit was made meanwhile, or it was open and its session's latest).
    overlapped: bool,
    /// Rolled back by an undo (and not redone since), as the model counts it.
    rolled_back: bool,
    /// The undo that rolled it back left files alone: `undo --last --force` takes it again.
    left_alone: bool,
    /// `turn end` recorded it.
    ended: bool,
    /// While rolled back open: the newest undo that rolled it back and named its files
    /// (`Rewind-Rolled-Back-File:`): the project that undo found, and the files it named the
    /// turn's own (unannounced or announced).
    rollback: Option<(Listing, Vec<PathBuf>)>,
    /// What the undos that rolled it back while open left alone (`Rewind-Left-Alone:`).
    rollback_left: Vec<PathBuf>,
    /// The session's undo and redo runs counted when it began (`Model::runs`).
    begun_run: u64,
}

/// Who the model saw change a path last (invariant 2: whose paths an undo or redo may change).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Writer {
    /// The user with no turn open: edits, the project's git, `restore`, `revert`.
    User,
    /// The user while these sessions' turns were open: rewind cannot tell that from their
    /// agents' unannounced edits (an open turn's changes are its own).
    UserDuring(Vec<&'static str>),
    /// A session's agent, during its open turn.
    Agent(&'static str),
    /// A session's `undo` or `redo`.
    Rewind(&'static str),
}

/// An undo the model ran: its commit on the session's chain, what it found and what it left at
/// each path it changed (as snapshots see them), and the turns it rolled back.
struct UndoRec {
    session: &'static str,
    commit: String,
    found: BTreeMap<PathBuf, Option<Ver>>,
    left: BTreeMap<PathBuf, Option<Ver>>,
    rolled_back: Vec<usize>,
    /// The turn it undid from (an index into `turns`).
    from: usize,
    /// A redo brought all of it back (its chain commit names this undo).
    redone: bool,
    /// Turns of `rolled_back` a later redo gave back (one that left files alone redoes no
    /// undo whole, yet this undo no longer holds those turns).
    released: BTreeSet<usize>,
}

/// The sessions of the two-session model.
const SESSIONS: &[&str] = &["s1", "s 2"];

/// A version as snapshots see it: a FIFO or socket is absent to them.
fn seen(v: Option<Ver>) -> Option<Ver> {
    v.filter(|v| *v != Ver::Special)
}

/// The non-directory paths whose version differs between two listings.
fn changed_paths(before: &Listing, after: &Listing) -> BTreeSet<PathBuf> {
    let (b, a) = (versions(before), versions(after));
    b.keys()
        .chain(a.keys())
        .filter(|p| b.get(*p) != a.get(*p))
        .cloned()
        .collect()
}

/// Whether one of two project paths is the other or lies below it (an announcement of a
/// directory covers what is below it; writing a file removes what stands in its way).
fn related(a: &[u8], b: &[u8]) -> bool {
    let under = |x: &[u8], y: &[u8]| x.starts_with(y) && (x.len() == y.len() || x[y.len()] == b'/');
    under(a, b) || under(b, a)
}

/// A session id as one component of a ref name, the way rewind encodes it.
fn ref_component(id: &str) -> String {
    id.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

struct Model<'a> {
    sb: &'a Sandbox,
    root: PathBuf,
    outside: PathBuf,
    store: PathBuf,
    rng: XorShift,
    seed: u64,
    log: Vec<String>,
    skip: BTreeSet<String>,
    keep_going: bool,
    violations: Vec<String>,
    version: u64,
    snapshots: Vec<String>,
    /// The undo id the last restore, revert or undo printed.
    last_undo: Option<String>,
    turns: Vec<TurnRec>,
    /// Per session, its open turn (an index into `turns`).
    open: BTreeMap<&'static str, usize>,
    /// Sessions whose latest turn was rolled back while open: it can never end. Rewind does
    /// not count it as overlapping other sessions' turns, unless a redo brings it back; the
    /// model counts it (a turn it calls overlapped is one whose origins it does not check).
    stale: BTreeSet<&'static str>,
    turn_counter: u64,
    /// Two sessions whose turns overlap, with announcements and redo (else one at a time).
    two: bool,
    /// The project as the last attributed action left it.
    cur: Listing,
    /// The last writer of every path that ever changed.
    writers: BTreeMap<PathBuf, Writer>,
    /// Per session, what its agent or its undo/redo last left at each path (as snapshots see it).
    own: BTreeMap<&'static str, BTreeMap<PathBuf, Option<Ver>>>,
    /// Per session, what its undo/redo last left at each path (as snapshots see it).
    run_left: BTreeMap<&'static str, BTreeMap<PathBuf, Option<Ver>>>,
    undos: Vec<UndoRec>,
    /// Undo and redo runs recorded so far.
    runs: u64,
    /// Restores, reverts, undos and redos run so far (every third has a dry run first).
    changing_ops: u64,
    /// The session whose agent's file action is running (a move announces its destination
    /// when another open turn announced it, as `agent_edit` does its source).
    acting: Option<&'static str>,
    /// Per session and path, the last recorded undo or redo of the session that changed it:
    /// its run number and whether it was a redo.
    rewind_changed: BTreeMap<(&'static str, PathBuf), (u64, bool)>,
}

impl<'a> Model<'a> {
    fn new(sb: &'a Sandbox, two: bool, default_seed: u64) -> Model<'a> {
        let seed = std::env::var("REWIND_TEST_SEED")
            .ok()
            .map(|s| s.parse().expect("REWIND_TEST_SEED must be a number"))
            .unwrap_or(default_seed);
        let skip: BTreeSet<String> = std::env::var("REWIND_MODEL_SKIP")
            .unwrap_or_default()
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        for s in &skip {
            assert!(
                CLASSES.contains(&s.as_str()),
                "unknown class {s:?} in REWIND_MODEL_SKIP"
            );
        }
        eprintln!("model seed: {seed} (REWIND_TEST_SEED replays it)");
        let root = sb.project("p").path.clone();
        let outside = sb.root.join("outside");
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("secret"), b"outside bytes\n").unwrap();
        let store = sb.project("p").store();
        let cur = fs_snapshot(&root);
        Model {
            sb,
            root,
            outside,
            store,
            rng: XorShift::seeded(seed),
            seed,
            log: vec!["mkdir p outside && echo 'outside bytes' > outside/secret && cd p".into()],
            skip,
            keep_going: std::env::var_os("REWIND_MODEL_KEEP_GOING").is_some(),
            violations: Vec::new(),
            version: 0,
            snapshots: Vec::new(),
            last_undo: None,
            turns: Vec::new(),
            open: BTreeMap::new(),
            stale: BTreeSet::new(),
            turn_counter: 0,
            two,
            cur,
            writers: BTreeMap::new(),
            own: BTreeMap::new(),
            run_left: BTreeMap::new(),
            undos: Vec::new(),
            runs: 0,
            changing_ops: 0,
            acting: None,
            rewind_changed: BTreeMap::new(),
        }
    }

    fn on(&self, class: &str) -> bool {
        !self.skip.contains(class)
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.rng.below(from.len() as u64) as usize]
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.rng.below(100) < percent
    }

    fn abs(&self, rel: &[u8]) -> PathBuf {
        self.root.join(OsStr::from_bytes(rel))
    }

    fn violation(&mut self, what: String) {
        let report = format!(
            "NO-BYTE-LOST VIOLATION: {what}\nseed {} (REWIND_TEST_SEED={} replays); actions so far:\n{}",
            self.seed,
            self.seed,
            self.log.join("\n")
        );
        if self.keep_going {
            eprintln!("{report}\n");
            self.violations.push(what);
        } else {
            panic!("{report}");
        }
    }

    // ---- user and agent actions ------------------------------------------------------------

    /// Makes room for a file at `rel`: non-directories on the way go, a directory there goes.
    /// Logged (`rm -rf`, `mkdir -p`) where it changes anything, so the log replays as a script.
    fn clear_way(&mut self, rel: &[u8]) {
        let mut at = self.root.clone();
        let parts: Vec<&[u8]> = rel.split(|&b| b == b'/').collect();
        let mut gone = Vec::new();
        for (i, part) in parts.iter().enumerate() {
            at.push(OsStr::from_bytes(part));
            let Ok(md) = at.symlink_metadata() else {
                continue;
            };
            let last = i + 1 == parts.len();
            if md.is_dir() && last {
                fs::remove_dir_all(&at).unwrap();
            } else if !md.is_dir() {
                fs::remove_file(&at).unwrap();
            } else {
                continue;
            }
            gone.push(q(
                &rel[..parts[..=i].iter().map(|p| p.len() + 1).sum::<usize>() - 1]
            ));
        }
        if !gone.is_empty() {
            self.log.push(format!("rm -rf {}", gone.join(" ")));
        }
        let parent = at.parent().unwrap();
        if !parent.is_dir() {
            fs::create_dir_all(parent).unwrap();
            self.log.push(format!(
                "mkdir -p {}",
                qp(parent.strip_prefix(&self.root).unwrap())
            ));
        }
    }

    fn content(&mut self, rel: &[u8]) -> Vec<u8> {
        self.version += 1;
        let mut c = format!("v{} of {}\n", self.version, String::from_utf8_lossy(rel)).into_bytes();
        for i in 0..self.rng.below(4) {
            c.extend_from_slice(format!("line {i} {}\n", self.rng.below(1000)).as_bytes());
        }
        match self.rng.below(10) {
            0 => c.extend_from_slice(b"\0binary\xff"),
            1 => c.truncate(c.len() - 1), // no final newline
            _ => {}
        }
        c
    }

    fn pick_name(&mut self) -> &'static [u8] {
        loop {
            let n = self.pick(NAMES);
            let odd = n.contains(&b' ') || n.contains(&b'\n') || !n.is_ascii();
            if (odd && !self.on("odd")) || (n == b"big.bin" && !self.on("big")) {
                continue;
            }
            if n.starts_with(b"sub/") && !self.on("nested") {
                continue;
            }
            return n;
        }
    }

    /// One random action on the project's files, by the user (between turns) or the agent.
    fn file_action(&mut self) {
        let rel = self.pick_name();
        let kind = self.rng.below(22);
        self.file_action_on(rel, kind);
    }

    /// Action `kind` (of 22: write, delete, chmod, symlink, FIFO, big file, `.gitignore`, the
    /// project's git, a nested repository, a move) on `rel`.
    fn file_action_on(&mut self, rel: &'static [u8], kind: u64) {
        let path = self.abs(rel);
        match kind {
            0..=7 => {
                let data = self.content(rel);
                self.clear_way(rel);
                fs::write(&path, &data).unwrap();
                self.log.push(format!("{} > {}", printf(&data), q(rel)));
            }
            8..=9 => {
                if let Ok(md) = path.symlink_metadata() {
                    if md.is_dir() {
                        fs::remove_dir_all(&path).unwrap();
                    } else {
                        fs::remove_file(&path).unwrap();
                    }
                    self.log.push(format!("rm -rf {}", q(rel)));
                }
            }
            10..=11 if self.on("chmod") && path.symlink_metadata().is_ok_and(|m| m.is_file()) => {
                let mode = self.pick(&[0o600, 0o755, 0o644]);
                fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
                self.log.push(format!("chmod {mode:o} {}", q(rel)));
            }
            12..=13 if self.on("symlink") => {
                let target = self.pick(LINK_TARGETS);
                self.clear_way(rel);
                std::os::unix::fs::symlink(target, &path).unwrap();
                self.log
                    .push(format!("ln -s {} {}", q(target.as_bytes()), q(rel)));
            }
            14 if self.on("fifo") => {
                self.clear_way(rel);
                let st = Command::new("mkfifo").arg(&path).status().expect("mkfifo");
                assert!(st.success(), "mkfifo {}", path.display());
                self.log.push(format!("mkfifo {}", q(rel)));
            }
            15 if self.on("big") => {
                let mut data = filler(BIG, self.rng.below(26) as u8);
                let period = String::from_utf8(data[..26].to_vec()).unwrap();
                self.version += 1;
                data.extend_from_slice(format!("v{}\n", self.version).as_bytes());
                self.clear_way(rel);
                fs::write(&path, &data).unwrap();
                self.log.push(format!(
                    "yes {period} | tr -d '\\n' | head -c {BIG} > {} && echo v{} >> {}",
                    q(rel),
                    self.version,
                    q(rel)
                ));
            }
            16..=17 if self.on("ignore") => self.toggle_ignore(),
            18 if self.on("git") => self.git_action(),
            19 if self.on("nested") => self.nested_action(),
            20..=21 if self.on("move") => self.move_action(rel, kind == 21),
            _ => {}
        }
    }

    /// `mv rel to` (a file, a symlink or a directory, over whatever stands at `to`), and with
    /// `new_at_old`, a new file at `rel` (`mv f g; echo new > f`).
    fn move_action(&mut self, rel: &'static [u8], new_at_old: bool) {
        let to = self.pick_name();
        if related(rel, to) || self.abs(rel).symlink_metadata().is_err() {
            return;
        }
        // An agent's move writes `to` too: announced first where another open turn announced
        // it (seed 304 at 2,000 steps: unannounced, it was a lie rewind believes).
        if let Some(session) = self.acting.filter(|&s| self.announced_by_another(s, to)) {
            if !self.announce(session, to) {
                return;
            }
        }
        self.clear_way(to);
        // (`to` may have held what `rel` leads through: a symlink on `rel`'s way into it, seed
        // 424 at 800 steps. The removal was the action then.)
        if self.abs(rel).symlink_metadata().is_err() {
            return;
        }
        fs::rename(self.abs(rel), self.abs(to)).unwrap();
        self.log.push(format!("mv {} {}", q(rel), q(to)));
        if new_at_old {
            self.file_action_on(rel, 0);
        }
    }

    /// Adds or removes one pattern of `.gitignore` (making existing files ignored or not).
    fn toggle_ignore(&mut self) {
        let path = self.root.join(".gitignore");
        let mut lines: Vec<String> = match fs::symlink_metadata(&path) {
            Ok(md) if md.is_file() => String::from_utf8_lossy(&fs::read(&path).unwrap())
                .lines()
                .map(str::to_string)
                .collect(),
            Ok(_) => return,
            Err(_) => Vec::new(),
        };
        let pattern = self.pick(PATTERNS).to_string();
        if let Some(i) = lines.iter().position(|l| *l == pattern) {
            lines.remove(i);
        } else {
            lines.push(pattern);
        }
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        fs::write(&path, &text).unwrap();
        self.log
            .push(format!("{} > .gitignore", printf(text.as_bytes())));
    }

    fn git_logged(&mut self, cwd: &Path, args: &[&OsStr]) {
        let run = self.sb.git_run(Some(cwd), args);
        let rel = cwd.strip_prefix(&self.root).unwrap();
        let mut line = String::from("git");
        if !rel.as_os_str().is_empty() {
            line.push_str(&format!(" -C {}", qp(rel)));
        }
        for a in args {
            line.push(' ');
            line.push_str(&q(a.as_bytes()));
        }
        if !run.status.success() {
            line.push_str("   # fails");
        }
        self.log.push(line);
    }

    /// The project's own repository: init, `add -f` of a (maybe ignored) file, commit, switch
    /// branches (which changes files).
    fn git_action(&mut self) {
        let root = self.root.clone();
        if !root.join(".git").exists() {
            self.git_logged(&root, &["init".as_ref(), "-q".as_ref()]);
            return;
        }
        match self.rng.below(4) {
            0 => {
                let rel = self.pick_name();
                self.git_logged(
                    &root,
                    &[
                        "add".as_ref(),
                        "-f".as_ref(),
                        "--".as_ref(),
                        OsStr::from_bytes(rel),
                    ],
                );
            }
            1 => self.git_logged(
                &root,
                &[
                    "commit".as_ref(),
                    "-qam".as_ref(),
                    "c".as_ref(),
                    "--allow-empty".as_ref(),
                ],
            ),
            2 => {
                let branch = self.pick(&["main", "other"]);
                let exists = self
                    .sb
                    .git_run(Some(&root), ["rev-parse", "--verify", "-q", branch])
                    .status
                    .success();
                let args: &[&OsStr] = if exists {
                    &["checkout".as_ref(), "-q".as_ref(), branch.as_ref()]
                } else {
                    &[
                        "checkout".as_ref(),
                        "-q".as_ref(),
                        "-b".as_ref(),
                        branch.as_ref(),
                    ]
                };
                self.git_logged(&root, args);
            }
            _ => {
                self.git_logged(&root, &["add".as_ref(), "-A".as_ref()]);
                self.git_logged(
                    &root,
                    &[
                        "commit".as_ref(),
                        "-qm".as_ref(),
                        "all".as_ref(),
                        "--allow-empty".as_ref(),
                    ],
                );
            }
        }
    }

    /// `git init sub` (files under sub/ become a nested repository), with its git dir in `sub`
    /// or beside the project (`sub/.git` a `gitdir:` file, as for a submodule); a rule in its
    /// `info/exclude` (its own, which the project's rules do not reach); or `rm -rf sub/.git`.
    fn nested_action(&mut self) {
        let sub = self.root.join("sub");
        let dot_git = sub.join(".git");
        let separate = self.root.with_file_name("sub-git");
        match dot_git.symlink_metadata() {
            Ok(found) if self.chance(40) => {
                let git_dir = if found.is_dir() { dot_git } else { separate };
                let exclude = git_dir.join("info/exclude");
                let rule = self.pick(&["f.txt\n", "*.txt\n", "# none\n"]);
                fs::create_dir_all(exclude.parent().unwrap()).unwrap();
                fs::write(&exclude, rule).unwrap();
                let shown = match found.is_dir() {
                    true => "sub/.git/info/exclude",
                    false => "../sub-git/info/exclude",
                };
                self.log.push(format!(
                    "mkdir -p \"$(dirname {shown})\" && echo {} > {shown}",
                    q(rule.trim().as_bytes()),
                ));
            }
            Ok(found) => {
                match found.is_dir() {
                    true => fs::remove_dir_all(&dot_git).unwrap(),
                    false => fs::remove_file(&dot_git).unwrap(),
                }
                self.log.push("rm -rf sub/.git".into());
            }
            Err(_) => {
                self.clear_way(b"sub/.keep");
                if self.chance(50) {
                    self.git_logged(&sub, &["init".as_ref(), "-q".as_ref()]);
                } else {
                    let _ = fs::remove_dir_all(&separate);
                    let args = [
                        "init".as_ref(),
                        "-q".as_ref(),
                        "--separate-git-dir".as_ref(),
                        separate.as_os_str(),
                    ];
                    self.git_logged(&sub, &args);
                }
            }
        }
    }

    // ---- rewind ----------------------------------------------------------------------------

    /// Runs `rewind -C p --json ARGS`, logged; no panic, no hang.
    fn rewind(&mut self, args: &[&OsStr]) -> (Run, Option<Value>) {
        let mut line = String::from("rewind --json");
        for a in args {
            line.push(' ');
            line.push_str(&q(a.as_bytes()));
        }
        let mut cmd = self.sb.rewind_command([
            OsStr::new("-C"),
            self.root.as_os_str(),
            OsStr::new("--json"),
        ]);
        cmd.args(args);
        // A hang is a violation like any other: reported with the seed and the action log.
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_with_deadline(&mut cmd, DEADLINE)
        }));
        let run = match caught {
            Ok(run) => run,
            Err(_) => {
                self.log.push(format!("{line}   # hangs"));
                self.violation(format!("{line} hangs (killed after {DEADLINE:?})"));
                return (
                    run_with_deadline(&mut Command::new("false"), DEADLINE),
                    None,
                );
            }
        };
        line.push_str(&format!("   # exit {:?}", run.code()));
        self.log.push(line);
        self.log.push(format!("#   {}", run.stdout.trim()));
        assert_no_panic(&run);
        let json = (!run.stdout.trim().is_empty()).then(|| one_json(&run));
        if run.code() == Some(2) {
            panic!("usage error from a well-formed command: {run}");
        }
        (run, json)
    }

    /// The whole project with contents (one read of every file, 3 MiB ones included).
    fn listing(&self) -> Listing {
        fs_snapshot(&self.root)
    }

    /// Every non-tree entry of `tree` in the store (one `git ls-tree`).
    fn tree(&self, tree: &str) -> BTreeMap<PathBuf, TreeEntry> {
        ls_tree(self.sb, &self.store, tree)
            .into_iter()
            .map(|(path, (mode, oid))| {
                (
                    PathBuf::from(OsString::from_vec(path)),
                    TreeEntry { mode, oid },
                )
            })
            .collect()
    }

    /// What `entry` of a stored tree holds (one `git cat-file`).
    fn stored_ver(&self, entry: &TreeEntry) -> Option<Ver> {
        let blob = self
            .sb
            .git_in_run(&self.store, ["cat-file", "blob", &entry.oid]);
        if !blob.status.success() {
            return None; // a lost object recovers nothing
        }
        match entry.mode.as_str() {
            "120000" => Some(Ver::Link(blob.stdout_bytes)),
            "100755" => Some(Ver::File {
                exec: true,
                bytes: blob.stdout_bytes,
            }),
            "100644" => Some(Ver::File {
                exec: false,
                bytes: blob.stdout_bytes,
            }),
            _ => None,
        }
    }

    /// The frame rule around one operation (see the module docs). `reported`: lossy
    /// project-relative paths the operation says it wrote or deleted. Costs one `ls-tree` and a
    /// `cat-file` per changed path, on top of the two listings.
    fn check_frame(
        &mut self,
        op: &str,
        before: &Listing,
        after: &Listing,
        reported: &BTreeSet<String>,
        undo: Option<&str>,
    ) {
        let undo_tree = undo.map(|u| self.tree(u));
        let is_reported = |p: &Path| reported.contains(&lossy(p));
        // A directory may come or go only on the way to a reported path, or below one (a
        // file written where a directory of empty directories stood).
        let dir_may_change = |p: &Path| {
            let prefix = format!("{}/", lossy(p));
            p.as_os_str().is_empty()
                || reported.iter().any(|r| r.starts_with(&prefix))
                || p.ancestors().any(is_reported)
        };
        let mut problems = Vec::new();
        for (p, b) in before {
            let a = after.get(p);
            let same = a.is_some_and(|a| {
                // A directory's mtime moves with its entries; a file's must not.
                a.kind == b.kind
                    && a.mode == b.mode
                    && (a.kind == 'd' || a.mtime == b.mtime)
                    && a.content == b.content
                    && a.link == b.link
            });
            if same {
                continue;
            }
            if b.kind == 'd' {
                if !dir_may_change(p) {
                    problems.push(format!(
                        "directory {} changed (now {:?}), but no path in it was reported",
                        qp(p),
                        a.map(|a| (a.kind, format!("{:o}", a.mode)))
                    ));
                }
                continue;
            }
            if !is_reported(p) {
                problems.push(format!(
                    "{} changed ({} -> {}) but the operation did not report it",
                    qp(p),
                    short(&ver_of(b)),
                    short(&a.and_then(ver_of))
                ));
                continue;
            }
            let old = ver_of(b);
            let saved = undo_tree
                .as_ref()
                .and_then(|t| t.get(p))
                .and_then(|e| self.stored_ver(e));
            if saved != old {
                problems.push(format!(
                    "{} was {} and is now {}; the undo id {} holds {} (bytes lost)",
                    qp(p),
                    short(&old),
                    short(&a.and_then(ver_of)),
                    undo.unwrap_or("(none)"),
                    short(&saved)
                ));
            }
        }
        for (p, a) in after {
            if before.contains_key(p) {
                continue;
            }
            let ok = if a.kind == 'd' {
                dir_may_change(p)
            } else {
                is_reported(p)
            };
            if !ok {
                problems.push(format!("{} appeared but was not reported", qp(p)));
            }
        }
        if !problems.is_empty() {
            self.violation(format!("{op}:\n  {}", problems.join("\n  ")));
        }
    }

    /// The reported paths of a restore/revert/undo outcome, and its undo id.
    fn outcome(&mut self, op: &str, run: &Run, json: &Option<Value>) -> Option<Outcome> {
        let json = json.as_ref()?;
        if json.get("error").is_some() {
            assert_eq!(run.code(), Some(1), "an error must exit 1: {run}");
            return None;
        }
        let strings = |key: &str| -> Vec<String> {
            json[key]
                .as_array()
                .map(|a| a.iter().map(|v| v.as_str().unwrap().to_string()).collect())
                .unwrap_or_default()
        };
        let written = strings("written");
        let undo = json["undo"]
            .as_str()
            .unwrap_or_else(|| panic!("{op}: no undo id in {json}"))
            .to_string();
        let failed = json["failed"].as_array().map_or(0, Vec::len);
        assert_eq!(
            run.code(),
            Some(if failed == 0 { 0 } else { 1 }),
            "{op}: exit code and failed list disagree: {run}"
        );
        Some(Outcome {
            written,
            deleted: strings("deleted"),
            conflicts: strings("conflicts"),
            kept: strings("kept"),
            failed_paths: json["failed"]
                .as_array()
                .map(|f| {
                    f.iter()
                        .filter_map(|x| x["path"].as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
            failed,
            undo,
        })
    }

    /// Runs a restore, revert, undo or redo by `actor` and checks the frame rule; returns the
    /// outcome and the listings before and after (`actor` is their last writer now).
    fn changing_op(
        &mut self,
        args: Vec<OsString>,
        actor: Writer,
    ) -> Option<(Outcome, Listing, Listing)> {
        let op = self.describe(&args);
        let before = self.listing();
        let outside_before = fs_snapshot(&self.outside);
        // Every third (not a redo: it has none): the same command with `--dry-run` first,
        // which must change nothing and tell what the real run then does.
        self.changing_ops += 1;
        let dry = match args[0] != "redo" && self.changing_ops.is_multiple_of(3) {
            true => self.dry_run(&op, &args, &before),
            false => None,
        };
        let argv: Vec<&OsStr> = args.iter().map(OsString::as_os_str).collect();
        let (run, json) = self.rewind(&argv);
        let after = self.listing();
        self.attribute(&before, &after, &actor);
        if fs_snapshot(&self.outside) != outside_before {
            self.violation(format!("{op} changed a file outside the project"));
        }
        let outcome = self.outcome(&op, &run, &json);
        let reported: BTreeSet<String> = outcome
            .iter()
            .flat_map(|o| o.written.iter().chain(&o.deleted).cloned())
            .collect();
        self.check_frame(
            &op,
            &before,
            &after,
            &reported,
            outcome.as_ref().map(|o| o.undo.as_str()),
        );
        if let (Some(dry), Some(real)) = (dry, &json) {
            let (dry, real) = (report_lists(&dry), report_lists(real));
            if dry != real {
                self.violation(format!(
                    "{op}: the dry run said {dry:?}, the real run {real:?}"
                ));
            }
        }
        if let Some(json) = &json {
            self.check_left_alone(&op, json, &before, &after);
        }
        let outcome = outcome?;
        for w in &outcome.written {
            if !after.iter().any(|(p, e)| lossy(p) == *w && e.kind != 'd') {
                self.violation(format!("{op} reported writing {w:?}, which is not on disk"));
            }
        }
        for d in &outcome.deleted {
            if after.iter().any(|(p, e)| lossy(p) == *d && e.kind != 'd') {
                self.violation(format!(
                    "{op} reported deleting {d:?}, which is still on disk"
                ));
            }
        }
        self.snapshots.push(outcome.undo.clone());
        self.last_undo = Some(outcome.undo.clone());
        Some((outcome, before, after))
    }

    /// `args` with `--dry-run`: its outcome, after checking that it changed nothing (`None`
    /// when it is an error).
    fn dry_run(&mut self, op: &str, args: &[OsString], before: &Listing) -> Option<Value> {
        let mut argv: Vec<&OsStr> = args.iter().map(OsString::as_os_str).collect();
        argv.insert(1, OsStr::new("--dry-run"));
        let (run, json) = self.rewind(&argv);
        if self.listing() != *before {
            self.violation(format!("{op} --dry-run changed the project"));
        }
        match json {
            Some(json) if json.get("error").is_none() => Some(json),
            _ => {
                assert_ne!(
                    run.code(),
                    Some(0),
                    "{op} --dry-run: no outcome, exit 0: {run}"
                );
                None
            }
        }
    }

    /// What `kept` and `in_the_way` say is true of the project: a path kept that stood before
    /// the run stands after it as it was (r110 (2)), and something stood at each path in the
    /// way, or on the way to it, before the run (r110 (1)).
    fn check_left_alone(&mut self, op: &str, json: &Value, before: &Listing, after: &Listing) {
        // (Reported names are lossy: a name is matched against the listings' names so.)
        let names = |key: &str| -> Vec<String> {
            json[key].as_array().map_or(Vec::new(), |a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
        };
        let mut problems = Vec::new();
        for r in names("kept") {
            let p = path_named(&r, before, after);
            if let Some(was) = before.get(&p) {
                let now = after.get(&p).map(|n| (n.kind, &n.content, &n.link));
                if now != Some((was.kind, &was.content, &was.link)) {
                    problems.push(format!("kept {} is not as it was", qp(&p)));
                }
            }
        }
        for r in names("in_the_way") {
            let on_the_way = r
                .match_indices('/')
                .map(|(i, _)| &r[..i])
                .chain([r.as_str()]);
            let stood = on_the_way
                .into_iter()
                .any(|name| before.keys().any(|k| lossy(k) == name));
            if !stood {
                problems.push(format!("nothing stood at {r:?} or on the way to it"));
            }
        }
        if !problems.is_empty() {
            self.violation(format!("{op}:\n  {}", problems.join("\n  ")));
        }
    }

    /// Sometimes goes straight back with `restore <undo id>` after `o`, and checks that every
    /// path `o` reported is as it was before `o` (unless the way back reports a conflict there,
    /// or keeps it: a file the way back's snapshot could not see, such as one ignored now).
    fn round_trip(&mut self, op: &str, o: &Outcome, before: &Listing) {
        if (o.written.is_empty() && o.deleted.is_empty()) || !self.chance(30) {
            return;
        }
        let args = vec!["restore".into(), o.undo.clone().into()];
        let user = self.user();
        let Some((back, _, after)) = self.changing_op(args, user) else {
            return self.violation(format!("{op}: `restore {}` (its undo id) failed", o.undo));
        };
        let mut problems = Vec::new();
        // Known gap (docs/faults.md): a file the operation wrote that no snapshot of the way
        // back can see (the operation also wrote a `.gitignore` that hides it) stays, unreported.
        let seen_by_way_back = self.tree(&back.undo);
        for r in o.written.iter().chain(&o.deleted) {
            if back.conflicts.contains(r) || back.kept.contains(r) || back.failed_paths.contains(r)
            {
                continue; // left alone or not done, and said so (a failure exits 1)
            }
            let p = path_named(r, before, &after);
            if ver_at(before, &p).is_none() && !seen_by_way_back.contains_key(&p) {
                continue;
            }
            let (was, now) = (ver_at(before, &p), ver_at(&after, &p));
            if was != now {
                problems.push(format!("{}: {} (was {})", qp(&p), short(&now), short(&was)));
            }
        }
        if !problems.is_empty() {
            self.violation(format!(
                "{op}, then `restore {}` (its undo id) did not bring back:\n  {}",
                o.undo,
                problems.join("\n  ")
            ));
        }
    }

    fn describe(&self, args: &[OsString]) -> String {
        let parts: Vec<String> = args.iter().map(|a| q(a.as_bytes())).collect();
        format!("rewind {}", parts.join(" "))
    }

    /// A complete restore (or revert under `scope`) leaves exactly `target` on disk there.
    fn check_gives_target(
        &mut self,
        op: &str,
        target: &str,
        undo: &str,
        after: &Listing,
        scope: Option<&[PathBuf]>,
        kept: &[String],
    ) {
        let within = |p: &Path| scope.is_none_or(|s| s.iter().any(|n| p.starts_with(n)));
        let want = self.tree(target);
        let mut problems = Vec::new();
        for (p, e) in &want {
            if !within(p) {
                continue;
            }
            let on_disk = ver_at(after, p);
            if on_disk != self.stored_ver(e) {
                problems.push(format!("{}: {} on disk", qp(p), short(&on_disk)));
            }
        }
        for p in self.tree(undo).keys() {
            let reported_kept = kept.iter().any(|k| *k == lossy(p));
            if within(p) && !want.contains_key(p) && ver_at(after, p).is_some() && !reported_kept {
                problems.push(format!("{}: still on disk, not in the target", qp(p)));
            }
        }
        if !problems.is_empty() {
            self.violation(format!(
                "{op} reported success without conflicts, but the project is not {target}:\n  {}",
                problems.join("\n  ")
            ));
        }
    }

    fn pick_snapshot(&mut self) -> Option<String> {
        if self.snapshots.is_empty() {
            return None;
        }
        let i = self.rng.below(self.snapshots.len() as u64) as usize;
        Some(self.snapshots[i].clone())
    }

    fn track(&mut self) {
        let (run, _) = self.rewind(&["track".as_ref()]);
        run.assert_success();
        let tracked = Tracked::parse(&run.stdout);
        let hash = tracked.hash;
        let skipped_paths: Vec<String> = tracked
            .skipped
            .into_iter()
            .filter(|s| s.reason != "nested_repo")
            .map(|s| s.path)
            .collect();
        self.snapshots.push(hash.clone());
        assert_tree_complete(self.sb, &self.store, &hash);
        // Rewind's too_large/special_file/unreadable leave-outs are left out of git's tree too,
        // through the oracle's info/exclude. That cannot name a non-UTF-8 path or one with a
        // newline, and a `!` rule in .gitignore outranks it: then there is no oracle.
        let excludes: Vec<&str> = skipped_paths.iter().map(String::as_str).collect();
        let negated = fs::read(self.root.join(".gitignore"))
            .is_ok_and(|t| t.split(|&b| b == b'\n').any(|l| l.starts_with(b"!")));
        let expressible = excludes.iter().all(|e| !e.contains(['\u{fffd}', '\n']));
        if expressible && (excludes.is_empty() || !negated) {
            // git's tree leaves the nested repository `sub` out; rewind holds its files as
            // `git -C sub add -A` takes them, unless the project's rules ignore `sub`.
            let want = git_tree(self.sb, &self.root, &excludes);
            let nested = self.root.join("sub/.git").symlink_metadata().is_ok();
            let got = self.sb.git_in(&self.store, ["ls-tree", "-r", &hash]);
            let outside_sub: String = got
                .lines()
                .filter(|line| !line.contains("\tsub/"))
                .map(|line| format!("{line}\n"))
                .collect();
            let (ours, theirs) = match nested {
                false => (hash.clone(), want.id.clone()),
                true => (outside_sub, want.listing.clone()),
            };
            if ours != theirs {
                self.violation(format!(
                    "track: rewind's tree {hash} differs from git's {} (left out: {:?})\nrewind:\n{}git:\n{}",
                    want.id, excludes, got, want.listing
                ));
            }
            if nested {
                let run = self.sb.git_in_run(
                    &self.store,
                    ["rev-parse", "-q", "--verify", &format!("{hash}:sub")],
                );
                let ours = run.status.success().then(|| run.stdout.trim().to_string());
                let theirs = self.sub_tree(&excludes);
                if ours != theirs {
                    self.violation(format!(
                        "track: the nested repository sub is {ours:?} in rewind's tree {hash}, {theirs:?} to git\nrewind:\n{got}"
                    ));
                }
            }
        }
    }

    /// The tree of the nested repository `sub` as `git -C sub add -A` writes it (`excludes`
    /// below it left out), or `None` when the project's rules ignore `sub` or it holds no file.
    fn sub_tree(&self, excludes: &[&str]) -> Option<String> {
        let scratch = tempfile::tempdir().unwrap();
        let mut cmd = self.sb.git_command(Some(&self.root));
        cmd.arg("--git-dir")
            .arg(scratch.path())
            .arg("--work-tree")
            .arg(&self.root)
            .args(["check-ignore", "--no-index", "-q", "sub/"]);
        self.sb.git(
            None,
            [
                "init".as_ref(),
                "-q".as_ref(),
                "--bare".as_ref(),
                scratch.path().as_os_str(),
            ],
        );
        if run_with_deadline(&mut cmd, DEFAULT_DEADLINE).code() == Some(0) {
            return None;
        }
        let below: Vec<&str> = excludes
            .iter()
            .filter_map(|e| e.strip_prefix("sub/"))
            .collect();
        let (id, _) = git_repo_tree(self.sb, &self.root.join("sub"), &below);
        (id != empty_tree(self.sb)).then_some(id)
    }

    fn restore(&mut self) {
        let undo_point = self.chance(30);
        let target = if undo_point {
            self.last_undo.clone()
        } else {
            self.pick_snapshot()
        };
        let Some(target) = target else { return };
        let force = self.on("force") && self.chance(20);
        let mut args: Vec<OsString> = vec!["restore".into(), target.clone().into()];
        if force {
            args.push("--force".into());
        }
        let op = self.describe(&args);
        let user = self.user();
        if let Some((o, before, after)) = self.changing_op(args, user) {
            if o.conflicts.is_empty() && o.failed == 0 {
                self.check_gives_target(&op, &target, &o.undo, &after, None, &o.kept);
            }
            self.round_trip(&op, &o, &before);
        }
    }

    fn revert(&mut self) {
        let Some(target) = self.pick_snapshot() else {
            return;
        };
        let mut names: Vec<PathBuf> = Vec::new();
        for _ in 0..1 + self.rng.below(2) {
            let n = self.pick_name();
            let n = if self.chance(30) {
                n.split(|&b| b == b'/').next().unwrap()
            } else {
                n
            };
            names.push(PathBuf::from(OsStr::from_bytes(n)));
        }
        let mut args: Vec<OsString> = vec!["revert".into(), target.clone().into(), "--".into()];
        args.extend(names.iter().map(|n| n.clone().into_os_string()));
        let op = self.describe(&args);
        let user = self.user();
        if let Some((o, before, after)) = self.changing_op(args, user) {
            if o.conflicts.is_empty() && o.failed == 0 {
                // One target for all names, so overlapping names agree.
                self.check_gives_target(&op, &target, &o.undo, &after, Some(&names), &o.kept);
            }
            self.round_trip(&op, &o, &before);
        }
    }

    /// Begins a turn of `session`; it overlaps every other session's turn open now (or left
    /// open for good by a rolled-back turn), and every one that begins before it ends.
    fn begin_turn(&mut self, session: &'static str) {
        self.turn_counter += 1;
        let id = format!("t{}", self.turn_counter);
        let begin = self.listing();
        let (run, _) = self.rewind(&[
            "turn".as_ref(),
            "begin".as_ref(),
            "--session".as_ref(),
            session.as_ref(),
            "--turn".as_ref(),
            id.as_ref(),
        ]);
        run.assert_success();
        if self.listing() != begin {
            self.violation("turn begin changed the project".into());
        }
        self.stale.remove(session);
        let overlapped = !self.open.is_empty() || !self.stale.is_empty();
        for &i in self.open.values() {
            self.turns[i].overlapped = true;
        }
        self.turns.push(TurnRec {
            session,
            id,
            begin,
            announced: Vec::new(),
            overlapped,
            rolled_back: false,
            left_alone: false,
            ended: false,
            rollback: None,
            rollback_left: Vec::new(),
            begun_run: self.runs,
        });
        self.open.insert(session, self.turns.len() - 1);
    }

    /// An undo or redo of `session` that changed files while another session's turn was open:
    /// the paths it names are `shared` in that turn (not announced by it), so the model stops
    /// checking that turn's origins, as for an overlap.
    fn changed_during_others_turns(&mut self, session: &str, before: &Listing, after: &Listing) {
        if changed_paths(before, after).is_empty() {
            return;
        }
        for (&other, &i) in &self.open {
            if other != session {
                self.turns[i].overlapped = true;
            }
        }
    }

    /// Ends the open turn of `session`; checks each file's origin (invariant 4): present, and
    /// for a turn no other session's turn overlapped, `announced` exactly where it announced.
    fn end_turn(&mut self, session: &'static str) {
        let i = self.open.remove(session).unwrap();
        let before = self.listing();
        let id = self.turns[i].id.clone();
        let (run, json) = self.rewind(&[
            "turn".as_ref(),
            "end".as_ref(),
            "--session".as_ref(),
            session.as_ref(),
            "--turn".as_ref(),
            id.as_ref(),
        ]);
        if self.listing() != before {
            self.violation("turn end changed the project".into());
        }
        let op = format!(
            "rewind turn end --session {} --turn {id}",
            q(session.as_bytes())
        );
        // An undo of this session while the turn was open rolled it back: it cannot be ended
        // (what changed since is the undo's, not the agent's).
        let refused = run.code() == Some(1) && run.stdout.contains("\"turn_state\"");
        if refused != self.turns[i].rolled_back {
            self.violation(format!(
                "{op}: the model counts the turn rolled back: {}, but rewind {}",
                self.turns[i].rolled_back,
                if refused {
                    "refused to end it"
                } else {
                    "ended it"
                }
            ));
        }
        if refused {
            self.stale.insert(session);
            return;
        }
        run.assert_success();
        self.turns[i].ended = true;
        let Some(files) = json.as_ref().and_then(|j| j["files"].as_array()) else {
            return self.violation(format!("{op}: no `files` list in {json:?}"));
        };
        let t = &self.turns[i];
        let mut problems = Vec::new();
        for f in files {
            let file = f["file"].as_str().unwrap_or_default();
            let origin = f["origin"].as_str();
            if !matches!(origin, Some("unannounced" | "announced" | "shared")) {
                problems.push(format!("{file:?}: origin {origin:?}"));
                continue;
            }
            // (Paths in JSON are lossy UTF-8. A rename's origin is the stronger of its two
            // paths'.)
            let old = f["old_file"].as_str();
            let covered = t.announced.iter().any(|a| {
                let a = String::from_utf8_lossy(a);
                let under = |p: &str| related(p.as_bytes(), a.as_bytes()) && p.len() >= a.len();
                under(file) || old.is_some_and(under)
            });
            let want = if covered { "announced" } else { "unannounced" };
            if !t.overlapped && origin != Some(want) {
                problems.push(format!(
                    "{file:?}: origin {origin:?}, but no other session's turn overlapped and the turn {} it",
                    if covered { "announced" } else { "did not announce" }
                ));
            }
        }
        if !problems.is_empty() {
            self.violation(format!(
                "{op}: files without the right origin:\n  {}",
                problems.join("\n  ")
            ));
        }
    }

    /// `turn track-file` of `rel` by `session`'s open turn. In the two-session model an agent
    /// does not claim a path another session's agent changed during its turn (rewind would
    /// count that change as this session's: announcing is how it tells whose a change is).
    fn announce(&mut self, session: &'static str, rel: &'static [u8]) -> bool {
        let i = self.open[session];
        let claims_theirs = self.two
            && self.writers.iter().any(|(p, w)| {
                matches!(w, Writer::Agent(s) if *s != session)
                    && related(p.as_os_str().as_bytes(), rel)
                    && seen(ver_at(&self.cur, p)) != seen(ver_at(&self.turns[i].begin, p))
            });
        if claims_theirs {
            return false;
        }
        let id = self.turns[i].id.clone();
        let (run, _) = self.rewind(&[
            "turn".as_ref(),
            "track-file".as_ref(),
            "--session".as_ref(),
            session.as_ref(),
            "--turn".as_ref(),
            id.as_ref(),
            OsStr::from_bytes(rel),
        ]);
        // A path through a symlink is refused; anything else works.
        assert!(run.code() == Some(0) || run.code() == Some(1), "{run}");
        if run.code() == Some(0) {
            self.turns[i].announced.push(rel.to_vec());
        }
        run.code() == Some(0)
    }

    /// One file action by `session`'s agent (no git, no nested repository), announced first
    /// when `announce` says so, or when another open turn announced the path (then it is
    /// announced by both: shared); an unannounced edit there would be a lie rewind believes.
    fn agent_edit(&mut self, session: &'static str, announce: bool) {
        let rel = self.pick_name();
        // (Not the project's git nor a nested repository: 18 and 19 are moves.)
        let kind = match self.rng.below(20) {
            k @ 18..=19 => k + 2,
            k => k,
        };
        let theirs = self.announced_by_another(session, rel);
        if announce || theirs {
            let announced = self.announce(session, rel);
            if theirs && !announced {
                return;
            }
        }
        self.log
            .push(format!("# session {}'s agent:", q(session.as_bytes())));
        self.acting = Some(session);
        self.file_action_on(rel, kind);
        self.acting = None;
        let agent = self.agent(session);
        self.settle(agent);
    }

    /// Whether an open turn of another session than `session` announced `rel` (or a path
    /// above or below it).
    fn announced_by_another(&self, session: &'static str, rel: &[u8]) -> bool {
        self.open
            .iter()
            .any(|(s, &i)| *s != session && self.turns[i].announced.iter().any(|a| related(a, rel)))
    }

    /// Who the edits of `session`'s agent are, as rewind sees them: its own, unless its open
    /// turn was rolled back (that turn is over: its agent's edits are then the user's).
    fn agent(&self, session: &'static str) -> Writer {
        match self.open.get(session) {
            Some(&i) if self.turns[i].rolled_back => self.user(),
            _ => Writer::Agent(session),
        }
    }

    /// A shell command of `session`'s agent (a formatter, `sed -i`): several unannounced edits.
    fn shell_edit(&mut self, session: &'static str) {
        for _ in 0..2 + self.rng.below(3) {
            self.agent_edit(session, false);
        }
    }

    /// Records `actor` as the last writer of every path that changed from `before` to `after`
    /// (and for a session's agent, undo or redo, or the user while its turn is open, as the
    /// session's last word there: what its chain records).
    fn attribute(&mut self, before: &Listing, after: &Listing, actor: &Writer) {
        for p in changed_paths(before, after) {
            let sessions = match actor {
                Writer::Agent(s) | Writer::Rewind(s) => std::slice::from_ref(s),
                Writer::UserDuring(open) => open.as_slice(),
                Writer::User => &[],
            };
            for s in sessions {
                let v = seen(ver_at(after, &p));
                self.own.entry(s).or_default().insert(p.clone(), v);
            }
            if let Writer::Rewind(s) = actor {
                let v = seen(ver_at(after, &p));
                self.run_left.entry(s).or_default().insert(p.clone(), v);
            }
            self.writers.insert(p, actor.clone());
        }
        self.cur = after.clone();
    }

    /// After an action on the files by `actor`: attributes what changed since the last one.
    /// Costs a listing of the project.
    fn settle(&mut self, actor: Writer) {
        let (before, now) = (std::mem::take(&mut self.cur), self.listing());
        self.attribute(&before, &now, &actor);
    }

    /// The user as rewind sees them: while turns are open (and not rolled back), their edits
    /// are those turns'.
    fn user(&self) -> Writer {
        let open: Vec<&'static str> = self
            .open
            .iter()
            .filter(|(_, &i)| !self.turns[i].rolled_back)
            .map(|(&s, _)| s)
            .collect();
        match open.is_empty() {
            true => Writer::User,
            false => Writer::UserDuring(open),
        }
    }

    /// Invariant 2 for an undo or redo of `session` without `--force`, from the writers and
    /// last words as they were just before it: every path it changed was last written by the
    /// session's agent or its own undo/redo (or by the user while its turn was open), or holds
    /// again what those last left there (for a redo: or what the undo it redoes left there).
    fn check_own(
        &mut self,
        op: &str,
        session: &'static str,
        prior: &Prior,
        before: &Listing,
        after: &Listing,
        undo_left: Option<&BTreeMap<PathBuf, Option<Ver>>>,
    ) {
        let (writers, own) = prior;
        let mut problems = Vec::new();
        for p in changed_paths(before, after) {
            let was = ver_at(before, &p);
            let by = writers.get(&p);
            let theirs = match by {
                Some(Writer::Agent(s) | Writer::Rewind(s)) => *s == session,
                Some(Writer::UserDuring(open)) => open.contains(&session),
                _ => false,
            };
            let again = own.get(session).and_then(|o| o.get(&p)) == Some(&seen(was.clone()));
            // A redo may also change what holds again what the undo it redoes left there.
            let left = undo_left.and_then(|l| l.get(&p)) == Some(&seen(was.clone()));
            if !theirs && !again && !left {
                problems.push(format!(
                    "{}: {} (last written by {by:?}) changed to {} without --force",
                    qp(&p),
                    short(&was),
                    short(&ver_at(after, &p))
                ));
            }
        }
        if !problems.is_empty() {
            self.violation(format!(
                "{op} changed paths that are not session {session:?}'s:\n  {}",
                problems.join("\n  ")
            ));
        }
    }

    fn prior(&self) -> Prior {
        (self.writers.clone(), self.own.clone())
    }

    /// A session with turns, picked at random (by its turns), and its turns.
    fn pick_session(&mut self) -> Option<(&'static str, Vec<usize>)> {
        if self.turns.is_empty() {
            return None;
        }
        let session = self.turns[self.rng.below(self.turns.len() as u64) as usize].session;
        let of_session = (0..self.turns.len())
            .filter(|&i| self.turns[i].session == session)
            .collect();
        Some((session, of_session))
    }

    /// `undo` of a session from a random turn (or all, or `--last`), maybe one file, maybe
    /// `--force`; checks the frame rule, invariant 2, and the promise: a path undo changes
    /// goes back to its state before the turn.
    fn undo(&mut self) {
        let Some((session, of_session)) = self.pick_session() else {
            return;
        };
        let last = self.two && self.chance(25);
        // (Drawn first: `undo --last --force` also takes a turn whose undo left files alone.)
        let force = self.on("force") && self.chance(20);
        let force_last = last && force;
        let from = if last {
            None
        } else if self.chance(50) {
            Some(of_session[self.rng.below(of_session.len() as u64) as usize])
        } else {
            None
        };
        let begin_of =
            match last {
                true => match of_session.iter().rev().find(|&&i| {
                    !self.turns[i].rolled_back || (force_last && self.turns[i].left_alone)
                }) {
                    Some(&i) => i,
                    None => of_session[0], // rewind says not_found: nothing changes
                },
                false => from.unwrap_or(of_session[0]),
            };
        // (`--force` takes a turn an undo left files of again from that undo's first turn still
        // rolled back: from a later one, its "before" holds the earlier turns' work, r113 (2);
        // one a redo gave back since is the session's work again.)
        let begin_of = match force_last && self.turns[begin_of].rolled_back {
            true => (self.undos.iter().rev())
                .find(|u| !u.redone && u.rolled_back.contains(&begin_of))
                .and_then(|u| {
                    let held = |t: &&usize| !u.released.contains(t) && self.turns[**t].rolled_back;
                    u.rolled_back.iter().filter(held).min().copied()
                })
                .unwrap_or(begin_of),
            false => begin_of,
        };
        let file =
            (!last && self.chance(25)).then(|| PathBuf::from(OsStr::from_bytes(self.pick_name())));
        // One turn alone (`--only`), or merging around others' edits (`--merge`): what a merge
        // writes is `git merge-file`'s (undo_merge checks that), so only the frame rule and the
        // undo point are checked for them here.
        let merging = !last && self.on("merge") && self.chance(20);
        let only = merging && from.is_some() && self.chance(50);
        let mut args: Vec<OsString> = vec!["undo".into(), "--session".into(), session.into()];
        if last {
            args.push("--last".into());
        }
        if merging {
            args.push(if only { "--only" } else { "--merge" }.into());
        }
        if let Some(i) = from {
            args.extend(["--turn".into(), self.turns[i].id.clone().into()]);
        }
        if let Some(f) = &file {
            args.extend(["--file".into(), f.clone().into_os_string()]);
        }
        if force {
            args.push("--force".into());
        }
        let op = self.describe(&args);
        let prior = self.prior();
        let head = self.head(session);
        let Some((o, before, after)) = self.changing_op(args, Writer::Rewind(session)) else {
            return;
        };
        self.changed_during_others_turns(session, &before, &after);
        if !force && !merging {
            self.check_own(&op, session, &prior, &before, &after, None);
        }
        let begin = &self.turns[begin_of].begin;
        let mut problems = Vec::new();
        for r in o.written.iter().chain(&o.deleted) {
            let p = path_named(r, &before, &after);
            let now = ver_at(&after, &p);
            let then = ver_at(begin, &p);
            // A FIFO the agent replaced cannot come back (no snapshot holds one).
            if now != then && then != Some(Ver::Special) {
                problems.push(format!(
                    "{}: now {}, but before the turn it was {}",
                    qp(&p),
                    short(&now),
                    short(&then)
                ));
            }
        }
        if !problems.is_empty() && !merging {
            self.violation(format!("{op}:\n  {}", problems.join("\n  ")));
        }
        // Rolled back unless a file could not be written; the undo names the turns no earlier
        // undo had rolled back, and with `force` those an earlier undo rolled back leaving
        // files alone.
        let rolled_back: Vec<usize> = match file.is_none() && o.failed == 0 {
            true if only => vec![begin_of],
            true => of_session
                .into_iter()
                .filter(|&i| {
                    let again = force && self.turns[i].left_alone;
                    i >= begin_of && (!self.turns[i].rolled_back || again)
                })
                .collect(),
            false => Vec::new(),
        };
        for &i in &rolled_back {
            self.turns[i].rolled_back = true;
            self.turns[i].left_alone = !o.conflicts.is_empty();
        }
        if self.head(session) != head {
            self.rolled_back_open(session, &rolled_back, &before);
        }
        // An undo that wrote nothing and rolled back no turn is not recorded: no redo takes it.
        if self.head(session) == head {
            if !rolled_back.is_empty() || !o.written.is_empty() || !o.deleted.is_empty() {
                self.violation(format!("{op}: it changed something, but is not recorded"));
            }
            return self.round_trip(&op, &o, &before);
        }
        // What it changed, and what it wrote with the bytes already there (a file it could
        // not see before, say): its chain names those too, and a redo may put them back.
        let mut changed = changed_paths(&before, &after);
        let reported = o.written.iter().chain(&o.deleted);
        changed.extend(reported.map(|r| path_named(r, &before, &after)));
        self.note_run(session, false, &o, (&before, &after));
        let at = |l: &Listing| -> BTreeMap<PathBuf, Option<Ver>> {
            changed
                .iter()
                .map(|p| (p.clone(), seen(ver_at(l, p))))
                .collect()
        };
        self.undos.push(UndoRec {
            session,
            commit: self.head(session),
            found: at(&before),
            left: at(&after),
            rolled_back,
            from: begin_of,
            redone: false,
            released: BTreeSet::new(),
        });
        self.round_trip(&op, &o, &before);
    }

    /// Counts a recorded undo or redo of `session` and notes the paths it changed (its chain
    /// names them: `Rewind-Changed:`).
    fn note_run(
        &mut self,
        session: &'static str,
        redo: bool,
        o: &Outcome,
        (before, after): (&Listing, &Listing),
    ) {
        self.runs += 1;
        let mut changed = changed_paths(before, after);
        let reported = o.written.iter().chain(&o.deleted);
        changed.extend(reported.map(|r| path_named(r, before, after)));
        for p in changed {
            self.rewind_changed.insert((session, p), (self.runs, redo));
        }
    }

    /// After an undo of `session` (its head) rolled back `turns`: for each still open, what
    /// the undo named its own (`Rewind-Rolled-Back-File:`, unannounced or announced) with
    /// the project it found (`before`), and what it left alone.
    fn rolled_back_open(&mut self, session: &'static str, turns: &[usize], before: &Listing) {
        let message = self.sb.git_in(
            &self.store,
            ["log", "-1", "--format=%B", &self.head(session)],
        );
        let unescape = |word: &str| -> Vec<u8> {
            let b = word.as_bytes();
            let mut out = Vec::new();
            let mut k = 0;
            while k < b.len() {
                if b[k] == b'%' && k + 2 < b.len() {
                    out.push(u8::from_str_radix(&word[k + 1..k + 3], 16).unwrap());
                    k += 3;
                } else {
                    out.push(b[k]);
                    k += 1;
                }
            }
            out
        };
        let left: Vec<PathBuf> = message
            .lines()
            .filter_map(|l| l.strip_prefix("Rewind-Left-Alone: "))
            .map(|p| PathBuf::from(OsStr::from_bytes(&unescape(p))))
            .collect();
        for &i in turns {
            if self.turns[i].ended {
                continue;
            }
            let id = ref_component(&self.turns[i].id);
            let own: Vec<PathBuf> = message
                .lines()
                .filter_map(|l| l.strip_prefix("Rewind-Rolled-Back-File: "))
                .filter_map(|l| {
                    let mut words = l.splitn(3, ' ');
                    let (turn, origin, path) = (words.next()?, words.next()?, words.next()?);
                    let own = turn == id && (origin == "unannounced" || origin == "announced");
                    own.then(|| PathBuf::from(OsStr::from_bytes(&unescape(path))))
                })
                .collect();
            let named = message
                .lines()
                .any(|l| l.starts_with(&format!("Rewind-Rolled-Back-File: {id} ")));
            if named {
                self.turns[i].rollback = Some((before.clone(), own));
                self.turns[i].rollback_left.extend(left.iter().cloned());
            }
        }
    }

    /// The rule of a reopened turn's "before" beyond the paths the redo wrote (design, r88):
    /// each path open turn `i` of `session` made its own when an undo rolled it back
    /// (`rollback`: that undo's project and those paths), not left alone by such an undo, that
    /// the redo found (`found`) as that undo found it, and that since the turn began the
    /// session's undos and redos last changed with a redo, is as the turn first found it.
    fn kept_through_rollback(
        &self,
        session: &'static str,
        i: usize,
        (found, rollback): (&Listing, Option<(Listing, Vec<PathBuf>)>),
        begin: &mut Listing,
    ) {
        let Some((then, own)) = rollback else {
            return;
        };
        let turn = &self.turns[i];
        let under = |l: &Listing, p: &Path| -> Vec<(PathBuf, Option<Ver>)> {
            l.iter()
                .filter(|(k, _)| k.starts_with(p))
                .map(|(k, e)| (k.clone(), seen(ver_of(e))))
                .filter(|(_, v)| v.is_some())
                .collect()
        };
        for p in own {
            let bytes = p.as_os_str().as_bytes();
            if turn
                .rollback_left
                .iter()
                .any(|q| related(q.as_os_str().as_bytes(), bytes))
            {
                continue;
            }
            let last = self
                .rewind_changed
                .iter()
                .filter(|((s, q), (run, _))| {
                    *s == session
                        && *run > turn.begun_run
                        && related(q.as_os_str().as_bytes(), bytes)
                })
                .max_by_key(|(_, (run, _))| *run);
            if !last.is_some_and(|(_, (_, redo))| *redo) || under(found, &p) != under(&then, &p) {
                continue;
            }
            begin.retain(|k, _| !k.starts_with(&p));
            for (k, e) in turn.begin.iter().filter(|(k, _)| k.starts_with(&p)) {
                begin.insert(k.clone(), e.clone());
            }
        }
    }

    /// The commit `session`'s chain ends with (its head). Costs a `git rev-parse`.
    fn head(&self, session: &str) -> String {
        let head = format!("refs/rewind/sessions/{}/head", ref_component(session));
        self.sb
            .git_in(&self.store, ["rev-parse", "--verify", &head])
            .trim()
            .to_string()
    }

    /// The chain commit of the undo `session`'s last redo redid: its head, the redo's commit,
    /// names it (`Rewind-Redid:`; undo ids alone are ambiguous: two undos of the same project
    /// state have the same one). Costs a `git log`.
    fn redone_undo(&self, session: &str) -> Option<String> {
        let message = self.sb.git_in(
            &self.store,
            ["log", "-1", "--format=%B", &self.head(session)],
        );
        message
            .lines()
            .find_map(|l| l.strip_prefix("Rewind-Redid: "))
            .map(str::to_string)
    }

    /// `redo` of a session (maybe `--turn`, maybe `--force`); checks the frame rule, invariant
    /// 2, and that it changes only paths the undo it redoes changed (as the chain names it),
    /// each back to what that undo found, and without `--force` only where the path still
    /// holds what the undo left (invariant 3).
    fn redo(&mut self) {
        let Some((session, of_session)) = self.pick_session() else {
            return;
        };
        let turn = self
            .chance(30)
            .then(|| of_session[self.rng.below(of_session.len() as u64) as usize]);
        let force = self.on("force") && self.chance(20);
        let mut args: Vec<OsString> = vec!["redo".into(), "--session".into(), session.into()];
        if let Some(i) = turn {
            args.extend(["--turn".into(), self.turns[i].id.clone().into()]);
        }
        if force {
            args.push("--force".into());
        }
        let op = self.describe(&args);
        let prior = self.prior();
        let ran = self.run_left.get(session).cloned().unwrap_or_default();
        let head = self.head(session);
        let Some((o, before, after)) = self.changing_op(args, Writer::Rewind(session)) else {
            return;
        };
        self.changed_during_others_turns(session, &before, &after);
        // A redo that brought all back names its undo on the chain; one that left paths alone
        // (or failed on some) names none, and the next redo takes the same undo: the latest of
        // the session not redone yet (with `--turn`, one that undid that turn). One that left
        // everything alone is not recorded at all.
        let wrote_nothing = o.written.is_empty() && o.deleted.is_empty();
        let all_left_alone = wrote_nothing && (!o.conflicts.is_empty() || o.failed > 0);
        let recorded = self.head(session) != head;
        if recorded == all_left_alone {
            self.violation(format!(
                "{op}: recorded {recorded}, though it left everything alone: {all_left_alone}"
            ));
        }
        if recorded {
            self.note_run(session, true, &o, (&before, &after));
        }
        let redone = recorded.then(|| self.redone_undo(session)).flatten();
        let pick = self.undos.iter().rposition(|u| match &redone {
            Some(commit) => u.session == session && u.commit == *commit,
            None => {
                u.session == session
                    && !u.redone
                    && turn.is_none_or(|t| u.from == t || u.rolled_back.contains(&t))
            }
        });
        let Some(u) = pick else {
            return self.violation(format!(
                "{op}: its chain names {redone:?} as the undo it redid, which is no undo of the session"
            ));
        };
        self.undos[u].redone |= redone.is_some();
        if !force {
            let left = self.undos[u].left.clone();
            self.check_own(&op, session, &prior, &before, &after, Some(&left));
        }
        let u = &self.undos[u];
        let mut problems = Vec::new();
        for p in changed_paths(&before, &after) {
            let (was, now) = (seen(ver_at(&before, &p)), seen(ver_at(&after, &p)));
            let Some(left) = u.left.get(&p) else {
                problems.push(format!(
                    "{}: {} -> {}, but the undo it redoes (chain commit {}) did not change it",
                    qp(&p),
                    short(&was),
                    short(&now),
                    u.commit
                ));
                continue;
            };
            // What the session's own undo or redo wrote since is its last word there (design:
            // a redo since, say `redo --turn` of part of this undo, is the session's), also when
            // someone put its bytes back since: no snapshot tells that from none (seed 571, a
            // `restore` and a `restore` of its undo point after a `redo --turn`).
            let own_run = matches!(prior.0.get(&p), Some(Writer::Rewind(s)) if *s == session)
                || ran.get(&p) == Some(&was);
            if !force && was != *left && !own_run {
                problems.push(format!(
                    "{}: changed since the undo (it left {}, then {}), redone without --force",
                    qp(&p),
                    short(left),
                    short(&was)
                ));
            }
            if now != u.found[&p] {
                problems.push(format!(
                    "{}: now {}, but before the undo it was {}",
                    qp(&p),
                    short(&now),
                    short(&u.found[&p])
                ));
            }
        }
        // Its turns are given back unless a file failed or nothing came back, and unless
        // another undo of the session not redone yet, one that changed files, rolled the turn
        // back too (and no redo gave it back since).
        let elsewhere = |t: &usize| {
            self.undos.iter().any(|x| {
                x.session == session
                    && !x.redone
                    && x.commit != u.commit
                    && !x.left.is_empty()
                    && x.rolled_back.contains(t)
                    && !x.released.contains(t)
            })
        };
        let back: Vec<usize> = match o.failed == 0 && !all_left_alone {
            true => u
                .rolled_back
                .iter()
                .copied()
                .filter(|t| !elsewhere(t))
                .collect(),
            false => Vec::new(),
        };
        if !problems.is_empty() {
            self.violation(format!("{op}:\n  {}", problems.join("\n  ")));
        }
        for undo in self.undos.iter_mut().filter(|x| x.session == session) {
            undo.released.extend(back.iter().copied());
        }
        for i in back {
            // (One a redo of another undo gave back already stays where that redo found it.)
            let reopens = self.turns[i].rolled_back;
            let rollback = self.turns[i].rollback.take();
            self.turns[i].rolled_back = false;
            self.turns[i].left_alone = false;
            // The session's latest turn given back before it ended starts again from the
            // project as the redo found it, but where the redo wrote as it had found it (what
            // it did before the undo is its work again), open again (`turn end` ends it)
            // beside any other open; an older one left open ended where the next began, and
            // stays so.
            let latest = self.turns.iter().rposition(|t| t.session == session) == Some(i);
            if !self.turns[i].ended && latest && reopens {
                let mut begin = before.clone();
                for r in o.written.iter().chain(&o.deleted) {
                    let p = path_named(r, &before, &after);
                    match self.turns[i].begin.get(&p) {
                        Some(entry) => begin.insert(p, entry.clone()),
                        None => begin.remove(&p),
                    };
                }
                self.kept_through_rollback(session, i, (&before, rollback), &mut begin);
                self.turns[i].begin = begin;
                if !self.open.contains_key(session) {
                    self.stale.remove(session);
                    for &o in self.open.values() {
                        self.turns[o].overlapped = true;
                    }
                    self.turns[i].overlapped |= !self.open.is_empty() || !self.stale.is_empty();
                    self.open.insert(session, i);
                }
            }
        }
        self.round_trip(&op, &o, &before);
    }

    /// One step of the one-session model: turns never overlap, every change while a turn is
    /// open is its agent's.
    fn step(&mut self) {
        if let Some((&session, _)) = self.open.iter().next() {
            match self.rng.below(20) {
                0..=13 => {
                    self.file_action();
                    let agent = self.agent(session);
                    self.settle(agent);
                }
                14 if self.on("midturn") => match self.rng.below(3) {
                    0 if self.on("restore") => self.restore(),
                    1 if self.on("revert") => self.revert(),
                    _ if self.on("undo") => self.undo(),
                    _ => {}
                },
                15..=16 => {
                    let rel = self.pick_name();
                    self.announce(session, rel);
                }
                _ => self.end_turn(session),
            }
            return;
        }
        match self.rng.below(20) {
            0..=6 => {
                self.file_action();
                self.settle(Writer::User);
            }
            7..=9 => {
                let session = self.pick(&["s1", "s1", "s 2"]);
                self.begin_turn(session);
            }
            10..=11 => self.track(),
            12..=13 if self.on("restore") => self.restore(),
            14..=15 if self.on("revert") => self.revert(),
            _ if self.on("undo") => self.undo(),
            _ => {}
        }
    }

    /// One step of the two-session model: turns of both sessions open at once, agents that
    /// announce or not, shell commands, the user editing between and during turns, undo and
    /// redo of either session.
    fn step_two(&mut self) {
        let open: Vec<&'static str> = self.open.keys().copied().collect();
        let closed: Vec<&'static str> = SESSIONS
            .iter()
            .copied()
            .filter(|s| !self.open.contains_key(s))
            .collect();
        let ops = open.is_empty() || self.on("midturn");
        match self.rng.below(24) {
            0..=8 if !open.is_empty() => {
                let session = self.pick(&open);
                match self.rng.below(8) {
                    0 => self.shell_edit(session),
                    n => self.agent_edit(session, n < 4),
                }
            }
            9..=10 if !closed.is_empty() => {
                let session = self.pick(&closed);
                self.begin_turn(session);
            }
            11..=12 if !open.is_empty() => {
                let session = self.pick(&open);
                self.end_turn(session);
            }
            13 if !open.is_empty() => {
                let (session, rel) = (self.pick(&open), self.pick_name());
                self.announce(session, rel);
            }
            14..=15 if ops && self.on("undo") => self.undo(),
            16..=17 if ops && self.on("redo") => self.redo(),
            18 if ops && self.on("restore") => self.restore(),
            19 if ops && self.on("revert") => self.revert(),
            20 => self.track(),
            _ => {
                self.file_action();
                let user = self.user();
                self.settle(user);
            }
        }
    }
}

/// Last writers and last words (`Model::writers`, `Model::own`) as they were before an operation.
type Prior = (
    BTreeMap<PathBuf, Writer>,
    BTreeMap<&'static str, BTreeMap<PathBuf, Option<Ver>>>,
);

struct Outcome {
    written: Vec<String>,
    deleted: Vec<String>,
    conflicts: Vec<String>,
    /// Paths the target lacks but could not see (ignored then, left out): reported, never deleted.
    kept: Vec<String>,
    failed: usize,
    /// The paths of `failed`: reported (exit 1), with the reason.
    failed_paths: Vec<String>,
    undo: String,
}

/// The lists of an outcome a dry run must tell as the real run then does, each sorted.
fn report_lists(json: &Value) -> Vec<(&'static str, Vec<String>)> {
    let keys = [
        "written",
        "deleted",
        "conflicts",
        "in_the_way",
        "kept",
        "merged",
    ];
    let mut lists: Vec<(&'static str, Vec<String>)> = keys
        .iter()
        .map(|&key| {
            let mut list: Vec<String> = json[key].as_array().map_or(Vec::new(), |a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            });
            list.sort();
            (key, list)
        })
        .collect();
    let mut failed: Vec<String> = json["failed"].as_array().map_or(Vec::new(), |a| {
        a.iter()
            .filter_map(|f| f["path"].as_str().map(str::to_string))
            .collect()
    });
    failed.sort();
    lists.push(("failed", failed));
    lists
}

/// Runs the model (two sessions or one) for `REWIND_MODEL_STEPS` (default `default_steps`)
/// steps from `REWIND_TEST_SEED` (default `default_seed`), then checks the store.
fn run_model(two: bool, default_seed: u64, default_steps: usize) {
    let sb = Sandbox::new();
    let mut m = Model::new(&sb, two, default_seed);
    let steps = std::env::var("REWIND_MODEL_STEPS")
        .ok()
        .map(|s| s.parse().expect("REWIND_MODEL_STEPS must be a number"))
        .unwrap_or(default_steps);
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for _ in 0..steps {
            match two {
                true => m.step_two(),
                false => m.step(),
            }
        }
        let open: Vec<&'static str> = m.open.keys().copied().collect();
        for session in open {
            m.end_turn(session);
        }
    }));
    if let Err(panic) = run {
        // Violations print the log themselves; any other failure gets it here.
        let text = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .unwrap_or_default();
        if !text.contains("NO-BYTE-LOST VIOLATION") {
            eprintln!(
                "seed {} (REWIND_TEST_SEED={} replays); actions so far:\n{}",
                m.seed,
                m.seed,
                m.log.join("\n")
            );
        }
        std::panic::resume_unwind(panic);
    }
    let overlapped = m.turns.iter().filter(|t| t.overlapped).count();
    let redos = m
        .log
        .iter()
        .filter(|l| l.starts_with("rewind --json redo"))
        .count();
    let moves = m.log.iter().filter(|l| l.starts_with("mv ")).count();
    eprintln!(
        "model: {} turns ({overlapped} overlapping another session's), {} undos, {redos} redos, \
         {moves} moves",
        m.turns.len(),
        m.undos.len()
    );
    assert!(
        moves > 0 || !m.on("move") || steps < 100,
        "seed {}: no file was moved in {steps} steps",
        m.seed
    );
    assert_fsck_clean(&sb, &m.store);
    for s in m.snapshots.clone() {
        assert_tree_complete(&sb, &m.store, &s);
    }
    assert!(
        m.violations.is_empty(),
        "{} violations (seed {}):\n{}",
        m.violations.len(),
        m.seed,
        m.violations.join("\n")
    );
}

#[test]
fn random_user_and_agent_actions_never_lose_a_byte() {
    run_model(false, DEFAULT_SEED, DEFAULT_STEPS);
}

#[test]
fn two_sessions_with_overlapping_turns_never_lose_a_byte() {
    run_model(true, TWO_SESSIONS_SEED, TWO_SESSIONS_STEPS);
}

/// The non-directory entries of a listing, as versions (what "no byte lost" compares).
fn versions(l: &Listing) -> BTreeMap<PathBuf, Ver> {
    l.iter()
        .filter_map(|(p, e)| ver_of(e).map(|v| (p.clone(), v)))
        .collect()
}

/// Lists every path whose version differs between `want` and `got`.
fn version_diff(want: &Listing, got: &Listing) -> Vec<String> {
    let (want, got) = (versions(want), versions(got));
    let mut diffs = Vec::new();
    for (p, w) in &want {
        let g = got.get(p).cloned();
        if g.as_ref() != Some(w) {
            diffs.push(format!(
                "{}: {} (was {})",
                qp(p),
                short(&g),
                short(&Some(w.clone()))
            ));
        }
    }
    for (p, g) in &got {
        if !want.contains_key(p) {
            diffs.push(format!(
                "{}: {} (was absent)",
                qp(p),
                short(&Some(g.clone()))
            ));
        }
    }
    diffs
}

/// The commit `refs/rewind/undo` names, if any.
fn undo_ref(sb: &Sandbox, store: &Path) -> Option<String> {
    let run = sb.git_in_run(store, ["rev-parse", "-q", "--verify", "refs/rewind/undo"]);
    run.status.success().then(|| run.stdout.trim().to_string())
}

/// A project of a few hundred files with everything rewind must leave alone: an ignored file,
/// a file over the size cap, a nested repository, a FIFO, a symlink out of the project.
fn kill_test_project(sb: &Sandbox) -> TestProject<'_> {
    let p = sb.project("p");
    fs::create_dir_all(sb.root.join("outside")).unwrap();
    fs::write(sb.root.join("outside/secret"), b"outside bytes\n").unwrap();
    for d in 0..5 {
        for f in 0..40 {
            p.file(format!("d{d}/f{f}.txt"), format!("original {d}/{f}\n"));
        }
    }
    p.file(".gitignore", "*.log\n")
        .file("keep.log", "ignored bytes\n")
        .file("swap", "a file that becomes a directory\n")
        .file("nested/inner.txt", "nested repo file\n")
        .symlink("link", "../outside/secret")
        .fifo("pipe");
    p.sb.git(Some(&p.join("nested")), ["init", "-q"]);
    fs::write(p.join("big.bin"), filler(BIG, 3)).unwrap();
    p
}

/// Edits, deletes, adds and swaps about half of the kill-test project's files.
fn kill_test_changes(p: &TestProject, round: &str) {
    for d in 0..5 {
        for f in 0..40 {
            let rel = format!("d{d}/f{f}.txt");
            match f % 5 {
                0 | 3 => {
                    p.file(&rel, format!("{round} edit {d}/{f}\n"));
                }
                1 if p.join(&rel).exists() => {
                    p.remove(&rel);
                }
                1 => {
                    p.file(&rel, format!("{round} re-created {d}/{f}\n"));
                }
                _ => {}
            }
        }
        p.file(format!("d{d}/new-{round}.txt"), format!("{round} new\n"));
    }
    if p.join("swap").is_file() {
        p.remove("swap").file("swap/inner.txt", "swapped in\n");
    } else {
        p.remove("swap").file("swap", "swapped back\n");
    }
}

#[test]
fn kill_9_during_restore_and_undo_leaves_the_project_recoverable() {
    require_tool("strace", "to kill rewind at a chosen syscall");
    let seed = std::env::var("REWIND_TEST_SEED")
        .ok()
        .map(|s| s.parse().expect("REWIND_TEST_SEED must be a number"))
        .unwrap_or(DEFAULT_SEED);
    eprintln!("kill seed: {seed} (REWIND_TEST_SEED replays it)");
    let mut rng = XorShift::seeded(seed);
    let sb = Sandbox::new();
    let p = kill_test_project(&sb);
    let store = p.store();
    let outside = fs_snapshot(&sb.root.join("outside"));
    let original = p.track();
    kill_test_changes(&p, "user");
    // The agent's turn, for undo.
    p.rewind(["turn", "begin", "--session", "s", "--turn", "1"])
        .assert_success();
    kill_test_changes(&p, "agent");
    p.rewind(["turn", "end", "--session", "s", "--turn", "1"])
        .assert_success();

    let ops: [&[&str]; 2] = [
        &["restore", &original],
        &["undo", "--session", "s", "--force"],
    ];
    let mut killed_rounds = 0;
    for round in 0..16 {
        let args = ops[round % 2];
        let (syscall, when) = match rng.below(3) {
            0 => ("unlinkat", 1 + rng.below(45)),
            1 => ("syncfs", 1 + rng.below(2)),
            _ => ("renameat2", 1 + rng.below(40)),
        };
        let what = format!(
            "round {round} (seed {seed}): `rewind {}` killed at {syscall} #{when}",
            args.join(" ")
        );
        let before = fs_snapshot(&p.path);
        let undo_before = undo_ref(&sb, &store);
        let killed = run_killed(&sb, &p.path, None, args, (syscall, when), DEADLINE);
        killed_rounds += usize::from(killed);
        eprintln!("{what}: {}", if killed { "killed" } else { "completed" });
        assert_fsck_clean(&sb, &store);
        assert_eq!(
            fs_snapshot(&sb.root.join("outside")),
            outside,
            "{what}: changed a file outside the project"
        );
        let undo_after = undo_ref(&sb, &store);
        if undo_after == undo_before {
            let diffs = version_diff(&before, &fs_snapshot(&p.path));
            assert!(
                diffs.is_empty(),
                "{what}: no undo point was recorded, yet the project changed:\n{}",
                diffs.join("\n")
            );
            continue;
        }
        let undo = undo_after.unwrap();
        let tree = sb.git_in(&store, ["rev-parse", &format!("{undo}^{{tree}}")]);
        let back = p.rewind(["restore", tree.trim()]);
        assert!(
            back.status.success(),
            "{what}: `rewind restore {}` (the recorded undo point) failed: {back}",
            tree.trim()
        );
        let diffs = version_diff(&before, &fs_snapshot(&p.path));
        assert!(
            diffs.is_empty(),
            "{what}: restoring the recorded undo point {} did not bring the project back:\n{}",
            tree.trim(),
            diffs.join("\n")
        );
    }
    assert!(
        killed_rounds >= 8,
        "only {killed_rounds} of 16 runs were killed: the injection points miss the operations"
    );
}
