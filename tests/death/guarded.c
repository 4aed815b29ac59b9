/*
 * guarded.c - sampled guarded allocations (guard_sample, docs/config.md):
 * with guard_sample:1 (ctest) every allocation of a slow path comes from
 * a guarded slot. Correct programs run: usable sizes as dpm_good_size says, realloc both
 * ways, sized frees, calloc zeroed, threads, fork. Misuse of a sampled
 * block aborts in a child with its report: a read past the block (the
 * guard page), a write past its usable bytes, a use
 * after free (the page has no access), a double free. With guard_sample
 * at 1000 about one allocation in 1000 is sampled; with the option off
 * (argument "off") none is.
 */
#include "test.h"

#include <dpmalloc.h>
#include <dpmalloc/rte_compat.h>
#include <pthread.h>

static size_t stat(const char *name)
{
    uint64_t e = 1;
    size_t v = 0, len = sizeof e;
    dpm_ctl("epoch", &e, &len, &e, sizeof e);
    len = sizeof v;
    return dpm_ctl(name, &v, &len, NULL, 0) == 0 ? v : (size_t)-1;
}

/* A block from a slow path: the first of its class on a fresh thread. */
static void *fresh_thread_block(void *arg)
{
    return dpm_malloc((size_t)(uintptr_t)arg);
}

static char *sampled_block(size_t size)
{
    size_t before = stat("stats.guarded.total");
    pthread_t t;
    void *p = NULL;
    pthread_create(&t, NULL, fresh_thread_block, (void *)(uintptr_t)size);
    pthread_join(t, &p);
    if (stat("stats.guarded.total") != before + 1) {
        fprintf(stderr, "the block was not sampled\n");
        _exit(3);
    }
    return p;
}

static int read_past(void *arg)
{
    (void)arg;
    volatile char *p = sampled_block(96);
    return p[96];
}

static int write_past_usable(void *arg)
{
    (void)arg;
    char *p = sampled_block(100);   /* usable: its class's, 112 */
    p[dpm_usable_size(p)] = 1;
    dpm_free(p);
    return 0;
}

static int use_after_free(void *arg)
{
    (void)arg;
    volatile char *p = sampled_block(200);
    dpm_free((void *)p);
    p[5] = 1;
    return 0;
}

static int double_free(void *arg)
{
    (void)arg;
    char *p = sampled_block(300);
    dpm_free(p);
    dpm_free(p);
    return 0;
}

static void expect_report(const char *name, int (*fn)(void *), const char *what, const char *trace)
{
    struct test_child c;
    if (test_run_child(fn, NULL, &c, 30) != 0) {
        TEST_FAIL("%s: fork failed", name);
        return;
    }
    char desc[128];
    if (!WIFSIGNALED(c.status) || WTERMSIG(c.status) != SIGABRT)
        TEST_FAIL("%s: child %s, want SIGABRT: %s", name, test_describe_status(c.status, desc, sizeof desc), c.err);
    else if (!strstr(c.err, "dpmalloc") || !strstr(c.err, what) || (trace != NULL && !strstr(c.err, trace)))
        TEST_FAIL("%s: report lacks \"%s\" / \"%s\": %s", name, what, trace ? trace : "", c.err);
}

TEST(misuse_of_sampled_blocks_aborts)
{
    expect_report("read past a sampled block", read_past, "buffer overflow past the end", "allocated at:");
    expect_report("write past the usable bytes", write_past_usable, "buffer overflow past the end", "allocated at:");
    expect_report("use after free", use_after_free, "use after free", "freed at:");
    expect_report("double free", double_free, "double free of", NULL);
}

static void *churn(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    char *live[64] = {0};
    for (int i = 0; i < 20000; i++) {
        int k = (int)(rand_r(&seed) % 64);
        if (live[k] != NULL) {
            size_t n = dpm_usable_size(live[k]);
            for (size_t j = 0; j < n; j += 97)
                if (live[k][j] != (char)k)
                    return (void *)1;
            if (i % 3 == 0)
                dpm_free_sized(live[k], n);
            else
                dpm_free(live[k]);
            live[k] = NULL;
        } else {
            size_t n = 1 + rand_r(&seed) % 3000;
            live[k] = i % 5 == 0 ? dpm_calloc(1, n) : dpm_malloc(n);
            if (live[k] == NULL || dpm_usable_size(live[k]) < n)
                return (void *)1;
            if (i % 7 == 0) {
                live[k] = dpm_realloc(live[k], n / 2 + 1);
                live[k] = dpm_realloc(live[k], n + 500);
            }
            memset(live[k], k, dpm_usable_size(live[k]));
        }
    }
    for (int k = 0; k < 64; k++)
        dpm_free(live[k]);
    return NULL;
}

