/* r17_reset_vs_destroy.c - review r17: a reset's src.free calls (release_arena, after arenas_lock is dropped)
 * are not counted in flight: a destroy from another thread meanwhile returns 0, then the
 * reset's free callbacks land on the "dead" context.
 * build+run: cc -O1 -g -Iinclude tests/review/r17_reset_vs_destroy.c build/libdpmalloc.a -lpthread -lm -o /tmp/r17a && /tmp/r17a */
#include "slow_free_source.h"

static unsigned a;
static void *resetter(void *x) {
    (void)x; char nm[64]; snprintf(nm, sizeof nm, "arena.%u.reset", a);
    int r = dpm_ctl(nm, NULL, NULL, NULL, 0); printf("reset -> %d\n", r); return NULL;
}
int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0); mainthr = pthread_self();
    char *m = mmap(NULL, 65 * UNIT, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    base = (char *)(((uintptr_t)m + UNIT - 1) & ~(UNIT - 1));
    dpm_page_source_t src = {s_alloc, s_free, s_purge, NULL};
    if (dpm_arena_create_sourced("s", &src, &a)) return 2;
    void *small = dpm_malloc_arena(a, 1000, 16);
    void *big = dpm_malloc_arena(a, 6 << 20, 4096);
    memset(big, 1, 6 << 20); (void)small;
    dpm_ctl("thread.tcache.flush", NULL, NULL, NULL, 0);
    pthread_t t; pthread_create(&t, NULL, resetter, NULL);
    while (!in_free) usleep(1000);
    char nm[64]; snprintf(nm, sizeof nm, "arena.%u.destroy", a);
    int d, busy = 0;
    while ((d = dpm_ctl(nm, NULL, NULL, NULL, 0)) == EBUSY && busy < 500) { busy++; usleep(10000); }
    long g = given, r = returned;
    ctx_dead = 1;
    printf("destroy -> %d after %d EBUSY; right after destroy: given %ld units, returned %ld\n", d, busy, g, r);
    pthread_join(t, NULL);
    printf("free callbacks on the dead context after destroy returned: %ld (expect 0); given %ld returned %ld\n", late, given, returned);
    return late != 0 || d != 0 || g != r;
}
