//! Human and JSON output: every line the command line prints goes through here.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;
use serde_json::json;

use crate::color::paint;
use crate::progress;

/// Set once a write to stdout failed (`rewind patch X | head`): nothing more is printed there,
/// and the command goes on to its end.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Why stdout could not be written, when it was not closed by its reader (a full disk, an I/O
/// error): the command's result is lost, which is an error.
static STDOUT_FAILED: std::sync::Mutex<Option<std::io::ErrorKind>> = std::sync::Mutex::new(None);

/// The failure that lost some of stdout, if one did (not a closed pipe).
pub(crate) fn stdout_failure() -> Option<std::io::Error> {
    let failed = STDOUT_FAILED.lock().unwrap_or_else(|p| p.into_inner());
    failed.map(std::io::Error::from)
}

/// Print a line to stdout, after ending the progress line; see [`write_stdout`].
macro_rules! outln {
    ($($arg:tt)*) => {{
        $crate::render::write_stdout(format!("{}\n", format_args!($($arg)*)).as_bytes());
    }};
}

/// Print a line to stderr, after ending the progress line; a closed stderr is ignored.
macro_rules! errln {
    ($($arg:tt)*) => {{
        $crate::progress::end();
        let _ = std::io::Write::write_fmt(&mut std::io::stderr(), format_args!("{}\n", format_args!($($arg)*)));
    }};
}

pub(crate) use {errln, outln};

/// Write `line` and a newline to stderr; whether it was written.
pub(crate) fn write_stderr(line: &str) -> bool {
    progress::end();
    std::io::Write::write_all(&mut std::io::stderr(), format!("{line}\n").as_bytes()).is_ok()
}

/// Write to stdout. Once a write fails, stop printing and let the command finish: what it
/// changes, and its undo point, are kept. A closed pipe (`rewind diff | head`) is quiet; any
/// other failure is kept for [`stdout_failure`].
pub(crate) fn write_stdout(bytes: &[u8]) {
    progress::end();
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            *STDOUT_FAILED.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.kind());
        }
    }
}

/// `value` as one line of JSON on stdout.
pub(crate) fn print_json(value: &impl Serialize) {
    write_stdout(
        serde_json::to_string(value)
            .expect("results serialize")
            .as_bytes(),
    );
    write_stdout(b"\n");
}

/// A name (path, session, turn) for human output, quoted as git quotes paths
/// (`core.quotePath=true`) when it holds control characters or non-ASCII bytes.
pub(crate) fn quote(name: impl AsRef<[u8]>) -> String {
    rewind::quote_path(name.as_ref())
}

/// A path as [`quote`] prints names (its raw bytes, so a non-UTF-8 name is exact).
pub(crate) fn quote_os(path: &Path) -> String {
    quote(path.as_os_str().as_encoded_bytes())
}

/// Say on stderr what a snapshot left out (`note` follows each reason).
pub(crate) fn print_left_out(skipped: &[rewind::Skipped], note: &str) {
    for skipped in skipped {
        let reason = skipped.reason.as_str().replace('_', " ");
        let reason = match &skipped.detail {
            Some(detail) => format!("{reason} ({detail})"),
            None => reason,
        };
        errln!("rewind: left out {}: {reason}{note}", quote(&skipped.path));
    }
}

/// What a turn's left-out line adds: an undo of the turn cannot bring that file back.
pub(crate) const UNDO_CANNOT: &str = " (an undo cannot bring it back)";

/// One file of a turn or session: status, counts, whose change it is, path.
pub(crate) fn print_file(file: &rewind::TurnFile, indent: &str) {
    // A rename: `old -> new`.
    let old = file
        .old_file
        .as_ref()
        .map(|old| format!("{} -> ", quote(old)));
    // A binary file has no lines to count (`git diff --numstat` gives `-`).
    let counts = match file.binary {
        true => "binary".to_string(),
        false => format!("+{:<5} -{}", file.additions, file.deletions),
    };
    outln!(
        "{indent}{:<8} {counts:<13} {:<11} {}{}",
        format!("{:?}", file.status).to_lowercase(),
        format!("{:?}", file.origin).to_lowercase(),
        old.unwrap_or_default(),
        quote(&file.file)
    );
}

