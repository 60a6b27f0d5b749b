//! What a snapshot could see: the rule that keeps restore, revert and undo from deleting a file
//! that was on disk when the snapshot was taken but left out of it.
//!
//! A snapshot does not hold every file of the project: ignored files, nested repositories,
//! files over the size cap and special files are left out. Restoring it must not read "absent
//! from the snapshot" as "did not exist then". A path the target snapshot could not see is
//! never deleted or overwritten; deleting is allowed only for a path the target's rules would
//! have included and that the target does not hold. The target could not see a path when
//! - it is ignored under the target's own rules: the `.gitignore` blobs in the target tree,
//!   plus the rules from outside the project (global excludes, the enclosing repository's
//!   `info/exclude`), or
//! - the snapshot recorded it (or a directory above it) as left out: a nested repository
//!   (under `rewind.nestedRepos = skip`, and in every snapshot taken before that setting),
//!   too large, a special file, unreadable, rewind's own data, or
//! - a `.gitignore` above it was left out of the snapshot (ignored itself, or too large): its
//!   rules are in no snapshot, or
//! - the rules from outside the project (or outside the nested repository it is in) are not
//!   those the snapshot was taken under: it records their digest (`Rewind-Rules:`), and what
//!   other rules hid is not known, or
//! - it is inside a nested repository whose files the snapshot held, and ignored under that
//!   repository's rules (only: the project's rules do not reach inside it): its `.gitignore`
//!   blobs from its root down, its `info/exclude` and the user's excludes file. A tree taken
//!   both while a directory was a repository and while it was not (`git init` changes no
//!   file) has it recorded `mixed`: a path below it is seen only if both readings see it, or
//! - the tree is a reopened turn's "before" that a redo made up (the project it found, with
//!   its writes as the turn had found them), and the trees it was made of could not see the
//!   path: the one the redo found, or at a path it wrote, the turn's (as the redo's commit
//!   says: [`Store::visibility_made_up`]).
//!
//! What a snapshot left out is recorded with it: as `Rewind-Left-Out:` lines in the snapshot
//! record (`refs/rewind/snapshots/<tree>`, the union over every time that tree was taken) and
//! in a turn's begin commit, with a `Rewind-Nested:` line per nested repository it held.

use crate::paths::is_within;
pub(crate) use crate::paths::{decode_path, encode_path};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use gix::bstr::{BStr, BString, ByteSlice};
use gix::ObjectId;

use crate::error::{Error, Result};
use crate::fs::CWD;
use crate::snapshot::ignore::{DirRules, Excludes};
use crate::snapshot::Snapshot;
use crate::store::{snapshot_record, Locked, Store};

/// The trailer key of a left-out path in snapshot and turn commits.
const LEFT_OUT: &str = "Rewind-Left-Out: ";
/// The trailer key of a file's narrow permission bits in snapshot and turn commits.
const MODE: &str = "Rewind-Mode: ";
/// The trailer key of a nested repository whose files a snapshot holds.
const NESTED: &str = "Rewind-Nested: ";
/// The word of a `Rewind-Nested:` line: a repository at every take of the tree...
const REPO: &str = "repo";
/// ...or at some takes only.
const MIXED: &str = "mixed";
/// The trailer key of the digest of the rules from outside the project (`Rewind-Rules: <hex>
/// <root>`, the root empty for the project, else a nested repository's path).
const RULES: &str = "Rewind-Rules: ";
/// In a redo's commit, the trailer key of a tree no snapshot took, a turn's "before" the redo
/// made up when it reopened the turn (`Rewind-Reopened-Sight: <tree> <found> <turn-found>`):
/// the project as the redo found it, but where the redo wrote, as the turn had found it. What
/// it could see is what `found` could see, and at those paths what `turn-found` could. (In the
/// redo's commit, not the tree's record: the tree may be a snapshot taken as it is too, whose
/// record this would narrow for every later turn; and the commit names what it needs for as
/// long as it lives.)
const REOPENED_SIGHT: &str = "Rewind-Reopened-Sight: ";
/// The trailer key of each path such a redo wrote (`Rewind-Reopened-Path: <tree> <path>`).
const REOPENED_PATH: &str = "Rewind-Reopened-Path: ";
/// The trailer keys [`Store::recorded_left_out_lines`] copies.
const KEYS: [&str; 4] = [LEFT_OUT, MODE, NESTED, RULES];

