//! Tree changes: two trees walked side by side, in git's order, without rename detection.

use gix::bstr::{BStr, BString, ByteSlice};
use gix::ObjectId;
use std::sync::Arc;

use rayon::prelude::*;

use crate::error::{object_error, Result};
use crate::store::objects::Reads;

/// One side of a changed path: mode (as git prints it, e.g. `0o100644`) and object id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Side {
    pub(crate) mode: u32,
    pub(crate) id: ObjectId,
}

impl Side {
    pub(crate) fn is_link(&self) -> bool {
        self.mode & 0o170000 == 0o120000
    }

    /// Its kind, as a tree entry.
    pub(crate) fn entry_kind(&self) -> gix::objs::tree::EntryKind {
        use gix::objs::tree::EntryKind;
        match self.mode {
            0o100755 => EntryKind::BlobExecutable,
            0o120000 => EntryKind::Link,
            _ => EntryKind::Blob,
        }
    }
}

/// A path whose blob differs between two trees.
#[derive(Debug, Clone)]
pub(crate) struct Change {
    pub(crate) path: BString,
    pub(crate) before: Option<Side>,
    pub(crate) after: Option<Side>,
}

/// Every blob path that differs between trees `from` and `to`, in git's order (a file sorts
/// before a directory of the same name). Breadth-first: the differing directories of each
/// depth are read in parallel, each thread with its own handle on the objects behind `repo`
/// (so trees only in an in-memory overlay are not seen), and the changes are then sorted by
/// their paths' bytes, which is git's order (a directory sorts as its name and `/`). No
/// recursion, so depth costs heap, not thread stack. Costs one tree read per differing
/// directory, spread over the cores, except for the trees `reads` holds (and then holds).
pub(crate) fn tree_changes(
    repo: &gix::Repository,
    reads: Reads<'_>,
    from: ObjectId,
    to: ObjectId,
) -> Result<Vec<Change>> {
    let mut changes = Vec::new();
    let mut level = match from == to {
        true => Vec::new(),
        false => vec![(BString::default(), Some(from), Some(to))],
    };
    let shared = repo.clone().into_sync();
    while !level.is_empty() {
        let compared: Vec<Result<Compared>> = match level.len() < PARALLEL_FROM {
            true => level.iter().map(|dir| compare(repo, reads, dir)).collect(),
            false => level
                .par_iter()
                .map_init(
                    || shared.to_thread_local(),
                    |repo, dir| compare(repo, reads, dir),
                )
                .collect(),
        };
        level = Vec::new();
        for result in compared {
            let (found, below) = result?;
            changes.extend(found);
            level.extend(below);
        }
    }
    changes.sort_unstable_by(|a, b| a.path.cmp(&b.path));
    Ok(changes)
}

/// Directories of one depth below which [`tree_changes`] reads in parallel (fewer are read on
/// the calling thread: a thread's handle on the store costs more than a few trees).
const PARALLEL_FROM: usize = 16;

/// A directory to compare: its path and its tree before and after.
type PendingDir = (BString, Option<ObjectId>, Option<ObjectId>);
/// What comparing one directory found: the blobs that differ, and the subdirectories that do.
type Compared = (Vec<Change>, Vec<PendingDir>);

/// Compare one directory of both trees. Costs reading its two trees, and a `memcmp` per entry
/// they share byte for byte: only the entries that differ are decoded, and checked (a name
/// that is a file name, a kind of entry rewind makes, after the entry before it in git's
/// order). A malformed tree (written by hand into the store) is an
/// error, never a diff: its names could lead out of the project.
fn compare(
    repo: &gix::Repository,
    reads: Reads<'_>,
    (dir, old, new): &PendingDir,
) -> Result<Compared> {
    let read = |id: &Option<ObjectId>| -> Result<Entries> {
        let data = id.map(|id| read_tree((repo, reads), id, dir.as_ref()));
        Ok(Entries {
            data: data.transpose()?.unwrap_or_else(|| Arc::from(&[][..])),
            at: 0,
            last: None,
        })
    };
    let (mut old_entries, mut new_entries) = (read(old)?, read(new)?);
    let malformed = |id: &Option<ObjectId>, problem: String| {
        let id = id.expect("an entry comes from a tree");
        object_error(&id, dir.as_ref(), problem)
    };
    let (mut changes, mut below) = (Vec::new(), Vec::new());
    loop {
        if old_entries.skip_if_same_as(&mut new_entries) {
            continue;
        }
        let a = old_entries.peek().map_err(|p| malformed(old, p))?;
        let b = new_entries.peek().map_err(|p| malformed(new, p))?;
        let order = match (&a, &b) {
            (None, None) => break,
            (Some(a), Some(b)) => gix::objs::tree::name_order(
                old_entries.name(a).as_bstr(),
                a.is_tree,
                new_entries.name(b).as_bstr(),
                b.is_tree,
            ),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
        };
        let a = a.filter(|_| order.is_le());
        let b = b.filter(|_| order.is_ge());
        let mut path = dir.clone();
        if !path.is_empty() {
            path.push(b'/');
        }
        path.extend_from_slice(match &a {
            Some(a) => old_entries.name(a),
            None => new_entries.name(b.as_ref().expect("one side")),
        });
        let a = a.map(|a| old_entries.step_over(a)).transpose();
        let a = a.map_err(|p| malformed(old, p))?;
        let b = b.map(|b| new_entries.step_over(b)).transpose();
        let b = b.map_err(|p| malformed(new, p))?;
        if a.or(b).is_some_and(|(is_tree, _)| is_tree) {
            let (old, new) = (a.map(|(_, s)| s.id), b.map(|(_, s)| s.id));
            if old != new {
                below.push((path, old, new));
            }
        } else if a.map(|(_, s)| s) != b.map(|(_, s)| s) {
            changes.push(Change {
                path,
                before: a.map(|(_, s)| s),
                after: b.map(|(_, s)| s),
            });
        }
    }
    Ok((changes, below))
}

