#!/bin/bash
# run_secure_env.sh - DPMALLOC_CONF is ignored in setuid and setgid
# programs (secure_getenv semantics, docs/config.md), and so is jemalloc's
# MALLOC_CONF (each checked alone, the other unset). As root, copies the
# secure_env helper into <dir> and runs it with
#   DPMALLOC_CONF=narenas:3,secure_env_probe:1
# (a) as it is: the string applies (narenas=3, one "unknown option" line);
# (b) setuid to nobody, run by root; (c) setgid to nogroup, run by root;
# (d) setuid root, run by nobody through setpriv (if present): in (b)-(d)
# the kernel sets AT_SECURE and dpmalloc must ignore the string entirely.
# Exit 0 pass, 1 fail, 77 skip (not root, cannot chown, nosuid mount).
#
# usage: run_secure_env.sh <secure_env binary> <scratch dir under the build tree>
set -u
bin=$1 dir=$2
conf="narenas:3,secure_env_probe:1"
warning="dpmalloc: unknown option secure_env_probe:1"

if [ "$(id -u)" != 0 ]; then
    echo "SKIP: needs root to make a setuid/setgid copy of the helper"
    exit 77
fi
nobody=$(id -u nobody 2>/dev/null || echo 65534)
nogroup=$(getent group nogroup | cut -d: -f3)
nogroup=${nogroup:-65534}
rm -rf "$dir" && mkdir -p "$dir" && chmod 755 "$dir" || exit 1
prog=$dir/secure_env
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

var=DPMALLOC_CONF   # the variable under test
run() { # <label> [command prefix...]: sets out, err
    local label="$var: $1"
    shift
    out=$(env -u DPMALLOC_CONF -u MALLOC_CONF "$var=$conf" "$@" "$prog" 2>"$dir/stderr")
    local rc=$?
    err=$(cat "$dir/stderr")
    echo "$label: $out${err:+ | stderr: $err}"
    [ $rc = 0 ] || fail "$label: helper exited $rc"
}

expect_ignored() { # <label>
    case $out in
    *at_secure=1*) ;;
    *) echo "SKIP: $1 did not run with AT_SECURE (filesystem mounted nosuid?)"
       exit 77 ;;
    esac
    case $out in *narenas=3*) fail "$1: $var applied (narenas=3)" ;; esac
    case $err in *dpmalloc:*) fail "$1: $var was parsed: $err" ;; esac
}

check_var() {
    cp "$bin" "$prog" && chmod 755 "$prog" || exit 1
    run "plain"
    case $out in *at_secure=0*narenas=3*) ;; *) fail "plain: $var not applied" ;; esac
    case $err in *"$warning"*) ;; *) fail "plain: no '$warning' line" ;; esac

    if ! chown "$nobody:0" "$prog" 2>/dev/null; then
        echo "SKIP: cannot chown (no CAP_CHOWN)"
        exit 77
    fi
    chmod 4755 "$prog"
    run "setuid $nobody, run by root"
    expect_ignored "setuid"

    chown 0:"$nogroup" "$prog" && chmod 2755 "$prog"
    run "setgid $nogroup, run by root"
    expect_ignored "setgid"

    if command -v setpriv >/dev/null 2>&1; then
        chown 0:0 "$prog" && chmod 4755 "$prog"
        if setpriv --reuid="$nobody" --regid="$nogroup" --clear-groups test -x "$prog"; then
            run "setuid root, run by $nobody" setpriv --reuid="$nobody" --regid="$nogroup" --clear-groups
            expect_ignored "setuid root"
        else
            echo "note: $nobody cannot reach $prog: the setpriv case is not run"
        fi
    else
        echo "note: no setpriv: the run-by-another-user case is not run"
    fi
    rm -f "$prog"
}
for var in DPMALLOC_CONF MALLOC_CONF; do
    check_var
done

[ "$failures" = 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "DPMALLOC_CONF and MALLOC_CONF ignored under AT_SECURE"
