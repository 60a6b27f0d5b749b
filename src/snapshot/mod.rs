//! `track`: snapshot the project directory as a git tree, fast through a stat cache.
//!
//! The loop, after jj's `local_working_copy` and git's own index:
//! 1. Walk the project in parallel, one rayon task per directory, applying ignore rules as it
//!    descends; one `fstatat` per file, none per directory.
//! 2. Compare each file's stat with its entry in the store's index (the previous snapshot). An
//!    entry is reused, without reading the file, when mode and stat match and the entry is not
//!    racy (its mtime is not older than the index file itself: git's racy-timestamp rule).
//!    Other files are read, hashed and written as blobs in the same parallel task.
//! 3. Rebuild only the trees on changed paths: every other directory's tree id comes from the
//!    index's cache-tree (git's `TREE` extension), which this module keeps exact.
//! 4. Write the index back (atomically) only when something changed.
//!
//! Meanwhile, on the other core, the cache itself is verified: the index's checksum, and that
//! the store still holds every object it names. A snapshot that relied on a damaged cache is
//! taken again without it (see `docs/design.md`, "The snapshot loop").

use std::collections::HashSet;
use std::fs;
use std::io::{self, Write};
use std::ops::Range;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use gix::bstr::{BStr, BString, ByteSlice};
use gix::index::entry::{stat, Mode, Stat};
use gix::index::extension::Tree as CacheTree;
use gix::ObjectId;
use rayon::prelude::*;
use rustix::fs::{statat, AtFlags, FileType, OFlags};
use serde::Serialize;

pub(crate) mod ignore;
pub(crate) mod visibility;

use crate::error::{Error, Result};
use crate::store::objects::{lock, ObjectWriter};
use crate::store::Store;
use ignore::{DirRules, Excludes, Rules};

/// Options for [`Store::track`].
#[derive(Debug, Clone, Default)]
pub struct TrackOptions {
    /// Files not in the previous snapshot and larger than this are left out. `None`: the store's
    /// `rewind.maxFileSize` (default 2 MiB).
    pub max_file_size: Option<u64>,
}

/// What [`Store::track`] produced.
#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    /// The id of the snapshot's root tree.
    #[serde(serialize_with = "serialize_id")]
    pub hash: ObjectId,
    /// How many files (blobs and symlinks) the tree holds.
    pub files: usize,
    /// Everything left out for a reason other than ignore rules, in path order.
    pub skipped: Vec<Skipped>,
    /// Files whose permission bits are narrower than 0644 (0600, 0640, 0400, ...), and
    /// directories narrower than 0755 (their path ends in `/`): recorded with the snapshot, so
    /// a restore never makes them more permissive than they were.
    #[serde(skip)]
    pub(crate) private_modes: Vec<(BString, u32)>,
    /// Paths ignored by rules from outside the project (global excludes, `info/exclude`,
    /// `.gitignore` files above it): recorded, since no snapshot holds those rules.
    #[serde(skip)]
    pub(crate) hidden_outside: Vec<BString>,
}

/// A path left out of a snapshot, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    /// Project-relative, `/`-separated (lossy only if the name is not UTF-8).
    #[serde(serialize_with = "serialize_path")]
    pub path: BString,
    pub reason: SkipReason,
    /// The error, for `unreadable`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

fn serialize_id<S: serde::Serializer>(id: &ObjectId, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(id)
}

/// A path in JSON: lossy only there (a name that is not UTF-8 gets U+FFFD); the library and
/// human output keep its bytes.
pub(crate) fn serialize_path<S: serde::Serializer>(
    path: &BString,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.serialize_str(&path.to_str_lossy())
}

/// A list of paths in JSON, each as [`serialize_path`] writes it.
pub(crate) fn serialize_paths<S: serde::Serializer>(
    paths: &[BString],
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_seq(paths.iter().map(|p| p.to_str_lossy()))
}

/// Why a path is not in a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// A new file above the size cap.
    TooLarge,
    /// A directory holding a `.git` directory or file: another repository, never entered.
    NestedRepo,
    /// A FIFO, socket or device: never opened.
    SpecialFile,
    /// A file or directory that could not be read.
    Unreadable,
    /// rewind's own data: a data directory or a store (it holds the data marker file).
    RewindData,
}

impl SkipReason {
    /// The reason as `--json` and the store's records spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::TooLarge => "too_large",
            SkipReason::NestedRepo => "nested_repo",
            SkipReason::SpecialFile => "special_file",
            SkipReason::Unreadable => "unreadable",
            SkipReason::RewindData => "rewind_data",
        }
    }
}

/// One file of the new snapshot.
struct FileEntry {
    path: BString,
    stat: Stat,
    id: ObjectId,
    mode: Mode,
    /// Permission bits (`st_mode & 0o7777`).
    perm: u32,
    /// The file was read (its stat did not prove it unchanged).
    hashed: bool,
}

/// One item of a directory's walked contents, in index order.
enum Part {
    File(FileEntry),
    Skipped(Skipped),
    /// A subdirectory: the id of its own directory job.
    Dir(usize),
    /// A path ignored by rules from outside the project (after the directory's other parts).
    Hidden(BString),
    /// This directory's permission bits, narrower than 0755 (after its other parts).
    PrivateDir(BString, u32),
}

/// Join the directories' parts, each listed by its job id (the root is 0), into one list of
/// files and one of skipped paths in index order. An explicit stack of the directories being
/// read, so depth costs heap, not thread stack; each entry moves once.
fn assemble(
    mut dirs: Vec<Option<Vec<Part>>>,
    files: &mut Vec<FileEntry>,
    skipped: &mut Vec<Skipped>,
    (hidden, private_dirs): (&mut Vec<BString>, &mut Vec<(BString, u32)>),
) {
    let mut take = |id: usize| dirs.get_mut(id).and_then(Option::take).unwrap_or_default();
    let mut stack = vec![take(0).into_iter()];
    while let Some(parts) = stack.last_mut() {
        match parts.next() {
            Some(Part::File(file)) => files.push(file),
            Some(Part::Skipped(skip)) => skipped.push(skip),
            Some(Part::Hidden(path)) => hidden.push(path),
            Some(Part::PrivateDir(path, perm)) => private_dirs.push((path, perm)),
            Some(Part::Dir(id)) => stack.push(take(id).into_iter()),
            None => {
                stack.pop();
            }
        }
    }
}

