//! `rewind hooks install AGENT` and `rewind hooks uninstall AGENT`: rewind's hooks merged into
//! the agent's settings file, and taken out again.
//!
//! The file is edited as text, not parsed and printed again: install inserts its entries after
//! the last member or item of the object or array they go in, with the indentation found
//! there, and every other byte (comments, key order, spacing) stays. What install wrote and
//! the file as it was are kept under `<data dir>/hooks/`, so that uninstall gives back the
//! user's file byte for byte when nobody changed it since; when someone did, uninstall takes
//! out only rewind's entries.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::args::{Agent, Global};
use crate::jsonc::{self, Node};
use crate::render::{outln, print_json};

/// Why a hooks command failed: an error code (as in `--json` errors) and a message.
pub(crate) struct Failure {
    pub(crate) code: &'static str,
    pub(crate) message: String,
}

type Result<T> = std::result::Result<T, Failure>;

fn io_failure(action: &str, path: &Path, err: std::io::Error) -> Failure {
    Failure {
        code: "io",
        message: format!("{action} {}: {err}", path.display()),
    }
}

/// Where the settings go.
#[derive(Clone, Copy)]
pub(crate) enum Scope {
    /// The project's settings (`-C`, else the current directory).
    Project,
    /// The user's settings, for every project.
    User,
}

/// The agent's settings file in `scope`.
fn settings_path(agent: Agent, scope: Scope, global: &Global) -> Result<PathBuf> {
    let base = match scope {
        Scope::Project => {
            let project = global.project.clone().unwrap_or_else(|| ".".into());
            if !project.is_dir() {
                return Err(Failure {
                    code: "project",
                    message: format!("{}: not a directory", project.display()),
                });
            }
            project
        }
        Scope::User => {
            let home = std::env::var_os("HOME").filter(|h| !h.is_empty());
            let codex_home = std::env::var_os("CODEX_HOME").filter(|h| !h.is_empty());
            match (agent, codex_home, home) {
                (Agent::Codex, Some(dir), _) => return Ok(PathBuf::from(dir).join("hooks.json")),
                (_, _, Some(home)) => PathBuf::from(home),
                (_, _, None) => {
                    return Err(Failure {
                        code: "settings",
                        message: "HOME is not set: no user settings to edit".into(),
                    })
                }
            }
        }
    };
    Ok(match agent {
        Agent::ClaudeCode => base.join(".claude/settings.json"),
        Agent::Gemini => base.join(".gemini/settings.json"),
        Agent::Codex => base.join(".codex/hooks.json"),
    })
}

/// The slash command install adds next to the settings (Claude Code's `.claude/commands/`), and
/// its text, which runs rewind as `command` does.
fn command_file(agent: Agent, settings: &Path, command: &HookCommand) -> Option<(PathBuf, String)> {
    match agent {
        Agent::ClaudeCode => Some((
            settings.with_file_name("commands").join("rewind-undo.md"),
            SLASH_COMMAND.replace("`rewind -C", &format!("`{} -C", command.rewind)),
        )),
        Agent::Gemini | Agent::Codex => None,
    }
}

/// Claude Code's `/rewind-undo`, as install writes it for the default data dir.
const SLASH_COMMAND: &str = include_str!("../../examples/claude-code/commands/rewind-undo.md");

/// Whether `text` is the slash command as install writes it, for any data dir (`rewind
/// --data-dir DIR -C` in place of `rewind -C`): one the user changed is theirs. Linear.
fn is_our_command_file(text: &str) -> bool {
    let at = SLASH_COMMAND
        .find("`rewind -C")
        .expect("the slash command runs rewind")
        + 8;
    let (head, tail) = SLASH_COMMAND.split_at(at);
    let middle = text
        .strip_prefix(head)
        .and_then(|rest| rest.strip_suffix(tail));
    match middle.map(shell_words) {
        Some(Some(words)) => words.is_empty() || (words.len() == 2 && words[0] == "--data-dir"),
        _ => false,
    }
}

