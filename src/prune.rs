//! Retention: forget expired records, then delete the objects nothing live reaches.
//!
//! What expires (the clock is the store's clock, so `REWIND_NOW` decides in tests):
//! * a snapshot `track` returned, `retention` after it was last taken (each one is recorded as
//!   `refs/rewind/snapshots/<tree>`, a commit of the tree at the time it was taken);
//! * a session, with all its turns, `retention` after its last turn began or ended; a session
//!   with an open turn stays until that turn is abandoned (open for `abandoned_after`, 30 days
//!   by default), and the outcome names the abandoned turns;
//! * undo points older than `retention` (the `refs/rewind/undo` chain is cut there, once they
//!   are an eighth as many as the newer ones: a cut copies every newer point);
//! * reflog entries older than `retention`.
//!
//! Then git's rule: refs, reflogs and the index are roots (and the last snapshot named in the
//! store); loose objects younger than an hour are roots too; everything they reach is kept, and
//! other loose objects are deleted. Leftover temp files older than an hour go as well. The whole run holds the store lock, so no `track`
//! can be writing objects that nothing references yet.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use chrono::{DateTime, Utc};
use gix::ObjectId;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::store::objects::LooseObject;
use crate::store::pruned::Why;
use crate::store::settings::{parse_duration, parse_size};
use crate::store::{
    files_below, leftovers, objects_size, Locked, Store, RECORDS, SNAPSHOT_RECORDS,
};
use crate::turns::{session_ref, turn_ref};

/// Default for `rewind.retention`.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// The file in the store that holds the time of the last prune.
pub(crate) const LAST_PRUNE: &str = "rewind-last-prune";

/// Temp files younger than this may belong to a running process.
const TEMP_GRACE: Duration = Duration::from_secs(3600);

/// Default for `rewind.abandonedTurnAfter`: an open turn keeps its session this long.
pub const DEFAULT_ABANDONED_AFTER: Duration = Duration::from_secs(30 * 24 * 3600);

/// Default for `rewind.maxTurnsPerSession`.
pub const DEFAULT_MAX_TURNS_PER_SESSION: usize = 100;
/// Default for `rewind.maxSize`: above it, the oldest records go...
pub const DEFAULT_MAX_SIZE: u64 = 500 << 20;
/// ...until the store is under `rewind.targetSize`.
pub const DEFAULT_TARGET_SIZE: u64 = 300 << 20;

/// Options for [`Store::prune`]; each `None` falls back to the store's git config, then to
/// the default.
#[derive(Debug, Clone, Default)]
pub struct PruneOptions {
    /// How long records live (`rewind.retention`, default 7 days).
    pub retention: Option<Duration>,
    /// How long an open turn keeps its session from expiring (`rewind.abandonedTurnAfter`,
    /// default 30 days); after that the turn counts as abandoned.
    pub abandoned_after: Option<Duration>,
    /// Turns kept per session (`rewind.maxTurnsPerSession`, default 100).
    pub max_turns_per_session: Option<usize>,
    /// Store size that triggers dropping the oldest records (`rewind.maxSize`, 500 MB).
    pub max_size: Option<u64>,
    /// Size to get under once triggered (`rewind.targetSize`, 300 MB).
    pub target_size: Option<u64>,
    /// Change nothing: say what a prune would remove now, and estimate what it would free.
    pub dry_run: bool,
}

/// What [`Store::prune`] removed.
#[derive(Debug, Clone, Default, Serialize)]
#[non_exhaustive]
pub struct PruneOutcome {
    /// Snapshot records removed.
    pub snapshots_removed: usize,
    /// Turns removed (with their sessions, or trimmed off a long session).
    pub turns_removed: usize,
    /// Objects deleted (loose, or left out of the repacked pack).
    pub objects_removed: usize,
    /// Disk space given back, in bytes.
    pub bytes_freed: u64,
    /// Sessions removed whole: their last turn expired, or the store was over its size quota.
    pub sessions_removed: Vec<String>,
    /// Those of `sessions_removed` that went for the size quota (`rewind.maxSize`), not age.
    pub sessions_removed_for_size: Vec<String>,
    /// How many of `snapshots_removed` went for the size quota, not age.
    pub snapshots_removed_for_size: usize,
    /// Open turns that went with their sessions: open for longer than `abandoned_after`.
    pub abandoned_turns: Vec<AbandonedTurn>,
    /// The store is still over `rewind.targetSize` after the quota removed all it may: what
    /// holds the space is in use (an active session, snapshots taken within the hour).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub still_over_quota: bool,
    /// A dry run: nothing was removed. The records are those the real run would remove now;
    /// `objects_removed` and `bytes_freed` are estimates (objects at their stored size, before
    /// any repack, not counting the old copies of a rewritten chain), and so are the size
    /// quota's choices.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
}

/// An open turn prune removed with its session (see [`PruneOptions::abandoned_after`]).
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct AbandonedTurn {
    /// The session.
    pub session: String,
    /// The turn.
    pub turn: String,
    /// When it began.
    pub started_at: DateTime<Utc>,
}

/// What [`prune_all`] did with each store under a data directory.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct PruneAllOutcome {
    /// Each store pruned: its project, and what went.
    pub pruned: Vec<(PathBuf, PruneOutcome)>,
    /// The stores that could not be opened or pruned, each with its error.
    pub failed: Vec<Error>,
    /// Damaged stores set aside earlier (never removed automatically).
    pub set_aside: Vec<PathBuf>,
}

impl PruneAllOutcome {
    /// [`Error::PruneFailed`] when some store could not be pruned.
    pub fn ensure_complete(&self) -> Result<()> {
        match self.failed.len() {
            0 => Ok(()),
            n => Err(Error::PruneFailed(n)),
        }
    }
}

