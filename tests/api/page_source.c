/*
 * page_source.c - arenas on a page source of the user's
 * (dpm_arena_create_sourced): every block comes from the source's ranges,
 * destroy gives every range back, a source without purge is never purged,
 * callbacks run with no allocator lock held (they allocate and call
 * dpm_ctl on the same arena), and a refusing source gives NULL + ENOMEM.
 */
#include "test.h"

#include <dpmalloc.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
/* The test reads freed blocks on purpose (were the pages kept?); the
 * ASan build poisons freed blocks (src/annotate.h). */
#define PEEK_FREED(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define PEEK_FREED(p, n) ((void)0)
#endif

#define UNIT ((size_t)4 << 20)
#define NUNITS 1024   /* a 4 GiB carve (address space; only touched pages cost) */

/* A carve of one big mapping in 4 MiB units, with counters. */
typedef struct carve {
    char *base;
    unsigned char used[NUNITS];
    pthread_mutex_t lock;
    unsigned nalloc, nfree, npurge, nrefuse;
    size_t outstanding;
    bool refuse;          /* alloc returns NULL */
    bool reenter;         /* callbacks allocate and call dpm_ctl */
    unsigned arena;       /* the sourced arena (for reenter) */
    unsigned depth;       /* nesting of alloc callbacks (reenter) */
} carve_t;

static void carve_init(carve_t *c)
{
    memset(c, 0, sizeof(*c));
    char *raw = mmap(NULL, (NUNITS + 1) * UNIT, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                     -1, 0);
    if (raw == MAP_FAILED) {
        fprintf(stderr, "mmap failed\n");
        _exit(2);
    }
    c->base = (char *)(((uintptr_t)raw + UNIT - 1) & ~(uintptr_t)(UNIT - 1));
    pthread_mutex_init(&c->lock, NULL);
}

/* Same-arena traffic from inside a callback: if any allocator lock of the
 * arena were held, these would deadlock (the test's alarm fires). */
static void reenter(carve_t *c)
{
    void *p = dpm_malloc_arena(c->arena, 48, 0);
    if (p != NULL)
        dpm_free(p);
    p = dpm_malloc(200);
    dpm_free(p);
    uint64_t e = 1;
    size_t sz = sizeof(e);
    dpm_ctl("epoch", &e, &sz, &e, sizeof(e));
    size_t allocated;
    sz = sizeof(allocated);
    dpm_ctl("stats.allocated", &allocated, &sz, NULL, 0);
    char name[64];
    snprintf(name, sizeof(name), "arena.%u.purge", c->arena);
    dpm_ctl(name, NULL, NULL, NULL, 0);
}

static void *carve_alloc(void *ctx, size_t size, size_t align, bool *zeroed)
{
    carve_t *c = ctx;
    if (align % UNIT != 0 || size % UNIT != 0)
        return NULL;
    if (c->reenter && __atomic_fetch_add(&c->depth, 1, __ATOMIC_RELAXED) == 0)
        reenter(c);
    char *got = NULL;
    size_t n = size / UNIT, step = align / UNIT;
    pthread_mutex_lock(&c->lock);
    if (c->refuse) {
        c->nrefuse++;
    } else {
        for (size_t i = 0; i + n <= NUNITS && got == NULL; i += step) {
            size_t k = 0;
            while (k < n && !c->used[i + k])
                k++;
            if (k == n) {
                memset(&c->used[i], 1, n);
                got = c->base + i * UNIT;
            }
        }
        if (got != NULL) {
            c->nalloc++;
            c->outstanding += size;
        }
    }
    pthread_mutex_unlock(&c->lock);
    if (c->reenter)
        __atomic_fetch_sub(&c->depth, 1, __ATOMIC_RELAXED);
    *zeroed = false;   /* the allocator must not trust carve memory to be zero */
    return got;
}

