/*
 * rte_compat.c - the rte_malloc-compatible layer (dpmalloc/rte_compat.h):
 * DPDK 22.11's argument rules, realloc keeping alignment, type and heap,
 * validate on foreign and freed pointers, misuse aborting in a child,
 * statistics that add up, named heaps as arenas, per-type counters.
 */
#include "test.h"

#include <dpmalloc.h>
#include <dpmalloc/rte_compat.h>
#include <pthread.h>

#define ANY DPM_RTE_SOCKET_ID_ANY

/* The arena of a live block, by dpm_ctl("arenas.lookup"). */
static unsigned arena_of(void *p)
{
    unsigned a = ~0u;
    size_t len = sizeof a;
    if (dpm_ctl("arenas.lookup", &a, &len, &p, sizeof p) != 0)
        return ~0u;
    return a;
}

/* What dpm_rte_malloc_dump_stats(type) says of the type: live bytes and
 * blocks from its "Type:" section; false if there is none. */
static int type_counts(const char *type, unsigned long long *bytes, unsigned long long *blocks)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    dpm_rte_malloc_dump_stats(f, type);
    fclose(f);
    char key[80];
    snprintf(key, sizeof key, "Type:%s\n", type);
    const char *t = strstr(buf, key);
    int ok = t != NULL && sscanf(t + strlen(key), "\tAlloc_size:%llu,\n\tAlloc_count:%llu,", bytes, blocks) == 2;
    free(buf);
    return ok;
}

TEST(arguments)
{
    errno = 0;
    EXPECT_NULL(dpm_rte_malloc(NULL, 0, 0));
    EXPECT_ERRNO(EINVAL);
    EXPECT_NULL(dpm_rte_malloc(NULL, 100, 3));
    EXPECT_ERRNO(EINVAL);
    EXPECT_NULL(dpm_rte_zmalloc("t", 100, 48));
    EXPECT_NULL(dpm_rte_calloc(NULL, 0, 8, 0));
    errno = 0;
    EXPECT_NULL(dpm_rte_calloc(NULL, SIZE_MAX / 2, 4, 0));
    EXPECT_ERRNO(ENOMEM);
    /* every block is cache-line aligned; larger alignments as asked */
    static const unsigned aligns[] = {0, 1, 2, 16, 32, 64, 128, 4096, 65536, 1u << 21};
    static const size_t sizes[] = {1, 24, 64, 100, 3000, 4096, 70000, 1 << 20};
    /* all kept live, so that no block is the last one freed coming back */
    enum { NA = sizeof aligns / sizeof *aligns, NS = sizeof sizes / sizeof *sizes, REP = 4 };
    static char *blocks[NA][NS][REP];
    for (size_t i = 0; i < NA; i++)
        for (size_t j = 0; j < NS; j++)
            for (int r = 0; r < REP; r++) {
                char *p = blocks[i][j][r] = dpm_rte_malloc(r % 2 ? "args" : NULL, sizes[j], aligns[i]);
                EXPECT_NONNULL(p);
                if (p == NULL)
                    continue;
                EXPECT_ALIGNED(p, aligns[i] < 64 ? 64 : aligns[i]);
                memset(p, 0xab, sizes[j]);
                size_t sz = 0;
                EXPECT_EQ_I(dpm_rte_malloc_validate(p, &sz), 0);
                EXPECT_GE_U(sz, sizes[j]);
            }
    for (size_t i = 0; i < NA; i++)
        for (size_t j = 0; j < NS; j++)
            for (int r = 0; r < REP; r++)
                dpm_rte_free(blocks[i][j][r]);
    dpm_rte_free(NULL);
}

TEST(zeroing)
{
    for (size_t size = 64; size <= (1u << 20); size *= 4) {
        char *d = dpm_rte_malloc(NULL, size, 64);
        memset(d, 0xff, size);
        dpm_rte_free(d);
        char *z = dpm_rte_zmalloc(NULL, size, 64);
        EXPECT_NONNULL(z);
        EXPECT_TRUE(z != NULL && test_all_zero(z, size));
        memset(z, 0xff, size);
        dpm_rte_free(z);
        char *c = dpm_rte_calloc("zero", size / 8, 8, 4096);
        EXPECT_TRUE(c != NULL && test_all_zero(c, size));
        EXPECT_ALIGNED(c, 4096);
        dpm_rte_free(c);
    }
}

