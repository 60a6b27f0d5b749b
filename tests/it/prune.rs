//! Integration tests for retention ("Retention: 7-day prune, ... scheduled hourly"):
//! `rewind prune [--all] [--retention DURATION]`.
//!
//! Git is the oracle throughout: whether an object is in the store is asked of
//! `git cat-file`, connectivity of every record of `git fsck --strict --no-dangling`, and
//! the history of `git log --all` / `git rev-list`.
//!
//! The clock: `REWIND_NOW` decides what expires and stamps the commits rewind writes, but
//! object files get real modification times, and git's rule keeps loose objects newer than the
//! expiry. So the clock tests start at `T0` = the real time now (see [`Clock`]): a prune at
//! `T0 + 8d` with 7 days of retention then has its expiry at `T0 + 1d`, after every object
//! file the test wrote, and only reachability decides what stays.
//!
//! Helpers shared with the other test files live in tests/it/common.rs; the ones below are
//! specific to pruning.

use crate::common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const MINUTE: i64 = 60;
const HOUR: i64 = 3600;
const DAY: i64 = 86400;

// ---------------------------------------------------------------------------
// Clock
// ---------------------------------------------------------------------------

/// RFC 3339 (UTC, whole seconds) of `secs` since the epoch.
fn rfc3339(secs: i64) -> String {
    // Howard Hinnant's civil_from_days.
    let days = secs.div_euclid(DAY);
    let rem = secs.rem_euclid(DAY);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn real_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// `T0` (the real time when the test started) and times relative to it.
#[derive(Clone, Copy)]
struct Clock {
    t0: i64,
}

impl Clock {
    fn new() -> Clock {
        Clock { t0: real_now() }
    }

    /// `REWIND_NOW` for `T0 + offset` seconds.
    fn at(&self, offset: i64) -> String {
        rfc3339(self.t0 + offset)
    }
}

#[test]
fn rfc3339_helper_is_right() {
    assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
    assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    assert_eq!(rfc3339(1_796_002_889), "2026-11-30T01:41:29Z");
    assert_eq!(rfc3339(4_102_444_799), "2099-12-31T23:59:59Z");
}

// ---------------------------------------------------------------------------
// Running rewind
// ---------------------------------------------------------------------------

/// `rewind -C <project> --json ARGS` at `now`: must succeed; returns the JSON.
fn rwj_at(p: &TestProject, now: Option<&str>, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let run = rw_at(p, now, &all);
    run.assert_success();
    one_json(&run)
}

/// `track` at `now`: the tree id.
fn track_at(p: &TestProject, now: &str) -> String {
    let run = rw_at(p, Some(now), &["track"]);
    run.assert_success();
    let id = run.stdout.trim().to_string();
    assert_oid(&id, "`rewind track`");
    id
}

/// What `prune --json` reports for one store.
#[derive(Debug, Clone)]
struct Pruned {
    snapshots_removed: u64,
    turns_removed: u64,
    objects_removed: u64,
    bytes_freed: u64,
    sessions_removed: Vec<String>,
    project: String,
    json: Value,
}

impl Pruned {
    fn parse(v: &Value) -> Pruned {
        let n = |k: &str| {
            v[k].as_u64()
                .unwrap_or_else(|| panic!("prune outcome without number {k:?}: {v}"))
        };
        Pruned {
            snapshots_removed: n("snapshots_removed"),
            turns_removed: n("turns_removed"),
            objects_removed: n("objects_removed"),
            bytes_freed: n("bytes_freed"),
            sessions_removed: v["sessions_removed"]
                .as_array()
                .unwrap_or_else(|| panic!("prune outcome without \"sessions_removed\" array: {v}"))
                .iter()
                .map(|s| {
                    s.as_str()
                        .unwrap_or_else(|| panic!("session id must be a string: {v}"))
                        .to_string()
                })
                .collect(),
            project: v["project"]
                .as_str()
                .unwrap_or_else(|| panic!("prune outcome without \"project\" string: {v}"))
                .to_string(),
            json: v.clone(),
        }
    }
}

/// `prune --json EXTRA` at `now` (or the real clock): must succeed.
fn prune_at(p: &TestProject, now: Option<&str>, extra: &[&str]) -> Pruned {
    let mut args = vec!["prune"];
    args.extend_from_slice(extra);
    let v = rwj_at(p, now, &args);
    assert!(
        v.is_object(),
        "`prune --json` (one project) must print an object: {v}"
    );
    let pruned = Pruned::parse(&v);
    assert_eq!(
        Path::new(&pruned.project),
        p.path.as_path(),
        "\"project\" must be the canonical project path: {v}"
    );
    pruned
}

// ---------------------------------------------------------------------------
// The store, seen by git
// ---------------------------------------------------------------------------

/// Whether `git cat-file -e id` succeeds in the store.
fn has_object(sb: &Sandbox, store: &Path, id: &str) -> bool {
    sb.git_in_run(store, ["cat-file", "-e", id])
        .status
        .success()
}

/// `refs/rewind/snapshots/<tree>` -> commit.
fn snapshot_records(sb: &Sandbox, store: &Path) -> BTreeMap<String, String> {
    sb.git_in(
        store,
        [
            "for-each-ref",
            "--format=%(refname) %(objectname)",
            "refs/rewind/snapshots/",
        ],
    )
    .lines()
    .map(|l| {
        let (name, id) = l.split_once(' ').expect("for-each-ref line");
        let tree = name
            .strip_prefix("refs/rewind/snapshots/")
            .expect("under refs/rewind/snapshots/");
        (tree.to_string(), id.to_string())
    })
    .collect()
}

/// Every ref under `prefix`.
fn refs_under(sb: &Sandbox, store: &Path, prefix: &str) -> Vec<String> {
    sb.git_in(store, ["for-each-ref", "--format=%(refname)", prefix])
        .lines()
        .map(str::to_string)
        .collect()
}

/// `(mode type id path)` entries of `tree` (recursively, blobs and links only).
fn blobs_of(sb: &Sandbox, store: &Path, tree: &str) -> BTreeMap<String, String> {
    sb.git_in(store, ["ls-tree", "-r", tree])
        .lines()
        .map(|l| {
            let (meta, path) = l.split_once('\t').expect("ls-tree line");
            let id = meta.split(' ').nth(2).expect("ls-tree id");
            (path.to_string(), id.to_string())
        })
        .collect()
}

/// Every object (tree or blob) reachable from `tree`, and `tree` itself.
fn objects_of(sb: &Sandbox, store: &Path, tree: &str) -> BTreeSet<String> {
    let mut all: BTreeSet<String> = sb
        .git_in(store, ["ls-tree", "-r", "-t", tree])
        .lines()
        .map(|l| {
            l.split(' ')
                .nth(2)
                .unwrap()
                .split('\t')
                .next()
                .unwrap()
                .to_string()
        })
        .collect();
    all.insert(tree.to_string());
    all
}

/// `git fsck --strict --no-dangling`: clean, every ref's history complete.
fn assert_fsck_no_dangling(sb: &Sandbox, store: &Path, what: &str) {
    let run = sb.git_in_run(
        store,
        ["fsck", "--strict", "--no-dangling", "--no-progress"],
    );
    let all = format!("{}\n{}", run.stdout, run.stderr).to_lowercase();
    assert!(
        run.status.success()
            && !all.contains("error")
            && !all.contains("missing")
            && !all.contains("broken")
            && !all.contains("bad "),
        "{what}: fsck of the store is not clean: {run}"
    );
}

/// `git log --all` works and prints `n` commits or more.
fn assert_log_all_works(sb: &Sandbox, store: &Path) -> usize {
    let run = sb.git_in_run(store, ["log", "--all", "--format=%H %ct %s"]);
    run.assert_success();
    run.stdout.lines().count()
}

/// The whole store is consistent: fsck (strict, no dangling), `log --all`, every recorded
/// snapshot's tree complete.
fn assert_store_sound(sb: &Sandbox, store: &Path, what: &str) {
    assert_fsck_clean(sb, store);
    assert_fsck_no_dangling(sb, store, what);
    assert_log_all_works(sb, store);
    for tree in snapshot_records(sb, store).keys() {
        assert_tree_complete(sb, store, tree);
    }
}

/// Sets the mtime of `path` to `secs_ago` seconds before now (like `touch -d`).
fn age_file(path: &Path, secs_ago: u64) {
    let t = SystemTime::now() - Duration::from_secs(secs_ago);
    let f = fs::File::options()
        .write(true)
        .open(path)
        .or_else(|_| fs::File::open(path))
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    f.set_modified(t)
        .unwrap_or_else(|e| panic!("set mtime of {}: {e}", path.display()));
}

// ---------------------------------------------------------------------------
// Sessions
// ---------------------------------------------------------------------------

fn begin_at(p: &TestProject, now: &str, s: &str, t: &str) {
    rwj_at(
        p,
        Some(now),
        &[
            "turn",
            "begin",
            &format!("--session={s}"),
            &format!("--turn={t}"),
        ],
    );
}

fn end_at(p: &TestProject, now: &str, s: &str, t: &str) {
    rwj_at(
        p,
        Some(now),
        &[
            "turn",
            "end",
            &format!("--session={s}"),
            &format!("--turn={t}"),
        ],
    );
}

/// One row of `turns --json`: (session, turn, before, after).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct TurnRow {
    session: String,
    turn: String,
    before: String,
    after: Option<String>,
}

