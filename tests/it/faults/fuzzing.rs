//! Fuzzing against git: random session and turn ids, revert paths and file contents.

use super::*;
use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// A random id: random bytes made valid UTF-8, mixed with pieces git and shells treat
/// specially; 1 to `max` bytes, no NUL (argv cannot carry one).
fn random_id(rng: &mut XorShift, max: usize) -> String {
    const PIECES: &[&str] = &[
        "/", "//", "..", ".", "%", "%2F", "%%", "~", "^", ":", " ", "  ", "@{", "@", "{", "}",
        "\\", "*", "?", "[", "]", ".lock", "refs/", "HEAD", "-", "--", "é", "日本", "😀",
        "\u{202e}", "\t", "\n", "\r", "\u{7f}", "\u{1}", "a", "Z", "0", "_", "$(x)", "'", "\"",
        "#", "!",
    ];
    let target = 1 + rng.below(max as u64) as usize;
    let mut s = String::new();
    while s.len() < target {
        if rng.below(3) == 0 {
            let bytes: Vec<u8> = (0..1 + rng.below(6))
                .map(|_| rng.below(256) as u8)
                .collect();
            s.push_str(&String::from_utf8_lossy(&bytes).replace('\0', "0"));
        } else {
            s.push_str(PIECES[rng.below(PIECES.len() as u64) as usize]);
        }
    }
    while s.len() > target.max(1) {
        s.pop();
    }
    if s.is_empty() {
        s.push('x');
    }
    s
}

#[test]
fn fuzz_session_and_turn_ids_round_trip() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    p.file("f.txt", "0\n");
    let mut rng = XorShift::from_time();
    let mut want: BTreeSet<(String, String)> = BTreeSet::new();
    for i in 0..30 {
        let session = random_id(&mut rng, 200);
        let turn = if i % 4 == 0 {
            session.clone()
        } else {
            random_id(&mut rng, 200)
        };
        if want.contains(&(session.clone(), turn.clone())) {
            continue;
        }
        let s = format!("--session={session}");
        let t = format!("--turn={turn}");
        let run = p.rewind(["--json", "turn", "begin", &s, &t]);
        assert!(
            run.status.success(),
            "id {session:?} / {turn:?} refused: {run}"
        );
        p.file("f.txt", format!("{i}\n"));
        let run = p.rewind(["--json", "turn", "end", &s, &t]);
        assert!(
            run.status.success(),
            "id {session:?} / {turn:?}: end failed: {run}"
        );
        want.insert((session.clone(), turn.clone()));
        let mine = turns_of(&p, &session);
        assert!(
            mine.iter().all(|r| r["session"] == session.as_str()),
            "turns --session={session:?} lists other sessions: {mine:?}"
        );
        assert!(
            mine.iter().any(|r| r["turn"] == turn.as_str()),
            "turns --session={session:?} misses turn {turn:?}: {mine:?}"
        );
    }
    let got: BTreeSet<(String, String)> = rwj(&p, &["turns"])
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["session"].as_str().unwrap().to_string(),
                r["turn"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        got, want,
        "ids must round-trip byte for byte through `turns --json`"
    );
    // Over 200 bytes: refused, nothing recorded.
    let refs_before = p.store_git(["for-each-ref"]);
    for _ in 0..5 {
        let mut long = random_id(&mut rng, 200);
        while long.len() <= 200 {
            long.push('é');
        }
        let run = p.rewind([
            "--json",
            "turn",
            "begin",
            &format!("--session={long}"),
            "--turn=1",
        ]);
        assert_eq!(failure(&run).0, "invalid_name", "{run}");
    }
    assert_eq!(p.store_git(["for-each-ref"]), refs_before);
    let store = p.store();
    for r in sb
        .git_in(&store, ["for-each-ref", "--format=%(refname)"])
        .lines()
    {
        let run = sb.git_run(None, ["check-ref-format", r]);
        assert!(run.status.success(), "{r:?} is not a valid ref name");
    }
    assert_fsck_clean(&sb, &store);
    let log = sb.git_in_run(&store, ["log", "--all", "--oneline"]);
    log.assert_success();
}

