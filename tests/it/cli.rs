//! The CLI for people: `turns`, `show`, `log` and `doctor` output with a fixed clock, and
//! `completions`. Expected text is built from what the store says (ids from `track`, counts
//! from git), never pasted in.

use crate::common;

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{at, finish, require_tool, spawn_piped, Sandbox, TestProject};

const T0: &str = "2026-12-01T10:00:00Z";
const T0_PLUS_3H: &str = "2026-12-01T13:00:00Z";

/// A session with one turn that changed `a.txt` (+1 -0), made at T0.
fn project_with_a_turn(sb: &Sandbox) -> (TestProject<'_>, String, String) {
    let p = sb.project("proj");
    p.file("a.txt", "one\n");
    let before = at(&p, T0, &["track"]).stdout.trim().to_string();
    at(
        &p,
        T0,
        &["turn", "begin", "--session", "chat", "--turn", "1"],
    );
    p.file("a.txt", "one\ntwo\n");
    at(&p, T0, &["turn", "end", "--session", "chat", "--turn", "1"]);
    let after = at(&p, T0, &["track"]).stdout.trim().to_string();
    (p, before, after)
}

#[test]
fn turns_table_has_age_session_turn_files_and_counts() {
    let sb = Sandbox::new();
    let (p, _, _) = project_with_a_turn(&sb);
    let out = at(&p, T0_PLUS_3H, &["turns"]).stdout;
    let mut lines = out.lines();
    let header = lines.next().unwrap();
    for column in ["age", "session", "turn", "files", "+", "-", "state"] {
        assert!(header.contains(column), "{header}");
    }
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        row,
        ["3", "hours", "ago", "chat", "1", "1", "+1", "-0", "done"],
        "{out}"
    );
    // Each file of the turn below it, with whose change it is.
    let file: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        file,
        ["modified", "+1", "-0", "unannounced", "a.txt"],
        "{out}"
    );
    assert!(lines.next().is_none(), "{out}");
}

#[test]
fn show_prints_the_turn_and_its_diff_as_git_does() {
    let sb = Sandbox::new();
    let (p, before, after) = project_with_a_turn(&sb);
    let out = at(&p, T0_PLUS_3H, &["show", "--session", "chat", "1"]).stdout;
    let (title, diff) = out.split_once('\n').unwrap();
    assert!(title.starts_with("turn 1 of session chat"), "{title}");
    assert!(title.ends_with("1 files, +1 -0"), "{title}");
    let git = p.store_git(["-c", "core.quotePath=false", "diff", &before, &after]);
    assert_eq!(diff, git, "show's diff is git's");
    // Coloured on request: the same text once the escapes are gone.
    let colored = at(&p, T0_PLUS_3H, &["show", "--color=always", "1"]).stdout;
    assert!(colored.contains("\x1b["));
    assert_eq!(strip_ansi(&colored), out);
}

#[test]
fn log_lists_records_newest_first_with_ages() {
    let sb = Sandbox::new();
    let (p, before, after) = project_with_a_turn(&sb);
    p.file("a.txt", "three\n");
    let later = at(&p, "2026-12-01T12:00:00Z", &["track"])
        .stdout
        .trim()
        .to_string();
    let out = at(&p, T0_PLUS_3H, &["log"]).stdout;
    let first: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(&first[..4], ["1", "hour", "ago", "snapshot"], "{out}");
    assert!(later.starts_with(first[4]), "{out}");
    for id in [&before, &after] {
        assert!(out.contains(&id[..12]), "{id} listed: {out}");
    }
    assert!(
        out.contains("session chat turn 1: 1 files +1 -0 (done)"),
        "{out}"
    );
}

#[test]
fn doctor_reports_the_store_and_finds_missing_objects() {
    let sb = Sandbox::new();
    let (p, _, after) = project_with_a_turn(&sb);
    let out = at(&p, T0_PLUS_3H, &["doctor"]).stdout;
    let store = p.store();
    assert!(
        out.contains(&format!("store         {}", store.display())),
        "{out}"
    );
    assert!(out.contains("lock          free"), "{out}");
    assert!(out.contains("last prune    never"), "{out}");
    assert!(out.contains("1 sessions, 1 turns"), "{out}");
    assert!(
        out.contains("every object the records reach is present"),
        "{out}"
    );
    at(&p, T0, &["prune"]);
    let out = at(&p, T0_PLUS_3H, &["doctor"]).stdout;
    assert!(out.contains("last prune    3 hours ago"), "{out}");

    // Remove a loose object a record needs: doctor names it and exits 1.
    let blob = p.store_git(["rev-parse", &format!("{after}:a.txt")]);
    let blob = blob.trim();
    let path = store.join("objects").join(&blob[..2]).join(&blob[2..]);
    std::fs::remove_file(&path).unwrap();
    let mut command = p.rewind_command(["--json", "doctor"]);
    let run = finish(spawn_piped(&mut command), Duration::from_secs(60), "doctor");
    run.assert_code(1);
    assert!(run.stdout.contains(blob), "{run}");
}

