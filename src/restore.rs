//! `restore` and `revert`: put the project's files back to a snapshot without ever losing a byte.
//!
//! Every run follows the same steps, under the store lock:
//! 1. Snapshot the project as it is now: that tree is the `undo`.
//! 2. Plan: the paths whose snapshot entry differs from the target's. Only paths in the current
//!    snapshot or in the target are ever touched. A path the target lacks is deleted only if
//!    the target could have seen it (see [`crate::snapshot::visibility`]): a file that was ignored, too
//!    large, special or inside a nested repository the target left out is `kept`.
//! 3. Check: every blob the plan writes is read from the store first; a missing or corrupt
//!    object stops the run before any file changes. What stands on disk is looked at through
//!    directory descriptors: a path the target adds where something outside the current
//!    snapshot stands (an ignored file, a nested repository, a FIFO) is a conflict (with
//!    `force`, a file or symlink there is saved into the undo tree first and replaced).
//! 4. Record the undo point (`refs/rewind/undo`) and the journal. Stage: each new file is
//!    written to a temp file in its directory, in parallel; then one `syncfs` per file system
//!    makes the undo point, the journal and the temp files durable together, before any project
//!    file changes.
//! 5. Apply: deletions, then the swaps, in parallel: each old file is swapped with its new one
//!    in one step (`RENAME_EXCHANGE`), and what came out is read: only the undo point's bytes
//!    are removed; anything else (a save made meanwhile) is swapped back (a conflict). So a
//!    `kill -9` or a power cut leaves every file old or new, and a save made meanwhile is never
//!    lost. A path that cannot be written goes into `failed`, and the others continue. Temp
//!    files are named with a random token that is recorded in the store first, so only files
//!    this restore made are ever swept (and only holding bytes the journal names). The writes go in
//!    batches when there are more than the descriptors a run may hold open allow.

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use gix::bstr::{BStr, BString, ByteSlice};
use gix::ObjectId;
use rayon::prelude::*;
use serde::Serialize;

use crate::diff::{tree_changes, write_change, Change, Side};
use crate::error::{Error, Result, Unrecorded};
use crate::fs::{Dir, Found, Kind, OpenDirs, Perm, ProjectRoot, Unlinked};
use crate::paths::serialize_paths;
use crate::snapshot::visibility::Visibility;
use crate::snapshot::{PendingIndex, TrackOptions};
use crate::store::objects::blob_of;
use crate::store::{snapshot_record, JournalProgress, Locked, NestedRepos, SnapshotId, Store};

mod merge;
pub use merge::ConflictDetail;
pub(crate) use merge::{reverse_turns, write_blob, Reversed, TurnSides};

/// Options for [`Store::restore`].
#[derive(Debug, Clone, Default)]
pub struct RestoreOptions {
    /// Overwrite paths that exist on disk but are not in the current snapshot (ignored or too
    /// large files), after saving their bytes into the undo tree.
    pub force: bool,
    /// Change nothing and record nothing: return the outcome the real run would give now
    /// (with `diff`, and the snapshot of the project as `undo`).
    pub dry_run: bool,
}

/// What [`Store::restore`] and [`Store::revert`] did.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct RestoreOutcome {
    /// The target snapshot (the first one, for several patches).
    pub hash: SnapshotId,
    /// Files written (created or replaced), project-relative.
    #[serde(serialize_with = "serialize_paths")]
    pub written: Vec<BString>,
    /// Files deleted.
    #[serde(serialize_with = "serialize_paths")]
    pub deleted: Vec<BString>,
    /// Files that could not be written or deleted, with the reason; the others were done.
    pub failed: Vec<Failure>,
    /// Paths left alone because something outside the current snapshot stands there (an
    /// ignored or too-large file, a nested repository, a special file), or because they changed
    /// on disk while the restore ran.
    #[serde(serialize_with = "serialize_paths")]
    pub conflicts: Vec<BString>,
    /// The conflicts that `force` leaves alone too (also in `conflicts`): a directory, a
    /// special file, a nested repository or a symlink into the store stands at the path or on
    /// the way to it. Moving it aside, then running again, is what brings the path back.
    #[serde(
        serialize_with = "serialize_paths",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub in_the_way: Vec<BString>,
    /// For an undo, the conflicts (also in `conflicts`) at paths the undone turn's end could
    /// not see (ignored then and not in the project's git index, or left out for size or
    /// type, or below a path left out): what stood there when it ended cannot be told, so neither can whether someone changed it since. `force` writes
    /// them (r116 (4): a file `git rm` took out of the index in an ignored directory).
    #[serde(
        serialize_with = "serialize_paths",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub unseen: Vec<BString>,
    /// Files the target lacks but could not see (ignored under its rules, inside a nested
    /// repository then, or left out for size or type): not deleted.
    #[serde(serialize_with = "serialize_paths")]
    pub kept: Vec<BString>,
    /// Files written with a three-way merge (also in `written`): an undo took the turns' hunks
    /// out and kept the others' (`undo` with `only` or `merge`).
    #[serde(
        serialize_with = "serialize_paths",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub merged: Vec<BString>,
    /// For an undo, each path left alone because someone else changed it too (and, with
    /// `only` and `force`, each file written with conflict markers): whether a merge would be
    /// clean, and where the edits overlap.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conflict_details: Vec<ConflictDetail>,
    /// A snapshot of the project from just before: `restore(undo)` puts everything back. (In a
    /// dry run, the project now; nothing is recorded.)
    pub undo: SnapshotId,
    /// A dry run: nothing was changed.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// In a dry run, the patch each written or deleted file would get, as `git diff` writes it
    /// (from the file now to what the run would leave).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "serialize_lossy"
    )]
    pub diff: Option<Vec<u8>>,
    /// An undo or redo whose files changed (as listed) but whose record of them failed
    /// afterwards: why, and where that leaves its turns. Not [`Self::is_complete`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unrecorded: Option<Unrecorded>,
}

/// `Some(bytes)` as a (lossy) JSON string.
fn serialize_lossy<S: serde::Serializer>(diff: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&String::from_utf8_lossy(
        diff.as_deref().unwrap_or_default(),
    ))
}

/// A path that could not be changed.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct Failure {
    #[serde(serialize_with = "crate::paths::serialize_path")]
    /// The project-relative path.
    pub path: BString,
    /// Why it could not be changed.
    pub error: String,
}

impl RestoreOutcome {
    /// Whether every planned change was made (and, for an undo or redo, recorded).
    pub fn is_complete(&self) -> bool {
        self.failed.is_empty() && self.unrecorded.is_none()
    }

    /// [`Error::Unrecorded`] when an undo's or redo's record failed, else
    /// [`Error::Incomplete`] (naming the undo point) unless [`Self::is_complete`].
    pub fn ensure_complete(&self) -> Result<()> {
        if let Some(unrecorded) = &self.unrecorded {
            return Err(Error::Unrecorded(unrecorded.clone()));
        }
        match self.failed.len() {
            0 => Ok(()),
            failed => Err(Error::Incomplete {
                failed,
                changed: self.written.len() + self.deleted.len(),
                undo: self.undo,
            }),
        }
    }
}

/// One path to bring to `target` (`None`: delete), currently `current`, taken from snapshot
/// number `snapshot` of the plan.
pub(crate) struct Step {
    pub(crate) path: BString,
    current: Option<Side>,
    target: Option<Side>,
    snapshot: usize,
}

/// What a run restores: `steps`, each from one of the snapshots `sights` describe.
pub(crate) struct Plan {
    /// Names the outcome.
    pub(crate) target: ObjectId,
    /// The snapshot of the project just taken (the undo point).
    pub(crate) current: ObjectId,
    pub(crate) steps: Vec<Step>,
    /// What each snapshot of the plan could see.
    pub(crate) sights: Vec<Visibility>,
    pub(crate) force: bool,
    /// Decide every step, then stop: nothing is written, deleted or recorded.
    pub(crate) dry_run: bool,
    /// Where the steps' blobs are read, when not the store: a view holding a dry run's merged
    /// texts in memory.
    pub(crate) objects: Option<gix::Repository>,
    /// The stat cache the undo point held back, settled before any file changes.
    pub(crate) index: Option<PendingIndex>,
    /// The names of each file a turn moved, linked in a ring (each maps to the next; two
    /// names map to each other; a file moved twice, or files swapped or rotated, link more):
    /// all change or none, so that no file ends under no name or under two. See
    /// [`other_names`].
    pub(crate) partners: HashMap<BString, BString>,
}

/// The other names `path` is linked with in `partners` (a ring, see [`Plan::partners`]; a
/// ring broken by a name mapped away yields the names up to the break). Costs two hash
/// lookups per name.
pub(crate) fn other_names<'a>(
    partners: &'a HashMap<BString, BString>,
    path: &BStr,
) -> Vec<&'a BString> {
    let (mut names, mut seen) = (Vec::new(), HashSet::new());
    let mut next = partners.get(path);
    while let Some(name) = next {
        if name.as_bstr() == path || !seen.insert(name) {
            break;
        }
        names.push(name);
        next = partners.get(name);
    }
    names
}

/// What stands where the target adds a path the current snapshot lacks.
enum Obstacle {
    None,
    /// A file or symlink outside the current snapshot: saved and replaced with `force`.
    File(Kind),
    /// Something never replaced: a nested repository, rewind's data, a special file, a
    /// directory with files outside the snapshot, a file in place of a parent directory.
    Kept,
}

