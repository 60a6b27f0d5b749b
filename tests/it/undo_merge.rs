//! Undo one turn and keep the rest (`only`), and merge around someone else's edits (`merge`)
//! (issue 14, parts 1 and 2). `git merge-file` is the oracle: each path the undone turns
//! changed must end as `git merge-file -p now after before` says (one turn at a time, latest
//! first), or be left alone where git reports a conflict; every other path stays; and the
//! undo point gives back every byte. Random sessions with fixed seeds; `REWIND_UNDO_MERGE_CASES`
//! runs more.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::Command;

use crate::common::{isolate_process_home, XorShift};

/// Project files: path -> bytes.
type Files = BTreeMap<String, Vec<u8>>;

/// What a turn did to one path: what it found, what it left.
type TurnSides<'a> = (Option<&'a Vec<u8>>, Option<&'a Vec<u8>>);

const PATHS: &[&str] = &["a.txt", "b.txt", "d/c.txt", "d/e.txt"];

fn read_files(root: &Path) -> Files {
    PATHS
        .iter()
        .filter_map(|p| Some((p.to_string(), fs::read(root.join(p)).ok()?)))
        .collect()
}

fn write_files(root: &Path, files: &Files) {
    for path in PATHS {
        let full = root.join(path);
        match files.get(*path) {
            Some(data) => {
                fs::create_dir_all(full.parent().unwrap()).unwrap();
                fs::write(&full, data).unwrap();
            }
            None => {
                let _ = fs::remove_file(&full);
            }
        }
    }
}

/// A random edit of `files`: lines replaced, inserted or removed in one file (from a small
/// alphabet, so edits collide), a file created or deleted.
fn edit(rng: &mut XorShift, files: &mut Files) {
    let path = PATHS[rng.below(PATHS.len() as u64) as usize].to_string();
    let Some(text) = files.get(&path) else {
        let lines = 3 + rng.below(8);
        let text = (0..lines).map(|_| line(rng)).collect::<Vec<_>>().concat();
        files.insert(path, text);
        return;
    };
    if rng.below(12) == 0 {
        files.remove(&path);
        return;
    }
    let mut lines: Vec<Vec<u8>> = text
        .split_inclusive(|b| *b == b'\n')
        .map(<[u8]>::to_vec)
        .collect();
    for _ in 0..1 + rng.below(3) {
        let at = rng.below(lines.len() as u64 + 1) as usize;
        match rng.below(3) {
            0 if at < lines.len() => lines[at] = line(rng),
            1 if at < lines.len() => drop(lines.remove(at)),
            _ => lines.insert(at, line(rng)),
        }
    }
    if rng.below(10) == 0 {
        if let Some(last) = lines.last_mut() {
            last.retain(|b| *b != b'\n'); // no final newline
        }
    } else if let Some(last) = lines.last_mut().filter(|l| !l.ends_with(b"\n")) {
        last.push(b'\n');
    }
    files.insert(path, lines.concat());
}

fn line(rng: &mut XorShift) -> Vec<u8> {
    format!("line {}\n", rng.below(12)).into_bytes()
}

/// `git merge-file -p -L now -L after -L before now after before`: the text and whether clean.
fn git_merge_file(now: &[u8], after: &[u8], before: &[u8], labels: [&str; 3]) -> (Vec<u8>, bool) {
    let dir = tempfile::tempdir().unwrap();
    let names = ["now", "after", "before"];
    for (name, data) in names.iter().zip([now, after, before]) {
        fs::write(dir.path().join(name), data).unwrap();
    }
    let out = Command::new("git")
        .current_dir(dir.path())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir.path())
        .args(["merge-file", "-p"])
        .args(labels.iter().flat_map(|l| ["-L", l]))
        .args(names)
        .output()
        .expect("git merge-file");
    let code = out.status.code().expect("git merge-file exited");
    assert!((0..127).contains(&code), "git merge-file failed: {out:?}");
    (out.stdout, code == 0)
}

/// What taking the turns `(before, after)` (latest first) out of a path holding `now` gives,
/// as git computes it: the path as far as they come out, and whether all of them did (`false`:
/// a conflict at the next one).
fn expected(
    now: Option<&Vec<u8>>,
    turns: &[TurnSides],
    labels: [&str; 3],
) -> (Option<Vec<u8>>, bool) {
    let mut ours = now.cloned();
    for (before, after) in turns {
        let (before, after) = (before.cloned(), after.cloned());
        if ours == after {
            ours = before;
        } else if before == after || ours == before {
        } else {
            let (Some(o), Some(a), Some(b)) = (&ours, &after, &before) else {
                return (ours, false);
            };
            let (text, clean) = git_merge_file(o, a, b, labels);
            if !clean {
                return (ours, false);
            }
            ours = Some(text);
        }
    }
    (ours, true)
}

/// A project, the data dir of its store, and the store (the directories live as long as it).
struct Project {
    dir: tempfile::TempDir,
    _data: tempfile::TempDir,
    store: rewind::Store,
}

