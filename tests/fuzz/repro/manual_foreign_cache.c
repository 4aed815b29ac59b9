/*
 * Found by the fuzzer (any seed, default configuration: e.g. seed 1,
 * "block ... of manual arena 8 handed to a thread bound to manual arena
 * 9"): a block of manual arena B freed by a thread bound to manual arena
 * A enters that thread's cache (the manual bins take blocks by size class
 * only, whatever their arena), so
 *   1. the thread's next allocation of that size returns a block of B
 *      although it is bound to A, and
 *   2. once B is destroyed by another thread (nobody is bound to B, so
 *      destroy succeeds), the block still sits in A's thread's cache and
 *      is handed out again: its memory went back to the OS with B.
 *
 * build: cc -I include tests/fuzz/repro/manual_foreign_cache.c build/libdpmalloc_plain.a -lpthread
 * run:   ./a.out   (exit 0 = fixed; exit 1 or SIGSEGV = the defect)
 */
#include <dpmalloc.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static unsigned arena_a, arena_b;

static unsigned create(void)
{
    unsigned idx;
    size_t len = sizeof idx;
    if (dpm_ctl("arenas.create", &idx, &len, NULL, 0) != 0) {
        printf("arenas.create failed\n");
        return 0;
    }
    return idx;
}

static unsigned lookup(void *p)
{
    unsigned idx = ~0u;
    size_t len = sizeof idx;
    dpm_ctl("arenas.lookup", &idx, &len, &p, sizeof p);
    return idx;
}

static void *destroy_b(void *arg)
{
    (void)arg;
    char name[32];
    snprintf(name, sizeof name, "arena.%u.destroy", arena_b);
    int err = dpm_ctl(name, NULL, NULL, NULL, 0);
    printf("%s from another thread: %d\n", name, err);
    return NULL;
}

int main(void)
{
    arena_a = create();
    arena_b = create();
    dpm_free(dpm_malloc(64));   /* this thread has a cache */
    if (dpm_ctl("thread.arena", NULL, NULL, &arena_a, sizeof arena_a) != 0)
        return 2;
    int bad = 0;

    /* 1: a block of B comes back to a thread bound to A */
    void *b = dpm_malloc_arena(arena_b, 64, 0);
    dpm_free(b);
    void *c = dpm_malloc(64);
    printf("bound to %u: dpm_malloc(64) = %p of arena %u\n", arena_a, c, lookup(c));
    bad |= lookup(c) != arena_a;
    dpm_free(c);

    /* 2: ... and after B is destroyed */
    b = dpm_malloc_arena(arena_b, 64, 0);
    dpm_free(b);
    pthread_t th;
    pthread_create(&th, NULL, destroy_b, NULL);
    pthread_join(th, NULL);
    c = dpm_malloc(64);
    printf("after destroying %u: dpm_malloc(64) = %p (the destroyed arena's block: %s)\n", arena_b, c,
           c == b ? "yes" : "no");
    fflush(stdout);
    bad |= c == b;
    memset(c, 0x5a, 64);   /* faults when the block's memory was unmapped */
    dpm_free(c);
    printf(bad ? "DEFECT\n" : "ok\n");
    return bad;
}
