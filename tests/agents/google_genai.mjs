// Drives Google's JS SDK (`@google/genai`, unmodified) with automatic
// function calling: a CallableTool (the SDK's interface for it) holding two
// functions over $AGENT_DIR, one `models.generateContent` (or
// `models.generateContentStream` with AGENT_STREAM=1) on the SDK's defaults
// (its default API version), against $AGENT_BASE_URL (the server root).
// Prints a JSON summary: {agent, final, error, tools} where `tools` lists
// each call the SDK ran: {name, args, result}.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";

const agentsDir = process.env.CODEMODE_AGENTS_DIR || path.join(os.homedir(), ".cache/codemode-agents");
const require = createRequire(path.join(agentsDir, "node/package.json"));
const { GoogleGenAI } = await import(require.resolve("@google/genai"));

const dir = process.env.AGENT_DIR || process.cwd();
const model = process.env.AGENT_MODEL || "gemini-2.5-flash";
const prompt = JSON.parse(process.env.AGENT_PROMPTS || '["What do the files say?"]')[0];

const ran = [];
const run = {
  list_files: () => fs.readdirSync(dir).sort().join("\n"),
  read_file: ({ path: p }) => {
    try {
      return fs.readFileSync(path.join(dir, path.basename(String(p))), "utf8");
    } catch {
      return "ENOENT";
    }
  },
};

const files = {
  tool: async () => ({
    functionDeclarations: [
      {
        name: "list_files",
        description: "List the files in the work directory, one a line.",
        parametersJsonSchema: { type: "object", properties: {} },
      },
      {
        name: "read_file",
        description: "Read a file of the work directory and return its content.",
        parametersJsonSchema: {
          type: "object",
          properties: { path: { type: "string" } },
          required: ["path"],
        },
      },
    ],
  }),
  callTool: async (calls) =>
    calls.map((call) => {
      const args = call.args || {};
      const result = run[call.name](args);
      ran.push({ name: call.name, args, result });
      return { functionResponse: { id: call.id, name: call.name, response: { result } } };
    }),
};

const ai = new GoogleGenAI({ apiKey: "test-gemini-key", httpOptions: { baseUrl: process.env.AGENT_BASE_URL } });
const params = { model, contents: prompt, config: { tools: [files] } };
let final = "";
let error = null;
try {
  if (process.env.AGENT_STREAM === "1") {
    for await (const chunk of await ai.models.generateContentStream(params)) {
      // The answer is the text after the last turn with calls (the SDK
      // yields the function responses it sent as a chunk too).
      if (chunk.functionCalls?.length) final = "";
      else if (chunk.candidates?.[0]?.content?.role !== "user") final += chunk.text ?? "";
    }
  } else {
    final = (await ai.models.generateContent(params)).text ?? "";
  }
} catch (e) {
  error = `${e?.name}: ${e?.message}`;
}
process.stdout.write(JSON.stringify({ agent: "@google/genai", final, error, tools: ran }) + "\n");
