#!/usr/bin/env bash
# real_programs.sh - real programs under each allocator, preloaded: median
# wall time and median peak RSS ("Maximum resident set size" of
# /usr/bin/time -v: the largest process of the run, e.g. cc1 under gcc,
# pack-objects under git gc) over RUNS runs, and the ratio of each to the
# smallest (fastest) peer of the same run.
#
#   bench/real_programs.sh [--stats] [gcc] [gitgc]      (default: both)
#   make bench-real [REAL_ARGS="--stats gcc"]
#
# Programs:
#   gcc    gcc -O2 -c of the sqlite3 amalgamation (SQLITE_C=path, else the
#          copy in the libsqlite3-sys crate fetched with cargo into
#          $CACHE; without cargo, a large C file generated here, and the
#          table says so)
#   gitgc  git gc --aggressive on a fresh copy of a bare repository
#          (REPO=path, default: this source tree's own repository)
# --stats  one more dpmalloc run per program with
#          DPMALLOC_CONF=stats_print:true: the totals of the process whose
#          report shows the most resident memory (at its exit), to tell where
#          dpmalloc's memory lives.
#
# Environment: RUNS (3), ALLOCATORS ("dpmalloc glibc jemalloc mimalloc
# tcmalloc"; those not installed are skipped), DPM_LIB
# (build/libdpmalloc.so), CACHE (~/.cache/dpmbench), OUT (results root,
# bench/results). Results: $OUT/real-<time>/results.csv.
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
RUNS=${RUNS:-3}
ALLOCATORS=${ALLOCATORS:-"dpmalloc glibc jemalloc mimalloc tcmalloc"}
DPM_LIB=${DPM_LIB:-$src/build/libdpmalloc.so}
CACHE=${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dpmbench}
OUT=${OUT:-$src/bench/results}
SQLITE_CRATE=libsqlite3-sys
SQLITE_CRATE_VERSION=0.30.1

stats=0
programs=()
for a in "$@"; do
    case $a in
    --stats) stats=1 ;;
    gcc | gitgc) programs+=("$a") ;;
    -h | --help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "real_programs.sh: unknown argument $a" >&2; exit 2 ;;
    esac
done
[ ${#programs[@]} -gt 0 ] || programs=(gcc gitgc)

[ -x /usr/bin/time ] || { echo "real_programs.sh: /usr/bin/time missing (apt-get install time)" >&2; exit 1; }

case $(uname -m) in
x86_64) multiarch=x86_64-linux-gnu ;;
aarch64) multiarch=aarch64-linux-gnu ;;
*) multiarch="*-linux-gnu*" ;;
esac

# The library to preload for an allocator; "" for glibc; fails if absent.
library_of() {
    local names
    case $1 in
    dpmalloc) [ -r "$DPM_LIB" ] && echo "$DPM_LIB"; return ;;
    glibc) echo ""; return ;;
    jemalloc) names="libjemalloc.so.2" ;;
    mimalloc) names="libmimalloc.so.2 libmimalloc.so.2.*" ;;
    tcmalloc) names="libtcmalloc_minimal.so.4 libtcmalloc.so.4" ;;
    *) return 1 ;;
    esac
    local d n f
    for d in /usr/lib/$multiarch /lib/$multiarch /usr/lib64 /usr/lib /usr/local/lib; do
        for n in $names; do
            for f in $d/$n; do
                [ -r "$f" ] && { echo "$f"; return 0; }
            done
        done
    done
    return 1
}

work=$(mktemp -d "${TMPDIR:-/tmp}/real_programs.XXXXXX")
trap 'rm -rf "$work"' EXIT
stamp=$(date -u +%Y%m%d-%H%M%S)
outdir=$OUT/real-$stamp
mkdir -p "$outdir" "$CACHE"

# ---- inputs ------------------------------------------------------------------

