#!/bin/bash
# dpdk_reconfigure.sh - after `make bench` installs libdpdk-dev, the cmake
# run that follows must compile the rte_malloc column in although the
# build dir was configured before without DPDK: a cached "not found" must
# not stick. Configures a scratch build dir with pkg-config blind to
# libdpdk (PKG_CONFIG_LIBDIR at an empty dir), then again normally.
# Exit 77 when this machine has no libdpdk.
#
# usage: dpdk_reconfigure.sh <source dir> <cmake> <generator>
set -u
src=$1 cmake=$2 gen=$3
if ! pkg-config --exists libdpdk 2>/dev/null; then
    echo "SKIP: libdpdk not installed (pkg-config libdpdk)"
    exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/dpdk-reconf.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/nopc"
first=$(PKG_CONFIG_LIBDIR=$work/nopc PKG_CONFIG_PATH= "$cmake" -S "$src" -B "$work/b" -G "$gen" \
        -DDPM_BUILD_TESTS=OFF 2>&1 | grep 'dpmbench:')
echo "without libdpdk: $first"
case $first in *"DPDK not found"*) ;; *) echo "FAIL: DPDK found although hidden"; exit 1 ;; esac
second=$("$cmake" -S "$src" -B "$work/b" 2>&1 | grep 'dpmbench:')
echo "with libdpdk:    $second"
case $second in
*"rte_malloc backend with DPDK"*) echo "ok" ;;
*) echo "FAIL: the cached 'not found' stuck"; exit 1 ;;
esac