#[test]
fn fuzz_revert_paths_never_touch_anything_outside_the_project() {
    let sb = Sandbox::new();
    let outside = sb.root.join("outside");
    fs::create_dir_all(outside.join("sub")).unwrap();
    fs::write(outside.join("a"), "outside a\n").unwrap();
    fs::write(outside.join("sub/b"), "outside b\n").unwrap();
    let neighbor = sb.project("proj2");
    neighbor
        .file("a", "neighbor a\n")
        .file("sub/b", "neighbor b\n");
    let p = sb.project("proj");
    p.file("a", "A a\n")
        .file("sub/b", "A b\n")
        .file("sub/deeper/c", "A c\n")
        .file("x y/z", "A z\n")
        .file("..dots", "A dots\n")
        .file("...", "A three\n")
        .symlink("link_out", &outside)
        .symlink("link_in", "sub")
        .symlink("up", "..")
        .symlink("link_neighbor", "../proj2");
    let a = p.track();
    p.file("a", "B a\n")
        .file("sub/b", "B b\n")
        .file("sub/deeper/c", "B c\n")
        .file("sub/new", "B new\n")
        .remove("x y")
        .file("..dots", "B dots\n")
        .file("...", "B three\n");
    let b = p.track();
    let store = p.store();
    let ta = ls_tree(&sb, &store, &a);
    let links: Vec<(&str, PathBuf)> = ["link_out", "link_in", "up", "link_neighbor"]
        .iter()
        .map(|l| (*l, fs::read_link(p.join(l)).unwrap()))
        .collect();
    let comps = [
        "..",
        ".",
        "",
        "a",
        "sub",
        "deeper",
        "b",
        "c",
        "x y",
        "z",
        "link_out",
        "link_in",
        "up",
        "link_neighbor",
        "proj",
        "proj2",
        "outside",
        "...",
        "..dots",
        "new",
        "nonexistent",
        "~",
        "*",
        "%2e%2e",
        ".git",
    ];
    let proj = p.path.to_str().unwrap().to_string();
    let root = sb.root.to_str().unwrap().to_string();
    let mut rng = XorShift::from_time();
    let (mut accepted, mut rejected) = (0, 0);
    let outside_before = fs_snapshot(&outside);
    let neighbor_before = fs_snapshot(&neighbor.path);
    for iter in 0..60 {
        let n = 1 + rng.below(5) as usize;
        let mut parts: Vec<&str> = (0..n)
            .map(|_| comps[rng.below(comps.len() as u64) as usize])
            .collect();
        if parts.iter().all(|c| c.is_empty()) {
            parts.push("a");
        }
        let sep = if rng.below(4) == 0 { "//" } else { "/" };
        let mut path = parts.join(sep);
        path = match rng.below(20) {
            0..=10 => path,
            11..=12 => format!("./{path}"),
            13..=16 => format!("{proj}/{path}"),
            17 => format!("/{path}"),
            _ => format!("{root}/{path}"),
        };
        if rng.below(5) == 0 {
            path.push('/');
        }
        if path.is_empty() {
            path = ".".into();
        }
        let before = fs_snapshot(&p.path);
        let run = p.rewind(["--json", "revert", &a, "--", &path]);
        assert_no_panic(&run);
        let what = format!("#{iter} revert A -- {path:?}");
        assert_same_snapshot(
            &outside_before,
            &fs_snapshot(&outside),
            &format!("{what}: outside"),
        );
        assert_same_snapshot(
            &neighbor_before,
            &fs_snapshot(&neighbor.path),
            &format!("{what}: neighbor"),
        );
        for (l, target) in &links {
            assert_eq!(
                fs::read_link(p.join(l)).ok().as_ref(),
                Some(target),
                "{what}: symlink {l} must stay"
            );
        }
        let lexical = lexical_inside(&p.path, path.as_bytes());
        match run.code() {
            Some(0) => {
                accepted += 1;
                let inside = lexical.unwrap_or_else(|| {
                    panic!("{what}: a path outside the project was accepted: {run}")
                });
                let o = one_json(&run);
                let via_link = inside
                    .iter()
                    .take(inside.len().saturating_sub(1))
                    .enumerate()
                    .any(|(k, _)| {
                        let prefix: PathBuf =
                            inside[..=k].iter().map(|c| OsStr::from_bytes(c)).collect();
                        fs::symlink_metadata(p.path.join(prefix))
                            .is_ok_and(|m| m.file_type().is_symlink())
                    });
                let named: String = inside
                    .iter()
                    .map(|c| lossy(c))
                    .collect::<Vec<_>>()
                    .join("/");
                for key in ["written", "deleted"] {
                    for f in o[key].as_array().unwrap() {
                        let f = f.as_str().unwrap();
                        assert!(
                            !f.starts_with('/') && !f.split('/').any(|c| c == ".." || c == "."),
                            "{what}: {key} {f:?} is not a project path"
                        );
                        if !via_link && !named.is_empty() {
                            assert!(
                                f == named || f.starts_with(&format!("{named}/")),
                                "{what}: {key} {f:?} is not under {named:?}"
                            );
                        }
                        if key == "written" {
                            let want = &ta[f.as_bytes()];
                            assert_eq!(
                                blob_id(&sb, &fs::read(p.join(f)).unwrap()),
                                want.1,
                                "{what}: {f} is A's"
                            );
                        } else {
                            assert!(
                                !ta.contains_key(f.as_bytes()),
                                "{what}: deleted {f}, which A has"
                            );
                        }
                    }
                }
                let r = rwj(&p, &["restore", &b]);
                assert_eq!(r["failed"], Value::Array(vec![]), "{r}");
            }
            Some(1) => {
                rejected += 1;
                let (code, _message) = failure(&run);
                // Outside the project: bad_path. Inside but in neither A nor the project:
                // not_found.
                let absent = lexical.as_ref().is_some_and(|inside| {
                    let rel = inside.join(&b'/');
                    let through_link = (1..inside.len()).any(|n| {
                        let dir = inside[..n].join(&b'/');
                        p.join(std::ffi::OsStr::from_bytes(&dir))
                            .symlink_metadata()
                            .is_ok_and(|m| m.file_type().is_symlink())
                    });
                    let in_git = inside.first().is_some_and(|c| c.as_slice() == b".git");
                    // An absolute path not spelled under the project is resolved on disk
                    // (its directory), and one that does not resolve is refused.
                    let spelled = Path::new(&path);
                    let resolves = !spelled.is_absolute()
                        || spelled.starts_with(&p.path)
                        || spelled
                            .parent()
                            .is_some_and(|d| fs::canonicalize(d).is_ok());
                    // A spelling that goes above the project's root and comes back in
                    // (`<project>/../proj/x`) is refused as leaving it, wherever it ends.
                    let from_root = spelled.strip_prefix(&p.path).unwrap_or(spelled);
                    let mut depth = 0i32;
                    let dips = from_root.components().any(|c| {
                        match c {
                            std::path::Component::ParentDir => depth -= 1,
                            std::path::Component::Normal(_) => depth += 1,
                            _ => {}
                        }
                        depth < 0
                    });
                    resolves
                        && !dips
                        && !through_link
                        && !in_git
                        && p.join(std::ffi::OsStr::from_bytes(&rel))
                            .symlink_metadata()
                            .is_err()
                        && !ta.keys().any(|k| {
                            k.as_slice() == rel.as_slice()
                                || k.starts_with(&[rel.as_slice(), b"/"].concat())
                        })
                });
                let want = if absent { "not_found" } else { "bad_path" };
                assert_eq!(code, want, "{what}: {run}");
                assert_same_snapshot(&before, &fs_snapshot(&p.path), &format!("{what}: project"));
            }
            _ => panic!("{what}: {run}"),
        }
    }
    eprintln!("{accepted} paths accepted, {rejected} rejected");
    assert_eq!(p.track(), b);
    p.assert_fsck_clean();
}

