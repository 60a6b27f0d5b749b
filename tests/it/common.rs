//! Shared helpers for rewind's integration tests.
//!
//! * [`Sandbox`]: a per-test temp dir with its own HOME, XDG_CONFIG_HOME and
//!   rewind data dir; every process spawned through it (git or rewind) gets a
//!   scrubbed environment.
//! * [`TestProject`]: a builder for project trees (files, exec bits,
//!   symlinks, git repos) plus `track`/`store`/oracle helpers.
//! * The oracle: [`git_tree`] computes the tree id git itself would write for
//!   a directory (`git add -A && git write-tree`), without writing anything
//!   into the project.
//! * Store checks: [`assert_fsck_clean`], [`assert_tree_complete`].
//! * [`fs_snapshot`] / [`assert_same_snapshot`]: prove that a directory was not
//!   touched (listing, modes, sizes, mtimes, contents).

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

pub use serde_json::Value;

/// Path of the binary built by cargo.
pub const REWIND: &str = env!("CARGO_BIN_EXE_rewind");

/// The binary under test: [`REWIND`], unless `REWIND_TEST_BIN` names another
/// build (e.g. a release build, or a deliberately broken one to check that
/// the tests can fail).
/// `program` found on PATH (as the shell finds it), or `program` itself when it names a path or
/// is not found. A command whose PATH is set, as [`Sandbox::isolated`] sets it, is started with
/// `fork` (copying the test process's page tables, slow in a large test process running other
/// tests) unless its program is a path; given one, it is started with `posix_spawn`. Costs a
/// stat per PATH entry tried.
fn on_path(program: &OsStr) -> PathBuf {
    if program.as_bytes().contains(&b'/') {
        return PathBuf::from(program);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| {
            fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .unwrap_or_else(|| PathBuf::from(program))
}

pub fn rewind_bin() -> PathBuf {
    std::env::var_os("REWIND_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(REWIND))
}
/// Every spawned process is killed (and the test fails) after this long.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------
// Running processes
// ---------------------------------------------------------------------------

/// Result of a finished process.
#[derive(Debug)]
pub struct Run {
    /// Human readable description of the command (for failure messages).
    pub what: String,
    pub status: ExitStatus,
    pub stdout_bytes: Vec<u8>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// Panics with the full output unless the process exited 0.
    pub fn assert_success(&self) -> &Self {
        assert!(self.status.success(), "command failed: {self}");
        self
    }

    /// Panics unless the process exited with `code`.
    pub fn assert_code(&self, code: i32) -> &Self {
        assert_eq!(self.code(), Some(code), "unexpected exit code: {self}");
        self
    }
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`{}` -> {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.what, self.status, self.stdout, self.stderr
        )
    }
}

fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Spawns `cmd` with stdin closed and stdout/stderr captured.
pub fn spawn_piped(cmd: &mut Command) -> Child {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.spawn()
        .unwrap_or_else(|e| panic!("cannot spawn `{}`: {e}", describe(cmd)))
}

/// Waits for `child` (spawned with piped stdout/stderr) for at most
/// `deadline`; kills it and panics if it takes longer.
pub fn finish(mut child: Child, deadline: Duration, what: &str) -> Run {
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let out_t = thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(o) = out.as_mut() {
            let _ = o.read_to_end(&mut buf);
        }
        buf
    });
    let err_t = thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(e) = err.as_mut() {
            let _ = e.read_to_end(&mut buf);
        }
        buf
    });
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            break st;
        }
        if start.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let stdout = String::from_utf8_lossy(&out_t.join().unwrap()).into_owned();
            let stderr = String::from_utf8_lossy(&err_t.join().unwrap()).into_owned();
            panic!(
                "`{what}` did not finish within {deadline:?} (killed)\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}"
            );
        }
        thread::sleep(Duration::from_millis(5));
    };
    let stdout_bytes = out_t.join().unwrap();
    let stderr = String::from_utf8_lossy(&err_t.join().unwrap()).into_owned();
    Run {
        what: what.to_string(),
        status,
        stdout: String::from_utf8_lossy(&stdout_bytes).into_owned(),
        stdout_bytes,
        stderr,
    }
}

/// Runs `cmd` to completion (bounded by `deadline`).
pub fn run_with_deadline(cmd: &mut Command, deadline: Duration) -> Run {
    let what = describe(cmd);
    finish(spawn_piped(cmd), deadline, &what)
}

/// Runs `cmd` with `input` on stdin.
pub fn run_with_stdin(cmd: &mut Command, input: &[u8]) -> Run {
    let what = describe(cmd);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot spawn `{what}`: {e}"));
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let run = finish(child, DEFAULT_DEADLINE, &what);
    writer.join().unwrap();
    run
}

/// `rewind -C <project> ARGS` with `REWIND_NOW=now` when given; fails the test on a panic.
pub fn rw_at<S: AsRef<OsStr>>(p: &TestProject, now: Option<&str>, args: &[S]) -> Run {
    let mut cmd = p.rewind_command(args);
    if let Some(now) = now {
        cmd.env("REWIND_NOW", now);
    }
    let run = run_with_deadline(&mut cmd, DEFAULT_DEADLINE);
    assert_no_panic(&run);
    run
}

/// `rewind ARGS` in project `p` with `REWIND_NOW=now`; asserts success.
pub fn at(p: &TestProject, now: &str, args: &[&str]) -> Run {
    let run = rw_at(p, Some(now), args);
    run.assert_success();
    run
}

/// `git ls-tree -r -z --full-tree TREE` in the store: path -> (mode, oid) of every non-tree entry.
pub fn ls_tree(sb: &Sandbox, store: &Path, tree: &str) -> BTreeMap<Vec<u8>, (String, String)> {
    let run = sb.git_in_run(store, ["ls-tree", "-r", "-z", "--full-tree", tree]);
    run.assert_success();
    run.stdout_bytes
        .split(|b| *b == 0)
        .filter(|e| !e.is_empty())
        .map(|e| {
            let tab = e.iter().position(|b| *b == b'\t').expect("ls-tree entry");
            let meta = String::from_utf8_lossy(&e[..tab]);
            let mut it = meta.split(' ');
            let mode = it.next().unwrap().to_string();
            let _kind = it.next();
            let oid = it.next().unwrap().to_string();
            (e[tab + 1..].to_vec(), (mode, oid))
        })
        .collect()
}

/// For tests of the library (no [`Sandbox`] between them and git): points this process's HOME
/// and XDG_CONFIG_HOME at one empty directory, so the user's global git config and excludes
/// stay out. Process-wide, so one directory for the whole test binary.
pub fn isolate_process_home() {
    static HOME: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    let home = HOME.get_or_init(|| tempfile::tempdir().unwrap());
    std::env::set_var("HOME", home.path());
    std::env::set_var("XDG_CONFIG_HOME", home.path().join(".config"));
}

/// Writes `content` to `dir/rel`, creating its parent directories.
pub fn write_file(dir: &Path, rel: &str, content: &str) {
    let path = dir.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, content).unwrap();
}

