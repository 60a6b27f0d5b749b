//! The shadow store: one private bare git repository per project, its config, its lock and its
//! object writer.
//!
//! Layout of a store (a plain bare repository that stock git can read):
//! ```text
//! <data dir>/<project name>-<16 hex of sha1(canonical project path)>.git/
//!     config        core.bare=true, core.autocrlf=false, gc.auto=0, core.logAllRefUpdates=always,
//!                   rewind.worktree=<canonical project path>
//!     index         the stat cache: a real git index of the last snapshot, with a cache-tree
//!     objects/      loose objects, written as git writes them (zlib level 1, temp file + rename)
//!     rewind.lock   held with an OS lock (flock) while a command changes the store
//! ```
//!
//! The data directory and every store are private (mode 0700, whatever the umask): another user
//! could otherwise read the project's files, secrets included, through the store's objects.

use std::fs;

use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use std::time::Duration;

use chrono::{DateTime, Utc};
use gix::bstr::{BString, ByteSlice};

use crate::error::{Error, Result};
use objects::ObjectWriter;

mod journal;
pub(crate) use crate::id::SnapshotId;
pub(crate) use journal::is_own_temp;
pub(crate) use journal::{NotDone, Progress as JournalProgress};
mod delta;
mod lock;
pub(crate) mod objects;
pub(crate) mod pack;
pub(crate) mod pruned;
pub(crate) mod refs;
pub(crate) mod settings;
#[cfg(feature = "serve")]
pub(crate) use lock::deadline_in;
pub use lock::Call;
pub(crate) use lock::Locked;
pub(crate) use refs::{snapshot_record, RECORDS, SNAPSHOT_RECORDS};

/// Where stores live: `explicit`, else `$REWIND_DATA_DIR`, else `$XDG_DATA_HOME/rewind`, else
/// `~/.local/share/rewind`.
///
/// ```no_run
/// let dir = rewind::data_dir(None)?; // $REWIND_DATA_DIR, $XDG_DATA_HOME/rewind or ~/.local/share/rewind
/// let store = rewind::Store::open("/path/to/project".as_ref(), &rewind::OpenOptions::new(dir))?;
/// # Ok::<(), rewind::Error>(())
/// ```
pub fn data_dir(explicit: Option<&Path>) -> Result<PathBuf> {
    if let Some(dir) = explicit {
        return Ok(dir.to_owned());
    }
    let non_empty = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = non_empty("REWIND_DATA_DIR") {
        return Ok(dir.into());
    }
    if let Some(dir) = non_empty("XDG_DATA_HOME") {
        return Ok(PathBuf::from(dir).join("rewind"));
    }
    non_empty("HOME")
        .map(|home| PathBuf::from(home).join(".local/share/rewind"))
        .ok_or(Error::NoDataDir)
}

/// [`data_dir`], created private (0700) if it is not there yet, for whatever else keeps files
/// in it (`rewind hooks` keeps the settings it changed, which may hold secrets). Costs a
/// `stat`, plus a `readdir` when the directory is open to others.
pub fn private_data_dir(explicit: Option<&Path>) -> Result<PathBuf> {
    let dir = data_dir(explicit)?;
    prepare_data_dir(&dir)?;
    Ok(dir)
}

/// The store's directory name for a canonical project path: readable, and unique per path.
fn store_name(project: &Path) -> String {
    let bytes = project.as_os_str().as_encoded_bytes();
    let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
    hasher.update(bytes);
    let digest = hasher
        .try_finalize()
        .expect("sha1 of a path cannot collide-attack");
    let readable: String = project
        .file_name()
        .map(|name| name.as_encoded_bytes())
        .unwrap_or(b"root")
        .iter()
        .take(40)
        .map(|&b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'_' | b'-' => b as char,
            _ => '_',
        })
        .collect();
    format!("{readable}-{}.git", &digest.to_hex().to_string()[..16])
}

/// The settings a store is created with, and which `git config` can change afterwards.
const STORE_CONFIG: &[(&str, &str)] = &[
    ("core.bare", "true"),
    ("core.autocrlf", "false"),
    ("gc.auto", "0"),
    ("core.logAllRefUpdates", "always"),
    // `git diff` in the store prints what `rewind diff --no-renames` prints (and `git diff -M`
    // what `rewind diff` prints); restore's and undo's per-file patches never pair renames.
    ("diff.renames", "false"),
];

/// The file that marks a directory as rewind's own data (a data directory, a store): a
/// snapshot leaves such a directory out, and restore never writes into it.
pub(crate) const DATA_MARKER: &str = "rewind-data.tag";

/// The store file holding notices not yet taken (see [`Store::take_notices`]), one a line.
const NOTICES: &str = "rewind-notices";

/// The store file naming the tree of the last snapshot any process recorded of the project
/// (40 hex digits): a server's memo and the CLI's index each know only their own last one.
const LAST_SNAPSHOT: &str = "rewind-last-snapshot";

/// Default for `rewind.maxFileSize`: new files above it are left out of snapshots.
pub const DEFAULT_MAX_FILE_SIZE: u64 = 2 * 1024 * 1024;

/// How long a call that changes the store waits for another's lock by default: longer than
/// the longest lock holds seen (a first snapshot of a large project, a prune), shorter than
/// the ~60 s after which agent hooks are killed, so that a hook reports `busy` itself.
pub const DEFAULT_LOCK_WAIT: Duration = Duration::from_secs(30);

/// How [`Store::open`] opens a store: where stores live, and the options of this handle.
///
/// ```no_run
/// use std::time::Duration;
/// let options = rewind::OpenOptions::new(rewind::data_dir(None)?)
///     .lock_wait(Duration::from_secs(5))
///     .clock(rewind::Clock::fixed("2026-01-31T12:00:00Z".parse().unwrap()));
/// let store = rewind::Store::open("/path/to/project".as_ref(), &options)?;
/// # Ok::<(), rewind::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct OpenOptions {
    data_dir: PathBuf,
    allow_home: bool,
    lock_wait: Duration,
    clock: Clock,
}