/// One record line: `key`, a word, then `path` with every byte outside `!`..`~` (and `%`)
/// written `%XX`, so any name fits on one line and decodes exactly.
fn record_line(out: &mut String, key: &str, word: &str, path: &[u8]) {
    out.push_str(key);
    out.push_str(word);
    out.push(' ');
    encode_path(out, path);
    out.push('\n');
}

/// The (word, path) of each `key` line in commit message `message`.
fn parse_lines<'m>(message: &'m [u8], key: &str) -> impl Iterator<Item = (&'m [u8], BString)> + 'm {
    let key = key.as_bytes().to_vec();
    message
        .lines()
        .filter_map(move |line| line.strip_prefix(key.as_slice()))
        .filter_map(|rest| rest.split_once_str(b" "))
        .filter_map(|(word, path)| Some((word, decode_path(path)?)))
}

/// The lines a snapshot is recorded with: a `Rewind-Left-Out: <reason> <path>` line per path
/// it left out (`ignored` for those hidden by rules from outside the project, and for a
/// `.gitignore` its project's rules ignore), and a
/// `Rewind-Mode: 0600 <path>` line per file narrower than 0644, a `Rewind-Nested: repo
/// <path>` line per nested repository whose files it holds, and a `Rewind-Rules: <digest>
/// <root>` line for the rules from outside the project and outside each such repository.
pub(crate) fn record_lines(snapshot: &Snapshot) -> String {
    let mut out = String::new();
    for skip in &snapshot.skipped {
        record_line(&mut out, LEFT_OUT, skip.reason.as_str(), &skip.path);
    }
    for path in &snapshot.hidden_outside {
        record_line(&mut out, LEFT_OUT, "ignored", path);
    }
    for path in &snapshot.nested {
        record_line(&mut out, NESTED, REPO, path);
    }
    for (root, digest) in &snapshot.rules {
        record_line(&mut out, RULES, digest, root);
    }
    out.push_str(&mode_lines(snapshot.private_modes.iter().cloned()));
    out
}

/// `Rewind-Mode: 0600 <path>` lines for files narrower than 0644.
pub(crate) fn mode_lines(modes: impl IntoIterator<Item = (BString, u32)>) -> String {
    let mut out = String::new();
    for (path, mode) in modes {
        record_line(&mut out, MODE, &format!("{mode:04o}"), &path);
    }
    out
}

/// `lines` (of one take of a tree) with its `Rewind-Nested:` lines merged with those `recorded`
/// for the earlier takes: a directory that was a repository at every take stays `repo`; one
/// that was one at some takes only (no repository, or left out, at others) becomes `mixed`.
fn merge_nested(recorded: &str, lines: &str) -> String {
    let nested = |text: &str| -> HashMap<BString, Vec<u8>> {
        parse_lines(text.as_bytes(), NESTED)
            .map(|(word, path)| (path, word.to_vec()))
            .collect()
    };
    let (before, now) = (nested(recorded), nested(lines));
    let mut paths: Vec<&BString> = before.keys().chain(now.keys()).collect();
    paths.sort_unstable();
    paths.dedup();
    let mut out: String = lines
        .lines()
        .filter(|line| !line.starts_with(NESTED))
        .map(|line| format!("{line}\n"))
        .collect();
    for path in paths {
        let always = [&before, &now]
            .iter()
            .all(|take| take.get(path).is_some_and(|word| word == REPO.as_bytes()));
        record_line(&mut out, NESTED, if always { REPO } else { MIXED }, path);
    }
    out
}

/// The left-out paths named in commit message `message`.
pub(crate) fn parse_left_out(message: &[u8]) -> Vec<BString> {
    parse_lines(message, LEFT_OUT)
        .map(|(_, path)| path)
        .collect()
}

/// The lines of a redo's commit that say tree `tree` is made up of `found` and `turn_found`
/// (see [`REOPENED_SIGHT`]): `turn_found`'s at the paths in `written`.
pub(crate) fn made_of_lines<'a>(
    tree: ObjectId,
    (found, turn_found): (ObjectId, ObjectId),
    written: impl IntoIterator<Item = &'a BString>,
) -> String {
    let tree = tree.to_hex().to_string();
    let mut out = format!("{REOPENED_SIGHT}{tree} {found} {turn_found}\n");
    for path in written {
        record_line(&mut out, REOPENED_PATH, &tree, path);
    }
    out
}

