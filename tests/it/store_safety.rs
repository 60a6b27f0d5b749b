//! Store safety: turn order that does not trust the clock, retention that spares open turns,
//! stores that stock git has repacked, unreadable stores, and the privacy of the store.
//! git (on the store) is the oracle for what the store holds.

use crate::common;

use std::process::Command;

use crate::common::{at, one_json, rw_at, Run, Sandbox, TestProject, Value};

/// `2026-12-01T<hh:mm>:00Z`.
fn time(hh_mm: &str) -> String {
    format!("2026-12-01T{hh_mm}:00Z")
}

/// One turn of session `s` at `now`: begin, write `file`, end.
fn turn(p: &TestProject, now: &str, session: &str, turn: &str, file: &str) {
    at(
        p,
        now,
        &["turn", "begin", "--session", session, "--turn", turn],
    );
    p.file(file, format!("written in turn {turn}\n"));
    at(
        p,
        now,
        &["turn", "end", "--session", session, "--turn", turn],
    );
}

/// `turns --json` (of `session`, or all): (session, turn, rolled_back) in listed order.
fn turns(p: &TestProject, now: &str, session: Option<&str>) -> Vec<(String, String, bool)> {
    let mut args = vec!["--json", "turns"];
    if let Some(session) = session {
        args.extend(["--session", session]);
    }
    let listed: Value = one_json(&at(p, now, &args));
    listed
        .as_array()
        .unwrap_or_else(|| panic!("`turns --json` prints an array: {listed}"))
        .iter()
        .map(|t| {
            (
                t["session"].as_str().unwrap().to_string(),
                t["turn"].as_str().unwrap().to_string(),
                t["rolled_back"].as_bool().unwrap(),
            )
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Turn order
// ---------------------------------------------------------------------------

/// Issue 12 item 7: turns were ordered by their timestamps, so after the clock stepped back
/// `undo --session s --turn 2` also marked turn 1 rolled back without undoing it.
#[test]
fn turns_follow_the_session_chain_when_the_clock_steps_back() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("base.txt", "base\n");
    turn(&p, &time("10:00"), "s", "1", "f1.txt");
    turn(&p, &time("09:00"), "s", "2", "f2.txt"); // the clock stepped back an hour
    turn(&p, &time("09:30"), "s", "3", "f3.txt");
    // Another session in between, to check that listing all sessions keeps each one's order.
    turn(&p, &time("09:45"), "other", "x", "x.txt");
    let now = time("11:00");
    let order: Vec<String> = turns(&p, &now, Some("s"))
        .into_iter()
        .map(|(_, t, _)| t)
        .collect();
    assert_eq!(order, ["1", "2", "3"], "the chain's order, not the clock's");
    let all: Vec<(String, String)> = turns(&p, &now, None)
        .into_iter()
        .map(|(s, t, _)| (s, t))
        .filter(|(s, _)| s == "s")
        .collect();
    let all: Vec<&str> = all.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(
        all,
        ["1", "2", "3"],
        "listing every session keeps the chain order"
    );

    at(&p, &now, &["undo", "--session", "s", "--turn", "2"]);
    assert!(p.join("f1.txt").exists(), "turn 1 is not undone");
    assert!(!p.join("f2.txt").exists() && !p.join("f3.txt").exists());
    let states: Vec<(String, bool)> = turns(&p, &now, Some("s"))
        .into_iter()
        .map(|(_, t, rolled_back)| (t, rolled_back))
        .collect();
    assert_eq!(
        states,
        [
            ("1".to_string(), false),
            ("2".to_string(), true),
            ("3".to_string(), true)
        ],
        "only the undone turns are marked rolled back"
    );
    p.assert_fsck_clean();
}

// ---------------------------------------------------------------------------
// A store that stock git has repacked
// ---------------------------------------------------------------------------

/// `git --git-dir <store> ARGS` in the sandbox; asserts success.
fn git_store(sb: &Sandbox, store: &std::path::Path, args: &[&str]) -> String {
    sb.git_in(store, args)
}

/// `doctor --json` at `now`: (exit code, the report). The report is the one JSON document on
/// stdout, unhealthy or not (an unhealthy store added an error document after it, which a
/// JSON parser refuses: found by the issue-13 hostile pass).
fn doctor(p: &TestProject, now: &str) -> (Option<i32>, Value) {
    let run = rw_at(p, Some(now), &["--json", "doctor"]);
    (run.code(), one_json(&run))
}

/// Issue 12 item 10: after `git gc` and `git multi-pack-index write` in the store, a prune that
/// repacked deleted the packs the multi-pack-index named and left the index: every snapshot
/// became "no snapshot", while `doctor` (which asked rewind's own pack list) said every
/// object was present.
#[test]
fn prune_after_git_repack_midx_bitmaps_and_commit_graph_keeps_every_snapshot_readable() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    // An old snapshot whose record expires (so its packed objects make prune repack)...
    p.file("old.txt", "only in the old snapshot\n");
    at(&p, &time("00:00").replace("12-01", "11-20"), &["track"]);
    p.remove("old.txt");
    // ...and three live ones.
    let mut snapshots = Vec::new();
    for (i, when) in ["01:00", "02:00", "03:00"].into_iter().enumerate() {
        p.file("a.txt", format!("version {i}\n"));
        p.file(format!("f{i}.txt"), format!("file {i}\n"));
        let tree = at(&p, &time(when), &["track"]).stdout.trim().to_string();
        snapshots.push(tree);
        if i == 1 {
            at(
                &p,
                &time(when),
                &["turn", "begin", "--session", "s", "--turn", "1"],
            );
        }
    }
    at(
        &p,
        &time("03:00"),
        &["turn", "end", "--session", "s", "--turn", "1"],
    );
    let store = p.store();
    // Everything stock git writes beside packs.
    git_store(&sb, &store, &["gc", "-q"]);
    git_store(
        &sb,
        &store,
        &["repack", "-a", "-d", "-q", "--write-bitmap-index"],
    );
    p.file("late.txt", "written after the repack\n");
    snapshots.push(at(&p, &time("04:00"), &["track"]).stdout.trim().to_string());
    git_store(&sb, &store, &["repack", "-d", "-q"]); // a second pack
    git_store(&sb, &store, &["multi-pack-index", "write", "--bitmap"]);
    git_store(&sb, &store, &["commit-graph", "write", "--reachable"]);
    git_store(&sb, &store, &["update-server-info"]);
    git_store(&sb, &store, &["pack-refs", "--all"]);
    assert!(store.join("objects/pack/multi-pack-index").is_file());

    let later = time("12:00");
    let pruned = one_json(&at(&p, &later, &["--json", "prune", "--retention", "3d"]));
    assert_eq!(pruned["snapshots_removed"], 1, "{pruned}");
    assert!(pruned["objects_removed"].as_u64().unwrap() > 0, "{pruned}");

    // Every live snapshot reads back: diff between each pair, and a restore of each.
    for pair in snapshots.windows(2) {
        at(&p, &later, &["diff", &pair[0], &pair[1]]);
    }
    for (i, tree) in snapshots.iter().enumerate() {
        at(&p, &later, &["restore", tree]);
        let version = i.min(2);
        assert_eq!(p.read("a.txt"), format!("version {version}\n").into_bytes());
    }
    let (code, report) = doctor(&p, &later);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["missing"], serde_json::json!([]), "{report}");
    common::assert_fsck_clean(&sb, &store);
    // git's side files name only packs that exist.
    let verify = sb.git_in_run(&store, ["multi-pack-index", "verify"]);
    assert!(
        !store.join("objects/pack/multi-pack-index").exists() || verify.status.success(),
        "{verify}"
    );
    let graph = sb.git_in_run(&store, ["commit-graph", "verify"]);
    assert!(graph.status.success(), "{graph}");
    let packs = std::fs::read_to_string(store.join("objects/info/packs")).unwrap_or_default();
    for line in packs.lines().filter_map(|l| l.strip_prefix("P ")) {
        assert!(
            store.join("objects/pack").join(line).is_file(),
            "objects/info/packs names a deleted pack: {packs}"
        );
    }
}

