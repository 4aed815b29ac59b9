/*
 * pages.h - the page-run allocator of one arena: carves spans out of the
 * arena's segments, takes them back with coalescing, and moves free runs
 * through the states dirty -> muzzy -> clean as decay asks.
 *
 * Free runs of each state sit in their own run index (runs.h); runs only
 * coalesce with neighbours of the same state (a freed dirty run also
 * absorbs retained ones), so a clean run is always known to read as zero.
 * Allocation takes any free run that fits before it maps a new segment,
 * preferring dirty runs (already faulted in), then retained, muzzy, clean.
 *
 * Purging runs in three steps so that madvise runs without the arena
 * lock: ph_purge_take (lock held) takes a bounded batch of runs out of the
 * indexes and marks them busy; ph_purge_run (no lock) makes the kernel
 * calls; ph_purge_finish (lock held) files them back as muzzy, clean or
 * retained and unmaps segments that became wholly free. Batches hold
 * disjoint runs; the heap must not be released while one is in flight
 * (the arena serialises its batches and reset with its purge_lock).
 *
 * The memory limit (memlimit.h): a clean run (never touched, or zeroed
 * by MADV_DONTNEED) is the only state that holds no resident page, so a
 * heap's charge is its mapped pages minus its clean ones. Taking pages out
 * of a clean run (ph_alloc, ph_grow) is the one step that may be refused:
 * it fails with ENOMEM and the thread's refusal flag raised; every other
 * change is reported after the fact.
 *
 * Every other call here is made with the arena lock held.
 * Owns: segments, span descriptors, run indexes, decay lists.
 * May call: os, memlimit, radix, base, runs (never conf or types: options come in
 * page_options_t, and a reset's typed blocks go to the caller's callback).
 */
#ifndef DPM_PAGES_H
#define DPM_PAGES_H

#include "base.h"
#include "runs.h"

/* A user's page source (dpm_page_source_t, include/dpmalloc.h): its
 * calls are user code and are made with no allocator lock held (see the
 * ph_source_* calls below). */
typedef struct page_source {
    void *(*alloc)(void *ctx, size_t size, size_t align, bool *zeroed);
    void (*free)(void *ctx, void *addr, size_t size);
    bool (*purge)(void *ctx, void *addr, size_t size);
    void *ctx;
} page_source_t;

/* How new segments are mapped (the "hugepages" and "thp" options, the
 * NUMA node, or a page source). */
typedef struct page_options {
    bool hugepages;   /* MAP_HUGETLB first, normal pages when none are left */
    uint8_t lg_hugepage;  /* 21 (2 MiB) or 30 (1 GiB, "hugepages:1g") */
    int8_t thp;       /* 0: no hint; 1: MADV_HUGEPAGE; -1: MADV_NOHUGEPAGE */
    int node;         /* >= 0: new segments are mbind'ed to this NUMA node */
    bool sourced;     /* segments come from source, never from the kernel */
    page_source_t source;
} page_options_t;

typedef struct page_heap {
    struct arena *arena;
    page_options_t options;
    run_index_t free_runs[RUN_NSTATES];
    list_t lru[2];                    /* of span_t by lru; dirty, muzzy: oldest first */
    pool_t spans;                     /* span descriptors */
    pool_t type_arrays;               /* type tags of typed slabs */
    list_t segments;                  /* of segment_t by link */
    size_t nsegments;
    size_t mapped_bytes;
    size_t reserved_bytes;            /* of mapped_bytes: dpm_reserve segments */
    /* Pages of this heap in the memory limit's charge (memlimit.h): every
     * mapped page but the clean ones (0 for a sourced heap, whose memory
     * is its source's). Kept equal to mapped - clean by charge_sync. */
    size_t charged_pages;
    list_t to_give_back;              /* sourced segments unlinked, for ph_source_give_back */
    size_t active_pages;              /* pages in slabs and large blocks */
    size_t busy_pages;                /* free pages out of the indexes being purged */
    uint64_t npurge_passes, npurged_lazy, npurged_now;  /* pages */
    uint64_t npurge_calls;            /* kernel purge calls made */
    uint64_t nretained;               /* runs decay gave up on (pages kept resident) */
    uint64_t nsegments_mapped, nsegments_unmapped;
    uint64_t nsearches;               /* ph_alloc calls */
    uint64_t nsearch_hits;            /* served by an existing free run */
    uint64_t ncandidates;             /* runs examined (the first always fits) */
} page_heap_t;

