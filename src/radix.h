/*
 * radix.h - the address map: for every 4 MiB unit of the address space,
 * the page map of the dpmalloc segment there (or nothing). A lookup is
 * three dependent loads and no branch, and answers "is this pointer ours
 * at all?", which is how frees of foreign pointers are caught before
 * anything is touched.
 *
 * Entries are stored as offsets from an all-zero "empty" leaf and unit
 * page map, so a zero entry (the state of fresh memory and of .bss) leads
 * to the empty page map and thus to a NULL span: no NULL tests on the way.
 * Addresses above 2^48 alias lower ones; the span check that follows every
 * lookup (span_is_block_start) rejects them.
 *
 * Owns: the map. May call: os (for leaves).
 */
#ifndef DPM_RADIX_H
#define DPM_RADIX_H

#include "util.h"

#define LG_SEG_UNIT 22
#define SEG_UNIT ((size_t)1 << LG_SEG_UNIT)
#define UNIT_PAGES (SEG_UNIT >> LG_PAGE)
#define RADIX_LG_VA 48
#define RADIX_LG_LEAF 14
#define RADIX_LG_ROOT (RADIX_LG_VA - LG_SEG_UNIT - RADIX_LG_LEAF)
#define RADIX_LEAF_LEN ((size_t)1 << RADIX_LG_LEAF)
#define RADIX_ROOT_LEN ((size_t)1 << RADIX_LG_ROOT)

struct span;
/* One object, so that the fast path needs one address computation for
 * all three arrays. */
typedef struct radix_map {
    uintptr_t root[RADIX_ROOT_LEN];
    uintptr_t empty_leaf[RADIX_LEAF_LEN];
    struct span *empty_unit[UNIT_PAGES];
} radix_map_t;
extern radix_map_t radix;

/* The page-map slice (UNIT_PAGES entries) covering addr's unit. */
DPM_INLINE struct span **radix_unit_pagemap(uintptr_t addr)
{
    uintptr_t leaf = (uintptr_t)radix.empty_leaf +
                     __atomic_load_n(&radix.root[(addr >> (LG_SEG_UNIT + RADIX_LG_LEAF)) & (RADIX_ROOT_LEN - 1)],
                                     __ATOMIC_ACQUIRE);
    uintptr_t unit = (uintptr_t)radix.empty_unit +
                     __atomic_load_n(&((uintptr_t *)leaf)[(addr >> LG_SEG_UNIT) & (RADIX_LEAF_LEN - 1)],
                                     __ATOMIC_RELAXED);
    return (struct span **)unit;
}

/* The span covering the page of addr, or NULL. */
DPM_INLINE struct span *radix_span(uintptr_t addr)
{
    return radix_unit_pagemap(addr)[(addr >> LG_PAGE) & (UNIT_PAGES - 1)];
}

/* Point every unit of [base, base+size) at consecutive UNIT_PAGES slices
 * of pagemap (NULL: forget the range). The caller serialises writers.
 * False if a leaf could not be allocated or the range is beyond 2^48. */
bool radix_set_range(uintptr_t base, size_t size, struct span **pagemap);

#endif
