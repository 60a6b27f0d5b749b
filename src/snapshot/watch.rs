//! Snapshots that cost what changed: a file-system watcher on the project, and a memo of the
//! last walk.
//!
//! [`Store::watch`] puts an inotify watch on every directory a snapshot reads (added through
//! the directory's descriptor before it is listed, so a change after the listing is an event,
//! and never through a symlink). The walk's result is kept in memory, directory by directory:
//! its files with their stat and blob id, what it left out, its tree. The next snapshot reads
//! the queued events, and then reads again only the directories that had one, their
//! ancestors, and the directories whose state no watch covers; every other directory, with all
//! below it, is kept from the memo as it was. Reading a directory again is the same code a full
//! walk runs, with the memo as its stat cache, so a kept directory is one a full walk would
//! have read the same.
//!
//! The watcher vouches for nothing it cannot see, and the snapshot then walks everything (with
//! the store's index as its stat cache, as without a watcher): the first snapshot; a queue
//! overflow; a watch that could not be added (the `fs.inotify.max_user_watches` limit); the
//! project directory itself moved or gone; a changed size cap or `rewind.nestedRepos`; ignore
//! rules or the git index outside the project changed; the store's packs changed (a prune: the
//! memo's objects may be gone); a snapshot that failed half-way; a mount made or removed; a
//! file seen with a second name (a hard link) it did not have, or a file made and removed again
//! before a walk vouched for it (it may have been such a name, written through; a walk reads the
//! events queued while it ran before it returns). Every file is read again, with the watches
//! kept, when a walk watched a directory no watch covered before (made or moved in since, or no
//! longer ignored): a name made in it before its watch, written through and removed, left no
//! event; at once after a partial walk, and at the next snapshot after a full walk (there only
//! a write while it ran is unseen). Directories read at every
//! snapshot: those holding a `.git` (another repository's `HEAD` and rules are not watched),
//! those holding a file with hard links (a change through another name reaches no watch here),
//! and those holding a mount point (a file mounted from elsewhere is written through its other
//! name).
//! What no watch sees at all (writes through a shared `mmap`, changes on another machine of a
//! network file system) is documented as a limit in `docs/design.md`.

use std::collections::{HashMap, HashSet};
use std::io;
use std::sync::Mutex;

use gix::bstr::{BStr, BString, ByteSlice};
use gix::index::entry::{stat, Mode};
use gix::ObjectId;
use rayon::prelude::*;
use serde::Serialize;

use super::ignore::Excludes;
use super::tree::{entry_mode, write_tree};
use super::walk::{Before, Prev};
use super::{FileEntry, Part, Snapshot, TrackOptions};
use crate::error::Result;
use crate::fs::{DirRef, Inotify, WatchEvent};
use crate::store::objects::{lock, ObjectWriter};
use crate::store::{Locked, NestedRepos, SnapshotId, Store};

/// Whether a store's file-system watcher is on, and what it has done.
#[derive(Debug, Clone, Default, Serialize)]
#[non_exhaustive]
pub struct WatchStatus {
    /// Snapshots read only what changed.
    pub active: bool,
    /// Why it is not active (`None` when it is).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Directories watched.
    pub directories: usize,
    /// Snapshots that walked the whole project.
    pub full_walks: u64,
    /// Snapshots that read only the directories with events.
    pub partial_walks: u64,
    /// Snapshots that found no event at all (and read nothing).
    pub unchanged: u64,
    /// Why the last full walk was needed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_full_walk: Option<String>,
}

impl Store {
    /// Watch the project for changes, so that each [`track`](Store::track) (and every other
    /// snapshot: a restore's undo point, a turn's end) reads only the directories that changed.
    /// The first snapshot after this walks everything, and so does the one after it (with the
    /// watches in place: the first watched each directory as it went, and a write while it ran,
    /// through a hard link in a directory it had not reached, reached no watch); so does a
    /// snapshot after a directory was made or moved in. Where no watcher can run (not Linux, no
    /// `/proc`, too many directories for `fs.inotify.max_user_watches`) the status says why, and
    /// snapshots walk the whole project as they do without one.
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), &rewind::OpenOptions::new("/tmp/rewind"))?;
    /// let status = store.watch();
    /// if !status.active {
    ///     eprintln!("every snapshot walks the project: {}", status.reason.unwrap_or_default());
    /// }
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn watch(&self) -> WatchStatus {
        let watcher = match Inotify::new() {
            Ok(inotify) => Watcher::new(Some(inotify), None),
            Err(e) => Watcher::new(None, Some(format!("no file-system watcher: {e}"))),
        };
        let status = watcher.status();
        *lock(&self.watcher) = Some(Box::new(watcher));
        status
    }

    /// The watcher's state. Before [`watch`](Store::watch), inactive, with a reason that says
    /// whether one could run here.
    pub fn watch_status(&self) -> WatchStatus {
        if let Some(watcher) = watcher_in(&mut lock(&self.watcher)) {
            return watcher.status();
        }
        let reason = match Inotify::new() {
            Ok(_) => format!(
                "not started in this process (`rewind serve` starts one unless given \
                 `--no-watch`; inotify is available, {})",
                watch_limit()
            ),
            Err(e) => format!("no file-system watcher here: {e}"),
        };
        WatchStatus {
            reason: Some(reason),
            ..WatchStatus::default()
        }
    }

    /// Stop watching: snapshots walk the whole project again. What the watcher knew of the
    /// files' stat goes to the store's stat cache, so the next snapshot reads no file twice.
    pub fn unwatch(&self) {
        let mut slot = lock(&self.watcher).take();
        let Some(memo) = watcher_in(&mut slot).and_then(|w| w.memo.take()) else {
            return;
        };
        if let Ok(store) = self.lock() {
            if let Err(e) = memo.save_index(&store.git_dir().join("index")) {
                tracing::warn!(error = %e, "the watcher's stat cache was not saved");
            }
        }
    }
}

