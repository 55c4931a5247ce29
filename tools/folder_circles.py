#!/usr/bin/env python3
"""Files of one folder that import each other in a circle.

For every folder under src/, the files directly in it (a.rs, or a/mod.rs
standing for module a) and the `use`/path references each makes to a
sibling module (`super::x`, `crate::<folder path>::x`, or `self::x` from a
mod.rs). Prints each strongly connected component of size > 1."""
import os, re, sys
from collections import defaultdict
root = sys.argv[1] if len(sys.argv) > 1 else "src"

def modules_in(folder):
    mods = {}
    for name in os.listdir(folder):
        p = os.path.join(folder, name)
        if name.endswith(".rs") and name not in ("mod.rs", "lib.rs", "main.rs"):
            mods[name[:-3]] = [p]
            sub = os.path.join(folder, name[:-3])
            if os.path.isdir(sub):
                mods[name[:-3]] += [os.path.join(dp, f) for dp, _, fs in os.walk(sub) for f in fs if f.endswith(".rs")]
        elif os.path.isdir(p) and os.path.exists(os.path.join(p, "mod.rs")):
            mods[name] = [os.path.join(dp, f) for dp, _, fs in os.walk(p) for f in fs if f.endswith(".rs")]
    return mods

def strip_tests(text):
    i = text.find("#[cfg(test)]\nmod tests {")
    return text if i < 0 else text[:i]

found = 0
for dp, dirs, files in os.walk(root):
    mods = modules_in(dp)
    if len(mods) < 2:
        continue
    rel = os.path.relpath(dp, root)
    crate_path = "crate::" + rel.replace(os.sep, "::") if rel != "." else "crate"
    edges = defaultdict(set)
    for m, paths in mods.items():
        for p in paths:
            if p.endswith("tests.rs") or "/tests/" in p:
                continue
            text = strip_tests(open(p).read())
            # Comments name modules without importing them.
            text = "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("//"))
            depth = os.path.relpath(os.path.dirname(p), dp).count(os.sep) + (0 if os.path.dirname(p) == dp else 1)
            for other in mods:
                if other == m:
                    continue
                pats = [rf"\b{re.escape(crate_path)}::{other}\b"]
                if os.path.dirname(p) == dp and not p.endswith("mod.rs"):
                    pats.append(rf"\bsuper::{other}\b")
                    pats.append(rf"\bsuper::\{{[^}}]*\b{other}\b")
                if any(re.search(pt, text) for pt in pats):
                    edges[m].add(other)
    # Tarjan
    index = {}; low = {}; stack = []; on = set(); comps = []; c = [0]
    def sc(v):
        index[v] = low[v] = c[0]; c[0] += 1; stack.append(v); on.add(v)
        for w in edges[v]:
            if w not in index:
                sc(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v: break
            comps.append(comp)
    for v in list(mods):
        if v not in index:
            sc(v)
    for comp in comps:
        if len(comp) > 1:
            found += 1
            print(f"{rel}: {' <-> '.join(sorted(comp))}")
print(f"{found} circle(s)")
