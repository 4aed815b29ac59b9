/*
 * bad_free.c - invalid and double frees abort with a clear message.
 *
 * Each case runs in a forked child whose stderr is captured through a pipe.
 * The child must die by SIGABRT, and stderr must say "dpmalloc", name the
 * call (free / realloc), say "invalid pointer" or "double free", and print
 * the offending pointer's value (0x...). Cases:
 *  - free and realloc of pointers dpmalloc never returned: a stack address,
 *    a global, a page from a private mmap;
 *  - interior pointers: p+16 of a small block, p+4096 of a 1 MiB block;
 *  - double free of a small block, detected at the latest when the object
 *    goes back to its slab: the child then frees 10000 other objects of the
 *    same size to force the thread cache to flush; the same with the thread
 *    that double-freed exiting instead; a large block; and a block freed
 *    once by another thread and again by the owner;
 *  - double frees of blocks that sit in a thread cache, caught at the
 *    second free with no churn after it: free(p), free(q), 40 more frees,
 *    free(p) for small and cached large sizes (the message must say
 *    "double free of", the cache check's words); p freed into another live
 *    thread's cache and then by main; realloc of a cached block;
 *  - (dpm_ API) typed blocks, which a free keeps in a CPU's stash of typed
 *    blocks while their slab counts them taken: a second free, also after
 *    other typed traffic or after another thread's free, a realloc of a
 *    stashed block, a free of p+16.
 * Built for the libc names (static and preload) and for the dpm_ API
 * (DEATH_DPM_API, dpmalloc_plain, also in the sanitizer builds).
 */
#include "test.h"

#include <pthread.h>
#include <sys/mman.h>

#ifdef DEATH_DPM_API
#include <dpmalloc.h>
#define D_MALLOC(n) dpm_malloc(n)
#define D_FREE(p) dpm_free(p)
#define D_REALLOC(p, n) dpm_realloc(p, n)
#else
#include "override.h"
#define D_MALLOC(n) malloc(n)
#define D_FREE(p) free(p)
#define D_REALLOC(p, n) realloc(p, n)
#endif

/* Hide where a pointer came from, so the compiler neither warns about
 * freeing a non-heap object nor optimises the call away. */
static void *launder(void *p)
{
    __asm__ volatile("" : "+r"(p));
    return p;
}

/* What the child reports to the parent: the pointer it passed. Written to
 * a shared anonymous page before the bad call. */
static volatile uintptr_t *shared_ptr;

static long global_object[64];

enum how { VIA_FREE, VIA_REALLOC };

static void bad_call(void *p, enum how how)
{
    *shared_ptr = (uintptr_t)p;
    if (how == VIA_FREE) {
        D_FREE(launder(p));
    } else {
        void *volatile q = D_REALLOC(launder(p), 100);
        (void)q; /* not reached if dpmalloc aborts */
    }
}

/* ---- the cases; each returns only if dpmalloc did not abort ---- */
static int case_stack(void *how)
{
    long local[32];
    memset(local, 1, sizeof local);
    bad_call(&local[4], (enum how)(intptr_t)how);
    return 0;
}

static int case_global(void *how)
{
    bad_call(&global_object[2], (enum how)(intptr_t)how);
    return 0;
}

static int case_mmap_page(void *how)
{
    void *m = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return 3;
    memset(m, 0, 1 << 16);
    bad_call((char *)m + 4096, (enum how)(intptr_t)how);
    return 0;
}

static int case_interior_small(void *how)
{
    char *p = D_MALLOC(64);
    if (!p)
        return 3;
    bad_call(p + 16, (enum how)(intptr_t)how);
    return 0;
}

static int case_interior_large(void *how)
{
    char *p = D_MALLOC((size_t)1 << 20);
    if (!p)
        return 3;
    memset(p, 0, (size_t)1 << 20);
    bad_call(p + 4096, (enum how)(intptr_t)how);
    return 0;
}

/* A block with slack (the large cache keeps the pages of the block that
 * ended a chain of growth for the next chain, tcache_large.c) grown from
 * an interior pointer: the growth into the thread's own slack is tried
 * before the general path's checks, and must not take the pointer. */
