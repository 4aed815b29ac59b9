#!/bin/sh
# prof_pprof.sh - a heap profile read by pprof itself (docs/profiling.md):
# test_prof leaks 8 MiB from prof_leak_big and 512 KiB from
# prof_leak_small and allocates and frees 16 MiB in prof_churn, dumps a
# profile, and `go tool pprof -top` must rank the functions by what they
# hold (inuse_space) and by what they allocated (alloc_space), within what
# sampling at 2^12 bytes allows. Skipped (77) where Go is not installed;
# the test `prof` decodes the same format itself.
#   prof_pprof.sh <test_prof>
set -eu
prog=$1
command -v go >/dev/null 2>&1 || { echo "SKIP: go is not installed (pprof is go tool pprof)"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
DPMALLOC_CONF=prof:true,lg_prof_sample:12 "$prog" pprof "$dir/p.heap"
# pprof's cache and its build cache live in the test's own directory
export HOME="${HOME:-$dir}" PPROF_TMPDIR="$dir"
go tool pprof -top "$prog" "$dir/p.heap" >"$dir/inuse.txt" 2>&1 || { cat "$dir/inuse.txt"; exit 1; }
go tool pprof -sample_index=alloc_space -top "$prog" "$dir/p.heap" >"$dir/alloc.txt" 2>&1 ||
    { cat "$dir/alloc.txt"; exit 1; }
cat "$dir/inuse.txt" "$dir/alloc.txt"
# kB of a function's flat column: the first field, with its unit
flat_kb() {
    awk -v fn="$2" '$NF == fn {
        v = $1; u = v; sub(/[0-9.]+/, "", u); sub(/[a-zA-Z]+$/, "", v)
        if (u == "MB") v *= 1024; else if (u == "GB") v *= 1048576; else if (u == "B") v /= 1024
        print int(v); exit }' "$1"
}
check() {   # file function expected-kB tolerance-%
    got=$(flat_kb "$1" "$2")
    [ -n "$got" ] || { echo "FAIL: $2 is not in $(basename "$1")"; exit 1; }
    lo=$(( $3 * (100 - $4) / 100 )); hi=$(( $3 * (100 + $4) / 100 ))
    [ "$got" -ge "$lo" ] && [ "$got" -le "$hi" ] ||
        { echo "FAIL: $2 holds ${got} kB in $(basename "$1"), expected $3 kB within $4 %"; exit 1; }
    echo "ok: $2 ${got} kB ($(basename "$1"))"
}
check "$dir/inuse.txt" prof_leak_big 8192 10
check "$dir/inuse.txt" prof_leak_small 512 30
check "$dir/alloc.txt" prof_churn 16384 10
# the leaf of every sample is the program's: no allocator entry point is
# listed with bytes of its own
if grep -E ' (malloc|calloc|alloc_front_miss|prof_front_alloc)$' "$dir/inuse.txt" | awk '$1 != "0" {found=1} END {exit !found}'; then
    echo "FAIL: an allocator function holds bytes"; exit 1
fi
# inuse ranks the leaks first
first=$(awk '/flat%/ {getline; print $NF; exit}' "$dir/inuse.txt")
[ "$first" = prof_leak_big ] || { echo "FAIL: $first, not prof_leak_big, holds most"; exit 1; }
