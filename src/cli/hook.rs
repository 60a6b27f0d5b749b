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
    let mut text = Vec::new();
    std::io::stdin()
        .take(MAX_PAYLOAD)
        .read_to_end(&mut text)
        .map_err(|err| format!("reading the payload on stdin: {err}"))?;
    let value: Value = serde_json::from_slice(&text)
        .map_err(|err| format!("the payload on stdin is not JSON: {err}"))?;
    let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
    let event = text("hook_event_name")
        .ok_or("the payload has no hook_event_name: not a hook payload of this agent")?;
    let session = text("session_id")
        .filter(|s| !s.is_empty())
        .ok_or_else(|| format!("{event}: the payload has no session_id"))?;
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
        let line = format!(
            "rewind hook {}: warning: the store had lost its objects: moved to {} and a new one started",
            agent.name(),
            aside.display()
        );
        errln!("{line}");
        log(global, &line);
    }
    let event = agent
        .events()
        .iter()
        .find(|(name, _)| *name == payload.event)
        .map(|(_, event)| *event);
    let turns = session_turns(&store, &payload.session)?;
    // Turns left open: the agent was interrupted (no stop hook runs then), or it crashed.
    // What they did is theirs, so they end now; one an undo rolled back cannot end and stays.
    for turn in turns
        .iter()
        .filter(|t| t.ended_at.is_none() && !t.rolled_back)
    {
        match store.end_turn(&payload.session, &turn.turn) {
            Err(err) if err.code() == "turn_state" => {}
            other => drop(other?),
        }
    }
    if event != Some(Event::Prompt) || is_rewind_command(payload.prompt.as_deref()) {
        // A stop ended the open turn above (a stop again while `stop_hook_active`, or without
        // a begin, finds none). Rewind's own slash commands are no turn of the agent.
        return Ok(());
    }
    let next = turns
        .iter()
        .filter_map(|t| t.turn.parse::<u64>().ok())
        .max()
        .unwrap_or(0)
        + 1;
    let options = rewind::BeginOptions::meta(meta(agent, payload));
    store.begin_turn_with(&payload.session, &next.to_string(), &options)?;
    Ok(())
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

/// Whether the prompt runs one of rewind's own commands (`/rewind-undo`): those change files
/// through rewind, and a turn around them would be the next thing an undo takes.
fn is_rewind_command(prompt: Option<&str>) -> bool {
    prompt.is_some_and(|p| p.trim_start().starts_with("/rewind-"))
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

/// Append `line` to `<data dir>/hooks.log`, with the time; a log that cannot be written is
/// said on stderr and otherwise ignored.
fn log(global: &Global, line: &str) {
    let Ok(dir) = rewind::private_data_dir(global.data_dir.as_deref()) else {
        return;
    };
    let path = dir.join("hooks.log");
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let written = std::fs::create_dir_all(&dir).and_then(|()| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?
            .write_all(format!("{now} {line}\n").as_bytes())
    });
    if let Err(err) = written {
        errln!("rewind hook: cannot write {}: {err}", path.display());
    }
}
