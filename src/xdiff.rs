//! Line diff byte-identical to `git diff` with default settings.
//!
//! A port of git's xdiff (checked against git 2.47) restricted to what `git diff` uses by
//! default: the Myers algorithm without `XDF_NEED_MINIMAL`, the indent heuristic, no whitespace
//! flags, three lines of context, no inter-hunk context and the default function-name finder.
//! The pieces, in the order they run, with the C functions they come from:
//!
//! * [`Sides::prepare`] ports `xdl_prepare_env` (`xprepare.c`): line splitting,
//!   classification, `xdl_trim_ends` and `xdl_cleanup_records` / `xdl_clean_mmatch`, which
//!   hide lines from the Myers pass and so change its result;
//! * [`Sides::compare`] and [`Myers::split`] port `xdl_recs_cmp` and `xdl_split` (`xdiffi.c`),
//!   with git's cost cut-offs (`xdl_bogosqrt`, `XDL_SNAKE_CNT`, `XDL_HEUR_MIN_COST`,
//!   `XDL_K_HEUR`);
//! * [`compact`] ports `xdl_change_compact` with the indent heuristic (`measure_split`,
//!   `score_add_split`), which decides where ambiguous hunks go;
//! * [`build_script`] ports `xdl_build_script`;
//! * [`emit`] ports `xdl_emit_diff`, `xdl_get_hunk`, `def_ff` and `get_func_line` (`xemit.c`),
//!   the hunk header of `xdl_format_hunk_hdr` and `\ No newline at end of file` of
//!   `xdl_emit_diffrec` (`xutils.c`), and `sane_truncate_line` (`diff.c`), which cuts a header
//!   at invalid UTF-8.
//!
//! Character classes are git's locale-independent ones: whitespace is exactly space, `\t`,
//! `\n` and `\r`; letters are ASCII letters.

use std::io::Write;

/// Lines of context around a change (`git diff -U3`).
const CONTEXT: usize = 3;
/// Bytes of a function line kept for a hunk header (`struct func_line` in `xemit.c`).
const FUNC_LINE_MAX: usize = 80;
/// Size of git's hunk header buffer, which caps the function name (`xdl_format_hunk_hdr`).
const HUNK_HEADER_MAX: usize = 128;

/// Multimatch threshold cap of `xdl_cleanup_records`.
const MAX_EQLIMIT: usize = 1024;
/// How far `xdl_clean_mmatch` looks on each side of a line.
const SIMSCAN_WINDOW: usize = 100;
/// Discard ratio of `xdl_clean_mmatch`.
const KPDIS_RUN: usize = 4;

/// Lower bound of the edit cost after which `xdl_split` gives up on an optimal split.
const MAX_COST_MIN: isize = 256;
/// Edit cost after which `xdl_split` looks for a good-enough snake.
const HEUR_MIN_COST: isize = 256;
/// Length of a snake that `xdl_split` considers good.
const SNAKE_CNT: isize = 20;
/// Factor of `xdl_split`'s "interesting diagonal" test.
const K_HEUR: isize = 4;
/// `XDL_LINE_MAX`: sentinel of the backward diagonals.
const LINE_MAX: isize = isize::MAX;

/// Cap of `get_indent`.
const MAX_INDENT: i32 = 200;
/// Cap of the blank-line runs that `measure_split` counts.
const MAX_BLANKS: i32 = 20;
/// How far `xdl_change_compact` slides a group for the indent heuristic.
const INDENT_HEURISTIC_MAX_SLIDING: usize = 100;
const START_OF_FILE_PENALTY: i32 = 1;
const END_OF_FILE_PENALTY: i32 = 21;
const TOTAL_BLANK_WEIGHT: i32 = -30;
const POST_BLANK_WEIGHT: i32 = 6;
const RELATIVE_INDENT_PENALTY: i32 = -4;
const RELATIVE_INDENT_WITH_BLANK_PENALTY: i32 = 10;
const RELATIVE_OUTDENT_PENALTY: i32 = 24;
const RELATIVE_OUTDENT_WITH_BLANK_PENALTY: i32 = 17;
const RELATIVE_DEDENT_PENALTY: i32 = 23;
const RELATIVE_DEDENT_WITH_BLANK_PENALTY: i32 = 17;
const INDENT_WEIGHT: i32 = 60;

/// The line diff of two buffers, as `git diff` computes it.
pub(crate) struct LineDiff {
    additions: usize,
    deletions: usize,
    /// The rendered hunks, from the first "@@" line on.
    hunks: Vec<u8>,
}

impl LineDiff {
    /// Diff `old` against `new` (raw bytes; lines end at '\n').
    ///
    /// Cost: O(bytes) to split and classify the lines, then xdiff's O((N + M) · D) Myers search,
    /// which its cost cut-offs keep near O((N + M) · √(N + M)) for very different inputs.
    pub(crate) fn new(old: &[u8], new: &[u8]) -> LineDiff {
        let mut sides = Sides::prepare(old, new);
        sides.compare();
        let Sides {
            mut one, mut two, ..
        } = sides;
        compact(&mut one, &two);
        compact(&mut two, &one);
        let script = build_script(&one, &two);
        let mut hunks = Vec::new();
        emit(&one.lines, &two.lines, &script, &mut hunks);
        LineDiff {
            additions: script.iter().map(|c| c.count2).sum(),
            deletions: script.iter().map(|c| c.count1).sum(),
            hunks,
        }
    }

    /// Lines added (the `git diff --numstat` first column).
    pub(crate) fn additions(&self) -> usize {
        self.additions
    }

    /// Lines deleted (the `git diff --numstat` second column).
    pub(crate) fn deletions(&self) -> usize {
        self.deletions
    }

    /// Append the unified hunks (from the first "@@" line on) exactly as `git diff` prints them, no colour.
    pub(crate) fn write_hunks(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.hunks);
    }
}

/// One side of the diff (git's `xdfile_t`).
struct Side<'a> {
    /// The records: each line with its '\n'; a last line without one is a record too.
    lines: Vec<&'a [u8]>,
    /// Equivalence class of each line: equal lines, and only those, share a class (`rec->ha`).
    class: Vec<usize>,
    /// `changed[i + 1]` marks line `i` as changed; `changed[0]` and `changed[len + 1]` are
    /// sentinels that stay false (git's `rchg`, which points one past its allocation).
    changed: Vec<bool>,
}

impl Side<'_> {
    /// Whether line `i` is changed; `i == len` reads the trailing sentinel.
    fn is_changed(&self, i: usize) -> bool {
        self.changed[i + 1]
    }

    /// Whether the line before `i` is changed; `i == 0` reads the leading sentinel.
    fn is_changed_before(&self, i: usize) -> bool {
        self.changed[i]
    }

    fn set_changed(&mut self, i: usize, changed: bool) {
        self.changed[i + 1] = changed;
    }
}

/// Both sides plus the lines that `xdl_cleanup_records` leaves to the Myers pass: their classes
/// (git's `ha`) and their line numbers (`rindex`).
struct Sides<'a> {
    one: Side<'a>,
    two: Side<'a>,
    kept_class: [Vec<usize>; 2],
    kept_index: [Vec<usize>; 2],
}

impl<'a> Sides<'a> {
    /// `xdl_prepare_env` for the Myers algorithm. O(bytes) expected.
    fn prepare(old: &'a [u8], new: &'a [u8]) -> Sides<'a> {
        let lines = [records(old), records(new)];
        let (class, counts) = classify(&lines);
        let [lines1, lines2] = lines;
        let [class1, class2] = class;
        let (n1, n2) = (lines1.len(), lines2.len());

        // xdl_trim_ends: common head and tail lines never reach the Myers pass.
        let lim = n1.min(n2);
        let start = (0..lim).find(|&i| class1[i] != class2[i]).unwrap_or(lim);
        let tail = (0..lim - start)
            .find(|&i| class1[n1 - 1 - i] != class2[n2 - 1 - i])
            .unwrap_or(lim - start);

