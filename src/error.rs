//! The one error type of the library, with a stable machine-readable [`Error::code`].

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong in `rewind`. Each variant names the path or id involved and the cause.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The project directory does not exist or cannot be resolved.
    #[error("project directory {path}: {source}")]
    Project {
        /// The path as given.
        path: PathBuf,
        /// Why it cannot be resolved.
        source: io::Error,
    },
    /// The project path exists but is not a directory.
    #[error("project directory {0} is not a directory")]
    NotADirectory(PathBuf),
    /// The project is the home directory or `/`, refused unless explicitly allowed.
    #[error("refusing to snapshot {0}: it is the home directory or / (pass --allow-home to do it anyway)")]
    BroadProject(PathBuf),
    /// The project lies inside rewind's data directory.
    #[error("project {project} is inside rewind's data directory {data_dir}")]
    ProjectInData {
        /// The project.
        project: PathBuf,
        /// The data directory that holds it.
        data_dir: PathBuf,
    },
    /// No data directory could be determined from flags or the environment.
    #[error("cannot find a data directory: pass --data-dir, or set REWIND_DATA_DIR, XDG_DATA_HOME or HOME")]
    NoDataDir,
    /// A filesystem operation failed; `action` says what was being done.
    #[error("{action} {path}: {}", io_cause(source))]
    Io {
        /// What was being done ("writing", "reading data directory", ...).
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The store exists but cannot be used as a git repository.
    #[error("store {path}: {source}{}", match caused_by_full_disk(source.as_ref()) { true => " (disk full)", false => "" })]
    Store {
        /// The store's git directory (or the file in it).
        path: PathBuf,
        /// The cause (most often a gix error).
        source: BoxError,
    },
    /// The text given as an object id is not one (hex, 4 to 40 digits).
    #[error("invalid id {0:?}: expected 4 to 40 hexadecimal digits")]
    InvalidId(String),
    /// No object in the store has this id (or id prefix).
    #[error("no snapshot {0} in the store")]
    NotFound(String),
    /// An abbreviated id matches several objects.
    #[error("id {0} is ambiguous: give more digits")]
    Ambiguous(String),
    /// The id names an object of the wrong kind, e.g. a blob where a tree is needed.
    #[error("{id} is a {actual}, not a {expected}")]
    WrongType {
        /// The object's id.
        id: String,
        /// What it is ("blob", "commit", ...).
        actual: &'static str,
        /// What was needed.
        expected: &'static str,
    },
    /// An object the store should have is missing or cannot be read.
    #[error("cannot read object {id} ({path}) from the store: {source}")]
    Object {
        /// The object's id.
        id: String,
        /// Where in the snapshot it sits (`/`: the root tree).
        path: String,
        /// The cause.
        source: BoxError,
    },
    /// A path given to `revert` is not inside the project.
    #[error("path {path}: {reason}")]
    BadPath {
        /// The path as given.
        path: PathBuf,
        /// Why it cannot be used.
        reason: &'static str,
    },
    /// A restore or revert changed some files but not all (the outcome lists them).
    #[error("{failed} file(s) could not be restored (see above); {}; `rewind restore {undo}` brings back the files from before (a save made meanwhile stays where reported)", match .changed { 0 => "no other file changed", _ => "the others were" })]
    Incomplete {
        /// How many paths could not be changed.
        failed: usize,
        /// How many were (written or deleted).
        changed: usize,
        /// The undo point taken before the first change.
        undo: crate::id::SnapshotId,
    },
    /// An undo or redo changed files (its outcome lists them) but could not write its record
    /// of them afterwards (a full disk, say).
    #[error("{0}")]
    Unrecorded(Unrecorded),
    /// A session or turn id that cannot be used.
    #[error("{what} id {reason}")]
    BadName {
        /// "session" or "turn".
        what: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// `prune --all` could not prune some stores (each was reported).
    #[error("{0} store(s) could not be pruned")]
    PruneFailed(usize),
    /// `doctor` found objects missing.
    #[error("the store lacks {0} object(s) its records need (see `rewind doctor`)")]
    Unhealthy(usize),
    /// `undo --file` named a path that the undone turns did not change.
    #[error("the turns of session {session:?} did not change {path:?}")]
    PathNotChanged {
        /// The path, quoted as git quotes paths.
        path: String,
        /// The session.
        session: String,
    },
    /// No turn of this session is in the store.
    #[error("no session {0:?} in the store")]
    NoSession(String),
    /// The session has no such turn.
    #[error("no turn {turn:?} in session {session:?}")]
    NoTurn {
        /// The session.
        session: String,
        /// The turn asked for.
        turn: String,
    },
    /// Prune removed the session (or the turn), for the reason given.
    #[error("{} was pruned on {}: {reason}", pruned_what(session, turn.as_deref()), at.format("%Y-%m-%d %H:%M UTC"))]
    Pruned {
        /// The session.
        session: String,
        /// The turn asked for, if one was.
        turn: Option<String>,
        /// When prune removed it (the store's clock).
        at: chrono::DateTime<chrono::Utc>,
        /// Why it went.
        reason: &'static str,
    },
    /// A path named to `revert` is in neither the snapshot nor the project.
    #[error("no file or directory {path} in snapshot {hash} or in the project")]
    NoSuchPath {
        /// The path, quoted as git quotes paths.
        path: String,
        /// The snapshot.
        hash: String,
    },
    /// Nothing is left for `undo --last` or `redo` to act on.
    #[error("session {session:?} has no {what}")]
    NothingLeft {
        /// The session.
        session: String,
        /// What there is none of ("turn left to undo", "undo left to redo").
        what: String,
    },
    /// A turn is not in the state the operation needs.
    #[error("turn {turn:?} of session {session:?} {reason}")]
    Turn {
        /// The session (empty when the turn's name matched in several).
        session: String,
        /// The turn.
        turn: String,
        /// What state it is in, and why that does not do.
        reason: &'static str,
    },
    /// Another process (or another call of this one) held the store's lock for longer than the
    /// wait limit (`OpenOptions::lock_wait`, `--wait`, a request's `timeout_ms`).
    #[error("store {store} is busy: {holder} holds its lock (waited {} ms for it)", .waited.as_millis())]
    Busy {
        /// The store's git directory.
        store: PathBuf,
        /// `process <pid> (<command line>)` where the OS tells, else `another process`.
        holder: String,
        /// How long the call waited.
        waited: std::time::Duration,
    },
    /// The caller cancelled the call, or its deadline passed, before it changed the store.
    #[error("cancelled ({reason}) before recording anything")]
    Cancelled {
        /// "by the caller", or "its timeout ran out".
        reason: &'static str,
    },
    /// The process could not start the threads rewind works on (a limit on threads, processes
    /// or memory).
    #[error("cannot start rewind's worker threads: {0}")]
    Threads(#[source] io::Error),
    /// The process's memory is limited (`ulimit -v` or `ulimit -d`) below what rewind needs to
    /// start.
    #[error("the {what} is {} KiB; rewind needs at least {} KiB", .limit / 1024, .needed / 1024)]
    MemoryLimit {
        /// Which limit: "address-space limit (ulimit -v)" or "data limit (ulimit -d)".
        what: &'static str,
        /// The limit, in bytes.
        limit: u64,
        /// The least rewind runs with, in bytes.
        needed: u64,
    },
    /// The clock gave a time before 1970, or `REWIND_NOW` is not an RFC 3339 time.
    #[error(
        "REWIND_NOW={value:?} is not an RFC 3339 time from 1970 on (e.g. 2026-01-31T12:00:00Z)"
    )]
    BadClock {
        /// The time, as given or as the clock gave it.
        value: String,
    },
    /// A `rewind.*` key in the store's git config holds a value rewind cannot read.
    #[error("{key} is {value:?} in {}: it must be {must_be}", config.display())]
    BadSetting {
        /// The key, `rewind.maxTurnsPerSession` say.
        key: &'static str,
        /// Its value, as written.
        value: String,
        /// What it must be.
        must_be: &'static str,
        /// The config file.
        config: PathBuf,
    },
}