fn turns_at(p: &TestProject, now: &str) -> Vec<TurnRow> {
    let v = rwj_at(p, Some(now), &["turns"]);
    v.as_array()
        .unwrap_or_else(|| panic!("`turns --json` must print an array: {v}"))
        .iter()
        .map(|t| TurnRow {
            session: t["session"].as_str().expect("session").to_string(),
            turn: t["turn"].as_str().expect("turn").to_string(),
            before: t["before"].as_str().expect("before").to_string(),
            after: t["after"].as_str().map(str::to_string),
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Expiry of snapshots
// ---------------------------------------------------------------------------

#[test]
fn expired_snapshot_objects_go_live_ones_stay() {
    let sb = Sandbox::new();
    let clock = Clock::new();
    let p = sb.project("proj");
    p.file("a.txt", "content A\n")
        .file("shared.txt", "shared by every snapshot\n")
        .file("dir/a-only.txt", "only in A\n")
        .exec("bin/tool", "#!/bin/sh\necho A\n");
    // The first snapshot is written as a pack...
    let a = track_at(&p, &clock.at(0));
    // ...a second one, also to expire, as loose objects.
    p.file("a2-only.txt", "only in A2\n")
        .file("dir/a-only.txt", "only in A2, too\n");
    let a2 = track_at(&p, &clock.at(HOUR));
    // B, six days later: the one to keep.
    p.file("a.txt", "content B\n")
        .remove("dir/a-only.txt")
        .remove("a2-only.txt")
        .file("b.txt", "only in B\n")
        .exec("bin/tool", "#!/bin/sh\necho B\n");
    let b = track_at(&p, &clock.at(6 * DAY));
    let store = p.store();
    assert_store_sound(&sb, &store, "before prune");
    let records = snapshot_records(&sb, &store);
    for t in [&a, &a2, &b] {
        assert!(
            records.contains_key(t),
            "track must record {t}: {records:?}"
        );
    }

    let objs_a = objects_of(&sb, &store, &a);
    let objs_a2 = objects_of(&sb, &store, &a2);
    let objs_b = objects_of(&sb, &store, &b);
    let gone: BTreeSet<String> = objs_a
        .union(&objs_a2)
        .filter(|o| !objs_b.contains(*o))
        .cloned()
        .collect();
    assert!(gone.contains(&a) && gone.contains(&a2));
    assert!(gone.len() >= 6, "A and A2 have their own objects: {gone:?}");

    // Before expiry (A is 6 days and 23 hours old) nothing goes.
    let early = prune_at(&p, Some(&clock.at(7 * DAY - HOUR)), &[]);
    assert_eq!(early.snapshots_removed, 0, "{}", early.json);
    assert_eq!(early.turns_removed, 0, "{}", early.json);
    assert!(early.sessions_removed.is_empty(), "{}", early.json);
    for o in gone.iter().chain(&objs_b) {
        assert!(
            has_object(&sb, &store, o),
            "{o} must survive an early prune"
        );
    }
    assert_eq!(snapshot_records(&sb, &store).len(), 3);

    // At T0 + 8d, A and A2 expired; B (taken at T0 + 6d) did not.
    let pruned = prune_at(&p, Some(&clock.at(8 * DAY)), &[]);
    assert_eq!(pruned.snapshots_removed, 2, "{}", pruned.json);
    assert!(pruned.bytes_freed > 0, "{}", pruned.json);
    assert!(pruned.objects_removed >= 1, "{}", pruned.json);
    assert!(pruned.sessions_removed.is_empty(), "{}", pruned.json);
    let records = snapshot_records(&sb, &store);
    assert_eq!(
        records.keys().collect::<Vec<_>>(),
        vec![&b],
        "only B's record may remain"
    );
    for o in &gone {
        assert!(
            !has_object(&sb, &store, o),
            "{o} (used only by expired snapshots) must be deleted"
        );
    }
    assert_tree_complete(&sb, &store, &b);
    assert_store_sound(&sb, &store, "after prune");
    let log = sb.git_in(&store, ["log", "--all", "--format=%T"]);
    assert!(
        log.lines().any(|t| t == b),
        "git log --all must show B:\n{log}"
    );
    assert!(!log.lines().any(|t| t == a || t == a2), "{log}");

    // B is fully usable: diff against the project (unchanged, then changed).
    let now = clock.at(8 * DAY);
    let d = rw_at(&p, Some(&now), &["diff", &b]);
    d.assert_success();
    assert_eq!(d.stdout, "", "nothing changed since B: {d}");
    p.file("b.txt", "only in B\nand more\n");
    let d = rw_at(&p, Some(&now), &["diff", &b]);
    d.assert_success();
    assert!(d.stdout.contains("+and more"), "{d}");
    // The expired ones are unknown now.
    let d = rw_at(&p, Some(&now), &["diff", &a]);
    assert_eq!(d.code(), Some(1), "diff from a pruned snapshot: {d}");

    // A second prune finds nothing more to do, and the project still snapshots like git.
    let again = prune_at(&p, Some(&clock.at(8 * DAY)), &[]);
    assert_eq!(again.snapshots_removed, 0, "{}", again.json);
    p.track_matches_git();
    assert_store_sound(&sb, &store, "after a second prune");
}

#[test]
fn last_snapshot_stays_usable_after_its_record_expires() {
    // The stat cache (the store's index) names the last snapshot's objects: they are roots.
    // A track after the prune reuses cached ids without reading the files again, so the tree
    // it returns must still be complete.
    let sb = Sandbox::new();
    let clock = Clock::new();
    let p = sb.project("proj");
    for i in 0..40 {
        p.file(format!("d{}/f{i}.txt", i % 4), format!("file {i}\n"));
    }
    let a = track_at(&p, &clock.at(0));
    p.file("d0/f0.txt", "changed\n");
    let b = track_at(&p, &clock.at(HOUR));
    let store = p.store();
    let pruned = prune_at(&p, Some(&clock.at(9 * DAY)), &[]);
    assert_eq!(pruned.snapshots_removed, 2, "{}", pruned.json);
    assert!(snapshot_records(&sb, &store).is_empty());
    assert!(!has_object(&sb, &store, &a), "A is referenced by nothing");
    assert_tree_complete(&sb, &store, &b);
    assert_eq!(track_at(&p, &clock.at(9 * DAY)), b);
    assert_tree_complete(&sb, &store, &b);
    let t = p.track_matches_git();
    assert_eq!(t.hash, b);
    assert_store_sound(&sb, &store, "after prune and track");
}

#[test]
fn retaking_a_snapshot_refreshes_its_record_at_most_hourly() {
    let sb = Sandbox::new();
    let clock = Clock::new();
    let p = sb.project("proj");
    p.file("x", "x\n");
    let store = p.store();
    let commit_time = |tree: &str| -> i64 {
        sb.git_in(
            &store,
            [
                "log",
                "-1",
                "--format=%ct",
                &format!("refs/rewind/snapshots/{tree}"),
            ],
        )
        .trim()
        .parse()
        .unwrap()
    };

    // Re-taken 30 minutes later: the record keeps T0...
    let a = track_at(&p, &clock.at(0));
    assert_eq!(commit_time(&a), clock.t0);
    assert_eq!(track_at(&p, &clock.at(30 * MINUTE)), a);
    assert_eq!(commit_time(&a), clock.t0, "refreshed within the hour");
    // ...so it expired at T0 + 7d (though less than 7 days after the second track).
    let pruned = prune_at(&p, Some(&clock.at(7 * DAY + 15 * MINUTE)), &[]);
    assert_eq!(pruned.snapshots_removed, 1, "{}", pruned.json);
    assert!(snapshot_records(&sb, &store).is_empty());

    // Re-taken two hours later: the record moves to T0 + 2h and outlives T0 + 7d.
    let q = sb.project("other");
    q.file("y", "y\n");
    let qstore = q.store();
    let b = track_at(&q, &clock.at(0));
    assert_eq!(track_at(&q, &clock.at(2 * HOUR)), b);
    let t: i64 = sb
        .git_in(
            &qstore,
            [
                "log",
                "-1",
                "--format=%ct",
                &format!("refs/rewind/snapshots/{b}"),
            ],
        )
        .trim()
        .parse()
        .unwrap();
    assert_eq!(t, clock.t0 + 2 * HOUR, "re-taken after an hour: refreshed");
    let pruned = prune_at(&q, Some(&clock.at(7 * DAY + HOUR)), &[]);
    assert_eq!(pruned.snapshots_removed, 0, "{}", pruned.json);
    assert!(snapshot_records(&sb, &qstore).contains_key(&b));
    let pruned = prune_at(&q, Some(&clock.at(7 * DAY + 3 * HOUR)), &[]);
    assert_eq!(pruned.snapshots_removed, 1, "{}", pruned.json);
    assert_store_sound(&sb, &qstore, "after prune");
}

// ---------------------------------------------------------------------------
// Sessions
// ---------------------------------------------------------------------------

#[test]
fn recent_session_keeps_its_old_turns() {
    let sb = Sandbox::new();
    let clock = Clock::new();
    let p = sb.project("proj");
    p.file("notes.txt", "v0\n").file("keep.txt", "keep\n");
    let s = "chat-1";
    // Turn 1 at T0: its trees are nothing but turn 1's.
    begin_at(&p, &clock.at(0), s, "1");
    p.file("notes.txt", "v1: turn one\n")
        .file("turn1-only.txt", "written by turn 1\n");
    end_at(&p, &clock.at(10 * MINUTE), s, "1");
    // Turn 2 six days later.
    p.file("between.txt", "edited by the user between turns\n");
    begin_at(&p, &clock.at(6 * DAY), s, "2");
    p.file("notes.txt", "v2: turn two\n")
        .remove("turn1-only.txt");
    end_at(&p, &clock.at(6 * DAY + 10 * MINUTE), s, "2");
    let store = p.store();
    let before = turns_at(&p, &clock.at(6 * DAY + HOUR));
    assert_eq!(before.len(), 2, "{before:?}");
    let t1 = before[0].clone();
    assert_eq!(t1.turn, "1");
    let t1_after = t1.after.clone().expect("turn 1 ended");

    // T0 + 7d + 1h: turn 1 is more than 7 days old, the session's last turn is not.
    let now = clock.at(7 * DAY + HOUR);
    let pruned = prune_at(&p, Some(&now), &[]);
    assert!(pruned.sessions_removed.is_empty(), "{}", pruned.json);
    assert_eq!(pruned.turns_removed, 0, "{}", pruned.json);
    // The records of turn 1's snapshots expired, the session keeps their trees.
    assert!(pruned.snapshots_removed >= 2, "{}", pruned.json);
    let records = snapshot_records(&sb, &store);
    assert!(
        !records.contains_key(&t1.before) && !records.contains_key(&t1_after),
        "turn 1's snapshot records expired: {records:?}"
    );
    let after = turns_at(&p, &now);
    assert_eq!(after, before, "`turns` must list both turns as before");
    for tree in [&t1.before, &t1_after] {
        assert_tree_complete(&sb, &store, tree);
    }
    for row in &after {
        assert_tree_complete(&sb, &store, &row.before);
        assert_tree_complete(&sb, &store, row.after.as_ref().unwrap());
    }
    assert_eq!(
        p.store_blob(&t1_after, "turn1-only.txt"),
        b"written by turn 1\n"
    );
    assert_store_sound(&sb, &store, "after prune");

    // The old turn is still usable: `changes` and `diff` between its trees.
    let changes = rwj_at(&p, Some(&now), &["changes", &format!("--session={s}")]);
    assert!(changes["total_files"].as_u64().unwrap() >= 1, "{changes}");
    let d = rw_at(&p, Some(&now), &["diff", &t1.before, &t1_after]);
    d.assert_success();
    assert!(d.stdout.contains("+written by turn 1"), "{d}");
}

/// A session idle through another's turn that an undo rolled back while it was open: prune
/// removed the idle one (nothing keeps it for a rolled-back turn) while the other's records
/// still named the commit its head was on. Every reading of the rolled-back turn then failed
/// on that missing commit: `turns`, `log`, `doctor`, and every later `prune` (the hunt of
/// stop 58, through the hooks; the same with `turn begin` and `end`).
#[test]
fn a_session_pruned_while_a_rolled_back_open_turn_names_its_head_breaks_no_reader() {
    let sb = Sandbox::new();
    let clock = Clock::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n").file("b.txt", "b\n");
    begin_at(&p, &clock.at(0), "C", "1");
    p.file("a.txt", "a\nc1\n");
    end_at(&p, &clock.at(MINUTE), "C", "1");
    begin_at(&p, &clock.at(HOUR), "O", "1");
    p.file("b.txt", "b\no1\n");
    end_at(&p, &clock.at(HOUR + MINUTE), "O", "1");
    begin_at(&p, &clock.at(HOUR + 2 * MINUTE), "O", "2");
    let undo = ["undo", "--session", "O", "--turn", "1"];
    rwj_at(&p, Some(&clock.at(HOUR + 3 * MINUTE)), &undo);
    let store = p.store();
    let c_head = sb.git_in(&store, ["rev-parse", "refs/rewind/sessions/C/head"]);
    let later = clock.at(8 * DAY);
    prune_at(&p, Some(&later), &[]);
    assert!(
        !has_object(&sb, &store, c_head.trim()),
        "the case needs C's head gone: {c_head}"
    );
    for args in [
        &["turns"][..],
        &["log"],
        &["doctor"],
        &["prune"],
        &["turns", "--session", "O"],
    ] {
        let run = rw_at(&p, Some(&later), args);
        run.assert_success();
    }
    let rows = turns_at(&p, &later);
    assert_eq!(rows.len(), 2, "O's two turns: {rows:?}");
    assert_store_sound(&sb, &store, "after the prune");
    // And the rolled-back turn's redo still gives the work back.
    rwj_at(&p, Some(&later), &["redo", "--session", "O"]);
    assert_eq!(p.read("b.txt"), b"b\no1\n");
}

#[test]
fn expired_session_is_removed_whole() {
    let sb = Sandbox::new();
    let clock = Clock::new();
    let p = sb.project("proj");
    p.file("shared.txt", "s0\n").file("old.txt", "o0\n");
    // Percent-encoded in ref names: the report must give the real id.
    let old = "old/chat 1";
    let recent = "recent";
    begin_at(&p, &clock.at(0), old, "1");
    p.file("old.txt", "written only by the old session\n");
    end_at(&p, &clock.at(5 * MINUTE), old, "1");
    begin_at(&p, &clock.at(HOUR), old, "2");
    p.file("shared.txt", "s1\n");
    end_at(&p, &clock.at(HOUR + 5 * MINUTE), old, "2");
    p.file("old.txt", "edited by the user later\n");
    begin_at(&p, &clock.at(5 * DAY), recent, "a");
    p.file("old.txt", "rewritten by the recent session\n");
    end_at(&p, &clock.at(5 * DAY + 5 * MINUTE), recent, "a");
    let store = p.store();
    let rows = turns_at(&p, &clock.at(5 * DAY + HOUR));
    assert_eq!(rows.len(), 3, "{rows:?}");
    let old_after = rows[0].after.clone().unwrap();
    let old_blob = blobs_of(&sb, &store, &old_after)["old.txt"].clone();
    let old_refs = refs_under(&sb, &store, "refs/rewind/sessions/");
    assert!(old_refs.len() >= 4, "{old_refs:?}");

    let now = clock.at(8 * DAY);
    let pruned = prune_at(&p, Some(&now), &[]);
    assert_eq!(
        pruned.sessions_removed,
        vec![old.to_string()],
        "{}",
        pruned.json
    );
    assert_eq!(pruned.turns_removed, 2, "{}", pruned.json);
    let rows = turns_at(&p, &now);
    assert!(
        rows.iter().all(|r| r.session == recent) && rows.len() == 1,
        "`turns` must list only the recent session: {rows:?}"
    );
    let listed = rw_at(
        &p,
        Some(&now),
        &["--json", "turns", &format!("--session={old}")],
    );
    assert!(
        listed.code() == Some(1) || one_json(&listed) == Value::Array(vec![]),
        "the removed session has no turns: {listed}"
    );
    let left = refs_under(&sb, &store, "refs/rewind/sessions/");
    assert!(
        left.iter()
            .all(|r| r.starts_with("refs/rewind/sessions/recent/")),
        "every ref of the expired session must go: {left:?}"
    );
    assert!(!left.is_empty());
    assert!(
        !has_object(&sb, &store, &old_blob),
        "a blob only the expired session had must be deleted"
    );
    assert_store_sound(&sb, &store, "after prune");

    // Human mode: a summary on stdout, a line per removed session on stderr.
    let q = sb.project("human");
    q.file("f", "0\n");
    begin_at(&q, &clock.at(0), "gone-1", "1");
    q.file("f", "1\n");
    end_at(&q, &clock.at(MINUTE), "gone-1", "1");
    begin_at(&q, &clock.at(2 * MINUTE), "gone-2", "1");
    q.file("f", "2\n");
    end_at(&q, &clock.at(3 * MINUTE), "gone-2", "1");
    let run = rw_at(&q, Some(&clock.at(8 * DAY)), &["prune"]);
    run.assert_success();
    let stderr_lines: Vec<&str> = run.stderr.lines().collect();
    for s in ["gone-1", "gone-2"] {
        assert!(
            stderr_lines
                .iter()
                .any(|l| l.contains(&format!("removed expired session {s}"))),
            "stderr must name {s}: {run}"
        );
    }
    assert_eq!(stderr_lines.len(), 2, "one line per removed session: {run}");
    assert_eq!(
        run.stdout.lines().filter(|l| !l.is_empty()).count(),
        1,
        "one summary line on stdout: {run}"
    );
    assert!(run.stdout.contains("2 turns"), "{run}");
    assert!(refs_under(&sb, &q.store(), "refs/rewind/sessions/").is_empty());
    assert!(turns_at(&q, &clock.at(8 * DAY)).is_empty());
    assert_store_sound(&sb, &q.store(), "human-mode prune");
}

// ---------------------------------------------------------------------------
// Configuring retention
// ---------------------------------------------------------------------------

/// A project with snapshot A at T0 and B at T0 + 1d; returns (A, B).
fn two_snapshots(p: &TestProject, clock: &Clock) -> (String, String) {
    p.file("f", "A\n");
    let a = track_at(p, &clock.at(0));
    p.file("f", "B\n");
    let b = track_at(p, &clock.at(DAY));
    (a, b)
}

#[test]
fn retention_flag_changes_what_expires() {
    let sb = Sandbox::new();
    let clock = Clock::new();
    let p = sb.project("proj");
    let (a, b) = two_snapshots(&p, &clock);
    let store = p.store();
    let now = clock.at(DAY + 2 * HOUR); // A is 26 hours old, B 2 hours
    for keep_both in ["7d", "1w", "2", "27h", "1600m", "93660s"] {
        let pruned = prune_at(&p, Some(&now), &["--retention", keep_both]);
        assert_eq!(
            pruned.snapshots_removed, 0,
            "--retention {keep_both}: {}",
            pruned.json
        );
    }
    let pruned = prune_at(&p, Some(&now), &[]);
    assert_eq!(pruned.snapshots_removed, 0, "default 7d: {}", pruned.json);
    assert_eq!(snapshot_records(&sb, &store).len(), 2);
    // 25h: A (26h old) goes, B stays.
    let pruned = prune_at(&p, Some(&now), &["--retention=25h"]);
    assert_eq!(pruned.snapshots_removed, 1, "{}", pruned.json);
    let records = snapshot_records(&sb, &store);
    assert!(
        records.contains_key(&b) && !records.contains_key(&a),
        "{records:?}"
    );
    assert!(!has_object(&sb, &store, &a), "A's tree must be deleted");
    // 90m: B (2h old) goes as well; the stat cache keeps its objects.
    let pruned = prune_at(&p, Some(&now), &["--retention", "90m"]);
    assert_eq!(pruned.snapshots_removed, 1, "{}", pruned.json);
    assert!(snapshot_records(&sb, &store).is_empty());
    assert_tree_complete(&sb, &store, &b);
    assert_store_sound(&sb, &store, "after prunes");
}

#[test]
fn retention_config_changes_what_expires_and_the_flag_wins() {
    let sb = Sandbox::new();
    let clock = Clock::new();
    let p = sb.project("proj");
    let (a, b) = two_snapshots(&p, &clock);
    let store = p.store();
    let now = clock.at(3 * DAY);
    sb.git_in(&store, ["config", "rewind.retention", "60h"]);
    // The flag overrides the config.
    let pruned = prune_at(&p, Some(&now), &["--retention", "30d"]);
    assert_eq!(pruned.snapshots_removed, 0, "{}", pruned.json);
    assert_eq!(snapshot_records(&sb, &store).len(), 2);
    // The config: A (72h old) goes, B (48h old) stays.
    let pruned = prune_at(&p, Some(&now), &[]);
    assert_eq!(pruned.snapshots_removed, 1, "{}", pruned.json);
    let records = snapshot_records(&sb, &store);
    assert!(
        records.contains_key(&b) && !records.contains_key(&a),
        "{records:?}"
    );
    assert!(!has_object(&sb, &store, &a));

    // Another store, other units in the config.
    let q = sb.project("other");
    let (qa, qb) = two_snapshots(&q, &clock);
    let qstore = q.store();
    sb.git_in(&qstore, ["config", "rewind.retention", "30h"]);
    let pruned = prune_at(&q, Some(&clock.at(DAY + 5 * HOUR)), &[]);
    assert_eq!(pruned.snapshots_removed, 0, "{}", pruned.json);
    let pruned = prune_at(&q, Some(&clock.at(DAY + 7 * HOUR)), &[]);
    assert_eq!(pruned.snapshots_removed, 1, "{}", pruned.json);
    let records = snapshot_records(&sb, &qstore);
    assert!(
        records.contains_key(&qb) && !records.contains_key(&qa),
        "{records:?}"
    );
    assert_store_sound(&sb, &store, "store 1");
    assert_store_sound(&sb, &qstore, "store 2");
}

#[test]
fn nonsense_retention_config_never_removes_more_than_the_default() {
    let sb = Sandbox::new();
    let clock = Clock::new();
    for (i, value) in ["abc", "-3d", "5x", "1.5d", ""].iter().enumerate() {
        let p = sb.project(&format!("proj{i}"));
        let (a, b) = two_snapshots(&p, &clock);
        let store = p.store();
        sb.git_in(&store, ["config", "rewind.retention", value]);
        let run = rw_at(&p, Some(&clock.at(3 * DAY)), &["--json", "prune"]);
        assert!(
            matches!(run.code(), Some(0) | Some(1)),
            "rewind.retention={value:?}: {run}"
        );
        let records = snapshot_records(&sb, &store);
        assert!(
            records.contains_key(&a) && records.contains_key(&b),
            "rewind.retention={value:?} must not expire a 3-day-old snapshot: {records:?}\n{run}"
        );
        assert_store_sound(&sb, &store, value);
    }
}

#[test]
fn nonsense_durations_are_usage_errors() {
    let sb = Sandbox::new();
    let clock = Clock::new();
    let p = sb.project("proj");
    let (_a, _b) = two_snapshots(&p, &clock);
    let store = p.store();
    let before = fs_snapshot(&store);
    let now = clock.at(30 * DAY);
    let cases: Vec<Vec<&str>> = vec![
        vec!["prune", "--retention", "-3d"],
        vec!["prune", "--retention=-3d"],
        vec!["prune", "--retention", "abc"],
        vec!["prune", "--retention", "5x"],
        vec!["prune", "--retention", "3.5d"],
        vec!["prune", "--retention", ""],
        vec!["prune", "--retention", "d"],
        vec!["prune", "--retention", "99999999999999999999d"],
        vec!["prune", "--all", "--retention", "-3d"],
        vec!["prune", "--all", "--retention", "abc"],
        vec!["prune", "--retention"],
    ];
    for args in &cases {
        let run = rw_at(&p, Some(&now), &args[..]);
        assert_eq!(run.code(), Some(2), "{args:?} must be a usage error: {run}");
        assert!(run.stdout.is_empty(), "{args:?}: nothing on stdout: {run}");
        let mut json = vec!["--json"];
        json.extend_from_slice(args);
        let run = rw_at(&p, Some(&now), &json);
        assert_eq!(run.code(), Some(2), "{json:?} must be a usage error: {run}");
    }
    assert_same_snapshot(&before, &fs_snapshot(&store), "the store");
    // A malformed clock is an error (exit 1) and changes nothing either.
    let run = rw_at(&p, Some("yesterday"), &["prune"]);
    assert_eq!(run.code(), Some(1), "{run}");
    assert_same_snapshot(&before, &fs_snapshot(&store), "the store");
}

#[test]
fn huge_retention_flag_does_not_panic() {
    // Durations that parse but reach before the calendar's start must not crash prune; they
    // expire nothing (or are refused as usage errors).
    let sb = Sandbox::new();
    let clock = Clock::new();
    let p = sb.project("proj");
    let (a, b) = two_snapshots(&p, &clock);
    let store = p.store();
    for huge in ["100000000d", "18446744073709551615s", "1000000000w"] {
        let run = rw_at(
            &p,
            Some(&clock.at(3 * DAY)),
            &["--json", "prune", "--retention", huge],
        );
        assert!(
            matches!(run.code(), Some(0) | Some(2)),
            "--retention {huge}: {run}"
        );
    }
    let records = snapshot_records(&sb, &store);
    assert!(
        records.contains_key(&a) && records.contains_key(&b),
        "{records:?}"
    );
}

#[test]
fn huge_retention_config_does_not_panic() {
    let sb = Sandbox::new();
    let clock = Clock::new();
    let p = sb.project("proj");
    let (a, b) = two_snapshots(&p, &clock);
    let store = p.store();
    sb.git_in(&store, ["config", "rewind.retention", "100000000d"]);
    let run = rw_at(&p, Some(&clock.at(3 * DAY)), &["--json", "prune"]);
    assert!(
        matches!(run.code(), Some(0) | Some(1)),
        "rewind.retention=100000000d: {run}"
    );
    let records = snapshot_records(&sb, &store);
    assert!(
        records.contains_key(&a) && records.contains_key(&b),
        "{records:?}"
    );
}

// ---------------------------------------------------------------------------
// Reflogs
// ---------------------------------------------------------------------------

#[test]
fn reflog_entries_are_roots_until_they_expire() {
    let sb = Sandbox::new();
    let clock = Clock::new();
    let p = sb.project("proj");
    let (a, b) = two_snapshots(&p, &clock);
    let store = p.store();
    let records = snapshot_records(&sb, &store);
    let (a_commit, b_commit) = (records[&a].clone(), records[&b].clone());
    // A ref a person made in the store, at B's commit; an entry of its reflog, dated T0 + 7d,
    // names A's commit (as a ref update would). (Snapshot records have no reflog.)
    sb.git_in(&store, ["update-ref", "refs/hand/b", &b_commit]);
    let log = store.join("logs/refs/hand/b");
    fs::create_dir_all(log.parent().unwrap()).unwrap();
    let mut content = fs::read(&log).unwrap_or_default();
    content.extend_from_slice(
        format!(
            "{a_commit} {b_commit} Rewind Test <test@example.invalid> {} +0000\tby hand\n",
            clock.t0 + 7 * DAY
        )
        .as_bytes(),
    );
    fs::write(&log, &content).unwrap();
    assert_fsck_no_dangling(&sb, &store, "with the hand-made entry");

    // T0 + 8d: A's record expired, but the entry (one day old) keeps A's commit and tree.
    let pruned = prune_at(&p, Some(&clock.at(8 * DAY)), &[]);
    assert_eq!(pruned.snapshots_removed, 1, "{}", pruned.json);
    assert!(!snapshot_records(&sb, &store).contains_key(&a));
    let kept = fs::read_to_string(&log).expect("the reflog keeps its recent entry");
    assert!(kept.contains("by hand"), "{kept}");
    assert_tree_complete(&sb, &store, &a);
    assert_fsck_no_dangling(&sb, &store, "after the first prune");

    // T0 + 15d: the entry expired as well (and B's record): A goes.
    let pruned = prune_at(&p, Some(&clock.at(15 * DAY)), &[]);
    assert_eq!(pruned.snapshots_removed, 1, "{}", pruned.json);
    let left = fs::read_to_string(&log).unwrap_or_default();
    assert!(
        !left.contains("by hand"),
        "the expired entry must be dropped: {left}"
    );
    assert!(
        !has_object(&sb, &store, &a),
        "A's tree is reachable from nothing now"
    );
    assert!(!has_object(&sb, &store, &a_commit));
    assert_tree_complete(&sb, &store, &b);
    assert_store_sound(&sb, &store, "after the second prune");
}

// ---------------------------------------------------------------------------
// Undo points
// ---------------------------------------------------------------------------

/// `restore --json HASH` at `now`: the undo id.
fn restore_at(p: &TestProject, now: &str, hash: &str) -> String {
    let v = rwj_at(p, Some(now), &["restore", hash]);
    let undo = v["undo"]
        .as_str()
        .unwrap_or_else(|| panic!("restore without \"undo\": {v}"))
        .to_string();
    assert_oid(&undo, "restore --json undo");
    undo
}

/// The store's record of what each run did not write (`rewind-stopped-runs`) lives as long as
/// the runs an undo or redo may ask it about: a run's lines go once it is older than the
/// retention, and a younger run's stay.
#[test]
fn prune_forgets_the_record_of_runs_older_than_the_retention() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    let clock = Clock::new();
    p.file("a.txt", "1\n");
    let first = track_at(&p, &clock.at(0));
    p.file("a.txt", "2\n");
    track_at(&p, &clock.at(0));
    restore_at(&p, &clock.at(0), &first);
    p.file("a.txt", "3\n");
    let second = track_at(&p, &clock.at(6 * DAY));
    restore_at(&p, &clock.at(6 * DAY), &first);
    let record = p.store().join("rewind-stopped-runs");
    let runs = || -> Vec<String> {
        let text = fs::read_to_string(&record).unwrap_or_default();
        text.lines()
            .filter(|l| l.starts_with("run "))
            .map(|l| l.split(' ').nth(2).unwrap().to_owned())
            .collect()
    };
    let times: Vec<String> = [clock.t0, clock.t0 + 6 * DAY].map(|t| t.to_string()).into();
    assert_eq!(
        runs(),
        times,
        "each restore records its run at the store's clock"
    );
    prune_at(&p, Some(&clock.at(8 * DAY)), &[]);
    assert_eq!(runs(), times[1..], "the run of day 0 goes, day 6's stays");
    restore_at(&p, &clock.at(8 * DAY), &second);
    prune_at(&p, Some(&clock.at(20 * DAY)), &[]);
    assert_eq!(runs(), Vec::<String>::new());
}

/// (commit, tree, commit time) of each undo point, newest first.
fn undo_chain(sb: &Sandbox, store: &Path) -> Vec<(String, String, i64)> {
    let run = sb.git_in_run(
        store,
        [
            "rev-list",
            "--format=%H %T %ct",
            "--no-commit-header",
            "refs/rewind/undo",
        ],
    );
    if !run.status.success() {
        return Vec::new();
    }
    run.stdout
        .lines()
        .map(|l| {
            let mut it = l.split(' ');
            (
                it.next().unwrap().to_string(),
                it.next().unwrap().to_string(),
                it.next().unwrap().parse().unwrap(),
            )
        })
        .collect()
}

#[test]
fn old_undo_points_expire_recent_ones_stay() {
    let sb = Sandbox::new();
    let clock = Clock::new();
    let p = sb.project("proj");
    p.file("f.txt", "original\n").file("g.txt", "g\n");
    let s0 = track_at(&p, &clock.at(0));
    // Undo point 1 at T0 + 1m.
    p.file("f.txt", "edit one\n").file("one.txt", "1\n");
    let u1 = restore_at(&p, &clock.at(MINUTE), &s0);
    // Undo point 2 at T0 + 6d.
    p.file("f.txt", "edit two\n").file("two.txt", "2\n");
    let u2 = restore_at(&p, &clock.at(6 * DAY), &s0);
    assert_ne!(u1, u2);
    let store = p.store();
    let chain = undo_chain(&sb, &store);
    assert_eq!(
        chain.iter().map(|c| c.1.clone()).collect::<Vec<_>>(),
        vec![u2.clone(), u1.clone()],
        "two undo points, newest first"
    );

    let message = sb.git_in(&store, ["log", "-1", "--format=%B", "refs/rewind/undo"]);
    let now = clock.at(8 * DAY);
    prune_at(&p, Some(&now), &[]);
    let chain_after = undo_chain(&sb, &store);
    assert_eq!(
        chain_after.len(),
        1,
        "the undo point of T0 must be dropped: {chain_after:?}"
    );
    assert_eq!(chain_after[0].1, u2, "the recent undo point stays");
    assert_eq!(chain_after[0].2, clock.t0 + 6 * DAY, "with its time");
    assert_eq!(
        sb.git_in(&store, ["log", "-1", "--format=%B", "refs/rewind/undo"]),
        message,
        "the kept undo point keeps its message"
    );
    assert_tree_complete(&sb, &store, &u2);
    assert_store_sound(&sb, &store, "after prune");

    // The recent undo point still puts the project back.
    let undo_of_redo = restore_at(&p, &now, &u2);
    assert_eq!(p.read("f.txt"), b"edit two\n");
    assert_eq!(p.read("two.txt"), b"2\n");
    assert!(!p.join("one.txt").exists());
    assert_eq!(undo_of_redo, s0);
    assert_eq!(p.track_matches_git().hash, u2);

    // A store whose only undo point expired has no refs/rewind/undo left.
    let q = sb.project("other");
    q.file("x", "x0\n");
    let x0 = track_at(&q, &clock.at(0));
    q.file("x", "x1\n");
    let ux = restore_at(&q, &clock.at(MINUTE), &x0);
    assert_eq!(track_at(&q, &clock.at(2 * MINUTE)), x0);
    let qstore = q.store();
    assert_eq!(undo_chain(&sb, &qstore).len(), 1);
    prune_at(&q, Some(&clock.at(8 * DAY)), &[]);
    let run = sb.git_in_run(&qstore, ["rev-parse", "--verify", "-q", "refs/rewind/undo"]);
    assert!(
        !run.status.success(),
        "refs/rewind/undo must be gone: {run}"
    );
    assert!(!has_object(&sb, &qstore, &ux), "the expired undo tree goes");
    assert_store_sound(&sb, &qstore, "after prune");
}

// ---------------------------------------------------------------------------
// prune --all
// ---------------------------------------------------------------------------

#[test]
fn prune_all_prunes_every_store_even_of_deleted_projects() {
    let sb = Sandbox::new();
    let clock = Clock::new();
    let mut stores = Vec::new();
    let mut expired = Vec::new();
    let mut projects = BTreeSet::new();
    for name in ["one", "two", "three"] {
        let p = sb.project(name);
        p.file("f", format!("{name} at T0\n"));
        expired.push(track_at(&p, &clock.at(0)));
        p.file("f", format!("{name} at T0 + 6d\n"));
        track_at(&p, &clock.at(6 * DAY));
        stores.push(p.store());
        projects.insert(p.path.to_string_lossy().into_owned());
    }
    // The third project disappears; its store stays.
    fs::remove_dir_all(sb.root.join("three")).unwrap();
    // Each store's own rewind.retention applies: "two" keeps 30 days.
    sb.git_in(&stores[1], ["config", "rewind.retention", "30d"]);

    let mut cmd = sb.rewind_command(["--json", "prune", "--all"]);
    cmd.env("REWIND_NOW", clock.at(8 * DAY));
    let run = run_with_deadline(&mut cmd, DEFAULT_DEADLINE);
    assert_no_panic(&run);
    run.assert_success();
    let v = one_json(&run);
    let rows = v
        .as_array()
        .unwrap_or_else(|| panic!("`prune --all --json` must print an array: {run}"));
    assert_eq!(rows.len(), 3, "one row per store: {run}");
    let pruned: Vec<Pruned> = rows.iter().map(Pruned::parse).collect();
    let got: BTreeSet<String> = pruned.iter().map(|p| p.project.clone()).collect();
    assert_eq!(got, projects, "each store's project: {run}");
    for p in &pruned {
        let two = p.project.ends_with("/two");
        assert_eq!(p.snapshots_removed, if two { 0 } else { 1 }, "{}", p.json);
        if !two {
            assert!(p.bytes_freed > 0, "{}", p.json);
        }
    }
    for (i, (store, a)) in stores.iter().zip(&expired).enumerate() {
        let two = i == 1;
        assert_eq!(
            snapshot_records(&sb, store).len(),
            if two { 2 } else { 1 },
            "{}",
            store.display()
        );
        assert_eq!(has_object(&sb, store, a), two, "{a} in {}", store.display());
        assert_store_sound(&sb, store, &store.display().to_string());
    }

    // Human mode: a summary line per store, exit 0.
    let mut cmd = sb.rewind_command(["prune", "--all"]);
    cmd.env("REWIND_NOW", clock.at(8 * DAY));
    let run = run_with_deadline(&mut cmd, DEFAULT_DEADLINE);
    assert_no_panic(&run);
    run.assert_success();
    assert_eq!(run.stdout.lines().count(), 3, "{run}");
    for project in &projects {
        assert!(run.stdout.contains(project.as_str()), "{run}");
    }

    // --retention applies to every store, over their config: 1h expires the T0 + 6d records.
    let mut cmd = sb.rewind_command(["--json", "prune", "--all", "--retention", "1h"]);
    cmd.env("REWIND_NOW", clock.at(8 * DAY));
    let run = run_with_deadline(&mut cmd, DEFAULT_DEADLINE);
    assert_no_panic(&run);
    run.assert_success();
    let rows = one_json(&run);
    let rows = rows.as_array().expect("an array");
    assert_eq!(rows.len(), 3, "{run}");
    for row in rows.iter().map(Pruned::parse) {
        let two = row.project.ends_with("/two");
        assert_eq!(
            row.snapshots_removed,
            if two { 2 } else { 1 },
            "{}",
            row.json
        );
    }
    for store in &stores {
        assert!(snapshot_records(&sb, store).is_empty());
        assert_store_sound(&sb, store, &store.display().to_string());
    }
}

#[test]
fn prune_all_with_no_stores_prints_an_empty_array() {
    let sb = Sandbox::new();
    let run = sb.run_rewind(["--json", "prune", "--all"]);
    run.assert_success();
    assert_eq!(one_json(&run), Value::Array(vec![]), "{run}");
}

#[test]
fn prune_all_skips_what_is_not_a_store() {
    // Stores are `<data dir>/*.git` with `rewind.worktree` in their config; anything else in
    // the data directory is not rewind's and must not fail the run.
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("f", "f\n");
    p.track();
    fs::write(sb.data_dir.join("notes.txt"), "mine\n").unwrap();
    fs::create_dir_all(sb.data_dir.join("not-a-store")).unwrap();
    fs::create_dir_all(sb.data_dir.join("empty.git")).unwrap();
    let bare = sb.data_dir.join("someone-elses.git");
    sb.git(
        None,
        [
            OsString::from("init"),
            "-q".into(),
            "--bare".into(),
            bare.clone().into(),
        ],
    );
    let run = sb.run_rewind(["--json", "prune", "--all"]);
    assert_eq!(
        run.code(),
        Some(0),
        "a bare git repository without rewind.worktree is not a store (skip it): {run}"
    );
    let rows = one_json(&run);
    assert_eq!(
        rows.as_array().map(Vec::len),
        Some(1),
        "only the one store is pruned: {run}"
    );
    assert_eq!(fs::read(sb.data_dir.join("notes.txt")).unwrap(), b"mine\n");
}

// ---------------------------------------------------------------------------
// Concurrency: prune while tracks run
// ---------------------------------------------------------------------------

#[test]
fn prune_while_tracks_run_concurrently() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    for i in 0..60 {
        p.file(
            format!("src/m{}/f{i}.rs", i % 6),
            format!("fn f{i}() {{}}\n"),
        );
    }
    let store = p.store();
    let proj = p.path.to_str().unwrap().to_string();
    let mut rng = XorShift::from_time();
    let mut printed: BTreeSet<String> = BTreeSet::new();
    printed.insert(p.track());
    for round in 0..4 {
        let mut gate = StartGate::new(&sb, &format!("gate-{round}"));
        let mut children = Vec::new();
        for k in 0..4 {
            let n = rng.below(60);
            let file = p.join(format!("src/m{}/f{n}.rs", n % 6));
            let content = format!("// round {round} track {k} {}\n", rng.next_u64());
            let cmd = &mut gated_edit_then(
                &sb,
                &gate,
                &file,
                &content,
                &["-C", &proj, "--json", "track"],
            );
            children.push(("track", spawn_piped(cmd)));
        }
        // Prunes with the default retention: nothing expires, but everything is swept and
        // (when packs or loose objects call for it) repacked while tracks wait for the lock.
        for _ in 0..2 {
            let cmd = &mut sb.rewind_command_gated(&gate, ["-C", proj.as_str(), "--json", "prune"]);
            children.push(("prune", spawn_piped(cmd)));
        }
        gate.open(children.len(), Duration::from_millis(100));
        for (what, child) in children {
            let run = finish(child, DEFAULT_DEADLINE, what);
            assert_no_panic(&run);
            run.assert_success();
            if what == "track" {
                printed.insert(Tracked::parse(&run.stdout).hash);
            } else {
                let pruned = Pruned::parse(&one_json(&run));
                assert_eq!(pruned.snapshots_removed, 0, "{}", pruned.json);
            }
        }
        assert_fsck_clean(&sb, &store);
    }
    assert!(
        printed.len() >= 5,
        "the edits made new snapshots: {printed:?}"
    );
    assert_store_sound(&sb, &store, "after the concurrent rounds");
    let records = snapshot_records(&sb, &store);
    for id in &printed {
        assert!(
            has_object(&sb, &store, id),
            "snapshot {id} a track printed is gone"
        );
        assert!(records.contains_key(id), "snapshot {id} lost its record");
        assert_tree_complete(&sb, &store, id);
    }
    p.track_matches_git();
    // One more round where everything expires at once (0s): the last snapshot, the one in the
    // stat cache, must stay complete whatever order the processes ran in.
    let mut gate = StartGate::new(&sb, "gate-final");
    let mut children = Vec::new();
    for k in 0..4 {
        let file = p.join(format!("src/m{k}/f{k}.rs"));
        let cmd = &mut gated_edit_then(
            &sb,
            &gate,
            &file,
            &format!("// final {k}\n"),
            &["-C", &proj, "--json", "track"],
        );
        children.push(("track", spawn_piped(cmd)));
    }
    for _ in 0..2 {
        let cmd = &mut sb.rewind_command_gated(
            &gate,
            ["-C", proj.as_str(), "--json", "prune", "--retention", "0s"],
        );
        children.push(("prune", spawn_piped(cmd)));
    }
    gate.open(children.len(), Duration::from_millis(100));
    for (what, child) in children {
        let run = finish(child, DEFAULT_DEADLINE, what);
        assert_no_panic(&run);
        run.assert_success();
    }
    assert_store_sound(&sb, &store, "after prunes with 0s retention");
    p.track_matches_git();
    assert_store_sound(&sb, &store, "after the final track");
}

#[test]
fn prune_waits_for_the_store_lock() {
    let sb = Sandbox::new();
    let clock = Clock::new();
    let p = sb.project("proj");
    let (a, _b) = two_snapshots(&p, &clock);
    let store = p.store();
    let lock = fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(store.join("rewind.lock"))
        .unwrap();
    lock.lock().unwrap();
    let mut cmd = p.rewind_command(["--json", "prune"]);
    cmd.env("REWIND_NOW", clock.at(9 * DAY));
    let mut child = spawn_piped(&mut cmd);
    thread::sleep(Duration::from_millis(700));
    assert!(
        child.try_wait().unwrap().is_none(),
        "prune must wait while another process holds the store lock"
    );
    assert!(
        snapshot_records(&sb, &store).contains_key(&a),
        "nothing may change before the lock is taken"
    );
    lock.unlock().unwrap();
    let run = finish(child, DEFAULT_DEADLINE, "prune");
    run.assert_success();
    assert_eq!(Pruned::parse(&one_json(&run)).snapshots_removed, 2);
    assert_store_sound(&sb, &store, "after prune");
}

// ---------------------------------------------------------------------------
// Strays in the object directory, temp files
// ---------------------------------------------------------------------------

#[test]
fn unrelated_files_in_objects_do_not_break_prune() {
    let sb = Sandbox::new();
    let clock = Clock::new();
    let p = sb.project("proj");
    let (a, b) = two_snapshots(&p, &clock);
    let store = p.store();
    let objects = store.join("objects");
    let strays = [
        "ab/not-an-object",
        "zz/whatever",
        "zz-file",
        "pack/README",
        "info/mine",
    ];
    for stray in strays {
        let path = objects.join(stray);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, "not git's\n").unwrap();
    }
    // Old strays too: age is no reason to delete what is not an object.
    age_file(&objects.join("ab/not-an-object"), 30 * DAY as u64);

    let run = rw_at(&p, Some(&clock.at(DAY + HOUR)), &["--json", "prune"]);
    assert_eq!(run.code(), Some(0), "strays must not fail prune: {run}");
    let run = rw_at(&p, Some(&clock.at(9 * DAY)), &["--json", "prune"]);
    assert_eq!(run.code(), Some(0), "strays must not fail prune: {run}");
    let pruned = Pruned::parse(&one_json(&run));
    assert_eq!(pruned.snapshots_removed, 2, "{}", pruned.json);
    assert!(!has_object(&sb, &store, &a));
    assert_tree_complete(&sb, &store, &b);
    for stray in strays {
        assert!(
            objects.join(stray).exists(),
            "{stray} is not rewind's to delete"
        );
    }
    let t = p.track_matches_git();
    assert_eq!(t.hash, b);
    assert_tree_complete(&sb, &store, &b);
    // (fsck reports the planted "bad sha1 file" ab/not-an-object, nothing else.)
    assert_fsck_clean(&sb, &store);
}

