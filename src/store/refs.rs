//! References: the store's named records (`refs/rewind/...`), the commits they point to, and
//! resolving a user's id to a snapshot. rewind's records are written without reflog entries
//! (each commit names its time and what it needs, and a chain only grows, so an entry would
//! say nothing the commits do not), and prune moves them into `packed-refs`: a record costs no
//! file of its own past the next prune. Refs a person makes in the store get reflogs, as
//! `core.logAllRefUpdates=always` asks.

use std::collections::HashSet;
use std::fs;

use chrono::{DateTime, Utc};
use gix::bstr::BStr;
use gix::ObjectId;

use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};
use gix::refs::Target;

use crate::error::{kind_name, object_error, Error, Result};
use crate::store::{files_below, Locked, SnapshotId, Store};

/// Where rewind's records live (see the module docs).
pub(crate) const RECORDS: &str = "refs/rewind/";

/// Where snapshot records live: `refs/rewind/snapshots/<tree>`, each a commit of the tree that
/// names the time it was taken and what it left out.
pub(crate) const SNAPSHOT_RECORDS: &str = "refs/rewind/snapshots/";

/// The snapshot record of `tree`.
pub(crate) fn snapshot_record(tree: impl std::fmt::Display) -> String {
    format!("{SNAPSHOT_RECORDS}{tree}")
}

impl Store {
    /// The commit a reference points to, if it exists.
    pub(crate) fn ref_target(&self, reference: &str) -> Result<Option<ObjectId>> {
        Ok(self
            .repo()
            .try_find_reference(reference)
            .map_err(|e| Error::store(&self.git_dir, e))?
            .and_then(|mut r| r.peel_to_id().ok().map(|id| id.detach())))
    }
}

