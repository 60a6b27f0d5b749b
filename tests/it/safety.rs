//! Never lose a byte, round two: one test per way a hostile session lost data (issue 12), each
//! named after the bug. Every test here failed on the build before the fix.

use crate::common::*;
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// `rewind -C <project> ARGS`: never a panic.
fn rw(p: &TestProject, args: &[&str]) -> Run {
    let run = run_with_deadline(&mut p.rewind_command(args), DEFAULT_DEADLINE);
    assert_no_panic(&run);
    run
}

/// `rewind -C <project> --json ARGS`: must succeed.
fn rwj(p: &TestProject, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let run = rw(p, &all);
    run.assert_success();
    one_json(&run)
}

fn begin(p: &TestProject, turn: &str) -> Value {
    rwj(
        p,
        &["turn", "begin", "--session=s", &format!("--turn={turn}")],
    )
}

fn end(p: &TestProject, turn: &str) -> Value {
    rwj(
        p,
        &["turn", "end", "--session=s", &format!("--turn={turn}")],
    )
}

/// The undo id a restore/revert/undo printed must bring back `path` with `content`.
fn assert_in_undo(p: &TestProject, outcome: &Value, path: &str, content: &[u8]) {
    let undo = outcome["undo"].as_str().expect("an undo id");
    assert_eq!(p.store_blob(undo, path), content, "{path} in undo {undo}");
}

// ---------------------------------------------------------------------------
// 1. Files the target snapshot could not see are never deleted
// ---------------------------------------------------------------------------

#[test]
fn undo_keeps_a_file_that_was_ignored_at_the_before_point() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file(".gitignore", ".env\n").file(".env", "SECRET=1\n");
    begin(&p, "1");
    p.file(".gitignore", "*.o\n"); // .env is no longer ignored: the "after" holds it
    let e = end(&p, "1");
    assert!(
        e["files"].to_string().contains(".env"),
        "the turn shows .env as added: {e}"
    );
    let o = rwj(&p, &["undo", "--session=s"]);
    assert_eq!(p.read(".env"), b"SECRET=1\n", "{o}");
    assert_eq!(strings(&o["kept"]), vec![".env"], "{o}");
    assert_eq!(p.read(".gitignore"), b".env\n", "{o}");
}

#[test]
fn restore_keeps_a_file_that_was_ignored_at_the_target() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file(".gitignore", ".env\n").file(".env", "SECRET=1\n");
    let before = p.track();
    p.file(".gitignore", "*.o\n");
    p.track();
    let o = rwj(&p, &["restore", &before]);
    assert_eq!(p.read(".env"), b"SECRET=1\n", "{o}");
    assert_eq!(strings(&o["kept"]), vec![".env"], "{o}");
    assert_eq!(strings(&o["deleted"]), Vec::<String>::new(), "{o}");
}

#[test]
fn undo_keeps_a_file_added_with_git_add_force_during_the_turn() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.git_init()
        .file(".gitignore", "*.log\n")
        .file("src.txt", "x\n")
        .file("results.log", "run 1: 42\n")
        .commit_all("init");
    begin(&p, "1");
    p.git(["add", "-f", "results.log"]); // now tracked: the "after" holds it
    p.file("src.txt", "y\n");
    end(&p, "1");
    let o = rwj(&p, &["undo", "--session=s"]);
    assert_eq!(p.read("results.log"), b"run 1: 42\n", "{o}");
    assert_eq!(p.read("src.txt"), b"x\n", "{o}");
    assert_eq!(strings(&o["kept"]), vec!["results.log"], "{o}");
}

#[test]
fn undo_keeps_a_nested_repository_dissolved_during_the_turn() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    // Under `skip`, as every snapshot taken before the setting: the "before" could not see
    // inside `vendor` (under the default it holds its files: tests/it/nested.rs).
    p.store_git(["config", "rewind.nestedRepos", "skip"]);
    p.file("top.txt", "t\n")
        .file("vendor/lib.c", "int x;\n")
        .file("vendor/sub/y.c", "int y;\n");
    sb.git(Some(&p.join("vendor")), ["init", "-q"]);
    begin(&p, "1");
    fs::remove_dir_all(p.join("vendor/.git")).unwrap();
    p.file("top.txt", "u\n");
    end(&p, "1");
    let o = rwj(&p, &["undo", "--session=s"]);
    assert_eq!(p.read("vendor/lib.c"), b"int x;\n", "{o}");
    assert_eq!(p.read("vendor/sub/y.c"), b"int y;\n", "{o}");
    assert_eq!(p.read("top.txt"), b"t\n", "{o}");
    let kept = strings(&o["kept"]);
    assert_eq!(kept, vec!["vendor/lib.c", "vendor/sub/y.c"], "{o}");
}

#[test]
fn undo_keeps_a_file_that_was_too_large_at_the_before_point() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("big.bin", filler(3 << 20, 7));
    let b = begin(&p, "1");
    assert_eq!(
        b["skipped"][0]["path"], "big.bin",
        "turn begin reports it: {b}"
    );
    assert_eq!(b["skipped"][0]["reason"], "too_large", "{b}");
    p.file("big.bin", "small now\n"); // the agent overwrites it: now in the "after"
    end(&p, "1");
    let o = rwj(&p, &["undo", "--session=s"]);
    assert_eq!(p.read("big.bin"), b"small now\n", "{o}");
    assert_eq!(strings(&o["kept"]), vec!["big.bin"], "{o}");
}

#[test]
fn turn_begin_and_end_report_left_out_files() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n").file("big.bin", filler(3 << 20, 1));
    let run = rw(&p, &["turn", "begin", "--session=s", "--turn=1"]);
    run.assert_success();
    assert!(
        run.stderr.contains("big.bin") && run.stderr.contains("too large"),
        "a person is told: {run}"
    );
    p.file("huge.bin", filler(3 << 20, 2));
    let e = end(&p, "1");
    let skipped: Vec<&str> = e["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["path"].as_str().unwrap())
        .collect();
    assert_eq!(skipped, vec!["big.bin", "huge.bin"], "{e}");
    assert!(e["before"].is_string() && e["after"].is_string(), "{e}");
}

// ---------------------------------------------------------------------------
// 2. The data dir and every store are never part of a snapshot, never written or deleted
// ---------------------------------------------------------------------------

#[test]
fn data_dir_inside_the_project_is_never_snapshotted_or_touched() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n");
    let data = p.join(".rewind-data");
    let run_in = |args: &[&str]| {
        let mut cmd = sb.rewind_command_no_data_dir(["--data-dir"]);
        cmd.arg(&data).arg("-C").arg(p.join("")).args(args);
        let run = run_with_deadline(&mut cmd, DEFAULT_DEADLINE);
        assert_no_panic(&run);
        run.assert_success();
        one_json(&run)
    };
    let first = run_in(&["--json", "track"]);
    let before = first["hash"].as_str().unwrap().to_string();
    p.file("a.txt", "b\n").file("new.txt", "new\n");
    let second = run_in(&["--json", "track"]);
    let paths = p_paths(&sb, &data, second["hash"].as_str().unwrap());
    assert_eq!(
        paths,
        vec!["a.txt", "new.txt"],
        "the data dir is not snapshotted"
    );
    let store_files = fs_snapshot(&data);
    let o = run_in(&["--json", "restore", &before]);
    assert_eq!(strings(&o["deleted"]), vec!["new.txt"], "{o}");
    // The store is whole: the undo point gives new.txt back, and git agrees.
    let store = only_store(&data);
    assert_fsck_clean(&sb, &store);
    let undo = o["undo"].as_str().unwrap();
    assert_eq!(
        sb.git_in(&store, ["cat-file", "-p", &format!("{undo}:new.txt")]),
        "new\n"
    );
    for (path, entry) in store_files {
        if path.starts_with("objects") && !path.to_string_lossy().contains("tmp") {
            let now = fs_snapshot(&data);
            assert_eq!(now.get(&path), Some(&entry), "{} changed", path.display());
        }
    }
}

fn only_store(data: &Path) -> std::path::PathBuf {
    let stores: Vec<_> = fs::read_dir(data)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "git"))
        .collect();
    assert_eq!(stores.len(), 1, "{stores:?}");
    stores[0].clone()
}

fn p_paths(sb: &Sandbox, data: &Path, tree: &str) -> Vec<String> {
    ls_tree_paths(sb, &only_store(data), tree)
        .into_iter()
        .collect()
}

#[test]
fn home_as_project_is_refused_unless_allowed() {
    let sb = Sandbox::new();
    fs::write(sb.home.join("notes.txt"), "n\n").unwrap();
    for project in [sb.home.clone(), "/".into()] {
        let mut cmd = sb.rewind_command(["--json", "-C"]);
        cmd.arg(&project).arg("track");
        let run = run_with_deadline(&mut cmd, DEFAULT_DEADLINE);
        assert_eq!(run.code(), Some(1), "{run}");
        let v = one_json(&run);
        assert_eq!(v["error"]["code"], "broad_project", "{run}");
    }
    let mut cmd = sb.rewind_command(["--allow-home", "-C"]);
    cmd.arg(&sb.home).arg("track");
    run_with_deadline(&mut cmd, DEFAULT_DEADLINE).assert_success();
}

#[test]
fn restoring_home_never_touches_other_projects_stores() {
    let sb = Sandbox::new();
    // The default layout: stores under ~/.local/share/rewind, the project being ~ itself.
    let other = sb.project("other");
    other.file("o.txt", "o\n");
    let home_run = |args: &[&str]| {
        let mut cmd = sb.rewind_command_no_data_dir(["--json", "--allow-home", "-C"]);
        cmd.arg(&sb.home).args(args);
        let run = run_with_deadline(&mut cmd, DEFAULT_DEADLINE);
        assert_no_panic(&run);
        run.assert_success();
        one_json(&run)
    };
    let mut cmd = sb.rewind_command_no_data_dir(["-C"]);
    cmd.arg(other.join("")).arg("track");
    run_with_deadline(&mut cmd, DEFAULT_DEADLINE).assert_success();
    fs::write(sb.home.join("notes.txt"), "n\n").unwrap();
    let before = home_run(&["track"])["hash"].as_str().unwrap().to_string();
    let data = sb.home.join(".local/share/rewind");
    let stores = fs_snapshot(&data);
    let mut cmd = sb.rewind_command_no_data_dir(["-C"]);
    cmd.arg(other.join("")).arg("track"); // the other project's store changes now
    other.file("o.txt", "o2\n");
    run_with_deadline(&mut cmd, DEFAULT_DEADLINE).assert_success();
    let stores_after_other = fs_snapshot(&data);
    assert_ne!(stores, stores_after_other);
    home_run(&["restore", &before]);
    let now = fs_snapshot(&data);
    // (Object files, not directories: the restore's undo record is an object of the home
    // store's own, and a fan-out directory it lands in changes its mtime.)
    for (path, entry) in &stores_after_other {
        let in_objects =
            path.starts_with("objects") || path.to_string_lossy().contains("/objects/");
        if in_objects && entry.kind != 'd' {
            assert_eq!(now.get(path), Some(entry), "{} changed", path.display());
        }
    }
}

// ---------------------------------------------------------------------------
// 3, 4. Deletes never go outside the project, or remove a user's file
// ---------------------------------------------------------------------------

#[test]
fn temp_sweep_never_follows_a_symlink_the_restore_wrote() {
    let sb = Sandbox::new();
    let outside = sb.root.join("o");
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join(".rewind-backup"), "mine\n").unwrap();
    fs::write(outside.join(".rewind-link-notes"), "mine too\n").unwrap();
    let p = sb.project("proj");
    p.symlink("a", &outside);
    let s1 = p.track();
    p.remove("a");
    p.file("a/x.txt", "x\n");
    p.track();
    let o = rwj(&p, &["restore", &s1]);
    assert_eq!(
        fs::read(outside.join(".rewind-backup")).unwrap(),
        b"mine\n",
        "{o}"
    );
    assert_eq!(
        fs::read(outside.join(".rewind-link-notes")).unwrap(),
        b"mine too\n"
    );
    assert_eq!(fs::read_link(p.join("a")).unwrap(), outside);
}

#[test]
fn user_files_named_like_temp_files_are_never_removed() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("d/a.txt", "a0\n");
    let before = p.track();
    p.file("d/a.txt", "a1\n")
        .file("d/.rewind-config", "user\n")
        .file("d/.rewind-link-notes", "user\n")
        .file("d/.rewind-Kq1x9Z", "user\n");
    p.track();
    let o = rwj(&p, &["revert", &before, "--", "d/a.txt"]);
    assert_eq!(p.read("d/a.txt"), b"a0\n", "{o}");
    for name in [".rewind-config", ".rewind-link-notes", ".rewind-Kq1x9Z"] {
        assert_eq!(p.read(format!("d/{name}")), b"user\n", "{name}: {o}");
    }
}

/// `strace -o LOG -e EXPR` running rewind: a trace, or a fault or delay injected at a syscall.
fn strace_to(p: &TestProject, log: &Path, expr: &str, args: &[&str]) -> Command {
    require_tool("strace", "to inject faults and delays at syscalls");
    let mut outer = Command::new("strace");
    outer.args(["-f", "-qq", "-o"]).arg(log).args(["-e", expr]);
    wrapped(p, outer, args)
}

fn strace(p: &TestProject, inject: &str, args: &[&str]) -> Command {
    strace_to(p, Path::new("/dev/null"), inject, args)
}

/// The names in directory `dir` of `p` that start like rewind's temp files (`.rewind-`).
fn strays(p: &TestProject, dir: &str) -> Vec<String> {
    strays_in(&p.join(dir))
}

/// The names starting `.rewind-` in directory `dir`.
fn strays_in(dir: &Path) -> Vec<String> {
    let names = fs::read_dir(dir).unwrap().flatten();
    let names = names.map(|e| e.file_name().to_string_lossy().into_owned());
    names.filter(|n| n.starts_with(".rewind-")).collect()
}

/// Files `paths` of `p` written "<path> 0" (a snapshot, returned), then "<path> 1" (another),
/// and a restore of the first killed at its `syncfs`: its temp files are written, nothing is
/// renamed yet.
fn restore_killed_at_syncfs(p: &TestProject, paths: &[&str]) -> String {
    for path in paths {
        p.file(path, format!("{path} 0\n"));
    }
    let before = p.track();
    for path in paths {
        p.file(path, format!("{path} 1\n"));
    }
    p.track();
    let mut cmd = strace(p, "inject=syncfs:signal=KILL:when=1", &["restore", &before]);
    let run = run_with_deadline(&mut cmd, DEFAULT_DEADLINE);
    assert!(!run.status.success(), "the restore was killed: {run}");
    before
}

