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

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use chrono::{DateTime, Utc};
use gix::bstr::{BStr, BString, ByteSlice};
use gix::ObjectId;
use serde::Serialize;

use crate::diff::{
    broken, file_change, find_renames, is_rewrite, merge, tree_changes, Change, DiffOptions,
    Listed, Side, Status,
};
use crate::error::{Error, Result};
use crate::paths::is_within;
use crate::restore::{
    other_names, reverse_turns, step_of, write_blob, ConflictDetail, Plan, RestoreOutcome,
    Reversed, TurnSides,
};
use crate::snapshot::visibility::{
    decode_path, encode_path, made_of_lines, made_of_lines_in, Visibility,
};
use crate::snapshot::TrackOptions;
use crate::store::snapshot_record;
use crate::store::{Locked, NotDone, SnapshotId, Store};

/// One file a turn (or a session) changed.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct TurnFile {
    #[serde(serialize_with = "crate::paths::serialize_path")]
    /// The project-relative path.
    pub file: BString,
    /// How it changed.
    pub status: Status,
    /// The path it was renamed from (`status` `renamed` only; lossy in JSON where not UTF-8).
    #[serde(
        serialize_with = "crate::paths::serialize_opt_path",
        skip_serializing_if = "Option::is_none"
    )]
    pub old_file: Option<BString>,
    /// How similar it is to the file it was renamed from, in percent (`renamed` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub similarity: Option<u32>,
    /// Lines added (`git diff --numstat`; 0 for a binary file, where git says `-`).
    pub additions: usize,
    /// Lines deleted (`git diff --numstat`; 0 for a binary file, where git says `-`).
    pub deletions: usize,
    /// Either side is binary (a NUL byte in its first 8,000 bytes, git's test): no lines are
    /// counted.
    pub binary: bool,
    /// Whose change it is: see [`Origin`].
    pub origin: Origin,
}

/// How turn summaries ([`Store::turns_with`], [`Store::changes_with`],
/// [`Store::end_turn_with`], [`Store::show_with`]) list files.
#[derive(Debug, Clone)]
pub struct SummaryOptions {
    /// Pair a deleted and an added file of the turn (or session) into one `renamed` row as
    /// `git diff -M` does between its before and after (default); `false`: each path alone, as
    /// `git diff --no-renames` lists them. A rename's origin is the stronger of its two paths'.
    pub renames: bool,
}

impl Default for SummaryOptions {
    fn default() -> Self {
        SummaryOptions { renames: true }
    }
}

/// Whose change a file of a turn is. While turns of several sessions are open at once, a
/// change on disk could be any of theirs; `track_file` is how an agent says it is its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// Changed while no other session's turn was open: the turn's, whoever wrote it (shell
    /// commands, formatters, generators).
    Unannounced,
    /// The turn announced the path with `track_file` (and no overlapping turn of another
    /// session did).
    Announced,
    /// Changed while another session's turn was open too (or by another session's undo or
    /// redo meanwhile), and announced by none of them (or by several): undo leaves it alone
    /// unless forced.
    Shared,
    /// Announced by an overlapping turn of another session only: that session's change, not
    /// listed among the turn's files.
    Other,
}

impl Origin {
    fn as_str(self) -> &'static str {
        match self {
            Origin::Unannounced => "unannounced",
            Origin::Announced => "announced",
            Origin::Shared => "shared",
            Origin::Other => "other",
        }
    }

    fn parse(word: &[u8]) -> Option<Origin> {
        [
            Origin::Unannounced,
            Origin::Announced,
            Origin::Shared,
            Origin::Other,
        ]
        .into_iter()
        .find(|o| o.as_str().as_bytes() == word)
    }
}

/// Which part of a session [`Store::undo`] undoes.
#[derive(Debug, Clone, Default)]
pub struct UndoOptions {
    /// The first turn to undo (later turns are undone too); `None`: the session's first turn.
    pub turn: Option<String>,
    /// Only this path (a directory: the paths below it), project-relative or absolute inside
    /// the project; `None`: every path the turns changed.
    pub file: Option<PathBuf>,
    /// Also undo paths someone else changed since (their bytes are kept in the undo point).
    pub force: bool,
    /// Change nothing and record nothing: return the outcome the real undo would give now.
    pub dry_run: bool,
    /// Undo `turn` alone and keep the later turns: each path it changed gets a three-way merge
    /// (the file now, what the turn left, what it found), as `git merge-file` computes it. A
    /// clean merge is written; overlapping hunks are a conflict, left alone (with `force`,
    /// written with git's conflict markers; the file's bytes are in the undo point), and so is
    /// a path no merge can take (with `force`, the turn's before, whole). A file renamed since
    /// is merged where it stands now (a rename as `git diff -B -M` finds it).
    pub only: bool,
    /// Merge paths someone else changed since (the user, another session) instead of leaving
    /// them alone: the turns' hunks are taken out, theirs stay. Where the hunks overlap, the
    /// path is still a conflict.
    pub merge: bool,
}

/// Which undo [`Store::redo`] redoes.
#[derive(Debug, Clone, Default)]
pub struct RedoOptions {
    /// The most recent undo of this turn; `None`: the session's most recent undo not redone.
    pub turn: Option<String>,
    /// Also overwrite paths changed since the undo (their bytes are kept in the undo point).
    pub force: bool,
}

/// A turn as [`Store::turns`] lists it.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct Turn {
    /// The session (the agent's conversation) it belongs to.
    pub session: String,
    /// The turn's id within its session.
    pub turn: String,
    /// When the turn began.
    pub started_at: DateTime<Utc>,
    /// `None` while the turn is open (or its runtime crashed before ending it).
    pub ended_at: Option<DateTime<Utc>>,
    /// The snapshot taken when the turn began (for an open turn a redo gave back, the project
    /// as that redo found it: what an undo of the turn goes back to).
    pub before: SnapshotId,
    /// The snapshot taken when it ended (`None` while open). For a turn left open when its
    /// session began another (its runtime died, say), where that one began, or where an undo
    /// rolled it back before that: it ended there, though `ended_at` stays `None`.
    pub after: Option<SnapshotId>,
    /// How many files it changed (once ended: the rows of `changed`, a rename once).
    pub files: usize,
    /// Lines added over the files it changed (once ended: over `changed`).
    pub additions: usize,
    /// Lines deleted over the files it changed (once ended: over `changed`).
    pub deletions: usize,
    /// The files it changed, each with its [`Origin`] (empty while `after` is `None`); renames
    /// paired unless [`SummaryOptions::renames`] is off.
    pub changed: Vec<TurnFile>,
    /// Whether an undo rolled it back (and no redo gave it back).
    pub rolled_back: bool,
    /// Rolled back by an undo that was stopped (killed) before it finished: its files may still
    /// hold its work, and [`Store::undo_last`] takes it again.
    pub undo_stopped: bool,
    /// The runtime's metadata, given when the turn began ([`BeginOptions::meta`]).
    pub meta: BTreeMap<String, String>,
}

impl Turn {
    /// One word or two for where the turn stands: `open`, `left open` (its session began
    /// another turn before it ended: it ended there), `done`, `rolled back` or `undo stopped`
    /// ([`Turn::undo_stopped`]).
    pub fn state(&self) -> &'static str {
        match (self.rolled_back, self.ended_at, self.after) {
            (true, _, _) if self.undo_stopped => "undo stopped",
            (true, _, _) => "rolled back",
            (false, None, None) => "open",
            (false, None, Some(_)) => "left open",
            (false, Some(_), _) => "done",
        }
    }
}

/// Options for [`Store::begin_turn_with`].
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct BeginOptions {
    /// The runtime's metadata, stored with the turn and returned by [`Store::turns`] and
    /// [`Store::show`]: a message id, tool call ids, the model. Keys are 1 to 200 bytes,
    /// values at most 8 KiB; any bytes of UTF-8 text.
    pub meta: BTreeMap<String, String>,
}

impl BeginOptions {
    /// Options with `meta`.
    pub fn meta(meta: BTreeMap<String, String>) -> Self {
        BeginOptions { meta }
    }
}

/// The longest metadata key, in bytes.
const MAX_META_KEY: usize = 200;
/// The longest metadata value, in bytes.
const MAX_META_VALUE: usize = 8 << 10;
/// The trailer key of a turn's metadata lines: `Rewind-Meta: <key> <value>`, each encoded.
const META: &str = "Rewind-Meta: ";

/// The `Rewind-Meta:` lines of `meta` (an error for a key or value out of bounds).
fn meta_lines(meta: &BTreeMap<String, String>) -> Result<String> {
    let mut out = String::new();
    for (key, value) in meta {
        let reason = if key.is_empty() || key.len() > MAX_META_KEY {
            Some(format!(
                "key {key:?} must be 1 to {MAX_META_KEY} bytes long"
            ))
        } else if value.len() > MAX_META_VALUE {
            Some(format!(
                "value of {key:?} is longer than {MAX_META_VALUE} bytes"
            ))
        } else {
            None
        };
        if let Some(reason) = reason {
            return Err(Error::BadName {
                what: "metadata",
                reason,
            });
        }
        out.push_str(META);
        encode_path(&mut out, key.as_bytes());
        out.push(' ');
        encode_path(&mut out, value.as_bytes());
        out.push('\n');
    }
    Ok(out)
}

/// The metadata a commit message's `Rewind-Meta:` lines hold.
fn parse_meta(message: &[u8]) -> BTreeMap<String, String> {
    lines_with(message, META)
        .filter_map(|rest| {
            let (key, value) = rest.split_once_str(" ")?;
            let text = |b: &[u8]| String::from_utf8(decode_path(b)?.into()).ok();
            Some((text(key)?, text(value)?))
        })
        .collect()
}

/// Per-file totals of a session, from [`Store::changes`].
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct SessionChanges {
    /// The session (the agent's conversation) it belongs to.
    pub session: String,
    /// Each file the session's turns changed, with totals over its turns.
    pub files: Vec<TurnFile>,
    /// How many files.
    pub total_files: usize,
    /// Lines added, over all files.
    pub total_additions: usize,
    /// Lines deleted, over all files.
    pub total_deletions: usize,
}

/// What [`Store::begin_turn`] did.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct TurnStart {
    /// The snapshot taken as the turn's "before".
    pub before: SnapshotId,
    /// What that snapshot left out: an undo of the turn cannot bring these back.
    pub skipped: Vec<crate::snapshot::Skipped>,
}

/// What [`Store::end_turn`] did.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct TurnEnd {
    /// The turn's "before" snapshot.
    pub before: SnapshotId,
    /// The turn's "after" snapshot.
    pub after: SnapshotId,
    /// What changed in the turn.
    pub files: Vec<TurnFile>,
    /// What the "after" snapshot left out.
    pub skipped: Vec<crate::snapshot::Skipped>,
}

/// A turn of another session that overlapped a turn: what it announced, and the paths that
/// changed while both were open.
struct Overlap {
    announced: Vec<BString>,
    changed: HashSet<BString>,
}

/// What other sessions did while a turn was open, from [`Store::commits_of_others_during`]:
/// the commits they added to their chains (each session's, newest first), and whether some of
/// it cannot be seen any more (a session pruned or trimmed since).
struct OthersDuring {
    chains: Vec<Vec<ObjectId>>,
    unknown: bool,
    /// Where the other sessions' chains stood at the end (now, for a turn still open).
    heads_at_end: HashMap<String, ObjectId>,
    /// Whether the end is in the past (the turn ended, was left open, or was rolled back).
    ended: bool,
}

impl OthersDuring {
    fn commits(&self) -> impl Iterator<Item = ObjectId> + '_ {
        self.chains.iter().flatten().copied()
    }
}

/// A commit of a session's chain, as [`Store::chain_since`] reads it.
struct ChainLink {
    tree: ObjectId,
    kind: ChainKind,
    /// For an end commit that lists them, the turn's own files.
    own: Option<HashSet<BString>>,
    /// For an undo commit, the paths it merged (someone else's edits are in them).
    merged: HashSet<BString>,
    /// For an undo or redo, the project as it found it (its undo point): made in a gap, what
    /// changed there since the link before is someone else's; for a redo that reopened the
    /// session's open turn, what changes after is that turn's. (`None` where that is the
    /// undo's target: nothing before it counts.)
    found: Option<ObjectId>,
    /// For a begin, its turn; for a redo that reopened a turn, that turn.
    opens: Option<String>,
    /// For an undo, the turns it rolled back.
    rolled_back: Vec<String>,
    /// For an undo or redo, the turns it was about: the one it ran from (`Rewind-Turn:`) and
    /// those it rolled back or gave back.
    about: Vec<String>,
    /// For such a redo, the "before" it gave the turn (its `Rewind-Reopened-Before:`, else
    /// the project as it found it).
    reopened_before: Option<ObjectId>,
    /// Whether it is a redo that reopened the open turn (after it, no gap until the next
    /// begin).
    reopens: bool,
    /// For the link after undos or redos stopped before it, the paths they may have written:
    /// what changed there in its gap is theirs, not someone else's (r92 (2)).
    gap_leaves_out: HashSet<BString>,
}

/// A session's id and its turns, oldest first.
type SessionRecords = (String, Vec<Record>);

/// A turn's commit, parsed.
#[derive(Clone)]
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
    meta: BTreeMap<String, String>,
}

const SESSIONS: &str = "refs/rewind/sessions";
/// The key of the lines naming other sessions' heads in a turn's begin and end commits.
const OTHER_HEAD: &str = "Rewind-Other-Head: ";

/// The line of an undo's commit when no other session stood anywhere (see [`OTHER_HEAD`]).
const NO_OTHER_HEADS: &str = "Rewind-Other-Heads: none\n";

/// The `Rewind-Other-Head:` lines of a commit message: each other session's head ref and the
/// commit it pointed to.
fn parse_other_heads(message: &[u8]) -> HashMap<String, ObjectId> {
    lines_with(message, OTHER_HEAD)
        .filter_map(|rest| {
            let (name, id) = rest.to_str().ok()?.split_once(' ')?;
            Some((name.to_owned(), ObjectId::from_hex(id.as_bytes()).ok()?))
        })
        .collect()
}

/// The key of the lines a trim's copy of a commit names the commits it stands for with (each
/// trim adds one): what a commit recorded elsewhere under its old id is now.
const COPY_OF: &str = "Rewind-Copy-Of: ";

/// The key of the lines a trim's copy of a commit names each commit the trim dropped just
/// before it with, oldest first, each followed by the files it listed
/// ([`DROPPED_FILE`]): what the dropped turns did, for a redo to leave alone.
const DROPPED: &str = "Rewind-Dropped: ";
/// The key of the lines naming a dropped commit's own files, announced or not (see [`DROPPED`]).
const DROPPED_FILE: &str = "Rewind-Dropped-File: ";
/// The key of the lines naming the files a dropped commit listed as shared (see [`DROPPED`]),
/// each followed by what the turn's end held there (` <mode> <id>`, or ` -` for nothing):
/// changed while another session's turn was open, perhaps by an undo of the session that
/// reads them, so they count whole only for a turn begun after that undo ([`DROPPED_BEGUN`]),
/// and for one open across it where its end holds something the undo did not leave.
const DROPPED_SHARED_FILE: &str = "Rewind-Dropped-Shared-File: ";
/// The key of the line naming a dropped end commit's begin commit, before its
/// [`DROPPED_SHARED_FILE`] lines.
const DROPPED_BEGUN: &str = "Rewind-Dropped-Begun: ";
/// The key of the lines naming what a dropped commit, itself a trim's copy, stood for (its
/// [`COPY_OF`] lines), right after its [`DROPPED`] line.
const DROPPED_COPY_OF: &str = "Rewind-Dropped-Copy-Of: ";

/// The line that stands where [`newest_dropped`] cut older dropped lines: what those named is
/// not known.
const DROPPED_CUT: &str = "Rewind-Dropped-Cut: yes";

/// Whether line `line` of a commit's dropped lines names commit `id` as dropped.
fn names_dropped(line: &[u8], id: &str) -> bool {
    [DROPPED, DROPPED_COPY_OF]
        .iter()
        .any(|key| line.strip_prefix(key.as_bytes()) == Some(id.as_bytes()))
}

/// The most [`DROPPED`] and [`DROPPED_FILE`] lines a copy carries: the newest, whole commits
/// of them. Where older ones were cut, [`DROPPED_CUT`] says so: a redo of an undo older than
/// the lines kept (a session that went on for thousands of files' worth of turns) cannot
/// tell which files those turns named, and leaves every path alone unless forced.
const MOST_DROPPED_LINES: usize = 4096;

/// `lines` (dropped lines, oldest first), less the oldest commits' past [`MOST_DROPPED_LINES`]
/// (the newest commit's stay, however many: its own record lists as many files), with
/// [`DROPPED_CUT`] in their place.
fn newest_dropped(lines: String) -> String {
    let count = lines.lines().count();
    if count <= MOST_DROPPED_LINES {
        return lines;
    }
    let (mut at, mut newest) = (0, 0);
    for (n, line) in lines.split_inclusive('\n').enumerate() {
        if line.starts_with(DROPPED) {
            if n >= count - MOST_DROPPED_LINES {
                newest = at;
                break;
            }
            newest = at;
        }
        at += line.len();
    }
    format!("{DROPPED_CUT}\n{}", &lines[newest..])
}

/// Whether `line` is one of a copy's dropped lines ([`DROPPED`] and the lines after it).
fn is_dropped_line(line: &[u8]) -> bool {
    [
        DROPPED,
        DROPPED_FILE,
        DROPPED_SHARED_FILE,
        DROPPED_BEGUN,
        DROPPED_COPY_OF,
        DROPPED_CUT,
    ]
    .iter()
    .any(|key| line.starts_with(key.as_bytes()))
}

/// The [`DROPPED`] and [`DROPPED_FILE`] lines of `message`, in order.
fn dropped_lines(message: &[u8]) -> String {
    let lines = message.lines().filter(|l| is_dropped_line(l));
    lines.map(|l| format!("{}\n", l.as_bstr())).collect()
}

/// What the commits a trim dropped after a place listed, from their [`DROPPED`] lines (see
/// [`dropped_files_after`]).
#[derive(Default)]
struct DroppedFiles {
    /// Their own files, announced or not.
    own: Vec<BString>,
    /// Their shared files, of the turns begun after the place.
    shared: Vec<BString>,
    /// The shared files of the turns open across the place, each with what the turn's end
    /// held there.
    shared_across: Vec<(BString, Option<Side>)>,
    /// Lines among them were cut ([`DROPPED_CUT`]): what those named is not known.
    cut: bool,
}

/// What the commits a trim dropped listed, from `message`'s [`DROPPED`] lines: those dropped
/// after `then` when the message names it, else all. Shared files count only for a turn begun
/// after `then` (every one when `then` is `None`): one whose begin commit was dropped after it,
/// in this message or in one read before, which `begun` collects (read a chain's messages
/// oldest first).
fn dropped_files_after(
    message: &[u8],
    then: Option<ObjectId>,
    begun: &mut HashSet<BString>,
) -> DroppedFiles {
    let all_begun = then.is_none();
    let then = then.map(|id| id.to_string()).unwrap_or_default();
    let named = |line: &[u8]| !then.is_empty() && names_dropped(line, &then);
    // Before `then`'s own files are passed, nothing counts.
    let mut counting = !message.lines().any(named);
    let (mut in_then, mut begun_after) = (false, all_begun);
    let mut found = DroppedFiles::default();
    let decode = crate::snapshot::visibility::decode_path;
    for line in message.lines() {
        if line == DROPPED_CUT.as_bytes() {
            found.cut |= counting || in_then;
        } else if let Some(id) = line.strip_prefix(DROPPED.as_bytes()) {
            counting |= in_then;
            in_then = named(line);
            begun_after = all_begun;
            if counting && !in_then {
                begun.insert(id.into());
            }
        } else if let Some(id) = line.strip_prefix(DROPPED_COPY_OF.as_bytes()) {
            in_then |= named(line);
            if counting && !in_then {
                begun.insert(id.into());
            }
        } else if let Some(id) = line.strip_prefix(DROPPED_BEGUN.as_bytes()) {
            begun_after = all_begun || begun.contains(id.as_bstr());
        } else if let Some(path) = line.strip_prefix(DROPPED_FILE.as_bytes()) {
            if counting && !in_then {
                found.own.extend(decode(path));
            }
        } else if let Some(rest) = line.strip_prefix(DROPPED_SHARED_FILE.as_bytes()) {
            // (Written before stop 42, a line names no end.)
            let (path, end) = match rest.split_once_str(b" ") {
                Some((path, end)) => (path, parse_side(end)),
                None => (rest, None),
            };
            match (counting && !in_then, begun_after, end) {
                (true, true, _) => found.shared.extend(decode(path)),
                (true, false, Some(end)) => found.shared_across.extend(decode(path).zip(Some(end))),
                _ => {}
            }
        }
    }
    found
}

/// The trailer that marks an undo's commit on a session's chain.
const UNDO_TRAILER: &str = "Rewind-Undo: yes";
/// The trailer that marks a redo's commit on a session's chain.
const REDO_TRAILER: &str = "Rewind-Redo: yes";
/// The trailer that marks a trim's commit on a session's chain: it follows commits the trim
/// dropped with none kept after them, and names them ([`DROPPED`]); its tree is its parent's.
const TRIM_TRAILER: &str = "Rewind-Trim: yes";
/// In a redo's commit: the undo commit it redid.
const REDID: &str = "Rewind-Redid: ";
/// In every commit of a turn, an undo or a redo: the turn (an undo's or redo's: the one it
/// ran from), percent-encoded.
const TURN: &str = "Rewind-Turn: ";
/// In an undo's commit: a turn it marked rolled back (percent-encoded).
const ROLLED_BACK: &str = "Rewind-Rolled-Back: ";
/// In a redo's commit: a turn it marked no longer rolled back (percent-encoded). A redo that
/// left files alone redoes no undo whole, yet the turns it gave back are no undo's to hold.
const GAVE_BACK: &str = "Rewind-Gave-Back: ";
/// In an end commit that follows the session's undos or redos made while the turn was open:
/// the turn's begin commit (otherwise the end commit's parent).
const BEGIN: &str = "Rewind-Begin: ";
/// In a redo's commit: an open turn it gave back, and the project as the redo found it.
const REOPENED: &str = "Rewind-Reopened: ";
/// In a redo's commit (since stop 49): an open turn it gave back, and the turn's new "before":
/// the project as the redo found it, but where the redo wrote, as the turn had found it (see
/// [`Locked::reopened_before`]). Without it, the turn's "before" is its `Rewind-Reopened:` tree.
const REOPENED_BEFORE: &str = "Rewind-Reopened-Before: ";
/// In an undo's commit: a path it left alone (someone else's, or in the way).
const LEFT_ALONE: &str = "Rewind-Left-Alone: ";
/// In a begin commit (since stop 49): a path the session's turn left open there changed, and
/// whose it was then (`<turn> <origin> <path>`): what it did is told as it was when its time
/// ended, as an end commit tells it, whatever other sessions announce later (r87 (1)).
const LEFT_OPEN_FILE: &str = "Rewind-Left-Open-File: ";
/// In an undo's commit (since stop 49): the same for the open turn it rolled back (r87 (2)).
const ROLLED_BACK_FILE: &str = "Rewind-Rolled-Back-File: ";
/// In an undo's commit: a path it wrote with a merge that kept someone else's edits (so a
/// later undo treats it as someone else's too).
const MERGED: &str = "Rewind-Merged: ";
/// In an undo's commit: the snapshot taken just before it (what a redo brings back).
const UNDO_POINT: &str = "Rewind-Undo-Point: ";
/// In a redo's commit (since stop 42): the snapshot taken just before it (its `undo`), which
/// lives as a restore's does.
const REDO_POINT: &str = "Rewind-Redo-Point: ";
/// In an undo's or redo's commit: a path it wrote or deleted (percent-encoded). A redo brings
/// back what its undo changed; an undo of another session's turn leaves these paths alone.
const CHANGED: &str = "Rewind-Changed: ";
/// In an undo's or redo's commit written before its first file changed (see
/// [`Locked::apply_recorded`]), until the one after replaces it. Its tree is what the run
/// planned to leave (what its redo, or the next redo, starts from); found on the chain, the run
/// was stopped, and what the session left is still the tree before it.
const UNFINISHED: &str = "Rewind-Unfinished: yes";
/// In an unfinished undo's or redo's commit (since stop 43): the kernel's clock (seconds and
/// nanoseconds since 1970, not the store's clock) just before its first change. A file whose
/// change time (`ctime`, which no program can set back) is older was not touched by it, nor
/// after it.
const UNFINISHED_SINCE: &str = "Rewind-Unfinished-Since: ";
/// In an unfinished undo's or redo's commit (since stop 44): the run's token, by which the store
/// says what it planned to write or delete and did not ([`Store::not_done_by_run`]).
const UNFINISHED_RUN: &str = "Rewind-Unfinished-Run: ";

/// The key of an end commit's lines, one per file of the turn:
/// `<status> <origin> +<additions> -<deletions> <path>`.
const FILE_LINE: &str = "Rewind-File: ";
/// The key of the lines naming each file of a turn that is binary on either side (since stop
/// 60; an end commit before that names none, and reads its files as text).
const BINARY_FILE: &str = "Rewind-Binary-File: ";
/// The key of the lines naming each path a turn announced with `track_file`.
const ANNOUNCED: &str = "Rewind-Announced: ";
/// The trailer of end commits whose file lines say whose each change is (older ones have
/// no file lines: every file of theirs is unannounced).
const ATTRIBUTED: &str = "Rewind-Attribution: 1";

/// The rest of each line of commit message `message` that starts with `key`.
fn lines_with<'m>(message: &'m [u8], key: &'static str) -> impl Iterator<Item = &'m [u8]> + 'm {
    message
        .lines()
        .filter_map(move |line| line.strip_prefix(key.as_bytes()))
}

/// The turns an undo's `message` names as rolled back.
fn rolled_back_in(message: &[u8]) -> Vec<String> {
    turns_in(message, ROLLED_BACK)
}

/// Whose each path of the turn encoded as `turn` was when its time ended, as the
/// `Rewind-Left-Open-File:` and `Rewind-Rolled-Back-File:` lines of a chain commit's `message`
/// tell it (empty when they do not).
fn told_in(message: &[u8], turn: &str) -> HashMap<BString, Origin> {
    let mut told = HashMap::new();
    let lines = lines_with(message, LEFT_OPEN_FILE).chain(lines_with(message, ROLLED_BACK_FILE));
    for line in lines {
        let mut words = line.splitn_str(3, " ");
        let (Some(of), Some(word), Some(path)) = (words.next(), words.next(), words.next()) else {
            continue;
        };
        if let (true, Some(origin), Some(path)) = (
            of == turn.as_bytes(),
            Origin::parse(word),
            decode_path(path),
        ) {
            told.insert(path, origin);
        }
    }
    told
}

/// The open turns a redo's `message` says it gave back (reopened).
fn reopened_in(message: &[u8]) -> impl Iterator<Item = String> + '_ {
    lines_with(message, REOPENED)
        .filter_map(|rest| decode_id(rest.split_once_str(" ")?.0.to_str().ok()?))
}

/// What [`Locked::undos_not_redone`] calls with each undo commit not redone: the commit, its
/// message, and the turns redos after it gave back; it goes on while this returns true.
type UndoVisitor<'a> = dyn FnMut(ObjectId, &[u8], &HashSet<String>) -> bool + 'a;

/// The turns named on the `key` lines of a commit's `message`.
fn turns_in(message: &[u8], key: &'static str) -> Vec<String> {
    lines_with(message, key)
        .filter_map(|t| decode_id(t.to_str().ok()?))
        .collect()
}

/// The "before" a redo's `message` gave the turn encoded as `turn` when it reopened it, if it
/// did.
fn reopening_in(message: &[u8], turn: &str) -> Option<ObjectId> {
    let named = |key| {
        lines_with(message, key)
            .filter_map(|rest| rest.split_once_str(" "))
            .find(|(name, _)| *name == turn.as_bytes())
            .and_then(|(_, hex)| ObjectId::from_hex(hex).ok())
    };
    named(REOPENED_BEFORE).or_else(|| named(REOPENED))
}

/// The tree a redo's `message` names on its first `key` line (`Rewind-Reopened:` or
/// `Rewind-Reopened-Before:`), for whichever turn.
fn reopened_tree_in(message: &[u8], key: &'static str) -> Option<ObjectId> {
    lines_with(message, key)
        .filter_map(|rest| ObjectId::from_hex(rest.split_once_str(" ")?.1).ok())
        .next()
}

/// The refusal to work in turn `turn` of `session`, left open when the session began another.
fn superseded_error(session: &str, turn: &str) -> Error {
    Error::Turn {
        session: session.into(),
        turn: turn.into(),
        reason: "was left open when its session began another turn, and ended there",
    }
}

/// The object `message` names first under `key` (a point, or the undo a redo redid), if any.
fn id_in(message: &[u8], key: &'static str) -> Option<ObjectId> {
    lines_with(message, key)
        .next()
        .and_then(|hex| ObjectId::from_hex(hex).ok())
}

/// Whether `message` is an undo's written before its files changed whose run was stopped.
fn is_unfinished(message: &[u8]) -> bool {
    message.lines().any(|line| line == UNFINISHED.as_bytes())
}

/// The lines marking the record of run `token`, an undo or redo, written before its first
/// change: unfinished, since the kernel's clock now.
fn unfinished_lines(token: &str) -> String {
    let mut lines = format!("{UNFINISHED}\n{UNFINISHED_RUN}{token}\n");
    if let Ok(since) = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH) {
        let (secs, nanos) = (since.as_secs(), since.subsec_nanos());
        lines.push_str(&format!("{UNFINISHED_SINCE}{secs}.{nanos:09}\n"));
    }
    lines
}

/// The project as the undo or redo whose record is `message` found it: its undo (or redo) point.
fn point_of_run(message: &[u8]) -> Option<ObjectId> {
    match message.contains_str(REDO_TRAILER) {
        true => id_in(message, REDO_POINT),
        false => id_in(message, UNDO_POINT),
    }
}

/// The `Rewind-Unfinished-Since:` time of `message`, if it names one.
fn unfinished_since(message: &[u8]) -> Option<SystemTime> {
    let value = lines_with(message, UNFINISHED_SINCE)
        .next()?
        .to_str()
        .ok()?;
    let (secs, nanos) = value.split_once('.')?;
    let since = Duration::new(secs.parse().ok()?, nanos.parse().ok()?);
    SystemTime::UNIX_EPOCH.checked_add(since)
}

/// What an undo or redo found at a path, and what it left there.
type FoundAndLeft = (Option<Side>, Option<Side>);

/// The paths a session's turns before a range undo's changed, read the first time asked.
struct EarlierPaths<'r> {
    records: &'r [Record],
    paths: Option<HashSet<BString>>,
}

