#!/usr/bin/env bash
# runtime_deps.sh - dpmalloc depends on nothing beyond libc (and the
# dynamic loader / libpthread): preloading libdpmalloc.so into a C program
# must not load the C++ runtime, although the library exports C++'s
# operator new/delete (they reach libstdc++ through weak references only).
#
#   runtime_deps.sh <libdpmalloc.so> <libdpmalloc.a>
#
# 1. the NEEDED entries of libdpmalloc.so (readelf -d, or objdump -p):
#    libc.so.6 present, nothing outside libc / libpthread / ld-linux;
# 2. libdpmalloc.a references no C++ runtime or unwinder symbol strongly
#    (nm -u: "U" entries named _Z*, __cxa_*, __gxx_*, _Unwind_*);
# 3. a C program (cat) with libdpmalloc.so preloaded maps no libstdc++ or
#    libgcc_s.
set -euo pipefail
so=$(readlink -f "$1")
ar=$(readlink -f "$2")
fail() {
    echo "FAIL: $*" >&2
    exit 1
}
[ -f "$so" ] || fail "no shared library at $so"
[ -f "$ar" ] || fail "no static library at $ar"

if command -v readelf >/dev/null; then
    needed=$(readelf -d "$so" | sed -n 's/.*(NEEDED).*\[\(.*\)\].*/\1/p')
else
    needed=$(objdump -p "$so" | awk '$1 == "NEEDED" {print $2}')
fi
echo "NEEDED of $so:" $needed
echo "$needed" | grep -qx 'libc\.so\.[0-9]*' || fail "libc.so not among the NEEDED entries (parse error?)"
bad=$(echo "$needed" | grep -vx -e 'libc\.so\.[0-9]*' -e 'libpthread\.so\.[0-9]*' -e 'ld-linux.*\.so\.[0-9]*' || true)
[ -z "$bad" ] || fail "libdpmalloc.so needs more than libc:" $bad

strong=$(nm -u "$ar" | awk '$1 == "U" {print $2}' |
    grep -E '^(_Z|__cxa_|__gxx_|_Unwind_)' | sort -u || true)
[ -z "$strong" ] || fail "libdpmalloc.a references the C++ runtime strongly:" $strong
weak=$(nm -u "$ar" | awk '$1 == "w" {print $2}' | grep -E '^_Z' | sort -u || true)
echo "weak C++ references of libdpmalloc.a:" $weak

maps=$(LD_PRELOAD=$so cat /proc/self/maps)
echo "$maps" | grep -qF "$so" || fail "libdpmalloc.so not mapped into the preloaded cat"
if echo "$maps" | grep -E 'libstdc\+\+|libgcc_s' >&2; then
    fail "preloading libdpmalloc.so loads the C++ runtime into a C program"
fi
echo "1 passed, 0 failed"