        let mut one = Side {
            lines: lines1,
            class: class1,
            changed: vec![false; n1 + 2],
        };
        let mut two = Side {
            lines: lines2,
            class: class2,
            changed: vec![false; n2 + 2],
        };
        let (kept_class1, kept_index1) = cleanup_records(&mut one, start, n1 - tail, &counts, 1);
        let (kept_class2, kept_index2) = cleanup_records(&mut two, start, n2 - tail, &counts, 0);
        Sides {
            one,
            two,
            kept_class: [kept_class1, kept_class2],
            kept_index: [kept_index1, kept_index2],
        }
    }

    /// `xdl_do_diff` + `xdl_recs_cmp`: marks the changed lines. The recursion of `xdl_recs_cmp`
    /// runs on an explicit stack, in the same order. O((N + M) · D) with git's cut-offs.
    fn compare(&mut self) {
        let [ha1, ha2] = &self.kept_class;
        let (n1, n2) = (ha1.len() as isize, ha2.len() as isize);
        let ndiags = ha1.len() + ha2.len() + 3;
        let mut myers = Myers {
            ha1,
            ha2,
            forward: vec![0; ndiags],
            backward: vec![0; ndiags],
            base: n2 + 1,
            max_cost: bogosqrt(ndiags).max(MAX_COST_MIN as usize) as isize,
        };
        let mut boxes = vec![(0, n1, 0, n2, false)];
        while let Some((mut off1, mut lim1, mut off2, mut lim2, need_min)) = boxes.pop() {
            // Shrink the box by walking through each diagonal snake (SW and NE).
            while off1 < lim1 && off2 < lim2 && ha1[off1 as usize] == ha2[off2 as usize] {
                off1 += 1;
                off2 += 1;
            }
            while off1 < lim1 && off2 < lim2 && ha1[lim1 as usize - 1] == ha2[lim2 as usize - 1] {
                lim1 -= 1;
                lim2 -= 1;
            }
            if off1 == lim1 {
                for &i in &self.kept_index[1][off2 as usize..lim2 as usize] {
                    self.two.set_changed(i, true);
                }
            } else if off2 == lim2 {
                for &i in &self.kept_index[0][off1 as usize..lim1 as usize] {
                    self.one.set_changed(i, true);
                }
            } else {
                let spl = myers.split(off1, lim1, off2, lim2, need_min);
                // Pushed in reverse so the low box runs first, as in git's recursion.
                boxes.push((spl.i1, lim1, spl.i2, lim2, spl.min_hi));
                boxes.push((off1, spl.i1, off2, spl.i2, spl.min_lo));
            }
        }
    }
}

/// Splits `buf` into records, as `xdl_prepare_ctx` does. O(bytes).
fn records(buf: &[u8]) -> Vec<&[u8]> {
    let mut lines = Vec::new();
    let mut rest = buf;
    while !rest.is_empty() {
        let end = rest
            .iter()
            .position(|&b| b == b'\n')
            .map_or(rest.len(), |p| p + 1);
        let (line, tail) = rest.split_at(end);
        lines.push(line);
        rest = tail;
    }
    lines
}

/// Hashes a line, 8 bytes at a time. O(len).
fn hash_line(line: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = line.len() as u64;
    let mut chunks = line.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
    }
    let mut word = [0; 8];
    word[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    h = (h.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
    h ^ (h >> 29)
}

/// `xdl_classify_record`: gives equal lines of both sides the same class number and counts, per
/// class, its lines on each side (`len1`, `len2`). O(bytes) expected.
fn classify(lines: &[Vec<&[u8]>; 2]) -> ([Vec<usize>; 2], Vec<[usize; 2]>) {
    const NONE: usize = usize::MAX;
    struct Entry<'a> {
        line: &'a [u8],
        hash: u64,
        next: usize,
    }
    let total = lines[0].len() + lines[1].len();
    let bits = (usize::BITS - total.leading_zeros()).max(1);
    let mut heads = vec![NONE; 1 << bits];
    let mut entries: Vec<Entry> = Vec::new();
    let mut counts: Vec<[usize; 2]> = Vec::new();
    let mut classes = [
        Vec::with_capacity(lines[0].len()),
        Vec::with_capacity(lines[1].len()),
    ];
    for (side, side_lines) in lines.iter().enumerate() {
        for &line in side_lines {
            let hash = hash_line(line);
            let bucket = (hash >> (64 - bits)) as usize;
            let mut class = heads[bucket];
            while class != NONE && (entries[class].hash != hash || entries[class].line != line) {
                class = entries[class].next;
            }
            if class == NONE {
                class = entries.len();
                entries.push(Entry {
                    line,
                    hash,
                    next: heads[bucket],
                });
                counts.push([0, 0]);
                heads[bucket] = class;
            }
            counts[class][side] += 1;
            classes[side].push(class);
        }
    }
    (classes, counts)
}

/// `xdl_bogosqrt`: a power of two near √n. O(log n).
fn bogosqrt(mut n: usize) -> usize {
    let mut i = 1;
    while n > 0 {
        i <<= 1;
        n >>= 2;
    }
    i
}

/// How `xdl_cleanup_records` rates a line: no match on the other side, some, or many.
#[derive(Clone, Copy, PartialEq)]
enum Matches {
    None,
    Some,
    Many,
}

/// `xdl_cleanup_records` for lines `start..end` of `side`: a line without a match on the other
/// side is marked changed outright, and so is a line with many matches inside a run of such
/// lines; the others are returned (class, line number) for the Myers pass. `other` picks the
/// other side's column of `counts`. O(lines · SIMSCAN_WINDOW) at worst.
fn cleanup_records(
    side: &mut Side,
    start: usize,
    end: usize,
    counts: &[[usize; 2]],
    other: usize,
) -> (Vec<usize>, Vec<usize>) {
    let limit = bogosqrt(side.lines.len()).min(MAX_EQLIMIT);
    let dis: Vec<Matches> = side.class[start..end]
        .iter()
        .map(|&class| match counts[class][other] {
            0 => Matches::None,
            n if n >= limit => Matches::Many,
            _ => Matches::Some,
        })
        .collect();
    let mut kept_class = Vec::with_capacity(dis.len());
    let mut kept_index = Vec::with_capacity(dis.len());
    for (j, &d) in dis.iter().enumerate() {
        let i = start + j;
        if d == Matches::Some || (d == Matches::Many && !clean_mmatch(&dis, j)) {
            kept_class.push(side.class[i]);
            kept_index.push(i);
        } else {
            side.set_changed(i, true);
        }
    }
    (kept_class, kept_index)
}

/// `xdl_clean_mmatch`: whether the many-match line `i` sits in a run of unmatched and
/// many-match lines that is mostly unmatched, within `SIMSCAN_WINDOW` lines. O(SIMSCAN_WINDOW).
fn clean_mmatch(dis: &[Matches], i: usize) -> bool {
    let s = i.saturating_sub(SIMSCAN_WINDOW);
    let e = (dis.len() - 1).min(i + SIMSCAN_WINDOW);
    // Runs start at 1 for the many-match line `i` itself.
    let (mut rdis0, mut rpdis0) = (0, 1);
    for &d in dis[s..i].iter().rev() {
        match d {
            Matches::None => rdis0 += 1,
            Matches::Many => rpdis0 += 1,
            Matches::Some => break,
        }
    }
    if rdis0 == 0 {
        return false;
    }
    let (mut rdis1, mut rpdis1) = (0, 1);
    for &d in &dis[i + 1..=e] {
        match d {
            Matches::None => rdis1 += 1,
            Matches::Many => rpdis1 += 1,
            Matches::Some => break,
        }
    }
    if rdis1 == 0 {
        return false;
    }
    rdis1 += rdis0;
    rpdis1 += rpdis0;
    rpdis1 * KPDIS_RUN < rpdis1 + rdis1
}

/// The state of the Myers pass: the classes of the lines it sees (git's `ha`) and the
/// furthest-reaching paths of `xdl_split` (`kvdf`, `kvdb`), indexed by diagonal `d` at `base + d`.
struct Myers<'k> {
    ha1: &'k [usize],
    ha2: &'k [usize],
    forward: Vec<isize>,
    backward: Vec<isize>,
    base: isize,
    /// `xenv.mxcost`.
    max_cost: isize,
}

/// Where `xdl_split` divides a box, and whether each half must then be diffed minimally.
struct Split {
    i1: isize,
    i2: isize,
    min_lo: bool,
    min_hi: bool,
}

