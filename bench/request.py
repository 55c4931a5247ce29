"""The benchmarks' request, realistic for an agent: a system prompt, four
tools (read, write, bash, run_code), one user message (about 1.9 KB).

Writes DIR/body.json, DIR/stream.json (the same with "stream": true) and
DIR/post.lua (wrk posting body.json).

    python3 bench/request.py DIR
    EXTRA_TOOLS=60 python3 bench/request.py DIR   # an agent-sized tool set (about 22 KB more)
    EXTRA_TURNS=40 python3 bench/request.py DIR   # a history of 40 read calls (about 25 KB more)
"""
import json
import os
import sys

out = sys.argv[1]
tool = lambda n, d, p, r: {"type": "function", "function": {"name": n, "description": d, "parameters": {"type": "object", "properties": p, "required": r}}}
tools = [
    tool("read", "Read a file from the workspace.", {"path": {"type": "string", "description": "Path relative to the workspace"}, "offset": {"type": "integer"}, "limit": {"type": "integer"}}, ["path"]),
    tool("write", "Write a file, replacing its contents.", {"path": {"type": "string"}, "content": {"type": "string"}}, ["path", "content"]),
    tool("bash", "Run a shell command and return its output.", {"command": {"type": "string"}, "timeout_ms": {"type": "integer", "default": 120000}}, ["command"]),
    tool("run_code", "Run a JavaScript program that calls the tools above.", {"code": {"type": "string"}}, ["code"]),
]
tools[3:3] = [
    tool(f"tool_{i}", f"Tool number {i}: does a useful thing with files and returns text.",
         {"path": {"type": "string", "description": "Absolute path"}, "mode": {"type": "string", "enum": ["a", "b", "c"]},
          "limit": {"type": "integer", "default": 100}}, ["path"])
    for i in range(int(os.environ.get("EXTRA_TOOLS", "0")))
]
messages = [
    {"role": "system", "content": "You are a careful coding agent working in a repository. Prefer small, verifiable steps. " * 4},
    {"role": "user", "content": "How many lines does src/main.rs have? Answer with one sentence."},
]
for i in range(int(os.environ.get("EXTRA_TURNS", "0"))):
    messages[-1:-1] = [
        {"role": "user", "content": f"Step {i}: look at the next file."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": f"call_{i}", "type": "function",
            "function": {"name": "read", "arguments": json.dumps({"path": f"src/file_{i}.rs"})}}]},
        {"role": "tool", "tool_call_id": f"call_{i}", "content": "fn main() {\n    println!(\"hello\");\n}\n" * 8},
    ]
base = {"model": "gpt-4.1", "messages": messages, "tools": tools, "temperature": 0}
open(out + "/body.json", "w").write(json.dumps(base))
open(out + "/stream.json", "w").write(json.dumps(dict(base, stream=True)))
open(out + "/post.lua", "w").write(
    'wrk.method = "POST"\n'
    'wrk.headers["Content-Type"] = "application/json"\n'
    f'local f = io.open("{out}/body.json", "r"); wrk.body = f:read("*a"); f:close()\n'
)
