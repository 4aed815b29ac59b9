/*
 * memlimit.h - the memory limit's accounting: the bytes dpmalloc holds
 * from the kernel that may be resident ("the charge"), the hard limit
 * (memory_limit_mb, ctl memory.limit) that a charge may not pass, and the
 * soft limit (memory_soft_limit_mb, memory.soft_limit) above which decay
 * is immediate and caches are kept empty. docs/design.md, "Memory limit",
 * says what is counted and what is not.
 *
 * A room beside os: every room that maps, commits, purges or unmaps
 * memory reports it here. It knows nothing of arenas or caches: the
 * reclaim that runs before an allocation fails at the limit is a function
 * the entry points register (memlimit_set_reclaim), called by the rooms
 * that see a refusal only once they hold no allocator lock.
 * May call: os (the clock). Touches only its own atomics and the calling
 * thread's refusal flag.
 */
#ifndef DPM_MEMLIMIT_H
#define DPM_MEMLIMIT_H

#include "util.h"

/* Adds bytes to the charge unless that takes it past the hard limit (0:
 * none). Exact under concurrency: a compare-and-swap on the one counter,
 * so concurrent charges together never pass the limit. false (and the
 * calling thread's refusal flag raised, limit_refusals counted) if
 * refused. Slow paths only (it runs where a page run leaves the clean
 * state or a mapping is made). */
bool memlimit_try_charge(size_t bytes);
/* Adds bytes without a check: memory the allocator cannot do without
 * (metadata, page-map leaves) or that a free made countable again. */
void memlimit_force_charge(size_t bytes);
void memlimit_uncharge(size_t bytes);
size_t memlimit_charged(void);

/* Whether any limit (hard or soft) is set: the page heaps then keep
 * freshly freed runs apart from clean neighbours (pages.c), so that a
 * free never counts pages the kernel holds no copy of. */
bool memlimit_any(void);
size_t memlimit_get(void);
size_t memlimit_soft_get(void);
void memlimit_set(size_t bytes);
void memlimit_soft_set(size_t bytes);

/* Whether the charge is above the soft limit (with hysteresis: from
 * above soft to at most 7/8 of it). One relaxed load: decay and cache
 * slow paths read it. */
extern bool memlimit_above_soft_flag;
DPM_INLINE bool memlimit_above_soft(void) { return __atomic_load_n(&memlimit_above_soft_flag, __ATOMIC_RELAXED); }

/* The calling thread saw a charge refused since it last cleared the flag
 * (memlimit_refused_take clears it and says whether it was set). */
extern __thread bool memlimit_refused_here;
DPM_INLINE bool memlimit_refused_take(void)
{
    bool r = memlimit_refused_here;
    memlimit_refused_here = false;
    return r;
}
DPM_INLINE bool memlimit_refused_peek(void) { return memlimit_refused_here; }
DPM_INLINE void memlimit_refused_clear(void) { memlimit_refused_here = false; }
/* Counts a reclaim pass a refusal started elsewhere (the arenas' purge
 * before their own retry, arena.c). */
void memlimit_count_reclaim(void);

/* The reclaim of a refused allocation (drain every cache, purge every
 * arena's free pages), registered once by the entry points at init; it
 * returns false where it may not run (inside a page source's callback).
 * Must be called with no allocator lock held. */
void memlimit_set_reclaim(bool (*fn)(bool soft));
/* Runs the registered reclaim (full: limit_reclaims counted) unless one
 * already runs on this thread; false if none ran. */
bool memlimit_reclaim(void);
/* Counts an allocation that failed at the hard limit after the reclaim,
 * and sets memlimit_failed_here (a caller that would fall back to another
 * kind of block clears it first and gives up when it is set: one failure
 * per call). */
void memlimit_count_failure(void);
extern __thread bool memlimit_failed_here;
/* The soft limit was passed upwards since the last drain: runs the
 * registered reclaim in its soft form (caches drained) once per passing.
 * No allocator lock held; one relaxed load when nothing is due. */
extern bool memlimit_soft_drain_due;
void memlimit_soft_drain_now(void);
DPM_INLINE void memlimit_soft_drain_if_due(void)
{
    if (unlikely(__atomic_load_n(&memlimit_soft_drain_due, __ATOMIC_RELAXED)))
        memlimit_soft_drain_now();
}

typedef struct memlimit_stats {
    size_t charged, peak, limit, soft_limit;
    uint64_t refusals;        /* charges refused at the hard limit */
    uint64_t reclaims;        /* reclaims run because of a refusal */
    uint64_t failures;        /* allocations that failed after a reclaim */
    uint64_t soft_passes;     /* times the charge went above the soft limit */
    uint64_t soft_above_ns;   /* time spent above it (ongoing spell included) */
    bool above_soft;
} memlimit_stats_t;
void memlimit_stats_read(memlimit_stats_t *out);
/* The peak starts over from the charge now (memory.peak_reset). */
void memlimit_peak_reset(void);

#endif
