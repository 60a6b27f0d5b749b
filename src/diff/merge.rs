//! Three-way text merge with `git merge-file -p`'s result, byte for byte: the same line diff,
//! the same rules for what conflicts, and conflict markers written as git writes them.
//!
//! How it works (docs/design.md, "Three-way merge"):
//! 1. Diff base→ours and base→theirs: Myers, with git's compaction of changes that can slide
//!    (down as far as they go, or up to meet a change on the other side) and no indent
//!    heuristic.
//! 2. Walk both change lists in base order. A change of one side whose base lines overlap or
//!    touch a change of the other side joins it in one region; a region changed by one side only
//!    takes that side's lines.
//! 3. A region both sides changed: identical new lines are no conflict. Otherwise the two new
//!    texts are diffed against each other and only their differences conflict; lines both
//!    agree on are printed once, between conflicts.
//! 4. Two conflicts with nothing between them but at most three lines, or lines without an ASCII
//!    letter or digit, are printed as one (git's "zealous alnum" level).

use std::ops::Range;

use gix_imara_diff::{sources::byte_lines, Algorithm, Diff, Interner, NoSliderHeuristic, Token};
use serde::Serialize;

/// Conflicts separated by at most this many lines are printed as one.
const JOIN_GAP: u32 = 3;

/// One region both sides changed differently, as `git merge-file` prints it between markers.
///
/// Lines are 1-based: `*_start` is the number of the region's first line in that text, and
/// `*_lines` how many lines it has. A count of 0 is an empty region just before line
/// `*_start` (after line `*_start - 1`; `*_start` is one past the last line at the end).
/// `ours_*` and `theirs_*` are exactly the lines printed between the markers. `base_*` are the
/// base lines the conflicting changes replaced: the whole stretch where both sides' changes
/// overlap. git prints the part of such a stretch where the two sides differ, so a stretch can
/// give several conflicts, each naming the same base lines; conflicts printed as one name the
/// base lines from the first one's to the last one's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConflictHunk {
    /// First line of ours' conflicting lines.
    pub ours_start: u32,
    /// How many lines of ours conflict.
    pub ours_lines: u32,
    /// First base line of the stretch both sides changed.
    pub base_start: u32,
    /// How many base lines that stretch has.
    pub base_lines: u32,
    /// First line of theirs' conflicting lines.
    pub theirs_start: u32,
    /// How many lines of theirs conflict.
    pub theirs_lines: u32,
}

/// The merged text and its conflicts.
pub(crate) struct Merged {
    /// What `git merge-file -p` prints: the merge, with markers around each conflict.
    pub(crate) text: Vec<u8>,
    /// In the order they appear in `text`; empty for a clean merge.
    pub(crate) conflicts: Vec<ConflictHunk>,
}

/// `git merge-file -p -L ours_label -L base_label -L theirs_label ours base theirs`: `text` is
/// what git prints (with markers when `conflicts` is not empty). The base label is only printed
/// by git's diff3 styles, so it is unused here. Texts must have fewer than 2^31 lines each
/// (the line diff's bound; git refuses files over 1 GiB). Costs one hash per line of the three
/// texts, the two line diffs from base (O((N+M)·D) each), a diff of each conflicting region's
/// two sides, and one copy of the output.
pub(crate) fn merge_texts(base: &[u8], ours: &[u8], theirs: &[u8], labels: [&str; 3]) -> Merged {
    let mut interner = Interner::new(0);
    let base = Text::new(base, &mut interner);
    let ours = Text::new(ours, &mut interner);
    let theirs = Text::new(theirs, &mut interner);
    let tokens = interner.num_tokens();
    let regions = regions(&base, &ours, &theirs, tokens);

    let mut text = Vec::with_capacity(ours.bytes.len().max(theirs.bytes.len()));
    let mut conflicts = Vec::new();
    let mut at = 0;
    for region in &regions {
        match region.kind {
            Kind::Ours | Kind::Same => continue,
            Kind::Theirs => {
                text.extend_from_slice(ours.slice(at..region.ours.start));
                text.extend_from_slice(theirs.slice(region.theirs.clone()));
            }
            Kind::Conflict => {
                text.extend_from_slice(ours.slice(at..region.ours.start));
                let eol = marker_eol(&base, &ours, &theirs, region);
                push_marker(&mut text, "<<<<<<<", Some(labels[0]), eol);
                push_section(&mut text, &ours, region.ours.clone(), eol);
                push_marker(&mut text, "=======", None, eol);
                push_section(&mut text, &theirs, region.theirs.clone(), eol);
                push_marker(&mut text, ">>>>>>>", Some(labels[2]), eol);
                conflicts.push(region.hunk());
            }
        }
        at = region.ours.end;
    }
    text.extend_from_slice(ours.slice(at..ours.lines()));
    Merged { text, conflicts }
}