/// The watcher in a store's slot.
pub(crate) fn watcher_in(slot: &mut Option<Box<dyn std::any::Any + Send>>) -> Option<&mut Watcher> {
    slot.as_mut()?.downcast_mut::<Watcher>()
}

/// A store's watcher: the inotify instance, which directory each watch is on, the memo of the
/// last walk, and what the events since said.
pub(crate) struct Watcher {
    inotify: Option<Inotify>,
    /// Why there is no inotify instance.
    why_not: Option<String>,
    /// Watch descriptor to the project directories it watches: one, unless a bind mount shows
    /// one directory at two paths (inotify gives one watch per directory).
    wds: HashMap<i32, Vec<BString>>,
    memo: Option<Memo>,
    pending: Pending,
    /// The names made that no walk has vouched for yet.
    made: Made,
    status: WatchStatus,
}

/// What the events since the last snapshot said.
#[derive(Default)]
struct Pending {
    /// Walk everything, for this reason.
    full: Option<String>,
    /// Directories to read again.
    dirty: HashSet<BString>,
    /// Directories to read again with everything below them (they came, went or moved).
    whole: HashSet<BString>,
    /// Read every directory again with the watches kept, for this reason: the last walk
    /// watched a directory no watch covered before, and a write through a hard link made in it
    /// before its watch reached no watch (r106 (A)).
    restat: Option<String>,
}

impl Watcher {
    fn new(inotify: Option<Inotify>, why_not: Option<String>) -> Watcher {
        Watcher {
            inotify,
            why_not,
            wds: HashMap::new(),
            memo: None,
            pending: Pending::default(),
            made: Made::default(),
            status: WatchStatus::default(),
        }
    }

    pub(crate) fn is_active(&self) -> bool {
        self.inotify.is_some()
    }

    fn status(&self) -> WatchStatus {
        WatchStatus {
            active: self.inotify.is_some(),
            reason: self.why_not.clone(),
            directories: self.wds.len(),
            ..self.status.clone()
        }
    }

    /// Count a snapshot that walked everything without it (it is off).
    pub(crate) fn count_walk_while_off(&mut self) {
        self.status.full_walks += 1;
        self.status.last_full_walk = self.why_not.clone();
    }

    /// Stop watching, for `reason`; snapshots walk everything from now on.
    fn deactivate(&mut self, reason: String) {
        tracing::warn!(%reason, "file-system watcher off");
        self.inotify = None;
        self.why_not = Some(reason);
        self.wds.clear();
        self.memo = None;
    }

    /// Snapshot the project, reading only what the events since the last snapshot name (or
    /// everything, when the watcher cannot vouch for the rest). Costs the queued events, one
    /// `stat` per file of each directory read again, and one tree write per changed directory.
    pub(crate) fn snapshot(
        &mut self,
        store: &Locked<'_>,
        options: &TrackOptions,
    ) -> Result<Snapshot> {
        self.drain();
        let max_file_size = options
            .max_file_size
            .map_or_else(|| store.max_file_size(), Ok)?;
        let nested_repos = store.nested_repos()?;
        let excludes = Excludes::load(store.project());
        let generation = store.objects().generation();
        let full = self.pending.full.take().or_else(|| {
            let memo = self.memo.as_ref()?;
            let reason = if memo.max_file_size != max_file_size {
                "the size cap is another"
            } else if memo.nested_repos != nested_repos {
                "rewind.nestedRepos changed"
            } else if memo.generation != generation {
                "the store's packs changed"
            } else if memo.excludes != excludes.fingerprint() {
                "ignore rules or the git index outside the project changed"
            } else if memo.mounts != crate::fs::mounts_of(store.project()) {
                "a file system was mounted or unmounted"
            } else if !store.objects().contains(&memo.snapshot.hash.0) {
                "the last snapshot's tree is gone from the store"
            } else if crate::fs::directory_at(store.project()).ok() != Some(memo.root) {
                // (A directory above it moved: no watch here sees that; r78 (4).)
                "another directory stands at the project's path"
            } else {
                return None;
            };
            Some(reason.to_string())
        });
        let full = match (&self.memo, full) {
            (None, _) => Some("first snapshot".to_string()),
            (_, full) => full,
        };
        let config = (max_file_size, nested_repos);
        let outcome = match full {
            Some(reason) => self.full_walk(store, options, reason, config),
            None => {
                let restat = self.pending.restat.take();
                self.partial_walk(store, options, excludes, config, restat)
            }
        };
        if outcome.is_err() {
            // The events it consumed are lost with it.
            self.pending.full = Some("the last snapshot failed".into());
        }
        outcome
    }

