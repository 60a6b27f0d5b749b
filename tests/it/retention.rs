//! Retention limits beyond age: the per-session turn count and the size quota.
//! git (on the store) is the oracle for what is still there.

use crate::common;

use std::process::Command;
use std::time::Duration;

use crate::common::{finish, one_json, spawn_piped, Run, Sandbox, TestProject, Value};

/// `rewind ARGS` in project `p` with `REWIND_NOW=now`; asserts success.
fn at(p: &TestProject, now: &str, args: &[&str]) -> Run {
    let mut command: Command = p.rewind_command(args);
    command.env("REWIND_NOW", now);
    let run = finish(spawn_piped(&mut command), Duration::from_secs(60), "rewind");
    run.assert_success();
    run
}

fn turn_ids(p: &TestProject, now: &str) -> Vec<String> {
    let turns = one_json(&at(p, now, &["--json", "turns", "--session", "s"]));
    turns
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["turn"].as_str().unwrap().to_string())
        .collect()
}

fn has_object(p: &TestProject, id: &str) -> bool {
    Command::new("git")
        .arg("--git-dir")
        .arg(p.store())
        .args(["cat-file", "-e", id])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .status()
        .unwrap()
        .success()
}

fn hour(h: u32) -> String {
    format!("2026-12-01T{h:02}:00:00Z")
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
    // Turn 5 undone: a rolled-back turn waits for its age, whatever the count limit.
    at(&p, &hour(6), &["undo", "--session", "s", "--turn", "5"]);
    let outcome = one_json(&at(&p, &hour(7), &["--json", "prune", "--max-turns", "2"]));
    assert_eq!(outcome["turns_removed"], 3, "{outcome}");
    assert_eq!(turn_ids(&p, &hour(7)), ["4", "5"]);
    // The chain holds only the kept turns (a begin and an end commit each), and the undo's
    // commit (the session's last word on what it undid).
    let log = p.store_git(["log", "--format=%s", "refs/rewind/sessions/s/head"]);
    assert_eq!(log.lines().count(), 5, "{log}");
    assert!(log.lines().next().unwrap().contains("undo"), "{log}");
    for gone in ["1", "2", "3"] {
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
        "turn 3's file is not the kept turns' to undo"
    );

    // The config key sets the limit too.
    p.store_git(["config", "rewind.maxTurnsPerSession", "1"]);
    let outcome = one_json(&at(&p, &hour(9), &["--json", "prune"]));
    assert_eq!(
        outcome["turns_removed"], 0,
        "both remaining turns are rolled back: {outcome}"
    );
    p.assert_fsck_clean();
}

#[test]
fn over_the_size_quota_the_oldest_snapshots_go_but_not_the_current_one() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    // Snapshot A: 2 MB of incompressible files (the first snapshot, written as a pack).
    let mut rng = common::XorShift::from_time();
    for i in 0..100 {
        let bytes: Vec<u8> = (0..20_000).map(|_| rng.next_u64() as u8).collect();
        p.file(format!("big/{i}.bin"), bytes);
    }
    let a = at(&p, &hour(1), &["track"]).stdout.trim().to_string();
    let big_blob = p.store_git(["rev-parse", &format!("{a}:big/0.bin")]);
    // Snapshot B, an hour later: small.
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
    assert!(!has_object(&p, big_blob.trim()), "A's blobs are gone");
    assert!(!has_object(&p, &a), "A's tree is gone");
    assert!(has_object(&p, &b), "B (the current snapshot) stays");
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
    assert!(has_object(&p, blob), "the next track wrote the blob again");
    p.assert_fsck_clean();
}

/// Writes `n` files of 20 KB of random bytes under `dir/` (incompressible).
fn random_files(p: &TestProject, dir: &str, n: usize) {
    let mut rng = common::XorShift::from_time();
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

    // Over the quota, then with a turn limit of 0, then past the retention: the open turn
    // stays, and so does all its before snapshot.
    let quota = at(
        &p,
        &hour(5),
        &[
            "--json",
            "prune",
            "--max-size",
            "1M",
            "--target-size",
            "100k",
        ],
    );
    let outcome = one_json(&quota);
    let later = "2026-12-20T00:00:00Z";
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
                has_object(&p, id.trim()),
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
    p.file("again.txt", "another snapshot to drop\n");
    at(&p, later, &["track"]);
    p.file("again.txt", "and the current one\n");
    at(&p, later, &["track"]);
    let text = at(
        &p,
        later,
        &["prune", "--max-size", "1", "--target-size", "1"],
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
