#!/usr/bin/env python3
"""A scripted model for bench/value.sh, Python 3 standard library only.

It serves the four wire APIs a provider serves, streaming or not:
  POST /v1/messages (+ /count_tokens)   Claude Code
  POST /v1/responses                    Codex
  POST /v1/chat/completions             opencode
  POST /v1beta/models/M:streamGenerateContent (and :generateContent,
       :countTokens)                    gemini-cli
and plays a competent model FAIRLY in each mode. It is a state machine over
the request it gets: which task (named in the user's prompt, "Task NAME in
DIR:"), whether it sees the agent's own tools (native) or only `run_code`
(code), and which tool calls it made and which results came back. It never
keeps conversation state of its own.

- native: one turn per dependent step, and independent calls batched in one
  turn (fan-out: the 20 reads are 20 parallel tool calls in one turn);
- code: one `run_code` program that does the whole task with loops and
  `Promise.all`, then an answer quoting the program's result.

Every request is logged (one JSON line to --log): its path, body bytes,
the bytes of the longest prefix of its prompt (tools, system, messages or
contents in the order a provider renders them, `cache_control` marks left
out) shared with an earlier request of this process, and the bytes the
model wrote.
--dump DIR also keeps every request body (to learn an agent's tools).

    python3 bench/value_model.py --port-file F --log L [--dump DIR]
"""
import argparse
import gzip
import json
import os
import re
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ARGS = None
LOCK = threading.Lock()
RENDERS = []  # rendered prompts seen so far (for the cached-prefix estimate)
COUNTER = [0]

# ---------------------------------------------------------------- the tasks

FANOUT_FILES = [f"note{i:02d}.txt" for i in range(1, 21)]


def fits(schema):
    """A small value that fits a JSON schema (OpenAPI's upper-case types too)."""
    t = str((schema or {}).get("type", "object")).lower()
    if t == "object":
        props = schema.get("properties") or {}
        return {k: fits(props.get(k)) for k in schema.get("required") or props}
    if t == "array":
        return []
    if t in ("integer", "number"):
        return max(1, schema.get("minimum", 1))
    if t == "boolean":
        return False
    return (schema.get("enum") or ["Bench task"])[0]


def task_of(prompt):
    """(task, dir) named by the user's prompt, "Task NAME in DIR: ..."."""
    m = re.search(r"Task (\w+) in (\S+?):", prompt)
    return (m.group(1), m.group(2)) if m else (None, None)


