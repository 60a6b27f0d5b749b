//! Rename detection: `diff` text byte-identical to `git diff -M`, `diff-full` rows as `git
//! diff -M --numstat`/`--name-status` give them, `--no-renames` as git's `--no-renames`, and
//! turn summaries of an agent's move. git, run on the store, is the oracle (the helpers are
//! tests/it/diff.rs's); nothing here hard-codes which pairs are renames.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::common::*;
use crate::diff::{Ask, Proj};

/// Rounds of [`random_moves_match_git_diff_m`] by default; `REWIND_RENAME_ROUNDS` sets more.
const ROUNDS: u64 = 40;
/// Its fixed seed; `REWIND_TEST_SEED` replays another.
const SEED: u64 = 145;

/// A path of the random project: a file (bytes, executable) or a symlink (target).
#[derive(Clone, Debug)]
enum Entry {
    File(Vec<u8>, bool),
    Link(String),
}

/// Lines shared by many files (so files are partly alike), some longer than git's 64-byte
/// chunks, one with a CR before its LF.
const COMMON: [&str; 8] = [
    "fn main() {\n",
    "}\n",
    "    let x = 1;\n",
    "\n",
    "    // a comment line that is longer than sixty-four bytes, so it is cut in two chunks\n",
    "use std::io;\r\n",
    "#include <stdio.h>\n",
    "    return 0;\n",
];

/// A line of its own (unique to its file, almost surely).
fn fresh_line(rng: &mut XorShift) -> Vec<u8> {
    let len = 1 + rng.below(90) as usize;
    let mut line: Vec<u8> = (0..len).map(|_| b'a' + rng.below(26) as u8).collect();
    line.push(b'\n');
    line
}

/// A text of `n` lines, about a third of them common ones.
fn text(rng: &mut XorShift, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|_| match rng.below(3) {
            0 => COMMON[rng.below(COMMON.len() as u64) as usize]
                .as_bytes()
                .to_vec(),
            _ => fresh_line(rng),
        })
        .collect()
}

/// `lines` with `k` of them (at random places) replaced by fresh ones.
fn edited(rng: &mut XorShift, lines: &[Vec<u8>], k: usize) -> Vec<Vec<u8>> {
    let mut lines = lines.to_vec();
    for _ in 0..k.min(lines.len()) {
        let at = rng.below(lines.len() as u64) as usize;
        lines[at] = fresh_line(rng);
    }
    lines
}

/// The lines of a file (split after each `\n`).
fn lines_of(data: &[u8]) -> Vec<Vec<u8>> {
    data.split_inclusive(|b| *b == b'\n')
        .map(<[u8]>::to_vec)
        .collect()
}

/// A random project path: few names and directories, so moves often keep their basename and
/// several files share one.
fn random_path(rng: &mut XorShift) -> String {
    let name = format!("n{}", rng.below(10));
    match rng.below(5) {
        0 => name,
        d => format!("d{d}/{name}"),
    }
}

/// The random project and what it holds.
struct World<'a> {
    p: Proj<'a>,
    files: BTreeMap<String, Entry>,
}

