//! The CLI for people: `turns`, `show`, `log` and `doctor` output with a fixed clock, and
//! `completions`. Expected text is built from what the store says (ids from `track`, counts
//! from git), never pasted in.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{finish, spawn_piped, Run, Sandbox, TestProject};

fn at(p: &TestProject, now: &str, args: &[&str]) -> Run {
    let mut command: Command = p.rewind_command(args);
    command.env("REWIND_NOW", now);
    let run = finish(spawn_piped(&mut command), Duration::from_secs(60), "rewind");
    run.assert_success();
    run
}

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
/// `--quiet` and pipes show none. (`script` provides the terminal; skipped where it is missing.)
#[test]
fn progress_line_on_a_terminal_only() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("NOTE: no `script` here; progress test skipped");
        return;
    }
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
