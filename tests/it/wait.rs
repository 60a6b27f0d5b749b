//! Waiting for the store's lock (issue 17, "two agents, one project"): while another process
//! holds the lock, commands that only read refs and objects answer without it, commands that
//! change the store wait at most `--wait` and then fail with `busy`, naming the holder, and
//! leave no trace. The lock is held by `flock(1)` in a child process ([`LockHolder`]).
//!
//! Oracles: git on the store (`git for-each-ref`, `git cat-file --batch-all-objects`) and the
//! store's files byte for byte.

use crate::common::*;
use std::time::{Duration, Instant};

/// A project with one ended turn (`s`/`1`) and two snapshots; returns them.
fn project_with_a_turn(sb: &Sandbox) -> (TestProject<'_>, String, String) {
    let p = sb.project("proj");
    p.file("a.txt", "one\n");
    let before = p.track();
    p.rewind(["turn", "begin", "--session", "s", "--turn", "1"])
        .assert_success();
    p.file("a.txt", "one\ntwo\n");
    p.rewind(["turn", "end", "--session", "s", "--turn", "1"])
        .assert_success();
    let after = p.track();
    (p, before, after)
}

/// What a call could have left in the store: its refs, its objects, and every file in it.
fn store_state(p: &TestProject) -> (String, String, Vec<(std::path::PathBuf, FsEntry)>) {
    let refs = p.store_git(["for-each-ref", "--format=%(refname) %(objectname)"]);
    let objects = p.store_git(["cat-file", "--batch-all-objects", "--batch-check"]);
    (refs, objects, fs_snapshot(&p.store()).into_iter().collect())
}

#[test]
fn reads_answer_while_another_process_holds_the_lock() {
    let sb = Sandbox::new();
    let (p, before, after) = project_with_a_turn(&sb);
    let store = p.store();
    let _holder = LockHolder::hold(&store);
    // `--wait 0`: a command that took the lock would fail with `busy` at once.
    let reads: [&[&str]; 7] = [
        &["turns"],
        &["turns", "--session", "s"],
        &["log"],
        &["show", "--session", "s", "1"],
        &["diff", &before, &after],
        &["diff-full", &before, &after],
        &["path"],
    ];
    for args in reads {
        let run = p.rewind([&["--wait", "0"], args].concat());
        assert_no_panic(&run);
        run.assert_success();
    }
    let show = p.rewind(["--wait", "0", "show", "--session", "s", "1"]);
    assert!(show.stdout.contains("+two"), "{show}");
    // doctor reads too, and says who holds the lock.
    let doctor = p.rewind(["--wait", "0", "--json", "doctor"]);
    doctor.assert_success();
    assert_eq!(one_json(&doctor)["locked"], true, "{doctor}");
}

#[test]
fn writes_fail_busy_naming_the_holder_after_their_wait() {
    let sb = Sandbox::new();
    let (p, before, _) = project_with_a_turn(&sb);
    let holder = LockHolder::hold(&p.store());
    let writes: [&[&str]; 6] = [
        &["track"],
        &["turn", "begin", "--session", "s", "--turn", "2"],
        &["turn", "end", "--session", "s", "--turn", "1"],
        &["diff", &before],
        &["restore", &before],
        &["prune"],
    ];
    for args in writes {
        let start = Instant::now();
        let run = p.rewind([&["--json", "--wait", "300ms"], args].concat());
        let took = start.elapsed();
        assert_no_panic(&run);
        run.assert_code(1);
        let error = &one_json(&run)["error"];
        assert_eq!(error["code"], "busy", "{run}");
        let message = error["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("process {} (flock ", holder.pid())),
            "the busy message names the holder's pid and command: {run}"
        );
        assert_eq!(run.stderr.lines().count(), 1, "one line on stderr: {run}");
        assert!(took >= Duration::from_millis(300), "gave up early: {run}");
    }
    // Without --json: exit 1 and the one line on stderr, nothing on stdout.
    let run = p.rewind(["--wait", "0", "track"]);
    run.assert_code(1);
    assert!(run.stdout.is_empty(), "{run}");
    assert!(run.stderr.starts_with("rewind: store ") && run.stderr.contains(" is busy: "));
    assert_eq!(run.stderr.lines().count(), 1, "{run}");
}

#[test]
fn a_write_that_timed_out_leaves_no_trace() {
    let sb = Sandbox::new();
    let (p, _, _) = project_with_a_turn(&sb);
    p.file("a.txt", "changed while the lock is held\n");
    let state = store_state(&p);
    let holder = LockHolder::hold(&p.store());
    for args in [
        &["track"][..],
        &["turn", "begin", "--session", "s", "--turn", "2"],
    ] {
        let run = p.rewind([&["--json", "--wait", "100ms"], args].concat());
        run.assert_code(1);
        assert_eq!(one_json(&run)["error"]["code"], "busy", "{run}");
    }
    drop(holder);
    let (refs, objects, files) = store_state(&p);
    assert_eq!((&refs, &objects), (&state.0, &state.1), "refs or objects");
    let (before, after) = (state.2.into_iter().collect(), files.into_iter().collect());
    assert_same_snapshot(&before, &after, "the store after two busy calls");
    // The holder was killed: its lock went with it, nobody waits for it.
    let run = p.rewind([
        "--wait",
        "0",
        "turn",
        "begin",
        "--session",
        "s",
        "--turn",
        "2",
    ]);
    run.assert_success();
    p.assert_fsck_clean();
}

#[test]
fn a_bad_wait_is_a_usage_error() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    for wait in ["5", "abc", "-1s", "1.5s", "ms", ""] {
        let run = p.rewind([format!("--wait={wait}").as_str(), "turns"]);
        assert_no_panic(&run);
        run.assert_code(2);
        assert!(run.stderr.contains("--wait"), "{run}");
    }
    for wait in ["0", "500ms", "10s", "2m", "1h"] {
        p.rewind(["--wait", wait, "track"]).assert_success();
    }
}

#[test]
fn the_library_waits_at_most_its_lock_wait_and_says_busy() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n");
    p.track();
    let options = rewind::OpenOptions::new(&sb.data_dir).lock_wait(Duration::from_millis(50));
    let store = rewind::Store::open(&p.path, &options).unwrap();
    let holder = LockHolder::hold(store.git_dir());
    let err = store.begin_turn("s", "1").unwrap_err();
    assert_eq!(err.code(), "busy", "{err}");
    assert!(
        matches!(&err, rewind::Error::Busy { waited, .. } if *waited >= Duration::from_millis(50))
    );
    assert!(
        err.to_string()
            .contains(&format!("process {} (flock ", holder.pid())),
        "{err}"
    );
    // Reads go on.
    assert_eq!(store.turns(None).unwrap().len(), 0);
    drop(holder);
    assert_eq!(store.begin_turn("s", "1").unwrap().skipped.len(), 0);
}
