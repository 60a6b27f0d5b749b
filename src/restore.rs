//! `restore` and `revert`: put the project's files back to a snapshot without ever losing a byte.
//!
//! Every run follows the same steps, under the store lock:
//! 1. Snapshot the project as it is now: that tree is the `undo` (recorded under
//!    `refs/rewind/undo` before anything changes, so it survives a crash of this process).
//! 2. Plan: the paths whose snapshot entry differs from the target's. Only paths in the current
//!    snapshot or in the target are ever touched; ignored files, files left out for size, nested
//!    repositories and the project's `.git` are not in either, so they are never written.
//! 3. Check: every blob the plan writes is read from the store first; a missing or corrupt
//!    object stops the run before any file changes. A path the target has but the current
//!    snapshot lacks, and which exists on disk, is a conflict (unless `force`: then its bytes
//!    are saved into the undo tree first).
//! 4. Apply: deletions, then writes. Each file is written to a temp file in its directory and
//!    renamed over the old one, so a `kill -9` leaves every file old or new. A path that cannot
//!    be written goes into `failed`, and the others continue.

use std::collections::HashSet;
use std::fs;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use gix::bstr::{BStr, BString, ByteSlice};
use gix::ObjectId;
use serde::Serialize;

use crate::diff::{read_blob, tree_changes, Change, Side};
use crate::error::{Error, Result};
use crate::scan::TrackOptions;
use crate::store::Store;

/// Options for [`Store::restore`].
#[derive(Debug, Clone, Default)]
pub struct RestoreOptions {
    /// Overwrite paths that exist on disk but are not in the current snapshot (ignored or too
    /// large files), after saving their bytes into the undo tree.
    pub force: bool,
}

/// What [`Store::restore`] and [`Store::revert`] did.
#[derive(Debug, Clone, Serialize)]
pub struct RestoreOutcome {
    /// The target snapshot (the first one, for several patches).
    pub hash: String,
    /// Files written (created or replaced), project-relative.
    pub written: Vec<String>,
    /// Files deleted.
    pub deleted: Vec<String>,
    /// Files that could not be written or deleted, with the reason; the others were done.
    pub failed: Vec<Failure>,
    /// Paths left alone because they exist on disk outside the current snapshot.
    pub conflicts: Vec<String>,
    /// A snapshot of the project from just before: `restore(undo)` puts everything back.
    pub undo: String,
}

/// A path that could not be changed.
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    pub path: String,
    pub error: String,
}

impl RestoreOutcome {
    /// Whether every planned change was made.
    pub fn is_complete(&self) -> bool {
        self.failed.is_empty()
    }
}

/// What is in the way of writing a path.
enum Obstacle {
    None,
    /// A file or symlink outside the current snapshot: saved and replaced with `force`.
    File(PathBuf, fs::Metadata),
    /// Something never replaced: a nested repository, a directory with files outside the
    /// snapshot, a file in place of a parent directory.
    Kept,
}

/// Whether directory `abs` (project path `rel`) holds nothing but directories and files in
/// `deleting`. Costs a walk of the directory.
fn holds_only(abs: &Path, rel: &BStr, deleting: &HashSet<&BStr>) -> bool {
    let Ok(entries) = fs::read_dir(abs) else {
        return false;
    };
    entries.flatten().all(|entry| {
        let mut child = BString::from(rel);
        child.push(b'/');
        child.extend_from_slice(entry.file_name().as_bytes());
        match entry.file_type() {
            Ok(t) if t.is_dir() => holds_only(&entry.path(), child.as_ref(), deleting),
            Ok(_) => deleting.contains(child.as_bstr()),
            Err(_) => false,
        }
    })
}

/// Remove directory `dir` if it holds only (empty) directories; fails otherwise.
fn remove_empty_tree(dir: &Path) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if !entry.file_type()?.is_dir() {
            return Err(io::Error::other(format!(
                "{} is in the way",
                entry.path().display()
            )));
        }
        remove_empty_tree(&entry.path())?;
    }
    fs::remove_dir(dir)
}

/// One path to bring to `target` (`None`: delete), currently `current`.
pub(crate) struct Step {
    path: BString,
    current: Option<Side>,
    target: Option<Side>,
}

