//! What changed between two snapshots, or between a snapshot and the project now: `patch`
//! (paths), `diff` (git's unified text), `diff_full` (per-file rows with `--numstat` counts) and
//! `has_changes`. git is the oracle for every byte and every number here.

use std::ops::Range;

use gix::bstr::{BStr, BString, ByteSlice};
use gix::objs::tree::Entry as TreeEntry;
use gix::ObjectId;
use gix_imara_diff::{
    sources::byte_lines, Algorithm, Diff, IndentHeuristic, IndentLevel, InternedInput,
};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::scan::TrackOptions;
use crate::store::Store;

/// git decides a side is binary when a NUL byte appears in its first 8,000 bytes.
const BINARY_PROBE: usize = 8000;
/// Lines of context around each change, as `git diff` prints by default.
const CONTEXT: u32 = 3;
/// git cuts a hunk header's function name to this many bytes.
const FUNCNAME_MAX: usize = 80;

/// How much [`Store::diff_full`] may load.
#[derive(Debug, Clone)]
pub struct DiffOptions {
    /// Rows whose sides are larger than this carry no `before`/`after` text (`truncated`).
    pub max_content_bytes: u64,
    /// Sides larger than this are not even counted (`truncated`, 0/0).
    pub max_counted_bytes: u64,
}

impl Default for DiffOptions {
    fn default() -> Self {
        DiffOptions {
            max_content_bytes: 4 << 20,
            max_counted_bytes: 64 << 20,
        }
    }
}

/// The paths that differ between a snapshot and the project now.
#[derive(Debug, Clone, Serialize)]
pub struct Patch {
    /// The snapshot compared against (full id).
    pub hash: String,
    /// Project-relative paths, `/`-separated, in git's order (lossy where not UTF-8).
    pub files: Vec<String>,
    /// The same paths, byte for byte (to print them as git does: [`quote_path`]).
    #[serde(skip)]
    pub paths: Vec<BString>,
}

/// How a file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Added,
    Deleted,
    Modified,
}

/// One changed file, counted as `git diff --numstat --no-renames` counts it.
#[derive(Debug, Clone, Serialize)]
pub struct FileChange {
    pub file: String,
    pub status: Status,
    /// The old text (empty when added, binary or truncated).
    pub before: String,
    /// The new text (empty when deleted, binary or truncated).
    pub after: String,
    pub additions: usize,
    pub deletions: usize,
    pub binary: bool,
    /// A side was too large to return (see [`DiffOptions`]).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// A side is not valid UTF-8: `before`/`after` carry it with U+FFFD replacements.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub lossy: bool,
}

/// One side of a changed path: mode (as git prints it, e.g. `0o100644`) and object id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Side {
    pub(crate) mode: u32,
    pub(crate) id: ObjectId,
}

impl Side {
    fn of(entry: &TreeEntry) -> Side {
        Side {
            mode: u32::from(entry.mode.value()),
            id: entry.oid,
        }
    }

    pub(crate) fn is_link(&self) -> bool {
        self.mode & 0o170000 == 0o120000
    }
}

/// A path whose blob differs between two trees.
pub(crate) struct Change {
    pub(crate) path: BString,
    pub(crate) before: Option<Side>,
    pub(crate) after: Option<Side>,
}