impl EarlierPaths<'_> {
    /// Whether one of the turns changed `path`. Costs, the first time, a tree diff per turn.
    fn changed(&mut self, store: &Store, path: &BString) -> Result<bool> {
        if self.paths.is_none() {
            let (repo, mut paths) = (store.repo(), HashSet::new());
            for record in self.records {
                if let Some(after) = record.after {
                    let changes = tree_changes(&repo, store.reads(), record.before, after)?;
                    paths.extend(changes.into_iter().map(|c| c.path));
                }
            }
            self.paths = Some(paths);
        }
        Ok(self
            .paths
            .as_ref()
            .is_some_and(|paths| paths.contains(path)))
    }
}

/// A session's turns rolled back in part ([`Locked::turns_undone_in_part`]): an undo of one
/// takes it again, and what they left in the project is still their work for a redo.
#[derive(Default)]
struct UndoneInPart {
    /// Rolled back by an undo that left files alone (`undo --last` takes it again with `force`):
    /// each with the paths that undo left alone.
    left_alone: HashMap<String, HashSet<BString>>,
    /// Rolled back by an undo stopped before it finished (killed): its files may still hold
    /// the turn's work.
    stopped: HashSet<String>,
    /// Every turn an undo rolled back (given back since or not: the marks tell): the last such
    /// undo commit, and its undo point (where a turn it rolled back while open ended).
    rolled_back_by: HashMap<String, (ObjectId, Option<ObjectId>)>,
}

impl UndoneInPart {
    fn contains(&self, turn: &str) -> bool {
        self.left_alone.contains_key(turn) || self.stopped.contains(turn)
    }

    /// Of rolled-back `turn`'s paths, those still its work in the project: `Some(None)` for
    /// all (its undo was stopped), `Some(Some(paths))` for those its undo left alone, `None`
    /// for none (its undo took it all back).
    #[allow(clippy::option_option)]
    fn still_its_work(&self, turn: &str) -> Option<Option<&HashSet<BString>>> {
        match self.stopped.contains(turn) {
            true => Some(None),
            false => self.left_alone.get(turn).map(Some),
        }
    }

    /// For `turn`, rolled back while open: the undo commit that rolled it back last, and its
    /// undo point (where the turn ended).
    fn ended_at_undo(&self, turn: &str) -> Option<(ObjectId, ObjectId)> {
        let &(undo, point) = self.rolled_back_by.get(turn)?;
        Some((undo, point?))
    }
}

/// `Rewind-Announced:` lines for `paths`.
fn announced_lines<'a>(paths: impl IntoIterator<Item = &'a BString>) -> String {
    let mut out = String::new();
    for path in paths {
        out.push_str(ANNOUNCED);
        crate::snapshot::visibility::encode_path(&mut out, path);
        out.push('\n');
    }
    out
}

/// The paths named by the `Rewind-Announced:` lines of commit message `message`.
fn parse_announced(message: &[u8]) -> Vec<BString> {
    lines_with(message, ANNOUNCED)
        .filter_map(crate::snapshot::visibility::decode_path)
        .collect()
}

/// `Rewind-File:` lines for `files` (one per path: renames are paired when a summary is
/// read), and the trailer that says they are there.
fn file_lines(files: &[TurnFile]) -> String {
    let mut out = String::new();
    for file in files {
        let status = match file.status {
            Status::Added => "added",
            Status::Deleted => "deleted",
            Status::Modified => "modified",
            Status::Renamed => unreachable!("end_turn stores files before pairing renames"),
        };
        out.push_str(&format!(
            "{FILE_LINE}{status} {} +{} -{} ",
            file.origin.as_str(),
            file.additions,
            file.deletions
        ));
        crate::snapshot::visibility::encode_path(&mut out, &file.file);
        out.push('\n');
    }
    for file in files.iter().filter(|file| file.binary) {
        out.push_str(BINARY_FILE);
        crate::snapshot::visibility::encode_path(&mut out, &file.file);
        out.push('\n');
    }
    out.push_str(ATTRIBUTED);
    out.push('\n');
    out
}

/// The files an end commit's `Rewind-File:` lines name; `None` for an end commit written
/// before turns recorded them.
fn parse_files(message: &[u8]) -> Option<Vec<TurnFile>> {
    if !message.lines().any(|l| l == ATTRIBUTED.as_bytes()) {
        return None;
    }
    let binary: HashSet<BString> = lines_with(message, BINARY_FILE)
        .filter_map(decode_path)
        .collect();
    let parse = |rest: &[u8]| -> Option<TurnFile> {
        let mut words = rest.splitn_str(5, " ");
        let status = match words.next()? {
            b"added" => Status::Added,
            b"deleted" => Status::Deleted,
            b"modified" => Status::Modified,
            _ => return None,
        };
        let origin = Origin::parse(words.next()?)?;
        let count = |word: Option<&[u8]>, sign: &[u8]| -> Option<usize> {
            word?.strip_prefix(sign)?.to_str().ok()?.parse().ok()
        };
        let additions = count(words.next(), b"+")?;
        let deletions = count(words.next(), b"-")?;
        let file = crate::snapshot::visibility::decode_path(words.next()?)?;
        Some(TurnFile {
            binary: binary.contains(&file),
            file,
            status,
            old_file: None,
            similarity: None,
            additions,
            deletions,
            origin,
        })
    };
    Some(lines_with(message, FILE_LINE).filter_map(parse).collect())
}

/// What a commit on a session's chain records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChainKind {
    /// A turn's begin: its tree is the "before".
    Begin,
    /// A turn's end: its tree is the "after".
    End,
    /// An undo or a redo: its tree is the project as it left it.
    Undo,
    /// A trim's, after the last commits it dropped: it names them, and changes nothing.
    Trim,
}

impl ChainKind {
    fn of(message: &[u8]) -> ChainKind {
        let trailer = |t: &str| message.lines().any(|l| l == t.as_bytes());
        if trailer(TRIM_TRAILER) {
            ChainKind::Trim
        } else if trailer(UNDO_TRAILER) || trailer(REDO_TRAILER) {
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

pub(crate) fn turn_ref(session: &str, kind: &str, turn: &str) -> Result<String> {
    session_ref(session, &format!("{kind}/{}", ref_component("turn", turn)?))
}

impl Store {
    /// Begin a turn: snapshot the project as the turn's "before". Beginning an open turn again
    /// is a no-op; beginning an ended turn is an error. Returns the "before" and what that
    /// snapshot left out (an undo cannot bring those files back).
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), &rewind::OpenOptions::new("/tmp/rewind"))?;
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
        self.begin_turn_with(session, turn, &BeginOptions::default())
    }

    /// [`begin_turn`](Self::begin_turn), with the runtime's metadata stored with the turn (to
    /// rewind code and conversation together). Beginning an open turn again changes nothing,
    /// its metadata included.
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), &rewind::OpenOptions::new("/tmp/rewind"))?;
    /// let meta = [("message_id".to_string(), "msg_01".to_string())].into();
    /// store.begin_turn_with("chat-42", "3", &rewind::BeginOptions::meta(meta))?;
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn begin_turn_with(
        &self,
        session: &str,
        turn: &str,
        options: &BeginOptions,
    ) -> Result<TurnStart> {
        let reference = turn_ref(session, "turns", turn)?;
        let meta = meta_lines(&options.meta)?;
        let locked = self.lock()?;
        Ok(locked.begin(session, turn, &reference, &meta)?.0)
    }

    /// Announce that the agent is about to edit `path` (a file, or a directory: everything
    /// below it) in this turn. Begins the turn if needed (a snapshot of the whole project, the
    /// turn's "before", so every later first edit of another file is covered as well).
    ///
    /// Announcing matters when turns of several sessions run at once: a change made while
    /// another session's turn was open belongs to the session that announced the path, and
    /// is *shared* (left alone by undo unless forced) when none or several did. A runtime that
    /// runs one session at a time needs no announcements: every change is its turn's.
    /// Safe from several threads and processes at once.
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), &rewind::OpenOptions::new("/tmp/rewind"))?;
    /// store.track_file("chat-42", "3", "src/lib.rs")?; // before the agent's first edit of it
    /// // ... edit src/lib.rs ...
    /// store.end_turn("chat-42", "3")?;
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn track_file(&self, session: &str, turn: &str, path: impl AsRef<Path>) -> Result<()> {
        let named = path.as_ref();
        let path = self.project_path(named)?;
        // Announcing the whole project would claim every change, another session's too.
        if path.is_empty() {
            return Err(Error::BadPath {
                path: named.to_owned(),
                reason: "is the whole project: announce the files the agent edits",
            });
        }
        let reference = turn_ref(session, "turns", turn)?;
        let locked = self.lock()?;
        let (_, begin) = locked.begin(session, turn, &reference, "")?;
        locked.announce(session, turn, begin, path)
    }
}

impl Locked<'_> {
    /// Add `path` to what open turn `turn` announced: `refs/rewind/sessions/<S>/announced/<T>`
    /// points to a commit (child of the begin commit `begin`) naming every path announced so
    /// far; its end commit takes them over. Costs a commit read, and a commit write when `path`
    /// is new.
    fn announce(&self, session: &str, turn: &str, begin: ObjectId, path: BString) -> Result<()> {
        let reference = turn_ref(session, "announced", turn)?;
        let repo = self.repo();
        let mut paths: BTreeSet<BString> = match self.ref_target(&reference)? {
            Some(commit) => parse_announced(commit_and_tree(&repo, commit)?.0.message_raw_sloppy())
                .into_iter()
                .collect(),
            None => BTreeSet::new(),
        };
        if !paths.insert(path) {
            return Ok(());
        }
        let (_, tree) = commit_and_tree(&repo, begin)?;
        let message = format!(
            "rewind: files announced in turn {turn:?} of session {session:?}\n\n{}",
            announced_lines(&paths)
        );
        self.commit(&reference, &message, tree, [begin])?;
        Ok(())
    }
}

impl Store {
    /// The paths turn `record` of `session` announced: from its end commit, or while it is open
    /// from its announcements ref. Costs a commit read.
    fn announced_by(&self, session: &str, record: &Record) -> Result<Vec<BString>> {
        let commit = match record.ended_at {
            Some(_) => Some(record.commit),
            None => self.ref_target(&turn_ref(session, "announced", &record.turn)?)?,
        };
        match commit {
            Some(commit) => Ok(parse_announced(
                commit_and_tree(&self.repo(), commit)?
                    .0
                    .message_raw_sloppy(),
            )),
            None => Ok(Vec::new()),
        }
    }
}

impl Locked<'_> {
    /// `key` lines (`Rewind-Left-Open-File:`, `Rewind-Rolled-Back-File:`) for the turn of
    /// `session` open on its chain at `head`, whose time ends at snapshot `now` (the next
    /// turn's "before", or the point of the undo that rolls it back): what it changed up to
    /// then, each path with whose it is. Empty when no turn is open there. Costs
    /// [`Store::attribute`] for that turn.
    fn told_lines(
        &self,
        key: &str,
        session: &str,
        head: Option<ObjectId>,
        now: ObjectId,
    ) -> Result<String> {
        let Some(record) = self.turn_open_at(head)? else {
            return Ok(String::new());
        };
        let turn = encode_id("turn", &record.turn)?;
        let changes = tree_changes(&self.repo(), self.reads(), record.before, now)?;
        let mut lines = String::new();
        for (change, origin) in self.attribute(session, &record, changes, now)? {
            lines.push_str(&format!("{key}{turn} {} ", origin.as_str()));
            crate::snapshot::visibility::encode_path(&mut lines, &change.path);
            lines.push('\n');
        }
        Ok(lines)
    }

    /// Begin the turn unless it is open already; its start and its begin commit.
    /// `meta`: the turn's `Rewind-Meta:` lines.
    fn begin(
        &self,
        session: &str,
        turn: &str,
        reference: &str,
        meta: &str,
    ) -> Result<(TurnStart, ObjectId)> {
        if let Some(commit) = self.ref_target(reference)? {
            let record = self.record(commit)?;
            let rolled_back = self
                .ref_target(&turn_ref(session, "rolled-back", turn)?)?
                .is_some();
            return match record.ended_at {
                // An undo took the open turn back: it is over (announcing into it would count
                // for nothing).
                None if rolled_back => Err(Error::Turn {
                    session: session.into(),
                    turn: turn.into(),
                    reason: "was undone while open; begin a new turn",
                }),
                None if self.superseded(session, commit)? => Err(superseded_error(session, turn)),
                None => Ok((
                    TurnStart {
                        before: SnapshotId(record.before),
                        skipped: Vec::new(),
                    },
                    commit,
                )),
                Some(_) => Err(Error::Turn {
                    session: session.into(),
                    turn: turn.into(),
                    reason: "has ended already",
                }),
            };
        }
        let snapshot = self.track(&TrackOptions::default())?;
        let head = session_ref(session, "head")?;
        let parent = self.ref_target(&head)?;
        let left_open = self.told_lines(LEFT_OPEN_FILE, session, parent, snapshot.hash.0)?;
        // What the "before" left out is recorded with it (undo never deletes those paths), and
        // which files were private (undo gives them back as private).
        let message = format!(
            "rewind: begin turn {turn:?} of session {session:?}\n\n{}{}{left_open}{meta}{}",
            crate::snapshot::visibility::record_lines(&snapshot),
            self.other_heads_lines(session)?,
            trailers(session, turn, self.now()?, None, None)?
        );
        let commit = self.commit(&head, &message, snapshot.hash.0, parent)?;
        self.set_ref(reference, commit, "rewind: begin turn")?;
        Ok((
            TurnStart {
                before: snapshot.hash,
                skipped: snapshot.skipped,
            },
            commit,
        ))
    }
}

