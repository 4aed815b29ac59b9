/*
 * libc_api.c - conformance of the libc allocation family as dpmalloc
 * overrides it (static link, and LD_PRELOAD in the *_preload build).
 *
 * Proves, for malloc calloc realloc free reallocarray posix_memalign
 * aligned_alloc memalign valloc pvalloc malloc_usable_size free_sized
 * free_aligned_sized: that they are dpmalloc's (not glibc's); malloc(0)
 * returns unique freeable pointers; SIZE_MAX / PTRDIFF_MAX+1 requests give
 * NULL + ENOMEM; calloc and reallocarray overflow give NULL + ENOMEM and
 * leave the old block alone; posix_memalign returns EINVAL for bad
 * alignments with errno and *memptr untouched, and ENOMEM (return value
 * and errno) for a request it cannot meet; aligned_alloc with a
 * non-power-of-two alignment gives NULL + EINVAL; realloc(NULL, n) mallocs,
 * realloc(p, 0) frees and returns NULL (glibc), resizing keeps contents;
 * malloc_usable_size >= request and writable; valloc/pvalloc are page
 * aligned and pvalloc rounds to whole pages; sized frees work.
 */
#include "override.h"

#include <limits.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>

static volatile size_t huge_sizes[] = {
    SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 4096, (size_t)PTRDIFF_MAX + 1,
    (size_t)PTRDIFF_MAX, (size_t)1 << 62,
};
#define NHUGE (sizeof huge_sizes / sizeof huge_sizes[0])

static size_t page_size(void) { return (size_t)sysconf(_SC_PAGESIZE); }

TEST(override_in_effect) { test_expect_override(); }

TEST(malloc_sizes_usable)
{
    uint64_t rng = 1;
    for (int i = 0; i < 3000; i++) {
        size_t n = (size_t)(test_rand(&rng) % (1u << (i % 21)));
        unsigned char *p = malloc(n);
        if (!p) {
            TEST_FAIL("malloc(%zu) = NULL errno %d", n, errno);
            continue;
        }
        EXPECT_ALIGNED(p, 16);
        size_t u = malloc_usable_size(p);
        if (u < n)
            TEST_FAIL("malloc_usable_size(malloc(%zu)) = %zu", n, u);
        test_fill(p, u, (uintptr_t)i);
        size_t bad = test_check(p, u, (uintptr_t)i);
        if (bad != u)
            TEST_FAIL("malloc(%zu): usable byte %zu of %zu not writable", n, bad,
                      u);
        free(p);
        if (test_failures > 10)
            return;
    }
    EXPECT_EQ_U(malloc_usable_size(NULL), 0);
    free(NULL);
}

TEST(malloc_zero_unique)
{
    enum { N = 1000 };
    static void *p[N];
    for (int i = 0; i < N; i++) {
        p[i] = malloc(0);
        EXPECT_NONNULL(p[i]);
    }
    int dups = 0;
    for (int i = 0; i < N && dups < 5; i++)
        for (int j = i + 1; j < N; j++)
            if (p[i] && p[i] == p[j]) {
                TEST_FAIL("malloc(0) returned %p twice", p[i]);
                dups++;
            }
    for (int i = 0; i < N; i++)
        free(p[i]);
}

TEST(huge_sizes_enomem)
{
    for (size_t i = 0; i < NHUGE; i++) {
        size_t n = huge_sizes[i];
        void *p;
        errno = 0;
        p = malloc(n);
        EXPECT(p == NULL && errno == ENOMEM, "malloc(%zu) = %p errno %d", n, p,
               errno);
        errno = 0;
        p = calloc(1, n);
        EXPECT(p == NULL && errno == ENOMEM, "calloc(1, %zu) = %p errno %d", n,
               p, errno);
        errno = 0;
        p = realloc(NULL, n);
        EXPECT(p == NULL && errno == ENOMEM, "realloc(NULL, %zu) = %p errno %d",
               n, p, errno);
        errno = 0;
        p = aligned_alloc(64, n);
        EXPECT(p == NULL && errno == ENOMEM,
               "aligned_alloc(64, %zu) = %p errno %d", n, p, errno);
        errno = 0;
        p = memalign(4096, n);
        EXPECT(p == NULL && errno == ENOMEM, "memalign(4096, %zu) = %p errno %d",
               n, p, errno);
        errno = 0;
        p = valloc(n);
        EXPECT(p == NULL && errno == ENOMEM, "valloc(%zu) = %p errno %d", n, p,
               errno);
        errno = 0;
        p = pvalloc(n);
        EXPECT(p == NULL && errno == ENOMEM, "pvalloc(%zu) = %p errno %d", n, p,
               errno);
        void *q = (void *)&q;
        errno = 0;
        int rc = posix_memalign(&q, 64, n);
        EXPECT(rc == ENOMEM && errno == ENOMEM, "posix_memalign(&q, 64, %zu) = %d errno %d", n, rc, errno);
        EXPECT(q == (void *)&q, "posix_memalign changed *memptr on failure");
    }
}

