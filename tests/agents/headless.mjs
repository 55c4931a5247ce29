// What a driver of a headless agent CLI (claude, codex, gemini, opencode)
// starts from: the agent's binary where install.sh put it, the work
// directory ($AGENT_DIR), the model ($AGENT_MODEL) and prompts
// ($AGENT_PROMPTS, a JSON list) or the driver's defaults, and a fresh
// temp home for the agent's state.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

export const agentsDir = process.env.CODEMODE_AGENTS_DIR || path.join(os.homedir(), ".cache/codemode-agents");

export function headlessAgent(name, defaults) {
  return {
    bin: path.join(agentsDir, "node/node_modules/.bin", name),
    dir: process.env.AGENT_DIR || process.cwd(),
    model: process.env.AGENT_MODEL || defaults.model,
    prompts: JSON.parse(process.env.AGENT_PROMPTS || JSON.stringify(defaults.prompts)),
    home: fs.mkdtempSync(path.join(os.tmpdir(), `cm-${name}-`)),
  };
}
