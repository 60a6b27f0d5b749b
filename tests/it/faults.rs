//! Faults and hostile input: a suite that tries to break `rewind`.
//!
//! What must hold, whatever the input: no panic and no hang (every failure is exit 1 with a
//! one-line message naming the path or id and the cause, or exit 2 for usage errors); the
//! project's files are never damaged by a failed operation; the store recovers by itself where
//! it can, and says so where it cannot.
//!
//! Cases already covered elsewhere are not repeated here (see docs/faults.md for the map).
//! Random tests print their seed; `REWIND_TEST_SEED=<seed>` replays them. The full-disk and
//! unreadable-file tests need root (mount, setpriv) and fail when they cannot set up.

use crate::common::*;
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

mod arguments;
mod concurrency;
mod crashes;
mod fuzzing;
mod resources;
mod store_damage;
mod tree_contents;

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A clean failure of a `--json` run: exit 1, one line on stderr starting with `rewind:`, and
/// `{"error": {"code", "message"}}` on stdout. Returns (code, message).
fn failure(run: &Run) -> (String, String) {
    assert_no_panic(run);
    assert_eq!(
        run.code(),
        Some(1),
        "expected a clean failure (exit 1): {run}"
    );
    let lines: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert!(
        lines.len() == 1 && lines[0].starts_with("rewind: "),
        "a failure must be one line on stderr starting with `rewind: `: {run}"
    );
    let v = one_json(run);
    let code = v["error"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("no error.code: {run}"))
        .to_string();
    let message = v["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("no error.message: {run}"))
        .to_string();
    assert!(!code.is_empty() && !message.is_empty(), "{run}");
    (code, message)
}

/// A usage error: exit 2, a message on stderr, nothing on stdout.
fn usage_error(run: &Run) {
    assert_no_panic(run);
    assert_eq!(
        run.code(),
        Some(2),
        "expected a usage error (exit 2): {run}"
    );
    assert!(!run.stderr.trim().is_empty(), "usage errors explain: {run}");
    assert!(run.stdout.trim().is_empty(), "nothing on stdout: {run}");
}

/// `rewind --json ARGS` in the project; must exit 0; its JSON.
fn rwj<S: AsRef<OsStr>>(p: &TestProject, args: &[S]) -> Value {
    let mut all: Vec<OsString> = vec!["--json".into()];
    all.extend(args.iter().map(|a| a.as_ref().to_owned()));
    let run = p.rewind(&all);
    run.assert_success();
    one_json(&run)
}

/// The id git gives a blob with `bytes`.
fn blob_id(sb: &Sandbox, bytes: &[u8]) -> String {
    let mut cmd = sb.git_command(None);
    cmd.args(["hash-object", "--stdin"]);
    let run = run_with_stdin(&mut cmd, bytes);
    run.assert_success();
    run.stdout.trim().to_string()
}

/// The path of loose object `oid` in `store`.
fn loose_path(store: &Path, oid: &str) -> PathBuf {
    store.join("objects").join(&oid[..2]).join(&oid[2..])
}

/// `rewind diff-full ARGS` rows: file -> counts (None: binary).
fn diff_full_counts(p: &TestProject, args: &[&str]) -> BTreeMap<String, Option<(u64, u64)>> {
    let mut all = vec!["diff-full", "--no-renames"]; // (the oracle is `--no-renames`)
    all.extend_from_slice(args);
    let run = p.rewind(&all);
    run.assert_success();
    let v = one_json(&run);
    let rows = v
        .as_array()
        .unwrap_or_else(|| panic!("diff-full prints an array: {run}"));
    let mut out = BTreeMap::new();
    for row in rows {
        let file = row["file"].as_str().expect("file").to_string();
        let counts = if row["binary"].as_bool() == Some(true) {
            None
        } else {
            Some((
                row["additions"].as_u64().expect("additions"),
                row["deletions"].as_u64().expect("deletions"),
            ))
        };
        assert!(
            out.insert(file.clone(), counts).is_none(),
            "{file} listed twice: {run}"
        );
    }
    out
}

/// `git diff` text in the store, as `rewind diff` must print it.
fn git_diff_text(sb: &Sandbox, store: &Path, from: &str, to: &str) -> Vec<u8> {
    let run = sb.git_in_run(
        store,
        [
            "-c",
            "core.quotePath=false",
            "diff",
            "--no-ext-diff",
            "--no-renames",
            from,
            to,
        ],
    );
    run.assert_success();
    run.stdout_bytes
}

/// Every object of the store is readable (each one inflated) and `git fsck --strict` is clean.
fn assert_objects_sound(sb: &Sandbox, store: &Path, what: &str) {
    let run = sb.git_in_run(
        store,
        ["cat-file", "--batch-all-objects", "--batch", "--unordered"],
    );
    assert!(
        run.status.success() && run.stderr.trim().is_empty(),
        "{what}: an object of the store cannot be read: {}",
        run.stderr
    );
    assert_fsck_clean(sb, store);
}

/// `tmp_*` and `index.tmp*` files in the store.
fn store_temp_files(store: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![store.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = e.path();
            let name = e.file_name();
            let name = name.to_string_lossy();
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                stack.push(path);
            } else if name.starts_with("tmp_") || name.starts_with("index.tmp") {
                out.push(path);
            }
        }
    }
    out
}

