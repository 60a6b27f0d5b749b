//! The store's lock: one OS `flock` on `rewind.lock`, held while a call changes the store, and
//! the interrupt (cancel flag and deadline) that bounds the wait for it.

use std::fs;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::store::{Progress, Store};

impl Store {
    /// Whether another process holds the store's lock now (a probe: takes and drops it).
    pub(crate) fn is_locked(&self) -> Result<bool> {
        let path = self.git_dir.join("rewind.lock");
        let file = match crate::fs::open_store_file(&path, fs::OpenOptions::new().read(true)) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(Error::io("opening lock file", &path, e)),
        };
        match file.try_lock() {
            Ok(()) => Ok(false),
            Err(fs::TryLockError::WouldBlock) => Ok(true),
            Err(fs::TryLockError::Error(e)) => Err(Error::io("probing lock", &path, e)),
        }
    }

    /// Take the store's cross-process lock, waiting for it at most the store's lock wait (or
    /// the current call's deadline, see [`Call`]); it is released when the guard drops or
    /// the process dies. Costs one `open` and a `flock` per 10 ms of waiting.
    pub(crate) fn lock(&self) -> Result<Locked<'_>> {
        let path = self.git_dir.join("rewind.lock");
        let file = open_lock_file(&path).map_err(|e| Error::io("opening lock file", &path, e))?;
        let start = Instant::now();
        let current = Call::current();
        let progress = current
            .as_ref()
            .map_or_else(Default::default, |(call, _)| call.progress.clone());
        let call = current.and_then(|(call, past)| (!past).then_some(call));
        let deadline = match &call {
            Some(Call {
                deadline: Some(deadline),
                ..
            }) => *deadline,
            _ => deadline_in(start, self.lock_wait),
        };
        loop {
            if let Some(call) = &call {
                call.check_cancelled()?;
            }
            match file.try_lock() {
                Ok(()) => break,
                Err(fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(LOCK_POLL.min(deadline - Instant::now()));
                }
                Err(fs::TryLockError::WouldBlock) => {
                    return Err(Error::Busy {
                        store: self.git_dir.clone(),
                        holder: lock_holder(&file),
                        waited: start.elapsed(),
                    })
                }
                Err(fs::TryLockError::Error(e)) => return Err(Error::io("locking", &path, e)),
            }
        }
        if let Some(call) = &call {
            call.point_of_no_return()?;
        }
        // Another process may have pruned while we waited: see its packs before writing, and
        // read through a view that does not know the packs it deleted.
        if self.objects.refresh() {
            self.reopen_repo()?;
        }
        Ok(Locked {
            store: self,
            _lock: file,
            progress,
        })
    }
}

impl Store {
    /// The store's lock, if no other process holds it for longer than `wait`: a lock for a
    /// short step that can be left to the next command ([`Store::take_notices`]). Costs an
    /// `open` and a `flock` per 10 ms of waiting.
    pub(crate) fn try_lock_for(&self, wait: Duration) -> Option<fs::File> {
        let file = open_lock_file(&self.git_dir.join("rewind.lock")).ok()?;
        let deadline = deadline_in(Instant::now(), wait);
        loop {
            match file.try_lock() {
                Ok(()) => return Some(file),
                Err(fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(LOCK_POLL.min(deadline - Instant::now()));
                }
                Err(_) => return None,
            }
        }
    }
}

/// Open (or create) the lock file at `path`. Costs an `open` and an `fstat`.
fn open_lock_file(path: &std::path::Path) -> std::io::Result<fs::File> {
    let mut options = fs::OpenOptions::new();
    options.create(true).truncate(false).write(true);
    crate::fs::open_store_file(path, &mut options)
}

/// How often a waiting [`Store::lock`] tries the lock again (and looks for a cancel).
const LOCK_POLL: Duration = Duration::from_millis(10);

/// The moment `wait` after `start`; a wait beyond a year (`--wait 18446744073709551615s`) is a
/// year, so that the sum cannot overflow.
pub(crate) fn deadline_in(start: Instant, wait: Duration) -> Instant {
    start + wait.min(Duration::from_secs(365 * 24 * 3600))
}

/// Who holds the flock on `file`: only Linux tells (see the Linux version).
#[cfg(not(target_os = "linux"))]
fn lock_holder(_file: &fs::File) -> String {
    "another process".to_string()
}

/// Who holds the flock on `file`, as Linux tells (`/proc/locks` names the pid, and
/// `/proc/<pid>/cmdline` its command), else "another process". Costs reading `/proc/locks`.
#[cfg(target_os = "linux")]
fn lock_holder(file: &fs::File) -> String {
    use std::os::unix::fs::MetadataExt;
    let unknown = || "another process".to_string();
    let Ok(meta) = file.metadata() else {
        return unknown();
    };
    let Ok(locks) = fs::read_to_string("/proc/locks") else {
        return unknown();
    };
    // "1: FLOCK  ADVISORY  WRITE 14260 fe:00:10011026 0 EOF"; waiters' lines have a "->".
    let device = format!(
        "{:02x}:{:02x}",
        rustix::fs::major(meta.dev()),
        rustix::fs::minor(meta.dev())
    );
    let holders: Vec<(&str, &str)> = locks
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            match fields[..] {
                [_, "FLOCK", _, _, pid, file_id, ..] => Some((pid, file_id)),
                _ => None,
            }
        })
        .filter_map(|(pid, file_id)| {
            let (dev, inode) = file_id.rsplit_once(':')?;
            (inode == meta.ino().to_string()).then_some((pid, dev))
        })
        .collect();
    // On overlay file systems the lock's device is the underlying one: fall back to the inode.
    let Some(&(pid, _)) = holders
        .iter()
        .find(|(_, dev)| *dev == device)
        .or(holders.first())
    else {
        return unknown();
    };
    // Quoted as git quotes paths: a command line can hold newlines and escape sequences.
    let command = fs::read(format!("/proc/{pid}/cmdline"))
        .ok()
        .filter(|c| !c.is_empty())
        .map(|c| {
            let args = c.strip_suffix(b"\0").unwrap_or(&c);
            args.iter()
                .map(|&b| if b == 0 { b' ' } else { b })
                .collect()
        })
        .or_else(|| fs::read(format!("/proc/{pid}/comm")).ok())
        .map(|c: Vec<u8>| crate::paths::quote_path(&c[..c.trim_ascii_end().len().min(200)]));
    match command {
        Some(command) => format!("process {pid} ({command})"),
        None => format!("process {pid}"),
    }
}