impl Myers<'_> {
    /// `xdl_split`: the middle snake of Myers' algorithm on the box (off1, off2)–(lim1, lim2), or
    /// git's heuristic cut when the edit cost grows too high. O((lim1 - off1 + lim2 - off2) · D).
    fn split(
        &mut self,
        off1: isize,
        lim1: isize,
        off2: isize,
        lim2: isize,
        need_min: bool,
    ) -> Split {
        let (ha1, ha2, base, max_cost) = (self.ha1, self.ha2, self.base, self.max_cost);
        let kvdf = &mut self.forward;
        let kvdb = &mut self.backward;
        macro_rules! f {
            ($d:expr) => {
                kvdf[(base + $d) as usize]
            };
        }
        macro_rules! b {
            ($d:expr) => {
                kvdb[(base + $d) as usize]
            };
        }
        let eq = |i1: isize, i2: isize| ha1[i1 as usize] == ha2[i2 as usize];

        let (dmin, dmax) = (off1 - lim2, lim1 - off2);
        let (fmid, bmid) = (off1 - off2, lim1 - lim2);
        let odd = (fmid - bmid) & 1 != 0;
        let (mut fmin, mut fmax, mut bmin, mut bmax) = (fmid, fmid, bmid, bmid);
        f!(fmid) = off1;
        b!(bmid) = lim1;

        let mut ec: isize = 1;
        loop {
            let mut got_snake = false;

            // Extend the forward domain by one diagonal on each side, or shrink it at the box edge.
            if fmin > dmin {
                fmin -= 1;
                f!(fmin - 1) = -1;
            } else {
                fmin += 1;
            }
            if fmax < dmax {
                fmax += 1;
                f!(fmax + 1) = -1;
            } else {
                fmax -= 1;
            }
            let mut d = fmax;
            while d >= fmin {
                let mut i1 = if f!(d - 1) >= f!(d + 1) {
                    f!(d - 1) + 1
                } else {
                    f!(d + 1)
                };
                let prev1 = i1;
                let mut i2 = i1 - d;
                while i1 < lim1 && i2 < lim2 && eq(i1, i2) {
                    i1 += 1;
                    i2 += 1;
                }
                if i1 - prev1 > SNAKE_CNT {
                    got_snake = true;
                }
                f!(d) = i1;
                if odd && bmin <= d && d <= bmax && b!(d) <= i1 {
                    return Split {
                        i1,
                        i2,
                        min_lo: true,
                        min_hi: true,
                    };
                }
                d -= 2;
            }

            // The same backwards from (lim1, lim2).
            if bmin > dmin {
                bmin -= 1;
                b!(bmin - 1) = LINE_MAX;
            } else {
                bmin += 1;
            }
            if bmax < dmax {
                bmax += 1;
                b!(bmax + 1) = LINE_MAX;
            } else {
                bmax -= 1;
            }
            let mut d = bmax;
            while d >= bmin {
                let mut i1 = if b!(d - 1) < b!(d + 1) {
                    b!(d - 1)
                } else {
                    b!(d + 1) - 1
                };
                let prev1 = i1;
                let mut i2 = i1 - d;
                while i1 > off1 && i2 > off2 && eq(i1 - 1, i2 - 1) {
                    i1 -= 1;
                    i2 -= 1;
                }
                if prev1 - i1 > SNAKE_CNT {
                    got_snake = true;
                }
                b!(d) = i1;
                if !odd && fmin <= d && d <= fmax && i1 <= f!(d) {
                    return Split {
                        i1,
                        i2,
                        min_lo: true,
                        min_hi: true,
                    };
                }
                d -= 2;
            }

            if need_min {
                ec += 1;
                continue;
            }

            // Past the heuristic trigger, with a good snake seen: take a diagonal that got far
            // from its corner and ends in a snake of SNAKE_CNT lines.
            if got_snake && ec > HEUR_MIN_COST {
                let (mut best, mut at) = (0, (0, 0));
                let mut d = fmax;
                while d >= fmin {
                    let dd = (d - fmid).abs();
                    let i1 = f!(d);
                    let i2 = i1 - d;
                    let v = (i1 - off1) + (i2 - off2) - dd;
                    if v > K_HEUR * ec
                        && v > best
                        && off1 + SNAKE_CNT <= i1
                        && i1 < lim1
                        && off2 + SNAKE_CNT <= i2
                        && i2 < lim2
                    {
                        let mut k = 1;
                        while eq(i1 - k, i2 - k) {
                            if k == SNAKE_CNT {
                                best = v;
                                at = (i1, i2);
                                break;
                            }
                            k += 1;
                        }
                    }
                    d -= 2;
                }
                if best > 0 {
                    return Split {
                        i1: at.0,
                        i2: at.1,
                        min_lo: true,
                        min_hi: false,
                    };
                }

                let mut d = bmax;
                while d >= bmin {
                    let dd = (d - bmid).abs();
                    let i1 = b!(d);
                    let i2 = i1 - d;
                    let v = (lim1 - i1) + (lim2 - i2) - dd;
                    if v > K_HEUR * ec
                        && v > best
                        && off1 < i1
                        && i1 <= lim1 - SNAKE_CNT
                        && off2 < i2
                        && i2 <= lim2 - SNAKE_CNT
                    {
                        let mut k = 0;
                        while eq(i1 + k, i2 + k) {
                            if k == SNAKE_CNT - 1 {
                                best = v;
                                at = (i1, i2);
                                break;
                            }
                            k += 1;
                        }
                    }
                    d -= 2;
                }
                if best > 0 {
                    return Split {
                        i1: at.0,
                        i2: at.1,
                        min_lo: false,
                        min_hi: true,
                    };
                }
            }

            // Enough is enough: take the furthest-reaching path by the (i1 + i2) measure.
            if ec >= max_cost {
                let (mut fbest, mut fbest1) = (-1, -1);
                let mut d = fmax;
                while d >= fmin {
                    let mut i1 = f!(d).min(lim1);
                    let mut i2 = i1 - d;
                    if lim2 < i2 {
                        i1 = lim2 + d;
                        i2 = lim2;
                    }
                    if fbest < i1 + i2 {
                        fbest = i1 + i2;
                        fbest1 = i1;
                    }
                    d -= 2;
                }
                let (mut bbest, mut bbest1) = (LINE_MAX, LINE_MAX);
                let mut d = bmax;
                while d >= bmin {
                    let mut i1 = off1.max(b!(d));
                    let mut i2 = i1 - d;
                    if i2 < off2 {
                        i1 = off2 + d;
                        i2 = off2;
                    }
                    if i1 + i2 < bbest {
                        bbest = i1 + i2;
                        bbest1 = i1;
                    }
                    d -= 2;
                }
                return if (lim1 + lim2) - bbest < fbest - (off1 + off2) {
                    Split {
                        i1: fbest1,
                        i2: fbest - fbest1,
                        min_lo: true,
                        min_hi: false,
                    }
                } else {
                    Split {
                        i1: bbest1,
                        i2: bbest - bbest1,
                        min_lo: false,
                        min_hi: true,
                    }
                };
            }
            ec += 1;
        }
    }
}

/// A run of changed lines (`struct xdlgroup`): `start..end`; when empty, it sits above line `start`.
#[derive(Clone, Copy)]
struct Group {
    start: usize,
    end: usize,
}

/// `group_init`: the first (possibly empty) group of `side`. O(group).
fn group_init(side: &Side) -> Group {
    let mut end = 0;
    while side.is_changed(end) {
        end += 1;
    }
    Group { start: 0, end }
}

/// `group_next`: moves to the next group; false at the end of the file. O(group).
fn group_next(side: &Side, g: &mut Group) -> bool {
    if g.end == side.lines.len() {
        return false;
    }
    g.start = g.end + 1;
    g.end = g.start;
    while side.is_changed(g.end) {
        g.end += 1;
    }
    true
}

/// `group_previous`: moves to the previous group; false at the start of the file. O(group).
fn group_previous(side: &Side, g: &mut Group) -> bool {
    if g.start == 0 {
        return false;
    }
    g.end = g.start - 1;
    g.start = g.end;
    while side.is_changed_before(g.start) {
        g.start -= 1;
    }
    true
}