#[test]
fn corrupt_loose_objects_do_not_crash_prune() {
    // Files named like loose objects but holding garbage: an old one (unreachable, so git's
    // rule deletes it) and a fresh one (a root by its age, unreadable). Prune must not panic;
    // it may finish (exit 0) or stop with an error that names the object (exit 1).
    let sb = Sandbox::new();
    let clock = Clock::new();
    let p = sb.project("proj");
    let (_a, b) = two_snapshots(&p, &clock);
    let store = p.store();
    let objects = store.join("objects");
    fs::create_dir_all(objects.join("13")).unwrap();
    let old_garbage = objects.join(format!("13/{}", "4".repeat(38)));
    fs::write(&old_garbage, "not zlib at all").unwrap();
    age_file(&old_garbage, 30 * DAY as u64);
    let run = rw_at(&p, Some(&clock.at(8 * DAY)), &["--json", "prune"]);
    assert_eq!(
        run.code(),
        Some(0),
        "an old corrupt unreachable object: {run}"
    );
    assert!(!old_garbage.exists(), "unreachable and old: deleted");
    assert_tree_complete(&sb, &store, &b);

    // A fresh corrupt one (a root by git's rule: newer than the expiry), with a repack due:
    // the first snapshot, in the pack, expired. Real clock for the prune, so that the file's
    // age counts.
    let q = sb.project("other");
    q.file("f", "A\n");
    let real = Clock::new();
    track_at(&q, &real.at(-3 * HOUR));
    q.file("f", "B\n");
    let qb = track_at(&q, &real.at(-2 * HOUR));
    let qstore = q.store();
    let qobjects = qstore.join("objects");
    // The loose objects are as old as their snapshots (else A's commit would be a root).
    for dir in fs::read_dir(&qobjects).unwrap().flatten() {
        if dir.file_name().len() == 2 {
            for file in fs::read_dir(dir.path()).unwrap().flatten() {
                age_file(&file.path(), 2 * HOUR as u64);
            }
        }
    }
    fs::create_dir_all(qobjects.join("12")).unwrap();
    let fresh_id = format!("12{}", "3".repeat(38));
    let fresh_garbage = qobjects.join(format!("12/{}", "3".repeat(38)));
    fs::write(&fresh_garbage, "not zlib either").unwrap();
    let run = q.rewind(["--json", "prune", "--retention", "1h"]);
    match run.code() {
        Some(0) => eprintln!(
            "fresh corrupt loose object: prune exited 0: {}",
            run.stdout.trim()
        ),
        Some(1) => {
            assert!(
                run.stderr.contains(&fresh_id) || run.stderr.contains("12/3333"),
                "the error must name the object: {run}"
            );
            eprintln!(
                "fresh corrupt loose object: prune exited 1: {}",
                run.stderr.trim()
            );
        }
        _ => panic!("prune with a corrupt loose object: {run}"),
    }
    assert!(
        fresh_garbage.exists(),
        "a fresh loose file is a root by git's rule"
    );
    assert_tree_complete(&sb, &qstore, &qb);
    assert_eq!(q.track_matches_git().hash, qb);
    fs::remove_file(&fresh_garbage).unwrap();
    let run = q.rewind(["--json", "prune", "--retention", "1h"]);
    run.assert_success();
    assert_store_sound(&sb, &qstore, "after removing the garbage");
}