TEST(realloc_keeps_contents_and_alignment)
{
    EXPECT_NULL(dpm_rte_realloc(NULL, 0, 0));
    char *p = dpm_rte_realloc(NULL, 100, 4096);
    EXPECT_NONNULL(p);
    EXPECT_ALIGNED(p, 4096);
    test_fill(p, 100, 1);
    static const size_t steps[] = {200, 5000, 70000, 3 << 20, 1000, 128};
    size_t have = 100;
    for (size_t i = 0; i < sizeof steps / sizeof *steps; i++) {
        char *q = dpm_rte_realloc(p, steps[i], 4096);
        EXPECT_NONNULL(q);
        if (q == NULL)
            break;
        EXPECT_ALIGNED(q, 4096);
        size_t keep = have < steps[i] ? have : steps[i];
        EXPECT_EQ_U(test_check(q, keep, 1), keep);
        test_fill(q, steps[i], 1);
        have = steps[i];
        p = q;
    }
    /* a bad alignment fails and leaves the block alone */
    errno = 0;
    EXPECT_NULL(dpm_rte_realloc(p, 300, 100));
    EXPECT_ERRNO(EINVAL);
    EXPECT_EQ_I(dpm_rte_malloc_validate(p, NULL), 0);
    /* alignment raised on a block that already fits: it moves */
    char *q = dpm_rte_realloc(p, 128, 1u << 16);
    EXPECT_ALIGNED(q, 1u << 16);
    EXPECT_EQ_U(test_check(q, 128, 1), 128);
    /* size 0 frees */
    EXPECT_NULL(dpm_rte_realloc(q, 0, 0));
    EXPECT_EQ_I(dpm_rte_malloc_validate(q, NULL), -1);
}

TEST(validate)
{
    int on_stack = 0;
    size_t sz = 12345;
    EXPECT_EQ_I(dpm_rte_malloc_validate(NULL, &sz), -1);
    EXPECT_EQ_I(dpm_rte_malloc_validate(&on_stack, &sz), -1);
    EXPECT_EQ_U(sz, 12345);
    void *libc = malloc(64);   /* glibc's: this test links the plain library */
    EXPECT_EQ_I(dpm_rte_malloc_validate(libc, NULL), -1);
    free(libc);
    char *small = dpm_rte_malloc("v", 200, 0), *large = dpm_rte_malloc("v", 1 << 20, 0);
    EXPECT_EQ_I(dpm_rte_malloc_validate(small, &sz), 0);
    EXPECT_GE_U(sz, 200);
    EXPECT_EQ_I(dpm_rte_malloc_validate(large, &sz), 0);
    EXPECT_GE_U(sz, 1 << 20);
    EXPECT_EQ_I(dpm_rte_malloc_validate(small + 64, NULL), -1);
    EXPECT_EQ_I(dpm_rte_malloc_validate(large + 4096, NULL), -1);
    char *cached = dpm_rte_malloc(NULL, 200, 0);   /* untyped: freed into the thread cache */
    dpm_rte_free(cached);
    dpm_rte_free(small);
    dpm_rte_free(large);
    EXPECT_EQ_I(dpm_rte_malloc_validate(cached, NULL), -1);
    EXPECT_EQ_I(dpm_rte_malloc_validate(small, NULL), -1);
    EXPECT_EQ_I(dpm_rte_malloc_validate(large, NULL), -1);
}

/* A live block whose bytes 8..11 hold the free key's value (TC_FREE_KEY,
 * src/tcache.h; a program may store any value there) is live for validate
 * and realloc: the key makes them look the block up in the caches, as free
 * does, never give up on it. Run in a child: the old layer aborted in
 * realloc ("invalid pointer or freed block"). */
#define FREE_KEY_VALUE 0xa3d95e17u