/// How rewind's hook is run: `rewind`, with `--data-dir DIR` when install was given a data
/// dir other than the one rewind finds by itself (`$REWIND_DATA_DIR`, ...), since the agent
/// runs the hook without install's arguments.
struct HookCommand {
    /// `rewind` or `rewind --data-dir DIR`, DIR absolute and quoted for the shell.
    rewind: String,
    /// The hook entry's command: `<rewind> hook AGENT`.
    hook: String,
}

impl HookCommand {
    /// Costs resolving the data dir twice (environment variables only).
    fn new(agent: Agent, global: &Global) -> Result<HookCommand> {
        let data = |explicit| {
            rewind::data_dir(explicit).map_err(|err| Failure {
                code: err.code(),
                message: err.to_string(),
            })
        };
        let chosen = data(global.data_dir.as_deref())?;
        let chosen =
            std::path::absolute(&chosen).map_err(|err| io_failure("resolving", &chosen, err))?;
        let rewind = match data(None).ok().and_then(|d| std::path::absolute(d).ok()) {
            Some(default) if default == chosen => "rewind".to_owned(),
            _ => {
                let dir = chosen.to_str().filter(|d| !d.contains(['`', '\n', '\r']));
                let dir = dir.ok_or_else(|| Failure {
                    code: "settings",
                    message: format!(
                        "{}: a data dir that is not UTF-8 or holds a backquote or line end cannot be written into the agent's settings",
                        chosen.display()
                    ),
                })?;
                format!("rewind --data-dir {}", shell_quoted(dir))
            }
        };
        let hook = format!("{rewind} hook {}", agent.name());
        Ok(HookCommand { rewind, hook })
    }
}

/// `word` as one word for the shell: as it is when it holds only characters the shell gives
/// no meaning, else in single quotes (a quote in it as `'\''`).
fn shell_quoted(word: &str) -> String {
    match !word.is_empty() && word.chars().all(is_plain) {
        true => word.to_owned(),
        false => format!("'{}'", word.replace('\'', r"'\''")),
    }
}

/// A character the shell takes as itself outside quotes.
fn is_plain(c: char) -> bool {
    c.is_ascii_alphanumeric() || "/._-+,:@%=^".contains(c)
}

/// The words of a simple shell command: plain characters, single quotes and backslash
/// escapes (the quoting [`shell_quoted`] writes and people type), and `~`, `$NAME` or
/// `${NAME}` as they are; `None` for anything else (operators, command substitution, double
/// quotes), which is then no command of rewind's. Linear.
fn shell_words(command: &str) -> Option<Vec<String>> {
    let (mut words, mut word, mut open) = (Vec::new(), None::<String>, false);
    let mut chars = command.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' if open => open = false,
            _ if open => word.get_or_insert_default().push(c),
            '\'' => {
                open = true;
                word.get_or_insert_default();
            }
            '\\' => word.get_or_insert_default().push(chars.next()?),
            ' ' | '\t' => words.extend(word.take()),
            c if is_plain(c) || "~${}".contains(c) => word.get_or_insert_default().push(c),
            _ => return None,
        }
    }
    words.extend(word);
    (!open).then_some(words)
}

/// The hook entry (a matcher group) rewind adds to each of its events, on one line.
fn group(agent: Agent, command: &HookCommand) -> String {
    let command = serde_json::to_string(&command.hook).expect("a string prints as JSON");
    let name = match agent {
        Agent::Gemini => "\"name\": \"rewind\", ",
        Agent::ClaudeCode | Agent::Codex => "",
    };
    format!("{{\"hooks\": [{{{name}\"type\": \"command\", \"command\": {command}}}]}}")
}

