//! The restore journal: before a restore creates temp files in the project, it records their
//! name token, their directories and the two blobs each can hold in the store, so that after a
//! crash the next call under the lock removes exactly those files (and never a user's).
//!
//! The run also appends a line for each file it has changed (`done <n>`, once the swap or the
//! deletion is over), and before the next call removes the journal, it records which of the
//! files the killed run planned to write or delete it did not get to (`rewind-stopped-runs`):
//! from the disk alone, a file the run wrote and the same bytes (or mode) written by someone
//! after the kill look alike (and a file it deleted and one someone deleted), and an undo or
//! redo taking the killed run's place must tell them apart (an edit is never overwritten
//! unsaid).

use std::collections::HashMap;

use gix::bstr::{BStr, BString, ByteSlice};
use gix::ObjectId;

use crate::error::{Error, Result};
use crate::fs::{Dir, Kind, ProjectRoot};
use crate::store::objects::read_blob;
use crate::store::{Locked, Store};

/// The store file naming the temp-file token of a restore in progress and its directories.
const JOURNAL: &str = "rewind-restore-journal";
/// The store file recording, per restore run that journalled (by its token), the paths it
/// planned to write or delete and did not: `run <token> <seconds since 1970, store clock>`,
/// then `not-done <token> <path, %XX-encoded>` lines. A run that finishes records its own; the sweep
/// records a stopped one's. `prune` drops runs older than the retention.
const STOPPED_RUNS: &str = "rewind-stopped-runs";