static int keyed_block_is_live(void *arg)
{
    (void)arg;
    static const size_t sizes[] = {16, 200, 5000, 1 << 20};
    static const char *const types[] = {NULL, "keyed"};
    int bad = 0;
    for (unsigned t = 0; t < 2; t++) {
        for (unsigned i = 0; i < sizeof sizes / sizeof *sizes; i++) {
            char *p = dpm_rte_malloc(types[t], sizes[i], 0);
            uint32_t key = FREE_KEY_VALUE, got;
            memset(p, 0x5a, 16);
            memcpy(p + 8, &key, sizeof key);
            size_t sz = 0;
            if (dpm_rte_malloc_validate(p, &sz) != 0 || sz < sizes[i]) {
                fprintf(stderr, "validate of live keyed block of %zu: -1\n", sizes[i]);
                bad = 1;
            }
            p = dpm_rte_realloc(p, sizes[i] * 3, 0);   /* moves */
            memcpy(&got, p + 8, sizeof got);
            if (p == NULL || got != FREE_KEY_VALUE || p[0] != 0x5a || dpm_rte_malloc_validate(p, NULL) != 0) {
                fprintf(stderr, "realloc of keyed block of %zu lost it\n", sizes[i]);
                bad = 1;
            }
            dpm_rte_free(p);
            /* freed: the key is the cache's now, and validate says so */
            if (dpm_rte_malloc_validate(p, NULL) != -1) {
                fprintf(stderr, "freed block of %zu valid\n", sizes[i]);
                bad = 1;
            }
        }
    }
    return bad;
}

TEST(program_data_holds_free_key)
{
    struct test_child c;
    char desc[128];
    if (test_run_child(keyed_block_is_live, NULL, &c, 30) != 0) {
        TEST_FAIL("fork failed");
        return;
    }
    EXPECT(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0, "child %s: %s",
           test_describe_status(c.status, desc, sizeof desc), c.err);
}

/* ---- misuse aborts in a child ---- */
static char not_ours[256] __attribute__((aligned(64)));

static int free_foreign(void *arg)
{
    (void)arg;
    dpm_rte_free(not_ours);
    return 0;
}

static int realloc_freed(void *arg)
{
    (void)arg;
    char *p = dpm_rte_malloc("x", 5000, 0);
    dpm_rte_free(p);
    p = test_launder(p);
    dpm_rte_realloc(p, 9000, 0);
    return 0;
}

static int double_free(void *arg)
{
    (void)arg;
    char *p = dpm_rte_malloc(NULL, 100, 64);
    dpm_rte_free(p);
    dpm_rte_free(test_launder(p));
    return 0;
}

static void expect_abort(int (*fn)(void *), const char *msg)
{
    struct test_child c;
    char desc[128];
    if (test_run_child(fn, NULL, &c, 30) != 0) {
        TEST_FAIL("fork failed");
        return;
    }
    EXPECT(WIFSIGNALED(c.status) && WTERMSIG(c.status) == SIGABRT, "child %s",
           test_describe_status(c.status, desc, sizeof desc));
    EXPECT(strstr(c.err, msg) != NULL, "stderr \"%s\" lacks \"%s\"", c.err, msg);
    EXPECT(strncmp(c.err, "dpmalloc: ", 10) == 0, "stderr \"%s\"", c.err);
    EXPECT(strstr(c.err, "0x") != NULL, "stderr \"%s\" names no pointer", c.err);
}

TEST(misuse_aborts)
{
    expect_abort(free_foreign, "dpmalloc: dpm_rte_free(): invalid pointer 0x");
    struct test_child c;
    test_run_child(free_foreign, NULL, &c, 30);
    EXPECT(test_text_has_pointer(c.err, (uintptr_t)not_ours), "stderr \"%s\" lacks %p", c.err, (void *)not_ours);
    expect_abort(realloc_freed, "dpm_rte_realloc(): invalid pointer or freed block 0x");
    expect_abort(double_free, "dpm_rte_free(): double free");
}

