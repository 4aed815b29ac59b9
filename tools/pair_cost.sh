#!/usr/bin/env bash
# The malloc(64)/free pair: instructions per pair under callgrind (exact:
# the difference between 2M and 1M pairs, so start-up cancels out; the
# loop's own instructions are included) and wall time per pair (median of
# 7 pinned runs of 20M pairs, all allocators interleaved in the same run),
# for dpmalloc and every peer found. Usage: tools/pair_cost.sh [libdpmalloc.so]
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
dpm=${1:-$src/build/libdpmalloc.so}
bin=$(mktemp -d)/pair_loop
cc -O2 "$src/tools/pair_loop.c" -o "$bin"
declare -A lib=([dpmalloc]=$dpm [glibc]="")
. "$src/tools/peers.sh"
names=(dpmalloc glibc jemalloc tcmalloc mimalloc)
instr() {
    env ${2:+LD_PRELOAD=$2} valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" "$1" 2>&1 |
        awk '/Collected/ {print $4}'
}
declare -A times
for round in 1 2 3 4 5 6 7; do
    for n in "${names[@]}"; do
        [ -v "lib[$n]" ] || continue
        t=$(env ${lib[$n]:+LD_PRELOAD=${lib[$n]}} taskset -c 0 "$bin" 20000000)
        times[$n]="${times[$n]:-} $t"
    done
done
printf '%-10s %12s %14s\n' allocator "instr/pair" "ns/pair (med)"
for n in "${names[@]}"; do
    [ -v "lib[$n]" ] || continue
    if command -v valgrind >/dev/null; then
        a=$(instr 1000000 "${lib[$n]}")
        b=$(instr 2000000 "${lib[$n]}")
        ipp=$(( (b - a) / 1000000 ))
    else
        ipp=n/a
    fi
    med=$(printf '%s\n' ${times[$n]} | sort -n | sed -n 4p)
    printf '%-10s %12s %14s\n' "$n" "$ipp" "$med"
done
