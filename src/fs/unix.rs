//! [`crate::fs`] on Unix: directory descriptors and the `*at` calls (through rustix), so no
//! path is ever resolved through a symlink another process put in the way.

use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use gix::index::entry::{stat, Stat};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, RawMode};

use super::{Found, Kind, Perm, ProjectRoot};

/// An open directory (a descriptor).
pub(crate) struct Dir(OwnedFd);

/// An open directory, borrowed.
pub(crate) type DirRef<'a> = BorrowedFd<'a>;

/// The current directory: a path relative to it is a path as the process sees it.
pub(crate) const CWD: DirRef<'static> = rustix::fs::CWD;

impl Dir {
    pub(crate) fn as_dir(&self) -> DirRef<'_> {
        self.0.as_fd()
    }
}

impl AsFd for Dir {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

fn flags_dir() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// Permission bits as rustix takes them (`mode_t` is narrower than `u32` on some systems).
fn mode_bits(bits: u32) -> Mode {
    Mode::from_raw_mode(bits as RawMode)
}

fn kind_of(st_mode: RawMode) -> Kind {
    match FileType::from_raw_mode(st_mode) {
        FileType::RegularFile => Kind::File,
        FileType::Directory => Kind::Dir,
        FileType::Symlink => Kind::Symlink,
        _ => Kind::Special,
    }
}

impl ProjectRoot {
    /// Open the project directory `path` (not following a symlink in its last component).
    pub(crate) fn open(path: &Path) -> io::Result<ProjectRoot> {
        let fd = rustix::fs::open(path, flags_dir(), Mode::empty())?;
        Ok(ProjectRoot {
            dir: Dir(fd),
            path: path.to_owned(),
        })
    }

    /// Write a new temp file `temp` (a name no user file has) in directory `dir` with `data`.
    /// Its permission bits are `perm`: exact (`fchmod`, the umask neither widens nor narrows
    /// them), or a default less the umask, as git's checkout does. Not synced: see
    /// [`sync_filesystems`].
    pub(crate) fn write_temp(dir: &Dir, temp: &[u8], data: &[u8], perm: Perm) -> io::Result<()> {
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let create_mode = match perm {
            Perm::Exact(_) => 0o600,
            Perm::LessUmask(mode) => mode,
        };
        let mut file = std::fs::File::from(rustix::fs::openat(
            &dir.0,
            temp,
            flags,
            mode_bits(create_mode),
        )?);
        let mut write = || -> io::Result<()> {
            if let Perm::Exact(mode) = perm {
                rustix::fs::fchmod(&file, mode_bits(mode & 0o7777))?;
            }
            file.write_all(data)
        };
        write().inspect_err(|_| {
            let _ = rustix::fs::unlinkat(&dir.0, temp, AtFlags::empty());
        })
    }

    /// Set directory `dir`'s permission bits to `mode` exactly. Costs an `openat` per
    /// component and an `fchmod`.
    pub(crate) fn set_dir_mode(&self, dir: &[u8], mode: u32) -> io::Result<()> {
        Ok(rustix::fs::fchmod(
            &self.open_dir(dir, None)?.0,
            mode_bits(mode & 0o7777),
        )?)
    }

    /// Make temp symlink `temp` in directory `dir`, pointing at `target`.
    pub(crate) fn symlink_temp(dir: &Dir, temp: &[u8], target: &[u8]) -> io::Result<()> {
        Ok(rustix::fs::symlinkat(target, &dir.0, temp)?)
    }

    /// Rename `temp` over `name`, both in directory `dir` (atomic: the old or the new file).
    /// With `no_replace`, fail (`AlreadyExists`) if something stands at `name` by then.
    pub(crate) fn rename_in(
        dir: &Dir,
        temp: &[u8],
        name: &[u8],
        no_replace: bool,
    ) -> io::Result<()> {
        let flags = match no_replace {
            true => rustix::fs::RenameFlags::NOREPLACE,
            false => rustix::fs::RenameFlags::empty(),
        };
        Ok(rustix::fs::renameat_with(
            &dir.0, temp, &dir.0, name, flags,
        )?)
    }

    /// Swap `a` and `b`, both in directory `dir`, in one atomic step (`RENAME_EXCHANGE`):
    /// each name holds the other's file after it. `Unsupported` on a file system without it.
    pub(crate) fn exchange_in(dir: &Dir, a: &[u8], b: &[u8]) -> io::Result<()> {
        let flags = rustix::fs::RenameFlags::EXCHANGE;
        match rustix::fs::renameat_with(&dir.0, a, &dir.0, b, flags) {
            Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {
                Err(io::ErrorKind::Unsupported.into())
            }
            result => Ok(result?),
        }
    }

