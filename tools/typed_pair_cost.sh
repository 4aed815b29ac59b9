#!/usr/bin/env bash
# The dpm_malloc_typed(64)/dpm_free pair: wall time per pair, median of 7
# runs of PAIRS (default 2M) pairs per thread, 1 thread pinned to the
# first allowed CPU and 2 threads pinned to the first two (same type
# name). Links the static library of each build directory given (default
# build/); several are measured round by round, interleaved, so that a
# busy machine slows them alike.
# Usage: [PAIRS=n] tools/typed_pair_cost.sh [build dir...]
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
pairs=${PAIRS:-2000000}
[ $# -gt 0 ] || set -- "$src/build"
tmp=$(mktemp -d)
for i in $(seq $#); do
    dir=${!i}
    cc -O2 -I"$src/include" "$src/tools/typed_pair_loop.c" "$dir/libdpmalloc_plain.a" -lpthread -lm -ldl -o "$tmp/loop$i"
done
declare -A runs
for round in 1 2 3 4 5 6 7; do
    for i in $(seq $#); do
        for t in 1 2; do
            runs[$i,$t]="${runs[$i,$t]:-} $("$tmp/loop$i" "$pairs" "$t")"
        done
    done
done
printf '%-40s %8s %14s\n' build threads "ns/pair (med)"
for i in $(seq $#); do
    for t in 1 2; do
        med=$(printf '%s\n' ${runs[$i,$t]} | sort -n | sed -n 4p)
        printf '%-40s %8d %14s   runs:%s\n' "${!i}" "$t" "$med" "${runs[$i,$t]}"
    done
done
rm -rf "$tmp"
