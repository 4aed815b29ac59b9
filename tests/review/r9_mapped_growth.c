/*
 * r9_mapped_growth.c - review of issue 9: address space and RSS grow
 * without bound in a steady single-threaded alloc/realloc/free loop.
 *
 * Each round allocates 64 blocks of 16 KiB .. 4 MiB (first and last byte
 * touched), reallocs a third of them down to 16 KiB .. 1 MiB, and frees
 * all 64. Nothing is live between rounds, so mapped and RSS must level
 * off.
 *
 * Build and run (from the worktree, after building build/):
 *   gcc -O2 -fno-builtin -o /tmp/r9_mapped_growth tests/review/r9_mapped_growth.c \
 *       -Iinclude -Itests/review -Lbuild -Wl,-rpath,$PWD/build -ldpmalloc
 *   timeout 120 /tmp/r9_mapped_growth
 *   timeout 120 env LD_PRELOAD=/path/to/old/libdpmalloc.so /tmp/r9_mapped_growth   (any allocator)
 *
 * Expected: stats.mapped at round 2000 within 1.5x of round 500, RSS 2x
 * (glibc levels off at ~130 MiB RSS; e544ea3 at 258 MiB mapped / 210 MiB
 * RSS; with the cut purge disabled the current code levels off at 194 MiB
 * mapped / 177 MiB RSS).
 * Actual (HEAD 234f56d): mapped 2.7 GiB -> 8.7 GiB, RSS 99 -> 334 MiB,
 * growing linearly (8000 rounds, 20 s: 163 GiB mapped, 2.8 GiB RSS in
 * the similar mixed program), exit status 1.
 *
 * Root cause: a realloc that cuts >= 1 MiB purges the cut at once
 * (arena_resize_large_in_place -> take_run_for_purge, SHRINK_PURGE_MIN),
 * which files it CLEAN; pages.c mergeable() lets a run merge only with
 * runs of its own state (dirty also absorbs retained), so a clean run
 * never coalesces with the dirty runs freed around it. Free space breaks
 * into alternating dirty/clean islands (1799 dirty + 1818 clean runs after
 * 300 rounds of the mixed program), find_run() looks for one run of one
 * state, no island fits the next big request, and segment_create() maps a
 * new segment. Those segments never become idle (they hold dirty runs),
 * so segment_release_if_idle() never unmaps them.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "review.h"

static uint64_t rs = 12345;
static uint64_t rnd(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return rs;
}

int main(void)
{
    enum { N = 64, ROUNDS = 2000, FIRST = 500 };
    void *v[N];
    double rss0 = 0, map0 = 0;
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < N; i++) {
            size_t s = 16384 + rnd() % (4u << 20);
            char *p = malloc(s);
            if (p == NULL)
                return 2;
            p[0] = 1;
            p[s - 1] = 1;
            v[i] = p;
        }
        for (int i = 0; i < N; i++) {
            if (rnd() % 3 == 0) {
                void *q = realloc(v[i], 16385 + rnd() % (1u << 20));
                if (q == NULL)
                    return 2;
                v[i] = q;
            }
            free(v[i]);
        }
        if (r + 1 == FIRST) {
            rss0 = rss_mib();
            map0 = stat_mib("stats.mapped");
        }
    }
    double rss1 = rss_mib(), map1 = stat_mib("stats.mapped");
    printf("round %d: rss %.1f MiB mapped %.1f MiB; round %d: rss %.1f MiB mapped %.1f MiB\n", FIRST, rss0, map0,
           ROUNDS, rss1, map1);
    int bad = rss1 > rss0 * 2 + 32 || map1 > map0 * 1.5 + 64;
    printf("%s\n", bad ? "FAIL: memory grows in a steady state" : "ok");
    return bad;
}
