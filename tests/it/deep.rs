//! Deep directory trees (issue 12, item 8): thousands of nested levels must snapshot, diff and
//! undo like git, without a stack overflow. The paths are longer than PATH_MAX, so the tree is
//! made (and read back) through directory descriptors.

use crate::common::*;
use rustix::fs::{Mode, OFlags};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::Command;

/// git itself handles this depth with one-letter names (a 4,004-byte path).
const LEVELS: usize = 2000;

/// Open directory `d/d/...` (`depth` levels) below `root`, creating missing levels.
fn open_depth(root: &Path, depth: usize) -> OwnedFd {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let mut fd = rustix::fs::open(root, flags, Mode::empty()).expect("open project");
    for _ in 0..depth {
        match rustix::fs::mkdirat(&fd, "d", Mode::from_raw_mode(0o755)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => panic!("mkdir at depth: {e}"),
        }
        fd = rustix::fs::openat(&fd, "d", flags, Mode::empty()).expect("open level");
    }
    fd
}

/// Write `content` to `name` at `depth` levels below `root`.
fn write_at(root: &Path, depth: usize, name: &str, content: &str) {
    let dir = open_depth(root, depth);
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(&dir, name, flags, Mode::from_raw_mode(0o644)).expect("create");
    rustix::io::write(&fd, content.as_bytes()).expect("write");
}

/// Read `name` at `depth` levels below `root`.
fn read_at(root: &Path, depth: usize, name: &str) -> Vec<u8> {
    let dir = open_depth(root, depth);
    let fd = rustix::fs::openat(&dir, name, OFlags::RDONLY, Mode::empty()).expect("open file");
    let mut file = std::fs::File::from(fd);
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut file, &mut out).expect("read");
    out
}

/// A `LEVELS`-deep chain `d/d/...` with files at several depths, and a wide sibling.
fn deep_project<'a>(sb: &'a Sandbox, name: &str) -> TestProject<'a> {
    let p = sb.project(name);
    p.file("top.txt", "top\n").file("side/a.txt", "a\n");
    for depth in [1, 2, 700, 1000, 1500, LEVELS] {
        write_at(&p.path, depth, "f", &format!("file at {depth}\n"));
    }
    write_at(&p.path, LEVELS, "leaf", "bottom\n");
    p
}

#[test]
fn deep_tree_snapshots_like_git_without_stack_overflow() {
    let sb = Sandbox::new();
    let p = deep_project(&sb, "proj");
    let first = p.track_matches_git();
    // From the stat cache: a change deep down, a new file at the bottom, one removed midway.
    write_at(&p.path, 1500, "f", "changed\n");
    write_at(&p.path, LEVELS - 1, "new", "new\n");
    let mid = open_depth(&p.path, 700);
    rustix::fs::unlinkat(&mid, "f", rustix::fs::AtFlags::empty()).expect("unlink");
    let second = p.track_matches_git();
    assert_ne!(first.hash, second.hash);
    // Nothing changed: the same tree, from the cache.
    assert_eq!(p.track_matches_git().hash, second.hash);
    p.assert_fsck_clean();
}

#[test]
fn deep_snapshots_diff_and_patch_like_git() {
    let sb = Sandbox::new();
    let p = deep_project(&sb, "proj");
    let before = p.track();
    write_at(&p.path, 1000, "f", "edited\nlines\n");
    write_at(&p.path, LEVELS, "added", "added\n");
    let after = p.track();
    let store = p.store();

    let diff = p.rewind(["diff", &before, &after]);
    diff.assert_success();
    let git = sb.git_in_run(
        &store,
        [
            "-c",
            "core.quotePath=false",
            "diff",
            "--no-ext-diff",
            &before,
            &after,
        ],
    );
    git.assert_success();
    assert_eq!(
        diff.stdout_bytes, git.stdout_bytes,
        "rewind diff vs git diff"
    );

    // `patch` diffs against the project now, which is `after`.
    let patch = p.rewind(["patch", &before]);
    patch.assert_success();
    let names = sb.git_in_run(&store, ["diff", "--name-only", &before, &after]);
    names.assert_success();
    assert_eq!(
        patch.stdout, names.stdout,
        "rewind patch vs git diff --name-only"
    );
}

#[test]
fn deep_tree_turn_end_and_undo_put_it_back() {
    let sb = Sandbox::new();
    let p = deep_project(&sb, "proj");
    p.rewind(["turn", "begin", "--session", "s", "--turn", "1"])
        .assert_success();
    write_at(&p.path, 1500, "f", "the agent's edit\n");
    write_at(&p.path, LEVELS, "made", "by the agent\n");
    let end = p.rewind(["turn", "end", "--session", "s", "--turn", "1"]);
    end.assert_success();
    assert_eq!(end.stdout.lines().count(), 2, "two changed files: {end}");
    p.rewind(["undo", "--session", "s"]).assert_success();
    assert_eq!(read_at(&p.path, 1500, "f"), b"file at 1500\n");
    let bottom = open_depth(&p.path, LEVELS);
    assert_eq!(
        rustix::fs::statat(&bottom, "made", rustix::fs::AtFlags::SYMLINK_NOFOLLOW).err(),
        Some(rustix::io::Errno::NOENT),
        "undo removes the agent's new file"
    );
}

