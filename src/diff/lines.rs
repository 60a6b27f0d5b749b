//! Line diffs through imara-diff (Myers with git's indent heuristic), and hunks written as
//! `git diff` writes them: three lines of context, `@@` ranges and function names.

use std::ops::Range;

use gix_imara_diff::{
    sources::byte_lines, Algorithm, Diff, IndentHeuristic, IndentLevel, InternedInput,
};

use super::{CONTEXT, FUNCNAME_MAX};

/// The line diff of two texts as `git diff` computes it by default: Myers' algorithm, then git's
/// indent heuristic to place changes that could slide (both from gix-imara-diff, the heuristic
/// fed git's measure of indent: [`git_indent`]). Lines keep their `\n`, so a missing final
/// newline is a change, as in git.
pub(super) struct LineDiff<'a> {
    pub(super) input: InternedInput<&'a [u8]>,
    /// Lines `.0` of the old text became lines `.1` of the new one; sorted and disjoint.
    pub(super) changes: Vec<(Range<u32>, Range<u32>)>,
}

impl<'a> LineDiff<'a> {
    /// Costs one hash per line, then O((N+M)·D) for D changed lines (bounded by imara's
    /// heuristics on large inputs) and one pass of the slider heuristic.
    pub(super) fn new(old: &'a [u8], new: &'a [u8]) -> LineDiff<'a> {
        let input = InternedInput::new(byte_lines(old), byte_lines(new));
        let mut diff = Diff::compute(Algorithm::Myers, &input);
        let indent = |token| git_indent(input.interner[token]);
        diff.postprocess_with_heuristic(&input, IndentHeuristic::new(indent));
        let changes = diff.hunks().map(|h| (h.before, h.after)).collect();
        LineDiff { input, changes }
    }

    pub(super) fn additions(&self) -> usize {
        self.changes.iter().map(|(_, new)| new.len()).sum()
    }

    pub(super) fn deletions(&self) -> usize {
        self.changes.iter().map(|(old, _)| old.len()).sum()
    }

    /// Line `i` of the old text.
    pub(super) fn old_line(&self, i: u32) -> &'a [u8] {
        self.input.interner[self.input.before[i as usize]]
    }

    /// Append the hunks as `git diff` prints them: three lines of context, changes at most six
    /// unchanged lines apart in one hunk, `@@ -a,b +c,d @@` headers with the function name.
    /// Costs one pass over the printed lines, plus the function-name search.
    pub(super) fn write_hunks(&self, out: &mut Vec<u8>) {
        let old_len = self.input.before.len() as u32;
        let mut rest = &self.changes[..];
        let mut names = FunctionNames::default();
        while let Some(first) = rest.first() {
            let mut n = 1;
            while n < rest.len() && rest[n].0.start - rest[n - 1].0.end <= 2 * CONTEXT {
                n += 1;
            }
            let (group, tail) = rest.split_at(n);
            rest = tail;
            let last = &group[n - 1];
            // Unchanged lines pair up one to one, so context shifts both sides alike.
            let lead = first.0.start.min(CONTEXT);
            let trail = (old_len - last.0.end).min(CONTEXT);
            let (old_start, new_start) = (first.0.start - lead, first.1.start - lead);
            out.extend_from_slice(b"@@ -");
            push_range(out, old_start, last.0.end + trail - old_start);
            out.extend_from_slice(b" +");
            push_range(out, new_start, last.1.end + trail - new_start);
            out.extend_from_slice(b" @@");
            if let Some(name) = names.above(self, old_start) {
                out.push(b' ');
                out.extend_from_slice(name);
            }
            out.push(b'\n');
            let mut at = old_start;
            for (old, new) in group {
                self.push_lines(out, b' ', &self.input.before, at..old.start);
                self.push_lines(out, b'-', &self.input.before, old.clone());
                self.push_lines(out, b'+', &self.input.after, new.clone());
                at = old.end;
            }
            self.push_lines(out, b' ', &self.input.before, at..last.0.end + trail);
        }
    }

    /// Append lines `range` of `side`, each after `sign`; a last line without `\n` gets git's
    /// marker.
    pub(super) fn push_lines(
        &self,
        out: &mut Vec<u8>,
        sign: u8,
        side: &[gix_imara_diff::Token],
        range: Range<u32>,
    ) {
        for &token in &side[range.start as usize..range.end as usize] {
            let line = self.input.interner[token];
            out.push(sign);
            out.extend_from_slice(line);
            if !line.ends_with(b"\n") {
                out.extend_from_slice(b"\n\\ No newline at end of file\n");
            }
        }
    }
}

/// A line's indent for the slider heuristic, measured as git measures it: a space counts 1, a
/// tab runs to the next multiple of 8, CR and LF count nothing, and a line of only those is
/// blank. imara's own measure (`postprocess_lines`) also skips form feeds, which git counts as
/// text: a form-feed line is not blank to git. Costs one pass over the line's indent.
pub(super) fn git_indent(line: &[u8]) -> IndentLevel {
    let form_feed_as_text = line.iter().map(|&b| if b == b'\x0c' { b'x' } else { b });
    IndentLevel::for_ascii_line(form_feed_as_text, 8)
}

/// `start,len` of a hunk header: 1-based, `,len` left out when it is 1, and the line before
/// the hunk (0 for the start of the file) when the side is empty.
pub(super) fn push_range(out: &mut Vec<u8>, start: u32, len: u32) {
    let first = if len == 0 { start } else { start + 1 };
    out.extend_from_slice(first.to_string().as_bytes());
    if len != 1 {
        out.push(b',');
        out.extend_from_slice(len.to_string().as_bytes());
    }
}

/// git's default function-name finder for hunk headers: the nearest old line above the hunk
/// that starts with an ASCII letter, `_` or `$`, cut at 80 bytes, without trailing spaces, tabs
/// and line ends, up to its first byte that is not UTF-8 (or U+FFFE/U+FFFF). Remembers the
/// last search, so a file's hunks cost one backward scan in all.
#[derive(Default)]
pub(super) struct FunctionNames {
    /// Lines below this were searched already and gave `found` (a line index).
    pub(super) searched: u32,
    pub(super) found: Option<u32>,
}

impl FunctionNames {
    pub(super) fn above<'a>(&mut self, diff: &LineDiff<'a>, start: u32) -> Option<&'a [u8]> {
        let starts_name = |i: &u32| {
            let first = diff.old_line(*i).first();
            first.is_some_and(|&b| b.is_ascii_alphabetic() || b == b'_' || b == b'$')
        };
        if let Some(i) = (self.searched..start).rev().find(starts_name) {
            self.found = Some(i);
        }
        self.searched = start;
        let line = diff.old_line(self.found?);
        let line = &line[..line.len().min(FUNCNAME_MAX)];
        let end = line
            .iter()
            .rposition(|b| !matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
            .map_or(0, |i| i + 1);
        // git then ends the name before its first byte that is not UTF-8 (such as a character
        // the cut split) and before U+FFFE or U+FFFF.
        let line = &line[..end];
        let valid = std::str::from_utf8(line).map_or_else(|e| e.valid_up_to(), |_| end);
        let end = std::str::from_utf8(&line[..valid]).map_or(valid, |text| {
            text.find(['\u{fffe}', '\u{ffff}']).unwrap_or(valid)
        });
        Some(&line[..end])
    }
}