impl World<'_> {
    fn put(&mut self, path: &str, entry: Entry) {
        if self.files.contains_key(path) {
            self.p.remove(path);
        }
        match &entry {
            Entry::File(data, exec) => {
                self.p.file(path, data);
                if *exec {
                    self.p.chmod(path, 0o755);
                }
            }
            Entry::Link(target) => {
                self.p.symlink(path, target);
            }
        }
        self.files.insert(path.to_string(), entry);
    }

    fn take(&mut self, path: &str) -> Entry {
        self.p.remove(path);
        self.files.remove(path).expect("a path of the world")
    }

    /// A path holding a regular file, if any.
    fn some_file(&self, rng: &mut XorShift) -> Option<String> {
        let files: Vec<&String> = (self.files.iter())
            .filter(|(_, e)| matches!(e, Entry::File(..)))
            .map(|(p, _)| p)
            .collect();
        (!files.is_empty()).then(|| files[rng.below(files.len() as u64) as usize].clone())
    }

    /// A path holding nothing.
    fn free_path(&self, rng: &mut XorShift) -> Option<String> {
        (0..20)
            .map(|_| random_path(rng))
            .find(|p| !self.files.contains_key(p))
    }

    /// One random change, described.
    fn step(&mut self, rng: &mut XorShift) -> Option<String> {
        let Some(to) = self.free_path(rng) else {
            // Full: make room.
            let paths: Vec<String> = self.files.keys().cloned().collect();
            let from = &paths[rng.below(paths.len() as u64) as usize];
            self.take(from);
            return Some(format!("delete {from}"));
        };
        Some(match rng.below(13) {
            0 => {
                let entry = match rng.below(6) {
                    0 => Entry::File(Vec::new(), false),
                    1 => Entry::Link(format!("target{}", rng.below(3))),
                    2 => {
                        let unit: &[u8] = match rng.below(2) {
                            0 => b"\0binary\n",
                            _ => b"\0bin\nary\nmore\n",
                        };
                        Entry::File(unit.repeat(1 + rng.below(8) as usize), false)
                    }
                    _ => {
                        let n = 2 + rng.below(16) as usize;
                        Entry::File(text(rng, n).concat(), false)
                    }
                };
                self.put(&to, entry);
                format!("add {to}")
            }
            1 => {
                let from = self.some_file(rng)?;
                self.take(&from);
                format!("delete {from}")
            }
            2 => {
                let from = self.some_file(rng)?;
                let Entry::File(data, exec) = self.files[&from].clone() else {
                    unreachable!()
                };
                let k = 1 + rng.below(3) as usize;
                let lines = edited(rng, &lines_of(&data), k);
                self.put(&from, Entry::File(lines.concat(), exec));
                format!("modify {from}")
            }
            3 | 4 => {
                // A move, exact or with k edited lines; maybe a new mode.
                let from = self.some_file(rng)?;
                let Entry::File(data, exec) = self.take(&from) else {
                    unreachable!()
                };
                let lines = lines_of(&data);
                let k = match rng.below(3) {
                    0 => 0,
                    1 => 1,
                    _ => lines.len() / 2 + rng.below(5) as usize - 2.min(lines.len() / 2),
                };
                let exec = exec ^ (rng.below(4) == 0);
                self.put(&to, Entry::File(edited(rng, &lines, k).concat(), exec));
                format!("move {from} -> {to} ({k} of {} lines edited)", lines.len())
            }
            5 => {
                // Several candidates for one path: two edited copies of a deleted file.
                let from = self.some_file(rng)?;
                let Entry::File(data, _) = self.take(&from) else {
                    unreachable!()
                };
                let lines = lines_of(&data);
                let second = self.free_path(rng).filter(|p| *p != to)?;
                for path in [&to, &second] {
                    let k = rng.below(lines.len() as u64 / 2 + 1) as usize;
                    self.put(path, Entry::File(edited(rng, &lines, k).concat(), false));
                }
                format!("split {from} -> {to}, {second}")
            }
            6 => {
                // Two deleted files, one added file made of halves of both.
                let first = self.some_file(rng)?;
                let Entry::File(one, _) = self.take(&first) else {
                    unreachable!()
                };
                let second = self.some_file(rng)?;
                let Entry::File(two, _) = self.take(&second) else {
                    unreachable!()
                };
                let (one, two) = (lines_of(&one), lines_of(&two));
                let halves = [&one[..one.len().div_ceil(2)], &two[..two.len() / 2]].concat();
                self.put(&to, Entry::File(halves.concat(), false));
                format!("join {first}, {second} -> {to}")
            }
            7 => {
                // A symlink moves, its target kept or changed; or becomes a file.
                let links: Vec<String> = (self.files.iter())
                    .filter(|(_, e)| matches!(e, Entry::Link(_)))
                    .map(|(p, _)| p.clone())
                    .collect();
                let from = links
                    .get(rng.below(links.len() as u64 + 1) as usize)?
                    .clone();
                let Entry::Link(target) = self.take(&from) else {
                    unreachable!()
                };
                let entry = match rng.below(3) {
                    0 => Entry::Link(target),
                    1 => Entry::Link(format!("{target}x")),
                    _ => Entry::File(target.into_bytes(), false),
                };
                self.put(&to, entry);
                format!("move link {from} -> {to}")
            }
            8 => {
                // Identical files: several deleted, several added.
                let n = 1 + rng.below(6) as usize;
                let data = text(rng, n).concat();
                let mut made = Vec::new();
                for _ in 0..2 {
                    if let Some(path) = self.free_path(rng) {
                        self.put(&path, Entry::File(data.clone(), false));
                        made.push(path);
                    }
                }
                format!("identical {made:?}")
            }
            9 => {
                // A file becomes a symlink; its content moves elsewhere.
                let from = self.some_file(rng)?;
                let entry = self.take(&from);
                self.put(&from, Entry::Link("elsewhere".into()));
                self.put(&to, entry);
                format!("typechange {from}, content -> {to}")
            }
            10 => {
                // A binary file moves, maybe edited.
                let binary: Vec<String> = (self.files.iter())
                    .filter(|(_, e)| matches!(e, Entry::File(data, _) if data.contains(&0)))
                    .map(|(p, _)| p.clone())
                    .collect();
                let from = binary
                    .get(rng.below(binary.len() as u64 + 1) as usize)?
                    .clone();
                let Entry::File(mut data, exec) = self.take(&from) else {
                    unreachable!()
                };
                data.extend_from_slice(&b"tail\n".repeat(rng.below(3) as usize));
                self.put(&to, Entry::File(data, exec));
                format!("binary {from} -> {to}")
            }
            11 => {
                let from = self.some_file(rng)?;
                let Entry::File(data, exec) = self.take(&from) else {
                    unreachable!()
                };
                self.put(&to, Entry::File(data, !exec));
                format!("move {from} -> {to} with a mode change")
            }
            _ => {
                // Every copy of a file moves with the same edit: equal candidates.
                let from = self.some_file(rng)?;
                let Entry::File(data, _) = self.files[&from].clone() else {
                    unreachable!()
                };
                let copies: Vec<String> = (self.files.iter())
                    .filter(|(_, e)| matches!(e, Entry::File(d, _) if *d == data))
                    .map(|(p, _)| p.clone())
                    .collect();
                let mut new = data.clone();
                new.extend_from_slice(b"extra\n");
                let mut moved = Vec::new();
                for path in &copies {
                    self.take(path);
                }
                for _ in &copies {
                    if let Some(to) = self.free_path(rng) {
                        self.put(&to, Entry::File(new.clone(), false));
                        moved.push(to);
                    }
                }
                format!("copies {copies:?} -> {moved:?}")
            }
        })
    }
}

