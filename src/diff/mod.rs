//! What changed between two snapshots, or between a snapshot and the project now: `patch`
//! (paths), `diff` (git's unified text), `diff_full` (per-file rows with `--numstat` counts) and
//! `has_changes`. git is the oracle for every byte and every number here.

use std::path::PathBuf;

use gix::bstr::{BStr, BString, ByteSlice};
use gix::ObjectId;
use serde::Serialize;

use crate::error::{object_error, Result};
use crate::paths::quote;
use crate::snapshot::TrackOptions;
use crate::store::objects::read_blob;
use crate::store::{SnapshotId, Store};

mod lines;
pub(crate) mod merge;
mod renames;
mod tree;

use lines::LineDiff;
pub(crate) use merge::merge_texts;
pub use merge::ConflictHunk;
pub(crate) use renames::{broken, find_renames, is_rewrite, merge, MAX_SCORE};
pub(crate) use tree::{tree_changes, Change, Side};

/// git decides a side is binary when a NUL byte appears in its first 8,000 bytes.
const BINARY_PROBE: usize = 8000;
/// Lines of context around each change, as `git diff` prints by default.
const CONTEXT: u32 = 3;
/// git cuts a hunk header's function name to this many bytes.
const FUNCNAME_MAX: usize = 80;

/// Which rows [`Store::diff_full`] gives, and how much text they may carry.
///
/// A row is `truncated` when its `before`/`after` are left empty for size: a side is larger
/// than `max_content_bytes`, or its text did not fit in what `max_total_content_bytes` left.
/// Its `status` and counts are still exact, unless a side is larger than `max_counted_bytes`
/// (then 0/0). Every changed path under `paths` has its row, truncated or not, so a caller can
/// ask again for the truncated ones (by `paths`, with a larger total).
#[derive(Debug, Clone)]
pub struct DiffOptions {
    /// Only changes at or below these paths (files or directories), project-relative or
    /// absolute inside the project, as `git diff -- PATHS` with literal pathspecs (a trailing
    /// `/` selects only below a directory); empty: every change.
    pub paths: Vec<PathBuf>,
    /// Rows whose sides are larger than this carry no `before`/`after` text (`truncated`).
    pub max_content_bytes: u64,
    /// Sides larger than this are not even counted (`truncated`, 0/0).
    pub max_counted_bytes: u64,
    /// The most text the whole result carries: the UTF-8 bytes of every row's `before` plus
    /// `after` (JSON escaping comes on top). Rows get their text in git's order until the next
    /// row's would pass this total; from that row on, rows come without text (`truncated`).
    /// Default 16 MiB.
    pub max_total_content_bytes: u64,
    /// Pair deleted and added files into renames as `git diff -M` does (default); `false`:
    /// a rename is a deletion and an addition, as `git diff --no-renames` lists it. Renames
    /// are looked for among the changes `paths` selects, as `git diff -M -- PATHS` does.
    pub renames: bool,
}

impl Default for DiffOptions {
    fn default() -> Self {
        DiffOptions {
            paths: Vec::new(),
            max_content_bytes: 4 << 20,
            max_counted_bytes: 64 << 20,
            max_total_content_bytes: 16 << 20,
            renames: true,
        }
    }
}

/// The paths that differ between a snapshot and the project now.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct Patch {
    /// The snapshot compared against.
    pub hash: SnapshotId,
    /// Project-relative paths, `/`-separated, in git's order, byte for byte (print them as
    /// git does with [`crate::paths::quote_path`]; JSON has them lossy where not UTF-8).
    #[serde(serialize_with = "crate::paths::serialize_paths")]
    pub files: Vec<BString>,
}

/// How a file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The file is new.
    Added,
    /// The file is gone.
    Deleted,
    /// The file's content, mode or type changed.
    Modified,
    /// The file moved from `old_file` (`git diff -M`'s pairing), maybe with edits and a new
    /// mode.
    Renamed,
}