/// Prune every store under `open`'s data directory (what `rewind prune --all` runs hourly),
/// each opened with `open` and pruned with `options`. One store's failure does not stop the
/// others. Costs a [`Store::prune`] per store.
///
/// ```no_run
/// let open = rewind::OpenOptions::new(rewind::data_dir(None)?);
/// let all = rewind::prune_all(&open, &Default::default())?;
/// for (project, outcome) in &all.pruned {
///     println!("{}: {} objects removed", project.display(), outcome.objects_removed);
/// }
/// all.ensure_complete()?;
/// # Ok::<(), rewind::Error>(())
/// ```
pub fn prune_all(
    open: &crate::store::OpenOptions,
    options: &PruneOptions,
) -> Result<PruneAllOutcome> {
    let mut all = PruneAllOutcome::default();
    for store in Store::all(open)? {
        match store.and_then(|store| Ok((store.project().to_owned(), store.prune(options)?))) {
            Ok(pruned) => all.pruned.push(pruned),
            Err(err) => all.failed.push(err),
        }
    }
    all.set_aside = Store::set_aside_stores(open.data_dir())?;
    Ok(all)
}

/// [`PruneOptions`] completed from a store's git config and the defaults.
struct Settings {
    retention: Duration,
    abandoned_after: Duration,
    max_turns: usize,
    max_size: u64,
    target_size: u64,
}

/// `given` (a flag), else what `read` finds in the store's config (not read when a flag is
/// given), else `default`.
fn given_or<T>(
    given: Option<T>,
    read: impl FnOnce() -> Result<Option<T>>,
    default: T,
) -> Result<T> {
    match given {
        Some(given) => Ok(given),
        None => Ok(read()?.unwrap_or(default)),
    }
}

/// `now - age`, or the start of the calendar when `age` reaches back further.
fn before(now: DateTime<Utc>, age: Duration) -> DateTime<Utc> {
    chrono::TimeDelta::from_std(age)
        .ok()
        .and_then(|age| now.checked_sub_signed(age))
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

impl Store {
    /// `options` completed from the store's git config and the defaults; a key set to a value
    /// that cannot be read is an error (a guess would drop what the user meant to keep).
    fn prune_settings(&self, options: &PruneOptions) -> Result<Settings> {
        const DURATION: &str = "a duration such as 7d, 12h or 2w";
        const SIZE: &str = "a size such as 500M or 2G";
        let duration = |key| self.setting(key, DURATION, parse_duration);
        let size = |key| self.setting(key, SIZE, parse_size);
        let turns = |key| self.setting(key, "a whole number such as 100", |v| v.parse().ok());
        Ok(Settings {
            retention: given_or(
                options.retention,
                || duration("rewind.retention"),
                DEFAULT_RETENTION,
            )?,
            abandoned_after: given_or(
                options.abandoned_after,
                || duration("rewind.abandonedTurnAfter"),
                DEFAULT_ABANDONED_AFTER,
            )?,
            max_turns: given_or(
                options.max_turns_per_session,
                || turns("rewind.maxTurnsPerSession"),
                DEFAULT_MAX_TURNS_PER_SESSION,
            )?,
            max_size: given_or(
                options.max_size,
                || size("rewind.maxSize"),
                DEFAULT_MAX_SIZE,
            )?,
            target_size: given_or(
                options.target_size,
                || size("rewind.targetSize"),
                DEFAULT_TARGET_SIZE,
            )?,
        })
    }

    /// Delete expired records and the objects nothing live reaches (see the module docs).
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), &rewind::OpenOptions::new("/tmp/rewind"))?;
    /// let outcome = store.prune(&rewind::PruneOptions::default())?;
    /// println!("freed {} bytes", outcome.bytes_freed);
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn prune(&self, options: &PruneOptions) -> Result<PruneOutcome> {
        let settings = self.prune_settings(options)?;
        let (max_size, target_size) = (settings.max_size, settings.target_size);
        let now = self.now()?;
        // A retention longer than the calendar reaches back expires nothing.
        let cutoff = before(now, settings.retention);
        let abandoned = before(now, settings.abandoned_after);
        let locked = self.lock()?;
        if options.dry_run {
            return locked.preview(&settings, now, cutoff, abandoned);
        }
        // A restore killed before it finished: its leftovers are swept and told first, as by
        // every snapshot, and its undo point, which the warning names, outlives this prune.
        let killed = locked.killed_runs_undo_point();
        locked.sweep_temp_files();
        // What a stopped run did not do is asked of the store while a session's chain names
        // it; a finished run's, only in the moment after it (kept a retention). (Not a reason
        // to fail a prune, which may be freeing a full disk.)
        let forgotten = locked
            .session_names(abandoned)
            .and_then(|sessions| locked.runs_named_by(&sessions))
            .and_then(|named| locked.forget_runs_before(cutoff, &named));
        if let Err(e) = forgotten {
            tracing::warn!("dropping the record of old runs: {e}");
        }
        let mut outcome = PruneOutcome::default();
        let mut removed: Vec<(String, Why, Option<DateTime<Utc>>)> = Vec::new();
        let git_dir = locked.git_dir();
        let size_before = objects_size(git_dir);
        // Under the store lock, a lock file on one of rewind's refs, or on `packed-refs`, is a
        // killed run's.
        locked.remove_stale_packed_refs_lock();
        for file in files_below(&git_dir.join(RECORDS)) {
            if file.extension().is_some_and(|e| e == "lock") {
                crate::store::refs::remove_stale_lock(&file);
            }
        }
        // What goes, decided first: the marks that must outlive it (open turns made blind, the
        // record of what was pruned) are written before anything goes, so that a kill between
        // leaves them.
        let expiring = locked.expiring_sessions(cutoff, abandoned)?;
        let (_, untrimmed) = locked.sessions_open_turns_need(cutoff)?;
        let mut trimmed = Vec::new();
        for session in locked.session_names(abandoned)? {
            let expires = expiring.iter().any(|(expiring, _)| *expiring == session);
            if !expires && !untrimmed.contains(&session) {
                let (turns, _, empties) = locked.trim_preview(&session, settings.max_turns)?;
                for turn in &turns {
                    removed.push((turn_ref(&session, "turns", turn)?, Why::Trimmed, None));
                }
                // (Left with no turn, the session is said pruned, not unknown.)
                if empties {
                    removed.push((session_ref(&session, "")?, Why::Trimmed, None));
                }
                if !turns.is_empty() {
                    trimmed.push(session);
                }
            }
        }
        for (session, activity) in &expiring {
            let last = Some(activity.last);
            removed.push((session_ref(session, "")?, activity.why(), last));
        }
        if !removed.is_empty() {
            locked.blind_old_open_turns(cutoff)?;
            locked.remember_pruned(now, &removed)?;
        }
        locked.expire_snapshots(cutoff, &locked.kept_records(&expiring)?, &mut outcome)?;
        for (session, activity) in expiring {
            locked.delete_session(&session)?;
            note_expired(&mut outcome, session, activity)?;
        }
        // The records left go into `packed-refs` (a loose ref costs a file system block), and
        // so a trim moves a session's refs in one write.
        locked.pack_refs(RECORDS)?;
        for session in trimmed {
            outcome.turns_removed += locked.trim_session(&session, settings.max_turns)?.len();
        }
        locked.expire_undo(cutoff, killed)?;
        // Unreachable objects younger than an hour may be a `git` command's, run in the store
        // by a person; rewind writes none that nothing names (it holds the lock meanwhile).
        locked.collect(cutoff, before(now, TEMP_GRACE), &mut outcome)?;
        // Over the quota: drop the oldest records, a quarter at a time, until under the target.
        if objects_size(git_dir) > max_size {
            let mut candidates = locked.quota_candidates(now, cutoff, abandoned)?;
            // Dropping them all would still leave the store over the target: dropping any
            // loses a record for nothing.
            let all = Gone::of(&candidates)?;
            if locked.estimate(&all, cutoff, now)?.kept_bytes > target_size {
                candidates.clear();
            }
            while objects_size(git_dir) > target_size && !candidates.is_empty() {
                let batch: Vec<Record> = candidates.drain(..candidates.len().div_ceil(4)).collect();
                let mut sessions = Vec::new();
                for candidate in &batch {
                    if let Record::Session(session, _, last) = candidate {
                        sessions.push((session_ref(session, "")?, Why::Quota, Some(*last)));
                    }
                }
                if !sessions.is_empty() {
                    locked.blind_old_open_turns(cutoff)?;
                    locked.remember_pruned(now, &sessions)?;
                }
                let mut snapshots = Vec::new();
                for candidate in batch {
                    match &candidate {
                        Record::Snapshot(name) => snapshots.push(name.clone()),
                        Record::Session(session, ..) => locked.delete_session(session)?,
                    }
                    note_quota(&mut outcome, candidate);
                }
                locked.delete_refs(&snapshots)?;
                locked.collect(cutoff, now, &mut outcome)?;
            }
            outcome.still_over_quota = objects_size(git_dir) > target_size;
        }
        locked.remove_temp_files(now);
        // The directories deleted refs and expired reflogs emptied: gix removes those a
        // deletion empties only when the store's path is absolute (`--data-dir` may be
        // relative), and never those of reflogs it did not delete itself.
        for dir in ["refs/rewind", "logs"] {
            remove_empty_dirs(&locked.git_dir().join(dir));
        }
        outcome.bytes_freed = size_before.saturating_sub(objects_size(git_dir));
        tracing::debug!(?outcome, "pruned");
        // For `rewind doctor`: when the last prune ran.
        let _ = crate::fs::write_atomically(
            &locked.git_dir().join(LAST_PRUNE),
            "index.tmp",
            now.to_rfc3339().as_bytes(),
        );
        Ok(outcome)
    }
}