impl Locked<'_> {
    /// A new run's token, which its temp files carry (`.rewind-<token>-<n>`) and its record names:
    /// 16 hex digits from the clock and the process.
    pub(crate) fn new_run_token(&self) -> Result<String> {
        let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        hasher.update(format!("{nanos} {}", std::process::id()).as_bytes());
        let token = hasher
            .try_finalize()
            .map_err(|e| Error::store(self.git_dir(), e))?
            .to_hex_with_len(16)
            .to_string();
        remember_own(&token);
        Ok(token)
    }

    /// Record the token a restore's temp files carry, the directories of the files it will
    /// write or delete and, for each (`temps`: its number `n` in `.rewind-<token>-<n>` and
    /// `.rewind-aside-<token>-<n>`, its path, and the blobs of the file it replaces or deletes
    /// and of the file it writes, each with its mode), the only bytes its temp file can hold, so
    /// that after a crash the next run removes exactly those files, and only with those bytes
    /// (never a user's).
    /// `undo` is the run's undo point, which the next run names should this one be killed.
    /// Costs a line per file written or deleted.
    pub(crate) fn write_journal<'p>(
        &self,
        token: &str,
        undo: ObjectId,
        temps: impl Iterator<Item = (usize, &'p BStr, [Option<(ObjectId, u32)>; 2])>,
    ) -> Result<()> {
        let mut text = format!("token {token}\nundo {undo}\n");
        let mut dirs: Vec<&[u8]> = Vec::new();
        for (n, path, blobs) in temps {
            dirs.push(
                path.rfind_byte(b'/')
                    .map_or(&b""[..], |slash| &path[..slash]),
            );
            let ids = blobs.map(|blob| blob.map_or("-".into(), |(id, _)| id.to_string()));
            let modes = blobs.map(|blob| blob.map_or("-".into(), |(_, mode)| format!("{mode:o}")));
            text.push_str(&format!("temp {n} {} {} ", ids[0], ids[1]));
            crate::paths::encode_path(&mut text, path);
            // (The modes last: a build before them reads the line without.)
            text.push_str(&format!(" {} {}\n", modes[0], modes[1]));
        }
        dirs.sort_unstable();
        dirs.dedup();
        for dir in dirs {
            text.push_str(&format!("dir {}\n", hex(dir)));
        }
        crate::fs::write_atomically(&self.git_dir().join(JOURNAL), "index.tmp", text.as_bytes())
    }

    /// The journal, to record the run's progress in ([`Progress`]). Costs an `open`.
    pub(crate) fn journal_progress(&self) -> Result<Progress> {
        let recording = |e: std::io::Error| {
            let what = format!("recording the run's progress in the store's journal: {e}");
            Error::io(
                "opening",
                self.git_dir().join(JOURNAL),
                std::io::Error::new(e.kind(), what),
            )
        };
        self.open_journal_to_append()
            .map(Progress)
            .map_err(recording)
    }

    /// Append `lines` to the journal. Costs one appending write.
    fn append_to_journal(&self, lines: &str) -> std::io::Result<()> {
        let mut journal = self.open_journal_to_append()?;
        std::io::Write::write_all(&mut journal, lines.as_bytes())
    }

    /// The journal, opened to append to. Costs an `open` and an `fstat`.
    fn open_journal_to_append(&self) -> std::io::Result<std::fs::File> {
        let path = self.git_dir().join(JOURNAL);
        // (Never created here: only a journal written whole first is appended to.)
        if !path.exists() {
            return Err(std::io::ErrorKind::NotFound.into());
        }
        crate::fs::open_store_file_to_append(&path)
    }

    pub(crate) fn remove_journal(&self) {
        let _ = std::fs::remove_file(self.git_dir().join(JOURNAL));
    }

    /// Keep the journal of a run that finished but left a temp file it could not remove, for
    /// the next sweep, marked finished and told: the run's outcome named its undo point, so
    /// neither the sweep nor `doctor` says it was stopped.
    pub(crate) fn keep_journal_told(&self) {
        let _ = self.append_to_journal("noticed\nfinished\n");
    }

    /// Remove the temp files a killed restore left: only names carrying the token its journal
    /// recorded, in the directories it recorded, and only files holding one of the two blobs
    /// the journal recorded for that temp file (the staged file, or the undo point's bytes a
    /// swap took out), or, for a temp file not recorded as staged whole, the start of the
    /// staged file (a staging the kill cut short). A swap killed before it could put back a
    /// save that landed meanwhile leaves that save under the temp name: it is kept, renamed
    /// `.rewind-aside-…`. A temp file that can be neither removed nor renamed (a read-only
    /// directory) keeps the journal for the next run. Every snapshot that is recorded (and
    /// every `prune`) calls this first, so no snapshot records a temp file; a dry run's does
    /// not, so that it changes no file. Costs one failed `open`
    /// when no restore was killed, else a `readdir` per recorded directory and a read and a
    /// hash per file left.
    pub(crate) fn sweep_temp_files(&self) {
        let Some(journal) = self.read_journal() else {
            return;
        };
        let Ok(root) = ProjectRoot::open(self.project()) else {
            return;
        };
        if journal.prefix.is_empty() {
            return self.remove_journal();
        }
        // What a stopped run planned to write or delete and did not, recorded before any of its
        // temp files goes (they are the evidence). Unrecorded (the store's disk full), an undo or
        // redo after it takes what holds its planned bytes for its write, as builds before this
        // did.
        // (Not recorded, the journal stays, which says the same to whoever asks.)
        let mut left = false;
        if !journal.finished {
            let found = not_done(Some(&root), &journal);
            if let Err(e) = self.record_stopped_run(&journal.token, &found) {
                tracing::warn!("recording what a stopped restore did not do: {e}");
                left = true;
            }
        }
        let prefix = journal.prefix.as_bytes();
        // A deletion killed between setting its file aside and removing it leaves
        // `.rewind-aside-<token>-<n>`: it goes if it holds the undo point's bytes (else it is
        // someone's save, and stays aside).
        let aside_prefix = [b".rewind-aside-", &prefix[b".rewind-".len()..]].concat();
        // What stays for the next run (a file that cannot be removed yet) is said by the first
        // sweep only: each one after tries again quietly.
        let say_once = |notice: String| match journal.noticed {
            true => tracing::warn!("{notice}"),
            false => self.notice(notice),
        };
        for dir in &journal.dirs {
            let listed = root
                .names_with_prefix(dir, b".rewind-")
                .and_then(|names| Ok((names, root.open_dir(dir, None)?)));
            let (names, fd) = match listed {
                Ok(listed) => listed,
                // Moved or removed since (or a symlink now stands there): out of reach for good.
                Err(e) if gone(&e) => {
                    self.notice(format!(
                        "a restore killed earlier wrote in {}, which is no longer a directory \
                         in the project (removed, or moved): if it was moved, its files named \
                         {}* and .rewind-aside-{}* there are that restore's, or someone's save",
                        shown(&root, dir),
                        journal.prefix,
                        &journal.prefix[b".rewind-".len()..],
                    ));
                    continue;
                }
                Err(e) => {
                    let at = shown(&root, dir);
                    say_once(format!(
                        "could not look for a killed restore's temp files in {at} ({e}); \
                         the next run looks again"
                    ));
                    left = true;
                    continue;
                }
            };
            let shown = |name: &[u8]| match dir.is_empty() {
                true => shown(&root, name),
                false => shown(&root, &[&dir[..], b"/", name].concat()),
            };
            for name in names {
                if let Some(n) = name.strip_prefix(&aside_prefix[..]) {
                    let taken_out = journal.temps.get(n.to_str().unwrap_or_default());
                    let undo_bytes = Temp {
                        blobs: [taken_out.and_then(|temp| temp.blobs[0]), None],
                        staged: true,
                        ..Temp::default()
                    };
                    if self.left_by_restore(&fd, &name, &undo_bytes) {
                        let _ = ProjectRoot::unlink_in(&fd, &name);
                    }
                    continue;
                }
                let Some(n) = name.strip_prefix(prefix) else {
                    continue;
                };
                let temp = journal.temps.get(n.to_str().unwrap_or_default());
                if self.left_by_restore(&fd, &name, temp.unwrap_or(&Temp::default())) {
                    if let Err(e) = ProjectRoot::unlink_in(&fd, &name) {
                        say_once(format!(
                            "a restore killed earlier left {}, which could not be removed ({e}); \
                             the next run tries again",
                            shown(&name)
                        ));
                        left = true;
                    }
                    continue;
                }
                let kept = [b".rewind-aside-", &name[b".rewind-".len()..]].concat();
                match ProjectRoot::rename_in(&fd, &name, &kept, true) {
                    Ok(()) => self.notice(format!(
                        "a restore killed earlier left someone's save under its temp name: \
                         kept as {}",
                        shown(&kept)
                    )),
                    Err(e) => {
                        say_once(format!(
                            "a restore killed earlier left someone's save under its temp name \
                             {}, which could not be renamed ({e}): it stays there",
                            shown(&name)
                        ));
                        left = true;
                    }
                }
            }
        }
        if let Some(undo) = journal.undo.filter(|_| !journal.noticed) {
            self.notice(format!(
                "a restore (or revert, undo or redo) was stopped before it finished: files may \
                 be partly changed; `rewind restore {undo}` puts them back as they were before it"
            ));
            // The warning names it, and may be said long after (`prune --all` says none): it
            // lives a retention from now.
            if let Err(e) = self.renew_snapshot_record(undo) {
                tracing::warn!("renewing the stopped restore's undo point: {e}");
            }
        }
        match left {
            false => self.remove_journal(),
            // Said once, though the journal stays for the files left.
            true => {
                let _ = self.append_to_journal("noticed\n");
            }
        }
    }

    /// Record `notice` for [`Store::take_notices`] (in the store; in memory when it cannot be
    /// written there), and for the log. Under the lock, so that no taker removes the file
    /// between its open and the write. Costs an appending write.
    fn notice(&self, notice: String) {
        tracing::warn!("{notice}");
        let path = self.git_dir().join(super::NOTICES);
        let line = format!("{}\n", super::escape_notice(&notice));
        // Said once while it waits: a sweep that finds the same again adds nothing.
        let waiting = crate::fs::read_store_file(&path).unwrap_or_default();
        if waiting
            .lines_with_terminator()
            .any(|l| l == line.as_bytes())
        {
            return;
        }
        let kept = crate::fs::open_store_file_to_append(&path)
            .and_then(|mut file| std::io::Write::write_all(&mut file, line.as_bytes()));
        if kept.is_err() {
            let mut memory = crate::store::objects::lock(&self.notices);
            if !memory.contains(&notice) {
                memory.push(notice);
            }
        }
    }

    /// Whether temp file `name` in `dir` holds what its restore put there: one of the two blobs
    /// recorded for it (the file the swap took out, the staged file), or, unless it was staged
    /// whole, the start of the staged file (a staging the kill cut short). Costs a read and a
    /// hash of it (and a read of the staged blob when it matches neither).
    fn left_by_restore(&self, dir: &Dir, name: &[u8], temp: &Temp) -> bool {
        let [taken_out, staged] = temp.blobs;
        let Some((id, data, is_file)) = held(dir, name) else {
            return false;
        };
        if Some(id) == taken_out || Some(id) == staged {
            return true;
        }
        let cut_short = |staged: ObjectId| {
            let full = read_blob(&self.repo(), staged, name.as_bstr()).ok()?;
            Some(data.len() < full.len() && full.starts_with(&data))
        };
        is_file && !temp.staged && staged.and_then(cut_short).unwrap_or(false)
    }

    /// Record in the store that the run `token`, stopped before it finished, planned to write
    /// or delete the paths `found.not_done` and did not (or may not have), `found.not_written`
    /// certainly not. Said once per run (a sweep that must run again adds nothing), written
    /// whole (a full disk leaves the record as it was, not cut short) and synced: the sweep
    /// removes the journal after. Costs a read and a rewrite of the record of runs, and an
    /// `fsync`.
    fn record_stopped_run(&self, token: &str, found: &NotDoneFound) -> Result<()> {
        let path = self.git_dir().join(STOPPED_RUNS);
        let run = format!("run {token} ");
        let mut text = crate::fs::read_store_file(&path).unwrap_or_default();
        if text.lines().any(|line| line.starts_with(run.as_bytes())) {
            return Ok(());
        }
        let lines = self.run_lines(token, (&found.not_done, &found.not_written));
        text.extend_from_slice(lines.as_bytes());
        crate::fs::write_atomically(&path, "index.tmp", &text)?;
        crate::fs::open_store_file(&path, std::fs::OpenOptions::new().read(true))
            .and_then(|file| file.sync_data())
            .map_err(|e| Error::io("syncing", &path, e))
    }

    /// Record in the store that the run `token`, which finished, planned to write or delete the
    /// paths `not_done` and did not: should it be killed before its own record says so, its record
    /// written before its first change is all there is. Not synced (lost, an undo or redo
    /// after takes nothing it planned for done, the safe side). Costs an appending write.
    pub(crate) fn record_finished_run(
        &self,
        token: &str,
        not_done: &[BString],
    ) -> std::io::Result<()> {
        let path = self.git_dir().join(STOPPED_RUNS);
        let mut file = crate::fs::open_store_file_to_append(&path)?;
        // (What it left as a failure may be written in part: none is recorded as not written.)
        let lines = self.run_lines(token, (not_done, &[]));
        std::io::Write::write_all(&mut file, lines.as_bytes())
    }

    /// The lines of run `token` in the record of runs, at the store's clock: `not-done` for each
    /// path it did not (or may not) write or delete, `not-written` for those it certainly did not.
    fn run_lines(&self, token: &str, (not_done, not_written): (&[BString], &[BString])) -> String {
        let now = self.now().map_or(0, |now| now.timestamp());
        let mut lines = format!("run {token} {now}\n");
        let paths = (not_done.iter().map(|path| ("not-done", path)))
            .chain(not_written.iter().map(|path| ("not-written", path)));
        for (key, path) in paths {
            lines.push_str(&format!("{key} {token} "));
            crate::paths::encode_path(&mut lines, path);
            lines.push('\n');
        }
        lines
    }

    /// Drop from the record of runs those recorded before `cutoff` (by the store's clock) but
    /// those `named` (by a session's chain, which may still ask). Costs a read and, when one
    /// goes, a rewrite of the record.
    pub(crate) fn forget_runs_before(
        &self,
        cutoff: chrono::DateTime<chrono::Utc>,
        named: &std::collections::HashSet<String>,
    ) -> Result<()> {
        let path = self.git_dir().join(STOPPED_RUNS);
        let Ok(recorded) = crate::fs::read_store_file(&path) else {
            return Ok(());
        };
        let old: Vec<&[u8]> = recorded
            .lines()
            .filter_map(|line| {
                let mut words = line.strip_prefix(b"run ")?.split_str(" ");
                let token = words.next()?;
                let at: i64 = words.next()?.to_str().ok()?.parse().ok()?;
                let kept = token.to_str().is_ok_and(|token| named.contains(token));
                (at < cutoff.timestamp() && !kept).then_some(token)
            })
            .collect();
        if old.is_empty() {
            return Ok(());
        }
        let of_old_run = |line: &[u8]| {
            let rest = (line.strip_prefix(b"run "))
                .or_else(|| line.strip_prefix(b"not-done "))
                .or_else(|| line.strip_prefix(b"not-written "));
            rest.and_then(|rest| rest.split_str(" ").next())
                .is_some_and(|token| old.contains(&token))
        };
        let mut kept = Vec::new();
        for line in recorded.lines_with_terminator() {
            if !of_old_run(line.trim_end()) {
                kept.extend_from_slice(line);
            }
        }
        crate::fs::write_atomically(&path, "index.tmp", &kept)
    }
}

