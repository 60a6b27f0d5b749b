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
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex};

use gix::bstr::{BString, ByteSlice};
use gix::index::entry::{stat, Mode, Stat};
use gix::index::extension::Tree as CacheTree;
use gix::ObjectId;
use serde::Serialize;

mod cache;
pub(crate) mod ignore;
mod tree;
pub(crate) mod visibility;
mod walk;
mod watch;
use cache::{load_index, Cache, CacheCheck, Changes, IndexWrite, LooseSet};
use tree::TreeBuilder;
use walk::{Before, Walk};
pub use watch::WatchStatus;
use watch::Watching;

use crate::error::{Error, Result};
use crate::paths::serialize_path;
use crate::store::{Locked, SnapshotId, Store};
use ignore::Excludes;

/// Options for [`Store::track`].
#[derive(Debug, Clone, Default)]
pub struct TrackOptions {
    /// Files not in the previous snapshot and larger than this are left out. `None`: the store's
    /// `rewind.maxFileSize` (default 2 MiB).
    pub max_file_size: Option<u64>,
}

/// What [`Store::track`] produced.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct Snapshot {
    /// The id of the snapshot's root tree.
    pub hash: SnapshotId,
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
    /// Directories holding another repository whose working files the snapshot holds (under
    /// `rewind.nestedRepos = include`): recorded, since their ignore rules are their own.
    #[serde(skip)]
    pub(crate) nested: Vec<BString>,
    /// The digest of the rules from outside the project (`""`) and from outside each of
    /// `nested`, which no snapshot holds: recorded, so that a restore judges what the snapshot
    /// could see by those rules only while they are the same.
    #[serde(skip)]
    pub(crate) rules: Vec<(BString, String)>,
}

/// A path left out of a snapshot, and why.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct Skipped {
    /// Project-relative, `/`-separated (lossy only if the name is not UTF-8).
    #[serde(serialize_with = "serialize_path")]
    pub path: BString,
    /// Why it was left out.
    pub reason: SkipReason,
    /// The error, for `unreadable`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Why a path is not in a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// A new file above the size cap.
    TooLarge,
    /// A directory holding a `.git` directory or file: another repository, never entered
    /// (under `rewind.nestedRepos = skip`, or inside an ignored directory).
    NestedRepo,
    /// A FIFO, socket or device: never opened.
    SpecialFile,
    /// A file or directory that could not be read.
    Unreadable,
    /// rewind's own data: a data directory or a store (it holds the data marker file).
    RewindData,
    /// A name git refuses in a tree: `.git` in another case (`.GIT`, `.Git`), which a
    /// case-insensitive file system takes for a repository's `.git`.
    ReservedName,
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
            SkipReason::ReservedName => "reserved_name",
        }
    }
}

/// One file of the new snapshot.
#[derive(Clone)]
struct FileEntry {
    path: BString,
    stat: Stat,
    id: ObjectId,
    mode: Mode,
    /// Permission bits (`st_mode & 0o7777`).
    perm: u32,
    /// How many names it has (hard links).
    links: u64,
    /// The file was read (its stat did not prove it unchanged).
    hashed: bool,
}

/// One item of a directory's walked contents, in index order.
#[derive(Clone)]
enum Part {
    File(FileEntry),
    Skipped(Skipped),
    /// A subdirectory: the id of its own directory job.
    Dir(usize),
    /// A subdirectory kept from the watcher's memo (not read again): its path.
    Kept(BString),
    /// A path ignored by rules from outside the project, or a `.gitignore` ignored by the
    /// project's own (after the directory's other parts): recorded, since no snapshot holds
    /// the rules that hid it.
    Hidden(BString),
    /// This directory's permission bits, narrower than 0755 (after its other parts).
    PrivateDir(BString, u32),
    /// This directory holds a nested repository, whose files it holds (after its other parts),
    /// and the digest of the rules from outside it ([`Excludes::rules_digest`]).
    Nested(BString, String),
}

/// Where [`assemble`] puts what a snapshot records beside its files: the paths rules from
/// outside hid, private directories with their bits, nested repositories with the digest of
/// their outside rules.
type Recorded<'a> = (
    &'a mut Vec<BString>,
    &'a mut Vec<(BString, u32)>,
    &'a mut Vec<(BString, String)>,
);