impl Store {
    /// Resolve `spec` (a full or unambiguous abbreviated id) to the id of a tree in the store.
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), "/tmp/rewind".as_ref())?;
    /// let full = store.resolve_tree("4b825dc6")?; // abbreviations work when unambiguous
    /// assert_eq!(full.to_string().len(), 40);
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn resolve_tree(&self, spec: &str) -> Result<ObjectId> {
        let repo = self.repo();
        let valid = (4..=40).contains(&spec.len()) && spec.bytes().all(|b| b.is_ascii_hexdigit());
        if !valid {
            return Err(Error::InvalidId(spec.to_owned()));
        }
        let id = if spec.len() == 40 {
            ObjectId::from_hex(spec.as_bytes()).map_err(|_| Error::InvalidId(spec.to_owned()))?
        } else {
            let prefix =
                gix::hash::Prefix::from_hex(spec).map_err(|_| Error::InvalidId(spec.to_owned()))?;
            match repo.objects.lookup_prefix(prefix, None) {
                Ok(Some(Ok(id))) => id,
                Ok(Some(Err(()))) => return Err(Error::Ambiguous(spec.to_owned())),
                Ok(None) => return Err(Error::NotFound(spec.to_owned())),
                Err(e) => return Err(Error::store(self.git_dir(), e)),
            }
        };
        let header = repo
            .try_find_header(id)
            .map_err(|e| object_error(&id, BStr::new(""), e))?
            .ok_or_else(|| Error::NotFound(spec.to_owned()))?;
        match header.kind() {
            gix::objs::Kind::Tree => Ok(id),
            other => Err(Error::WrongType {
                id: id.to_string(),
                actual: kind_name(other),
                expected: "tree",
            }),
        }
    }

    /// Resolve `from`, and `to` or a fresh snapshot of the project when `to` is `None`.
    fn resolve_pair(&self, from: &str, to: Option<&str>) -> Result<(ObjectId, ObjectId)> {
        let from = self.resolve_tree(from)?;
        let to = match to {
            Some(to) => self.resolve_tree(to)?,
            None => self.track(&TrackOptions::default())?.hash,
        };
        Ok((from, to))
    }

    /// The paths that differ between snapshot `hash` and the project now (a fresh snapshot).
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), "/tmp/rewind".as_ref())?;
    /// let before = store.track(&Default::default())?.hash.to_string();
    /// // ... the agent edits files ...
    /// for path in store.patch(&before)?.files {
    ///     println!("changed: {path}");
    /// }
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn patch(&self, hash: &str) -> Result<Patch> {
        let (from, to) = self.resolve_pair(hash, None)?;
        let changes = tree_changes(&self.repo(), from, to)?;
        Ok(Patch {
            hash: from.to_string(),
            files: changes
                .iter()
                .map(|c| c.path.to_str_lossy().into_owned())
                .collect(),
            paths: changes.into_iter().map(|c| c.path).collect(),
        })
    }

    /// Per-file rows between `from` and `to` (default: the project now), with the counts of
    /// `git diff --numstat --no-renames`, in git's order.
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), "/tmp/rewind".as_ref())?;
    /// let before = store.track(&Default::default())?.hash.to_string();
    /// // ... the agent edits files ...
    /// for row in store.diff_full(&before, None, &rewind::DiffOptions::default())? {
    ///     println!("{} {:?} +{} -{}", row.file, row.status, row.additions, row.deletions);
    /// }
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn diff_full(
        &self,
        from: &str,
        to: Option<&str>,
        options: &DiffOptions,
    ) -> Result<Vec<FileChange>> {
        let (from, to) = self.resolve_pair(from, to)?;
        let repo = self.repo();
        tree_changes(&repo, from, to)?
            .into_iter()
            .map(|change| file_change(&repo, change, options))
            .collect()
    }

    /// The unified diff from `from` to `to` (default: the project now), byte for byte as
    /// `git diff --no-ext-diff` prints it with `core.quotePath=false`, without colour.
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), "/tmp/rewind".as_ref())?;
    /// let before = store.track(&Default::default())?.hash.to_string();
    /// // ... the agent edits files ...
    /// let text = store.diff(&before, None)?;
    /// print!("{}", String::from_utf8_lossy(&text));
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn diff(&self, from: &str, to: Option<&str>) -> Result<Vec<u8>> {
        let (from, to) = self.resolve_pair(from, to)?;
        let repo = self.repo();
        let mut out = Vec::new();
        for change in tree_changes(&repo, from, to)? {
            match (change.before, change.after) {
                // A file <-> symlink change prints as a deletion and a creation, as git does.
                (Some(before), Some(after)) if before.is_link() != after.is_link() => {
                    write_patch(&repo, &mut out, change.path.as_ref(), Some(before), None)?;
                    write_patch(&repo, &mut out, change.path.as_ref(), None, Some(after))?;
                }
                (before, after) => {
                    write_patch(&repo, &mut out, change.path.as_ref(), before, after)?
                }
            }
        }
        Ok(out)
    }
}

/// Every blob path that differs between trees `from` and `to`, in git's order (a file sorts
/// before a directory of the same name). An explicit stack of the directories being compared,
/// so depth costs heap, not thread stack. Costs one tree read per differing directory.
pub(crate) fn tree_changes(
    repo: &gix::Repository,
    from: ObjectId,
    to: ObjectId,
) -> Result<Vec<Change>> {
    let mut changes = Vec::new();
    let mut path = BString::default();
    let mut stack = Vec::new();
    if from != to {
        stack.push(DirPair::read(repo, Some(from), Some(to), path.as_ref())?);
    }
    while let Some(pair) = stack.last_mut() {
        path.truncate(pair.dir_len);
        let Some((a, b)) = pair.next(&mut path) else {
            stack.pop();
            continue;
        };
        if a.or(b).is_some_and(|(is_tree, _)| is_tree) {
            let (old, new) = (a.map(|(_, s)| s.id), b.map(|(_, s)| s.id));
            if old != new {
                stack.push(DirPair::read(repo, old, new, path.as_ref())?);
            }
        } else if a.map(|(_, s)| s) != b.map(|(_, s)| s) {
            changes.push(Change {
                path: path.clone(),
                before: a.map(|(_, s)| s),
                after: b.map(|(_, s)| s),
            });
        }
    }
    Ok(changes)
}

