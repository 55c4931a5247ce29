"""Requests and fixed answers for every dialect the proxy serves, for
bench/load.sh: Chat Completions (`chat`), Responses (`responses`),
Anthropic Messages (`messages`) and Google's Gemini API (`gemini`).

    python3 bench/dialects.py write DIR
        DIR/req/DIALECT.json      the request (system prompt, four tools, one user message)
        DIR/req/DIALECT.stream.json   the same with "stream": true
        DIR/req/DIALECT.lua       wrk posting DIALECT.json with the dialect's headers
        DIR/static/json/PATH      the upstream's answer (text, about 1 KB of JSON)
        DIR/static/sse/PATH       the upstream's streamed answer (about 20 events)
    python3 bench/dialects.py path DIALECT [stream]
        the dialect's path (`v1/chat/completions`; Gemini names the model
        and the stream in its path: `v1beta/models/M:streamGenerateContent?alt=sse`)
    python3 bench/dialects.py check DIALECT json|sse FILE
        exits non-zero unless FILE (a response body) is the dialect's
        expected answer: the same text, and a proper end
    python3 bench/dialects.py headers DIALECT
        the dialect's request headers, one `name: value` a line
    python3 bench/dialects.py dialect FILE
        the dialect of a request body file: $DIALECT when set, else the
        last `_`-separated word of its name before `.json` (and before
        `_history`): bench/requests/claude_messages.json is `messages`
    python3 bench/dialects.py request FILE DIR
        writes DIR/req/DIALECT.json, DIALECT.stream.json and DIALECT.lua
        from FILE (an agent's captured request, bench/requests/), like
        `write` does from the built-in request, and prints DIALECT: the
        plain one without "stream"/"stream_options" (Gemini: its path
        says whether it streams), the streamed one with "stream": true

The request is bench/request.py's (about 1.9 KB for chat), spelled in each
dialect. The answers are text only, so the code-mode judge lets them
through unchanged in meaning.
"""
import json
import os
import sys

PATHS = {"chat": "v1/chat/completions", "responses": "v1/responses", "messages": "v1/messages",
         "gemini": "v1beta/models/gemini-2.5-pro:generateContent"}
STREAM_PATHS = dict(PATHS, gemini="v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse")
HEADERS = {
    "chat": {"Content-Type": "application/json", "Authorization": "Bearer sk-bench"},
    "responses": {"Content-Type": "application/json", "Authorization": "Bearer sk-bench"},
    "messages": {"Content-Type": "application/json", "x-api-key": "sk-ant-bench", "anthropic-version": "2023-06-01"},
    "gemini": {"Content-Type": "application/json", "x-goog-api-key": "bench-key"},
}

SYSTEM = "You are a careful coding agent working in a repository. Prefer small, verifiable steps. " * 4
USER = "How many lines does src/main.rs have? Answer with one sentence."
# The same four tools as bench/request.py.
TOOLS = [
    ("read", "Read a file from the workspace.", {"path": {"type": "string", "description": "Path relative to the workspace"}, "offset": {"type": "integer"}, "limit": {"type": "integer"}}, ["path"]),
    ("write", "Write a file, replacing its contents.", {"path": {"type": "string"}, "content": {"type": "string"}}, ["path", "content"]),
    ("bash", "Run a shell command and return its output.", {"command": {"type": "string"}, "timeout_ms": {"type": "integer", "default": 120000}}, ["command"]),
    ("run_code", "Run a JavaScript program that calls the tools above.", {"code": {"type": "string"}}, ["code"]),
]


def schema(p, r):
    return {"type": "object", "properties": p, "required": r}