/// Whether a hook entry runs rewind's hook for `agent`: `rewind hook AGENT` alone (the binary
/// by any path), with or without `--data-dir DIR` before `hook`. A command that does more
/// (`rewind hook claude-code && say done`) is the user's.
fn is_ours(agent: Agent, hook: &Node) -> bool {
    let Some(command) = hook.get("command").and_then(Node::as_str) else {
        return false;
    };
    let Some(words) = shell_words(command) else {
        return false;
    };
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let rest = match words.as_slice() {
        [program, rest @ ..] if Path::new(program).file_name() == Some("rewind".as_ref()) => rest,
        _ => return false,
    };
    let rest = match rest {
        ["--data-dir", _, rest @ ..] => rest,
        [flag, rest @ ..] if flag.starts_with("--data-dir=") => rest,
        rest => rest,
    };
    rest == ["hook", agent.name()]
}

/// The first of rewind's hook entries in a matcher group.
fn ours_in(agent: Agent, group: &Node) -> Option<&Node> {
    let hooks = group.get("hooks")?;
    hooks.items().iter().find(|hook| is_ours(agent, hook))
}

/// `rewind hooks install`: add rewind's hooks (and slash command) to the agent's settings.
pub(crate) fn install(agent: Agent, scope: Scope, dry_run: bool, global: &Global) -> Result<()> {
    let named = settings_path(agent, scope, global)?;
    let path = through_symlink(named.clone());
    let before = read(&path)?;
    let runs = HookCommand::new(agent, global)?;
    let after = with_hooks(agent, &runs, before.as_deref().unwrap_or(""))
        .map_err(|reason| settings_failure(&path, reason))?;
    let changed = after
        .as_deref()
        .is_some_and(|a| Some(a) != before.as_deref());
    // (Beside the settings the agent reads, not beside a symlink's target.)
    let command = command_file(agent, &named, &runs);
    // Written when missing, and rewritten when it is rewind's for another data dir (a file
    // the user changed stays).
    let command_was = command
        .as_ref()
        .and_then(|(file, _)| std::fs::read_to_string(file).ok());
    let command_missing = command
        .as_ref()
        .is_some_and(|(_, text)| match &command_was {
            None => true,
            Some(was) => was != text && is_our_command_file(was),
        });
    if dry_run {
        let mut changes = Vec::new();
        if let Some(after) = after.as_deref().filter(|_| changed) {
            changes.push(change(&path, before.as_deref().unwrap_or(""), after));
        }
        if let (Some((file, text)), true) = (&command, command_missing) {
            changes.push(change(file, command_was.as_deref().unwrap_or(""), text));
        }
        if changes.is_empty() && !global.json {
            outln!("{}: rewind's hooks are installed already", path.display());
        }
        print_changes(global.json, &changes);
        return Ok(());
    }
    let mut backup = None;
    if let Some(after) = after.as_deref().filter(|_| changed) {
        backup = Some(remember(global, &path, before.as_deref(), after)?);
        write(&path, after, Some(before.as_deref()))?;
    }
    if let (Some((file, text)), true) = (&command, command_missing) {
        write(file, text, Some(command_was.as_deref()))?;
    }
    let events: Vec<_> = agent.events().iter().map(|(name, _)| *name).collect();
    if global.json {
        print_json(&json!({
            "agent": agent.name(),
            "settings": path.to_string_lossy(),
            "changed": changed,
            "backup": backup.as_ref().map(|b: &PathBuf| b.to_string_lossy()),
            "command_file": command.as_ref().filter(|_| command_missing).map(|(f, _)| f.to_string_lossy()),
        }));
    } else if changed {
        outln!(
            "{}: rewind's hooks added ({})",
            path.display(),
            events.join(", ")
        );
        if let Some(backup) = backup {
            outln!("the file as it was: {}", backup.display());
        }
    } else {
        outln!("{}: rewind's hooks are installed already", path.display());
    }
    if let (Some((file, _)), true, false) = (command, command_missing, global.json) {
        outln!("{}: written", file.display());
    }
    Ok(())
}