/// The [`REOPENED_SIGHT`] and [`REOPENED_PATH`] lines of commit message `message`, as they
/// are (a later redo that reopens the turn again names them too, for the tree it was made of).
pub(crate) fn made_of_lines_in(message: &[u8]) -> String {
    let keys = [REOPENED_SIGHT, REOPENED_PATH];
    (message.lines())
        .filter(|line| keys.iter().any(|key| line.starts_with(key.as_bytes())))
        .map(|line| format!("{}\n", line.to_str_lossy()))
        .collect()
}

/// The (found, turn-found) trees of each [`REOPENED_SIGHT`] line about `tree` in commit
/// message `message`.
fn parse_made_of(message: &[u8], tree: ObjectId) -> Vec<(ObjectId, ObjectId)> {
    let tree = tree.to_hex().to_string();
    let trees = |rest: &[u8]| {
        let mut words = rest.split_str(b" ");
        (words.next()? == tree.as_bytes()).then_some(())?;
        let found = ObjectId::from_hex(words.next()?).ok()?;
        Some((found, ObjectId::from_hex(words.next()?).ok()?))
    };
    (message.lines())
        .filter_map(|line| line.strip_prefix(REOPENED_SIGHT.as_bytes()))
        .filter_map(trees)
        .collect()
}

/// The narrow permission bits named in commit message `message`.
fn parse_modes(message: &[u8]) -> Vec<(BString, u32)> {
    parse_lines(message, MODE)
        .filter_map(|(word, path)| {
            let mode = u32::from_str_radix(std::str::from_utf8(word).ok()?, 8).ok()?;
            Some((path, mode & 0o7777))
        })
        .collect()
}

/// What one snapshot could see (see the module docs).
pub(crate) struct Visibility {
    tree: ObjectId,
    project: PathBuf,
    /// Recorded left-out paths, sorted: each hides itself and everything below it.
    left_out: Vec<BString>,
    /// The directories (`/`-terminated, empty for the root) of the recorded left-out
    /// `.gitignore` files: what lies below one is not known to be seen.
    rules_left_out: Vec<BString>,
    /// Recorded nested repositories whose files the snapshot held, sorted, each with whether it
    /// was one at every take of the tree (`repo`, not `mixed`).
    nested: Vec<(BString, bool)>,
    /// Recorded narrow permission bits; a path seen with several keeps the narrowest.
    modes: HashMap<BString, u32>,
    /// The recorded digests of the rules from outside the project (`""`) and outside each
    /// nested repository, one per set of rules the tree was taken under.
    recorded_rules: HashMap<BString, Vec<Vec<u8>>>,
    /// The rules from outside the project (`""`) and from outside each nested repository met,
    /// by the root they hold below.
    excludes: HashMap<BString, Excludes>,
    /// The chained `.gitignore` rules of the target's directories, by (root, directory).
    rules: HashMap<(BString, BString), Arc<DirRules>>,
    /// For a tree a redo made up as a reopened turn's "before": what the trees it was made of
    /// could see. A path is seen only if it is seen by them too.
    made_of: Vec<MadeOf>,
}

/// The sight of a tree made up of two ([`REOPENED_SIGHT`]): `turn_found`'s at the paths in
/// `written` (sorted) and below them, `found`'s elsewhere (`None`: the tree's own, as when
/// the redo found the turn's "before" itself).
struct MadeOf {
    found: Option<Visibility>,
    turn_found: Option<Visibility>,
    written: Vec<BString>,
}