def text_of(content):
    """The text of a message content / tool result (string or parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for p in content:
            if isinstance(p, str):
                out.append(p)
            elif isinstance(p, dict):
                out.append(p.get("text") or p.get("output") or "")
        return "\n".join(out)
    if isinstance(content, dict):
        return content.get("text") or json.dumps(content)
    return str(content)


class Conv:
    """A request normalised: prompt text, tool names, calls made (id, name,
    args), results got (id -> text), in order; the JSON schema the answer
    must fit, if any."""

    def __init__(self):
        self.prompt = ""
        self.tools = []
        self.system = ""
        self.calls = []
        self.results = {}
        self.schema = None


def parse_messages(body):
    c = Conv()
    c.tools = [t.get("name") for t in body.get("tools") or []]
    c.system = text_of(body.get("system"))
    for m in body.get("messages") or []:
        content = m.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
        for b in blocks:
            t = b.get("type")
            if m.get("role") == "user" and t == "text":
                c.prompt += b.get("text") or ""
            elif t == "tool_use":
                c.calls.append((b.get("id"), b.get("name"), b.get("input") or {}))
            elif t == "tool_result":
                c.results[b.get("tool_use_id")] = text_of(b.get("content"))
    return c


def parse_responses(body):
    c = Conv()
    for t in body.get("tools") or []:
        c.tools.append(t.get("name") or t.get("type"))
    c.system = body.get("instructions") or ""
    for it in body.get("input") or []:
        t = it.get("type", "message")
        if t == "message":
            if it.get("role") == "user":
                c.prompt += text_of(it.get("content"))
            elif it.get("role") in ("developer", "system"):
                c.system += text_of(it.get("content"))
        elif t == "function_call":
            try:
                args = json.loads(it.get("arguments") or "{}")
            except ValueError:
                args = {}
            c.calls.append((it.get("call_id"), it.get("name"), args))
        elif t == "custom_tool_call":
            c.calls.append((it.get("call_id"), it.get("name"), it.get("input")))
        elif t.endswith("_output"):
            c.results[it.get("call_id")] = text_of(it.get("output"))
    return c


def parse_chat(body):
    c = Conv()
    c.tools = [(t.get("function") or {}).get("name") for t in body.get("tools") or []]
    for m in body.get("messages") or []:
        role = m.get("role")
        if role == "user":
            c.prompt += text_of(m.get("content"))
        elif role == "system":
            c.system += text_of(m.get("content"))
        elif role == "assistant":
            for tc in m.get("tool_calls") or []:
                f = tc.get("function") or {}
                try:
                    args = json.loads(f.get("arguments") or "{}")
                except ValueError:
                    args = {}
                c.calls.append((tc.get("id"), f.get("name"), args))
        elif role == "tool":
            c.results[m.get("tool_call_id")] = text_of(m.get("content"))
    return c


def gemini_result_text(response):
    """What a functionResponse's `response` says: gemini-cli sends
    `{output: TEXT}` (or `{error: TEXT}`); anything else as JSON."""
    if isinstance(response, dict):
        for k in ("output", "error"):
            if isinstance(response.get(k), str):
                return response[k]
    return response if isinstance(response, str) else json.dumps(response)


def parse_gemini(body):
    c = Conv()
    for t in body.get("tools") or []:
        c.tools += [d.get("name") for d in t.get("functionDeclarations") or []]
    c.system = text_of((body.get("systemInstruction") or {}).get("parts"))
    gen = body.get("generationConfig") or {}
    if gen.get("responseMimeType") == "application/json":
        c.schema = gen.get("responseJsonSchema") or gen.get("responseSchema") or {}
    turn = []  # the keys of the last model turn's calls, for answers without an id
    for m in body.get("contents") or []:
        parts = m.get("parts") or []
        if m.get("role") == "model":
            turn = []
            for p in parts:
                fc = p.get("functionCall")
                if fc:
                    key = fc.get("id") or f"#{len(c.calls)}"
                    c.calls.append((key, fc.get("name"), fc.get("args") or {}))
                    turn.append(key)
            continue
        answered = 0
        for p in parts:
            fr = p.get("functionResponse")
            if fr:
                key = fr.get("id")
                if key not in turn:  # no id, or one the call did not have: by place
                    key = turn[answered] if answered < len(turn) else key
                c.results[key] = gemini_result_text(fr.get("response"))
                answered += 1
            elif "text" in p and not p.get("thought"):
                c.prompt += p.get("text") or ""
    return c


# ------------------------------------------------- each agent's native tools
# (name, args) of a read / an edit / a shell command, per agent, as the
# installed versions declare them (see the top of bench/value.sh).


class Claude:
    def read(d, f):
        return ("Read", {"file_path": f"{d}/{f}"})

    def edit(d, f, old, new):
        return ("Edit", {"file_path": f"{d}/{f}", "old_string": old, "new_string": new})

    def sh(d, cmd):
        return ("Bash", {"command": f"cd {d} && {cmd}", "description": "Run the check"})

    js_read = "tools.Read({file_path: dir + '/' + f})"
    js_edit = "tools.Edit({file_path: dir + '/' + f, old_string: old, new_string: neu})"
    js_sh = "tools.Bash({command: 'cd ' + dir + ' && ' + cmd, description: 'Run the check'})"


class Opencode:
    def read(d, f):
        return ("read", {"filePath": f"{d}/{f}"})

    def edit(d, f, old, new):
        return ("edit", {"filePath": f"{d}/{f}", "oldString": old, "newString": new})

    def sh(d, cmd):
        return ("bash", {"command": cmd, "workdir": d})

    js_read = "tools.read({filePath: dir + '/' + f})"
    js_edit = "tools.edit({filePath: dir + '/' + f, oldString: old, newString: neu})"
    js_sh = "tools.bash({command: cmd, workdir: dir})"


class Codex:
    def read(d, f):
        return ("exec_command", {"cmd": f"cat {f}", "workdir": d})

    def edit(d, f, old, new):
        patch = f"*** Begin Patch\n*** Update File: {f}\n@@\n-{old}\n+{new}\n*** End Patch\n"
        return ("apply_patch", patch)

    def sh(d, cmd):
        return ("exec_command", {"cmd": cmd, "workdir": d})

    js_read = "tools.exec_command({cmd: 'cat ' + f, workdir: dir})"
    js_edit = ("tools.apply_patch('*** Begin Patch\\n*** Update File: ' + f + "
               "'\\n@@\\n-' + old + '\\n+' + neu + '\\n*** End Patch\\n')")
    js_sh = "tools.exec_command({cmd: cmd, workdir: dir})"


class Gemini:
    def read(d, f):
        return ("read_file", {"file_path": f"{d}/{f}"})

    def edit(d, f, old, new):
        return ("replace", {"file_path": f"{d}/{f}", "instruction": "Set retries to 5.",
                            "old_string": old, "new_string": new})

    def sh(d, cmd):
        return ("run_shell_command", {"command": cmd, "dir_path": d})

    js_read = "tools.read_file({file_path: dir + '/' + f})"
    js_edit = ("tools.replace({file_path: dir + '/' + f, instruction: 'Set retries to 5.', "
               "old_string: old, new_string: neu})")
    js_sh = "tools.run_shell_command({command: cmd, dir_path: dir})"


AGENT_OF = {"messages": Claude, "responses": Codex, "chat": Opencode, "gemini": Gemini}

# ------------------------------------------------------------------ deciding


def program(task, d, A):
    """The one run_code program that does the whole task."""
    head = f"const dir = {json.dumps(d)};\n"
    if task == "sequential":
        return head + (
            "let f = 'start.txt';\n"
            "for (let hop = 0; hop < 20; hop++) {\n"
            f"  const text = String(await {A.js_read});\n"
            "  const next = text.match(/next: (\\S+)/);\n"
            "  if (next) { f = next[1]; continue; }\n"
            "  const secret = text.match(/secret is (\\S+)/);\n"
            "  return secret ? `the secret is ${secret[1]} (in ${f}, after ${hop} hops)` : `no secret in ${f}`;\n"
            "}\n"
            "return 'the chain is too long';\n"
        )
    if task == "fanout":
        return head + (
            f"const files = {json.dumps(FANOUT_FILES)};\n"
            f"const texts = await Promise.all(files.map((f) => {A.js_read}));\n"
            "const hits = files.filter((f, i) => String(texts[i]).includes('TODO'));\n"
            "return `${hits.length} files hold a TODO: ${hits.join(', ')}`;\n"
        )
    if task == "edit":
        return head + (
            "let f = 'config.ini';\n"
            f"const cfg = String(await {A.js_read});\n"
            "const m = cfg.match(/retries = (\\d+)/);\n"
            "if (!m) return 'no retries line in config.ini: ' + cfg;\n"
            "const old = m[0], neu = 'retries = 5';\n"
            f"await {A.js_edit};\n"
            "const cmd = 'sh check.sh';\n"
            f"const out = String(await {A.js_sh});\n"
            "const line = out.match(/CHECK[^\\n]*/);\n"
            "return 'check output: ' + (line ? line[0] : out);\n"
        )
    return "return 'unknown task';"


def decide(dialect, c):
    """The model's turn: ("calls", [(name, args)]) or ("text", str)."""
    task, d = task_of(c.prompt)
    if task is None or not c.tools:
        # An agent's side request (a title, a summary, gemini-cli's model
        # router): a short answer, JSON when a schema asks for it (gemini-cli
        # retries the router for a minute and more until its answer fits).
        return ("text", json.dumps(fits(c.schema)) if c.schema is not None else "Bench task")
    A = AGENT_OF[dialect]
    code = "run_code" in c.tools and not any(n in c.tools for n in ("Read", "read", "exec_command", "shell", "read_file"))
    if code:
        done = [c.results[i] for (i, n, _) in c.calls if n == "run_code" and i in c.results]
        if not done:
            return ("calls", [("run_code", {"code": program(task, d, A)})])
        return ("text", "Program result: " + done[-1])
    # native: what came back so far, in call order
    got = [(n, a, c.results.get(i)) for (i, n, a) in c.calls]
    if task == "sequential":
        if not got:
            return ("calls", [A.read(d, "start.txt")])
        last = got[-1][2] or ""
        nxt = re.search(r"next: (\S+)", last)
        if nxt:
            return ("calls", [A.read(d, nxt.group(1))])
        s = re.search(r"secret is (\S+)", last)
        return ("text", f"the secret is {s.group(1)}" if s else "no secret found: " + last[:200])
    if task == "fanout":
        if not got:
            return ("calls", [A.read(d, f) for f in FANOUT_FILES])
        hits = []
        for (n, a, r) in got:
            f = next((x for x in FANOUT_FILES if x in json.dumps(a)), None)
            if f and r and "TODO" in r:
                hits.append(f)
        hits.sort()
        return ("text", f"{len(hits)} files hold a TODO: {', '.join(hits)}")
    if task == "edit":
        if not got:
            return ("calls", [A.read(d, "config.ini")])
        if len(got) == 1:
            m = re.search(r"retries = (\d+)", got[0][2] or "")
            if not m:
                return ("text", "no retries line in config.ini")
            return ("calls", [A.edit(d, "config.ini", m.group(0), "retries = 5")])
        if len(got) == 2:
            return ("calls", [A.sh(d, "sh check.sh")])
        out = got[-1][2] or ""
        line = re.search(r"CHECK[^\n]*", out)
        return ("text", "check output: " + (line.group(0) if line else out[:300]))
    return ("text", "unknown task")


