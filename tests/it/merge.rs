//! The three-way text merge (`rewind::for_tests::merge_texts`) against
//! `git merge-file -p -L a -L b -L c ours base theirs`: the merged text byte for byte, the
//! number of conflicts (git's exit code), and each conflict's ours/theirs lines against the
//! lines git prints between its markers.
//!
//! Random cases come from fixed seeds; `REWIND_MERGE_CASES=N` runs N cases per seed instead of
//! the default.

use crate::common::*;
use std::fs;

const LABELS: [&str; 3] = ["a", "b", "c"];
/// Random cases per seed in `cargo test` (both seeds together take 10–20 s on 2 shared cores).
const DEFAULT_CASES: usize = 1500;

/// The three files of a case, written once per test into a sandbox.
struct Oracle {
    sb: Sandbox,
}

impl Oracle {
    fn new() -> Oracle {
        Oracle { sb: Sandbox::new() }
    }

    /// `git merge-file -p -L a -L b -L c ours base theirs`: stdout and the exit code (the
    /// number of conflicts).
    fn merge_file(&self, base: &[u8], ours: &[u8], theirs: &[u8]) -> (Vec<u8>, i32) {
        let dir = &self.sb.root;
        fs::write(dir.join("base"), base).unwrap();
        fs::write(dir.join("ours"), ours).unwrap();
        fs::write(dir.join("theirs"), theirs).unwrap();
        let out = self
            .sb
            .isolated("git")
            .current_dir(dir)
            .args(["merge-file", "-p", "-L", "a", "-L", "b", "-L", "c"])
            .args(["ours", "base", "theirs"])
            .output()
            .expect("git merge-file is this test's oracle");
        let code = out.status.code().expect("git merge-file exited");
        assert!((0..127).contains(&code), "git merge-file failed: {out:?}");
        (out.stdout, code)
    }

    /// How `merge_texts` differs from git on this case, if it does.
    fn differs(&self, base: &[u8], ours: &[u8], theirs: &[u8]) -> Option<String> {
        let (git_text, git_conflicts) = self.merge_file(base, ours, theirs);
        let (text, conflicts) = rewind::for_tests::merge_texts(base, ours, theirs, LABELS);
        let case = format!(
            "base {:?}\nours {:?}\ntheirs {:?}\ngit ({git_conflicts} conflicts):\n{}\nrewind ({} conflicts):\n{}",
            String::from_utf8_lossy(base),
            String::from_utf8_lossy(ours),
            String::from_utf8_lossy(theirs),
            String::from_utf8_lossy(&git_text),
            conflicts.len(),
            String::from_utf8_lossy(&text),
        );
        if text != git_text || conflicts.len() != git_conflicts as usize {
            return Some(case);
        }
        let expected: Vec<Printed> = sections_between_markers(&git_text);
        let named = conflicts.iter().zip(&expected).map(|(c, printed)| Printed {
            eol: printed.eol,
            sides: [
                lines_of(ours, c.ours_start, c.ours_lines, printed.eol),
                lines_of(theirs, c.theirs_start, c.theirs_lines, printed.eol),
            ],
        });
        if !named.eq(expected.iter().cloned()) {
            return Some(format!("conflict lines {conflicts:?} for\n{case}"));
        }
        let base_lines = split_lines(base).len() as u32;
        if let Some(c) = conflicts
            .iter()
            .find(|c| c.base_start < 1 || c.base_start - 1 + c.base_lines > base_lines)
        {
            return Some(format!("base lines out of range {c:?} for\n{case}"));
        }
        None
    }

    /// Fails with the case when `merge_texts` differs from git.
    fn check(&self, base: &str, ours: &str, theirs: &str) {
        let (base, ours, theirs) = (base.as_bytes(), ours.as_bytes(), theirs.as_bytes());
        if let Some(difference) = self.differs(base, ours, theirs) {
            panic!("differs from git merge-file:\n{difference}");
        }
    }

    /// The number of conflicts git reports, after [`Oracle::check`].
    fn conflicts(&self, base: &str, ours: &str, theirs: &str) -> i32 {
        self.check(base, ours, theirs);
        self.merge_file(base.as_bytes(), ours.as_bytes(), theirs.as_bytes())
            .1
    }
}

/// Lines keep their `\n`; a last line may have none.
fn split_lines(text: &[u8]) -> Vec<&[u8]> {
    text.split_inclusive(|&b| b == b'\n').collect()
}

