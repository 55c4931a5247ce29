#!/usr/bin/env bash
# Value on real agents (issue 26, part 1): what Code Mode saves on scripted
# multi-step tasks that the REAL, unmodified agents run on a scratch
# workspace, in native and in code mode, against a scripted model.
#
#   bench/value.sh                                   # all agents, all tasks (about 4 min)
#   PROXY_BIN=/path/to/codemode-proxy bench/value.sh
#   AGENTS="claude codex" TASKS="sequential" bench/value.sh
#   KEEP=1 bench/value.sh                            # keep the temp dir (logs, request bodies)
#   SDK=full bench/value.sh                          # code mode with one SDK rendering (CODEMODE_SDK;
#                                                    # the proxy's default, auto, unless set)
#
# - Agents: Claude Code (`claude -p`, Messages), Codex (`codex exec`,
#   Responses), opencode (`opencode run`, Chat Completions), gemini-cli
#   (`gemini -p`, the Gemini API, model gemini-2.5-pro), installed by
#   tests/agents/install.sh (pinned in tests/agents/package.json) and driven
#   by tests/agents/{claude,codex,opencode,gemini}.mjs: isolated HOME,
#   offline, tools run without prompts, in the task's temp workspace.
# - Tasks: `sequential` (six files of about 1 KB, each naming the next; the
#   secret is in the last), `fanout` (which of 20 files of about
#   FANOUT_LINES=60 lines, 3 KB, hold a TODO, and how many), `edit` (read
#   config.ini, change `retries` to 5, run `sh check.sh`, report its line).
#   Every answer is checked (secret / count and names / check line and the
#   file on disk); a wrong one fails the script (exit 1) after the table.
# - The model: bench/value_model.py (Python standard library), a state
#   machine over each request's conversation that plays a competent model
#   fairly: native mode batches independent calls in one turn (the 20 reads
#   of fanout are 20 parallel calls) and makes one turn per dependent step;
#   code mode writes one run_code program (loops, Promise.all over the SDK's
#   `tools.<name>`) and answers with its result. It uses each agent's own
#   tools: Claude Code Read/Edit/Bash, Codex exec_command/apply_patch,
#   opencode read/edit/bash, gemini-cli read_file/replace/run_shell_command.
# - Each run gets a fresh model and a fresh proxy (PROXY_BIN, default
#   ./target/release/codemode-proxy, built only when PROXY_BIN is unset and
#   the binary is missing) with CODEMODE_MODE=native|code,
#   CODEMODE_RUNTIME=embedded and CODEMODE_SDK=$SDK (auto, the proxy's
#   default, unless set; it changes code mode only).
#
# Counting rules (also printed under the table):
# - round trips: model requests the provider received for the task loop;
#   side requests (opencode's title; any request without tools, such as
#   gemini-cli's model router under `-m auto`) are shown in brackets and
#   left out of the ratio (they run beside the first turn, the same in both
#   modes).
# - prompt bytes: the request bodies the provider received, all requests;
#   prompt tokens = bytes / 4.
# - results kept out: the proxy's codemode_context_bytes_saved_total (the
#   nested results' bytes the agent returned minus the run_code result the
#   model saw); results in context: tool-result bytes in the last request.
# - cost: each request's prompt, with the part shared with an earlier
#   request (tools, system, turns in provider order) cached; prices in
#   $/MTok: Anthropic (Claude Sonnet 4.5) input 3, cache write 3.75
#   (1.25x, every uncached token is written: Claude Code marks the last
#   turn), cache read 0.30 (0.1x), output 15; OpenAI (GPT-5 family, for
#   Codex and opencode) input 1.25, cached input 0.125 (0.1x; only prefixes
#   of 1024+ tokens, in 128-token steps), output 10; Google (Gemini 2.5 Pro,
#   prompts up to 200k tokens, for gemini-cli) input 1.25, cached input
#   0.125 (0.1x, implicit caching: no write charge; only prefixes of 2048+
#   tokens, Google's documented minimum for 2.5 Pro, and whole, as Google
#   documents no step; Google promises no hit, so this is the best case),
#   output 10. Output tokens are the bytes the model wrote / 4.
#
# The last line reads
#   value: round trips N.Nx fewer (sequential), prompt tokens NN% fewer (worst of sequential and fan-out)
# taking the worst agent for each figure.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
T0=$(date +%s)
AGENTS=${AGENTS:-claude codex opencode gemini}
TASKS=${TASKS:-sequential fanout edit}
FANOUT_LINES=${FANOUT_LINES:-60}
SDK=${SDK:-auto}
AGENT_TIMEOUT_MS=${AGENT_TIMEOUT_MS:-180000}

