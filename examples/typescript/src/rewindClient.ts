// A typed client for `rewind serve` (JSON-RPC 2.0 over stdio, one JSON object per line), for
// Node 20+. No runtime dependencies: node:child_process and node:readline only.
//
//   import { RewindClient, RewindError } from "rewind-undo-client";
//
//   const rw = new RewindClient("/path/to/project");          // spawns `rewind -C ... serve`
//   const { protocol } = await rw.hello();                     // 2: stop on one you do not know
//   const { hash: before } = await rw.track();
//   // ... the agent edits files ...
//   for (const row of await rw.diffFull(before)) console.log(row.file, row.additions, row.deletions);
//   await rw.diffFull(before, undefined, { paths: ["src"], maxBytes: 1 << 20 }); // src/ only, 1 MiB of text
//   try {
//     await rw.patch("not-an-id");
//   } catch (e) {
//     if (e instanceof RewindError) console.log(e.code, e.dataCode);   // -32000 "invalid_id"
//   }
//   await rw.close();                                          // closes stdin; the server exits 0
//
// Requests carry increasing ids; responses are matched by id, so calls may overlap (the server
// answers a read such as `turns` while an earlier write still waits for the store's lock, so
// answers can come out of order). Every method takes `{ timeoutMs, signal }` last: `timeoutMs`
// bounds the request's wait for the lock (`busy` after it), aborting `signal` cancels it.

import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { createInterface } from "node:readline";

// ---- The result shapes: the same as the CLI's `--json` output (protocol 2). ----

