/*
 * thread_allocated.c - thread.allocated / thread.deallocated (and the
 * counters thread.allocatedp / thread.deallocatedp point at) are exact:
 * every block a call hands the thread adds its usable size
 * (malloc_usable_size) to allocated, every block the thread gives back
 * adds its usable size to deallocated, through every entry point: malloc,
 * calloc, realloc (both sizes, in place or moved), the aligned family,
 * sized frees, the dpm_ API (arenas, typed, sockets), jemalloc's mallocx
 * family; small and large; blocks freed by another thread count there.
 * Linked with dpmalloc_static; ctest runs it with the CPU caches, with
 * thread caches only, in secure mode and with every allocation guarded.
 */
#include "test.h"

#include <dpmalloc.h>
#include <dpmalloc/jemalloc.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define NELEMS(a) (sizeof(a) / sizeof((a)[0]))
#define N 200

static const size_t sizes[] = {1, 8, 16, 17, 48, 100, 512, 1000, 1024, 3000, 4096, 5000, 14336, 16384,
                               20000, 65536, 100000, (size_t)1 << 20, ((size_t)5 << 20) + 1, (size_t)40 << 20};

static uint64_t *allocatedp, *deallocatedp;

static void counters(void)
{
    size_t len = sizeof allocatedp;
    EXPECT_EQ_I(mallctl("thread.allocatedp", &allocatedp, &len, NULL, 0), 0);
    EXPECT_EQ_I(mallctl("thread.deallocatedp", &deallocatedp, &len, NULL, 0), 0);
}

static void *blocks[N];

TEST(values_and_pointers_agree)
{
    counters();
    uint64_t a = 0, d = 0;
    size_t len = sizeof a;
    void *p = malloc(100);
    EXPECT_EQ_I(mallctl("thread.allocated", &a, &len, NULL, 0), 0);
    EXPECT_EQ_I(mallctl("thread.deallocated", &d, &len, NULL, 0), 0);
    EXPECT_EQ_U(a, *allocatedp);
    EXPECT_EQ_U(d, *deallocatedp);
    EXPECT_GE_U(a, malloc_usable_size(p));
    free(p);
    EXPECT_EQ_I(mallctl("thread.allocated", NULL, NULL, &a, sizeof a), EPERM);
    len = 4;
    EXPECT_EQ_I(mallctl("thread.allocated", &a, &len, NULL, 0), EINVAL);
}

/* N blocks of each size through alloc, then freed through release:
 * the counters move by exactly the sum of their usable sizes */
static void expect_pairs(const char *what, void *(*alloc)(size_t), void (*release)(void *, size_t))
{
    for (unsigned i = 0; i < NELEMS(sizes); i++) {
        size_t s = sizes[i];
        unsigned n = s >= ((size_t)1 << 20) ? 4 : N;
        uint64_t a0 = *allocatedp, d0 = *deallocatedp;
        uint64_t sum = 0;
        for (unsigned k = 0; k < n; k++) {
            blocks[k] = alloc(s);
            if (blocks[k] == NULL)
                TEST_FAIL("%s(%zu) failed", what, s);
        }
        uint64_t a1 = *allocatedp;
        for (unsigned k = 0; k < n; k++)
            sum += malloc_usable_size(blocks[k]);
        uint64_t d1 = *deallocatedp;
        for (unsigned k = 0; k < n; k++)
            release(blocks[k], s);
        uint64_t d2 = *deallocatedp;
        if (a1 - a0 != sum || d1 != d0 || d2 - d1 != sum)
            TEST_FAIL("%s %u x %zu: allocated +%llu, deallocated +%llu then +%llu, usable sum %llu", what, n, s,
                      (unsigned long long)(a1 - a0), (unsigned long long)(d1 - d0),
                      (unsigned long long)(d2 - d1), (unsigned long long)sum);
    }
}

static void do_free(void *p, size_t s) { (void)s, free(p); }
static void do_free_sized(void *p, size_t s) { dpm_free_sized(p, s); }
static void do_sdallocx(void *p, size_t s) { sdallocx(p, s, 0); }
static void do_dallocx(void *p, size_t s) { (void)s, dallocx(p, 0); }
static void do_dpm_free(void *p, size_t s) { (void)s, dpm_free(p); }
static void do_realloc0(void *p, size_t s)
{
    (void)s;
    EXPECT_NULL(realloc(p, 0));
}

