/*
 * r12_hugepages_fork_child.c - with hugepages:true (or 1g) the heap's
 * segments are MAP_PRIVATE hugetlb mappings. After fork, the first write
 * of either process to such a page copies it, and the copy must come from
 * the system's huge page pool: only the parent holds reservations. When
 * the pool has no free page left the kernel answers the child's write
 * with SIGBUS (review r12 found a child killed so on its first free);
 * docs/config.md says so under `hugepages`: keep as many free pages in
 * the pool as the heap uses, for fork children. This test checks the
 * documented promise: with that many free, a fork child frees every
 * block of the parent's, allocates and writes new ones, and exits 0.
 *
 *   test_r12_hugepages_fork_child <lg>   lg 21 under DPMALLOC_CONF=hugepages:true,
 *                                         lg 30 under hugepages:1g
 *
 * Exit 77 (skipped) when the pool cannot hold the heap twice over.
 */
#include <dpmalloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAXBLOCKS 1024
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
    /* 8 MiB of blocks (1 GiB pages: a few blocks take one page) */
    size_t n = lg >= 30 ? 64 : (8u << 20) / BLOCK;
    for (size_t i = 0; i < n; i++) {
        blocks[i] = dpm_malloc(BLOCK);
        if (blocks[i] == NULL)
            return 2;
        memset(blocks[i], 1, BLOCK);
    }
    long left = free_huge(lg);
    if (left == before) {
        printf("the heap took no huge pages (hugepages option not set?): skipped\n");
        return 77;
    }
    if (left < before - left) {
        printf("the heap took %ld huge pages, %ld left for the child's copies: skipped\n", before - left, left);
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