/// What the run does at one step's path.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Action {
    Delete,
    Write,
    /// Save what is on disk into the undo tree, then write.
    SaveAndWrite(Kind),
    /// Left alone: something `force` never replaces stands there (listed `in_the_way` too),
    /// or the other name of a moved file is left alone.
    Conflict,
    Kept,
    /// Nothing to do (the file is already gone).
    Nothing,
}

impl Store {
    /// Make the project's snapshotted files exactly snapshot `hash`.
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), &rewind::OpenOptions::new("/tmp/rewind"))?;
    /// let before = store.track(&Default::default())?.hash;
    /// // ... the agent edits, creates and deletes files ...
    /// let outcome = store.restore(before, &Default::default())?;
    /// assert!(outcome.is_complete());
    /// store.restore(outcome.undo, &Default::default())?; // and back again
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn restore(&self, hash: SnapshotId, options: &RestoreOptions) -> Result<RestoreOutcome> {
        // Under the lock first: a prune between the check and the lock could remove `hash`.
        let locked = self.lock()?;
        let target = locked.snapshot_tree(hash)?;
        let (current, index) = locked.current(options.dry_run)?;
        let changes = tree_changes(&self.repo(), self.reads(), current, target)?;
        locked.apply(Plan {
            target,
            current,
            steps: changes.iter().map(|c| step_of(c, 0)).collect(),
            sights: vec![self.visibility(target, None)?],
            force: options.force,
            dry_run: options.dry_run,
            objects: None,
            index,
            partners: HashMap::new(),
        })
    }

    /// Bring only `paths` (files or directories; project-relative, or absolute inside the
    /// project) back to their state in snapshot `hash`; a path absent from `hash` is deleted.
    /// A path in neither `hash` nor the project is `not_found` (see [`Self::revert_patches`]
    /// for OpenCode's leniency).
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), &rewind::OpenOptions::new("/tmp/rewind"))?;
    /// let before = store.track(&Default::default())?.hash;
    /// // ... the agent edits src/main.rs and more ...
    /// let outcome = store.revert(before, &["src/main.rs"])?;
    /// println!("written: {:?}, undo: {}", outcome.written, outcome.undo);
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn revert(&self, hash: SnapshotId, paths: &[impl AsRef<Path>]) -> Result<RestoreOutcome> {
        self.revert_with(hash, paths, &RestoreOptions::default())
    }

    /// [`Self::revert`] with options (`dry_run`, `force`).
    pub fn revert_with(
        &self,
        hash: SnapshotId,
        paths: &[impl AsRef<Path>],
        options: &RestoreOptions,
    ) -> Result<RestoreOutcome> {
        let target = self.snapshot_tree(hash)?;
        let repo = self.repo();
        // (A prune may remove the snapshot meanwhile: then it is not found, as under the lock.)
        let tree = repo
            .find_tree(target)
            .map_err(|_| Error::NotFound(hash.to_string()))?;
        for path in paths {
            let relative = self.project_path(path.as_ref())?;
            let in_snapshot = relative.is_empty()
                || tree
                    .lookup_entry(relative.split(|&b| b == b'/'))
                    .map_err(|e| Error::store(self.git_dir(), e))?
                    .is_some();
            let on_disk = crate::paths::os_path(&relative)
                .is_ok_and(|rel| std::fs::symlink_metadata(self.project().join(rel)).is_ok());
            if !in_snapshot && !on_disk {
                return Err(Error::NoSuchPath {
                    path: crate::paths::quote_path(&relative),
                    hash: target.to_string(),
                });
            }
        }
        self.revert_patches_with(&[(hash, paths)], options)
    }

    /// Revert several `(hash, paths)` patches at once: for a path named in several, the first
    /// patch that names it wins (OpenCode's semantics). Unlike [`Self::revert`], a path in
    /// neither its snapshot nor the project is accepted and nothing is done for it (a file
    /// created and removed again since the snapshot, as OpenCode's patches list).
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), &rewind::OpenOptions::new("/tmp/rewind"))?;
    /// let (a, b) = (store.resolve("4b825dc6")?, store.resolve("9d1dcfdf")?); // two snapshots
    /// // "f" comes back from `a` (named first); "g" from `b`.
    /// let a_paths: &[&str] = &["f"];
    /// let b_paths: &[&str] = &["f", "g"];
    /// store.revert_patches(&[(a, a_paths), (b, b_paths)])?;
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn revert_patches<P: AsRef<Path>>(
        &self,
        patches: &[(SnapshotId, &[P])],
    ) -> Result<RestoreOutcome> {
        self.revert_patches_with(patches, &RestoreOptions::default())
    }

    /// [`Self::revert_patches`] with options.
    fn revert_patches_with<P: AsRef<Path>>(
        &self,
        patches: &[(SnapshotId, &[P])],
        options: &RestoreOptions,
    ) -> Result<RestoreOutcome> {
        let locked = self.lock()?;
        let mut requests = Vec::new();
        for (hash, paths) in patches {
            let target = locked.snapshot_tree(*hash)?;
            for path in paths.iter() {
                // The file or directory the path names, whole: a trailing `/` still means the
                // directory, which may replace a file standing there (unlike diff_full's
                // pathspec, which lists only what is below it).
                let path = self.project_path(path.as_ref())?;
                let selection = crate::paths::Selection {
                    path,
                    below_only: false,
                };
                requests.push((target, selection));
            }
        }
        let Some(first) = requests.first().map(|r| r.0) else {
            return Err(Error::BadPath {
                path: PathBuf::new(),
                reason: "none given: name the files or directories to revert",
            });
        };
        let (current, index) = locked.current(options.dry_run)?;
        let repo = self.repo();
        // One tree diff per distinct target, filtered by each request's path.
        let mut targets: Vec<(ObjectId, Vec<Change>)> = Vec::new();
        let mut steps: Vec<Step> = Vec::new();
        let mut claimed: Vec<crate::paths::Selection> = Vec::new();
        for (target, path) in requests {
            let index = match targets.iter().position(|(id, _)| *id == target) {
                Some(index) => index,
                None => {
                    targets.push((target, tree_changes(&repo, self.reads(), current, target)?));
                    targets.len() - 1
                }
            };
            for change in targets[index]
                .1
                .iter()
                .filter(|c| path.selects(c.path.as_ref()))
            {
                // A path an earlier patch named stays as that patch decided.
                if !claimed.iter().any(|c| c.selects(change.path.as_ref())) {
                    steps.push(step_of(change, index));
                }
            }
            claimed.push(path);
        }
        let sights = targets
            .iter()
            .map(|(id, _)| self.visibility(*id, None))
            .collect::<Result<_>>()?;
        locked.apply(Plan {
            target: first,
            current,
            steps,
            sights,
            force: options.force,
            dry_run: options.dry_run,
            objects: None,
            index,
            partners: HashMap::new(),
        })
    }
}

