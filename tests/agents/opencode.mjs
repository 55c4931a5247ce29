// Drives opencode (unmodified `opencode run`) against $AGENT_BASE_URL through
// a custom @ai-sdk/openai-compatible provider, with its own built-in tools,
// in $AGENT_DIR. Each prompt of AGENT_PROMPTS (a JSON list) is one
// `opencode run` (the later ones with --continue). opencode always streams.
// AGENT_MAX_STEPS sets the build agent's `steps`; AGENT_IMAGES=1 lets the
// model take images. Offline: every fetch,
// update, plugin and share is off; state lives in a fresh temp home.
// Prints one JSON summary on stdout.
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";

import { headlessAgent } from "./headless.mjs";

const { bin, dir, model, prompts, home } = headlessAgent("opencode", {
  model: "test-model",
  prompts: ["Read a.txt and b.txt."],
});
const steps = process.env.AGENT_MAX_STEPS ? Number(process.env.AGENT_MAX_STEPS) : undefined;

const config = {
  $schema: "https://opencode.ai/config.json",
  autoupdate: false,
  share: "disabled",
  snapshot: false,
  lsp: false,
  formatter: false,
  model: `cm/${model}`,
  small_model: `cm/${model}`,
  provider: {
    cm: {
      npm: "@ai-sdk/openai-compatible",
      name: "codemode",
      options: { baseURL: process.env.AGENT_BASE_URL, apiKey: "test-key", includeUsage: true },
      models: {
        [model]: {
          name: model,
          tool_call: true,
          limit: { context: 128000, output: 4096 },
          // AGENT_IMAGES=1: the model takes images, so opencode's read tool
          // returns them as attachments (sent after the tool results, in a
          // user message "Attached media from tool result:").
          ...(process.env.AGENT_IMAGES === "1"
            ? { attachment: true, modalities: { input: ["text", "image"], output: ["text"] } }
            : {}),
        },
      },
    },
  },
  permission: { edit: "allow", bash: "allow", webfetch: "deny", external_directory: "allow" },
  agent: { build: steps ? { steps } : {} },
};

const env = {
  ...process.env,
  HOME: home,
  XDG_DATA_HOME: path.join(home, "data"),
  XDG_CONFIG_HOME: path.join(home, "config"),
  XDG_STATE_HOME: path.join(home, "state"),
  XDG_CACHE_HOME: path.join(home, "cache"),
  OPENCODE_CONFIG_CONTENT: JSON.stringify(config),
  OPENCODE_DISABLE_AUTOUPDATE: "1",
  OPENCODE_DISABLE_MODELS_FETCH: "1",
  OPENCODE_DISABLE_DEFAULT_PLUGINS: "1",
  OPENCODE_DISABLE_LSP_DOWNLOAD: "1",
  OPENCODE_DISABLE_SHARE: "1",
  OPENCODE_DISABLE_CLAUDE_CODE: "1",
  OPENCODE_DISABLE_EXTERNAL_SKILLS: "1",
  OPENCODE_DISABLE_AUTOCOMPACT: "1",
  OPENCODE_DISABLE_TERMINAL_TITLE: "1",
  OPENCODE_EXPERIMENTAL_DISABLE_FILEWATCHER: "1",
};

function run(args) {
  return new Promise((resolve) => {
    const child = spawn(bin, args, { cwd: dir, env, stdio: ["ignore", "pipe", "pipe"] });
    let out = "", err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), Number(process.env.AGENT_TIMEOUT_MS || 90000));
    child.on("close", (code) => { clearTimeout(timer); resolve({ code, out, err }); });
  });
}

const turns = [];
let error = null;
let requests = 0;
for (const [i, prompt] of prompts.entries()) {
  const args = ["run", "--format", "json", "--model", `cm/${model}`];
  if (i > 0) args.push("--continue");
  args.push(prompt);
  const { code, out, err } = await run(args);
  let text = "", steps = 0, turnError = null;
  for (const line of out.split("\n")) {
    if (!line.trim()) continue;
    let ev;
    try { ev = JSON.parse(line); } catch { continue; }
    if (ev.type === "step_start") steps += 1;
    if (ev.type === "text" && ev.part?.text) text = ev.part.text;
    if (ev.type === "error") turnError = JSON.stringify(ev.error ?? ev);
  }
  requests += steps;
  if (code !== 0 && !turnError) turnError = `exit ${code}: ${err.slice(-2000)}`;
  turns.push({ text, steps, exit: code, error: turnError });
  if (turnError) { error = turnError; break; }
}
if (!process.env.AGENT_KEEP_HOME) fs.rmSync(home, { recursive: true, force: true });
process.stdout.write(JSON.stringify({ agent: "opencode", final: turns.at(-1)?.text ?? "", requests, error, turns }) + "\n");
