/*
 * good_size.c - dpm_good_size(n) == dpm_usable_size(dpm_malloc(n)) for
 * every size up to 20000 (every slab class and the first page-run
 * classes), for sizes around every page multiple up to 1 MiB, and for a
 * geometric sweep with neighbours up to 64 MiB (class-rounded and
 * page-rounded large blocks, LARGE_ROUND_MAX on both sides), each asked
 * twice so that the second is served from the caches the first one's free
 * filled; also after a realloc-grown block went to the large cache. 0 for
 * sizes no allocation can serve. ctest runs it under the default, secure
 * and no-thread-cache configurations.
 */
#include "test.h"

#include <dpmalloc.h>
#include <stdint.h>

static void check_size(size_t n)
{
    size_t want = dpm_good_size(n);
    for (int round = 0; round < 2; round++) {
        void *p = dpm_malloc(n);
        if (p == NULL) {
            TEST_FAIL("dpm_malloc(%zu) = NULL", n);
            return;
        }
        size_t got = dpm_usable_size(p);
        if (got != want || want < n)
            TEST_FAIL("size %zu: dpm_good_size %zu, usable size %zu (round %d)", n, want, got, round);
        dpm_free(p);
    }
}

TEST(every_small_size)
{
    for (size_t n = 0; n <= 20000 && test_failures < 10; n++)
        check_size(n);
}

TEST(around_pages)
{
    for (size_t pg = 4096; pg <= ((size_t)1 << 20) && test_failures < 10; pg += 4096)
        for (size_t d = 0; d < 3; d++) {
            check_size(pg - 1 + d);
        }
}

TEST(geometric_large)
{
    for (size_t n = 16384; n <= ((size_t)64 << 20) && test_failures < 10; n += n / 7 + 1)
        for (size_t d = 0; d < 3; d++)
            check_size(n - 1 + d);
    for (size_t n = ((size_t)4 << 20) - 8192; n <= ((size_t)4 << 20) + 8192; n += 2048)
        check_size(n);
}

TEST(after_grown_block)
{
    /* a block grown by realloc, freed into the large cache, then cut down
     * for a smaller request */
    char *p = dpm_malloc(100000);
    for (size_t n = 200000; n <= 1600000 && p; n *= 2)
        p = dpm_realloc(p, n);
    dpm_free(p);
    check_size(300000);
    check_size(150000);
}

TEST(unservable)
{
    EXPECT_EQ_U(dpm_good_size(SIZE_MAX), 0);
    EXPECT_EQ_U(dpm_good_size(((size_t)1 << 46) + 1), 0);
    EXPECT_EQ_U(dpm_good_size((size_t)PTRDIFF_MAX + 1), 0);
    EXPECT_GE_U(dpm_good_size((size_t)1 << 46), (size_t)1 << 46);
}

int main(void)
{
    RUN(every_small_size);
    RUN(around_pages);
    RUN(geometric_large);
    RUN(after_grown_block);
    RUN(unservable);
    return test_done();
}