/// `diff` and `diff-full` from `a` to `b`, with and without renames, against git; the
/// `diff` text.
fn check_all(p: &Proj, a: &str, b: &str) -> Vec<u8> {
    let text = p.check_diff_text(a, b);
    p.check_diff_text_no_renames(a, b);
    p.check_diff_full_asked(a, b, Ask::default());
    let no_renames = Ask {
        no_renames: true,
        ..Ask::default()
    };
    p.check_diff_full_asked(a, b, no_renames);
    text
}

/// Random rounds of moves (exact, edited a bit, edited near the 50% line, several
/// candidates for one path, binary files, symlinks, empty and identical files, mode and type
/// changes) among other changes: every round's `diff`/`diff-full` equal git's with `-M` and
/// with `--no-renames`.
#[test]
fn random_moves_match_git_diff_m() {
    let seed = std::env::var("REWIND_TEST_SEED")
        .ok()
        .map(|s| s.parse().expect("REWIND_TEST_SEED must be a number"))
        .unwrap_or(SEED);
    let rounds = std::env::var("REWIND_RENAME_ROUNDS")
        .ok()
        .map(|s| s.parse().expect("REWIND_RENAME_ROUNDS must be a number"))
        .unwrap_or(ROUNDS);
    eprintln!("rename seed: {seed} (REWIND_TEST_SEED replays it), {rounds} rounds");
    let mut rng = XorShift::seeded(seed);
    let sb = Sandbox::new();
    let mut world = World {
        p: Proj::new(&sb, "proj"),
        files: BTreeMap::new(),
    };
    for _ in 0..12 {
        world.step(&mut rng);
    }
    let (mut exact, mut inexact) = (0, 0);
    for round in 0..rounds {
        let a = world.p.snap();
        let steps: Vec<String> = (0..1 + rng.below(6))
            .filter_map(|_| world.step(&mut rng))
            .collect();
        let b = world.p.snap();
        eprintln!("round {round}: {}", steps.join("; "));
        let text = check_all(&world.p, &a, &b);
        for line in text.split(|&b| b == b'\n') {
            match line.strip_prefix(b"similarity index ") {
                Some(b"100%") => exact += 1,
                Some(_) => inexact += 1,
                None => {}
            }
        }
    }
    eprintln!("{exact} exact and {inexact} inexact renames");
    // The rounds must have exercised what they are about.
    assert!(
        exact >= rounds / 4 && inexact >= rounds / 4,
        "only {exact} exact and {inexact} inexact renames"
    );
    world.p.fsck();
}

