#!/usr/bin/env python3
"""check_stats.py FILE MODE - structure and consistency of dpm_stats_print JSON.

Used by tests/ctl/stats_report.c. MODE is the opts string given to
dpm_stats_print (without 'J'); sections it omits must be absent, the others
present with every key docs/stats.md lists. Prints "key=value" lines the C
test cross-checks (totals.*), or "ERROR: ..." lines and exits 1.
"""
import json
import sys

errors = []


def err(msg):
    errors.append(msg)


def need(obj, keys, where):
    if not isinstance(obj, dict):
        err("%s is not an object" % where)
        return
    for k in keys:
        if k not in obj:
            err("%s lacks %r" % (where, k))


OPTIONS = ["narenas", "tcache", "tcache_max", "tcache_nslots_small_min", "tcache_nslots_small_max",
           "tcache_nslots_large", "lg_tcache_nslots_mul", "dirty_decay_ms", "muzzy_decay_ms",
           "background_thread", "stats_print", "stats_cycles", "stats_print_opts", "junk", "zero", "thp",
           "slab_sizes"]
TOTALS = ["allocated", "active", "resident", "mapped", "retained", "metadata", "tcache_bytes", "narenas"]
TYPE_COLS = ["type", "live_bytes", "live_blocks", "nalloc", "nfree"]
ARENA = ["name", "manual", "nthreads", "dirty_decay_ms", "muzzy_decay_ms", "mapped", "segments", "pactive",
         "pdirty", "pmuzzy", "pclean", "small_allocated", "large_allocated", "tcache_bytes", "nmalloc_small",
         "ndalloc_small", "nmalloc_large", "ndalloc_large", "purge_passes", "purged_lazy_pages", "purged_pages",
         "slow_alloc_samples", "slow_alloc_cycles_per_call", "slow_free_samples", "slow_free_cycles_per_call",
         "page_runs"]
PAGE_RUNS = ["searches", "hits", "hit_rate", "considered_per_search", "free_runs"]
RUN_COLS = ["state", "runs", "pages", "longest_list"]
LOCK = ["num_ops", "num_wait", "total_wait_ns", "max_wait_ns"]
BIN_COLS = ["size", "phase", "typed", "nmalloc", "ndalloc", "nrequests", "curregs", "curslabs", "nslabs", "util",
            "nfills", "nflushes", "tc_hit_rate"]
BIN_LOCK_COLS = ["lock_ops", "lock_waits", "lock_wait_ns"]
LARGE_COLS = ["size", "nmalloc", "ndalloc", "curlextents", "live_bytes"]


def section(obj, key, present, where):
    if present and key not in obj:
        err("%s: section %r missing" % (where, key))
    if not present and key in obj:
        err("%s: section %r present although omitted" % (where, key))
    return present and key in obj


