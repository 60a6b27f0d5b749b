//! Trees from the sorted file list: only directories on changed paths are written, the others
//! come from the cache-tree.

use std::collections::HashSet;
use std::path::PathBuf;

use gix::bstr::{BString, ByteSlice};
use gix::index::entry::Mode;
use gix::index::extension::Tree as CacheTree;

use super::FileEntry;
use crate::error::{Error, Result};
use crate::store::objects::ObjectWriter;

/// Cache-tree nodes deeper than this keep no children: gix reads, writes, clones and drops the
/// cache-tree by recursion, so its depth must stay bounded. Deeper directories are not cached;
/// their trees are hashed again when something below their cached ancestor changes.
pub(super) const CACHE_TREE_DEPTH: usize = 128;

/// Builds trees bottom-up from files in index order, reusing clean subtrees from the cache-tree.
pub(super) struct TreeBuilder<'a> {
    pub(super) files: &'a [FileEntry],
    pub(super) dirty: &'a HashSet<BString>,
    pub(super) objects: &'a ObjectWriter,
}

/// A directory whose tree [`TreeBuilder::build`] is making.
pub(super) struct Level<'a, 'c> {
    /// Its path with `/` appended (empty for the root).
    pub(super) dir: &'a [u8],
    /// The index of its first file.
    pub(super) start: usize,
    pub(super) cached: Option<&'c CacheTree>,
    pub(super) entries: Vec<gix::objs::tree::Entry>,
    pub(super) children: Vec<CacheTree>,
}

impl<'a> TreeBuilder<'a> {
    /// The root tree of `self.files` (in index order) and its cache-tree, reusing the clean
    /// subtrees of `cached`. An explicit stack of the directories being built, so depth costs
    /// heap, not thread stack. Costs one tree write per dirty directory; clean ones are reused.
    pub(super) fn build(&self, cached: Option<&CacheTree>) -> Result<CacheTree> {
        let mut stack = vec![Level {
            dir: b"",
            start: 0,
            cached,
            entries: Vec::new(),
            children: Vec::new(),
        }];
        let mut i = 0;
        loop {
            let depth = stack.len();
            let level = stack.last_mut().expect("the root is popped last");
            let next = self.files.get(i).and_then(|file| {
                let rest = file.path.strip_prefix(level.dir)?;
                Some((file, rest))
            });
            let Some((file, rest)) = next else {
                let level = stack.pop().expect("the root is popped last");
                let tree = self.write(level, i)?;
                match stack.last_mut() {
                    Some(parent) => parent.push_subtree(tree, depth - 1),
                    None => return Ok(tree),
                }
                continue;
            };
            let Some(slash) = rest.find_byte(b'/') else {
                level.entries.push(gix::objs::tree::Entry {
                    mode: entry_mode(file.mode),
                    filename: rest.into(),
                    oid: file.id,
                });
                i += 1;
                continue;
            };
            let name = &rest[..slash];
            let sub_dir = &file.path[..level.dir.len() + slash + 1];
            let sub_cached = level
                .cached
                .and_then(|c| c.children.iter().find(|t| t.name.as_slice() == name));
            match sub_cached {
                Some(t)
                    if !self.dirty.contains(&sub_dir[..sub_dir.len() - 1])
                        && self.still_valid(t, i, sub_dir) =>
                {
                    i += t.num_entries.expect("checked") as usize;
                    level.push_subtree(t.clone(), depth);
                }
                _ => stack.push(Level {
                    dir: sub_dir,
                    start: i,
                    cached: sub_cached,
                    entries: Vec::new(),
                    children: Vec::new(),
                }),
            }
        }
    }

    /// Write the tree of `level`, whose files end before index `end`. Costs one encoding, one
    /// hash, and a write when the tree is new.
    pub(super) fn write(&self, level: Level<'_, '_>, end: usize) -> Result<CacheTree> {
        let id = write_tree(self.objects, level.entries, level.dir)?;
        let name = match level.dir.len() {
            0 => &[][..],
            len => level.dir[..len - 1]
                .rsplit(|&b| b == b'/')
                .next()
                .expect("non-empty"),
        };
        Ok(CacheTree {
            name: name.into(),
            id,
            num_entries: Some((end - level.start) as u32),
            children: level.children,
        })
    }

    /// A clean cached subtree still covers exactly its `num_entries` files starting at `start`.
    pub(super) fn still_valid(&self, cached: &CacheTree, start: usize, dir: &[u8]) -> bool {
        let Some(count) = cached.num_entries.map(|n| n as usize) else {
            return false;
        };
        count > 0
            && self
                .files
                .get(start + count - 1)
                .is_some_and(|f| f.path.starts_with(dir))
            && self
                .files
                .get(start + count)
                .is_none_or(|f| !f.path.starts_with(dir))
    }
}

impl Level<'_, '_> {
    /// Add subtree `tree` as an entry; keep it in the cache-tree unless this directory, at
    /// `depth` (the root is 1), is as deep as the cache-tree goes.
    pub(super) fn push_subtree(&mut self, tree: CacheTree, depth: usize) {
        self.entries.push(gix::objs::tree::Entry {
            mode: gix::objs::tree::EntryKind::Tree.into(),
            filename: tree.name.as_slice().into(),
            oid: tree.id,
        });
        if depth <= CACHE_TREE_DEPTH {
            self.children.push(tree);
        }
    }
}

pub(super) fn entry_mode(mode: Mode) -> gix::objs::tree::EntryMode {
    use gix::objs::tree::EntryKind;
    match mode {
        Mode::FILE_EXECUTABLE => EntryKind::BlobExecutable,
        Mode::SYMLINK => EntryKind::Link,
        _ => EntryKind::Blob,
    }
    .into()
}

/// Write the tree of directory `dir` (for messages) holding `entries`, in tree order.
/// Costs one encoding, one hash, and a write when the tree is new.
pub(super) fn write_tree(
    objects: &ObjectWriter,
    entries: Vec<gix::objs::tree::Entry>,
    dir: &[u8],
) -> Result<gix::ObjectId> {
    let mut data = Vec::new();
    let tree = gix::objs::Tree { entries };
    gix::objs::WriteTo::write_to(&tree, &mut data).map_err(|e| {
        let dir = dir.to_str_lossy();
        Error::io("encoding tree", PathBuf::from(dir.as_ref()), e)
    })?;
    objects.write(gix::objs::Kind::Tree, &data)
}
