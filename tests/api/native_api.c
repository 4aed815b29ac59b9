/*
 * native_api.c - conformance of the dpm_ native API (include/dpmalloc.h).
 *
 * Proves: dpm_malloc/calloc/realloc/free/free_sized/usable_size follow the
 * documented contract (unique malloc(0), NULL + ENOMEM for huge sizes and
 * overflowing products, realloc keeps contents and leaves the block
 * untouched on failure); dpm_malloc_aligned_at gives (p + offset) % align
 * == 0 for every power-of-two alignment 1 .. 1 GiB and offsets 0, 1, 4,
 * align-1, align+4 and random ones, with the whole usable size writable and
 * live blocks never overlapping; bad alignments give NULL + EINVAL;
 * dpm_realloc_aligned keeps alignment and contents; dpm_zalloc_aligned and
 * dpm_calloc return zeroed memory even when they reuse dirty blocks; a
 * freed big block serves the next big request and lets it grow in place.
 * Links against dpmalloc_plain, so it also runs in the sanitizer builds.
 */
#include "test.h"

#include <sched.h>
#include <dpmalloc.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

/* Sizes that cannot be satisfied; volatile so the compiler cannot fold or
 * warn about the calls. */
static volatile size_t huge_sizes[] = {
    SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 4096, (size_t)PTRDIFF_MAX + 1,
    (size_t)PTRDIFF_MAX, (size_t)1 << 62,
};
#define NHUGE (sizeof huge_sizes / sizeof huge_sizes[0])

/*
 * Write the whole range [p, p+n) with a byte derived from tag and read it
 * back (memset/memcmp: fast under the sanitizers too). Returns the offset
 * of the first wrong byte, n if all are right. Blocks live at the same time
 * get different tags, so an overlap shows as a wrong byte.
 */
static unsigned char tag_byte(uintptr_t tag)
{
    return (unsigned char)(tag * 131u + 7u);
}

static size_t verify_bytes(const void *p, size_t n, uintptr_t tag)
{
    static unsigned char ref[4096];
    const unsigned char *c = p;
    memset(ref, tag_byte(tag), sizeof ref);
    for (size_t off = 0; off < n; off += sizeof ref) {
        size_t len = n - off < sizeof ref ? n - off : sizeof ref;
        if (memcmp(c + off, ref, len) != 0)
            for (size_t i = 0; i < len; i++)
                if (c[off + i] != ref[i])
                    return off + i;
    }
    return n;
}

static void check_writable(void *p, size_t n, uintptr_t tag)
{
    memset(p, tag_byte(tag), n);
    size_t bad = verify_bytes(p, n, tag);
    EXPECT(bad == n, "block %p size %zu: byte %zu wrong after memset", p, n,
           bad);
}

TEST(malloc_basic)
{
    static const size_t sizes[] = {1,    2,     7,     8,     15,    16,
                                   17,   24,    31,    32,    48,    100,
                                   128,  255,   256,   1000,  1024,  4095,
                                   4096, 4097,  10000, 16384, 32768, 65536,
                                   100000, 262144, 1 << 20, 3 << 20, 9 << 20};
    enum { N = sizeof sizes / sizeof sizes[0] };
    void *p[N];
    for (size_t i = 0; i < N; i++) {
        errno = 0;
        p[i] = dpm_malloc(sizes[i]);
        EXPECT_NONNULL(p[i]);
        if (!p[i])
            continue;
        EXPECT_ALIGNED(p[i], 16);
        size_t u = dpm_usable_size(p[i]);
        EXPECT(u >= sizes[i], "dpm_usable_size(%p) = %zu < requested %zu", p[i],
               u, sizes[i]);
        check_writable(p[i], u < sizes[i] ? sizes[i] : u, i + 1);
    }
    /* all live together: no block was overwritten by a neighbour */
    for (size_t i = 0; i < N; i++)
        if (p[i]) {
            size_t u = dpm_usable_size(p[i]);
            size_t bad = verify_bytes(p[i], u, i + 1);
            EXPECT(bad == u, "block %zu (%p, size %zu) overwritten at %zu", i,
                   p[i], sizes[i], bad);
        }
    for (size_t i = 0; i < N; i++)
        dpm_free(p[i]);
    EXPECT_EQ_U(dpm_usable_size(NULL), 0);
    dpm_free(NULL);
    dpm_free_sized(NULL, 0);
}