/// `rewind hooks uninstall`: take rewind's hooks (and slash command) out again.
pub(crate) fn uninstall(agent: Agent, scope: Scope, dry_run: bool, global: &Global) -> Result<()> {
    let named = settings_path(agent, scope, global)?;
    let path = through_symlink(named.clone());
    let current = read(&path)?;
    let record = record_paths(global, &path)?;
    let installed = std::fs::read_to_string(&record.1).ok();
    // The file as install left it: it goes back to what it was, byte for byte.
    let restore = match (&current, &installed) {
        (Some(current), Some(installed)) if current == installed => Some(read(&record.0)?),
        _ => None,
    };
    let after = match (&restore, &current) {
        (Some(original), _) => original.clone(),
        (None, Some(current)) => {
            Some(without_hooks(agent, current).map_err(|reason| settings_failure(&path, reason))?)
        }
        (None, None) => None,
    };
    let changed = after != current;
    // (A data dir install refuses wrote no slash command.)
    let command = HookCommand::new(agent, global)
        .ok()
        .and_then(|runs| command_file(agent, &named, &runs))
        .and_then(|(file, _)| {
            let text = std::fs::read_to_string(&file).ok()?;
            is_our_command_file(&text).then_some((file, text))
        });
    if dry_run {
        let mut changes = Vec::new();
        if changed {
            let (from, to) = (
                current.as_deref().unwrap_or(""),
                after.as_deref().unwrap_or(""),
            );
            changes.push(change(&path, from, to));
        }
        if let Some((file, text)) = &command {
            changes.push(change(file, text, ""));
        }
        print_changes(global.json, &changes);
        return Ok(());
    }
    if changed {
        match &after {
            Some(text) => write(&path, text, Some(current.as_deref()))?,
            None => {
                unchanged(&path, current.as_deref())?;
                std::fs::remove_file(&path).map_err(|err| io_failure("removing", &path, err))?
            }
        }
    }
    if restore.is_some() {
        for file in [&record.0, &record.1] {
            if let Err(err) = std::fs::remove_file(file) {
                if err.kind() != std::io::ErrorKind::NotFound {
                    return Err(io_failure("removing", file, err));
                }
            }
        }
    }
    if let Some((file, _)) = &command {
        std::fs::remove_file(file).map_err(|err| io_failure("removing", file, err))?;
        // The directory install made for it, when nothing else is in it.
        let _ = file.parent().map(std::fs::remove_dir);
    }
    if matches!(restore, Some(None)) {
        // The settings directory (`.claude`) install made, when nothing else is in it.
        let _ = path.parent().map(std::fs::remove_dir);
    }
    if global.json {
        print_json(&json!({
            "agent": agent.name(),
            "settings": path.to_string_lossy(),
            "changed": changed,
            "restored": restore.is_some(),
        }));
    } else if restore.is_some() {
        outln!("{}: back as it was before install", path.display());
    } else if changed {
        outln!(
            "{}: rewind's hooks taken out (the file changed since install: the rest is as it is now)",
            path.display()
        );
    } else {
        outln!("{}: rewind's hooks are not installed", path.display());
    }
    Ok(())
}

/// The file a symlink names (settings kept in a dotfiles repository), so that the write goes
/// there and the link stays; any other path as it is.
fn through_symlink(path: PathBuf) -> PathBuf {
    match path.is_symlink() {
        true => std::fs::canonicalize(&path).unwrap_or(path),
        false => path,
    }
}

fn settings_failure(path: &Path, reason: String) -> Failure {
    Failure {
        code: "settings",
        message: format!("{}: {reason}; the file is left as it is", path.display()),
    }
}

/// The file's text; `None` when there is no file. Anything but a regular file (a device, a
/// FIFO that would block the read, a socket) is refused, and so never replaced.
fn read(path: &Path) -> Result<Option<String>> {
    match std::fs::metadata(path) {
        Ok(meta) if !meta.is_file() => {
            let reason = "not a regular file".to_owned();
            return Err(settings_failure(path, reason));
        }
        _ => {}
    }
    match std::fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes).map(Some).map_err(|_| Failure {
            code: "settings",
            message: format!(
                "{}: not UTF-8 text; the file is left as it is",
                path.display()
            ),
        }),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(io_failure("reading", path, err)),
    }
}