/// The thresholds: 50% similar is a rename, one byte short of it is not; a basename that one
/// deleted and one added file have pairs them from 75% on, ahead of a more similar other file
/// (which takes the deleted file below 75%).
#[test]
fn similarity_at_the_thresholds_matches_git() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    p.file("half/old", "aaaaaaaaa\nbbbbbbbbb\nccccccccc\nddddddddd\n")
        .file("under/old", "eeeeeeeee\nfffffffff\nggggggggg\nhhhhhhhhh\n")
        .file("b1/conf", "1111\n2222\n3333\n4444\n")
        .file("c1/conf2", "aaaa\nbbbb\ncccc\ndddd\n");
    let a = p.snap();
    // 20 of 40 bytes kept: 50%; 20 of 41: under.
    p.remove("half")
        .file("half/new", "aaaaaaaaa\nbbbbbbbbb\nxxxxxxxxx\nyyyyyyyyy\n")
        .remove("under")
        .file("under/new", "eeeeeeeee\nfffffffff\nxxxxxxxxx\nyyyyyyyyyy\n");
    // 75% with the same basename beats 80% with another; 71% does not.
    p.remove("b1")
        .file("b2/conf", "1111\n2222\n3333\n9999\n")
        .file("b3/other", "1111\n2222\n3333\n4444\n5555\n")
        .remove("c1")
        .file("c2/conf2", "aaaa\nbbbb\ncccc\nzzzzz\n")
        .file("c3/other2", "aaaa\nbbbb\ncccc\ndddd\neeee\n");
    let b = p.snap();
    let text = check_all(&p, &a, &b);
    let pairs: Vec<&[u8]> = (text.split(|&b| b == b'\n'))
        .filter(|l| l.starts_with(b"rename "))
        .collect();
    let want: [&[u8]; 6] = [
        b"rename from b1/conf",
        b"rename to b2/conf",
        b"rename from c1/conf2",
        b"rename to c3/other2",
        b"rename from half/old",
        b"rename to half/new",
    ];
    assert_eq!(pairs, want, "the cases must be the ones meant (git agrees)");
    // Paths select before pairing, as in `git diff -M -- PATHS`: a move across the selection's
    // edge is a deletion or an addition.
    for paths in [&["b1", "b2"][..], &["b2"], &["b1"], &["half/new", "c3"]] {
        let ask = Ask {
            paths,
            ..Ask::default()
        };
        p.check_diff_full_asked(&a, &b, ask);
    }
    p.fsck();
}

/// Several deleted files equally similar to several added ones: which one each added file
/// gets follows git, where a dissimilar deleted file met first takes a slot of the four each
/// added file keeps, and moves the equal ones' order (rewind paired them in path order).
#[test]
fn equal_candidates_pair_as_git_pairs_them_after_a_dissimilar_file() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    let body = "l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\n";
    p.file("a-other", "something else entirely\n");
    for i in 1..=6 {
        p.file(format!("s{i}"), body);
    }
    let a = p.snap();
    p.remove("a-other");
    for i in 1..=6 {
        p.remove(format!("s{i}"));
        p.file(format!("d{i}"), format!("{body}extra\n"));
    }
    let b = p.snap();
    check_all(&p, &a, &b);
    p.fsck();
}

/// git's rename limit (1,000 deleted by 1,000 added, product 1,000,000) counts the files the
/// exact pass left: 1,001 edited moves by 999 (and one exact move) are paired, one more of
/// each is past the limit, and then only the exact move pairs, as in git.
#[test]
fn rename_limit_counts_what_the_exact_pass_left_as_in_git() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    for i in 0..1001 {
        p.file(
            format!("old/a{i}"),
            format!("file {i}\nline two\nline three\n"),
        );
    }
    p.file("old/exact", "moved as it is\n");
    let a = p.snap();
    p.remove("old");
    for i in 0..999 {
        p.file(format!("new/b{i}"), format!("file {i}\nline two\nline 3\n"));
    }
    p.file("new/exact-moved", "moved as it is\n");
    let within = p.snap();
    p.file("new/b999", "file 999\nline two\nline 3\n");
    let past = p.snap();
    let renames = |text: Vec<u8>| {
        (text.split(|&b| b == b'\n'))
            .filter(|l| l.starts_with(b"rename from "))
            .count()
    };
    assert_eq!(renames(p.check_diff_text(&a, &within)), 1000);
    assert_eq!(
        renames(p.check_diff_text(&a, &past)),
        1,
        "only the exact move"
    );
    p.check_diff_full_asked(&a, &past, Ask::default());
}

