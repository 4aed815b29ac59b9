/*
 * oom_rlimit.c - out of memory is NULL + ENOMEM, never a crash, and the
 * allocator recovers.
 *
 * In a child process RLIMIT_AS is set to the current address-space size
 * plus 384 MiB; the child then allocates until the allocator says no:
 * first 1 MiB blocks, then 256-byte blocks, then single pages. Every
 * failure must be NULL with errno ENOMEM (posix_memalign: return ENOMEM
 * and errno ENOMEM),
 * including calloc, realloc, aligned_alloc, memalign, valloc. Then it frees
 * everything and must be able to allocate 64 MiB and many small blocks
 * again. The same is done once through the libc names and once through the
 * calls that a threaded program makes (a second thread allocating).
 */
#include "override.h"

#include <pthread.h>
#include <sys/resource.h>

#define LIMIT_HEADROOM ((size_t)384 << 20)

static size_t current_vm_size(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t kb = 0;
    if (!f)
        return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %zu kB", &kb) == 1)
            break;
    fclose(f);
    return kb * 1024;
}

/* Blocks are chained through their first word, so holding them needs no
 * memory of its own. */
struct chain {
    void *head;
    size_t count;
};

static void chain_push(struct chain *c, void *p)
{
    memcpy(p, &c->head, sizeof c->head);
    c->head = p;
    c->count++;
}

static void chain_free(struct chain *c)
{
    while (c->head) {
        void *next;
        memcpy(&next, c->head, sizeof next);
        free(c->head);
        c->head = next;
    }
    c->count = 0;
}

/* Allocate blocks of size n until NULL (or cap); the failure must be
 * ENOMEM. Returns how many were allocated. */
static size_t fill_until_null(struct chain *c, size_t n, size_t cap)
{
    size_t got = 0;
    for (; got < cap; got++) {
        errno = 0;
        void *p = malloc(n);
        if (!p) {
            EXPECT(errno == ENOMEM, "malloc(%zu) failed with errno %d (%s), "
                   "want ENOMEM", n, errno, strerror(errno));
            return got;
        }
        /* touch one byte per page so the memory is really there */
        for (size_t i = 0; i < n; i += 4096)
            ((volatile char *)p)[i] = 1;
        chain_push(c, p);
    }
    TEST_FAIL("malloc(%zu) never failed after %zu blocks under RLIMIT_AS", n,
              cap);
    return got;
}

static void expect_every_call_enomem(void)
{
    void *p;
    size_t big = (size_t)64 << 20;
    errno = 0;
    p = calloc(1, big);
    EXPECT(p == NULL && errno == ENOMEM, "calloc(1, 64M) = %p errno %d", p,
           errno);
    free(p);
    errno = 0;
    p = aligned_alloc(4096, big);
    EXPECT(p == NULL && errno == ENOMEM, "aligned_alloc(4096, 64M) = %p errno %d",
           p, errno);
    free(p);
    errno = 0;
    p = memalign((size_t)1 << 20, big);
    EXPECT(p == NULL && errno == ENOMEM, "memalign(1M, 64M) = %p errno %d", p,
           errno);
    free(p);
    errno = 0;
    p = valloc(big);
    EXPECT(p == NULL && errno == ENOMEM, "valloc(64M) = %p errno %d", p, errno);
    free(p);
    void *q = (void *)&q;
    errno = 0;
    int rc = posix_memalign(&q, 64, big);
    EXPECT(rc == ENOMEM, "posix_memalign(64M) = %d", rc);
    /* errno too, as malloc's failure sets it (glibc's does the same) */
    EXPECT(errno == ENOMEM, "posix_memalign(64M) failed with errno %d, want ENOMEM", errno);
    EXPECT(q == (void *)&q, "posix_memalign changed *memptr on ENOMEM");
    /* realloc growing a live block fails and keeps it */
    unsigned char *s = malloc(32);
    if (s) {
        memset(s, 0x42, 32);
        errno = 0;
        void *r = realloc(test_launder(s), big);
        EXPECT(r == NULL && errno == ENOMEM, "realloc(s, 64M) = %p errno %d", r,
               errno);
        if (r)
            s = r;
        else
            EXPECT(s[0] == 0x42 && s[31] == 0x42, "failed realloc changed block");
        free(s);
    }
}

