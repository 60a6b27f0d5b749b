//! `rewind serve`: JSON-RPC 2.0 over a line-based stream, for runtimes that do not link Rust.
//!
//! One request per line in, one response per line out, until the input ends. Methods mirror
//! the library with params as objects; results have the CLI's `--json` shapes. Errors:
//! `-32700` parse error, `-32600` invalid request, `-32601` unknown method, `-32602` bad params,
//! and `-32000` for a failed operation, with `data.code` the CLI's error code. A failed request
//! never stops the server; notifications (no `id`) get no response. The store stays open
//! between calls; its lock is held only during each call.

use std::io::{self, BufRead, Write};
use std::path::PathBuf;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::store::Store;

/// Serve requests from `input` until it ends, writing responses to `output`.
/// Returns only when `input` ends or an I/O error occurs on either stream.
///
/// ```no_run
/// let store = rewind::Store::open(".".as_ref(), &rewind::data_dir(None)?)?;
/// rewind::serve(&store, std::io::stdin().lock(), std::io::stdout().lock())?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn serve(store: &Store, mut input: impl BufRead, mut output: impl Write) -> io::Result<()> {
    let mut line = Vec::new();
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            return Ok(());
        }
        if line.trim_ascii().is_empty() {
            continue;
        }
        // Bytes that are not UTF-8 are a parse error like any other malformed line.
        let response = match serde_json::from_slice::<Value>(&line) {
            Err(e) => Some(error_response(
                Value::Null,
                -32700,
                &format!("parse error: {e}"),
                None,
            )),
            Ok(Value::Array(batch)) if !batch.is_empty() => {
                let responses: Vec<Value> =
                    batch.into_iter().filter_map(|r| handle(store, r)).collect();
                (!responses.is_empty()).then_some(Value::Array(responses))
            }
            Ok(request) => handle(store, request),
        };
        if let Some(response) = response {
            writeln!(output, "{response}")?;
            output.flush()?;
        }
    }
}

/// Answer one request; `None` for a notification.
fn handle(store: &Store, request: Value) -> Option<Value> {
    let id = request.get("id").cloned();
    let valid_id = matches!(
        id,
        None | Some(Value::Null | Value::Number(_) | Value::String(_))
    );
    let (Some(method), true, true) = (
        request.get("method").and_then(Value::as_str),
        request.get("jsonrpc").and_then(Value::as_str) == Some("2.0"),
        valid_id,
    ) else {
        // An invalid request is answered even without an id (then with id null).
        let id = id.filter(|_| valid_id).unwrap_or(Value::Null);
        return Some(error_response(id, -32600, "invalid request", None));
    };
    let is_notification = id.is_none();
    let id = id.unwrap_or(Value::Null);
    let params = request.get("params").cloned().unwrap_or(json!({}));
    tracing::debug!(method, "request");
    let result = call(store, method, params);
    if is_notification {
        return None;
    }
    Some(match result {
        Ok(value) => json!({"jsonrpc": "2.0", "id": id, "result": value}),
        Err(Failure::UnknownMethod) => {
            error_response(id, -32601, &format!("unknown method {method:?}"), None)
        }
        Err(Failure::BadParams(message)) => error_response(id, -32602, &message, None),
        Err(Failure::Operation(err)) => {
            error_response(id, -32000, &err.to_string(), Some(err.code()))
        }
    })
}