/// A tree's data (empty for a tree absent on this side), where in it the next entry to
/// compare begins, and where the entry before it began.
struct Entries {
    data: Arc<[u8]>,
    at: usize,
    last: Option<usize>,
}

/// An entry of [`Entries`], decoded: where its name is, whether a tree, its side, and where
/// the entry after it begins.
struct Entry {
    name: std::ops::Range<usize>,
    is_tree: bool,
    side: Side,
    next: usize,
}

impl Entries {
    /// Step over the next entry of both when their bytes (mode, name and id) are the same:
    /// whether it did. Costs a `memchr` and a `memcmp`.
    fn skip_if_same_as(&mut self, other: &mut Entries) -> bool {
        let (Some(a), Some(b)) = (self.undecoded_next(), other.undecoded_next()) else {
            return false;
        };
        if a != b {
            return false;
        }
        let len = a.len();
        // (Its order is checked against the next entry that differs: shared entries keep
        // both sides in step whatever their order.)
        (self.last, other.last) = (Some(self.at), Some(other.at));
        self.at += len;
        other.at += len;
        true
    }

    /// The bytes of the next entry, up to the NUL after its name and the id after that.
    fn undecoded_next(&self) -> Option<&[u8]> {
        let rest = &self.data[self.at..];
        let end = rest.find_byte(0)? + 1 + gix::hash::Kind::Sha1.len_in_bytes();
        rest.get(..end)
    }

    /// Note that `entry` comes next: it must sort after the entry before it, whose name is
    /// read again from its bytes.
    fn follows(&mut self, entry: &Entry) -> std::result::Result<(), String> {
        if let Some(last) = self.last {
            let bytes = &self.data[last..entry.name.start];
            let name = bytes
                .find_byte(b' ')
                .zip(bytes.find_byte(0))
                .map(|(space, nul)| &bytes[space + 1..nul]);
            let is_tree = bytes.first() == Some(&b'4'); // "40000": no other kind starts so
            let this = self.name(entry);
            let ordered = name.is_some_and(|name| {
                let order = gix::objs::tree::name_order(
                    name.as_bstr(),
                    is_tree,
                    this.as_bstr(),
                    entry.is_tree,
                );
                order.is_lt()
            });
            if !ordered {
                return Err(format!(
                    "its entries are out of git's order (or a name is there twice): {:?}",
                    this.as_bstr()
                ));
            }
        }
        self.last = Some(self.at);
        Ok(())
    }

    /// The next entry (`None` at the end), checked: a name that is a file name, and a file,
    /// an executable, a symlink or a directory (a blob's other permission bits read as git
    /// reads them). Costs decoding it.
    fn peek(&self) -> std::result::Result<Option<Entry>, String> {
        let rest = &self.data[self.at..];
        let mut iter = gix::objs::TreeRefIter::from_bytes(rest, gix::hash::Kind::Sha1);
        let Some(entry) = iter.next() else {
            return Ok(None);
        };
        let entry = entry.map_err(|_| "a malformed tree entry".to_string())?;
        let name: &[u8] = entry.filename;
        if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') {
            return Err(format!(
                "an entry named {:?}, which is no file name",
                name.as_bstr()
            ));
        }
        let mode = entry.mode.value();
        let (is_tree, mode) = match mode & 0o170000 {
            0o040000 => (true, 0o40000),
            0o100000 if mode & 0o100 != 0 => (false, 0o100755),
            0o100000 => (false, 0o100644),
            0o120000 => (false, 0o120000),
            0o160000 => {
                return Err("a submodule's commit (mode 160000), which rewind never records".into())
            }
            _ => {
                return Err(format!(
                    "an entry of mode {mode:o}, which is no kind of file"
                ))
            }
        };
        let name_at = self.at + (entry.filename.as_ptr() as usize - rest.as_ptr() as usize);
        Ok(Some(Entry {
            name: name_at..name_at + entry.filename.len(),
            is_tree,
            side: Side {
                mode,
                id: entry.oid.to_owned(),
            },
            next: self.at + iter.offset_to_next_entry(rest),
        }))
    }

    /// The name of `entry`, one of these entries.
    fn name(&self, entry: &Entry) -> &[u8] {
        &self.data[entry.name.clone()]
    }

    /// Move past `entry`, the next (after the one before it in git's order): whether it is a
    /// tree, and its side.
    fn step_over(&mut self, entry: Entry) -> std::result::Result<(bool, Side), String> {
        self.follows(&entry)?;
        self.at = entry.next;
        Ok((entry.is_tree, entry.side))
    }
}

/// The data of tree `id` (read while diffing directory `dir`), from the trees `reads` holds or
/// else from the store (then held there). Costs a read of the object unless held.
fn read_tree(
    (repo, reads): (&gix::Repository, Reads<'_>),
    id: ObjectId,
    dir: &BStr,
) -> Result<Arc<[u8]>> {
    let trees = reads.trees();
    if let Some(data) = trees.get(&id) {
        return Ok(data);
    }
    let (kind, data) = reads.object(repo, id, dir)?;
    if kind != gix::objs::Kind::Tree {
        return Err(object_error(
            &id,
            dir,
            format!("a {kind} where a tree belongs"),
        ));
    }
    let data: Arc<[u8]> = data.into();
    trees.insert(id, data.clone());
    Ok(data)
}
