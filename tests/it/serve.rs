//! Integration tests for `rewind serve`: JSON-RPC 2.0 over stdio, driven the way a runtime
//! drives it — one long-lived process, requests written to its stdin one per line, responses
//! read from its stdout by a reader thread, every wait bounded by a deadline.
//!
//! Oracles: git on the store for contents and counts (`git diff --numstat --no-renames`,
//! `--name-status`, `cat-file`, and the tree `git add -A && git write-tree` writes for the
//! project); the CLI's `--json` output for result shapes and error codes (a server answer
//! must equal the CLI's answer to the same question).
//!
//! Helpers shared with the other test files live in tests/it/common.rs.

use crate::common::*;
use serde_json::json;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Longest wait for any one response, and for the server to exit once its stdin closes.
const DEADLINE: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------
// Driving a server
// ---------------------------------------------------------------------------

/// A running `rewind serve`: stdin is ours to write, stdout is read line by line by a thread.
struct Server {
    what: String,
    child: Child,
    stdin: Option<ChildStdin>,
    /// Raw response lines (with their `\n`); the channel closes when stdout ends.
    lines: Receiver<Vec<u8>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    stderr_thread: Option<JoinHandle<()>>,
    next_id: u64,
}

impl Server {
    /// `rewind --data-dir <sandbox> -C <project> serve`.
    fn start(p: &TestProject) -> Server {
        let what = format!("rewind -C {} serve", p.path.display());
        Server::spawn(p.rewind_command(["serve"]), what)
    }

    fn spawn(mut cmd: Command, what: String) -> Server {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot spawn `{what}`: {e}"));
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut line = Vec::new();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if tx.send(line).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let sink = stderr.clone();
        let mut err = child.stderr.take().unwrap();
        let stderr_thread = thread::spawn(move || {
            let mut buf = [0u8; 8192];
            loop {
                match err.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => sink.lock().unwrap().extend_from_slice(&buf[..n]),
                }
            }
        });
        Server {
            what,
            child,
            stdin,
            lines,
            stderr,
            stderr_thread: Some(stderr_thread),
            next_id: 0,
        }
    }

    fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// Fails the test, saying how the server ended (if it did) and what it wrote on stderr.
    fn fail(&mut self, message: &str) -> ! {
        let mut status = None;
        for _ in 0..200 {
            if let Ok(Some(st)) = self.child.try_wait() {
                status = Some(st);
                break;
            }
            thread::sleep(Duration::from_millis(10));
        }
        let status = match status {
            Some(st) => format!("exited: {st}"),
            None => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                "still running (killed)".to_string()
            }
        };
        thread::sleep(Duration::from_millis(50));
        panic!(
            "`{}`: {message}\nserver {status}\n--- server stderr ---\n{}",
            self.what,
            self.stderr_text()
        );
    }

    /// Writes bytes to the server's stdin as they are (no newline added).
    fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        let written = stdin.write_all(bytes).and_then(|()| stdin.flush());
        if let Err(e) = written {
            let shown = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned();
            self.fail(&format!("cannot write {shown:?} to its stdin: {e}"));
        }
    }

    /// Writes one line.
    fn send_line(&mut self, line: &[u8]) {
        let mut bytes = line.to_vec();
        bytes.push(b'\n');
        self.send_raw(&bytes);
    }

    fn send(&mut self, message: &Value) {
        self.send_line(message.to_string().as_bytes());
    }

    /// The next response: one line, UTF-8, one JSON value shaped as JSON-RPC 2.0 responses
    /// are (or an array of them). Fails after [`DEADLINE`] or when stdout ends.
    fn recv(&mut self) -> Value {
        let line = match self.lines.recv_timeout(DEADLINE) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => {
                self.fail(&format!("no response within {DEADLINE:?}"))
            }
            Err(RecvTimeoutError::Disconnected) => {
                self.fail("its stdout ended while a response was expected")
            }
        };
        let shown = String::from_utf8_lossy(&line[..line.len().min(400)]).into_owned();
        if line.last() != Some(&b'\n') {
            self.fail(&format!("response not terminated by a newline: {shown:?}"));
        }
        let Ok(text) = std::str::from_utf8(&line) else {
            self.fail(&format!("response is not UTF-8: {shown:?}"))
        };
        let value: Value = match serde_json::from_str(text) {
            Ok(value) => value,
            Err(e) => self.fail(&format!("response is not one JSON value ({e}): {shown:?}")),
        };
        if let Err(problem) = check_response(&value) {
            self.fail(&format!("malformed response ({problem}): {shown}"));
        }
        value
    }

    fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Sends a request with a fresh id and returns the whole response, which must carry that id.
    fn request(&mut self, method: &str, params: Option<Value>) -> Value {
        let id = self.next_id();
        let mut request = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if let Some(params) = params {
            request["params"] = params;
        }
        self.send(&request);
        let response = self.recv();
        if response.get("id") != Some(&json!(id)) {
            self.fail(&format!("{response} does not answer {request}"));
        }
        response
    }

    /// `result` of a request that must succeed.
    fn ok(&mut self, method: &str, params: Value) -> Value {
        let params = (!params.is_null()).then_some(params);
        let response = self.request(method, params.clone());
        match response.get("result") {
            Some(result) => result.clone(),
            None => self.fail(&format!("{method} {params:?} failed: {response}")),
        }
    }

    /// `error` of a request that must fail.
    fn err(&mut self, method: &str, params: Option<Value>) -> Value {
        let response = self.request(method, params.clone());
        match response.get("error") {
            Some(error) => error.clone(),
            None => self.fail(&format!("{method} {params:?} must fail: {response}")),
        }
    }

    /// Sends `raw` (a line) and returns the one response it must get.
    fn answer_to(&mut self, raw: &[u8]) -> Value {
        self.send_line(raw);
        self.recv()
    }

    /// Asks something harmless and checks that its answer is the very next line: whatever was
    /// sent before got no response, and the server still works.
    fn assert_silent(&mut self, after: &str) {
        let id = format!("sentinel-{}", self.next_id());
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "turns"}));
        let response = self.recv();
        if response["id"] != json!(id) {
            self.fail(&format!(
                "{after} must get no response, but the next line was {response}"
            ));
        }
        if !response["result"].is_array() {
            self.fail(&format!("`turns` after {after} failed: {response}"));
        }
    }

    /// Closes stdin: the server must exit 0 within [`DEADLINE`] without writing anything else.
    /// Returns its stderr.
    fn close(mut self) -> String {
        drop(self.stdin.take());
        let start = Instant::now();
        let status: ExitStatus = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if start.elapsed() > DEADLINE => self.fail(&format!(
                    "did not exit within {DEADLINE:?} of stdin closing"
                )),
                Ok(None) => thread::sleep(Duration::from_millis(5)),
                Err(e) => self.fail(&format!("wait: {e}")),
            }
        };
        let mut extra = Vec::new();
        loop {
            match self.lines.recv_timeout(DEADLINE) {
                Ok(line) => extra.push(String::from_utf8_lossy(&line).into_owned()),
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => self.fail("stdout still open after exit"),
            }
        }
        if let Some(t) = self.stderr_thread.take() {
            t.join().unwrap();
        }
        let stderr = self.stderr_text();
        assert!(
            status.success(),
            "`{}` must exit 0 when stdin closes, got {status}\n--- stderr ---\n{stderr}",
            self.what
        );
        assert!(
            extra.is_empty(),
            "`{}` wrote unexpected lines before exiting: {extra:?}",
            self.what
        );
        assert!(!stderr.contains("panicked"), "server panicked:\n{stderr}");
        stderr
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // A failed test must not leave a server behind.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A JSON-RPC 2.0 response (or a batch of them): `jsonrpc: "2.0"`, an `id`, exactly one of
/// `result` and `error`; an error has an integer `code` and a message, and an operation
/// failure (-32000) a string `data.code`.
fn check_response(value: &Value) -> Result<(), String> {
    if let Some(batch) = value.as_array() {
        if batch.is_empty() {
            return Err("an empty array is never a response".into());
        }
        return batch.iter().try_for_each(check_response);
    }
    let object = value.as_object().ok_or("not an object")?;
    for key in object.keys() {
        if !["jsonrpc", "id", "result", "error"].contains(&key.as_str()) {
            return Err(format!("unexpected member {key:?}"));
        }
    }
    if object.get("jsonrpc") != Some(&json!("2.0")) {
        return Err("jsonrpc must be \"2.0\"".into());
    }
    if !object.contains_key("id") {
        return Err("no id".into());
    }
    match (object.get("result"), object.get("error")) {
        (Some(_), None) => Ok(()),
        (None, Some(error)) => {
            let code = error["code"]
                .as_i64()
                .ok_or("error.code is not an integer")?;
            let message = error["message"]
                .as_str()
                .ok_or("error.message is not a string")?;
            if message.trim().is_empty() {
                return Err("empty error.message".into());
            }
            if code == -32000 && error["data"]["code"].as_str().is_none() {
                return Err("an operation failure must carry data.code".into());
            }
            Ok(())
        }
        _ => Err("exactly one of result and error".into()),
    }
}

// ---------------------------------------------------------------------------
// Oracles
// ---------------------------------------------------------------------------

/// `rewind --json ARGS` (the CLI answer to compare with); must succeed with one JSON line.
fn cli(p: &TestProject, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let run = p.rewind(&all);
    run.assert_success();
    serde_json::from_str(run.stdout.trim())
        .unwrap_or_else(|e| panic!("`rewind --json {args:?}` printed no JSON ({e}): {run}"))
}

/// `rewind --json ARGS` that must fail: exit 1 and `{"error": {"code", "message"}}`.
fn cli_error(p: &TestProject, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let run = p.rewind(&all);
    run.assert_code(1);
    let json: Value = serde_json::from_str(run.stdout.trim())
        .unwrap_or_else(|e| panic!("`rewind --json {args:?}` printed no JSON ({e}): {run}"));
    json["error"].clone()
}

