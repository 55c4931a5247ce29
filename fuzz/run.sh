#!/usr/bin/env bash
# Runs each fuzz target for a while: `fuzz/run.sh [SECONDS] [TARGET...]`.
# Needs the nightly toolchain and cargo-fuzz (installed here when missing).
# Findings land in fuzz/artifacts/<target>/; the corpus in fuzz/corpus/<target>/.
set -euo pipefail
cd "$(dirname "$0")"
seconds=${1:-600}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(stream_judge request_rewrite responses_stream_judge messages_stream_judge
             gemini_stream_judge responses_request_rewrite messages_request_rewrite
             gemini_request_rewrite sdk_render sandbox_boundary)
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    cargo +nightly install --locked cargo-fuzz
fi
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t" "seeds/$t"
    echo "== $t for ${seconds}s"
    cargo +nightly fuzz run "$t" "corpus/$t" "seeds/$t" -- \
        -max_total_time="$seconds" -rss_limit_mb=4096 -timeout=10 -print_final_stats=1 \
        2>&1 | grep -E "^(stat::|==|SUMMARY|Done|#[0-9]+ +DONE)|panicked|ERROR" || true
done
