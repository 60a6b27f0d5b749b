//! Looking at a store: `doctor` (its health) and `log` (its records, newest first).

use std::collections::HashSet;
use std::path::PathBuf;

use chrono::{DateTime, Utc};
use gix::bstr::{BStr, ByteSlice};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::prune::LAST_PRUNE;
use crate::store::{dir_size, files_below};
use crate::store::{SnapshotId, Store, SNAPSHOT_RECORDS};

/// What [`Store::doctor`] found.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct Doctor {
    /// The store's git directory.
    #[serde(serialize_with = "crate::paths::serialize_os_path")]
    pub git_dir: PathBuf,
    /// The project the store belongs to.
    #[serde(serialize_with = "crate::paths::serialize_os_path")]
    pub project: PathBuf,
    /// Whether the project directory still exists.
    pub project_exists: bool,
    /// Disk space used by the store, in bytes.
    pub size: u64,
    /// Whether another process holds the store's lock right now.
    pub locked: bool,
    /// Objects stored one per file.
    pub loose_objects: usize,
    /// Pack files.
    pub packs: usize,
    /// Snapshot records (`refs/rewind/snapshots/*`).
    pub snapshots: usize,
    /// Sessions with at least one turn.
    pub sessions: usize,
    /// Turns, over all sessions.
    pub turns: usize,
    /// Undo points on `refs/rewind/undo`.
    pub undo_points: usize,
    /// When the store was last pruned (`None`: never).
    pub last_prune: Option<DateTime<Utc>>,
    /// Objects that a record needs but the store lacks (or cannot read).
    pub missing: Vec<String>,
    /// Earlier copies of this store that were found damaged and set aside (never removed
    /// automatically; delete them once their records are no longer wanted).
    #[serde(serialize_with = "crate::paths::serialize_os_paths")]
    pub set_aside: Vec<PathBuf>,
    /// Files a killed process left in the store: temp files, packs without an index (`prune`
    /// removes them once an hour old; they do not count against the size quota).
    #[serde(serialize_with = "crate::paths::serialize_os_paths")]
    pub leftovers: Vec<PathBuf>,
    /// A restore (or revert, undo or redo) stopped before it finished, whose temp files the
    /// next snapshot sweeps: its undo point, which puts the files back as they were before it.
    pub stopped_restore: Option<SnapshotId>,
    /// The file-system watcher: whether one runs on this store in this process, and why not.
    pub watcher: crate::snapshot::WatchStatus,
}

impl Doctor {
    /// Whether every object the records need is there.
    pub fn is_healthy(&self) -> bool {
        self.missing.is_empty()
    }

    /// [`Error::Unhealthy`] unless [`Self::is_healthy`].
    pub fn ensure_healthy(&self) -> Result<()> {
        match self.missing.len() {
            0 => Ok(()),
            n => Err(Error::Unhealthy(n)),
        }
    }
}

/// A turn or a snapshot as [`Store::show`] shows it: a one-line title and the diff.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Shown {
    /// "turn T of session S — started ...: N files, +a -d", or "snapshot ID taken ..., against ...".
    pub title: String,
    /// The diff, as `git diff` writes it.
    pub diff: Vec<u8>,
    /// The turn shown (`None` for a snapshot): its metadata, files and times.
    pub turn: Option<crate::turns::Turn>,
}

/// One record of the store, as [`Store::log`] lists it.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct LogEntry {
    /// When the snapshot was last taken, the turn ended (or began, while open), or the undo
    /// point was made.
    pub time: DateTime<Utc>,
    /// What kind of record it is.
    pub kind: LogKind,
    /// The tree: the snapshot, the turn's after (its before while open), or the undo tree.
    pub tree: SnapshotId,
    /// A line saying what the record is (for a turn: session, turn, counts and state).
    pub what: String,
}

/// The kinds of record [`Store::log`] lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LogKind {
    /// A snapshot `track` returned (`refs/rewind/snapshots/<tree>`).
    Snapshot,
    /// An agent's turn.
    Turn,
    /// An undo point: the project just before a restore, revert, undo or redo.
    Undo,
}

impl LogKind {
    /// The kind as `--json` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            LogKind::Snapshot => "snapshot",
            LogKind::Turn => "turn",
            LogKind::Undo => "undo",
        }
    }
}

impl std::fmt::Display for LogKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

