//! Crashes: `kill -9` during `turn end` and `undo`.

use super::*;
use std::fs;
use std::path::PathBuf;
use std::thread;
use std::time::{Duration, Instant};

/// `kill -9` at random moments of `turn end` (8 rounds) and of `undo` (4 rounds) on a
/// 1,500-file project. (track, restore and prune are covered by track.rs, restore.rs and
/// prune.rs.) Afterwards the next command works, fsck is clean, `turn end` never touches the
/// project, and every file an `undo` was writing is its old or its new content.
#[test]
fn kill_9_during_turn_end_and_undo_leaves_a_usable_store() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    let mut rng = XorShift::from_time();
    const N: u64 = 1500;
    let path_of = |i: u64| format!("d{:02}/f{i:04}.txt", i % 30);
    for i in 0..N {
        p.file(path_of(i), filler(300 + (i as usize % 500), i as u8));
    }
    p.track();
    let store = p.store();
    let edit = |rng: &mut XorShift, tag: &str| {
        for _ in 0..250 {
            let i = rng.below(N);
            p.file(
                path_of(i),
                format!(
                    "{tag} {}\n{}",
                    rng.next_u64(),
                    "x".repeat(rng.below(900) as usize)
                ),
            );
        }
        p.file(format!("new/{tag}.txt"), "new\n");
    };
    // How long an uninterrupted `turn end` takes here.
    rwj(&p, &["turn", "begin", "--session=k", "--turn=warmup"]);
    edit(&mut rng, "warmup");
    let t0 = Instant::now();
    rwj(&p, &["turn", "end", "--session=k", "--turn=warmup"]);
    let full = t0.elapsed();
    eprintln!("turn end of 250 changed files: {full:?}");

    let mut killed = 0;
    for round in 0..8u64 {
        let turn = format!("--turn=t{round}");
        rwj(&p, &["turn", "begin", "--session=k", &turn]);
        edit(&mut rng, &format!("t{round}"));
        let before = fs_snapshot(&p.path);
        let mut child =
            spawn_piped(&mut p.rewind_command(["--json", "turn", "end", "--session=k", &turn]));
        let wait = Duration::from_micros(rng.below(full.as_micros() as u64 * 12 / 10 + 1));
        thread::sleep(wait);
        let done = child.try_wait().unwrap().is_some();
        let _ = child.kill();
        let run = finish(child, DEFAULT_DEADLINE, "turn end");
        assert_no_panic(&run);
        if !done && !run.status.success() {
            killed += 1;
        }
        let what = format!("turn end, round {round}, killed after {wait:?}");
        assert_same_snapshot(
            &before,
            &fs_snapshot(&p.path),
            &format!("{what}: the project"),
        );
        assert_fsck_clean(&sb, &store);
        let list = turns_of(&p, "k");
        let rec = list
            .iter()
            .find(|t| t["turn"] == format!("t{round}"))
            .unwrap_or_else(|| panic!("{what}: the begun turn is gone: {list:?}"));
        if rec["ended_at"].is_null() {
            rwj(&p, &["turn", "end", "--session=k", &turn]);
        } else {
            let (code, _) = failure(&p.rewind(["--json", "turn", "end", "--session=k", &turn]));
            assert_eq!(code, "turn_state", "{what}");
        }
        let rec = turns_of(&p, "k")
            .into_iter()
            .find(|t| t["turn"] == format!("t{round}"))
            .unwrap();
        let now = if round % 3 == 0 {
            p.track_matches_git().hash
        } else {
            p.track()
        };
        assert_eq!(rec["after"].as_str(), Some(now.as_str()), "{what}: {rec}");
        assert_tree_complete(&sb, &store, rec["before"].as_str().unwrap());
    }
    eprintln!("turn end killed mid-run {killed} of 8 times");

    // undo, killed: each round its own session with one turn.
    let mut killed = 0;
    let mut problems = Vec::new();
    for round in 0..4u64 {
        let session = format!("--session=u{round}");
        rwj(&p, &["turn", "begin", &session, "--turn=1"]);
        let edited_from = p.track();
        edit(&mut rng, &format!("u{round}"));
        rwj(&p, &["turn", "end", &session, "--turn=1"]);
        let pre = fs_snapshot(&p.path);
        let t0 = Instant::now();
        let mut child = spawn_piped(&mut p.rewind_command(["--json", "undo", &session]));
        let wait = Duration::from_micros(rng.below(full.as_micros() as u64 * 15 / 10 + 1));
        thread::sleep(wait);
        let done = child.try_wait().unwrap().is_some();
        let _ = child.kill();
        let run = finish(child, DEFAULT_DEADLINE, "undo");
        assert_no_panic(&run);
        if !done && !run.status.success() {
            killed += 1;
        }
        let what = format!(
            "undo, round {round}, killed after {wait:?} ({:?})",
            t0.elapsed()
        );
        let mid = fs_snapshot(&p.path);
        assert_fsck_clean(&sb, &store);
        // Finish the job: the re-run must not mistake its own half-done writes for edits by
        // someone else.
        let u = rwj(&p, &["undo", &session]);
        assert_eq!(u["failed"], Value::Array(vec![]), "{what}: {u}");
        assert_eq!(
            u["conflicts"],
            Value::Array(vec![]),
            "{what}: re-running a killed undo: {u}"
        );
        let post = fs_snapshot(&p.path);
        let strays: Vec<PathBuf> = post
            .keys()
            .filter(|k| {
                k.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(".rewind-"))
            })
            .cloned()
            .collect();
        if !strays.is_empty() {
            problems.push(format!(
                "{what}: after the re-run completed, the killed undo's temp files are still in \
                 the project (and the next track records them): {strays:?}"
            ));
            for s in &strays {
                fs::remove_file(p.join(s)).unwrap();
            }
        }
        assert_eq!(
            p.track(),
            edited_from,
            "{what}: undo brings back the turn's before"
        );
        for (path, e) in &mid {
            if e.kind == 'd' || path.as_os_str().is_empty() {
                continue;
            }
            let name = path.file_name().unwrap().to_string_lossy();
            if name.starts_with(".rewind-") {
                continue; // a killed writer's temp file
            }
            let old = pre.get(path).and_then(|x| x.content.as_ref());
            let new = post.get(path).and_then(|x| x.content.as_ref());
            assert!(
                e.content.as_ref() == old || e.content.as_ref() == new,
                "{what}: {} is neither its old nor its new content",
                path.display()
            );
        }
        for path in pre.keys().chain(post.keys()) {
            if !mid.contains_key(path) {
                assert!(
                    !pre.contains_key(path) || !post.contains_key(path),
                    "{what}: {} vanished mid-undo",
                    path.display()
                );
            }
        }
        // back to the state after the turn, for the next round
        let r = rwj(
            &p,
            &[
                "restore",
                turns_of(&p, &format!("u{round}"))[0]["after"]
                    .as_str()
                    .unwrap(),
            ],
        );
        assert_eq!(r["failed"], Value::Array(vec![]), "{r}");
    }
    eprintln!("undo killed mid-run {killed} of 4 times");
    p.track_matches_git();
    p.assert_fsck_clean();
    assert!(
        problems.is_empty(),
        "BUG: a killed undo leaves `.rewind-*` temp files in the project that nothing removes:\n  {}",
        problems.join("\n  ")
    );
}

