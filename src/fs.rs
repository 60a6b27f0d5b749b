//! Descriptor-relative file operations inside the project: every write and delete that restore,
//! revert and undo make goes through here.
//!
//! A path is reached by opening each directory on the way with `openat(O_NOFOLLOW|O_DIRECTORY)`
//! from a descriptor of the project root, so a directory that another process swapped for a
//! symlink is refused (`ELOOP`/`ENOTDIR`), never followed out of the project. The last step
//! (`unlinkat`, `renameat`, `openat(O_NOFOLLOW)`) never follows a symlink either.
//!
//! Special files are never opened for reading: [`ProjectRoot::read_file`] opens with
//! `O_NONBLOCK` and checks the type on the open descriptor, so a FIFO cannot block it and a
//! device cannot feed it forever.

use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use gix::bstr::{BStr, ByteSlice};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};

/// The project root, held open; all paths below are `/`-separated and project-relative.
pub(crate) struct ProjectRoot {
    fd: OwnedFd,
    path: PathBuf,
}

/// Whether [`ProjectRoot::open_dir`] makes missing directories, and the mode of each (by its
/// project path).
pub(crate) type Create<'a> = Option<&'a dyn Fn(&[u8]) -> u32>;

/// The permission bits of a file restore writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Perm {
    /// Exactly these bits (the file's own, or recorded with the snapshot).
    Exact(u32),
    /// These bits less the process's umask (0o666 or 0o777: a new file, as git writes it).
    LessUmask(u32),
}

/// What stands at a path (never following a symlink).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    File,
    Dir,
    Symlink,
    /// A FIFO, socket or device.
    Special,
}

/// The type and permission bits of what stands at a path.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Found {
    pub kind: Kind,
    pub mode: u32,
}

fn flags_dir() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

fn kind_of(st_mode: u32) -> Kind {
    match FileType::from_raw_mode(st_mode) {
        FileType::RegularFile => Kind::File,
        FileType::Directory => Kind::Dir,
        FileType::Symlink => Kind::Symlink,
        _ => Kind::Special,
    }
}

/// Split `path` into its parent directory and its last name.
fn split(path: &BStr) -> (&[u8], &[u8]) {
    match path.rfind_byte(b'/') {
        Some(slash) => (&path[..slash], &path[slash + 1..]),
        None => (&[][..], path.as_bytes()),
    }
}

impl ProjectRoot {
    /// Open the project directory `path` (not following a symlink in its last component).
    pub(crate) fn open(path: &Path) -> io::Result<ProjectRoot> {
        let fd = rustix::fs::open(path, flags_dir(), Mode::empty())?;
        Ok(ProjectRoot {
            fd,
            path: path.to_owned(),
        })
    }

    /// The absolute path of `rel`, for messages only (never opened by path).
    pub(crate) fn display(&self, rel: &BStr) -> PathBuf {
        self.path.join(std::ffi::OsStr::from_bytes(rel))
    }

    /// Open directory `dir` (`""`: the root), one component at a time, refusing symlinks.
    /// With `create`, missing directories are made with the mode it gives for each directory
    /// path (less the umask). Costs one `openat` per component (plus a `mkdirat` per missing
    /// one).
    pub(crate) fn open_dir(&self, dir: &[u8], create: Create<'_>) -> io::Result<OwnedFd> {
        let mut fd = rustix::fs::openat(&self.fd, ".", flags_dir(), Mode::empty())?;
        let mut end = 0;
        for name in dir.split(|&b| b == b'/') {
            end += name.len() + usize::from(end > 0);
            if name.is_empty() {
                continue;
            }
            let next = match (
                rustix::fs::openat(&fd, name, flags_dir(), Mode::empty()),
                create,
            ) {
                (Err(rustix::io::Errno::NOENT), Some(mode_of)) => {
                    let mode = Mode::from_raw_mode(mode_of(&dir[..end]));
                    match rustix::fs::mkdirat(&fd, name, mode) {
                        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                        Err(e) => return Err(e.into()),
                    }
                    rustix::fs::openat(&fd, name, flags_dir(), Mode::empty())
                }
                (other, _) => other,
            };
            fd = next.map_err(|e| match e {
                rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR => io::Error::other(format!(
                    "{} is not a directory (a symlink or file is in the way)",
                    self.display(dir.as_bstr()).display()
                )),
                e => e.into(),
            })?;
        }
        Ok(fd)
    }