if [ -z "${PROXY_BIN:-}" ]; then
    PROXY_BIN=./target/release/codemode-proxy
    [ -x "$PROXY_BIN" ] || cargo build --release --bin codemode-proxy
fi
[ -x "$PROXY_BIN" ] || { echo "value: no proxy binary at $PROXY_BIN" >&2; exit 1; }
PROXY_BIN=$(cd "$(dirname "$PROXY_BIN")" && pwd)/$(basename "$PROXY_BIN")
command -v node >/dev/null || { echo "value: needs node (for the agents)" >&2; exit 1; }

echo "value: SDK=$SDK, $(echo $AGENTS | wc -w) agents x $(echo $TASKS | wc -w) tasks x 2 modes; about 3 minutes on 2 cores once the agents are installed (about 90 s more to install them)" >&2
tests/agents/install.sh >&2

WORK=$(mktemp -d "${TMPDIR:-/tmp}/cm-value.XXXXXX")
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [ -n "${KEEP:-}" ]; then echo "value: kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

wait_for() { # wait_for TEST... : up to 10 s
    for _ in $(seq 100); do "$@" && return 0; sleep 0.1; done
    return 1
}

# make_task TASK DIR: writes the workspace, prints the prompt; the answer's
# expectations go to DIR/../expect.json (outside the workspace).
make_task() {
    python3 - "$1" "$2" "$FANOUT_LINES" <<'PY'
import json, os, random, sys
task, d, lines = sys.argv[1], sys.argv[2], int(sys.argv[3])
rnd = random.Random(f"{task}-{os.getpid()}")
os.makedirs(d, exist_ok=True)
def filler(n, tag):
    return "".join(f"{tag} line {i}: the quick brown fox jumps over the lazy dog, {rnd.randrange(10**6)}\n" for i in range(n))
expect = {}
if task == "sequential":
    names = ["start.txt"] + [f"part{rnd.randrange(100, 1000)}-{i}.txt" for i in range(5)]
    secret = f"kumquat-{rnd.randrange(10**6)}"
    for i, n in enumerate(names):
        body = filler(12, "notes")
        body += f"next: {names[i + 1]}\n" if i + 1 < len(names) else f"the secret is {secret}\n"
        open(os.path.join(d, n), "w").write(body)
    expect = {"all": [secret]}
    prompt = f"Task sequential in {d}: start.txt names the next file with a line 'next: FILE', and so on; the last file holds a secret. What is the secret?"
elif task == "fanout":
    files = [f"note{i:02d}.txt" for i in range(1, 21)]
    hits = sorted(rnd.sample(files, rnd.randrange(4, 12)))
    for f in files:
        body = filler(lines, "// code")
        if f in hits:
            at = body.index("\n", len(body) // 2) + 1
            body = body[:at] + "// TODO: handle the empty case\n" + body[at:]
        open(os.path.join(d, f), "w").write(body)
    expect = {"all": [f"{len(hits)} files hold a TODO"] + hits, "none": [f for f in files if f not in hits]}
    prompt = f"Task fanout in {d}: which of the files note01.txt to note20.txt hold a TODO, and how many are they?"
elif task == "edit":
    open(os.path.join(d, "config.ini"), "w").write(
        "[server]\nhost = 127.0.0.1\nport = 8080\nretries = 3\ntimeout_ms = 2500\n\n[log]\nlevel = info\n")
    open(os.path.join(d, "check.sh"), "w").write(
        "#!/bin/sh\n# Checks config.ini: retries must be 5.\n"
        "r=$(sed -n 's/^retries = //p' config.ini)\n"
        "if [ \"$r\" = 5 ]; then echo \"CHECK OK retries=$r lines=$(wc -l < config.ini)\"; "
        "else echo \"CHECK FAILED retries=$r\"; exit 1; fi\n")
    expect = {"all": ["CHECK OK retries=5 lines=8"], "file": ["config.ini", "retries = 5\n"]}
    prompt = f"Task edit in {d}: set retries to 5 in config.ini, then run `sh check.sh` and tell me its output."
json.dump(expect, open(os.path.join(d, "..", "expect.json"), "w"))
print(prompt)
PY
}

# run_one AGENT TASK MODE: one run with its own model and proxy; writes
# $WORK/AGENT-TASK-MODE/{model.jsonl,agent.json,metrics.txt,wall}.
run_one() {
    local agent=$1 task=$2 mode=$3
    local run="$WORK/$agent-$task-$mode"
    mkdir -p "$run"
    local prompt
    prompt=$(make_task "$task" "$run/ws")
    python3 "$ROOT/bench/value_model.py" --port-file "$run/model.port" --log "$run/model.jsonl" \
        ${KEEP:+--dump "$run"} &
    local model_pid=$!
    PIDS+=("$model_pid")
    wait_for test -s "$run/model.port" || { echo "value: the model did not start" >&2; exit 1; }
    local mport pport
    mport=$(cat "$run/model.port")
    pport=$(free_port)
    CODEMODE_LISTEN=127.0.0.1:$pport \
        CODEMODE_UPSTREAM=http://127.0.0.1:$mport/v1 \
        CODEMODE_ANTHROPIC_UPSTREAM=http://127.0.0.1:$mport/v1 \
        CODEMODE_GEMINI_UPSTREAM=http://127.0.0.1:$mport \
        CODEMODE_MODE=$mode CODEMODE_RUNTIME=embedded CODEMODE_SDK=$SDK RUST_LOG=info \
        "$PROXY_BIN" >"$run/proxy.log" 2>&1 &
    local proxy_pid=$!
    PIDS+=("$proxy_pid")
    wait_for curl -sf "http://127.0.0.1:$pport/healthz" -o /dev/null \
        || { echo "value: the proxy did not start:" >&2; cat "$run/proxy.log" >&2; exit 1; }
    local base="http://127.0.0.1:$pport/v1"
    # Claude Code and gemini-cli take the server root (they append
    # /v1/messages and /v1beta/models/...).
    case $agent in claude | gemini) base="http://127.0.0.1:$pport" ;; esac
    local s e
    s=$(date +%s%N)
    AGENT_BASE_URL=$base AGENT_DIR="$run/ws" AGENT_TIMEOUT_MS=$AGENT_TIMEOUT_MS \
        AGENT_PROMPTS=$(python3 -c 'import json,sys; print(json.dumps([sys.argv[1]]))' "$prompt") \
        node "$ROOT/tests/agents/$agent.mjs" >"$run/agent.json" 2>"$run/agent.err" &
    local agent_pid=$!
    PIDS+=("$agent_pid")
    wait "$agent_pid" || true
    e=$(date +%s%N)
    echo $(( (e - s) / 1000000 )) >"$run/wall_ms"
    curl -sf "http://127.0.0.1:$pport/metrics" >"$run/metrics.txt" || true
    kill "$proxy_pid" "$model_pid" 2>/dev/null || true
    wait "$proxy_pid" "$model_pid" 2>/dev/null || true
    PIDS=()
    echo "value: $agent $task $mode: $(( (e - s) / 1000000 )) ms" >&2
}