#[test]
fn garbage_pack_index_is_reported_not_a_crash() {
    let sb = Sandbox::new();
    let clock = Clock::new();
    let p = sb.project("proj");
    let (_a, b) = two_snapshots(&p, &clock);
    let store = p.store();
    let idx = store.join("objects/pack/pack-x.idx");
    fs::write(&idx, "garbage, not a pack index\n").unwrap();
    let run = rw_at(&p, Some(&clock.at(8 * DAY)), &["--json", "prune"]);
    match run.code() {
        Some(0) => {}
        Some(1) => {
            assert!(
                run.stderr.contains("pack-x.idx"),
                "the error must name the file: {run}"
            );
            let v = one_json(&run);
            assert!(
                v["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("pack-x.idx"),
                "{run}"
            );
        }
        _ => panic!("prune with a garbage pack index: {run}"),
    }
    eprintln!("garbage pack index: prune exited {:?}", run.code());
    // The store is still usable, and once the garbage is gone prune works.
    assert_tree_complete(&sb, &store, &b);
    p.track_matches_git();
    fs::remove_file(&idx).unwrap();
    let pruned = prune_at(&p, Some(&clock.at(8 * DAY)), &[]);
    assert!(pruned.snapshots_removed <= 2, "{}", pruned.json);
    assert_store_sound(&sb, &store, "after prune");
}

#[test]
fn stale_temp_files_go_fresh_ones_stay() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("f", "f\n");
    let t = p.track();
    p.file("f", "g\n");
    p.track();
    let store = p.store();
    let objects = store.join("objects");
    let fanout = objects.join(&t[..2]);
    fs::create_dir_all(&fanout).unwrap();
    let stale = [
        fanout.join("tmp_obj_stale1"),
        objects.join("tmp_obj_stale2"),
        objects.join("pack/tmp_pack_stale"),
        objects.join("pack/tmp_idx_stale"),
        store.join("index.tmpstale"),
    ];
    let fresh = [
        fanout.join("tmp_obj_fresh1"),
        objects.join("tmp_obj_fresh2"),
        objects.join("pack/tmp_pack_fresh"),
        objects.join("pack/tmp_idx_fresh"),
        store.join("index.tmpfresh"),
    ];
    for f in stale.iter().chain(&fresh) {
        fs::write(f, "partial").unwrap();
    }
    for f in &stale {
        age_file(f, 2 * HOUR as u64);
    }
    // Just under the hour: still possibly someone's.
    age_file(&fresh[0], (HOUR - 5 * MINUTE) as u64);
    let run = p.rewind(["--json", "prune"]);
    run.assert_success();
    for f in &stale {
        assert!(!f.exists(), "{} (2 hours old) must be removed", f.display());
    }
    for f in &fresh {
        assert!(f.exists(), "{} (under an hour old) must stay", f.display());
    }
    assert_store_sound(&sb, &store, "after prune");
}

