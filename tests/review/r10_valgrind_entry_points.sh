#!/bin/sh
# r10_valgrind_entry_points.sh - with the -DDPM_VALGRIND=ON library and the
# invocation docs/debugging.md gives, the entry points added for issue 10
# issue no client requests: the C++ operators (operator new -> cxx_new ->
# alloc_fast, unsized operator delete -> cxx_delete -> free_fast) and
# __libc_malloc/__libc_calloc/__libc_realloc/__libc_free/cfree call the
# fast paths directly (src/override.c) without DPM_ANN_ALLOC / DPM_ANN_FREE /
# DPM_ANN_REALLOC_DONE, while sized delete (free_sized_impl) and the
# realloc move path do issue them. annotate.h's own header (13087f5) says
# "A new entry point ... calls these macros as override.c's do"; the
# tests' dpmalloc_vg library has neither override_cxx.cc nor a caller of
# the __libc_ names, so nothing caught it.
#
# Effects:
#  (a) any C++ program: thousands of false "Invalid free() / delete" (a
#      sized delete FREELIKEs a block never MALLOCLIKEd) and "Invalid
#      read/write" (the free path closes the key bytes of a block new then
#      hands out again unannotated); the planted use-after-free is buried.
#  (b) __libc_realloc/__libc_free/cfree mixed with malloc/free: false
#      "Invalid free()", and memcheck itself dies at exit with "Block
#      0x... overlaps with block 0x..." (a MALLOCLIKE over a block never
#      FREELIKEd): no leak check, no summary.
#
# Run from the worktree: sh tests/review/r10_valgrind_entry_points.sh
# (configures /tmp/r10vg with -DDPM_VALGRIND=ON and builds the library).
# Expected: both programs "ERROR SUMMARY: 1 errors" (C++: the planted
# read) / "0 errors" (C), exit 0.
# Actual (70fb239): C++: "ERROR SUMMARY: 26040 errors from 48 contexts";
# C: valgrind aborts with "Block ... overlaps with block ..."; exit 1.
# Control: the C++ program under plain "valgrind" with glibc malloc gives
# "ERROR SUMMARY: 1 errors from 1 contexts" (the planted read).
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
b=/tmp/r10vg
command -v valgrind >/dev/null || { echo "SKIP: no valgrind"; exit 77; }
cmake -S "$src" -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DDPM_VALGRIND=ON \
      -DDPM_BUILD_TESTS=OFF -DDPM_BUILD_BENCH=OFF >/dev/null &&
    cmake --build $b -j2 --target dpmalloc >/dev/null || exit 2
g++ -std=c++17 -O1 -g "$src/tests/review/r10_vg_cxx.cpp" -o $b/vg_cxx || exit 2
gcc -O1 -g "$src/tests/review/r10_vg_libc_names.c" -L$b -ldpmalloc -Wl,-rpath,$b -o $b/vg_c || exit 2
VG="valgrind --soname-synonyms=somalloc=nouserintercepts --redzone-size=0"
fail=0
LD_PRELOAD=$b/libdpmalloc.so $VG $b/vg_cxx >$b/vg_cxx.out 2>&1
s=$(grep "ERROR SUMMARY" $b/vg_cxx.out)
echo "C++ (preloaded): $s"
case $s in *"ERROR SUMMARY: 1 errors"*) ;; *) fail=1 ;; esac
$VG --leak-check=full $b/vg_c >$b/vg_c.out 2>&1
s=$(grep "ERROR SUMMARY" $b/vg_c.out)
echo "C, __libc_* names (linked): ${s:-no summary}"
grep -m1 "overlaps with block" $b/vg_c.out
case $s in *"ERROR SUMMARY: 0 errors"*) ;; *) fail=1 ;; esac
[ $fail = 0 ] && echo ok || echo "FAIL (outputs in $b/vg_cxx.out, $b/vg_c.out)"
exit $fail