/// Join the directories' parts, each listed by its job id (the root is 0), into one list of
/// files and one of skipped paths in index order. An explicit stack of the directories being
/// read, so depth costs heap, not thread stack; each entry moves once.
fn assemble(
    mut dirs: Vec<Option<Vec<Part>>>,
    files: &mut Vec<FileEntry>,
    skipped: &mut Vec<Skipped>,
    (hidden, private_dirs, nested): Recorded<'_>,
) {
    let mut take = |id: usize| dirs.get_mut(id).and_then(Option::take).unwrap_or_default();
    let mut stack = vec![take(0).into_iter()];
    while let Some(parts) = stack.last_mut() {
        match parts.next() {
            Some(Part::File(file)) => files.push(file),
            Some(Part::Skipped(skip)) => skipped.push(skip),
            Some(Part::Hidden(path)) => hidden.push(path),
            Some(Part::PrivateDir(path, perm)) => private_dirs.push((path, perm)),
            Some(Part::Nested(path, rules)) => nested.push((path, rules)),
            Some(Part::Dir(id)) => stack.push(take(id).into_iter()),
            Some(Part::Kept(_)) => unreachable!("a walk without a memo keeps nothing"),
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
        links: u64,
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
    /// # let store = rewind::Store::open(".".as_ref(), &rewind::OpenOptions::new("/tmp/rewind"))?;
    /// let snapshot = store.track(&rewind::TrackOptions::default())?;
    /// println!("{} holds {} files", snapshot.hash, snapshot.files);
    /// for skipped in &snapshot.skipped {
    ///     println!("left out {} ({:?})", skipped.path, skipped.reason);
    /// }
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn track(&self, options: &TrackOptions) -> Result<Snapshot> {
        self.lock()?.track(options)
    }

    /// Whether the project differs from snapshot `hash` now. When `hash` is the last snapshot,
    /// the walk stops at the first file that differs; otherwise it costs a full [`track`](Self::track).
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), &rewind::OpenOptions::new("/tmp/rewind"))?;
    /// let before = store.track(&Default::default())?.hash;
    /// if store.has_changes(before)? {
    ///     println!("offer undo");
    /// }
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn has_changes(&self, hash: SnapshotId) -> Result<bool> {
        let hash = self.tree(hash)?;
        Ok(
            match self
                .lock()?
                .swept()
                .snapshot(&TrackOptions::default(), Some(hash), None)?
            {
                Some(snapshot) => snapshot.hash.0 != hash,
                None => true,
            },
        )
    }
}