/// Print what a restore, revert, undo or redo changed: files on stdout, conflicts and failures
/// on stderr, then the command that goes back. `why` says why conflicts were left alone, with
/// whether `--force` was given (`None`: the command has none), which the hint follows.
pub(crate) fn print_outcome(
    outcome: &rewind::RestoreOutcome,
    (why, forced): (&str, Option<bool>),
    undo_label: &str,
) {
    let would = if outcome.dry_run { "would be " } else { "" };
    for path in &outcome.written {
        match outcome.merged.contains(path) {
            true => outln!("{would}merged {}", quote(path)),
            false => outln!("{would}written {}", quote(path)),
        }
    }
    for path in &outcome.deleted {
        outln!("{would}deleted {}", quote(path));
    }
    for path in &outcome.conflicts {
        if outcome.in_the_way.contains(path) {
            errln!(
                "rewind: {would}left alone {}: what stands there or on the way to it is never replaced (move it aside, then run again)",
                quote(path)
            );
            continue;
        }
        if outcome.unseen.contains(path) {
            let hint = match forced {
                Some(false) => " (use --force)",
                _ => "",
            };
            errln!(
                "rewind: {would}left alone {}: the turn's end could not see it (ignored, or left out), so whether someone changed it since cannot be told{hint}",
                quote(path)
            );
            continue;
        }
        let detail = outcome.conflict_details.iter().find(|d| d.file == *path);
        let hint = match detail {
            Some(d) if d.mergeable => "use --merge to keep both, or --force".to_owned(),
            // (`--force` may change nothing there: the project can hold the target already.)
            Some(d) if d.merges_in_part => {
                "use --merge to take the later turns' work out and keep theirs".to_owned()
            }
            Some(d) if !d.hunks.is_empty() => {
                let lines: Vec<String> = d
                    .hunks
                    .iter()
                    .map(|h| match h.ours_lines {
                        0 | 1 => h.ours_start.to_string(),
                        n => format!("{}-{}", h.ours_start, h.ours_start + n - 1),
                    })
                    .collect();
                format!(
                    "the edits overlap at line {}; use --force",
                    lines.join(", ")
                )
            }
            // (What --force still leaves alone: a file changed while the run ran, or a binary
            // file both sides changed.)
            _ => match forced {
                Some(false) => "use --force".to_owned(),
                _ => "move it aside, then run again".to_owned(),
            },
        };
        errln!("rewind: {would}left alone {}: {why} ({hint})", quote(path));
    }
    for detail in &outcome.conflict_details {
        let changed =
            outcome.written.contains(&detail.file) || outcome.deleted.contains(&detail.file);
        if changed && detail.merges_in_part {
            errln!(
                "rewind: {would}merged {} in part: someone else changed it after an earlier turn did, so that turn's work stays in it",
                quote(&detail.file)
            );
        } else if outcome.written.contains(&detail.file) {
            errln!(
                "rewind: {would}written with conflict markers {}: its edits and the turn's overlap",
                quote(&detail.file)
            );
        }
    }
    for path in &outcome.kept {
        match rewind::is_left_by_rewind(path) {
            true => errln!(
                "rewind: kept {}: rewind set it aside (it may hold someone's save); remove it yourself",
                quote(path)
            ),
            false => errln!(
                "rewind: kept {}: the snapshot could not see it (ignored, in a nested repository, left out for size or type, or the ignore rules outside the project changed since)",
                quote(path)
            ),
        }
    }
    for failure in &outcome.failed {
        errln!(
            "rewind: could not restore {}: {}",
            quote(&failure.path),
            failure.error
        );
    }
    match outcome.dry_run {
        true => outln!("dry run: nothing was changed"),
        false => outln!("{undo_label}: rewind restore {}", outcome.undo),
    }
}