/// `count` lines of `text` from 1-based line `start`; a last line without a newline gets
/// `eol`, as git ends it inside a conflict.
fn lines_of(text: &[u8], start: u32, count: u32, eol: &[u8]) -> Lines {
    let lines = split_lines(text);
    let from = start as usize - 1;
    let mut lines: Lines = lines[from..from + count as usize]
        .iter()
        .map(|l| l.to_vec())
        .collect();
    if let Some(last) = lines.last_mut().filter(|l| !l.ends_with(b"\n")) {
        last.extend_from_slice(eol);
    }
    lines
}

/// Lines with their line ends.
type Lines = Vec<Vec<u8>>;

/// One conflict as git prints it: the line end of its markers, and the ours and theirs lines
/// between them.
#[derive(Clone, PartialEq, Debug)]
struct Printed {
    eol: &'static [u8],
    sides: [Lines; 2],
}

/// The conflicts in git's output.
fn sections_between_markers(text: &[u8]) -> Vec<Printed> {
    let mut printed: Vec<Printed> = Vec::new();
    let mut side = None;
    for line in split_lines(text) {
        let eol: &'static [u8] = if line.ends_with(b"\r\n") {
            b"\r\n"
        } else {
            b"\n"
        };
        let marker = line.strip_suffix(eol).unwrap_or(line);
        match (marker, side) {
            (b"<<<<<<< a", None) => {
                printed.push(Printed {
                    eol,
                    sides: [Vec::new(), Vec::new()],
                });
                side = Some(0);
            }
            (b"=======", Some(0)) => side = Some(1),
            (b">>>>>>> c", Some(1)) => side = None,
            (_, Some(s)) => printed.last_mut().unwrap().sides[s].push(line.to_vec()),
            (_, None) => {}
        }
    }
    printed
}

// ---------------------------------------------------------------------------
// Random cases
// ---------------------------------------------------------------------------

/// Few distinct lines, so changes collide and diffs have many equally short answers: letters,
/// lines without an ASCII letter or digit (which join conflicts; `é` and `_` are not
/// alphanumeric to git), indented and blank lines (where `git diff`'s indent heuristic would
/// place changes elsewhere), a lone CR inside a line.
const ALPHABET: [&str; 15] = [
    "a", "b", "c", "d", "x y", "{", "}", "", ";", "  a", "\tb", "    }", "é", "_", "a\rb",
];

/// Line ends of one case.
#[derive(Clone, Copy)]
enum Ends {
    Lf,
    Crlf,
    Mixed,
}

fn random_line(rng: &mut XorShift, ends: Ends) -> Vec<u8> {
    let mut line = ALPHABET[rng.below(ALPHABET.len() as u64) as usize]
        .as_bytes()
        .to_vec();
    let crlf = match ends {
        Ends::Lf => false,
        Ends::Crlf => true,
        Ends::Mixed => rng.below(2) == 0,
    };
    line.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
    line
}

/// `lines` after up to `edits` random inserts, deletes and replacements.
fn edit(rng: &mut XorShift, lines: &[Vec<u8>], edits: u64, ends: Ends) -> Vec<Vec<u8>> {
    let mut lines = lines.to_vec();
    for _ in 0..rng.below(edits + 1) {
        let at = rng.below(lines.len() as u64 + 1) as usize;
        match rng.below(3) {
            0 => lines.insert(at, random_line(rng, ends)),
            1 if at < lines.len() => {
                lines.remove(at);
            }
            _ if at < lines.len() => lines[at] = random_line(rng, ends),
            _ => {}
        }
    }
    lines
}

/// The file's bytes; one time in four without its last line end, or without only the `\n` of
/// a last CRLF (a CR then ends the file).
fn render(rng: &mut XorShift, lines: &[Vec<u8>]) -> Vec<u8> {
    let mut text = lines.concat();
    if rng.below(4) == 0 && text.ends_with(b"\n") {
        text.pop();
        if rng.below(2) == 0 && text.ends_with(b"\r") {
            text.pop();
        }
    }
    text
}

/// One random case: base, ours, theirs. Sometimes a side equals base, both sides are the same,
/// or a file is empty.
fn random_case(rng: &mut XorShift) -> [Vec<u8>; 3] {
    let ends = match rng.below(4) {
        0 => Ends::Crlf,
        1 => Ends::Mixed,
        _ => Ends::Lf,
    };
    let (size, edits) = match rng.below(50) {
        0 => (300, 40),
        1..=10 => (40, 10),
        _ => (10, 4),
    };
    let base: Vec<_> = (0..rng.below(size + 1))
        .map(|_| random_line(rng, ends))
        .collect();
    let ours = edit(rng, &base, edits, ends);
    let theirs = match rng.below(10) {
        0 => base.clone(),
        1 => ours.clone(),
        2 => Vec::new(),
        _ => edit(rng, &base, edits, ends),
    };
    let ours = if rng.below(10) == 0 {
        base.clone()
    } else {
        ours
    };
    [render(rng, &base), render(rng, &ours), render(rng, &theirs)]
}

