//! Integration tests for `rewind track` (and `rewind path`), using the git
//! CLI as the oracle. Helpers live in tests/it/common.rs.

use crate::common::*;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------
// 1. Tree contents
// ---------------------------------------------------------------------------

#[test]
fn tree_matches_git_for_tricky_tree() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("plain.txt", "hello\n")
        .exec("bin/run.sh", "#!/bin/sh\necho hi\n")
        .file("bin/not-exec.sh", "#!/bin/sh\n")
        // git looks at the owner's x bit only
        .file("bin/owner-x", "u+x\n")
        .chmod("bin/owner-x", 0o744)
        .file("bin/group-x", "g+x\n")
        .chmod("bin/group-x", 0o654)
        .file("bin/other-x", "o+x\n")
        .chmod("bin/other-x", 0o645)
        .file("no-newline.txt", "no final newline")
        .file("empty", "")
        .file("binary.bin", b"\x00\x01\x02\xff\r\n\x00")
        // symlinks: never followed, stored as link text
        .symlink("link-to-file", "plain.txt")
        .symlink("link-to-dir", "bin")
        .symlink("dangling", "does/not/exist")
        .symlink("self-loop", "self-loop")
        .symlink("abs-link", "/etc/passwd")
        .symlink("日本/link ü", "../naïve file.txt")
        // unicode, spaces, odd names
        .file("naïve file.txt", "unicode\n")
        .file("日本/emoji 😀.md", "# emoji\n")
        .file(" leading space", "x")
        .file("trailing space ", "y")
        .file("#hash", "h")
        .file("!bang", "b")
        .file("back\\slash", "bs")
        .file("new\nline.txt", "nl\n")
        .file("tab\there", "tab\n")
        // git does not follow a .gitignore that is a symlink (but stores the link)
        .file("rules/real-ignore", "*.txt\n")
        .symlink("linkedrules/.gitignore", "../rules/real-ignore")
        .file(
            "linkedrules/kept.txt",
            "kept: the symlinked .gitignore is not read\n",
        )
        // git's tree sort order ("foo/" sorts as "foo/", after "foo.txt")
        .file("foo/inner.txt", "inner\n")
        .file("foo.txt", "foo\n")
        .file("foo-bar", "fb\n")
        .file("foo0", "f0\n")
        // empty dirs and dirs holding only ignored files: absent
        .dir("empty-dir")
        .dir("nested/empty/deeper")
        .file("only-ignored/x.log", "ignored\n");

    // nested .gitignore with re-includes at several levels
    p.file(
        ".gitignore",
        "# comment\n*.log\n!important.log\nbuild/\n!build/keep.txt\nlogs/*\n!logs/keep.txt\n/root-only.txt\n**/gen/*.out\n",
    )
    .file("a.log", "ignored\n")
    .file("important.log", "kept\n")
    .file("build/out.bin", "ignored\n")
    .file("build/keep.txt", "ignored: parent dir excluded\n")
    .file("logs/x.txt", "ignored\n")
    .file("logs/keep.txt", "kept\n")
    .file("root-only.txt", "ignored\n")
    .file("sub/root-only.txt", "kept\n")
    .file("gen/b.out", "ignored\n")
    .file("sub/gen/a.out", "ignored\n")
    .file("sub/gen/a.txt", "kept\n")
    .file("sub/.gitignore", "!keep.log\n*.tmp\n/anchored.txt\n")
    .file("sub/keep.log", "kept (re-included)\n")
    .file("sub/x.log", "ignored\n")
    .file("sub/a.tmp", "ignored\n")
    .file("sub/anchored.txt", "ignored\n")
    .file("sub/deeper/anchored.txt", "kept\n")
    .file("sub/deeper/.gitignore", "!*.tmp\nsecret/\n")
    .file("sub/deeper/b.tmp", "kept (re-included)\n")
    .file("sub/deeper/c.log", "ignored\n")
    .file("sub/deeper/secret/s.txt", "ignored\n");

    // CRLF and text=auto: raw bytes must be kept
    p.file(
        ".gitattributes",
        "* text=auto\n*.txt eol=crlf\n*.md filter=nonexistent ident\n",
    )
    .file("crlf.txt", "a\r\nb\r\n")
    .file("mixed.txt", "a\r\nb\nc\r")
    .file("lf.txt", "x\ny\n")
    .file("ident.md", "$Id$\r\n");

    // a deep path
    let deep: Vec<String> = (0..40).map(|i| format!("d{i}")).collect();
    let deep_file = format!("{}/deep.txt", deep.join("/"));
    p.file(&deep_file, "deep\n");

    let t = p.track_matches_git();
    assert!(
        t.skipped.is_empty(),
        "nothing should be skipped: {}",
        t.json
    );

    // Sanity checks on the content itself (independent of the oracle).
    let paths = p.store_paths(&t.hash);
    for kept in [
        "important.log",
        "logs/keep.txt",
        "sub/root-only.txt",
        "sub/keep.log",
        "sub/deeper/b.tmp",
        "sub/deeper/anchored.txt",
        "sub/gen/a.txt",
        "linkedrules/.gitignore",
        "linkedrules/kept.txt",
        "new\nline.txt",
        "self-loop",
        "link-to-dir",
        "naïve file.txt",
        "日本/emoji 😀.md",
        deep_file.as_str(),
    ] {
        assert!(
            paths.contains(kept),
            "{kept} must be in the tree: {paths:?}"
        );
    }
    for gone in [
        "a.log",
        "build/keep.txt",
        "logs/x.txt",
        "root-only.txt",
        "sub/gen/a.out",
        "sub/a.tmp",
        "sub/anchored.txt",
        "sub/deeper/c.log",
        "sub/deeper/secret/s.txt",
        "only-ignored/x.log",
        "link-to-dir/run.sh",
    ] {
        assert!(!paths.contains(gone), "{gone} must not be in the tree");
    }
    assert!(!paths
        .iter()
        .any(|p| p.starts_with("empty-dir") || p.starts_with("nested")));
    for raw in [
        "crlf.txt",
        "mixed.txt",
        "lf.txt",
        "ident.md",
        "binary.bin",
        "no-newline.txt",
        "empty",
    ] {
        assert_eq!(
            p.store_blob(&t.hash, raw),
            p.read(raw),
            "blob of {raw} must be the raw file bytes"
        );
    }
    assert_eq!(
        p.store_blob(&t.hash, "link-to-file"),
        b"plain.txt",
        "symlink blob = link text"
    );
    assert_eq!(p.store_blob(&t.hash, "self-loop"), b"self-loop");
    let modes = p.store_git(["ls-tree", "-r", &t.hash, "bin", "dangling"]);
    for (mode, path) in [
        ("100755", "bin/run.sh"),
        ("100755", "bin/owner-x"),
        ("100644", "bin/group-x"),
        ("100644", "bin/other-x"),
        ("100644", "bin/not-exec.sh"),
        ("120000", "dangling"),
    ] {
        assert!(
            modes
                .lines()
                .any(|l| l.starts_with(mode) && l.ends_with(&format!("\t{path}"))),
            "{path} must be {mode}:\n{modes}"
        );
    }

    // Plain `track` prints the same id.
    assert_eq!(p.track(), t.hash);
    p.assert_fsck_clean();
}

