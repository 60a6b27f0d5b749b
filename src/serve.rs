//! `rewind serve`: JSON-RPC 2.0 over a line-based stream, for runtimes that do not link Rust.
//!
//! One request (or batch) per line in, one response per line out, until the input ends. Methods
//! mirror the library with params as objects; results have the CLI's `--json` shapes. Errors:
//! `-32700` parse error, `-32600` invalid request, `-32601` unknown method, `-32602` bad params,
//! `-32800` cancelled (`data.code` "cancelled"), and `-32000` for a failed operation, with
//! `data.code` the CLI's error code (`busy` when the store's lock stayed taken). A failed request
//! never stops the server; notifications (no `id`) get no response.
//!
//! Requests that may take the store's lock (and batches) run one at a time on a queue thread, in
//! the order read; while one runs or waits, the others (`turns`, `diff` between two ids) are
//! answered at once on their own threads, so responses can come in another order than their
//! requests (match them by `id`). `params.timeout_ms` bounds a request's lock wait and cancels
//! it at its next safe point; the notification `$/cancelRequest` with `params.id` cancels a
//! request at its next safe point (see `Call`). When the input ends, the queued and
//! running calls finish and answer first.

use std::io::{self, BufRead, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::store::Store;

/// How many threads answer reads beside a running or waiting write.
const READERS: usize = 4;

/// JSON-RPC code of a cancelled request (LSP's `RequestCancelled`).
const CANCELLED: i64 = -32800;

/// The longest request line read (4 MiB, some 50,000 paths): a longer one is answered
/// `-32600` and skipped, never held whole (parsed, a line takes tens of times its size).
const MAX_LINE: u64 = 4 << 20;

/// The most requests a batch may hold: a larger one is answered `-32600` and runs nothing
/// (each request costs a call's bookkeeping and an answer).
const MAX_BATCH: usize = 1000;

/// Serve requests from `input` until it ends, writing responses to `output`.
/// Returns when `input` ends and every call has answered, or an I/O error occurs on either
/// stream (after the running calls finish).
///
/// ```no_run
/// let store = rewind::Store::open(".".as_ref(), &rewind::OpenOptions::new(rewind::data_dir(None)?))?;
/// rewind::serve(&store, std::io::stdin().lock(), std::io::stdout())?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn serve(store: &Store, mut input: impl BufRead, output: impl Write + Send) -> io::Result<()> {
    let output = Output {
        stream: Mutex::new((output, None)),
    };
    let running = Running::default();
    // How many queued requests may take the store's lock.
    let writes = AtomicUsize::new(0);
    // Reads that arrive while a write runs or waits go to READERS threads of their own.
    let (read_queue, read_queued) = mpsc::channel::<(Value, Vec<Call>)>();
    let read_queued = Mutex::new(read_queued);
    std::thread::scope(|scope| {
        // (Moved in, so that the readers end once the input does.)
        let read_queue = read_queue;
        // Requests that may change the store run one at a time, in the order received. (Dropped
        // when the input ends: the thread answers what is queued, then ends.)
        let (queue, queued) = mpsc::channel::<(Value, Vec<Call>, bool)>();
        let (output, running, writes) = (&output, &running, &writes);
        // A process that cannot start them gets an error, not a panic; those started end
        // with the input's end, which returning here is.
        let cannot_start =
            |e: io::Error| io::Error::new(e.kind(), format!("starting serve's threads: {e}"));
        let thread = || std::thread::Builder::new().name("rewind-serve".into());
        thread()
            .spawn_scoped(scope, move || {
                for (message, calls, locks) in queued {
                    respond(store, output, message, &calls, running);
                    writes.fetch_sub(locks.into(), Ordering::Relaxed);
                }
            })
            .map_err(cannot_start)?;
        let read_queued = &read_queued;
        for _ in 0..READERS {
            thread()
                .spawn_scoped(scope, move || loop {
                    let next = read_queued.lock().unwrap_or_else(|p| p.into_inner()).recv();
                    let Ok((message, calls)) = next else { break };
                    respond(store, output, message, &calls, running);
                })
                .map_err(cannot_start)?;
        }
        let mut line = Vec::new();
        loop {
            line.clear();
            let read = io::Read::take(&mut input, MAX_LINE + 1).read_until(b'\n', &mut line)?;
            if read == 0 || output.broken() {
                return Ok::<_, io::Error>(());
            }
            if line.len() as u64 > MAX_LINE && line.last() != Some(&b'\n') {
                skip_line(&mut input)?;
                let message = format!("invalid request: a line over {} MiB", MAX_LINE >> 20);
                output.send(Some(error_response(Value::Null, -32600, &message, None)));
                continue;
            }
            if line.trim_ascii().is_empty() {
                continue;
            }
            // Bytes that are not UTF-8 are a parse error like any other malformed line.
            let message = match serde_json::from_slice::<Value>(&line) {
                Ok(Value::Array(batch)) if batch.len() > MAX_BATCH => {
                    output.send(Some(batch_too_large()));
                    continue;
                }
                Ok(message) => message,
                Err(e) => {
                    output.send(unparsed(&line, e));
                    continue;
                }
            };
            if message.get("method").and_then(Value::as_str) == Some("$/cancelRequest") {
                running.cancel(&message);
                let id = message.get("id").cloned();
                output.send(id.map(|id| json!({"jsonrpc": "2.0", "id": id, "result": null})));
                continue;
            }
            let calls = match &message {
                Value::Array(batch) if !batch.is_empty() => {
                    batch.iter().map(|r| running.start(r)).collect()
                }
                request => vec![running.start(request)],
            };
            let batch = matches!(&message, Value::Array(batch) if !batch.is_empty());
            let locks = batch || takes_lock(&message);
            if !batch && method(&message).is_none() {
                // An invalid request is answered at once: it runs nothing.
                respond(store, output, message, &calls, running);
            } else if !locks && writes.load(Ordering::Relaxed) > 0 {
                // A read (or an unknown method) while a write runs or waits: not behind it.
                read_queue
                    .send((message, calls))
                    .expect("the readers run until the input ends");
            } else {
                writes.fetch_add(locks.into(), Ordering::Relaxed);
                let job = (message, calls, locks);
                queue
                    .send(job)
                    .expect("the queue's thread runs until the input ends");
            }
        }
    })?;
    output.failed()
}