TEST(malloc_zero_unique)
{
    enum { N = 1000 };
    static void *p[N];
    for (int i = 0; i < N; i++) {
        p[i] = dpm_malloc(0);
        EXPECT_NONNULL(p[i]);
    }
    /* all distinct: sort-free O(N^2) is fine for 1000 */
    int dups = 0;
    for (int i = 0; i < N && dups < 5; i++)
        for (int j = i + 1; j < N; j++)
            if (p[i] && p[i] == p[j]) {
                TEST_FAIL("dpm_malloc(0) returned %p twice (#%d, #%d)", p[i], i,
                          j);
                dups++;
            }
    for (int i = 0; i < N; i++)
        dpm_free(p[i]);
    /* and the same through the other zero-size routes */
    void *a = dpm_calloc(0, 10), *b = dpm_calloc(10, 0), *c = dpm_calloc(0, 0);
    void *d = dpm_malloc_aligned(0, 64), *e = dpm_malloc_aligned_at(0, 64, 4);
    EXPECT_NONNULL(a);
    EXPECT_NONNULL(b);
    EXPECT_NONNULL(c);
    EXPECT_NONNULL(d);
    EXPECT_NONNULL(e);
    EXPECT(a != b && b != c && a != c, "dpm_calloc zero-size: %p %p %p", a, b,
           c);
    EXPECT_ALIGNED(d, 64);
    EXPECT_ALIGNED((char *)e + 4, 64);
    dpm_free(a);
    dpm_free(b);
    dpm_free(c);
    dpm_free(d);
    dpm_free(e);
}

TEST(huge_sizes_enomem)
{
    for (size_t i = 0; i < NHUGE; i++) {
        size_t n = huge_sizes[i];
        void *p;
        errno = 0;
        p = dpm_malloc(n);
        EXPECT(p == NULL && errno == ENOMEM, "dpm_malloc(%zu) = %p, errno %d", n,
               p, errno);
        errno = 0;
        p = dpm_malloc_aligned(n, 64);
        EXPECT(p == NULL && errno == ENOMEM,
               "dpm_malloc_aligned(%zu, 64) = %p, errno %d", n, p, errno);
        errno = 0;
        p = dpm_malloc_aligned(n, (size_t)1 << 20);
        EXPECT(p == NULL && errno == ENOMEM,
               "dpm_malloc_aligned(%zu, 1M) = %p, errno %d", n, p, errno);
        errno = 0;
        p = dpm_malloc_aligned_at(n, 4096, 5);
        EXPECT(p == NULL && errno == ENOMEM,
               "dpm_malloc_aligned_at(%zu, 4096, 5) = %p, errno %d", n, p,
               errno);
        errno = 0;
        p = dpm_zalloc_aligned(n, 16);
        EXPECT(p == NULL && errno == ENOMEM,
               "dpm_zalloc_aligned(%zu, 16) = %p, errno %d", n, p, errno);
        errno = 0;
        p = dpm_calloc(1, n);
        EXPECT(p == NULL && errno == ENOMEM, "dpm_calloc(1, %zu) = %p, errno %d",
               n, p, errno);
        errno = 0;
        p = dpm_realloc(NULL, n);
        EXPECT(p == NULL && errno == ENOMEM,
               "dpm_realloc(NULL, %zu) = %p, errno %d", n, p, errno);
    }
}