impl Store {
    /// End a turn: snapshot the "after", record the turn as a commit, and return what changed in
    /// it: everything, including edits by shell commands, formatters and generators, each
    /// file with its [`Origin`]. While another session's turn was open too, a change belongs
    /// to the session that announced its path (another's is left out of this turn), and one
    /// announced by neither (or both) is shared.
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), &rewind::OpenOptions::new("/tmp/rewind"))?;
    /// store.begin_turn("chat-42", "3")?;
    /// // ... the agent works ...
    /// let end = store.end_turn("chat-42", "3")?;
    /// println!("{} -> {}: {} files changed", end.before, end.after, end.files.len());
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn end_turn(&self, session: &str, turn: &str) -> Result<TurnEnd> {
        self.end_turn_with(session, turn, &SummaryOptions::default())
    }

    /// [`Self::end_turn`], its files listed as `options` says. The turn's record holds each
    /// path alone either way.
    pub fn end_turn_with(
        &self,
        session: &str,
        turn: &str,
        options: &SummaryOptions,
    ) -> Result<TurnEnd> {
        let reference = turn_ref(session, "turns", turn)?;
        let locked = self.lock()?;
        let begin = locked
            .ref_target(&reference)?
            .ok_or_else(|| self.missing_turn(session, turn))?;
        let record = locked.as_reopened(session, locked.record(begin)?)?;
        if record.ended_at.is_some() {
            return Err(Error::Turn {
                session: session.into(),
                turn: turn.into(),
                reason: "has ended already",
            });
        }
        // Left open when its session began another: it ended there, and what changed since
        // is the later turns' and others'.
        if locked.superseded(session, record.begin)? {
            return Err(superseded_error(session, turn));
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
        let snapshot = locked.track(&TrackOptions::default())?;
        let after = snapshot.hash.0;
        let repo = locked.repo();
        let (files, changes) = self.own_files(session, &record, after)?;
        let (additions, deletions) = totals(&files);
        let mut message = format!(
            "rewind: turn {turn:?} of session {session:?}: {} files, +{additions} -{deletions}\n\n",
            files.len()
        );
        message.push_str(&file_lines(&files));
        message.push_str(&announced_lines(&locked.announced_by(session, &record)?));
        message.push('\n');
        message.push_str(&locked.other_heads_lines(session)?);
        message.push_str(&meta_lines(&record.meta)?);
        message.push_str(&trailers(
            session,
            turn,
            record.started_at,
            Some((locked.now()?, record.before)),
            Some((files.len(), additions, deletions)),
        )?);
        // The session's own undos and redos made while the turn was open stay on its chain:
        // the end commit follows them (naming its begin), so the chain stays one line.
        let head = session_ref(session, "head")?;
        let head_now = locked.ref_target(&head)?;
        let parent = match head_now {
            Some(last) if last != begin && locked.only_undos_back_to(last, begin)? => {
                message.push_str(&format!("{BEGIN}{begin}\n"));
                last
            }
            _ => begin,
        };
        let commit = locked.commit(&reference, &message, after, [parent])?;
        if head_now == Some(parent) {
            locked.set_ref(&head, commit, "rewind: end turn")?;
        }
        // The end commit names what the turn announced (and its attribution is done).
        locked.delete_ref(&turn_ref(session, "announced", turn)?)?;
        locked.delete_ref(&turn_ref(session, "blind", turn)?)?;
        Ok(TurnEnd {
            before: SnapshotId(record.before),
            after: SnapshotId(after),
            files: summarized(&repo, files, &changes, options)?,
            skipped: snapshot.skipped,
        })
    }

    /// The files the turn of `record` changed from its "before" to `after`, each with its
    /// [`Origin`] (what others changed meanwhile left out), and those changes. Costs the turn's
    /// attribution and a line count per file.
    fn own_files(
        &self,
        session: &str,
        record: &Record,
        after: ObjectId,
    ) -> Result<(Vec<TurnFile>, Vec<Change>)> {
        let repo = self.repo();
        let changes = tree_changes(&repo, self.reads(), record.before, after)?;
        let (mut files, mut own) = (Vec::new(), Vec::new());
        for (change, origin) in self.attribute(session, record, changes, after)? {
            if origin != Origin::Other {
                files.push(turn_file(&repo, plain(change.clone()), origin)?);
                own.push(change);
            }
        }
        Ok((files, own))
    }

    /// Every turn of `session` (or of every session): each session's in the order of its chain,
    /// sessions interleaved by start time.
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), &rewind::OpenOptions::new("/tmp/rewind"))?;
    /// for turn in store.turns(Some("chat-42"))? {
    ///     println!("{} {} +{} -{} rolled back: {}", turn.turn, turn.files, turn.additions, turn.deletions, turn.rolled_back);
    /// }
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn turns(&self, session: Option<&str>) -> Result<Vec<Turn>> {
        self.turns_with(session, &SummaryOptions::default())
    }

    /// [`Self::turns`], their files listed as `options` says. With renames, an ended turn's
    /// `files`, `additions` and `deletions` count its rows (a rename once, with the pair's
    /// counts). Costs, per ended turn that deleted and added files, the renames' search
    /// between its before and after.
    pub fn turns_with(&self, session: Option<&str>, options: &SummaryOptions) -> Result<Vec<Turn>> {
        let mut turns = Vec::new();
        let sessions = match session {
            // An unknown session is `not_found`, as in every other operation.
            Some(name) => vec![(name.to_owned(), self.session_records(name)?)],
            None => self.sessions(None)?,
        };
        let repo = self.repo();
        for (session, records) in sessions {
            let stopped = self.turns_undone_in_part(&session)?.stopped;
            for mut record in records {
                let rolled_back = self
                    .ref_target(&turn_ref(&session, "rolled-back", &record.turn)?)?
                    .is_some();
                // An open turn a redo gave back starts where the redo found the project.
                if record.ended_at.is_none() && !rolled_back {
                    record = self.as_reopened(&session, record)?;
                }
                // One rolled back while open (its session's latest) is over: it ended where
                // that undo found the project, and started where a redo last reopened it.
                if record.after.is_none() && rolled_back {
                    let (reopened, ended) = self.left_open_span(&session, &record)?;
                    record.after = ended;
                    record.before = reopened.unwrap_or(record.before);
                }
                // Listed open (no "after") until it ends. One left open when its session began
                // another ended where that one began, or where an undo rolled it back before:
                // listed with that "after" and no end time (its runtime never ended it).
                let left_open = record.after.filter(|_| record.ended_at.is_none());
                if record.ended_at.is_none() {
                    record.after = left_open;
                }
                let changed = match record.after {
                    None => Vec::new(),
                    Some(after) if left_open.is_some() => {
                        let (files, changes) = self.own_files(&session, &record, after)?;
                        summarized(&repo, files, &changes, options)?
                    }
                    Some(after) => {
                        let (object, _) = commit_and_tree(&repo, record.commit)?;
                        let files = match parse_files(object.message_raw_sloppy()) {
                            Some(files) => files,
                            None => self.files_between(record.before, after)?,
                        };
                        let changes = stored_changes(&repo, &files, record.before, after)?;
                        summarized(&repo, files, &changes, options)?
                    }
                };
                let (mut files, mut additions, mut deletions) =
                    (record.files, record.additions, record.deletions);
                if record.after.is_some() {
                    files = changed.len();
                    (additions, deletions) = totals(&changed);
                }
                let undo_stopped = rolled_back && stopped.contains(&record.turn);
                turns.push(Turn {
                    session: record.session,
                    turn: record.turn,
                    started_at: record.started_at,
                    ended_at: record.ended_at,
                    before: SnapshotId(record.before),
                    after: record.after.map(SnapshotId),
                    files,
                    additions,
                    deletions,
                    changed,
                    rolled_back,
                    undo_stopped,
                    meta: record.meta,
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
    /// turns (and undos) left there, that changed between two turns of the range, or that
    /// another session's turn changed since the range began (even back to what the session
    /// left). A path
    /// the turns created but the "before" snapshot could not see (ignored then, inside a
    /// nested repository, left out for size or type) is `kept`, never deleted. Marks the
    /// undone turns rolled back, and records the undo on the session's chain.
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), &rewind::OpenOptions::new("/tmp/rewind"))?;
    /// // Undo turn 3 and everything after it; files edited since by the user are left alone.
    /// let options = rewind::UndoOptions { turn: Some("3".into()), ..Default::default() };
    /// let outcome = store.undo("chat-42", &options)?;
    /// println!("conflicts: {:?}; redo with restore({})", outcome.conflicts, outcome.undo);
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn undo(&self, session: &str, options: &UndoOptions) -> Result<RestoreOutcome> {
        let (from_turn, force) = (options.turn.as_deref(), options.force);
        let only = options
            .file
            .as_deref()
            .map(|f| self.project_path(f))
            .transpose()?;
        let locked = self.lock()?;
        let records = locked.session_records(session)?;
        let start = match from_turn {
            Some(turn) => records.iter().position(|r| r.turn == turn),
            None => (!records.is_empty()).then_some(0),
        }
        .ok_or_else(|| self.missing_turn(session, from_turn.unwrap_or_default()))?;
        // An undo that leaves a later turn of the session open would count as that turn's
        // own work when it ends (and come back with its undo): only an undo of the open turn
        // whole (from it or an earlier one, every file) may run while it is open.
        let whole = only.is_none() && (!options.only || start + 1 == records.len());
        if let Some(open) = records.iter().find(|r| r.after.is_none()) {
            let rolled_back = locked
                .ref_target(&turn_ref(session, "rolled-back", &open.turn)?)?
                .is_some();
            if !whole && !rolled_back {
                return Err(Error::Turn {
                    session: session.into(),
                    turn: open.turn.clone(),
                    reason: "is open: end it before undoing part of the session",
                });
            }
        }
        if options.only {
            return locked.undo_alone(session, &records[start], only, options);
        }
        locked.refuse_undone_with_an_earlier_turn(session, &records, start)?;
        let undone = &records[start..];
        let (current, index) = locked.current(options.dry_run)?;
        let repo = locked.repo();
        let mut touched: Vec<BString> = Vec::new();
        // Shared paths (changed while another session's turn was open, announced by neither
        // or both) are someone else's as much as the session's.
        let mut during = HashSet::new();
        // For each path, the undone turns that changed it (by index in `undone`).
        let mut changed_by: HashMap<BString, Vec<usize>> = HashMap::new();
        for (index, record) in undone.iter().enumerate() {
            for (path, origin) in locked.turn_paths(session, record, current)? {
                // Another session's (announced while the turn was open): left alone, also
                // where an earlier undone turn changed it.
                if origin == Origin::Other {
                    during.insert(path);
                    continue;
                }
                if origin == Origin::Shared {
                    during.insert(path.clone());
                }
                changed_by.entry(path.clone()).or_default().push(index);
                touched.push(path);
            }
        }
        touched.sort_unstable();
        touched.dedup();
        // (A turn a redo gave back starts from the project as the redo found it.)
        let first = locked.as_reopened(session, undone[0].clone())?;
        let target = first.before;
        let differing = tree_changes(&repo, self.reads(), current, target)?;
        // A file the turns moved is undone as one: both names, or neither (the moves are the
        // turns' own, whatever stands at either name now).
        let last_after = undone[undone.len() - 1].after.unwrap_or(current);
        let moves = tree_changes(&repo, self.reads(), target, last_after)?;
        let mut partners = rename_partners(&repo, &moves, &touched, false)?;
        // And each turn's own, as `git diff -B -M` pairs them (files swapped; `mv f g` and a new
        // `f`), as an undo of one turn alone does: a file someone made between turns that a
        // later turn moved has no name in the target, and a rewritten name pairs with no other
        // name there (r111 (1): one name deleted or written, the other left alone).
        for record in undone {
            let after = record.after.unwrap_or(current);
            let moved = match (record.before, after) == (target, last_after) {
                true => moves.clone(), // (one turn undone: the diff above)
                false => tree_changes(&repo, self.reads(), record.before, after)?,
            };
            for (a, b) in rename_partners(&repo, &moved, &touched, true)? {
                link(&mut partners, &a, &b);
            }
        }
        keep_below(&mut touched, only.as_ref(), &partners, session)?;
        let mut chain = locked.chain_since(session, undone[0].begin)?;
        // A first turn a redo reopened starts where that redo found the project, the target:
        // what changed before, someone else's edits while the turn was rolled back too, is in
        // the target already. The chain starts there: what the session left just before that
        // redo, then the redo's own changes. (The begin commit is the chain's first link.)
        if let Some(at) = chain
            .iter()
            .rposition(|l| l.reopened_before == Some(target))
        {
            (chain[at].found, chain[at].reopened_before) = (None, None);
            chain.drain(..at.saturating_sub(1));
            let start = &mut chain[0];
            (start.kind, start.own, start.found) = (ChainKind::Begin, None, None);
            (start.reopened_before, start.reopens) = (None, false);
            start.merged.clear();
        }
        let undone_turns = undone.iter().map(|r| r.turn.as_str()).collect();
        let about = (&touched[..], &undone_turns, &records[..start]);
        let (mut others, unknown) = locked.changed_by_others(&chain, current, about)?;
        // Changed by someone else while a turn was open: their edit is in the turn's "after",
        // so no merge can tell it from the turn's (a conflict, never mergeable); so is a
        // file a turn's "after" left out (said as `unseen`).
        during.extend(unknown.iter().cloned());
        for record in undone {
            during.extend(locked.changed_by_other_sessions(session, record, current)?);
        }
        // (Where the project holds what the undo would write already, there is nothing to
        // keep: a stopped undo's own write.)
        let stopped = locked.changed_since_stopped_undo(session, undone, current)?;
        during.extend(
            differing
                .iter()
                .filter(|c| stopped.contains(&c.path))
                .map(|c| c.path.clone()),
        );
        // A path another session's turn or redo made its own since the undone turns began is
        // theirs too where it holds again what the session left (r80 (6): the user's edit, then
        // their turn putting back the session's bytes): no merge can tell their work from none.
        // (Where it holds something else, it is changed by someone else, above.)
        let theirs_since = locked.changed_by_other_sessions_since(session, &undone[0], current)?;
        during.extend(
            theirs_since
                .into_iter()
                .filter(|path| changed_by.contains_key(path) && !others.contains(path)),
        );
        others.extend(during.iter().cloned());
        let mut d = Decisions::default();
        // Paths someone else changed too: merged (with `merge`), or a conflict that says
        // whether a merge would be clean. Merged texts go to the store only when written.
        let merges = match options.merge && !options.dry_run {
            true => locked.repo(),
            false => locked.repo().with_object_memory(),
        };
        let mut merger = TurnMerger::new(&merges, undone, current);
        let differs: HashSet<BString> = differing.iter().map(|c| c.path.clone()).collect();
        // Paths the turns changed that no snapshot sees now (ignored since, say) but that are
        // on disk: left as they are, and said so. (A directory the project's snapshot holds is
        // seen: its files are paths of their own, r110.)
        let mut out_of_view = Vec::new();
        // A file the turns deleted that the target could not see (ignored then): it may have
        // been made while ignored, within the turns, so it stays deleted, and the user is told
        // which "before" holds it (r116 (1)).
        let mut target_sight = locked.sight_of_before(session, &first)?;
        let mut stays_deleted = Vec::new();
        for path in &touched {
            if differs.contains(path)
                || entry_at(&repo, current, path.as_ref())?.is_some()
                || side_at(&repo, target, path.as_ref())?.is_some()
            {
                continue;
            }
            // (An empty directory holds no byte to keep: a write over its parent may take it,
            // r113 (4).)
            if locked.on_disk(path) && !locked.is_empty_dir(path) {
                out_of_view.push(path.clone());
            } else if !locked.on_disk(path) && !target_sight.can_see(&repo, path.as_ref())? {
                for record in undone.iter().rev() {
                    if side_at(&repo, record.before, path.as_ref())?.is_some() {
                        stays_deleted.push((path.clone(), record.turn.clone(), record.before));
                        break;
                    }
                }
            }
        }
        // A later undone turn whose "before" lacks a path it could not see (ignored then) may
        // have met the file on disk: deleting or overwriting it would take what no turn is
        // known to have made (kept, or a conflict).
        let mut later_sights = Vec::new();
        for record in &undone[1..] {
            later_sights.push((record.before, locked.sight_of_before(session, record)?));
        }
        // A path someone else changed too: merged (with `merge`), else a conflict that says
        // whether a merge would be clean. Also when the project holds what the target does: a
        // file the user made between turns that a later turn deleted comes back by a merge.
        // With `force`, a path left alone gets the target (plain undo) after all.
        let mut around_others = |d: &mut Decisions,
                                 path: &BString,
                                 now: Option<Side>,
                                 target: Option<Side>|
         -> Result<()> {
            let turns = &changed_by[path];
            // (A file on disk that the project's snapshot cannot see now, ignored say, is
            // never written: no merge of it either.)
            let unseen_now = || now.is_none() && locked.on_disk(path);
            let reversed = match during.contains(path) || unseen_now() {
                true => Reversed::Conflict {
                    hunks: Vec::new(),
                    markers: None,
                    reached: None,
                },
                false => merger.reverse(&locked, session, path, now, turns)?,
            };
            let (mergeable, hunks, reached) = match reversed {
                Reversed::Side { side, .. } if side == now => return Ok(()),
                Reversed::Side { side, merged: m } if options.merge => {
                    if m {
                        d.merged.push(path.clone());
                    }
                    let (path, before, after) = (path.clone(), now, side);
                    d.changes.push(Change {
                        path,
                        before,
                        after,
                    });
                    return Ok(());
                }
                Reversed::Side { .. } => (true, Vec::new(), None),
                Reversed::Conflict { hunks, reached, .. } => (false, hunks, reached),
            };
            // (A name of a move is undone with its other names or not at all: no part alone.)
            let reached = reached.filter(|_| !partners.contains_key(path));
            // The later turns out, an earlier one meeting the other edit (r119: a file turn 1
            // made, the user edited and turn 2 deleted comes back as the user left it): as far
            // as they come out, as undoing them one at a time would leave it. (With `force`,
            // the earlier one is taken out too, as one at a time: the target.)
            let in_part = reached.filter(|_| options.merge);
            if force {
                if target == now {
                    return Ok(()); // nothing to force: the project holds the target
                }
                let (path, before, after) = (path.clone(), now, target);
                d.changes.push(Change {
                    path,
                    before,
                    after,
                });
                return Ok(());
            }
            let mut detail = ConflictDetail::new(path.clone(), mergeable, hunks);
            detail.merges_in_part = reached.is_some();
            d.details.push(detail);
            if let Some(after) = in_part {
                d.merged.push(path.clone());
                let (path, before) = (path.clone(), now);
                d.changes.push(Change {
                    path,
                    before,
                    after,
                });
                return Ok(());
            }
            d.conflicts.push(path.clone());
            Ok(())
        };
        // (One out of view is kept, said once.)
        let untouched_others = touched
            .iter()
            .filter(|p| others.contains(*p) && !differs.contains(*p) && !out_of_view.contains(*p));
        if !force || options.merge {
            for path in untouched_others {
                let now = side_at(&repo, current, path.as_ref())?;
                around_others(&mut d, path, now, now)?;
            }
        } else {
            // What `force` never takes either (a directory someone made where the turns' file
            // was, say) is said as without it, not passed over (hunt of stop 60).
            for path in untouched_others {
                let unseen = side_at(&repo, current, path.as_ref())?.is_none();
                if unseen && !locked.in_the_way(std::slice::from_ref(path)).is_empty() {
                    d.details
                        .push(ConflictDetail::new(path.clone(), false, Vec::new()));
                    d.conflicts.push(path.clone());
                }
            }
        }
        for change in differing {
            if touched.binary_search(&change.path).is_err() {
                continue; // not the agent's: edits between turns by someone else stay
            }
            let mut unseen = false;
            for (before, sight) in &mut later_sights {
                unseen |= side_at(&repo, *before, change.path.as_bstr())?.is_none()
                    && !sight.can_see(&repo, change.path.as_bstr())?;
            }
            match (unseen, change.after) {
                (true, None) => out_of_view.push(change.path.clone()),
                (true, Some(_)) if !force => d.conflicts.push(change.path.clone()),
                _ if (!force || options.merge) && others.contains(&change.path) => {
                    around_others(&mut d, &change.path, change.before, change.after)?
                }
                _ => d.changes.push(change),
            }
        }
        pair_conflicts(&mut d.changes, &mut d.conflicts, &partners);
        let plan = Plan {
            target,
            current,
            steps: d.changes.iter().map(|c| step_of(c, 0)).collect(),
            sights: vec![target_sight],
            force,
            dry_run: options.dry_run,
            objects: Some(merges.clone()),
            index,
            partners: partners.clone(),
        };
        // Left alone: what the undo saw was someone else's, then what changed as it ran.
        let in_the_way_before = locked.in_the_way(&d.conflicts);
        let finish = |outcome: &mut RestoreOutcome| {
            let mut in_the_way = locked.still_in_the_way(&in_the_way_before, outcome);
            in_the_way.append(&mut outcome.in_the_way);
            outcome.in_the_way = in_the_way;
            let mut conflicts = d.conflicts.clone();
            conflicts.append(&mut outcome.conflicts);
            outcome.conflicts = conflicts;
            outcome.unseen = (outcome.conflicts.iter())
                .filter(|p| unknown.contains(*p) && !outcome.in_the_way.contains(p))
                .cloned()
                .collect();
            outcome.kept.extend(out_of_view.iter().cloned());
            let merged = d.merged.iter().filter(|p| outcome.written.contains(p));
            outcome.merged = merged.cloned().collect();
            outcome.conflict_details = d.details.clone();
            // (A merge in part that did not go in, something in the way, is said as not made.)
            let changed = |p: &BString| outcome.written.contains(p) || outcome.deleted.contains(p);
            for detail in &mut outcome.conflict_details {
                detail.merges_in_part &= !options.merge || changed(&detail.file);
            }
        };
        let tell_stays_deleted = || {
            let quote = crate::paths::quote_path;
            let told = stays_deleted.iter().map(|(path, turn, before)| {
                format!(
                    "{} stays deleted: the project before turn {:?} could not see it (ignored \
                     then), so whether it was there cannot be told; the project before turn \
                     {turn:?} held it (`rewind revert {before} -- {}` brings it back)",
                    quote(path),
                    undone[0].turn,
                    quote(path)
                )
            });
            crate::store::objects::lock(&locked.notices).extend(told);
        };
        if options.dry_run {
            let mut outcome = locked.apply(plan)?;
            finish(&mut outcome);
            tell_stays_deleted();
            return Ok(outcome);
        }
        // What the session left: its last commit's tree (for a turn left open, its "before":
        // what the open turn changed and the undo did not take back is not the session's).
        let base = chain.last().map_or(current, |link| link.tree);
        // (That tree is what stood before the stopped runs the head stands on: what they wrote
        // that holds this undo's target already is the session's too, r95 (1).)
        let already: Vec<Change> = locked
            .written_by_stopped_at_head(session, base, current)?
            .into_iter()
            .filter(|c| !differs.contains(&c.path))
            .collect();
        // A turn is rolled back when the undo took back all it could: a file that could not be
        // written leaves the turn as it was; files left alone (someone else's) are named in
        // the undo's commit, so that `undo --last --force` takes the same turn again. The
        // undo's commit names the turns it rolled back (not those an earlier undo had), which
        // its redo gives back. (A turn an earlier undo rolled back leaving files alone is
        // rolled back again with `force`, which takes them; one a stopped undo rolled back,
        // always. Without `force` an undo takes nothing more of it, and its record would hide
        // what the first left alone: r87 (5).)
        let mut to_roll_back = Vec::new();
        if only.is_none() {
            let in_part = locked.turns_undone_in_part(session)?;
            for record in undone {
                let marker = turn_ref(session, "rolled-back", &record.turn)?;
                let again = match options.force {
                    true => in_part.contains(&record.turn),
                    false => in_part.stopped.contains(&record.turn),
                };
                if locked.ref_target(&marker)?.is_none() || again {
                    to_roll_back.push((record, marker));
                }
            }
        }
        // The open turn it rolls back, told as it was then (r87 (2)).
        let head = locked.ref_target(&session_ref(session, "head")?)?;
        let open = locked.turn_open_at(head)?.map(|open| open.turn);
        let rolls_back_open = to_roll_back
            .iter()
            .any(|(r, _)| Some(&r.turn) == open.as_ref());
        let told = match rolls_back_open {
            true => locked.told_lines(ROLLED_BACK_FILE, session, head, current)?,
            false => String::new(),
        };
        let record = |raw: &RestoreOutcome, (parent, run): On| -> Result<ChainRecord> {
            let mut outcome = raw.clone();
            finish(&mut outcome);
            let rolled_back = match outcome.failed.is_empty() {
                true => &to_roll_back[..],
                false => &[],
            };
            if rolled_back.is_empty() && wrote_nothing(&outcome) {
                return Ok(None); // nothing for a redo to give back (what it left alone stays)
            }
            let title = format!(
                "rewind: undo of session {session:?} from turn {:?}",
                undone[0].turn
            );
            let turns = rolled_back.iter().map(|(record, _)| record.turn.as_str());
            let about = (session, undone[0].turn.as_str(), run);
            let told = match rolled_back.is_empty() {
                true => "",
                false => told.as_str(),
            };
            let message = locked.undo_message(&title, about, &outcome, (turns, told))?;
            let on = (base, parent);
            let commit = locked.chain_commit(on, (&d.changes, &already), &outcome, &message)?;
            let marks = rolled_back.iter();
            let marks = marks.map(|(record, marker)| (marker.clone(), Some(record.commit)));
            Ok(Some((commit, marks.collect())))
        };
        let (mut outcome, unrecorded) = locked.apply_recorded(session, plan, &record)?;
        finish(&mut outcome);
        tell_stays_deleted();
        Ok(ChainRun::Undo.outcome(outcome, unrecorded))
    }

    /// Whether turn `turn` of `session` is rolled back now (its mark set, no redo gave it back).
    /// Costs a ref read.
    fn is_rolled_back(&self, session: &str, turn: &str) -> Result<bool> {
        Ok(self
            .ref_target(&turn_ref(session, "rolled-back", turn)?)?
            .is_some())
    }

    /// Refuses an undo of `record` alone when an undo rolled it back whole and no redo gave it
    /// back. Costs a ref read, and when it is rolled back a commit read per commit of the
    /// session's chain.
    fn refuse_undone_already(&self, session: &str, record: &Record) -> Result<()> {
        if self.is_rolled_back(session, &record.turn)?
            && !self.turns_undone_in_part(session)?.contains(&record.turn)
        {
            return Err(undone_already(session, record));
        }
        Ok(())
    }

    /// Refuses an undo from `records[start]` when the undo that rolled it back (and no redo
    /// gave back) rolled back an earlier turn too: its "before" holds that turn's work, which
    /// it would write back (r111 (2): `undo --turn 1`, then `undo --turn 2` wrote turn 1's
    /// bytes back, turn 1 still rolled back; also when that undo left files alone). That undo
    /// is taken again from its first turn. Costs a ref read per turn up to `start`, and when
    /// one is rolled back a commit read per commit of the session's chain.
    fn refuse_undone_with_an_earlier_turn(
        &self,
        session: &str,
        records: &[Record],
        start: usize,
    ) -> Result<()> {
        let rolled_back = |record: &Record| self.is_rolled_back(session, &record.turn);
        if !rolled_back(&records[start])? {
            return Ok(());
        }
        let by = self.turns_undone_in_part(session)?.rolled_back_by;
        let undo_of = |record: &Record| by.get(&record.turn).map(|(undo, _)| *undo);
        for earlier in &records[..start] {
            if undo_of(earlier).is_some()
                && undo_of(earlier) == undo_of(&records[start])
                && rolled_back(earlier)?
            {
                return Err(undone_already(session, &records[start]));
            }
        }
        Ok(())
    }

    /// Open turn `record` with the "before" its latest redo gave it (`Rewind-Reopened:`), if a
    /// redo gave it back after an undo rolled it back. Costs a commit read per commit of the
    /// session's chain since the turn began.
    fn as_reopened(&self, session: &str, mut record: Record) -> Result<Record> {
        if record.after.is_some() {
            return Ok(record); // ended (its "before" names the reopening), or left open for good
        }
        let turn = encode_id("turn", &record.turn)?;
        let head = self.ref_target(&session_ref(session, "head")?)?;
        let (walked, _) = self.chain_back(head, Some(record.begin))?;
        let reopened = walked
            .iter()
            .find_map(|(_, message)| reopening_in(message, &turn));
        record.before = reopened.unwrap_or(record.before);
        Ok(record)
    }

    /// Whether the open turn begun at commit `begin` was left open when `session` began
    /// another turn (so it ended there): the session's last commit but for undos and redos is
    /// not `begin`. Costs a commit read per commit walked.
    fn superseded(&self, session: &str, begin: ObjectId) -> Result<bool> {
        let head = self.ref_target(&session_ref(session, "head")?)?;
        let (walked, met) = self.chain_back(head, Some(begin))?;
        let other = |(_, message): &(ObjectId, BString)| {
            !matches!(ChainKind::of(message), ChainKind::Undo | ChainKind::Trim)
        };
        Ok(met && walked.iter().any(other))
    }

    /// For turn `record` of `session`, left open when its session began another: where a redo
    /// reopened it, and where an undo rolled it back, each the last of its kind before the next
    /// turn began (a redo after an undo gives the turn back: it ended where the next began).
    /// Costs a commit read per commit of the session's chain since the turn began.
    fn left_open_span(
        &self,
        session: &str,
        record: &Record,
    ) -> Result<(Option<ObjectId>, Option<ObjectId>)> {
        let turn = encode_id("turn", &record.turn)?;
        let head = self.ref_target(&session_ref(session, "head")?)?;
        let (walked, _) = self.chain_back(head, Some(record.begin))?;
        let (mut reopened, mut rolled_back) = (None, None);
        for (_, message) in walked.iter().rev() {
            match ChainKind::of(message) {
                ChainKind::Begin => break,
                ChainKind::Undo => {
                    let reopening = reopening_in(message, &turn);
                    if reopening.is_some() {
                        (reopened, rolled_back) = (reopening, None);
                    } else if rolled_back.is_none()
                        && rolled_back_in(message).contains(&record.turn)
                    {
                        // (The first since: an undo run again or forced again later takes
                        // the turn where it ended, r89 (1), (4).)
                        rolled_back = id_in(message, UNDO_POINT);
                    }
                }
                ChainKind::End | ChainKind::Trim => {}
            }
        }
        Ok((reopened, rolled_back))
    }

    /// The tokens of the stopped runs (undos and redos) that the chains of `sessions` name:
    /// what such a run did not do is asked of the store as long as its record lives. Costs a
    /// commit read per commit of each chain.
    pub(crate) fn runs_named_by(&self, sessions: &[String]) -> Result<HashSet<String>> {
        let mut named = HashSet::new();
        for session in sessions {
            let head = self.ref_target(&session_ref(session, "head")?)?;
            for (_, message) in self.chain_back(head, None)?.0 {
                let tokens = lines_with(&message, UNFINISHED_RUN).filter_map(|t| t.to_str().ok());
                named.extend(tokens.map(str::to_owned));
            }
        }
        Ok(named)
    }

    /// The commits from `from` back along first parents, newest first, with their messages,
    /// up to `stop` (not included) or the root; and whether `stop` was met. Costs a commit read
    /// per commit walked.
    fn chain_back(
        &self,
        from: Option<ObjectId>,
        stop: Option<ObjectId>,
    ) -> Result<(Vec<(ObjectId, BString)>, bool)> {
        let repo = self.repo();
        let mut walked = Vec::new();
        let mut next = from;
        while let Some(commit) = next.filter(|c| Some(*c) != stop) {
            let (object, _) = commit_and_tree(&repo, commit)?;
            let message = object.message_raw_sloppy();
            let copy_of =
                |id: ObjectId| lines_with(message, COPY_OF).any(|l| l == id.to_string().as_bytes());
            if stop.is_some_and(copy_of) {
                return Ok((walked, true)); // a trim's copy of `stop`
            }
            walked.push((commit, message.to_owned()));
            if stop.is_some_and(|id| message.lines().any(|l| names_dropped(l, &id.to_string()))) {
                return Ok((walked, true)); // `stop` was dropped by a trim just before this one
            }
            next = object.parent_ids().next().map(|id| id.detach());
        }
        Ok((walked, next.is_some() && next == stop))
    }

    /// Whether the chain from `last` back to `begin` holds only undo and redo commits (and
    /// trims', which change nothing).
    fn only_undos_back_to(&self, last: ObjectId, begin: ObjectId) -> Result<bool> {
        let (walked, met) = self.chain_back(Some(last), Some(begin))?;
        let undos = walked.iter().all(|(_, message)| {
            matches!(ChainKind::of(message), ChainKind::Undo | ChainKind::Trim)
        });
        Ok(met && undos)
    }

    /// The paths the stopped run whose unfinished record is `message` may have written or
    /// deleted: those it planned to change, less those the store's record of it says it did
    /// not (all of them where the record names no run). Costs a read of that record.
    fn may_have_written(&self, message: &[u8]) -> HashSet<BString> {
        let planned = lines_with(message, CHANGED).filter_map(decode_path);
        match self.not_done_by_stopped(message) {
            Some(NotDone::All) => HashSet::new(),
            Some(NotDone::Paths { not_done, .. }) => {
                planned.filter(|p| !not_done.contains(p)).collect()
            }
            None => planned.collect(),
        }
    }

    /// What the store's record says the stopped run whose unfinished record is `message` did
    /// not do (`None` where the record names no run: a build before). Costs a read of the
    /// store's record of runs.
    fn not_done_by_stopped(&self, message: &[u8]) -> Option<NotDone> {
        let run = lines_with(message, UNFINISHED_RUN).next()?;
        Some(self.not_done_by_run(run.to_str().ok()?))
    }

    /// The session's chain from commit `begin` to its head, oldest first (less trims' commits,
    /// which change nothing): each commit's tree, kind, and for an end commit the files it lists
    /// as the turn's. Costs one commit read per commit, and a read of the store's record of
    /// runs per stopped one.
    fn chain_since(&self, session: &str, begin: ObjectId) -> Result<Vec<ChainLink>> {
        let repo = self.repo();
        let (mut chain, mut unfinished) = (Vec::new(), Vec::new());
        let mut next = self.ref_target(&session_ref(session, "head")?)?;
        while let Some(commit) = next {
            let (object, tree) = commit_and_tree(&repo, commit)?;
            let message = object.message_raw_sloppy();
            let kind = ChainKind::of(message);
            if kind == ChainKind::Trim {
                next = object.parent_ids().next().map(|id| id.detach());
                continue;
            }
            let own = match kind {
                ChainKind::End => {
                    parse_files(message).map(|files| files.into_iter().map(|f| f.file).collect())
                }
                _ => None,
            };
            let merged = lines_with(message, MERGED)
                .filter_map(decode_path)
                .collect();
            let stopped = is_unfinished(message);
            unfinished.push(
                stopped.then(|| (id_in(message, UNDO_POINT), self.may_have_written(message))),
            );
            let reopened_at = reopened_tree_in(message, REOPENED);
            let opens = match kind {
                ChainKind::Begin => Some(self.record(commit)?.turn),
                _ => reopened_in(message).next(),
            };
            chain.push(ChainLink {
                tree,
                kind,
                own,
                merged,
                found: id_in(message, REDO_POINT).or_else(|| id_in(message, UNDO_POINT)),
                opens,
                rolled_back: rolled_back_in(message),
                about: match kind {
                    ChainKind::Undo => [TURN, ROLLED_BACK, GAVE_BACK]
                        .into_iter()
                        .flat_map(|key| turns_in(message, key))
                        .collect(),
                    _ => Vec::new(),
                },
                reopened_before: reopened_tree_in(message, REOPENED_BEFORE).or(reopened_at),
                reopens: reopened_at.is_some(),
                gap_leaves_out: HashSet::new(),
            });
            if commit == begin {
                break;
            }
            next = object.parent_ids().next().map(|id| id.detach());
        }
        chain.reverse();
        unfinished.reverse();
        // An unfinished undo or redo (stopped before it changed files, or while) says nothing of
        // what the session left: the tree before it stands. An open turn it rolled back (the
        // commit before is that turn's begin, or the redo that reopened it: r90 (2)) ended
        // where the undo found the project: up to there, its own work, which the undo may not
        // have taken back yet (r76 f6).
        let mut links: Vec<ChainLink> = Vec::with_capacity(chain.len() + 1);
        // What the runs stopped since the last finished link may have written.
        let mut stopped_writes: Option<HashSet<BString>> = None;
        for (link, stopped) in chain.into_iter().zip(unfinished) {
            let mut link = link;
            // (What the project held next is no gap's where it holds the stopped runs' own
            // writes; elsewhere it is, as without the kill (r92 (2)); also for a redo that
            // reopened the turn, r99 (1).)
            if let Some(written) = stopped_writes.take() {
                link.gap_leaves_out = written.clone();
                if stopped.is_some() {
                    stopped_writes = Some(written);
                }
            }
            if let Some((point, may_have_written)) = stopped {
                stopped_writes
                    .get_or_insert_with(HashSet::new)
                    .extend(may_have_written);
                let after_begin = links
                    .last()
                    .is_some_and(|l| l.kind == ChainKind::Begin || l.reopens);
                if let (Some(point), true) = (point, after_begin) {
                    links.push(ChainLink {
                        tree: point,
                        kind: ChainKind::End,
                        own: None,
                        merged: HashSet::new(),
                        found: None,
                        opens: None,
                        rolled_back: Vec::new(),
                        about: Vec::new(),
                        reopened_before: None,
                        reopens: false,
                        gap_leaves_out: HashSet::new(),
                    });
                }
                if let Some(before) = links.last() {
                    link.tree = before.tree;
                }
            }
            links.push(link);
        }
        Ok(links)
    }

    /// Undo the session's most recent turn that is not rolled back yet (and any later ones,
    /// which are): the "undo what the agent just did" button. Pressed again, it walks back one
    /// turn at a time. With `force`, a turn whose undo left files alone (someone else's) counts
    /// as not rolled back yet: pressed after such an undo, it takes that turn again and
    /// overwrites them (their bytes in its `undo` snapshot). `not_found` when no turn is left.
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), &rewind::OpenOptions::new("/tmp/rewind"))?;
    /// let outcome = store.undo_last("chat-42", false)?;
    /// println!("written {:?}", outcome.written);
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn undo_last(&self, session: &str, force: bool) -> Result<RestoreOutcome> {
        let options = UndoOptions {
            force,
            ..Default::default()
        };
        self.undo_last_with(session, &options)
    }

    /// [`Self::undo_last`] with `options` (`force`, `dry_run`; its `turn` is the one found, and
    /// `file` must be `None`).
    pub fn undo_last_with(&self, session: &str, options: &UndoOptions) -> Result<RestoreOutcome> {
        if options.file.is_some() {
            return Err(Error::BadPath {
                path: options.file.clone().unwrap_or_default(),
                reason: "the last turn is undone whole: no file goes with it",
            });
        }
        // (One an undo left files of is taken again only with `force`, which takes them too;
        // one a stopped undo rolled back, always: that undo is finished.)
        let in_part = self.turns_undone_in_part(session)?;
        let again = |turn: &String| {
            in_part.stopped.contains(turn)
                || (options.force && in_part.left_alone.contains_key(turn))
        };
        let mut last = None;
        let records = self.session_records(session)?;
        for record in &records {
            let rolled_back = self.is_rolled_back(session, &record.turn)?;
            if !rolled_back || again(&record.turn) {
                last = Some((record.turn.clone(), rolled_back));
            }
        }
        let (mut turn, taken_again) = last.ok_or_else(|| Error::NothingLeft {
            session: session.into(),
            what: "turn left to undo".into(),
        })?;
        // One an undo rolled back in part (and no redo gave back since) is taken again from
        // that undo's first turn: from a later one, its "before" holds the earlier turns' work
        // (r113 (2)). One a redo gave back is the session's latest work, undone from itself.
        if let Some((undo, _)) = in_part.rolled_back_by.get(&turn).filter(|_| taken_again) {
            for record in &records {
                let by_it = in_part.rolled_back_by.get(&record.turn).map(|(u, _)| u) == Some(undo);
                // (Still rolled back: one a redo gave back since is not that undo's any more.)
                if by_it && self.is_rolled_back(session, &record.turn)? {
                    turn = record.turn.clone();
                    break;
                }
            }
        }
        let options = UndoOptions {
            turn: Some(turn),
            ..options.clone()
        };
        self.undo(session, &options)
    }

    /// Redo the session's most recent undo not redone yet (with `turn`, the most recent one
    /// that undid that turn): bring back what the undo changed, and only that. A path changed
    /// since the undo (by the user, another session or a later turn) is a conflict, left alone
    /// unless `force` (its bytes are in the `undo` snapshot either way). Marks the turns the
    /// undo rolled back as not rolled back, unless a file could not be written or everything
    /// was left alone (then nothing is recorded, and the next redo takes the same undo).
    /// A turn another undo not redone yet, one that changed files, rolled back too (it left a
    /// file alone, and `force` finished the turn) stays rolled back until the redo of that
    /// one, and a notice says so. `not_found` when there is no undo left to redo.
    /// `restore(undo)` is different: the whole project.
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), &rewind::OpenOptions::new("/tmp/rewind"))?;
    /// store.undo_last("chat-42", false)?;
    /// // ... the user changes their mind ...
    /// let outcome = store.redo("chat-42", &Default::default())?;
    /// println!("written {:?}, left alone {:?}", outcome.written, outcome.conflicts);
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn redo(&self, session: &str, options: &RedoOptions) -> Result<RestoreOutcome> {
        let (turn, force) = (options.turn.as_deref(), options.force);
        let locked = self.lock()?;
        // (A session a trim left with no turn may still have an undo to redo: an `undo
        // --file` rolls no turn back.)
        let records = match locked.ref_target(&session_ref(session, "head")?)? {
            Some(_) => locked.sessions(Some(session))?.pop().unwrap_or_default().1,
            None => locked.session_records(session)?,
        };
        if let Some(turn) = turn.filter(|t| !records.iter().any(|r| r.turn == *t)) {
            return Err(self.missing_turn(session, turn));
        }
        let undo = locked.undo_to_redo(session, turn)?;
        self.redo_undo(&locked, session, &records, undo, force)
    }

    /// Redo `undo`, one undo commit of the session's chain (see [`Self::redo`]); `records`:
    /// the session's turns. Costs a snapshot, a tree diff and the restore of what comes back.
    fn redo_undo(
        &self,
        locked: &Locked<'_>,
        session: &str,
        records: &[Record],
        undo: ObjectId,
        force: bool,
    ) -> Result<RestoreOutcome> {
        let repo = locked.repo();
        let (object, undo_tree) = commit_and_tree(&repo, undo)?;
        let message = object.message_raw_sloppy().to_owned();
        let rolled_back = rolled_back_in(&message);
        // What a redo brings back while one of the session's turns is open would count as that
        // turn's own work: right when the undo rolled back that very turn (the redo reopens
        // it), wrong otherwise. (One rolled back while open and not given back is over.)
        for record in records.iter().filter(|r| r.after.is_none()) {
            let over = locked
                .ref_target(&turn_ref(session, "rolled-back", &record.turn)?)?
                .is_some();
            if !over && !rolled_back.contains(&record.turn) {
                return Err(Error::Turn {
                    session: session.into(),
                    turn: record.turn.clone(),
                    reason: "is open: end it before a redo",
                });
            }
        }
        let unfinished = is_unfinished(&message);
        let point = id_in(&message, UNDO_POINT).ok_or_else(|| {
            Error::store(
                locked.git_dir(),
                format!("undo {undo} names no undo point (use `rewind restore`)"),
            )
        })?;
        let (snapshot, index) = locked.track_holding_index(&TrackOptions::default())?;
        let current = snapshot.hash.0;
        let (mut conflicts, mut kept) = (Vec::new(), Vec::new());
        let (mut changes, mut already) = (Vec::new(), Vec::new());
        // (The paths passed over: the session's word there stays what it was before the undo.)
        let mut passed_over: HashMap<BString, ObjectId> = HashMap::new();
        let mut undid: Vec<BString> = lines_with(&message, CHANGED)
            .filter_map(crate::snapshot::visibility::decode_path)
            .collect();
        undid.sort_unstable();
        // A redo since (of this undo, that left files alone, so it names no undo redone; or of
        // another: this undo's run again after a kill, r75 f4): what it wrote is the session's
        // last word there, in place of what the undo left. (What a later undo not redone wrote
        // is changed since; one stopped before it finished says nothing of what the session
        // left.)
        let head = locked.ref_target(&session_ref(session, "head")?)?;
        let since = locked.chain_back(head, Some(undo))?.0;
        let mut redone_since: HashMap<BString, ObjectId> = HashMap::new();
        // A redo of it stopped since: a path it planned that changed after it was about to
        // holds its write or an edit after that (perhaps back to what the undo left), which
        // only a conflict keeps, unless it holds what the redo writes.
        let mut edited_after_a_stop: HashSet<BString> = HashSet::new();
        // The undo itself stopped: likewise, what holds what it planned where it did not write
        // is an edit after it (r76 (3)).
        // Where the store knows it did not write, what stands there is no work of the undo's:
        // holding neither its plan nor what comes back, it is the user's edit on the turn's own
        // work, which the undo never took back, and nothing comes back there, as in an undo
        // that left the path alone (r95 (4)). Not for an open turn it rolled back: an edit
        // while the turn was rolled back is no work of the turn's, and only a conflict keeps it
        // so (r101 (2)).
        let mut not_written_by_undo = HashSet::new();
        let rolled_back_an_open_turn = records
            .iter()
            .any(|r| r.after.is_none() && rolled_back.contains(&r.turn));
        if unfinished && !rolled_back_an_open_turn {
            edited_after_a_stop
                .extend(locked.changed_since_stopped((&message, undo_tree), current)?);
            if let Some(NotDone::Paths { not_written, .. }) = locked.not_done_by_stopped(&message) {
                not_written_by_undo = not_written;
            }
        }
        // What a redo stopped since planned: where it is back, that run wrote it (r90 (3)).
        let mut planned_by_a_stop: HashSet<BString> = HashSet::new();
        // (Those of the stopped runs the session's head stands on, nothing finished since: each
        // path with the tree of the newest such run.)
        let mut planned_at_head: HashMap<BString, ObjectId> = HashMap::new();
        let at_head = since
            .iter()
            .take_while(|(_, text)| is_unfinished(text))
            .count();
        for (n, (commit, text)) in since.iter().enumerate().rev() {
            if text.contains_str(REDO_TRAILER) && is_unfinished(text) {
                let planned = commit_and_tree(&repo, *commit)?.1;
                edited_after_a_stop.extend(locked.changed_since_stopped((text, planned), current)?);
                let paths: Vec<BString> =
                    lines_with(text, CHANGED).filter_map(decode_path).collect();
                if n < at_head {
                    planned_at_head.extend(paths.iter().map(|path| (path.clone(), planned)));
                }
                planned_by_a_stop.extend(paths);
            }
            if text.contains_str(REDO_TRAILER) && !is_unfinished(text) {
                let tree = commit_and_tree(&repo, *commit)?.1;
                let wrote =
                    lines_with(text, CHANGED).filter_map(crate::snapshot::visibility::decode_path);
                redone_since.extend(wrote.map(|path| (path, tree)));
            }
        }
        // The session's turns begun since the undo: what one changed is its work, even where
        // it put back what the undo left; of one rolled back since, what its undo left in the
        // project (`Some`: only those paths).
        let mut later_turns = Vec::new();
        let own_in_part = locked.turns_undone_in_part(session)?;
        for record in records {
            let begun_since = since.iter().any(|(commit, _)| *commit == record.begin);
            let marker = turn_ref(session, "rolled-back", &record.turn)?;
            let rolled_back = locked.ref_target(&marker)?.is_some();
            // (One rolled back while open ended where that undo found the project.)
            let after = match rolled_back {
                true => record
                    .after
                    .or(own_in_part.ended_at_undo(&record.turn).map(|e| e.1)),
                false => record.after,
            };
            if let (Some(after), true) = (after, begun_since) {
                let only = match rolled_back {
                    false => None,
                    true => match own_in_part.still_its_work(&record.turn) {
                        None => continue,
                        Some(only) => only,
                    },
                };
                later_turns.push((record.before, after, only));
            }
        }
        // Other sessions' turns since the undo likewise: the files each lists (its end commit's,
        // or, left open, what it did until its session went on). Since: after
        // the heads the undo recorded (a trim's copy of a head stands for it, and a trim that
        // dropped it names it; a chain that holds it nowhere is a session of the same id begun
        // since, all of it since), or, for an undo that recorded none, ended after it by the
        // clock.
        let undone_at = locked.record(undo)?.started_at;
        // What the undo left, for whose a shared change is: not known of one stopped before it
        // finished (its tree is what it planned; a kill may have come before any write).
        let undo_left = (!unfinished).then_some(undo_tree);
        let heads_then = parse_other_heads(&message);
        // What turns since the undo that a trim dropped listed (the session's, and the others',
        // below): the copy after them names them. Where such lines were cut, what those turns
        // did is not known. The session's own undos and redos since, each with where the other
        // sessions stood then and the paths it changed: another's turn open across one lists
        // such a path as shared because of it, and that path is not theirs.
        let (mut theirs, mut unknown) = (HashSet::new(), false);
        type OwnUndo = (HashMap<String, ObjectId>, HashSet<BString>, ObjectId);
        let mut own_undos: Vec<OwnUndo> = Vec::new();
        for (commit, text) in &since {
            let found = dropped_files_after(text, None, &mut HashSet::new());
            theirs.extend(found.own.into_iter().chain(found.shared));
            unknown |= found.cut;
            if ChainKind::of(text) == ChainKind::Undo {
                let changed = lines_with(text, CHANGED).filter_map(decode_path).collect();
                let left = commit_and_tree(&repo, *commit)?.1;
                own_undos.push((parse_other_heads(text), changed, left));
            }
        }
        // Another session that prune removed since, active after the undo, took what it did
        // then with it: nothing can be told.
        let own = session_ref(session, "")?;
        unknown |= locked
            .gone_active_since(undone_at)
            .iter()
            .any(|p| *p != own);
        for (other, their_records) in locked.sessions(None)? {
            if other == session {
                continue;
            }
            let head_ref = session_ref(&other, "head")?;
            let their_in_part = locked.turns_undone_in_part(&other)?;
            let heads_recorded = !heads_then.is_empty()
                || message
                    .lines()
                    .any(|l| l == NO_OTHER_HEADS.trim_end().as_bytes());
            // Its chain since the undo, each commit (and what a trim's copy stands for) by its
            // place, oldest first after the head the undo recorded (0).
            let mut order: HashMap<ObjectId, usize> = HashMap::new();
            let since: Option<HashSet<ObjectId>> = match !heads_recorded {
                true => None,
                false => {
                    let then = heads_then.get(&head_ref).copied();
                    let head = locked.ref_target(&head_ref)?;
                    let (walked, met) = locked.chain_back(head, then)?;
                    // (The place lost, say to a session of the same id begun since that one
                    // expired: what every dropped turn of the chain named counts.)
                    let place = then.filter(|_| met);
                    let mut begun = HashSet::new();
                    order.extend(place.map(|then| (then, 0)));
                    for (n, (commit, text)) in walked.iter().rev().enumerate() {
                        let found = dropped_files_after(text, place, &mut begun);
                        theirs.extend(found.own.into_iter().chain(found.shared));
                        unknown |= found.cut;
                        // (A dropped turn open across the undo: where its end holds something
                        // neither the undo nor the session's own undos and redos since left.)
                        for (path, end) in found.shared_across {
                            let ours = own_undos.iter().map(|(_, _, left)| *left);
                            let mut left_by_ours = undo_left.into_iter().chain(ours);
                            let changed_after = left_by_ours.try_fold(true, |all, left| {
                                Ok::<_, Error>(all && side_at(&repo, left, path.as_ref())? != end)
                            })?;
                            if changed_after {
                                theirs.insert(path);
                            }
                        }
                        // (What its own undos and redos since changed is its doing too.)
                        if ChainKind::of(text) == ChainKind::Undo {
                            theirs.extend(lines_with(text, CHANGED).filter_map(decode_path));
                        }
                        let stood_for = lines_with(text, COPY_OF)
                            .filter_map(|hex| ObjectId::from_hex(hex).ok());
                        order.extend(stood_for.chain([*commit]).map(|id| (id, n + 1)));
                    }
                    // (Its place lost, its chain is another's since: a session of the same id
                    // begun after the one the undo saw went. Every turn on it is since, whatever
                    // their clock says.)
                    Some(walked.into_iter().map(|(commit, _)| commit).collect())
                }
            };
            // What the session's own undos and redos since that changed `path` and that a turn
            // from `begin` to `end` (open: `None`) was open across left there (where this
            // session stood then tells: at or after the begin, before the end; unknown places
            // say none).
            let left_by_own_change_across =
                |(begin, end): (ObjectId, Option<ObjectId>), path: &BString| {
                    let across = own_undos.iter().filter(|(heads, changed, _)| {
                        let stood = heads.get(&head_ref).and_then(|h| order.get(h));
                        // (A turn begun before the undo's place began at it, for this.)
                        let begin = Some(order.get(&begin).unwrap_or(&0));
                        let end = end.map(|e| order.get(&e));
                        let open_then = match (stood, begin, end) {
                            (Some(stood), Some(begin), None) => begin <= stood,
                            (Some(stood), Some(begin), Some(Some(end))) => {
                                begin <= stood && stood < end
                            }
                            _ => false,
                        };
                        open_then && changed.contains(path)
                    });
                    across.map(|(_, _, left)| *left).collect::<Vec<_>>()
                };
            for (n, record) in their_records.iter().enumerate() {
                // (One left open ended where its session's next turn began; one rolled back
                // while open, where that undo found the project.)
                let ended_at_next = || record.ended_at.is_none() && record.after.is_some();
                let next_begin = their_records.get(n + 1).map(|next| next.begin);
                let marker = turn_ref(&other, "rolled-back", &record.turn)?;
                let rolled_back = locked.ref_target(&marker)?.is_some();
                let ended_at_undo = match (record.after, rolled_back) {
                    (None, true) => their_in_part.ended_at_undo(&record.turn),
                    _ => None,
                };
                // One still open counts up to now (r82 (8)): what it did so far is its own,
                // which no end commit lists yet. (For an undo stopped before it finished, a
                // path it planned may hold what that turn wrote, or what it wrote itself.)
                let open_now = record.after.is_none() && !rolled_back;
                let after_undo = match (&since, ended_at_undo) {
                    (Some(since), _) => {
                        since.contains(&record.commit)
                            || (ended_at_next() && next_begin.is_some_and(|b| since.contains(&b)))
                            || ended_at_undo.is_some_and(|(undo, _)| since.contains(&undo))
                    }
                    (None, Some((undo, _))) => locked.record(undo)?.started_at >= undone_at,
                    (None, None) => record.ended_at.is_some_and(|at| at >= undone_at),
                } || open_now;
                let after = match open_now {
                    true => Some(current),
                    false => record.after.or(ended_at_undo.map(|(_, point)| point)),
                };
                let Some(after) = after.filter(|_| after_undo) else {
                    continue;
                };
                // (One rolled back since: what its undo left in the project is still its work.)
                let only = match rolled_back {
                    false => None,
                    true => match their_in_part.still_its_work(&record.turn) {
                        None => continue,
                        Some(only) => only,
                    },
                };
                let files = match record.ended_at {
                    Some(_) => {
                        let (end, _) = commit_and_tree(&repo, record.commit)?;
                        parse_files(end.message_raw_sloppy()).unwrap_or_default()
                    }
                    None => locked.own_files(&other, record, after)?.0,
                };
                let mut files: Vec<(BString, Origin)> =
                    files.into_iter().map(|f| (f.file, f.origin)).collect();
                // One given back by a redo since an undo rolled it back while open: what that
                // undo left alone of its work is its work too (r87 (6)).
                if !rolled_back {
                    files.extend(locked.left_alone_when_rolled_back(&other, record)?);
                }
                // Shared ones too, for a turn begun since the undo (in one open across it, they
                // may be the undo's own changes; the session's own turns since are counted apart).
                let begun_since = match &since {
                    Some(since) => since.contains(&record.begin),
                    None => record.started_at >= undone_at,
                };
                let end = match record.ended_at {
                    Some(_) => Some(record.commit),
                    None => next_begin
                        .filter(|_| ended_at_next())
                        .or(ended_at_undo.map(|(undo, _)| undo)),
                };
                let files = files
                    .into_iter()
                    .filter(|(file, _)| only.is_none_or(|only| only.contains(file)));
                for (file, origin) in files {
                    let path = file.as_bstr();
                    // A shared path that the undo (for a turn open across it) or the session's
                    // own undos and redos since (for one open across them) may have changed is
                    // theirs only where the turn's end holds something none of them left.
                    let mut ours_left = left_by_own_change_across((record.begin, end), &file);
                    if !begun_since {
                        ours_left.extend(undo_left);
                    }
                    let theirs_after = side_at(&repo, after, path)?;
                    let changed_after_ours = ours_left
                        .iter()
                        .map(|left| side_at(&repo, *left, path))
                        .collect::<Result<Vec<_>>>()?
                        .iter()
                        .all(|left| *left != theirs_after);
                    match origin {
                        Origin::Unannounced | Origin::Announced => theirs.insert(file),
                        Origin::Shared if changed_after_ours => theirs.insert(file),
                        Origin::Shared | Origin::Other => false,
                    };
                }
            }
        }
        let changed_by_later_turn = |path: &BStr| -> Result<bool> {
            if unknown || theirs.contains(path) {
                return Ok(true);
            }
            for (before, after, only) in &later_turns {
                if only.is_some_and(|only| !only.contains(path)) {
                    continue;
                }
                if side_at(&repo, *before, path)? != side_at(&repo, *after, path)? {
                    return Ok(true);
                }
            }
            Ok(false)
        };
        // A file the undo moved back comes back under both names, or neither.
        let moves = tree_changes(&repo, self.reads(), undo_tree, point)?;
        let partners = rename_partners(&repo, &moves, &undid, true)?;
        for path in undid {
            // What the undo (or a redo of it since) left there, what is there now, what was
            // there before the undo.
            let left_by = redone_since.get(&path).copied().unwrap_or(undo_tree);
            let left = side_at(&repo, left_by, path.as_bstr())?;
            let now = side_at(&repo, current, path.as_bstr())?;
            let wanted = side_at(&repo, point, path.as_bstr())?;
            // To be deleted, yet on disk where the snapshot cannot see it (ignored since):
            // never deleted, and said so. (An empty directory holds no byte to keep: a write
            // over its parent may take it, as an undo's may, r113 (4); model seed 417.)
            if now.is_none()
                && wanted.is_none()
                && locked.on_disk(&path)
                && !locked.is_empty_dir(&path)
            {
                kept.push(path);
                continue;
            }
            let edited_after_stop = edited_after_a_stop.contains(&path);
            // (An edit by the user: one by another session's turn, or a later turn of this one,
            // is theirs, a conflict as ever.)
            let never_taken =
                not_written_by_undo.contains(&path) && !redone_since.contains_key(&path);
            if never_taken
                && now != left
                && now != wanted
                && !changed_by_later_turn(path.as_bstr())?
            {
                passed_over.insert(path, undo_tree);
                continue;
            }
            if now == wanted {
                // Back already. When the undo was stopped (before it changed the path, which its
                // record names), or a redo of it stopped after it wrote it, the session's record
                // of it comes back too; otherwise someone else put it back (a `restore`, or the
                // same bytes written after a stopped run that did not write them: r91), and it
                // stays theirs.
                let stopped = unfinished || planned_by_a_stop.contains(&path);
                if stopped && !edited_after_stop && left != wanted {
                    let (before, after) = (left, wanted);
                    already.push(Change {
                        path,
                        before,
                        after,
                    });
                }
                continue;
            }
            if (now != left || edited_after_stop || changed_by_later_turn(path.as_bstr())?)
                && !force
            {
                conflicts.push(path);
                continue;
            }
            changes.push(Change {
                path,
                before: now,
                after: wanted,
            });
        }
        pair_conflicts(&mut changes, &mut conflicts, &partners);
        let plan = Plan {
            target: point,
            current,
            steps: changes.iter().map(|c| step_of(c, 0)).collect(),
            sights: vec![locked.visibility(point, None)?],
            force,
            dry_run: false,
            objects: None,
            index,
            partners,
        };
        let rolled_back_elsewhere = locked.turns_rolled_back_by_other_undos(session, undo)?;
        // (An open turn a redo of this undo gave back already, in part, stays reopened where
        // that redo found the project: what came back since, and what its agent did, is its.)
        let mut still_rolled_back = HashSet::new();
        for turn in &rolled_back {
            if locked
                .ref_target(&turn_ref(session, "rolled-back", turn)?)?
                .is_some()
            {
                still_rolled_back.insert(turn);
            }
        }
        let file_undos = locked.file_undos_not_redone(session, undo)?;
        let from_turn = locked.record(undo)?.turn;
        let base = match head {
            Some(head) => commit_and_tree(&repo, head)?.1,
            None => current,
        };
        // What a redo stopped since planned is not the session's word where it did not write
        // it (r91): what this run writes, or finds that run wrote, goes on top. (Only where the
        // head stands on it: a turn ended since recorded the project as it found it, r93 (1).)
        let left_there = |path: &BString| {
            let left_by = redone_since.get(path).copied().unwrap_or(undo_tree);
            side_at(&repo, left_by, path.as_bstr())
        };
        let base = locked.without_stopped_plans(base, &planned_at_head, left_there)?;
        // (Nor is a path it passed over, which the stopped undo never wrote: another session's
        // turn open across this run reads no change of the session's there, r101 (1).)
        let before_the_undo = |path: &BString| side_at(&repo, point, path.as_bstr());
        let base = locked.without_stopped_plans(base, &passed_over, before_the_undo)?;
        // A run of this redo stopped since wrote what this one finds back: this run brings
        // that back as much as one that wrote it (r90 (3)).
        let stopped_wrote = already.iter().any(|c| planned_by_a_stop.contains(&c.path));
        // The undo is redone only when all of it came back: after a conflict or a failure, redo
        // (with `force`, or once there is room) takes the same undo again, skipping what is
        // back already. Its turns are no longer rolled back unless a file could not be written.
        // (Written before its files change, unfinished, it redoes nothing and gives nothing
        // back yet: stopped there, the next redo takes the same undo.)
        let record = |outcome: &RestoreOutcome, (parent, run): On| -> Result<ChainRecord> {
            let unfinished = run.is_some();
            let complete =
                conflicts.is_empty() && outcome.conflicts.is_empty() && outcome.failed.is_empty();
            // (A redo that brought nothing back, all of it left alone, gives no turn back.)
            if !complete && wrote_nothing(outcome) && !stopped_wrote {
                return Ok(None);
            }
            let given_back = outcome.failed.is_empty() && !unfinished;
            // (A turn another undo not redone yet also took back stays rolled back.)
            let given_back =
                |turn: &String| given_back && !rolled_back_elsewhere.contains_key(turn);
            let mut redid = match complete && !unfinished {
                true => format!("{REDID}{undo}\n"),
                false => String::new(),
            };
            for turn in rolled_back.iter().filter(|t| given_back(t)) {
                redid.push_str(&format!("{GAVE_BACK}{}\n", encode_id("turn", turn)?));
            }
            // An open turn given back starts again from the project as the redo found it: what
            // changed while it was rolled back (the user's edits) is not its work; what it did
            // before the undo, and the redo brought back, is (r87).
            for record in records.iter().filter(|r| r.after.is_none()) {
                if given_back(&record.turn) && still_rolled_back.contains(&record.turn) {
                    let turn = encode_id("turn", &record.turn)?;
                    let found_it = locked.as_reopened(session, record.clone())?.before;
                    let back = (outcome, &already[..]);
                    let (before, sight) =
                        locked.reopened_before((session, record), back, found_it)?;
                    redid.push_str(&format!("{REOPENED}{turn} {}\n", outcome.undo));
                    redid.push_str(&format!("{REOPENED_BEFORE}{turn} {before}\n"));
                    redid.push_str(&sight);
                }
            }
            if let Some(token) = run {
                redid.push_str(&unfinished_lines(token));
            }
            // (Where the other sessions stood: a turn of theirs open across this redo lists
            // the paths it changed as shared, and a redo of an older undo tells so by this.
            // What it found, for such a turn to tell the redo's whole change from its own.)
            let message = format!(
                "rewind: redo of session {session:?} from turn {from_turn:?}\n\n{redid}{REDO_POINT}{}\n{}{}{REDO_TRAILER}\n",
                outcome.undo,
                locked.other_heads_lines(session)?,
                trailers(session, &from_turn, locked.now()?, None, None)?
            );
            let on = (base, parent);
            let commit = locked.chain_commit(on, (&changes, &already), outcome, &message)?;
            let mut marks = Vec::new();
            for turn in rolled_back.iter().filter(|t| given_back(t)) {
                marks.push((turn_ref(session, "rolled-back", turn)?, None));
            }
            Ok(Some((commit, marks)))
        };
        let in_the_way_before = locked.in_the_way(&conflicts);
        let (mut outcome, unrecorded) = locked.apply_recorded(session, plan, &record)?;
        // Said, since the outcome lists only files: a turn this redo could not give back whole.
        if unrecorded.is_none() && outcome.failed.is_empty() {
            // (Also the turn it undid from, which an earlier undo may have rolled back first.)
            let mut held: Vec<&String> = rolled_back.iter().collect();
            if !held.contains(&&from_turn) {
                held.push(&from_turn);
            }
            held.retain(|t| rolled_back_elsewhere.contains_key(*t));
            // A turn given back keeps what an `undo --file` not redone yet took back from it
            // (or from an earlier turn): said, since `turns` shows the turn done.
            let position = |turn: &String| records.iter().position(|r| r.turn == *turn);
            let given_back = rolled_back
                .iter()
                .filter(|t| !rolled_back_elsewhere.contains_key(*t));
            let last_given_back = given_back.filter_map(position).max();
            let mut files_undone = Vec::new();
            if let Some(last) = last_given_back {
                for (from, paths, older) in &file_undos {
                    if position(from).is_some_and(|at| at <= last) {
                        files_undone.extend(paths.iter().map(|path| (path, *older)));
                    }
                }
            }
            let mut notices = crate::store::objects::lock(&locked.notices);
            // A redo that left files alone leaves its undo the latest not redone: the next
            // redo takes it again before an older one.
            let partial = !conflicts.is_empty() || !outcome.conflicts.is_empty();
            let first = |older: bool| match partial && older {
                true => "once the files left alone here are redone (`--force`), ",
                false => "",
            };
            notices.extend(held.iter().map(|turn| {
                let first = first(rolled_back_elsewhere[*turn]);
                format!(
                    "turn {turn:?} of session {session:?} stays rolled back: another undo of it is \
                     not redone yet ({first}a later `rewind redo` that redoes it brings back the \
                     rest)"
                )
            }));
            notices.extend(files_undone.iter().map(|(path, older)| {
                format!(
                    "{} stays undone: the undo of session {session:?} that took it back without \
                     rolling back a turn (an `undo --file`, or one that could not finish) is not \
                     redone yet ({}a later `rewind redo` that redoes it brings it back)",
                    crate::paths::quote_path(path),
                    first(*older)
                )
            }));
        }
        let mut in_the_way = locked.still_in_the_way(&in_the_way_before, &outcome);
        in_the_way.append(&mut outcome.in_the_way);
        outcome.in_the_way = in_the_way;
        conflicts.append(&mut outcome.conflicts);
        outcome.conflicts = conflicts;
        outcome.kept.append(&mut kept);
        Ok(ChainRun::Redo.outcome(outcome, unrecorded))
    }

    /// The turns whose rolling back (by the most recent undo that rolled back each) did not
    /// finish: it left files alone, or it was stopped before its record of what it did. Costs
    /// a commit read per commit of the session's chain.
    fn turns_undone_in_part(&self, session: &str) -> Result<UndoneInPart> {
        let mut seen = HashSet::new();
        let mut in_part = UndoneInPart::default();
        let head = self.ref_target(&session_ref(session, "head")?)?;
        for (commit, message) in self.chain_back(head, None)?.0 {
            let left: HashSet<BString> = lines_with(&message, LEFT_ALONE)
                .filter_map(decode_path)
                .collect();
            let stopped = is_unfinished(&message);
            let point = id_in(&message, UNDO_POINT);
            for turn in rolled_back_in(&message) {
                if !seen.insert(turn.clone()) {
                    continue;
                }
                in_part.rolled_back_by.insert(turn.clone(), (commit, point));
                if stopped {
                    in_part.stopped.insert(turn);
                } else if !left.is_empty() {
                    in_part.left_alone.insert(turn, left.clone());
                }
            }
        }
        Ok(in_part)
    }

    /// The session's most recent undo commit that no redo redid (with `turn`: one that undid
    /// it), walking its chain back from the head. Costs a commit read per chain commit walked.
    fn undo_to_redo(&self, session: &str, turn: Option<&str>) -> Result<ObjectId> {
        let wanted = turn.map(|t| encode_id("turn", t)).transpose()?;
        let mut found = None;
        self.undos_not_redone(session, &mut |commit, message, _| {
            let undid_turn = |turn: &str| {
                lines_with(message, ROLLED_BACK)
                    .chain(lines_with(message, TURN))
                    .any(|t| t == turn.as_bytes())
            };
            if wanted.as_deref().is_none_or(undid_turn) {
                found = Some(commit);
            }
            found.is_none()
        })?;
        found.ok_or_else(|| Error::NothingLeft {
            session: session.into(),
            what: match turn {
                Some(turn) => format!("undo of turn {turn:?} left to redo"),
                None => "undo left to redo".into(),
            },
        })
    }

    /// The turns the session's undo commits other than `undo` that no redo redid rolled back,
    /// of those that changed files (one that only left files alone gives nothing back), less
    /// those a later redo gave back; each with whether one of those undos is older than `undo`.
    /// Costs a commit read per chain commit.
    fn turns_rolled_back_by_other_undos(
        &self,
        session: &str,
        undo: ObjectId,
    ) -> Result<HashMap<String, bool>> {
        let (mut turns, mut older) = (HashMap::new(), false);
        self.undos_not_redone(session, &mut |commit, message, given_back_since| {
            older |= commit == undo;
            if commit != undo && lines_with(message, CHANGED).next().is_some() {
                let held = rolled_back_in(message).into_iter();
                for turn in held.filter(|t| !given_back_since.contains(t)) {
                    *turns.entry(turn).or_insert(false) |= older;
                }
            }
            true
        })?;
        Ok(turns)
    }

    /// The session's `undo --file` runs (undos that changed files and rolled back no turn)
    /// that no redo redid, other than `undo`: each one's first turn, the paths it changed, and
    /// whether it is older than `undo`. Costs [`Self::undos_not_redone`] and a record read per
    /// such undo.
    fn file_undos_not_redone(
        &self,
        session: &str,
        undo: ObjectId,
    ) -> Result<Vec<(String, Vec<BString>, bool)>> {
        let (mut found, mut older) = (Vec::new(), false);
        self.undos_not_redone(session, &mut |commit, message, _| {
            older |= commit == undo;
            let paths: Vec<BString> = lines_with(message, CHANGED)
                .filter_map(decode_path)
                .collect();
            if commit != undo && !paths.is_empty() && rolled_back_in(message).is_empty() {
                found.push((commit, paths, older));
            }
            true
        })?;
        let first_turn = |(commit, paths, older)| Ok((self.record(commit)?.turn, paths, older));
        found.into_iter().map(first_turn).collect()
    }

    /// Call `each` with every undo commit of the session's chain that no redo redid (its
    /// message, and the turns redos after it gave back), newest first, while it returns true.
    /// Costs a commit read per commit walked.
    fn undos_not_redone(&self, session: &str, each: &mut UndoVisitor<'_>) -> Result<()> {
        let repo = self.repo();
        let (mut redone, mut given_back) = (HashSet::new(), HashSet::new());
        let mut next = self.ref_target(&session_ref(session, "head")?)?;
        while let Some(commit) = next {
            let (object, _) = commit_and_tree(&repo, commit)?;
            let message = object.message_raw_sloppy();
            next = object.parent_ids().next().map(|id| id.detach());
            given_back.extend(turns_in(message, GAVE_BACK));
            if let Some(redid) = id_in(message, REDID) {
                redone.insert(redid);
                continue;
            }
            let is_undo = message.lines().any(|l| l == UNDO_TRAILER.as_bytes());
            if is_undo && !redone.contains(&commit) && !each(commit, message, &given_back) {
                break;
            }
        }
        Ok(())
    }

    /// What a run of undos and redos about turns before a range undo's changed from tree
    /// `start` to `end`: someone else's where one of those turns changed the path too, else
    /// the session's last word (`words`: someone else's paths, the session's last word, the
    /// paths undos wrote since the last end). Costs a tree diff, and the first time, one per
    /// earlier turn.
    fn gap_run(
        &self,
        (start, end): (ObjectId, ObjectId),
        earlier: &mut EarlierPaths<'_>,
        words: (
            &mut HashSet<BString>,
            &mut HashMap<BString, ObjectId>,
            &mut HashSet<BString>,
        ),
    ) -> Result<()> {
        let (others, last_word, written_since) = words;
        for change in tree_changes(&self.repo(), self.reads(), start, end)? {
            let path = change.path;
            if earlier.changed(self, &path)? {
                others.insert(path);
            } else {
                written_since.insert(path.clone());
                last_word.insert(path, end);
            }
        }
        Ok(())
    }

    /// The paths someone other than the session changed along `chain`: between an end (or
    /// undo) commit and the next turn's begin, and after the last end (or undo) until
    /// `current`, unless the content is again the session's last word on the path (what the
    /// last turn or undo that changed it left there). An open turn's changes are its own.
    /// Second, the paths of `touched` that the last turn's "after" before a gap, or before now
    /// (for a turn still open, now), could not see (ignored then, or left out for size or
    /// type) and no undo wrote since: what stood there is unknown, so no later state can be
    /// told the session's, nor merged.
    /// Costs one tree diff per chain commit, and a look at the rules per touched path absent
    /// from such an "after".
    /// Undos and redos about none of `undone` (the turns being undone; they ran in gaps: no
    /// partial undo or redo runs while a turn is open) are part of their gap: what a run of
    /// them changed, net, is someone else's where a turn `before_them` changed it too (r117:
    /// a redo of an earlier turn, then an undo of a later range, took the redo's work out),
    /// and the session's last word elsewhere (r118 (1): an `undo --turn 1 --file b` of a file
    /// only turn 2 changed is turn 2's undo).
    fn changed_by_others(
        &self,
        chain: &[ChainLink],
        current: ObjectId,
        (touched, undone, before_them): (&[BString], &HashSet<&str>, &[Record]),
    ) -> Result<(HashSet<BString>, HashSet<BString>)> {
        let mut earlier = EarlierPaths {
            records: before_them,
            paths: None,
        };
        let about_others = |link: &ChainLink| {
            link.kind == ChainKind::Undo
                && !link.about.is_empty()
                && !link.about.iter().any(|t| undone.contains(t.as_str()))
        };
        // The tree before the run of such undos and redos walked now.
        let mut run_from: Option<ObjectId> = None;
        let repo = self.repo();
        let mut others = HashSet::new();
        // For each path, the tree of the last end or undo commit that changed it.
        let mut last_word: HashMap<BString, ObjectId> = HashMap::new();
        // The last end's "after", and the paths undos wrote since.
        let mut last_end: Option<ObjectId> = None;
        let mut written_since: HashSet<BString> = HashSet::new();
        let mut unknown = HashSet::new();
        let mut unseen_in = |after: Option<ObjectId>, written: &HashSet<BString>| -> Result<()> {
            let Some(after) = after else { return Ok(()) };
            let mut sight = None;
            for path in touched.iter().filter(|p| !written.contains(*p)) {
                if side_at(&repo, after, path.as_ref())?.is_some() {
                    continue;
                }
                let sight = match &mut sight {
                    Some(sight) => sight,
                    None => sight.insert(self.visibility(after, None)?),
                };
                if !sight.can_see(&repo, path.as_ref())? && !sight.tracked_by_project(path.as_ref())
                {
                    unknown.insert(path.clone());
                }
            }
            Ok(())
        };
        // Whether a turn is open at the link walked from (the chain starts on a begin), and
        // which (`None`: one whose id is not known here).
        let mut in_turn = true;
        let mut open = chain.first().and_then(|l| l.opens.clone());
        for pair in chain.windows(2) {
            let (from, to) = (&pair[0], &pair[1]);
            if about_others(to) {
                // (What changed before it found the project is someone else's, as for any
                // undo made in a gap.)
                if let (false, Some(found)) = (in_turn, to.found) {
                    let gap = tree_changes(&repo, self.reads(), from.tree, found)?;
                    let gap = gap.into_iter().map(|c| c.path);
                    others.extend(gap.filter(|p| !to.gap_leaves_out.contains(p)));
                }
                // (What it merged holds someone else's edits, as in any undo's.)
                others.extend(to.merged.iter().cloned());
                run_from.get_or_insert(from.tree);
                continue;
            }
            if let Some(start) = run_from.take() {
                let ends = (start, from.tree);
                let words = (&mut others, &mut last_word, &mut written_since);
                self.gap_run(ends, &mut earlier, words)?;
            }
            let changed = tree_changes(&repo, self.reads(), from.tree, to.tree)?
                .into_iter()
                .map(|c| c.path);
            match to.kind {
                // A turn's end: the files it lists are its own; what else changed meanwhile
                // (another session's announced files) is someone else's.
                ChainKind::End => {
                    for path in changed {
                        match &to.own {
                            Some(own) if !own.contains(&path) => others.insert(path),
                            _ => last_word.insert(path, to.tree).is_some(),
                        };
                    }
                    (last_end, written_since) = (Some(to.tree), HashSet::new());
                }
                ChainKind::Undo => {
                    // Made in a gap (r87 (7): an `undo --file`), or a redo reopening the turn
                    // rolled back: what changed since the link before, as the undo found the
                    // project, is someone else's, even if put back since.
                    if let (false, Some(found)) = (in_turn, to.found) {
                        let gap = tree_changes(&repo, self.reads(), from.tree, found)?;
                        let gap = gap.into_iter().map(|c| c.path);
                        others.extend(gap.filter(|p| !to.gap_leaves_out.contains(p)));
                    }
                    for path in changed {
                        written_since.insert(path.clone());
                        match to.merged.contains(&path) {
                            true => others.insert(path),
                            false => last_word.insert(path, to.tree).is_some(),
                        };
                    }
                }
                // A gap: someone else's, unless a turn left open (or reopened by a redo)
                // runs into it.
                ChainKind::Begin if from.kind != ChainKind::Begin && !from.reopens => {
                    others.extend(changed);
                    unseen_in(last_end.take(), &written_since)?;
                }
                // (`chain_since` leaves trims' commits out.)
                ChainKind::Begin | ChainKind::Trim => {}
            }
            match to.kind {
                ChainKind::Begin => (in_turn, open) = (true, to.opens.clone()),
                ChainKind::End => in_turn = false,
                ChainKind::Undo if to.reopens => (in_turn, open) = (true, to.opens.clone()),
                ChainKind::Undo => {
                    let rolled_back = |turn: &String| to.rolled_back.contains(turn);
                    in_turn &= !open.as_ref().is_some_and(rolled_back);
                }
                ChainKind::Trim => {}
            }
        }
        if let (Some(start), Some(last)) = (run_from, chain.last()) {
            let words = (&mut others, &mut last_word, &mut written_since);
            self.gap_run((start, last.tree), &mut earlier, words)?;
        }
        unseen_in(last_end, &written_since)?;
        // An open turn's "after" is now.
        if chain.last().is_some_and(|l| l.kind == ChainKind::Begin) {
            unseen_in(Some(current), &HashSet::new())?;
        }
        // (After a redo that reopened the open turn, what changed is that turn's.)
        if let Some(&ChainLink {
            tree: last,
            kind: ChainKind::End | ChainKind::Undo,
            reopens: false,
            ..
        }) = chain.last()
        {
            for change in tree_changes(&repo, self.reads(), last, current)? {
                let session_left = match last_word.get(&change.path) {
                    Some(tree) => side_at(&repo, *tree, change.path.as_ref())?,
                    None => None,
                };
                if session_left.is_none() || session_left != change.after {
                    others.insert(change.path);
                }
            }
        }
        Ok((others, unknown))
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

    /// The commits other sessions added to their chains while turn `record` of `session` was
    /// open (from its begin to its end, or to now): those between the heads its begin and end
    /// commits name. Costs a commit read per commit.
    fn commits_of_others_during(&self, session: &str, record: &Record) -> Result<OthersDuring> {
        let (start, end) = self.turn_span(session, record)?;
        self.commits_of_others_between(session, start, end)
    }

    /// The commits other sessions added to their chains between commits `start` and `end` (or
    /// now) of `session`'s chain: those between the heads the two name. Costs a commit read per
    /// commit.
    fn commits_of_others_between(
        &self,
        session: &str,
        start: ObjectId,
        end: Option<ObjectId>,
    ) -> Result<OthersDuring> {
        // (Each commit names where the other sessions stood when it was made.)
        let repo = self.repo();
        let heads_in = |commit: ObjectId| -> Result<HashMap<String, ObjectId>> {
            Ok(parse_other_heads(
                commit_and_tree(&repo, commit)?.0.message_raw_sloppy(),
            ))
        };
        let at_begin = heads_in(start)?;
        let at_end = match end {
            Some(end) => heads_in(end)?,
            None => parse_other_heads(self.other_heads_lines(session)?.as_bytes()),
        };
        let mut chains = Vec::new();
        // A session whose chain no longer leads back to the head it had then (trimmed:
        // rewritten, its old commits perhaps removed) did things meanwhile that cannot be seen.
        // (One gone since was idle: retention keeps a session active during an open turn.)
        let mut unknown = false;
        // Nor can what one had open at the end, when the commit its head was on then is gone:
        // one idle all through may go, turn open or not (retention keeps nothing for a turn
        // rolled back while open), and so may one a person's `git gc` took.
        let mut at_end = at_end;
        at_end.retain(|_, last| {
            let there = repo.has_object(*last);
            unknown |= !there;
            there
        });
        for (head, &last) in &at_end {
            let first = at_begin.get(head).copied();
            let mut walked = Vec::new();
            let mut next = Some(last);
            while let Some(commit) = next.filter(|c| Some(*c) != first) {
                match self.parent(commit) {
                    Ok(parent) => {
                        walked.push(commit);
                        next = parent;
                    }
                    Err(_) => break, // a commit a prune removed
                }
            }
            // Rewritten: which of its commits were made meanwhile is not known.
            match next == first {
                true => chains.push(walked),
                false => unknown = true,
            }
        }
        Ok(OthersDuring {
            chains,
            unknown,
            heads_at_end: at_end,
            ended: end.is_some(),
        })
    }

    /// The commits of `session`'s chain that turn `record` was open between: its begin (or the
    /// redo that reopened it, when `record` starts there), and its end: its end commit, where
    /// the session began its next turn (left open), or the undo that rolled it back while
    /// open; `None` while it is open. Costs a commit read per commit of the chain since the
    /// turn began.
    fn turn_span(&self, session: &str, record: &Record) -> Result<(ObjectId, Option<ObjectId>)> {
        if record.ended_at.is_some() {
            return Ok((record.begin, Some(record.commit)));
        }
        let turn = encode_id("turn", &record.turn)?;
        let head = self.ref_target(&session_ref(session, "head")?)?;
        let (walked, _) = self.chain_back(head, Some(record.begin))?;
        let (mut start, mut rolled_back) = (record.begin, None);
        for (commit, message) in walked.iter().rev() {
            match ChainKind::of(message) {
                ChainKind::Begin => return Ok((start, Some(rolled_back.unwrap_or(*commit)))),
                ChainKind::Undo => match reopening_in(message, &turn) {
                    Some(reopened) => {
                        if reopened == record.before {
                            start = *commit;
                        }
                        rolled_back = None;
                    }
                    None if rolled_back_in(message).contains(&record.turn) => {
                        rolled_back = Some(*commit);
                    }
                    None => {}
                },
                ChainKind::End | ChainKind::Trim => {}
            }
        }
        Ok((start, rolled_back))
    }

    /// The paths other sessions' turns and undos changed while turn `record` of `session` was
    /// open: the files their end commits in [`Self::commits_of_others_during`] name (not those
    /// another session announced), and the paths their undo and redo commits name (for older
    /// ones, what their trees changed). A path one of them changed is theirs, so an undo of this
    /// turn leaves it alone. Costs a commit read per such commit (and a tree diff for an older
    /// one).
    fn changed_by_other_sessions(
        &self,
        session: &str,
        record: &Record,
        current: ObjectId,
    ) -> Result<HashSet<BString>> {
        let repo = self.repo();
        let mut paths = HashSet::new();
        let during = self.commits_of_others_during(session, record)?;
        if during.unknown {
            // What another session did meanwhile cannot be read any more (its chain was
            // trimmed and the old commits removed): any change of the turn may be theirs, but
            // those an ended turn named its own when it ended (knowing what the others did).
            let after = record.after.unwrap_or(current);
            let changes = tree_changes(&repo, self.reads(), record.before, after)?;
            let (end, _) = commit_and_tree(&repo, record.commit)?;
            let own: HashSet<BString> = match record.ended_at {
                Some(_) => parse_files(end.message_raw_sloppy()).unwrap_or_default(),
                None => Vec::new(),
            }
            .into_iter()
            .map(|f| f.file)
            .collect();
            return Ok(changes
                .into_iter()
                .map(|c| c.path)
                .filter(|path| !own.contains(path))
                .collect());
        }
        for commit in during.commits() {
            paths.extend(self.paths_of_chain_commit(commit)?.1);
        }
        Ok(paths)
    }

    /// For undo or redo commit `commit`, stopped before it finished, what it found at each of
    /// `paths` (its point's) and what it left there (its plan, its tree's) where the store says
    /// it made that change (see [`Store::may_have_written`]); `None` elsewhere, and for all
    /// where it names no point. Costs a commit read, a read of the store's record of runs, and
    /// two tree lookups per path.
    fn stopped_found_and_left(
        &self,
        commit: ObjectId,
        paths: &[BString],
    ) -> Result<Vec<Option<FoundAndLeft>>> {
        let repo = self.repo();
        let (object, plan) = commit_and_tree(&repo, commit)?;
        let message = object.message_raw_sloppy();
        let point = point_of_run(message).filter(|point| self.reads().0.contains(point));
        let (Some(point), made) = (point, self.may_have_written(message)) else {
            return Ok(vec![None; paths.len()]);
        };
        let mut sides = Vec::with_capacity(paths.len());
        for path in paths {
            sides.push(match made.contains(path) {
                true => Some((
                    side_at(&repo, point, path.as_ref())?,
                    side_at(&repo, plan, path.as_ref())?,
                )),
                false => None,
            });
        }
        Ok(sides)
    }

    /// For undo or redo commit `commit`, what it found at each of `paths` (its point's, or
    /// `found_at`'s: where runs stopped just before it started) and what it left there (its
    /// tree's); `None` when that is not known: one stopped before it finished (its tree is only
    /// what it planned), a redo that names no point (written before stop 42), or a point gone
    /// (a redo's lives as a restore's). Costs a commit read and two tree lookups per path.
    fn found_and_left(
        &self,
        commit: ObjectId,
        paths: &[BString],
        found_at: Option<ObjectId>,
    ) -> Result<Option<Vec<FoundAndLeft>>> {
        let repo = self.repo();
        let (object, left) = commit_and_tree(&repo, commit)?;
        let message = object.message_raw_sloppy();
        let point = found_at.or_else(|| point_of_run(message));
        let Some(point) = point.filter(|_| !is_unfinished(message)) else {
            return Ok(None);
        };
        if !self.reads().0.contains(&point) {
            return Ok(None);
        }
        let mut sides = Vec::with_capacity(paths.len());
        for path in paths {
            let found = side_at(&repo, point, path.as_ref())?;
            sides.push((found, side_at(&repo, left, path.as_ref())?));
        }
        Ok(Some(sides))
    }

    /// The paths whose work other sessions' turns and redos made from the start of `first`, a
    /// turn of `session`, to now (`current`), and still stands: each session's chain since, in
    /// order, the files an end commit names as its turn's own or shared (unless `session`
    /// changed them meanwhile), those of a turn left open until its session began another or
    /// still open until now (likewise; one a redo gave back is open again), what an undo that
    /// rolled an open turn back left alone (likewise), and the paths a redo names, less those
    /// an undo of theirs took back since. Theirs, whatever the project holds now, even what
    /// `session` left there again. (What a session whose chain was rewritten since, by a trim,
    /// did then is not known here.) Costs a commit read per commit other sessions made since
    /// (and per commit of `session`'s chain while a turn listing a shared file was open), and
    /// a tree diff per turn left open or still open.
    fn changed_by_other_sessions_since(
        &self,
        session: &str,
        first: &Record,
        current: ObjectId,
    ) -> Result<HashSet<BString>> {
        let (start, _) = self.turn_span(session, first)?;
        let repo = self.repo();
        let mut paths = HashSet::new();
        let own = |origin: Origin| matches!(origin, Origin::Unannounced | Origin::Announced);
        let mut records_of: HashMap<String, Vec<Record>> = HashMap::new();
        // The turn of the session whose chain holds `commit` that `found` picks.
        let mut record_of = |commit: ObjectId, found: &dyn Fn(&Record) -> bool| {
            let session_of = self.record(commit)?.session;
            if !records_of.contains_key(&session_of) {
                // (None left, say pruned: nothing of it can be told.)
                let sessions = self.sessions(Some(&session_of))?.into_iter().next();
                records_of.insert(session_of.clone(), sessions.unwrap_or_default().1);
            }
            Ok::<_, Error>(records_of[&session_of].iter().find(|r| found(r)).cloned())
        };
        for chain in self.commits_of_others_between(session, start, None)?.chains {
            let mut standing = HashSet::new();
            // The turn begun last, while no end or undo has closed it: at first, the one open
            // when the window starts, begun before it (r87 (1)).
            let first = chain.last().copied();
            let open_then = match first {
                Some(first) => self
                    .turn_open_before(first)?
                    .map(|open| (first, open.begin)),
                None => None,
            };
            let mut open = match open_then {
                Some((first, begin)) => record_of(first, &|r| r.begin == begin)?,
                None => None,
            };
            // What an open turn did until it ended (left open: where its session began the
            // next, `end`) or until now (still open, `None`) is its own; a shared path too,
            // unless this session changed it meanwhile (r83 (5)), as for an ended turn below.
            let own_so_far = |open: Record, end: Option<ObjectId>, standing: &mut HashSet<_>| {
                let mut shared = Vec::new();
                for (path, origin) in self.turn_paths(&open.session, &open, current)? {
                    match origin {
                        Origin::Unannounced | Origin::Announced => drop(standing.insert(path)),
                        Origin::Shared => shared.push(path),
                        Origin::Other => {}
                    }
                }
                if !shared.is_empty() {
                    if let Some(ours) = self.changed_by_session_during(session, open.begin, end)? {
                        standing.extend(shared.into_iter().filter(|p| !ours.contains(p)));
                    }
                }
                Ok::<_, Error>(())
            };
            for commit in chain.into_iter().rev() {
                let (object, _) = commit_and_tree(&repo, commit)?;
                let message = object.message_raw_sloppy();
                let kind = ChainKind::of(message);
                match (kind, parse_files(message)) {
                    (ChainKind::Begin, _) => {
                        // One left open ended where its session began this one.
                        if let Some(left) = open.take() {
                            own_so_far(left, Some(commit), &mut standing)?;
                        }
                        open = record_of(commit, &|r| r.begin == commit)?;
                    }
                    (ChainKind::End, Some(files)) => {
                        let (own_files, shared): (Vec<_>, Vec<_>) =
                            files.into_iter().partition(|f| own(f.origin));
                        standing.extend(own_files.into_iter().map(|f| f.file));
                        // A shared one too, unless this session changed it meanwhile (r82 (1):
                        // shared because a third session's turn was open).
                        let shared = shared.into_iter().filter(|f| f.origin == Origin::Shared);
                        let shared: Vec<BString> = shared.map(|f| f.file).collect();
                        if !shared.is_empty() {
                            let begin = self.record(commit)?.begin;
                            let ours =
                                self.changed_by_session_during(session, begin, Some(commit))?;
                            if let Some(ours) = ours {
                                standing.extend(shared.into_iter().filter(|p| !ours.contains(p)));
                            }
                        }
                    }
                    (ChainKind::Undo, _) if !message.contains_str(REDO_TRAILER) => {
                        // The open turn it rolled back (begun before this turn's start when the
                        // undo comes first, r86 (3)): what the undo left alone that changed
                        // while that turn was open stands (not what it left for the earlier
                        // turns, r86 (1)), unless this session changed it meanwhile (r85 (1)).
                        let rolled_back = rolled_back_in(message);
                        let rolled = self
                            .turn_open_before(commit)?
                            .filter(|o| rolled_back.contains(&o.turn));
                        let left: Vec<BString> = lines_with(message, LEFT_ALONE)
                            .filter_map(decode_path)
                            .collect();
                        let point = id_in(message, UNDO_POINT);
                        if let (Some(rolled), Some(point), false) = (rolled, point, left.is_empty())
                        {
                            let during = Some(commit);
                            let changed: HashSet<BString> =
                                tree_changes(&repo, self.reads(), rolled.before, point)?
                                    .into_iter()
                                    .map(|c| c.path)
                                    .collect();
                            if let Some(ours) =
                                self.changed_by_session_during(session, rolled.begin, during)?
                            {
                                standing.extend(
                                    left.into_iter()
                                        .filter(|p| changed.contains(p) && !ours.contains(p)),
                                );
                            }
                        }
                        for path in self.paths_of_chain_commit(commit)?.1 {
                            standing.remove(&path);
                        }
                    }
                    (ChainKind::End | ChainKind::Undo, _) => {
                        standing.extend(self.paths_of_chain_commit(commit)?.1);
                    }
                    (ChainKind::Trim, _) => {}
                }
                if kind != ChainKind::Begin {
                    open = None;
                }
                // A redo that gave the open turn back: open again, from where the redo found
                // the project (r85 (2)).
                if kind == ChainKind::Undo && message.contains_str(REDO_TRAILER) {
                    if let Some(turn) = reopened_in(message).next() {
                        open = record_of(commit, &|r| r.turn == turn)?;
                    }
                }
            }
            // One still open (r82 (8)): its work so far, which no end commit lists yet.
            if let Some(open) = open {
                own_so_far(open, None, &mut standing)?;
            }
            paths.extend(standing);
        }
        Ok(paths)
    }

    /// The turn open in its session's chain just before chain commit `commit`, with the
    /// "before" it was open from (where the latest redo that gave it back left it, else its
    /// begin's): back over undos, redos and trims to a begin; none when an end comes first, or
    /// an undo rolled the turn back (and no redo gave it back since). Costs a commit read per
    /// commit walked.
    fn turn_open_before(&self, commit: ObjectId) -> Result<Option<Record>> {
        self.turn_open_at(self.parent(commit)?)
    }

    /// [`Self::turn_open_before`] the child of chain commit `last` (`None`: the chain's start).
    fn turn_open_at(&self, mut last: Option<ObjectId>) -> Result<Option<Record>> {
        let repo = self.repo();
        // The newest redo walked over that gave a turn back, and whether the newest undo or
        // redo that named a turn rolled it back.
        let mut reopening: Option<BString> = None;
        let mut rolled_back: HashMap<String, bool> = HashMap::new();
        while let Some(commit) = last {
            let (object, _) = commit_and_tree(&repo, commit)?;
            let message = object.message_raw_sloppy();
            match ChainKind::of(message) {
                ChainKind::Begin => {
                    let mut record = self.record(commit)?;
                    if rolled_back.get(&record.turn) == Some(&true) {
                        return Ok(None); // over: an undo rolled it back
                    }
                    let turn = encode_id("turn", &record.turn)?;
                    if let Some(before) = reopening.and_then(|m| reopening_in(&m, &turn)) {
                        record.before = before; // (r87 (8))
                    }
                    return Ok(Some(record));
                }
                ChainKind::End => return Ok(None),
                ChainKind::Undo | ChainKind::Trim => {
                    if reopening.is_none() && reopened_in(message).next().is_some() {
                        reopening = Some(message.to_owned());
                    }
                    for turn in reopened_in(message) {
                        rolled_back.entry(turn).or_insert(false);
                    }
                    for turn in rolled_back_in(message) {
                        rolled_back.entry(turn).or_insert(true);
                    }
                    last = self.parent(commit)?
                }
            }
        }
        Ok(None)
    }

    /// What `session` itself changed (its turns' files, the paths its undos and redos name)
    /// while the turn of another session begun at commit `begin` was open, until chain commit
    /// `end` (its end, or where its session began the next turn; `None`: until now): `None`
    /// when that cannot be told (its chain rewritten since). Costs a commit read per commit of
    /// its chain then.
    fn changed_by_session_during(
        &self,
        session: &str,
        begin: ObjectId,
        end: Option<ObjectId>,
    ) -> Result<Option<HashSet<BString>>> {
        let repo = self.repo();
        let head_in = |commit: ObjectId| -> Result<Option<ObjectId>> {
            let message = commit_and_tree(&repo, commit)?
                .0
                .message_raw_sloppy()
                .to_owned();
            Ok(parse_other_heads(&message)
                .get(&session_ref(session, "head")?)
                .copied())
        };
        let last = match end {
            Some(end) => head_in(end)?,
            None => self.ref_target(&session_ref(session, "head")?)?,
        };
        let Some(last) = last else {
            return Ok(Some(HashSet::new())); // it stood nowhere yet
        };
        let first = head_in(begin)?;
        let (walked, met) = self.chain_back(Some(last), first)?;
        if first.is_some() && !met {
            return Ok(None);
        }
        let mut paths = HashSet::new();
        for (commit, _) in walked {
            paths.extend(self.paths_of_chain_commit(commit)?.1);
        }
        Ok(Some(paths))
    }

    /// What chain commit `commit` of another session changed, with its kind: the files an end
    /// commit names, the paths an undo or redo names (for an older one, or one that wrote
    /// nothing, what its tree changed from its parent's, past runs stopped before they
    /// finished); none for another kind. Costs a commit read (and a tree diff for an older
    /// one).
    fn paths_of_chain_commit(&self, commit: ObjectId) -> Result<(ChainKind, Vec<BString>)> {
        let repo = self.repo();
        let (object, tree) = commit_and_tree(&repo, commit)?;
        let message = object.message_raw_sloppy();
        let kind = ChainKind::of(message);
        if let (ChainKind::End, Some(files)) = (kind, parse_files(message)) {
            return Ok((kind, files.into_iter().map(|f| f.file).collect()));
        }
        // An undo of an open turn leaves the session's tree as it was (its "before"): the
        // paths it changed are named.
        let changed: Vec<BString> = lines_with(message, CHANGED)
            .filter_map(crate::snapshot::visibility::decode_path)
            .collect();
        if kind == ChainKind::Undo && !changed.is_empty() {
            return Ok((kind, changed));
        }
        let mut parent = object.parent_ids().next().map(|id| id.detach());
        let (ChainKind::End | ChainKind::Undo, Some(_)) = (kind, parent) else {
            return Ok((kind, Vec::new()));
        };
        // (A run stopped before it finished is skipped: its tree is what it planned, and for
        // what the session left the tree before it stands, r92 (1).)
        let before = loop {
            let Some(id) = parent else {
                return Ok((kind, Vec::new()));
            };
            let (object, before) = commit_and_tree(&repo, id)?;
            if !is_unfinished(object.message_raw_sloppy()) {
                break before;
            }
            parent = object.parent_ids().next().map(|id| id.detach());
        };
        let changes = tree_changes(&repo, self.reads(), before, tree)?;
        Ok((kind, changes.into_iter().map(|c| c.path).collect()))
    }

    /// The turns of other sessions that overlapped turn `record` of `session` (were open at
    /// some moment while it was), each with what it announced and what changed while both were
    /// open. A turn overlapped when its begin or end commit was made meanwhile, or it is open
    /// now as its session's latest turn and not rolled back (an open turn its runtime never
    /// ended stops counting once its session begins another). The time both were open runs
    /// from the later begin to the earlier end, each a snapshot (`after`: the turn's "after",
    /// or the project now); what changed in it is the diff of those two. When what another
    /// session did meanwhile cannot be seen any more (pruned or trimmed since), the whole turn
    /// counts as overlapped by an unknown turn that announced nothing. Costs a commit read per
    /// commit other sessions made meanwhile, and a tree diff per overlapping turn.
    fn overlapping_turns(
        &self,
        session: &str,
        record: &Record,
        after: ObjectId,
    ) -> Result<Vec<Overlap>> {
        let repo = self.repo();
        let kind_of = |commit| -> Result<ChainKind> {
            Ok(ChainKind::of(
                commit_and_tree(&repo, commit)?.0.message_raw_sloppy(),
            ))
        };
        let others = self.commits_of_others_during(session, record)?;
        // What the redo that gave this turn back (its "before" since) wrote is the session's
        // own doing, not a change while another turn was open (r87 (3)).
        let redo_left = match self.reopened_by(session, record)? {
            Some(redo) => Some((
                commit_and_tree(&repo, redo)?.1,
                self.paths_of_chain_commit(redo)?.1,
            )),
            None => None,
        };
        // A prune that removed or trimmed sessions while the turn was open and older than the
        // retention (so not kept for it) left it blind to what they did.
        let blind = self
            .ref_target(&turn_ref(session, "blind", &record.turn)?)?
            .is_some();
        let unknown = others.unknown || blind;
        let mut turn_commits = Vec::new();
        // Open turns an undo rolled back meanwhile: open until that undo (its undo point),
        // unless a redo gave the turn back since (open again, till now). Each session's
        // commits come newest first, so a turn's latest undo or redo settles it.
        let mut rolled_back_at: HashMap<(String, String), ObjectId> = HashMap::new();
        let mut settled: HashSet<(String, String)> = HashSet::new();
        // Each other session's turns, read once.
        let mut records_of: HashMap<String, Vec<Record>> = HashMap::new();
        let mut read_records = |session: &str| -> Result<Vec<Record>> {
            if !records_of.contains_key(session) {
                records_of.insert(session.to_owned(), self.session_records(session)?);
            }
            Ok(records_of[session].clone())
        };
        for commit in others.commits() {
            match kind_of(commit)? {
                ChainKind::Undo => {}
                ChainKind::Trim => continue,
                ChainKind::Begin | ChainKind::End => {
                    turn_commits.push(commit);
                    continue;
                }
            }
            let (object, _) = commit_and_tree(&repo, commit)?;
            let message = object.message_raw_sloppy();
            let point = id_in(message, UNDO_POINT);
            // Only the turn open then: an older one left open was not being worked on, and
            // one its session began since does not change that (r86 (4)).
            let session_of = self.record(commit)?.session;
            let latest = self.turn_open_before(commit)?.map(|r| r.turn);
            for turn in reopened_in(message) {
                settled.insert((session_of.clone(), turn));
            }
            for turn in rolled_back_in(message) {
                let key = (session_of.clone(), turn);
                if let (Some(point), true) = (point, latest.as_ref() == Some(&key.1)) {
                    if settled.insert(key.clone()) {
                        rolled_back_at.insert(key, point);
                    }
                }
            }
        }
        let during: HashSet<ObjectId> = others.commits().collect();
        // A session's latest turn, if open at this turn's end (now, for one still open), is
        // its last commit then but for undos and redos (made while it was open). One an undo
        // rolled back is over: `turn end` refuses it. For an end in the past, the heads its
        // commit recorded tell, and the undos and redos after the begin whether an undo had
        // rolled it back by then (r83 (6): one open across this turn's whole time and rolled
        // back or ended since was open beside it all the same); those are open until this
        // turn's end.
        let mut open_at_end: HashSet<(String, String)> = HashSet::new();
        for &head in others.heads_at_end.values() {
            let mut last = Some(head);
            // The turns the undos and redos walked over rolled back (`false`) or gave back
            // (`true`), the newest of each settling it.
            let mut given_back: HashMap<String, bool> = HashMap::new();
            while let Some(commit) = last {
                match kind_of(commit)? {
                    ChainKind::Undo | ChainKind::Trim => {
                        if others.ended {
                            let (object, _) = commit_and_tree(&repo, commit)?;
                            let message = object.message_raw_sloppy();
                            for turn in reopened_in(message) {
                                given_back.entry(turn).or_insert(true);
                            }
                            for turn in rolled_back_in(message) {
                                given_back.entry(turn).or_insert(false);
                            }
                        }
                        last = self.parent(commit)?
                    }
                    ChainKind::Begin => {
                        let open = self.record(commit)?;
                        let open_then = match others.ended {
                            true => given_back.get(&open.turn).copied().unwrap_or(true),
                            false => {
                                let marker = turn_ref(&open.session, "rolled-back", &open.turn)?;
                                // (A `turn end` killed before it moved the head left it on the
                                // begin.)
                                let ref_now = turn_ref(&open.session, "turns", &open.turn)?;
                                let still_open = self.ref_target(&ref_now)? == Some(commit);
                                still_open && self.ref_target(&marker)?.is_none()
                            }
                        };
                        if open_then {
                            turn_commits.push(commit);
                            open_at_end.insert((open.session, open.turn));
                        }
                        break;
                    }
                    ChainKind::End => break,
                }
            }
        }
        let mut turns = BTreeSet::new();
        turns.extend(rolled_back_at.keys().cloned());
        // A turn another session left open ended where that session began its next turn (or
        // where an undo rolled it back before): when that turn began meanwhile, the one left
        // open was open beside this turn until its end.
        let mut left_open: HashMap<(String, String), ObjectId> = HashMap::new();
        for &commit in &turn_commits {
            let seen = self.record(commit)?;
            if seen.begin == commit {
                let records = read_records(&seen.session)?;
                let next = records.iter().position(|r| r.begin == commit);
                if let Some(earlier) = next.filter(|&i| i > 0).map(|i| &records[i - 1]) {
                    if let (None, Some(end)) = (earlier.ended_at, earlier.after) {
                        left_open.insert((seen.session.clone(), earlier.turn.clone()), end);
                    }
                }
            }
            turns.insert((seen.session, seen.turn));
        }
        turns.extend(left_open.keys().cloned());
        let mut overlaps = Vec::new();
        if unknown {
            overlaps.push(Overlap {
                announced: Vec::new(),
                changed: tree_changes(&repo, self.reads(), record.before, after)?
                    .into_iter()
                    .map(|c| c.path)
                    .collect(),
            });
        }
        for (other, turn) in turns {
            // The turn as it is now: ended since, or still open.
            let Some(commit) = self.ref_target(&turn_ref(&other, "turns", &turn)?)? else {
                continue;
            };
            let theirs = self.record(commit)?;
            let undone_at = rolled_back_at.get(&(other.clone(), turn.clone()));
            let met = during.contains(&theirs.begin) || during.contains(&theirs.commit);
            let open_then = open_at_end.contains(&(other.clone(), turn.clone()));
            if theirs.ended_at.is_some() && !met && !open_then {
                continue; // ended before this turn began (an undo of it meanwhile is not a turn)
            }
            let start = match during.contains(&theirs.begin) {
                true => theirs.before,
                false => record.before,
            };
            let ended_left_open = left_open.get(&(other.clone(), turn.clone()));
            // (One open at this turn's end, whatever it did after, until that end.)
            let end = match (theirs.after, ended_left_open, undone_at) {
                _ if open_then => after,
                (Some(their_after), _, _) => their_after,
                (None, Some(end), _) | (None, None, Some(end)) => *end,
                (None, None, None) => after,
            };
            let mut changed: HashSet<BString> = tree_changes(&repo, self.reads(), start, end)?
                .into_iter()
                .map(|c| c.path)
                .collect();
            // What a path holds as a redo left it is that redo's change, not a turn's: this
            // turn's own redo's, or the one that gave the other turn back meanwhile (r120 (3):
            // else another session's redo read as `shared`, and `--force` took it).
            // (Where the other's redo found the path as this turn began with it: its change
            // is the path's whole change before the redo, not the other turn's work meanwhile.)
            let mut drop_redo_writes =
                |(left, wrote): &(ObjectId, Vec<BString>), found: Option<ObjectId>| -> Result<()> {
                    for path in wrote {
                        let at = |tree| side_at(&repo, tree, path.as_ref());
                        let found_as_begun = match found {
                            Some(found) => at(found)? == at(record.before)?,
                            None => true,
                        };
                        if found_as_begun && at(*left)? == at(end)? {
                            changed.remove(path);
                        }
                    }
                    Ok(())
                };
            if let (Some(redo_left), true) = (&redo_left, start == record.before) {
                drop_redo_writes(redo_left, None)?;
            }
            let reopened = self.as_reopened(&other, theirs.clone())?;
            let redo = self.reopened_by(&other, &reopened)?;
            if let Some(redo) = redo.filter(|r| during.contains(r)) {
                let (object, left) = commit_and_tree(&repo, redo)?;
                let message = object.message_raw_sloppy();
                let found = id_in(message, REDO_POINT);
                // (Only where the undo it redid came before this turn began: the work it gives
                // back was done before then, not while both were open.)
                let redid = id_in(message, REDID);
                if redid.is_some_and(|undo| !during.contains(&undo)) {
                    let wrote = self.paths_of_chain_commit(redo)?.1;
                    drop_redo_writes(&(left, wrote), Some(found.unwrap_or(left)))?;
                }
            }
            overlaps.push(Overlap {
                announced: self.announced_by(&other, &theirs)?,
                changed,
            });
        }
        Ok(overlaps)
    }

    /// The redo that gave turn `record` of `session` back and its "before" (none when a redo
    /// gave it none). Costs a commit read per commit of the session's chain since the turn
    /// began.
    fn reopening_redo(&self, session: &str, record: &Record) -> Result<Option<ObjectId>> {
        let turn = encode_id("turn", &record.turn)?;
        let head = self.ref_target(&session_ref(session, "head")?)?;
        let (walked, _) = self.chain_back(head, Some(record.begin))?;
        let gave_before = |message: &BString| reopening_in(message, &turn) == Some(record.before);
        Ok(walked
            .into_iter()
            .find(|(_, m)| gave_before(m))
            .map(|(c, _)| c))
    }

    /// [`Self::reopening_redo`], or at the cost of a commit or ref read, none where nothing
    /// came between the turn's begin commit and its end (or the session's head).
    fn reopened_by(&self, session: &str, record: &Record) -> Result<Option<ObjectId>> {
        let next = match record.after {
            Some(_) => self.parent(record.commit)?,
            None => self.ref_target(&session_ref(session, "head")?)?,
        };
        match next == Some(record.begin) {
            true => Ok(None),
            false => self.reopening_redo(session, record),
        }
    }

    /// Each of `changes` (made in turn `record` of `session`, up to snapshot `after`) with
    /// whose it is: see [`Origin`]. A change made while no other session's turn was open is
    /// the turn's, announced or not. Costs [`Self::overlapping_turns`].
    fn attribute(
        &self,
        session: &str,
        record: &Record,
        changes: Vec<Change>,
        after: ObjectId,
    ) -> Result<Vec<(Change, Origin)>> {
        if let Some(told) = self.told_when_over(session, record)? {
            let known = |change: &Change| told.contains_key(&change.path);
            if changes.iter().all(known) {
                let origin_of = |change: Change| (told[&change.path], change);
                return Ok(changes
                    .into_iter()
                    .map(origin_of)
                    .map(|(o, c)| (c, o))
                    .collect());
            }
        }
        let own = self.announced_by(session, record)?;
        let mut overlaps = self.overlapping_turns(session, record, after)?;
        let turns_open = overlaps.len();
        // Another session's undo or redo meanwhile changed what it names, announced by none;
        // for each path one changed, what it found there and what it left (`None` where that
        // is not known: see `found_and_left`).
        let mut undone: HashMap<BString, Vec<Option<FoundAndLeft>>> = HashMap::new();
        let mut push_undo = |changed: Vec<BString>, sides: Vec<Option<FoundAndLeft>>| {
            for (path, found_and_left) in changed.iter().zip(sides) {
                undone.entry(path.clone()).or_default().push(found_and_left);
            }
            overlaps.push(Overlap {
                announced: Vec::new(),
                changed: changed.into_iter().collect(),
            });
        };
        let known = |sides: Option<Vec<FoundAndLeft>>, n: usize| match sides {
            Some(sides) => sides.into_iter().map(Some).collect(),
            None => vec![None; n],
        };
        let repo = self.repo();
        for chain in &self.commits_of_others_during(session, record)?.chains {
            // Runs stopped before they finished and the run just after them are one change,
            // from what the first found to what the last left (r95 (3)): the stopped runs,
            // where the first found the project, and the paths they planned.
            type Stopped = (Vec<ObjectId>, Option<ObjectId>, Vec<BString>);
            let mut stopped: Option<Stopped> = None;
            // (One stopped run with none after it meanwhile: where the store says it made its
            // change, from what it found to its plan; elsewhere not known, r102.)
            let alone = |(runs, _, planned): Stopped| -> Result<_> {
                let sides = match runs[..] {
                    [run] => self.stopped_found_and_left(run, &planned)?,
                    _ => vec![None; planned.len()],
                };
                Ok((planned, sides))
            };
            for &commit in chain.iter().rev() {
                let (kind, mut changed) = self.paths_of_chain_commit(commit)?;
                if kind != ChainKind::Undo {
                    if let Some(runs) = stopped.take() {
                        let (planned, sides) = alone(runs)?;
                        push_undo(planned, sides);
                    }
                    continue;
                }
                let object = commit_and_tree(&repo, commit)?.0;
                let message = object.message_raw_sloppy();
                if is_unfinished(message) {
                    let (runs, _, planned) = stopped
                        .get_or_insert_with(|| (Vec::new(), point_of_run(message), Vec::new()));
                    runs.push(commit);
                    planned.extend(changed);
                    continue;
                }
                let sides = match stopped.take() {
                    Some((_, found_at, planned)) => {
                        changed.extend(planned);
                        changed.sort_unstable();
                        changed.dedup();
                        match found_at {
                            Some(point) => self.found_and_left(commit, &changed, Some(point))?,
                            None => None,
                        }
                    }
                    None => self.found_and_left(commit, &changed, None)?,
                };
                let n = changed.len();
                push_undo(changed, known(sides, n));
            }
            if let Some(runs) = stopped {
                let (planned, sides) = alone(runs)?;
                push_undo(planned, sides);
            }
        }
        // A path whose whole change in the turn is one such undo's or redo's (the turn began on
        // what it found, and ends on what it left), where no other session's turn was open, is
        // that run's: the turn's undo leaves it, as it leaves another's announced edit.
        let by_an_undo_alone = |change: &Change| {
            let turns = overlaps[..turns_open].iter();
            !turns.into_iter().any(|o| o.changed.contains(&change.path))
                && undone.get(&change.path).map(Vec::as_slice)
                    == Some(&[Some((change.before, change.after))])
        };
        let covers = |paths: &[BString], path: &BString| {
            paths.iter().any(|a| is_within(path.as_ref(), a.as_ref()))
        };
        Ok(changes
            .into_iter()
            .map(|change| {
                let path = &change.path;
                let mine = covers(&own, path);
                let meanwhile = overlaps.iter().filter(|o| o.changed.contains(path));
                let (mut changed_meanwhile, mut claimed) = (false, false);
                for overlap in meanwhile {
                    changed_meanwhile = true;
                    claimed |= covers(&overlap.announced, path);
                }
                let origin = match (mine, claimed) {
                    (true, false) => Origin::Announced,
                    (true, true) => Origin::Shared,
                    (false, true) => Origin::Other,
                    (false, false) if by_an_undo_alone(&change) => Origin::Other,
                    (false, false) if changed_meanwhile => Origin::Shared,
                    (false, false) => Origin::Unannounced,
                };
                (change, origin)
            })
            .collect())
    }

    /// For turn `record` of `session` whose time ended with no end commit (left open when its
    /// session began the next, or rolled back while open), whose each path it changed was
    /// then, as the commit that ended its time tells it (the next begin, the undo; the newest
    /// that tells it). `None` for a turn ended or open, or one told by no such commit (written
    /// before stop 49). Costs a ref read, and a commit read per commit of the session's chain
    /// since the turn began.
    fn told_when_over(
        &self,
        session: &str,
        record: &Record,
    ) -> Result<Option<HashMap<BString, Origin>>> {
        let rolled_back = || -> Result<bool> {
            let marker = turn_ref(session, "rolled-back", &record.turn)?;
            Ok(self.ref_target(&marker)?.is_some())
        };
        if record.ended_at.is_some() || (record.after.is_none() && !rolled_back()?) {
            return Ok(None);
        }
        let turn = encode_id("turn", &record.turn)?;
        let head = self.ref_target(&session_ref(session, "head")?)?;
        for (_, message) in self.chain_back(head, Some(record.begin))?.0 {
            let told = told_in(&message, &turn);
            if !told.is_empty() {
                return Ok(Some(told));
            }
        }
        Ok(None)
    }

    /// The paths open turn `record` of `session`, rolled back, had made its own when its time
    /// ended that a redo finding the project at `found` gives back to it although the redo
    /// writes nothing there: each still holds what it held then, and the session's last undo
    /// or redo to change it since the turn began was a redo (a run stopped after its writes,
    /// or one that could not give the turn back while another undo held it) (r88 (2), (3)).
    /// Not a path an undo changed that something else put back since (a user's `restore` of
    /// the undo point), nor one no undo or redo changed (the turn had taken back an earlier
    /// turn's change, r88 (1)): a user's edit there put back to the same bytes cannot be told
    /// from the turn's work (r90 (5)), and those bytes stay as they are. Costs a commit read
    /// per commit of the session's chain since the turn began, and two tree lookups per path.
    fn kept_through_rollback(
        &self,
        session: &str,
        record: &Record,
        found: ObjectId,
    ) -> Result<Vec<BString>> {
        let repo = self.repo();
        let head = self.ref_target(&session_ref(session, "head")?)?;
        let turn = encode_id("turn", &record.turn)?;
        // What each undo or redo of the session changed since, newest first, and whether it
        // was a redo; the newest that told the turn's files (as in [`Self::told_when_over`]),
        // with the project it found; what the undos that told them left alone (someone
        // else's change stood there, and stays).
        let mut changed_by = Vec::new();
        let mut told_then = None;
        let mut left_alone = Vec::new();
        for (commit, message) in self.chain_back(head, Some(record.begin))?.0 {
            let redo = message.lines().any(|l| l == REDO_TRAILER.as_bytes());
            let paths: Vec<BString> = lines_with(&message, CHANGED)
                .filter_map(decode_path)
                .collect();
            changed_by.push((paths, redo));
            let told = told_in(&message, &turn);
            if told.is_empty() {
                continue;
            }
            left_alone.extend(lines_with(&message, LEFT_ALONE).filter_map(decode_path));
            if told_then.is_none() {
                let ended = match id_in(&message, UNDO_POINT) {
                    Some(point) => point,
                    None => commit_and_tree(&repo, commit)?.1,
                };
                told_then = Some((told, ended));
            }
        }
        let Some((told, ended)) = told_then else {
            return Ok(Vec::new());
        };
        // (A change at the path, in it or around it: a directory made a file counts.)
        let related = |a: &BString, b: &BString| {
            is_within(a.as_bstr(), b.as_bstr()) || is_within(b.as_bstr(), a.as_bstr())
        };
        let last_by_redo = |path: &BString| {
            let mut last = changed_by
                .iter()
                .filter(|(paths, _)| paths.iter().any(|p| related(p, path)));
            last.next().is_some_and(|(_, redo)| *redo)
        };
        let mut kept = Vec::new();
        for (path, origin) in told {
            let own = matches!(origin, Origin::Unannounced | Origin::Announced);
            if !own || left_alone.iter().any(|p| related(p, &path)) || !last_by_redo(&path) {
                continue;
            }
            // (A directory counts whole: a file of the turn's there gone is a change too.)
            if entry_at(&repo, found, path.as_bstr())? == entry_at(&repo, ended, path.as_bstr())? {
                kept.push(path);
            }
        }
        Ok(kept)
    }

    /// For turn `record` of `session`, not rolled back now: what each undo that rolled it
    /// back while open (and a redo gave back since) left alone of its work, with whose each
    /// path was then. Costs a commit read per commit of the session's chain since the turn
    /// began.
    fn left_alone_when_rolled_back(
        &self,
        session: &str,
        record: &Record,
    ) -> Result<Vec<(BString, Origin)>> {
        let turn = encode_id("turn", &record.turn)?;
        let head = self.ref_target(&session_ref(session, "head")?)?;
        let mut paths = Vec::new();
        for (_, message) in self.chain_back(head, Some(record.begin))?.0 {
            let told = told_in(&message, &turn);
            for path in lines_with(&message, LEFT_ALONE).filter_map(decode_path) {
                match told.get(&path) {
                    Some(&origin) if origin != Origin::Other => paths.push((path, origin)),
                    _ => {}
                }
            }
        }
        Ok(paths)
    }

    /// The paths turn `record` of `session` changed with whose each is: as its end commit
    /// records them, or while it is open, from its "before" to `current`, with those another
    /// session announced meanwhile (`Other`) (none if an undo rolled it back: what changed
    /// since is that undo's).
    /// Costs a tree diff (a commit read for an ended turn recorded with its files).
    fn turn_paths(
        &self,
        session: &str,
        record: &Record,
        current: ObjectId,
    ) -> Result<Vec<(BString, Origin)>> {
        let repo = self.repo();
        let changes = match record.after {
            // Left open, then its session began another: it ended where that one began, or
            // where an undo rolled it back before that.
            Some(after) if record.ended_at.is_none() => {
                let changes = tree_changes(&repo, self.reads(), record.before, after)?;
                self.attribute(session, record, changes, after)?
            }
            Some(after) => {
                let (object, _) = commit_and_tree(&repo, record.commit)?;
                if let Some(files) = parse_files(object.message_raw_sloppy()) {
                    return Ok(files.into_iter().map(|f| (f.file, f.origin)).collect());
                }
                let changes = tree_changes(&repo, self.reads(), record.before, after)?;
                changes
                    .into_iter()
                    .map(|c| (c, Origin::Unannounced))
                    .collect()
            }
            // Rolled back while open: over, its work taken back, unless that undo was stopped
            // (then its work, up to where that undo found the project, may still stand).
            None if self
                .ref_target(&turn_ref(session, "rolled-back", &record.turn)?)?
                .is_some() =>
            {
                // (Or what it left alone: `undo --last --force` takes that again, r89 (4).)
                let in_part = self.turns_undone_in_part(session)?;
                let left = in_part.left_alone.get(&record.turn);
                match self.left_open_span(session, record)? {
                    (reopened, Some(ended))
                        if in_part.stopped.contains(&record.turn) || left.is_some() =>
                    {
                        let mut record = record.clone();
                        record.before = reopened.unwrap_or(record.before);
                        let changes = tree_changes(&repo, self.reads(), record.before, ended)?;
                        let mut changes = self.attribute(session, &record, changes, ended)?;
                        if let (false, Some(left)) = (in_part.stopped.contains(&record.turn), left)
                        {
                            changes.retain(|(change, _)| left.contains(&change.path));
                        }
                        changes
                    }
                    _ => Vec::new(),
                }
            }
            None => {
                let record = self.as_reopened(session, record.clone())?;
                let changes = tree_changes(&repo, self.reads(), record.before, current)?;
                self.attribute(session, &record, changes, current)?
            }
        };
        Ok(changes
            .into_iter()
            .map(|(change, origin)| (change.path, origin))
            .collect())
    }
}

