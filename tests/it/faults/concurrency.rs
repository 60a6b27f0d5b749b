//! Concurrency: many writers on one project at once.

use super::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

/// How a process of the mix ended.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Exit {
    Ok,
    /// Exit 1 with a restore outcome: the paths it left alone (`failed`).
    Failed(BTreeSet<String>),
    /// Exit 1 with a JSON error: its code.
    Error(String),
}

/// Exit 0, or a clean exit 1 (one line on stderr, and a JSON error or a restore outcome
/// listing what failed); anything else fails the test.
fn exit_of(run: &Run, what: &str) -> Exit {
    assert_no_panic(run);
    match run.code() {
        Some(0) => Exit::Ok,
        Some(1) => {
            let lines: Vec<&str> = run
                .stderr
                .lines()
                .filter(|l| !l.trim().is_empty())
                .collect();
            assert!(
                lines.len() == 1 && lines[0].starts_with("rewind: "),
                "{what}: one line on stderr: {run}"
            );
            eprintln!("{what}: exit 1: {}", lines[0]);
            let v = one_json(run);
            if let Some(code) = v["error"]["code"].as_str() {
                return Exit::Error(code.to_string());
            }
            let failed: BTreeSet<String> = v["failed"]
                .as_array()
                .unwrap_or_else(|| panic!("{what}: a JSON error or a restore outcome: {run}"))
                .iter()
                .map(|f| f["path"].as_str().unwrap().to_string())
                .collect();
            assert!(
                !failed.is_empty(),
                "{what}: exit 1 with nothing failed: {run}"
            );
            Exit::Failed(failed)
        }
        _ => panic!("{what}: {run}"),
    }
}

/// 8 processes at once on one project, mixing track, restores of different snapshots, turn
/// begin/end, revert and prune, for 3 rounds; three of them edit a file just before they start.
/// What must hold: none hangs, panics or is `busy` (each waits up to `--wait`, 30 s, for the
/// lock; the eight take seconds together); every track, turn begin, turn end and prune
/// succeeds; a restore or the revert succeeds, or leaves alone only files edited in its round
/// (a conflict with an edit made while it ran), or, in the round whose prune has
/// `--retention 0s` only, fails `not_found` (or `object`, see below) because that prune expired
/// its snapshot first. The store stays fsck-clean and a final track equals git's tree.
#[test]
fn eight_processes_mixing_every_writer_on_one_project() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    for i in 0..400 {
        p.file(format!("d{:02}/f{i:03}.txt", i % 20), format!("v1 {i}\n"));
    }
    let s1 = p.track();
    for i in (0..400).step_by(3) {
        p.file(
            format!("d{:02}/f{i:03}.txt", i % 20),
            format!("v2 {i}\nmore\n"),
        );
    }
    p.file("added/x.txt", "added\n").remove("d19");
    let s2 = p.track();
    rwj(&p, &["turn", "begin", "--session=c0", "--turn=1"]);
    let proj = p.path.to_str().unwrap().to_string();
    let store = p.store();
    let mut exits = BTreeMap::new();
    for round in 0..3usize {
        let mut gate = StartGate::new(&sb, &format!("gate{round}"));
        let mut children: Vec<(String, std::process::Child)> = Vec::new();
        let base: Vec<&str> = vec!["-C", &proj, "--json"];
        let with = |rest: &[&str]| -> Vec<String> {
            base.iter().chain(rest).map(|s| s.to_string()).collect()
        };
        let session_now = format!("--session=c{}", round + 1);
        let session_prev = format!("--session=c{round}");
        let mut specs: Vec<(String, Vec<String>, Option<PathBuf>)> = vec![
            (
                "track".into(),
                with(&["track"]),
                Some(p.join(format!("d01/f{round:03}.txt"))),
            ),
            (
                "track".into(),
                with(&["track"]),
                Some(p.join("edited-by-a-track.txt")),
            ),
            ("restore s1".into(), with(&["restore", &s1]), None),
            ("restore s2".into(), with(&["restore", &s2]), None),
            (
                "turn begin".into(),
                with(&["turn", "begin", &session_now, "--turn=1"]),
                Some(p.join("d02/f002.txt")),
            ),
            (
                "turn end".into(),
                with(&["turn", "end", &session_prev, "--turn=1"]),
                None,
            ),
            (
                "revert".into(),
                with(&["revert", &s1, "--", "d03", "d04/f004.txt", "d19"]),
                None,
            ),
        ];
        let prune: Vec<String> = if round == 2 {
            with(&["prune", "--retention", "0s"])
        } else {
            with(&["prune"])
        };
        specs.push(("prune".into(), prune, None));
        assert_eq!(specs.len(), 8);
        let edited: BTreeSet<String> = specs
            .iter()
            .filter_map(|(.., edit)| edit.as_ref())
            .map(|file| {
                file.strip_prefix(&p.path)
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        for (what, args, edit) in specs {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let mut cmd = match edit {
                Some(file) => {
                    gated_edit_then(&sb, &gate, &file, &format!("round {round} {what}"), &args)
                }
                None => sb.rewind_command_gated(&gate, &args),
            };
            children.push((what, spawn_piped(&mut cmd)));
        }
        gate.open(children.len(), Duration::from_millis(200));
        for (what, child) in children {
            let run = finish(child, DEFAULT_DEADLINE, &what);
            let exit = exit_of(&run, &format!("round {round}: {what}"));
            let permitted = match &exit {
                Exit::Ok => true,
                Exit::Failed(paths) => what.starts_with("re") && paths.is_subset(&edited),
                // A snapshot that the `--retention 0s` prune of round 2 removed is not found.
                Exit::Error(code) => what.starts_with("re") && round == 2 && code == "not_found",
            };
            assert!(permitted, "round {round}: {what}: {exit:?}: {run}");
            *exits.entry((what, exit)).or_insert(0) += 1;
        }
        assert_fsck_clean(&sb, &store);
    }
    eprintln!("exits (command, exit) -> count: {exits:?}");
    let count = |what: &str, exit: Exit| exits.get(&(what.to_string(), exit)).copied();
    assert_eq!(count("track", Exit::Ok), Some(6), "{exits:?}");
    for what in ["turn begin", "turn end", "prune"] {
        assert_eq!(count(what, Exit::Ok), Some(3), "{what}: {exits:?}");
    }
    for what in ["restore s1", "restore s2", "revert"] {
        let all: usize = exits
            .iter()
            .filter(|((w, _), _)| w == what)
            .map(|(_, n)| n)
            .sum();
        assert_eq!(all, 3, "{what}: {exits:?}");
    }
    // Every begun turn that ended is complete in the store; the last one is still open.
    let all = rwj(&p, &["turns"]);
    for t in all.as_array().unwrap() {
        assert_tree_complete(&sb, &store, t["before"].as_str().unwrap());
        if let Some(after) = t["after"].as_str() {
            assert_tree_complete(&sb, &store, after);
        }
    }
    // No temp file of a writer is left in the project.
    let leftovers: Vec<PathBuf> = fs_snapshot(&p.path)
        .into_keys()
        .filter(|k| {
            k.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(".rewind-"))
        })
        .collect();
    assert!(
        leftovers.is_empty(),
        "temp files left in the project: {leftovers:?}"
    );
    p.track_matches_git();
    assert_fsck_clean(&sb, &store);
}