TEST(sockets)
{
    void *p = dpm_rte_malloc_socket(NULL, 100, 0, 0);
    EXPECT_NONNULL(p);
    dpm_rte_free(p);
    p = dpm_rte_zmalloc_socket("s", 100, 0, ANY);
    EXPECT_NONNULL(p);
    dpm_rte_free(p);
    errno = 0;
    EXPECT_NULL(dpm_rte_malloc_socket(NULL, 100, 0, 1));   /* one node on this machine */
    EXPECT_ERRNO(EINVAL);
    EXPECT_NULL(dpm_rte_calloc_socket(NULL, 1, 100, 0, 1000));
    EXPECT_NULL(dpm_rte_malloc_socket(NULL, 100, 0, -2));
    EXPECT_NULL(dpm_rte_malloc_socket(NULL, 100, 0, DPM_RTE_NAMED_HEAP_MIN_SOCKET_ID));
    EXPECT_EQ_I(dpm_rte_malloc_heap_get_socket("socket_0"), 0);
    errno = 0;
    EXPECT_EQ_I(dpm_rte_malloc_heap_get_socket("socket_1"), -1);
    EXPECT_ERRNO(ENOENT);
    EXPECT_EQ_I(dpm_rte_malloc_heap_get_socket(NULL), -1);
    EXPECT_EQ_I(dpm_rte_malloc_heap_socket_is_external(0), 0);
    EXPECT_EQ_I(dpm_rte_malloc_heap_socket_is_external(ANY), 0);
    EXPECT_EQ_I(dpm_rte_malloc_heap_socket_is_external(7), -1);
    unsigned a;
    errno = 0;
    EXPECT_EQ_I(dpm_rte_heap_arena(0, &a), -1);   /* the automatic arenas */
    EXPECT_ERRNO(ENOENT);
}

static void expect_consistent(const struct dpm_rte_malloc_socket_stats *st)
{
    EXPECT_EQ_U(st->heap_totalsz_bytes, st->heap_freesz_bytes + st->heap_allocsz_bytes);
    EXPECT_LE_U(st->greatest_free_size, st->heap_freesz_bytes);
    EXPECT_LE_U(st->heap_allocsz_bytes, st->heap_totalsz_bytes);
}

TEST(socket_stats)
{
    struct dpm_rte_malloc_socket_stats st0, st1;
    EXPECT_EQ_I(dpm_rte_malloc_get_socket_stats(0, &st0), 0);
    expect_consistent(&st0);
    EXPECT_GE_U(st0.heap_totalsz_bytes, 4u << 20);   /* a segment at least */
    EXPECT_EQ_I(dpm_rte_malloc_get_socket_stats(1, &st1), -1);
    EXPECT_EQ_I(dpm_rte_malloc_get_socket_stats(0, NULL), -1);
    /* typed blocks bypass thread caches: counted one by one */
    void *p[100];
    for (int i = 0; i < 100; i++)
        p[i] = dpm_rte_malloc("stats", 1000, 0);
    void *big = dpm_rte_malloc("stats", 8 << 20, 0);
    EXPECT_EQ_I(dpm_rte_malloc_get_socket_stats(0, &st1), 0);
    expect_consistent(&st1);
    EXPECT_EQ_U(st1.alloc_count - st0.alloc_count, 101);
    EXPECT_GE_U(st1.heap_allocsz_bytes - st0.heap_allocsz_bytes, 100 * 1000 + (8 << 20));
    for (int i = 0; i < 100; i++)
        dpm_rte_free(p[i]);
    dpm_rte_free(big);
    EXPECT_EQ_I(dpm_rte_malloc_get_socket_stats(0, &st1), 0);
    expect_consistent(&st1);
    EXPECT_EQ_U(st1.alloc_count, st0.alloc_count);
}