/** `hello`: call it first and stop on a `protocol` you do not know. */
export interface Hello {
  protocol: number;
  /** The server's version (the crate's). */
  version: string;
  methods: string[];
  capabilities: string[];
}
export type Status = "added" | "deleted" | "modified" | "renamed";
export type SkipReason = "too_large" | "nested_repo" | "special_file" | "unreadable" | "rewind_data" | "reserved_name";
/** A path a snapshot left out: an undo cannot bring it back. */
export interface Skipped {
  path: string;
  reason: SkipReason;
  /** The error, for `unreadable`. */
  detail?: string;
}
export interface Snapshot {
  /** The snapshot's id (40 hex digits). */
  hash: string;
  files: number;
  skipped: Skipped[];
}
export interface Patch {
  hash: string;
  files: string[];
}
export interface DiffText {
  diff: string;
}
export interface FileChange {
  file: string;
  status: Status;
  /** A rename's old path ("renamed" only). */
  old_file?: string;
  /** A rename's similarity in percent, as git's "similarity index" ("renamed" only). */
  similarity?: number;
  before: string;
  after: string;
  additions: number;
  deletions: number;
  binary: boolean;
  /** `before`/`after` are left empty for size (status and counts are still exact): a side is
   * over 4 MiB, or the row's text did not fit in `maxBytes` (present only when true). */
  truncated?: boolean;
  /** A side is not UTF-8: U+FFFD replaces what is not (present only when true). */
  lossy?: boolean;
}
export interface HasChanges {
  hash: string;
  changed: boolean;
}
export interface Failure {
  path: string;
  error: string;
}
/** What `restore`, `revert`, `undo` and `redo` did. */
export interface RestoreOutcome {
  /** The snapshot the files were brought back to. */
  hash: string;
  written: string[];
  deleted: string[];
  failed: Failure[];
  conflicts: string[];
  /** The conflicts `force` cannot take either (also in `conflicts`): a directory, a special file
   * or a nested repository stands at the path or on the way. Move it aside, then run again. */
  in_the_way?: string[];
  /** An undo's conflicts (also in `conflicts`) at paths the undone turn's end could not see
   * (ignored or left out then): whether someone changed them since cannot be told; `force` writes them. */
  unseen?: string[];
  kept: string[];
  /** `restore(undo)` puts everything back as it was before (in a dry run: the project now). */
  undo: string;
  /** Present (true) for a dry run: nothing was changed or recorded. */
  dry_run?: boolean;
  /** In a dry run, the patch of each file written or deleted, as `git diff` writes it. */
  diff?: string;
  /** Files an undo wrote with a three-way merge (also in `written`). */
  merged?: string[];
  /** For an undo: each file left alone because someone else changed it too (or, with `only`
   * and `force`, written with conflict markers). */
  conflict_details?: ConflictDetail[];
  /** An undo or redo whose files changed (as listed) but whose record of them failed afterwards. */
  unrecorded?: Unrecorded;
}
/** Why an undo or redo could not record what it did, and where that leaves its turns. */
export interface Unrecorded {
  /** "undo" or "redo". */
  what: string;
  /** Where its turns stand, and what to run. */
  state: string;
  /** The error's code (`disk_full`, say). */
  code: string;
  message: string;
}
/** Where an undo's turns and someone else's edits overlap, as 1-based line ranges. */
export interface ConflictHunk {
  ours_start: number;
  ours_lines: number;
  base_start: number;
  base_lines: number;
  theirs_start: number;
  theirs_lines: number;
}
/** A file an undo left alone: whether a merge would be clean, and where the edits overlap. */
export interface ConflictDetail {
  file: string;
  mergeable: boolean;
  hunks: ConflictHunk[];
  /** `merge` takes the later turns' work out; an earlier turn's part stays (someone changed the file after it). */
  merges_in_part: boolean;
}
/** Whose change a file of a turn is (see docs/integration.md, "Two agents on one project"). */
export type Origin = "unannounced" | "announced" | "shared";
export interface TurnFile {
  file: string;
  status: Status;
  /** A rename's old path ("renamed" only). */
  old_file?: string;
  similarity?: number;
  additions: number;
  deletions: number;
  /** Either side is binary: no lines are counted (git's numstat says "-"). */
  binary: boolean;
  origin: Origin;
}
export interface TurnStart {
  session: string;
  turn: string;
  before: string;
  skipped: Skipped[];
}
export interface TrackedFile {
  session: string;
  turn: string;
  path: string;
}
export interface TurnEnd {
  session: string;
  turn: string;
  before: string;
  after: string;
  files: TurnFile[];
  skipped: Skipped[];
}
export interface Turn {
  session: string;
  turn: string;
  /** RFC 3339. */
  started_at: string;
  /** `null` while the turn is open. */
  ended_at: string | null;
  before: string;
  after: string | null;
  files: number;
  additions: number;
  deletions: number;
  changed: TurnFile[];
  rolled_back: boolean;
  /** Rolled back by an undo killed before it finished: `undo` with `last` takes it again. */
  undo_stopped: boolean;
  /** The runtime's metadata given to `turn_begin`. */
  meta: Record<string, string>;
}
export interface SessionChanges {
  session: string;
  files: TurnFile[];
  total_files: number;
  total_additions: number;
  total_deletions: number;
}
export interface PruneOutcome {
  snapshots_removed: number;
  turns_removed: number;
  objects_removed: number;
  bytes_freed: number;
  sessions_removed: string[];
  /** Those of `sessions_removed` that went for the size quota, not age. */
  sessions_removed_for_size: string[];
  /** How many of `snapshots_removed` went for the size quota, not age. */
  snapshots_removed_for_size: number;
  /** Open turns removed with their sessions: open longer than `rewind.abandonedTurnAfter`. */
  abandoned_turns: { session: string; turn: string; started_at: string }[];
  /** Present (true) when the store is still over its size quota: the space is in use. */
  still_over_quota?: boolean;
  /** Present (true) for a dry run: nothing was removed; objects and bytes are estimates. */
  dry_run?: boolean;
}
/** The file-system watcher of `rewind serve` (off under `--no-watch`). */
export interface WatchStatus {
  /** Snapshots read only the directories that changed. */
  active: boolean;
  /** Why it is not active. */
  reason?: string;
  /** Directories watched. */
  directories: number;
  /** Snapshots that walked everything, read only changed directories, found no event. */
  full_walks: number;
  partial_walks: number;
  unchanged: number;
  /** Why the last full walk was needed. */
  last_full_walk?: string;
}
export interface ServerStatus {
  watcher: WatchStatus;
  /** What rewind found on its own since the last `status` (a killed restore's leftovers), one sentence each. */
  notices: string[];
}

