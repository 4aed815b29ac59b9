/*
 * limit_reclaim.c - what the memory limit does before an allocation fails
 * at it (memlimit.h, docs/design.md "Memory limit"): the one room at the
 * entry points' level that knows every cache, so the rooms below, which
 * see a refused charge, call this through memlimit_reclaim without
 * knowing what it touches. Registered at init (limit_reclaim_init).
 *
 * Runs with no allocator lock held (the callers drop theirs first: an
 * arena fill with its bin lock released, a large allocation), so every
 * drain here may take the locks it needs. May call: quarantine, large
 * caches, CPU caches, typed caches, transfer caches, arenas. Never the
 * calling thread's own thread cache: a fill of it may be under way
 * further up this thread's stack.
 */
#include "limit_reclaim.h"
#include "arena.h"
#include "conf.h"
#include "cpu_cache.h"
#include "large_cache.h"
#include "memlimit.h"
#include "quarantine.h"
#include "transfer.h"
#include "typed_cache.h"

/* Order: the caches whose blocks hold whole pages first (large caches,
 * secure mode's quarantines), then the small-block caches from the top
 * (CPU caches through the transfer caches into the bins, typed stashes),
 * so that slabs they empty go back to their arenas; last every arena's
 * idle slabs and free pages, purged with MADV_DONTNEED (dirty and muzzy
 * alike), which is what lowers the charge. The soft form (the charge has
 * just passed the soft limit) drains the same caches and lets decay, now
 * immediate, purge what they gave back. */
static bool reclaim(bool soft)
{
    /* inside a page source's callback its arena is mid-call: no drain
     * may send blocks home there (as for tcache_reclaim_mine) */
    if (ph_source_calls_here != 0)
        return false;
    if (opt.secure && !soft)
        quarantine_drain("memory limit");
    large_caches_flush(false, NULL);
    cpu_caches_drain(false);
    transfer_drain(false);
    typed_caches_drain(false);
    unsigned n = __atomic_load_n(&narenas_total, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n; i++) {
        arena_t *a = __atomic_load_n(&arenas[i], __ATOMIC_ACQUIRE);
        /* a page source's memory is not counted; its purge is user code */
        if (a == NULL || __atomic_load_n(&a->destroyed, __ATOMIC_ACQUIRE) || a->ph.options.sourced ||
            !arena_holds_pages(a))
            continue;
        arena_release_idle_slabs(a);
        arena_decay_now(a, !soft);
    }
    return true;
}

void limit_reclaim_init(void) { memlimit_set_reclaim(reclaim); }
