// The client against the real binary: `REWIND_BIN=path/to/rewind npm test` (after `npm run build`).
// Each result is checked against its interface: a member the server sends that the interface
// lacks, or a required one it does not send, fails the test. Needs flock(1) (util-linux).

import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";

import {
  METHODS, RewindClient, RewindClosedError, RewindError,
  type FileChange, type Hello, type Patch, type PruneOutcome, type RestoreOutcome, type SessionChanges,
  type Skipped, type Snapshot, type TrackedFile, type Turn, type TurnEnd, type TurnFile, type TurnStart,
  type Failure, type HasChanges, type WatchStatus,
} from "./rewindClient.js";

// The binary under test: REWIND_BIN, which must name an existing file (no skipping).
function rewindBinary(): string {
  const bin = process.env["REWIND_BIN"];
  if (bin === undefined || bin === "") {
    throw new Error("REWIND_BIN is not set: point it at the rewind binary (e.g. ../../target/debug/rewind)");
  }
  const full = path.resolve(bin);
  if (!fs.existsSync(full)) throw new Error(`REWIND_BIN=${bin}: no such file ${full} (cargo build first)`);
  return full;
}

// Each member of T: "required" or "optional", as T declares it (the compiler keeps these lists
// complete: a member added to an interface must be added here).
type Shape<T> = { [K in keyof T]-?: {} extends Pick<T, K> ? "optional" : "required" };

// That `value` has exactly the members its interface allows, and every required one.
function assertShape<T extends object>(value: T, shape: Shape<T>, what: string): void {
  assert.equal(typeof value, "object", what);
  const keys = Object.keys(value);
  const unknown = keys.filter((key) => !Object.hasOwn(shape, key));
  const missing = Object.entries(shape)
    .filter(([key, kind]) => kind === "required" && !keys.includes(key))
    .map(([key]) => key);
  assert.deepEqual({ unknown, missing }, { unknown: [], missing: [] }, `${what}: ${JSON.stringify(value)}`);
}

const hello: Shape<Hello> = { protocol: "required", version: "required", methods: "required", capabilities: "required" };
const skipped: Shape<Skipped> = { path: "required", reason: "required", detail: "optional" };
const snapshot: Shape<Snapshot> = { hash: "required", files: "required", skipped: "required" };
const patch: Shape<Patch> = { hash: "required", files: "required" };
const fileChange: Shape<FileChange> = {
  file: "required", status: "required", old_file: "optional", similarity: "optional", before: "required",
  after: "required", additions: "required", deletions: "required", binary: "required", truncated: "optional",
  lossy: "optional",
};
const hasChanges: Shape<HasChanges> = { hash: "required", changed: "required" };
const failure: Shape<Failure> = { path: "required", error: "required" };
const restoreOutcome: Shape<RestoreOutcome> = {
  hash: "required", written: "required", deleted: "required", failed: "required", conflicts: "required",
  kept: "required", undo: "required", dry_run: "optional", diff: "optional", in_the_way: "optional", unseen: "optional",
  merged: "optional", conflict_details: "optional", unrecorded: "optional",
};
const turnFile: Shape<TurnFile> = {
  file: "required", status: "required", old_file: "optional", similarity: "optional", additions: "required",
  deletions: "required", binary: "required", origin: "required",
};
const turnStart: Shape<TurnStart> = { session: "required", turn: "required", before: "required", skipped: "required" };
const trackedFile: Shape<TrackedFile> = { session: "required", turn: "required", path: "required" };
const turnEnd: Shape<TurnEnd> = {
  session: "required", turn: "required", before: "required", after: "required", files: "required",
  skipped: "required",
};
const turn: Shape<Turn> = {
  session: "required", turn: "required", started_at: "required", ended_at: "required", before: "required",
  after: "required", files: "required", additions: "required", deletions: "required", changed: "required",
  rolled_back: "required", undo_stopped: "required", meta: "required",
};
const sessionChanges: Shape<SessionChanges> = {
  session: "required", files: "required", total_files: "required", total_additions: "required",
  total_deletions: "required",
};
const pruneOutcome: Shape<PruneOutcome> = {
  snapshots_removed: "required", turns_removed: "required", objects_removed: "required", bytes_freed: "required",
  sessions_removed: "required", sessions_removed_for_size: "required", snapshots_removed_for_size: "required",
  abandoned_turns: "required", still_over_quota: "optional", dry_run: "optional",
};

