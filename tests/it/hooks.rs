//! `rewind hook AGENT` fed the payloads each agent documents, with edits in between made as
//! the agent's tools and its shell make them; `rewind hooks install|uninstall` on settings
//! files that hold other hooks, comments and odd formatting.
//!
//! A hook's contract: nothing on stdout (Claude Code adds a UserPromptSubmit hook's stdout to
//! the model's context; Gemini CLI and Codex parse it as JSON), exit 0 whatever happens (2
//! blocks the agent), never a panic.

use std::ffi::OsStr;
use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::Command;

use serde_json::json;

use crate::common::*;

/// Run `rewind hook AGENT` in the project with `payload` on stdin (and `env`); asserts the
/// contract every run keeps: exit 0, stdout empty, no panic.
fn hook_with(p: &TestProject, agent: &str, payload: &[u8], env: &[(&str, &Path)]) -> Run {
    let mut cmd = p.sb.rewind_command(["hook", agent]);
    cmd.current_dir(&p.path);
    for (key, value) in env {
        cmd.env(key, value);
    }
    let run = run_with_stdin(&mut cmd, payload);
    assert_no_panic(&run);
    assert_eq!(run.code(), Some(0), "a hook exits 0: {run}");
    assert_eq!(run.stdout, "", "a hook prints nothing on stdout: {run}");
    run
}

/// [`hook_with`] a JSON payload; asserts that it went quietly (nothing on stderr either).
fn hook(p: &TestProject, agent: &str, payload: &Value) -> Run {
    let run = hook_with(p, agent, payload.to_string().as_bytes(), &[]);
    assert_eq!(run.stderr, "", "a hook that worked says nothing: {run}");
    run
}

/// Claude Code's UserPromptSubmit payload (hooks reference, code.claude.com/docs/en/hooks).
fn claude_prompt(p: &TestProject, session: &str, prompt: &str) -> Value {
    json!({
        "session_id": session,
        "transcript_path": format!("/home/user/.claude/projects/p/{session}.jsonl"),
        "cwd": p.path,
        "permission_mode": "default",
        "hook_event_name": "UserPromptSubmit",
        "prompt": prompt,
    })
}

/// Claude Code's Stop payload.
/// One Claude Code turn through its hooks: the prompt, `edits` (as its tools would make them),
/// then its `Stop`.
fn claude_turn(p: &TestProject, session: &str, prompt: &str, edits: impl FnOnce()) {
    hook(p, "claude-code", &claude_prompt(p, session, prompt));
    edits();
    hook(p, "claude-code", &claude_stop(p, session, false));
}

fn claude_stop(p: &TestProject, session: &str, stop_hook_active: bool) -> Value {
    json!({
        "session_id": session,
        "transcript_path": format!("/home/user/.claude/projects/p/{session}.jsonl"),
        "cwd": p.path,
        "permission_mode": "default",
        "hook_event_name": "Stop",
        "stop_hook_active": stop_hook_active,
    })
}

/// `rewind --json turns ARGS` as JSON rows.
fn turns(p: &TestProject, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["--json", "turns"];
    all.extend(args);
    let run = p.rewind(all);
    run.assert_success();
    one_json(&run).as_array().unwrap().clone()
}

/// `(turn, ended)` of each row.
fn shape(rows: &[Value]) -> Vec<(String, bool)> {
    rows.iter()
        .map(|r| (r["turn"].as_str().unwrap().into(), !r["ended_at"].is_null()))
        .collect()
}

/// A shell command in the project, as the agent's Bash tool runs it.
fn shell(p: &TestProject, script: &str) {
    let status = Command::new("sh")
        .args(["-c", script])
        .current_dir(&p.path)
        .status()
        .unwrap();
    assert!(status.success(), "sh -c {script}");
}

fn text(p: &TestProject, rel: &str) -> Option<String> {
    fs::read_to_string(p.join(rel)).ok()
}

#[test]
fn claude_code_prompts_are_turns_that_undo_bash_edits_too() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("src/lib.rs", "fn a() {}\n")
        .file("notes.txt", "keep\n");
    hook(
        &p,
        "claude-code",
        &claude_prompt(&p, "chat-1", "rename a to b"),
    );
    // The Edit tool rewrites the file; the Bash tool deletes and creates through the shell.
    fs::write(p.join("src/lib.rs"), "fn b() {}\n").unwrap();
    shell(
        &p,
        "rm notes.txt && mkdir -p gen && printf 'out\\n' > gen/out.txt",
    );
    hook(&p, "claude-code", &claude_stop(&p, "chat-1", false));
    hook(&p, "claude-code", &claude_prompt(&p, "chat-1", "and add c"));
    shell(&p, "printf 'fn c() {}\\n' >> src/lib.rs");
    hook(&p, "claude-code", &claude_stop(&p, "chat-1", false));

    let rows = turns(&p, &["--last-session"]);
    assert_eq!(shape(&rows), [("1".into(), true), ("2".into(), true)]);
    assert_eq!(rows[0]["meta"]["prompt"], "rename a to b");
    assert_eq!(rows[0]["meta"]["agent"], "claude-code");
    assert_eq!(
        rows[0]["meta"]["transcript_path"],
        "/home/user/.claude/projects/p/chat-1.jsonl"
    );
    let files: Vec<&str> = rows[0]["changed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["file"].as_str().unwrap())
        .collect();
    assert_eq!(files, ["gen/out.txt", "notes.txt", "src/lib.rs"]);

    // The user's undo: the last turn first, then the one before it.
    p.rewind(["undo", "--last-session"]).assert_success();
    assert_eq!(text(&p, "src/lib.rs").as_deref(), Some("fn b() {}\n"));
    p.rewind(["undo", "--last-session"]).assert_success();
    assert_eq!(text(&p, "src/lib.rs").as_deref(), Some("fn a() {}\n"));
    assert_eq!(text(&p, "notes.txt").as_deref(), Some("keep\n"));
    assert!(!p.join("gen/out.txt").exists());
    assert_fsck_clean(&sb, &p.store());
}

#[test]
fn undo_last_session_skips_turns_where_the_agent_only_answered() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("a.txt", "1\n");
    claude_turn(&p, "chat-1", "edit a", || {
        p.file("a.txt", "2\n");
    });
    hook(
        &p,
        "claude-code",
        &claude_prompt(&p, "chat-1", "what did you change?"),
    );
    hook(&p, "claude-code", &claude_stop(&p, "chat-1", false));
    p.rewind(["undo", "--last-session"]).assert_success();
    assert_eq!(text(&p, "a.txt").as_deref(), Some("1\n"));
    let rows = turns(&p, &["--session", "chat-1"]);
    assert!(rows.iter().all(|r| r["rolled_back"] == true), "{rows:?}");
}

#[test]
fn a_stop_again_while_stop_hook_active_and_a_stop_without_a_begin_are_quiet() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("a.txt", "1\n");
    // Installed mid-session: the first event rewind sees is a stop.
    hook(&p, "claude-code", &claude_stop(&p, "chat-1", false));
    assert!(
        !p.rewind(["turns", "--last-session"]).status.success(),
        "no turn yet"
    );
    claude_turn(&p, "chat-1", "go", || {
        p.file("a.txt", "2\n");
    });
    // Another stop hook blocked the stop: Claude goes on, then stops again.
    hook(&p, "claude-code", &claude_stop(&p, "chat-1", true));
    let rows = turns(&p, &["--session", "chat-1"]);
    assert_eq!(shape(&rows), [("1".into(), true)]);
    assert_eq!(rows[0]["files"], 1);
}

#[test]
fn two_sessions_in_one_project_count_their_own_turns() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("a.txt", "a\n").file("b.txt", "b\n");
    claude_turn(&p, "A", "edit a", || {
        p.file("a.txt", "a2\n");
    });
    claude_turn(&p, "B", "edit b", || {
        p.file("b.txt", "b2\n");
    });
    claude_turn(&p, "A", "edit a again", || {
        p.file("a.txt", "a3\n");
    });

    let a = turns(&p, &["--session", "A"]);
    assert_eq!(shape(&a), [("1".into(), true), ("2".into(), true)]);
    assert_eq!(shape(&turns(&p, &["--session", "B"])), [("1".into(), true)]);
    // The most recent session is A's (its turn 2 began last).
    let last = turns(&p, &["--last-session"]);
    assert!(last.iter().all(|r| r["session"] == "A"), "{last:?}");
    p.rewind(["undo", "--last-session"]).assert_success();
    assert_eq!(text(&p, "a.txt").as_deref(), Some("a2\n"));
    assert_eq!(
        text(&p, "b.txt").as_deref(),
        Some("b2\n"),
        "B's file is B's"
    );
}

/// Found by the fourteenth hostile pass: with session A's turn done and session B's turn
/// interrupted after it changed a file (no Stop), `undo --last-session` (what `/rewind-undo`
/// runs in B's window) picked A, whose last ended turn changed files, and undid A's finished
/// work, though `turns --last-session` showed B. An open turn that changed files counts: B is
/// picked, and its undo refuses the open turn.
#[test]
fn last_session_undo_never_passes_over_an_interrupted_turn_that_changed_files() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("f", "f\n").file("g", "g\n");
    claude_turn(&p, "A", "A1", || {
        p.file("f", "f\nA's work\n");
    });
    hook(&p, "claude-code", &claude_prompt(&p, "B", "B1"));
    p.file("g", "g\nB's work\n");
    let last = turns(&p, &["--last-session"]);
    assert!(last.iter().all(|r| r["session"] == "B"), "{last:?}");
    let run = p.rewind(["undo", "--last-session"]);
    assert_eq!(run.code(), Some(1), "{run}");
    assert!(run.stderr.contains("undoing session B"), "{run}");
    assert!(
        run.stderr.contains("is open and has changed files"),
        "{run}"
    );
    assert_eq!(
        text(&p, "f").as_deref(),
        Some("f\nA's work\n"),
        "A's work stays"
    );
    assert_eq!(text(&p, "g").as_deref(), Some("g\nB's work\n"));
}