    /// The parent directory of `path`, opened, and the last name.
    pub(crate) fn parent<'p>(
        &self,
        path: &'p BStr,
        create: Create<'_>,
    ) -> io::Result<(OwnedFd, &'p [u8])> {
        let (dir, name) = split(path);
        Ok((self.open_dir(dir, create)?, name))
    }

    /// What stands at `path`; `None` when nothing does (or a directory on the way is missing).
    /// Costs one `openat` per component and one `fstatat`.
    pub(crate) fn lstat(&self, path: &BStr) -> io::Result<Option<Found>> {
        let (parent, name) = match self.parent(path, None) {
            Ok(found) => found,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        stat_in(parent.as_fd(), name)
    }

    /// The content of the regular file at `path`. A FIFO, socket or device there is an error,
    /// never opened for reading (so never a hang); a symlink is never followed.
    pub(crate) fn read_file(&self, path: &BStr) -> io::Result<Vec<u8>> {
        let (parent, name) = self.parent(path, None)?;
        read_file_in(parent.as_fd(), name)
    }

    /// The target of the symlink at `path`.
    pub(crate) fn read_link(&self, path: &BStr) -> io::Result<Vec<u8>> {
        let (parent, name) = self.parent(path, None)?;
        Ok(rustix::fs::readlinkat(&parent, name, Vec::new())?.into_bytes())
    }

    /// Remove directory `dir` if it is empty; `false` when it is not (or is gone).
    pub(crate) fn remove_dir_if_empty(&self, dir: &BStr) -> bool {
        match self.parent(dir, None) {
            Ok((parent, name)) => rustix::fs::unlinkat(&parent, name, AtFlags::REMOVEDIR).is_ok(),
            Err(_) => false,
        }
    }

    /// Remove directory `dir` and the directories below it, which must all be empty (nothing
    /// but directories). Iterative: no stack per level. Fails, removing nothing more, at the
    /// first entry that is not a directory.
    pub(crate) fn remove_empty_tree(&self, dir: &BStr) -> io::Result<()> {
        // Depth-first with an explicit stack: (path, children listed yet).
        let mut stack: Vec<(Vec<u8>, bool)> = vec![(dir.to_vec(), false)];
        while let Some((path, listed)) = stack.pop() {
            if listed {
                let (parent, name) = self.parent(path.as_bstr(), None)?;
                rustix::fs::unlinkat(&parent, name, AtFlags::REMOVEDIR)?;
                continue;
            }
            let fd = self.open_dir(&path, None)?;
            stack.push((path.clone(), true));
            for entry in rustix::fs::Dir::new(fd)? {
                let entry = entry?;
                let name = entry.file_name().to_bytes();
                if name == b"." || name == b".." {
                    continue;
                }
                let mut child = path.clone();
                child.push(b'/');
                child.extend_from_slice(name);
                let is_dir = match entry.file_type() {
                    FileType::Unknown => self
                        .lstat(child.as_bstr())?
                        .is_some_and(|f| f.kind == Kind::Dir),
                    t => t == FileType::Directory,
                };
                if !is_dir {
                    return Err(io::Error::other(format!(
                        "{} is in the way",
                        self.display(child.as_bstr()).display()
                    )));
                }
                stack.push((child, false));
            }
        }
        Ok(())
    }

    /// Write a new temp file `temp` (a name no user file has) in directory `dir` with `data`.
    /// Its permission bits are `perm`: exact (`fchmod`, the umask neither widens nor narrows
    /// them), or a default less the umask, as git's checkout does. Not synced: see
    /// [`sync_filesystems`].
    pub(crate) fn write_temp(
        dir: &OwnedFd,
        temp: &[u8],
        data: &[u8],
        perm: Perm,
    ) -> io::Result<()> {
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let create_mode = match perm {
            Perm::Exact(_) => 0o600,
            Perm::LessUmask(mode) => mode,
        };
        let fd = rustix::fs::openat(dir, temp, flags, Mode::from_raw_mode(create_mode))?;
        let write = || -> io::Result<()> {
            if let Perm::Exact(mode) = perm {
                rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode & 0o7777))?;
            }
            std::fs::File::from(fd.try_clone()?).write_all(data)
        };
        write().inspect_err(|_| {
            let _ = rustix::fs::unlinkat(dir, temp, AtFlags::empty());
        })
    }

    /// Make temp symlink `temp` in directory `dir`, pointing at `target`.
    pub(crate) fn symlink_temp(dir: &OwnedFd, temp: &[u8], target: &[u8]) -> io::Result<()> {
        Ok(rustix::fs::symlinkat(target, dir, temp)?)
    }

    /// Rename `temp` over `name`, both in directory `dir` (atomic: the old or the new file).
    /// With `no_replace`, fail (`AlreadyExists`) if something stands at `name` by then.
    pub(crate) fn rename_in(
        dir: &OwnedFd,
        temp: &[u8],
        name: &[u8],
        no_replace: bool,
    ) -> io::Result<()> {
        let flags = match no_replace {
            true => rustix::fs::RenameFlags::NOREPLACE,
            false => rustix::fs::RenameFlags::empty(),
        };
        Ok(rustix::fs::renameat_with(dir, temp, dir, name, flags)?)
    }

    /// Remove entry `name` of directory `dir` (a file or symlink; never a directory).
    pub(crate) fn unlink_in(dir: &OwnedFd, name: &[u8]) -> io::Result<()> {
        match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// The entries of directory `dir` (project paths) and what each is. Costs a `readdir`
    /// (and an `fstatat` per entry whose type the directory entry does not say).
    pub(crate) fn list(&self, dir: &BStr) -> io::Result<Vec<(gix::bstr::BString, Kind)>> {
        let fd = self.open_dir(dir, None)?;
        let mut entries = Vec::new();
        let mut listing = rustix::fs::Dir::new(fd.try_clone()?)?;
        for entry in listing.by_ref() {
            let entry = entry?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let kind = match entry.file_type() {
                FileType::Unknown => match stat_in(fd.as_fd(), name)? {
                    Some(found) => found.kind,
                    None => continue,
                },
                FileType::RegularFile => Kind::File,
                FileType::Directory => Kind::Dir,
                FileType::Symlink => Kind::Symlink,
                _ => Kind::Special,
            };
            let mut path = gix::bstr::BString::from(dir);
            if !path.is_empty() {
                path.push(b'/');
            }
            path.extend_from_slice(name);
            entries.push((path, kind));
        }
        Ok(entries)
    }

    /// The names in directory `dir` that start with `prefix` (for removing our own temp files).
    pub(crate) fn names_with_prefix(&self, dir: &[u8], prefix: &[u8]) -> io::Result<Vec<Vec<u8>>> {
        let fd = self.open_dir(dir, None)?;
        let mut names = Vec::new();
        for entry in rustix::fs::Dir::new(fd)? {
            let name = entry?.file_name().to_bytes().to_vec();
            if name.starts_with(prefix) {
                names.push(name);
            }
        }
        Ok(names)
    }
}