#[test]
fn temp_files_of_a_killed_restore_are_removed_by_the_next_one() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("d/.rewind-config", "user\n");
    let before = restore_killed_at_syncfs(&p, &["d/a.txt", "d/b.txt", "e/c.txt"]);
    let strays = |dir: &str| strays(&p, dir);
    assert_eq!(strays("d").len(), 3, "the kill left the temp files");
    assert_eq!(p.read("d/a.txt"), b"d/a.txt 1\n", "nothing was replaced");
    let o = rwj(&p, &["restore", &before]);
    let undo = o["undo"].as_str().unwrap();
    let recorded: Vec<String> = p
        .store_paths(undo)
        .into_iter()
        .filter(|f| f.contains("/.rewind-"))
        .collect();
    assert_eq!(
        recorded,
        vec!["d/.rewind-config"],
        "the undo point holds no temp file: {o}"
    );
    assert_eq!(p.read("d/a.txt"), b"d/a.txt 0\n", "{o}");
    assert_eq!(strays("d"), vec![".rewind-config"], "{o}");
    assert_eq!(strays("e"), Vec::<String>::new(), "{o}");
}

/// A restore killed once its temp files were staged, then a directory it wrote in moved out of
/// the project (or replaced by a symlink): the next run's sweep could not reach the temp files
/// there and said nothing (sixth hostile pass). It now warns once, naming the directory and the
/// temp files' names, and sweeps the directories it can reach.
#[test]
fn a_killed_restores_directory_moved_out_is_named_by_the_next_run() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    // (A newline in a name is quoted in the one line, as git quotes it: ninth hostile pass.)
    restore_killed_at_syncfs(&p, &["d/a.txt", "e/c.txt", "f\nl/x.txt"]);
    assert_eq!(strays(&p, "e").len(), 1, "the kill left a temp file in e");
    let moved = sb.root.join("moved-e");
    fs::rename(p.join("e"), &moved).unwrap();
    fs::rename(p.join("f\nl"), sb.root.join("moved-f")).unwrap();
    std::os::unix::fs::symlink(sb.root.join("moved-f"), p.join("f\nl")).unwrap();
    let run = run_with_deadline(&mut p.rewind_command(["track"]), DEFAULT_DEADLINE);
    assert!(run.status.success(), "{run}");
    for dir in ["e", "f\nl"] {
        let named = format!(
            "rewind: warning: a restore killed earlier wrote in {}, which is no longer a directory in the project",
            rewind::quote_path(p.join(dir).as_os_str().as_encoded_bytes())
        );
        assert!(run.stderr.contains(&named), "{dir}: {run}");
    }
    assert!(
        run.stderr.contains("was stopped before it finished"),
        "{run}"
    );
    let prefix = strays_in(&moved)[0].rsplit_once('-').unwrap().0.to_owned();
    assert!(run.stderr.contains(&format!("named {prefix}-*")), "{run}");
    assert_eq!(strays(&p, "d"), Vec::<String>::new(), "d was swept: {run}");
    assert_eq!(p.read("d/a.txt"), b"d/a.txt 1\n", "nothing was restored");
    assert_eq!(
        fs::read(moved.join("c.txt")).unwrap(),
        b"e/c.txt 1\n",
        "the moved directory is left alone"
    );
    // Said once: the journal is done with.
    let again = run_with_deadline(&mut p.rewind_command(["track"]), DEFAULT_DEADLINE);
    assert!(
        again.status.success() && !again.stderr.contains("warning"),
        "{again}"
    );
}

#[test]
fn restore_never_deletes_through_a_directory_swapped_for_a_symlink() {
    let sb = Sandbox::new();
    let outside = sb.root.join("outside");
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("x.txt"), "precious\n").unwrap();
    let p = sb.project("proj");
    p.file("keep.txt", "k\n");
    let before = p.track();
    p.file("d/x.txt", "agent\n");
    p.track();
    // The restore pauses 2 s at its first syncfs (after planning and staging, before
    // deleting); meanwhile d becomes a symlink to a directory outside the project holding the
    // same name.
    let mut cmd = strace(
        &p,
        "inject=syncfs:delay_enter=2000000:when=1",
        &["--json", "restore", &before],
    );
    let child = spawn_piped(&mut cmd);
    std::thread::sleep(Duration::from_millis(1000));
    fs::rename(p.join("d"), sb.root.join("d-moved")).unwrap();
    std::os::unix::fs::symlink(&outside, p.join("d")).unwrap();
    let run = finish(child, DEFAULT_DEADLINE, "restore");
    assert_no_panic(&run);
    assert_eq!(
        fs::read(outside.join("x.txt")).unwrap(),
        b"precious\n",
        "{run}"
    );
    assert!(run.stdout.contains("d/x.txt"), "reported as failed: {run}");
}

#[test]
fn restore_never_writes_into_a_directory_moved_out_of_the_project_while_it_ran() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("d/x.txt", "x0\n");
    let before = p.track();
    p.file("d/x.txt", "x1\n");
    p.track();
    // Paused at its syncfs, after x0 is staged in d; meanwhile d is moved out of the project.
    let moved = sb.root.join("d-moved");
    let run = paused(&p, &["--json", "restore", &before], &[], || {
        fs::rename(p.join("d"), &moved).unwrap()
    });
    assert_no_panic(&run);
    assert_eq!(run.code(), Some(1), "d/x.txt could not be restored: {run}");
    let names = sorted_names(&moved);
    assert_eq!(names, vec!["x.txt"], "no temp file left outside: {run}");
    assert_eq!(fs::read(moved.join("x.txt")).unwrap(), b"x1\n", "{run}");
    assert!(run.stdout.contains("d/x.txt"), "reported as failed: {run}");
}

/// The same, with `d` (or `a`, the parent's parent) moved out after the look that found it in
/// place, while the swap that puts x.txt back is about to enter the kernel (paused there; the
/// swap is the run's first `renameat2`, the store renames with `renameat`): the swap lands
/// outside and is taken back. The third hostile pass of 2026-12-01 found it writing into the
/// moved directory and saying `written`; the fourth, the same when an ancestor above the
/// parent moved (the look after the swap checked only the last step of the way).
#[test]
fn restore_takes_back_a_swap_into_a_directory_moved_out_just_before_it() {
    for (dir, moving) in [("d", "d"), ("a/b", "a")] {
        let sb = Sandbox::new();
        let p = sb.project("proj");
        p.file(format!("{dir}/x.txt"), "x0\n");
        p.file(format!("{dir}/new.txt"), "n0\n");
        let before = p.track();
        p.file(format!("{dir}/x.txt"), "x1\n");
        fs::remove_file(p.join(format!("{dir}/new.txt"))).unwrap();
        p.track();
        let moved = sb.root.join("moved");
        let run = restore_while_moving(&p, &before, moving, &moved);
        assert_no_panic(&run);
        assert_eq!(
            run.code(),
            Some(1),
            "{dir}'s files could not be restored: {run}"
        );
        let outside = moved.join(dir[moving.len()..].trim_start_matches('/'));
        let names = sorted_names(&outside);
        assert_eq!(names, vec!["x.txt"], "nothing left or put outside: {run}");
        assert_eq!(fs::read(outside.join("x.txt")).unwrap(), b"x1\n", "{run}");
        let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        let failed = report["failed"].as_array().expect("a failed list");
        let failed: Vec<&str> = failed.iter().map(|f| f["path"].as_str().unwrap()).collect();
        assert_eq!(failed.len(), 2, "{run}");
    }
}

/// Found by the fourth hostile pass of 2026-12-01: a file a restore deletes, in a directory
/// moved out of the project while the file was read (a large file gives a plain `mv` the
/// time; here the run pauses at the rename that sets it aside, its first `renameat2`), was
/// deleted outside the project, and the restore said `deleted`.
#[test]
fn restore_never_deletes_in_a_directory_moved_out_while_it_ran() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a/b/keep.txt", "k\n");
    let before = p.track();
    p.file("a/b/gone.txt", "g\n");
    p.track();
    let moved = sb.root.join("moved");
    let run = restore_while_moving(&p, &before, "a", &moved);
    assert_no_panic(&run);
    assert_eq!(
        run.code(),
        Some(1),
        "a/b/gone.txt could not be deleted: {run}"
    );
    let names = sorted_names(moved.join("b"));
    assert_eq!(
        names,
        vec!["gone.txt", "keep.txt"],
        "nothing deleted outside: {run}"
    );
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(report["deleted"], serde_json::json!([]), "{run}");
    assert_eq!(report["failed"][0]["path"], "a/b/gone.txt", "{run}");
}

/// Found by the fourth hostile pass of 2026-12-01: a new file renamed into a directory moved
/// out just before is taken back; a save made over it in the moved directory before the take
/// back was taken back instead, and deleted. The fifth found the same with a save written in
/// place, of the same size, with the mtime put back (every look but the bytes and the change
/// time the same). Paused at the rename (the run's first `renameat2`) while `a` moves out,
/// then at the take back (the second) while the user saves.
#[test]
fn taking_back_a_new_file_from_a_moved_directory_keeps_a_save_made_over_it() {
    // An editor's save (a temp file renamed over it), or a same-size write in place that puts
    // the mtime back (`cp -p`, `rsync -t`).
    let save = |file: &Path, in_place: bool| match in_place {
        false => {
            let temp = file.with_extension("tmp");
            fs::write(&temp, "SAVE\n").unwrap();
            fs::rename(&temp, file).unwrap();
        }
        true => save_in_place_keeping_mtime(file, b"SAVE\n"),
    };
    for (how, in_place) in [("by rename", false), ("in place", true)] {
        let sb = Sandbox::new();
        let p = sb.project("proj");
        p.file("a/b/new.txt", "ours\n");
        let before = p.track();
        fs::remove_file(p.join("a/b/new.txt")).unwrap();
        p.track();
        let moved = sb.root.join("moved");
        let run = restore_while_a_moves_out(&p, &before, &moved, || {
            save(&moved.join("b/new.txt"), in_place)
        });
        assert_no_panic(&run);
        assert_eq!(run.code(), Some(1), "{how}: {run}");
        let names = sorted_names(moved.join("b"));
        assert_eq!(
            names,
            vec!["new.txt"],
            "{how}: nothing else left outside: {run}"
        );
        let kept = fs::read(moved.join("b/new.txt")).unwrap();
        assert_eq!(kept, b"SAVE\n", "{how}: {run}");
    }
}

/// Found by the fifth hostile pass of 2026-12-01: the same for a file swapped in: the swap
/// into the moved directory is taken back by swapping again, and what comes out was removed
/// if it looked like the staged file (size, mtime), so a same-size save written in place with
/// the mtime put back, while the staged file stood there, was lost. Paused at the swap (the
/// first `renameat2`) while `a` moves out, then at the swap back (the second) while the user
/// saves in place.
#[test]
fn taking_back_a_swap_from_a_moved_directory_keeps_a_save_made_in_place() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a/b/x.txt", "x0\n");
    let before = p.track();
    p.file("a/b/x.txt", "x1\n");
    p.track();
    let moved = sb.root.join("moved");
    // The staged file stands at x.txt by then: the user saves into it.
    let run = restore_while_a_moves_out(&p, &before, &moved, || {
        save_in_place_keeping_mtime(&moved.join("b/x.txt"), b"x9\n")
    });
    assert_no_panic(&run);
    assert_eq!(run.code(), Some(1), "{run}");
    let mut held: Vec<Vec<u8>> = fs::read_dir(moved.join("b"))
        .unwrap()
        .flatten()
        .map(|e| fs::read(e.path()).unwrap())
        .collect();
    held.sort();
    assert_eq!(
        held,
        vec![b"x1\n".to_vec(), b"x9\n".to_vec()],
        "both kept: {run}"
    );
    // The message tells what happened outside the project (it said "saved twice meanwhile; the
    // earlier save is kept as ...", of a file the user never saved: sixth hostile pass).
    let o: Value = serde_json::from_str(&run.stdout).unwrap();
    let error = o["failed"][0]["error"].as_str().unwrap();
    assert!(
        error.starts_with("its directory left the project meanwhile, and the file put there was changed: the change stays at its name; the file from before is kept as .rewind-aside-"),
        "{run}"
    );
}

/// A deletion sets its file aside as `.rewind-aside-<token>-<n>` first. With that name taken
/// (by someone who read the token from the journal), it failed with a bare "File exists (os
/// error 17)" (sixth hostile pass); it now says what is in the way. Nothing is deleted.
#[test]
fn a_deletion_whose_aside_name_is_taken_says_so() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("keep.txt", "k\n");
    let before = p.track();
    p.file("d/new.txt", "agent\n");
    p.track();
    let journal = p.store().join("rewind-restore-journal");
    let run = paused_at(
        ("renameat2", 1),
        &p,
        &["--json", "restore", &before],
        &[],
        || {
            let text = fs::read_to_string(&journal).unwrap();
            let token = text.lines().next().unwrap().strip_prefix("token ").unwrap();
            fs::write(p.join(format!("d/.rewind-aside-{token}-0")), "in the way\n").unwrap();
        },
    );
    assert_no_panic(&run);
    assert_eq!(run.code(), Some(1), "{run}");
    let o: Value = serde_json::from_str(&run.stdout).unwrap();
    let error = o["failed"][0]["error"].as_str().unwrap();
    assert!(
        error.starts_with("not deleted: .rewind-aside-")
            && error
                .ends_with("is in the way (a deletion sets the file aside under that name first)"),
        "{run}"
    );
    assert_eq!(p.read("d/new.txt"), b"agent\n");
}

/// `restore --json <before>` of `p`, paused at its first `renameat2` (in each thread) while
/// project directory `from` moves out to `to`.
fn restore_while_moving(p: &TestProject, before: &str, from: &str, to: &Path) -> Run {
    let args = ["--json", "restore", before];
    paused_at(("renameat2", 1), p, &args, &[], || {
        fs::rename(p.join(from), to).unwrap()
    })
}

/// `restore --json <before>` of `p`, paused at its first two `renameat2`s (2 s each, in each
/// thread): directory `a` moves out to `moved` during the first, `then` runs during the second.
fn restore_while_a_moves_out(
    p: &TestProject,
    before: &str,
    moved: &Path,
    then: impl FnOnce(),
) -> Run {
    require_tool("strace", "to inject delays at syscalls");
    let mut outer = Command::new("strace");
    outer.args(["-f", "-qq", "-o", "/dev/null"]);
    outer.args(["-e", "inject=renameat2:delay_enter=2000000:when=1..2"]);
    let child = spawn_piped(&mut wrapped(p, outer, &["--json", "restore", before]));
    std::thread::sleep(Duration::from_millis(1000));
    fs::rename(p.join("a"), moved).unwrap();
    std::thread::sleep(Duration::from_millis(2000));
    then();
    finish(child, DEFAULT_DEADLINE, "restore")
}

/// Write `data` over the start of `file` in place (same inode), then put its mtime back, as
/// `cp -p` or `rsync -t` over a file of the same size do.
fn save_in_place_keeping_mtime(file: &Path, data: &[u8]) {
    use std::os::unix::fs::FileExt;
    let open = fs::OpenOptions::new().write(true).open(file).unwrap();
    let mtime = open.metadata().unwrap().modified().unwrap();
    open.write_all_at(data, 0).unwrap();
    open.set_modified(mtime).unwrap();
}