/// What the stopped run of `journal` planned to write or delete and did not get to, as its
/// journal and the disk tell, each path as one of:
/// - done: its `done` line, or the undo point's bytes at rewind's own name, where a swap took
///   the file out of the path or a deletion set it aside (a kill between the change and the
///   line, which comes before either goes);
/// - not written, known: its file never staged whole (no swap comes before that is recorded),
///   the staged file still at its temp name (the swap, or a new file's rename, never came, or
///   was taken back), or, for a deletion, the file still at its path;
/// - not known: anything else (temp files a user removed, say), which counts as not done, the
///   safe side.
///
/// For a change of mode alone (the exec bit, or a file made a symlink to its own bytes) the
/// bytes cannot tell: what stands there does (a symlink or a file, and its exec bit), where the
/// journal names both modes. Costs a step per path, and per change without its line an `open`
/// of its directory and a read and a hash or two.
fn not_done(root: Option<&ProjectRoot>, journal: &Journal) -> NotDoneFound {
    let after_prefix = &journal.prefix[b".rewind-".len()..];
    // (Whether a mode is a symlink's, and its exec bit: what tells a file from the one it
    // replaced where their bytes are the same.)
    let kind = |mode: u32| {
        let link = mode & 0o170000 == 0o120000;
        (link, !link && mode & 0o111 != 0)
    };
    let kind_at = |dir: &Dir, name: &[u8]| {
        let found = crate::fs::stat_in(dir.as_dir(), name).ok().flatten()?;
        let link = found.kind == Kind::Symlink;
        Some((link, !link && found.mode & 0o111 != 0))
    };
    let state = |n: &str, temp: &Temp, path: &[u8]| {
        let write = temp.blobs[1].is_some();
        if write && !temp.staged {
            return ChangeState::NotWritten;
        }
        let found_done = match temp.done {
            true => ChangeState::Done,
            false => ChangeState::NotKnown,
        };
        let (Some(root), [taken_out, staged]) = (root, temp.blobs) else {
            return found_done;
        };
        let (dir, name_at_path) = crate::fs::split(path.as_bstr());
        let Ok(dir) = root.open_dir(dir, None) else {
            return found_done;
        };
        // Whether `name` holds `blob` in `mode`: where the two files hold the same bytes, the
        // mode must tell them apart.
        let same_bytes = taken_out.is_some() && taken_out == staged;
        let holds = |name: &[u8], blob: Option<ObjectId>, mode: Option<u32>| {
            let Some(blob) = blob else { return false };
            let told_apart = match (same_bytes, temp.modes) {
                (false, _) => true,
                (true, [Some(old), Some(new)]) if kind(old) != kind(new) => {
                    mode.is_some_and(|mode| kind_at(&dir, name) == Some(kind(mode)))
                }
                (true, _) => false,
            };
            told_apart && held(&dir, name).is_some_and(|(id, _, _)| id == blob)
        };
        let temp_name = format!("{}{n}", journal.prefix);
        let [mode_taken_out, mode_staged] = temp.modes;
        match (write, taken_out.is_some(), temp.done) {
            // A new file still at its temp name: never renamed in, or taken back. (Its line comes
            // after the rename: killed between the two, the change is not known.)
            (true, false, _) if holds(temp_name.as_bytes(), staged, mode_staged) => {
                ChangeState::NotWritten
            }
            (_, _, true) => ChangeState::Done,
            // A swap: the line comes once what came out is found to be the undo point's.
            (true, true, false) if holds(temp_name.as_bytes(), taken_out, mode_taken_out) => {
                ChangeState::Done
            }
            (true, true, false) if holds(temp_name.as_bytes(), staged, mode_staged) => {
                ChangeState::NotWritten
            }
            // A deletion: likewise, once the file set aside is found to be the undo point's.
            (false, true, false) => {
                let aside = format!(".rewind-aside-{after_prefix}{n}");
                match (
                    holds(aside.as_bytes(), taken_out, mode_taken_out),
                    holds(name_at_path, taken_out, mode_taken_out),
                ) {
                    (true, _) => ChangeState::Done,
                    (false, true) => ChangeState::NotWritten,
                    (false, false) => ChangeState::NotKnown,
                }
            }
            _ => ChangeState::NotKnown,
        }
    };
    let mut found = NotDoneFound::default();
    for (n, temp) in &journal.temps {
        let Some(path) = &temp.path else { continue };
        match state(n, temp, path) {
            ChangeState::Done => {}
            ChangeState::NotWritten => {
                found.not_done.push(path.as_bstr().to_owned());
                found.not_written.push(path.as_bstr().to_owned());
            }
            ChangeState::NotKnown => found.not_done.push(path.as_bstr().to_owned()),
        }
    }
    found.not_done.sort_unstable();
    found.not_written.sort_unstable();
    found
}