impl Locked<'_> {
    /// The snapshot of the project a run starts from: recorded (the undo point), or, for a dry
    /// run, not; with the stat cache it holds back for [`apply`](Self::apply) to settle. Costs
    /// a [`track`](Self::track).
    pub(crate) fn current(&self, dry_run: bool) -> Result<(ObjectId, Option<PendingIndex>)> {
        let options = TrackOptions::default();
        if dry_run {
            let snapshot = self.peek(&options)?;
            let lines = crate::snapshot::visibility::record_lines(&snapshot);
            *crate::store::objects::lock(&self.peeked) = Some((snapshot.hash.0, lines));
            return Ok((snapshot.hash.0, None));
        }
        let (snapshot, index) = self.track_holding_index(&options)?;
        Ok((snapshot.hash.0, index))
    }

    /// Check, then carry out `plan` (see the module docs).
    pub(crate) fn apply(&self, plan: Plan) -> Result<RestoreOutcome> {
        self.apply_with(plan, &mut |_, _| Ok(()))
    }

    /// [`apply`](Self::apply), calling `before_changes` with what the run is about to write and
    /// delete (an outcome as if every change succeeds) once the undo point is recorded and
    /// before the first file changes; an error from it stops the run there. Not for a dry run.
    pub(crate) fn apply_with(
        &self,
        mut plan: Plan,
        before_changes: &mut dyn FnMut(&RestoreOutcome, &str) -> Result<()>,
    ) -> Result<RestoreOutcome> {
        if let Some(index) = plan.index.take() {
            index.settle(self, plan.steps.iter().map(|s| s.path.as_bstr()))?;
        }
        if plan.dry_run {
            self.leave_out_killed_runs_temp_files(&mut plan.steps);
        }
        let repo = self.repo();
        // The blobs to write (and a dry run's patches) come from there; what is recorded goes
        // to the store.
        let overlay = plan.objects.take();
        let contents = self.read_contents(&plan.steps, overlay.as_ref())?;
        let blobs = overlay.unwrap_or_else(|| self.repo());
        let root = ProjectRoot::open(self.project())
            .map_err(|e| Error::io("opening project", self.project(), e))?;

        let mut outcome = RestoreOutcome {
            hash: SnapshotId(plan.target),
            written: Vec::new(),
            deleted: Vec::new(),
            failed: Vec::new(),
            conflicts: Vec::new(),
            in_the_way: Vec::new(),
            unseen: Vec::new(),
            kept: Vec::new(),
            merged: Vec::new(),
            conflict_details: Vec::new(),
            undo: SnapshotId(plan.current),
            dry_run: plan.dry_run,
            diff: None,
            unrecorded: None,
        };
        // The files the restore before took out must be closed: their descriptors count.
        self.closing.wait();
        let budget = crate::fs::descriptor_budget();
        let held_files = budget.min(plan.steps.len());
        let unlinked = Unlinked::new(held_files);
        // Directories opened while deciding serve the staging too (nothing is removed between).
        let paths = plan.steps.iter().map(|s| s.path.as_slice());
        crate::fs::make_room(&root, paths, held_files);
        let dirs = OpenDirs::new(&root, budget);
        let decided = self.decide((&root, &dirs), &repo, &mut plan)?;
        let mut actions = Vec::with_capacity(plan.steps.len());
        // Steps that change nothing though they should: left alone, kept or failed.
        let mut blocked = Vec::with_capacity(plan.steps.len());
        for (step, decided) in plan.steps.iter().zip(decided) {
            let action = match decided {
                Ok(Action::SaveAndWrite(_)) if !plan.force => Action::Conflict,
                Ok(Action::Conflict) => {
                    outcome.in_the_way.push(step.path.clone());
                    Action::Conflict
                }
                Ok(action) => action,
                Err(e) => {
                    outcome.failed.push(failure(&step.path, &e));
                    blocked.push(true);
                    actions.push(Action::Nothing);
                    continue;
                }
            };
            blocked.push(matches!(action, Action::Conflict | Action::Kept));
            actions.push(action);
        }
        // Two writes, one below the other (a plan of merges can hold a file back at `f` and, at
        // `f/u`, a file a turn moved out of a directory `f`): neither is written (r111 (3)).
        for n in writes_one_below_another(&plan, &actions) {
            actions[n] = Action::Conflict;
            blocked[n] = true;
        }
        // Until nothing more is left alone: a moved file's other names with a blocked one, and
        // a write through or in place of a path that stays with them (r109).
        let deleting: Vec<bool> = actions
            .iter()
            .map(|a| matches!(a, Action::Delete))
            .collect();
        loop {
            leave_partners_alone(&plan, &blocked, &mut actions);
            let over = writes_over_staying_paths(&plan, &deleting, &actions);
            if over.is_empty() {
                break;
            }
            for n in over {
                outcome.in_the_way.push(plan.steps[n].path.clone());
                actions[n] = Action::Conflict;
                blocked[n] = true;
            }
        }
        for (step, action) in plan.steps.iter().zip(&actions) {
            match action {
                Action::Conflict => outcome.conflicts.push(step.path.clone()),
                Action::Kept => outcome.kept.push(step.path.clone()),
                _ => {}
            }
        }
        if plan.dry_run {
            let mut diff = Vec::new();
            for (step, action) in plan.steps.iter().zip(&actions) {
                if !is_change(*action) {
                    continue;
                }
                let current = match action {
                    Action::SaveAndWrite(_) => None, // what stands there is outside the snapshot
                    _ => step.current,
                };
                write_change(&blobs, &mut diff, step.path.as_ref(), current, step.target)?;
            }
            outcome.diff = Some(diff);
            return Ok(planned(outcome, &plan, &actions));
        }

        // The undo tree: the current snapshot, plus what `force` replaces outside it.
        // `expected`: what each path must still hold when it is replaced or deleted.
        let mut saved = Vec::new();
        let mut expected: Vec<Option<Side>> = plan.steps.iter().map(|s| s.current).collect();
        for (n, (step, action)) in plan.steps.iter().zip(&actions).enumerate() {
            if let Action::SaveAndWrite(kind) = action {
                let (entry, id, perm) = self.save_on_disk(&root, step.path.as_ref(), *kind)?;
                expected[n] = Some(Side {
                    mode: u32::from(gix::objs::tree::EntryMode::from(entry).value()),
                    id,
                });
                saved.push((step.path.clone(), (entry, id, perm)));
            }
        }
        let undo = match saved.is_empty() {
            true => plan.current,
            false => self.undo_with_saved(&repo, plan.current, &saved)?,
        };
        outcome.undo = SnapshotId(undo);
        self.record_undo(undo, plan.target)?;
        let token = self.new_run_token()?;
        before_changes(&planned(outcome.clone(), &plan, &actions), &token)?;
        self.write_journal(
            &token,
            undo,
            plan.steps
                .iter()
                .enumerate()
                .filter(|&(n, s)| {
                    let written_or_deleted = s.target.is_some() || actions[n] == Action::Delete;
                    written_or_deleted && !inside_dot_git(s.path.as_ref())
                })
                .map(|(n, s)| {
                    let blob = |side: Option<Side>| side.map(|side| (side.id, side.mode));
                    (n, s.path.as_bstr(), [blob(expected[n]), blob(s.target)])
                }),
        )?;

        let journal = self.journal_progress()?;
        let total = actions.iter().filter(|a| is_change(**a)).count();
        self.progress().start("restoring", total as u64);
        tracing::debug!(target = %plan.target, %undo, total, conflicts = outcome.conflicts.len(), "restoring");
        // The writes go in batches, each holding at most `budget` directories open: its temp
        // files are staged (no project file changes), made durable with one `syncfs` per file
        // system, then swapped in. The first batch's sync also makes the undo point and the
        // journal durable; only then come the deletions (before any swap, so that a directory
        // can replace a file and the reverse). A write that cannot be staged before the
        // deletions is tried again in a batch after them.
        let mut queue: std::collections::VecDeque<usize> = (0..plan.steps.len())
            .filter(|&n| matches!(actions[n], Action::Write | Action::SaveAndWrite(_)))
            .collect();
        let any_deletion = actions.contains(&Action::Delete);
        let narrowed = Narrowed::default();
        let store_dir = crate::fs::open_path(self.git_dir())
            .map_err(|e| Error::io("opening", self.git_dir(), e))?;
        let writes = Writes {
            root: &root,
            steps: &plan.steps,
            sights: &plan.sights,
            contents: &contents,
            expected: &expected,
            token: &token,
            progress: self.progress(),
            unlinked: &unlinked,
            journal: &journal,
            narrowed: &narrowed,
        };
        let mut first_dirs = Some(dirs);
        let mut replaced: Vec<(usize, io::Result<bool>)> = Vec::new();
        // The last batch's directories are closed after the answer (an earlier batch's before
        // the next opens its own: the descriptor budget holds one batch).
        let mut last_dirs = Vec::new();
        let mut dirs_left = Vec::new();
        while first_dirs.is_some() || !queue.is_empty() {
            let first = first_dirs.is_some();
            let dirs = first_dirs
                .take()
                .unwrap_or_else(|| OpenDirs::new(&root, budget));
            let batch: Vec<usize> = queue.drain(..budget.min(queue.len())).collect();
            let mut staged = Vec::with_capacity(batch.len());
            for (n, result) in writes.stage(&batch, &dirs) {
                match result {
                    Ok(ours) => staged.push((n, ours)),
                    Err(_) if first && any_deletion => queue.push_back(n),
                    Err(e) => outcome.failed.push(failure(&plan.steps[n].path, &e)),
                }
            }
            // The journal records them staged whole; the sync makes that, the temp files and
            // (the first time) the undo point durable before any swap.
            let dirs_written = staged.iter().map(|(_, (dir, _))| dir.as_dir());
            let synced = journal
                .staged(staged.iter().map(|(n, _)| *n))
                .and_then(|()| {
                    crate::fs::sync_filesystems(
                        std::iter::once(store_dir.as_dir()).chain(dirs_written),
                    )
                });
            if let Err(e) = synced {
                // Nothing of this batch was swapped in: its temp files go, and the run stops.
                for (_, (dir, temp)) in &staged {
                    unlinked.remove_temp(dir, temp);
                }
                if first {
                    return Err(Error::io("syncing", self.project(), e));
                }
                let left = staged.iter().map(|(n, _)| *n).chain(queue.drain(..));
                replaced.extend(left.map(|n| (n, Err(io::Error::new(e.kind(), e.to_string())))));
                break;
            }
            if first {
                let deleting = (&actions[..], &expected[..], &unlinked);
                let run = (token.as_str(), &journal);
                dirs_left = self.delete_all(&root, &plan, deleting, run, &mut outcome);
            }
            let now = OpenDirs::new(&root, budget);
            replaced.extend(writes.swap(&staged, &now));
            if queue.is_empty() {
                last_dirs = vec![dirs, now];
            }
        }
        for (dir, mode) in crate::store::objects::lock(&narrowed).drain(..) {
            if let Err(e) = root.set_dir_mode(&dir, mode) {
                tracing::warn!(dir = %dir, error = %e, "a directory made writable to fill stays so");
            }
        }
        replaced.sort_unstable_by_key(|(n, _)| *n);
        let cap = self.max_file_size().unwrap_or(u64::MAX);
        let mut written_over_cap = Vec::new();
        for (n, result) in replaced {
            let path = &plan.steps[n].path;
            if matches!(result, Ok(true)) && contents[n].as_ref().map_or(0, Vec::len) as u64 > cap {
                written_over_cap.push(n);
            }
            match result {
                Ok(true) => outcome.written.push(path.clone()),
                Ok(false) => outcome.conflicts.push(path.clone()),
                Err(e) => outcome.failed.push(failure(path, &e)),
            }
        }
        // What it planned to write or delete and did not is recorded before the journal goes: killed
        // before its own record says so, the run's record of what it planned is all there is.
        let done: HashSet<&BString> = outcome.written.iter().chain(&outcome.deleted).collect();
        let not_done: Vec<BString> = (plan.steps.iter().zip(&actions))
            .filter(|(_, action)| is_change(**action))
            .map(|(step, _)| step.path.clone())
            .filter(|path| !done.contains(path))
            .collect();
        if let Err(e) = self.record_finished_run(&token, &not_done) {
            tracing::warn!("recording what the run did not write: {e}");
        }
        // A temp file left (its removal failed) keeps the journal, marked told (this run
        // finished, and its outcome names the undo point): the next snapshot sweeps the file.
        match unlinked.temps_left() {
            false => self.remove_journal(),
            true => {
                self.keep_journal_told();
                crate::store::objects::lock(&self.notices).push(format!(
                    "the run could not remove a temp file of its own (.rewind-{token}-*): the \
                     next snapshot removes it"
                ));
            }
        }
        self.tell_dirs_left(&root, dirs_left);
        self.hold_over_the_cap(&repo, plan.current, &plan.steps, &written_over_cap);
        unlinked.close_later(&self.closing, last_dirs);
        Ok(outcome)
    }

    /// Delete the files the plan deletes (each only if it still holds what the undo point
    /// holds), then the directories that leaves empty; returns those the file system refused
    /// to remove.
    fn delete_all(
        &self,
        root: &ProjectRoot,
        plan: &Plan,
        (actions, expected, unlinked): (&[Action], &[Option<Side>], &Unlinked),
        (token, journal): (&str, &JournalProgress),
        outcome: &mut RestoreOutcome,
    ) -> Vec<(BString, io::Error)> {
        let mut emptied = Vec::new();
        for (n, step) in plan.steps.iter().enumerate() {
            if actions[n] != Action::Delete {
                continue;
            }
            self.progress().step();
            let aside = format!(".rewind-aside-{token}-{n}").into_bytes();
            let path = step.path.as_ref();
            match delete_if_unchanged(root, path, expected[n], (&aside, (journal, n)), unlinked) {
                Ok(true) => {
                    outcome.deleted.push(step.path.clone());
                    if let Some(slash) = step.path.rfind_byte(b'/') {
                        emptied.push(BString::from(&step.path[..slash]));
                    }
                }
                Ok(false) => outcome.conflicts.push(step.path.clone()),
                Err(e) => outcome.failed.push(failure(&step.path, &e)),
            }
        }
        remove_empty_dirs(root, emptied)
    }

    /// The data each step writes (`None` for a deletion), every blob read before anything
    /// else happens: a missing or corrupt object stops the run here. Read in parallel from the
    /// store, or from `overlay` (a view holding merged texts in memory) on this thread. Costs
    /// reading and inflating each blob.
    fn read_contents(
        &self,
        steps: &[Step],
        overlay: Option<&gix::Repository>,
    ) -> Result<Vec<Option<Vec<u8>>>> {
        let read = |repo: &mut gix::Repository, step: &Step| {
            let path = step.path.as_ref();
            let blob = |id| blob_of(self.reads().object(repo, id, path)?, id, path);
            step.target.map(|side| blob(side.id)).transpose()
        };
        match overlay {
            Some(overlay) => steps
                .iter()
                .map(|s| read(&mut overlay.clone(), s))
                .collect(),
            None => steps.par_iter().map_init(|| self.repo(), read).collect(),
        }
    }

    /// What to do at each step's path, looking at what stands on disk now: the writes in
    /// parallel; the deletions on this thread (each asks its snapshot's rules, which are
    /// read as they are needed).
    fn decide(
        &self,
        (root, dirs): (&ProjectRoot, &OpenDirs),
        repo: &gix::Repository,
        plan: &mut Plan,
    ) -> Result<Vec<io::Result<Action>>> {
        let enter_nested = self.nested_repos()? == NestedRepos::Include;
        let refused = || io::Error::other("refused: a path in a `.git` is never written");
        // The deletions first: a write below a path the target lacks, or in place of a
        // directory, passes over only what is deleted (not a file kept, r108).
        let mut decided: Vec<io::Result<Action>> = Vec::with_capacity(plan.steps.len());
        for step in &plan.steps {
            decided.push(match (inside_dot_git(step.path.as_ref()), step.target) {
                (true, _) => Err(refused()),
                (false, None) => {
                    let sight = &mut plan.sights[step.snapshot];
                    self.delete_action(root, repo, step, sight)
                }
                (false, Some(_)) => Ok(Action::Nothing), // decided below
            });
        }
        let deleting: HashSet<&BStr> = (plan.steps.iter().zip(&decided))
            .filter(|(_, decided)| matches!(decided, Ok(Action::Delete)))
            .map(|(step, _)| step.path.as_bstr())
            .collect();
        let writes: Vec<Option<io::Result<Action>>> = plan
            .steps
            .par_iter()
            .map(
                |step| match (inside_dot_git(step.path.as_ref()), step.target) {
                    (false, Some(_)) => {
                        Some(self.write_action((root, dirs), step, (&deleting, enter_nested)))
                    }
                    _ => None,
                },
            )
            .collect();
        for (decided, write) in decided.iter_mut().zip(writes) {
            if let Some(write) = write {
                *decided = write;
            }
        }
        Ok(decided)
    }

    /// Whether `step`'s path, which the target lacks, is deleted: only a file or symlink the
    /// target could have seen.
    fn delete_action(
        &self,
        root: &ProjectRoot,
        repo: &gix::Repository,
        step: &Step,
        sight: &mut Visibility,
    ) -> io::Result<Action> {
        let path = step.path.as_bstr();
        if !sight.can_see(repo, path).map_err(io::Error::other)? || is_left_by_rewind(path) {
            return Ok(Action::Kept);
        }
        Ok(match root.lstat(path)?.map(|f| f.kind) {
            None => Action::Nothing,
            Some(Kind::Symlink) if self.on_the_way_to_the_store(root, path) => Action::Kept,
            Some(Kind::File | Kind::Symlink) => Action::Delete,
            // Changed since the snapshot a moment ago: not ours to delete.
            Some(Kind::Dir | Kind::Special) => Action::Conflict,
        })
    }

    /// Whether `step`'s path, which the target holds, is written, looking at what stands there.
    fn write_action(
        &self,
        (root, dirs): (&ProjectRoot, &OpenDirs),
        step: &Step,
        (deleting, enter_nested): (&HashSet<&BStr>, bool),
    ) -> io::Result<Action> {
        let path = step.path.as_bstr();
        if step.current.is_none() {
            return Ok(match obstacle(root, path, deleting, enter_nested)? {
                Obstacle::None => Action::Write,
                Obstacle::File(kind) => Action::SaveAndWrite(kind),
                Obstacle::Kept => Action::Conflict,
            });
        }
        Ok(match dirs.lstat(path)?.map(|f| f.kind) {
            Some(Kind::Symlink) if self.on_the_way_to_the_store(root, path) => Action::Conflict,
            None | Some(Kind::File | Kind::Symlink) => Action::Write,
            Some(Kind::Dir | Kind::Special) => Action::Conflict,
        })
    }

    /// The undo tree when `force` replaces files outside the current snapshot: `current` plus
    /// those files (`saved`: path, entry kind, blob, permission bits), recorded as a snapshot
    /// whose record also keeps the saved files' narrow modes.
    #[allow(clippy::type_complexity)]
    fn undo_with_saved(
        &self,
        repo: &gix::Repository,
        current: ObjectId,
        saved: &[(BString, (gix::objs::tree::EntryKind, ObjectId, u32))],
    ) -> Result<ObjectId> {
        let mut editor = repo
            .edit_tree(current)
            .map_err(|e| Error::store(self.git_dir(), e))?;
        for (path, (kind, id, _)) in saved {
            editor
                .upsert(path.as_bstr(), *kind, *id)
                .map_err(|e| Error::store(self.git_dir(), e))?;
        }
        let undo = editor
            .write()
            .map_err(|e| Error::store(self.git_dir(), e))?
            .detach();
        // Its record: the current snapshot's, plus the saved files' narrow modes.
        let mut lines = match self.ref_target(&snapshot_record(current))? {
            Some(record) => self.recorded_left_out_lines(record)?,
            None => String::new(),
        };
        let narrow = saved
            .iter()
            .filter(|(_, (kind, _, perm))| {
                *kind != gix::objs::tree::EntryKind::Link && perm & 0o644 != 0o644
            })
            .map(|(path, (_, _, perm))| (path.clone(), *perm));
        lines.push_str(&crate::snapshot::visibility::mode_lines(narrow));
        self.commit(
            &snapshot_record(undo),
            &format!("rewind: snapshot\n\n{lines}"),
            undo,
            None,
        )?;
        Ok(undo)
    }
    /// Whether the symlink at `path` is on the way to the store (as in `~/.local` when the
    /// project is the home directory, or `--data-dir` given through a symlink in the project):
    /// deleting or replacing it would lose the store from view. Costs an `lstat` per
    /// component of the store's path.
    fn on_the_way_to_the_store(&self, root: &ProjectRoot, path: &BStr) -> bool {
        let link = root.display(path);
        self.git_dir().ancestors().any(|dir| {
            let is_link = std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink());
            let canonical = || {
                let parent = std::fs::canonicalize(dir.parent()?).ok()?;
                Some(parent.join(dir.file_name()?))
            };
            is_link && canonical().is_some_and(|c| c == link)
        })
    }
    /// The project file or symlink at `path`, saved as a blob: (tree entry kind, id). Never
    /// opens a special file (an error, not a hang).
    /// Also returns the file's permission bits.
    fn save_on_disk(
        &self,
        root: &ProjectRoot,
        path: &BStr,
        kind: Kind,
    ) -> Result<(gix::objs::tree::EntryKind, ObjectId, u32)> {
        use gix::objs::tree::EntryKind;
        let abs = root.display(path);
        if kind == Kind::Symlink {
            let target = root
                .read_link(path)
                .map_err(|e| Error::io("reading", &abs, e))?;
            let id = self.objects().write(gix::objs::Kind::Blob, &target)?;
            return Ok((EntryKind::Link, id, 0o777));
        }
        let data = root
            .read_file(path)
            .map_err(|e| Error::io("reading", &abs, e))?;
        let id = self.objects().write(gix::objs::Kind::Blob, &data)?;
        let mode = root
            .lstat(path)
            .map_err(|e| Error::io("reading", &abs, e))?
            .map_or(0o644, |f| f.mode);
        let kind = match mode & 0o100 {
            0 => EntryKind::Blob,
            _ => EntryKind::BlobExecutable,
        };
        Ok((kind, id, mode & 0o7777))
    }

    /// Name as the last snapshot `current` (the one the run started from) plus the files the run
    /// wrote over the size cap (`steps` by number), if any: the next snapshot keeps such a file
    /// in, as it keeps one the snapshot before held (r81 (2): a file an undo brought back, left
    /// out after, so that a later overwrite could not be undone). Best effort, as naming the
    /// last snapshot is: a failure is logged. Costs nothing without such a file; with one, a
    /// tree edit.
    fn hold_over_the_cap(
        &self,
        repo: &gix::Repository,
        current: ObjectId,
        steps: &[Step],
        over_cap: &[usize],
    ) {
        if over_cap.is_empty() {
            return;
        }
        let edited = || -> std::result::Result<ObjectId, Box<dyn std::error::Error>> {
            let mut editor = repo.edit_tree(current)?;
            for &n in over_cap {
                let side = steps[n].target.expect("a write has a target");
                editor.upsert(steps[n].path.as_bstr(), side.entry_kind(), side.id)?;
            }
            Ok(editor.write()?.detach())
        };
        match edited() {
            Ok(tree) => self.remember_last_snapshot(tree),
            Err(e) => tracing::warn!("naming the files written over the size cap as held: {e}"),
        }
    }

    /// Say (a notice) each directory a run emptied that the file system refused to remove (an
    /// I/O error, a mount point) and that still stands: not a failure of the run, whose files
    /// are all as its outcome says, but the user should hear of it. Costs an `lstat` of each.
    fn tell_dirs_left(&self, root: &ProjectRoot, dirs: Vec<(BString, io::Error)>) {
        for (dir, error) in dirs {
            if root.lstat(dir.as_ref()).ok().flatten().map(|f| f.kind) == Some(Kind::Dir) {
                crate::store::objects::lock(&self.notices).push(format!(
                    "{} stays: the run emptied it, but removing it failed: {error}",
                    crate::paths::quote_path(&dir)
                ));
            }
        }
    }

    /// For a dry run, which sweeps nothing: leave out the steps of a killed restore's temp files
    /// (the run that writes sweeps them before its snapshot, so they are in none of its steps),
    /// and say that one was stopped (unless its journal says it finished). Costs two reads of
    /// the journal.
    fn leave_out_killed_runs_temp_files(&self, steps: &mut Vec<Step>) {
        let Some(prefix) = self.killed_runs_temp_prefix() else {
            return;
        };
        steps.retain(|step| {
            let name = step
                .path
                .rsplit_once_str("/")
                .map_or(&step.path[..], |(_, n)| n);
            !name.starts_with(prefix.as_bytes())
        });
        if !self.journal_is_of_a_finished_run() {
            crate::store::objects::lock(&self.notices).push(
                "a restore (or revert, undo or redo) was stopped before it finished: the run \
                 that writes sweeps its temp files first (a dry run leaves them, and `rewind \
                 doctor` names its undo point)"
                    .into(),
            );
        }
    }

    /// Record `undo` as a commit on `refs/rewind/undo` (with the previous undo as parent), so
    /// the way back is in the store before any file changes.
    pub(crate) fn record_undo(&self, undo: ObjectId, target: ObjectId) -> Result<()> {
        let reference = "refs/rewind/undo";
        let parent = self.ref_target(reference)?;
        let message = format!(
            "undo point before restoring {target}\n\nrestore this tree to go back: rewind restore {undo}\n"
        );
        self.commit(reference, &message, undo, parent)?;
        Ok(())
    }
}

