// Drives the Vercel AI SDK (unmodified) against $AGENT_BASE_URL with three
// filesystem tools over $AGENT_DIR. Prints one JSON summary on stdout.
//
// Env: AGENT_BASE_URL, AGENT_MODEL (test-model), AGENT_PROMPTS (JSON list of
// user messages, each continuing the conversation), AGENT_MAX_STEPS (per
// prompt: stopWhen stepCountIs(n)), AGENT_STREAM=1 (streamText),
// AGENT_PROVIDER=compatible|openai, CODEMODE_AGENTS_DIR (install dir).
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import fs from "node:fs";
import path from "node:path";
import os from "node:os";

const agentsDir = process.env.CODEMODE_AGENTS_DIR || path.join(os.homedir(), ".cache/codemode-agents");
const require = createRequire(path.join(agentsDir, "node/package.json"));
const load = (name) => import(pathToFileURL(require.resolve(name)).href);

const { generateText, streamText, tool, jsonSchema, stepCountIs } = await load("ai");

const base = process.env.AGENT_BASE_URL;
const model = process.env.AGENT_MODEL || "test-model";
const dir = process.env.AGENT_DIR || process.cwd();
const prompts = JSON.parse(process.env.AGENT_PROMPTS || '["Read a.txt and b.txt."]');
const maxSteps = Number(process.env.AGENT_MAX_STEPS || 20);
const stream = process.env.AGENT_STREAM === "1";

let requests = 0;
const countingFetch = (url, init) => {
  requests += 1;
  return fetch(url, init);
};

let llm;
if (process.env.AGENT_PROVIDER === "openai") {
  const { createOpenAI } = await load("@ai-sdk/openai");
  llm = createOpenAI({ baseURL: base, apiKey: "test-key", fetch: countingFetch }).chat(model);
} else {
  const { createOpenAICompatible } = await load("@ai-sdk/openai-compatible");
  llm = createOpenAICompatible({ name: "cm", baseURL: base, apiKey: "test-key", includeUsage: true, fetch: countingFetch })(model);
}

const inside = (p) => path.join(dir, path.basename(String(p ?? "")));
const tools = {
  read: tool({
    description: "Read a file and return its content.",
    inputSchema: jsonSchema({ type: "object", properties: { path: { type: "string" } }, required: ["path"] }),
    execute: async ({ path: p }) => {
      try { return fs.readFileSync(inside(p), "utf8"); } catch { return "ENOENT"; }
    },
  }),
  write: tool({
    description: "Write a file.",
    inputSchema: jsonSchema({ type: "object", properties: { path: { type: "string" }, content: { type: "string" } }, required: ["path", "content"] }),
    execute: async ({ path: p, content }) => { fs.writeFileSync(inside(p), content); return "ok"; },
  }),
  list: tool({
    description: "List the files.",
    inputSchema: jsonSchema({ type: "object", properties: {} }),
    execute: async () => fs.readdirSync(dir).sort().join("\n"),
  }),
};

const messages = [];
const turns = [];
let error = null;
let toolCalls = 0;
for (const prompt of prompts) {
  messages.push({ role: "user", content: prompt });
  const opts = { model: llm, system: "You are a file agent.", messages, tools, stopWhen: stepCountIs(maxSteps), maxRetries: 0 };
  try {
    let text, response, steps;
    if (stream) {
      let streamError = null;
      const r = streamText({ ...opts, onError: ({ error: e }) => { streamError = e; } });
      await r.consumeStream();
      if (streamError) throw streamError;
      [text, response, steps] = await Promise.all([r.text, r.response, r.steps]);
    } else {
      ({ text, response, steps } = await generateText(opts));
    }
    messages.push(...response.messages);
    toolCalls += steps.reduce((n, s) => n + s.toolCalls.length, 0);
    turns.push({ text, steps: steps.length, finish: steps.at(-1)?.finishReason });
  } catch (e) {
    error = String(e?.responseBody || e?.message || e);
    turns.push({ error });
    break;
  }
}
const final = turns.at(-1)?.text ?? "";
process.stdout.write(JSON.stringify({ agent: "ai-sdk", final, requests, tool_calls: toolCalls, error, turns }) + "\n");