/// `std::io::Error` prints "No space left on device (os error 28)"; say plainly that the disk is full.
fn io_cause(err: &io::Error) -> String {
    if err.kind() == io::ErrorKind::StorageFull {
        format!("disk full ({err})")
    } else {
        err.to_string()
    }
}

/// Why an undo or redo could not record what it did, its files changed (`RestoreOutcome`'s
/// `unrecorded`, and [`Error::Unrecorded`]).
#[derive(Debug, Clone, serde::Serialize, thiserror::Error)]
#[error("{message}: the files changed as listed, but the {what} could not record it; {state}")]
#[non_exhaustive]
pub struct Unrecorded {
    /// "undo" or "redo".
    pub what: &'static str,
    /// Where that leaves its turns, and what to run.
    pub state: &'static str,
    /// The error's code ([`Error::code`]: `disk_full`, say).
    pub code: &'static str,
    /// The error.
    pub message: String,
}

/// Whether `err` or an error it was caused by is a full disk (gix's errors wrap the OS's).
fn caused_by_full_disk(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(err);
    while let Some(err) = cause {
        if let Some(io) = err.downcast_ref::<io::Error>() {
            if io.kind() == io::ErrorKind::StorageFull {
                return true;
            }
        }
        cause = err.source();
    }
    false
}

