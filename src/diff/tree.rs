//! Tree changes: two trees walked side by side, in git's order, without rename detection.

use gix::bstr::{BStr, BString};
use gix::objs::tree::Entry as TreeEntry;
use gix::ObjectId;

use crate::error::{object_error, Result};

/// One side of a changed path: mode (as git prints it, e.g. `0o100644`) and object id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Side {
    pub(crate) mode: u32,
    pub(crate) id: ObjectId,
}

impl Side {
    pub(super) fn of(entry: &TreeEntry) -> Side {
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
#[derive(Debug, Clone)]
pub(crate) struct Change {
    pub(crate) path: BString,
    pub(crate) before: Option<Side>,
    pub(crate) after: Option<Side>,
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
pub(super) struct DirPair {
    pub(super) old: Vec<TreeEntry>,
    pub(super) new: Vec<TreeEntry>,
    /// The next entries of `old` and `new` to compare.
    pub(super) i: usize,
    pub(super) j: usize,
    /// The length of the directory's path.
    pub(super) dir_len: usize,
}

impl DirPair {
    /// Read trees `from` and `to` (either may be absent) of directory `dir`.
    pub(super) fn read(
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
    pub(super) fn next(
        &mut self,
        path: &mut BString,
    ) -> Option<(Option<(bool, Side)>, Option<(bool, Side)>)> {
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
pub(super) fn read_tree(
    repo: &gix::Repository,
    id: ObjectId,
    dir: &BStr,
) -> Result<Vec<gix::objs::tree::Entry>> {
    let tree = repo.find_tree(id).map_err(|e| object_error(&id, dir, e))?;
    let decoded = tree.decode().map_err(|e| object_error(&id, dir, e))?;
    Ok(decoded.entries.iter().map(|e| (*e).into()).collect())
}