#[test]
fn completions_for_each_shell() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    for shell in ["bash", "zsh", "fish"] {
        let out = at(&p, T0, &["completions", shell]).stdout;
        assert!(
            out.contains("restore") && out.contains("diff-full"),
            "{shell}: {out}"
        );
    }
}

fn strip_ansi(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// On a terminal, a long snapshot shows a progress line on stderr, cleared before the result;
/// `--quiet` and pipes show none. (`script` provides the terminal.)
#[test]
fn progress_line_on_a_terminal_only() {
    require_tool("script", "to give rewind a terminal");
    let sb = Sandbox::new();
    let p = sb.project("proj");
    for i in 0..20_000 {
        p.file(format!("d{}/f{i}.txt", i % 100), format!("{i}\n"));
    }
    let typescript = p.join("../typescript");
    let data = p.join("../data");
    let run = |extra: &str| {
        let command = format!(
            "{} --data-dir {} -C {} {extra} track",
            common::rewind_bin().display(),
            data.display(),
            p.join("").display()
        );
        let status = Command::new("script")
            .args(["-qec", &command])
            .arg(&typescript)
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
        String::from_utf8_lossy(&std::fs::read(&typescript).unwrap()).into_owned()
    };
    let shown = run("");
    assert!(shown.contains("snapshotting: "), "{shown}");
    // The line is cleared ("\r\x1b[K") before the tree id is printed at its start.
    let after_clear = &shown[shown.rfind("\x1b[K").expect("cleared") + 3..];
    let hash: String = after_clear.chars().take(40).collect();
    assert!(
        hash.len() == 40 && hash.chars().all(|c| c.is_ascii_hexdigit()),
        "{shown:?}"
    );
    std::fs::remove_dir_all(&data).unwrap();
    let quiet = run("--quiet");
    assert!(!quiet.contains("snapshotting"), "{quiet}");
}

// ---------------------------------------------------------------------------
// Closed stdout (`rewind patch X | head`): no panic, the operation completes
// ---------------------------------------------------------------------------

/// Run `args` with a stdout whose reading end is closed before rewind starts: every write to
/// it fails with EPIPE. Returns the exit status and stderr.
fn with_closed_stdout(p: &TestProject, args: &[&str]) -> (std::process::ExitStatus, String) {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let mut command = p.rewind_command(args);
    command
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::piped());
    let output = command.output().expect("spawn rewind");
    (
        output.status,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Found by the tenth hostile pass: a stdout that cannot be written for another reason than a
/// closed pipe (a full disk) exited 0, the result (a snapshot id, a restore's undo point)
/// written nowhere. That is an error now; a closed pipe stays quiet.
#[test]
fn a_stdout_that_cannot_be_written_is_an_error_unless_its_reader_left() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n");
    let before = p.track();
    p.file("a.txt", "b\n");
    let full = || std::fs::File::create("/dev/full").expect("/dev/full");
    for args in [vec!["track"], vec!["--json", "restore", before.as_str()]] {
        let output = p.rewind_command(&args).stdout(full()).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains("writing the output"), "{args:?}: {stderr}");
    }
    assert_eq!(p.read("a.txt"), b"a\n", "the restore itself ran");
    // (Eleventh hostile pass: help and the version exited 0.)
    for args in [vec!["help"], vec!["track", "--help"], vec!["-V"]] {
        let output = p.rewind_command(&args).stdout(full()).output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{args:?}");
    }
    let (status, stderr) = with_closed_stdout(&p, &["log"]);
    assert!(status.success(), "a closed pipe is quiet: {stderr}");
}