/// Deeper than git can add from a work tree (paths beyond PATH_MAX) but within its
/// `core.maxTreeDepth` (4,096), so git can still read and diff the trees.
const BEYOND_PATH_MAX: usize = 4000;

#[test]
fn files_beyond_path_max_are_read_and_diffed_like_git() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    for depth in [10, 2100, 3000, BEYOND_PATH_MAX] {
        write_at(&p.path, depth, "f", &format!("file at {depth}\n"));
    }
    write_at(&p.path, 3000, ".gitignore", "*.tmp\n");
    write_at(&p.path, 3500, "scratch.tmp", "ignored\n");
    let before = p.track_json();
    assert!(
        before.skipped.is_empty(),
        "nothing left out: {}",
        before.json
    );
    let path = |depth: usize, name: &str| format!("{}{name}", "d/".repeat(depth));
    let want: std::collections::BTreeSet<String> = [10, 2100, 3000, BEYOND_PATH_MAX]
        .iter()
        .map(|&depth| path(depth, "f"))
        .chain([path(3000, ".gitignore")])
        .collect();
    // git reads trees this deep once its depth limit is raised.
    let git = |args: &[&str]| {
        let run = sb.git_in_run(
            &p.store(),
            ["-c", "core.maxTreeDepth=10000"].iter().chain(args),
        );
        run.assert_success();
        run.stdout_bytes
    };
    let listed = git(&["ls-tree", "-r", "-z", "--name-only", &before.hash]);
    let listed: std::collections::BTreeSet<String> = listed
        .split(|&b| b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    assert_eq!(listed, want);
    let blob = format!("{}:{}", before.hash, path(3000, "f"));
    assert_eq!(git(&["cat-file", "blob", &blob]), b"file at 3000\n");

    write_at(&p.path, 3000, "f", "changed\n");
    write_at(&p.path, BEYOND_PATH_MAX, "g", "new\n");
    let after = p.track_json();
    assert_eq!(
        p.track(),
        after.hash,
        "no change: the same tree from the cache"
    );
    let diff = p.rewind(["diff", &before.hash, &after.hash]);
    diff.assert_success();
    let want = git(&[
        "-c",
        "core.quotePath=false",
        "diff",
        "--no-ext-diff",
        &before.hash,
        &after.hash,
    ]);
    assert_eq!(diff.stdout_bytes, want, "rewind diff vs git diff");
}

#[test]
fn deep_tree_with_a_sibling_at_every_level_fits_a_low_descriptor_limit() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    // Walking down `d/`, the siblings `a/` and `z/` of every level are still to be opened.
    let levels = 1000;
    let mut dir = open_depth(&p.path, 0);
    for depth in 0..levels {
        for sibling in ["a", "z"] {
            rustix::fs::mkdirat(&dir, sibling, Mode::from_raw_mode(0o755)).expect("mkdir");
            let at = rustix::fs::openat(&dir, sibling, OFlags::RDONLY, Mode::empty())
                .expect("open sibling");
            let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::CLOEXEC;
            let fd =
                rustix::fs::openat(&at, "f", flags, Mode::from_raw_mode(0o644)).expect("create");
            rustix::io::write(&fd, format!("{depth}\n").as_bytes()).expect("write");
        }
        rustix::fs::mkdirat(&dir, "d", Mode::from_raw_mode(0o755)).expect("mkdir");
        dir = rustix::fs::openat(&dir, "d", OFlags::RDONLY, Mode::empty()).expect("open d");
    }
    // rewind under `ulimit -n 256`, on one thread (so no other thread takes the pending
    // siblings early): one descriptor per level would not fit.
    let rewind = p.rewind_command(["--json", "track"]);
    let mut limited = Command::new("sh");
    limited
        .arg("-c")
        .arg("ulimit -n 256 && exec \"$0\" \"$@\"")
        .arg(rewind.get_program())
        .args(rewind.get_args())
        .env_clear()
        .envs(rewind.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .env("RAYON_NUM_THREADS", "1");
    if let Some(dir) = rewind.get_current_dir() {
        limited.current_dir(dir);
    }
    let run = run_with_deadline(&mut limited, std::time::Duration::from_secs(300));
    run.assert_success();
    let tracked = Tracked::parse(&run.stdout);
    assert!(
        tracked.skipped.is_empty(),
        "nothing left out: {}",
        tracked.json
    );
    assert_eq!(tracked.hash, p.git_tree().id, "the tree equals git's");
}