/// Found by the third hostile pass of 2026-12-01: a save of the same size through a descriptor
/// opened before the restore, written after the swap took the file out and after its bytes
/// were read, with the mtime put back (`touch -r`, `cp -p`, `rsync -t` do), matched both
/// looks at the file; it was unlinked, and the restore said `written`. The change time, which
/// no user process sets back, tells. The run pauses at the look after the read: the fourth
/// `fstat` of the thread that swaps (one of the directory before the swap, one after, one of
/// the file before its read); strace's log shows the read came first.
#[test]
fn a_save_put_behind_a_read_with_its_mtime_set_back_is_swapped_back() {
    use std::os::unix::fs::FileExt;
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("d/f.txt", "v0\n");
    let before = p.track();
    p.file("d/f.txt", "v1\n");
    p.track();
    let editor = fs::OpenOptions::new()
        .write(true)
        .open(p.join("d/f.txt"))
        .unwrap();
    let mtime = editor.metadata().unwrap().modified().unwrap();
    let run = paused_at(
        ("fstat", 4),
        &p,
        &["--json", "restore", &before],
        &[],
        || {
            editor.write_all_at(b"v9\n", 0).unwrap();
            editor.set_modified(mtime).unwrap();
        },
    );
    assert_no_panic(&run);
    let log = fs::read_to_string(p.path.with_extension("strace")).unwrap();
    // The thread that swapped: it read the old bytes, then paused.
    let swap = log.lines().find(|l| l.contains("RENAME_EXCHANGE"));
    let thread = swap
        .and_then(|l| l.split_whitespace().next())
        .expect("a swap");
    let calls: Vec<&str> = log
        .lines()
        .filter(|l| l.split_whitespace().next() == Some(thread))
        .collect();
    let read = calls.iter().position(|l| l.contains(r#""v1\n""#));
    let paused = calls.iter().position(|l| l.ends_with("(DELAYED)"));
    assert!(
        matches!((read, paused), (Some(read), Some(paused)) if read < paused),
        "paused after the read of the file swapped out: {log}"
    );
    run.assert_success();
    assert_eq!(p.read("d/f.txt"), b"v9\n", "the save is at its path: {run}");
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(report["conflicts"], serde_json::json!(["d/f.txt"]), "{run}");
}

/// `rewind ARGS` on `p`, paused 2 s at its first syncfs (and faults `injects` injected by
/// strace), with `meanwhile` run 1 s into the pause. strace's log is `<project>.strace`.
fn paused(p: &TestProject, args: &[&str], injects: &[&str], meanwhile: impl FnOnce()) -> Run {
    paused_at(("syncfs", 1), p, args, injects, meanwhile)
}

/// [`paused`] at a call of `syscall` instead, the `nth` each thread makes.
fn paused_at(
    (syscall, nth): (&str, u32),
    p: &TestProject,
    args: &[&str],
    injects: &[&str],
    meanwhile: impl FnOnce(),
) -> Run {
    require_tool("strace", "to inject faults and delays at syscalls");
    let mut outer = Command::new("strace");
    outer
        .args(["-f", "-qq", "-o"])
        .arg(p.path.with_extension("strace"));
    outer.args([
        "-e",
        &format!("inject={syscall}:delay_enter=2000000:when={nth}"),
    ]);
    for inject in injects {
        outer.args(["-e", inject]);
    }
    let child = spawn_piped(&mut wrapped(p, outer, args));
    std::thread::sleep(Duration::from_millis(1000));
    meanwhile();
    finish(child, DEFAULT_DEADLINE, &args.join(" "))
}

/// `restore` of `p` from "v1" in f.txt back to "v0" (after an "old" version), paused at its
/// syncfs while the user saves `save` in f.txt, so that the swap takes the save out;
/// `swap_back` is strace's inject expression for the second renameat2, the swap back.
/// Returns the run and the snapshot it restored.
fn restore_taking_out_a_save(p: &TestProject, swap_back: &str, save: &str) -> (Run, String) {
    p.file("f.txt", "old\n");
    p.track();
    p.file("f.txt", "v0\n");
    let before = p.track();
    p.file("f.txt", "v1\n");
    p.track();
    let run = paused(p, &["--json", "restore", &before], &[swap_back], || {
        p.file("f.txt", save);
    });
    (run, before)
}

/// The names in directory `dir`, sorted.
fn sorted_names(dir: impl AsRef<Path>) -> Vec<String> {
    let entries = fs::read_dir(dir).unwrap().flatten();
    let mut names: Vec<String> = entries
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The names in the project's top directory that hold `data`.
fn names_holding(p: &TestProject, data: &[u8]) -> Vec<String> {
    let names = fs::read_dir(&p.path).unwrap().flatten();
    let names = names.map(|e| e.file_name().to_string_lossy().into_owned());
    names.filter(|n| p.read(n) == data).collect()
}

#[test]
fn a_save_that_cannot_be_swapped_back_is_kept_beside_the_path() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    let (run, _) =
        restore_taking_out_a_save(&p, "inject=renameat2:error=EIO:when=2", "USER SAVE\n");
    assert_no_panic(&run);
    assert_eq!(run.code(), Some(1), "{run}");
    let kept = names_holding(&p, b"USER SAVE\n");
    assert_eq!(kept.len(), 1, "the save is kept: {kept:?} {run}");
    assert!(
        kept[0].starts_with(".rewind-aside-"),
        "beside the path: {kept:?}"
    );
    assert!(run.stdout.contains(&kept[0]), "the error says where: {run}");
}

#[test]
fn a_save_taken_out_by_a_swap_killed_before_it_was_put_back_is_kept() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    // Killed as it swaps the save back: the save is left under the temp name, which the next
    // run sweeps. The save holds bytes the store has (an older version): still not the
    // staged file's, nor the undo point's for that path.
    let (run, before) =
        restore_taking_out_a_save(&p, "inject=renameat2:signal=KILL:when=2", "old\n");
    assert!(!run.status.success(), "the restore was killed: {run}");
    p.track(); // sweeps what the killed restore left
    let saves = names_holding(&p, b"old\n");
    assert_eq!(saves.len(), 1, "the save is kept: {saves:?} {run}");
    assert!(saves[0].starts_with(".rewind-aside-"), "{saves:?}");
    // Restoring the snapshot before again leaves it there (found by the hostile pass of
    // 2026-12-01: the restore deleted it as not in the target, saying only `deleted`).
    let again = p.rewind(["--json", "restore", &before]);
    again.assert_success();
    assert_eq!(names_holding(&p, b"old\n"), saves, "{again}");
    assert!(again.stdout.contains(&saves[0]), "listed as kept: {again}");
}

/// Found by the hostile pass of 2026-12-01: the sweep also removed a temp file holding the
/// start of the staged file (meant for a staging a kill cut short), so a save taken out by a
/// swap killed before it was put back was deleted when it was a prefix of the restored file:
/// an emptied file, or one cut down to its first lines. Only a temp file not recorded as
/// staged whole may be a staging cut short.
#[test]
fn an_emptied_or_shortened_save_taken_out_by_a_killed_swap_is_kept() {
    for save in ["", "v"] {
        let sb = Sandbox::new();
        let p = sb.project("proj");
        // The restore writes "v0\n"; both saves are its start.
        let (run, _) = restore_taking_out_a_save(&p, "inject=renameat2:signal=KILL:when=2", save);
        assert!(!run.status.success(), "the restore was killed: {run}");
        p.track(); // sweeps what the killed restore left
        let saves = names_holding(&p, save.as_bytes());
        assert_eq!(saves.len(), 1, "the save {save:?} is kept: {saves:?} {run}");
        assert!(saves[0].starts_with(".rewind-aside-"), "{saves:?}");
        assert_eq!(p.read("f.txt"), b"v0\n", "the restored file stays");
    }
}

/// Found by the eighth hostile pass of 2026-12-01: the warning that a restore was stopped was
/// lost when the next command was itself stopped after its sweep (Ctrl-C, `kill`), and the
/// hook, often the first command after an interrupted undo, used it up without a word. The
/// notices are kept in the store until a command tells them; the hook tells them on stderr and
/// in `hooks.log`.
#[test]
fn a_killed_restores_warning_outlives_a_command_killed_before_it_told_it() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    restore_killed_at_syncfs(&p, &["a.txt", "sub/b.txt"]);
    let stopped = "was stopped before it finished";
    // The next command sweeps, then is killed at its index write (a.txt changed: it writes one).
    p.file("a.txt", "the user's edit\n");
    let mut cmd = strace(&p, "inject=renameat2:signal=KILL:when=1", &["track"]);
    let run = run_with_deadline(&mut cmd, DEFAULT_DEADLINE);
    assert!(
        !run.status.success() && !run.stderr.contains(stopped),
        "{run}"
    );
    assert!(
        strays(&p, "sub").is_empty(),
        "the killed track swept: {run}"
    );
    let payload = serde_json::json!({
        "session_id": "s",
        "cwd": p.path,
        "hook_event_name": "UserPromptSubmit",
        "prompt": "go on",
    });
    let mut hook = p.rewind_command(["hook", "claude-code"]);
    let run = run_with_stdin(&mut hook, payload.to_string().as_bytes());
    assert!(run.status.success() && run.stdout.is_empty(), "{run}");
    assert!(run.stderr.contains(stopped), "the hook tells it: {run}");
    let log = fs::read_to_string(sb.data_dir.join("hooks.log")).unwrap();
    assert!(log.contains(stopped), "{log}");
    let run = run_with_deadline(&mut p.rewind_command(["track"]), DEFAULT_DEADLINE);
    assert!(
        run.status.success() && !run.stderr.contains(stopped),
        "told once: {run}"
    );
}

/// The tree of the newest undo point (`refs/rewind/undo`), as git names it.
fn last_undo_point(p: &TestProject) -> String {
    let undo = p.store_git(["rev-parse", "refs/rewind/undo^{tree}"]);
    undo.trim().to_owned()
}

/// `/dev/full`, to write to: every write fails (`ENOSPC`).
fn dev_full() -> fs::File {
    fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap()
}

/// A `track` (which sweeps a killed restore's leftovers) whose stderr cannot be written: the
/// notices it finds cannot be said.
fn track_with_stderr_full(p: &TestProject) {
    let status = p
        .rewind_command(["track"])
        .stdout(std::process::Stdio::null())
        .stderr(dev_full())
        .status()
        .unwrap();
    assert!(status.success(), "the track itself works");
}

/// Found by the ninth hostile pass: notices were taken by a rename to
/// `rewind-notices.taking-<pid>` and removed before they were said, without the store's lock.
/// A command killed between the two left them where nothing read them again; one whose stderr
/// could not be written dropped them; a read (`log`) could take the file between a sweep's open
/// and its write. They are now taken under the lock, and removed once said.
#[test]
fn a_notice_is_removed_only_once_said_and_only_under_the_lock() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    restore_killed_at_syncfs(&p, &["a.txt"]);
    let stopped = "was stopped before it finished";
    // (`p.store()` runs a command, which would tell the notices.)
    let store = p.store();
    let notices = store.join("rewind-notices");
    // The sweep's notice cannot be said: it stays.
    track_with_stderr_full(&p);
    assert!(notices.exists(), "a notice not said stays in the store");
    // Another process holds the store's lock: the notices are left to the next taker.
    let lock = LockHolder::hold(&store);
    let run = run_with_deadline(&mut p.rewind_command(["log"]), DEFAULT_DEADLINE);
    assert!(
        run.status.success() && !run.stderr.contains(stopped),
        "{run}"
    );
    assert!(notices.exists(), "taken only under the lock: {run}");
    drop(lock);
    // What an earlier build's taker, killed before saying them, left.
    let left = store.join("rewind-notices.taking-4194305");
    fs::write(&left, "left by a taker killed\\nat its print\n").unwrap();
    let run = run_with_deadline(&mut p.rewind_command(["log"]), DEFAULT_DEADLINE);
    assert!(
        run.status.success() && run.stderr.contains(stopped),
        "{run}"
    );
    assert!(
        run.stderr
            .contains("rewind: warning: left by a taker killed\nat its print\n"),
        "{run}"
    );
    assert!(!notices.exists() && !left.exists(), "told: {run}");
    let run = run_with_deadline(&mut p.rewind_command(["log"]), DEFAULT_DEADLINE);
    assert!(
        run.status.success() && !run.stderr.contains("warning"),
        "told once: {run}"
    );
}

/// Found by the tenth hostile pass: `serve` removed the notices its `status` answer carried
/// before writing the answer: a client gone by then (a closed stdout) lost them.
#[test]
fn a_notice_in_a_status_answer_never_written_stays() {
    use std::io::Write;
    let sb = Sandbox::new();
    let p = sb.project("proj");
    restore_killed_at_syncfs(&p, &["a.txt"]);
    let store = p.store();
    track_with_stderr_full(&p);
    assert!(store.join("rewind-notices").exists());
    // Neither the answer nor serve's stderr can be written.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut serve = p
        .rewind_command(["serve", "--no-watch"])
        .stdin(std::process::Stdio::piped())
        .stdout(writer)
        .stderr(dev_full())
        .spawn()
        .unwrap();
    let mut input = serve.stdin.take().unwrap();
    input
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"status\"}\n")
        .unwrap();
    drop(input);
    let run = finish(serve, DEFAULT_DEADLINE, "serve");
    assert!(
        !run.status.success(),
        "the answer could not be written: {run}"
    );
    let run = run_with_deadline(&mut p.rewind_command(["log"]), DEFAULT_DEADLINE);
    assert!(
        run.stderr.contains("was stopped before it finished"),
        "kept for the next command: {run}"
    );
}

/// Found by the tenth hostile pass: a notice a sweep finds again at every run (a temp file it
/// cannot remove yet) was added again each time it could not be said: after 100 runs with
/// stderr on a full disk the store held 500 lines, then said all at once. One that waits is
/// not added again.
#[test]
fn a_notice_waiting_to_be_said_is_not_added_again() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    restore_killed_at_syncfs(&p, &["sub/f.txt"]);
    let store = p.store();
    {
        let _frozen = Immutable::set(&p.join("sub"));
        for _ in 0..3 {
            track_with_stderr_full(&p);
        }
        let waiting = fs::read_to_string(store.join("rewind-notices")).unwrap();
        let mut lines: Vec<&str> = waiting.lines().collect();
        let count = lines.len();
        lines.sort_unstable();
        lines.dedup();
        assert_eq!(lines.len(), count, "no notice twice: {waiting}");
        assert!(waiting.contains("could not be removed"), "{waiting}");
    }
    let run = run_with_deadline(&mut p.rewind_command(["track"]), DEFAULT_DEADLINE);
    assert_eq!(
        run.stderr.matches("could not be removed").count(),
        1,
        "said once: {run}"
    );
}

/// Found by the tenth hostile pass: a prune run first after a killed restore neither swept
/// nor said so, and expired the undo point that the next command's warning then named. The
/// prune now sweeps and warns first, and keeps that undo point.
#[test]
fn a_prune_after_a_killed_restore_warns_and_keeps_its_undo_point() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    restore_killed_at_syncfs(&p, &["a.txt"]);
    let undo = last_undo_point(&p);
    let undo = undo.as_str();
    let later = "2099-01-01T00:00:00Z";
    let run = rw_at(&p, Some(later), &["prune"]);
    run.assert_success();
    assert!(
        run.stderr
            .contains(&format!("`rewind restore {undo}` puts them back")),
        "{run}"
    );
    let log = rw_at(&p, Some(later), &["log"]);
    assert!(log.stdout.contains(undo), "kept: {log}");
    p.file("a.txt", "changed since\n");
    rw_at(&p, Some(later), &["restore", undo]).assert_success();
    assert_eq!(p.read("a.txt"), b"a.txt 1\n");
}

