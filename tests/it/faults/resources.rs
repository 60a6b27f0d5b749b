//! Resources running out or denied: a full disk, unreadable files.

use super::*;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs mounted on a directory; unmounted when dropped.
struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    /// Fails the test unless the mount works (it needs root).
    fn mount(dir: &Path, size: &str) -> Tmpfs {
        fs::create_dir_all(dir).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .unwrap_or_else(|e| panic!("this test needs `mount` (as root): {e}"));
        assert!(
            out.status.success(),
            "this test mounts a tmpfs, which needs root: mount failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Tmpfs {
            dir: dir.to_path_buf(),
        }
    }

    fn resize(&self, size: &str) {
        let st = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.dir)
            .status()
            .unwrap();
        assert!(st.success(), "remount of {}", self.dir.display());
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.dir)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        }
    }
}

/// Random (incompressible) bytes.
fn noise(rng: &mut XorShift, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        v.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    v.truncate(len);
    v
}

#[test]
fn full_disk_fails_cleanly_and_recovers_once_space_is_freed() {
    let sb = Sandbox::new();
    let disk = Tmpfs::mount(&sb.data_dir, "2m");
    let mut rng = XorShift::from_time();
    let p = sb.project("proj");
    for i in 0..60 {
        p.file(format!("big/f{i:02}.bin"), noise(&mut rng, 100_000));
    }
    let check_full = |run: &Run, what: &str| {
        let (code, message) = failure(run);
        assert_eq!(code, "disk_full", "{what}: {run}");
        assert!(message.contains("disk full"), "{what}: {run}");
        assert!(run.stderr.contains("disk full"), "{what}: {run}");
    };

    // 1. The first snapshot (written as a pack) does not fit.
    let before = fs_snapshot(&p.path);
    let run = p.rewind(["--json", "track"]);
    check_full(&run, "first track");
    let store = p.store();
    assert_objects_sound(&sb, &store, "after a first track on a full disk");
    assert_eq!(
        store_temp_files(&store),
        Vec::<PathBuf>::new(),
        "temp files left"
    );
    assert_same_snapshot(&before, &fs_snapshot(&p.path), "the project");

    // 2. A small snapshot fits; then new big files (loose objects) do not.
    fs::rename(p.join("big"), sb.root.join("big-aside")).unwrap();
    p.file("small.txt", "small\n");
    let small = p.track();
    fs::rename(sb.root.join("big-aside"), p.join("big")).unwrap();
    let run = p.rewind(["--json", "track"]);
    check_full(&run, "incremental track");
    assert_objects_sound(&sb, &store, "after an incremental track on a full disk");
    assert_eq!(
        store_temp_files(&store),
        Vec::<PathBuf>::new(),
        "temp files left"
    );

    // 3. A restore must save the project first: it cannot, so it changes nothing.
    let before = fs_snapshot(&p.path);
    check_full(&p.rewind(["--json", "restore", &small]), "restore");
    assert_same_snapshot(
        &before,
        &fs_snapshot(&p.path),
        "the project after a failed restore",
    );
    check_full(
        &p.rewind(["--json", "turn", "begin", "--session=s", "--turn=1"]),
        "turn begin",
    );
    assert_same_snapshot(
        &before,
        &fs_snapshot(&p.path),
        "the project after a failed turn begin",
    );
    assert_objects_sound(&sb, &store, "after the failed restore");

    // 4. Space freed: everything works again.
    disk.resize("64m");
    let t = p.track_matches_git();
    let o = rwj(&p, &["restore", &small]);
    assert_eq!(o["failed"], Value::Array(vec![]), "{o}");
    assert!(!p.join("big").exists());
    let o = rwj(&p, &["restore", o["undo"].as_str().unwrap()]);
    assert_eq!(o["failed"], Value::Array(vec![]), "{o}");
    assert_eq!(p.track(), t.hash, "the big files are back");
    assert_objects_sound(&sb, &store, "after recovery");
    drop(disk);
}