fn git_lines(sb: &Sandbox, store: &Path, args: &[&str]) -> Vec<String> {
    sb.git_in(store, args)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// Rows with `file`, `status`, `additions`, `deletions` (diff_full rows, a turn's files) must
/// be `git diff --numstat --no-renames FROM TO`'s, in its order, with `--name-status`'s
/// statuses; a binary file counts 0/0.
fn assert_rows_match_git(
    sb: &Sandbox,
    store: &Path,
    rows: &Value,
    from: &str,
    to: &str,
    what: &str,
) {
    let rows = rows
        .as_array()
        .unwrap_or_else(|| panic!("{what}: not an array: {rows}"));
    let numstat = git_lines(sb, store, &["diff", "--numstat", "--no-renames", from, to]);
    let status = git_lines(
        sb,
        store,
        &["diff", "--name-status", "--no-renames", from, to],
    );
    let files: Vec<&str> = rows
        .iter()
        .map(|r| r["file"].as_str().unwrap_or("?"))
        .collect();
    let want: Vec<&str> = numstat
        .iter()
        .map(|l| l.splitn(3, '\t').nth(2).unwrap())
        .collect();
    assert_eq!(files, want, "{what}: files (and order) must be numstat's");
    for ((row, n), s) in rows.iter().zip(&numstat).zip(&status) {
        let mut parts = n.splitn(3, '\t');
        let (add, del) = (parts.next().unwrap(), parts.next().unwrap());
        let binary = add == "-";
        let count = |c: &str| if binary { 0 } else { c.parse::<u64>().unwrap() };
        assert_eq!(
            row["additions"],
            count(add),
            "{what}: additions of {row} (git: {n})"
        );
        assert_eq!(
            row["deletions"],
            count(del),
            "{what}: deletions of {row} (git: {n})"
        );
        if let Some(flag) = row.get("binary") {
            assert_eq!(
                flag,
                &json!(binary),
                "{what}: binary flag of {row} (git: {n})"
            );
        }
        let want_status = match s.split('\t').next().unwrap() {
            "A" => "added",
            "D" => "deleted",
            "M" | "T" => "modified",
            other => panic!("git status {other}"),
        };
        assert_eq!(
            row["status"], want_status,
            "{what}: status of {row} (git: {s})"
        );
    }
}

fn oid(value: &Value, what: &str) -> String {
    let s = value
        .as_str()
        .unwrap_or_else(|| panic!("{what}: not a string: {value}"));
    assert_oid(s, what);
    s.to_string()
}

fn strings(value: &Value) -> BTreeSet<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {value}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

// ---------------------------------------------------------------------------
// The whole cycle through one server
// ---------------------------------------------------------------------------

#[test]
fn full_cycle_through_one_server_matches_git() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "one\ntwo\nthree\n")
        .file("src/lib.rs", "pub fn f() -> u32 {\n    1\n}\n")
        .file("gone.txt", "to be deleted\n")
        .file("bin.dat", b"\0\x01\x02 binary\n")
        .exec("run.sh", "#!/bin/sh\necho hi\n")
        .file(".gitignore", "*.log\n")
        .file("debug.log", "ignored\n");
    let mut s = Server::start(&p);

    // track: the tree git writes for the project.
    let t0 = s.ok("track", Value::Null);
    let h0 = oid(&t0["hash"], "track");
    let oracle = p.git_tree();
    assert_eq!(h0, oracle.id, "track must write git's tree: {t0}");
    assert_eq!(t0["files"], oracle.files as u64, "{t0}");
    assert_eq!(t0["skipped"], json!([]), "{t0}");
    assert_eq!(
        s.ok("track", json!({})),
        t0,
        "params {{}} is the same as none"
    );
    let store = p.store();

    // An agent edits: modify, add in a new directory, delete, binary change, mode change.
    p.file("a.txt", "one\nTWO\nthree\nfour\n")
        .file("new/dir/n.txt", "new\n")
        .remove("gone.txt")
        .file("bin.dat", b"\0\x03 binary, changed\n")
        .chmod("run.sh", 0o644);

    // patch (with an abbreviated id): the paths git lists, in git's order.
    let patch = s.ok("patch", json!({"hash": &h0[..10]}));
    assert_eq!(patch["hash"], h0, "patch names the full id: {patch}");
    let h1 = oid(&s.ok("track", Value::Null)["hash"], "track");
    assert_eq!(h1, p.git_tree().id, "the second snapshot is git's tree");
    let names = git_lines(
        &sb,
        &store,
        &["diff", "--name-only", "--no-renames", &h0, &h1],
    );
    assert_eq!(patch["files"], json!(names), "patch files vs git: {patch}");
    assert_eq!(
        patch,
        cli(&p, &["patch", &h0]),
        "patch: the same answer as the CLI's"
    );

    // has_changes.
    let changed = s.ok("has_changes", json!({"hash": &h0[..8]}));
    assert_eq!(changed, json!({"hash": h0, "changed": true}));
    assert_eq!(
        s.ok("has_changes", json!({"hash": h1})),
        json!({"hash": h1, "changed": false})
    );

    // diff_full against the project now and between snapshots: numstat's rows.
    let rows = s.ok("diff_full", json!({"from": h0}));
    assert_rows_match_git(&sb, &store, &rows, &h0, &h1, "diff_full {from}");
    let between = s.ok("diff_full", json!({"from": h0, "to": h1}));
    assert_eq!(
        rows, between,
        "to = the project now, or its snapshot: same rows"
    );
    assert_eq!(
        between,
        cli(&p, &["diff-full", &h0, &h1]),
        "diff_full vs the CLI's"
    );
    let a_row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["file"] == "a.txt")
        .expect("a.txt row");
    assert_eq!(a_row["before"], "one\ntwo\nthree\n");
    assert_eq!(a_row["after"], "one\nTWO\nthree\nfour\n");
    assert_eq!(
        (a_row["additions"].as_u64(), a_row["deletions"].as_u64()),
        (Some(2), Some(1))
    );

    // diff: git's text.
    let text = s.ok("diff", json!({"from": h0, "to": h1}));
    let git_text = sb.git_in(
        &store,
        [
            "-c",
            "core.quotePath=false",
            "diff",
            "--no-ext-diff",
            &h0,
            &h1,
        ],
    );
    assert_eq!(text, json!({"diff": git_text}), "diff text vs git");
    assert_eq!(
        s.ok("diff", json!({"from": h0})),
        text,
        "diff to the project now"
    );
    assert_eq!(text, cli(&p, &["diff", &h0, &h1]), "diff vs the CLI's");

    // restore: the exact bytes and modes of h0 come back, new files go, ignored ones stay.
    let restored = s.ok("restore", json!({"hash": h0}));
    assert_eq!(restored["hash"], h0, "{restored}");
    assert_eq!(
        strings(&restored["written"]),
        set(&["a.txt", "bin.dat", "gone.txt", "run.sh"]),
        "{restored}"
    );
    assert_eq!(
        strings(&restored["deleted"]),
        set(&["new/dir/n.txt"]),
        "{restored}"
    );
    assert_eq!(restored["conflicts"], json!([]), "{restored}");
    assert_eq!(restored["failed"], json!([]), "{restored}");
    assert_eq!(p.git_tree().id, h0, "after restore the project is h0 again");
    for path in ["a.txt", "bin.dat", "gone.txt", "run.sh", "src/lib.rs"] {
        assert_eq!(p.read(path), p.store_blob(&h0, path), "bytes of {path}");
    }
    assert!(
        !p.join("new").exists(),
        "directories left empty are removed"
    );
    assert_eq!(
        p.read("debug.log"),
        b"ignored\n",
        "ignored files are never touched"
    );
    // Its undo point is the project as it was just before: restoring it is a redo.
    let undo = oid(&restored["undo"], "restore undo");
    assert_eq!(
        undo, h1,
        "the undo tree is the snapshot taken before restoring"
    );
    let redo = s.ok("restore", json!({"hash": undo, "force": false}));
    assert_eq!(redo["failed"], json!([]), "{redo}");
    assert_eq!(
        p.git_tree().id,
        h1,
        "restoring the undo point brings the edits back"
    );

    // revert: only the given paths.
    let reverted = s.ok("revert", json!({"hash": h0, "paths": ["a.txt", "new"]}));
    assert_eq!(strings(&reverted["written"]), set(&["a.txt"]), "{reverted}");
    assert_eq!(
        strings(&reverted["deleted"]),
        set(&["new/dir/n.txt"]),
        "{reverted}"
    );
    assert_eq!(p.read("a.txt"), p.store_blob(&h0, "a.txt"));
    assert_eq!(
        p.read("bin.dat"),
        p.store_blob(&h1, "bin.dat"),
        "not reverted"
    );
    assert!(!p.join("gone.txt").exists(), "not reverted");

    // Turns: begin, edit, end; track_file begins turn 2 implicitly.
    let begun = s.ok("turn_begin", json!({"session": "chat-42", "turn": "1"}));
    assert_eq!(
        (&begun["session"], &begun["turn"], &begun["skipped"]),
        (&json!("chat-42"), &json!("1"), &json!([]))
    );
    let begun_before = oid(&begun["before"], "turn_begin before");
    assert_eq!(
        s.ok("turn_begin", json!({"session": "chat-42", "turn": "1"})),
        begun,
        "beginning an open turn again is a no-op"
    );
    p.file(
        "src/lib.rs",
        "pub fn f() -> u32 {\n    2\n}\n\npub fn g() {}\n",
    )
    .file("t1.txt", "made in turn 1\n");
    let ended1 = s.ok("turn_end", json!({"session": "chat-42", "turn": "1"}));
    assert_eq!(oid(&ended1["before"], "turn_end before"), begun_before);
    let ended1 = ended1["files"].clone();
    let tracked = s.ok(
        "track_file",
        json!({"session": "chat-42", "turn": "2", "path": "a.txt"}),
    );
    assert_eq!(
        tracked,
        json!({"session": "chat-42", "turn": "2", "path": "a.txt"})
    );
    p.file("a.txt", "rewritten by turn 2\n").remove("t1.txt");
    let ended2 = s.ok("turn_end", json!({"session": "chat-42", "turn": "2"}))["files"].clone();
    // Someone else edits a file no turn touched.
    p.file("notes.md", "the user's own notes\n");

    let turns = s.ok("turns", json!({"session": "chat-42"}));
    let list = turns.as_array().expect("turns is an array");
    assert_eq!(list.len(), 2, "{turns}");
    for (turn, (name, ended)) in list.iter().zip([("1", &ended1), ("2", &ended2)]) {
        assert_eq!(turn["session"], "chat-42", "{turn}");
        assert_eq!(turn["turn"], name, "{turn}");
        assert_eq!(turn["rolled_back"], false, "{turn}");
        assert!(turn["ended_at"].is_string(), "{turn}");
        let before = oid(&turn["before"], "turn before");
        let after = oid(&turn["after"], "turn after");
        assert_rows_match_git(
            &sb,
            &store,
            ended,
            &before,
            &after,
            &format!("turn_end {name}"),
        );
        let n = ended.as_array().unwrap();
        assert_eq!(turn["files"], n.len(), "{turn}");
        let sum = |key: &str| n.iter().map(|r| r[key].as_u64().unwrap()).sum::<u64>();
        assert_eq!(turn["additions"], sum("additions"), "{turn}");
        assert_eq!(turn["deletions"], sum("deletions"), "{turn}");
    }
    assert_eq!(
        strings(&json!(ended1
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["file"].clone())
            .collect::<Vec<_>>())),
        set(&["src/lib.rs", "t1.txt"])
    );
    assert_eq!(
        turns,
        cli(&p, &["turns", "--session", "chat-42"]),
        "turns vs the CLI's"
    );
    assert_eq!(s.ok("turns", json!({})), turns, "turns of every session");
    assert_eq!(
        s.ok("turns", json!({"session": null})),
        turns,
        "session: null is none"
    );

    let changes = s.ok("changes", json!({"session": "chat-42"}));
    assert_eq!(
        changes,
        cli(&p, &["changes", "--session", "chat-42"]),
        "changes vs the CLI's"
    );
    assert_eq!(changes["session"], "chat-42");
    let files = changes["files"].as_array().unwrap();
    assert_eq!(changes["total_files"], files.len());
    let sum = |key: &str| files.iter().map(|r| r[key].as_u64().unwrap()).sum::<u64>();
    assert_eq!(changes["total_additions"], sum("additions"));
    assert_eq!(changes["total_deletions"], sum("deletions"));
    // Net per file across the session: from before turn 1 to after turn 2 (t1.txt came and went).
    let first_before = oid(&list[0]["before"], "before");
    let last_after = oid(&list[1]["after"], "after");
    assert_rows_match_git(
        &sb,
        &store,
        &changes["files"],
        &first_before,
        &last_after,
        "changes",
    );

    // undo turn 2: its files go back to turn 2's "before"; the user's file stays.
    let turn2_before = oid(&list[1]["before"], "before");
    let undone = s.ok("undo", json!({"session": "chat-42", "turn": "2"}));
    assert_eq!(
        strings(&undone["written"]),
        set(&["a.txt", "t1.txt"]),
        "{undone}"
    );
    assert_eq!(undone["deleted"], json!([]), "{undone}");
    assert_eq!(undone["conflicts"], json!([]), "{undone}");
    assert_eq!(undone["failed"], json!([]), "{undone}");
    oid(&undone["undo"], "undo's undo point");
    assert_eq!(p.read("a.txt"), p.store_blob(&turn2_before, "a.txt"));
    assert_eq!(p.read("t1.txt"), p.store_blob(&turn2_before, "t1.txt"));
    assert_eq!(
        p.read("notes.md"),
        b"the user's own notes\n",
        "not the agent's: stays"
    );
    let turns = s.ok("turns", json!({"session": "chat-42"}));
    assert_eq!(turns[0]["rolled_back"], false, "{turns}");
    assert_eq!(turns[1]["rolled_back"], true, "{turns}");

    // undo one file of turn 1.
    let one = s.ok(
        "undo",
        json!({"session": "chat-42", "turn": "1", "file": "src/lib.rs", "force": false}),
    );
    assert_eq!(strings(&one["written"]), set(&["src/lib.rs"]), "{one}");
    assert_eq!(
        p.read("src/lib.rs"),
        p.store_blob(&first_before, "src/lib.rs")
    );
    assert!(p.join("t1.txt").exists(), "only the one file is undone");

    // prune: nothing has expired; the shape is the CLI's.
    let pruned = s.ok("prune", Value::Null);
    for key in [
        "snapshots_removed",
        "turns_removed",
        "objects_removed",
        "bytes_freed",
    ] {
        assert!(pruned[key].is_u64(), "{key} in {pruned}");
    }
    assert_eq!(pruned["turns_removed"], 0, "{pruned}");
    assert_eq!(pruned["sessions_removed"], json!([]), "{pruned}");
    assert_eq!(
        s.ok("turns", json!({"session": "chat-42"})),
        turns,
        "prune kept the turns"
    );

    s.close();
    p.assert_fsck_clean();
}