/// Read past the rest of the line (to its newline or the input's end), holding none of it.
fn skip_line(input: &mut impl BufRead) -> io::Result<()> {
    loop {
        let buffer = input.fill_buf()?;
        let Some(newline) = buffer.iter().position(|&b| b == b'\n') else {
            let whole = buffer.len();
            input.consume(whole);
            if whole == 0 {
                return Ok(());
            }
            continue;
        };
        input.consume(newline + 1);
        return Ok(());
    }
}

/// The answer to a batch of over [`MAX_BATCH`] requests (none of which runs).
fn batch_too_large() -> Value {
    let message = format!("invalid request: a batch of over {MAX_BATCH}");
    error_response(Value::Null, -32600, &message, None)
}

/// The answer to a line serde_json refused (`error`): a parse error; or, when only lone
/// surrogate escapes stood in the way (JSON all the same), an invalid request answered with its
/// id (null if the id held one), one per request of a batch (none for a notification).
fn unparsed(line: &[u8], error: serde_json::Error) -> Option<Value> {
    let Some(lossy) = lone_surrogates_replaced(line)
        .and_then(|lossy| serde_json::from_slice::<Value>(&lossy).ok())
    else {
        let message = format!("parse error: {error}");
        return Some(error_response(Value::Null, -32700, &message, None));
    };
    let refused = |request: &Value| {
        let id = request.get("id")?.clone();
        let id = match &id {
            Value::String(text) if text.contains('\u{fffd}') => Value::Null,
            _ => id,
        };
        let message = "invalid request: a lone surrogate escape (such as \\ud800) is no character";
        Some(error_response(id, -32600, message, None))
    };
    match &lossy {
        Value::Array(batch) if batch.len() > MAX_BATCH => Some(batch_too_large()),
        Value::Array(batch) => {
            let answers: Vec<Value> = batch.iter().filter_map(refused).collect();
            (!answers.is_empty()).then_some(Value::Array(answers))
        }
        request => refused(request),
    }
}