/// Random content built to stress a line differ: CR-only and CRLF endings, missing final
/// newlines, very long lines, NULs before and after git's 8,000-byte binary probe, lines that
/// look like diff syntax, repeated lines.
fn hostile_content(rng: &mut XorShift) -> Vec<u8> {
    const LINES: &[&[u8]] = &[
        b"",
        b" ",
        b"\t",
        b"x",
        b"y",
        b"{",
        b"}",
        b"@@ -1 +1 @@",
        b"diff --git a/x b/x",
        b"+",
        b"-",
        b"\\ No newline at end of file",
        b"\xc3\xa9t\xc3\xa9",
        b"\xff\xfe",
        b"same",
        b"same",
        b"same",
        b"fn f() {",
        b"    return 1;",
        b"\x0c",
        b"a\rb",
    ];
    let mut out = Vec::new();
    let n = match rng.below(10) {
        0 => 0,
        1 => 400 + rng.below(800),
        _ => rng.below(60),
    };
    let eol: &[u8] = match rng.below(10) {
        0 => b"\r\n",
        1 => b"\r",
        _ => b"\n",
    };
    for _ in 0..n {
        if rng.below(40) == 0 {
            out.extend(std::iter::repeat_n(b'L', 3000 + rng.below(6000) as usize));
        } else {
            out.extend_from_slice(LINES[rng.below(LINES.len() as u64) as usize]);
        }
        out.extend_from_slice(eol);
    }
    if !out.is_empty() && rng.below(4) == 0 {
        out.pop();
    }
    match rng.below(25) {
        0 => out.insert(rng.below(out.len() as u64 + 1) as usize, 0),
        1 => {
            out.resize(out.len().max(8100), b'p');
            out.push(0);
        }
        _ => {}
    }
    out
}

