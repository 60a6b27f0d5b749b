//! The `rewind` command line: a thin layer over the library.
//!
//! Exit codes: 0 success, 1 an operation failed (one line on stderr; with `--json` also
//! `{"error": {"code", "message"}}` on stdout), 2 a usage error.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use serde_json::json;

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("rewind: {err}");
            if cli.json {
                let error = json!({"error": {"code": err.code(), "message": err.to_string()}});
                println!("{error}");
            }
            ExitCode::from(1)
        }
    }
}

fn run(cli: &Cli) -> rewind::Result<()> {
    rewind::now()?; // a malformed REWIND_NOW is an error for every command
    let data_dir = rewind::data_dir(cli.data_dir.as_deref())?;
    let project = cli.project.clone().unwrap_or_else(|| PathBuf::from("."));
    let store = rewind::Store::open(&project, &data_dir)?;
    match &cli.command {
        Command::Track { max_file_size } => {
            let options = rewind::TrackOptions {
                max_file_size: *max_file_size,
            };
            let snapshot = store.track(&options)?;
            if cli.json {
                println!(
                    "{}",
                    serde_json::to_string(&snapshot).expect("serializable")
                );
            } else {
                println!("{}", snapshot.hash);
                for skipped in &snapshot.skipped {
                    eprintln!("rewind: left out {}: {}", skipped.path, reason(skipped));
                }
            }
        }
        Command::Path => {
            if cli.json {
                println!("{}", json!({"path": store.git_dir()}));
            } else {
                println!("{}", store.git_dir().display());
            }
        }
    }
    Ok(())
}

fn reason(skipped: &rewind::Skipped) -> String {
    let reason = serde_json::to_value(skipped.reason).expect("enum serializes");
    let reason = reason.as_str().unwrap_or_default().replace('_', " ");
    match &skipped.detail {
        Some(detail) => format!("{reason} ({detail})"),
        None => reason,
    }
}