    /// Walk everything with the index as the stat cache, watching every directory anew.
    fn full_walk(
        &mut self,
        store: &Locked<'_>,
        options: &TrackOptions,
        reason: String,
        (max_file_size, nested_repos): (u64, NestedRepos),
    ) -> Result<Snapshot> {
        self.status.full_walks += 1;
        self.status.last_full_walk = Some(reason);
        // The index is as old as the last full walk: bring it up to the memo, so that this walk
        // starts from the last snapshot (its stat cache, and the files the size cap keeps).
        if let Some(memo) = self.memo.take() {
            memo.save_index(&store.git_dir().join("index"))?;
        }
        self.wds.clear();
        self.pending = Pending::default();
        // (It reads every directory after the events so far, and a name made since that is a
        // second name of a file holds that file's directory to reading at every snapshot.)
        self.made = Made::default();
        // A new instance: every old watch and queued event goes with the old one.
        self.inotify = match Inotify::new() {
            Ok(inotify) => Some(inotify),
            Err(e) => {
                self.deactivate(format!("no file-system watcher: {e}"));
                return store.peek_unwatched(options, None);
            }
        };
        let inotify = self.inotify.as_ref().expect("made above");
        let watching = Watching::new(inotify, None, Default::default());
        // (Before the walk: a mount made, or a directory put at the project's path, while it
        // runs is seen by the next snapshot.)
        let mounts = crate::fs::mounts_of(store.project());
        let root = crate::fs::directory_at(store.project());
        let snapshot = store.peek_unwatched(options, Some(&watching))?;
        let walked = watching.finish();
        if let Some(e) = walked.failed {
            self.deactivate(watch_failure(&e));
            return Ok(snapshot);
        }
        self.register(walked.registered);
        let root = match root {
            Ok(root) => root,
            Err(e) => {
                self.deactivate(format!("the project directory cannot be looked at: {e}"));
                return Ok(snapshot);
            }
        };
        let mut memo = Memo {
            root,
            dirs: HashMap::new(),
            volatile: HashSet::new(),
            mount_parents: mount_parents(store.project(), &mounts),
            excludes: walked.excludes,
            mounts,
            max_file_size,
            nested_repos,
            generation: store.objects().generation(),
            snapshot: snapshot.clone(),
            gone: Vec::new(),
            new_links: false,
        };
        let dirs = walked.dirs.unwrap_or_default();
        let root = memo.update(dirs, walked.reads, store.objects())?;
        if root != Some(snapshot.hash.0) {
            self.deactivate(format!(
                "internal: the memo's tree {root:?} is not the walk's {}",
                snapshot.hash
            ));
            return Ok(snapshot);
        }
        self.memo = Some(memo);
        // Every watch is new: a write while it ran through a hard link made in a directory it
        // had not watched yet reached no watch. The next snapshot reads every file again.
        self.pending.restat = Some("the last full walk watched every directory anew".into());
        Ok(snapshot)
    }

    /// Read again the directories the events name (and their ancestors, and the volatile
    /// ones); keep every other one from the memo. With `restat`, the reason, read every
    /// directory again (the memo as the stat cache, the watches kept).
    fn partial_walk(
        &mut self,
        store: &Locked<'_>,
        options: &TrackOptions,
        excludes: Excludes,
        config: (u64, NestedRepos),
        restat: Option<String>,
    ) -> Result<Snapshot> {
        let memo = self.memo.as_mut().expect("checked by the caller");
        let mut pending = std::mem::take(&mut self.pending);
        let mut reread = HashSet::new();
        for dir in pending
            .dirty
            .iter()
            .chain(&pending.whole)
            .chain(&memo.volatile)
            .chain(&memo.mount_parents)
        {
            let mut dir = dir.as_bstr();
            while reread.insert(BString::from(dir)) && !dir.is_empty() {
                dir = dir
                    .rfind_byte(b'/')
                    .map_or(BStr::new(""), |slash| &dir[..slash]);
            }
        }
        match &restat {
            Some(reason) => {
                self.status.full_walks += 1;
                self.status.last_full_walk = Some(reason.clone());
                pending.whole.insert(BString::default());
            }
            None if reread.is_empty() => {
                self.status.unchanged += 1;
                return Ok(memo.snapshot.clone());
            }
            None => self.status.partial_walks += 1,
        }
        let inotify = self.inotify.as_ref().expect("the caller checked");
        let plan = Plan {
            reread,
            whole: pending.whole,
        };
        let watching = Watching::new(inotify, Some(&*memo), plan);
        let root = memo
            .dirs
            .get(b"".as_bstr())
            .expect("the memo holds the root");
        store.walk_watched(options, excludes, &watching, Before::Memo(root))?;
        let walked = watching.finish();
        if let Some(e) = walked.failed {
            let reason = watch_failure(&e);
            // The index is as old as the last full walk: brought up to the memo first, so that
            // the walks from now on start from the last snapshot (r78 (2)).
            if let Some(memo) = self.memo.take() {
                memo.save_index(&store.git_dir().join("index"))?;
            }
            self.deactivate(reason);
            return store.peek_unwatched(options, None);
        }
        let memo = self.memo.as_mut().expect("checked by the caller");
        let dirs = walked.dirs.unwrap_or_default();
        memo.new_links = false;
        memo.update(dirs, walked.reads, store.objects())?;
        if memo.new_links {
            // Its other names may be anywhere: this snapshot walks everything.
            let reason = "a file got a second name (a hard link)".to_string();
            return self.full_walk(store, options, reason, config);
        }
        let gone = std::mem::take(&mut memo.gone);
        memo.snapshot = memo.summary();
        let snapshot = memo.snapshot.clone();
        // A directory no watch covered before this walk: a name made in it before its watch
        // (a hard link to a file anywhere), written through and removed, left no event.
        // (Not one removed again: rewind's own data directory.)
        let mut unwatched_before = HashSet::new();
        for (wd, rel) in &walked.registered {
            match rel {
                Some(_) if !self.wds.contains_key(wd) => unwatched_before.insert(*wd),
                Some(_) => false,
                None => unwatched_before.remove(wd),
            };
        }
        self.register(walked.registered);
        if !gone.is_empty() {
            // Their watches, unless a directory read in this walk (the same one, moved) took one.
            let gone: HashSet<BString> = gone.into_iter().collect();
            let inotify = self.inotify.as_ref().expect("the caller checked");
            self.wds.retain(|wd, paths| {
                paths.retain(|rel| !gone.contains(rel));
                if paths.is_empty() {
                    inotify.unwatch(*wd);
                }
                !paths.is_empty()
            });
        }
        // The events queued while it walked (kept for the next snapshot): a name made before
        // it that went again before it listed its directory shows only now, and this snapshot
        // may have missed a write through it.
        self.made.walked();
        self.drain();
        if let Some(reason) = self.pending.full.take() {
            return self.full_walk(store, options, reason, config);
        }
        if !unwatched_before.is_empty() {
            let reason = "a directory no watch covered before (made or moved in since, or no \
                          longer ignored)";
            match restat {
                // Its history before this snapshot is unseen: every file is read again now.
                None => {
                    let excludes = Excludes::load(store.project());
                    return self.partial_walk(
                        store,
                        options,
                        excludes,
                        config,
                        Some(reason.into()),
                    );
                }
                // Read again after this snapshot began: only a write while it ran is unseen.
                Some(_) => self.pending.restat = Some(reason.into()),
            }
        }
        self.made.vouched();
        Ok(snapshot)
    }

