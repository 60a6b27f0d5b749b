//! Sessions and turns: what an agent did in each turn, recorded as commits in the store.
//!
//! A turn is two commits, both on the session's chain:
//! ```text
//! refs/rewind/sessions/<S>/head          -> the session's last commit
//! refs/rewind/sessions/<S>/turns/<T>     -> the turn's end commit (its begin commit while open)
//! refs/rewind/sessions/<S>/rolled-back/<T> -> present once the turn was undone
//!
//!   ... <- end(T-1) <- begin(T) <- end(T)          tree of begin = before, of end = after
//! ```
//! Session and turn ids are percent-encoded into ref names (see [`encode_id`]) and stored in the
//! commit messages' trailers, so `git log --all` in the store shows every turn, and a new process
//! finds everything there: nothing lives only in memory.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::Path;

use chrono::{DateTime, Utc};
use gix::bstr::{BStr, BString, ByteSlice};
use gix::ObjectId;
use serde::Serialize;
use std::os::unix::ffi::OsStrExt;

use crate::diff::{file_change, tree_changes, Change, DiffOptions, Side, Status};
use crate::error::{Error, Result};
use crate::restore::{is_within, step_of, Plan, RestoreOutcome};
use crate::scan::TrackOptions;
use crate::store::Store;

/// One file a turn (or a session) changed.
#[derive(Debug, Clone, Serialize)]
pub struct TurnFile {
    #[serde(serialize_with = "crate::scan::serialize_path")]
    pub file: BString,
    pub status: Status,
    pub additions: usize,
    pub deletions: usize,
}

/// A turn as [`Store::turns`] lists it.
#[derive(Debug, Clone, Serialize)]
pub struct Turn {
    pub session: String,
    pub turn: String,
    pub started_at: DateTime<Utc>,
    /// `None` while the turn is open (or its runtime crashed before ending it).
    pub ended_at: Option<DateTime<Utc>>,
    /// The snapshot taken when the turn began.
    pub before: String,
    /// The snapshot taken when it ended (`None` while open).
    pub after: Option<String>,
    pub files: usize,
    pub additions: usize,
    pub deletions: usize,
    pub rolled_back: bool,
}

/// Per-file totals of a session, from [`Store::changes`].
#[derive(Debug, Clone, Serialize)]
pub struct SessionChanges {
    pub session: String,
    pub files: Vec<TurnFile>,
    pub total_files: usize,
    pub total_additions: usize,
    pub total_deletions: usize,
}

/// What [`Store::begin_turn`] did.
#[derive(Debug, Clone, Serialize)]
pub struct TurnStart {
    /// The snapshot taken as the turn's "before".
    pub before: String,
    /// What that snapshot left out: an undo of the turn cannot bring these back.
    pub skipped: Vec<crate::Skipped>,
}

/// What [`Store::end_turn`] did.
#[derive(Debug, Clone, Serialize)]
pub struct TurnEnd {
    /// The turn's "before" snapshot.
    pub before: String,
    /// The turn's "after" snapshot.
    pub after: String,
    /// What changed in the turn.
    pub files: Vec<TurnFile>,
    /// What the "after" snapshot left out.
    pub skipped: Vec<crate::Skipped>,
}

/// What [`Store::undo`] did.
#[derive(Debug, Clone, Serialize)]
pub struct UndoOutcome {
    /// Files brought back to their state before the turn (written).
    #[serde(serialize_with = "crate::scan::serialize_paths")]
    pub restored: Vec<BString>,
    /// Files deleted (the turns had created them).
    #[serde(serialize_with = "crate::scan::serialize_paths")]
    pub deleted: Vec<BString>,
    /// Files left alone: changed by someone else since or between the undone turns (use
    /// `force`), or something outside the snapshots is in the way.
    #[serde(serialize_with = "crate::scan::serialize_paths")]
    pub conflicts: Vec<BString>,
    /// Files the turns created as far as the snapshots show, but which the "before" snapshot
    /// could not see (ignored then, inside a nested repository, too large): not deleted.
    #[serde(serialize_with = "crate::scan::serialize_paths")]
    pub kept: Vec<BString>,
    /// Files that could not be changed, with the reason.
    pub failed: Vec<crate::Failure>,
    /// `restore(undo)` redoes.
    pub undo: String,
}

/// A turn's commit, parsed.
struct Record {
    session: String,
    turn: String,
    started_at: DateTime<Utc>,
    ended_at: Option<DateTime<Utc>>,
    before: ObjectId,
    /// The turn's ref target: its end commit, or its begin commit while open.
    commit: ObjectId,
    /// The turn's begin commit.
    begin: ObjectId,
    after: Option<ObjectId>,
    files: usize,
    additions: usize,
    deletions: usize,
}

const SESSIONS: &str = "refs/rewind/sessions";
/// The key of the lines naming other sessions' heads in a turn's begin and end commits.
const OTHER_HEAD: &str = "Rewind-Other-Head: ";

