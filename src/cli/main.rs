//! The `rewind` command line: a thin layer over the library.
//!
//! Exit codes: 0 success, 1 an operation failed (one line on stderr; with `--json` also
//! `{"error": {"code", "message"}}` on stdout), 2 a usage error.

mod args;
mod color;
mod hook;
mod hooks_install;
mod jsonc;
mod progress;
mod render;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Parser;
use serde_json::json;

use args::{Cli, Command, Global, HooksCommand, TurnArgs, TurnCommand};
use render::{errln, outln, print_json, quote, write_stdout};

fn main() -> ExitCode {
    rewind::one_malloc_arena_under_an_address_space_limit();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // An agent runs `rewind hook ...`: exit 2 would block it (a settings file written for
        // another version of rewind, say), so a usage error there is one line and exit 0.
        Err(err) if err.use_stderr() && std::env::args_os().any(|arg| arg == "hook") => {
            let first = err.to_string();
            let first = first.lines().next().unwrap_or_default();
            errln!("rewind hook: {}", first.trim_start_matches("error: "));
            return ExitCode::SUCCESS;
        }
        // Help and the version go to stdout: one that cannot be written is an error, as for
        // any command (a closed pipe is not).
        Err(err) if !err.use_stderr() => {
            return match err.print() {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    errln!("rewind: writing the output: {e}");
                    ExitCode::from(1)
                }
                _ => ExitCode::SUCCESS,
            };
        }
        Err(err) => err.exit(),
    };
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
    match &cli.command {
        // Whatever happens, a hook exits 0 and prints nothing on stdout.
        Command::Hook { agent } => return hook::run(*agent, &cli.global),
        Command::Hooks(command) => return hooks(command, &cli.global),
        _ => {}
    }
    match run(&cli) {
        Ok(()) => match render::stdout_failure() {
            None => ExitCode::SUCCESS,
            Some(e) => {
                errln!(
                    "rewind: writing the output: {e} (the command ran: `rewind log` lists what \
                     it recorded)"
                );
                ExitCode::from(1)
            }
        },
        Err(err) => {
            errln!("rewind: {err}");
            // A partial restore, prune --all or an unhealthy doctor already printed its
            // outcome, which says what failed: under --json one document, nothing after it.
            let printed = matches!(
                err,
                rewind::Error::Incomplete { .. }
                    | rewind::Error::Unrecorded(_)
                    | rewind::Error::PruneFailed(_)
                    | rewind::Error::Unhealthy(_)
            );
            if cli.global.json && !printed {
                let error = json!({"error": {"code": err.code(), "message": err.to_string()}});
                outln!("{error}");
            }
            ExitCode::from(1)
        }
    }
}

/// `rewind hooks install|uninstall`: the agent's settings file, no store.
fn hooks(command: &HooksCommand, global: &Global) -> ExitCode {
    let (install, args) = match command {
        HooksCommand::Install(args) => (true, args),
        HooksCommand::Uninstall(args) => (false, args),
    };
    let scope = match args.user {
        true => hooks_install::Scope::User,
        false => hooks_install::Scope::Project,
    };
    let done = match install {
        true => hooks_install::install(args.agent, scope, args.dry_run, global),
        false => hooks_install::uninstall(args.agent, scope, args.dry_run, global),
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            errln!("rewind: {}", failure.message);
            if global.json {
                outln!(
                    "{}",
                    json!({"error": {"code": failure.code, "message": failure.message}})
                );
            }
            ExitCode::from(1)
        }
    }
}

