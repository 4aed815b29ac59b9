/*
 * test_sizeclass.c - the size-class mapping, exhaustively for every size
 * up to the largest small class and sampled above: each size maps to the
 * smallest class that holds it, the table agrees with the arithmetic, the
 * aligned lookup returns multiples of the alignment, classes are 4 per
 * doubling, and the divisibility constants recognise exactly the object
 * starts of a slab.
 */
#include "span.h"
#include "unit.h"

static void check_size(size_t size)
{
    unsigned c = sc_compute(size);
    size_t want = size == 0 ? 1 : size;
    EXPECT_TRUE(c < NCLASSES, "size %zu -> class %u out of range", size, c);
    if (c >= NCLASSES)
        return;
    EXPECT_TRUE(sc_size(c) >= want, "size %zu -> class %u of %zu bytes", size, c, sc_size(c));
    EXPECT_TRUE(c == 0 || sc_size(c - 1) < want, "size %zu -> class %u but class %u (%zu) fits", size, c, c - 1,
                sc_size(c - 1));
}

static void test_exhaustive_small(void)
{
    for (size_t size = 0; size <= SMALL_MAX; size++) {
        check_size(size);
        if (size <= SC_LOOKUP_MAX)
            EXPECT_TRUE(sc_of_size(size) == sc_compute(size), "table and formula disagree at %zu", size);
    }
    EXPECT_EQ_U(sc_size(NSMALL - 1), SMALL_MAX);
    EXPECT_EQ_U(sc_compute(SMALL_MAX + 1), NSMALL);
}

static void test_sampled_large(void)
{
    uint64_t rng = 42;
    for (unsigned lg = 14; lg < 46; lg++) {
        size_t base = (size_t)1 << lg;
        check_size(base - 1);
        check_size(base);
        check_size(base + 1);
        for (int i = 0; i < 200; i++)
            check_size(base + unit_rand(&rng) % base);
    }
    check_size((size_t)1 << 46);
}

static void test_geometry(void)
{
    for (unsigned c = 0; c < NCLASSES; c++) {
        EXPECT_TRUE(sc_size(c) % 16 == 0, "class %u size %zu not a multiple of 16", c, sc_size(c));
        if (c > 0)
            EXPECT_TRUE(sc_size(c) > sc_size(c - 1), "class %u not increasing", c);
    }
    /* four classes per doubling above 128 bytes */
    for (unsigned lg = 8; lg < 40; lg++)
        EXPECT_EQ_U(sc_compute((size_t)1 << lg) - sc_compute((size_t)1 << (lg - 1)), 4);
}

static void test_aligned(void)
{
    for (size_t align = 16; align <= PAGE; align <<= 1) {
        for (size_t size = 1; size <= SMALL_MAX; size += 7) {
            unsigned c = sc_of_size_aligned(size, align);
            EXPECT_TRUE(sc_size(c) % align == 0 && sc_size(c) >= size, "size %zu align %zu -> %zu", size, align,
                        sc_size(c));
            /* waste is at most one alignment unit beyond the plain class */
            size_t plain = sc_size(sc_compute(size > align ? size : align));
            EXPECT_TRUE(sc_size(c) <= round_up(plain, align) + align, "size %zu align %zu wastes (%zu)", size,
                        align, sc_size(c));
        }
    }
}

static void test_slab_shapes(void)
{
    for (unsigned c = 0; c < NSMALL; c++) {
        const sc_info_t *sc = &sc_table[c];
        EXPECT_TRUE(sc->slab_objs >= 1 && sc->slab_objs <= SLAB_MAX_OBJS, "class %u objs %u", c, sc->slab_objs);
        EXPECT_TRUE(sc->slab_objs * sc->size <= sc->slab_pages * PAGE, "class %u overflows its slab", c);
        size_t waste = sc->slab_pages * PAGE - sc->slab_objs * sc->size;
        EXPECT_TRUE(waste * 8 <= sc->slab_pages * PAGE, "class %u wastes %zu of %u pages", c, waste,
                    sc->slab_pages);
    }
}

/* A fake span over a slab of class c: is_block_start must say yes exactly
 * at multiples of the size below objs * size. */
static void check_divisibility(unsigned c, uint32_t objs, size_t step)
{
    size_t size = sc_size(c);
    span_t s = {.base = (uintptr_t)1 << 40, .div_inv = sc_table[c].div_inv, .div_shift = sc_table[c].div_shift,
                .last_index = objs - 1};
    for (size_t off = 0; off < (objs + 2) * size; off += step) {
        bool want = off % size == 0 && off / size < objs;
        bool got = span_is_block_start(&s, s.base + off);
        EXPECT_TRUE(got == want, "class %u (%zu) offset %zu: got %d", c, size, off, got);
        if (want)
            EXPECT_EQ_U(span_index_of(&s, s.base + off), off / size);
    }
    for (size_t back = 1; back <= 64; back++)
        EXPECT_TRUE(!span_is_block_start(&s, s.base - back), "class %u accepts base-%zu", c, back);
}

static void test_divisibility(void)
{
    for (unsigned c = 0; c < NSMALL; c++)
        check_divisibility(c, sc_table[c].slab_objs, 1);
    for (unsigned c = NSMALL; c < NCLASSES && sc_size(c) <= ((size_t)1 << 30); c++)
        check_divisibility(c, 3, sc_size(c) / 256 > 16 ? sc_size(c) / 256 : 16);
}

int main(void)
{
    sc_init(NULL);
    test_exhaustive_small();
    test_sampled_large();
    test_geometry();
    test_aligned();
    test_slab_shapes();
    test_divisibility();
    return unit_finish("test_sizeclass");
}