/// `text` with each `\uXXXX` escape of a lone surrogate replaced by `\ufffd`; `None` when it
/// has none. Linear in the text. serde_json refuses such an escape (`\ud800`, say, from text cut
/// inside a pair), though it is JSON: `serve` reads the request's id through this, and the
/// hooks a payload.
pub fn lone_surrogates_replaced(text: &[u8]) -> Option<Vec<u8>> {
    let surrogate = |at: usize| -> Option<u16> {
        let hex = text.get(at..at + 6)?.strip_prefix(b"\\u")?;
        let code = u16::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?;
        (0xd800..=0xdfff).contains(&code).then_some(code)
    };
    let (mut out, mut at, mut replaced) = (Vec::with_capacity(text.len()), 0, false);
    while at < text.len() {
        if text[at] != b'\\' {
            out.push(text[at]);
            at += 1;
            continue;
        }
        let len = match surrogate(at) {
            // Any other escape, whole (so that `\\` never starts one).
            None => 2,
            Some(0xd800..=0xdbff) if surrogate(at + 6).is_some_and(|low| low >= 0xdc00) => 12,
            Some(_) => {
                out.extend_from_slice(b"\\ufffd");
                replaced = true;
                at += 6;
                continue;
            }
        };
        out.extend_from_slice(&text[at..(at + len).min(text.len())]);
        at += len;
    }
    replaced.then_some(out)
}

/// The method of a valid request (`None` for an invalid one, or a batch).
fn method(request: &Value) -> Option<&str> {
    let valid_id = matches!(
        request.get("id"),
        None | Some(Value::Null | Value::Number(_) | Value::String(_))
    );
    let version = request.get("jsonrpc").and_then(Value::as_str);
    let method = request.get("method").and_then(Value::as_str);
    method.filter(|_| valid_id && version == Some("2.0"))
}

/// Whether `request` may take the store's lock (it may write, or snapshot the project). The
/// others read refs and objects only: `turns`, `diff`/`diff_full` between two snapshots.
fn takes_lock(request: &Value) -> bool {
    match method(request) {
        Some("diff" | "diff_full") => !request.pointer("/params/to").is_some_and(Value::is_string),
        // Every other method but these reads (unknown ones are answered at once).
        Some(method) => {
            METHODS.contains(&method) && !["hello", "turns", "status"].contains(&method)
        }
        None => false,
    }
}

/// Answer a request or a batch and send the answer; the notices it carries (`status`) are told
/// once it is written. Costs what its operations cost.
fn respond<'s, W: Write>(
    store: &'s Store,
    output: &Output<W>,
    message: Value,
    calls: &[Call<'s>],
    running: &Running,
) {
    if output.send(answer(store, message, calls, running)) {
        for call in calls {
            let taken = call
                .notices
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            if let Some(notices) = taken {
                notices.told();
            }
        }
    }
}

/// Answer a request or a batch, and forget its calls. Costs what its operations cost.
fn answer<'s>(
    store: &'s Store,
    message: Value,
    calls: &[Call<'s>],
    running: &Running,
) -> Option<Value> {
    let response = match message {
        Value::Array(batch) if !batch.is_empty() => {
            let requests = batch.into_iter().zip(calls);
            let responses: Vec<Value> = requests
                .filter_map(|(request, call)| handle(store, request, call))
                .collect();
            (!responses.is_empty()).then_some(Value::Array(responses))
        }
        request => handle(store, request, &calls[0]),
    };
    calls.iter().for_each(|call| running.finish(call));
    response
}

/// The response stream, shared by the calls' threads: each response goes out whole, on one
/// line. After a write failed, responses are dropped and the error is kept for `serve`.
struct Output<W> {
    stream: Mutex<(W, Option<io::Error>)>,
}