# ------------------------------------------------------------ wire writers


def new_id(prefix):
    with LOCK:
        COUNTER[0] += 1
        return f"{prefix}{COUNTER[0]}"


def sse(event, data):
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n"


def messages_reply(body, turn, in_tokens):
    kind, val = turn
    content = []
    if kind == "text":
        content.append({"type": "text", "text": val})
    else:
        for name, args in val:
            content.append({"type": "tool_use", "id": new_id("toolu_bench_"), "name": name, "input": args})
    stop = "tool_use" if kind == "calls" else "end_turn"
    out_tokens = max(1, len(json.dumps(content)) // 4)
    usage = {"input_tokens": in_tokens, "output_tokens": out_tokens,
             "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    msg = {"id": new_id("msg_bench_"), "type": "message", "role": "assistant", "model": body.get("model", "m"),
           "content": content, "stop_reason": stop, "stop_sequence": None, "usage": usage}
    if not body.get("stream"):
        return "application/json", json.dumps(msg)
    head = dict(msg, content=[], stop_reason=None, usage=dict(usage, output_tokens=1))
    s = sse("message_start", {"type": "message_start", "message": head})
    for i, b in enumerate(content):
        if b["type"] == "text":
            s += sse("content_block_start", {"type": "content_block_start", "index": i,
                                             "content_block": {"type": "text", "text": ""}})
            s += sse("content_block_delta", {"type": "content_block_delta", "index": i,
                                             "delta": {"type": "text_delta", "text": b["text"]}})
        else:
            s += sse("content_block_start", {"type": "content_block_start", "index": i,
                                             "content_block": dict(b, input={})})
            s += sse("content_block_delta", {"type": "content_block_delta", "index": i,
                                             "delta": {"type": "input_json_delta",
                                                       "partial_json": json.dumps(b["input"])}})
        s += sse("content_block_stop", {"type": "content_block_stop", "index": i})
    s += sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                               "usage": {"output_tokens": out_tokens}})
    s += sse("message_stop", {"type": "message_stop"})
    return "text/event-stream", s


