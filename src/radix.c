/*
 * radix.c - writers of the address map (see radix.h). Leaves are mapped
 * from the OS on first use and never freed: at 128 KiB per 64 GiB of
 * address space, keeping them makes lookups race-free without reclamation.
 */
#include "radix.h"
#include "os.h"

radix_leaf_t *radix_root[(size_t)1 << RADIX_LG_ROOT];

static radix_leaf_t *leaf_for(uintptr_t addr)
{
    radix_leaf_t **slot = &radix_root[addr >> (LG_SEG_UNIT + RADIX_LG_LEAF)];
    radix_leaf_t *leaf = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (leaf == NULL) {
        leaf = os_map_aligned(round_up(sizeof(radix_leaf_t), PAGE), PAGE);
        if (leaf != NULL)
            __atomic_store_n(slot, leaf, __ATOMIC_RELEASE);
    }
    return leaf;
}

bool radix_set_range(uintptr_t base, size_t size, struct segment *seg)
{
    uintptr_t end = base + size;
    if (end < base || (end - 1) >> RADIX_LG_VA)
        return false;
    for (uintptr_t a = base; a < end; a += SEG_UNIT) {
        radix_leaf_t *leaf = seg ? leaf_for(a) : radix_root[a >> (LG_SEG_UNIT + RADIX_LG_LEAF)];
        if (leaf == NULL) {
            if (seg != NULL)
                return false;
            continue;
        }
        __atomic_store_n(&leaf->unit[(a >> LG_SEG_UNIT) & (((size_t)1 << RADIX_LG_LEAF) - 1)], seg,
                         __ATOMIC_RELEASE);
    }
    return true;
}