/// What the journal and the disk tell of one change of a stopped run ([`not_done`]).
enum ChangeState {
    Done,
    NotWritten,
    NotKnown,
}

/// What a stopped run did not do ([`not_done`]).
#[derive(Default)]
struct NotDoneFound {
    /// The paths it planned to change and did not, or may not have.
    not_done: Vec<BString>,
    /// Those of them it is known not to have written or deleted.
    not_written: Vec<BString>,
}

/// The blob id of what stands at `name` in `dir` (a file's bytes, or a symlink's target), the
/// bytes, and whether it is a file; `None` for anything else or what cannot be read. Costs an
/// `lstat`, a read and a hash.
fn held(dir: &Dir, name: &[u8]) -> Option<(ObjectId, Vec<u8>, bool)> {
    let (data, is_file) = match crate::fs::stat_in(dir.as_dir(), name) {
        Ok(Some(found)) if found.kind == Kind::Symlink => {
            (crate::fs::read_link_in(dir.as_dir(), name), false)
        }
        Ok(Some(found)) if found.kind == Kind::File => {
            (crate::fs::read_file_in(dir.as_dir(), name), true)
        }
        _ => return None,
    };
    let data = data.ok()?;
    let id = gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Blob, &data).ok()?;
    Some((id, data, is_file))
}

