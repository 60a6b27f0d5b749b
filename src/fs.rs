//! File operations inside the project: every write and delete that restore, revert and undo
//! make goes through here, and so does every read of the snapshot walk.
//!
//! On Unix (`fs/unix.rs`, the tested path), a path is reached by opening each directory on the way
//! with `openat(O_NOFOLLOW|O_DIRECTORY)` from a descriptor of the project root, so a directory
//! that another process swapped for a symlink is refused (`ELOOP`/`ENOTDIR`), never followed
//! out of the project. The last step (`unlinkat`, `renameat`, `openat(O_NOFOLLOW)`) never
//! follows a symlink either. Special files are never opened for reading: [`read_file_in`] opens
//! with `O_NONBLOCK` and checks the type on the open descriptor, so a FIFO cannot block it and
//! a device cannot feed it forever.
//!
//! Elsewhere (Windows), `fs/portable.rs` gives the same API by path over `std::fs`, checking each
//! component with `symlink_metadata` (not race-free; compiled, not tested).
//!
//! The code above the platform split (this file) is the same on both: it only opens, lists,
//! stats and removes through the platform's primitives.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use gix::bstr::{BStr, BString, ByteSlice};
use gix::index::entry::Stat;

#[cfg(target_os = "linux")]
mod inotify;
#[cfg(not(unix))]
mod portable;
#[cfg(unix)]
mod unix;
#[cfg(target_os = "linux")]
pub(crate) use inotify::Inotify;
#[cfg(not(target_os = "linux"))]
pub(crate) use no_inotify::Inotify;
#[cfg(not(unix))]
pub(crate) use portable::*;
#[cfg(unix)]
pub(crate) use unix::*;

/// The project root, held open; all paths below are `/`-separated and project-relative.
pub(crate) struct ProjectRoot {
    dir: Dir,
    path: PathBuf,
}

/// Whether [`ProjectRoot::open_dir`] makes missing directories, and the mode of each (by its
/// project path).
pub(crate) type Create<'a> = Option<&'a (dyn Fn(&[u8]) -> u32 + Sync)>;

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

/// What stands at a path: its type, permission bits, size and index stat.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Found {
    pub kind: Kind,
    pub mode: u32,
    pub size: u64,
    pub stat: Stat,
    /// How many names the file has (hard links); 1 where the system does not say.
    pub links: u64,
}

/// Split `path` into its parent directory and its last name.
pub(crate) fn split(path: &BStr) -> (&[u8], &[u8]) {
    match path.rfind_byte(b'/') {
        Some(slash) => (&path[..slash], &path[slash + 1..]),
        None => (&[][..], path.as_bytes()),
    }
}

/// `dir/name`, or `name` when `dir` is the root (`""`).
fn join(dir: &[u8], name: &[u8]) -> BString {
    let mut path = BString::from(Vec::with_capacity(dir.len() + 1 + name.len()));
    if !dir.is_empty() {
        path.extend_from_slice(dir);
        path.push(b'/');
    }
    path.extend_from_slice(name);
    path
}

/// `path` (or the root, `""`, when `root` allows it) as a project-relative path: names joined
/// by single `/`, none of them `.` or `..`. Every path a run opens, writes or deletes is checked
/// so, whatever the store's trees hold: a name `..` would lead out of the project. Costs a scan
/// of the path.
fn relative_path(path: &[u8], root: bool) -> io::Result<()> {
    let bad = |name: &[u8]| name.is_empty() || name == b"." || name == b"..";
    match (path.is_empty() && root) || !path.split(|&b| b == b'/').any(bad) {
        true => Ok(()),
        false => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{:?} is not a path inside the project", path.as_bstr()),
        )),
    }
}

/// The end of each non-empty component of `dir` (`a/b` gives 1 and 3): the lengths of the
/// directory paths from the top down.
fn component_ends(dir: &[u8]) -> impl Iterator<Item = usize> + '_ {
    let mut end = 0;
    dir.split(|&b| b == b'/').filter_map(move |name| {
        end += name.len() + usize::from(end > 0);
        (!name.is_empty()).then_some(end)
    })
}

/// How many directories a run may hold open at once: a third of the descriptors the process
/// has left under its limit (`RLIMIT_NOFILE`, often 1,024) once those open now and a reserve of
/// [`DESCRIPTOR_RESERVE`] are set aside; at least 1, at most 4,096. A restore holds at most three
/// times this many (the directories of the files it stages, a second look at each before it
/// swaps, and the files it swapped out, until it answers), so it never runs out of descriptors,
/// however many files it writes. Costs a listing of the process's open descriptors.
pub(crate) fn descriptor_budget() -> usize {
    let Some(limit) = open_files_limit() else {
        return 4096;
    };
    let free = limit.saturating_sub(open_descriptors() + DESCRIPTOR_RESERVE);
    usize::try_from(free / 3)
        .unwrap_or(usize::MAX)
        .clamp(1, 4096)
}

/// Make room in the process's descriptor table for the most a run may hold (three times its
/// [`descriptor_budget`]), once, when the first store is opened, before rayon's pool starts
/// its threads: growing the table of a process with threads waits for an RCU grace period.
/// Measured, a one-shot restore of 1,000 files: deciding took 11–14 ms with the table grown by
/// [`make_room`] after the snapshot, 4 ms with it grown before; grown before the snapshot but
/// after the pool had started, the growth itself took 6–20 ms. Costs a listing of the open
/// descriptors and one `fcntl` (and the table's memory: at most about 12,000 entries).
pub(crate) fn make_room_for_a_run(dir: &Dir) {
    let wanted = open_descriptors() + 3 * descriptor_budget() as u64 + DESCRIPTOR_RESERVE;
    grow_descriptor_table(dir, wanted);
}

