#!/bin/bash
# bench_deps.sh - the benchmark's peers: find which are missing and, as
# root on Debian, install them (make bench, bench-full, bench-docs and
# bench-deps run this before configuring, so that CMake then finds libdpdk
# and compiles the rte_malloc column in).
#
# A peer is missing when its library file (the names bench/backends.c
# looks for, in the same directories) or command is absent, or for DPDK
# when `pkg-config --exists libdpdk` fails. Then:
#   root, Debian, apt-get present: one line naming the packages, then a
#     non-interactive apt-get update + install (output in a log shown only
#     on failure), and the check again;
#   otherwise: one line per missing peer naming its package.
# It never fails the build: a peer still missing is an empty column.
#
# usage: tools/bench_deps.sh [--check]
#   --check   say what would be installed, run nothing
# For tests: BENCH_DEPS_LIBDIRS (library dirs, space separated),
# BENCH_DEPS_PATH (where commands are looked up: pkg-config, gnuplot,
# apt-get), BENCH_DEPS_UID, BENCH_DEPS_OS_RELEASE (file) replace what this
# machine says.
set -u
check=0
[ "${1:-}" = --check ] && check=1

case $(uname -m) in
x86_64) multiarch=x86_64-linux-gnu ;;
aarch64) multiarch=aarch64-linux-gnu ;;
*) multiarch='*-linux-gnu*' ;;
esac
libdirs=${BENCH_DEPS_LIBDIRS:-"/usr/lib/$multiarch /lib/$multiarch /usr/lib64 /usr/lib /usr/local/lib /usr/lib/*-linux-gnu*"}
lookpath=${BENCH_DEPS_PATH:-$PATH}
uid=${BENCH_DEPS_UID:-$(id -u)}
os_release=${BENCH_DEPS_OS_RELEASE:-/etc/os-release}

find_cmd() { PATH=$lookpath command -v "$1" 2>/dev/null; }

have_lib() { # <glob pattern>...
    local d p f
    for d in $libdirs; do
        for p in "$@"; do
            for f in $d/$p; do
                [ -e "$f" ] && return 0
            done
        done
    done
    return 1
}

# peer name, package, how to find it
peers=(
    "jemalloc|libjemalloc2|lib libjemalloc.so.2"
    "mimalloc|libmimalloc2.0|lib libmimalloc.so.2 libmimalloc.so.2.*"
    "tcmalloc|libtcmalloc-minimal4|lib libtcmalloc_minimal.so.4 libtcmalloc.so.4"
    "pkg-config|pkg-config|cmd pkg-config"
    "DPDK rte_malloc|libdpdk-dev|pkgconfig libdpdk"
    "gnuplot (plots)|gnuplot-nox|cmd gnuplot"
)

missing_names=() missing_pkgs=()
scan() {
    missing_names=() missing_pkgs=()
    local e name pkg how pc
    for e in "${peers[@]}"; do
        IFS='|' read -r name pkg how <<<"$e"
        # shellcheck disable=SC2086
        set -- $how
        case $1 in
        lib) shift; have_lib "$@" && continue ;;
        cmd) find_cmd "$2" >/dev/null && continue ;;
        pkgconfig) pc=$(find_cmd pkg-config) && "$pc" --exists "$2" 2>/dev/null && continue ;;
        esac
        missing_names+=("$name")
        missing_pkgs+=("$pkg")
    done
}

report_missing() {
    local i
    for i in "${!missing_pkgs[@]}"; do
        echo "bench: ${missing_names[$i]} not found: its column stays empty (Debian package ${missing_pkgs[$i]})"
    done
}

is_debian() {
    [ -r "$os_release" ] || return 1
    grep -Eq '^(ID=("?)debian|ID_LIKE=.*debian)' "$os_release"
}

scan
[ ${#missing_pkgs[@]} -eq 0 ] && exit 0

apt=$(find_cmd apt-get)
if [ "$uid" != 0 ] || ! is_debian || [ -z "$apt" ]; then
    report_missing
    exit 0
fi

echo "bench: installing the missing peers as root: apt-get install ${missing_pkgs[*]}"
if [ $check = 1 ]; then
    echo "bench: --check: would run DEBIAN_FRONTEND=noninteractive $apt update && $apt install -y --no-install-recommends ${missing_pkgs[*]}"
    exit 0
fi
log=$(mktemp "${TMPDIR:-/tmp}/bench_deps.XXXXXX")
if { DEBIAN_FRONTEND=noninteractive "$apt" -q update &&
     DEBIAN_FRONTEND=noninteractive "$apt" -q install -y --no-install-recommends "${missing_pkgs[@]}"; } >"$log" 2>&1; then
    rm -f "$log"
else
    tail -n 20 "$log"
    echo "bench: apt-get failed (whole log: $log)"
fi
scan
report_missing
exit 0