impl Error {
    /// Wrap an I/O error with what was being done and where.
    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io {
            action,
            path: path.into(),
            source,
        }
    }

    /// Wrap a gix error (or a message) that concerns the store at `path`.
    pub(crate) fn store(path: impl Into<PathBuf>, source: impl Into<BoxError>) -> Self {
        Error::Store {
            path: path.into(),
            source: source.into(),
        }
    }

    /// A short stable code for programs (`--json` prints it as `error.code`).
    pub fn code(&self) -> &'static str {
        match self {
            Error::Project { .. } | Error::NotADirectory(_) | Error::ProjectInData { .. } => {
                "project"
            }
            Error::BroadProject(_) => "broad_project",
            Error::NoDataDir => "data_dir",
            Error::Io { source, .. } if source.kind() == io::ErrorKind::StorageFull => "disk_full",
            Error::Io { source, .. } if source.kind() == io::ErrorKind::PermissionDenied => {
                "permission"
            }
            Error::Io { .. } => "io",
            Error::Store { source, .. } if caused_by_full_disk(source.as_ref()) => "disk_full",
            Error::Store { .. } => "store",
            Error::Unrecorded(unrecorded) => unrecorded.code,
            Error::BadClock { .. } => "bad_clock",
            Error::BadSetting { .. } => "bad_setting",
            Error::InvalidId(_) => "invalid_id",
            Error::NotFound(_) => "not_found",
            Error::Ambiguous(_) => "ambiguous_id",
            Error::WrongType { .. } => "wrong_type",
            Error::Object { .. } => "object",
            Error::BadPath { .. } => "bad_path",
            Error::Incomplete { .. } => "incomplete",
            Error::BadName { .. } => "invalid_name",
            Error::Turn { .. } => "turn_state",
            Error::NoSession(_)
            | Error::NoTurn { .. }
            | Error::NoSuchPath { .. }
            | Error::PathNotChanged { .. }
            | Error::NothingLeft { .. } => "not_found",
            Error::Pruned { .. } => "pruned",
            Error::PruneFailed(_) => "prune_failed",
            Error::Unhealthy(_) => "unhealthy",
            Error::Busy { .. } => "busy",
            Error::Cancelled { .. } => "cancelled",
            Error::Threads(_) | Error::MemoryLimit { .. } => "resources",
        }
    }
}

/// The cause of a [`Error::Store`] or [`Error::Object`], kept as it came (a gix error, most
/// often), so that `std::error::Error::source` walks down to it.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

impl From<crate::id::ParseIdError> for Error {
    fn from(err: crate::id::ParseIdError) -> Self {
        Error::InvalidId(err.0)
    }
}

/// `turn "T" of session "S"`, or `session "S"`.
fn pruned_what(session: &str, turn: Option<&str>) -> String {
    match turn {
        Some(turn) => format!("turn {turn:?} of session {session:?}"),
        None => format!("session {session:?}"),
    }
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An object of the store that cannot be read, at `path` in a snapshot.
pub(crate) fn object_error(
    id: &gix::ObjectId,
    path: &gix::bstr::BStr,
    source: impl Into<BoxError>,
) -> Error {
    Error::Object {
        id: id.to_string(),
        path: if path.is_empty() {
            "/".into()
        } else {
            path.to_string()
        },
        source: source.into(),
    }
}

/// An object kind as git names it.
pub(crate) fn kind_name(kind: gix::objs::Kind) -> &'static str {
    match kind {
        gix::objs::Kind::Blob => "blob",
        gix::objs::Kind::Tree => "tree",
        gix::objs::Kind::Commit => "commit",
        gix::objs::Kind::Tag => "tag",
    }
}
