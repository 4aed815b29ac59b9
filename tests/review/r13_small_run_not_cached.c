/*
 * r13_small_run_not_cached.c - review r13 of the large cache: a page run
 * of a small size (an over-aligned small request, aligned_alloc(64 KiB,
 * 8 KiB)) was taken for a large class's block when freed, because the
 * put recognised class sizes by a formula that page-rounds sizes below
 * the large classes. No request can ever take such a block from the cache:
 * 16 of them pushed a cached 1 MiB block out (stats.tcache_bytes 1.00 ->
 * 0.13 MiB) and held slots and budget.
 *
 * Build and run (from the worktree, after building build/):
 *   gcc -O2 -fno-builtin -o /tmp/r13srun tests/review/r13_small_run_not_cached.c -Iinclude \
 *       -Itests/review -Lbuild -Wl,-rpath,$PWD/build -ldpmalloc && /tmp/r13srun
 * Expected: the 1 MiB block stays cached (tcache_bytes >= 1 MiB), exit 0.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "review.h"

int main(void)
{
    void *keep = malloc(64);
    free(malloc(1 << 20));   /* one useful 1 MiB block cached */
    double before = stat_mib("stats.tcache_bytes");
    void *q[16];
    for (int i = 0; i < 16; i++) {
        q[i] = aligned_alloc(65536, 8192);
        memset(q[i], 1, 8192);
    }
    for (int i = 0; i < 16; i++)
        free(q[i]);
    double after = stat_mib("stats.tcache_bytes");
    int bad = dpm_ctl && (before < 1.0 || after < 1.0);
    printf("tcache_bytes: %.3f MiB with the 1 MiB block cached, %.3f MiB after 16 frees of 8 KiB page runs: %s\n",
           before, after, bad ? "FAIL: the 1 MiB block was pushed out" : "ok");
    free(malloc(1 << 20));
    free(keep);
    return bad;
}