#ifndef TEST_PRELOAD
#include <dpmalloc.h>
/* The native calls fail the same way (static build: dpm_ is linked in). */
static void expect_native_enomem(void)
{
    size_t big = (size_t)64 << 20;
    void *p;
    errno = 0;
    p = dpm_malloc(big);
    EXPECT(p == NULL && errno == ENOMEM, "dpm_malloc(64M) = %p errno %d", p,
           errno);
    dpm_free(p);
    errno = 0;
    p = dpm_malloc_aligned_at(big, 4096, 4);
    EXPECT(p == NULL && errno == ENOMEM,
           "dpm_malloc_aligned_at(64M, 4096, 4) = %p errno %d", p, errno);
    dpm_free(p);
    errno = 0;
    p = dpm_zalloc_aligned(big, (size_t)1 << 21);
    EXPECT(p == NULL && errno == ENOMEM,
           "dpm_zalloc_aligned(64M, 2M) = %p errno %d", p, errno);
    dpm_free(p);
    errno = 0;
    p = dpm_calloc(big, 1);
    EXPECT(p == NULL && errno == ENOMEM, "dpm_calloc(64M, 1) = %p errno %d", p,
           errno);
    dpm_free(p);
}
#else
static void expect_native_enomem(void) {}
#endif

static int oom_child(void *arg)
{
    (void)arg;
    free(malloc(100)); /* initialise the allocator before measuring */
    size_t vm = current_vm_size();
    if (!vm) {
        TEST_FAIL("cannot read VmSize");
        return 1;
    }
    struct rlimit rl = {vm + LIMIT_HEADROOM, vm + LIMIT_HEADROOM};
    if (setrlimit(RLIMIT_AS, &rl) != 0) {
        TEST_FAIL("setrlimit: %s", strerror(errno));
        return 1;
    }
    struct chain big = {0, 0}, small = {0, 0}, pages = {0, 0};
    size_t nbig = fill_until_null(&big, (size_t)1 << 20, 4096);
    EXPECT(nbig >= 64, "only %zu MiB allocated under a limit of +384 MiB", nbig);
    size_t nsmall = fill_until_null(&small, 256, (size_t)8 << 20);
    size_t npages = fill_until_null(&pages, 4096, (size_t)1 << 20);
    fprintf(stderr, "oom: %zu x 1MiB, %zu x 256B, %zu x 4KiB before ENOMEM\n",
            nbig, nsmall, npages);
    expect_every_call_enomem();
    expect_native_enomem();
    chain_free(&big);
    chain_free(&small);
    chain_free(&pages);
    /* recovered: blocks of several sizes, up to 64 MiB, fit again in the
     * memory just freed (cached memory must be reusable or released when
     * the OS says no) */
    static const size_t again_sizes[] = {(size_t)1 << 20, (size_t)8 << 20,
                                         (size_t)64 << 20};
    for (size_t i = 0; i < sizeof again_sizes / sizeof again_sizes[0]; i++) {
        size_t n = again_sizes[i];
        errno = 0;
        void *p = malloc(n);
        EXPECT(p != NULL, "malloc(%zu MiB) after freeing everything: NULL "
               "errno %d", n >> 20, errno);
        if (p)
            memset(p, 1, n);
        free(p);
    }
    struct chain again = {0, 0};
    for (int i = 0; i < 100000; i++) {
        void *q = malloc(200);
        if (!q) {
            TEST_FAIL("malloc(200) #%d after recovery = NULL errno %d", i, errno);
            break;
        }
        chain_push(&again, q);
    }
    chain_free(&again);
    return test_failures;
}

static void *thread_oom(void *arg)
{
    *(int *)arg = oom_child(NULL);
    return NULL;
}

/* The same, with the allocations made by a second thread. */
static int oom_child_threaded(void *arg)
{
    (void)arg;
    pthread_t t;
    int rc = -1;
    if (pthread_create(&t, NULL, thread_oom, &rc) != 0)
        return 99;
    pthread_join(t, NULL);
    return rc;
}

static void run_oom(int (*fn)(void *), const char *what)
{
    struct test_child c;
    char desc[128];
    if (test_run_child(fn, NULL, &c, 120) != 0) {
        TEST_FAIL("fork failed");
        return;
    }
    if (!WIFEXITED(c.status) || WEXITSTATUS(c.status) != 0)
        TEST_FAIL("%s: child %s; its stderr:\n%s", what,
                  test_describe_status(c.status, desc, sizeof desc), c.err);
    else
        fprintf(stderr, "%s", c.err);
}

TEST(override_in_effect) { test_expect_override(); }
TEST(oom_main_thread) { run_oom(oom_child, "oom in main thread"); }
TEST(oom_second_thread) { run_oom(oom_child_threaded, "oom in second thread"); }

int main(void)
{
    RUN(override_in_effect);
    RUN(oom_main_thread);
    RUN(oom_second_thread);
    return test_done();
}
