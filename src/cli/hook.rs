//! `rewind hook AGENT`: an agent's hook payload (JSON on stdin) mapped onto turns. A prompt
//! begins the session's next turn, the agent's stop ends it.
//!
//! The agents' contracts (docs/integration.md, "Hooks for the agents people use"): stdout is
//! added to the model's context or parsed as JSON, and exit code 2 blocks the agent. So this
//! command never writes to stdout and always exits 0: a failure is one line on stderr and one
//! in `<data dir>/hooks.log`, and a panic is caught.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;

use serde_json::Value;

use crate::args::{Agent, Global};
use crate::render::errln;

/// The longest payload read from stdin; a prompt longer than the turn metadata allows is cut.
const MAX_PAYLOAD: u64 = 64 << 20;
/// The longest metadata value the library stores (`BeginOptions::meta`).
const MAX_META_VALUE: usize = 8 << 10;
/// The size at which `hooks.log` is rotated.
const MAX_LOG: u64 = 1 << 20;
/// The metadata value that marks a prompt cut to [`MAX_META_VALUE`].
const TRUNCATED: &str = "prompt_truncated";

/// What an agent's event means for rewind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// The user submitted a prompt: the next turn begins.
    Prompt,
    /// The agent finished answering: the open turn ends.
    Stop,
}

impl Agent {
    /// The name on the command line (`claude-code`), in messages and in turn metadata.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "claude-code",
            Agent::Gemini => "gemini",
            Agent::Codex => "codex",
        }
    }

    /// The agent's hook events rewind listens to, with their meaning. Claude Code's
    /// `SessionEnd` ends a turn its user interrupted (no `Stop` runs then) when the session
    /// closes without another prompt: left open, it would make every other session's changes
    /// shared until abandoned.
    pub(crate) fn events(self) -> &'static [(&'static str, Event)] {
        match self {
            Agent::ClaudeCode => &[
                ("UserPromptSubmit", Event::Prompt),
                ("Stop", Event::Stop),
                ("SessionEnd", Event::Stop),
            ],
            Agent::Codex => &[("UserPromptSubmit", Event::Prompt), ("Stop", Event::Stop)],
            Agent::Gemini => &[("BeforeAgent", Event::Prompt), ("AfterAgent", Event::Stop)],
        }
    }

    /// The variable the agent sets to its project's root when it runs a hook (the payload's
    /// `cwd` follows the agent's shell into subdirectories).
    fn project_variable(self) -> Option<&'static str> {
        match self {
            Agent::ClaudeCode => Some("CLAUDE_PROJECT_DIR"),
            Agent::Gemini => Some("GEMINI_PROJECT_DIR"),
            Agent::Codex => None,
        }
    }
}

/// The fields of a payload that rewind reads.
struct Payload {
    event: String,
    session: String,
    cwd: Option<PathBuf>,
    prompt: Option<String>,
    transcript: Option<String>,
    /// Codex's id of the turn, kept as metadata.
    turn_id: Option<String>,
}

/// The payload's bytes from `input`: up to its end, or to the end of the JSON object it
/// starts with (a runner may keep the pipe open after writing it: the hook must not wait for
/// its end). Costs one pass over the bytes ([`ObjectEnd`]).
fn read_one_object(input: &mut impl Read) -> Result<Vec<u8>, String> {
    let mut text = Vec::new();
    let mut chunk = vec![0; 64 << 10];
    let mut end = ObjectEnd::default();
    loop {
        let read = match input.read(&mut chunk) {
            Ok(0) => return Ok(text),
            Ok(read) => read,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(format!("reading the payload on stdin: {err}")),
        };
        text.extend_from_slice(&chunk[..read]);
        if text.len() as u64 > MAX_PAYLOAD {
            return Err(format!(
                "the payload on stdin is over {} MiB: not read",
                MAX_PAYLOAD >> 20
            ));
        }
        if let Some(at) = end.found_in(&chunk[..read]) {
            // (What follows the object, if anything, is not the payload's.)
            text.truncate(text.len() - read + at);
            return Ok(text);
        }
    }
}

/// Where a JSON object that the bytes start with ends: the braces outside strings counted,
/// chunk by chunk. (Whether it is JSON is for the parser to say.)
#[derive(Default)]
struct ObjectEnd {
    depth: usize,
    began: bool,
    in_string: bool,
    escaped: bool,
}