/// The turn summary of an agent's move: `turn end`, `turns`, `changes` and `show` list one
/// renamed file with the old path and `git diff -M --numstat`'s counts; `--no-renames` lists
/// the deletion and the addition; the turn's record keeps each path alone (older rewinds read
/// it).
#[test]
fn turn_summary_lists_an_agents_move_as_a_rename() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    let body: String = (0..20).map(|i| format!("line {i}\n")).collect();
    p.file("src/old_name.rs", &body).file("keep.txt", "keep\n");
    let turn = ["--session", "s", "--turn", "1"];
    p.rewind([&["turn", "begin"][..], &turn[..]].concat())
        .assert_success();
    p.remove("src/old_name.rs")
        .file("src/new_name.rs", body.replace("line 7\n", "line seven\n"))
        .file("keep.txt", "keep\nmore\n");
    let end = p.rewind([&["--json", "turn", "end"][..], &turn[..]].concat());
    end.assert_success();
    let end = one_json(&end);
    let (before, after) = (
        end["before"].as_str().unwrap(),
        end["after"].as_str().unwrap(),
    );
    let git = sb.git_in_run(&p.store(), ["diff", "-M", "--numstat", before, after]);
    git.assert_success();
    assert_eq!(
        git.stdout,
        "1\t0\tkeep.txt\n1\t1\tsrc/{old_name.rs => new_name.rs}\n"
    );
    let git = sb.git_in_run(&p.store(), ["diff", "-M", before, after]);
    let similarity: u64 = (git.stdout.lines())
        .find_map(|l| l.strip_prefix("similarity index "))
        .and_then(|l| l.strip_suffix('%'))
        .expect("git pairs the move")
        .parse()
        .unwrap();
    let renamed = |files: &Value| -> Value {
        let rows = files.as_array().expect("files");
        assert_eq!(rows.len(), 2, "{files}");
        assert_eq!(rows[0]["file"], "keep.txt", "{files}");
        let row = &rows[1];
        for (key, want) in [
            ("file", Value::from("src/new_name.rs")),
            ("status", "renamed".into()),
            ("old_file", "src/old_name.rs".into()),
            ("similarity", similarity.into()),
            ("additions", 1.into()),
            ("deletions", 1.into()),
        ] {
            assert_eq!(row[key], want, "{key} of {row}");
        }
        row.clone()
    };
    renamed(&end["files"]);
    let turns = one_json(&p.rewind(["--json", "turns", "--session", "s"]));
    renamed(&turns[0]["changed"]);
    assert_eq!(turns[0]["files"], 2, "{turns}");
    assert_eq!(turns[0]["additions"], 2, "{turns}");
    let changes = one_json(&p.rewind(["--json", "changes", "--session", "s"]));
    renamed(&changes["files"]);
    assert_eq!(changes["total_files"], 2, "{changes}");
    let show = p.rewind(["show", "--session", "s", "1"]);
    show.assert_success();
    let diff = show.stdout_bytes.splitn(2, |&b| b == b'\n').nth(1).unwrap();
    assert_eq!(
        String::from_utf8_lossy(diff),
        git.stdout,
        "show's diff is git diff -M's"
    );
    let human = p.rewind(["turns", "--session", "s"]);
    assert!(
        human.stdout.contains("src/old_name.rs -> src/new_name.rs"),
        "{human}"
    );

    // --no-renames: the deletion and the addition, as stored.
    let turns = one_json(&p.rewind(["--json", "turns", "--session", "s", "--no-renames"]));
    let statuses: Vec<(&str, &str)> = (turns[0]["changed"].as_array().unwrap().iter())
        .map(|f| (f["file"].as_str().unwrap(), f["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        statuses,
        [
            ("keep.txt", "modified"),
            ("src/new_name.rs", "added"),
            ("src/old_name.rs", "deleted")
        ]
    );
    assert_eq!(turns[0]["files"], 3, "{turns}");
    let changes = one_json(&p.rewind(["--json", "changes", "--session", "s", "--no-renames"]));
    assert_eq!(changes["total_files"], 3, "{changes}");
    let show = p.rewind(["show", "--session", "s", "1", "--no-renames"]);
    let git = sb.git_in_run(&p.store(), ["diff", "--no-renames", before, after]);
    assert!(show.stdout.ends_with(&git.stdout), "{show}");
    let log = sb.git_in_run(
        &p.store(),
        ["log", "-1", "--format=%B", "refs/rewind/sessions/s/turns/1"],
    );
    assert!(
        log.stdout
            .contains("Rewind-File: added unannounced +20 -0 src/new_name.rs\n")
            && log
                .stdout
                .contains("Rewind-File: deleted unannounced +0 -20 src/old_name.rs\n"),
        "the record keeps each path alone: {log}"
    );
    p.fsck();
}

/// A binary file whose line starts with a NUL, moved and made text: git counts `\0// c` as
/// the text line `// c` when it measures similarity (rewind said 86% where git says 91%).
#[test]
fn leading_nul_of_a_binary_line_is_measured_as_git_measures_it() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    let lines = "b\n// c\n    }\nb\n// c\n{\n// c\n    }\n// c\nb\n}\n";
    p.file("d/c.rs", format!("b\nfn f() {{\n\0// c\n{lines}"));
    let a = p.snap();
    p.remove("d/c.rs")
        .file("d/moved", format!("b\nfn f() {{\n// c\n{lines}\nrenamed\n"));
    let b = p.snap();
    let text = check_all(&p, &a, &b);
    assert!(text.windows(12).any(|w| w == b"rename from "), "a rename");
    p.fsck();
}