/// Found by the fifteenth hostile pass: `turns --last-session` listed the session whose last
/// turn began last (one that only answered), while `undo --last-session` undid another, whose
/// last turn that changed files began last. Both now take the one the undo takes.
#[test]
fn turns_and_undo_of_the_last_session_take_the_same_session() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("f", "f\n");
    claude_turn(&p, "A", "edit f", || {
        p.file("f", "f\nA\n");
    });
    claude_turn(&p, "B", "a question", || {});
    let last = turns(&p, &["--last-session"]);
    assert!(last.iter().all(|r| r["session"] == "A"), "{last:?}");
    let run = p.rewind(["undo", "--last-session"]);
    run.assert_success();
    assert!(run.stderr.contains("undoing session A"), "{run}");
    assert_eq!(text(&p, "f").as_deref(), Some("f\n"));
}

/// Found by the fifteenth hostile pass, in the fourteenth pass's fix: an open turn was counted
/// as changed when undoing it would leave anything alone, another session's change included,
/// so `undo --last-session` refused it though the open turn changed nothing of its own.
#[test]
fn an_open_turn_whose_only_changes_are_another_sessions_is_passed_over() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("f", "a\n");
    hook(&p, "claude-code", &claude_prompt(&p, "A", "edit f"));
    std::thread::sleep(std::time::Duration::from_millis(1100));
    hook(&p, "claude-code", &claude_prompt(&p, "B", "a question"));
    p.file("f", "b\n");
    hook(&p, "claude-code", &claude_stop(&p, "A", false));
    let run = p.rewind(["undo", "--last-session", "--dry-run"]);
    run.assert_success();
    assert!(run.stderr.contains("undoing session A"), "{run}");
    assert!(
        !run.stderr.contains("is open and has changed files"),
        "{run}"
    );
}

/// Found by the sixteenth hostile pass: `undo --session A --last` while A's next turn was open
/// and had changed nothing (the agent still thinking) rolled that empty turn back: nothing
/// changed, the agent's later edits were in no turn, its Stop found none open. It passes over
/// the empty turn as `--last-session` does: the turn before is undone, the agent's next edits
/// are a turn of their own, and the dry run says the same.
#[test]
fn undo_last_passes_over_the_agents_empty_open_turn() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("f", "f\n");
    hook(&p, "claude-code", &claude_prompt(&p, "A", "add g"));
    p.file("g", "the agent's g\n");
    hook(&p, "claude-code", &claude_stop(&p, "A", false));
    hook(&p, "claude-code", &claude_prompt(&p, "A", "think"));
    let dry = p.rewind(["undo", "--session", "A", "--last", "--dry-run"]);
    dry.assert_success();
    assert!(dry.stdout.contains("would be deleted g"), "{dry}");
    let run = p.rewind(["undo", "--session", "A", "--last"]);
    run.assert_success();
    assert!(run.stdout.contains("deleted g"), "{run}");
    assert!(!p.join("g").exists(), "{run}");
    p.file("h", "the agent's h\n");
    hook(&p, "claude-code", &claude_stop(&p, "A", false));
    let rows = turns(&p, &["--session", "A"]);
    let last = rows.last().unwrap();
    assert!(last["ended_at"].is_string(), "{rows:?}");
    assert_eq!(last["rolled_back"], false, "{rows:?}");
    assert_eq!(last["files"], 1, "{rows:?}");
}

/// Found by the eighteenth hostile pass: `undo --session A --last` while A's open turn had
/// changed nothing of its own, only a file session B changed meanwhile, rolled that turn back
/// and left A's turn before it undone. Its own changes decide, as for `--last-session`.
#[test]
fn undo_last_passes_over_an_open_turn_whose_only_changes_are_another_sessions() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("a", "a\n").file("c", "c\n");
    hook(&p, "claude-code", &claude_prompt(&p, "A", "edit a"));
    p.file("a", "A's a\n");
    hook(&p, "claude-code", &claude_stop(&p, "A", false));
    hook(&p, "claude-code", &claude_prompt(&p, "A", "think"));
    hook(&p, "claude-code", &claude_prompt(&p, "B", "edit c"));
    p.file("c", "B's c\n");
    hook(&p, "claude-code", &claude_stop(&p, "B", false));
    let run = p.rewind(["undo", "--session", "A", "--last"]);
    run.assert_success();
    assert_eq!(p.read("a"), b"a\n", "{run}");
    assert_eq!(p.read("c"), b"B's c\n", "{run}");
    let rows = turns(&p, &["--session", "A"]);
    let last = rows.last().unwrap();
    assert!(last["ended_at"].is_null(), "a turn is open again: {rows:?}");
    assert_eq!(last["rolled_back"], false, "{rows:?}");
}

/// Found by the fourteenth hostile pass: `show` of a turn rolled back while open called it
/// "(open)" and showed, as its diff, what changed in the project since it began (a user's edit
/// made after the rollback), though `turns` said "rolled back, 0 files".
#[test]
fn show_of_a_turn_rolled_back_while_open_shows_no_later_edit() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("f", "f\n").file("g", "g\n");
    hook(&p, "claude-code", &claude_prompt(&p, "A", "A1"));
    p.file("f", "f\nA1\n");
    p.rewind(["undo", "--session", "A", "--last"])
        .assert_success();
    p.file("g", "g\nthe user's edit\n");
    let shown = p.rewind(["show", "--session", "A", "1"]);
    shown.assert_success();
    assert!(shown.stdout.contains("rolled back while open"), "{shown}");
    assert!(!shown.stdout.contains("the user's edit"), "{shown}");
}

/// r55 (3): a turn rolled back while open (no later turn begun) listed 0 files in `turns`,
/// `show` and `log`, and `show` no diff, until a later turn began. It ended at that undo:
/// listed with what it did until then, still rolled back.
#[test]
fn turns_and_show_of_a_turn_rolled_back_while_open_give_what_it_did() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("f", "f\n").file("g", "g\n");
    hook(&p, "claude-code", &claude_prompt(&p, "A", "A1"));
    p.file("f", "f\nA1\n");
    p.rewind(["undo", "--session", "A", "--last"])
        .assert_success();
    p.file("g", "g\nthe user's edit\n");
    let shown = p.rewind(["show", "--session", "A", "1"]);
    shown.assert_success();
    assert!(shown.stdout.contains("rolled back while open"), "{shown}");
    assert!(shown.stdout.contains("+A1"), "{shown}");
    assert!(!shown.stdout.contains("the user's edit"), "{shown}");
    let listed = p.rewind(["turns", "--session", "A", "--json"]);
    listed.assert_success();
    let rows: Vec<serde_json::Value> = serde_json::from_str(&listed.stdout).unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["files"], 1, "{rows:?}");
    assert_eq!(rows[0]["rolled_back"], true, "{rows:?}");
    assert!(rows[0]["ended_at"].is_null(), "{rows:?}");
    let log = p.rewind(["log", "--json"]);
    log.assert_success();
    assert!(log.stdout.contains("rolled back"), "{log}");
}

/// Left open by stop 36: `show` of a turn left open when its session began another diffed its
/// "before" against the project now (the next turn's work and the user's later edits as its
/// own), and `turns` listed it open with no files. It ended where the next turn began.
#[test]
fn show_and_turns_of_a_turn_left_open_give_what_it_did_until_the_next_began() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("b.txt", "b\n");
    turn_1_left_open_then_turn_2_begun(&p);
    p.file("b.txt", "the user's later edit\n");

    let shown = p.rewind(["show", "--session", "A", "1"]);
    shown.assert_success();
    assert!(shown.stdout.contains("(left open"), "{shown}");
    assert!(
        shown.stdout.contains("diff --git a/a.txt b/a.txt"),
        "{shown}"
    );
    assert!(shown.stdout.contains("+2"), "{shown}");
    assert!(!shown.stdout.contains("b.txt"), "{shown}");

    let rows = turns(&p, &["--session", "A"]);
    assert_eq!(shape(&rows), [("1".into(), false), ("2".into(), false)]);
    assert_eq!(rows[0]["after"], rows[1]["before"], "{rows:?}");
    assert!(rows[1]["after"].is_null(), "{rows:?}");
    assert_eq!(rows[0]["files"], 1, "{rows:?}");
    assert_eq!(rows[0]["changed"][0]["file"], "a.txt", "{rows:?}");
    let listed = p.rewind(["turns", "--session", "A"]);
    listed.assert_success();
    // (A turn's files are listed under it, indented.)
    let states: Vec<&str> = (listed.stdout.lines().skip(1))
        .filter(|l| !l.starts_with("    "))
        .map(|l| match l.trim_end().ends_with("left open") {
            true => "left open",
            false => l.split_whitespace().last().unwrap_or_default(),
        })
        .collect();
    assert_eq!(states, ["left open", "open"], "{listed}");
}

/// Found by the fifteenth hostile pass: `show` of an open turn a redo gave back showed, with
/// the turn's file, a file the user made between the undo and the redo: the diff ran from the
/// turn's first "before", not from where the redo gave it back (which its undo uses).
#[test]
fn show_of_an_open_turn_a_redo_gave_back_shows_only_what_came_back() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("f", "f\n");
    hook(&p, "claude-code", &claude_prompt(&p, "A", "A1"));
    p.file("f", "f\nA1\n");
    p.rewind(["undo", "--session", "A", "--turn", "1"])
        .assert_success();
    p.file("u", "the user's file\n");
    p.rewind(["redo", "--session", "A"]).assert_success();
    let shown = p.rewind(["show", "--session", "A", "1"]);
    shown.assert_success();
    assert!(shown.stdout.contains("diff --git a/f b/f"), "{shown}");
    assert!(!shown.stdout.contains("the user's file"), "{shown}");
    // `turns` gives it the same "before": the project as the redo found it.
    let store = p.store();
    let rows = turns(&p, &["--session", "A"]);
    let before = crate::common::ls_tree(&sb, &store, rows[0]["before"].as_str().unwrap());
    assert!(before.contains_key(&b"u"[..]), "{rows:?}");
}

#[test]
fn an_interrupted_turn_ends_at_the_next_prompt() {
    // Claude Code runs no Stop hook when the user interrupts the agent.
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("a.txt", "1\n");
    hook(&p, "claude-code", &claude_prompt(&p, "chat-1", "first"));
    p.file("a.txt", "2\n");
    hook(&p, "claude-code", &claude_prompt(&p, "chat-1", "second"));
    let rows = turns(&p, &["--session", "chat-1"]);
    assert_eq!(shape(&rows), [("1".into(), true), ("2".into(), false)]);
    assert_eq!(rows[0]["files"], 1);
}