impl ObjectEnd {
    /// Where in `chunk` (the bytes after those seen so far) the object ends: the offset just
    /// past its closing brace.
    fn found_in(&mut self, chunk: &[u8]) -> Option<usize> {
        for (at, &byte) in chunk.iter().enumerate() {
            match (self.in_string, self.escaped, byte) {
                (true, true, _) => self.escaped = false,
                (true, false, b'\\') => self.escaped = true,
                (true, false, b'"') => self.in_string = false,
                (true, false, _) => {}
                (false, _, b'"') => self.in_string = true,
                (false, _, b'{') => {
                    self.depth += 1;
                    self.began = true;
                }
                (false, _, b'}') => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.began && self.depth == 0 {
                        return Some(at + 1);
                    }
                }
                (false, _, _) => {}
            }
        }
        None
    }
}

/// `text` as JSON. A lone surrogate (`\ud800`, from a prompt cut inside a pair) is JSON
/// serde_json refuses: it becomes U+FFFD, so that the turn is still recorded.
fn parsed(text: &[u8]) -> serde_json::Result<Value> {
    serde_json::from_slice(text).or_else(|err| match rewind::lone_surrogates_replaced(text) {
        Some(lossy) => serde_json::from_slice(&lossy),
        None => Err(err),
    })
}

/// Run the hook: read the payload, begin or end a turn; exit 0 whatever happens.
pub(crate) fn run(agent: Agent, global: &Global) -> ExitCode {
    // A panic's message goes into the one line below, not onto stderr by itself.
    static PANIC: Mutex<String> = Mutex::new(String::new());
    std::panic::set_hook(Box::new(|info| {
        if let Ok(mut message) = PANIC.lock() {
            *message = info.to_string().replace('\n', " ");
        }
    }));
    let outcome = std::panic::catch_unwind(|| {
        let payload = read_payload(agent)?;
        handle(agent, global, &payload).map_err(|err| format!("{}: {err}", payload.event))
    });
    let failure = match outcome {
        Ok(Ok(())) => None,
        Ok(Err(message)) => Some(message),
        Err(_) => Some(format!(
            "a bug in rewind (the agent goes on): {}",
            PANIC.lock().map(|m| m.clone()).unwrap_or_default()
        )),
    };
    if let Some(message) = failure {
        let line = format!("rewind hook {}: {message}", agent.name());
        errln!("{line}");
        log(global, &line);
    }
    ExitCode::SUCCESS
}

/// The payload on stdin, checked for what every event needs.
fn read_payload(agent: Agent) -> Result<Payload, String> {
    let text = read_one_object(&mut std::io::stdin().lock())?;
    let value: Value =
        parsed(&text).map_err(|err| format!("the payload on stdin is not JSON: {err}"))?;
    let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
    let event = text("hook_event_name")
        .ok_or("the payload has no hook_event_name: not a hook payload of this agent")?;
    let session = match value.get("session_id") {
        Some(Value::String(session)) if !session.is_empty() => session.clone(),
        Some(Value::String(_)) => {
            return Err(format!("{event}: the payload's session_id is empty"))
        }
        Some(_) => return Err(format!("{event}: the payload's session_id is not a string")),
        None => return Err(format!("{event}: the payload has no session_id")),
    };
    if !agent.events().iter().any(|(name, _)| *name == event) {
        return Err(format!(
            "{event}: not an event rewind handles for {} (install with `rewind hooks install {}`)",
            agent.name(),
            agent.name()
        ));
    }
    Ok(Payload {
        event,
        session,
        cwd: text("cwd").filter(|c| !c.is_empty()).map(PathBuf::from),
        prompt: text("prompt"),
        transcript: text("transcript_path"),
        turn_id: text("turn_id"),
    })
}

/// Begin or end the session's turn in the project's store. Costs one snapshot (two when it
/// ends a turn left open) and a read of the session's turns: about a no-change `track`.
fn handle(agent: Agent, global: &Global, payload: &Payload) -> rewind::Result<()> {
    let project = project(agent, global, payload.cwd.as_deref());
    let open = rewind::OpenOptions::new(rewind::data_dir(global.data_dir.as_deref())?)
        .allow_home(global.allow_home)
        .lock_wait(global.wait.unwrap_or(rewind::DEFAULT_LOCK_WAIT))
        .clock(crate::clock()?);
    let store = rewind::Store::open(&project, &open)?;
    if let Some(aside) = store.set_aside() {
        let what = format!(
            "the store had lost its objects: moved to {} and a new one started",
            aside.display()
        );
        warn(agent, global, &what);
    }
    let handled = handle_turns(agent, global, payload, &store);
    // What rewind found on its own (a killed restore's leftovers), said here: the hook is often
    // the first command after an interrupted undo.
    // (Said when on stderr or in the log: what the agent does with stderr is its own.)
    store
        .take_notices()
        .say_each(|notice| warn(agent, global, notice));
    handled
}

