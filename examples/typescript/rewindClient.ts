// A small client for `rewind serve` (JSON-RPC 2.0 over stdio), for Node 18+.
// No npm dependencies: node:child_process and node:readline only.
//
//   import { RewindClient, RewindError } from "./rewindClient";
//
//   const rw = new RewindClient("/path/to/project");          // spawns `rewind -C ... serve`
//   const { hash: before } = await rw.track();
//   // ... the agent edits files ...
//   for (const row of await rw.diffFull(before)) console.log(row.file, row.additions, row.deletions);
//   try {
//     await rw.patch("not-an-id");
//   } catch (e) {
//     if (e instanceof RewindError) console.log(e.code, e.dataCode);   // -32000 "invalid_id"
//   }
//   await rw.close();                                          // closes stdin; the server exits 0
//
// Requests carry increasing ids; responses are matched by id, so calls may overlap (the server
// answers a read such as `turns` while an earlier write still waits for the store's lock, so
// answers can come out of order). `call(method, params, { timeoutMs })` bounds a request's wait
// for the lock (`busy` after it); `{ signal }` (an AbortSignal) cancels it.
//
// Self-test against a real binary (after compiling, e.g. `tsc rewindClient.ts`):
//   node rewindClient.js --selftest path/to/rewind      (needs flock(1), from util-linux)

import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { createInterface } from "node:readline";

/** An `error` response. `code`: the JSON-RPC code (-32000 for a failed operation, -32800 for a
 * cancelled one, -326xx for a malformed request); `dataCode`: the CLI's error code (`busy`,
 * `cancelled`, `invalid_id`, `not_found`, `wrong_type`, `bad_path`, `turn_state`,
 * `invalid_name`, ...) when there is one. */
