/*
 * tcache.c - slow halves of the thread cache (see tcache.h).
 */
#include "tcache.h"
#include "conf.h"
#include "error.h"
#include "global.h"

#include <string.h>

__thread tcache_t *tls_tcache = &tcache_empty;
__thread uint8_t tls_state;
__thread arena_t *tls_arena;
tcache_t tcache_empty;

static dpm_mutex_t tcaches_lock = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0};
static tcache_t *tcaches_live;     /* every thread's cache, for stats and fork */
static tcache_t *tcaches_spare;    /* caches of exited threads, for reuse */

unsigned tcache_classes_for(size_t tcache_max)
{
    if (tcache_max == 0)
        return 0;
    unsigned n = sc_compute(tcache_max) + 1;
    if (sc_size(n - 1) > tcache_max)
        n--;
    return n > TC_MAX_CLASSES ? TC_MAX_CLASSES : n;
}

static unsigned nslots_for_class(unsigned c)
{
    if (c >= NSMALL)
        return opt.tcache_nslots_large;
    unsigned n = sc_table[c].slab_objs << opt.lg_tcache_nslots_mul;
    if (n < opt.tcache_nslots_small_min)
        n = opt.tcache_nslots_small_min;
    if (n > opt.tcache_nslots_small_max)
        n = opt.tcache_nslots_small_max;
    return n;
}

static void list_link(tcache_t **list, tcache_t *tc)
{
    tc->prev = NULL;
    tc->next = *list;
    if (*list != NULL)
        (*list)->prev = tc;
    *list = tc;
}

static void list_unlink(tcache_t **list, tcache_t *tc)
{
    if (tc->prev != NULL)
        tc->prev->next = tc->next;
    else
        *list = tc->next;
    if (tc->next != NULL)
        tc->next->prev = tc->prev;
}

static tcache_t *tcache_new(void)
{
    size_t total = 0;
    for (unsigned c = 0; c < g.tcache_nclasses; c++)
        total += nslots_for_class(c);
    tcache_t *tc = base_alloc(sizeof(tcache_t), CACHELINE);
    void **slots = base_alloc(total * sizeof(void *), CACHELINE);
    if (tc == NULL || slots == NULL)
        return NULL;
    tc->slot_storage = slots;
    tc->nslots_total = total;
    return tc;
}

static void tcache_reset(tcache_t *tc)
{
    memset(tc->bins, 0, sizeof(tc->bins));
    memset(tc->stats, 0, sizeof(tc->stats));
    void **slots = tc->slot_storage;
    for (unsigned c = 0; c < g.tcache_nclasses; c++) {
        tc_bin_t *b = &tc->bins[c];
        b->slots = slots;
        b->ncached_max = (uint16_t)nslots_for_class(c);
        b->head = slots + b->ncached_max;
        b->empty_lo = (uint16_t)(uintptr_t)b->head;
        b->full_lo = (uint16_t)(uintptr_t)slots;
        slots += b->ncached_max;
    }
}

arena_t *thread_arena(void)
{
    if (tls_arena == NULL)
        tls_arena = arena_choose();
    return tls_arena;
}

bool tcache_create_for_thread(void)
{
    if (tls_state != THREAD_NEW || !opt.tcache || g.tcache_nclasses == 0)
        return false;
    arena_t *arena = thread_arena();
    if (arena == NULL)
        return false;
    mutex_lock(&tcaches_lock);
    tcache_t *tc = tcaches_spare;
    if (tc != NULL)
        list_unlink(&tcaches_spare, tc);
    mutex_unlock(&tcaches_lock);
    if (tc == NULL && (tc = tcache_new()) == NULL)
        return false;
    tcache_reset(tc);
    tc->arena = arena;
    __atomic_fetch_add(&arena->nthreads, 1, __ATOMIC_RELAXED);
    mutex_lock(&tcaches_lock);
    list_link(&tcaches_live, tc);
    mutex_unlock(&tcaches_lock);
    tls_tcache = tc;
    tls_state = THREAD_CACHED;
    pthread_setspecific(g.thread_key, tc);
    return true;
}

void *tcache_alloc_miss(tcache_t *tc, unsigned c)
{
    tc_bin_t *b = &tc->bins[c];
    b->nrequests++;
    tc->stats[c].nmisses++;
    if (c >= NSMALL) {
        large_request_t req = {.size = sc_size(c), .align = 1};
        return arena_alloc_large(tc->arena, &req);
    }
    unsigned want = b->ncached_max / 2 + 1;
    void *batch[SLAB_MAX_OBJS + 1];
    if (want > ARRAY_LEN(batch))
        want = ARRAY_LEN(batch);
    unsigned got = bin_fill(&tc->arena->bins[c], batch, want);
    if (got == 0)
        return NULL;
    tc->stats[c].nfills++;
    /* Keep batch[0] for the caller; the rest go on the stack so that the
     * lowest addresses are popped first. */
    for (unsigned i = got; i-- > 1;)
        tc_bin_push(b, batch[i]);
    return batch[0];
}

/* Returns the n oldest blocks of bin c (the bottom of the stack, next to
 * its empty end) to their homes. */
static void flush_oldest(tcache_t *tc, unsigned c, unsigned n)
{
    tc_bin_t *b = &tc->bins[c];
    if (n == 0)
        return;
    void **top = b->slots + b->ncached_max;
    void **oldest = top - n;
    if (c < NSMALL) {
        bin_flush(oldest, n);
    } else {
        for (unsigned i = 0; i < n; i++)
            arena_free_large(span_of(oldest[i]));
    }
    unsigned keep = (unsigned)(oldest - b->head);
    memmove(top - keep, b->head, keep * sizeof(void *));
    b->head = top - keep;
    tc->stats[c].nflushes++;
    tc->stats[c].nflushed_objs += n;
}

void tcache_free_full(tcache_t *tc, unsigned c, void *p)
{
    tc_bin_t *b = &tc->bins[c];
    flush_oldest(tc, c, (b->ncached_max + 1) / 2);
    tc_bin_push(b, p);
}

void tcache_flush_all(tcache_t *tc)
{
    for (unsigned c = 0; c < g.tcache_nclasses; c++)
        flush_oldest(tc, c, tc_bin_count(&tc->bins[c]));
}

void tcache_thread_exit(void *arg)
{
    tcache_t *tc = arg;
    if (tc == NULL || tc != tls_tcache)
        return;
    tls_tcache = &tcache_empty;
    tls_state = THREAD_EXITING;
    tcache_flush_all(tc);
    __atomic_fetch_sub(&tc->arena->nthreads, 1, __ATOMIC_RELAXED);
    mutex_lock(&tcaches_lock);
    list_unlink(&tcaches_live, tc);
    list_link(&tcaches_spare, tc);
    mutex_unlock(&tcaches_lock);
}

void tcaches_prefork(void) { mutex_lock(&tcaches_lock); }
void tcaches_postfork_parent(void) { mutex_unlock(&tcaches_lock); }

void tcaches_postfork_child(void)
{
    mutex_init(&tcaches_lock);
    /* Only the forking thread lives on; the other caches' blocks are lost
     * to the child, as in every thread-caching allocator. */
    tcaches_live = NULL;
    if (tls_state == THREAD_CACHED) {
        list_link(&tcaches_live, tls_tcache);
        tls_tcache->arena->nthreads = 1;
    }
}