// ---- The methods: params and result of each. ----

export interface TurnId {
  session: string;
  turn: string;
}
/** Which turns an undo takes back: `turn` and the later ones (with `file`: only that path), or
 * with `last: true` the most recent turn not undone yet, or with `only: true` `turn` alone
 * (later turns kept, by three-way merges). `force`: conflicts too. `dry_run`: change nothing,
 * say what it would do. `merge`: merge files someone else changed since. */
export type UndoWhich = { force?: boolean; dry_run?: boolean } & (
  | { last?: false; only?: false; turn?: string; file?: string; merge?: boolean }
  | { last?: false; only: true; turn: string; file?: string; merge?: never }
  | { last: true; only?: never; turn?: never; file?: never; merge?: boolean }
);
export type UndoParams = { session: string } & UndoWhich;
/** Which undo a redo takes back (default: the session's last one not redone yet). */
export interface RedoWhich {
  turn?: string;
  force?: boolean;
}
export type RedoParams = { session: string } & RedoWhich;
/** Which rows `diff_full` gives and how much text: only changes at or below `paths` (files or
 * directories, project-relative), and at most `maxBytes` of `before` + `after` text in all
 * (default 16 MiB; the rows after it come `truncated`, still listed and counted). */
export interface DiffFullFilter {
  paths?: string[];
  maxBytes?: number;
  /** A moved file as a deletion and an addition (`git diff --no-renames`). */
  noRenames?: boolean;
}
export interface DiffFullParams {
  from: string;
  to?: string;
  paths?: string[];
  max_bytes?: number;
  no_renames?: boolean;
}
/** `no_renames`: a moved file as a deletion and an addition, not one "renamed" row. */
export interface Renames {
  no_renames?: boolean;
}
type NoParams = Record<string, never>;

/** Every method of protocol 2, with its params and result. */
export interface Methods {
  hello: { params: NoParams; result: Hello };
  track: { params: NoParams; result: Snapshot };
  patch: { params: { hash: string }; result: Patch };
  diff: { params: { from: string; to?: string } & Renames; result: DiffText };
  diff_full: { params: DiffFullParams; result: FileChange[] };
  has_changes: { params: { hash: string }; result: HasChanges };
  restore: { params: { hash: string; force?: boolean; dry_run?: boolean }; result: RestoreOutcome };
  revert: { params: { hash: string; paths: string[]; dry_run?: boolean }; result: RestoreOutcome };
  turn_begin: { params: TurnId & { meta?: Record<string, string> }; result: TurnStart };
  track_file: { params: TurnId & { path: string }; result: TrackedFile };
  turn_end: { params: TurnId & Renames; result: TurnEnd };
  turns: { params: { session?: string } & Renames; result: Turn[] };
  undo: { params: UndoParams; result: RestoreOutcome };
  redo: { params: RedoParams; result: RestoreOutcome };
  changes: { params: { session: string } & Renames; result: SessionChanges };
  prune: { params: { dry_run?: boolean }; result: PruneOutcome };
  status: { params: Record<string, never>; result: ServerStatus };
}
export type Method = keyof Methods;

// (A Record, so that the compiler insists on every method and no other.)
const methodSet: Record<Method, true> = {
  hello: true, track: true, patch: true, diff: true, diff_full: true, has_changes: true,
  restore: true, revert: true, turn_begin: true, track_file: true, turn_end: true, turns: true,
  undo: true, redo: true, changes: true, prune: true, status: true,
};
/** The methods this client types, in the order `hello` lists them. */
export const METHODS: readonly Method[] = Object.keys(methodSet) as Method[];

