#!/usr/bin/env python3
"""readme_table.py - every entry of the dpmalloc column of README's "For a
jemalloc, mimalloc or tcmalloc user" table exists.

Each `code` span of that column must be one of:
  dpm_ctl("name")   a row of docs/ctl.md's tables (test ctl_docs proves
                    each of those resolves, with its type and access);
  key:value         a key of docs/config.md's table, and a program started
                    with DPMALLOC_CONF=key:value prints no warning and reads
                    opt.<key> back as value (through conf_child);
  name()            dpm_*: declared in include/dpmalloc.h; another name: a
                    libc entry point defined in src/override.c, or a
                    jemalloc function of include/dpmalloc/jemalloc.h
                    defined (DPM_EXPORT) in src/jemalloc_api.c;
  NAME              declared in include/dpmalloc.h or
                    include/dpmalloc/jemalloc.h, or DPMALLOC_CONF /
                    dpm_conf as read in src/conf.c, MALLOC_CONF /
                    malloc_conf as read in src/conf_jemalloc.c.
Anything else fails (an unchecked claim), and so does a row whose cell has
no entry and does not say "none", and a "none" row whose peer function,
less its mi_/je_/tc_ prefix, is a dpm_ function of include/dpmalloc.h
(mimalloc's mi_good_size() has dpm_good_size()).

usage: readme_table.py <source dir> <conf_child binary>
"""
import os
import re
import subprocess
import sys

src, child = sys.argv[1], sys.argv[2]
failures = []


def read(rel):
    with open(os.path.join(src, rel)) as f:
        return f.read()


readme = read("README.md")
m = re.search(r"^## For a jemalloc, mimalloc or tcmalloc user\n(.*?)(?=^## )", readme, re.M | re.S)
if not m:
    sys.exit("FAIL: README has no 'For a jemalloc, mimalloc or tcmalloc user' section")
rows = [l for l in m.group(1).splitlines() if l.startswith("| ") and not l.startswith("| allocator")]
if len(rows) < 10:
    sys.exit(f"FAIL: only {len(rows)} table rows found")

ctl_doc = {r for r in re.findall(r"^\| `([^`]+)` \|", read("docs/ctl.md"), re.M)}
conf_keys = {r for r in re.findall(r"^\| `([a-z_]+)` \|", read("docs/config.md"), re.M)}
header = read("include/dpmalloc.h")
override = read("src/override.c")
conf_c = read("src/conf.c")
je_header = read("include/dpmalloc/jemalloc.h")
je_api = read("src/jemalloc_api.c")
conf_je = read("src/conf_jemalloc.c")


def norm(v):
    return {"true": "1", "false": "0"}.get(v, v)


def check_conf(key, value):
    if key not in conf_keys:
        return f"`{key}` is not a key of docs/config.md"
    r = subprocess.run([child], env=dict(os.environ, DPMALLOC_CONF=f"{key}:{value}"),
                       capture_output=True, text=True)
    if r.returncode != 0:
        return f"conf_child failed with DPMALLOC_CONF={key}:{value}: {r.stderr.strip()}"
    # the parser's warnings (docs/config.md); hugepages:true may warn that
    # the system has none, which is not about the string
    refused = [l for l in r.stderr.splitlines()
               if l.startswith(("dpmalloc: unknown option", "dpmalloc: bad value for option"))]
    if refused:
        return f"DPMALLOC_CONF={key}:{value} is refused: {refused[0]}"
    got = dict(l.split("=", 1) for l in r.stdout.splitlines() if "=" in l)
    if got.get("opt." + key) != norm(value):
        return f"DPMALLOC_CONF={key}:{value} reads back opt.{key}={got.get('opt.' + key)}"
    return None


def check(span):
    c = re.fullmatch(r'dpm_ctl\("([^"]+)"\)', span)
    if c:
        return None if c.group(1) in ctl_doc else f'dpm_ctl("{c.group(1)}") is not in docs/ctl.md'
    c = re.fullmatch(r"([a-z_]+):(\S+)", span)
    if c:
        return check_conf(c.group(1), c.group(2))
    c = re.fullmatch(r"([A-Za-z_]\w*)\((.*)\)", span)
    if c:
        name = c.group(1)
        if name.startswith("dpm_"):
            ok = re.search(r"\b%s\s*\(" % name, header)
            return None if ok else f"{name}() is not declared in include/dpmalloc.h"
        ok = re.search(r"^LIBC_ENTRY\b.*\b%s\s*\(" % name, override, re.M)
        if not ok and re.search(r"\b%s\s*\(" % name, je_header):
            ok = re.search(r"^DPM_EXPORT\b.*\b%s\s*\(" % name, je_api, re.M)
        return None if ok else f"{name}() is neither a libc entry point of src/override.c nor a jemalloc function of src/jemalloc_api.c"
    c = re.fullmatch(r"[A-Za-z_]\w*", span)
    if c:
        if re.search(r"\b%s\b" % span, header):
            return None
        if span == "DPMALLOC_CONF" and '"DPMALLOC_CONF"' in conf_c:
            return None
        if span == "dpm_conf" and re.search(r"extern const char \*dpm_conf\b", conf_c):
            return None
        if re.search(r"#define %s\b" % span, je_header):
            return None
        if span == "MALLOC_CONF" and '"MALLOC_CONF"' in conf_je:
            return None
        if span == "malloc_conf" and re.search(r"extern const char \*malloc_conf\b", conf_je):
            return None
        return f"`{span}` is neither in include/dpmalloc.h nor read by src/conf.c"
    return f"`{span}` is no kind of entry this test can check"


def none_claim_errors(peer, names):
    """A 'none' row claims dpmalloc has no equivalent: a peer function
    whose name without its prefix (mi_, je_, tc_) is a dpm_ function of
    include/dpmalloc.h makes the claim false (mi_good_size: dpm_good_size)."""
    errs = []
    for fn in re.findall(r"`(?:[A-Za-z_:]+::)?([A-Za-z_]\w*)\(", names):
        stem = re.sub(r"^(mi|je|tc)_", "", fn)
        if re.search(r"\bdpm_%s\s*\(" % stem, header):
            errs.append(f"{peer} {fn}(): the row says none, but include/dpmalloc.h declares dpm_{stem}()")
    return errs


nentries = 0
for row in rows:
    cells = [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]
    if len(cells) != 3:
        failures.append(f"row does not have 3 cells: {row}")
        continue
    cell = cells[2]
    spans = re.findall(r"`([^`]+)`", cell)
    if not spans and not cell.startswith("none"):
        failures.append(f"no entry and not 'none': {row}")
    if cell.startswith("none"):
        failures += none_claim_errors(cells[0], cells[1])
    for s in spans:
        nentries += 1
        err = check(s)
        if err:
            failures.append(f"{cells[0]} {cells[1]}: {err}")

for f in failures:
    print("FAIL:", f)
print(f"{len(rows)} rows, {nentries} dpmalloc entries checked, {len(failures)} failures")
sys.exit(1 if failures else 0)