/// The turns part of [`handle`]: end what is open, begin the prompt's turn.
fn handle_turns(
    agent: Agent,
    global: &Global,
    payload: &Payload,
    store: &rewind::Store,
) -> rewind::Result<()> {
    let event = agent
        .events()
        .iter()
        .find(|(name, _)| *name == payload.event)
        .map(|(_, event)| *event);
    let turns = session_turns(store, &payload.session)?;
    let prompt = payload
        .prompt
        .as_deref()
        .filter(|_| event == Some(Event::Prompt));
    // The turn left open: the agent was interrupted (no stop hook runs then), or it crashed.
    // What it did is its own, so it ends now; one an undo rolled back cannot end and stays. A
    // prompt running rewind's own command leaves it to its undo, which refuses one that changed
    // files (what changed since the interrupt may be the user's).
    let left_open = open_turn(&turns);
    // (A stop that names another turn than the open one, Codex's `turn_id`, is a late stop of
    // an earlier turn: it ends nothing.)
    let late_stop = event == Some(Event::Stop)
        && left_open.is_some_and(|turn| {
            let named = turn.meta.get("turn_id");
            payload.turn_id.is_some() && named.is_some() && named != payload.turn_id.as_ref()
        });
    if late_stop {
        return Ok(());
    }
    if let Some(turn) = left_open.filter(|_| !prompt.is_some_and(runs_rewind_command)) {
        end_turn(agent, global, store, &payload.session, turn)?;
    }
    let left_open = left_open.is_some();
    // A stop ended the open turn above (a stop again while `stop_hook_active`, or without a
    // begin, finds none). A prompt that is only rewind's own command is no turn of the agent;
    // one with more instructions is, unless a turn is still open (its work goes there).
    let Some(prompt) = prompt.filter(|p| !only_rewind_command(p)) else {
        return Ok(());
    };
    if runs_rewind_command(prompt) && left_open {
        return Ok(());
    }
    let options = rewind::BeginOptions::meta(meta(agent, payload));
    store.begin_turn_with(&payload.session, &next_turn(&turns), &options)?;
    Ok(())
}

/// The session's open turn, of its `turns`: only the latest can be (one left open when the
/// session began another ended there), and not one an undo rolled back (it is over).
fn open_turn(turns: &[rewind::Turn]) -> Option<&rewind::Turn> {
    turns
        .last()
        .filter(|t| t.ended_at.is_none() && !t.rolled_back)
}

/// End an open turn of the session, and say what it could not take in: a repository the agent
/// made (`git init`, a clone) is not entered by snapshots, so its files are in no turn and
/// undo cannot take them back. (One whose `.git` was there before the turn began, a vendored
/// repository, is not said at every turn; where the system does not tell when a file was
/// created, it is.) One that cannot end (an undo rolled it back) stays. Costs a snapshot and
/// the turn's diff, and a `stat` per nested repository.
fn end_turn(
    agent: Agent,
    global: &Global,
    store: &rewind::Store,
    session: &str,
    turn: &rewind::Turn,
) -> rewind::Result<()> {
    let end = match store.end_turn(session, &turn.turn) {
        Err(err) if err.code() == "turn_state" => return Ok(()),
        other => other?,
    };
    let made_in_turn = |path: &rewind::BString| {
        let git = gix::bstr::ByteSlice::to_path(path.as_slice())
            .ok()
            .map(|p| store.project().join(p).join(".git"));
        let created = git.and_then(|git| std::fs::symlink_metadata(git).ok()?.created().ok());
        created.is_none_or(|at| chrono::DateTime::<chrono::Utc>::from(at) >= turn.started_at)
    };
    let nested = end
        .skipped
        .iter()
        .filter(|s| s.reason == rewind::SkipReason::NestedRepo && made_in_turn(&s.path));
    for nested in nested {
        let what = format!(
            "turn {} of session {session}: {} is a nested repository: its files are not in the turn (undo leaves them)",
            turn.turn,
            crate::render::quote(&nested.path)
        );
        warn(agent, global, &what);
    }
    Ok(())
}