#[test]
fn non_utf8_file_name_matches_git() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    let name = std::ffi::OsStr::from_bytes(b"bad-\xff\xfe-name.txt");
    p.file("ok.txt", "ok\n")
        .file(name, "latin1 name\n")
        .file(std::ffi::OsStr::from_bytes(b"dir-\xe9/x"), "x");
    let t = p.track_matches_git();
    assert_eq!(t.files, 3);
    p.assert_fsck_clean();
}

// ---------------------------------------------------------------------------
// 2. Excludes: global, info/exclude, tracked-but-ignored
// ---------------------------------------------------------------------------

/// Files used by the global-excludes tests.
fn excludes_fixture<'a>(sb: &'a Sandbox) -> TestProject<'a> {
    let p = sb.project("proj");
    p.file("a.txt", "a\n")
        .file("x.secret", "s\n")
        .file("sub/y.secret", "s\n")
        .file("ignored-dir/z.txt", "z\n")
        .file("file.xdg", "xdg\n")
        .file("tilde.tl", "t\n");
    p
}

fn assert_paths(p: &TestProject, tree: &str, present: &[&str], absent: &[&str]) {
    let paths = p.store_paths(tree);
    for x in present {
        assert!(paths.contains(*x), "{x} must be in the tree: {paths:?}");
    }
    for x in absent {
        assert!(
            !paths.contains(*x),
            "{x} must not be in the tree: {paths:?}"
        );
    }
}

#[test]
fn global_excludes_file_from_home_gitconfig() {
    let sb = Sandbox::new();
    let ignore = sb.root.join("global-ignore");
    fs::write(&ignore, "*.secret\nignored-dir/\n").unwrap();
    sb.write_home_gitconfig(&format!("[core]\n\texcludesFile = {}\n", ignore.display()));
    // Not used by git once core.excludesFile is set.
    sb.write_xdg_git_file("ignore", "*.xdg\n");
    let p = excludes_fixture(&sb);
    let t = p.track_matches_git();
    assert_paths(
        &p,
        &t.hash,
        &["a.txt", "file.xdg"],
        &["x.secret", "sub/y.secret", "ignored-dir/z.txt"],
    );
    p.assert_fsck_clean();
}

#[test]
fn global_excludes_file_with_tilde_path() {
    let sb = Sandbox::new();
    fs::write(sb.home.join(".global-ignore"), "*.tl\n").unwrap();
    sb.write_home_gitconfig("[core]\n\texcludesFile = ~/.global-ignore\n");
    let p = excludes_fixture(&sb);
    let t = p.track_matches_git();
    assert_paths(&p, &t.hash, &["a.txt", "x.secret"], &["tilde.tl"]);
    p.assert_fsck_clean();
}

#[test]
fn global_excludes_file_from_xdg_git_config() {
    let sb = Sandbox::new();
    let ignore = sb.root.join("xdg-configured-ignore");
    fs::write(&ignore, "*.secret\n").unwrap();
    sb.write_xdg_git_file(
        "config",
        &format!("[core]\n\texcludesfile = {}\n", ignore.display()),
    );
    let p = excludes_fixture(&sb);
    let t = p.track_matches_git();
    assert_paths(
        &p,
        &t.hash,
        &["a.txt", "ignored-dir/z.txt"],
        &["x.secret", "sub/y.secret"],
    );
    p.assert_fsck_clean();
}

#[test]
fn default_xdg_git_ignore_applies() {
    let sb = Sandbox::new();
    sb.write_xdg_git_file("ignore", "*.xdg\nignored-dir\n");
    let p = excludes_fixture(&sb);
    let t = p.track_matches_git();
    assert_paths(
        &p,
        &t.hash,
        &["a.txt", "x.secret"],
        &["file.xdg", "ignored-dir/z.txt"],
    );
    p.assert_fsck_clean();
}

