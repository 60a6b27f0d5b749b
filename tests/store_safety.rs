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