// ---- Errors. ----

/** `error.data.code`: the CLI's error codes (docs/integration.md, Errors); others may come. */
export type ErrorCode =
  | "invalid_id" | "not_found" | "pruned" | "ambiguous_id" | "wrong_type" | "bad_path" | "turn_state"
  | "invalid_name" | "project" | "store" | "object" | "io" | "permission" | "disk_full"
  | "bad_clock" | "busy" | "resources" | "cancelled"
  | (string & {});

/** An `error` response. `code`: the JSON-RPC code (-32000 for a failed operation, -32800 for a
 * cancelled one, -32602 for bad params, -32601 for an unknown method, -32600/-32700 for a
 * malformed request); `dataCode`: the CLI's error code, for -32000 and -32800. */
export class RewindError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly dataCode?: ErrorCode,
    readonly data?: unknown,
  ) {
    super(`rewind: ${message} (${code}${dataCode === undefined ? "" : ` ${dataCode}`})`);
    this.name = "RewindError";
  }
}

/** The server exited, or could not be started, before answering. */
export class RewindClosedError extends RewindError {
  constructor(message: string) {
    super(-32099, message);
    this.name = "RewindClosedError";
  }
}

// ---- The client. ----

export interface RewindClientOptions {
  /** The binary (default: `rewind` on PATH). */
  rewind?: string;
  /** `--data-dir` (default: $REWIND_DATA_DIR, $XDG_DATA_HOME/rewind, ~/.local/share/rewind). */
  dataDir?: string;
  env?: NodeJS.ProcessEnv;
}

export interface CallOptions {
  /** Bounds the server's wait for the store's lock: `busy` after it. */
  timeoutMs?: number;
  /** Once aborted, the server cancels the request at its next safe point (then RewindError
   * -32800 `cancelled`; a call already past it answers normally). */
  signal?: AbortSignal;
}

interface Pending {
  resolve: (result: unknown) => void;
  reject: (error: Error) => void;
}

/** One `rewind serve` process for one project. */
export class RewindClient {
  private readonly child: ChildProcessWithoutNullStreams;
  private readonly pending = new Map<number, Pending>();
  private readonly exited: Promise<number | null>;
  private nextId = 1;
  private closedReason: string | undefined;
  private stderrText = "";

  constructor(project: string, options: RewindClientOptions = {}) {
    const args = [...(options.dataDir === undefined ? [] : ["--data-dir", options.dataDir]), "-C", project, "serve"];
    this.child = spawn(options.rewind ?? "rewind", args, { stdio: ["pipe", "pipe", "pipe"], env: options.env });
    createInterface({ input: this.child.stdout, crlfDelay: Infinity }).on("line", (line) => this.onLine(line));
    this.child.stderr.setEncoding("utf8");
    this.child.stderr.on("data", (chunk: string) => (this.stderrText += chunk));
    this.child.stdin.on("error", () => {}); // EPIPE when the server is gone: reported via "close"
    this.exited = new Promise((resolve) => {
      this.child.on("error", (err) => {
        this.fail(`cannot run rewind serve: ${err.message}`); // e.g. ENOENT
        resolve(null);
      });
      this.child.on("close", (code) => {
        const stderr = this.stderrText.trim();
        this.fail(`rewind serve exited with ${code}${stderr ? `: ${stderr}` : ""}`);
        resolve(code);
      });
    });
  }

  /** Send a request for one of the protocol's methods; resolves with its typed `result`,
   * rejects with a RewindError. */
  call<M extends Method>(method: M, params: Methods[M]["params"], options: CallOptions = {}): Promise<Methods[M]["result"]> {
    return this.callRaw(method, params, options) as Promise<Methods[M]["result"]>;
  }

