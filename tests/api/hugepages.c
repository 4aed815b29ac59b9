/*
 * hugepages.c - explicit huge pages, where the system's pool has them.
 *
 *   test_hugepages segments <lg>   under DPMALLOC_CONF=hugepages:true (lg
 *                                  21) or hugepages:1g (lg 30): blocks of
 *                                  every kind sit in huge-page mappings of
 *                                  that size (the kernel's KernelPageSize
 *                                  for their address in /proc/self/smaps);
 *                                  with lg 21, allocating past the pool
 *                                  falls back to normal pages and keeps
 *                                  working.
 *   test_hugepages reserve         dpm_reserve takes 2 MiB pages (and a
 *                                  1 GiB page for a 1 GiB reserve) from
 *                                  the pool, allocations inside it sit on
 *                                  them and take no page faults;
 *                                  DPM_RESERVE_NO_HUGEPAGES takes none.
 *
 * Each check needs free pages of its size in the pool (vm.nr_hugepages,
 * /sys/kernel/mm/hugepages/hugepages-*kB/nr_hugepages; .ci/run asks for
 * them as root): without them it says so, and the program exits 77
 * (skipped) when nothing could be checked.
 */
#include "test.h"

#include <dpmalloc.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static int checked;

/* Free pages of 1 << lg bytes in the system's pool. */
static long free_huge(unsigned lg)
{
    char path[96];
    snprintf(path, sizeof(path), "/sys/kernel/mm/hugepages/hugepages-%lukB/free_hugepages",
             (unsigned long)((1ul << lg) >> 10));
    FILE *f = fopen(path, "r");
    long n = 0;
    if (f == NULL)
        return 0;
    if (fscanf(f, "%ld", &n) != 1)
        n = 0;
    fclose(f);
    return n;
}

/* KernelPageSize (KiB) of the mapping holding p, from /proc/self/smaps;
 * 0 if not found. */
static unsigned long page_kib(const void *p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (f == NULL)
        return 0;
    char line[512];
    bool inside = false;
    unsigned long kib = 0;
    uintptr_t a = (uintptr_t)p;
    while (fgets(line, sizeof(line), f) != NULL) {
        uintptr_t lo, hi;
        if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " ", &lo, &hi) == 2 && strchr(line, ':') != NULL &&
            strchr(line, '-') < strchr(line, ' ')) {
            inside = a >= lo && a < hi;
            continue;
        }
        if (inside && sscanf(line, "KernelPageSize: %lu kB", &kib) == 1)
            break;
    }
    fclose(f);
    return inside ? kib : 0;
}

static long minor_faults(void)
{
    struct rusage r;
    getrusage(RUSAGE_THREAD, &r);
    return r.ru_minflt;
}

/* ---- segments (hugepages:true / hugepages:1g) --------------------------- */

static unsigned seg_lg;

TEST(blocks_of_every_kind_sit_on_huge_pages)
{
    unsigned lg = seg_lg;
    unsigned long want_kib = (1ul << lg) >> 10;
    void *w = dpm_malloc(16);   /* the first segment exists */
    static const size_t sizes[] = {16, 200, 4096, 20000, 300000, 1 << 20};
    void *blocks[sizeof(sizes) / sizeof(sizes[0])];
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        blocks[i] = dpm_malloc(sizes[i]);
        EXPECT_NONNULL(blocks[i]);
        test_fill(blocks[i], sizes[i], i);
        EXPECT(page_kib(blocks[i]) == want_kib, "%zu-byte block %p on %lu kB pages, want %lu", sizes[i],
               blocks[i], page_kib(blocks[i]), want_kib);
    }
    void *al = dpm_malloc_aligned(65536, 65536);
    EXPECT_NONNULL(al);
    EXPECT(page_kib(al) == want_kib, "aligned block on %lu kB pages", page_kib(al));
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        EXPECT_EQ_U(test_check(blocks[i], sizes[i], i), sizes[i]);
        dpm_free(blocks[i]);
    }
    dpm_free(al);
    dpm_free(w);
}