impl<W: Write> Output<W> {
    /// Write `response` and flush; whether it was written. Costs one `write` (responses are
    /// buffered whole).
    fn send(&self, response: Option<Value>) -> bool {
        let Some(response) = response else {
            return false;
        };
        let mut text = response.to_string().into_bytes();
        text.push(b'\n');
        let mut stream = self.stream.lock().unwrap_or_else(|p| p.into_inner());
        let (writer, failed) = &mut *stream;
        if failed.is_none() {
            *failed = writer.write_all(&text).and_then(|()| writer.flush()).err();
            return failed.is_none();
        }
        false
    }

    fn broken(&self) -> bool {
        self.stream
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .1
            .is_some()
    }

    fn failed(&self) -> io::Result<()> {
        let mut stream = self.stream.lock().unwrap_or_else(|p| p.into_inner());
        stream.1.take().map_or(Ok(()), Err)
    }
}

/// The requests being answered, by id, with the flag that cancels each.
#[derive(Default)]
struct Running {
    calls: Mutex<Vec<(String, Arc<AtomicBool>)>>,
}

/// One request's id (its JSON text; `None` for a notification), cancel flag, and when the
/// server read it (its `timeout_ms` counts from then).
struct Call<'s> {
    id: Option<String>,
    cancel: Arc<AtomicBool>,
    read_at: Instant,
    /// The notices its answer carries, told once it is written.
    notices: Mutex<Option<crate::store::Notices<'s>>>,
}

impl Running {
    /// Register `request` before it runs, so that a cancel can reach it from then on.
    fn start<'s>(&self, request: &Value) -> Call<'s> {
        let call = Call {
            id: request.get("id").map(Value::to_string),
            cancel: Arc::default(),
            read_at: Instant::now(),
            notices: Mutex::default(),
        };
        if let Some(id) = &call.id {
            let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
            calls.push((id.clone(), call.cancel.clone()));
        }
        call
    }

    fn finish(&self, call: &Call<'_>) {
        let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        calls.retain(|(_, cancel)| !Arc::ptr_eq(cancel, &call.cancel));
    }

    /// Cancel the running requests named by `$/cancelRequest`'s `params.id`; an id that
    /// names none (unknown, finished) is ignored. Costs a scan of the running requests.
    fn cancel(&self, message: &Value) {
        let Some(id) = message.pointer("/params/id").map(Value::to_string) else {
            return;
        };
        let calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        for (_, cancel) in calls.iter().filter(|(running, _)| *running == id) {
            cancel.store(true, Ordering::Relaxed);
        }
    }
}

/// Answer one request; `None` for a notification.
fn handle<'s>(store: &'s Store, request: Value, call: &Call<'s>) -> Option<Value> {
    let id = request.get("id").cloned();
    let Some(method) = method(&request) else {
        // An invalid request is answered even without an id (then with id null).
        let valid_id = matches!(id, Some(Value::Number(_) | Value::String(_)));
        let id = id.filter(|_| valid_id).unwrap_or(Value::Null);
        return Some(error_response(id, -32600, "invalid request", None));
    };
    let is_notification = id.is_none();
    let id = id.unwrap_or(Value::Null);
    let mut params = request.get("params").cloned().unwrap_or(json!({}));
    tracing::debug!(method, "request");
    let result = timeout(&mut params, call.read_at).and_then(|deadline| {
        let mut interrupt = crate::store::Call::new().interrupt(call.cancel.clone());
        if let Some(deadline) = deadline {
            interrupt = interrupt.deadline(deadline);
        }
        // Cancelled while queued (in a batch): never started.
        if call.cancel.load(Ordering::Relaxed) {
            return Err(Failure::Operation(crate::error::Error::Cancelled {
                reason: "by the caller",
            }));
        }
        interrupt.run(|| self::call(store, method, params, &call.notices))
    });
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
            let code = match err {
                crate::error::Error::Cancelled { .. } => CANCELLED,
                _ => -32000,
            };
            error_response(id, code, &err.to_string(), Some(err.code()))
        }
    })
}