/// What a range undo decided per path, before applying it.
#[derive(Default)]
struct Decisions {
    changes: Vec<Change>,
    /// Left alone.
    conflicts: Vec<BString>,
    details: Vec<ConflictDetail>,
    /// Of `changes`, the paths written by a merge.
    merged: Vec<BString>,
}

/// Takes undone turns out of single paths, latest first (see [`reverse_turns`]). Each turn's
/// "before" (as a redo reopened it) and "after" (the project now, for a turn still open) are
/// looked up once; a turn an undo rolled back whole is out already and skipped.
struct TurnMerger<'a> {
    /// Where merged texts are written (object memory unless they are to be written).
    repo: &'a gix::Repository,
    undone: &'a [Record],
    current: ObjectId,
    /// Per undone turn: `None` until looked up, then its trees (`None`: rolled back).
    trees: Vec<Option<Option<(ObjectId, ObjectId)>>>,
    /// The session's turns rolled back in part, once looked up.
    in_part: Option<UndoneInPart>,
}

impl<'a> TurnMerger<'a> {
    fn new(repo: &'a gix::Repository, undone: &'a [Record], current: ObjectId) -> Self {
        TurnMerger {
            repo,
            undone,
            current,
            trees: vec![None; undone.len()],
            in_part: None,
        }
    }