/// `group_slide_down`: slides the group one line down, merging with a group it bumps into;
/// false if it cannot slide. O(merged group).
fn group_slide_down(side: &mut Side, g: &mut Group) -> bool {
    if g.end < side.lines.len() && side.class[g.start] == side.class[g.end] {
        side.set_changed(g.start, false);
        side.set_changed(g.end, true);
        g.start += 1;
        g.end += 1;
        while side.is_changed(g.end) {
            g.end += 1;
        }
        true
    } else {
        false
    }
}

/// `group_slide_up`: slides the group one line up, merging with a group it bumps into; false
/// if it cannot slide. O(merged group).
fn group_slide_up(side: &mut Side, g: &mut Group) -> bool {
    if g.start > 0 && side.class[g.start - 1] == side.class[g.end - 1] {
        g.start -= 1;
        g.end -= 1;
        side.set_changed(g.start, true);
        side.set_changed(g.end, false);
        while side.is_changed_before(g.start) {
            g.start -= 1;
        }
        true
    } else {
        false
    }
}

/// `xdl_change_compact` with `XDF_INDENT_HEURISTIC`: slides each group of changed lines of
/// `side` as far as it goes, merges groups that meet, then puts it in line with a change of
/// `other` if it can, else where the indent heuristic scores best. O(lines · slide distance).
fn compact(side: &mut Side, other: &Side) {
    let mut g = group_init(side);
    let mut go = group_init(other);
    loop {
        if g.end != g.start {
            // Shift the group up and down as far as possible, merging what it bumps into,
            // until its size settles.
            let mut earliest_end;
            let mut end_matching_other;
            let mut group_size;
            loop {
                group_size = g.end - g.start;
                end_matching_other = None;
                while group_slide_up(side, &mut g) {
                    let moved = group_previous(other, &mut go);
                    debug_assert!(moved, "group sync broken sliding up");
                }
                earliest_end = g.end;
                if go.end > go.start {
                    end_matching_other = Some(g.end);
                }
                while group_slide_down(side, &mut g) {
                    let moved = group_next(other, &mut go);
                    debug_assert!(moved, "group sync broken sliding down");
                    if go.end > go.start {
                        end_matching_other = Some(g.end);
                    }
                }
                if group_size == g.end - g.start {
                    break;
                }
            }

            // The group is now as far down as it goes; only upward shifts remain to decide.
            if g.end == earliest_end {
                // No shifting was possible.
            } else if end_matching_other.is_some() {
                // Line up with the last change of the other side it can align with.
                while go.end == go.start {
                    let slid = group_slide_up(side, &mut g);
                    let moved = group_previous(other, &mut go);
                    debug_assert!(slid && moved, "group sync broken sliding to match");
                }
            } else {
                // Indent heuristic: score the split above and below the group for every
                // position it can take, and keep the lowest (the lowest position on ties).
                let shift_min = earliest_end
                    .max((g.end - group_size).saturating_sub(1))
                    .max(g.end.saturating_sub(INDENT_HEURISTIC_MAX_SLIDING));
                let mut best: Option<(usize, Score)> = None;
                for shift in shift_min..=g.end {
                    let mut score = Score::default();
                    score.add(&measure_split(side, shift));
                    score.add(&measure_split(side, shift - group_size));
                    if best.as_ref().is_none_or(|(_, b)| score.cmp(b) <= 0) {
                        best = Some((shift, score));
                    }
                }
                let best_shift = best.map_or(g.end, |(shift, _)| shift);
                while g.end > best_shift {
                    let slid = group_slide_up(side, &mut g);
                    let moved = group_previous(other, &mut go);
                    debug_assert!(slid && moved, "group sync broken sliding to best shift");
                }
            }
        }
        if !group_next(side, &mut g) {
            break;
        }
        let moved = group_next(other, &mut go);
        debug_assert!(moved, "group sync broken moving to next group");
    }
}

/// git's `isspace`: space, `\t`, `\n` and `\r` only.
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

/// `get_indent`: the indentation of `line` (tabs to multiples of 8), capped at MAX_INDENT, or
/// -1 for a blank line. O(indent).
fn get_indent(line: &[u8]) -> i32 {
    let mut ret = 0;
    for &c in line {
        if !is_space(c) {
            return ret;
        } else if c == b' ' {
            ret += 1;
        } else if c == b'\t' {
            ret += 8 - ret % 8;
        }
        if ret >= MAX_INDENT {
            return MAX_INDENT;
        }
    }
    -1
}

/// `struct split_measurement`: the surroundings of a split above a line.
struct Measurement {
    end_of_file: bool,
    indent: i32,
    pre_blank: i32,
    pre_indent: i32,
    post_blank: i32,
    post_indent: i32,
}

/// `measure_split`: measures a split of `side` above line `split`. O(MAX_BLANKS · indent).
fn measure_split(side: &Side, split: usize) -> Measurement {
    let lines = &side.lines;
    let (end_of_file, indent) = match lines.get(split) {
        Some(line) => (false, get_indent(line)),
        None => (true, -1),
    };
    let (mut pre_blank, mut pre_indent) = (0, -1);
    for line in lines[..split.min(lines.len())].iter().rev() {
        pre_indent = get_indent(line);
        if pre_indent != -1 {
            break;
        }
        pre_blank += 1;
        if pre_blank == MAX_BLANKS {
            pre_indent = 0;
            break;
        }
    }
    let (mut post_blank, mut post_indent) = (0, -1);
    for line in lines.iter().skip(split + 1) {
        post_indent = get_indent(line);
        if post_indent != -1 {
            break;
        }
        post_blank += 1;
        if post_blank == MAX_BLANKS {
            post_indent = 0;
            break;
        }
    }
    Measurement {
        end_of_file,
        indent,
        pre_blank,
        pre_indent,
        post_blank,
        post_indent,
    }
}

/// `struct split_score`: smaller is better.
#[derive(Default)]
struct Score {
    effective_indent: i32,
    penalty: i32,
}

impl Score {
    /// `score_add_split`: adds the badness of the split measured by `m`.
    fn add(&mut self, m: &Measurement) {
        if m.pre_indent == -1 && m.pre_blank == 0 {
            self.penalty += START_OF_FILE_PENALTY;
        }
        if m.end_of_file {
            self.penalty += END_OF_FILE_PENALTY;
        }
        // Blank lines after the split, including the line right after it.
        let post_blank = if m.indent == -1 { 1 + m.post_blank } else { 0 };
        let total_blank = m.pre_blank + post_blank;
        self.penalty += TOTAL_BLANK_WEIGHT * total_blank;
        self.penalty += POST_BLANK_WEIGHT * post_blank;
        let indent = if m.indent != -1 {
            m.indent
        } else {
            m.post_indent
        };
        let any_blanks = total_blank != 0;
        // The effective indent is -1 at the end of the file.
        self.effective_indent += indent;
        if indent == -1 || m.pre_indent == -1 || indent == m.pre_indent {
            // No adjustment.
        } else if indent > m.pre_indent {
            self.penalty += if any_blanks {
                RELATIVE_INDENT_WITH_BLANK_PENALTY
            } else {
                RELATIVE_INDENT_PENALTY
            };
        } else if m.post_indent != -1 && m.post_indent > indent {
            // Indented less than its predecessor, more is coming: likely a block start.
            self.penalty += if any_blanks {
                RELATIVE_OUTDENT_WITH_BLANK_PENALTY
            } else {
                RELATIVE_OUTDENT_PENALTY
            };
        } else {
            // Probably the end of a block.
            self.penalty += if any_blanks {
                RELATIVE_DEDENT_WITH_BLANK_PENALTY
            } else {
                RELATIVE_DEDENT_PENALTY
            };
        }
    }

    /// `score_cmp`: negative when `self` is better than `other`.
    fn cmp(&self, other: &Score) -> i32 {
        let indents = (self.effective_indent > other.effective_indent) as i32
            - (self.effective_indent < other.effective_indent) as i32;
        INDENT_WEIGHT * indents + (self.penalty - other.penalty)
    }
}

/// One change (`xdchange_t`): lines `i1..i1 + count1` of the old side became lines
/// `i2..i2 + count2` of the new side.
struct Change {
    i1: usize,
    i2: usize,
    count1: usize,
    count2: usize,
}