/// Make room in the process's descriptor table, in one step, for the directories a run opens
/// on the way to `paths` (twice over: a restore holds a second set for its swaps) and for
/// `files` more (the files it holds [`Unlinked`]), so that it does not grow again and again
/// while the run's threads open them. Measured, a restore of 1,000 files in a fresh process:
/// 35–50 ms of growing before, one growth of 4–17 ms after. Costs a walk of the paths' bytes
/// and one `fcntl`.
pub(crate) fn make_room<'p>(
    root: &ProjectRoot,
    paths: impl Iterator<Item = &'p [u8]>,
    files: usize,
) {
    let mut dirs = std::collections::HashSet::new();
    for path in paths {
        let parent = split(path.as_bstr()).0;
        dirs.extend(component_ends(parent).map(|end| &parent[..end]));
    }
    let wanted = open_descriptors() + (2 * dirs.len() + files) as u64 + DESCRIPTOR_RESERVE;
    grow_descriptor_table(&root.dir, wanted);
}

/// Files a run removed from the project while it held them open, to be closed later: the close
/// of a file's last link frees its blocks, which on some file systems costs more than anything
/// else a restore does to the file (ext4 mounted with `discard` and without a journal trims
/// each freed extent before the close returns: about 100 µs a file, most of it waiting on the
/// disk, measured here). Holds at most `room` descriptors; past that a file is closed at once.
pub(crate) struct Unlinked {
    files: std::sync::Mutex<Vec<std::fs::File>>,
    room: usize,
    /// Whether a temp file of the run's own could not be removed ([`Unlinked::remove_temp`]).
    temps_left: std::sync::atomic::AtomicBool,
}

impl Unlinked {
    pub(crate) fn new(room: usize) -> Unlinked {
        Unlinked {
            files: Default::default(),
            room,
            temps_left: Default::default(),
        }
    }

    /// Remove `temp`, a temp file of the run's own in `dir` that was not swapped in; one that
    /// cannot be removed is remembered ([`Unlinked::temps_left`]). Costs an `unlinkat`.
    pub(crate) fn remove_temp(&self, dir: &Dir, temp: &[u8]) {
        if ProjectRoot::unlink_in(dir, temp).is_err() {
            self.temps_left
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Whether [`Unlinked::remove_temp`] left a temp file in the project.
    pub(crate) fn temps_left(&self) -> bool {
        self.temps_left.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Hold `file`, whose name is gone, or close it now when there is no room.
    pub(crate) fn keep(&self, file: std::fs::File) {
        let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        if files.len() < self.room {
            files.push(file);
            return;
        }
        drop(files);
        drop(file); // outside the lock: the close may wait on the disk
    }

    /// Close them, and the directories a run held open last (`dirs`: closing a thousand costs
    /// a few milliseconds), on the I/O threads ([`Closing`]) after the caller has answered.
    pub(crate) fn close_later(self, closing: &Closing, dirs: Vec<OpenDirs<'_>>) {
        let files = self.files.into_inner().unwrap_or_else(|p| p.into_inner());
        let dirs: Vec<std::sync::Arc<Dir>> =
            dirs.into_iter().flat_map(OpenDirs::into_open).collect();
        if !files.is_empty() || !dirs.is_empty() {
            closing.start(files, dirs);
        }
    }
}

/// Closes what a run [`Unlinked`], after it answered: a job on the [I/O threads](on_io_threads)
/// the run's swaps started (no thread is started at the end of a run, when a small memory
/// limit may leave no room for one: without the pool, the job runs at once). The job leaves
/// the last closes to the kernel's workers where it takes them ([`close_in_the_background`]),
/// so that neither the run nor the process's exit waits for the blocks to be freed; elsewhere
/// it closes them itself, in parallel. Starting the next closing, and dropping this, wait for
/// the job (so that descriptors never pile up, and a process that exits has handed over or
/// freed the blocks itself, in parallel, not one file at a time as exit would).
#[derive(Default)]
pub(crate) struct Closing(std::sync::Mutex<Option<std::sync::mpsc::Receiver<()>>>);

impl Closing {
    fn start(&self, files: Vec<std::fs::File>, dirs: Vec<std::sync::Arc<Dir>>) {
        let mut running = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(before) = running.take() {
            let _ = before.recv();
        }
        *running = Some(Self::job(files, dirs));
    }

    /// Close `files` and `dirs` in a job on the I/O threads, in one part per thread, each
    /// handed to the kernel ([`close_in_the_background`]) or, where it is refused, closed on
    /// its thread. (A kernel that tears an io_uring instance down on the thread dropping it,
    /// as the first ones with io_uring did, frees the files there: still in parallel.) The
    /// receiver hears when the job is done.
    fn job(
        mut files: Vec<std::fs::File>,
        dirs: Vec<std::sync::Arc<Dir>>,
    ) -> std::sync::mpsc::Receiver<()> {
        use rayon::prelude::*;
        let (done, closed) = std::sync::mpsc::sync_channel(1);
        let close = move || {
            let part = files.len().div_ceil(IO_THREADS).max(1);
            let mut parts = Vec::new();
            while !files.is_empty() {
                parts.push(files.split_off(files.len().saturating_sub(part)));
            }
            // (What the kernel gives back is dropped, closed, with the result.)
            parts
                .into_par_iter()
                .for_each(|part| drop(close_in_the_background(part)));
            drop(close_in_the_background(dirs));
            let _ = done.send(());
        };
        // (Only a pool the run started: starting threads now could fail for want of memory.)
        match IO_POOL.get().and_then(Option::as_ref) {
            Some(pool) => pool.spawn(close),
            None => close(),
        }
        closed
    }

    /// Wait until the files handed over so far are closed.
    pub(crate) fn wait(&self) {
        let running = self.0.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(closed) = running {
            let _ = closed.recv();
        }
    }
}

impl Drop for Closing {
    fn drop(&mut self) {
        self.wait();
    }
}

/// Threads for the file operations of a restore: most of a staging or a swap is the kernel
/// creating, renaming and freeing inodes, some of it waiting on the disk (a file system mounted
/// with `discard` trims each freed file's blocks as it goes), so more threads than cores help.
/// Measured on 2 cores, swapping 1,000 files: 88 ms on 2 threads, 62 ms on 4, 45 ms on 8, no
/// better on 16.
const IO_THREADS: usize = 8;

/// Run `work` (rayon parallel iterators) on the [`IO_THREADS`] pool, made on first use; on
/// rayon's own pool if it cannot be made.
pub(crate) fn on_io_threads<R: Send>(work: impl FnOnce() -> R + Send) -> R {
    match io_pool() {
        Some(pool) => pool.install(work),
        None => work(),
    }
}

/// The stack of each of the [`IO_THREADS`]: 256 KiB, an eighth of a thread's by default.
const IO_STACK: usize = 256 << 10;

/// The [`IO_THREADS`] pool, made on first use (`None` if it could not be).
static IO_POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();

/// The [`IO_POOL`], made now if it was not; `None` if it cannot be made.
fn io_pool() -> Option<&'static rayon::ThreadPool> {
    let pool = IO_POOL.get_or_init(|| {
        // (Their work is shallow: a small stack each keeps eight of them from taking 16 MB of
        // address space, which a small memory limit may not have.)
        let threads = rayon::ThreadPoolBuilder::new()
            .num_threads(IO_THREADS)
            .stack_size(IO_STACK)
            .thread_name(|n| format!("rewind-io-{n}"));
        threads.build().ok()
    });
    pool.as_ref()
}

/// Descriptors [`descriptor_budget`] leaves for the rest of a run: the store's files, the files
/// the threads read and write, directories opened on the way.
const DESCRIPTOR_RESERVE: u64 = 64;

/// The project's directories, each opened once and shared between threads: a run that
/// touches many files opens each directory from its parent's descriptor, not from the root.
/// A descriptor names the directory it was opened on: a run that removes directories starts a
/// new `OpenDirs` afterwards. At most `keep` directories stay open (see [`descriptor_budget`]).
pub(crate) struct OpenDirs<'r> {
    root: &'r ProjectRoot,
    open: std::sync::Mutex<std::collections::HashMap<Vec<u8>, std::sync::Arc<Dir>>>,
    /// What each directory kept in `open` is ([`identity`]), looked at once ([`Self::still_at`]).
    identities: std::sync::Mutex<std::collections::HashMap<Vec<u8>, Identity>>,
    keep: usize,
}

/// What a directory is, wherever it stands: its type, device and inode.
type Identity = (Kind, u32, u32);

fn identity(found: Found) -> Identity {
    (found.kind, found.stat.dev, found.stat.ino)
}

/// What the directory at `path` is now (its device and inode): another value than before
/// means another directory stands at the path. Costs an `open` and an `fstat`.
pub(crate) fn directory_at(path: &Path) -> io::Result<(u32, u32)> {
    let found = stat_dir(open_path(path)?.as_dir())?;
    Ok((found.stat.dev, found.stat.ino))
}

impl<'r> OpenDirs<'r> {
    pub(crate) fn new(root: &'r ProjectRoot, keep: usize) -> OpenDirs<'r> {
        OpenDirs {
            root,
            open: Default::default(),
            identities: Default::default(),
            keep,
        }
    }

    /// The directories held open.
    fn into_open(self) -> impl Iterator<Item = std::sync::Arc<Dir>> {
        let open = self.open.into_inner().unwrap_or_else(|p| p.into_inner());
        open.into_values()
    }

    /// Directory `dir`, as [`ProjectRoot::open_dir`] opens it, from its nearest ancestor
    /// opened before. Costs an `openat` per component not opened before.
    pub(crate) fn get(&self, dir: &[u8], create: Create<'_>) -> io::Result<std::sync::Arc<Dir>> {
        relative_path(dir, true)?;
        let ends: Vec<usize> = component_ends(dir).collect();
        // The deepest directory on the way opened before (the root when none is).
        let (mut fd, start) = match (0..ends.len())
            .rev()
            .find_map(|i| Some((self.kept(&dir[..ends[i]])?, i + 1)))
        {
            Some(found) => found,
            None => match self.kept(b"") {
                Some(root) => (root, 0),
                None => (
                    self.insert(b"", open_child(self.root.dir.as_dir(), b".")?),
                    0,
                ),
            },
        };
        for &end in &ends[start..] {
            let next = self.root.open_step(fd.as_dir(), &dir[..end], create)?;
            fd = self.insert(&dir[..end], next);
        }
        Ok(fd)
    }

    /// Directory `dir`, if it is kept open.
    fn kept(&self, dir: &[u8]) -> Option<std::sync::Arc<Dir>> {
        let open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.get(dir).cloned()
    }

    /// The parent directory of `path`, opened (see [`Self::get`]), and the last name.
    pub(crate) fn parent<'p>(
        &self,
        path: &'p BStr,
        create: Create<'_>,
    ) -> io::Result<(std::sync::Arc<Dir>, &'p [u8])> {
        relative_path(path, false)?;
        let (dir, name) = split(path);
        Ok((self.get(dir, create)?, name))
    }

