//! `--dry-run` (issue 14, part 3): `restore`, `revert` and `undo` with `--dry-run` change no
//! file and record nothing, and report exactly what the real run, made next on the same state,
//! then does. The patch a dry run gives (`diff`) is held against `git diff --no-renames` from
//! the real run's undo point to the project after it. States are random (fixed seeds).

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::common::*;

/// Paths the random edits use: nested, an ignored one, one that is a file or a directory.
const NAMES: &[&str] = &[
    "a.txt",
    "b.txt",
    "d/c.txt",
    "d/e/f.txt",
    "x",
    "x/y.txt",
    "n.log",
];

/// Every entry below `dir`: relative path -> (mode, bytes or link target).
fn disk(dir: &Path, prefix: &str, out: &mut BTreeMap<String, (u32, Vec<u8>)>) {
    // (A store may have no `logs/`: rewind's records have no reflogs.)
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let rel = format!("{prefix}{}", entry.file_name().to_string_lossy());
        let meta = fs::symlink_metadata(entry.path()).unwrap();
        let mode = meta.permissions().mode();
        if meta.is_dir() {
            out.insert(rel.clone(), (mode, Vec::new()));
            disk(&entry.path(), &format!("{rel}/"), out);
        } else if meta.is_symlink() {
            let target = fs::read_link(entry.path()).unwrap();
            out.insert(
                rel,
                (mode, target.to_string_lossy().into_owned().into_bytes()),
            );
        } else {
            out.insert(rel, (mode, fs::read(entry.path()).unwrap()));
        }
    }
}

fn project(p: &TestProject) -> BTreeMap<String, (u32, Vec<u8>)> {
    let mut out = BTreeMap::new();
    disk(&p.path, "", &mut out);
    out
}

/// The store's records as git sees them: refs (loose and packed) and reflogs.
fn records(p: &TestProject) -> String {
    let refs = p.store_git(["for-each-ref", "--format=%(refname) %(objectname)"]);
    let mut logs = BTreeMap::new();
    disk(&p.store().join("logs"), "", &mut logs);
    format!("{refs}\n{logs:?}")
}

/// One random edit among [`NAMES`] (a path that is a directory is removed whole first).
fn random_edit(p: &TestProject, rng: &mut XorShift) {
    let name = NAMES[rng.below(NAMES.len() as u64) as usize];
    let path = p.join(name);
    for ancestor in Path::new(name).ancestors().skip(1) {
        let dir = p.join(ancestor);
        if dir.is_file() {
            fs::remove_file(&dir).unwrap();
        }
    }
    if path.is_dir() {
        fs::remove_dir_all(&path).unwrap();
    }
    match rng.below(4) {
        0 if path.exists() => {
            p.remove(name);
        }
        _ => {
            let text: String = (0..rng.below(6))
                .map(|i| format!("line {} {}\n", i, rng.below(3)))
                .collect();
            p.file(name, text);
        }
    }
}

/// The named string lists of an outcome.
fn lists(outcome: &Value) -> Vec<(String, Value)> {
    ["written", "deleted", "conflicts", "kept", "failed"]
        .iter()
        .map(|key| (key.to_string(), outcome[*key].clone()))
        .collect()
}

/// Build the random state of `seed`: a snapshot, two turns of session `s` with user edits
/// between and after. Returns the snapshot.
fn state(p: &TestProject, seed: u64) -> String {
    let mut rng = XorShift::seeded(seed);
    p.file(".gitignore", "*.log\n");
    for _ in 0..6 {
        random_edit(p, &mut rng);
    }
    let snapshot = p.rewind(["track"]);
    snapshot.assert_success();
    for turn in ["1", "2"] {
        p.rewind(["turn", "begin", "--session", "s", "--turn", turn])
            .assert_success();
        for _ in 0..3 {
            random_edit(p, &mut rng);
        }
        p.rewind(["turn", "end", "--session", "s", "--turn", turn])
            .assert_success();
        random_edit(p, &mut rng); // the user's
    }
    snapshot.stdout.trim().to_string()
}

