/*
 * test_large_cache.c - the per-CPU large caches (large_cache.h) kept
 * whole: random large allocations, frees and chains of growth (slack),
 * single-threaded and with threads moved between CPUs while another
 * thread drains the caches; after each phase the invariant checker
 * (large_caches_check: bytes within tcache_large_bytes and equal to the
 * blocks' and slack's, every cached block parked, per-class counts
 * consistent) and the checks here: the total within CPUs x the budget,
 * the per-block walk adds up to the byte count. Then: a drain from
 * another thread (thread.tcache.flush) empties every CPU's cache, and
 * arena.<i>.purge takes only arena <i>'s blocks; a fork while other
 * threads put and take leaves the child whole caches that work; a
 * double free of a cached block aborts naming it.
 */
#include "alloc.h"
#include "large_cache.h"
#include "dpmalloc.h"
#include "unit.h"

#include <pthread.h>
#include <sched.h>
#include <sys/wait.h>

static size_t walked;
static void add_bytes(const span_t *s, size_t bytes, void *arg)
{
    (void)s, (void)arg;
    walked += bytes;
}

static size_t opt_size(const char *name)
{
    size_t v = 0, l = sizeof v;
    dpm_ctl(name, &v, &l, NULL, 0);
    return v;
}

static long ncpus(void) { return sysconf(_SC_NPROCESSORS_CONF); }

/* Only while no other thread allocates. */
static void check_whole(const char *when)
{
    const char *why = large_caches_check();
    EXPECT_TRUE(why == NULL, "%s: %s", when, why);
    walked = 0;
    large_caches_for_each(add_bytes, NULL);
    EXPECT_TRUE(walked == large_caches_bytes(), "%s: the walk found %zu bytes, the caches count %zu", when, walked,
                large_caches_bytes());
    size_t bound = opt_size("opt.tcache_large_bytes") * (size_t)ncpus();
    EXPECT_TRUE(large_caches_bytes() <= bound, "%s: %zu bytes cached, bound %zu", when, large_caches_bytes(), bound);
}

static void move_to_cpu(unsigned cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    (void)sched_setaffinity(0, sizeof(set), &set);
}

static void allow_all_cpus(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    for (unsigned c = 0; c < CPU_SETSIZE; c++)
        CPU_SET(c, &set);
    (void)sched_setaffinity(0, sizeof(set), &set);
}

/* Large sizes, most of them classes the caches hold, some past them. */
static size_t random_size(uint64_t *rng)
{
    uint64_t r = unit_rand(rng);
    switch (r % 4) {
    case 0: return 16384 + r / 4 % 65536;
    case 1: return (size_t)16384 << (r / 4 % 7);   /* 16 KiB .. 1 MiB */
    case 2: return 1 + r / 4 % ((size_t)6 << 20);
    default: return 20000 + r / 4 % 300000;
    }
}

#define SLOTS 64
static void churn(uint64_t seed, long ops, bool move)
{
    void *live[SLOTS] = {0};
    uint64_t rng = seed;
    for (long k = 0; k < ops; k++) {
        if (move && k % 97 == 0)
            move_to_cpu((unsigned)(unit_rand(&rng) % (uint64_t)ncpus()));
        unsigned i = (unsigned)(unit_rand(&rng) % SLOTS);
        uint64_t r = unit_rand(&rng);
        if (live[i] != NULL && r % 3 == 0 && dpm_usable_size(live[i]) <= ((size_t)2 << 20)) {
            /* a chain of growth: the next malloc may get slack */
            void *q = dpm_realloc(live[i], dpm_usable_size(live[i]) * 2);
            if (q != NULL)
                live[i] = q;
            continue;
        }
        dpm_free(live[i]);
        live[i] = dpm_malloc(random_size(&rng));
        if (live[i] != NULL)
            memset(live[i], 1, 64);
    }
    for (unsigned i = 0; i < SLOTS; i++)
        dpm_free(live[i]);
    allow_all_cpus();
}

/* ---- threads moved between CPUs while another drains ------------------- */

static volatile bool stop;

static void *worker(void *arg) { churn((uint64_t)(uintptr_t)arg, 20000, true); return NULL; }

static void *drainer(void *arg)
{
    (void)arg;
    for (unsigned k = 0; !__atomic_load_n(&stop, __ATOMIC_RELAXED); k++) {
        large_caches_flush(k % 2 == 0, NULL);
        usleep(300);
    }
    return NULL;
}

static void test_threads(void)
{
    pthread_t w[4], d;
    pthread_create(&d, NULL, drainer, NULL);
    for (unsigned i = 0; i < 4; i++)
        pthread_create(&w[i], NULL, worker, (void *)(uintptr_t)(i + 11));
    for (unsigned i = 0; i < 4; i++)
        pthread_join(w[i], NULL);
    __atomic_store_n(&stop, true, __ATOMIC_RELAXED);
    pthread_join(d, NULL);
    check_whole("after threads, drains and migrations");
}

/* ---- drains from another thread ---------------------------------------- */