/// The `Rewind-Other-Head:` lines of a commit message: each other session's head ref and the
/// commit it pointed to.
fn parse_other_heads(message: &[u8]) -> HashMap<String, ObjectId> {
    message
        .lines()
        .filter_map(|line| line.strip_prefix(OTHER_HEAD.as_bytes()))
        .filter_map(|rest| {
            let (name, id) = rest.to_str().ok()?.split_once(' ')?;
            Some((name.to_owned(), ObjectId::from_hex(id.as_bytes()).ok()?))
        })
        .collect()
}

/// The trailer that marks an undo's commit on a session's chain.
const UNDO_TRAILER: &str = "Rewind-Undo: yes";

/// What a commit on a session's chain records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChainKind {
    /// A turn's begin: its tree is the "before".
    Begin,
    /// A turn's end: its tree is the "after".
    End,
    /// An undo: its tree is the project as the undo left it.
    Undo,
}

impl ChainKind {
    fn of(message: &[u8]) -> ChainKind {
        if message.lines().any(|l| l == UNDO_TRAILER.as_bytes()) {
            ChainKind::Undo
        } else if message.lines().any(|l| l.starts_with(b"Rewind-Ended: ")) {
            ChainKind::End
        } else {
            ChainKind::Begin
        }
    }
}
/// Ids longer than this (in bytes) are refused: encoded, they must fit in a file name.
const MAX_ID_LEN: usize = 200;

/// Encode a session or turn id as one ref-name component: `[A-Za-z0-9_-]` stay, every other
/// byte becomes `%XX`. The result is a valid ref component for any input, and decodes exactly.
pub(crate) fn encode_id(what: &'static str, id: &str) -> Result<String> {
    if id.is_empty() {
        return Err(Error::BadName {
            what,
            reason: "is empty".into(),
        });
    }
    if id.len() > MAX_ID_LEN {
        return Err(Error::BadName {
            what,
            reason: format!(
                "is {} bytes long; at most {MAX_ID_LEN} are allowed",
                id.len()
            ),
        });
    }
    let mut out = String::with_capacity(id.len());
    for b in id.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    Ok(out)
}