fn run(cli: &Cli) -> rewind::Result<()> {
    let global = &cli.global;
    let open = rewind::OpenOptions::new(rewind::data_dir(global.data_dir.as_deref())?)
        .allow_home(global.allow_home)
        .lock_wait(global.wait.unwrap_or(rewind::DEFAULT_LOCK_WAIT))
        .clock(clock()?); // a malformed REWIND_NOW is an error for every command
    match &cli.command {
        Command::Prune(prune) if prune.all => {
            let all = rewind::prune_all(&open, &prune.options())?;
            let mut rows = Vec::new();
            for (project, outcome) in &all.pruned {
                rows.push(render::report_prune(global.json, project, outcome));
            }
            for err in &all.failed {
                errln!("rewind: {err}");
                rows.push(json!({"error": {"code": err.code(), "message": err.to_string()}}));
            }
            for aside in &all.set_aside {
                errln!(
                    "rewind: {}: a damaged store set aside; delete it once its records are not needed",
                    aside.display()
                );
            }
            if global.json {
                print_json(&rows);
            }
            return all.ensure_complete();
        }
        Command::Completions { shell } => {
            let mut command = <Cli as clap::CommandFactory>::command();
            // Into memory first: clap_complete panics when its writer fails.
            let mut script = Vec::new();
            clap_complete::generate(*shell, &mut command, "rewind", &mut script);
            write_stdout(&script);
            return Ok(());
        }
        _ => {}
    }
    let project = global.project.clone().unwrap_or_else(|| PathBuf::from("."));
    let store = rewind::Store::open(&project, &open)?;
    if let Some(aside) = store.set_aside() {
        errln!(
            "rewind: warning: the store had lost its objects: moved to {} and a new one started",
            aside.display()
        );
    }
    let show_progress = !global.json && !global.quiet && std::io::stderr().is_terminal();
    let done = AtomicBool::new(false);
    let report = std::sync::Arc::new(rewind::Progress::default());
    let call = rewind::Call::new().progress(report.clone());
    std::thread::scope(|scope| {
        if show_progress {
            // (A process that cannot start it goes without the display.)
            let thread = std::thread::Builder::new().name("rewind-progress".into());
            let _ = thread.spawn_scoped(scope, || progress::draw(&report, &done));
        }
        let result = call.run(|| command(global, &cli.command, &store));
        done.store(true, Ordering::Relaxed);
        // (A stderr that cannot be written leaves them in the store.)
        store
            .take_notices()
            .say_each(|notice| render::write_stderr(&format!("rewind: warning: {notice}")));
        result
    })
}