impl OpenOptions {
    /// Stores under `data_dir` (see [`data_dir`] for the usual place), the home directory
    /// refused as a project, a lock wait of [`DEFAULT_LOCK_WAIT`], the system clock.
    pub fn new(data_dir: impl Into<PathBuf>) -> OpenOptions {
        OpenOptions {
            data_dir: data_dir.into(),
            allow_home: false,
            lock_wait: DEFAULT_LOCK_WAIT,
            clock: Clock::system(),
        }
    }

    /// Allow the home directory or `/` itself as the project (refused by default, as
    /// `broad_project`: snapshots of a whole home directory fill disks).
    pub fn allow_home(mut self, allow: bool) -> OpenOptions {
        self.allow_home = allow;
        self
    }

    /// How long a call that changes the store waits for the store's lock before failing with
    /// `busy` ([`Error::Busy`]); zero: not at all.
    pub fn lock_wait(mut self, wait: Duration) -> OpenOptions {
        self.lock_wait = wait;
        self
    }

    /// The time the store stamps on its records and expires them by.
    pub fn clock(mut self, clock: Clock) -> OpenOptions {
        self.clock = clock;
        self
    }

    /// Where stores live.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }
}

/// Where a store's time comes from: the system clock, or one a caller injects (a fixed time
/// in tests; `rewind` reads `REWIND_NOW`).
#[derive(Clone)]
pub struct Clock(Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>);

impl Clock {
    /// The system clock.
    pub fn system() -> Clock {
        Clock(Arc::new(Utc::now))
    }

    /// Always `time`.
    pub fn fixed(time: DateTime<Utc>) -> Clock {
        Clock(Arc::new(move || time))
    }

    /// The time `now` returns each time it is asked.
    pub fn new(now: impl Fn() -> DateTime<Utc> + Send + Sync + 'static) -> Clock {
        Clock(Arc::new(now))
    }

    /// Always the time `text` (RFC 3339, from 1970 on) names: what `rewind` does with
    /// `REWIND_NOW`.
    ///
    /// ```
    /// let clock = rewind::Clock::from_rfc3339("2026-01-31T12:00:00Z")?;
    /// assert_eq!(clock.now()?.timestamp(), 1_769_860_800);
    /// assert!(rewind::Clock::from_rfc3339("yesterday").is_err());
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn from_rfc3339(text: &str) -> Result<Clock> {
        DateTime::parse_from_rfc3339(text)
            .ok()
            .map(|t| t.with_timezone(&Utc))
            .filter(|t| t.timestamp() >= 0)
            .map(Clock::fixed)
            .ok_or_else(|| Error::BadClock {
                value: text.to_owned(),
            })
    }

    /// The time now; a time before 1970 is [`Error::BadClock`] (git's `fsck --strict`
    /// rejects such commits).
    pub fn now(&self) -> Result<DateTime<Utc>> {
        let now = (self.0)();
        match now.timestamp() >= 0 {
            true => Ok(now),
            false => Err(Error::BadClock {
                value: now.to_rfc3339(),
            }),
        }
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Clock({})", (self.0)().to_rfc3339())
    }
}

/// Put the data marker in `dir` (a data directory or a store), so that a snapshot of a project
/// that contains it leaves it out and restore never writes into it. Costs one `lstat` when it
/// is there. Anything else at its name (a FIFO, a symlink, a directory) is replaced through a temp file
/// and a rename, never opened or written through.
pub(crate) fn mark_as_data(dir: &Path) -> Result<()> {
    let marker = dir.join(DATA_MARKER);
    if fs::symlink_metadata(&marker).is_ok_and(|meta| meta.is_file()) {
        return Ok(());
    }
    let text =
        "rewind's data: snapshots leave this directory out, and restores never write into it.\n";
    crate::fs::write_atomically(&marker, ".rewind-data.tag.tmp", text.as_bytes())
}

/// An open shadow store for one project.
pub struct Store {
    project: PathBuf,
    git_dir: PathBuf,
    /// gix's view of the store, opened again when the packs changed (see [`Store::lock`]).
    repo: std::sync::RwLock<gix::ThreadSafeRepository>,
    objects: ObjectWriter,
    set_aside: Option<PathBuf>,
    lock_wait: Duration,
    clock: Clock,
    /// The file-system watcher, once `Store::watch` started it: a `snapshot::Watcher`, held
    /// here without its type, since the store sits below the snapshot module.
    pub(crate) watcher: std::sync::Mutex<Option<Box<dyn std::any::Any + Send>>>,
    /// The closing of the files the last restore took out of the project, after it answered.
    pub(crate) closing: crate::fs::Closing,
    /// What rewind did or found on its own that the user should hear of (see
    /// [`Store::take_notices`]).
    pub(crate) notices: std::sync::Mutex<Vec<String>>,
    /// The last snapshot a dry run took without recording it, with the lines its record would
    /// get: [`Store::visibility`] reads them for that tree beside its record, so that a dry
    /// run sees what its real run (which records the snapshot first) sees.
    pub(crate) peeked: std::sync::Mutex<Option<(gix::ObjectId, String)>>,
}

/// Notices taken from the store ([`Store::take_notices`]), to be said and then marked
/// [`told`](Notices::told). Dropped untold, they stay for the next taker.
pub struct Notices<'s> {
    store: &'s Store,
    lines: Vec<String>,
    /// How many of `lines`, the first ones, were kept in memory (the store's file could not
    /// be written).
    in_memory: usize,
    /// The store files `lines` were read from, with what was read from each: removed once told
    /// (what was added since stays).
    read: Vec<(PathBuf, Vec<u8>)>,
    told: bool,
}