    /// Record the watches a walk added (`None`: removed again).
    fn register(&mut self, registered: Vec<(i32, Option<BString>)>) {
        for (wd, rel) in registered {
            match rel {
                Some(rel) => {
                    let paths = self.wds.entry(wd).or_default();
                    if !paths.contains(&rel) {
                        paths.push(rel);
                    }
                }
                None => {
                    self.wds.remove(&wd);
                }
            }
        }
    }

    /// Read the queued events into `pending`. Costs one `read` per 64 KiB of events.
    fn drain(&mut self) {
        let Some(inotify) = &self.inotify else { return };
        let (wds, pending) = (&self.wds, &mut self.pending);
        let mut gone = Vec::new();
        // Files and directories made since a walk last vouched for them: a file name made that
        // goes again (removed, renamed over, moved out of the project, or in a directory made
        // and removed again) may have been a second name (a hard link) of a file elsewhere,
        // written through and gone before anything looked.
        let made = &mut self.made;
        let drained = inotify.drain(|event| match event {
            WatchEvent::Overflow => {
                pending.full = Some("the kernel's event queue overflowed".into());
            }
            WatchEvent::Gone { wd } => {
                for rel in wds.get(&wd).into_iter().flatten() {
                    pending.went(rel.as_ref());
                }
                gone.push(wd);
            }
            WatchEvent::Changed {
                wd,
                name,
                is_dir,
                moved,
                created,
                deleted,
                moved_from,
                moved_to,
                cookie,
            } => {
                for rel in wds.get(&wd).into_iter().flatten() {
                    let Some(name) = name else {
                        match moved {
                            true => pending.went(rel.as_ref()),
                            false => {
                                pending.dirty.insert(rel.clone());
                            }
                        }
                        continue;
                    };
                    pending.dirty.insert(rel.clone());
                    let child = super::walk::join(rel.as_ref(), name);
                    match (is_dir, moved) {
                        (true, true) => {
                            pending.whole.insert(child.clone());
                        }
                        (true, false) => {
                            pending.dirty.insert(child.clone());
                        }
                        (false, _) => {}
                    }
                    // (Not the temp files of this process's restores: they are staged,
                    // swapped and removed. A name only like theirs is anyone's.)
                    let own = !is_dir && crate::store::is_own_temp(name);
                    if let Some(reason) = made.saw(
                        child,
                        is_dir,
                        own,
                        (created, deleted),
                        (moved_from, moved_to, cookie),
                    ) {
                        pending.full = Some(reason.into());
                    }
                }
            }
        });
        if let Err(e) = drained {
            pending.full = Some(format!("reading the watcher's events failed: {e}"));
        }
        if let Some(reason) = made.moved_out() {
            pending.full = Some(reason.into());
        }
        made.moving.clear();
        for wd in gone {
            self.wds.remove(&wd);
        }
    }
}

/// The names made that no walk has vouched for yet, followed through the events: where one
/// goes again, a second name (a hard link) of a file elsewhere may have been written through
/// and gone. A walk vouches for the names made before it began only once the events queued
/// while it ran are read too: a name made, then gone before the walk listed its directory, is
/// gone in an event the walk's own reading comes before (found by the differential test).
#[derive(Default)]
struct Made {
    /// Each made name, with the round of events it was made in.
    files: HashMap<BString, u64>,
    dirs: HashMap<BString, u64>,
    /// The numbers of the renames that took made names away: the half that comes in names
    /// where they went (none: out of the project).
    moving: HashSet<u32>,
    /// The round of events being read: one more after each walk.
    round: u64,
}

