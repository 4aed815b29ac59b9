/*
 * sizeclass.c - builds the class tables (see sizeclass.h). Slab shapes are
 * chosen so that at most 1/16 of a slab is tail waste and a slab holds at
 * least four objects where 64 pages allow it.
 */
#include "sizeclass.h"

sc_info_t sc_table[NCLASSES];
uint8_t sc_lookup[SC_LOOKUP_MAX / QUANTUM + 1];

size_t sc_formula_size(unsigned c)
{
    if (c < SC_NLINEAR)
        return (size_t)(c + 1) * QUANTUM;
    unsigned g = (c - SC_NLINEAR) / SC_GROUP;
    unsigned k = (c - SC_NLINEAR) % SC_GROUP + 1;
    unsigned lg = 7 + g;
    return ((size_t)1 << lg) + (size_t)k * ((size_t)1 << (lg - 2));
}

/* Inverse of odd m modulo 2^64 by Newton's iteration (5 steps double the
 * correct low bits from 3 to beyond 64). */
static uint64_t inverse_mod_2_64(uint64_t m)
{
    uint64_t x = m;
    for (int i = 0; i < 5; i++)
        x *= 2 - m * x;
    return x;
}

/* The fewest pages that hold min_objs objects with at most 1/16 of the
 * slab wasted; 0 if no slab of at most max_pages does. */
static uint32_t slab_pages_for(size_t size, size_t min_objs, uint32_t max_pages)
{
    for (uint32_t p = 1; p <= max_pages; p++) {
        size_t bytes = (size_t)p * PAGE;
        size_t n = bytes / size;
        if (n > SLAB_MAX_OBJS)
            return p - 1;
        if (n >= min_objs && (bytes % size) * 16 <= bytes)
            return p;
    }
    return 0;
}

/* Slabs of at least 16 objects where that takes at most 128 KiB: a slab
 * that empties goes back to the page heap, and with 4-object slabs a
 * program freeing a thousand 1 KiB blocks would make 250 page-heap round
 * trips (and one allocating 8 KiB blocks would take a span descriptor, a
 * carve and a fault of fresh metadata every few blocks). Bigger objects
 * settle for 4 per slab. */
#define SLAB_GOOD_OBJS 16
#define SLAB_GOOD_MAX_PAGES 32

static void default_slab_shape(size_t size, uint32_t *pages, uint32_t *objs)
{
    uint32_t best_p = slab_pages_for(size, SLAB_GOOD_OBJS, SLAB_GOOD_MAX_PAGES);
    if (best_p == 0)
        best_p = slab_pages_for(size, 4, SLAB_MAX_PAGES);
    if (best_p == 0)
        best_p = SLAB_MAX_PAGES;
    *pages = best_p;
    size_t n = (size_t)best_p * PAGE / size;
    *objs = (uint32_t)(n > SLAB_MAX_OBJS ? SLAB_MAX_OBJS : n);
}

static void fill_lookup(void);

void sc_init(const uint32_t *slab_pages_override)
{
    for (unsigned c = 0; c < NCLASSES; c++) {
        sc_info_t *sc = &sc_table[c];
        sc->size = sc_formula_size(c);
        unsigned shift = ctz64(sc->size);
        sc->div_shift = (uint8_t)shift;
        sc->div_inv = inverse_mod_2_64(sc->size >> shift);
        sc->slab_pages = sc->slab_objs = 0;
        if (c < NSMALL) {
            default_slab_shape(sc->size, &sc->slab_pages, &sc->slab_objs);
            uint32_t want = slab_pages_override ? slab_pages_override[c] : 0;
            if (want != 0) {
                size_t n = (size_t)want * PAGE / sc->size;
                if (n >= 1 && n <= SLAB_MAX_OBJS && want <= SLAB_MAX_PAGES) {
                    sc->slab_pages = want;
                    sc->slab_objs = (uint32_t)n;
                }
            }
        }
    }
    fill_lookup();
}

/* The lookup table depends on the class formula only. It is filled
 * before main by a constructor, so that the malloc fast path of threads
 * racing the first initialisation reads settled values; the fill at init
 * covers allocations made before constructors run, and is skipped once
 * done (the last entry of sc_lookup, written last, says so). */
static void fill_lookup(void)
{
    if (__atomic_load_n(&sc_lookup[SC_LOOKUP_MAX / QUANTUM], __ATOMIC_ACQUIRE) != 0)
        return;
    unsigned c = 0;
    for (size_t i = 0; i <= SC_LOOKUP_MAX / QUANTUM; i++) {
        size_t size = i * QUANTUM;
        while (sc_formula_size(c) < size)
            c++;
        __atomic_store_n(&sc_lookup[i], (uint8_t)c, __ATOMIC_RELEASE);
    }
}

__attribute__((constructor)) static void fill_lookup_before_main(void) { fill_lookup(); }

unsigned sc_of_size_aligned(size_t size, size_t align)
{
    unsigned c = sc_compute(size < align ? align : size);
    while ((sc_table[c].size & (align - 1)) != 0)
        c++;
    return c;
}