/* Past the pool: 8 MiB blocks until one lands on normal pages (at most
 * the pool's free pages' worth and 64 MiB more: a segment that the rest
 * of the pool cannot hold comes from normal pages); every block stays
 * usable. */
TEST(allocating_past_the_pool_falls_back_to_normal_pages)
{
    unsigned lg = seg_lg;
    long pool = free_huge(lg);
    size_t limit = (size_t)(pool + 32) * (2u << 20) / (8u << 20) + 1;
    void **big = calloc(limit, sizeof(void *));
    size_t n = 0;
    bool fell_back = false;
    while (n < limit && !fell_back) {
        big[n] = dpm_malloc(8u << 20);
        EXPECT_NONNULL(big[n]);
        if (big[n] == NULL)
            break;
        memset(big[n], (int)n, 8u << 20);
        fell_back = page_kib(big[n]) == 4;
        n++;
    }
    EXPECT(fell_back, "%zu blocks of 8 MiB with %ld huge pages free at the start, none on normal pages", n,
           pool);
    EXPECT(free_huge(lg) < pool, "the pool kept all its %ld free pages", pool);
    for (size_t i = 0; i < n; i++) {
        const unsigned char *b = big[i];
        EXPECT(b[0] == (unsigned char)i && b[(8u << 20) - 1] == (unsigned char)i, "block %zu lost its bytes", i);
        dpm_free(big[i]);
    }
    free(big);
    printf("  %zu blocks of 8 MiB: huge pages while the pool lasted (%ld free), then normal pages\n", n, pool);
}

static int segments_main(unsigned lg)
{
    seg_lg = lg;
    void *w = dpm_malloc(16);   /* the first segment exists */
    bool huge_at_start = page_kib(w) == ((1ul << lg) >> 10);
    dpm_free(w);
    if (!huge_at_start && free_huge(lg) * (long)(1ul << lg) < (8l << 20)) {
        printf("  not enough free %lu kB huge pages: hugepages segments not tested\n", (1ul << lg) >> 10);
        return 77;
    }
    RUN(blocks_of_every_kind_sit_on_huge_pages);
    if (lg == 21)
        RUN(allocating_past_the_pool_falls_back_to_normal_pages);
    return test_done();
}

/* ---- reserves ------------------------------------------------------------- */

/* In a fresh process (exec'd: no heap state of another check): reserve
 * bytes with flags, then allocate and write blocks inside it; prints the
 * pool pages the reserve took, the bytes of blocks on pages of 1 << lg
 * (or, for lg 12, normal pages) against all, and the minor faults while
 * allocating. Small blocks may come from slabs the thread had before the
 * reserve, so not every byte need be inside it. */
static int reserve_child_main(size_t bytes, unsigned flags, unsigned lg)
{
    void *w = dpm_malloc(16);   /* the thread's cache exists before the count */
    dpm_free(w);
    long before = free_huge(lg);
    if (dpm_reserve(bytes, DPM_SOCKET_ID_ANY, flags) != 0)
        return 3;
    long took = before - free_huge(lg);
    static const size_t sizes[] = {16, 48, 256, 1024, 4096, 20000, 65536, 300000};
    size_t budget = bytes / 2 < (64u << 20) ? bytes / 2 : (64u << 20), used = 0;
    static void *keep[4096];
    memset(keep, 0, sizeof(keep));   /* its own first touches are not the reserve's */
    long f0 = minor_faults();
    unsigned n = 0;
    for (unsigned i = 0; n < 4096; i++) {
        size_t s = sizes[i % (sizeof(sizes) / sizeof(sizes[0]))];
        if (used + s > budget)
            break;
        char *p = dpm_malloc(s);
        if (p == NULL)
            return 4;
        memset(p, 0x5a, s);
        keep[n++] = p;
        used += s;
    }
    long faults = minor_faults() - f0;
    size_t on_size = 0;
    unsigned long want_kib = (flags & DPM_RESERVE_NO_HUGEPAGES) ? 4 : (1ul << lg) >> 10;
    for (unsigned i = 0; i < n; i++)
        if (page_kib(keep[i]) == want_kib)
            on_size += sizes[i % (sizeof(sizes) / sizeof(sizes[0]))];
    printf("%ld %zu %zu %ld %u\n", took, on_size, used, faults, n);
    for (unsigned i = 0; i < n; i++)
        dpm_free(keep[i]);
    return 0;
}

