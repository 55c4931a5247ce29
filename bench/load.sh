#!/usr/bin/env bash
# Load benchmark on every dialect (issue 26): Chat Completions, Responses and
# Anthropic Messages, each through four targets in one run:
#   direct   wrk straight to the upstream (the floor)
#   nginx    nginx proxy_pass (one worker, upstream keep-alive)
#   native   codemode-proxy, CODEMODE_MODE=native (one worker thread)
#   code     codemode-proxy, CODEMODE_MODE=code   (one worker thread)
#
# The upstream is a static nginx answering each dialect's fixed answer
# (bench/dialects.py: a text answer, about 1 KB of JSON, or about 20 SSE
# events when the request carries `x-bench-stream: 1`, which every proxy
# forwards), fast enough that the proxy under test is the bottleneck.
# The proxy under test runs on CPU 0; wrk, the upstream and the streaming
# client on CPU 1. Per dialect and load it measures throughput, p50/p99 and
# each proxy's CPU time per request (utime+stime of all its processes from
# /proc/PID/stat around each wrk run, over the requests wrk completed), and
# for streamed answers the time to the first and the last byte of the body.
# Everything is reported as ratios to nginx.
#
#   bench/load.sh                                    # about 8.5 minutes on 2 cores
#   PROXY_BIN=/path/to/codemode-proxy bench/load.sh  # another build (no cargo build then)
#   DIALECTS="messages" RUNS=1 bench/load.sh         # one dialect, one round
#   REQUEST=bench/requests/claude_messages.json bench/load.sh   # an agent's own request
#
# Knobs (environment):
#   PROXY_BIN       the proxy to measure; default ./target/release/codemode-proxy,
#                   built with cargo when PROXY_BIN is unset. Copied into the
#                   run's temp dir, so a rebuild during the run changes nothing.
#   RUNS=3          rounds; every round runs every dialect, load and target,
#                   interleaved (the target order rotates), tables are medians
#   DURATION=6      seconds of each wrk run
#   CONNECTIONS=32  connections of the loaded scenario
#   STREAM_SAMPLES=300  streamed requests per target, dialect and round
#   DIALECTS="chat responses messages gemini"
#   REQUEST=FILE    send FILE (a request body, e.g. one of bench/requests/)
#                   instead of the built-in request, on its dialect only: the
#                   one its name ends in (`<agent>_<dialect>[_history].json`)
#                   or DIALECT=...; sent without "stream" under wrk and with
#                   "stream": true for the streamed samples
#   PROXY_LOG=warn  the proxy's RUST_LOG (`info` writes the access log)
#   BASE_PORT=19140 upstream on BASE_PORT, nginx +1, native +2, code +3
#   RESULTS=FILE    keep the raw results there (bench/load_report.py FILE
#                   prints the tables again)
#   PROFILE=DIALECT instead of the rounds: `perf record` on the proxy (PROFILE_MODE,
#                   code by default) during one DURATION-second run at CONNECTIONS,
#                   then where its CPU goes by group and the top symbols
#                   (bench/perf_groups.py); PERF_DATA=FILE keeps perf.data
#
# Run time: 4 dialects x 2 loads x 4 targets x RUNS x DURATION seconds of
# wrk (432 s by default), plus warm-up, streaming and checks: 8 min 10 s
# to 8 min 16 s in three runs on 2 cores.
#
# Every target is checked before the first round and after each round: a
# 200 and the dialect's expected answer, streamed and not (the run fails
# loudly otherwise); a wrk run with any non-2xx answer or socket error fails
# the run too. Needs root for apt-get on a fresh machine; everything else it
# starts itself, and stops (and removes its temp dir) on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
DURATION=${DURATION:-6}
CONNECTIONS=${CONNECTIONS:-32}
STREAM_SAMPLES=${STREAM_SAMPLES:-300}
read -r -a DIALECTS <<< "${DIALECTS:-chat responses messages gemini}"
if [ -n "${REQUEST:-}" ]; then DIALECTS=("$(python3 bench/dialects.py dialect "$REQUEST")"); fi
PROXY_LOG=${PROXY_LOG:-warn}
BASE_PORT=${BASE_PORT:-19140}
if [ "$(nproc)" -lt 2 ]; then echo "needs 2 CPUs for the pinned scenarios" >&2; exit 1; fi

if ! command -v nginx >/dev/null || ! command -v wrk >/dev/null; then
    apt-get update -qq && apt-get install -y -qq nginx wrk >/dev/null
fi
if [ -z "${PROXY_BIN:-}" ]; then
    cargo build --release --quiet --bin codemode-proxy
    PROXY_BIN=./target/release/codemode-proxy
fi

WORK=$(mktemp -d)
chmod 755 "$WORK"  # nginx's workers read the answers as nobody
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() {
    echo "load.sh: $*" >&2
    for f in "$WORK"/proxy-*.log; do
        if [ -s "$f" ]; then echo "$(basename "$f"):" >&2; tail -5 "$f" >&2; fi
    done
    exit 1
}

