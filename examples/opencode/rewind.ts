// rewind for OpenCode: every user message is a turn the user can undo (`rewind undo
// --last-session`), edits made through OpenCode's shell included.
//
// Copy this file into `.opencode/plugin/` (one project) or `~/.config/opencode/plugin/`
// (every project); `rewind` must be on PATH. It keeps one `rewind serve` per project and
// talks JSON-RPC to it (docs/integration.md, "`rewind serve`: the protocol"):
//   chat.message         -> ends the session's open turn, begins the next (1, 2, ...)
//   tool.execute.before  -> track_file for the file an edit or write tool names
//   event session.idle   -> ends the open turn
// A failure of rewind is logged and never stops OpenCode.
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import type { Plugin } from "@opencode-ai/plugin";

const MAX_META = 8 << 10; // the turn metadata limit, in bytes

export const Rewind: Plugin = async ({ directory }) => {
  const server = spawn("rewind", ["-C", directory, "serve"], {
    stdio: ["pipe", "pipe", "pipe"],
  });
  const pending = new Map<number, { resolve: (v: any) => void; reject: (e: Error) => void }>();
  let nextId = 1;
  // Why calls fail at once: the server could not start, or has exited.
  let gone: Error | undefined;
  const fail = (err: Error) => {
    gone ??= err;
    for (const waiting of pending.values()) waiting.reject(gone);
    pending.clear();
  };
  // The server keeps OpenCode alive only while an answer is awaited: a host that is done can
  // exit, which closes the server's stdin, and the server exits. (A runtime whose streams
  // lack ref/unref keeps its own rule.)
  const refs = (handle: object) => handle as { ref?: () => void; unref?: () => void };
  const stdout = refs(server.stdout!);
  for (const handle of [server, server.stdin!, server.stdout!, server.stderr!]) refs(handle).unref?.();
  createInterface({ input: server.stdout! }).on("line", (line) => {
    const reply = JSON.parse(line);
    const call = pending.get(reply.id);
    pending.delete(reply.id);
    if (pending.size === 0) stdout.unref?.();
    if (reply.error) call?.reject(new Error(`${reply.error.message} (${reply.error.data?.code})`));
    else call?.resolve(reply.result);
  });
  server.stderr!.on("data", (chunk) => console.error(`rewind: ${chunk}`));
  server.stdin!.on("error", fail); // the server exited with requests unwritten
  server.on("error", (err) => {
    console.error(`rewind: cannot start rewind serve: ${err.message}`);
    fail(new Error(`rewind serve did not start: ${err.message}`));
  });
  server.on("close", (code, signal) => fail(new Error(`rewind serve exited (${signal ?? code})`)));

  const call = (method: string, params: object): Promise<any> =>
    new Promise((resolve, reject) => {
      if (gone) return reject(gone);
      const id = nextId++;
      if (pending.size === 0) stdout.ref?.();
      pending.set(id, { resolve, reject });
      server.stdin!.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n");
    });

  // Per session: the highest turn number, and whether that turn is open.
  const sessions = new Map<string, { turn: number; open: boolean }>();
  const state = async (session: string) => {
    let known = sessions.get(session);
    if (!known) {
      const turns: any[] = await call("turns", { session }).catch(() => []);
      const numbers = turns.map((t) => Number(t.turn)).filter(Number.isInteger);
      const last = turns[turns.length - 1];
      known = { turn: Math.max(0, ...numbers), open: !!last && last.ended_at === null };
      sessions.set(session, known);
    }
    return known;
  };
  const end = async (session: string) => {
    const known = await state(session);
    if (!known.open) return;
    known.open = false;
    await call("turn_end", { session, turn: String(known.turn) });
  };
  const begin = async (session: string, meta: Record<string, string>) => {
    await end(session);
    const known = await state(session);
    known.turn += 1;
    known.open = true;
    await call("turn_begin", { session, turn: String(known.turn), meta });
  };
  const quietly = (what: string, work: Promise<unknown>) =>
    work.catch((err) => console.error(`rewind: ${what}: ${err.message}`));

  return {
    "chat.message": async (input, output) => {
      // What the user typed: not the text OpenCode adds (`synthetic`, e.g. an attached file).
      const text = output.parts
        .flatMap((part) => (part.type === "text" && !part.synthetic ? [part.text] : []))
        .join("\n");
      const meta: Record<string, string> = { agent: "opencode" };
      if (input.messageID) meta.message_id = input.messageID;
      // Cut to the metadata limit, a whole character (code point) at a time.
      const encoder = new TextEncoder();
      const chars = Array.from(text);
      let bytes = encoder.encode(text).length;
      while (bytes > MAX_META) bytes -= encoder.encode(chars.pop()!).length;
      meta.prompt = chars.join("");
      await quietly("turn begin", begin(input.sessionID, meta));
    },
    "tool.execute.before": async (input, output) => {
      const path = output.args?.filePath;
      if (!["edit", "write", "patch"].includes(input.tool) || typeof path !== "string") return;
      const known = await state(input.sessionID);
      if (!known.open) await quietly("turn begin", begin(input.sessionID, { agent: "opencode" }));
      await quietly(
        "track_file",
        call("track_file", { session: input.sessionID, turn: String(known.turn), path }),
      );
    },
    event: async ({ event }) => {
      if (event.type !== "session.idle") return;
      await quietly("turn end", end(event.properties.sessionID));
    },
  };
};
