#!/usr/bin/env bash
# The operator new(64)/delete pair under dpmalloc, two ways: through
# dpmalloc's own operators (src/override_cxx.cc, the first library given)
# and through libstdc++'s default operators, which call malloc through the
# PLT (the second library: a libdpmalloc.so without the operators, e.g.
# one configured where no C++ compiler is found). Instructions per pair
# with callgrind (difference between 2M and 1M pairs, so start-up cancels)
# and wall time per pair (median of 7 pinned runs of 20M pairs).
# Usage: tools/new_pair_cost.sh <libdpmalloc.so> <libdpmalloc.so without operators>
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
with=$(readlink -f "${1:-$src/build/libdpmalloc.so}")
without=$(readlink -f "${2:?a libdpmalloc.so built without C++ (cmake -DCMAKE_CXX_COMPILER=false)}")
bin=$(mktemp -d)/new_pair_loop
c++ -O2 -std=c++17 -fno-builtin "$src/tools/new_pair_loop.cpp" -o "$bin"
instr() {
    LD_PRELOAD=$2 valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" "$1" 2>&1 |
        awk '/Collected/ {print $4}'
}
printf '%-28s %12s %14s\n' path "instr/pair" "ns/pair (med)"
for name in direct libstdcxx; do
    lib=$with
    [ $name = libstdcxx ] && lib=$without
    a=$(instr 1000000 "$lib")
    b=$(instr 2000000 "$lib")
    t=$(for r in 1 2 3 4 5 6 7; do LD_PRELOAD=$lib taskset -c 0 "$bin" 20000000; done | sort -n | sed -n 4p)
    printf '%-28s %12s %14s\n' "$name" $(( (b - a) / 1000000 )) "$t"
done
