/*
 * asan_reports.c - in an ASan build (-DDPM_SANITIZE=address...), bugs
 * inside dpmalloc's heap are reported: each planted bug runs in a forked
 * child, which must die with ASan's report ("use-after-poison", the
 * access, the faulting address) on stderr:
 *  - a read of a freed 24-byte block that sits in the thread cache;
 *  - a write 1 byte past the requested size of dpm_malloc(24) and of
 *    dpm_malloc(100) (the slack up to the class size is poisoned);
 *  - the same past a block that dpm_realloc moved, and one it resized in
 *    place, past dpm_calloc, dpm_malloc_aligned_at and a large block;
 *  - a read of a freed large block;
 *  - a read of a freed dpm_rte_malloc block, a write past one, and past
 *    dpm_malloc_socket blocks (from another node's arena, and with
 *    numa:true from the thread's own, through its cache);
 *  - with a C++ compiler: a read of a deleted new char[24], a write past
 *    one (planted_cxx, linked with dpmalloc's operators; its path is the
 *    argument).
 * And correct programs are not reported: writing up to dpm_usable_size
 * (which opens the slack: the API lets the program use it), realloc
 * copying a block's bytes, zeroing options.
 */
#include "test.h"

#include <dpmalloc.h>
#include <dpmalloc/rte_compat.h>
#include <unistd.h>

static char *volatile sink;

struct bug {
    const char *name;
    size_t size;       /* requested */
    ptrdiff_t at;      /* the bad access: p + at */
    int write;
    const char *conf;  /* DPMALLOC_CONF of a fresh process for the bug, or NULL */
    const char *cxx;   /* planted_cxx's bug, run in that program (NULL: here) */
};

static const char *self_path;
static const char *planted_cxx;   /* argv[1], if any */

static char *planted;   /* the child's p + at, printed for the parent */

static const struct bug *find_bug(const char *name);

static int run_bug(void *arg)
{
    const struct bug *b = arg;
    if (b->cxx != NULL) {
        execl(planted_cxx, planted_cxx, b->cxx, (char *)NULL);
        return 4;
    }
    if (b->conf != NULL) {   /* a fresh process reads the configuration */
        setenv("DPMALLOC_CONF", b->conf, 1);
        execl(self_path, self_path, "--plant", b->name, (char *)NULL);
        return 4;
    }
    char *keep = dpm_malloc(24);   /* p is not the only block of its slab */
    char *p;
    memset(keep, 0, 24);
    if (strcmp(b->name, "uaf_cached") == 0 || strcmp(b->name, "uaf_large") == 0) {
        p = dpm_malloc(b->size);
        memset(p, 7, b->size);
        dpm_free(p);
    } else if (strcmp(b->name, "realloc_moved") == 0) {
        p = dpm_malloc(24);
        memset(p, 1, 24);
        p = dpm_realloc(p, b->size);   /* 24 -> 40: another class */
    } else if (strcmp(b->name, "realloc_in_place") == 0) {
        p = dpm_malloc(40);
        memset(p, 1, 40);
        char *q = dpm_realloc(p, b->size);   /* 40 -> 30: same block */
        if (q != p)
            return 3;
    } else if (strcmp(b->name, "calloc") == 0) {
        p = dpm_calloc(1, b->size);
    } else if (strcmp(b->name, "aligned_at") == 0) {
        p = dpm_malloc_aligned_at(b->size, 64, 4);
    } else if (strcmp(b->name, "rte_uaf") == 0) {
        p = dpm_rte_malloc(NULL, b->size, 0);
        memset(p, 7, b->size);
        dpm_rte_free(p);
    } else if (strcmp(b->name, "rte_overflow") == 0) {
        p = dpm_rte_malloc(NULL, b->size, 0);
        memset(p, 0, b->size);
    } else if (strncmp(b->name, "socket_overflow", 15) == 0) {
        p = dpm_malloc_socket(b->size, 0, DPM_SOCKET_ID_ANY);
        memset(p, 0, b->size);
    } else {
        p = dpm_malloc(b->size);
        memset(p, 0, b->size);
    }
    planted = p + b->at;
    fprintf(stderr, "planted at %p\n", (void *)planted);
    sink = planted;
    if (b->write)
        *sink = 1;
    else
        fprintf(stderr, "read %d\n", *sink);
    return 0;   /* not reported */
}

static void expect_report(const struct bug *b)
{
    struct test_child c;
    char st[96];
    if (test_run_child(run_bug, (void *)b, &c, 60) != 0) {
        TEST_FAIL("%s: cannot fork", b->name);
        return;
    }
    const char *at = strstr(c.err, "planted at 0x");
    uintptr_t addr = at != NULL ? (uintptr_t)strtoull(at + 13, NULL, 16) : 0;
    const char *access = b->write ? "WRITE of size 1" : "READ of size 1";
    if (WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0)
        TEST_FAIL("%s: not reported (%s); stderr:\n%s", b->name, test_describe_status(c.status, st, sizeof st), c.err);
    else if (strstr(c.err, "ERROR: AddressSanitizer: use-after-poison") == NULL || strstr(c.err, access) == NULL ||
             addr == 0 || !test_text_has_pointer(strstr(c.err, "AddressSanitizer"), addr))
        TEST_FAIL("%s: expected ASan's use-after-poison report, %s at %#lx; %s, stderr:\n%s", b->name, access,
                  (unsigned long)addr, test_describe_status(c.status, st, sizeof st), c.err);
}