static void reserve_in_child(size_t bytes, unsigned flags, unsigned lg, long want_took)
{
    char cmd[160];
    snprintf(cmd, sizeof(cmd), "/proc/%d/exe reserve-child %zu %u %u", (int)getpid(), bytes, flags, lg);
    FILE *f = popen(cmd, "r");
    long took = -1, faults = -1;
    size_t on_size = 0, all = 0;
    unsigned n = 0;
    if (f == NULL || fscanf(f, "%ld %zu %zu %ld %u", &took, &on_size, &all, &faults, &n) != 5)
        took = -1;
    int st = f != NULL ? pclose(f) : -1;
    EXPECT(st == 0 && took >= 0, "child for a %zu-byte reserve (flags %u): status %d", bytes, flags, st);
    unsigned long kib = (flags & DPM_RESERVE_NO_HUGEPAGES) ? 4 : (1ul << lg) >> 10;
    printf("  reserve of %zu MiB (flags %u): took %ld pool pages of %lu kB; %u blocks, %zu of %zu bytes on %lu kB "
           "pages; %ld faults\n",
           bytes >> 20, flags, took, (1ul << lg) >> 10, n, on_size, all, kib, faults);
    EXPECT(took == want_took, "reserve took %ld pool pages, want %ld", took, want_took);
    EXPECT(on_size >= all / 10 * 9, "%zu of %zu bytes on %lu kB pages", on_size, all, kib);
    EXPECT(faults == 0, "%ld page faults inside the reserve", faults);
    EXPECT_GE_U(n, 100);
}

TEST(reserve_on_2m_pages)
{
    if (free_huge(21) < 8) {
        printf("  fewer than 8 free 2 MiB huge pages: 2 MiB reserve not tested\n");
        return;
    }
    checked++;
    reserve_in_child(16u << 20, 0, 21, 8);
}

TEST(reserve_without_hugepages_takes_none_from_the_pool)
{
    if (free_huge(21) < 8) {
        printf("  fewer than 8 free 2 MiB huge pages: DPM_RESERVE_NO_HUGEPAGES not tested against a pool\n");
        return;
    }
    checked++;
    reserve_in_child(16u << 20, DPM_RESERVE_NO_HUGEPAGES, 21, 0);
}

TEST(reserve_on_a_1g_page)
{
    if (free_huge(30) < 1) {
        printf("  no free 1 GiB huge page: 1 GiB reserve not tested\n");
        return;
    }
    checked++;
    reserve_in_child(1u << 30, 0, 30, 1);
}

int main(int argc, char **argv)
{
    if (argc > 2 && strcmp(argv[1], "segments") == 0)
        return segments_main((unsigned)atoi(argv[2]));
    if (argc > 4 && strcmp(argv[1], "reserve-child") == 0)
        return reserve_child_main(strtoull(argv[2], NULL, 10), (unsigned)atoi(argv[3]), (unsigned)atoi(argv[4]));
    if (argc > 1 && strcmp(argv[1], "reserve") == 0) {
        RUN(reserve_on_2m_pages);
        RUN(reserve_without_hugepages_takes_none_from_the_pool);
        RUN(reserve_on_a_1g_page);
        int rc = test_done();
        return rc == 0 && checked == 0 ? 77 : rc;
    }
    fprintf(stderr, "usage: %s segments <lg> | reserve\n", argv[0]);
    return 2;
}
