#!/bin/bash
# run_bench_deps_test.sh - tools/bench_deps.sh against a fake machine: a
# library dir, a command dir (pkg-config answering for libdpdk from a
# marker file, gnuplot, an apt-get that records its calls and "installs"
# by creating the files), a uid and an os-release. Checks the exact lines
# it prints and what it runs, for: nothing installed as a user; as root
# on Debian (--check, then for real); root on another system; all found.
#
# usage: run_bench_deps_test.sh <path to tools/bench_deps.sh>
set -u
script=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-deps-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

lib=$work/lib bin=$work/bin
debian=$work/os-debian fedora=$work/os-fedora
printf 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n' >"$debian"
printf 'NAME="Fedora Linux"\nID=fedora\n' >"$fedora"

reset_machine() {
    rm -rf "$lib" "$bin" "$work/apt.log" "$work/dpdk"
    mkdir -p "$lib" "$bin"
    cat >"$bin/apt-get" <<APT
#!/bin/bash
echo "\$DEBIAN_FRONTEND \$*" >>"$work/apt.log"
[ "\$1" = -q ] && shift
[ "\$1" = install ] || exit 0
for p in "\$@"; do
    case \$p in
    libjemalloc2) touch "$lib/libjemalloc.so.2" ;;
    libmimalloc2.0) touch "$lib/libmimalloc.so.2.0" ;;
    libtcmalloc-minimal4) touch "$lib/libtcmalloc_minimal.so.4" ;;
    libdpdk-dev) touch "$work/dpdk" ;;
    pkg-config) install_pc=1 ;;
    gnuplot-nox) printf '#!/bin/sh\n' >"$bin/gnuplot"; chmod +x "$bin/gnuplot" ;;
    esac
done
if [ -n "\${install_pc:-}" ]; then
    printf '#!/bin/sh\n[ "\$1" = --exists ] && [ "\$2" = libdpdk ] && [ -e "$work/dpdk" ]\n' >"$bin/pkg-config"
    chmod +x "$bin/pkg-config"
fi
APT
    chmod +x "$bin/apt-get"
}

run() { # <uid> <os-release> [--check]: output in $out
    out=$(TMPDIR=$work BENCH_DEPS_LIBDIRS=$lib BENCH_DEPS_PATH=$bin BENCH_DEPS_UID=$1 BENCH_DEPS_OS_RELEASE=$2 \
          bash "$script" ${3:-} 2>&1)
    local rc=$?
    [ $rc = 0 ] || fail "exit status $rc (must never fail the build)"
}

expect() { # <case> <expected output>
    if [ "$out" != "$2" ]; then
        fail "$1: output differs"
        echo "--- expected"; echo "$2"; echo "--- got"; echo "$out"
    else
        echo "ok: $1"
    fi
}

all_missing="bench: jemalloc not found: its column stays empty (Debian package libjemalloc2)
bench: mimalloc not found: its column stays empty (Debian package libmimalloc2.0)
bench: tcmalloc not found: its column stays empty (Debian package libtcmalloc-minimal4)
bench: pkg-config not found: its column stays empty (Debian package pkg-config)
bench: DPDK rte_malloc not found: its column stays empty (Debian package libdpdk-dev)
bench: gnuplot (plots) not found: its column stays empty (Debian package gnuplot-nox)"
all_pkgs="libjemalloc2 libmimalloc2.0 libtcmalloc-minimal4 pkg-config libdpdk-dev gnuplot-nox"

# a user on a fresh Debian: one line per peer, nothing run
reset_machine
run 1000 "$debian"
expect "user, nothing installed" "$all_missing"
[ -e "$work/apt.log" ] && fail "a user ran apt-get"

# root on another distribution: the same lines, no apt-get
run 0 "$fedora"
expect "root, not Debian" "$all_missing"
[ -e "$work/apt.log" ] && fail "apt-get ran on a non-Debian system"

# root on Debian without apt-get: the lines
rm "$bin/apt-get"
run 0 "$debian"
expect "root, Debian, no apt-get" "$all_missing"
reset_machine

# root on Debian, --check: the install line and the command, nothing run
run 0 "$debian" --check
expect "root, Debian, --check" "bench: installing the missing peers as root: apt-get install $all_pkgs
bench: --check: would run DEBIAN_FRONTEND=noninteractive $bin/apt-get update && $bin/apt-get install -y --no-install-recommends $all_pkgs"
[ -e "$work/apt.log" ] && fail "--check ran apt-get"

# root on Debian for real: one line, apt-get update + install, then all found
run 0 "$debian"
expect "root, Debian, install" "bench: installing the missing peers as root: apt-get install $all_pkgs"
expect_apt="noninteractive -q update
noninteractive -q install -y --no-install-recommends $all_pkgs"
[ "$(cat "$work/apt.log" 2>/dev/null)" = "$expect_apt" ] ||
    fail "apt-get calls: $(cat "$work/apt.log" 2>/dev/null)"

# everything present now: silent, nothing run
rm -f "$work/apt.log"
run 0 "$debian"
expect "root, all found" ""
[ -e "$work/apt.log" ] && fail "apt-get ran with nothing missing"

# only some missing (tcmalloc's full library counts; DPDK without its .pc)
reset_machine
touch "$lib/libjemalloc.so.2" "$lib/libmimalloc.so.2.1" "$lib/libtcmalloc.so.4"
printf '#!/bin/sh\nexit 1\n' >"$bin/pkg-config" && chmod +x "$bin/pkg-config"
printf '#!/bin/sh\n' >"$bin/gnuplot" && chmod +x "$bin/gnuplot"
run 1000 "$debian"
expect "user, only DPDK missing" "bench: DPDK rte_malloc not found: its column stays empty (Debian package libdpdk-dev)"
run 0 "$debian" --check
expect "root, only DPDK missing, --check" "bench: installing the missing peers as root: apt-get install libdpdk-dev
bench: --check: would run DEBIAN_FRONTEND=noninteractive $bin/apt-get update && $bin/apt-get install -y --no-install-recommends libdpdk-dev"

# apt-get fails: its tail, the failure, the lines for what is still missing
reset_machine
printf '#!/bin/sh\necho "E: Unable to locate package"\nexit 100\n' >"$bin/apt-get"
run 0 "$debian"
case $out in
"bench: installing the missing peers as root: apt-get install $all_pkgs"*"E: Unable to locate package"*"bench: apt-get failed (whole log: "*")
$all_missing") echo "ok: apt-get fails" ;;
*) fail "apt-get fails: got"; echo "$out" ;;
esac
ls "$work"/bench_deps.?????? >/dev/null 2>&1 || fail "apt-get fails: log not kept"

[ "$failures" = 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "bench_deps.sh: all cases passed"