TEST(calloc_overflow)
{
    static volatile size_t pairs[][2] = {
        {SIZE_MAX, 2},
        {2, SIZE_MAX},
        {(SIZE_MAX >> 1) + 1, 2},
        {(size_t)1 << 32, (size_t)1 << 32},
        {((size_t)1 << 33) + 1, ((size_t)1 << 31) + 3},
        {SIZE_MAX, SIZE_MAX},
        {65537, (SIZE_MAX / 65537) + 1},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        errno = 0;
        void *p = dpm_calloc(pairs[i][0], pairs[i][1]);
        EXPECT(p == NULL && errno == ENOMEM, "dpm_calloc(%zu, %zu) = %p, errno %d",
               (size_t)pairs[i][0], (size_t)pairs[i][1], p, errno);
    }
}

TEST(bad_alignment_einval)
{
    static volatile size_t bad[] = {0,
                                    3,
                                    6,
                                    24,
                                    48,
                                    100,
                                    4097,
                                    ((size_t)1 << 30) + 64,
                                    DPM_MAX_ALIGN << 1,
                                    (size_t)1 << 40,
                                    SIZE_MAX,
                                    (SIZE_MAX >> 1) + 1};
    void *keep = dpm_malloc(100);
    EXPECT_NONNULL(keep);
    if (!keep)
        return;
    test_fill(keep, 100, 77);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t a = bad[i];
        void *p;
        errno = 0;
        p = dpm_malloc_aligned(64, a);
        EXPECT(p == NULL && errno == EINVAL,
               "dpm_malloc_aligned(64, %zu) = %p, errno %d", a, p, errno);
        errno = 0;
        p = dpm_malloc_aligned_at(64, a, 4);
        EXPECT(p == NULL && errno == EINVAL,
               "dpm_malloc_aligned_at(64, %zu, 4) = %p, errno %d", a, p, errno);
        errno = 0;
        p = dpm_zalloc_aligned(64, a);
        EXPECT(p == NULL && errno == EINVAL,
               "dpm_zalloc_aligned(64, %zu) = %p, errno %d", a, p, errno);
        errno = 0;
        p = dpm_realloc_aligned(test_launder(keep), 200, a);
        EXPECT(p == NULL && errno == EINVAL,
               "dpm_realloc_aligned(p, 200, %zu) = %p, errno %d", a, p, errno);
        errno = 0;
        p = dpm_realloc_aligned(NULL, 200, a);
        EXPECT(p == NULL && errno == EINVAL,
               "dpm_realloc_aligned(NULL, 200, %zu) = %p, errno %d", a, p, errno);
    }
    EXPECT(test_check(keep, 100, 77) == 100,
           "block changed by failed dpm_realloc_aligned");
    dpm_free(keep);
}

/*
 * The alignment/offset property over every power of two 1 .. 1 GiB. For
 * each alignment several blocks per offset stay live at once, are filled
 * over their whole usable size, and are checked for overlap before freeing.
 */
