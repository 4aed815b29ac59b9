/*
 * alloc.h - the allocation entry logic shared by the dpm_ API (alloc.c)
 * and the libc overrides (override.c): inline fast paths and the slow
 * paths behind them.
 *
 * malloc fast path: size -> bin offset by one table load (tcache.h), pop
 * the bin of the CPU's cache in a restartable sequence (cpu_cache.h).
 * free fast path: the page-map entry through the thread's cached leaf,
 * whose tag names the bin; the span's divisibility test (interior and
 * foreign pointers), slab bit and free key (double frees); push onto the
 * CPU's bin. A thread on its own cache (thread caches, tcache.h) fails the
 * sequence at once and takes its cache's paths in alloc_front_miss and
 * free_front_miss.
 * Everything else (misses, overflows, large blocks, misuse) is one call
 * away in alloc.c. Their instruction counts, measured with
 * tools/pair_cost.sh, are in docs/design.md ("Fast paths"): check them
 * there after any change here. May call: tcache, arena, bin.
 */
#ifndef DPM_ALLOC_H
#define DPM_ALLOC_H

#include "global.h"
#include "tcache.h"
#include "cpu_cache.h"
#include "error.h"
#include "quarantine.h"


/* ---- thread.allocated / thread.deallocated ------------------------------
 * Every block handed to a caller, and every block a caller gives back,
 * is counted once, in usable bytes, in the calling thread's tls_thread:
 * the fast paths add the size they have at hand (a CPU bin's usable
 * field, the class's size, the span's objsize: secure mode's blocks,
 * whose canary is not the caller's, never take the fast paths; its own
 * path, secure_front_alloc, counts the class less the canary), every
 * other path counts at one
 * point on its way out: alloc_slow, alloc_front_miss, alloc_at_low_water,
 * aligned_at_impl, calloc's and realloc's own blocks, the arena's blocks
 * (arena_block), the off-map blocks' free, free_slow_counted. Functions
 * below those points (free_slow, free_front_miss, the raw bodies) count
 * nothing. */
DPM_INLINE void thread_count_alloc(size_t usable) { tls_thread.allocated += usable; }
DPM_INLINE void thread_count_free(size_t usable) { tls_thread.deallocated += usable; }
/* The usable size of block p (NULL: none) looked up and counted. */
void *thread_count_alloc_block(void *p);

/* Counts what it hands out (all paths: thread.allocated). */
void *alloc_slow(size_t size) DPM_NOINLINE;
/* The pop reached the bin's low-water mark: note a new minimum and pop,
 * or, if the bin is empty, take the slow path. */
void *alloc_at_low_water(size_t size, tc_bin_t *b) DPM_NOINLINE;
/* s: p's span per the page map (NULL if none), which free_fast has read
 * already (a second look-up would be one more cold miss in a row). */
void free_slow(void *p, span_t *s, const char *call) DPM_NOINLINE;
/* free_slow, counting p's usable bytes first (thread.deallocated) when
 * it has a span (an off-map block is counted by its own free). */
void free_slow_counted(void *p, span_t *s, const char *call) DPM_NOINLINE;
/* p is outside the thread's cached page-map leaf: caches p's leaf (if the
 * thread has a cache and p's leaf exists) and frees p. */
void free_leaf_miss(void *p, const char *call) DPM_NOINLINE;
void *calloc_impl(size_t n, size_t size);
void *realloc_impl(void *p, size_t size, const char *call);
/* (p + offset) % align == 0; align a power of two (checked by callers). */
void *aligned_at_impl(size_t size, size_t align, size_t offset, bool zero);
size_t usable_size_impl(const void *p, const char *call);
/* The moving half of a realloc that does not keep p: q (the caller's new
 * block, or NULL for a failed allocation, which leaves p alone) gets the
 * first min(old, size) bytes of p, whose usable size is old, and p is
 * freed naming call. Returns q. */
void *realloc_move(void *p, size_t old, void *q, size_t size, const char *call);
/* Could a request of size bytes (any call, any alignment) have made the
 * block of span s? Secure mode's sized-free check; in-place reallocs of
 * secure mode keep a block only where it holds. */
bool request_could_make(const span_t *s, size_t size);
/* free with a size promise; secure mode checks it against the block. */
void free_sized_impl(void *p, size_t size, const char *call);
/* A block of arena a (NULL: the calling thread's), tagged type (0: none),
 * align a power of two; untyped blocks of the thread's own arena come
 * through its cache. For the rte_malloc layer (rte_compat.c): the block is
 * annotated (DPM_ANN_ALLOC) as an entry point's. */
void *heap_alloc_impl(arena_t *a, uint16_t type, size_t size, size_t align, bool zero);
/* For the jemalloc API (jemalloc_api.c): nallocx's usable size of an
 * aligned request through the caches (aligned_usable_impl) or past them
 * from an arena (arena_usable_impl), xallocx's in-place resize (returns the usable size
 * after it), rallocx's aligned realloc naming the call. */
