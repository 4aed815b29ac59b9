/* tcache_phased_alloc's fill runs the page source's alloc callback (the arena grows); a callback
 * making 4 dpm_malloc_aligned_at calls of new phases rotates onto the outer call's stash and sets
 * st->bin to its own bin; the outer fill then writes its blocks into that stash, which still claims
 * the callback's bin: a later request of the callback's 4th phase gets the outer bin's blocks.
 * build: cc -O1 -g -Iinclude -Itests/review tests/review/r15_phased_fill2.c build/libdpmalloc.a -lpthread -lm -o /tmp/phf2
 * run:   /tmp/phf2 */
#include "source_units.h"
static volatile int armed; static int qbase; static size_t qoff4;
static void h(bool purge) {
    if (purge || !armed) return;
    armed = 0;
    for (int i = 0; i < 4; i++) { size_t o = 8 + 8 * (size_t)(qbase + i) * 3; if (i == 3) qoff4 = o; void *q = dpm_malloc_aligned_at(16, 4096, o); (void)q; }
    qbase += 4;
}
int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0); signal(SIGALRM, on_alarm); alarm(20);
    unsigned M = make_sourced(); if (bind_to(M)) return 2;
    { void *volatile w = malloc(100); free(w); }   /* the thread gets its cache */
    hook = h;
    int wrong = 0, ran = 0;
    for (int round = 0; round < 200 && ran < 5; round++) {
        void *volatile big = malloc(256 << 10); (void)big;   /* eats the segment (kept) */
        armed = 1;
        void *outer = dpm_malloc_aligned_at(200, 4096, 2048 + 16 * (size_t)round);   /* a new phase: a new slab */
        if (armed) { armed = 0; continue; }
        ran++;
        (void)outer;
        for (int i = 0; i < 3; i++) {
            char *p = dpm_malloc_aligned_at(16, 4096, qoff4);   /* the callback's 4th phase */
            if (((uintptr_t)p + qoff4) % 4096 != 0) { wrong++; printf("round %d: dpm_malloc_aligned_at(16, 4096, %zu) = %p: (p+off)%%4096 = %zu, usable %zu  <-- WRONG (p%%256 = %zu: the outer bin's block)\n",
                round, qoff4, (void *)p, ((uintptr_t)p + qoff4) % 4096, dpm_usable_size(p), (uintptr_t)p % 256); }
        }
    }
    hook = NULL;
    printf("callback ran in %d fills; wrong blocks %d\n", ran, wrong);
    return wrong != 0;
}