#[test]
fn project_info_exclude_and_tracked_but_ignored_files() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.git_init();
    p.file(".gitignore", "*.log\nbuild/\n")
        .file("keep.txt", "keep\n")
        .file("tracked.log", "tracked although ignored\n")
        .file("untracked.log", "ignored\n")
        .file("build/tracked.o", "tracked in an ignored dir\n")
        .file("build/untracked.o", "ignored\n")
        .file("excluded-by-info.txt", "ignored via info/exclude\n")
        .file("deleted.txt", "committed then deleted\n")
        .file("staged.tmp", "staged, never committed, ignored\n");
    fs::write(p.join(".git/info/exclude"), "excluded-by-info.txt\n*.tmp\n").unwrap();
    p.git(["add", "-f", "tracked.log", "build/tracked.o", "deleted.txt"]);
    p.commit_all("init");
    p.git(["add", "-f", "staged.tmp"]);
    p.remove("deleted.txt");

    let before = fs_snapshot(&p.join(".git"));
    let t = p.track_matches_git();
    assert_same_snapshot(&before, &fs_snapshot(&p.join(".git")), "the project's .git");
    assert_paths(
        &p,
        &t.hash,
        &[
            ".gitignore",
            "keep.txt",
            "tracked.log",
            "build/tracked.o",
            "staged.tmp",
        ],
        &[
            "untracked.log",
            "build/untracked.o",
            "excluded-by-info.txt",
            "deleted.txt",
        ],
    );
    p.assert_fsck_clean();
}

#[test]
fn subdirectory_project_uses_enclosing_repo_excludes() {
    let sb = Sandbox::new();
    let repo = sb.project("repo");
    repo.git_init();
    repo.file("outside.txt", "not part of the project\n")
        .commit_all("init");
    fs::write(
        repo.join(".git/info/exclude"),
        "*.secret\n/proj/anchored.txt\n",
    )
    .unwrap();
    // A .gitignore above the project, in the enclosing repo's root.
    repo.file(".gitignore", "*.parentignored\n");
    let p = sb.project_at(&repo.join("proj"));
    p.file("a.txt", "a\n")
        .file("b.secret", "s\n")
        .file("deeper/c.secret", "s\n")
        .file("anchored.txt", "ignored (anchored at the repo root)\n")
        .file("deeper/anchored.txt", "kept\n")
        .file("deeper/x.parentignored", "ignored by ../.gitignore\n");

    let before = fs_snapshot(&repo.join(".git"));
    let t = p.track_matches_git();
    assert_same_snapshot(
        &before,
        &fs_snapshot(&repo.join(".git")),
        "the enclosing repo's .git",
    );
    assert_paths(
        &p,
        &t.hash,
        &["a.txt", "deeper/anchored.txt"],
        &[
            "b.secret",
            "deeper/c.secret",
            "anchored.txt",
            "outside.txt",
            "proj/a.txt",
            "deeper/x.parentignored",
        ],
    );
    p.assert_fsck_clean();
}

#[test]
fn subdirectory_project_keeps_files_tracked_by_enclosing_index() {
    let sb = Sandbox::new();
    let repo = sb.project("repo");
    repo.git_init();
    repo.file(".gitignore", "*.log\n")
        .file("proj/tracked.log", "tracked\n")
        .file("proj/a.txt", "a\n");
    repo.git(["add", "-f", "proj/tracked.log"]);
    repo.commit_all("init");
    let p = sb.project_at(&repo.join("proj"));
    p.file("untracked.log", "ignored\n");
    let t = p.track_matches_git();
    assert_paths(&p, &t.hash, &["a.txt", "tracked.log"], &["untracked.log"]);
    p.assert_fsck_clean();
}

// ---------------------------------------------------------------------------
// 3. Nested repositories
// ---------------------------------------------------------------------------

#[test]
fn nested_repos_are_left_out_reported_and_untouched() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    // Under `skip` (the default snapshots their files: tests/it/nested.rs).
    p.store_git(["config", "rewind.nestedRepos", "skip"]);
    p.git_init();
    p.file("top.txt", "top\n").commit_all("init");
    p.file("untracked.txt", "u\n");

    // A nested repo with a commit (and a dirty file).
    let with_commit = sb.project_at(&p.join("nested-commit"));
    with_commit.git_init();
    with_commit.file("f.txt", "f\n").commit_all("nested");
    with_commit
        .file("f.txt", "dirty\n")
        .file("new.txt", "new\n");
    // A freshly initialised one, without commits.
    let fresh = sb.project_at(&p.join("deep/inner/nested-fresh"));
    fresh.git_init();
    fresh.file("g.txt", "g\n");
    // A subdir with a `.git` file (like a submodule / worktree).
    let sep = sb.root.join("separate.git");
    sb.git(
        Some(&sb.root),
        [
            OsStr::new("init"),
            OsStr::new("-q"),
            OsStr::new("--separate-git-dir"),
            sep.as_os_str(),
            p.join("gitfile-sub").as_os_str(),
        ],
    );
    p.file("gitfile-sub/h.txt", "h\n");
    assert!(p.join("gitfile-sub/.git").is_file());

    let nested = ["deep/inner/nested-fresh", "gitfile-sub", "nested-commit"];
    assert_eq!(nested_repos(&p.path), nested);

    let state = |d: &TestProject| {
        (
            d.git(["status", "--porcelain", "--untracked-files=all"]),
            d.sb.git_run(Some(&d.path), ["rev-parse", "-q", "--verify", "HEAD"])
                .stdout,
        )
    };
    let status_before: Vec<_> = [&with_commit, &fresh].iter().map(|d| state(d)).collect();
    let gitfile_status_before = sb.git(Some(&p.join("gitfile-sub")), ["status", "--porcelain"]);
    let before = fs_snapshot(&p.path);
    let sep_before = fs_snapshot(&sep);

    let t = p.track_matches_git();
    for n in nested {
        t.assert_skipped(n, "nested_repo");
    }
    assert_eq!(
        t.skipped.len(),
        3,
        "only the nested repos are skipped: {}",
        t.json
    );
    assert_paths(
        &p,
        &t.hash,
        &["top.txt", "untracked.txt"],
        &[
            "nested-commit/f.txt",
            "gitfile-sub/h.txt",
            "deep/inner/nested-fresh/g.txt",
        ],
    );
    // Twice: the second run must neither change anything.
    assert_eq!(p.track_json().skipped_set(), t.skipped_set());

    assert_same_snapshot(
        &before,
        &fs_snapshot(&p.path),
        "the project (incl. its .git and the nested repos)",
    );
    assert_same_snapshot(
        &sep_before,
        &fs_snapshot(&sep),
        "the nested repo's separate git dir",
    );
    let status_after: Vec<_> = [&with_commit, &fresh].iter().map(|d| state(d)).collect();
    assert_eq!(status_before, status_after);
    assert_eq!(
        gitfile_status_before,
        sb.git(Some(&p.join("gitfile-sub")), ["status", "--porcelain"])
    );
    p.assert_fsck_clean();
}

