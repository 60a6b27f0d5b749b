//! The parallel walk: one rayon task per directory, opened through descriptors, applying ignore
//! rules while descending and comparing each file's stat with the cache.

use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use gix::bstr::{BStr, BString, ByteSlice};
use gix::index::entry::{Mode, Stat};
use gix::ObjectId;
use rayon::prelude::*;

use super::cache::is_racy;
use super::watch::{MemoDir, Sources, Watching};
use super::{FileEntry, Looked, Part, SkipReason, Skipped, READ_WHOLE_LIMIT, STAT_OPTIONS};
use crate::error::{Error, Result};
use crate::fs::{open_child, stat_at, Dir, DirRef, Kind, Listing};
use crate::snapshot::ignore::{DirRules, Excludes, Rules};
use crate::store::objects::{lock, ObjectWriter};
use crate::store::NestedRepos;

/// Everything the parallel walk shares.
pub(super) struct Walk<'a> {
    pub(super) root: &'a Path,
    pub(super) progress: &'a crate::store::Progress,
    /// Set when a file differs from the previous snapshot, if the caller only needs a yes/no:
    /// the walk then skips the directories it has not started.
    pub(super) stop_at_change: Option<AtomicBool>,
    pub(super) previous: &'a gix::index::State,
    pub(super) previous_time: gix::index::entry::stat::Time,
    pub(super) max_file_size: u64,
    /// The rules from outside the project (the root job's; nested repositories get their own).
    pub(super) excludes: Arc<Excludes>,
    /// Whether nested repositories' working files are snapshotted (`rewind.nestedRepos`).
    pub(super) nested_repos: NestedRepos,
    pub(super) objects: &'a ObjectWriter,
    /// The id the next directory job gets (the root's is 0).
    pub(super) next_id: AtomicUsize,
    /// Each finished directory job's id and parts.
    pub(super) done: Mutex<Vec<(usize, Vec<Part>)>>,
    /// The first error of any job; `failed` tells the others to stop.
    pub(super) failure: Mutex<Option<Error>>,
    pub(super) failed: AtomicBool,
    /// How many [`HeldDir`]s are open.
    pub(super) held: AtomicUsize,
    /// Under a watcher: the directories to read again (the others are kept from its memo), and
    /// where each directory read is registered and recorded.
    pub(super) watching: Option<&'a Watching<'a>>,
    /// The last snapshot any process recorded of the project, where it is not `previous`'s
    /// own: above the size cap, a file stays in if it holds it, whatever `previous` holds (a
    /// server's memo and the CLI's index each know only their own last snapshot; r78 (2), r81).
    pub(super) last_snapshot: Option<LastSnapshot>,
}

/// The last snapshot any process recorded of the project ([`Walk::last_snapshot`]).
pub(super) struct LastSnapshot {
    pub(super) tree: ObjectId,
    pub(super) repo: Mutex<gix::Repository>,
}

impl LastSnapshot {
    /// Whether it holds a file (or symlink) at `path`; `None` when its trees cannot be read
    /// (pruned since). Costs reading the trees on the way.
    fn holds(&self, path: &BStr) -> Option<bool> {
        let repo = lock(&self.repo);
        let tree = repo.find_tree(self.tree).ok()?;
        let entry = tree.lookup_entry(path.split(|&b| b == b'/')).ok()?;
        Some(entry.is_some_and(|entry| !entry.mode().is_tree()))
    }
}

/// What the previous snapshot knew of a directory: the stat cache of its files and, under a
/// watcher, the directory as the last walk read it.
#[derive(Clone)]
pub(super) enum Before<'a> {
    /// Entries `range` of the store's index.
    Index(Range<usize>),
    /// The watcher's memo of it.
    Memo(&'a MemoDir),
}

/// A file as the previous snapshot recorded it, and when its stat was taken.
#[derive(Clone, Copy)]
pub(super) struct Prev {
    pub(super) stat: Stat,
    pub(super) id: ObjectId,
    pub(super) mode: Mode,
    /// Not older than this mtime, the file may have changed unseen in the same tick.
    pub(super) racy_from: gix::index::entry::stat::Time,
}

/// At most this many directories stay open for subdirectories still to be opened (a deep tree
/// with a pending sibling at every level would otherwise hold one descriptor per level, and
/// run out at the usual limit of 1,024). Past it, subdirectories are opened one component at a
/// time from the nearest ancestor still open.
pub(super) const HELD_DIRS: usize = 128;