static void carve_free(void *ctx, void *addr, size_t size)
{
    carve_t *c = ctx;
    if (c->reenter)
        reenter(c);
    pthread_mutex_lock(&c->lock);
    size_t i = (size_t)((char *)addr - c->base) / UNIT;
    for (size_t k = 0; k < size / UNIT; k++)
        c->used[i + k] = 0;
    c->nfree++;
    c->outstanding -= size;
    pthread_mutex_unlock(&c->lock);
}

static bool carve_purge(void *ctx, void *addr, size_t size)
{
    carve_t *c = ctx;
    if (c->reenter)
        reenter(c);
    __atomic_fetch_add(&c->npurge, 1, __ATOMIC_RELAXED);
    return madvise(addr, size, MADV_DONTNEED) == 0;
}

/* Whether [p, p+n) lies in units the source handed out. */
static bool in_carve(carve_t *c, const void *p, size_t n)
{
    const char *q = p;
    if (q < c->base || q + n > c->base + NUNITS * UNIT)
        return false;
    pthread_mutex_lock(&c->lock);
    bool ok = true;
    for (size_t i = (size_t)(q - c->base) / UNIT; i <= (size_t)(q + n - 1 - c->base) / UNIT; i++)
        ok = ok && c->used[i];
    pthread_mutex_unlock(&c->lock);
    return ok;
}

static int ctl_arena(unsigned arena, const char *what)
{
    char name[64];
    snprintf(name, sizeof(name), "arena.%u.%s", arena, what);
    return dpm_ctl(name, NULL, NULL, NULL, 0);
}

static void set_decay(unsigned arena, ssize_t ms)
{
    char name[64];
    snprintf(name, sizeof(name), "arena.%u.dirty_decay_ms", arena);
    EXPECT_EQ_I(dpm_ctl(name, NULL, NULL, &ms, sizeof(ms)), 0);
}

static size_t arena_mapped(unsigned arena)
{
    uint64_t e = 1;
    size_t sz = sizeof(e);
    dpm_ctl("epoch", &e, &sz, &e, sizeof(e));
    char name[64];
    size_t mapped = 0;
    sz = sizeof(mapped);
    snprintf(name, sizeof(name), "stats.arenas.%u.mapped", arena);
    EXPECT_EQ_I(dpm_ctl(name, &mapped, &sz, NULL, 0), 0);
    return mapped;
}

static const size_t sizes[] = {1,     8,     16,    24,     48,     64,     100,    128,    200,     256,
                               384,   512,   640,   1000,   1024,   2048,   3072,   4096,   5000,    8192,
                               10240, 14336, 16384, 20000,  32768,  65536,  100000, 262144, 1 << 20, 3 << 20,
                               5 << 20, 12 << 20, 40 << 20};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

typedef struct bound_run {
    carve_t *c;
    unsigned arena;
    int failures;
} bound_run_t;

/* A thread bound to the sourced arena allocates through its cache. */
static void *bound_thread(void *arg)
{
    bound_run_t *r = arg;
    unsigned a = r->arena;
    if (dpm_ctl("thread.arena", NULL, NULL, &a, sizeof(a)) != 0) {
        r->failures++;
        return NULL;
    }
    void *p[NSIZES][4];
    for (size_t i = 0; i < NSIZES; i++)
        for (int k = 0; k < 4; k++) {
            p[i][k] = dpm_malloc(sizes[i]);
            if (p[i][k] == NULL || !in_carve(r->c, p[i][k], sizes[i])) {
                fprintf(stderr, "bound thread: size %zu: %p not from the source\n", sizes[i], p[i][k]);
                r->failures++;
            }
            else
                memset(p[i][k], 0x5a, sizes[i]);
        }
    for (size_t i = 0; i < NSIZES; i++)
        for (int k = 0; k < 4; k++)
            dpm_free(p[i][k]);
    return NULL;
}

