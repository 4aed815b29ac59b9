#!/usr/bin/env python3
"""The layering that docs/design.md ("Layers") promises, checked on the
library's object files: every function or variable a room uses from
another room belongs to a room listed above it in the table (lower), and
the rooms' use of each other has no cycle. The one call that goes up is
dpm_ready()'s dpm_init_slow, initialisation on first use.

usage: layers.py DESIGN_MD LIBRARY.a NM
"""
import re
import subprocess
import sys
from collections import defaultdict

EXEMPT = {"dpm_init_slow"}


def table_rows(design_md):
    text = open(design_md, encoding="utf-8").read()
    m = re.search(r"^## Layers\n(.*?)^## ", text, re.S | re.M)
    if not m:
        sys.exit("layers: no '## Layers' section in " + design_md)
    rows = []
    for line in m.group(1).splitlines():
        if not line.startswith("|") or line.startswith("|---") or line.startswith("| room "):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        files = re.findall(r"`src/([A-Za-z0-9_]+)\.(?:c|cc)`", cells[1])
        rows.append((cells[0], files, cells[2].startswith("outer ring")))
    return rows


def main():
    design_md, lib, nm = sys.argv[1:4]
    rows = table_rows(design_md)
    row_of = {}
    node_of = {}
    for i, (name, files, outer) in enumerate(rows):
        for f in files:
            if f in row_of:
                sys.exit("layers: %s.c is listed twice in the table" % f)
            row_of[f] = i
            # a row is one room; the outer ring's files are rooms each
            node_of[f] = f if outer else "row%d" % i
    outer_row = next((i for i, r in enumerate(rows) if r[2]), None)

    def members(flag):
        out = subprocess.run([nm, "-A", flag, lib], check=True, capture_output=True, text=True).stdout
        for line in out.splitlines():
            parts = line.split()
            member = parts[0].split(":")[1]
            yield member, parts[-2] if flag == "--defined-only" else None, parts[-1]

    defined = {}
    objects = set()
    for member, kind, sym in members("--defined-only"):
        room = re.sub(r"\.(c|cc)\.o$", "", member)
        objects.add(room)
        if kind in "TDBRVW":
            defined[sym] = room
    missing = sorted(o for o in objects if o not in row_of)
    if missing:
        print("layers: rooms missing from docs/design.md's Layers table: " + ", ".join(missing))
        return 1
    bad = []
    edges = defaultdict(set)
    for member, _, sym in members("--undefined-only"):
        room = re.sub(r"\.(c|cc)\.o$", "", member)
        callee = defined.get(sym)
        if callee is None or callee == room or sym in EXEMPT:
            continue
        a, b = row_of[room], row_of[callee]
        if a != outer_row and b != outer_row and b > a:
            bad.append("%s.c (%s) uses %s of %s.c (%s), a room above it" % (room, rows[a][0], sym, callee, rows[b][0]))
        if node_of[room] != node_of[callee]:
            edges[node_of[room]].add((node_of[callee], "%s.c -> %s.c: %s" % (room, callee, sym)))
    # cycles among rooms (Tarjan)
    index, low, stack, on, comps, n = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w, _ in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            comps.append(comp)

    for v in list(edges):
        if v not in index:
            visit(v)
    for comp in comps:
        if len(comp) > 1:
            inside = set(comp)
            why = sorted(e for v in comp for w, e in edges[v] if w in inside)
            bad.append("rooms that use each other in a cycle: " + "; ".join(why))
    for b in bad:
        print("layers: " + b)
    if not bad:
        print("layers: %d rooms, %d uses between them, all one way" % (len(objects), sum(len(e) for e in edges.values())))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
