// Drives Google's JS SDK (`@google/genai`, unmodified) on its Interactions
// API (`ai.interactions.create`, on the SDK's defaults: its default API
// version, so `POST /v1/interactions`) against $AGENT_BASE_URL (the server
// root), with a manual function-calling loop over one tool, `get_weather`.
//
// AGENT_STREAM=1 streams every turn (`stream: true`, the calls rebuilt from
// `step.start` and the `arguments_delta` pieces). AGENT_STATELESS=1 sends
// `store: false` and the whole history as steps on every turn; otherwise a
// turn continues the last one with `previous_interaction_id`. AGENT_SYSTEM,
// when set, is sent as `system_instruction` on every turn; AGENT_API_VERSION,
// when set, replaces the SDK's default API version (`v1beta`: `POST
// /v1beta/interactions`).
//
// Each prompt of $AGENT_PROMPTS (a JSON list) is a user turn of one
// conversation. Prints a JSON summary: {agent, final, finals, error, tools,
// calls, interactions}: `finals` holds the answer to each prompt, `final`
// the last; `tools` lists each call the driver ran: {name, args, result}; `calls` each
// function call it was handed: {id, name}; `interactions` the id and status
// of each interaction it got.
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";

const agentsDir = process.env.CODEMODE_AGENTS_DIR || path.join(os.homedir(), ".cache/codemode-agents");
const require = createRequire(path.join(agentsDir, "node/package.json"));
const { GoogleGenAI } = await import(require.resolve("@google/genai"));

const model = process.env.AGENT_MODEL || "gemini-3-flash-preview";
const prompt = JSON.parse(process.env.AGENT_PROMPTS || '["What is the weather in Paris?"]')[0];
const STREAM = process.env.AGENT_STREAM === "1";
const STATELESS = process.env.AGENT_STATELESS === "1";
const TOOLS = [
  {
    type: "function",
    name: "get_weather",
    description: "Get the current weather in a given location.",
    parameters: { type: "object", properties: { location: { type: "string" } }, required: ["location"] },
  },
];

const ran = [];
const calls = [];
const interactions = [];

function getWeather({ location }) {
  const result = { forecast: `sunny in ${location}`, temperature: "22C" };
  ran.push({ name: "get_weather", args: { location }, result });
  return result;
}

// The SDK's default API version (v1) unless AGENT_API_VERSION says.
const httpOptions = { baseUrl: process.env.AGENT_BASE_URL };
if (process.env.AGENT_API_VERSION) httpOptions.apiVersion = process.env.AGENT_API_VERSION;
const ai = new GoogleGenAI({ apiKey: "test-gemini-key", httpOptions });

// One create: the interaction's id, status and steps.
async function turn(params) {
  if (process.env.AGENT_SYSTEM) params = { system_instruction: process.env.AGENT_SYSTEM, ...params };
  if (!STREAM) {
    const i = await ai.interactions.create({ model, tools: TOOLS, ...params });
    return { id: i.id, status: i.status, steps: i.steps || [] };
  }
  let id;
  let status;
  const steps = new Map();
  const args = new Map();
  for await (const ev of await ai.interactions.create({ model, tools: TOOLS, stream: true, ...params })) {
    switch (ev.event_type) {
      case "interaction.created":
      case "interaction.completed":
        id = ev.interaction?.id ?? id;
        status = ev.interaction?.status ?? status;
        break;
      case "interaction.status_update":
        status = ev.status ?? status;
        break;
      case "step.start":
        steps.set(ev.index, { ...ev.step });
        args.set(ev.index, "");
        break;
      case "step.delta": {
        const d = ev.delta;
        if (!steps.has(ev.index)) steps.set(ev.index, {});
        const s = steps.get(ev.index);
        if (d.type === "text") {
          s.content ??= [];
          if (s.content.at(-1)?.type !== "text") s.content.push({ type: "text", text: "" });
          s.content.at(-1).text += d.text ?? "";
        } else if (d.type === "arguments_delta") {
          args.set(ev.index, (args.get(ev.index) ?? "") + (d.arguments ?? ""));
        } else if (d.type === "thought_signature") {
          s.signature = d.signature;
        }
        break;
      }
      case "error":
        throw new Error(`error event: ${JSON.stringify(ev.error)}`);
    }
  }
  for (const [i, a] of args) if (a) steps.get(i).arguments = JSON.parse(a);
  return { id, status, steps: [...steps.keys()].sort((a, b) => a - b).map((i) => steps.get(i)) };
}

const prompts = JSON.parse(process.env.AGENT_PROMPTS || '["What is the weather in Paris?"]');
const finals = [];
let error = null;
const history = [];
const user = (text) => ({ type: "user_input", content: [{ type: "text", text }] });
try {
  let last;
  for (const prompt of prompts) {
    // A new user turn: the whole history, or one continuing the last
    // interaction (the first continues nothing).
    let t;
    if (STATELESS) {
      history.push(user(prompt));
      t = await turn({ input: history, store: false });
    } else if (last === undefined) {
      t = await turn({ input: prompt });
    } else {
      t = await turn({ input: prompt, previous_interaction_id: last });
    }
    let done = false;
    for (let n = 0; n < 8 && !done; n++) {
      interactions.push({ id: t.id, status: t.status });
      const fcs = t.steps.filter((s) => s.type === "function_call");
      if (!fcs.length) {
        finals.push(
          t.steps
            .filter((s) => s.type === "model_output")
            .flatMap((s) => s.content || [])
            .filter((c) => c.type === "text")
            .map((c) => c.text)
            .join(""),
        );
        history.push(...t.steps);
        done = true;
        break;
      }
      const results = fcs.map((fc) => {
        calls.push({ id: fc.id, name: fc.name });
        if (fc.name === "get_weather") {
          return { type: "function_result", call_id: fc.id, name: fc.name, result: getWeather(fc.arguments || {}) };
        }
        return { type: "function_result", call_id: fc.id, name: fc.name, result: `unknown tool ${fc.name}`, is_error: true };
      });
      if (STATELESS) {
        history.push(...t.steps, ...results);
        t = await turn({ input: history, store: false });
      } else {
        t = await turn({ input: results, previous_interaction_id: t.id });
      }
    }
    if (!done) throw new Error("no final answer in 8 turns");
    last = t.id;
  }
} catch (e) {
  error = `${e?.name}: ${e?.message}`;
}
process.stdout.write(
  JSON.stringify({
    agent: "@google/genai interactions",
    final: finals.at(-1) ?? "",
    finals,
    error,
    tools: ran,
    calls,
    interactions,
  }) + "\n",
);