/// Fails the test, naming `tool` and what it is needed for, unless `tool` is on PATH: a test
/// that needs a tool never passes without it (CI installs them, see .ci/run).
pub fn require_tool(tool: &str, needed_for: &str) {
    let found = Command::new("sh")
        .args(["-c", "command -v \"$1\"", "sh", tool])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "`{tool}` is not installed; this test needs it {needed_for}"
    );
}

/// The single JSON value on stdout (blank lines aside); panics naming the run otherwise.
pub fn one_json(run: &Run) -> serde_json::Value {
    let lines: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(
        lines.len(),
        1,
        "expected exactly one JSON line on stdout: {run}"
    );
    serde_json::from_str(lines[0]).unwrap_or_else(|e| panic!("invalid JSON ({e}): {run}"))
}

/// rewind must never panic, whatever it is asked.
pub fn assert_no_panic(run: &Run) {
    assert_ne!(run.code(), Some(101), "rewind panicked: {run}");
    assert!(
        !run.stderr.contains("panicked at"),
        "rewind panicked: {run}"
    );
}

/// Asserts `s` is a lowercase 40-hex object id.
pub fn assert_oid(s: &str, context: &str) {
    assert!(
        s.len() == 40
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "expected a 40-hex object id from {context}, got {s:?}"
    );
}

// ---------------------------------------------------------------------------
// Sandbox
// ---------------------------------------------------------------------------

/// A per-test isolated world: HOME, XDG_CONFIG_HOME and a rewind data dir,
/// all inside one temp dir that is removed on drop.
pub struct Sandbox {
    _dir: tempfile::TempDir,
    /// Canonical root of the sandbox; projects are created under it.
    pub root: PathBuf,
    pub home: PathBuf,
    pub xdg_config: PathBuf,
    /// Passed as `--data-dir` to rewind by [`Sandbox::rewind_command`].
    pub data_dir: PathBuf,
}

impl Default for Sandbox {
    fn default() -> Self {
        Self::new()
    }
}

impl Sandbox {
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("rewind-test-")
            .tempdir()
            .expect("tempdir");
        let root = fs::canonicalize(dir.path()).unwrap();
        let home = root.join("home");
        let xdg_config = root.join("xdg-config");
        let data_dir = root.join("data");
        fs::create_dir_all(&home).unwrap();
        fs::create_dir_all(&xdg_config).unwrap();
        Sandbox {
            _dir: dir,
            root,
            home,
            xdg_config,
            data_dir,
        }
    }

    /// A command for `program` with a scrubbed environment: only PATH is
    /// inherited; HOME/XDG_CONFIG_HOME point into the sandbox; no system git
    /// config; no GIT_* variables; LC_ALL=C.
    pub fn isolated(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new(on_path(program.as_ref()));
        cmd.env_clear();
        if let Some(path) = std::env::var_os("PATH") {
            cmd.env("PATH", path);
        }
        cmd.env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", &self.xdg_config)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("LC_ALL", "C")
            .env("TZ", "UTC");
        cmd
    }

    // ---- rewind ----------------------------------------------------------

    /// `rewind --data-dir <sandbox data dir> ARGS...`, not yet run.
    pub fn rewind_command<S: AsRef<OsStr>>(&self, args: impl IntoIterator<Item = S>) -> Command {
        let mut cmd = self.rewind_command_no_data_dir(std::iter::empty::<&str>());
        cmd.arg("--data-dir").arg(&self.data_dir).args(args);
        cmd
    }

    /// `rewind ARGS...` without `--data-dir` (for data-dir resolution tests).
    pub fn rewind_command_no_data_dir<S: AsRef<OsStr>>(
        &self,
        args: impl IntoIterator<Item = S>,
    ) -> Command {
        let mut cmd = self.isolated(rewind_bin());
        cmd.env("RUST_BACKTRACE", "1")
            .current_dir(&self.root)
            .args(args);
        cmd
    }

    /// Like [`Sandbox::rewind_command`], but the process first waits at
    /// `gate` (see [`StartGate`]) so that many processes start at once.
    pub fn rewind_command_gated<S: AsRef<OsStr>>(
        &self,
        gate: &StartGate,
        args: impl IntoIterator<Item = S>,
    ) -> Command {
        let mut cmd = self.isolated("sh");
        cmd.env("RUST_BACKTRACE", "1")
            .current_dir(&self.root)
            .args(["-c", StartGate::WAIT])
            .arg(&gate.fifo)
            .arg(rewind_bin())
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(args);
        cmd
    }

    /// Runs rewind with `--data-dir`, returns its status and output; fails
    /// the test on a panic or if it runs longer than [`DEFAULT_DEADLINE`].
    pub fn run_rewind<S: AsRef<OsStr>>(&self, args: impl IntoIterator<Item = S>) -> Run {
        let run = run_with_deadline(&mut self.rewind_command(args), DEFAULT_DEADLINE);
        assert_no_panic(&run);
        run
    }

    /// Same as [`Sandbox::run_rewind`] with `-C dir` in front of `args`.
    pub fn run_rewind_in<S: AsRef<OsStr>>(
        &self,
        dir: &Path,
        args: impl IntoIterator<Item = S>,
    ) -> Run {
        let mut all: Vec<OsString> = vec!["-C".into(), dir.into()];
        all.extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self.run_rewind(all)
    }

    // ---- git -------------------------------------------------------------

    /// An isolated git command (`git -c core.autocrlf=false ...`) running in
    /// `cwd` (or the sandbox root). GIT_OPTIONAL_LOCKS=0 so that read-only
    /// commands like `status` never refresh an index behind our back.
    pub fn git_command(&self, cwd: Option<&Path>) -> Command {
        let mut cmd = self.isolated("git");
        cmd.env("GIT_OPTIONAL_LOCKS", "0")
            .env("GIT_AUTHOR_NAME", "Rewind Test")
            .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
            .env("GIT_COMMITTER_NAME", "Rewind Test")
            .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
            .args(["-c", "core.autocrlf=false", "-c", "init.defaultBranch=main"])
            .current_dir(cwd.unwrap_or(&self.root));
        cmd
    }

    /// Runs git; returns the Run without checking the status.
    pub fn git_run<S: AsRef<OsStr>>(
        &self,
        cwd: Option<&Path>,
        args: impl IntoIterator<Item = S>,
    ) -> Run {
        run_with_deadline(self.git_command(cwd).args(args), DEFAULT_DEADLINE)
    }

    /// Runs git, asserts success, returns stdout.
    pub fn git<S: AsRef<OsStr>>(
        &self,
        cwd: Option<&Path>,
        args: impl IntoIterator<Item = S>,
    ) -> String {
        let run = self.git_run(cwd, args);
        run.assert_success();
        run.stdout
    }

    /// Runs `git --git-dir GIT_DIR ARGS...`, asserts success, returns stdout.
    pub fn git_in<S: AsRef<OsStr>>(
        &self,
        git_dir: &Path,
        args: impl IntoIterator<Item = S>,
    ) -> String {
        let mut all: Vec<OsString> = vec!["--git-dir".into(), git_dir.into()];
        all.extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self.git(None, all)
    }

    /// Same as [`Sandbox::git_in`] but returns the Run unchecked.
    pub fn git_in_run<S: AsRef<OsStr>>(
        &self,
        git_dir: &Path,
        args: impl IntoIterator<Item = S>,
    ) -> Run {
        let mut all: Vec<OsString> = vec!["--git-dir".into(), git_dir.into()];
        all.extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self.git_run(None, all)
    }

    // ---- projects --------------------------------------------------------

    /// Creates (mkdir -p) `root/name` and returns a builder for it.
    pub fn project(&self, name: &str) -> TestProject<'_> {
        let path = self.root.join(name);
        fs::create_dir_all(&path).unwrap();
        TestProject { sb: self, path }
    }

    /// A builder for an existing directory (e.g. a subdirectory of another
    /// project).
    pub fn project_at(&self, path: &Path) -> TestProject<'_> {
        fs::create_dir_all(path).unwrap();
        TestProject {
            sb: self,
            path: fs::canonicalize(path).unwrap(),
        }
    }

    /// Writes `$HOME/.gitconfig`.
    pub fn write_home_gitconfig(&self, content: &str) {
        fs::write(self.home.join(".gitconfig"), content).unwrap();
    }

    /// Writes `$XDG_CONFIG_HOME/git/<name>` (e.g. "config" or "ignore").
    pub fn write_xdg_git_file(&self, name: &str, content: &str) {
        let dir = self.xdg_config.join("git");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join(name), content).unwrap();
    }
}

