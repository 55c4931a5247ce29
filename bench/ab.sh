#!/usr/bin/env bash
# Interleaved A/B of two proxy builds in code mode at 32 connections:
# throughput and each proxy's own CPU time per request (from /proc), so
# the machine's drift falls alike on both.
#
#   A_BIN=/tmp/old/codemode-proxy B_BIN=./target/release/codemode-proxy bench/ab.sh
#
# A_ENV and B_ENV add variables to one side (one build twice, one setting
# changed): A_BIN=target/release/codemode-proxy \
#   B_ENV="CODEMODE_ADMIN_TOKEN=0123456789abcdef0123" bench/ab.sh
#
# Both proxies share CPU 0 (one loaded at a time); wrk and the provider run
# on CPU 1. ROUNDS (5) rounds of DURATION (8) seconds each. PROGRAM=1: every
# request runs a program (the provider answers `run_code` first), as
#   A_BIN=target/release/codemode-proxy A_ENV="CODEMODE_SANDBOX=in-process" PROGRAM=1 bench/ab.sh
# CPU counts the proxy's children too (its sandbox workers).
#
# MODE (code) is the proxies' CODEMODE_MODE, CONNECTIONS (32) wrk's. THREADS
# (1) is their CODEMODE_WORKER_THREADS; above 1 nothing is pinned (the
# proxy's threads, wrk and the provider share every CPU), as for the two
# schedulers on two threads:
#   A_BIN=target/release/codemode-proxy A_ENV=CODEMODE_SCHEDULER=shared \
#     THREADS=2 CONNECTIONS=1 MODE=native bench/ab.sh
set -euo pipefail
cd "$(dirname "$0")/.."
A_BIN=${A_BIN:?set A_BIN to the first build}
B_BIN=${B_BIN:-./target/release/codemode-proxy}
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-8}
MODE=${MODE:-code}
CONNECTIONS=${CONNECTIONS:-32}
THREADS=${THREADS:-1}
# Pinned (one thread): the proxies on CPU 0 (below), the load on CPU 1.
if [ "$THREADS" = 1 ]; then ON1=(taskset -c 1); else ON1=(); fi
if ! command -v wrk >/dev/null; then apt-get update -qq && apt-get install -y -qq wrk >/dev/null; fi
cargo build --release --quiet --example fake_provider
W=$(mktemp -d)
./target/release/examples/fake_provider 127.0.0.1:19200 200 5 ${PROGRAM:+program} >/dev/null &
P=$!
start() {
    # shellcheck disable=SC2086 # $3 is a list of VAR=value words
    env $3 RUST_LOG=warn CODEMODE_WORKER_THREADS=$THREADS CODEMODE_LISTEN=127.0.0.1:$2 \
        CODEMODE_UPSTREAM=http://127.0.0.1:19200/v1 CODEMODE_MODE=$MODE "$1" >/dev/null 2>&1 &
    echo $!
}
A=$(start "$A_BIN" 19201 "${A_ENV:-}")
B=$(start "$B_BIN" 19202 "${B_ENV:-}")
trap 'kill $P $A $B 2>/dev/null; rm -rf "$W"' EXIT
sleep 1
python3 bench/request.py "$W"
if [ "$THREADS" = 1 ]; then
    taskset -a -pc 0 "$A" >/dev/null; taskset -a -pc 0 "$B" >/dev/null; taskset -a -pc 1 "$P" >/dev/null
    # Sandbox workers started before the pinning go to CPU 0 with their proxy.
    for c in $(pgrep -P "$A") $(pgrep -P "$B"); do taskset -a -pc 0 "$c" >/dev/null; done
fi
# The proxy and its children: a sandbox worker's CPU is the proxy's cost.
cpu_ticks() {
    local t=0 p
    for p in "$1" $(pgrep -P "$1"); do
        t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
    done
    echo "$t"
}
for port in 19201 19202; do
    curl -sf -o /dev/null -d @"$W/body.json" -H 'content-type: application/json' "http://127.0.0.1:$port/v1/chat/completions"
done
hz=$(getconf CLK_TCK)
for round in $(seq "$ROUNDS"); do
    for pair in "A $A 19201" "B $B 19202"; do
        set -- $pair
        c0=$(cpu_ticks "$2")
        out=$("${ON1[@]}" wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --latency -s "$W/post.lua" "http://127.0.0.1:$3/v1/chat/completions")
        c1=$(cpu_ticks "$2")
        rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
        reqs=$(echo "$out" | awk '/requests in/ {print $1}')
        p50=$(echo "$out" | awk '$1 == "50%" {print $2}')
        echo "$1 round $round: $rps req/s, p50 $p50, $(python3 -c "print(round(($c1 - $c0) * 1e6 / $hz / $reqs, 1))") us CPU/request"
    done
done