/// One changed file, counted as `git diff -M --numstat` counts it (`--no-renames` with
/// [`DiffOptions::renames`] off).
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct FileChange {
    /// The project-relative path (lossy in JSON where not UTF-8).
    #[serde(serialize_with = "crate::paths::serialize_path")]
    pub file: BString,
    /// How it changed.
    pub status: Status,
    /// The path it was renamed from (`status` `renamed` only; lossy in JSON where not UTF-8).
    #[serde(
        serialize_with = "crate::paths::serialize_opt_path",
        skip_serializing_if = "Option::is_none"
    )]
    pub old_file: Option<BString>,
    /// How similar the renamed file is to the one it came from, in percent as git's
    /// `similarity index` line says (`renamed` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub similarity: Option<u32>,
    /// The old text (empty when added, binary or truncated).
    pub before: String,
    /// The new text (empty when deleted, binary or truncated).
    pub after: String,
    /// Lines added, as `git diff --numstat` counts them (0 for a binary file).
    pub additions: usize,
    /// Lines deleted, as `git diff --numstat` counts them (0 for a binary file).
    pub deletions: usize,
    /// Either side is binary (a NUL byte in its first 8000 bytes, git's test).
    pub binary: bool,
    /// The text was left out: a side was too large, or the result's total was reached (see
    /// [`DiffOptions`]).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// A side is not valid UTF-8: `before`/`after` carry it with U+FFFD replacements.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub lossy: bool,
}

impl Store {
    /// Resolve `from`, and `to` or a fresh snapshot of the project when `to` is `None`.
    fn resolve_pair(
        &self,
        from: SnapshotId,
        to: Option<SnapshotId>,
    ) -> Result<(ObjectId, ObjectId)> {
        let from = self.tree(from)?;
        let to = match to {
            Some(to) => self.tree(to)?,
            None => self.track(&TrackOptions::default())?.hash.0,
        };
        Ok((from, to))
    }

    /// The paths that differ between snapshot `hash` and the project now (a fresh snapshot).
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), &rewind::OpenOptions::new("/tmp/rewind"))?;
    /// let before = store.track(&Default::default())?.hash;
    /// // ... the agent edits files ...
    /// for path in store.patch(before)?.files {
    ///     println!("changed: {}", rewind::quote_path(&path));
    /// }
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn patch(&self, hash: SnapshotId) -> Result<Patch> {
        let (from, to) = self.resolve_pair(hash, None)?;
        let changes = tree_changes(&self.repo(), self.reads(), from, to)?;
        Ok(Patch {
            hash: SnapshotId(from),
            files: changes.into_iter().map(|c| c.path).collect(),
        })
    }

    /// Per-file rows between `from` and `to` (default: the project now), with the counts of
    /// `git diff --numstat --no-renames`, in git's order: every change at or below
    /// `options.paths`, with its text while the total allows (see [`DiffOptions`]). Costs one
    /// walk of the differing trees, then both blobs and a line diff per selected row.
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), &rewind::OpenOptions::new("/tmp/rewind"))?;
    /// let before = store.track(&Default::default())?.hash;
    /// // ... the agent edits files ...
    /// for row in store.diff_full(before, None, &rewind::DiffOptions::default())? {
    ///     println!("{} {:?} +{} -{}", row.file, row.status, row.additions, row.deletions);
    /// }
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn diff_full(
        &self,
        from: SnapshotId,
        to: Option<SnapshotId>,
        options: &DiffOptions,
    ) -> Result<Vec<FileChange>> {
        let paths = (options.paths.iter())
            .map(|path| self.select(path))
            .collect::<Result<Vec<_>>>()?;
        let (from, to) = self.resolve_pair(from, to)?;
        let repo = self.repo();
        let mut budget = Some(options.max_total_content_bytes);
        let selected = tree_changes(&repo, self.reads(), from, to)?
            .into_iter()
            .filter(|change| {
                let path = change.path.as_ref();
                paths.is_empty() || paths.iter().any(|selection| selection.selects(path))
            })
            .collect();
        listed(&repo, selected, options.renames)?
            .into_iter()
            .map(|change| {
                let mut row = file_change(&repo, change, options)?;
                row.charge(&mut budget);
                Ok(row)
            })
            .collect()
    }

    /// The unified diff from `from` to `to` (default: the project now), byte for byte as
    /// `git diff -M --no-ext-diff` prints it with `core.quotePath=false`, without colour
    /// ([`Self::diff_with`] for `--no-renames` or some paths only).
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), &rewind::OpenOptions::new("/tmp/rewind"))?;
    /// let before = store.track(&Default::default())?.hash;
    /// // ... the agent edits files ...
    /// let text = store.diff(before, None)?;
    /// print!("{}", String::from_utf8_lossy(&text));
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn diff(&self, from: SnapshotId, to: Option<SnapshotId>) -> Result<Vec<u8>> {
        self.diff_with(from, to, &DiffOptions::default())
    }

    /// [`Self::diff`] with `options`: only the changes at or below `options.paths` (as `git
    /// diff -M -- PATHS`), and without rename detection when `options.renames` is off (as `git
    /// diff --no-renames`). The content limits do not apply to the text.
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), &rewind::OpenOptions::new("/tmp/rewind"))?;
    /// # let before = store.track(&Default::default())?.hash;
    /// let options = rewind::DiffOptions { renames: false, ..Default::default() };
    /// let text = store.diff_with(before, None, &options)?;
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn diff_with(
        &self,
        from: SnapshotId,
        to: Option<SnapshotId>,
        options: &DiffOptions,
    ) -> Result<Vec<u8>> {
        let paths = (options.paths.iter())
            .map(|path| self.select(path))
            .collect::<Result<Vec<_>>>()?;
        let only = |path: &BStr| paths.iter().any(|selection| selection.selects(path));
        let only = (!paths.is_empty()).then_some(&only as &dyn Fn(&BStr) -> bool);
        self.diff_of(from, to, only, options.renames)
    }

    /// [`Self::diff`] of the changes whose path `only` selects (every change when `None`),
    /// with renames among them when `renames`.
    pub(crate) fn diff_of(
        &self,
        from: SnapshotId,
        to: Option<SnapshotId>,
        only: Option<&dyn Fn(&BStr) -> bool>,
        renames: bool,
    ) -> Result<Vec<u8>> {
        let (from, to) = self.resolve_pair(from, to)?;
        let repo = self.repo();
        let mut out = Vec::new();
        let selected = tree_changes(&repo, self.reads(), from, to)?
            .into_iter()
            .filter(|change| only.is_none_or(|only| only(change.path.as_ref())))
            .collect();
        for change in listed(&repo, selected, renames)? {
            write_listed(&repo, &mut out, &change)?;
        }
        Ok(out)
    }
}