impl Visibility {
    /// The permission bits recorded for the file at `path`, if narrower than 0644.
    pub(crate) fn mode_of(&self, path: &BStr) -> Option<u32> {
        self.modes.get(path).copied()
    }

    /// Whether the snapshot could see (would have included) a file at `path`. Costs a few
    /// binary searches, per directory not met before a tree lookup of its `.gitignore`, and per
    /// nested repository not met before a read of its `info/exclude`.
    pub(crate) fn can_see(&mut self, repo: &gix::Repository, path: &BStr) -> Result<bool> {
        for made_of in &mut self.made_of {
            let written = (made_of.written.iter()).any(|w| is_within(path, w.as_bstr()));
            let sight = match written {
                true => &mut made_of.turn_found,
                false => &mut made_of.found,
            };
            if let Some(sight) = sight {
                if !sight.can_see(repo, path)? {
                    return Ok(false);
                }
            }
        }
        let hidden_by_record = self.left_out.iter().any(|l| {
            path == l.as_bstr()
                || (path.starts_with(l.as_slice()) && path.get(l.len()) == Some(&b'/'))
        });
        if hidden_by_record {
            return Ok(false);
        }
        // A `.gitignore` the snapshot left out (ignored, over the size cap) above it: its rules
        // are in no snapshot, so what they hid below its directory is not known.
        let below_unknown_rules = self.rules_left_out.iter().any(|dir| {
            path.starts_with(dir) && path.get(dir.len()..) != Some(b".gitignore".as_slice())
        });
        if below_unknown_rules {
            return Ok(false);
        }
        // Under the rules of the innermost nested repository above it; if that was not one at
        // every take, also under those of the next one out (or the project's), and so on.
        let mut roots = Vec::new();
        let mut settled = false;
        let above = |n: &BString| path.starts_with(n) && path.get(n.len()) == Some(&b'/');
        for (root, always) in self.nested.iter().rev().filter(|(n, _)| above(n)) {
            roots.push(root.clone());
            if *always {
                settled = true;
                break;
            }
        }
        if !settled {
            roots.push(BString::default());
        }
        for root in roots {
            if !self.ensure_excludes(root.as_ref()) {
                return Ok(false);
            }
            // Rules from outside that changed since the snapshot (the user's excludes file,
            // `info/exclude`): what the old ones hid is not known, so nothing is seen there.
            let now = self.excludes[&root].rules_digest();
            let recorded = self.recorded_rules.get(&root).map(Vec::as_slice);
            if recorded
                .unwrap_or_default()
                .iter()
                .any(|d| *d != now.as_bytes())
            {
                return Ok(false);
            }
            // Each directory on the way, then the path itself, under the rules above it.
            let mut dir = root.clone();
            let below = match root.is_empty() {
                true => path,
                false => path[root.len() + 1..].as_bstr(),
            };
            for name in below.split(|&b| b == b'/') {
                let rules = self.rules_of(repo, root.as_ref(), dir.as_ref())?;
                let mut child = dir.clone();
                if !child.is_empty() {
                    child.push(b'/');
                }
                child.extend_from_slice(name);
                let is_dir = child.len() < path.len();
                if self.excludes[&root].is_ignored(&rules, child.as_ref(), is_dir) {
                    return Ok(false);
                }
                dir = child;
            }
        }
        Ok(true)
    }

    /// Whether the project's own git index tracks the file at `path` now (a snapshot never
    /// leaves such a file out for being ignored). Costs a read of the index, once.
    pub(crate) fn tracked_by_project(&self, path: &BStr) -> bool {
        self.excludes[BStr::new("")].is_tracked(path)
    }