impl Store {
    /// Make the project's snapshotted files exactly snapshot `hash`.
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), "/tmp/rewind".as_ref())?;
    /// let before = store.track(&Default::default())?.hash.to_string();
    /// // ... the agent edits, creates and deletes files ...
    /// let outcome = store.restore(&before, &Default::default())?;
    /// assert!(outcome.is_complete());
    /// store.restore(&outcome.undo, &Default::default())?; // and back again
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn restore(&self, hash: &str, options: &RestoreOptions) -> Result<RestoreOutcome> {
        let target = self.resolve_tree(hash)?;
        let _lock = self.lock()?;
        let current = self.track_locked(&TrackOptions::default())?.hash;
        let changes = tree_changes(&self.repo(), current, target)?;
        self.apply(
            target,
            current,
            changes.iter().map(step_of).collect(),
            options.force,
        )
    }

    /// Bring only `paths` (files or directories; project-relative, or absolute inside the
    /// project) back to their state in snapshot `hash`; a path absent from `hash` is deleted.
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), "/tmp/rewind".as_ref())?;
    /// let before = store.track(&Default::default())?.hash.to_string();
    /// // ... the agent edits src/main.rs and more ...
    /// let outcome = store.revert(&before, &["src/main.rs"])?;
    /// println!("written: {:?}, undo: {}", outcome.written, outcome.undo);
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn revert(&self, hash: &str, paths: &[impl AsRef<Path>]) -> Result<RestoreOutcome> {
        self.revert_patches(&[(hash, paths)])
    }

    /// Revert several `(hash, paths)` patches at once: for a path named in several, the first
    /// patch that names it wins (OpenCode's semantics).
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), "/tmp/rewind".as_ref())?;
    /// let (a, b) = ("4b825dc6", "9d1dcfdf"); // two snapshots
    /// // "f" comes back from `a` (named first); "g" from `b`.
    /// let a_paths: &[&str] = &["f"];
    /// let b_paths: &[&str] = &["f", "g"];
    /// store.revert_patches(&[(a, a_paths), (b, b_paths)])?;
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn revert_patches<H: AsRef<str>, P: AsRef<Path>>(
        &self,
        patches: &[(H, &[P])],
    ) -> Result<RestoreOutcome> {
        let mut requests = Vec::new();
        for (hash, paths) in patches {
            let target = self.resolve_tree(hash.as_ref())?;
            for path in paths.iter() {
                requests.push((target, self.project_path(path.as_ref())?));
            }
        }
        let first = requests.first().map(|r| r.0);
        let _lock = self.lock()?;
        let current = self.track_locked(&TrackOptions::default())?.hash;
        let repo = self.repo();
        // One tree diff per distinct target, filtered by each request's path.
        let mut diffs: Vec<(ObjectId, Vec<Change>)> = Vec::new();
        let mut steps: Vec<Step> = Vec::new();
        let mut claimed: Vec<BString> = Vec::new();
        for (target, path) in requests {
            if !diffs.iter().any(|(id, _)| *id == target) {
                diffs.push((target, tree_changes(&repo, current, target)?));
            }
            let changes = &diffs
                .iter()
                .find(|(id, _)| *id == target)
                .expect("just added")
                .1;
            for change in changes
                .iter()
                .filter(|c| is_within(c.path.as_ref(), path.as_ref()))
            {
                // A path an earlier patch named stays as that patch decided.
                if !claimed
                    .iter()
                    .any(|c| is_within(change.path.as_ref(), c.as_ref()))
                {
                    steps.push(step_of(change));
                }
            }
            claimed.push(path);
        }
        let target = first.unwrap_or(current);
        self.apply(target, current, steps, false)
    }

    /// Check, then carry out `steps` (see the module docs). `target` names the outcome.
    pub(crate) fn apply(
        &self,
        target: ObjectId,
        current: ObjectId,
        steps: Vec<Step>,
        force: bool,
    ) -> Result<RestoreOutcome> {
        let repo = self.repo();
        // Read every blob to be written first: a missing or corrupt object stops everything here.
        let mut contents = Vec::with_capacity(steps.len());
        for step in &steps {
            contents.push(match step.target {
                Some(side) => Some(read_blob(&repo, side.id, step.path.as_ref())?),
                None => None,
            });
        }

        let mut outcome = RestoreOutcome {
            hash: target.to_string(),
            written: Vec::new(),
            deleted: Vec::new(),
            failed: Vec::new(),
            conflicts: Vec::new(),
            undo: current.to_string(),
        };
        // Paths the target adds where something outside the current snapshot is in the way.
        let deleting: HashSet<&BStr> = steps
            .iter()
            .filter(|s| s.current.is_some() && s.target.is_none())
            .map(|s| s.path.as_bstr())
            .collect();
        let mut saved = Vec::new();
        let mut skip = vec![false; steps.len()];
        for (i, step) in steps.iter().enumerate() {
            if step.current.is_some() || step.target.is_none() {
                continue;
            }
            match self.obstacle(step.path.as_ref(), &deleting) {
                Obstacle::None => {}
                Obstacle::File(abs, meta) if force => {
                    saved.push((step.path.clone(), self.save_on_disk(&abs, &meta)?));
                }
                Obstacle::File(..) | Obstacle::Kept => {
                    outcome.conflicts.push(lossy(&step.path));
                    skip[i] = true;
                }
            }
        }
        let undo = if saved.is_empty() {
            current
        } else {
            let mut editor = repo
                .edit_tree(current)
                .map_err(|e| Error::store(self.git_dir(), e))?;
            for (path, (kind, id)) in &saved {
                editor
                    .upsert(path.as_bstr(), *kind, *id)
                    .map_err(|e| Error::store(self.git_dir(), e))?;
            }
            editor
                .write()
                .map_err(|e| Error::store(self.git_dir(), e))?
                .detach()
        };
        outcome.undo = undo.to_string();
        self.record_undo(undo, target)?;

        self.progress().start("restoring", steps.len() as u64);
        tracing::debug!(%target, %undo, steps = steps.len(), conflicts = outcome.conflicts.len(), "restoring");
        // Deletions first, so that a directory can replace a file and the reverse.
        let mut emptied = Vec::new();
        for (step, _) in steps
            .iter()
            .zip(&skip)
            .filter(|(s, skip)| s.target.is_none() && !**skip)
        {
            self.progress().step();
            let abs = self.abs(step.path.as_ref());
            match remove_file(&abs) {
                Ok(()) => {
                    outcome.deleted.push(lossy(&step.path));
                    emptied.extend(abs.parent().map(Path::to_owned));
                }
                Err(e) => outcome.failed.push(failure(&step.path, &e)),
            }
        }
        self.remove_empty_dirs(emptied);
        for ((step, data), _) in steps
            .iter()
            .zip(contents)
            .zip(&skip)
            .filter(|(_, skip)| !**skip)
        {
            let (Some(side), Some(data)) = (step.target, data) else {
                continue;
            };
            self.progress().step();
            match self.write_file(step.path.as_ref(), side, &data) {
                Ok(()) => outcome.written.push(lossy(&step.path)),
                Err(e) => outcome.failed.push(failure(&step.path, &e)),
            }
        }
        self.remove_stale_temp_files(&steps);
        Ok(outcome)
    }

    /// What stands on disk where the target puts `path`, which the current snapshot lacks.
    /// `deleting`: the current snapshot's paths this run deletes (they are not obstacles).
    /// Never looks through a symlink or a file on the way: those end the search.
    fn obstacle(&self, path: &BStr, deleting: &HashSet<&BStr>) -> Obstacle {
        let mut at = self.project().to_owned();
        let mut walked = BString::default();
        for name in path.split(|&b| b == b'/') {
            at.push(std::ffi::OsStr::from_bytes(name));
            if !walked.is_empty() {
                walked.push(b'/');
            }
            walked.extend_from_slice(name);
            let Ok(meta) = fs::symlink_metadata(&at) else {
                return Obstacle::None; // nothing there, nor below
            };
            let is_target = walked.len() == path.len();
            if meta.is_dir() {
                if at.join(".git").symlink_metadata().is_ok() {
                    return Obstacle::Kept; // a nested repository: never written into
                }
                if is_target {
                    // Only empty directories and files this run deletes may be replaced.
                    return match holds_only(&at, walked.as_ref(), deleting) {
                        true => Obstacle::None,
                        false => Obstacle::Kept,
                    };
                }
            } else if deleting.contains(walked.as_bstr()) {
                return Obstacle::None; // a file or symlink of the snapshot, deleted first
            } else if is_target {
                return Obstacle::File(at, meta);
            } else {
                return Obstacle::Kept; // a file or symlink outside the snapshot on the way
            }
        }
        Obstacle::None
    }

    /// The project file at `path`, saved as a blob: (tree entry kind, id).
    fn save_on_disk(
        &self,
        abs: &Path,
        meta: &fs::Metadata,
    ) -> Result<(gix::objs::tree::EntryKind, ObjectId)> {
        use gix::objs::tree::EntryKind;
        if meta.file_type().is_symlink() {
            let target = fs::read_link(abs).map_err(|e| Error::io("reading", abs, e))?;
            let id = self
                .objects()
                .write(gix::objs::Kind::Blob, target.as_os_str().as_bytes())?;
            return Ok((EntryKind::Link, id));
        }
        let data = fs::read(abs).map_err(|e| Error::io("reading", abs, e))?;
        let id = self.objects().write(gix::objs::Kind::Blob, &data)?;
        let kind = if meta.permissions().mode() & 0o100 != 0 {
            EntryKind::BlobExecutable
        } else {
            EntryKind::Blob
        };
        Ok((kind, id))
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

    fn abs(&self, path: &BStr) -> PathBuf {
        self.project().join(std::ffi::OsStr::from_bytes(path))
    }

    /// Remove the temp files a killed restore left in the directories of `steps` (ours by
    /// name; under the store lock no other restore is writing). Costs a `readdir` per directory.
    fn remove_stale_temp_files(&self, steps: &[Step]) {
        let mut dirs: Vec<PathBuf> = steps
            .iter()
            .filter_map(|s| self.abs(s.path.as_ref()).parent().map(Path::to_owned))
            .collect();
        dirs.sort_unstable();
        dirs.dedup();
        for dir in dirs {
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                if is_temp_name(entry.file_name().as_bytes()) {
                    let _ = fs::remove_file(entry.path());
                }
            }
        }
    }

    /// Remove each directory in `dirs` and its parents while they are empty, up to the project.
    fn remove_empty_dirs(&self, mut dirs: Vec<PathBuf>) {
        dirs.sort_unstable();
        dirs.dedup();
        for dir in dirs.into_iter().rev() {
            let mut dir = dir.as_path();
            while dir.starts_with(self.project())
                && dir != self.project()
                && fs::remove_dir(dir).is_ok()
            {
                match dir.parent() {
                    Some(parent) => dir = parent,
                    None => break,
                }
            }
        }
    }

    /// Write `data` as the file (or symlink) at project path `path`, atomically: a temp file in
    /// the same directory, mode set, then a rename. Never writes through a symlinked directory.
    fn write_file(&self, path: &BStr, side: Side, data: &[u8]) -> io::Result<()> {
        let abs = self.abs(path);
        let parent = abs.parent().expect("a project path has a parent");
        self.ensure_real_dirs(parent)?;
        if fs::symlink_metadata(&abs).is_ok_and(|m| m.is_dir()) {
            remove_empty_tree(&abs)?; // checked: only empty directories are left there
        }
        if side.is_link() {
            let temp = temp_name(parent);
            std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(data), &temp)?;
            return fs::rename(&temp, &abs).inspect_err(|_| {
                let _ = fs::remove_file(&temp);
            });
        }
        let executable = side.mode & 0o111 != 0;
        let mode = match fs::symlink_metadata(&abs) {
            // Keep the file's permissions, changing only the exec bits as git does.
            Ok(meta) if meta.is_file() => {
                let mode = meta.permissions().mode() & 0o777;
                if executable {
                    mode | (mode & 0o444) >> 2
                } else {
                    mode & !0o111
                }
            }
            _ if executable => 0o755,
            _ => 0o644,
        };
        let mut temp = tempfile::Builder::new()
            .prefix(".rewind-")
            .permissions(fs::Permissions::from_mode(mode))
            .tempfile_in(parent)?;
        temp.write_all(data)?;
        temp.persist(&abs).map(drop).map_err(|e| e.error)
    }

    /// Create the directories of `dir` below the project; each existing one must be a real
    /// directory (a symlink or a file in the way is an error, never followed).
    fn ensure_real_dirs(&self, dir: &Path) -> io::Result<()> {
        let relative = dir.strip_prefix(self.project()).map_err(io::Error::other)?;
        let mut at = self.project().to_owned();
        for component in relative.components() {
            at.push(component);
            match fs::symlink_metadata(&at) {
                Ok(meta) if meta.is_dir() => {}
                Ok(_) => {
                    return Err(io::Error::other(format!(
                        "{} is in the way (not a directory)",
                        at.display()
                    )))
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => fs::create_dir(&at)?,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// `path` as a project-relative `/`-separated path. Rejects paths that leave the project:
    /// `..` beyond its root, absolute paths outside it, and paths through a symlink.
    pub(crate) fn project_path(&self, path: &Path) -> Result<BString> {
        let bad = |reason| Error::BadPath {
            path: path.to_owned(),
            reason,
        };
        let relative = if path.is_absolute() {
            let lexical = path.strip_prefix(self.project());
            let canonical_parent = path.parent().and_then(|p| fs::canonicalize(p).ok());
            match (lexical, canonical_parent) {
                (Ok(rest), _) => rest.to_owned(),
                (Err(_), Some(parent)) if parent.starts_with(self.project()) => {
                    let rest = parent.strip_prefix(self.project()).expect("checked");
                    rest.join(path.file_name().unwrap_or_default())
                }
                _ => return Err(bad("is outside the project")),
            }
        } else {
            path.to_owned()
        };
        let mut parts: Vec<&[u8]> = Vec::new();
        for component in relative.components() {
            match component {
                Component::Normal(name) => parts.push(name.as_bytes()),
                Component::CurDir => {}
                Component::ParentDir => {
                    if parts.pop().is_none() {
                        return Err(bad("leaves the project (..)"));
                    }
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(bad("is outside the project"))
                }
            }
        }
        if parts.first() == Some(&&b".git"[..]) {
            return Err(bad("is inside the project's .git"));
        }
        // Every directory on the way must be real: a symlink could lead outside the project.
        let mut at = self.project().to_owned();
        for name in parts.iter().take(parts.len().saturating_sub(1)) {
            at.push(std::ffi::OsStr::from_bytes(name));
            if fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(bad("goes through a symlink"));
            }
        }
        Ok(parts.join(&b'/').into())
    }
}

pub(crate) fn step_of(change: &Change) -> Step {
    Step {
        path: change.path.clone(),
        current: change.before,
        target: change.after,
    }
}

/// Remove a file or symlink; one already gone is fine.
fn remove_file(abs: &Path) -> io::Result<()> {
    match fs::remove_file(abs) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// The names of restore's temp files: `.rewind-` and 6 letters or digits (a file's), or
/// `.rewind-link-<pid>-<nanos>` (a symlink's).
fn is_temp_name(name: &[u8]) -> bool {
    match name.strip_prefix(b".rewind-") {
        Some(rest) if rest.starts_with(b"link-") => true,
        Some(rest) => rest.len() == 6 && rest.iter().all(u8::is_ascii_alphanumeric),
        None => false,
    }
}

/// A fresh name for a temporary symlink in `dir`.
fn temp_name(dir: &Path) -> PathBuf {
    let unique = format!(
        ".rewind-link-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    dir.join(unique)
}

/// Whether `path` is `dir` or below it (`dir` empty: the whole project).
fn is_within(path: &BStr, dir: &BStr) -> bool {
    dir.is_empty()
        || path == dir
        || (path.starts_with(dir.as_bytes()) && path.get(dir.len()) == Some(&b'/'))
}

fn lossy(path: &BString) -> String {
    path.to_str_lossy().into_owned()
}

fn failure(path: &BString, error: &io::Error) -> Failure {
    Failure {
        path: lossy(path),
        error: error.to_string(),
    }
}