/// A file after its `stat`: settled, or to be read.
enum Looked {
    Settled(Part),
    Vanished,
    Read {
        path: BString,
        /// Where the file's name starts in `path`.
        name_start: usize,
        stat: Stat,
        mode: Mode,
        perm: u32,
        size: u64,
        /// The cached entry's id and mode, if the file was in the previous snapshot.
        previous: Option<(ObjectId, Mode)>,
    },
}

/// Stat comparison as git does it on Linux, plus nanoseconds (stricter, so only safer).
const STAT_OPTIONS: stat::Options = stat::Options {
    trust_ctime: true,
    check_stat: true,
    use_nsec: true,
    use_stdev: false,
};

/// At most this many paths hidden by rules from outside the project are recorded with a
/// snapshot (beyond it, restore relies on the rules in force when it runs).
const MAX_RECORDED_HIDDEN: usize = 10_000;

/// Files up to this size are read whole; larger ones are streamed.
const READ_WHOLE_LIMIT: u64 = 32 * 1024 * 1024;

impl Store {
    /// Snapshot the project directory: write its tree (and new blobs) into the store and return
    /// the tree id with what was left out. Holds the store lock for the whole operation.
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), "/tmp/rewind".as_ref())?;
    /// let snapshot = store.track(&rewind::TrackOptions::default())?;
    /// println!("{} holds {} files", snapshot.hash, snapshot.files);
    /// for skipped in &snapshot.skipped {
    ///     println!("left out {} ({:?})", skipped.path, skipped.reason);
    /// }
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn track(&self, options: &TrackOptions) -> Result<Snapshot> {
        let _lock = self.lock()?;
        self.track_locked(options)
    }

    /// [`track`](Self::track) for a caller that holds the store lock already.
    pub(crate) fn track_locked(&self, options: &TrackOptions) -> Result<Snapshot> {
        Ok(self
            .snapshot_locked(options, None)?
            .expect("runs to the end without a probe"))
    }

    /// Whether the project differs from snapshot `hash` now. When `hash` is the last snapshot,
    /// the walk stops at the first file that differs; otherwise it costs a full [`track`](Self::track).
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), "/tmp/rewind".as_ref())?;
    /// let before = store.track(&Default::default())?.hash.to_string();
    /// if store.has_changes(&before)? {
    ///     println!("offer undo");
    /// }
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn has_changes(&self, hash: &str) -> Result<bool> {
        let hash = self.resolve_tree(hash)?;
        let _lock = self.lock()?;
        Ok(
            match self.snapshot_locked(&TrackOptions::default(), Some(hash))? {
                Some(snapshot) => snapshot.hash != hash,
                None => true,
            },
        )
    }

    /// Snapshot the project. With `probe` equal to the last snapshot's tree, stop as soon as a
    /// file differs from it and return `None` (the index is then left as it was).
    fn snapshot_locked(
        &self,
        options: &TrackOptions,
        probe: Option<ObjectId>,
    ) -> Result<Option<Snapshot>> {
        self.sweep_temp_files();
        let index_path = self.git_dir().join("index");
        self.snapshot_with(&index_path, load_index(&index_path), None, options, probe)
    }

    /// [`snapshot_locked`](Self::snapshot_locked) from stat cache `cache`, read from
    /// `index_path`. The cache is verified while the walk runs (unless `verified` gives the loose
    /// objects a verification found), and a snapshot that relied on a damaged cache is taken again.
    fn snapshot_with(
        &self,
        index_path: &Path,
        mut cache: Cache,
        verified: Option<LooseSet>,
        options: &TrackOptions,
        probe: Option<ObjectId>,
    ) -> Result<Option<Snapshot>> {
        // With no stat cache, (nearly) every object is new: one pack beats thousands of files.
        let first = cache.state.entries().is_empty();
        if first {
            self.objects().start_pack()?;
        }
        self.progress()
            .start("snapshotting", cache.state.entries().len() as u64);
        let cached_root = cache.state.tree().and_then(|t| t.num_entries.map(|_| t.id));
        let stop_at_change =
            (probe.is_some() && probe == cached_root).then(|| AtomicBool::new(false));
        let check_needed = !first && verified.is_none();
        let (check, outcome) = rayon::join(
            || match check_needed {
                true => self.check_cache(index_path, &cache),
                false => CacheCheck::Checked {
                    loose: verified.unwrap_or_default(),
                    lost: Vec::new(),
                    record_stale: false,
                },
            },
            || self.scan(&cache.state, cache.time, options, stop_at_change),
        );
        let (loose, record_stale) = match check {
            CacheCheck::Damaged => {
                tracing::warn!(path = %index_path.display(), "stat cache damaged; snapshot taken again");
                fs::remove_file(index_path)
                    .map_err(|e| Error::io("removing damaged index", index_path, e))?;
                return self.snapshot_locked(options, probe);
            }
            CacheCheck::Checked { loose, lost, .. } if !lost.is_empty() => {
                tracing::warn!(
                    objects = lost.len(),
                    "stat cache names lost or damaged objects; snapshot taken again"
                );
                for id in &lost {
                    self.objects().remove_loose(id)?;
                }
                let lost: HashSet<ObjectId> = lost.into_iter().collect();
                cache
                    .state
                    .remove_entries(|_, _, entry| lost.contains(&entry.id));
                cache.state.remove_tree();
                return self.snapshot_with(index_path, cache, Some(loose), options, probe);
            }
            CacheCheck::Checked {
                loose,
                record_stale,
                ..
            } => (loose, record_stale),
        };
        if first {
            self.objects().finish_pack(outcome.is_ok())?;
        }
        let Some(Scanned {
            files,
            private_modes,
            hidden_outside,
            skipped,
            tree,
            new_index,
        }) = outcome?
        else {
            return Ok(None);
        };
        if !self.objects().contains(&tree.id) {
            return Err(Error::store(
                self.git_dir(),
                format!("tree {} of the last snapshot is missing", tree.id),
            ));
        }
        if let Some(NewIndex { entries, ids }) = new_index {
            let checksum = write_index(index_path, entries, &tree)?;
            let loose = self.loose_ids(&ids, &tree, &loose);
            self.write_loose_record(checksum, loose);
        } else if let Some(checksum) = cache.checksum.filter(|_| record_stale) {
            self.write_loose_record(checksum, loose.into_iter().collect());
        }
        let snapshot = Snapshot {
            hash: tree.id,
            files,
            private_modes,
            hidden_outside,
            skipped,
        };
        self.record_snapshot(&snapshot)?;
        tracing::debug!(hash = %snapshot.hash, files, skipped = snapshot.skipped.len(), "snapshot taken");
        Ok(Some(snapshot))
    }

    /// Walk the project against the `previous` stat cache and build the snapshot's trees;
    /// `None` when `stop_at_change` was given and a change stopped the walk.
    fn scan(
        &self,
        previous: &gix::index::State,
        previous_time: stat::Time,
        options: &TrackOptions,
        stop_at_change: Option<AtomicBool>,
    ) -> Result<Option<Scanned>> {
        let walk = Walk {
            root: self.project(),
            progress: self.progress(),
            stop_at_change,
            previous,
            previous_time,
            max_file_size: options
                .max_file_size
                .unwrap_or_else(|| self.max_file_size()),
            excludes: Excludes::load(self.project()),
            objects: self.objects(),
            next_id: AtomicUsize::new(1),
            done: Mutex::new(Vec::new()),
            failure: Mutex::new(None),
            failed: AtomicBool::new(false),
            held: AtomicUsize::new(0),
        };
        let Some(dirs) = walk.run(previous.entries().len())? else {
            return Ok(None);
        };
        let mut files = Vec::with_capacity(previous.entries().len() + 64);
        let mut skipped = Vec::new();
        let mut hidden_outside = Vec::new();
        let mut private_dirs = Vec::new();
        assemble(
            dirs,
            &mut files,
            &mut skipped,
            (&mut hidden_outside, &mut private_dirs),
        );
        hidden_outside.sort_unstable();
        hidden_outside.truncate(MAX_RECORDED_HIDDEN);

        let changes = Changes::between(previous, &files);
        let rewrite_index = changes.rewrite_index || previous.tree().is_none();
        // Trees and the index's entries are independent: build one while serialising the other.
        let (tree, new_index) = rayon::join(
            || match previous.tree() {
                Some(cached)
                    if changes.dirty_dirs.is_empty()
                        && cached.num_entries == Some(files.len() as u32) =>
                {
                    Ok(cached.clone())
                }
                cached => TreeBuilder {
                    files: &files,
                    dirty: &changes.dirty_dirs,
                    objects: self.objects(),
                }
                .build(cached),
            },
            || {
                rewrite_index.then(|| {
                    Ok(NewIndex {
                        entries: index_entries(&files)?,
                        ids: files.iter().map(|f| (f.id, f.hashed)).collect(),
                    })
                })
            },
        );
        // Narrower than 0644 (directories: 0755): a restore must make these as private as
        // they were. A directory's path ends in `/`.
        let mut private_modes: Vec<(BString, u32)> = files
            .iter()
            .filter(|f| f.mode != Mode::SYMLINK && f.perm & 0o644 != 0o644)
            .map(|f| (f.path.clone(), f.perm))
            .collect();
        private_modes.extend(private_dirs.into_iter().map(|(mut dir, perm)| {
            dir.push(b'/');
            (dir, perm)
        }));
        Ok(Some(Scanned {
            private_modes,
            hidden_outside,
            files: files.len(),
            skipped,
            tree: tree?,
            new_index: new_index.transpose()?,
        }))
    }
}