export class RewindError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly dataCode?: string,
    readonly data?: unknown,
  ) {
    super(`rewind: ${message} (${code}${dataCode ? ` ${dataCode}` : ""})`);
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

// The result shapes: the same as the CLI's `--json` output.
export type Status = "added" | "deleted" | "modified";
export interface Snapshot {
  hash: string;
  files: number;
  skipped: { path: string; reason: "too_large" | "nested_repo" | "special_file" | "unreadable"; detail?: string }[];
}
export interface Patch { hash: string; files: string[] }
export interface FileChange {
  file: string; status: Status; before: string; after: string;
  additions: number; deletions: number; binary: boolean; truncated?: boolean; lossy?: boolean;
}
export interface Failure { path: string; error: string }
export interface RestoreOutcome {
  hash: string; written: string[]; deleted: string[]; failed: Failure[]; conflicts: string[]; kept: string[]; undo: string;
}
/** Whose change a file of a turn is (see docs/integration.md, "Two agents on one project"). */
export type Origin = "unannounced" | "announced" | "shared";
export interface TurnFile { file: string; status: Status; additions: number; deletions: number; origin: Origin }
export interface Skipped { path: string; reason: string; detail?: string }
export interface TurnStart { session: string; turn: string; before: string; skipped: Skipped[] }
export interface TurnEnd { session: string; turn: string; before: string; after: string; files: TurnFile[]; skipped: Skipped[] }
export interface Turn {
  session: string; turn: string; started_at: string; ended_at: string | null;
  before: string; after: string | null; files: number; additions: number; deletions: number;
  changed: TurnFile[]; rolled_back: boolean;
}
export interface UndoOutcome {
  restored: string[]; deleted: string[]; conflicts: string[]; kept: string[]; failed: Failure[]; undo: string;
}
export interface SessionChanges {
  session: string; files: TurnFile[]; total_files: number; total_additions: number; total_deletions: number;
}
export interface PruneOutcome {
  snapshots_removed: number; turns_removed: number; objects_removed: number; bytes_freed: number;
  sessions_removed: string[];
}

export interface RewindClientOptions {
  /** The binary (default: `rewind` on PATH). */
  rewind?: string;
  /** `--data-dir` (default: $REWIND_DATA_DIR, $XDG_DATA_HOME/rewind, ~/.local/share/rewind). */
  dataDir?: string;
  env?: NodeJS.ProcessEnv;
}

type Params = Record<string, unknown>;
export interface CallOptions {
  /** Bounds the server's wait for the store's lock: `busy` after it. */
  timeoutMs?: number;
  /** Once aborted, the server cancels the request at its next safe point (then RewindError
   * -32800 `cancelled`; a call already past it answers normally). */
  signal?: AbortSignal;
}
interface Pending { resolve: (result: unknown) => void; reject: (error: Error) => void }
interface Response {
  id?: unknown;
  result?: unknown;
  error?: { code: number; message: string; data?: { code?: string } };
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
    const args = [...(options.dataDir ? ["--data-dir", options.dataDir] : []), "-C", project, "serve"];
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

  /** Send a request; resolves with its `result`, rejects with a RewindError. */
  call<T = unknown>(method: string, params?: Params, options: CallOptions = {}): Promise<T> {
    if (this.closedReason !== undefined) return Promise.reject(new RewindClosedError(this.closedReason));
    const id = this.nextId++;
    if (options.timeoutMs !== undefined) params = { ...params, timeout_ms: options.timeoutMs };
    const request = params === undefined ? { jsonrpc: "2.0", id, method } : { jsonrpc: "2.0", id, method, params };
    const { signal } = options;
    const cancel = () => {
      if (this.closedReason === undefined) this.notify("$/cancelRequest", { id });
    };
    return new Promise<T>((resolve, reject) => {
      const settle = () => signal?.removeEventListener("abort", cancel);
      this.pending.set(id, {
        resolve: (result) => (settle(), resolve(result as T)),
        reject: (error) => (settle(), reject(error)),
      });
      this.child.stdin.write(JSON.stringify(request) + "\n");
      if (signal?.aborted) cancel();
      else signal?.addEventListener("abort", cancel, { once: true });
    });
  }

  /** Send a notification (no id): the server runs it and answers nothing. */
  notify(method: string, params?: Params): void {
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

  private onLine(line: string): void {
    let message: unknown;
    try {
      message = JSON.parse(line);
    } catch {
      return;
    }
    for (const response of (Array.isArray(message) ? message : [message]) as Response[]) {
      if (typeof response?.id !== "number") continue; // not one of ours (ours are numbers)
      const waiter = this.pending.get(response.id);
      if (!waiter) continue;
      this.pending.delete(response.id);
      const error = response.error;
      if (error) waiter.reject(new RewindError(error.code, error.message, error.data?.code, error.data));
      else waiter.resolve(response.result);
    }
  }

  private fail(reason: string): void {
    this.closedReason ??= reason;
    for (const waiter of this.pending.values()) waiter.reject(new RewindClosedError(reason));
    this.pending.clear();
  }

  // The methods, with the CLI's --json shapes.
  /** The protocol version, the server's version, its methods and capabilities: call first. */
  hello(): Promise<{ protocol: number; version: string; methods: string[]; capabilities: string[] }> { return this.call("hello"); }
  track(): Promise<Snapshot> { return this.call("track"); }
  patch(hash: string): Promise<Patch> { return this.call("patch", { hash }); }
  async diff(from: string, to?: string): Promise<string> {
    return (await this.call<{ diff: string }>("diff", to === undefined ? { from } : { from, to })).diff;
  }
  diffFull(from: string, to?: string): Promise<FileChange[]> {
    return this.call("diff_full", to === undefined ? { from } : { from, to });
  }
  async hasChanges(hash: string): Promise<boolean> {
    return (await this.call<{ hash: string; changed: boolean }>("has_changes", { hash })).changed;
  }
  restore(hash: string, force = false): Promise<RestoreOutcome> { return this.call("restore", { hash, force }); }
  revert(hash: string, paths: string[]): Promise<RestoreOutcome> { return this.call("revert", { hash, paths }); }
  turnBegin(session: string, turn: string): Promise<TurnStart> {
    return this.call("turn_begin", { session, turn });
  }
  trackFile(session: string, turn: string, path: string): Promise<{ session: string; turn: string; path: string }> {
    return this.call("track_file", { session, turn, path });
  }
  turnEnd(session: string, turn: string): Promise<TurnEnd> { return this.call("turn_end", { session, turn }); }
  turns(session?: string): Promise<Turn[]> { return this.call("turns", session === undefined ? {} : { session }); }
  undo(session: string, options: { turn?: string; file?: string; force?: boolean; last?: boolean } = {}): Promise<UndoOutcome> {
    return this.call("undo", { session, ...options });
  }
  /** Bring back what the session's last undo (not redone yet) changed, and only that. */
  redo(session: string, options: { turn?: string; force?: boolean } = {}): Promise<UndoOutcome> {
    return this.call("redo", { session, ...options });
  }
  changes(session: string): Promise<SessionChanges> { return this.call("changes", { session }); }
  prune(): Promise<PruneOutcome> { return this.call("prune"); }
}

// Self-test: `node rewindClient.js --selftest path/to/rewind` (after compiling with tsc).
async function selftest(rewind: string): Promise<number> {
  const fs = await import("node:fs");
  const os = await import("node:os");
  const path = await import("node:path");
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "rewind-ts-"));
  const project = path.join(root, "project");
  fs.mkdirSync(project);
  fs.writeFileSync(path.join(project, "a.txt"), "one\ntwo\n");
  let passed = 0;
  let failed = 0;
  const check = (name: string, ok: boolean, detail?: unknown) => {
    if (ok) passed++;
    else {
      failed++;
      console.error(`FAIL ${name}: ${JSON.stringify(detail)}`);
    }
  };
  const env = { ...process.env, HOME: root, XDG_CONFIG_HOME: root };
  const rw = new RewindClient(project, { rewind: path.resolve(rewind), dataDir: path.join(root, "data"), env });
  try {
    const before = (await rw.track()).hash;
    check("track", /^[0-9a-f]{40}$/.test(before), before);
    fs.writeFileSync(path.join(project, "a.txt"), "one\nTWO\n");
    const patch = await rw.patch(before.slice(0, 10));
    check("patch", JSON.stringify(patch) === JSON.stringify({ files: ["a.txt"], hash: before }), patch);
    const [row] = await rw.diffFull(before);
    check("diffFull", row.file === "a.txt" && row.additions === 1 && row.deletions === 1, row);
    check("diff", (await rw.diff(before)).includes("\n-two\n+TWO\n"));
    await rw.turnBegin("ts", "1");
    fs.writeFileSync(path.join(project, "a.txt"), "agent\n");
    const files = (await rw.turnEnd("ts", "1")).files;
    check("turnEnd", files.length === 1 && files[0].file === "a.txt", files);
    const undone = await rw.undo("ts", { turn: "1" });
    check("undo", undone.restored.join() === "a.txt", undone);
    check("undo bytes", fs.readFileSync(path.join(project, "a.txt"), "utf8") === "one\nTWO\n");
    const redone = await rw.redo("ts");
    check("redo", redone.restored.join() === "a.txt" && redone.conflicts.length === 0, redone);
    check("redo bytes", fs.readFileSync(path.join(project, "a.txt"), "utf8") === "agent\n");
    // Overlapping calls are matched by id.
    const all = await Promise.all([rw.turns("ts"), rw.hasChanges(before), rw.changes("ts")]);
    check("overlapping calls", all[0].length === 1 && all[1] === true && all[2].session === "ts", all);
    const codes = await Promise.all([
      rw.patch("zz").then(() => "no error", (e: RewindError) => `${e.code} ${e.dataCode}`),
      rw.call("nope").then(() => "no error", (e: RewindError) => `${e.code} ${e.dataCode}`),
    ]);
    check("errors", codes.join() === "-32000 invalid_id,-32601 undefined", codes);
    const restored = await rw.restore(before);
    check("restore", fs.readFileSync(path.join(project, "a.txt"), "utf8") === "one\ntwo\n", restored);
    await lockWaitAndCancel(rw, path.join(root, "data"), check);
  } catch (e) {
    check("cycle", false, String(e));
  }
  const code = await rw.close();
  check("exit 0", code === 0, { code, stderr: rw.stderr });
  fs.rmSync(root, { recursive: true, force: true });
  console.log(`typescript client: ${passed} passed, ${failed} failed`);
  return failed === 0 ? 0 : 1;
}