// ---------------------------------------------------------------------------
// A store that stock git maintained
// ---------------------------------------------------------------------------

#[test]
fn prune_after_git_gc_on_the_store_leaves_git_consistent() {
    // The store is a plain bare repository "that stock git can read"; a user may well run
    // `git gc` in it (packed-refs, a commit-graph, a cruft pack with a .mtimes file, bitmaps).
    // Deleting objects afterwards must not leave git's side files pointing at them.
    let sb = Sandbox::new();
    let clock = Clock::new();
    let p = sb.project("proj");
    let (a, b) = two_snapshots(&p, &clock);
    let store = p.store();
    let a_commit = snapshot_records(&sb, &store)[&a].clone();
    sb.git_in(&store, ["gc", "-q"]);
    assert!(
        store.join("packed-refs").exists(),
        "git gc packs the refs: {:?}",
        fs::read_dir(&store)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect::<Vec<_>>()
    );
    assert_store_sound(&sb, &store, "after git gc");

    let pruned = prune_at(&p, Some(&clock.at(7 * DAY + HOUR)), &[]);
    assert_eq!(pruned.snapshots_removed, 1, "{}", pruned.json);
    assert!(
        !has_object(&sb, &store, &a_commit),
        "A's commit is unreachable: deleted"
    );
    let records = snapshot_records(&sb, &store);
    assert!(
        records.contains_key(&b) && !records.contains_key(&a),
        "{records:?}"
    );
    assert_tree_complete(&sb, &store, &b);
    // Every pack side file (.rev, .bitmap, .mtimes, ...) belongs to a pack that still exists,
    // git's commit-graph names no deleted commit, and fsck is clean.
    let mut problems = Vec::new();
    let pack_dir = store.join("objects/pack");
    let names: BTreeSet<String> = fs::read_dir(&pack_dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    for name in &names {
        if let Some((stem, ext)) = name.rsplit_once('.') {
            if stem.starts_with("pack-")
                && ext != "pack"
                && !names.contains(&format!("{stem}.pack"))
            {
                problems.push(format!("{name} is left without its pack: {names:?}"));
            }
        }
    }
    let verify = sb.git_in_run(&store, ["commit-graph", "verify"]);
    if !verify.status.success() {
        problems.push(format!(
            "git's commit-graph names deleted commits: {verify}"
        ));
    }
    let fsck = sb.git_in_run(
        &store,
        ["fsck", "--strict", "--no-dangling", "--no-progress"],
    );
    if !fsck.status.success() || fsck.stderr.contains("error") {
        problems.push(format!("fsck: {fsck}"));
    }
    assert!(problems.is_empty(), "after prune:\n{}", problems.join("\n"));
    p.file("f", "C\n");
    p.track_matches_git();
}

// ---------------------------------------------------------------------------
// kill -9
// ---------------------------------------------------------------------------

/// Rewrites every file of the many-files project (new content, so new blobs).
fn rewrite_many(p: &TestProject, n: usize, generation: usize) {
    for i in 0..n {
        p.file(
            format!("d{:02}/f{i}.txt", i % 40),
            format!("file {i} generation {generation}\n"),
        );
    }
}

fn loose_count(sb: &Sandbox, store: &Path) -> u64 {
    let out = sb.git_in(store, ["count-objects", "-v"]);
    out.lines()
        .find_map(|l| l.strip_prefix("count: "))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn kill_9_during_prune_leaves_a_sound_store() {
    const N: usize = 2100;
    let sb = Sandbox::new();
    let p = sb.project("proj");
    rewrite_many(&p, N, 0);
    p.track(); // a pack
    let store = p.store();
    let mut rng = XorShift::from_time();

    // How long an uninterrupted prune that repacks takes here.
    rewrite_many(&p, N, 1);
    p.track();
    assert!(loose_count(&sb, &store) >= 2000);
    let start = Instant::now();
    let run = p.rewind(["--json", "prune"]);
    run.assert_success();
    let full = start.elapsed();
    assert!(
        loose_count(&sb, &store) < 100,
        "with 2000+ loose objects prune repacks: {}",
        sb.git_in(&store, ["count-objects", "-v"])
    );
    let window = (full.as_millis() as u64).max(20) * 6 / 5;

    let mut killed = 0;
    for generation in 2..10 {
        rewrite_many(&p, N, generation);
        let tree = p.track();
        // Every other run also expires everything but the stat cache's snapshot.
        let mut args = vec!["-C", p.path.to_str().unwrap(), "prune"];
        if generation % 2 == 0 {
            args.extend(["--retention", "0s"]);
        }
        let mut cmd = sb.rewind_command(&args);
        let mut child = spawn_piped(&mut cmd);
        let delay = rng.below(window);
        thread::sleep(Duration::from_millis(delay));
        let done = child.try_wait().unwrap().is_some();
        let _ = child.kill(); // SIGKILL
        let run = finish(child, DEFAULT_DEADLINE, "prune");
        if !done && !run.status.success() {
            killed += 1;
        }
        let what = format!("generation {generation}, killed after {delay} ms");
        assert_fsck_clean(&sb, &store);
        assert_store_sound(&sb, &store, &what);
        if generation % 2 == 1 {
            assert!(
                snapshot_records(&sb, &store).contains_key(&tree),
                "{what}: the snapshot just taken keeps its record"
            );
        }
        assert_tree_complete(&sb, &store, &tree);
    }
    eprintln!("prune killed mid-run {killed} of 8 times (window {window} ms)");

    // Afterwards prune and track work, and the result is what git would write.
    let pruned = prune_at(&p, None, &[]);
    assert_eq!(pruned.snapshots_removed, 0, "{}", pruned.json);
    rewrite_many(&p, 50, 99);
    p.track_matches_git();
    let run = p.rewind(["--json", "prune", "--retention", "0s"]);
    run.assert_success();
    assert_store_sound(&sb, &store, "after the final prune");
    p.track_matches_git();
    eprintln!("{}", sb.git_in(&store, ["count-objects", "-v"]));
}

// ---------------------------------------------------------------------------
// The empty tree
// ---------------------------------------------------------------------------

#[test]
fn prune_keeps_the_empty_tree_the_store_was_created_with() {
    // A new store holds the empty tree (store.rs: "a `bad object` for git until written"), and
    // `rewind patch --help` gives `rewind patch 4b825dc6` as its example. Expiring old records
    // must not take that away.
    let sb = Sandbox::new();
    let clock = Clock::new();
    let p = sb.project("proj");
    let empty = empty_tree(&sb);
    p.file("x", "x\n");
    track_at(&p, &clock.at(0));
    let store = p.store();
    let run = rw_at(&p, Some(&clock.at(0)), &["patch", &empty[..8]]);
    run.assert_success();
    prune_at(&p, Some(&clock.at(8 * DAY)), &[]);
    let run = rw_at(&p, Some(&clock.at(8 * DAY)), &["patch", &empty[..8]]);
    assert_eq!(
        run.code(),
        Some(0),
        "`rewind patch 4b825dc6` after prune: {run}"
    );
    let listed = sb.git_in(&store, ["cat-file", "--batch-all-objects", "--batch-check"]);
    assert!(
        listed.contains(&empty),
        "the empty tree must still be in the store:\n{listed}"
    );
}

// ---------------------------------------------------------------------------
// Retention limits beyond age: the per-session turn count and the size quota
// ---------------------------------------------------------------------------

fn turn_ids(p: &TestProject, now: &str) -> Vec<String> {
    let turns = one_json(&at(p, now, &["--json", "turns", "--session", "s"]));
    turns
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["turn"].as_str().unwrap().to_string())
        .collect()
}

/// Hour `h` of a day ahead of the real clock: the store's loose objects (written now, by
/// the real clock) are then older than prune's hour of grace. (It was 2026-12-01, which the
/// real clock passed: objects then counted as a minute old, and the size quota found nothing
/// it could free.)
fn hour(h: u32) -> String {
    format!("2099-12-01T{h:02}:00:00Z")
}

#[test]
fn sessions_keep_their_newest_turns_and_rolled_back_ones() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("base.txt", "base\n");
    for t in 1..=5u32 {
        let turn = t.to_string();
        at(
            &p,
            &hour(t),
            &["turn", "begin", "--session", "s", "--turn", &turn],
        );
        p.file(format!("f{t}.txt"), format!("turn {t}\n"));
        at(
            &p,
            &hour(t),
            &["turn", "end", "--session", "s", "--turn", &turn],
        );
    }
    // Turn 5 undone: a rolled-back turn waits for its age, and does not count against the
    // limit (the newest two of the others stay).
    at(&p, &hour(6), &["undo", "--session", "s", "--turn", "5"]);
    let outcome = one_json(&at(&p, &hour(7), &["--json", "prune", "--max-turns", "2"]));
    assert_eq!(outcome["turns_removed"], 2, "{outcome}");
    assert_eq!(turn_ids(&p, &hour(7)), ["3", "4", "5"]);
    // The chain holds only the kept turns (a begin and an end commit each), and the undo's
    // commit (the session's last word on what it undid).
    let log = p.store_git(["log", "--format=%s", "refs/rewind/sessions/s/head"]);
    assert_eq!(log.lines().count(), 7, "{log}");
    assert!(log.lines().next().unwrap().contains("undo"), "{log}");
    for gone in ["1", "2"] {
        let listed = p.store_git([
            "for-each-ref",
            &format!("refs/rewind/sessions/s/turns/{gone}"),
        ]);
        assert!(
            listed.trim().is_empty(),
            "turn {gone} still has a ref: {listed}"
        );
    }
    p.assert_fsck_clean();
    // What is left still undoes: back to before turn 4.
    at(&p, &hour(8), &["undo", "--session", "s", "--turn", "4"]);
    assert!(!p.join("f4.txt").exists());
    assert!(
        p.join("f3.txt").exists(),
        "turn 3's file is not the undone turns' to undo"
    );

    // The config key sets the limit too.
    p.store_git(["config", "rewind.maxTurnsPerSession", "1"]);
    let outcome = one_json(&at(&p, &hour(9), &["--json", "prune"]));
    assert_eq!(
        outcome["turns_removed"], 0,
        "the one turn not rolled back is within the limit: {outcome}"
    );
    p.assert_fsck_clean();
}

