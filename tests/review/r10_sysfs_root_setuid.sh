#!/bin/sh
# r10_sysfs_root_setuid.sh - DPMALLOC_CONF is ignored under AT_SECURE
# (94a13bb, secure_getenv; src/conf.c: "an unprivileged user must not
# retune a privileged program's heap"), but DPMALLOC_SYSFS_ROOT, read by
# numa_init() with plain getenv (src/numa.c), is still honoured in a
# setuid/setgid program: the invoker chooses the directory whose
# devices/system/node/{online,node*/cpulist} the privileged process opens
# and reads at init (symlinks allowed), and so the NUMA topology dpmalloc
# works with (arenas.nnodes, which node arena a numa:true thread takes,
# the nodes mbind() is asked for).
#
# Run as root from the worktree after building build/:
#   sh tests/review/r10_sysfs_root_setuid.sh [libdpmalloc.a]
# Expected: the setuid copy (at_secure=1) reports nnodes=1, as without the
# variable; exit 0.
# Actual (70fb239): "at_secure=1 rc=0 nnodes=2" (the made-up 2-node tree
# was used); exit 1. Fix: read it like DPMALLOC_CONF (secure_getenv).
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
lib=${1:-$src/build/libdpmalloc.a}
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 77; }
d=/tmp/r10_sysfs
rm -rf $d && mkdir -p $d/root/devices/system/node/node0 $d/root/devices/system/node/node1 && chmod -R 755 $d
echo 0-1 >$d/root/devices/system/node/online
echo 0 >$d/root/devices/system/node/node0/cpulist
echo 1 >$d/root/devices/system/node/node1/cpulist
cat >$d/probe.c <<'C'
#include <dpmalloc.h>
#include <stdio.h>
#include <sys/auxv.h>
int main(void)
{
    unsigned n = 0;
    size_t len = sizeof n;
    int rc = dpm_ctl("arenas.nnodes", &n, &len, NULL, 0);
    printf("at_secure=%lu rc=%d nnodes=%u\n", getauxval(AT_SECURE), rc, n);
    return 0;
}
C
gcc -O1 -I"$src/include" $d/probe.c "$lib" -lpthread -o $d/probe || exit 2
chmod -R a+rX $d
echo "plain, no variable:  $($d/probe)"
echo "plain, variable set: $(DPMALLOC_SYSFS_ROOT=$d/root $d/probe)"
chown nobody:0 $d/probe && chmod 4755 $d/probe || exit 2
out=$(DPMALLOC_SYSFS_ROOT=$d/root $d/probe)
echo "setuid nobody, variable set: $out"
case $out in
*at_secure=0*) echo "SKIP: no AT_SECURE (nosuid mount?)"; exit 77 ;;
*nnodes=1*) echo ok; exit 0 ;;
*) echo "FAIL: DPMALLOC_SYSFS_ROOT honoured under AT_SECURE"; exit 1 ;;
esac
