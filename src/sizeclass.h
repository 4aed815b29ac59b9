/*
 * sizeclass.h - the size-class geometry: 16-byte quantum up to 128 bytes,
 * then 4 classes per doubling (jemalloc's geometry), for every size up to
 * 2^46. Owns: size -> class, class -> size, slab shape per small class and
 * the divisibility constants that turn "is p an object start?" into a
 * multiply and a compare, and the large-class rounding limit. Touches
 * nothing else (the thread cache builds its own size -> bin table).
 */
#ifndef DPM_SIZECLASS_H
#define DPM_SIZECLASS_H

#include "util.h"

#define QUANTUM 16
#define LG_QUANTUM 4
#define SC_LINEAR_MAX 128      /* classes 16..128 step 16 */
#define SC_NLINEAR 8
#define SC_GROUP 4             /* classes per doubling above SC_LINEAR_MAX */
#define SC_LOOKUP_MAX 4096     /* sizes served by the lookup table */
#define SMALL_MAX 14336        /* largest class carved from slabs (16 KiB and up are page runs, which grow in place) */
#define NSMALL 35              /* classes 0..34 are small (slab) classes */
#define SC_LG_MAX 46
#define NCLASSES (SC_NLINEAR + (SC_LG_MAX - 7) * SC_GROUP)
#define SLAB_MAX_OBJS 512
#define SLAB_BITMAP_WORDS (SLAB_MAX_OBJS / 64)
#define SLAB_MAX_PAGES 64
/* Large blocks up to this size are rounded to their size class (so that
 * thread caches and in-place reuse find equal sizes); above it to pages. */
#define LARGE_ROUND_MAX ((size_t)4 << 20)

typedef struct sc_info {
    size_t size;
    uint32_t slab_pages;   /* small classes: pages per slab */
    uint32_t slab_objs;    /* small classes: objects per slab */
    uint64_t div_inv;      /* inverse of the odd part of size, mod 2^64 */
    uint8_t div_shift;     /* log2 of the power-of-two part of size */
} sc_info_t;

extern sc_info_t sc_table[NCLASSES];
extern uint8_t sc_lookup[SC_LOOKUP_MAX / QUANTUM + 1];

/* Fills the tables; slab_pages_override[c] != 0 replaces the default slab
 * size of small class c ("slab_sizes" option). */
void sc_init(const uint32_t *slab_pages_override);

/* Class of a size by arithmetic; any size up to 2^46. */
DPM_INLINE unsigned sc_compute(size_t size)
{
    if (size <= SC_LINEAR_MAX)
        return size == 0 ? 0 : (unsigned)((size + QUANTUM - 1) >> LG_QUANTUM) - 1;
    unsigned lg = lg_floor(size - 1);                   /* size in (2^lg, 2^(lg+1)] */
    size_t base = (size_t)1 << lg;
    unsigned lg_delta = lg - 2;
    unsigned k = (unsigned)((size - base + ((size_t)1 << lg_delta) - 1) >> lg_delta);
    return SC_NLINEAR + (lg - 7) * SC_GROUP + (k - 1);
}

DPM_INLINE unsigned sc_of_size(size_t size)
{
    if (likely(size <= SC_LOOKUP_MAX))
        return sc_lookup[(size + QUANTUM - 1) >> LG_QUANTUM];
    return sc_compute(size);
}

DPM_INLINE size_t sc_size(unsigned c) { return sc_table[c].size; }

/* The alignment of every object of small class c: the power-of-two factor
 * of its size. A slab (unshifted grid) starts at a multiple of it when
 * that is more than a page (sc_slab_align: 8192 is the only such class),
 * so an aligned request whose size and alignment are at most the small
 * classes' is a slab object, found in the thread cache, instead of a page
 * run that takes a span descriptor and page-map ends of its own. */
DPM_INLINE size_t sc_obj_align(unsigned c) { return (size_t)1 << sc_table[c].div_shift; }
DPM_INLINE size_t sc_slab_align(unsigned c) { return sc_obj_align(c) > PAGE ? sc_obj_align(c) : PAGE; }

/* The large classes up to 64 KiB have slabs too, in one special bin per
 * class and arena that only aligned requests reach (alignment above a
 * page, size at most the alignment, which is at most 64 KiB, so the
 * 16, 32 and 64 KiB classes; a bigger size takes a page run, whose
 * recorded size checks a sized free exactly: alloc.c,
 * aligned_slab_class; secure mode uses every class up to 64 KiB so,
 * secure_slab_class): 4-16 objects per 256 KiB slab,
 * aligned to the class's power-of-two factor, per span descriptor and
 * carve, where a page run takes one each. malloc(16384) stays a page run,
 * which realloc can grow in place (but for secure mode, whose page runs
 * cost a guard page and system calls: alloc.c, secure_slab_class). */
#define SC_ALIGNED_SLAB_PAGES SLAB_MAX_PAGES
#define SC_ALIGNED_SLAB_MAX ((size_t)65536)

/* Smallest class of at least size bytes whose size is a multiple of align
 * (a power of two): its objects, laid from a page boundary, are all
 * aligned (beyond PAGE, from a boundary of sc_slab_align). At most
 * SC_GROUP steps. */
unsigned sc_of_size_aligned(size_t size, size_t align);

/* Size of class c by formula (used to build the table and by tests). */
size_t sc_formula_size(unsigned c);

#endif