// With the store's lock held by another process (flock(1), as another rewind would hold it): a
// request with a timeout answers `busy`, `turns` is answered while a write waits, an aborted
// write answers `cancelled` and leaves no turn.
async function lockWaitAndCancel(
  rw: RewindClient,
  dataDir: string,
  check: (name: string, ok: boolean, detail?: unknown) => void,
): Promise<void> {
  const fs = await import("node:fs");
  const path = await import("node:path");
  const store = fs.readdirSync(dataDir).find((name) => name.endsWith(".git"));
  const lock = path.join(dataDir, String(store), "rewind.lock");
  const holder = spawn("flock", [lock, "sh", "-c", "echo locked && exec sleep 600"], { detached: true });
  try {
    const line = await new Promise<string>((resolve) => {
      holder.stdout.once("data", (chunk: Buffer) => resolve(chunk.toString()));
      holder.once("error", (err) => resolve(String(err)));
    });
    check("flock(1) holds the lock", line.trim() === "locked", line);
    const busy = await rw
      .call("turn_begin", { session: "ts", turn: "2" }, { timeoutMs: 100 })
      .then(() => "no error", (e: RewindError) => `${e.code} ${e.dataCode}`);
    check("busy", busy === "-32000 busy", busy);
    const abort = new AbortController();
    const waiting = rw
      .call("turn_begin", { session: "ts", turn: "2" }, { signal: abort.signal })
      .then(() => "no error", (e: RewindError) => `${e.code} ${e.dataCode}`);
    check("turns while a write waits", (await rw.turns("ts")).length === 1);
    abort.abort();
    const cancelled = await waiting;
    check("cancelled", cancelled === "-32800 cancelled", cancelled);
  } finally {
    if (holder.pid !== undefined) process.kill(-holder.pid, "SIGKILL");
  }
  check("no trace of the cancelled turn", (await rw.turns("ts")).length === 1);
}

if (process.argv[2] === "--selftest" && process.argv[3]) {
  selftest(process.argv[3]).then((code) => process.exit(code));
}
