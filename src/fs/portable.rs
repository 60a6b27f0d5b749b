//! [`crate::fs`] where there is no Unix (Windows): the same API by path, over `std::fs`.
//!
//! Each directory on the way is checked with `symlink_metadata` before it is used, so a symlink
//! standing there is refused, not followed. Unlike `openat` on Unix this is not race-free: a
//! directory that another process swaps for a symlink between the check and the use is
//! followed. There are no permission bits (modes are derived from the read-only flag, and
//! none are set), no `syncfs` (each restored file is synced instead; the store is not), and
//! symlinks are not restored. Compiled (`cargo check --target x86_64-pc-windows-gnu`), not
//! tested.

use std::fs::{self, File, Metadata};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use gix::index::entry::{stat, Stat};

use super::{Found, Kind, Perm, ProjectRoot};

/// An open directory (its path).
pub(crate) struct Dir(PathBuf);

/// An open directory, borrowed (`None`: the current directory).
#[derive(Clone, Copy)]
pub(crate) struct DirRef<'a>(Option<&'a Path>);

/// The current directory: a path relative to it is a path as the process sees it.
pub(crate) const CWD: DirRef<'static> = DirRef(None);

impl Dir {
    pub(crate) fn as_dir(&self) -> DirRef<'_> {
        DirRef(Some(&self.0))
    }
}

impl DirRef<'_> {
    fn join(self, name: &Path) -> PathBuf {
        match self.0 {
            Some(dir) => dir.join(name),
            None => name.to_owned(),
        }
    }

    /// Entry `name` of this directory.
    fn child(self, name: &[u8]) -> io::Result<PathBuf> {
        Ok(self.join(crate::paths::os_path(name)?))
    }
}

fn not_a_directory() -> io::Error {
    io::Error::new(
        io::ErrorKind::NotADirectory,
        "not a directory (a symlink or file)",
    )
}

/// A directory at `path`, checked not to be a symlink.
fn checked_dir(path: PathBuf) -> io::Result<Dir> {
    match fs::symlink_metadata(&path)?.is_dir() {
        true => Ok(Dir(path)),
        false => Err(not_a_directory()),
    }
}

impl ProjectRoot {
    /// Open the project directory `path` (refusing a symlink in its last component).
    pub(crate) fn open(path: &Path) -> io::Result<ProjectRoot> {
        Ok(ProjectRoot {
            dir: open_path(path)?,
            path: path.to_owned(),
        })
    }

    /// Write a new temp file `temp` in directory `dir` with `data`, and sync it (there is no
    /// `syncfs` to batch it). No permission bits are set.
    pub(crate) fn write_temp(dir: &Dir, temp: &[u8], data: &[u8], _perm: Perm) -> io::Result<()> {
        let path = dir.as_dir().child(temp)?;
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)?;
        file.write_all(data)
            .and_then(|()| file.sync_all())
            .inspect_err(|_| {
                let _ = fs::remove_file(&path);
            })
    }

    /// Nothing: no permission bits are set here.
    pub(crate) fn set_dir_mode(&self, _dir: &[u8], _mode: u32) -> io::Result<()> {
        Ok(())
    }

    /// Symlinks are not restored here: always an error.
    pub(crate) fn symlink_temp(_dir: &Dir, _temp: &[u8], _target: &[u8]) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "symlinks are restored on Unix only",
        ))
    }

    /// Rename `temp` over `name`, both in directory `dir`. With `no_replace`, fail
    /// (`AlreadyExists`) if something stands at `name` (checked first: not atomic).
    pub(crate) fn rename_in(
        dir: &Dir,
        temp: &[u8],
        name: &[u8],
        no_replace: bool,
    ) -> io::Result<()> {
        let (from, to) = (dir.as_dir().child(temp)?, dir.as_dir().child(name)?);
        if no_replace && fs::symlink_metadata(&to).is_ok() {
            return Err(io::ErrorKind::AlreadyExists.into());
        }
        fs::rename(from, to)
    }

    /// Swapping two names in one step is not portable: `Unsupported` (the caller renames).
    pub(crate) fn exchange_in(_dir: &Dir, _a: &[u8], _b: &[u8]) -> io::Result<()> {
        Err(io::ErrorKind::Unsupported.into())
    }

    /// Remove entry `name` of directory `dir` (a file or symlink; never a directory).
    pub(crate) fn unlink_in(dir: &Dir, name: &[u8]) -> io::Result<()> {
        match fs::remove_file(dir.as_dir().child(name)?) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

/// Directory `name` of directory `dir`, refused if it is a symlink or a file.
pub(crate) fn open_child(dir: DirRef<'_>, name: &[u8]) -> io::Result<Dir> {
    match name {
        b"." => checked_dir(dir.join(Path::new("."))),
        _ => checked_dir(dir.child(name)?),
    }
}

/// Directory `path`, refused if it is a symlink or a file.
pub(crate) fn open_path(path: &Path) -> io::Result<Dir> {
    checked_dir(path.to_owned())
}

/// Whether opening a directory failed because a symlink or a file stands in its place.
pub(crate) fn in_the_way(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::NotADirectory
}

/// Whether `error` says the process or the system ran out of something (memory): a failure
/// of this moment, not a property of the file.
pub(crate) fn out_of_resources(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::OutOfMemory
}

/// Make directory `name` in `dir` (no permission bits here).
pub(crate) fn make_dir_in(dir: DirRef<'_>, name: &[u8], _mode: u32) -> io::Result<()> {
    fs::create_dir(dir.child(name)?)
}

/// Remove directory `name` of `dir`, which must be empty (a symlink there is refused).
/// The id of the mount directory `dir` is on: not known here.
pub(crate) fn mount_id(_dir: DirRef<'_>) -> Option<u64> {
    None
}

pub(crate) fn remove_dir_in(dir: DirRef<'_>, name: &[u8]) -> io::Result<()> {
    let path = checked_dir(dir.child(name)?)?;
    fs::remove_dir(path.0)
}

/// The entries of a directory, as `read_dir` gives them.
pub(crate) struct Listing {
    dir: Dir,
    entries: fs::ReadDir,
}

/// One entry of a [`Listing`].
pub(crate) struct Entry {
    name: Vec<u8>,
    kind: Option<Kind>,
}

impl Listing {
    pub(crate) fn new(dir: Dir) -> io::Result<Listing> {
        let entries = fs::read_dir(&dir.0)?;
        Ok(Listing { dir, entries })
    }

    /// The directory being listed.
    pub(crate) fn dir(&self) -> io::Result<DirRef<'_>> {
        Ok(self.dir.as_dir())
    }
}