cp "$PROXY_BIN" "$WORK/codemode-proxy"
UPSTREAM=127.0.0.1:$BASE_PORT
declare -A URL=([direct]=$UPSTREAM [nginx]=127.0.0.1:$((BASE_PORT + 1))
                [native]=127.0.0.1:$((BASE_PORT + 2)) [code]=127.0.0.1:$((BASE_PORT + 3)))
TARGETS=(direct nginx native code)
declare -A PATHS STREAM_PATHS
for d in "${DIALECTS[@]}"; do
    PATHS[$d]=$(python3 bench/dialects.py path "$d")
    STREAM_PATHS[$d]=$(python3 bench/dialects.py path "$d" stream)
done
for port in "${URL[@]}"; do
    if (exec 3<>"/dev/tcp/${port%:*}/${port#*:}") 2>/dev/null; then fail "$port is taken (set BASE_PORT)"; fi
done

python3 bench/dialects.py write "$WORK"
if [ -n "${REQUEST:-}" ]; then python3 bench/dialects.py request "$REQUEST" "$WORK" >/dev/null; fi
chmod -R a+rX "$WORK"

start_nginx() {  # name conf-body
    mkdir -p "$WORK/$1/logs"
    cat > "$WORK/$1/nginx.conf" <<NGINX
worker_processes 1;
pid $WORK/$1/nginx.pid;
error_log $WORK/$1/logs/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    client_body_buffer_size 1m;
$2
}
NGINX
    nginx -p "$WORK/$1" -c "$WORK/$1/nginx.conf" -g 'daemon off;' &
    PIDS+=($!)
}
# The upstream: the answer files; POST to a static file is a 405, which
# error_page turns into the file (as a GET).
start_nginx upstream "    etag off;
    server {
        listen $UPSTREAM backlog=4096;
        location ~ ^/v1(beta)?/ {
            if (\$http_x_bench_stream) { rewrite ^ /sse\$uri last; }
            rewrite ^ /json\$uri last;
        }
        location /json/ { internal; error_page 405 =200 \$uri; root $WORK/static; types { } default_type application/json; }
        location /sse/ { internal; error_page 405 =200 \$uri; root $WORK/static; types { } default_type text/event-stream; }
    }"
UPSTREAM_PID=${PIDS[-1]}
start_nginx proxy "    upstream provider { server $UPSTREAM; keepalive 64; }
    server {
        listen ${URL[nginx]} backlog=4096;
        location / {
            proxy_pass http://provider;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_buffering off;
            client_max_body_size 16m;
        }
    }"
NGINX_PID=${PIDS[-1]}
# One worker thread each, as nginx runs one worker process.
start_proxy() {  # mode
    RUST_LOG=$PROXY_LOG CODEMODE_WORKER_THREADS=1 CODEMODE_LISTEN=${URL[$1]} CODEMODE_MODE=$1 \
        CODEMODE_UPSTREAM=http://$UPSTREAM/v1 CODEMODE_ANTHROPIC_UPSTREAM=http://$UPSTREAM/v1 \
        CODEMODE_GEMINI_UPSTREAM=http://$UPSTREAM \
        "$WORK/codemode-proxy" >/dev/null 2>>"$WORK/proxy-$1.log" &
    PIDS+=($!)
}
start_proxy native
NATIVE_PID=${PIDS[-1]}
start_proxy code
CODE_PID=${PIDS[-1]}
sleep 1

# Every process of a target: nginx's master and its workers.
procs() {
    case $1 in
        direct) echo "$UPSTREAM_PID" $(pgrep -P "$UPSTREAM_PID") ;;
        nginx) echo "$NGINX_PID" $(pgrep -P "$NGINX_PID") ;;
        native) echo "$NATIVE_PID" ;;
        code) echo "$CODE_PID" ;;
    esac
}
for t in nginx native code; do
    for p in $(procs "$t"); do taskset -a -pc 0 "$p" >/dev/null; done
done
for p in $(procs direct); do taskset -a -pc 1 "$p" >/dev/null; done
cpu_ticks() {  # target: utime+stime of its processes, in clock ticks
    local sum=0 p
    for p in $(procs "$1"); do
        sum=$((sum + $(awk '{print $14 + $15}' "/proc/$p/stat")))
    done
    echo "$sum"
}
HZ=$(getconf CLK_TCK)

headers() { python3 bench/dialects.py headers "$1" | sed 's/^/-H\n/'; }
check_all() {  # every target answers every dialect with the expected answer
    local t d h
    for d in "${DIALECTS[@]}"; do
        mapfile -t h < <(headers "$d")
        for t in "${TARGETS[@]}"; do
            local url="http://${URL[$t]}/${PATHS[$d]}" code
            rm -f "$WORK/answer.json" "$WORK/answer.sse"
            code=$(curl -s -o "$WORK/answer.json" -w '%{http_code}' "${h[@]}" -d @"$WORK/req/$d.json" "$url") || true
            [ "$code" = 200 ] || fail "$t $d: status $code: $(head -c 300 "$WORK/answer.json" 2>/dev/null)"
            python3 bench/dialects.py check "$d" json "$WORK/answer.json" || fail "$t $d: not the expected answer"
            code=$(curl -s -o "$WORK/answer.sse" -w '%{http_code}' "${h[@]}" -H 'x-bench-stream: 1' \
                -d @"$WORK/req/$d.stream.json" "http://${URL[$t]}/${STREAM_PATHS[$d]}") || true
            [ "$code" = 200 ] || fail "$t $d streamed: status $code: $(head -c 300 "$WORK/answer.sse" 2>/dev/null)"
            python3 bench/dialects.py check "$d" sse "$WORK/answer.sse" || fail "$t $d streamed: not the expected answer"
        done
    done
}