static int case_interior_slack_growth(void *arg)
{
    (void)arg;
    char *p = D_MALLOC((size_t)1 << 20);
    if (!p)
        return 3;
    p = D_REALLOC(p, (size_t)2 << 20);
    p = D_REALLOC(p, (size_t)4 << 20);
    if (!p)
        return 3;
    D_FREE(p);
    char *q = D_MALLOC((size_t)1 << 20);   /* that block, with 3 MiB of slack */
    if (!q)
        return 3;
    memset(q, 0, (size_t)1 << 20);
    /* in the last page of its pages, which the page map knows */
    char *inner = q + ((size_t)4 << 20) - 4096;
    *shared_ptr = (uintptr_t)inner;
    void *volatile r = D_REALLOC(launder(inner), (size_t)4 << 20);
    (void)r;
    return 0;
}

/* Free 10000 other objects of this size so any thread cache flushes. */
static void flush_by_churn(size_t size)
{
    enum { N = 10000 };
    void **v = D_MALLOC(N * sizeof(void *));
    if (!v)
        return;
    for (int i = 0; i < N; i++)
        v[i] = D_MALLOC(size);
    for (int i = 0; i < N; i++)
        D_FREE(v[i]);
    D_FREE(v);
}

static int case_double_free_small(void *arg)
{
    (void)arg;
    void *p = D_MALLOC(48);
    if (!p)
        return 3;
    void *again = launder(p);
    *shared_ptr = (uintptr_t)p;
    D_FREE(p);
    D_FREE(again);
    flush_by_churn(48);
    return 0;
}

static int case_double_free_large(void *arg)
{
    (void)arg;
    void *p = D_MALLOC((size_t)2 << 20);
    if (!p)
        return 3;
    void *again = launder(p);
    *shared_ptr = (uintptr_t)p;
    D_FREE(p);
    D_FREE(again);
    flush_by_churn((size_t)2 << 20 >> 4); /* and churn a size class */
    for (int i = 0; i < 64; i++)
        D_FREE(D_MALLOC((size_t)2 << 20));
    return 0;
}

static void *double_free_then_exit(void *arg)
{
    (void)arg;
    void *p = D_MALLOC(32);
    if (p) {
        void *again = launder(p);
        *shared_ptr = (uintptr_t)p;
        D_FREE(p);
        D_FREE(again);
    }
    return NULL; /* thread exit flushes its cache */
}

static int case_double_free_thread_exit(void *arg)
{
    (void)arg;
    pthread_t t;
    if (pthread_create(&t, NULL, double_free_then_exit, NULL) != 0)
        return 3;
    pthread_join(t, NULL);
    /* give a deferred (e.g. background) flush a chance, then allocate */
    usleep(100000);
    for (int i = 0; i < 1000; i++)
        D_FREE(D_MALLOC(32));
    return 0;
}

static void *free_it(void *p)
{
    D_FREE(p);
    return NULL;
}

static int case_double_free_remote(void *arg)
{
    (void)arg;
    void *p = D_MALLOC(64);
    if (!p)
        return 3;
    void *again = launder(p);
    *shared_ptr = (uintptr_t)p;
    pthread_t t;
    if (pthread_create(&t, NULL, free_it, p) != 0)
        return 3;
    pthread_join(t, NULL);
    D_FREE(again);
    flush_by_churn(64);
    return 0;
}

/* Double frees of blocks that sit in a thread cache are caught at the
 * second free itself: no churn follows, so a missed one exits 0. */
static int case_cached_interleaved(void *arg)
{
    size_t size = (size_t)(uintptr_t)arg;
    void *p = D_MALLOC(size), *q = D_MALLOC(size);
    void *others[40];
    /* few enough that the bin does not overflow and send p home */
    int nothers = size <= 256 ? 40 : 2;
    if (!p || !q)
        return 3;
    for (int i = 0; i < nothers; i++)
        others[i] = D_MALLOC(size);
    void *again = launder(p);
    *shared_ptr = (uintptr_t)p;
    D_FREE(p);
    D_FREE(q);
    for (int i = 0; i < nothers; i++)
        D_FREE(others[i]);
    D_FREE(again);
    return 0;
}

static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cond = PTHREAD_COND_INITIALIZER;
static int hold_state;   /* 1: the thread freed its block; 2: main is done */

/* Frees p into this thread's cache and stays alive, so that the block
 * sits in another thread's cache when main frees it again. */
static void *free_and_hold(void *p)
{
    D_FREE(D_MALLOC(16));   /* the thread has a cache */
    D_FREE(p);
    pthread_mutex_lock(&hold_lock);
    hold_state = 1;
    pthread_cond_broadcast(&hold_cond);
    while (hold_state != 2)
        pthread_cond_wait(&hold_cond, &hold_lock);
    pthread_mutex_unlock(&hold_lock);
    return NULL;
}

