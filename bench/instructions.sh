#!/usr/bin/env bash
# Instructions per request: the proxy under callgrind, in front of the fast
# fake provider, serving load.sh's request. Unlike req/s on a shared
# machine (runs move by 20%), the count moves by well under 1% between
# runs, so it shows what a change costs per request. User space only: a
# system call counts as the instructions that make it.
#
#   bench/instructions.sh                        # this tree, code mode, RUST_LOG=warn
#   MODE=native LOG=info bench/instructions.sh   # native mode, access log on
#   bench/instructions.sh /tmp/old-proxy ./target/release/codemode-proxy
#   EXTRA_TOOLS=60 bench/instructions.sh         # an agent-sized tool set (bench/request.py)
#   EXTRA_TURNS=40 bench/instructions.sh         # an agent-sized history
#   REQUEST=bench/requests/claude_messages.json bench/instructions.sh  # an agent's own request
#   TOP=25 REQUEST=... bench/instructions.sh     # and the 25 functions that spend the most
#   NO_BUILD=1 bench/instructions.sh /tmp/a /tmp/b  # builds measured as given, this tree not built
#
# REQUEST=FILE sends FILE (a request body; bench/requests/ holds agents'
# captured ones) on its dialect's route with its headers (bench/dialects.py):
# the dialect its name ends in (`<agent>_<dialect>[_history].json`), or
# DIALECT=chat|responses|messages|gemini. It is sent without "stream" (the
# fake provider answers in the dialect's JSON); EXTRA_* do not apply to it.
#
# Each binary serves 3 s of warm-up, then counts over 10 s of 4 connections.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${MODE:-code}
LOG=${LOG:-warn}
if ! command -v valgrind >/dev/null || ! command -v wrk >/dev/null; then
    apt-get update -qq && apt-get install -y -qq valgrind wrk >/dev/null
fi
[ -n "${NO_BUILD:-}" ] || cargo build --release --quiet --bin codemode-proxy --example fake_provider
BINS=("$@")
[ ${#BINS[@]} -gt 0 ] || BINS=(./target/release/codemode-proxy)

WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
PROVIDER=127.0.0.1:19110
PROXY=127.0.0.1:19111
./target/release/examples/fake_provider "$PROVIDER" 200 5 >/dev/null &
PIDS+=($!)

if [ -n "${REQUEST:-}" ]; then
    dialect=$(python3 bench/dialects.py request "$REQUEST" "$WORK")
    cp "$WORK/req/$dialect.json" "$WORK/body.json"
    cp "$WORK/req/$dialect.lua" "$WORK/post.lua"
    ROUTE=$(python3 bench/dialects.py path "$dialect")
    mapfile -t HEADERS < <(python3 bench/dialects.py headers "$dialect" | sed 's/^/-H\n/')
else
    python3 bench/request.py "$WORK"
    ROUTE=v1/chat/completions
    HEADERS=(-H 'content-type: application/json')
fi

for bin in "${BINS[@]}"; do
    out="$WORK/callgrind.out"
    rm -f "$out"*
    RUST_LOG=$LOG CODEMODE_WORKER_THREADS=1 CODEMODE_LISTEN=$PROXY CODEMODE_UPSTREAM=http://$PROVIDER/v1 CODEMODE_MODE=$MODE \
        CODEMODE_ANTHROPIC_UPSTREAM=http://$PROVIDER/v1 CODEMODE_GEMINI_UPSTREAM=http://$PROVIDER \
        valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" >/dev/null 2>"$WORK/proxy.log" &
    pid=$!
    for _ in $(seq 120); do
        curl -sf -o /dev/null -d @"$WORK/body.json" "${HEADERS[@]}" "http://$PROXY/$ROUTE" && break
        sleep 0.5
    done
    wrk -t1 -c4 -d3s -s "$WORK/post.lua" "http://$PROXY/$ROUTE" >/dev/null
    callgrind_control -z "$pid" >/dev/null 2>&1
    load=$(wrk -t1 -c4 -d10s --timeout 5s -s "$WORK/post.lua" "http://$PROXY/$ROUTE")
    requests=$(awk '/requests in/ {print $1}' <<< "$load")
    callgrind_control -d "$pid" >/dev/null 2>&1
    kill "$pid"; wait "$pid" 2>/dev/null || true
    if grep -qE 'Non-2xx|Socket errors' <<< "$load"; then
        echo "$bin: errors under load:" >&2; echo "$load" >&2; tail -5 "$WORK/proxy.log" >&2; exit 1
    fi
    # The dump taken after the load, not the one written at exit.
    dump=$(ls -S "$out".* | head -1)
    [ -z "${KEEP:-}" ] || cp "$dump" "$KEEP"
    total=$(callgrind_annotate "$dump" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
    echo "$bin mode=$MODE RUST_LOG=$LOG${REQUEST:+ REQUEST=$REQUEST}: $requests requests, $((total / requests)) instructions per request"
    if [ -n "${TOP:-}" ]; then
        # Each function's own instructions per request, the most first (the
        # threads' entry points, which hold everything, left out).
        callgrind_annotate --inclusive=no --threshold=100 --auto=no "$dump" 2>/dev/null \
            | awk -v n="$TOP" -v r="$requests" -v t="$total" '
                /file:function/ { table = 1; next }
                table && $1 ~ /^[0-9,]+$/ && shown < n {
                    c = $1; gsub(",", "", c); c += 0
                    if (c >= t * 0.99) next
                    line = $0; sub(/^ *[0-9,]+ +\( *[0-9.]+%\) +/, "", line)
                    printf "%10d  %s\n", c / r, substr(line, 1, 160); shown++ }'
    fi
done