impl Made {
    /// Follow one event on `path` (a directory: `is_dir`; one of this process's restores'
    /// temp files: `own`): the reason for a full walk, when a made name goes again. Costs a
    /// map lookup or two (a scan of the made files when a made directory moves).
    fn saw(
        &mut self,
        path: BString,
        is_dir: bool,
        own: bool,
        (created, deleted): (bool, bool),
        (moved_from, moved_to, cookie): (bool, bool, u32),
    ) -> Option<&'static str> {
        let set = match is_dir {
            true => &mut self.dirs,
            false => &mut self.files,
        };
        if created {
            if !own {
                set.insert(path, self.round);
            }
        } else if deleted && set.contains_key(&path) {
            return Some(match is_dir {
                true => "a directory was made and removed again (it may have held a hard link)",
                false => "a file was made and removed again (maybe a hard link)",
            });
        } else if moved_to {
            if !is_dir && set.contains_key(&path) {
                return Some("a file made since was renamed over (maybe a hard link)");
            }
            // (A name moved in is made, whether its other half was (a made name moved) or not:
            // from outside the project, or from a directory not watched yet, r106 (B).)
            self.moving.remove(&cookie);
            if !own {
                set.insert(path, self.round);
            }
        } else if moved_from {
            let was_made = match is_dir {
                true => {
                    // (Or it holds made files or directories: r106 (C).)
                    let prefix = [path.as_slice(), b"/"].concat();
                    let below = |name: &BString| name.starts_with(&prefix);
                    let holds_made = self.files.keys().any(below) || self.dirs.keys().any(below);
                    self.dirs.remove(&path).is_some() | holds_made
                }
                false => self.files.remove(&path).is_some(),
            };
            if was_made {
                self.moving.insert(cookie);
            }
        }
        None
    }

    /// The reason for a full walk when a made name was renamed out of the project (no half of
    /// its rename came in).
    fn moved_out(&self) -> Option<&'static str> {
        (!self.moving.is_empty())
            .then_some("a name made since was moved out of the project (maybe a hard link)")
    }

    /// A walk ended: the events read from now on came after it began.
    fn walked(&mut self) {
        self.round += 1;
    }

    /// The events queued while the last walk ran are read, and none took a name made before
    /// it away: it vouches for those names (it read their directories after they were made,
    /// and one that was a second name then held its file's directory to reading at every
    /// snapshot). Costs a pass over the made names.
    fn vouched(&mut self) {
        let round = self.round;
        self.files.retain(|_, made| *made == round);
        self.dirs.retain(|_, made| *made == round);
    }
}

impl Pending {
    /// Directory `rel` moved, or went: read it again whole, and its parent.
    fn went(&mut self, rel: &BStr) {
        match rel.rfind_byte(b'/') {
            _ if rel.is_empty() => {
                self.full = Some("the project directory moved or went".into());
            }
            Some(slash) => {
                self.dirty.insert(rel[..slash].into());
            }
            None => {
                self.dirty.insert(BString::default());
            }
        }
        self.whole.insert(rel.into());
    }
}

/// The inotify watch limit that holds here, as `sysctl` names it: the system's, or the user
/// namespace's when that is lower (a rootless container has its own; r78 (5)). Costs two
/// reads of `/proc`.
fn watch_limit() -> String {
    let read = |name: &'static str| {
        let path = format!("/proc/sys/{}", name.replace('.', "/"));
        let value = std::fs::read_to_string(path)
            .ok()?
            .trim()
            .parse::<u64>()
            .ok()?;
        Some((value, name))
    };
    let limits = [
        read("fs.inotify.max_user_watches"),
        read("user.max_inotify_watches"),
    ];
    match limits.into_iter().flatten().min() {
        Some((value, name)) => format!("{name} = {value}"),
        None => "fs.inotify.max_user_watches = ?".into(),
    }
}

/// The message for a watch that could not be added.
fn watch_failure(error: &io::Error) -> String {
    match error.raw_os_error() {
        Some(28) => format!(
            "the inotify watch limit is reached ({}); raise it with sysctl, then start the \
             watcher again (restart `rewind serve`)",
            watch_limit()
        ),
        _ => format!("a directory could not be watched: {error}"),
    }
}

/// The last walk, directory by directory, and what it was made under.
pub(super) struct Memo {
    dirs: HashMap<BString, MemoDir>,
    /// Directories read at every snapshot (see [`Sources::volatile`]).
    volatile: HashSet<BString>,
    /// [`Excludes::fingerprint`] of the rules from outside the project.
    excludes: Vec<u8>,
    /// [`crate::fs::mounts_of`] the project when it was made.
    mounts: Vec<u8>,
    /// The directories holding a mount point, read at every snapshot: a file mounted over
    /// one of theirs from elsewhere (`mount --bind`) is written through its other name, and
    /// the event goes to the watch on that name's directory, not theirs.
    mount_parents: Vec<BString>,
    /// What directory the project path named when it was made ([`crate::fs::directory_at`]):
    /// the watches are on that one, wherever it is now.
    root: (u32, u32),
    /// The last [`Memo::update`] found a file with hard links that the memo did not have as one:
    /// its other names may be in directories no event marked.
    new_links: bool,
    max_file_size: u64,
    nested_repos: NestedRepos,
    /// [`ObjectWriter::generation`] when it was made.
    generation: u64,
    /// The snapshot it makes.
    snapshot: Snapshot,
    /// Directories the last [`Memo::update`] dropped.
    gone: Vec<BString>,
}

/// One directory as the last walk that read it saw it.
pub(super) struct MemoDir {
    /// Its parts in index order, each subdirectory as [`Part::Kept`].
    pub(super) parts: Vec<Part>,
    /// How many of its parts are files.
    files: usize,
    /// The parts a summary reads (all but plain files, which it only counts): subdirectories,
    /// private files, what was left out.
    listed: Vec<usize>,
    /// Its tree; `None` when no file is below it (its parent's tree leaves it out).
    tree: Option<ObjectId>,
    /// When it was read: a file whose mtime is not older may have changed unseen since.
    read_at: stat::Time,
    pub(super) sources: Sources,
}

impl MemoDir {
    /// The stat cache of one of its files.
    pub(super) fn prev(&self, file: &FileEntry) -> Prev {
        Prev {
            stat: file.stat,
            id: file.id,
            mode: file.mode,
            racy_from: self.read_at,
        }
    }
}