/// Found by the sixteenth hostile pass: an `undo` or `redo` killed between moving the session's
/// head and setting (or removing) its turns' rolled-back marks left them disagreeing (a redo
/// killed there left the turn "rolled back" with its work on disk: `undo --last` said "no turn
/// left to undo"); an undo killed after its files changed and before its record left the turn
/// "done" with its work gone, and no redo could bring it back. Killed at every rename and
/// unlink, whichever state it leaves, `redo` (if the turn is rolled back) or `undo --last`
/// (if not) takes the turn to the other state and the other command back.
#[test]
fn an_undo_or_redo_killed_anywhere_leaves_the_turn_as_the_disk_says() {
    for op in ["undo", "redo"] {
        for syscall in ["unlink", "unlinkat", "renameat", "renameat2"] {
            for when in 1.. {
                let sb = Sandbox::new();
                let p = sb.project("proj");
                p.file("f", "before\n").file("z", "z\n");
                rwj(&p, &["turn", "begin", "--session=s", "--turn=1"]);
                p.file("f", "agent\n");
                rwj(&p, &["turn", "end", "--session=s", "--turn=1"]);
                if op == "redo" {
                    rwj(&p, &["undo", "--session=s", "--last"]);
                }
                let args = [op, "--session=s"];
                let killed =
                    run_killed(&sb, &p.path, None, &args, (syscall, when), DEFAULT_DEADLINE);
                let what = format!("{op} killed at {syscall} #{when}");
                let rolled_back = || turns_of(&p, "s")[0]["rolled_back"] == true;
                let held = p.read("f");
                assert!(
                    held == b"agent\n" || held == b"before\n",
                    "{what}: f holds {held:?}"
                );
                // Whichever state the kill left: the other command takes the turn to the
                // other state, and back.
                let undo: (&[&str], &[u8], bool) =
                    (&["undo", "--session=s", "--last"], b"before\n", true);
                let redo: (&[&str], &[u8], bool) = (&["redo", "--session=s"], b"agent\n", false);
                let state = format!("{:?}", turns_of(&p, "s"));
                let what = format!("{what} (left {state})");
                let steps = match rolled_back() {
                    true => [redo, undo],
                    false => [undo, redo],
                };
                for (args, holds, rolled) in steps {
                    rwj(&p, args);
                    let after = format!("{what}, then {}", args.join(" "));
                    assert_eq!(p.read("f"), holds, "{after}");
                    assert_eq!(rolled_back(), rolled, "{after}: rolled back");
                }
                if !killed {
                    break;
                }
            }
        }
    }
}

/// Found by the seventeenth hostile pass: an undo stopped after it recorded itself (unfinished)
/// and run again deleted a moved file's new name without writing its old one, and never
/// brought back a file the turn deleted: the rerun read the unfinished record as what the
/// session left. Killed at every rename and unlink, the undo run again finishes the job.
#[test]
fn an_undo_killed_anywhere_and_run_again_finishes_moves_and_deletions() {
    for syscall in ["unlink", "unlinkat", "renameat", "renameat2"] {
        for when in 1.. {
            let sb = Sandbox::new();
            let p = sb.project("proj");
            p.file("a", "a0\n").file("b", "b0\n").file("c", "c0\n");
            rwj(&p, &["turn", "begin", "--session=s", "--turn=1"]);
            p.file("a", "a1\n");
            std::fs::rename(p.join("b"), p.join("b-moved")).unwrap();
            std::fs::remove_file(p.join("c")).unwrap();
            rwj(&p, &["turn", "end", "--session=s", "--turn=1"]);
            let args = ["undo", "--session=s", "--turn=1"];
            let killed = run_killed(&sb, &p.path, None, &args, (syscall, when), DEFAULT_DEADLINE);
            let what = format!("undo killed at {syscall} #{when}, then run again");
            let again = rwj(&p, &args);
            assert_eq!(again["conflicts"], serde_json::json!([]), "{what}: {again}");
            assert_eq!(p.read("a"), b"a0\n", "{what}: {again}");
            assert_eq!(p.read("b"), b"b0\n", "{what}: {again}");
            assert_eq!(p.read("c"), b"c0\n", "{what}: {again}");
            assert!(!p.join("b-moved").exists(), "{what}: {again}");
            if !killed {
                break;
            }
        }
    }
}

/// r89 (1): the undo of an open turn killed after its writes and run again: `turns` then
/// listed the turn rolled back with no files (the run again recorded the rollback anew, at a
/// point where its work was gone). The turn ended at the first undo that rolled it back.
#[test]
fn an_undo_of_an_open_turn_killed_and_run_again_keeps_the_turns_files() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a", "base\n").file("b", "base\n");
    rwj(&p, &["turn", "begin", "--session=s", "--turn=1"]);
    p.file("a", "s1\n").file("b", "s1\n");
    let args = ["undo", "--session=s", "--last"];
    assert!(run_killed(
        &sb,
        &p.path,
        None,
        &args,
        ("unlink", 9),
        DEFAULT_DEADLINE
    ));
    let files = |p: &TestProject| turns_of(p, "s")[0]["changed"].as_array().unwrap().len();
    assert_eq!(files(&p), 2);
    rwj(&p, &args);
    assert_eq!(files(&p), 2);
    assert_eq!(
        (p.read("a"), p.read("b")),
        (b"base\n".to_vec(), b"base\n".to_vec())
    );
}

/// r88 (2): the redo of an undo that rolled an open turn back, killed after it wrote every
/// file, then run again: that run wrote nothing, so it gave the turn the project as it found
/// it for "before", and the turn's undo left its work (files written, made and deleted before
/// the undo) in place. What the turn made its own and still holds what it held then is its.
#[test]
fn a_redo_killed_after_its_writes_and_run_again_gives_the_turn_its_work_back() {
    let sb = Sandbox::new();
    let p = turn_2_open_after_turn_1(&sb);
    rwj(&p, &["undo", "--session=s", "--turn=1"]);
    let killed = run_killed(
        &sb,
        &p.path,
        None,
        &["redo", "--session=s"],
        ("unlink", 4),
        DEFAULT_DEADLINE,
    );
    assert!(killed, "the redo was not killed at its fourth unlink");
    rwj(&p, &["redo", "--session=s"]);
    end_turn_2_and_undo_it(&p);
}

/// r88 (3): `undo --turn 1` of turns 1 and 2 (2 open) killed before it wrote anything and run
/// again, then redone twice (the second redo takes the stopped run, which found nothing left
/// to write): the turn given back listed none of its work, and its undo left it in place.
#[test]
fn an_undo_killed_before_its_writes_run_again_and_redone_twice_gives_the_turn_its_work_back() {
    let sb = Sandbox::new();
    let p = turn_2_open_after_turn_1(&sb);
    let undo = ["undo", "--session=s", "--turn=1"];
    killed_before_it_wrote(&sb, &p, &undo, ("b", b"b2\n"));
    rwj(&p, &undo);
    assert_eq!(p.read("a"), b"a0\n");
    rwj(&p, &["redo", "--session=s"]);
    rwj(&p, &["redo", "--session=s"]);
    end_turn_2_and_undo_it(&p);
}

