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

/// Compare one directory of both trees. Costs reading its two trees.
fn compare(
    repo: &gix::Repository,
    reads: Reads<'_>,
    (dir, old, new): &PendingDir,
) -> Result<Compared> {
    let mut pair = DirPair::read((repo, reads), *old, *new, dir.as_ref())?;
    let (mut changes, mut below) = (Vec::new(), Vec::new());
    let mut path = dir.clone();
    while let Some((a, b)) = {
        path.truncate(dir.len());
        pair.next(&mut path)
    } {
        if a.or(b).is_some_and(|(is_tree, _)| is_tree) {
            let (old, new) = (a.map(|(_, s)| s.id), b.map(|(_, s)| s.id));
            if old != new {
                below.push((path.clone(), old, new));
            }
        } else if a.map(|(_, s)| s) != b.map(|(_, s)| s) {
            changes.push(Change {
                path: path.clone(),
                before: a.map(|(_, s)| s),
                after: b.map(|(_, s)| s),
            });
        }
    }
    Ok((changes, below))
}

/// One directory of both trees being compared by [`tree_changes`].
struct DirPair {
    old: Entries,
    new: Entries,
    /// The next entries of `old` and `new` to compare.
    i: usize,
    j: usize,
}

/// A tree's entries: its data, and where in it each entry's name is (no allocation per
/// entry).
#[derive(Default)]
struct Entries {
    data: Arc<[u8]>,
    entries: Vec<(std::ops::Range<usize>, gix::objs::tree::EntryMode, ObjectId)>,
}

impl Entries {
    /// Name, whether a tree, and side of entry `n`.
    fn get(&self, n: usize) -> Option<(&[u8], bool, Side)> {
        let (name, mode, id) = self.entries.get(n)?;
        let side = Side {
            mode: u32::from(mode.value()),
            id: *id,
        };
        Some((&self.data[name.clone()], mode.is_tree(), side))
    }
}

impl DirPair {
    /// Read trees `from` and `to` (either may be absent) of directory `dir`.
    fn read(
        (repo, reads): (&gix::Repository, Reads<'_>),
        from: Option<ObjectId>,
        to: Option<ObjectId>,
        dir: &BStr,
    ) -> Result<DirPair> {
        let read = |id: Option<ObjectId>| {
            id.map(|id| read_tree((repo, reads), id, dir))
                .transpose()
                .map(Option::unwrap_or_default)
        };
        Ok(DirPair {
            old: read(from)?,
            new: read(to)?,
            i: 0,
            j: 0,
        })
    }

    /// The next name in either tree, appended to `path` (the directory's path): its entry
    /// before and after as (is a tree, side), of the same kind when both are present.
    #[allow(clippy::type_complexity)]
    fn next(&mut self, path: &mut BString) -> Option<(Option<(bool, Side)>, Option<(bool, Side)>)> {
        let (old, new) = (self.old.get(self.i), self.new.get(self.j));
        let order = match (old, new) {
            (None, None) => return None,
            (Some((a, a_tree, _)), Some((b, b_tree, _))) => {
                gix::objs::tree::name_order(a.as_bstr(), a_tree, b.as_bstr(), b_tree)
            }
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
        };
        let a = old.filter(|_| order.is_le());
        let b = new.filter(|_| order.is_ge());
        self.i += usize::from(a.is_some());
        self.j += usize::from(b.is_some());
        if !path.is_empty() {
            path.push(b'/');
        }
        path.extend_from_slice(a.or(b).expect("one side").0);
        let side = |(_, is_tree, side): (&[u8], bool, Side)| (is_tree, side);
        Some((a.map(side), b.map(side)))
    }
}

/// The entries of tree `id` (read while diffing directory `dir`), from the trees `reads`
/// holds or else from the store (then held there). Costs the decoding, and a read of the
/// object unless held.
fn read_tree(
    (repo, reads): (&gix::Repository, Reads<'_>),
    id: ObjectId,
    dir: &BStr,
) -> Result<Entries> {
    let trees = reads.trees();
    let data = match trees.get(&id) {
        Some(data) => data,
        None => {
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
            data
        }
    };
    let decoded = gix::objs::TreeRef::from_bytes(&data, gix::hash::Kind::Sha1)
        .map_err(|e| object_error(&id, dir, e))?;
    let start = data.as_ptr() as usize;
    let entries = decoded
        .entries
        .iter()
        .map(|e| {
            let offset = e.filename.as_ptr() as usize - start;
            (offset..offset + e.filename.len(), e.mode, e.oid.to_owned())
        })
        .collect();
    Ok(Entries { data, entries })
}