/// A directory kept open for its subdirectories' jobs; counted in [`Walk::held`].
pub(super) struct HeldDir<'w> {
    pub(super) dir: Listing,
    pub(super) held: &'w AtomicUsize,
}

impl Drop for HeldDir<'_> {
    fn drop(&mut self) {
        self.held.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A subdirectory as a directory job lists it: (path, ignored), what the previous snapshot knew
/// of it, and its job id.
pub(super) type DirItem<'s> = (((BString, bool), Option<Before<'s>>), usize);

/// A directory to walk: job `id`, opened when its turn comes below `anchor`, an ancestor (its
/// parent, unless too many directories are held open already).
pub(super) struct DirJob<'w> {
    pub(super) id: usize,
    /// Project-relative path.
    pub(super) rel: BString,
    /// The nearest ancestor held open (`None`: open from the project root's path), and where
    /// the part of `rel` below it starts.
    pub(super) anchor: Option<Arc<HeldDir<'w>>>,
    pub(super) below_anchor: usize,
    pub(super) rules: Arc<DirRules>,
    /// The rules from outside the project, or from outside the nested repository `rel` is in.
    pub(super) excludes: Arc<Excludes>,
    /// The directory is ignored: keep only files the project's own index tracks.
    pub(super) tracked_only: bool,
    /// What the previous snapshot knew of `rel`.
    pub(super) before: Before<'w>,
    /// Under a watcher: the rules above `rel` are those the memo's were made under, so its
    /// subdirectories may be kept from the memo.
    pub(super) keep: bool,
}