impl Locked<'_> {
    /// [`Store::track`], under the lock.
    pub(crate) fn track(&self, options: &TrackOptions) -> Result<Snapshot> {
        self.track_with(options, None)
    }

    /// [`track`](Self::track) for a run about to write files (its undo point), holding back
    /// the stat cache it would write (see [`PendingIndex`]).
    pub(crate) fn track_holding_index(
        &self,
        options: &TrackOptions,
    ) -> Result<(Snapshot, Option<PendingIndex>)> {
        // The run syncs its file system before it changes a file. The index a `track` wrote
        // moments ago (21 MB at 200,000 files) would still be dirty then, and the sync would
        // wait for it: the disk writes it back during the walk instead.
        crate::fs::Rewrite::start_write_back(&self.git_dir().join("index"));
        let held = Mutex::new(None);
        let snapshot = self.track_with(options, Some(&held))?;
        Ok((
            snapshot,
            held.into_inner().unwrap_or_else(|p| p.into_inner()),
        ))
    }

    /// A recorded snapshot, the stat cache put in `held` when given (see
    /// [`snapshot`](Self::snapshot)).
    fn track_with(&self, options: &TrackOptions, held: Option<&HeldIndex>) -> Result<Snapshot> {
        let snapshot = self
            .swept()
            .snapshot(options, None, held)?
            .expect("runs to the end without a probe");
        self.record_snapshot(&snapshot)?;
        Ok(snapshot)
    }

    /// This, once a killed restore's leftovers are swept (see
    /// [`sweep_temp_files`](Self::sweep_temp_files)): before every snapshot that is recorded,
    /// so that none records a temp file.
    fn swept(&self) -> &Self {
        self.sweep_temp_files();
        self
    }

    /// The project as it is now, snapshotted (its objects stored, the stat cache refreshed)
    /// but not recorded: what a dry run compares with, which changes no file (a killed
    /// restore's temp files are left to the next run that writes). Costs a
    /// [`track`](Self::track).
    pub(crate) fn peek(&self, options: &TrackOptions) -> Result<Snapshot> {
        Ok(self
            .snapshot(options, None, None)?
            .expect("runs to the end without a probe"))
    }

    /// Snapshot the project. With `probe` equal to the last snapshot's tree, stop as soon as a
    /// file differs from it and return `None` (the index is then left as it was). With `held`,
    /// a stat cache that must be rewritten is put there instead (a watcher writes its own).
    fn snapshot(
        &self,
        options: &TrackOptions,
        probe: Option<ObjectId>,
        held: Option<&HeldIndex>,
    ) -> Result<Option<Snapshot>> {
        let mut watcher = crate::store::objects::lock(&self.watcher);
        match watch::watcher_in(&mut watcher) {
            // (The caller compares the whole snapshot with its probe.)
            Some(watcher) if watcher.is_active() => watcher.snapshot(self, options).map(Some),
            off => {
                if let Some(watcher) = off {
                    watcher.count_walk_while_off();
                }
                drop(watcher);
                self.with_disk_index(options, (probe, None, held))
            }
        }
    }

    /// A snapshot that walks everything with the index as its stat cache, under `watching` (a
    /// watcher's full walk) or not.
    fn peek_unwatched(
        &self,
        options: &TrackOptions,
        watching: Option<&Watching<'_>>,
    ) -> Result<Snapshot> {
        let snapshot = self.with_disk_index(options, (None, watching, None))?;
        Ok(snapshot.expect("runs to the end without a probe"))
    }

    /// [`snapshot_with`](Self::snapshot_with) the store's index as it is on disk.
    fn with_disk_index(
        &self,
        options: &TrackOptions,
        context: Context<'_>,
    ) -> Result<Option<Snapshot>> {
        let index_path = self.git_dir().join("index");
        let cache = load_index(&index_path);
        self.snapshot_with(&index_path, cache, None, options, context)
    }

    /// The walk of a watcher's snapshot that reads only what `watching` names, from the memo
    /// `root` on; its parts go to `watching`. Costs what [`Walk::dir`] costs per directory read.
    fn walk_watched(
        &self,
        options: &TrackOptions,
        excludes: Excludes,
        watching: &Watching<'_>,
        root: Before<'_>,
    ) -> Result<()> {
        let empty = gix::index::State::new(gix::hash::Kind::Sha1);
        let walk = self.walk(
            &empty,
            Default::default(),
            options,
            None,
            (excludes, Some(watching)),
        )?;
        let dirs = walk.run(root)?.expect("runs to the end without a probe");
        watching.keep(dirs, &walk.excludes);
        Ok(())
    }
    /// [`snapshot`](Self::snapshot) from stat cache `cache`, read from
    /// `index_path`. The cache is verified while the walk runs (unless `verified` gives the loose
    /// objects a verification found), and a snapshot that relied on a damaged cache is taken again.
    fn snapshot_with(
        &self,
        index_path: &Path,
        mut cache: Cache,
        verified: Option<LooseSet>,
        options: &TrackOptions,
        (probe, watching, held): Context<'_>,
    ) -> Result<Option<Snapshot>> {
        // With no stat cache, (nearly) every object is new: one pack beats thousands of files.
        let first = cache.state.entries().is_empty();
        if first {
            self.objects().start_segmented_pack()?;
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
            || {
                self.scan(
                    index_path,
                    &cache,
                    options,
                    stop_at_change,
                    (watching, held.is_some()),
                )
            },
        );
        let (loose, record_stale) = match check {
            CacheCheck::Damaged => {
                tracing::warn!(path = %index_path.display(), "stat cache damaged; snapshot taken again");
                fs::remove_file(index_path)
                    .map_err(|e| Error::io("removing damaged index", index_path, e))?;
                return self.with_disk_index(options, (probe, watching, held));
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
                let again = (probe, watching, held);
                return self.snapshot_with(index_path, cache, Some(loose), options, again);
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
            snapshot,
            tree,
            new_index,
            held_back,
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
            self.finish_index(entries, &ids, &tree, &loose)?;
        } else if let (Some((files, changed)), Some(held)) = (held_back, held) {
            *crate::store::objects::lock(held) = Some(PendingIndex {
                index_path: index_path.to_owned(),
                files,
                changed,
                tree,
                loose,
            });
        } else if let Some(checksum) = cache.checksum.filter(|_| record_stale) {
            self.write_loose_record(checksum, loose.into_iter().collect());
        }
        let files = snapshot.files;
        tracing::debug!(hash = %snapshot.hash, files, skipped = snapshot.skipped.len(), "snapshot taken");
        Ok(Some(snapshot))
    }
    /// Walk the project against the `previous` stat cache and build the snapshot's trees;
    /// `None` when `stop_at_change` was given and a change stopped the walk.
    fn scan(
        &self,
        index_path: &Path,
        Cache {
            state: previous,
            time: previous_time,
            ..
        }: &Cache,
        options: &TrackOptions,
        stop_at_change: Option<AtomicBool>,
        (watching, hold_index): (Option<&Watching<'_>>, bool),
    ) -> Result<Option<Scanned>> {
        let excludes = Excludes::load(self.project());
        let context = (excludes, watching);
        let walk = self.walk(previous, *previous_time, options, stop_at_change, context)?;
        if let Some(watching) = watching {
            watching.restart();
        }
        let Some(dirs) = walk.run(Before::Index(0..previous.entries().len()))? else {
            return Ok(None);
        };
        if let Some(watching) = watching {
            watching.keep(dirs.clone(), &walk.excludes);
        }
        let mut files = Vec::with_capacity(previous.entries().len() + 64);
        let mut skipped = Vec::new();
        let mut hidden_outside = Vec::new();
        let mut private_dirs = Vec::new();
        let mut nested = Vec::new();
        assemble(
            dirs,
            &mut files,
            &mut skipped,
            (&mut hidden_outside, &mut private_dirs, &mut nested),
        );

        let changes = Changes::between(previous, &files, hold_index);
        let rewrite_index = changes.rewrite_index || previous.tree().is_none();
        let hold_index = hold_index && rewrite_index && previous.tree().is_some();
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
            || (rewrite_index && !hold_index).then(|| NewIndex::start(index_path, &files)),
        );
        let tree = tree?;
        let mut rules = vec![(BString::default(), walk.excludes.rules_digest().into())];
        rules.extend(nested.iter().cloned());
        let mut snapshot = Snapshot {
            hash: SnapshotId(tree.id),
            files: files.len(),
            skipped,
            private_modes: Vec::new(),
            hidden_outside,
            nested: nested.into_iter().map(|(path, _)| path).collect(),
            rules,
        };
        finish_lists(&mut snapshot, files.iter(), private_dirs);
        Ok(Some(Scanned {
            snapshot,
            tree,
            new_index: new_index.transpose()?,
            held_back: hold_index.then_some((files, changes.paths)),
        }))
    }

    /// The walk of a snapshot: against stat cache `previous` (written at `previous_time`), under
    /// the rules from outside the project `excludes`, with a watcher's plan or not.
    fn walk<'a>(
        &'a self,
        previous: &'a gix::index::State,
        previous_time: stat::Time,
        options: &TrackOptions,
        stop_at_change: Option<AtomicBool>,
        (excludes, watching): (Excludes, Option<&'a Watching<'a>>),
    ) -> Result<Walk<'a>> {
        Ok(Walk {
            root: self.project(),
            progress: self.progress(),
            stop_at_change,
            previous,
            previous_time,
            max_file_size: options
                .max_file_size
                .map_or_else(|| self.max_file_size(), Ok)?,
            excludes: Arc::new(excludes),
            nested_repos: self.nested_repos()?,
            objects: self.objects(),
            next_id: AtomicUsize::new(1),
            done: Mutex::new(Vec::new()),
            failure: Mutex::new(None),
            failed: AtomicBool::new(false),
            held: AtomicUsize::new(0),
            watching,
            // (Asked only where it is not the stat cache's own snapshot: a watcher's memo, or an
            // index another process's snapshot has passed.)
            last_snapshot: self
                .last_snapshot()
                .filter(|tree| previous.tree().map(|cached| cached.id) != Some(*tree))
                .map(|tree| walk::LastSnapshot {
                    tree,
                    repo: Mutex::new(self.repo()),
                }),
        })
    }
}

