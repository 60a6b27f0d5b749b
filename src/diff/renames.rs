//! Rename detection as `git diff -M` does it by default (no `-B`, no `-C`).
//!
//! Only a deleted path and an added path can pair (a modified path never does), in three
//! passes, each over what the earlier ones left:
//! 1. exact: an added file takes a deleted one with the same blob and file type (a symlink
//!    pairs only with a symlink), one of the same basename first, else the first in git's
//!    order;
//! 2. basename: a basename that only one deleted and one added file have pairs them when they
//!    are at least 75% similar (halfway between the 50% threshold and 100%);
//! 3. inexact, unless both sides number more than [`RENAME_LIMIT`] or their product passes its
//!    square: every added file keeps its [`CANDIDATES_PER_DESTINATION`] best deleted files
//!    (a symlink scores 0), each met in git's order taking a free slot, else the first of the
//!    worst slots if it is better (score, then the same basename); of those, the ones at least
//!    50% similar are taken best first (ties: the same basename first, then added path, then
//!    slot), skipping a side already taken. Measured against git: which slots equal candidates
//!    hold depends on the dissimilar files met before them.
//!
//! Similarity is git's estimate: each file is cut into chunks that end after a newline or at
//! 64 bytes (a CR before a LF is left out of a text file's chunks), the bytes of equal chunks
//! are counted, and the score is the bytes the two files have in common over the larger file's
//! size, on git's scale of 60,000. A chunk's leading NUL bytes count but do not tell it apart
//! (`\0// c\n` is `// c\n` to git, found by a test). git tells chunks apart by a hash modulo
//! 107,927 (two different chunks whose hashes collide count as equal); here equal chunks are
//! equal bytes after their leading NULs, up to a 64-bit hash.

use std::collections::HashMap;

use gix::bstr::{BStr, ByteSlice};
use gix::ObjectId;

use super::tree::{Change, Side};
use super::{blob_size, is_binary};
use crate::error::Result;
use crate::store::objects::read_blob;

/// git's scale of similarity: 100%.
pub(crate) const MAX_SCORE: u64 = 60_000;
/// `-M`'s default threshold, 50%.
const MIN_SCORE: u64 = MAX_SCORE / 2;
/// The basename pass's threshold: halfway from [`MIN_SCORE`] to 100%.
const BASENAME_MIN_SCORE: u64 = MIN_SCORE + (MAX_SCORE - MIN_SCORE) / 2;
/// `diff.renameLimit`'s default: the inexact pass runs on at most this many squared pairs.
pub(crate) const RENAME_LIMIT: usize = 1000;
/// How many deleted files each added file keeps as candidates in the inexact pass.
const CANDIDATES_PER_DESTINATION: usize = 4;
/// The longest chunk of the similarity estimate.
const CHUNK_MAX: usize = 64;

/// A deleted path (`source`, an index into the changes) renamed to an added one
/// (`destination`), `score` of [`MAX_SCORE`] similar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pair {
    pub(crate) source: usize,
    pub(crate) destination: usize,
    pub(crate) score: u64,
}

/// The renames among `changes` (in git's order), as `git diff -M` finds them. Costs a hash
/// lookup per added file; then, when deleted and added files are left, reading each of those
/// regular files once and one chunk count per file, and one merge of two counts per pair of
/// candidates (at most [`RENAME_LIMIT`] squared).
pub(crate) fn find_renames(repo: &gix::Repository, changes: &[Change]) -> Result<Vec<Pair>> {
    let sources: Vec<usize> = (0..changes.len())
        .filter(|&i| changes[i].after.is_none() && changes[i].before.is_some_and(is_file))
        .collect();
    let destinations: Vec<usize> = (0..changes.len())
        .filter(|&i| changes[i].before.is_none() && changes[i].after.is_some_and(is_file))
        .collect();
    let mut found = Found {
        changes,
        taken: vec![false; changes.len()],
        pairs: Vec::new(),
    };
    if sources.is_empty() || destinations.is_empty() {
        return Ok(found.pairs);
    }
    found.exact(&sources, &destinations);
    let (sources, destinations) = (found.left(&sources), found.left(&destinations));
    if sources.is_empty() || destinations.is_empty() {
        return Ok(found.pairs);
    }
    let mut files = Files::new(repo, changes);
    found.basenames(&mut files, &sources, &destinations)?;
    let (sources, destinations) = (found.left(&sources), found.left(&destinations));
    let (ns, nd) = (sources.len() as u64, destinations.len() as u64);
    let limit = RENAME_LIMIT as u64;
    if ns > 0 && nd > 0 && (ns <= limit || nd <= limit) && ns * nd <= limit * limit {
        found.inexact(&mut files, &sources, &destinations)?;
    }
    Ok(found.pairs)
}