    /// Remove entry `name` of directory `dir` (a file or symlink; never a directory).
    pub(crate) fn unlink_in(dir: &Dir, name: &[u8]) -> io::Result<()> {
        match rustix::fs::unlinkat(&dir.0, name, AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// Open directory `name` of directory `dir`, never following a symlink. Costs one `openat`.
pub(crate) fn open_child(dir: DirRef<'_>, name: &[u8]) -> io::Result<Dir> {
    Ok(Dir(rustix::fs::openat(
        dir,
        name,
        flags_dir(),
        Mode::empty(),
    )?))
}

/// Open directory `path` (relative to the current directory, or absolute), not following a
/// symlink in its last component. Costs one `openat`.
pub(crate) fn open_path(path: &Path) -> io::Result<Dir> {
    Ok(Dir(rustix::fs::openat(
        CWD,
        path,
        flags_dir(),
        Mode::empty(),
    )?))
}

/// Whether opening a directory failed because a symlink or a file stands in its place.
pub(crate) fn in_the_way(error: &io::Error) -> bool {
    matches!(
        rustix::io::Errno::from_io_error(error),
        Some(rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR)
    )
}

/// Whether `error` says the process or the system ran out of something (descriptors, memory):
/// a failure of this moment, not a property of the file.
pub(crate) fn out_of_resources(error: &io::Error) -> bool {
    use rustix::io::Errno;
    error.kind() == io::ErrorKind::OutOfMemory
        || matches!(
            Errno::from_io_error(error),
            Some(Errno::MFILE | Errno::NFILE | Errno::NOMEM | Errno::NOBUFS)
        )
}

/// Make directory `name` in `dir` with permission bits `mode` (less the umask).
pub(crate) fn make_dir_in(dir: DirRef<'_>, name: &[u8], mode: u32) -> io::Result<()> {
    Ok(rustix::fs::mkdirat(dir, name, mode_bits(mode))?)
}

/// Remove directory `name` of `dir`, which must be empty.
pub(crate) fn remove_dir_in(dir: DirRef<'_>, name: &[u8]) -> io::Result<()> {
    Ok(rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)?)
}

/// The entries of an open directory as `readdir` gives them, `.` and `..` left out.
pub(crate) struct Listing(rustix::fs::Dir);

/// One entry of a [`Listing`].
pub(crate) struct Entry(rustix::fs::DirEntry);

impl Listing {
    pub(crate) fn new(dir: Dir) -> io::Result<Listing> {
        Ok(Listing(rustix::fs::Dir::new(dir.0)?))
    }

    /// The directory being listed.
    pub(crate) fn dir(&self) -> io::Result<DirRef<'_>> {
        Ok(self.0.fd()?)
    }
}

impl Iterator for Listing {
    type Item = io::Result<Entry>;

    fn next(&mut self) -> Option<io::Result<Entry>> {
        loop {
            match self.0.next()? {
                Ok(entry) if matches!(entry.file_name().to_bytes(), b"." | b"..") => {}
                Ok(entry) => return Some(Ok(Entry(entry))),
                Err(e) => return Some(Err(e.into())),
            }
        }
    }
}

impl Entry {
    pub(crate) fn name(&self) -> &[u8] {
        self.0.file_name().to_bytes()
    }

