#!/bin/sh
# ctest_skipped.sh - after `make test`: names each test CTest skipped and the
# reason the test printed, from the JUnit file of `ctest --output-junit`.
# CTest itself only says "(Skipped)"; the reason is in the test's output.
# The reason is the test's last output line that mentions skipping (its
# "SKIP:"/"skipped:" prefix dropped), else its last output line.
#   tools/ctest_skipped.sh build/ctest-junit.xml
# Prints one "skipped: <test> — <reason>" line per skipped test (nothing
# when none was skipped); exits 0 unless the file cannot be read. Only
# skips count (SKIP_RETURN_CODE, SKIP_REGULAR_EXPRESSION, disabled tests):
# a test that did not run because its program is missing or a fixture
# failed is a failure, and ctest reports it as one.
junit=${1:?usage: ctest_skipped.sh <ctest junit xml>}
[ -r "$junit" ] || { echo "ctest_skipped.sh: cannot read $junit" >&2; exit 2; }
awk '
function unescape(s) {
    gsub(/&lt;/, "<", s); gsub(/&gt;/, ">", s); gsub(/&quot;/, "\"", s)
    gsub(/&apos;/, "\047", s); gsub(/&#10;/, " ", s); gsub(/&amp;/, "\\&", s)
    return s
}
function report() {
    if (name == "" || !skipped || mechanism !~ /^(SKIP_|Disabled)/)
        return
    why = skipline != "" ? skipline : lastline
    sub(/^[[:space:]]*\[?[Ss][Kk][Ii][Pp]([Pp][Ee][Dd])?\]?[[:space:]]*[:-][[:space:]]*/, "", why)
    sub(/^[[:space:]]+/, "", why)
    sub(/[[:space:]]+$/, "", why)
    if (why == "")
        why = "no reason printed (" mechanism ")"
    printf "skipped: %s \342\200\224 %s\n", name, why
}
/<testcase / {
    report()
    name = $0; sub(/.*<testcase name="/, "", name); sub(/".*/, "", name); name = unescape(name)
    skipped = 0; inout = 0; skipline = ""; lastline = ""; mechanism = "skipped"
    next
}
/<skipped/ {
    skipped = 1
    m = $0
    if (sub(/.*message="/, "", m)) { sub(/".*/, "", m); mechanism = unescape(m) }
    next
}
/<system-out>/ { inout = 1; sub(/.*<system-out>/, "") }
inout {
    line = $0
    done = sub(/<\/system-out>.*/, "", line)
    line = unescape(line)
    if (line ~ /[^[:space:]]/) {
        lastline = line
        if (tolower(line) ~ /skip/)
            skipline = line
    }
    if (done)
        inout = 0
}
END { report() }
' "$junit"