static void *do_malloc(size_t s) { return malloc(s); }
static void *do_calloc(size_t s) { return calloc(1, s); }
static void *do_realloc_null(size_t s) { return realloc(NULL, s); }
static void *do_memalign64(size_t s) { return memalign(64, s); }
static void *do_aligned4k(size_t s) { return aligned_alloc(4096, s); }
static void *do_aligned64k(size_t s) { return aligned_alloc(65536, s); }
static void *do_valloc(size_t s) { return valloc(s); }
static void *do_posix_memalign(size_t s)
{
    void *p = NULL;
    return posix_memalign(&p, 256, s) == 0 ? p : NULL;
}
static void *do_dpm_malloc(size_t s) { return dpm_malloc(s); }
static void *do_dpm_at(size_t s) { return dpm_malloc_aligned_at(s, 64, 16); }
static void *do_dpm_zalign(size_t s) { return dpm_zalloc_aligned(s, 128); }
static void *do_dpm_typed(size_t s) { return dpm_malloc_typed("counted", s, 0); }
static void *do_dpm_socket(size_t s) { return dpm_malloc_socket(s, 0, DPM_SOCKET_ID_ANY); }
static void *do_dpm_arena0(size_t s) { return dpm_malloc_arena(0, s, 0); }
static void *do_mallocx(size_t s) { return mallocx(s, 0); }
static void *do_mallocx_flags(size_t s) { return mallocx(s, MALLOCX_ALIGN(32) | MALLOCX_ZERO); }
static void *do_mallocx_nocache(size_t s) { return mallocx(s, MALLOCX_TCACHE_NONE); }

TEST(every_entry_point)
{
    counters();
    expect_pairs("malloc/free", do_malloc, do_free);
    expect_pairs("malloc/free_sized", do_malloc, do_free_sized);
    expect_pairs("calloc/free", do_calloc, do_free);
    expect_pairs("realloc(NULL)/realloc(p, 0)", do_realloc_null, do_realloc0);
    expect_pairs("memalign(64)", do_memalign64, do_free);
    expect_pairs("aligned_alloc(4096)", do_aligned4k, do_free);
    expect_pairs("aligned_alloc(65536)", do_aligned64k, do_free);
    expect_pairs("valloc", do_valloc, do_free);
    expect_pairs("posix_memalign(256)", do_posix_memalign, do_free);
    expect_pairs("dpm_malloc/dpm_free", do_dpm_malloc, do_dpm_free);
    expect_pairs("dpm_malloc_aligned_at", do_dpm_at, do_free);
    expect_pairs("dpm_zalloc_aligned", do_dpm_zalign, do_free);
    expect_pairs("dpm_malloc_typed", do_dpm_typed, do_free);
    expect_pairs("dpm_malloc_socket", do_dpm_socket, do_free);
    expect_pairs("dpm_malloc_arena", do_dpm_arena0, do_free);
    expect_pairs("mallocx/sdallocx", do_mallocx, do_sdallocx);
    expect_pairs("mallocx(align, zero)/dallocx", do_mallocx_flags, do_dallocx);
    expect_pairs("mallocx(TCACHE_NONE)", do_mallocx_nocache, do_dallocx);
}

/* a realloc counts the new block's usable size and the old one's,
 * moved or not */
TEST(realloc_counts_both)
{
    counters();
    for (int round = 0; round < 2; round++) {
        void *p = malloc(1);
        for (size_t to = 2; to <= ((size_t)64 << 20); to = to * 3 / 2 + 1) {
            size_t old = malloc_usable_size(p);
            uint64_t a0 = *allocatedp, d0 = *deallocatedp;
            void *q = round == 0 ? realloc(p, to) : rallocx(p, to, 0);
            uint64_t a1 = *allocatedp, d1 = *deallocatedp;
            EXPECT_NONNULL(q);
            if (a1 - a0 != malloc_usable_size(q) || d1 - d0 != old)
                TEST_FAIL("%s to %zu (%s): allocated +%llu (usable %zu), deallocated +%llu (old %zu)",
                          round == 0 ? "realloc" : "rallocx", to, q == p ? "in place" : "moved",
                          (unsigned long long)(a1 - a0), malloc_usable_size(q), (unsigned long long)(d1 - d0), old);
            p = q;
        }
        /* and back down */
        for (size_t to = (size_t)64 << 20; to >= 1; to /= 3) {
            size_t old = malloc_usable_size(p);
            uint64_t a0 = *allocatedp, d0 = *deallocatedp;
            void *q = realloc(p, to);
            EXPECT_EQ_U(*allocatedp - a0, malloc_usable_size(q));
            EXPECT_EQ_U(*deallocatedp - d0, old);
            p = q;
        }
        free(p);
    }
    /* xallocx: both sizes when the usable size changed, nothing otherwise */
    void *big = malloc((size_t)1 << 20);
    size_t old = malloc_usable_size(big);
    uint64_t a0 = *allocatedp, d0 = *deallocatedp;
    size_t now = xallocx(big, (size_t)1 << 19, 0, 0);
    EXPECT_EQ_U(now, malloc_usable_size(big));
    EXPECT_EQ_U(*allocatedp - a0, now != old ? now : 0);
    EXPECT_EQ_U(*deallocatedp - d0, now != old ? old : 0);
    a0 = *allocatedp;
    EXPECT_EQ_U(xallocx(big, now, 0, 0), now);
    EXPECT_EQ_U(*allocatedp, a0);
    free(big);
}