impl Iterator for Listing {
    type Item = io::Result<Entry>;

    fn next(&mut self) -> Option<io::Result<Entry>> {
        let entry = match self.entries.next()? {
            Ok(entry) => entry,
            Err(e) => return Some(Err(e)),
        };
        let name = match gix::path::os_string_into_bstring(entry.file_name()) {
            Ok(name) => name.into(),
            Err(e) => return Some(Err(io::Error::new(io::ErrorKind::InvalidData, e))),
        };
        let kind = entry.file_type().ok().map(|t| match t {
            t if t.is_file() => Kind::File,
            t if t.is_dir() => Kind::Dir,
            t if t.is_symlink() => Kind::Symlink,
            _ => Kind::Special,
        });
        Some(Ok(Entry { name, kind }))
    }
}

impl Entry {
    pub(crate) fn name(&self) -> &[u8] {
        &self.name
    }

    /// What the entry is, if known.
    pub(crate) fn kind(&self) -> Option<Kind> {
        self.kind
    }
}

/// What stands at `name` in directory `dir`, not following a symlink.
pub(crate) fn stat_at(dir: DirRef<'_>, name: &[u8]) -> io::Result<Found> {
    Ok(found_of(&fs::symlink_metadata(dir.child(name)?)?))
}

/// What the directory `dir` is.
pub(crate) fn stat_dir(dir: DirRef<'_>) -> io::Result<Found> {
    Ok(found_of(&fs::symlink_metadata(dir.join(Path::new(".")))?))
}

/// The type, derived permission bits, size and index stat of `meta` (no device, inode or
/// owner: zero, as gix records them on Windows).
fn found_of(meta: &Metadata) -> Found {
    let time = |time: io::Result<SystemTime>| {
        let since_epoch = time
            .ok()
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .unwrap_or_default();
        stat::Time {
            secs: since_epoch.as_secs() as u32,
            nsecs: since_epoch.subsec_nanos(),
        }
    };
    let file_type = meta.file_type();
    let kind = match file_type {
        t if t.is_file() => Kind::File,
        t if t.is_dir() => Kind::Dir,
        t if t.is_symlink() => Kind::Symlink,
        _ => Kind::Special,
    };
    Found {
        kind,
        mode: mode_of(meta),
        size: meta.len(),
        stat: Stat {
            mtime: time(meta.modified()),
            ctime: time(meta.created()),
            dev: 0,
            ino: 0,
            uid: 0,
            gid: 0,
            size: meta.len() as u32,
        },
        links: 1,
    }
}

/// Regular file `name` in directory `dir`, open for reading, and what it is (a symlink or
/// anything else there is an error, checked before opening).
pub(crate) fn open_file_in(dir: DirRef<'_>, name: &[u8]) -> io::Result<(fs::File, Found)> {
    let path = dir.child(name)?;
    if !fs::symlink_metadata(&path)?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    let file = fs::File::open(path)?;
    let found = stat_file(&file)?;
    Ok((file, found))
}

/// What the open file `file` is now.
pub(crate) fn stat_file(file: &fs::File) -> io::Result<Found> {
    Ok(found_of(&file.metadata()?))
}

/// The target of symlink `name` in directory `dir`.
pub(crate) fn read_link_in(dir: DirRef<'_>, name: &[u8]) -> io::Result<Vec<u8>> {
    let target = fs::read_link(dir.child(name)?)?;
    match gix::path::into_bstr(target) {
        Ok(target) => Ok(target.into_owned().into()),
        Err(e) => Err(io::Error::new(io::ErrorKind::InvalidData, e)),
    }
}