RESULTS_FILE="$WORK/results.txt"
: > "$RESULTS_FILE"
wrk_run() {  # dialect scenario target connections
    local out c0 c1
    c0=$(cpu_ticks "$3")
    out=$(taskset -c 1 wrk -t1 -c"$4" -d"${DURATION}s" --latency -s "$WORK/req/$1.lua" "http://${URL[$3]}/${PATHS[$1]}")
    c1=$(cpu_ticks "$3")
    if grep -qE 'Non-2xx|Socket errors' <<< "$out"; then fail "$3 $1 $2: errors under load:
$out"; fi
    awk -v d="$1" -v s="$2" -v t="$3" -v ticks=$((c1 - c0)) -v hz="$HZ" '
        function us(v) {
            if (v ~ /us$/) return v + 0; if (v ~ /ms$/) return v * 1e3; if (v ~ /s$/) return v * 1e6; return v + 0
        }
        /Requests\/sec/ {rps = $2}
        / requests in / {reqs = $1}
        /^ +50%/ {p50 = us($2)} /^ +99%/ {p99 = us($2)}
        END {printf "load %s %s %s %s %.2f %.2f %d %.3f\n", d, s, t, rps, p50, p99, reqs, ticks * 1e6 / hz / reqs}' \
        <<< "$out" >> "$RESULTS_FILE"
}

echo "$(date -u '+%F %T') UTC; $(uptime)" >&2
check_all
if [ -n "${PROFILE:-}" ]; then
    command -v perf >/dev/null || { apt-get update -qq && apt-get install -y -qq linux-perf >/dev/null; }
    m=${PROFILE_MODE:-code}
    pid=$(procs "$m")
    taskset -c 1 wrk -t1 -c"$CONNECTIONS" -d2s -s "$WORK/req/$PROFILE.lua" "http://${URL[$m]}/${PATHS[$PROFILE]}" >/dev/null
    perf record -q -F 2999 -g -p "$pid" -o "$WORK/perf.data" -- sleep "$DURATION" 2>/dev/null &
    perf_pid=$!
    sleep 0.3
    taskset -c 1 wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" -s "$WORK/req/$PROFILE.lua" "http://${URL[$m]}/${PATHS[$PROFILE]}" | grep -E 'Requests/sec|Non-2xx|Socket' >&2
    wait "$perf_pid" || true
    if [ -n "${PERF_DATA:-}" ]; then cp "$WORK/perf.data" "$PERF_DATA"; fi
    echo "### Profile: $PROFILE, $m mode, $CONNECTIONS connections, ${DURATION} s (perf record -F 2999 -g, self time)"
    echo
    perf report -i "$WORK/perf.data" --stdio --no-children --sort dso,sym 2>/dev/null | python3 bench/perf_groups.py 30
    exit 0
fi
for d in "${DIALECTS[@]}"; do  # warm-up: connections, caches, allocator
    for t in "${TARGETS[@]}"; do
        taskset -c 1 wrk -t1 -c"$CONNECTIONS" -d1s -s "$WORK/req/$d.lua" "http://${URL[$t]}/${PATHS[$d]}" >/dev/null
    done
done
order=("${TARGETS[@]}")
for run in $(seq "$RUNS"); do
    for d in "${DIALECTS[@]}"; do
        echo "run $run/$RUNS, $d: serial, $CONNECTIONS connections, streaming (${order[*]}); $(cut -d' ' -f1-3 /proc/loadavg)" >&2
        for t in "${order[@]}"; do wrk_run "$d" serial "$t" 1; done
        for t in "${order[@]}"; do wrk_run "$d" c"$CONNECTIONS" "$t" "$CONNECTIONS"; done
        for t in "${order[@]}"; do
            taskset -c 1 python3 bench/ttfb.py "${URL[$t]}" "$d" "$WORK/req/$d.stream.json" "$STREAM_SAMPLES" "$t" >> "$RESULTS_FILE" \
                || fail "$t $d: streaming failed"
        done
    done
    check_all
    order=("${order[@]:1}" "${order[0]}")  # rotate, so no target always goes first
done
echo "$(date -u '+%F %T') UTC; $(uptime)" >&2
if [ -n "${RESULTS:-}" ]; then cp "$RESULTS_FILE" "$RESULTS"; fi
for m in native code; do
    if [ -s "$WORK/proxy-$m.log" ]; then echo "proxy ($m) log:" >&2; tail -5 "$WORK/proxy-$m.log" >&2; fi
done
python3 bench/load_report.py "$RESULTS_FILE"
