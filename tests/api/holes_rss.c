/*
 * holes_rss.c - freed large blocks are reused before fresh memory is
 * touched (libc level; static link and LD_PRELOAD). 1000 blocks of
 * 200 KiB, every other one freed, then 500 more of the same size: the
 * resident set after the second round may exceed the first round's by a
 * few MiB at most (the holes take the new blocks). Placement that
 * reserved room to grow skipped exactly fitting holes here and grew the
 * resident set by ~29 MiB.
 */
#include "override.h"

#include <stdlib.h>
#include <string.h>

#define NBLOCKS 1000
#define BLOCK ((size_t)200 << 10)
#define MARGIN ((size_t)4 << 20)

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

TEST(override_in_effect) { test_expect_override(); }

TEST(holes_are_reused)
{
    static char *p[NBLOCKS];
    for (int i = 0; i < NBLOCKS; i++) {
        p[i] = malloc(BLOCK);
        if (p[i] == NULL) {
            TEST_FAIL("malloc(%zu) = NULL", BLOCK);
            return;
        }
        memset(p[i], i & 0xff, BLOCK);
    }
    size_t first = resident_bytes();
    for (int i = 0; i < NBLOCKS; i += 2) {
        free(p[i]);
        p[i] = NULL;
    }
    for (int i = 0; i < NBLOCKS; i += 2) {
        p[i] = malloc(BLOCK);
        if (p[i] == NULL) {
            TEST_FAIL("malloc(%zu) = NULL", BLOCK);
            return;
        }
        memset(p[i], i & 0xff, BLOCK);
    }
    size_t second = resident_bytes();
    fprintf(stderr, "resident after round 1: %zu KiB, after round 2: %zu KiB\n", first >> 10,
            second >> 10);
    EXPECT(second <= first + MARGIN, "resident set grew by %zu KiB refilling %d holes of %zu KiB",
           (second - first) >> 10, NBLOCKS / 2, BLOCK >> 10);
    for (int i = 0; i < NBLOCKS; i++)
        free(p[i]);
}

int main(void)
{
    RUN(override_in_effect);
    RUN(holes_are_reused);
    return test_done();
}