impl Locked<'_> {
    /// Expire reflog entries older than `cutoff`, delete unreachable loose objects older than
    /// `object_expiry`, and repack if worthwhile.
    fn collect(
        &self,
        cutoff: DateTime<Utc>,
        object_expiry: DateTime<Utc>,
        outcome: &mut PruneOutcome,
    ) -> Result<()> {
        let reflog_roots = self.expire_reflogs(cutoff)?;
        let reachable = self.sweep(object_expiry, reflog_roots, outcome)?;
        self.repack(&reachable, outcome)
    }
    /// Delete the files stock git keeps beside the objects (from a `git gc`, `repack`,
    /// `multi-pack-index write`, `commit-graph write` or `update-server-info` someone ran in the
    /// store): they name packs and commits, and are only caches that git rebuilds. Called
    /// before any pack or object is deleted: git fails on a multi-pack-index that names a
    /// missing pack, and gix then finds no object of the packs it does not list. Costs a
    /// `readdir` of `objects/pack` and a few `unlink`s.
    fn remove_git_caches(&self) -> Result<()> {
        let objects = self.git_dir().join("objects");
        let mut files = vec![
            objects.join("info/multi-pack-index"),
            objects.join("info/commit-graph"),
            objects.join("info/packs"),
        ];
        let pack_dir = objects.join("pack");
        if let Ok(entries) = fs::read_dir(&pack_dir) {
            let names = entries.flatten().map(|e| e.file_name());
            let midx = names.filter(|n| n.to_string_lossy().starts_with("multi-pack-index"));
            files.extend(midx.map(|name| pack_dir.join(name)));
        }
        for file in files {
            match fs::remove_file(&file) {
                Err(e) if e.kind() == io::ErrorKind::IsADirectory => {
                    remove_dir(&file)?; // objects/pack/multi-pack-index.d (incremental)
                }
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    return Err(Error::io("removing git's cache", &file, e));
                }
                _ => {}
            }
        }
        remove_dir(&objects.join("info/commit-graphs"))
    }
}