/// Found by the eleventh hostile pass: `prune --all` (cron's) sweeps a killed restore's
/// leftovers but says no notice, so the warning waits in the store; the next `prune --all`
/// expired the undo point it names (older than the retention), and deleted its objects an
/// hour later: the saves the restore had overwritten were lost, and the warning, said at last,
/// named an undo point that was gone. The sweep that makes the warning now records that undo
/// point again: it lives a whole retention from then (here the sweep is a `track`'s).
#[test]
fn a_stopped_restores_undo_point_outlives_crons_prunes_until_the_warning_is_old() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    restore_killed_at_syncfs(&p, &["a.txt"]);
    let undo = last_undo_point(&p);
    let undo = undo.as_str();
    let at = |days| {
        (chrono::Utc::now() + chrono::Duration::days(days))
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    };
    // The first command after the kill, a month later, sweeps (and warns).
    p.file("a.txt", "the user's edit, after\n");
    let swept = rw_at(&p, Some(&at(30)), &["track"]);
    assert!(
        swept.stderr.contains(&format!("rewind restore {undo}")),
        "{swept}"
    );
    // Cron's prunes, a day and then an hour on.
    rw_at(&p, Some(&at(31)), &["prune", "--all"]).assert_success();
    rw_at(&p, Some(&at(32)), &["prune", "--all"]).assert_success();
    let run = rw_at(&p, Some(&at(32)), &["restore", undo]);
    run.assert_success();
    assert_eq!(p.read("a.txt"), b"a.txt 1\n", "{run}");
}

/// Left open by the hostile pass of 2026-12-01, closed now: a `--dry-run` after a killed
/// restore swept its temp files (removed them, or set a save aside): a dry run changed files.
/// The next run that writes sweeps them; the dry run leaves them out of what it says it would
/// do, and says that a restore was stopped.
#[test]
fn a_dry_run_after_a_killed_restore_changes_no_file() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    let before = restore_killed_at_syncfs(&p, &["sub/a.txt"]);
    let left = strays(&p, "sub");
    assert_eq!(left.len(), 1, "the kill left its temp file");
    let run = run_with_deadline(
        &mut p.rewind_command(["restore", "--dry-run", &before]),
        DEFAULT_DEADLINE,
    );
    run.assert_success();
    assert_eq!(
        strays(&p, "sub"),
        left,
        "the dry run changed no file: {run}"
    );
    // (Eleventh hostile pass: it listed the temp files as kept, to be removed by hand, which
    // the real run does not: it sweeps them first.)
    assert!(!run.stdout.contains(".rewind-"), "{run}");
    assert!(
        run.stderr.contains("was stopped before it finished"),
        "{run}"
    );
    let run = run_with_deadline(
        &mut p.rewind_command(["restore", &before]),
        DEFAULT_DEADLINE,
    );
    run.assert_success();
    assert!(
        strays(&p, "sub").is_empty(),
        "the run that writes swept: {run}"
    );
    assert_eq!(p.read("sub/a.txt"), b"sub/a.txt 0\n");
}

/// Left open by the hostile pass of 2026-12-01, closed now: `doctor` and `log` did not say
/// that a restore was stopped before it finished. Until the next snapshot sweeps its temp
/// files, both name it, with the undo point that puts the files back.
#[test]
fn doctor_and_log_name_a_stopped_restore_until_it_is_swept() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    restore_killed_at_syncfs(&p, &["a.txt"]);
    let undo = last_undo_point(&p);
    let undo = undo.as_str();
    let doctor = rwj(&p, &["doctor"]);
    assert_eq!(doctor["stopped_restore"], undo, "{doctor}");
    let text = p.rewind(["doctor"]);
    assert!(
        text.stdout
            .contains(&format!("`rewind restore {undo}` puts the files back")),
        "{text}"
    );
    let log = p.rewind(["log"]);
    assert!(
        log.stdout.contains(undo) && log.stdout.contains("stopped before it finished"),
        "{log}"
    );
    p.track();
    assert!(rwj(&p, &["doctor"])["stopped_restore"].is_null());
    assert!(!p.rewind(["log"]).stdout.contains("stopped"));
}

/// Found by the hostile pass of 2026-12-01: a temp file the sweep could not remove (its
/// directory immutable or read-only then) was forgotten: the journal went, nothing was said,
/// and the file stayed in every snapshot after. The journal now stays until every temp file it
/// names is gone.
#[test]
fn a_temp_file_the_sweep_cannot_remove_yet_is_swept_once_it_can_be() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    restore_killed_at_syncfs(&p, &["sub/f.txt"]);
    let stopped = format!(
        "rewind: warning: a restore (or revert, undo or redo) was stopped before it finished: \
         files may be partly changed; `rewind restore {}` puts them back as they were before it",
        last_undo_point(&p)
    );
    let temps = || strays(&p, "sub");
    assert_eq!(temps().len(), 1, "the killed restore left its temp file");
    {
        let _frozen = Immutable::set(&p.join("sub"));
        let run = run_with_deadline(&mut p.rewind_command(["track"]), DEFAULT_DEADLINE);
        run.assert_success(); // its sweep cannot remove it yet
        assert_eq!(temps().len(), 1, "nothing can be removed from sub/ now");
        let at = p.join("sub").join(&temps()[0]);
        let at = at.to_string_lossy();
        assert!(
            run.stderr.contains(&*at),
            "the warning names where it is, {at}: {run}"
        );
        assert!(run.stderr.contains(&stopped), "{run}");
        // (Twelfth hostile pass: each run after said again that the file could not be
        // removed. The next ones try again quietly.)
        let again = run_with_deadline(&mut p.rewind_command(["track"]), DEFAULT_DEADLINE);
        again.assert_success();
        assert!(!again.stderr.contains("warning"), "said once: {again}");
        assert_eq!(temps().len(), 1);
    }
    let run = run_with_deadline(&mut p.rewind_command(["track"]), DEFAULT_DEADLINE);
    run.assert_success();
    assert!(!run.stderr.contains("warning"), "said once: {run}");
    assert!(temps().is_empty(), "swept once it could be: {:?}", temps());
    assert_eq!(p.read("sub/f.txt"), b"sub/f.txt 1\n");
}

/// The journal records the staged temp files before the sync: when it cannot (here its open
/// fails), the restore stops before any file changes, its temp files gone, and says why.
#[test]
fn a_restore_that_cannot_record_its_staged_files_changes_nothing() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("sub/f.txt", "v0\n").file("g.txt", "g0\n");
    let before = p.track();
    p.file("sub/f.txt", "v1\n").file("g.txt", "g1\n");
    p.track();
    let journal = p.store().join("rewind-restore-journal");
    // Only the journal's calls are traced: the sweep's read of it first, then the append.
    let expr = "inject=openat:error=EIO:when=2";
    require_tool("strace", "to inject faults at syscalls");
    let mut outer = Command::new("strace");
    outer
        .args(["-f", "-qq", "-o", "/dev/null", "-P"])
        .arg(&journal);
    outer.args(["-e", expr]);
    let mut cmd = wrapped(&p, outer, &["--json", "restore", &before]);
    let run = run_with_deadline(&mut cmd, DEFAULT_DEADLINE);
    assert_eq!(run.code(), Some(1), "{run}");
    let error = one_json(&run)["error"]["message"].to_string();
    assert!(
        error.contains("journal"),
        "the error says what failed: {run}"
    );
    assert_eq!(p.read("sub/f.txt"), b"v1\n", "{run}");
    assert_eq!(p.read("g.txt"), b"g1\n", "{run}");
    assert!(
        strays(&p, "sub").is_empty() && strays(&p, ".").is_empty(),
        "{run}"
    );
}

/// Found by the seventeenth hostile pass: a full disk when an undo wrote its record after its
/// files changed gave one line (`store: … Could not commit packed-ref transaction`, code
/// `store`) and no word of what changed. The outcome is printed, then the error (under --json the
/// outcome says it in `unrecorded`), the code is `disk_full`, and `redo` brings the turn back. The fault is
/// injected at the undo's last rename of `packed-refs.lock` (counted in a twin project first).
#[test]
fn an_undo_whose_record_meets_a_full_disk_says_what_it_did() {
    let sb = Sandbox::new();
    let turn = |name: &str| {
        let p = sb.project(name);
        p.file("a", "a\n");
        p.rewind(["turn", "begin", "--session", "s", "--turn", "1"])
            .assert_success();
        p.file("a", "the agent's a\n").file("b", "the agent's b\n");
        p.rewind(["turn", "end", "--session", "s", "--turn", "1"])
            .assert_success();
        p
    };
    let undo = ["--json", "undo", "--session", "s", "--last"];
    let traced = |p: &TestProject, expr: &str, log: &Path| {
        require_tool("strace", "to inject faults at syscalls");
        let mut outer = Command::new("strace");
        outer.args(["-f", "-qq", "-o"]).arg(log).arg("-P");
        outer
            .arg(p.store().join("packed-refs.lock"))
            .args(["-e", expr]);
        run_with_deadline(&mut wrapped(p, outer, &undo), DEFAULT_DEADLINE)
    };
    let twin = turn("twin");
    let log = sb.root.join("renames.log");
    traced(&twin, "trace=rename,renameat,renameat2", &log).assert_success();
    let log = fs::read_to_string(&log).unwrap();
    let renames: Vec<&str> = log.lines().filter(|l| l.contains("rename")).collect();
    let last = renames
        .last()
        .unwrap_or_else(|| panic!("no rename traced: {log}"));
    let syscall = last.split('(').next().unwrap().rsplit(' ').next().unwrap();
    let when = renames
        .iter()
        .filter(|l| l.contains(&format!("{syscall}(")))
        .count();

    let p = turn("p");
    let expr = format!("inject={syscall}:error=ENOSPC:when={when}");
    let run = traced(&p, &expr, Path::new("/dev/null"));
    run.assert_code(1);
    assert_one_line_stderr(&run);
    let outcome = one_json(&run);
    assert_eq!(outcome["unrecorded"]["code"], "disk_full", "{run}");
    assert_eq!(outcome["written"], serde_json::json!(["a"]), "{run}");
    assert_eq!(outcome["deleted"], serde_json::json!(["b"]), "{run}");
    assert!(
        run.stderr.contains("disk full") && run.stderr.contains("redo"),
        "{run}"
    );
    assert_eq!(p.read("a"), b"a\n", "{run}");
    assert!(!p.join("b").exists(), "{run}");
    p.assert_fsck_clean();
    p.rewind(["redo", "--session", "s"]).assert_success();
    assert_eq!(p.read("a"), b"the agent's a\n");
    assert_eq!(p.read("b"), b"the agent's b\n");
}

/// A restore of `p` to `before` whose one removal (`unlinkat`) fails with an I/O error: it
/// exits 1, names `path` in `failed` and not in `done` ("written" or "deleted"), leaves the
/// file's `content` at its name and no `.rewind-` file beside it.
fn restore_whose_removal_fails(
    p: &TestProject,
    before: &str,
    path: &str,
    done: &str,
    content: &str,
) {
    let mut cmd = strace(
        p,
        "inject=unlinkat:error=EIO:when=1",
        &["--json", "restore", before],
    );
    let run = run_with_deadline(&mut cmd, DEFAULT_DEADLINE);
    run.assert_code(1);
    let outcome = one_json(&run);
    assert_eq!(outcome["failed"][0]["path"], path, "{run}");
    assert_eq!(outcome[done], serde_json::json!([]), "{run}");
    assert_eq!(p.read(path), content.as_bytes(), "{run}");
    assert!(strays(p, ".").is_empty(), "{:?} {run}", strays(p, "."));
}

/// Found by the seventeenth hostile pass: a deletion sets the file aside, looks at it again and
/// removes it; when the removal failed (an I/O error), the file stayed as `.rewind-aside-…` and
/// its name was gone. It goes back to its name now, and the deletion is `failed` with the error.
#[test]
fn a_deletion_whose_removal_fails_puts_the_file_back_at_its_name() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n");
    let before = p.track();
    p.file("b.txt", "the file to delete\n");
    p.track();
    // (The restore's only removal is the deletion's: nothing staged, nothing to sweep.)
    restore_whose_removal_fails(&p, &before, "b.txt", "deleted", "the file to delete\n");
    // When the name is taken by then (the put back, the second no-replace rename, refused as
    // if a save had appeared), the file stays aside and the error says why (the eighteenth
    // hostile pass: it said "saved twice meanwhile").
    p.track();
    let mut outer = Command::new("strace");
    outer.args(["-f", "-qq", "-o", "/dev/null"]);
    outer.args(["-e", "inject=unlinkat:error=EIO:when=1"]);
    outer.args(["-e", "inject=renameat2:error=EEXIST:when=2"]);
    let mut cmd = wrapped(&p, outer, &["--json", "restore", &before]);
    let run = run_with_deadline(&mut cmd, DEFAULT_DEADLINE);
    run.assert_code(1);
    let error = one_json(&run)["failed"][0]["error"].to_string();
    assert!(
        error.contains("removing it failed") && !error.contains("saved twice"),
        "{run}"
    );
    let aside = strays(&p, ".");
    assert_eq!(aside.len(), 1, "{aside:?} {run}");
    assert_eq!(p.read(&aside[0]), b"the file to delete\n", "{run}");
}

/// Found by the eighteenth hostile pass: when the file system refused to remove a directory a
/// restore had emptied (an I/O error at its `rmdir`), the directory stayed and nothing said so.
/// A warning names it now. It is no failure of the run (every file is as the outcome says: an
/// undo whose only trouble it was rolls its turn back, a hostile pass found), and one that a
/// later step of the run removed after all (a file written where it stood) is not named.
#[test]
fn an_emptied_directory_that_cannot_be_removed_is_said() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n");
    let before = p.track();
    // The restore's removals: the deleted file (set aside first), then `d/e`, then `d`.
    for (when, refused, removed) in [(2, "d/e", None), (3, "d", Some("d/e"))] {
        p.file("d/e/b.txt", "b\n");
        p.track();
        let inject = format!("inject=unlinkat:error=EIO:when={when}");
        let run = run_with_deadline(
            &mut strace(&p, &inject, &["--json", "restore", &before]),
            DEFAULT_DEADLINE,
        );
        run.assert_success();
        let outcome = one_json(&run);
        assert_eq!(
            outcome["deleted"],
            serde_json::json!(["d/e/b.txt"]),
            "{run}"
        );
        assert_eq!(outcome["failed"], serde_json::json!([]), "{run}");
        let warning = format!("rewind: warning: {refused} stays: the run emptied it, but removing it failed: Input/output error");
        assert!(run.stderr.contains(&warning), "{run}");
        assert!(p.join(refused).is_dir(), "{run}");
        if let Some(removed) = removed {
            assert!(!p.join(removed).exists(), "{run}");
        }
        assert!(!p.join("d/e/b.txt").exists(), "{run}");
        fs::remove_dir_all(p.join("d")).unwrap();
    }
    // A file where the directory stood: the write after the deletions removes it after all.
    let run = restore_dir_to_file_failing_at(&p, 2);
    run.assert_success();
    assert_eq!(one_json(&run)["written"], serde_json::json!(["d"]), "{run}");
    assert_eq!(p.read("d"), b"the file\n", "{run}");
    assert!(!run.stderr.contains("stays"), "{run}");
}