// ---------------------------------------------------------------------------
// 4. Size cap
// ---------------------------------------------------------------------------

#[test]
fn size_cap_applies_to_new_files_only() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("small.txt", filler(100, 1))
        .file("grow.bin", filler(500, 2));
    p.track_matches_git();
    let store = p.store();
    sb.git_in(&store, ["config", "rewind.maxFileSize", "1000"]);

    p.file("grow.bin", filler(5000, 3)) // already in the previous snapshot: stays
        .file("big.bin", filler(5000, 4)) // new and too large
        .file("dir/big2.bin", filler(1001, 5)) // new, one byte over
        .file("exact.bin", filler(1000, 6)) // new, exactly the cap: not "larger"
        .file("under.bin", filler(999, 7));
    let excluded = ["big.bin", "dir/big2.bin"];
    let t = p.track_matches_git_excluding(&excluded);
    t.assert_skipped("big.bin", "too_large");
    t.assert_skipped("dir/big2.bin", "too_large");
    for ok in ["grow.bin", "exact.bin", "under.bin"] {
        t.assert_not_skipped(ok);
    }
    assert_eq!(t.skipped.len(), 2, "{}", t.json);
    assert_paths(
        &p,
        &t.hash,
        &["grow.bin", "exact.bin", "under.bin", "small.txt"],
        &excluded,
    );

    // Still new (not in the previous snapshot): still left out.
    let again = p.track_matches_git_excluding(&excluded);
    assert_eq!(again.hash, t.hash);
    again.assert_skipped("big.bin", "too_large");

    // Shrunk under the cap: included; then grown again: stays.
    p.file("big.bin", filler(10, 8));
    let t2 = p.track_matches_git_excluding(&["dir/big2.bin"]);
    t2.assert_not_skipped("big.bin");
    p.file("big.bin", filler(20_000, 9));
    let t3 = p.track_matches_git_excluding(&["dir/big2.bin"]);
    t3.assert_not_skipped("big.bin");
    assert_eq!(p.store_blob(&t3.hash, "big.bin"), p.read("big.bin"));
    p.assert_fsck_clean();
}

/// r81 (2): a file over the cap that a snapshot held, deleted by a turn and brought back by its
/// undo, was left out of the next snapshot (the one before, the undo's own point, lacked it), so
/// a later turn's overwrite of it could not be undone. A file a run writes from the store is
/// held, as one the snapshot before held, also after a prune (r83 (1)).
#[test]
fn a_file_over_the_cap_an_undo_brings_back_stays_in() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a", "a\n").file("f", filler(1000, 1));
    p.track_matches_git();
    sb.git_in(&p.store(), ["config", "rewind.maxFileSize", "4000"]);
    let kept = filler(9000, 2);
    p.file("f", kept.clone());
    p.track_matches_git().assert_not_skipped("f");
    for (turn, edit) in [("1", None), ("2", Some(filler(9000, 3)))] {
        p.rewind(["turn", "begin", "--session", "s", "--turn", turn])
            .assert_success();
        match edit {
            None => fs::remove_file(p.path.join("f")).unwrap(),
            Some(data) => {
                p.file("f", data);
            }
        }
        p.rewind(["turn", "end", "--session", "s", "--turn", turn])
            .assert_success();
        p.file("a", format!("a {turn}\n")); // the undo point is a snapshot of its own
        p.rewind(["undo", "--session", "s", "--last"])
            .assert_success();
        assert_eq!(p.read("f"), kept, "turn {turn}'s undo");
        // r83 (1): the hourly prune, with nothing expired, removed the tree that says so.
        let later = (chrono::Utc::now() + chrono::Duration::hours(2)).to_rfc3339();
        let pruned = p
            .rewind_command(["prune"])
            .env("REWIND_NOW", later)
            .output();
        assert!(pruned.unwrap().status.success());
        p.track_matches_git().assert_not_skipped("f");
    }
}

#[test]
fn default_size_cap_is_two_mib() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("huge.bin", filler(2 * 1024 * 1024 + 1, 1))
        .file("fine.bin", filler(2_000_000, 2))
        .file("a.txt", "a\n");
    let t = p.track_matches_git_excluding(&["huge.bin"]);
    t.assert_skipped("huge.bin", "too_large");
    t.assert_not_skipped("fine.bin");
    p.assert_fsck_clean();
}

// ---------------------------------------------------------------------------
// 5. Successive snapshots
// ---------------------------------------------------------------------------