TEST(aligned_at_property)
{
    uint64_t rng = 12345;
    enum { NOFF = 6, NSIZE = 4, NLIVE = NOFF * NSIZE * 2 };
    for (unsigned lg = 0; lg <= 30; lg++) {
        size_t align = (size_t)1 << lg;
        size_t offs[NOFF] = {0, 1, 4, align - 1, align + 4,
                             (size_t)test_rand(&rng)};
        /* large blocks up to 4 MiB (512 KiB under the slow sanitizers) */
        size_t big = align + align / 2;
        size_t big_cap = TEST_SANITIZED ? (size_t)512 << 10 : (size_t)4 << 20;
        if (big > big_cap)
            big = big_cap;
        size_t sizes[NSIZE] = {0, 1, 40 + (size_t)(test_rand(&rng) % 200),
                               big};
        void *live[NLIVE];
        size_t live_n[NLIVE], live_req[NLIVE];
        int n = 0;
        for (int o = 0; o < NOFF; o++) {
            for (int s = 0; s < NSIZE; s++) {
                /* the offset form, and for offset 0 the plain aligned form */
                for (int form = 0; form < 2; form++) {
                    size_t off = offs[o], size = sizes[s];
                    void *p;
                    errno = 0;
                    if (form == 0)
                        p = dpm_malloc_aligned_at(size, align, off);
                    else if (o == 0)
                        p = dpm_malloc_aligned(size, align);
                    else
                        p = dpm_zalloc_aligned(size, align);
                    live[n] = p;
                    live_n[n] = 0;
                    live_req[n] = size;
                    n++;
                    if (!p) {
                        TEST_FAIL("%s(%zu, %zu, off %zu) = NULL, errno %d",
                                  form ? "dpm_malloc/zalloc_aligned"
                                       : "dpm_malloc_aligned_at",
                                  size, align, off, errno);
                        continue;
                    }
                    uintptr_t want_off = form ? 0 : off;
                    if (((uintptr_t)p + want_off) % align != 0)
                        TEST_FAIL("align %zu offset %zu size %zu form %d: "
                                  "(%p + off) %% align = %zu",
                                  align, (size_t)want_off, size, form, p,
                                  (size_t)(((uintptr_t)p + want_off) % align));
                    size_t u = dpm_usable_size(p);
                    if (u < size)
                        TEST_FAIL("align %zu offset %zu size %zu: usable %zu",
                                  align, (size_t)want_off, size, u);
                    if (form == 1 && o != 0 && !test_all_zero(p, size))
                        TEST_FAIL("dpm_zalloc_aligned(%zu, %zu) not zeroed",
                                  size, align);
                    size_t w = u < size ? size : u;
                    if (w > ((size_t)8 << 20))
                        w = (size_t)8 << 20;
                    check_writable(p, w, (uintptr_t)n);
                    live_n[n - 1] = w;
                }
            }
        }
        for (int i = 0; i < n; i++) {
            if (!live[i])
                continue;
            size_t bad = verify_bytes(live[i], live_n[i], (uintptr_t)i + 1);
            if (bad != live_n[i])
                TEST_FAIL("align %zu: block %d (%p, %zu bytes) overwritten at "
                          "byte %zu by another live block",
                          align, i, live[i], live_n[i], bad);
        }
        for (int i = 0; i < n; i++) {
            if (i % 2)
                dpm_free_sized(live[i], live_req[i]);
            else
                dpm_free(live[i]);
        }
        if (test_failures > 20)
            return;
    }
}

TEST(aligned_many_live)
{
    /* Many small at-offset blocks (the VPP rewrite-vector case): all phased
     * right, none overlapping. */
    enum { N = 20000 };
    static unsigned char *p[N];
    static size_t sz[N];
    uint64_t rng = 99;
    for (int i = 0; i < N; i++) {
        sz[i] = 44 + (size_t)(test_rand(&rng) % 61);
        p[i] = dpm_malloc_aligned_at(sz[i], 64, 4);
        if (!p[i]) {
            TEST_FAIL("dpm_malloc_aligned_at(%zu, 64, 4) #%d = NULL", sz[i], i);
            return;
        }
        if (((uintptr_t)p[i] + 4) % 64)
            TEST_FAIL("block #%d %p: (p + 4) %% 64 = %zu", i, (void *)p[i],
                      (size_t)(((uintptr_t)p[i] + 4) % 64));
        test_fill(p[i], sz[i], (uintptr_t)i);
        if (test_failures > 10)
            return;
    }
    for (int i = 0; i < N; i++) {
        size_t bad = test_check(p[i], sz[i], (uintptr_t)i);
        if (bad != sz[i]) {
            TEST_FAIL("block #%d %p overwritten at %zu", i, (void *)p[i], bad);
            if (test_failures > 10)
                break;
        }
    }
    for (int i = 0; i < N; i += 2)
        dpm_free(p[i]);
    for (int i = 1; i < N; i += 2)
        dpm_free_sized(p[i], sz[i]);
}