impl Notices<'_> {
    /// The notices, one sentence each.
    pub fn lines(&self) -> &[String] {
        &self.lines
    }

    /// Say each notice with `say` (whether it was said), and mark them [`told`](Self::told)
    /// once every one was: a notice that could not be said stays in the store.
    pub fn say_each(self, mut say: impl FnMut(&str) -> bool) {
        if self.lines.iter().all(|notice| say(notice)) {
            self.told();
        }
    }

    /// Say that the notices were told: they are removed from the store, under its lock (if
    /// another process holds it longer than [`NOTICES_LOCK_WAIT`], they stay, to be told
    /// again). Notices added since the take stay. Costs a `flock`, and a read and an `unlink`
    /// per file read.
    pub fn told(mut self) {
        self.told = true;
        if self.read.is_empty() {
            return;
        }
        let Some(_lock) = self.store.try_lock_for(NOTICES_LOCK_WAIT) else {
            return;
        };
        for (path, taken) in &self.read {
            let Ok(now) = crate::fs::read_store_file(path) else {
                continue;
            };
            match now.strip_prefix(&taken[..]) {
                Some([]) => {
                    let _ = fs::remove_file(path);
                }
                Some(added) => {
                    let _ = crate::fs::write_atomically(path, "rewind-notices.tmp", added);
                }
                // Told and removed by another process meanwhile.
                None => {}
            }
        }
    }
}

impl Drop for Notices<'_> {
    fn drop(&mut self) {
        if !self.told {
            let kept = self.lines.drain(..self.in_memory);
            let mut memory = self.store.notices.lock().unwrap_or_else(|p| p.into_inner());
            memory.splice(0..0, kept);
        }
    }
}

/// How long [`Store::take_notices`] waits for another process's lock before leaving the
/// notices in the store to the next taker.
pub const NOTICES_LOCK_WAIT: Duration = Duration::from_millis(100);

/// A notice as one line of `rewind-notices`: `\` and newlines escaped.
fn escape_notice(notice: &str) -> String {
    notice.replace('\\', "\\\\").replace('\n', "\\n")
}

/// The notice that [`escape_notice`] made `line` of.
fn unescape_notice(line: &[u8]) -> String {
    let line = String::from_utf8_lossy(line);
    let mut notice = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        notice.push(match c {
            '\\' => match chars.next() {
                Some('n') => '\n',
                Some(escaped) => escaped,
                None => '\\',
            },
            c => c,
        });
    }
    notice
}

/// Counters that long operations (a first snapshot, a large restore, prune) update, for a
/// progress display; the library itself never prints. Give one to a [`Call`]; read it from
/// another thread while the call runs.
#[derive(Debug, Default)]
pub struct Progress {
    phase: std::sync::Mutex<&'static str>,
    done: std::sync::atomic::AtomicU64,
    total: std::sync::atomic::AtomicU64,
}

impl Progress {
    /// The current phase (`""` when idle), items done, and items expected (0: unknown).
    pub fn get(&self) -> (&'static str, u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        let phase = *self.phase.lock().unwrap_or_else(|p| p.into_inner());
        (phase, self.done.load(Relaxed), self.total.load(Relaxed))
    }

    pub(crate) fn start(&self, phase: &'static str, total: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        *self.phase.lock().unwrap_or_else(|p| p.into_inner()) = phase;
        self.done.store(0, Relaxed);
        self.total.store(total, Relaxed);
    }