#[test]
fn a_dry_run_changes_nothing_and_reports_what_the_real_run_then_does() {
    let mut compared = 0;
    for seed in 0..6u64 {
        for op in 0..4 {
            let sb = Sandbox::new();
            let p = sb.project("proj");
            let snapshot = state(&p, seed);
            let args: Vec<String> = match op {
                0 => vec!["restore".into(), snapshot],
                1 => ["revert", &snapshot, "--", "a.txt", "d", "x"]
                    .map(String::from)
                    .to_vec(),
                2 => ["undo", "--session", "s", "--turn", "2"]
                    .map(String::from)
                    .to_vec(),
                _ => ["undo", "--session", "s", "--last", "--force"]
                    .map(String::from)
                    .to_vec(),
            };
            let what = format!("seed {seed}, `{}`", args.join(" "));
            let (disk_before, records_before) = (project(&p), records(&p));
            // `--dry-run` right after the command (a revert's paths follow `--`).
            let mut dry_args = vec!["--json".to_string(), args[0].clone(), "--dry-run".into()];
            dry_args.extend(args[1..].iter().cloned());
            let dry = p.rewind(&dry_args);
            assert_no_panic(&dry);
            let dry = one_json(&dry);
            assert_eq!(dry["dry_run"], true, "{what}: {dry}");
            assert_eq!(
                project(&p),
                disk_before,
                "{what}: a dry run changed the project"
            );
            assert_eq!(
                records(&p),
                records_before,
                "{what}: a dry run recorded something"
            );

            let real = p.rewind(std::iter::once("--json".to_string()).chain(args.iter().cloned()));
            assert_no_panic(&real);
            let real = one_json(&real);
            assert_eq!(lists(&dry), lists(&real), "{what}: dry {dry}\nreal {real}");
            // The patch the dry run promised is the one git sees between the undo point and the
            // project after the run.
            let touched: Vec<String> = ["written", "deleted"]
                .iter()
                .flat_map(|k| real[*k].as_array().unwrap().iter())
                .map(|v| v.as_str().unwrap().to_string())
                .collect();
            let after = p.rewind(["track"]);
            after.assert_success();
            let mut git = vec!["diff", "--no-renames", "--no-color", "--no-ext-diff"];
            let undo = real["undo"].as_str().unwrap().to_string();
            git.extend([undo.as_str(), after.stdout.trim(), "--"]);
            git.extend(touched.iter().map(String::as_str));
            let want = match touched.is_empty() {
                true => String::new(),
                false => p.store_git(git),
            };
            assert_eq!(
                dry["diff"].as_str().unwrap(),
                want,
                "{what}: the dry run's diff"
            );
            compared += touched.len();
        }
    }
    assert!(
        compared > 20,
        "the random states changed too few files ({compared})"
    );
}

/// Every file of the store: relative path -> bytes (the lock file aside).
fn store_files(p: &TestProject) -> BTreeMap<String, (u32, Vec<u8>)> {
    let mut files = BTreeMap::new();
    disk(&p.store(), "", &mut files);
    files.retain(|name, _| !name.ends_with(".lock"));
    files
}

/// RFC 3339 of `secs` since the epoch, through chrono.
fn rfc3339(secs: i64) -> String {
    chrono::DateTime::from_timestamp(secs, 0)
        .unwrap()
        .to_rfc3339()
}

/// `prune --dry-run` changes nothing in the store and reports what the real prune, run next at
/// the same clock, removes: the same snapshots, sessions and turns (expired, abandoned,
/// trimmed). Random sessions, turns, snapshots and undos over two weeks. (Objects and bytes
/// are estimates: a repack and the copies of a trimmed chain change them.)
#[test]
fn prune_dry_run_reports_what_the_real_prune_then_removes() {
    let t0 = chrono::Utc::now().timestamp();
    let hour = 3600;
    let mut removed_something = 0;
    for seed in 0..5u64 {
        let mut rng = XorShift::seeded(seed);
        let sb = Sandbox::new();
        let p = sb.project("proj");
        let run_at = |now: i64, args: &[&str]| at(&p, &rfc3339(now), args);
        let mut now = t0;
        let mut turns = BTreeMap::new();
        for step in 0..24 {
            now += rng.below(18) as i64 * hour;
            p.file(format!("f{}.txt", rng.below(5)), format!("step {step}\n"));
            let session = format!("s{}", rng.below(3));
            match rng.below(5) {
                0 => {
                    run_at(now, &["track"]);
                }
                1 => {
                    // (Fails when no turn is left to undo: fine.)
                    let undo = ["undo", "--session", &session, "--last", "--force"];
                    rw_at(&p, Some(&rfc3339(now)), &undo);
                }
                _ => {
                    let n: &mut u32 = turns.entry(session.clone()).or_default();
                    *n += 1;
                    let turn = n.to_string();
                    run_at(
                        now,
                        &["turn", "begin", "--session", &session, "--turn", &turn],
                    );
                    p.file(format!("g{}.txt", rng.below(5)), format!("turn {step}\n"));
                    if rng.below(6) != 0 {
                        run_at(
                            now,
                            &["turn", "end", "--session", &session, "--turn", &turn],
                        );
                    }
                }
            }
        }
        // Two hours on, objects written are over an hour old: only reachability decides.
        let prune_at = now + 2 * hour + rng.below(10) as i64 * 24 * hour;
        let max_turns = (1 + rng.below(4)).to_string();
        let mut args = vec!["--json", "prune", "--max-turns", max_turns.as_str()];
        if rng.below(2) == 0 {
            args.extend(["--abandoned-after", "3d"]);
        }
        let what = format!(
            "seed {seed}: `{}` at t0 + {} h",
            args.join(" "),
            (prune_at - t0) / hour
        );
        let before = store_files(&p);
        let mut dry_args = args.clone();
        dry_args.push("--dry-run");
        let dry = one_json(&run_at(prune_at, &dry_args));
        assert_eq!(dry["dry_run"], true, "{what}: {dry}");
        assert!(
            store_files(&p) == before,
            "{what}: a dry run changed the store"
        );
        let real = one_json(&run_at(prune_at, &args));
        for key in [
            "snapshots_removed",
            "turns_removed",
            "sessions_removed",
            "abandoned_turns",
        ] {
            assert_eq!(dry[key], real[key], "{what}: {key}\ndry {dry}\nreal {real}");
        }
        removed_something += real["turns_removed"].as_u64().unwrap();
    }
    assert!(removed_something > 5, "the random states pruned too little");
}