// ---------------------------------------------------------------------------
// TestProject
// ---------------------------------------------------------------------------

/// A project directory inside a [`Sandbox`]. Builder methods return `&Self`
/// so they can be chained; they act on the file system immediately.
pub struct TestProject<'a> {
    pub sb: &'a Sandbox,
    pub path: PathBuf,
}

/// Output of `rewind --json track`.
#[derive(Debug, Clone)]
pub struct Tracked {
    pub hash: String,
    pub files: u64,
    pub skipped: Vec<Skipped>,
    pub json: Value,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub path: String,
    pub reason: String,
}

impl Tracked {
    /// Parses the one-line JSON printed by `rewind --json track`.
    pub fn parse(stdout: &str) -> Tracked {
        let lines: Vec<&str> = stdout.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(
            lines.len(),
            1,
            "`--json track` must print exactly one line, got:\n{stdout}"
        );
        let json: Value = serde_json::from_str(lines[0])
            .unwrap_or_else(|e| panic!("invalid JSON from track ({e}): {stdout}"));
        let hash = json["hash"]
            .as_str()
            .unwrap_or_else(|| panic!("no \"hash\" string in {json}"))
            .to_string();
        assert_oid(&hash, "track --json");
        let files = json["files"]
            .as_u64()
            .unwrap_or_else(|| panic!("no \"files\" number in {json}"));
        let skipped = json["skipped"]
            .as_array()
            .unwrap_or_else(|| panic!("no \"skipped\" array in {json}"))
            .iter()
            .map(|s| {
                let path = s["path"]
                    .as_str()
                    .unwrap_or_else(|| panic!("skipped entry without path: {s}"));
                let reason = s["reason"]
                    .as_str()
                    .unwrap_or_else(|| panic!("skipped entry without reason: {s}"));
                assert!(
                    [
                        "too_large",
                        "nested_repo",
                        "special_file",
                        "unreadable",
                        "reserved_name"
                    ]
                    .contains(&reason),
                    "unknown skip reason in {s}"
                );
                // Tolerate "dir/" for directories.
                Skipped {
                    path: path.trim_end_matches('/').to_string(),
                    reason: reason.to_string(),
                }
            })
            .collect();
        Tracked {
            hash,
            files,
            skipped,
            json,
        }
    }

    pub fn reason_for(&self, path: &str) -> Option<&str> {
        self.skipped
            .iter()
            .find(|s| s.path == path)
            .map(|s| s.reason.as_str())
    }

    pub fn assert_skipped(&self, path: &str, reason: &str) {
        assert_eq!(
            self.reason_for(path),
            Some(reason),
            "expected {path:?} to be reported as skipped ({reason}); got {}",
            self.json
        );
    }

    pub fn assert_not_skipped(&self, path: &str) {
        assert_eq!(
            self.reason_for(path),
            None,
            "{path:?} must not be reported skipped; got {}",
            self.json
        );
    }

    /// The set of (path, reason) pairs reported.
    pub fn skipped_set(&self) -> BTreeSet<(String, String)> {
        self.skipped
            .iter()
            .map(|s| (s.path.clone(), s.reason.clone()))
            .collect()
    }
}

impl<'a> TestProject<'a> {
    pub fn join(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.path.join(rel)
    }

    fn parent_dirs(&self, rel: &Path) -> PathBuf {
        let p = self.join(rel);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        p
    }

    /// Writes a regular file with mode 0644 (creating parent dirs).
    pub fn file(&self, rel: impl AsRef<Path>, content: impl AsRef<[u8]>) -> &Self {
        let p = self.parent_dirs(rel.as_ref());
        if p.symlink_metadata()
            .map(|m| m.file_type().is_symlink())
            .unwrap_or(false)
        {
            fs::remove_file(&p).unwrap();
        }
        fs::write(&p, content).unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
        self
    }

    /// Writes an executable file (mode 0755).
    pub fn exec(&self, rel: impl AsRef<Path>, content: impl AsRef<[u8]>) -> &Self {
        self.file(rel.as_ref(), content);
        self.chmod(rel, 0o755)
    }

    /// Creates a symlink `rel -> target` (target is stored verbatim).
    pub fn symlink(&self, rel: impl AsRef<Path>, target: impl AsRef<Path>) -> &Self {
        let p = self.parent_dirs(rel.as_ref());
        std::os::unix::fs::symlink(target, &p)
            .unwrap_or_else(|e| panic!("symlink {}: {e}", p.display()));
        self
    }

    /// mkdir -p.
    pub fn dir(&self, rel: impl AsRef<Path>) -> &Self {
        fs::create_dir_all(self.join(rel)).unwrap();
        self
    }

    /// Removes a file, symlink or directory tree.
    pub fn remove(&self, rel: impl AsRef<Path>) -> &Self {
        let p = self.join(rel);
        let md = p
            .symlink_metadata()
            .unwrap_or_else(|e| panic!("remove {}: {e}", p.display()));
        if md.is_dir() {
            fs::remove_dir_all(&p).unwrap();
        } else {
            fs::remove_file(&p).unwrap();
        }
        self
    }

    pub fn chmod(&self, rel: impl AsRef<Path>, mode: u32) -> &Self {
        fs::set_permissions(self.join(rel), fs::Permissions::from_mode(mode)).unwrap();
        self
    }

    pub fn read(&self, rel: impl AsRef<Path>) -> Vec<u8> {
        fs::read(self.join(rel)).unwrap()
    }

    /// Creates a FIFO with the `mkfifo` command.
    pub fn fifo(&self, rel: impl AsRef<Path>) -> &Self {
        let p = self.parent_dirs(rel.as_ref());
        let st = Command::new("mkfifo").arg(&p).status().expect("mkfifo");
        assert!(st.success(), "mkfifo {} failed", p.display());
        self
    }