/// One input split into lines (each keeps its `\n`; a missing final newline leaves the last
/// line without one) and their tokens.
struct Text<'a> {
    bytes: &'a [u8],
    /// Byte offset of each line's start, plus the length of `bytes` at the end.
    starts: Vec<usize>,
    tokens: Vec<Token>,
}

impl<'a> Text<'a> {
    /// Costs one hash per line.
    fn new(bytes: &'a [u8], interner: &mut Interner<&'a [u8]>) -> Text<'a> {
        let mut starts = vec![0];
        let mut tokens = Vec::new();
        for line in byte_lines(bytes) {
            starts.push(starts[starts.len() - 1] + line.len());
            tokens.push(interner.intern(line));
        }
        Text {
            bytes,
            starts,
            tokens,
        }
    }

    fn lines(&self) -> u32 {
        self.tokens.len() as u32
    }

    /// The bytes of lines `range`.
    fn slice(&self, range: Range<u32>) -> &'a [u8] {
        &self.bytes[self.starts[range.start as usize]..self.starts[range.end as usize]]
    }

    fn line(&self, i: u32) -> &'a [u8] {
        self.slice(i..i + 1)
    }

    /// Whether line `i` ends in CRLF (`Some(true)`) or LF (`Some(false)`); a last line without
    /// a newline answers for the line before it, and `None` when there is none (or no line).
    fn crlf(&self, i: u32) -> Option<bool> {
        if i >= self.lines() {
            return None;
        }
        let line = self.line(i);
        if line.ends_with(b"\n") {
            Some(line.ends_with(b"\r\n"))
        } else if i > 0 {
            self.crlf(i - 1)
        } else {
            None
        }
    }
}

/// What happens to one stretch of the texts.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// Only ours changed it: ours' lines stay.
    Ours,
    /// Only theirs changed it: theirs' lines replace ours'.
    Theirs,
    /// Both sides' changes, overlapping differently, gave the same lines.
    Same,
    /// Both changed it differently: printed between markers.
    Conflict,
}

/// A stretch of base, and the lines of ours and theirs it became.
#[derive(Debug)]
struct Region {
    kind: Kind,
    base: Range<u32>,
    ours: Range<u32>,
    theirs: Range<u32>,
}

impl Region {
    fn hunk(&self) -> ConflictHunk {
        ConflictHunk {
            ours_start: self.ours.start + 1,
            ours_lines: self.ours.len() as u32,
            base_start: self.base.start + 1,
            base_lines: self.base.len() as u32,
            theirs_start: self.theirs.start + 1,
            theirs_lines: self.theirs.len() as u32,
        }
    }
}

/// The changed stretches in order, conflicts refined and joined as git's "zealous alnum"
/// merge level does. Costs the two line diffs from base plus one diff per region both sides
/// changed differently (of that region's lines only).
fn regions(base: &Text, ours: &Text, theirs: &Text, tokens: u32) -> Vec<Region> {
    let by_ours = line_changes(&base.tokens, &ours.tokens, tokens);
    let by_theirs = line_changes(&base.tokens, &theirs.tokens, tokens);
    let (mut o, mut t) = (Changes::new(&by_ours), Changes::new(&by_theirs));
    let mut regions: Vec<Region> = Vec::new();
    while let Some(start) = [o.next_start(), t.next_start()].into_iter().flatten().min() {
        // Changes of either side join the stretch while they overlap or touch it.
        let mut end = start;
        let (o_before, t_before) = (o.clone(), t.clone());
        while o.take_if_starts_by(&mut end) || t.take_if_starts_by(&mut end) {}
        let mut region = Region {
            kind: Kind::Conflict,
            ours: o.side_range(&o_before, start..end),
            theirs: t.side_range(&t_before, start..end),
            base: start..end,
        };
        let same =
            || ours.tokens[as_usize(&region.ours)] == theirs.tokens[as_usize(&region.theirs)];
        region.kind = match (o.next - o_before.next, t.next - t_before.next) {
            (_, 0) => Kind::Ours,
            (0, _) => Kind::Theirs,
            // One change on each side, of the same base lines to the same lines, leaves no
            // region at all (as in git): conflicts on either side of it may join.
            (1, 1) if o.changes[o_before.next].0 == t.changes[t_before.next].0 && same() => {
                continue
            }
            _ if same() => Kind::Same,
            _ => {
                for conflict in refine(ours, theirs, &region, tokens) {
                    join_or_push(&mut regions, conflict, ours);
                }
                continue;
            }
        };
        regions.push(region);
    }
    regions
}

/// The conflicts of a region both sides changed differently: the differences between its two
/// new texts (lines both sides agree on are not in conflict). Costs one line diff of the
/// region's lines.
fn refine<'r>(
    ours: &Text,
    theirs: &Text,
    region: &'r Region,
    tokens: u32,
) -> impl Iterator<Item = Region> + 'r {
    let changes = line_changes(
        &ours.tokens[as_usize(&region.ours)],
        &theirs.tokens[as_usize(&region.theirs)],
        tokens,
    );
    let (o0, t0) = (region.ours.start, region.theirs.start);
    changes.into_iter().map(move |(o, t)| Region {
        kind: Kind::Conflict,
        base: region.base.clone(),
        ours: o0 + o.start..o0 + o.end,
        theirs: t0 + t.start..t0 + t.end,
    })
}