/// Whether `path`'s change from `before` to `after` is a rewrite: the two share less than the
/// rename threshold (50%), so that `before`'s content may have moved to another path (what
/// `git diff -B` breaks into a deletion and an addition for `-M` to pair). A type change is
/// one. Costs reading and chunking both blobs.
pub(crate) fn is_rewrite(
    repo: &gix::Repository,
    path: &BStr,
    before: Side,
    after: Side,
) -> Result<bool> {
    if !is_file(before) || !is_file(after) {
        return Ok(is_file(before) != is_file(after));
    }
    let change = Change {
        path: path.to_owned(),
        before: Some(before),
        after: Some(after),
    };
    let halves = broken(&change);
    Ok(Files::new(repo, &halves).similarity(0, 1, MIN_SCORE)? < MIN_SCORE)
}

/// `change` broken in two, as `git diff -B` breaks a rewrite: the deletion of its old side
/// and the addition of its new one.
pub(crate) fn broken(change: &Change) -> [Change; 2] {
    let half = |before, after| Change {
        path: change.path.clone(),
        before,
        after,
    };
    [half(change.before, None), half(None, change.after)]
}

/// The renames found so far, and which changes they took.
struct Found<'a> {
    changes: &'a [Change],
    taken: Vec<bool>,
    pairs: Vec<Pair>,
}

impl<'a> Found<'a> {
    fn side(&self, i: usize) -> Side {
        self.changes[i]
            .before
            .or(self.changes[i].after)
            .expect("one side")
    }

    fn name(&self, i: usize) -> &'a BStr {
        basename(self.changes[i].path.as_ref())
    }

    /// `list` without the changes a rename took.
    fn left(&self, list: &[usize]) -> Vec<usize> {
        list.iter().copied().filter(|&i| !self.taken[i]).collect()
    }

    fn pair(&mut self, source: usize, destination: usize, score: u64) {
        self.taken[source] = true;
        self.taken[destination] = true;
        self.pairs.push(Pair {
            source,
            destination,
            score,
        });
    }

    /// Pass 1: each added file, in git's order, takes a free deleted file with its blob and
    /// file type, one of the same basename first. Costs a hash lookup per file.
    fn exact(&mut self, sources: &[usize], destinations: &[usize]) {
        let mut by_blob: HashMap<(ObjectId, bool), Vec<usize>> = HashMap::new();
        for &s in sources {
            let side = self.side(s);
            by_blob
                .entry((side.id, side.is_link()))
                .or_default()
                .push(s);
        }
        for &d in destinations {
            let side = self.side(d);
            let Some(candidates) = by_blob.get(&(side.id, side.is_link())) else {
                continue;
            };
            let free = || candidates.iter().copied().filter(|&s| !self.taken[s]);
            let chosen = free()
                .find(|&s| self.name(s) == self.name(d))
                .or_else(|| free().next());
            if let Some(s) = chosen {
                self.pair(s, d, MAX_SCORE);
            }
        }
    }

    /// Pass 2: a basename only one deleted and one added file have pairs them when they are
    /// [`BASENAME_MIN_SCORE`] similar. Costs one similarity per such basename.
    fn basenames(
        &mut self,
        files: &mut Files,
        sources: &[usize],
        destinations: &[usize],
    ) -> Result<()> {
        // Per basename: how many deleted files have it and the last one, the same for added.
        let mut counts: HashMap<&BStr, (usize, usize, usize, usize)> = HashMap::new();
        for &s in sources {
            let entry = counts.entry(self.name(s)).or_default();
            (entry.0, entry.1) = (entry.0 + 1, s);
        }
        for &d in destinations {
            let entry = counts.entry(self.name(d)).or_default();
            (entry.2, entry.3) = (entry.2 + 1, d);
        }
        for &d in destinations {
            let Some(&(1, s, 1, _)) = counts.get(self.name(d)) else {
                continue;
            };
            let score = files.similarity(s, d, BASENAME_MIN_SCORE)?;
            if score >= BASENAME_MIN_SCORE {
                self.pair(s, d, score);
            }
        }
        Ok(())
    }

    /// Pass 3: every added file keeps its best [`CANDIDATES_PER_DESTINATION`] deleted files;
    /// those at least [`MIN_SCORE`] similar are taken best first. Costs one similarity per
    /// pair.
    fn inexact(
        &mut self,
        files: &mut Files,
        sources: &[usize],
        destinations: &[usize],
    ) -> Result<()> {
        let mut candidates = Vec::new();
        for &d in destinations {
            let mut kept: Vec<Candidate> = Vec::with_capacity(CANDIDATES_PER_DESTINATION);
            for &s in sources {
                // Every deleted file competes for the slots, even one below the threshold (it
                // is dropped afterwards): that decides the order of equal candidates, as in git.
                let candidate = Candidate {
                    source: s,
                    destination: d,
                    score: files.similarity(s, d, MIN_SCORE)?,
                    same_name: self.name(s) == self.name(d),
                };
                if kept.len() < CANDIDATES_PER_DESTINATION {
                    kept.push(candidate);
                } else {
                    let worst = (0..kept.len())
                        .min_by_key(|&k| kept[k].rank())
                        .expect("kept is full");
                    if candidate.rank() > kept[worst].rank() {
                        kept[worst] = candidate;
                    }
                }
            }
            candidates.extend(kept.into_iter().filter(|c| c.score >= MIN_SCORE));
        }
        // Stable: equal ranks stay in the order of their added path, then of their slot.
        candidates.sort_by_key(|c| std::cmp::Reverse(c.rank()));
        for c in candidates {
            if !self.taken[c.source] && !self.taken[c.destination] {
                self.pair(c.source, c.destination, c.score);
            }
        }
        Ok(())
    }
}