#[test]
fn successive_snapshots_follow_changes() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n")
        .file("b.txt", "b\n")
        .file("x", "x is a file\n")
        .file("s/t.txt", "t\n");
    let first = p.track_matches_git().hash;
    assert_eq!(p.track(), first, "repeated track must give the same id");
    assert_eq!(p.track(), first);

    /// Applies `change`, tracks, checks against git and that the id changed.
    fn step(p: &TestProject, prev: &mut String, what: &str, change: impl FnOnce()) {
        change();
        let id = p.track_matches_git().hash;
        assert_ne!(&id, prev, "the id must change after: {what}");
        *prev = id;
    }
    let prev = &mut first.clone();
    step(&p, prev, "modify", || {
        p.file("a.txt", "a modified, longer\n");
    });
    step(&p, prev, "delete", || {
        p.remove("b.txt");
    });
    step(&p, prev, "chmod +x", || {
        p.chmod("a.txt", 0o755);
    });
    step(&p, prev, "chmod -x", || {
        p.chmod("a.txt", 0o644);
    });
    step(&p, prev, "chmod u+x only", || {
        p.chmod("a.txt", 0o744);
    });
    let same = p.chmod("a.txt", 0o755).track_matches_git().hash;
    assert_eq!(&same, prev, "0744 -> 0755 is no change for git");
    step(&p, prev, "chmod 0755 -> 0645", || {
        p.chmod("a.txt", 0o645);
    });
    step(&p, prev, "file -> dir", || {
        p.remove("x").file("x/inner.txt", "inner\n");
    });
    step(&p, prev, "dir -> file", || {
        p.remove("x").file("x", "x is a file again\n");
    });
    step(&p, prev, "file -> symlink", || {
        p.remove("s/t.txt").symlink("s/t.txt", "../a.txt");
    });
    step(&p, prev, "symlink retarget", || {
        p.remove("s/t.txt").symlink("s/t.txt", "../x");
    });
    step(&p, prev, "new file in new dir", || {
        p.file("n/e/w.txt", "new\n");
    });
    step(&p, prev, "remove a whole dir", || {
        p.remove("n");
    });
    // Back to the original content: the original id again.
    p.remove("s/t.txt")
        .file("s/t.txt", "t\n")
        .file("a.txt", "a\n")
        .file("b.txt", "b\n")
        .file("x", "x is a file\n");
    assert_eq!(p.track_matches_git().hash, first);
    p.assert_fsck_clean();
}

// ---------------------------------------------------------------------------
// 6. Racy git
// ---------------------------------------------------------------------------

#[test]
fn same_size_rewrite_within_the_same_second_is_seen() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("other.txt", "other\n");
    for i in 0..6u8 {
        p.file("racy.txt", format!("content {i} A\n"));
        let a = p.track_matches_git().hash;
        p.file("racy.txt", format!("content {i} B\n")); // same size, immediately
        let b = p.track_matches_git().hash;
        assert_ne!(a, b, "iteration {i}: same-size rewrite not seen");
        assert_eq!(p.store_blob(&b, "racy.txt"), p.read("racy.txt"));
    }
    p.assert_fsck_clean();
}

#[test]
fn same_size_rewrite_with_restored_mtime_is_seen() {
    // Like an editor or tool that preserves mtime: only ctime changes.
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("other.txt", "other\n");
    for i in 0..4u8 {
        p.file("racy.txt", format!("content {i} A\n"));
        let mtime = fs::metadata(p.join("racy.txt"))
            .unwrap()
            .modified()
            .unwrap();
        let a = p.track_matches_git().hash;
        std::thread::sleep(Duration::from_millis(300 * (i as u64 % 2)));
        p.file("racy.txt", format!("content {i} B\n"));
        fs::File::options()
            .write(true)
            .open(p.join("racy.txt"))
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        let b = p.track_matches_git().hash;
        assert_ne!(
            a, b,
            "iteration {i}: same-size rewrite with restored mtime not seen"
        );
    }
    p.assert_fsck_clean();
}

// ---------------------------------------------------------------------------
// 7. Hostile GIT_* environment
// ---------------------------------------------------------------------------

#[test]
fn git_environment_variables_are_ignored() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.git_init();
    p.file("committed.txt", "c\n")
        .file(".gitignore", "*.log\n")
        .commit_all("init");
    p.file("untracked.txt", "u\n")
        .file("ignored.log", "i\n")
        .file("committed.txt", "changed\n");
    let store_plain = p.store();

    let git_dir = p.join(".git");
    let before = fs_snapshot(&git_dir);
    let index_before = fs::read(git_dir.join("index")).unwrap();
    let hostile = |args: &[&str]| {
        let mut cmd = p.rewind_command(args);
        cmd.env("GIT_DIR", &git_dir)
            .env("GIT_WORK_TREE", &p.path)
            .env("GIT_INDEX_FILE", git_dir.join("index"))
            .env("GIT_OBJECT_DIRECTORY", git_dir.join("objects"))
            .env("GIT_ALTERNATE_OBJECT_DIRECTORIES", git_dir.join("objects"))
            .env("GIT_COMMON_DIR", &git_dir)
            .current_dir(&p.path);
        let run = run_with_deadline(&mut cmd, DEFAULT_DEADLINE);
        assert_no_panic(&run);
        run.assert_success();
        run
    };
    let t = Tracked::parse(&hostile(&["--json", "track"]).stdout);
    let path_run = hostile(&["path"]);
    assert_eq!(
        Path::new(path_run.stdout.trim_end()),
        store_plain,
        "`rewind path` must ignore GIT_DIR & co."
    );
    let t2 = Tracked::parse(&hostile(&["--json", "track"]).stdout);
    assert_eq!(t.hash, t2.hash);

    assert_same_snapshot(&before, &fs_snapshot(&git_dir), "the project's .git");
    assert_eq!(
        index_before,
        fs::read(git_dir.join("index")).unwrap(),
        "the project's index"
    );
    // The tree went to the store, not to the project's object database.
    assert_eq!(t.hash, p.git_tree().id);
    assert_tree_complete(&sb, &store_plain, &t.hash);
    assert!(
        !sb.git_run(Some(&p.path), ["cat-file", "-e", &t.hash])
            .status
            .success(),
        "the snapshot tree was written into the project's own repository"
    );
    // And a normal run agrees.
    assert_eq!(p.track_matches_git().hash, t.hash);
    p.assert_fsck_clean();
}

// ---------------------------------------------------------------------------
// 8. Concurrency
// ---------------------------------------------------------------------------

