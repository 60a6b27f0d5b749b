//! The `rewind` command line: a thin layer over the library.
//!
//! Exit codes: 0 success, 1 an operation failed (one line on stderr; with `--json` also
//! `{"error": {"code", "message"}}` on stdout), 2 a usage error.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use serde::Serialize;
use serde_json::json;

/// Whether the progress line is on screen (`Some(true)`), not (`Some(false)`), or ended (`None`).
static PROGRESS: std::sync::Mutex<Option<bool>> = std::sync::Mutex::new(Some(false));

/// Set once a write to stdout failed (`rewind patch X | head`): nothing more is printed there,
/// and the command goes on to its end.
static STDOUT_CLOSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Print a line to stdout, after ending the progress line; see [`write_stdout`].
macro_rules! outln {
    ($($arg:tt)*) => {{
        write_stdout(format!("{}\n", format_args!($($arg)*)).as_bytes());
    }};
}

/// Print a line to stderr, after ending the progress line; a closed stderr is ignored.
macro_rules! errln {
    ($($arg:tt)*) => {{
        end_progress();
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// An undo for AI coding agents: snapshots of a project as git trees in a private bare repository.
#[derive(Parser)]
#[command(name = "rewind", version, about)]
struct Cli {
    /// Where stores live [default: $REWIND_DATA_DIR, $XDG_DATA_HOME/rewind, ~/.local/share/rewind]
    #[arg(long, global = true, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// The project directory [default: the current directory]
    #[arg(short = 'C', global = true, value_name = "DIR")]
    project: Option<PathBuf>,
    /// Print results (and errors) as JSON on stdout
    #[arg(long, global = true)]
    json: bool,
    /// No progress display on stderr
    #[arg(long, short, global = true)]
    quiet: bool,
    /// Allow the home directory or / itself as the project (refused by default)
    #[arg(long, global = true)]
    allow_home: bool,
    /// How long a command that changes the store waits for another's lock before failing
    /// with `busy`, e.g. 500ms, 10s, 2m; 0: do not wait [default: 30s]
    #[arg(long, global = true, value_name = "DURATION", value_parser = parse_wait)]
    wait: Option<std::time::Duration>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Snapshot the project and print the tree id
    ///
    /// Example: rewind track && git --git-dir "$(rewind path)" ls-tree -r "$(rewind track)"
    Track {
        /// Leave out new files larger than this many bytes [default: rewind.maxFileSize, 2 MiB]
        #[arg(long, value_name = "BYTES")]
        max_file_size: Option<u64>,
    },
    /// Print the git directory of the project's store
    ///
    /// Example: git --git-dir "$(rewind path)" log --all
    Path,
    /// List the files that differ between a snapshot and the project now
    ///
    /// Example: rewind patch 4b825dc6
    Patch {
        /// A snapshot's tree id (full, or an unambiguous abbreviation)
        hash: String,
    },
    /// Show the unified diff from a snapshot to another one or to the project now
    ///
    /// Example: rewind diff "$before" "$after" --color=always | less -R
    Diff {
        from: String,
        /// [default: the project now]
        to: Option<String>,
        /// Colour the output as git does
        #[arg(long, value_enum, default_value_t = Color::Auto)]
        color: Color,
    },
    /// Print per-file changes with contents and +/- counts as JSON
    ///
    /// Example: rewind diff-full "$before" | jq '.[] | {file, additions, deletions}'
    DiffFull {
        from: String,
        /// [default: the project now]
        to: Option<String>,
    },
    /// Say whether the project differs from a snapshot ("true"/"false"; exit code 0 either way)
    ///
    /// Example: rewind has-changes "$before" && echo offer undo
    HasChanges { hash: String },
    /// Make the project's files exactly a snapshot (prints an undo id that puts them back)
    ///
    /// Example: undo=$(rewind --json restore "$before" | jq -r .undo); rewind restore "$undo"
    Restore {
        hash: String,
        /// Also overwrite files outside the current snapshot (ignored, too large), saving them first
        #[arg(long)]
        force: bool,
    },
    /// Bring only some paths back to their state in a snapshot
    ///
    /// Example: rewind revert "$before" -- src/main.rs docs/
    Revert {
        hash: String,
        /// Files or directories, project-relative or absolute inside the project
        #[arg(required = true, num_args = 1..)]
        paths: Vec<PathBuf>,
    },
    /// Delete expired snapshots and sessions and the objects only they used
    ///
    /// Example (hourly, from cron): 0 * * * * rewind prune --all
    Prune {
        /// Every store under the data directory, not only this project's
        #[arg(long)]
        all: bool,
        /// How long records live, e.g. 7d, 12h, 30m [default: rewind.retention, 7d]
        #[arg(long, value_name = "DURATION", value_parser = parse_retention)]
        retention: Option<std::time::Duration>,
        /// Turns kept per session, oldest dropped first [default: rewind.maxTurnsPerSession, 100]
        #[arg(long, value_name = "N")]
        max_turns: Option<usize>,
        /// Store size above which the oldest records go, e.g. 500M [default: rewind.maxSize]
        #[arg(long, value_name = "SIZE", value_parser = parse_size)]
        max_size: Option<u64>,
        /// Size to get under once over --max-size, e.g. 300M [default: rewind.targetSize]
        #[arg(long, value_name = "SIZE", value_parser = parse_size)]
        target_size: Option<u64>,
    },
    /// Show a turn (or a snapshot) with its diff, coloured as git colours it
    ///
    /// Example: rewind show --session chat-42 3      (or: rewind show <snapshot id>)
    Show {
        /// A turn id, or a snapshot's tree id
        what: String,
        /// The session of the turn (needed when several sessions have a turn of that name)
        #[arg(long)]
        session: Option<String>,
        #[arg(long, value_enum, default_value_t = Color::Auto)]
        color: Color,
    },
    /// List the store's records, newest first: snapshots, turns, undo points
    ///
    /// Example: rewind log
    Log,
    /// Check the store: location, size, lock, counts, last prune, missing objects
    ///
    /// Example: rewind doctor
    Doctor,
    /// Print a shell completion script
    ///
    /// Example: rewind completions bash > ~/.local/share/bash-completion/completions/rewind
    Completions { shell: clap_complete::Shell },
    /// Answer JSON-RPC 2.0 requests on stdin, one per line, until stdin closes
    ///
    /// Example: echo '{"jsonrpc":"2.0","id":1,"method":"track"}' | rewind serve
    Serve,
    /// Record an agent's turn: begin, note a file about to change, end
    #[command(subcommand)]
    Turn(TurnCommand),
    /// List turns, oldest first (all sessions, or one)
    ///
    /// Example: rewind turns --session chat-42
    Turns {
        #[arg(long)]
        session: Option<String>,
    },
    /// Undo what a session did from a turn on (default: its first turn), or one file of it
    ///
    /// Example: rewind undo --session chat-42 --turn 3 --file src/lib.rs
    ///
    /// Example: rewind undo --session chat-42 --last   (what the agent just did)
    Undo {
        #[arg(long)]
        session: String,
        /// The first turn to undo; later turns are undone too
        #[arg(long, conflicts_with = "last")]
        turn: Option<String>,
        /// Undo the most recent turn not undone yet (again: the one before it)
        #[arg(long, conflicts_with = "file")]
        last: bool,
        /// Only this path
        #[arg(long)]
        file: Option<PathBuf>,
        /// Also undo files edited by someone else since the last turn (their bytes are kept in the undo snapshot)
        #[arg(long)]
        force: bool,
    },
    /// Bring back what the session's last undo (not redone yet) changed, and only that
    ///
    /// Files changed since the undo are left alone and listed (use --force).
    ///
    /// Example: rewind redo --session chat-42
    Redo {
        #[arg(long)]
        session: String,
        /// Redo the most recent undo of this turn
        #[arg(long)]
        turn: Option<String>,
        /// Also overwrite files changed since the undo (their bytes are kept in the undo snapshot)
        #[arg(long)]
        force: bool,
    },
    /// Per-file totals across a session
    ///
    /// Example: rewind changes --session chat-42
    Changes {
        #[arg(long)]
        session: String,
    },
}

#[derive(Subcommand)]
enum TurnCommand {
    /// Snapshot the project as the turn's "before"
    ///
    /// Example: rewind turn begin --session chat-42 --turn 3
    Begin {
        #[arg(long)]
        session: String,
        #[arg(long)]
        turn: String,
    },
    /// Note a file the agent is about to edit (begins the turn if needed)
    ///
    /// Example: rewind turn track-file --session chat-42 --turn 3 src/lib.rs
    TrackFile {
        #[arg(long)]
        session: String,
        #[arg(long)]
        turn: String,
        path: PathBuf,
    },
    /// Snapshot the "after", record the turn, print what it changed
    ///
    /// Example: rewind turn end --session chat-42 --turn 3
    End {
        #[arg(long)]
        session: String,
        #[arg(long)]
        turn: String,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Color {
    Auto,
    Always,
    Never,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(level) = std::env::var("REWIND_LOG")
        .ok()
        .and_then(|l| l.parse().ok())
    {
        let level: tracing::Level = level;
        tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
            .with_max_level(level)
            .init();
    }
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            errln!("rewind: {err}");
            // A partial restore or prune --all already printed its outcome, listing failures.
            let printed = matches!(
                err,
                rewind::Error::Incomplete { .. } | rewind::Error::PruneFailed(_)
            );
            if cli.json && !printed {
                let error = json!({"error": {"code": err.code(), "message": err.to_string()}});
                outln!("{error}");
            }
            ExitCode::from(1)
        }
    }
}

fn parse_size(text: &str) -> Result<u64, String> {
    rewind::parse_size(text)
        .ok_or_else(|| format!("{text:?} is not a size such as 500M, 2G or 4096"))
}

/// The prune options the command line gives (the rest comes from each store's config).
fn prune_options(command: &Command) -> rewind::PruneOptions {
    match command {
        Command::Prune {
            retention,
            max_turns,
            max_size,
            target_size,
            ..
        } => rewind::PruneOptions {
            retention: *retention,
            max_turns_per_session: *max_turns,
            max_size: *max_size,
            target_size: *target_size,
        },
        _ => rewind::PruneOptions::default(),
    }
}

/// A lock wait: `0`, or a number with a unit (`ms`, `s`, `m`, `h`).
fn parse_wait(text: &str) -> Result<std::time::Duration, String> {
    let wait = match text.strip_suffix("ms") {
        Some(millis) => millis.parse().ok().map(std::time::Duration::from_millis),
        None if text == "0" => Some(std::time::Duration::ZERO),
        // A bare number would be days for `parse_duration`: too surprising for a wait.
        None if text.ends_with(|c: char| c.is_ascii_digit()) => None,
        None => rewind::parse_duration(text),
    };
    wait.ok_or_else(|| format!("{text:?} is not a duration such as 500ms, 10s, 2m or 0"))
}

fn parse_retention(text: &str) -> Result<std::time::Duration, String> {
    rewind::parse_duration(text)
        .ok_or_else(|| format!("{text:?} is not a duration such as 7d, 12h, 30m or 45s"))
}

fn run(cli: &Cli) -> rewind::Result<()> {
    rewind::now()?; // a malformed REWIND_NOW is an error for every command
    let data_dir = rewind::data_dir(cli.data_dir.as_deref())?;
    let open = rewind::OpenOptions {
        allow_home: cli.allow_home,
        lock_wait: cli.wait.unwrap_or(rewind::DEFAULT_LOCK_WAIT),
    };
    if let Command::Prune { all: true, .. } = &cli.command {
        let options = prune_options(&cli.command);
        let mut failures = 0;
        let mut outcomes = Vec::new();
        for store in rewind::Store::all(&data_dir, &open)? {
            match store.and_then(|store| Ok((store.project().to_owned(), store.prune(&options)?))) {
                Ok((project, outcome)) => outcomes.push(report_prune(cli, &project, outcome)),
                Err(err) => {
                    errln!("rewind: {err}");
                    failures += 1;
                }
            }
        }
        for aside in rewind::Store::set_aside_stores(&data_dir)? {
            errln!(
                "rewind: {}: a damaged store set aside; delete it once its records are not needed",
                aside.display()
            );
        }
        if cli.json {
            print_json(&outcomes);
        }
        return match failures {
            0 => Ok(()),
            n => Err(rewind::Error::PruneFailed(n)),
        };
    }
    if let Command::Completions { shell } = &cli.command {
        let mut command = <Cli as clap::CommandFactory>::command();
        // Into memory first: clap_complete panics when its writer fails.
        let mut script = Vec::new();
        clap_complete::generate(*shell, &mut command, "rewind", &mut script);
        write_stdout(&script);
        return Ok(());
    }
    let project = cli.project.clone().unwrap_or_else(|| PathBuf::from("."));
    let store = rewind::Store::open_with(&project, &data_dir, &open)?;
    if let Some(aside) = store.set_aside() {
        errln!(
            "rewind: warning: the store had lost its objects: moved to {} and a new one started",
            aside.display()
        );
    }
    let show_progress = !cli.json && !cli.quiet && std::io::stderr().is_terminal();
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        if show_progress {
            scope.spawn(|| draw_progress(&store, &done));
        }
        let result = command(cli, &store);
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        result
    })
}

/// Clear the progress line, if drawn, and draw no more: output follows.
fn end_progress() {
    let mut state = PROGRESS.lock().unwrap_or_else(|p| p.into_inner());
    if *state == Some(true) {
        let _ = write!(std::io::stderr(), "\r\x1b[K");
    }
    *state = None;
}

/// Draw `store`'s progress on stderr, from half a second in, until output starts or `done`.
fn draw_progress(store: &rewind::Store, done: &std::sync::atomic::AtomicBool) {
    let start = std::time::Instant::now();
    while !done.load(std::sync::atomic::Ordering::Relaxed) {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let (phase, count, total) = store.progress().get();
        if phase.is_empty() || start.elapsed() < std::time::Duration::from_millis(500) {
            continue;
        }
        let line = match total {
            0 => format!("{phase}: {count}"),
            total => format!(
                "{phase}: {count}/{total} ({}%)",
                count.min(total) * 100 / total
            ),
        };
        let mut state = PROGRESS.lock().unwrap_or_else(|p| p.into_inner());
        if state.is_none() {
            return;
        }
        let _ = write!(std::io::stderr(), "\r\x1b[K{line}");
        *state = Some(true);
    }
    end_progress();
}

/// Run one command on an open store.
fn command(cli: &Cli, store: &rewind::Store) -> rewind::Result<()> {
    match &cli.command {
        Command::Track { max_file_size } => {
            let options = rewind::TrackOptions {
                max_file_size: *max_file_size,
            };
            let snapshot = store.track(&options)?;
            if cli.json {
                print_json(&snapshot);
            } else {
                outln!("{}", snapshot.hash);
                print_left_out(&snapshot.skipped, "");
            }
        }
        Command::Path => {
            if cli.json {
                print_json(&json!({"path": store.git_dir().to_string_lossy()}));
            } else {
                outln!("{}", store.git_dir().display());
            }
        }
        Command::Patch { hash } => {
            let patch = store.patch(hash)?;
            if cli.json {
                print_json(&patch);
            } else {
                for path in &patch.paths {
                    outln!("{}", rewind::quote_path(path));
                }
            }
        }
        Command::Diff { from, to, color } => {
            let text = store.diff(from, to.as_deref())?;
            if cli.json {
                print_json(&json!({"diff": String::from_utf8_lossy(&text)}));
            } else {
                let text = if colored(*color) {
                    colorize(&text)
                } else {
                    text
                };
                write_stdout(&text);
            }
        }
        Command::DiffFull { from, to } => {
            print_json(&store.diff_full(from, to.as_deref(), &Default::default())?);
        }
        Command::HasChanges { hash } => {
            let hash = store.resolve_tree(hash)?.to_string();
            let changed = store.has_changes(&hash)?;
            if cli.json {
                print_json(&json!({"hash": hash, "changed": changed}));
            } else {
                outln!("{changed}");
            }
        }
        Command::Restore { hash, force } => {
            let options = rewind::RestoreOptions { force: *force };
            return report_restore(cli, store.restore(hash, &options)?);
        }
        Command::Revert { hash, paths } => return report_restore(cli, store.revert(hash, paths)?),
        Command::Prune { .. } => {
            let options = prune_options(&cli.command);
            let outcome = report_prune(cli, store.project(), store.prune(&options)?);
            if cli.json {
                print_json(&outcome);
            }
        }
        Command::Serve => {
            let (input, output) = (std::io::stdin().lock(), std::io::stdout());
            rewind::serve(store, input, output).map_err(|source| rewind::Error::Io {
                action: "serving on",
                path: "stdio".into(),
                source,
            })?;
        }
        Command::Show {
            what,
            session,
            color,
        } => {
            let (header, text) = show(store, what, session.as_deref())?;
            if cli.json {
                print_json(&json!({"what": header, "diff": String::from_utf8_lossy(&text)}));
            } else {
                let colored = colored(*color);
                let title = if colored {
                    format!("\x1b[33m{header}\x1b[m\n")
                } else {
                    format!("{header}\n")
                };
                write_stdout(title.as_bytes());
                write_stdout(&if colored { colorize(&text) } else { text });
            }
        }
        Command::Log => {
            let entries = store.log()?;
            if cli.json {
                print_json(&entries);
            } else {
                let now = rewind::now()?;
                for entry in entries {
                    outln!(
                        "{:<16} {:<9} {:.12}  {}",
                        age(now, entry.time),
                        entry.kind,
                        entry.tree,
                        quote(&entry.what)
                    );
                }
            }
        }
        Command::Doctor => {
            let report = store.doctor()?;
            if cli.json {
                print_json(&report);
            } else {
                print_doctor(&report, rewind::now()?);
            }
            if !report.is_healthy() {
                return Err(rewind::Error::Unhealthy(report.missing.len()));
            }
        }
        Command::Completions { .. } => unreachable!("handled before the store opens"),
        Command::Turn(TurnCommand::Begin { session, turn }) => {
            let start = store.begin_turn(session, turn)?;
            if cli.json {
                print_json(
                    &json!({"session": session, "turn": turn, "before": start.before, "skipped": start.skipped}),
                );
            } else {
                print_left_out(&start.skipped, UNDO_CANNOT);
            }
        }
        Command::Turn(TurnCommand::TrackFile {
            session,
            turn,
            path,
        }) => {
            store.track_file(session, turn, path)?;
            if cli.json {
                print_json(
                    &json!({"session": session, "turn": turn, "path": path.to_string_lossy()}),
                );
            }
        }
        Command::Turn(TurnCommand::End { session, turn }) => {
            let end = store.end_turn(session, turn)?;
            if cli.json {
                let mut row = json!(end);
                row["session"] = json!(session);
                row["turn"] = json!(turn);
                print_json(&row);
            } else {
                print_left_out(&end.skipped, UNDO_CANNOT);
                for file in &end.files {
                    print_file(file, "");
                }
            }
        }
        Command::Turns { session } => {
            let turns = store.turns(session.as_deref())?;
            if cli.json {
                print_json(&turns);
            } else {
                print_turns(&turns, rewind::now()?);
            }
        }
        Command::Undo {
            session,
            turn,
            file,
            force,
            last,
        } => {
            let outcome = match last {
                true => store.undo_last(session, *force)?,
                false => store.undo(session, turn.as_deref(), file.as_deref(), *force)?,
            };
            return report_undo(cli, outcome);
        }
        Command::Redo {
            session,
            turn,
            force,
        } => return report_undo(cli, store.redo(session, turn.as_deref(), *force)?),
        Command::Changes { session } => {
            let changes = store.changes(session)?;
            if cli.json {
                print_json(&changes);
            } else {
                for file in &changes.files {
                    print_file(file, "");
                }
                outln!(
                    "{} files, +{} -{}",
                    changes.total_files,
                    changes.total_additions,
                    changes.total_deletions
                );
            }
        }
    }
    Ok(())
}

/// Print an undo's or redo's outcome; an error when a file could not be changed.
fn report_undo(cli: &Cli, outcome: rewind::UndoOutcome) -> Result<(), rewind::Error> {
    if cli.json {
        print_json(&outcome);
    } else {
        print_changes(
            ("restored", &outcome.restored),
            &outcome.deleted,
            (
                &outcome.conflicts,
                "changed by someone else since, or in the way",
            ),
            &outcome.kept,
            &outcome.failed,
            ("the whole project as it was before", &outcome.undo),
        );
    }
    if !outcome.failed.is_empty() {
        return Err(rewind::Error::Incomplete {
            failed: outcome.failed.len(),
            undo: outcome.undo,
        });
    }
    Ok(())
}

/// One file of a turn or session: status, counts, whose change it is, path.
fn print_file(file: &rewind::TurnFile, indent: &str) {
    outln!(
        "{indent}{:<8} +{:<5} -{:<5} {:<11} {}",
        format!("{:?}", file.status).to_lowercase(),
        file.additions,
        file.deletions,
        format!("{:?}", file.origin).to_lowercase(),
        quote(&file.file)
    );
}

/// Say what a prune removed: a line per removed session on stderr, a summary on stdout
/// (unless `--json`). Returns the JSON row for the project.
fn report_prune(
    cli: &Cli,
    project: &std::path::Path,
    outcome: rewind::PruneOutcome,
) -> serde_json::Value {
    for session in &outcome.sessions_removed {
        let what = match outcome.sessions_removed_for_size.contains(session) {
            true => "session (the store was over its size quota, rewind.maxSize)",
            false => "expired session",
        };
        errln!(
            "rewind: {}: removed {what} {}",
            quote_os(project),
            quote(session)
        );
    }
    if !cli.json {
        let for_size = match outcome.snapshots_removed_for_size {
            0 => String::new(),
            n => format!(" ({n} for the size quota)"),
        };
        outln!(
            "{}: removed {} snapshots{for_size}, {} turns, {} objects ({} bytes)",
            quote_os(project),
            outcome.snapshots_removed,
            outcome.turns_removed,
            outcome.objects_removed,
            outcome.bytes_freed
        );
    }
    let mut row = json!(outcome);
    row["project"] = json!(project.to_string_lossy());
    row
}

/// Print a restore's, revert's or undo's changes: files on stdout, conflicts and failures on
/// stderr, then the command that goes back.
fn print_changes(
    (written_label, written): (&str, &[rewind::BString]),
    deleted: &[rewind::BString],
    (conflicts, why): (&[rewind::BString], &str),
    kept: &[rewind::BString],
    failed: &[rewind::Failure],
    (undo_label, undo): (&str, &str),
) {
    for path in written {
        outln!("{written_label} {}", quote(path));
    }
    for path in deleted {
        outln!("deleted {}", quote(path));
    }
    for path in conflicts {
        errln!("rewind: left alone {}: {why} (use --force)", quote(path));
    }
    for path in kept {
        errln!(
            "rewind: kept {}: the snapshot could not see it (ignored, in a nested repository, or left out for size or type)",
            quote(path)
        );
    }
    for failure in failed {
        errln!(
            "rewind: could not restore {}: {}",
            quote(&failure.path),
            failure.error
        );
    }
    outln!("{undo_label}: rewind restore {undo}");
}

/// Print what a restore or revert did; a partial one is an error (exit 1).
fn report_restore(cli: &Cli, outcome: rewind::RestoreOutcome) -> rewind::Result<()> {
    if cli.json {
        print_json(&outcome);
    } else {
        print_changes(
            ("written", &outcome.written),
            &outcome.deleted,
            (
                &outcome.conflicts,
                "something outside the current snapshot is in the way",
            ),
            &outcome.kept,
            &outcome.failed,
            ("undo", &outcome.undo),
        );
    }
    if outcome.is_complete() {
        Ok(())
    } else {
        Err(rewind::Error::Incomplete {
            failed: outcome.failed.len(),
            undo: outcome.undo,
        })
    }
}

/// A table of turns: age, session, turn, files and +/- (coloured when stdout is a terminal).
fn print_turns(turns: &[rewind::Turn], now: chrono::DateTime<chrono::Utc>) {
    let color = std::io::stdout().is_terminal();
    let paint = |code: &str, text: String| {
        if color {
            format!("\x1b[{code}m{text}\x1b[m")
        } else {
            text
        }
    };
    outln!(
        "{:<16} {:<20} {:<12} {:>5} {:>8} {:>8}  state",
        "age",
        "session",
        "turn",
        "files",
        "+",
        "-"
    );
    for turn in turns {
        let state = match (turn.rolled_back, turn.ended_at) {
            (true, _) => "rolled back",
            (false, None) => "open",
            (false, Some(_)) => "done",
        };
        outln!(
            "{:<16} {:<20} {:<12} {:>5} {:>8} {:>8}  {state}",
            age(now, turn.started_at),
            quote(&turn.session),
            quote(&turn.turn),
            turn.files,
            paint("32", format!("+{}", turn.additions)),
            paint("31", format!("-{}", turn.deletions)),
        );
        for file in &turn.changed {
            print_file(file, "    ");
        }
    }
}

/// "5 minutes ago", "just now", "3 days ago".
fn age(now: chrono::DateTime<chrono::Utc>, then: chrono::DateTime<chrono::Utc>) -> String {
    let seconds = (now - then).num_seconds().max(0);
    let (count, unit) = match seconds {
        0..=59 => return "just now".into(),
        60..=3599 => (seconds / 60, "minute"),
        3600..=86399 => (seconds / 3600, "hour"),
        _ => (seconds / 86400, "day"),
    };
    format!("{count} {unit}{} ago", if count == 1 { "" } else { "s" })
}

fn colored(color: Color) -> bool {
    match color {
        Color::Always => true,
        Color::Never => false,
        Color::Auto => std::io::stdout().is_terminal(),
    }
}

/// A turn's (or a snapshot's) title and diff text. `what` is a turn id (of `session`, or of the
/// one session that has it) or a snapshot id (diffed from the snapshot recorded before it).
fn show(
    store: &rewind::Store,
    what: &str,
    session: Option<&str>,
) -> rewind::Result<(String, Vec<u8>)> {
    let turns = store.turns(session)?;
    let matching: Vec<&rewind::Turn> = turns.iter().filter(|t| t.turn == what).collect();
    if let [turn] = matching[..] {
        let to = turn.after.as_deref();
        let title = format!(
            "turn {} of session {} — started {}{}: {} files, +{} -{}",
            quote(&turn.turn),
            quote(&turn.session),
            turn.started_at.to_rfc3339(),
            turn.ended_at.map_or(" (open)".to_string(), |e| format!(
                ", ended {}",
                e.to_rfc3339()
            )),
            turn.files,
            turn.additions,
            turn.deletions
        );
        return Ok((title, store.diff(&turn.before, to)?));
    }
    if matching.len() > 1 {
        return Err(rewind::Error::Turn {
            session: String::new(),
            turn: what.into(),
            reason: "exists in several sessions: give --session",
        });
    }
    if let Some(session) = session {
        return Err(rewind::Error::NoTurn {
            session: session.into(),
            turn: what.into(),
        });
    }
    let tree = store.resolve_tree(what)?.to_string();
    let snapshots: Vec<rewind::LogEntry> = store
        .log()?
        .into_iter()
        .filter(|e| e.kind == "snapshot")
        .collect();
    let taken = snapshots.iter().find(|e| e.tree == tree).map(|e| e.time);
    let previous = taken.and_then(|t| snapshots.iter().find(|e| e.time < t));
    let from = previous.map_or(
        "4b825dc642cb6eb9a060e54bf8d69288fbee4904".to_string(),
        |e| e.tree.clone(),
    );
    let title = format!(
        "snapshot {tree}{}, against {}",
        taken.map_or(String::new(), |t| format!(" taken {}", t.to_rfc3339())),
        previous.map_or("the empty tree".to_string(), |e| format!(
            "the snapshot before it ({:.12})",
            e.tree
        ))
    );
    Ok((title, store.diff(&from, Some(&tree))?))
}

fn print_doctor(report: &rewind::Doctor, now: chrono::DateTime<chrono::Utc>) {
    let mib = |bytes: u64| format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0));
    outln!("store         {}", quote(&report.git_dir));
    outln!(
        "project       {}{}",
        quote(&report.project),
        if report.project_exists {
            ""
        } else {
            " (missing)"
        }
    );
    outln!("size          {}", mib(report.size));
    outln!(
        "lock          {}",
        if report.locked {
            "held by another process"
        } else {
            "free"
        }
    );
    outln!(
        "objects       {} loose, {} pack(s)",
        report.loose_objects,
        report.packs
    );
    outln!(
        "records       {} snapshots, {} sessions, {} turns, {} undo points",
        report.snapshots,
        report.sessions,
        report.turns,
        report.undo_points
    );
    outln!(
        "last prune    {}",
        report
            .last_prune
            .map_or("never".to_string(), |t| age(now, t))
    );
    for aside in &report.set_aside {
        outln!("set aside     {aside} (damaged; delete it once not needed)");
    }
    match report.missing.len() {
        0 => outln!("check         every object the records reach is present"),
        n => outln!(
            "check         {n} object(s) missing: {}",
            report.missing.join(" ")
        ),
    }
}