# sqlite3.c: SQLITE_C, a cached copy, or the libsqlite3-sys crate via cargo.
sqlite_note=""
find_sqlite() {
    if [ -n "${SQLITE_C:-}" ]; then
        sqlite_c=$SQLITE_C
        return
    fi
    sqlite_c=$CACHE/sqlite3.c
    [ -s "$sqlite_c" ] && return
    if command -v cargo >/dev/null; then
        local crate=$work/fetch
        mkdir -p "$crate/src"
        printf '[package]\nname = "fetch-sqlite"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n%s = { version = "=%s", default-features = false }\n' \
            "$SQLITE_CRATE" "$SQLITE_CRATE_VERSION" >"$crate/Cargo.toml"
        echo 'fn main() {}' >"$crate/src/main.rs"
        if (cd "$crate" && CARGO_HOME=$CACHE/cargo cargo fetch --quiet); then
            local f
            f=$(find "$CACHE/cargo/registry/src" -path "*/$SQLITE_CRATE-$SQLITE_CRATE_VERSION/sqlite3/sqlite3.c" | head -1)
            if [ -n "$f" ]; then
                cp "$f" "$sqlite_c"
                return
            fi
        fi
    fi
    # No amalgamation: a large C file generated deterministically.
    sqlite_c=$CACHE/generated.c
    sqlite_note="(generated C file: no sqlite3.c found)"
    awk 'BEGIN {
        print "#include <string.h>";
        for (i = 0; i < 6000; i++) {
            printf "struct s%d { int a[%d]; long b; };\n", i, i % 13 + 1;
            printf "long f%d(long x, const char *s) {\n  struct s%d v; memset(&v, 0, sizeof v);\n", i, i;
            printf "  for (int k = 0; k < %d; k++) { v.a[k %% %d] += (int)(x * k) ^ s[k & 7]; }\n", i % 97 + 3, i % 13 + 1;
            printf "  switch (x & 7) { case 0: x += %d; break; case 1: x *= %d; break; case 2: x ^= v.a[0]; break;\n", i, i % 31 + 2;
            printf "  case 3: x -= strlen(s); break; default: x = x * 3 + v.a[%d]; }\n", i % (i % 13 + 1);
            printf "  return x + v.b%s;\n}\n", i ? sprintf(" + f%d(x - 1, s + 1)", i - 1) : "";
        }
    }' >"$sqlite_c"
}

# The repository git gc works on: a bare copy made once, copied per run.
repo_src=""
prepare_repo() {
    local repo=${REPO:-$(git -C "$src" rev-parse --path-format=absolute --git-common-dir)}
    git clone --quiet --bare --no-local "$repo" "$work/gc-source.git"
    repo_src=$work/gc-source.git
    repo_desc="$repo ($(du -sh "$repo_src" | cut -f1) packed, $(git --git-dir="$repo_src" rev-list --all --count) commits)"
}

# ---- running -----------------------------------------------------------------

# run_once PROGRAM LIB TIMEFILE [extra env...]: one run under /usr/bin/time -v.
run_once() {
    local program=$1 lib=$2 tf=$3
    shift 3
    local preload=(env -u LD_PRELOAD)
    [ -n "$lib" ] && preload=(env LD_PRELOAD="$lib")
    case $program in
    gcc)
        /usr/bin/time -v -o "$tf" "${preload[@]}" "$@" gcc -O2 -c "$sqlite_c" -o "$work/out.o"
        ;;
    gitgc)
        rm -rf "$work/gc.git"
        cp -a "$repo_src" "$work/gc.git"
        /usr/bin/time -v -o "$tf" "${preload[@]}" "$@" git --git-dir="$work/gc.git" gc --aggressive --quiet
        ;;
    esac
}

# "wall_seconds peak_kib" from a /usr/bin/time -v report.
parse_time() {
    awk -F': ' '
        /Elapsed \(wall clock\)/ { n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i] }
        /Maximum resident set size/ { rss = $2 }
        END { printf "%.2f %d\n", s, rss }' "$1"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# Totals of the report with the most resident memory; dirty and muzzy pages
