#!/usr/bin/env python3
"""code_blocks.py - every fenced C or C++ block of README.md and docs/*.md
compiles against include/ (ctest doc_code_blocks).

Which blocks: those whose fence names the language c, C, h (C) or cpp, c++,
cxx, C++ (C++). Blocks with another language (sh, cmake, xml) or none
(sample output) are not compiled.

How a block is compiled (a rule, so a block's author knows what holds):
  - a block without an #include line gets `#include <dpmalloc.h>`: it
    may use the header's names without including it, and must compile
    with that header alone; a block that includes headers must compile
    with exactly those;
  - the block's leading preprocessor lines (#include, #define, ...) stay at
    file scope, and everything after them becomes the body of a function:
    statements, declarations, static variables, struct definitions and
    function prototypes are all legal there;
  - `<!-- compile: file -->` on the line before the fence compiles the
    block as it is, as a whole file (for blocks that define functions);
  - `<!-- no-compile: reason -->` on the line before the fence skips the
    block, and the reason is printed; a block that includes a DPDK header
    (<rte_*.h>) is skipped when DPDK's flags were not given (no
    libdpdk-dev), which is also printed.
C: gcc/clang -std=c11, C++: -std=c++17, both -fsyntax-only -Wall -Wextra
-Werror (unused variables allowed: fragments declare what they show).

usage: code_blocks.py <source dir> <C compiler> <C++ compiler or "">
                      [DPDK cflags ...]
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

src, cc, cxx = sys.argv[1], sys.argv[2], sys.argv[3]
dpdk_flags = sys.argv[4:]

C_LANGS = {"c", "C", "h"}
CXX_LANGS = {"cpp", "c++", "cxx", "C++"}
FENCE = re.compile(r"^(\s*)```\s*([A-Za-z+]*)\s*$")
NO_COMPILE = re.compile(r"^\s*<!--\s*no-compile:\s*(.+?)\s*-->\s*$")
AS_FILE = re.compile(r"^\s*<!--\s*compile:\s*file\s*-->\s*$")


def blocks(path):
    """(first line number, language, text, annotation) of each fenced block."""
    lines = open(path).read().splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, lang = i, m.group(2)
        j = i + 1
        while j < len(lines) and not re.match(r"^\s*```\s*$", lines[j]):
            j += 1
        prev = lines[start - 1] if start > 0 else ""
        yield start + 1, lang, "\n".join(lines[start + 1:j]) + "\n", prev
        i = j + 1


def as_source(text, whole_file):
    head = "" if re.search(r"^\s*#\s*include\b", text, re.M) else "#include <dpmalloc.h>\n"
    if whole_file:
        return head + text
    lines = text.splitlines()
    k = 0
    while k < len(lines) and (lines[k].strip() == "" or lines[k].lstrip().startswith("#")):
        k += 1
    body = "\n".join(lines[k:])
    return head + "\n".join(lines[:k]) + "\nvoid doc_block(void);\nvoid doc_block(void)\n{\n" + body + "\n}\n"


files = [os.path.join(src, "README.md")] + sorted(glob.glob(os.path.join(src, "docs", "*.md")))
failures = 0
compiled = 0
skipped = []
with tempfile.TemporaryDirectory() as tmp:
    for path in files:
        rel = os.path.relpath(path, src)
        for line, lang, text, prev in blocks(path):
            if lang not in C_LANGS and lang not in CXX_LANGS:
                continue
            where = f"{rel}:{line}"
            m = NO_COMPILE.match(prev)
            if m:
                skipped.append(f"{where}: {m.group(1)}")
                continue
            is_cxx = lang in CXX_LANGS
            if is_cxx and not cxx:
                skipped.append(f"{where}: no C++ compiler")
                continue
            extra = []
            if re.search(r"#\s*include\s*<rte_", text):
                if not dpdk_flags:
                    skipped.append(f"{where}: includes a DPDK header and DPDK was not found (libdpdk-dev)")
                    continue
                extra = dpdk_flags
            code = as_source(text, AS_FILE.match(prev) is not None)
            fn = os.path.join(tmp, "block" + (".cpp" if is_cxx else ".c"))
            with open(fn, "w") as f:
                f.write(code)
            cmd = [cxx if is_cxx else cc, "-std=c++17" if is_cxx else "-std=c11", "-fsyntax-only", "-Wall",
                   "-Wextra", "-Werror", "-Wno-unused-variable", "-Wno-unused-but-set-variable",
                   "-I" + os.path.join(src, "include")] + extra + [fn]
            r = subprocess.run(cmd, capture_output=True, text=True)
            compiled += 1
            if r.returncode != 0:
                failures += 1
                print(f"FAIL: {where} ({lang}) does not compile:")
                numbered = "\n".join(f"  {n + 1:3}  {l}" for n, l in enumerate(code.splitlines()))
                print(numbered)
                print("  " + r.stderr.strip().replace(fn, "block").replace("\n", "\n  "))
            else:
                print(f"ok: {where} ({lang})")
for s in skipped:
    print("skipped:", s)
print(f"{compiled} blocks compiled, {len(skipped)} skipped, {failures} failures")
if compiled == 0:
    print("FAIL: no C or C++ block found: the extraction is broken")
    sys.exit(1)
sys.exit(1 if failures else 0)