    /// What stands at `path`, as [`ProjectRoot::lstat`] sees it. Costs an `fstatat` (and an
    /// `openat` per directory on the way not opened before).
    pub(crate) fn lstat(&self, path: &BStr) -> io::Result<Option<Found>> {
        match self.parent(path, None) {
            Ok((parent, name)) => stat_in(parent.as_dir(), name),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Whether `held`, a directory opened earlier, still stands at project path `dir`, and each
    /// directory on the way from the root still stands where it was opened here: none was
    /// moved (out of the project, say), replaced or swapped for a symlink since. Costs an
    /// `fstatat` per component (each name looked up in its parent as [`Self::get`] opened it),
    /// an `fstat` of `held`, and the first time, one of each directory on the way (with an
    /// `openat` of each not kept open, from the one before: linear in the depth).
    pub(crate) fn still_at(&self, dir: &[u8], held: &Dir) -> io::Result<bool> {
        let held = identity(stat_dir(held.as_dir())?);
        if dir.is_empty() {
            return Ok(self.identity_of(dir, &self.get(dir, None)?)? == held);
        }
        let mut parent = self.get(b"", None)?;
        for end in component_ends(dir) {
            let path = &dir[..end];
            let standing = match stat_in(parent.as_dir(), split(path.as_bstr()).1)? {
                Some(found) => identity(found),
                None => return Ok(false),
            };
            if end == dir.len() {
                return Ok(standing == held);
            }
            let opened = match self.kept(path) {
                Some(kept) => kept,
                None => self.insert(path, self.root.open_step(parent.as_dir(), path, None)?),
            };
            if standing != self.identity_of(path, &opened)? {
                return Ok(false);
            }
            parent = opened;
        }
        Ok(true)
    }

    /// What directory `dir`, `opened` here, is: remembered while it is kept open (its
    /// descriptor names the same directory for as long). Costs an `fstat` the first time.
    fn identity_of(&self, dir: &[u8], opened: &std::sync::Arc<Dir>) -> io::Result<Identity> {
        let known = self.identities.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(&known) = known.get(dir) {
            return Ok(known);
        }
        drop(known);
        let found = identity(stat_dir(opened.as_dir())?);
        let open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if open
            .get(dir)
            .is_some_and(|kept| std::sync::Arc::ptr_eq(kept, opened))
        {
            let mut known = self.identities.lock().unwrap_or_else(|p| p.into_inner());
            known.insert(dir.to_vec(), found);
        }
        Ok(found)
    }

    /// `fd`, kept open for later if fewer than `keep` are.
    fn insert(&self, dir: &[u8], fd: Dir) -> std::sync::Arc<Dir> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if open.len() >= self.keep {
            return std::sync::Arc::new(fd);
        }
        open.entry(dir.to_vec())
            .or_insert_with(|| std::sync::Arc::new(fd))
            .clone()
    }
}

impl ProjectRoot {
    /// The absolute path of `rel`, for messages only (never opened by path).
    pub(crate) fn display(&self, rel: &BStr) -> PathBuf {
        self.path.join(crate::paths::os_path_lossy(rel))
    }

