/*
 * alloc.h - the allocation entry logic shared by the dpm_ API (alloc.c)
 * and the libc overrides (override.c): inline fast paths and the slow
 * paths behind them.
 *
 * malloc fast path (~16 instructions): size -> class by table, pop the
 * thread-cache stack. free fast path (~33): three radix loads, a
 * divisibility test that rejects interior and foreign pointers, push.
 * Everything else (misses, overflows, large blocks, misuse) is one call
 * away in alloc.c. May call: tcache, arena, bin.
 */
#ifndef DPM_ALLOC_H
#define DPM_ALLOC_H

#include "global.h"
#include "tcache.h"

#define TC_FAST_MAX ((size_t)8 << 20)

void *alloc_slow(size_t size) DPM_NOINLINE;
/* The pop reached the bin's low-water mark: note a new minimum and pop,
 * or, if the bin is empty, take the slow path. */
void *alloc_at_low_water(tc_bin_t *b, size_t size) DPM_NOINLINE;
void free_slow(void *p, const char *call) DPM_NOINLINE;
void *calloc_impl(size_t n, size_t size);
void *realloc_impl(void *p, size_t size, const char *call);
/* (p + offset) % align == 0; align a power of two (checked by callers). */
void *aligned_at_impl(size_t size, size_t align, size_t offset, bool zero);
size_t usable_size_impl(const void *p, const char *call);
/* free with a size promise; secure mode checks it against the block. */
void free_sized_impl(void *p, size_t size, const char *call);

DPM_INLINE void *alloc_fast(size_t size)
{
    unsigned c;
    if (likely(size <= SC_LOOKUP_MAX))
        c = sc_lookup[(size + QUANTUM - 1) >> LG_QUANTUM];
    else if (size <= TC_FAST_MAX)
        c = sc_compute(size);
    else
        return alloc_slow(size);
    tc_bin_t *b = &tls_tcache->bins[c];
    void **h = b->head;
    if (likely((uint16_t)(uintptr_t)h != b->low_lo)) {
        b->head = h + 1;
#if DPM_STATS
        b->nrequests++;
#endif
        return *h;
    }
    return alloc_at_low_water(b, size);
}

/* Rejected here, and re-examined in free_slow: foreign pointers (no span),
 * interior pointers (not a block start), blocks that sit free in their slab
 * (never handed out, or freed twice and flushed), and the block just freed
 * into this cache (the common double free). */
DPM_INLINE void free_fast(void *p, const char *call)
{
    span_t *s = span_of(p);
    if (likely(s != NULL)) {
        uint64_t idx = span_block_index(s, (uintptr_t)p);
        if (likely(idx <= s->last_index) && likely(!span_block_is_free(s, idx))) {
            tc_bin_t *b = &tls_tcache->bins[s->tcache_class];
            if (likely(!tc_bin_full(b)) && likely(*b->head != p)) {
                tc_bin_push(b, p);
                return;
            }
        }
    }
    free_slow(p, call);
}

#endif
