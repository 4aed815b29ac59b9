#!/usr/bin/env python3
"""run_stat_test.py - dpmalloc-stat against live processes (docs/stats.md,
"From outside: dpmalloc-stat").

usage: run_stat_test.py CASE TOOL [args]
  formats TOOL TARGET [LIB]   text, --json and --openmetrics of a target
                              (stat_target pattern) against what the target
                              read of itself with dpm_ctl; LIB: run the
                              target with LD_PRELOAD=LIB
  watch TOOL TARGET [LIB]     --watch rates of a target allocating 2000
                              blocks of 256 bytes a second (with a memory
                              limit set: failing one allocation at it
                              every 100 ms; with prof:true: sampled)
  above TOOL TARGET [LIB]     a target that stays above its soft limit:
                              the ongoing spell's time, read from outside
  stress TOOL TARGET [LIB]    200 reads of a target whose 2 threads churn
  errors TOOL TARGET FAKE_ABI FAKE_SIZE FAKE_MAGIC LIB FAKE_GARBAGE
                              not dpmalloc, no such process, version
                              mismatch, wrong magic, permission, usage
  check_openmetrics FILE      only the OpenMetrics checker, on a file
  checker                     the checker flags each broken exposition

The targets allow any process of their user to read them (PR_SET_PTRACER),
so the test passes as root and as a user under Yama ptrace_scope 1.
Every tool run has a timeout; a hang fails the test.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

failures = []
quiet = False   # the checker's self-test expects failures: not printed


def check(cond, what):
    if not cond:
        failures.append(what)
        if not quiet:
            print("FAIL: " + what, flush=True)
    return cond


def run_tool(tool, args, timeout=20, **kw):
    try:
        p = subprocess.run([tool] + args, capture_output=True, text=True, timeout=timeout, **kw)
    except subprocess.TimeoutExpired:
        check(False, "%s %s did not finish in %d s" % (tool, " ".join(args), timeout))
        return 124, "", ""
    return p.returncode, p.stdout, p.stderr


class Target:
    """stat_target MODE FILE, started and waited until it says ready."""

    def __init__(self, exe, mode, lib=None):
        self.dir = tempfile.mkdtemp(prefix="dpm_stat_")
        self.file = os.path.join(self.dir, "ctl.txt")
        env = dict(os.environ)
        if lib:
            env["LD_PRELOAD"] = lib
        self.p = subprocess.Popen([exe, mode, self.file], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        line = self.p.stdout.readline()
        if not line.startswith(b"ready"):
            self.close()
            sys.exit("FAIL: the target did not start (%r)" % line)
        self.pid = self.p.pid

    def ctl(self):
        out = {}
        with open(self.file) as f:
            for line in f:
                k, v = line.strip().split("=")
                out[k] = int(v)
        return out


    def close(self):
        try:
            self.p.stdin.close()
        except OSError:
            pass
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            check(False, "the target did not exit after its stdin closed")
        check(self.p.returncode == 0, "the target exited with %s" % self.p.returncode)
        shutil.rmtree(self.dir, ignore_errors=True)



def conf_value(key):
    """The number DPMALLOC_CONF gives key, or None."""
    m = re.search(r"(?:^|,)%s:(\d+)" % key, os.environ.get("DPMALLOC_CONF", ""))
    return int(m.group(1)) if m else None


MEMORY_KEYS = ("charged", "peak", "limit", "soft_limit", "limit_refusals", "limit_reclaims", "limit_failures",
               "soft_limit_passes", "soft_limit_above_ms")
PROF_KEYS = ("samples_total", "samples_live", "samples_dropped")


def check_memory_prof(doc, inproc, ctl, text, fams):
    """The memory limit's and the profiler's figures of the idle target:
    the tool's JSON, text and OpenMetrics equal to what the target read
    of itself (dpm_ctl's stats.memory.*, prof.active, stats.prof.*, and
    dpm_stats_print's "memory" section)."""
    mem, prof = doc.get("memory"), doc.get("prof")
    if not check(isinstance(mem, dict) and isinstance(prof, dict), "--json has no memory/prof sections"):
        return
    print("tool's memory:", mem)
    print("tool's prof:  ", prof)
    above = ctl["memory.above_soft_limit"] == 1
    check(mem.get("above_soft_limit") is above, "memory.above_soft_limit: tool %r, dpm_ctl %d" %
          (mem.get("above_soft_limit"), above))
    for k in MEMORY_KEYS:
        if k == "soft_limit_above_ms" and above:
            # an ongoing spell: the tool reads later than the target did
            check(mem.get(k, -1) >= ctl["memory." + k], "memory.%s: tool %r < dpm_ctl's %d" %
                  (k, mem.get(k), ctl["memory." + k]))
            continue
        check(mem.get(k) == ctl["memory." + k], "memory.%s: tool %r, dpm_ctl stats.memory.%s %d" %
              (k, mem.get(k), k, ctl["memory." + k]))
    if not above:
        check(mem == inproc.get("memory"), "memory: tool %r, in-process %r" % (mem, inproc.get("memory")))
    for k in PROF_KEYS:
        check(prof.get(k) == ctl["prof." + k], "prof.%s: tool %r, dpm_ctl stats.prof.%s %d" %
              (k, prof.get(k), k, ctl["prof." + k]))
    check(prof.get("active") is (ctl["prof.active"] == 1), "prof.active: tool %r, dpm_ctl %d" %
          (prof.get("active"), ctl["prof.active"]))
    # what DPMALLOC_CONF asked for, and the target's hits of the limits
    limit_mb, soft_mb = conf_value("memory_limit_mb"), conf_value("memory_soft_limit_mb")
    check(mem.get("limit") == (limit_mb or 0) << 20 and mem.get("soft_limit") == (soft_mb or 0) << 20,
          "memory limits %r/%r with DPMALLOC_CONF=%s" % (mem.get("limit"), mem.get("soft_limit"),
                                                         os.environ.get("DPMALLOC_CONF", "")))
    if limit_mb:
        check(mem["limit_failures"] >= 3 and mem["limit_refusals"] >= mem["limit_failures"] and
              mem["limit_reclaims"] >= mem["limit_failures"] and mem["soft_limit_passes"] >= 1 and
              mem["peak"] > mem["soft_limit"] and mem["charged"] < mem["soft_limit"],
              "the target hit the limits: %r" % mem)
    else:
        check(all(mem[k] == 0 for k in ("limit_refusals", "limit_reclaims", "limit_failures", "soft_limit_passes")),
              "no limit, and limit counters: %r" % mem)
    if "prof:true" in os.environ.get("DPMALLOC_CONF", ""):
        check(prof["active"] and prof["samples_total"] > 0 and 0 < prof["samples_live"] <= prof["samples_total"],
              "prof:true and the profiler's counters: %r" % prof)
    else:
        check(not prof["active"] and prof["samples_total"] == 0, "no prof:true and prof: %r" % prof)

    # the text report: its memory and prof sections
    for sect, keys, src in (("memory", MEMORY_KEYS, mem), ("prof", PROF_KEYS, prof)):
        m = re.search(r"^  %s:\n((?:    .*\n)+)" % sect, text, re.M)
        if not check(m is not None, "text has no %s section" % sect):
            continue
        lines = dict(l.strip().split(": ", 1) for l in m.group(1).splitlines())
        for k in keys:
            if k == "soft_limit_above_ms" and above:
                continue
            check(lines.get(k) == str(src[k]), "text %s.%s: %r, JSON %r" % (sect, k, lines.get(k), src[k]))
    # OpenMetrics: the families, each equal to the figure it names
    om = {"dpmalloc_memory_charged_bytes": mem["charged"], "dpmalloc_memory_peak_bytes": mem["peak"],
          "dpmalloc_memory_limit_bytes": mem["limit"], "dpmalloc_memory_soft_limit_bytes": mem["soft_limit"],
          "dpmalloc_memory_limit_refusals": mem["limit_refusals"],
          "dpmalloc_memory_limit_reclaims": mem["limit_reclaims"],
          "dpmalloc_memory_limit_failures": mem["limit_failures"],
          "dpmalloc_memory_soft_limit_passes": mem["soft_limit_passes"],
          "dpmalloc_memory_above_soft_limit": int(above),
          "dpmalloc_prof_active": int(prof["active"]), "dpmalloc_prof_samples": prof["samples_total"],
          "dpmalloc_prof_samples_live": prof["samples_live"],
          "dpmalloc_prof_samples_dropped": prof["samples_dropped"]}
    for name, want in om.items():
        if check(name in fams, "--openmetrics has no family %s" % name):
            v = fams[name]["samples"].get("")
            check(v == want, "%s %r, want %r" % (name, v, want))
    name = "dpmalloc_memory_soft_limit_above_seconds"
    if check(name in fams and fams[name]["type"] == "counter" and fams[name]["unit"] == "seconds",
             "--openmetrics has no counter %s in seconds" % name):
        v = fams[name]["samples"].get("", -1)
        ms = ctl["memory.soft_limit_above_ms"]
        check(int(v * 1000) == ms if not above else v * 1000 >= ms, "%s %r, stats.memory.soft_limit_above_ms %d" %
              (name, v, ms))
    for name in ("dpmalloc_memory_limit_refusals", "dpmalloc_prof_samples", "dpmalloc_prof_samples_dropped"):
        check(fams.get(name, {}).get("type") == "counter", "%s is no counter" % name)
    for name in ("dpmalloc_memory_charged_bytes", "dpmalloc_prof_samples_live"):
        check(fams.get(name, {}).get("type") == "gauge", "%s is no gauge" % name)


# ---- OpenMetrics -----------------------------------------------------------

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"'
SAMPLE = re.compile(r"^(%s)(\{(%s(?:,%s)*)?\})? (\S+)$" % (NAME, LABEL, LABEL))
UNITS = ("bytes", "pages", "seconds")


def check_openmetrics(text, what):
    """The exposition format's rules that a scraper relies on; returns
    {family: {labels: value}}."""
    ok = True

    def bad(msg):
        nonlocal ok
        ok = False
        check(False, "%s: %s" % (what, msg))

    if not text.endswith("# EOF\n"):
        bad("does not end with '# EOF'")
    lines = text[:-len("# EOF\n")].split("\n")[:-1] if text.endswith("# EOF\n") else text.split("\n")
    fams = {}
    cur = None
    for n, line in enumerate(lines, 1):
        if line == "":
            bad("line %d is empty" % n)
            continue
        if line.startswith("#"):
            m = re.match(r"^# (TYPE|UNIT|HELP) (%s) (.+)$" % NAME, line)
            if not m:
                bad("line %d is no TYPE/UNIT/HELP line: %r" % (n, line))
                continue
            kind, name, rest = m.groups()
            if kind == "TYPE":
                if name in fams:
                    bad("family %s declared twice (its samples must be together)" % name)
                if rest not in ("counter", "gauge", "info", "stateset", "histogram", "gaugehistogram", "summary",
                                "unknown"):
                    bad("family %s has type %r" % (name, rest))
                fams[name] = {"type": rest, "unit": None, "help": None, "samples": {}}
                cur = name
            else:
                if name != cur:
                    bad("line %d: %s for %s outside its family" % (n, kind, name))
                    continue
                if fams[name]["samples"]:
                    bad("line %d: %s after the samples of %s" % (n, kind, name))
                fams[name][kind.lower()] = rest
            continue
        m = SAMPLE.match(line)
        if not m:
            bad("line %d is no sample: %r" % (n, line))
            continue
        sname, labels, value = m.group(1), m.group(3) or "", m.group(4)
        if cur is None:
            bad("sample before any family: %r" % line)
            continue
        t = fams[cur]["type"]
        want = cur + {"counter": "_total", "info": "_info"}.get(t, "")
        if sname != want:
            bad("line %d: sample %s in family %s (%s) should be named %s" % (n, sname, cur, t, want))
        try:
            v = float(value)
        except ValueError:
            bad("line %d: value %r" % (n, value))
            continue
        if t == "counter" and v < 0:
            bad("line %d: negative counter" % n)
        if labels in fams[cur]["samples"]:
            bad("line %d: labels %s twice in %s" % (n, labels, cur))
        fams[cur]["samples"][labels] = v
    for name, f in fams.items():
        if not f["help"]:
            bad("family %s has no HELP" % name)
        unit = name.rsplit("_", 1)[-1]
        if unit in UNITS and f["unit"] != unit:
            bad("family %s has UNIT %r, its name says %s" % (name, f["unit"], unit))
        if f["unit"] is not None and not name.endswith("_" + f["unit"]):
            bad("family %s does not end with its unit %s" % (name, f["unit"]))
        if f["type"] == "counter" and name.endswith("_total"):
            bad("counter family %s ends with _total (its samples do)" % name)
    return fams if ok else fams


# ---- cases -----------------------------------------------------------------


def case_formats(tool, target, lib):
    t = Target(target, "pattern", lib)
    try:
        ctl = t.ctl()
        rc, out, err = run_tool(tool, ["--json", str(t.pid)])
        check(rc == 0, "--json: exit %d: %s" % (rc, err))
        try:
            doc = json.loads(out)["dpmalloc"]
        except (ValueError, KeyError) as e:
            check(False, "--json does not parse: %s" % e)
            return
        tot = doc["totals"]
        print("target's dpm_ctl:", ctl)
        print("tool's totals:   ", tot)
        # the target is idle (it waits on its stdin, background thread
        # off): every figure is exact
        for k in ("allocated", "active", "resident", "mapped", "retained", "metadata", "tcache_bytes",
                  "cpu_cache_bytes", "transfer_bytes", "large_cache_bytes"):
            check(tot[k] == ctl[k], "totals.%s: tool %d, dpm_ctl stats.%s %d" % (k, tot[k], k, ctl[k]))
        arenas = doc["arenas"].values()
        sums = {
            "small.nmalloc": sum(a["nmalloc_small"] for a in arenas),
            "small.ndalloc": sum(a["ndalloc_small"] for a in arenas),
            "large.nmalloc": sum(a["nmalloc_large"] for a in arenas),
            "large.ndalloc": sum(a["ndalloc_large"] for a in arenas),
            "small.allocated": sum(a["small_allocated"] for a in arenas),
            "large.allocated": sum(a["large_allocated"] for a in arenas),
        }
        for k, v in sums.items():
            check(v == ctl[k], "sum of arenas' %s: tool %d, dpm_ctl %d" % (k, v, ctl[k]))
        # the pattern: 1000 blocks of 100 bytes (live, cached ones
        # included: at least 1000), ten of 1 MiB (exactly)
        small = [b for a in arenas for b in a["bins"] if 100 <= b["size"] <= 128 and b["phase"] == 0]
        live = sum(b["curregs"] for b in small)
        # (under prof:true a sampled block is a page run of its own, not
        # a bin's: at most stats.prof.samples_live of them)
        sampled = doc.get("prof", {}).get("samples_live", 0)
        check(live >= 1000 - sampled, "live blocks of the 100-byte class: %d, want >= 1000 - %d sampled" %
              (live, sampled))
        big = sum(l["curlextents"] for a in arenas for l in a["large"] if l["size"] == 1 << 20)
        check(big == 10, "live 1 MiB blocks: %d, want 10" % big)
        for a in arenas:
            for b in a["bins"]:
                check(b["curregs"] == b["nmalloc"] - b["ndalloc"], "curregs = nmalloc - ndalloc: %r" % b)
        print("typed_cache_bytes:", tot["typed_cache_bytes"], "large_cache_bytes:", tot["large_cache_bytes"])
        check(doc.get("front_end") == ("cpu" if ctl["front_end_cpu"] else "thread"),
              "front_end %r, dpm_ctl stats.front_end %s" % (doc.get("front_end"), ctl["front_end_cpu"]))
        # the options in effect: those DPMALLOC_CONF set, the defaults
        opts = doc.get("options", {})
        conf = os.environ.get("DPMALLOC_CONF", "")
        if "background_thread:false" in conf:
            check(opts.get("background_thread") is False,
                  "options.background_thread %r with DPMALLOC_CONF=%s" % (opts.get("background_thread"), conf))
        check(opts.get("percpu") is ("percpu:false" not in conf),
              "options.percpu %r with DPMALLOC_CONF=%s" % (opts.get("percpu"), conf))
        check(opts.get("dirty_decay_ms") == 10000 and isinstance(opts.get("stats_print_opts"), str),
              "options: %r" % opts)
        check(isinstance(doc.get("unavailable"), list) and "epoch" in doc["unavailable"],
              "--json names what it cannot read")

        # the in-process report, key by key, where the tool reports the same
        # figure (the lock counters too: the report's snapshot took the
        # last locks before the target went idle)
        inproc = json.load(open(t.file + ".json"))["dpmalloc"]
        check(doc["nodes"] == inproc["nodes"], "nodes: tool %r, in-process %r" % (doc["nodes"], inproc["nodes"]))
        check(doc["types"] == inproc["types"], "types: tool %r, in-process %r" % (doc["types"], inproc["types"]))
        check(any(t["type"] == "stat_test" and t["live_blocks"] == 4 and t["nalloc"] == 8 for t in doc["types"]),
              "the type stat_test: 8 allocated, 4 live: %r" % doc["types"])
        check(doc["options"] == inproc["options"],
              "options differ: %r" % {k: (v, doc["options"].get(k)) for k, v in inproc["options"].items()
                                      if doc["options"].get(k) != v})
        same = ("name", "manual", "nthreads", "dirty_decay_ms", "muzzy_decay_ms", "node", "mapped", "reserved",
                "segments", "pactive", "pdirty", "pmuzzy", "pclean", "small_allocated", "large_allocated",
                "nmalloc_small", "ndalloc_small", "nmalloc_large", "ndalloc_large", "purge_passes",
                "purged_lazy_pages", "purged_pages", "slow_alloc_samples", "slow_free_samples",
                "slow_alloc_cycles_per_call", "slow_free_cycles_per_call", "arena_lock", "bin_locks", "bins", "large")
        check(sorted(doc["arenas"]) == sorted(inproc["arenas"]),
              "arenas %s, in-process %s" % (sorted(doc["arenas"]), sorted(inproc["arenas"])))
        compared = 0
        for i, theirs in inproc["arenas"].items():
            mine = doc["arenas"].get(i, {})
            for k in same:
                compared += 1
                check(mine.get(k) == theirs.get(k), "arena %s %s: tool %r, in-process %r" % (i, k, mine.get(k),
                                                                                          theirs.get(k)))
            pr_mine, pr_theirs = mine.get("page_runs", {}), theirs["page_runs"]
            for k in ("searches", "hits", "free_runs"):
                compared += 1
                check(pr_mine.get(k) == pr_theirs[k], "arena %s page_runs.%s: tool %r, in-process %r" %
                      (i, k, pr_mine.get(k), pr_theirs[k]))
        samples = [a["slow_alloc_samples"] for a in doc["arenas"].values()]
        print("%d arena figures equal to dpm_stats_print's (slow_alloc_samples: %s)" % (compared, samples))
        if "stats_cycles:true" in os.environ.get("DPMALLOC_CONF", ""):
            check(sum(samples) > 0, "stats_cycles:true and no slow-path sample read")

        # the same through /proc/PID/mem
        rc, out, err = run_tool(tool, ["--proc-mem", "--json", str(t.pid)])
        check(rc == 0, "--proc-mem --json: exit %d: %s" % (rc, err))
        if rc == 0:
            other = json.loads(out)["dpmalloc"]
            check(other["totals"] == doc["totals"] and other["arenas"] == doc["arenas"],
                  "--proc-mem reads other figures: %r" % other["totals"])

        rc, out, err = run_tool(tool, [str(t.pid)])
        check(rc == 0, "text: exit %d: %s" % (rc, err))
        text = out
        for k in ("allocated", "active", "resident", "mapped", "metadata"):
            check(re.search(r"^    %s: %d$" % (k, ctl[k]), out, re.M) is not None,
                  "text has no '%s: %d' line" % (k, ctl[k]))
        check("bins:" in out and "large:" in out and "not readable from outside:" in out,
              "text has its sections")

        rc, out, err = run_tool(tool, ["--openmetrics", str(t.pid)])
        check(rc == 0, "--openmetrics: exit %d: %s" % (rc, err))
        fams = check_openmetrics(out, "--openmetrics")
        for name in ("dpmalloc_allocated_bytes", "dpmalloc_active_bytes", "dpmalloc_resident_bytes",
                     "dpmalloc_mapped_bytes", "dpmalloc_retained_bytes", "dpmalloc_metadata_bytes",
                     "dpmalloc_cache_bytes", "dpmalloc_arena_pages", "dpmalloc_bin_mallocs",
                     "dpmalloc_bin_live_blocks", "dpmalloc_large_live_blocks", "dpmalloc_arena_purged_pages",
                     "dpmalloc_type_live_bytes"):
            check(name in fams, "--openmetrics has no family %s" % name)
        if "dpmalloc_allocated_bytes" in fams:
            v = fams["dpmalloc_allocated_bytes"]["samples"].get("")
            check(v == ctl["allocated"], "dpmalloc_allocated_bytes %s, dpm_ctl %d" % (v, ctl["allocated"]))
        if "dpmalloc_large_live_blocks" in fams:
            v = sum(x for lab, x in fams["dpmalloc_large_live_blocks"]["samples"].items() if 'size="1048576"' in lab)
            check(v == 10, "dpmalloc_large_live_blocks of 1 MiB: %s, want 10" % v)
        check_memory_prof(doc, inproc, ctl, text, fams)
        print("\n".join(out.splitlines()[:12]))
        print("\n".join(l for l in out.splitlines() if l.startswith(("dpmalloc_memory", "dpmalloc_prof"))))
    finally:
        t.close()


def case_watch(tool, target, lib):
    t = Target(target, "rate", lib)
    try:
        rc, out, err = run_tool(tool, ["--watch", "1", "--count", "2", "--json", str(t.pid)], timeout=30)
        check(rc == 0, "--watch --json: exit %d: %s" % (rc, err))
        lines = out.splitlines()
        check(len(lines) == 2, "--watch --count 2 printed %d lines" % len(lines))
        for line in lines:
            print(line)
            try:
                r = json.loads(line)
            except ValueError:
                check(False, "--watch line does not parse: %r" % line)
                continue
            # the target allocates 2000 blocks/s of 256 bytes and keeps
            # them; the bins hand blocks to the caches in batches
            check(0.9 <= r["interval_s"] <= 3, "interval %.3f s for --watch 1" % r["interval_s"])
            check(500 <= r["mallocs_per_s"] <= 8000, "mallocs/s %.1f, want about 2000" % r["mallocs_per_s"])
            check(128e3 <= r["allocated_bytes_per_s"] <= 2e6,
                  "allocated bytes/s %.1f, want about 512000" % r["allocated_bytes_per_s"])
            limit_mb, lg = conf_value("memory_limit_mb"), conf_value("lg_prof_sample")
            if limit_mb:
                # one allocation fails at the limit every 100 ms: refused
                # (at least once), reclaimed, failed; the reclaims drain
                # the caches into the bins (frees), refilled after
                check(5 <= r["limit_failures_per_s"] <= 15,
                      "limit failures/s %.1f, want about 10" % r["limit_failures_per_s"])
                check(r["limit_refusals_per_s"] >= r["limit_failures_per_s"] * 0.9 and
                      r["limit_reclaims_per_s"] >= r["limit_failures_per_s"] * 0.9,
                      "refusals/s %.1f, reclaims/s %.1f, failures/s %.1f" %
                      (r["limit_refusals_per_s"], r["limit_reclaims_per_s"], r["limit_failures_per_s"]))
                check(0 < r["charged"] <= limit_mb << 20, "charged %d under a limit of %d MiB" %
                      (r["charged"], limit_mb))
            else:
                check(r["frees_per_s"] <= r["mallocs_per_s"], "frees/s %.1f > mallocs/s" % r["frees_per_s"])
                check(r["limit_refusals_per_s"] == 0 and r["limit_failures_per_s"] == 0,
                      "no limit, and refusals/s %.1f" % r["limit_refusals_per_s"])
            if "prof:true" in os.environ.get("DPMALLOC_CONF", "") and lg is not None:
                # 512000 bytes a second, one sample per 2^lg bytes on average
                want = 512000.0 / (1 << lg)
                check(want / 4 <= r["prof_samples_per_s"] <= want * 4,
                      "prof samples/s %.1f, want about %.0f" % (r["prof_samples_per_s"], want))
                check(r["prof_samples_live"] > 0, "no live sample: %r" % r)
            elif "prof:true" not in os.environ.get("DPMALLOC_CONF", ""):
                check(r["prof_samples_per_s"] == 0, "no prof:true, and prof samples/s %.1f" % r["prof_samples_per_s"])
        rc, out, err = run_tool(tool, ["--watch", "0.2", "--count", "3", str(t.pid)], timeout=30)
        check(rc == 0, "--watch text: exit %d: %s" % (rc, err))
        lines = out.splitlines()
        check(len(lines) == 4 and "mallocs/s" in lines[0], "--watch text: a header and 3 lines: %r" % lines)
        if lines:
            cols = lines[0].split()
            check(cols[5:10] == ["refusals/s", "reclaims/s", "failures/s", "soft_pass/s", "samples/s"] and
                  cols[-1] == "charged" and all(len(l.split()) == len(cols) for l in lines),
                  "--watch text columns: %r" % lines)
        # the process exits while watched: status 3, no hang
        w = subprocess.Popen([tool, "--watch", "0.2", str(t.pid)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        wm = subprocess.Popen([tool, "--proc-mem", "--watch", "0.2", str(t.pid)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
        time.sleep(1)
    finally:
        t.close()
    for proc in (w, wm):
        try:
            out, err = proc.communicate(timeout=20)
            check(proc.returncode == 3 and "no process with pid %d" % t.pid in err,
                  "%s of a process that exits: exit %s, stderr %r" % (proc.args, proc.returncode, err))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            check(False, "%s did not stop when the process exited" % proc.args)


def case_above(tool, target, lib):
    """The time above the soft limit includes the ongoing spell, which
    the tool times with the process's clock: it grows between two reads
    by the time between them, and is never less than the target's own
    reading before."""
    t = Target(target, "above", lib)
    try:
        ctl = t.ctl()
        check(ctl["memory.above_soft_limit"] == 1, "the target is not above its soft limit: %r" % ctl)
        reads = []
        for i in range(2):
            start = time.monotonic()
            rc, out, err = run_tool(tool, ["--json", str(t.pid)])
            end = time.monotonic()
            if not check(rc == 0, "--json: exit %d: %s" % (rc, err)):
                return
            reads.append((start, end, json.loads(out)["dpmalloc"]["memory"]))
            if i == 0:
                time.sleep(0.5)
        for _, _, mem in reads:
            print("tool's memory:", mem)
            check(mem["above_soft_limit"] is True and mem["soft_limit_passes"] == ctl["memory.soft_limit_passes"],
                  "above the soft limit: %r" % mem)
            check(mem["soft_limit_above_ms"] >= ctl["memory.soft_limit_above_ms"],
                  "soft_limit_above_ms %d < the target's %d, read before" % (mem["soft_limit_above_ms"],
                                                                             ctl["memory.soft_limit_above_ms"]))
        (s0, e0, m0), (s1, e1, m1) = reads
        grew = m1["soft_limit_above_ms"] - m0["soft_limit_above_ms"]
        lo, hi = (s1 - e0) * 1000 - 2, (e1 - s0) * 1000 + 2
        check(lo <= grew <= hi, "soft_limit_above_ms grew by %d ms between reads %.0f..%.0f ms apart" %
              (grew, lo, hi))
        rc, out, err = run_tool(tool, ["--openmetrics", str(t.pid)])
        fams = check_openmetrics(out, "--openmetrics")
        v = fams.get("dpmalloc_memory_soft_limit_above_seconds", {}).get("samples", {}).get("", 0)
        check(v * 1000 >= m1["soft_limit_above_ms"], "dpmalloc_memory_soft_limit_above_seconds %r before %d ms" %
              (v, m1["soft_limit_above_ms"]))
        check(fams.get("dpmalloc_memory_above_soft_limit", {}).get("samples", {}).get("") == 1,
              "dpmalloc_memory_above_soft_limit is not 1")
        print("grew by %d ms between reads %.0f..%.0f ms apart; OpenMetrics %.3f s" % (grew, lo, hi, v))
    finally:
        t.close()


def case_stress(tool, target, lib):
    t = Target(target, "churn", lib)
    start = time.monotonic()
    try:
        for i in range(200):
            fmt = (["--json"], ["--openmetrics"], [])[i % 3]
            rc, out, err = run_tool(tool, fmt + [str(t.pid)], timeout=10)
            if not check(rc == 0, "read %d (%s): exit %d: %s" % (i, fmt, rc, err)):
                break
            if fmt == ["--json"]:
                try:
                    tot = json.loads(out)["dpmalloc"]["totals"]
                    check(tot["allocated"] <= tot["mapped"], "read %d: allocated > mapped: %r" % (i, tot))
                except ValueError as e:
                    check(False, "read %d: JSON does not parse: %s" % (i, e))
                    break
            elif fmt == ["--openmetrics"]:
                n = len(failures)
                check_openmetrics(out, "read %d" % i)
                if len(failures) > n:
                    break
        check(t.p.poll() is None, "the target died while read")
        print("200 reads in %.1f s while 2 threads churn" % (time.monotonic() - start))
    finally:
        t.close()


def case_errors(tool, target, fake_abi, fake_size, fake_magic, lib, fake_garbage):
    def expect(args, rc_want, text, **kw):
        rc, out, err = run_tool(tool, args, **kw)
        check(rc == rc_want and text in err, "%s: exit %d (want %d), stderr %r (want %r)" %
              (" ".join(args), rc, rc_want, err, text))
        print("%s -> %d: %s" % (" ".join(args), rc, err.strip()))

    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        expect([str(sleeper.pid)], 5, "is not a dpmalloc process")
    finally:
        sleeper.kill()
        sleeper.wait()
    # a pid that is gone (reaped just now: reuse within the test is unlikely)
    expect([str(sleeper.pid)], 3, "no process with pid %d" % sleeper.pid)
    # review of issue 22: a process that execs into a program without
    # dpmalloc while watched is "no longer runs dpmalloc" (5), not gone (3);
    # a watch whose output fails (a full disk) ends with 1
    if lib is not None:
        env = dict(os.environ, LD_PRELOAD=lib)
        execer = subprocess.Popen(["bash", "-c", "sleep 0.8; exec sleep 5"], env=env)
        try:
            time.sleep(0.3)
            rc, out, err = run_tool(tool, ["--watch", "0.2", "--count", "20", str(execer.pid)])
            check(rc == 5 and "no longer runs dpmalloc" in err, "watch across an exec: exit %d, %r" % (rc, err))
        finally:
            execer.kill()
            execer.wait()
        quiet_proc = subprocess.Popen(["sleep", "5"], env=env)
        try:
            time.sleep(0.3)
            with open("/dev/full", "w") as full:
                p = subprocess.run([tool, "--watch", "0.05", "--count", "3", str(quiet_proc.pid)], stdout=full,
                                   stderr=subprocess.PIPE, timeout=20)
            check(p.returncode == 1, "watch into /dev/full: exit %d" % p.returncode)
        finally:
            quiet_proc.kill()
            quiet_proc.wait()
    for exe, rc_want, text in ((fake_abi, 6, "dpmalloc version mismatch"),
                               (fake_size, 6, "dpmalloc version mismatch"),
                               (fake_magic, 5, "is not a dpmalloc process")):
        p = subprocess.Popen([exe], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            check(p.stdout.readline().startswith(b"ready"), "%s did not start" % exe)
            expect([str(p.pid)], rc_want, text)
        finally:
            p.stdin.close()
            p.wait(timeout=30)
    # an anchor whose pointers lead into random words: every format ends
    # in bounded time, without a crash, with a report that parses or a
    # clear refusal
    p = subprocess.Popen([fake_garbage], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        check(p.stdout.readline().startswith(b"ready"), "%s did not start" % fake_garbage)
        for fmt in (["--json"], ["--openmetrics"], [], ["--watch", "0.1", "--count", "2", "--json"]):
            start = time.monotonic()
            rc, out, err = run_tool(tool, fmt + [str(p.pid)], timeout=60)
            print("garbage %s -> %d in %.2f s: %s" % (fmt, rc, time.monotonic() - start, err.strip()))
            check(rc in (0, 1), "garbage %s: exit %d: %s" % (fmt, rc, err))
            if rc == 0 and fmt == ["--json"]:
                try:
                    json.loads(out)
                except ValueError as e:
                    check(False, "garbage: JSON does not parse: %s" % e)
            if rc == 0 and fmt == ["--openmetrics"]:
                check_openmetrics(out, "garbage --openmetrics")
    finally:
        p.stdin.close()
        p.wait(timeout=30)
    # permission: as root, the tool run as nobody; as another user, a
    # preloaded process that allows no tracer under Yama (ptrace_scope >= 1)
    if os.geteuid() == 0:
        t = Target(target, "pattern")
        try:
            def drop():
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
            expect([str(t.pid)], 4, "permission denied (same user or CAP_SYS_PTRACE; see "
                   "/proc/sys/kernel/yama/ptrace_scope)", preexec_fn=drop)
        finally:
            t.close()
    else:
        try:
            scope = int(open("/proc/sys/kernel/yama/ptrace_scope").read())
        except OSError:
            scope = 0
        if scope >= 1:
            env = dict(os.environ, LD_PRELOAD=lib)
            s = subprocess.Popen(["sleep", "60"], env=env)
            time.sleep(0.3)
            try:
                expect([str(s.pid)], 4, "permission denied")
            finally:
                s.kill()
                s.wait()
        elif os.stat("/proc/1").st_uid != os.geteuid():
            expect(["1"], 4, "permission denied")
        else:
            print("permission case not run: not root, Yama does not restrict this user, pid 1 is ours")
    expect([], 2, "usage:")
    expect(["--json", "--openmetrics", "1"], 2, "exclude each other")
    expect(["--count", "2", "1"], 2, "--count goes with --watch")
    expect(["--watch", "0", "1"], 2, "--watch wants seconds")
    expect(["--openmetrics", "--watch", "1", "1"], 2, "--watch prints rates as text or JSON")
    expect(["12x"], 2, "is not a process id")


def case_checker():
    global quiet
    good = ("# TYPE dpmalloc_x_bytes gauge\n# UNIT dpmalloc_x_bytes bytes\n# HELP dpmalloc_x_bytes x.\n"
            "dpmalloc_x_bytes{arena=\"0\"} 1\n# TYPE dpmalloc_n counter\n# HELP dpmalloc_n n.\n"
            "dpmalloc_n_total 3\n# EOF\n")
    bad = {
        "no EOF": good[:-len("# EOF\n")],
        "no HELP": good.replace("# HELP dpmalloc_n n.\n", ""),
        "no UNIT": good.replace("# UNIT dpmalloc_x_bytes bytes\n", ""),
        "counter without _total": good.replace("dpmalloc_n_total 3", "dpmalloc_n 3"),
        "split family": good.replace("# EOF\n", "dpmalloc_x_bytes{arena=\"1\"} 2\n# EOF\n"),
        "bad label": good.replace('{arena="0"}', "{arena=0}"),
        "blank line": good.replace("# TYPE dpmalloc_n", "\n# TYPE dpmalloc_n"),
    }
    n = len(failures)
    check_openmetrics(good, "good exposition")
    check(len(failures) == n, "the checker flags a good exposition")
    for what, text in bad.items():
        n = len(failures)
        quiet = True
        check_openmetrics(text, what)
        quiet = False
        flagged = len(failures) > n
        print("%s: %s" % (what, failures[n] if flagged else "not flagged"))
        del failures[n:]
        check(flagged, "the checker misses: " + what)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    case = sys.argv[1]
    if case == "check_openmetrics":
        check_openmetrics(open(sys.argv[2]).read(), sys.argv[2])
    elif case in ("formats", "watch", "stress", "above"):
        tool, target = sys.argv[2], sys.argv[3]
        lib = sys.argv[4] if len(sys.argv) > 4 else None
        {"formats": case_formats, "watch": case_watch, "stress": case_stress, "above": case_above}[case](tool, target,
                                                                                                       lib)
    elif case == "errors":
        case_errors(*sys.argv[2:9])
    elif case == "checker":
        case_checker()
    else:
        sys.exit("unknown case " + case)
    if failures:
        print("%d failed checks" % len(failures))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
