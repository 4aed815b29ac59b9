/*
 * radix.c - writers of the address map (see radix.h). Leaves are mapped
 * from the OS on first use and never freed: at 128 KiB per 64 GiB of
 * address space, keeping them makes lookups race-free without reclamation.
 */
#include "radix.h"
#include "os.h"

radix_map_t radix;

static uintptr_t *leaf_for(uintptr_t addr, bool create)
{
    uintptr_t *slot = &radix.root[addr >> (LG_SEG_UNIT + RADIX_LG_LEAF)];
    uintptr_t off = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (off != 0)
        return (uintptr_t *)((uintptr_t)radix.empty_leaf + off);
    if (!create)
        return NULL;
    uintptr_t *leaf = os_map_aligned(round_up(RADIX_LEAF_LEN * sizeof(uintptr_t), PAGE), PAGE);
    if (leaf != NULL)
        __atomic_store_n(slot, (uintptr_t)leaf - (uintptr_t)radix.empty_leaf, __ATOMIC_RELEASE);
    return leaf;
}

bool radix_set_range(uintptr_t base, size_t size, struct span **pagemap)
{
    uintptr_t end = base + size;
    if (end < base || (end - 1) >> RADIX_LG_VA)
        return false;
    for (uintptr_t a = base; a < end; a += SEG_UNIT) {
        uintptr_t *leaf = leaf_for(a, pagemap != NULL);
        if (leaf == NULL) {
            if (pagemap != NULL)
                return false;
            continue;
        }
        uintptr_t value = 0;
        if (pagemap != NULL)
            value = (uintptr_t)(pagemap + ((a - base) >> LG_PAGE)) - (uintptr_t)radix.empty_unit;
        __atomic_store_n(&leaf[(a >> LG_SEG_UNIT) & (RADIX_LEAF_LEN - 1)], value, __ATOMIC_RELEASE);
    }
    return true;
}