/// The inverse of [`encode_id`]; `None` for a name `encode_id` cannot have made.
pub(crate) fn decode_id(encoded: &str) -> Option<String> {
    let bytes = encoded.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = encoded.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// An id as a ref-name component: [`encode_id`], or for a long id (whose encoding would not fit
/// in a file name) `%H` and the SHA-1 of the id, which no encoding produces. The exact id is
/// always in the commit's trailers.
fn ref_component(what: &'static str, id: &str) -> Result<String> {
    let encoded = encode_id(what, id)?;
    if encoded.len() <= 120 {
        return Ok(encoded);
    }
    let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
    hasher.update(id.as_bytes());
    let digest = hasher.try_finalize().expect("sha1 of an id");
    Ok(format!("%H{digest}"))
}

pub(crate) fn session_ref(session: &str, rest: &str) -> Result<String> {
    Ok(format!(
        "{SESSIONS}/{}/{rest}",
        ref_component("session", session)?
    ))
}

fn turn_ref(session: &str, kind: &str, turn: &str) -> Result<String> {
    session_ref(session, &format!("{kind}/{}", ref_component("turn", turn)?))
}

impl Store {
    /// Begin a turn: snapshot the project as the turn's "before". Beginning an open turn again
    /// is a no-op; beginning an ended turn is an error. Returns the "before" and what that
    /// snapshot left out (an undo cannot bring those files back).
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), "/tmp/rewind".as_ref())?;
    /// let start = store.begin_turn("chat-42", "1")?;
    /// for skipped in &start.skipped {
    ///     eprintln!("not covered by undo: {} ({:?})", skipped.path, skipped.reason);
    /// }
    /// // ... the agent works: edits, shell commands, formatters ...
    /// for file in store.end_turn("chat-42", "1")?.files {
    ///     println!("{} +{} -{}", file.file, file.additions, file.deletions);
    /// }
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn begin_turn(&self, session: &str, turn: &str) -> Result<TurnStart> {
        let reference = turn_ref(session, "turns", turn)?;
        let _lock = self.lock()?;
        self.begin_locked(session, turn, &reference)
    }

    /// Record that the agent is about to edit `path` in this turn: its current content is the
    /// "before" for the turn. Begins the turn if needed (a snapshot of the whole project, so
    /// every later first edit of another file is covered as well); afterwards a no-op.
    /// Safe from several threads and processes at once.
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), "/tmp/rewind".as_ref())?;
    /// store.track_file("chat-42", "3", "src/lib.rs")?; // before the agent's first edit of it
    /// // ... edit src/lib.rs ...
    /// store.end_turn("chat-42", "3")?;
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn track_file(&self, session: &str, turn: &str, path: impl AsRef<Path>) -> Result<()> {
        self.project_path(path.as_ref())?;
        self.begin_turn(session, turn).map(drop)
    }

    fn begin_locked(&self, session: &str, turn: &str, reference: &str) -> Result<TurnStart> {
        if let Some(commit) = self.ref_target(reference)? {
            let record = self.record(commit)?;
            return match record.ended_at {
                None => Ok(TurnStart {
                    before: record.before.to_string(),
                    skipped: Vec::new(),
                }),
                Some(_) => Err(Error::Turn {
                    session: session.into(),
                    turn: turn.into(),
                    reason: "has ended already",
                }),
            };
        }
        let snapshot = self.track_locked(&TrackOptions::default())?;
        let head = session_ref(session, "head")?;
        let parent = self.ref_target(&head)?;
        // What the "before" left out is recorded with it (undo never deletes those paths), and
        // which files were private (undo gives them back as private).
        let message = format!(
            "rewind: begin turn {turn:?} of session {session:?}\n\n{}{}{}",
            crate::visibility::record_lines(&snapshot),
            self.other_heads_lines(session)?,
            trailers(session, turn, crate::now()?, None, None)?
        );
        let commit = self.commit(&head, &message, snapshot.hash, parent)?;
        self.set_ref(reference, commit, "rewind: begin turn")?;
        Ok(TurnStart {
            before: snapshot.hash.to_string(),
            skipped: snapshot.skipped,
        })
    }

    /// End a turn: snapshot the "after", record the turn as a commit, and return what changed in
    /// it (everything, including edits by shell commands, formatters and generators).
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), "/tmp/rewind".as_ref())?;
    /// store.begin_turn("chat-42", "3")?;
    /// // ... the agent works ...
    /// let end = store.end_turn("chat-42", "3")?;
    /// println!("{} -> {}: {} files changed", end.before, end.after, end.files.len());
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn end_turn(&self, session: &str, turn: &str) -> Result<TurnEnd> {
        let reference = turn_ref(session, "turns", turn)?;
        let _lock = self.lock()?;
        let begin = self.ref_target(&reference)?.ok_or_else(|| Error::Turn {
            session: session.into(),
            turn: turn.into(),
            reason: "was never begun",
        })?;
        let record = self.record(begin)?;
        if record.ended_at.is_some() {
            return Err(Error::Turn {
                session: session.into(),
                turn: turn.into(),
                reason: "has ended already",
            });
        }
        // An undo rolled the open turn back: what changed since is the undo's, not the agent's.
        if self
            .ref_target(&turn_ref(session, "rolled-back", turn)?)?
            .is_some()
        {
            return Err(Error::Turn {
                session: session.into(),
                turn: turn.into(),
                reason: "was undone while open; begin a new turn",
            });
        }
        let snapshot = self.track_locked(&TrackOptions::default())?;
        let after = snapshot.hash;
        let files = self.files_between(record.before, after)?;
        let (additions, deletions) = totals(&files);
        let mut message = format!(
            "rewind: turn {turn:?} of session {session:?}: {} files, +{additions} -{deletions}\n\n",
            files.len()
        );
        for file in &files {
            message.push_str(&format!(
                "{:?} +{} -{} {:?}\n",
                file.status, file.additions, file.deletions, file.file
            ));
        }
        message.push('\n');
        message.push_str(&self.other_heads_lines(session)?);
        message.push_str(&trailers(
            session,
            turn,
            record.started_at,
            Some((crate::now()?, record.before)),
            Some((files.len(), additions, deletions)),
        )?);
        let commit = self.commit(&reference, &message, after, [begin])?;
        let head = session_ref(session, "head")?;
        if self.ref_target(&head)? == Some(begin) {
            self.set_ref(&head, commit, "rewind: end turn")?;
        }
        Ok(TurnEnd {
            before: record.before.to_string(),
            after: after.to_string(),
            files,
            skipped: snapshot.skipped,
        })
    }

    /// Every turn of `session` (or of every session): each session's in the order of its chain,
    /// sessions interleaved by start time.
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), "/tmp/rewind".as_ref())?;
    /// for turn in store.turns(Some("chat-42"))? {
    ///     println!("{} {} +{} -{} rolled back: {}", turn.turn, turn.files, turn.additions, turn.deletions, turn.rolled_back);
    /// }
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn turns(&self, session: Option<&str>) -> Result<Vec<Turn>> {
        let mut turns = Vec::new();
        let sessions = match session {
            // An unknown session is `not_found`, as in every other operation.
            Some(name) => vec![(name.to_owned(), self.session_records(name)?)],
            None => self.sessions(None)?,
        };
        for (session, records) in sessions {
            for record in records {
                let rolled_back = self
                    .ref_target(&turn_ref(&session, "rolled-back", &record.turn)?)?
                    .is_some();
                turns.push(Turn {
                    session: record.session,
                    turn: record.turn,
                    started_at: record.started_at,
                    ended_at: record.ended_at,
                    before: record.before.to_string(),
                    after: record.after.map(|a| a.to_string()),
                    files: record.files,
                    additions: record.additions,
                    deletions: record.deletions,
                    rolled_back,
                });
            }
        }
        Ok(interleave(turns))
    }

    /// Undo what `session` did from `from_turn` (default: its first turn) on: the paths those
    /// turns changed go back to their state before `from_turn`. With `file`, only that path (a
    /// directory: every path below it that the turns changed; a path they did not change is a
    /// `not_found` error).
    ///
    /// A path someone else changed is a conflict, left alone unless `force` (its bytes are in
    /// the `undo` snapshot either way): one whose content now differs from what the session's
    /// turns (and undos) left there, or that changed between two turns of the range. A path
    /// the turns created but the "before" snapshot could not see (ignored then, inside a
    /// nested repository, left out for size or type) is `kept`, never deleted. Marks the
    /// undone turns rolled back, and records the undo on the session's chain.
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), "/tmp/rewind".as_ref())?;
    /// // Undo turn 3 and everything after it; files edited since by the user are left alone.
    /// let outcome = store.undo("chat-42", Some("3"), None, false)?;
    /// println!("conflicts: {:?}; redo with restore({})", outcome.conflicts, outcome.undo);
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn undo(
        &self,
        session: &str,
        from_turn: Option<&str>,
        file: Option<&Path>,
        force: bool,
    ) -> Result<UndoOutcome> {
        let only = file.map(|f| self.project_path(f)).transpose()?;
        let _lock = self.lock()?;
        let records = self.session_records(session)?;
        let start = match from_turn {
            Some(turn) => records.iter().position(|r| r.turn == turn),
            None => (!records.is_empty()).then_some(0),
        }
        .ok_or_else(|| Error::Turn {
            session: session.into(),
            turn: from_turn.unwrap_or_default().into(),
            reason: "is not a turn of this session",
        })?;
        let undone = &records[start..];
        let current = self.track_locked(&TrackOptions::default())?.hash;
        let repo = self.repo();
        let mut touched: Vec<BString> = Vec::new();
        for record in undone {
            let rolled_back = || -> Result<bool> {
                Ok(self
                    .ref_target(&turn_ref(session, "rolled-back", &record.turn)?)?
                    .is_some())
            };
            // An open turn an undo rolled back has no changes of its own: what changed since
            // is that undo's.
            if record.after.is_none() && rolled_back()? {
                continue;
            }
            let after = record.after.unwrap_or(current);
            touched.extend(
                tree_changes(&repo, record.before, after)?
                    .into_iter()
                    .map(|c| c.path),
            );
        }
        touched.sort_unstable();
        touched.dedup();
        if let Some(only) = &only {
            touched.retain(|p| is_within(p.as_ref(), only.as_ref()));
            if touched.is_empty() {
                return Err(Error::PathNotChanged {
                    path: only.to_str_lossy().into_owned(),
                    session: session.into(),
                });
            }
        }
        let chain = self.chain_since(session, undone[0].begin)?;
        let mut others = self.changed_by_others(&chain, current)?;
        for record in undone {
            others.extend(self.changed_by_other_sessions(session, record)?);
        }
        let target = undone[0].before;
        let mut conflicts = Vec::new();
        let mut changes = Vec::new();
        let differing = tree_changes(&repo, current, target)?;
        let differs: HashSet<&BString> = differing.iter().map(|c| &c.path).collect();
        // Paths the turns changed that no snapshot sees now (ignored since, say) but that are
        // on disk: left as they are, and said so.
        let mut out_of_view = Vec::new();
        for path in &touched {
            if differs.contains(path)
                || side_at(&repo, current, path.as_ref())?.is_some()
                || side_at(&repo, target, path.as_ref())?.is_some()
            {
                continue;
            }
            let abs = self.project().join(std::ffi::OsStr::from_bytes(path));
            if std::fs::symlink_metadata(abs).is_ok() {
                out_of_view.push(path.clone());
            }
        }
        for change in differing {
            if touched.binary_search(&change.path).is_err() {
                continue; // not the agent's: edits between turns by someone else stay
            }
            if !force && others.contains(&change.path) {
                conflicts.push(change.path.clone());
                continue;
            }
            changes.push(change);
        }
        let outcome = self.apply(Plan {
            target,
            current,
            steps: changes.iter().map(|c| step_of(c, 0)).collect(),
            sights: vec![self.visibility(target, Some(undone[0].begin))?],
            force,
        })?;
        // What the session left: its last commit's tree (for a turn left open, its "before":
        // what the open turn changed and the undo did not take back is not the session's).
        let base = chain.last().map_or(current, |(tree, _)| *tree);
        self.record_undo_on_chain(session, &undone[0].turn, base, &changes, &outcome)?;
        let RestoreOutcome {
            written,
            deleted,
            failed,
            conflicts: in_the_way,
            mut kept,
            undo,
            ..
        } = outcome;
        conflicts.extend(in_the_way);
        kept.extend(out_of_view);
        // A turn is rolled back only when the undo changed everything it could: a file that
        // could not be written leaves it as it was.
        if only.is_none() && failed.is_empty() {
            for record in undone {
                self.set_ref(
                    &turn_ref(session, "rolled-back", &record.turn)?,
                    record.commit,
                    "rewind: undo",
                )?;
            }
        }
        Ok(UndoOutcome {
            restored: written,
            deleted,
            conflicts,
            kept,
            failed,
            undo,
        })
    }

    /// The session's chain from commit `begin` to its head, oldest first: each commit's tree
    /// and kind. Costs one commit read per commit.
    fn chain_since(&self, session: &str, begin: ObjectId) -> Result<Vec<(ObjectId, ChainKind)>> {
        let repo = self.repo();
        let mut chain = Vec::new();
        let mut next = self.ref_target(&session_ref(session, "head")?)?;
        while let Some(commit) = next {
            let (object, tree) = commit_and_tree(&repo, commit)?;
            chain.push((tree, ChainKind::of(object.message_raw_sloppy())));
            if commit == begin {
                break;
            }
            next = object.parent_ids().next().map(|id| id.detach());
        }
        chain.reverse();
        Ok(chain)
    }

    /// Undo the session's most recent turn that is not rolled back yet (and any later ones,
    /// which are): the "undo what the agent just did" button. Pressed again, it walks back one
    /// turn at a time. `not_found` when every turn is rolled back.
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), "/tmp/rewind".as_ref())?;
    /// let outcome = store.undo_last("chat-42", false)?;
    /// println!("restored {:?}", outcome.restored);
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn undo_last(&self, session: &str, force: bool) -> Result<UndoOutcome> {
        let mut last = None;
        for record in self.session_records(session)? {
            if self
                .ref_target(&turn_ref(session, "rolled-back", &record.turn)?)?
                .is_none()
            {
                last = Some(record.turn);
            }
        }
        let turn = last.ok_or_else(|| Error::NoSession(session.into()))?;
        self.undo(session, Some(&turn), None, force)
    }

    /// The paths someone other than the session changed along `chain`: between an end (or
    /// undo) commit and the next turn's begin, and after the last end (or undo) until
    /// `current`, unless the content is again the session's last word on the path (what the
    /// last turn or undo that changed it left there). An open turn's changes are its own.
    /// Costs one tree diff per chain commit.
    fn changed_by_others(
        &self,
        chain: &[(ObjectId, ChainKind)],
        current: ObjectId,
    ) -> Result<HashSet<BString>> {
        let repo = self.repo();
        let mut others = HashSet::new();
        // For each path, the tree of the last end or undo commit that changed it.
        let mut last_word: HashMap<BString, ObjectId> = HashMap::new();
        for pair in chain.windows(2) {
            let ((from, from_kind), (to, to_kind)) = (pair[0], pair[1]);
            let changed = tree_changes(&repo, from, to)?.into_iter().map(|c| c.path);
            match to_kind {
                ChainKind::End | ChainKind::Undo => {
                    last_word.extend(changed.map(|path| (path, to)));
                }
                // A gap: someone else's, unless a turn left open runs into it.
                ChainKind::Begin if from_kind != ChainKind::Begin => others.extend(changed),
                ChainKind::Begin => {}
            }
        }
        if let Some(&(last, ChainKind::End | ChainKind::Undo)) = chain.last() {
            for change in tree_changes(&repo, last, current)? {
                let session_left = match last_word.get(&change.path) {
                    Some(tree) => side_at(&repo, *tree, change.path.as_ref())?,
                    None => None,
                };
                if session_left.is_none() || session_left != change.after {
                    others.insert(change.path);
                }
            }
        }
        Ok(others)
    }

    /// `Rewind-Other-Head:` lines naming every other session's head now: a turn's begin and
    /// end commits carry them, so an undo can tell what other sessions did meanwhile.
    fn other_heads_lines(&self, session: &str) -> Result<String> {
        let own = session_ref(session, "head")?;
        let mut lines = String::new();
        for (name, commit) in self.refs_under(&format!("{SESSIONS}/"))? {
            if name.ends_with("/head") && name != own {
                lines.push_str(&format!("{OTHER_HEAD}{name} {commit}\n"));
            }
        }
        Ok(lines)
    }

    /// The paths other sessions' turns and undos changed while turn `record` of `session` was
    /// open (from its begin to its end, or to now): their end and undo commits between the
    /// heads its begin and end commits name. A path one of them changed is theirs, so an undo
    /// of this turn leaves it alone. Costs a walk of each other session's chain over the turn.
    fn changed_by_other_sessions(
        &self,
        session: &str,
        record: &Record,
    ) -> Result<HashSet<BString>> {
        let repo = self.repo();
        let store_error = |e: &dyn std::fmt::Display| Error::store(self.git_dir(), e);
        let heads_in = |commit: ObjectId| -> Result<HashMap<String, ObjectId>> {
            let object = repo.find_commit(commit).map_err(|e| store_error(&e))?;
            Ok(parse_other_heads(object.message_raw_sloppy()))
        };
        let at_begin = heads_in(record.begin)?;
        let at_end = match record.ended_at {
            Some(_) => heads_in(record.commit)?,
            None => parse_other_heads(self.other_heads_lines(session)?.as_bytes()),
        };
        let mut paths = HashSet::new();
        for (head, last) in at_end {
            let first = at_begin.get(&head).copied();
            let mut next = Some(last);
            while let Some(commit) = next.filter(|c| Some(*c) != first) {
                let (object, tree) = commit_and_tree(&repo, commit)?;
                next = object.parent_ids().next().map(|id| id.detach());
                let kind = ChainKind::of(object.message_raw_sloppy());
                if let (ChainKind::End | ChainKind::Undo, Some(parent)) = (kind, next) {
                    let (_, before) = commit_and_tree(&repo, parent)?;
                    paths.extend(
                        tree_changes(&repo, before, tree)?
                            .into_iter()
                            .map(|c| c.path),
                    );
                }
            }
        }
        Ok(paths)
    }

    /// Append the undo to the session's chain: a commit of what the session left, `base` (its
    /// last commit's tree: an end, an undo, or an open turn's "before") with the `changes` the undo
    /// made. So edits by someone else, made before or after the undo, stay told apart from the
    /// session's own, and a path the undo left alone stays a conflict.
    fn record_undo_on_chain(
        &self,
        session: &str,
        from_turn: &str,
        base: ObjectId,
        changes: &[Change],
        outcome: &RestoreOutcome,
    ) -> Result<()> {
        let repo = self.repo();
        let store_error = |e: &dyn std::fmt::Display| Error::store(self.git_dir(), e);
        let mut editor = repo.edit_tree(base).map_err(|e| store_error(&e))?;
        for change in changes {
            let done = outcome
                .written
                .iter()
                .chain(&outcome.deleted)
                .any(|p| *p == change.path);
            if !done {
                continue;
            }
            let edited = match change.after {
                Some(side) => editor.upsert(change.path.as_bstr(), entry_kind(side.mode), side.id),
                None => editor.remove(change.path.as_bstr()),
            };
            edited.map_err(|e| store_error(&e))?;
        }
        let tree = editor.write().map_err(|e| store_error(&e))?.detach();
        let head = session_ref(session, "head")?;
        let parent = self.ref_target(&head)?;
        let message = format!(
            "rewind: undo of session {session:?} from turn {from_turn:?}\n\n{}{UNDO_TRAILER}\n",
            trailers(session, from_turn, crate::now()?, None, None)?
        );
        self.commit(&head, &message, tree, parent)?;
        Ok(())
    }

    /// Per-file totals across `session`: each file once, from its state before the first turn
    /// that touched it to its state after the last one.
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), "/tmp/rewind".as_ref())?;
    /// let totals = store.changes("chat-42")?;
    /// println!("{} files, +{} -{}", totals.total_files, totals.total_additions, totals.total_deletions);
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn changes(&self, session: &str) -> Result<SessionChanges> {
        let records = self.session_records(session)?;
        let current = || self.track(&TrackOptions::default()).map(|s| s.hash);
        let repo = self.repo();
        let mut net: BTreeMap<BString, Change> = BTreeMap::new();
        for record in &records {
            let after = match record.after {
                Some(after) => after,
                None => current()?,
            };
            for change in tree_changes(&repo, record.before, after)? {
                match net.get_mut(&change.path) {
                    Some(first) => first.after = change.after,
                    None => {
                        net.insert(change.path.clone(), change);
                    }
                }
            }
        }
        let files = net
            .into_values()
            .filter(|c| c.before != c.after)
            .map(|c| turn_file(&repo, c))
            .collect::<Result<Vec<_>>>()?;
        let (total_additions, total_deletions) = totals(&files);
        Ok(SessionChanges {
            session: session.into(),
            total_files: files.len(),
            total_additions,
            total_deletions,
            files,
        })
    }

    /// Per-file stats of the changes from tree `before` to tree `after`.
    fn files_between(&self, before: ObjectId, after: ObjectId) -> Result<Vec<TurnFile>> {
        let repo = self.repo();
        tree_changes(&repo, before, after)?
            .into_iter()
            .map(|c| turn_file(&repo, c))
            .collect()
    }

    /// Keep at most `max` turns of `session`: the oldest others go (rolled-back turns stay
    /// until they expire, since the user may redo them; open turns stay), and the session's
    /// chain is rewritten without them. Returns how many turns went. The caller holds the lock.
    pub(crate) fn trim_session(&self, session: &str, max: usize) -> Result<usize> {
        let records = self.session_records(session)?;
        let excess = records.len().saturating_sub(max);
        let mut dropped = Vec::new();
        for record in &records {
            if dropped.len() == excess {
                break;
            }
            let marker = turn_ref(session, "rolled-back", &record.turn)?;
            // An open turn is never dropped: it needs its chain and its before snapshot.
            if record.ended_at.is_some() && self.ref_target(&marker)?.is_none() {
                dropped.push(record.turn.clone());
            }
        }
        if dropped.is_empty() {
            return Ok(0);
        }
        let mut parent: Option<ObjectId> = None;
        for record in records.iter().filter(|r| !dropped.contains(&r.turn)) {
            let begin = self.rewrite_commit(record.begin, parent)?;
            let last = match record.ended_at {
                Some(_) => self.rewrite_commit(record.commit, [begin])?,
                None => begin,
            };
            self.set_ref(
                &turn_ref(session, "turns", &record.turn)?,
                last,
                "rewind: prune",
            )?;
            let marker = turn_ref(session, "rolled-back", &record.turn)?;
            if self.ref_target(&marker)?.is_some() {
                self.set_ref(&marker, last, "rewind: prune")?;
            }
            parent = Some(last);
        }
        let head = session_ref(session, "head")?;
        let expected = session_ref(session, "expected")?;
        match parent {
            Some(last) => {
                self.set_ref(&head, last, "rewind: prune")?;
                if let Some(commit) = self.ref_target(&expected)? {
                    let alone = self.rewrite_commit(commit, None)?; // only its tree matters
                    self.set_ref(&expected, alone, "rewind: prune")?;
                }
            }
            // No turn kept (a limit of 0): the session goes.
            None => {
                self.delete_ref(&head)?;
                self.delete_ref(&expected)?;
            }
        }
        for turn in &dropped {
            for kind in ["turns", "rolled-back"] {
                self.delete_ref(&turn_ref(session, kind, turn)?)?;
            }
        }
        Ok(dropped.len())
    }

    /// The turns of `session`, oldest first; a session without turns does not exist.
    fn session_records(&self, session: &str) -> Result<Vec<Record>> {
        match self.sessions(Some(session))?.into_iter().next() {
            Some((_, records)) if !records.is_empty() => Ok(records),
            _ => Err(Error::NoSession(session.into())),
        }
    }

    /// The turns of `session` (or of all sessions), each session's oldest first: by position
    /// on the session's chain, never by time (the clock can step back between turns).
    fn sessions(&self, only: Option<&str>) -> Result<Vec<(String, Vec<Record>)>> {
        let prefix = match only {
            Some(session) => session_ref(session, "")?,
            None => format!("{SESSIONS}/"),
        };
        let repo = self.repo();
        let store_error = |e: &dyn std::fmt::Display| Error::store(self.git_dir(), e);
        let platform = repo.references().map_err(|e| store_error(&e))?;
        let mut by_session: BTreeMap<String, (Option<ObjectId>, Vec<Record>)> = BTreeMap::new();
        for reference in platform
            .prefixed(prefix.as_str())
            .map_err(|e| store_error(&e))?
        {
            let mut reference = reference.map_err(|e| store_error(&e))?;
            let name = reference.name().as_bstr().to_string();
            // <SESSIONS>/<session>/head or <SESSIONS>/<session>/turns/<turn>
            let parts: Vec<&str> = name[SESSIONS.len() + 1..].split('/').collect();
            let commit = reference
                .peel_to_id()
                .map_err(|e| store_error(&e))?
                .detach();
            match parts[..] {
                [_, "head"] => {
                    let session = self.record(commit)?.session;
                    by_session.entry(session).or_default().0 = Some(commit);
                }
                [_, "turns", _] => {
                    let record = self.record(commit)?;
                    by_session
                        .entry(record.session.clone())
                        .or_default()
                        .1
                        .push(record);
                }
                _ => {}
            }
        }
        let mut sessions = Vec::new();
        for (session, (head, mut records)) in by_session {
            let mut chain = Vec::new();
            let mut next = head;
            while let Some(commit) = next {
                chain.push(commit);
                next = self.parent(commit)?;
            }
            // Oldest first along the chain; a turn off the chain (none should be) goes last.
            let position: HashMap<ObjectId, usize> = chain
                .iter()
                .rev()
                .enumerate()
                .map(|(i, c)| (*c, i))
                .collect();
            records.sort_by_key(|r| {
                (
                    position.get(&r.begin).copied().unwrap_or(usize::MAX),
                    r.started_at,
                )
            });
            sessions.push((session, records));
        }
        Ok(sessions)
    }

    fn parent(&self, commit: ObjectId) -> Result<Option<ObjectId>> {
        let repo = self.repo();
        let object = repo
            .find_commit(commit)
            .map_err(|e| Error::store(self.git_dir(), e))?;
        let id = object.parent_ids().next().map(|id| id.detach());
        Ok(id)
    }

    /// Parse a turn commit's trailers.
    fn record(&self, commit: ObjectId) -> Result<Record> {
        let repo = self.repo();
        let (object, tree) = commit_and_tree(&repo, commit)?;
        let message = object.message_raw_sloppy().to_owned();
        let field = |key: &str| -> Option<String> {
            message
                .lines()
                .rev()
                .find_map(|line| line.strip_prefix(format!("{key}: ").as_bytes()))
                .map(|v| v.to_str_lossy().into_owned())
        };
        let bad = || {
            Error::store(
                self.git_dir(),
                format!("commit {commit} is not a rewind turn"),
            )
        };
        let id = |key| field(key).and_then(|v| decode_id(&v)).ok_or_else(bad);
        let time = |key| {
            field(key).map(|v| {
                DateTime::parse_from_rfc3339(&v)
                    .map(|t| t.with_timezone(&Utc))
                    .map_err(|_| bad())
            })
        };
        let number = |key| field(key).and_then(|v| v.parse().ok()).unwrap_or(0);
        let ended_at = time("Rewind-Ended").transpose()?;
        let before = match field("Rewind-Before") {
            Some(hex) => ObjectId::from_hex(hex.as_bytes()).map_err(|_| bad())?,
            None => tree,
        };
        Ok(Record {
            session: id("Rewind-Session")?,
            turn: id("Rewind-Turn")?,
            started_at: time("Rewind-Started").ok_or_else(bad)??,
            after: ended_at.map(|_| tree),
            ended_at,
            before,
            commit,
            begin: match ended_at {
                Some(_) => object.parent_ids().next().map_or(commit, |id| id.detach()),
                None => commit,
            },
            files: number("Rewind-Files"),
            additions: number("Rewind-Additions"),
            deletions: number("Rewind-Deletions"),
        })
    }
}