#[test]
fn over_the_size_quota_the_oldest_snapshots_go_but_not_the_current_one() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    // Snapshot A: 2 MB of incompressible files (the first snapshot, written as a pack).
    let mut rng = XorShift::from_time();
    for i in 0..100 {
        let bytes: Vec<u8> = (0..20_000).map(|_| rng.next_u64() as u8).collect();
        p.file(format!("big/{i}.bin"), bytes);
    }
    // (Three hours before the prune: a record younger than two hours is spared.)
    let a = at(&p, &hour(0), &["track"]).stdout.trim().to_string();
    let big_blob = p.store_git(["rev-parse", &format!("{a}:big/0.bin")]);
    // Snapshot B, two hours later: small.
    p.remove("big");
    p.file("small.txt", "small\n");
    let b = at(&p, &hour(2), &["track"]).stdout.trim().to_string();
    // A session active just now is never dropped for size.
    at(
        &p,
        &hour(3),
        &["turn", "begin", "--session", "live", "--turn", "1"],
    );
    at(
        &p,
        &hour(3),
        &["turn", "end", "--session", "live", "--turn", "1"],
    );

    let outcome = one_json(&at(
        &p,
        &hour(3),
        &[
            "--json",
            "prune",
            "--max-size",
            "1M",
            "--target-size",
            "500k",
        ],
    ));
    assert!(
        outcome["snapshots_removed"].as_u64().unwrap() >= 1,
        "{outcome}"
    );
    assert!(
        outcome["bytes_freed"].as_u64().unwrap() > 1_000_000,
        "{outcome}"
    );
    assert!(
        !has_object(&sb, &p.store(), big_blob.trim()),
        "A's blobs are gone"
    );
    assert!(!has_object(&sb, &p.store(), &a), "A's tree is gone");
    assert!(
        has_object(&sb, &p.store(), &b),
        "B (the current snapshot) stays"
    );
    assert_eq!(turn_ids_of(&p, "live"), ["1"]);
    p.assert_fsck_clean();

    // Under the quota nothing goes.
    let outcome = one_json(&at(&p, &hour(4), &["--json", "prune"]));
    assert_eq!(outcome["snapshots_removed"], 0, "{outcome}");
}

fn turn_ids_of(p: &TestProject, session: &str) -> Vec<String> {
    let turns = one_json(&at(p, &hour(3), &["--json", "turns", "--session", session]));
    turns
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["turn"].as_str().unwrap().to_string())
        .collect()
}

/// An object the stat cache names is lost: prune neither fails nor hides it, and the next track
/// writes it again from the file.
#[test]
fn prune_and_track_survive_a_stat_cache_that_names_a_lost_object() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "first\n");
    at(&p, &hour(1), &["track"]);
    p.file("a.txt", "second, now loose\n");
    let tree = at(&p, &hour(1), &["track"]).stdout.trim().to_string();
    let blob = p.store_git(["rev-parse", &format!("{tree}:a.txt")]);
    let blob = blob.trim();
    let loose = p.store().join("objects").join(&blob[..2]).join(&blob[2..]);
    std::fs::remove_file(&loose).unwrap();
    at(&p, &hour(2), &["prune"]);
    let again = at(&p, &hour(2), &["track"]).stdout.trim().to_string();
    assert_eq!(again, tree);
    assert!(
        has_object(&sb, &p.store(), blob),
        "the next track wrote the blob again"
    );
    p.assert_fsck_clean();
}

/// Writes `n` files of 20 KB of random bytes under `dir/` (incompressible).
fn random_files(p: &TestProject, dir: &str, n: usize) {
    let mut rng = XorShift::from_time();
    for i in 0..n {
        let bytes: Vec<u8> = (0..20_000).map(|_| rng.next_u64() as u8).collect();
        p.file(format!("{dir}/{i}.bin"), bytes);
    }
}

/// Issue 12 item 6: the size quota deleted a session whose turn was still open (begun over an
/// hour before), its "before" snapshot with it, and reported it as expired. Age expiry and the
/// turn limit must spare an open turn as well.
#[test]
fn retention_never_removes_an_open_turn_and_names_quota_removals() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    // A finished session over 2 MB of files, idle since hour 1: the quota may drop it.
    random_files(&p, "done", 100);
    at(
        &p,
        &hour(1),
        &["turn", "begin", "--session", "done", "--turn", "1"],
    );
    p.file("done.txt", "done\n");
    at(
        &p,
        &hour(1),
        &["turn", "end", "--session", "done", "--turn", "1"],
    );
    // A session with a finished turn, then a turn begun at hour 2 and never ended, whose
    // "before" holds 2 MB of files that are deleted afterwards.
    p.remove("done");
    random_files(&p, "open", 100);
    for (turn, now) in [("1", hour(2)), ("2", hour(2))] {
        at(
            &p,
            &now,
            &["turn", "begin", "--session", "live", "--turn", turn],
        );
        if turn == "1" {
            p.file("live.txt", "live\n");
            at(
                &p,
                &now,
                &["turn", "end", "--session", "live", "--turn", turn],
            );
        }
    }
    let open_before = one_json(&at(&p, &hour(2), &["--json", "turns", "--session", "live"]))[1]
        ["before"]
        .as_str()
        .unwrap()
        .to_string();
    p.remove("open");
    p.file("now.txt", "small\n");
    at(&p, &hour(5), &["track"]);

    // Over the quota (4 MB, of which the open turn holds 2 MB: dropping the other session
    // gets under the target), then with a turn limit of 0, then past the retention: the open
    // turn stays, and so does all its before snapshot.
    let quota = at(
        &p,
        &hour(5),
        &["--json", "prune", "--max-size", "3M", "--target-size", "3M"],
    );
    let outcome = one_json(&quota);
    let later = "2099-12-20T00:00:00Z";
    for (now, extra) in [
        (hour(5).as_str(), None),
        (hour(5).as_str(), Some("0")),
        (later, None),
    ] {
        if let Some(max) = extra {
            at(&p, now, &["prune", "--max-turns", max]);
        } else if now == later {
            let expired = one_json(&at(&p, now, &["--json", "prune"]));
            assert_eq!(
                expired["sessions_removed"],
                serde_json::json!([]),
                "{expired}"
            );
        }
        let live = one_json(&at(&p, now, &["--json", "turns", "--session", "live"]));
        let open: Vec<&Value> = live
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["turn"] == "2")
            .collect();
        assert_eq!(open.len(), 1, "the open turn is kept at {now}: {live}");
        assert!(open[0]["ended_at"].is_null(), "{live}");
        assert_eq!(open[0]["before"], open_before.as_str(), "{live}");
        for blob in ["open/0.bin", "open/99.bin"] {
            let id = p.store_git(["rev-parse", &format!("{open_before}:{blob}")]);
            assert!(
                has_object(&sb, &p.store(), id.trim()),
                "the open turn's before keeps {blob}"
            );
        }
        p.assert_fsck_clean();
    }

    // The finished session went for the quota, and the outcome and the message say so.
    assert_eq!(
        outcome["sessions_removed"],
        serde_json::json!(["done"]),
        "{outcome}"
    );
    assert_eq!(
        outcome["sessions_removed_for_size"],
        serde_json::json!(["done"]),
        "{outcome}"
    );
    assert!(
        quota.stderr.contains("size quota") && !quota.stderr.contains("expired"),
        "{quota}"
    );
    // (Taken three hours before: a snapshot whose record is younger than two hours is never
    // dropped for size.)
    let earlier = "2099-12-19T21:00:00Z";
    // It holds 1 MB no other record holds: dropping it gets the store under 2.5 MB.
    let mut rng = XorShift::from_time();
    p.file(
        "again.bin",
        (0..1 << 20)
            .map(|_| rng.next_u64() as u8)
            .collect::<Vec<u8>>(),
    );
    at(&p, earlier, &["track"]);
    p.remove("again.bin");
    at(&p, earlier, &["track"]);
    let text = at(
        &p,
        later,
        &["prune", "--max-size", "1", "--target-size", "2500k"],
    );
    assert!(text.stdout.contains("for the size quota"), "{text}");

    // Ending the open turn works and undoes to its before.
    at(
        &p,
        later,
        &["turn", "end", "--session", "live", "--turn", "2"],
    );
    at(&p, later, &["undo", "--session", "live", "--turn", "2"]);
    assert!(
        p.join("open/0.bin").exists(),
        "undo brought back the before"
    );
    p.assert_fsck_clean();
}

