// The OpenCode plugin driven as OpenCode drives it, against the real binary:
// `REWIND_BIN=path/to/rewind npm test` (after `npm run build`). The plugin runs `rewind` from
// PATH, so the binary's directory goes first on it; each project has its own data directory.

import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { pathToFileURL } from "node:url";

import type { Hooks, Part, UserMessage } from "@opencode-ai/plugin";
import { Rewind } from "./rewind.js";

// The binary under test: REWIND_BIN, which must name an existing `rewind` (no skipping).
function rewindBinary(): string {
  const bin = process.env["REWIND_BIN"];
  if (bin === undefined || bin === "") {
    throw new Error("REWIND_BIN is not set: point it at the rewind binary (e.g. ../../target/debug/rewind)");
  }
  const full = path.resolve(bin);
  if (!fs.existsSync(full)) throw new Error(`REWIND_BIN=${bin}: no such file ${full} (cargo build first)`);
  if (path.basename(full) !== "rewind") throw new Error(`REWIND_BIN=${bin}: the plugin runs \`rewind\`, not ${full}`);
  return full;
}

const bin = rewindBinary();
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "rewind-opencode-"));
after(() => fs.rmSync(scratch, { recursive: true, force: true }));
process.env["PATH"] = `${path.dirname(bin)}${path.delimiter}${process.env["PATH"] ?? ""}`;
process.env["REWIND_DATA_DIR"] = path.join(scratch, "data");

