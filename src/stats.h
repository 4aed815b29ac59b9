/*
 * stats.h - statistics: a snapshot of every counter, taken on "epoch" and
 * when printing, and dpm_stats_print over it. Counters themselves live
 * where they are cheapest to keep (thread caches, bins under their locks,
 * page heaps under the arena lock) and are only merged here, so no
 * shared counter is written on a fast path.
 * Owns: the snapshot and the report layout. May call: every lower room.
 */
#ifndef DPM_STATS_H
#define DPM_STATS_H

#include "tcache.h"

/* Special (phased, typed) bins listed one per row; any more are only
 * counted in their arena's totals. */
#define STATS_SPECIAL_ROWS 128

typedef struct bin_snap {
    uint32_t size_class;
    size_t objsize;
    uint32_t phase;
    bool typed;
    uint32_t slab_pages, slab_objs;
    uint64_t nmalloc, nfree, nfills, nflushes, nslabs;
    size_t curslabs, curobjs;
    /* thread-cache side, merged over the threads of the arena */
    uint64_t nrequests, tc_misses, tc_fills, tc_flushes;
    mutex_stats_t lock;
} bin_snap_t;

typedef struct large_snap {
    uint64_t nmalloc, nfree;
    size_t live_bytes;
} large_snap_t;

typedef struct run_list_snap {
    size_t nruns, npages, longest_list;
} run_list_snap_t;

typedef struct arena_snap {
    bool exists;
    unsigned index;
    uint32_t incarnation;            /* the arena's life that was snapped */
    char name[ARENA_NAME_MAX];
    bool manual;
    uint32_t nthreads;
    int64_t dirty_decay_ms, muzzy_decay_ms;
    int node;                        /* node arena: its node, else -1 */
    size_t mapped, reserved, nsegments, active_pages, dirty_pages, muzzy_pages, clean_pages;
    size_t small_allocated, large_allocated, tcache_bytes;
    /* typed blocks in the per-CPU stashes (part of tcache_bytes): the
     * rte_malloc socket stats count them as free */
    size_t typed_cached_blocks, typed_cached_bytes;
    uint64_t npurge_passes, npurged_lazy, npurged_now;
    uint64_t nsearches, nsearch_hits, ncandidates;
    uint64_t nmalloc_small, nfree_small, nrequests_small, nmalloc_large, nfree_large;
    run_list_snap_t runs[RUN_NSTATES];
    mutex_stats_t arena_lock, bins_locks;
    slow_samples_t samples;
    unsigned nbins;                  /* plain bins, then special ones */
    unsigned nspecial_unlisted;      /* special bins beyond the rows below (in the totals) */
    bin_snap_t bins[NSMALL + STATS_SPECIAL_ROWS];
    large_snap_t large[NLARGE_STATS];
} arena_snap_t;

typedef struct stats_snap {
    uint64_t epoch;
    size_t allocated, active, resident, mapped, retained, metadata, tcache_bytes, reserved;
    size_t cpu_cache_bytes, transfer_bytes, large_cache_bytes;   /* parts of tcache_bytes */
    size_t guarded_total, guarded_live;   /* guard_sample's blocks: sampled so far, live now */
    unsigned narenas;
    arena_snap_t *arenas;           /* narenas entries */
} stats_snap_t;

/* Text rendered while the stats lock is held, handed to user code (a
 * callback, a FILE) only after it is released. */
typedef struct text_buf {
    char *text;
    size_t len, cap;     /* cap: bytes mapped; text[len] is always '\0' */
    bool failed;         /* a mapping failed: the text is cut short */
} text_buf_t;

void text_buf_printf(text_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void text_buf_release(text_buf_t *b);
/* Refreshes the snapshot and has render describe it into buf, both under
 * the stats lock (render must not call user code). False (buf empty or
 * cut short) if dpmalloc is not initialised or memory ran out. */
bool stats_render(void (*render)(const stats_snap_t *, text_buf_t *, void *), void *arg, text_buf_t *buf);

/* What mallinfo reports, from counters only: no snapshot, no epoch, no
 * walk of any list; bins' and arenas' locks are taken one at a time. */
typedef struct stats_brief {
    size_t mapped;          /* arenas' segments + metadata */
    size_t metadata;
    size_t allocated;       /* as stats.allocated */
    size_t tcache_bytes, tcache_blocks;   /* blocks: small ones only */
    size_t free_runs;       /* free page runs, every state */
    size_t free_resident;   /* bytes of free pages not yet purged (dirty, muzzy) */
    size_t large_blocks;    /* live large blocks (thread-cached ones included) */
    unsigned narenas;       /* existing arenas */
} stats_brief_t;
void stats_brief(stats_brief_t *out);

/* Takes a new snapshot; returns the new epoch. */
uint64_t stats_refresh(void);
/* The current snapshot (valid until the next refresh); refreshes once if
 * none was taken yet. Callers hold stats_lock(). */
const stats_snap_t *stats_current(void);
void stats_lock(void);
void stats_unlock(void);
void stats_prefork(void);
void stats_postfork_parent(void);
void stats_postfork_child(void);
/* Prints at exit when opt.stats_print is set. */
void stats_print_at_exit(void);

#endif