/// What a directory's rules came from, and whether a watch on it covers its state: a kept
/// subdirectory needs its parent's to be what the memo's were made under.
#[derive(Default, PartialEq, Eq)]
pub(super) struct Sources {
    /// Its `.gitignore`, read.
    pub(super) gitignore: Option<Vec<u8>>,
    /// The root of a nested repository: [`Excludes::fingerprint`] of its own rules.
    pub(super) nested: Option<Vec<u8>>,
    /// Ignored, walked only for the files the project's git index tracks.
    pub(super) tracked_only: bool,
    /// Read at every snapshot: it holds a `.git`, or a file with hard links.
    pub(super) volatile: bool,
}

/// One directory a walk read: its job id, its path, when, and its [`Sources`].
pub(super) struct ReadDir {
    id: usize,
    rel: BString,
    read_at: stat::Time,
    sources: Sources,
}

/// Which directories a partial walk reads.
#[derive(Default)]
pub(super) struct Plan {
    /// Read again (they had events, are above one, or are volatile).
    reread: HashSet<BString>,
    /// Read again with everything below them.
    whole: HashSet<BString>,
}

/// A walk under a watcher: what it reads again, and what it records.
pub(super) struct Watching<'a> {
    inotify: &'a Inotify,
    memo: Option<&'a Memo>,
    plan: Plan,
    /// Watches added (`None`: removed again).
    registered: Mutex<Vec<(i32, Option<BString>)>>,
    reads: Mutex<Vec<ReadDir>>,
    /// The first watch that could not be added.
    failed: Mutex<Option<io::Error>>,
    /// A full walk's parts by job id, and the outside rules' fingerprint.
    walked: Mutex<(Option<PartsById>, Vec<u8>)>,
}

/// A walk's parts, by directory job id.
type PartsById = Vec<Option<Vec<Part>>>;

/// What a [`Watching`] walk recorded.
struct Walked {
    registered: Vec<(i32, Option<BString>)>,
    reads: Vec<ReadDir>,
    failed: Option<io::Error>,
    dirs: Option<PartsById>,
    excludes: Vec<u8>,
}

impl<'a> Watching<'a> {
    fn new(inotify: &'a Inotify, memo: Option<&'a Memo>, plan: Plan) -> Watching<'a> {
        Watching {
            inotify,
            memo,
            plan,
            registered: Mutex::default(),
            reads: Mutex::default(),
            failed: Mutex::default(),
            walked: Mutex::default(),
        }
    }

    fn finish(self) -> Walked {
        let (dirs, excludes) = inner(self.walked);
        Walked {
            registered: inner(self.registered),
            reads: inner(self.reads),
            failed: inner(self.failed),
            dirs,
            excludes,
        }
    }

    /// Forget what an abandoned walk recorded (a snapshot taken again without its cache).
    pub(super) fn restart(&self) {
        lock(&self.reads).clear();
        *lock(&self.walked) = Default::default();
    }

    /// Keep a walk's parts by job id, with the fingerprint of the rules from outside the
    /// project it ran under.
    pub(super) fn keep(&self, dirs: PartsById, excludes: &Excludes) {
        *lock(&self.walked) = (Some(dirs), excludes.fingerprint().to_vec());
    }

    /// Watch directory `rel`, open as `dir`, before it is read; the watch descriptor, or `None`
    /// (the failure is kept: the watcher then stops).
    pub(super) fn register(&self, dir: DirRef<'_>, rel: &BStr) -> Option<i32> {
        match self.inotify.watch(dir) {
            Ok(wd) => {
                lock(&self.registered).push((wd, Some(rel.into())));
                Some(wd)
            }
            Err(e) => {
                lock(&self.failed).get_or_insert(e);
                None
            }
        }
    }

    /// Remove watch `wd` again (rewind's own data directory).
    pub(super) fn forget(&self, wd: i32) {
        self.inotify.unwatch(wd);
        lock(&self.registered).push((wd, None));
    }

    /// The moment a directory's reading starts, to date its files' stat by.
    pub(super) fn started(&self, rel: &BStr) -> (BString, stat::Time) {
        (rel.into(), racy_reference())
    }

    /// Record that job `id` read directory `rel` from `at` on, under `sources`.
    pub(super) fn read(&self, id: usize, (rel, read_at): (BString, stat::Time), sources: Sources) {
        lock(&self.reads).push(ReadDir {
            id,
            rel,
            read_at,
            sources,
        });
    }

    /// Whether directory `rel` must be read again.
    pub(super) fn must_read(&self, rel: &BStr) -> bool {
        self.plan.reread.contains(rel)
    }

    /// Whether everything below directory `rel` must be read again.
    pub(super) fn whole(&self, rel: &BStr) -> bool {
        self.plan.whole.contains(rel)
    }

    /// The memo of directory `rel`.
    pub(super) fn memo_of(&self, rel: &BStr) -> Option<&'a MemoDir> {
        self.memo?.dirs.get(rel)
    }
}

/// What `mutex` holds, even if a thread panicked holding it.
fn inner<T>(mutex: Mutex<T>) -> T {
    mutex.into_inner().unwrap_or_else(|p| p.into_inner())
}

/// A time no later than the file system's clock now: a file whose mtime is not older may be
/// written again within the same tick. The kernel stamps files from a coarse clock that lags
/// the precise one by up to a tick (at most 10 ms), so this is 50 ms before now.
fn racy_reference() -> stat::Time {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .saturating_sub(std::time::Duration::from_millis(50));
    stat::Time {
        secs: now.as_secs() as u32,
        nsecs: now.subsec_nanos(),
    }
}