#[test]
fn concurrent_tracks_agree() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    for i in 0..300 {
        p.file(format!("d{}/f{i}.txt", i % 17), format!("file {i}\n"));
    }
    p.exec("run.sh", "#!/bin/sh\n").symlink("l", "run.sh");
    // Fresh data dir: they also race on creating the store. The gate makes
    // them start within a millisecond or so of each other.
    assert!(!sb.data_dir.exists());
    let mut gate = StartGate::new(&sb, "gate");
    let children: Vec<_> = (0..8)
        .map(|_| {
            spawn_piped(&mut sb.rewind_command_gated(
                &gate,
                [OsStr::new("-C"), p.path.as_os_str(), OsStr::new("track")],
            ))
        })
        .collect();
    gate.open(8, Duration::from_millis(300));
    let runs: Vec<Run> = children
        .into_iter()
        .map(|c| finish(c, DEFAULT_DEADLINE, "concurrent rewind track"))
        .collect();
    let want = p.git_tree().id;
    for run in &runs {
        assert_no_panic(run);
        run.assert_success();
        assert_eq!(
            run.stdout.trim(),
            want,
            "concurrent track gave a wrong id: {run}"
        );
    }
    assert_tree_complete(&sb, &p.store(), &want);
    assert_eq!(p.track(), want);
    p.assert_fsck_clean();
}

// ---------------------------------------------------------------------------
// 9. kill -9 at random moments
// ---------------------------------------------------------------------------

#[test]
fn survives_kill_9_at_random_moments() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    let path_of = |i: u64| format!("dir{:02}/sub{}/file{i}.txt", i % 50, i % 3);
    for i in 0..3000 {
        p.file(
            path_of(i),
            filler(200 + (i % 300) as usize, (i % 251) as u8),
        );
    }
    let mut rng = XorShift::from_time();
    let change_some = |rng: &mut XorShift, round: u64| {
        for _ in 0..150 {
            let i = rng.below(3000);
            p.file(
                path_of(i),
                filler(100 + rng.below(400) as usize, round as u8),
            );
        }
        p.file(format!("added/round{round}.txt"), "new\n");
    };
    let mut finished = 0;
    let mut max_delay = 50;
    let mut last_finished = true;
    for round in 0..20u64 {
        // Rounds 0..12 hit the first snapshot (store creation, first blobs).
        // Then an uninterrupted run checks the recovery and times an
        // incremental run; later rounds change 150 files (unless the previous
        // run was killed: then it is retried) and are killed anywhere in such
        // a run (some late, during tree/index writing, some not at all).
        if round == 12 {
            p.track_matches_git();
            change_some(&mut rng, 100);
            let start = Instant::now();
            p.track();
            max_delay = (start.elapsed().as_millis() as u64 * 13 / 10).max(20);
            eprintln!(
                "incremental track: {:?}; kills within {max_delay} ms",
                start.elapsed()
            );
        }
        if round >= 12 && last_finished {
            change_some(&mut rng, round);
        }
        let mut child = p
            .rewind_command(["track"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(rng.below(max_delay + 1)));
        let _ = child.kill(); // SIGKILL
        let status = child.wait().unwrap();
        assert_ne!(status.code(), Some(101), "round {round}: rewind panicked");
        last_finished = status.success();
        if last_finished {
            finished += 1;
        }
    }
    eprintln!("{finished}/20 runs finished before the kill");
    let t = p.track_matches_git();
    assert_eq!(p.track(), t.hash);
    p.assert_fsck_clean();
}

// ---------------------------------------------------------------------------
// 10. Special files
// ---------------------------------------------------------------------------

#[test]
fn fifos_and_sockets_are_skipped_without_hanging() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n")
        .fifo("pipe")
        .fifo("sub/deeper-pipe")
        .file("sub/b.txt", "b\n");
    let _listener = std::os::unix::net::UnixListener::bind(p.join("sock")).unwrap();
    assert!(p.join("sock").symlink_metadata().is_ok());

    let start = Instant::now();
    let run = run_with_deadline(
        &mut p.rewind_command(["--json", "track"]),
        Duration::from_secs(20),
    );
    assert_no_panic(&run);
    run.assert_success();
    assert!(start.elapsed() < Duration::from_secs(20));
    let t = Tracked::parse(&run.stdout);
    assert_eq!(t.hash, p.git_tree().id);
    for s in ["pipe", "sub/deeper-pipe", "sock"] {
        t.assert_skipped(s, "special_file");
    }
    assert_eq!(t.skipped.len(), 3, "{}", t.json);
    assert_eq!(t.files, 2);
    p.assert_fsck_clean();
}

// ---------------------------------------------------------------------------
// 11. Errors
// ---------------------------------------------------------------------------

fn assert_error(run: &Run, code: i32) {
    assert_no_panic(run);
    assert_eq!(run.code(), Some(code), "{run}");
    assert!(
        !run.stderr.trim().is_empty(),
        "an error message is expected on stderr: {run}"
    );
}