    /// Open directory `dir` (`""`: the root), one component at a time, refusing symlinks.
    /// With `create`, missing directories are made with the mode it gives for each directory
    /// path (less the umask). Costs one `openat` per component (plus a `mkdirat` per missing
    /// one).
    pub(crate) fn open_dir(&self, dir: &[u8], create: Create<'_>) -> io::Result<Dir> {
        relative_path(dir, true)?;
        let mut fd = open_child(self.dir.as_dir(), b".")?;
        for end in component_ends(dir) {
            fd = self.open_step(fd.as_dir(), &dir[..end], create)?;
        }
        Ok(fd)
    }

    /// Open directory `dir`'s last component from `parent`, its opened parent directory,
    /// refusing a symlink; with `create`, made first if missing. Costs an `openat` (and a
    /// `mkdirat` when missing).
    fn open_step(&self, parent: DirRef<'_>, dir: &[u8], create: Create<'_>) -> io::Result<Dir> {
        let name = split(dir.as_bstr()).1;
        let opened = match (open_child(parent, name), create) {
            (Err(e), Some(mode_of)) if e.kind() == io::ErrorKind::NotFound => {
                match make_dir_in(parent, name, mode_of(dir)) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(e),
                }
                open_child(parent, name)
            }
            (other, _) => other,
        };
        opened.map_err(|e| match in_the_way(&e) {
            true => io::Error::new(
                io::ErrorKind::NotADirectory,
                format!(
                    "{} is not a directory (a symlink or file is in the way)",
                    self.display(dir.as_bstr()).display()
                ),
            ),
            false => e,
        })
    }

    /// The parent directory of `path`, opened, and the last name.
    pub(crate) fn parent<'p>(
        &self,
        path: &'p BStr,
        create: Create<'_>,
    ) -> io::Result<(Dir, &'p [u8])> {
        relative_path(path, false)?;
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
        stat_in(parent.as_dir(), name)
    }

    /// The content of the regular file at `path`. A FIFO, socket or device there is an error,
    /// never opened for reading (so never a hang); a symlink is never followed.
    pub(crate) fn read_file(&self, path: &BStr) -> io::Result<Vec<u8>> {
        let (parent, name) = self.parent(path, None)?;
        read_file_in(parent.as_dir(), name)
    }

    /// The target of the symlink at `path`.
    pub(crate) fn read_link(&self, path: &BStr) -> io::Result<Vec<u8>> {
        let (parent, name) = self.parent(path, None)?;
        read_link_in(parent.as_dir(), name)
    }

    /// Remove directory `dir` if it is empty: `Ok(false)` when it is not, or is gone, or is no
    /// longer a directory; an error when the file system refuses (an I/O error, a mount point,
    /// no permission).
    pub(crate) fn remove_dir_if_empty(&self, dir: &BStr) -> io::Result<bool> {
        let Ok((parent, name)) = self.parent(dir, None) else {
            return Ok(false);
        };
        match remove_dir_in(parent.as_dir(), name) {
            Ok(()) => Ok(true),
            Err(e) => match e.kind() {
                io::ErrorKind::DirectoryNotEmpty
                | io::ErrorKind::AlreadyExists
                | io::ErrorKind::NotFound
                | io::ErrorKind::NotADirectory => Ok(false),
                _ => Err(e),
            },
        }
    }

    /// Remove directory `dir` and the directories below it, which must all be empty (nothing
    /// but directories), none of them a mount point (a file system mounted there is not the
    /// project's, nor are its empty directories). Looks at the whole tree first, holding each
    /// directory open, and removes each through the directory it was found in: at the first
    /// entry that is not a directory, or a mount point, it fails having removed nothing, and a
    /// mount made on one meanwhile is never entered (its removal fails). Costs a read of the
    /// mount table, and an `openat`, a `statx` and a listing per directory (iterative: no stack
    /// per level).
    pub(crate) fn remove_empty_tree(&self, dir: &BStr) -> io::Result<()> {
        let mounts = mount_points_inside(&self.path, &mounts_of(&self.path));
        let in_the_way = |path: &[u8], why: &str| {
            let shown = self.display(path.as_bstr());
            io::Error::other(format!("{} is in the way{why}", shown.display()))
        };
        let mounted = || " (a file system is mounted there)";
        let (parent, name) = self.parent(dir, None)?;
        let top = open_child(parent.as_dir(), name)?;
        let mount = mount_id(top.as_dir());
        // Each directory: its path, itself, and where it was found (its parent's index).
        let mut found: Vec<(Vec<u8>, Dir, Option<usize>)> = vec![(dir.to_vec(), top, None)];
        let mut next = 0;
        while next < found.len() {
            if mounts.contains(&found[next].0) || mount_id(found[next].1.as_dir()) != mount {
                return Err(in_the_way(&found[next].0, mounted()));
            }
            let mut children = Vec::new();
            let mut listing = Listing::new(open_child(found[next].1.as_dir(), b".")?)?;
            for entry in listing.by_ref() {
                let entry = entry?;
                let child = join(&found[next].0, entry.name());
                let kind = match entry.kind() {
                    Some(kind) => Some(kind),
                    None => stat_in(found[next].1.as_dir(), entry.name())?.map(|f| f.kind),
                };
                if kind != Some(Kind::Dir) {
                    return Err(in_the_way(&child, ""));
                }
                let opened = open_child(found[next].1.as_dir(), entry.name())?;
                children.push((child.into(), opened, Some(next)));
            }
            found.extend(children);
            next += 1;
        }
        // (Each directory after those below it: found parents first, removed in reverse.)
        for (path, _, parent_at) in found.iter().rev() {
            let name = split(path.as_bstr()).1;
            match parent_at {
                Some(at) => remove_dir_in(found[*at].1.as_dir(), name)?,
                None => remove_dir_in(parent.as_dir(), name)?,
            }
        }
        Ok(())
    }