impl Store {
    /// What the size quota may drop, oldest first: snapshot records, and whole sessions that
    /// were not active in the last hour, have no open turn (retention never touches those),
    /// hold no rolled-back turn (those wait for their age) and are not needed by another
    /// session's open turn begun since `cutoff` (see [`Store::sessions_open_turns_need`]).
    /// A turn open since before `abandoned` no longer counts as open.
    fn quota_candidates(
        &self,
        now: DateTime<Utc>,
        cutoff: DateTime<Utc>,
        abandoned: DateTime<Utc>,
    ) -> Result<Vec<Record>> {
        let mut timed: Vec<(DateTime<Utc>, Record)> = Vec::new();
        // A snapshot taken within the hour may be the checkpoint a user is about to go back to.
        // Its record's time is when it was first taken in the hour (a record is refreshed at
        // most hourly), so a record younger than two hours may have been taken within it.
        let kept = self.kept_records(&[])?;
        for (name, commit) in self.refs_under(SNAPSHOT_RECORDS)? {
            let recorded = self.commit_time(commit)?;
            if now - recorded > chrono::Duration::hours(2) && !kept.contains(&name) {
                timed.push((recorded, Record::Snapshot(name)));
            }
        }
        let (needed, _) = self.sessions_open_turns_need(cutoff)?;
        for (session, activity) in self.session_activity(abandoned)? {
            let idle = now - activity.last > chrono::Duration::hours(1);
            if idle && !activity.open && !activity.rolled_back && !needed.contains(&session) {
                let record = Record::Session(session, activity.turns, activity.last);
                timed.push((activity.last, record));
            }
        }
        timed.sort_by_key(|(time, _)| *time);
        Ok(timed.into_iter().map(|(_, record)| record).collect())
    }

    /// What stays and what goes once `gone` is gone (each object at its size in its pack or
    /// loose file; loose objects younger than `young` stay, as in a prune): what prune can
    /// bring the store down to. Costs a reachability walk, reading the reflogs (their entries
    /// since `cutoff`) and the pack indexes.
    fn estimate(
        &self,
        gone: &Gone,
        cutoff: DateTime<Utc>,
        young: DateTime<Utc>,
    ) -> Result<Estimate> {
        let mut roots = self.roots(&|name| gone.keeps(name))?;
        let logs = self.git_dir().join("logs");
        for file in files_below(&logs) {
            let name = file.strip_prefix(&logs).ok().and_then(|name| name.to_str());
            if name.is_some_and(|name| gone.keeps(name) && !gone.loses_reflog(name)) {
                let content = fs::read(&file).unwrap_or_default();
                let entries = content
                    .split_inclusive(|&b| b == b'\n')
                    .filter_map(reflog_entry);
                let recent = entries.filter(|(_, time)| *time >= cutoff.timestamp());
                roots.extend(recent.flat_map(|(ids, _)| ids));
            }
        }
        let young = SystemTime::UNIX_EPOCH + Duration::from_secs(young.timestamp().max(0) as u64);
        roots.extend(
            self.loose_objects()
                .iter()
                .filter(|o| o.modified >= young)
                .map(|o| o.id),
        );
        let reachable = self.reachable_around(roots, &gone.hollow);
        // What a pack of them costs besides its entries: its index (a 1,072-byte header and
        // trailer, 28 bytes an object), and the directories `objects/`, `pack/` and `info/`.
        let mut estimate = Estimate {
            kept_bytes: 1072 + 28 * reachable.len() as u64 + 3 * 4096,
            ..Default::default()
        };
        for (id, size) in self.stored_sizes()? {
            match reachable.contains(&id) {
                true => estimate.kept_bytes += size,
                false => {
                    estimate.freed_bytes += size;
                    estimate.freed_objects += 1;
                }
            }
        }
        Ok(estimate)
    }

    /// What a prune would remove now and free (see [`PruneOptions::dry_run`]): the same rules,
    /// in the same order, each applied to what the ones before would leave; nothing changes.
    fn preview(
        &self,
        settings: &Settings,
        now: DateTime<Utc>,
        cutoff: DateTime<Utc>,
        abandoned: DateTime<Utc>,
    ) -> Result<PruneOutcome> {
        let mut outcome = PruneOutcome {
            dry_run: true,
            ..Default::default()
        };
        let mut gone = Gone::default();
        let expiring = self.expiring_sessions(cutoff, abandoned)?;
        let kept = self.kept_records(&expiring)?;
        for (name, commit) in self.refs_under(SNAPSHOT_RECORDS)? {
            if self.commit_time(commit)? < cutoff && !kept.contains(&name) {
                gone.refs.insert(name);
                outcome.snapshots_removed += 1;
            }
        }
        let expired: HashSet<String> = expiring
            .iter()
            .map(|(session, _)| session.clone())
            .collect();
        for (session, activity) in expiring {
            let prefix = note_expired(&mut outcome, session, activity)?;
            gone.prefixes.push(prefix);
        }
        let (_, untrimmed) = self.sessions_open_turns_need(cutoff)?;
        for session in self.session_names(abandoned)? {
            if expired.contains(&session) || untrimmed.contains(&session) {
                continue;
            }
            let (turns, commits, _) = self.trim_preview(&session, settings.max_turns)?;
            if !turns.is_empty() {
                outcome.turns_removed += turns.len();
                for turn in &turns {
                    gone.refs.insert(turn_ref(&session, "turns", turn)?);
                }
                gone.rewritten.push(session_ref(&session, "")?);
                gone.hollow.extend(commits);
            }
        }
        let killed = self.killed_runs_undo_point();
        let keeps = |name: &str| gone.keeps(name);
        let (kept_points, expired_points) = self.undo_points(cutoff, killed, &keeps)?;
        if !expired_points.is_empty() {
            gone.rewritten.push(UNDO_REF.into());
            gone.hollow.extend(expired_points);
            if kept_points.is_empty() {
                gone.refs.insert(UNDO_REF.into());
            }
        }
        let young = before(now, TEMP_GRACE);
        let mut estimate = self.estimate(&gone, cutoff, young)?;
        if estimate.kept_bytes > settings.max_size {
            let candidates: Vec<Record> = self
                .quota_candidates(now, cutoff, abandoned)?
                .into_iter()
                .filter(|record| !gone.holds(record))
                .collect();
            let mut all = Gone::of(&candidates)?;
            all.extend(&gone);
            let mut candidates =
                match self.estimate(&all, cutoff, now)?.kept_bytes > settings.target_size {
                    true => Vec::new(),
                    false => candidates,
                };
            while estimate.kept_bytes > settings.target_size && !candidates.is_empty() {
                let batch = candidates.len().div_ceil(4);
                for candidate in candidates.drain(..batch) {
                    gone.add(&candidate)?;
                    note_quota(&mut outcome, candidate);
                }
                estimate = self.estimate(&gone, cutoff, now)?;
            }
            outcome.still_over_quota = estimate.kept_bytes > settings.target_size;
        }
        outcome.objects_removed = estimate.freed_objects;
        outcome.bytes_freed = estimate.freed_bytes;
        Ok(outcome)
    }