/// Cases per seed: [`DEFAULT_CASES`], or `REWIND_MERGE_CASES`.
fn cases() -> usize {
    std::env::var("REWIND_MERGE_CASES")
        .ok()
        .map(|n| n.parse().expect("REWIND_MERGE_CASES is a number"))
        .unwrap_or(DEFAULT_CASES)
}

/// Every random case of `seed` gives git's text and conflict count; the shortest difference (of
/// how many) is shown.
fn random_cases_match_git(seed: u64) {
    let oracle = Oracle::new();
    let mut rng = XorShift::seeded(seed);
    let cases = cases();
    let mut differences = Vec::new();
    for _ in 0..cases {
        let [base, ours, theirs] = random_case(&mut rng);
        if let Some(difference) = oracle.differs(&base, &ours, &theirs) {
            differences.push(difference);
        }
    }
    assert!(
        differences.is_empty(),
        "seed {seed}: {} of {cases} cases differ from git merge-file; the shortest:\n{}",
        differences.len(),
        differences.iter().min_by_key(|d| d.len()).unwrap()
    );
}

#[test]
fn random_cases_match_git_seed_1() {
    random_cases_match_git(1);
}

#[test]
fn random_cases_match_git_seed_2() {
    random_cases_match_git(2);
}

// ---------------------------------------------------------------------------
// Named cases
// ---------------------------------------------------------------------------

#[test]
fn changes_to_adjacent_lines_conflict() {
    let o = Oracle::new();
    assert_eq!(o.conflicts("a\nb\n", "A\nb\n", "a\nB\n"), 1);
    assert_eq!(o.conflicts("a\nb\nc\n", "A\nb\nc\n", "a\nb\nC\n"), 0);
}

#[test]
fn insertions_at_the_same_place_conflict_unless_equal() {
    let o = Oracle::new();
    assert_eq!(o.conflicts("a\nb\n", "a\nx\nb\n", "a\ny\nb\n"), 1);
    assert_eq!(o.conflicts("a\nb\n", "a\nx\nb\n", "a\nx\nb\n"), 0);
}

#[test]
fn the_same_change_on_both_sides_is_clean() {
    let o = Oracle::new();
    assert_eq!(o.conflicts("a\nb\nc\n", "a\nB\n", "a\nB\n"), 0);
    assert_eq!(o.conflicts("a\nb\n", "", ""), 0);
}

#[test]
fn only_the_lines_the_two_sides_disagree_on_conflict() {
    let o = Oracle::new();
    let base = "1\n2\n3\n4\n5\n6\n7\n";
    assert_eq!(
        o.conflicts(
            base,
            "x\nsame\nline\nkept\nagain\ny\n",
            "z\nsame\nline\nkept\nagain\nw\n"
        ),
        2
    );
}

#[test]
fn conflicts_three_lines_apart_are_one() {
    let o = Oracle::new();
    assert_eq!(
        o.conflicts("1\nx\ny\nz\n2\n", "A\nx\ny\nz\nB\n", "C\nx\ny\nz\nD\n"),
        1
    );
    assert_eq!(
        o.conflicts(
            "1\nw\nx\ny\nz\n2\n",
            "A\nw\nx\ny\nz\nB\n",
            "C\nw\nx\ny\nz\nD\n"
        ),
        2
    );
}

#[test]
fn conflicts_apart_by_lines_without_letters_or_digits_are_one() {
    let o = Oracle::new();
    assert_eq!(
        o.conflicts(
            "1\n{\n}\n;\n \n2\n",
            "A\n{\n}\n;\n \nB\n",
            "C\n{\n}\n;\n \nD\n"
        ),
        1
    );
}

#[test]
fn markers_end_in_crlf_when_the_lines_around_do() {
    let o = Oracle::new();
    o.check("b\r\n", "x\r\n", "y\r\n");
    o.check("b\r\nq\n", "x\r\n", "y\n");
    o.check("b\nq\r\n", "x\r\n", "y\r\n");
    o.check("b\r\n", "x", "y");
    o.check("b\r\n", "p\r\nx", "p\r\ny");
    o.check("b\r\n", "", "y\r\n");
    // No base line to tell: LF, though both sides use CRLF.
    o.check("", "x\r\n", "y\r\n");
}

#[test]
fn a_missing_final_newline_inside_a_conflict_gets_one() {
    let o = Oracle::new();
    o.check("a\nb\n", "a\nx", "a\ny");
    o.check("a\r\nb\r\n", "a\r\nx", "a\r\ny");
    o.check("a\nb", "a\nb\n", "a\nc");
    o.check("a\nb", "a\nb\n", "a\nb");
}