fn mutate(rng: &mut XorShift, old: &[u8]) -> Vec<u8> {
    if rng.below(5) == 0 {
        return hostile_content(rng);
    }
    let mut lines: Vec<Vec<u8>> = old
        .split_inclusive(|b| *b == b'\n')
        .map(|l| l.to_vec())
        .collect();
    for _ in 0..1 + rng.below(6) {
        let at = rng.below(lines.len() as u64 + 1) as usize;
        match rng.below(4) {
            0 if at < lines.len() => {
                lines.remove(at);
            }
            1 if at < lines.len() => {
                lines[at] = hostile_content(rng)
                    .into_iter()
                    .take(40)
                    .chain([b'\n'])
                    .collect();
            }
            2 if at < lines.len() => {
                let mut l = lines[at].clone();
                if l.ends_with(b"\n") && !l.ends_with(b"\r\n") {
                    l.insert(l.len() - 1, b'\r');
                }
                lines[at] = l;
            }
            _ => lines.insert(at, format!("inserted {}\n", rng.below(5)).into_bytes()),
        }
    }
    let mut out: Vec<u8> = lines.concat();
    if rng.below(6) == 0 {
        if out.ends_with(b"\n") {
            out.pop();
        } else {
            out.push(b'\n');
        }
    }
    out
}

#[test]
fn fuzz_diff_full_counts_equal_git_numstat() {
    let sb = Sandbox::new();
    let p = sb.project("proj");
    let mut rng = XorShift::from_time();
    let store = p.store();
    for round in 0..3 {
        let files: Vec<String> = (0..50).map(|i| format!("r{round}/f{i:02}")).collect();
        let mut old = Vec::new();
        for f in &files {
            let c = hostile_content(&mut rng);
            p.file(f, &c);
            old.push(c);
        }
        let a = p.track();
        for (i, f) in files.iter().enumerate() {
            match rng.below(10) {
                0 => {
                    p.remove(f);
                }
                1 => {} // unchanged
                _ => {
                    p.file(f, mutate(&mut rng, &old[i]));
                }
            }
        }
        p.file(format!("r{round}/added"), hostile_content(&mut rng));
        let b = p.track();
        let want = git_numstat(&sb, &store, &a, &b);
        let got = diff_full_counts(&p, &[&a, &b]);
        if got != want {
            let diffs: Vec<String> = want
                .iter()
                .filter(|(k, v)| got.get(*k) != Some(v))
                .map(|(k, v)| format!("{k}: git {v:?}, rewind {:?}", got.get(k)))
                .chain(
                    got.keys()
                        .filter(|k| !want.contains_key(*k))
                        .map(|k| format!("{k}: only in rewind")),
                )
                .collect();
            panic!(
                "round {round}: diff-full counts differ from git diff --numstat:\n{}",
                diffs.join("\n")
            );
        }
        assert_eq!(
            diff_full_counts(&p, &[&a]),
            want,
            "round {round}: diff-full A (to now)"
        );
        let run = p.rewind(["diff", "--no-renames", &a, &b]); // (as its oracle)
        run.assert_success();
        assert!(
            run.stdout_bytes == git_diff_text(&sb, &store, &a, &b),
            "round {round}: diff text differs from git's"
        );
    }
    p.assert_fsck_clean();
}
