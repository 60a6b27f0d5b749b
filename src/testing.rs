//! Helpers for tests, not an API: the git CLI as the oracle of the unit tests beside the code,
//! and the crate internals that the integration tests (tests/it) compare with git.

#[cfg(test)]
use std::io::Write;
#[cfg(test)]
use std::path::Path;
#[cfg(test)]
use std::process::{Command, Output, Stdio};

use crate::diff::{merge, ConflictHunk};

/// [`merge::merge_texts`] (`git merge-file -p -L ours_label -L base_label -L theirs_label ours
/// base theirs`): the merged text and its conflicts.
pub fn merge_texts(
    base: &[u8],
    ours: &[u8],
    theirs: &[u8],
    labels: [&str; 3],
) -> (Vec<u8>, Vec<ConflictHunk>) {
    let merged = merge::merge_texts(base, ours, theirs, labels);
    (merged.text, merged.conflicts)
}

/// `git ARGS` in `repo` with `input` on stdin, isolated from the user's and the system's config
/// (`HOME` is `repo`). The caller checks the exit status: some commands answer with it.
#[cfg(test)]
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
#[cfg(test)]
pub(crate) fn git_ok(repo: &Path, args: &[&str], input: &[u8]) -> Vec<u8> {
    let out = git(repo, args, input);
    assert!(out.status.success(), "git {args:?}: {out:?}");
    out.stdout
}