/// One directory of both trees being compared by [`tree_changes`].
struct DirPair {
    old: Vec<TreeEntry>,
    new: Vec<TreeEntry>,
    /// The next entries of `old` and `new` to compare.
    i: usize,
    j: usize,
    /// The length of the directory's path.
    dir_len: usize,
}

impl DirPair {
    /// Read trees `from` and `to` (either may be absent) of directory `dir`.
    fn read(
        repo: &gix::Repository,
        from: Option<ObjectId>,
        to: Option<ObjectId>,
        dir: &BStr,
    ) -> Result<DirPair> {
        let read = |id: Option<ObjectId>| {
            id.map(|id| read_tree(repo, id, dir))
                .transpose()
                .map(Option::unwrap_or_default)
        };
        Ok(DirPair {
            old: read(from)?,
            new: read(to)?,
            i: 0,
            j: 0,
            dir_len: dir.len(),
        })
    }

    /// The next name in either tree, appended to `path` (the directory's path): its entry
    /// before and after as (is a tree, side), of the same kind when both are present.
    #[allow(clippy::type_complexity)]
    fn next(&mut self, path: &mut BString) -> Option<(Option<(bool, Side)>, Option<(bool, Side)>)> {
        let order = match (self.old.get(self.i), self.new.get(self.j)) {
            (None, None) => return None,
            (Some(a), Some(b)) => gix::objs::tree::name_order(
                &a.filename,
                a.mode.is_tree(),
                &b.filename,
                b.mode.is_tree(),
            ),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
        };
        let a = order.is_le().then(|| &self.old[self.i]);
        let b = order.is_ge().then(|| &self.new[self.j]);
        self.i += usize::from(a.is_some());
        self.j += usize::from(b.is_some());
        if !path.is_empty() {
            path.push(b'/');
        }
        path.extend_from_slice(&a.or(b).expect("one side").filename);
        let side = |e: &TreeEntry| (e.mode.is_tree(), Side::of(e));
        Some((a.map(side), b.map(side)))
    }
}

/// The entries of tree `id` (read while diffing directory `dir`).
fn read_tree(
    repo: &gix::Repository,
    id: ObjectId,
    dir: &BStr,
) -> Result<Vec<gix::objs::tree::Entry>> {
    let tree = repo.find_tree(id).map_err(|e| object_error(&id, dir, e))?;
    let decoded = tree.decode().map_err(|e| object_error(&id, dir, e))?;
    Ok(decoded.entries.iter().map(|e| (*e).into()).collect())
}

fn kind_name(kind: gix::objs::Kind) -> &'static str {
    match kind {
        gix::objs::Kind::Blob => "blob",
        gix::objs::Kind::Tree => "tree",
        gix::objs::Kind::Commit => "commit",
        gix::objs::Kind::Tag => "tag",
    }
}

fn object_error(id: &ObjectId, path: &BStr, e: impl std::fmt::Display) -> Error {
    Error::Object {
        id: id.to_string(),
        path: if path.is_empty() {
            "/".into()
        } else {
            path.to_string()
        },
        message: e.to_string(),
    }
}

/// The bytes of blob `id` at `path`.
pub(crate) fn read_blob(repo: &gix::Repository, id: ObjectId, path: &BStr) -> Result<Vec<u8>> {
    let object = repo
        .find_object(id)
        .map_err(|e| object_error(&id, path, e))?;
    if object.kind != gix::objs::Kind::Blob {
        return Err(object_error(
            &id,
            path,
            format!("a {} where a blob belongs", object.kind),
        ));
    }
    Ok(object.detach().data)
}

/// The size of object `id` at `path`, without loading it.
fn blob_size(repo: &gix::Repository, id: ObjectId, path: &BStr) -> Result<u64> {
    repo.find_header(id)
        .map(|h| h.size())
        .map_err(|e| object_error(&id, path, e))
}

fn is_binary(data: &[u8]) -> bool {
    data[..data.len().min(BINARY_PROBE)].contains(&0)
}