size_t aligned_usable_impl(size_t size, size_t align);
size_t arena_usable_impl(size_t size, size_t align);
size_t resize_in_place_impl(void *p, size_t size, size_t extra, const char *call);
void *realloc_aligned_impl(void *p, size_t size, size_t align, const char *call);
/* The CPU cache's pop failed (an empty bin, a locked cache, or a thread
 * that uses its own cache): the rest of malloc. */
void *alloc_front_miss(size_t size) DPM_NOINLINE;
/* The CPU cache's push failed for p, whose page-map entry is e: its tag
 * is 0 (a large block, a foreign pointer), or the block passed the
 * checks of free_fast. The rest of free. */
void free_front_miss(void *p, uintptr_t e, const char *call) DPM_NOINLINE;
/* A sized free whose block free_fast_promised did not push: checks p
 * (as free does), then the promise (docs/design.md, "Misuse checks"),
 * then frees it. */
void free_sized_miss(void *p, size_t size, const char *call) DPM_NOINLINE;
/* Puts the calling thread on the CPU caches, or on its own cache: its
 * own while it is bound to an arena with thread.arena, tuned with
 * thread.tcache.ncached_max, has its cache disabled, or the process
 * runs without CPU caches. */
void thread_front_pick(void);
/* The calling thread asked for something only its own cache gives
 * (thread.arena, thread.tcache.ncached_max): it keeps that cache. */
void thread_front_keep_own(void);
/* Makes the calling (THREAD_NEW) thread's cache and picks its front end;
 * false if it gets no cache. Every entry path that makes a thread's cache
 * goes through here. */
bool thread_cache_make(void);

/* The thread cache's malloc: from alloc_front_miss, for a thread on its
 * own cache. */
/* The offset of a small size's bin from the first class's bin, class x
 * 32 in both front ends (tc_bin_t and cpu_bin_t); false for a large size. */
DPM_INLINE bool small_bin_offset(size_t size, size_t *off)
{
    if (likely(size <= TC_LOOKUP_MAX))
        *off = tc_bin_offset_of_size[size];
    else if (size <= SC_LOOKUP_MAX)
        *off = sc_lookup[(size + QUANTUM - 1) >> LG_QUANTUM] * sizeof(tc_bin_t);
    else if (size <= SMALL_MAX)
        *off = sc_compute(size) * sizeof(tc_bin_t);
    else
        return false;
    return true;
}
_Static_assert(sizeof(tc_bin_t) == sizeof(cpu_bin_t), "one offset table serves both front ends");
_Static_assert(sizeof(sc_info_t) == sizeof(tc_bin_t) && offsetof(sc_info_t, size) == 0,
               "a bin's offset is its class's in sc_table too (thread_alloc_fast's count)");

DPM_INLINE void *thread_alloc_fast(size_t size)
{
    size_t off;   /* of the class's bin in tcache_t.bins */
    if (!small_bin_offset(size, &off))
        return alloc_slow(size);   /* large: the large cache or the arena */
    tc_bin_t *b = (tc_bin_t *)((char *)__atomic_load_n(&tls_thread.tcache, __ATOMIC_RELAXED)->bins + off);
    void **h = b->head;
    if (likely((uint16_t)(uintptr_t)h != b->low_lo)) {
        void *p = b->hot;
        __atomic_store_n(&b->head, h + 1, __ATOMIC_RELAXED);   /* read by other threads (tcache.h) */
        tc_block_handed_out(p);
        b->hot = h[1];
        DPM_ANN_SLOT_BELOW(b->head);
#if DPM_STATS
        counter_bump_fast(&b->nrequests);
#endif
        /* the class's size at the same offset in sc_table (no canary:
         * secure mode caches nothing in thread caches) */
        thread_count_alloc(*(const size_t *)((const char *)sc_table + off));
        return p;
    }
    return alloc_at_low_water(size, b);
}

/* Whether p, a block of tcache_class k (not TC_NONE), sits in a thread
 * cache's bin of its class, or a CPU cache's or transfer cache's bin of
 * k (the free key's lookup; see tcache.h). */
bool block_is_cached(const void *p, unsigned k);
/* The check every free and realloc of a block of span s makes before it
 * touches it: a block that holds the free key and may sit in a cache (its
 * tcache_class is not TC_NONE) is looked up there first; found, the call
 * aborts with "<call>(): <what> <p>". So does a call on a block of a typed
 * slab whose type tag is 0: a free took it (typed_cache.h). */
void confirm_not_cached(void *p, unsigned k, const char *call, const char *what) DPM_NOINLINE;
/* Whether p, a block of typed slab s that its slab counts as taken, was
 * freed into a stash of typed blocks: its type tag is 0 (typed_cache.h). */
DPM_INLINE bool typed_block_stashed(const void *p, const span_t *s)
{
    return __atomic_load_n(&s->type_ids[span_index_of(s, (uintptr_t)p)], __ATOMIC_RELAXED) == 0;
}
/* Secure mode: whether slab block p of span s was freed: it waits in
 * the quarantine (its bytes 8..11 hold the quarantine's mark) or, having
 * left it, in a CPU or transfer cache (they hold the free key); a live
 * block that holds either value is looked up, never reported. */