    /// The entries of directory `dir` (project paths) and what each is. Costs a `readdir`
    /// (and an `fstatat` per entry whose type the directory entry does not say).
    pub(crate) fn list(&self, dir: &BStr) -> io::Result<Vec<(BString, Kind)>> {
        let mut listing = Listing::new(self.open_dir(dir, None)?)?;
        let listed: Vec<Entry> = listing.by_ref().collect::<io::Result<_>>()?;
        let fd = listing.dir()?;
        let mut entries = Vec::with_capacity(listed.len());
        for entry in listed {
            let kind = match entry.kind() {
                Some(kind) => kind,
                None => match stat_in(fd, entry.name())? {
                    Some(found) => found.kind,
                    None => continue,
                },
            };
            entries.push((join(dir, entry.name()), kind));
        }
        Ok(entries)
    }

    /// The names in directory `dir` that start with `prefix` (for removing our own temp files).
    pub(crate) fn names_with_prefix(&self, dir: &[u8], prefix: &[u8]) -> io::Result<Vec<Vec<u8>>> {
        let mut names = Vec::new();
        for entry in Listing::new(self.open_dir(dir, None)?)? {
            let entry = entry?;
            if entry.name().starts_with(prefix) {
                names.push(entry.name().to_vec());
            }
        }
        Ok(names)
    }
}

/// The content of regular file `name` in directory `dir` (see [`open_file_in`]). Costs an
/// open, an `fstat` and the read.
pub(crate) fn read_file_in(dir: DirRef<'_>, name: &[u8]) -> io::Result<Vec<u8>> {
    let (file, found) = open_file_in(dir, name)?;
    read_all(&file, found.size)
}

/// The rest of `file`'s content, `size` bytes as a look at it found (more or fewer if it
/// changed since). Costs the reads (std's `read_to_end` on a `File` would look at its size and
/// offset again).
pub(crate) fn read_all(file: &std::fs::File, size: u64) -> io::Result<Vec<u8>> {
    let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0).saturating_add(1));
    io::Read::read_to_end(&mut io::Read::take(file, u64::MAX), &mut data)?;
    Ok(data)
}

/// What stands at `name` in directory `dir`; `None` when nothing does.
pub(crate) fn stat_in(dir: DirRef<'_>, name: &[u8]) -> io::Result<Option<Found>> {
    match stat_at(dir, name) {
        Ok(found) => Ok(Some(found)),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Write a store file atomically: a temp file `{temp_prefix}*` beside it, then a rename over
/// it, so a reader sees the old file or the new one and a killed process leaves only a temp
/// file (which `prune` removes by its prefix). Every file rewind writes into a store goes
/// through here, or through [`temp_file`] and [`persist`] when it is written as a stream, or,
/// for the index, through [`Rewrite`].
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

/// Open store file `path` with `options`, only if it is a regular file: never through a
/// symlink, never waiting on a FIFO (`O_NONBLOCK` where there are FIFOs, which changes nothing
/// for a regular file). Something else put at a store file's name is an error
/// (`InvalidData`), never a hang. Costs an `open` and an `fstat`.
pub(crate) fn open_store_file(
    path: &Path,
    options: &mut std::fs::OpenOptions,
) -> io::Result<std::fs::File> {
    open_store_file_and_stat(path, options).map(|(file, _)| file)
}

/// [`open_store_file`], and what its `fstat` found.
fn open_store_file_and_stat(
    path: &Path,
    options: &mut std::fs::OpenOptions,
) -> io::Result<(std::fs::File, std::fs::Metadata)> {
    let not_regular = || io::Error::new(io::ErrorKind::InvalidData, "not a regular file");
    let file = options_not_waiting(options).open(path).map_err(|e| {
        // (A FIFO opened for writing with no reader fails before it can be looked at.)
        match std::fs::symlink_metadata(path) {
            Ok(meta) if !meta.is_file() => not_regular(),
            _ => e,
        }
    })?;
    let meta = file.metadata()?;
    match meta.is_file() {
        true => Ok((file, meta)),
        false => Err(not_regular()),
    }
}

/// Open store file `path` to append to it, created if missing: as [`open_store_file`] opens
/// it, and only if it has no other name (the append would land in whatever file a hard link
/// put there names). For any file rewind appends to by name (the CLI's `hooks.log` in the
/// data directory, too). Costs an `open` and an `fstat`.
pub fn open_store_file_to_append(path: &Path) -> io::Result<std::fs::File> {
    let file = open_store_file(path, std::fs::OpenOptions::new().create(true).append(true))?;
    match link_count(&file.metadata()?) {
        1 => Ok(file),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "has other hard links",
        )),
    }
}

/// The content of store file `path` (see [`open_store_file`]). Costs the open and the reads.
pub(crate) fn read_store_file(path: &Path) -> io::Result<Vec<u8>> {
    let (file, meta) = open_store_file_and_stat(path, std::fs::OpenOptions::new().read(true))?;
    read_all(&file, meta.len())
}