/// Known difference (docs/design.md, Renames): git tells chunks apart by a hash modulo 107,927,
/// so in large files some different chunks count as shared there and a similarity can be a
/// point higher than rewind's. On this fixed set of 40 moves of 300-2,000-line files edited
/// 10-45%, the pairs are git's and 2 similarity indexes differ (measured, 1 point each); held at
/// that rate.
#[test]
fn large_edited_moves_pair_as_in_git_and_differ_in_similarity_at_the_measured_rate() {
    let sb = Sandbox::new();
    let p = Proj::new(&sb, "proj");
    let mut rng = XorShift::seeded(7);
    let line = |rng: &mut XorShift| -> String {
        let len = 3 + rng.below(28) as usize;
        let mut s: String = (0..len)
            .map(|_| (b'a' + rng.below(10) as u8) as char)
            .collect();
        s.push('\n');
        s
    };
    let mut moved = Vec::new();
    for f in 0..40 {
        let n = 300 + rng.below(1700) as usize;
        let mut lines: Vec<String> = (0..n).map(|_| line(&mut rng)).collect();
        p.file(format!("old{f}.txt"), lines.concat());
        for _ in 0..n * (10 + rng.below(36) as usize) / 100 {
            let at = rng.below(n as u64) as usize;
            lines[at] = line(&mut rng);
        }
        moved.push(lines.concat());
    }
    let a = p.snap();
    for (f, text) in moved.iter().enumerate() {
        p.remove(format!("old{f}.txt"))
            .file(format!("new{f}.txt"), text);
    }
    let b = p.snap();
    let ours = p.rewind(["diff", &a, &b]);
    ours.assert_success();
    let git = sb.git_in(&p.store(), ["diff", "-M", &a, &b]);
    let lines = |text: &str, prefix: &str| -> Vec<String> {
        (text.lines())
            .filter(|l| l.starts_with(prefix))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(
        lines(&ours.stdout, "rename "),
        lines(&git, "rename "),
        "the pairs are git's"
    );
    let (ours, git) = (
        lines(&ours.stdout, "similarity "),
        lines(&git, "similarity "),
    );
    assert_eq!(ours.len(), 40);
    let differ = ours.iter().zip(&git).filter(|(o, g)| o != g).count();
    eprintln!("{differ} of 40 similarity indexes differ from git's");
    assert!(
        differ <= 2,
        "{differ} of 40 similarity indexes differ from git's"
    );
}
