"""Gives a captured first request a long tool history: TURNS (30) tool turns
appended in the dialect's own history shape, each a call of a tool the agent
declared (alternately reading a file and running a shell command) and its
result (1-2 KB of source or command output), so the request is the one the
agent sends after those turns. Deterministic: the same input gives the same
output.

    python3 bench/requests/grow.py IN OUT [TURNS]
    python3 bench/requests/grow.py --all     # every bench/requests/*_<dialect>.json -> *_<dialect>_history.json

The dialect comes from the file name (`<agent>_<dialect>.json`, dialect
one of chat, responses, messages, gemini). The output is compact JSON with
the agent's own characters unescaped, as the agents send it.
"""
import glob
import json
import os
import sys

DIALECTS = ("chat", "responses", "messages", "gemini")


def dialect_of(path):
    d = os.path.basename(path).removesuffix(".json").removesuffix("_history").rsplit("_", 1)[-1]
    if d not in DIALECTS:
        sys.exit(f"{path}: the file name names no dialect ({', '.join(DIALECTS)})")
    return d


MODULES = ["config", "router", "server", "auth", "cache", "metrics", "limits", "stream", "codec", "pool"]


def source(i):
    """About 1.4 KB of plausible Rust, different per turn."""
    m = MODULES[i % len(MODULES)]
    lines = [
        f"//! The {m} layer: what the server does with a request before the handler.",
        "",
        "use std::sync::Arc;",
        "use std::time::Duration;",
        "",
        f"use crate::{{Error, Request, Response}};",
        "",
        f"pub struct {m.capitalize()}Layer {{",
        "    inner: Arc<Inner>,",
        f"    timeout: Duration,",
        "}",
        "",
        f"impl {m.capitalize()}Layer {{",
        f"    pub fn new(inner: Arc<Inner>) -> Self {{",
        f"        Self {{ inner, timeout: Duration::from_secs({10 + i}) }}",
        "    }",
        "",
        "    pub async fn call(&self, req: Request) -> Result<Response, Error> {",
        "        let started = std::time::Instant::now();",
        f"        let res = tokio::time::timeout(self.timeout, self.inner.handle(req)).await;",
        "        match res {",
        "            Ok(Ok(r)) => Ok(r),",
        f"            Ok(Err(e)) => Err(e.context(\"{m}\")),",
        "            Err(_) => Err(Error::Timeout(started.elapsed())),",
        "        }",
        "    }",
        "}",
        "",
        "#[cfg(test)]",
        "mod tests {",
        "    use super::*;",
        "",
        "    #[tokio::test]",
        f"    async fn {m}_passes_a_request_through() {{",
        f"        let layer = {m.capitalize()}Layer::new(Arc::new(Inner::default()));",
        "        let res = layer.call(Request::get(\"/health\")).await.unwrap();",
        "        assert_eq!(res.status(), 200);",
        "    }",
        "}",
    ]
    return lines


def shell_output(i):
    """About 1.2 KB of `cargo test` output."""
    m = MODULES[i % len(MODULES)]
    out = [f"   Compiling server v0.3.{i} (/home/user/project)", f"    Finished `test` profile [unoptimized + debuginfo] target(s) in {3 + i % 7}.{i % 10}s",
           "     Running unittests src/lib.rs (target/debug/deps/server-4f2a9c1e)", "", "running 14 tests"]
    out += [f"test {MODULES[(i + k) % len(MODULES)]}::tests::case_{k} ... ok" for k in range(14)]
    out += ["", f"test result: ok. 14 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.{i:02d}s", "",
            f"   Doc-tests server", "", "running 0 tests", "", "test result: ok. 0 passed; 0 failed; 0 ignored"]
    return f"cargo test {m}", "\n".join(out) + "\n"