impl Locked<'_> {
    /// Write a commit of `tree` with `parents` and point `reference` at it (with a reflog
    /// entry). Authored by "rewind" at the store's clock.
    pub(crate) fn commit(
        &self,
        reference: &str,
        message: &str,
        tree: ObjectId,
        parents: impl IntoIterator<Item = ObjectId>,
    ) -> Result<ObjectId> {
        let id = self.commit_object(message, tree, parents)?;
        self.set_ref(reference, id, message.lines().next().unwrap_or("rewind"))?;
        Ok(id)
    }
    /// Write a commit of `tree` with `parents`, no ref moved (see [`Self::commit`]).
    pub(crate) fn commit_object(
        &self,
        message: &str,
        tree: ObjectId,
        parents: impl IntoIterator<Item = ObjectId>,
    ) -> Result<ObjectId> {
        let signature = gix::actor::Signature {
            name: "rewind".into(),
            email: "rewind@localhost".into(),
            time: gix::date::Time::new(self.now()?.timestamp(), 0),
        };
        let commit = gix::objs::Commit {
            tree,
            parents: parents.into_iter().collect(),
            author: signature.clone(),
            committer: signature,
            encoding: None,
            message: message.into(),
            extra_headers: Vec::new(),
        };
        let mut data = Vec::new();
        gix::objs::WriteTo::write_to(&commit, &mut data)
            .map_err(|e| Error::io("encoding commit", &self.git_dir, e))?;
        self.objects.write(gix::objs::Kind::Commit, &data)
    }
    /// Write a copy of `commit` (same tree, message, author and times) with other `parents`;
    /// used when prune cuts a chain.
    pub(crate) fn rewrite_commit(
        &self,
        commit: ObjectId,
        parents: impl IntoIterator<Item = ObjectId>,
    ) -> Result<ObjectId> {
        self.rewrite_commit_with(commit, parents, |_| {})
    }
    /// [`Self::rewrite_commit`], with `edit` applied to the message.
    pub(crate) fn rewrite_commit_with(
        &self,
        commit: ObjectId,
        parents: impl IntoIterator<Item = ObjectId>,
        edit: impl FnOnce(&mut gix::bstr::BString),
    ) -> Result<ObjectId> {
        let repo = self.repo();
        let git_dir = &self.git_dir;
        let mut copy = repo
            .find_commit(commit)
            .map_err(|e| Error::store(git_dir, e))?
            .decode()
            .map_err(|e| Error::store(git_dir, e))?
            .to_owned()
            .map_err(|e| Error::store(git_dir, e))?;
        copy.parents = parents.into_iter().collect();
        edit(&mut copy.message);
        let mut data = Vec::new();
        gix::objs::WriteTo::write_to(&copy, &mut data)
            .map_err(|e| Error::io("encoding commit", &self.git_dir, e))?;
        self.objects.write(gix::objs::Kind::Commit, &data)
    }
    /// Point `reference` at `target`, creating or moving it (a reflog entry only for a ref that
    /// is not rewind's).
    pub(crate) fn set_ref(&self, reference: &str, target: ObjectId, log: &str) -> Result<()> {
        self.remove_stale_ref_lock(reference);
        // (Once refs are packed, moving one takes `packed-refs.lock` too.)
        self.remove_stale_packed_refs_lock();
        self.repo_for(reference)
            .reference(
                reference,
                target,
                gix::refs::transaction::PreviousValue::Any,
                log,
            )
            .map_err(|e| Error::store(&self.git_dir, e))?;
        Ok(())
    }
    /// Point `reference` at a copy of its history (prune cut the chain), and drop its reflog:
    /// every entry, this update's too, names the old chain and would keep it all.
    pub(crate) fn set_ref_rewritten(&self, reference: &str, target: ObjectId) -> Result<()> {
        self.set_ref(reference, target, "rewind: prune")?;
        let log = self.git_dir().join("logs").join(reference);
        match fs::remove_file(&log) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(Error::io("removing reflog", log, e))
            }
            _ => Ok(()),
        }
    }
    /// Move or delete (`None`) every ref of `edits` at once: one transaction that writes them
    /// into `packed-refs`, whose rename is its only commit point when none of them is loose
    /// (prune packs them first), so a kill leaves all or none. Costs one rewrite of
    /// `packed-refs`.
    pub(crate) fn set_refs_at_once(&self, edits: &[(String, Option<ObjectId>)]) -> Result<()> {
        self.remove_stale_packed_refs_lock();
        let mut changes = Vec::new();
        for (name, target) in edits {
            self.remove_stale_ref_lock(name);
            let change = match target {
                Some(id) => Change::Update {
                    log: LogChange::default(),
                    expected: PreviousValue::Any,
                    new: Target::Object(*id),
                },
                None if self.ref_target(name)?.is_some() => Change::Delete {
                    expected: PreviousValue::Any,
                    log: RefLog::AndReference,
                },
                None => continue,
            };
            changes.push(edit(name, change)?);
        }
        self.commit_packed(changes)
    }
    /// Commit `changes` to rewind's refs through `packed-refs` (no loose ref written, any loose
    /// one removed; no reflog). Costs one rewrite of `packed-refs`.
    fn commit_packed(&self, changes: Vec<RefEdit>) -> Result<()> {
        let repo = self.repo_for(RECORDS);
        let packed = gix::refs::file::transaction::PackedRefs::DeletionsAndNonSymbolicUpdatesRemoveLooseSourceReference(
            Box::new(repo.objects.clone()),
        );
        let fail = gix::lock::acquire::Fail::Immediately;
        repo.refs
            .transaction()
            .packed_refs(packed)
            .prepare(changes, fail, fail)
            .and_then(|prepared| prepared.commit(None))
            .map_err(|e| Error::store(self.git_dir(), e))?;
        Ok(())
    }
    /// The repository to write `reference` with: one that writes no reflog for rewind's records.
    fn repo_for(&self, reference: &str) -> gix::Repository {
        let mut repo = self.repo();
        if reference.starts_with(RECORDS) {
            repo.refs.write_reflog = gix::refs::store::WriteReflog::Disable;
        }
        repo
    }
    /// Move the loose refs under `prefix` into `packed-refs`, as `git pack-refs` does, and drop
    /// their reflogs. Costs reading the loose refs and rewriting `packed-refs` once.
    pub(crate) fn pack_refs(&self, prefix: &str) -> Result<()> {
        let git_dir = self.git_dir();
        let loose: std::collections::HashSet<String> = files_below(&git_dir.join(prefix))
            .iter()
            .filter_map(|file| file.strip_prefix(git_dir).ok()?.to_str().map(str::to_owned))
            .collect();
        let edits = self
            .refs_under(prefix)?
            .into_iter()
            .filter(|(name, _)| loose.contains(name))
            .map(|(name, id)| {
                self.remove_stale_ref_lock(&name);
                edit(
                    &name,
                    Change::Update {
                        log: LogChange::default(),
                        expected: PreviousValue::MustExistAndMatch(Target::Object(id)),
                        new: Target::Object(id),
                    },
                )
            })
            .collect::<Result<Vec<_>>>()?;
        if !edits.is_empty() {
            self.remove_stale_packed_refs_lock();
            self.commit_packed(edits)?;
        }
        // Their directory, if packing emptied it (the next loose one creates it again).
        let _ = fs::remove_dir(git_dir.join(prefix));
        match fs::remove_dir_all(git_dir.join("logs").join(prefix)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io(
                "removing reflogs",
                git_dir.join("logs").join(prefix),
                e,
            )),
            _ => Ok(()),
        }
    }
    /// Record snapshot `tree` again, as it was recorded (what it left out), at the store's clock:
    /// it then lives a whole retention from now. A tree with no record is left as it is.
    /// Costs a commit read and a commit.
    pub(crate) fn renew_snapshot_record(&self, tree: ObjectId) -> Result<()> {
        self.record_as(tree, tree)
    }

    /// Record tree `tree` as snapshot `like` was recorded (what it left out, the modes and
    /// nested repositories it saw), at the store's clock; nothing when `like` has no record.
    /// The record makes `tree` reachable for git. Costs a commit read and a commit.
    pub(crate) fn record_as(&self, tree: ObjectId, like: ObjectId) -> Result<()> {
        let Some(commit) = self.ref_target(&snapshot_record(like))? else {
            return Ok(());
        };
        let message = self
            .repo()
            .find_commit(commit)
            .map_err(|e| Error::store(&self.git_dir, e))?
            .message_raw_sloppy()
            .to_string();
        self.commit(&snapshot_record(tree), &message, tree, None)?;
        Ok(())
    }

    /// Remove `<reference>.lock` if a killed process left it (see [`remove_stale_lock`]).
    pub(crate) fn remove_stale_ref_lock(&self, reference: &str) {
        remove_stale_lock(&self.git_dir.join(format!("{reference}.lock")));
    }

    /// Remove `packed-refs.lock` if a killed process left it (see [`remove_stale_lock`]):
    /// every ref update takes it once refs are packed, so one left would refuse every write.
    pub(crate) fn remove_stale_packed_refs_lock(&self) {
        remove_stale_lock(&self.git_dir.join("packed-refs.lock"));
    }
}