TEST(calloc_overflow_and_zero)
{
    static volatile size_t pairs[][2] = {
        {SIZE_MAX, 2},
        {2, SIZE_MAX},
        {(SIZE_MAX >> 1) + 1, 2},
        {(size_t)1 << 32, (size_t)1 << 32},
        {SIZE_MAX, SIZE_MAX},
        {65537, (SIZE_MAX / 65537) + 1},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        errno = 0;
        void *p = calloc(pairs[i][0], pairs[i][1]);
        EXPECT(p == NULL && errno == ENOMEM, "calloc(%zu, %zu) = %p errno %d",
               (size_t)pairs[i][0], (size_t)pairs[i][1], p, errno);
    }
    /* zero-filled even when reusing dirty blocks, small and large */
    static const size_t sizes[] = {8, 100, 1024, 5000, 70000, 1 << 20, 5 << 20};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        enum { N = 64 };
        void *v[N];
        int n = sizes[s] > 100000 ? 4 : N;
        for (int i = 0; i < n; i++) {
            v[i] = malloc(sizes[s]);
            if (v[i])
                memset(v[i], 0xee, sizes[s]);
        }
        for (int i = 0; i < n; i++)
            free(v[i]);
        for (int i = 0; i < n; i++) {
            v[i] = calloc(sizes[s] / 4, 4);
            if (!v[i])
                TEST_FAIL("calloc(%zu, 4) = NULL", sizes[s] / 4);
            else if (!test_all_zero(v[i], sizes[s]))
                TEST_FAIL("calloc(%zu, 4) #%d not zeroed after reuse",
                          sizes[s] / 4, i);
        }
        for (int i = 0; i < n; i++)
            free(v[i]);
    }
    void *a = calloc(0, 0), *b = calloc(0, 5), *c = calloc(5, 0);
    EXPECT_NONNULL(a);
    EXPECT_NONNULL(b);
    EXPECT_NONNULL(c);
    EXPECT(a != b && b != c && a != c, "calloc zero sizes: %p %p %p", a, b, c);
    free(a);
    free(b);
    free(c);
}

TEST(reallocarray_overflow)
{
    unsigned char *p = reallocarray(NULL, 10, 10);
    EXPECT_NONNULL(p);
    if (!p)
        return;
    test_fill(p, 100, 3);
    static volatile size_t pairs[][2] = {
        {SIZE_MAX, 2}, {(SIZE_MAX >> 1) + 1, 2}, {(size_t)1 << 32, (size_t)1 << 32}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        errno = 0;
        void *q = reallocarray(test_launder(p), pairs[i][0], pairs[i][1]);
        EXPECT(q == NULL && errno == ENOMEM,
               "reallocarray(p, %zu, %zu) = %p errno %d", (size_t)pairs[i][0],
               (size_t)pairs[i][1], q, errno);
    }
    EXPECT(test_check(p, 100, 3) == 100, "failed reallocarray damaged block");
    unsigned char *q = reallocarray(p, 1000, 100);
    EXPECT_NONNULL(q);
    if (q) {
        EXPECT(test_check(q, 100, 3) == 100, "reallocarray lost contents");
        EXPECT_GE_U(malloc_usable_size(q), 100000);
        memset(q, 1, 100000);
        p = q;
    }
    free(p);
}