    /// Count one item done: one relaxed atomic add.
    pub(crate) fn step(&self) {
        self.done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The least address space (`ulimit -v`) and data (`ulimit -d`) rewind is started with: below
/// it, gix, zlib and the worker threads' stacks fail their first allocations, and Rust aborts
/// the process (exit 134), or a worker thread that cannot start leaves rayon waiting for it for
/// ever. Measured: a `track` of a small project needs 16 MiB; each file held in memory needs
/// more, so a limit near this one can still abort on a large project.
const LEAST_MEMORY: u64 = 32 << 20;

/// Check what the process was given before anything is done: an address space and data of at
/// least [`LEAST_MEMORY`], and rayon's global pool, which every walk, diff and restore runs on,
/// started (rayon panics when the pool it makes on first use cannot start its threads). A
/// global pool the embedding program built first is used as it is (build it before opening a
/// store). The descriptor table is grown first, while the process may still have one thread
/// ([`crate::fs::make_room_for_a_run`]).
fn check_resources() -> Result<()> {
    for (what, limit) in crate::fs::memory_limits() {
        if let Some(limit) = limit.filter(|&l| l < LEAST_MEMORY) {
            let needed = LEAST_MEMORY;
            return Err(Error::MemoryLimit {
                what,
                limit,
                needed,
            });
        }
    }
    static STARTED: std::sync::OnceLock<Option<(io::ErrorKind, String)>> =
        std::sync::OnceLock::new();
    let failure = STARTED.get_or_init(|| {
        if let Ok(root) = crate::fs::open_path(Path::new("/")) {
            crate::fs::make_room_for_a_run(&root);
        }
        let built = rayon::ThreadPoolBuilder::new().build_global();
        // No source: a pool was there already, which is fine.
        let cause = built.as_ref().err().and_then(std::error::Error::source)?;
        let kind = cause.downcast_ref::<io::Error>().map(io::Error::kind);
        Some((kind.unwrap_or(io::ErrorKind::Other), cause.to_string()))
    });
    match failure {
        None => Ok(()),
        Some((kind, message)) => Err(Error::Threads(io::Error::new(*kind, message.clone()))),
    }
}

impl Store {
    /// Open the store of `project` under `options`' data directory, creating either when
    /// missing. The project path is canonicalised, so a project reached through a symlink
    /// shares its store. The home directory and `/` are refused as projects (`broad_project`)
    /// unless [`OpenOptions::allow_home`] says otherwise. It fails (`resources`) before doing
    /// anything when the process's address space or data is limited under 32 MiB, or when rayon's
    /// global pool cannot start its threads; a program that builds its own global pool does
    /// so before opening a store. (Under an address-space limit, call
    /// `rewind::one_malloc_arena_under_an_address_space_limit` first in `main`.)
    ///
    /// ```no_run
    /// let options = rewind::OpenOptions::new(rewind::data_dir(None)?);
    /// let store = rewind::Store::open("/path/to/project".as_ref(), &options)?;
    /// let shared = std::sync::Arc::new(store); // Send + Sync: share one handle between threads
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn open(project: &Path, options: &OpenOptions) -> Result<Store> {
        check_resources()?;
        let data_dir = options.data_dir();
        let project = fs::canonicalize(project).map_err(|source| Error::Project {
            path: project.to_owned(),
            source,
        })?;
        if !project.is_dir() {
            return Err(Error::NotADirectory(project));
        }
        let home = std::env::var_os("HOME").and_then(|h| fs::canonicalize(h).ok());
        if !options.allow_home && (project == Path::new("/") || Some(&project) == home.as_ref()) {
            return Err(Error::BroadProject(project));
        }
        prepare_data_dir(data_dir)?;
        let canonical_data = fs::canonicalize(data_dir)
            .map_err(|e| Error::io("resolving data directory", data_dir, e))?;
        if project.starts_with(&canonical_data) {
            return Err(Error::ProjectInData {
                project,
                data_dir: canonical_data,
            });
        }
        mark_as_data(&canonical_data)?;
        let git_dir = data_dir.join(store_name(&project));
        // One `lstat` decides between creating and opening (a `stat` then an `lstat` let a
        // store that another process created in between read as "not a directory"); a link
        // to a store directory is followed.
        // `None`: nothing there; `Some(None)`: a dangling link.
        let found = match fs::symlink_metadata(&git_dir) {
            Ok(meta) if meta.is_symlink() => Some(fs::metadata(&git_dir).ok()),
            Ok(meta) => Some(Some(meta)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(Error::io("opening store", &git_dir, e)),
        };
        let mut set_aside = None;
        match found {
            None => create_store(&git_dir, &project, data_dir)?,
            Some(Some(meta)) if meta.is_dir() => {
                make_private(&git_dir, &meta)?;
                if lacks_objects(&git_dir)? {
                    // Its records point at objects that are gone: keep it aside, start anew.
                    let aside =
                        git_dir.with_extension(format!("git.damaged-{}", std::process::id()));
                    fs::rename(&git_dir, &aside)
                        .map_err(|e| Error::io("moving aside damaged store", &git_dir, e))?;
                    tracing::warn!(store = %git_dir.display(), aside = %aside.display(), "store without objects moved aside");
                    set_aside = Some(aside);
                    create_store(&git_dir, &project, data_dir)?;
                } else {
                    repair_store(&git_dir, &project)?;
                }
            }
            _ => {
                return Err(Error::store(
                    &git_dir,
                    "is not a directory; move it away to start a new store",
                ))
            }
        }
        let mut store = Self::at(git_dir, project, options)?;
        store.set_aside = set_aside;
        Ok(store)
    }

    /// Where [`Store::open`] moved this project's store when it found it damaged (its
    /// `objects/` gone, so its records point nowhere), before starting a new one; `None` when
    /// it did not. The caller should tell the user: the old records are kept there.
    ///
    /// ```no_run
    /// let store = rewind::Store::open(".".as_ref(), &rewind::OpenOptions::new(rewind::data_dir(None)?))?;
    /// if let Some(aside) = store.set_aside() {
    ///     eprintln!("damaged store moved to {}; a new one was started", aside.display());
    /// }
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn set_aside(&self) -> Option<&Path> {
        self.set_aside.as_deref()
    }

    /// Every damaged store ever set aside under `data_dir` (`*.git.damaged-<pid>`), for
    /// `prune --all` and `doctor` to list: they are never removed automatically.
    ///
    /// ```no_run
    /// for aside in rewind::Store::set_aside_stores(&rewind::data_dir(None)?)? {
    ///     println!("set aside: {}", aside.display());
    /// }
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn set_aside_stores(data_dir: &Path) -> Result<Vec<PathBuf>> {
        let entries = match fs::read_dir(data_dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::io("reading data directory", data_dir, e)),
        };
        let mut found = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| Error::io("reading data directory", data_dir, e))?;
            if entry
                .file_name()
                .to_string_lossy()
                .contains(".git.damaged-")
            {
                found.push(entry.path());
            }
        }
        found.sort();
        Ok(found)
    }