/// The content of regular file `name` in directory `dir`: never follows a symlink, never
/// opens a special file for reading (`O_NONBLOCK`, then the type of the open descriptor).
pub(crate) fn read_file_in(dir: BorrowedFd<'_>, name: &[u8]) -> io::Result<Vec<u8>> {
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, name, flags, Mode::empty())?;
    if kind_of(rustix::fs::fstat(&fd)?.st_mode) != Kind::File {
        return Err(io::Error::other("not a regular file"));
    }
    let mut data = Vec::new();
    io::Read::read_to_end(&mut std::fs::File::from(fd), &mut data)?;
    Ok(data)
}

/// What stands at `name` in directory `dir`.
pub(crate) fn stat_in(dir: BorrowedFd<'_>, name: &[u8]) -> io::Result<Option<Found>> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(Found {
            kind: kind_of(st.st_mode),
            mode: st.st_mode & 0o7777,
        })),
        Err(rustix::io::Errno::NOENT) | Err(rustix::io::Errno::NOTDIR) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Make everything written so far on the file systems of `dirs` durable: one `syncfs` per
/// distinct file system (a batch: far cheaper than an `fsync` per file). Costs one `fstat`
/// per directory and one `syncfs` per file system.
pub(crate) fn sync_filesystems<'a>(
    dirs: impl IntoIterator<Item = BorrowedFd<'a>>,
) -> io::Result<()> {
    let mut synced: Vec<u64> = Vec::new();
    for dir in dirs {
        let dev = rustix::fs::fstat(dir)?.st_dev;
        if !synced.contains(&dev) {
            rustix::fs::syncfs(dir)?;
            synced.push(dev);
        }
    }
    Ok(())
}