#[test]
fn errors_have_exit_codes_and_messages() {
    let sb = Sandbox::new();
    let missing = sb.root.join("does-not-exist");

    let run = sb.run_rewind_in(&missing, ["track"]);
    assert_error(&run, 1);
    assert_eq!(
        run.stderr.trim().lines().count(),
        1,
        "one-line message expected: {run}"
    );
    assert!(
        run.stderr.contains("does-not-exist"),
        "message must name the path: {run}"
    );

    let run = sb.run_rewind_in(&missing, ["--json", "track"]);
    assert_error(&run, 1);
    let v: Value = serde_json::from_str(run.stdout.trim())
        .unwrap_or_else(|e| panic!("no JSON error ({e}): {run}"));
    assert!(
        v["error"]["code"].as_str().is_some_and(|c| !c.is_empty()),
        "{v}"
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("does-not-exist")),
        "{v}"
    );

    assert_error(&sb.run_rewind_in(&missing, ["path"]), 1);

    let file = sb.root.join("regular-file");
    fs::write(&file, "x").unwrap();
    let run = sb.run_rewind_in(&file, ["track"]);
    assert_error(&run, 1);
    let run = sb.run_rewind_in(&file, ["--json", "track"]);
    assert_error(&run, 1);
    let v: Value = serde_json::from_str(run.stdout.trim())
        .unwrap_or_else(|e| panic!("no JSON error ({e}): {run}"));
    assert!(v["error"]["code"].is_string(), "{v}");

    // A data dir that cannot be created.
    let p = sb.project("proj");
    p.file("a.txt", "a\n");
    let mut cmd = sb.rewind_command_no_data_dir([
        OsStr::new("--data-dir"),
        file.join("sub").as_os_str(),
        OsStr::new("-C"),
        p.path.as_os_str(),
        OsStr::new("track"),
    ]);
    let run = run_with_deadline(&mut cmd, DEFAULT_DEADLINE);
    assert_error(&run, 1);

    // Usage errors.
    assert_error(&sb.run_rewind(["no-such-subcommand"]), 2);
    assert_error(&sb.run_rewind(["--no-such-flag", "track"]), 2);
}

// ---------------------------------------------------------------------------
// 12. The store
// ---------------------------------------------------------------------------

#[test]
fn store_is_a_configured_bare_repo_per_project() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n");
    let id = p.track();
    let store = p.store();
    assert!(store.is_absolute(), "{}", store.display());
    assert!(store.is_dir(), "{} must exist", store.display());
    assert!(
        fs::canonicalize(&store)
            .unwrap()
            .starts_with(fs::canonicalize(&sb.data_dir).unwrap()),
        "the store {} must live in the data dir",
        store.display()
    );
    assert!(
        !store.starts_with(&p.path),
        "the store must not be inside the project"
    );
    assert_eq!(
        sb.git_in(&store, ["rev-parse", "--is-bare-repository"])
            .trim(),
        "true"
    );
    let cfg = |key: &str| {
        sb.git_in(&store, ["config", "--get", key])
            .trim()
            .to_string()
    };
    assert_eq!(
        cfg("rewind.worktree"),
        fs::canonicalize(&p.path).unwrap().to_str().unwrap()
    );
    assert_eq!(cfg("core.bare"), "true");
    assert_eq!(cfg("core.autocrlf"), "false");
    assert_eq!(cfg("gc.auto"), "0");
    assert_eq!(cfg("core.logAllRefUpdates"), "always");
    assert_eq!(sb.git_in(&store, ["cat-file", "-t", &id]).trim(), "tree");

    // Another project: another store.
    let q = sb.project("other");
    q.file("a.txt", "a\n");
    q.track();
    assert_ne!(q.store(), store);
    // The same project through a symlink: the same store.
    let link = sb.root.join("proj-link");
    std::os::unix::fs::symlink(&p.path, &link).unwrap();
    let via_link = sb.run_rewind_in(&link, ["path"]);
    via_link.assert_success();
    assert_eq!(Path::new(via_link.stdout.trim_end()), store);
    let via_link = sb.run_rewind_in(&link, ["track"]);
    via_link.assert_success();
    assert_eq!(via_link.stdout.trim(), id);
    p.assert_fsck_clean();
}

#[test]
fn data_dir_resolution_order() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n");
    let store_under = |env: &[(&str, &Path)], expected_root: &Path| {
        for sub in [&["track"][..], &["path"][..]] {
            let mut cmd = sb.rewind_command_no_data_dir([OsStr::new("-C"), p.path.as_os_str()]);
            cmd.args(sub);
            for (k, v) in env {
                cmd.env(k, v);
            }
            let run = run_with_deadline(&mut cmd, DEFAULT_DEADLINE);
            assert_no_panic(&run);
            run.assert_success();
            if sub[0] == "path" {
                let store = Path::new(run.stdout.trim_end()).to_path_buf();
                assert!(
                    store.starts_with(expected_root),
                    "store {} should be under {}",
                    store.display(),
                    expected_root.display()
                );
                assert!(store.is_dir());
            }
        }
    };
    let rewind_env = sb.root.join("rewind-env");
    let xdg_data = sb.root.join("xdg-data");
    store_under(
        &[
            ("REWIND_DATA_DIR", &rewind_env),
            ("XDG_DATA_HOME", &xdg_data),
        ],
        &rewind_env,
    );
    store_under(&[("XDG_DATA_HOME", &xdg_data)], &xdg_data.join("rewind"));
    store_under(&[], &sb.home.join(".local/share/rewind"));
    // --data-dir wins over everything.
    let mut cmd = sb.rewind_command([OsStr::new("-C"), p.path.as_os_str(), OsStr::new("path")]);
    cmd.env("REWIND_DATA_DIR", &rewind_env)
        .env("XDG_DATA_HOME", &xdg_data);
    let run = run_with_deadline(&mut cmd, DEFAULT_DEADLINE);
    run.assert_success();
    assert!(
        Path::new(run.stdout.trim_end()).starts_with(&sb.data_dir),
        "{run}"
    );
}

// ---------------------------------------------------------------------------
// 13. The stat cache agrees with git
// ---------------------------------------------------------------------------