/// Run one command on an open store.
fn command(global: &Global, command: &Command, store: &rewind::Store) -> rewind::Result<()> {
    let json = global.json;
    match command {
        Command::Track { max_file_size } => {
            let options = rewind::TrackOptions {
                max_file_size: *max_file_size,
            };
            let snapshot = store.track(&options)?;
            if json {
                print_json(&snapshot);
            } else {
                outln!("{}", snapshot.hash);
                render::print_left_out(&snapshot.skipped, "");
            }
        }
        Command::Path => {
            if json {
                print_json(&json!({"path": store.git_dir().to_string_lossy()}));
            } else {
                outln!("{}", store.git_dir().display());
            }
        }
        Command::Patch { hash } => {
            let patch = store.patch(store.resolve(hash)?)?;
            if json {
                print_json(&patch);
            } else {
                for path in &patch.files {
                    outln!("{}", quote(path));
                }
            }
        }
        Command::Diff {
            from,
            to,
            color,
            renames,
        } => {
            let (from, to) = store.resolve_range(from, to.as_deref())?;
            let options = rewind::DiffOptions {
                renames: !renames.no_renames,
                ..Default::default()
            };
            let text = store.diff_with(from, to, &options)?;
            if json {
                print_json(&json!({"diff": String::from_utf8_lossy(&text)}));
            } else if color::wanted(color.color) {
                write_stdout(&color::colorize(&text));
            } else {
                write_stdout(&text);
            }
        }
        Command::DiffFull {
            from,
            to,
            max_bytes,
            renames,
            paths,
        } => {
            let (from, to) = store.resolve_range(from, to.as_deref())?;
            let mut options = rewind::DiffOptions {
                paths: paths.clone(),
                renames: !renames.no_renames,
                ..Default::default()
            };
            if let Some(max_bytes) = max_bytes {
                options.max_total_content_bytes = *max_bytes;
            }
            print_json(&store.diff_full(from, to, &options)?);
        }
        Command::HasChanges { hash } => {
            let hash = store.resolve(hash)?;
            let changed = store.has_changes(hash)?;
            if json {
                print_json(&json!({"hash": hash, "changed": changed}));
            } else {
                outln!("{changed}");
            }
        }
        Command::Restore {
            hash,
            force,
            dry_run,
        } => {
            let options = rewind::RestoreOptions {
                force: *force,
                dry_run: dry_run.dry_run,
            };
            let outcome = store.restore(store.resolve(hash)?, &options)?;
            let why = "something outside the current snapshot is in the way";
            return report(json, &outcome, (why, Some(*force)), "undo");
        }
        Command::Revert {
            hash,
            paths,
            dry_run,
        } => {
            let options = rewind::RestoreOptions {
                dry_run: dry_run.dry_run,
                ..Default::default()
            };
            let outcome = store.revert_with(store.resolve(hash)?, paths, &options)?;
            let why = "something outside the current snapshot is in the way";
            return report(json, &outcome, (why, None), "undo");
        }
        Command::Prune(prune) => {
            let outcome = store.prune(&prune.options())?;
            let row = render::report_prune(json, store.project(), &outcome);
            if json {
                print_json(&row);
            }
        }
        Command::Serve { no_watch } => serve(store, !no_watch)?,
        Command::Show {
            what,
            session,
            color,
            renames,
        } => {
            let shown = store.show_with(what, session.as_deref(), &renames.summary())?;
            let meta = shown.turn.as_ref().map(|turn| &turn.meta);
            if json {
                let mut row =
                    json!({"what": shown.title, "diff": String::from_utf8_lossy(&shown.diff)});
                if let Some(meta) = meta {
                    row["meta"] = json!(meta);
                }
                print_json(&row);
            } else {
                let color = color::wanted(color.color);
                write_stdout(color::paint(color, "33", shown.title).as_bytes());
                write_stdout(b"\n");
                for (key, value) in meta.into_iter().flatten() {
                    outln!("{}: {}", quote(key), quote(value));
                }
                match color {
                    true => write_stdout(&color::colorize(&shown.diff)),
                    false => write_stdout(&shown.diff),
                }
            }
        }
        Command::Log => {
            let entries = store.log()?;
            if json {
                print_json(&entries);
            } else {
                let now = clock()?.now()?;
                for entry in entries {
                    outln!(
                        "{:<16} {:<9} {:.12}  {}",
                        render::age(now, entry.time),
                        entry.kind,
                        entry.tree,
                        quote(&entry.what)
                    );
                }
            }
        }
        Command::Doctor => {
            let report = store.doctor()?;
            if json {
                print_json(&report);
            } else {
                render::print_doctor(&report, clock()?.now()?);
            }
            report.ensure_healthy()?;
        }
        Command::Completions { .. } | Command::Hook { .. } | Command::Hooks(_) => {
            unreachable!("handled before the store opens")
        }
        Command::Turn(TurnCommand::Begin {
            turn: TurnArgs { session, turn },
            meta,
        }) => {
            let options = rewind::BeginOptions::meta(meta.iter().cloned().collect());
            let start = store.begin_turn_with(session, turn, &options)?;
            if json {
                print_json(
                    &json!({"session": session, "turn": turn, "before": start.before, "skipped": start.skipped}),
                );
            } else {
                render::print_left_out(&start.skipped, render::UNDO_CANNOT);
            }
        }
        Command::Turn(TurnCommand::TrackFile {
            turn: TurnArgs { session, turn },
            path,
        }) => {
            store.track_file(session, turn, path)?;
            if json {
                print_json(
                    &json!({"session": session, "turn": turn, "path": path.to_string_lossy()}),
                );
            }
        }
        Command::Turn(TurnCommand::End {
            turn: TurnArgs { session, turn },
            renames,
        }) => {
            let end = store.end_turn_with(session, turn, &renames.summary())?;
            if json {
                let mut row = json!(end);
                row["session"] = json!(session);
                row["turn"] = json!(turn);
                print_json(&row);
            } else {
                render::print_left_out(&end.skipped, render::UNDO_CANNOT);
                for file in &end.files {
                    render::print_file(file, "");
                }
            }
        }
        Command::Turns {
            session,
            last_session,
            renames,
        } => {
            // (The session `undo --last-session` takes, so that the two agree.)
            let session = match last_session {
                true => Some(last_session_to_undo(store)?),
                false => session.clone(),
            };
            let turns = store.turns_with(session.as_deref(), &renames.summary())?;
            if json {
                print_json(&turns);
            } else {
                render::print_turns(&turns, clock()?.now()?);
            }
        }
        Command::Undo {
            session,
            last_session,
            turn,
            file,
            force,
            dry_run,
            last,
            only,
            merge,
        } => {
            let session = match (session, last_session) {
                (Some(session), false) => session.clone(),
                _ => {
                    let session = last_session_to_undo(store)?;
                    errln!("rewind: undoing session {}", quote(&session));
                    session
                }
            };
            // (Its open turn, with --last-session: refused when it changed files. An empty one
            // of the agent's, with --last-session or --last: ended, and begun again after.)
            let whole_turns = turn.is_none() && file.is_none();
            let aside = match *last_session || (*last && whole_turns) {
                true => hook::set_open_turn_aside(store, &session, dry_run.dry_run, *last_session)?,
                false => None,
            };
            let force = force.force;
            // --last-session alone, or --last past the agent's empty open turn: what the agent
            // just did, from its last turn that changed files (a turn where it only answered
            // would undo nothing); --last without such.
            let alone = whole_turns && (*last_session || aside.is_some());
            // (With --force, the turn the plain press left files of alone counts again.)
            let turn = match alone {
                true => last_changing_turn(store, &session, force)?,
                false => turn.clone(),
            };
            let last = match alone {
                true => turn.is_none(),
                false => *last,
            };
            let options = rewind::UndoOptions {
                turn,
                file: file.clone(),
                force,
                dry_run: dry_run.dry_run,
                only: *only,
                merge: *merge,
            };
            let outcome = match last {
                true => store.undo_last_with(&session, &options),
                false => store.undo(&session, &options),
            };
            if let Some(meta) = aside.and_then(|aside| aside.reopen) {
                hook::reopen(store, &session, meta)?;
            }
            let outcome = outcome?;
            let why = "changed by someone else since, or in the way";
            let undo = "the whole project as it was before";
            return report(json, &outcome, (why, Some(force)), undo);
        }
        Command::Redo {
            session,
            turn,
            force,
        } => {
            let options = rewind::RedoOptions {
                turn: turn.clone(),
                force: force.force,
            };
            let outcome = store.redo(&session.session, &options)?;
            let why = "changed by someone else since, or in the way";
            let undo = "the whole project as it was before";
            return report(json, &outcome, (why, Some(options.force)), undo);
        }
        Command::Changes { session, renames } => {
            let changes = store.changes_with(&session.session, &renames.summary())?;
            if json {
                print_json(&changes);
            } else {
                for file in &changes.files {
                    render::print_file(file, "");
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

/// Turns listed one path a file, as recorded (the choices below need no renames).
const PER_PATH: rewind::SummaryOptions = rewind::SummaryOptions { renames: false };

/// The project's most recent session: the one whose last turn began last. Reads every turn.
fn last_session_of(store: &rewind::Store) -> rewind::Result<String> {
    let turns = store.turns_with(None, &PER_PATH)?;
    let last = turns.into_iter().max_by_key(|turn| turn.started_at);
    last.map(|turn| turn.session)
        .ok_or_else(|| rewind::Error::NoSession("(any: the project has no turns yet)".into()))
}

/// The session `undo --last-session` undoes: the one whose last turn that changed files
/// (ended, rolled back or not, or still open) began last (a session that since only answered
/// a question undoes nothing); else [`last_session_of`]. Reads every turn, and costs a dry-run
/// undo per open turn newer than that one.
fn last_session_to_undo(store: &rewind::Store) -> rewind::Result<String> {
    let mut turns = store.turns_with(None, &PER_PATH)?;
    turns.sort_by_key(|turn| turn.started_at);
    for turn in turns.iter().rev() {
        // (Rolled back or not: pressed again after its turns are undone, it says so, rather
        // than going on to another session's work. Open, interrupted, with files changed: that
        // session's undo refuses it, rather than undoing another session's finished work.)
        // (One left open when its session went on ended there: it has an "after".)
        let changed = match (turn.after, turn.rolled_back) {
            (Some(_), _) => turn.files > 0,
            // (Its own changes: what undoing it would write or delete. One whose only changes
            // are another session's or the user's, which its undo leaves alone, changed none.)
            (None, false) => hook::undo_would_change(store, turn)?,
            (None, true) => false,
        };
        if changed {
            return Ok(turn.session.clone());
        }
    }
    last_session_of(store)
}

/// The session's last ended turn that changed files of its own (not only files another
/// session changed meanwhile, which its undo leaves alone) and is not rolled back, or whose
/// undo was stopped (with `force`, any that changed files, rolled back or not: `--force` takes
/// that turn again and overwrites what it left alone); a turn left open before the session's
/// last counts as ended. Reads the session's turns.
fn last_changing_turn(
    store: &rewind::Store,
    session: &str,
    force: bool,
) -> rewind::Result<Option<String>> {
    let turns = store.turns_with(Some(session), &PER_PATH)?;
    let own = |t: &rewind::Turn| {
        let theirs = [rewind::Origin::Shared, rewind::Origin::Other];
        t.changed.iter().any(|f| !theirs.contains(&f.origin))
    };
    for t in turns.iter().rev() {
        // (One left open before the last ended where the next began: it has an "after".)
        let changed = match t.after {
            _ if t.rolled_back && !t.undo_stopped && !force => false,
            Some(_) => (force && t.files > 0) || own(t),
            None => false,
        };
        if changed {
            return Ok(Some(t.turn.clone()));
        }
    }
    Ok(None)
}

/// Print what a restore, revert, undo or redo did; a partial one (or an undo or redo whose
/// record failed) is an error (exit 1). `why` says why conflicts were left alone, with whether
/// `--force` was given (`None`: the command has none).
fn report(
    json: bool,
    outcome: &rewind::RestoreOutcome,
    why: (&str, Option<bool>),
    undo_label: &str,
) -> rewind::Result<()> {
    if json {
        print_json(outcome);
    } else {
        render::print_outcome(outcome, why, undo_label);
    }
    outcome.ensure_complete()
}

/// `rewind serve` on stdin and stdout.
/// Serve JSON-RPC on stdio, with the file-system watcher on unless `watch` is false.
fn serve(store: &rewind::Store, watch: bool) -> rewind::Result<()> {
    if watch {
        let status = store.watch();
        if let Some(reason) = status.reason.filter(|_| !status.active) {
            tracing::warn!(%reason, "every snapshot walks the project");
        }
    }
    let (input, output) = (std::io::stdin().lock(), std::io::stdout());
    let served = rewind::serve(store, input, output).map_err(|source| rewind::Error::Io {
        action: "serving on",
        path: "stdio".into(),
        source,
    });
    store.unwatch();
    served
}

/// The clock: `$REWIND_NOW` (RFC 3339) when set, so that tests can fix the time; else the
/// system's.
fn clock() -> rewind::Result<rewind::Clock> {
    match std::env::var("REWIND_NOW") {
        Ok(value) if !value.is_empty() => rewind::Clock::from_rfc3339(&value),
        _ => Ok(rewind::Clock::system()),
    }
}