/// With `d` a file in a snapshot and now a directory holding `d/x`: the restore to that
/// snapshot, under strace, each thread's `when`-th `unlinkat` failing with an I/O error.
fn restore_dir_to_file_failing_at(p: &TestProject, when: u32) -> Run {
    p.file("d", "the file\n");
    let file = p.track();
    fs::remove_file(p.join("d")).unwrap();
    p.file("d/x", "x\n");
    p.track();
    let inject = format!("inject=unlinkat:error=EIO:when={when}");
    let mut cmd = strace(p, &inject, &["--json", "restore", &file]);
    run_with_deadline(&mut cmd, DEFAULT_DEADLINE)
}

/// Found by a hostile pass (r43): a write that could not go in (a deletion it waited on failed)
/// removes its staged temp file; when that removal failed too, the temp file stayed in the
/// project, unreported, with no journal left to sweep it, and the next snapshot took it in as
/// a project file. The run says so now and keeps its journal: the next snapshot removes it.
#[test]
fn a_temp_file_the_run_cannot_remove_is_said_and_swept_by_the_next_snapshot() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("main.rs", "code\n");
    // Each thread's first removal fails: the deletion of `d/x` (put back), so `d` cannot be
    // written, and the removal of its staged temp file.
    let run = restore_dir_to_file_failing_at(&p, 1);
    run.assert_code(1);
    assert_eq!(p.read("d/x"), b"x\n", "{run}");
    let left = strays(&p, ".");
    assert_eq!(left.len(), 1, "{left:?} {run}");
    assert!(
        run.stderr
            .contains("could not remove a temp file of its own"),
        "{run}"
    );
    // The run finished: neither `doctor`, `log` nor a dry run calls it stopped.
    let doctor = p.rewind(["--json", "doctor"]);
    assert_eq!(
        one_json(&doctor)["stopped_restore"],
        serde_json::Value::Null,
        "{doctor}"
    );
    let log = p.rewind(["log"]);
    assert!(!log.stdout.contains("stopped"), "{log}");
    let dry = p.rewind([
        "restore",
        "--dry-run",
        one_json(&run)["undo"].as_str().unwrap(),
    ]);
    assert!(!dry.stderr.contains("stopped"), "{dry}");
    let next = p.rewind(["track"]);
    next.assert_success();
    assert!(strays(&p, ".").is_empty(), "{next}");
    assert!(
        !next.stderr.contains("stopped before it finished"),
        "{next}"
    );
    let tree = p.store_git(["ls-tree", "-r", "--name-only", next.stdout.trim()]);
    assert_eq!(
        tree.lines().collect::<Vec<_>>(),
        ["d/x", "main.rs"],
        "{next}"
    );
}

/// Found by the eighteenth hostile pass: when the file a swap took out could not be removed (an
/// I/O error), the path was reported `failed` ("no other file changed") though the restored file
/// stood at it, and the file from before stayed beside it as `.rewind-<token>-0`, a project file
/// to the next snapshot. It is swapped back now: the path holds what it held, `failed`.
#[test]
fn a_swap_whose_old_file_cannot_be_removed_is_swapped_back() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "before\n");
    let before = p.track();
    p.file("a.txt", "after\n");
    p.track();
    // (The restore's only removal is the swapped-out file's: nothing to sweep or delete.)
    restore_whose_removal_fails(&p, &before, "a.txt", "written", "after\n");
    p.rewind(["restore", &before]).assert_success();
    assert_eq!(p.read("a.txt"), b"before\n");
}

/// Found by the hostile passes of 2026-12-01: a file rewind set aside (`.rewind-aside-…`), or a
/// temp file a sweep could not remove (which may hold a save a killed swap took out), was
/// deleted by a later restore as not in its target, saying only `deleted`. Both are `kept` now,
/// with why; other names that merely start with `.rewind-` are not.
#[test]
fn files_rewind_set_aside_or_left_are_never_deleted_by_a_restore() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n");
    let before = p.track();
    let left = [".rewind-aside-mine", "sub/.rewind-0123456789abcdef-3"];
    for name in left {
        p.file(name, "someone's save\n");
    }
    p.file(".rewind-config", "a user's file\n");
    let run = p.rewind(["--json", "restore", &before]);
    run.assert_success();
    let outcome = one_json(&run);
    for name in left {
        assert_eq!(p.read(name), b"someone's save\n", "{run}");
        assert!(
            outcome["kept"]
                .as_array()
                .unwrap()
                .contains(&serde_json::json!(name)),
            "{run}"
        );
    }
    assert!(
        !p.join(".rewind-config").exists(),
        "not rewind's: deleted: {run}"
    );
    let human = p.rewind(["restore", &before]);
    assert!(human.stderr.contains("rewind set it aside"), "{human}");
}

/// Random saves (in place, or a temp file renamed over) racing restores: each restore is paused
/// at its syncfs and slowed at each swap, while another thread saves random files of the
/// project. After each round, the last bytes the user saved at each path are at that path, or
/// beside it (`.rewind-aside-*`), or in the restore's undo point at that path: no byte lost.
#[test]
fn random_saves_racing_restores_never_lose_a_byte() {
    require_tool("strace", "to pause and slow the restores");
    let seed = std::env::var("REWIND_TEST_SEED").map_or(25, |s| s.parse().expect("a number"));
    eprintln!("seed {seed} (REWIND_TEST_SEED replays another)");
    let mut rng = XorShift::seeded(seed);
    let sb = Sandbox::new();
    let p = sb.project("proj");
    let paths: Vec<String> = (0..40).map(|n| format!("d{}/f{n}.txt", n % 8)).collect();
    for path in &paths {
        p.file(path, format!("{path} base\n"));
    }
    let base = p.track();
    for round in 0..4 {
        // The agent's turn: some files changed, some deleted; then back to the base, racing.
        for path in &paths {
            match rng.below(4) {
                0 => drop(fs::remove_file(p.join(path))),
                1 | 2 => {
                    p.file(path, format!("{path} agent {round}\n"));
                }
                _ => {}
            }
        }
        p.track();
        let mut outer = Command::new("strace");
        outer.args(["-f", "-qq", "-o", "/dev/null"]);
        outer.args(["-e", "inject=syncfs:delay_enter=400000:when=1"]);
        outer.args(["-e", "inject=renameat2:delay_enter=20000"]);
        let child = spawn_piped(&mut wrapped(&p, outer, &["--json", "restore", &base]));
        let mut saved: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        for n in 0..60 {
            std::thread::sleep(Duration::from_millis(rng.below(25)));
            let path = &paths[rng.below(paths.len() as u64) as usize];
            let data = format!("{path} user {round}.{n}\n").into_bytes();
            let written = match rng.below(2) {
                0 => fs::write(p.join(path), &data),
                _ => {
                    let temp = p.join(format!("{path}.user-save"));
                    fs::write(&temp, &data).and_then(|()| fs::rename(&temp, p.join(path)))
                }
            };
            if written.is_ok() {
                saved.insert(path.clone(), data);
            }
        }
        let run = finish(child, DEFAULT_DEADLINE, "restore");
        assert_no_panic(&run);
        let undo = one_json(&run)["undo"].as_str().unwrap().to_string();
        let in_undo = p.store_paths(&undo);
        for (path, data) in &saved {
            let dir = p.join(path).parent().unwrap().to_path_buf();
            let beside = fs::read_dir(&dir).unwrap().flatten().any(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(".rewind-aside-")
                    && fs::read(e.path()).is_ok_and(|b| &b == data)
            });
            let kept = fs::read(p.join(path)).is_ok_and(|b| &b == data)
                || beside
                || (in_undo.contains(path) && p.store_blob(&undo, path) == *data);
            assert!(
                kept,
                "round {round}: the last save of {path} is lost: {run}"
            );
        }
        for dir in (0..8).map(|d| p.join(format!("d{d}"))) {
            for entry in fs::read_dir(&dir).into_iter().flatten().flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let ours = name.starts_with(".rewind-") && !name.starts_with(".rewind-aside-");
                assert!(!ours, "round {round}: a temp file is left: {name} {run}");
                if name.ends_with(".user-save") || name.starts_with(".rewind-aside-") {
                    fs::remove_file(entry.path()).unwrap(); // the next round starts clean
                }
            }
        }
    }
}

#[test]
fn a_temp_file_a_kill_cut_short_while_staging_is_swept() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("f.txt", "v0\n".repeat(1000));
    let before = p.track();
    p.file("f.txt", "v1\n");
    p.track();
    // Killed at the staging's fchmod (the temp file made, nothing written into it yet).
    let mut cmd = strace(
        &p,
        "inject=fchmod:signal=KILL:when=1",
        &["restore", &before],
    );
    let run = run_with_deadline(&mut cmd, DEFAULT_DEADLINE);
    assert!(!run.status.success(), "the restore was killed: {run}");
    let left = |what: &str| {
        let names = fs::read_dir(&p.path).unwrap().flatten();
        let names = names.map(|e| e.file_name().to_string_lossy().into_owned());
        names.filter(|n| n.starts_with(what)).collect::<Vec<_>>()
    };
    assert_eq!(
        left(".rewind-").len(),
        1,
        "the kill left the temp file: {run}"
    );
    p.track(); // sweeps it: the start of the staged file is ours, not a user's save
    assert_eq!(
        left(".rewind-"),
        Vec::<String>::new(),
        "neither swept nor kept aside"
    );
    assert_eq!(p.read("f.txt"), b"v1\n");
}

#[test]
fn of_two_saves_landing_during_a_swap_the_newer_stays_at_the_path() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("f.txt", "v0\n");
    let before = p.track();
    p.file("f.txt", "v1\n");
    p.track();
    // The first save lands while the run is paused at its syncfs; the swap takes it out, and
    // the second lands (into the new file at the path) while the swap back is delayed.
    let swap_back_delayed = "inject=renameat2:delay_enter=2000000:when=2";
    let run = paused(
        &p,
        &["--json", "restore", &before],
        &[swap_back_delayed],
        || {
            p.file("f.txt", "save 1\n");
            std::thread::sleep(Duration::from_millis(2000));
            p.file("f.txt", "save 2, the newer\n");
        },
    );
    assert_no_panic(&run);
    assert_eq!(p.read("f.txt"), b"save 2, the newer\n", "{run}");
    let earlier = names_holding(&p, b"save 1\n");
    assert_eq!(
        earlier.len(),
        1,
        "the earlier save is kept: {earlier:?} {run}"
    );
    let said = format!("the earlier save is kept as {}", earlier[0]);
    assert!(run.stdout.contains(&said), "{run}");
}

#[test]
fn restore_of_many_directories_stays_within_the_open_file_limit() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    for n in 0..300 {
        p.file(format!("d{n}/f.txt"), format!("{n} before\n"));
    }
    let before = p.track();
    for n in 0..300 {
        p.file(format!("d{n}/f.txt"), format!("{n} after\n"));
    }
    p.track();
    // 40 descriptors: one per directory written, held until the swaps, would run out.
    let run = under_ulimit(&p, "-n 40", &["--json", "restore", &before]);
    run.assert_success();
    let o: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(o["written"].as_array().map(Vec::len), Some(300), "{run}");
    assert_eq!(o["conflicts"], serde_json::json!([]), "{run}");
    assert_eq!(p.track(), before, "every file is back: {run}");
}

/// `rewind ARGS` of `p` under `ulimit LIMIT` (e.g. `-n 40`; a shell sets it, then execs
/// rewind).
fn under_ulimit(p: &TestProject, limit: &str, args: &[&str]) -> Run {
    let mut outer = Command::new("sh");
    outer.args(["-c", &format!("ulimit {limit} && exec \"$0\" \"$@\"")]);
    run_with_deadline(&mut wrapped(p, outer, args), DEFAULT_DEADLINE)
}

/// Found by the fourth hostile pass of 2026-12-01: out of descriptors (`ulimit -n 11`), a
/// snapshot left out the files it could not open, as if unreadable, and said nothing; a
/// restore's undo point then lacked them, and the restore called them "in the way". Under any
/// limit a snapshot is whole, or an error.
#[test]
fn a_snapshot_out_of_descriptors_is_an_error_not_a_tree_missing_files() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    let files = |when: &str| {
        for n in 0..200 {
            p.file(format!("d{}/s{n}/a", n % 7), format!("{when} {n}\n"));
        }
    };
    files("A");
    p.track();
    let mut codes = Vec::new();
    // (At 4, opening the store itself runs out: gix called that "not a git repository".)
    for limit in 4..=16 {
        files(&format!("B{limit}"));
        let run = under_ulimit(&p, &format!("-n {limit}"), &["track"]);
        assert_no_panic(&run);
        let whole = p.track(); // no limit: every file
        match run.code() {
            Some(0) => assert_eq!(run.stdout.trim(), whole, "ulimit -n {limit}: {run}"),
            _ => assert!(run.stderr.contains("Too many open files"), "{run}"),
        }
        codes.push(run.code());
    }
    // The range holds limits too low and limits high enough.
    assert!(
        codes.contains(&Some(0)) && codes.contains(&Some(1)),
        "{codes:?}"
    );
}

/// Run under `ulimit -v` of 12 to 22 MiB, `track` and `restore` gave exit 101 (rayon's pool
/// could not start its threads), or 134 (a failed allocation in zlib-rs or gix); under
/// `ulimit -d` of 4.6 to 7 MiB they hung for ever, a rayon worker dead before it started (the
/// seventh hostile pass). Each now succeeds, or says the limit is too small.
#[test]
fn a_small_memory_limit_is_an_error_not_a_crash_or_a_hang() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "one\n").file("dir/b.txt", "two\n");
    let first = p.track();
    p.file("a.txt", "changed\n");
    let mut codes = Vec::new();
    // (Below 18 MiB of address space the debug build, 13 MB of code, dies loading, before any
    // of its code runs.)
    let limits = [("-v", "address-space", 18..=40), ("-d", "data", 4..=40)];
    for (flag, name, mibs) in limits {
        for mib in mibs.step_by(2) {
            for args in [&["track"][..], &["restore", &first]] {
                let run = under_ulimit(&p, &format!("{flag} {}", mib << 10), args);
                assert_no_panic(&run);
                match run.code() {
                    Some(0) => {}
                    Some(1) => assert!(
                        run.stderr
                            .contains(&format!("the {name} limit (ulimit {flag}) is")),
                        "{run}"
                    ),
                    _ => panic!("ulimit {flag} {mib} MiB, {args:?}: {run}"),
                }
                codes.push(run.code());
            }
            let a = p.read("a.txt");
            assert!(
                a == b"one\n" || a == b"changed\n",
                "restored or left as it was"
            );
            p.file("a.txt", "changed\n");
        }
    }
    // The ranges hold limits too low and limits high enough.
    assert!(
        codes.contains(&Some(0)) && codes.contains(&Some(1)),
        "{codes:?}"
    );
}