    /// The sessions retention removes now: idle since before `cutoff`, no turn open since
    /// `abandoned` or later, and not needed by another session's open turn (see
    /// [`Store::sessions_open_turns_need`]). Costs reading every turn record.
    fn expiring_sessions(
        &self,
        cutoff: DateTime<Utc>,
        abandoned: DateTime<Utc>,
    ) -> Result<Vec<(String, Activity)>> {
        let (needed, _) = self.sessions_open_turns_need(cutoff)?;
        Ok(self
            .session_activity(abandoned)?
            .into_iter()
            .filter(|(session, activity)| {
                activity.last < cutoff && !activity.open && !needed.contains(session)
            })
            .collect())
    }

    /// The undo points to keep (newest first) and those to cut off the chain now: those older
    /// than `cutoff` (but the one of snapshot `killed`, a killed restore's, and the newer, and
    /// every one an undo of a session `keep` accepts names: its redo needs it, and the chain is
    /// what makes it reachable for git, whose `gc` a person may run), once they are at least an
    /// eighth as many as the newer ones (cutting rewrites every newer point, so it waits until
    /// that is worth it: hourly points are not all copied at every hourly prune); else none.
    /// Costs a commit read per undo point, and reading the sessions' chains.
    fn undo_points(
        &self,
        cutoff: DateTime<Utc>,
        killed: Option<ObjectId>,
        keep: &dyn Fn(&str) -> bool,
    ) -> Result<(Vec<ObjectId>, Vec<ObjectId>)> {
        let needed: HashSet<ObjectId> = self.undo_points_of_sessions(keep)?.into_iter().collect();
        let (mut kept, mut expired) = (Vec::new(), Vec::new());
        let mut next = self.ref_target(UNDO_REF)?;
        let repo = self.repo();
        while let Some(id) = next {
            let commit = repo
                .find_commit(id)
                .map_err(|e| Error::store(self.git_dir(), e))?;
            let tree = commit
                .tree_id()
                .map_err(|e| Error::store(self.git_dir(), e))?
                .detach();
            let young = self.commit_time(id)? >= cutoff;
            let newest = expired.is_empty() && (young || Some(tree) == killed);
            match newest || needed.contains(&tree) {
                true => kept.push(id),
                false => expired.push(id),
            }
            next = commit.parent_ids().next().map(|id| id.detach());
        }
        if expired.len() * 8 < kept.len() {
            kept.append(&mut expired);
        }
        Ok((kept, expired))
    }

    /// The snapshot records that outlive the retention: those of the trees the chains of the
    /// sessions that stay (all but `expiring`) name ([`Store::undo_points_of_sessions`]), whose
    /// redo or restore needs the modes and the left-out files the record holds. Costs reading
    /// those chains.
    fn kept_records(&self, expiring: &[(String, Activity)]) -> Result<HashSet<String>> {
        let going: Vec<String> = expiring
            .iter()
            .map(|(session, _)| session_ref(session, ""))
            .collect::<Result<_>>()?;
        let staying = |name: &str| !going.iter().any(|prefix| name.starts_with(prefix));
        let points = self.undo_points_of_sessions(&staying)?.into_iter();
        Ok(points.map(crate::store::refs::snapshot_record).collect())
    }

    /// The roots of every collection but the reflogs: the refs `keep` accepts, the undo points
    /// their sessions' undos name, the stat cache, the last snapshot named (which a run that
    /// wrote files above the size cap may have written with no ref: r83 (1)), and the empty
    /// tree. Costs listing the refs, reading the sessions' chains and the index.
    fn roots(&self, keep: &dyn Fn(&str) -> bool) -> Result<Vec<ObjectId>> {
        let refs = self.refs_under("refs/")?.into_iter();
        let mut roots: Vec<ObjectId> = refs
            .filter(|(name, _)| keep(name))
            .map(|(_, id)| id)
            .collect();
        roots.extend(self.undo_points_of_sessions(keep)?);
        roots.extend(self.index_roots());
        roots.extend(self.last_snapshot());
        // The empty tree, written when the store was created: stock git needs it stored.
        roots.push(ObjectId::empty_tree(gix::hash::Kind::Sha1));
        Ok(roots)
    }

    /// Each stored object with the disk space it takes: its loose file's blocks, or its entry
    /// in a pack (the distance to the next entry). Costs a `stat` per loose object and reading
    /// the indexes.
    fn stored_sizes(&self) -> Result<Vec<(ObjectId, u64)>> {
        let mut sizes: Vec<(ObjectId, u64)> = self
            .loose_objects()
            .into_iter()
            .map(|o| {
                (
                    o.id,
                    fs::metadata(&o.path).map_or(0, |m| crate::fs::allocated(&m)),
                )
            })
            .collect();
        for file in files_below(&self.git_dir().join("objects/pack")) {
            if file.extension().is_none_or(|e| e != "idx") {
                continue;
            }
            let index = gix::odb::pack::index::File::at(&file, gix::hash::Kind::Sha1)
                .map_err(|e| Error::store(&file, e))?;
            let mut entries: Vec<(u64, ObjectId)> =
                index.iter().map(|e| (e.pack_offset, e.oid)).collect();
            entries.sort_unstable();
            // The pack ends with a 20-byte checksum.
            let end =
                fs::metadata(file.with_extension("pack")).map_or(0, |m| m.len().saturating_sub(20));
            let next = entries
                .iter()
                .skip(1)
                .map(|(offset, _)| *offset)
                .chain([end]);
            sizes.extend(
                entries
                    .iter()
                    .zip(next)
                    .map(|((offset, id), next)| (*id, next.saturating_sub(*offset))),
            );
        }
        Ok(sizes)
    }