/// Issue 12 item 10, the other half: `doctor` asked rewind's own pack list whether objects were
/// there, while restore reads through gix's object database, so with a multi-pack-index that
/// names a pack no longer there (as stale ones were left) doctor said "every object the records
/// reach is present" and every restore said "no snapshot".
#[test]
fn doctor_reads_objects_as_restore_does_under_a_stale_multi_pack_index() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    let mut snapshots = Vec::new();
    for (i, when) in ["01:00", "02:00", "03:00"].into_iter().enumerate() {
        p.file("a.txt", format!("version {i}\n"));
        snapshots.push(at(&p, &time(when), &["track"]).stdout.trim().to_string());
    }
    let store = p.store();
    git_store(&sb, &store, &["repack", "-a", "-d", "-q"]);
    git_store(&sb, &store, &["multi-pack-index", "write"]);
    let midx = std::fs::read(store.join("objects/pack/multi-pack-index")).unwrap();
    // An unreachable packed object, so that prune repacks (and deletes the indexed pack).
    let junk = sb.root.join("junk");
    std::fs::write(&junk, "an unreachable object, packed\n").unwrap();
    let id = git_store(&sb, &store, &["hash-object", "-w", junk.to_str().unwrap()]);
    let mut pack = sb.git_command(None);
    pack.arg("--git-dir")
        .arg(&store)
        .args(["pack-objects", "-q"]);
    pack.arg(store.join("objects/pack/pack"));
    common::run_with_stdin(&mut pack, id.as_bytes()).assert_success();
    git_store(&sb, &store, &["prune-packed"]);
    let now = time("05:00");
    let pruned = one_json(&at(&p, &now, &["--json", "prune"]));
    assert_eq!(pruned["objects_removed"], 1, "a repack: {pruned}");
    // Someone puts the old multi-pack-index back: it names a pack that is gone.
    std::fs::write(store.join("objects/pack/multi-pack-index"), midx).unwrap();
    let unreadable: Vec<&String> = snapshots
        .iter()
        .filter(|tree| !rw_at(&p, Some(&now), &["diff", tree]).status.success())
        .collect();
    let (code, report) = doctor(&p, &now);
    if unreadable.is_empty() {
        assert_eq!(
            code,
            Some(0),
            "every snapshot reads, so doctor must agree: {report}"
        );
    } else {
        assert_eq!(
            code,
            Some(1),
            "snapshots {unreadable:?} cannot be read; doctor must say so: {report}"
        );
        assert_ne!(report["missing"], serde_json::json!([]), "{report}");
    }
}