#[test]
fn the_rewind_undo_slash_command_is_no_turn_of_its_own() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("a.txt", "1\n");
    claude_turn(&p, "chat-1", "edit", || {
        p.file("a.txt", "2\n");
    });
    // `/rewind-undo`: its prompt comes through the hook, its command undoes turn 1.
    hook(
        &p,
        "claude-code",
        &claude_prompt(&p, "chat-1", "/rewind-undo"),
    );
    p.rewind(["undo", "--last-session"]).assert_success();
    hook(&p, "claude-code", &claude_stop(&p, "chat-1", false));
    assert_eq!(text(&p, "a.txt").as_deref(), Some("1\n"));
    assert_eq!(
        shape(&turns(&p, &["--session", "chat-1"])),
        [("1".into(), true)]
    );
}

#[test]
fn undo_from_inside_the_agent_walks_back_when_its_prompt_began_a_turn() {
    // An agent that passes the slash command's expanded text as the prompt: a turn begins
    // around the undo, on either side of it.
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("a.txt", "1\n");
    for content in ["2\n", "3\n"] {
        claude_turn(&p, "chat-1", "edit", || {
            p.file("a.txt", content);
        });
    }
    let expanded = "Above is what `rewind undo` just did";
    hook(&p, "claude-code", &claude_prompt(&p, "chat-1", expanded));
    p.rewind(["undo", "--last-session"]).assert_success();
    hook(&p, "claude-code", &claude_stop(&p, "chat-1", false));
    assert_eq!(text(&p, "a.txt").as_deref(), Some("2\n"));
    // The undo first, then the prompt's turn.
    p.rewind(["undo", "--last-session"]).assert_success();
    hook(&p, "claude-code", &claude_prompt(&p, "chat-1", expanded));
    hook(&p, "claude-code", &claude_stop(&p, "chat-1", false));
    assert_eq!(text(&p, "a.txt").as_deref(), Some("1\n"));
}

#[test]
fn a_long_prompt_is_cut_at_a_character_boundary_within_the_metadata_limit() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("a.txt", "1\n");
    // 3-byte characters: 8 KiB falls inside one.
    let prompt = "é€".repeat(2000);
    hook(&p, "claude-code", &claude_prompt(&p, "chat-1", &prompt));
    let rows = turns(&p, &["--session", "chat-1"]);
    let kept = rows[0]["meta"]["prompt"].as_str().unwrap();
    assert!(kept.len() <= 8192 && kept.len() > 8180, "{}", kept.len());
    assert!(prompt.starts_with(kept));
    assert_eq!(
        rows[0]["meta"]["prompt_truncated"],
        prompt.len().to_string()
    );
}

#[test]
fn the_project_is_claude_project_dir_when_the_shell_moved_into_a_subdirectory() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("sub/a.txt", "1\n");
    let mut prompt = claude_prompt(&p, "chat-1", "edit");
    prompt["cwd"] = json!(p.join("sub"));
    let env = [("CLAUDE_PROJECT_DIR", p.path.as_path())];
    hook_with(&p, "claude-code", prompt.to_string().as_bytes(), &env);
    p.file("sub/a.txt", "2\n");
    let mut stop = claude_stop(&p, "chat-1", false);
    stop["cwd"] = json!(p.join("sub"));
    hook_with(&p, "claude-code", stop.to_string().as_bytes(), &env);
    let rows = turns(&p, &["--session", "chat-1"]);
    assert_eq!(shape(&rows), [("1".into(), true)]);
    assert_eq!(rows[0]["changed"][0]["file"], "sub/a.txt");
}

#[test]
fn gemini_before_and_after_agent_are_a_turn() {
    // Gemini CLI's hooks reference (docs/hooks/reference.md): base fields, then the event's.
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("a.txt", "1\n");
    let base = |event: &str| {
        json!({
            "session_id": "g-1",
            "transcript_path": "/home/user/.gemini/tmp/chats/g-1.json",
            "cwd": p.path,
            "hook_event_name": event,
            "timestamp": "2026-11-30T12:00:00.000Z",
            "prompt": "edit a",
        })
    };
    hook(&p, "gemini", &base("BeforeAgent"));
    shell(&p, "printf '2\\n' > a.txt");
    let mut after = base("AfterAgent");
    after["prompt_response"] = json!("done");
    after["stop_hook_active"] = json!(false);
    hook(&p, "gemini", &after);
    let rows = turns(&p, &["--session", "g-1"]);
    assert_eq!(shape(&rows), [("1".into(), true)]);
    assert_eq!(rows[0]["meta"]["agent"], "gemini");
    p.rewind(["undo", "--last-session"]).assert_success();
    assert_eq!(text(&p, "a.txt").as_deref(), Some("1\n"));
}

#[test]
fn codex_prompt_and_stop_are_a_turn_with_codex_turn_id() {
    // Codex's generated hook schemas (codex-rs/hooks/schema/generated): transcript_path null.
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("a.txt", "1\n");
    let base = |event: &str| {
        json!({
            "session_id": "019d036d-c7fa-72d2-b6fd-78878bfe34e4",
            "turn_id": "019d036e-3164-72c3-a170-98925564c4fc",
            "transcript_path": null,
            "cwd": p.path,
            "hook_event_name": event,
            "model": "gpt-5-codex",
            "permission_mode": "default",
        })
    };
    let mut prompt = base("UserPromptSubmit");
    prompt["prompt"] = json!("edit a");
    hook(&p, "codex", &prompt);
    shell(&p, "printf '2\\n' > a.txt");
    let mut stop = base("Stop");
    stop["stop_hook_active"] = json!(false);
    stop["last_assistant_message"] = json!(null);
    hook(&p, "codex", &stop);
    let rows = turns(&p, &["--last-session"]);
    assert_eq!(shape(&rows), [("1".into(), true)]);
    assert_eq!(
        rows[0]["meta"]["turn_id"],
        "019d036e-3164-72c3-a170-98925564c4fc"
    );
    assert!(rows[0]["meta"].get("transcript_path").is_none());
}

/// The hunt of stop 58: Codex names each hook's turn (`turn_id`). A stop of turn `t1` that
/// came after the prompt of `t2` ended turn 2 early; the real stop of `t2` then found no turn
/// open, and the agent's edits in between were in no turn. A stop naming another turn than
/// the open one ends nothing now.
#[test]
fn a_late_codex_stop_of_an_earlier_turn_ends_nothing() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("a.txt", "1\n");
    let payload = |event: &str, turn: &str| {
        let mut payload = json!({
            "session_id": "codex-1",
            "turn_id": turn,
            "transcript_path": null,
            "cwd": p.path,
            "hook_event_name": event,
        });
        match event {
            "Stop" => payload["stop_hook_active"] = json!(false),
            _ => payload["prompt"] = json!("edit a"),
        }
        payload
    };
    hook(&p, "codex", &payload("UserPromptSubmit", "t1"));
    shell(&p, "printf '2\\n' > a.txt");
    hook(&p, "codex", &payload("UserPromptSubmit", "t2"));
    shell(&p, "printf '3\\n' > a.txt");
    hook(&p, "codex", &payload("Stop", "t1"));
    shell(&p, "printf '4\\n' > a.txt");
    assert_eq!(
        shape(&turns(&p, &["--session", "codex-1"])),
        [("1".into(), true), ("2".into(), false)],
        "turn 2 stays open"
    );
    hook(&p, "codex", &payload("Stop", "t2"));
    let rows = turns(&p, &["--session", "codex-1"]);
    assert_eq!(shape(&rows), [("1".into(), true), ("2".into(), true)]);
    p.rewind(["undo", "--session", "codex-1", "--last"])
        .assert_success();
    assert_eq!(
        text(&p, "a.txt").as_deref(),
        Some("2\n"),
        "turn 2's edits, all of them, undone"
    );
}

/// The hunt of stop 58: a runner that writes the payload and keeps the pipe open. The hook
/// read to the end of its stdin, so it waited until the runner's timeout killed it; it reads
/// one JSON object now.
#[test]
fn a_hook_whose_stdin_stays_open_after_the_payload_does_not_wait_for_its_end() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("a.txt", "1\n");
    let mut cmd = p.sb.rewind_command(["hook", "claude-code"]);
    cmd.current_dir(&p.path)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let payload = claude_prompt(&p, "chat-1", "edit a").to_string();
    stdin.write_all(payload.as_bytes()).unwrap();
    stdin.flush().unwrap();
    // The pipe stays open (`stdin` lives on) while the hook runs: `finish` fails the test if
    // it does not exit by the deadline.
    let run = finish(
        child,
        DEFAULT_DEADLINE,
        "rewind hook claude-code, stdin left open",
    );
    drop(stdin);
    assert_eq!(run.code(), Some(0), "{run}");
    assert_eq!(run.stderr, "", "{run}");
    assert_eq!(
        shape(&turns(&p, &["--session", "chat-1"])),
        [("1".into(), false)]
    );
}

#[test]
fn a_store_that_lost_its_objects_is_said_in_the_log_and_the_turn_still_begins() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("a.txt", "1\n");
    p.track();
    fs::remove_dir_all(p.store().join("objects")).unwrap();
    let payload = claude_prompt(&p, "chat-1", "edit");
    let run = hook_with(&p, "claude-code", payload.to_string().as_bytes(), &[]);
    assert!(run.stderr.contains("lost its objects"), "{run}");
    let log = fs::read_to_string(sb.data_dir.join("hooks.log")).unwrap();
    assert!(log.contains("lost its objects"), "{log}");
    assert_eq!(
        shape(&turns(&p, &["--session", "chat-1"])),
        [("1".into(), false)]
    );
}