/// Fill in a snapshot's recorded modes from its `files` and the directories narrower than 0755
/// (`private_dirs`), and bound its hidden paths. Costs one step per file.
fn finish_lists<'f>(
    snapshot: &mut Snapshot,
    files: impl Iterator<Item = &'f FileEntry>,
    private_dirs: Vec<(BString, u32)>,
) {
    // Narrower than 0644 (directories: 0755): a restore must make these as private as
    // they were. A directory's path ends in `/`.
    snapshot.private_modes = files
        .filter(|f| f.mode != Mode::SYMLINK && f.perm & 0o644 != 0o644)
        .map(|f| (f.path.clone(), f.perm))
        .collect();
    snapshot
        .private_modes
        .extend(private_dirs.into_iter().map(|(mut dir, perm)| {
            dir.push(b'/');
            (dir, perm)
        }));
    snapshot.hidden_outside.sort_unstable();
    snapshot.hidden_outside.truncate(MAX_RECORDED_HIDDEN);
}

/// A walked project: its snapshot and its cache-tree.
struct Scanned {
    snapshot: Snapshot,
    tree: CacheTree,
    /// The index to write, when it must be rewritten.
    new_index: Option<NewIndex>,
    /// Or, held back, its files and the paths whose entries changed.
    held_back: Option<(Vec<FileEntry>, Vec<BString>)>,
}