    /// Every session with a turn in the store.
    fn session_names(&self, abandoned: DateTime<Utc>) -> Result<Vec<String>> {
        let sessions = self.session_activity(abandoned)?.into_iter();
        Ok(sessions
            .filter(|(_, a)| a.turns > 0)
            .map(|(s, _)| s)
            .collect())
    }

    /// Each session's turn count, last activity (its newest turn or chain commit), and whether
    /// a turn is open (since `abandoned` or later: one open since before is abandoned) or rolled
    /// back; a session a trim left with no turn counts too. Costs reading every turn's commit
    /// and every session's head.
    fn session_activity(&self, abandoned: DateTime<Utc>) -> Result<BTreeMap<String, Activity>> {
        let mut sessions: BTreeMap<String, Activity> = BTreeMap::new();
        for turn in self.turns_with(None, &crate::turns::SummaryOptions { renames: false })? {
            // The later of the two: a clock that stepped back during the turn must not age it.
            let at = turn
                .ended_at
                .map_or(turn.started_at, |e| e.max(turn.started_at));
            let activity = sessions.entry(turn.session).or_insert(Activity {
                turns: 0,
                last: at,
                open: false,
                abandoned: Vec::new(),
                rolled_back: false,
            });
            activity.turns += 1;
            activity.last = activity.last.max(at);
            if turn.ended_at.is_none() {
                match turn.started_at < abandoned {
                    true => activity.abandoned.push((turn.turn, turn.started_at)),
                    false => activity.open = true,
                }
            }
            activity.rolled_back |= turn.rolled_back;
        }
        // Last active when its newest chain commit was written: an undo, a redo or a trim is
        // activity too (a trim of every turn leaves a session its head alone, or only its
        // rolled-back turns, older than the turns it dropped).
        for (session, at) in self.session_heads()? {
            let activity = sessions.entry(session).or_insert(Activity {
                turns: 0,
                last: at,
                open: false,
                abandoned: Vec::new(),
                rolled_back: false,
            });
            activity.last = activity.last.max(at);
        }
        Ok(sessions)
    }
}