#[test]
fn malformed_payloads_missing_fields_and_unknown_events_exit_0_with_one_line() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("a.txt", "1\n");
    let nested = "[".repeat(100_000);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("not JSON", b"garbage".to_vec()),
        ("not UTF-8", vec![0xff, 0xfe, b'{']),
        ("an array", b"[]".to_vec()),
        ("nested deeper than the parser goes", nested.into_bytes()),
        ("no event", json!({"session_id": "s"}).to_string().into_bytes()),
        (
            "no session",
            json!({"hook_event_name": "Stop", "cwd": p.path}).to_string().into_bytes(),
        ),
        (
            "a session that is not a string",
            json!({"hook_event_name": "Stop", "session_id": 7}).to_string().into_bytes(),
        ),
        (
            "an empty session",
            json!({"hook_event_name": "Stop", "session_id": ""}).to_string().into_bytes(),
        ),
        (
            "an event rewind does not handle",
            json!({"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "Bash"})
                .to_string()
                .into_bytes(),
        ),
        (
            "another agent's event",
            json!({"hook_event_name": "BeforeAgent", "session_id": "s"}).to_string().into_bytes(),
        ),
        (
            "the home directory as the project",
            json!({"hook_event_name": "UserPromptSubmit", "session_id": "s", "cwd": sb.home, "prompt": "x"})
                .to_string()
                .into_bytes(),
        ),
        (
            "a cwd that is not there",
            json!({"hook_event_name": "UserPromptSubmit", "session_id": "s", "cwd": p.join("gone"), "prompt": "x"})
                .to_string()
                .into_bytes(),
        ),
    ];
    for (what, payload) in &cases {
        let run = hook_with(&p, "claude-code", payload, &[]);
        assert_eq!(
            run.stderr.lines().count(),
            1,
            "{what}: one line on stderr: {run}"
        );
        assert!(
            run.stderr.starts_with("rewind hook claude-code: "),
            "{what}: {run}"
        );
        // (Thirteenth hostile pass: an empty session_id was said to be missing.)
        let said = match *what {
            "no session" => "has no session_id",
            "a session that is not a string" => "session_id is not a string",
            "an empty session" => "session_id is empty",
            _ => "",
        };
        assert!(run.stderr.contains(said), "{what}: {run}");
    }
    let log = fs::read_to_string(sb.data_dir.join("hooks.log")).unwrap();
    assert_eq!(log.lines().count(), cases.len(), "{log}");
    assert!(
        !p.rewind(["turns", "--last-session"]).status.success(),
        "none of them began a turn"
    );
}

// ---- install / uninstall ------------------------------------------------------------------

/// `rewind hooks ARGS` in the project with the sandbox's HOME, as a user runs it: the data dir
/// comes from `REWIND_DATA_DIR` (the agent has it too), not `--data-dir`, so that the entry
/// install writes is `rewind hook AGENT` (with `--data-dir`:
/// `install_with_a_data_dir_writes_it_into_the_hook_command`).
fn hooks(p: &TestProject, args: &[&str]) -> Run {
    let mut cmd =
        p.sb.rewind_command_no_data_dir([OsStr::new("-C"), p.path.as_os_str()]);
    cmd.arg("hooks")
        .args(args)
        .env("REWIND_DATA_DIR", &p.sb.data_dir);
    let run = run_with_deadline(&mut cmd, DEFAULT_DEADLINE);
    assert_no_panic(&run);
    run
}

/// Settings files as people keep them: other hooks, comments, tabs, trailing commas, one
/// line, no final newline, CRLF line ends.
const ODD_SETTINGS: &[(&str, &str)] = &[
    ("empty object", "{}"),
    ("empty object over lines", "{\n}\n"),
    ("one line", "{\"model\":\"opus\",\"cleanupPeriodDays\":20}"),
    (
        "tabs, other hooks on both events",
        "{\n\t\"hooks\": {\n\t\t\"UserPromptSubmit\": [\n\t\t\t{\"hooks\": [{\"type\": \"command\", \"command\": \"log-prompt\"}]}\n\t\t],\n\t\t\"Stop\": [\n\t\t\t{\"hooks\": [{\"type\": \"command\", \"command\": \"notify-send done\"}]}\n\t\t]\n\t}\n}\n",
    ),
    (
        "comments and trailing commas",
        "// team settings\n{\n    /* the model */\n    \"model\": \"opus\", // fav\n    \"hooks\": {\n        \"PreToolUse\": [\n            {\"matcher\": \"Bash\", \"hooks\": [{\"type\": \"command\", \"command\": \"guard\"}]},\n        ],\n        \"Stop\": [],\n    },\n}",
    ),
    (
        "CRLF, empty hooks",
        "{\r\n  \"permissions\": {\"allow\": [\"Bash(npm test)\"]},\r\n  \"hooks\": {}\r\n}\r\n",
    ),
];

#[test]
fn install_merges_into_odd_settings_and_uninstall_gives_the_bytes_back() {
    for (what, original) in ODD_SETTINGS {
        let sb = Sandbox::new();
        let p = sb.project("p");
        p.file(".claude/settings.json", original);
        hooks(&p, &["install", "claude-code"]).assert_success();
        let installed = text(&p, ".claude/settings.json").unwrap();
        assert_ne!(&installed, original, "{what}");
        // Every byte of the user's file is still there, in order.
        let mut rest = installed.as_str();
        for ch in original.chars() {
            let at = rest
                .find(ch)
                .unwrap_or_else(|| panic!("{what}: lost {ch:?}:\n{installed}"));
            rest = &rest[at + ch.len_utf8()..];
        }
        assert_eq!(
            installed.matches("rewind hook claude-code").count(),
            3,
            "{what}:\n{installed}"
        );
        if !original.contains("//") {
            let value: Value = serde_json::from_str(&installed)
                .unwrap_or_else(|e| panic!("{what}: not JSON ({e}):\n{installed}"));
            for event in ["UserPromptSubmit", "Stop", "SessionEnd"] {
                let commands: Vec<&str> = value["hooks"][event]
                    .as_array()
                    .unwrap()
                    .iter()
                    .flat_map(|g| g["hooks"].as_array().unwrap())
                    .map(|h| h["command"].as_str().unwrap())
                    .collect();
                assert!(
                    commands.contains(&"rewind hook claude-code"),
                    "{what}: {event}"
                );
            }
        }
        hooks(&p, &["install", "claude-code"]).assert_success();
        assert_eq!(
            text(&p, ".claude/settings.json").unwrap(),
            installed,
            "{what}: twice"
        );
        assert!(p.join(".claude/commands/rewind-undo.md").exists());
        hooks(&p, &["uninstall", "claude-code"]).assert_success();
        assert_eq!(
            p.read(".claude/settings.json"),
            original.as_bytes(),
            "{what}"
        );
        assert!(!p.join(".claude/commands").exists(), "{what}");
    }
}

#[test]
fn install_into_settings_that_are_a_symlink_writes_through_it_and_keeps_the_link() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    let dotfiles = sb.project("dotfiles");
    let original = ODD_SETTINGS[3].1;
    dotfiles.file("claude.json", original);
    p.symlink(".claude/settings.json", dotfiles.join("claude.json"));
    hooks(&p, &["install", "claude-code"]).assert_success();
    assert!(p.join(".claude/settings.json").is_symlink());
    assert!(text(&dotfiles, "claude.json")
        .unwrap()
        .contains("rewind hook claude-code"));
    hooks(&p, &["uninstall", "claude-code"]).assert_success();
    assert!(p.join(".claude/settings.json").is_symlink());
    assert_eq!(dotfiles.read("claude.json"), original.as_bytes());
}

#[test]
fn install_where_there_was_no_settings_file_and_uninstall_leaves_none() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    hooks(&p, &["install", "claude-code"]).assert_success();
    let value: Value = serde_json::from_str(&text(&p, ".claude/settings.json").unwrap()).unwrap();
    assert_eq!(
        value["hooks"]["Stop"][0]["hooks"][0],
        json!({"type": "command", "command": "rewind hook claude-code"})
    );
    hooks(&p, &["uninstall", "claude-code"]).assert_success();
    assert!(!p.join(".claude").exists());
}

#[test]
fn uninstall_after_the_user_edited_the_settings_keeps_their_edit() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file(".claude/settings.json", ODD_SETTINGS[3].1);
    hooks(&p, &["install", "claude-code"]).assert_success();
    let edited = text(&p, ".claude/settings.json").unwrap().replacen(
        "{\n",
        "{\n\t\"model\": \"sonnet\",\n",
        1,
    );
    p.file(".claude/settings.json", &edited);
    hooks(&p, &["uninstall", "claude-code"]).assert_success();
    let after = text(&p, ".claude/settings.json").unwrap();
    assert!(!after.contains("rewind hook"), "{after}");
    let value: Value = serde_json::from_str(&after).unwrap();
    assert_eq!(value["model"], "sonnet");
    assert_eq!(
        value["hooks"]["Stop"][0]["hooks"][0]["command"],
        "notify-send done"
    );
    assert_eq!(
        value["hooks"]["UserPromptSubmit"].as_array().unwrap().len(),
        1
    );
}

#[test]
fn install_keeps_the_file_as_it_was_and_dry_run_writes_nothing() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    let original = ODD_SETTINGS[4].1;
    p.file(".claude/settings.json", original);
    let run = hooks(&p, &["install", "claude-code", "--dry-run"]);
    run.assert_success();
    assert!(
        run.stdout.contains("+") && run.stdout.contains("rewind hook claude-code"),
        "{run}"
    );
    assert_eq!(p.read(".claude/settings.json"), original.as_bytes());
    assert!(!p.join(".claude/commands").exists());
    let run = hooks(&p, &["--json", "install", "claude-code", "--dry-run"]);
    run.assert_success();
    let changes = one_json(&run)["changes"].as_array().unwrap().clone();
    assert_eq!(
        changes.len(),
        2,
        "the settings and the slash command: {run}"
    );
    assert_eq!(p.read(".claude/settings.json"), original.as_bytes());
    let run = hooks(&p, &["--json", "install", "claude-code"]);
    run.assert_success();
    let backup = one_json(&run)["backup"].as_str().unwrap().to_owned();
    assert_eq!(fs::read(backup).unwrap(), original.as_bytes());
}

#[test]
fn install_refuses_settings_it_cannot_read_and_leaves_them_alone() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    for bad in [
        "{\"hooks\": ",
        "[1, 2]",
        "{\"hooks\": []}",
        "{\"hooks\": {\"Stop\": {}}}",
    ] {
        p.file(".claude/settings.json", bad);
        let run = hooks(&p, &["install", "claude-code"]);
        run.assert_code(1);
        assert_eq!(run.stderr.lines().count(), 1, "{run}");
        assert_eq!(p.read(".claude/settings.json"), bad.as_bytes());
    }
}