    /// The "before" and "after" trees of undone turn `index`; `None` if an undo rolled it
    /// back whole. Costs the rolled-back lookup and [`Store::as_reopened`], once per turn.
    fn trees(
        &mut self,
        locked: &Locked,
        session: &str,
        index: usize,
    ) -> Result<Option<(ObjectId, ObjectId)>> {
        if let Some(trees) = self.trees[index] {
            return Ok(trees);
        }
        let record = &self.undone[index];
        let marker = turn_ref(session, "rolled-back", &record.turn)?;
        let mut out = locked.ref_target(&marker)?.is_none();
        if !out {
            if self.in_part.is_none() {
                self.in_part = Some(locked.turns_undone_in_part(session)?);
            }
            out = self
                .in_part
                .as_ref()
                .is_some_and(|l| l.contains(&record.turn));
        }
        let trees = match out {
            true => {
                let before = locked.as_reopened(session, record.clone())?.before;
                Some((before, record.after.unwrap_or(self.current)))
            }
            false => None,
        };
        self.trees[index] = Some(trees);
        Ok(trees)
    }

    /// Take undone turns `turns` (indexes, oldest first) out of `path`, which holds `now`.
    /// Costs [`reverse_turns`] plus two tree lookups per turn.
    fn reverse(
        &mut self,
        locked: &Locked,
        session: &str,
        path: &BString,
        now: Option<Side>,
        turns: &[usize],
    ) -> Result<Reversed> {
        self.reverse_move(locked, session, (path, path), now, turns)
    }