/* One block's sizes agree: nallocx before, sallocx, malloc_usable_size
 * and an xallocx that asks for nothing more after, for every path
 * (caches, arena, no cache) and alignment; under prof:true,
 * lg_prof_sample:0 (api_thread_allocated_prof) every block is a sampled
 * page run that reports what it would have had unsampled. */
TEST(sampled_sizes_agree)
{
    static const size_t sz[] = {1, 7, 17, 100, 1000, 3000, 4000, 9000, 14336, 20000, 70000};
    unsigned bad = 0;
    for (unsigned i = 0; i < sizeof sz / sizeof sz[0]; i++)
        for (int lg = 0; lg <= 17; lg++) {
            const int fl[] = {MALLOCX_LG_ALIGN(lg), MALLOCX_LG_ALIGN(lg) | MALLOCX_TCACHE_NONE,
                              MALLOCX_LG_ALIGN(lg) | MALLOCX_ARENA(0)};
            for (unsigned f = 0; f < 3; f++) {
                size_t n = nallocx(sz[i], fl[f]);
                void *p = mallocx(sz[i], fl[f]);
                EXPECT_NONNULL(p);
                if (p == NULL)
                    return;
                size_t u = sallocx(p, 0), m = malloc_usable_size(p), x = xallocx(p, sz[i], 0, 0);
                if ((n != u || m != u || x != u) && bad++ < 5)
                    TEST_FAIL("size %zu lg %d flags %#x: nallocx %zu sallocx %zu usable %zu xallocx %zu", sz[i], lg,
                              fl[f], n, u, m, x);
                memset(p, 1, u);
                sdallocx(p, n == u ? n : sz[i], fl[f]);
            }
        }
    EXPECT_EQ_U(bad, 0);
}

/* blocks freed by another thread count there */
static void *freer(void *arg)
{
    size_t len = sizeof(uint64_t *);
    uint64_t *ap, *dp;
    if (mallctl("thread.allocatedp", &ap, &len, NULL, 0) != 0 || mallctl("thread.deallocatedp", &dp, &len, NULL, 0))
        return (void *)1;
    uint64_t a0 = *ap, d0 = *dp;
    size_t sum = 0;
    for (unsigned k = 0; k < N; k++) {
        sum += malloc_usable_size(blocks[k]);
        free(blocks[k]);
    }
    uint64_t *out = arg;
    out[0] = a0, out[1] = *ap - a0, out[2] = *dp - d0, out[3] = sum;
    return NULL;
}

TEST(cross_thread)
{
    counters();
    for (unsigned i = 0; i < NELEMS(sizes); i++) {
        unsigned n = sizes[i] >= ((size_t)1 << 20) ? 4 : N;
        uint64_t a0 = *allocatedp, d0 = *deallocatedp, sum = 0;
        for (unsigned k = 0; k < N; k++)
            blocks[k] = k < n ? malloc(sizes[i]) : malloc(24);
        for (unsigned k = 0; k < N; k++)
            sum += malloc_usable_size(blocks[k]);
        EXPECT_EQ_U(*allocatedp - a0, sum);
        uint64_t out[4];
        pthread_t t;
        EXPECT_EQ_I(pthread_create(&t, NULL, freer, out), 0);
        void *ret;
        pthread_join(t, &ret);
        EXPECT_NULL(ret);
        EXPECT_EQ_U(*deallocatedp, d0);   /* the other thread freed them */
        EXPECT_EQ_U(out[2], out[3]);
        EXPECT_EQ_U(out[3], sum);
    }
}

int main(void)
{
    RUN(values_and_pointers_agree);
    RUN(every_entry_point);
    RUN(realloc_counts_both);
    RUN(cross_thread);
    RUN(sampled_sizes_agree);
    return test_done();
}