/// r90 (3): an open turn rolled back, the user edits `a`, and the redo is killed after it
/// swapped `b` back and before its record; run again, it leaves `a` alone and, having written
/// nothing itself, recorded nothing: the turn stayed rolled back with `b1` back on disk (`turn
/// end` refused it, `undo --last` found no turn). What the stopped run wrote is this redo's.
#[test]
fn a_redo_killed_after_its_writes_and_run_again_beside_a_users_edit_gives_the_turn_back() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a", "a0\n").file("b", "b0\n");
    rwj(&p, &["turn", "begin", "--session=s", "--turn=1"]);
    p.file("a", "a1\n").file("b", "b1\n");
    rwj(&p, &["undo", "--session=s", "--last"]);
    p.file("a", "user\n");
    let redo = ["redo", "--session=s"];
    let killed = run_killed(&sb, &p.path, None, &redo, ("unlink", 5), DEFAULT_DEADLINE);
    assert!(killed, "the redo was not killed at its fifth unlink");
    assert_eq!(
        p.read("b"),
        b"b1\n",
        "the kill came before the redo's write"
    );
    let again = rwj(&p, &redo);
    assert_eq!(again["conflicts"], serde_json::json!(["a"]), "{again}");
    let ended = rwj(&p, &["turn", "end", "--session=s", "--turn=1"]);
    assert_eq!(ended["files"][0]["file"], "b", "{ended}");
    rwj(&p, &["undo", "--session=s", "--last"]);
    assert_eq!(p.read("b"), b"b0\n");
    assert_eq!(p.read("a"), b"user\n");
}

/// r90 (2): an open turn rolled back, given back by a redo, then more of its agent's work
/// (`c` made, `b` edited), then `undo --last` killed anywhere from its record on and run
/// again: the rerun left `b` and `c` alone as someone else's (the turn's time was read as
/// ending at the redo, not where the stopped undo found the project), and the turn lost them.
#[test]
fn an_undo_of_a_reopened_turn_killed_anywhere_and_run_again_takes_the_turns_later_work() {
    for syscall in ["unlink", "renameat2"] {
        for when in 1.. {
            let sb = Sandbox::new();
            let p = sb.project("proj");
            p.file("a", "a0\n").file("b", "b0\n");
            rwj(&p, &["turn", "begin", "--session=s", "--turn=1"]);
            p.file("a", "a1\n");
            rwj(&p, &["undo", "--session=s", "--last"]);
            rwj(&p, &["redo", "--session=s"]);
            p.file("c", "c1\n").file("b", "b1\n");
            let undo = ["undo", "--session=s", "--last"];
            let killed = run_killed(&sb, &p.path, None, &undo, (syscall, when), DEFAULT_DEADLINE);
            let what = format!("undo killed at {syscall} #{when}, then run again");
            let again = if p.read("a") == b"a1\n" || p.path.join("c").exists() {
                rwj(&p, &undo)
            } else {
                serde_json::json!({"conflicts": []})
            };
            assert_eq!(again["conflicts"], serde_json::json!([]), "{what}: {again}");
            assert_eq!(p.read("a"), b"a0\n", "{what}: {again}");
            assert_eq!(p.read("b"), b"b0\n", "{what}: {again}");
            assert!(!p.path.join("c").exists(), "{what}: {again}");
            if !killed {
                break;
            }
        }
    }
}

/// r90 (1): a turn that replaced a directory by a file (or a file by a directory), its undo or
/// the redo of that undo killed between removing the directory's last file and the directory:
/// the empty directory left there was taken for an edit made since the stopped run, and every
/// run again left the path alone ("a directory is in the way"), so the file never came back.
/// Killed at every `unlinkat` (the directory holds `e/x` and `y`: a kill can also leave it
/// holding only an empty `e`, r92 (5)), the run again puts the file there, and the other
/// command takes it back.
#[test]
fn a_run_killed_between_a_directorys_last_file_and_the_directory_finishes_when_run_again() {
    for op in ["undo", "redo"] {
        for when in 1.. {
            let sb = Sandbox::new();
            let p = sb.project("proj");
            // The undo's rerun puts file `d` back; the redo's, the turn's file `d`.
            let (dir_first, file) = match op {
                "undo" => (false, "d0\n"),
                _ => (true, "f1\n"),
            };
            match dir_first {
                true => p.file("d/e/x", "x0\n").file("d/y", "y0\n"),
                false => p.file("d", file),
            };
            rwj(&p, &["turn", "begin", "--session=s", "--turn=1"]);
            fs::remove_dir_all(p.path.join("d"))
                .or_else(|_| fs::remove_file(p.path.join("d")))
                .unwrap();
            match dir_first {
                true => p.file("d", file),
                false => p.file("d/e/x", "x1\n").file("d/y", "y1\n"),
            };
            rwj(&p, &["turn", "end", "--session=s", "--turn=1"]);
            if op == "redo" {
                rwj(&p, &["undo", "--session=s", "--last"]);
            }
            let args = match op {
                "undo" => vec!["undo", "--session=s", "--last"],
                _ => vec!["redo", "--session=s"],
            };
            let killed = run_killed(
                &sb,
                &p.path,
                None,
                &args,
                ("unlinkat", when),
                DEFAULT_DEADLINE,
            );
            if !killed {
                break;
            }
            let what = format!("{op} killed at unlinkat #{when}, then run again");
            let again = rwj(&p, &args);
            assert_eq!(again["conflicts"], serde_json::json!([]), "{what}: {again}");
            assert_eq!(p.read("d"), file.as_bytes(), "{what}: {again}");
            // (A stopped undo and its run again are two undos: two redos take them back.)
            let rolled_back = || turns_of(&p, "s")[0]["rolled_back"] == true;
            let mut back = Value::Null;
            for _ in 0..2 {
                back = match op {
                    "undo" if rolled_back() => rwj(&p, &["redo", "--session=s"]),
                    "redo" if !rolled_back() => rwj(&p, &["undo", "--session=s", "--last"]),
                    _ => break,
                };
                assert_eq!(back["conflicts"], serde_json::json!([]), "{what}: {back}");
            }
            let (x, y) = match op {
                "undo" => ("x1\n", "y1\n"),
                _ => ("x0\n", "y0\n"),
            };
            assert_eq!(p.read("d/e/x"), x.as_bytes(), "{what}, then back: {back}");
            assert_eq!(p.read("d/y"), y.as_bytes(), "{what}, then back: {back}");
        }
    }
}