    // ---- the project's own git repository ----------------------------------

    /// Runs git inside the project dir, asserts success, returns stdout.
    pub fn git<S: AsRef<OsStr>>(&self, args: impl IntoIterator<Item = S>) -> String {
        self.sb.git(Some(&self.path), args)
    }

    /// `git init` + identity config.
    pub fn git_init(&self) -> &Self {
        self.git(["init", "-q"]);
        self.git(["config", "user.name", "Rewind Test"]);
        self.git(["config", "user.email", "test@example.invalid"]);
        self
    }

    /// `git add -A && git commit`.
    pub fn commit_all(&self, msg: &str) -> &Self {
        self.git(["add", "-A"]);
        self.git(["commit", "-q", "--allow-empty", "-m", msg]);
        self
    }

    // ---- rewind ----------------------------------------------------------

    /// `rewind -C <project> ARGS...` (with the sandbox data dir).
    pub fn rewind<S: AsRef<OsStr>>(&self, args: impl IntoIterator<Item = S>) -> Run {
        self.sb.run_rewind_in(&self.path, args)
    }

    /// A not-yet-spawned `rewind -C <project> ARGS...`.
    pub fn rewind_command<S: AsRef<OsStr>>(&self, args: impl IntoIterator<Item = S>) -> Command {
        let mut cmd = self
            .sb
            .rewind_command([OsStr::new("-C"), self.path.as_os_str()]);
        cmd.args(args);
        cmd
    }

    /// `rewind track`; asserts success and returns the tree id.
    pub fn track(&self) -> String {
        let run = self.rewind(["track"]);
        run.assert_success();
        let id = run.stdout.trim().to_string();
        assert_oid(&id, "`rewind track`");
        id
    }

    /// `rewind --json track`; asserts success and parses the output.
    pub fn track_json(&self) -> Tracked {
        let run = self.rewind(["--json", "track"]);
        run.assert_success();
        Tracked::parse(&run.stdout)
    }

    /// `rewind path`: the store's git dir.
    pub fn store(&self) -> PathBuf {
        let run = self.rewind(["path"]);
        run.assert_success();
        let s = run.stdout.trim_end_matches('\n');
        assert!(
            !s.is_empty() && !s.contains('\n'),
            "`rewind path` must print one path: {run}"
        );
        PathBuf::from(s)
    }

    /// `git diff-files --name-status` in the store with the project as work tree: asserts it
    /// prints nothing, i.e. the stat cache (the store's index) agrees with the files.
    pub fn assert_stat_cache_agrees(&self, when: &str) {
        let mut cmd = self.sb.git_command(Some(&self.path));
        cmd.arg("--git-dir")
            .arg(self.store())
            .arg("--work-tree")
            .arg(&self.path)
            .args(["diff-files", "--name-status"]);
        let run = run_with_deadline(&mut cmd, DEFAULT_DEADLINE);
        run.assert_success();
        assert!(
            run.stdout.is_empty(),
            "{when}: git sees stale stat-cache entries in the store index:\n{}",
            run.stdout
        );
    }

    /// Runs git against the store (`git --git-dir <store> ARGS`).
    pub fn store_git<S: AsRef<OsStr>>(&self, args: impl IntoIterator<Item = S>) -> String {
        self.sb.git_in(&self.store(), args)
    }

    /// The oracle: git's tree id for the project as it is now.
    pub fn git_tree(&self) -> GitTree {
        git_tree(self.sb, &self.path, &[])
    }

    /// The oracle, with extra project-relative paths left out.
    pub fn git_tree_excluding(&self, excludes: &[&str]) -> GitTree {
        git_tree(self.sb, &self.path, excludes)
    }

    /// `track --json`, then asserts: the id equals git's (leaving out
    /// `excludes`), the whole tree is present in the store, and `files`
    /// equals the number of non-tree entries.
    pub fn track_matches_git_excluding(&self, excludes: &[&str]) -> Tracked {
        let tracked = self.track_json();
        let want = self.git_tree_excluding(excludes);
        let store = self.store();
        if tracked.hash != want.id {
            let got = self.sb.git_in_run(&store, ["ls-tree", "-r", &tracked.hash]);
            panic!(
                "rewind's tree differs from git's\nrewind: {}\n{}\ngit:    {}\n{}\n(json: {})",
                tracked.hash, got.stdout, want.id, want.listing, tracked.json
            );
        }
        assert_tree_complete(self.sb, &store, &tracked.hash);
        assert_eq!(
            tracked.files, want.files as u64,
            "\"files\" must count the files in the tree ({})",
            tracked.json
        );
        tracked
    }

    /// [`TestProject::track_matches_git_excluding`] with no exclusions.
    pub fn track_matches_git(&self) -> Tracked {
        self.track_matches_git_excluding(&[])
    }

    /// Paths of all non-tree entries of `tree` in the store.
    pub fn store_paths(&self, tree: &str) -> BTreeSet<String> {
        ls_tree_paths(self.sb, &self.store(), tree)
    }

    /// Content of `path` in `tree` from the store.
    pub fn store_blob(&self, tree: &str, path: &str) -> Vec<u8> {
        let run = self.sb.git_in_run(
            &self.store(),
            ["cat-file", "blob", &format!("{tree}:{path}")],
        );
        run.assert_success();
        run.stdout_bytes
    }

    /// `git fsck --strict` on the store must be clean.
    pub fn assert_fsck_clean(&self) {
        assert_fsck_clean(self.sb, &self.store());
    }
}

// ---------------------------------------------------------------------------
// Oracle
// ---------------------------------------------------------------------------

/// A tree computed by git.
#[derive(Debug, Clone)]
pub struct GitTree {
    pub id: String,
    /// `git ls-tree -r` output (for failure messages).
    pub listing: String,
    /// Number of non-tree entries (files and symlinks), recursively.
    pub files: usize,
}

/// Escapes a literal path for use as a gitignore pattern.
fn ignore_escape(path: &str) -> String {
    let mut s = String::new();
    for c in path.chars() {
        if c.is_ascii_punctuation() && c != '/' || c == ' ' {
            s.push('\\');
        }
        s.push(c);
    }
    s
}

fn rel_join(prefix: &str, rel: &str) -> String {
    if prefix.is_empty() {
        rel.to_string()
    } else if rel.is_empty() {
        prefix.to_string()
    } else {
        format!("{prefix}/{rel}")
    }
}

