#!/bin/bash
# run_install_test.sh - `cmake --install` into a staging tree (DESTDIR and
# a prefix that exists nowhere else), check every installed piece, then
# build tests/install/consumer/consumer.c against the staged tree with
# pkg-config and with find_package(dpmalloc), and run each build; with
# libdpmalloc_dpdk, build tests/install/dpdk_consumer.c with
# dpmalloc-dpdk.pc (the way docs/dpdk.md gives: PKG_CONFIG_PATH into the
# stage, no PKG_CONFIG_SYSROOT_DIR) and run it.
# Exit 0: all good; 1: something is missing or broken; 77: no pkg-config.
#
# usage: run_install_test.sh <build dir> <cmake> <C compiler> [generator]
set -u
build=$1 cmake=$2 cc=$3 gen=${4:-}
here=$(cd "$(dirname "$0")" && pwd)

if ! command -v pkg-config >/dev/null 2>&1; then
    echo "SKIP: pkg-config not installed (apt-get install pkg-config)"
    exit 77
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/dpm-install-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
stage=$work/stage
prefix=/opt/dpmalloc-install-test-$$
root=$stage$prefix
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

echo "== DESTDIR=$stage cmake --install $build --prefix $prefix"
DESTDIR=$stage "$cmake" --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 ||
    { cat "$work/install.log"; echo "FAIL: cmake --install"; exit 1; }
[ -d "$prefix" ] && { echo "FAIL: $prefix exists outside DESTDIR"; exit 1; }

libdir=$(cd "$root" && dirname "$(find . -name dpmalloc.pc -path '*/pkgconfig/*' | head -1)")
libdir=${libdir%/pkgconfig}
libdir=${libdir#./}
[ -n "$libdir" ] || { fail "no dpmalloc.pc installed"; libdir=lib; }
L=$root/$libdir

# every piece
for f in include/dpmalloc.h "$libdir/libdpmalloc.a" "$libdir/libdpmalloc_plain.a" \
         "$libdir/pkgconfig/dpmalloc.pc" "$libdir/cmake/dpmalloc/dpmallocConfig.cmake" \
         "$libdir/cmake/dpmalloc/dpmallocConfigVersion.cmake" \
         "$libdir/cmake/dpmalloc/dpmallocTargets.cmake" \
         share/doc/dpmalloc/config.md share/doc/dpmalloc/ctl.md share/doc/dpmalloc/README.md; do
    [ -f "$root/$f" ] || fail "not installed: $f"
done
# dpmalloc-stat in bin/: runs on its own (libc only), reads a process
# (this shell is no dpmalloc process: exit 5, docs/stats.md)
stat=$root/bin/dpmalloc-stat
if [ -x "$stat" ]; then
    LC_ALL=C readelf -d "$stat" 2>/dev/null | grep -q 'NEEDED.*libdpmalloc' &&
        fail "bin/dpmalloc-stat needs libdpmalloc"
    "$stat" --help >/dev/null 2>&1 || fail "bin/dpmalloc-stat --help failed"
    "$stat" $$ >/dev/null 2>"$work/stat.err"
    rc=$?
    [ $rc = 5 ] && grep -q "is not a dpmalloc process" "$work/stat.err" ||
        fail "bin/dpmalloc-stat on a shell: exit $rc, $(cat "$work/stat.err")"
else
    fail "not installed: bin/dpmalloc-stat"
fi
version=$(sed -n 's/^#define DPMALLOC_VERSION "\(.*\)"/\1/p' "$root/include/dpmalloc.h")
major=${version%%.*}
[ -n "$version" ] || fail "no DPMALLOC_VERSION in the installed header"
[ -f "$L/libdpmalloc.so.$version" ] && [ ! -L "$L/libdpmalloc.so.$version" ] ||
    fail "not installed: $libdir/libdpmalloc.so.$version"
[ "$(readlink "$L/libdpmalloc.so.$major")" = "libdpmalloc.so.$version" ] ||
    fail "$libdir/libdpmalloc.so.$major is not a link to libdpmalloc.so.$version"
[ "$(readlink "$L/libdpmalloc.so")" = "libdpmalloc.so.$major" ] ||
    fail "$libdir/libdpmalloc.so is not a link to libdpmalloc.so.$major"
soname=$(LC_ALL=C readelf -d "$L/libdpmalloc.so.$version" 2>/dev/null | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ "$soname" = "libdpmalloc.so.$major" ] || fail "SONAME is '$soname', not libdpmalloc.so.$major"
# the .pc files' prefix is their own directory's ../.. (relocatable): the
# staged tree is used as it lies, with PKG_CONFIG_PATH alone
grep -q '^prefix=${pcfiledir}/\.\./\.\.$' "$L/pkgconfig/dpmalloc.pc" ||
    fail "dpmalloc.pc's prefix is not \${pcfiledir}/../..: $(grep '^prefix=' "$L/pkgconfig/dpmalloc.pc")"
# libdpmalloc_dpdk, when the build has it (libdpdk-dev found)
with_dpdk=
if [ -e "$build/libdpmalloc_dpdk.so" ]; then
    with_dpdk=1
    for f in "$libdir/libdpmalloc_dpdk.a" "$libdir/pkgconfig/dpmalloc-dpdk.pc" include/dpmalloc/dpdk.h \
             include/dpmalloc/rte_compat.h; do
        [ -f "$root/$f" ] || fail "not installed: $f"
    done
    [ -f "$L/libdpmalloc_dpdk.so.$version" ] && [ "$(readlink "$L/libdpmalloc_dpdk.so")" = "libdpmalloc_dpdk.so.$major" ] ||
        fail "not installed: $libdir/libdpmalloc_dpdk.so.$version with its links"
fi

# a dynamically linked consumer must run with the staged library, NEEDED
# by its SONAME
check_run() { # <label> <binary> [dynamic]
    local out
    if ! out=$(LD_LIBRARY_PATH=$L "$2" 2>&1); then
        fail "$1: consumer failed: $out"
        return
    fi
    echo "$1: $out"
    if [ "${3:-}" = dynamic ]; then
        LC_ALL=C readelf -d "$2" | grep -q "NEEDED.*\[libdpmalloc.so.$major\]" ||
            fail "$1: does not need libdpmalloc.so.$major"
        local maps
        maps=$(LD_LIBRARY_PATH=$L LD_TRACE_LOADED_OBJECTS=1 "$2" 2>&1 | grep libdpmalloc)
        case $maps in
        *"$L/libdpmalloc.so.$major"*) ;;
        *) fail "$1: loads '$maps', not the staged library" ;;
        esac
    fi
}

