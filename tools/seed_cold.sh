#!/usr/bin/env bash
# Seed 000's loop cold, as a program under LD_PRELOAD meets it
# (tools/seed_cold.c): posix_memalign, 5 batches of 2000, no frees within a
# pair, no warm-up. Two modes: "seq" runs the eight pairs one after the
# other in one fresh process, "alone" each pair in a fresh process of its
# own. Every process is pinned (taskset -c $CPU); each cell is the median
# over R processes, allocators interleaved in each round. Prints, per
# allocator, mode and pair: ns per call of batches 1..5, last/first, the
# median minor faults of batch 1 and of batch 5, and batches 1 and 5 with
# the faults taken out at what one fault costs on this machine (measured
# by each process, median over all: the "fault ns" line).
# Times are the thread's CPU time per call (tools/seed_cold.c: on a shared
# machine, time other processes ran on the CPU is not the allocator's).
# Usage: tools/seed_cold.sh [rounds] [allocators...]
#   (allocators: dpmalloc glibc jemalloc tcmalloc mimalloc, and "before"
#   when BEFORE=path of another libdpmalloc.so, interleaved with the rest;
#   DPM=path of libdpmalloc.so, default build/libdpmalloc.so;
#   MODES="seq alone")
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-5}
shift || true
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(dpmalloc glibc jemalloc tcmalloc)
dpm=${DPM:-$src/build/libdpmalloc.so}
cpu=${CPU:-1}
modes=${MODES:-seq alone}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 "$src/tools/seed_cold.c" -o "$tmp/seed_cold"
declare -A lib=([dpmalloc]=$dpm [glibc]="")
[ -n "${BEFORE:-}" ] && lib[before]=$BEFORE
. "$src/tools/peers.sh"
pairs="64 4096 1024 4096 2048 2048 4096 4096 4096 64 8192 8192 16384 16384 65536 65536"
for r in $(seq "$rounds"); do
    for n in "${names[@]}"; do
        [ -v "lib[$n]" ] || continue
        for m in $modes; do
            if [ "$m" = seq ]; then
                env ${lib[$n]:+LD_PRELOAD=${lib[$n]}} taskset -c "$cpu" "$tmp/seed_cold" | tail -n +2 |
                    sed "s/^# fault_ns/FAULT 0/; s/^/$n $m /" >>"$tmp/all"
            else
                set -- $pairs
                while [ $# -gt 0 ]; do
                    env ${lib[$n]:+LD_PRELOAD=${lib[$n]}} taskset -c "$cpu" "$tmp/seed_cold" "$1" "$2" | tail -n +2 |
                        sed "s/^/$n $m /" >>"$tmp/all"
                    shift 2
                done
            fi
        done
    done
done
# allocator mode pair batch ns faults -> medians
sort -k1,1 -k2,2 -k3,3 -k4,4n "$tmp/all" | awk -v order="$pairs" '
function med(list,   a, k, i, j, t) {
    k = split(list, a, " ")
    for (i = 2; i <= k; i++) for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
}
$3 == "FAULT" { fns = fns " " $5; next }
{ key = $1 " " $2 " " $3; ns[key, $4] = ns[key, $4] " " $5; fl[key, $4] = fl[key, $4] " " $6; seen[key] = 1; al[$1 " " $2] = 1 }
END {
    f = med(fns)
    printf "fault ns %.0f (median over all processes)\n", f
    printf "%-9s %-5s %-12s %8s %8s %8s %8s %8s %6s %7s %7s %7s %7s\n", "allocator", "mode", "pair", "b1", "b2", "b3", "b4", "b5", "b5/b1", "flt b1", "flt b5", "b1-flt", "b5-flt"
    n = split(order, o, " ")
    for (am in al) {
        for (i = 1; i < n; i += 2) {
            key = am " " o[i] "/" o[i + 1]
            if (!(key in seen)) continue
            split(am, x, " ")
            printf "%-9s %-5s %-12s", x[1], x[2], o[i] "/" o[i + 1]
            for (b = 1; b <= 5; b++) { v[b] = med(ns[key, b]); printf " %8.1f", v[b] }
            f1 = med(fl[key, 1]); f5 = med(fl[key, 5])
            printf " %6.2f %7s %7s %7.1f %7.1f\n", v[5] / v[1], f1, f5, v[1] - f1 * f / 2000, v[5] - f5 * f / 2000
        }
    }
}' | sort -s -k1,1 -k2,2r