/// `diff_full` takes `paths` and `max_bytes` (optional params: protocol 2 still): the rows of
/// `git diff --numstat -- PATHS`, and the CLI's answer to `diff-full --max-bytes N -- PATHS`.
#[test]
fn diff_full_takes_paths_and_max_bytes() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n")
        .file("src/x.rs", "x\n")
        .file("src/y.rs", "y\n")
        .file("src2/z.rs", "z\n");
    let mut s = Server::start(&p);
    let h0 = oid(&s.ok("track", Value::Null)["hash"], "track");
    p.file("a.txt", "a\nA\n")
        .file("src/x.rs", "x\nX\n")
        .file("src/y.rs", "Y\n")
        .file("src2/z.rs", "z\nZ\n");
    let h1 = oid(&s.ok("track", Value::Null)["hash"], "track");
    let store = p.store();

    let rows = s.ok("diff_full", json!({"from": h0, "to": h1, "paths": ["src"]}));
    let git = |args: &[&str]| {
        let mut all = vec!["--literal-pathspecs", "diff", "--no-renames", &h0, &h1];
        all.extend(args);
        git_lines(&sb, &store, &all)
    };
    let files: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["file"].as_str().unwrap())
        .collect();
    assert_eq!(
        files,
        git(&["--name-only", "--", "src"]),
        "paths: git diff --name-only -- src"
    );
    assert_eq!(files, ["src/x.rs", "src/y.rs"], "not src2: {rows}");
    for (row, n) in rows
        .as_array()
        .unwrap()
        .iter()
        .zip(git(&["--numstat", "--", "src"]))
    {
        let counts = format!(
            "{}\t{}\t{}",
            row["additions"],
            row["deletions"],
            row["file"].as_str().unwrap()
        );
        assert_eq!(counts, n, "numstat -- src");
    }
    assert_eq!(
        rows,
        cli(&p, &["diff-full", &h0, &h1, "--", "src"]),
        "the CLI's answer"
    );
    // Against the project now (takes the lock): the same rows.
    assert_eq!(
        rows,
        s.ok("diff_full", json!({"from": h0, "paths": ["src"]}))
    );

    // max_bytes: a.txt's text is 6 bytes ("a\n" + "a\nA\n"): it fits, the next rows do not.
    let rows = s.ok("diff_full", json!({"from": h0, "to": h1, "max_bytes": 6}));
    let truncated: Vec<bool> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["truncated"] == true)
        .collect();
    assert_eq!(truncated, [false, true, true, true], "{rows}");
    assert_eq!(rows[0]["after"], "a\nA\n", "{rows}");
    assert_eq!(rows, cli(&p, &["diff-full", &h0, &h1, "--max-bytes", "6"]));
    let rows = s.ok(
        "diff_full",
        json!({"from": h0, "to": h1, "max_bytes": 5, "paths": ["src2", "a.txt"]}),
    );
    assert_eq!(
        rows,
        cli(
            &p,
            &[
                "diff-full",
                &h0,
                &h1,
                "--max-bytes",
                "5",
                "--",
                "src2",
                "a.txt"
            ]
        )
    );
    assert_eq!(rows.as_array().map(Vec::len), Some(2), "{rows}");

    // Bad params and paths.
    for bad in [
        json!({"paths": "src"}),
        json!({"max_bytes": -1}),
        json!({"max_bytes": "1M"}),
    ] {
        let mut params = json!({"from": h0, "to": h1});
        params
            .as_object_mut()
            .unwrap()
            .extend(bad.as_object().unwrap().clone());
        let error = s.err("diff_full", Some(params.clone()));
        assert_eq!(error["code"], -32602, "{params} -> {error}");
    }
    let error = s.err(
        "diff_full",
        Some(json!({"from": h0, "to": h1, "paths": ["../x"]})),
    );
    assert_eq!(
        (&error["code"], &error["data"]["code"]),
        (&json!(-32000), &json!("bad_path")),
        "{error}"
    );
    assert_eq!(s.ok("hello", Value::Null)["protocol"], 2);
    s.close();
    p.assert_fsck_clean();
}

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/// Collects mismatches so that one run reports every deviation, not only the first.
#[derive(Default)]
struct Problems(Vec<String>);

impl Problems {
    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.0.push(what());
        }
    }

    fn assert_none(self, what: &str) {
        assert!(
            self.0.is_empty(),
            "{what}: {} problem(s):\n  {}",
            self.0.len(),
            self.0.join("\n  ")
        );
    }
}

#[test]
fn parse_errors_and_invalid_requests() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n");
    let mut s = Server::start(&p);
    let mut problems = Problems::default();

    // -32700, id null: not JSON at all.
    let parse_errors: &[&[u8]] = &[
        b"garbage",
        b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"track\"",
        b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"track\"}}",
        b"{'jsonrpc': '2.0', 'id': 1, 'method': 'track'}",
        b"[{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"track\"}, {\"jsonrpc\"]",
        b"\0\0\0",
    ];
    for line in parse_errors {
        let response = s.answer_to(line);
        problems.check(
            response["error"]["code"] == -32700 && response["id"].is_null(),
            || {
                format!(
                    "{:?} -> {response} (want -32700, id null)",
                    String::from_utf8_lossy(line)
                )
            },
        );
    }

    // -32600: JSON, but not a request. The id is echoed when it could be read.
    let cases: Vec<(Value, Value)> = vec![
        (json!({"id": 1, "method": "turns"}), json!(1)),
        (
            json!({"jsonrpc": "1.0", "id": 2, "method": "turns"}),
            json!(2),
        ),
        (
            json!({"jsonrpc": 2.0, "id": 3, "method": "turns"}),
            json!(3),
        ),
        (json!({"jsonrpc": "2.0", "id": 4}), json!(4)),
        (json!({"jsonrpc": "2.0", "id": 5, "method": 5}), json!(5)),
        (
            json!({"jsonrpc": "2.0", "id": "six", "method": null}),
            json!("six"),
        ),
        (json!(42), Value::Null),
        (json!("turns"), Value::Null),
        (json!(null), Value::Null),
        (json!(true), Value::Null),
        (json!([]), Value::Null),
        // An invalid request object is not a notification, even without an id (the spec's
        // own example: `{"jsonrpc": "2.0", "method": 1, "params": "bar"}` -> -32600, id null).
        (json!({}), Value::Null),
        (
            json!({"jsonrpc": "2.0", "method": 1, "params": "bar"}),
            Value::Null,
        ),
        (json!({"foo": "boo"}), Value::Null),
    ];
    for (request, id) in &cases {
        s.send(request);
        // Read the answer if there is one: a missing answer must not hang the test.
        let sentinel = format!("after-{}", s.next_id());
        s.send(&json!({"jsonrpc": "2.0", "id": sentinel, "method": "turns"}));
        let first = s.recv();
        if first["id"] == json!(sentinel) {
            problems.check(false, || {
                format!("{request} got no response (want -32600, id {id})")
            });
            continue;
        }
        let second = s.recv();
        assert_eq!(second["id"], json!(sentinel), "one response per line");
        problems.check(
            first["error"]["code"] == -32600 && &first["id"] == id,
            || format!("{request} -> {first} (want -32600, id {id})"),
        );
    }

    // An id that is neither a string, a number nor null is invalid; the request is not run.
    for id in [json!({"a": 1}), json!([1]), json!(true)] {
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "turn_begin",
                             "params": {"session": "bad-id", "turn": "1"}});
        let response = s.answer_to(request.to_string().as_bytes());
        problems.check(
            response["error"]["code"] == -32600
                && (response["id"].is_null() || response["id"] == id),
            || format!("{request} -> {response} (want -32600)"),
        );
    }
    let turns = s.ok("turns", Value::Null);
    problems.check(turns == json!([]), || {
        format!("an invalid request was run: turns = {turns}")
    });

    // String and negative ids are echoed as given.
    for id in [json!("abc"), json!(-7), json!(0), json!("")] {
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "turns"});
        let response = s.answer_to(request.to_string().as_bytes());
        problems.check(
            response["id"] == id && response["result"].is_array(),
            || format!("{request} -> {response}"),
        );
    }
    // Numbers are echoed digit for digit, past 2^64 and with a fraction (found by the
    // sixteenth hostile pass: 2^64 came back as 1.8446744073709552e+19).
    for id in ["18446744073709551616", "-99999999999999999999999", "1.50"] {
        let request = format!(r#"{{"jsonrpc": "2.0", "id": {id}, "method": "turns"}}"#);
        let response = s.answer_to(request.as_bytes());
        // (As JSON text: the id is a number, not the string `id`.)
        let echoed = serde_json::to_string(&response["id"]).unwrap();
        problems.check(echoed == id, || format!("{request} -> {response}"));
    }

    problems.assert_none("parse errors and invalid requests");
    s.close();
}