/// The writes of one run: what [`Locked::apply`] stages and swaps in, batch by batch.
struct Writes<'a> {
    root: &'a ProjectRoot,
    steps: &'a [Step],
    /// What each snapshot of the plan could see.
    sights: &'a [Visibility],
    /// The data each step writes, by step.
    contents: &'a [Option<Vec<u8>>],
    /// What each path must still hold when it is replaced, by step.
    expected: &'a [Option<Side>],
    /// The token the run's temp files carry.
    token: &'a str,
    /// Counts the files swapped in.
    progress: &'a crate::store::Progress,
    /// Holds the files swapped out, to be closed after the run.
    unlinked: &'a Unlinked,
    /// Where each swap done is recorded.
    journal: &'a JournalProgress,
    /// The directories made writable to fill ([`stage`]).
    narrowed: &'a Narrowed,
}

/// A staged temp file: the directory it is in, and its name.
type TempFile = (Arc<Dir>, Vec<u8>);

/// The directories a run made writable to fill, with the modes they get once it is done.
type Narrowed = std::sync::Mutex<Vec<(BString, u32)>>;

/// Where a change is recorded done: the run's journal, and the change's number in it.
type DoneAt<'a> = (&'a JournalProgress, usize);

impl Writes<'_> {
    /// Write the temp file of each step in `batch`, in parallel, into its directory (opened
    /// through `dirs`): the directory and the temp name, or why it could not be written.
    #[allow(clippy::type_complexity)]
    fn stage(
        &self,
        batch: &[usize],
        dirs: &OpenDirs,
    ) -> Vec<(usize, io::Result<(Arc<Dir>, Vec<u8>)>)> {
        let stage_one = |&n: &usize| {
            let step = &self.steps[n];
            let data = self.contents[n].as_deref().unwrap_or_default();
            let temp = format!(".rewind-{}-{n}", self.token).into_bytes();
            let side = step.target.expect("a write has a target");
            let sight = &self.sights[step.snapshot];
            let dirs = (dirs, self.narrowed);
            let dir = stage(dirs, step.path.as_ref(), (side, sight), data, &temp);
            (n, dir.map(|dir| (dir, temp)))
        };
        crate::fs::on_io_threads(|| batch.par_iter().map(stage_one).collect())
    }

    /// Swap each staged temp file in, in parallel ([`replace`]), if its directory still stands
    /// at its path, looked up from the root again through `now` (not moved out of the project
    /// while it was staged): whether it was written (`false`: a conflict), or why not.
    fn swap(&self, staged: &[(usize, TempFile)], now: &OpenDirs) -> Vec<(usize, io::Result<bool>)> {
        let swap_one = |(n, (dir, temp)): &(usize, TempFile)| {
            let path = self.steps[*n].path.as_bstr();
            let (parent, name) = crate::fs::split(path);
            let aside = format!(".rewind-aside-{}-{n}", self.token).into_bytes();
            let names = (&**dir, &temp[..], name, &aside[..]);
            let still_here = || now.still_at(parent, dir);
            let result = match still_here() {
                Ok(true) => {
                    let target = self.steps[*n].target.expect("a write has a target");
                    let sides = (self.expected[*n], target);
                    let done_at = (self.journal, *n);
                    replace(
                        self.root,
                        path,
                        names,
                        sides,
                        (&still_here, self.unlinked, done_at),
                    )
                }
                moved => {
                    self.unlinked.remove_temp(dir, temp);
                    moved.and(Err(moved_away()))
                }
            };
            self.progress.step();
            (*n, result)
        };
        crate::fs::on_io_threads(|| staged.par_iter().map(swap_one).collect())
    }
}

