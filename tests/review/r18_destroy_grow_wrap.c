/* r18_destroy_grow_wrap.c - review r18: a grow that slips into the window between release_all's in-flight check and the
 * `destroyed` store runs its src.alloc after destroy returned 0; if arenas.create reuses the slot meanwhile
 * (arena_fresh_state zeroes grows_in_flight), the grow's source_call_end wraps the new arena's count:
 * its reset/destroy return EBUSY for ever.
 * build+run: cc -O1 -g -Iinclude tests/review/r18_destroy_grow_wrap.c build/libdpmalloc.a -lpthread -lm -o /tmp/r18w && /tmp/r18w */
#include "../tests/review/source_units.h"
static volatile int stop, destroyed_ok; static long after_destroy;
static unsigned A;
static void *slow_alloc(void *c, size_t s, size_t al, bool *z) {
    if (destroyed_ok) __atomic_add_fetch(&after_destroy, 1, __ATOMIC_RELAXED);
    usleep(3000);
    return units_alloc(c, s, al, z);
}
static void *grower(void *x) {
    (void)x;
    while (!stop) if (dpm_malloc_arena(A, 5 << 20, 4096) == NULL) break;
    return NULL;
}
int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0); signal(SIGALRM, on_alarm); alarm(55);
    char *m = mmap(NULL, (NUNITS + 1) * UNIT, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    units = (char *)(((uintptr_t)m + UNIT - 1) & ~(UNIT - 1));
    dpm_page_source_t src = {slow_alloc, units_free, units_purge, NULL};
    for (int it = 0; it < 400; it++) {
        destroyed_ok = 0; stop = 0; after_destroy = 0;
        if (dpm_arena_create_sourced("w", &src, &A)) { printf("create failed\n"); return 2; }
        unsigned first = A;
        pthread_t t; pthread_create(&t, NULL, grower, NULL);
        usleep(1000 + (it % 7) * 300);
        int d; while ((d = arena_op(A, "destroy")) == EBUSY) ;
        destroyed_ok = 1;
        unsigned B; if (dpm_arena_create_sourced("w2", &src, &B)) return 2;   /* reuses the slot */
        stop = 1; pthread_join(t, NULL);
        int busy = 0; while ((d = arena_op(B, "destroy")) == EBUSY && busy < 1000) { busy++; usleep(1000); }
        if (after_destroy || d != 0) {
            printf("iter %d (slot %u -> %u): src.alloc calls that began after destroy returned 0: %ld; destroy of the new arena in the slot -> %d after %d EBUSY (1 s)\n",
                   it, first, B, after_destroy, d, busy);
            if (d == EBUSY) return 1;
        }
        if (d != 0) return 1;
    }
    printf("ok\n");
    return 0;
}