    /// Every store under `options`' data directory (for `prune --all`), whether or not its
    /// project still exists, opened with `options`. A store that cannot be read (permissions, a
    /// config that does not parse) comes back as an error in its place, never left out;
    /// set-aside stores are listed by [`Store::set_aside_stores`].
    ///
    /// ```no_run
    /// let options = rewind::OpenOptions::new(rewind::data_dir(None)?);
    /// for store in rewind::Store::all(&options)? {
    ///     let store = store?;
    ///     println!("{} -> {}", store.git_dir().display(), store.project().display());
    /// }
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn all(options: &OpenOptions) -> Result<Vec<Result<Store>>> {
        let data_dir = options.data_dir();
        let entries = match fs::read_dir(data_dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::io("reading data directory", data_dir, e)),
        };
        let mut stores = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| Error::io("reading data directory", data_dir, e))?;
            let git_dir = entry.path();
            if git_dir.extension().is_none_or(|e| e != "git") {
                continue;
            }
            if let Some(store) = Self::listed(git_dir, options) {
                stores.push(store);
            }
        }
        Ok(stores)
    }

    /// The store at `git_dir` for [`Store::all`]: `None` when it is not one of ours (not a
    /// directory, no config, no `rewind.worktree`), an error when it cannot be read.
    fn listed(git_dir: PathBuf, options: &OpenOptions) -> Option<Result<Store>> {
        let config = git_dir.join("config");
        match fs::metadata(&config) {
            Ok(meta) if meta.is_file() => {}
            Err(e)
                if !matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                return Some(Err(Error::io("reading store", config, e)));
            }
            _ => return None,
        }
        let mut text = match crate::fs::read_store_file(&config) {
            Ok(text) => text,
            Err(e) => return Some(Err(Error::io("reading store config", config, e))),
        };
        let metadata = gix::config::file::Metadata::from(gix::config::Source::Local);
        let project =
            match gix::config::File::from_bytes_owned(&mut text, metadata, Default::default()) {
                Ok(config) => config.string("rewind.worktree")?,
                Err(e) => return Some(Err(Error::store(&git_dir, e))),
            };
        let project = match crate::paths::os_path(&project) {
            Ok(project) => project.to_owned(),
            Err(e) => return Some(Err(Error::io("reading store config", config, e))),
        };
        let private = fs::metadata(&git_dir)
            .map_err(|e| Error::io("reading store", &git_dir, e))
            .and_then(|meta| make_private(&git_dir, &meta));
        Some(private.and_then(|()| Self::at(git_dir, project, options)))
    }

    /// Open the existing store at `git_dir` for `project`.
    fn at(git_dir: PathBuf, project: PathBuf, options: &OpenOptions) -> Result<Store> {
        let repo = open_repo(&git_dir)?;
        let objects = ObjectWriter::new(git_dir.join("objects"));
        Ok(Store {
            project,
            git_dir,
            repo: std::sync::RwLock::new(repo),
            objects,
            set_aside: None,
            lock_wait: options.lock_wait,
            clock: options.clock.clone(),
            watcher: Default::default(),
            closing: Default::default(),
            notices: Default::default(),
            peeked: Default::default(),
        })
    }

    /// What rewind did or found on its own that the user should hear of: the leftovers of a
    /// restore killed earlier, swept at the next snapshot (someone's save found under a temp
    /// name and set aside; a temp file that could not be removed; a directory it wrote in that
    /// is no longer in the project). One sentence each, naming the path; the CLI prints each on
    /// stderr as a warning.
    ///
    /// They are kept in the store (`rewind-notices`) until told: say them, then call
    /// [`Notices::told`]. Taken while another process holds the store's lock (for longer than
    /// [`NOTICES_LOCK_WAIT`]), the ones in the store stay there for the next taker. Costs a
    /// `flock`, a `readdir` of the store directory and a read.
    pub fn take_notices(&self) -> Notices<'_> {
        let mut lines =
            std::mem::take(&mut *self.notices.lock().unwrap_or_else(|p| p.into_inner()));
        let in_memory = lines.len();
        let mut read = Vec::new();
        if let Some(_lock) = self.try_lock_for(NOTICES_LOCK_WAIT) {
            // With `rewind-notices`, what an earlier build's taker left under
            // `rewind-notices.taking-<pid>` when it was killed before telling.
            let mut files: Vec<PathBuf> = fs::read_dir(&self.git_dir)
                .into_iter()
                .flatten()
                .flatten()
                .map(|entry| entry.path())
                .filter(|path| {
                    path.file_name().is_some_and(|name| {
                        name == NOTICES
                            || name
                                .as_encoded_bytes()
                                .starts_with(format!("{NOTICES}.taking-").as_bytes())
                    })
                })
                .collect();
            files.sort_by_key(|path| path.file_name() == Some(NOTICES.as_ref()));
            for path in files {
                // (Something else at the name, a FIFO say, is left there.)
                if let Ok(text) = crate::fs::read_store_file(&path) {
                    lines.extend(text.lines().map(unescape_notice));
                    read.push((path, text));
                }
            }
        }
        Notices {
            store: self,
            lines,
            in_memory,
            read,
            told: false,
        }
    }

    /// `path` as a project-relative `/`-separated path. Rejects paths that leave the project:
    /// `..` beyond its root, absolute paths outside it, and paths through a symlink.
    pub(crate) fn project_path(&self, path: &Path) -> Result<BString> {
        let bad = |reason| Error::BadPath {
            path: path.to_owned(),
            reason,
        };
        if path.as_os_str().is_empty() {
            return Err(bad("is empty (`.` is the whole project)"));
        }
        let relative = if path.is_absolute() {
            let lexical = path.strip_prefix(self.project());
            // Through a link to the project: its directory resolved, the last name kept (it
            // may be a link itself, or gone). A path ending in `..` names a directory: all of
            // it is resolved.
            let resolved = match path.file_name() {
                Some(name) => path
                    .parent()
                    .and_then(|parent| std::fs::canonicalize(parent).ok())
                    .map(|parent| parent.join(name)),
                None => std::fs::canonicalize(path).ok(),
            };
            match (lexical, resolved) {
                (Ok(rest), _) => rest.to_owned(),
                (Err(_), Some(resolved)) if resolved.starts_with(self.project()) => resolved
                    .strip_prefix(self.project())
                    .expect("checked")
                    .to_owned(),
                (Err(_), None) => {
                    return Err(bad(
                        "cannot be resolved: a directory on its way does not exist",
                    ))
                }
                _ => return Err(bad("is outside the project")),
            }
        } else {
            path.to_owned()
        };
        let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
        for component in relative.components() {
            match component {
                Component::Normal(name) => parts.push(name),
                Component::CurDir => {}
                Component::ParentDir => {
                    if parts.pop().is_none() {
                        return Err(bad("leaves the project (..)"));
                    }
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(bad("is outside the project"))
                }
            }
        }
        if parts.first().is_some_and(|first| *first == ".git") {
            return Err(bad("is inside the project's .git"));
        }
        // Every directory on the way must be real: a symlink could lead outside the project.
        let mut at = self.project().to_owned();
        for name in parts.iter().take(parts.len().saturating_sub(1)) {
            at.push(name);
            if std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(bad("goes through a symlink"));
            }
        }
        let parts = parts
            .into_iter()
            .map(|part| gix::path::os_str_into_bstr(part).map(|part| part.as_bytes()))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|_| bad("is not valid Unicode"))?;
        Ok(parts.join(&b'/').into())
    }

    /// What a user's `path` selects, as git's pathspecs do: the file or directory it names
    /// (project-relative, see [`Self::project_path`]), or with a trailing `/` only what is
    /// below that directory.
    pub(crate) fn select(&self, path: &Path) -> Result<crate::paths::Selection> {
        Ok(crate::paths::Selection {
            below_only: path.as_os_str().as_encoded_bytes().ends_with(b"/"),
            path: self.project_path(path)?,
        })
    }

    /// The time now, by this store's [`Clock`].
    pub(crate) fn now(&self) -> Result<DateTime<Utc>> {
        self.clock.now()
    }

    /// The canonical project directory.
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), &rewind::OpenOptions::new("/tmp/rewind"))?;
    /// println!("snapshots of {}", store.project().display());
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn project(&self) -> &Path {
        &self.project
    }

    /// The store's git directory (a bare repository).
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), &rewind::OpenOptions::new("/tmp/rewind"))?;
    /// println!("inspect with: git --git-dir {} log --all", store.git_dir().display());
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }

    /// The tree of the last snapshot any process recorded of the project, if known. Costs a
    /// read of a store file.
    pub(crate) fn last_snapshot(&self) -> Option<gix::ObjectId> {
        let text = crate::fs::read_store_file(&self.git_dir.join(LAST_SNAPSHOT)).ok()?;
        gix::ObjectId::from_hex(text.trim_ascii()).ok()
    }

    /// A handle on the store's repository for this thread (isolated from the environment and the
    /// global git config). Cheap: it shares the object database and config.
    pub(crate) fn repo(&self) -> gix::Repository {
        let repo = self.repo.read().unwrap_or_else(|p| p.into_inner());
        repo.to_thread_local()
    }

    /// Open gix's view of the store again: after another process repacked, the old view may
    /// still find an object in a pack index it loaded while the pack itself is gone. Costs
    /// opening the repository (its config, refs layout, object database).
    pub(crate) fn reopen_repo(&self) -> Result<()> {
        let fresh = open_repo(&self.git_dir)?;
        *self.repo.write().unwrap_or_else(|p| p.into_inner()) = fresh;
        Ok(())
    }
}