    /// What the entry is, if the directory entry says (some file systems leave it out).
    pub(crate) fn kind(&self) -> Option<Kind> {
        match self.0.file_type() {
            FileType::Unknown => None,
            FileType::RegularFile => Some(Kind::File),
            FileType::Directory => Some(Kind::Dir),
            FileType::Symlink => Some(Kind::Symlink),
            _ => Some(Kind::Special),
        }
    }
}

/// What stands at `name` in directory `dir`, not following a symlink. Costs one `fstatat`.
pub(crate) fn stat_at(dir: DirRef<'_>, name: &[u8]) -> io::Result<Found> {
    let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    Ok(found_of(&st))
}

/// What the open directory `dir` is. Costs one `fstat`.
pub(crate) fn stat_dir(dir: DirRef<'_>) -> io::Result<Found> {
    Ok(found_of(&rustix::fs::fstat(dir)?))
}

/// The type, permission bits, size and index stat (truncated to 32 bits as git does) of `st`.
#[allow(clippy::unnecessary_cast)] // the field types differ between targets
fn found_of(st: &rustix::fs::Stat) -> Found {
    let time = |secs: i64, nsecs: u64| stat::Time {
        secs: secs as u32,
        nsecs: nsecs as u32,
    };
    Found {
        kind: kind_of(st.st_mode),
        mode: st.st_mode as u32 & 0o7777,
        size: st.st_size as u64,
        stat: Stat {
            mtime: time(st.st_mtime as i64, st.st_mtime_nsec as u64),
            ctime: time(st.st_ctime as i64, st.st_ctime_nsec as u64),
            dev: st.st_dev as u32,
            ino: st.st_ino as u32,
            uid: st.st_uid,
            gid: st.st_gid,
            size: st.st_size as u32,
        },
        links: st.st_nlink as u64,
    }
}

/// Regular file `name` in directory `dir`, open for reading, and what it is: never follows a
/// symlink, never opens a special file for reading (`O_NONBLOCK`, then the type of the open
/// descriptor). Costs an `openat` and an `fstat`.
pub(crate) fn open_file_in(dir: DirRef<'_>, name: &[u8]) -> io::Result<(std::fs::File, Found)> {
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, name, flags, Mode::empty())?;
    let found = found_of(&rustix::fs::fstat(&fd)?);
    if found.kind != Kind::File {
        return Err(io::Error::other("not a regular file"));
    }
    Ok((fd.into(), found))
}

/// What the open file `file` is now. Costs an `fstat`.
pub(crate) fn stat_file(file: &std::fs::File) -> io::Result<Found> {
    Ok(found_of(&rustix::fs::fstat(file)?))
}

/// The target of symlink `name` in directory `dir`. Costs one `readlinkat`.
pub(crate) fn read_link_in(dir: DirRef<'_>, name: &[u8]) -> io::Result<Vec<u8>> {
    Ok(rustix::fs::readlinkat(dir, name, Vec::new())?.into_bytes())
}

/// Make everything written so far on the file systems of `dirs` durable: one `syncfs` per
/// distinct file system (a batch: far cheaper than an `fsync` per file). Costs one `fstat`
/// per directory and one `syncfs` per file system.
pub(crate) fn sync_filesystems<'a>(dirs: impl IntoIterator<Item = DirRef<'a>>) -> io::Result<()> {
    let mut synced = Vec::new();
    for dir in dirs {
        let dev = rustix::fs::fstat(dir)?.st_dev;
        if !synced.contains(&dev) {
            sync_fs(dir)?;
            synced.push(dev);
        }
    }
    Ok(())
}

/// Open store file `path` to be written over from its start, creating it (0600) if missing;
/// only a regular file with one name, never through a symlink, never waiting for a FIFO's
/// reader (`O_NONBLOCK`, which changes nothing for a regular file). Costs an `open` and an
/// `fstat`.
pub(crate) fn open_spare(path: &Path) -> io::Result<std::fs::File> {
    let flags =
        OFlags::WRONLY | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = std::fs::File::from(rustix::fs::openat(CWD, path, flags, mode_bits(0o600))?);
    let stat = rustix::fs::fstat(&file)?;
    match rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::RegularFile
        && stat.st_nlink == 1
    {
        true => Ok(file),
        false => Err(io::Error::other("not a spare rewind made")),
    }
}

/// How many names the file has. Costs nothing (read from `meta`).
pub(crate) fn link_count(meta: &std::fs::Metadata) -> u64 {
    std::os::unix::fs::MetadataExt::nlink(meta)
}

/// `options` made to open without following a symlink or waiting on a FIFO.
pub(crate) fn options_not_waiting(options: &mut std::fs::OpenOptions) -> &mut std::fs::OpenOptions {
    use std::os::unix::fs::OpenOptionsExt;
    options.custom_flags((OFlags::NOFOLLOW | OFlags::NONBLOCK).bits() as i32)
}