def main():
    path, mode = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ""
    with open(path) as f:
        top = json.load(f)
    if list(top.keys()) != ["dpmalloc"]:
        err("top level keys %r, expected ['dpmalloc']" % list(top.keys()))
        return
    d = top["dpmalloc"]
    g = "g" not in mode
    for k in ["version", "epoch", "ncpus", "page", "options"]:
        section(d, k, g, "dpmalloc")
    if g and "options" in d:
        need(d["options"], OPTIONS, "options")
        if d.get("page") != 4096:
            err("page %r" % d.get("page"))
    if section(d, "totals", "m" not in mode, "dpmalloc"):
        t = d["totals"]
        need(t, TOTALS, "totals")
        for k in TOTALS:
            if k in t:
                print("totals.%s=%d" % (k, t[k]))
        if t.get("active", 0) < t.get("allocated", 0):
            err("totals: active %d < allocated %d" % (t["active"], t["allocated"]))
        if t.get("resident", 0) < t.get("active", 0):
            err("totals: resident %d < active %d" % (t["resident"], t["active"]))
        if t.get("mapped", 0) < t.get("active", 0):
            err("totals: mapped %d < active %d" % (t["mapped"], t["active"]))
    if section(d, "types", "t" not in mode, "dpmalloc"):
        if not isinstance(d["types"], list):
            err("types is not an array")
        else:
            for row in d["types"]:
                need(row, TYPE_COLS, "types row")
                if row.get("live_blocks", 0) != row.get("nalloc", 0) - row.get("nfree", 0):
                    err("type %r: live_blocks != nalloc - nfree" % row.get("type"))
    if section(d, "arenas", "a" not in mode, "dpmalloc"):
        arenas = d["arenas"]
        if not isinstance(arenas, dict) or not arenas:
            err("arenas is empty or not an object")
            return
        small = large = cached = 0
        pactive = pdirty_muzzy = pclean = mapped = 0
        for idx, a in arenas.items():
            w = "arena %s" % idx
            if not idx.isdigit():
                err("%s: key is not an index" % w)
            need(a, ARENA, w)
            small += a.get("small_allocated", 0)
            large += a.get("large_allocated", 0)
            cached += a.get("tcache_bytes", 0)
            pactive += a.get("pactive", 0)
            pdirty_muzzy += a.get("pdirty", 0) + a.get("pmuzzy", 0)
            pclean += a.get("pclean", 0)
            mapped += a.get("mapped", 0)
            pr = a.get("page_runs", {})
            need(pr, PAGE_RUNS, w + " page_runs")
            if not 0 <= pr.get("hit_rate", 0) <= 1:
                err("%s: hit_rate %r" % (w, pr.get("hit_rate")))
            for row in pr.get("free_runs", []):
                need(row, RUN_COLS, w + " free_runs row")
            if [r.get("state") for r in pr.get("free_runs", [])] != ["dirty", "muzzy", "clean", "retained"]:
                err("%s: free_runs states %r" % (w, [r.get("state") for r in pr.get("free_runs", [])]))
            locks = "x" not in mode
            section(a, "arena_lock", locks, w)
            section(a, "bin_locks", locks, w)
            if locks:
                need(a.get("arena_lock", {}), LOCK, w + " arena_lock")
                need(a.get("bin_locks", {}), LOCK, w + " bin_locks")
            if section(a, "bins", "b" not in mode, w):
                for row in a["bins"]:
                    need(row, BIN_COLS + (BIN_LOCK_COLS if locks else []), w + " bins row")
                    for k in BIN_LOCK_COLS:
                        if not locks and k in row:
                            err("%s bins row has %s although x omits locks" % (w, k))
                    if row.get("curregs") != row.get("nmalloc", 0) - row.get("ndalloc", 0):
                        err("%s bin %r: curregs != nmalloc - ndalloc" % (w, row.get("size")))
                    if not 0 <= row.get("util", 0) <= 1 or not 0 <= row.get("tc_hit_rate", 0) <= 1:
                        err("%s bin %r: util/tc_hit_rate out of [0, 1]" % (w, row.get("size")))
            if section(a, "large", "l" not in mode, w):
                for row in a["large"]:
                    need(row, LARGE_COLS, w + " large row")
                    if row.get("curlextents") != row.get("nmalloc", 0) - row.get("ndalloc", 0):
                        err("%s large %r: curlextents != nmalloc - ndalloc" % (w, row.get("size")))
        print("arenas.count=%d" % len(arenas))
        print("arenas.small_plus_large_minus_cached=%d" % (small + large - cached))
        t = d.get("totals")
        if t is not None:
            if t.get("allocated") != small + large - cached:
                err("totals.allocated %r != sum of arena small+large allocated %d - tcache_bytes %d"
                    % (t.get("allocated"), small + large, cached))
            page = 4096
            sums = {
                "tcache_bytes": cached,
                "active": pactive * page,
                "retained": pclean * page,
                "mapped": mapped + t.get("metadata", 0),
                "resident": (pactive + pdirty_muzzy) * page + t.get("metadata", 0),
            }
            for k, v in sums.items():
                if t.get(k) != v:
                    err("totals.%s %r != %d from the arenas" % (k, t.get(k), v))
            if t.get("narenas", 0) < len(arenas):
                err("totals.narenas %r < %d arenas listed" % (t.get("narenas"), len(arenas)))


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001 - report, do not trace
        err("exception %s: %s" % (type(e).__name__, e))
    for e in errors:
        print("ERROR: " + e)
    sys.exit(1 if errors else 0)