/// What a snapshot is taken for: the last snapshot's tree as a probe, a watcher's walk, a place
/// to hold back the stat cache.
type Context<'a> = (
    Option<ObjectId>,
    Option<&'a Watching<'a>>,
    Option<&'a HeldIndex>,
);

/// Where [`Locked::track_holding_index`] receives the stat cache it holds back.
type HeldIndex = Mutex<Option<PendingIndex>>;

/// The stat cache a run's undo point would write, held back until the run knows what it
/// writes: writing it costs a fifth of a no-change `track` at 200,000 files (20 MB), and the
/// index before is as good when the run writes or deletes every path whose entry changed (the
/// next snapshot hashes those again either way, their stat being new). An index left as it was
/// is never wrong, only slower: an entry whose stat is not the file's is hashed again.
pub(crate) struct PendingIndex {
    index_path: std::path::PathBuf,
    files: Vec<FileEntry>,
    /// The paths whose entries differ from the index before, in index order.
    changed: Vec<BString>,
    tree: CacheTree,
    loose: LooseSet,
}

impl PendingIndex {
    /// Write the index unless the run about to write and delete `paths` covers every changed
    /// entry. Costs a set of `paths`, and, when written, what a snapshot's index write costs.
    pub(crate) fn settle<'p>(
        self,
        locked: &Locked<'_>,
        paths: impl Iterator<Item = &'p gix::bstr::BStr>,
    ) -> Result<()> {
        let covered: HashSet<&gix::bstr::BStr> = paths.collect();
        let changed = &self.changed;
        let left = changed
            .iter()
            .filter(|p| !covered.contains(p.as_bstr()))
            .count();
        tracing::debug!(changed = changed.len(), left, "stat cache held back");
        if left == 0 {
            return Ok(());
        }
        let NewIndex { entries, ids } = NewIndex::start(&self.index_path, &self.files)?;
        locked.finish_index(entries, &ids, &self.tree, &self.loose)
    }
}

impl Locked<'_> {
    /// Complete index `entries` with `tree`, and record which of its objects (`ids`, of files
    /// and whether each was hashed) are loose, given the `loose` ones of the index before.
    /// Costs the index's last write and a set lookup per file.
    fn finish_index(
        &self,
        entries: IndexWrite,
        ids: &[(ObjectId, bool)],
        tree: &CacheTree,
        loose: &LooseSet,
    ) -> Result<()> {
        let checksum = entries.finish(tree)?;
        let loose = self.loose_ids(ids, tree, loose);
        self.write_loose_record(checksum, loose);
        Ok(())
    }
}

/// An index being written: its entries, and each file's id with whether it was hashed.
struct NewIndex {
    entries: IndexWrite,
    ids: Vec<(ObjectId, bool)>,
}

impl NewIndex {
    /// Start writing the index at `path` with `files` as its entries ([`IndexWrite::start`]).
    fn start(path: &Path, files: &[FileEntry]) -> Result<NewIndex> {
        Ok(NewIndex {
            entries: IndexWrite::start(path, files)?,
            ids: files.iter().map(|f| (f.id, f.hashed)).collect(),
        })
    }
}