/// r92 (4): a turn that only set a file's exec bit, its undo (or the redo of that undo) killed
/// after its swap and run again: the bytes taken out are the bytes staged, so the sweep counted
/// the swap as not done, and every later redo (or undo) left the file alone, "changed by
/// someone else since". The exec bit of what the swap took out tells. r94 (2): the same with a
/// file made a symlink to its own bytes (the kind tells; the same exec bit, none). Killed at every `unlinkat` and
/// `renameat2`, the run again and the other command take the change back and forth.
#[test]
fn a_mode_change_whose_undo_or_redo_was_killed_after_its_swap_goes_back_and_forth() {
    use std::os::unix::fs::PermissionsExt;
    for change in ["exec bit", "symlink"] {
        for op in ["undo", "redo"] {
            for syscall in ["unlinkat", "renameat2"] {
                for when in 1.. {
                    let sb = Sandbox::new();
                    let p = turn_1_changed_only_a_mode(&sb, change);
                    if op == "redo" {
                        rwj(&p, &["undo", "--session=s", "--last"]);
                    }
                    let args = match op {
                        "undo" => vec!["undo", "--session=s", "--last"],
                        _ => vec!["redo", "--session=s"],
                    };
                    let killed =
                        run_killed(&sb, &p.path, None, &args, (syscall, when), DEFAULT_DEADLINE);
                    if !killed {
                        break;
                    }
                    let what = format!("{change}: {op} killed at {syscall} #{when}, run again");
                    // (Whether `a` is as the turn left it.)
                    let changed = || {
                        let found = fs::symlink_metadata(p.path.join("a")).unwrap();
                        match change {
                            "symlink" => found.file_type().is_symlink(),
                            _ => found.permissions().mode() & 0o100 != 0,
                        }
                    };
                    let again = rwj(&p, &args);
                    assert_eq!(again["conflicts"], serde_json::json!([]), "{what}: {again}");
                    assert_eq!(changed(), op == "redo", "{what}: {again}");
                    // (A stopped undo and its run again are two undos: two redos take them back.)
                    let rolled_back = || turns_of(&p, "s")[0]["rolled_back"] == true;
                    for _ in 0..2 {
                        let back = match op {
                            "undo" if rolled_back() => rwj(&p, &["redo", "--session=s"]),
                            "redo" if !rolled_back() => rwj(&p, &["undo", "--session=s", "--last"]),
                            _ => break,
                        };
                        assert_eq!(back["conflicts"], serde_json::json!([]), "{what}: {back}");
                    }
                    assert_eq!(changed(), op == "undo", "{what}, then back");
                }
            }
        }
    }
}

/// r94 (1): a turn made an executable file `a` (bytes `x`) a symlink to `x` (the same blob),
/// its undo, the redo killed at its first `renameat2` (staged, nothing swapped), then the user
/// making that very symlink: the sweep took the staged symlink at the temp name (no exec bit
/// of its own) for the file taken out, so the run again took the user's symlink for the
/// session's, and `undo --last` wrote the file over it with no conflict.
#[test]
fn a_redo_killed_before_a_swap_of_a_file_for_a_symlink_of_its_bytes_is_not_taken_for_done() {
    let sb = Sandbox::new();
    let p = turn_1_changed_only_a_mode(&sb, "executable to symlink");
    rwj(&p, &["undo", "--session=s", "--last"]);
    let redo = ["redo", "--session=s"];
    let killed = run_killed(
        &sb,
        &p.path,
        None,
        &redo,
        ("renameat2", 1),
        DEFAULT_DEADLINE,
    );
    assert!(killed, "the redo was not killed at its first renameat2");
    assert!(
        !p.path.join("a").is_symlink(),
        "the kill came after the swap"
    );
    fs::remove_file(p.path.join("a")).unwrap();
    std::os::unix::fs::symlink("x", p.path.join("a")).unwrap();
    rwj(&p, &redo);
    let undo = rwj(&p, &["undo", "--session=s", "--last"]);
    assert!(p.path.join("a").is_symlink(), "{undo}");
}

/// Session `s`'s turn 1 changed only `a`'s mode: `change` "exec bit" set it on `a` (`x`); any
/// other made `a` (`x`; executable for "executable to symlink") a symlink to `x`, the same
/// blob. It ended.
fn turn_1_changed_only_a_mode<'a>(sb: &'a Sandbox, change: &str) -> TestProject<'a> {
    let p = sb.project("proj");
    p.file("a", "x").file("k", "k\n");
    if change == "executable to symlink" {
        p.chmod("a", 0o755);
    }
    rwj(&p, &["turn", "begin", "--session=s", "--turn=1"]);
    match change {
        "exec bit" => {
            p.chmod("a", 0o755);
        }
        _ => {
            fs::remove_file(p.path.join("a")).unwrap();
            std::os::unix::fs::symlink("x", p.path.join("a")).unwrap();
        }
    }
    rwj(&p, &["turn", "end", "--session=s", "--turn=1"]);
    p
}

/// r91 (1), (2): a redo killed before it changed a file (at its first `syncfs`), then the user
/// wrote the very bytes it would write (`a`, `c`) and deleted what it would delete (`b`); run
/// again, it took those for the stopped run's work, and `undo --last` then wrote over them
/// (and brought `b` back) with no conflict. Without the kill they are the user's: a conflict.
#[test]
fn a_redo_killed_before_its_writes_does_not_take_what_the_user_did_the_same_since() {
    let sb = Sandbox::new();
    let p = turn_1_undone_and_its_redo_killed_before_it_wrote(&sb);
    do_what_turn_1_did(&p);
    rwj(&p, &["redo", "--session=s"]);
    let undo = rwj(&p, &["undo", "--session=s", "--last"]);
    assert_eq!(
        undo["conflicts"],
        serde_json::json!(["a", "b", "c"]),
        "{undo}"
    );
    assert_eq!(
        (p.read("a"), p.read("c")),
        (b"a1\n".to_vec(), b"c1\n".to_vec())
    );
    assert!(!p.path.join("b").exists(), "{undo}");
}

/// r92 (1): session s's redo killed before it wrote, session o's turn then doing exactly what
/// that redo would have done, and s's redo run again (it writes nothing): o's undo of its own
/// turn left all of it alone, "changed by someone else". The run again was read against the
/// stopped run's plan, its parent, as if it had taken o's work back. r93 (1): the same with a
/// turn of s's (touching `z` only) between o's turn and the run again, whose end recorded the
/// project as o left it: the run again put the stopped run's "before" back over that record.
#[test]
fn another_sessions_turn_made_after_a_stopped_redo_is_its_own_when_the_redo_runs_again() {
    for turn_between in [false, true] {
        let sb = Sandbox::new();
        let p = turn_1_undone_and_its_redo_killed_before_it_wrote(&sb);
        rwj(&p, &["turn", "begin", "--session=o", "--turn=1"]);
        do_what_turn_1_did(&p);
        rwj(&p, &["turn", "end", "--session=o", "--turn=1"]);
        if turn_between {
            rwj(&p, &["turn", "begin", "--session=s", "--turn=2"]);
            p.file("z", "z2\n");
            rwj(&p, &["turn", "end", "--session=s", "--turn=2"]);
        }
        rwj(&p, &["redo", "--session=s"]);
        let undo = rwj(&p, &["undo", "--session=o", "--last"]);
        let what = format!("a turn of s between: {turn_between}");
        assert_eq!(undo["conflicts"], serde_json::json!([]), "{what}: {undo}");
        assert_eq!(
            (p.read("a"), p.read("b")),
            (b"a0\n".to_vec(), b"b0\n".to_vec())
        );
        assert!(!p.path.join("c").exists(), "{what}: {undo}");
    }
}