impl Locked<'_> {
    /// Delete every ref of `session`.
    fn delete_session(&self, session: &str) -> Result<()> {
        let prefix = session_ref(session, "")?;
        let names: Vec<String> = self
            .refs_under(&prefix)?
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        self.delete_refs(&names)
    }
    /// Delete the snapshot records taken before `cutoff`, but those `kept` names.
    fn expire_snapshots(
        &self,
        cutoff: DateTime<Utc>,
        kept: &HashSet<String>,
        outcome: &mut PruneOutcome,
    ) -> Result<()> {
        let mut expired = Vec::new();
        for (name, commit) in self.refs_under(SNAPSHOT_RECORDS)? {
            if self.commit_time(commit)? < cutoff && !kept.contains(&name) {
                expired.push(name);
            }
        }
        self.delete_refs(&expired)?;
        outcome.snapshots_removed += expired.len();
        Ok(())
    }
    /// Keep only the undo points newer than `cutoff`: the chain is rewritten without the older
    /// ones (same trees, messages and times).
    fn expire_undo(&self, cutoff: DateTime<Utc>, killed: Option<ObjectId>) -> Result<()> {
        let (kept, expired) = self.undo_points(cutoff, killed, &|_| true)?;
        if expired.is_empty() {
            return Ok(()); // nothing expired, or not enough yet to be worth a rewrite
        }
        if kept.is_empty() {
            return self.delete_ref(UNDO_REF);
        }
        let mut parent: Option<ObjectId> = None;
        for id in kept.into_iter().rev() {
            parent = Some(self.rewrite_commit(id, parent)?);
        }
        self.set_ref_rewritten(UNDO_REF, parent.expect("kept is not empty"))
    }
    /// Drop reflog entries older than `cutoff`; return the ids the remaining entries name.
    fn expire_reflogs(&self, cutoff: DateTime<Utc>) -> Result<Vec<ObjectId>> {
        let mut roots = Vec::new();
        let logs = self.git_dir().join("logs");
        for file in files_below(&logs) {
            let Ok(content) = fs::read(&file) else {
                continue;
            };
            let mut kept = Vec::with_capacity(content.len());
            for line in content.split_inclusive(|&b| b == b'\n') {
                let Some((ids, time)) = reflog_entry(line) else {
                    continue; // not a reflog line: dropped
                };
                if time >= cutoff.timestamp() {
                    roots.extend(ids);
                    kept.extend_from_slice(line);
                }
            }
            if kept.is_empty() {
                let _ = fs::remove_file(&file);
            } else if kept.len() != content.len() {
                crate::fs::write_atomically(&file, "index.tmp", &kept)?;
            }
        }
        Ok(roots)
    }
    /// Mark everything reachable from the roots, then delete unreachable loose objects.
    /// Returns the reachable set.
    fn sweep(
        &self,
        cutoff: DateTime<Utc>,
        mut roots: Vec<ObjectId>,
        outcome: &mut PruneOutcome,
    ) -> Result<HashSet<ObjectId>> {
        roots.extend(self.roots(&|_| true)?);
        let loose = self.loose_objects();
        let expiry = SystemTime::UNIX_EPOCH + Duration::from_secs(cutoff.timestamp().max(0) as u64);
        // Objects newer than the expiry, and all they reach, are kept (git's rule).
        roots.extend(loose.iter().filter(|o| o.modified >= expiry).map(|o| o.id));
        let reachable = self.reachable(roots);
        let unreachable: Vec<LooseObject> = loose
            .into_iter()
            .filter(|o| !reachable.contains(&o.id))
            .collect();
        if !unreachable.is_empty() {
            self.remove_git_caches()?;
            self.objects().trees().clear();
        }
        let mut fanouts = HashSet::new();
        for object in unreachable {
            match fs::remove_file(&object.path) {
                Ok(()) => outcome.objects_removed += 1,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io("removing object", &object.path, e)),
            }
            fanouts.extend(object.path.parent().map(Path::to_path_buf));
        }
        remove_empty(fanouts);
        Ok(reachable)
    }
    /// When packs hold unreachable objects, or many loose objects remain (2,000, or a quarter
    /// of the packs' disk space), write every reachable object into one new pack, then delete
    /// the old packs and the loose copies. Costs reading, delta-searching and compressing every
    /// reachable object, so it runs only then; when nothing calls for it, a `stat` per loose
    /// object.
    fn repack(&self, reachable: &HashSet<ObjectId>, outcome: &mut PruneOutcome) -> Result<()> {
        const LOOSE_LIMIT: usize = 2000;
        // Loose objects take a block each (4 KB where git's pack holds a delta of a few dozen
        // bytes): past a quarter of the packs' space they call for a repack, which costs about
        // the store's size, so the work per byte written stays bounded. Not for a handful.
        const LOOSE_SHARE: u64 = 4;
        const LOOSE_MIN: usize = 256;
        let pack_dir = self.git_dir().join("objects/pack");
        let mut packed = Vec::new();
        let mut old_packs = Vec::new();
        for file in files_below(&pack_dir) {
            if file.extension().is_none_or(|e| e != "idx") {
                continue;
            }
            let index = gix::odb::pack::index::File::at(&file, gix::hash::Kind::Sha1)
                .map_err(|e| Error::store(&file, e))?;
            packed.extend(index.iter().map(|entry| entry.oid));
            old_packs.push(file);
        }
        let unreachable_packed = packed.iter().filter(|id| !reachable.contains(*id)).count();
        let loose: Vec<LooseObject> = self.loose_objects();
        let space =
            |path: &Path| fs::symlink_metadata(path).map_or(0, |m| crate::fs::allocated(&m));
        let loose_space: u64 = loose
            .iter()
            .filter(|o| reachable.contains(&o.id))
            .map(|o| space(&o.path))
            .sum();
        let pack_space: u64 = old_packs
            .iter()
            .map(|idx| space(&idx.with_extension("pack")))
            .sum();
        let loose_heavy = loose.len() >= LOOSE_MIN && loose_space * LOOSE_SHARE > pack_space;
        if unreachable_packed == 0 && loose.len() < LOOSE_LIMIT && !loose_heavy {
            return Ok(());
        }
        let keep: Vec<ObjectId> = packed
            .into_iter()
            .chain(loose.iter().map(|o| o.id))
            .filter(|id| reachable.contains(id))
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        self.objects().start_pack()?;
        let open = || self.repo();
        let written =
            crate::store::pack::write_objects(self.objects(), self.git_dir(), &keep, &open);
        let new_pack = self.objects().finish_pack(written.is_ok())?;
        written?;
        // The new pack is complete and in place: git's indexes over the old ones go first,
        // then the old ones (one with the same name had exactly the same content and was just
        // replaced).
        self.remove_git_caches()?;
        for idx in old_packs
            .iter()
            .filter(|idx| Some(*idx) != new_pack.as_ref())
        {
            // The index first, as git does: a pack without one is invisible.
            for ext in ["idx", "pack", "rev", "bitmap", "mtimes", "promisor", "keep"] {
                let _ = fs::remove_file(idx.with_extension(ext));
            }
        }
        outcome.objects_removed += unreachable_packed;
        let mut fanouts = HashSet::new();
        for object in loose.iter().filter(|o| reachable.contains(&o.id)) {
            let _ = fs::remove_file(&object.path); // now in the new pack
            fanouts.extend(object.path.parent().map(Path::to_path_buf));
        }
        remove_empty(fanouts);
        // This process reads on (serve, a Pruner's runtime): not through the deleted packs.
        self.objects().refresh();
        self.reopen_repo()
    }
    /// Remove what killed processes left behind ([`leftovers`]: temp files, packs without
    /// an index) once older than an hour (younger ones may belong to a `git` run in the store).
    fn remove_temp_files(&self, now: DateTime<Utc>) {
        let limit = SystemTime::UNIX_EPOCH
            + Duration::from_secs((now.timestamp() - TEMP_GRACE.as_secs() as i64).max(0) as u64);
        for path in leftovers(self.git_dir()) {
            let old = fs::symlink_metadata(&path)
                .and_then(|m| m.modified())
                .is_ok_and(|modified| modified < limit);
            if old {
                let _ = fs::remove_file(&path);
            }
        }
    }
}

/// What [`Store::session_activity`] knows of a session.
struct Activity {
    turns: usize,
    /// The latest start or end of its turns.
    last: DateTime<Utc>,
    /// Some turn was begun and not ended, and is not abandoned.
    open: bool,
    /// The turns open since before the abandon limit, each with its start.
    abandoned: Vec<(String, DateTime<Utc>)>,
    /// Some turn was undone.
    rolled_back: bool,
}

/// The ref of the undo points' chain.
const UNDO_REF: &str = "refs/rewind/undo";

impl Activity {
    /// Why retention removes the session.
    fn why(&self) -> Why {
        match self.abandoned.is_empty() {
            true => Why::Expired,
            false => Why::Abandoned,
        }
    }
}

/// Count `session`, which retention removes for `activity`, in `outcome`; returns its ref
/// prefix.
fn note_expired(outcome: &mut PruneOutcome, session: String, activity: Activity) -> Result<String> {
    outcome.turns_removed += activity.turns;
    let abandoned = activity.abandoned.into_iter();
    outcome
        .abandoned_turns
        .extend(abandoned.map(|(turn, started_at)| AbandonedTurn {
            session: session.clone(),
            turn,
            started_at,
        }));
    let prefix = session_ref(&session, "")?;
    outcome.sessions_removed.push(session);
    Ok(prefix)
}

/// Count `record`, which the size quota removes, in `outcome`.
fn note_quota(outcome: &mut PruneOutcome, record: Record) {
    match record {
        Record::Snapshot(_) => {
            outcome.snapshots_removed += 1;
            outcome.snapshots_removed_for_size += 1;
        }
        Record::Session(session, turns, _) => {
            outcome.turns_removed += turns;
            outcome.sessions_removed.push(session.clone());
            outcome.sessions_removed_for_size.push(session);
        }
    }
}