/// A walked project: how many files, what was left out, and its cache-tree.
struct Scanned {
    files: usize,
    private_modes: Vec<(BString, u32)>,
    hidden_outside: Vec<BString>,
    skipped: Vec<Skipped>,
    tree: CacheTree,
    /// The index to write, when it must be rewritten.
    new_index: Option<NewIndex>,
}

/// An index to write: its serialised entries, and each file's id with whether it was hashed.
struct NewIndex {
    entries: Vec<u8>,
    ids: Vec<(ObjectId, bool)>,
}

/// Object ids, hashed by their first bytes (they are SHA-1 already).
type LooseSet = gix::hashtable::HashSet<ObjectId>;

/// The stat cache a snapshot starts from.
struct Cache {
    state: gix::index::State,
    /// When the index file was written: for git's racy-timestamp rule, and the time after
    /// which a change to a loose object it names is someone else's.
    time: stat::Time,
    /// The index file's trailing checksum, naming this version of it.
    checksum: Option<ObjectId>,
}

/// Read the stat cache; a missing or unreadable one is an empty cache (every file is then hashed
/// again, so the snapshot stays right). Its checksum is checked apart, by [`index_is_intact`],
/// concurrently with the walk.
fn load_index(path: &Path) -> Cache {
    match gix::index::File::at(path, gix::hash::Kind::Sha1, true, Default::default()) {
        Ok(file) => {
            let time = file.timestamp().into();
            let checksum = file.checksum();
            let (state, _) = file.into_parts();
            Cache {
                state,
                time,
                checksum,
            }
        }
        Err(_) => Cache {
            state: gix::index::State::new(gix::hash::Kind::Sha1),
            time: Default::default(),
            checksum: None,
        },
    }
}