pub(crate) fn step_of(change: &Change, snapshot: usize) -> Step {
    Step {
        path: change.path.clone(),
        current: change.before,
        target: change.after,
        snapshot,
    }
}

/// `outcome` with what `actions` write and delete, as if all of it succeeds (a dry run's
/// answer, and what a run is about to do).
fn planned(mut outcome: RestoreOutcome, plan: &Plan, actions: &[Action]) -> RestoreOutcome {
    for (step, action) in plan.steps.iter().zip(actions) {
        match action {
            Action::Delete => outcome.deleted.push(step.path.clone()),
            Action::Write | Action::SaveAndWrite(_) => outcome.written.push(step.path.clone()),
            _ => {}
        }
    }
    outcome
}

/// A step that would change its path while another name of its moved file is `blocked` (left
/// alone, kept or failed) is left alone too. Costs a map of the steps when there are partners.
fn leave_partners_alone(plan: &Plan, blocked: &[bool], actions: &mut [Action]) {
    if plan.partners.is_empty() {
        return;
    }
    let at: HashMap<&BStr, usize> = (plan.steps.iter().enumerate())
        .map(|(n, step)| (step.path.as_bstr(), n))
        .collect();
    for (n, step) in plan.steps.iter().enumerate() {
        let partner_blocked = other_names(&plan.partners, step.path.as_ref())
            .into_iter()
            .any(|p| at.get(p.as_bstr()).is_some_and(|&m| blocked[m]));
        if partner_blocked && is_change(actions[n]) {
            actions[n] = Action::Conflict;
        }
    }
}