/// Found by the seventh hostile pass of 2026-12-01: above the 32 MiB floor, a one-file `track`
/// under `ulimit -v` of 145 MiB panicked in zlib-rs (exit 101), and at 80 MiB aborted: glibc's
/// per-thread malloc arenas reserve 64 MiB of address space each, leaving none. Under a limit
/// the CLI now keeps one arena: from the floor to 1.2 GiB, every `track` and `restore` works.
#[test]
fn no_address_space_limit_above_the_floor_crashes_a_small_project() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    for n in 0..100 {
        p.file(format!("d{}/f{n}", n % 10), format!("{n}\n"));
    }
    let first = p.track();
    for n in (0..100).step_by(3) {
        p.file(format!("d{}/f{n}", n % 10), format!("{n} changed\n"));
    }
    let changed = p.track();
    // A first snapshot into a new store, at every MiB where the failures were.
    for mib in 32..=400 {
        let data = sb.root.join(format!("data-{mib}"));
        let mut outer = Command::new("sh");
        let limit = format!("ulimit -v {} && exec \"$0\" \"$@\"", mib << 10);
        outer
            .args(["-c", &limit])
            .arg(rewind_bin())
            .arg("--data-dir");
        outer
            .arg(&data)
            .arg("-C")
            .arg(&p.path)
            .args(["-q", "track"]);
        let run = run_with_deadline(&mut outer, DEFAULT_DEADLINE);
        assert_works_or_lacks_threads(&run, &format!("ulimit -v {mib} MiB, a first track"));
        let _ = fs::remove_dir_all(&data);
    }
    let mut to = &first;
    for mib in (32..=1200).step_by(8) {
        let args: &[&str] = match mib % 32 {
            0 => &["-q", "restore", to],
            _ => &["-q", "track"],
        };
        let run = under_ulimit(&p, &format!("-v {}", mib << 10), args);
        assert_works_or_lacks_threads(&run, &format!("ulimit -v {mib} MiB, {args:?}"));
        if args[1] == "restore" && run.status.success() {
            to = if to == &first { &changed } else { &first };
        }
    }
}

/// `run` worked, or (on a machine with many cores, whose worker threads' stacks need more
/// address space) could not start its threads and said so.
fn assert_works_or_lacks_threads(run: &Run, what: &str) {
    assert_no_panic(run);
    match run.code() {
        Some(0) => {}
        Some(1) => assert!(run.stderr.contains("worker threads"), "{what}: {run}"),
        _ => panic!("{what}: {run}"),
    }
}

/// A restore that could change none of its files said "the others were" (seventh hostile
/// pass, under `ulimit -n 11`); it says that no other file changed, and names the undo point.
#[test]
fn a_restore_that_changed_nothing_does_not_say_the_others_were_restored() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("sub/f.txt", "v0\n");
    let before = p.track();
    p.file("sub/f.txt", "v1\n");
    p.track();
    let run = {
        let _frozen = Immutable::set(&p.join("sub"));
        run_with_deadline(
            &mut p.rewind_command(["restore", &before]),
            DEFAULT_DEADLINE,
        )
    };
    assert_eq!(run.code(), Some(1), "{run}");
    assert!(
        run.stderr
            .contains("1 file(s) could not be restored (see above); no other file changed;"),
        "{run}"
    );
    assert_eq!(p.read("sub/f.txt"), b"v1\n");
}

/// r104 (1): out of descriptors (`ulimit -n` 10 to 12), a restore could not read the file its
/// swap took out, swapped back, could not read what came back either, and took that for a
/// save made twice meanwhile: it swapped again, set a file aside, and reported the path failed
/// while it held the target's bytes. Now the error says what could not be read, and whatever
/// the outcome, the report matches the disk: a path written holds the target, a path failed
/// holds what it held, and any file left beside it is named.
#[test]
fn a_restore_out_of_descriptors_reports_what_it_did_not_a_save_made_twice() {
    let sb = Sandbox::new();
    for limit in [10, 11, 12] {
        let p = sb.project(&format!("proj-{limit}"));
        p.file("d/f", "A\n");
        let a = p.track();
        p.file("d/f", "B\n");
        p.track();
        let mut limited = Command::new("sh");
        limited.args(["-c", &format!("ulimit -n {limit} && exec \"$0\" \"$@\"")]);
        let what = format!("restore under ulimit -n {limit}");
        let run = run_with_deadline(
            &mut wrapped(&p, limited, &["--json", "restore", &a]),
            DEFAULT_DEADLINE,
        );
        assert_no_panic(&run);
        assert!(!run.stdout.contains("saved twice"), "{what}: {run}");
        let outcome: serde_json::Value = match run.code() {
            Some(0 | 1) => serde_json::from_str(run.stdout.trim()).expect("one JSON document"),
            _ => panic!("{what}: {run}"),
        };
        let written = strings(&outcome["written"]);
        let failed: Vec<&serde_json::Value> = outcome["failed"]
            .as_array()
            .map(|f| f.iter().collect())
            .unwrap_or_default();
        let now = p.read("d/f");
        match (written.contains(&"d/f".to_string()), failed.len()) {
            (true, 0) => assert_eq!(now, b"A\n", "{what}: {run}"),
            (false, 1) => assert_eq!(now, b"B\n", "{what}: {run}"),
            _ => panic!("{what}: d/f neither written nor failed once: {run}"),
        }
        let errors: String = failed.iter().map(|f| f["error"].to_string()).collect();
        for entry in fs::read_dir(p.join("d")).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            assert!(
                name == "f" || errors.contains(&name),
                "{what}: {name} left beside d/f, unnamed: {run}"
            );
        }
    }
}

/// A process that cannot start threads (here: a user already at its process limit) got a
/// panic from rayon; it is now an error naming the cause.
#[test]
fn no_threads_to_start_is_an_error_not_a_panic() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "one\n");
    let id = Command::new("id").arg("-u").output().expect("`id` runs");
    // Root is not held to RLIMIT_NPROC: the limit is put on `nobody` instead.
    let mut outer = match String::from_utf8_lossy(&id.stdout).trim() {
        "0" => {
            let mut setpriv = Command::new("setpriv");
            setpriv.args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "prlimit",
            ]);
            setpriv
        }
        _ => Command::new("prlimit"),
    };
    outer.args(["--nproc=1", "--"]);
    let run = run_with_deadline(&mut wrapped(&p, outer, &["track"]), DEFAULT_DEADLINE);
    assert_no_panic(&run);
    assert_eq!(run.code(), Some(1), "{run}");
    assert!(
        run.stderr
            .contains("cannot start rewind's worker threads: Resource temporarily unavailable"),
        "{run}"
    );
}

// ---------------------------------------------------------------------------
// 5. Edits made between or after the agent's turns are never silently overwritten
// ---------------------------------------------------------------------------

#[test]
fn undo_leaves_edits_made_between_turns_to_the_user() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("notes.md", "orig\n").file("other.txt", "o\n");
    begin(&p, "1");
    p.file("notes.md", "agent\n").file("plan.md", "new\n");
    end(&p, "1");
    // The user, between turns.
    p.file("notes.md", "agent\nUSER WORK\n")
        .file("plan.md", "new\nmore\n");
    begin(&p, "2");
    p.file("other.txt", "o2\n");
    end(&p, "2");
    let o = rwj(&p, &["undo", "--session=s", "--turn=1"]);
    assert_eq!(p.read("notes.md"), b"agent\nUSER WORK\n", "{o}");
    assert_eq!(p.read("plan.md"), b"new\nmore\n", "{o}");
    assert_eq!(
        p.read("other.txt"),
        b"o\n",
        "turn 2's own change is undone: {o}"
    );
    let mut conflicts = strings(&o["conflicts"]);
    conflicts.sort();
    assert_eq!(conflicts, vec!["notes.md", "plan.md"], "{o}");
    // With --force they go, and their bytes are in the undo point.
    let f = rwj(&p, &["undo", "--session=s", "--turn=1", "--force"]);
    assert_eq!(p.read("notes.md"), b"orig\n", "{f}");
    assert!(!p.join("plan.md").exists(), "{f}");
    assert_in_undo(&p, &f, "notes.md", b"agent\nUSER WORK\n");
    assert_in_undo(&p, &f, "plan.md", b"new\nmore\n");
}

#[test]
fn undo_leaves_a_branch_switch_between_turns_to_the_user() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.git_init().file("app.txt", "v1\n").commit_all("one");
    p.git(["checkout", "-q", "-b", "feature"]);
    p.file("app.txt", "feature\n")
        .file("feat.txt", "f\n")
        .commit_all("feature");
    p.git(["checkout", "-q", "-"]);
    begin(&p, "1");
    p.file("app.txt", "v1 agent\n");
    end(&p, "1");
    p.git(["commit", "-q", "-am", "agent's work"]);
    p.git(["checkout", "-q", "feature"]); // the user switches branch between turns
    begin(&p, "2");
    p.file("unrelated.txt", "u\n");
    end(&p, "2");
    let o = rwj(&p, &["undo", "--session=s", "--turn=1"]);
    assert_eq!(p.read("app.txt"), b"feature\n", "{o}");
    assert_eq!(p.read("feat.txt"), b"f\n", "{o}");
    assert!(
        strings(&o["conflicts"]).contains(&"app.txt".to_string()),
        "{o}"
    );
    assert!(!p.join("unrelated.txt").exists(), "turn 2's file goes: {o}");
}

// ---------------------------------------------------------------------------
// 9. Special files are never opened for reading
// ---------------------------------------------------------------------------

#[test]
fn restore_force_over_a_fifo_does_not_hang() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("pipe", "was a file\n");
    let before = p.track();
    p.remove("pipe").fifo("pipe");
    p.track();
    let o = rwj(&p, &["restore", "--force", &before]);
    assert_eq!(strings(&o["conflicts"]), vec!["pipe"], "{o}");
    let kind = fs::symlink_metadata(p.join("pipe")).unwrap().file_type();
    assert!(
        std::os::unix::fs::FileTypeExt::is_fifo(&kind),
        "the FIFO stays"
    );
}

// ---------------------------------------------------------------------------
// 13. undo --file: a directory means the paths below it; an unknown path is not_found
// ---------------------------------------------------------------------------

#[test]
fn undo_file_the_session_never_touched_is_not_found() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n").file("untouched.txt", "u\n");
    begin(&p, "1");
    p.file("a.txt", "b\n");
    end(&p, "1");
    let undo_ref = |p: &TestProject| p.store_git(["for-each-ref", "refs/rewind/undo"]);
    let refs_before = undo_ref(&p);
    for path in ["untouched.txt", "nope.txt"] {
        let run = rw(&p, &["--json", "undo", "--session=s", "--file", path]);
        assert_eq!(run.code(), Some(1), "{run}");
        assert_eq!(one_json(&run)["error"]["code"], "not_found", "{run}");
    }
    assert_eq!(undo_ref(&p), refs_before, "no undo point recorded");
    assert_eq!(p.read("a.txt"), b"b\n");
}

#[test]
fn undo_file_with_a_directory_undoes_every_path_below_it() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("src/a.rs", "a\n")
        .file("src/deep/b.rs", "b\n")
        .file("top.txt", "t\n");
    begin(&p, "1");
    p.file("src/a.rs", "a2\n")
        .file("src/deep/b.rs", "b2\n")
        .file("src/new.rs", "n\n");
    p.file("top.txt", "t2\n");
    end(&p, "1");
    let o = rwj(&p, &["undo", "--session=s", "--file", "src"]);
    assert_eq!(p.read("src/a.rs"), b"a\n", "{o}");
    assert_eq!(p.read("src/deep/b.rs"), b"b\n", "{o}");
    assert!(!p.join("src/new.rs").exists(), "{o}");
    assert_eq!(p.read("top.txt"), b"t2\n", "outside src: untouched: {o}");
}

// ---------------------------------------------------------------------------
// Durability: the undo point is on disk before a file changes; data before the rename
// ---------------------------------------------------------------------------

#[test]
fn restore_syncs_the_undo_point_and_the_new_data_before_renaming() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a0\n").file("d/b.txt", "b0\n");
    let before = p.track();
    p.file("a.txt", "a1\n").file("d/b.txt", "b1\n");
    p.track();
    let log = sb.root.join("strace.log");
    let mut cmd = strace_to(
        &p,
        &log,
        "trace=openat,fsync,fdatasync,syncfs,rename,renameat,renameat2",
        &["restore", &before],
    );
    run_with_deadline(&mut cmd, DEFAULT_DEADLINE).assert_success();
    let trace = fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = trace.lines().collect();
    let position = |what: &dyn Fn(&str) -> bool| lines.iter().position(|l| what(l));
    let undo_ref = position(&|l| l.contains("rename") && l.contains("refs/rewind/undo"))
        .unwrap_or_else(|| panic!("the undo ref is written by a rename:\n{trace}"));
    let first_project_rename = position(&|l| l.contains("rename") && l.contains("\".rewind-"))
        .unwrap_or_else(|| panic!("files are renamed into place:\n{trace}"));
    let syncs: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].contains("syncfs("))
        .collect();
    assert!(
        syncs
            .iter()
            .any(|&s| s > undo_ref && s < first_project_rename),
        "a sync after the undo ref and before the first file is replaced:\n{trace}"
    );
    let last_temp_written = (0..lines.len())
        .filter(|&i| {
            lines[i].contains("openat(")
                && lines[i].contains("\".rewind-")
                && lines[i].contains("O_CREAT")
        })
        .max()
        .unwrap_or_else(|| panic!("temp files are created:\n{trace}"));
    assert!(
        syncs.iter().any(|&s| s > last_temp_written && s < first_project_rename),
        "the new files' data is synced after the last is written and before the first rename:\n{trace}"
    );
    assert_eq!(p.read("a.txt"), b"a0\n");
}

// ---------------------------------------------------------------------------
// 14. Privacy: a restored file is never more permissive than it was
// ---------------------------------------------------------------------------

fn mode(p: &TestProject, rel: &str) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    fs::symlink_metadata(p.join(rel))
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

#[test]
fn undo_brings_back_a_deleted_private_file_as_private() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("id_key", "-----BEGIN KEY-----\n")
        .chmod("id_key", 0o600);
    p.file("group.txt", "g\n").chmod("group.txt", 0o640);
    p.exec("run.sh", "#!/bin/sh\n").chmod("run.sh", 0o700);
    p.file("plain.txt", "p\n").chmod("plain.txt", 0o644);
    begin(&p, "1");
    for f in ["id_key", "group.txt", "run.sh", "plain.txt"] {
        p.remove(f);
    }
    end(&p, "1");
    let o = rwj(&p, &["undo", "--session=s"]);
    assert_eq!(p.read("id_key"), b"-----BEGIN KEY-----\n", "{o}");
    assert_eq!(mode(&p, "id_key"), 0o600, "{o}");
    assert_eq!(mode(&p, "group.txt"), 0o640, "{o}");
    assert_eq!(mode(&p, "run.sh"), 0o700, "{o}");
    assert_eq!(mode(&p, "plain.txt") & 0o600, 0o600, "{o}");
}