/// What [`Store::check_cache`] found.
enum CacheCheck {
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
const LOOSE_RECORD: &str = "rewind-index-objects";
const LOOSE_RECORD_HEADER: &str = "rewind index objects 1";

impl Store {
    /// Verify the stat cache: its checksum, and that the store still holds every object it
    /// names (blobs, and the trees of its cache-tree). Costs one read and hash of the index, then
    /// [`ObjectWriter::verify_loose`] of the loose objects the record names, or, without a
    /// record that holds, a pack lookup per named object first.
    fn check_cache(&self, index_path: &Path, cache: &Cache) -> CacheCheck {
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
    fn loose_ids(
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
    fn read_loose_record(&self, checksum: ObjectId) -> Option<Vec<ObjectId>> {
        let text = fs::read_to_string(self.git_dir().join(LOOSE_RECORD)).ok()?;
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
    fn write_loose_record(&self, checksum: ObjectId, mut loose: Vec<ObjectId>) {
        loose.sort_unstable();
        loose.dedup();
        let mut text = format!("{LOOSE_RECORD_HEADER}\nindex {checksum}\n");
        for name in self.objects().pack_listing() {
            text.push_str(&format!("pack {name}\n"));
        }
        for id in loose {
            text.push_str(&format!("loose {id}\n"));
        }
        let write = || -> io::Result<()> {
            let mut temp = tempfile::Builder::new()
                .prefix("index.tmp")
                .tempfile_in(self.git_dir())?;
            temp.write_all(text.as_bytes())?;
            temp.persist(self.git_dir().join(LOOSE_RECORD))?;
            Ok(())
        };
        if let Err(e) = write() {
            tracing::warn!(error = %e, "could not write {LOOSE_RECORD}");
        }
    }
}

/// The ids of every valid tree in cache-tree `tree`.
fn tree_ids(tree: &CacheTree) -> Vec<ObjectId> {
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
fn index_is_intact(path: &Path) -> bool {
    let check = || -> io::Result<bool> {
        let mut file = fs::File::open(path)?;
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

/// Everything the parallel walk shares.
struct Walk<'a> {
    root: &'a Path,
    progress: &'a crate::store::Progress,
    /// Set when a file differs from the previous snapshot, if the caller only needs a yes/no:
    /// the walk then skips the directories it has not started.
    stop_at_change: Option<AtomicBool>,
    previous: &'a gix::index::State,
    previous_time: gix::index::entry::stat::Time,
    max_file_size: u64,
    excludes: Excludes,
    objects: &'a ObjectWriter,
    /// The id the next directory job gets (the root's is 0).
    next_id: AtomicUsize,
    /// Each finished directory job's id and parts.
    done: Mutex<Vec<(usize, Vec<Part>)>>,
    /// The first error of any job; `failed` tells the others to stop.
    failure: Mutex<Option<Error>>,
    failed: AtomicBool,
    /// How many [`HeldDir`]s are open.
    held: AtomicUsize,
}

/// At most this many directories stay open for subdirectories still to be opened (a deep tree
/// with a pending sibling at every level would otherwise hold one descriptor per level, and
/// run out at the usual limit of 1,024). Past it, subdirectories are opened one component at a
/// time from the nearest ancestor still open.
const HELD_DIRS: usize = 128;

/// A directory kept open for its subdirectories' jobs; counted in [`Walk::held`].
struct HeldDir<'w> {
    dir: rustix::fs::Dir,
    held: &'w AtomicUsize,
}

impl Drop for HeldDir<'_> {
    fn drop(&mut self) {
        self.held.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A subdirectory as a directory job lists it: (path, ignored), its range of previous index
/// entries, and its job id.
type DirItem = (((BString, bool), Option<Range<usize>>), usize);

/// A directory to walk: job `id`, opened when its turn comes below `anchor`, an ancestor (its
/// parent, unless too many directories are held open already).
struct DirJob<'w> {
    id: usize,
    /// Project-relative path.
    rel: BString,
    /// The nearest ancestor held open (`None`: open from the project root's path), and where
    /// the part of `rel` below it starts.
    anchor: Option<Arc<HeldDir<'w>>>,
    below_anchor: usize,
    rules: Arc<DirRules>,
    /// The directory is ignored: keep only files the project's own index tracks.
    tracked_only: bool,
    /// The range of previous index entries below `rel`.
    cached: Range<usize>,
}

impl Walk<'_> {
    /// Walk the whole project: one rayon job per directory, each spawning its subdirectories'
    /// jobs, so no thread stack grows with depth. `previous_len` is the stat cache's length.
    /// Returns every directory's parts by job id, or `None` when a change stopped the walk.
    fn run(&self, previous_len: usize) -> Result<Option<Vec<Option<Vec<Part>>>>> {
        let root = DirJob {
            id: 0,
            rel: BString::default(),
            anchor: None,
            below_anchor: 0,
            rules: DirRules::root(),
            tracked_only: false,
            cached: 0..previous_len,
        };
        rayon::scope(|scope| self.spawn(scope, root));
        if let Some(error) = lock(&self.failure).take() {
            return Err(error);
        }
        if self.halted() {
            return Ok(None);
        }
        let done = std::mem::take(&mut *lock(&self.done));
        let mut dirs: Vec<Option<Vec<Part>>> = Vec::new();
        dirs.resize_with(self.next_id.load(Ordering::Relaxed), || None);
        for (id, parts) in done {
            dirs[id] = Some(parts);
        }
        Ok(Some(dirs))
    }

    /// Queue `job` on the walk's scope; its result lands in `done`, its error in `failure`.
    fn spawn<'s>(&'s self, scope: &rayon::Scope<'s>, job: DirJob<'s>) {
        scope.spawn(move |scope| {
            if self.halted() {
                return;
            }
            let id = job.id;
            match self.dir(scope, job) {
                Ok(parts) => lock(&self.done).push((id, parts)),
                Err(error) => {
                    self.failed.store(true, Ordering::Relaxed);
                    lock(&self.failure).get_or_insert(error);
                }
            }
        });
    }

    /// Whether the walk should start no more directories: a job failed, or a change was found.
    fn halted(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
            || self
                .stop_at_change
                .as_ref()
                .is_some_and(|stop| stop.load(Ordering::Relaxed))
    }

    /// Snapshot the files of directory `job` and spawn a job for each of its subdirectories.
    /// Returns its parts in index order, each subdirectory as the id of its job.
    /// Costs one `openat`, one `readdir` and one `fstatat` per file, plus reading the files that
    /// changed.
    fn dir<'s>(&'s self, scope: &rayon::Scope<'s>, job: DirJob<'s>) -> Result<Vec<Part>> {
        let DirJob {
            rel,
            anchor,
            below_anchor,
            rules,
            tracked_only,
            cached,
            ..
        } = job;
        let opened = self.open(anchor.as_deref(), &rel[below_anchor..]);
        let skipped = |rel, reason, detail| {
            vec![Part::Skipped(Skipped {
                path: rel,
                reason,
                detail,
            })]
        };
        let mut entries = match opened.and_then(rustix::fs::Dir::new) {
            Ok(entries) => entries,
            // Gone since its parent was read: this snapshot leaves it out.
            Err(rustix::io::Errno::NOENT) if !rel.is_empty() => return Ok(Vec::new()),
            Err(e) if rel.is_empty() => {
                return Err(Error::io("reading", self.root, e.into()));
            }
            Err(e) => {
                let detail = io::Error::from(e).to_string();
                return Ok(skipped(rel, SkipReason::Unreadable, Some(detail)));
            }
        };
        let mut hidden = Vec::new();
        // A directory narrower than 0755 (0700, 0750): recorded, so a restore that makes it
        // again makes it as private. One `fstat`.
        if let Some(perm) = entries.fd().ok().and_then(|fd| rustix::fs::fstat(fd).ok()) {
            let perm = perm.st_mode & 0o7777;
            if !rel.is_empty() && perm & 0o755 != 0o755 {
                hidden.push(Part::PrivateDir(rel.clone(), perm));
            }
        }
        // (path, where its name starts, its type if the directory entry says)
        let mut listed: Vec<(BString, usize, FileType)> = Vec::new();
        let mut gitignore = false;
        let name_start = if rel.is_empty() { 0 } else { rel.len() + 1 };
        for entry in entries.by_ref() {
            let Ok(entry) = entry else { continue };
            let name = entry.file_name().to_bytes();
            match name {
                b"." | b".." => continue,
                b".git" if rel.is_empty() => continue, // the project's own repository
                b".git" => return Ok(skipped(rel, SkipReason::NestedRepo, None)),
                _ if name == crate::store::DATA_MARKER.as_bytes() => {
                    return Ok(skipped(rel, SkipReason::RewindData, None))
                }
                _ => {}
            }
            let file_type = entry.file_type();
            gitignore |= name == b".gitignore" && file_type == FileType::RegularFile;
            listed.push((join(rel.as_ref(), name), name_start, file_type));
        }
        let dir_fd = entries.fd().expect("an open directory has a descriptor");
        let rules = if gitignore && !tracked_only {
            let source = self.abs(rel.as_ref()).join(".gitignore");
            DirRules::child(&rules, dir_fd, &source, rel.as_ref())
        } else {
            rules
        };

        let mut files = Vec::with_capacity(listed.len());
        let mut dirs = Vec::new();
        for (child, name_start, file_type) in listed {
            let file_type = match file_type {
                // Some filesystems leave the type out of directory entries.
                FileType::Unknown => {
                    match statat(dir_fd, &child[name_start..], AtFlags::SYMLINK_NOFOLLOW) {
                        Ok(st) => FileType::from_raw_mode(st.st_mode),
                        Err(_) => continue, // vanished; an unreadable file is reported by `look`
                    }
                }
                known => known,
            };
            let is_dir = file_type == FileType::Directory;
            let by = match tracked_only {
                true => None,
                false => self.excludes.ignored_by(&rules, child.as_ref(), is_dir),
            };
            let ignored = tracked_only || by.is_some();
            if by == Some(Rules::Outside) {
                hidden.push(Part::Hidden(child.clone()));
            }
            if is_dir {
                if !ignored || self.excludes.tracks_below(child.as_ref()) {
                    dirs.push((child, ignored));
                }
            } else if !ignored || self.excludes.is_tracked(child.as_ref()) {
                files.push((child, name_start));
            }
        }
        // Files sort by bytes, directories as "name/": the index's order for both.
        files.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        dirs.sort_unstable_by(|a, b| gix::objs::tree::name_order(&a.0, true, &b.0, true));

        let (cached_files, cached_dirs) = self.split_cached(cached, rel.len());
        let as_dirs = |a: &[u8], b: &[u8]| gix::objs::tree::name_order(a, true, b, true);
        let files = pair_sorted(files, &cached_files, |(p, _)| p.as_slice(), <[u8]>::cmp);
        let dirs = pair_sorted(dirs, &cached_dirs, |(p, ..)| p.as_slice(), as_dirs);
        let looked: Vec<Looked> = files
            .into_par_iter()
            .with_min_len(128)
            .map(|((child, name_start), cached)| self.look(child, name_start, dir_fd, cached))
            .collect();
        let read = |looked: Looked| match looked {
            Looked::Read {
                path,
                name_start,
                stat,
                mode,
                perm,
                size,
                previous,
            } => {
                let part = self.read(path, dir_fd, name_start, stat, (mode, perm), size)?;
                if let (Some(stop), Some(Part::File(file))) = (&self.stop_at_change, &part) {
                    if previous != Some((file.id, file.mode)) {
                        stop.store(true, Ordering::Relaxed);
                    }
                }
                Ok(part)
            }
            Looked::Settled(part) => Ok(Some(part)),
            Looked::Vanished => Ok(None),
        };
        let file_parts: Vec<Part> = if looked.iter().any(|l| matches!(l, Looked::Read { .. })) {
            let parts: Result<Vec<_>> = looked.into_par_iter().map(read).collect();
            parts?.into_iter().flatten().collect()
        } else {
            let settled = |l| match l {
                Looked::Settled(part) => Some(part),
                _ => None,
            };
            looked.into_iter().filter_map(settled).collect()
        };

        // Merge files and subdirectories (both sorted) into index order, giving each
        // subdirectory the next job id; its job runs once this directory is done with its fd.
        // The subdirectories open below this directory if it may stay open, else below its anchor.
        let (anchor, below_anchor) = match dirs.len() {
            0 => (None, 0),
            _ if self.held.fetch_add(1, Ordering::Relaxed) < HELD_DIRS => {
                let held = HeldDir {
                    dir: entries,
                    held: &self.held,
                };
                (Some(Arc::new(held)), name_start)
            }
            _ => {
                self.held.fetch_sub(1, Ordering::Relaxed);
                (anchor, below_anchor)
            }
        };
        let first_id = self.next_id.fetch_add(dirs.len(), Ordering::Relaxed);
        let mut parts = Vec::with_capacity(file_parts.len() + dirs.len());
        let mut jobs = Vec::with_capacity(dirs.len());
        let mut dirs = dirs.into_iter().zip(first_id..).peekable();
        let mut push_dir = |(((child, ignored), cached), id): DirItem, parts: &mut Vec<Part>| {
            parts.push(Part::Dir(id));
            jobs.push(DirJob {
                id,
                rel: child,
                anchor: anchor.clone(),
                below_anchor,
                rules: rules.clone(),
                tracked_only: ignored,
                cached: cached.unwrap_or(0..0),
            });
        };
        for part in file_parts {
            let path = match &part {
                Part::File(file) => &file.path,
                Part::Skipped(skip) => &skip.path,
                Part::Dir(_) | Part::Hidden(_) | Part::PrivateDir(..) => {
                    unreachable!("files only")
                }
            };
            while let Some(dir) = dirs.next_if(|(((dir, ..), _), _)| {
                gix::objs::tree::name_order(dir, true, path, false).is_le()
            }) {
                push_dir(dir, &mut parts);
            }
            parts.push(part);
        }
        dirs.for_each(|dir| push_dir(dir, &mut parts));
        parts.append(&mut hidden);
        for job in jobs {
            self.spawn(scope, job);
        }
        Ok(parts)
    }

    /// Open directory `path` below `anchor` one component at a time, never following a
    /// symlink; the project root when there is no anchor (`path` is then the rest below it).
    /// Costs one `openat` per component: one, unless directories ran over [`HELD_DIRS`].
    fn open(&self, anchor: Option<&HeldDir<'_>>, path: &[u8]) -> rustix::io::Result<OwnedFd> {
        let mut names = path.split(|&b| b == b'/').filter(|name| !name.is_empty());
        let mut fd = match anchor {
            Some(anchor) => {
                let first = names.next().ok_or(rustix::io::Errno::INVAL)?;
                open_dir(anchor.dir.fd()?, first)?
            }
            None => open_dir(rustix::fs::CWD, self.root.as_os_str().as_bytes())?,
        };
        for name in names {
            fd = open_dir(fd.as_fd(), name)?;
        }
        Ok(fd)
    }

    /// The absolute path of project path `rel`.
    fn abs(&self, rel: &BStr) -> PathBuf {
        self.root.join(std::ffi::OsStr::from_bytes(rel))
    }

    /// Split `range`, the previous index entries below a directory whose path is `dir_len`
    /// bytes long, into its files `(path, index)` and its subdirectories `(path, range)`, both in
    /// index order. Costs one step per file plus a binary search per subdirectory.
    #[allow(clippy::type_complexity)]
    fn split_cached(
        &self,
        range: Range<usize>,
        dir_len: usize,
    ) -> (Vec<(&BStr, usize)>, Vec<(&BStr, Range<usize>)>) {
        let entries = self.previous.entries();
        let prefix_len = if dir_len == 0 { 0 } else { dir_len + 1 };
        let (mut files, mut dirs) = (Vec::new(), Vec::new());
        let mut i = range.start;
        while i < range.end {
            let path = entries[i].path(self.previous);
            match path[prefix_len..].find_byte(b'/') {
                None => {
                    files.push((path, i));
                    i += 1;
                }
                Some(slash) => {
                    let block = &path[..prefix_len + slash + 1];
                    let len = entries[i..range.end]
                        .partition_point(|e| e.path(self.previous).starts_with(block));
                    dirs.push((&path[..prefix_len + slash], i..i + len));
                    i += len;
                }
            }
        }
        (files, dirs)
    }

    /// Stat one file and settle it from its previous index entry (`cached`, an index into the
    /// entries) when its stat proves it unchanged. Costs one `fstatat` relative to `dir`.
    fn look(
        &self,
        rel: BString,
        name_start: usize,
        dir: BorrowedFd<'_>,
        cached: Option<usize>,
    ) -> Looked {
        let meta = match statat(dir, &rel[name_start..], AtFlags::SYMLINK_NOFOLLOW) {
            Ok(meta) => meta,
            Err(rustix::io::Errno::NOENT) => return Looked::Vanished,
            Err(e) => return Looked::Settled(Part::Skipped(unreadable(rel, &e.into()))),
        };
        self.progress.step();
        let mode = match FileType::from_raw_mode(meta.st_mode) {
            FileType::Symlink => Mode::SYMLINK,
            FileType::RegularFile if meta.st_mode & 0o100 != 0 => Mode::FILE_EXECUTABLE,
            FileType::RegularFile => Mode::FILE,
            // Listed as a file, a directory by now: this snapshot leaves it out.
            FileType::Directory => return Looked::Vanished,
            // FIFOs, sockets, devices: never opened (reading a FIFO would hang).
            _ => {
                return Looked::Settled(Part::Skipped(Skipped {
                    path: rel,
                    reason: SkipReason::SpecialFile,
                    detail: None,
                }))
            }
        };
        let size = meta.st_size as u64;
        let perm = meta.st_mode & 0o7777;
        let stat = stat_of(&meta);
        let previous = cached.map(|i| &self.previous.entries()[i]);
        match previous {
            Some(prev)
                if prev.mode == mode
                    && prev.stat.matches(&stat, STAT_OPTIONS)
                    && !is_racy(&prev.stat, self.previous_time) =>
            {
                Looked::Settled(Part::File(FileEntry {
                    path: rel,
                    stat,
                    id: prev.id,
                    mode,
                    perm,
                    hashed: false,
                }))
            }
            None if mode != Mode::SYMLINK && size > self.max_file_size => {
                Looked::Settled(Part::Skipped(Skipped {
                    path: rel,
                    reason: SkipReason::TooLarge,
                    detail: Some(format!("{size} bytes, cap {}", self.max_file_size)),
                }))
            }
            _ => Looked::Read {
                path: rel,
                name_start,
                stat,
                mode,
                perm,
                size,
                previous: previous.map(|prev| (prev.id, prev.mode)),
            },
        }
    }

    /// Read file `rel` (or a symlink's target), whose name starts at `name_start` and which
    /// lives in directory `dir`, and write it as a blob. `Ok(None)`: it vanished.
    /// Costs a read, a hash, and zlib plus a file write when the blob is new.
    fn read(
        &self,
        rel: BString,
        dir: BorrowedFd<'_>,
        name_start: usize,
        stat: Stat,
        (mode, perm): (Mode, u32),
        size: u64,
    ) -> Result<Option<Part>> {
        let name = Path::new(std::ffi::OsStr::from_bytes(&rel[name_start..]));
        let content = if mode == Mode::SYMLINK {
            match rustix::fs::readlinkat(dir, name, Vec::new()) {
                Ok(target) => Ok(self
                    .objects
                    .write(gix::objs::Kind::Blob, target.as_bytes())?),
                Err(e) => Err(e.into()),
            }
        } else {
            self.blob_from_file(dir, name, size)?
        };
        Ok(match content {
            Ok(id) => Some(Part::File(FileEntry {
                path: rel,
                stat,
                id,
                mode,
                perm,
                hashed: true,
            })),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => Some(Part::Skipped(unreadable(rel, &e))),
        })
    }

    /// Read file `name` of directory `dir` and write it as a blob. The outer error is about
    /// writing the store, the inner one about reading the project file.
    fn blob_from_file(
        &self,
        dir: BorrowedFd<'_>,
        name: &Path,
        size: u64,
    ) -> Result<io::Result<ObjectId>> {
        let mut file = match open_regular(dir, name, false) {
            Ok(file) => file,
            Err(e) => return Ok(Err(e)),
        };
        if size > READ_WHOLE_LIMIT {
            return self.objects.write_blob_stream(file, size);
        }
        let mut data = Vec::with_capacity(size as usize);
        match io::Read::read_to_end(&mut file, &mut data) {
            Ok(_) => self.objects.write(gix::objs::Kind::Blob, &data).map(Ok),
            Err(e) => Ok(Err(e)),
        }
    }
}

/// Pair each of `items` with the entry of `cached` that has the same path, in one merge pass;
/// both are sorted by `order`.
fn pair_sorted<T, C: Clone>(
    items: Vec<T>,
    cached: &[(&BStr, C)],
    path: impl Fn(&T) -> &[u8],
    order: impl Fn(&[u8], &[u8]) -> std::cmp::Ordering,
) -> Vec<(T, Option<C>)> {
    let mut next = 0;
    items
        .into_iter()
        .map(|item| {
            let key = path(&item);
            while next < cached.len() && order(cached[next].0, key).is_lt() {
                next += 1;
            }
            let found = cached.get(next).filter(|c| c.0 == key).map(|c| c.1.clone());
            (item, found)
        })
        .collect()
}

/// `parent/name`, or `name` at the root.
fn join(parent: &BStr, name: &[u8]) -> BString {
    let mut path = BString::from(Vec::with_capacity(parent.len() + 1 + name.len()));
    if !parent.is_empty() {
        path.extend_from_slice(parent);
        path.push(b'/');
    }
    path.extend_from_slice(name);
    path
}

fn unreadable(path: BString, error: &io::Error) -> Skipped {
    Skipped {
        path,
        reason: SkipReason::Unreadable,
        detail: Some(error.to_string()),
    }
}

/// The index stat of `meta`, truncated to 32 bits as git does.
#[allow(clippy::unnecessary_cast)] // the field types differ between targets
fn stat_of(meta: &rustix::fs::Stat) -> Stat {
    let time = |secs: i64, nsecs: u64| stat::Time {
        secs: secs as u32,
        nsecs: nsecs as u32,
    };
    Stat {
        mtime: time(meta.st_mtime as i64, meta.st_mtime_nsec as u64),
        ctime: time(meta.st_ctime as i64, meta.st_ctime_nsec as u64),
        dev: meta.st_dev as u32,
        ino: meta.st_ino as u32,
        uid: meta.st_uid,
        gid: meta.st_gid,
        size: meta.st_size as u32,
    }
}

/// Open `path` (relative to directory `dir`, or absolute) for reading only if it is a regular
/// file: never blocks on a FIFO, never reads a device, and with `follow == false` never follows
/// a symlink (a file swapped for any of these since it was stat'ed is an error, "changed while
/// being read").
pub(crate) fn open_regular(dir: BorrowedFd<'_>, path: &Path, follow: bool) -> io::Result<fs::File> {
    let mut flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC;
    if !follow {
        flags |= OFlags::NOFOLLOW;
    }
    let fd =
        rustix::fs::openat(dir, path, flags, rustix::fs::Mode::empty()).map_err(|e| match e {
            rustix::io::Errno::LOOP => io::Error::other("changed while being read (now a symlink)"),
            e => e.into(),
        })?;
    let stat = rustix::fs::fstat(&fd)?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(io::Error::other(
            "changed while being read (no longer a regular file)",
        ));
    }
    Ok(fs::File::from(fd))
}

/// Open directory `name` below `parent` without following a symlink.
fn open_dir(parent: BorrowedFd<'_>, name: &[u8]) -> rustix::io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    rustix::fs::openat(parent, name, flags, rustix::fs::Mode::empty())
}

/// git's racy-timestamp rule: an entry whose mtime is not older than the index that recorded it
/// may have changed within the same tick without changing its stat.
fn is_racy(entry: &Stat, index_time: stat::Time) -> bool {
    (entry.mtime.secs, entry.mtime.nsecs) >= (index_time.secs, index_time.nsecs)
}

/// How the new file list differs from the previous index.
struct Changes {
    /// Every directory (`""` for the root) whose tree must be rebuilt.
    dirty_dirs: HashSet<BString>,
    /// The index must be written: entries or stats changed, or racy entries need a fresh timestamp.
    rewrite_index: bool,
}

impl Changes {
    /// Merge-join the previous entries and the new files (both in index order). Costs one
    /// comparison per path.
    fn between(previous: &gix::index::State, files: &[FileEntry]) -> Changes {
        let mut dirty_dirs = HashSet::new();
        let mut rewrite_index = false;
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
                    if before.id != after.id || before.mode != after.mode {
                        mark(n);
                    }
                    if after.hashed || before.stat != after.stat {
                        rewrite_index = true;
                    }
                    i += 1;
                    j += 1;
                }
                (Some(o), Some(n)) if o < n => {
                    mark(o);
                    i += 1;
                }
                (Some(o), None) => {
                    mark(o);
                    i += 1;
                }
                (_, Some(n)) => {
                    mark(n);
                    j += 1;
                }
                (None, None) => unreachable!("loop condition"),
            }
        }
        rewrite_index |= !dirty_dirs.is_empty();
        Changes {
            dirty_dirs,
            rewrite_index,
        }
    }
}