/// The writes (by step) through a path that stays, or in place of a directory holding one: a
/// file the writes were decided over as deleted (`deleting`), left alone since (another name
/// of a moved file that is blocked). Costs a set of those paths and their ancestors, and a
/// lookup per ancestor of each write, when there are any.
fn writes_over_staying_paths(plan: &Plan, deleting: &[bool], actions: &[Action]) -> Vec<usize> {
    let staying: HashSet<&BStr> = (plan.steps.iter().zip(actions).zip(deleting))
        .filter(|((_, action), &deleting)| deleting && !matches!(action, Action::Delete))
        .map(|((step, _), _)| step.path.as_bstr())
        .collect();
    if staying.is_empty() {
        return Vec::new();
    }
    let above: HashSet<&BStr> = staying.iter().flat_map(|path| ancestors(path)).collect();
    (plan.steps.iter().zip(actions).enumerate())
        .filter(|(_, (step, action))| {
            let path = step.path.as_bstr();
            matches!(action, Action::Write | Action::SaveAndWrite(_))
                && (above.contains(path) || ancestors(path).any(|dir| staying.contains(dir)))
        })
        .map(|(n, _)| n)
        .collect()
}

/// The writes (by step) at a path another write's path is below, and those below it. Costs a
/// set of the written paths and a lookup per ancestor of each.
fn writes_one_below_another(plan: &Plan, actions: &[Action]) -> Vec<usize> {
    let is_write = |action: &Action| matches!(action, Action::Write | Action::SaveAndWrite(_));
    let written: HashSet<&BStr> = (plan.steps.iter().zip(actions))
        .filter(|(_, action)| is_write(action))
        .map(|(step, _)| step.path.as_bstr())
        .collect();
    let over: HashSet<&BStr> = written
        .iter()
        .flat_map(|path| ancestors(path))
        .filter(|dir| written.contains(dir))
        .collect();
    (plan.steps.iter().zip(actions).enumerate())
        .filter(|(_, (step, action))| {
            let path = step.path.as_bstr();
            is_write(action)
                && (over.contains(path) || ancestors(path).any(|dir| over.contains(dir)))
        })
        .map(|(n, _)| n)
        .collect()
}

/// The directories above `path`, nearest last (`a`, `a/b` for `a/b/c`).
fn ancestors(path: &BStr) -> impl Iterator<Item = &BStr> {
    path.iter()
        .enumerate()
        .filter(|&(_, &b)| b == b'/')
        .map(move |(i, _)| path[..i].as_bstr())
}

fn is_change(action: Action) -> bool {
    matches!(
        action,
        Action::Delete | Action::Write | Action::SaveAndWrite(_)
    )
}

/// What stands on disk where the target puts `path`, which the current snapshot lacks.
/// `deleting`: the current snapshot's paths this run deletes (they are not obstacles).
/// `enter_nested`: a nested repository on the way is entered (its files are snapshotted);
/// otherwise it is never written into. A repository standing at `path` itself is never replaced.
/// Descends through directory descriptors, one component at a time; a symlink, file or special
/// file on the way ends the search.
fn obstacle(
    root: &ProjectRoot,
    path: &BStr,
    deleting: &HashSet<&BStr>,
    enter_nested: bool,
) -> io::Result<Obstacle> {
    let mut dir = root.open_dir(b"", None)?;
    let walks = ancestors(path).chain(std::iter::once(path));
    for (name, walked) in path.split(|&b| b == b'/').zip(walks) {
        let is_target = walked == path;
        let Some(found) = crate::fs::stat_in(dir.as_dir(), name)? else {
            return Ok(Obstacle::None); // nothing there, nor below
        };
        match found.kind {
            Kind::Dir => {
                let child = crate::fs::open_child(dir.as_dir(), name)?;
                let nested = crate::fs::stat_in(child.as_dir(), b".git")?.is_some();
                let ours =
                    crate::fs::stat_in(child.as_dir(), crate::store::DATA_MARKER.as_bytes())?
                        .is_some();
                if ours || (nested && (is_target || !enter_nested)) {
                    return Ok(Obstacle::Kept); // never written into, nor replaced
                }
                if is_target {
                    // Only empty directories and files this run deletes may be replaced.
                    return Ok(match holds_only(root, walked, deleting)? {
                        true => Obstacle::None,
                        false => Obstacle::Kept,
                    });
                }
                dir = child;
            }
            Kind::Special => return Ok(Obstacle::Kept),
            Kind::File | Kind::Symlink if deleting.contains(walked) => return Ok(Obstacle::None),
            kind if is_target => return Ok(Obstacle::File(kind)),
            _ => return Ok(Obstacle::Kept), // a file or symlink outside the snapshot on the way
        }
    }
    Ok(Obstacle::None)
}

/// Whether `path` names a file rewind set aside or left behind: `.rewind-aside-…` (someone's
/// save a restore could not put back, kept beside its path) or `.rewind-<token>-<n>` (a temp
/// file of a killed restore that its sweep could not remove, which may hold someone's save).
/// A restore never deletes one: it is `kept`, and the user removes it.
///
/// ```
/// use rewind::is_left_by_rewind;
/// assert!(is_left_by_rewind(b"src/.rewind-aside-0123456789abcdef-7"));
/// assert!(is_left_by_rewind(b".rewind-0123456789abcdef-12"));
/// assert!(!is_left_by_rewind(b".rewind-config"));
/// ```
pub fn is_left_by_rewind(path: &[u8]) -> bool {
    let name = path.rsplit_str(b"/").next().unwrap_or_default();
    if name.starts_with(b".rewind-aside-") {
        return true;
    }
    let Some(rest) = name.strip_prefix(b".rewind-") else {
        return false;
    };
    let (token, n) = rest.split_at(rest.len().min(16));
    let hex = |b: &u8| b.is_ascii_digit() || (b'a'..=b'f').contains(b);
    let number = n.strip_prefix(b"-").unwrap_or_default();
    token.len() == 16
        && token.iter().all(hex)
        && !number.is_empty()
        && number.iter().all(u8::is_ascii_digit)
}

/// Whether `path` has a `.git` component (in any case: a case-insensitive file system would
/// take `.GIT` for `.git`).
fn inside_dot_git(path: &BStr) -> bool {
    path.split(|&b| b == b'/')
        .any(|name| name.eq_ignore_ascii_case(b".git"))
}

/// Whether directory `dir` holds nothing but directories and files in `deleting` (a `.git` of
/// any kind is a repository's: never entered, never replaced). Costs a walk of the directory
/// (iterative: no stack per level).
pub(crate) fn holds_only(
    root: &ProjectRoot,
    dir: &BStr,
    deleting: &HashSet<&BStr>,
) -> io::Result<bool> {
    let mut pending: Vec<BString> = vec![dir.to_owned()];
    while let Some(dir) = pending.pop() {
        for (child, kind) in root.list(dir.as_ref())? {
            let name = child.rsplit_str(b"/").next().unwrap_or_default();
            match kind {
                _ if name == b".git" => return Ok(false),
                Kind::Dir => pending.push(child),
                _ if deleting.contains(child.as_bstr()) => {}
                _ => return Ok(false),
            }
        }
    }
    Ok(true)
}

/// Write `data` for `path` (a file, or a symlink's target) to temp name `temp` in its
/// directory, creating missing directories; returns the directory. Permission bits: a file
/// that exists keeps its own, narrowed to those the target recorded (`recorded`, for a file
/// that was narrower than 0644 then); a new one gets the recorded bits, else 0644 or 0755 less
/// the umask (git's modes: never wider under a loose umask). The exec bits follow the snapshot, as in git. So a restored file is never more
/// permissive than it was, nor than it is.
fn stage(
    (dirs, narrowed): (&OpenDirs, &Narrowed),
    path: &BStr,
    (side, sight): (Side, &Visibility),
    data: &[u8],
    temp: &[u8],
) -> io::Result<Arc<Dir>> {
    // A missing directory is made as private as the target recorded it, else 0755; one its
    // owner may not write in (0555) is made writable, and narrowed once the run's files are
    // in it (r116 (3): else nothing could ever be put back in it).
    let dir_mode = |dir: &[u8]| {
        let mut key = BString::from(dir);
        key.push(b'/');
        let mode = sight.mode_of(key.as_ref()).unwrap_or(0o755);
        if mode & 0o700 == 0o700 {
            return mode;
        }
        crate::store::objects::lock(narrowed).push((BString::from(dir), mode));
        mode | 0o700
    };
    let (dir, name) = dirs.parent(path, Some(&dir_mode))?;
    let recorded = sight.mode_of(path);
    if side.is_link() {
        ProjectRoot::symlink_temp(&dir, temp, data)?;
        return Ok(dir);
    }
    let executable = side.mode & 0o111 != 0;
    let with_exec = |mode: u32| match executable {
        true => mode | (mode & 0o444) >> 2,
        false => mode & !0o111,
    };
    let existing = crate::fs::stat_in(dir.as_dir(), name)?
        .filter(|found| found.kind == Kind::File)
        .map(|found| found.mode & 0o7777);
    let perm = match (existing, recorded) {
        (Some(mode), recorded) => Perm::Exact(with_exec(mode & recorded.unwrap_or(0o7777))),
        (None, Some(mode)) => Perm::Exact(with_exec(mode)),
        (None, None) if executable => Perm::LessUmask(0o755),
        (None, None) => Perm::LessUmask(0o644),
    };
    ProjectRoot::write_temp(&dir, temp, data, perm)?;
    Ok(dir)
}