/// `xdl_build_script`: collects the runs of changed lines, in file order. O(lines).
fn build_script(one: &Side, two: &Side) -> Vec<Change> {
    let mut script = Vec::new();
    let (n1, n2) = (one.lines.len(), two.lines.len());
    let (mut i1, mut i2) = (0, 0);
    while i1 < n1 || i2 < n2 {
        if one.is_changed(i1) || two.is_changed(i2) {
            let (start1, start2) = (i1, i2);
            while one.is_changed(i1) {
                i1 += 1;
            }
            while two.is_changed(i2) {
                i2 += 1;
            }
            script.push(Change {
                i1: start1,
                i2: start2,
                count1: i1 - start1,
                count2: i2 - start2,
            });
        }
        // Step over the unchanged line that ends the run (or the trailing sentinel).
        i1 += 1;
        i2 += 1;
    }
    script
}

/// `xdl_emit_diff` with `XDL_EMIT_FUNCNAMES` and git's default function finder: appends the
/// unified hunks to `out`. O(output + lines searched for function names).
fn emit(one: &[&[u8]], two: &[&[u8]], script: &[Change], out: &mut Vec<u8>) {
    let (n1, n2) = (one.len(), two.len());
    // The function line of the last hunk, kept when the next search finds none (`func_line`).
    let mut func: &[u8] = &[];
    // Lines below this one were searched for a function line already (`funclineprev + 1`).
    let mut searched = 0;
    let mut first = 0;
    while first < script.len() {
        // xdl_get_hunk: changes at most 2 · CONTEXT lines apart share a hunk.
        let mut last = first;
        while let Some(next) = script.get(last + 1) {
            if next.i1 - (script[last].i1 + script[last].count1) > 2 * CONTEXT {
                break;
            }
            last += 1;
        }
        let (xch, xche) = (&script[first], &script[last]);
        let s1 = xch.i1.saturating_sub(CONTEXT);
        let s2 = xch.i2.saturating_sub(CONTEXT);
        let lctx = CONTEXT
            .min(n1 - (xche.i1 + xche.count1))
            .min(n2 - (xche.i2 + xche.count2));
        let e1 = xche.i1 + xche.count1 + lctx;
        let e2 = xche.i2 + xche.count2 + lctx;

        // get_func_line: the nearest function line above the hunk's context.
        if let Some(found) = (searched..s1).rev().find_map(|l| def_ff(one[l])) {
            func = found;
        }
        searched = s1;
        hunk_header(out, s1 + 1, e1 - s1, s2 + 1, e2 - s2, func);

        for line in &two[s2..xch.i2] {
            emit_line(out, b' ', line);
        }
        let (mut p1, mut p2) = (xch.i1, xch.i2);
        for change in &script[first..=last] {
            while p1 < change.i1 && p2 < change.i2 {
                emit_line(out, b' ', two[p2]);
                p1 += 1;
                p2 += 1;
            }
            for line in &one[change.i1..change.i1 + change.count1] {
                emit_line(out, b'-', line);
            }
            for line in &two[change.i2..change.i2 + change.count2] {
                emit_line(out, b'+', line);
            }
            p1 = change.i1 + change.count1;
            p2 = change.i2 + change.count2;
        }
        for line in &two[xche.i2 + xche.count2..e2] {
            emit_line(out, b' ', line);
        }
        first = last + 1;
    }
}

/// `def_ff`: a line starting with an ASCII letter, `_` or `$` is a function line; its first
/// FUNC_LINE_MAX bytes without trailing whitespace go into the hunk header. O(FUNC_LINE_MAX).
fn def_ff(line: &[u8]) -> Option<&[u8]> {
    match line.first() {
        Some(&c) if c.is_ascii_alphabetic() || c == b'_' || c == b'$' => {
            let mut len = line.len().min(FUNC_LINE_MAX);
            while len > 0 && is_space(line[len - 1]) {
                len -= 1;
            }
            Some(&line[..len])
        }
        _ => None,
    }
}

/// Appends `@@ -a,b +c,d @@ func` (`xdl_format_hunk_hdr`), cut by `sane_truncate_line` at the
/// first byte git does not accept as UTF-8. O(header).
fn hunk_header(out: &mut Vec<u8>, s1: usize, c1: usize, s2: usize, c2: usize, func: &[u8]) {
    let start = out.len();
    out.extend_from_slice(b"@@ -");
    hunk_range(out, s1, c1);
    out.extend_from_slice(b" +");
    hunk_range(out, s2, c2);
    out.extend_from_slice(b" @@");
    if !func.is_empty() {
        out.push(b' ');
        let room = HUNK_HEADER_MAX.saturating_sub(out.len() - start + 1);
        out.extend_from_slice(&func[..func.len().min(room)]);
    }
    out.push(b'\n');
    let valid = git_utf8_prefix(&out[start..]);
    if start + valid < out.len() {
        out.truncate(start + valid);
        out.push(b'\n');
    }
}

/// One side of a hunk header: the start, then `,count` unless the count is 1; an empty range
/// names the line before it.
fn hunk_range(out: &mut Vec<u8>, start: usize, count: usize) {
    let line = if count == 0 { start - 1 } else { start };
    // Writing to a Vec cannot fail.
    let _ = write!(out, "{line}");
    if count != 1 {
        let _ = write!(out, ",{count}");
    }
}

/// `xdl_emit_diffrec`: a sign, the line, and git's marker when the line has no final newline.
fn emit_line(out: &mut Vec<u8>, sign: u8, line: &[u8]) {
    out.push(sign);
    out.extend_from_slice(line);
    if line.last() != Some(&b'\n') {
        out.extend_from_slice(b"\n\\ No newline at end of file\n");
    }
}

/// Length of the longest prefix of `s` made of characters that git's `pick_one_utf8_char`
/// accepts (which, unlike Rust, also rejects U+FFFE and U+FFFF). O(len).
fn git_utf8_prefix(s: &[u8]) -> usize {
    let cont = |i: usize| s.get(i).is_some_and(|&b| b & 0xc0 == 0x80);
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        let width = if c < 0x80 {
            1
        } else if c & 0xe0 == 0xc0 {
            if !cont(i + 1) || c & 0xfe == 0xc0 {
                return i;
            }
            2
        } else if c & 0xf0 == 0xe0 {
            if !cont(i + 1)
                || !cont(i + 2)
                || (c == 0xe0 && s[i + 1] & 0xe0 == 0x80)
                || (c == 0xed && s[i + 1] & 0xe0 == 0xa0)
                || (c == 0xef && s[i + 1] == 0xbf && s[i + 2] & 0xfe == 0xbe)
            {
                return i;
            }
            3
        } else if c & 0xf8 == 0xf0 {
            if !cont(i + 1)
                || !cont(i + 2)
                || !cont(i + 3)
                || (c == 0xf0 && s[i + 1] & 0xf0 == 0x80)
                || (c == 0xf4 && s[i + 1] > 0x8f)
                || c > 0xf4
            {
                return i;
            }
            4
        } else {
            return i;
        };
        i += width;
    }
    i
}

#[cfg(test)]
mod tests {
    //! git is the oracle: every case runs `git diff --no-index` on temp files and compares.

    use super::LineDiff;
    use std::path::Path;
    use std::process::Command;