#[test]
fn install_into_a_project_that_is_not_there_creates_nothing() {
    let sb = Sandbox::new();
    let run = sb.run_rewind(["-C", "gone", "hooks", "install", "claude-code"]);
    run.assert_code(1);
    assert!(run.stderr.contains("not a directory"), "{run}");
    assert!(!sb.root.join("gone").exists());
}

#[test]
fn install_for_the_user_and_for_gemini_and_codex_use_their_own_files() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    hooks(&p, &["install", "claude-code", "--user"]).assert_success();
    assert!(sb.home.join(".claude/settings.json").exists());
    assert!(sb.home.join(".claude/commands/rewind-undo.md").exists());
    assert!(!p.join(".claude").exists());
    hooks(&p, &["install", "gemini"]).assert_success();
    let gemini: Value = serde_json::from_str(&text(&p, ".gemini/settings.json").unwrap()).unwrap();
    assert_eq!(
        gemini["hooks"]["AfterAgent"][0]["hooks"][0]["command"],
        "rewind hook gemini"
    );
    hooks(&p, &["install", "codex"]).assert_success();
    let codex: Value = serde_json::from_str(&text(&p, ".codex/hooks.json").unwrap()).unwrap();
    assert_eq!(
        codex["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"],
        "rewind hook codex"
    );
    for agent in ["gemini", "codex"] {
        hooks(&p, &["uninstall", agent]).assert_success();
    }
    hooks(&p, &["uninstall", "claude-code", "--user"]).assert_success();
    for dir in [p.join(".gemini"), p.join(".codex"), sb.home.join(".claude")] {
        assert!(!dir.exists(), "{}", dir.display());
    }
}

#[test]
fn the_installed_command_run_as_claude_code_runs_it_records_a_turn() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("a.txt", "1\n");
    hooks(&p, &["install", "claude-code"]).assert_success();
    let settings: Value =
        serde_json::from_str(&text(&p, ".claude/settings.json").unwrap()).unwrap();
    let command = |event: &str| {
        settings["hooks"][event][0]["hooks"][0]["command"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    // Claude Code runs the command through a shell, with `rewind` found on PATH.
    let bin_dir = rewind_bin().parent().unwrap().to_owned();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap());
    let run_hook = |event: &str, payload: &Value| {
        let mut cmd = sb.isolated("sh");
        cmd.args(["-c", &command(event)])
            .current_dir(&p.path)
            .env("PATH", &path)
            .env("REWIND_DATA_DIR", &sb.data_dir)
            .env("CLAUDE_PROJECT_DIR", &p.path);
        let run = run_with_stdin(&mut cmd, payload.to_string().as_bytes());
        assert_eq!(
            (run.code(), run.stdout.as_str(), run.stderr.as_str()),
            (Some(0), "", "")
        );
    };
    run_hook("UserPromptSubmit", &claude_prompt(&p, "chat-1", "edit"));
    p.file("a.txt", "2\n");
    run_hook("Stop", &claude_stop(&p, "chat-1", false));
    assert_eq!(
        shape(&turns(&p, &["--session", "chat-1"])),
        [("1".into(), true)]
    );
}

/// Found by the issue-15 hostile pass: a settings path that is a device (through a symlink) was
/// replaced by a regular file (as root, `/dev/null` itself), and a FIFO hung install for ever.
/// Anything but a regular file is refused and left as it is.
#[test]
fn install_refuses_a_settings_path_that_is_a_device_or_a_fifo() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    // A device of our own (not /dev/null): the null device's numbers.
    let device = sb.root.join("mynull");
    let made = Command::new("mknod")
        .arg(&device)
        .args(["c", "1", "3"])
        .status()
        .unwrap();
    assert!(made.success(), "mknod (the tests run as root)");
    p.symlink(".claude/settings.json", &device);
    let run = hooks(&p, &["install", "claude-code"]);
    run.assert_code(1);
    assert!(run.stderr.contains("not a regular file"), "{run}");
    let kind = fs::metadata(&device).unwrap().file_type();
    assert!(
        std::os::unix::fs::FileTypeExt::is_char_device(&kind),
        "the device stays"
    );
    assert!(!sb.root.join("commands").exists());

    let q = sb.project("q");
    fs::create_dir_all(q.join(".claude")).unwrap();
    q.fifo(".claude/settings.json");
    let mut cmd = q.rewind_command(["hooks", "install", "claude-code"]);
    let run = run_with_deadline(&mut cmd, std::time::Duration::from_secs(10));
    run.assert_code(1);
    assert!(run.stderr.contains("not a regular file"), "{run}");
}

/// Found by the issue-15 hostile pass: with the settings a symlink into a dotfiles repository,
/// the slash command went beside the link's target, where Claude Code never looks.
#[test]
fn the_slash_command_goes_beside_the_settings_the_agent_reads() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    let dotfiles = sb.project("dotfiles");
    dotfiles.file("claude.json", "{}\n");
    p.symlink(".claude/settings.json", dotfiles.join("claude.json"));
    hooks(&p, &["install", "claude-code"]).assert_success();
    assert!(p.join(".claude/commands/rewind-undo.md").is_file());
    assert!(!dotfiles.join("commands").exists());
    hooks(&p, &["uninstall", "claude-code"]).assert_success();
    assert!(!p.join(".claude/commands/rewind-undo.md").exists());
}

/// Found by the issue-15 hostile pass: `rewind hook` exited 2 on a usage error (an agent name
/// or flag this build does not know, from a settings file written for another version), and
/// exit 2 blocks the agent. It exits 0 with one line on stderr.
#[test]
fn a_hook_with_arguments_this_build_does_not_know_never_blocks_the_agent() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    for args in [
        &["hook", "nosuchagent"][..],
        &["hook", "claude-code", "--bogus"],
        &["--wait", "bogus", "hook", "claude-code"],
    ] {
        let mut cmd = p.rewind_command(args);
        cmd.stdin(std::process::Stdio::null());
        let run = run_with_deadline(&mut cmd, DEFAULT_DEADLINE);
        assert_no_panic(&run);
        assert_eq!(run.code(), Some(0), "{run}");
        assert!(run.stdout.is_empty(), "{run}");
        assert_eq!(run.stderr.lines().count(), 1, "{run}");
    }
    // Elsewhere a usage error is still exit 2.
    p.rewind(["bogus"]).assert_code(2);
}

/// Found by the issue-15 hostile pass: once prune removed a session, every later prompt of that
/// conversation (resumed after a week, or `codex resume`) failed with `pruned` and recorded no
/// turn. It starts again from turn 1.
#[test]
fn a_conversation_resumed_after_its_session_was_pruned_records_turns_again() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("a.txt", "1\n");
    claude_turn(&p, "chat-1", "go", || {
        p.file("a.txt", "2\n");
    });
    let later = (chrono::Utc::now() + chrono::Duration::days(8)).to_rfc3339();
    at(&p, &later, &["prune"]);
    claude_turn(&p, "chat-1", "again", || {
        p.file("a.txt", "3\n");
    });
    let rows = turns(&p, &["--session", "chat-1"]);
    assert_eq!(shape(&rows), [("1".into(), true)]);
    assert_eq!(rows[0]["meta"]["prompt"], "again");
}

/// Found by the issue-15 hostile pass: `hooks install` created the data dir with the umask's
/// mode, so the settings backup in it (a token in the settings, say) was readable by every
/// user. The data dir is created private, as a store would create it.
#[test]
fn install_keeps_the_settings_backup_private() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file(
        ".claude/settings.json",
        "{\"env\": {\"GITHUB_TOKEN\": \"secret\"}}\n",
    );
    assert!(!sb.data_dir.exists());
    hooks(&p, &["install", "claude-code"]).assert_success();
    let mode = fs::metadata(&sb.data_dir).unwrap().permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o700
    );
}

/// Found by the issue-15 hostile pass: once the settings changed after install, uninstall took
/// out every entry whose command held `rewind hook` (a user's `rewind hook claude-code && say
/// done` under Notification too) and the whole matcher group around rewind's entry (a hook the
/// user had put beside it too). Only rewind's own entry goes, from the events install writes.
#[test]
fn uninstall_takes_out_only_rewinds_own_entry() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    hooks(&p, &["install", "claude-code"]).assert_success();
    let edited = r#"{
  "model": "sonnet",
  "hooks": {
    "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "rewind hook claude-code"}]}],
    "Stop": [{"hooks": [{"type": "command", "command": "rewind hook claude-code"}, {"type": "command", "command": "myhook"}]}],
    "Notification": [{"hooks": [{"type": "command", "command": "rewind hook claude-code && say done"}]}]
  }
}
"#;
    p.file(".claude/settings.json", edited);
    hooks(&p, &["uninstall", "claude-code"]).assert_success();
    let left: Value = serde_json::from_str(&text(&p, ".claude/settings.json").unwrap()).unwrap();
    assert_eq!(left["model"], "sonnet");
    assert_eq!(left["hooks"]["UserPromptSubmit"], json!([]));
    assert_eq!(
        left["hooks"]["Stop"],
        json!([{"hooks": [{"type": "command", "command": "myhook"}]}])
    );
    assert_eq!(
        left["hooks"]["Notification"][0]["hooks"][0]["command"],
        "rewind hook claude-code && say done"
    );
}

/// Found by the issue-15 hostile pass: session A changed a file, then session B only answered a
/// question; `undo --last-session` picked B, undid nothing and said it had. It undoes the
/// session whose last turn that changed files began last, and names it.
#[test]
fn undo_last_session_undoes_the_last_session_that_changed_files() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("f.txt", "1\n");
    claude_turn(&p, "A", "edit f", || {
        p.file("f.txt", "2\n");
    });
    claude_turn(&p, "B", "what is f?", || {});
    let run = p.rewind(["undo", "--last-session"]);
    run.assert_success();
    assert!(run.stderr.contains("undoing session A"), "{run}");
    assert_eq!(text(&p, "f.txt").unwrap(), "1\n");
}