/// Take `timeout_ms` (milliseconds, a whole number) out of `params`: the deadline it sets,
/// counted from `read_at`, when the server read the request.
fn timeout(params: &mut Value, read_at: Instant) -> Result<Option<Instant>, Failure> {
    let Some(timeout) = params.as_object_mut().and_then(|p| p.remove("timeout_ms")) else {
        return Ok(None);
    };
    let millis = timeout.as_u64().ok_or_else(|| {
        Failure::BadParams("bad params: `timeout_ms` is a whole number of milliseconds".into())
    })?;
    let wait = Duration::from_millis(millis);
    Ok(Some(crate::store::deadline_in(read_at, wait)))
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
    Operation(crate::error::Error),
}

impl From<crate::error::Error> for Failure {
    fn from(err: crate::error::Error) -> Self {
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

/// How turn summaries list files, from a request's `no_renames`.
fn summary(no_renames: bool) -> crate::turns::SummaryOptions {
    crate::turns::SummaryOptions {
        renames: !no_renames,
    }
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
    /// A moved file as a deletion and an addition (`--no-renames`).
    #[serde(default)]
    no_renames: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DiffFull {
    from: String,
    to: Option<String>,
    #[serde(default)]
    paths: Vec<PathBuf>,
    /// The result's total text ([`crate::diff::DiffOptions::max_total_content_bytes`]).
    max_bytes: Option<u64>,
    /// A moved file as a deletion and an addition (`--no-renames`).
    #[serde(default)]
    no_renames: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Restore {
    hash: String,
    #[serde(default)]
    force: bool,
    #[serde(default)]
    dry_run: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Revert {
    hash: String,
    paths: Vec<PathBuf>,
    #[serde(default)]
    dry_run: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TurnId {
    session: String,
    turn: String,
    /// A moved file as a deletion and an addition (`--no-renames`).
    #[serde(default)]
    no_renames: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Prune {
    #[serde(default)]
    dry_run: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TurnBegin {
    session: String,
    turn: String,
    #[serde(default)]
    meta: std::collections::BTreeMap<String, String>,
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
    /// A moved file as a deletion and an addition (`--no-renames`).
    #[serde(default)]
    no_renames: bool,
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
    #[serde(default)]
    dry_run: bool,
    /// The most recent turn not undone yet (instead of `turn` and `file`).
    #[serde(default)]
    last: bool,
    /// `turn` alone, later turns kept (three-way merges).
    #[serde(default)]
    only: bool,
    /// Merge paths someone else changed since instead of leaving them alone.
    #[serde(default)]
    merge: bool,
}

/// The protocol's version: additions (methods, params, result members) keep it; a change that
/// breaks a client raises it.
const PROTOCOL: u64 = 2;

/// Every method `serve` answers.
const METHODS: &[&str] = &[
    "hello",
    "track",
    "patch",
    "diff",
    "diff_full",
    "has_changes",
    "restore",
    "revert",
    "turn_begin",
    "track_file",
    "turn_end",
    "turns",
    "undo",
    "redo",
    "changes",
    "prune",
    "status",
];

/// Run `method` with `params`. Costs what the library operation costs.
fn call<'s>(
    store: &'s Store,
    method: &str,
    raw: Value,
    notices: &Mutex<Option<crate::store::Notices<'s>>>,
) -> Result<Value, Failure> {
    match method {
        "hello" => {
            let Empty {} = params(raw)?;
            value(json!({
                "protocol": PROTOCOL,
                "version": env!("CARGO_PKG_VERSION"),
                "methods": METHODS,
                "capabilities": ["timeout_ms", "cancel_request", "reads_beside_writes"],
            }))
        }
        "track" => {
            let Empty {} = params(raw)?;
            value(store.track(&Default::default())?)
        }
        "status" => {
            let Empty {} = params(raw)?;
            let taken = store.take_notices();
            let answer = json!({ "watcher": store.watch_status(), "notices": taken.lines() });
            *notices.lock().unwrap_or_else(|p| p.into_inner()) = Some(taken);
            value(answer)
        }
        "patch" => {
            let Hash { hash } = params(raw)?;
            value(store.patch(store.resolve(&hash)?)?)
        }
        "diff" => {
            let Range {
                from,
                to,
                no_renames,
            } = params(raw)?;
            let (from, to) = store.resolve_range(&from, to.as_deref())?;
            let options = crate::diff::DiffOptions {
                renames: !no_renames,
                ..Default::default()
            };
            let text = store.diff_with(from, to, &options)?;
            value(json!({"diff": String::from_utf8_lossy(&text)}))
        }
        "diff_full" => {
            let DiffFull {
                from,
                to,
                paths,
                max_bytes,
                no_renames,
            } = params(raw)?;
            let (from, to) = store.resolve_range(&from, to.as_deref())?;
            let mut options = crate::diff::DiffOptions {
                paths,
                renames: !no_renames,
                ..Default::default()
            };
            if let Some(max_bytes) = max_bytes {
                options.max_total_content_bytes = max_bytes;
            }
            value(store.diff_full(from, to, &options)?)
        }
        "has_changes" => {
            let Hash { hash } = params(raw)?;
            let full = store.resolve(&hash)?;
            let changed = store.has_changes(full)?;
            value(json!({"hash": full, "changed": changed}))
        }
        "restore" => {
            let Restore {
                hash,
                force,
                dry_run,
            } = params(raw)?;
            let options = crate::restore::RestoreOptions { force, dry_run };
            value(store.restore(store.resolve(&hash)?, &options)?)
        }
        "revert" => {
            let Revert {
                hash,
                paths,
                dry_run,
            } = params(raw)?;
            let options = crate::restore::RestoreOptions {
                dry_run,
                ..Default::default()
            };
            value(store.revert_with(store.resolve(&hash)?, &paths, &options)?)
        }
        "turn_begin" => {
            let TurnBegin {
                session,
                turn,
                meta,
            } = params(raw)?;
            let options = crate::turns::BeginOptions::meta(meta);
            let start = store.begin_turn_with(&session, &turn, &options)?;
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
            let TurnId {
                session,
                turn,
                no_renames,
            } = params(raw)?;
            let mut row = json!(store.end_turn_with(&session, &turn, &summary(no_renames))?);
            row["session"] = json!(session);
            row["turn"] = json!(turn);
            Ok(row)
        }
        "turns" => {
            let Session {
                session,
                no_renames,
            } = params(raw)?;
            value(store.turns_with(session.as_deref(), &summary(no_renames))?)
        }
        "undo" => {
            let Undo {
                session,
                turn,
                file,
                force,
                dry_run,
                last,
                only,
                merge,
            } = params(raw)?;
            if last && (turn.is_some() || file.is_some()) {
                return Err(Failure::BadParams(
                    "bad params: `last` goes without `turn` and `file`".into(),
                ));
            }
            if only && (turn.is_none() || merge) {
                return Err(Failure::BadParams(
                    "bad params: `only` needs `turn`, and merges already (no `merge`)".into(),
                ));
            }
            let options = crate::turns::UndoOptions {
                turn,
                file,
                force,
                dry_run,
                only,
                merge,
            };
            value(match last {
                true => store.undo_last_with(&session, &options)?,
                false => store.undo(&session, &options)?,
            })
        }
        "redo" => {
            let Redo {
                session,
                turn,
                force,
            } = params(raw)?;
            value(store.redo(&session, &crate::turns::RedoOptions { turn, force })?)
        }
        "changes" => {
            let Session {
                session,
                no_renames,
            } = params(raw)?;
            let session = session
                .ok_or_else(|| Failure::BadParams("bad params: missing field `session`".into()))?;
            value(store.changes_with(&session, &summary(no_renames))?)
        }
        "prune" => {
            let Prune { dry_run } = params(raw)?;
            let options = crate::prune::PruneOptions {
                dry_run,
                ..Default::default()
            };
            value(store.prune(&options)?)
        }
        _ => Err(Failure::UnknownMethod),
    }
}