// A new project holding `files`, and the plugin loaded for it as OpenCode loads it.
async function project(name: string, files: Record<string, string>): Promise<{ dir: string; hooks: Hooks }> {
  const dir = path.join(scratch, name);
  for (const [file, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    fs.writeFileSync(path.join(dir, file), text);
  }
  return { dir, hooks: await Rewind({ directory: dir, worktree: dir }) };
}

// The CLI's JSON answer in project `dir`.
function cli(dir: string, ...args: string[]): any {
  return JSON.parse(execFileSync(bin, ["--json", "-C", dir, ...args], { encoding: "utf8" }));
}

const model = { providerID: "anthropic", modelID: "claude-sonnet-4" };

// One turn as OpenCode makes it: the user's message (its text, an attached file and the text
// OpenCode adds for it), a tool call that edits `file` (announced
// before it runs, then written as the tool writes it), the session going idle.
async function turn(
  hooks: Hooks, dir: string, sessionID: string, messageID: string, prompt: string, tool: string, file: string, text: string,
): Promise<void> {
  const message: UserMessage = { id: messageID, sessionID, role: "user", time: { created: Date.now() }, agent: "build", model };
  const parts: Part[] = [
    { id: `${messageID}-1`, sessionID, messageID, type: "text", text: prompt },
    { id: `${messageID}-2`, sessionID, messageID, type: "file" },
    { id: `${messageID}-3`, sessionID, messageID, type: "text", text: "Called the Read tool", synthetic: true },
  ];
  await hooks["chat.message"]!({ sessionID, agent: "build", model, messageID }, { message, parts });
  const filePath = path.join(dir, file);
  await hooks["tool.execute.before"]!({ tool, sessionID, callID: `${messageID}-call` }, { args: { filePath, content: text } });
  fs.mkdirSync(path.dirname(filePath), { recursive: true });
  fs.writeFileSync(filePath, text);
  await hooks.event!({ event: { type: "session.idle", properties: { sessionID } } });
}

// What the plugin writes with console.error while `work` runs.
async function logged(work: () => Promise<void>): Promise<string[]> {
  const lines: string[] = [];
  const original = console.error;
  console.error = (...args: unknown[]) => lines.push(args.join(" "));
  try {
    await work();
  } finally {
    console.error = original;
  }
  return lines;
}

test("two OpenCode turns end with their files, message id and the prompt as typed (it had a newline per non-text part), and undo gives the files back", async () => {
  const { dir, hooks } = await project("two-turns", { "src/app.ts": "one\n" });
  const session = "ses_two_turns";
  await turn(hooks, dir, session, "msg_1", "make it two", "edit", "src/app.ts", "two\n");
  await turn(hooks, dir, session, "msg_2", "add notes, and three", "write", "notes.md", "three\n");

  const turns = cli(dir, "turns", "--session", session);
  assert.deepEqual(
    turns.map((t: any) => ({ turn: t.turn, ended: t.ended_at !== null, changed: t.changed, meta: t.meta })),
    [
      {
        turn: "1", ended: true,
        changed: [{ file: "src/app.ts", status: "modified", additions: 1, deletions: 1, binary: false, origin: "announced" }],
        meta: { agent: "opencode", message_id: "msg_1", prompt: "make it two" },
      },
      {
        turn: "2", ended: true,
        changed: [{ file: "notes.md", status: "added", additions: 1, deletions: 0, binary: false, origin: "announced" }],
        meta: { agent: "opencode", message_id: "msg_2", prompt: "add notes, and three" },
      },
    ],
  );

  cli(dir, "undo", "--last-session");
  assert.equal(fs.existsSync(path.join(dir, "notes.md")), false);
  assert.equal(fs.readFileSync(path.join(dir, "src/app.ts"), "utf8"), "two\n");
  cli(dir, "undo", "--last-session");
  assert.equal(fs.readFileSync(path.join(dir, "src/app.ts"), "utf8"), "one\n");
});

test("a session id rewind refuses is logged, and no hook throws", { timeout: 60_000 }, async () => {
  const { dir, hooks } = await project("refused", { "a.txt": "a\n" });
  const lines = await logged(() => turn(hooks, dir, "", "msg_1", "hello", "edit", "a.txt", "b\n"));
  assert.ok(lines.some((line) => line.startsWith("rewind: turn begin:") && line.includes("session")), lines.join("\n"));
  assert.deepEqual(cli(dir, "turns"), []);
});

test("rewind missing from PATH is logged, and no hook throws or hangs (calls waited for a server that never started)", { timeout: 60_000 }, async () => {
  const saved = process.env["PATH"];
  process.env["PATH"] = path.join(scratch, "no-such-dir");
  let loaded: { dir: string; hooks: Hooks };
  try {
    loaded = await project("missing", { "a.txt": "a\n" });
  } finally {
    process.env["PATH"] = saved;
  }
  const { dir, hooks } = loaded;
  const lines = await logged(() => turn(hooks, dir, "ses_missing", "msg_1", "hello", "edit", "a.txt", "b\n"));
  assert.ok(lines.some((line) => line.includes("cannot start rewind serve")), lines.join("\n"));
  assert.ok(lines.some((line) => line.startsWith("rewind: turn begin:")), lines.join("\n"));
});

// OpenCode (or this test) exits when its work is done: the plugin's server must not keep it
// alive, and ends when its stdin closes with the process.
test("a host that is done exits, and its rewind serve with it (the server kept the host alive)", { timeout: 60_000 }, async () => {
  const dir = path.join(scratch, "host");
  fs.mkdirSync(dir);
  const plugin = pathToFileURL(path.join(import.meta.dirname, "rewind.js")).href;
  const host = spawn(process.execPath, ["--input-type=module", "-e", `
    const { Rewind } = await import(${JSON.stringify(plugin)});
    const hooks = await Rewind({ directory: ${JSON.stringify(dir)}, worktree: ${JSON.stringify(dir)} });
    await hooks["chat.message"]({ sessionID: "ses_host", messageID: "msg_1" }, { parts: [] });
  `], { stdio: ["ignore", "inherit", "inherit"] });
  const code = await new Promise((resolve) => host.on("exit", resolve));
  assert.equal(code, 0);
  assert.equal(cli(dir, "turns").length, 1);
  // The server reads EOF once the host is gone; wait for it to go too (Linux: /proc).
  const serving = () => fs.readdirSync("/proc").filter((pid) => {
    try {
      return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").includes(dir);
    } catch {
      return false; // gone meanwhile, or not a process
    }
  });
  while (serving().length > 0) await new Promise((resolve) => setTimeout(resolve, 50));
});