/// An open turn of the agent's that changed nothing, set aside before an undo
/// ([`set_open_turn_aside`]).
pub(crate) struct Aside {
    /// Its metadata, for [`reopen`]; `None` on a dry run, which ends nothing.
    pub(crate) reopen: Option<BTreeMap<String, String>>,
}

/// What `undo --last-session` (and `--last`) does about its session's open turn, before the
/// undo. One that changed files so far (the agent at work, or interrupted) is refused when
/// `refuse_changed` (`--last-session`: no hook marks an interrupt, so what changed since may be
/// the user's, by hand), else left to the undo (`--last` takes it back whole). An empty one
/// that the hooks began (`/rewind-undo` with more instructions, or an agent that passes the
/// command's expanded text) is ended, and its metadata returned for [`reopen`], so that what
/// the agent does after the undo is in a turn and not rolled back with the undo. Costs a
/// dry-run undo of the open turn (a snapshot).
pub(crate) fn set_open_turn_aside(
    store: &rewind::Store,
    session: &str,
    dry_run: bool,
    refuse_changed: bool,
) -> rewind::Result<Option<Aside>> {
    let turns = store.turns(Some(session))?;
    let Some(open) = open_turn(&turns) else {
        return Ok(None);
    };
    // (Its own changes: what undoing it would write or delete. What it would leave alone is
    // someone else's, another session's say, and no change of the turn's.)
    if undo_would_change(store, open)? {
        if !refuse_changed {
            return Ok(None);
        }
        return Err(rewind::Error::Turn {
            session: session.to_owned(),
            turn: open.turn.clone(),
            reason: "is open and has changed files (the agent is at work, or was interrupted: what changed since may be yours): let it end, or undo it by name with --session and --turn",
        });
    }
    if !open.meta.contains_key("agent") {
        return Ok(None);
    }
    if dry_run {
        return Ok(Some(Aside { reopen: None }));
    }
    store.end_turn(session, &open.turn)?;
    Ok(Some(Aside {
        reopen: Some(open.meta.clone()),
    }))
}

/// Whether undoing from `turn` (an open one) would write or delete anything
/// now: a dry run of it. Costs a dry-run undo.
pub(crate) fn undo_would_change(
    store: &rewind::Store,
    turn: &rewind::Turn,
) -> rewind::Result<bool> {
    let options = rewind::UndoOptions {
        turn: Some(turn.turn.clone()),
        dry_run: true,
        ..Default::default()
    };
    let preview = store.undo(&turn.session, &options)?;
    Ok(!preview.written.is_empty() || !preview.deleted.is_empty())
}

/// Begin the session's next turn with the metadata of the one [`set_open_turn_aside`] ended.
/// Costs reading the session's turns and a snapshot.
pub(crate) fn reopen(
    store: &rewind::Store,
    session: &str,
    meta: BTreeMap<String, String>,
) -> rewind::Result<()> {
    let turns = session_turns(store, session)?;
    let options = rewind::BeginOptions::meta(meta);
    store.begin_turn_with(session, &next_turn(&turns), &options)?;
    Ok(())
}

/// The session's next turn number: one more than its highest, in decimal of any length (a
/// session numbered up to `u64::MAX` by hand goes on to `18446744073709551616`, never wraps).
/// Linear in the turns.
fn next_turn(turns: &[rewind::Turn]) -> String {
    let numbers = turns.iter().map(|t| t.turn.as_str()).filter(|t| {
        !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) && (*t == "0" || !t.starts_with('0'))
    });
    let highest = numbers.max_by_key(|t| (t.len(), *t)).unwrap_or("0");
    let mut digits = highest.as_bytes().to_vec();
    // Add one: nines become zeros until a digit takes the carry, else a new leading one.
    match digits.iter().rposition(|&d| d != b'9') {
        Some(at) => {
            digits[at] += 1;
            digits[at + 1..].fill(b'0');
        }
        None => {
            digits.fill(b'0');
            digits.insert(0, b'1');
        }
    }
    String::from_utf8(digits).expect("ASCII digits")
}

