/*
 * radix.h - the page map: for every 4 KiB page of the 48-bit address
 * space, the span covering it (or NULL). Two levels: a root of 2^16 entries
 * (one per 4 GiB), and leaves of 2^20 entries made on demand. A lookup
 * is two dependent loads and no branch, and answers "is this pointer ours
 * at all?", which is how frees of foreign pointers are caught before
 * anything is touched.
 *
 * An entry is a span pointer shifted left by 8 bits, whose low 8 bits carry
 * a tag, the span's thread-cache bin (see span_entry): the free fast path
 * finds its bin from the entry alone, without waiting for a load of the
 * span. An empty entry is 0: no span, tag 0. (Span descriptors come from
 * mmap'd metadata below 2^47, so the shift loses nothing; a tag in the low
 * bits of an aligned pointer instead would need 256-byte-aligned
 * descriptors, and their hot fields would then crowd a quarter of the L1
 * sets.)
 *
 * Root entries are stored as offsets from an all-zero "empty leaf", so a
 * missing leaf (the state of .bss) reads as a leaf of NULL spans: no NULL
 * test on the way. Addresses above 2^48 alias lower ones; the span check
 * that follows every lookup (span_is_block_start) rejects them.
 *
 * Owns: the map's structure (entries are written by pages.c).
 * May call: os (for leaves).
 */
#ifndef DPM_RADIX_H
#define DPM_RADIX_H

#include "util.h"

#define LG_SEG_UNIT 22
#define SEG_UNIT ((size_t)1 << LG_SEG_UNIT)   /* segments are multiples of this */
#define RADIX_LG_VA 48
#define RADIX_LG_LEAF 20   /* 4 GiB per leaf: a heap rarely spans two (see thread_hot_t.leaf_key) */
#define RADIX_LG_ROOT (RADIX_LG_VA - LG_PAGE - RADIX_LG_LEAF)
#define RADIX_LEAF_LEN ((size_t)1 << RADIX_LG_LEAF)
#define RADIX_ROOT_LEN ((size_t)1 << RADIX_LG_ROOT)

#define RADIX_TAG_BITS 8
#define RADIX_TAG_MASK (((uintptr_t)1 << RADIX_TAG_BITS) - 1)

struct span;
/* One object, so that the fast path needs one address for both arrays. */
typedef struct radix_map {
    uintptr_t root[RADIX_ROOT_LEN];
    uintptr_t empty_leaf[RADIX_LEAF_LEN];
} radix_map_t;
extern radix_map_t radix;

/* The leaf holding addr's entry (the empty leaf if none was made). */
DPM_INLINE uintptr_t *radix_leaf(uintptr_t addr)
{
    return (uintptr_t *)((uintptr_t)radix.empty_leaf +
                         __atomic_load_n(&radix.root[(addr >> (LG_PAGE + RADIX_LG_LEAF)) & (RADIX_ROOT_LEN - 1)],
                                         __ATOMIC_ACQUIRE));
}

/* The page-map slot of addr's page. Writers only use it for ranges that
 * radix_cover made leaves for. */
DPM_INLINE uintptr_t *radix_slot(uintptr_t addr) { return &radix_leaf(addr)[(addr >> LG_PAGE) & (RADIX_LEAF_LEN - 1)]; }

/* Entries are read and written with relaxed atomics: a range one arena
 * unmapped may be mapped again by another, and the kernel's ordering of
 * the two is invisible to the C memory model. They compile to plain
 * moves. An entry is written in one store, so span and tag always agree. */
DPM_INLINE uintptr_t radix_entry(uintptr_t addr) { return __atomic_load_n(radix_slot(addr), __ATOMIC_RELAXED); }
DPM_INLINE void radix_set(uintptr_t addr, uintptr_t entry) { __atomic_store_n(radix_slot(addr), entry, __ATOMIC_RELAXED); }
DPM_INLINE struct span *radix_entry_span(uintptr_t entry) { return (struct span *)(entry >> RADIX_TAG_BITS); }
DPM_INLINE unsigned radix_entry_tag(uintptr_t entry) { return (unsigned)(entry & RADIX_TAG_MASK); }
/* The span covering the page of addr, or NULL. */
DPM_INLINE struct span *radix_span(uintptr_t addr) { return radix_entry_span(radix_entry(addr)); }

/* Makes leaves for [base, base+size). The caller serialises writers.
 * False if a leaf could not be allocated or the range is beyond 2^48. */
bool radix_cover(uintptr_t base, size_t size);
/* True if addr's page has a leaf (tests and checks). */
bool radix_covered(uintptr_t addr);

#endif