#[test]
fn restore_never_widens_a_file_made_private_since() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("secret.env", "A=1\n").chmod("secret.env", 0o600);
    let before = p.track();
    p.file("secret.env", "A=2\n").chmod("secret.env", 0o644); // widened by the agent
    p.track();
    let o = rwj(&p, &["restore", &before]);
    assert_eq!(p.read("secret.env"), b"A=1\n", "{o}");
    assert_eq!(
        mode(&p, "secret.env"),
        0o600,
        "narrowed back to what it was: {o}"
    );
    // Made private by the user after a snapshot that recorded it 0644: a restore keeps 0600.
    p.file("notes.txt", "n1\n").chmod("notes.txt", 0o644);
    let wide = p.track();
    p.file("notes.txt", "n2\n").chmod("notes.txt", 0o600);
    p.track();
    let o = rwj(&p, &["restore", &wide]);
    assert_eq!(p.read("notes.txt"), b"n1\n", "{o}");
    assert_eq!(mode(&p, "notes.txt"), 0o600, "never wider than it is: {o}");
}

// ---------------------------------------------------------------------------
// Found by a hostile pass over this build
// ---------------------------------------------------------------------------

#[test]
fn a_turn_undone_while_open_cannot_be_ended_and_credited_with_the_undo() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("x", "base\n");
    begin(&p, "1");
    p.file("x", "A1\n");
    end(&p, "1");
    begin(&p, "2");
    rwj(&p, &["undo", "--session=s", "--turn=1"]);
    assert_eq!(p.read("x"), b"base\n");
    let run = rw(&p, &["--json", "turn", "end", "--session=s", "--turn=2"]);
    assert_eq!(run.code(), Some(1), "{run}");
    assert_eq!(one_json(&run)["error"]["code"], "turn_state", "{run}");
    // (Turn 2 is undone already: an undo from it is refused, as `--only` refuses it, r111
    // (2).)
    let run = rw(&p, &["--json", "undo", "--session=s", "--turn=2"]);
    assert_eq!(run.code(), Some(1), "{run}");
    assert_eq!(one_json(&run)["error"]["code"], "turn_state", "{run}");
    assert_eq!(p.read("x"), b"base\n", "turn 1's change stays undone");
}

#[test]
fn a_clock_before_1970_is_refused_so_the_store_stays_fsck_clean() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("x", "a\n");
    let mut cmd = p.rewind_command(["--json", "track"]);
    cmd.env("REWIND_NOW", "1969-12-31T23:59:59Z");
    let run = run_with_deadline(&mut cmd, DEFAULT_DEADLINE);
    assert_eq!(run.code(), Some(1), "{run}");
    assert_eq!(one_json(&run)["error"]["code"], "bad_clock", "{run}");
    p.track();
    p.assert_fsck_clean();
}

#[test]
fn a_clock_stepped_back_during_a_turn_does_not_age_its_session() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("x", "a\n");
    let at = |now: &str, args: &[&str]| {
        let mut cmd = p.rewind_command(args);
        cmd.env("REWIND_NOW", now);
        run_with_deadline(&mut cmd, DEFAULT_DEADLINE).assert_success();
    };
    at(
        "2026-11-29T00:00:00Z",
        &["turn", "begin", "--session=s", "--turn=1"],
    );
    p.file("x", "b\n");
    at(
        "2026-11-01T00:00:00Z",
        &["turn", "end", "--session=s", "--turn=1"],
    );
    at("2026-11-30T00:00:00Z", &["prune"]);
    let mut cmd = p.rewind_command(["--json", "turns"]);
    cmd.env("REWIND_NOW", "2026-11-30T00:00:00Z");
    let turns = one_json(&run_with_deadline(&mut cmd, DEFAULT_DEADLINE));
    assert_eq!(turns.as_array().map(Vec::len), Some(1), "{turns}");
}

#[test]
fn prune_quotes_session_ids_and_project_paths() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("x", "a\n");
    let session = "--session=evil\n/tmp/x: removed 0";
    let at = |now: &str, args: &[&str]| {
        let mut cmd = p.rewind_command(args);
        cmd.env("REWIND_NOW", now);
        run_with_deadline(&mut cmd, DEFAULT_DEADLINE)
    };
    at(
        "2026-11-01T00:00:00Z",
        &["turn", "begin", session, "--turn=1"],
    )
    .assert_success();
    at(
        "2026-11-01T00:00:00Z",
        &["turn", "end", session, "--turn=1"],
    )
    .assert_success();
    let run = at("2026-11-30T00:00:00Z", &["prune"]);
    run.assert_success();
    assert!(
        run.stderr.contains("\"evil\\n/tmp/x: removed 0\""),
        "the id is quoted on one line: {run}"
    );
    assert!(
        !run.stderr.lines().any(|l| l.starts_with("/tmp/x")),
        "{run}"
    );
}

#[test]
fn an_edit_made_while_an_undo_runs_is_never_overwritten() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("f1", "1\n").file("keep", "k\n");
    begin(&p, "1");
    p.file("f1", "1\nagent\n")
        .file("new1", "agent\n")
        .file("new2", "agent\n");
    end(&p, "1");
    // The undo pauses 2 s at its first syncfs (the undo point is recorded, nothing changed
    // yet); meanwhile the user edits f1, rewrites new1 and deletes new2.
    let mut cmd = strace(
        &p,
        "inject=syncfs:delay_enter=2000000:when=1",
        &["--json", "undo", "--session=s"],
    );
    let child = spawn_piped(&mut cmd);
    std::thread::sleep(Duration::from_millis(1000));
    p.file("f1", "1\nagent\nUSER EDIT\n")
        .file("new1", "USER TEXT\n")
        .remove("new2");
    let run = finish(child, DEFAULT_DEADLINE, "undo");
    assert_no_panic(&run);
    run.assert_success();
    let o = one_json(&run);
    assert_eq!(p.read("f1"), b"1\nagent\nUSER EDIT\n", "{o}");
    assert_eq!(p.read("new1"), b"USER TEXT\n", "{o}");
    let mut conflicts = strings(&o["conflicts"]);
    conflicts.sort();
    assert_eq!(conflicts, vec!["f1", "new1"], "{o}");
    assert!(strings(&o["written"]).is_empty(), "{o}");
    assert!(!p.join("new2").exists(), "gone, as the undo wanted: {o}");
}

#[test]
fn restore_keeps_a_file_ignored_by_rules_outside_the_project_that_changed_since() {
    let sb = Sandbox::new();
    // The project is a subdirectory of a repository whose root .gitignore hides *.pem, and the
    // repository's info/exclude hides .env: neither file is in a snapshot's tree.
    let repo = sb.project("repo");
    repo.git_init().file(".gitignore", "*.pem\n");
    fs::write(repo.join(".git/info/exclude"), ".env\n").unwrap();
    let p = sb.project("repo/app");
    p.file("cert.pem", "PRIVATE KEY\n")
        .file(".env", "SECRET=1\n")
        .file("a", "a\n");
    let before = p.track();
    repo.file(".gitignore", ""); // a branch switch, say: both rules are gone now
    fs::write(repo.join(".git/info/exclude"), "").unwrap();
    p.file("a", "b\n");
    p.track();
    let o = rwj(&p, &["restore", &before]);
    assert_eq!(p.read("cert.pem"), b"PRIVATE KEY\n", "{o}");
    assert_eq!(p.read(".env"), b"SECRET=1\n", "{o}");
    let mut kept = strings(&o["kept"]);
    kept.sort();
    assert_eq!(kept, vec![".env", "cert.pem"], "{o}");
    assert_eq!(p.read("a"), b"a\n", "{o}");
}

#[test]
fn an_undo_that_could_not_write_everything_does_not_mark_the_turn_rolled_back() {
    let sb = Sandbox::new();
    let outside = sb.root.join("outside");
    fs::create_dir_all(&outside).unwrap();
    let p = sb.project("proj");
    p.file("d/x.txt", "x0\n");
    begin(&p, "1");
    p.file("d/x.txt", "x1\n");
    end(&p, "1");
    // d becomes a symlink out of the project while the undo is paused: d/x.txt fails.
    let mut cmd = strace(
        &p,
        "inject=syncfs:delay_enter=2000000:when=1",
        &["--json", "undo", "--session=s"],
    );
    let child = spawn_piped(&mut cmd);
    std::thread::sleep(Duration::from_millis(1000));
    fs::rename(p.join("d"), sb.root.join("d-moved")).unwrap();
    std::os::unix::fs::symlink(&outside, p.join("d")).unwrap();
    let run = finish(child, DEFAULT_DEADLINE, "undo");
    assert_eq!(run.code(), Some(1), "{run}");
    assert!(
        fs::read_dir(&outside).unwrap().next().is_none(),
        "nothing written outside"
    );
    let turns = rwj(&p, &["turns", "--session=s"]);
    assert_eq!(turns[0]["rolled_back"], false, "{turns}");
}

#[test]
fn undo_reports_files_the_turn_made_that_are_out_of_view_now() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a", "a\n");
    begin(&p, "1");
    p.file("debug.log", "junk\n").file("a", "b\n");
    end(&p, "1");
    p.file(".gitignore", "*.log\n"); // the user hides it between turns
    let o = rwj(&p, &["undo", "--session=s"]);
    assert_eq!(p.read("a"), b"a\n", "{o}");
    assert_eq!(p.read("debug.log"), b"junk\n", "left as it is: {o}");
    assert!(
        strings(&o["kept"]).contains(&"debug.log".to_string()),
        "and said so: {o}"
    );
}

#[test]
fn undo_makes_a_deleted_private_directory_private_again_whatever_the_umask() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("secrets/notes.txt", "api_key=XYZ\n")
        .chmod("secrets", 0o700);
    p.file("secrets/deep/more.txt", "m\n")
        .chmod("secrets/deep", 0o750);
    p.file("plain.txt", "p\n").chmod("plain.txt", 0o644);
    p.exec("run.sh", "#!/bin/sh\n").chmod("run.sh", 0o755);
    begin(&p, "1");
    fs::remove_dir_all(p.join("secrets")).unwrap();
    p.remove("plain.txt").remove("run.sh");
    end(&p, "1");
    // A loose umask (002) must not widen anything that comes back.
    let mut umask = Command::new("sh");
    umask.args(["-c", "umask 002; exec \"$@\"", "sh"]);
    let mut cmd = wrapped(&p, umask, &["--json", "undo", "--session=s"]);
    let run = run_with_deadline(&mut cmd, DEFAULT_DEADLINE);
    run.assert_success();
    assert_eq!(mode(&p, "secrets"), 0o700, "{run}");
    assert_eq!(mode(&p, "secrets/deep"), 0o750, "{run}");
    assert_eq!(mode(&p, "secrets/notes.txt"), 0o644, "{run}");
    assert_eq!(mode(&p, "plain.txt"), 0o644, "{run}");
    assert_eq!(mode(&p, "run.sh"), 0o755, "{run}");
}

#[test]
fn a_private_file_saved_by_force_comes_back_private() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.git_init()
        .file("a", "a\n")
        .file(".env", "OLD\n")
        .chmod(".env", 0o600);
    let before = p.track();
    fs::write(p.join(".git/info/exclude"), ".env\n").unwrap();
    p.file(".env", "NEWSECRET\n").chmod(".env", 0o600);
    let o = rwj(&p, &["restore", "--force", &before]);
    assert_eq!(p.read(".env"), b"OLD\n", "{o}");
    assert_eq!(mode(&p, ".env"), 0o600, "{o}");
    let undo = o["undo"].as_str().unwrap().to_string();
    p.remove(".env");
    let back = rwj(&p, &["restore", &undo]);
    assert_eq!(p.read(".env"), b"NEWSECRET\n", "{back}");
    assert_eq!(mode(&p, ".env"), 0o600, "{back}");
}

#[test]
fn restore_never_deletes_a_symlink_on_the_way_to_the_store() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a", "a\n");
    let before = p.track();
    // From now on the data dir is given through a symlink in the project.
    p.symlink("dlink", &sb.data_dir).file("a", "b\n");
    let via_link = |args: &[&str]| {
        let mut cmd = sb.rewind_command_no_data_dir(["--json", "--data-dir"]);
        cmd.arg(p.join("dlink"))
            .arg("-C")
            .arg(p.join(""))
            .args(args);
        let run = run_with_deadline(&mut cmd, DEFAULT_DEADLINE);
        run.assert_success();
        one_json(&run)
    };
    let o = via_link(&["restore", &before]);
    assert_eq!(strings(&o["kept"]), vec!["dlink"], "{o}");
    assert_eq!(p.read("a"), b"a\n", "{o}");
    assert_eq!(fs::read_link(p.join("dlink")).unwrap(), sb.data_dir);
    // The undo point is still reachable the same way.
    via_link(&["restore", o["undo"].as_str().unwrap()]);
    assert_eq!(p.read("a"), b"b\n");
    // A symlink that only points above the store (`..`) is an ordinary file of the project.
    p.symlink("up", "..");
    let with_up = p.track();
    p.remove("up");
    rwj(&p, &["restore", &before]); // with the data dir given directly, dlink is just a link
    let o = rwj(&p, &["restore", &with_up]);
    assert_eq!(fs::read_link(p.join("up")).unwrap(), Path::new(".."), "{o}");
}

// ---------------------------------------------------------------------------
// Two sessions on one project: an undo in one never reverts the other's work silently
// ---------------------------------------------------------------------------

fn turn(p: &TestProject, what: &str, session: &str, turn: &str) -> Value {
    rwj(
        p,
        &[
            "turn",
            what,
            &format!("--session={session}"),
            &format!("--turn={turn}"),
        ],
    )
}

#[test]
fn undo_in_one_session_leaves_a_turn_of_another_session_made_meanwhile() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("x", "base\n").file("y", "base\n");
    turn(&p, "begin", "A", "1");
    turn(&p, "begin", "B", "1");
    p.file("y", "B2\n");
    turn(&p, "end", "B", "1"); // B's whole turn inside A's
    p.file("x", "A1\n");
    turn(&p, "end", "A", "1");
    let o = rwj(&p, &["undo", "--session=A"]);
    assert_eq!(p.read("x"), b"base\n", "{o}");
    assert_eq!(p.read("y"), b"B2\n", "B's finished work stays: {o}");
    assert_eq!(strings(&o["conflicts"]), vec!["y"], "{o}");
}

