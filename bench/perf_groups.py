"""Where a profiled proxy's CPU goes, by group of symbols, from
`perf report --stdio --no-children --sort dso,sym` output (self time).

    perf report -i perf.data --stdio --no-children --sort dso,sym | python3 bench/perf_groups.py [TOP]

Prints the groups (share of all samples) and the TOP (30) symbols. With fat
LTO much is inlined: a symbol is the outermost function that was not, so
serde_json's parsing inlined into one of the proxy's functions counts as
the proxy's. Read the groups as a floor for the libraries.
"""
import re
import sys

GROUPS = [
    ("kernel (system calls, TCP, scheduling)", r"^\[kernel|\[k\]"),
    ("allocation (mimalloc, Vec/String growth)", r"\bmi_|_mi_|mimalloc|malloc|\bfree\b|realloc|__rust_alloc|__rust_dealloc|raw_vec|RawVec|alloc::alloc|finish_grow|do_reserve"),
    ("memcpy/memmove/memset", r"__mem(cpy|move|set)|\bmem(cpy|move|set|cmp)|__memcmp|bcmp"),
    ("serde_json / serde (with indexmap, Value's map)", r"serde_json|\bserde::|serde_core|<serde|indexmap"),
    ("hashing (SipHash, hash tables, SHA-256)", r"[Hh]ash|sip|ahash|foldhash|fxhash|sha256"),
    ("hyper / http / httparse", r"hyper|httparse|\bhttp::|h2::"),
    ("tokio / tower / futures (async plumbing)", r"tokio|\bmio::|tower|futures_|core::future|Pin<P> as core::future"),
    ("bytes (Bytes, BytesMut refcounts)", r"\bbytes::"),
    ("tracing / logging", r"tracing"),
    ("the proxy's judge and rewrite (dialects, wire, SSE, plans, SDK)",
     r"codemode_proxy::(sse|stream|body|messages|responses|chat|turn|wire|layer::(json|entry|streamed|round|embedded)|sdk|plan|tools|cache|sections|preset|select|classify|mode)"),
    ("the proxy: routing, forwarding, ledger, usage", r"codemode_proxy"),
    ("libc / other (UTF-8 checks, fmt, clock)", r"."),
]

top = int(sys.argv[1]) if len(sys.argv) > 1 else 30
rows = []
for line in sys.stdin:
    m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[(.)\]\s+(.*)$", line)
    if m:
        pct, dso, kind, sym = float(m[1]), m[2], m[3], m[4].strip()
        rows.append((pct, dso, kind, sym))
totals = {}
for pct, dso, kind, sym in rows:
    key = f"[{kind}] {dso} {sym}"
    for name, rx in GROUPS:
        if re.search(rx, key if kind == "k" else sym) or (name.startswith("kernel") and kind == "k"):
            totals[name] = totals.get(name, 0) + pct
            break
print("| group | share of the proxy's samples |")
print("|---|---|")
for name, _ in GROUPS:
    if name in totals:
        print(f"| {name} | {totals[name]:.1f}% |")
print(f"\nTop {top} symbols (self time):\n")
print("| self | symbol |")
print("|---|---|")
for pct, dso, kind, sym in rows[:top]:
    short = re.sub(r"::h[0-9a-f]{16}$", "", sym)
    if len(short) > 140:
        short = short[:137] + "..."
    print(f"| {pct:.2f}% | `{short.replace('|', '/')}` ({'kernel' if kind == 'k' else dso}) |")