fn error_response(id: Value, code: i64, message: &str, data_code: Option<&str>) -> Value {
    let mut error = json!({"code": code, "message": message});
    if let Some(data_code) = data_code {
        error["data"] = json!({"code": data_code});
    }
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

enum Failure {
    UnknownMethod,
    BadParams(String),
    Operation(crate::Error),
}

impl From<crate::Error> for Failure {
    fn from(err: crate::Error) -> Self {
        Failure::Operation(err)
    }
}

fn params<T: DeserializeOwned>(params: Value) -> Result<T, Failure> {
    // Absent params are an empty object; positional (array) params are not supported.
    if !params.is_object() {
        return Err(Failure::BadParams(
            "bad params: expected an object of named params".into(),
        ));
    }
    serde_json::from_value(params).map_err(|e| Failure::BadParams(format!("bad params: {e}")))
}

fn value(result: impl serde::Serialize) -> Result<Value, Failure> {
    Ok(serde_json::to_value(result).expect("results serialize"))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Hash {
    hash: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Range {
    from: String,
    to: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Restore {
    hash: String,
    #[serde(default)]
    force: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Revert {
    hash: String,
    paths: Vec<PathBuf>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TurnId {
    session: String,
    turn: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TrackFile {
    session: String,
    turn: String,
    path: PathBuf,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Session {
    session: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Redo {
    session: String,
    turn: Option<String>,
    #[serde(default)]
    force: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Undo {
    session: String,
    turn: Option<String>,
    file: Option<PathBuf>,
    #[serde(default)]
    force: bool,
    /// The most recent turn not undone yet (instead of `turn` and `file`).
    #[serde(default)]
    last: bool,
}

/// Run `method` with `params`. Costs what the library operation costs.
fn call(store: &Store, method: &str, raw: Value) -> Result<Value, Failure> {
    match method {
        "track" => {
            let Empty {} = params(raw)?;
            value(store.track(&Default::default())?)
        }
        "patch" => {
            let Hash { hash } = params(raw)?;
            value(store.patch(&hash)?)
        }
        "diff" => {
            let Range { from, to } = params(raw)?;
            let text = store.diff(&from, to.as_deref())?;
            value(json!({"diff": String::from_utf8_lossy(&text)}))
        }
        "diff_full" => {
            let Range { from, to } = params(raw)?;
            value(store.diff_full(&from, to.as_deref(), &Default::default())?)
        }
        "has_changes" => {
            let Hash { hash } = params(raw)?;
            let full = store.resolve_tree(&hash)?.to_string();
            let changed = store.has_changes(&full)?;
            value(json!({"hash": full, "changed": changed}))
        }
        "restore" => {
            let Restore { hash, force } = params(raw)?;
            value(store.restore(&hash, &crate::RestoreOptions { force })?)
        }
        "revert" => {
            let Revert { hash, paths } = params(raw)?;
            value(store.revert(&hash, &paths)?)
        }
        "turn_begin" => {
            let TurnId { session, turn } = params(raw)?;
            let start = store.begin_turn(&session, &turn)?;
            value(
                json!({"session": session, "turn": turn, "before": start.before, "skipped": start.skipped}),
            )
        }
        "track_file" => {
            let TrackFile {
                session,
                turn,
                path,
            } = params(raw)?;
            store.track_file(&session, &turn, &path)?;
            value(json!({"session": session, "turn": turn, "path": path.to_string_lossy()}))
        }
        "turn_end" => {
            let TurnId { session, turn } = params(raw)?;
            let mut row = json!(store.end_turn(&session, &turn)?);
            row["session"] = json!(session);
            row["turn"] = json!(turn);
            Ok(row)
        }
        "turns" => {
            let Session { session } = params(raw)?;
            value(store.turns(session.as_deref())?)
        }
        "undo" => {
            let Undo {
                session,
                turn,
                file,
                force,
                last,
            } = params(raw)?;
            if last && (turn.is_some() || file.is_some()) {
                return Err(Failure::BadParams(
                    "bad params: `last` goes without `turn` and `file`".into(),
                ));
            }
            value(match last {
                true => store.undo_last(&session, force)?,
                false => store.undo(&session, turn.as_deref(), file.as_deref(), force)?,
            })
        }
        "redo" => {
            let Redo {
                session,
                turn,
                force,
            } = params(raw)?;
            value(store.redo(&session, turn.as_deref(), force)?)
        }
        "changes" => {
            let Session { session } = params(raw)?;
            let session = session
                .ok_or_else(|| Failure::BadParams("bad params: missing field `session`".into()))?;
            value(store.changes(&session)?)
        }
        "prune" => {
            let Empty {} = params(raw)?;
            value(store.prune(&Default::default())?)
        }
        _ => Err(Failure::UnknownMethod),
    }
}