/// `bytes` as lower-case hex, as the journal writes a directory.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Project path `rel` as a notice names it: absolute, quoted as git quotes a name with a
/// control character (a newline in it stays in the one line).
fn shown(root: &ProjectRoot, rel: &[u8]) -> String {
    let path = root.display(rel.as_bstr());
    let quoted = crate::paths::quote(b"", path.as_os_str().as_encoded_bytes(), false);
    String::from_utf8_lossy(&quoted).into_owned()
}

impl Store {
    /// The undo point of a restore killed before it finished, while its journal is in the
    /// store. Costs a read of the journal (a failed `open` when there is none).
    pub(crate) fn killed_runs_undo_point(&self) -> Option<ObjectId> {
        Some(self.read_journal()?).filter(|j| !j.finished)?.undo
    }

    /// Whether the journal in the store is of a run that finished, kept for the temp files it
    /// left ([`Locked::keep_journal_told`]). Costs a read of the journal.
    pub(crate) fn journal_is_of_a_finished_run(&self) -> bool {
        self.read_journal().is_some_and(|j| j.finished)
    }

    /// The start of the names of a killed restore's temp files (`.rewind-<token>-`), while
    /// its journal is in the store. Costs a read of the journal.
    pub(crate) fn killed_runs_temp_prefix(&self) -> Option<String> {
        Some(self.read_journal()?.prefix).filter(|prefix| !prefix.is_empty())
    }