impl Store {
    /// Check the store: sizes and counts, lock state, last prune, and that every object the
    /// records reach is present (a walk like `git fsck --connectivity-only`), asked of the
    /// object database that restore and diff read through. Costs reading every tree and commit
    /// the records reach, and an object header per blob.
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), &rewind::OpenOptions::new("/tmp/rewind"))?;
    /// let report = store.doctor()?;
    /// println!("{} bytes, healthy: {}", report.size, report.is_healthy());
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn doctor(&self) -> Result<Doctor> {
        let refs = self.refs_under("refs/")?;
        let mut roots: Vec<_> = refs.iter().map(|(_, id)| *id).collect();
        roots.extend(self.index_roots());
        roots.extend(self.undo_points_of_sessions(&|_| true)?);
        let repo = self.repo();
        let mut missing: Vec<String> = self
            .reachable(roots)
            .into_iter()
            .filter(|id| !id.is_empty_tree() && repo.find_header(*id).is_err())
            .map(|id| id.to_string())
            .collect();
        missing.sort();
        let turns = self.turns_with(None, &crate::turns::SummaryOptions { renames: false })?;
        let mut sessions: Vec<&str> = turns.iter().map(|t| t.session.as_str()).collect();
        sessions.sort_unstable();
        sessions.dedup();
        let last_prune = std::fs::read_to_string(self.git_dir().join(LAST_PRUNE))
            .ok()
            .and_then(|t| DateTime::parse_from_rfc3339(t.trim()).ok())
            .map(|t| t.with_timezone(&Utc));
        let undo_points = self.undo_chain()?.len();
        // This store's copies: `<its name>.damaged-<pid>`, beside it.
        let mut copies = self.git_dir().as_os_str().to_owned();
        copies.push(".damaged-");
        let data_dir = self.git_dir().parent().unwrap_or(self.git_dir());
        let set_aside = Store::set_aside_stores(data_dir)?
            .into_iter()
            .filter(|path| {
                path.as_os_str()
                    .as_encoded_bytes()
                    .starts_with(copies.as_encoded_bytes())
            })
            .collect();
        Ok(Doctor {
            git_dir: self.git_dir().to_owned(),
            project: self.project().to_owned(),
            leftovers: crate::store::leftovers(self.git_dir()),
            stopped_restore: self.killed_runs_undo_point().map(SnapshotId),
            project_exists: self.project().is_dir(),
            size: dir_size(self.git_dir()),
            locked: self.is_locked()?,
            loose_objects: self.loose_objects().len(),
            packs: files_below(&self.git_dir().join("objects/pack"))
                .iter()
                .filter(|f| f.extension().is_some_and(|e| e == "pack"))
                .count(),
            snapshots: refs
                .iter()
                .filter(|(n, _)| n.starts_with(SNAPSHOT_RECORDS))
                .count(),
            sessions: sessions.len(),
            turns: turns.len(),
            undo_points,
            last_prune,
            missing,
            set_aside,
            watcher: self.watch_status(),
        })
    }

    /// Every record of the store, newest first: snapshots, turns and undo points.
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), &rewind::OpenOptions::new("/tmp/rewind"))?;
    /// for entry in store.log()? {
    ///     println!("{} {} {} {}", entry.time, entry.kind, entry.tree, entry.what);
    /// }
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn log(&self) -> Result<Vec<LogEntry>> {
        // Reads take no lock: a prune may remove a record listed a moment ago, and its commit
        // with it. The log is then read again.
        crate::store::refs::read_again(|| Ok((self.read_log()?, true)))
    }

    /// [`Self::log`], read once. Costs a read of every record's commit and a listing of turns.
    fn read_log(&self) -> Result<Vec<LogEntry>> {
        let mut entries = Vec::new();
        for (name, commit) in self.refs_under(SNAPSHOT_RECORDS)? {
            let Ok(tree) = name.trim_start_matches(SNAPSHOT_RECORDS).parse() else {
                continue; // not a record of ours
            };
            entries.push(LogEntry {
                time: self.commit_time(commit)?,
                kind: LogKind::Snapshot,
                tree,
                what: "track".into(),
            });
        }
        for turn in self.turns_with(None, &crate::turns::SummaryOptions { renames: false })? {
            let state = turn.state();
            entries.push(LogEntry {
                time: turn.ended_at.unwrap_or(turn.started_at),
                kind: LogKind::Turn,
                tree: turn.after.unwrap_or(turn.before),
                what: format!(
                    "session {} turn {}: {} files +{} -{} ({state})",
                    turn.session, turn.turn, turn.files, turn.additions, turn.deletions
                ),
            });
        }
        let stopped = self.killed_runs_undo_point();
        for (time, tree) in self.undo_chain()? {
            entries.push(LogEntry {
                time,
                kind: LogKind::Undo,
                tree: SnapshotId::from(tree),
                what: match Some(tree) == stopped {
                    false => "the project before a restore, revert or undo".into(),
                    true => "the project before a restore, revert or undo that was stopped \
                             before it finished"
                        .into(),
                },
            });
        }
        entries.sort_by_key(|entry| std::cmp::Reverse(entry.time));
        Ok(entries)
    }

    /// A turn (of `session`, or of the one session that has a turn of that name) with the diff
    /// from its before to its after (or to the project now while it is open); else a snapshot
    /// with the diff from the snapshot taken before it (or from the empty tree). Costs the
    /// listing of turns or of the log, and one diff.
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), &rewind::OpenOptions::new("/tmp/rewind"))?;
    /// let shown = store.show("3", Some("chat-42"))?;
    /// println!("{}", shown.title);
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn show(&self, what: &str, session: Option<&str>) -> Result<Shown> {
        self.show_with(what, session, &crate::turns::SummaryOptions::default())
    }

    /// [`Self::show`], the turn's files and diff with renames or without, as `options` says.
    pub fn show_with(
        &self,
        what: &str,
        session: Option<&str>,
        options: &crate::turns::SummaryOptions,
    ) -> Result<Shown> {
        let turns = self.turns_with(session, options)?;
        let matching: Vec<&crate::turns::Turn> = turns.iter().filter(|t| t.turn == what).collect();
        if let [turn] = matching[..] {
            let title = format!(
                "turn {} of session {} — started {}{}: {} files, +{} -{}",
                crate::paths::quote_path(turn.turn.as_bytes()),
                crate::paths::quote_path(turn.session.as_bytes()),
                turn.started_at.to_rfc3339(),
                match (turn.ended_at, turn.rolled_back, turn.after) {
                    (Some(ended), _, _) => format!(", ended {}", ended.to_rfc3339()),
                    (None, true, _) => " (rolled back while open)".to_string(),
                    (None, false, Some(_)) => {
                        " (left open: it ended when its session went on)".to_string()
                    }
                    (None, false, None) => " (open)".to_string(),
                },
                turn.files,
                turn.additions,
                turn.deletions
            );
            // An ended turn (or one left open, which ended where the next began, or one rolled
            // back while open, which ended at that undo) shows its own files only (another
            // session's, changed meanwhile, are not the turn's); an open one all that changed
            // since it began.
            let files: HashSet<&BStr> = (turn.changed.iter())
                .flat_map(|f| std::iter::once(&f.file).chain(&f.old_file))
                .map(|p| p.as_bstr())
                .collect();
            let own = |path: &BStr| files.contains(path);
            let only = (turn.after.is_some() || turn.rolled_back)
                .then_some(&own as &dyn Fn(&BStr) -> bool);
            let diff = self.diff_of(turn.before, turn.after, only, options.renames)?;
            return Ok(Shown {
                title,
                diff,
                turn: Some(turn.clone()),
            });
        }
        if matching.len() > 1 {
            return Err(Error::Turn {
                session: String::new(),
                turn: what.into(),
                reason: "exists in several sessions: give --session",
            });
        }
        if let Some(session) = session {
            return Err(self.missing_turn(session, what));
        }
        let tree = self.resolve(what)?;
        let snapshots: Vec<LogEntry> = self
            .log()?
            .into_iter()
            .filter(|e| e.kind == LogKind::Snapshot)
            .collect();
        let taken = snapshots.iter().find(|e| e.tree == tree).map(|e| e.time);
        let previous = taken.and_then(|t| snapshots.iter().find(|e| e.time < t));
        let from = previous.map_or(SnapshotId::EMPTY, |e| e.tree);
        let title = format!(
            "snapshot {tree}{}, against {}",
            taken.map_or(String::new(), |t| format!(" taken {}", t.to_rfc3339())),
            previous.map_or("the empty tree".to_string(), |e| format!(
                "the snapshot before it ({:.12})",
                e.tree.to_string()
            ))
        );
        let diff_options = crate::diff::DiffOptions {
            renames: options.renames,
            ..Default::default()
        };
        let diff = self.diff_with(from, Some(tree), &diff_options)?;
        Ok(Shown {
            title,
            diff,
            turn: None,
        })
    }

    /// The undo points, newest first: (time, tree).
    fn undo_chain(&self) -> Result<Vec<(DateTime<Utc>, gix::ObjectId)>> {
        let repo = self.repo();
        let mut chain = Vec::new();
        let mut next = self.ref_target("refs/rewind/undo")?;
        while let Some(id) = next {
            let commit = repo
                .find_commit(id)
                .map_err(|e| crate::error::Error::store(self.git_dir(), e))?;
            let tree = commit
                .tree_id()
                .map_err(|e| crate::error::Error::store(self.git_dir(), e))?
                .detach();
            chain.push((self.commit_time(id)?, tree));
            next = commit.parent_ids().next().map(|p| p.detach());
        }
        Ok(chain)
    }
}