/// One call's progress sink, cancel flag and deadline, as gix hands an operation its progress
/// and an interrupt flag. Run the call inside [`Call::run`]: every operation of the library
/// that starts on this thread inside `f` reports to this progress and stops at its safe points
/// when the flag is set or the deadline passes. The safe points are the wait for the store's
/// lock and the moment the call takes it, before it writes anything; past that, the call
/// completes. Calls on other threads (or outside `run`) are not affected, so concurrent
/// operations on one `Store` each have their own progress.
///
/// ```no_run
/// use std::sync::{atomic::AtomicBool, Arc};
/// # let store = rewind::Store::open(".".as_ref(), &rewind::OpenOptions::new("/tmp/rewind"))?;
/// let progress = Arc::new(rewind::Progress::default());
/// let cancel = Arc::new(AtomicBool::new(false)); // set it from another thread to cancel
/// let call = rewind::Call::new().progress(progress.clone()).interrupt(cancel.clone());
/// // (another thread shows `progress.get()` while this runs)
/// let snapshot = call.run(|| store.track(&Default::default()))?;
/// # Ok::<(), rewind::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct Call {
    interrupt: Arc<AtomicBool>,
    deadline: Option<Instant>,
    progress: Arc<Progress>,
}

thread_local! {
    /// This thread's current call, and whether it passed its point of no return.
    static CALL: std::cell::RefCell<Option<(Call, bool)>> = const { std::cell::RefCell::new(None) };
}

impl Call {
    /// A call with its own progress, that nothing interrupts.
    pub fn new() -> Call {
        Call::default()
    }

    /// Stop at the next safe point once `flag` is set (the error is [`Error::Cancelled`]).
    pub fn interrupt(mut self, flag: Arc<AtomicBool>) -> Call {
        self.interrupt = flag;
        self
    }

    /// Wait for the store's lock until `deadline` at most (instead of the store's lock wait),
    /// and stop if the lock came later than that ([`Error::Cancelled`]).
    pub fn deadline(mut self, deadline: Instant) -> Call {
        self.deadline = Some(deadline);
        self
    }

    /// Report to `progress`.
    pub fn progress(mut self, progress: Arc<Progress>) -> Call {
        self.progress = progress;
        self
    }

    /// Run `f` as this call (on this thread; the previous call, if any, is restored after).
    pub fn run<T>(&self, f: impl FnOnce() -> T) -> T {
        let outer = CALL.replace(Some((self.clone(), false)));
        let result = f();
        CALL.set(outer);
        result
    }

    /// This thread's current call, and whether it can still be interrupted.
    fn current() -> Option<(Call, bool)> {
        CALL.with_borrow(Clone::clone)
    }

    /// Fail if the call was cancelled.
    fn check_cancelled(&self) -> Result<()> {
        match self.interrupt.load(Ordering::Relaxed) {
            true => Err(Error::Cancelled {
                reason: "by the caller",
            }),
            false => Ok(()),
        }
    }

    /// The last safe point: fail if the call was cancelled or got the lock later than its
    /// deadline by more than one poll (it waited in a queue meanwhile); else the call can no
    /// longer be interrupted. The poll's slack lets a call with no time to wait (`timeout_ms:
    /// 0`) run when the lock is free.
    fn point_of_no_return(&self) -> Result<()> {
        self.check_cancelled()?;
        if self
            .deadline
            .is_some_and(|deadline| Instant::now() > deadline + LOCK_POLL)
        {
            return Err(Error::Cancelled {
                reason: "its timeout ran out",
            });
        }
        CALL.with_borrow_mut(|call| {
            if let Some((_, past)) = call {
                *past = true;
            }
        });
        Ok(())
    }
}

/// The store with its lock held, as jj's `LockedLocalWorkingCopy`: only through it can a call
/// write (objects, refs, the stat cache, the project's files), so the types say which code runs
/// under the lock. Reads go through [`Store`], which it derefs to. The lock (an OS `flock`: a
/// killed holder never blocks anyone) is released when it drops.
pub(crate) struct Locked<'s> {
    store: &'s Store,
    _lock: fs::File,
    progress: Arc<Progress>,
}

impl Locked<'_> {
    /// Where this call reports its progress.
    pub(crate) fn progress(&self) -> &Progress {
        &self.progress
    }
}

impl std::ops::Deref for Locked<'_> {
    type Target = Store;

    fn deref(&self) -> &Store {
        self.store
    }
}