/// Nothing: there is no sync to spare, as [`ProjectRoot::write_temp`] syncs each file.
pub(crate) fn start_write_back(_file: &File) -> io::Result<()> {
    Ok(())
}

/// Nothing: there is no `syncfs`, and [`ProjectRoot::write_temp`] synced each file.
pub(crate) fn sync_filesystems<'a>(_dirs: impl IntoIterator<Item = DirRef<'a>>) -> io::Result<()> {
    Ok(())
}

/// Open store file `path` to be written over from its start, creating it if missing; only a
/// regular file.
pub(crate) fn open_spare(path: &Path) -> io::Result<File> {
    let file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    match file.metadata()?.is_file() {
        true => Ok(file),
        false => Err(io::Error::other("not a spare rewind made")),
    }
}

/// How many names the file has: not known here, so one.
pub(crate) fn link_count(_meta: &std::fs::Metadata) -> u64 {
    1
}

/// `options` as they are: there are no FIFOs to wait on here.
pub(crate) fn options_not_waiting(options: &mut fs::OpenOptions) -> &mut fs::OpenOptions {
    options
}

/// The allocator is left as it is here.
pub(crate) fn one_malloc_arena() {}

/// No limit on memory is known here.
pub(crate) fn memory_limits() -> [(&'static str, Option<u64>); 0] {
    []
}

/// No limit on open directories here (Windows opens none: paths are used).
pub(crate) fn open_files_limit() -> Option<u64> {
    None
}

/// Not counted: see [`open_files_limit`].
pub(crate) fn open_descriptors() -> u64 {
    0
}

/// Nothing to grow here (see the Unix version).
pub(crate) fn grow_descriptor_table(_dir: &Dir, _to: u64) {}

/// Open `path` (relative to directory `dir`, or absolute) for reading only if it is a regular
/// file, and with `follow == false` only if it is not a symlink (checked before opening).
pub(crate) fn open_regular(dir: DirRef<'_>, path: &Path, follow: bool) -> io::Result<File> {
    let path = dir.join(path);
    if !follow && fs::symlink_metadata(&path)?.is_symlink() {
        return Err(io::Error::other("changed while being read (now a symlink)"));
    }
    let file = File::open(&path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::other(
            "changed while being read (no longer a regular file)",
        ));
    }
    Ok(file)
}

/// None: there are no permission bits to set.
pub(crate) fn permissions(_mode: u32) -> Option<fs::Permissions> {
    None
}

/// How many hard links the file has: 1 (std does not tell here).
pub(crate) fn links(_meta: &fs::Metadata) -> u64 {
    1
}

/// Make directory `path` and its missing parents (no permission bits here).
pub(crate) fn create_dirs(path: &Path, _mode: u32) -> io::Result<()> {
    fs::create_dir_all(path)
}

/// Permission bits derived from the type and the read-only flag of `meta`: 0o755 for a
/// directory, 0o777 for a symlink, 0o644 for a file (0o444 when read-only).
pub(crate) fn mode_of(meta: &Metadata) -> u32 {
    let mode = match meta.file_type() {
        t if t.is_dir() => 0o755,
        t if t.is_symlink() => 0o777,
        _ => 0o644,
    };
    match meta.permissions().readonly() {
        true => mode & !0o222,
        false => mode,
    }
}

/// False: there is no owner to compare, so nothing is narrowed for being ours.
pub(crate) fn owned_by_us(_meta: &Metadata) -> bool {
    false
}

/// The size of the file of `meta` (its allocation is not known).
pub(crate) fn allocated(meta: &Metadata) -> u64 {
    meta.len()
}

/// When the file at `path` last changed (its modification time here: seconds, nanoseconds).
pub(crate) fn changed_at(path: &Path) -> io::Result<(i64, i64)> {
    let since_epoch = fs::metadata(path)?
        .modified()?
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    Ok((
        since_epoch.as_secs() as i64,
        i64::from(since_epoch.subsec_nanos()),
    ))
}

/// Read from `file` at `offset` (a seek, then a read).
pub(crate) fn read_at(mut file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    file.seek(SeekFrom::Start(offset))?;
    file.read(buf)
}

/// Write all of `data` to `file` at `offset` (a seek, then a write).
pub(crate) fn write_all_at(mut file: &File, data: &[u8], offset: u64) -> io::Result<()> {
    file.seek(SeekFrom::Start(offset))?;
    file.write_all(data)
}

/// When `found` last changed, as far as the system says (no `ctime` here: its modification
/// time, which a program can set back).
pub(crate) fn change_time(found: &std::fs::Metadata) -> Option<std::time::SystemTime> {
    found.modified().ok()
}

/// No io_uring here: `held` comes back (see the Unix version).
pub(crate) fn close_in_the_background<T>(held: Vec<T>) -> Result<(), Vec<T>> {
    Err(held)
}