TEST(realloc_basic)
{
    /* NULL -> malloc */
    unsigned char *p = dpm_realloc(NULL, 100);
    EXPECT_NONNULL(p);
    if (!p)
        return;
    test_fill(p, 100, 5);
    /* grow through small, page and large sizes, contents kept */
    static const size_t steps[] = {200,   1000,  4096,    5000,
                                   70000, 1 << 20, 5 << 20, 300};
    size_t have = 100;
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        size_t n = steps[i];
        unsigned char *q = dpm_realloc(p, n);
        EXPECT_NONNULL(q);
        if (!q)
            break;
        size_t keep = have < n ? have : n;
        size_t bad = test_check(q, keep, 5);
        EXPECT(bad == keep, "dpm_realloc %zu -> %zu lost byte %zu", have, n,
               bad);
        EXPECT_GE_U(dpm_usable_size(q), n);
        test_fill(q, n, 5);
        p = q;
        have = n;
    }
    /* failing realloc leaves the block alone */
    for (size_t i = 0; i < NHUGE; i++) {
        errno = 0;
        void *q = dpm_realloc(test_launder(p), huge_sizes[i]);
        EXPECT(q == NULL && errno == ENOMEM, "dpm_realloc(p, %zu) = %p errno %d",
               (size_t)huge_sizes[i], q, errno);
    }
    EXPECT(test_check(p, have, 5) == have, "failed dpm_realloc damaged block");
    /* size 0 frees and returns NULL */
    void *z = dpm_realloc(p, 0);
    EXPECT_NULL(z);
}

static bool opt_bool(const char *name)
{
    bool v = false;
    size_t len = sizeof v;
    return dpm_ctl(name, &v, &len, NULL, 0) == 0 && v;
}

/* The large caches stand aside for the tcache:false, junk and zero
 * options. */
static bool large_cache_in_use(void)
{
    return opt_bool("opt.tcache") && !opt_bool("opt.junk") && !opt_bool("opt.zero");
}

static size_t read_size_t(const char *name)
{
    uint64_t epoch = 1;
    size_t elen = sizeof epoch, v = 0, len = sizeof v;
    dpm_ctl("epoch", &epoch, &elen, &epoch, sizeof epoch);
    if (dpm_ctl(name, &v, &len, NULL, 0) != 0)
        return (size_t)-1;
    return v;
}

static uint64_t arena_lock_ops(void)
{
    unsigned a = 0;
    size_t len = sizeof a;
    dpm_ctl("thread.arena", &a, &len, NULL, 0);
    char name[96];
    snprintf(name, sizeof name, "stats.arenas.%u.mutexes.arena.num_ops", a);
    uint64_t epoch = 1, v = 0;
    size_t elen = sizeof epoch;
    len = sizeof v;
    dpm_ctl("epoch", &epoch, &elen, &epoch, sizeof epoch);
    dpm_ctl(name, &v, &len, NULL, 0);
    return v;
}

/* The large caches (src/large_cache.c, one per CPU; the thread is
 * pinned): a freed large block serves the next request of its class,
 * whole classes only (usable at most a quarter over the request); the
 * cache stays within tcache_large_bytes; same-size loops of big blocks run from it
 * without the arena lock, and grow-by-realloc loops grow in place (blocks
 * that grew go home, where the next chain finds room after them); a
 * shrink gives the tail back; thread.tcache.flush sends the blocks home. */