    /// Runs git in `dir` with an empty environment, so that no user or system config applies.
    fn git(dir: &Path, args: &[&str]) -> Vec<u8> {
        let output = Command::new("git")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", dir)
            .env("XDG_CONFIG_HOME", dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("LC_ALL", "C")
            .args(["-c", "core.autocrlf=false", "-c", "diff.noprefix=false"])
            .args(args)
            .current_dir(dir)
            .output()
            .expect("run git");
        // `git diff --no-index` exits with 1 when the files differ.
        assert!(
            matches!(output.status.code(), Some(0 | 1)),
            "git {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        output.stdout
    }

    /// git's hunks (from the first "@@" line on) and numstat counts for `old` → `new`.
    fn git_diff(old: &[u8], new: &[u8]) -> (Vec<u8>, (usize, usize)) {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("old"), old).expect("write old");
        std::fs::write(dir.path().join("new"), new).expect("write new");
        let patch = git(
            dir.path(),
            &[
                "diff",
                "--no-index",
                "--no-color",
                "--no-ext-diff",
                "-U3",
                "old",
                "new",
            ],
        );
        let hunks = if patch.is_empty() {
            Vec::new()
        } else {
            let at = patch
                .windows(4)
                .position(|w| w == b"\n@@ ")
                .unwrap_or_else(|| panic!("no hunk in {}", String::from_utf8_lossy(&patch)));
            patch[at + 1..].to_vec()
        };
        let numstat = git(
            dir.path(),
            &["diff", "--no-index", "--numstat", "old", "new"],
        );
        let numstat = String::from_utf8(numstat).expect("numstat is text");
        // Identical files print nothing.
        let mut fields = numstat.split('\t').filter(|f| !f.is_empty());
        let mut count = || fields.next().map_or(0, |f| f.parse().expect("a count"));
        let added = count();
        let deleted = count();
        (hunks, (added, deleted))
    }

    /// Compares LineDiff with git on one case; describes the first difference.
    fn check(name: &str, old: &[u8], new: &[u8]) -> Result<(), String> {
        let (want, want_counts) = git_diff(old, new);
        let diff = LineDiff::new(old, new);
        let mut got = Vec::new();
        diff.write_hunks(&mut got);
        let got_counts = (diff.additions(), diff.deletions());
        if got == want && got_counts == want_counts {
            return Ok(());
        }
        Err(format!(
            "case {name}: counts ours {got_counts:?} git {want_counts:?}\n--- old\n{}\n--- new\n{}\n--- ours\n{}\n--- git\n{}",
            String::from_utf8_lossy(old),
            String::from_utf8_lossy(new),
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want),
        ))
    }

    /// Checks every case and fails with all mismatches.
    fn check_all(cases: &[(String, Vec<u8>, Vec<u8>)]) {
        let failures: Vec<String> = cases
            .iter()
            .filter_map(|(name, old, new)| check(name, old, new).err())
            .collect();
        assert!(
            failures.is_empty(),
            "{} of {} cases differ from git:\n{}",
            failures.len(),
            cases.len(),
            failures.join("\n\n")
        );
    }

    fn case(
        name: &str,
        old: impl AsRef<[u8]>,
        new: impl AsRef<[u8]>,
    ) -> (String, Vec<u8>, Vec<u8>) {
        (
            name.to_string(),
            old.as_ref().to_vec(),
            new.as_ref().to_vec(),
        )
    }

    /// `n` numbered lines, each with its newline.
    fn numbered(prefix: &str, n: usize) -> String {
        (1..=n).map(|i| format!("{prefix}{i}\n")).collect()
    }

    #[test]
    fn edits_at_start_middle_and_end() {
        let base = numbered("line ", 20);
        let edit = |i: usize, to: &str| base.replacen(&format!("line {i}\n"), to, 1);
        check_all(&[
            case("first line changed", &base, edit(1, "first\n")),
            case("middle line changed", &base, edit(10, "middle\n")),
            case("last line changed", &base, edit(20, "last\n")),
            case("inserted at start", &base, format!("new\n{base}")),
            case("appended", &base, format!("{base}new 1\nnew 2\n")),
            case("inserted in middle", &base, edit(10, "line 10\nextra\n")),
            case("deleted at start", &base, edit(1, "")),
            case("deleted at end", &base, edit(20, "")),
            case(
                "deleted in middle",
                &base,
                edit(10, "").replacen("line 11\n", "", 1),
            ),
            case("identical", &base, &base),
            case("everything replaced", &base, numbered("other ", 20)),
            case("short files", "a\n", "b\n"),
        ]);
    }

    #[test]
    fn missing_final_newline_and_empty_sides() {
        check_all(&[
            case("old lacks newline", "a\nb\nc", "a\nb\nc\n"),
            case("new lacks newline", "a\nb\nc\n", "a\nb\nc"),
            case("both lack newline, last differs", "a\nb\nc", "a\nb\nd"),
            case("both lack newline, same end", "a\nb\nc", "x\nb\nc"),
            case(
                "both lack newline, far edit",
                numbered("l", 12) + "end",
                "x\n".to_string() + &numbered("l", 12)[3..] + "end",
            ),
            case("single line without newline", "a", "b"),
            case("empty old", "", "a\nb\n"),
            case("empty new", "a\nb\n", ""),
            case("empty old, new lacks newline", "", "a"),
            case("old lacks newline, new empty", "a", ""),
            case("only newlines", "\n\n\n", "\n\n"),
            case("newline only vs empty", "\n", ""),
        ]);
    }

    #[test]
    fn crlf_and_unicode() {
        check_all(&[
            case("crlf edit", "a\r\nb\r\nc\r\n", "a\r\nB\r\nc\r\n"),
            case("crlf to lf", "a\r\nb\r\nc\r\n", "a\nb\nc\n"),
            case("crlf no final newline", "a\r\nb\r", "a\r\nb\r\n"),
            case("lone cr", "a\rb\nc\n", "a\rb\nd\n"),
            case(
                "unicode lines",
                "héllo\nwörld\n日本語\n",
                "héllo\nwelt\n日本語\n🦀\n",
            ),
            case(
                "unicode function name",
                "Ünïcode() {\n".to_string() + &numbered("  x", 8) + "}\n",
                "Ünïcode() {\n".to_string() + &numbered("  x", 7) + "  changed\n}\n",
            ),
            case(
                "invalid utf-8 function name",
                b"fn \xff\xfe bad\n"
                    .iter()
                    .copied()
                    .chain(numbered(" ", 8).bytes())
                    .collect::<Vec<u8>>(),
                b"fn \xff\xfe bad\n"
                    .iter()
                    .copied()
                    .chain(numbered(" ", 7).bytes())
                    .chain(*b"x\n")
                    .collect::<Vec<u8>>(),
            ),
            case(
                "U+FFFF in function name",
                "fn \u{ffff} odd\n".to_string() + &numbered(" ", 8),
                "fn \u{ffff} odd\n".to_string() + &numbered(" ", 7) + "x\n",
            ),
        ]);
    }

    #[test]
    fn function_name_context() {
        let body = numbered("    stmt ", 10);
        let long = "x".repeat(100);
        // 79 ASCII bytes then a 3-byte character that the 80-byte cut splits.
        let split_char = format!("f{}€ tail", "a".repeat(78));
        let cases = vec![
            case(
                "no function line",
                &body,
                body.replace("stmt 8\n", "changed\n"),
            ),
            case(
                "function line above",
                format!("int main(void)\n{body}"),
                format!("int main(void)\n{}", body.replace("stmt 8\n", "changed\n")),
            ),
            case(
                "function line inside context is not used",
                format!("a\nb\nfunc\n{body}"),
                format!("a\nb\nfunc\n{}", body.replace("stmt 2\n", "changed\n")),
            ),
            case(
                "long function line",
                format!("{long}\n{body}"),
                format!("{long}\n{}", body.replace("stmt 8\n", "changed\n")),
            ),
            case(
                "multibyte character cut at 80 bytes",
                format!("{split_char}\n{body}"),
                format!("{split_char}\n{}", body.replace("stmt 8\n", "changed\n")),
            ),
            case(
                "trailing spaces and tabs",
                format!("sub foo  \t \n{body}"),
                format!("sub foo  \t \n{}", body.replace("stmt 8\n", "changed\n")),
            ),
            case(
                "trailing form feed is not whitespace to git",
                format!("sub foo \x0c\n{body}"),
                format!("sub foo \x0c\n{}", body.replace("stmt 8\n", "changed\n")),
            ),
            case(
                "crlf function line",
                format!("sub foo\r\n{body}"),
                format!("sub foo\r\n{}", body.replace("stmt 8\n", "changed\n")),
            ),
            case(
                "underscore and dollar",
                format!("_start:\n{body}$var\n{body}"),
                format!(
                    "_start:\n{}$var\n{}",
                    body.replace("stmt 8\n", "changed\n"),
                    body.replace("stmt 9\n", "x\n")
                ),
            ),
            case(
                "digits and punctuation are not function lines",
                format!("1abc\n#define X\n{body}"),
                format!("1abc\n#define X\n{}", body.replace("stmt 8\n", "changed\n")),
            ),
            case(
                "second hunk reuses the first hunk's function",
                format!("fn a() {{\n{body}{body}{body}"),
                format!(
                    "fn a() {{\n{}{body}{}",
                    body.replace("stmt 8\n", "x\n"),
                    body.replace("stmt 8\n", "y\n")
                ),
            ),
            case(
                "each hunk finds its own function",
                format!("fn a() {{\n{body}}}\nfn b() {{\n{body}}}\n"),
                format!(
                    "fn a() {{\n{}}}\nfn b() {{\n{}}}\n",
                    body.replace("stmt 8\n", "x\n"),
                    body.replace("stmt 8\n", "y\n")
                ),
            ),
            case(
                "function line only in the new file is not used",
                body.clone(),
                format!("fn new() {{\n{}", body.replace("stmt 9\n", "x\n")),
            ),
            case(
                "function line at line 1 with a hunk starting there",
                format!("main() {{\n{body}"),
                format!("main() {{\nnew\n{body}"),
            ),
        ];
        check_all(&cases);
    }

