//! The stat cache: the store's git index of the last snapshot (entries, an exact cache-tree and
//! a record of which loose objects it names), checked before it is trusted.

use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::Path;

use gix::bstr::{BStr, BString, ByteSlice};
use gix::index::entry::{stat, Stat};
use gix::index::extension::Tree as CacheTree;
use gix::ObjectId;

use super::FileEntry;
use crate::error::{Error, Result};
use crate::store::Locked;

/// Object ids, hashed by their first bytes (they are SHA-1 already).
pub(super) type LooseSet = gix::hashtable::HashSet<ObjectId>;

/// The stat cache a snapshot starts from.
pub(super) struct Cache {
    pub(super) state: gix::index::State,
    /// When the index file was written: for git's racy-timestamp rule, and the time after
    /// which a change to a loose object it names is someone else's.
    pub(super) time: stat::Time,
    /// The index file's trailing checksum, naming this version of it.
    pub(super) checksum: Option<ObjectId>,
}

/// Read the stat cache; a missing or unreadable one is an empty cache (every file is then hashed
/// again, so the snapshot stays right). Its checksum is checked apart, by [`index_is_intact`],
/// concurrently with the walk.
pub(super) fn load_index(path: &Path) -> Cache {
    match crate::store::objects::read_index(path) {
        Some(file) => {
            let time = file.timestamp().into();
            let checksum = file.checksum();
            let (state, _) = file.into_parts();
            Cache {
                state,
                time,
                checksum,
            }
        }
        None => Cache {
            state: gix::index::State::new(gix::hash::Kind::Sha1),
            time: Default::default(),
            checksum: None,
        },
    }
}

/// What [`Store::check_cache`] found.
pub(super) enum CacheCheck {
    /// The index file's checksum does not match: drop it.
    Damaged,
    Checked {
        /// The objects the cache names that are sound loose files (all others are packed).
        loose: LooseSet,
        /// Objects the cache names that are lost, or loose files someone damaged.
        lost: Vec<ObjectId>,
        /// The loose record did not describe this index and these packs.
        record_stale: bool,
    },
}

/// The file beside the index that says which objects it names are loose files, so that `track`
/// verifies those with one `stat` each instead of looking every object up in the packs. Text:
/// a header line, `index <checksum>`, `pack <name>` for each name in `objects/pack`, and
/// `loose <id>` lines; it holds only while both the index and `objects/pack` are unchanged.
pub(super) const LOOSE_RECORD: &str = "rewind-index-objects";
pub(super) const LOOSE_RECORD_HEADER: &str = "rewind index objects 1";

