/*
 * r11_source_destroy_during_alloc.c - a sourced arena destroyed while its
 * page source's alloc callback runs: the allocation goes on in the
 * destroyed arena, the new segment is never given back, and once the slot
 * is reused the old source's memory is served by the new arena and the
 * heap check fails.
 *
 * arena_grow_from_source() (src/arena.c) calls src->alloc with no lock
 * held and, on return, ph_add_segment()s the range into a->ph without
 * looking at a->destroyed (or at a->incarnation). release_arena() refuses
 * a reset/destroy only for bound threads (nthreads) and source *purges* in
 * flight (purges_in_flight); nothing counts source *allocs* in flight. So
 * a destroy that runs meanwhile - from the callback itself (mode 0), or
 * from another thread while the callback is slow (mode 1, e.g. a DPDK
 * memzone reserve) - succeeds; the caller then adds the segment to the
 * dead arena and returns a block of it. arenas.create (here via
 * dpm_arena_create_sourced) reuses the slot and arena_fresh_state()
 * reinitialises a->ph, but the late segment is still published in the
 * page map with spans of the old heap: freeing the old block files its
 * pages into the new arena's heap, the new arena hands out memory of
 * the *first* source, and debug.check_heap reports broken run indexes.
 * The first source's segment is never passed to its free callback.
 * docs/numa.md says a reset or destroy that finds a source purge under
 * way returns EBUSY; an alloc under way is not covered.
 *
 * Build and run (from the worktree, after building build/):
 *   cc -O1 -Iinclude tests/review/r11_source_destroy_during_alloc.c \
 *      build/libdpmalloc_plain.a -lpthread -o /tmp/r11sd && /tmp/r11sd 0 && /tmp/r11sd 1
 * Expected: the destroy is refused (EBUSY) while the callback runs, or the
 *   allocation fails; every segment the first source gave is given back
 *   to it; debug.check_heap 0 throughout. Exit 0.
 * Actual (70fb239): "destroy during the alloc callback: 0", the block comes
 *   from the destroyed arena, arena "two" later returns a block inside
 *   source one's range, check_heap reports "broken back link", source one
 *   got 1 segment and 0 back. Exit 1.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dpmalloc.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

typedef struct src_ctx {
    const char *name;
    uintptr_t lo[16], hi[16];
    int nalloc, nfree;
} src_ctx_t;

static src_ctx_t one = {.name = "one"}, two = {.name = "two"};
static unsigned idx;
static int mode, destroy_rc = -1;
static sem_t in_callback, destroyed;

static void *s_alloc(void *ctx, size_t size, size_t align, bool *zeroed)
{
    src_ctx_t *c = ctx;
    char *m = mmap(NULL, size + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED || c->nalloc == 16)
        return NULL;
    uintptr_t a = ((uintptr_t)m + align - 1) & ~(uintptr_t)(align - 1);
    c->lo[c->nalloc] = a;
    c->hi[c->nalloc++] = a + size;
    *zeroed = true;
    if (c == &one && c->nalloc == 1) {
        if (mode == 0) {
            char n[64];
            snprintf(n, sizeof n, "arena.%u.destroy", idx);
            destroy_rc = dpm_ctl(n, NULL, NULL, NULL, 0);
        } else {
            sem_post(&in_callback);
            sem_wait(&destroyed);
        }
    }
    return (void *)a;
}

static void s_free(void *ctx, void *addr, size_t size)
{
    src_ctx_t *c = ctx;
    (void)size;
    for (int i = 0; i < c->nalloc; i++)
        if (c->lo[i] == (uintptr_t)addr)
            c->nfree++;
}

static int inside(const src_ctx_t *c, const void *p)
{
    for (int i = 0; i < c->nalloc; i++)
        if ((uintptr_t)p >= c->lo[i] && (uintptr_t)p < c->hi[i])
            return 1;
    return 0;
}

static unsigned check_heap(void)
{
    unsigned u = 0;
    size_t l = sizeof u;
    dpm_ctl("debug.check_heap", &u, &l, NULL, 0);
    return u;
}

static void *allocator(void *arg)
{
    (void)arg;
    return dpm_malloc_arena(idx, 100000, 0);
}

int main(int argc, char **argv)
{
    mode = argc > 1 ? atoi(argv[1]) : 0;
    sem_init(&in_callback, 0, 0);
    sem_init(&destroyed, 0, 0);
    dpm_page_source_t src = {.alloc = s_alloc, .free = s_free, .ctx = &one};
    if (dpm_arena_create_sourced("one", &src, &idx) != 0)
        return 2;
    void *p;
    if (mode == 0) {
        p = dpm_malloc_arena(idx, 100000, 0);
    } else {
        pthread_t t;
        pthread_create(&t, NULL, allocator, NULL);
        sem_wait(&in_callback);
        char n[64];
        snprintf(n, sizeof n, "arena.%u.destroy", idx);
        destroy_rc = dpm_ctl(n, NULL, NULL, NULL, 0);
        sem_post(&destroyed);
        pthread_join(t, &p);
    }
    int bad = 0;
    printf("mode %d: destroy during the alloc callback: %d; block %p\n", mode, destroy_rc, p);
    if (destroy_rc == 0 && p != NULL) {
        printf("  the block comes from arena %u after it was destroyed\n", idx);
        bad = 1;
    }
    unsigned idx2;
    src.ctx = &two;
    if (dpm_arena_create_sourced("two", &src, &idx2) != 0)
        return 2;
    void *q = dpm_malloc_arena(idx2, 100000, 0);
    if (p != NULL)
        dpm_free(p);
    void *r = dpm_malloc_arena(idx2, 100000, 0);
    unsigned c = check_heap();
    printf("  arena %u (source two): blocks %p %p; inside source one's memory: %d %d; check_heap %u\n", idx2, q, r,
           inside(&one, q), inside(&one, r), c);
    if (inside(&one, q) || inside(&one, r) || c != 0)
        bad = 1;
    dpm_free(q);
    dpm_free(r);
    char n[64];
    snprintf(n, sizeof n, "arena.%u.destroy", idx2);
    dpm_ctl(n, NULL, NULL, NULL, 0);
    if (destroy_rc != 0) {   /* the first destroy was refused: destroy it now */
        snprintf(n, sizeof n, "arena.%u.destroy", idx);
        dpm_ctl(n, NULL, NULL, NULL, 0);
    }
    printf("  source one: %d segments given, %d given back\n", one.nalloc, one.nfree);
    if (one.nfree != one.nalloc)
        bad = 1;
    puts(bad ? "FAIL" : "ok");
    return bad;
}
