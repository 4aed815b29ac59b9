#!/bin/sh
# Planted heap bugs in dpmalloc blocks must be reported by Valgrind's
# memcheck (a -DDPM_VALGRIND=1 library), with dpmalloc still the allocator.
#   run_valgrind.sh linked  <planted built with PLANTED_DPM_API, linked with the static library>
#   run_valgrind.sh preload <planted for libc only> <libdpmalloc.so built with DPM_VALGRIND>
#   run_valgrind.sh cxx-linked <planted_cxx linked with the static library>
#   run_valgrind.sh cxx-preload <planted_cxx> <libdpmalloc.so built with DPM_VALGRIND>
# Exits 77 (skipped) when valgrind is not installed.
set -u
mode=$1 prog=$2 lib=${3:-}
if ! command -v valgrind >/dev/null 2>&1; then
    echo "skipped: valgrind not found (Debian: apt-get install valgrind)"
    exit 77
fi
# The invocation docs/debugging.md gives: without the synonym memcheck
# replaces dpmalloc's malloc with its own.
VG="valgrind --soname-synonyms=somalloc=nouserintercepts --redzone-size=0"
fail=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# run <name> <valgrind options> -- <program args>; output in $out
run() {
    name=$1
    shift
    if [ "$mode" = preload ] || [ "$mode" = cxx-preload ]; then
        LD_PRELOAD=$lib "$@" >"$out" 2>&1
    else
        "$@" >"$out" 2>&1
    fi
}

expect() {   # expect <case> <fixed string>...
    c=$1
    shift
    for s in "$@"; do
        if ! grep -qF -- "$s" "$out"; then
            echo "FAIL $c: no \"$s\" in the output:"
            sed 's/^/    /' "$out"
            fail=1
            return
        fi
    done
    echo "ok   $c"
}

case $mode in
cxx-*)
    # operator new[]/delete[] jump to the C side (override.c), whose frames
    # memcheck shows under the annotation's
    run uaf $VG "$prog" uaf
    expect "$mode use after delete" "Invalid read of size 1" "inside a block of size 24 free'd" \
        "cxx_delete (override.c:" "cxx_new (override.c:"
    run overflow $VG "$prog" overflow
    expect "$mode overflow of new char[24]" "Invalid write of size 1" "0 bytes after a block of size 24 alloc'd" \
        "cxx_new (override.c:"
    run leak $VG --leak-check=full "$prog" leak
    expect "$mode leaked new" "100 bytes in 1 blocks are definitely lost" "definitely lost: 100 bytes in 1 blocks" \
        "cxx_new (override.c:"
    run none $VG --leak-check=full --error-exitcode=99 "$prog" none
    expect "$mode clean run" "usable 24 -> 32" "ERROR SUMMARY: 0 errors" "planted: done" \
        "All heap blocks were freed -- no leaks are possible"
    exit $fail
    ;;
linked) apis="libc dpm" ;;
*) apis="libc" ;;
esac
for api in $apis; do
    if [ "$api" = dpm ]; then fr="dpm_free (alloc.c:" mf="dpm_malloc (alloc.c:" rf="dpm_realloc (alloc.c:"
    else fr="free (override.c:" mf="malloc (override.c:" rf="realloc (override.c:"; fi
    run uaf $VG "$prog" $api uaf
    expect "$mode $api uaf" "Invalid read of size 1" "inside a block of size 24 free'd" "$fr"
    run overflow $VG "$prog" $api overflow
    expect "$mode $api overflow 24" "Invalid write of size 1" "0 bytes after a block of size 24 alloc'd" "$mf"
    run overflow100 $VG "$prog" $api overflow100
    expect "$mode $api overflow 100" "Invalid write of size 1" "0 bytes after a block of size 100 alloc'd" "$mf"
    run realloc $VG "$prog" $api realloc
    expect "$mode $api realloc moved" "Invalid write of size 1" "0 bytes after a block of size 40 alloc'd" "$rf"
    run realloc_in_place $VG "$prog" $api realloc_in_place
    expect "$mode $api realloc in place" "Invalid write of size 1" "0 bytes after a block of size 30 alloc'd"
    run slack_undefined $VG "$prog" $api slack_undefined
    expect "$mode $api never-written bytes after a growth into slack" \
        "Conditional jump or move depends on uninitialised value(s)" "planted: done"
    run slack_past_undefined $VG "$prog" $api slack_past_undefined
    expect "$mode $api never-written bytes after a growth past the slack" \
        "Conditional jump or move depends on uninitialised value(s)" "planted: done"
    run leak $VG --leak-check=full "$prog" $api leak
    expect "$mode $api leak" "100 bytes in 1 blocks are definitely lost" "definitely lost: 100 bytes in 1 blocks" "$mf"
    # the page run's descriptor holds a large block's address (the limit
    # docs/debugging.md states)
    run leak_large $VG --leak-check=full --show-leak-kinds=all "$prog" $api leak_large
    expect "$mode $api leak of a large block" "200,000 bytes in 1 blocks are still reachable"
    run none $VG --leak-check=full --error-exitcode=99 "$prog" $api none
    expect "$mode $api clean run" "usable 24 -> 32" "ERROR SUMMARY: 0 errors" "planted: done" \
        "All heap blocks were freed -- no leaks are possible"
done
if [ "$mode" = linked ]; then
    # blocks of the rte_malloc layer and of the socket calls (their
    # entry points tail-call the paths that annotate the block, so the
    # alloc'd stack need not name them)
    run rte_uaf $VG "$prog" dpm rte_uaf
    expect "$mode dpm_rte_malloc use after dpm_rte_free" "Invalid read of size 1" \
        "inside a block of size 24 free'd" "dpm_rte_free (rte_compat.c:"
    run rte_overflow $VG "$prog" dpm rte_overflow
    expect "$mode dpm_rte_malloc overflow" "Invalid write of size 1" "0 bytes after a block of size 24 alloc'd"
    # another node's arena (the thread's arena is an automatic one), and,
    # with numa:true, the node's arena through the thread's cache
    run socket_overflow $VG "$prog" dpm socket_overflow
    expect "$mode dpm_malloc_socket overflow" "Invalid write of size 1" "0 bytes after a block of size 24 alloc'd"
    run socket_overflow env DPMALLOC_CONF=numa:true $VG "$prog" dpm socket_overflow
    expect "$mode dpm_malloc_socket overflow, numa:true" "Invalid write of size 1" \
        "0 bytes after a block of size 24 alloc'd"
    run none env DPMALLOC_CONF=numa:true $VG --leak-check=full --error-exitcode=99 "$prog" dpm none
    expect "$mode dpm clean run, numa:true" "ERROR SUMMARY: 0 errors" "planted: done" \
        "All heap blocks were freed -- no leaks are possible"
fi
# Without the synonym, memcheck's malloc replaces dpmalloc's (the reason
# for the option): the usable size is then memcheck's, the requested 24.
run replaced valgrind "$prog" libc none
expect "$mode without nouserintercepts: memcheck's malloc" "usable 24 -> 24"
exit $fail