/// A large store file rewritten often (the index), written over a spare copy kept beside it
/// (`{name}.spare`) that is then exchanged with it in one step: the blocks and cached pages of
/// the version before are reused, not freed and allocated again (renaming a new 18 MB index
/// over the old one took 3–9 ms here just freeing the old one, on a file system that trims
/// what it frees). A reader sees the old file or the new one. Without a spare that can be
/// opened, or without `RENAME_EXCHANGE`, it is a temp file renamed over the file.
pub(crate) struct Rewrite {
    path: PathBuf,
    target: RewriteTarget,
}

enum RewriteTarget {
    Spare(std::fs::File),
    Temp(tempfile::NamedTempFile),
}

impl Rewrite {
    /// Start rewriting store file `path` (a temp file, if one is needed, is named
    /// `{temp_prefix}*`).
    pub(crate) fn start(path: &Path, temp_prefix: &str) -> crate::error::Result<Rewrite> {
        let target = match open_spare(&Self::spare(path)) {
            Ok(file) => RewriteTarget::Spare(file),
            Err(_) => {
                let dir = path.parent().expect("a store file lives in a directory");
                RewriteTarget::Temp(temp_file(dir, temp_prefix, 0o600)?)
            }
        };
        Ok(Rewrite {
            path: path.to_owned(),
            target,
        })
    }

    /// Start writing store file `path` and its spare back to the disk, without waiting (see
    /// [`start_write_back`]); a copy that cannot be opened is left alone. Costs two `open`s and
    /// submitting the writes.
    pub(crate) fn start_write_back(path: &Path) {
        for path in [path.to_owned(), Self::spare(path)] {
            let file = open_store_file(&path, std::fs::OpenOptions::new().read(true));
            if let Err(e) = file.and_then(|file| start_write_back(&file)) {
                tracing::debug!("starting the write-back of {}: {e}", path.display());
            }
        }
    }

    fn spare(path: &Path) -> PathBuf {
        let mut name = path.file_name().expect("a file").to_owned();
        name.push(".spare");
        path.with_file_name(name)
    }

    /// Append `data` to the new version.
    pub(crate) fn write_all(&mut self, data: &[u8]) -> crate::error::Result<()> {
        let (written, at) = match &mut self.target {
            RewriteTarget::Spare(file) => (file.write_all(data), Self::spare(&self.path)),
            RewriteTarget::Temp(temp) => (temp.write_all(data), temp.path().to_owned()),
        };
        written.map_err(|e| crate::error::Error::io("writing", at, e))
    }

    /// Put the new version in place. Costs a `ftruncate` and a rename.
    pub(crate) fn finish(self) -> crate::error::Result<()> {
        let path = self.path;
        let error = |e| crate::error::Error::io("writing", &path, e);
        match self.target {
            RewriteTarget::Temp(temp) => persist(temp, &path),
            RewriteTarget::Spare(mut file) => {
                let end = io::Seek::stream_position(&mut file).map_err(error)?;
                file.set_len(end).map_err(error)?;
                drop(file);
                let spare = Self::spare(&path);
                let dir = path.parent().expect("a store file lives in a directory");
                let names = (spare.file_name(), path.file_name());
                let (Some(a), Some(b)) = names else {
                    unreachable!("both are file names");
                };
                let exchanged = open_path(dir).and_then(|dir| {
                    ProjectRoot::exchange_in(&dir, a.as_encoded_bytes(), b.as_encoded_bytes())
                });
                match exchanged {
                    Ok(()) => Ok(()),
                    // No file there yet, or no way to exchange: the spare moves over it.
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::NotFound | io::ErrorKind::Unsupported
                        ) =>
                    {
                        std::fs::rename(&spare, &path).map_err(error)
                    }
                    Err(e) => Err(error(e)),
                }
            }
        }
    }
}

/// A temp file `{prefix}*` in `dir` with permissions `mode` (where the platform has mode
/// bits), for [`persist`] to move into place.
pub(crate) fn temp_file(
    dir: &Path,
    prefix: &str,
    mode: u32,
) -> crate::error::Result<tempfile::NamedTempFile> {
    let mut builder = tempfile::Builder::new();
    builder.prefix(prefix);
    if let Some(permissions) = permissions(mode) {
        builder.permissions(permissions);
    }
    builder
        .tempfile_in(dir)
        .map_err(|e| crate::error::Error::io("creating a temp file in", dir, e))
}

/// Under an address-space limit (`ulimit -v`), keep glibc's allocator to one arena for all
/// threads; call it first in `main`, before any thread starts. glibc reserves 64 MiB of
/// address space for each thread's arena, which the limit counts: with a few threads, a limit
/// of a few hundred MiB ran out with most of it unused, and an allocation failed (a zlib-rs
/// assertion, exit 101, or an abort). Measured on a one-file `track`: failures at 80 and
/// 145 MiB with glibc's default, none from 32 MiB to 1.2 GiB with one arena. Without a limit,
/// or with another allocator, it does nothing. The `rewind` binary calls it.
pub fn one_malloc_arena_under_an_address_space_limit() {
    if memory_limits()
        .first()
        .is_some_and(|(_, limit)| limit.is_some())
    {
        one_malloc_arena();
    }
}

/// How many hard links the file `meta` describes has (1 where the platform does not tell):
/// `rewind hooks install` rewrites a settings file with other links in place, so that the
/// links stay one file.
pub fn hard_links(meta: &std::fs::Metadata) -> u64 {
    links(meta)
}

/// Set the permission bits of `path` to `mode` (nothing where the platform has none).
pub(crate) fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    match permissions(mode) {
        Some(permissions) => std::fs::set_permissions(path, permissions),
        None => Ok(()),
    }
}

/// Rename a complete temp file over `path` (an identical object already there is fine).
pub(crate) fn persist(temp: tempfile::NamedTempFile, path: &Path) -> crate::error::Result<()> {
    temp.persist(path)
        .map(drop)
        .map_err(|e| crate::error::Error::io("writing", path, e.error))
}

