/*
 * phased_offsets.c - aligned-at-offset blocks at many distinct offsets
 * come from phased slabs however many offsets are in use (native API).
 * 255 offsets x 16 blocks of 64 bytes with alignment 4096: every block
 * satisfies (p + off) % 4096 == 0, none is served as a large block (a
 * page run per block: what a fixed table of phased bins fell back to past
 * ~128 offsets), and the resident set stays within 1.5x of the ideal
 * (one 4 KiB slot per block: blocks of one offset are 4 KiB apart).
 * Freeing them all gives the slabs back: idle phased bins pin no pages.
 */
#include "test.h"

#include <dpmalloc.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define NOFF 255
#define PER 16
#define ALIGN 4096

static size_t resident_bytes(void)
{
    long pages = 0, res = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL || fscanf(f, "%ld %ld", &pages, &res) != 2)
        res = 0;
    if (f != NULL)
        fclose(f);
    return (size_t)res * (size_t)sysconf(_SC_PAGESIZE);
}

static uint64_t arena_u64(unsigned arena, const char *stat)
{
    uint64_t epoch = 1, v = 0;
    size_t len = sizeof(epoch);
    dpm_ctl("epoch", &epoch, &len, &epoch, sizeof(epoch));
    char name[96];
    snprintf(name, sizeof(name), "stats.arenas.%u.%s", arena, stat);
    len = sizeof(v);
    if (dpm_ctl(name, &v, &len, NULL, 0) != 0)
        TEST_FAIL("dpm_ctl(%s) failed", name);
    return v;
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

TEST(many_offsets_from_slabs)
{
    static void *p[NOFF][PER];
    dpm_free(dpm_malloc(16));
    unsigned arena = 0;
    size_t len = sizeof(arena);
    EXPECT(dpm_ctl("thread.arena", &arena, &len, NULL, 0) == 0, "thread.arena");
    uint64_t large_before = arena_u64(arena, "large.nmalloc");
    size_t r0 = resident_bytes();
    for (int k = 0; k < PER; k++)
        for (int o = 0; o < NOFF; o++) {
            size_t off = 16 * (size_t)(o + 1);
            p[o][k] = dpm_malloc_aligned_at(64, ALIGN, off);
            if (p[o][k] == NULL) {
                TEST_FAIL("dpm_malloc_aligned_at(64, %d, %zu) = NULL", ALIGN, off);
                return;
            }
            if (((uintptr_t)p[o][k] + off) % ALIGN != 0)
                TEST_FAIL("dpm_malloc_aligned_at(64, %d, %zu) = %p", ALIGN, off, p[o][k]);
            memset(p[o][k], o, 64);
        }
    size_t grown = resident_bytes() - r0, ideal = (size_t)NOFF * PER * ALIGN;
    uint64_t large = arena_u64(arena, "large.nmalloc") - large_before;
    fprintf(stderr, "%d blocks at %d offsets: resident +%zu KiB (ideal %zu KiB), %llu large blocks\n", NOFF * PER,
            NOFF, grown >> 10, ideal >> 10, (unsigned long long)large);
    EXPECT(large == 0, "%llu of %d blocks were served as page runs", (unsigned long long)large, NOFF * PER);
    EXPECT(grown <= ideal + ideal / 2, "resident set grew by %zu KiB for an ideal of %zu KiB", grown >> 10,
           ideal >> 10);
    for (int o = 0; o < NOFF; o++)
        for (int k = 0; k < PER; k++) {
            const unsigned char *b = p[o][k];
            if (b[0] != (unsigned char)o || b[63] != (unsigned char)o)
                TEST_FAIL("block %d/%d lost its contents", o, k);
        }
    size_t small_live = arena_size(arena, "small.allocated");
    for (int o = 0; o < NOFF; o++)
        for (int k = 0; k < PER; k++)
            dpm_free(p[o][k]);
    EXPECT(arena_size(arena, "small.allocated") < small_live, "small.allocated did not drop");
    size_t active = arena_size(arena, "pactive");
    EXPECT(active < 256, "%zu pages still active after freeing every phased block", active);
}

int main(void)
{
    RUN(many_offsets_from_slabs);
    return test_done();
}