/// Write `text` to `path`: a new file directly (with the umask's mode), an existing one
/// through a temp file with its mode and a rename, so that it is whole at every moment.
///
/// With `was` (the text read before, `None` inside for no file), the file is read again just
/// before it is replaced, and one that changed since (an editor saved it) is refused and left
/// as it now is: only the microseconds between that read and the rename stay open. A
/// read-only file (no write permission bit; root could write it) is refused. A file with other
/// hard links is rewritten in place, so that every link sees the change (not atomic: a crash
/// in the write leaves part of it; the data dir's backup holds the file as it was).
fn write(path: &Path, text: &str, was: Option<Option<&str>>) -> Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let dir = dir.unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|err| io_failure("creating", dir, err))?;
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            if matches!(was, Some(Some(_))) {
                return Err(changed_failure(path));
            }
            let mut file =
                std::fs::File::create_new(path).map_err(|err| match (err.kind(), was) {
                    (std::io::ErrorKind::AlreadyExists, Some(_)) => changed_failure(path),
                    _ => io_failure("creating", path, err),
                })?;
            return file
                .write_all(text.as_bytes())
                .and_then(|()| file.sync_all())
                .map_err(|err| io_failure("writing", path, err));
        }
        Err(err) => return Err(io_failure("reading", path, err)),
    };
    if meta.permissions().readonly() {
        let reason = "read-only: rewind does not replace it (make it writable first)";
        return Err(settings_failure(path, reason.to_owned()));
    }
    if rewind::hard_links(&meta) > 1 {
        return write_in_place(path, text, was);
    }
    let mut temp =
        tempfile::NamedTempFile::new_in(dir).map_err(|err| io_failure("writing in", dir, err))?;
    temp.write_all(text.as_bytes())
        .and_then(|()| temp.as_file().sync_all())
        .map_err(|err| io_failure("writing in", dir, err))?;
    std::fs::set_permissions(temp.path(), meta.permissions())
        .map_err(|err| io_failure("writing", path, err))?;
    if let Some(was) = was {
        unchanged(path, was)?;
    }
    temp.persist(path)
        .map_err(|err| io_failure("writing", path, err.error))?;
    Ok(())
}

/// [`write`] into the file itself (one with other hard links), after checking that it still
/// holds `was`. Costs a read and a write of the file.
fn write_in_place(path: &Path, text: &str, was: Option<Option<&str>>) -> Result<()> {
    use std::io::{Read as _, Seek as _};
    let fail = |err| io_failure("writing", path, err);
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(fail)?;
    if let Some(was) = was {
        let mut now = Vec::new();
        file.read_to_end(&mut now).map_err(fail)?;
        if Some(now.as_slice()) != was.map(str::as_bytes) {
            return Err(changed_failure(path));
        }
    }
    file.rewind()
        .and_then(|()| file.write_all(text.as_bytes()))
        .and_then(|()| file.set_len(text.len() as u64))
        .and_then(|()| file.sync_all())
        .map_err(fail)
}

/// Refuse when the file no longer holds `was` (`None`: no file). Costs a read of the file.
fn unchanged(path: &Path, was: Option<&str>) -> Result<()> {
    let now = match std::fs::read(path) {
        Ok(bytes) => Some(bytes),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
        Err(err) => return Err(io_failure("reading", path, err)),
    };
    match now.as_deref() == was.map(str::as_bytes) {
        true => Ok(()),
        false => Err(changed_failure(path)),
    }
}

fn changed_failure(path: &Path) -> Failure {
    let reason = "it changed while rewind was editing it (run the command again)".to_owned();
    settings_failure(path, reason)
}