    /// What is known of what the run `token` (stopped before it finished, by its record)
    /// planned to write or delete and did not. Costs a read of the record of runs (and, when its journal
    /// is still in the store, for a dry run, which sweeps nothing, what [`not_done`] costs).
    pub(crate) fn not_done_by_run(&self, token: &str) -> NotDone {
        let path = self.git_dir().join(STOPPED_RUNS);
        let recorded = crate::fs::read_store_file(&path).unwrap_or_default();
        let run = format!("run {token} ");
        if recorded
            .lines()
            .any(|line| line.starts_with(run.as_bytes()))
        {
            let paths = |key: &str| {
                let key = format!("{key} {token} ");
                (recorded.lines())
                    .filter_map(|line| line.strip_prefix(key.as_bytes()))
                    .filter_map(crate::paths::decode_path)
                    .collect()
            };
            return NotDone::Paths {
                not_done: paths("not-done"),
                not_written: paths("not-written"),
            };
        }
        // (A dry run sweeps nothing: its journal tells.)
        if let Some(journal) = self.read_journal() {
            if journal.token == token && !journal.finished {
                let root = ProjectRoot::open(self.project()).ok();
                let found = not_done(root.as_ref(), &journal);
                return NotDone::Paths {
                    not_done: found.not_done.into_iter().collect(),
                    not_written: found.not_written.into_iter().collect(),
                };
            }
        }
        NotDone::All
    }