TEST(large_cache)
{
    dpm_free(dpm_malloc(16));   /* the thread has a cache */
    static const size_t sizes[] = {14337, 20000, 65537, 100000, 300000, 1 << 20, (3 << 20) + 1, 4 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        void *p = dpm_malloc(sizes[i]);
        EXPECT(dpm_usable_size(p) <= sizes[i] + sizes[i] / 4, "malloc(%zu): usable %zu, over 1.25x", sizes[i],
               dpm_usable_size(p));
        dpm_free(p);
        void *q = dpm_malloc(sizes[i]);   /* again, from the cache or not */
        EXPECT(dpm_usable_size(q) <= sizes[i] + sizes[i] / 4, "again malloc(%zu): usable %zu", sizes[i],
               dpm_usable_size(q));
        dpm_free(q);
    }
    if (!large_cache_in_use())
        return;
    EXPECT_EQ_I(dpm_ctl("thread.tcache.flush", NULL, NULL, NULL, 0), 0);
    void *p = dpm_malloc(300000);
    dpm_free(p);
    void *q = dpm_malloc(290000);   /* same class (320 KiB) */
    EXPECT(q == p, "a freed 300000-byte block does not serve 290000: %p, %p", p, q);
    void *r = dpm_malloc(100000);   /* another class */
    EXPECT(r != p, "a block of another class was handed out");
    dpm_free(q);
    dpm_free(r);

    /* the budget: eight freed 1 MiB blocks leave at most tcache_large_bytes */
    size_t budget = read_size_t("opt.tcache_large_bytes");
    EXPECT_EQ_I(dpm_ctl("thread.tcache.flush", NULL, NULL, NULL, 0), 0);
    size_t before = read_size_t("stats.tcache_bytes");
    void *big[8];
    for (int i = 0; i < 8; i++)
        big[i] = dpm_malloc(1 << 20);
    for (int i = 0; i < 8; i++)
        dpm_free(big[i]);
    size_t held = read_size_t("stats.tcache_bytes") - before;
    EXPECT(held <= budget && held >= budget / 2, "8 x 1 MiB freed: the cache holds %zu bytes (budget %zu)", held,
           budget);

    /* alloc / grow by realloc / free loops run from the cache */
    for (int round = 0; round < 3; round++) {
        unsigned char *a = dpm_malloc(256 << 10);
        test_fill(a, 256 << 10, 3);
        a = dpm_realloc(a, 512 << 10);
        a = dpm_realloc(a, 1 << 20);
        EXPECT(test_check(a, 256 << 10, 3) == 256 << 10, "contents lost growing");
        dpm_free(a);
    }
    /* same-size loops of big blocks take no arena lock (but a decay tick
     * every 64 takes) */
    uint64_t ops0 = arena_lock_ops();
    for (int round = 0; round < 100; round++)
        dpm_free(dpm_malloc(600000));
    uint64_t ops = arena_lock_ops() - ops0;
    EXPECT(ops <= 10, "100 rounds of malloc(600000)/free took the arena lock %llu times", (unsigned long long)ops);
    /* growth chains grow in place: no copy */
    int in_place = 0;
    for (int round = 0; round < 100; round++) {
        char *a = dpm_malloc(256 << 10), *a0 = a;
        a = dpm_realloc(a, 512 << 10);
        in_place += a == a0;
        a0 = a;
        a = dpm_realloc(a, 1 << 20);
        in_place += a == a0;
        dpm_free(a);
    }
    EXPECT(in_place >= 180, "alloc 256 KiB, realloc 512 KiB, 1 MiB, free: %d of 200 reallocs grew in place", in_place);

    /* shrinking far below gives the tail back; contents stay */
    unsigned char *b = dpm_malloc(2 << 20);
    test_fill(b, 2 << 20, 4);
    unsigned char *c = dpm_realloc(b, 100000);
    EXPECT(c != NULL && dpm_usable_size(c) <= 125000, "shrink to 100000 kept %zu bytes",
           c ? dpm_usable_size(c) : 0);
    EXPECT(c != NULL && test_check(c, 100000, 4) == 100000, "contents lost in shrink");
    dpm_free(c);

    /* thread.tcache.flush sends every cached large block home */
    EXPECT_EQ_I(dpm_ctl("thread.tcache.flush", NULL, NULL, NULL, 0), 0);
    EXPECT(read_size_t("stats.tcache_bytes") < 1 << 20, "after a flush the caches hold %zu bytes",
           read_size_t("stats.tcache_bytes"));
}