const watchStatus: Shape<WatchStatus> = {
  active: "required", reason: "optional", directories: "required", full_walks: "required",
  partial_walks: "required", unchanged: "required", last_full_walk: "optional",
};

const ID = /^[0-9a-f]{40}$/;

// The JSON-RPC code and data code a call rejects with.
async function errorOf(promise: Promise<unknown>): Promise<[number, string | undefined]> {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof RewindError, String(e));
    return [e.code, e.dataCode];
  }
  assert.fail("expected a RewindError");
}

// A temporary home, project and data dir, with the user's git config and rewind settings kept out.
function sandbox(): { root: string; project: string; dataDir: string; env: NodeJS.ProcessEnv } {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "rewind-ts-"));
  const project = path.join(root, "project");
  const home = path.join(root, "home");
  fs.mkdirSync(project);
  fs.mkdirSync(home);
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (!name.startsWith("GIT_") && !name.startsWith("REWIND_")) env[name] = value;
  }
  return { root, project, dataDir: path.join(root, "data"), env: { ...env, HOME: home, XDG_CONFIG_HOME: home } };
}

describe("rewind serve through RewindClient", () => {
  let box: ReturnType<typeof sandbox>;
  let rw: RewindClient;
  let before0 = "";
  const file = (name: string) => path.join(box.project, name);

  before(() => {
    const rewind = rewindBinary();
    box = sandbox();
    fs.writeFileSync(file("a.txt"), "one\ntwo\n");
    fs.writeFileSync(file("b.txt"), "stays\n");
    execFileSync("mkfifo", [file("pipe")]); // a special file: left out
    rw = new RewindClient(box.project, { rewind, dataDir: box.dataDir, env: box.env });
  });

  after(async () => {
    await rw.close();
    fs.rmSync(box.root, { recursive: true, force: true });
  });

  test("hello: protocol 2, and exactly the methods this client types", async () => {
    const result = await rw.hello();
    assertShape(result, hello, "hello");
    assert.equal(result.protocol, 2);
    assert.deepEqual(result.methods, [...METHODS]);
    assert.deepEqual(result.capabilities, ["timeout_ms", "cancel_request", "reads_beside_writes"]);
  });

  test("track: a snapshot, with what it left out", async () => {
    const result = await rw.track();
    assertShape(result, snapshot, "track");
    for (const row of result.skipped) assertShape(row, skipped, "track skipped");
    assert.match(result.hash, ID);
    assert.equal(result.files, 2);
    assert.deepEqual(result.skipped, [{ path: "pipe", reason: "special_file" }]);
    before0 = result.hash;
  });

  test("patch, diff, diff_full and has_changes since a snapshot", async () => {
    fs.writeFileSync(file("a.txt"), "one\nTWO\n");
    fs.writeFileSync(file("new.txt"), "new\n");
    const changed = await rw.patch(before0.slice(0, 10)); // ids may be abbreviated
    assertShape(changed, patch, "patch");
    assert.deepEqual(changed, { hash: before0, files: ["a.txt", "new.txt"] });
    const rows = await rw.diffFull(before0);
    for (const row of rows) assertShape(row, fileChange, "diff_full row");
    assert.deepEqual(rows, [
      { file: "a.txt", status: "modified", before: "one\ntwo\n", after: "one\nTWO\n", additions: 1, deletions: 1, binary: false },
      { file: "new.txt", status: "added", before: "", after: "new\n", additions: 1, deletions: 0, binary: false },
    ]);
    // Only some paths; a bound on the text: a.txt's 16 bytes fit, new.txt's then do not.
    assert.deepEqual(await rw.diffFull(before0, undefined, { paths: ["new.txt"] }), rows.slice(1));
    const bounded = await rw.diffFull(before0, undefined, { maxBytes: 16 });
    for (const row of bounded) assertShape(row, fileChange, "diff_full row");
    assert.deepEqual(bounded, [
      rows[0],
      { file: "new.txt", status: "added", before: "", after: "", additions: 1, deletions: 0, binary: false, truncated: true },
    ]);
    const text = await rw.diff(before0);
    assert.ok(text.includes("diff --git a/a.txt b/a.txt\n") && text.includes("\n-two\n+TWO\n"), text);
    const has = await rw.call("has_changes", { hash: before0.slice(0, 8) });
    assertShape(has, hasChanges, "has_changes");
    assert.deepEqual(has, { hash: before0, changed: true });
  });

  test("a turn: turn_begin, track_file, turn_end, then turns and changes", async () => {
    const begun = await rw.turnBegin("ts", "1", { meta: { message_id: "msg_1" } });
    assertShape(begun, turnStart, "turn_begin");
    assert.equal(begun.session, "ts");
    assert.match(begun.before, ID);
    const tracked = await rw.trackFile("ts", "1", "b.txt");
    assertShape(tracked, trackedFile, "track_file");
    assert.deepEqual(tracked, { session: "ts", turn: "1", path: "b.txt" });
    fs.writeFileSync(file("b.txt"), "changed by the agent\n");
    const ended = await rw.turnEnd("ts", "1");
    assertShape(ended, turnEnd, "turn_end");
    assert.equal(ended.before, begun.before);
    assert.match(ended.after, ID);
    for (const row of ended.files) assertShape(row, turnFile, "turn_end file");
    assert.deepEqual(ended.files, [{ file: "b.txt", status: "modified", additions: 1, deletions: 1, binary: false, origin: "announced" }]);

    const turns = await rw.turns("ts");
    for (const row of turns) assertShape(row, turn, "turns row");
    assert.equal(turns.length, 1);
    const [only] = turns;
    assert.ok(only !== undefined && only.ended_at !== null && !only.rolled_back, JSON.stringify(turns));
    assert.deepEqual(only.changed, ended.files);
    assert.deepEqual(only.meta, { message_id: "msg_1" });
    const totals = await rw.changes("ts");
    assertShape(totals, sessionChanges, "changes");
    assert.deepEqual(totals, { session: "ts", files: ended.files, total_files: 1, total_additions: 1, total_deletions: 1 });
  });

  test("undo and redo of the turn", async () => {
    const undone = await rw.undo("ts", { last: true });
    assertShape(undone, restoreOutcome, "undo");
    assert.deepEqual([undone.written, undone.conflicts, undone.failed], [["b.txt"], [], []]);
    assert.match(undone.hash, ID);
    assert.match(undone.undo, ID);
    assert.equal(fs.readFileSync(file("b.txt"), "utf8"), "stays\n");
    assert.equal((await rw.turns("ts"))[0]?.rolled_back, true);

    const redone = await rw.redo("ts");
    assertShape(redone, restoreOutcome, "redo");
    assert.deepEqual([redone.written, redone.conflicts], [["b.txt"], []]);
    assert.match(redone.hash, ID);
    assert.equal(fs.readFileSync(file("b.txt"), "utf8"), "changed by the agent\n");
    assert.equal((await rw.turns("ts"))[0]?.rolled_back, false);

    const byTurn = await rw.undo("ts", { turn: "1" });
    assert.deepEqual(byTurn.written, ["b.txt"]);
    assert.equal(fs.readFileSync(file("b.txt"), "utf8"), "stays\n");
  });

  test("errors: each carries its JSON-RPC code and data code", async () => {
    assert.deepEqual(await errorOf(rw.patch("zz")), [-32000, "invalid_id"]);
    assert.deepEqual(await errorOf(rw.changes("nobody")), [-32000, "not_found"]);
    assert.deepEqual(await errorOf(rw.turnEnd("ts", "1")), [-32000, "turn_state"]); // ended already
    assert.deepEqual(await errorOf(rw.callRaw("nope")), [-32601, undefined]);
    assert.deepEqual(await errorOf(rw.callRaw("patch", { hash: before0, extra: 1 })), [-32602, undefined]);
    assert.deepEqual(await errorOf(rw.callRaw("patch", [before0])), [-32602, undefined]);
    // The compiler refuses these params; the server refuses them too.
    // @ts-expect-error: `turn` is required
    assert.deepEqual(await errorOf(rw.call("turn_begin", { session: "ts" })), [-32602, undefined]);
    // @ts-expect-error: `last` goes without `turn`
    assert.deepEqual(await errorOf(rw.undo("ts", { last: true, turn: "1" })), [-32602, undefined]);
    // @ts-expect-error: `timeoutMs` is a number of milliseconds
    assert.deepEqual(await errorOf(rw.track({ timeoutMs: "soon" })), [-32602, undefined]);
    rw.notify("nope"); // no answer; the next call still gets its own
    assert.equal((await rw.turns()).length, 1);
  });

  test("overlapping calls are matched by id", async () => {
    const [turns, has, totals, changed] = await Promise.all([
      rw.turns("ts"),
      rw.hasChanges(before0),
      rw.changes("ts"),
      rw.patch(before0),
    ]);
    assert.equal(turns.length, 1);
    assert.equal(has, true);
    assert.equal(totals.session, "ts");
    assert.deepEqual(changed.files, ["a.txt", "new.txt"]);
  });

  test("revert and restore", async () => {
    const reverted = await rw.revert(before0, ["a.txt"]);
    assertShape(reverted, restoreOutcome, "revert");
    assert.deepEqual([reverted.written, reverted.deleted, reverted.failed], [["a.txt"], [], []]);
    assert.equal(fs.readFileSync(file("a.txt"), "utf8"), "one\ntwo\n");
    const restored = await rw.restore(before0);
    assertShape(restored, restoreOutcome, "restore");
    for (const row of restored.failed) assertShape(row, failure, "restore failed");
    assert.deepEqual([restored.hash, restored.deleted, restored.failed], [before0, ["new.txt"], []]);
    assert.ok(!fs.existsSync(file("new.txt")));
    // Its undo id puts back what the restore took.
    await rw.restore(restored.undo);
    assert.equal(fs.readFileSync(file("new.txt"), "utf8"), "new\n");
  });

  // With the store's lock held by another process (flock(1), as another rewind would hold it):
  // a request with a timeout answers `busy`, `turns` is answered while a write waits, an aborted
  // write answers `cancelled` and leaves no turn.
  test("lock: busy after timeoutMs, reads beside a waiting write, cancel by AbortSignal", async () => {
    const store = fs.readdirSync(box.dataDir).find((name) => name.endsWith(".git"));
    assert.ok(store !== undefined, "a store in the data dir");
    const lock = path.join(box.dataDir, store, "rewind.lock");
    const holder = spawn("flock", [lock, "sh", "-c", "echo locked && exec sleep 600"], { detached: true });
    try {
      const line = await new Promise<string>((resolve) => {
        holder.stdout.once("data", (chunk: Buffer) => resolve(chunk.toString()));
        holder.once("error", (err) => resolve(String(err)));
      });
      assert.equal(line.trim(), "locked", "flock(1) holds the lock");
      assert.deepEqual(await errorOf(rw.turnBegin("ts", "2", { timeoutMs: 100 })), [-32000, "busy"]);
      const abort = new AbortController();
      const waiting = errorOf(rw.turnBegin("ts", "2", { signal: abort.signal }));
      assert.equal((await rw.turns("ts")).length, 1); // answered while the write waits
      abort.abort();
      assert.deepEqual(await waiting, [-32800, "cancelled"]);
    } finally {
      if (holder.pid !== undefined) process.kill(-holder.pid, "SIGKILL");
    }
    assert.equal((await rw.turns("ts")).length, 1, "no trace of the cancelled turn");
  });

  test("prune", async () => {
    const result = await rw.prune();
    assertShape(result, pruneOutcome, "prune");
    assert.deepEqual(result.sessions_removed, []); // nothing has expired
  });

  test("status: the watcher runs (Linux) and has watched the project", async () => {
    const { watcher } = await rw.status();
    assertShape(watcher, watchStatus, "status.watcher");
    assert.equal(watcher.active, true, JSON.stringify(watcher));
    assert.ok(watcher.directories >= 1 && watcher.full_walks >= 1, JSON.stringify(watcher));
  });

  test("close: the server exits 0, later calls reject with RewindClosedError", async () => {
    assert.equal(await rw.close(), 0, rw.stderr);
    await assert.rejects(rw.turns(), RewindClosedError);
  });
});

describe("a server that cannot start", () => {
  test("a binary that does not exist", async () => {
    const box = sandbox();
    const rw = new RewindClient(box.project, { rewind: path.join(box.root, "no-such-rewind"), env: box.env });
    await assert.rejects(rw.hello(), (e) => e instanceof RewindClosedError && /ENOENT/.test(e.message));
    assert.equal(await rw.close(), null);
    fs.rmSync(box.root, { recursive: true, force: true });
  });

  test("a project that does not exist: exit 1, its one line in the error", async () => {
    const box = sandbox();
    const rw = new RewindClient(path.join(box.root, "missing"), { rewind: rewindBinary(), dataDir: box.dataDir, env: box.env });
    await assert.rejects(rw.hello(), (e) => e instanceof RewindClosedError && /exited with 1: rewind: /.test(e.message));
    assert.equal(await rw.close(), 1);
    fs.rmSync(box.root, { recursive: true, force: true });
  });
});