static int case_cached_other_thread(void *arg)
{
    size_t size = (size_t)(uintptr_t)arg;
    void *p = D_MALLOC(size);
    if (!p)
        return 3;
    void *again = launder(p);
    *shared_ptr = (uintptr_t)p;
    pthread_t t;
    if (pthread_create(&t, NULL, free_and_hold, p) != 0)
        return 3;
    pthread_mutex_lock(&hold_lock);
    while (hold_state != 1)
        pthread_cond_wait(&hold_cond, &hold_lock);
    pthread_mutex_unlock(&hold_lock);
    D_FREE(again);
    pthread_mutex_lock(&hold_lock);
    hold_state = 2;
    pthread_cond_broadcast(&hold_cond);
    pthread_mutex_unlock(&hold_lock);
    pthread_join(t, NULL);
    return 0;
}

/* realloc of a block that was freed into the cache */
static int case_cached_realloc(void *arg)
{
    (void)arg;
    void *p = D_MALLOC(80), *q = D_MALLOC(80);
    if (!p || !q)
        return 3;
    void *again = launder(p);
    *shared_ptr = (uintptr_t)p;
    D_FREE(p);
    D_FREE(q);
    void *r = D_REALLOC(again, 4000);
    D_FREE(r);
    return 0;
}

#ifdef DEATH_DPM_API
/* Typed blocks: a free keeps them in the CPU's stash of typed blocks,
 * where their slab still counts them as taken (src/typed_cache.h). */
static int case_typed(void *arg)
{
    int what = (int)(intptr_t)arg;
    void *p = dpm_malloc_typed("death_typed", 200, 0), *q = dpm_malloc_typed("death_typed", 200, 0);
    if (!p || !q)
        return 3;
    void *again = launder(p);
    *shared_ptr = (uintptr_t)p;
    if (what == 0) {   /* free(p); free(q); free(p) */
        dpm_free(p);
        dpm_free(q);
        dpm_free(again);
    } else if (what == 1) {   /* realloc of a stashed block */
        dpm_free(p);
        void *volatile r = dpm_realloc(again, 4000);
        (void)r;
    } else if (what == 2) {   /* interior */
        *shared_ptr = (uintptr_t)((char *)p + 16);
        dpm_free(launder((char *)p + 16));
    } else {   /* the second free after a typed allocation of another class took stash blocks */
        dpm_free(p);
        void *other = dpm_malloc_typed("death_typed", 40, 0);
        dpm_free(other);
        dpm_free(again);
    }
    return 0;
}

static void *free_in_thread(void *p)
{
    dpm_free(p);
    return NULL;
}

/* freed by another thread (another CPU's stash, maybe), then here */
static int case_typed_remote(void *arg)
{
    (void)arg;
    void *p = dpm_malloc_typed("death_typed", 64, 0);
    if (!p)
        return 3;
    *shared_ptr = (uintptr_t)p;
    pthread_t t;
    pthread_create(&t, NULL, free_in_thread, p);
    pthread_join(t, NULL);
    dpm_free(launder(p));
    return 0;
}
#endif

/* ---- the parent side ---- */
static void expect_abort(const char *name, int (*fn)(void *), void *arg,
                         const char *call, const char *what)
{
    struct test_child c;
    char desc[128];
    *shared_ptr = 0;
    if (test_run_child(fn, arg, &c, 30) != 0) {
        TEST_FAIL("%s: fork failed", name);
        return;
    }
    uintptr_t p = *shared_ptr;
    int ok = 1;
    if (!WIFSIGNALED(c.status) || WTERMSIG(c.status) != SIGABRT) {
        TEST_FAIL("%s: child %s, want SIGABRT", name,
                  test_describe_status(c.status, desc, sizeof desc));
        ok = 0;
    }
    if (!strstr(c.err, "dpmalloc")) {
        TEST_FAIL("%s: stderr does not mention dpmalloc", name);
        ok = 0;
    }
    if (!strstr(c.err, call)) {
        TEST_FAIL("%s: stderr does not name the call \"%s\"", name, call);
        ok = 0;
    }
    if (!strstr(c.err, what)) {
        TEST_FAIL("%s: stderr does not say \"%s\"", name, what);
        ok = 0;
    }
    if (!p || !test_text_has_pointer(c.err, p)) {
        TEST_FAIL("%s: stderr does not print the pointer %p", name, (void *)p);
        ok = 0;
    }
    if (!ok)
        fprintf(stderr, "    child stderr: \"%s\"\n", c.err);
}

