#!/bin/sh
# ctest_skipped_test.sh - make test's list of skipped tests: a throw-away
# CTest project with tests that skip (reason on stdout, on stderr, with a
# "skipped:" prefix, indented, none at all), one that passes, one that
# fails and one whose program is missing (a failure, not a skip); the lines
# tools/ctest_skipped.sh prints from ctest's JUnit file must name exactly
# the skipped tests, each with its reason.
#   ctest_skipped_test.sh <tools/ctest_skipped.sh> <cmake> <ctest>
set -u
script=$1 cmake=$2 ctest=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.21)
project(skips NONE)
enable_testing()
add_test(NAME skip_stdout COMMAND sh -c "echo working; echo 'SKIP: no hugepages reserved'; exit 77")
add_test(NAME skip_stderr COMMAND sh -c "echo 'SKIP: needs root' >&2; exit 77")
add_test(NAME skip_prefixed COMMAND sh -c "echo 'skipped: valgrind/memcheck.h not found'; exit 77")
add_test(NAME skip_silent COMMAND sh -c "exit 77")
add_test(NAME passes COMMAND sh -c "echo 'ok, nothing skipped here'")
add_test(NAME fails COMMAND sh -c "echo broken; exit 1")
add_test(NAME missing COMMAND /nonexistent/dpm-test-program)
add_test(NAME skip_indented COMMAND sh -c "echo '  not enough free 2048 kB huge pages: not tested  '; exit 77")
set_tests_properties(skip_stdout skip_stderr skip_prefixed skip_silent skip_indented
                     PROPERTIES SKIP_RETURN_CODE 77)
CM
"$cmake" -S "$dir" -B "$dir/b" >/dev/null || exit 1
(cd "$dir/b" && "$ctest" --output-junit junit.xml >/dev/null 2>&1)
got=$("$script" "$dir/b/junit.xml") || { echo "FAIL: the script failed"; exit 1; }
expect='skipped: skip_stdout — no hugepages reserved
skipped: skip_stderr — needs root
skipped: skip_prefixed — valgrind/memcheck.h not found
skipped: skip_silent — no reason printed (SKIP_RETURN_CODE=77)
skipped: skip_indented — not enough free 2048 kB huge pages: not tested'
if [ "$got" != "$expect" ]; then
    printf 'FAIL: expected\n%s\ngot\n%s\n' "$expect" "$got"
    exit 1
fi
echo "ok: $(printf '%s\n' "$got" | wc -l) skipped tests named with their reasons"
