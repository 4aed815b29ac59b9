#!/usr/bin/env bash
# run_preload.sh - run a real program with and without LD_PRELOAD of
# libdpmalloc.so and require identical output, a clean exit, and proof that
# dpmalloc was really loaded into the preloaded run.
#
#   run_preload.sh python <libdpmalloc.so> <script.py>
#   run_preload.sh sort   <libdpmalloc.so>
#   run_preload.sh cxx    <libdpmalloc.so> <program>
set -euo pipefail

mode=$1
lib=$(readlink -f "$2")
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

[ -f "$lib" ] || fail "no library at $lib"

# The preloaded library must be mapped in a preloaded process.
LD_PRELOAD=$lib cat /proc/self/maps >"$work/maps"
grep -q "$lib" "$work/maps" || fail "LD_PRELOAD=$lib: library not mapped into cat"

# run <name> <command...>: once plain, once preloaded; compare stdout.
run_both() {
    local name=$1
    shift
    timeout -k 5 120 "$@" >"$work/$name.ref" 2>"$work/$name.ref.err" ||
        fail "$name without preload exited $?: $(tail -5 "$work/$name.ref.err")"
    local rc=0
    # a deadlock (exit 124 from timeout) fails instead of hanging
    LD_PRELOAD=$lib DPM_EXPECT_PRELOAD=1 timeout -k 5 120 "$@" \
        >"$work/$name.out" 2>"$work/$name.err" || rc=$?
    if [ $rc -ne 0 ]; then
        echo "--- stderr of the preloaded run:" >&2
        tail -20 "$work/$name.err" >&2
        fail "$name under LD_PRELOAD exited with status $rc"
    fi
    if ! cmp -s "$work/$name.ref" "$work/$name.out"; then
        diff "$work/$name.ref" "$work/$name.out" | head -20 >&2 || true
        fail "$name: output differs under LD_PRELOAD"
    fi
    [ -s "$work/$name.out" ] || fail "$name produced no output"
    echo "ok: $name, $(wc -c <"$work/$name.out") bytes of output identical with and without dpmalloc"
}

case $mode in
python)
    script=$1
    py=/usr/bin/python3
    [ -x "$py" ] || py=$(command -v python3)
    run_both python "$py" "$script"
    grep -q "dpmalloc mapped: yes" "$work/python.err" ||
        fail "python: libdpmalloc.so not in /proc/self/maps of the preloaded python"
    grep -q "dpmalloc mapped: no" "$work/python.ref.err" ||
        fail "python: reference run unexpectedly has libdpmalloc mapped"
    ;;
sort)
    # ~12 MB of pseudo-random lines, generated deterministically
    awk 'BEGIN { x = 12345;
        for (i = 0; i < 400000; i++) {
            x = (x * 1103515245 + 12345) % 2147483648;
            y = (x * 69069 + 1) % 2147483648;
            printf "%010d %s line-%d %x\n", x % 1000000007, substr("abcdefghijklmnopqrstuvwxyz", x % 26 + 1, y % 20 + 1), i, y
        } }' >"$work/input"
    [ "$(wc -l <"$work/input")" -eq 400000 ] || fail "input generation failed"
    export LC_ALL=C
    run_both sort sort -S 64M --parallel=2 "$work/input"
    run_both sort_k sort -k2,2 -k1,1n "$work/input"
    run_both sort_u sort -u -t' ' -k2,2 "$work/input"
    # and the sorted output really is sorted and complete
    sort -c "$work/sort.out" || fail "sort output not sorted"
    [ "$(wc -l <"$work/sort.out")" -eq 400000 ] || fail "sort output lost lines"
    ;;
cxx)
    prog=$1
    run_both cxx "$prog"
    ;;
*)
    fail "unknown mode $mode"
    ;;
esac
echo "1 passed, 0 failed"