/// Merge the sessions' turns (each session's in chain order, sessions one after the other) by
/// start time, keeping each session's own order whatever the clock did. Costs a scan of the
/// sessions per turn.
fn interleave(turns: Vec<Turn>) -> Vec<Turn> {
    let mut queues: Vec<VecDeque<Turn>> = Vec::new();
    for turn in turns {
        match queues.last_mut() {
            Some(queue) if queue.back().is_some_and(|t| t.session == turn.session) => {
                queue.push_back(turn)
            }
            _ => queues.push(VecDeque::from([turn])),
        }
    }
    let mut merged = Vec::new();
    while let Some(next) = queues
        .iter_mut()
        .filter(|queue| !queue.is_empty())
        .min_by_key(|queue| queue.front().map(|t| t.started_at))
    {
        merged.extend(next.pop_front());
    }
    merged
}

/// The trailers that identify a turn commit (ids percent-encoded, so one line each).
fn trailers(
    session: &str,
    turn: &str,
    started: DateTime<Utc>,
    ended: Option<(DateTime<Utc>, ObjectId)>,
    stats: Option<(usize, usize, usize)>,
) -> Result<String> {
    let mut out = format!(
        "Rewind-Session: {}\nRewind-Turn: {}\nRewind-Started: {}\n",
        encode_id("session", session)?,
        encode_id("turn", turn)?,
        started.to_rfc3339()
    );
    if let Some((ended, before)) = ended {
        out.push_str(&format!(
            "Rewind-Ended: {}\nRewind-Before: {before}\n",
            ended.to_rfc3339()
        ));
    }
    if let Some((files, additions, deletions)) = stats {
        out.push_str(&format!(
            "Rewind-Files: {files}\nRewind-Additions: {additions}\nRewind-Deletions: {deletions}\n"
        ));
    }
    Ok(out)
}