/// Push `conflict`, or extend the last region with it when that is a conflict separated from
/// this one by at most [`JOIN_GAP`] lines or by lines without an ASCII letter or digit (git
/// prints them as one conflict). Costs a scan of the lines between.
fn join_or_push(regions: &mut Vec<Region>, conflict: Region, ours: &Text) {
    if let Some(last) = regions.last_mut().filter(|r| r.kind == Kind::Conflict) {
        let between = last.ours.end..conflict.ours.start;
        let no_alnum = || {
            !ours
                .slice(between.clone())
                .iter()
                .any(u8::is_ascii_alphanumeric)
        };
        if between.len() as u32 <= JOIN_GAP || no_alnum() {
            last.base.end = last.base.end.max(conflict.base.end);
            last.ours.end = conflict.ours.end;
            last.theirs.end = conflict.theirs.end;
            return;
        }
    }
    regions.push(conflict);
}

/// One side's changes from base, walked in base order.
#[derive(Clone)]
struct Changes<'c> {
    changes: &'c [(Range<u32>, Range<u32>)],
    /// Index of the first change not yet in a region.
    next: usize,
    /// How many more lines the side has than base before `next`.
    shift: i64,
}

impl<'c> Changes<'c> {
    fn new(changes: &'c [(Range<u32>, Range<u32>)]) -> Self {
        Changes {
            changes,
            next: 0,
            shift: 0,
        }
    }

    fn next_start(&self) -> Option<u32> {
        self.changes.get(self.next).map(|(b, _)| b.start)
    }

    /// Take the next change when it starts at or before `end` (overlapping or touching the
    /// stretch), and extend `end` over it.
    fn take_if_starts_by(&mut self, end: &mut u32) -> bool {
        match self.changes.get(self.next) {
            Some((b, s)) if b.start <= *end => {
                *end = (*end).max(b.end);
                self.shift += s.len() as i64 - b.len() as i64;
                self.next += 1;
                true
            }
            _ => false,
        }
    }

    /// The side's lines for base lines `base`, whose changes were taken since `before`: base
    /// lines outside them are unchanged, so each end shifts by the changes before it.
    fn side_range(&self, before: &Changes, base: Range<u32>) -> Range<u32> {
        let start = (base.start as i64 + before.shift) as u32;
        let end = (base.end as i64 + self.shift) as u32;
        start..end
    }
}

/// The line diff git's merge uses: Myers, then changes that can slide moved down as far as they
/// go (or to meet a change of the other text), without git diff's indent heuristic. Costs one
/// Myers run, O((N+M)·D) for D changed lines, and one pass to slide.
fn line_changes(before: &[Token], after: &[Token], tokens: u32) -> Vec<(Range<u32>, Range<u32>)> {
    let mut diff = Diff::default();
    diff.compute_with(Algorithm::Myers, before, after, tokens);
    diff.postprocess_with(before, after, NoSliderHeuristic);
    diff.hunks().map(|h| (h.before, h.after)).collect()
}

/// Markers end in CRLF when the lines around the conflict do: ours' line before it (its
/// first line at the start), then theirs', then base's first line; any of them ending in LF
/// alone, or base having none to tell, gives LF.
fn marker_eol(base: &Text, ours: &Text, theirs: &Text, region: &Region) -> &'static [u8] {
    let before = |range: &Range<u32>| range.start.saturating_sub(1);
    let crlf = ours.crlf(before(&region.ours)) != Some(false)
        && theirs.crlf(before(&region.theirs)) != Some(false)
        && base.crlf(0) == Some(true);
    if crlf {
        b"\r\n"
    } else {
        b"\n"
    }
}

/// A marker line: seven marker characters, then a space and the label when there is one.
fn push_marker(text: &mut Vec<u8>, marker: &str, label: Option<&str>, eol: &[u8]) {
    text.extend_from_slice(marker.as_bytes());
    if let Some(label) = label {
        text.push(b' ');
        text.extend_from_slice(label.as_bytes());
    }
    text.extend_from_slice(eol);
}

/// One side of a conflict; a last line without a newline gets one, so the marker after it
/// starts a line.
fn push_section(text: &mut Vec<u8>, side: &Text, lines: Range<u32>, eol: &[u8]) {
    let section = side.slice(lines);
    text.extend_from_slice(section);
    if !section.is_empty() && !section.ends_with(b"\n") {
        text.extend_from_slice(eol);
    }
}

fn as_usize(range: &Range<u32>) -> Range<usize> {
    range.start as usize..range.end as usize
}