/// A change as a diff lists it: `from` is the path and score (of [`MAX_SCORE`]) of a rename's
/// source, whose side is then `change.before`.
pub(crate) struct Listed {
    pub(crate) change: Change,
    pub(crate) from: Option<(BString, u64)>,
}

/// `changes` (in git's order) with the renames `git diff -M` finds among them paired, each at
/// its added path; each change alone when not `renames`. Costs [`find_renames`].
pub(crate) fn listed(
    repo: &gix::Repository,
    changes: Vec<Change>,
    renames: bool,
) -> Result<Vec<Listed>> {
    let pairs = match renames {
        true => find_renames(repo, &changes)?,
        false => Vec::new(),
    };
    Ok(merge(changes, &pairs)
        .into_iter()
        .map(|(change, source)| match source {
            None => Listed { change, from: None },
            Some((source, score)) => Listed {
                change: Change {
                    before: source.before,
                    ..change
                },
                from: Some((source.path, score)),
            },
        })
        .collect())
}

/// git's `similarity index` percent for a score of [`MAX_SCORE`].
pub(crate) fn percent(score: u64) -> u32 {
    (score * 100 / MAX_SCORE) as u32
}

impl FileChange {
    /// Take the row's text out of `budget` (the bytes left for the rest of the result), or
    /// drop the text when it does not fit; once one row's text did not fit, `budget` is `None`
    /// and no later row carries any. Costs nothing but freeing dropped text.
    fn charge(&mut self, budget: &mut Option<u64>) {
        let text = (self.before.len() + self.after.len()) as u64;
        if text == 0 {
            return;
        }
        match budget.and_then(|left| left.checked_sub(text)) {
            Some(left) => *budget = Some(left),
            None => {
                *budget = None;
                self.before = String::new();
                self.after = String::new();
                self.lossy = false;
                self.truncated = true;
            }
        }
    }
}

