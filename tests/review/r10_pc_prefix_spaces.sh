#!/bin/sh
# r10_pc_prefix_spaces.sh - `make install PREFIX="/opt/my dpm"` installs
# fine, but the dpmalloc.pc it writes (cmake/install_pc.cmake,
# cmake/dpmalloc.pc.in) has "prefix=/opt/my dpm" unescaped, so pkg-config
# prints "-I/opt/my dpm/include -L/opt/my dpm/lib -ldpmalloc": every
# consumer (shell $(pkg-config ...), CMake's pkg_check_modules, meson)
# splits it at the space and the build fails. pkg-config needs the space
# escaped in the .pc file ("prefix=/opt/my\ dpm"), which makes it print
# "-I/opt/my\ dpm/include" (meson and CMake's FindPkgConfig unescape it).
# The CMake package of the same install works.
#
# Run from the worktree after building build/: sh tests/review/r10_pc_prefix_spaces.sh [build dir]
# (exit 77 without pkg-config)
# Expected: pkg-config's --cflags names the include directory as one
# word (escaped) and the CMake FindPkgConfig consumer builds; exit 0.
# Actual (70fb239): "-I/tmp/r10_pc.XXXXXX/r10 pc sp/include" (two words); the consumer
# fails with "fatal error: dpmalloc.h: No such file or directory"; exit 1.
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$src/build}
command -v pkg-config >/dev/null || { echo "SKIP: no pkg-config"; exit 77; }
# directories of this run's own, so concurrent runs (other build trees)
# do not collide
work=$(mktemp -d /tmp/r10_pc.XXXXXX) || exit 2
trap 'rm -rf "$work"' EXIT
P="$work/r10 pc sp"
C="$work/consumer"
cmake --install "$build" --prefix "$P" >/dev/null || exit 2
PKG_CONFIG_PATH="$P/lib/pkgconfig"
export PKG_CONFIG_PATH
echo "pkg-config --cflags --libs: $(pkg-config --cflags --libs dpmalloc)"
mkdir -p "$C"
cat >"$C/c.c" <<'C'
#include <dpmalloc.h>
int main(void) { void *p = dpm_malloc(10); dpm_free(p); return p == 0; }
C
cat >"$C/CMakeLists.txt" <<'C'
cmake_minimum_required(VERSION 3.16)
project(c C)
find_package(PkgConfig REQUIRED)
pkg_check_modules(DPM REQUIRED IMPORTED_TARGET dpmalloc)
add_executable(c c.c)
target_link_libraries(c PkgConfig::DPM)
C
if cmake -S "$C" -B "$C/b" -G Ninja >"$C/log" 2>&1 &&
   cmake --build "$C/b" >>"$C/log" 2>&1 &&
   LD_LIBRARY_PATH="$P/lib" "$C/b/c"; then
    echo ok
    exit 0
fi
grep -m1 "error" "$C/log"
echo "FAIL: pkg-config consumer of a prefix with a space does not build"
exit 1
