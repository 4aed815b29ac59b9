/*
 * radix.c - leaves of the page map (see radix.h). Leaves (8 MiB of address
 * space for 4 GiB covered; only the pages holding entries in use become
 * resident) are mapped from the OS on first use and never freed, which
 * makes lookups race-free without any reclamation scheme.
 */
#include "radix.h"
#include "os.h"

radix_map_t radix;

static uintptr_t *root_entry(uintptr_t addr) { return &radix.root[addr >> (LG_PAGE + RADIX_LG_LEAF)]; }

bool radix_covered(uintptr_t addr)
{
    return !(addr >> RADIX_LG_VA) && __atomic_load_n(root_entry(addr), __ATOMIC_ACQUIRE) != 0;
}

bool radix_cover(uintptr_t base, size_t size)
{
    uintptr_t end = base + size;
    if (size == 0 || end < base || (end - 1) >> RADIX_LG_VA)
        return false;
    size_t span = (size_t)1 << (LG_PAGE + RADIX_LG_LEAF);
    for (uintptr_t a = base & ~(uintptr_t)(span - 1); a < end; a += span) {
        if (radix_covered(a))
            continue;
        void *leaf = os_map_aligned(round_up(RADIX_LEAF_LEN * sizeof(uintptr_t), PAGE), PAGE);
        if (leaf == NULL)
            return false;
        __atomic_store_n(root_entry(a), (uintptr_t)leaf - (uintptr_t)radix.empty_leaf, __ATOMIC_RELEASE);
    }
    return true;
}