def responses_reply(body, turn, in_tokens):
    kind, val = turn
    output = []
    if kind == "text":
        output.append({"type": "message", "id": new_id("msg_bench_"), "status": "completed", "role": "assistant",
                       "content": [{"type": "output_text", "text": val, "annotations": []}]})
    else:
        for name, args in val:
            cid = new_id("call_bench_")
            if isinstance(args, str):
                output.append({"type": "custom_tool_call", "id": "ctc_" + cid, "call_id": cid, "name": name,
                               "input": args, "status": "completed"})
            else:
                output.append({"type": "function_call", "id": "fc_" + cid, "call_id": cid, "name": name,
                               "arguments": json.dumps(args), "status": "completed"})
    out_tokens = max(1, len(json.dumps(output)) // 4)
    usage = {"input_tokens": in_tokens, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": out_tokens, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": in_tokens + out_tokens}
    resp = {"id": new_id("resp_bench_"), "object": "response", "created_at": int(time.time()),
            "status": "completed", "model": body.get("model", "m"), "output": output, "usage": usage}
    if not body.get("stream"):
        return "application/json", json.dumps(resp)
    seq = [0]

    def ev(data):
        data["sequence_number"] = seq[0]
        seq[0] += 1
        return sse(data["type"], data)

    head = dict(resp, status="in_progress", output=[], usage=None)
    s = ev({"type": "response.created", "response": head})
    s += ev({"type": "response.in_progress", "response": head})
    for i, it in enumerate(output):
        if it["type"] == "function_call":
            s += ev({"type": "response.output_item.added", "output_index": i, "item": dict(it, arguments="")})
            s += ev({"type": "response.function_call_arguments.delta", "output_index": i, "item_id": it["id"],
                     "delta": it["arguments"]})
            s += ev({"type": "response.function_call_arguments.done", "output_index": i, "item_id": it["id"],
                     "arguments": it["arguments"]})
        elif it["type"] == "custom_tool_call":
            s += ev({"type": "response.output_item.added", "output_index": i, "item": dict(it, input="")})
            s += ev({"type": "response.custom_tool_call_input.delta", "output_index": i, "item_id": it["id"],
                     "delta": it["input"]})
            s += ev({"type": "response.custom_tool_call_input.done", "output_index": i, "item_id": it["id"],
                     "input": it["input"]})
        else:
            text = it["content"][0]["text"]
            s += ev({"type": "response.output_item.added", "output_index": i, "item": dict(it, content=[])})
            part = {"type": "output_text", "text": "", "annotations": []}
            s += ev({"type": "response.content_part.added", "output_index": i, "item_id": it["id"],
                     "content_index": 0, "part": part})
            s += ev({"type": "response.output_text.delta", "output_index": i, "item_id": it["id"],
                     "content_index": 0, "delta": text})
            s += ev({"type": "response.output_text.done", "output_index": i, "item_id": it["id"],
                     "content_index": 0, "text": text})
            s += ev({"type": "response.content_part.done", "output_index": i, "item_id": it["id"],
                     "content_index": 0, "part": it["content"][0]})
        s += ev({"type": "response.output_item.done", "output_index": i, "item": it})
    s += ev({"type": "response.completed", "response": resp})
    return "text/event-stream", s


def chat_reply(body, turn, in_tokens):
    kind, val = turn
    msg = {"role": "assistant", "content": None}
    if kind == "text":
        msg["content"] = val
    else:
        msg["tool_calls"] = [{"id": new_id("call_bench_"), "type": "function",
                              "function": {"name": n, "arguments": json.dumps(a)}} for n, a in val]
    finish = "tool_calls" if kind == "calls" else "stop"
    out_tokens = max(1, len(json.dumps(msg)) // 4)
    usage = {"prompt_tokens": in_tokens, "completion_tokens": out_tokens, "total_tokens": in_tokens + out_tokens}
    cid = new_id("chatcmpl-bench-")
    base = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()), "model": body.get("model", "m")}
    if not body.get("stream"):
        return "application/json", json.dumps(dict(base, object="chat.completion", usage=usage, choices=[
            {"index": 0, "finish_reason": finish, "message": msg}]))

    def chunk(delta, fin=None):
        return sse(None, dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": fin}]))

    s = chunk({"role": "assistant", "content": ""})
    if msg["content"]:
        s += chunk({"content": msg["content"]})
    for i, tc in enumerate(msg.get("tool_calls") or []):
        s += chunk({"tool_calls": [{"index": i, "id": tc["id"], "type": "function",
                                    "function": {"name": tc["function"]["name"], "arguments": ""}}]})
        s += chunk({"tool_calls": [{"index": i, "function": {"arguments": tc["function"]["arguments"]}}]})
    s += chunk({}, finish)
    if (body.get("stream_options") or {}).get("include_usage"):
        s += sse(None, dict(base, choices=[], usage=usage))
    return "text/event-stream", s + "data: [DONE]\n\n"


def gemini_reply(body, turn, in_tokens, stream):
    kind, val = turn
    if kind == "text":
        parts = [{"text": val}]
    else:
        # No `id` on a call, as Gemini 2.5 answers (the proxy or gemini-cli gives one).
        parts = [{"functionCall": {"name": n, "args": a}} for n, a in val]
    out_tokens = max(1, len(json.dumps(parts)) // 4)
    resp = {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": in_tokens, "candidatesTokenCount": out_tokens,
                              "totalTokenCount": in_tokens + out_tokens},
            "modelVersion": "gemini-2.5-pro", "responseId": new_id("resp_bench_")}
    if not stream:
        return "application/json", json.dumps(resp)
    # Each event is a whole GenerateContentResponse, as Google sends.
    return "text/event-stream", f"data: {json.dumps(resp)}\r\n\r\n"


# ------------------------------------------------------- cache-prefix model


def strip_cache_control(v):
    if isinstance(v, dict):
        return {k: strip_cache_control(x) for k, x in v.items() if k != "cache_control"}
    if isinstance(v, list):
        return [strip_cache_control(x) for x in v]
    return v


def render(dialect, body):
    """The prompt in the order a provider renders it: tools, system, turns."""
    b = strip_cache_control(body)
    parts = [json.dumps(b.get("tools") or [], sort_keys=True)]
    if dialect == "messages":
        parts.append(json.dumps(b.get("system"), sort_keys=True))
        parts += [json.dumps(m, sort_keys=True) for m in b.get("messages") or []]
    elif dialect == "responses":
        parts.append(json.dumps(b.get("instructions"), sort_keys=True))
        parts += [json.dumps(m, sort_keys=True) for m in b.get("input") or []]
    elif dialect == "gemini":
        parts.append(json.dumps(b.get("systemInstruction"), sort_keys=True))
        parts += [json.dumps(m, sort_keys=True) for m in b.get("contents") or []]
    else:
        parts += [json.dumps(m, sort_keys=True) for m in b.get("messages") or []]
    return "\n".join(parts)


def shared_prefix(r):
    best = 0
    with LOCK:
        for old in RENDERS:
            n = len(os.path.commonprefix([old, r]))
            best = max(best, n)
        RENDERS.append(r)
    return best


# --------------------------------------------------------------- the server


def decode(raw, enc):
    enc = (enc or "").lower()
    if enc == "gzip":
        return gzip.decompress(raw)
    if enc == "deflate":
        return zlib.decompress(raw)
    if enc == "zstd":
        raise ValueError("zstd request bodies need Python 3.14")
    return raw


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send(self, status, ctype, text):
        data = text.encode()
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path.startswith("/v1/models"):
            return self.send(200, "application/json", json.dumps({"object": "list", "data": [
                {"id": "bench-model", "object": "model", "type": "model", "display_name": "bench"}]}))
        self.send(404, "application/json", json.dumps({"error": {"message": "not found"}}))

    def do_POST(self):
        t0 = time.time()
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            raw = decode(raw, self.headers.get("content-encoding"))
            body = json.loads(raw or b"{}")
        except ValueError as e:
            return self.send(400, "application/json", json.dumps({"error": {"message": str(e)}}))
        path = self.path.split("?")[0]
        n = None
        if ARGS.dump:
            with LOCK:
                COUNTER[0] += 1
                n = COUNTER[0]
            with open(os.path.join(ARGS.dump, f"req-{n:03d}{path.replace('/', '_')}.json"), "w") as f:
                json.dump({"path": self.path, "headers": dict(self.headers), "body": body}, f, indent=1)
        method = re.fullmatch(r"/v1beta/models/[^/:]+:(\w+)", path)
        method = method.group(1) if method else None
        if path == "/v1/messages/count_tokens" or method == "countTokens":
            self.log(path, raw, None, 0, t0, count_only=True)
            count = {"totalTokens": len(raw) // 4} if method else {"input_tokens": len(raw) // 4}
            return self.send(200, "application/json", json.dumps(count))
        dialect = {"/v1/messages": "messages", "/v1/responses": "responses",
                   "/v1/chat/completions": "chat"}.get(path)
        if method in ("streamGenerateContent", "generateContent"):
            dialect = "gemini"
        if dialect is None:
            return self.send(404, "application/json", json.dumps({"error": {"message": "no route " + path}}))
        conv = {"messages": parse_messages, "responses": parse_responses, "chat": parse_chat,
                "gemini": parse_gemini}[dialect](body)
        try:
            turn = decide(dialect, conv)
        except Exception as e:  # a bug here must show, not hang the agent
            turn = ("text", f"MODEL ERROR: {e!r}")
        writer = {"messages": messages_reply, "responses": responses_reply, "chat": chat_reply,
                  "gemini": lambda b, t, n: gemini_reply(b, t, n, method == "streamGenerateContent")}[dialect]
        ctype, out = writer(body, turn, len(raw) // 4)
        wrote = json.dumps(turn[1])
        self.log(path, raw, body, len(wrote), t0, dialect=dialect, conv=conv, turn=turn)
        self.send(200, ctype, out)

    def log(self, path, raw, body, out_bytes, t0, count_only=False, dialect=None, conv=None, turn=None):
        rec = {"t": t0, "path": path, "bytes": len(raw), "out_bytes": out_bytes, "count_tokens": count_only}
        if body is not None and not count_only:
            r = render(dialect, body)
            # the shared share of the rendering, in body bytes
            rec["prefix_bytes"] = int(len(raw) * shared_prefix(r) / max(1, len(r)))
            task, _ = task_of(conv.prompt)
            rec["task"] = task
            rec["side"] = task is None or not conv.tools
            rec["tools"] = len(conv.tools)
            rec["result_bytes"] = sum(len(r.encode()) for r in conv.results.values())
            rec["turn"] = turn[0] if turn[0] == "text" else [n for n, _ in turn[1]]
            if turn[0] == "text":
                rec["text"] = turn[1]
        with LOCK:
            with open(ARGS.log, "a") as f:
                f.write(json.dumps(rec) + "\n")


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--port-file", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--dump")
    ARGS = p.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", ARGS.port), Handler)
    with open(ARGS.port_file + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(ARGS.port_file + ".tmp", ARGS.port_file)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
