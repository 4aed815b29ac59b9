#!/usr/bin/env bash
# The dpm_malloc_typed(64)/dpm_free pair: wall and thread CPU time per
# pair, medians of ROUNDS (default 7) runs of PAIRS (default 2M) pairs per
# thread, 1 thread pinned to the
# first allowed CPU and 2 threads pinned to the first two (same type
# name). Links the static library of each build directory given (default
# build/); several are measured round by round, interleaved, so that a
# busy machine slows them alike.
# Usage: [PAIRS=n] tools/typed_pair_cost.sh [build dir...]
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
pairs=${PAIRS:-2000000}
rounds=${ROUNDS:-7}
[ $# -gt 0 ] || set -- "$src/build"
tmp=$(mktemp -d)
for i in $(seq $#); do
    dir=${!i}
    cc -O2 -I"$src/include" "$src/tools/typed_pair_loop.c" "$dir/libdpmalloc_plain.a" -lpthread -lm -ldl -o "$tmp/loop$i"
done
declare -A wall cpu
for round in $(seq "$rounds"); do
    for i in $(seq $#); do
        for t in 1 2; do
            read -r w c < <("$tmp/loop$i" "$pairs" "$t")
            wall[$i,$t]="${wall[$i,$t]:-} $w"
            cpu[$i,$t]="${cpu[$i,$t]:-} $c"
        done
    done
done
median() { printf '%s\n' "$@" | sort -n | sed -n "$(( ($# + 1) / 2 ))p"; }
printf '%-32s %7s %12s %12s\n' build threads "wall ns/pair" "cpu ns/pair"
for i in $(seq $#); do
    for t in 1 2; do
        printf '%-32s %7d %12s %12s   wall runs:%s\n' "${!i}" "$t" "$(median ${wall[$i,$t]})" \
            "$(median ${cpu[$i,$t]})" "${wall[$i,$t]}"
    done
done
rm -rf "$tmp"