for agent in $AGENTS; do
    for task in $TASKS; do
        for mode in native code; do
            run_one "$agent" "$task" "$mode"
        done
    done
done

status=0
python3 - "$WORK" "$AGENTS" "$TASKS" "$(( $(date +%s) - T0 ))" <<'PY' || status=$?
import json, os, re, sys
work, agents, tasks, took = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4]
NAMES = {"claude": "Claude Code", "codex": "Codex", "opencode": "opencode", "gemini": "gemini-cli"}
PRICE = {  # $/MTok: input, cache write, cache read, output
    "claude": (3.0, 3.75, 0.30, 15.0),
    "codex": (1.25, 1.25, 0.125, 10.0),
    "opencode": (1.25, 1.25, 0.125, 10.0),
    "gemini": (1.25, 1.25, 0.125, 10.0),
}

def metric(text, series):
    m = re.search(rf"^{re.escape(series)} ([0-9.e+]+)$", text, re.M)
    return int(float(m.group(1))) if m else 0

def measure(agent, task, mode):
    run = os.path.join(work, f"{agent}-{task}-{mode}")
    recs = [json.loads(l) for l in open(os.path.join(run, "model.jsonl"))] if os.path.exists(os.path.join(run, "model.jsonl")) else []
    reqs = [r for r in recs if not r["count_tokens"]]
    loop = [r for r in reqs if not r["side"]]
    pin, pw, pr, pout = PRICE[agent]
    cost = plain = 0.0
    for r in reqs:
        toks, cached, out = r["bytes"] / 4, r["prefix_bytes"] / 4, r["out_bytes"] / 4
        if agent == "gemini":
            cached = cached if cached >= 2048 else 0
        elif agent != "claude":
            cached = (cached // 128) * 128 if cached >= 1024 else 0
        cost += (cached * pr + (toks - cached) * pw + out * pout) / 1e6
        plain += (toks * pin + out * pout) / 1e6
    metrics = open(os.path.join(run, "metrics.txt")).read() if os.path.exists(os.path.join(run, "metrics.txt")) else ""
    try:
        report = json.load(open(os.path.join(run, "agent.json")))
    except ValueError:
        report = {"final": "", "error": "no report: " + open(os.path.join(run, "agent.err")).read()[-1500:]}
    expect = json.load(open(os.path.join(run, "expect.json")))
    final = report.get("final") or ""
    problems = []
    if report.get("error"):
        problems.append(f"agent error: {report['error']}")
    problems += [f"answer lacks {x!r}" for x in expect.get("all", []) if x not in final]
    problems += [f"answer names {x!r}" for x in expect.get("none", []) if x in final]
    if "file" in expect:
        f, want = expect["file"]
        if want not in open(os.path.join(run, "ws", f)).read():
            problems.append(f"{f} lacks {want!r}")
    if mode == "code" and metric(metrics, 'codemode_executions_total{outcome="ok"}') == 0:
        problems.append("no program ran")
    return {
        "loop": len(loop), "side": len(reqs) - len(loop),
        "bytes": sum(r["bytes"] for r in reqs), "tokens": sum(r["bytes"] for r in reqs) // 4,
        "in_context": loop[-1]["result_bytes"] if loop else 0,
        "kept_out": metric(metrics, "codemode_context_bytes_saved_total"),
        "nested": metric(metrics, "codemode_nested_calls_total"),
        "cost": cost, "plain": plain,
        "wall": int(open(os.path.join(run, "wall_ms")).read()) / 1000,
        "final": final, "problems": problems,
        "first": (loop[0]["bytes"], loop[0]["tools"]) if loop else (0, 0),
    }

R = {(a, t, m): measure(a, t, m) for a in agents for t in tasks for m in ("native", "code")}
print("| agent | task | mode | round trips (+side) | prompt bytes | prompt tokens | tool results in context (B) | kept out of context (B) | cost, cached ($) | cost, no cache ($) | wall (s) | answer |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
fails = []
for a in agents:
    for t in tasks:
        for m in ("native", "code"):
            r = R[(a, t, m)]
            side = f" (+{r['side']})" if r["side"] else ""
            ok = "ok" if not r["problems"] else "WRONG"
            if r["problems"]:
                fails.append(f"{a} {t} {m}: {'; '.join(r['problems'])}; answer was {r['final'][:300]!r}")
            kept = f"{r['kept_out']:,} ({r['nested']} nested calls)" if m == "code" else "0"
            print(f"| {NAMES[a]} | {t} | {m} | {r['loop']}{side} | {r['bytes']:,} | {r['tokens']:,} | {r['in_context']:,} | {kept} | {r['cost']:.4f} | {r['plain']:.4f} | {r['wall']:.1f} | {ok} |")
print()
print("| agent | task | round trips | prompt tokens | cost, cached | cost, no cache |")
print("|---|---|---:|---:|---:|---:|")
rt_seq, tok = [], []
for a in agents:
    for t in tasks:
        n, c = R[(a, t, "native")], R[(a, t, "code")]
        if not (n["loop"] and c["loop"] and n["tokens"] and n["cost"]):
            print(f"| {NAMES[a]} | {t} | n/a | n/a | n/a | n/a |")
            continue
        ratio = n["loop"] / c["loop"]
        fewer = 1 - c["tokens"] / n["tokens"]
        dc, dp = 1 - c["cost"] / n["cost"], 1 - c["plain"] / n["plain"]
        print(f"| {NAMES[a]} | {t} | {ratio:.1f}x fewer | {fewer:.0%} fewer | {dc:.0%} less | {dp:.0%} less |")
        if t == "sequential":
            rt_seq.append(ratio)
        if t in ("sequential", "fanout"):
            tok.append(fewer)
print()
print("The fixed prefix: the first request of the task loop (tools, system prompt, the user's task), bytes and tools on the wire.")
print()
print("| agent | native | code | change |")
print("|---|---:|---:|---:|")
for a in agents:
    (nb, nt), (cb, ct) = R[(a, tasks[0], "native")]["first"], R[(a, tasks[0], "code")]["first"]
    change = f"{cb / nb - 1:+.0%}" if nb else "n/a"
    tools = lambda n: f"{n} tool" + ("s" if n != 1 else "")
    print(f"| {NAMES[a]} | {nb:,} B, {tools(nt)} | {cb:,} B, {tools(ct)} | {change} |")
print()
print("Round trips: the task loop's model requests (side requests, opencode's title or any request without tools, in brackets).")
print("Prompt bytes: request bodies the provider received, every request; prompt tokens = bytes / 4.")
print("Kept out of context: the proxy's codemode_context_bytes_saved_total (nested results minus the run_code result).")
print("Cost: each request's prefix shared with an earlier request is cached; Anthropic $/MTok in 3, write 3.75, read 0.30, out 15;")
print("OpenAI (GPT-5 family) in 1.25, cached 0.125 (prefixes of 1024+ tokens, 128-token steps), out 10;")
print("Google (Gemini 2.5 Pro) in 1.25, cached 0.125 (implicit caching, prefixes of 2048+ tokens, best case), out 10.")
print(f"Took {took} s on {os.cpu_count()} CPUs.")
for f in fails:
    print(f"value: FAILED {f}", file=sys.stderr)
rt = f"{min(rt_seq):.1f}x" if rt_seq else "n/a"
tk = f"{min(tok) * 100:.0f}%" if tok else "n/a"
print(f"value: round trips {rt} fewer (sequential), prompt tokens {tk} fewer (worst of sequential and fan-out)")
sys.exit(1 if fails else 0)
PY
exit "$status"