/// The files that keep, for one settings file, the text before install (absent: there was no
/// file) and the text install wrote: `<data dir>/hooks/<sha1 of the path>.{before,installed}`.
fn record_paths(global: &Global, settings: &Path) -> Result<(PathBuf, PathBuf)> {
    let data = rewind::private_data_dir(global.data_dir.as_deref()).map_err(|err| Failure {
        code: err.code(),
        message: err.to_string(),
    })?;
    let absolute =
        std::path::absolute(settings).map_err(|err| io_failure("resolving", settings, err))?;
    let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
    hasher.update(absolute.as_os_str().as_encoded_bytes());
    let digest = hasher.try_finalize().expect("sha1 of a path");
    let dir = data.join("hooks");
    Ok((
        dir.join(format!("{}.before", digest.to_hex())),
        dir.join(format!("{}.installed", digest.to_hex())),
    ))
}

/// Keep the file as it was (unless the record of an earlier install still describes it) and
/// what install writes; returns where the old file is kept.
fn remember(
    global: &Global,
    settings: &Path,
    before: Option<&str>,
    after: &str,
) -> Result<PathBuf> {
    let (before_path, installed_path) = record_paths(global, settings)?;
    let earlier = std::fs::read_to_string(&installed_path).ok();
    // A partial earlier install left the file as it is: its "before" is still the user's file.
    if earlier.as_deref() != before || earlier.is_none() {
        match before {
            Some(text) => write(&before_path, text, None)?,
            None => match std::fs::remove_file(&before_path) {
                Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                    return Err(io_failure("removing", &before_path, err))
                }
                _ => {}
            },
        }
    }
    write(&installed_path, after, None)?;
    Ok(before_path)
}

/// The text with rewind's hooks on every event that lacks them; `None` when it has them all.
fn with_hooks(
    agent: Agent,
    command: &HookCommand,
    text: &str,
) -> std::result::Result<Option<String>, String> {
    let group = group(agent, command);
    if text.trim().is_empty() {
        let mut out = String::from("{\n  \"hooks\": {\n");
        let members: Vec<String> = agent
            .events()
            .iter()
            .map(|(event, _)| format!("    \"{event}\": [{group}]"))
            .collect();
        out.push_str(&members.join(",\n"));
        out.push_str("\n  }\n}\n");
        return Ok(Some(out));
    }
    let root = jsonc::parse(text)?;
    if !matches!(root.kind, jsonc::Kind::Object(_)) {
        return Err("the settings are not a JSON object".into());
    }
    let unit = indent_unit(text, &root);
    // Insertions, and the replacement of an entry of rewind's that runs it another way.
    let mut edits: Vec<(usize, String)> = Vec::new();
    let mut replace = None;
    let missing: Vec<&str> = match root.unique(text, "hooks")? {
        None => agent.events().iter().map(|(e, _)| *e).collect(),
        Some(hooks) if matches!(hooks.kind, jsonc::Kind::Object(_)) => {
            let mut missing = Vec::new();
            for &(event, _) in agent.events() {
                let groups = hooks.unique(text, event)?;
                let ours = groups.and_then(|g| g.items().iter().find_map(|g| ours_in(agent, g)));
                match (groups, ours.and_then(|hook| hook.get("command"))) {
                    (None, _) => missing.push(event),
                    (_, Some(found)) if found.as_str() == Some(command.hook.as_str()) => {}
                    (_, Some(found)) => {
                        // Installed with another data dir: one rewrite a run (the entries
                        // after it are found on the next).
                        replace.get_or_insert((found.start, found.end));
                    }
                    (Some(groups), None) if matches!(groups.kind, jsonc::Kind::Array(_)) => {
                        edits.extend(append(text, groups, &unit, |_| group.clone()));
                    }
                    (Some(_), None) => return Err(format!("hooks.{event} is not an array")),
                }
            }
            if !missing.is_empty() {
                edits.extend(append(text, hooks, &unit, |indent| {
                    members(&missing, &group, indent)
                }));
            }
            Vec::new()
        }
        Some(_) => return Err("\"hooks\" is not an object".into()),
    };
    if !missing.is_empty() {
        edits.extend(append(text, &root, &unit, |indent| {
            let inner = format!("{indent}{unit}");
            format!(
                "\"hooks\": {{\n{inner}{}\n{indent}}}",
                members(&missing, &group, &inner)
            )
        }));
    }
    if let Some((from, to)) = replace {
        let mut out = text.to_owned();
        let string = serde_json::to_string(&command.hook).expect("a string prints as JSON");
        out.replace_range(from..to, &string);
        return Ok(Some(with_hooks(agent, command, &out)?.unwrap_or(out)));
    }
    if edits.is_empty() {
        return Ok(None);
    }
    edits.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
    let mut out = text.to_owned();
    for (at, insert) in edits {
        out.insert_str(at, &insert);
    }
    Ok(Some(out))
}