impl Project {
    fn new() -> Project {
        isolate_process_home();
        let (dir, data) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let options = rewind::OpenOptions::new(data.path());
        let store = rewind::Store::open(dir.path(), &options).unwrap();
        Project {
            dir,
            _data: data,
            store,
        }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    /// Turn `turn` of `session`: begun, `edit` made, ended.
    fn turn(&self, session: &str, turn: &str, edit: impl FnOnce()) {
        self.store.begin_turn(session, turn).unwrap();
        edit();
        self.store.end_turn(session, turn).unwrap();
    }
}

struct Session {
    /// Per turn: the files when it began and when it ended.
    turns: Vec<(Files, Files)>,
}

/// A session of `turns` random turns, with the user's edits between and after them.
fn random_session(rng: &mut XorShift, store: &rewind::Store, root: &Path, turns: usize) -> Session {
    let mut files = Files::new();
    for _ in 0..4 {
        edit(rng, &mut files);
    }
    write_files(root, &files);
    let mut session = Session { turns: Vec::new() };
    for turn in 1..=turns {
        store.begin_turn("s", &turn.to_string()).unwrap();
        let before = files.clone();
        for _ in 0..1 + rng.below(3) {
            edit(rng, &mut files);
        }
        write_files(root, &files);
        store.end_turn("s", &turn.to_string()).unwrap();
        session.turns.push((before, files.clone()));
        if rng.below(2) == 0 {
            edit(rng, &mut files); // the user's
            write_files(root, &files);
        }
    }
    session
}

fn labels(turn: usize) -> [String; 3] {
    [
        "now".into(),
        format!("after turn \"{turn}\""),
        format!("before turn \"{turn}\""),
    ]
}

/// Check one undo (of turn `from`, `only` it or all from it with `merge`) against git.
fn check_undo(seed: u64, only: bool, force: bool) {
    let mut rng = XorShift::seeded(seed);
    let project = Project::new();
    let (root, store) = (project.root(), &project.store);
    let n = 2 + rng.below(3) as usize;
    let session = random_session(&mut rng, store, root, n);
    let from = 1 + rng.below(n as u64) as usize;
    let undone: Vec<usize> = match only {
        true => vec![from],
        false => (from..=n).collect(),
    };
    let now = read_files(root);
    let options = rewind::UndoOptions {
        turn: Some(from.to_string()),
        only,
        merge: !only,
        force,
        ..Default::default()
    };
    let preview = store
        .undo(
            "s",
            &rewind::UndoOptions {
                dry_run: true,
                ..options.clone()
            },
        )
        .unwrap();
    assert_eq!(
        read_files(root),
        now,
        "seed {seed}: a dry run changed files"
    );
    let outcome = store.undo("s", &options).unwrap();
    let context =
        format!("seed {seed}, {n} turns, undo from {from} (only: {only}, force: {force})");
    assert!(outcome.is_complete(), "{context}: {outcome:?}");
    assert_eq!(
        (
            &preview.written,
            &preview.deleted,
            &preview.conflicts,
            &preview.merged
        ),
        (
            &outcome.written,
            &outcome.deleted,
            &outcome.conflicts,
            &outcome.merged
        ),
        "{context}: the dry run said otherwise"
    );
    let after = read_files(root);
    let label = labels(from);
    let label = [label[0].as_str(), &label[1], &label[2]];
    for path in PATHS {
        let turns: Vec<_> = undone
            .iter()
            .rev()
            .map(|t| {
                (
                    session.turns[t - 1].0.get(*path),
                    session.turns[t - 1].1.get(*path),
                )
            })
            .filter(|(before, after)| before != after)
            .collect();
        let conflict = outcome.conflicts.iter().any(|c| c == path.as_bytes());
        let in_part = (outcome.conflict_details.iter())
            .any(|d| d.file == path.as_bytes() && d.merges_in_part);
        let want = match expected(now.get(*path), &turns, label) {
            (result, true) => {
                assert!(
                    !conflict && !in_part,
                    "{context}: {path} merges cleanly in git, rewind left it alone"
                );
                result
            }
            // A forced single turn writes git's conflict markers, and where no merge can be
            // made (a file added or deleted on one side), the turn's before.
            _ if only && force => {
                let (now, a, b) = (now.get(*path), turns[0].1, turns[0].0);
                match (now, a, b) {
                    (Some(n), Some(a), Some(b)) => Some(git_merge_file(n, a, b, label).0),
                    _ => b.cloned(),
                }
            }
            // A merge of several turns writes the path as far as they come out (r119).
            (result, false) if result.as_ref() != now.get(*path) => {
                assert!(
                    !only && !conflict && in_part,
                    "{context}: {path} merges in part in git, rewind said otherwise"
                );
                result
            }
            (_, false) => {
                assert!(
                    (conflict && !in_part) || turns.is_empty(),
                    "{context}: {path} conflicts in git, rewind did not say so"
                );
                now.get(*path).cloned()
            }
        };
        assert_eq!(
            after
                .get(*path)
                .map(|b| String::from_utf8_lossy(b).into_owned()),
            want.map(|b| String::from_utf8_lossy(&b).into_owned()),
            "{context}: {path}"
        );
    }
    // Every byte the undo replaced comes back from its undo point.
    store.restore(outcome.undo, &Default::default()).unwrap();
    assert_eq!(
        read_files(root),
        now,
        "{context}: the undo point does not give the project back"
    );
}

fn cases(default: u64) -> u64 {
    std::env::var("REWIND_UNDO_MERGE_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

#[test]
fn undo_only_gives_what_git_merge_file_gives_on_random_sessions() {
    for seed in 0..cases(60) {
        check_undo(seed, true, false);
    }
}

#[test]
fn undo_only_with_force_writes_gits_conflict_markers() {
    for seed in 1000..1000 + cases(40) {
        check_undo(seed, true, true);
    }
}

#[test]
fn undo_merge_keeps_the_users_edits_on_random_sessions() {
    for seed in 2000..2000 + cases(60) {
        check_undo(seed, false, false);
    }
}

fn numbered(lines: std::ops::Range<u32>) -> String {
    lines.map(|n| format!("line {n}\n")).collect()
}

/// The story the issue tells: turn 1 edits the top of a file, turn 2 the bottom, the user a
/// line in the middle; undoing turn 1 alone keeps turn 2's edit and the user's.
#[test]
fn undo_only_takes_a_middle_turn_out_and_keeps_later_turns_and_the_users_edit() {
    let project = Project::new();
    let (root, store) = (project.root(), &project.store);
    let f = root.join("f.txt");
    fs::write(&f, numbered(1..21)).unwrap();
    project.turn("s", "1", || {
        fs::write(&f, numbered(1..21).replace("line 2\n", "agent one\n")).unwrap();
        fs::write(root.join("new.txt"), "made by turn 1\n").unwrap();
    });
    store.begin_turn("s", "2").unwrap();
    let two = numbered(1..21)
        .replace("line 2\n", "agent one\n")
        .replace("line 19\n", "agent two\n");
    fs::write(&f, &two).unwrap();
    store.end_turn("s", "2").unwrap();
    fs::write(&f, two.replace("line 10\n", "the user\n")).unwrap();

    let options = rewind::UndoOptions {
        turn: Some("1".into()),
        only: true,
        ..Default::default()
    };
    let outcome = store.undo("s", &options).unwrap();
    assert_eq!(
        fs::read_to_string(&f).unwrap(),
        numbered(1..21)
            .replace("line 19\n", "agent two\n")
            .replace("line 10\n", "the user\n")
    );
    assert!(!root.join("new.txt").exists(), "the file turn 1 made stays");
    assert_eq!(outcome.merged, vec![rewind::BString::from("f.txt")]);
    assert_eq!(outcome.deleted, vec![rewind::BString::from("new.txt")]);

    // Turn 2 is still there to undo, the session's last turn not undone; the user's line is
    // in its file, so a plain undo leaves it alone (mergeable), and `merge` keeps that line.
    let outcome = store.undo_last("s", false).unwrap();
    assert_eq!(outcome.conflicts, vec![rewind::BString::from("f.txt")]);
    assert!(outcome.conflict_details[0].mergeable, "{outcome:?}");
    let merge = rewind::UndoOptions {
        turn: Some("2".into()),
        merge: true,
        ..Default::default()
    };
    let outcome = store.undo("s", &merge).unwrap();
    assert!(outcome.conflicts.is_empty(), "{outcome:?}");
    assert_eq!(
        fs::read_to_string(&f).unwrap(),
        numbered(1..21).replace("line 10\n", "the user\n"),
        "undoing turn 2 next takes its line out and keeps the user's"
    );
}

/// A redo of an `only` undo brings the turn's work back, and an undo of a turn already undone
/// alone is refused rather than applied twice.
#[test]
fn undo_only_is_redone_and_not_applied_twice() {
    let project = Project::new();
    let (root, store) = (project.root(), &project.store);
    let f = root.join("f.txt");
    fs::write(&f, numbered(1..11)).unwrap();
    project.turn("s", "1", || {
        fs::write(&f, numbered(1..11).replace("line 1\n", "one\n")).unwrap();
    });
    store.begin_turn("s", "2").unwrap();
    let two = numbered(1..11)
        .replace("line 1\n", "one\n")
        .replace("line 9\n", "nine\n");
    fs::write(&f, &two).unwrap();
    store.end_turn("s", "2").unwrap();
    let options = rewind::UndoOptions {
        turn: Some("1".into()),
        only: true,
        ..Default::default()
    };
    store.undo("s", &options).unwrap();
    let err = store.undo("s", &options).unwrap_err();
    assert_eq!(err.code(), "turn_state", "{err}");
    store.redo("s", &Default::default()).unwrap();
    assert_eq!(fs::read_to_string(&f).unwrap(), two);
}

/// Without `merge`, a path the user edited since is left alone, and the outcome says a merge
/// would be clean; with `merge` it is merged, and a later undo still treats it as the user's.
#[test]
fn a_conflict_says_it_is_mergeable_and_merge_keeps_the_users_hunk() {
    let project = Project::new();
    let (root, store) = (project.root(), &project.store);
    let f = root.join("f.txt");
    fs::write(&f, numbered(1..21)).unwrap();
    project.turn("s", "1", || {
        fs::write(&f, numbered(1..21).replace("line 2\n", "agent\n")).unwrap();
    });
    let users = numbered(1..21)
        .replace("line 2\n", "agent\n")
        .replace("line 15\n", "user\n");
    fs::write(&f, &users).unwrap();

    let plain = rewind::UndoOptions {
        turn: Some("1".into()),
        ..Default::default()
    };
    let outcome = store.undo("s", &plain).unwrap();
    assert_eq!(outcome.conflicts, vec![rewind::BString::from("f.txt")]);
    assert_eq!(outcome.conflict_details.len(), 1);
    assert!(outcome.conflict_details[0].mergeable, "{outcome:?}");
    assert_eq!(
        fs::read_to_string(&f).unwrap(),
        users,
        "a conflict is left alone"
    );
    store
        .redo("s", &Default::default())
        .unwrap_or_else(|e| panic!("{e}"));

    let merge = rewind::UndoOptions {
        merge: true,
        ..plain.clone()
    };
    let outcome = store.undo("s", &merge).unwrap();
    assert_eq!(outcome.merged, vec![rewind::BString::from("f.txt")]);
    assert_eq!(
        fs::read_to_string(&f).unwrap(),
        numbered(1..21).replace("line 15\n", "user\n")
    );
}

/// Overlapping edits: left alone with the hunk reported; with `force`, git's markers.
#[test]
fn undo_only_reports_overlapping_hunks_and_force_writes_markers() {
    let project = Project::new();
    let (root, store) = (project.root(), &project.store);
    let f = root.join("f.txt");
    fs::write(&f, numbered(1..11)).unwrap();
    project.turn("s", "1", || {
        fs::write(&f, numbered(1..11).replace("line 5\n", "agent\n")).unwrap();
    });
    let users = numbered(1..11).replace("line 5\n", "user\n");
    fs::write(&f, &users).unwrap();
    let options = rewind::UndoOptions {
        turn: Some("1".into()),
        only: true,
        ..Default::default()
    };
    let outcome = store.undo("s", &options).unwrap();
    assert_eq!(outcome.conflicts, vec![rewind::BString::from("f.txt")]);
    let detail = &outcome.conflict_details[0];
    assert!(!detail.mergeable);
    assert_eq!(
        (
            detail.hunks.len(),
            detail.hunks[0].ours_start,
            detail.hunks[0].ours_lines
        ),
        (1, 5, 1)
    );
    assert_eq!(fs::read_to_string(&f).unwrap(), users);

    let forced = rewind::UndoOptions {
        force: true,
        ..options
    };
    let outcome = store.undo("s", &forced).unwrap();
    let after = numbered(1..11).replace("line 5\n", "agent\n");
    let label = labels(1);
    let (markers, clean) = git_merge_file(
        users.as_bytes(),
        after.as_bytes(),
        numbered(1..11).as_bytes(),
        [label[0].as_str(), &label[1], &label[2]],
    );
    assert!(!clean);
    assert_eq!(fs::read(&f).unwrap(), markers);
    store.restore(outcome.undo, &Default::default()).unwrap();
    assert_eq!(
        fs::read_to_string(&f).unwrap(),
        users,
        "the user's bytes are in the undo point"
    );
}

/// A binary file merges only when nobody changed it since the turn.
#[test]
fn undo_only_restores_an_unchanged_binary_file_and_leaves_a_changed_one() {
    let project = Project::new();
    let (root, store) = (project.root(), &project.store);
    fs::write(root.join("a.bin"), b"a\0one\n").unwrap();
    fs::write(root.join("b.bin"), b"b\0one\n").unwrap();
    project.turn("s", "1", || {
        fs::write(root.join("a.bin"), b"a\0two\n").unwrap();
        fs::write(root.join("b.bin"), b"b\0two\n").unwrap();
    });
    fs::write(root.join("b.bin"), b"b\0user\n").unwrap();
    let options = rewind::UndoOptions {
        turn: Some("1".into()),
        only: true,
        ..Default::default()
    };
    let outcome = store.undo("s", &options).unwrap();
    assert_eq!(fs::read(root.join("a.bin")).unwrap(), b"a\0one\n");
    assert_eq!(fs::read(root.join("b.bin")).unwrap(), b"b\0user\n");
    assert_eq!(outcome.conflicts, vec![rewind::BString::from("b.bin")]);
}

/// A file the user made between two turns, which the later turn deleted: an undo of both found
/// nothing to do (the first turn's "before" lacks it too) and said nothing.
#[test]
fn a_user_file_a_later_turn_deleted_is_not_silently_left_deleted() {
    let project = Project::new();
    let (root, store) = (project.root(), &project.store);
    fs::write(root.join("a.txt"), "a\n").unwrap();
    project.turn("s", "1", || {
        fs::write(root.join("a.txt"), "agent\n").unwrap();
    });
    fs::write(root.join("mine.txt"), "the user's\n").unwrap();
    project.turn("s", "2", || {
        fs::remove_file(root.join("mine.txt")).unwrap();
    });

    let plain = rewind::UndoOptions {
        turn: Some("1".into()),
        ..Default::default()
    };
    let preview = store
        .undo(
            "s",
            &rewind::UndoOptions {
                dry_run: true,
                ..plain.clone()
            },
        )
        .unwrap();
    assert_eq!(preview.conflicts, vec![rewind::BString::from("mine.txt")]);
    assert!(preview.conflict_details[0].mergeable, "{preview:?}");
    let outcome = store
        .undo(
            "s",
            &rewind::UndoOptions {
                merge: true,
                ..plain
            },
        )
        .unwrap();
    assert!(outcome.conflicts.is_empty(), "{outcome:?}");
    assert_eq!(
        fs::read_to_string(root.join("mine.txt")).unwrap(),
        "the user's\n"
    );
    assert_eq!(fs::read_to_string(root.join("a.txt")).unwrap(), "a\n");
}

/// The command line: `--only` needs `--turn` (a usage error, exit 2); human output says what
/// was merged and which conflicts would merge; `--json` carries `merged` and
/// `conflict_details`.
#[test]
fn the_cli_reports_merges_and_mergeable_conflicts() {
    let sb = crate::common::Sandbox::new();
    let p = sb.project("p");
    let body = numbered(1..21);
    p.file("f.txt", &body).file("g.txt", &body);
    let ok = |args: &[&str]| {
        let run = p.rewind(args);
        run.assert_success();
        run
    };
    ok(&["turn", "begin", "--session", "s", "--turn", "1"]);
    p.file("f.txt", body.replace("line 2\n", "agent\n"));
    p.file("g.txt", body.replace("line 2\n", "agent\n"));
    ok(&["turn", "end", "--session", "s", "--turn", "1"]);
    ok(&["turn", "begin", "--session", "s", "--turn", "2"]);
    p.file(
        "f.txt",
        body.replace("line 2\n", "agent\n")
            .replace("line 18\n", "two\n"),
    );
    ok(&["turn", "end", "--session", "s", "--turn", "2"]);
    p.file(
        "g.txt",
        body.replace("line 2\n", "agent\n")
            .replace("line 12\n", "user\n"),
    );

    p.rewind(["undo", "--session", "s", "--only"])
        .assert_code(2);
    let plain = p.rewind(["undo", "--session", "s", "--turn", "1", "--dry-run"]);
    plain.assert_success();
    assert!(
        plain.stderr.contains("would be left alone g.txt") && plain.stderr.contains("use --merge"),
        "{plain}"
    );
    let json = p.rewind(["--json", "undo", "--session", "s", "--turn", "1", "--only"]);
    json.assert_success();
    let outcome = crate::common::one_json(&json);
    assert_eq!(
        outcome["merged"],
        serde_json::json!(["f.txt", "g.txt"]),
        "{json}"
    );
    assert_eq!(
        outcome["written"],
        serde_json::json!(["f.txt", "g.txt"]),
        "{json}"
    );
    assert!(outcome.get("conflict_details").is_none(), "{json}");
    assert_eq!(
        String::from_utf8(p.read("g.txt")).unwrap(),
        body.replace("line 12\n", "user\n")
    );
    let redo = p.rewind(["redo", "--session", "s"]);
    redo.assert_success();
    let human = p.rewind(["undo", "--session", "s", "--turn", "1", "--only"]);
    human.assert_success();
    assert!(
        human.stdout.contains("merged f.txt\nmerged g.txt\n"),
        "{human}"
    );
}

fn undo_opts(turn: &str) -> rewind::UndoOptions {
    rewind::UndoOptions {
        turn: Some(turn.into()),
        ..Default::default()
    }
}

/// Hostile pass F1: an undo of an earlier turn (`--only`, or `--file`) while a later turn of
/// the session was open counted as that turn's work when it ended, so undoing that turn
/// brought the undone change back. It is refused now; undoing the open turn whole is not.
#[test]
fn an_undo_of_part_of_a_session_while_a_later_turn_is_open_is_refused() {
    let project = Project::new();
    let (root, store) = (project.root(), &project.store);
    fs::write(root.join("a.txt"), numbered(1..11)).unwrap();
    store.begin_turn("s", "1").unwrap();
    fs::write(
        root.join("a.txt"),
        numbered(1..11).replace("line 2\n", "one\n"),
    )
    .unwrap();
    store.end_turn("s", "1").unwrap();
    store.begin_turn("s", "2").unwrap();
    fs::write(root.join("b.txt"), "two\n").unwrap();
    let before = read_files(root);
    for options in [
        rewind::UndoOptions {
            only: true,
            ..undo_opts("1")
        },
        rewind::UndoOptions {
            file: Some("a.txt".into()),
            ..undo_opts("1")
        },
    ] {
        let err = store.undo("s", &options).unwrap_err();
        assert_eq!(err.code(), "turn_state", "{options:?}: {err}");
        assert_eq!(read_files(root), before, "{options:?} changed files");
    }
    let outcome = store.undo("s", &undo_opts("1")).unwrap();
    assert!(outcome.conflicts.is_empty(), "{outcome:?}");
    assert_eq!(
        fs::read_to_string(root.join("a.txt")).unwrap(),
        numbered(1..11)
    );
    assert!(!root.join("b.txt").exists());
}

/// Hostile pass F2: a file another session edited while the turn was open holds that edit in
/// the turn's "after"; `--merge` and `--only` wrote the turn's whole "before" over it, without
/// `--force`, and called it mergeable.
#[test]
fn merge_and_only_leave_a_file_another_session_changed_during_the_turn_alone() {
    let project = Project::new();
    let (root, store) = (project.root(), &project.store);
    let a = root.join("a.txt");
    fs::write(&a, numbered(1..10)).unwrap();
    store.begin_turn("B", "1").unwrap();
    fs::write(&a, numbered(1..10).replace("line 6\n", "B\n")).unwrap();
    store.begin_turn("A", "1").unwrap();
    let both = numbered(1..10)
        .replace("line 6\n", "B\n")
        .replace("line 9\n", "A\n");
    fs::write(&a, &both).unwrap();
    store.end_turn("A", "1").unwrap();
    store.end_turn("B", "1").unwrap();
    project.turn("B", "2", || {
        fs::write(root.join("b2.txt"), "b2\n").unwrap();
    });
    for options in [
        rewind::UndoOptions {
            merge: true,
            ..undo_opts("1")
        },
        rewind::UndoOptions {
            only: true,
            ..undo_opts("1")
        },
    ] {
        let outcome = store
            .undo(
                "B",
                &rewind::UndoOptions {
                    dry_run: true,
                    ..options.clone()
                },
            )
            .unwrap();
        assert_eq!(
            outcome.conflicts,
            vec![rewind::BString::from("a.txt")],
            "{options:?}"
        );
        assert!(
            !outcome.conflict_details[0].mergeable,
            "{options:?}: {outcome:?}"
        );
    }
    let outcome = store
        .undo(
            "B",
            &rewind::UndoOptions {
                merge: true,
                ..undo_opts("1")
            },
        )
        .unwrap();
    assert_eq!(outcome.conflicts, vec![rewind::BString::from("a.txt")]);
    assert_eq!(
        fs::read_to_string(&a).unwrap(),
        both,
        "session A's edit is gone"
    );
}

/// Hostile pass F5: `--merge --force` ignored `--merge`: a file that merges cleanly was
/// overwritten with the turn's "before" whole, the user's edit in it gone.
#[test]
fn merge_with_force_still_merges_what_merges_cleanly() {
    let project = Project::new();
    let (root, store) = (project.root(), &project.store);
    let body = numbered(1..8);
    fs::write(root.join("a.txt"), &body).unwrap();
    fs::write(root.join("b.txt"), &body).unwrap();
    store.begin_turn("s", "1").unwrap();
    let agent = body.replace("line 2\n", "agent\n");
    fs::write(root.join("a.txt"), &agent).unwrap();
    fs::write(root.join("b.txt"), &agent).unwrap();
    store.end_turn("s", "1").unwrap();
    fs::write(root.join("a.txt"), agent.replace("line 6\n", "user\n")).unwrap();
    fs::write(root.join("b.txt"), body.replace("line 2\n", "user\n")).unwrap();
    let options = rewind::UndoOptions {
        merge: true,
        force: true,
        ..undo_opts("1")
    };
    let outcome = store.undo("s", &options).unwrap();
    assert_eq!(outcome.merged, vec![rewind::BString::from("a.txt")]);
    assert_eq!(
        fs::read_to_string(root.join("a.txt")).unwrap(),
        body.replace("line 6\n", "user\n")
    );
    // The overlap is forced back to the turn's before, as `--force` says.
    assert_eq!(fs::read_to_string(root.join("b.txt")).unwrap(), body);
}

/// Hostile pass F3: `--only` said nothing of a file the turn created that is ignored now (a
/// range undo lists it as kept).
#[test]
fn undo_only_lists_a_created_file_that_is_ignored_now_as_kept() {
    let project = Project::new();
    let (root, store) = (project.root(), &project.store);
    fs::write(root.join("z.txt"), "z\n").unwrap();
    project.turn("s", "1", || {
        fs::write(root.join("x.txt"), "created\n").unwrap();
    });
    fs::write(root.join(".gitignore"), "x.txt\n").unwrap();
    let options = rewind::UndoOptions {
        only: true,
        ..undo_opts("1")
    };
    let outcome = store.undo("s", &options).unwrap();
    assert_eq!(
        outcome.kept,
        vec![rewind::BString::from("x.txt")],
        "{outcome:?}"
    );
    assert!(root.join("x.txt").exists());
}

/// Fifteenth hostile pass: `--only` where a directory now stands at a file the turn deleted
/// listed the directory as `kept` ("the snapshot could not see it"), the file not back. It is a
/// conflict `--force` cannot take either (`in_the_way`); an ignored file standing there is a
/// conflict `--force` takes (saved into the undo point first). Nothing of the user's is touched.
#[test]
fn undo_only_of_a_deletion_where_something_unseen_stands_now_is_a_conflict() {
    for (what, force) in [
        ("dir", false),
        ("dir", true),
        ("empty dir", false),
        ("ignored", false),
        ("ignored", true),
    ] {
        let project = Project::new();
        let (root, store) = (project.root(), &project.store);
        let x = root.join("x.txt");
        fs::write(&x, "the turn deletes this\n").unwrap();
        fs::write(root.join("z.txt"), "z\n").unwrap();
        project.turn("s", "1", || fs::remove_file(&x).unwrap());
        match what {
            "dir" => {
                fs::create_dir(&x).unwrap();
                fs::write(x.join("mine.txt"), "mine\n").unwrap();
            }
            "empty dir" => fs::create_dir(&x).unwrap(),
            _ => {
                fs::write(root.join(".gitignore"), "x.txt\n").unwrap();
                fs::write(&x, "ignored, mine\n").unwrap();
            }
        }
        let options = rewind::UndoOptions {
            only: true,
            force,
            ..undo_opts("1")
        };
        let outcome = store.undo("s", &options).unwrap();
        let label = format!("{what}, force {force}: {outcome:?}");
        assert!(outcome.kept.is_empty(), "{label}");
        let x_only = vec![rewind::BString::from("x.txt")];
        match (what, force) {
            ("dir", _) => {
                assert_eq!(outcome.conflicts, x_only, "{label}");
                assert_eq!(outcome.in_the_way, x_only, "{label}");
                assert_eq!(fs::read_to_string(x.join("mine.txt")).unwrap(), "mine\n");
            }
            ("ignored", false) => {
                assert_eq!(outcome.conflicts, x_only, "{label}");
                assert!(outcome.in_the_way.is_empty(), "{label}");
                assert_eq!(fs::read_to_string(&x).unwrap(), "ignored, mine\n");
            }
            // An empty directory is replaced; an ignored file with --force is saved first.
            _ => {
                assert_eq!(outcome.written, x_only, "{label}");
                assert_eq!(fs::read_to_string(&x).unwrap(), "the turn deletes this\n");
                if what == "ignored" {
                    // (Still ignored: only a forced restore replaces it.)
                    let forced = rewind::RestoreOptions {
                        force: true,
                        ..Default::default()
                    };
                    store.restore(outcome.undo, &forced).unwrap();
                    assert_eq!(fs::read_to_string(&x).unwrap(), "ignored, mine\n");
                }
            }
        }
    }
}

/// Fifteenth hostile pass: an `undo --file` (or `--only --file`) that changed nothing was
/// recorded as an undo, so the next `redo` gave back that nothing, not the undo before it.
#[test]
fn an_undo_of_a_file_that_changes_nothing_is_not_what_redo_gives_back() {
    for only in [false, true] {
        let project = Project::new();
        let (root, store) = (project.root(), &project.store);
        fs::write(root.join("a.txt"), "a\n").unwrap();
        fs::write(root.join("b.txt"), "b\n").unwrap();
        project.turn("s", "1", || {
            fs::write(root.join("a.txt"), "agent a\n").unwrap();
            fs::write(root.join("b.txt"), "agent b\n").unwrap();
        });
        let of = |file: &str| rewind::UndoOptions {
            file: Some(file.into()),
            only,
            ..undo_opts("1")
        };
        let first = store.undo("s", &of("a.txt")).unwrap();
        assert_eq!(first.written, vec![rewind::BString::from("a.txt")]);
        let again = store.undo("s", &of("a.txt")).unwrap();
        assert!(
            again.written.is_empty() && again.conflicts.is_empty(),
            "{again:?}"
        );
        let redone = store.redo("s", &Default::default()).unwrap();
        assert_eq!(
            redone.written,
            vec![rewind::BString::from("a.txt")],
            "only {only}: {redone:?}"
        );
        assert_eq!(fs::read_to_string(root.join("a.txt")).unwrap(), "agent a\n");
        assert_eq!(fs::read_to_string(root.join("b.txt")).unwrap(), "agent b\n");
    }
}

/// Found by the sixteenth hostile pass: an `undo --file` that left its file alone (someone
/// else's edit) and changed nothing was recorded, so the next `redo` gave back that nothing,
/// exiting 0, and the undo before it needed a second `redo`.
#[test]
fn an_undo_that_only_left_files_alone_is_not_what_redo_gives_back() {
    let project = Project::new();
    let (root, store) = (project.root(), &project.store);
    fs::write(root.join("a"), "a\n").unwrap();
    fs::write(root.join("b"), "b\n").unwrap();
    project.turn("s", "1", || fs::write(root.join("a"), "agent a\n").unwrap());
    project.turn("s", "2", || fs::write(root.join("b"), "agent b\n").unwrap());
    store.undo("s", &undo_opts("2")).unwrap();
    fs::write(root.join("a"), "the user's a\n").unwrap();
    let options = rewind::UndoOptions {
        file: Some("a".into()),
        ..undo_opts("1")
    };
    let left = store.undo("s", &options).unwrap();
    assert_eq!(left.conflicts, vec![rewind::BString::from("a")], "{left:?}");
    let redone = store.redo("s", &Default::default()).unwrap();
    assert_eq!(
        redone.written,
        vec![rewind::BString::from("b")],
        "{redone:?}"
    );
    assert_eq!(fs::read_to_string(root.join("b")).unwrap(), "agent b\n");
    assert_eq!(
        fs::read_to_string(root.join("a")).unwrap(),
        "the user's a\n"
    );
}

/// Found by the sixteenth hostile pass: a `redo` that left every file alone (changed since the
/// undo) marked the turn "done" though none of its work was back.
#[test]
fn a_redo_that_left_everything_alone_gives_no_turn_back() {
    let project = Project::new();
    let (root, store) = (project.root(), &project.store);
    fs::write(root.join("f"), "f\n").unwrap();
    project.turn("s", "1", || fs::write(root.join("f"), "agent\n").unwrap());
    store.undo("s", &undo_opts("1")).unwrap();
    fs::write(root.join("f"), "the user's\n").unwrap();
    let rolled_back = |store: &rewind::Store| store.turns(Some("s")).unwrap()[0].rolled_back;
    let left = store.redo("s", &Default::default()).unwrap();
    assert_eq!(left.conflicts, vec![rewind::BString::from("f")], "{left:?}");
    assert!(rolled_back(store), "the turn's work is not back");
    let forced = rewind::RedoOptions {
        force: true,
        ..Default::default()
    };
    let redone = store.redo("s", &forced).unwrap();
    assert_eq!(
        redone.written,
        vec![rewind::BString::from("f")],
        "{redone:?}"
    );
    assert!(!rolled_back(store));
    assert_eq!(fs::read_to_string(root.join("f")).unwrap(), "agent\n");
}

/// Found by the sixteenth hostile pass: a file the turn modified, where a directory or a FIFO
/// stands now, was left alone without `in_the_way` (the CLI said "(use --force)", and `--force`
/// leaves it too).
#[test]
fn a_modified_file_with_a_directory_or_fifo_in_its_place_is_in_the_way() {
    for what in ["dir", "fifo"] {
        for only in [false, true] {
            let project = Project::new();
            let (root, store) = (project.root(), &project.store);
            fs::write(root.join("f"), "f\n").unwrap();
            fs::write(root.join("z"), "z\n").unwrap();
            project.turn("s", "1", || fs::write(root.join("f"), "agent\n").unwrap());
            fs::remove_file(root.join("f")).unwrap();
            put_obstacle(root, "f", what);
            let options = rewind::UndoOptions {
                only,
                ..undo_opts("1")
            };
            let outcome = store.undo("s", &options).unwrap();
            let f = vec![rewind::BString::from("f")];
            assert_eq!(outcome.conflicts, f, "{what}, only {only}: {outcome:?}");
            assert_eq!(outcome.in_the_way, f, "{what}, only {only}: {outcome:?}");
        }
    }
}

/// What the sixteenth hostile pass put at a moved file's other name.
const OBSTACLES: [&str; 5] = ["user file", "dir", "fifo", "ignored file", "symlink"];

/// Put `what` at `path` (a user's file, a directory holding one, a FIFO, an ignored file, a
/// symlink).
fn put_obstacle(root: &Path, path: &str, what: &str) {
    let at = root.join(path);
    match what {
        "user file" => fs::write(&at, "the user's new file\n").unwrap(),
        "dir" => {
            fs::create_dir(&at).unwrap();
            fs::write(at.join("mine"), "mine\n").unwrap();
        }
        "fifo" => {
            let made = Command::new("mkfifo").arg(&at).status().expect("mkfifo");
            assert!(made.success());
        }
        "ignored file" => {
            fs::write(root.join(".gitignore"), format!("{path}\n")).unwrap();
            fs::write(&at, "ignored, the user's\n").unwrap();
        }
        _ => std::os::unix::fs::symlink("elsewhere", &at).unwrap(),
    }
}

/// The moved file's text, and whatever `put_obstacle` left, are on disk after it.
fn assert_moved_text_kept(root: &Path, text: &str, label: &str) {
    let names = ["config.yaml", "config.yml"];
    // (Only regular files are read: a FIFO would wait for a writer.)
    let held = names.iter().any(|n| {
        let path = root.join(n);
        fs::symlink_metadata(&path).is_ok_and(|m| m.is_file())
            && fs::read_to_string(&path).is_ok_and(|t| t == text)
    });
    assert!(held, "{label}: the moved file is under neither name");
}

/// Found by the sixteenth hostile pass: undoing a move when something new stood at the old name
/// (a user's file, a directory, a FIFO, an ignored file, a symlink) deleted the new name and left
/// the old one alone: the file was under neither name (its bytes only in the undo point). The
/// move was looked for in the project's difference from the target, where the old name is no
/// longer "added"; and what stood in the way was only found as the run decided, after the move
/// was paired. `redo` did the same the other way round.
#[test]
fn a_move_is_never_half_undone_or_half_redone_around_something_at_the_other_name() {
    let text = "port: 80\nhost: x\n";
    let modes = [
        ("plain", undo_opts("1")),
        (
            "--force",
            rewind::UndoOptions {
                force: true,
                ..undo_opts("1")
            },
        ),
        (
            "--file config.yml",
            rewind::UndoOptions {
                file: Some("config.yml".into()),
                ..undo_opts("1")
            },
        ),
        (
            "--only",
            rewind::UndoOptions {
                only: true,
                ..undo_opts("1")
            },
        ),
        (
            "--only --force",
            rewind::UndoOptions {
                only: true,
                force: true,
                ..undo_opts("1")
            },
        ),
        (
            "--merge",
            rewind::UndoOptions {
                merge: true,
                ..undo_opts("1")
            },
        ),
    ];
    for what in OBSTACLES {
        for (mode, options) in &modes {
            let label = format!("undo {mode} with a {what} at the old name");
            let project = Project::new();
            let (root, store) = (project.root(), &project.store);
            fs::write(root.join("config.yaml"), text).unwrap();
            fs::write(root.join("z"), "z\n").unwrap();
            project.turn("s", "1", || {
                fs::rename(root.join("config.yaml"), root.join("config.yml")).unwrap();
            });
            put_obstacle(root, "config.yaml", what);
            let outcome = store.undo("s", options).unwrap();
            assert_moved_text_kept(root, text, &format!("{label}: {outcome:?}"));
        }
        // The other way: the undo moved it back; then something stands at the new name.
        let label = format!("redo with a {what} at the new name");
        let project = Project::new();
        let (root, store) = (project.root(), &project.store);
        fs::write(root.join("config.yaml"), text).unwrap();
        fs::write(root.join("z"), "z\n").unwrap();
        project.turn("s", "1", || {
            fs::rename(root.join("config.yaml"), root.join("config.yml")).unwrap();
        });
        store.undo("s", &undo_opts("1")).unwrap();
        put_obstacle(root, "config.yml", what);
        let outcome = store.redo("s", &Default::default()).unwrap();
        assert_moved_text_kept(root, text, &format!("{label}: {outcome:?}"));
        assert!(!outcome.conflicts.is_empty(), "{label}: {outcome:?}");
    }
}

/// Found by the model (seed 1 of the two sessions): with `--merge --force`, a path someone else
/// changed that already held the target (no merge, a conflict forced) was "written" with its
/// own bytes: listed as changed, so a later `redo --force` of that undo overwrote it.
#[test]
fn merge_with_force_writes_nothing_where_the_project_already_holds_the_target() {
    let project = Project::new();
    let (root, store) = (project.root(), &project.store);
    let f = root.join("f.txt");
    fs::write(&f, "a\n").unwrap();
    project.turn("s", "1", || {
        fs::write(&f, "b\n").unwrap();
    });
    fs::write(&f, "c\n").unwrap(); // the user's
    project.turn("s", "2", || {
        fs::write(&f, "a\n").unwrap();
    });
    let options = rewind::UndoOptions {
        merge: true,
        force: true,
        ..undo_opts("1")
    };
    let outcome = store.undo("s", &options).unwrap();
    assert!(outcome.written.is_empty(), "{outcome:?}");
    assert_eq!(fs::read_to_string(&f).unwrap(), "a\n");
}

/// Hostile pass: turn summaries list a move as one rename, but undo worked per path: `--file`
/// of the new name deleted it and left the old one gone (the file under neither name), and
/// `--file` of the old name made a second copy.
#[test]
fn undoing_one_name_of_a_moved_file_undoes_the_move() {
    for name in ["b.txt", "a.txt"] {
        let project = Project::new();
        let (root, store) = (project.root(), &project.store);
        fs::write(root.join("a.txt"), numbered(1..21)).unwrap();
        fs::write(root.join("o"), "o\n").unwrap();
        project.turn("s", "1", || {
            fs::rename(root.join("a.txt"), root.join("b.txt")).unwrap();
        });
        let options = rewind::UndoOptions {
            file: Some(name.into()),
            ..undo_opts("1")
        };
        let outcome = store.undo("s", &options).unwrap();
        assert!(outcome.conflicts.is_empty(), "--file {name}: {outcome:?}");
        assert_eq!(
            fs::read_to_string(root.join("a.txt")).unwrap(),
            numbered(1..21)
        );
        assert!(
            !root.join("b.txt").exists(),
            "--file {name} left a second copy"
        );
    }
}

/// Hostile pass: a move whose new name one session announced while another session's turn was
/// open (the old name shared): undo deleted the new name and left the old one alone, so the
/// file was under neither name. A move is undone whole or left alone whole.
#[test]
fn a_move_half_of_which_is_someone_elses_is_left_alone_whole() {
    let project = Project::new();
    let (root, store) = (project.root(), &project.store);
    fs::write(root.join("a.txt"), numbered(1..21)).unwrap();
    fs::write(root.join("other"), "o\n").unwrap();
    store.begin_turn("L", "1").unwrap();
    store.begin_turn("R", "1").unwrap();
    store.track_file("L", "1", "b.txt").unwrap();
    fs::rename(root.join("a.txt"), root.join("b.txt")).unwrap();
    store.end_turn("L", "1").unwrap();
    store.end_turn("R", "1").unwrap();
    let outcome = store.undo_last("L", false).unwrap();
    assert!(
        outcome.deleted.is_empty() && outcome.written.is_empty(),
        "{outcome:?}"
    );
    assert_eq!(
        fs::read_to_string(root.join("b.txt")).unwrap(),
        numbered(1..21)
    );
}

/// Hostile pass: `--only` of a move that a later turn edited brought the old name back and
/// left the edited new one: two copies. The new name is a conflict, so the old stays gone too.
#[test]
fn undo_only_of_a_move_a_later_turn_edited_makes_no_second_copy() {
    let project = Project::new();
    let (root, store) = (project.root(), &project.store);
    fs::write(root.join("a.txt"), numbered(1..21)).unwrap();
    project.turn("s", "1", || {
        fs::rename(root.join("a.txt"), root.join("b.txt")).unwrap();
    });
    project.turn("s", "2", || {
        fs::write(root.join("b.txt"), numbered(1..22)).unwrap();
    });
    let options = rewind::UndoOptions {
        only: true,
        ..undo_opts("1")
    };
    let outcome = store.undo("s", &options).unwrap();
    assert!(!root.join("a.txt").exists(), "{outcome:?}");
    assert_eq!(
        fs::read_to_string(root.join("b.txt")).unwrap(),
        numbered(1..22)
    );
    let mut conflicts = outcome.conflicts.clone();
    conflicts.sort();
    assert_eq!(
        conflicts,
        vec![
            rewind::BString::from("a.txt"),
            rewind::BString::from("b.txt")
        ]
    );
}

/// Found by a hostile pass (r45): `--only` of a turn whose files a later turn renamed (its
/// edit of `m.txt`, now `m2.txt`; the file it made, `x.txt`, now `y.txt`) said nothing of them,
/// exit 0, the turn marked rolled back, its work still in the project. The turn's work is
/// taken out where the file stands now, as `git revert` follows a rename (the merge is `git
/// merge-file`'s); a renamed file edited since cannot lose what the turn made, a conflict.
#[test]
fn undo_only_follows_a_rename_a_later_turn_made() {
    let project = Project::new();
    let (root, store) = (project.root(), &project.store);
    let edited = numbered(1..21).replace("line 10\n", "turn one\n");
    fs::write(root.join("m.txt"), numbered(1..21)).unwrap();
    project.turn("s", "1", || {
        fs::write(root.join("m.txt"), &edited).unwrap();
        fs::write(root.join("x.txt"), numbered(200..231)).unwrap();
        fs::write(root.join("z.txt"), numbered(300..331)).unwrap();
    });
    project.turn("s", "2", || {
        fs::rename(root.join("m.txt"), root.join("m2.txt")).unwrap();
        let now = edited.replace("line 19\n", "turn two\n");
        fs::write(root.join("m2.txt"), now).unwrap();
        fs::rename(root.join("x.txt"), root.join("y.txt")).unwrap();
        fs::rename(root.join("z.txt"), root.join("w.txt")).unwrap();
        let mut w = fs::OpenOptions::new()
            .append(true)
            .open(root.join("w.txt"))
            .unwrap();
        std::io::Write::write_all(&mut w, b"turn two\n").unwrap();
    });
    let m2_now = fs::read(root.join("m2.txt")).unwrap();
    let w_now = fs::read(root.join("w.txt")).unwrap();
    let options = rewind::UndoOptions {
        only: true,
        ..undo_opts("1")
    };
    let outcome = store.undo("s", &options).unwrap();
    let (want, clean) = git_merge_file(
        &m2_now,
        edited.as_bytes(),
        numbered(1..21).as_bytes(),
        ["now", "after", "before"],
    );
    assert!(clean);
    assert_eq!(fs::read(root.join("m2.txt")).unwrap(), want, "{outcome:?}");
    assert!(!root.join("y.txt").exists(), "{outcome:?}");
    assert!(!root.join("m.txt").exists() && !root.join("x.txt").exists());
    assert_eq!(
        fs::read(root.join("w.txt")).unwrap(),
        w_now,
        "edited since: left"
    );
    let names = |paths: &[rewind::BString]| paths.iter().map(|p| p.to_string()).collect::<Vec<_>>();
    assert_eq!(names(&outcome.written), ["m2.txt"]);
    assert_eq!(names(&outcome.deleted), ["y.txt"]);
    assert_eq!(names(&outcome.conflicts), ["w.txt"]);
}

/// Found by the hostile pass after the rename-following (r46): a move the turn made (`a` to
/// `b`), renamed again since (`c`). With a new file at `a`, the undo deleted `c` and left `a`
/// alone: the moved bytes under neither name. Edited at `c`, it wrote `a` and left `c`: two
/// copies. The move is undone as one at the names it has now, or left alone whole. And an
/// empty file made elsewhere is no rename of the turn's (`git revert` does not follow one).
#[test]
fn undo_only_of_a_move_renamed_again_since_is_undone_whole_or_left_whole() {
    for (case, at_a) in [("new file at the old name", true), ("edited since", false)] {
        let project = Project::new();
        let (root, store) = (project.root(), &project.store);
        fs::write(root.join("a.txt"), numbered(1..21)).unwrap();
        project.turn("s", "1", || {
            fs::rename(root.join("a.txt"), root.join("b.txt")).unwrap();
        });
        fs::rename(root.join("b.txt"), root.join("c.txt")).unwrap();
        match at_a {
            true => fs::write(root.join("a.txt"), "the user's new a\n").unwrap(),
            false => fs::write(root.join("c.txt"), numbered(1..22)).unwrap(),
        }
        let (a_now, c_now) = (
            fs::read(root.join("a.txt")).ok(),
            fs::read(root.join("c.txt")),
        );
        let options = rewind::UndoOptions {
            only: true,
            ..undo_opts("1")
        };
        let outcome = store.undo("s", &options).unwrap();
        assert!(
            outcome.written.is_empty() && outcome.deleted.is_empty(),
            "{case}: {outcome:?}"
        );
        assert_eq!(fs::read(root.join("a.txt")).ok(), a_now, "{case}");
        assert_eq!(
            fs::read(root.join("c.txt")).unwrap(),
            c_now.unwrap(),
            "{case}"
        );
        let mut conflicts: Vec<String> = outcome.conflicts.iter().map(|p| p.to_string()).collect();
        conflicts.sort();
        assert_eq!(conflicts, ["a.txt", "c.txt"], "{case}");
    }

    let project = Project::new();
    let (root, store) = (project.root(), &project.store);
    fs::write(root.join("base.txt"), "base\n").unwrap();
    project.turn("s", "1", || {
        fs::create_dir(root.join("a")).unwrap();
        fs::write(root.join("a/__init__.py"), "").unwrap();
    });
    fs::remove_dir_all(root.join("a")).unwrap();
    fs::create_dir(root.join("b")).unwrap();
    fs::write(root.join("b/__init__.py"), "").unwrap();
    let options = rewind::UndoOptions {
        only: true,
        ..undo_opts("1")
    };
    let outcome = store.undo("s", &options).unwrap();
    assert!(root.join("b/__init__.py").exists(), "{outcome:?}");
    assert!(outcome.deleted.is_empty(), "{outcome:?}");
}

/// The forced `--only` of a path another session changed during the turn (no merge can tell
/// their edit from the turn's) writes the turn's before; for a file renamed since, that is the
/// before of the turn's own name, written at the new one (the first version of the
/// rename-following looked it up at the new name, which the turn never had, and deleted it).
#[test]
fn undo_only_force_of_a_shared_file_renamed_since_writes_the_turns_before() {
    let project = Project::new();
    let (root, store) = (project.root(), &project.store);
    fs::write(root.join("f.txt"), numbered(1..21)).unwrap();
    store.begin_turn("a", "1").unwrap();
    store.begin_turn("b", "1").unwrap();
    fs::write(root.join("f.txt"), numbered(1..22)).unwrap();
    store.end_turn("b", "1").unwrap();
    store.end_turn("a", "1").unwrap();
    fs::rename(root.join("f.txt"), root.join("g.txt")).unwrap();
    let options = rewind::UndoOptions {
        only: true,
        force: true,
        ..undo_opts("1")
    };
    let outcome = store.undo("a", &options).unwrap();
    assert_eq!(
        fs::read_to_string(root.join("g.txt")).ok(),
        Some(numbered(1..21)),
        "{outcome:?}"
    );
    assert_eq!(outcome.written, vec![rewind::BString::from("g.txt")]);
}

/// r47: a move the turn made (`a` to `b`, with an edit) that a later turn reversed (`b` back
/// to `a`) was a conflict at `a` ("use --force"), and the turn was marked rolled back with
/// its edit still in the project. `git revert` follows the rename back: the turn's edit is
/// taken out of `a` (`git merge-file`'s result when `a` was edited since too).
#[test]
fn undo_only_of_a_move_a_later_turn_reversed_takes_the_edit_out_at_the_old_name() {
    for edited_since in [false, true] {
        let project = Project::new();
        let (root, store) = (project.root(), &project.store);
        let moved = numbered(1..31).replace("line 5\n", "turn one\n");
        fs::write(root.join("a.txt"), numbered(1..31)).unwrap();
        project.turn("s", "1", || {
            fs::remove_file(root.join("a.txt")).unwrap();
            fs::write(root.join("b.txt"), &moved).unwrap();
        });
        project.turn("s", "2", || {
            fs::rename(root.join("b.txt"), root.join("a.txt")).unwrap();
        });
        let a_now = match edited_since {
            true => moved.replace("line 25\n", "the user's\n"),
            false => moved.clone(),
        };
        fs::write(root.join("a.txt"), &a_now).unwrap();
        let options = rewind::UndoOptions {
            only: true,
            ..undo_opts("1")
        };
        let outcome = store.undo("s", &options).unwrap();
        let (want, clean) = git_merge_file(
            a_now.as_bytes(),
            moved.as_bytes(),
            numbered(1..31).as_bytes(),
            ["now", "after", "before"],
        );
        assert!(clean);
        assert_eq!(fs::read(root.join("a.txt")).unwrap(), want, "{outcome:?}");
        assert!(!root.join("b.txt").exists());
        assert_eq!(outcome.written, vec![rewind::BString::from("a.txt")]);
        assert!(outcome.conflicts.is_empty(), "{outcome:?}");
    }
}

/// Found while making a name the turn moved a file from take it back: another file moved onto
/// that name since (the turn moved `c` to `d` and edited `e`; then `mv e c`) must not be
/// undone twice at `c` (once as the turn's `c`, once as its `e`): neither is followed, and the
/// three are left alone, as they were.
#[test]
fn undo_only_never_plans_a_path_twice_when_another_file_took_a_name_the_turn_moved_from() {
    let project = Project::new();
    let (root, store) = (project.root(), &project.store);
    fs::write(root.join("c.txt"), numbered(1..31)).unwrap();
    fs::write(root.join("e.txt"), numbered(100..131)).unwrap();
    project.turn("s", "1", || {
        fs::rename(root.join("c.txt"), root.join("d.txt")).unwrap();
        fs::write(root.join("e.txt"), numbered(100..132)).unwrap();
    });
    fs::rename(root.join("e.txt"), root.join("c.txt")).unwrap();
    let files = read_files(root);
    let options = rewind::UndoOptions {
        only: true,
        ..undo_opts("1")
    };
    let outcome = store.undo("s", &options).unwrap();
    let mut conflicts: Vec<String> = outcome.conflicts.iter().map(|p| p.to_string()).collect();
    conflicts.sort();
    assert_eq!(conflicts, ["c.txt", "d.txt", "e.txt"], "{outcome:?}");
    assert!(outcome.written.is_empty() && outcome.deleted.is_empty());
    assert_eq!(read_files(root), files);
}

/// r47: `undo --only` said "use --force" of a conflict no merge can take (here a file the turn
/// edited that was deleted since; also a file added on one side, a binary or a symlink both
/// changed), and `--force` then left it alone too. With `--force` such a path now takes the
/// turn's before, whole, as a plain undo writes it (the bytes it replaces are in the undo point).
#[test]
fn undo_only_force_writes_the_turns_before_where_no_merge_can() {
    let project = Project::new();
    let (root, store) = (project.root(), &project.store);
    fs::write(root.join("f.txt"), numbered(1..21)).unwrap();
    fs::write(root.join("bin"), b"\0one\0").unwrap();
    project.turn("s", "1", || {
        fs::write(root.join("f.txt"), numbered(1..22)).unwrap();
        fs::write(root.join("bin"), b"\0two\0").unwrap();
    });
    fs::remove_file(root.join("f.txt")).unwrap();
    fs::write(root.join("bin"), b"\0the user's\0").unwrap();
    let only = rewind::UndoOptions {
        only: true,
        dry_run: true,
        ..undo_opts("1")
    };
    let outcome = store.undo("s", &only).unwrap();
    let mut conflicts: Vec<String> = outcome.conflicts.iter().map(|p| p.to_string()).collect();
    conflicts.sort();
    assert_eq!(conflicts, ["bin", "f.txt"], "{outcome:?}");
    let forced = rewind::UndoOptions {
        force: true,
        dry_run: false,
        ..only
    };
    let outcome = store.undo("s", &forced).unwrap();
    assert!(outcome.conflicts.is_empty(), "{outcome:?}");
    assert_eq!(
        fs::read_to_string(root.join("f.txt")).unwrap(),
        numbered(1..21)
    );
    assert_eq!(fs::read(root.join("bin")).unwrap(), b"\0one\0");
    store.restore(outcome.undo, &Default::default()).unwrap();
    assert_eq!(fs::read(root.join("bin")).unwrap(), b"\0the user's\0");
    assert!(!root.join("f.txt").exists());
}

/// r49: the turn itself moved a file and wrote a new one at the old name (`mv f g; echo NEW >
/// f`: to `git diff -M` a modified `f` and an added `g`), then the user edited `g`. The undo
/// wrote `f` back and left `g`: two copies of the moved file. The move is now found as `git
/// diff -B -M` finds it, and undone whole (with `--force`: `f` as before, `g` gone, its edit
/// in the undo point) or left whole.
#[test]
fn undo_only_of_a_move_with_a_new_file_at_the_old_name_is_undone_whole_or_left_whole() {
    for force in [false, true] {
        let project = Project::new();
        let (root, store) = (project.root(), &project.store);
        fs::write(root.join("f.txt"), numbered(1..21)).unwrap();
        project.turn("s", "1", || {
            fs::rename(root.join("f.txt"), root.join("g.txt")).unwrap();
            fs::write(root.join("f.txt"), "NEW\n").unwrap();
        });
        let g_now = numbered(1..21).replace("line 2\n", "the user's\n");
        fs::write(root.join("g.txt"), &g_now).unwrap();
        let options = rewind::UndoOptions {
            only: true,
            force,
            ..undo_opts("1")
        };
        let outcome = store.undo("s", &options).unwrap();
        let files = (
            fs::read_to_string(root.join("f.txt")).unwrap(),
            fs::read_to_string(root.join("g.txt")).ok(),
        );
        match force {
            false => {
                assert_eq!(files, ("NEW\n".into(), Some(g_now)), "{outcome:?}");
                assert!(outcome.written.is_empty() && outcome.deleted.is_empty());
            }
            true => {
                assert_eq!(files, (numbered(1..21), None), "{outcome:?}");
                store.restore(outcome.undo, &Default::default()).unwrap();
                assert_eq!(fs::read_to_string(root.join("g.txt")).unwrap(), g_now);
            }
        }
    }
}

/// r50: a turn that swapped two files (`a` and `b`) or rotated three names (`mv f g; mv h
/// f`), then a user edit of one of them. The swap was taken for two edits in place: `b` was
/// written back while the edited `a` was left, the file `a` held before the turn under no
/// name. In the rotation, `h` was written back beside its copy at `f`. The turn's moves are
/// now linked into one ring of names (a rewrite broken in both halves, as `git diff -B -M`):
/// all of them are undone, or all left alone; with nothing edited since, all are undone and
/// `redo` brings the turn back whole.
#[test]
fn undo_only_of_swapped_or_rotated_files_is_undone_whole_or_left_whole() {
    let (a, b) = (numbered(1..41), numbered(100..141));
    for (case, edited) in [("swap", true), ("rotation", true), ("rotation", false)] {
        let project = Project::new();
        let (root, store) = (project.root(), &project.store);
        let names: &[&str] = match case {
            "swap" => &["a.txt", "b.txt"],
            _ => &["f.txt", "g.txt", "h.txt"],
        };
        fs::write(root.join(names[0]), &a).unwrap();
        let last = names[names.len() - 1];
        fs::write(root.join(last), &b).unwrap();
        let before = read_all(root, names);
        project.turn("s", "1", || {
            fs::rename(root.join(names[0]), root.join("tmp")).unwrap();
            fs::rename(root.join(last), root.join(names[0])).unwrap();
            fs::rename(root.join("tmp"), root.join(names[1])).unwrap();
        });
        if edited {
            let edited = fs::read_to_string(root.join(names[1]))
                .unwrap()
                .replace("line 5\n", "the user's\n");
            fs::write(root.join(names[1]), edited).unwrap();
        }
        let now = read_all(root, names);
        let options = rewind::UndoOptions {
            only: true,
            ..undo_opts("1")
        };
        let outcome = store.undo("s", &options).unwrap();
        match edited {
            true => {
                assert_eq!(read_all(root, names), now, "{case}: {outcome:?}");
                assert!(outcome.written.is_empty() && outcome.deleted.is_empty());
                assert_eq!(outcome.conflicts.len(), names.len(), "{case}: {outcome:?}");
            }
            false => {
                assert_eq!(read_all(root, names), before, "{case}: {outcome:?}");
                store.redo("s", &Default::default()).unwrap();
                assert_eq!(read_all(root, names), now, "{case}: the redo");
            }
        }
    }
}

/// The files at `names`, `None` where none stands.
fn read_all(root: &Path, names: &[&str]) -> Vec<Option<String>> {
    names
        .iter()
        .map(|n| fs::read_to_string(root.join(n)).ok())
        .collect()
}

/// r50: `undo --only` of a turn's edit followed the file a later turn renamed (`f` to `h`)
/// and took the edit out at `h`, recorded as the session's own change; undoing the renaming
/// turn then deleted `h` and wrote `f` back with the edit, and both turns showed rolled back.
/// A write at the name a file was renamed to since is recorded as a merge (it keeps the later
/// rename): the later undo leaves both names alone, as it does for a merged file in place.
#[test]
fn an_undo_of_a_later_rename_leaves_alone_what_an_undo_only_took_out_at_the_new_name() {
    let project = Project::new();
    let (root, store) = (project.root(), &project.store);
    fs::write(root.join("f.txt"), numbered(1..51)).unwrap();
    let edited = numbered(1..51).replace("line 5\n", "five\n");
    project.turn("s", "1", || fs::write(root.join("f.txt"), &edited).unwrap());
    project.turn("s", "2", || {
        fs::rename(root.join("f.txt"), root.join("h.txt")).unwrap();
    });
    let options = rewind::UndoOptions {
        only: true,
        ..undo_opts("1")
    };
    let only = store.undo("s", &options).unwrap();
    assert_eq!(only.merged, vec![rewind::BString::from("h.txt")]);
    assert_eq!(
        fs::read_to_string(root.join("h.txt")).unwrap(),
        numbered(1..51)
    );
    let outcome = store.undo_last("s", false).unwrap();
    assert!(
        outcome.written.is_empty() && outcome.deleted.is_empty(),
        "{outcome:?}"
    );
    assert!(!root.join("f.txt").exists());
    assert_eq!(
        fs::read_to_string(root.join("h.txt")).unwrap(),
        numbered(1..51)
    );
}

/// r48: a file the turn edited, renamed since, with a new file at its old name (`mv f g;
/// echo NEW > f`). The old name was not free, so no rename was followed: `f` was a conflict
/// (with `--force`, the turn's before written over the new file) and the turn's edit stayed
/// in `g`. The rewritten `f` is now broken as `git diff -B -M` breaks it, and its old content
/// found at `g`: the turn's work is taken out of `g` (`git merge-file`'s result), the new `f`
/// is left as it is; forced, the turn's before goes to `g`, never over the new file.
#[test]
fn undo_only_follows_a_rename_with_a_new_file_at_the_old_name() {
    for force in [false, true] {
        let project = Project::new();
        let (root, store) = (project.root(), &project.store);
        let edited = numbered(1..21).replace("line 10\n", "turn one\n");
        fs::write(root.join("f.txt"), numbered(1..21)).unwrap();
        store.begin_turn("s", "1").unwrap();
        if force {
            // Another session's edit during the turn: only `--force` undoes the file, back to
            // the turn's before.
            store.begin_turn("other", "1").unwrap();
            fs::write(root.join("f.txt"), &edited).unwrap();
            store.end_turn("other", "1").unwrap();
        }
        fs::write(root.join("f.txt"), &edited).unwrap();
        store.end_turn("s", "1").unwrap();
        let g_now = edited.replace("line 19\n", "the user's\n");
        fs::remove_file(root.join("f.txt")).unwrap();
        fs::write(root.join("g.txt"), &g_now).unwrap();
        fs::write(root.join("f.txt"), "NEW\n").unwrap();
        let options = rewind::UndoOptions {
            only: true,
            force,
            ..undo_opts("1")
        };
        let outcome = store.undo("s", &options).unwrap();
        let (want, clean) = git_merge_file(
            g_now.as_bytes(),
            edited.as_bytes(),
            numbered(1..21).as_bytes(),
            ["now", "after", "before"],
        );
        assert!(clean);
        let want = match force {
            true => numbered(1..21).into_bytes(),
            false => want,
        };
        assert_eq!(fs::read(root.join("g.txt")).unwrap(), want, "{outcome:?}");
        assert_eq!(fs::read_to_string(root.join("f.txt")).unwrap(), "NEW\n");
        assert_eq!(outcome.written, vec![rewind::BString::from("g.txt")]);
        assert!(outcome.conflicts.is_empty(), "{outcome:?}");
    }
}

/// r55 (5): a file the turn created, replaced since by a directory (`rm f; mkdir f`). `undo
/// --only` listed it `kept`, "the snapshot could not see it", where a range undo says the
/// directory is in the way. Both say so now, and the directory stays, with or without force.
#[test]
fn undo_only_of_a_file_replaced_by_a_directory_says_the_directory_is_in_the_way() {
    for force in [false, true] {
        let project = Project::new();
        let (root, store) = (project.root(), &project.store);
        fs::write(root.join("g.txt"), "g\n").unwrap();
        store.begin_turn("s", "1").unwrap();
        fs::write(root.join("f"), "agent\n").unwrap();
        fs::write(root.join("g.txt"), "agent\n").unwrap();
        store.end_turn("s", "1").unwrap();
        fs::remove_file(root.join("f")).unwrap();
        fs::create_dir(root.join("f")).unwrap();
        fs::write(root.join("f/x"), "the user's\n").unwrap();
        let options = rewind::UndoOptions {
            only: true,
            force,
            ..undo_opts("1")
        };
        let outcome = store.undo("s", &options).unwrap();
        let f = vec![rewind::BString::from("f")];
        assert_eq!(outcome.conflicts, f, "{outcome:?}");
        assert_eq!(outcome.in_the_way, f, "{outcome:?}");
        assert!(outcome.kept.is_empty(), "{outcome:?}");
        assert_eq!(outcome.written, vec![rewind::BString::from("g.txt")]);
        assert_eq!(
            fs::read_to_string(root.join("f/x")).unwrap(),
            "the user's\n"
        );
        assert_eq!(fs::read_to_string(root.join("g.txt")).unwrap(), "g\n");
    }
}
