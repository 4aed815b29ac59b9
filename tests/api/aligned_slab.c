/*
 * aligned_slab.c - an aligned request whose size and alignment fit the
 * small classes is a slab object (seed 000's loop cold, issue 20): slabs
 * of a class with a power-of-two factor above a page (8192) start at a
 * multiple of it, so posix_memalign(8192, 8192) and friends pop from the
 * thread cache instead of carving a page run with a span descriptor and
 * page-map ends of their own, and 8 KiB slabs hold 16 objects, so a
 * fresh process's 8 KiB blocks take one slab (descriptor, carve) per 16.
 *
 * Checked structurally: no large allocation is counted for such requests
 * (stats.arenas.<i>.large.nmalloc), every block has its alignment and is
 * distinct, and the 8 KiB class's slabs hold at least 16 objects in at
 * most 128 KiB. Sized frees of these blocks pass the secure mode's check
 * (the ctest entry api_aligned_slab_secure runs this with secure:true,
 * where a size the check did not expect aborts).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dpmalloc.h"
#include "test.h"

#define N 2000

static void refresh(void)
{
    uint64_t e = 1;
    EXPECT_EQ_I(dpm_ctl("epoch", NULL, NULL, &e, sizeof e), 0);
}

static unsigned my_arena(void)
{
    unsigned a = 0;
    size_t len = sizeof a;
    EXPECT_EQ_I(dpm_ctl("thread.arena", &a, &len, NULL, 0), 0);
    return a;
}

static uint64_t large_nmalloc(unsigned arena)
{
    char name[64];
    uint64_t v = 0;
    size_t len = sizeof v;
    snprintf(name, sizeof name, "stats.arenas.%u.large.nmalloc", arena);
    refresh();
    EXPECT_EQ_I(dpm_ctl(name, &v, &len, NULL, 0), 0);
    return v;
}

static void *blocks[N];

static void slab_served(size_t size, size_t align)
{
    unsigned arena = my_arena();
    uint64_t before = large_nmalloc(arena);
    for (int i = 0; i < N; i++) {
        blocks[i] = dpm_malloc_aligned(size, align);
        EXPECT_NONNULL(blocks[i]);
        EXPECT_ALIGNED(blocks[i], align);
        EXPECT_GE_U(dpm_usable_size(blocks[i]), size);
        memset(blocks[i], 0x5a, size);
    }
    uint64_t after = large_nmalloc(arena);
    if (after != before)
        TEST_FAIL("%d blocks of %zu bytes aligned to %zu took %llu large allocations (page runs)", N, size, align,
                  (unsigned long long)(after - before));
    for (int i = 0; i < N; i++) {
        const unsigned char *p = blocks[i];
        if (p[0] != 0x5a || p[size - 1] != 0x5a)
            TEST_FAIL("block %d of %zu/%zu was overwritten", i, size, align);
    }
    for (int i = 0; i < N; i++)
        dpm_free_sized(blocks[i], size);
}

TEST(aligned_8192_8192_is_slab_object) { slab_served(8192, 8192); }
TEST(aligned_100_8192_is_slab_object) { slab_served(100, 8192); }
TEST(aligned_5000_8192_is_slab_object) { slab_served(5000, 8192); }
TEST(aligned_8192_4096_is_slab_object) { slab_served(8192, 4096); }

/* 16 KiB and beyond are large classes: those requests still take page
 * runs */
TEST(aligned_16384_stays_large)
{
    unsigned arena = my_arena();
    uint64_t before = large_nmalloc(arena);
    void *p = dpm_malloc_aligned(16384, 16384);
    EXPECT_ALIGNED(p, 16384);
    void *q = dpm_malloc_aligned(8192 + 1, 8192);
    EXPECT_ALIGNED(q, 8192);
    EXPECT_EQ_U(large_nmalloc(arena) - before, 2);
    dpm_free(p);
    dpm_free(q);
}

TEST(slab_8192_holds_16)
{
    unsigned nbins = 0;
    size_t len = sizeof nbins;
    EXPECT_EQ_I(dpm_ctl("arenas.nbins", &nbins, &len, NULL, 0), 0);
    bool found = false;
    for (unsigned j = 0; j < nbins; j++) {
        char name[64];
        size_t size = 0, slab = 0;
        uint32_t nregs = 0;
        len = sizeof size;
        snprintf(name, sizeof name, "arenas.bin.%u.size", j);
        EXPECT_EQ_I(dpm_ctl(name, &size, &len, NULL, 0), 0);
        if (size != 8192)
            continue;
        found = true;
        len = sizeof nregs;
        snprintf(name, sizeof name, "arenas.bin.%u.nregs", j);
        EXPECT_EQ_I(dpm_ctl(name, &nregs, &len, NULL, 0), 0);
        len = sizeof slab;
        snprintf(name, sizeof name, "arenas.bin.%u.slab_size", j);
        EXPECT_EQ_I(dpm_ctl(name, &slab, &len, NULL, 0), 0);
        EXPECT_GE_U(nregs, 16);
        EXPECT_LE_U(slab, (size_t)128 << 10);
    }
    EXPECT_TRUE(found);
}

int main(void)
{
    RUN(aligned_8192_8192_is_slab_object);
    RUN(aligned_100_8192_is_slab_object);
    RUN(aligned_5000_8192_is_slab_object);
    RUN(aligned_8192_4096_is_slab_object);
    RUN(aligned_16384_stays_large);
    RUN(slab_8192_holds_16);
    return test_done();
}