# summed over the arenas of that report.
summarise_stats() {
    awk '
        function flush() {
            if (have && resident > best) {
                best = resident; line = sprintf("allocated %.1f MiB, active %.1f, fragmentation (active - allocated - tcache) %.1f, tcache_bytes %.1f, dirty %.1f, muzzy %.1f, metadata %.1f, resident %.1f, mapped %.1f, retained %.1f",
                    allocated / M, active / M, (active - allocated - tcache) / M, tcache / M, dirty * 4096 / M, muzzy * 4096 / M, metadata / M, resident / M, mapped / M, retained / M)
            }
            have = 0; dirty = 0; muzzy = 0
        }
        BEGIN { M = 1048576; best = -1 }
        /^___ dpmalloc statistics ___/ { flush(); have = 1; intotals = 1; next }
        /^  arenas:/ { intotals = 0 }
        intotals && $1 == "allocated:" { allocated = $2 }
        intotals && $1 == "active:" { active = $2 }
        intotals && $1 == "resident:" { resident = $2 }
        intotals && $1 == "mapped:" { mapped = $2 }
        intotals && $1 == "retained:" { retained = $2 }
        intotals && $1 == "metadata:" { metadata = $2 }
        intotals && $1 == "tcache_bytes:" { tcache = $2 }
        !intotals && $1 == "pdirty:" { dirty += $2 }
        !intotals && $1 == "pmuzzy:" { muzzy += $2 }
        END { flush(); print line }' "$1"
}

csv=$outdir/results.csv
echo "program,allocator,run,wall_s,peak_rss_kib" >"$csv"
declare -A wall rss
available=()
for a in $ALLOCATORS; do
    if library_of "$a" >/dev/null; then
        available+=("$a")
    else
        echo "real_programs.sh: $a not installed, skipped (make bench-deps)" >&2
    fi
done

for program in "${programs[@]}"; do
    case $program in
    gcc) find_sqlite; what="gcc -O2 -c $(basename "$sqlite_c") ($(wc -l <"$sqlite_c") lines) $sqlite_note" ;;
    gitgc) prepare_repo; what="git gc --aggressive on a copy of $repo_desc" ;;
    esac
    echo "== $program: $what" >&2
    for run in $(seq 1 "$RUNS"); do
        # allocators interleaved, so a slow spell of the machine hits all
        for a in "${available[@]}"; do
            lib=$(library_of "$a")
            run_once "$program" "$lib" "$work/time"
            read -r w r < <(parse_time "$work/time")
            echo "$program,$a,$run,$w,$r" >>"$csv"
            echo "  $program $a run $run: ${w} s, $((r / 1024)) MiB" >&2
        done
    done
    for a in "${available[@]}"; do
        wall[$program,$a]=$(awk -F, -v p="$program" -v a="$a" '$1 == p && $2 == a { print $4 }' "$csv" | median)
        rss[$program,$a]=$(awk -F, -v p="$program" -v a="$a" '$1 == p && $2 == a { print $5 }' "$csv" | median)
    done
    # the smallest and fastest peer (any allocator but dpmalloc)
    min_rss="" min_wall=""
    for a in "${available[@]}"; do
        [ "$a" = dpmalloc ] && continue
        r=${rss[$program,$a]} w=${wall[$program,$a]}
        if [ -z "$min_rss" ] || awk -v x="$r" -v y="$min_rss" 'BEGIN { exit !(x < y) }'; then min_rss=$r; fi
        if [ -z "$min_wall" ] || awk -v x="$w" -v y="$min_wall" 'BEGIN { exit !(x < y) }'; then min_wall=$w; fi
    done
    echo
    echo "== $program: $what; median of $RUNS runs"
    printf '%-10s %12s %14s %18s %18s\n' allocator "wall [s]" "peak RSS [MiB]" "RSS / least peer" "time / best peer"
    for a in "${available[@]}"; do
        r=${rss[$program,$a]} w=${wall[$program,$a]}
        awk -v a="$a" -v r="$r" -v w="$w" -v mr="$min_rss" -v mw="$min_wall" 'BEGIN {
            printf "%-10s %12.2f %14.1f %18s %18s\n", a, w, r / 1024,
                (mr > 0 ? sprintf("%.2fx", r / mr) : "-"), (mw > 0 ? sprintf("%.2fx", w / mw) : "-") }'
    done
    if [ "$stats" = 1 ] && [ -r "$DPM_LIB" ]; then
        run_once "$program" "$DPM_LIB" "$work/time" \
            DPMALLOC_CONF=stats_print:true,stats_print_opts:gblxt 2>"$work/stats.txt" || true
        cp "$work/stats.txt" "$outdir/stats-$program.txt"
        echo "dpmalloc at exit of its largest process: $(summarise_stats "$work/stats.txt")"
    fi
done
echo
echo "results: $csv"