#[test]
fn unknown_methods_and_bad_params() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n");
    let mut s = Server::start(&p);
    let h = oid(&s.ok("track", Value::Null)["hash"], "track");
    let mut problems = Problems::default();

    for method in [
        "nope",
        "Track",
        "turn-begin",
        "diff-full",
        "serve",
        "",
        "rpc.discover",
    ] {
        let error = s.err(method, None);
        problems.check(error["code"] == -32601, || {
            format!("method {method:?} -> {error}")
        });
    }

    p.file("a.txt", "changed\n");
    let cases: Vec<(&str, Value)> = vec![
        // missing fields
        ("patch", json!({})),
        ("diff", json!({})),
        ("diff_full", json!({"to": h})),
        ("has_changes", json!({})),
        ("restore", json!({})),
        ("revert", json!({"hash": h})),
        ("revert", json!({"paths": ["a.txt"]})),
        ("turn_begin", json!({"session": "s"})),
        ("turn_end", json!({"turn": "1"})),
        ("track_file", json!({"session": "s", "turn": "1"})),
        ("undo", json!({})),
        ("undo", json!({"turn": "1"})),
        ("changes", json!({})),
        // extra fields
        ("track", json!({"max_file_size": 10})),
        ("patch", json!({"hash": h, "extra": 1})),
        ("restore", json!({"hash": h, "preview": true})),
        ("turns", json!({"session": "s", "limit": 3})),
        ("prune", json!({"retention": "1s"})),
        // mistyped fields
        ("patch", json!({"hash": 5})),
        ("diff", json!({"from": h, "to": 7})),
        ("restore", json!({"hash": h, "force": "yes"})),
        ("revert", json!({"hash": h, "paths": "a.txt"})),
        ("revert", json!({"hash": h, "paths": [1]})),
        ("turn_begin", json!({"session": 1, "turn": 2})),
        ("undo", json!({"session": "s", "force": 1})),
        ("turns", json!({"session": ["s"]})),
        // params that are not an object: positional params are not supported
        ("patch", json!([h])),
        ("restore", json!([h])),
        ("turn_begin", json!(["positional", "1"])),
        ("track", json!([])),
        ("patch", json!("abcd")),
        ("track", json!(1)),
    ];
    for (method, params) in &cases {
        let response = s.request(method, Some(params.clone()));
        problems.check(response["error"]["code"] == -32602, || {
            format!("{method} {params} -> {response} (want -32602)")
        });
    }
    // params: null is not a structured value either (-32602 or -32600 are both fair).
    let response = s.request("track", Some(Value::Null));
    problems.check(
        [json!(-32602), json!(-32600)].contains(&response["error"]["code"]),
        || format!("track with params null -> {response}"),
    );

    // A rejected request did nothing: a.txt is still changed, no turn was begun.
    problems.check(p.read("a.txt") == b"changed\n", || {
        "a request with bad params restored a.txt".to_string()
    });
    let turns = s.ok("turns", Value::Null);
    problems.check(turns == json!([]), || {
        format!("a request with bad params began a turn: {turns}")
    });

    problems.assert_none("unknown methods and bad params");
    s.close();
    p.assert_fsck_clean();
}

#[test]
fn operation_failures_carry_the_cli_error_code() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n").file("dir/b.txt", "b\n");
    let mut s = Server::start(&p);
    let h = oid(&s.ok("track", Value::Null)["hash"], "track");
    s.ok("turn_begin", json!({"session": "s", "turn": "done"}));
    s.ok("turn_end", json!({"session": "s", "turn": "done"}));
    let store = p.store();
    let blob = sb
        .git_in(&store, ["rev-parse", &format!("{h}:a.txt")])
        .trim()
        .to_string();
    let commit = sb
        .git_in(&store, ["rev-parse", "refs/rewind/sessions/s/head"])
        .trim()
        .to_string();
    let ids = sb.git_in(
        &store,
        [
            "cat-file",
            "--batch-all-objects",
            "--batch-check=%(objectname)",
        ],
    );
    let unknown = (0u32..)
        .map(|i| format!("{i:08x}0123456789abcdef0123456789abcdef"))
        .find(|c| !ids.contains(c.as_str()))
        .unwrap();
    let unknown_short = (0u32..)
        .map(|i| format!("{i:06x}"))
        .find(|c| !ids.lines().any(|id| id.starts_with(c.as_str())))
        .unwrap();
    let long = "x".repeat(201);

    // (method, params, the same operation on the command line, code)
    let cases: Vec<(&str, Value, Vec<&str>, &str)> = vec![
        (
            "patch",
            json!({"hash": "xyz"}),
            vec!["patch", "xyz"],
            "invalid_id",
        ),
        (
            "patch",
            json!({"hash": "HEAD"}),
            vec!["patch", "HEAD"],
            "invalid_id",
        ),
        (
            "patch",
            json!({"hash": unknown}),
            vec!["patch", &unknown],
            "not_found",
        ),
        (
            "diff",
            json!({"from": h, "to": unknown_short}),
            vec!["diff", &h, &unknown_short],
            "not_found",
        ),
        (
            "diff",
            json!({"from": blob}),
            vec!["diff", &blob],
            "wrong_type",
        ),
        (
            "diff_full",
            json!({"from": h, "to": "g".repeat(40)}),
            vec!["diff-full", &h, "gggggggggggggggggggggggggggggggggggggggg"],
            "invalid_id",
        ),
        (
            "has_changes",
            json!({"hash": commit}),
            vec!["has-changes", &commit],
            "wrong_type",
        ),
        (
            "restore",
            json!({"hash": unknown_short}),
            vec!["restore", &unknown_short],
            "not_found",
        ),
        (
            "revert",
            json!({"hash": blob, "paths": ["a.txt"]}),
            vec!["revert", &blob, "--", "a.txt"],
            "wrong_type",
        ),
        (
            "revert",
            json!({"hash": h, "paths": ["/etc/passwd"]}),
            vec!["revert", &h, "--", "/etc/passwd"],
            "bad_path",
        ),
        (
            "revert",
            json!({"hash": h, "paths": ["../outside"]}),
            vec!["revert", &h, "--", "../outside"],
            "bad_path",
        ),
        (
            "track_file",
            json!({"session": "s", "turn": "t", "path": "/etc/passwd"}),
            vec![
                "turn",
                "track-file",
                "--session",
                "s",
                "--turn",
                "t",
                "/etc/passwd",
            ],
            "bad_path",
        ),
        (
            "turn_end",
            json!({"session": "s", "turn": "never"}),
            vec!["turn", "end", "--session", "s", "--turn", "never"],
            "not_found",
        ),
        (
            "turn_end",
            json!({"session": "s", "turn": "done"}),
            vec!["turn", "end", "--session", "s", "--turn", "done"],
            "turn_state",
        ),
        (
            "turn_begin",
            json!({"session": "s", "turn": "done"}),
            vec!["turn", "begin", "--session", "s", "--turn", "done"],
            "turn_state",
        ),
        (
            "undo",
            json!({"session": "s", "turn": "nope"}),
            vec!["undo", "--session", "s", "--turn", "nope"],
            "not_found",
        ),
        (
            "turn_begin",
            json!({"session": "", "turn": "1"}),
            vec!["turn", "begin", "--session", "", "--turn", "1"],
            "invalid_name",
        ),
        (
            "turn_begin",
            json!({"session": long, "turn": "1"}),
            vec!["turn", "begin", "--session", &long, "--turn", "1"],
            "invalid_name",
        ),
        (
            "turn_end",
            json!({"session": "s", "turn": ""}),
            vec!["turn", "end", "--session", "s", "--turn", ""],
            "invalid_name",
        ),
        (
            "turns",
            json!({"session": ""}),
            vec!["turns", "--session", ""],
            "invalid_name",
        ),
        (
            "undo",
            json!({"session": "nobody"}),
            vec!["undo", "--session", "nobody"],
            "not_found",
        ),
        (
            "undo",
            json!({"session": "s", "file": "/etc/passwd"}),
            vec!["undo", "--session", "s", "--file", "/etc/passwd"],
            "bad_path",
        ),
        (
            "changes",
            json!({"session": "nobody"}),
            vec!["changes", "--session", "nobody"],
            "not_found",
        ),
    ];
    let mut problems = Problems::default();
    for (method, params, args, code) in &cases {
        let response = s.request(method, Some(params.clone()));
        let error = &response["error"];
        let want = cli_error(&p, args);
        problems.check(
            error["code"] == -32000
                && error["data"]["code"] == *code
                && error["data"]["code"] == want["code"]
                && error["message"] == want["message"],
            || format!("{method} {params} -> {response}\n    (want -32000 with data.code {code}; the CLI says {want})"),
        );
    }
    problems.assert_none("operation failures");

    // After all these failures the server still works, and the store is intact.
    assert_eq!(s.ok("patch", json!({"hash": h}))["files"], json!([]));
    s.close();
    p.assert_fsck_clean();
}

#[test]
fn notifications_get_no_response_but_are_run() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n");
    let mut s = Server::start(&p);

    let notifications = [
        json!({"jsonrpc": "2.0", "method": "nope"}),
        json!({"jsonrpc": "2.0", "method": "nope", "params": {"x": 1}}),
        json!({"jsonrpc": "2.0", "method": "patch", "params": {"hash": "zz"}}),
        json!({"jsonrpc": "2.0", "method": "patch", "params": {}}),
        json!({"jsonrpc": "2.0", "method": "turn_end", "params": {"session": "s", "turn": "x"}}),
        json!({"jsonrpc": "2.0", "method": "track"}),
    ];
    for n in &notifications {
        s.send(n);
        s.assert_silent(&format!("the notification {n}"));
    }

    // A notification is still run: it begins the turn. (A `turns` sent meanwhile may be
    // answered before it runs: reads do not wait for writes.)
    s.send(
        &json!({"jsonrpc": "2.0", "method": "turn_begin", "params": {"session": "n", "turn": "1"}}),
    );
    s.assert_silent("a turn_begin notification");
    let since = Instant::now();
    let turns = loop {
        let turns = s.request("turns", Some(json!({"session": "n"})));
        match turns.get("result") {
            Some(turns) => break turns.clone(),
            None if since.elapsed() < DEADLINE => thread::sleep(Duration::from_millis(20)),
            None => panic!("the turn_begin notification never ran: {turns}"),
        }
    };
    assert_eq!(turns.as_array().map(Vec::len), Some(1), "{turns}");
    assert!(turns[0]["ended_at"].is_null(), "{turns}");

    // Several in a row, then a request: the request's is the only answer.
    for _ in 0..20 {
        s.send(&json!({"jsonrpc": "2.0", "method": "nope"}));
    }
    s.assert_silent("20 notifications");
    s.close();
}

