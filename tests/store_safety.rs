//! Store safety: turn order that does not trust the clock, retention that spares open turns,
//! stores that stock git has repacked, unreadable stores, and the privacy of the store.
//! git (on the store) is the oracle for what the store holds.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{finish, one_json, spawn_piped, Run, Sandbox, TestProject, Value};

/// `rewind ARGS` in project `p` with `REWIND_NOW=now` (unchecked).
fn run_at(p: &TestProject, now: &str, args: &[&str]) -> Run {
    let mut command: Command = p.rewind_command(args);
    command.env("REWIND_NOW", now);
    let run = finish(spawn_piped(&mut command), Duration::from_secs(60), "rewind");
    common::assert_no_panic(&run);
    run
}

/// `rewind ARGS` in project `p` with `REWIND_NOW=now`; asserts success.
fn at(p: &TestProject, now: &str, args: &[&str]) -> Run {
    let run = run_at(p, now, args);
    run.assert_success();
    run
}

/// `2026-12-01T<hh:mm>:00Z`.
fn time(hh_mm: &str) -> String {
    format!("2026-12-01T{hh_mm}:00Z")
}

/// One turn of session `s` at `now`: begin, write `file`, end.
fn turn(p: &TestProject, now: &str, session: &str, turn: &str, file: &str) {
    at(
        p,
        now,
        &["turn", "begin", "--session", session, "--turn", turn],
    );
    p.file(file, format!("written in turn {turn}\n"));
    at(
        p,
        now,
        &["turn", "end", "--session", session, "--turn", turn],
    );
}

/// `turns --json` (of `session`, or all): (session, turn, rolled_back) in listed order.
fn turns(p: &TestProject, now: &str, session: Option<&str>) -> Vec<(String, String, bool)> {
    let mut args = vec!["--json", "turns"];
    if let Some(session) = session {
        args.extend(["--session", session]);
    }
    let listed: Value = one_json(&at(p, now, &args));
    listed
        .as_array()
        .unwrap_or_else(|| panic!("`turns --json` prints an array: {listed}"))
        .iter()
        .map(|t| {
            (
                t["session"].as_str().unwrap().to_string(),
                t["turn"].as_str().unwrap().to_string(),
                t["rolled_back"].as_bool().unwrap(),
            )
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Turn order
// ---------------------------------------------------------------------------

/// Issue 12 item 7: turns were ordered by their timestamps, so after the clock stepped back
/// `undo --session s --turn 2` also marked turn 1 rolled back without undoing it.
#[test]
fn turns_follow_the_session_chain_when_the_clock_steps_back() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("base.txt", "base\n");
    turn(&p, &time("10:00"), "s", "1", "f1.txt");
    turn(&p, &time("09:00"), "s", "2", "f2.txt"); // the clock stepped back an hour
    turn(&p, &time("09:30"), "s", "3", "f3.txt");
    // Another session in between, to check that listing all sessions keeps each one's order.
    turn(&p, &time("09:45"), "other", "x", "x.txt");
    let now = time("11:00");
    let order: Vec<String> = turns(&p, &now, Some("s"))
        .into_iter()
        .map(|(_, t, _)| t)
        .collect();
    assert_eq!(order, ["1", "2", "3"], "the chain's order, not the clock's");
    let all: Vec<(String, String)> = turns(&p, &now, None)
        .into_iter()
        .map(|(s, t, _)| (s, t))
        .filter(|(s, _)| s == "s")
        .collect();
    let all: Vec<&str> = all.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(
        all,
        ["1", "2", "3"],
        "listing every session keeps the chain order"
    );

    at(&p, &now, &["undo", "--session", "s", "--turn", "2"]);
    assert!(p.join("f1.txt").exists(), "turn 1 is not undone");
    assert!(!p.join("f2.txt").exists() && !p.join("f3.txt").exists());
    let states: Vec<(String, bool)> = turns(&p, &now, Some("s"))
        .into_iter()
        .map(|(_, t, rolled_back)| (t, rolled_back))
        .collect();
    assert_eq!(
        states,
        [
            ("1".to_string(), false),
            ("2".to_string(), true),
            ("3".to_string(), true)
        ],
        "only the undone turns are marked rolled back"
    );
    p.assert_fsck_clean();
}

// ---------------------------------------------------------------------------
// A store that stock git has repacked
// ---------------------------------------------------------------------------

/// `git --git-dir <store> ARGS` in the sandbox; asserts success.
fn git_store(sb: &Sandbox, store: &std::path::Path, args: &[&str]) -> String {
    sb.git_in(store, args)
}

/// `doctor --json` at `now`: (exit code, the report: the first JSON line; an unhealthy store
/// adds an error line).
fn doctor(p: &TestProject, now: &str) -> (Option<i32>, Value) {
    let run = run_at(p, now, &["--json", "doctor"]);
    let first = run.stdout.lines().next().unwrap_or_default();
    let report = serde_json::from_str(first).unwrap_or_else(|e| panic!("{e}: {run}"));
    (run.code(), report)
}

/// Issue 12 item 10: after `git gc` and `git multi-pack-index write` in the store, a prune that
/// repacked deleted the packs the multi-pack-index named and left the index: every snapshot
/// became "no snapshot", while `doctor` (which asked rewind's own pack list) said every
/// object was present.
#[test]
fn prune_after_git_repack_midx_bitmaps_and_commit_graph_keeps_every_snapshot_readable() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    // An old snapshot whose record expires (so its packed objects make prune repack)...
    p.file("old.txt", "only in the old snapshot\n");
    at(&p, &time("00:00").replace("12-01", "11-20"), &["track"]);
    p.remove("old.txt");
    // ...and three live ones.
    let mut snapshots = Vec::new();
    for (i, when) in ["01:00", "02:00", "03:00"].into_iter().enumerate() {
        p.file("a.txt", format!("version {i}\n"));
        p.file(format!("f{i}.txt"), format!("file {i}\n"));
        let tree = at(&p, &time(when), &["track"]).stdout.trim().to_string();
        snapshots.push(tree);
        if i == 1 {
            at(
                &p,
                &time(when),
                &["turn", "begin", "--session", "s", "--turn", "1"],
            );
        }
    }
    at(
        &p,
        &time("03:00"),
        &["turn", "end", "--session", "s", "--turn", "1"],
    );
    let store = p.store();
    // Everything stock git writes beside packs.
    git_store(&sb, &store, &["gc", "-q"]);
    git_store(
        &sb,
        &store,
        &["repack", "-a", "-d", "-q", "--write-bitmap-index"],
    );
    p.file("late.txt", "written after the repack\n");
    snapshots.push(at(&p, &time("04:00"), &["track"]).stdout.trim().to_string());
    git_store(&sb, &store, &["repack", "-d", "-q"]); // a second pack
    git_store(&sb, &store, &["multi-pack-index", "write", "--bitmap"]);
    git_store(&sb, &store, &["commit-graph", "write", "--reachable"]);
    git_store(&sb, &store, &["update-server-info"]);
    git_store(&sb, &store, &["pack-refs", "--all"]);
    assert!(store.join("objects/pack/multi-pack-index").is_file());

    let later = time("12:00");
    let pruned = one_json(&at(&p, &later, &["--json", "prune", "--retention", "3d"]));
    assert_eq!(pruned["snapshots_removed"], 1, "{pruned}");
    assert!(pruned["objects_removed"].as_u64().unwrap() > 0, "{pruned}");

    // Every live snapshot reads back: diff between each pair, and a restore of each.
    for pair in snapshots.windows(2) {
        at(&p, &later, &["diff", &pair[0], &pair[1]]);
    }
    for (i, tree) in snapshots.iter().enumerate() {
        at(&p, &later, &["restore", tree]);
        let version = i.min(2);
        assert_eq!(p.read("a.txt"), format!("version {version}\n").into_bytes());
    }
    let (code, report) = doctor(&p, &later);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["missing"], serde_json::json!([]), "{report}");
    common::assert_fsck_clean(&sb, &store);
    // git's side files name only packs that exist.
    let verify = sb.git_in_run(&store, ["multi-pack-index", "verify"]);
    assert!(
        !store.join("objects/pack/multi-pack-index").exists() || verify.status.success(),
        "{verify}"
    );
    let graph = sb.git_in_run(&store, ["commit-graph", "verify"]);
    assert!(graph.status.success(), "{graph}");
    let packs = std::fs::read_to_string(store.join("objects/info/packs")).unwrap_or_default();
    for line in packs.lines().filter_map(|l| l.strip_prefix("P ")) {
        assert!(
            store.join("objects/pack").join(line).is_file(),
            "objects/info/packs names a deleted pack: {packs}"
        );
    }
}

