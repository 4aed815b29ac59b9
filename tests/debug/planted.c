/*
 * planted.c - a program with one planted heap bug, for the Valgrind and
 * ASan tests (tests/debug/run_valgrind.sh, tests/debug/asan_reports.c):
 *   planted <api> <bug>
 * api: dpm (the dpm_ API; built with PLANTED_DPM_API) or libc (malloc and
 * free, which must be dpmalloc's: linked or preloaded). bug:
 *   uaf        read a freed 24-byte block that sits in the thread cache
 *   overflow   write 1 byte past the requested size of a 24-byte block
 *   overflow100  the same past a 100-byte block
 *   leak       lose the only pointer to a 100-byte block
 *   leak_large lose the only pointer to a 200000-byte block (memcheck:
 *              "still reachable", see docs/debugging.md)
 *   realloc    grow a block by realloc (it moves), then write 1 byte past
 *              the new size
 *   realloc_in_place  shrink a 40-byte block to 30 (it stays), write at 30
 *   slack_undefined / slack_past_undefined  a block with slack (the large
 *              cache's pages of the block that ended a chain of growth)
 *              whose bytes 8..11 were never written grows into its slack
 *              (200000 bytes) or past it (4 MiB), then the program
 *              branches on byte 9: memcheck must report it uninitialised
 *   rte_uaf    (dpm only) read a freed 24-byte dpm_rte_malloc block
 *   rte_overflow  (dpm only) write 1 byte past dpm_rte_malloc(24)
 *   socket_overflow  (dpm only) write 1 byte past dpm_malloc_socket(24)
 *   none       use blocks correctly (no report expected); prints the
 *              usable size of a 24-byte block, which tells whose malloc ran
 *              (dpmalloc: 32, memcheck's own: 24)
 * Prints "planted: done" at the end, so a tool that does not stop at the
 * bug still shows the program ran to the end.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef PLANTED_DPM_API
#include <dpmalloc.h>
#include <dpmalloc/rte_compat.h>
#else
#define dpm_malloc malloc
#define dpm_free free
#define dpm_realloc realloc
#define dpm_calloc calloc
#define dpm_usable_size malloc_usable_size
#endif

static int use_dpm;

static void *xmalloc(size_t n) { return use_dpm ? dpm_malloc(n) : malloc(n); }
static void xfree(void *p)
{
    if (use_dpm)
        dpm_free(p);
    else
        free(p);
}
static void *xrealloc(void *p, size_t n) { return use_dpm ? dpm_realloc(p, n) : realloc(p, n); }
static size_t xusable(void *p) { return use_dpm ? dpm_usable_size(p) : malloc_usable_size(p); }

/* Keeps the compiler from proving the accesses out of bounds or dead. */
static char *volatile sink;