TEST(blocks_come_from_the_source_and_go_back)
{
    static carve_t c;
    carve_init(&c);
    dpm_page_source_t src = {carve_alloc, carve_free, carve_purge, &c};
    unsigned arena;
    EXPECT_EQ_I(dpm_arena_create_sourced("carve", &src, &arena), 0);
    c.arena = arena;
    void *p[NSIZES][3];
    for (size_t i = 0; i < NSIZES; i++)
        for (int k = 0; k < 3; k++) {
            p[i][k] = dpm_malloc_arena(arena, sizes[i], k == 2 ? 4096 : 0);
            EXPECT(p[i][k] != NULL && in_carve(&c, p[i][k], sizes[i]), "size %zu: %p not from the source",
                   sizes[i], p[i][k]);
            if (p[i][k] != NULL)
                memset(p[i][k], 0xa5, sizes[i]);
        }
    EXPECT_GE_U(c.nalloc, 2);
    EXPECT_EQ_U(arena_mapped(arena), c.outstanding);

    bound_run_t r = {&c, arena, 0};
    pthread_t t;
    pthread_create(&t, NULL, bound_thread, &r);
    pthread_join(t, NULL);
    EXPECT_EQ_I(r.failures, 0);

    for (size_t i = 0; i < NSIZES; i++)
        for (int k = 0; k < 3; k++)
            dpm_free(p[i][k]);
    EXPECT_EQ_I(ctl_arena(arena, "destroy"), 0);
    EXPECT_EQ_U(c.outstanding, 0);
    EXPECT_EQ_U(c.nfree, c.nalloc);
}

TEST(decay_gives_whole_segments_back_through_free)
{
    static carve_t c;
    carve_init(&c);
    dpm_page_source_t src = {carve_alloc, carve_free, carve_purge, &c};
    unsigned arena;
    EXPECT_EQ_I(dpm_arena_create_sourced("carve-decay", &src, &arena), 0);
    void *big = dpm_malloc_arena(arena, 20 << 20, 0);
    EXPECT_NONNULL(big);
    EXPECT_TRUE(in_carve(&c, big, 20 << 20));
    memset(big, 1, 20 << 20);
    unsigned before = c.nfree;
    dpm_free(big);
    EXPECT_EQ_I(ctl_arena(arena, "purge"), 0);
    EXPECT_GE_U(c.npurge, 1);
    EXPECT_GE_U(c.nfree, before + 1);
    EXPECT_EQ_U(arena_mapped(arena), c.outstanding);
    EXPECT_EQ_I(ctl_arena(arena, "destroy"), 0);
    EXPECT_EQ_U(c.outstanding, 0);
}

TEST(a_source_without_purge_is_never_purged)
{
    static carve_t c;
    carve_init(&c);
    dpm_page_source_t src = {carve_alloc, carve_free, NULL, &c};
    unsigned arena;
    EXPECT_EQ_I(dpm_arena_create_sourced("pinned", &src, &arena), 0);
    set_decay(arena, 0);
    size_t n = 6 << 20;
    unsigned char *big = dpm_malloc_arena(arena, n, 0);
    unsigned char *small[64];
    for (int i = 0; i < 64; i++) {
        small[i] = dpm_malloc_arena(arena, 3000, 0);
        memset(small[i], 0x77, 3000);
    }
    EXPECT_NONNULL(big);
    memset(big, 0xc3, n);
    dpm_free(big);
    for (int i = 0; i < 64; i++)
        dpm_free(small[i]);
    EXPECT_EQ_I(ctl_arena(arena, "decay"), 0);
    EXPECT_EQ_I(ctl_arena(arena, "purge"), 0);
    /* the pages were neither madvise'd nor handed to a purge: still there */
    size_t kept = 0;
    PEEK_FREED(big, n);
    for (int i = 0; i < 64; i++)
        PEEK_FREED(small[i], 3000);
    for (size_t i = 0; i < n; i++)
        kept += big[i] == 0xc3;
    EXPECT_EQ_U(kept, n);
    for (int i = 0; i < 64; i++)
        EXPECT_EQ_U(small[i][1500], 0x77);
    /* a large zeroed block in such memory is cleared by writing, not purging */
    unsigned char *z = dpm_malloc_arena(arena, 1 << 20, 0);
    memset(z, 0xee, 1 << 20);
    dpm_free(z);
    unsigned char *cz = NULL;
    unsigned a2 = arena;
    EXPECT_EQ_I(dpm_ctl("thread.arena", NULL, NULL, &a2, sizeof(a2)), 0);
    cz = dpm_calloc(1, 1 << 20);
    EXPECT_NONNULL(cz);
    EXPECT_TRUE(cz != NULL && test_all_zero(cz, 1 << 20));
    dpm_free(cz);
    unsigned zero = 0;
    EXPECT_EQ_I(dpm_ctl("thread.arena", NULL, NULL, &zero, sizeof(zero)), 0);
    EXPECT_EQ_I(ctl_arena(arena, "destroy"), 0);
    EXPECT_EQ_U(c.outstanding, 0);
}