impl Locked<'_> {
    /// Verify the stat cache: its checksum, and that the store still holds every object it
    /// names (blobs, and the trees of its cache-tree). Costs one read and hash of the index, then
    /// [`ObjectWriter::verify_loose`] of the loose objects the record names, or, without a
    /// record that holds, a pack lookup per named object first.
    pub(super) fn check_cache(&self, index_path: &Path, cache: &Cache) -> CacheCheck {
        if !index_is_intact(index_path) {
            return CacheCheck::Damaged;
        }
        let objects = self.objects();
        let recorded = cache
            .checksum
            .and_then(|checksum| self.read_loose_record(checksum));
        let record_stale = recorded.is_none();
        let candidates = recorded.unwrap_or_else(|| {
            let mut ids: Vec<ObjectId> = cache.state.entries().iter().map(|e| e.id).collect();
            ids.extend(cache.state.tree().map(tree_ids).unwrap_or_default());
            ids.retain(|id| !objects.in_packs(id));
            ids.sort_unstable();
            ids.dedup();
            ids
        });
        let check = objects.verify_loose(&candidates, cache.time);
        CacheCheck::Checked {
            loose: check.loose.into_iter().collect(),
            lost: check.lost,
            record_stale,
        }
    }

    /// Which objects of a new index (its files' `(id, hashed)` and cache-tree `tree`) are
    /// loose, given the `loose` ones among the previous index's. Costs a set lookup per file and
    /// a pack lookup per hashed file and per tree.
    pub(super) fn loose_ids(
        &self,
        files: &[(ObjectId, bool)],
        tree: &CacheTree,
        loose: &LooseSet,
    ) -> Vec<ObjectId> {
        let objects = self.objects();
        let is_loose = |id: &ObjectId| loose.contains(id) || !objects.in_packs(id);
        let mut ids: Vec<ObjectId> = files
            .iter()
            .filter(|(id, hashed)| loose.contains(id) || (*hashed && !objects.in_packs(id)))
            .map(|(id, _)| *id)
            .collect();
        ids.extend(tree_ids(tree).into_iter().filter(is_loose));
        ids
    }

    /// The loose ids the record names, if it describes index `checksum` and the packs as they
    /// are now. Costs reading one small file.
    pub(super) fn read_loose_record(&self, checksum: ObjectId) -> Option<Vec<ObjectId>> {
        let text = crate::fs::read_store_file(&self.git_dir().join(LOOSE_RECORD)).ok()?;
        let text = String::from_utf8(text).ok()?;
        let mut lines = text.lines();
        if lines.next() != Some(LOOSE_RECORD_HEADER) || lines.next()? != format!("index {checksum}")
        {
            return None;
        }
        let mut packs = Vec::new();
        let mut loose = Vec::new();
        for line in lines {
            match line.split_once(' ')? {
                ("pack", name) if loose.is_empty() => packs.push(name),
                ("loose", id) => loose.push(ObjectId::from_hex(id.as_bytes()).ok()?),
                _ => return None,
            }
        }
        (packs == self.objects().pack_listing()).then_some(loose)
    }

    /// Record that `loose` are the loose objects of index `checksum`. A record that cannot be
    /// written only costs the next `track` a full check, so failure is logged, not returned.
    pub(super) fn write_loose_record(&self, checksum: ObjectId, mut loose: Vec<ObjectId>) {
        loose.sort_unstable();
        loose.dedup();
        let mut text = format!("{LOOSE_RECORD_HEADER}\nindex {checksum}\n");
        for name in self.objects().pack_listing() {
            text.push_str(&format!("pack {name}\n"));
        }
        for id in loose {
            text.push_str(&format!("loose {id}\n"));
        }
        let path = self.git_dir().join(LOOSE_RECORD);
        if let Err(e) = crate::fs::write_atomically(&path, "index.tmp", text.as_bytes()) {
            tracing::warn!(error = %e, "could not write {LOOSE_RECORD}");
        }
    }
}

/// The ids of every valid tree in cache-tree `tree`.
pub(super) fn tree_ids(tree: &CacheTree) -> Vec<ObjectId> {
    let mut ids = Vec::new();
    let mut pending = vec![tree];
    while let Some(tree) = pending.pop() {
        if tree.num_entries.is_some() {
            ids.push(tree.id);
        }
        pending.extend(&tree.children);
    }
    ids
}

/// Whether the index file's trailing SHA-1 matches its content. Costs one read and one hash
/// of the file, in 256 KiB pieces.
pub(super) fn index_is_intact(path: &Path) -> bool {
    let check = || -> io::Result<bool> {
        let mut file = crate::fs::open_store_file(path, fs::OpenOptions::new().read(true))?;
        let Some(content_len) = file.metadata()?.len().checked_sub(20) else {
            return Ok(false);
        };
        let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
        let mut buf = vec![0; 256 << 10];
        let mut left = content_len;
        while left > 0 {
            let piece = &mut buf[..left.min(256 << 10) as usize];
            io::Read::read_exact(&mut file, piece)?;
            hasher.update(piece);
            left -= piece.len() as u64;
        }
        let mut trailer = [0; 20];
        io::Read::read_exact(&mut file, &mut trailer)?;
        Ok(hasher
            .try_finalize()
            .is_ok_and(|id| id.as_bytes() == trailer))
    };
    check().unwrap_or(false)
}

/// git's racy-timestamp rule: an entry whose mtime is not older than the index that recorded it
/// may have changed within the same tick without changing its stat.
pub(super) fn is_racy(entry: &Stat, index_time: stat::Time) -> bool {
    (entry.mtime.secs, entry.mtime.nsecs) >= (index_time.secs, index_time.nsecs)
}

/// How the new file list differs from the previous index.
pub(super) struct Changes {
    /// Every directory (`""` for the root) whose tree must be rebuilt.
    pub(super) dirty_dirs: HashSet<BString>,
    /// The index must be written: entries or stats changed, or racy entries need a fresh timestamp.
    pub(super) rewrite_index: bool,
    /// With `list_paths`, the paths whose entries changed, came or went, in index order.
    pub(super) paths: Vec<BString>,
}

