// The part of OpenCode's plugin types that rewind.ts uses, as `@opencode-ai/plugin` 1.18.33
// publishes them (dist/index.d.ts; `Event`, `Part` and `UserMessage` come from
// `@opencode-ai/sdk` 1.18.33, dist/gen/types.gen.d.ts). Members and variants rewind.ts never
// reads are left out or reduced to their tag; add them from those files when it needs them.
declare module "@opencode-ai/plugin" {
  export type TextPart = {
    id: string;
    sessionID: string;
    messageID: string;
    type: "text";
    text: string;
    synthetic?: boolean;
    ignored?: boolean;
  };
  /** The other parts of a message, by their tag only. */
  export type OtherPart = {
    id: string;
    sessionID: string;
    messageID: string;
    type:
      | "subtask" | "reasoning" | "file" | "tool" | "step-start" | "step-finish" | "snapshot"
      | "patch" | "agent" | "retry" | "compaction";
  };
  export type Part = TextPart | OtherPart;

  export type UserMessage = {
    id: string;
    sessionID: string;
    role: "user";
    time: { created: number };
    agent: string;
    model: { providerID: string; modelID: string };
  };

  export type EventSessionIdle = {
    type: "session.idle";
    properties: { sessionID: string };
  };
  /** The other events, by their tag only. */
  export type OtherEvent = {
    type:
      | "server.instance.disposed" | "installation.updated" | "installation.update-available"
      | "lsp.client.diagnostics" | "lsp.updated" | "message.updated" | "message.removed"
      | "message.part.updated" | "message.part.removed" | "permission.updated"
      | "permission.replied" | "session.status" | "session.compacted" | "file.edited"
      | "todo.updated" | "command.executed" | "session.created" | "session.updated"
      | "session.deleted" | "session.diff" | "session.error" | "file.watcher.updated"
      | "vcs.branch.updated" | "tui.prompt.append" | "tui.command.execute" | "tui.toast.show"
      | "pty.created" | "pty.updated" | "pty.exited" | "pty.deleted" | "server.connected";
    properties: unknown;
  };
  export type Event = EventSessionIdle | OtherEvent;

  /** Also `client`, `project`, `serverUrl`, `experimental_workspace` and the Bun shell `$`. */
  export type PluginInput = {
    directory: string;
    worktree: string;
  };
  export type PluginOptions = Record<string, unknown>;

  /** Also `dispose`, `config`, `tool`, `auth`, `chat.params`, `tool.execute.after`, ... */
  export interface Hooks {
    event?: (input: { event: Event }) => Promise<void>;
    /** Called when a new message is received */
    "chat.message"?: (
      input: {
        sessionID: string;
        agent?: string;
        model?: { providerID: string; modelID: string };
        messageID?: string;
        variant?: string;
      },
      output: { message: UserMessage; parts: Part[] },
    ) => Promise<void>;
    "tool.execute.before"?: (
      input: { tool: string; sessionID: string; callID: string },
      output: { args: any },
    ) => Promise<void>;
  }

  export type Plugin = (input: PluginInput, options?: PluginOptions) => Promise<Hooks>;
}
