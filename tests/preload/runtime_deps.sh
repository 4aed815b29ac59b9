#!/usr/bin/env bash
# runtime_deps.sh - dpmalloc depends on nothing beyond libc (and the
# dynamic loader / libpthread): preloading libdpmalloc.so into a C program
# must not load the C++ runtime, although the library exports C++'s
# operator new/delete (they reach libstdc++ through weak references only).
#
#   runtime_deps.sh <libdpmalloc.so> <libdpmalloc.a> <C compiler>
#
# 1. the NEEDED entries of libdpmalloc.so (readelf -d, or objdump -p):
#    libc.so.6 present, nothing outside libc / libpthread / ld-linux;
# 2. libdpmalloc.a references the C++ runtime or unwinder strongly (nm -u:
#    "U" entries named _Z*, __cxa_*, __gxx_*, _Unwind_*) only from its
#    member with the C++ operators (override_cxx.cc.o), which the linker
#    takes only for C++ code; a C program links against libdpmalloc.a,
#    dynamically and with -static, without libstdc++ and gets no operator;
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

cc=$3
# nm -A -u: "archive:member: U name"
strong=$(nm -A -u "$ar" | awk '$2 == "U" {print $1, $3}' |
    grep -E ' (_Z|__cxa_|__gxx_|_Unwind_)' | grep -v '^[^ ]*:override_cxx\.cc\.o: ' | sort -u || true)
[ -z "$strong" ] || fail "libdpmalloc.a references the C++ runtime strongly outside override_cxx.cc.o:" $strong
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#include <stdlib.h>\nint main(void) { void *p = malloc(10); free(p); return p == NULL; }\n' >"$tmp/c.c"
for mode in dynamic static; do
    flag=
    [ $mode = static ] && flag=-static
    # no static libc installed: only the dynamic link is checked
    if [ $mode = static ] && ! "$cc" -static "$tmp/c.c" -o "$tmp/probe" 2>/dev/null; then
        echo "no static libc: -static link not checked"
        continue
    fi
    "$cc" $flag "$tmp/c.c" "$ar" -lpthread -o "$tmp/c_$mode" ||
        fail "a C program does not link ($mode) against libdpmalloc.a without libstdc++"
    "$tmp/c_$mode" || fail "the C program linked ($mode) against libdpmalloc.a failed"
    if nm "$tmp/c_$mode" | grep -E ' (_Znwm|_ZSt17__throw_bad_allocv|__gxx_personality_v0)$' >&2; then
        fail "a C program linked ($mode) against libdpmalloc.a got the C++ operators or runtime"
    fi
done
weak=$(nm -u "$ar" | awk '$1 == "w" {print $2}' | grep -E '^_Z' | sort -u || true)
echo "weak C++ references of libdpmalloc.a:" $weak

maps=$(LD_PRELOAD=$so cat /proc/self/maps)
echo "$maps" | grep -qF "$so" || fail "libdpmalloc.so not mapped into the preloaded cat"
if echo "$maps" | grep -E 'libstdc\+\+|libgcc_s' >&2; then
    fail "preloading libdpmalloc.so loads the C++ runtime into a C program"
fi
echo "1 passed, 0 failed"