def request(dialect):
    if dialect == "chat":
        tools = [{"type": "function", "function": {"name": n, "description": d, "parameters": schema(p, r)}} for n, d, p, r in TOOLS]
        return {"model": "gpt-4.1", "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}], "tools": tools, "temperature": 0}
    if dialect == "responses":
        tools = [{"type": "function", "name": n, "description": d, "parameters": schema(p, r), "strict": False} for n, d, p, r in TOOLS]
        return {"model": "gpt-5", "instructions": SYSTEM, "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": USER}]}], "tools": tools, "store": False}
    if dialect == "messages":
        tools = [{"name": n, "description": d, "input_schema": schema(p, r)} for n, d, p, r in TOOLS]
        return {"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": SYSTEM, "messages": [{"role": "user", "content": USER}], "tools": tools}
    if dialect == "gemini":
        decls = [{"name": n, "description": d, "parametersJsonSchema": schema(p, r)} for n, d, p, r in TOOLS]
        return {"contents": [{"role": "user", "parts": [{"text": USER}]}], "systemInstruction": {"parts": [{"text": SYSTEM}]},
                "tools": [{"functionDeclarations": decls}], "generationConfig": {"temperature": 0}}
    raise SystemExit(f"unknown dialect {dialect}")


# The answer: about 640 characters of text, in 18 pieces when streamed.
PIECES = [
    "`src/main.rs` has ", "42 lines. ", "It holds only ", "the entry point: ", "it reads the configuration ",
    "from the environment, ", "builds the runtime ", "with the configured number ", "of worker threads, ",
    "binds the listener ", "and hands every connection ", "to the service in `src/layer`. ",
    "Everything else lives in the library crate, ", "so the binary stays small ", "and the tests exercise ",
    "the same code paths ", "the server runs in production; ", "nothing in it needs changing for your task.",
]
TEXT = "".join(PIECES)


def answer_json(dialect):
    if dialect == "chat":
        return {
            "id": "chatcmpl-BENCH0a1b2c3d4e5f6g7h8i9j", "object": "chat.completion", "created": 1730000000,
            "model": "gpt-4.1-2025-04-14",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": TEXT, "refusal": None, "annotations": []}, "logprobs": None, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 412, "completion_tokens": 131, "total_tokens": 543,
                      "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                      "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}},
            "service_tier": "default", "system_fingerprint": "fp_bench0001",
        }
    if dialect == "responses":
        return {
            "id": "resp_bench0a1b2c3d4e5f6", "object": "response", "created_at": 1730000000, "status": "completed",
            "error": None, "incomplete_details": None, "instructions": None, "max_output_tokens": None, "model": "gpt-5-2025-08-07",
            "output": [{"id": "msg_bench0a1b2c3d4e5f6", "type": "message", "status": "completed", "role": "assistant",
                        "content": [{"type": "output_text", "annotations": [], "logprobs": [], "text": TEXT}]}],
            "parallel_tool_calls": True, "previous_response_id": None, "store": False, "temperature": 1.0,
            "text": {"format": {"type": "text"}, "verbosity": "medium"}, "tool_choice": "auto", "top_p": 1.0, "truncation": "disabled",
            "usage": {"input_tokens": 412, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 131,
                      "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 543},
        }
    if dialect == "gemini":
        return gemini_chunk([{"text": TEXT}], "STOP", 131)
    return {
        "id": "msg_01BenchA1b2C3d4E5f6G7h8", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": TEXT}], "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": 412, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                  "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
                  "output_tokens": 131, "service_tier": "standard"},
    }


def gemini_chunk(parts, finish, output_tokens):
    candidate = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate],
            "usageMetadata": {"promptTokenCount": 412, "candidatesTokenCount": output_tokens, "totalTokenCount": 412 + output_tokens,
                              "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 412}]},
            "modelVersion": "gemini-2.5-pro", "responseId": "benchA1b2C3d4E5f6G7h8"}


def sse(events):
    out = []
    for name, data in events:
        if name:
            out.append(f"event: {name}\n")
        out.append("data: " + (data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))) + "\n\n")
    return "".join(out)