    /// Load the rules from outside the nested repository at `root` if not yet loaded (the
    /// project's are); `false` when its path cannot be named on this system (nothing below it
    /// is then seen). Costs [`Excludes::nested`] once per repository.
    fn ensure_excludes(&mut self, root: &BStr) -> bool {
        if self.excludes.contains_key(root) {
            return true;
        }
        let Ok(rel) = crate::paths::os_path(root) else {
            return false;
        };
        let dir = self.project.join(rel);
        let own = self.excludes[BStr::new("")].nested(root, CWD, &dir);
        self.excludes.insert(root.into(), own);
        true
    }

    /// The rules in force inside directory `dir` of the target tree, starting at `root` (the
    /// project, or a nested repository) and built from there down (iteratively: no stack per
    /// level).
    fn rules_of(
        &mut self,
        repo: &gix::Repository,
        root: &BStr,
        dir: &BStr,
    ) -> Result<Arc<DirRules>> {
        let mut rules = DirRules::root();
        let mut prefixes: Vec<&[u8]> = vec![root.as_bytes()];
        let below = dir.get(root.len()..).unwrap_or_default();
        prefixes.extend(
            below
                .find_iter(b"/")
                .filter(|&slash| slash > 0)
                .map(|slash| &dir.as_bytes()[..root.len() + slash])
                .chain((dir.len() > root.len()).then_some(dir.as_bytes())),
        );
        for prefix in prefixes {
            let key = (BString::from(root), BString::from(prefix));
            if let Some(known) = self.rules.get(&key) {
                rules = known.clone();
                continue;
            }
            let mut file = BString::from(prefix);
            if !file.is_empty() {
                file.push(b'/');
            }
            file.extend_from_slice(b".gitignore");
            if let Some(bytes) = blob_at(repo, self.tree, file.as_ref())? {
                rules = DirRules::from_bytes(&rules, &bytes, prefix.as_bstr());
            }
            self.rules.insert(key, rules.clone());
        }
        Ok(rules)
    }
}

/// The blob at `path` in `tree`, if there is one (a `.gitignore` that is a symlink or missing
/// holds no rules, as in git).
fn blob_at(repo: &gix::Repository, tree: ObjectId, path: &BStr) -> Result<Option<Vec<u8>>> {
    let git_dir = repo.git_dir();
    let tree = repo.find_tree(tree).map_err(|e| Error::store(git_dir, e))?;
    let Some(entry) = tree
        .lookup_entry(path.split(|&b| b == b'/'))
        .map_err(|e| Error::store(git_dir, e))?
    else {
        return Ok(None);
    };
    if !entry.mode().is_blob() {
        return Ok(None);
    }
    let object = repo
        .find_object(entry.oid())
        .map_err(|e| Error::store(git_dir, e))?;
    Ok(Some(object.data.clone()))
}

impl Locked<'_> {
    /// Record `snapshot`, which `track` just returned, with the time it was taken (refreshed
    /// at most hourly, so a no-change snapshot costs one ref read). The record also holds
    /// [`crate::snapshot::visibility::record_lines`], the union over every time that tree was taken; a
    /// new line rewrites it.
    pub(crate) fn record_snapshot(&self, snapshot: &crate::snapshot::Snapshot) -> Result<()> {
        let tree = snapshot.hash.0;
        self.remember_last_snapshot(tree);
        let reference = snapshot_record(tree);
        let mut lines = crate::snapshot::visibility::record_lines(snapshot);
        if let Some(commit) = self.ref_target(&reference)? {
            let taken = self.commit_time(commit)?;
            let recorded = self.recorded_left_out_lines(commit)?;
            lines = merge_nested(&recorded, &lines);
            let new_paths = lines
                .lines()
                .any(|line| !recorded.lines().any(|r| r == line));
            if !new_paths && self.now()? - taken < chrono::Duration::hours(1) {
                return Ok(());
            }
            for line in recorded.lines().filter(|line| !line.starts_with(NESTED)) {
                if !lines.lines().any(|l| l == line) {
                    lines.push_str(line);
                    lines.push('\n');
                }
            }
        }
        let message = match lines.is_empty() {
            true => "rewind: snapshot\n".to_owned(),
            false => format!("rewind: snapshot\n\n{lines}"),
        };
        self.commit(&reference, &message, tree, None)?;
        Ok(())
    }
}