/// Found by the issue-14/15 hostile pass: pressed again once the newest session had nothing
/// left to undo, `undo --last-session` went on to an older session's finished work.
#[test]
fn undo_last_session_pressed_again_never_moves_on_to_another_session() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("a.txt", "base\n");
    claude_turn(&p, "A", "edit a", || {
        p.file("a.txt", "base\nA\n");
    });
    claude_turn(&p, "B", "make b", || {
        p.file("b.txt", "B\n");
    });
    let first = p.rewind(["undo", "--last-session"]);
    first.assert_success();
    assert!(first.stderr.contains("undoing session B"), "{first}");
    let again = p.rewind(["--json", "undo", "--last-session"]);
    assert_eq!(again.code(), Some(1), "{again}");
    assert!(again.stderr.contains("undoing session B"), "{again}");
    assert_eq!(
        text(&p, "a.txt").unwrap(),
        "base\nA\n",
        "session A's work was undone"
    );
}

/// Found by the issue-14/15 hostile pass: after a plain `undo --last-session` left a file the
/// user had edited alone (its message says: use --force), `--force` undid the empty turn where
/// the agent only answered, and reported success having done nothing.
#[test]
fn undo_last_session_with_force_takes_the_turn_the_plain_press_left_files_of() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("a.txt", "base\n");
    claude_turn(&p, "S", "edit a", || {
        p.file("a.txt", "base\nagent\n");
        p.file("b.txt", "agent\n");
    });
    claude_turn(&p, "S", "just answer", || {});
    p.file("a.txt", "base\nagent\nuser\n");
    let plain = p.rewind(["undo", "--last-session"]);
    plain.assert_success();
    assert!(plain.stderr.contains("left alone a.txt"), "{plain}");
    let forced = p.rewind(["undo", "--last-session", "--force"]);
    forced.assert_success();
    assert_eq!(text(&p, "a.txt").unwrap(), "base\n", "{forced}");
}

/// Found by the issue-15 hostile pass: a turn the user interrupted (no `Stop` runs then) in a
/// session closed without another prompt stayed open, and made every other session's changes
/// shared (undo left them alone) until abandoned. Claude Code's `SessionEnd` ends it.
#[test]
fn a_session_that_ends_after_an_interrupt_ends_its_turn() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    hooks(&p, &["install", "claude-code"]).assert_success();
    let installed = text(&p, ".claude/settings.json").unwrap();
    assert!(installed.contains("\"SessionEnd\""), "{installed}");
    p.file("a.txt", "1\n");
    hook(&p, "claude-code", &claude_prompt(&p, "A", "edit a"));
    p.file("a.txt", "2\n");
    // Interrupted: no Stop. The user closes the session.
    let mut end = claude_stop(&p, "A", false);
    end["hook_event_name"] = json!("SessionEnd");
    end["reason"] = json!("prompt_input_exit");
    let run = hook(&p, "claude-code", &end);
    assert!(run.stdout.is_empty(), "{run}");
    let rows = turns(&p, &["--session", "A"]);
    assert_eq!(shape(&rows), [("1".into(), true)]);
    assert_eq!(rows[0]["files"], 1);
}

/// Found by the issue-15 hostile pass: a lone surrogate escape in the payload (`\ud800`, a
/// prompt cut inside a pair) made serde_json refuse the whole payload, and no turn began. It
/// becomes U+FFFD and the turn is recorded.
#[test]
fn a_lone_surrogate_in_the_payload_still_records_the_turn() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("a.txt", "1\n");
    let cwd = serde_json::to_string(&p.path).unwrap();
    let payload = format!(
        r#"{{"session_id": "chat-1", "cwd": {cwd}, "hook_event_name": "UserPromptSubmit", "prompt": "fix \ud800 and \\ud800 and \ud83d\ude00 and \udc00"}}"#
    );
    let run = hook_with(&p, "claude-code", payload.as_bytes(), &[]);
    assert_eq!(run.stderr, "", "{run}");
    let rows = turns(&p, &["--session", "chat-1"]);
    assert_eq!(shape(&rows), [("1".into(), false)]);
    assert_eq!(
        rows[0]["meta"]["prompt"],
        "fix \u{fffd} and \\ud800 and \u{1f600} and \u{fffd}"
    );
}

/// Found by the issue-15 hostile pass: a session whose highest turn number is `u64::MAX`
/// (begun by hand, or by another runtime) made the next prompt's number overflow (a panic,
/// caught; in a release build it wrapped to 0). Numbers go on in decimal.
#[test]
fn a_turn_number_at_u64_max_goes_on_without_wrapping() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("a.txt", "1\n");
    let max = u64::MAX.to_string();
    for turn in ["7", "0999", &max] {
        let args = ["turn", "begin", "--session", "chat-1", "--turn", turn];
        p.rewind(args).assert_success();
        p.rewind(["turn", "end", "--session", "chat-1", "--turn", turn])
            .assert_success();
    }
    hook(&p, "claude-code", &claude_prompt(&p, "chat-1", "go"));
    let rows = turns(&p, &["--session", "chat-1"]);
    let last = rows.last().unwrap();
    assert_eq!(last["turn"], "18446744073709551616");
    assert_eq!(last["meta"]["prompt"], "go");
}

/// Found by the issue-15 hostile pass: `hooks.log` grew without bound (a hook failing on every
/// prompt for months). At 1 MiB it becomes `hooks.log.1`, replacing the one before.
#[test]
fn the_hooks_log_is_rotated_at_a_size() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    fs::create_dir_all(&sb.data_dir).unwrap();
    let log = sb.data_dir.join("hooks.log");
    let old = "x".repeat(1 << 20);
    fs::write(&log, &old).unwrap();
    fs::write(sb.data_dir.join("hooks.log.1"), "older\n").unwrap();
    hook_with(&p, "claude-code", b"garbage", &[]);
    assert_eq!(
        fs::read_to_string(sb.data_dir.join("hooks.log.1")).unwrap(),
        old
    );
    let new = fs::read_to_string(&log).unwrap();
    assert_eq!(new.lines().count(), 1, "{new}");
    assert!(new.contains("not JSON"), "{new}");
    // Below the size, lines are appended.
    hook_with(&p, "claude-code", b"garbage", &[]);
    assert_eq!(fs::read_to_string(&log).unwrap().lines().count(), 2);
}

/// Found by the ninth hostile pass (older builds too): `hooks.log` was opened by name: a FIFO
/// there hung the hook, and the agent waiting on it; a symlink was appended through. It is now
/// opened as the store files are: the hook says it cannot write it, and goes on. A hard link
/// there is not appended through either.
#[test]
fn a_fifo_or_a_symlink_at_the_hooks_log_is_never_waited_on_or_written_through() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    fs::create_dir_all(&sb.data_dir).unwrap();
    let log = sb.data_dir.join("hooks.log");
    let outside = sb.root.join("outside.txt");
    for fifo in [true, false] {
        let _ = fs::remove_file(&log);
        plant(&log, fifo, &outside);
        let run = hook_with(&p, "claude-code", b"garbage", &[]);
        assert!(run.stderr.contains("not JSON"), "{run}");
        assert!(
            run.stderr.contains("cannot write") && run.stderr.contains("not a regular file"),
            "{run}"
        );
        assert!(!outside.exists(), "written through the symlink: {run}");
    }
    // (Tenth hostile pass: a hard link there was appended through.)
    fs::remove_file(&log).unwrap();
    fs::write(&outside, "someone's\n").unwrap();
    fs::hard_link(&outside, &log).unwrap();
    let run = hook_with(&p, "claude-code", b"garbage", &[]);
    assert!(run.stderr.contains("has other hard links"), "{run}");
    assert_eq!(fs::read_to_string(&outside).unwrap(), "someone's\n");
}

/// Found by the issue-15 hostile pass: a repository the agent created in the project (`git
/// init`, a clone) is not entered by snapshots, so its files were in no turn and undo left
/// them, and nothing said so. Its files are never silently outside the turn: either the turn
/// holds them (once snapshots take nested repositories' files in) or the hook says so, on
/// stderr and in `hooks.log`. One that was there before the turn (vendored) is not said at
/// every turn.
#[test]
fn a_nested_repository_the_agent_creates_is_said_to_be_outside_the_turn() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("a.txt", "1\n").file("old/lib/x.rs", "x\n");
    sb.git(Some(&p.join("old/lib")), ["init", "-q"]);
    hook(&p, "claude-code", &claude_prompt(&p, "chat-1", "edit a"));
    p.file("a.txt", "2\n");
    // Quiet (`hook` asserts an empty stderr): old/lib was there before the turn.
    hook(&p, "claude-code", &claude_stop(&p, "chat-1", false));
    hook(
        &p,
        "claude-code",
        &claude_prompt(&p, "chat-1", "vendor a lib"),
    );
    p.file("vendor/lib/src.rs", "fn lib() {}\n");
    sb.git(Some(&p.join("vendor/lib")), ["init", "-q"]);
    let stop = claude_stop(&p, "chat-1", false);
    let run = hook_with(&p, "claude-code", stop.to_string().as_bytes(), &[]);
    assert!(!run.stderr.contains("old/lib"), "{run}");
    let rows = turns(&p, &["--session", "chat-1"]);
    assert_eq!(shape(&rows), [("1".into(), true), ("2".into(), true)]);
    let in_turn = rows[1]["changed"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["file"] == "vendor/lib/src.rs");
    if !in_turn {
        assert!(
            run.stderr.contains("vendor/lib is a nested repository"),
            "outside the turn, and not said: {run}"
        );
        let log = fs::read_to_string(sb.data_dir.join("hooks.log")).unwrap();
        assert!(log.contains("vendor/lib"), "{log}");
    }
}

/// Found by the issue-15 hostile pass: the human `turns` table showed no prompt, so telling
/// the hooks' turns apart meant `--json`. Each turn's prompt is its last column, on one line,
/// cut to 60 characters, quoted with control characters escaped.
#[test]
fn the_turns_table_shows_each_prompt_on_one_quoted_line() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("a.txt", "1\n");
    let long = format!("rename \"a\"\nthen \x1b[2J\u{202e} {}", "é".repeat(100));
    for prompt in ["edit a", long.as_str()] {
        hook(&p, "claude-code", &claude_prompt(&p, "chat-1", prompt));
        hook(&p, "claude-code", &claude_stop(&p, "chat-1", false));
    }
    let run = p.rewind(["turns", "--session", "chat-1"]);
    run.assert_success();
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{run}");
    assert!(lines[0].ends_with("state        prompt"), "{run}");
    assert!(lines[1].ends_with("done         \"edit a\""), "{run}");
    let shown = format!(
        "\"rename \\\"a\\\"\\nthen \\u{{1b}}[2J\\u{{202e}} {}\"...",
        "é".repeat(60 - 22)
    );
    assert!(lines[2].ends_with(&shown), "{run}");
}