def answer_sse(dialect):
    if dialect == "chat":
        head = {"id": "chatcmpl-BENCH0a1b2c3d4e5f6g7h8i9j", "object": "chat.completion.chunk", "created": 1730000000,
                "model": "gpt-4.1-2025-04-14", "service_tier": "default", "system_fingerprint": "fp_bench0001"}
        ev = [(None, dict(head, choices=[{"index": 0, "delta": {"role": "assistant", "content": "", "refusal": None}, "logprobs": None, "finish_reason": None}]))]
        ev += [(None, dict(head, choices=[{"index": 0, "delta": {"content": p}, "logprobs": None, "finish_reason": None}])) for p in PIECES]
        ev.append((None, dict(head, choices=[{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}])))
        ev.append((None, "[DONE]"))
        return sse(ev)
    if dialect == "responses":
        full = answer_json("responses")
        start = dict(full, status="in_progress", output=[], usage=None)
        item = {"id": "msg_bench0a1b2c3d4e5f6", "type": "message", "status": "in_progress", "role": "assistant", "content": []}
        part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
        ids = {"item_id": item["id"], "output_index": 0, "content_index": 0}
        ev = [("response.created", {"response": start}), ("response.in_progress", {"response": start}),
              ("response.output_item.added", {"output_index": 0, "item": item}),
              ("response.content_part.added", dict(ids, part=part))]
        ev += [("response.output_text.delta", dict(ids, delta=p, logprobs=[])) for p in PIECES[:16]]
        ev[-1][1]["delta"] = "".join(PIECES[15:])  # 16 deltas: the last holds the rest
        ev += [("response.output_text.done", dict(ids, text=TEXT, logprobs=[])),
               ("response.content_part.done", dict(ids, part=dict(part, text=TEXT))),
               ("response.output_item.done", {"output_index": 0, "item": full["output"][0]}),
               ("response.completed", {"response": full})]
        events = []
        for seq, (name, data) in enumerate(ev):
            events.append((name, dict({"type": name, "sequence_number": seq}, **data)))
        return sse(events)
    if dialect == "gemini":
        # Whole answers, one a piece, as the Gemini API streams them (CRLF).
        chunks = [gemini_chunk([{"text": p}], None, 7 * (i + 1)) for i, p in enumerate(PIECES[:-1])]
        chunks.append(gemini_chunk([{"text": PIECES[-1]}], "STOP", 131))
        return "".join("data: " + json.dumps(c, separators=(",", ":")) + "\r\n\r\n" for c in chunks)
    msg = answer_json("messages")
    start = dict(msg, content=[], stop_reason=None, usage=dict(msg["usage"], output_tokens=1))
    ev = [("message_start", {"type": "message_start", "message": start}),
          ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
          ("ping", {"type": "ping"})]
    ev += [("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}}) for p in PIECES[:16]]
    ev[-1][1]["delta"]["text"] = "".join(PIECES[15:])
    ev += [("content_block_stop", {"type": "content_block_stop", "index": 0}),
           ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                              "usage": {"input_tokens": 412, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 131}}),
           ("message_stop", {"type": "message_stop"})]
    return sse(ev)


def write_request(out, d, body, compact=False):
    """DIR/req/D.json, D.stream.json and D.lua (wrk posting D.json);
    compact for an agent's request, spelled as the agents send it."""
    body = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
    os.makedirs(f"{out}/req", exist_ok=True)
    dump = (lambda v: json.dumps(v, separators=(",", ":"), ensure_ascii=False)) if compact else json.dumps
    open(f"{out}/req/{d}.json", "w", encoding="utf-8").write(dump(body))
    # Gemini asks for a stream in its path, not its body.
    stream_body = body if d == "gemini" else dict(body, stream=True)
    open(f"{out}/req/{d}.stream.json", "w", encoding="utf-8").write(dump(stream_body))
    lua = ['wrk.method = "POST"'] + [f'wrk.headers["{k}"] = "{v}"' for k, v in HEADERS[d].items()]
    lua.append(f'local f = io.open("{out}/req/{d}.json", "r"); wrk.body = f:read("*a"); f:close()')
    open(f"{out}/req/{d}.lua", "w").write("\n".join(lua) + "\n")