/// Issue 12 item 10, the other half: `doctor` asked rewind's own pack list whether objects were
/// there, while restore reads through gix's object database, so with a multi-pack-index that
/// names a pack no longer there (as stale ones were left) doctor said "every object the records
/// reach is present" and every restore said "no snapshot".
#[test]
fn doctor_reads_objects_as_restore_does_under_a_stale_multi_pack_index() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    let mut snapshots = Vec::new();
    for (i, when) in ["01:00", "02:00", "03:00"].into_iter().enumerate() {
        p.file("a.txt", format!("version {i}\n"));
        snapshots.push(at(&p, &time(when), &["track"]).stdout.trim().to_string());
    }
    let store = p.store();
    git_store(&sb, &store, &["repack", "-a", "-d", "-q"]);
    git_store(&sb, &store, &["multi-pack-index", "write"]);
    let midx = std::fs::read(store.join("objects/pack/multi-pack-index")).unwrap();
    // An unreachable packed object, so that prune repacks (and deletes the indexed pack).
    let junk = sb.root.join("junk");
    std::fs::write(&junk, "an unreachable object, packed\n").unwrap();
    let id = git_store(&sb, &store, &["hash-object", "-w", junk.to_str().unwrap()]);
    let mut pack = sb.git_command(None);
    pack.arg("--git-dir")
        .arg(&store)
        .args(["pack-objects", "-q"]);
    pack.arg(store.join("objects/pack/pack"));
    common::run_with_stdin(&mut pack, id.as_bytes()).assert_success();
    git_store(&sb, &store, &["prune-packed"]);
    let now = time("05:00");
    let pruned = one_json(&at(&p, &now, &["--json", "prune"]));
    assert_eq!(pruned["objects_removed"], 1, "a repack: {pruned}");
    // Someone puts the old multi-pack-index back: it names a pack that is gone.
    std::fs::write(store.join("objects/pack/multi-pack-index"), midx).unwrap();
    let unreadable: Vec<&String> = snapshots
        .iter()
        .filter(|tree| !run_at(&p, &now, &["diff", tree]).status.success())
        .collect();
    let (code, report) = doctor(&p, &now);
    if unreadable.is_empty() {
        assert_eq!(
            code,
            Some(0),
            "every snapshot reads, so doctor must agree: {report}"
        );
    } else {
        assert_eq!(
            code,
            Some(1),
            "snapshots {unreadable:?} cannot be read; doctor must say so: {report}"
        );
        assert_ne!(report["missing"], serde_json::json!([]), "{report}");
    }
}