/// `"Event": [group]` members, one a line at `indent` (the first without it).
fn members(events: &[&str], group: &str, indent: &str) -> String {
    let lines: Vec<String> = events
        .iter()
        .map(|e| format!("\"{e}\": [{group}]"))
        .collect();
    lines.join(&format!(",\n{indent}"))
}

/// The text's indentation step: how much deeper the root's first member is than the root's
/// line (two spaces when the file does not show it).
fn indent_unit(text: &str, root: &Node) -> String {
    let first = root
        .children()
        .first()
        .map(|child| line_indent(text, child.start));
    match first {
        Some(child) if child.len() > line_indent(text, root.start).len() => {
            child[line_indent(text, root.start).len()..].to_owned()
        }
        _ => "  ".to_owned(),
    }
}

/// The whitespace that starts the line `at` is on.
fn line_indent(text: &str, at: usize) -> &str {
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line = &text[start..];
    &line[..line.len() - line.trim_start_matches([' ', '\t']).len()]
}

/// The insertions that add an item as the last of `container` (an object or array): the item
/// is made by `item` from the indentation it gets. After the last item when there is one (a
/// comma after it, the item on the next line, after a comment that ends the line), else
/// inside the brackets.
fn append(
    text: &str,
    container: &Node,
    unit: &str,
    item: impl Fn(&str) -> String,
) -> Vec<(usize, String)> {
    let children = container.children();
    let multiline = text[container.start..container.end].contains('\n');
    let Some(last) = children.last() else {
        let outer = line_indent(text, container.start);
        let indent = format!("{outer}{unit}");
        return match multiline {
            true => vec![(container.start + 1, format!("\n{indent}{}", item(&indent)))],
            false => vec![(
                container.start + 1,
                format!("\n{indent}{}\n{outer}", item(&indent)),
            )],
        };
    };
    let indent = line_indent(text, last.start).to_owned();
    // A trailing comma after the last item stays; the new item follows it.
    let after = jsonc::skip_blank(text, last.end);
    let (comma, from) = match text.as_bytes().get(after) {
        Some(b',') => (None, after + 1),
        _ => (Some((last.end, ",".to_owned())), last.end),
    };
    if !multiline {
        let insert = format!(" {}", item(&indent));
        return merge(comma, (from, insert));
    }
    // The rest of the line after the last item: blank, or a `//` comment, keeps its place.
    let line_end = text[from..].find('\n').map_or(text.len(), |i| from + i);
    let rest = text[from..line_end].trim();
    let at = match rest.is_empty() || rest.starts_with("//") {
        true => line_end,
        false => from,
    };
    merge(comma, (at, format!("\n{indent}{}", item(&indent))))
}

/// One insertion, or two.
fn merge(first: Option<(usize, String)>, second: (usize, String)) -> Vec<(usize, String)> {
    match first {
        Some((at, text)) if at == second.0 => vec![(at, text + &second.1)],
        Some(first) => vec![first, second],
        None => vec![second],
    }
}