def turn(i):
    """(kind, path or command, result text) of turn i."""
    if i % 2 == 0:
        m = MODULES[(i // 2) % len(MODULES)]
        return "read", f"/home/user/project/src/{m}_{i}.rs", source(i)
    cmd, out = shell_output(i)
    return "bash", cmd, out


def grow_messages(v, n):  # Claude Code: Read and Bash
    msgs = v["messages"]
    for i in range(n):
        kind, arg, res = turn(i)
        tid = f"toolu_01Bench{i:04d}Aa1Bb2Cc3Dd4Ee"
        if kind == "read":
            call = {"type": "tool_use", "id": tid, "name": "Read", "input": {"file_path": arg}}
            text = "".join(f"{k + 1:6d}\u2192{line}\n" for k, line in enumerate(res))
        else:
            call = {"type": "tool_use", "id": tid, "name": "Bash", "input": {"command": arg, "description": "Run the tests"}}
            text = res
        msgs.append({"role": "assistant", "content": [{"type": "text", "text": f"Step {i + 1}: let me check that."}, call]})
        msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": text}]})


def grow_responses(v, n):  # Codex: exec_command (it reads files with sed/cat)
    items = v["input"]
    for i in range(n):
        kind, arg, res = turn(i)
        cid = f"call_Bench{i:04d}Aa1Bb2Cc3Dd4Ee5Ff"
        if kind == "read":
            cmd, out = f"sed -n '1,200p' {arg}", "\n".join(res) + "\n"
        else:
            cmd, out = arg, res
        items.append({"type": "function_call", "name": "exec_command",
                      "arguments": json.dumps({"cmd": cmd, "workdir": "/home/user/project", "yield_time_ms": 10000}),
                      "call_id": cid})
        items.append({"type": "function_call_output", "call_id": cid,
                      "output": f"Chunk ID: {i:06x}\nWall time: 0.{i:04d} seconds\nProcess exited with code 0\n"
                                f"Original token count: {len(out) // 4}\nOutput:\n{out}"})


def grow_chat(v, n):  # opencode: read and bash
    msgs = v["messages"]
    for i in range(n):
        kind, arg, res = turn(i)
        cid = f"call_Bench{i:04d}Aa1Bb2Cc3Dd4Ee5Ff"
        if kind == "read":
            fn, args = "read", {"filePath": arg}
            text = f"<path>{arg}</path>\n<type>file</type>\n<content>\n" + "".join(f"{k + 1}: {line}\n" for k, line in enumerate(res)) + "</content>"
        else:
            fn, args = "bash", {"command": arg, "description": "Run the tests"}
            text = res
        msgs.append({"role": "assistant", "content": "",
                     "tool_calls": [{"id": cid, "type": "function", "function": {"name": fn, "arguments": json.dumps(args)}}]})
        msgs.append({"role": "tool", "tool_call_id": cid, "content": text})


def grow_gemini(v, n):  # gemini-cli: read_file and run_shell_command
    contents = v["contents"]
    for i in range(n):
        kind, arg, res = turn(i)
        if kind == "read":
            name, args, response = "read_file", {"file_path": arg}, {"output": "\n".join(res) + "\n"}
        else:
            name, args = "run_shell_command", {"command": arg, "description": "Run the tests"}
            response = {"output": f"Output: {res}\nProcess Group PGID: {4000 + i}"}
        fid = f"{name}_{1765000000000 + i}_0"
        contents.append({"role": "model", "parts": [{"functionCall": {"id": fid, "name": name, "args": args}}]})
        contents.append({"role": "user", "parts": [{"functionResponse": {"id": fid, "name": name, "response": response}}]})


GROW = {"messages": grow_messages, "responses": grow_responses, "chat": grow_chat, "gemini": grow_gemini}


def grow(src, dst, n):
    v = json.load(open(src, encoding="utf-8"))
    GROW[dialect_of(src)](v, n)
    text = json.dumps(v, separators=(",", ":"), ensure_ascii=False)
    open(dst, "w", encoding="utf-8").write(text)
    print(f"{dst}: {len(text.encode()) / 1000:.1f} KB ({os.path.getsize(src) / 1000:.1f} KB + {n} turns)")


if __name__ == "__main__":
    if sys.argv[1:] == ["--all"]:
        here = os.path.dirname(os.path.abspath(__file__))
        for src in sorted(glob.glob(f"{here}/*_*.json")):
            if not src.endswith("_history.json"):
                grow(src, src.removesuffix(".json") + "_history.json", 30)
    else:
        grow(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 30)