/// Found by the thirteenth hostile pass: what `--force` leaves alone (a directory holding a
/// user's file where the undo would put a file back) was listed with "(use --force)", to a
/// command run with `--force`; `revert`, which has no `--force`, said the same; and (the
/// fifteenth) to the command run without it.
#[test]
fn a_conflict_left_by_force_does_not_suggest_force() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("x", "f\n");
    let before = p.track();
    p.rewind(["turn", "begin", "--session", "s", "--turn", "1"])
        .assert_success();
    std::fs::remove_file(p.join("x")).unwrap();
    p.file("x/y", "agent\n");
    p.rewind(["turn", "end", "--session", "s", "--turn", "1"])
        .assert_success();
    p.file("x/z", "user\n");
    // (Fifteenth hostile pass: without `--force` it said "(use --force)", which takes nothing.)
    let plain = p.rewind(["undo", "--session", "s", "--turn", "1"]);
    plain.assert_success();
    assert!(
        plain
            .stderr
            .contains("left alone x: what stands there or on the way to it is never replaced"),
        "{plain}"
    );
    assert!(!plain.stderr.contains("--force"), "{plain}");
    let undo = p.rewind(["undo", "--session", "s", "--turn", "1", "--force"]);
    undo.assert_success();
    assert!(undo.stderr.contains("left alone x"), "{undo}");
    assert!(!undo.stderr.contains("--force"), "{undo}");
    assert!(undo.stderr.contains("move it aside"), "{undo}");
    assert_eq!(p.read("x/z"), b"user\n");
    let revert = p.rewind(["revert", &before, "--", "x"]);
    assert!(!revert.stderr.contains("--force"), "{revert}");
}

/// A project with enough files that listing them fills a pipe (64 KiB) several times over.
fn many_files(sb: &Sandbox) -> TestProject<'_> {
    let p = sb.project("proj");
    for i in 0..2000 {
        p.file(
            format!("src/a-rather-long-directory-name/file-{i:05}.txt"),
            format!("{i}\n"),
        );
    }
    p
}

#[test]
fn closed_stdout_never_panics_and_every_command_completes() {
    let sb = Sandbox::new();
    let p = many_files(&sb);
    let before = p.track();
    p.rewind(["turn", "begin", "--session", "s", "--turn", "1"])
        .assert_success();
    for i in 0..2000 {
        p.file(
            format!("src/a-rather-long-directory-name/file-{i:05}.txt"),
            format!("{i}\nchanged\n"),
        );
    }
    let ended = with_closed_stdout(&p, &["turn", "end", "--session", "s", "--turn", "1"]);
    assert!(ended.0.success(), "turn end: {ended:?}");
    let after = p.track();
    let commands: Vec<Vec<&str>> = vec![
        vec!["track"],
        vec!["--json", "track"],
        vec!["path"],
        vec!["patch", &before],
        vec!["--json", "patch", &before],
        vec!["diff", &before, &after],
        vec!["diff", "--color=always", &before, &after],
        vec!["diff-full", &before, &after],
        vec!["has-changes", &before],
        vec!["show", &after],
        vec!["show", "--session", "s", "1"],
        vec!["log"],
        vec!["doctor"],
        vec!["completions", "bash"],
        vec!["turns"],
        vec!["changes", "--session", "s"],
        vec!["--json", "changes", "--session", "s"],
        vec!["prune"],
        vec!["--json", "diff", "not-an-id"],
    ];
    for args in &commands {
        let (status, stderr) = with_closed_stdout(&p, args);
        assert!(
            !stderr.contains("panicked") && status.code().is_some(),
            "`rewind {}` with stdout closed: {status:?}\n{stderr}",
            args.join(" ")
        );
        let want = if args.contains(&"not-an-id") { 1 } else { 0 };
        assert_eq!(
            status.code(),
            Some(want),
            "`rewind {}`: {stderr}",
            args.join(" ")
        );
    }

    // What changes the project still happens, and leaves its undo point.
    let undo_points = |p: &TestProject| {
        p.rewind(["--json", "log"])
            .stdout
            .matches("\"undo\"")
            .count()
    };
    let points = undo_points(&p);
    let (status, stderr) = with_closed_stdout(&p, &["restore", &before]);
    assert!(status.success(), "restore with stdout closed: {stderr}");
    assert_eq!(p.track(), before, "the restore completed");
    assert_eq!(undo_points(&p), points + 1, "and recorded its undo point");
    let (status, stderr) = with_closed_stdout(&p, &["revert", &after, "--", "src"]);
    assert!(status.success(), "revert with stdout closed: {stderr}");
    assert_eq!(p.track(), after, "the revert completed");
    let (status, stderr) = with_closed_stdout(&p, &["undo", "--session", "s"]);
    assert!(status.success(), "undo with stdout closed: {stderr}");
    assert_eq!(p.track(), before, "the undo completed");
}