    /// [`reverse`](Self::reverse) of a file that was at `before_path` before the turns and at
    /// `after_path` after them (a move they made), and stands at `before_path` now.
    fn reverse_move(
        &mut self,
        locked: &Locked,
        session: &str,
        (path, after_path): (&BString, &BString),
        now: Option<Side>,
        turns: &[usize],
    ) -> Result<Reversed> {
        let mut sides = Vec::new();
        let mut last_turn = None;
        for &index in turns.iter().rev() {
            let Some((before, after)) = self.trees(locked, session, index)? else {
                continue;
            };
            sides.push(TurnSides {
                before: side_at(self.repo, before, path.as_ref())?,
                after: side_at(self.repo, after, after_path.as_ref())?,
            });
            last_turn.get_or_insert(&self.undone[index].turn);
        }
        let turn = last_turn.map_or(String::new(), |t| format!(" {t:?}"));
        let (after, before) = (format!("after turn{turn}"), format!("before turn{turn}"));
        reverse_turns(
            self.repo,
            path.as_ref(),
            now,
            &sides,
            ["now", &after, &before],
        )
    }
}

/// The names of each file moved between the two sides of `changes` (as `git diff -M` pairs
/// them; with `break_rewrites`, as `git diff -B -M` does: `mv f g; echo new > f` moved `f`)
/// whose names are in `paths` (sorted), linked in rings ([`Plan::partners`]). Costs
/// [`find_renames`] on the added and deleted paths among `paths`, and with `break_rewrites`,
/// reading both sides of each modified one.
fn rename_partners(
    repo: &gix::Repository,
    changes: &[Change],
    paths: &[BString],
    break_rewrites: bool,
) -> Result<HashMap<BString, BString>> {
    let among: Vec<&Change> = changes
        .iter()
        .filter(|c| paths.binary_search(&c.path).is_ok())
        .collect();
    // (A rewrite pairs with another path's half: a lone modified path, nothing added or
    // deleted, has none, and nothing is read.)
    let break_rewrites = break_rewrites && among.len() > 1;
    let mut moved = Vec::new();
    for change in among {
        match (change.before, change.after) {
            (Some(_), None) | (None, Some(_)) => moved.push(change.clone()),
            // Rewritten in place: broken in two as `git diff -B` does, its old content may
            // have moved away and its new content come from elsewhere (files swapped).
            (Some(was), Some(now))
                if break_rewrites && is_rewrite(repo, change.path.as_ref(), was, now)? =>
            {
                moved.extend(broken(change));
            }
            _ => {}
        }
    }
    let mut partners = HashMap::new();
    for pair in find_renames(repo, &moved)? {
        let (a, b) = (&moved[pair.source].path, &moved[pair.destination].path);
        link(&mut partners, a, b);
    }
    Ok(partners)
}

/// Join the rings of names `a` and `b` are in (see [`Plan::partners`]): each takes the
/// other's next. Costs a walk of `a`'s ring.
fn link(partners: &mut HashMap<BString, BString>, a: &BString, b: &BString) {
    if a == b || other_names(partners, a.as_ref()).contains(&b) {
        return;
    }
    let next_a = partners.get(a).unwrap_or(a).clone();
    let next_b = partners.get(b).unwrap_or(b).clone();
    partners.insert(a.clone(), next_b);
    partners.insert(b.clone(), next_a);
}

/// The `paths` (sorted) that tree `after` holds and `current` lacks, or holds rewritten
/// there, each with where its file stands in `current`, as `git diff -B -M` pairs a deletion
/// (or a rewrite's old half) with an addition that is not among `paths` (empty files left
/// out; a name the turn moved a file away from, `turns_moves`, can take it back): after
/// `mv f g; echo new > f`, the turn's `f` is at `g`. Costs a tree diff, reading
/// both sides of each of `paths` changed since when something was added, and
/// [`find_renames`] on the deletions and additions it finds.
fn moved_since(
    repo: &gix::Repository,
    reads: crate::store::objects::Reads<'_>,
    (after, current): (ObjectId, ObjectId),
    (paths, turns_moves): (&[BString], &HashMap<BString, BString>),
) -> Result<HashMap<BString, BString>> {
    let changes = tree_changes(repo, reads, after, current)?;
    let the_turns = |c: &Change| paths.binary_search(&c.path).is_ok();
    // (A turn's name that its move left is one too: `mv a b`, then `mv b a`.)
    let added =
        |c: &Change| c.before.is_none() && (!the_turns(c) || turns_moves.contains_key(&c.path));
    if !changes.iter().any(added) {
        return Ok(HashMap::new());
    }
    // Empty files are all alike: none is taken for a moved one (nor by `git revert`).
    let empty = ObjectId::empty_blob(gix::hash::Kind::Sha1);
    let mut candidates = Vec::new();
    for change in changes {
        let candidate = match (change.before, change.after) {
            (Some(_), None) if the_turns(&change) => Some(change),
            (None, Some(_)) if added(&change) => Some(change),
            (Some(was), Some(now)) if the_turns(&change) => {
                let rewritten = is_rewrite(repo, change.path.as_ref(), was, now)?;
                let [old_half, _] = broken(&change);
                rewritten.then_some(old_half)
            }
            _ => None,
        };
        let non_empty = |c: &Change| c.before.or(c.after).is_some_and(|side| side.id != empty);
        candidates.extend(candidate.filter(non_empty));
    }
    let named =
        |(from, to): (usize, usize)| (candidates[from].path.clone(), candidates[to].path.clone());
    let pairs = find_renames(repo, &candidates)?.into_iter();
    let pairs = pairs.map(|p| named((p.source, p.destination)));
    // A name of the turn's takes back only the file the turn moved from it: any other file
    // there would be undone twice, at its own name's undo and at this one.
    let taken_back = |(from, to): &(BString, BString)| {
        paths.binary_search(to).is_err() || other_names(turns_moves, from.as_ref()).contains(&to)
    };
    Ok(pairs.filter(taken_back).collect())
}

/// Keep the `paths` at or below `only` (and the other name of a moved file that is);
/// `path_not_changed` when none is left. Costs a look at each path.
fn keep_below(
    paths: &mut Vec<BString>,
    only: Option<&BString>,
    partners: &HashMap<BString, BString>,
    session: &str,
) -> Result<()> {
    let Some(only) = only else {
        return Ok(());
    };
    let within = |p: &BString| is_within(p.as_ref(), only.as_ref());
    paths.retain(|p| within(p) || other_names(partners, p.as_ref()).into_iter().any(within));
    match paths.is_empty() {
        true => Err(Error::PathNotChanged {
            path: only.to_str_lossy().into_owned(),
            session: session.into(),
        }),
        false => Ok(()),
    }
}

/// A moved file one of whose names is left alone keeps its other names too: their changes
/// go, and the names join `conflicts` (undoing half a move would leave the file under no
/// name, or under two).
fn pair_conflicts(
    changes: &mut Vec<Change>,
    conflicts: &mut Vec<BString>,
    partners: &HashMap<BString, BString>,
) {
    let left: HashSet<BString> = conflicts.iter().cloned().collect();
    changes.retain(|change| {
        let names = other_names(partners, change.path.as_ref());
        if names.into_iter().any(|name| left.contains(name)) {
            conflicts.push(change.path.clone());
            return false;
        }
        true
    });
}

/// The error for an undo of `record`, a turn undone already.
fn undone_already(session: &str, record: &Record) -> Error {
    Error::Turn {
        session: session.into(),
        turn: record.turn.clone(),
        reason: "is undone already (redo it first)",
    }
}

/// Append a `key` line per path (percent-encoded) to a commit message.
fn push_path_lines(message: &mut String, key: &str, paths: &[BString]) {
    for path in paths {
        message.push_str(key);
        encode_path(message, path);
        message.push('\n');
    }
}

