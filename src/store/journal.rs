//! The restore journal: before a restore creates temp files in the project, it records their
//! name token and directories in the store, so that after a crash the next call under the lock
//! removes exactly those files (and never a user's).

use gix::bstr::{BStr, ByteSlice};

use crate::error::{Error, Result};
use crate::fs::{Dir, Kind, ProjectRoot};
use crate::store::Locked;

/// The store file naming the temp-file token of a restore in progress and its directories.
const JOURNAL: &str = "rewind-restore-journal";

impl Locked<'_> {
    /// Record the token a restore's temp files carry and the directories of `paths` (the files it
    /// will write), so that
    /// after a crash the next run removes exactly those files (and never a user's). Returns the
    /// token: 16 hex digits from the clock and the process.
    pub(crate) fn write_journal<'p>(
        &self,
        paths: impl Iterator<Item = &'p BStr>,
    ) -> Result<String> {
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
        let mut text = format!("token {token}\n");
        let mut dirs: Vec<&[u8]> = paths
            .map(|path| {
                path.rfind_byte(b'/')
                    .map_or(&b""[..], |slash| &path[..slash])
            })
            .collect();
        dirs.sort_unstable();
        dirs.dedup();
        for dir in dirs {
            text.push_str("dir ");
            text.extend(dir.iter().map(|b| format!("{b:02x}")));
            text.push('\n');
        }
        crate::fs::write_atomically(&self.git_dir().join(JOURNAL), "index.tmp", text.as_bytes())?;
        Ok(token)
    }
    pub(crate) fn remove_journal(&self) {
        let _ = std::fs::remove_file(self.git_dir().join(JOURNAL));
    }
    /// Remove the temp files a killed restore left: only names carrying the token its journal
    /// recorded, in the directories it recorded, and only files whose bytes the store holds
    /// (a staged file, or the undo point's bytes a swap took out). A swap killed before it
    /// could put back a save that landed meanwhile leaves that save under the temp name: it
    /// is kept, renamed `.rewind-aside-…`. Every snapshot taken under the store lock calls
    /// this first, so no snapshot records a temp file. Costs one failed `open` when no restore
    /// was killed, else a `readdir` per recorded directory and a read and a hash per file left.
    pub(crate) fn sweep_temp_files(&self) {
        let Ok(text) = std::fs::read_to_string(self.git_dir().join(JOURNAL)) else {
            return;
        };
        let Ok(root) = ProjectRoot::open(self.project()) else {
            return;
        };
        let mut token = None;
        for line in text.lines() {
            match line.split_once(' ') {
                Some(("token", t)) if t.len() == 16 => token = Some(format!(".rewind-{t}-")),
                Some(("dir", hex)) => {
                    let (Some(prefix), Some(dir)) = (&token, decode_hex(hex)) else {
                        continue;
                    };
                    let Ok(names) = root.names_with_prefix(&dir, prefix.as_bytes()) else {
                        continue;
                    };
                    if let Ok(fd) = root.open_dir(&dir, None) {
                        for name in names {
                            match self.holds_bytes_of(&fd, &name) {
                                true => {
                                    let _ = ProjectRoot::unlink_in(&fd, &name);
                                }
                                false => {
                                    let kept = [b".rewind-aside-", &name[b".rewind-".len()..]];
                                    let _ =
                                        ProjectRoot::rename_in(&fd, &name, &kept.concat(), true);
                                }
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        self.remove_journal();
    }
}

impl Locked<'_> {
    /// Whether the file or symlink `name` in `dir` holds bytes the store has as a blob. Costs a
    /// read and a hash of it.
    fn holds_bytes_of(&self, dir: &Dir, name: &[u8]) -> bool {
        let data = match crate::fs::stat_in(dir.as_dir(), name) {
            Ok(Some(found)) if found.kind == Kind::Symlink => {
                crate::fs::read_link_in(dir.as_dir(), name)
            }
            Ok(Some(found)) if found.kind == Kind::File => {
                crate::fs::read_file_in(dir.as_dir(), name)
            }
            _ => return false,
        };
        let blob = |data: Vec<u8>| {
            gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Blob, &data).ok()
        };
        data.ok()
            .and_then(blob)
            .is_some_and(|id| self.objects().contains(&id))
    }
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}