TEST(named_heaps)
{
    errno = 0;
    EXPECT_EQ_I(dpm_rte_malloc_heap_create(NULL), -1);
    EXPECT_ERRNO(EINVAL);
    EXPECT_EQ_I(dpm_rte_malloc_heap_create(""), -1);
    EXPECT_EQ_I(dpm_rte_malloc_heap_create("0123456789012345678901234567890123"), -1);
    EXPECT_EQ_I(dpm_rte_malloc_heap_create("socket_0"), -1);
    EXPECT_ERRNO(EEXIST);
    EXPECT_EQ_I(dpm_rte_malloc_heap_create("pktpool"), 0);
    errno = 0;
    EXPECT_EQ_I(dpm_rte_malloc_heap_create("pktpool"), -1);
    EXPECT_ERRNO(EEXIST);
    int id = dpm_rte_malloc_heap_get_socket("pktpool");
    EXPECT_GE_U(id, DPM_RTE_NAMED_HEAP_MIN_SOCKET_ID);
    EXPECT_EQ_I(dpm_rte_malloc_heap_socket_is_external(id), 1);
    unsigned arena = ~0u;
    EXPECT_EQ_I(dpm_rte_heap_arena(id, &arena), 0);
    char name[32] = "";
    const char *np = NULL;
    size_t len = sizeof np;
    char key[48];
    snprintf(key, sizeof key, "arena.%u.name", arena);
    EXPECT_EQ_I(dpm_ctl(key, &np, &len, NULL, 0), 0);
    if (np != NULL)
        snprintf(name, sizeof name, "%s", np);
    EXPECT(strcmp(name, "pktpool") == 0, "arena name \"%s\"", name);

    struct dpm_rte_malloc_socket_stats st0, st;
    EXPECT_EQ_I(dpm_rte_malloc_get_socket_stats(id, &st0), 0);
    EXPECT_EQ_U(st0.alloc_count, 0);
    char *a = dpm_rte_malloc_socket("pkt", 2000, 0, id);
    char *b = dpm_rte_zmalloc_socket(NULL, 100000, 4096, id);
    char *c = dpm_rte_calloc_socket(NULL, 10, 10, 0, id);
    EXPECT_TRUE(a && b && c);
    EXPECT_EQ_U(arena_of(a), arena);
    EXPECT_EQ_U(arena_of(b), arena);
    EXPECT_EQ_U(arena_of(c), arena);
    EXPECT_TRUE(b != NULL && test_all_zero(b, 100000));
    EXPECT_EQ_I(dpm_rte_malloc_get_socket_stats(id, &st), 0);
    expect_consistent(&st);
    EXPECT_EQ_U(st.alloc_count, 3);
    EXPECT_GE_U(st.heap_allocsz_bytes, 2000 + 100000 + 100);
    /* realloc keeps the heap (and the type); realloc_socket moves */
    test_fill(a, 2000, 7);
    a = dpm_rte_realloc(a, 300000, 0);
    EXPECT_EQ_U(arena_of(a), arena);
    EXPECT_EQ_U(test_check(a, 2000, 7), 2000);
    unsigned long long bytes = 0, blocks = 0;
    EXPECT_TRUE(type_counts("pkt", &bytes, &blocks));
    EXPECT_EQ_U(blocks, 1);
    EXPECT_GE_U(bytes, 300000);
    char *moved = dpm_rte_realloc_socket(c, 100, 0, 0);
    EXPECT_NE_U(arena_of(moved), arena);
    /* a big block freed leaves a long free run */
    char *huge = dpm_rte_malloc_socket(NULL, 6 << 20, 0, id);
    dpm_rte_free(huge);
    EXPECT_EQ_I(dpm_rte_malloc_get_socket_stats(id, &st), 0);
    expect_consistent(&st);
    EXPECT_GE_U(st.greatest_free_size, (6 << 20) * 7 / 8);
    EXPECT_GE_U(st.free_count, 1);
    /* not while blocks live */
    errno = 0;
    EXPECT_EQ_I(dpm_rte_malloc_heap_destroy("pktpool"), -1);
    EXPECT_ERRNO(EBUSY);
    dpm_rte_free(a);
    dpm_rte_free(b);
    dpm_rte_free(moved);
    EXPECT_EQ_I(dpm_rte_malloc_heap_destroy("pktpool"), 0);
    errno = 0;
    EXPECT_EQ_I(dpm_rte_malloc_heap_destroy("pktpool"), -1);
    EXPECT_ERRNO(ENOENT);
    EXPECT_EQ_I(dpm_rte_malloc_heap_destroy("socket_0"), -1);
    EXPECT_ERRNO(EPERM);
    EXPECT_EQ_I(dpm_rte_malloc_heap_get_socket("pktpool"), -1);
    EXPECT_NULL(dpm_rte_malloc_socket(NULL, 100, 0, id));
    EXPECT_EQ_I(dpm_rte_malloc_heap_socket_is_external(id), -1);
    /* ids are not given out again */
    EXPECT_EQ_I(dpm_rte_malloc_heap_create("pktpool"), 0);
    EXPECT_NE_U(dpm_rte_malloc_heap_get_socket("pktpool"), id);
    EXPECT_EQ_I(dpm_rte_malloc_heap_destroy("pktpool"), 0);
}