    #[test]
    fn hunks_merge_when_contexts_touch() {
        let base = numbered("line ", 40);
        let edit2 = |a: usize, b: usize| {
            base.replacen(&format!("line {a}\n"), "A\n", 1).replacen(
                &format!("line {b}\n"),
                "B\n",
                1,
            )
        };
        check_all(&[
            case("6 lines apart: one hunk", &base, edit2(10, 17)),
            case("7 lines apart: two hunks", &base, edit2(10, 18)),
            case("5 lines apart", &base, edit2(10, 16)),
            case("adjacent", &base, edit2(10, 11)),
            case("near start", &base, edit2(2, 9)),
            case("near end", &base, edit2(32, 39)),
            case(
                "insertions 6 apart",
                &base,
                base.replacen("line 10\n", "line 10\nX\n", 1).replacen(
                    "line 16\n",
                    "line 16\nY\n",
                    1,
                ),
            ),
            case(
                "insertions 7 apart",
                &base,
                base.replacen("line 10\n", "line 10\nX\n", 1).replacen(
                    "line 17\n",
                    "line 17\nY\n",
                    1,
                ),
            ),
        ]);
    }

    #[test]
    fn indent_heuristic_and_sliders() {
        let deep = " ".repeat(216) + "deep";
        let deep_tab = "\t".repeat(28) + "deeptab";
        let c_old = "int f(void)\n{\n\tif (a) {\n\t\tb();\n\t}\n\n\tif (c) {\n\t\td();\n\t}\n}\n";
        let c_new = "int f(void)\n{\n\tif (a) {\n\t\tb();\n\t}\n\n\tif (x) {\n\t\ty();\n\t}\n\n\tif (c) {\n\t\td();\n\t}\n}\n";
        let rust_old = "fn a() {\n    one();\n}\n\nfn c() {\n    three();\n}\n";
        let rust_new =
            "fn a() {\n    one();\n}\n\nfn b() {\n    two();\n}\n\nfn c() {\n    three();\n}\n";
        let py_old = "def a():\n    x = 1\n    return x\n\ndef c():\n    return 3\n";
        let py_new = "def a():\n    x = 1\n    return x\n\ndef b():\n    if y:\n        return 2\n    return x\n\ndef c():\n    return 3\n";
        let braces_old = "{\n}\n{\n}\n{\n}\n";
        let braces_new = "{\n}\n{\n}\n{\n}\n{\n}\n";
        let blank_old = "a\n\n\nb\n\n\nc\n";
        let blank_new = "a\n\n\nb\n\n\nx\n\n\nc\n";
        let moved_old = "fn one() {\n    a();\n    b();\n}\n\nfn two() {\n    c();\n}\n\nfn three() {\n    d();\n}\n";
        let moved_new = "fn two() {\n    c();\n}\n\nfn three() {\n    d();\n}\n\nfn one() {\n    a();\n    b();\n}\n";
        check_all(&[
            case("c block inserted", c_old, c_new),
            case("c block deleted", c_new, c_old),
            case("rust function inserted", rust_old, rust_new),
            case("rust function deleted", rust_new, rust_old),
            case("python function inserted", py_old, py_new),
            case("python function deleted", py_new, py_old),
            case("braces inserted", braces_old, braces_new),
            case("braces deleted", braces_new, braces_old),
            case("blank runs", blank_old, blank_new),
            case("blank runs reversed", blank_new, blank_old),
            case("rust block moved", moved_old, moved_new),
            case("rust block moved back", moved_new, moved_old),
            case("all blank", "\n".repeat(30), "\n".repeat(45)),
            case(
                "repeated lines",
                "x\n".repeat(50),
                "x\n".repeat(20) + "y\n" + &"x\n".repeat(29),
            ),
            case(
                "slide longer than 100 lines",
                "a\n".repeat(150) + "b\n",
                "a\n".repeat(250) + "b\n",
            ),
            // Found by comparing with mutants: each one depends on a single weight.
            case(
                "START_OF_FILE_PENALTY",
                format!("    }}\nfn main() {{\n{deep}\n}}\n    if x {{\n{deep}\n  x\n"),
                format!(
                    "    }}\nfn main() {{\n\treturn 0;\n{deep}\n\n    }}\nfn main() {{\n{deep}\n}}\n    if x {{\n{deep}\n  x\n"
                ),
            ),
            case(
                "END_OF_FILE_PENALTY",
                "{\n{\n\n\n{\n}\n",
                "{\n{\n\n\n{\n}\n\n{\n}\n\n{\n}\n",
            ),
            case(
                "MAX_INDENT",
                format!("{{\nfn main() {{\n        y();\n{deep_tab}\nend\n"),
                format!(
                    "\treturn 0;\nb\n  x\n{{\nfn main() {{\n        y();\n{{\nfn main() {{\n        y();\n{deep_tab}\nend\n        y();\n{deep_tab}\nend\n"
                ),
            ),
            case(
                "slide of 75 lines up to a blank line",
                "top\n\n".to_string() + &"a\n".repeat(75) + "end\n",
                "top\n\n".to_string() + &"a\n".repeat(150) + "end\n",
            ),
            case("slide to end of file", "x\n\ny\n", "x\n\ny\n\ny\n"),
            case("brace at end of file", "a\n}\n", "a\n}\n}\n"),
            case(
                "block repeated at end of file",
                "{\n  a\n}\n",
                "{\n  a\n}\n{\n  a\n}\n",
            ),
            case(
                "blank runs of 12 and 15 lines",
                "a\n".to_string() + &"\n".repeat(12) + "b\n" + &"\n".repeat(15) + "c\n",
                "a\n".to_string()
                    + &"\n".repeat(12)
                    + "b\n"
                    + &"\n".repeat(15)
                    + "b\n"
                    + &"\n".repeat(15)
                    + "c\n",
            ),
        ]);
    }

    /// xorshift64: a small deterministic generator for the random cases.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    /// Lines that repeat a lot in code, so that sliders, multimatch lines and the indent
    /// heuristic all come into play.
    const ALPHABET: &[&str] = &[
        "",
        "}",
        "{",
        "    }",
        "\t}",
        "fn main() {",
        "    let x = 1;",
        "    if x {",
        "        y();",
        "\treturn 0;",
        "int f(void)",
        "# comment",
        "a",
        "b",
        "    ",
        "  x",
        "déjà vu",
        "end",
        "\x0c",
    ];

    /// How a random file draws its lines: from the first `alphabet` lines of ALPHABET, or a
    /// unique line one time in `unique`.
    #[derive(Clone, Copy)]
    struct Lines {
        alphabet: usize,
        unique: usize,
        blank: usize,
    }

    impl Lines {
        const CODE: Lines = Lines {
            alphabet: ALPHABET.len(),
            unique: 8,
            blank: 1000,
        };

        /// A mix that varies per case: few distinct lines make multimatch lines, many
        /// unique lines make unmatched ones (both matter to `xdl_cleanup_records`), many
        /// blank lines make long blank runs for the indent heuristic.
        fn random(rng: &mut Rng) -> Lines {
            Lines {
                alphabet: [3, 6, ALPHABET.len()][rng.below(3)],
                unique: [2, 4, 8, 1000][rng.below(4)],
                blank: [2, 1000][rng.below(2)],
            }
        }

        fn line(self, rng: &mut Rng) -> Vec<u8> {
            if rng.below(self.blank) == 0 {
                Vec::new()
            } else if rng.below(self.unique) == 0 {
                format!("unique {}", rng.next() % 100_000).into_bytes()
            } else {
                ALPHABET[rng.below(self.alphabet)].as_bytes().to_vec()
            }
        }
    }