/// Whether `name` in `dir` still holds `expected` (`None`: nothing, or a directory tree that
/// the plan found empty), as when the undo point was taken. Someone may have written it since:
/// then it is theirs, and not replaced or deleted. Costs a read and a hash of the file.
fn unchanged(dir: &Dir, name: &[u8], expected: Option<Side>) -> io::Result<bool> {
    let found = crate::fs::stat_in(dir.as_dir(), name)?;
    let (found, expected) = match (found, expected) {
        (None, None) => return Ok(true),
        (Some(found), None) => return Ok(found.kind == Kind::Dir),
        (Some(found), Some(expected)) => (found, expected),
        (None, Some(_)) => return Ok(false),
    };
    let data = match found.kind {
        Kind::File if !expected.is_link() => {
            if !same_exec_bit(&found, expected) {
                return Ok(false);
            }
            crate::fs::read_file_in(dir.as_dir(), name)?
        }
        Kind::Symlink if expected.is_link() => crate::fs::read_link_in(dir.as_dir(), name)?,
        _ => return Ok(false),
    };
    is_blob(&data, expected)
}

/// Whether file `found` is executable exactly when `expected` is.
fn same_exec_bit(found: &Found, expected: Side) -> bool {
    (found.mode & 0o100 != 0) == (expected.mode & 0o111 != 0)
}

/// Whether `data` is the blob of `expected`. Costs a hash of `data`.
fn is_blob(data: &[u8], expected: Side) -> io::Result<bool> {
    let id = gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Blob, data)
        .map_err(io::Error::other)?;
    Ok(id == expected.id)
}

/// A file taken out of its path (swapped out, or set aside to be deleted) and found to be the
/// undo point's, untouched: it may go. A regular file comes with the descriptor it was read
/// through, held after its name is gone so that its blocks are freed after the run answers.
struct Untouched(Option<std::fs::File>);

impl Untouched {
    /// Remove `name` in `dir`, which it was found at. Costs an `unlink`.
    fn remove(self, dir: &Dir, name: &[u8], unlinked: &Unlinked) -> io::Result<()> {
        ProjectRoot::unlink_in(dir, name)?;
        if let Some(file) = self.0 {
            unlinked.keep(file);
        }
        Ok(())
    }
}

/// Whether `name` in `dir`, the file that stood at its path when it was looked at as `before`,
/// still holds the undo point's bytes (`expected`), untouched: its content decides (a writer
/// can put the mtime back), read between two looks that see it as `before`; a regular file is
/// read through one descriptor, so both looks and the read are of the same file. `None` when
/// it is not (it may hold someone's save). Costs an open, two `fstat`s, a read and a hash.
fn untouched(
    dir: &Dir,
    name: &[u8],
    before: &Found,
    expected: Side,
) -> io::Result<Option<Untouched>> {
    let still = |found: &Found| same_file(found, before);
    if expected.is_link() || before.kind != Kind::File {
        let look = || crate::fs::stat_in(dir.as_dir(), name);
        let same = look()?.is_some_and(|f| still(&f))
            && unchanged(dir, name, Some(expected))?
            && look()?.is_some_and(|f| still(&f));
        return Ok(same.then_some(Untouched(None)));
    }
    let (file, found) = match crate::fs::open_file_in(dir.as_dir(), name) {
        Ok(open) => open,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(_) if !crate::fs::stat_in(dir.as_dir(), name)?.is_some_and(|f| still(&f)) => {
            return Ok(None); // something else stands there now: not ours to read
        }
        Err(e) => return Err(e),
    };
    let data = crate::fs::read_all(&file, found.size)?;
    // Both looks come after the file was taken out, so its change time must not move either:
    // a write that puts the mtime back moves it.
    let after = crate::fs::stat_file(&file)?;
    let same = still(&found)
        && same_exec_bit(&found, expected)
        && is_blob(&data, expected)?
        && still(&after)
        && after.stat.ctime == found.stat.ctime;
    Ok(same.then_some(Untouched(Some(file))))
}

/// Whether `a` and `b`, two looks at a file, saw it untouched: the same device and inode, type,
/// permission bits, size and modification time (any write moves it; not the change time,
/// which the renames here move themselves).
fn same_file(a: &crate::fs::Found, b: &crate::fs::Found) -> bool {
    let identity = |f: &crate::fs::Found| {
        let s = &f.stat;
        (f.kind, f.mode, f.size, s.dev, s.ino, s.mtime, s.size)
    };
    identity(a) == identity(b)
}

/// What stands at `name` in `dir` if it still holds `expected`: `None` when it changed since the
/// undo point (or is gone). Costs a `stat`, a read and a hash of the file.
fn checked(dir: &Dir, name: &[u8], expected: Side) -> io::Result<Option<crate::fs::Found>> {
    let Some(before) = crate::fs::stat_in(dir.as_dir(), name)? else {
        return Ok(None);
    };
    Ok(unchanged(dir, name, Some(expected))?.then_some(before))
}

/// Delete the file or symlink at `path` if it still holds `expected`; `Ok(false)` when it
/// changed since the undo point (left alone). One already gone counts as deleted. The file is
/// checked, then taken aside by one atomic rename and looked at again there: a save that landed
/// between the check and the rename is put back (a conflict), never deleted. Nor is a file
/// whose directory left the project meanwhile (while the file was read, say): put back, and an
/// error. The deletion is recorded done (`done_at`) once the file set aside is found to be the
/// undo point's, before it is removed. Costs the reads and hashes, and a lookup of the
/// directory from the root.
fn delete_if_unchanged(
    root: &ProjectRoot,
    path: &BStr,
    expected: Option<Side>,
    (aside, (journal, n)): (&[u8], DoneAt),
    unlinked: &Unlinked,
) -> io::Result<bool> {
    let (dir, name) = root.parent(path, None)?;
    let gone = |deleted: bool| {
        if deleted {
            journal.done(n);
        }
        Ok(deleted)
    };
    let Some(expected) = expected else {
        return gone(crate::fs::stat_in(dir.as_dir(), name)?.is_none());
    };
    if crate::fs::stat_in(dir.as_dir(), name)?.is_none() {
        return gone(true);
    }
    let Some(before) = checked(&dir, name, expected)? else {
        return Ok(false);
    };
    match ProjectRoot::rename_in(&dir, name, aside, true) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return gone(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let taken = format!(
                "not deleted: {} is in the way (a deletion sets the file aside under that name first)",
                aside.as_bstr()
            );
            return Err(io::Error::new(e.kind(), taken));
        }
        Err(e) => return Err(e),
        Ok(()) => {}
    }
    // Only the undo point's bytes, untouched, may go; and only inside the project.
    let Ok(Some(taken)) = untouched(&dir, aside, &before, expected) else {
        return put_back(&dir, aside, name).map(|()| false);
    };
    let parent = crate::fs::split(path).0;
    // (Directories kept open: the lookup walks from the root; a deeper path reopens some.)
    match OpenDirs::new(root, 256).still_at(parent, &dir) {
        Ok(true) => {
            journal.done(n);
            let Err(e) = taken.remove(&dir, aside, unlinked) else {
                return Ok(true);
            };
            // Not removed (an I/O error): back at its name, the deletion `failed`.
            match ProjectRoot::rename_in(&dir, aside, name, true) {
                Ok(()) => {
                    journal.undone(n);
                    Err(e)
                }
                Err(_) => {
                    let kept = format!(
                        "not deleted: removing it failed ({e}), and something stands at its name \
                         now: the file is kept beside it as {}",
                        aside.as_bstr()
                    );
                    Err(io::Error::new(e.kind(), kept))
                }
            }
        }
        moved => {
            let put = ProjectRoot::rename_in(&dir, aside, name, true).map_err(|e| {
                let kept = format!(
                    "its directory left the project meanwhile, and something stands at its name \
                     there now: the file is kept beside it as {}",
                    aside.as_bstr()
                );
                io::Error::new(e.kind(), kept)
            });
            put.and(moved).and(Err(moved_away()))
        }
    }
}

/// Rename `aside` back to `name` without replacing anything; should a newer save stand at
/// `name` by then, the older one stays at `aside`, and the error names it (no byte is lost).
fn put_back(dir: &Dir, aside: &[u8], name: &[u8]) -> io::Result<()> {
    ProjectRoot::rename_in(dir, aside, name, true).map_err(|e| {
        let kept = format!(
            "saved twice meanwhile; the earlier save is kept as {}",
            aside.as_bstr()
        );
        io::Error::new(e.kind(), kept)
    })
}