/// Project-relative paths of nested repositories: directories below `root`
/// (not `root` itself) that contain a `.git` entry (dir, file or symlink).
/// Does not follow symlinks and does not descend into them.
pub fn nested_repos(root: &Path) -> Vec<String> {
    // A stack of directories, not recursion: projects can be thousands of levels deep.
    let mut out = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(rd) = fs::read_dir(&dir) else { continue };
        for entry in rd.flatten() {
            if entry.file_name() == ".git" {
                continue;
            }
            let Ok(ft) = entry.file_type() else { continue };
            if !ft.is_dir() {
                continue;
            }
            let p = entry.path();
            if p.join(".git").symlink_metadata().is_ok() {
                out.push(
                    p.strip_prefix(root)
                        .unwrap()
                        .to_str()
                        .expect("utf-8 nested repo path")
                        .to_string(),
                );
            } else {
                pending.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The git dir and common dir of the repository whose work tree is `dir`:
/// `dir/.git` if it is a directory, or what a `.git` file ("gitdir: ...")
/// points to (linked worktrees, submodules), with its `commondir`.
pub fn resolve_git_dir(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    let dot_git = dir.join(".git");
    let md = fs::metadata(&dot_git).ok()?;
    let git_dir = if md.is_dir() {
        dot_git
    } else {
        let content = fs::read_to_string(&dot_git).ok()?;
        let target = content.strip_prefix("gitdir:")?.trim();
        dir.join(target)
    };
    let common_dir = fs::read_to_string(git_dir.join("commondir"))
        .map(|c| git_dir.join(c.trim()))
        .unwrap_or_else(|_| git_dir.clone());
    Some((git_dir, common_dir))
}

/// The tree `git add -A && git write-tree` writes for `project`, computed in
/// a throw-away bare repository so that nothing is written into the project:
///
/// * `.gitignore` files, global excludes (same HOME/XDG as rewind) apply;
/// * if `project` is (inside) a git repository R (`.git` dir or file), R's
///   `info/exclude` (from its common dir) is copied in, the walk happens from R's top (so anchored patterns mean
///   what they mean to git), files tracked in R's index are force-added, and
///   the subtree for `project` is returned;
/// * nested repositories (see [`nested_repos`]) and `excludes` (paths
///   relative to `project`) are left out;
/// * `info/attributes` unsets text/eol/filter/ident for every path, so that
///   blobs are the raw bytes (rewind applies no conversion).
pub fn git_tree(sb: &Sandbox, project: &Path, excludes: &[&str]) -> GitTree {
    let project = fs::canonicalize(project).unwrap();
    let tmp = tempfile::Builder::new()
        .prefix("rewind-oracle-")
        .tempdir()
        .unwrap();
    let g = tmp.path().join("oracle.git");
    sb.git(
        None,
        [
            OsStr::new("init"),
            OsStr::new("-q"),
            OsStr::new("--bare"),
            g.as_os_str(),
        ],
    );

    // The enclosing repository, if any (only inside the sandbox).
    let found = project
        .ancestors()
        .take_while(|a| a.starts_with(&sb.root) && *a != sb.root)
        .find_map(|a| resolve_git_dir(a).map(|dirs| (a.to_path_buf(), dirs)));
    let repo = found.as_ref().map(|(r, _)| r.clone());
    let worktree = repo.clone().unwrap_or_else(|| project.clone());
    let prefix = project
        .strip_prefix(&worktree)
        .unwrap()
        .to_str()
        .expect("utf-8 prefix")
        .to_string();

    let mut exclude = Vec::new();
    if let Some((_, (_, common_dir))) = &found {
        if let Ok(bytes) = fs::read(common_dir.join("info/exclude")) {
            exclude.extend_from_slice(&bytes);
            exclude.push(b'\n');
        }
    }
    let mut left_out: Vec<String> = nested_repos(&project);
    left_out.extend(excludes.iter().map(|s| s.to_string()));
    for rel in &left_out {
        exclude
            .extend_from_slice(format!("/{}\n", ignore_escape(&rel_join(&prefix, rel))).as_bytes());
    }
    fs::create_dir_all(g.join("info")).unwrap();
    fs::write(g.join("info/exclude"), &exclude).unwrap();
    fs::write(
        g.join("info/attributes"),
        "* -text -eol -crlf -filter -ident -working-tree-encoding\n",
    )
    .unwrap();

    let git = |args: &[&OsStr]| -> Run {
        let mut cmd = sb.git_command(Some(&worktree));
        cmd.env("GIT_LITERAL_PATHSPECS", "1")
            .arg("--git-dir")
            .arg(&g)
            .arg("--work-tree")
            .arg(&worktree)
            .args(args);
        run_with_deadline(&mut cmd, DEFAULT_DEADLINE)
    };
    let pathspec = if prefix.is_empty() {
        ".".to_string()
    } else {
        prefix.clone()
    };
    git(&[
        "add".as_ref(),
        "-A".as_ref(),
        "--".as_ref(),
        pathspec.as_ref(),
    ])
    .assert_success();

    // Files tracked by the project's own index stay even if ignored.
    if let Some((r, (git_dir, _))) = &found {
        let listed = sb.git_run(
            Some(r),
            [
                OsStr::new("--git-dir"),
                git_dir.as_os_str(),
                OsStr::new("--work-tree"),
                r.as_os_str(),
                OsStr::new("ls-files"),
                OsStr::new("-z"),
            ],
        );
        listed.assert_success();
        let mut force = Vec::new();
        for path in listed
            .stdout_bytes
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty())
        {
            let s = String::from_utf8_lossy(path);
            let in_project = prefix.is_empty() || s.starts_with(&format!("{prefix}/"));
            let left = left_out.iter().any(|l| {
                let l = rel_join(&prefix, l);
                s == l || s.starts_with(&format!("{l}/"))
            });
            // (Not through a symlink: git adds nothing "beyond a symbolic link", nor does a
            // snapshot follow one.)
            let under_a_link =
                path.iter()
                    .enumerate()
                    .filter(|(_, b)| **b == b'/')
                    .any(|(i, _)| {
                        let dir = r.join(OsStr::from_bytes(&path[..i])).symlink_metadata();
                        dir.map(|m| m.file_type().is_symlink()).unwrap_or(false)
                    });
            let exists = !under_a_link
                && r.join(OsStr::from_bytes(path))
                    .symlink_metadata()
                    .map(|m| !m.is_dir())
                    .unwrap_or(false);
            if in_project && !left && exists {
                force.extend_from_slice(path);
                force.push(0);
            }
        }
        if !force.is_empty() {
            let mut cmd = sb.git_command(Some(&worktree));
            cmd.env("GIT_LITERAL_PATHSPECS", "1")
                .arg("--git-dir")
                .arg(&g)
                .arg("--work-tree")
                .arg(&worktree)
                .args(["add", "-f", "--pathspec-from-file=-", "--pathspec-file-nul"]);
            run_with_stdin(&mut cmd, &force).assert_success();
        }
    }

    let root_tree = git(&["write-tree".as_ref()]);
    root_tree.assert_success();
    let root_tree = root_tree.stdout.trim().to_string();
    let id = if prefix.is_empty() {
        root_tree
    } else {
        let r = git(&[
            "rev-parse".as_ref(),
            "--verify".as_ref(),
            "-q".as_ref(),
            format!("{root_tree}:{prefix}").as_ref(),
        ]);
        if r.status.success() {
            r.stdout.trim().to_string()
        } else {
            empty_tree(sb)
        }
    };
    assert_oid(&id, "the git oracle");
    let listing = git(&["ls-tree".as_ref(), "-r".as_ref(), id.as_ref()]);
    listing.assert_success();
    let files = git(&[
        "ls-tree".as_ref(),
        "-r".as_ref(),
        "-z".as_ref(),
        id.as_ref(),
    ])
    .stdout_bytes
    .split(|b| *b == 0)
    .filter(|e| !e.is_empty())
    .count();
    GitTree {
        id,
        listing: listing.stdout.clone(),
        files,
    }
}

/// The id git gives the empty tree.
pub fn empty_tree(sb: &Sandbox) -> String {
    sb.git(None, ["hash-object", "-t", "tree", "/dev/null"])
        .trim()
        .to_string()
}

/// Paths (lossy UTF-8) of all non-tree entries of `tree` in `git_dir`.
pub fn ls_tree_paths(sb: &Sandbox, git_dir: &Path, tree: &str) -> BTreeSet<String> {
    let run = sb.git_in_run(git_dir, ["ls-tree", "-r", "-z", "--name-only", tree]);
    run.assert_success();
    run.stdout_bytes
        .split(|b| *b == 0)
        .filter(|e| !e.is_empty())
        .map(|e| String::from_utf8_lossy(e).into_owned())
        .collect()
}

/// Every tree and blob reachable from `tree` exists in the store.
pub fn assert_tree_complete(sb: &Sandbox, git_dir: &Path, tree: &str) {
    let t = sb.git_in_run(git_dir, ["cat-file", "-t", tree]);
    t.assert_success();
    assert_eq!(
        t.stdout.trim(),
        "tree",
        "{tree} must be a tree in the store"
    );
    // Fails if any subtree is missing.
    let listing = sb.git_in_run(git_dir, ["ls-tree", "-r", "-t", "-z", tree]);
    listing.assert_success();
    let mut oids = Vec::new();
    for entry in listing
        .stdout_bytes
        .split(|b| *b == 0)
        .filter(|e| !e.is_empty())
    {
        let meta =
            String::from_utf8_lossy(entry.split(|b| *b == b'\t').next().unwrap()).into_owned();
        let oid = meta.split(' ').nth(2).expect("ls-tree entry").to_string();
        oids.extend_from_slice(oid.as_bytes());
        oids.push(b'\n');
    }
    let mut cmd = sb.git_command(None);
    cmd.arg("--git-dir")
        .arg(git_dir)
        .args(["cat-file", "--batch-check"]);
    let check = run_with_stdin(&mut cmd, &oids);
    check.assert_success();
    assert!(
        !check.stdout.contains("missing"),
        "objects of tree {tree} missing from the store:\n{}",
        check.stdout
    );
}

/// `git fsck --strict` exits 0 and reports no error/missing/broken object.
pub fn assert_fsck_clean(sb: &Sandbox, git_dir: &Path) {
    let run = sb.git_in_run(git_dir, ["fsck", "--strict", "--no-progress"]);
    let all = format!("{}\n{}", run.stdout, run.stderr).to_lowercase();
    assert!(
        run.status.success()
            && !all.contains("error")
            && !all.contains("missing")
            && !all.contains("broken"),
        "fsck of the store is not clean: {run}"
    );
}

// ---------------------------------------------------------------------------
// File-system snapshots
// ---------------------------------------------------------------------------

/// What we remember about one directory entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsEntry {
    pub kind: char,
    pub mode: u32,
    pub len: u64,
    pub mtime: (i64, i64),
    pub content: Option<Vec<u8>>,
    pub link: Option<PathBuf>,
}

/// Recursive listing of `root` (without following symlinks) with modes,
/// sizes, mtimes (ns), file contents and link targets. The root itself is
/// recorded under "".
pub fn fs_snapshot(root: &Path) -> BTreeMap<PathBuf, FsEntry> {
    fn entry(p: &Path) -> FsEntry {
        let md = p.symlink_metadata().unwrap();
        let ft = md.file_type();
        let kind = if ft.is_dir() {
            'd'
        } else if ft.is_symlink() {
            'l'
        } else if ft.is_file() {
            'f'
        } else {
            '?'
        };
        FsEntry {
            kind,
            mode: md.mode(),
            len: if kind == 'd' { 0 } else { md.len() },
            mtime: (md.mtime(), md.mtime_nsec()),
            content: if kind == 'f' {
                Some(fs::read(p).unwrap())
            } else {
                None
            },
            link: if kind == 'l' {
                Some(fs::read_link(p).unwrap())
            } else {
                None
            },
        }
    }
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, FsEntry>) {
        for e in fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            let en = entry(&p);
            let is_dir = en.kind == 'd';
            out.insert(p.strip_prefix(root).unwrap().to_path_buf(), en);
            if is_dir {
                walk(root, &p, out);
            }
        }
    }
    let mut out = BTreeMap::new();
    out.insert(PathBuf::new(), entry(root));
    walk(root, root, &mut out);
    out
}