fn print_json(value: &impl Serialize) {
    write_stdout(
        serde_json::to_string(value)
            .expect("results serialize")
            .as_bytes(),
    );
    write_stdout(b"\n");
}

/// Write to stdout. Once a write fails (a closed pipe: `rewind diff | head`), stop printing
/// quietly and let the command finish: what it changes, and its undo point, are kept.
fn write_stdout(bytes: &[u8]) {
    use std::sync::atomic::Ordering::Relaxed;
    end_progress();
    if STDOUT_CLOSED.load(Relaxed) {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    if stdout
        .write_all(bytes)
        .and_then(|()| stdout.flush())
        .is_err()
    {
        STDOUT_CLOSED.store(true, Relaxed);
    }
}

/// A name (path, session, turn) for human output, quoted as git quotes paths
/// (`core.quotePath=true`) when it holds control characters or non-ASCII bytes.
/// A path as [`quote`] prints names (its raw bytes, so a non-UTF-8 name is exact).
fn quote_os(path: &std::path::Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    rewind::quote_path(path.as_os_str().as_bytes())
}

fn quote(name: impl AsRef<[u8]>) -> String {
    rewind::quote_path(name.as_ref())
}

/// Say on stderr what a snapshot left out (`note` follows each reason).
fn print_left_out(skipped: &[rewind::Skipped], note: &str) {
    for skipped in skipped {
        let path = rewind::quote_path(&skipped.path);
        errln!("rewind: left out {path}: {}{note}", reason(skipped));
    }
}

/// What a turn's left-out line adds: an undo of the turn cannot bring that file back.
const UNDO_CANNOT: &str = " (an undo cannot bring it back)";

fn reason(skipped: &rewind::Skipped) -> String {
    let reason = serde_json::to_value(skipped.reason).expect("enum serializes");
    let reason = reason.as_str().unwrap_or_default().replace('_', " ");
    match &skipped.detail {
        Some(detail) => format!("{reason} ({detail})"),
        None => reason,
    }
}

/// git's default diff colours: bold headers, cyan hunk ranges, red deletions, green additions.
fn colorize(text: &[u8]) -> Vec<u8> {
    const BOLD: &[u8] = b"\x1b[1m";
    const CYAN: &[u8] = b"\x1b[36m";
    const RED: &[u8] = b"\x1b[31m";
    const GREEN: &[u8] = b"\x1b[32m";
    const RESET: &[u8] = b"\x1b[m";
    let mut out = Vec::with_capacity(text.len() * 2);
    let mut in_hunk = false;
    for line in text.split_inclusive(|&b| b == b'\n') {
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        in_hunk = (in_hunk || line.starts_with(b"@@")) && !line.starts_with(b"diff --git ");
        let paint = |out: &mut Vec<u8>, color: &[u8], part: &[u8]| {
            out.extend_from_slice(color);
            out.extend_from_slice(part);
            out.extend_from_slice(RESET);
        };
        match body.first() {
            Some(b'@') if in_hunk => {
                // "@@ -a,b +c,d @@" in cyan, the function context after it plain.
                let end = body[2..]
                    .windows(2)
                    .position(|w| w == b"@@")
                    .map_or(body.len(), |p| p + 4);
                paint(&mut out, CYAN, &body[..end]);
                out.extend_from_slice(&body[end..]);
            }
            Some(b'-') if in_hunk => paint(&mut out, RED, body),
            Some(b'+') if in_hunk => paint(&mut out, GREEN, body),
            _ if !in_hunk && !body.starts_with(b"Binary files ") => paint(&mut out, BOLD, body),
            _ => out.extend_from_slice(body),
        }
        if line.ends_with(b"\n") {
            out.push(b'\n');
        }
    }
    out
}
