/*
 * large_cache.h - the large caches: per CPU, freed blocks of the large
 * classes (16 KiB up to tcache_max) kept whole for the next request of
 * their class on that CPU, at most tcache_nslots_large blocks and
 * tcache_large_bytes usable bytes per CPU, so at most CPUs x
 * tcache_large_bytes in all, however many threads run. Both front ends
 * use them (a thread on its own cache too): no thread owns large blocks.
 *
 * A thread uses the cache of the CPU it runs on (the rseq area's cpu_id
 * where it is registered, sched_getcpu() otherwise), under that cache's
 * mutex: the thread on that CPU is normally its only taker, so the lock
 * is uncontended, and nothing depends on the CPU number still being
 * current. Any thread may send a cache's blocks home (malloc_trim,
 * arena.<i>.purge, thread.tcache.flush, the background thread's idle
 * pass). Blocks in a large cache are marked parked: a free of one is a
 * double free. A cache is made at the first put on its CPU.
 *
 * Slack: a grown block (the end of a chain of growth) that serves a
 * smaller request keeps all its pages; those past what a fresh block of
 * the request gets are its slack, which realloc grows into without
 * touching the page heap. Slack counts in the bytes of the cache that
 * handed the block out (span_t.slack_in points at it), whichever thread
 * later grows or frees the block, and whoever empties that cache cuts it
 * off into the page heap.
 *
 * Owns: the large caches, their bounds and their drain. May call: arena,
 * rseq, base. Lock order: a large cache's lock, then arena locks.
 */
#ifndef DPM_LARGE_CACHE_H
#define DPM_LARGE_CACHE_H

#include "arena.h"

/* CPU numbers with a cache of their own; higher ones share (modulo). */
#define LARGE_CPUS_MAX 1024
/* Slots of one cache: tcache_nslots_large (at most this) by default, and
 * what a thread's own class limit asks for (thread.tcache.ncached_max). */
#define LARGE_SLOTS_MAX 64
/* Large classes a cache counts per class: those up to 8 MiB (index:
 * class - NSMALL), past LARGE_ROUND_MAX, the largest block it takes. */
#define LARGE_CACHE_CLASSES 37

typedef struct large_cache {
    /* what a put, a take and a growth into slack read first */
    uint8_t n;                   /* blocks held, oldest first */
    bool used;                   /* a put, take or growth since the last idle pass */
    uint16_t cpu;
    uint32_t takes;              /* paces the arenas' decay ticks */
    size_t bytes;                /* usable bytes held, slack included (read racily by stats) */
    span_t *slack;               /* the live block whose slack `bytes` counts, or NULL */
    size_t slack_bytes;          /* its pages past its usable bytes */
    span_t *blocks[LARGE_SLOTS_MAX];
    /* blocks held per large class (a grown block counts in the class its
     * usable size rounds up to) */
    uint8_t class_n[LARGE_CACHE_CLASSES];
    dpm_mutex_t lock;            /* uncounted: nothing reports it */
} CACHE_ALIGNED large_cache_t;

/* At init, after the options and g.tcache_nclasses are settled. */
void large_caches_init(void);
/* Keeps freed large block s in the calling CPU's cache, sending older
 * blocks home to stay within the bounds; false if s does not qualify
 * (not a whole class-sized or grown block of an automatic arena, bigger
 * than the budget) or the class is at its limit with nothing to send
 * home. limits: the calling thread's own per-class limits (index class -
 * NSMALL), or NULL for tcache_nslots_large each. */
bool large_cache_put(span_t *s, const uint8_t *limits);
/* A cached block of size's class c (sc_of_size(size), page aligned), or
 * NULL; a is the calling thread's arena (NULL or manual: none), whose
 * decay it ticks now and then. */
void *large_cache_take(arena_t *a, size_t size, unsigned c);
/* A cached block that realloc grew, cut down to what a fresh block of
 * size bytes gets (sizes below the large classes too), or NULL: the
 * start of a new chain of growth. */
void *large_cache_take_grown(arena_t *a, size_t size);
/* Realloc of live large block s to size bytes, where s may have slack:
 * true if the slack served it (s->usable is now what a fresh block of
 * size gets); otherwise the slack, if any, is given back to s (s->usable
 * covers all its pages again) and the caller resizes as usual. */
bool large_cache_slack_resize(span_t *s, size_t size);
/* large_cache_slack_resize for a growth (size > s->usable) of a block
 * with slack: true if the slack served it; false (the slack left as it
 * was) if it is too small, or a reclaimer cut it meanwhile. */
bool large_cache_slack_grow(span_t *s, size_t size);
/* large_cache_slack_detach's locked part. */
void large_cache_slack_end(span_t *s);
/* Gives live large block s all its pages as usable bytes, ending its
 * slack, if it has some: before it is freed or resized in the page heap.
 * Inline: most blocks have none, and every free of a large block asks. */
DPM_INLINE void large_cache_slack_detach(span_t *s)
{
    if (__atomic_load_n(&s->slack_in, __ATOMIC_ACQUIRE) != NULL)
        large_cache_slack_end(s);
}
/* Makes the caches of every CPU the calling thread may run on resident
 * now (dpm_reserve: allocations afterwards take no fault in them). */
void large_caches_prefault(void);
/* Sends the blocks and slack of every CPU's large cache home (those of
 * arena `only`, or all if NULL); idle_only: only of caches unused since
 * the previous idle pass (the background thread). Any thread; returns the
 * usable bytes sent home. */
size_t large_caches_flush(bool idle_only, const arena_t *only);
/* Bytes held by all large caches, slack included (racy sum). */
size_t large_caches_bytes(void);
/* Calls fn(span, bytes) on every cached block (its usable bytes) and
 * every block with slack (the slack's bytes), each cache under its lock
 * (stats: per-arena attribution). fn must not allocate. */
void large_caches_for_each(void (*fn)(const span_t *s, size_t bytes, void *arg), void *arg);
/* How many blocks of size's class a cache holds by default
 * (tcache_nslots_large); 0 if the class is not one the caches hold. */
unsigned large_cache_default_slots(size_t size);
/* The per-class index (class - NSMALL) of size, a size the caches hold. */
unsigned large_cache_class_index(size_t size);
/* Whether a large class with a size in [lo, hi] is one the caches hold. */
bool large_cache_range_cached(size_t lo, size_t hi);
/* NULL if every large cache is whole (bytes within the budget and equal
 * to its blocks' and slack's, counts per class consistent, every block a
 * parked, whole large block of an automatic arena), else what is wrong.
 * Takes each cache's lock (unit tests). */
const char *large_caches_check(void);
void large_caches_prefork(void);
void large_caches_postfork_parent(void);
void large_caches_postfork_child(void);

#endif