TEST(correct_programs_run)
{
    char *p = sampled_block(100);
    EXPECT_EQ_U(dpm_usable_size(p), dpm_good_size(100));   /* as dpm_good_size promises, up to the guard */
    memset(p, 7, dpm_usable_size(p));
    p = dpm_realloc(p, 50);
    EXPECT_TRUE(p != NULL && p[49] == 7);
    p = dpm_realloc(p, 5000);
    EXPECT_TRUE(p != NULL && p[49] == 7);
    dpm_free(p);
    char *z = sampled_block(64);
    dpm_free_sized(z, 64);
    pthread_t t[4];
    for (uintptr_t i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, churn, (void *)(i + 1));
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        EXPECT_TRUE(r == NULL);
    }
    pid_t pid = fork();
    if (pid == 0)
        _exit(churn((void *)9) != NULL);
    int st = 0;
    waitpid(pid, &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    EXPECT_TRUE(stat("stats.guarded.total") > 100);
}

/* review r33: a SIGSEGV the program raises itself still ends it */
static int raise_segv(void *arg)
{
    (void)arg;
    raise(SIGSEGV);
    return 0;
}

static void *bound_thread(void *arg)
{
    unsigned arena = (unsigned)(uintptr_t)arg;
    if (dpm_ctl("thread.arena", NULL, NULL, &arena, sizeof arena) != 0)
        return (void *)1;
    for (int i = 0; i < 1000; i++) {
        void *p = dpm_malloc(64 + (size_t)i % 512);
        unsigned owner = 99;
        size_t len = sizeof owner;
        if (p == NULL || dpm_ctl("arenas.lookup", &owner, &len, &p, sizeof p) != 0 || owner != arena)
            return (void *)2;
        dpm_free(p);
    }
    return NULL;
}

TEST(what_is_not_sampled)
{
    struct test_child c;
    test_run_child(raise_segv, NULL, &c, 30);
    EXPECT_TRUE(WIFSIGNALED(c.status) && WTERMSIG(c.status) == SIGSEGV);
    /* threads bound to a manual arena allocate only from it */
    unsigned arena = 0;
    size_t len = sizeof arena;
    EXPECT_TRUE(dpm_ctl("arenas.create", &arena, &len, NULL, 0) == 0);
    size_t before = stat("stats.guarded.total");
    pthread_t t;
    void *r = (void *)3;
    pthread_create(&t, NULL, bound_thread, (void *)(uintptr_t)arena);
    pthread_join(t, &r);
    EXPECT_TRUE(r == NULL);
    EXPECT_EQ_U(stat("stats.guarded.total"), before);
    /* the rte layer knows malloc's sampled blocks */
    char *p = sampled_block(200);
    size_t n = 0;
    EXPECT_TRUE(dpm_rte_malloc_validate(p, &n) == 0 && n == dpm_usable_size(p));
    p = dpm_rte_realloc(p, 5000, 0);
    EXPECT_TRUE(p != NULL);
    dpm_rte_free(p);
}

/* A thread's first slow path is sampled only by chance: 50 threads at a
 * rate of one in 2^40 sample nothing (review r33: each thread's first). */
static void *one_block(void *arg)
{
    dpm_free(dpm_malloc(100));
    return arg;
}

TEST(threads_start_anywhere)
{
    size_t before = stat("stats.guarded.total");
    for (int i = 0; i < 50; i++) {
        pthread_t t;
        pthread_create(&t, NULL, one_block, NULL);
        pthread_join(t, NULL);
    }
    EXPECT_EQ_U(stat("stats.guarded.total"), before);
}

TEST(nothing_sampled_when_off)
{
    EXPECT_TRUE(churn((void *)3) == NULL);
    EXPECT_EQ_U(stat("stats.guarded.total"), 0);
}

/* Sampling counts the blocks the slow paths hand out and refill: a
 * program whose blocks go through the caches' refills (here 200 rounds
 * of 2000 blocks allocated, then freed) has about one allocation in N
 * sampled; one that frees and allocates the same cached block forever
 * reaches no slow path to count (docs/config.md, guard_sample). */
TEST(about_one_in_n)
{
    size_t rate = 0, len = sizeof rate;
    dpm_ctl("opt.guard_sample", &rate, &len, NULL, 0);
    static void *blocks[2000];
    for (int round = 0; round < 200; round++) {
        for (int i = 0; i < 2000; i++)
            blocks[i] = dpm_malloc(16 + (size_t)((i + round) % 64) * 16);
        for (int i = 0; i < 2000; i++)
            dpm_free(blocks[i]);
    }
    size_t n = stat("stats.guarded.total");
    printf("guard_sample:%zu: %zu of 400000 allocations sampled\n", rate, n);
    EXPECT_TRUE(n >= 400000 / rate / 4 && n <= 400000 / rate * 4);
}

int main(int argc, char **argv)
{
    size_t rate = 0, len = sizeof rate;
    dpm_ctl("opt.guard_sample", &rate, &len, NULL, 0);
    if (argc > 1 && strcmp(argv[1], "off") == 0)
        RUN(nothing_sampled_when_off);
    else if (argc > 1 && strcmp(argv[1], "rate") == 0)
        RUN(about_one_in_n);
    else if (argc > 1 && strcmp(argv[1], "rare") == 0)
        RUN(threads_start_anywhere);
    else {
        EXPECT_EQ_U(rate, 1);
        RUN(misuse_of_sampled_blocks_aborts);
        RUN(correct_programs_run);
        RUN(what_is_not_sampled);
    }
    return test_done();
}