impl Changes {
    /// Merge-join the previous entries and the new files (both in index order), listing the
    /// changed paths with `list_paths`. Costs one comparison per path.
    pub(super) fn between(
        previous: &gix::index::State,
        files: &[FileEntry],
        list_paths: bool,
    ) -> Changes {
        let mut dirty_dirs = HashSet::new();
        let mut rewrite_index = false;
        let mut paths = Vec::new();
        let mut list = |path: &BStr| {
            if list_paths {
                paths.push(path.to_owned());
            }
        };
        let mut mark = |path: &BStr| {
            let mut end = path.len();
            while let Some(slash) = path[..end].rfind_byte(b'/') {
                if !dirty_dirs.insert(BString::from(&path[..slash])) {
                    return; // its ancestors are marked already
                }
                end = slash;
            }
            dirty_dirs.insert(BString::default());
        };
        let old = previous.entries();
        let (mut i, mut j) = (0, 0);
        while i < old.len() || j < files.len() {
            let old_path = old.get(i).map(|e| e.path(previous));
            let new_path = files.get(j).map(|f| f.path.as_bstr());
            match (old_path, new_path) {
                (Some(o), Some(n)) if o == n => {
                    let (before, after) = (&old[i], &files[j]);
                    let retyped = before.id != after.id || before.mode != after.mode;
                    if retyped {
                        mark(n);
                    }
                    if retyped || after.hashed || before.stat != after.stat {
                        rewrite_index = true;
                        list(n);
                    }
                    i += 1;
                    j += 1;
                }
                (Some(o), Some(n)) if o < n => {
                    mark(o);
                    list(o);
                    i += 1;
                }
                (Some(o), None) => {
                    mark(o);
                    list(o);
                    i += 1;
                }
                (_, Some(n)) => {
                    mark(n);
                    list(n);
                    j += 1;
                }
                (None, None) => unreachable!("loop condition"),
            }
        }
        rewrite_index |= !dirty_dirs.is_empty();
        Changes {
            dirty_dirs,
            rewrite_index,
            paths,
        }
    }
}

/// An index file being written: its header and entries are written beside it (see
/// [`crate::fs::Rewrite`]) and hashed; [`finish`](Self::finish) adds the cache-tree and the
/// checksum and moves it into place. Dropped unfinished, the index stays as it was.
pub(super) struct IndexWrite {
    file: crate::fs::Rewrite,
    hasher: gix::hash::Hasher,
    /// Bytes not yet hashed and written.
    pending: Vec<u8>,
}

/// What [`IndexWrite`] hashes and writes at a time.
const INDEX_PIECE: usize = 256 << 10;

impl IndexWrite {
    /// Start rewriting the index at `path` with `files` (in index order) as its entries: version
    /// 2, laid out as git lays them out (`gitformat-index`): per entry the stat fields, mode, id
    /// and flags big-endian, then the path and 1–8 NULs up to a multiple of 8 bytes. Streamed
    /// in [`INDEX_PIECE`]s, so no copy of the whole index is made. Costs one hash and one write
    /// of the entries, about 0.1 µs a file beyond the hash (a `gix::index::State` built to
    /// serialise them cost 4× that, before writing).
    pub(super) fn start(path: &Path, files: &[FileEntry]) -> Result<IndexWrite> {
        let count = u32::try_from(files.len())
            .map_err(|_| Error::store(path, format!("{} files is too many", files.len())))?;
        let mut write = IndexWrite {
            file: crate::fs::Rewrite::start(path, "index.tmp")?,
            hasher: gix::hash::hasher(gix::hash::Kind::Sha1),
            pending: Vec::with_capacity(INDEX_PIECE + 8192),
        };
        write.pending.extend_from_slice(b"DIRC");
        write.pending.extend_from_slice(&2u32.to_be_bytes());
        write.pending.extend_from_slice(&count.to_be_bytes());
        for file in files {
            push_entry(&mut write.pending, file);
            if write.pending.len() >= INDEX_PIECE {
                write.flush()?;
            }
        }
        Ok(write)
    }

    /// Complete the index with the exact cache-tree `tree` and the checksum, and move it into
    /// place (no `index.lock` is involved, so a killed process leaves nothing that blocks the
    /// next one). Returns the checksum.
    pub(super) fn finish(mut self, tree: &CacheTree) -> Result<ObjectId> {
        tree.write_to(&mut self.pending)
            .expect("writing to memory succeeds");
        self.flush()?;
        let checksum = self
            .hasher
            .try_finalize()
            .map_err(|e| Error::store("index", e))?;
        self.file.write_all(checksum.as_bytes())?;
        self.file.finish()?;
        Ok(checksum)
    }