/// Found by the issue-13 hostile pass: a store whose config lost `rewind.worktree` (emptied, or
/// rewritten by hand without it) was used by every command but never pruned, and nothing said
/// so: `prune --all` did not list it. Opening the store now completes its config, keeping what
/// else the config held.
#[test]
fn a_store_config_without_its_worktree_is_completed_and_pruned() {
    let sb = Sandbox::new();
    for (name, config) in [
        ("emptied", ""),
        (
            "by-hand",
            "[core]\n\tbare = true\n[rewind]\n\tmaxFileSize = 12345\n",
        ),
    ] {
        let p = sb.project(name);
        p.file("f", "f\n");
        p.track();
        let store = p.store();
        fs::write(store.join("config"), config).unwrap();
        p.track();
        let worktree = sb.git_in(&store, ["config", "rewind.worktree"]);
        assert_eq!(worktree.trim(), p.path.to_string_lossy(), "{name}");
        if name == "by-hand" {
            let kept = sb.git_in(&store, ["config", "rewind.maxFileSize"]);
            assert_eq!(kept.trim(), "12345", "the user's setting stays");
        }
        assert_eq!(sb.git_in(&store, ["config", "core.bare"]).trim(), "true");
    }
    let run = sb.run_rewind(["--json", "prune", "--all"]);
    run.assert_success();
    let rows = one_json(&run);
    assert_eq!(
        rows.as_array().map(Vec::len),
        Some(2),
        "both stores pruned: {run}"
    );
}

/// Issue 18, items 1 and 4: the size quota measured everything under `objects/`, a killed
/// prune's leftovers included, before it removed them: a 45 MB `tmp_pack_*` (or a pack without
/// its index, from a repack killed between its two renames) made the next prune delete every
/// idle session, for nothing; and such an orphan pack was never removed at all. Leftovers now
/// count for nothing, `doctor` lists them, and prune removes them once an hour old (a young
/// one may be a `git` run's).
#[test]
fn leftovers_of_a_killed_prune_never_cost_a_session_and_are_removed() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    let clock = Clock::new();
    p.file("a.txt", "a\n");
    for (i, session) in ["s1", "s2", "s3"].iter().enumerate() {
        let hours_ago = -(3 + i as i64) * 3600;
        begin_at(&p, &clock.at(hours_ago), session, "1");
        p.file(format!("{session}.txt"), format!("{session}\n"));
        end_at(&p, &clock.at(hours_ago), session, "1");
    }
    let pack_dir = p.store().join("objects/pack");
    fs::create_dir_all(&pack_dir).unwrap();
    let junk = vec![7u8; 45 << 20];
    let temp = pack_dir.join("tmp_pack_Zq1x9Y");
    fs::write(&temp, &junk).unwrap();
    let orphan = pack_dir.join(format!("pack-{}.pack", "ab".repeat(20)));
    fs::write(&orphan, &junk).unwrap();
    age_file(&orphan, 2 * 3600);

    let doctor = rwj_at(&p, Some(&clock.at(0)), &["doctor"]);
    let listed: BTreeSet<&str> = doctor["leftovers"]
        .as_array()
        .unwrap_or_else(|| panic!("doctor lists leftovers: {doctor}"))
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert!(listed.contains(temp.to_str().unwrap()), "{doctor}");
    assert!(listed.contains(orphan.to_str().unwrap()), "{doctor}");

    let pruned = prune_at(
        &p,
        Some(&clock.at(0)),
        &["--max-size", "50M", "--target-size", "30M"],
    );
    assert!(pruned.sessions_removed.is_empty(), "{}", pruned.json);
    assert_eq!(turns_at(&p, &clock.at(0)).len(), 3, "{}", pruned.json);
    assert!(!orphan.exists(), "an orphan pack over an hour old goes");
    assert!(
        temp.exists(),
        "a young temp file may be a running git's: it stays"
    );
    assert_store_sound(&sb, &p.store(), "after prune");
}

/// Issue 18, item 8: `prune --all` must report every store it could not prune (exit 1) and not
/// wait without limit behind a busy one: a store whose config is garbage and one whose lock
/// another process holds are each a row `{"error": {code, message}}` naming the store, the
/// other stores are pruned, and the busy one is given up after `--wait`.
#[test]
fn prune_all_reports_a_garbage_config_and_a_busy_store_and_prunes_the_rest() {
    let sb = Sandbox::new();
    let projects: Vec<TestProject> = ["fine", "garbage", "busy"]
        .iter()
        .map(|name| {
            let p = sb.project(name);
            p.file("f", format!("{name}\n"));
            p.track();
            p
        })
        .collect();
    let stores: Vec<std::path::PathBuf> = projects.iter().map(|p| p.store()).collect();
    fs::write(stores[1].join("config"), "[[[ not a config").unwrap();
    let holder = LockHolder::hold(&stores[2]);
    let run = sb.run_rewind(["--json", "--wait", "200ms", "prune", "--all"]);
    drop(holder);
    assert_eq!(run.code(), Some(1), "{run}");
    let rows = one_json(&run);
    let rows = rows.as_array().unwrap_or_else(|| panic!("an array: {run}"));
    let pruned: Vec<&str> = rows.iter().filter_map(|r| r["project"].as_str()).collect();
    assert_eq!(pruned, [projects[0].path.to_str().unwrap()], "{run}");
    let mut errors: Vec<(String, bool, bool)> = rows
        .iter()
        .filter(|r| r.get("error").is_some())
        .map(|r| {
            let message = r["error"]["message"].as_str().unwrap();
            let code = r["error"]["code"].as_str().unwrap().to_string();
            let names =
                |store: &Path| message.contains(store.file_name().unwrap().to_str().unwrap());
            (code, names(&stores[1]), names(&stores[2]))
        })
        .collect();
    errors.sort();
    assert_eq!(
        errors,
        [
            ("busy".to_string(), false, true),
            ("store".to_string(), true, false)
        ],
        "{run}"
    );
}

/// Issue 18, item 2: when the space is held by an active session that the quota may not touch,
/// prune removed every snapshot record, one taken three minutes before included, freed almost
/// nothing, and said nothing; a `restore` of that checkpoint then failed. Now a snapshot younger
/// than an hour is never a quota candidate, and the outcome (and stderr) say the store is still
/// over its quota.
#[test]
fn the_quota_spares_a_fresh_checkpoint_and_says_when_it_cannot_get_under() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    let clock = Clock::new();
    let mut rng = XorShift::from_time();
    for i in 0..100 {
        let bytes: Vec<u8> = (0..20_000).map(|_| rng.next_u64() as u8).collect();
        p.file(format!("big/{i}.bin"), bytes);
    }
    // A checkpoint three hours ago, whose record holds little but what the session holds too:
    // dropping it cannot bring the store under the target, so it stays.
    p.file("old.txt", "old\n");
    let old = track_at(&p, &clock.at(-3 * HOUR));
    p.remove("old.txt");
    // The space is held by a session active ten minutes ago.
    begin_at(&p, &clock.at(-600), "live", "1");
    p.file("notes.txt", "the agent's\n");
    end_at(&p, &clock.at(-600), "live", "1");
    // A checkpoint three minutes ago.
    p.file("notes.txt", "the user's\n");
    let checkpoint = track_at(&p, &clock.at(-180));
    p.file("notes.txt", "later\n");

    let run = rw_at(
        &p,
        Some(&clock.at(0)),
        &[
            "--json",
            "prune",
            "--max-size",
            "1M",
            "--target-size",
            "500k",
        ],
    );
    run.assert_success();
    let outcome = one_json(&run);
    assert_eq!(outcome["still_over_quota"], true, "{outcome}");
    assert!(run.stderr.contains("still over its size quota"), "{run}");
    let records = snapshot_records(&sb, &p.store());
    assert!(
        records.contains_key(&checkpoint),
        "the fresh checkpoint's record stays: {outcome}"
    );
    assert!(
        records.contains_key(&old) && outcome["snapshots_removed_for_size"] == 0,
        "a record whose removal could not bring the store under the target stays: {outcome}"
    );
    rwj_at(&p, Some(&clock.at(0)), &["restore", &checkpoint]);
    assert_eq!(p.read("notes.txt"), b"the user's\n");
}

/// Issue 18, item 7: expired sessions left their directories of refs (`turns/`, `announced/`,
/// `rolled-back/`, the session's own) behind for ever; with 10,000 of them `turns` took six
/// times as long. It happened with a relative `--data-dir`: the store was then opened by a
/// relative path, and gix removed no directory a ref deletion emptied. Prune removes them now.
#[test]
fn an_expired_session_leaves_no_directories_with_a_relative_data_dir() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n");
    let then = Clock::new().at(-10 * DAY);
    let run = |args: &[&str], now: Option<&str>| {
        let mut cmd = sb.rewind_command_no_data_dir(["--data-dir", "rel-data", "-C", "proj"]);
        cmd.args(args);
        if let Some(now) = now {
            cmd.env("REWIND_NOW", now);
        }
        let run = run_with_deadline(&mut cmd, DEFAULT_DEADLINE);
        run.assert_success();
        run
    };
    run(
        &["turn", "begin", "--session", "old", "--turn", "1"],
        Some(&then),
    );
    run(
        &[
            "turn",
            "track-file",
            "--session",
            "old",
            "--turn",
            "1",
            "a.txt",
        ],
        Some(&then),
    );
    p.file("a.txt", "old\n");
    run(
        &["turn", "end", "--session", "old", "--turn", "1"],
        Some(&then),
    );
    let path = run(&["path"], None).stdout.trim().to_string();
    let pruned = run(&["prune"], None);
    assert!(
        pruned.stderr.contains("removed expired session old"),
        "{pruned}"
    );
    let store = sb
        .root
        .join("rel-data")
        .join(Path::new(&path).file_name().unwrap());
    for dir in ["refs/rewind/sessions", "logs/refs/rewind/sessions"] {
        let left: Vec<String> = fs::read_dir(store.join(dir))
            .map(|d| d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()))
            .into_iter()
            .flatten()
            .collect();
        assert!(left.is_empty(), "{dir}: {left:?}");
    }
}