impl<'a> Walk<'a> {
    /// Walk the whole project: one rayon job per directory, each spawning its subdirectories'
    /// jobs, so no thread stack grows with depth, from what the previous snapshot knew of the
    /// root (`before`).
    /// Returns every directory's parts by job id, or `None` when a change stopped the walk.
    pub(super) fn run(&self, before: Before<'a>) -> Result<Option<Vec<Option<Vec<Part>>>>> {
        let root = DirJob {
            id: 0,
            rel: BString::default(),
            anchor: None,
            below_anchor: 0,
            rules: DirRules::root(),
            excludes: self.excludes.clone(),
            tracked_only: false,
            keep: matches!(before, Before::Memo(_))
                && !self.watching.is_some_and(|w| w.whole(BStr::new(""))),
            before,
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
    pub(super) fn spawn<'s>(&'s self, scope: &rayon::Scope<'s>, job: DirJob<'s>) {
        scope.spawn(move |scope| {
            if self.halted() {
                return;
            }
            let id = job.id;
            let started = self.watching.as_ref().map(|w| w.started(job.rel.as_ref()));
            match self.dir(scope, job) {
                Ok((parts, sources)) => {
                    if let (Some(watching), Some(started)) = (&self.watching, started) {
                        watching.read(id, started, sources);
                    }
                    lock(&self.done).push((id, parts))
                }
                Err(error) => {
                    self.failed.store(true, Ordering::Relaxed);
                    lock(&self.failure).get_or_insert(error);
                }
            }
        });
    }

    /// Whether the walk should start no more directories: a job failed, or a change was found.
    pub(super) fn halted(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
            || self
                .stop_at_change
                .as_ref()
                .is_some_and(|stop| stop.load(Ordering::Relaxed))
    }

    /// Snapshot the files of directory `job` and spawn a job for each of its subdirectories
    /// (under a watcher, only those it cannot keep from its memo). Returns its parts in index
    /// order, each subdirectory as the id of its job (or as kept), and what its rules came from.
    /// Costs one `openat`, one `readdir` and one `fstatat` per file, plus reading the files that
    /// changed (through [`crate::fs`]: descriptors on Unix, paths elsewhere); at a nested
    /// repository's root, a few small reads for its `info/exclude`.
    pub(super) fn dir<'s>(
        &'s self,
        scope: &rayon::Scope<'s>,
        job: DirJob<'s>,
    ) -> Result<(Vec<Part>, Sources)> {
        let DirJob {
            rel,
            anchor,
            below_anchor,
            rules,
            excludes,
            tracked_only,
            before,
            keep,
            ..
        } = job;
        let opened = self.open(anchor.as_deref(), &rel[below_anchor..]);
        // Watched before it is read: a change after the read is an event.
        let watch = match (&self.watching, &opened) {
            (Some(watching), Ok(dir)) => watching.register(dir.as_dir(), rel.as_ref()),
            _ => None,
        };
        let mut sources = Sources {
            tracked_only,
            ..Sources::default()
        };
        let skipped = |rel, reason, detail| {
            vec![Part::Skipped(Skipped {
                path: rel,
                reason,
                detail,
            })]
        };
        let mut entries = match opened.and_then(Listing::new) {
            Ok(entries) => entries,
            // Gone since its parent was read: this snapshot leaves it out.
            Err(e) if e.kind() == io::ErrorKind::NotFound && !rel.is_empty() => {
                return Ok((Vec::new(), sources))
            }
            // Out of descriptors or memory: the snapshot fails, it does not leave it out.
            Err(e) if rel.is_empty() || crate::fs::out_of_resources(&e) => {
                let path = self.root.join(crate::paths::os_path_lossy(rel.as_ref()));
                return Err(Error::io("reading", &path, e));
            }
            Err(e) => {
                let detail = e.to_string();
                return Ok((skipped(rel, SkipReason::Unreadable, Some(detail)), sources));
            }
        };
        let mut hidden = Vec::new();
        // A directory narrower than 0755 (0700, 0750): recorded, so a restore that makes it
        // again makes it as private. One `fstat`.
        if let Some(found) = entries
            .dir()
            .ok()
            .and_then(|dir| crate::fs::stat_dir(dir).ok())
        {
            let perm = found.mode;
            if !rel.is_empty() && perm & 0o755 != 0o755 {
                hidden.push(Part::PrivateDir(rel.clone(), perm));
            }
        }
        // (path, where its name starts, its type if the directory entry says)
        let mut listed: Vec<(BString, usize, Option<Kind>)> = Vec::new();
        let mut gitignore = false;
        let mut dot_git = false;
        let mut reserved = Vec::new();
        let include_nested = self.nested_repos == NestedRepos::Include && !tracked_only;
        let name_start = if rel.is_empty() { 0 } else { rel.len() + 1 };
        for entry in entries.by_ref() {
            let Ok(entry) = entry else { continue };
            let name = entry.name();
            match name {
                b".git" if rel.is_empty() => continue, // the project's own repository
                // Maybe another repository (below): its `.git` is never entered.
                b".git" => {
                    dot_git = true;
                    continue;
                }
                _ if name == crate::store::DATA_MARKER.as_bytes() => {
                    // rewind's own writes there are no change to the project.
                    if let (Some(watching), Some(wd)) = (&self.watching, watch) {
                        watching.forget(wd);
                    }
                    return Ok((skipped(rel, SkipReason::RewindData, None), sources));
                }
                _ if name.eq_ignore_ascii_case(b".git") => {
                    reserved.push(Part::Skipped(Skipped {
                        path: join(rel.as_ref(), name),
                        reason: SkipReason::ReservedName,
                        detail: None,
                    }));
                    continue;
                }
                _ => {}
            }
            let kind = entry.kind();
            gitignore |= name == b".gitignore" && kind == Some(Kind::File);
            listed.push((join(rel.as_ref(), name), name_start, kind));
        }
        let dir_fd = entries.dir().expect("an open directory has a descriptor");
        // Another repository's files are taken only if included; a `.git` that makes no
        // repository (garbage, a link to nowhere, empty) leaves the directory an ordinary one.
        // Another repository's state (its `HEAD`, its `info/exclude`) is not watched: such a
        // directory is read at every snapshot.
        sources.volatile = dot_git;
        let nested = dot_git && Excludes::is_repository(dir_fd, Path::new(""));
        if nested && !include_nested {
            return Ok((skipped(rel, SkipReason::NestedRepo, None), sources));
        }
        // A nested repository's own rules start here; the project's do not reach inside it.
        let (rules, excludes) = match nested {
            true => {
                let own = excludes.nested(rel.as_ref(), dir_fd, Path::new(""));
                hidden.push(Part::Nested(rel.clone(), own.rules_digest().into()));
                sources.nested = Some(own.fingerprint().to_vec());
                (DirRules::root(), Arc::new(own))
            }
            false => (rules, excludes),
        };
        let rules = if gitignore && !tracked_only {
            let source = self.abs(rel.as_ref()).join(".gitignore");
            let (rules, bytes) = DirRules::child(&rules, dir_fd, &source, rel.as_ref());
            sources.gitignore = bytes;
            rules
        } else {
            rules
        };

        let mut files = Vec::with_capacity(listed.len());
        let mut dirs = Vec::new();
        for (child, name_start, kind) in listed {
            let kind = match kind {
                Some(known) => known,
                // Some filesystems leave the type out of directory entries.
                None => match stat_at(dir_fd, &child[name_start..]) {
                    Ok(found) => found.kind,
                    Err(_) => continue, // vanished; an unreadable file is reported by `look`
                },
            };
            let is_dir = kind == Kind::Dir;
            let by = match tracked_only {
                true => None,
                false => excludes.ignored_by(&rules, child.as_ref(), is_dir),
            };
            let ignored = tracked_only || by.is_some();
            // (Also a `.gitignore` the project's rules ignore: no snapshot holds its rules.)
            let own_rules = by == Some(Rules::Project)
                && &child[name_start..] == b".gitignore"
                && !excludes.is_tracked(child.as_ref());
            if by == Some(Rules::Outside) || own_rules {
                hidden.push(Part::Hidden(child.clone()));
            }
            if is_dir {
                if !ignored || excludes.tracks_below(child.as_ref()) {
                    dirs.push((child, ignored));
                }
            } else if !ignored || excludes.is_tracked(child.as_ref()) {
                files.push((child, name_start));
            }
        }
        // Files sort by bytes, directories as "name/": the index's order for both.
        files.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        dirs.sort_unstable_by(|a, b| gix::objs::tree::name_order(&a.0, true, &b.0, true));

        // Under a watcher, a subdirectory whose rules are the memo's and that saw no change is
        // kept as the memo has it.
        let keep_children =
            keep && matches!(&before, Before::Memo(memo) if memo.sources == sources);
        let (cached_files, cached_dirs) = self.split_cached(&before, rel.len());
        let as_dirs = |a: &[u8], b: &[u8]| gix::objs::tree::name_order(a, true, b, true);
        let files = pair_sorted(files, &cached_files, |(p, _)| p.as_slice(), <[u8]>::cmp);
        let dirs = pair_sorted(dirs, &cached_dirs, |(p, ..)| p.as_slice(), as_dirs);
        let looked: Vec<Looked> = files
            .into_par_iter()
            .with_min_len(128)
            .map(|((child, name_start), cached)| self.look(child, name_start, dir_fd, cached))
            .collect();
        // A file with other names can change through them unseen by a watch on this directory.
        sources.volatile |= looked.iter().any(|l| match l {
            Looked::Settled(Part::File(file)) => file.links > 1,
            Looked::Read { links, .. } => *links > 1,
            _ => false,
        });
        let read = |looked: Looked| match looked {
            Looked::Read {
                path,
                name_start,
                stat,
                mode,
                perm,
                size,
                links,
                previous,
            } => {
                let file = (stat, mode, perm, links);
                let part = self.read(path, dir_fd, name_start, file, size)?;
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
        let mut file_parts: Vec<Part> = if looked.iter().any(|l| matches!(l, Looked::Read { .. })) {
            let parts: Result<Vec<_>> = looked.into_par_iter().map(read).collect();
            parts?.into_iter().flatten().collect()
        } else {
            let settled = |l| match l {
                Looked::Settled(part) => Some(part),
                _ => None,
            };
            looked.into_iter().filter_map(settled).collect()
        };
        if !reserved.is_empty() {
            file_parts.append(&mut reserved);
            file_parts.sort_by(|a, b| file_path(a).cmp(file_path(b)));
        }

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
        let mut push_dir = |(((child, ignored), before), id): DirItem<'s>,
                            parts: &mut Vec<Part>| {
            let memo = match &before {
                Some(Before::Memo(memo)) => Some(*memo),
                _ => None,
            };
            let watching = self.watching.as_ref();
            if keep_children
                && memo.is_some_and(|memo| memo.sources.tracked_only == ignored)
                && watching.is_some_and(|w| !w.must_read(child.as_ref()))
            {
                parts.push(Part::Kept(child));
                return;
            }
            parts.push(Part::Dir(id));
            jobs.push(DirJob {
                id,
                keep: keep_children && watching.is_some_and(|w| !w.whole(child.as_ref())),
                rel: child,
                anchor: anchor.clone(),
                below_anchor,
                rules: rules.clone(),
                excludes: excludes.clone(),
                tracked_only: ignored,
                before: before.unwrap_or(Before::Index(0..0)),
            });
        };
        for part in file_parts {
            let path = file_path(&part);
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
        Ok((parts, sources))
    }

    /// Open directory `path` below `anchor` one component at a time, never following a
    /// symlink; the project root when there is no anchor (`path` is then the rest below it).
    /// Costs one `openat` per component: one, unless directories ran over [`HELD_DIRS`].
    pub(super) fn open(&self, anchor: Option<&HeldDir<'_>>, path: &[u8]) -> io::Result<Dir> {
        let mut names = path.split(|&b| b == b'/').filter(|name| !name.is_empty());
        let mut fd = match anchor {
            Some(anchor) => {
                let first = names.next().ok_or(io::ErrorKind::InvalidInput)?;
                open_child(anchor.dir.dir()?, first)?
            }
            None => crate::fs::open_path(self.root)?,
        };
        for name in names {
            fd = open_child(fd.as_dir(), name)?;
        }
        Ok(fd)
    }

    /// The absolute path of project path `rel`.
    pub(super) fn abs(&self, rel: &BStr) -> PathBuf {
        self.root.join(crate::paths::os_path_lossy(rel))
    }

    /// Split what the previous snapshot knew of a directory whose path is `dir_len` bytes long
    /// into its files `(path, stat cache)` and its subdirectories, both in index order. From the
    /// index: one step per file plus a binary search per subdirectory; from a memo: one step per
    /// part plus a lookup per subdirectory.
    #[allow(clippy::type_complexity)]
    pub(super) fn split_cached<'b>(
        &'b self,
        before: &Before<'a>,
        dir_len: usize,
    ) -> (Vec<(&'b BStr, Prev)>, Vec<(&'b BStr, Before<'a>)>)
    where
        'a: 'b,
    {
        let (mut files, mut dirs) = (Vec::new(), Vec::new());
        let range = match before {
            Before::Memo(memo) => {
                for part in &memo.parts {
                    match part {
                        Part::File(file) => files.push((file.path.as_bstr(), memo.prev(file))),
                        Part::Kept(dir) => {
                            let watching = self.watching.as_ref();
                            if let Some(memo) = watching.and_then(|w| w.memo_of(dir.as_ref())) {
                                dirs.push((dir.as_bstr(), Before::Memo(memo)));
                            }
                        }
                        _ => {}
                    }
                }
                return (files, dirs);
            }
            Before::Index(range) => range.clone(),
        };
        let entries = self.previous.entries();
        let prefix_len = if dir_len == 0 { 0 } else { dir_len + 1 };
        let mut i = range.start;
        while i < range.end {
            let entry = &entries[i];
            let path = entry.path(self.previous);
            match path[prefix_len..].find_byte(b'/') {
                None => {
                    let prev = Prev {
                        stat: entry.stat,
                        id: entry.id,
                        mode: entry.mode,
                        racy_from: self.previous_time,
                    };
                    files.push((path, prev));
                    i += 1;
                }
                Some(slash) => {
                    let block = &path[..prefix_len + slash + 1];
                    let len = entries[i..range.end]
                        .partition_point(|e| e.path(self.previous).starts_with(block));
                    dirs.push((&path[..prefix_len + slash], Before::Index(i..i + len)));
                    i += len;
                }
            }
        }
        (files, dirs)
    }

    /// Stat one file and settle it from the previous snapshot's record of it (`cached`) when its
    /// stat proves it unchanged. Costs one `fstatat` relative to `dir`.
    pub(super) fn look(
        &self,
        rel: BString,
        name_start: usize,
        dir: DirRef<'_>,
        cached: Option<Prev>,
    ) -> Looked {
        let found = match stat_at(dir, &rel[name_start..]) {
            Ok(found) => found,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Looked::Vanished,
            Err(e) => return Looked::Settled(Part::Skipped(unreadable(rel, &e))),
        };
        self.progress.step();
        let mode = match found.kind {
            Kind::Symlink => Mode::SYMLINK,
            Kind::File if found.mode & 0o100 != 0 => Mode::FILE_EXECUTABLE,
            Kind::File => Mode::FILE,
            // Listed as a file, a directory by now: this snapshot leaves it out.
            Kind::Dir => return Looked::Vanished,
            // FIFOs, sockets, devices: never opened (reading a FIFO would hang).
            Kind::Special => {
                return Looked::Settled(Part::Skipped(Skipped {
                    path: rel,
                    reason: SkipReason::SpecialFile,
                    detail: None,
                }))
            }
        };
        let (size, perm, stat, links) = (found.size, found.mode, found.stat, found.links);
        // Above the size cap, a file stays in only if the previous snapshot held it: the last
        // one any process recorded, where it can be read, else the stat cache's (r78 (2), r81).
        let over_cap = mode != Mode::SYMLINK && size > self.max_file_size;
        let held_last = || {
            self.last_snapshot
                .as_ref()
                .and_then(|l| l.holds(rel.as_ref()))
        };
        let left_out = over_cap && !held_last().unwrap_or(cached.is_some());
        match cached {
            _ if left_out => Looked::Settled(Part::Skipped(Skipped {
                path: rel,
                reason: SkipReason::TooLarge,
                detail: Some(format!("{size} bytes, cap {}", self.max_file_size)),
            })),
            Some(prev)
                if prev.mode == mode
                    && prev.stat.matches(&stat, STAT_OPTIONS)
                    && !is_racy(&prev.stat, prev.racy_from) =>
            {
                Looked::Settled(Part::File(FileEntry {
                    path: rel,
                    stat,
                    id: prev.id,
                    mode,
                    perm,
                    links,
                    hashed: false,
                }))
            }
            _ => Looked::Read {
                path: rel,
                name_start,
                stat,
                mode,
                perm,
                size,
                links,
                previous: cached.map(|prev| (prev.id, prev.mode)),
            },
        }
    }

    /// Read file `rel` (or a symlink's target), whose name starts at `name_start` and which
    /// lives in directory `dir`, and write it as a blob; `file` is what its `stat` said.
    /// `Ok(None)`: it vanished. Costs a read, a hash, and zlib plus a file write when the blob
    /// is new.
    pub(super) fn read(
        &self,
        rel: BString,
        dir: DirRef<'_>,
        name_start: usize,
        (stat, mode, perm, links): (Stat, Mode, u32, u64),
        size: u64,
    ) -> Result<Option<Part>> {
        let name = &rel[name_start..];
        let content = match mode {
            Mode::SYMLINK => match crate::fs::read_link_in(dir, name) {
                Ok(target) => Ok(self.objects.write(gix::objs::Kind::Blob, &target)?),
                Err(e) => Err(e),
            },
            _ => match crate::paths::os_path(name) {
                Ok(name) => self.blob_from_file(dir, name, size)?,
                Err(e) => Err(e),
            },
        };
        Ok(match content {
            Ok(id) => Some(Part::File(FileEntry {
                path: rel,
                stat,
                id,
                mode,
                perm,
                links,
                hashed: true,
            })),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) if crate::fs::out_of_resources(&e) => {
                let path = self.root.join(crate::paths::os_path_lossy(rel.as_ref()));
                return Err(Error::io("reading", &path, e));
            }
            Err(e) => Some(Part::Skipped(unreadable(rel, &e))),
        })
    }

    /// Read file `name` of directory `dir` and write it as a blob. The outer error is about
    /// writing the store, the inner one about reading the project file.
    pub(super) fn blob_from_file(
        &self,
        dir: DirRef<'_>,
        name: &Path,
        size: u64,
    ) -> Result<io::Result<ObjectId>> {
        let mut file = match crate::fs::open_regular(dir, name, false) {
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
pub(super) fn pair_sorted<T, C: Clone>(
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

/// The path of a file's part (a file, or a file left out).
fn file_path(part: &Part) -> &BString {
    match part {
        Part::File(file) => &file.path,
        Part::Skipped(skip) => &skip.path,
        Part::Dir(_)
        | Part::Kept(_)
        | Part::Hidden(_)
        | Part::PrivateDir(..)
        | Part::Nested(..) => {
            unreachable!("files only")
        }
    }
}

/// `parent/name`, or `name` at the root.
pub(super) fn join(parent: &BStr, name: &[u8]) -> BString {
    let mut path = BString::from(Vec::with_capacity(parent.len() + 1 + name.len()));
    if !parent.is_empty() {
        path.extend_from_slice(parent);
        path.push(b'/');
    }
    path.extend_from_slice(name);
    path
}

pub(super) fn unreadable(path: BString, error: &io::Error) -> Skipped {
    Skipped {
        path,
        reason: SkipReason::Unreadable,
        detail: Some(error.to_string()),
    }
}
