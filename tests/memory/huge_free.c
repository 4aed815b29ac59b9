/*
 * huge_free.c - a block of oversize_threshold (32 MiB) or more goes back
 * to the OS at its free, and a realloc that cuts 1 MiB or more gives the
 * cut pages back at once (docs/config.md, oversize_threshold), however
 * big: the purge runs in batches of at most 16 pieces of 64 MiB, and a
 * run longer than one batch is purged batch after batch. A 1200 MiB
 * block, every page touched, leaves at most 64 MiB resident after its
 * free; cut to 50 MiB by realloc, at most 64 + 50 MiB.
 *
 * usage: test_huge_free   (exit 0 pass, 1 fail)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)
#define HUGE_BLOCK (1200 * MiB)

static size_t rss(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL || fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = -1;
    if (f != NULL)
        fclose(f);
    return resident < 0 ? (size_t)-1 : (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

int main(void)
{
    int failures = 0;
    char *p = malloc(HUGE_BLOCK);
    if (p == NULL) {
        printf("skipped: no %zu MiB\n", HUGE_BLOCK / MiB);
        return 0;
    }
    memset(p, 1, HUGE_BLOCK);
    size_t full = rss();
    free(p);
    size_t after = rss();
    printf("free: %zu MiB resident with the block, %zu MiB after its free\n", full / MiB, after / MiB);
    if (full < HUGE_BLOCK || after > 64 * MiB) {
        printf("FAIL: the freed block's pages stayed resident\n");
        failures++;
    }

    p = malloc(HUGE_BLOCK);
    if (p == NULL)
        return 1;
    memset(p, 2, HUGE_BLOCK);
    char *q = realloc(p, 50 * MiB);
    after = rss();
    printf("realloc to 50 MiB: %zu MiB resident\n", after / MiB);
    if (q == NULL || q[50 * MiB - 1] != 2 || after > 114 * MiB) {
        printf("FAIL: the cut pages stayed resident (or the contents changed)\n");
        failures++;
    }
    free(q);
    printf("%s\n", failures ? "FAILED" : "passed");
    return failures != 0;
}
