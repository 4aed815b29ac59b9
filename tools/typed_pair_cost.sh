#!/usr/bin/env bash
# The dpm_malloc_typed(64)/dpm_free pair: wall time per pair, median of 7
# runs of 2M pairs per thread, 1 thread pinned to CPU 0 and 2 threads
# pinned to CPUs 0 and 1 (same type name). Links the static library of a
# build. Usage: tools/typed_pair_cost.sh [build dir] [pairs]
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}
pairs=${2:-2000000}
bin=$(mktemp -d)/typed_pair_loop
cc -O2 -I"$src/include" "$src/tools/typed_pair_loop.c" "$build/libdpmalloc_plain.a" -lpthread -lm -ldl -o "$bin"
for t in 1 2; do
    runs=()
    for round in 1 2 3 4 5 6 7; do
        runs+=("$(taskset -c 0-1 "$bin" "$pairs" "$t")")
    done
    med=$(printf '%s\n' "${runs[@]}" | sort -n | sed -n 4p)
    printf 'threads %d: ns/pair median %s (runs: %s)\n' "$t" "$med" "${runs[*]}"
done
