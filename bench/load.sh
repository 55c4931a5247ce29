#!/usr/bin/env bash
# Load benchmark: a direct connection, nginx proxy_pass and codemode-proxy
# (native and code mode) against the same fast fake provider, in one run.
#
#   bench/load.sh            # RUNS=3 DURATION=8 by default
#   PROXY_LOG=info bench/load.sh                   # access log on (to $WORK/proxy.log)
#   PROXY_BIN=/path/to/old/codemode-proxy bench/load.sh   # another build, same run setup
#
# Prints markdown tables (medians of RUNS) and ratios. Needs root for
# apt-get on a fresh machine; everything else it starts itself and stops.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
# The proxy's RUST_LOG: `info` writes one access-log line per request.
PROXY_LOG=${PROXY_LOG:-warn}
PROXY_BIN=${PROXY_BIN:-./target/release/codemode-proxy}
DURATION=${DURATION:-8}
STREAM_RUNS=${STREAM_RUNS:-7}
if [ "$(nproc)" -lt 2 ]; then echo "needs 2 CPUs for the pinned scenarios" >&2; exit 1; fi

if ! command -v nginx >/dev/null || ! command -v wrk >/dev/null; then
    apt-get update -qq && apt-get install -y -qq nginx wrk >/dev/null
fi
cargo build --release --quiet --bin codemode-proxy --example fake_provider

WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

PROVIDER=127.0.0.1:19100
NGINX=127.0.0.1:19101
NATIVE=127.0.0.1:19102
CODE=127.0.0.1:19103

./target/release/examples/fake_provider "$PROVIDER" 200 5 >/dev/null &
PIDS+=($!)
mkdir -p "$WORK/nginx/logs"
cat > "$WORK/nginx/nginx.conf" <<NGINX
worker_processes 1;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/logs/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    upstream provider { server $PROVIDER; keepalive 64; }
    server {
        listen $NGINX;
        location / {
            proxy_pass http://provider;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            client_max_body_size 16m;
        }
    }
}
NGINX
nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -g 'daemon off;' &
PIDS+=($!)
# One worker thread each, as nginx runs one worker process.
RUST_LOG=$PROXY_LOG CODEMODE_WORKER_THREADS=1 CODEMODE_LISTEN=$NATIVE CODEMODE_UPSTREAM=http://$PROVIDER/v1 CODEMODE_MODE=native \
    "$PROXY_BIN" >/dev/null 2>>"$WORK/proxy.log" &
PIDS+=($!)
RUST_LOG=$PROXY_LOG CODEMODE_WORKER_THREADS=1 CODEMODE_LISTEN=$CODE CODEMODE_UPSTREAM=http://$PROVIDER/v1 CODEMODE_MODE=code \
    "$PROXY_BIN" >/dev/null 2>>"$WORK/proxy.log" &
PIDS+=($!)
sleep 1

# A realistic request: system prompt, four tools, one user message.
python3 bench/request.py "$WORK"

# Pins every thread of the servers; the provider moves with the load generator.
pin() { for p in "${PIDS[@]}"; do taskset -a -pc "$1" "$p" >/dev/null; done; }
pin_provider() { taskset -a -pc "$1" "${PIDS[0]}" >/dev/null; }

declare -A URL=([direct]=$PROVIDER [nginx]=$NGINX [native]=$NATIVE [code]=$CODE)
TARGETS=(direct nginx native code)
RESULTS="$WORK/results.txt"
: > "$RESULTS"

for t in "${TARGETS[@]}"; do  # warm-up, and a check that every target answers
    curl -sf -o /dev/null -d @"$WORK/body.json" -H 'content-type: application/json' "http://${URL[$t]}/v1/chat/completions" \
        || { echo "$t does not answer" >&2; exit 1; }
done

wrk_run() {  # scenario target cpu connections
    local out
    out=$(taskset -c "$3" wrk -t1 -c"$4" -d"${DURATION}s" --latency -s "$WORK/post.lua" "http://${URL[$2]}/v1/chat/completions")
    echo "$out" | awk -v s="$1" -v t="$2" '
        /Requests\/sec/ {rps=$2}
        /^ +50%/ {p50=$2} /^ +99%/ {p99=$2}
        END {print s, t, rps, p50, p99}' >> "$RESULTS"
}

for run in $(seq "$RUNS"); do
    echo "run $run/$RUNS: serial, one CPU" >&2
    pin 0
    for t in "${TARGETS[@]}"; do wrk_run serial "$t" 0 1; done
    echo "run $run/$RUNS: 32 connections, server on CPU 0, load and provider on CPU 1" >&2
    pin 0; pin_provider 1
    for t in "${TARGETS[@]}"; do wrk_run c32 "$t" 1 32; done
done

echo "streaming: 200 chunks 5 ms apart, time to first and last byte" >&2
pin 0; pin_provider 1
for t in "${TARGETS[@]}"; do
    for i in $(seq "$STREAM_RUNS"); do
        taskset -c 1 curl -sN -o /dev/null -w "stream $t %{time_starttransfer} %{time_total}\n" \
            -d @"$WORK/stream.json" -H 'content-type: application/json' "http://${URL[$t]}/v1/chat/completions" >> "$RESULTS"
    done
done

python3 - "$RESULTS" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
def us(v):
    for unit, f in (("us", 1), ("ms", 1e3), ("s", 1e6)):
        if v.endswith(unit):
            return float(v[: -len(unit)]) * f
    return float(v)
med = statistics.median
targets = ["direct", "nginx", "native", "code"]
for scen, title in (("serial", "Serial, one connection, everything on one CPU"), ("c32", "32 connections, proxy on CPU 0, load and provider on CPU 1")):
    print(f"\n### {title}\n")
    print("| target | req/s | p50 | p99 | added p50 over direct |")
    print("|---|---|---|---|---|")
    stats = {}
    for t in targets:
        r = [x for x in rows if x[0] == scen and x[1] == t]
        rps = med(float(x[2]) for x in r); p50 = med(us(x[3]) for x in r); p99 = med(us(x[4]) for x in r)
        stats[t] = (rps, p50, p99)
    for t in targets:
        rps, p50, p99 = stats[t]
        print(f"| {t} | {rps:,.0f} | {p50:.0f} µs | {p99:.0f} µs | {p50 - stats['direct'][1]:+.0f} µs |")
    nginx_added = stats["nginx"][1] - stats["direct"][1]
    for t in ("native", "code"):
        added = stats[t][1] - stats["direct"][1]
        ratio = added / nginx_added if nginx_added > 0 else float("nan")
        print(f"\n- {t}: added latency {ratio:.2f}x nginx's; throughput {stats[t][0] / stats['nginx'][0]:.0%} of nginx's", end="")
    print()
print("\n### Streaming: 200 chunks 5 ms apart\n")
print("| target | time to first byte | time to last byte | added first byte | added last byte |")
print("|---|---|---|---|---|")
s = {}
for t in targets:
    r = [x for x in rows if x[0] == "stream" and x[1] == t]
    s[t] = (med(float(x[2]) * 1e3 for x in r), med(float(x[3]) * 1e3 for x in r))
for t in targets:
    f, l = s[t]
    print(f"| {t} | {f:.2f} ms | {l:.1f} ms | {f - s['direct'][0]:+.2f} ms | {l - s['direct'][1]:+.1f} ms |")
PY