/// What a prune removes, as [`Store::estimate`] reads it.
#[derive(Default)]
struct Gone {
    /// Refs deleted.
    refs: HashSet<String>,
    /// Ref prefixes deleted whole (sessions).
    prefixes: Vec<String>,
    /// Ref prefixes whose refs are rewritten, and so lose their reflogs.
    rewritten: Vec<String>,
    /// Commits cut out of their chains: trimmed turns, expired undo points.
    hollow: HashSet<ObjectId>,
}

impl Gone {
    /// The records `candidates`, gone.
    fn of(candidates: &[Record]) -> Result<Gone> {
        let mut gone = Gone::default();
        for candidate in candidates {
            gone.add(candidate)?;
        }
        Ok(gone)
    }
    fn add(&mut self, record: &Record) -> Result<()> {
        match record {
            Record::Snapshot(name) => {
                self.refs.insert(name.clone());
            }
            Record::Session(session, ..) => self.prefixes.push(session_ref(session, "")?),
        }
        Ok(())
    }
    fn extend(&mut self, other: &Gone) {
        self.refs.extend(other.refs.iter().cloned());
        self.prefixes.extend(other.prefixes.iter().cloned());
        self.rewritten.extend(other.rewritten.iter().cloned());
        self.hollow.extend(other.hollow.iter().copied());
    }
    /// Whether ref `name` stays.
    fn keeps(&self, name: &str) -> bool {
        !self.refs.contains(name) && !self.prefixes.iter().any(|p| name.starts_with(p))
    }
    /// Whether ref `name` is rewritten, losing its reflog.
    fn loses_reflog(&self, name: &str) -> bool {
        self.rewritten.iter().any(|p| name.starts_with(p))
    }
    /// Whether `record` is gone already.
    fn holds(&self, record: &Record) -> bool {
        match record {
            Record::Snapshot(name) => !self.keeps(name),
            Record::Session(session, ..) => {
                session_ref(session, "").is_ok_and(|p| self.prefixes.contains(&p))
            }
        }
    }
}

/// What stays and what goes, by [`Store::estimate`].
#[derive(Default)]
struct Estimate {
    kept_bytes: u64,
    freed_bytes: u64,
    freed_objects: usize,
}

/// A record the size quota can drop.
enum Record {
    /// A snapshot record's ref name.
    Snapshot(String),
    /// A session, with its number of turns and its last activity.
    Session(String, usize, DateTime<Utc>),
}

/// The old and new ids and the time of one reflog line
/// (`<old> <new> <name> <<email>> <seconds> <zone>\t<message>`), as gix parses it.
fn reflog_entry(line: &[u8]) -> Option<([ObjectId; 2], i64)> {
    let line = gix::refs::file::log::LineRef::from_bytes(line).ok()?;
    let time = line.signature.time().ok()?;
    Some(([line.previous_oid(), line.new_oid()], time.seconds))
}

/// Remove those of `dirs` that are empty (a loose object's fan-out directory once its objects
/// went: 4 KB of disk each, counted against the quota). Costs an `rmdir` each.
fn remove_empty(dirs: HashSet<PathBuf>) {
    for dir in dirs {
        let _ = fs::remove_dir(dir);
    }
}

/// `rm -r dir`; a missing directory is fine.
fn remove_dir(dir: &Path) -> Result<()> {
    match fs::remove_dir_all(dir) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(Error::io("removing", dir, e)),
        _ => Ok(()),
    }
}

/// Remove `dir` and the directories below it, as far as they are empty (a file keeps its
/// directory and those above it). Costs a `readdir` per directory (a few per session).
fn remove_empty_dirs(dir: &Path) {
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove_empty_dirs(&entry.path());
            }
        }
    }
    let _ = fs::remove_dir(dir);
}

/// A background pruner for an embedding runtime: prunes `store` shortly after it starts, then
/// every `interval`; stops (and joins its thread) when dropped.
///
/// ```no_run
/// use std::sync::Arc;
/// let store = Arc::new(rewind::Store::open(".".as_ref(), &rewind::OpenOptions::new(rewind::data_dir(None)?))?);
/// let pruner = rewind::Pruner::start(store.clone(), std::time::Duration::from_secs(3600));
/// // ... the runtime works; `pruner.last()` tells how the last run went ...
/// drop(pruner); // stops it
/// # Ok::<(), rewind::Error>(())
/// ```
pub struct Pruner {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    last: std::sync::Arc<std::sync::Mutex<Option<Result<PruneOutcome>>>>,
}

/// How long after [`Pruner::start`] the first run happens.
const FIRST_RUN_AFTER: Duration = Duration::from_secs(30);

impl Pruner {
    /// Start pruning `store` every `interval` (the first run after 30 seconds, or `interval`
    /// if that is shorter), with the store's own settings.
    pub fn start(store: std::sync::Arc<Store>, interval: Duration) -> Pruner {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let last = std::sync::Arc::new(std::sync::Mutex::new(None));
        let report = last.clone();
        let thread = std::thread::Builder::new().name("rewind-prune".into());
        let thread = thread.spawn(move || {
            let mut wait = FIRST_RUN_AFTER.min(interval);
            // Runs until the sender is dropped (or sends).
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(wait) {
                let outcome = store.prune(&PruneOptions::default());
                *report.lock().unwrap_or_else(|p| p.into_inner()) = Some(outcome);
                wait = interval;
            }
        });
        // A thread that cannot start is the outcome `last` gives, not a panic.
        let thread = thread
            .inspect_err(|e| {
                let failed = Err(Error::Threads(io::Error::new(e.kind(), e.to_string())));
                *last.lock().unwrap_or_else(|p| p.into_inner()) = Some(failed);
            })
            .ok();
        Pruner {
            stop: Some(stop),
            thread,
            last,
        }
    }

    /// The outcome of the last run, if any ran yet (errors are kept here, never printed).
    pub fn last(&self) -> Option<std::result::Result<PruneOutcome, String>> {
        let last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        last.as_ref().map(|run| match run {
            Ok(outcome) => Ok(outcome.clone()),
            Err(e) => Err(e.to_string()),
        })
    }
}

impl Drop for Pruner {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