/// The process's limits on its memory, in bytes, each with what it is called: its address
/// space (soft `RLIMIT_AS`, `ulimit -v`) and its data (soft `RLIMIT_DATA`, `ulimit -d`, which
/// counts thread stacks and other private mappings too); `None`: unlimited.
pub(crate) fn memory_limits() -> [(&'static str, Option<u64>); 2] {
    use rustix::process::{getrlimit, Resource};
    [
        (
            "address-space limit (ulimit -v)",
            getrlimit(Resource::As).current,
        ),
        ("data limit (ulimit -d)", getrlimit(Resource::Data).current),
    ]
}

/// glibc's `mallopt(M_ARENA_MAX, 1)`: one malloc arena for all threads (see
/// `one_malloc_arena_under_an_address_space_limit` in `fs.rs`).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) fn one_malloc_arena() {
    extern "C" {
        fn mallopt(param: i32, value: i32) -> i32;
    }
    const M_ARENA_MAX: i32 = -8;
    // SAFETY: mallopt only sets a parameter of glibc's allocator; it takes no pointers.
    unsafe { mallopt(M_ARENA_MAX, 1) };
}

/// Other allocators are left as they are.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn one_malloc_arena() {}

/// The process's limit on open descriptors (its soft `RLIMIT_NOFILE`); `None`: unlimited.
pub(crate) fn open_files_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

/// How many descriptors the process has open (`/proc/self/fd`, or `/dev/fd`; 32 where neither
/// lists them). Costs a `readdir` of that directory.
pub(crate) fn open_descriptors() -> u64 {
    let listed = std::fs::read_dir("/proc/self/fd").or_else(|_| std::fs::read_dir("/dev/fd"));
    listed.map_or(32, |entries| entries.count() as u64)
}

/// Grow this process's descriptor table at once to hold descriptor number `to` (bounded by the
/// limit), by duplicating `dir` there and closing the copy. Costs one growth: in a process with
/// threads each growth of the table waits for an RCU grace period (milliseconds), and a table
/// left to double as a run opens descriptors grows many times.
pub(crate) fn grow_descriptor_table(dir: &Dir, to: u64) {
    let highest = open_files_limit().map_or(to, |limit| to.min(limit.saturating_sub(1)));
    let _ = rustix::io::fcntl_dupfd_cloexec(&dir.0, i32::try_from(highest).unwrap_or(i32::MAX));
}

/// Close `held` without waiting for what the last close of each costs (a file whose names
/// are gone is freed then, which can cost more than anything else a restore does to it; see
/// [`super::Unlinked`]). Each goes into the table of a new io_uring instance, which holds a
/// reference of its own; this process then drops its descriptors (no longer the last
/// reference) and the instance, whose teardown, and with it the last references, the kernel
/// runs on its own workers, after this call and after the process has gone on or exited (the
/// first kernels with io_uring ran it on the thread dropping the instance: then the files are
/// freed here). Gives back what it could not hand over, where the system has no io_uring or
/// refuses it (before Linux 5.1, a seccomp filter, `kernel.io_uring_disabled`). Costs an
/// `io_uring_setup` and an `io_uring_register` per 1,024, and a `close` of each.
#[cfg(target_os = "linux")]
pub(crate) fn close_in_the_background<T: AsFd>(mut held: Vec<T>) -> Result<(), Vec<T>> {
    use rustix::io_uring::{io_uring_params, io_uring_register, io_uring_setup, IoringRegisterOp};
    use std::os::fd::AsRawFd;
    // (The most one table held on the first kernels with io_uring.)
    const TABLE: usize = 1024;
    while !held.is_empty() {
        let n = held.len().min(TABLE);
        let fds: Vec<_> = held[..n].iter().map(|h| h.as_fd().as_raw_fd()).collect();
        let mut params = io_uring_params::default();
        // SAFETY: no `ATTACH_WQ` flag: the call reads no descriptor from `params`.
        let Ok(ring) = (unsafe { io_uring_setup(1, &mut params) }) else {
            return Err(held);
        };
        let table = fds.as_ptr().cast();
        // SAFETY: `table` points at `n` open descriptors, which the call only reads.
        if unsafe { io_uring_register(&ring, IoringRegisterOp::RegisterFiles, table, n as u32) }
            .is_err()
        {
            return Err(held);
        }
        held.drain(..n).for_each(drop);
        drop(ring);
    }
    Ok(())
}

/// Where there is no io_uring, `held` comes back.
#[cfg(not(target_os = "linux"))]
pub(crate) fn close_in_the_background<T: AsFd>(held: Vec<T>) -> Result<(), Vec<T>> {
    Err(held)
}

/// The id of the mount directory `dir` is on (`None` where the system does not say: before
/// Linux 5.8, and off Linux). Costs a `statx`.
#[cfg(target_os = "linux")]
pub(crate) fn mount_id(dir: DirRef<'_>) -> Option<u64> {
    use rustix::fs::{statx, StatxFlags};
    let found = statx(dir, c"", AtFlags::EMPTY_PATH, StatxFlags::MNT_ID).ok()?;
    (found.stx_mask & StatxFlags::MNT_ID.bits() != 0).then_some(found.stx_mnt_id)
}