/// Panics listing every added, removed or changed entry.
pub fn assert_same_snapshot(
    before: &BTreeMap<PathBuf, FsEntry>,
    after: &BTreeMap<PathBuf, FsEntry>,
    what: &str,
) {
    let mut diffs = Vec::new();
    for (p, b) in before {
        match after.get(p) {
            None => diffs.push(format!("removed: {}", p.display())),
            Some(a) if a != b => diffs.push(format!(
                "changed: {} (kind {}->{}, mode {:o}->{:o}, len {}->{}, mtime {:?}->{:?}, content {})",
                p.display(),
                b.kind,
                a.kind,
                b.mode,
                a.mode,
                b.len,
                a.len,
                b.mtime,
                a.mtime,
                if a.content == b.content { "same" } else { "differs" }
            )),
            _ => {}
        }
    }
    for p in after.keys() {
        if !before.contains_key(p) {
            diffs.push(format!("added: {}", p.display()));
        }
    }
    assert!(
        diffs.is_empty(),
        "{what} was modified:\n{}",
        diffs.join("\n")
    );
}

// ---------------------------------------------------------------------------
// Starting many processes at the same moment
// ---------------------------------------------------------------------------

/// A starting gate for processes: each gated process first blocks reading
/// one line from a FIFO (opened read-write, so opening never blocks);
/// [`StartGate::open`] writes one line per process, so they all start (exec)
/// at about the same moment. A process that reaches the gate late still
/// finds its line: the gate keeps the FIFO open until it is dropped.
pub struct StartGate {
    pub fifo: PathBuf,
    holder: fs::File,
}

impl StartGate {
    pub fn new(sb: &Sandbox, name: &str) -> StartGate {
        let fifo = sb.root.join(name);
        let st = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
        assert!(st.success());
        // O_RDWR on a FIFO does not block on Linux.
        let holder = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&fifo)
            .unwrap();
        StartGate { fifo, holder }
    }

    /// The shell snippet run before `exec "$@"`; `$0` is the FIFO.
    pub const WAIT: &'static str = "read line <>\"$0\" && exec \"$@\"";

    /// Lets `n` processes go, after giving them `settle` to reach the gate.
    pub fn open(&mut self, n: usize, settle: Duration) {
        thread::sleep(settle);
        self.holder.write_all(&vec![b'\n'; n]).unwrap();
    }
}

// ---------------------------------------------------------------------------
// Misc
// ---------------------------------------------------------------------------

/// A tiny xorshift64* PRNG (no rand crate). Seeded from the clock unless
/// REWIND_TEST_SEED is set; the seed is printed so a failure can be replayed.
pub struct XorShift(u64);