impl Memo {
    /// Fold in the directories a walk read (`dirs` by job id, `reads` naming them): replace
    /// their memos, drop the subdirectories they no longer hold (listed in `gone`), and write
    /// the trees of the directories read, deepest first. Returns the root's tree. Costs one
    /// tree write per directory read.
    fn update(
        &mut self,
        mut dirs: PartsById,
        reads: Vec<ReadDir>,
        objects: &ObjectWriter,
    ) -> Result<Option<ObjectId>> {
        let rel_of: HashMap<usize, BString> = reads.iter().map(|r| (r.id, r.rel.clone())).collect();
        let mut gone = Vec::new();
        let mut read = Vec::with_capacity(reads.len());
        // Each directory read's tree before, and whether its entries are the same now.
        let mut before: HashMap<BString, (Option<ObjectId>, bool)> = HashMap::new();
        for ReadDir {
            id,
            rel,
            read_at,
            sources,
        } in reads
        {
            let parts: Vec<Part> = dirs
                .get_mut(id)
                .and_then(Option::take)
                .unwrap_or_default()
                .into_iter()
                .filter_map(|part| match part {
                    Part::Dir(child) => rel_of.get(&child).cloned().map(Part::Kept),
                    part => Some(part),
                })
                .collect();
            let old = self.dirs.remove(&rel);
            if let Some(old) = &old {
                let now: HashSet<&BString> = kept(&parts).collect();
                gone.extend(kept(&old.parts).filter(|c| !now.contains(c)).cloned());
                before.insert(rel.clone(), (old.tree, same_entries(&old.parts, &parts)));
            }
            self.new_links |= has_new_links(&parts, old.as_ref());
            match sources.volatile {
                true => self.volatile.insert(rel.clone()),
                false => self.volatile.remove(&rel),
            };
            let files = parts.iter().filter(|p| matches!(p, Part::File(_))).count();
            let listed = (0..parts.len())
                .filter(|&i| !is_plain_file(&parts[i]))
                .collect();
            let dir = MemoDir {
                parts,
                files,
                listed,
                tree: None,
                read_at,
                sources,
            };
            self.dirs.insert(rel.clone(), dir);
            read.push(rel);
        }
        // Subdirectories no longer listed, and all below them.
        let mut stack = gone;
        while let Some(rel) = stack.pop() {
            if let Some(dir) = self.dirs.remove(&rel) {
                stack.extend(kept(&dir.parts).cloned());
                self.volatile.remove(&rel);
                self.gone.push(rel);
            }
        }
        // Deepest first, each depth's trees in parallel: a tree needs only its subdirectories'.
        // One whose entries are the same, with no subdirectory's tree changed, is the tree it
        // was (not encoded and hashed again: most of a walk of everything).
        let depth =
            |rel: &BString| rel.iter().filter(|&&b| b == b'/').count() + !rel.is_empty() as usize;
        read.sort_unstable_by_key(|rel| std::cmp::Reverse(depth(rel)));
        let mut changed: HashSet<BString> = HashSet::new();
        for level in read.chunk_by(|a, b| depth(a) == depth(b)) {
            let trees: Vec<Option<ObjectId>> = level
                .par_iter()
                .map(|rel| match before.get(rel) {
                    Some(&(tree, true))
                        if !kept(&self.dirs[rel].parts).any(|c| changed.contains(c)) =>
                    {
                        Ok(tree)
                    }
                    _ => self.write_tree_of(rel, objects),
                })
                .collect::<Result<_>>()?;
            for (rel, tree) in level.iter().zip(trees) {
                if before.get(rel).is_none_or(|&(old, _)| old != tree) {
                    changed.insert(rel.clone());
                }
                self.dirs.get_mut(rel).expect("inserted above").tree = tree;
            }
        }
        Ok(self.dirs.get(b"".as_bstr()).and_then(|root| root.tree))
    }

    /// Write the tree of directory `rel` from its parts and its subdirectories' trees (`None`
    /// for a directory with no file below it, but the root). Costs one tree write.
    fn write_tree_of(&self, rel: &BString, objects: &ObjectWriter) -> Result<Option<ObjectId>> {
        let dir = &self.dirs[rel];
        let mut entries = Vec::with_capacity(dir.parts.len());
        for part in &dir.parts {
            let (path, mode, oid) = match part {
                Part::File(file) => (&file.path, entry_mode(file.mode), file.id),
                Part::Kept(child) => match self.dirs.get(child).and_then(|c| c.tree) {
                    Some(tree) => (child, gix::objs::tree::EntryKind::Tree.into(), tree),
                    None => continue,
                },
                _ => continue,
            };
            let name = path.rfind_byte(b'/').map_or(&path[..], |s| &path[s + 1..]);
            entries.push(gix::objs::tree::Entry {
                mode,
                filename: name.into(),
                oid,
            });
        }
        match entries.is_empty() && !rel.is_empty() {
            true => Ok(None),
            false => write_tree(objects, entries, rel).map(Some),
        }
    }

