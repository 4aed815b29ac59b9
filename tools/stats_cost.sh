#!/usr/bin/env bash
# What dpmalloc's always-on statistics cost on the single-thread bulk
# workload: builds the library twice (counters on, and compiled out with
# -DDPM_STATS=0), runs tools/bulk_loop.c under callgrind against each and
# prints the instruction counts and their ratio. Instruction counts are
# exact and repeatable on a noisy machine, unlike wall time.
# Usage: tools/stats_cost.sh [build-root]   (needs valgrind, cmake, ninja)
set -euo pipefail
root=${1:-/tmp/dpm-stats-cost}
src=$(cd "$(dirname "$0")/.." && pwd)
count() {
    local dir=$1 flags=$2
    cmake -S "$src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDPM_BUILD_TESTS=OFF \
        -DDPM_BUILD_BENCH=OFF -DCMAKE_C_FLAGS="$flags" >/dev/null
    cmake --build "$dir" --target dpmalloc_plain >/dev/null
    cc -O2 -I"$src/include" "$src/tools/bulk_loop.c" "$dir/libdpmalloc_plain.a" -lpthread -o "$dir/bulk_loop"
    valgrind --tool=callgrind --callgrind-out-file="$dir/callgrind.out" "$dir/bulk_loop" 2>&1 |
        awk '/Collected/ {print $4}'
}
with=$(count "$root/on" "")
without=$(count "$root/off" "-DDPM_STATS=0")
echo "bulk loop, instructions with stats:    $with"
echo "bulk loop, instructions without stats: $without"
awk -v a="$with" -v b="$without" 'BEGIN { printf "stats cost: %.3f %% of instructions\n", (a - b) * 100.0 / b }'