/* Frees blocks of 64 KiB on every CPU in turn: each CPU's cache holds some. */
static void fill_every_cpu(void)
{
    for (long cpu = 0; cpu < ncpus(); cpu++) {
        move_to_cpu((unsigned)cpu);
        void *p[4];
        for (unsigned i = 0; i < 4; i++)
            p[i] = dpm_malloc(65536);
        for (unsigned i = 0; i < 4; i++)
            dpm_free(p[i]);
    }
    allow_all_cpus();
}

static void *flush_from_elsewhere(void *arg)
{
    (void)arg;
    dpm_ctl("thread.tcache.flush", NULL, NULL, NULL, 0);
    return NULL;
}

static unsigned purge_arena;
static void *purge_from_elsewhere(void *arg)
{
    (void)arg;
    char name[64];
    snprintf(name, sizeof name, "arena.%u.purge", purge_arena);
    dpm_ctl(name, NULL, NULL, NULL, 0);
    return NULL;
}

static size_t of_arena_bytes;
static unsigned of_arena_index;
static void count_of_arena(const span_t *s, size_t bytes, void *arg)
{
    (void)arg;
    if (s->arena->index == of_arena_index)
        of_arena_bytes += bytes;
}

static size_t bytes_of_arena(unsigned index)
{
    of_arena_bytes = 0;
    of_arena_index = index;
    large_caches_for_each(count_of_arena, NULL);
    return of_arena_bytes;
}

static void test_drains(void)
{
    fill_every_cpu();
    EXPECT_TRUE(large_caches_bytes() >= (size_t)65536 * 4, "blocks freed on every CPU: %zu bytes cached",
                large_caches_bytes());
    pthread_t t;
    pthread_create(&t, NULL, flush_from_elsewhere, NULL);
    pthread_join(t, NULL);
    EXPECT_EQ_U(large_caches_bytes(), 0);
    check_whole("after thread.tcache.flush from another thread");

    /* blocks of two arenas: this thread's, and a second thread's */
    unsigned mine = span_of(dpm_malloc(65536))->arena->index;   /* leaks one block: its arena's index */
    fill_every_cpu();
    size_t before = large_caches_bytes();
    purge_arena = mine + 1 < 4 ? mine + 1 : 0;   /* an arena with none of them */
    pthread_create(&t, NULL, purge_from_elsewhere, NULL);
    pthread_join(t, NULL);
    EXPECT_TRUE(large_caches_bytes() == before, "arena.%u.purge took other arenas' blocks (%zu of %zu left)",
                purge_arena, large_caches_bytes(), before);
    purge_arena = mine;
    pthread_create(&t, NULL, purge_from_elsewhere, NULL);
    pthread_join(t, NULL);
    EXPECT_EQ_U(bytes_of_arena(mine), 0);
    check_whole("after arena.<i>.purge from another thread");
}

/* ---- fork ---------------------------------------------------------------- */

static void *busy(void *arg)
{
    (void)arg;
    uint64_t rng = 77;
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
        void *p = dpm_malloc(random_size(&rng));
        void *q = dpm_realloc(dpm_malloc(40000), 90000);
        dpm_free(p);
        dpm_free(q);
    }
    return NULL;
}

static void test_fork(void)
{
    __atomic_store_n(&stop, false, __ATOMIC_RELAXED);
    pthread_t t[2];
    for (unsigned i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, busy, NULL);
    for (unsigned round = 0; round < 10; round++) {
        fill_every_cpu();
        pid_t pid = fork();
        if (pid == 0) {
            /* the other threads are gone: the caches must be whole, and work */
            const char *why = large_caches_check();
            if (why != NULL) {
                fprintf(stderr, "child: %s\n", why);
                _exit(2);
            }
            churn(5, 500, false);
            if (large_caches_check() != NULL)
                _exit(3);
            large_caches_flush(false, NULL);
            _exit(large_caches_bytes() == 0 ? 0 : 4);
        }
        int status = -1;
        waitpid(pid, &status, 0);
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fork round %u: child status %d", round, status);
    }
    __atomic_store_n(&stop, true, __ATOMIC_RELAXED);
    for (unsigned i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    check_whole("after forks");
}

static void free_twice(void *p) { dpm_free(p); }

int main(void)
{
    dpm_free(dpm_malloc(1));   /* initialise */
    if (opt_size("opt.tcache_large_bytes") <= SMALL_MAX) {
        printf("test_large_cache: skipped: no large class fits tcache_large_bytes\n");
        return 77;
    }
    check_whole("at start");
    churn(1, 30000, false);
    check_whole("after churn on one thread");
    churn(2, 30000, true);
    check_whole("after churn moving between CPUs");
    test_threads();
    test_drains();
    test_fork();
    /* a block in a large cache, freed again */
    void *p = dpm_malloc(65536);
    dpm_free(p);
    EXPECT_TRUE(span_of(p)->parked, "a freed 64 KiB block is not parked in a large cache");
    expect_child_aborts(free_twice, p, "double free");
    return unit_finish("test_large_cache");
}