/// The size of object `id` at `path`, without loading it.
fn blob_size(repo: &gix::Repository, id: ObjectId, path: &BStr) -> Result<u64> {
    repo.find_header(id)
        .map(|h| h.size())
        .map_err(|e| object_error(&id, path, e))
}

pub(crate) fn is_binary(data: &[u8]) -> bool {
    data[..data.len().min(BINARY_PROBE)].contains(&0)
}

/// A `diff_full` row for one change. Costs reading both blobs and one line diff.
pub(crate) fn file_change(
    repo: &gix::Repository,
    listed: Listed,
    options: &DiffOptions,
) -> Result<FileChange> {
    let Listed { change, from } = listed;
    let status = match (&change.before, &change.after, &from) {
        (_, _, Some(_)) => Status::Renamed,
        (None, _, _) => Status::Added,
        (_, None, _) => Status::Deleted,
        _ => Status::Modified,
    };
    let (old_file, similarity) = from.map(|(p, score)| (p, percent(score))).unzip();
    let path = change.path.as_bstr();
    let size = |side: Option<Side>| side.map_or(Ok(0), |s| blob_size(repo, s.id, path));
    let largest = size(change.before)?.max(size(change.after)?);
    let mut row = FileChange {
        file: path.to_owned(),
        status,
        old_file,
        similarity,
        before: String::new(),
        after: String::new(),
        additions: 0,
        deletions: 0,
        binary: false,
        truncated: largest > options.max_content_bytes,
        lossy: false,
    };
    if largest > options.max_counted_bytes {
        return Ok(row);
    }
    let old_path = row.old_file.as_ref().map_or(path, |p| p.as_bstr());
    let load =
        |side: Option<Side>, path| side.map_or(Ok(Vec::new()), |s| read_blob(repo, s.id, path));
    let (old, new) = (load(change.before, old_path)?, load(change.after, path)?);
    if is_binary(&old) || is_binary(&new) {
        row.binary = true;
        return Ok(row);
    }
    let lines = LineDiff::new(&old, &new);
    row.additions = lines.additions();
    row.deletions = lines.deletions();
    if !row.truncated {
        row.lossy = old.to_str().is_err() || new.to_str().is_err();
        row.before = old.to_str_lossy().into_owned();
        row.after = new.to_str_lossy().into_owned();
    }
    Ok(row)
}

/// Append git's patch for the change of `path` from `before` to `after` (a file <-> symlink
/// change as a deletion and a creation, as git prints it). Costs reading both blobs and a line
/// diff.
pub(crate) fn write_change(
    repo: &gix::Repository,
    out: &mut Vec<u8>,
    path: &BStr,
    before: Option<Side>,
    after: Option<Side>,
) -> Result<()> {
    match (before, after) {
        (Some(before), Some(after)) if before.is_link() != after.is_link() => {
            write_patch(repo, out, path, Some(before), None, None)?;
            write_patch(repo, out, path, None, Some(after), None)
        }
        (before, after) => write_patch(repo, out, path, before, after, None),
    }
}

/// Append git's patch for `listed`: [`write_change`]'s, or a rename's (`similarity index`,
/// `rename from`, `rename to`, then the content's change). Costs reading both blobs and a
/// line diff.
pub(crate) fn write_listed(
    repo: &gix::Repository,
    out: &mut Vec<u8>,
    listed: &Listed,
) -> Result<()> {
    let change = &listed.change;
    match &listed.from {
        None => write_change(repo, out, change.path.as_ref(), change.before, change.after),
        Some((from, score)) => write_patch(
            repo,
            out,
            change.path.as_ref(),
            change.before,
            change.after,
            Some((from.as_ref(), *score)),
        ),
    }
}