#[test]
fn undo_in_one_session_does_not_bring_back_what_another_session_undid_meanwhile() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("x", "base\n").file("y", "base\n");
    turn(&p, "begin", "B", "1");
    p.file("y", "B-bad\n");
    turn(&p, "end", "B", "1");
    turn(&p, "begin", "A", "1");
    rwj(&p, &["undo", "--session=B"]);
    assert_eq!(p.read("y"), b"base\n");
    p.file("x", "A1\n");
    turn(&p, "end", "A", "1");
    let o = rwj(&p, &["undo", "--session=A"]);
    assert_eq!(p.read("x"), b"base\n", "{o}");
    assert_eq!(p.read("y"), b"base\n", "B's undo stays: {o}");
    // (Its whole change in A's turn is B's undo's: not A's, and no conflict, r72 F2.)
    assert_eq!(strings(&o["conflicts"]), Vec::<String>::new(), "{o}");
}

#[test]
fn non_utf8_names_in_restore_and_turn_output_are_quoted_as_git_quotes_them() {
    use std::os::unix::ffi::OsStrExt;
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.git_init().file("a", "a\n");
    let before = p.track();
    begin(&p, "1");
    let name = std::ffi::OsStr::from_bytes(b"bad\xfe");
    fs::write(p.join(name), "x\n").unwrap();
    fs::write(p.join(std::ffi::OsStr::from_bytes(b"bad\xfd")), "y\n").unwrap();
    let end = rw(&p, &["turn", "end", "--session=s", "--turn=1"]);
    end.assert_success();
    // git's own quoting of the same names is the oracle.
    p.git(["add", "-A"]);
    let git_names = p.git(["-c", "core.quotePath=true", "ls-files", "bad*"]);
    let git_names: Vec<&str> = git_names.lines().collect();
    assert_eq!(git_names, vec!["\"bad\\375\"", "\"bad\\376\""]);
    for name in &git_names {
        assert!(end.stdout.contains(name), "turn end prints {name}: {end}");
    }
    let restore = rw(&p, &["restore", &before]);
    restore.assert_success();
    for name in &git_names {
        assert!(
            restore.stdout.contains(&format!("deleted {name}")),
            "{restore}"
        );
    }
}

/// Found in a full run (`turns::concurrent_track_file_begins_the_turn_once` failed once under
/// load): opening a store looked at its path twice (`stat`, then `lstat`), so a store another
/// process created between the two read as "is not a directory; move it away to start a new
/// store", and the command failed. Here the first look pauses 1 s after it found nothing
/// (strace, only for syscalls on the store's path) while another `track` creates the store.
#[test]
fn a_store_created_by_another_process_mid_open_is_opened_not_refused() {
    require_tool("strace", "to pause a syscall");
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n");
    // The store's name depends on the project only: ask for it under another data dir.
    let probe = sb.root.join("probe");
    let mut path = p.rewind_command(["path"]);
    path.arg("--data-dir").arg(&probe);
    let out = path.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let name = Path::new(std::str::from_utf8(&out.stdout).unwrap().trim())
        .file_name()
        .unwrap()
        .to_owned();
    let git_dir = sb.data_dir.join(name);
    let mut outer = Command::new("strace");
    outer
        .args(["-f", "-qq", "-o", "/dev/null", "-P"])
        .arg(&git_dir)
        .args([
            "-e",
            "trace=statx",
            "-e",
            "inject=statx:delay_exit=1000000:when=1",
        ]);
    let mut slow = wrapped(&p, outer, &["track"]);
    let child = spawn_piped(&mut slow);
    std::thread::sleep(Duration::from_millis(300));
    let tree = p.track(); // creates the store meanwhile
    let run = finish(child, DEFAULT_DEADLINE, "track paused at its first look");
    assert_eq!(run.code(), Some(0), "{run}");
    assert_eq!(run.stdout.trim(), tree, "{run}");
    assert!(git_dir.join("objects").is_dir());
}

/// Found by the issue-13 hostile pass: restore and undo checked that a file still held what the
/// undo point saw, then replaced it; a save landing between the check and the rename was
/// overwritten and lost (its bytes in neither the undo point nor the store), reported as a
/// clean `written`. The undo here pauses 1.5 s at the rename that replaces `f.txt`; the user
/// saves meanwhile: the save must survive, as a conflict.
#[test]
fn a_save_landing_between_the_check_and_the_rename_of_an_undo_is_kept() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("f.txt", "orig\n");
    begin(&p, "1");
    p.file("f.txt", "agent\n");
    end(&p, "1");
    let mut cmd = strace(
        &p,
        "inject=renameat2:delay_enter=1500000:when=1",
        &["--json", "undo", "--session=s", "--last"],
    );
    let child = spawn_piped(&mut cmd);
    std::thread::sleep(Duration::from_millis(800));
    p.file("f.txt", "USER TYPED THIS\n");
    let run = finish(child, DEFAULT_DEADLINE, "undo");
    assert_no_panic(&run);
    let o = one_json(&run);
    assert_eq!(p.read("f.txt"), b"USER TYPED THIS\n", "{o}");
    assert_eq!(strings(&o["conflicts"]), vec!["f.txt"], "{o}");
    assert!(strings(&o["written"]).is_empty(), "{o}");
}

/// The same for a deletion: restore pauses 1.5 s at its first step on `new.txt` (the agent's
/// file, absent from the target: the unlink, or the rename that now takes it out of the way
/// first); the user writes into it meanwhile.
#[test]
fn a_save_landing_between_the_check_and_the_delete_of_a_restore_is_kept() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n");
    let before = p.track();
    p.file("new.txt", "agent\n");
    p.track();
    let mut cmd = strace(
        &p,
        "inject=renameat2,unlinkat:delay_enter=1500000:when=1",
        &["--json", "restore", &before],
    );
    let child = spawn_piped(&mut cmd);
    std::thread::sleep(Duration::from_millis(800));
    p.file("new.txt", "USER WORK\n");
    let run = finish(child, DEFAULT_DEADLINE, "restore");
    assert_no_panic(&run);
    let o = one_json(&run);
    assert_eq!(p.read("new.txt"), b"USER WORK\n", "{o}");
    assert_eq!(strings(&o["conflicts"]), vec!["new.txt"], "{o}");
    assert!(strings(&o["deleted"]).is_empty(), "{o}");
    let names: Vec<String> = fs::read_dir(&p.path)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".rewind"))
        .collect();
    assert!(names.is_empty(), "nothing left behind: {names:?}");
}

/// Found by the second issue-13 hostile pass: after the swap, restore compared what came out
/// with what it had checked by inode, size and mtime only, so a same-size write whose writer
/// put the mtime back (`touch -r`, `cp -p`, `rsync -t`) in the window was taken for the
/// undo point's file and deleted. Its content decides now.
#[test]
fn a_same_size_save_that_puts_the_mtime_back_is_kept() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("f.txt", "orig\n");
    let before = p.track();
    p.file("f.txt", "v2!!\n");
    p.track();
    let mut cmd = strace(
        &p,
        "inject=renameat2:delay_enter=1500000:when=1",
        &["--json", "restore", &before],
    );
    let child = spawn_piped(&mut cmd);
    std::thread::sleep(Duration::from_millis(800));
    let path = p.join("f.txt");
    let mtime = fs::metadata(&path).unwrap().modified().unwrap();
    let file = fs::OpenOptions::new().write(true).open(&path).unwrap();
    std::io::Write::write_all(&mut &file, b"USER").unwrap();
    file.set_modified(mtime).unwrap();
    drop(file);
    let run = finish(child, DEFAULT_DEADLINE, "restore");
    assert_no_panic(&run);
    let o = one_json(&run);
    assert_eq!(p.read("f.txt"), b"USER\n", "{o}");
    assert_eq!(strings(&o["conflicts"]), vec!["f.txt"], "{o}");
}

/// Found by the issue-18 hostile pass: prune removed an expired session, then marked the older
/// open turn of another session "blind" (what it could know of the removed session is gone).
/// A `kill -9` between the two left the turn unmarked, and its end then took the removed
/// session's announced edit for its own: `undo` reverted another session's work. The marks are
/// now written before anything goes; here prune is killed at each of its renames in turn.
#[test]
fn a_prune_killed_at_any_rename_never_lets_an_open_turn_take_another_sessions_edit() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    let at = |now: &str, args: &[&str]| crate::common::at(&p, now, args);
    p.file("a.txt", "a\n").file("x.txt", "x\n");
    at(
        "2026-12-01T00:00:00Z",
        &["turn", "begin", "--session", "A", "--turn", "1"],
    );
    let b = |args: &[&str]| at("2026-12-01T01:00:00Z", args);
    b(&["turn", "begin", "--session", "B", "--turn", "1"]);
    b(&[
        "turn",
        "track-file",
        "--session",
        "B",
        "--turn",
        "1",
        "x.txt",
    ]);
    p.file("x.txt", "x\nB's edit\n");
    b(&["turn", "end", "--session", "B", "--turn", "1"]);
    let now = "2026-12-09T00:00:00Z";
    kill_at_each_rename(&sb, &p, now, &["prune"], |when| {
        at(now, &["prune"]);
        p.file("a.txt", "a\nA's edit\n");
        let ended = one_json(&at(
            now,
            &["--json", "turn", "end", "--session", "A", "--turn", "1"],
        ));
        let x = ended["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["file"] == "x.txt");
        assert!(
            x.is_some_and(|x| x["origin"] == "shared"),
            "killed at rename {when}: B's announced edit is not A's: {ended}"
        );
        at(now, &["undo", "--session", "A", "--turn", "1"]);
        assert_eq!(p.read("x.txt"), b"x\nB's edit\n", "killed at rename {when}");
    });
}

/// Found by the issue-18 hostile pass: a trim moved each kept turn's ref, then the head, then
/// deleted the dropped turns' refs, one at a time; `kill -9` in between left turns off the
/// chain for good (`turns` listed 4, 5, 3; the next prune then removed the newest turns, and
/// `undo` deleted files with the empty tree as "before"). A trim now moves every ref in one
/// write of `packed-refs`. Prune is killed at each of its renames in turn.
#[test]
fn a_trim_killed_at_any_rename_leaves_the_old_chain_or_the_new() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    let at = |now: &str, args: &[&str]| crate::common::at(&p, now, args);
    let now = "2026-12-01T06:00:00Z";
    for t in 1..=5 {
        let turn = t.to_string();
        at(now, &["turn", "begin", "--session", "s", "--turn", &turn]);
        p.file(format!("f{t}.txt"), format!("{t}\n"));
        at(now, &["turn", "end", "--session", "s", "--turn", &turn]);
    }
    let ids = || -> Vec<String> {
        let turns = one_json(&at(now, &["--json", "turns", "--session", "s"]));
        let rows = turns.as_array().unwrap().iter();
        rows.map(|t| t["turn"].as_str().unwrap().to_string())
            .collect()
    };
    kill_at_each_rename(&sb, &p, now, &["prune", "--max-turns", "3"], |when| {
        let left = ids();
        assert!(
            left == ["1", "2", "3", "4", "5"] || left == ["3", "4", "5"],
            "killed at rename {when}: turns {left:?}"
        );
        at(now, &["prune", "--max-turns", "3"]);
        assert_eq!(ids(), ["3", "4", "5"], "killed at rename {when}");
        p.assert_fsck_clean();
        at(now, &["undo", "--session", "s", "--turn", "4"]);
        assert!(!p.join("f4.txt").exists() && !p.join("f5.txt").exists());
        assert!(
            p.join("f3.txt").exists(),
            "killed at rename {when}: turn 3 is not undone"
        );
    });
}

/// Run `rewind ARGS` at `now`, killed at its first rename, then (from the same project and
/// store again) at its second, and so on until it completes; `check(n)` runs after each kill
/// at rename `n`. Asserts it was killed at more than three renames. Costs a copy of the project
/// and the data dir per run.
fn kill_at_each_rename(
    sb: &Sandbox,
    p: &TestProject,
    now: &str,
    args: &[&str],
    mut check: impl FnMut(u32),
) {
    let saved = sb.root.join("saved");
    fs::create_dir_all(&saved).unwrap();
    let copy = |from: &Path, to: &Path| {
        let _ = fs::remove_dir_all(to);
        let status = Command::new("cp")
            .arg("-a")
            .arg(from)
            .arg(to)
            .status()
            .unwrap();
        assert!(status.success());
    };
    copy(&sb.data_dir, &saved.join("data"));
    copy(&p.path, &saved.join("proj"));
    let mut killed = 0;
    for when in 1.. {
        copy(&saved.join("data"), &sb.data_dir);
        copy(&saved.join("proj"), &p.path);
        let inject = format!("inject=rename,renameat,renameat2:signal=KILL:when={when}");
        let mut cmd = strace(p, &inject, args);
        cmd.env("REWIND_NOW", now);
        let run = run_with_deadline(&mut cmd, DEFAULT_DEADLINE);
        assert_no_panic(&run);
        if run.code() == Some(0) {
            break; // fewer renames than `when`: every point was tried
        }
        killed += 1;
        check(when);
    }
    assert!(
        killed > 3,
        "`rewind {}` was killed at only {killed} renames",
        args.join(" ")
    );
}

/// Found by the hostile pass of stop 59 (r116 (3)): a read-only directory (0555) that a turn
/// deleted could never be put back by its owner (not root): the undo made it 0555 first, then
/// could not stage its files in it (`failed`, exit 1, every time, with the empty directory
/// left). It is made writable, filled, then narrowed to its recorded bits. (Runs rewind as
/// `nobody` through `setpriv`, which needs root, as `.ci/run` is.)
#[test]
fn a_read_only_directory_a_turn_deleted_comes_back_for_its_owner() {
    use std::os::unix::fs::{lchown, PermissionsExt};
    require_tool("setpriv", "to run rewind as a user other than root");
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("vendor/a.txt", "a\n")
        .file("vendor/b.txt", "b\n")
        .file("top.txt", "top\n");
    fn give_to_nobody(path: &Path) {
        lchown(path, Some(65534), Some(65534))
            .expect("giving the sandbox to nobody needs root (run the tests as root)");
        if fs::symlink_metadata(path).unwrap().is_dir() {
            for entry in fs::read_dir(path).unwrap() {
                give_to_nobody(&entry.unwrap().path());
            }
        }
    }
    give_to_nobody(&sb.root);
    fs::set_permissions(p.join("vendor"), fs::Permissions::from_mode(0o555)).unwrap();
    let as_nobody = |args: &[&str]| {
        let mut setpriv = Command::new("setpriv");
        setpriv.args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
        let run = run_with_deadline(&mut wrapped(&p, setpriv, args), DEFAULT_DEADLINE);
        assert_no_panic(&run);
        run
    };
    as_nobody(&["turn", "begin", "--session=s", "--turn=1"]).assert_success();
    fs::set_permissions(p.join("vendor"), fs::Permissions::from_mode(0o755)).unwrap();
    fs::remove_dir_all(p.join("vendor")).unwrap();
    as_nobody(&["turn", "end", "--session=s", "--turn=1"]).assert_success();
    let run = as_nobody(&["--json", "undo", "--session=s", "--last"]);
    run.assert_success();
    assert_eq!(p.read("vendor/a.txt"), b"a\n", "{run}");
    assert_eq!(p.read("vendor/b.txt"), b"b\n", "{run}");
    let mode = fs::metadata(p.join("vendor")).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o555, "{run}");
}