def dialect_of(path):
    d = os.environ.get("DIALECT") or os.path.basename(path).removesuffix(".json").removesuffix("_history").rsplit("_", 1)[-1]
    if d not in PATHS:
        sys.exit(f"{path}: no dialect in its name; set DIALECT to one of {', '.join(PATHS)}")
    return d


def write(out):
    for d, path in PATHS.items():
        write_request(out, d, request(d))
        for kind, text in (("json", json.dumps(answer_json(d))), ("sse", answer_sse(d))):
            at = path if kind == "json" else STREAM_PATHS[d].split("?")[0]
            f = f"{out}/static/{kind}/{at}"
            os.makedirs(os.path.dirname(f), exist_ok=True)
            open(f, "w").write(text)


def events(body):
    """The data of every SSE event, as (event name, data text)."""
    out = []
    for block in body.replace("\r\n", "\n").split("\n\n"):
        name, data = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip(" "))
        if data:
            out.append((name, "\n".join(data)))
    return out


def text_of(dialect, kind, body):
    """The answer's text, and whether the answer ended properly."""
    if kind == "json":
        v = json.loads(body)
        if dialect == "chat":
            return v["choices"][0]["message"]["content"], v["choices"][0]["finish_reason"] == "stop"
        if dialect == "responses":
            text = "".join(c["text"] for o in v["output"] if o["type"] == "message" for c in o["content"] if c["type"] == "output_text")
            return text, v["status"] == "completed"
        if dialect == "gemini":
            c = v["candidates"][0]
            return "".join(p.get("text", "") for p in c["content"]["parts"]), c.get("finishReason") == "STOP"
        return "".join(c["text"] for c in v["content"] if c["type"] == "text"), v["stop_reason"] == "end_turn"
    ev = events(body)
    if dialect == "chat":
        data = [json.loads(d) for _, d in ev if d != "[DONE]"]
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in data if c.get("choices"))
        return text, ev[-1][1] == "[DONE]" and any(c["choices"][0].get("finish_reason") == "stop" for c in data if c.get("choices"))
    data = [json.loads(d) for _, d in ev]
    if dialect == "gemini":
        parts = [p for c in data for p in c["candidates"][0]["content"]["parts"]]
        return "".join(p.get("text", "") for p in parts), data[-1]["candidates"][0].get("finishReason") == "STOP"
    if dialect == "responses":
        text = "".join(e["delta"] for e in data if e["type"] == "response.output_text.delta")
        return text, data[-1]["type"] == "response.completed"
    text = "".join(e["delta"]["text"] for e in data if e["type"] == "content_block_delta" and e["delta"]["type"] == "text_delta")
    return text, data[-1]["type"] == "message_stop"


def check(dialect, kind, body):
    """None when body is the expected answer, else what is wrong."""
    try:
        text, ended = text_of(dialect, kind, body)
    except Exception as e:  # noqa: BLE001 - any malformed answer is a failure
        return f"unreadable {kind} answer ({e!r}): {body[:300]!r}"
    if text != TEXT:
        return f"unexpected text {text[:120]!r}"
    if not ended:
        return "the answer does not end properly"
    return None


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "write":
        write(sys.argv[2])
    elif cmd == "check":
        err = check(sys.argv[2], sys.argv[3], open(sys.argv[4], encoding="utf-8").read())
        if err:
            sys.exit(f"{sys.argv[2]} {sys.argv[3]}: {err}")
    elif cmd == "path":
        print((STREAM_PATHS if sys.argv[3:] == ["stream"] else PATHS)[sys.argv[2]])
    elif cmd == "dialect":
        print(dialect_of(sys.argv[2]))
    elif cmd == "request":
        d = dialect_of(sys.argv[2])
        write_request(sys.argv[3], d, json.load(open(sys.argv[2], encoding="utf-8")), compact=True)
        print(d)
    elif cmd == "headers":
        for k, v in HEADERS[sys.argv[2]].items():
            print(f"{k}: {v}")
    else:
        sys.exit(__doc__)
