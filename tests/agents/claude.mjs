// Drives Claude Code (unmodified `claude -p`) against $AGENT_BASE_URL (the
// server root, no /v1: Claude Code appends /v1/messages?beta=true) with its
// own built-in tools, in $AGENT_DIR, as $AGENT_MODEL.
// Each prompt of AGENT_PROMPTS (a JSON list) is one `claude -p`; the later
// ones continue the same session with `--continue`.
// Claude Code always streams. Tools run without permission prompts
// (`--dangerously-skip-permissions`; as root Claude Code refuses that unless
// IS_SANDBOX=1, its documented switch for containers, which we set).
// Isolated and offline: a fresh HOME and CLAUDE_CONFIG_DIR, a dummy
// ANTHROPIC_API_KEY (sent as x-api-key), telemetry, error reporting,
// auto-updates and other nonessential traffic off.
// Extra environment for Claude Code (e.g. ENABLE_TOOL_SEARCH=false) passes
// through from the caller's environment.
// Prints one JSON summary on stdout: {agent, final, error, tools, turns}
// where `tools` lists each tool call Claude Code ran: {name, input, result,
// is_error}.
import fs from "node:fs";
import path from "node:path";

import { headlessAgent } from "./headless.mjs";
import { runStreamJson } from "./stream_json.mjs";

const { bin, dir, model, prompts, home } = headlessAgent("claude", {
  model: "claude-sonnet-4-5",
  prompts: ["Read a.txt."],
});

const env = {
  ...process.env,
  HOME: home,
  CLAUDE_CONFIG_DIR: path.join(home, ".claude"),
  XDG_CONFIG_HOME: path.join(home, ".config"),
  ANTHROPIC_BASE_URL: process.env.AGENT_BASE_URL,
  ANTHROPIC_API_KEY: "sk-ant-test-key",
  IS_SANDBOX: "1",
  DISABLE_TELEMETRY: "1",
  DISABLE_ERROR_REPORTING: "1",
  DISABLE_AUTOUPDATER: "1",
  DISABLE_BUG_COMMAND: "1",
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
  CLAUDE_CODE_DISABLE_TERMINAL_TITLE: "1",
  // One attempt: a broken answer fails the run instead of being retried.
  CLAUDE_CODE_MAX_RETRIES: "0",
};
// Credentials or endpoints of the caller's own Claude setup must not leak in.
for (const k of ["ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK",
  "CLAUDE_CODE_USE_VERTEX", "ANTHROPIC_MODEL", "ANTHROPIC_SMALL_FAST_MODEL", "CLAUDECODE"]) {
  delete env[k];
}

const common = [
  "--output-format", "stream-json",
  "--verbose",
  "--dangerously-skip-permissions",
  "--model", model,
];

const turns = [];
const tools = [];
let error = null;
for (const [i, prompt] of prompts.entries()) {
  const args = ["-p", prompt, ...common];
  if (i > 0) args.push("--continue");
  let text = "", session = null, turnError = null;
  const pending = new Map();
  const { code, err } = await runStreamJson(bin, args, { cwd: dir, env }, (ev) => {
    if (ev.type === "system" && ev.subtype === "init") session = ev.session_id;
    if (ev.type === "assistant") {
      for (const b of ev.message?.content ?? []) {
        if (b.type === "tool_use") {
          const call = { name: b.name, input: b.input, result: null, is_error: false };
          pending.set(b.id, call);
          tools.push(call);
        }
      }
    }
    if (ev.type === "user") {
      const content = ev.message?.content;
      for (const b of Array.isArray(content) ? content : []) {
        const call = b.type === "tool_result" && pending.get(b.tool_use_id);
        if (!call) continue;
        call.result = typeof b.content === "string" ? b.content : JSON.stringify(b.content);
        call.is_error = b.is_error === true;
      }
    }
    if (ev.type === "result") {
      text = typeof ev.result === "string" ? ev.result : "";
      if (ev.is_error) turnError ??= `${ev.subtype}: ${ev.result ?? JSON.stringify(ev)}`;
    }
  });
  if (code !== 0 && !turnError) turnError = `exit ${code}: ${err.slice(-2000)}`;
  turns.push({ text, session, exit: code, error: turnError });
  if (turnError) { error = turnError; break; }
}
if (!process.env.AGENT_KEEP_HOME) fs.rmSync(home, { recursive: true, force: true });
process.stdout.write(JSON.stringify({ agent: "claude", final: turns.at(-1)?.text ?? "", error, tools, turns }) + "\n");