TEST(realloc_semantics)
{
    unsigned char *p = realloc(NULL, 40);
    EXPECT_NONNULL(p);
    if (!p)
        return;
    test_fill(p, 40, 11);
    static const size_t steps[] = {41,     64,      1000,    4096,  4097,
                                   100000, 1 << 20, 6 << 20, 2000,  30,
                                   30,     3 << 20, 3 << 20, 1,     512};
    size_t have = 40;
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        size_t n = steps[i];
        unsigned char *q = realloc(p, n);
        if (!q) {
            TEST_FAIL("realloc(%p, %zu) = NULL", (void *)p, n);
            break;
        }
        size_t keep = have < n ? have : n;
        size_t bad = test_check(q, keep, 11);
        if (bad != keep)
            TEST_FAIL("realloc %zu -> %zu lost byte %zu", have, n, bad);
        EXPECT_GE_U(malloc_usable_size(q), n);
        test_fill(q, n, 11);
        p = q;
        have = n;
    }
    for (size_t i = 0; i < NHUGE; i++) {
        errno = 0;
        void *q = realloc(test_launder(p), huge_sizes[i]);
        EXPECT(q == NULL && errno == ENOMEM, "realloc(p, %zu) = %p errno %d",
               (size_t)huge_sizes[i], q, errno);
    }
    EXPECT(test_check(p, have, 11) == have, "failed realloc damaged block");
    /* glibc: realloc(p, 0) frees p and returns NULL */
    void *z = realloc(p, 0);
    EXPECT_NULL(z);
    /* an aligned block can be realloc'ed and freed like any other */
    void *a = aligned_alloc(4096, 100);
    EXPECT_NONNULL(a);
    if (a) {
        test_fill(a, 100, 12);
        unsigned char *b = realloc(a, 200000);
        EXPECT_NONNULL(b);
        if (b) {
            EXPECT(test_check(b, 100, 12) == 100, "realloc of aligned block "
                                                  "lost contents");
            free(b);
        }
    }
}

TEST(posix_memalign_rules)
{
    static volatile size_t bad[] = {0, 1, 2, 4, 3, 12, 24, 48, 100,
                                    (SIZE_MAX >> 1) + 3, SIZE_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        void *p = (void *)&p;
        errno = 12345;
        int rc = posix_memalign(&p, bad[i], 64);
        EXPECT(rc == EINVAL, "posix_memalign(&p, %zu, 64) = %d, want EINVAL",
               (size_t)bad[i], rc);
        EXPECT(errno == 12345, "posix_memalign(%zu) changed errno to %d",
               (size_t)bad[i], errno);
        EXPECT(p == (void *)&p, "posix_memalign(%zu) changed *memptr to %p",
               (size_t)bad[i], p);
        if (rc == 0 && p != (void *)&p)
            free(p);
    }
    for (unsigned lg = 3; lg <= 26; lg++) {
        size_t a = (size_t)1 << lg;
        static const size_t sizes[] = {1, 8, 100, 5000, 300000};
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            void *p = NULL;
            errno = 12345;
            int rc = posix_memalign(&p, a, sizes[s]);
            if (rc != 0 || !p) {
                TEST_FAIL("posix_memalign(&p, %zu, %zu) = %d, p %p", a,
                          sizes[s], rc, p);
                continue;
            }
            EXPECT(errno == 12345, "successful posix_memalign set errno %d",
                   errno);
            EXPECT_ALIGNED(p, a);
            EXPECT_GE_U(malloc_usable_size(p), sizes[s]);
            memset(p, 0x77, sizes[s]);
            free(p);
        }
    }
    void *z = (void *)&z;
    int rc = posix_memalign(&z, 64, 0);
    EXPECT_EQ_I(rc, 0);
    if (rc == 0 && z != NULL)
        free(z);
}

TEST(aligned_alloc_rules)
{
    static volatile size_t bad[] = {0, 3, 6, 12, 24, 48, 100, 4097,
                                    (SIZE_MAX >> 1) + 3, SIZE_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        errno = 0;
        void *p = aligned_alloc(bad[i], 64);
        EXPECT(p == NULL && errno == EINVAL,
               "aligned_alloc(%zu, 64) = %p errno %d, want NULL/EINVAL",
               (size_t)bad[i], p, errno);
        free(p);
    }
    for (unsigned lg = 0; lg <= 26; lg++) {
        size_t a = (size_t)1 << lg;
        /* C17: size need not be a multiple of the alignment */
        static const size_t sizes[] = {1, 64, 100, 4096, 70000};
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            unsigned char *p = aligned_alloc(a, sizes[s]);
            if (!p) {
                TEST_FAIL("aligned_alloc(%zu, %zu) = NULL errno %d", a,
                          sizes[s], errno);
                continue;
            }
            EXPECT_ALIGNED(p, a);
            EXPECT_GE_U(malloc_usable_size(p), sizes[s]);
            memset(p, 0x33, sizes[s]);
            free(p);
        }
    }
}

/* A valid alignment beyond what dpmalloc serves (1 GiB) is a request it
 * cannot meet: ENOMEM, not EINVAL (POSIX keeps EINVAL for alignments that
 * are not a power of two multiple of sizeof(void *)); posix_memalign sets
 * errno to it as well, as malloc does. */