/// Cache-tree nodes deeper than this keep no children: gix reads, writes, clones and drops the
/// cache-tree by recursion, so its depth must stay bounded. Deeper directories are not cached;
/// their trees are hashed again when something below their cached ancestor changes.
const CACHE_TREE_DEPTH: usize = 128;

/// Builds trees bottom-up from files in index order, reusing clean subtrees from the cache-tree.
struct TreeBuilder<'a> {
    files: &'a [FileEntry],
    dirty: &'a HashSet<BString>,
    objects: &'a ObjectWriter,
}

/// A directory whose tree [`TreeBuilder::build`] is making.
struct Level<'a, 'c> {
    /// Its path with `/` appended (empty for the root).
    dir: &'a [u8],
    /// The index of its first file.
    start: usize,
    cached: Option<&'c CacheTree>,
    entries: Vec<gix::objs::tree::Entry>,
    children: Vec<CacheTree>,
}

impl<'a> TreeBuilder<'a> {
    /// The root tree of `self.files` (in index order) and its cache-tree, reusing the clean
    /// subtrees of `cached`. An explicit stack of the directories being built, so depth costs
    /// heap, not thread stack. Costs one tree write per dirty directory; clean ones are reused.
    fn build(&self, cached: Option<&CacheTree>) -> Result<CacheTree> {
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
    fn write(&self, level: Level<'_, '_>, end: usize) -> Result<CacheTree> {
        let mut data = Vec::new();
        let tree = gix::objs::Tree {
            entries: level.entries,
        };
        gix::objs::WriteTo::write_to(&tree, &mut data).map_err(|e| {
            let dir = level.dir.to_str_lossy();
            Error::io("encoding tree", PathBuf::from(dir.as_ref()), e)
        })?;
        let id = self.objects.write(gix::objs::Kind::Tree, &data)?;
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
    fn still_valid(&self, cached: &CacheTree, start: usize, dir: &[u8]) -> bool {
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
    fn push_subtree(&mut self, tree: CacheTree, depth: usize) {
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

fn entry_mode(mode: Mode) -> gix::objs::tree::EntryMode {
    use gix::objs::tree::EntryKind;
    match mode {
        Mode::FILE_EXECUTABLE => EntryKind::BlobExecutable,
        Mode::SYMLINK => EntryKind::Link,
        _ => EntryKind::Blob,
    }
    .into()
}

/// The index's header and entries (version 2, no extensions yet), serialised.
/// Costs one pass over the files and a copy of their paths.
fn index_entries(files: &[FileEntry]) -> Result<Vec<u8>> {
    let mut state = gix::index::State::new(gix::hash::Kind::Sha1);
    for file in files {
        let flags = gix::index::entry::Flags::empty();
        state.dangerously_push_entry(file.stat, file.id, flags, file.mode, file.path.as_ref());
    }
    let mut data = Vec::with_capacity(files.len() * 96 + 4096);
    let options = gix::index::write::Options {
        extensions: gix::index::write::Extensions::None,
        skip_hash: false,
    };
    state
        .write_to(&mut data, options)
        .map_err(|e| Error::store("index", e))?;
    Ok(data)
}

/// Complete the index (`entries` + the exact cache-tree + checksum) and write it atomically:
/// a temp file in the store, then a rename. No `index.lock` is involved, so a killed process
/// leaves nothing that blocks the next one.
fn write_index(path: &Path, mut data: Vec<u8>, tree: &CacheTree) -> Result<ObjectId> {
    let io_error = |e| Error::io("writing index", path, e);
    tree.write_to(&mut data).map_err(io_error)?;
    let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
    hasher.update(&data);
    let checksum = hasher.try_finalize().map_err(|e| Error::store(path, e))?;
    data.extend_from_slice(checksum.as_bytes());
    let dir = path.parent().expect("index lives in the store");
    let mut temp = tempfile::Builder::new()
        .prefix("index.tmp")
        .tempfile_in(dir)
        .map_err(|e| Error::io("writing index", dir, e))?;
    temp.write_all(&data).map_err(io_error)?;
    temp.persist(path).map_err(|e| io_error(e.error))?;
    Ok(checksum)
}