/// Put the staged `temp` at `name` in `dir` (project path `path`) if `name` still holds
/// `expected`; `Ok(false)` when it changed since the undo point (left alone). The two are
/// swapped in one atomic step (`RENAME_EXCHANGE`: the path holds the old file or the new one,
/// whenever the process dies), and what came out is read: unless it is the undo point's bytes,
/// untouched since the look before the swap, it is swapped back (a conflict), never deleted.
/// An empty directory tree standing where nothing was expected (checked while planning) is
/// removed first; where nothing stood, the rename never replaces what appeared. Whatever the
/// result, `temp` is gone afterwards unless it holds someone else's bytes (then the error says
/// where they are). `still_here` says whether `dir` still stands at its path in the project: a
/// directory moved out just before the swap or the rename took it outside, and it is undone
/// (an error). The swap is recorded done (`done_at`) once what came out is found to be the undo
/// point's, before it is removed. Costs a few `stat`s, the swap, a read and a hash of the old
/// file, and its `unlink`.
fn replace(
    root: &ProjectRoot,
    path: &BStr,
    (dir, temp, name, aside): (&Dir, &[u8], &[u8], &[u8]),
    (expected, target): (Option<Side>, Side),
    (still_here, unlinked, (journal, n)): (&dyn Fn() -> io::Result<bool>, &Unlinked, DoneAt),
) -> io::Result<bool> {
    // Before the swap, `temp` holds our staged file: it goes when the swap does not happen.
    let not_swapped = |result: io::Result<bool>| {
        unlinked.remove_temp(dir, temp);
        result
    };
    let Some(expected) = expected else {
        return put_new(
            root,
            path,
            (dir, temp, name, target),
            (still_here, unlinked, (journal, n)),
        );
    };
    // A look first: something of another kind there now is left alone without a swap.
    let kind = match expected.is_link() {
        true => Kind::Symlink,
        false => Kind::File,
    };
    let before = match crate::fs::stat_in(dir.as_dir(), name) {
        Ok(Some(found)) if found.kind == kind => found,
        Ok(_) => return not_swapped(Ok(false)),
        Err(e) => return not_swapped(Err(e)),
    };
    let ours = match crate::fs::stat_in(dir.as_dir(), temp) {
        Ok(ours) => ours,
        Err(e) => return not_swapped(Err(e)),
    };
    match ProjectRoot::exchange_in(dir, temp, name) {
        Ok(()) => {}
        // A file system without the swap: check, then rename over it.
        Err(e) if e.kind() == io::ErrorKind::Unsupported => {
            return not_swapped(match checked(dir, name, expected) {
                Ok(Some(_)) => ProjectRoot::rename_in(dir, temp, name, false).map(|()| {
                    journal.done(n);
                    true
                }),
                Ok(None) => Ok(false),
                Err(e) => Err(e),
            });
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => return not_swapped(Ok(false)),
        Err(e) => return not_swapped(Err(e)),
    }
    // Only the undo point's bytes, untouched since the look before the swap, may go; and only
    // inside the project.
    let here = still_here();
    let left_the_project = !matches!(here, Ok(true));
    let checked = match here {
        Ok(true) => untouched(dir, temp, &before, expected),
        moved => moved.and(Err(moved_away())),
    };
    if let Ok(Some(taken)) = checked {
        journal.done(n);
        let Err(e) = taken.remove(dir, temp, unlinked) else {
            return Ok(true);
        };
        // Not removed (an I/O error): swapped back, so that the path is `failed` as it was, not
        // written with the file from before left beside it.
        if ProjectRoot::exchange_in(dir, temp, name).is_err() {
            let kept = format!(
                "written, but the file from before could not be removed ({e}): it is kept as {}",
                temp.as_bstr()
            );
            return Err(io::Error::new(e.kind(), kept));
        }
        journal.undone(n);
        // (What came back out is removed only if it is ours, untouched: a save made over it
        // meanwhile stays, beside the path.)
        let back = staged_back(dir, temp, ours, target);
        if let Ok(Some(staged)) = back {
            return staged.remove(dir, temp, unlinked).and(Err(e));
        }
        let kept_at = match ProjectRoot::rename_in(dir, temp, aside, true) {
            Ok(()) => aside,
            Err(_) => temp,
        };
        let what = match back {
            Err(unread) => format!("what came back out could not be read ({unread}); it"),
            _ => "a save made meanwhile".to_string(),
        };
        let kept = format!(
            "the file from before could not be removed ({e}) and is back; {what} is kept as {}",
            kept_at.as_bstr()
        );
        return Err(io::Error::new(e.kind(), kept));
    }
    // Changed before or while it was swapped (or unreadable): swap back, and keep whatever is
    // not ours. From here on `temp` may hold someone's save: it is kept, never unlinked, unless
    // it is ours.
    let kept = |e: io::Error, what: &str| {
        let kept_at = match ProjectRoot::rename_in(dir, temp, aside, true) {
            Ok(()) => aside,
            Err(_) => temp,
        };
        let message = format!("{what} is kept as {}", kept_at.as_bstr());
        io::Error::new(e.kind(), message)
    };
    if let Err(e) = ProjectRoot::exchange_in(dir, temp, name) {
        let what = format!("changed meanwhile and could not be put back ({e}); the save");
        return Err(kept(e, &what));
    }
    match staged_back(dir, temp, ours, target) {
        Ok(Some(taken)) => {
            taken.remove(dir, temp, unlinked)?;
            return checked.map(|_| false); // a conflict, or the error that stopped the read
        }
        Ok(None) => {}
        // Neither known to be ours nor a save: the path holds what it held, and this stays.
        Err(e) => {
            let what = format!(
                "not written: the swap was taken back, but what came back out could not be \
                 read ({e}); it"
            );
            return Err(kept(e, &what));
        }
    }
    // Saved twice meanwhile: the save that came back out was made while ours stood at the path,
    // after the one just put back. The newer goes to the path, the earlier beside it (as a
    // deletion does).
    if let Err(e) = ProjectRoot::exchange_in(dir, temp, name) {
        let what =
            format!("saved twice meanwhile, and the newer save could not be put back ({e}); it");
        return Err(kept(e, &what));
    }
    let earlier = match left_the_project {
        // (Outside the project now: the file that came back is the one from before, untouched.)
        true => {
            "its directory left the project meanwhile, and the file put there was changed: \
             the change stays at its name; the file from before"
        }
        false => "saved twice meanwhile; the earlier save",
    };
    Err(kept(io::Error::other("saved twice"), earlier))
}

/// Rename staged `temp` to `name` in `dir` (project path `path`), where the undo point had
/// nothing: `Ok(false)` when something other than an empty directory tree stands there now.
/// A directory moved out of the project meanwhile is not written into: the rename is taken back.
/// `temp` is gone afterwards unless it holds someone's save (then the error says so). The rename
/// is recorded done (`done_at`) once it stands.
fn put_new(
    root: &ProjectRoot,
    path: &BStr,
    (dir, temp, name, target): (&Dir, &[u8], &[u8], Side),
    (still_here, unlinked, (journal, n)): (&dyn Fn() -> io::Result<bool>, &Unlinked, DoneAt),
) -> io::Result<bool> {
    let ours = |result: io::Result<bool>| {
        unlinked.remove_temp(dir, temp);
        result
    };
    let in_place = || -> io::Result<Option<Found>> {
        if !unchanged(dir, name, None)? {
            return Ok(None);
        }
        if crate::fs::stat_in(dir.as_dir(), name)?.is_some_and(|f| f.kind == Kind::Dir) {
            root.remove_empty_tree(path)?;
        }
        let staged = crate::fs::stat_in(dir.as_dir(), temp)?;
        staged
            .map(Some)
            .ok_or_else(|| io::Error::other("its staged file is gone"))
    };
    let staged = match in_place() {
        Ok(Some(staged)) => staged,
        Ok(None) => return ours(Ok(false)),
        Err(e) => return ours(Err(e)),
    };
    match ProjectRoot::rename_in(dir, temp, name, true) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return ours(Ok(false)),
        Err(e) => return ours(Err(e)),
    }
    // (Recorded after the rename: a line before it, the temp file removed by someone after a
    // kill between the two, would say the run made a file that someone else made since, r103.
    // Killed between the rename and the line, the change is not known, the safe side.)
    if let Ok(true) = still_here() {
        journal.done(n);
        return Ok(true);
    }
    // Taken back, to be removed, only if it is ours: someone may have saved over it since, and
    // a save that came back instead goes back to its name.
    ProjectRoot::rename_in(dir, name, temp, true)?;
    match staged_back(dir, temp, Some(staged), target) {
        Ok(Some(taken)) => taken.remove(dir, temp, unlinked).and(Err(moved_away())),
        _ => put_back(dir, temp, name).and(Err(moved_away())),
    }
}

/// What stands at `temp` in `dir` after a swap or a rename was taken back, if it is the file
/// staged there (`staged`, looked at before; holding `target`'s bytes), untouched: it may go.
/// Anything else is someone's save, made over ours while it stood at the path. An error when
/// it cannot be looked at or read (out of descriptors, say): then it is neither known to be
/// ours nor a save. Costs a read and a hash of the file (a same-size save that puts the mtime
/// back matches every look but the change time and the bytes).
fn staged_back(
    dir: &Dir,
    temp: &[u8],
    staged: Option<Found>,
    target: Side,
) -> io::Result<Option<Untouched>> {
    let Some(back) = crate::fs::stat_in(dir.as_dir(), temp)? else {
        return Ok(None);
    };
    match staged {
        Some(staged) if same_file(&back, &staged) => untouched(dir, temp, &back, target),
        _ => Ok(None),
    }
}

/// The error of a file whose directory left the project while it was restored.
fn moved_away() -> io::Error {
    io::Error::other("its directory was moved or replaced during the restore")
}

/// Remove each directory in `dirs` and its parents while they are empty, up to the project;
/// returns the directories the file system refused to remove, with the error.
fn remove_empty_dirs(root: &ProjectRoot, mut dirs: Vec<BString>) -> Vec<(BString, io::Error)> {
    dirs.sort_unstable();
    dirs.dedup();
    let mut failed = Vec::new();
    for dir in dirs.into_iter().rev() {
        let mut dir = dir.as_bstr();
        while !dir.is_empty() {
            match root.remove_dir_if_empty(dir) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    if !failed.iter().any(|(left, _)| left == dir) {
                        failed.push((dir.to_owned(), e));
                    }
                    break;
                }
            }
            dir = match dir.rfind_byte(b'/') {
                Some(slash) => dir[..slash].as_bstr(),
                None => break,
            };
        }
    }
    failed
}

fn failure(path: &BString, error: &io::Error) -> Failure {
    Failure {
        path: path.clone(),
        error: error.to_string(),
    }
}