/// The project: `-C`, else the agent's project variable, else the payload's `cwd`, else the
/// current directory.
fn project(agent: Agent, global: &Global, cwd: Option<&Path>) -> PathBuf {
    let variable = agent
        .project_variable()
        .and_then(std::env::var_os)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    global
        .project
        .clone()
        .or(variable)
        .or_else(|| cwd.map(Path::to_owned))
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The session's turns; none for a session the store does not know yet, or that prune removed
/// (a conversation resumed after its session expired starts again from turn 1).
fn session_turns(store: &rewind::Store, session: &str) -> rewind::Result<Vec<rewind::Turn>> {
    match store.turns_with(Some(session), &rewind::SummaryOptions { renames: false }) {
        Err(err) if matches!(err.code(), "not_found" | "pruned") => Ok(Vec::new()),
        other => other,
    }
}

/// Whether the prompt runs one of rewind's own slash commands (`/rewind-undo`, perhaps with
/// more instructions after it).
fn runs_rewind_command(prompt: &str) -> bool {
    prompt.trim_start().starts_with("/rewind-")
}

/// Whether the prompt is only one of rewind's own commands: those change files through rewind,
/// and a turn around them would be the next thing an undo takes.
fn only_rewind_command(prompt: &str) -> bool {
    runs_rewind_command(prompt) && !prompt.trim().contains(char::is_whitespace)
}

/// The turn's metadata: the agent, the prompt (cut to the library's limit, at a character
/// boundary), the transcript's path and the agent's own turn id when the payload has them.
fn meta(agent: Agent, payload: &Payload) -> BTreeMap<String, String> {
    let mut meta = BTreeMap::from([("agent".to_owned(), agent.name().to_owned())]);
    if let Some(prompt) = &payload.prompt {
        let mut end = prompt.len().min(MAX_META_VALUE);
        while !prompt.is_char_boundary(end) {
            end -= 1;
        }
        if end < prompt.len() {
            meta.insert(TRUNCATED.to_owned(), prompt.len().to_string());
        }
        meta.insert("prompt".to_owned(), prompt[..end].to_owned());
    }
    let fields = [
        ("transcript_path", &payload.transcript),
        ("turn_id", &payload.turn_id),
    ];
    for (key, value) in fields {
        if let Some(value) = value.as_ref().filter(|v| v.len() <= MAX_META_VALUE) {
            meta.insert(key.to_owned(), value.clone());
        }
    }
    meta
}

/// A warning (the turn is recorded all the same): one line on stderr and in the log.
/// Say `what` on stderr and in the log; whether either took it.
fn warn(agent: Agent, global: &Global, what: &str) -> bool {
    let line = format!("rewind hook {}: warning: {what}", agent.name());
    let said = crate::render::write_stderr(&line);
    log(global, &line) || said
}

/// Append `line` to `<data dir>/hooks.log`, with the time; a log that cannot be written is
/// said on stderr and otherwise ignored. A log of [`MAX_LOG`] bytes or more first becomes
/// `hooks.log.1` (replacing the one before), so that the two stay about that size. Costs a
/// `stat` and an append.
fn log(global: &Global, line: &str) -> bool {
    let Ok(dir) = rewind::private_data_dir(global.data_dir.as_deref()) else {
        return false;
    };
    let path = dir.join("hooks.log");
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    // Opened as the store files are: a FIFO there is not waited on, a symlink not followed.
    let written = (|| {
        if std::fs::symlink_metadata(&path).is_ok_and(|meta| meta.len() >= MAX_LOG) {
            std::fs::rename(&path, dir.join("hooks.log.1"))?;
        }
        rewind::open_store_file_to_append(&path)?.write_all(format!("{now} {line}\n").as_bytes())
    })();
    if let Err(err) = &written {
        errln!("rewind hook: cannot write {}: {err}", path.display());
    }
    written.is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The end found chunk by chunk, as reads cut the bytes.
    fn end_of(text: &[u8], chunk: usize) -> Option<usize> {
        let mut end = ObjectEnd::default();
        let mut seen = 0;
        for piece in text.chunks(chunk) {
            if let Some(at) = end.found_in(piece) {
                return Some(seen + at);
            }
            seen += piece.len();
        }
        None
    }

    #[test]
    fn an_object_ends_at_its_closing_brace_whatever_its_strings_hold() {
        let object = br#"{"prompt": "a } and a \" and \\", "n": {"x": "{"}}"#;
        for chunk in 1..=object.len() {
            let mut text = object.to_vec();
            text.extend_from_slice(b"\n{\"next\": 1}");
            assert_eq!(
                end_of(&text, chunk),
                Some(object.len()),
                "chunks of {chunk}"
            );
        }
        assert!(serde_json::from_slice::<Value>(object).is_ok());
        assert_eq!(end_of(br#"{"a": "}"#, 3), None, "a string left open");
        assert_eq!(end_of(b"  [1, 2]", 4), None, "no object");
    }
}
