#!/bin/sh
# rte_compat_refused.sh - the rte_malloc.h calls of DPDK 22.11 that the
# rte_malloc layer does not provide (rte_malloc_heap_memory_add, _remove,
# _attach, _detach) fail to compile in a switched program, with a message
# that names the call, instead of reaching DPDK's function at run time.
# A control program that calls a provided function the same way must
# compile, so a broken command line cannot pass for a refusal.
#
# usage: rte_compat_refused.sh <C compiler> <dpmalloc include dir> [DPDK cflags...]
# With DPDK cflags, <rte_malloc.h> is included before the layer's header
# (DPDK's declarations are then in scope too).
set -u
cc=$1 inc=$2
shift 2
work=$(mktemp -d "${TMPDIR:-/tmp}/dpm-refused.XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT
dpdk=
[ $# -gt 0 ] && dpdk=1
failures=0

write() { # <file> <call>
    {
        [ -n "$dpdk" ] && echo "#include <rte_malloc.h>"
        echo "#define DPM_RTE_COMPAT_NAMES"
        echo "#include <dpmalloc/rte_compat.h>"
        echo "static char mem[1 << 16];"
        echo "int main(void) { return $2; }"
    } >"$1"
}

write "$work/control.c" "rte_malloc_heap_create(\"h\") + (rte_malloc(0, 1, 0) != 0) + (mem[0] != 0)"
if ! "$cc" -std=c11 -Wall -Wextra -Werror -fsyntax-only -I"$inc" "$@" "$work/control.c" 2>"$work/control.err"; then
    cat "$work/control.err"
    echo "FAIL: the control program (provided calls) does not compile"
    exit 1
fi
for fn in rte_malloc_heap_memory_add rte_malloc_heap_memory_remove rte_malloc_heap_memory_attach \
          rte_malloc_heap_memory_detach; do
    case $fn in
    *_add) call="$fn(\"h\", mem, sizeof mem, 0, 16, 4096)" ;;
    *) call="$fn(\"h\", mem, sizeof mem)" ;;
    esac
    write "$work/$fn.c" "$call"
    if "$cc" -std=c11 -Wall -Wextra -Werror -fsyntax-only -I"$inc" "$@" "$work/$fn.c" 2>"$work/$fn.err"; then
        echo "FAIL: $fn compiles in a switched program"
        failures=$((failures + 1))
    elif grep -q "$fn() is not provided by dpmalloc's rte_malloc layer" "$work/$fn.err"; then
        echo "ok: $fn refused: $(grep -m1 "not provided" "$work/$fn.err")"
    else
        echo "FAIL: $fn is refused without the layer's message:"
        cat "$work/$fn.err"
        failures=$((failures + 1))
    fi
done
[ "$failures" -eq 0 ] || exit 1
echo "refused calls ok ($cc${dpdk:+, with DPDK's rte_malloc.h})"