echo "== pkg-config (PKG_CONFIG_PATH=$L/pkgconfig, no sysroot)"
export PKG_CONFIG_PATH=$L/pkgconfig
unset PKG_CONFIG_LIBDIR PKG_CONFIG_SYSROOT_DIR
[ "$(cd "$(pkg-config --variable=prefix dpmalloc 2>/dev/null)" 2>/dev/null && pwd -P)" = "$(cd "$root" && pwd -P)" ] ||
    fail "pkg-config's prefix of dpmalloc is '$(pkg-config --variable=prefix dpmalloc)', not the staged $root"
if pkg-config --exact-version="$version" dpmalloc; then
    flags=$(pkg-config --cflags --libs dpmalloc)
    echo "pkg-config --cflags --libs dpmalloc: $flags"
    # shellcheck disable=SC2086
    if "$cc" -Wall -Werror -o "$work/consumer_pc" "$here/consumer/consumer.c" $flags; then
        check_run pkg-config "$work/consumer_pc" dynamic
    else
        fail "pkg-config: consumer does not build"
    fi
    case " $(pkg-config --static --libs dpmalloc) " in
    *" -lpthread "*) ;;
    *) fail "pkg-config --static does not add -lpthread" ;;
    esac
else
    fail "pkg-config does not find dpmalloc $version"
fi
# a DPDK program, with dpmalloc-dpdk.pc's flags alone (it Requires libdpdk
# and dpmalloc: both must resolve in the same call)
if [ -n "$with_dpdk" ]; then
    if flags=$(pkg-config --cflags --libs dpmalloc-dpdk); then
        echo "pkg-config --cflags --libs dpmalloc-dpdk: $flags"
        # shellcheck disable=SC2086
        if "$cc" -Wall -Werror -o "$work/dpdk_consumer" "$here/dpdk_consumer.c" $flags; then
            out=$(LD_LIBRARY_PATH=$L "$work/dpdk_consumer" 2>&1)
            rc=$?
            echo "dpmalloc-dpdk: $out"
            case $rc in
            0 | 77) ;;   # 77: no EAL here (it linked and loaded: the point)
            *) fail "dpmalloc-dpdk: DPDK consumer failed ($rc)" ;;
            esac
            LC_ALL=C readelf -d "$work/dpdk_consumer" | grep -q "NEEDED.*\[libdpmalloc_dpdk.so.$major\]" ||
                fail "dpmalloc-dpdk: consumer does not need libdpmalloc_dpdk.so.$major"
        else
            fail "dpmalloc-dpdk: DPDK consumer does not build"
        fi
    else
        fail "pkg-config does not find dpmalloc-dpdk"
    fi
fi
unset PKG_CONFIG_PATH

echo "== find_package(dpmalloc)"
if "$cmake" -S "$here/consumer" -B "$work/consumer-build" ${gen:+-G "$gen"} \
        -DCMAKE_C_COMPILER="$cc" -DCMAKE_PREFIX_PATH="$root" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF >"$work/consumer.log" 2>&1 &&
    "$cmake" --build "$work/consumer-build" >>"$work/consumer.log" 2>&1; then
    grep -q "dpmalloc_DIR:PATH=$L/cmake/dpmalloc" "$work/consumer-build/CMakeCache.txt" ||
        fail "find_package found another dpmalloc: $(grep dpmalloc_DIR "$work/consumer-build/CMakeCache.txt")"
    check_run "cmake dpmalloc::dpmalloc" "$work/consumer-build/consumer_shared" dynamic
    check_run "cmake dpmalloc::dpmalloc_static" "$work/consumer-build/consumer_static"
    check_run "cmake dpmalloc::dpmalloc_plain" "$work/consumer-build/consumer_plain"
    LC_ALL=C readelf -d "$work/consumer-build/consumer_static" | grep -q "NEEDED.*libdpmalloc" &&
        fail "consumer_static needs the shared library"
else
    cat "$work/consumer.log"
    fail "find_package: consumer does not configure or build"
fi

if [ "$failures" -ne 0 ]; then
    echo "$failures failure(s)"
    exit 1
fi
echo "install test passed"