/// The id of the mount directory `dir` is on: not known off Linux.
#[cfg(not(target_os = "linux"))]
pub(crate) fn mount_id(_dir: DirRef<'_>) -> Option<u64> {
    None
}

/// Start writing `file`'s dirty pages to its disk and return at once (`sync_file_range` with
/// `SYNC_FILE_RANGE_WRITE`: nothing is waited for, nothing made durable; a later `syncfs` finds
/// less to write). Costs submitting the writes.
#[cfg(target_os = "linux")]
pub(crate) fn start_write_back(file: &std::fs::File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: a plain syscall on a descriptor `file` owns, with no pointers.
    let started =
        unsafe { libc::sync_file_range(file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
    match started {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// Nothing where there is no `sync_file_range` (the sync that comes later writes everything).
#[cfg(not(target_os = "linux"))]
pub(crate) fn start_write_back(_file: &std::fs::File) -> io::Result<()> {
    Ok(())
}

/// `syncfs`: the file system of `fd` made durable.
#[cfg(target_os = "linux")]
fn sync_fs(fd: impl AsFd) -> io::Result<()> {
    Ok(rustix::fs::syncfs(fd)?)
}

/// Where there is no `syncfs` (macOS, the BSDs): `sync`, all file systems, which some
/// systems return from before the data is on disk.
#[cfg(not(target_os = "linux"))]
fn sync_fs(_fd: impl AsFd) -> io::Result<()> {
    rustix::fs::sync();
    Ok(())
}

/// Open `path` (relative to directory `dir`, or absolute) for reading only if it is a regular
/// file: never blocks on a FIFO, never reads a device, and with `follow == false` never follows
/// a symlink (a file swapped for any of these since it was stat'ed is an error, "changed while
/// being read").
pub(crate) fn open_regular(
    dir: DirRef<'_>,
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

/// Permissions with exactly the bits `mode`.
pub(crate) fn permissions(mode: u32) -> Option<std::fs::Permissions> {
    use std::os::unix::fs::PermissionsExt;
    Some(std::fs::Permissions::from_mode(mode))
}

/// How many hard links the file `meta` describes has.
pub(crate) fn links(meta: &std::fs::Metadata) -> u64 {
    std::os::unix::fs::MetadataExt::nlink(meta)
}

/// Make directory `path` and its missing parents, each with the bits `mode` (less the umask).
pub(crate) fn create_dirs(path: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(path)
}

/// The permission bits of `meta`.
pub(crate) fn mode_of(meta: &std::fs::Metadata) -> u32 {
    use std::os::unix::fs::MetadataExt;
    meta.mode() & 0o7777
}

/// Whether the process's effective user owns the file of `meta`. Costs a `geteuid`.
pub(crate) fn owned_by_us(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    meta.uid() == rustix::process::geteuid().as_raw()
}

/// The disk space of the file of `meta` (its allocated blocks, as `du` counts).
pub(crate) fn allocated(meta: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    meta.blocks() * 512
}

/// When the file at `path` last changed (its ctime: seconds, nanoseconds). Costs a `stat`.
#[allow(clippy::unnecessary_cast)] // the field types differ between targets
pub(crate) fn changed_at(path: &Path) -> io::Result<(i64, i64)> {
    let st = rustix::fs::stat(path)?;
    Ok((st.st_ctime as i64, st.st_ctime_nsec as i64))
}

/// Read from `file` at `offset` (`pread`).
pub(crate) fn read_at(file: &std::fs::File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, offset)
}

/// Write all of `data` to `file` at `offset` (`pwrite`).
pub(crate) fn write_all_at(file: &std::fs::File, data: &[u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, data, offset)
}

/// When the inode of `found` last changed (`ctime`: its content, mode, links or name, set by
/// the kernel only), if it can be told.
pub(crate) fn change_time(found: &std::fs::Metadata) -> Option<std::time::SystemTime> {
    use std::os::unix::fs::MetadataExt;
    let nanos = u32::try_from(found.ctime_nsec()).ok()?;
    let since = std::time::Duration::new(u64::try_from(found.ctime()).ok()?, nanos);
    std::time::SystemTime::UNIX_EPOCH.checked_add(since)
}
