//! The command line's grammar (clap derive): global options, commands, and the argument
//! groups several commands share.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// An undo for AI coding agents: snapshots of a project as git trees in a private bare repository.
#[derive(Parser)]
#[command(name = "rewind", version, about)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) global: Global,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Options every command takes.
#[derive(Args)]
pub(crate) struct Global {
    /// Where stores live [default: $REWIND_DATA_DIR, $XDG_DATA_HOME/rewind, ~/.local/share/rewind]
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) data_dir: Option<PathBuf>,
    /// The project directory [default: the current directory]
    #[arg(short = 'C', global = true, value_name = "DIR")]
    pub(crate) project: Option<PathBuf>,
    /// Print results (and errors) as JSON on stdout
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// No progress display on stderr
    #[arg(long, short, global = true)]
    pub(crate) quiet: bool,
    /// Allow the home directory or / itself as the project (refused by default)
    #[arg(long, global = true)]
    pub(crate) allow_home: bool,
    /// How long a command that changes the store waits for another's lock before failing
    /// with `busy`, e.g. 500ms, 10s, 2m; 0: do not wait [default: 30s]
    #[arg(long, global = true, value_name = "DURATION", value_parser = parse_wait)]
    pub(crate) wait: Option<Duration>,
}

/// `--session S`, required.
#[derive(Args)]
pub(crate) struct SessionArg {
    /// The agent's session (conversation) id
    #[arg(long)]
    pub(crate) session: String,
}

/// `--session S --turn T`, both required.
#[derive(Args)]
pub(crate) struct TurnArgs {
    /// The agent's session (conversation) id
    #[arg(long)]
    pub(crate) session: String,
    /// The turn's id within the session
    #[arg(long)]
    pub(crate) turn: String,
}

/// `--dry-run`.
#[derive(Args)]
pub(crate) struct DryRunArg {
    /// Change nothing: say what the command would do (with each file's diff under --json)
    #[arg(long)]
    pub(crate) dry_run: bool,
}

/// `--no-renames`, for commands that list changed files.
#[derive(Args)]
pub(crate) struct RenamesArg {
    /// List a moved file as a deletion and an addition (by default a deleted and an added
    /// file pair into one rename as `git diff -M` pairs them: exact moves first, then 50%
    /// similar)
    #[arg(long)]
    pub(crate) no_renames: bool,
}

impl RenamesArg {
    pub(crate) fn summary(&self) -> rewind::SummaryOptions {
        rewind::SummaryOptions {
            renames: !self.no_renames,
        }
    }
}

/// `--color WHEN`.
#[derive(Args)]
pub(crate) struct ColorArg {
    /// Colour the output as git does
    #[arg(long, value_enum, default_value_t = Color::Auto)]
    pub(crate) color: Color,
}

/// `--force`, for commands that would otherwise leave some files alone.
#[derive(Args)]
pub(crate) struct ForceArg {
    /// Also overwrite files changed by someone else (their bytes are kept in the undo snapshot)
    #[arg(long)]
    pub(crate) force: bool,
}

/// How `prune` chooses what goes.
#[derive(Args)]
pub(crate) struct PruneArgs {
    /// Every store under the data directory, not only this project's
    #[arg(long)]
    pub(crate) all: bool,
    /// How long records live, e.g. 7d, 12h, 30m [default: rewind.retention, 7d]
    #[arg(long, value_name = "DURATION", value_parser = parse_retention)]
    pub(crate) retention: Option<Duration>,
    /// How long an open turn keeps its session, e.g. 30d [default: rewind.abandonedTurnAfter, 30d]
    #[arg(long, value_name = "DURATION", value_parser = parse_retention)]
    pub(crate) abandoned_after: Option<Duration>,
    /// Turns kept per session, oldest dropped first [default: rewind.maxTurnsPerSession, 100]
    #[arg(long, value_name = "N")]
    pub(crate) max_turns: Option<usize>,
    /// Store size above which the oldest records go, e.g. 500M [default: rewind.maxSize]
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub(crate) max_size: Option<u64>,
    /// Size to get under once over --max-size, e.g. 300M [default: rewind.targetSize]
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub(crate) target_size: Option<u64>,
    #[command(flatten)]
    pub(crate) dry_run: DryRunArg,
}