/// What happened, as far as a snapshot cares. (Made only where there is inotify.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) enum WatchEvent<'a> {
    /// Something changed in watched directory `wd`: `name` (an entry of it; `is_dir` when the
    /// entry is a directory, `moved` when it came, went or was made or removed), or the directory
    /// itself (`name` is `None`: its permissions, or it moved or was deleted).
    Changed {
        wd: i32,
        name: Option<&'a [u8]>,
        is_dir: bool,
        moved: bool,
        /// The entry was made here (not moved in), or removed (not moved out).
        created: bool,
        deleted: bool,
        /// The entry was renamed away from here, or to here (over what stood there), and the
        /// number the two halves of one rename share.
        moved_from: bool,
        moved_to: bool,
        cookie: u32,
    },
    /// The watch on `wd` is gone (its directory was deleted, or its file system unmounted).
    Gone { wd: i32 },
    /// The kernel's queue overflowed: events were lost.
    Overflow,
}

/// What a stat of `path` (following symlinks) says of its size and times, as bytes to
/// compare: empty when there is nothing there. Costs one `stat`.
pub(crate) fn stat_path(path: &Path) -> Vec<u8> {
    let Ok(meta) = std::fs::metadata(path) else {
        return Vec::new();
    };
    let time = |t: io::Result<std::time::SystemTime>| {
        t.ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos())
    };
    let mut bytes = Vec::with_capacity(48);
    bytes.extend_from_slice(&time(meta.modified()).to_le_bytes());
    bytes.extend_from_slice(&meta.len().to_le_bytes());
    let (secs, nanos) = changed_at(path).unwrap_or_default();
    bytes.extend_from_slice(&secs.to_le_bytes());
    bytes.extend_from_slice(&nanos.to_le_bytes());
    bytes
}

/// The mounts that decide what `project` (a canonical path) holds: the lines of
/// `/proc/self/mountinfo` whose mount point is the project, inside it, or above it. A mount made
/// or removed there changes what a path names without an event. Empty where there is no such
/// table. Costs one read of the table.
pub(crate) fn mounts_of(project: &Path) -> Vec<u8> {
    let Ok(table) = std::fs::read("/proc/self/mountinfo") else {
        return Vec::new();
    };
    let escaped = escaped_for_mountinfo(project);
    let within = |a: &[u8], b: &[u8]| {
        b.starts_with(a) && (a.len() == b.len() || a == b"/" || b.get(a.len()) == Some(&b'/'))
    };
    let mut relevant = Vec::new();
    for line in table.split(|&b| b == b'\n') {
        let Some(point) = mount_point(line) else {
            continue;
        };
        if within(point, &escaped) || within(&escaped, point) {
            relevant.extend_from_slice(line);
            relevant.push(b'\n');
        }
    }
    relevant
}

/// The mount points strictly inside `project` among `mounts` (what [`mounts_of`] gave for it),
/// relative to it. Costs a pass over `mounts`.
pub(crate) fn mount_points_inside(project: &Path, mounts: &[u8]) -> Vec<Vec<u8>> {
    let mut inside = escaped_for_mountinfo(project);
    if inside.last() != Some(&b'/') {
        inside.push(b'/');
    }
    let points = mounts.split(|&b| b == b'\n').filter_map(mount_point);
    let relative = points.filter_map(|point| point.strip_prefix(inside.as_slice()));
    relative
        .filter(|rel| !rel.is_empty())
        .map(unescaped_from_mountinfo)
        .collect()
}

/// The mount point of a line of `/proc/self/mountinfo`: "36 35 98:0 /mnt1 /mnt/parent
/// rw,noatime master:1 - ext3 /dev/root rw" has it fifth, escaped.
fn mount_point(line: &[u8]) -> Option<&[u8]> {
    line.split(|&b| b == b' ').nth(4)
}

/// `path` as the table writes it: space, tab, newline and backslash as `\ooo` (octal).
fn escaped_for_mountinfo(path: &Path) -> Vec<u8> {
    let mut escaped = Vec::new();
    for &b in path.as_os_str().as_encoded_bytes() {
        match b {
            b' ' | b'\t' | b'\n' | b'\\' => {
                escaped.extend_from_slice(format!("\\{b:03o}").as_bytes())
            }
            b => escaped.push(b),
        }
    }
    escaped
}

/// A path from the table, its `\ooo` escapes decoded.
fn unescaped_from_mountinfo(escaped: &[u8]) -> Vec<u8> {
    let mut path = Vec::with_capacity(escaped.len());
    let mut at = 0;
    while at < escaped.len() {
        let octal = escaped.get(at + 1..at + 4).filter(|_| escaped[at] == b'\\');
        let byte = octal
            .and_then(|digits| std::str::from_utf8(digits).ok())
            .and_then(|digits| u8::from_str_radix(digits, 8).ok());
        match byte {
            Some(byte) => {
                path.push(byte);
                at += 4;
            }
            None => {
                path.push(escaped[at]);
                at += 1;
            }
        }
    }
    path
}

/// No file-system watcher where the kernel offers no inotify: [`Inotify::new`] says so, and
/// snapshots walk the whole project.
#[cfg(not(target_os = "linux"))]
mod no_inotify {
    use std::io;

    use super::{DirRef, WatchEvent as Event};

    pub(crate) struct Inotify(std::convert::Infallible);