TEST(realloc_aligned)
{
    static const size_t aligns[] = {1, 16, 64, 256, 4096, 65536,
                                    (size_t)2 << 20};
    static const size_t steps[] = {1, 100, 3000, 10000, 200000, 2 << 20, 50,
                                   70000, 7};
    for (size_t a = 0; a < sizeof aligns / sizeof aligns[0]; a++) {
        size_t align = aligns[a];
        unsigned char *p = dpm_realloc_aligned(NULL, 10, align);
        EXPECT_NONNULL(p);
        if (!p)
            continue;
        EXPECT_ALIGNED(p, align);
        test_fill(p, 10, align);
        size_t have = 10;
        for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
            size_t n = steps[s];
            unsigned char *q = dpm_realloc_aligned(p, n, align);
            if (!q) {
                TEST_FAIL("dpm_realloc_aligned(%p, %zu, %zu) = NULL errno %d",
                          (void *)p, n, align, errno);
                break;
            }
            EXPECT_ALIGNED(q, align);
            size_t keep = have < n ? have : n;
            size_t bad = test_check(q, keep, align);
            if (bad != keep)
                TEST_FAIL("dpm_realloc_aligned %zu -> %zu align %zu: byte %zu "
                          "lost",
                          have, n, align, bad);
            EXPECT_GE_U(dpm_usable_size(q), n);
            test_fill(q, n, align);
            p = q;
            have = n;
        }
        errno = 0;
        void *q = dpm_realloc_aligned(test_launder(p), huge_sizes[1], align);
        EXPECT(q == NULL && errno == ENOMEM,
               "dpm_realloc_aligned(p, huge, %zu) = %p errno %d", align, q,
               errno);
        EXPECT(test_check(p, have, align) == have,
               "failed dpm_realloc_aligned damaged block");
        dpm_free(p);
    }
    /* an aligned block may be resized by plain dpm_realloc too */
    unsigned char *p = dpm_malloc_aligned(100, 4096);
    EXPECT_NONNULL(p);
    if (p) {
        test_fill(p, 100, 9);
        unsigned char *q = dpm_realloc(p, 50000);
        EXPECT_NONNULL(q);
        if (q) {
            EXPECT(test_check(q, 100, 9) == 100, "dpm_realloc of aligned block "
                                                 "lost contents");
            dpm_free(q);
        }
    }
}

/* Dirty a set of blocks of this size/alignment, free them, then zalloc the
 * same shapes: every byte must read zero even if blocks were reused. */
static void zero_after_reuse(size_t size, size_t align, int n)
{
    void **v = dpm_malloc(sizeof(void *) * (size_t)n);
    if (!v) {
        TEST_FAIL("dpm_malloc for vector failed");
        return;
    }
    for (int i = 0; i < n; i++) {
        v[i] = dpm_malloc_aligned(size, align);
        if (v[i])
            memset(v[i], 0xab, dpm_usable_size(v[i]));
    }
    for (int i = 0; i < n; i++)
        dpm_free(v[i]);
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < n; i++) {
            v[i] = pass ? dpm_calloc(1, size) : dpm_zalloc_aligned(size, align);
            if (!v[i]) {
                TEST_FAIL("zalloc(%zu, %zu) = NULL", size, align);
                continue;
            }
            if (!pass)
                EXPECT_ALIGNED(v[i], align);
            if (!test_all_zero(v[i], size)) {
                TEST_FAIL("%s(%zu, align %zu) #%d at %p not zeroed after reuse",
                          pass ? "dpm_calloc" : "dpm_zalloc_aligned", size,
                          align, i, v[i]);
                break;
            }
        }
        for (int i = 0; i < n; i++) {
            if (v[i])
                memset(v[i], 0xcd, size);
            dpm_free(v[i]);
        }
    }
    dpm_free(v);
}

TEST(zalloc_zeroed_after_reuse)
{
    zero_after_reuse(1, 16, 500);
    zero_after_reuse(64, 64, 500);
    zero_after_reuse(1000, 16, 300);
    zero_after_reuse(4096, 4096, 200);
    zero_after_reuse(30000, 64, 50);
    zero_after_reuse(100000, 4096, 20);
    zero_after_reuse((size_t)3 << 20, 65536, 4);
    zero_after_reuse((size_t)1 << 20, (size_t)2 << 20, 3);
}