/// Say what a prune removed: a line per removed session on stderr, a summary on stdout
/// (unless `json`). Returns the JSON row for the project.
pub(crate) fn report_prune(
    json: bool,
    project: &Path,
    outcome: &rewind::PruneOutcome,
) -> serde_json::Value {
    for session in &outcome.sessions_removed {
        let what = if outcome.sessions_removed_for_size.contains(session) {
            "session (the store was over its size quota, rewind.maxSize)"
        } else if outcome
            .abandoned_turns
            .iter()
            .any(|a| &a.session == session)
        {
            "session with an abandoned turn"
        } else {
            "expired session"
        };
        errln!(
            "rewind: {}: {} {what} {}",
            quote_os(project),
            if outcome.dry_run {
                "would remove"
            } else {
                "removed"
            },
            quote(session)
        );
    }
    for abandoned in &outcome.abandoned_turns {
        errln!(
            "rewind: {}: turn {} of session {} was open since {} (rewind.abandonedTurnAfter): {} with its session",
            quote_os(project),
            quote(&abandoned.turn),
            quote(&abandoned.session),
            abandoned.started_at.format("%Y-%m-%d %H:%M UTC"),
            if outcome.dry_run { "would be removed" } else { "removed" },
        );
    }
    if outcome.still_over_quota {
        errln!(
            "rewind: {}: still over its size quota (rewind.targetSize): the space is held by what is in use (an active session, snapshots taken within the hour)",
            quote_os(project)
        );
    }
    if !json {
        let for_size = match outcome.snapshots_removed_for_size {
            0 => String::new(),
            n => format!(" ({n} for the size quota)"),
        };
        outln!(
            "{}: {} {} snapshots{for_size}, {} turns, {} objects ({} bytes)",
            quote_os(project),
            match outcome.dry_run {
                true => "would remove (dry run, objects and bytes estimated)",
                false => "removed",
            },
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

/// A table of turns: age, session, turn, files and +/- (coloured when stdout is a terminal).
pub(crate) fn print_turns(turns: &[rewind::Turn], now: chrono::DateTime<chrono::Utc>) {
    let color = std::io::stdout().is_terminal();
    let prompts = turns.iter().any(|t| t.meta.contains_key("prompt"));
    let header = format!(
        "{:<16} {:<20} {:<12} {:>5} {:>8} {:>8}  {:<11}  {}",
        "age",
        "session",
        "turn",
        "files",
        "+",
        "-",
        "state",
        if prompts { "prompt" } else { "" }
    );
    outln!("{}", header.trim_end());
    for turn in turns {
        let state = turn.state();
        let row = format!(
            "{:<16} {:<20} {:<12} {:>5} {:>8} {:>8}  {state:<11}  {}",
            age(now, turn.started_at),
            quote(&turn.session),
            quote(&turn.turn),
            turn.files,
            paint(color, "32", format!("+{}", turn.additions)),
            paint(color, "31", format!("-{}", turn.deletions)),
            turn.meta
                .get("prompt")
                .map_or(String::new(), |p| prompt_column(p)),
        );
        outln!("{}", row.trim_end());
        for file in &turn.changed {
            print_file(file, "    ");
        }
    }
}

/// How many characters of a turn's prompt the turns table shows.
const PROMPT_WIDTH: usize = 60;

/// A turn's prompt (the hooks' `prompt` metadata) on one line: its first [`PROMPT_WIDTH`]
/// characters in quotes, with line ends, control and format characters escaped (nothing a
/// terminal would act on), `...` after a cut. Linear in those characters.
fn prompt_column(prompt: &str) -> String {
    let mut chars = prompt.chars();
    let shown: String = chars.by_ref().take(PROMPT_WIDTH).collect();
    let cut = if chars.next().is_some() { "..." } else { "" };
    format!("{shown:?}{cut}")
}

/// "5 minutes ago", "just now", "3 days ago".
pub(crate) fn age(
    now: chrono::DateTime<chrono::Utc>,
    then: chrono::DateTime<chrono::Utc>,
) -> String {
    let seconds = (now - then).num_seconds().max(0);
    let (count, unit) = match seconds {
        0..=59 => return "just now".into(),
        60..=3599 => (seconds / 60, "minute"),
        3600..=86399 => (seconds / 3600, "hour"),
        _ => (seconds / 86400, "day"),
    };
    format!("{count} {unit}{} ago", if count == 1 { "" } else { "s" })
}

pub(crate) fn print_doctor(report: &rewind::Doctor, now: chrono::DateTime<chrono::Utc>) {
    let mib = |bytes: u64| format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0));
    outln!("store         {}", quote_os(&report.git_dir));
    outln!(
        "project       {}{}",
        quote_os(&report.project),
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
    match (&report.watcher.reason, report.watcher.active) {
        (_, true) => outln!(
            "watcher       on, {} directories",
            report.watcher.directories
        ),
        (Some(reason), false) => outln!("watcher       off: {reason}"),
        (None, false) => outln!("watcher       off"),
    }
    if !report.leftovers.is_empty() {
        outln!(
            "leftovers     {} file(s) a killed process left (prune removes them after an hour)",
            report.leftovers.len()
        );
    }
    if let Some(undo) = &report.stopped_restore {
        outln!(
            "stopped       a restore was stopped before it finished (the next snapshot sweeps \
             its temp files); `rewind restore {undo}` puts the files back as before it"
        );
    }
    for aside in &report.set_aside {
        outln!(
            "set aside     {} (damaged; delete it once not needed)",
            quote_os(aside)
        );
    }
    match report.missing.len() {
        0 => outln!("check         every object the records reach is present"),
        n => outln!(
            "check         {n} object(s) missing: {}",
            report.missing.join(" ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::age;

    #[test]
    fn age_rounds_down_to_the_largest_unit() {
        let now = chrono::DateTime::from_timestamp(1_000_000, 0).unwrap();
        let ago = |s| age(now, now - chrono::Duration::seconds(s));
        assert_eq!(ago(59), "just now");
        assert_eq!(ago(60), "1 minute ago");
        assert_eq!(ago(7199), "1 hour ago");
        assert_eq!(ago(3 * 86400 + 5), "3 days ago");
        assert_eq!(age(now, now + chrono::Duration::seconds(30)), "just now");
    }
}