impl Store {
    /// What snapshot `tree` could see: its ignore rules and every left-out path recorded for
    /// it, in its snapshot record and in `extra` (a turn's begin commit) when that commit is
    /// of `tree` (a turn a redo reopened starts from another tree, whose lines are not its
    /// begin commit's: model seed 415).
    pub(crate) fn visibility(&self, tree: ObjectId, extra: Option<ObjectId>) -> Result<Visibility> {
        self.visibility_within(tree, extra, &[], &mut Vec::new())
    }

    /// [`Self::visibility`] of a reopened turn's "before", narrowed to what the trees it was
    /// made of could see, as redo commit `redo` says ([`REOPENED_SIGHT`]). Costs a commit read
    /// more, and the same for each such tree.
    pub(crate) fn visibility_made_up(
        &self,
        tree: ObjectId,
        begin: ObjectId,
        redo: ObjectId,
    ) -> Result<Visibility> {
        let repo = self.repo();
        let commit = repo
            .find_commit(redo)
            .map_err(|e| Error::store(self.git_dir(), e))?;
        let made_up_by = commit.message_raw_sloppy().to_vec();
        self.visibility_within(tree, Some(begin), &made_up_by, &mut Vec::new())
    }

    /// [`Self::visibility`], narrowed by the [`REOPENED_SIGHT`] lines of `made_up_by` (a redo's
    /// commit message) about `tree`, and then about each tree it was made of, but not one in
    /// `met` (the trees asked about on the way here: no loop). Costs the same per tree.
    fn visibility_within(
        &self,
        tree: ObjectId,
        extra: Option<ObjectId>,
        made_up_by: &[u8],
        met: &mut Vec<ObjectId>,
    ) -> Result<Visibility> {
        met.push(tree);
        let repo = self.repo();
        let mut left_out = Vec::new();
        let mut nested: HashMap<BString, bool> = HashMap::new();
        let mut modes: HashMap<BString, u32> = HashMap::new();
        let mut recorded_rules: HashMap<BString, Vec<Vec<u8>>> = HashMap::new();
        let record = self.ref_target(&snapshot_record(tree))?;
        let mut messages = Vec::new();
        for commit in record.into_iter().chain(extra) {
            let object = repo
                .find_commit(commit)
                .map_err(|e| Error::store(self.git_dir(), e))?;
            if object
                .tree_id()
                .map_err(|e| Error::store(self.git_dir(), e))?
                == tree
            {
                messages.push(object.message_raw_sloppy().to_vec());
            }
        }
        // (A dry run's snapshot, not recorded: what its record would hold.)
        if let Some((_, lines)) =
            (crate::store::objects::lock(&self.peeked).as_ref()).filter(|(id, _)| *id == tree)
        {
            messages.push(lines.clone().into_bytes());
        }
        for message in &messages {
            let message = message.as_slice();
            left_out.extend(parse_left_out(message));
            for (word, path) in parse_lines(message, NESTED) {
                *nested.entry(path).or_insert(true) &= word == REPO.as_bytes();
            }
            for (path, mode) in parse_modes(message) {
                *modes.entry(path).or_insert(mode) &= mode;
            }
            for (digest, root) in parse_lines(message, RULES) {
                recorded_rules
                    .entry(root)
                    .or_default()
                    .push(digest.to_vec());
            }
        }
        left_out.sort_unstable();
        left_out.dedup();
        let rules_left_out = left_out
            .iter()
            .filter_map(|path| path.strip_suffix(b".gitignore"))
            .filter(|dir| dir.is_empty() || dir.ends_with(b"/"))
            .map(BString::from)
            .collect();
        let mut nested: Vec<(BString, bool)> = nested.into_iter().collect();
        nested.sort_unstable();
        let mut made_of = Vec::new();
        let hex = tree.to_hex().to_string();
        for (found, turn_found) in parse_made_of(made_up_by, tree) {
            let mut written: Vec<BString> = parse_lines(made_up_by, REOPENED_PATH)
                .filter(|(word, _)| *word == hex.as_bytes())
                .map(|(_, path)| path)
                .collect();
            written.sort_unstable();
            let mut sight = |tree| match met.contains(&tree) {
                true => Ok(None),
                false => self
                    .visibility_within(tree, None, made_up_by, met)
                    .map(Some),
            };
            made_of.push(MadeOf {
                found: sight(found)?,
                turn_found: sight(turn_found)?,
                written,
            });
        }
        met.pop();
        let excludes = HashMap::from([(BString::default(), Excludes::load(self.project()))]);
        Ok(Visibility {
            tree,
            project: self.project().to_owned(),
            left_out,
            rules_left_out,
            nested,
            modes,
            recorded_rules,
            excludes,
            rules: HashMap::new(),
            made_of,
        })
    }

