//! Taking a turn's work out of a path while keeping everything else: a three-way merge per
//! path, with the file now as "ours", what the turn left as the base and what it found as
//! "theirs" — what `git merge-file -p now after before` computes for text. Several turns are
//! taken out one at a time, latest first, so edits made between them (the user's, another
//! session's) stay.

use gix::bstr::BStr;
use gix::ObjectId;
use serde::Serialize;

use crate::diff::{is_binary, merge_texts, ConflictHunk, Side};
use crate::error::{Error, Result};
use crate::store::objects::read_blob;

/// A path an undo could not take a turn's work out of without a person deciding: someone else
/// changed it too.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct ConflictDetail {
    /// The project-relative path (lossy in JSON where not UTF-8).
    #[serde(serialize_with = "crate::paths::serialize_path")]
    pub file: gix::bstr::BString,
    /// A merge would be clean: the turns' hunks and the other edits do not overlap, so
    /// `merge` (or `only`) would write the merged file.
    pub mergeable: bool,
    /// Where the edits overlap (text files only; empty when the file was added, deleted,
    /// binary, a symlink, or both sides changed its mode).
    pub hunks: Vec<ConflictHunk>,
    /// An undo of several turns takes the later turns' work out of the file, but not an
    /// earlier turn's: someone else changed the file after that turn (after it made the file,
    /// say). `merge` writes the file as far as the turns come out (listed in `merged` then,
    /// with this detail): what the earlier turn did stays, and so does their edit. `hunks`
    /// are those of the earlier turn against the file so written.
    pub merges_in_part: bool,
}

impl ConflictDetail {
    pub(crate) fn new(file: gix::bstr::BString, mergeable: bool, hunks: Vec<ConflictHunk>) -> Self {
        ConflictDetail {
            file,
            mergeable,
            hunks,
            merges_in_part: false,
        }
    }
}

/// What one turn did to a path: what it found (`before`) and what it left (`after`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct TurnSides {
    pub(crate) before: Option<Side>,
    pub(crate) after: Option<Side>,
}

/// Where taking the turns out of a path leads.
pub(crate) enum Reversed {
    /// The path ends as this side (`None`: deleted); `merged` when someone else's edits were
    /// kept in it by a text merge.
    Side { side: Option<Side>, merged: bool },
    /// The turns' hunks and someone else's overlap. `markers`: the file with git's conflict
    /// markers (and its mode), for a forced single-turn undo; `None` when not text. `reached`:
    /// where the later turns came out before an earlier one met the other edit, if that
    /// changes the path (`Some(None)`: deleted).
    Conflict {
        hunks: Vec<ConflictHunk>,
        markers: Option<(u32, Vec<u8>)>,
        reached: Option<Option<Side>>,
    },
}

/// Take `turns` (latest first) out of `path`, which holds `now`. New blobs (merged texts) are
/// written through `repo` (give it object memory for a dry run). `labels`: the conflict
/// markers' names for the file now, a turn's after and its before. Costs, per turn whose
/// sides all differ, reading three blobs and one three-way merge; nothing otherwise.
pub(crate) fn reverse_turns(
    repo: &gix::Repository,
    path: &BStr,
    now: Option<Side>,
    turns: &[TurnSides],
    labels: [&str; 3],
) -> Result<Reversed> {
    let (mut ours, mut merged) = (now, false);
    for turn in turns {
        match reverse_one(repo, path, ours, *turn, labels)? {
            Reversed::Side { side, merged: m } => {
                ours = side;
                merged |= m;
            }
            Reversed::Conflict { hunks, markers, .. } => {
                let reached = (ours != now).then_some(ours);
                return Ok(Reversed::Conflict {
                    hunks,
                    markers,
                    reached,
                });
            }
        }
    }
    Ok(Reversed::Side { side: ours, merged })
}

fn conflict(hunks: Vec<ConflictHunk>, markers: Option<(u32, Vec<u8>)>) -> Reversed {
    Reversed::Conflict {
        hunks,
        markers,
        reached: None,
    }
}

/// One turn out of `ours`: base = its after, theirs = its before.
fn reverse_one(
    repo: &gix::Repository,
    path: &BStr,
    ours: Option<Side>,
    TurnSides { before, after }: TurnSides,
    labels: [&str; 3],
) -> Result<Reversed> {
    let take = |side| {
        Ok(Reversed::Side {
            side,
            merged: false,
        })
    };
    if ours == after {
        return take(before); // nobody changed it since: the turn's before, whole
    }
    if before == after || ours == before {
        return take(ours); // the turn changed nothing here, or it is undone already
    }
    // Both changed it: a file added or deleted on one side, or a symlink, does not merge.
    let (Some(ours), Some(base), Some(theirs)) = (ours, after, before) else {
        return Ok(conflict(Vec::new(), None));
    };
    if ours.is_link() || base.is_link() || theirs.is_link() {
        return Ok(conflict(Vec::new(), None));
    }
    let mode = match (ours.mode == base.mode, theirs.mode == base.mode) {
        (true, _) => theirs.mode,
        (false, true) => ours.mode,
        (false, false) if ours.mode == theirs.mode => ours.mode,
        (false, false) => return Ok(conflict(Vec::new(), None)),
    };
    let id = if ours.id == base.id {
        theirs.id
    } else if theirs.id == base.id || ours.id == theirs.id {
        ours.id
    } else {
        let text = |id: ObjectId| read_blob(repo, id, path);
        let (ours_text, base_text, theirs_text) =
            (text(ours.id)?, text(base.id)?, text(theirs.id)?);
        if [&ours_text, &base_text, &theirs_text]
            .iter()
            .any(|t| is_binary(t))
        {
            return Ok(conflict(Vec::new(), None));
        }
        let result = merge_texts(&base_text, &ours_text, &theirs_text, labels);
        if !result.conflicts.is_empty() {
            return Ok(conflict(result.conflicts, Some((mode, result.text))));
        }
        let side = Some(Side {
            mode,
            id: write_blob(repo, &result.text)?,
        });
        return Ok(Reversed::Side { side, merged: true });
    };
    take(Some(Side { mode, id }))
}

/// Store `data` as a blob through `repo`. Costs a hash, and zlib and a write when new.
pub(crate) fn write_blob(repo: &gix::Repository, data: &[u8]) -> Result<ObjectId> {
    repo.write_blob(data)
        .map(|id| id.detach())
        .map_err(|e| Error::store(repo.git_dir(), e))
}