  /** Send any request (a method this client does not know, params it does not type): resolves
   * with the untyped `result`. */
  callRaw(method: string, params?: object, options: CallOptions = {}): Promise<unknown> {
    if (this.closedReason !== undefined) return Promise.reject(new RewindClosedError(this.closedReason));
    const id = this.nextId++;
    if (options.timeoutMs !== undefined) {
      if (Array.isArray(params)) return Promise.reject(new TypeError("timeoutMs goes with params as an object, not an array"));
      params = { ...params, timeout_ms: options.timeoutMs };
    }
    const request = params === undefined ? { jsonrpc: "2.0", id, method } : { jsonrpc: "2.0", id, method, params };
    const { signal } = options;
    const cancel = () => {
      if (this.closedReason === undefined) this.notify("$/cancelRequest", { id });
    };
    return new Promise<unknown>((resolve, reject) => {
      const settle = () => signal?.removeEventListener("abort", cancel);
      this.pending.set(id, {
        resolve: (result) => (settle(), resolve(result)),
        reject: (error) => (settle(), reject(error)),
      });
      this.child.stdin.write(JSON.stringify(request) + "\n");
      if (signal?.aborted) cancel();
      else signal?.addEventListener("abort", cancel, { once: true });
    });
  }

  /** Send a notification (no id): the server runs it and answers nothing. */
  notify(method: string, params?: object): void {
    if (this.closedReason !== undefined) throw new RewindClosedError(this.closedReason);
    const request = params === undefined ? { jsonrpc: "2.0", method } : { jsonrpc: "2.0", method, params };
    this.child.stdin.write(JSON.stringify(request) + "\n");
  }

  /** Close the server's stdin and wait for it to exit; resolves with its exit code. */
  close(): Promise<number | null> {
    this.child.stdin.end();
    return this.exited;
  }

  /** What the server wrote on stderr so far. */
  get stderr(): string {
    return this.stderrText;
  }

  // One parse per response line, one map lookup per response.
  private onLine(line: string): void {
    let message: unknown;
    try {
      message = JSON.parse(line);
    } catch {
      return;
    }
    for (const response of Array.isArray(message) ? (message as unknown[]) : [message]) {
      if (typeof response !== "object" || response === null) continue;
      const { id, result, error } = response as { id?: unknown; result?: unknown; error?: unknown };
      if (typeof id !== "number") continue; // not one of ours (ours are numbers)
      const waiter = this.pending.get(id);
      if (waiter === undefined) continue;
      this.pending.delete(id);
      if (error === undefined) waiter.resolve(result);
      else waiter.reject(toError(error));
    }
  }

  private fail(reason: string): void {
    this.closedReason ??= reason;
    for (const waiter of this.pending.values()) waiter.reject(new RewindClosedError(reason));
    this.pending.clear();
  }

  // ---- The methods. ----