/// Make the file system holding `path` durable (`syncfs` through a descriptor of it).
pub(crate) fn sync_path(path: &Path) -> io::Result<()> {
    let fd = rustix::fs::open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())?;
    Ok(rustix::fs::syncfs(&fd)?)
}

/// Open directory `name` of directory `dir`, never following a symlink.
pub(crate) fn open_child(dir: BorrowedFd<'_>, name: &[u8]) -> io::Result<OwnedFd> {
    Ok(rustix::fs::openat(dir, name, flags_dir(), Mode::empty())?)
}

/// Write a store file atomically: a temp file `{temp_prefix}*` beside it, then a rename over
/// it, so a reader sees the old file or the new one and a killed process leaves only a temp
/// file (which `prune` removes by its prefix). Every file rewind writes into a store goes
/// through here, or through [`temp_file`] and [`persist`] when it is written as a stream.
pub(crate) fn write_atomically(
    path: &Path,
    temp_prefix: &str,
    data: &[u8],
) -> crate::error::Result<()> {
    let dir = path.parent().expect("a store file lives in a directory");
    let mut temp = temp_file(dir, temp_prefix, 0o600)?;
    temp.write_all(data)
        .map_err(|e| crate::error::Error::io("writing", temp.path(), e))?;
    persist(temp, path)
}

/// A temp file `{prefix}*` in `dir` with permissions `mode`, for [`persist`] to move into place.
pub(crate) fn temp_file(
    dir: &Path,
    prefix: &str,
    mode: u32,
) -> crate::error::Result<tempfile::NamedTempFile> {
    use std::os::unix::fs::PermissionsExt;
    tempfile::Builder::new()
        .prefix(prefix)
        .permissions(std::fs::Permissions::from_mode(mode))
        .tempfile_in(dir)
        .map_err(|e| crate::error::Error::io("creating a temp file in", dir, e))
}

/// Rename a complete temp file over `path` (an identical object already there is fine).
pub(crate) fn persist(temp: tempfile::NamedTempFile, path: &Path) -> crate::error::Result<()> {
    temp.persist(path)
        .map(drop)
        .map_err(|e| crate::error::Error::io("writing", path, e.error))
}

/// Open `path` (relative to directory `dir`, or absolute) for reading only if it is a regular
/// file: never blocks on a FIFO, never reads a device, and with `follow == false` never follows
/// a symlink (a file swapped for any of these since it was stat'ed is an error, "changed while
/// being read").
pub(crate) fn open_regular(
    dir: BorrowedFd<'_>,
    path: &Path,
    follow: bool,
) -> io::Result<std::fs::File> {
    let mut flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC;
    if !follow {
        flags |= OFlags::NOFOLLOW;
    }
    let fd =
        rustix::fs::openat(dir, path, flags, rustix::fs::Mode::empty()).map_err(|e| match e {
            rustix::io::Errno::LOOP => io::Error::other("changed while being read (now a symlink)"),
            e => e.into(),
        })?;
    let stat = rustix::fs::fstat(&fd)?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(io::Error::other(
            "changed while being read (no longer a regular file)",
        ));
    }
    Ok(std::fs::File::from(fd))
}