/// A regular file or a symlink (what rename detection considers).
fn is_file(side: Side) -> bool {
    matches!(side.mode & 0o170000, 0o100000 | 0o120000)
}

/// The part of `path` after its last `/`.
fn basename(path: &BStr) -> &BStr {
    path.rfind_byte(b'/')
        .map_or(path, |slash| path[slash + 1..].as_bstr())
}

/// A deleted file an added one may have been renamed from, in the inexact pass.
struct Candidate {
    source: usize,
    destination: usize,
    score: u64,
    same_name: bool,
}

impl Candidate {
    /// Higher is better: the score, then the same basename.
    fn rank(&self) -> (u64, bool) {
        (self.score, self.same_name)
    }
}

/// The changes' files as far as the similarity estimate read them: sizes and chunk counts
/// (by the change's index), each read at most once.
struct Files<'a> {
    repo: &'a gix::Repository,
    changes: &'a [Change],
    sizes: Vec<Option<u64>>,
    chunks: Vec<Option<Vec<(u64, u64)>>>,
}

impl<'a> Files<'a> {
    fn new(repo: &'a gix::Repository, changes: &'a [Change]) -> Files<'a> {
        Files {
            repo,
            changes,
            sizes: vec![None; changes.len()],
            chunks: vec![None; changes.len()],
        }
    }

    fn side(&self, i: usize) -> Side {
        let change = &self.changes[i];
        change.before.or(change.after).expect("one side")
    }

    fn size(&mut self, i: usize) -> Result<u64> {
        if let Some(size) = self.sizes[i] {
            return Ok(size);
        }
        let size = blob_size(self.repo, self.side(i).id, self.changes[i].path.as_ref())?;
        self.sizes[i] = Some(size);
        Ok(size)
    }

    /// How similar deleted file `source` and added file `destination` are, on the scale of
    /// [`MAX_SCORE`]: 0 for a symlink, and for sizes too far apart to reach `minimum`. Costs
    /// reading and chunking each file the first time, then one merge of their counts.
    fn similarity(&mut self, source: usize, destination: usize, minimum: u64) -> Result<u64> {
        if self.side(source).is_link() || self.side(destination).is_link() {
            return Ok(0);
        }
        let (a, b) = (self.size(source)?, self.size(destination)?);
        let (larger, smaller) = (a.max(b), a.min(b));
        // Even if all of the smaller file were in the larger one, the score would be too low.
        if larger * (MAX_SCORE - minimum) < (larger - smaller) * MAX_SCORE || larger == 0 {
            return Ok(0);
        }
        self.load(source)?;
        self.load(destination)?;
        let (a, b) = (&self.chunks[source], &self.chunks[destination]);
        let common = common_bytes(
            a.as_deref().unwrap_or_default(),
            b.as_deref().unwrap_or_default(),
        );
        Ok(common * MAX_SCORE / larger)
    }

    fn load(&mut self, i: usize) -> Result<()> {
        if self.chunks[i].is_none() {
            let data = read_blob(self.repo, self.side(i).id, self.changes[i].path.as_ref())?;
            self.chunks[i] = Some(chunk_counts(&data));
        }
        Ok(())
    }
}

