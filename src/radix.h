/*
 * radix.h - the address map: which 4 MiB unit of the address space belongs
 * to which dpmalloc segment. Two levels over 48-bit addresses; a lookup is
 * two dependent loads and answers "is this pointer ours at all?", which is
 * how frees of foreign pointers are caught before anything is touched.
 * Owns: the map. May call: os (for leaves).
 */
#ifndef DPM_RADIX_H
#define DPM_RADIX_H

#include "util.h"

#define LG_SEG_UNIT 22
#define SEG_UNIT ((size_t)1 << LG_SEG_UNIT)
#define RADIX_LG_VA 48
#define RADIX_LG_LEAF 14
#define RADIX_LG_ROOT (RADIX_LG_VA - LG_SEG_UNIT - RADIX_LG_LEAF)

struct segment;
typedef struct radix_leaf {
    struct segment *unit[(size_t)1 << RADIX_LG_LEAF];
} radix_leaf_t;

extern radix_leaf_t *radix_root[(size_t)1 << RADIX_LG_ROOT];

DPM_INLINE struct segment *radix_lookup(uintptr_t addr)
{
    if (unlikely(addr >> RADIX_LG_VA))
        return NULL;
    radix_leaf_t *leaf = __atomic_load_n(&radix_root[addr >> (LG_SEG_UNIT + RADIX_LG_LEAF)], __ATOMIC_ACQUIRE);
    if (unlikely(leaf == NULL))
        return NULL;
    return __atomic_load_n(&leaf->unit[(addr >> LG_SEG_UNIT) & (((size_t)1 << RADIX_LG_LEAF) - 1)],
                           __ATOMIC_RELAXED);
}

/* Map every unit of [base, base+size) to seg (NULL to unmap). The caller
 * serialises writers. Returns false if a leaf could not be allocated or the
 * range lies outside the 48-bit space. */
bool radix_set_range(uintptr_t base, size_t size, struct segment *seg);

#endif