__attribute__((noinline)) static void leak_one(size_t n)
{
    char *p = xmalloc(n);
    memset(p, 1, n);
    sink = p;
    sink = NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: planted dpm|libc uaf|overflow|overflow100|leak|leak_large|realloc|realloc_in_place|slack_undefined|slack_past_undefined|none\n");
        return 2;
    }
    use_dpm = strcmp(argv[1], "dpm") == 0;
    const char *bug = argv[2];
    /* a few live blocks first, so the planted one is not the first object
     * of its slab (see docs/debugging.md, leak check) */
    char *keep[4];
    for (int i = 0; i < 4; i++) {
        keep[i] = xmalloc(i < 2 ? 24 : 100);
        memset(keep[i], 0, i < 2 ? 24 : 100);
    }
    if (strcmp(bug, "uaf") == 0) {
        char *p = xmalloc(24);
        memset(p, 7, 24);
        xfree(p);   /* now in the thread cache */
        sink = p;
        printf("read after free: %d\n", sink[3]);
    } else if (strcmp(bug, "overflow") == 0 || strcmp(bug, "overflow100") == 0) {
        size_t n = bug[8] == '1' ? 100 : 24;
        char *p = xmalloc(n);
        memset(p, 0, n);
        sink = p;
        sink[n] = 1;
        xfree(p);
    } else if (strcmp(bug, "leak") == 0) {
        leak_one(100);
    } else if (strcmp(bug, "leak_large") == 0) {
        leak_one(200000);
    } else if (strcmp(bug, "realloc") == 0) {
        char *p = xmalloc(24);
        memset(p, 0, 24);
        p = xrealloc(p, 40);
        memset(p, 0, 40);
        sink = p;
        sink[40] = 1;
        xfree(p);
    } else if (strcmp(bug, "realloc_in_place") == 0) {
        char *p = xmalloc(40);
        memset(p, 0, 40);
        char *q = xrealloc(p, 30);
        if (q != p)
            return 3;
        sink = q;
        sink[30] = 1;
        xfree(q);
    } else if (strcmp(bug, "slack_undefined") == 0 || strcmp(bug, "slack_past_undefined") == 0) {
        char *p = xmalloc(100000);   /* a chain of growth: its last block keeps slack */
        memset(p, 1, 100000);
        p = xrealloc(p, 400000);
        p = xrealloc(p, 1600000);
        memset(p, 2, 1600000);
        xfree(p);
        p = xmalloc(100000);   /* that block, with slack */
        memset(p, 3, 8);
        memset(p + 12, 3, 100000 - 12);
        p = xrealloc(p, strcmp(bug, "slack_undefined") == 0 ? 200000 : (size_t)4 << 20);
        sink = p;
        if (sink[9] == 0x42)
            printf("byte 9 is 0x42\n");
        xfree(p);
#ifdef PLANTED_DPM_API
    } else if (strcmp(bug, "rte_uaf") == 0) {
        char *p = dpm_rte_malloc(NULL, 24, 0);
        memset(p, 7, 24);
        dpm_rte_free(p);
        sink = p;
        printf("read after free: %d\n", sink[3]);
    } else if (strcmp(bug, "rte_overflow") == 0 || strcmp(bug, "socket_overflow") == 0) {
        char *p = bug[0] == 'r' ? dpm_rte_malloc(NULL, 24, 0) : dpm_malloc_socket(24, 0, DPM_SOCKET_ID_ANY);
        memset(p, 0, 24);
        sink = p;
        sink[24] = 1;
        if (bug[0] == 'r')
            dpm_rte_free(p);
        else
            dpm_free(p);
#endif
    } else if (strcmp(bug, "none") == 0) {
        char *p = xmalloc(24);
        memset(p, 0, 24);
        size_t u = xusable(p);   /* the whole usable size may be used */
        printf("usable 24 -> %zu\n", u);
        memset(p, 3, u);
        p = xrealloc(p, 20);   /* in place */
        p = xrealloc(p, 3000); /* moves */
        memset(p + 20, 1, 2980);
        p = xrealloc(p, 100000);
        memset(p + 3000, 2, 97000);
        xfree(p);
        char *q = use_dpm ? dpm_calloc(10, 10) : calloc(10, 10);
        for (int i = 0; i < 100; i++)
            if (q[i] != 0)
                return 1;
        xfree(q);
#ifdef PLANTED_DPM_API
        if (use_dpm) {
            /* the rte_malloc layer and the socket calls, with blocks too
             * small to hold the free key inside the request */
            size_t sz;
            char *r = dpm_rte_malloc(NULL, 10, 0);
            memset(r, 1, 10);
            if (dpm_rte_malloc_validate(r, &sz) != 0 || sz < 10)
                return 1;
            r = dpm_rte_realloc(r, 8, 0);     /* in place */
            r = dpm_rte_realloc(r, 500, 0);   /* moves */
            memset(r + 8, 2, 492);
            dpm_rte_free(r);
            char *z = dpm_rte_zmalloc(NULL, 40, 0);
            if (z[39] != 0)
                return 1;
            dpm_rte_free(z);
            char *m = dpm_malloc_socket(10, 0, DPM_SOCKET_ID_ANY);
            memset(m, 1, 10);
            m = dpm_realloc_socket(m, 6, 0, DPM_SOCKET_ID_ANY);     /* in place */
            m = dpm_realloc_socket(m, 3000, 0, DPM_SOCKET_ID_ANY);  /* moves */
            memset(m + 6, 1, 2994);
            dpm_free(m);
            m = dpm_calloc_socket(3, 10, 0, DPM_SOCKET_ID_ANY);
            if (m[29] != 0)
                return 1;
            dpm_realloc_socket(m, 0, 0, DPM_SOCKET_ID_ANY);
        }
#endif
    } else {
        fprintf(stderr, "planted: unknown bug %s\n", bug);
        return 2;
    }
    for (int i = 0; i < 4; i++)
        xfree(keep[i]);
    printf("planted: done\n");
    return 0;
}