TEST(heap_limit)
{
    char name[32];
    int made = 0;
    for (int i = 0; i < DPM_RTE_MAX_NAMED_HEAPS; i++) {
        snprintf(name, sizeof name, "h%d", i);
        made += dpm_rte_malloc_heap_create(name) == 0;
    }
    EXPECT_EQ_I(made, DPM_RTE_MAX_NAMED_HEAPS);
    errno = 0;
    EXPECT_EQ_I(dpm_rte_malloc_heap_create("one_more"), -1);
    EXPECT_ERRNO(ENOSPC);
    for (int i = 0; i < DPM_RTE_MAX_NAMED_HEAPS; i++) {
        snprintf(name, sizeof name, "h%d", i);
        EXPECT_EQ_I(dpm_rte_malloc_heap_destroy(name), 0);
    }
}

/* A thread bound to a heap's arena takes its untyped blocks through its
 * thread cache: a freed block comes straight back. */
static void *bound_thread(void *arg)
{
    int id = *(int *)arg;
    unsigned arena;
    long ok = 0;
    if (dpm_rte_heap_arena(id, &arena) != 0 || dpm_ctl("thread.arena", NULL, NULL, &arena, sizeof arena) != 0)
        return (void *)0;
    void *p = dpm_rte_malloc_socket(NULL, 256, 0, id);
    dpm_rte_free(p);
    void *q = dpm_rte_malloc_socket(NULL, 256, 0, id);
    ok = p != NULL && q == p && arena_of(q) == arena;
    dpm_rte_free(q);
    unsigned zero = 0;
    dpm_ctl("thread.arena", NULL, NULL, &zero, sizeof zero);
    return (void *)ok;
}

TEST(bound_thread_uses_its_cache)
{
    EXPECT_EQ_I(dpm_rte_malloc_heap_create("bound"), 0);
    int id = dpm_rte_malloc_heap_get_socket("bound");
    pthread_t t;
    void *ok = NULL;
    pthread_create(&t, NULL, bound_thread, &id);
    pthread_join(t, &ok);
    EXPECT_TRUE(ok != NULL);
    EXPECT_EQ_I(dpm_rte_malloc_heap_destroy("bound"), 0);
}

TEST(types_and_dump)
{
    char *p = dpm_rte_malloc("flowtab", 100, 0);
    unsigned long long bytes = 0, blocks = 0;
    EXPECT_TRUE(type_counts("flowtab", &bytes, &blocks));
    EXPECT_EQ_U(blocks, 1);
    EXPECT_GE_U(bytes, 100);
    p = dpm_rte_realloc(p, 50000, 0);
    EXPECT_TRUE(type_counts("flowtab", &bytes, &blocks));
    EXPECT_EQ_U(blocks, 1);
    EXPECT_GE_U(bytes, 50000);
    char *q = dpm_rte_calloc("flowtab", 4, 1000, 128);
    EXPECT_TRUE(type_counts("flowtab", &bytes, &blocks));
    EXPECT_EQ_U(blocks, 2);
    dpm_rte_free(p);
    dpm_rte_free(q);
    EXPECT_TRUE(type_counts("flowtab", &bytes, &blocks));
    EXPECT_EQ_U(blocks, 0);
    EXPECT_EQ_U(bytes, 0);
    /* the whole dump: DPDK's heap lines, then only the type asked for */
    EXPECT_EQ_I(dpm_rte_malloc_heap_create("dumped"), 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    dpm_rte_malloc_dump_stats(f, "flowtab");
    fclose(f);
    EXPECT(strstr(buf, "Heap id:0\n\tHeap name:socket_0\n") != NULL, "%s", buf);
    EXPECT(strstr(buf, "\tHeap name:dumped\n") != NULL, "%s", buf);
    EXPECT(strstr(buf, "\tGreatest_free_size:") != NULL, "%s", buf);
    EXPECT(strstr(buf, "Type:flowtab\n") != NULL, "%s", buf);
    EXPECT(strstr(buf, "Type:pkt\n") == NULL, "%s", buf);
    free(buf);
    EXPECT_EQ_I(dpm_rte_malloc_heap_destroy("dumped"), 0);
}

int main(void)
{
    RUN(arguments);
    RUN(zeroing);
    RUN(realloc_keeps_contents_and_alignment);
    RUN(validate);
    RUN(program_data_holds_free_key);
    RUN(misuse_aborts);
    RUN(sockets);
    RUN(socket_stats);
    RUN(named_heaps);
    RUN(heap_limit);
    RUN(bound_thread_uses_its_cache);
    RUN(types_and_dump);
    return test_done();
}