impl PruneArgs {
    /// The prune options the command line gives (the rest comes from each store's config).
    pub(crate) fn options(&self) -> rewind::PruneOptions {
        rewind::PruneOptions {
            retention: self.retention,
            abandoned_after: self.abandoned_after,
            max_turns_per_session: self.max_turns,
            max_size: self.max_size,
            target_size: self.target_size,
            dry_run: self.dry_run.dry_run,
        }
    }
}

#[derive(Subcommand)]
pub(crate) enum Command {
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
    /// Byte for byte `git diff -M`: a moved file is one rename (`similarity index`, `rename
    /// from`, `rename to`) when the deleted and the added file are at least 50% similar.
    ///
    /// Example: rewind diff "$before" "$after" --color=always | less -R
    Diff {
        from: String,
        /// [default: the project now]
        to: Option<String>,
        #[command(flatten)]
        color: ColorArg,
        #[command(flatten)]
        renames: RenamesArg,
    },
    /// Print per-file changes with contents and +/- counts as JSON
    ///
    /// Every changed file has its row; a row whose text is left out (a side over 4 MiB, or past
    /// --max-bytes) says "truncated": true and still has its status and counts. A moved file
    /// is one row with "status": "renamed", "old_file" and "similarity" (percent), counted as
    /// `git diff -M --numstat` counts it.
    ///
    /// Example: rewind diff-full "$before" --max-bytes 1M -- src/ | jq '.[] | {file, additions, deletions}'
    DiffFull {
        from: String,
        /// [default: the project now]
        to: Option<String>,
        /// The most text (before + after, UTF-8 bytes) all rows together carry, e.g. 4M; rows
        /// from the first that does not fit come without text [default: 16M]
        #[arg(long, value_name = "SIZE", value_parser = parse_size)]
        max_bytes: Option<u64>,
        #[command(flatten)]
        renames: RenamesArg,
        /// Only changes at or below these files or directories (project-relative or absolute
        /// inside the project)
        #[arg(last = true, value_name = "PATHS")]
        paths: Vec<PathBuf>,
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
        #[command(flatten)]
        dry_run: DryRunArg,
    },
    /// Bring only some paths back to their state in a snapshot
    ///
    /// Example: rewind revert "$before" -- src/main.rs docs/
    Revert {
        hash: String,
        /// Files or directories, project-relative or absolute inside the project
        #[arg(required = true, num_args = 1..)]
        paths: Vec<PathBuf>,
        #[command(flatten)]
        dry_run: DryRunArg,
    },
    /// Delete expired snapshots and sessions and the objects only they used
    ///
    /// Example (hourly, from cron): 0 * * * * rewind prune --all
    Prune(PruneArgs),
    /// Show a turn (or a snapshot) with its diff, coloured as git colours it
    ///
    /// Example: rewind show --session chat-42 3      (or: rewind show <snapshot id>)
    Show {
        /// A turn id, or a snapshot's tree id
        what: String,
        /// The session of the turn (needed when several sessions have a turn of that name)
        #[arg(long)]
        session: Option<String>,
        #[command(flatten)]
        color: ColorArg,
        #[command(flatten)]
        renames: RenamesArg,
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
    ///
    /// A file-system watcher (inotify) keeps track of what changes, so a snapshot reads only
    /// the directories that changed; the `status` method says whether it runs.
    Serve {
        /// No watcher: every snapshot walks the whole project
        #[arg(long)]
        no_watch: bool,
    },
    /// Record an agent's turn: begin, note a file about to change, end
    #[command(subcommand)]
    Turn(TurnCommand),
    /// List turns, oldest first (all sessions, or one)
    ///
    /// Example: rewind turns --session chat-42      (or: rewind turns --last-session)
    Turns {
        /// Only this session's turns
        #[arg(long)]
        session: Option<String>,
        /// Only the turns of the project's most recent session, the one `undo --last-session` takes (whose last turn that changed files began last)
        #[arg(long, conflicts_with = "session")]
        last_session: bool,
        #[command(flatten)]
        renames: RenamesArg,
    },
    /// Undo what a session did from a turn on (default: its first turn), or one file of it
    ///
    /// Example: rewind undo --session chat-42 --turn 3 --file src/lib.rs
    ///
    /// Example: rewind undo --session chat-42 --last   (what the agent just did)
    ///
    /// Example: rewind undo --session chat-42 --turn 3 --dry-run   (what it would change, first)
    ///
    /// Example: rewind undo --session chat-42 --turn 3 --only   (turn 3 alone; turns 4, 5... stay)
    ///
    /// Example: rewind undo --session chat-42 --turn 3 --merge   (keep the user's edits since)
    ///
    /// Example: rewind undo --last-session   (the last turn of the project's most recent session)
    Undo {
        /// The agent's session (conversation) id
        #[arg(long, required_unless_present = "last_session")]
        session: Option<String>,
        /// The project's most recent session (the one whose last turn that changed files began
        /// last); without --turn or --file, from its last turn that changed files and is not
        /// undone yet
        #[arg(long, conflicts_with = "session")]
        last_session: bool,
        /// The first turn to undo; later turns are undone too
        #[arg(long, conflicts_with = "last")]
        turn: Option<String>,
        /// Undo the most recent turn not undone yet (again: the one before it); past an
        /// open turn the hooks began that changed nothing yet, as --last-session does
        #[arg(long, conflicts_with = "file")]
        last: bool,
        /// Only this path
        #[arg(long)]
        file: Option<PathBuf>,
        /// Undo --turn alone and keep the later turns: each file it changed gets a three-way
        /// merge (as git merge-file); overlapping edits are a conflict, left alone (with
        /// --force, written with conflict markers)
        #[arg(long, requires = "turn", conflicts_with_all = ["merge", "last"])]
        only: bool,
        /// Merge files someone else changed since instead of leaving them alone: the agent's
        /// hunks are taken out, the others stay
        #[arg(long)]
        merge: bool,
        #[command(flatten)]
        force: ForceArg,
        #[command(flatten)]
        dry_run: DryRunArg,
    },
    /// Bring back what the session's last undo (not redone yet) changed, and only that
    ///
    /// Files changed since the undo are left alone and listed (use --force).
    ///
    /// Example: rewind redo --session chat-42
    Redo {
        #[command(flatten)]
        session: SessionArg,
        /// Redo the most recent undo of this turn
        #[arg(long)]
        turn: Option<String>,
        #[command(flatten)]
        force: ForceArg,
    },
    /// Record an agent's turns from its hooks: reads the hook's JSON payload on stdin
    ///
    /// A prompt begins the session's next turn (1, 2, ...), the agent's stop ends it. Prints
    /// nothing on stdout and exits 0 whatever happens (a failure is one line on stderr and in
    /// <data dir>/hooks.log): a hook must never block or feed the agent.
    ///
    /// Example: echo "$payload" | rewind hook claude-code
    Hook {
        #[arg(value_enum)]
        agent: Agent,
    },
    /// Install rewind's hooks in an agent's settings, or take them out
    #[command(subcommand)]
    Hooks(HooksCommand),
    /// Per-file totals across a session
    ///
    /// Example: rewind changes --session chat-42
    Changes {
        #[command(flatten)]
        session: SessionArg,
        #[command(flatten)]
        renames: RenamesArg,
    },
}

#[derive(Subcommand)]
pub(crate) enum TurnCommand {
    /// Snapshot the project as the turn's "before"
    ///
    /// Example: rewind turn begin --session chat-42 --turn 3 --meta message_id=msg_01
    Begin {
        #[command(flatten)]
        turn: TurnArgs,
        /// Runtime metadata stored with the turn (`turns` and `show` return it); repeatable
        #[arg(long, value_name = "KEY=VALUE", value_parser = parse_meta)]
        meta: Vec<(String, String)>,
    },
    /// Note a file the agent is about to edit (begins the turn if needed)
    ///
    /// Example: rewind turn track-file --session chat-42 --turn 3 src/lib.rs
    TrackFile {
        #[command(flatten)]
        turn: TurnArgs,
        path: PathBuf,
    },
    /// Snapshot the "after", record the turn, print what it changed
    ///
    /// Example: rewind turn end --session chat-42 --turn 3
    End {
        #[command(flatten)]
        turn: TurnArgs,
        #[command(flatten)]
        renames: RenamesArg,
    },
}

/// `rewind hooks install|uninstall AGENT`.
#[derive(Subcommand)]
pub(crate) enum HooksCommand {
    /// Merge rewind's hooks into the agent's settings (a copy of the file as it was is kept)
    ///
    /// Example: rewind hooks install claude-code          (.claude/settings.json)
    Install(HooksArgs),
    /// Take rewind's hooks out of the agent's settings (the file as it was, when unchanged since)
    ///
    /// Example: rewind hooks uninstall claude-code --user (~/.claude/settings.json)
    Uninstall(HooksArgs),
}

/// The agent, the settings file, and whether to only show the change.
#[derive(Args)]
pub(crate) struct HooksArgs {
    #[arg(value_enum)]
    pub(crate) agent: Agent,
    /// The project's settings (-C, else the current directory) [default]
    #[arg(long = "project", id = "project_settings", conflicts_with = "user")]
    pub(crate) project_settings: bool,
    /// The user's settings, for every project
    #[arg(long)]
    pub(crate) user: bool,
    /// Print the change and write nothing
    #[arg(long)]
    pub(crate) dry_run: bool,
}

/// An agent whose hooks rewind understands.
#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum Agent {
    /// Claude Code: UserPromptSubmit and Stop, in .claude/settings.json
    ClaudeCode,
    /// Gemini CLI: BeforeAgent and AfterAgent, in .gemini/settings.json
    Gemini,
    /// Codex: UserPromptSubmit and Stop, in .codex/hooks.json
    Codex,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum Color {
    Auto,
    Always,
    Never,
}

fn parse_size(text: &str) -> Result<u64, String> {
    rewind::parse_size(text)
        .ok_or_else(|| format!("{text:?} is not a size such as 500M, 2G or 4096"))
}

/// A lock wait: `0`, or a number with a unit (`ms`, `s`, `m`, `h`).
fn parse_wait(text: &str) -> Result<Duration, String> {
    let wait = match text.strip_suffix("ms") {
        Some(millis) => millis.parse().ok().map(Duration::from_millis),
        None if text == "0" => Some(Duration::ZERO),
        // A bare number would be days for `parse_duration`: too surprising for a wait.
        None if text.ends_with(|c: char| c.is_ascii_digit()) => None,
        None => rewind::parse_duration(text),
    };
    wait.ok_or_else(|| format!("{text:?} is not a duration such as 500ms, 10s, 2m or 0"))
}

/// `key=value` (the key up to the first `=`) for `turn begin --meta`.
fn parse_meta(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.into(), value.into())),
        _ => Err(format!("{text:?} is not KEY=VALUE")),
    }
}

fn parse_retention(text: &str) -> Result<Duration, String> {
    rewind::parse_duration(text)
        .ok_or_else(|| format!("{text:?} is not a duration such as 7d, 12h, 30m or 45s"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_wait_wants_a_unit_except_for_zero() {
        assert_eq!(parse_wait("0"), Ok(Duration::ZERO));
        assert_eq!(parse_wait("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_wait("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_wait("5").is_err(), "a bare number would be days");
        assert!(parse_wait("soon").is_err());
    }

    #[test]
    fn the_grammar_is_consistent() {
        <Cli as clap::CommandFactory>::command().debug_assert();
    }
}