TEST(uaf_cached) { expect_report(&(struct bug){"uaf_cached", 24, 3, 0, NULL, NULL}); }
TEST(overflow_24) { expect_report(&(struct bug){"overflow", 24, 24, 1, NULL, NULL}); }
TEST(overflow_100) { expect_report(&(struct bug){"overflow", 100, 100, 1, NULL, NULL}); }
TEST(overflow_realloc_moved) { expect_report(&(struct bug){"realloc_moved", 40, 40, 1, NULL, NULL}); }
TEST(overflow_realloc_in_place) { expect_report(&(struct bug){"realloc_in_place", 30, 30, 1, NULL, NULL}); }
TEST(overflow_calloc) { expect_report(&(struct bug){"calloc", 50, 50, 0, NULL, NULL}); }
TEST(overflow_aligned_at) { expect_report(&(struct bug){"aligned_at", 44, 44, 1, NULL, NULL}); }
TEST(overflow_large) { expect_report(&(struct bug){"overflow", 100000, 100000, 1, NULL, NULL}); }
TEST(uaf_large) { expect_report(&(struct bug){"uaf_large", 100000, 5000, 0, NULL, NULL}); }

static const struct bug more_bugs[] = {
    {"rte_uaf", 24, 3, 0, NULL, NULL},
    {"rte_overflow", 24, 24, 1, NULL, NULL},
    {"socket_overflow", 24, 24, 1, NULL, NULL},
    {"socket_overflow_numa", 24, 24, 1, "numa:true", NULL},
    {"cxx_uaf", 24, 3, 0, NULL, "uaf"},
    {"cxx_overflow", 24, 24, 1, NULL, "overflow"},
};

static const struct bug *find_bug(const char *name)
{
    for (size_t i = 0; i < sizeof more_bugs / sizeof more_bugs[0]; i++)
        if (strcmp(more_bugs[i].name, name) == 0)
            return &more_bugs[i];
    return NULL;
}

TEST(uaf_rte) { expect_report(find_bug("rte_uaf")); }
TEST(overflow_rte) { expect_report(find_bug("rte_overflow")); }
TEST(overflow_socket) { expect_report(find_bug("socket_overflow")); }
TEST(overflow_socket_numa) { expect_report(find_bug("socket_overflow_numa")); }
TEST(uaf_cxx) { expect_report(find_bug("cxx_uaf")); }
TEST(overflow_cxx) { expect_report(find_bug("cxx_overflow")); }

/* Correct uses of the rte_malloc layer and the socket calls, with blocks
 * too small to hold the free key inside the request (the layer's own
 * checks read it). */
TEST(rte_and_socket_clean)
{
    for (size_t n = 1; n <= 40; n += 3) {
        size_t sz;
        char *r = dpm_rte_malloc(NULL, n, 0);
        memset(r, 1, n);
        EXPECT_EQ_U(dpm_rte_malloc_validate(r, &sz), 0);
        r = dpm_rte_realloc(r, n / 2 + 1, 0);
        r = dpm_rte_realloc(r, 3 * n, 0);
        memset(r, 2, 3 * n);
        dpm_rte_free(r);
        char *m = dpm_malloc_socket(n, 0, DPM_SOCKET_ID_ANY);
        memset(m, 1, n);
        m = dpm_realloc_socket(m, n / 2 + 1, 0, DPM_SOCKET_ID_ANY);
        m = dpm_realloc_socket(m, 3 * n, 0, DPM_SOCKET_ID_ANY);
        memset(m, 2, 3 * n);
        dpm_free(m);
    }
}

/* The correct uses next to those bugs stay quiet (the test itself would
 * die with a report otherwise). */
TEST(usable_size_opens_slack)
{
    for (size_t n = 1; n <= 20000; n = n * 3 + 1) {
        char *p = dpm_malloc(n);
        size_t u = dpm_usable_size(p);
        EXPECT_GE_U(u, n);
        memset(p, 1, u);
        p = dpm_realloc(p, u + 1);   /* copies all u bytes */
        EXPECT_EQ_U((unsigned char)p[u - 1], 1);
        dpm_free(p);
    }
}

TEST(reuse_after_free_is_clean)
{
    for (int round = 0; round < 3; round++) {
        char *v[200];
        for (int i = 0; i < 200; i++) {
            size_t n = 1 + (size_t)(i * 37 % 3000);
            v[i] = i % 3 ? dpm_malloc(n) : dpm_calloc(1, n);
            memset(v[i], i, n);
            if (i % 5 == 0)
                v[i] = dpm_realloc(v[i], n / 2 + 1);
        }
        for (int i = 0; i < 200; i++)
            dpm_free(v[i]);
    }
}

int main(int argc, char **argv)
{
    self_path = argv[0];
    if (argc == 3 && strcmp(argv[1], "--plant") == 0) {
        const struct bug *b = find_bug(argv[2]);
        struct bug here = *b;
        here.conf = NULL;
        return run_bug(&here);
    }
    planted_cxx = argc > 1 ? argv[1] : NULL;
    RUN(uaf_cached);
    RUN(overflow_24);
    RUN(overflow_100);
    RUN(overflow_realloc_moved);
    RUN(overflow_realloc_in_place);
    RUN(overflow_calloc);
    RUN(overflow_aligned_at);
    RUN(overflow_large);
    RUN(uaf_large);
    RUN(uaf_rte);
    RUN(overflow_rte);
    RUN(overflow_socket);
    RUN(overflow_socket_numa);
    if (planted_cxx != NULL) {
        RUN(uaf_cxx);
        RUN(overflow_cxx);
    } else {
        printf("no C++ compiler: the C++ operators' cases are not run\n");
    }
    RUN(rte_and_socket_clean);
    RUN(usable_size_opens_slack);
    RUN(reuse_after_free_is_clean);
    return test_done();
}