#[test]
fn batches_are_answered_with_an_array() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n");
    let mut s = Server::start(&p);
    let h = oid(&s.ok("track", Value::Null)["hash"], "track");

    // Requests, a notification (run, unanswered), an unknown method, a non-request, a failure.
    let batch = json!([
        {"jsonrpc": "2.0", "id": 10, "method": "has_changes", "params": {"hash": h}},
        {"jsonrpc": "2.0", "method": "turn_begin", "params": {"session": "b", "turn": "1"}},
        {"jsonrpc": "2.0", "id": 11, "method": "nope"},
        1,
        {"jsonrpc": "2.0", "id": "twelve", "method": "patch", "params": {"hash": "zz"}},
        {"jsonrpc": "2.0", "id": 13, "method": "patch", "params": {"hash": h, "x": 1}}
    ]);
    let response = s.answer_to(batch.to_string().as_bytes());
    let answers = response
        .as_array()
        .unwrap_or_else(|| panic!("a batch gets an array: {response}"));
    assert_eq!(
        answers.len(),
        5,
        "one answer per request, none for the notification: {response}"
    );
    let by_id = |id: Value| -> Value {
        let found: Vec<&Value> = answers.iter().filter(|a| a["id"] == id).collect();
        assert_eq!(found.len(), 1, "one answer with id {id}: {response}");
        found[0].clone()
    };
    assert_eq!(
        by_id(json!(10))["result"],
        json!({"hash": h, "changed": false})
    );
    assert_eq!(by_id(json!(11))["error"]["code"], -32601);
    assert_eq!(by_id(Value::Null)["error"]["code"], -32600);
    let twelve = by_id(json!("twelve"));
    assert_eq!(twelve["error"]["code"], -32000);
    assert_eq!(twelve["error"]["data"]["code"], "invalid_id");
    assert_eq!(by_id(json!(13))["error"]["code"], -32602);
    let turns = s.ok("turns", json!({"session": "b"}));
    assert_eq!(
        turns.as_array().map(Vec::len),
        Some(1),
        "the batch's notification ran: {turns}"
    );

    // A batch of notifications only: no response at all.
    let quiet = json!([
        {"jsonrpc": "2.0", "method": "track"},
        {"jsonrpc": "2.0", "method": "nope"}
    ]);
    s.send(&quiet);
    s.assert_silent("a batch of notifications");

    // The spec's examples: [1,2,3] -> three invalid requests; [] -> one, not in an array.
    let response = s.answer_to(b"[1,2,3]");
    let answers = response.as_array().unwrap_or_else(|| panic!("{response}"));
    assert_eq!(answers.len(), 3, "{response}");
    for a in answers {
        assert_eq!(a["error"]["code"], -32600, "{response}");
        assert!(a["id"].is_null(), "{response}");
    }
    let response = s.answer_to(b"[]");
    assert_eq!(
        response["error"]["code"], -32600,
        "[] -> one invalid request: {response}"
    );
    assert!(response["id"].is_null(), "{response}");

    // Batches run in order: begin then end of the same turn in one batch.
    let ordered = json!([
        {"jsonrpc": "2.0", "id": "begin", "method": "turn_begin", "params": {"session": "o", "turn": "1"}},
        {"jsonrpc": "2.0", "id": "end", "method": "turn_end", "params": {"session": "o", "turn": "1"}},
        {"jsonrpc": "2.0", "id": "list", "method": "turns", "params": {"session": "o"}}
    ]);
    let response = s.answer_to(ordered.to_string().as_bytes());
    let answers = response.as_array().unwrap_or_else(|| panic!("{response}"));
    assert_eq!(answers.len(), 3, "{response}");
    for a in answers {
        assert!(
            a.get("result").is_some(),
            "every step succeeds in order: {response}"
        );
    }
    s.close();
    p.assert_fsck_clean();
}

// ---------------------------------------------------------------------------
// Robustness
// ---------------------------------------------------------------------------

#[test]
fn server_survives_garbage_empty_objects_and_huge_lines() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n");
    let mut s = Server::start(&p);
    let h = oid(&s.ok("track", Value::Null)["hash"], "track");

    let parse_error = |s: &mut Server, line: &[u8], what: &str| {
        let response = s.answer_to(line);
        assert_eq!(response["error"]["code"], -32700, "{what}: {response}");
        assert!(response["id"].is_null(), "{what}: {response}");
        assert_eq!(
            s.ok("has_changes", json!({"hash": h}))["changed"],
            false,
            "after {what}"
        );
    };
    parse_error(&mut s, b"garbage", "garbage");
    parse_error(&mut s, b"}{", "}{");
    parse_error(&mut s, &vec![b'x'; 1 << 20], "a 1 MB garbage line");
    parse_error(&mut s, &[b'['; 100_000], "100,000 nested arrays");
    parse_error(&mut s, &[b'{'; 100_000], "100,000 opening braces");

    // An empty object: whatever it gets (it should be -32600), the server goes on.
    s.send_line(b"{}");
    let sentinel = json!({"jsonrpc": "2.0", "id": "after-empty", "method": "turns"});
    s.send(&sentinel);
    let first = s.recv();
    if first["id"] != "after-empty" {
        assert_eq!(first["error"]["code"], -32600, "{{}} -> {first}");
        assert_eq!(s.recv()["id"], "after-empty");
    }

    // Blank lines and CRLF endings.
    s.send_raw(b"\n   \n\t\n");
    s.assert_silent("blank lines");
    s.send_raw(
        format!(
            "{}\r\n",
            json!({"jsonrpc": "2.0", "id": "crlf", "method": "turns"})
        )
        .as_bytes(),
    );
    let response = s.recv();
    assert_eq!(
        response["id"], "crlf",
        "a CRLF-terminated request is answered: {response}"
    );

    // A 1 MB valid request: an id far too long, a session id far too long.
    let huge = "a".repeat(1 << 20);
    let error = s.err("patch", Some(json!({"hash": huge})));
    assert_eq!(
        error["data"]["code"],
        "invalid_id",
        "{}",
        &error.to_string()[..200]
    );
    let error = s.err("turn_begin", Some(json!({"session": huge, "turn": "1"})));
    assert_eq!(
        error["data"]["code"],
        "invalid_name",
        "{}",
        &error.to_string()[..200]
    );
    // A 1 MB string id is echoed.
    let request = json!({"jsonrpc": "2.0", "id": huge, "method": "turns"});
    let response = s.answer_to(request.to_string().as_bytes());
    assert!(response["id"] == json!(huge), "a 1 MB id is echoed");

    // Many requests written before any answer is read: all answered, in order.
    let mut burst = Vec::new();
    for i in 0..300 {
        let method = if i % 3 == 0 { "nope" } else { "turns" };
        burst.extend_from_slice(
            json!({"jsonrpc": "2.0", "id": i, "method": method})
                .to_string()
                .as_bytes(),
        );
        burst.push(b'\n');
    }
    s.send_raw(&burst);
    for i in 0..300 {
        assert_eq!(s.recv()["id"], i, "pipelined answers come in order");
    }

    assert_eq!(s.ok("patch", json!({"hash": h}))["files"], json!([]));
    s.close();
    p.assert_fsck_clean();
}

#[test]
fn server_survives_invalid_utf8() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n");
    let mut s = Server::start(&p);
    s.ok("track", Value::Null);

    let lines: &[&[u8]] = &[
        b"\xff\xfe\xfd",
        b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"tr\xffack\"}",
        b"{\"jsonrpc\": \"2.0\", \"id\": 2, \"method\": \"turns\", \"params\": {\"session\": \"\xc3\x28\"}}",
        b"\xc0\x80",
    ];
    for line in lines {
        let what = format!("the line {:?}", String::from_utf8_lossy(line));
        s.send_line(line);
        // The line is not text: a parse error, id null (the server cannot read the id).
        let response = s.recv();
        assert_eq!(response["error"]["code"], -32700, "{what} -> {response}");
        assert!(response["id"].is_null(), "{what} -> {response}");
        s.assert_silent(&format!("the answer to {what}"));
    }
    s.close();
}

/// r60 F3 and F4: a request line was held whole however long (a 12 MB one took 470 MB to
/// parse); a lone surrogate escape (`\ud800`, JSON that serde_json refuses) was a parse error
/// with id null, so a client waiting on its id waited for ever. A line over 4 MiB is answered
/// `-32600` and skipped; a lone surrogate is an invalid request answered with its id (r61:
/// each request of a batch too; a batch of over 1,000 is refused whole).
#[test]
fn a_line_over_the_cap_is_skipped_and_a_lone_surrogate_keeps_its_id() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n");
    let mut s = Server::start(&p);
    let mut huge = vec![b'a'; 5 << 20];
    huge.push(b'\n');
    s.send_raw(&huge);
    let response = s.recv();
    assert_eq!(response["error"]["code"], -32600, "{response}");
    assert!(response["id"].is_null(), "{response}");
    assert_eq!(s.ok("turns", Value::Null), json!([]));

    let response = s.answer_to(
        br#"{"jsonrpc": "2.0", "id": 7, "method": "revert", "params": {"hash": "abcd", "paths": ["\ud800x"]}}"#,
    );
    assert_eq!(response["id"], 7, "{response}");
    assert_eq!(response["error"]["code"], -32600, "{response}");
    let response = s.answer_to(br#"{"jsonrpc": "2.0", "id": "\udc00", "method": "turns"}"#);
    assert!(response["id"].is_null(), "{response}");
    assert_eq!(response["error"]["code"], -32600, "{response}");
    let response = s.answer_to(
        br#"[{"jsonrpc": "2.0", "id": 8, "method": "turns"}, {"jsonrpc": "2.0", "id": 9, "method": "x\ud800"}]"#,
    );
    let ids: Vec<&Value> = response
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["id"])
        .collect();
    assert_eq!(ids, [&json!(8), &json!(9)], "{response}");
    let batch: Vec<Value> = (0..1001)
        .map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "hello"}))
        .collect();
    let response = s.answer_to(Value::Array(batch).to_string().as_bytes());
    assert_eq!(response["error"]["code"], -32600, "{response}");
    assert_eq!(s.ok("turns", Value::Null), json!([]));
    s.close();
}