    /// The `Rewind-Left-Out:`, `Rewind-Mode:` and `Rewind-Nested:` lines of commit `record`,
    /// as they are.
    pub(crate) fn recorded_left_out_lines(&self, record: ObjectId) -> Result<String> {
        let repo = self.repo();
        let object = repo
            .find_commit(record)
            .map_err(|e| Error::store(self.git_dir(), e))?;
        let mut lines = String::new();
        for line in object.message_raw_sloppy().lines() {
            if KEYS.iter().any(|key| line.starts_with(key.as_bytes())) {
                lines.push_str(&line.to_str_lossy());
                lines.push('\n');
            }
        }
        Ok(lines)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_lines_round_trip_any_name() {
        let names: [&[u8]; 5] = [
            b"a b/c",
            b"evil\nkeep",
            b"100%",
            b"\xff\xfe",
            b"Rewind-Left-Out: x",
        ];
        let paths: Vec<BString> = names.iter().map(|n| BString::from(*n)).collect();
        let snapshot = Snapshot {
            hash: crate::SnapshotId::EMPTY,
            files: 0,
            skipped: paths
                .iter()
                .map(|path| crate::Skipped {
                    path: path.clone(),
                    reason: crate::SkipReason::TooLarge,
                    detail: None,
                })
                .collect(),
            hidden_outside: paths.clone(),
            nested: Vec::new(),
            rules: Vec::new(),
            private_modes: paths.iter().map(|p| (p.clone(), 0o600)).collect(),
        };
        let text = record_lines(&snapshot);
        assert_eq!(text.lines().count(), 3 * names.len());
        let twice: Vec<BString> = paths.iter().chain(&paths).cloned().collect();
        assert_eq!(parse_left_out(text.as_bytes()), twice);
        assert_eq!(parse_modes(text.as_bytes()), snapshot.private_modes);
    }

    /// Every byte value, newlines, `%` and non-UTF-8 names: one printable word each, decoded
    /// back to the same bytes.
    #[test]
    fn encode_path_is_one_printable_word_that_decodes_to_the_same_bytes() {
        let every_byte: Vec<u8> = (0..=255).collect();
        let names: [&[u8]; 8] = [
            b"",
            b"plain/name.rs",
            b"a b\nc\r\n",
            b"100%25 %",
            b"\xff\xfe\x80",
            "caf\u{e9}/\u{1f600}".as_bytes(),
            b"%%%",
            &every_byte,
        ];
        for name in names {
            let mut encoded = String::new();
            encode_path(&mut encoded, name);
            assert!(
                encoded.bytes().all(|b| (b'!'..=b'~').contains(&b)),
                "{name:?} -> {encoded:?}"
            );
            assert_eq!(decode_path(encoded.as_bytes()), Some(BString::from(name)));
        }
        let mut encoded = String::new();
        encode_path(&mut encoded, b"a%b c");
        assert_eq!(encoded, "a%25b%20c");
    }

    #[test]
    fn decode_path_refuses_a_malformed_escape() {
        for bad in [&b"%"[..], b"a%4", b"%zz", b"%\xc3\xa9"] {
            assert_eq!(decode_path(bad), None, "{:?}", bad.as_bstr());
        }
        assert_eq!(decode_path(b"%41%2f"), Some(BString::from("A/")));
    }
}