impl Store {
    pub(crate) fn commit_time(&self, commit: ObjectId) -> Result<DateTime<Utc>> {
        let repo = self.repo();
        let seconds = repo
            .find_commit(commit)
            .and_then(|c| c.time())
            .map_err(|e| Error::store(self.git_dir(), e))?
            .seconds;
        Ok(DateTime::from_timestamp(seconds, 0).unwrap_or_default())
    }

    /// Every reference under `prefix`, with the commit (or object) it points to.
    pub(crate) fn refs_under(&self, prefix: &str) -> Result<Vec<(String, ObjectId)>> {
        // Reads take no lock: a ref listed, then deleted by a writer before it is read, fails
        // the read of it; the listing is made again.
        read_again(|| Ok((self.read_refs_under(prefix)?, true)))
    }

    /// One listing of [`Self::refs_under`]. Costs a directory walk and a read per loose ref.
    fn read_refs_under(&self, prefix: &str) -> Result<Vec<(String, ObjectId)>> {
        let repo = self.repo();
        let git_dir = self.git_dir();
        let platform = repo.references().map_err(|e| Error::store(git_dir, e))?;
        let mut refs = Vec::new();
        for reference in platform
            .prefixed(prefix)
            .map_err(|e| Error::store(git_dir, e))?
        {
            let reference = reference.map_err(|e| Error::store(git_dir, e))?;
            if let Some(id) = reference.target().try_id() {
                refs.push((reference.name().as_bstr().to_string(), id.to_owned()));
            }
        }
        Ok(refs)
    }
}