#[test]
fn restore_piped_into_head_keeps_going_after_the_first_line() {
    let sb = Sandbox::new();
    let p = many_files(&sb);
    let before = p.track();
    p.remove("src");
    let mut command = p.rewind_command(["restore", &before]);
    let mut child = spawn_piped(&mut command);
    let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut first).expect("first line");
    assert!(first.starts_with("written "), "{first}");
    drop(stdout);
    let run = finish(child, Duration::from_secs(120), "rewind restore | head -1");
    assert!(
        !run.stderr.contains("panicked") && run.code() == Some(0),
        "{run}"
    );
    assert_eq!(p.track(), before, "every file is restored");
}

// ---------------------------------------------------------------------------
// Names quoted as git quotes them (core.quotePath=true) in human output
// ---------------------------------------------------------------------------

/// Names that would break a line-per-name listing, or that git quotes.
const HOSTILE: [&str; 5] = [
    "evil\nkeep",
    "tab\there",
    "quo\"te\\back",
    "caf\u{e9}.txt",
    "bell\u{7}\u{1b}",
];

/// git's quoting of `paths` (`core.quotePath=true`), as `git ls-files` prints them.
fn git_quoted(sb: &Sandbox, paths: &[&str]) -> Vec<String> {
    let repo = sb.project("quoting-oracle");
    for path in paths {
        repo.file(path, "x\n");
    }
    repo.git_init();
    repo.git(["add", "-A"]);
    let listed = repo.git(["-c", "core.quotePath=true", "ls-files"]);
    listed.lines().map(str::to_string).collect()
}

#[test]
fn names_are_quoted_as_git_quotes_them_in_human_output() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("plain.txt", "plain\n");
    let before = p.track();
    for name in HOSTILE {
        p.file(name, "new\n");
    }
    let after = p.track();

    // `patch` lists what `git diff --name-only` lists, quoted the same way.
    let patch = p.rewind(["patch", &before]);
    patch.assert_success();
    let git = sb.git_in_run(
        &p.store(),
        [
            "-c",
            "core.quotePath=true",
            "diff",
            "--name-only",
            &before,
            &after,
        ],
    );
    git.assert_success();
    assert_eq!(
        patch.stdout, git.stdout,
        "rewind patch vs git diff --name-only"
    );
    let quoted = git_quoted(&sb, &HOSTILE);
    assert_eq!(patch.stdout.lines().count(), HOSTILE.len());

    // JSON stays exact.
    let json = common::one_json(&p.rewind(["--json", "patch", &before]));
    let mut files: Vec<&str> = json["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| f.as_str().expect("a string"))
        .collect();
    files.sort_unstable();
    let mut want = HOSTILE.to_vec();
    want.sort_unstable();
    assert_eq!(files, want);

    // `restore` names each file it deletes; `turn end`, `changes` each file changed.
    let restore = p.rewind(["restore", &before]);
    restore.assert_success();
    let mut deleted: Vec<&str> = restore
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("deleted "))
        .collect();
    deleted.sort_unstable();
    let mut want: Vec<&str> = quoted.iter().map(String::as_str).collect();
    want.sort_unstable();
    assert_eq!(deleted, want, "restore: {restore}");
    p.rewind(["turn", "begin", "--session", "s\nx", "--turn", "1"])
        .assert_success();
    for name in HOSTILE {
        p.file(name, "by the agent\n");
    }
    let end = p.rewind(["turn", "end", "--session", "s\nx", "--turn", "1"]);
    end.assert_success();
    let last_column = |text: &str| -> Vec<String> {
        let mut names: Vec<String> = text
            .lines()
            .filter(|l| l.starts_with('+') || l.starts_with("added"))
            .map(|l| l.rsplit_once(' ').expect("a name column").1.to_string())
            .collect();
        names.sort_unstable();
        names
    };
    let want_quoted: Vec<String> = want.iter().map(|s| s.to_string()).collect();
    assert_eq!(last_column(&end.stdout), want_quoted, "turn end: {end}");
    let changes = p.rewind(["changes", "--session", "s\nx"]);
    changes.assert_success();
    assert_eq!(
        last_column(&changes.stdout),
        want_quoted,
        "changes: {changes}"
    );
    let turns = p.rewind(["turns"]);
    turns.assert_success();
    assert_eq!(
        turns.stdout.lines().filter(|l| !l.starts_with(' ')).count(),
        2,
        "a header and one turn: {turns}"
    );
    assert!(turns.stdout.contains("\"s\\nx\""), "{turns}");
}

#[test]
fn skipped_names_are_quoted_in_track_warnings() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("ok.txt", "ok\n").fifo("fi\nfo");
    let run = p.rewind(["track"]);
    run.assert_success();
    assert!(
        run.stderr
            .contains("rewind: left out \"fi\\nfo\": special file"),
        "{run}"
    );
}
