/*
 * zero_blocks.c - secure mode's zero-size blocks (zero_blocks.h). The
 * region is ZERO_REGION bytes of address space with no access; slot i is
 * the address base + i * ZERO_SLOT, live while bit i of the bitmap is
 * set. Allocation walks a shared cursor and claims a clear bit with an
 * atomic OR, free clears it with an atomic AND: no lock, so fork and
 * threads need nothing more, and a slot is handed out again only after
 * its free.
 */
#include "zero_blocks.h"

#include "error.h"
#include "fault.h"
#include "os.h"

#define ZERO_SLOT 16
#define ZERO_REGION ((size_t)64 << 20)   /* 4 Mi slots; the bitmap is 512 KiB */
#define ZERO_NSLOTS (ZERO_REGION / ZERO_SLOT)

static uintptr_t region;    /* 0 until init */
static uint64_t *live;      /* bit i: slot i handed out and not freed */
static size_t cursor;       /* next slot to try (grows; taken mod ZERO_NSLOTS) */
static size_t nlive;        /* bits set */

bool zero_blocks_init(void)
{
    if (region != 0)
        return true;
    void *r = os_reserve(ZERO_REGION);
    if (r == NULL)
        return false;
    size_t bitmap = ZERO_NSLOTS / 8;
    void *b = os_reserve(bitmap);
    if (b == NULL || !os_commit(b, bitmap)) {   /* pages appear at first touch */
        os_unmap(r, ZERO_REGION);
        if (b != NULL)
            os_unmap(b, bitmap);
        return false;
    }
    live = b;
    __atomic_store_n(&region, (uintptr_t)r, __ATOMIC_RELEASE);
    return true;
}

void *zero_block_alloc(size_t align)
{
    uintptr_t base = __atomic_load_n(&region, __ATOMIC_ACQUIRE);
    if (base == 0 || align > os_page_size() || __atomic_load_n(&nlive, __ATOMIC_RELAXED) >= ZERO_NSLOTS)
        return NULL;   /* full: no scan of the bitmap per call */
    size_t step = align > ZERO_SLOT ? align / ZERO_SLOT : 1;
    /* at most one look at every candidate slot: a full region gives NULL */
    for (size_t tries = ZERO_NSLOTS / step; tries > 0; tries--) {
        size_t i = __atomic_fetch_add(&cursor, step, __ATOMIC_RELAXED);
        i = (i + step - 1) / step * step % ZERO_NSLOTS;
        uint64_t bit = (uint64_t)1 << (i % 64);
        if ((__atomic_fetch_or(&live[i / 64], bit, __ATOMIC_ACQ_REL) & bit) == 0) {
            __atomic_fetch_add(&nlive, 1, __ATOMIC_RELAXED);
            return (void *)(base + i * ZERO_SLOT);
        }
    }
    return NULL;
}

bool zero_blocks_available(void)
{
    return __atomic_load_n(&region, __ATOMIC_ACQUIRE) != 0 && zero_blocks_live() < ZERO_NSLOTS;
}

bool zero_block_in_region(const void *p)
{
    uintptr_t base = __atomic_load_n(&region, __ATOMIC_ACQUIRE);
    return base != 0 && (uintptr_t)p - base < ZERO_REGION;
}

/* Slot of p, aborting naming call if p lies between slots. */
static size_t slot_of(const void *p, const char *call)
{
    uintptr_t off = (uintptr_t)p - region;
    if (off % ZERO_SLOT != 0)
        dpm_misuse(call, p, "invalid pointer");
    return off / ZERO_SLOT;
}

void zero_block_free(void *p, const char *call)
{
    size_t i = slot_of(p, call);
    uint64_t bit = (uint64_t)1 << (i % 64);
    if ((__atomic_fetch_and(&live[i / 64], ~bit, __ATOMIC_ACQ_REL) & bit) == 0)
        dpm_misuse(call, p, "double free of");
    __atomic_fetch_sub(&nlive, 1, __ATOMIC_RELAXED);
}

static bool slot_live(size_t i) { return (__atomic_load_n(&live[i / 64], __ATOMIC_ACQUIRE) >> (i % 64) & 1) != 0; }

void zero_block_check_live(const void *p, const char *call)
{
    if (!slot_live(slot_of(p, call)))
        dpm_misuse(call, p, "use after free of");
}

size_t zero_blocks_live(void) { return __atomic_load_n(&nlive, __ATOMIC_RELAXED); }

bool zero_block_explain(uintptr_t addr)
{
    if (!zero_block_in_region((const void *)addr))
        return false;
    size_t i = (addr - region) / ZERO_SLOT;
    fault_report(slot_live(i) ? "read or write through a block of size 0" : "use after free", addr, "secure mode", 0,
                 region + i * ZERO_SLOT);
    return true;
}
