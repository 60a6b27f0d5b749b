//! Helpers for the unit tests beside the code: the git CLI as the oracle.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// `git ARGS` in `repo` with `input` on stdin, isolated from the user's and the system's config
/// (`HOME` is `repo`). The caller checks the exit status: some commands answer with it.
pub(crate) fn git(repo: &Path, args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new("git")
        .current_dir(repo)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", repo)
        .env_remove("XDG_CONFIG_HOME")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the git CLI is these tests' oracle");
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

/// [`git`], which must succeed; its stdout.
pub(crate) fn git_ok(repo: &Path, args: &[&str], input: &[u8]) -> Vec<u8> {
    let out = git(repo, args, input);
    assert!(out.status.success(), "git {args:?}: {out:?}");
    out.stdout
}