/// Found by the issue-15 hostile pass: uninstall after the user edited the settings cut from
/// the end of the entry before rewind's to the end of rewind's, and so dropped a comment the
/// user had written between them. Comments beside rewind's entry stay.
#[test]
fn uninstall_keeps_a_comment_written_beside_rewinds_entry() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    hooks(&p, &["install", "claude-code"]).assert_success();
    let rewind = r#"{"hooks": [{"type": "command", "command": "rewind hook claude-code"}]}"#;
    let edited = format!(
        r#"{{
  "hooks": {{
    "UserPromptSubmit": [
      {{"hooks": [{{"type": "command", "command": "log-prompt"}}]}}, // logs every prompt
      {rewind}
    ],
    "Stop": [
      {rewind}, /* rewind's, before mine */
      {{"hooks": [{{"type": "command", "command": "notify-send done"}}]}}
    ],
    "SessionEnd": [
      // only rewind here
      {rewind}
    ]
  }}
}}
"#
    );
    p.file(".claude/settings.json", &edited);
    hooks(&p, &["uninstall", "claude-code"]).assert_success();
    let expected = r#"{
  "hooks": {
    "UserPromptSubmit": [
      {"hooks": [{"type": "command", "command": "log-prompt"}]} // logs every prompt
    ],
    "Stop": [
      /* rewind's, before mine */
      {"hooks": [{"type": "command", "command": "notify-send done"}]}
    ],
    "SessionEnd": [
      // only rewind here
    ]
  }
}
"#;
    assert_eq!(text(&p, ".claude/settings.json").unwrap(), expected);
}

/// Found by the issue-15 hostile pass: settings with the `hooks` key twice (or an event twice
/// in it) were edited in one of them, while which one the agent reads depends on its JSON
/// reader (JavaScript's takes the last). Install and uninstall refuse them with one line and
/// leave the file as it is.
#[test]
fn settings_with_a_key_given_twice_are_refused() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    let rewind = r#"[{"hooks": [{"type": "command", "command": "rewind hook claude-code"}]}]"#;
    for twice in [
        "{\n  \"hooks\": {},\n  \"model\": \"opus\",\n  \"hooks\": {\"Stop\": []}\n}\n".to_owned(),
        format!("{{\"hooks\": {{\"Stop\": {rewind},\n \"Stop\": []}}}}\n"),
    ] {
        p.file(".claude/settings.json", &twice);
        for action in ["install", "uninstall"] {
            let run = hooks(&p, &[action, "claude-code"]);
            run.assert_code(1);
            assert_eq!(run.stderr.lines().count(), 1, "{run}");
            assert!(run.stderr.contains("is given twice (lines "), "{run}");
            assert_eq!(p.read(".claude/settings.json"), twice.as_bytes());
        }
    }
}

/// Found by the issue-15 hostile pass: `hooks install --data-dir X` wrote `rewind hook AGENT`,
/// so the agent's hooks (and `/rewind-undo`) used the default data dir, not X. The entry
/// carries `--data-dir X`, quoted for the shell; installing again changes nothing, installing
/// with the default data dir rewrites it, and uninstall knows it either way.
#[test]
fn install_with_a_data_dir_writes_it_into_the_hook_command() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("a.txt", "1\n");
    let data = sb.root.join("my data's");
    let install = |data: Option<&Path>, action: &str| {
        let mut cmd = sb.rewind_command_no_data_dir(std::iter::empty::<&str>());
        if let Some(data) = data {
            cmd.arg("--data-dir").arg(data);
        }
        cmd.arg("-C")
            .arg(&p.path)
            .args(["hooks", action, "claude-code"]);
        let run = run_with_deadline(&mut cmd, DEFAULT_DEADLINE);
        run.assert_success();
        text(&p, ".claude/settings.json")
    };
    let installed = install(Some(&data), "install").unwrap();
    let settings: Value = serde_json::from_str(&installed).unwrap();
    let command = format!(
        "rewind --data-dir '{}/my data'\\''s' hook claude-code",
        sb.root.display()
    );
    for event in ["UserPromptSubmit", "Stop", "SessionEnd"] {
        assert_eq!(settings["hooks"][event][0]["hooks"][0]["command"], command);
    }
    let slash = text(&p, ".claude/commands/rewind-undo.md").unwrap();
    assert!(
        slash.contains(&format!(
            "`rewind --data-dir '{}/my data'\\''s' -C ",
            sb.root.display()
        )),
        "{slash}"
    );
    assert_eq!(install(Some(&data), "install").unwrap(), installed, "twice");

    // Claude Code runs it through a shell, with no REWIND_DATA_DIR: the turn is in X.
    let bin_dir = rewind_bin().parent().unwrap().to_owned();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap());
    let mut cmd = sb.isolated("sh");
    cmd.args(["-c", &command])
        .current_dir(&p.path)
        .env("PATH", &path);
    let payload = claude_prompt(&p, "chat-1", "edit");
    let run = run_with_stdin(&mut cmd, payload.to_string().as_bytes());
    assert_eq!((run.code(), run.stderr.as_str()), (Some(0), ""), "{run}");
    let mut cmd = sb.rewind_command_no_data_dir(["--json", "turns", "--session", "chat-1"]);
    cmd.arg("--data-dir").arg(&data).arg("-C").arg(&p.path);
    let run = run_with_deadline(&mut cmd, DEFAULT_DEADLINE);
    run.assert_success();
    assert_eq!(one_json(&run)[0]["meta"]["prompt"], "edit");

    // With the data dir rewind finds by itself (here $HOME/.local/share/rewind), the entry
    // is rewritten to the plain command.
    let plain = install(None, "install").unwrap();
    assert_eq!(
        plain.matches("\"rewind hook claude-code\"").count(),
        3,
        "{plain}"
    );
    assert!(!plain.contains("--data-dir"), "{plain}");
    let slash = text(&p, ".claude/commands/rewind-undo.md").unwrap();
    assert!(
        slash.contains("`rewind -C "),
        "the slash command too: {slash}"
    );
    // Back to X: the slash command for X again; a slash command the user changed stays.
    install(Some(&data), "install").unwrap();
    let slash = text(&p, ".claude/commands/rewind-undo.md").unwrap();
    assert!(slash.contains("`rewind --data-dir '"), "{slash}");
    let mine = slash.replace("Change no file.", "Change no file. Be brief.");
    p.file(".claude/commands/rewind-undo.md", &mine);
    install(None, "install").unwrap();
    assert_eq!(text(&p, ".claude/commands/rewind-undo.md").unwrap(), mine);
    p.file(".claude/commands/rewind-undo.md", &slash);
    // Uninstall knows rewind's entry with --data-dir too.
    p.file(
        ".claude/settings.json",
        installed.replacen("{", "{\"model\": \"opus\",", 1),
    );
    let left = install(None, "uninstall").unwrap();
    assert!(!left.contains("rewind"), "{left}");
    assert!(left.contains("\"model\": \"opus\""), "{left}");
    assert!(
        !p.join(".claude/commands").exists(),
        "X's slash command is rewind's too"
    );
}

/// With `--data-dir` in rewind's entry, uninstall (which matched `rewind hook AGENT` word for
/// word) left it. It takes rewind's entry with any path to the binary and any data dir, quoted
/// or not, and nothing that does more (operators, command substitution).
#[test]
fn uninstall_takes_rewinds_entry_with_a_data_dir_and_no_other_command() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    hooks(&p, &["install", "claude-code"]).assert_success();
    let entries = [
        ("/usr/local/bin/rewind hook claude-code", true),
        ("rewind --data-dir /d hook claude-code", true),
        ("rewind --data-dir '/a b'\\''c' hook claude-code", true),
        ("rewind --data-dir=/d hook claude-code", true),
        ("rewind --data-dir", false),
        ("rewind", false),
        ("", false),
        ("rewind hook claude-code; rm -rf x", false),
        ("rewind --data-dir $HOME/d hook claude-code", true),
        ("~/.cargo/bin/rewind hook claude-code", true),
        ("${CARGO_HOME}/bin/rewind hook claude-code", true),
        ("$(which rewind) hook claude-code", false),
        ("rewind hook claude-code `say done`", false),
        ("rewind --data-dir '/unclosed hook claude-code", false),
        ("rewind hook gemini", false),
    ];
    let list: Vec<String> = entries
        .iter()
        .map(|(c, _)| json!({"hooks": [{"type": "command", "command": c}]}).to_string())
        .collect();
    p.file(
        ".claude/settings.json",
        format!("{{\"hooks\": {{\"Stop\": [\n{}\n]}}}}\n", list.join(",\n")),
    );
    hooks(&p, &["uninstall", "claude-code"]).assert_success();
    let left: Value = serde_json::from_str(&text(&p, ".claude/settings.json").unwrap()).unwrap();
    let commands: Vec<&str> = left["hooks"]["Stop"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["hooks"][0]["command"].as_str().unwrap())
        .collect();
    let kept: Vec<&str> = entries
        .iter()
        .filter(|(_, ours)| !ours)
        .map(|(c, _)| *c)
        .collect();
    assert_eq!(commands, kept);
}

/// Found by the issue-15 hostile pass: install replaced a read-only settings file (as root,
/// which the permission bits do not stop). It is refused with one line and left as it is.
#[test]
fn install_refuses_a_read_only_settings_file() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    let original = ODD_SETTINGS[3].1;
    p.file(".claude/settings.json", original);
    p.chmod(".claude/settings.json", 0o444);
    let run = hooks(&p, &["install", "claude-code"]);
    run.assert_code(1);
    assert_eq!(run.stderr.lines().count(), 1, "{run}");
    assert!(run.stderr.contains("read-only"), "{run}");
    assert_eq!(p.read(".claude/settings.json"), original.as_bytes());
    let mode = fs::metadata(p.join(".claude/settings.json"))
        .unwrap()
        .permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o444
    );
    assert!(!p.join(".claude/commands").exists());
}