// ---------------------------------------------------------------------------
// Unreadable stores, private stores
// ---------------------------------------------------------------------------

/// `program ARGS` as user and group nobody (65534), in the sandbox's scrubbed environment.
/// Needs root and `setpriv`: without them the test fails (it cannot prove anything).
fn as_nobody<S: AsRef<std::ffi::OsStr>>(
    sb: &Sandbox,
    program: &std::path::Path,
    args: &[S],
) -> Run {
    let mut cmd = sb.isolated("setpriv");
    cmd.current_dir(&sb.root)
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(program)
        .args(args);
    let run = common::run_with_deadline(&mut cmd, common::DEFAULT_DEADLINE);
    assert!(
        !run.stderr.contains("setpriv:"),
        "this test runs commands as nobody with setpriv, as root: {run}"
    );
    common::assert_no_panic(&run);
    run
}

/// `rewind --data-dir D -C P ARGS` as nobody.
fn rewind_as_nobody(p: &TestProject, args: &[&str]) -> Run {
    let mut all: Vec<std::ffi::OsString> = vec!["--data-dir".into(), p.sb.data_dir.clone().into()];
    all.extend(["-C".into(), p.path.clone().into()]);
    all.extend(args.iter().map(|a| a.into()));
    as_nobody(p.sb, &common::rewind_bin(), &all)
}

fn chown_nobody(path: &std::path::Path) {
    let status = Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success(), "chown {}", path.display());
}

