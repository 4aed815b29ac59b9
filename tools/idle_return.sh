#!/usr/bin/env bash
# Resident memory of a quiet program after it freed 1 GiB of 4 KiB blocks
# (tools/idle_return.c), with no option set, under dpmalloc and every peer
# found, one after the other. Usage: tools/idle_return.sh [libdpmalloc.so] [size_mb]
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
dpm=${1:-$src/build/libdpmalloc.so}
mb=${2:-1024}
bin=$(mktemp -d)/idle_return
cc -O2 -pthread "$src/tools/idle_return.c" -o "$bin"
declare -A lib=([dpmalloc]=$dpm [glibc]="")
. "$src/tools/peers.sh"
for n in dpmalloc glibc jemalloc tcmalloc mimalloc; do
    [ -v "lib[$n]" ] || continue
    echo "== $n"
    env ${lib[$n]:+LD_PRELOAD=${lib[$n]}} "$bin" "$mb"
done