/// Issue 18, item 3: a turn left open for more than 7 days was deleted with its session, and
/// `turn end` then said the turn "was never begun". An open turn keeps its session until it is
/// abandoned (`rewind.abandonedTurnAfter`, 30 days by default, `--abandoned-after`); then
/// prune removes the session and names the turn, and every error about it says it was pruned.
#[test]
fn a_turn_open_past_the_retention_stays_until_abandoned_and_errors_say_pruned() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    let clock = Clock::new();
    p.file("a.txt", "one\n");
    // Session "busy": 3 turns, trimmed to 1 (while no other turn is open, which would need
    // them). Session "quiet": a turn begun then and never ended.
    for turn in ["1", "2", "3"] {
        begin_at(&p, &clock.at(0), "busy", turn);
        p.file("b.txt", turn);
        end_at(&p, &clock.at(0), "busy", turn);
    }
    let trimmed = prune_at(&p, Some(&clock.at(MINUTE)), &["--max-turns", "1"]);
    begin_at(&p, &clock.at(2 * MINUTE), "quiet", "open");
    p.file("a.txt", "two\n");
    assert_eq!(trimmed.turns_removed, 2, "{:?}", trimmed.json);
    let undo_trimmed = rw_at(
        &p,
        Some(&clock.at(3 * MINUTE)),
        &["--json", "undo", "--session", "busy", "--turn", "1"],
    );
    let message = expect_error(&undo_trimmed, "pruned")["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.contains("maxTurnsPerSession") && message.contains("\"1\""),
        "{undo_trimmed}"
    );

    // Past the retention, the open turn keeps its session (and so does a 20-day limit at
    // day 19); the other session, idle, goes.
    let day8 = prune_at(&p, Some(&clock.at(8 * DAY)), &[]);
    assert_eq!(day8.sessions_removed, vec!["busy"], "{:?}", day8.json);
    let day19 = prune_at(&p, Some(&clock.at(19 * DAY)), &["--abandoned-after", "20d"]);
    assert_eq!(
        day19.sessions_removed,
        Vec::<String>::new(),
        "{:?}",
        day19.json
    );
    let open = turns_at(&p, &clock.at(19 * DAY));
    assert_eq!(open.len(), 1, "{open:?}");
    assert_eq!((open[0].turn.as_str(), &open[0].after), ("open", &None));

    // At day 31 (the default limit), it is abandoned: removed, and said so.
    let run = rw_at(&p, Some(&clock.at(31 * DAY)), &["--json", "prune"]);
    run.assert_success();
    let day31 = Pruned::parse(&one_json(&run));
    assert_eq!(day31.sessions_removed, vec!["quiet"], "{:?}", day31.json);
    let abandoned = &day31.json["abandoned_turns"];
    assert_eq!(abandoned[0]["session"], "quiet", "{abandoned}");
    assert_eq!(abandoned[0]["turn"], "open", "{abandoned}");
    assert!(
        run.stderr.contains("abandonedTurnAfter") && !run.stderr.contains("expired"),
        "{run}"
    );
    for args in [
        &[
            "--json",
            "turn",
            "end",
            "--session",
            "quiet",
            "--turn",
            "open",
        ][..],
        &["--json", "undo", "--session", "quiet"],
        &["--json", "show", "open", "--session", "quiet"],
    ] {
        let failed = rw_at(&p, Some(&clock.at(32 * DAY)), args);
        let message = expect_error(&failed, "pruned")["error"]["message"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(message.contains("abandonedTurnAfter"), "{failed}");
    }
    // A session that never was is still "not_found".
    let never = rw_at(&p, None, &["--json", "undo", "--session", "never"]);
    expect_error(&never, "not_found");
    p.assert_fsck_clean();
}

/// Every file below `dir` (none when it does not exist).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        match entry.file_type().unwrap().is_dir() {
            true => files.extend(files_under(&entry.path())),
            false => files.push(entry.path()),
        }
    }
    files
}

/// Issue 18, item 5: trimming a session to its turn limit rewrote its whole chain at every
/// prune, and the old chains stayed reachable through the rewritten refs' reflogs (and as young
/// loose objects) for 7 days: 2,341 commits in a store with 312 live. Now the rewritten refs'
/// reflogs restart, and the old copies go at the same prune.
#[test]
fn trimming_keeps_no_old_copy_of_the_session_chain() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    let clock = Clock::new();
    let commits = |p: &TestProject| {
        let listing = p.store_git(["cat-file", "--batch-all-objects", "--batch-check"]);
        listing.lines().filter(|l| l.contains(" commit ")).count()
    };
    for round in 0..6i64 {
        // Two hours on: the objects of the rounds before are over an hour old.
        let now = clock.at(2 * HOUR + round * MINUTE);
        let turn = round.to_string();
        begin_at(&p, &now, "s", &turn);
        p.file("f.txt", format!("round {round}\n"));
        end_at(&p, &now, "s", &turn);
        prune_at(&p, Some(&now), &["--max-turns", "3"]);
        let live = p.store_git(["rev-list", "--all"]).lines().count();
        let with_reflogs = p
            .store_git(["rev-list", "--all", "--reflog"])
            .lines()
            .count();
        assert_eq!(
            with_reflogs, live,
            "round {round}: reflogs reach commits no ref does"
        );
        assert_eq!(commits(&p), live, "round {round}: unreachable commits stay");
        p.assert_fsck_clean();
    }
    assert_eq!(turn_ids_of(&p, "s"), ["3", "4", "5"]);
}

/// Issue 18, item 6: every snapshot cost a loose ref and a reflog file (41 MB of `refs/` and
/// `logs/` for a 4 MB project after a busy 150 s). Snapshot records are now written without a
/// reflog and prune packs them into `packed-refs`, where git still sees them.
#[test]
fn snapshot_records_go_to_packed_refs_without_reflogs() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    let clock = Clock::new();
    let mut trees = BTreeSet::new();
    for i in 0..20 {
        p.file("f.txt", format!("version {i}\n"));
        trees.insert(track_at(&p, &clock.at(MINUTE)));
    }
    let store = p.store();
    let records_dir = store.join("refs/rewind/snapshots");
    assert_eq!(
        files_under(&store.join("logs/refs/rewind/snapshots")),
        Vec::<PathBuf>::new()
    );
    assert_eq!(
        files_under(&records_dir).len(),
        20,
        "track writes a loose ref"
    );

    prune_at(&p, Some(&clock.at(2 * MINUTE)), &[]);
    assert!(!records_dir.exists(), "all packed, no empty directory left");
    let packed = fs::read_to_string(store.join("packed-refs")).unwrap();
    assert_eq!(
        packed.matches("refs/rewind/snapshots/").count(),
        20,
        "{packed}"
    );
    let records = snapshot_records(&sb, &store);
    assert_eq!(records.keys().cloned().collect::<BTreeSet<_>>(), trees);
    p.assert_fsck_clean();
    // Retaking one after an hour refreshes it (a loose ref again, over the packed one); the
    // oldest can still be restored.
    p.file("f.txt", "version 19\n");
    track_at(&p, &clock.at(2 * HOUR));
    let oldest = trees.iter().next().unwrap().clone();
    restore_at(&p, &clock.at(2 * HOUR), &oldest);

    // Past the retention, the records go from packed-refs in one rewrite.
    let expired = prune_at(&p, Some(&clock.at(9 * DAY)), &[]);
    assert!(expired.snapshots_removed >= 20, "{:?}", expired.json);
    assert_eq!(snapshot_records(&sb, &store), BTreeMap::new());
    p.assert_fsck_clean();
}

/// Found by the issue-18 hostile pass: turns 1-3 undone, then turns 4 and 5, then a prune with
/// a limit of 3 removed turns 4 and 5 (the agent's latest work: `undo --last` then found nothing)
/// and kept the rolled-back ones, which it may not remove. Rolled-back and open turns no longer
/// count against the limit.
#[test]
fn the_turn_limit_never_drops_the_newest_turns_behind_rolled_back_ones() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    for t in 1..=5u32 {
        let turn = t.to_string();
        at(
            &p,
            &hour(t),
            &["turn", "begin", "--session", "s", "--turn", &turn],
        );
        p.file(format!("f{t}.txt"), format!("turn {t}\n"));
        at(
            &p,
            &hour(t),
            &["turn", "end", "--session", "s", "--turn", &turn],
        );
        if t == 3 {
            at(&p, &hour(t), &["undo", "--session", "s", "--turn", "1"]);
        }
    }
    let outcome = one_json(&at(&p, &hour(7), &["--json", "prune", "--max-turns", "3"]));
    assert_eq!(outcome["turns_removed"], 0, "{outcome}");
    assert_eq!(turn_ids(&p, &hour(7)), ["1", "2", "3", "4", "5"]);
    at(&p, &hour(8), &["undo", "--session", "s", "--last"]);
    assert!(
        !p.join("f5.txt").exists(),
        "the newest turn can still be undone"
    );
    p.assert_fsck_clean();
}

/// Found by the issue-18 hostile pass: an undo `--force`d over a user's edit keeps its bytes in
/// the undo point, which the session's undo commit names and `redo` restores from. Prune
/// expired that undo point with the undo chain's other old points while the session lived on,
/// and `redo` then failed ("object not found") with the user's bytes gone. Undo points a
/// session's chain names now live as long as the session.
#[test]
fn a_kept_session_keeps_the_undo_point_its_redo_needs() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    let day = |d: u32| format!("2099-12-{:02}T00:00:00Z", d + 1);
    p.file("a.txt", "1\n");
    at(
        &p,
        &day(0),
        &["turn", "begin", "--session", "s", "--turn", "1"],
    );
    p.file("f", "agent\n");
    at(
        &p,
        &day(0),
        &["turn", "end", "--session", "s", "--turn", "1"],
    );
    p.file("f", "the user's own edit\n");
    at(
        &p,
        &day(0),
        &["undo", "--session", "s", "--last", "--force"],
    );
    assert!(!p.join("f").exists());
    at(
        &p,
        &day(5),
        &["turn", "begin", "--session", "s", "--turn", "2"],
    );
    p.file("g", "g\n");
    at(
        &p,
        &day(5),
        &["turn", "end", "--session", "s", "--turn", "2"],
    );
    at(&p, &day(8), &["prune"]);
    p.assert_fsck_clean();
    at(&p, &day(8), &["redo", "--session", "s", "--force"]);
    assert_eq!(p.read("f"), b"the user's own edit\n");
}

/// Found by the issue-18 hostile pass: a checkpoint `track` returned 20 minutes before the prune
/// went for the size quota, because its record (refreshed at most hourly) was 70 minutes old;
/// `restore` of it then failed. A record younger than two hours is spared.
#[test]
fn the_quota_spares_a_checkpoint_whose_record_was_not_refreshed_yet() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    let clock = Clock::new();
    let start = 2 * HOUR; // (objects are over an hour old by the real clock at the prune)
    let mut rng = XorShift::seeded(9);
    p.file("a.txt", "1\n");
    p.file(
        "big.bin",
        (0..1 << 20)
            .map(|_| rng.next_u64() as u8)
            .collect::<Vec<u8>>(),
    );
    track_at(&p, &clock.at(start));
    let checkpoint = track_at(&p, &clock.at(start + 50 * MINUTE));
    p.remove("big.bin");
    p.file("a.txt", "2\n");
    track_at(&p, &clock.at(start + 55 * MINUTE));
    let now = clock.at(start + 70 * MINUTE);
    let run = rw_at(
        &p,
        Some(&now),
        &[
            "--json",
            "prune",
            "--max-size",
            "500k",
            "--target-size",
            "100k",
        ],
    );
    run.assert_success();
    assert!(
        snapshot_records(&sb, &p.store()).contains_key(&checkpoint),
        "{run}"
    );
    restore_at(&p, &now, &checkpoint);
    assert_eq!(p.read("big.bin").len(), 1 << 20);
}

/// Found by the issue-18 hostile pass: with 20,000 small files and older checkpoints of a 1 MB
/// file, `prune --max-size 4M --target-size 1000K` removed every checkpoint and was still over
/// the target: its estimate of what stays left out the pack index (564 KB here). The estimate
/// now counts the index and the directories, and loose objects by their disk blocks.
#[test]
fn the_quota_estimate_counts_the_pack_index() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    let clock = Clock::new();
    for d in 0..100 {
        for f in 0..200 {
            p.file(format!("d{d:03}/file_{f:05}.txt"), format!("{d}-{f}\n"));
        }
    }
    let mut rng = XorShift::seeded(2);
    for i in 0..3 {
        p.file(
            "big.bin",
            (0..1_000_000)
                .map(|_| rng.next_u64() as u8)
                .collect::<Vec<u8>>(),
        );
        track_at(&p, &clock.at(3 * HOUR + i * MINUTE));
    }
    p.remove("big.bin");
    let now = clock.at(7 * HOUR);
    track_at(&p, &now);
    let before = snapshot_records(&sb, &p.store());
    let run = rw_at(
        &p,
        Some(&now),
        &[
            "--json",
            "prune",
            "--max-size",
            "4M",
            "--target-size",
            "1000K",
        ],
    );
    run.assert_success();
    let outcome = one_json(&run);
    assert_eq!(outcome["snapshots_removed_for_size"], 0, "{outcome}");
    assert_eq!(outcome["still_over_quota"], true, "{outcome}");
    assert_eq!(snapshot_records(&sb, &p.store()), before);
}

/// Found by the simulated weeks (issue 18): once undo points began to expire, every hourly prune
/// rewrote the whole rest of the undo chain (no commit of it survived two prunes). The chain is
/// now cut only once the expired points are an eighth as many as the kept ones: a point lives
/// at most an eighth of the chain longer than the retention.
#[test]
fn the_undo_chain_is_not_rewritten_at_every_prune() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    let clock = Clock::new();
    p.file("f.txt", "0\n");
    let base = track_at(&p, &clock.at(0));
    let (step, steps) = (4 * HOUR, 9 * 6);
    let mut rewrites = 0;
    for i in 1..=steps {
        let now = clock.at(2 * HOUR + i * step);
        p.file("f.txt", format!("{i}\n"));
        restore_at(&p, &now, &base); // an undo point
        track_at(&p, &now); // (base again: its record stays fresh)
        let head = p.store_git(["rev-parse", "refs/rewind/undo"]);
        prune_at(&p, Some(&now), &[]);
        rewrites += usize::from(p.store_git(["rev-parse", "refs/rewind/undo"]) != head);
    }
    let chain = undo_chain(&sb, &p.store());
    let oldest = chain.last().unwrap().2;
    let newest = chain[0].2;
    // 42 points within the retention at the end; up to 5 more (under an eighth) may wait.
    assert!(chain.len() <= 42 + 6, "{} points", chain.len());
    assert!(
        newest - oldest < 7 * DAY + 6 * step,
        "the oldest point is too old"
    );
    assert!(
        rewrites <= 4,
        "the chain was rewritten at {rewrites} prunes"
    );
    p.assert_fsck_clean();
}
