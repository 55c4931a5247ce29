// Drives the OpenAI Codex CLI (unmodified `codex exec`) against
// $AGENT_BASE_URL through a custom Responses provider (`wire_api =
// "responses"`), with its own built-in tools, in $AGENT_DIR, as $AGENT_MODEL.
// Each prompt of AGENT_PROMPTS (a JSON list) is one `codex exec`; the later
// ones continue the same session with `codex exec resume --last` (Codex
// re-sends the whole history, same thread id and prompt_cache_key).
// Codex always streams. Commands run without sandbox or approval prompts.
// Offline: update checks, analytics, plugins and apps are off (with them off
// Codex resolves no host at all); state lives in a fresh CODEX_HOME.
// Stream retries are off, so a broken stream fails the run instead of
// being retried silently.
// Prints one JSON summary on stdout: {agent, final, error, commands, warnings, turns}.
import fs from "node:fs";

import { headlessAgent } from "./headless.mjs";
import { runStreamJson } from "./stream_json.mjs";

const { bin, dir, model, prompts, home } = headlessAgent("codex", {
  model: "gpt-5.5",
  prompts: ["Read a.txt and b.txt."],
});

const env = { ...process.env, CODEX_HOME: home, CODEMODE_AGENT_KEY: "test-key" };
// Codex would use these for its built-in `openai` provider; ours names its key.
delete env.OPENAI_API_KEY;
delete env.OPENAI_BASE_URL;
delete env.CODEX_API_KEY;

// `-c` values are TOML; JSON strings are valid TOML basic strings.
const provider = {
  name: "codemode",
  base_url: process.env.AGENT_BASE_URL,
  env_key: "CODEMODE_AGENT_KEY",
  wire_api: "responses",
  stream_max_retries: 0,
  request_max_retries: 0,
};
const common = [
  "--json",
  "--skip-git-repo-check",
  "--dangerously-bypass-approvals-and-sandbox",
  "--ignore-rules",
  "-m", model,
  "-c", "model_provider=cm",
  ...Object.entries(provider).flatMap(([k, v]) => ["-c", `model_providers.cm.${k}=${JSON.stringify(v)}`]),
  "-c", "check_for_update_on_startup=false",
  "-c", "analytics.enabled=false",
  "--disable", "plugins",
  "--disable", "remote_plugin",
  "--disable", "apps",
];

const turns = [];
const commands = [];
const warnings = [];
let error = null;
for (const [i, prompt] of prompts.entries()) {
  // exec's own options go before `resume`, which takes the session and prompt.
  const args = ["exec", ...common, "-C", dir];
  if (i > 0) args.push("resume", "--last");
  args.push(prompt);
  let text = "", thread = null, turnError = null;
  const { code, err } = await runStreamJson(bin, args, { cwd: dir, env }, (ev) => {
    if (ev.type === "thread.started") thread = ev.thread_id;
    if (ev.type === "turn.failed") turnError ??= ev.error?.message ?? JSON.stringify(ev);
    // A top-level `error` event is a stream error. Retries are off, yet Codex
    // waits for the network forever when it cannot connect ("Reconnecting...
    // waiting for network"): the turn has failed, stop it.
    if (ev.type === "error") {
      turnError ??= ev.message ?? JSON.stringify(ev);
      if (String(ev.message).startsWith("Reconnecting")) return "stop";
    }
    if (ev.type !== "item.completed" || !ev.item) return;
    const item = ev.item;
    if (item.type === "agent_message") text = item.text ?? "";
    // An `error` item is a warning (e.g. no metadata for the model's name).
    if (item.type === "error") warnings.push(item.message);
    if (item.type === "command_execution") {
      commands.push({ command: item.command, exit_code: item.exit_code, output: item.aggregated_output });
    }
  });
  if (code !== 0 && !turnError) turnError = `exit ${code}: ${err.slice(-2000)}`;
  turns.push({ text, thread, exit: code, error: turnError });
  if (turnError) { error = turnError; break; }
}
if (!process.env.AGENT_KEEP_HOME) fs.rmSync(home, { recursive: true, force: true });
process.stdout.write(JSON.stringify({ agent: "codex", final: turns.at(-1)?.text ?? "", error, commands, warnings, turns }) + "\n");