    /// The journal of a restore that did not finish, if one is in the store. Costs a read of it.
    fn read_journal(&self) -> Option<Journal> {
        let text = crate::fs::read_store_file(&self.git_dir().join(JOURNAL)).ok()?;
        let text = String::from_utf8(text).ok()?;
        let mut journal = Journal::default();
        for line in text.lines() {
            match line.split_once(' ') {
                Some(("token", t)) if t.len() == 16 => {
                    journal.prefix = format!(".rewind-{t}-");
                    journal.token = t.to_owned();
                }
                Some(("undo", id)) => journal.undo = ObjectId::from_hex(id.as_bytes()).ok(),
                Some(("temp", rest)) => {
                    let mut fields = rest.split(' ');
                    let n = fields.next().unwrap_or_default().to_owned();
                    let mut id = || ObjectId::from_hex(fields.next()?.as_bytes()).ok();
                    let temp = journal.temps.entry(n).or_default();
                    temp.blobs = [id(), id()];
                    temp.path = fields
                        .next()
                        .and_then(|path| crate::paths::decode_path(path.as_bytes()))
                        .map(Vec::from);
                    let mut mode = || u32::from_str_radix(fields.next()?, 8).ok();
                    temp.modes = [mode(), mode()];
                }
                Some(("staged", n)) => journal.temps.entry(n.to_owned()).or_default().staged = true,
                Some(("done", n)) => journal.temps.entry(n.to_owned()).or_default().done = true,
                Some(("undone", n)) => journal.temps.entry(n.to_owned()).or_default().done = false,
                Some(("dir", hex)) => journal.dirs.extend(decode_hex(hex)),
                None if line == "noticed" => journal.noticed = true,
                None if line == "finished" => journal.finished = true,
                _ => {}
            }
        }
        Some(journal)
    }
}

/// Whether `error`, from opening a journalled directory, means it is out of reach for good:
/// nothing there, or not a directory (a file or a symlink now stands there).
fn gone(error: &std::io::Error) -> bool {
    use std::io::ErrorKind::{NotADirectory, NotFound};
    matches!(error.kind(), NotFound | NotADirectory)
}

/// What the journal of an unfinished restore records.
#[derive(Default)]
struct Journal {
    /// `.rewind-<token>-`, the start of its temp files' names (empty: no token recorded).
    prefix: String,
    /// Its token (empty: none recorded).
    token: String,
    /// Its temp files, by their number.
    temps: HashMap<String, Temp>,
    /// The directories of its temp files.
    dirs: Vec<Vec<u8>>,
    /// Its undo point (not recorded by older builds).
    undo: Option<ObjectId>,
    /// The user was told it was stopped (the journal stays while files it left stay).
    noticed: bool,
    /// It was not stopped: it finished, but left a temp file it could not remove.
    finished: bool,
}

/// One temp file of a restore, as its journal records it.
#[derive(Default)]
struct Temp {
    /// The only blobs it can hold: the undo point's at its path (which a swap takes out), and
    /// the staged file's.
    blobs: [Option<ObjectId>; 2],
    /// Staged whole before the restore's `syncfs`: a swap may have taken something out into it.
    staged: bool,
    /// The project path it stands for (not recorded by builds before stop 44).
    path: Option<Vec<u8>>,
    /// The modes of `blobs` (not recorded by builds before stop 51).
    modes: [Option<u32>; 2],
    /// Done: swapped in, or deleted.
    done: bool,
}