impl XorShift {
    pub fn from_time() -> Self {
        let seed = std::env::var("REWIND_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
            });
        eprintln!("XorShift seed: {seed} (set REWIND_TEST_SEED to replay)");
        XorShift(seed | 1)
    }

    /// A generator for a fixed `seed` (the caller prints and documents it).
    pub fn seeded(seed: u64) -> Self {
        XorShift(seed.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform-ish in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// Deterministic filler bytes of length `len`.
pub fn filler(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| b'a' + ((i as u32 * 7 + seed as u32) % 26) as u8)
        .collect()
}

/// A gated `sh` that writes `content` to `file`, then execs rewind with `args`.
pub fn gated_edit_then(
    sb: &Sandbox,
    gate: &StartGate,
    file: &Path,
    content: &str,
    args: &[&str],
) -> Command {
    let mut cmd = sb.isolated("sh");
    cmd.env("RUST_BACKTRACE", "1")
        .current_dir(&sb.root)
        .args([
            "-c",
            "read line <>\"$0\" && printf '%s\\n' \"$1\" > \"$2\" && shift 2 && exec \"$@\"",
        ])
        .arg(&gate.fifo)
        .arg(content)
        .arg(file)
        .arg(rewind_bin())
        .arg("--data-dir")
        .arg(&sb.data_dir)
        .args(args);
    cmd
}

// ---------------------------------------------------------------------------
// Holding a store's lock from another process
// ---------------------------------------------------------------------------

/// Another process holding a store's lock: `flock(1)` on `<store>/rewind.lock`, running a
/// `sleep` while it holds it (in its own process group). Dropping it kills the group, which
/// releases the lock.
pub struct LockHolder {
    child: Child,
}

impl LockHolder {
    /// Takes `store`'s lock; returns once it is held. Fails (never skips) without flock(1).
    pub fn hold(store: &Path) -> LockHolder {
        use std::io::BufRead;
        use std::os::unix::process::CommandExt;
        let mut child = Command::new("flock")
            .arg(store.join("rewind.lock"))
            .args(["sh", "-c", "echo locked && exec sleep 600"])
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("flock(1) from util-linux is needed for this test");
        let mut line = String::new();
        let stdout = child.stdout.take().unwrap();
        let _ = std::io::BufReader::new(stdout).read_line(&mut line);
        assert_eq!(line.trim(), "locked", "flock(1) did not take the lock");
        LockHolder { child }
    }

    /// The pid of the process that holds the lock (flock(1) itself).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for LockHolder {
    fn drop(&mut self) {
        let group = rustix::process::Pid::from_raw(self.child.id() as i32).unwrap();
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        let _ = self.child.wait();
    }
}

/// Runs `rewind -C project ARGS` (with `REWIND_NOW=now` when given) under strace, killed
/// (SIGKILL) at the `when`-th `syscall` of any thread (`at` = `(syscall, when)`); returns
/// whether it was killed. A run that fails without being killed, panics or outlives `deadline`
/// fails the test.
pub fn run_killed(
    sb: &Sandbox,
    project: &Path,
    now: Option<&str>,
    args: &[&str],
    at: (&str, u64),
    deadline: Duration,
) -> bool {
    run_killed_filtered(sb, project, now, args, (at, None), deadline)
}

/// [`run_killed`] counting only the calls on `path` (strace's `-P`; `syscall` may name several,
/// comma-separated), with no clock set.
pub fn run_killed_on(
    sb: &Sandbox,
    project: &Path,
    args: &[&str],
    at: (&str, u64),
    path: &Path,
) -> bool {
    run_killed_filtered(sb, project, None, args, (at, Some(path)), DEFAULT_DEADLINE)
}

/// Runs `rewind -C project ARGS` under strace, killed (SIGKILL) after the first `syscall` of
/// any thread (on `path`, when given: strace's `-P`) did its work and before it returned:
/// strace holds each thread's first such call 20 s on its way back, and the kill comes once the
/// trace shows the call. Returns whether it was killed there (`false`: it finished without
/// such a call). A run that fails otherwise or panics fails the test.
pub fn run_killed_after(
    sb: &Sandbox,
    project: &Path,
    args: &[&str],
    (syscall, on): (&str, Option<&Path>),
) -> bool {
    let log = sb.root.join(format!("strace-{syscall}.log"));
    let _ = fs::remove_file(&log);
    let mut strace: Vec<OsString> = vec!["-o".into(), log.clone().into()];
    strace.push(format!("--trace={syscall}").into());
    strace.push(format!("--inject={syscall}:delay_exit=20000000:when=1").into());
    let mut cmd = rewind_under_strace(sb, (&strace, on), project, args);
    let what = describe(&cmd);
    let mut child = spawn_piped(&mut cmd);
    let start = Instant::now();
    let call = format!("{syscall}(");
    let thread = loop {
        let trace = fs::read_to_string(&log).unwrap_or_default();
        let line = trace.lines().find(|line| line.contains(&call));
        if let Some(line) = line {
            break line
                .split_whitespace()
                .next()
                .and_then(|id| id.parse().ok());
        }
        if start.elapsed() > DEFAULT_DEADLINE || child.try_wait().ok().flatten().is_some() {
            break None;
        }
        thread::sleep(Duration::from_millis(20));
    };
    if let Some(thread) = thread {
        // (The call's work takes microseconds; its return waits 20 s.)
        thread::sleep(Duration::from_millis(500));
        let pid = rustix::process::Pid::from_raw(thread).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
    }
    let run = finish(child, DEFAULT_DEADLINE, &what);
    assert_no_panic(&run);
    // (Killed while its call was held, the tracee leaves strace a word about it.)
    assert!(
        thread.is_some() || !run.stderr.contains("strace:"),
        "strace could not run the injection: {run}"
    );
    match (run.code(), thread) {
        (Some(137) | None, Some(_)) => true,
        (Some(0), None) => false,
        _ => panic!(
            "`rewind {}` was not killed after {syscall}: {run}",
            args.join(" ")
        ),
    }
}

/// `strace -f -qq STRACE [-P on] rewind --data-dir … -C project ARGS`, run from the sandbox.
fn rewind_under_strace(
    sb: &Sandbox,
    (strace, on): (&[OsString], Option<&Path>),
    project: &Path,
    args: &[&str],
) -> Command {
    let mut cmd = sb.isolated("strace");
    if let Some(path) = on {
        cmd.arg("-P").arg(path);
    }
    cmd.env("RUST_BACKTRACE", "1")
        .current_dir(&sb.root)
        .args(["-f", "-qq"])
        .args(strace)
        .arg(rewind_bin())
        .arg("--data-dir")
        .arg(&sb.data_dir)
        .arg("-C")
        .arg(project)
        .args(args);
    cmd
}

fn run_killed_filtered(
    sb: &Sandbox,
    project: &Path,
    now: Option<&str>,
    args: &[&str],
    ((syscall, when), on): ((&str, u64), Option<&Path>),
    deadline: Duration,
) -> bool {
    let mut strace: Vec<OsString> = vec!["-o".into(), "/dev/null".into()];
    if on.is_some() {
        strace.push(format!("--trace={syscall}").into());
    }
    strace.push(format!("--inject={syscall}:signal=KILL:when={when}").into());
    let mut cmd = rewind_under_strace(sb, (&strace, on), project, args);
    if let Some(now) = now {
        cmd.env("REWIND_NOW", now);
    }
    let run = run_with_deadline(&mut cmd, deadline);
    assert_no_panic(&run);
    assert!(
        !run.stderr.contains("strace:"),
        "strace could not run the injection: {run}"
    );
    match run.code() {
        Some(0) => false,
        Some(137) | None => true,
        _ => panic!(
            "`rewind {}` failed without being killed: {run}",
            args.join(" ")
        ),
    }
}

/// Exit 1, `{"error": {"code": code, ...}}` on stdout, one line on stderr.
pub fn expect_error(run: &Run, code: &str) -> Value {
    assert_no_panic(run);
    run.assert_code(1);
    let json = one_json(run);
    assert_eq!(
        json["error"]["code"].as_str(),
        Some(code),
        "wrong error code: {run}"
    );
    assert_one_line_stderr(run);
    json
}

pub fn assert_one_line_stderr(run: &Run) {
    let lines: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(lines.len(), 1, "stderr must be a one-line message: {run}");
}

/// The tree `git -C repo add -A && git write-tree` writes for the repository whose work tree is
/// `repo` (a nested repository, a submodule), with `excludes` (paths relative to `repo`) left
/// out as pathspec exclusions: its id and its top level (`git ls-tree`). The index and the
/// objects go to a throw-away directory (`GIT_INDEX_FILE`, `GIT_OBJECT_DIRECTORY`): nothing is
/// written into the repository.
pub fn git_repo_tree(sb: &Sandbox, repo: &Path, excludes: &[&str]) -> (String, String) {
    let tmp = tempfile::Builder::new()
        .prefix("rewind-nested-oracle-")
        .tempdir()
        .unwrap();
    let objects = tmp.path().join("objects");
    fs::create_dir_all(&objects).unwrap();
    let git = |args: &[&str]| {
        let mut cmd = sb.git_command(Some(repo));
        cmd.env("GIT_INDEX_FILE", tmp.path().join("index"))
            .env("GIT_OBJECT_DIRECTORY", &objects)
            .args(args);
        let run = run_with_deadline(&mut cmd, DEFAULT_DEADLINE);
        run.assert_success();
        run.stdout
    };
    let mut add = vec!["add", "-A", "--", "."];
    let excluded: Vec<String> = excludes
        .iter()
        .map(|e| format!(":(exclude,literal){e}"))
        .collect();
    add.extend(excluded.iter().map(String::as_str));
    git(&add);
    let id = git(&["write-tree"]).trim().to_string();
    assert_oid(&id, "the nested repository's git oracle");
    let listing = git(&["ls-tree", &id]);
    (id, listing)
}

/// A JSON array of strings (an outcome's `written`, say), as strings.
pub fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|s| s.as_str().expect("a string").to_string())
        .collect()
}