/// The bytes of each distinct chunk of `data` (see the module's doc), by the chunk's hash,
/// sorted by hash. Costs one pass over `data` and a sort of its distinct chunks.
fn chunk_counts(data: &[u8]) -> Vec<(u64, u64)> {
    let text = !is_binary(data);
    let mut counts: HashMap<u64, u64> = HashMap::new();
    // `seen`: the chunk has a byte other than NUL so far.
    let (mut hash, mut len, mut seen) = (FNV_OFFSET, 0usize, false);
    for (i, &byte) in data.iter().enumerate() {
        if text && byte == b'\r' && data.get(i + 1) == Some(&b'\n') {
            continue;
        }
        // git's chunk hash does not see a chunk's leading NUL bytes (they still count).
        seen |= byte != 0;
        if seen {
            hash = (hash ^ u64::from(byte)).wrapping_mul(FNV_PRIME);
        }
        len += 1;
        if byte == b'\n' || len == CHUNK_MAX {
            *counts.entry(hash).or_default() += len as u64;
            (hash, len, seen) = (FNV_OFFSET, 0, false);
        }
    }
    if len > 0 {
        *counts.entry(hash).or_default() += len as u64;
    }
    let mut counts: Vec<(u64, u64)> = counts.into_iter().collect();
    counts.sort_unstable();
    counts
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0100_0000_01b3;

/// The bytes two files' chunk counts have in common: for each chunk in both, the smaller of
/// its two counts. Costs one merge of the sorted counts.
fn common_bytes(a: &[(u64, u64)], b: &[(u64, u64)]) -> u64 {
    let (mut i, mut j, mut common) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].0.cmp(&b[j].0) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                common += a[i].1.min(b[j].1);
                i += 1;
                j += 1;
            }
        }
    }
    common
}

/// `items` (one per change, in the changes' order) with the renames merged: a rename's
/// source is dropped and its destination carries the source and the score, where git prints
/// it (at the added path). Costs one pass.
pub(crate) fn merge<T>(items: Vec<T>, pairs: &[Pair]) -> Vec<(T, Option<(T, u64)>)> {
    let mut source_of: HashMap<usize, (usize, u64)> = HashMap::new();
    let mut is_source = vec![false; items.len()];
    for pair in pairs {
        source_of.insert(pair.destination, (pair.source, pair.score));
        is_source[pair.source] = true;
    }
    let mut slots: Vec<Option<T>> = items.into_iter().map(Some).collect();
    let mut out = Vec::with_capacity(slots.len() - pairs.len());
    for i in 0..slots.len() {
        if is_source[i] {
            continue;
        }
        let item = slots[i].take().expect("each item is taken once");
        let source = source_of
            .get(&i)
            .map(|&(s, score)| (slots[s].take().expect("a source pairs once"), score));
        out.push((item, source));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_end_at_newlines_and_64_bytes_and_skip_cr_before_lf_in_text() {
        let long = [b'x'; 130];
        let counts = chunk_counts(&long);
        // 64 + 64 (the same chunk twice) + 2.
        assert_eq!(counts.iter().map(|c| c.1).sum::<u64>(), 130);
        assert_eq!(counts.len(), 2);
        assert_eq!(chunk_counts(b"a\r\nb\n"), chunk_counts(b"a\nb\n"));
        assert_ne!(chunk_counts(b"\0a\r\n"), chunk_counts(b"\0a\n"));
    }

    #[test]
    fn leading_nuls_of_a_chunk_count_but_do_not_tell_it_apart() {
        let a = chunk_counts(b"\0\0// c\n");
        let b = chunk_counts(b"// c\n");
        assert_eq!(a.len(), 1);
        assert_eq!((a[0].0, a[0].1), (b[0].0, 7));
        assert_ne!(chunk_counts(b"/\0/ c\n")[0].0, b[0].0);
    }

    #[test]
    fn common_bytes_take_the_smaller_count_of_shared_chunks() {
        let a = chunk_counts(b"same\nsame\nonly a\n");
        let b = chunk_counts(b"same\nonly b\n");
        assert_eq!(common_bytes(&a, &b), 5);
    }
}