/// How long a ref's lock file is waited on, under the store lock, before it is taken for a
/// killed process's (a `git` holds one for milliseconds).
const STALE_LOCK: std::time::Duration = std::time::Duration::from_secs(1);

/// Remove lock file `path` (a ref's, or `packed-refs.lock`) left by a killed process. Under
/// the store lock, the only other holder can be a `git` run in the store by a person, which
/// holds it for milliseconds: one found is waited on until it goes, or is [`STALE_LOCK`] old,
/// or has stood that long since it was found (a `git` slower than that, under a tracer, loses
/// it). Costs a `stat` (and up to that long when one is there).
pub(crate) fn remove_stale_lock(path: &std::path::Path) {
    let found = std::time::Instant::now();
    while let Ok(meta) = fs::symlink_metadata(path) {
        let age = meta.modified().ok().and_then(|t| t.elapsed().ok());
        if age.unwrap_or_default() >= STALE_LOCK || found.elapsed() >= STALE_LOCK {
            let _ = fs::remove_file(path);
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The value of `read` once it is whole (`(value, true)`), reading again for up to a second
/// (100 tries 10 ms apart) while it fails or is not: reads take no lock, and a writer may
/// change what one reads halfway. After that, the last read's value, whole or not. The same
/// failure twice in a row is the store's state (a damaged `packed-refs`, say), not such a race:
/// it is returned at once.
pub(crate) fn read_again<T>(mut read: impl FnMut() -> Result<(T, bool)>) -> Result<T> {
    let mut last_failure = None;
    for _ in 0..100 {
        match read() {
            Ok((value, true)) => return Ok(value),
            Ok(_) => last_failure = None,
            Err(e) if last_failure.as_ref() == Some(&e.to_string()) => return Err(e),
            Err(e) => last_failure = Some(e.to_string()),
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    Ok(read()?.0)
}

impl Locked<'_> {
    /// Delete `reference` and its reflog.
    pub(crate) fn delete_ref(&self, reference: &str) -> Result<()> {
        self.delete_refs(&[reference])
    }
    /// Delete `refs` and their reflogs in one transaction: `packed-refs` is rewritten once.
    pub(crate) fn delete_refs(&self, refs: &[impl AsRef<str>]) -> Result<()> {
        // Under the store lock, lock files can only be left over from killed processes.
        for reference in refs {
            self.remove_stale_ref_lock(reference.as_ref());
        }
        self.remove_stale_packed_refs_lock();
        let mut edits = Vec::new();
        for reference in refs {
            if self.ref_target(reference.as_ref())?.is_some() {
                let delete = Change::Delete {
                    expected: PreviousValue::Any,
                    log: RefLog::AndReference,
                };
                edits.push(edit(reference.as_ref(), delete)?);
            }
        }
        if !edits.is_empty() {
            self.repo()
                .edit_references(edits)
                .map_err(|e| Error::store(self.git_dir(), e))?;
        }
        for reference in refs {
            let _ = fs::remove_file(self.git_dir().join("logs").join(reference.as_ref()));
        }
        Ok(())
    }
}

impl Store {
    /// The snapshot a user named: a full id, or an abbreviation (4 digits or more) that only
    /// one object in the store starts with. Costs a prefix lookup and an object header read.
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), &rewind::OpenOptions::new("/tmp/rewind"))?;
    /// let full = store.resolve("4b825dc6")?; // abbreviations work when unambiguous
    /// assert_eq!(full.to_string().len(), 40);
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn resolve(&self, spec: &str) -> Result<SnapshotId> {
        let repo = self.repo();
        let valid = (4..=40).contains(&spec.len()) && spec.bytes().all(|b| b.is_ascii_hexdigit());
        if !valid {
            return Err(Error::InvalidId(spec.to_owned()));
        }
        let id = if spec.len() == 40 {
            ObjectId::from_hex(spec.as_bytes()).map_err(|_| Error::InvalidId(spec.to_owned()))?
        } else {
            let prefix =
                gix::hash::Prefix::from_hex(spec).map_err(|_| Error::InvalidId(spec.to_owned()))?;
            match repo.objects.lookup_prefix(prefix, None) {
                Ok(Some(Ok(id))) => id,
                Ok(Some(Err(()))) => return Err(Error::Ambiguous(spec.to_owned())),
                Ok(None) => return Err(Error::NotFound(spec.to_owned())),
                Err(e) => return Err(Error::store(self.git_dir(), e)),
            }
        };
        self.tree(SnapshotId(id)).map(SnapshotId)
    }

    /// [`Self::resolve`] for a `from` and an optional `to` (a diff's two ends).
    pub fn resolve_range(
        &self,
        from: &str,
        to: Option<&str>,
    ) -> Result<(SnapshotId, Option<SnapshotId>)> {
        Ok((
            self.resolve(from)?,
            to.map(|to| self.resolve(to)).transpose()?,
        ))
    }

    /// The tree of `snapshot`, checked to be one in the store ([`Error::NotFound`],
    /// [`Error::WrongType`] otherwise). Costs an object header read.
    pub(crate) fn tree(&self, snapshot: SnapshotId) -> Result<ObjectId> {
        let id = snapshot.0;
        let header = self
            .repo()
            .try_find_header(id)
            .map_err(|e| object_error(&id, BStr::new(""), e))?
            .ok_or_else(|| Error::NotFound(id.to_string()))?;
        match header.kind() {
            gix::objs::Kind::Tree => Ok(id),
            other => Err(Error::WrongType {
                id: id.to_string(),
                actual: kind_name(other),
                expected: "tree",
            }),
        }
    }

    /// The tree of `snapshot`, checked to be a whole snapshot: one `track` recorded, or one a
    /// commit of rewind's names (a turn's before or after, an undo point, what an undo left),
    /// never a directory's tree inside one ([`Error::NotFound`]), which a restore would take
    /// as the whole project. Costs a ref read; for a tree whose record a prune removed, a commit
    /// read per commit under `refs/rewind/`.
    pub(crate) fn snapshot_tree(&self, snapshot: SnapshotId) -> Result<ObjectId> {
        let tree = self.tree(snapshot)?;
        if self.ref_target(&snapshot_record(tree))?.is_some() {
            return Ok(tree);
        }
        let repo = self.repo();
        let mut seen = HashSet::new();
        for (_, tip) in self.refs_under("refs/rewind/")? {
            let mut next = Some(tip);
            while let Some(commit) = next.filter(|c| seen.insert(*c)) {
                let object = repo
                    .find_commit(commit)
                    .map_err(|e| Error::store(self.git_dir(), e))?;
                if object.tree_id().ok().is_some_and(|id| id == tree) {
                    return Ok(tree);
                }
                next = object.parent_ids().next().map(|id| id.detach());
            }
        }
        // (A directory's tree inside one, or one whose record a prune removed.)
        Err(Error::NotFound(tree.to_string()))
    }
}

/// The edit `change` of ref `name`.
fn edit(name: &str, change: Change) -> Result<RefEdit> {
    Ok(RefEdit {
        change,
        name: name
            .try_into()
            .map_err(|e| Error::store(name, format!("bad ref name: {e}")))?,
        deref: false,
    })
}