impl Store {
    /// What may be asked of the store's objects without its lock (see [`objects::Reads`]).
    pub(crate) fn reads(&self) -> objects::Reads<'_> {
        objects::Reads(&self.objects)
    }
}

impl Locked<'_> {
    pub(crate) fn objects(&self) -> &ObjectWriter {
        &self.objects
    }

    /// Name `tree` as the last snapshot recorded of the project ([`Store::last_snapshot`]),
    /// unless it is already. Written in place, the same 41 bytes long each time (a file renamed
    /// over it would free the old one's block, which a file system mounted with `discard`
    /// trims, at every snapshot; a reader that meets a write half done reads no tree). Not
    /// synced, and a failure only logged: a lost name keeps in above the size cap only what
    /// each process's own snapshot before kept. Costs a read of a store file, and a write when
    /// the tree is another.
    pub(crate) fn remember_last_snapshot(&self, tree: gix::ObjectId) {
        if self.last_snapshot() == Some(tree) {
            return;
        }
        let path = self.git_dir.join(LAST_SNAPSHOT);
        let text = format!("{tree}\n");
        let written =
            crate::fs::open_store_file(&path, std::fs::OpenOptions::new().write(true).create(true))
                .and_then(|file| {
                    crate::fs::write_all_at(&file, text.as_bytes(), 0)?;
                    file.set_len(text.len() as u64)
                });
        if let Err(e) = written {
            tracing::warn!("naming the last snapshot: {e}");
        }
    }
}

impl Store {
    /// `rewind.maxFileSize` from the store config (bytes, or with a `k`, `m` or `g` suffix),
    /// else [`DEFAULT_MAX_FILE_SIZE`]. Another value is an error, not a guess.
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), &rewind::OpenOptions::new("/tmp/rewind"))?;
    /// println!("new files over {} bytes are left out", store.max_file_size()?);
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn max_file_size(&self) -> Result<u64> {
        let size = self.setting("rewind.maxFileSize", "a size in bytes such as 2m", |v| {
            settings::parse_size(v)
        })?;
        Ok(size.unwrap_or(DEFAULT_MAX_FILE_SIZE))
    }
}

/// `rewind.nestedRepos`: what a snapshot does with a repository nested in the project (a
/// directory holding a `.git` directory or file: a submodule, a linked worktree, a clone).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NestedRepos {
    /// Its working files, under its own ignore rules; its `.git` is never entered (the default).
    #[default]
    Include,
    /// Left out whole, reported as `nested_repo` (rewind before this setting).
    Skip,
}

impl Store {
    /// `rewind.nestedRepos` from the store config (`include` or `skip`, any case), else
    /// [`NestedRepos::Include`]. Another value is an error, not a guess.
    ///
    /// ```no_run
    /// # let store = rewind::Store::open(".".as_ref(), &rewind::OpenOptions::new("/tmp/rewind"))?;
    /// if store.nested_repos()? == rewind::NestedRepos::Skip {
    ///     println!("nested repositories are left out");
    /// }
    /// # Ok::<(), rewind::Error>(())
    /// ```
    pub fn nested_repos(&self) -> Result<NestedRepos> {
        let nested = self.setting("rewind.nestedRepos", "include or skip", |v| {
            match v.to_ascii_lowercase().as_str() {
                "include" => Some(NestedRepos::Include),
                "skip" => Some(NestedRepos::Skip),
                _ => None,
            }
        })?;
        Ok(nested.unwrap_or_default())
    }
}

