//! The store's lock: one OS `flock` on `rewind.lock`, held while a call changes the store, and
//! the interrupt (cancel flag and deadline) that bounds the wait for it.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::store::Store;

impl Store {
    /// Whether another process holds the store's lock now (a probe: takes and drops it).
    pub(crate) fn is_locked(&self) -> Result<bool> {
        let path = self.git_dir.join("rewind.lock");
        let file = match fs::File::open(&path) {
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
    /// the current call's deadline, see [`Interrupt`]); it is released when the guard drops or
    /// the process dies. Costs one `open` and a `flock` per 10 ms of waiting.
    pub(crate) fn lock(&self) -> Result<Locked<'_>> {
        let path = self.git_dir.join("rewind.lock");
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io("opening lock file", &path, e))?;
        let start = Instant::now();
        let call = Interrupt::current();
        let deadline = match &call {
            Some(Interrupt {
                deadline: Some(deadline),
                ..
            }) => *deadline,
            _ => deadline_in(self.lock_wait),
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
        // Another process may have pruned while we waited: see its packs before writing.
        self.objects.refresh();
        Ok(Locked {
            store: self,
            _lock: file,
        })
    }
}

/// How often a waiting [`Store::lock`] tries the lock again (and looks for a cancel).
const LOCK_POLL: Duration = Duration::from_millis(10);

/// The moment `wait` from now; a wait beyond a year (`--wait 18446744073709551615s`) is a year,
/// so that the sum cannot overflow.
pub(crate) fn deadline_in(wait: Duration) -> Instant {
    Instant::now() + wait.min(Duration::from_secs(365 * 24 * 3600))
}

/// Who holds the flock on `file`, as the OS tells (Linux: `/proc/locks` names the pid, and
/// `/proc/<pid>/cmdline` its command), else "another process". Costs reading `/proc/locks`.
fn lock_holder(file: &fs::File) -> String {
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

/// What stops a call at its safe points: a cancel flag and a deadline, set for the calls of
/// one thread (`serve` sets one per request). The safe points are the wait for the store's
/// lock and the moment the call first takes it, before it writes anything; past that, the call
/// completes (a later lock wait of the same call is bounded by the store's lock wait alone).
#[derive(Clone, Debug, Default)]
pub(crate) struct Interrupt {
    pub(crate) cancel: Arc<AtomicBool>,
    /// Bounds the lock wait (instead of the store's) and cancels the call when it passes.
    pub(crate) deadline: Option<Instant>,
}

thread_local! {
    /// This thread's current call, until it passes its point of no return.
    static CALL: std::cell::RefCell<Option<Interrupt>> = const { std::cell::RefCell::new(None) };
}

impl Interrupt {
    /// Run `f` as a call that `self` can interrupt.
    #[cfg(feature = "serve")]
    pub(crate) fn run<T>(self, f: impl FnOnce() -> T) -> T {
        CALL.set(Some(self));
        let result = f();
        CALL.set(None);
        result
    }

    /// The current call's interrupt, if it can still be interrupted.
    fn current() -> Option<Interrupt> {
        CALL.with_borrow(Clone::clone)
    }

    /// Fail if the current call was cancelled.
    fn check_cancelled(&self) -> Result<()> {
        match self.cancel.load(Ordering::Relaxed) {
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
        CALL.set(None);
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
}

impl std::ops::Deref for Locked<'_> {
    type Target = Store;

    fn deref(&self) -> &Store {
        self.store
    }
}