/// Append git's patch for one path (renamed from `from`, with its score, when given):
/// headers, then hunks or the binary notice.
fn write_patch(
    repo: &gix::Repository,
    out: &mut Vec<u8>,
    path: &BStr,
    before: Option<Side>,
    after: Option<Side>,
    from: Option<(&BStr, u64)>,
) -> Result<()> {
    let old_path = from.map_or(path, |(from, _)| from);
    let (a, b) = (quote(b"a/", old_path, false), quote(b"b/", path, false));
    out.extend_from_slice(b"diff --git ");
    out.extend_from_slice(&a);
    out.push(b' ');
    out.extend_from_slice(&b);
    out.push(b'\n');
    let null = ObjectId::null(gix::hash::Kind::Sha1);
    let (old_id, new_id) = (before.map_or(null, |s| s.id), after.map_or(null, |s| s.id));
    match (before, after) {
        (None, Some(after)) => {
            out.extend_from_slice(format!("new file mode {:06o}\n", after.mode).as_bytes())
        }
        (Some(before), None) => {
            out.extend_from_slice(format!("deleted file mode {:06o}\n", before.mode).as_bytes())
        }
        (Some(before), Some(after)) if before.mode != after.mode => out.extend_from_slice(
            format!(
                "old mode {:06o}\nnew mode {:06o}\n",
                before.mode, after.mode
            )
            .as_bytes(),
        ),
        _ => {}
    }
    if let Some((from, score)) = from {
        out.extend_from_slice(format!("similarity index {}%\n", percent(score)).as_bytes());
        for (label, name) in [(&b"rename from "[..], from), (b"rename to ", path)] {
            out.extend_from_slice(label);
            out.extend_from_slice(&quote(b"", name, false));
            out.push(b'\n');
        }
    }
    if old_id == new_id {
        return Ok(()); // a mode-only change
    }
    let hex_len = abbrev_len(repo);
    out.extend_from_slice(b"index ");
    out.extend_from_slice(abbrev(repo, old_id, hex_len).as_bytes());
    out.extend_from_slice(b"..");
    out.extend_from_slice(abbrev(repo, new_id, hex_len).as_bytes());
    if let (Some(before), Some(after)) = (before, after) {
        if before.mode == after.mode {
            out.extend_from_slice(format!(" {:06o}", before.mode).as_bytes());
        }
    }
    out.push(b'\n');

    let load =
        |side: Option<Side>, path| side.map_or(Ok(Vec::new()), |s| read_blob(repo, s.id, path));
    let (old, new) = (load(before, old_path)?, load(after, path)?);
    let label_a = if before.is_some() {
        a
    } else {
        b"/dev/null".to_vec()
    };
    let label_b = if after.is_some() {
        b
    } else {
        b"/dev/null".to_vec()
    };
    if is_binary(&old) || is_binary(&new) {
        out.extend_from_slice(b"Binary files ");
        out.extend_from_slice(&label_a);
        out.extend_from_slice(b" and ");
        out.extend_from_slice(&label_b);
        out.extend_from_slice(b" differ\n");
        return Ok(());
    }
    let mut hunks = Vec::new();
    LineDiff::new(&old, &new).write_hunks(&mut hunks);
    if hunks.is_empty() {
        return Ok(());
    }
    for (marker, label) in [(b"--- ", label_a), (b"+++ ", label_b)] {
        out.extend_from_slice(marker);
        out.extend_from_slice(&label);
        if label.contains(&b' ') {
            out.push(b'\t'); // git's marker for a name with a space
        }
        out.push(b'\n');
    }
    out.extend_from_slice(&hunks);
    Ok(())
}

/// git's automatic abbreviation length: 7, or more for stores with many packed objects.
fn abbrev_len(repo: &gix::Repository) -> usize {
    let count = repo.objects.packed_object_count().unwrap_or(0);
    let bits = u64::BITS - count.leading_zeros(); // git: msb(count) + 1
    (bits.div_ceil(2) as usize).max(7)
}

/// `id` abbreviated as git does in `index` lines: `hex_len` digits, more if ambiguous.
fn abbrev(repo: &gix::Repository, id: ObjectId, hex_len: usize) -> String {
    if id.is_null() {
        return "0".repeat(hex_len);
    }
    match gix::prelude::ObjectIdExt::attach(id, repo).shorten() {
        Ok(prefix) if prefix.hex_len() >= hex_len => prefix.to_string(),
        _ => id.to_hex_with_len(hex_len).to_string(),
    }
}