/// A `diff_full` row for one change. Costs reading both blobs and one line diff.
pub(crate) fn file_change(
    repo: &gix::Repository,
    change: Change,
    options: &DiffOptions,
) -> Result<FileChange> {
    let status = match (&change.before, &change.after) {
        (None, _) => Status::Added,
        (_, None) => Status::Deleted,
        _ => Status::Modified,
    };
    let path = change.path.as_bstr();
    let size = |side: Option<Side>| side.map_or(Ok(0), |s| blob_size(repo, s.id, path));
    let largest = size(change.before)?.max(size(change.after)?);
    let mut row = FileChange {
        file: path.to_str_lossy().into_owned(),
        status,
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
    let load = |side: Option<Side>| side.map_or(Ok(Vec::new()), |s| read_blob(repo, s.id, path));
    let (old, new) = (load(change.before)?, load(change.after)?);
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

/// Append git's patch for one path: headers, then hunks or the binary notice.
fn write_patch(
    repo: &gix::Repository,
    out: &mut Vec<u8>,
    path: &BStr,
    before: Option<Side>,
    after: Option<Side>,
) -> Result<()> {
    let (a, b) = (quote(b"a/", path, false), quote(b"b/", path, false));
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

    let load = |side: Option<Side>| side.map_or(Ok(Vec::new()), |s| read_blob(repo, s.id, path));
    let (old, new) = (load(before)?, load(after)?);
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

/// The line diff of two texts as `git diff` computes it by default: Myers' algorithm, then git's
/// indent heuristic to place changes that could slide (both from gix-imara-diff, the heuristic
/// fed git's measure of indent: [`git_indent`]). Lines keep their `\n`, so a missing final
/// newline is a change, as in git.
struct LineDiff<'a> {
    input: InternedInput<&'a [u8]>,
    /// Lines `.0` of the old text became lines `.1` of the new one; sorted and disjoint.
    changes: Vec<(Range<u32>, Range<u32>)>,
}

impl<'a> LineDiff<'a> {
    /// Costs one hash per line, then O((N+M)·D) for D changed lines (bounded by imara's
    /// heuristics on large inputs) and one pass of the slider heuristic.
    fn new(old: &'a [u8], new: &'a [u8]) -> LineDiff<'a> {
        let input = InternedInput::new(byte_lines(old), byte_lines(new));
        let mut diff = Diff::compute(Algorithm::Myers, &input);
        let indent = |token| git_indent(input.interner[token]);
        diff.postprocess_with_heuristic(&input, IndentHeuristic::new(indent));
        let changes = diff.hunks().map(|h| (h.before, h.after)).collect();
        LineDiff { input, changes }
    }

    fn additions(&self) -> usize {
        self.changes.iter().map(|(_, new)| new.len()).sum()
    }

    fn deletions(&self) -> usize {
        self.changes.iter().map(|(old, _)| old.len()).sum()
    }

    /// Line `i` of the old text.
    fn old_line(&self, i: u32) -> &'a [u8] {
        self.input.interner[self.input.before[i as usize]]
    }

    /// Append the hunks as `git diff` prints them: three lines of context, changes at most six
    /// unchanged lines apart in one hunk, `@@ -a,b +c,d @@` headers with the function name.
    /// Costs one pass over the printed lines, plus the function-name search.
    fn write_hunks(&self, out: &mut Vec<u8>) {
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
    fn push_lines(
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
fn git_indent(line: &[u8]) -> IndentLevel {
    let form_feed_as_text = line.iter().map(|&b| if b == b'\x0c' { b'x' } else { b });
    IndentLevel::for_ascii_line(form_feed_as_text, 8)
}

/// `start,len` of a hunk header: 1-based, `,len` left out when it is 1, and the line before
/// the hunk (0 for the start of the file) when the side is empty.
fn push_range(out: &mut Vec<u8>, start: u32, len: u32) {
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
struct FunctionNames {
    /// Lines below this were searched already and gave `found` (a line index).
    searched: u32,
    found: Option<u32>,
}

impl FunctionNames {
    fn above<'a>(&mut self, diff: &LineDiff<'a>, start: u32) -> Option<&'a [u8]> {
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

/// `path` as git prints a name in human output with `core.quotePath=true`: as it is, unless
/// it holds a control character, `"`, `\` or a byte >= 0x80; then in double quotes, with C
/// escapes (`\n`, `\t`, `\"`, ...) and the other such bytes as 3-digit octal. The result is
/// ASCII whenever it is quoted, and never spans lines.
///
/// ```
/// assert_eq!(rewind::quote_path(b"src/main.rs"), "src/main.rs");
/// assert_eq!(rewind::quote_path(b"evil\nkeep"), r#""evil\nkeep""#);
/// assert_eq!(rewind::quote_path("caf\u{e9}".as_bytes()), r#""caf\303\251""#);
/// ```
pub fn quote_path(path: &[u8]) -> String {
    String::from_utf8_lossy(&quote(b"", path, true)).into_owned()
}

/// `prefix` + `path`, C-quoted as git quotes names when `path` needs it: for control
/// characters, `"` and `\`, and with `high_bytes` (`core.quotePath=true`) bytes >= 0x80.
/// Costs one pass over `path`.
fn quote(prefix: &[u8], path: &[u8], high_bytes: bool) -> Vec<u8> {
    let needs_quote =
        |b: u8| b < 0x20 || b == b'"' || b == b'\\' || b == 0x7f || (high_bytes && b >= 0x80);
    let mut out = Vec::with_capacity(prefix.len() + path.len() + 2);
    if !path.iter().copied().any(needs_quote) {
        out.extend_from_slice(prefix);
        out.extend_from_slice(path);
        return out;
    }
    out.push(b'"');
    out.extend_from_slice(prefix);
    for &b in path {
        let escape = match b {
            0x07 => Some(b'a'),
            0x08 => Some(b'b'),
            b'\t' => Some(b't'),
            b'\n' => Some(b'n'),
            0x0b => Some(b'v'),
            0x0c => Some(b'f'),
            b'\r' => Some(b'r'),
            b'"' | b'\\' => Some(b),
            _ => None,
        };
        match escape {
            Some(e) => out.extend_from_slice(&[b'\\', e]),
            None if needs_quote(b) => out.extend_from_slice(format!("\\{b:03o}").as_bytes()),
            None => out.push(b),
        }
    }
    out.push(b'"');
    out
}

#[cfg(test)]
mod tests {
    use super::{quote, quote_path};

    #[test]
    fn quote_path_leaves_plain_names_alone() {
        assert_eq!(quote_path(b"src/a b/c-d_e.rs"), "src/a b/c-d_e.rs");
        assert_eq!(quote_path(b""), "");
    }

    #[test]
    fn quote_path_escapes_like_git_quote_path_true() {
        assert_eq!(quote_path(b"evil\nkeep"), "\"evil\\nkeep\"");
        assert_eq!(
            quote_path(b"\x07\x08\t\x0b\x0c\r"),
            "\"\\a\\b\\t\\v\\f\\r\""
        );
        assert_eq!(quote_path(b"say \"hi\"\\"), "\"say \\\"hi\\\"\\\\\"");
        assert_eq!(quote_path(b"\x01\x1b\x7f"), "\"\\001\\033\\177\"");
        assert_eq!(quote_path("é".as_bytes()), "\"\\303\\251\"");
        assert_eq!(quote_path(b"bad\xff"), "\"bad\\377\"");
    }

    #[test]
    fn quote_without_high_bytes_is_git_diff_header_quoting() {
        assert_eq!(quote(b"a/", "é".as_bytes(), false), "a/é".as_bytes());
        assert_eq!(quote(b"a/", b"x\ny", false), b"\"a/x\\ny\"");
    }

    /// A file for every byte but NUL and `/`, listed by `git ls-files` (which quotes names as
    /// `git diff` does): with `core.quotePath=true` each line is [`quote_path`] of the name,
    /// with `false` it is `quote` without high bytes.
    #[test]
    fn quoting_equals_git_ls_files_for_every_byte() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path();
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .current_dir(repo)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("HOME", repo)
                .env_remove("XDG_CONFIG_HOME")
                .args(args)
                .output()
                .expect("the git CLI is this test's oracle");
            assert!(out.status.success(), "git {args:?}");
            out.stdout
        };
        git(&["init", "-q"]);
        let mut names: Vec<Vec<u8>> = (1..=255u8)
            .filter(|&b| b != b'/')
            .map(|b| vec![b'n', b])
            .collect();
        names.push("caf\u{e9} x".into());
        names.sort();
        for name in &names {
            std::fs::write(repo.join(std::ffi::OsStr::from_bytes(name)), "x").unwrap();
        }
        git(&["add", "-A"]);
        for (quote_path_config, high_bytes) in [("true", true), ("false", false)] {
            let listed = git(&[
                "-c",
                &format!("core.quotePath={quote_path_config}"),
                "ls-files",
            ]);
            let ours: Vec<u8> = names
                .iter()
                .flat_map(|name| {
                    let mut line = quote(b"", name, high_bytes);
                    line.push(b'\n');
                    line
                })
                .collect();
            assert_eq!(
                String::from_utf8_lossy(&ours),
                String::from_utf8_lossy(&listed),
                "core.quotePath={quote_path_config}"
            );
        }
        for name in &names {
            assert_eq!(quote_path(name).into_bytes(), quote(b"", name, true));
        }
    }
}