/// r93 (2): a turn replaced directory `d` (holding `x` and `y`) by a file (and edited `a`), its
/// undo, the redo killed before it wrote, then the user deleting `d/x` and `d/y` (what the redo
/// planned), leaving `d` empty: the run again took the empty `d` for its own leftover and the
/// deletions for the session's, and `undo --last` brought both files back with no conflict.
/// The stopped run removed nothing in `d`: the deletions are the user's, as without the kill.
#[test]
fn a_directory_the_user_emptied_after_a_stopped_redo_is_not_the_runs_leftover() {
    let sb = Sandbox::new();
    let files = [("d/x", "x0\n"), ("d/y", "y0\n"), ("a", "a0\n")];
    let p = a_turn_undone_and_its_redo_killed_before_it_wrote(&sb, &files, |p| {
        fs::remove_dir_all(p.path.join("d")).unwrap();
        p.file("d", "f1\n").file("a", "a1\n");
    });
    fs::remove_file(p.path.join("d/x")).unwrap();
    fs::remove_file(p.path.join("d/y")).unwrap();
    rwj(&p, &["redo", "--session=s"]);
    assert_eq!(p.read("a"), b"a1\n");
    let undo = rwj(&p, &["undo", "--session=s", "--last"]);
    assert_eq!(p.read("a"), b"a0\n", "{undo}");
    assert!(!p.path.join("d/x").exists(), "{undo}");
    assert!(!p.path.join("d/y").exists(), "{undo}");
}

/// r92 (2), (3): a turn replaced directory `d` by a file (or file `d` by a directory), its
/// undo, the redo killed before it wrote, then the user deleting `d` whole; run again, the redo
/// wrote the turn's `d`, and `undo --last` brought back what the user had deleted (`d/x`, or
/// the file `d`) with no conflict: the link after the stopped run kept no gap at all, as if all
/// that changed since were the stopped run's writes. It wrote nothing: the deletion is the
/// user's, a conflict, as without the kill.
#[test]
fn a_users_deletion_after_a_stopped_redo_of_a_type_change_is_theirs_when_the_redo_runs_again() {
    for dir_to_file in [true, false] {
        let sb = Sandbox::new();
        let (files, deleted) = match dir_to_file {
            true => ([("d/x", "x0\n"), ("a", "a0\n")], "d/x"),
            false => ([("d", "f0\n"), ("a", "a0\n")], "d"),
        };
        let p = a_turn_undone_and_its_redo_killed_before_it_wrote(&sb, &files, |p| {
            match dir_to_file {
                true => fs::remove_dir_all(p.path.join("d")).unwrap(),
                false => fs::remove_file(p.path.join("d")).unwrap(),
            }
            let turns = match dir_to_file {
                true => "d",
                false => "d/y",
            };
            p.file(turns, "t1\n").file("a", "a1\n");
        });
        let what = format!("the turn made a directory a file: {dir_to_file}");
        match dir_to_file {
            true => fs::remove_dir_all(p.path.join("d")).unwrap(),
            false => fs::remove_file(p.path.join("d")).unwrap(),
        }
        let redo = rwj(&p, &["redo", "--session=s"]);
        assert_eq!(p.read("a"), b"a1\n", "{what}: {redo}");
        let undo = rwj(&p, &["undo", "--session=s", "--last"]);
        assert_eq!(p.read("a"), b"a0\n", "{what}: {undo}");
        assert!(!p.path.join(deleted).exists(), "{what}: {undo}");
        let conflicts = undo["conflicts"].as_array().unwrap();
        assert!(conflicts.contains(&deleted.into()), "{what}: {undo}");
    }
}

/// r95 (1): an `undo --last` killed after all its writes, at the removal of its journal, run
/// again (nothing left to write), then two redos (the first, of the run again, gives nothing
/// back): every later `undo --last` left the turn's own `a1` alone, "changed by someone else".
/// The run again recorded what stood before the stopped run as what the session left, though
/// that run had written `a0`; the redo after it took the difference for someone else's edit.
#[test]
fn an_undo_killed_at_its_journals_removal_and_run_again_leaves_the_turn_undoable() {
    let sb = Sandbox::new();
    let p = turn_1_wrote_a1(&sb);
    let journal = p.store().join("rewind-restore-journal");
    let undo = ["undo", "--session=s", "--last"];
    assert!(run_killed_on(&sb, &p.path, &undo, ("unlink", 1), &journal));
    assert_eq!(p.read("a"), b"a0\n", "killed before its write");
    assert!(journal.exists(), "killed after its journal was removed");
    undo_again_redo_and_undo(&p);
}

/// r96 (1): turn 1 rewrote `sub/f` (and `k`); its `undo --last` killed before it wrote, the
/// user moving in a copy of the old `sub/` made before the turn (its files keep their old
/// change time), the undo run again (it writes `k`), then two redos: the second, of the stopped
/// undo, wrote `f1` over the user's file with no conflict. The store says the stopped run did
/// not write `sub/f`: what it planned there is someone else's, whatever the change time says.
#[test]
fn a_file_moved_in_with_an_old_change_time_after_a_stopped_undo_is_the_users() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("sub/f", "f0\n").file("k", "k0\n");
    let copy = sb.root.join("keep");
    let cp = std::process::Command::new("cp")
        .arg("-a")
        .arg(p.path.join("sub"))
        .arg(&copy)
        .status();
    assert!(cp.unwrap().success(), "cp -a");
    rwj(&p, &["turn", "begin", "--session=s", "--turn=1"]);
    p.file("sub/f", "f1\n").file("k", "k1\n");
    rwj(&p, &["turn", "end", "--session=s", "--turn=1"]);
    let undo = ["undo", "--session=s", "--last"];
    killed_before_it_wrote(&sb, &p, &undo, ("sub/f", b"f1\n"));
    fs::remove_dir_all(p.path.join("sub")).unwrap();
    fs::rename(&copy, p.path.join("sub")).unwrap();
    rwj(&p, &undo);
    assert_eq!(p.read("k"), b"k0\n");
    for _ in 0..2 {
        rwj(&p, &["redo", "--session=s"]);
    }
    assert_eq!(p.read("sub/f"), b"f0\n", "the user's file was written over");
}

/// r98 (3): an open turn's agent wrote `a1`, `b1`; `undo --last` killed before it wrote; the
/// redo found everything back and wrote nothing, and reopened the turn with the project as it
/// found it for its "before": the turn's end listed no file, and `undo --last` said it undid
/// it with `a1`, `b1` left on disk. What a redo finds back where a stopped undo never wrote is
/// brought back as much as what it writes.
#[test]
fn an_open_turn_whose_undo_was_killed_before_it_wrote_keeps_its_work_through_the_redo() {
    let sb = Sandbox::new();
    let p = turn_1_wrote_a1_and_b1(&sb, false);
    let undo = ["undo", "--session=s", "--last"];
    killed_before_it_wrote(&sb, &p, &undo, ("a", b"a1\n"));
    rwj(&p, &["redo", "--session=s"]);
    let end = rwj(&p, &["turn", "end", "--session=s", "--turn=1"]);
    assert_eq!(end["files"].as_array().map(Vec::len), Some(2), "{end}");
    let last = rwj(&p, &undo);
    assert_eq!(last["conflicts"], serde_json::json!([]), "{last}");
    assert_eq!(
        (p.read("a"), p.read("b")),
        (b"a0\n".to_vec(), b"b0\n".to_vec()),
        "{last}"
    );
}

/// Session `s`'s turn 1 wrote `a1`, made `c` and deleted `b` (a file `z` stands by), ended and
/// was undone; its redo was killed at its first `syncfs`, before it changed a file (r91).
fn turn_1_undone_and_its_redo_killed_before_it_wrote(sb: &Sandbox) -> TestProject<'_> {
    let files = [("a", "a0\n"), ("b", "b0\n"), ("z", "z0\n")];
    a_turn_undone_and_its_redo_killed_before_it_wrote(sb, &files, do_what_turn_1_did)
}