#[test]
fn store_index_is_a_valid_stat_cache() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n")
        .exec("bin/x.sh", "#!/bin/sh\n")
        .symlink("link", "a.txt")
        .file("dir/sub/deep.txt", "deep\n")
        .file("naïve.txt", "n\n");
    let check = |when: &str| {
        let store = p.store();
        p.assert_stat_cache_agrees(when);
        let mut cmd = sb.git_command(Some(&p.path));
        cmd.arg("--git-dir")
            .arg(&store)
            .arg("--work-tree")
            .arg(&p.path)
            .args(["diff-files", "--quiet"]);
        assert_eq!(
            run_with_deadline(&mut cmd, DEFAULT_DEADLINE).code(),
            Some(0),
            "{when}: diff-files --quiet"
        );
    };
    let t = p.track_matches_git();
    check("after the first track");
    // The index must describe the snapshot (read-only check: ls-files vs ls-tree).
    let staged = p.store_git(["ls-files", "-s"]);
    let staged: Vec<String> = staged.lines().map(|l| l.replace(" 0\t", " ")).collect();
    let tree = p.store_git(["ls-tree", "-r", &t.hash]);
    let tree: Vec<String> = tree
        .lines()
        .map(|l| l.replace(" blob ", " ").replace('\t', " "))
        .collect();
    assert_eq!(
        staged, tree,
        "the store's index must hold the last snapshot"
    );
    p.file("a.txt", "changed\n")
        .remove("dir/sub/deep.txt")
        .file("new.txt", "new\n")
        .chmod("bin/x.sh", 0o644);
    p.track_matches_git();
    check("after a second track");
    std::thread::sleep(Duration::from_millis(1100));
    p.track_matches_git();
    check("after a track with nothing changed");
    p.assert_fsck_clean();
}

// ---------------------------------------------------------------------------
// More edge cases
// ---------------------------------------------------------------------------

#[test]
fn linked_worktree_project_uses_common_info_exclude_and_its_own_index() {
    let sb = Sandbox::new();
    let main = sb.project("main");
    main.git_init();
    main.file("a.txt", "a\n")
        .file(".gitignore", "*.log\n")
        .commit_all("init");
    let wt_path = sb.root.join("wt");
    main.git([
        OsStr::new("worktree"),
        OsStr::new("add"),
        OsStr::new("-q"),
        wt_path.as_os_str(),
    ]);
    fs::write(main.join(".git/info/exclude"), "*.secret\n").unwrap();
    let wt = sb.project_at(&wt_path);
    assert!(wt.join(".git").is_file());
    wt.file(
        "tracked-in-wt.log",
        "tracked by the worktree's index only\n",
    )
    .file("untracked.log", "ignored\n")
    .file("x.secret", "ignored via the common info/exclude\n")
    .file("b.txt", "b\n");
    wt.git(["add", "-f", "tracked-in-wt.log"]);

    let before = fs_snapshot(&main.join(".git"));
    let t = wt.track_matches_git();
    assert_same_snapshot(
        &before,
        &fs_snapshot(&main.join(".git")),
        "the main repo's .git",
    );
    assert!(
        t.skipped.is_empty(),
        "the project's own .git file is not a nested repo: {}",
        t.json
    );
    assert_paths(
        &wt,
        &t.hash,
        &["a.txt", "b.txt", "tracked-in-wt.log", ".gitignore"],
        &["untracked.log", "x.secret", ".git"],
    );
    wt.assert_fsck_clean();
}

#[test]
fn empty_project_is_the_empty_tree() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.dir("empty/dirs/only").dir("more");
    let t = p.track_matches_git();
    assert_eq!(t.hash, empty_tree(&sb));
    assert_eq!(t.files, 0);
    assert!(t.skipped.is_empty());
    p.assert_fsck_clean();
}

#[test]
fn file_larger_than_the_read_buffer_is_stored_exactly() {
    // Above 32 MiB rewind streams files instead of reading them whole.
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("small.txt", "s\n");
    p.track();
    p.store_git(["config", "rewind.maxFileSize", "100000000"]);
    let mut big = filler(33 * 1024 * 1024 + 7, 3);
    big[12345] = 0; // some binary
    p.file("big.bin", &big);
    let t = p.track_matches_git();
    t.assert_not_skipped("big.bin");
    // Unchanged: reused from the stat cache, same id.
    assert_eq!(p.track(), t.hash);
    p.assert_fsck_clean();
}

#[test]
fn project_defaults_to_the_current_directory() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n").file("sub/b.txt", "b\n");
    let id = p.track();
    let mut cmd = sb.rewind_command(["track"]);
    cmd.current_dir(&p.path);
    let run = run_with_deadline(&mut cmd, DEFAULT_DEADLINE);
    assert_no_panic(&run);
    run.assert_success();
    assert_eq!(
        run.stdout.trim(),
        id,
        "without -C the project is the current directory"
    );
    let mut cmd = sb.rewind_command(["path"]);
    cmd.current_dir(&p.path);
    let run = run_with_deadline(&mut cmd, DEFAULT_DEADLINE);
    run.assert_success();
    assert_eq!(Path::new(run.stdout.trim_end()), p.store());
}

/// A damaged stat cache is never trusted: a flipped byte in an entry's cached object id (the
/// checksum catches it), a truncated file and garbage are all rebuilt, and the snapshot still
/// equals git's tree.
#[test]
fn damaged_index_is_rebuilt_and_the_snapshot_stays_right() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    for i in 0..50 {
        p.file(format!("d{}/f{i}.txt", i % 5), format!("file {i}\n"));
    }
    p.track_matches_git();
    let index = p.store().join("index");
    let pristine = fs::read(&index).unwrap();

    // Flip a byte inside the first entry's object id (header 12 bytes + 40 bytes of stat):
    // the cache would then claim a wrong blob for an unchanged file.
    let mut flipped = pristine.clone();
    flipped[12 + 40 + 5] ^= 0x55;
    let damaged: [(&str, Vec<u8>); 3] = [
        ("flipped id byte", flipped),
        ("truncated", pristine[..pristine.len() / 2].to_vec()),
        ("garbage", b"this is not an index at all".repeat(100)),
    ];
    for (what, bytes) in damaged {
        fs::write(&index, &bytes).unwrap();
        let tracked = p.track_matches_git();
        assert!(!tracked.hash.is_empty(), "{what}");
        assert_ne!(
            fs::read(&index).unwrap(),
            bytes,
            "{what}: the index was rewritten"
        );
        p.assert_fsck_clean();
    }
}
