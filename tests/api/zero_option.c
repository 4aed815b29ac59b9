/*
 * zero_option.c - DPMALLOC_CONF=zero:true (set by CTest): every byte a
 * block gives the program reads zero the first time, including the bytes
 * realloc adds in place.
 *
 * Proves: blocks from malloc, the aligned calls and realloc read zero over
 * their whole usable size even when the memory was used and dirtied
 * before; a small block realloc'd within its usable size, and a large
 * block grown in place into pages another block dirtied, read zero past
 * the old size (what was written before stays).
 */
#include "test.h"

#include <dpmalloc.h>
#include <stdbool.h>

static size_t first_nonzero(const unsigned char *p, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        if (p[i] != 0)
            return i;
    return to;
}

TEST(blocks_read_zero_over_usable)
{
    static const size_t sizes[] = {1, 24, 100, 1000, 5000, 20000, 300000};
    for (int round = 0; round < 2; round++) {
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            unsigned char *p = dpm_malloc(sizes[i]);
            size_t u = dpm_usable_size(p);
            EXPECT(first_nonzero(p, 0, u) == u, "malloc(%zu) byte %zu of %zu not zero", sizes[i],
                   first_nonzero(p, 0, u), u);
            memset(p, 0xee, u);   /* dirty it for the next round */
            dpm_free(p);
            p = dpm_malloc_aligned(sizes[i], 256);
            u = dpm_usable_size(p);
            EXPECT(first_nonzero(p, 0, u) == u, "aligned(%zu) not zero", sizes[i]);
            memset(p, 0xee, u);
            dpm_free(p);
        }
    }
}

TEST(small_realloc_in_place_reads_zero)
{
    for (int round = 0; round < 50; round++) {
        unsigned char *p = dpm_malloc(100);
        size_t u = dpm_usable_size(p);
        memset(p, 0x5c, 100);
        unsigned char *q = dpm_realloc(p, u);
        EXPECT(first_nonzero(q, 100, u) == u, "bytes 100..%zu after realloc in place: byte %zu is %#x", u,
               first_nonzero(q, 100, u), q[first_nonzero(q, 100, u) % u]);
        EXPECT(q[0] == 0x5c && q[99] == 0x5c, "realloc lost the old bytes");
        memset(q, 0xee, u);
        dpm_free(q);
    }
}

TEST(large_growth_in_place_reads_zero)
{
    unsigned grew_in_place = 0;
    for (int round = 0; round < 20; round++) {
        /* dirty a big run, give it back, then grow a block into it */
        unsigned char *big = dpm_malloc((size_t)4 << 20);
        memset(big, 0xee, (size_t)4 << 20);
        dpm_free(big);
        unsigned char *p = dpm_malloc((size_t)1 << 20);
        memset(p, 0x5c, (size_t)1 << 20);
        size_t old = dpm_usable_size(p);
        unsigned char *q = dpm_realloc(p, (size_t)3 << 20);
        grew_in_place += q == p;
        size_t u = dpm_usable_size(q);
        size_t bad = first_nonzero(q, old, u);
        EXPECT(bad == u, "grown block (%s) byte %zu of %zu is %#x", q == p ? "in place" : "moved", bad, u,
               bad < u ? q[bad] : 0);
        EXPECT(q[0] == 0x5c && q[old - 1] == 0x5c, "realloc lost the old bytes");
        dpm_free(q);
    }
    printf("large growth in place: %u of 20\n", grew_in_place);
}

int main(void)
{
    bool zero = false;
    size_t len = sizeof(zero);
    if (dpm_ctl("opt.zero", &zero, &len, NULL, 0) != 0 || !zero) {
        fprintf(stderr, "zero_option: run with DPMALLOC_CONF=zero:true\n");
        return 1;
    }
    RUN(blocks_read_zero_over_usable);
    RUN(small_realloc_in_place_reads_zero);
    RUN(large_growth_in_place_reads_zero);
    return test_done();
}