/// A project of `files` (`a` among them, `a0`); session `s`'s turn 1 did `work` (`a` written
/// among it), ended and was undone; its redo was killed at its first `syncfs`, before it
/// changed a file.
fn a_turn_undone_and_its_redo_killed_before_it_wrote<'a>(
    sb: &'a Sandbox,
    files: &[(&str, &str)],
    work: impl Fn(&TestProject),
) -> TestProject<'a> {
    let p = sb.project("proj");
    for (path, text) in files {
        p.file(path, text);
    }
    rwj(&p, &["turn", "begin", "--session=s", "--turn=1"]);
    work(&p);
    rwj(&p, &["turn", "end", "--session=s", "--turn=1"]);
    rwj(&p, &["undo", "--session=s", "--last"]);
    let redo = ["redo", "--session=s"];
    killed_before_it_wrote(sb, &p, &redo, ("a", b"a0\n"));
    p
}

/// Run `args` (an undo or redo) killed at its first `syncfs`, before it changed a file:
/// `path` still holds `bytes`.
fn killed_before_it_wrote(
    sb: &Sandbox,
    p: &TestProject,
    args: &[&str],
    (path, bytes): (&str, &[u8]),
) {
    let killed = run_killed(sb, &p.path, None, args, ("syncfs", 1), DEFAULT_DEADLINE);
    assert!(killed, "{args:?} was not killed at its first syncfs");
    assert_eq!(p.read(path), bytes, "the kill came after a write");
}

/// What [`turn_1_undone_and_its_redo_killed_before_it_wrote`]'s turn 1 did, done again.
fn do_what_turn_1_did(p: &TestProject) {
    p.file("a", "a1\n").file("c", "c1\n");
    fs::remove_file(p.path.join("b")).unwrap();
}

/// Turn 1 of session `s` wrote `a1` and ended; turn 2, open, wrote `b2`, made `c` and deleted
/// `e` (r88).
fn turn_2_open_after_turn_1(sb: &Sandbox) -> TestProject<'_> {
    let p = sb.project("proj");
    p.file("a", "a0\n").file("b", "b0\n").file("e", "e0\n");
    rwj(&p, &["turn", "begin", "--session=s", "--turn=1"]);
    p.file("a", "a1\n");
    rwj(&p, &["turn", "end", "--session=s", "--turn=1"]);
    rwj(&p, &["turn", "begin", "--session=s", "--turn=2"]);
    p.file("b", "b2\n").file("c", "c2\n");
    fs::remove_file(p.path.join("e")).unwrap();
    p
}

/// Ends [`turn_2_open_after_turn_1`]'s turn 2 and undoes it: turn 1's work stays, turn 2's
/// goes.
fn end_turn_2_and_undo_it(p: &TestProject) {
    rwj(p, &["turn", "end", "--session=s", "--turn=2"]);
    rwj(p, &["undo", "--session=s", "--last"]);
    assert_eq!(p.read("a"), b"a1\n");
    assert_eq!(p.read("b"), b"b0\n");
    assert_eq!(p.read("e"), b"e0\n");
    assert!(!p.path.join("c").exists());
}

/// Session `s`'s turn 1 wrote `a1` over `a0` and ended.
fn turn_1_wrote_a1(sb: &Sandbox) -> TestProject<'_> {
    let p = sb.project("proj");
    p.file("a", "a0\n");
    rwj(&p, &["turn", "begin", "--session=s", "--turn=1"]);
    p.file("a", "a1\n");
    rwj(&p, &["turn", "end", "--session=s", "--turn=1"]);
    p
}

/// Session `s`'s turn 1 wrote `a1` over `a0` and `b1` over `b0`, and ended if `ends`.
fn turn_1_wrote_a1_and_b1(sb: &Sandbox, ends: bool) -> TestProject<'_> {
    let p = sb.project("proj");
    p.file("a", "a0\n").file("b", "b0\n");
    rwj(&p, &["turn", "begin", "--session=s", "--turn=1"]);
    p.file("a", "a1\n").file("b", "b1\n");
    if ends {
        rwj(&p, &["turn", "end", "--session=s", "--turn=1"]);
    }
    p
}

/// After `undo --last` of [`turn_1_wrote_a1`] was stopped: the undo run again, then redos until
/// `a` holds `a1` again (two at most), then `undo --last`, which takes the turn back whole.
fn undo_again_redo_and_undo(p: &TestProject) {
    let undo = ["undo", "--session=s", "--last"];
    rwj(p, &undo);
    for _ in 0..2 {
        if p.read("a") != b"a1\n" {
            rwj(p, &["redo", "--session=s"]);
        }
    }
    assert_eq!(p.read("a"), b"a1\n", "the redos did not give the turn back");
    let again = rwj(p, &undo);
    assert_eq!(again["conflicts"], serde_json::json!([]), "{again}");
    assert_eq!(p.read("a"), b"a0\n", "{again}");
}

/// Run `args` (an undo or redo) killed just after its first `unlinkat` (with one change to
/// make: the removal of what the swap took out, or of the file a deletion set aside), before
/// the call returned: `path` holds `bytes`. Returns the files at rewind's own names left in the
/// project.
fn killed_after_its_first_removal(
    sb: &Sandbox,
    p: &TestProject,
    args: &[&str],
    (path, bytes): (&str, &[u8]),
) -> Vec<PathBuf> {
    let killed = run_killed_after(sb, &p.path, args, ("unlinkat", None));
    assert!(killed, "{args:?} was not killed after its first unlinkat");
    assert_eq!(p.read(path), bytes, "killed before its first change");
    let names = fs_snapshot(&p.path).into_keys();
    names
        .filter(|path| path.to_string_lossy().contains(".rewind-"))
        .collect()
}

/// r95 (2): an `undo --last` killed after its swap of `a` and the removal of what came out,
/// before its journal's `done` line, run again, then two redos: the second said `a` was
/// "changed by someone else", and the turn stayed rolled back for good. Nothing at rewind's own
/// names showed the swap, so the store recorded it not done. Now the line comes before the
/// removal: killed there, the file taken out still stands at the temp name.
#[test]
fn an_undo_killed_after_its_swaps_removal_and_run_again_gives_the_turn_back_when_redone() {
    let sb = Sandbox::new();
    let p = turn_1_wrote_a1(&sb);
    let undo = ["undo", "--session=s", "--last"];
    let left = killed_after_its_first_removal(&sb, &p, &undo, ("a", b"a0\n"));
    assert_eq!(left, Vec::<PathBuf>::new(), "killed before the removal");
    undo_again_redo_and_undo(&p);
}

/// r98 (1), the other side of r95 (4): an `undo --last` killed after its swap and the removal of
/// what came out (it wrote `a0`), then the user's edit of `a`: the redo leaves the edit alone, a conflict, and the
/// turn stays rolled back (a build that took the missing line for "not written" said the turn
/// was back with the user's bytes in `a`).
#[test]
fn a_users_edit_after_an_undo_killed_after_its_swap_holds_the_redo_back() {
    let sb = Sandbox::new();
    let p = turn_1_wrote_a1(&sb);
    let undo = ["undo", "--session=s", "--last"];
    let left = killed_after_its_first_removal(&sb, &p, &undo, ("a", b"a0\n"));
    assert_eq!(left, Vec::<PathBuf>::new(), "killed before the removal");
    p.file("a", "user\n");
    let redo = rwj(&p, &["redo", "--session=s"]);
    assert_eq!(redo["conflicts"], serde_json::json!(["a"]), "{redo}");
    assert_eq!(p.read("a"), b"user\n");
    assert_eq!(turns_of(&p, "s")[0]["rolled_back"], true, "{redo}");
}