/// Found by the issue-15 hostile pass: a settings file hard-linked from a dotfiles directory
/// was replaced by a new file, which split the link (the dotfiles copy kept no hooks, and
/// uninstall's restore went to one side only). It is written in place: both names see install
/// and uninstall.
#[test]
fn install_into_a_hard_linked_settings_file_keeps_the_link() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    let dotfiles = sb.project("dotfiles");
    let original = ODD_SETTINGS[4].1;
    dotfiles.file("claude.json", original);
    fs::create_dir_all(p.join(".claude")).unwrap();
    fs::hard_link(
        dotfiles.join("claude.json"),
        p.join(".claude/settings.json"),
    )
    .unwrap();
    hooks(&p, &["install", "claude-code"]).assert_success();
    let installed = text(&dotfiles, "claude.json").unwrap();
    assert!(installed.contains("rewind hook claude-code"), "{installed}");
    assert_eq!(text(&p, ".claude/settings.json").unwrap(), installed);
    let links = |path: &Path| std::os::unix::fs::MetadataExt::nlink(&fs::metadata(path).unwrap());
    assert_eq!(links(&p.join(".claude/settings.json")), 2);
    hooks(&p, &["uninstall", "claude-code"]).assert_success();
    assert_eq!(dotfiles.read("claude.json"), original.as_bytes());
    assert_eq!(links(&dotfiles.join("claude.json")), 2);
}

/// Found by the issue-15 hostile pass: an edit saved to the settings while install ran (after
/// install read the file, before it renamed its new one over it) was lost. Install reads the
/// file again just before the rename and refuses, leaving the edit. The window is held open
/// by a FIFO where install reads its own record of the last install.
#[test]
fn an_edit_saved_while_install_runs_is_not_lost() {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file(".claude/settings.json", "{}\n");
    // The record's name (a hash of the settings path): from an install and uninstall.
    hooks(&p, &["install", "claude-code"]).assert_success();
    let record = fs::read_dir(sb.data_dir.join("hooks"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|path| path.extension() == Some(OsStr::new("installed")))
        .unwrap();
    hooks(&p, &["uninstall", "claude-code"]).assert_success();
    assert!(!record.exists());
    let status = Command::new("mkfifo").arg(&record).status().unwrap();
    assert!(status.success(), "mkfifo");

    let mut cmd =
        p.sb.rewind_command_no_data_dir([OsStr::new("-C"), p.path.as_os_str()]);
    cmd.args(["hooks", "install", "claude-code"])
        .env("REWIND_DATA_DIR", &sb.data_dir);
    let mut child = spawn_piped(&mut cmd);
    // Wait (at most 10 s) until install opens the FIFO to read: O_NONBLOCK opens for writing
    // only once there is a reader.
    let started = std::time::Instant::now();
    let mut fifo = loop {
        match fs::OpenOptions::new()
            .write(true)
            .custom_flags(0o4000) // O_NONBLOCK
            .open(&record)
        {
            Ok(file) => break file,
            Err(_) if started.elapsed() < std::time::Duration::from_secs(10) => {
                assert!(child.try_wait().unwrap().is_none(), "install ended early");
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(err) => panic!("install never read its record: {err}"),
        }
    };
    let edited = "{\"model\": \"opus\"}\n";
    p.file(".claude/settings.json", edited);
    fs::remove_file(&record).unwrap();
    fifo.write_all(b"{}\n").unwrap();
    drop(fifo);
    let run = finish(child, DEFAULT_DEADLINE, "hooks install");
    run.assert_code(1);
    assert!(
        run.stderr.contains("changed while rewind was editing it"),
        "{run}"
    );
    assert_eq!(text(&p, ".claude/settings.json").unwrap(), edited);
    // Run again, it installs into the edited file.
    hooks(&p, &["install", "claude-code"]).assert_success();
    let now = text(&p, ".claude/settings.json").unwrap();
    assert!(now.contains("opus") && now.contains("rewind hook"), "{now}");
}

/// Found by the issue-15 hostile pass: `undo --last-session` while the agent was at work (its
/// turn open) took back that turn's edits so far along with the last ended turn. It refuses,
/// and changes nothing, while the open turn has changed files; once the turn ends, it undoes
/// that turn.
#[test]
fn undo_last_session_during_an_open_turn_leaves_that_turns_edits() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("a.txt", "1\n").file("b.txt", "1\n");
    claude_turn(&p, "chat-1", "edit a", || {
        p.file("a.txt", "2\n");
    });
    hook(&p, "claude-code", &claude_prompt(&p, "chat-1", "edit b"));
    p.file("b.txt", "2\n");
    let run = p.rewind(["undo", "--last-session"]);
    run.assert_code(1);
    assert!(
        run.stderr.contains("is open and has changed files"),
        "{run}"
    );
    assert_eq!(text(&p, "a.txt").unwrap(), "2\n");
    assert_eq!(text(&p, "b.txt").unwrap(), "2\n");
    hook(&p, "claude-code", &claude_stop(&p, "chat-1", false));
    p.rewind(["undo", "--last-session"]).assert_success();
    assert_eq!(text(&p, "b.txt").unwrap(), "1\n");
    assert_eq!(text(&p, "a.txt").unwrap(), "2\n");
}

/// Session A's turn 1 changes `a.txt` from "1" to "2" and is left open (its runtime dies);
/// then turn 2 begins, from the command line.
fn turn_1_left_open_then_turn_2_begun(p: &TestProject) {
    p.file("a.txt", "1\n");
    p.rewind(["turn", "begin", "--session", "A", "--turn", "1"])
        .assert_success();
    p.file("a.txt", "2\n");
    p.rewind(["turn", "begin", "--session", "A", "--turn", "2"])
        .assert_success();
}

/// Found in review of "a turn left open when its session went on ended where the next began":
/// `undo --last-session` took such an older turn for the session's open one and refused, as
/// if the agent were still at work in it. Only the session's latest turn can be open.
#[test]
fn undo_last_session_passes_a_turn_left_open_before_the_sessions_last_turn() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("b.txt", "1\n");
    turn_1_left_open_then_turn_2_begun(&p);
    p.file("b.txt", "2\n");
    p.rewind(["turn", "end", "--session", "A", "--turn", "2"])
        .assert_success();
    p.rewind(["undo", "--last-session"]).assert_success();
    assert_eq!(text(&p, "b.txt").unwrap(), "1\n");
    assert_eq!(text(&p, "a.txt").unwrap(), "2\n");
}

/// Found by the r53 hostile pass: with a turn left open (which lists no files) and an empty
/// open turn after it, `undo --last-session` found no turn that changed files and undid the
/// empty one: exit 0, nothing changed. The turn left open counts as ended, with what undoing
/// it would change.
#[test]
fn undo_last_session_takes_back_a_turn_left_open_before_an_empty_open_turn() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    turn_1_left_open_then_turn_2_begun(&p);
    p.rewind(["undo", "--last-session"]).assert_success();
    assert_eq!(text(&p, "a.txt").unwrap(), "1\n");
}

/// Found by the issue-15 hostile pass: after an interrupt (no `Stop` runs), a hand edit, then
/// `/rewind-undo`: the prompt ended the interrupted turn with the hand edit in it, and the undo
/// reverted the hand edit. No hook marks the interrupt, so the agent's edits and the user's
/// cannot be told apart: the prompt leaves the turn open and its undo refuses, naming it.
#[test]
fn rewind_undo_after_an_interrupt_and_a_hand_edit_leaves_the_hand_edit() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("a.txt", "1\n")
        .file("b.txt", "1\n")
        .file("mine.txt", "1\n");
    claude_turn(&p, "chat-1", "edit a", || {
        p.file("a.txt", "2\n");
    });
    hook(&p, "claude-code", &claude_prompt(&p, "chat-1", "edit b"));
    p.file("b.txt", "2\n");
    // Interrupted: no Stop. The user edits a file by hand, then types /rewind-undo.
    p.file("mine.txt", "mine\n");
    hook(
        &p,
        "claude-code",
        &claude_prompt(&p, "chat-1", "/rewind-undo"),
    );
    let run = p.rewind(["undo", "--last-session"]);
    run.assert_code(1);
    assert!(run.stderr.contains("turn \"2\""), "{run}");
    assert_eq!(text(&p, "mine.txt").unwrap(), "mine\n");
    assert_eq!(text(&p, "a.txt").unwrap(), "2\n");
    assert_eq!(
        shape(&turns(&p, &["--session", "chat-1"])),
        [("1".into(), true), ("2".into(), false)]
    );
}

/// Found by the issue-15 hostile pass: a prompt that runs `/rewind-undo` and gives more
/// instructions began no turn (and a turn around it would have been rolled back by its own
/// undo), so the edits the agent made after the undo were in no turn. It is a turn: the undo
/// ends it while it is empty and begins the next with its prompt, which holds those edits.
#[test]
fn a_rewind_prompt_with_more_instructions_puts_the_edits_after_the_undo_in_a_turn() {
    let sb = Sandbox::new();
    let p = sb.project("p");
    p.file("a.txt", "1\n");
    claude_turn(&p, "chat-1", "edit a", || {
        p.file("a.txt", "2\n");
    });
    let prompt = "/rewind-undo then add b.txt";
    hook(&p, "claude-code", &claude_prompt(&p, "chat-1", prompt));
    // The slash command's undo, then the agent's edit.
    p.rewind(["undo", "--last-session"]).assert_success();
    assert_eq!(text(&p, "a.txt").unwrap(), "1\n");
    p.file("b.txt", "new\n");
    hook(&p, "claude-code", &claude_stop(&p, "chat-1", false));
    let rows = turns(&p, &["--session", "chat-1"]);
    let last = rows.last().unwrap();
    assert_eq!(
        (last["ended_at"].is_null(), &last["meta"]["prompt"]),
        (false, &json!(prompt))
    );
    assert_eq!(last["changed"][0]["file"], "b.txt", "{rows:?}");
    p.rewind(["undo", "--last-session"]).assert_success();
    assert!(!p.join("b.txt").exists());
    assert_eq!(text(&p, "a.txt").unwrap(), "1\n");
}
