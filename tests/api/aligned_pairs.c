/*
 * aligned_pairs.c - every size/alignment pair of the frag workload
 * (DESIGN.md section 5, bench/single.c) through dpm_malloc_aligned, as
 * the workload asks for them: 5 batches of blocks with no frees. Every
 * block is aligned, holds at least its size and at most one alignment
 * unit more (usable size), overlaps no other block, and keeps what was
 * written into it; the heap invariant checker (debug.check_heap) passes
 * after the sequence and after freeing it all.
 * Placement waste: 64 KiB blocks aligned to 64 KiB take no more address
 * space (stats mapped) and no more pages (pactive) than unaligned 64 KiB
 * blocks, beyond one alignment unit per segment mapped, each in an arena
 * of its own.
 */
#include "test.h"

#include <dpmalloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCHES 5
#if TEST_SANITIZED
#define PER_BATCH 200
#else
#define PER_BATCH 2000
#endif
#define N (BATCHES * PER_BATCH)

struct pair {
    size_t size, align;
};

static const struct pair pairs[] = {
    {64, 4096},   {1024, 4096},   {2048, 2048},   {4096, 4096},
    {4096, 64},   {8192, 8192},   {16384, 16384}, {65536, 65536},
};

struct block {
    uintptr_t p;
    size_t usable;
};

static struct block blocks[N];

static int by_address(const void *a, const void *b)
{
    uintptr_t x = ((const struct block *)a)->p, y = ((const struct block *)b)->p;
    return x < y ? -1 : x > y;
}

static unsigned check_heap(void)
{
    unsigned bad = 1;
    size_t len = sizeof(bad);
    if (dpm_ctl("debug.check_heap", &bad, &len, NULL, 0) != 0)
        TEST_FAIL("dpm_ctl(debug.check_heap) failed");
    return bad;
}

static size_t arena_size(unsigned arena, const char *stat)
{
    uint64_t epoch = 1;
    size_t v = 0, len = sizeof(epoch);
    dpm_ctl("epoch", &epoch, &len, &epoch, sizeof(epoch));
    char name[96];
    snprintf(name, sizeof(name), "stats.arenas.%u.%s", arena, stat);
    len = sizeof(v);
    if (dpm_ctl(name, &v, &len, NULL, 0) != 0)
        TEST_FAIL("dpm_ctl(%s) failed", name);
    return v;
}

static void one_pair(struct pair pa)
{
    for (int i = 0; i < N; i++) {
        void *p = dpm_malloc_aligned(pa.size, pa.align);
        if (p == NULL) {
            TEST_FAIL("dpm_malloc_aligned(%zu, %zu) = NULL at %d", pa.size, pa.align, i);
            return;
        }
        size_t u = dpm_usable_size(p);
        if ((uintptr_t)p % pa.align != 0 || u < pa.size || u > pa.size + pa.align) {
            TEST_FAIL("dpm_malloc_aligned(%zu, %zu) = %p, usable %zu", pa.size, pa.align, p, u);
            return;
        }
        memset(p, i & 0xff, 8);
        memset((char *)p + pa.size - 8, i & 0xff, 8);
        blocks[i] = (struct block){(uintptr_t)p, u};
    }
    EXPECT(check_heap() == 0, "heap invariants broken after %d blocks of %zu/%zu", N, pa.size, pa.align);
    for (int i = 0; i < N; i++) {
        const unsigned char *b = (const unsigned char *)blocks[i].p;
        if (b[0] != (i & 0xff) || b[pa.size - 1] != (i & 0xff)) {
            TEST_FAIL("block %d of %zu/%zu lost its contents", i, pa.size, pa.align);
            break;
        }
    }
    qsort(blocks, N, sizeof(blocks[0]), by_address);
    for (int i = 1; i < N; i++)
        if (blocks[i - 1].p + blocks[i - 1].usable > blocks[i].p) {
            TEST_FAIL("%zu/%zu: blocks at %#lx (+%zu) and %#lx overlap", pa.size, pa.align,
                      (unsigned long)blocks[i - 1].p, blocks[i - 1].usable, (unsigned long)blocks[i].p);
            break;
        }
    for (int i = 0; i < N; i++)
        dpm_free((void *)blocks[i].p);
    EXPECT(check_heap() == 0, "heap invariants broken after freeing the %zu/%zu blocks", pa.size, pa.align);
}

TEST(frag_pairs)
{
    for (size_t k = 0; k < sizeof(pairs) / sizeof(pairs[0]); k++)
        one_pair(pairs[k]);
}

static unsigned new_arena(void)
{
    unsigned a = 0;
    size_t len = sizeof(a);
    if (dpm_ctl("arenas.create", &a, &len, NULL, 0) != 0)
        TEST_FAIL("arenas.create failed");
    return a;
}

/* n blocks of size/align from arena a; returns how many it got. */
static int fill_arena(unsigned a, size_t size, size_t align, void **out, int n)
{
    for (int i = 0; i < n; i++)
        if ((out[i] = dpm_malloc_arena(a, size, align)) == NULL || (uintptr_t)out[i] % align != 0)
            return i;
    return n;
}

TEST(aligned_waste_bound)
{
    enum { SIZE = 65536 };
    const size_t SEGMENT_MIN = (size_t)4 << 20;   /* docs/design.md: segments are 4 MiB multiples */
    static void *plain[N], *aligned[N];
    unsigned x = new_arena(), y = new_arena();
    EXPECT(fill_arena(x, SIZE, 16, plain, N) == N, "unaligned 64 KiB blocks failed");
    EXPECT(fill_arena(y, SIZE, SIZE, aligned, N) == N, "64 KiB/64 KiB blocks failed or misaligned");
    size_t mapped_x = arena_size(x, "mapped"), mapped_y = arena_size(y, "mapped");
    size_t active_x = arena_size(x, "pactive"), active_y = arena_size(y, "pactive");
    size_t segs_y = mapped_y / SEGMENT_MIN;   /* at most this many segments */
    fprintf(stderr, "%d x 64 KiB: mapped %zu KiB, %zu pages active; aligned to 64 KiB: mapped %zu KiB, %zu pages "
            "active, at most %zu segments\n", N, mapped_x >> 10, active_x, mapped_y >> 10, active_y, segs_y);
    EXPECT(active_y == active_x, "aligned blocks hold %zu pages, unaligned ones %zu", active_y, active_x);
    EXPECT(mapped_y <= mapped_x + segs_y * SIZE, "aligned blocks mapped %zu KiB, unaligned ones %zu KiB",
           mapped_y >> 10, mapped_x >> 10);
    EXPECT(check_heap() == 0, "heap invariants broken");
    for (int i = 0; i < N; i++) {
        dpm_free(plain[i]);
        dpm_free(aligned[i]);
    }
    EXPECT(check_heap() == 0, "heap invariants broken after the frees");
}

int main(void)
{
    RUN(frag_pairs);
    RUN(aligned_waste_bound);
    return test_done();
}
