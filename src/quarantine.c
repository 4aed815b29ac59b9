/*
 * quarantine.c - secure mode's ring of freed large blocks
 * (quarantine.h). A put takes the next slot with one atomic add and
 * swaps its block in, so no lock is held across the kernel calls and
 * fork needs nothing: a block another thread was letting go when the
 * process forked stays parked in the child (a leak there, never a block
 * handed out twice).
 */
#include "quarantine.h"

#include "arena.h"
#include "conf.h"
#include "os.h"

static span_t *ring[QUARANTINE_SLOTS];
static unsigned next_slot;

/* The block's own pages: the run less its guard page (arena.c). */
static size_t block_bytes(const span_t *s) { return (s->npages - s->guarded) << LG_PAGE; }

static void release(span_t *s)
{
    /* access back first: its pages go to the heap usable, or not at all */
    if (!os_commit((void *)s->start, block_bytes(s)))
        return;
    __atomic_store_n(&s->parked, 0, __ATOMIC_RELAXED);
    arena_free_large(s);
}

bool quarantine_large_put(span_t *s)
{
    if (s->arena->manual || s->arena->ph.options.sourced || s->arena->ph.options.hugepages ||
        os_page_size() != PAGE)
        return false;   /* as for guard pages (arena.c) */
    /* a block that goes back to the OS at once without secure mode does
     * so here too: its address space is free for the next request (a
     * new_handler that frees a reserve under RLIMIT_AS counts on it) */
    size_t threshold = __atomic_load_n(&opt.oversize_threshold, __ATOMIC_RELAXED);
    if (threshold != 0 && (s->npages << LG_PAGE) >= threshold)
        return false;
    __atomic_store_n(&s->parked, 1, __ATOMIC_RELAXED);
    if (!os_protect_none((void *)s->start, block_bytes(s), true)) {
        __atomic_store_n(&s->parked, 0, __ATOMIC_RELAXED);
        return false;
    }
    unsigned i = __atomic_fetch_add(&next_slot, 1, __ATOMIC_RELAXED) % QUARANTINE_SLOTS;
    span_t *old = __atomic_exchange_n(&ring[i], s, __ATOMIC_ACQ_REL);
    if (old != NULL)
        release(old);
    return true;
}

unsigned quarantine_large_count(void)
{
    unsigned n = 0;
    for (unsigned i = 0; i < QUARANTINE_SLOTS; i++)
        n += __atomic_load_n(&ring[i], __ATOMIC_RELAXED) != NULL;
    return n;
}