TEST(random_mixed)
{
    /* Single-thread randomized churn over every call, contents checked. */
    enum { SLOTS = 4096, OPS = 200000 };
    static unsigned char *p[SLOTS];
    static size_t sz[SLOTS];
    static uint32_t tag[SLOTS];
    uint64_t rng = 7;
    int ops = TEST_TSAN ? OPS / 8 : TEST_SANITIZED ? OPS / 4 : OPS;
    for (int op = 0; op < ops && test_failures < 10; op++) {
        int i = (int)(test_rand(&rng) % SLOTS);
        uint64_t r = test_rand(&rng);
        if (p[i]) {
            size_t bad = test_check(p[i], sz[i], tag[i]);
            if (bad != sz[i])
                TEST_FAIL("op %d: block %p size %zu damaged at %zu", op,
                          (void *)p[i], sz[i], bad);
            if (r % 5 == 0) {
                size_t n = 1 + (size_t)(test_rand(&rng) % (1u << (r % 17)));
                unsigned char *q = dpm_realloc(p[i], n);
                if (!q) {
                    TEST_FAIL("dpm_realloc(%p, %zu) = NULL", (void *)p[i], n);
                    continue;
                }
                size_t keep = n < sz[i] ? n : sz[i];
                bad = test_check(q, keep, tag[i]);
                if (bad != keep)
                    TEST_FAIL("dpm_realloc %zu -> %zu lost byte %zu", sz[i], n,
                              bad);
                p[i] = q;
                sz[i] = n;
                test_fill(q, n, tag[i]);
                continue;
            }
            if (r & 8)
                dpm_free_sized(p[i], sz[i]);
            else
                dpm_free(p[i]);
            p[i] = NULL;
            continue;
        }
        size_t n = 1 + (size_t)(test_rand(&rng) % (1u << (r % 17)));
        size_t align = (size_t)1 << ((r >> 8) % 13);
        size_t off = (size_t)(r >> 20) % (align * 2);
        unsigned char *q;
        switch ((r >> 40) % 4) {
        case 0:
            q = dpm_malloc(n);
            break;
        case 1:
            q = dpm_calloc(1, n);
            if (q && !test_all_zero(q, n))
                TEST_FAIL("dpm_calloc(1, %zu) not zeroed", n);
            break;
        case 2:
            q = dpm_malloc_aligned(n, align);
            if (q && (uintptr_t)q % align)
                TEST_FAIL("dpm_malloc_aligned(%zu, %zu) = %p", n, align,
                          (void *)q);
            break;
        default:
            q = dpm_malloc_aligned_at(n, align, off);
            if (q && ((uintptr_t)q + off) % align)
                TEST_FAIL("dpm_malloc_aligned_at(%zu, %zu, %zu) = %p", n,
                          align, off, (void *)q);
            break;
        }
        if (!q) {
            TEST_FAIL("allocation of %zu failed", n);
            continue;
        }
        if (dpm_usable_size(q) < n)
            TEST_FAIL("usable %zu < %zu", dpm_usable_size(q), n);
        p[i] = q;
        sz[i] = n;
        tag[i] = (uint32_t)r;
        test_fill(q, n, tag[i]);
    }
    for (int i = 0; i < SLOTS; i++) {
        dpm_free(p[i]);
        p[i] = NULL;
    }
}

/* Large blocks sit in the large cache of the CPU that freed them: pinned
 * to the CPU it runs on, the thread's frees and mallocs meet one cache. */
static void pin_to_this_cpu(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(sched_getcpu(), &set);
    (void)sched_setaffinity(0, sizeof set, &set);
}

int main(void)
{
    pin_to_this_cpu();
    RUN(malloc_basic);
    RUN(malloc_zero_unique);
    RUN(huge_sizes_enomem);
    RUN(calloc_overflow);
    RUN(bad_alignment_einval);
    RUN(aligned_at_property);
    RUN(aligned_many_live);
    RUN(realloc_basic);
    RUN(large_cache);
    RUN(realloc_aligned);
    RUN(zalloc_zeroed_after_reuse);
    RUN(random_mixed);
    return test_done();
}
