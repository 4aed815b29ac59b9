/*
 * large_loop_locks.c - what locks a same-size loop of big blocks takes
 * (README, "Big blocks cached by budget"): dpm_free(dpm_malloc(64 KiB))
 * served by the large cache of the CPU it runs on.
 *
 * Linked with -Wl,--wrap for pthread_mutex_lock and pthread_mutex_trylock,
 * so every call the allocator makes to either is counted (per thread:
 * only the looping thread's count). The arena's lock and bin locks are
 * read from the stats (stats.arenas.<i>.mutexes.*.num_ops).
 *
 *   one thread:  no pthread lock call at all in the loop, even when the
 *                thread moves halfway to a CPU whose cache it must make;
 *   two threads: two per pair, the CPU's large cache's lock (put
 *                at the free, take at the malloc), plus the arena lock
 *                at most once per 64 pairs (the cache's decay tick of its
 *                arena); no bin lock.
 */
#include "test.h"

#include <dpmalloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>

#define PAIRS 20000
#define BLOCK ((size_t)64 << 10)

static _Thread_local uint64_t lock_calls;

int __real_pthread_mutex_lock(pthread_mutex_t *m);
int __real_pthread_mutex_trylock(pthread_mutex_t *m);
int __wrap_pthread_mutex_lock(pthread_mutex_t *m);
int __wrap_pthread_mutex_trylock(pthread_mutex_t *m);

int __wrap_pthread_mutex_lock(pthread_mutex_t *m)
{
    lock_calls++;
    return __real_pthread_mutex_lock(m);
}

int __wrap_pthread_mutex_trylock(pthread_mutex_t *m)
{
    lock_calls++;
    return __real_pthread_mutex_trylock(m);
}

static uint64_t stat_u64(const char *fmt, unsigned arena)
{
    char name[128];
    uint64_t e = 1, v = 0;
    size_t len = sizeof(e);
    dpm_ctl("epoch", &e, &len, &e, sizeof(e));
    snprintf(name, sizeof(name), fmt, arena);
    len = sizeof(v);
    int r = dpm_ctl(name, &v, &len, NULL, 0);
    if (r != 0)
        TEST_FAIL("dpm_ctl(%s) = %d", name, r);
    return v;
}

static void loop(size_t n)
{
    for (size_t i = 0; i < n; i++) {
        void *p = dpm_malloc(BLOCK);
        if (p == NULL) {
            TEST_FAIL("dpm_malloc(%zu) = NULL", BLOCK);
            return;
        }
        *(volatile char *)p = 1;
        dpm_free(p);
    }
}

struct counts {
    uint64_t calls, arena_ops, bin_ops;
};

static bool pin_to(int cpu)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return sched_setaffinity(0, sizeof(one), &one) == 0;
}

/* What n pairs take, less what the reading of the stats takes itself
 * (the epoch's refresh locks the arena and every bin); halfway the
 * thread moves to CPU move_to if it is not -1. */
static struct counts run(size_t n, unsigned arena, int move_to)
{
    uint64_t a0 = stat_u64("stats.arenas.%u.mutexes.arena.num_ops", arena);
    uint64_t b0 = stat_u64("stats.arenas.%u.mutexes.bins.num_ops", arena);
    uint64_t c0 = lock_calls;
    loop(n / 2);
    if (move_to >= 0 && !pin_to(move_to))
        TEST_FAIL("could not move to CPU %d", move_to);
    loop(n - n / 2);
    struct counts c = {lock_calls - c0, 0, 0};
    c.arena_ops = stat_u64("stats.arenas.%u.mutexes.arena.num_ops", arena) - a0;
    c.bin_ops = stat_u64("stats.arenas.%u.mutexes.bins.num_ops", arena) - b0;
    return c;
}

/* The loop's counts. With fresh_cpu, the thread runs on its first
 * allowed CPU and moves halfway to its last, which has no large cache
 * yet: it makes one inside the loop (what a loaded machine's scheduler
 * does now and then). Without, every allowed CPU has its cache first, so
 * a move costs nothing: a cache is made once per CPU in the process's
 * life, under the make lock and the metadata lock. */
static struct counts measure(bool fresh_cpu)
{
    unsigned arena = 0;
    size_t len = sizeof(arena);
    EXPECT_EQ_I(dpm_ctl("thread.arena", &arena, &len, NULL, 0), 0);
    cpu_set_t all;
    int first = -1, last = -1;
    if (sched_getaffinity(0, sizeof(all), &all) != 0)
        CPU_ZERO(&all);
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &all))
            continue;
        if (first < 0)
            first = cpu;
        last = cpu;
        if (!fresh_cpu && pin_to(cpu))
            loop(4);
    }
    int move_to = -1;
    if (fresh_cpu && first >= 0 && pin_to(first))
        move_to = last != first ? last : -1;
    if (fresh_cpu && move_to < 0)
        printf("  (one CPU allowed: no move to a CPU without a cache is tried)\n");
    else if (first >= 0)
        sched_setaffinity(0, sizeof(all), &all);
    loop(64);   /* the block is in the cache, the cache has its reservation */
    struct counts base = run(0, arena, -1), c = run(PAIRS, arena, move_to);
    if (first >= 0)
        sched_setaffinity(0, sizeof(all), &all);
    c.calls -= base.calls;
    c.arena_ops -= base.arena_ops;
    c.bin_ops -= base.bin_ops;
    printf("  %u pairs of %zu KiB%s: %llu pthread lock calls, %llu arena lock acquisitions, %llu bin lock "
           "acquisitions\n",
           PAIRS, BLOCK >> 10, move_to >= 0 ? " (moving to a CPU with no cache halfway)" : "",
           (unsigned long long)c.calls, (unsigned long long)c.arena_ops, (unsigned long long)c.bin_ops);
    return c;
}

TEST(one_thread_takes_no_lock)
{
    struct counts c = measure(true);
    EXPECT(c.calls == 0, "%llu pthread lock calls in %u pairs with one thread, want 0",
           (unsigned long long)c.calls, PAIRS);
    EXPECT(c.bin_ops == 0, "%llu bin lock acquisitions", (unsigned long long)c.bin_ops);
}

static int wake[2];

static void *sleeper(void *arg)
{
    (void)arg;
    char ch;
    while (read(wake[0], &ch, 1) < 0) {
    }
    return NULL;
}

TEST(two_threads_take_only_the_own_cache_lock)
{
    pthread_t t;
    if (pipe(wake) != 0 || pthread_create(&t, NULL, sleeper, NULL) != 0) {
        TEST_FAIL("could not start the second thread");
        return;
    }
    struct counts c = measure(false);
    EXPECT(c.calls == 2 * (uint64_t)PAIRS + c.arena_ops,
           "%llu pthread lock calls in %u pairs with %llu arena lock acquisitions, want 2 per pair (the own "
           "cache's lock) and one per arena lock acquisition",
           (unsigned long long)c.calls, PAIRS, (unsigned long long)c.arena_ops);
    EXPECT(c.arena_ops <= PAIRS / 64 + 2, "%llu arena lock acquisitions in %u pairs, want at most one per 64",
           (unsigned long long)c.arena_ops, PAIRS);
    EXPECT(c.bin_ops == 0, "%llu bin lock acquisitions", (unsigned long long)c.bin_ops);
    if (write(wake[1], "x", 1) != 1)
        TEST_FAIL("write to the sleeper");
    pthread_join(t, NULL);
}

int main(void)
{
    RUN(one_thread_takes_no_lock);
    RUN(two_threads_take_only_the_own_cache_lock);
    return test_done();
}
