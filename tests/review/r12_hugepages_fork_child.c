/*
 * r12_hugepages_fork_child.c - with hugepages:true (or 1g) the heap's
 * segments are MAP_PRIVATE hugetlb mappings. After fork, the first write
 * of either process to such a page copies it, and the copy must come from
 * the system's huge page pool; only the parent holds reservations. When
 * the pool has no free page left, the child's first write to its heap
 * (a free that links the block, a malloc that carves a slab, or the
 * program's own store into a block) is answered with SIGBUS: a
 * prefork server or a fork-without-exec worker dies on its first
 * allocation call, where with normal pages it would run.
 *
 *   test_r12_hugepages_fork_child <lg>   lg 21 under DPMALLOC_CONF=hugepages:true,
 *                                         lg 30 under hugepages:1g
 *
 * The parent allocates (and writes) blocks until the pool of 1 << lg pages
 * has at most one free page (or no longer shrinks), then forks; the child frees every block,
 * allocates and writes new ones, and exits 0. Checked: the child exits 0
 * (observed at 3b797d9: killed by SIGBUS). Exit 77 (skipped) without
 * free huge pages of that size.
 */
#include <dpmalloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAXBLOCKS 65536
#define BLOCK 40000

static void *blocks[MAXBLOCKS];

static long free_huge(unsigned lg)
{
    char path[96];
    snprintf(path, sizeof(path), "/sys/kernel/mm/hugepages/hugepages-%lukB/free_hugepages", (1ul << lg) >> 10);
    FILE *f = fopen(path, "r");
    long v = -1;
    if (f != NULL) {
        if (fscanf(f, "%ld", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

int main(int argc, char **argv)
{
    unsigned lg = argc > 1 ? (unsigned)atoi(argv[1]) : 21;
    long before = free_huge(lg);
    if (before <= 0) {
        printf("no free huge pages of 2^%u bytes: skipped\n", lg);
        return 77;
    }
    /* 1 GiB pages: a few blocks already take the one page */
    size_t limit = lg >= 30 ? 64 : MAXBLOCKS;
    size_t n = 0, since_drop = 0;
    long now = before;
    /* until the pool is (nearly) empty, or 64 MiB more took none of it
     * (the segment the pool could not supply came from normal pages) */
    while (n < limit && now > (lg >= 30 ? 0 : 1) && since_drop < (64u << 20) / BLOCK) {
        blocks[n] = dpm_malloc(BLOCK);
        if (blocks[n] == NULL)
            break;
        memset(blocks[n], 1, BLOCK);
        n++;
        since_drop++;
        long f = free_huge(lg);
        if (f < now)
            since_drop = 0;
        now = f;
    }
    long left = free_huge(lg);
    if (left == before) {
        printf("the heap took no huge pages (hugepages option not set?): skipped\n");
        return 77;
    }
    printf("%zu blocks, %ld of %ld free huge pages left\n", n, left, before);
    fflush(stdout);
    pid_t c = fork();
    if (c < 0)
        return 2;
    if (c == 0) {
        for (size_t i = 0; i < n; i++)
            dpm_free(blocks[i]);
        for (size_t i = 0; i < n; i++) {
            blocks[i] = dpm_malloc(1000);
            if (blocks[i] == NULL)
                _exit(3);
            memset(blocks[i], 2, 1000);
        }
        _exit(0);
    }
    int st;
    if (waitpid(c, &st, 0) != c)
        return 2;
    for (size_t i = 0; i < n; i++)
        dpm_free(blocks[i]);
    if (WIFSIGNALED(st)) {
        printf("FAIL: the fork child was killed by signal %d (expected: exit 0)\n", WTERMSIG(st));
        return 1;
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        printf("FAIL: the fork child exited with status %d\n", WEXITSTATUS(st));
        return 1;
    }
    printf("ok\n");
    return 0;
}