// Runtimes share one `Store` between threads.
const _: () = {
    const fn shareable<T: Send + Sync>() {}
    shareable::<Store>();
};

/// gix's handle on the store at `git_dir`: isolated from the environment, with the identity
/// of reflog entries (commits name theirs explicitly).
fn open_repo(git_dir: &Path) -> Result<gix::ThreadSafeRepository> {
    // gix opens these by name, and would wait forever on a FIFO put there: a look first.
    for name in ["HEAD", "config", "packed-refs"] {
        store_file_exists(git_dir, name)?;
    }
    let identity = ["user.name=rewind", "user.email=rewind@localhost"];
    let open = gix::open::Options::isolated().config_overrides(identity);
    gix::ThreadSafeRepository::open_opts(git_dir, open).map_err(|e| {
        // gix says "not a git repository" when it could not open a file for want of
        // descriptors: say that instead (a look at HEAD, on this failure only).
        match std::fs::File::open(git_dir.join("HEAD")) {
            Err(io) if crate::fs::out_of_resources(&io) => Error::io("opening", git_dir, io),
            _ => Error::store(git_dir, e),
        }
    })
}

/// The text of a store's config: the fixed settings and `rewind.worktree`.
fn store_config(git_dir: &Path, project: &Path) -> Result<Vec<u8>> {
    complete_config(git_dir, project, b"")
}

/// Config text `existing` with each setting of a store it lacks added (the others, a user's
/// `rewind.maxFileSize` say, kept). A config that does not parse is an error.
fn complete_config(git_dir: &Path, project: &Path, existing: &[u8]) -> Result<Vec<u8>> {
    let meta = gix::config::file::Metadata::from(gix::config::Source::Local);
    let mut config = gix::config::File::from_bytes_no_includes(existing, meta, Default::default())
        .map_err(|e| Error::store(git_dir.join("config"), e))?;
    let worktree = gix::path::os_str_into_bstr(project.as_os_str())
        .map_err(|_| Error::store(git_dir, "the project path is not valid UTF-8"))?;
    let settings = STORE_CONFIG
        .iter()
        .map(|&(key, value)| (key, value.as_bytes().as_bstr()))
        .chain([
            ("rewind.worktree", worktree),
            ("core.repositoryformatversion", "0".into()),
        ]);
    for (key, value) in settings {
        if config.raw_value(key).is_err() {
            config
                .set_raw_value(key, value)
                .map_err(|e| Error::store(git_dir, e))?;
        }
    }
    let mut out = Vec::new();
    config
        .write_to(&mut out)
        .map_err(|e| Error::io("writing config", git_dir, e))?;
    if !out.ends_with(b"\n") {
        out.push(b'\n');
    }
    Ok(out)
}

/// Create the data directory private (0700, whatever the umask), or make an existing one
/// private if it is ours and holds nothing but stores (a directory shared with other things,
/// such as a home directory, is left as it is: the stores in it are private themselves).
/// Costs a `stat`, plus a `readdir` when it is open to others.
fn prepare_data_dir(data_dir: &Path) -> Result<()> {
    let creating = |e| Error::io("creating data directory", data_dir, e);
    let meta = match fs::metadata(data_dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            crate::fs::create_dirs(data_dir, 0o700).map_err(creating)?;
            return crate::fs::set_mode(data_dir, 0o700).map_err(creating);
        }
        Err(e) => return Err(Error::io("opening data directory", data_dir, e)),
    };
    // (Not a directory: creating the store says so.)
    if !meta.is_dir() || !open_and_ours(&meta) {
        return Ok(());
    }
    let entries =
        fs::read_dir(data_dir).map_err(|e| Error::io("reading data directory", data_dir, e))?;
    let only_stores = entries.flatten().all(|entry| {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        name.ends_with(".git")
            || name.contains(".git.damaged-")
            || name.starts_with(".creating-")
            || name == DATA_MARKER
            || name == "hooks" // `rewind hooks`' records and log
            || name == "hooks.log"
    });
    if only_stores {
        make_private(data_dir, &meta)?;
    }
    Ok(())
}

/// Take group and other permissions off `dir` (described by `meta`) if it is ours: older
/// versions created stores with the umask's permissions. Costs nothing when already private.
fn make_private(dir: &Path, meta: &fs::Metadata) -> Result<()> {
    if !open_and_ours(meta) {
        return Ok(());
    }
    crate::fs::set_mode(dir, crate::fs::mode_of(meta) & 0o700)
        .map_err(|e| Error::io("making private", dir, e))
}

/// Whether a file is ours and open to group or others.
fn open_and_ours(meta: &fs::Metadata) -> bool {
    crate::fs::mode_of(meta) & 0o077 != 0 && crate::fs::owned_by_us(meta)
}