/// The journal of a run, open to record its progress (from any thread: each line is one
/// appending `write`).
pub(crate) struct Progress(std::fs::File);

impl Progress {
    /// Record that the temp files numbered `ns` are staged whole (written and closed): from
    /// then on such a temp file that holds the start of its staged file is not a staging cut
    /// short but something a swap took out (a save cut down to a prefix of the restored file,
    /// an emptied file), which the sweep keeps. Appended before the batch's `syncfs`, which
    /// makes it durable before any of these files is swapped. Costs one appending write.
    pub(crate) fn staged(&self, ns: impl Iterator<Item = usize>) -> std::io::Result<()> {
        let lines: String = ns.map(|n| format!("staged {n}\n")).collect();
        std::io::Write::write_all(&mut &self.0, lines.as_bytes()).map_err(|e| {
            let what = format!("recording the staged files in the store's journal: {e}");
            std::io::Error::new(e.kind(), what)
        })
    }

    /// Record that change `n` is done: once the file a swap took out (or a deletion set aside)
    /// is found to be the undo point's, before it is removed, so that from the change to this
    /// line what stands at rewind's own name tells it was made, and from this line on the line
    /// does (see [`not_done`]); after the rename of a new file in. Not synced: a kill keeps
    /// what was written. Costs a `write`.
    pub(crate) fn done(&self, n: usize) {
        let _ = std::io::Write::write_all(&mut &self.0, format!("done {n}\n").as_bytes());
    }

    /// Record that change `n`, recorded done, was taken back (the file it took out could not be
    /// removed, and is back at its path). Costs a `write`.
    pub(crate) fn undone(&self, n: usize) {
        let _ = std::io::Write::write_all(&mut &self.0, format!("undone {n}\n").as_bytes());
    }
}

/// What is known of what a run stopped before it finished did not do
/// ([`Store::not_done_by_run`]).
pub(crate) enum NotDone {
    /// Of what it planned to write or delete, these paths only (`not_done`); it may have done
    /// the others. It certainly did not write or delete those of them in `not_written` (records
    /// of builds before stop 53 name none).
    Paths {
        not_done: std::collections::HashSet<BString>,
        not_written: std::collections::HashSet<BString>,
    },
    /// Nothing was done: its journal was never written (it was stopped before its first temp
    /// file), or its record expired (then this errs on the side of an edit).
    All,
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The tokens of this process's last runs, newest last: their temp and aside files are rewind's
/// own, made and removed by a restore (the watcher does not take them for a user's hard link,
/// see [`is_own_temp`]).
static OWN_TOKENS: std::sync::Mutex<std::collections::VecDeque<String>> =
    std::sync::Mutex::new(std::collections::VecDeque::new());

/// How many runs' tokens [`OWN_TOKENS`] keeps: the watcher reads a run's events at the next
/// snapshot, which the next run takes first.
const OWN_TOKENS_KEPT: usize = 16;

fn remember_own(token: &str) {
    let mut tokens = OWN_TOKENS.lock().unwrap_or_else(|p| p.into_inner());
    if tokens.len() == OWN_TOKENS_KEPT {
        tokens.pop_front();
    }
    tokens.push_back(token.to_owned());
}

/// Whether file name `name` is a temp or aside file of one of this process's last runs
/// (`.rewind-<token>-<n>`, `.rewind-aside-<token>-<n>`): not any name that starts alike, which
/// anyone can make. Costs a comparison per token kept.
pub(crate) fn is_own_temp(name: &[u8]) -> bool {
    let rest = name
        .strip_prefix(b".rewind-aside-")
        .or_else(|| name.strip_prefix(b".rewind-"));
    let Some(rest) = rest else {
        return false;
    };
    let tokens = OWN_TOKENS.lock().unwrap_or_else(|p| p.into_inner());
    tokens.iter().any(|token| {
        rest.strip_prefix(token.as_bytes())
            .is_some_and(|n| n.first() == Some(&b'-'))
    })
}
