#!/usr/bin/env bash
# Interleaved A/B of two proxy builds on every dialect, native and code
# mode, at 32 connections, against the static nginx upstream of
# bench/load.sh: each proxy's own CPU time per request (from /proc), A and
# B measured back to back in every round so the machine's drift falls
# alike on both (which side goes first alternates by round: with B always
# second, B came out 2-9% cheaper on paths neither build had changed); the report gives each side's minimum and median and the
# median of the paired B/A ratios.
#
#   A_BIN=/tmp/old/codemode-proxy B_BIN=./target/release/codemode-proxy bench/ab_dialects.sh
#   REQUEST=bench/requests/claude_messages.json A_BIN=... bench/ab_dialects.sh  # an agent's request
#
# REQUEST=FILE: FILE's dialect only (bench/load.sh's REQUEST), sending FILE.
#
# ROUNDS (10) rounds of DURATION (2) seconds per dialect, mode and side:
# about 5 minutes. The proxies run on CPU 0; wrk and the upstream on CPU 1.
set -euo pipefail
cd "$(dirname "$0")/.."
A_BIN=${A_BIN:?set A_BIN to the first build}
B_BIN=${B_BIN:-./target/release/codemode-proxy}
ROUNDS=${ROUNDS:-10}
DURATION=${DURATION:-2}
BASE_PORT=${BASE_PORT:-19340}
if ! command -v nginx >/dev/null || ! command -v wrk >/dev/null; then
    apt-get update -qq && apt-get install -y -qq nginx wrk >/dev/null
fi
W=$(mktemp -d)
chmod 755 "$W"
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT
python3 bench/dialects.py write "$W"
DIALECTS=(chat responses messages gemini)
if [ -n "${REQUEST:-}" ]; then DIALECTS=("$(python3 bench/dialects.py request "$REQUEST" "$W")"); fi
chmod -R a+rX "$W"
mkdir -p "$W/logs"
cat > "$W/nginx.conf" <<NGINX
worker_processes 1;
pid $W/nginx.pid;
error_log $W/logs/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    client_body_buffer_size 1m;
    etag off;
    server {
        listen 127.0.0.1:$BASE_PORT backlog=4096;
        location ~ ^/v1(beta)?/ { rewrite ^ /json\$uri last; }
        location /json/ { internal; error_page 405 =200 \$uri; root $W/static; types { } default_type application/json; }
    }
}
NGINX
nginx -p "$W" -c "$W/nginx.conf" -g 'daemon off;' &
PIDS+=($!)
declare -A PORT PID
port=$((BASE_PORT + 1))
for side in A B; do
    for mode in native code; do
        bin=A_BIN; [ "$side" = B ] && bin=B_BIN
        RUST_LOG=warn CODEMODE_WORKER_THREADS=1 CODEMODE_LISTEN=127.0.0.1:$port CODEMODE_MODE=$mode \
            CODEMODE_UPSTREAM=http://127.0.0.1:$BASE_PORT/v1 CODEMODE_ANTHROPIC_UPSTREAM=http://127.0.0.1:$BASE_PORT/v1 \
            CODEMODE_GEMINI_UPSTREAM=http://127.0.0.1:$BASE_PORT "${!bin}" >/dev/null 2>&1 &
        PIDS+=($!)
        PID[$side$mode]=$!
        PORT[$side$mode]=$port
        port=$((port + 1))
    done
done
sleep 1
for k in "${!PID[@]}"; do taskset -a -pc 0 "${PID[$k]}" >/dev/null; done
for p in "${PIDS[0]}" $(pgrep -P "${PIDS[0]}"); do taskset -a -pc 1 "$p" >/dev/null; done
declare -A PATHS
for d in "${DIALECTS[@]}"; do PATHS[$d]=$(python3 bench/dialects.py path "$d"); done
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
run() {  # dialect key seconds
    taskset -c 1 wrk -t1 -c32 -d"$3"s -s "$W/req/$1.lua" "http://127.0.0.1:${PORT[$2]}/${PATHS[$1]}"
}
for d in "${DIALECTS[@]}"; do for k in "${!PID[@]}"; do run "$d" "$k" 1 >/dev/null; done; done
HZ=$(getconf CLK_TCK)
for r in $(seq "$ROUNDS"); do
    echo "round $r/$ROUNDS; $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    sides="A B"; [ $((r % 2)) = 0 ] && sides="B A"  # neither side always goes first
    for d in "${DIALECTS[@]}"; do for mode in native code; do for side in $sides; do
        k=$side$mode
        c0=$(ticks "${PID[$k]}")
        out=$(run "$d" "$k" "$DURATION")
        c1=$(ticks "${PID[$k]}")
        if grep -qE 'Non-2xx|Socket errors' <<< "$out"; then echo "$d $mode $side: errors under load" >&2; exit 1; fi
        n=$(awk '/ requests in /{print $1}' <<< "$out")
        echo "$d $mode $side $(( (c1 - c0) * 1000000 / HZ )) $n" >> "$W/results"
    done; done; done
done
python3 - "$W/results" "${DIALECTS[@]}" <<'PY'
import sys
from collections import defaultdict
from statistics import median
us = defaultdict(list)
for line in open(sys.argv[1]):
    d, mode, side, cpu, n = line.split()
    us[(d, mode, side)].append(int(cpu) / int(n))
print("| dialect | mode | A min | B min | A median | B median | paired B/A (median) |")
print("|---|---|---|---|---|---|---|")
for d in sys.argv[2:]:
    for mode in ("native", "code"):
        a, b = us[(d, mode, "A")], us[(d, mode, "B")]
        ratio = median(y / x for x, y in zip(a, b))
        print(f"| {d} | {mode} | {min(a):.1f} µs | {min(b):.1f} µs | {median(a):.1f} µs | {median(b):.1f} µs | {ratio:.3f}x |")
PY