/// Whether the store directory `git_dir` provably lost its `objects/`: `stat` finds no
/// `objects` in it (which takes searching the directory) or one that is not a directory. A
/// store that cannot be searched is an error (`permission`), never taken for a damaged one.
/// Costs a `stat`.
fn lacks_objects(git_dir: &Path) -> Result<bool> {
    let objects = git_dir.join("objects");
    match fs::metadata(&objects) {
        Ok(meta) => Ok(!meta.is_dir()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(true),
        Err(e) => Err(Error::io("opening store", &objects, e)),
    }
}

/// Whether store file `name` exists: a regular file, not a symlink (`false`: nothing there).
/// Anything else there (a FIFO, a directory, a symlink) is an error: rewind neither writes
/// through it nor waits on it. Costs an `lstat`.
fn store_file_exists(git_dir: &Path, name: &str) -> Result<bool> {
    let path = git_dir.join(name);
    match fs::symlink_metadata(&path) {
        Ok(meta) if meta.is_file() => Ok(true),
        Ok(_) => Err(Error::store(
            git_dir,
            format!("{name} is not a regular file"),
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::io("opening store", path, e)),
    }
}

/// Put back what a damaged store lacks (its config, `HEAD`, `objects/`, `refs/`), so that it
/// works again with whatever records survived. Costs four `stat`s when nothing is missing.
fn repair_store(git_dir: &Path, project: &Path) -> Result<()> {
    for dir in [
        "objects/pack",
        "objects/info",
        "refs/heads",
        "refs/tags",
        "refs/rewind",
    ] {
        let path = git_dir.join(dir);
        if path.is_dir() {
            continue;
        }
        match fs::create_dir_all(&path) {
            // Made by another process, and maybe removed again since by a prune (an empty
            // `refs/rewind`): a store in use, not a file in the way.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                if fs::symlink_metadata(&path).is_ok_and(|meta| !meta.is_dir()) {
                    return Err(Error::io("repairing store", &path, e));
                }
            }
            made => made.map_err(|e| Error::io("repairing store", &path, e))?,
        }
    }
    if !store_file_exists(git_dir, "HEAD")? {
        let head = git_dir.join("HEAD");
        crate::fs::write_atomically(&head, "index.tmp", b"ref: refs/heads/main\n")?;
    }
    let config = git_dir.join("config");
    if !store_file_exists(git_dir, "config")? {
        crate::fs::write_atomically(&config, "index.tmp", &store_config(git_dir, project)?)?;
        return Ok(());
    }
    // A config that lost `rewind.worktree` (emptied, or rewritten by hand) would be used but
    // never pruned: complete it. One that does not parse is left for opening to report.
    let text = crate::fs::read_store_file(&config).map_err(|e| Error::io("reading", &config, e))?;
    let meta = gix::config::file::Metadata::from(gix::config::Source::Local);
    let parsed = gix::config::File::from_bytes_no_includes(&text, meta, Default::default());
    if parsed.is_ok_and(|parsed| parsed.raw_value("rewind.worktree").is_err()) {
        let completed = complete_config(git_dir, project, &text)?;
        crate::fs::write_atomically(&config, "index.tmp", &completed)?;
    }
    Ok(())
}

/// Create a store atomically: build it in a temporary directory beside its final place, then
/// rename it there. Of two processes creating the same store, one rename wins and the other
/// process uses the winner's store.
fn create_store(git_dir: &Path, project: &Path, data_dir: &Path) -> Result<()> {
    let staging = tempfile::Builder::new()
        .prefix(".creating-")
        .tempdir_in(data_dir)
        .map_err(|e| Error::io("creating store", data_dir, e))?;
    let staged = staging.path().join("store.git");
    gix::create::into(&staged, gix::create::Kind::Bare, Default::default())
        .map_err(|e| Error::store(git_dir, e))?;
    let config_path = staged.join("config");
    fs::write(&config_path, store_config(git_dir, project)?)
        .map_err(|e| Error::io("writing config", &config_path, e))?;
    mark_as_data(&staged)?;
    // The empty tree is implicit for gix but a `bad object` for git until written.
    ObjectWriter::new(staged.join("objects")).write(gix::objs::Kind::Tree, b"")?;
    crate::fs::set_mode(&staged, 0o700).map_err(|e| Error::io("creating store", &staged, e))?;
    match fs::rename(&staged, git_dir) {
        Ok(()) => Ok(()),
        Err(_) if git_dir.join("objects").is_dir() => Ok(()), // another process won the race
        Err(e) => Err(Error::io("creating store", git_dir, e)),
    }
}

/// The disk space (allocated blocks, as `du` counts) of all files below `dir`.
pub(crate) fn dir_size(dir: &Path) -> u64 {
    files_below(dir)
        .iter()
        .filter_map(|f| fs::symlink_metadata(f).ok())
        .map(|m| crate::fs::allocated(&m))
        .sum()
}

/// The disk space of the store's objects that counts against its quota: all of `objects/` but
/// the [`leftovers`] (a killed process's temp files must not make prune delete records).
pub(crate) fn objects_size(git_dir: &Path) -> u64 {
    let leftover: u64 = leftovers(git_dir)
        .iter()
        .filter_map(|f| fs::symlink_metadata(f).ok())
        .map(|m| crate::fs::allocated(&m))
        .sum();
    dir_size(&git_dir.join("objects")).saturating_sub(leftover)
}

/// Files in the store that a killed process left behind: temp files (`tmp_obj_*`,
/// `tmp_pack_*`, `tmp_idx_*`, `index.tmp*`) and packs without their index (a repack killed
/// between its two renames: a pack git and rewind never read). Costs a `readdir` of each
/// object directory.
pub(crate) fn leftovers(git_dir: &Path) -> Vec<PathBuf> {
    let objects = git_dir.join("objects");
    let dirs = (0..=255u8)
        .map(|f| objects.join(format!("{f:02x}")))
        .chain([objects.clone(), objects.join("pack"), git_dir.to_owned()]);
    let mut found = Vec::new();
    for dir in dirs {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let temp = ["tmp_obj_", "tmp_pack_", "tmp_idx_", "index.tmp"]
                .iter()
                .any(|prefix| name.starts_with(prefix));
            let path = entry.path();
            let orphan_pack = name.starts_with("pack-")
                && name.ends_with(".pack")
                && !path.with_extension("idx").exists();
            if temp || orphan_pack {
                found.push(path);
            }
        }
    }
    found
}

/// Every file below `dir`, recursively.
pub(crate) fn files_below(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_owned()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            match entry.file_type() {
                Ok(t) if t.is_dir() => dirs.push(entry.path()),
                Ok(_) => files.push(entry.path()),
                Err(_) => {}
            }
        }
    }
    files
}
