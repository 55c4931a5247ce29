"""Tables and summary lines from bench/load.sh's raw results.

    python3 bench/load_report.py RESULTS

RESULTS lines:
    load DIALECT SCENARIO TARGET REQ_PER_S P50_US P99_US REQUESTS CPU_US_PER_REQUEST
    stream DIALECT TARGET FIRST_MS LAST_MS

A load figure is the median over rounds; a streaming figure the median over
every request of every round. CPU per request is the target's own CPU time
(for `direct`, the upstream nginx's).
"""
import statistics
import sys

med = statistics.median
TARGETS = ["direct", "nginx", "native", "code"]
PROXIES = ["native", "code"]
# The targets: CPU per request against nginx's, by mode.
CPU_TARGET = {"native": 1.2, "code": 1.5}
FIRST_BYTE_SLACK_MS = 0.1

rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
dialects = list(dict.fromkeys(r[1] for r in rows))
scenarios = list(dict.fromkeys(r[2] for r in rows if r[0] == "load"))


def load(d, s, t):
    r = [x for x in rows if x[0] == "load" and x[1] == d and x[2] == s and x[3] == t]
    if not r:
        return None
    return {"rps": med(float(x[4]) for x in r), "p50": med(float(x[5]) for x in r), "p99": med(float(x[6]) for x in r),
            "cpu": med(float(x[8]) for x in r), "runs": len(r)}


def stream(d, t):
    r = [x for x in rows if x[0] == "stream" and x[1] == d and x[2] == t]
    if not r:
        return None
    return {"first": med(float(x[3]) for x in r), "last": med(float(x[4]) for x in r), "n": len(r)}


def us(v):
    return f"{v / 1e3:.2f} ms" if v >= 1000 else f"{v:.0f} µs"


def added_latency(p, nginx):
    """The summary's added-latency phrase: the ratio to nginx's, or what
    stands in for it when either path is not slower than direct."""
    if p <= 0:
        return f"added latency below direct ({p:+.0f} µs)"
    if nginx <= 0:
        return f"added latency +{p:.0f} µs (nginx's below direct, {nginx:+.0f} µs)"
    return f"added latency {p / nginx:.2f}x nginx's"


def title(s):
    return "Serial: one connection" if s == "serial" else f"{s[1:]} connections"


summary = {s: [] for s in scenarios}
streaming, targets, headroom = [], [], []
for d in dialects:
    print(f"\n### {d}\n")
    stats = {}
    for s in scenarios:
        st = {t: load(d, s, t) for t in TARGETS}
        if any(v is None for v in st.values()):
            continue
        stats[s] = st
        direct, nginx = st["direct"], st["nginx"]
        print(f"#### {d}, {title(s)} (medians of {direct['runs']} runs)\n")
        print("| target | req/s | p50 | p99 | added p50 over direct | CPU per request | CPU vs nginx |")
        print("|---|---|---|---|---|---|---|")
        for t in TARGETS:
            v = st[t]
            cpu = "(the upstream's)" if t == "direct" else f"{v['cpu'] / nginx['cpu']:.2f}x"
            print(f"| {t} | {v['rps']:,.0f} | {us(v['p50'])} | {us(v['p99'])} | {v['p50'] - direct['p50']:+.0f} µs "
                  f"| {v['cpu']:.1f} µs | {cpu} |")
        print()
        nginx_added = nginx["p50"] - direct["p50"]
        for t in PROXIES:
            v = st[t]
            summary[s].append(f"- {d} {t}: {added_latency(v['p50'] - direct['p50'], nginx_added)}; "
                              f"throughput {v['rps'] / nginx['rps']:.0%} of nginx's; CPU per request {v['cpu'] / nginx['cpu']:.2f}x nginx's")
        if s != "serial":
            ratio = direct["rps"] / nginx["rps"]
            note = "the upstream is not the bottleneck" if ratio >= 1.15 else "WARNING: the upstream is close to limiting nginx"
            headroom.append(f"- {d}, {title(s)}: direct {direct['rps']:,.0f} req/s, {ratio:.2f}x nginx's ({note})")
    ss = {t: stream(d, t) for t in TARGETS}
    if all(ss.values()):
        direct = ss["direct"]
        print(f"#### {d}, streamed (20-odd events; {direct['n']} requests each, medians)\n")
        print("| target | first byte | last byte | added first byte | added last byte |")
        print("|---|---|---|---|---|")
        for t in TARGETS:
            v = ss[t]
            print(f"| {t} | {v['first']:.3f} ms | {v['last']:.3f} ms | {v['first'] - direct['first']:+.3f} ms "
                  f"| {v['last'] - direct['last']:+.3f} ms |")
        print()
        nf, nl = ss["nginx"]["first"] - direct["first"], ss["nginx"]["last"] - direct["last"]
        for t in PROXIES:
            f, l = ss[t]["first"] - direct["first"], ss[t]["last"] - direct["last"]
            streaming.append(f"- {d} {t}: added first byte {f:+.3f} ms (nginx's {nf:+.3f} ms); added last byte {l:+.3f} ms (nginx's {nl:+.3f} ms)")
    # The targets: CPU per request under load (the loaded scenario,
    # else serial), added p50 serial, added first streamed byte.
    loaded = next((s for s in stats if s != "serial"), "serial")
    for t in PROXIES:
        parts = []
        if loaded in stats:
            r = stats[loaded][t]["cpu"] / stats[loaded]["nginx"]["cpu"]
            goal = CPU_TARGET[t]
            parts.append(f"CPU per request {r:.2f}x nginx's, target at most {goal}x: "
                         + ("met" if r <= goal else f"missed by {r - goal:.2f}x ({r / goal - 1:.0%} over)"))
        if "serial" in stats:
            st = stats["serial"]
            p, n = st[t]["p50"] - st["direct"]["p50"], st["nginx"]["p50"] - st["direct"]["p50"]
            parts.append(f"added p50 {p:+.0f} µs against nginx's {n:+.0f} µs: "
                         + ("met" if p < n else f"missed by {p - n:.0f} µs" + (f" ({p / n:.2f}x)" if n > 0 else "")))
        if all(ss.values()):
            f, nf = ss[t]["first"] - ss["direct"]["first"], ss["nginx"]["first"] - ss["direct"]["first"]
            goal = nf + FIRST_BYTE_SLACK_MS
            parts.append(f"added first byte {f:+.3f} ms, target at most {goal:+.3f} ms: "
                         + ("met" if f <= goal else f"missed by {f - goal:.3f} ms"))
        targets.append(f"- {d} {t}: " + "; ".join(parts))

for s in scenarios:
    if summary[s]:
        print(f"### Summary, {title(s).lower()}\n")
        print("\n".join(summary[s]) + "\n")
if streaming:
    print("### Summary, streamed\n")
    print("\n".join(streaming) + "\n")
if targets:
    print("### Against the issue's targets\n")
    print("\n".join(targets) + "\n")
if headroom:
    print("### The upstream's headroom\n")
    print("\n".join(headroom))