TEST(huge_alignments)
{
    static volatile size_t huge[] = {(size_t)1 << 31, (size_t)1 << 40, (size_t)1 << 62,
                                     (size_t)1 << 63};
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        void *p = (void *)&p;
        errno = 12345;
        int rc = posix_memalign(&p, huge[i], 64);
        EXPECT(rc == ENOMEM, "posix_memalign(&p, %#zx, 64) = %d, want ENOMEM", (size_t)huge[i], rc);
        EXPECT(errno == ENOMEM, "posix_memalign(%#zx) left errno %d, want ENOMEM", (size_t)huge[i], errno);
        EXPECT(p == (void *)&p, "posix_memalign(%#zx) changed *memptr", (size_t)huge[i]);
        errno = 0;
        p = aligned_alloc(huge[i], 64);
        EXPECT(p == NULL && errno == ENOMEM, "aligned_alloc(%#zx, 64) = %p errno %d, want NULL/ENOMEM",
               (size_t)huge[i], p, errno);
        errno = 0;
        p = memalign(huge[i], 64);
        EXPECT(p == NULL && errno == ENOMEM, "memalign(%#zx, 64) = %p errno %d, want NULL/ENOMEM",
               (size_t)huge[i], p, errno);
    }
    /* a non-power of two whose round-up would overflow: EINVAL, as glibc */
    static volatile size_t past = ((size_t)1 << 63) + 1;
    errno = 0;
    void *q = memalign(past, 64);
    EXPECT(q == NULL && errno == EINVAL, "memalign(2^63 + 1) = %p errno %d, want NULL/EINVAL", q, errno);
}

TEST(memalign_valloc_pvalloc)
{
    size_t pg = page_size();
    for (unsigned lg = 0; lg <= 24; lg++) {
        size_t a = (size_t)1 << lg;
        unsigned char *p = memalign(a, 3 * a / 2 + 1);
        if (!p) {
            TEST_FAIL("memalign(%zu) = NULL", a);
            continue;
        }
        EXPECT_ALIGNED(p, a);
        memset(p, 1, 3 * a / 2 + 1);
        free(p);
    }
    /* glibc rounds a non-power-of-two memalign alignment up; if dpmalloc
     * accepts one, the block must be at least that aligned */
    static volatile size_t odd_align = 24;
    errno = 0;
    void *odd = memalign(odd_align, 100);
    if (odd)
        EXPECT_ALIGNED(odd, 32);
    else
        EXPECT_ERRNO(EINVAL);
    free(odd);

    static const size_t sizes[] = {0, 1, 100, 4095, 4096, 4097, 100000,
                                   1 << 20};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        unsigned char *v = valloc(n), *pv = pvalloc(n);
        EXPECT_NONNULL(v);
        EXPECT_NONNULL(pv);
        if (v) {
            EXPECT_ALIGNED(v, pg);
            EXPECT_GE_U(malloc_usable_size(v), n);
            memset(v, 2, n);
        }
        if (pv) {
            size_t want = (n + pg - 1) / pg * pg;
            EXPECT_ALIGNED(pv, pg);
            size_t u = malloc_usable_size(pv);
            EXPECT(u >= want, "pvalloc(%zu): usable %zu < %zu (whole pages)", n,
                   u, want);
            memset(pv, 3, u);
        }
        free(v);
        free(pv);
    }
}

TEST(sized_frees)
{
    uint64_t rng = 3;
    for (int i = 0; i < 5000; i++) {
        size_t n = (size_t)(test_rand(&rng) % (1u << (i % 20)));
        void *p = malloc(n);
        if (!p) {
            TEST_FAIL("malloc(%zu) = NULL", n);
            continue;
        }
        memset(p, 4, n);
        free_sized(p, n);
        size_t a = (size_t)1 << (i % 14);
        void *q = aligned_alloc(a, n);
        if (!q) {
            TEST_FAIL("aligned_alloc(%zu, %zu) = NULL", a, n);
            continue;
        }
        EXPECT_ALIGNED(q, a);
        memset(q, 5, n);
        free_aligned_sized(q, a, n);
        if (test_failures > 10)
            return;
    }
    free_sized(NULL, 0);
    free_aligned_sized(NULL, 64, 0);
    /* the heap still works afterwards */
    void *p = malloc(123);
    EXPECT_NONNULL(p);
    free(p);
}

int main(void)
{
    RUN(override_in_effect);
    RUN(malloc_sizes_usable);
    RUN(malloc_zero_unique);
    RUN(huge_sizes_enomem);
    RUN(calloc_overflow_and_zero);
    RUN(reallocarray_overflow);
    RUN(realloc_semantics);
    RUN(posix_memalign_rules);
    RUN(aligned_alloc_rules);
    RUN(huge_alignments);
    RUN(memalign_valloc_pvalloc);
    RUN(sized_frees);
    return test_done();
}