bool secure_block_freed_lookup(const void *p, const span_t *s, uint32_t word);
DPM_INLINE bool secure_block_freed(const void *p, const span_t *s)
{
    DPM_ANN_KEY_PEEK((void *)p);
    uint32_t word = *tc_key_word((void *)p);
    DPM_ANN_KEY_UNPEEK((void *)p);
    return unlikely(word == QUARANTINE_MARK || word == TC_FREE_KEY) && secure_block_freed_lookup(p, s, word);
}
DPM_INLINE void check_not_cached(void *p, const span_t *s, const char *call, const char *what)
{
    if (s->tcache_class != TC_NONE) {
        if (unlikely(*tc_key_word(p) == TC_FREE_KEY))
            confirm_not_cached(p, s->tcache_class, call, what);
    } else if (s->kind == SPAN_SLAB && s->type_ids != NULL && unlikely(typed_block_stashed(p, s))) {
        dpm_misuse(call, p, what);
    } else if (unlikely(opt.secure) && s->kind == SPAN_SLAB && secure_block_freed(p, s)) {
        dpm_misuse(call, p, what);
    }
}

/* The block of a slot a CPU cache's pop returned, handed out: the free
 * key cleared, unless the block is fresh from a fill (CPU_FRESH), which
 * is not written. */
DPM_INLINE void *cpu_handout(void *slot)
{
    if (likely(((uintptr_t)slot & CPU_FRESH) == 0)) {
        tc_block_handed_out(slot);
        return slot;
    }
    void *p = cpu_slot_block(slot);
    DPM_ANN_OPEN_KEY(p);
    return p;
}

/* The fast paths of both front ends start with the CPU cache's sequence:
 * a thread on its own cache uses the table whose every entry is locked
 * (cpu_cache.h), so the sequence fails and the miss path takes the
 * thread cache's fast path. */
DPM_INLINE void *alloc_fast(size_t size)
{
    size_t off;   /* of the class's bin from bins[0] (tags[1]) */
    if (!small_bin_offset(size, &off))
        return alloc_slow(size);   /* large: the CPU's large cache or the arena */
    void *p;
    uint64_t usable;
    if (likely(cpu_cache_pop_usable(tls_thread.pop_table, off, &p, &usable))) {
        thread_count_alloc(usable);
        return cpu_handout(p);
    }
    return alloc_front_miss(size);
}

/* Rejected here, and re-examined in free_slow: foreign pointers (no span),
 * interior pointers (not a block start), blocks that sit free in their slab
 * (never handed out, or freed twice and flushed), and blocks that hold the
 * free key (freed into a cache and not handed out since: a double free,
 * confirmed by confirm_not_cached). Tag 0 (a foreign pointer, a block no
 * cache takes) reads no span here.
 *
 * The bin comes from the page-map entry's tag (radix.h), so the only
 * dependent load from p to the push's address is the entry (through the
 * cached leaf); the span's loads only feed the checks' branches. The key
 * is stored before the push commits (after it, another thread on this
 * CPU could already have the block) and put back if the push fails: the
 * miss path then pushes onto the thread's own cache (free_front_miss) or
 * the CPU's under its lock. */
DPM_INLINE void free_fast_promised(void *p, bool sized, size_t size, const char *call)
{
    uintptr_t a = (uintptr_t)p;
    if (unlikely(!thread_leaf_covers(a))) {
        if (sized)
            free_sized_miss(p, size, call);
        else
            free_leaf_miss(p, call);
        return;
    }
    uintptr_t e = thread_leaf_entry(a);
    uintptr_t tag = radix_entry_tag(e);
    if (likely(tag != 0)) {
        const span_t *s = radix_entry_span(e);
        uint64_t idx = span_block_index(s, a);
        uint32_t word;
        /* a sized free: the promise at most the block's bytes (objsize
         * shares the bitmap's cache line) */
        if (likely(idx <= s->last_index) && likely(!span_block_is_free(s, idx)) &&
            (!sized || likely(size <= s->objsize)) && likely((word = *tc_key_word(p)) != TC_FREE_KEY)) {
            /* counted here whichever cache takes it (free_front_miss counts nothing) */
            thread_count_free(s->objsize);
            *tc_key_word(p) = TC_FREE_KEY;
            /* before the push: after it, another thread may own the block */
            DPM_ANN_CLOSE_KEY(p);
            if (likely(cpu_cache_push(tls_thread.cpu_table, tag * sizeof(cpu_bin_t), p)))
                return;
            DPM_ANN_OPEN_KEY(p);
            *tc_key_word(p) = word;
            free_front_miss(p, e, call);
            return;
        }
        if (sized)
            free_sized_miss(p, size, call);   /* the block's checks first, then the size's */
        else
            free_slow_counted(p, radix_entry_span(e), call);   /* a check failed: its report */
        return;
    }
    /* tag 0 (a large block, an untagged slab's, a foreign pointer): the
     * rest of free is free_slow's in either front end */
    if (sized)
        free_sized_miss(p, size, call);   /* a large block: its size checked there */
    else
        free_slow_counted(p, radix_entry_span(e), call);
}

DPM_INLINE void free_fast(void *p, const char *call) { free_fast_promised(p, false, 0, call); }

#endif