impl Locked<'_> {
    /// Of the paths the undos stopped since one of `undone` (still rolled back) was last
    /// rolled back to the end or given back planned to change, those that changed on disk since it was about to (or cannot be
    /// told) and hold neither what it planned nor (see the caller) what the new run writes:
    /// what stands there may be an edit after that undo's own write that put the turn's bytes
    /// back, which only a conflict keeps (r73 (8)). Costs a commit read per commit of the
    /// session's chain back to there, and an `lstat` per path each such undo planned.
    fn changed_since_stopped_undo(
        &self,
        session: &str,
        undone: &[Record],
        current: ObjectId,
    ) -> Result<HashSet<BString>> {
        // Each turn still rolled back whose last undo was stopped or left files alone: every undo
        // stopped since the last one that rolled it back to the end or a redo that gave it back
        // (a second kill's run left alone what the first's wrote and someone changed: r76 f1). (The markers first: most undos
        // take turns no undo rolled back, and need no walk of the chain.)
        let mut pending = HashMap::new();
        for record in undone {
            let marker = turn_ref(session, "rolled-back", &record.turn)?;
            if self.ref_target(&marker)?.is_some() {
                pending.insert(record.turn.clone(), record.begin);
            }
        }
        // (Also one whose last undo left files alone: an undo stopped before that one still
        // counts, r80 (4).)
        if !pending.is_empty() {
            let in_part = self.turns_undone_in_part(session)?;
            pending.retain(|turn, _| in_part.contains(turn));
        }
        let mut undos = Vec::new();
        if !pending.is_empty() {
            let head = self.ref_target(&session_ref(session, "head")?)?;
            for (commit, message) in self.chain_back(head, None)?.0 {
                let gave_back = turns_in(&message, GAVE_BACK);
                let unfinished = is_unfinished(&message);
                let to_the_end = !unfinished && lines_with(&message, LEFT_ALONE).next().is_none();
                for turn in rolled_back_in(&message) {
                    if pending.contains_key(&turn) && unfinished {
                        undos.push(commit);
                    } else if to_the_end {
                        pending.remove(&turn);
                    }
                }
                // (Back to the turn's begin at most.)
                pending.retain(|t, begin| !gave_back.contains(t) && *begin != commit);
                if pending.is_empty() {
                    break;
                }
            }
        }
        undos.dedup();
        let repo = self.repo();
        let mut changed = HashSet::new();
        for undo in undos {
            let (object, planned) = commit_and_tree(&repo, undo)?;
            let message = object.message_raw_sloppy();
            changed.extend(self.changed_since_stopped((message, planned), current)?);
        }
        Ok(changed)
    }

    /// The paths the stopped run whose unfinished record is `message` (its tree `planned`)
    /// planned to change that changed on disk since it was about to (all of them when the
    /// record names no time), unless `current` holds what it planned there and the run may have
    /// written it (its own write). Where the store says the run did not write a path (its
    /// record names its token: [`Store::not_done_by_run`]), the same bytes there are someone's
    /// edit (r76 (3)); a record of a build before takes them for the run's. Nothing there now,
    /// where it may have written or was to delete and did not, is a deletion since. Costs an `lstat` and two tree
    /// lookups per path, and a read of the store's record of runs.
    fn changed_since_stopped(
        &self,
        (message, planned): (&[u8], ObjectId),
        current: ObjectId,
    ) -> Result<Vec<BString>> {
        let repo = self.repo();
        let since = unfinished_since(message);
        let not_done = self.not_done_by_stopped(message);
        let mut changed = Vec::new();
        let planned_paths: Vec<BString> = lines_with(message, CHANGED)
            .filter_map(decode_path)
            .collect();
        for path in planned_paths.iter().cloned() {
            // An empty directory (or a tree of them) where the run removed what was in it (as
            // the store's record of it says): the run's own leftover (killed between removing a
            // directory's last file and the directory; its unlink is the change time), and it
            // holds no byte (r90 (1), r92 (5)). Where it removed nothing there, the user
            // emptied it (r93 (2)).
            let below = |p: &&BString| **p != path && is_within(p.as_ref(), path.as_ref());
            let removed_below = match &not_done {
                Some(NotDone::Paths { not_done: not, .. }) => {
                    planned_paths.iter().filter(below).any(|p| !not.contains(p))
                }
                Some(NotDone::All) | None => false,
            };
            if removed_below && self.holds_no_file(&path) {
                continue;
            }
            let not_its = match &not_done {
                Some(NotDone::All) => true,
                Some(NotDone::Paths { not_done, .. }) => not_done.contains(&path),
                None => false,
            };
            let planned_there = side_at(&repo, planned, path.as_ref())?;
            // Nothing there, so no change time to read: gone since the run wrote there, or since
            // it was to delete it and did not, it was deleted since (r75 (1)).
            if not_done.is_some() && !self.on_disk(&path) {
                if not_its == planned_there.is_none() {
                    changed.push(path);
                }
                continue;
            }
            let now = side_at(&repo, current, path.as_ref())?;
            // What it planned, where it did not write: someone else put it there, whatever the
            // change time says (the files of a directory moved in keep theirs: r96 (1)).
            if not_its && now == planned_there {
                changed.push(path);
                continue;
            }
            if since.is_some_and(|since| !self.changed_since(&path, since)) {
                continue;
            }
            if not_its || now != planned_there {
                changed.push(path);
            }
        }
        Ok(changed)
    }

    /// What the stopped undos and redos the session's head stands on (nothing finished since)
    /// wrote that the project still holds: each path one planned that holds its plan now and
    /// did not change since it was about to ([`Self::changed_since_stopped`]), as a change from
    /// `base`, what the session left before them. Costs a commit read per such run and the
    /// stopped check of each.
    fn written_by_stopped_at_head(
        &self,
        session: &str,
        base: ObjectId,
        current: ObjectId,
    ) -> Result<Vec<Change>> {
        let repo = self.repo();
        let (mut written, mut seen) = (Vec::new(), HashSet::new());
        let mut next = self.ref_target(&session_ref(session, "head")?)?;
        while let Some(commit) = next {
            let (object, planned) = commit_and_tree(&repo, commit)?;
            let message = object.message_raw_sloppy();
            if !is_unfinished(message) {
                break;
            }
            let changed: HashSet<BString> = self
                .changed_since_stopped((message, planned), current)?
                .into_iter()
                .collect();
            // (Newest first: a later run's word on a path is the last.)
            for path in lines_with(message, CHANGED).filter_map(decode_path) {
                if changed.contains(&path) || !seen.insert(path.clone()) {
                    continue;
                }
                let now = side_at(&repo, current, path.as_ref())?;
                let before = side_at(&repo, base, path.as_ref())?;
                if now == side_at(&repo, planned, path.as_ref())? && now != before {
                    written.push(Change {
                        path,
                        before,
                        after: now,
                    });
                }
            }
            next = object.parent_ids().next().map(|id| id.detach());
        }
        Ok(written)
    }

    /// Whether something stands at project path `path` whose change time is `since` or
    /// later (by the kernel's coarse clock, which may lag the precise one by a tick: 10 ms of
    /// slack), or whose time cannot be read. Costs an `lstat`.
    fn changed_since(&self, path: &BString, since: SystemTime) -> bool {
        let Some(found) = self.lstat(path) else {
            return false;
        };
        let changed = crate::fs::change_time(&found);
        let slack = Duration::from_millis(10);
        changed.is_none_or(|changed| changed + slack >= since)
    }

    /// Whether project path `path` is a directory (not a symlink to one) holding nothing but
    /// directories that hold nothing else (what a run killed while it emptied a tree leaves):
    /// [`crate::restore::holds_only`] with nothing deleted. Costs a walk of the directory.
    fn holds_no_file(&self, path: &BString) -> bool {
        let Ok(root) = crate::fs::ProjectRoot::open(self.project()) else {
            return false;
        };
        crate::restore::holds_only(&root, path.as_bstr(), &HashSet::new()).unwrap_or(false)
    }

    /// Whether something stands at project path `path` (no snapshot may see it). Costs an
    /// `lstat`.
    fn on_disk(&self, path: &BString) -> bool {
        self.lstat(path).is_some()
    }

    /// Whether an empty directory stands at project path `path`. Costs an `lstat`, and a read
    /// of the directory when one stands there.
    fn is_empty_dir(&self, path: &BString) -> bool {
        let Ok(os) = crate::paths::os_path(path) else {
            return false;
        };
        let at = self.project().join(os);
        let is_dir = std::fs::symlink_metadata(&at).is_ok_and(|m| m.is_dir());
        is_dir && std::fs::read_dir(&at).is_ok_and(|mut entries| entries.next().is_none())
    }

    /// What stands at project path `path`, not following a symlink. Costs an `lstat`.
    fn lstat(&self, path: &BString) -> Option<std::fs::Metadata> {
        let path = crate::paths::os_path(path).ok()?;
        std::fs::symlink_metadata(self.project().join(path)).ok()
    }

    /// Those of `before` (what [`Self::in_the_way`] said before the run of `outcome`) that
    /// stand after it: not a directory the run emptied by its deletions, and so removed (a dry
    /// run tells what its deletions would leave: r111 (4), r113 (3)). Costs an `lstat` each,
    /// and for a dry run a walk of each such directory.
    fn still_in_the_way(&self, before: &[BString], outcome: &RestoreOutcome) -> Vec<BString> {
        if !outcome.dry_run {
            let now = self.in_the_way(before);
            return before.iter().filter(|p| now.contains(p)).cloned().collect();
        }
        let deleted: HashSet<&[u8]> = outcome.deleted.iter().map(|p| p.as_slice()).collect();
        // A directory goes when the run's deletions empty it: it holds something, and each
        // thing in it is a file deleted or a directory that goes (an empty one stays), and the
        // run writes nothing below it (model seed 466).
        // Walked without recursion; a parent is listed before its subdirectories.
        let stays = |top: &BString| -> bool {
            let below = |path: &BString| is_within(path.as_ref(), top.as_ref()) && path != top;
            if outcome.written.iter().any(below) {
                return true;
            }
            let mut dirs: Vec<(BString, usize)> = vec![(top.clone(), 0)];
            let (mut holds, mut kept) = (vec![false], vec![false]);
            let mut next = 0;
            while next < dirs.len() {
                let here = next;
                next += 1;
                let Ok(os) = crate::paths::os_path(&dirs[here].0) else {
                    return true;
                };
                let Ok(entries) = std::fs::read_dir(self.project().join(os)) else {
                    return true; // (what cannot be read stays)
                };
                for entry in entries {
                    let Ok(entry) = entry else { return true };
                    let name = entry.file_name();
                    let Ok(name) = gix::path::os_str_into_bstr(&name) else {
                        return true;
                    };
                    let mut path = dirs[here].0.clone();
                    path.push(b'/');
                    path.extend_from_slice(name);
                    holds[here] = true;
                    match entry.file_type() {
                        Ok(kind) if kind.is_dir() => {
                            dirs.push((path, here));
                            holds.push(false);
                            kept.push(false);
                        }
                        Ok(_) if deleted.contains(path.as_slice()) => {}
                        _ => kept[here] = true,
                    }
                }
            }
            for n in (1..dirs.len()).rev() {
                if kept[n] || !holds[n] {
                    kept[dirs[n].1] = true;
                }
            }
            kept[0] || !holds[0]
        };
        before.iter().filter(|p| stays(p)).cloned().collect()
    }

    /// Those of `conflicts` (left alone while planning) where `force` would leave them too: a
    /// directory or a special file stands there. Costs an `lstat` each.
    fn in_the_way(&self, conflicts: &[BString]) -> Vec<BString> {
        let never_replaced = |path: &&BString| {
            self.lstat(path).is_some_and(|found| {
                let kind = found.file_type();
                !kind.is_file() && !kind.is_symlink()
            })
        };
        conflicts.iter().filter(never_replaced).cloned().collect()
    }

    /// [`Store::undo`] with `only`: `record`'s work taken out of each path it changed (below
    /// `only`, if given) by a three-way merge, and the later turns' and anyone else's kept.
    /// Costs a [`track`](Self::track), then per path a merge when others changed it too.
    fn undo_alone(
        &self,
        session: &str,
        record: &Record,
        only: Option<BString>,
        options: &UndoOptions,
    ) -> Result<RestoreOutcome> {
        let marker = turn_ref(session, "rolled-back", &record.turn)?;
        self.refuse_undone_already(session, record)?;
        let (current, index) = self.current(options.dry_run)?;
        let repo = self.repo();
        let mut paths = Vec::new();
        // Changed by someone else while the turn was open: their edit is in its "after", so no
        // merge can tell it from the turn's (a conflict; with `force`, the turn's before).
        let mut during = self.changed_by_other_sessions(session, record, current)?;
        for (path, origin) in self.turn_paths(session, record, current)? {
            match origin {
                Origin::Other => continue, // another session's, announced meanwhile
                Origin::Shared => during.insert(path.clone()),
                _ => false,
            };
            paths.push(path);
        }
        paths.sort_unstable();
        let reopened = self.as_reopened(session, record.clone())?;
        let before = reopened.before;
        // (Where the project holds the turn's before already, there is nothing to keep: a
        // stopped undo's own write.)
        for path in
            self.changed_since_stopped_undo(session, std::slice::from_ref(record), current)?
        {
            if side_at(&repo, current, path.as_ref())? != side_at(&repo, before, path.as_ref())? {
                during.insert(path);
            }
        }
        // A path another session's turn changed since this one began, holding again what this
        // one left (r80 (6)), is theirs too: no merge can tell their work from none.
        let after = record.after.unwrap_or(current);
        for path in self.changed_by_other_sessions_since(session, record, current)? {
            if paths.binary_search(&path).is_ok()
                && side_at(&repo, current, path.as_ref())? == side_at(&repo, after, path.as_ref())?
            {
                during.insert(path);
            }
        }
        // A file the turn moved is undone as one: both names, or neither.
        let moves = tree_changes(&repo, self.reads(), before, after)?;
        let partners = rename_partners(&repo, &moves, &paths, true)?;
        keep_below(&mut paths, only.as_ref(), &partners, session)?;
        let merges = match options.dry_run {
            true => self.repo().with_object_memory(),
            false => self.repo(),
        };
        let undone = std::slice::from_ref(record);
        let mut merger = TurnMerger::new(&merges, undone, current);
        let (mut changes, mut conflicts, mut details, mut merged) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut kept = Vec::new();
        // A file the turn left that was moved since (a later turn's rename, say): its work is
        // taken out where the file stands now, as `git revert` follows a rename.
        let moved = moved_since(&repo, self.reads(), (after, current), (&paths, &partners))?;
        // A move the turn made that a later one reversed (`mv a b`, then `mv b a`): the file
        // stands at its old name again, where the turn's change to it is taken out, as one
        // file (`b` goes with it), as `git revert` does.
        let moved_back: HashMap<BString, BString> = moved
            .iter()
            .filter(|(from, to)| partners.get(*from) == Some(to) && partners.get(*to) == Some(from))
            .map(|(from, to)| (to.clone(), from.clone()))
            .collect();
        // The turn's own moves pair the names the files stand at now: both undone, or neither.
        let now_at = |p: &BString| moved.get(p).unwrap_or(p).clone();
        let partners: HashMap<BString, BString> = partners
            .iter()
            .map(|(a, b)| (now_at(a), now_at(b)))
            .filter(|(a, b)| a != b)
            .collect();
        for turns_path in paths {
            if moved_back.values().any(|b| *b == turns_path) {
                continue;
            }
            let path = now_at(&turns_path);
            let now = side_at(&repo, current, path.as_ref())?;
            // Something the snapshot cannot see as a file stands there (ignored, say, or a
            // directory): an undo that deletes leaves a file it cannot see as it is (`kept`),
            // and a directory or special file in the way (a conflict, as a range undo's); one
            // that writes finds either in the way.
            let unseen = now.is_none() && self.on_disk(&path);
            let moved_from = moved_back.get(&turns_path);
            let shared =
                during.contains(&turns_path) || moved_from.is_some_and(|b| during.contains(b));
            let reversed = match shared {
                true => Reversed::Conflict {
                    hunks: Vec::new(),
                    markers: None,
                    reached: None,
                },
                false => {
                    let paths = (&turns_path, moved_from.unwrap_or(&turns_path));
                    merger.reverse_move(self, session, paths, now, &[0])?
                }
            };
            let reversed = match reversed {
                // What no merge can take (another session's edit in the turn's work, a file
                // added or deleted on one side, a binary or a symlink both changed): with
                // `force`, the turn's before, whole, as a plain undo writes it.
                Reversed::Conflict { markers: None, .. } if options.force => Reversed::Side {
                    side: side_at(&repo, before, turns_path.as_ref())?,
                    merged: false,
                },
                reversed => reversed,
            };
            match reversed {
                Reversed::Side { side: None, .. } if unseen => {
                    match self.in_the_way(std::slice::from_ref(&path)).is_empty() {
                        true => kept.push(path),
                        false => conflicts.push(path),
                    }
                }
                Reversed::Side { side, .. } if side == now => {}
                Reversed::Side { side, merged: m } => {
                    // Written where the file stands now, it keeps the later rename: recorded
                    // as merged, so that a later undo of that rename leaves it alone.
                    if m || path != turns_path {
                        merged.push(path.clone());
                    }
                    changes.push(Change {
                        path,
                        before: now,
                        after: side,
                    });
                }
                Reversed::Conflict {
                    hunks,
                    markers: Some((mode, text)),
                    ..
                } if options.force => {
                    details.push(ConflictDetail::new(path.clone(), false, hunks));
                    let id = write_blob(&merges, &text)?;
                    let after = Some(Side { mode, id });
                    changes.push(Change {
                        path,
                        before: now,
                        after,
                    });
                }
                Reversed::Conflict { hunks, .. } => {
                    details.push(ConflictDetail::new(path.clone(), false, hunks));
                    conflicts.push(path);
                }
            }
        }
        pair_conflicts(&mut changes, &mut conflicts, &partners);
        // The project as the undo leaves it: now, with the changes.
        let edits = changes.iter().map(|c| (c.path.as_bstr(), c.after));
        let target = tree_with(&merges, current, edits)?;
        let plan = Plan {
            target,
            current,
            steps: changes.iter().map(|c| step_of(c, 0)).collect(),
            sights: vec![self.sight_of_before(session, &reopened)?],
            force: options.force,
            dry_run: options.dry_run,
            objects: Some(merges.clone()),
            index,
            partners: partners.clone(),
        };
        let in_the_way_before = self.in_the_way(&conflicts);
        let finish = |outcome: &mut RestoreOutcome| {
            let mut in_the_way = self.still_in_the_way(&in_the_way_before, outcome);
            in_the_way.append(&mut outcome.in_the_way);
            outcome.in_the_way = in_the_way;
            let mut all = conflicts.clone();
            all.append(&mut outcome.conflicts);
            outcome.conflicts = all;
            outcome.kept.extend(kept.iter().cloned());
            let written = merged.iter().filter(|p| outcome.written.contains(p));
            outcome.merged = written.cloned().collect();
            outcome.conflict_details = details.clone();
        };
        if options.dry_run {
            let mut outcome = self.apply(plan)?;
            finish(&mut outcome);
            return Ok(outcome);
        }
        let base = match self.ref_target(&session_ref(session, "head")?)? {
            Some(head) => commit_and_tree(&repo, head)?.1,
            None => current,
        };
        let chain_record = |raw: &RestoreOutcome, (parent, run): On| -> Result<ChainRecord> {
            let mut outcome = raw.clone();
            finish(&mut outcome);
            // (Its paths below `only` alone do not roll the turn back.)
            let rolled_back = outcome.failed.is_empty() && only.is_none();
            if !rolled_back && wrote_nothing(&outcome) {
                return Ok(None); // nothing for a redo to give back
            }
            let title = format!(
                "rewind: undo of turn {:?} alone, in session {session:?}",
                record.turn
            );
            let turns = rolled_back.then_some(record.turn.as_str());
            let about = (session, record.turn.as_str(), run);
            let message = self.undo_message(&title, about, &outcome, (turns.into_iter(), ""))?;
            let on = (base, parent);
            let commit = self.chain_commit(on, (&changes, &[]), &outcome, &message)?;
            let marks = match rolled_back {
                true => vec![(marker.clone(), Some(record.commit))],
                false => Vec::new(),
            };
            Ok(Some((commit, marks)))
        };
        let (mut outcome, unrecorded) = self.apply_recorded(session, plan, &chain_record)?;
        finish(&mut outcome);
        Ok(ChainRun::Undo.outcome(outcome, unrecorded))
    }

    /// `base`, the tree of what the session left, with each path of `plans` (a stopped run's
    /// plan: the path and the run's tree) where it still holds that run's plan put back to what
    /// was there before the run, `left(path)` (a directory of the plan where `left` has none
    /// stays: its files are in `plans` too). Costs two tree lookups per path and a tree write.
    fn without_stopped_plans(
        &self,
        base: ObjectId,
        plans: &HashMap<BString, ObjectId>,
        left: impl Fn(&BString) -> Result<Option<Side>>,
    ) -> Result<ObjectId> {
        let repo = self.repo();
        let mut edits = Vec::new();
        for (path, plan) in plans {
            let there = entry_at(&repo, base, path.as_bstr())?;
            if there != entry_at(&repo, *plan, path.as_bstr())? {
                continue; // a later word, or none of the plan's
            }
            let is_dir = there.is_some_and(|(mode, _)| mode.is_tree());
            let file_there = side_at(&repo, base, path.as_bstr())?;
            match left(path)? {
                Some(side) if is_dir || file_there != Some(side) => {
                    edits.push((path.as_bstr(), Some(side)))
                }
                None if file_there.is_some() => edits.push((path.as_bstr(), None)),
                _ => {}
            }
        }
        match edits.is_empty() {
            true => Ok(base),
            false => tree_with(&repo, base, edits),
        }
    }

    /// The commit that appends an undo or redo to the session's chain, on `parent` (written;
    /// the head is moved by [`Self::move_head_and_markers`]): `message`, with a
    /// `Rewind-Changed:` line per path it wrote or deleted, and what the session left, `base`
    /// (its last commit's tree: an end, an undo, or an open turn's "before") with the `changes`
    /// the undo or redo made and those it found `already` made. So edits by someone else, made
    /// before or after it, stay told apart from the session's own, and a path it left alone
    /// stays a conflict.
    fn chain_commit(
        &self,
        (base, parent): (ObjectId, Option<ObjectId>),
        (changes, already): (&[Change], &[Change]),
        outcome: &RestoreOutcome,
        message: &str,
    ) -> Result<ObjectId> {
        let done = |change: &&Change| {
            let mut changed = outcome.written.iter().chain(&outcome.deleted);
            changed.any(|p| *p == change.path)
        };
        let made = changes.iter().filter(done).chain(already);
        let tree = tree_with(
            &self.repo(),
            base,
            made.map(|c| (c.path.as_bstr(), c.after)),
        )?;
        let mut message = message.to_owned();
        for path in outcome.written.iter().chain(&outcome.deleted) {
            message.push_str(CHANGED);
            crate::snapshot::visibility::encode_path(&mut message, path);
            message.push('\n');
        }
        self.commit_object(&message, tree, parent)
    }

    /// The "before" of open turn `record` of `session` that a redo gives back: the project as
    /// the redo found it (`outcome.undo`), with each path the redo wrote or deleted or found
    /// back `already` (where a stopped undo never wrote), and each
    /// the turn had made its own that the redo found as the rollback left it (see
    /// [`Store::kept_through_rollback`]) and its "before" could see, as the turn found it
    /// (`found_it`, its "before" when the undo rolled it back). So what the turn did until that
    /// undo is its work again, and what the redo brought back of the session's earlier turns is
    /// not; what changed while it was rolled back is not its either. Returns it with the
    /// lines for the redo's commit that say what it could see. Costs
    /// [`Store::kept_through_rollback`], [`Self::reopening_redo`] and the sight of
    /// `found_it`, a tree edit per such path, and a commit.
    fn reopened_before(
        &self,
        (session, record): (&str, &Record),
        (outcome, already): (&RestoreOutcome, &[Change]),
        found_it: ObjectId,
    ) -> Result<(ObjectId, String)> {
        let repo = self.repo();
        let mut earlier = record.clone();
        earlier.before = found_it;
        // (What it found back where a stopped undo never wrote counts as brought back: r98 (3).)
        let found_back = already.iter().map(|c| &c.path);
        let mut paths: BTreeSet<BString> = (outcome.written.iter().chain(&outcome.deleted))
            .chain(found_back)
            .cloned()
            .collect();
        // (Not a path the turn's "before" could not see: an ignored file the redo's rules
        // bring into view was no work of the turn's.)
        let earlier_redo = self.reopening_redo(session, &earlier)?;
        let mut sight = self.sight_of_before_made_by(&earlier, earlier_redo)?;
        for path in self.kept_through_rollback(session, record, outcome.undo.0)? {
            if sight.can_see(&repo, path.as_bstr())? {
                paths.insert(path);
            }
        }
        let mut edits = Vec::with_capacity(paths.len());
        for path in &paths {
            edits.push((path.as_bstr(), side_at(&repo, found_it, path.as_bstr())?));
        }
        let tree = tree_with(&repo, outcome.undo.0, edits)?;
        if tree == outcome.undo.0 {
            return Ok((tree, String::new()));
        }
        // A tree no snapshot took: recorded as the project the redo found was (what it left
        // out), a record that keeps it for git and for prune as long as the chain names it.
        // (Not over a record of its own: the turn's first "before", say, when the redo found
        // the project as the turn did but for what it wrote back.)
        if self.ref_target(&snapshot_record(tree))?.is_none() {
            self.record_as(tree, outcome.undo.0)?;
        }
        // It sees what the project the redo found could see, and where the redo wrote, what
        // the turn's "before" could (r118 (4): a file made while ignored is no work of the
        // turn's once the redo's `.gitignore` shows it); a "before" made up by an earlier redo
        // sees as that redo says.
        let mut lines = made_of_lines(tree, (outcome.undo.0, found_it), &paths);
        if let Some(redo) = earlier_redo {
            let (commit, _) = commit_and_tree(&repo, redo)?;
            lines.push_str(&made_of_lines_in(commit.message_raw_sloppy()));
        }
        Ok((tree, lines))
    }

    /// What turn `record` of `session` could see when it began: its "before" as the turn's
    /// begin commit recorded it, and for a reopened turn, as the redo that made it up says
    /// (which may have found the project as the turn's begin did, but for its writes). Costs
    /// [`Store::visibility`], and where an undo or redo came while the turn was open,
    /// [`Self::reopening_redo`] and [`Store::visibility_made_up`].
    fn sight_of_before(&self, session: &str, record: &Record) -> Result<Visibility> {
        let redo = self.reopened_by(session, record)?;
        self.sight_of_before_made_by(record, redo)
    }

    /// [`Self::sight_of_before`] of `record`, reopened by redo commit `redo` (if one did).
    /// Costs [`Store::visibility_made_up`].
    fn sight_of_before_made_by(
        &self,
        record: &Record,
        redo: Option<ObjectId>,
    ) -> Result<Visibility> {
        match redo {
            Some(redo) => self.visibility_made_up(record.before, record.begin, redo),
            None => self.visibility(record.before, Some(record.begin)),
        }
    }

    /// An undo's chain commit message: `title`, its undo point, a line per turn it rolled back
    /// (and what the open one it rolled back changed, `told`), per path it left alone and per path it merged, whether it is unfinished, and the
    /// trailers of `session`'s `turn` at the store's clock.
    fn undo_message<'t>(
        &self,
        title: &str,
        (session, turn, run): (&str, &str, Option<&str>),
        outcome: &RestoreOutcome,
        (rolled_back, told): (impl Iterator<Item = &'t str>, &str),
    ) -> Result<String> {
        let mut message = format!("{title}\n\n{UNDO_POINT}{}\n", outcome.undo);
        for turn in rolled_back {
            message.push_str(&format!("{ROLLED_BACK}{}\n", encode_id("turn", turn)?));
        }
        message.push_str(told);
        push_path_lines(&mut message, LEFT_ALONE, &outcome.conflicts);
        push_path_lines(&mut message, MERGED, &outcome.merged);
        if let Some(token) = run {
            message.push_str(&unfinished_lines(token));
        }
        // (Where the other sessions stood: what they do after is theirs, for its redo; that
        // there were none is said too, or the redo would take it for an older undo.)
        let heads = self.other_heads_lines(session)?;
        message.push_str(match heads.is_empty() {
            true => NO_OTHER_HEADS,
            false => &heads,
        });
        message.push_str(&trailers(session, turn, self.now()?, None, None)?);
        message.push_str(UNDO_TRAILER);
        message.push('\n');
        Ok(message)
    }

    /// Carry out an undo's or redo's `plan` with its record on `session`'s chain (`record` makes
    /// it of an outcome, [`On`] the chain's head before) written before the first file changes,
    /// of what the run is about to do and marked unfinished (each path it names may hold what
    /// the run found or what it planned: both are the session's), then again after, of what it
    /// did. A kill in between leaves an undo on the chain and its turns rolled back (its redo
    /// brings back what it took and finds the rest already back, and a run of the undo again
    /// finishes it), and a redo not yet redone (the next takes the same undo). An error before
    /// any file changed puts the chain back; one in the record after files changed comes with
    /// the outcome (the caller finishes it, then [`ChainRun::outcome`]). Costs
    /// [`Self::apply`], and two `packed-refs` rewrites per record.
    fn apply_recorded(
        &self,
        session: &str,
        plan: Plan,
        record: &dyn Fn(&RestoreOutcome, On) -> Result<ChainRecord>,
    ) -> Result<(RestoreOutcome, Option<Error>)> {
        let parent = self.ref_target(&session_ref(session, "head")?)?;
        // The marks the record before the run moved, as they were.
        let mut early = None;
        let mut before_changes = |planned: &RestoreOutcome, token: &str| -> Result<()> {
            if let Some((commit, marks)) = record(planned, (parent, Some(token)))? {
                let mut was = Vec::new();
                for (name, _) in &marks {
                    was.push((name.clone(), self.ref_target(name)?));
                }
                self.move_head_and_markers(session, Some(commit), marks)?;
                early = Some(was);
            }
            Ok(())
        };
        let done = self.apply_with(plan, &mut before_changes);
        // (Nothing to record of the plan: nothing of it was done to record either.)
        let Some(was) = early else {
            return done.map(|outcome| (outcome, None));
        };
        let outcome = match done {
            Ok(outcome) => outcome,
            Err(e) => {
                // Nothing changed: the chain goes back as it was.
                let _ = self.move_head_and_markers(session, parent, was);
                return Err(e);
            }
        };
        let recorded = record(&outcome, (parent, None)).and_then(|made| {
            let (commit, mut marks) = match made {
                Some((commit, marks)) => (Some(commit), marks),
                None => (parent, Vec::new()),
            };
            // The marks the early record moved that this one leaves: as they were.
            for (name, value) in was {
                if !marks.iter().any(|(moved, _)| *moved == name) {
                    marks.push((name, value));
                }
            }
            self.move_head_and_markers(session, commit, marks)
        });
        Ok((outcome, recorded.err()))
    }

    /// Move `session`'s head to `commit` and set or delete the turn `markers` in one step: a
    /// kill leaves all of them moved or none (the session's loose refs are packed first, so
    /// that the rename of `packed-refs` is the only commit point). Costs two rewrites of
    /// `packed-refs`.
    fn move_head_and_markers(
        &self,
        session: &str,
        commit: Option<ObjectId>,
        markers: Vec<(String, Option<ObjectId>)>,
    ) -> Result<()> {
        let head = session_ref(session, "head")?;
        self.pack_refs(head.strip_suffix("head").unwrap_or(&head))?;
        let mut edits = vec![(head, commit)];
        edits.extend(markers);
        self.set_refs_at_once(&edits)
    }
}

impl Store {
    /// Per-file totals across `session`: each file once, from its state before the first turn
    /// that touched it to its state after the last one. A turn rolled back counts only for what
    /// its undo left of it; a file someone else changed between two turns that touched it
    /// counts their lines too, and is [`Origin::Shared`].
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), &rewind::OpenOptions::new("/tmp/rewind"))?;
    /// let totals = store.changes("chat-42")?;
    /// println!("{} files, +{} -{}", totals.total_files, totals.total_additions, totals.total_deletions);
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn changes(&self, session: &str) -> Result<SessionChanges> {
        self.changes_with(session, &SummaryOptions::default())
    }

    /// [`Self::changes`], its files listed as `options` says (renames: between each file's
    /// first "before" and last "after").
    pub fn changes_with(&self, session: &str, options: &SummaryOptions) -> Result<SessionChanges> {
        let records = self.session_records(session)?;
        let current = match records.iter().any(|r| r.after.is_none()) {
            true => self.track(&TrackOptions::default())?.hash.0,
            false => ObjectId::empty_tree(gix::hash::Kind::Sha1), // not looked at
        };
        let repo = self.repo();
        let in_part = self.turns_undone_in_part(session)?;
        // Per path: its first change's "before", its last change's "after", and the strongest
        // origin (shared over announced over unannounced).
        let mut net: BTreeMap<BString, (Change, Origin)> = BTreeMap::new();
        for record in &records {
            // A turn rolled back is not the session's work any more, but for what its undo left.
            let rolled_back = turn_ref(session, "rolled-back", &record.turn)?;
            let only = match self.ref_target(&rolled_back)? {
                None => None,
                Some(_) => match in_part.still_its_work(&record.turn) {
                    None => continue,
                    Some(only) => only,
                },
            };
            let origins: HashMap<BString, Origin> = self
                .turn_paths(session, record, current)?
                .into_iter()
                .collect();
            let after = record.after.unwrap_or(current);
            for change in tree_changes(&repo, self.reads(), record.before, after)? {
                let Some(&origin) = origins.get(&change.path) else {
                    continue; // another session's
                };
                if only.is_some_and(|only| !only.contains(&change.path)) {
                    continue;
                }
                match net.get_mut(&change.path) {
                    Some((first, strongest)) => {
                        // Changed by someone else between two of the session's turns: the
                        // totals hold their lines too, and say so.
                        if first.after != change.before {
                            *strongest = Origin::Shared.max(*strongest);
                        }
                        first.after = change.after;
                        *strongest = origin.max(*strongest);
                    }
                    None => {
                        net.insert(change.path.clone(), (change, origin));
                    }
                }
            }
        }
        let (changes, origins): (Vec<Change>, Vec<Origin>) = net
            .into_values()
            .filter(|(c, _)| c.before != c.after)
            .unzip();
        let files = (changes.iter().zip(origins))
            .map(|(c, origin)| turn_file(&repo, plain(c.clone()), origin))
            .collect::<Result<Vec<_>>>()?;
        let files = summarized(&repo, files, &changes, options)?;
        let (total_additions, total_deletions) = totals(&files);
        Ok(SessionChanges {
            session: session.into(),
            total_files: files.len(),
            total_additions,
            total_deletions,
            files,
        })
    }

    /// Per-file stats of the changes from tree `before` to tree `after`, all unannounced (the
    /// files of a turn recorded before turns recorded whose each change is).
    fn files_between(&self, before: ObjectId, after: ObjectId) -> Result<Vec<TurnFile>> {
        let repo = self.repo();
        tree_changes(&repo, self.reads(), before, after)?
            .into_iter()
            .map(|c| turn_file(&repo, plain(c), Origin::Unannounced))
            .collect()
    }

    /// What retention must leave of other sessions for the open turns begun since `since`
    /// (their attribution reads what other sessions did while they were open): the sessions to
    /// keep whole, those that did something during such a turn (begun after it, or moved on
    /// from the head its begin commit names); and the sessions not to trim, also those it
    /// knew (trimming rewrites a chain, so the turn could no longer find that head, and would
    /// take all its changes as shared). A session idle all through may go. Costs reading
    /// every turn record.
    pub(crate) fn sessions_open_turns_need(
        &self,
        since: DateTime<Utc>,
    ) -> Result<(HashSet<String>, HashSet<String>)> {
        let sessions = self.sessions(None)?;
        let repo = self.repo();
        let (mut keep, mut untrimmed) = (HashSet::new(), HashSet::new());
        for (session, records) in &sessions {
            for record in records.iter().filter(|r| r.ended_at.is_none()) {
                let marker = turn_ref(session, "rolled-back", &record.turn)?;
                if record.started_at < since || self.ref_target(&marker)?.is_some() {
                    continue;
                }
                let (begin, _) = commit_and_tree(&repo, record.begin)?;
                let known = parse_other_heads(begin.message_raw_sloppy());
                for (other, _) in sessions.iter().filter(|(other, _)| other != session) {
                    let head = session_ref(other, "head")?;
                    if known.get(&head).copied() != self.ref_target(&head)? {
                        keep.insert(other.clone());
                    }
                    untrimmed.insert(other.clone());
                }
            }
        }
        Ok((keep, untrimmed))
    }
}