/// `count` lines like a large source file's: mostly `line N` (N below 2,000, so lines repeat),
/// some blank lines and braces.
pub fn code_lines(rng: &mut XorShift, count: usize) -> Vec<String> {
    (0..count)
        .map(|_| match rng.below(10) {
            0 => ["", "{", "}", "    x;"][rng.below(4) as usize].to_string(),
            _ => format!("line {}", rng.below(2000)),
        })
        .collect()
}

/// `edits` random edits of `text`: a `line N` inserted, a line removed or one replaced.
pub fn edit_code_lines(rng: &mut XorShift, text: &mut Vec<String>, edits: usize) {
    for _ in 0..edits {
        let at = rng.below(text.len() as u64 + 1) as usize;
        let line = format!("line {}", rng.below(2000));
        match rng.below(3) {
            0 => text.insert(at, line),
            1 if at < text.len() => {
                text.remove(at);
            }
            _ if at < text.len() => text[at] = line,
            _ => {}
        }
    }
}

/// Sets `chattr +i` on a file or directory and removes it again on drop (root ignores permission bits).
pub struct Immutable(PathBuf);

impl Immutable {
    /// Fails the test unless `chattr +i` works (root, and a file system with the attribute).
    pub fn set(path: &Path) -> Immutable {
        let out = std::process::Command::new("chattr")
            .arg("+i")
            .arg(path)
            .output()
            .unwrap_or_else(|e| panic!("this test needs `chattr` (as root): {e}"));
        assert!(
            out.status.success(),
            "chattr +i {} failed (it needs root and a file system with the immutable \
             attribute): {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Immutable(path.to_owned())
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(&self.0)
            .status();
    }
}

/// `outer` (a program and its own arguments) running `rewind -C <project> ARGS` with the
/// sandbox's environment.
pub fn wrapped(p: &TestProject, mut outer: Command, args: &[&str]) -> Command {
    let rewind = p.rewind_command(args);
    outer.arg(rewind.get_program()).args(rewind.get_args());
    outer.env_clear();
    for (key, value) in rewind.get_envs() {
        if let Some(value) = value {
            outer.env(key, value);
        }
    }
    outer
}

/// A FIFO at `path`, or a symlink from it to `outside`.
pub fn plant(path: &Path, fifo: bool, outside: &Path) {
    match fifo {
        true => assert!(Command::new("mkfifo").arg(path).status().unwrap().success()),
        false => std::os::unix::fs::symlink(outside, path).unwrap(),
    }
}

/// `git diff --numstat -z --no-renames FROM TO` in the store: path -> counts (None: binary).
pub fn git_numstat(
    sb: &Sandbox,
    store: &Path,
    from: &str,
    to: &str,
) -> BTreeMap<String, Option<(u64, u64)>> {
    let run = sb.git_in_run(store, ["diff", "--numstat", "-z", "--no-renames", from, to]);
    run.assert_success();
    run.stdout_bytes
        .split(|b| *b == 0)
        .filter(|r| !r.is_empty())
        .map(|r| {
            let mut parts = r.splitn(3, |b| *b == b'\t');
            let add = String::from_utf8_lossy(parts.next().unwrap()).into_owned();
            let del = String::from_utf8_lossy(parts.next().unwrap()).into_owned();
            let path = String::from_utf8_lossy(parts.next().expect("numstat path")).into_owned();
            let counts = if add == "-" {
                None
            } else {
                Some((add.parse().unwrap(), del.parse().unwrap()))
            };
            (path, counts)
        })
        .collect()
}

/// `mount ARGS... TARGET`, unmounted (lazily) when dropped. Fails the test unless it works:
/// the tests run as root.
pub struct Mounted(PathBuf);

impl Mounted {
    pub fn new(args: &[&std::ffi::OsStr], target: &Path) -> Mounted {
        let out = Command::new("mount")
            .args(args)
            .arg(target)
            .output()
            .unwrap_or_else(|e| panic!("this test needs `mount` (as root): {e}"));
        assert!(
            out.status.success(),
            "this test mounts, which needs root: {out:?}"
        );
        Mounted(target.to_path_buf())
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}