fn chmod(path: &std::path::Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn mode(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// The names in the data directory (less its marker file).
fn data_dir_names(sb: &Sandbox) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(&sb.data_dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name != "rewind-data.tag")
        .collect();
    names.sort();
    names
}

/// Issue 12 item 11: a store its user could not read (mode 000 here; umask 077 and another
/// user in real life) looked like a store without `objects/`, so it was renamed to
/// `*.damaged-PID` and replaced by an empty one, silently; `prune --all` skipped it silently.
/// Only proven damage sets a store aside, and that is always reported.
#[test]
fn unreadable_store_is_a_permission_error_never_set_aside() {
    let sb = Sandbox::new();
    chmod(&sb.root, 0o755);
    let p = sb.project("proj");
    p.file("a.txt", "a\n");
    std::fs::create_dir_all(&sb.data_dir).unwrap();
    chown_nobody(&p.path);
    chown_nobody(&sb.data_dir);
    let run = rewind_as_nobody(&p, &["track"]);
    run.assert_success();
    let tree = run.stdout.trim().to_string();
    let names = data_dir_names(&sb);
    assert_eq!(names.len(), 1, "{names:?}");
    let store = sb.data_dir.join(&names[0]);

    chmod(&store, 0o000);
    for args in [&["--json", "track"][..], &["--json", "diff", &tree]] {
        let run = rewind_as_nobody(&p, args);
        assert_eq!(run.code(), Some(1), "{run}");
        let error = one_json(&run);
        assert_eq!(error["error"]["code"], "permission", "{run}");
        assert!(
            error["error"]["message"]
                .as_str()
                .unwrap()
                .contains(store.to_str().unwrap()),
            "the message names the store: {run}"
        );
    }
    assert_eq!(data_dir_names(&sb), names, "nothing set aside or created");
    assert_eq!(mode(&store), 0o000, "the store is left as it is");
    let all = rewind_as_nobody(&p, &["--json", "prune", "--all"]);
    assert_eq!(
        all.code(),
        Some(1),
        "a store prune --all cannot read fails it: {all}"
    );
    assert!(all.stderr.contains(store.to_str().unwrap()), "{all}");
    // Under --json the failure is a row of the one document, not only a line on stderr
    // (issue-13 hostile pass).
    let rows = one_json(&all);
    let failed: Vec<&Value> = (rows.as_array().unwrap().iter())
        .filter(|row| row["error"]["code"] == "permission")
        .collect();
    assert_eq!(failed.len(), 1, "{all}");
    assert!(
        failed[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains(store.to_str().unwrap()),
        "{all}"
    );

    // Readable again, but not its objects: the same error, nothing set aside.
    chmod(&store, 0o700);
    chmod(&store.join("objects"), 0o000);
    let run = rewind_as_nobody(&p, &["--json", "diff", &tree]);
    assert_eq!(run.code(), Some(1), "{run}");
    assert_eq!(one_json(&run)["error"]["code"], "permission", "{run}");
    assert_eq!(data_dir_names(&sb), names, "nothing set aside or created");
    chmod(&store.join("objects"), 0o755);

    // Readable again: everything is still there.
    let run = rewind_as_nobody(&p, &["track"]);
    run.assert_success();
    assert_eq!(run.stdout.trim(), tree);
    assert!(run.stderr.is_empty(), "{run}");
    rewind_as_nobody(&p, &["diff", &tree]).assert_success();

    // Proven damage (objects/ really gone) sets the store aside, and says so every time it
    // is looked at.
    std::fs::remove_dir_all(store.join("objects")).unwrap();
    let run = rewind_as_nobody(&p, &["track"]);
    run.assert_success();
    let aside: Vec<String> = data_dir_names(&sb)
        .into_iter()
        .filter(|n| n.contains(".damaged-"))
        .collect();
    assert_eq!(aside.len(), 1, "{:?}", data_dir_names(&sb));
    assert!(
        run.stderr.contains(&aside[0]),
        "the set-aside is reported: {run}"
    );
    let doctor = rewind_as_nobody(&p, &["--json", "doctor"]);
    doctor.assert_success();
    let report = one_json(&doctor);
    let listed = report["set_aside"]
        .as_array()
        .unwrap_or_else(|| panic!("{report}"));
    assert_eq!(listed.len(), 1, "{report}");
    assert!(listed[0].as_str().unwrap().ends_with(&aside[0]), "{report}");
    let all = rewind_as_nobody(&p, &["--json", "prune", "--all"]);
    all.assert_success();
    assert!(
        all.stderr.contains(&aside[0]),
        "prune --all lists it: {all}"
    );
}

/// Issue 12 item 14: stores were created with the umask's permissions, so another user could
/// read a 0600 key from a 0700 project through `git show` in the store. The data directory
/// and every store are 0700 whatever the umask, and an existing open one is made private.
#[test]
fn stores_cannot_be_read_by_another_user() {
    let sb = Sandbox::new();
    chmod(&sb.root, 0o755);
    let p = sb.project("proj");
    p.file("key.pem", "the private key\n");
    chmod(&p.join("key.pem"), 0o600);
    chmod(&p.path, 0o700);
    // rewind as root under umask 000.
    let rewind_umask_0 = |args: &[&str]| {
        let mut cmd = sb.isolated("sh");
        cmd.args(["-c", "umask 000; exec \"$@\"", "sh"])
            .arg(common::rewind_bin())
            .arg("--data-dir")
            .arg(&sb.data_dir)
            .arg("-C")
            .arg(&p.path)
            .args(args);
        let run = common::run_with_deadline(&mut cmd, common::DEFAULT_DEADLINE);
        run.assert_success();
        run
    };
    let tree = rewind_umask_0(&["track"]).stdout.trim().to_string();
    let store = p.store();
    let blob = sb.git_in(&store, ["rev-parse", &format!("{tree}:key.pem")]);
    let blob = blob.trim().to_string();
    let loose = store.join("objects").join(&blob[..2]).join(&blob[2..]);
    let git = std::path::Path::new("git");
    let show = |sb: &Sandbox| {
        let git_dir = format!("--git-dir={}", store.display());
        as_nobody(
            sb,
            git,
            &["-c", "safe.directory=*", &git_dir, "cat-file", "-p", &blob],
        )
    };
    let private = |what: &str| {
        assert_eq!(
            mode(&sb.data_dir) & 0o077,
            0,
            "{what}: data dir open to others"
        );
        assert_eq!(mode(&store) & 0o077, 0, "{what}: store open to others");
        let run = show(&sb);
        assert!(
            !run.status.success() && !run.stdout.contains("private key"),
            "{what}: another user reads the key through git: {run}"
        );
        let cat = as_nobody(&sb, std::path::Path::new("cat"), &[&loose]);
        assert!(
            !cat.status.success(),
            "{what}: another user reads the object: {cat}"
        );
    };
    private("a new store");

    // A store an older version left open (and its data dir): made private on the next open.
    chmod(&sb.data_dir, 0o755);
    chmod(&store, 0o755);
    let run = show(&sb);
    assert!(
        run.stdout.contains("private key"),
        "the check above can fail: an open store is readable by nobody: {run}"
    );
    rewind_umask_0(&["diff", &tree]);
    private("a store made private on open");

    // A data dir that holds other things too (a home directory, say) is not changed; the store
    // in it is private all the same.
    chmod(&store, 0o755);
    chmod(&sb.data_dir, 0o755);
    std::fs::write(sb.data_dir.join("notes.txt"), "not rewind's\n").unwrap();
    rewind_umask_0(&["diff", &tree]);
    assert_eq!(
        mode(&sb.data_dir),
        0o755,
        "a shared directory is left alone"
    );
    assert_eq!(mode(&store), 0o700);
    let run = show(&sb);
    assert!(!run.stdout.contains("private key"), "{run}");

    // `prune --all` (hourly from cron) makes every store private as well.
    chmod(&store, 0o755);
    sb.run_rewind(["prune", "--all"]).assert_success();
    assert_eq!(mode(&store), 0o700, "prune --all");
}

/// Found by the seventh hostile pass of 2026-12-01: `rewind serve` run by a user at its
/// process limit panicked starting its own threads (the store's check had passed: the worker
/// pool had started). At every limit it now answers, or says it could not start its threads.
#[test]
fn serve_that_cannot_start_its_threads_says_so_at_any_process_limit() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("a.txt", "a\n");
    chown_nobody(&sb.root);
    let mut codes = Vec::new();
    for nproc in 1..=16 {
        let mut cmd = sb.isolated("setpriv");
        cmd.current_dir(&sb.root)
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "prlimit",
            ])
            .arg(format!("--nproc={nproc}"))
            .arg("--")
            .arg(common::rewind_bin())
            .arg("--data-dir")
            .arg(&sb.data_dir)
            .arg("-C")
            .arg(&p.path)
            .arg("serve");
        let request = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"track\"}\n";
        let run = common::run_with_stdin(&mut cmd, request);
        common::assert_no_panic(&run);
        match run.code() {
            Some(0) => assert!(run.stdout.contains("\"result\""), "nproc {nproc}: {run}"),
            Some(1) => assert!(
                run.stderr
                    .contains("threads: Resource temporarily unavailable"),
                "nproc {nproc}: {run}"
            ),
            _ => panic!("nproc {nproc}: {run}"),
        }
        codes.push(run.code());
    }
    // The range holds limits too low and limits high enough.
    assert!(
        codes.contains(&Some(0)) && codes.contains(&Some(1)),
        "{codes:?}"
    );
}