#[test]
fn stdin_closing_ends_the_server_with_exit_0() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n");

    // Nothing sent at all.
    let s = Server::start(&p);
    assert!(!s.close().contains("rewind:"), "no error on a plain close");

    // Requests still in the pipe when stdin closes are answered first (the writes in order;
    // the read may overtake them); a last line without its newline is a line.
    let mut s = Server::start(&p);
    let mut input = Vec::new();
    for i in 1..=3 {
        input.extend_from_slice(
            json!({"jsonrpc": "2.0", "id": i, "method": "track"})
                .to_string()
                .as_bytes(),
        );
        input.push(b'\n');
    }
    input.extend_from_slice(
        json!({"jsonrpc": "2.0", "id": 4, "method": "turns"})
            .to_string()
            .as_bytes(),
    );
    s.send_raw(&input);
    drop(s.stdin.take());
    let mut ids = Vec::new();
    for _ in 1..=4 {
        let response = s.recv();
        assert!(response.get("result").is_some(), "{response}");
        ids.push(response["id"].as_u64().unwrap());
    }
    let writes: Vec<u64> = ids.iter().copied().filter(|&id| id != 4).collect();
    assert_eq!((writes, ids.len()), (vec![1, 2, 3], 4), "{ids:?}");
    s.close();

    // A project that cannot be opened: the server does not start (exit 1, one line on stderr).
    let missing = sb.root.join("no-such-project");
    let mut cmd = sb.rewind_command([
        std::ffi::OsStr::new("-C"),
        missing.as_os_str(),
        std::ffi::OsStr::new("serve"),
    ]);
    let run = run_with_deadline(&mut cmd, DEFAULT_DEADLINE);
    assert_no_panic(&run);
    run.assert_code(1);
    assert!(run.stdout.is_empty(), "{run}");
    assert_eq!(run.stderr.lines().count(), 1, "{run}");
    p.assert_fsck_clean();
}

// ---------------------------------------------------------------------------
// Concurrency
// ---------------------------------------------------------------------------

/// The lock is held only during a call: while a server sits idle, other processes work, and
/// the server sees what they did (nothing is cached between calls).
#[test]
fn an_idle_server_does_not_block_the_cli() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n");
    let mut s = Server::start(&p);
    let h = oid(&s.ok("track", Value::Null)["hash"], "track");
    s.ok("turn_begin", json!({"session": "srv", "turn": "1"}));

    let quick = Duration::from_secs(20);
    for args in [
        vec!["turn", "begin", "--session", "cli", "--turn", "1"],
        vec!["track"],
        vec!["prune"],
        vec!["turn", "end", "--session", "cli", "--turn", "1"],
        vec!["turn", "end", "--session", "srv", "--turn", "1"],
    ] {
        let mut cmd = p.rewind_command(&args);
        let run = run_with_deadline(&mut cmd, quick);
        run.assert_success();
    }
    let turns = s.ok("turns", Value::Null);
    let seen: BTreeSet<(String, bool)> = turns
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["session"].as_str().unwrap().to_string(),
                t["ended_at"].is_string(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [("cli".to_string(), true), ("srv".to_string(), true)]
            .into_iter()
            .collect(),
        "the server sees turns begun and ended by other processes: {turns}"
    );
    let error = s.err("turn_end", Some(json!({"session": "srv", "turn": "1"})));
    assert_eq!(
        error["data"]["code"], "turn_state",
        "ended by the CLI already: {error}"
    );
    p.file("a.txt", "changed by the user\n");
    assert_eq!(s.ok("patch", json!({"hash": h}))["files"], json!(["a.txt"]));
    s.close();
    p.assert_fsck_clean();
}

#[test]
fn two_servers_and_the_cli_at_once() {
    const ROUNDS: usize = 20;
    let sb = Sandbox::new();
    let p = sb.project("proj");
    for i in 0..40 {
        p.file(format!("shared/{i}.txt"), format!("shared file {i}\n"));
    }
    p.track();
    let store = p.store();
    let started = Instant::now();

    let mut servers = [Server::start(&p), Server::start(&p)];
    let (hashes, cli_runs) = thread::scope(|scope| {
        let p = &p;
        let mut workers = Vec::new();
        for (k, server) in servers.iter_mut().enumerate() {
            workers.push(scope.spawn(move || {
                let session = format!("server-{k}");
                let mut hashes = Vec::new();
                for round in 0..ROUNDS {
                    let turn = round.to_string();
                    let begun = server.ok("turn_begin", json!({"session": session, "turn": turn}));
                    assert_eq!(
                        (&begun["session"], &begun["turn"]),
                        (&json!(session), &json!(turn))
                    );
                    p.file(format!("{session}/{round}.txt"), format!("round {round}\n"));
                    p.file(format!("{session}/log.txt"), "x\n".repeat(round + 1));
                    let track = server.ok("track", Value::Null);
                    hashes.push(oid(&track["hash"], "track under load"));
                    assert!(track["files"].as_u64().unwrap() >= 40, "{track}");
                    let ended = server.ok("turn_end", json!({"session": session, "turn": turn}));
                    let files: BTreeSet<String> = ended["files"]
                        .as_array()
                        .unwrap_or_else(|| panic!("turn_end: {ended}"))
                        .iter()
                        .map(|f| f["file"].as_str().unwrap().to_string())
                        .collect();
                    // Its own edits are in its turn (the other server's may be too: a turn is
                    // everything that changed in the project meanwhile).
                    assert!(files.contains(&format!("{session}/{round}.txt")), "{ended}");
                    let turns = server.ok("turns", Value::Null);
                    for t in turns.as_array().unwrap_or_else(|| panic!("turns: {turns}")) {
                        assert!(t["session"].is_string() && t["turn"].is_string(), "{t}");
                        oid(&t["before"], "a turn's before");
                    }
                    let mine = server.ok("turns", json!({"session": session}));
                    let mine = mine.as_array().unwrap();
                    assert!(!mine.is_empty() && mine.len() <= ROUNDS, "{mine:?}");
                    assert_eq!(mine.last().unwrap()["turn"], turn.as_str(), "{mine:?}");
                }
                hashes
            }));
        }
        let pruner = scope.spawn(move || {
            (0..ROUNDS / 2)
                .map(|_| {
                    let run = p.rewind(["--json", "prune", "--max-turns", "3"]);
                    run.assert_success();
                    serde_json::from_str::<Value>(run.stdout.trim()).expect("prune --json");
                    thread::sleep(Duration::from_millis(50));
                })
                .count()
        });
        let tracker = scope.spawn(move || {
            (0..ROUNDS)
                .map(|_| {
                    let t = p.track_json();
                    assert_oid(&t.hash, "CLI track under load");
                })
                .count()
        });
        let hashes: Vec<Vec<String>> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        let cli_runs = pruner.join().unwrap() + tracker.join().unwrap();
        (hashes, cli_runs)
    });
    assert_eq!(cli_runs, ROUNDS / 2 + ROUNDS);
    let [a, b] = servers;
    a.close();
    b.close();
    assert!(
        started.elapsed() < Duration::from_secs(300),
        "took {:?}",
        started.elapsed()
    );

    for hash in hashes.iter().flatten() {
        assert_tree_complete(&sb, &store, hash);
    }
    p.assert_fsck_clean();
    // A last prune leaves each session's 3 newest turns.
    p.rewind(["prune", "--max-turns", "3"]).assert_success();
    for k in 0..2 {
        let turns = cli(&p, &["turns", "--session", &format!("server-{k}")]);
        let names: Vec<&str> = turns
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["turn"].as_str().unwrap())
            .collect();
        let want: Vec<String> = (ROUNDS - 3..ROUNDS).map(|r| r.to_string()).collect();
        assert_eq!(names, want, "server-{k}: {turns}");
    }
    p.track_matches_git();
    p.assert_fsck_clean();
}

/// A server keeps its store open for hours while cron runs `rewind prune`. When a prune
/// repacks and deletes objects that expired, the server must not believe it still has them:
/// a later snapshot that needs the same content again must write it again.
#[test]
fn server_writes_again_what_a_cron_prune_deleted() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "version one\n").file("keep.txt", "kept\n");
    // Without the watcher, whose stat cache on disk (the index, a root for prune as for git)
    // would still name the first snapshot's objects and keep them.
    let what = "rewind serve --no-watch".to_string();
    let mut s = Server::spawn(p.rewind_command(["serve", "--no-watch"]), what);
    let first = oid(&s.ok("track", Value::Null)["hash"], "track"); // the first snapshot: a pack
    p.file("a.txt", "version two\n");
    s.ok("track", Value::Null); // reads the pack's index into the server's object database
    let store = p.store();

    // Cron, much later: the first snapshot has expired; its objects are dropped and the pack
    // rewritten without them.
    let mut cmd = p.rewind_command(["--json", "prune", "--retention", "1d"]);
    cmd.env("REWIND_NOW", "2099-01-01T00:00:00Z");
    let run = run_with_deadline(&mut cmd, DEFAULT_DEADLINE);
    run.assert_success();
    let gone = sb.git_in_run(&store, ["cat-file", "-e", &first]);
    assert!(
        !gone.status.success(),
        "the prune removed the first snapshot's tree: {run}"
    );

    // The project goes back to the first version (say, `git checkout` of an old branch).
    p.file("a.txt", "version one\n");
    let again = oid(&s.ok("track", Value::Null)["hash"], "track");
    assert_eq!(again, first, "the same files make the same tree");
    let present = sb.git_in_run(&store, ["cat-file", "-e", &again]);
    assert!(
        present.status.success(),
        "the server returned snapshot {again}, but the store does not have that tree: the \
         server still believed it had the objects the prune deleted, and did not write them"
    );
    assert_tree_complete(&sb, &store, &again);
    let patch = s.ok("patch", json!({"hash": again}));
    assert_eq!(patch["files"], json!([]), "{patch}");
    s.close();
    p.assert_fsck_clean();
    // A fresh process can read the snapshot the server returned.
    let run = p.rewind(["diff", &again]);
    run.assert_success();
}