/// r95 (7): a turn made directory `d` a file; its redo killed after it removed `d/x` (set
/// aside, then unlinked), before the deletion's `done` line: every later redo said "d: in the
/// way" (the empty `d` was not taken for the run's leftover) and the project kept an empty `d`.
#[test]
fn a_redo_killed_after_a_deletions_removal_finishes_when_run_again() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("k", "k\n").file("d/x", "x0\n");
    rwj(&p, &["turn", "begin", "--session=s", "--turn=1"]);
    fs::remove_dir_all(p.path.join("d")).unwrap();
    p.file("d", "file1\n");
    rwj(&p, &["turn", "end", "--session=s", "--turn=1"]);
    rwj(&p, &["undo", "--session=s", "--last"]);
    let redo = ["redo", "--session=s"];
    let left = killed_after_its_first_removal(&sb, &p, &redo, ("k", b"k\n"));
    assert!(!p.path.join("d/x").exists(), "killed before the deletion");
    let aside = left
        .iter()
        .filter(|path| path.to_string_lossy().contains(".rewind-aside-"));
    assert_eq!(aside.count(), 0, "killed before the removal: {left:?}");
    let again = rwj(&p, &redo);
    assert_eq!(again["conflicts"], serde_json::json!([]), "{again}");
    assert_eq!(p.read("d"), b"file1\n", "{again}");
    let undo = rwj(&p, &["undo", "--session=s", "--last"]);
    assert_eq!(p.read("d/x"), b"x0\n", "{undo}");
}

/// r95 (4): an `undo --last` killed before it wrote, the user's edit of `a` (one of the turn's
/// files), the undo run again (it leaves `a` alone and undoes `b`), then two redos: the second,
/// of the stopped undo, said `a` was "changed by someone else", and the turn stayed rolled
/// back for good with `b1` on disk. The store knows the stopped undo did not write `a`: the
/// edit is on the turn's own work, which that undo never took back, as after an undo that left
/// `a` alone.
#[test]
fn a_users_edit_after_an_undo_killed_before_it_wrote_does_not_hold_the_redo_back() {
    let sb = Sandbox::new();
    let p = turn_1_wrote_a1_and_b1(&sb, true);
    let undo = ["undo", "--session=s", "--last"];
    killed_before_it_wrote(&sb, &p, &undo, ("a", b"a1\n"));
    p.file("a", "user\n");
    let again = rwj(&p, &undo);
    assert_eq!(again["conflicts"], serde_json::json!(["a"]), "{again}");
    assert_eq!(p.read("b"), b"b0\n", "{again}");
    for _ in 0..2 {
        if turns_of(&p, "s")[0]["rolled_back"] == true {
            rwj(&p, &["redo", "--session=s"]);
        }
    }
    assert_eq!(turns_of(&p, "s")[0]["rolled_back"], false);
    assert_eq!(p.read("b"), b"b1\n");
    let last = rwj(&p, &undo);
    assert_eq!(last["conflicts"], serde_json::json!(["a"]), "{last}");
    assert_eq!(
        (p.read("a"), p.read("b")),
        (b"user\n".to_vec(), b"b0\n".to_vec())
    );
}

/// r99 (1): turn 1 (ended) wrote `c1`, turn 2 (open) `a1`; `undo --turn 1` killed at its
/// first `unlinkat` (after its swaps), `redo`, `turn end --turn 2`, `undo --last`: then
/// `undo --turn 1` left `c1` alone, "changed by someone else". The redo that reopened turn 2
/// counted what it found changed since the stopped undo, that undo's own writes, as a gap's.
#[test]
fn a_turn_whose_undo_was_killed_after_its_swaps_is_undone_after_a_redo_reopened_the_next() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a", "a0\n").file("c", "c0\n");
    rwj(&p, &["turn", "begin", "--session=s", "--turn=1"]);
    p.file("c", "c1\n");
    rwj(&p, &["turn", "end", "--session=s", "--turn=1"]);
    rwj(&p, &["turn", "begin", "--session=s", "--turn=2"]);
    p.file("a", "a1\n");
    let undo = ["undo", "--session=s", "--turn=1"];
    let killed = run_killed(&sb, &p.path, None, &undo, ("unlinkat", 1), DEFAULT_DEADLINE);
    assert!(killed, "the undo was not killed at its first unlinkat");
    assert_eq!(turns_of(&p, "s")[0]["undo_stopped"], true);
    rwj(&p, &["redo", "--session=s"]);
    rwj(&p, &["turn", "end", "--session=s", "--turn=2"]);
    rwj(&p, &["undo", "--session=s", "--last"]);
    let last = rwj(&p, &undo);
    assert_eq!(last["conflicts"], serde_json::json!([]), "{last}");
    assert_eq!(
        (p.read("a"), p.read("c")),
        (b"a0\n".to_vec(), b"c0\n".to_vec())
    );
}

/// r103 (1), (2), which came with a `done` line written just before a new file's rename: a
/// redo of `s` killed before the rename of `n` (a file its turn made) into place, its temp file
/// then removed (as `git clean` does), session `o`'s agent making `n` with the same bytes: `o`'s
/// turn end left `n` out (the store took the line for `s`'s making it), and `o`'s undo left it
/// without a word. A new file's line comes after its rename: a kill between is not known.
#[test]
fn another_sessions_new_file_after_a_redo_killed_before_its_rename_is_its_own() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a", "a0\n");
    rwj(&p, &["turn", "begin", "--session=s", "--turn=1"]);
    p.file("n", "n1\n");
    rwj(&p, &["turn", "end", "--session=s", "--turn=1"]);
    rwj(&p, &["undo", "--session=s", "--last"]);
    rwj(&p, &["turn", "begin", "--session=o", "--turn=1"]);
    let redo = ["redo", "--session=s"];
    assert!(run_killed_on(
        &sb,
        &p.path,
        &redo,
        ("renameat2", 1),
        &p.path
    ));
    assert!(!p.path.join("n").exists(), "killed after the rename");
    for entry in fs::read_dir(&p.path).unwrap() {
        let path = entry.unwrap().path();
        if path.to_string_lossy().contains(".rewind-") {
            fs::remove_file(path).unwrap();
        }
    }
    p.file("n", "n1\n");
    let end = rwj(&p, &["turn", "end", "--session=o", "--turn=1"]);
    assert_eq!(end["files"][0]["file"], "n", "{end}");
}