    /// Hand every part to `each` with its directory, in index order (depth first). Costs one
    /// step per part.
    /// `all`: every part; else only each directory's listed ones (no plain file).
    fn each_part<'m>(&'m self, all: bool, mut each: impl FnMut(&'m MemoDir, &'m Part)) {
        let Some(root) = self.dirs.get(b"".as_bstr()) else {
            return;
        };
        let parts = |dir: &'m MemoDir| -> Box<dyn Iterator<Item = &'m Part> + 'm> {
            match all {
                true => Box::new(dir.parts.iter()),
                false => Box::new(dir.listed.iter().map(|&i| &dir.parts[i])),
            }
        };
        let mut stack = vec![(root, parts(root))];
        while let Some((dir, next)) = stack.last_mut() {
            let dir = *dir;
            match next.next() {
                Some(Part::Kept(child)) => {
                    if let Some(child) = self.dirs.get(child) {
                        stack.push((child, parts(child)));
                    }
                }
                Some(part) => each(dir, part),
                None => {
                    stack.pop();
                }
            }
        }
    }

    /// Write the memo's files, with their stat, as the store's index: the stat cache of a
    /// snapshot without the watcher. An entry that may have changed unseen since its stat
    /// (racy) is written with no stat, so it is read again; the cache-tree is left out (the
    /// next such snapshot writes it). Costs one pass over the files and an index write.
    fn save_index(&self, index_path: &std::path::Path) -> Result<()> {
        let mut files = Vec::with_capacity(self.snapshot.files);
        self.each_part(true, |dir, part| {
            if let Part::File(file) = part {
                let mut file = file.clone();
                if super::cache::is_racy(&file.stat, dir.read_at) {
                    file.stat = Default::default();
                }
                files.push(file);
            }
        });
        let unknown = gix::index::extension::Tree {
            name: Default::default(),
            id: self.snapshot.hash.0,
            num_entries: None,
            children: Vec::new(),
        };
        super::cache::IndexWrite::start(index_path, &files)?.finish(&unknown)?;
        Ok(())
    }

    /// The snapshot the memo makes: its root tree, and what the directories left out and
    /// recorded, in path order. Costs one step per part (no system call).
    fn summary(&self) -> Snapshot {
        let root = self.dirs.get(b"".as_bstr());
        let mut snapshot = Snapshot {
            hash: SnapshotId(
                root.and_then(|r| r.tree)
                    .unwrap_or_else(|| ObjectId::empty_tree(gix::hash::Kind::Sha1)),
            ),
            files: 0,
            skipped: Vec::new(),
            private_modes: Vec::new(),
            hidden_outside: Vec::new(),
            nested: Vec::new(),
            // The project's: the memo's (a change to them makes a full walk).
            rules: self.snapshot.rules.iter().take(1).cloned().collect(),
        };
        snapshot.files = self.dirs.values().map(|dir| dir.files).sum();
        let mut private_dirs = Vec::new();
        let mut private_files = Vec::new();
        self.each_part(false, |_, part| match part {
            Part::File(file) => private_files.push(file),
            Part::Skipped(skip) => snapshot.skipped.push(skip.clone()),
            Part::Hidden(path) => snapshot.hidden_outside.push(path.clone()),
            Part::PrivateDir(path, perm) => private_dirs.push((path.clone(), *perm)),
            Part::Nested(path, rules) => {
                snapshot.nested.push(path.clone());
                snapshot.rules.push((path.clone(), rules.clone()));
            }
            Part::Kept(_) | Part::Dir(_) => unreachable!("each_part descends into them"),
        });
        super::finish_lists(&mut snapshot, private_files.into_iter(), private_dirs);
        snapshot
    }
}

/// A file a summary only counts: not narrower than 0644 (or a symlink).
fn is_plain_file(part: &Part) -> bool {
    matches!(part, Part::File(file) if file.mode == Mode::SYMLINK || file.perm & 0o644 == 0o644)
}

/// Whether `parts` hold a file with hard links that `old` (the directory's memo) did not hold
/// as one: by path and file (an inode), since a name that was a link may have become a link
/// to another file (r78 (3)). Costs one step per file, and a lookup per file with links.
fn has_new_links(parts: &[Part], old: Option<&MemoDir>) -> bool {
    let linked = |part: &Part| match part {
        Part::File(file) if file.links > 1 => {
            Some((file.path.clone(), file.stat.dev, file.stat.ino))
        }
        _ => None,
    };
    let mut new = parts.iter().filter_map(linked).peekable();
    if new.peek().is_none() {
        return false;
    }
    let before: HashSet<(BString, u32, u32)> = old
        .map(|old| old.parts.iter().filter_map(linked).collect())
        .unwrap_or_default();
    new.any(|link| !before.contains(&link))
}

/// The directories of `project` (relative) holding the mount points `mounts` (what
/// [`crate::fs::mounts_of`] gave for it) names inside it. Costs a pass over `mounts`.
fn mount_parents(project: &std::path::Path, mounts: &[u8]) -> Vec<BString> {
    let points = crate::fs::mount_points_inside(project, mounts);
    let parent = |point: Vec<u8>| match point.rfind_byte(b'/') {
        Some(slash) => BString::from(&point[..slash]),
        None => BString::default(),
    };
    points.into_iter().map(parent).collect()
}

/// Whether two listings of a directory give its tree the same entries (files by path, mode and
/// blob; subdirectories by path). Costs a pass over both.
fn same_entries(a: &[Part], b: &[Part]) -> bool {
    fn entries(parts: &[Part]) -> impl Iterator<Item = (&BString, Option<(Mode, ObjectId)>)> {
        parts.iter().filter_map(|part| match part {
            Part::File(file) => Some((&file.path, Some((file.mode, file.id)))),
            Part::Kept(dir) => Some((dir, None)),
            _ => None,
        })
    }
    entries(a).eq(entries(b))
}

/// The subdirectories among `parts`.
fn kept(parts: &[Part]) -> impl Iterator<Item = &BString> {
    parts.iter().filter_map(|part| match part {
        Part::Kept(dir) => Some(dir),
        _ => None,
    })
}
