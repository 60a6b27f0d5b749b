//! The restore journal: before a restore creates temp files in the project, it records their
//! name token and directories in the store, so that after a crash the next call under the lock
//! removes exactly those files (and never a user's).

use gix::bstr::{BStr, ByteSlice};

use crate::error::{Error, Result};
use crate::fs::ProjectRoot;
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
    /// recorded, in the directories it recorded. Every snapshot taken under the store lock
    /// calls it first, so no snapshot records such a file. Costs one failed `open` when no
    /// restore was killed, else a `readdir` per recorded directory.
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
                            let _ = ProjectRoot::unlink_in(&fd, &name);
                        }
                    }
                }
                _ => {}
            }
        }
        self.remove_journal();
    }
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}