typedef struct page_request {
    size_t npages;
    size_t align;    /* bytes, a power of two, >= PAGE */
    size_t phase;    /* bytes, multiple of PAGE, < align: start % align == phase */
    bool zero;       /* wanted zeroed: clean runs first */
} page_request_t;

void ph_init(page_heap_t *ph, struct arena *arena, const page_options_t *options);
/* A new span of kind SPAN_LARGE covering req, tcache_class TC_NONE, with first and last page
 * mapped, or NULL (errno = ENOMEM). *zeroed tells if it reads as zero. */
span_t *ph_alloc(page_heap_t *ph, const page_request_t *req, bool *zeroed);
/* The same, but a sourced heap that needs a new segment sets *need_bytes
 * to its size and fails (errno = EAGAIN): see ph_source_alloc. For other
 * heaps *need_bytes is left 0. */
span_t *ph_alloc_or_ask(page_heap_t *ph, const page_request_t *req, bool *zeroed, size_t *need_bytes);
/* Takes back an active span (slab or large) as a dirty free run; returns
 * the run it ended in (after coalescing). */
span_t *ph_free(page_heap_t *ph, span_t *span, uint64_t now_ns);
/* As ph_free, for a block whose pages were discarded (MADV_DONTNEED) and
 * uncharged of them already taken out of the memory limit's charge by
 * the caller (secure mode's quarantine): filed clean, so that the limit
 * counts them again only when they are handed out (charge_clean). */
span_t *ph_free_clean(page_heap_t *ph, span_t *s, uint64_t now_ns, size_t uncharged);
/* Extends an active span in place to npages if the run after it is free. */
bool ph_grow(page_heap_t *ph, span_t *span, size_t npages);
/* Cuts an active span down to npages, freeing the tail; returns the run
 * the tail ended in, or NULL if nothing was cut. */
span_t *ph_shrink(page_heap_t *ph, span_t *span, size_t npages, uint64_t now_ns);
/* Map every page of span to it (slabs), or clear the pages between its
 * first and last (before a slab goes back). */
void ph_map_all_pages(span_t *span);
void ph_unmap_inner_pages(span_t *span);
/* Sets the tcache_class of a mapped active span and re-tags its page-map
 * entries (span.h), under the arena lock. The only way to change the class
 * of a span whose pages are mapped: the free fast path reads the tag. */
void ph_set_tcache_class(span_t *span, uint8_t tcache_class);
/* Most runs and pages one purge batch takes: the work (kernel calls and
 * pages they walk) of one decay pass of one heap. A longer run is split
 * and its rest waits for the next pass. */
#define PH_PURGE_MAX_RUNS 16   /* a batch lives on the stack of free's slow path (docs/design.md, "Stack") */
#define PH_PURGE_MAX_PAGES 16384   /* 64 MiB */

typedef struct purge_item {
    span_t *run;
    uintptr_t from;   /* what the kernel is asked to drop (hugetlb: whole huge pages) */
    size_t bytes;
    uint8_t lazy;     /* MADV_FREE (to muzzy) rather than MADV_DONTNEED (to clean) */
    uint8_t got;      /* enum purge_result */
} purge_item_t;

typedef struct purge_batch {
    unsigned n;
    const page_source_t *source;   /* the heap's source (sourced heaps), else NULL */
    purge_item_t item[PH_PURGE_MAX_RUNS];
} purge_batch_t;

/* Decay, step 1 (lock held): takes dirty runs older than dirty_ms (to
 * muzzy, or to clean if muzzy_ms is 0) and muzzy runs older than muzzy_ms
 * (to clean), oldest first, at most max_pages pages (and
 * PH_PURGE_MAX_RUNS runs) into b and marks them busy. Times in ms: 0 =
 * every run, < 0 = none. Runs of hugetlb segments with no whole huge page
 * become retained without a kernel call. Returns the pages taken. */
size_t ph_purge_take(page_heap_t *ph, uint64_t now_ns, int64_t dirty_ms, int64_t muzzy_ms, size_t max_pages,
                     purge_batch_t *b);
/* Step 1 for one run (lock held): takes the dirty free run r (to clean),
 * all of it in pieces of at most PH_PURGE_MAX_PAGES, if it has at least
 * min_bytes; returns the pages taken (0: not dirty, too small, or nothing
 * a hugetlb segment can drop). For runs a program is known to be done
 * with (huge frees, cut tails), purged before decay would. */
