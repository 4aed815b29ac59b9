/* tcache_phased_alloc: stash_flush(st) may run a page source's purge callback on this thread
 * (dirty_decay_ms:0, the stash's blocks empty a phased slab). A callback that makes 4
 * dpm_malloc_aligned_at calls of other phases rotates through the stashes and refills st
 * with blocks of its own (smaller) bin; the outer call then sets st->bin to its bin and
 * hands out the callback's block: wrong size and wrong offset.
 * build: cc -O1 -g -Iinclude -Itests/review tests/review/r15_phased_stash.c build/libdpmalloc.a -lpthread -lm -o /tmp/phs
 * run:   DPMALLOC_CONF=dirty_decay_ms:0 /tmp/phs */
#include "source_units.h"
static volatile int armed; static int ncb;
static void *cbkeep[64]; static int ncbkeep;
static void h(bool purge) {
    if (!purge || !armed) return;
    armed = 0; ncb++;
    for (int i = 0; i < 4; i++) cbkeep[ncbkeep++] = dpm_malloc_aligned_at(16, 64, 8 * (i + 1));
}
int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0); signal(SIGALRM, on_alarm); alarm(20);
    unsigned M = make_sourced(); if (bind_to(M)) return 2;
    hook = h;
    int fails = 0, tries = 0;
    for (int round = 0; round < 20; round++) {
        /* 4 phases: each leaves 15 blocks in a stash, holding its slab */
        for (int k = 0; k < 4; k++) { void *p = dpm_malloc_aligned_at(2000, 4096, 64 * (k + 1) + round * 512); free(p); }
        armed = 1; tries++;
        size_t off = 64 * 5 + round * 512;
        char *p = dpm_malloc_aligned_at(2000, 4096, off);   /* new phase: flushes the oldest stash */
        size_t us = dpm_usable_size(p);
        int wrong = us < 2000 || ((uintptr_t)p + off) % 4096 != 0;
        if (armed == 0 || wrong) printf("round %d: callback ran %d; dpm_malloc_aligned_at(2000, 4096, %zu) = %p usable %zu, (p+off)%%4096 = %zu%s\n",
                                       round, armed == 0, off, (void *)p, us, ((uintptr_t)p + off) % 4096, wrong ? "  <-- WRONG" : "");
        fails += wrong;
        armed = 0;
        if (wrong) { memset(p, 0xee, 2000); }
        free(p);
    }
    unsigned hb = 0; size_t l = sizeof hb; dpm_ctl("debug.check_heap", &hb, &l, NULL, 0);
    printf("callbacks %d, wrong blocks %d of %d, check_heap %u\n", ncb, fails, tries, hb);
    return fails != 0 || hb != 0;
}
