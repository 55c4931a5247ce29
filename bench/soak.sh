#!/usr/bin/env bash
# Soak benchmark: SOAK_STREAMS concurrent streamed conversations across the
# three dialects (chat completions, responses, messages) in code mode, with
# programs and repairs mixed in, for SOAK_SECS; the proxy's resident memory
# sampled every SOAK_SAMPLE_SECS. Prints a markdown table and a verdict
# (RSS flat within 10% after the warm-up, no error); exits 1 on FAIL.
#
#   bench/soak.sh                                   # 1000 streams, 600 s, a sample every 10 s
#   SOAK_STREAMS=100 SOAK_SECS=60 bench/soak.sh     # a short run
#   PROXY_BIN=/path/to/codemode-proxy bench/soak.sh # another build
#
# Other knobs: SOAK_EVENT_MS (500: the provider's delay between events),
# SOAK_WARMUP_SECS (default: the later of 60 s and 32 requests per stream, see
# benches/soak.rs), SOAK_STORE_TTL_SECS (60: how
# long the proxy keeps executions; its default, an hour, has the store grow
# toward its budget for that long). See benches/soak.rs.
set -euo pipefail
cd "$(dirname "$0")/.."
export SOAK_STREAMS=${SOAK_STREAMS:-1000}
export SOAK_SECS=${SOAK_SECS:-600}
export SOAK_SAMPLE_SECS=${SOAK_SAMPLE_SECS:-10}
# The proxy holds two sockets per stream, the clients and the provider one each.
want=$((SOAK_STREAMS * 2 + 1024))
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$want" ]; then
    ulimit -n "$want" 2>/dev/null || ulimit -n "$(ulimit -Hn)"
fi
exec cargo bench --features bench-internals --bench soak