/// A server keeps the trees it wrote and read (`serve` diffs without reading them again). Its
/// diffs must stay git's, over many snapshots of a deep tree read back and forth, and a
/// snapshot a cron prune removed must be `not_found` although its trees were held.
#[test]
fn server_diffs_from_the_trees_it_holds_as_git_does_and_forgets_pruned_ones() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    for d in 0..6 {
        p.file(format!("d{d}/e/f/g.txt"), format!("start {d}\n"));
    }
    p.file("keep.txt", "kept\n");
    let what = "rewind serve --no-watch".to_string();
    let mut s = Server::spawn(p.rewind_command(["serve", "--no-watch"]), what);
    let mut snapshots = vec![oid(&s.ok("track", Value::Null)["hash"], "track")];
    for round in 0..4 {
        p.file(format!("d{round}/e/f/g.txt"), format!("round {round}\n"));
        p.file(format!("d{round}/e/new{round}.txt"), "new\n");
        snapshots.push(oid(&s.ok("track", Value::Null)["hash"], "track"));
    }
    let store = p.store();
    // Every pair, both ways, twice: the second time from the held trees.
    for pass in 0..2 {
        for from in &snapshots {
            for to in &snapshots {
                let rows = s.ok("diff_full", json!({"from": from, "to": to}));
                let what = format!("pass {pass}: diff_full {from} {to}");
                assert_rows_match_git(&sb, &store, &rows, from, to, &what);
            }
        }
    }

    // Cron, much later: every snapshot expired; the first one's own trees are deleted.
    let mut cmd = p.rewind_command(["--json", "prune", "--retention", "1d"]);
    cmd.env("REWIND_NOW", "2099-01-01T00:00:00Z");
    run_with_deadline(&mut cmd, DEFAULT_DEADLINE).assert_success();
    let first = &snapshots[0];
    let gone = sb.git_in_run(&store, ["cat-file", "-e", first]);
    assert!(!gone.status.success(), "the prune removed {first}");
    let error = s.err(
        "diff_full",
        Some(json!({"from": first, "to": snapshots[4]})),
    );
    assert_eq!(error["data"]["code"], "not_found", "{error}");
    s.close();
}

// ---------------------------------------------------------------------------
// Waiting for the store's lock: reads at once, timeouts, cancellation
// ---------------------------------------------------------------------------

/// The refs and objects of the store, as git lists them.
fn refs_and_objects(p: &TestProject) -> (String, String) {
    (
        p.store_git(["for-each-ref", "--format=%(refname) %(objectname)"]),
        p.store_git(["cat-file", "--batch-all-objects", "--batch-check"]),
    )
}

#[test]
fn turns_is_answered_while_a_turn_begin_waits_for_the_lock() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n");
    p.track();
    let holder = LockHolder::hold(&p.store());
    let mut s = Server::start(&p);
    s.send(
        &json!({"jsonrpc": "2.0", "id": "begin", "method": "turn_begin",
                   "params": {"session": "s", "turn": "1"}}),
    );
    // The read is answered first, while the write waits (the default wait is 30 s).
    s.send(&json!({"jsonrpc": "2.0", "id": "turns", "method": "turns"}));
    let turns = s.recv();
    assert_eq!(
        turns["id"], "turns",
        "a read waited behind a write: {turns}"
    );
    assert_eq!(turns["result"], json!([]), "{turns}");
    drop(holder);
    let begun = s.recv();
    assert_eq!(begun["id"], "begin", "{begun}");
    assert_eq!(
        begun["result"]["turn"], "1",
        "the write ran once the lock was free"
    );
    s.close();
    p.assert_fsck_clean();
}

#[test]
fn a_request_timeout_answers_busy() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n");
    p.track();
    let before = refs_and_objects(&p);
    let holder = LockHolder::hold(&p.store());
    let mut s = Server::start(&p);
    let error = s.err(
        "turn_begin",
        Some(json!({"session": "s", "turn": "1", "timeout_ms": 200})),
    );
    assert_eq!(
        (&error["code"], &error["data"]["code"]),
        (&json!(-32000), &json!("busy"))
    );
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("process {} (flock ", holder.pid())),
        "{error}"
    );
    // The CLI says the same under --json.
    let cli = cli_error(
        &p,
        &[
            "--wait",
            "0",
            "turn",
            "begin",
            "--session",
            "s",
            "--turn",
            "1",
        ],
    );
    assert_eq!(cli["code"], "busy", "{cli}");
    // A timeout that is not a whole number of milliseconds is a bad param.
    let bad = s.err("turns", Some(json!({"timeout_ms": "soon"})));
    assert_eq!(bad["code"], -32602, "{bad}");
    drop(holder);
    assert_eq!(refs_and_objects(&p), before, "the busy call left a trace");
    // The same request with time to spare succeeds.
    let begun = s.ok(
        "turn_begin",
        json!({"session": "s", "turn": "1", "timeout_ms": 60_000}),
    );
    assert_eq!(begun["turn"], "1", "{begun}");
    s.close();
}

#[test]
fn cancel_request_of_a_waiting_call_answers_cancelled_and_leaves_no_trace() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n");
    p.track();
    p.file("a.txt", "changed: a snapshot now would write objects\n");
    let before = refs_and_objects(&p);
    let holder = LockHolder::hold(&p.store());
    let mut s = Server::start(&p);
    s.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "turn_begin",
                   "params": {"session": "s", "turn": "1"}}));
    s.send(&json!({"jsonrpc": "2.0", "id": 8, "method": "track"}));
    // Answered at once: turn_begin is queued and waiting by now.
    assert_eq!(s.ok("turns", Value::Null), json!([]));
    // Cancel the waiting call and the one queued behind it: both answer -32800.
    for id in [7, 8] {
        s.send(&json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": id}}));
    }
    for id in [7, 8] {
        let cancelled = s.recv();
        assert_eq!(cancelled["id"], id, "{cancelled}");
        assert_eq!(cancelled["error"]["code"], -32800, "{cancelled}");
        assert_eq!(
            cancelled["error"]["data"]["code"], "cancelled",
            "{cancelled}"
        );
    }
    // A cancel for an unknown or a finished id is ignored.
    for id in [json!(7), json!(999), json!("nope")] {
        s.send(&json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": id}}));
        s.assert_silent(&format!("a cancel of {id}"));
    }
    drop(holder);
    assert_eq!(s.ok("turns", Value::Null), json!([]));
    assert_eq!(
        refs_and_objects(&p),
        before,
        "a cancelled call left a trace"
    );
    // The server goes on working.
    let begun = s.ok("turn_begin", json!({"session": "s", "turn": "1"}));
    assert_eq!(begun["turn"], "1", "{begun}");
    s.close();
    p.assert_fsck_clean();
}

/// Found by the hostile pass: reads that arrive while a write waits each got a thread, without
/// a bound. A fixed set of reader threads answers them now (none more are started), and all
/// are answered while the write still waits.
#[test]
fn reads_beside_a_waiting_write_run_on_a_bounded_number_of_threads() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    for i in 0..100 {
        p.file(format!("f{i}.txt"), format!("{i}\n").repeat(40));
    }
    let a = p.track();
    for i in 0..100 {
        p.file(format!("f{i}.txt"), format!("{i}\nchanged\n").repeat(40));
    }
    let b = p.track();
    let holder = LockHolder::hold(&p.store());
    let mut s = Server::start(&p);
    let threads = |s: &Server| -> usize {
        let status = std::fs::read_to_string(format!("/proc/{}/status", s.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with("Threads:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    s.send(
        &json!({"jsonrpc": "2.0", "id": "begin", "method": "turn_begin",
                   "params": {"session": "s", "turn": "1"}}),
    );
    std::thread::sleep(std::time::Duration::from_millis(200));
    let idle = threads(&s);
    for i in 0..100 {
        s.send(&json!({"jsonrpc": "2.0", "id": i, "method": "diff",
                       "params": {"from": a, "to": b}}));
    }
    let mut most = idle;
    let mut answered = 0;
    while answered < 100 {
        most = most.max(threads(&s));
        let response = s.recv();
        assert!(response.get("error").is_none(), "{response}");
        answered += 1;
    }
    assert!(most <= idle, "{most} threads for reads, {idle} before them");
    drop(holder);
    assert_eq!(s.recv()["id"], "begin");
    s.close();
}

/// `hello` (issue 13, "Protocol"): the protocol version and what the server answers. Every
/// method it lists is one the server knows (a bad param is -32602, never -32601 "unknown
/// method"), and a method it does not list is unknown.
#[test]
fn hello_names_the_protocol_and_every_method_the_server_answers() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n");
    let hello = json!({"jsonrpc": "2.0", "id": 0, "method": "hello"});
    let run = run_with_stdin(
        &mut p.rewind_command(["serve"]),
        format!("{hello}\n").as_bytes(),
    );
    run.assert_success();
    let answer: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    let result = &answer["result"];
    assert_eq!(result["protocol"], 2, "{answer}");
    assert_eq!(result["version"], env!("CARGO_PKG_VERSION"));
    let methods: Vec<String> = result["methods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap().to_string())
        .collect();
    assert!(methods.len() >= 15, "{methods:?}");
    let mut input = String::new();
    for (id, method) in methods
        .iter()
        .chain(["no_such_method".to_string()].iter())
        .enumerate()
    {
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method,
                             "params": {"no_such_param": 1}});
        input.push_str(&format!("{request}\n"));
    }
    let run = run_with_stdin(&mut p.rewind_command(["serve"]), input.as_bytes());
    run.assert_success();
    for line in run.stdout.lines() {
        let answer: Value = serde_json::from_str(line).unwrap();
        let id = answer["id"].as_u64().unwrap() as usize;
        let code = answer["error"]["code"].as_i64();
        match methods.get(id) {
            Some(method) => assert_eq!(code, Some(-32602), "{method}: {answer}"),
            None => assert_eq!(code, Some(-32601), "{answer}"),
        }
    }
    assert_eq!(run.stdout.lines().count(), methods.len() + 1);
}

/// Found by the issue-13 hostile pass: `timeout_ms` counted from when a request started to
/// run, not from when the server read it, so a write queued behind a slow one ran (and wrote)
/// long after its caller's timeout had passed. Here `track` waits for a lock held 1.5 s, and a
/// `turn_begin` with 300 ms queued behind it must be cancelled, leaving no turn.
#[test]
fn a_request_timeout_counts_from_when_the_server_read_it() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n");
    p.track();
    let holder = LockHolder::hold(&p.store());
    let mut s = Server::start(&p);
    s.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "track"}));
    s.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "turn_begin",
                   "params": {"session": "s", "turn": "1", "timeout_ms": 300}}));
    thread::sleep(Duration::from_millis(1500));
    drop(holder);
    let (mut track, mut begin) = (s.recv(), s.recv());
    if track["id"] == 3 {
        std::mem::swap(&mut track, &mut begin);
    }
    assert!(track["result"]["hash"].is_string(), "{track}");
    assert_eq!(begin["id"], 3, "{begin}");
    assert_eq!(begin["error"]["code"], -32800, "{begin}");
    assert_eq!(s.ok("turns", Value::Null), json!([]), "no turn was begun");
    s.close();
}

/// `turn_begin` takes the turn's metadata (issue 14, part 6); `turns` returns it.
#[test]
fn turn_begin_stores_metadata_that_turns_returns() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "one\n");
    let mut s = Server::start(&p);
    let meta = json!({"message_id": "msg_7", "model": "m"});
    s.ok(
        "turn_begin",
        json!({"session": "s", "turn": "1", "meta": meta}),
    );
    p.file("a.txt", "two\n");
    s.ok("turn_end", json!({"session": "s", "turn": "1"}));
    let turns = s.ok("turns", json!({"session": "s"}));
    assert_eq!(turns[0]["meta"], meta, "{turns}");
    let bad = s.request(
        "turn_begin",
        Some(json!({"session": "s", "turn": "2", "meta": {"k": 1}})),
    );
    assert_eq!(bad["error"]["code"], -32602, "a non-string value: {bad}");
}