fn entry_kind(mode: u32) -> gix::objs::tree::EntryKind {
    use gix::objs::tree::EntryKind;
    match mode {
        0o100755 => EntryKind::BlobExecutable,
        0o120000 => EntryKind::Link,
        _ => EntryKind::Blob,
    }
}

/// Commit `id` of the store, and its tree's id.
fn commit_and_tree(repo: &gix::Repository, id: ObjectId) -> Result<(gix::Commit<'_>, ObjectId)> {
    let store_error = |e: &dyn std::fmt::Display| Error::store(repo.git_dir(), e);
    let commit = repo.find_commit(id).map_err(|e| store_error(&e))?;
    let tree = commit.tree_id().map_err(|e| store_error(&e))?.detach();
    Ok((commit, tree))
}

/// The entry at `path` in `tree`, if it is a blob or symlink.
fn side_at(repo: &gix::Repository, tree: ObjectId, path: &BStr) -> Result<Option<Side>> {
    let store_error = |e: &dyn std::fmt::Display| Error::store(repo.git_dir(), e);
    let tree = repo.find_tree(tree).map_err(|e| store_error(&e))?;
    let path = std::path::Path::new(std::ffi::OsStr::from_bytes(path));
    Ok(tree
        .lookup_entry_by_path(path)
        .map_err(|e| store_error(&e))?
        .filter(|entry| !entry.mode().is_tree())
        .map(|entry| Side {
            mode: u32::from(entry.mode().value()),
            id: entry.oid().to_owned(),
        }))
}

/// Counts for one change (no contents).
fn turn_file(repo: &gix::Repository, change: Change) -> Result<TurnFile> {
    let options = DiffOptions {
        max_content_bytes: 0,
        ..DiffOptions::default()
    };
    let file = change.path.clone();
    let row = file_change(repo, change, &options)?;
    Ok(TurnFile {
        file,
        status: row.status,
        additions: row.additions,
        deletions: row.deletions,
    })
}

fn totals(files: &[TurnFile]) -> (usize, usize) {
    files
        .iter()
        .fold((0, 0), |(a, d), f| (a + f.additions, d + f.deletions))
}
