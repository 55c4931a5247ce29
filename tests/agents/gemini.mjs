// Drives Google's Gemini CLI (unmodified `gemini -p`) against
// $AGENT_BASE_URL (the server root, no /v1beta: gemini-cli appends
// /v1beta/models/MODEL:streamGenerateContent) with its own built-in tools,
// in $AGENT_DIR, as $AGENT_MODEL (gemini-2.5-pro unless set; `auto` adds
// the router's side request before each prompt).
// Each prompt of AGENT_PROMPTS (a JSON list) is one `gemini -p`; the later
// ones continue the same session with `--resume latest`.
// gemini-cli always streams its main loop. Tools run without prompts
// (`--yolo`) and the workspace is trusted for the run (`--skip-trust`; a
// headless run in an untrusted folder exits 55).
// Isolated and offline: a fresh GEMINI_CLI_HOME (and HOME) whose
// .gemini/settings.json selects the Gemini API key auth (with
// GOOGLE_GEMINI_BASE_URL set and no auth type gemini-cli picks a "gateway"
// auth and exits 41; see src/bin/codemode-proxy/cli/agents.rs), a dummy
// GEMINI_API_KEY (sent as x-goog-api-key), usage statistics, telemetry and
// update checks off.
// Prints one JSON summary on stdout: {agent, final, error, tools, turns}
// where `tools` lists each tool call gemini-cli ran: {name, input, result,
// is_error}.
import fs from "node:fs";
import path from "node:path";

import { headlessAgent } from "./headless.mjs";
import { runStreamJson } from "./stream_json.mjs";

const { bin, dir, model, prompts, home } = headlessAgent("gemini", {
  model: "gemini-2.5-pro",
  prompts: ["Read a.txt."],
});

fs.mkdirSync(path.join(home, ".gemini"));
fs.writeFileSync(path.join(home, ".gemini/settings.json"), JSON.stringify({
  security: { auth: { selectedType: "gemini-api-key" } },
  general: { enableAutoUpdate: false, enableAutoUpdateNotification: false },
  privacy: { usageStatisticsEnabled: false },
  telemetry: { enabled: false },
}));
const env = {
  ...process.env,
  HOME: home,
  GEMINI_CLI_HOME: home,
  GOOGLE_GEMINI_BASE_URL: process.env.AGENT_BASE_URL,
  GEMINI_API_KEY: "test-gemini-key",
};
// Credentials, endpoints or settings of the caller's own Google setup must
// not leak in.
for (const k of ["GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_GCA",
  "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "GOOGLE_APPLICATION_CREDENTIALS",
  "GOOGLE_VERTEX_BASE_URL", "GEMINI_MODEL", "GEMINI_CLI_SYSTEM_SETTINGS_PATH",
  "GEMINI_CLI_SYSTEM_DEFAULTS_PATH"]) {
  delete env[k];
}

const common = ["--output-format", "stream-json", "--yolo", "--skip-trust", "-m", model];

const turns = [];
const tools = [];
let error = null;
for (const [i, prompt] of prompts.entries()) {
  const args = ["-p", prompt, ...common];
  if (i > 0) args.push("--resume", "latest");
  let text = "", session = null, turnError = null;
  const pending = new Map();
  const { code, err } = await runStreamJson(bin, args, { cwd: dir, env }, (ev) => {
    if (ev.type === "init") session = ev.session_id;
    // The answer streams as assistant message deltas.
    if (ev.type === "message" && ev.role === "assistant" && typeof ev.content === "string") text += ev.content;
    if (ev.type === "tool_use") {
      const call = { name: ev.tool_name, input: ev.parameters, result: null, is_error: false };
      pending.set(ev.tool_id, call);
      tools.push(call);
      text = ""; // the final answer is the text after the last call
    }
    if (ev.type === "tool_result") {
      const call = pending.get(ev.tool_id);
      if (call) {
        call.result = ev.output ?? ev.error?.message ?? null;
        call.is_error = ev.status === "error";
      }
    }
    if (ev.type === "error") turnError ??= ev.message ?? JSON.stringify(ev);
    if (ev.type === "result" && ev.status && ev.status !== "success") {
      turnError ??= `${ev.status}: ${JSON.stringify(ev.error ?? ev)}`;
    }
  });
  if (code !== 0 && !turnError) turnError = `exit ${code}: ${err.slice(-2000)}`;
  turns.push({ text, session, exit: code, error: turnError });
  if (turnError) { error = turnError; break; }
}
if (!process.env.AGENT_KEEP_HOME) fs.rmSync(home, { recursive: true, force: true });
process.stdout.write(JSON.stringify({ agent: "gemini", final: turns.at(-1)?.text ?? "", error, tools, turns }) + "\n");
