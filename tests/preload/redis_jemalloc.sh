#!/usr/bin/env bash
# redis_jemalloc.sh - a real program linked against jemalloc, unchanged,
# under LD_PRELOAD=libdpmalloc.so: Debian's redis-server (libjemalloc2)
# calls mallctl (epoch, stats.allocated/active/resident, arena.<n>.purge),
# malloc_stats_print and nallocx; with the preload those are dpmalloc's.
#
#   redis_jemalloc.sh <libdpmalloc.so>
#
# Proves: INFO memory's allocator_allocated/active/resident are non-zero,
# ordered (allocated <= active <= resident), grow with the data set and
# shrink when it is deleted; MEMORY MALLOC-STATS prints dpmalloc's report
# (jemalloc's own says "___ Begin jemalloc statistics ___"); MEMORY PURGE
# (arena.<narenas>.purge) succeeds; the same redis without the preload
# reports jemalloc's statistics instead. Exit 77 (skipped) without
# redis-server/redis-cli or when redis-server does not link jemalloc.
set -euo pipefail
lib=$(readlink -f "$1")
skip() {
    echo "SKIP: $*"
    exit 77
}
fail() {
    echo "FAIL: $*" >&2
    exit 1
}
command -v redis-server >/dev/null || skip "no redis-server"
command -v redis-cli >/dev/null || skip "no redis-cli"
grep -q libjemalloc <<<"$(ldd "$(command -v redis-server)")" || skip "redis-server is not linked against jemalloc"

tmp=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do
        kill -9 "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

# start <name> [preload]: a server on a unix socket, no persistence
start() {
    local dir=$tmp/$1
    mkdir -p "$dir"
    if [ "${2:-}" = preload ]; then
        (cd "$dir" && exec env LD_PRELOAD="$lib" redis-server --port 0 --unixsocket "$dir/s" \
            --save '' --appendonly no --daemonize no >"$dir/log" 2>&1) &
    else
        (cd "$dir" && exec redis-server --port 0 --unixsocket "$dir/s" \
            --save '' --appendonly no --daemonize no >"$dir/log" 2>&1) &
    fi
    pids+=($!)
    for _ in $(seq 100); do
        [ -S "$dir/s" ] && [ "$(redis-cli -s "$dir/s" PING 2>/dev/null | tr -d '\r')" = PONG ] && return 0
        sleep 0.1
    done
    cat "$dir/log" >&2
    fail "redis-server ($1) did not come up"
}

cli() {
    local s=$tmp/$1/s
    shift
    redis-cli -s "$s" "$@"
}
field() { cli "$1" INFO memory | tr -d '\r' | sed -n "s/^$2://p"; }
fill() { cli "$1" EVAL "for i=1,$2 do redis.call('set','k'..i,string.rep('x',200)) end return 1" 0 >/dev/null; }

start dp preload
grep -q libdpmalloc "/proc/${pids[0]}/maps" || fail "libdpmalloc.so is not mapped into redis-server"

a0=$(field dp allocator_allocated)
fill dp 100000
a1=$(field dp allocator_allocated)
act1=$(field dp allocator_active)
res1=$(field dp allocator_resident)
echo "preloaded: allocator_allocated $a0 -> $a1, active $act1, resident $res1"
[ "$a0" -gt 0 ] || fail "allocator_allocated is $a0 before the fill"
[ "$a1" -ge $((a0 + 100000 * 200)) ] || fail "allocator_allocated grew by less than the data: $a0 -> $a1"
[ "$a1" -le "$act1" ] && [ "$act1" -le "$res1" ] || fail "allocated $a1, active $act1, resident $res1 out of order"

# the figures are dpmalloc's: its stats.allocated read through redis's mallctl
stats=$(cli dp MEMORY MALLOC-STATS)
# (here-strings, not pipes: under pipefail a grep -q that stops reading
# early fails the pipeline through its writer's SIGPIPE)
first=${stats%%$'\n'*}
[[ $first == *"___ dpmalloc statistics ___"* ]] ||
    fail "MEMORY MALLOC-STATS is not dpmalloc's report: ${stats:0:200}"
grep -q "jemalloc" <<<"$stats" && fail "MEMORY MALLOC-STATS mentions jemalloc"

cli dp FLUSHALL >/dev/null
[ "$(cli dp MEMORY PURGE | tr -d '\r')" = OK ] || fail "MEMORY PURGE (arena.<narenas>.purge) failed"
a2=$(field dp allocator_allocated)
res2=$(field dp allocator_resident)
echo "after FLUSHALL and MEMORY PURGE: allocator_allocated $a2, resident $res2"
[ "$a2" -lt $((a1 - 100000 * 200)) ] || fail "allocator_allocated did not shrink: $a1 -> $a2"
[ "$res2" -lt "$res1" ] || fail "allocator_resident did not shrink after the purge: $res1 -> $res2"

# the same redis on its own jemalloc: jemalloc's report
start je
fill je 100000
jstats=$(cli je MEMORY MALLOC-STATS)
jfirst=${jstats%%$'\n'*}
[[ $jfirst == *"jemalloc statistics"* ]] ||
    fail "without the preload, MEMORY MALLOC-STATS should be jemalloc's: ${jfirst:0:200}"
echo "without the preload: allocator_allocated $(field je allocator_allocated) (jemalloc's)"
echo "ok"