    impl Inotify {
        pub(crate) fn new() -> io::Result<Inotify> {
            Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "no file-system watcher on this system (rewind watches through Linux's inotify)",
            ))
        }

        pub(crate) fn watch(&self, _dir: DirRef<'_>) -> io::Result<i32> {
            match self.0 {}
        }

        pub(crate) fn unwatch(&self, _wd: i32) {
            match self.0 {}
        }

        pub(crate) fn drain(&self, _each: impl FnMut(Event<'_>)) -> io::Result<()> {
            match self.0 {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// Every path a run opens, writes or deletes is a project path, whatever a tree in the
    /// store names: `..`, `.`, an empty name or a leading `/` never reaches the file system.
    #[test]
    fn only_paths_inside_the_project_are_opened() {
        for good in ["a", "a/b", ".a/..b/c..", "a/.git"] {
            assert!(
                super::relative_path(good.as_bytes(), false).is_ok(),
                "{good}"
            );
        }
        assert!(super::relative_path(b"", true).is_ok());
        for bad in ["", "..", ".", "a/..", "../a", "a/./b", "/a", "a/", "a//b"] {
            assert!(
                super::relative_path(bad.as_bytes(), false).is_err(),
                "{bad:?}"
            );
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("p")).unwrap();
        let root = super::ProjectRoot::open(&dir.path().join("p")).unwrap();
        let outside = |e: std::io::Error| e.kind() == std::io::ErrorKind::InvalidInput;
        assert!(root.open_dir(b"..", None).is_err_and(outside));
        assert!(root.lstat(b"../p".into()).is_err_and(outside));
        let dirs = super::OpenDirs::new(&root, 8);
        assert!(dirs.get(b"a/../..", None).is_err_and(outside));
        assert!(dirs.lstat(b"/etc/passwd".into()).is_err_and(outside));
    }

    /// Only mount points strictly inside the project count, relative to it and unescaped; a
    /// sibling sharing its name's start (`/pq`) is not inside `/p`.
    #[test]
    fn mount_points_inside_a_project_are_relative_and_unescaped() {
        let mounts: &[u8] = b"36 35 98:0 / /p/a\\040b\\134c rw - ext4 /dev/x rw\n\
            37 35 98:0 / /p rw - ext4 /dev/x rw\n\
            38 35 98:0 / /pq/c rw - ext4 /dev/x rw\n\
            39 35 98:0 / /p/d/e rw - tmpfs none rw\n";
        let inside = super::mount_points_inside(Path::new("/p"), mounts);
        assert_eq!(inside, vec![b"a b\\c".to_vec(), b"d/e".to_vec()]);
    }

    /// An inotify instance watching `path` (a file), and whether it has reported the file's
    /// inode freed (`IN_IGNORED`: the kernel drops a watch when its inode goes) within
    /// `deadline`.
    #[cfg(target_os = "linux")]
    mod freed {
        use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
        use std::mem::MaybeUninit;
        use std::os::fd::{AsFd, OwnedFd};
        use std::time::{Duration, Instant};

        pub(super) fn watch(path: &std::path::Path) -> OwnedFd {
            let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).unwrap();
            inotify::add_watch(&fd, path, WatchFlags::CLOSE_NOWRITE).unwrap();
            fd
        }

        pub(super) fn within(fd: &OwnedFd, deadline: Duration) -> bool {
            let start = Instant::now();
            let mut buf = vec![MaybeUninit::<u8>::uninit(); 4096];
            loop {
                let mut reader = inotify::Reader::new(fd.as_fd(), &mut buf);
                loop {
                    match reader.next() {
                        Ok(event) if event.events().contains(ReadFlags::IGNORED) => return true,
                        Ok(_) | Err(rustix::io::Errno::INTR) => continue,
                        Err(rustix::io::Errno::AGAIN) => break,
                        Err(e) => panic!("reading inotify: {e}"),
                    }
                }
                if start.elapsed() > deadline {
                    return false;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }

    /// A removed file, open read-only, and a watch on it ([`freed`]).
    #[cfg(target_os = "linux")]
    fn removed_file(dir: &Path) -> (std::fs::File, std::os::fd::OwnedFd) {
        let path = dir.join("taken-out");
        std::fs::write(&path, vec![7u8; 1 << 20]).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let watch = freed::watch(&path);
        std::fs::remove_file(&path).unwrap();
        (file, watch)
    }

    /// The kernel takes a removed file's last close (the io_uring table's reference, dropped
    /// on its workers): after the call, the file is freed, and not held for ever.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_removed_file_closed_in_the_background_is_freed() {
        let dir = tempfile::tempdir().unwrap();
        let (file, watch) = removed_file(dir.path());
        assert!(
            super::close_in_the_background(vec![file]).is_ok(),
            "io_uring refused here (a seccomp filter, or kernel.io_uring_disabled): \
             a restore's last closes would be waited for"
        );
        assert!(freed::within(&watch, std::time::Duration::from_secs(30)));
    }

    /// The closing job a restore starts closes what it is given, one way or the other: the
    /// file is freed after the job, and not held for ever.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_removed_file_given_to_the_closing_job_is_freed() {
        let dir = tempfile::tempdir().unwrap();
        let (file, watch) = removed_file(dir.path());
        let closed = super::Closing::job(vec![file], Vec::new());
        closed.recv().unwrap();
        assert!(freed::within(&watch, std::time::Duration::from_secs(30)));
    }

    /// The pages of `file` that are dirty (`cachestat`, Linux 6.5).
    #[cfg(target_os = "linux")]
    fn dirty_pages(file: &std::fs::File) -> u64 {
        use std::os::fd::AsRawFd;
        // The call's number, the same on every architecture (libc does not name it yet).
        const SYS_CACHESTAT: libc::c_long = 451;
        let range = [0u64; 2]; // from offset 0 to the end
        let mut stat = [0u64; 5]; // cache, dirty, writeback, evicted, recently evicted
                                  // SAFETY: both pointers are to arrays of the layout the kernel reads and writes.
        let done = unsafe { libc::syscall(SYS_CACHESTAT, file.as_raw_fd(), &range, &mut stat, 0) };
        assert_eq!(done, 0, "cachestat: {}", std::io::Error::last_os_error());
        stat[1]
    }

    /// A restore starts the write-back of the index as it begins, so that its sync does not
    /// wait for it: the file's dirty pages are all sent to the disk (none left dirty). (On a
    /// disk: the file is made beside the test binary, in the target directory, not in a temp
    /// directory that may be in memory.)
    #[cfg(target_os = "linux")]
    #[test]
    fn starting_the_write_back_leaves_no_page_dirty() {
        use std::io::Write;
        let beside = std::env::current_exe().unwrap();
        let dir = tempfile::tempdir_in(beside.parent().unwrap()).unwrap();
        let path = dir.path().join("index");
        let mut file = std::fs::File::create(&path).unwrap();
        file.write_all(&vec![7u8; 4 << 20]).unwrap();
        assert!(dirty_pages(&file) > 0, "written and not yet written back");
        super::Rewrite::start_write_back(&path);
        assert_eq!(dirty_pages(&file), 0);
        assert!(super::start_write_back(&file).is_ok());
    }
}
