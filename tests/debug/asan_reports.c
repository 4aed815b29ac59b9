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
 *  - a read of a freed large block.
 * And correct programs are not reported: writing up to dpm_usable_size
 * (which opens the slack: the API lets the program use it), realloc
 * copying a block's bytes, zeroing options.
 */
#include "test.h"

#include <dpmalloc.h>

static char *volatile sink;

struct bug {
    const char *name;
    size_t size;       /* requested */
    ptrdiff_t at;      /* the bad access: p + at */
    int write;
};

static char *planted;   /* the child's p + at, printed for the parent */

static int run_bug(void *arg)
{
    const struct bug *b = arg;
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

TEST(uaf_cached) { expect_report(&(struct bug){"uaf_cached", 24, 3, 0}); }
TEST(overflow_24) { expect_report(&(struct bug){"overflow", 24, 24, 1}); }
TEST(overflow_100) { expect_report(&(struct bug){"overflow", 100, 100, 1}); }
TEST(overflow_realloc_moved) { expect_report(&(struct bug){"realloc_moved", 40, 40, 1}); }
TEST(overflow_realloc_in_place) { expect_report(&(struct bug){"realloc_in_place", 30, 30, 1}); }
TEST(overflow_calloc) { expect_report(&(struct bug){"calloc", 50, 50, 0}); }
TEST(overflow_aligned_at) { expect_report(&(struct bug){"aligned_at", 44, 44, 1}); }
TEST(overflow_large) { expect_report(&(struct bug){"overflow", 100000, 100000, 1}); }
TEST(uaf_large) { expect_report(&(struct bug){"uaf_large", 100000, 5000, 0}); }

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

int main(void)
{
    RUN(uaf_cached);
    RUN(overflow_24);
    RUN(overflow_100);
    RUN(overflow_realloc_moved);
    RUN(overflow_realloc_in_place);
    RUN(overflow_calloc);
    RUN(overflow_aligned_at);
    RUN(overflow_large);
    RUN(uaf_large);
    RUN(usable_size_opens_slack);
    RUN(reuse_after_free_is_clean);
    return test_done();
}