/// A move through the server: `diff`, `diff_full`, `turn_end`, `turns` and `changes` pair it
/// as `git diff -M` does, and list a deletion and an addition with `no_renames: true`, as
/// `git diff --no-renames` does.
#[test]
fn no_renames_param_lists_a_move_as_a_deletion_and_an_addition() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    let body: String = (0..10).map(|i| format!("line {i}\n")).collect();
    p.file("old.txt", &body);
    let mut s = Server::start(&p);
    let store = p.store();
    let h0 = s.ok("turn_begin", json!({"session": "s", "turn": "1"}))["before"].clone();
    let h0 = oid(&h0, "turn_begin");
    p.remove("old.txt")
        .file("new.txt", format!("{body}one more\n"));
    let end = s.ok(
        "turn_end",
        json!({"session": "s", "turn": "1", "no_renames": true}),
    );
    let h1 = oid(&end["after"], "turn_end");
    let statuses = |rows: &Value| -> Vec<(String, String)> {
        (rows.as_array().unwrap().iter())
            .map(|r| {
                (
                    r["file"].as_str().unwrap().into(),
                    r["status"].as_str().unwrap().into(),
                )
            })
            .collect()
    };
    let per_path = [
        ("new.txt".to_string(), "added".to_string()),
        ("old.txt".to_string(), "deleted".to_string()),
    ];
    let renamed = [("new.txt".to_string(), "renamed".to_string())];
    assert_eq!(statuses(&end["files"]), per_path);
    for (no_renames, flag, want) in [
        (false, "-M", &renamed[..]),
        (true, "--no-renames", &per_path),
    ] {
        let text = s.ok(
            "diff",
            json!({"from": h0, "to": h1, "no_renames": no_renames}),
        );
        let git = sb.git_in(&store, ["diff", flag, &h0, &h1]);
        assert_eq!(text["diff"], git, "diff, no_renames {no_renames}");
        let rows = s.ok(
            "diff_full",
            json!({"from": h0, "to": h1, "no_renames": no_renames}),
        );
        assert_eq!(statuses(&rows), want, "diff_full, no_renames {no_renames}");
        let turns = s.ok("turns", json!({"session": "s", "no_renames": no_renames}));
        assert_eq!(
            statuses(&turns[0]["changed"]),
            want,
            "turns, no_renames {no_renames}"
        );
        let changes = s.ok("changes", json!({"session": "s", "no_renames": no_renames}));
        assert_eq!(
            statuses(&changes["files"]),
            want,
            "changes, no_renames {no_renames}"
        );
    }
    let rows = s.ok("diff_full", json!({"from": h0, "to": h1}));
    assert_eq!(rows[0]["old_file"], "old.txt", "{rows}");
    assert_eq!(
        (rows[0]["additions"].as_u64(), rows[0]["deletions"].as_u64()),
        (Some(1), Some(0)),
        "{rows}"
    );
}

// ---------------------------------------------------------------------------
// The file-system watcher
// ---------------------------------------------------------------------------

/// `serve` watches the project by default: after the first snapshot, one reads only what
/// changed (the status says so) and is still git's tree; `--no-watch` walks every time and the
/// status says why no watcher runs.
#[test]
fn serve_watches_by_default_and_no_watch_turns_it_off() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n");
    p.file("deep/er/b.txt", "b\n");
    let mut s = Server::start(&p);
    let first = s.ok("track", Value::Null);
    assert_eq!(oid(&first["hash"], "hash"), p.git_tree().id);
    // The one after the first reads every file again (the first watched each directory anew).
    let settled = s.ok("track", Value::Null);
    assert_eq!(settled["hash"], first["hash"]);
    p.file("deep/er/b.txt", "b, edited\n");
    p.file("deep/new.txt", "new\n");
    let second = s.ok("track", Value::Null);
    assert_eq!(
        oid(&second["hash"], "hash"),
        p.git_tree().id,
        "a watched snapshot is git's tree"
    );
    let third = s.ok("track", Value::Null);
    assert_eq!(oid(&third["hash"], "hash"), oid(&second["hash"], "hash"));
    let status = s.ok("status", Value::Null);
    let watcher = &status["watcher"];
    assert_eq!(watcher["active"], json!(true), "{status}");
    assert_eq!(
        (
            watcher["full_walks"].as_u64(),
            watcher["partial_walks"].as_u64(),
            watcher["unchanged"].as_u64()
        ),
        (Some(2), Some(1), Some(1)),
        "{status}"
    );
    assert!(watcher["directories"].as_u64().unwrap() >= 3, "{status}");
    s.close();

    let what = "rewind serve --no-watch".to_string();
    let mut s = Server::spawn(p.rewind_command(["serve", "--no-watch"]), what);
    p.file("a.txt", "a, again\n");
    let tracked = s.ok("track", Value::Null);
    assert_eq!(oid(&tracked["hash"], "hash"), p.git_tree().id);
    let status = s.ok("status", Value::Null);
    assert_eq!(status["watcher"]["active"], json!(false), "{status}");
    let reason = status["watcher"]["reason"].as_str().unwrap();
    assert!(reason.contains("not started"), "{status}");
    assert!(reason.contains("--no-watch"), "{status}");
    s.close();

    // `doctor` says whether a watcher could run, and that none runs in its own process.
    let doctor = cli(&p, &["doctor"]);
    assert_eq!(doctor["watcher"]["active"], json!(false), "{doctor}");
    assert!(
        doctor["watcher"]["reason"]
            .as_str()
            .unwrap()
            .contains("inotify"),
        "{doctor}"
    );
    p.assert_fsck_clean();
}

/// What of the project (files, directories, files whose names are gone) a process holds open.
fn held_inside(pid: u32, project: &Path) -> Vec<String> {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap();
    let links = fds.filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok());
    let inside = links.filter(|l| l.starts_with(project));
    inside.map(|l| l.to_string_lossy().into_owned()).collect()
}

/// A restore frees the files it swapped out (a file system may trim their blocks one by one as
/// they are closed) after it has answered, off the answer's path, and closes the directories
/// it opened there too: it holds them open, and they must all be closed soon after. Back and forth under a low descriptor limit, the held files
/// never run a restore out of descriptors.
#[test]
fn a_served_restore_closes_the_files_it_swapped_out_soon_after_answering() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    let files = |when: &str| {
        for n in 0..120 {
            p.file(format!("d{}/f{n}.txt", n % 7), format!("{n} {when}\n"));
        }
    };
    files("before");
    let before = p.track();
    files("after");
    let after = p.track();
    let plain = Server::start(&p);
    let mut limited = Command::new("sh");
    limited.args(["-c", "ulimit -n 48 && exec \"$0\" \"$@\""]);
    let what = "rewind serve under ulimit -n 48".to_string();
    let low = Server::spawn(wrapped(&p, limited, &["serve"]), what);
    for (mut s, name) in [(plain, "plain"), (low, "ulimit -n 48")] {
        for round in 0..4 {
            let target = [&before, &after][round % 2];
            let o = s.ok("restore", json!({ "hash": target }));
            let what = format!("{name}, restore {round}: {o}");
            assert_eq!(o["written"].as_array().map(Vec::len), Some(120), "{what}");
            assert_eq!(o["failed"], json!([]), "{what}");
            assert_eq!(&p.track(), target, "{what}");
            let deadline = Instant::now() + Duration::from_secs(20);
            let pid = s.child.id();
            while !held_inside(pid, &p.path).is_empty() {
                let held = held_inside(pid, &p.path);
                assert!(Instant::now() < deadline, "{what}: still held: {held:?}");
                thread::sleep(Duration::from_millis(20));
            }
        }
        s.close();
    }
}

/// Found by the hostile pass over the watcher (F3): `~/.gitconfig` made a FIFO while `serve`
/// ran blocked its next `track` for ever, holding the store's lock, so every hook and CLI call
/// failed `busy`. The snapshot now passes over such a config file and answers.
#[test]
fn a_gitconfig_made_a_fifo_while_serve_runs_never_blocks_a_track() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n");
    let mut s = Server::start(&p);
    let first = s.ok("track", json!(null));
    plant(&sb.home.join(".gitconfig"), true, Path::new(""));
    p.file("b.txt", "b\n");
    let second = s.ok("track", json!(null));
    assert_ne!(first["hash"], second["hash"], "{second}");
    let cli = run_with_deadline(&mut p.rewind_command(["track"]), DEFAULT_DEADLINE);
    cli.assert_success();
    std::fs::remove_file(sb.home.join(".gitconfig")).unwrap(); // git, the oracle, would hang on it
    let paths = p.store_paths(second["hash"].as_str().unwrap());
    assert_eq!(paths.into_iter().collect::<Vec<_>>(), ["a.txt", "b.txt"]);
    s.close();
}

/// Found by the hostile pass over the watcher (F5): once the watch limit stopped the watcher,
/// the snapshots after it walked everything but `status` counted only the first
/// (`full_walks: 1` after four); and with no inotify instance left to the user, the reason was
/// "Too many open files". Every snapshot that walks everything counts, with the watcher's
/// reason, and the instance limit is named. (Each limit is set in a user namespace of its own.)
#[test]
fn serve_status_counts_every_walk_after_the_watcher_stops_and_names_the_limit_met() {
    require_tool(
        "unshare",
        "to run serve in a user namespace with its own inotify limits",
    );
    let sb = Sandbox::new();
    let p = sb.project("proj");
    for i in 0..30 {
        p.file(format!("d{i}/f"), "f\n");
    }
    let cases = [
        ("max_inotify_watches", "8", "user.max_inotify_watches = 8"),
        (
            "max_inotify_instances",
            "0",
            "fs.inotify.max_user_instances",
        ),
    ];
    for (limit, value, named) in cases {
        let script = format!("echo {value} > /proc/sys/user/{limit} && exec \"$0\" \"$@\"");
        let mut cmd = sb.isolated("unshare");
        cmd.args(["-U", "-r", "sh", "-c", &script])
            .arg(rewind_bin())
            .arg("--data-dir")
            .arg(&sb.data_dir)
            .arg("-C")
            .arg(&p.path)
            .arg("serve");
        let mut s = Server::spawn(cmd, format!("rewind serve with user.{limit} = {value}"));
        for round in 0..4 {
            p.file("d1/f", format!("{limit} {round}\n"));
            let tracked = s.ok("track", Value::Null);
            assert_eq!(oid(&tracked["hash"], "hash"), p.git_tree().id);
        }
        let status = s.ok("status", Value::Null);
        let watcher = &status["watcher"];
        assert_eq!(watcher["active"], json!(false), "{status}");
        assert_eq!(watcher["full_walks"].as_u64(), Some(4), "{status}");
        let reason = watcher["reason"].as_str().unwrap();
        assert!(reason.contains(named), "{status}");
        assert_eq!(watcher["last_full_walk"].as_str(), Some(reason), "{status}");
        s.close();
    }
}
