//! # rewind — an undo for AI coding agents that users can trust
//!
//! `rewind` keeps a private **bare git repository per project** (the *shadow store*) under a
//! data directory, and never touches the project's own `.git`. Every snapshot is the git tree
//! of the project directory — byte-identical to what `git add -A && git write-tree` would write
//! for the same files — so anyone can inspect the history with stock git:
//!
//! ```text
//! git --git-dir "$(rewind path)" log --all
//! ```
//!
//! ## Taking a snapshot
//!
//! ```no_run
//! use rewind::{OpenOptions, Store, TrackOptions};
//!
//! let data_dir = rewind::data_dir(None)?;          // --data-dir, $REWIND_DATA_DIR, $XDG_DATA_HOME/rewind, ~/.local/share/rewind
//! let store = Store::open("/path/to/project".as_ref(), &OpenOptions::new(data_dir))?;
//! let snapshot = store.track(&TrackOptions::default())?;
//! println!("{} ({} files)", snapshot.hash, snapshot.files);
//! for skipped in &snapshot.skipped {
//!     eprintln!("left out {}: {:?}", skipped.path, skipped.reason);
//! }
//! # Ok::<(), rewind::Error>(())
//! ```
//!
//! ## What a snapshot holds
//!
//! Every file git would add: `.gitignore` rules at every level, the enclosing repository's
//! `info/exclude` and the user's `core.excludesFile` apply, but files that the project's own
//! git index tracks stay in. Bytes are stored raw (no filters, no end-of-line conversion).
//! Nested repositories and submodules hold their working files under their own ignore rules,
//! their `.git` never entered (git would record a gitlink; [`NestedRepos`] and
//! `rewind.nestedRepos = skip` leave them out, reported as nested repositories).
//! Left out and reported in [`Snapshot::skipped`]: FIFOs,
//! sockets and devices (never opened), unreadable files, and new files above the size cap
//! (`rewind.maxFileSize`, 2 MiB by default; a file already in the previous snapshot stays).
//!
//! ## Speed and safety
//!
//! The store keeps a real git index as a stat cache, with git's racy-timestamp rule and an exact
//! cache-tree, so an unchanged file is never read again and only trees along changed paths are
//! rewritten. Commands that change the store take an OS file lock, which dies with its process;
//! every file in the store is written to a temp file and renamed, so `kill -9` at any moment
//! leaves a usable store. The library ignores `GIT_DIR`, `GIT_INDEX_FILE` and the other git
//! environment variables.
//!
//! Errors are [`Error`] values naming the path and the cause; the library never prints.

#![deny(missing_docs)]

mod diff;
mod error;
mod fs;
mod id;
mod inspect;
mod paths;
mod prune;
mod restore;
#[cfg(feature = "serve")]
mod serve;
mod snapshot;
mod store;
#[cfg(test)]
mod testing;
mod turns;

pub use diff::{ConflictHunk, DiffOptions, FileChange, Patch, Status};
pub use error::{BoxError, Error, Result, Unrecorded};
pub use fs::{
    hard_links, one_malloc_arena_under_an_address_space_limit, open_store_file_to_append,
};
/// Paths in outcomes are bytes, as the file system names them (`gix`'s `BString`).
pub use gix::bstr::BString;
pub use id::{ParseIdError, SnapshotId};
pub use inspect::{Doctor, LogEntry, LogKind, Shown};
pub use paths::quote_path;
pub use prune::{
    prune_all, AbandonedTurn, PruneAllOutcome, PruneOptions, PruneOutcome, Pruner,
    DEFAULT_ABANDONED_AFTER, DEFAULT_MAX_SIZE, DEFAULT_MAX_TURNS_PER_SESSION, DEFAULT_RETENTION,
    DEFAULT_TARGET_SIZE,
};
pub use restore::{is_left_by_rewind, ConflictDetail, Failure, RestoreOptions, RestoreOutcome};
#[cfg(feature = "serve")]
pub use serve::{lone_surrogates_replaced, serve};
pub use snapshot::{SkipReason, Skipped, Snapshot, TrackOptions, WatchStatus};
pub use store::settings::{parse_duration, parse_size};
pub use store::{
    data_dir, private_data_dir, Call, Clock, NestedRepos, Notices, OpenOptions, Progress, Store,
    DEFAULT_LOCK_WAIT, DEFAULT_MAX_FILE_SIZE, NOTICES_LOCK_WAIT,
};
pub use turns::{
    BeginOptions, Origin, RedoOptions, SessionChanges, SummaryOptions, Turn, TurnEnd, TurnFile,
    TurnStart, UndoOptions,
};

/// Crate internals that the integration tests (tests/it) compare with git; not an API.
#[doc(hidden)]
pub mod for_tests {
    /// `merge_texts` of the three-way merge (`git merge-file -p -L ours_label -L base_label
    /// -L theirs_label ours base theirs`): the merged text and its conflicts.
    pub fn merge_texts(
        base: &[u8],
        ours: &[u8],
        theirs: &[u8],
        labels: [&str; 3],
    ) -> (Vec<u8>, Vec<crate::ConflictHunk>) {
        let merged = crate::diff::merge::merge_texts(base, ours, theirs, labels);
        (merged.text, merged.conflicts)
    }
}
