/*
 * aligned_slab.c - an aligned request whose size and alignment fit the
 * small classes is a slab object (seed 000's loop cold, issue 20): slabs
 * of a class with a power-of-two factor above a page (8192) start at a
 * multiple of it, so posix_memalign(8192, 8192) and friends pop from the
 * thread cache instead of carving a page run with a span descriptor and
 * page-map ends of their own, and 8 KiB slabs hold 16 objects, so a
 * fresh process's 8 KiB blocks take one slab (descriptor, carve) per 16.
 * The large classes up to 64 KiB have slabs for aligned requests no
 * bigger than their alignment too (bigger ones are page runs, which
 * record the size a sized free promises: death_sized_free), in
 * special bins (sizeclass.h, SC_ALIGNED_SLAB_MAX), one block at a time
 * through the thread's stashes (mode thread; in mode cpu straight from
 * the bin, while phased bins of small classes go through their tags' CPU
 * bins); a phased stash fetches at most 64 KiB,
 * counted in stats.tcache_bytes and trimmed by the owner's idle trim.
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

static uint64_t arena_count(unsigned arena, const char *what)
{
    char name[64];
    uint64_t v = 0;
    size_t len = sizeof v;
    snprintf(name, sizeof name, "stats.arenas.%u.%s", arena, what);
    refresh();
    EXPECT_EQ_I(dpm_ctl(name, &v, &len, NULL, 0), 0);
    return v;
}

static uint64_t large_nmalloc(unsigned arena) { return arena_count(arena, "large.nmalloc"); }

static void *blocks[N];

static void slab_served(size_t size, size_t align)
{
    unsigned arena = my_arena();
    /* blocks the cache holds from earlier tests were counted then */
    EXPECT_EQ_I(dpm_ctl("thread.tcache.flush", NULL, NULL, NULL, 0), 0);
    uint64_t before = large_nmalloc(arena), small_before = arena_count(arena, "small.nmalloc");
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
    /* they count as small blocks (docs/stats.md) */
    EXPECT_GE_U(arena_count(arena, "small.nmalloc") - small_before, N);
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

TEST(aligned_16384_16384_is_slab_object) { slab_served(16384, 16384); }
TEST(aligned_100_16384_is_slab_object) { slab_served(100, 16384); }
/* secure mode's slot canary takes 8 bytes of the slot (docs/design.md,
 * "Misuse checks"): there the largest such block is 8 bytes short */
static size_t canary_bytes(void)
{
    bool secure = false;
    size_t len = sizeof secure;
    return dpm_ctl("opt.secure", &secure, &len, NULL, 0) == 0 && secure ? 8 : 0;
}
TEST(aligned_65536_65536_is_slab_object) { slab_served(65536 - canary_bytes(), 65536); }

/* Beyond 64 KiB, plain requests of the large classes, requests at an
 * offset and requests bigger than their alignment (whose page run
 * records the size a sized free must promise) still take page runs; but
 * secure mode takes plain and aligned requests of the large classes up
 * to 64 KiB from these slabs (a canary and the small quarantine, not a
 * guard page and system calls per block) */
TEST(others_stay_large)
{
    unsigned arena = my_arena();
    uint64_t before = large_nmalloc(arena);
    void *p[5];
    p[0] = dpm_malloc_aligned(65536 + 1, 8192);
    p[1] = dpm_malloc_aligned(131072, 131072);
    p[2] = dpm_malloc(16384);
    p[3] = dpm_malloc_aligned_at(16384, 16384, 64);
    p[4] = dpm_malloc_aligned(40000, 8192);
    EXPECT_ALIGNED(p[0], 8192);
    EXPECT_ALIGNED(p[1], 131072);
    EXPECT_ALIGNED((char *)p[3] + 64, 16384);
    EXPECT_ALIGNED(p[4], 8192);
    EXPECT_EQ_U(large_nmalloc(arena) - before, canary_bytes() != 0 ? 3 : 5);
    if (canary_bytes() != 0)
        EXPECT_EQ_U(dpm_usable_size(p[2]), 20480 - canary_bytes());
    for (int i = 0; i < 5; i++)
        dpm_free(p[i]);
}

/* A slab object does not grow in place: realloc moves it and keeps its
 * contents (dpm_realloc_aligned keeps the alignment) */