/// r100 (2), (3), which came with the r95 (4) fix: `undo --last` of session `s` killed before it
/// wrote, then session `o`'s turn wrote `a` (and ended) or deleted it (open): `s`'s redo passed
/// over `a` as a user's edit and said the turn was back, and `o`'s undo then left `a` alone as
/// someone else's. Another session's change is theirs: a conflict for the redo, and `o`'s own
/// to undo.
#[test]
fn another_sessions_turn_after_an_undo_killed_before_it_wrote_is_a_conflict_for_the_redo() {
    for o_ends_first in [true, false] {
        let sb = Sandbox::new();
        let p = turn_1_wrote_a1_and_b1(&sb, true);
        killed_before_it_wrote(&sb, &p, &["undo", "--session=s", "--last"], ("a", b"a1\n"));
        rwj(&p, &["turn", "begin", "--session=o", "--turn=1"]);
        match o_ends_first {
            true => p.file("a", "o\n"),
            false => {
                fs::remove_file(p.path.join("a")).unwrap();
                &p
            }
        };
        if o_ends_first {
            rwj(&p, &["turn", "end", "--session=o", "--turn=1"]);
        }
        let redo = rwj(&p, &["redo", "--session=s"]);
        let what = format!("o's turn ended first: {o_ends_first}: {redo}");
        assert_eq!(redo["conflicts"], serde_json::json!(["a"]), "{what}");
        if !o_ends_first {
            rwj(&p, &["turn", "end", "--session=o", "--turn=1"]);
        }
        let undo = rwj(&p, &["undo", "--session=o", "--last"]);
        assert_eq!(undo["conflicts"], serde_json::json!([]), "{what}, {undo}");
        assert_eq!(p.read("a"), b"a1\n", "{what}, {undo}");
    }
}

/// r95 (3): session `s`'s turn wrote `a1`, `b1`; session `o`'s turn, touching nothing, open;
/// `s`'s `undo --last` killed at the removal of its journal (after all its writes), run again
/// (nothing left to write); `o`'s turn end listed `a` and `b` as its own, shared, and `s`'s
/// redos never gave them back. The stopped run and the run again are one change, from what
/// the first found to what the second left: `s`'s undo alone, which is not `o`'s work.
#[test]
fn another_sessions_turn_open_across_an_undo_killed_and_run_again_lists_none_of_it() {
    let sb = Sandbox::new();
    let p = undo_killed_at_its_journals_removal_with_o_open(&sb);
    rwj(&p, &["undo", "--session=s", "--last"]);
    let end = rwj(&p, &["turn", "end", "--session=o", "--turn=1"]);
    assert_eq!(end["files"], serde_json::json!([]), "{end}");
    for _ in 0..2 {
        if p.read("a") != b"a1\n" {
            rwj(&p, &["redo", "--session=s"]);
        }
    }
    assert_eq!(
        (p.read("a"), p.read("b")),
        (b"a1\n".to_vec(), b"b1\n".to_vec())
    );
}

/// r101 (1), which came with the r95 (4) fix: `s`'s `undo --last` killed before it wrote, the
/// user's edit of `a`, session `o` beginning a turn, `s`'s redo passing over `a` (the user's
/// edit), then `o`'s agent writing `a`: `o`'s turn end listed `a` as shared and its undo left
/// it alone. The redo's record held the stopped undo's plan at `a`, which it never wrote: read
/// as a change of `s`'s. What `s` left at a path its redo passed over is what stood before the
/// undo.
#[test]
fn a_path_a_redo_passed_over_is_no_change_of_its_sessions_for_another_turn() {
    let sb = Sandbox::new();
    let p = turn_1_wrote_a1_and_b1(&sb, true);
    killed_before_it_wrote(&sb, &p, &["undo", "--session=s", "--last"], ("a", b"a1\n"));
    p.file("a", "u\n");
    rwj(&p, &["turn", "begin", "--session=o", "--turn=1"]);
    let redo = rwj(&p, &["redo", "--session=s"]);
    assert_eq!(redo["conflicts"], serde_json::json!([]), "{redo}");
    p.file("a", "o2\n");
    let end = rwj(&p, &["turn", "end", "--session=o", "--turn=1"]);
    assert_eq!(end["files"][0]["origin"], "unannounced", "{end}");
    let undo = rwj(&p, &["undo", "--session=o", "--last"]);
    assert_eq!(undo["conflicts"], serde_json::json!([]), "{undo}");
    assert_eq!(p.read("a"), b"u\n", "{undo}");
}

/// r101 (2), which came with the r95 (4) fix: an open turn's agent wrote `a1`, `b1`; `undo
/// --last` killed before it wrote; the user's edit of `a`; the redo passed over `a` and reopened
/// the turn with the edit in its "before": `turn end` listed only `b`, and `undo --last` said
/// nothing of `a`. An edit while an open turn is rolled back is no work of the turn's: for such
/// a turn the redo passes nothing over, and `a` is a conflict.
#[test]
fn a_users_edit_after_a_stopped_undo_of_an_open_turn_is_a_conflict_for_the_redo() {
    let sb = Sandbox::new();
    let p = turn_1_wrote_a1_and_b1(&sb, false);
    let undo = ["undo", "--session=s", "--last"];
    killed_before_it_wrote(&sb, &p, &undo, ("a", b"a1\n"));
    p.file("a", "u\n");
    let redo = rwj(&p, &["redo", "--session=s"]);
    assert_eq!(redo["conflicts"], serde_json::json!(["a"]), "{redo}");
    let _ = p.rewind(["turn", "end", "--session=s", "--turn=1"]);
    let last = rwj(&p, &undo);
    assert_eq!(last["conflicts"], serde_json::json!(["a"]), "{last}");
    assert_eq!(
        (p.read("a"), p.read("b")),
        (b"u\n".to_vec(), b"b0\n".to_vec())
    );
}

/// [`turn_1_wrote_a1_and_b1`], ended; session `o`'s turn, touching nothing, open; `s`'s `undo
/// --last` killed at the removal of its journal, after all its writes.
fn undo_killed_at_its_journals_removal_with_o_open(sb: &Sandbox) -> TestProject<'_> {
    let p = turn_1_wrote_a1_and_b1(sb, true);
    rwj(&p, &["turn", "begin", "--session=o", "--turn=1"]);
    let journal = p.store().join("rewind-restore-journal");
    let undo = ["undo", "--session=s", "--last"];
    assert!(run_killed_on(sb, &p.path, &undo, ("unlink", 1), &journal));
    assert_eq!(
        (p.read("a"), p.read("b")),
        (b"a0\n".to_vec(), b"b0\n".to_vec())
    );
    p
}

/// r102 (1), (2): as in r95 (3), but `s`'s redo runs while `o`'s turn is still open, or `o`'s
/// turn ends before `s` runs again: the stopped undo alone inside `o`'s turn was not known, so
/// its own writes were `o`'s work so far (the redo left `a`, `b` alone, and `s`'s turn stayed
/// rolled back for good) or shared. Where the store says a stopped run made its change, it went
/// from what the run found to its plan.
#[test]
fn another_sessions_turn_open_across_an_undo_killed_after_its_writes_is_not_its_work() {
    for o_ends_first in [false, true] {
        let sb = Sandbox::new();
        let p = undo_killed_at_its_journals_removal_with_o_open(&sb);
        let what = format!("o's turn ends first: {o_ends_first}");
        if o_ends_first {
            let end = rwj(&p, &["turn", "end", "--session=o", "--turn=1"]);
            assert_eq!(end["files"], serde_json::json!([]), "{what}: {end}");
        }
        for _ in 0..2 {
            if p.read("a") != b"a1\n" {
                rwj(&p, &["redo", "--session=s"]);
            }
        }
        assert_eq!(
            (p.read("a"), p.read("b")),
            (b"a1\n".to_vec(), b"b1\n".to_vec()),
            "{what}"
        );
        assert_eq!(turns_of(&p, "s")[0]["rolled_back"], false, "{what}");
    }
}