/// `turns --json --session=S`.
fn turns_of(p: &TestProject, session: &str) -> Vec<Value> {
    rwj(p, &["turns", &format!("--session={session}")])
        .as_array()
        .expect("turns prints an array")
        .clone()
}

/// Sets a file's mtime `secs` seconds into the past (so the stat cache does not treat it as
/// racy and re-read it).
fn age(path: &Path, secs: u64) {
    let f = fs::File::options().write(true).open(path).unwrap();
    f.set_modified(SystemTime::now() - Duration::from_secs(secs))
        .unwrap();
}

/// Waits for `child`; `None` (after killing it) if it hung: still running past `limit` while
/// it waits on a pipe or a FIFO ([`waits_on_a_pipe`]), or past [`DEFAULT_DEADLINE`] whatever it
/// does (slow on a loaded machine is not hung).
fn wait_or_kill(child: std::process::Child, limit: Duration, what: &str) -> Option<Run> {
    let mut child = child;
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return Some(finish(child, DEFAULT_DEADLINE, what));
        }
        let past = start.elapsed();
        if (past > limit && waits_on_a_pipe(child.id())) || past > DEFAULT_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// Whether a thread of process `pid` sleeps in the kernel on a pipe or a FIFO (opening one with
/// no partner, reading or writing one), as its wait channel (`/proc/<pid>/task/*/wchan`) says:
/// a wait that may never end, where a run merely slow on a loaded machine sleeps elsewhere.
fn waits_on_a_pipe(pid: u32) -> bool {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().any(|task| {
        let wchan = fs::read_to_string(task.path().join("wchan")).unwrap_or_default();
        ["wait_for_partner", "pipe_read", "pipe_write", "pipe_wait"]
            .iter()
            .any(|pipe| wchan.contains(pipe))
    })
}

/// Lexically normalised components of a revert path, relative to `project`; `None` if the path
/// leaves the project (an absolute path elsewhere, or `..` above the root).
fn lexical_inside(project: &Path, path: &[u8]) -> Option<Vec<Vec<u8>>> {
    let p = Path::new(OsStr::from_bytes(path));
    let mut stack: Vec<Vec<u8>> = Vec::new();
    let absolute = p.is_absolute();
    for c in p.components() {
        match c {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                stack.pop()?;
            }
            Component::Normal(n) => stack.push(n.as_bytes().to_vec()),
        }
    }
    if !absolute {
        return Some(stack);
    }
    let root: Vec<Vec<u8>> = project
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.as_bytes().to_vec()),
            _ => None,
        })
        .collect();
    if stack.len() >= root.len() && stack[..root.len()] == root[..] {
        Some(stack[root.len()..].to_vec())
    } else {
        None
    }
}