#define FREE_ARG ((void *)(intptr_t)VIA_FREE)
#define REALLOC_ARG ((void *)(intptr_t)VIA_REALLOC)

#ifndef DEATH_DPM_API
TEST(override_in_effect) { test_expect_override(); }
#endif

TEST(free_foreign_pointers)
{
    expect_abort("free(stack)", case_stack, FREE_ARG, "free", "invalid pointer");
    expect_abort("free(global)", case_global, FREE_ARG, "free",
                 "invalid pointer");
    expect_abort("free(mmap page)", case_mmap_page, FREE_ARG, "free",
                 "invalid pointer");
}

TEST(realloc_foreign_pointers)
{
    expect_abort("realloc(stack)", case_stack, REALLOC_ARG, "realloc",
                 "invalid pointer");
    expect_abort("realloc(global)", case_global, REALLOC_ARG, "realloc",
                 "invalid pointer");
    expect_abort("realloc(mmap page)", case_mmap_page, REALLOC_ARG, "realloc",
                 "invalid pointer");
}

TEST(interior_pointers)
{
    expect_abort("free(small + 16)", case_interior_small, FREE_ARG, "free",
                 "invalid pointer");
    expect_abort("free(large + 4096)", case_interior_large, FREE_ARG, "free",
                 "invalid pointer");
    expect_abort("realloc(small + 16)", case_interior_small, REALLOC_ARG,
                 "realloc", "invalid pointer");
    expect_abort("realloc(large + 4096)", case_interior_large, REALLOC_ARG,
                 "realloc", "invalid pointer");
    expect_abort("realloc(slack block's last page, growing)", case_interior_slack_growth, NULL,
                 "realloc", "invalid pointer");
}

TEST(double_frees)
{
    expect_abort("double free small", case_double_free_small, NULL, "free",
                 "double free");
    expect_abort("double free large", case_double_free_large, NULL, "free",
                 "double free");
    expect_abort("double free + thread exit", case_double_free_thread_exit,
                 NULL, "free", "double free");
    expect_abort("double free remote then local", case_double_free_remote,
                 NULL, "free", "double free");
}

/* Caught at the second free, wherever the block sits in a cache. */
TEST(double_frees_in_thread_caches)
{
    static const size_t sizes[] = {16, 48, 64, 1024, 14336, 20480, 65536};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char name[96];
        void *size = (void *)(uintptr_t)sizes[i];
        snprintf(name, sizeof name, "free(p); free(q) ...; free(p) of %zu B", sizes[i]);
        expect_abort(name, case_cached_interleaved, size, "free", "double free of");
        snprintf(name, sizeof name, "free(p) in another thread's cache, %zu B", sizes[i]);
        /* a large block of another thread's arena goes home instead of
         * into that thread's cache: caught there, in other words */
        expect_abort(name, case_cached_other_thread, size, "free",
                     sizes[i] > 14336 ? "double free" : "double free of");
    }
    expect_abort("realloc of a cached block", case_cached_realloc, NULL, "realloc",
                 "use after free of");
}

#ifdef DEATH_DPM_API
TEST(typed_blocks_in_stashes)
{
    expect_abort("typed: free(p); free(q); free(p)", case_typed, (void *)0, "free", "double free of");
    expect_abort("typed: realloc of a stashed block", case_typed, (void *)1, "realloc", "use after free of");
    expect_abort("typed: free(p + 16)", case_typed, (void *)2, "free", "invalid pointer");
    expect_abort("typed: free(p) after other typed traffic", case_typed, (void *)3, "free", "double free of");
    expect_abort("typed: freed by another thread, then here", case_typed_remote, NULL, "free", "double free");
}
#endif

int main(void)
{
    shared_ptr = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared_ptr == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
#ifndef DEATH_DPM_API
    RUN(override_in_effect);
#endif
    RUN(free_foreign_pointers);
    RUN(realloc_foreign_pointers);
    RUN(interior_pointers);
    RUN(double_frees);
    RUN(double_frees_in_thread_caches);
#ifdef DEATH_DPM_API
    RUN(typed_blocks_in_stashes);
#endif
    return test_done();
}