#[test]
fn unreadable_files_are_reported_and_the_rest_is_snapshotted() {
    let sb = Sandbox::new();
    let setpriv = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "true"])
        .status();
    assert!(
        setpriv.is_ok_and(|s| s.success()),
        "this test runs commands as nobody with `setpriv`, which needs root (root can read any file)"
    );
    fs::set_permissions(&sb.root, fs::Permissions::from_mode(0o755)).unwrap();
    let p = sb.project("proj");
    p.file("a.txt", "a\n")
        .file("secret.txt", "secret A\n")
        .file("locked/x.txt", "x A\n")
        .file("open/y.txt", "y\n");
    fs::create_dir_all(&sb.data_dir).unwrap();
    let chown_all = || {
        let st = Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(&p.path)
            .arg(&sb.data_dir)
            .status()
            .unwrap();
        assert!(st.success());
    };
    chown_all();
    let as_nobody = |args: &[&str]| -> Run {
        let mut cmd = sb.isolated("setpriv");
        cmd.env("RUST_BACKTRACE", "1")
            .current_dir(&sb.root)
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(rewind_bin())
            .arg("--data-dir")
            .arg(&sb.data_dir)
            .arg("-C")
            .arg(&p.path)
            .args(args);
        let run = run_with_deadline(&mut cmd, DEFAULT_DEADLINE);
        assert_no_panic(&run);
        run
    };
    let run = as_nobody(&["--json", "track"]);
    run.assert_success();
    let a = Tracked::parse(&run.stdout).hash;

    // Now unreadable: a file (mode 000) and a directory (mode 000), both changed meanwhile.
    p.file("secret.txt", "secret B\n")
        .file("locked/x.txt", "x B\n");
    p.chmod("secret.txt", 0o000).chmod("locked", 0o000);
    p.file("a.txt", "a changed\n");
    chown_all();
    let run = as_nobody(&["--json", "track"]);
    run.assert_success();
    let t = Tracked::parse(&run.stdout);
    t.assert_skipped("secret.txt", "unreadable");
    t.assert_skipped("locked", "unreadable");
    assert_eq!(t.skipped.len(), 2, "{}", t.json);
    for s in t.json["skipped"].as_array().unwrap() {
        assert!(
            s["detail"]
                .as_str()
                .is_some_and(|d| d.contains("ermission")),
            "the reason names the cause: {s}"
        );
    }
    assert_eq!(t.hash, p.git_tree_excluding(&["secret.txt", "locked"]).id);
    let run = as_nobody(&["track"]);
    run.assert_success();
    assert!(
        run.stderr.contains("secret.txt") && run.stderr.contains("unreadable"),
        "plain track says what it left out: {run}"
    );

    // A restore to A must not overwrite what it could not save; --force fails cleanly.
    let run = as_nobody(&["--json", "restore", &a]);
    assert!(run.code() == Some(0) || run.code() == Some(1), "{run}");
    let o = one_json(&run);
    let conflicts: Vec<&str> = o["conflicts"]
        .as_array()
        .map(|c| c.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    assert!(conflicts.contains(&"secret.txt"), "{run}");
    let run = as_nobody(&["--json", "restore", "--force", &a]);
    assert_no_panic(&run);
    p.chmod("secret.txt", 0o644).chmod("locked", 0o755);
    assert_eq!(
        p.read("secret.txt"),
        b"secret B\n",
        "never overwritten unsaved"
    );
    assert_eq!(
        p.read("locked/x.txt"),
        b"x B\n",
        "never overwritten unsaved"
    );
    if !run.status.success() {
        let v = one_json(&run);
        let text = v.to_string();
        assert!(
            text.contains("secret.txt") || text.contains("locked"),
            "{run}"
        );
    }
    assert_fsck_clean(&sb, &p.store());
}