TEST(realloc_moves_and_keeps)
{
    unsigned char *p = dpm_malloc_aligned(16384, 16384);
    EXPECT_NONNULL(p);
    for (int i = 0; i < 16384; i++)
        p[i] = (unsigned char)i;
    unsigned char *q = dpm_realloc_aligned(p, 40000, 16384);
    EXPECT_NONNULL(q);
    EXPECT_ALIGNED(q, 16384);
    for (int i = 0; i < 16384; i++)
        if (q[i] != (unsigned char)i) {
            TEST_FAIL("byte %d lost by realloc", i);
            break;
        }
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

/* Bytes the thread caches hold (stashes included): stats.tcache_bytes
 * less what the CPU and transfer caches hold, which the 64-byte loop
 * below fills in mode cpu. */
static size_t tcache_bytes(void)
{
    size_t v = 0, cpu = 0, xfer = 0, len = sizeof v;
    refresh();
    EXPECT_EQ_I(dpm_ctl("stats.tcache_bytes", &v, &len, NULL, 0), 0);
    EXPECT_EQ_I(dpm_ctl("stats.cpu_cache_bytes", &cpu, &len, NULL, 0), 0);
    EXPECT_EQ_I(dpm_ctl("stats.transfer_bytes", &xfer, &len, NULL, 0), 0);
    return v - cpu - xfer;
}

/* docs/design.md, "Small objects: bins and slabs": the aligned bins of
 * the large classes stash nothing (an idle thread would pin their slabs);
 * a phased stash fetches at most 64 KiB, its blocks count as the thread
 * cache's, and the owner's idle trim sends home a stash it stopped using. */
TEST(stash_bounded_counted_trimmed)
{
    EXPECT_EQ_I(dpm_ctl("thread.tcache.flush", NULL, NULL, NULL, 0), 0);
    bool cached = false;
    size_t blen = sizeof cached;
    EXPECT_EQ_I(dpm_ctl("thread.tcache.enabled", &cached, &blen, NULL, 0), 0);
    /* on the CPU caches a phased bin's blocks go through its tag's CPU
     * bin (docs/design.md, "Phased bins"), not a stash */
    const char *front = NULL;
    size_t flen = sizeof front;
    EXPECT_EQ_I(dpm_ctl("stats.front_end", &front, &flen, NULL, 0), 0);
    if (front != NULL && strcmp(front, "cpu") == 0)
        cached = false;
    size_t t0 = tcache_bytes();
    void *big = dpm_malloc_aligned(65536, 65536);
    void *mid = dpm_malloc_aligned(16384, 16384);
    EXPECT_NONNULL(big);
    EXPECT_NONNULL(mid);
    EXPECT_EQ_U(tcache_bytes(), t0);
    /* 8 KiB objects laid at 64 bytes before a 4 KiB boundary: a batch of
     * 8 (64 KiB), 7 stashed; without a thread cache (secure:true) or on
     * the CPU caches none */
    size_t stashed = cached ? 7 * 8192 : 0;
    void *p = dpm_malloc_aligned_at(8192, 4096, 64);
    EXPECT_NONNULL(p);
    EXPECT_EQ_U(tcache_bytes(), t0 + stashed);
    dpm_free(p);
    dpm_free(mid);
    dpm_free(big);
    EXPECT_EQ_U(tcache_bytes(), t0 + stashed);
    /* The thread goes on with 64-byte blocks only: its slow paths trim
     * one bin each 64 events and, once per round over the bins, the
     * stashes unused since the last round. The 64-byte bin holds less
     * than the stash did, so tcache_bytes below it means the stash went. */
    size_t n64 = 0, nlen = sizeof n64, sz = 64;
    EXPECT_EQ_I(dpm_ctl("thread.tcache.ncached_max.read_sizeclass", &n64, &nlen, &sz, sizeof sz), 0);
    EXPECT_LT_U(n64 * 64 + t0, 7 * 8192);
    static void *small[512];
    for (int k = 0; k < 4000; k++) {
        for (int i = 0; i < 512; i++)
            EXPECT_NONNULL(small[i] = dpm_malloc(64));
        for (int i = 0; i < 512; i++)
            dpm_free(small[i]);
    }
    EXPECT_LT_U(tcache_bytes(), 7 * 8192);
}

int main(void)
{
    RUN(aligned_8192_8192_is_slab_object);
    RUN(aligned_100_8192_is_slab_object);
    RUN(aligned_5000_8192_is_slab_object);
    RUN(aligned_8192_4096_is_slab_object);
    RUN(aligned_16384_16384_is_slab_object);
    RUN(aligned_100_16384_is_slab_object);
    RUN(aligned_65536_65536_is_slab_object);
    RUN(others_stay_large);
    RUN(realloc_moves_and_keeps);
    RUN(slab_8192_holds_16);
    RUN(stash_bounded_counted_trimmed);
    return test_done();
}