impl Locked<'_> {
    /// Mark the open turns begun before `cutoff` blind (`refs/rewind/sessions/<S>/blind/<T>`):
    /// retention removed or trimmed sessions without keeping what those turns' attribution
    /// needed, so every change of theirs counts as made while another turn was open. Costs
    /// reading every turn record.
    pub(crate) fn blind_old_open_turns(&self, cutoff: DateTime<Utc>) -> Result<()> {
        for (session, records) in self.sessions(None)? {
            for record in records.iter().filter(|r| r.ended_at.is_none()) {
                if record.started_at < cutoff {
                    let blind = turn_ref(&session, "blind", &record.turn)?;
                    self.set_ref(&blind, record.begin, "rewind: prune")?;
                }
            }
        }
        Ok(())
    }
    /// Keep at most `max` turns of `session`: the oldest others go (rolled-back turns stay
    /// until they expire, since the user may redo them; open turns stay), and the session's
    /// chain is rewritten without them. A session left with no turn keeps its head (what was
    /// dropped is named there) until it expires. Returns the turns that went.
    pub(crate) fn trim_session(&self, session: &str, max: usize) -> Result<Vec<String>> {
        let records = self.session_records(session)?;
        let (dropped, dropped_commits) = self.turns_over_limit(session, &records, max)?;
        if dropped.is_empty() {
            return Ok(dropped);
        }
        // The chain is copied without the dropped turns' commits, oldest first; the undo and
        // redo commits stay (each is the session's last word on the paths it changed), and the
        // commits a message names (a redo's undo, an end's begin) are named by their new ids.
        let mut chain = Vec::new();
        let mut next = self.ref_target(&session_ref(session, "head")?)?;
        while let Some(commit) = next {
            chain.push(commit);
            next = self.parent(commit)?;
        }
        // Each copy names the commits dropped just before it, and the files they named as their
        // own, oldest first (with what earlier trims dropped before each).
        let repo = self.repo();
        let begin_of: HashMap<ObjectId, ObjectId> =
            records.iter().map(|r| (r.commit, r.begin)).collect();
        let mut copies: HashMap<ObjectId, ObjectId> = HashMap::new();
        let mut parent: Option<ObjectId> = None;
        let mut dropped_before = String::new();
        for &commit in chain.iter().rev() {
            let (object, end_tree) = commit_and_tree(&repo, commit)?;
            let message = object.message_raw_sloppy();
            // (An earlier trim's commit goes too: what it named comes before what follows.)
            if dropped_commits.contains(&commit) || ChainKind::of(message) == ChainKind::Trim {
                dropped_before.push_str(&dropped_lines(message));
                dropped_before.push_str(&format!("{DROPPED}{commit}\n"));
                for stood_for in lines_with(message, COPY_OF) {
                    let line = format!("{DROPPED_COPY_OF}{}\n", stood_for.as_bstr());
                    dropped_before.push_str(&line);
                }
                let files = parse_files(message).unwrap_or_default();
                // (Where its turn began, for its shared files: see `dropped_files_after`.)
                if let Some(begin) = begin_of.get(&commit) {
                    if files.iter().any(|f| f.origin == Origin::Shared) {
                        dropped_before.push_str(&format!("{DROPPED_BEGUN}{begin}\n"));
                    }
                }
                for file in files {
                    let key = match file.origin {
                        Origin::Unannounced | Origin::Announced => DROPPED_FILE,
                        Origin::Shared => DROPPED_SHARED_FILE,
                        Origin::Other => continue,
                    };
                    let mut line = String::from(key);
                    crate::snapshot::visibility::encode_path(&mut line, &file.file);
                    if file.origin == Origin::Shared {
                        let end = side_at(&repo, end_tree, file.file.as_ref())?;
                        line.push_str(&format!(" {}", side_text(end)));
                    }
                    dropped_before.push_str(&format!("{line}\n"));
                }
                continue;
            }
            let dropped = std::mem::take(&mut dropped_before);
            let copy = self.rewrite_commit_with(commit, parent, |message| {
                // (Its own dropped lines, from earlier trims, come after the ones dropped now.)
                let earlier = dropped_lines(message);
                let mut rest: BString = message
                    .lines_with_terminator()
                    .filter(|l| !is_dropped_line(l))
                    .collect::<Vec<_>>()
                    .concat()
                    .into();
                if !rest.ends_with(b"\n") {
                    rest.push(b'\n');
                }
                let dropped = newest_dropped(format!("{dropped}{earlier}"));
                rest.extend_from_slice(format!("{dropped}{COPY_OF}{commit}\n").as_bytes());
                *message = rest;
                for key in [REDID, BEGIN] {
                    let named = message
                        .lines()
                        .find_map(|l| l.strip_prefix(key.as_bytes()))
                        .and_then(|hex| ObjectId::from_hex(hex).ok());
                    if let Some((old, new)) = named.and_then(|old| Some((old, copies.get(&old)?))) {
                        let line = |id: &ObjectId| format!("{key}{id}");
                        *message = message.replace(line(&old), line(new)).into();
                    }
                }
            })?;
            copies.insert(commit, copy);
            parent = Some(copy);
        }
        // The chain's last commits dropped, with no copy after them: a trim's commit names
        // them, on the tree of the commit before it (the empty tree when none is kept). A
        // session left with no turn gets one too: its head alone, dated by the trim, stays
        // until it expires.
        let kept_a_turn = records.len() > dropped.len();
        let named_by_copies = dropped_before.is_empty() && kept_a_turn;
        if let (false, Some(newest)) = (named_by_copies, dropped.last()) {
            let tree = match parent {
                Some(parent) => commit_and_tree(&repo, parent)?.1,
                // (Written again: a person's `git gc --prune=now` may have removed it.)
                None => self.objects().write(gix::objs::Kind::Tree, b"")?,
            };
            // Dated no earlier than the session's last turn, so that a clock behind never
            // makes the session expire before its turns would have.
            let activity = records.iter().map(|r| r.ended_at.unwrap_or(r.started_at));
            let at = activity.chain([self.now()?]).max().unwrap_or_default();
            let message = format!(
                "rewind: trim of session {session:?}\n\n{}{TRIM_TRAILER}\n{}",
                newest_dropped(dropped_before),
                trailers(session, newest, at, None, None)?
            );
            parent = Some(self.commit_object(&message, tree, parent)?);
        }
        // Every ref moves in one write of `packed-refs` (prune packed them all first): a kill
        // leaves the old chain or the new one, never turns of both.
        let mut edits: Vec<(String, Option<ObjectId>)> = Vec::new();
        for record in records.iter().filter(|r| !dropped.contains(&r.turn)) {
            // An end commit off the chain (its turn overlapped another of the session's) goes
            // with its begin.
            let last = match copies.get(&record.commit) {
                Some(copy) => *copy,
                None => {
                    let begin = copies.get(&record.begin).copied();
                    self.rewrite_commit(record.commit, begin)?
                }
            };
            edits.push((turn_ref(session, "turns", &record.turn)?, Some(last)));
            let marker = turn_ref(session, "rolled-back", &record.turn)?;
            if self.ref_target(&marker)?.is_some() {
                edits.push((marker, Some(last)));
            }
            let announced = turn_ref(session, "announced", &record.turn)?;
            if let Some(commit) = self.ref_target(&announced)? {
                let begin = copies.get(&record.begin).copied();
                let copy = self.rewrite_commit(commit, begin)?;
                edits.push((announced, Some(copy)));
            }
        }
        let head = session_ref(session, "head")?;
        let expected = session_ref(session, "expected")?;
        edits.push((head, parent));
        match kept_a_turn {
            true => {
                if let Some(commit) = self.ref_target(&expected)? {
                    let alone = self.rewrite_commit(commit, None)?; // only its tree matters
                    edits.push((expected, Some(alone)));
                }
            }
            // No turn kept (a limit of 0): the session is its head alone until it expires.
            false => edits.push((expected, None)),
        }
        for turn in &dropped {
            for kind in ["turns", "rolled-back"] {
                edits.push((turn_ref(session, kind, turn)?, None));
            }
        }
        self.set_refs_at_once(&edits)?;
        Ok(dropped)
    }
}

impl Store {
    /// The turns of `session` (its `records`) that keeping at most `max` drops: of the ended
    /// turns not rolled back, all but the newest `max` (an open turn needs its chain and its
    /// before snapshot, a rolled-back one may be redone, and the turn after one left open is
    /// where that one ended: none of them counts or goes), with their begin and end commits.
    /// Costs a ref read per turn.
    fn turns_over_limit(
        &self,
        session: &str,
        records: &[Record],
        max: usize,
    ) -> Result<(Vec<String>, HashSet<ObjectId>)> {
        let mut removable = Vec::new();
        let mut after_one_left_open = false;
        for record in records {
            let marker = turn_ref(session, "rolled-back", &record.turn)?;
            let ended = record.ended_at.is_some();
            if ended && !after_one_left_open && self.ref_target(&marker)?.is_none() {
                removable.push(record.turn.clone());
            }
            after_one_left_open = !ended;
        }
        let mut dropped = removable;
        dropped.truncate(dropped.len().saturating_sub(max));
        let commits = records
            .iter()
            .filter(|r| dropped.contains(&r.turn))
            .flat_map(|r| [r.begin, r.commit])
            .collect();
        Ok((dropped, commits))
    }

    /// The turns [`Locked::trim_session`] would drop from `session` (see
    /// [`Self::turns_over_limit`]), and whether that leaves it no turn.
    pub(crate) fn trim_preview(
        &self,
        session: &str,
        max: usize,
    ) -> Result<(Vec<String>, HashSet<ObjectId>, bool)> {
        let records = self.session_records(session)?;
        let (dropped, commits) = self.turns_over_limit(session, &records, max)?;
        let empties = dropped.len() == records.len();
        Ok((dropped, commits, empties))
    }

    /// The error for a turn (or, with `turn` `None`, a session) that is not in the store:
    /// [`Error::Pruned`] when prune removed it or its session, else [`Error::NoTurn`] or
    /// [`Error::NoSession`]. Costs reading prune's record.
    pub(crate) fn missing_turn<'t>(
        &self,
        session: &str,
        turn: impl Into<Option<&'t str>>,
    ) -> Error {
        let turn = turn.into();
        let refs = [
            turn.and_then(|turn| turn_ref(session, "turns", turn).ok()),
            session_ref(session, "").ok(),
        ];
        let refs: Vec<&str> = refs.iter().flatten().map(String::as_str).collect();
        match (self.pruned(&refs), turn) {
            (Some((at, why)), _) => Error::Pruned {
                session: session.into(),
                turn: turn.map(Into::into),
                at,
                reason: why.reason(),
            },
            (None, Some(turn)) => Error::NoTurn {
                session: session.into(),
                turn: turn.into(),
            },
            (None, None) => Error::NoSession(session.into()),
        }
    }

    /// The turns of `session`, oldest first; a session without turns does not exist.
    fn session_records(&self, session: &str) -> Result<Vec<Record>> {
        match self.sessions(Some(session))?.into_iter().next() {
            Some((_, records)) if !records.is_empty() => Ok(records),
            _ => Err(self.missing_turn(session, None)),
        }
    }

    /// The turns of `session` (or of all sessions), each session's oldest first: by position
    /// on the session's chain, never by time (the clock can step back between turns).
    ///
    /// Reads take no lock, so a prune trimming a session (which moves its turns' refs one at a
    /// time, then its head) can be seen half done: a turn off its session's chain. Then the
    /// refs are read again, for up to a second; a turn still off the chain goes last.
    fn sessions(&self, only: Option<&str>) -> Result<Vec<SessionRecords>> {
        let prefix = match only {
            Some(session) => session_ref(session, "")?,
            None => format!("{SESSIONS}/"),
        };
        // A read that fails may have met a commit a prune removed since it listed the refs.
        crate::store::refs::read_again(|| self.read_sessions(&prefix))
    }

    /// Every session's newest chain commit (a turn's begin or end, an undo, a redo, a trim's
    /// commit; a session a trim left with no turn has it alone), with when it was written.
    /// Costs listing the sessions' refs and a commit read per session.
    pub(crate) fn session_heads(&self) -> Result<Vec<(String, DateTime<Utc>)>> {
        let mut heads = Vec::new();
        for (name, commit) in self.refs_under(&format!("{SESSIONS}/"))? {
            // <SESSIONS>/<session>/head
            if name[SESSIONS.len() + 1..].split('/').nth(1) == Some("head") {
                let record = self.record(commit)?;
                let at = record
                    .ended_at
                    .map_or(record.started_at, |e| e.max(record.started_at));
                heads.push((record.session, at));
            }
        }
        Ok(heads)
    }

    /// One read of [`Self::sessions`], and whether every turn was on its session's chain.
    /// Costs a commit read per turn and per chain commit.
    fn read_sessions(&self, prefix: &str) -> Result<(Vec<SessionRecords>, bool)> {
        let mut by_session: BTreeMap<String, (Option<ObjectId>, Vec<Record>)> = BTreeMap::new();
        for (name, commit) in self.refs_under(prefix)? {
            // <SESSIONS>/<session>/head or <SESSIONS>/<session>/turns/<turn>
            let parts: Vec<&str> = name[SESSIONS.len() + 1..].split('/').collect();
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
        let mut on_chains = true;
        for (session, (head, mut records)) in by_session {
            let mut chain = Vec::new();
            let mut next = head;
            while let Some(commit) = next {
                chain.push(commit);
                next = self.parent(commit)?;
            }
            // Oldest first along the chain; a turn off the chain goes last.
            let position: HashMap<ObjectId, usize> = chain
                .iter()
                .rev()
                .enumerate()
                .map(|(i, c)| (*c, i))
                .collect();
            on_chains &= records.iter().all(|r| position.contains_key(&r.begin));
            records.sort_by_key(|r| {
                (
                    position.get(&r.begin).copied().unwrap_or(usize::MAX),
                    r.started_at,
                )
            });
            // A turn left open when its session began another (a runtime that died, say)
            // ended there, or where an undo rolled it back before that: what changed after is
            // not its work. (The next one's begin commit holds that point; a redo may have
            // given it a later "before".) A redo that reopened it before then moved its start.
            for i in 1..records.len() {
                if records[i - 1].after.is_none() {
                    let (_, began) = commit_and_tree(&self.repo(), records[i].begin)?;
                    let (reopened, rolled) = self.left_open_span(&session, &records[i - 1])?;
                    let left_open = &mut records[i - 1];
                    left_open.after = Some(rolled.unwrap_or(began));
                    left_open.before = reopened.unwrap_or(left_open.before);
                }
            }
            sessions.push((session, records));
        }
        Ok((sessions, on_chains))
    }

    /// The trees the chains of the sessions `keep` accepts name: each undo's point
    /// (`Rewind-Undo-Point:`; its redo puts those bytes back, and a turn it rolled back while
    /// open ended there even once redone), and the project as each redo found a turn it
    /// reopened (`Rewind-Reopened:`, that turn's "before" from then on). Prune keeps them on
    /// the undo chain (reachable for git) with their snapshot records, for the session's life.
    /// Costs a commit read per chain commit.
    pub(crate) fn undo_points_of_sessions(
        &self,
        keep: &dyn Fn(&str) -> bool,
    ) -> Result<Vec<ObjectId>> {
        let repo = self.repo();
        let mut points = Vec::new();
        for (name, head) in self.refs_under(&format!("{SESSIONS}/"))? {
            if !name.ends_with("/head") || !keep(&name) {
                continue;
            }
            let mut next = Some(head);
            while let Some(id) = next {
                let commit = repo
                    .find_commit(id)
                    .map_err(|e| Error::store(self.git_dir(), e))?;
                let message = commit.message_raw_sloppy();
                let named = lines_with(message, UNDO_POINT);
                points.extend(named.filter_map(|hex| ObjectId::from_hex(hex).ok()));
                for key in [REOPENED, REOPENED_BEFORE] {
                    let reopened = lines_with(message, key)
                        .filter_map(|rest| rest.split_once_str(" "))
                        .filter_map(|(_, hex)| ObjectId::from_hex(hex).ok());
                    points.extend(reopened);
                }
                next = commit.parent_ids().next().map(|id| id.detach());
            }
        }
        Ok(points)
    }

    /// The first parent of `commit`. Costs a commit read.
    pub(crate) fn parent(&self, commit: ObjectId) -> Result<Option<ObjectId>> {
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
            begin: match (ended_at, field("Rewind-Begin")) {
                (Some(_), Some(hex)) => ObjectId::from_hex(hex.as_bytes()).map_err(|_| bad())?,
                (Some(_), None) => object.parent_ids().next().map_or(commit, |id| id.detach()),
                (None, _) => commit,
            },
            files: number("Rewind-Files"),
            additions: number("Rewind-Additions"),
            deletions: number("Rewind-Deletions"),
            meta: parse_meta(&message),
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

/// Commit `id` of the store, and its tree's id.
fn commit_and_tree(repo: &gix::Repository, id: ObjectId) -> Result<(gix::Commit<'_>, ObjectId)> {
    let git_dir = repo.git_dir();
    let commit = repo.find_commit(id).map_err(|e| Error::store(git_dir, e))?;
    let tree = commit
        .tree_id()
        .map_err(|e| Error::store(git_dir, e))?
        .detach();
    Ok((commit, tree))
}

/// The entry at `path` in `tree`, if it is a blob or symlink.
/// `side` as a dropped shared file's line ends: `<mode> <id>` (octal mode), or `-` for none.
fn side_text(side: Option<Side>) -> String {
    match side {
        Some(side) => format!("{:o} {}", side.mode, side.id),
        None => "-".into(),
    }
}

/// The side [`side_text`] wrote (`Some(None)`: none); `None` if `text` is not one.
#[allow(clippy::option_option)]
fn parse_side(text: &[u8]) -> Option<Option<Side>> {
    if text == b"-" {
        return Some(None);
    }
    let (mode, id) = text.to_str().ok()?.split_once(' ')?;
    let mode = u32::from_str_radix(mode, 8).ok()?;
    Some(Some(Side {
        mode,
        id: ObjectId::from_hex(id.as_bytes()).ok()?,
    }))
}

/// The entry at `path` in `tree`, a directory's too: its mode and id. Costs a tree read per
/// path component.
fn entry_at(
    repo: &gix::Repository,
    tree: ObjectId,
    path: &BStr,
) -> Result<Option<(gix::object::tree::EntryMode, ObjectId)>> {
    let git_dir = repo.git_dir();
    let tree = repo.find_tree(tree).map_err(|e| Error::store(git_dir, e))?;
    let entry = tree
        .lookup_entry(path.split(|&b| b == b'/'))
        .map_err(|e| Error::store(git_dir, e))?;
    Ok(entry.map(|entry| (entry.mode(), entry.oid().to_owned())))
}

fn side_at(repo: &gix::Repository, tree: ObjectId, path: &BStr) -> Result<Option<Side>> {
    Ok(entry_at(repo, tree, path)?
        .filter(|(mode, _)| !mode.is_tree())
        .map(|(mode, id)| Side {
            mode: u32::from(mode.value()),
            id,
        }))
}

/// Tree `base` with each path of `edits` set to its side (`None`: removed), the removals
/// first (so a file where a directory stood comes out right, and the reverse), written to
/// `repo`. Costs a tree edit per path and a write of the trees on their way.
fn tree_with<'a>(
    repo: &gix::Repository,
    base: ObjectId,
    edits: impl IntoIterator<Item = (&'a BStr, Option<Side>)>,
) -> Result<ObjectId> {
    let git_dir = repo.git_dir();
    let mut edits: Vec<(&BStr, Option<Side>)> = edits.into_iter().collect();
    edits.sort_by_key(|(_, side)| side.is_some());
    let mut editor = repo.edit_tree(base).map_err(|e| Error::store(git_dir, e))?;
    for (path, side) in edits {
        let edited = match side {
            Some(side) => editor.upsert(path, side.entry_kind(), side.id),
            None => editor.remove(path),
        };
        edited.map_err(|e| Error::store(git_dir, e))?;
    }
    Ok(editor
        .write()
        .map_err(|e| Error::store(git_dir, e))?
        .detach())
}

/// Which run a [`Locked::apply_recorded`] was: it says where a failure of its record after
/// the files changed leaves the turns (the record before stands, marked unfinished).
#[derive(Clone, Copy)]
enum ChainRun {
    Undo,
    Redo,
}

impl ChainRun {
    /// `outcome`, with why its record failed ([`RestoreOutcome::unrecorded`]), if it did.
    fn outcome(self, mut outcome: RestoreOutcome, failed: Option<Error>) -> RestoreOutcome {
        let (what, state) = match self {
            ChainRun::Undo => (
                "undo",
                "its turns are marked rolled back, and `rewind redo` brings back what it took",
            ),
            ChainRun::Redo => (
                "redo",
                "its turns are still marked rolled back: run `rewind redo` again once that is fixed (it finds what came back already back)",
            ),
        };
        outcome.unrecorded = failed.map(|e| crate::error::Unrecorded {
            what,
            state,
            code: e.code(),
            message: e.to_string(),
        });
        outcome
    }
}

/// What an undo or redo records on its session's chain (see [`Locked::apply_recorded`]): its
/// commit, and the turn marks it sets or removes; `None` when it records nothing.
type ChainRecord = Option<(ObjectId, Vec<(String, Option<ObjectId>)>)>;

/// Where an undo's or redo's record goes: on the session's head before it (its parent), and,
/// when it is written before the run's files change (unfinished), the run's token.
type On<'t> = (Option<ObjectId>, Option<&'t str>);

/// Whether a run wrote and deleted nothing (whatever it left alone, or failed to do).
fn wrote_nothing(outcome: &RestoreOutcome) -> bool {
    outcome.written.is_empty() && outcome.deleted.is_empty()
}

/// A change listed alone (not part of a rename).
fn plain(change: Change) -> Listed {
    Listed { change, from: None }
}

/// Counts for one change (no contents).
fn turn_file(repo: &gix::Repository, listed: Listed, origin: Origin) -> Result<TurnFile> {
    let options = DiffOptions {
        max_content_bytes: 0,
        ..DiffOptions::default()
    };
    let file = listed.change.path.clone();
    let row = file_change(repo, listed, &options)?;
    Ok(TurnFile {
        file,
        status: row.status,
        old_file: row.old_file,
        similarity: row.similarity,
        additions: row.additions,
        deletions: row.deletions,
        binary: row.binary,
        origin,
    })
}

/// `files` (one per path, in git's order; `changes` their changes in the same order) with the
/// renames `git diff -M` finds among them paired into `renamed` rows when `options` asks: a
/// rename's counts are the pair's, its origin the stronger of its two paths'. Costs
/// [`find_renames`] and a line diff per rename.
fn summarized(
    repo: &gix::Repository,
    files: Vec<TurnFile>,
    changes: &[Change],
    options: &SummaryOptions,
) -> Result<Vec<TurnFile>> {
    if !options.renames {
        return Ok(files);
    }
    let pairs = find_renames(repo, changes)?;
    if pairs.is_empty() {
        return Ok(files);
    }
    merge(files.into_iter().zip(changes).collect(), &pairs)
        .into_iter()
        .map(|((file, change), source)| match source {
            None => Ok(file),
            Some(((old, old_change), score)) => {
                let listed = Listed {
                    change: Change {
                        before: old_change.before,
                        ..change.clone()
                    },
                    from: Some((old.file, score)),
                };
                turn_file(repo, listed, file.origin.max(old.origin))
            }
        })
        .collect()
}

/// The changes of a turn's stored `files` between trees `before` and `after`, as far as
/// rename detection needs them: the side of each deleted and added path (none for a modified
/// one, which never pairs). Costs a tree lookup per deleted or added path.
fn stored_changes(
    repo: &gix::Repository,
    files: &[TurnFile],
    before: ObjectId,
    after: ObjectId,
) -> Result<Vec<Change>> {
    files
        .iter()
        .map(|file| {
            let path = file.file.as_ref();
            let side = |status, tree| match file.status == status {
                true => side_at(repo, tree, path),
                false => Ok(None),
            };
            Ok(Change {
                path: file.file.clone(),
                before: side(Status::Deleted, before)?,
                after: side(Status::Added, after)?,
            })
        })
        .collect()
}

fn totals(files: &[TurnFile]) -> (usize, usize) {
    files
        .iter()
        .fold((0, 0), |(a, d), f| (a + f.additions, d + f.deletions))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(partners: &HashMap<BString, BString>, path: &str) -> Vec<String> {
        let mut names: Vec<String> = other_names(partners, path.into())
            .into_iter()
            .map(|n| n.to_string())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn linked_names_form_one_ring_whatever_the_order_of_the_pairs() {
        let mut partners = HashMap::new();
        let (f, g, h, k) = ("f".into(), "g".into(), "h".into(), "k".into());
        link(&mut partners, &f, &g);
        link(&mut partners, &h, &k);
        assert_eq!(names(&partners, "f"), ["g"]);
        link(&mut partners, &k, &f);
        link(&mut partners, &g, &h); // already one ring: nothing changes
        for (name, others) in [
            ("f", ["g", "h", "k"]),
            ("g", ["f", "h", "k"]),
            ("h", ["f", "g", "k"]),
            ("k", ["f", "g", "h"]),
        ] {
            assert_eq!(names(&partners, name), others, "{name}");
        }
        assert!(names(&partners, "x").is_empty());
    }

    #[test]
    fn a_broken_ring_ends_at_the_break_or_where_it_loops() {
        let pairs = [("a", "b"), ("b", "c"), ("c", "b"), ("x", "a")];
        let partners: HashMap<BString, BString> = pairs
            .iter()
            .map(|(a, b)| (BString::from(*a), BString::from(*b)))
            .collect();
        assert_eq!(names(&partners, "x"), ["a", "b", "c"]);
        assert_eq!(names(&partners, "c"), ["b"]);
    }

    /// Dropped lines for commits `ids` (one hex digit each, repeated), each with its `files`.
    fn dropped(groups: &[(char, &[&str])]) -> String {
        let mut lines = String::new();
        for (id, files) in groups {
            lines.push_str(&format!("{DROPPED}{}\n", id.to_string().repeat(40)));
            for file in *files {
                lines.push_str(&format!("{DROPPED_FILE}{file}\n"));
            }
        }
        lines
    }

    #[test]
    fn the_files_dropped_after_a_commit_are_those_of_the_commits_listed_after_it() {
        let lines = dropped(&[('1', &["a"]), ('2', &["b"]), ('3', &["c", "d"])]);
        let id = |c: char| ObjectId::from_hex(c.to_string().repeat(40).as_bytes()).unwrap();
        let read =
            |lines: &str, then| dropped_files_after(lines.as_bytes(), then, &mut HashSet::new());
        let after = |then| read(&lines, then).own;
        assert_eq!(after(Some(id('2'))), ["c", "d"]);
        assert_eq!(after(Some(id('1'))), ["b", "c", "d"]);
        assert_eq!(after(Some(id('3'))), Vec::<BString>::new());
        // Not named here: every one was dropped after it.
        assert_eq!(after(Some(id('9'))), ["a", "b", "c", "d"]);
        assert_eq!(after(None), ["a", "b", "c", "d"]);
        // A dropped copy is named by what it stood for too.
        let stood_for = format!("{DROPPED_COPY_OF}{}\n", "8".repeat(40));
        let lines = lines.replacen(
            &format!("{}\n", "2".repeat(40)),
            &format!("{}\n{stood_for}", "2".repeat(40)),
            1,
        );
        assert_eq!(read(&lines, Some(id('8'))).own, ["c", "d"]);
        // Lines cut after the commit leave what was dropped after it unknown; before, not.
        let cut = |at: &str| lines.replacen(at, &format!("{DROPPED_CUT}\n{at}"), 1);
        let cut_at_3 = cut(&format!("{DROPPED}{}", "3".repeat(40)));
        let cut_at_1 = cut(&format!("{DROPPED}{}", "1".repeat(40)));
        for (lines, then, unknown) in [
            (&cut_at_3, Some(id('2')), true),
            (&cut_at_3, Some(id('3')), false),
            (&cut_at_3, None, true),
            (&cut_at_1, Some(id('1')), false),
            (&cut_at_1, Some(id('9')), true),
            (&lines, None, false),
        ] {
            assert_eq!(read(lines, then).cut, unknown);
        }
    }

    #[test]
    fn shared_files_count_only_for_a_turn_whose_begin_was_dropped_after_the_place() {
        // Turn 1 began (commit 1) before the place (commit 2), and ended (3); turn 2 began (4)
        // after it, and ended (5) in the next message read.
        let hex = |c: char| c.to_string().repeat(40);
        let id = |c: char| ObjectId::from_hex(hex(c).as_bytes()).unwrap();
        let end = |end: char, begin: char, file: &str| {
            format!(
                "{DROPPED}{}\n{DROPPED_BEGUN}{}\n{DROPPED_SHARED_FILE}{file}\n",
                hex(end),
                hex(begin)
            )
        };
        let first = format!(
            "{}{}{}",
            dropped(&[('1', &[]), ('2', &[])]),
            end('3', '1', "x"),
            dropped(&[('4', &[])])
        );
        let second = end('5', '4', "y");
        let mut begun = HashSet::new();
        let shared = |message: &str, then, begun: &mut HashSet<BString>| {
            dropped_files_after(message.as_bytes(), then, begun).shared
        };
        assert_eq!(
            shared(&first, Some(id('2')), &mut begun),
            Vec::<BString>::new()
        );
        assert_eq!(shared(&second, Some(id('2')), &mut begun), ["y"]);
        // With no place, every turn began after it.
        assert_eq!(shared(&first, None, &mut HashSet::new()), ["x"]);
        // A turn open across the place whose line names its end's content: counted apart,
        // with that content (one whose line names none, written before, is not).
        let side = Side {
            mode: 0o100644,
            id: id('9'),
        };
        let named = first.replace(
            &format!("{DROPPED_SHARED_FILE}x\n"),
            &format!("{DROPPED_SHARED_FILE}x {}\n", side_text(Some(side))),
        );
        let found = dropped_files_after(named.as_bytes(), Some(id('2')), &mut HashSet::new());
        assert_eq!(found.shared, Vec::<BString>::new());
        assert_eq!(found.shared_across, [(BString::from("x"), Some(side))]);
        let old = dropped_files_after(first.as_bytes(), Some(id('2')), &mut HashSet::new());
        assert!(old.shared_across.is_empty());
        assert_eq!(parse_side(side_text(None).as_bytes()), Some(None));
    }

    #[test]
    fn a_copy_keeps_the_newest_dropped_commits_whole() {
        let files: Vec<String> = (0..MOST_DROPPED_LINES).map(|n| n.to_string()).collect();
        let files: Vec<&str> = files.iter().map(String::as_str).collect();
        let starts_with = |lines: &str, c: char| {
            lines.starts_with(&format!("{DROPPED}{}", c.to_string().repeat(40)))
        };
        let lines = dropped(&[
            ('1', &files[..100]),
            ('2', &files[..4000]),
            ('3', &files[..10]),
        ]);
        // (In place of what was cut, a line saying so.)
        let cut = |kept: &str| {
            kept.strip_prefix(&format!("{DROPPED_CUT}\n"))
                .map(str::to_owned)
        };
        let kept = cut(&newest_dropped(lines)).unwrap();
        assert!(starts_with(&kept, '2'), "{kept:.80}");
        assert_eq!(kept.lines().count(), 4001 + 11);
        let lines = dropped(&[('1', &["old"]), ('2', &files)]);
        let kept = cut(&newest_dropped(lines)).unwrap();
        assert!(starts_with(&kept, '2'), "{kept:.80}");
        assert_eq!(kept.lines().count(), MOST_DROPPED_LINES + 1);
        let short = dropped(&[('1', &["a"])]);
        assert_eq!(newest_dropped(short.clone()), short);
    }
}