TEST(callbacks_run_without_allocator_locks)
{
    static carve_t c;
    carve_init(&c);
    dpm_page_source_t src = {carve_alloc, carve_free, carve_purge, &c};
    unsigned arena;
    EXPECT_EQ_I(dpm_arena_create_sourced("reenter", &src, &arena), 0);
    c.arena = arena;
    c.reenter = true;
    set_decay(arena, 0);
    alarm(60);   /* a deadlock fails the test instead of hanging it */
    for (int round = 0; round < 3; round++) {
        void *p[NSIZES];
        for (size_t i = 0; i < NSIZES; i++) {
            p[i] = dpm_malloc_arena(arena, sizes[i], 0);
            EXPECT(p[i] != NULL && in_carve(&c, p[i], sizes[i]), "size %zu", sizes[i]);
        }
        for (size_t i = 0; i < NSIZES; i++)
            dpm_free(p[i]);
        EXPECT_EQ_I(ctl_arena(arena, "purge"), 0);
    }
    /* through a bound thread's cache too */
    bound_run_t r = {&c, arena, 0};
    pthread_t t;
    pthread_create(&t, NULL, bound_thread, &r);
    pthread_join(t, NULL);
    EXPECT_EQ_I(r.failures, 0);
    EXPECT_GE_U(c.npurge, 1);
    EXPECT_GE_U(c.nfree, 1);
    c.reenter = false;
    EXPECT_EQ_I(ctl_arena(arena, "destroy"), 0);
    alarm(0);
    EXPECT_EQ_U(c.outstanding, 0);
}

TEST(a_refusing_source_gives_enomem)
{
    static carve_t c;
    carve_init(&c);
    c.refuse = true;
    dpm_page_source_t src = {carve_alloc, carve_free, carve_purge, &c};
    unsigned arena;
    EXPECT_EQ_I(dpm_arena_create_sourced("refuse", &src, &arena), 0);
    errno = 0;
    EXPECT_NULL(dpm_malloc_arena(arena, 64, 0));
    EXPECT_ERRNO(ENOMEM);
    errno = 0;
    EXPECT_NULL(dpm_malloc_arena(arena, 1 << 20, 0));
    EXPECT_ERRNO(ENOMEM);
    EXPECT_GE_U(c.nrefuse, 2);
    EXPECT_EQ_U(c.nalloc, 0);
    dpm_page_source_t bad = {NULL, NULL, NULL, NULL};
    EXPECT_EQ_I(dpm_arena_create_sourced("bad", &bad, &arena), EINVAL);
    EXPECT_EQ_I(ctl_arena(arena, "destroy"), 0);
}

int main(void)
{
    RUN(blocks_come_from_the_source_and_go_back);
    RUN(decay_gives_whole_segments_back_through_free);
    RUN(a_source_without_purge_is_never_purged);
    RUN(callbacks_run_without_allocator_locks);
    RUN(a_refusing_source_gives_enomem);
    return test_done();
}