#[test]
fn empty_files_merge() {
    let o = Oracle::new();
    o.check("", "", "");
    o.check("", "a\n", "");
    o.check("a\n", "", "a\n");
    o.check("", "a\n", "b\n");
}

#[test]
fn conflict_hunks_name_their_lines() {
    let (_, conflicts) = rewind::for_tests::merge_texts(
        b"1\n2\n3\n4\n5\n6\n7\n8\n9\n",
        b"1\n2\nours\n4\n5\n6\n7\n8\n",
        b"1\n2\ntheirs\n4\n5\n6\n7\n8\n9\n10\n",
        LABELS,
    );
    let hunk = |ours_start, ours_lines, base_start, base_lines, theirs_start, theirs_lines| {
        rewind::ConflictHunk {
            ours_start,
            ours_lines,
            base_start,
            base_lines,
            theirs_start,
            theirs_lines,
        }
    };
    // Line 3 changed both ways; after line 8, ours deleted 9 where theirs added 10: an empty
    // region of ours just before its line 9 (one past its end).
    assert_eq!(conflicts, [hunk(3, 1, 3, 1, 3, 1), hunk(9, 0, 9, 1, 9, 2)]);
}

/// `git diff` would place ours' added `c` before the first `c` (its indent heuristic prefers
/// the slider end with less indent after it), touching theirs' insertion: a conflict. git's
/// merge diffs without that heuristic, slides the addition down, and merges cleanly.
#[test]
fn diffs_from_base_slide_without_the_indent_heuristic() {
    let o = Oracle::new();
    assert_eq!(
        o.conflicts("c\n\tb\n", "c\nc\n\tb\n", "  a\nb\nc\n\tb\n"),
        0
    );
}

/// Where both sides' changes overlap differently but give the same lines (both delete `}` and
/// an `a` beside it: ours the `a` after, theirs the one before), git keeps that stretch as a
/// resolved region between the conflicts on either side of it, which then stay two though
/// only three lines apart. One identical change on each side, of the same lines, leaves no
/// region: see [`conflicts_around_the_same_change_on_both_sides_are_one`].
#[test]
fn conflicts_around_changes_that_agree_after_overlapping_stay_apart() {
    let o = Oracle::new();
    assert_eq!(
        o.conflicts(
            "P\nb\na\n}\na\nb\nS\n",
            "P1\nb\na\nb\nS1\n",
            "P2\nb\nb\na\nb\nS2\n"
        ),
        2
    );
}

/// Both sides change `c` to `C`: no region of its own, so the conflicts three lines apart
/// around it are printed as one.
#[test]
fn conflicts_around_the_same_change_on_both_sides_are_one() {
    let o = Oracle::new();
    assert_eq!(
        o.conflicts("P\nb\nc\nd\nS\n", "P1\nb\nC\nd\nS1\n", "P2\nb\nC\nd\nS2\n"),
        1
    );
}

// ---------------------------------------------------------------------------
// Large files: the line diff's known gap (docs/design.md, Line diffs)
// ---------------------------------------------------------------------------

/// `cases` random merges of a base of `lines` to `lines * 1.5` lines, each side `edits`
/// random inserts, deletes and replacements of it; how many differ from git.
fn large_merges_differing(seed: u64, cases: usize, lines: u64, edits: usize) -> usize {
    let oracle = Oracle::new();
    let mut rng = XorShift::seeded(seed);
    let mut differing = 0;
    for _ in 0..cases {
        let count = lines + rng.below(lines / 2);
        let base = code_lines(&mut rng, count as usize);
        let mut side = || {
            let mut text = base.clone();
            edit_code_lines(&mut rng, &mut text, edits);
            text.join("\n") + "\n"
        };
        let (ours, theirs) = (side(), side());
        let base = base.join("\n") + "\n";
        let differs = oracle.differs(base.as_bytes(), ours.as_bytes(), theirs.as_bytes());
        differing += differs.is_some() as usize;
    }
    differing
}

/// Files of 20,000–30,000 lines with 400 changes a side merge as git merges them.
#[test]
fn large_merges_match_git() {
    assert_eq!(large_merges_differing(21, 4, 20_000, 400), 0);
}

/// Known difference, the line diff's (docs/design.md, Line diffs and Three-way merge): past
/// 35,000 lines with hundreds of scattered changes, imara's Myers gives up on a minimal script
/// at other points than git's, and the merge differs with it. Held at the rate this fixed set
/// measures (3 of 4); tighten it when the line diff comes closer to git.
#[test]
fn large_heavily_edited_merges_differ_from_git_at_the_measured_rate() {
    const MEASURED: usize = 3;
    assert_eq!(large_merges_differing(13, 4, 40_000, 1000), MEASURED);
}