    /// Hash and write what is pending.
    fn flush(&mut self) -> Result<()> {
        self.hasher.update(&self.pending);
        self.file.write_all(&self.pending)?;
        self.pending.clear();
        Ok(())
    }
}

/// Append `file`'s index entry (see [`IndexWrite::start`]) to `out`.
fn push_entry(out: &mut Vec<u8>, file: &FileEntry) {
    const FIXED: usize = 62; // the fields before the path
    let stat = &file.stat;
    for field in [
        stat.ctime.secs,
        stat.ctime.nsecs,
        stat.mtime.secs,
        stat.mtime.nsecs,
        stat.dev,
        stat.ino,
        file.mode.bits(),
        stat.uid,
        stat.gid,
        stat.size,
    ] {
        out.extend_from_slice(&field.to_be_bytes());
    }
    out.extend_from_slice(file.id.as_bytes());
    // The name length, or 0xfff for "longer": no other flag is set in a snapshot's entries.
    let flags = file.path.len().min(0xfff) as u16;
    out.extend_from_slice(&flags.to_be_bytes());
    out.extend_from_slice(&file.path);
    let padded = (FIXED + file.path.len() + 8) & !7;
    out.resize(out.len() + padded - FIXED - file.path.len(), 0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use gix::index::entry::Mode;

    /// An index written by [`IndexWrite`] is byte for byte what gix's own writer makes of the
    /// same entries and cache-tree, for short and over-long names, every mode, stat fields using
    /// all 32 bits, and more entries than one piece holds.
    #[test]
    fn index_write_matches_gix() {
        let long = "d/".repeat(2100) + "f";
        let many: Vec<String> = (0..5000).map(|n| format!("many/{n:05}")).collect();
        let names = ["a", "ab", "abcdefg", "dir/sub/x.rs", "seven77", &long];
        let names: Vec<&str> = names
            .into_iter()
            .chain(many.iter().map(|n| n.as_str()))
            .collect();
        let modes = [Mode::FILE, Mode::FILE_EXECUTABLE, Mode::SYMLINK];
        let files: Vec<FileEntry> = names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let n = i as u32 % 251;
                let time = stat::Time {
                    secs: u32::MAX - n,
                    nsecs: 999_999_999 - n,
                };
                FileEntry {
                    path: (*name).into(),
                    stat: Stat {
                        mtime: time,
                        ctime: stat::Time { secs: n, nsecs: 7 },
                        dev: 0x8000_0001 + n,
                        ino: u32::MAX / (n + 1),
                        uid: 1000,
                        gid: u32::MAX,
                        size: 0xdead_beef ^ n,
                    },
                    id: ObjectId::from_bytes_or_panic(&[n as u8 + 1; 20]),
                    mode: modes[i % modes.len()],
                    perm: 0o644,
                    links: 1,
                    hashed: false,
                }
            })
            .collect();
        let mut state = gix::index::State::new(gix::hash::Kind::Sha1);
        for file in &files {
            let flags = gix::index::entry::Flags::empty();
            state.dangerously_push_entry(file.stat, file.id, flags, file.mode, file.path.as_ref());
        }
        let tree = CacheTree {
            name: Default::default(),
            id: ObjectId::from_bytes_or_panic(&[9; 20]),
            num_entries: Some(files.len() as u32),
            children: Vec::new(),
        };
        let mut expected = Vec::new();
        let options = gix::index::write::Options {
            extensions: gix::index::write::Extensions::None,
            skip_hash: false,
        };
        state.write_to(&mut expected, options).unwrap();
        tree.write_to(&mut expected).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index");
        // Twice: the second is written over the spare the first made (a longer file).
        fs::write(
            dir.path().join("index.spare"),
            vec![b'x'; expected.len() + 100],
        )
        .unwrap();
        for _ in 0..2 {
            let checksum = IndexWrite::start(&path, &files)
                .unwrap()
                .finish(&tree)
                .unwrap();
            let written = fs::read(&path).unwrap();
            assert_eq!(written[..written.len() - 20], expected[..]);
            assert_eq!(&written[written.len() - 20..], checksum.as_bytes());
            let read =
                gix::index::File::at(&path, gix::hash::Kind::Sha1, false, Default::default())
                    .expect("gix reads it, checksum verified");
            assert_eq!(read.entries().len(), files.len());
            assert_eq!(read.tree(), Some(&tree));
        }
    }
}