size_t ph_purge_take_run(page_heap_t *ph, span_t *r, size_t min_bytes, purge_batch_t *b);
/* Step 2 (no lock needed): the kernel calls; touches only b. */
void ph_purge_run(purge_batch_t *b);
/* Step 3 (lock held): files b's runs back (a refused purge makes a run
 * retained) and unmaps wholly free segments. Returns the pages the kernel
 * accepted to release. */
size_t ph_purge_finish(page_heap_t *ph, purge_batch_t *b, uint64_t now_ns);
/* In a forked child: the runs another thread had taken out to purge (its
 * batch is gone with it) go back to the heap as a refused purge's do
 * (retained); the batches in `live`, the forking thread's own, are left
 * to it. Lock held. */
void ph_postfork_reclaim_busy(page_heap_t *ph, const purge_batch_t *const *live, unsigned nlive);
/* All three steps in a loop under the caller's lock until no run is due
 * (tests, and callers that do not mind the lock). Returns pages released. */
size_t ph_decay(page_heap_t *ph, uint64_t now_ns, int64_t dirty_ms, int64_t muzzy_ms);
/* Free pages that decay may still purge (dirty + muzzy). */
DPM_INLINE size_t ph_decayable_pages(const page_heap_t *ph)
{
    return ph->free_runs[RUN_DIRTY].npages + ph->free_runs[RUN_MUZZY].npages;
}
/* Invariant walk over every segment: spans tile each segment, the page map
 * obeys the rule in span.h, indexes agree. False and a message if not. */
bool ph_check(page_heap_t *ph);
/* Returns every segment to the OS at once (arena reset); calls
 * forget(span) for each active span discarded. No purge batch may be in
 * flight. A sourced heap's segments go to to_give_back instead. (Reserved
 * segments only join heaps of arenas that are never reset.) */
void ph_release_all(page_heap_t *ph, void (*forget)(const span_t *));
/* ---- segments of page sources and reserves ----
 * A sourced heap never maps a segment itself: ph_alloc fails with
 * *need_bytes set to the segment size it wants; the caller drops its
 * locks, calls ph_source_alloc, takes the arena lock again and adds the
 * memory with ph_add_segment, then retries. Segments a sourced heap lets
 * go (decay, release_all) wait on to_give_back until the caller, with
 * its locks dropped, hands them to ph_source_give_back. */
/* Page-source calls under way on this thread (a callback's own allocator
 * calls see it nonzero). */
extern __thread uint32_t ph_source_calls_here;
/* No lock held: size bytes from src at SEG_UNIT alignment, or NULL
 * (errno = ENOMEM; also when the source returns a misaligned range, which
 * it gets back through free). */
void *ph_source_alloc(const page_source_t *src, size_t size, bool *zeroed);
/* Lock held: mem (size bytes, SEG_UNIT aligned) becomes a segment of ph
 * (sourced: from ph's source; reserved: a prefaulted dpm_reserve range,
 * never purged or unmapped, whose size the caller has already charged to
 * the memory limit with memlimit_try_charge). False if out of metadata:
 * the caller gives mem back (and uncharges a reserved range). */
bool ph_add_segment(page_heap_t *ph, void *mem, size_t size, bool zeroed, bool sourced, bool reserved);
/* Makes the pages of ph's slabs and large blocks resident (dpm_reserve),
 * where the kernel can populate (Linux 5.14). Caller holds the arena lock. */
void ph_populate_active(page_heap_t *ph);
/* Lock held: moves the segments waiting on to_give_back into *out. */
void ph_take_given_back(page_heap_t *ph, list_t *out);
/* No lock held: hands every segment of list to src->free (or drops them
 * if it has none). */
void ph_source_give_back(const page_source_t *src, list_t *list);
/* No lock held: a range ph_source_alloc returned that never became a
 * segment goes back to src->free (if it has one). */
void ph_source_free(const page_source_t *src, void *mem, size_t size);
/* Fork: the global lock for address-map writes. */
void pages_prefork(void);
void pages_postfork_parent(void);
void pages_postfork_child(void);

/* A hard memory limit was set: every mapped segment of ph (not hugetlb,
 * not a source's) is told MADV_NOHUGEPAGE. Arena lock held. */
void ph_no_thp(page_heap_t *ph);

#endif