/// `text` without rewind's hook entries for `agent`, in the events install writes: a matcher
/// group that holds only rewind's entry goes whole, else only the entry (a hook the user put
/// beside it stays). Costs a parse per entry removed.
fn without_hooks(agent: Agent, text: &str) -> std::result::Result<String, String> {
    let mut text = text.to_owned();
    loop {
        let root = jsonc::parse(&text)?;
        let Some(hooks) = root.unique(&text, "hooks")? else {
            return Ok(text);
        };
        let mut found = None;
        for &(event, _) in agent.events() {
            let Some(groups) = hooks.unique(&text, event)? else {
                continue;
            };
            let items = groups.items();
            found = items.iter().enumerate().find_map(|(g, group)| {
                let list = group.get("hooks")?;
                let entries = list.items();
                let h = entries.iter().position(|hook| is_ours(agent, hook))?;
                Some(match entries.len() {
                    1 => cut(&text, groups, items, g),
                    _ => cut(&text, list, entries, h),
                })
            });
            if found.is_some() {
                break;
            }
        }
        let Some(ranges) = found else {
            return Ok(text);
        };
        for (from, to) in ranges {
            text.replace_range(from..to, "");
        }
    }
}

/// The ranges of `text` to cut (last first) to take item `i` out of `array` (whose items are
/// `items`): the item, one comma beside it and the blanks between them; a comment between the
/// item and a neighbour stays (it may be about the neighbour). Linear in the text between
/// the item and its neighbour.
fn cut(text: &str, array: &Node, items: &[Node], i: usize) -> Vec<(usize, usize)> {
    let item = &items[i];
    // Where the comments (if any) in text[from..to] end: blanks after them go.
    let comments_end = |from: usize, to: usize| from + text[from..to].trim_end().len();
    let comma_after = |node: &Node| {
        let at = jsonc::skip_blank(text, node.end);
        (text.as_bytes().get(at) == Some(&b',')).then_some(at)
    };
    match (i, comma_after(item)) {
        (0, comma) if items.len() == 1 => {
            let inside = (array.start + 1, array.end - 1);
            let rest_blank = text[inside.0..item.start].trim().is_empty()
                && text[item.end..inside.1]
                    .trim()
                    .trim_start_matches(',')
                    .is_empty();
            match (rest_blank, comma) {
                (true, _) => vec![inside],
                (false, Some(comma)) => vec![(comma, comma + 1), (item.start, item.end)],
                (false, None) => vec![(comments_end(inside.0, item.start), item.end)],
            }
        }
        (0, Some(comma)) => {
            let next = comma + 1 + (text[comma + 1..].len() - text[comma + 1..].trim_start().len());
            vec![(comma, next), (item.start, item.end)]
        }
        _ => {
            let comma = comma_after(&items[i - 1]).expect("a comma between two items");
            vec![
                (comments_end(comma + 1, item.start), item.end),
                (comma, comma + 1),
            ]
        }
    }
}

/// What a change does to a file: the lines that differ, as `-` and `+` lines between the
/// common start and end (a file that was not there is all `+`). Linear in the texts.
fn change(path: &Path, from: &str, to: &str) -> (PathBuf, String) {
    let (old, new): (Vec<&str>, Vec<&str>) = (from.lines().collect(), to.lines().collect());
    let head = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
    let tail = old[head..]
        .iter()
        .rev()
        .zip(new[head..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let mut out = format!(
        "--- {0}\n+++ {0}\n@@ line {1} @@\n",
        path.display(),
        head + 1
    );
    for line in &old[head..old.len() - tail] {
        let _ = writeln!(out, "-{line}");
    }
    for line in &new[head..new.len() - tail] {
        let _ = writeln!(out, "+{line}");
    }
    (path.to_owned(), out)
}

/// Print a dry run's changes: as they are, or under `--json` one document
/// `{"dry_run": true, "changes": [{"path", "diff"}]}`.
fn print_changes(json: bool, changes: &[(PathBuf, String)]) {
    if json {
        let rows: Vec<_> = changes
            .iter()
            .map(|(path, diff)| json!({"path": path.to_string_lossy(), "diff": diff}))
            .collect();
        print_json(&json!({"dry_run": true, "changes": rows}));
    } else {
        for (_, diff) in changes {
            crate::render::write_stdout(diff.as_bytes());
        }
    }
}
