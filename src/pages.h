/*
 * pages.h - the page-run allocator of one arena: carves spans out of the
 * arena's segments, takes them back with coalescing, and moves free runs
 * through the states dirty -> muzzy -> clean as decay asks.
 *
 * Free runs of each state sit in their own run index (runs.h); runs only
 * coalesce with neighbours of the same state, so a clean run is always
 * known to read as zero. Allocation prefers dirty runs (already faulted in,
 * cheapest to reuse), then muzzy, then clean, then a new segment.
 *
 * Every call here is made with the arena lock held.
 * Owns: segments, span descriptors, run indexes, decay lists.
 * May call: os, radix, base, runs.
 */
#ifndef DPM_PAGES_H
#define DPM_PAGES_H

#include "base.h"
#include "runs.h"

typedef struct span_list {
    span_t *head, *tail;
} span_list_t;

typedef struct page_heap {
    struct arena *arena;
    run_index_t free_runs[RUN_NSTATES];
    span_list_t lru[2];               /* dirty, muzzy: oldest first */
    pool_t spans;                     /* span descriptors */
    pool_t type_arrays;               /* type tags of typed slabs */
    segment_t *segments;
    size_t nsegments;
    size_t mapped_bytes;
    size_t active_pages;              /* pages in slabs and large blocks */
    uint64_t npurge_passes, npurged_lazy, npurged_now;  /* pages */
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

void ph_init(page_heap_t *ph, struct arena *arena);
/* A new span of kind SPAN_LARGE covering req, with first and last page
 * mapped, or NULL (errno = ENOMEM). *zeroed tells if it reads as zero. */
span_t *ph_alloc(page_heap_t *ph, const page_request_t *req, bool *zeroed);
/* Takes back an active span (slab or large) as a dirty free run. */
void ph_free(page_heap_t *ph, span_t *span, uint64_t now_ns);
/* Extends an active span in place to npages if the run after it is free. */
bool ph_grow(page_heap_t *ph, span_t *span, size_t npages);
/* Cuts an active span down to npages, freeing the tail. */
void ph_shrink(page_heap_t *ph, span_t *span, size_t npages, uint64_t now_ns);
/* Map every page of span to it (slabs), or clear the pages between its
 * first and last (before a slab goes back). */
void ph_map_all_pages(span_t *span);
void ph_unmap_inner_pages(span_t *span);
/* Sets the tcache_class of a mapped active span and re-tags its page-map
 * entries (span.h), under the arena lock. The only way to change the class
 * of a span whose pages are mapped: the free fast path reads the tag. */
void ph_set_tcache_class(span_t *span, uint8_t tcache_class);
/* Purges now the dirty free run whose first or last page is at addr, if
 * it has at least min_bytes; returns the pages purged. */
size_t ph_purge_run_at(page_heap_t *ph, uintptr_t addr, size_t min_bytes, uint64_t now_ns);
/* Purge free runs older than the decay times (ms; 0 = all, <0 = never).
 * Returns the number of pages purged. */
size_t ph_decay(page_heap_t *ph, uint64_t now_ns, int64_t dirty_ms, int64_t muzzy_ms);
/* The same, purging at most max_runs runs (allocation paths bound the
 * work they do for decay). */
size_t ph_decay_bounded(page_heap_t *ph, uint64_t now_ns, int64_t dirty_ms, int64_t muzzy_ms, size_t max_runs);
/* Invariant walk over every segment: spans tile each segment, the page map
 * obeys the rule in span.h, indexes agree. False and a message if not. */
bool ph_check(page_heap_t *ph);
/* Returns every segment to the OS at once (arena reset). */
void ph_release_all(page_heap_t *ph);
/* Fork: the global lock for address-map writes. */
void pages_prefork(void);
void pages_postfork_parent(void);
void pages_postfork_child(void);

#endif