    /// Joins lines with '\n' (sometimes "\r\n"), with or without a final newline.
    fn join(rng: &mut Rng, lines: &[Vec<u8>], crlf: bool) -> Vec<u8> {
        let eol: &[u8] = if crlf { b"\r\n" } else { b"\n" };
        let mut out = lines.join(eol);
        if !lines.is_empty() && rng.below(5) != 0 {
            out.extend_from_slice(eol);
        }
        out
    }

    /// A random file of up to `max_lines` lines and a random edit of it.
    fn random_case(rng: &mut Rng, max_lines: usize) -> (Vec<u8>, Vec<u8>) {
        let lines = Lines::random(rng);
        let n = rng.below(max_lines + 1);
        let old: Vec<Vec<u8>> = (0..n).map(|_| lines.line(rng)).collect();
        let mut new = old.clone();
        for _ in 0..rng.below(12) {
            let at = rng.below(new.len() + 1);
            match rng.below(5) {
                0 => {
                    for _ in 0..1 + rng.below(6) {
                        new.insert(at, lines.line(rng));
                    }
                }
                1 => {
                    let end = (at + 1 + rng.below(8)).min(new.len());
                    new.drain(at..end);
                }
                2 if at < new.len() => new[at] = lines.line(rng),
                3 => {
                    // Move a block elsewhere.
                    let end = (at + 1 + rng.below(10)).min(new.len());
                    let block: Vec<Vec<u8>> = new.drain(at..end).collect();
                    let to = rng.below(new.len() + 1);
                    new.splice(to..to, block);
                }
                _ => {
                    // Duplicate a block in place.
                    let end = (at + 1 + rng.below(5)).min(new.len());
                    let block: Vec<Vec<u8>> = new[at..end].to_vec();
                    new.splice(at..at, block);
                }
            }
        }
        let crlf = rng.below(10) == 0;
        (join(rng, &old, crlf), join(rng, &new, crlf))
    }

    #[test]
    fn random_edits_match_git() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let cases: Vec<_> = (0..300)
            .map(|i| {
                let (old, new) = random_case(&mut rng, 300);
                (format!("random #{i}"), old, new)
            })
            .collect();
        check_all(&cases);
    }

    /// `n` distinct lines `{prefix}0` .. `{prefix}{n-1}`.
    fn distinct(prefix: &str, n: usize) -> String {
        (0..n).map(|i| format!("{prefix}{i}\n")).collect()
    }

    #[test]
    fn cleanup_records_decisions() {
        // Each case turns on whether `xdl_cleanup_records` hides the multimatch line `x` from
        // the Myers pass (then it shows as removed and added) or leaves it to be matched.
        //
        // XDL_MAX_EQLIMIT: 1,500 matches make `x` a multimatch line only because the square
        // root limit of 1.1M lines (2,048) is capped at 1,024.
        let tail = "x\n".repeat(1500) + &"y\n".repeat(1_100_000);
        let eqlimit_old = format!("{}x\n{}{tail}", distinct("u", 4), distinct("w", 3));
        let eqlimit_new = format!("{}x\n{}{tail}", distinct("v", 4), distinct("z", 3));
        // XDL_SIMSCAN_WINDOW: the unmatched lines lie beyond the 100 multimatch `y` lines
        // that the scan looks at, above `x` or below it.
        let window_above = format!(
            "{}{}x\n{}",
            distinct("o", 400),
            "y\n".repeat(100),
            distinct("p", 10)
        );
        let window_below = format!(
            "{}x\n{}{}",
            distinct("p", 10),
            "y\n".repeat(100),
            distinct("o", 400)
        );
        let many_y_x = format!(
            "{}{}{}",
            "y\n".repeat(40),
            "x\n".repeat(40),
            distinct("q", 30)
        );
        let many_x_y = format!(
            "{}{}{}",
            "x\n".repeat(40),
            "y\n".repeat(40),
            distinct("q", 30)
        );
        // XDL_KPDIS_RUN: 3 unmatched lines on each side of `x` are not enough to discard it
        // (6 unmatched against 2 multimatch), 4 are.
        let ratio = |n: usize| format!("{}x\n{}", distinct("p", n), distinct("r", n));
        let xs = "x\n".repeat(8) + "q\n";
        // xdl_trim_ends: the common head of multimatch `y` lines does not count in the scan.
        let head_old = format!("{}u\nx\n{}", "y\n".repeat(10), distinct("w", 10));
        let head_new = format!("{}{}z\n", "y\n".repeat(10), "x\n".repeat(8));
        let tail_old = format!("{}x\nu\n{}", distinct("w", 10), "y\n".repeat(10));
        let tail_new = format!("z\n{}{}", "x\n".repeat(8), "y\n".repeat(10));
        check_all(&[
            case("XDL_MAX_EQLIMIT", eqlimit_old, eqlimit_new),
            case("window above", &window_above, &many_y_x),
            case("window below", &window_below, &many_x_y),
            case("3 unmatched on each side", ratio(3), &xs),
            case("4 unmatched on each side", ratio(4), &xs),
            case("common head", head_old, head_new),
            case("common tail", tail_old, tail_new),
        ]);
    }

    /// `n` lines from `vocabulary` distinct ones and an edit of them that, every `rate / 4`
    /// lines on average, deletes, inserts or replaces a line, or copies `20 + rand(spread)`
    /// lines from elsewhere (a decoy snake for `xdl_split`'s heuristics).
    fn huge_case(
        rng: &mut Rng,
        n: usize,
        vocabulary: usize,
        rate: usize,
        spread: usize,
    ) -> (Vec<u8>, Vec<u8>) {
        let line = |rng: &mut Rng| format!("l{}\n", rng.below(vocabulary)).into_bytes();
        let old: Vec<Vec<u8>> = (0..n).map(|_| line(rng)).collect();
        let mut new = Vec::with_capacity(n + n / 8);
        for l in &old {
            match rng.below(rate) {
                0 => {}
                1 => new.extend([l.clone(), line(rng)]),
                2 => new.push(line(rng)),
                3 => {
                    let from = rng.below(n - 50);
                    new.extend_from_slice(&old[from..from + 20 + rng.below(spread)]);
                    new.push(l.clone());
                }
                _ => new.push(l.clone()),
            }
        }
        (old.concat(), new.concat())
    }

    #[test]
    fn huge_files_hit_the_snake_heuristics() {
        // xdl_split tries its snake heuristics only past an edit cost of 256 and below
        // XDL_MAX_COST, so only with over 2^17 diagonals: 70,000 lines on each side.
        // In the second case (XDL_MAX_COST 1,024), boxes on both sides of a heuristic split
        // that must be diffed minimally (`min_lo`, `min_hi`) come out differently when cut
        // short. The seeds were picked so that these cases depend on each constant.
        let (old, new) = huge_case(&mut Rng(3), 70_000, 3000, 40, 4);
        let (old2, new2) = huge_case(&mut Rng(13), 150_000, 5000, 60, 20);
        check_all(&[
            case("70,000 lines", old, new),
            case("150,000 lines", old2, new2),
        ]);
    }

    #[test]
    fn large_random_files_hit_the_cost_limits() {
        // Thousands of differing lines push the edit cost past XDL_HEUR_MIN_COST and
        // XDL_MAX_COST, where xdl_split switches to its heuristics.
        let mut rng = Rng(42);
        let mut cases = Vec::new();
        for i in 0..6 {
            let n = 2000 + rng.below(4000);
            let old: Vec<Vec<u8>> = (0..n).map(|_| Lines::CODE.line(&mut rng)).collect();
            let new: Vec<Vec<u8>> = if i % 2 == 0 {
                (0..n).map(|_| Lines::CODE.line(&mut rng)).collect()
            } else {
                old.iter()
                    .map(|line| {
                        if rng.below(3) == 0 {
                            Lines::CODE.line(&mut rng)
                        } else {
                            line.clone()
                        }
                    })
                    .collect()
            };
            cases.push((
                format!("large #{i}"),
                join(&mut rng, &old, false),
                join(&mut rng, &new, false),
            ));
        }
        check_all(&cases);
    }
}