  /** The protocol version, the server's version, its methods and capabilities: call first. */
  hello(options?: CallOptions): Promise<Hello> {
    return this.call("hello", {}, options);
  }
  /** Snapshot the project. */
  track(options?: CallOptions): Promise<Snapshot> {
    return this.call("track", {}, options);
  }
  /** The paths changed since snapshot `hash`. */
  patch(hash: string, options?: CallOptions): Promise<Patch> {
    return this.call("patch", { hash }, options);
  }
  /** `git diff -M`'s unified diff from `from` to `to` (default: the project now). */
  async diff(from: string, to?: string, options?: CallOptions & Renames): Promise<string> {
    const { no_renames, ...call } = options ?? {};
    const params = to === undefined ? { from } : { from, to };
    return (await this.call("diff", no_renames ? { ...params, no_renames } : params, call)).diff;
  }
  /** Per-file rows with both sides' text and `git diff -M --numstat`'s counts, from `from` to
   * `to` (default: the project now); `filter`: only some paths, a bound on the text, no renames. */
  diffFull(from: string, to?: string, filter: DiffFullFilter = {}, options?: CallOptions): Promise<FileChange[]> {
    const params: DiffFullParams = { from };
    if (to !== undefined) params.to = to;
    if (filter.paths !== undefined) params.paths = filter.paths;
    if (filter.maxBytes !== undefined) params.max_bytes = filter.maxBytes;
    if (filter.noRenames) params.no_renames = true;
    return this.call("diff_full", params, options);
  }
  async hasChanges(hash: string, options?: CallOptions): Promise<boolean> {
    return (await this.call("has_changes", { hash }, options)).changed;
  }
  /** `dry_run`: change nothing, return what the restore would do (with `diff`). */
  restore(hash: string, force = false, options?: CallOptions & { dry_run?: boolean }): Promise<RestoreOutcome> {
    const { dry_run, ...call } = options ?? {};
    return this.call("restore", dry_run ? { hash, force, dry_run } : { hash, force }, call);
  }
  revert(hash: string, paths: string[], options?: CallOptions & { dry_run?: boolean }): Promise<RestoreOutcome> {
    const { dry_run, ...call } = options ?? {};
    return this.call("revert", dry_run ? { hash, paths, dry_run } : { hash, paths }, call);
  }
  /** `meta`: the runtime's metadata, stored with the turn (a message id, tool call ids...). */
  turnBegin(
    session: string, turn: string, options?: CallOptions & { meta?: Record<string, string> },
  ): Promise<TurnStart> {
    const { meta, ...call } = options ?? {};
    return this.call("turn_begin", meta ? { session, turn, meta } : { session, turn }, call);
  }
  /** Announce a path the turn's agent is about to edit. */
  trackFile(session: string, turn: string, path: string, options?: CallOptions): Promise<TrackedFile> {
    return this.call("track_file", { session, turn, path }, options);
  }
  turnEnd(session: string, turn: string, options?: CallOptions & Renames): Promise<TurnEnd> {
    const { no_renames, ...call } = options ?? {};
    return this.call("turn_end", no_renames ? { session, turn, no_renames } : { session, turn }, call);
  }
  turns(session?: string, options?: CallOptions & Renames): Promise<Turn[]> {
    const { no_renames, ...call } = options ?? {};
    const params = session === undefined ? {} : { session };
    return this.call("turns", no_renames ? { ...params, no_renames } : params, call);
  }
  /** Undo the session's turns: see UndoWhich. Conflicts are left alone and listed. */
  undo(session: string, which: UndoWhich = {}, options?: CallOptions): Promise<RestoreOutcome> {
    return this.call("undo", { session, ...which }, options);
  }
  /** Bring back what the session's last undo (not redone yet) changed, and only that. */
  redo(session: string, which: RedoWhich = {}, options?: CallOptions): Promise<RestoreOutcome> {
    return this.call("redo", { session, ...which }, options);
  }
  /** Per-file totals of a session. */
  changes(session: string, options?: CallOptions & Renames): Promise<SessionChanges> {
    const { no_renames, ...call } = options ?? {};
    return this.call("changes", no_renames ? { session, no_renames } : { session }, call);
  }
  /** `dry_run`: remove nothing, say what a prune would remove now (and estimate what it frees). */
  prune(options?: CallOptions & { dry_run?: boolean }): Promise<PruneOutcome> {
    const { dry_run, ...call } = options ?? {};
    return this.call("prune", dry_run ? { dry_run } : {}, call);
  }
  /** Whether the server's file-system watcher runs, and why not. */
  status(options?: CallOptions): Promise<ServerStatus> {
    return this.call("status", {}, options);
  }
}

// An `error` member as the server sends it: { code, message, data?: { code } }.
function toError(error: unknown): RewindError {
  const { code, message, data } = (typeof error === "object" && error !== null ? error : {}) as {
    code?: unknown;
    message?: unknown;
    data?: unknown;
  };
  const dataCode =
    typeof data === "object" && data !== null && "code" in data && typeof data.code === "string" ? data.code : undefined;
  return new RewindError(
    typeof code === "number" ? code : -32603,
    typeof message === "string" ? message : JSON.stringify(error),
    dataCode,
    data,
  );
}
