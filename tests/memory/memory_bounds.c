/*
 * memory_bounds.c - memory comes back: the programs of the issue-9 table,
 * each in a child process under its own DPMALLOC_CONF, with its target as
 * the assertion (RSS from /proc/self/statm, margins a noisy machine cannot
 * break).
 *
 * Proves:
 * - idle_threads: 4 threads each free a 60 MiB block and block on a
 *   condition variable (dirty_decay_ms:0,muzzy_decay_ms:0,
 *   background_thread:true): RSS 2 s later, and after malloc_trim(0), is
 *   within 8 MiB of the baseline;
 * - idle_cached: 4 threads each free three 1 MiB blocks the CPUs' large
 *   caches keep (tcache_large_bytes:16777216, so that 12 MiB fits in the
 *   cache of one CPU), and go idle (dirty_decay_ms:500, background thread): RSS is back within
 *   8 MiB of the baseline within two decay periods plus the background
 *   thread's passes, and malloc_trim(0) (default decay: 10 s) brings it
 *   back at once and returns 1, and 0 when there is nothing left;
 * - shrink: malloc(256 MiB), touched, then 19 reallocs each to 0.6x the
 *   size (down to ~16 KiB): RSS within 4 MiB of the baseline, usable at
 *   most 1.25x the last request;
 * - big_then_small: free(malloc(64 MiB)) touched, then malloc(16 MiB)
 *   touched: usable at most 1.25x 16 MiB and RSS within 16 + 6 MiB;
 * - consumer: a thread that only frees (20000 64-byte blocks another
 *   thread allocated) takes the bin lock in batches (fewer than 1 per 20
 *   frees), as an allocating thread does;
 * - the cache bounds docs/design.md states hold (small bins' slots x sizes,
 *   each CPU's large cache's budget).
 *
 * usage: test_memory_bounds   (re-executes itself for each child)
 */
#include "test.h"
#include "../ctl/ctl_util.h"

#include <malloc.h>
#include <pthread.h>

#define MiB ((size_t)1 << 20)

static char self_exe[4096];
static struct spawn_result res;

static void touch(void *p, size_t n) { memset(p, 0x5a, n); }

/* ---- children ---- */

static pthread_mutex_t idle_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_cond = PTHREAD_COND_INITIALIZER;
static int idle_ready, idle_release;
static size_t idle_block;
static int idle_rounds;

/* Allocates idle_rounds blocks of idle_block bytes, touches them, waits
 * until every thread holds its blocks (a thread's malloc would otherwise
 * take a block another thread freed into their CPU's large cache), frees
 * them, then blocks until released. */
static pthread_barrier_t all_allocated;
static void *free_then_idle(void *arg)
{
    (void)arg;
    void *live[8];
    for (int i = 0; i < idle_rounds; i++) {
        live[i] = malloc(idle_block);
        touch(live[i], idle_block);
    }
    pthread_barrier_wait(&all_allocated);
    for (int i = 0; i < idle_rounds; i++)
        free(live[i]);
    pthread_mutex_lock(&idle_lock);
    idle_ready++;
    pthread_cond_broadcast(&idle_cond);
    while (!idle_release)
        pthread_cond_wait(&idle_cond, &idle_lock);
    pthread_mutex_unlock(&idle_lock);
    return NULL;
}

/* Starts 4 idle threads; returns when each has freed its blocks. */
static void start_idle_threads(pthread_t *t)
{
    pthread_barrier_init(&all_allocated, NULL, 4);
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, free_then_idle, NULL);
    pthread_mutex_lock(&idle_lock);
    while (idle_ready < 4)
        pthread_cond_wait(&idle_cond, &idle_lock);
    pthread_mutex_unlock(&idle_lock);
}

static void stop_idle_threads(pthread_t *t)
{
    pthread_mutex_lock(&idle_lock);
    idle_release = 1;
    pthread_cond_broadcast(&idle_cond);
    pthread_mutex_unlock(&idle_lock);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
}

static size_t baseline(void)
{
    free(malloc(100));
    return rss_bytes();
}

static int child_idle_threads(void)
{
    size_t base = baseline();
    pthread_t t[4];
    idle_block = 60 * MiB;
    idle_rounds = 1;
    start_idle_threads(t);
    usleep(2000 * 1000);
    printf("base=%zu\nafter_2s=%zu\n", base, rss_bytes());
    printf("trim_ret=%d\n", malloc_trim(0));
    printf("after_trim=%zu\n", rss_bytes());
    stop_idle_threads(t);
    return 0;
}

/* Samples RSS every 20 ms for up to `ms`; prints when it first came
 * within 8 MiB of base. */
static void watch_rss(size_t base, int ms)
{
    int fell = -1;
    for (int waited = 0; waited <= ms; waited += 20) {
        if (rss_bytes() <= base + 8 * MiB) {
            fell = waited;
            break;
        }
        usleep(20 * 1000);
    }
    printf("fell_ms=%d\nfinal=%zu\n", fell, rss_bytes());
}

static int child_idle_cached(void)
{
    size_t base = baseline();
    pthread_t t[4];
    idle_block = 1 * MiB;
    idle_rounds = 3;
    start_idle_threads(t);
    size_t tcache_bytes = 0, len = sizeof tcache_bytes;
    uint64_t epoch = 1;
    size_t elen = sizeof epoch;
    dpm_ctl("epoch", &epoch, &elen, &epoch, sizeof epoch);
    dpm_ctl("stats.tcache_bytes", &tcache_bytes, &len, NULL, 0);
    printf("base=%zu\nidle_start=%zu\ncached=%zu\n", base, rss_bytes(), tcache_bytes);
    watch_rss(base, 3000);
    stop_idle_threads(t);
    return 0;
}

static int child_idle_cached_trim(void)
{
    size_t base = baseline();
    pthread_t t[4];
    idle_block = 1 * MiB;
    idle_rounds = 3;
    start_idle_threads(t);
    printf("base=%zu\nidle_start=%zu\n", base, rss_bytes());
    printf("trim_ret=%d\n", malloc_trim(0));
    printf("after_trim=%zu\n", rss_bytes());
    printf("trim_again=%d\n", malloc_trim(0));
    stop_idle_threads(t);
    return 0;
}

static int child_shrink(void)
{
    size_t base = baseline();
    size_t size = 256 * MiB;
    char *p = malloc(size);
    touch(p, size);
    for (int i = 0; i < 19; i++) {
        size = size * 6 / 10;
        p = realloc(p, size);
        if (p == NULL)
            return 3;
    }
    printf("base=%zu\nrss=%zu\nlast=%zu\nusable=%zu\n", base, rss_bytes(), size, malloc_usable_size(p));
    free(p);
    return 0;
}

static int child_big_then_small(void)
{
    size_t base = baseline();
    char *big = malloc(64 * MiB);
    touch(big, 64 * MiB);
    free(big);
    char *p = malloc(16 * MiB);
    touch(p, 16 * MiB);
    printf("base=%zu\nrss=%zu\nusable=%zu\n", base, rss_bytes(), malloc_usable_size(p));
    free(p);
    return 0;
}

enum { NCONSUMED = 20000 };
static void *consumed[NCONSUMED];

static void *consume(void *arg)
{
    (void)arg;
    for (int i = 0; i < NCONSUMED; i++)
        free(consumed[i]);
    return NULL;
}

static uint64_t all_bins_lock_ops(unsigned bin)
{
    unsigned narenas = 0;
    size_t len = sizeof narenas;
    uint64_t epoch = 1, total = 0;
    size_t elen = sizeof epoch;
    dpm_ctl("epoch", &epoch, &elen, &epoch, sizeof epoch);
    dpm_ctl("arenas.narenas", &narenas, &len, NULL, 0);
    for (unsigned a = 0; a < narenas; a++) {
        char name[96];
        uint64_t v = 0;
        len = sizeof v;
        snprintf(name, sizeof name, "stats.arenas.%u.bins.%u.mutex.num_ops", a, bin);
        if (dpm_ctl(name, &v, &len, NULL, 0) == 0)
            total += v;
    }
    return total;
}

static int child_consumer(void)
{
    unsigned bin = 0;
    for (;; bin++) {
        char name[64];
        size_t size = 0, len = sizeof size;
        snprintf(name, sizeof name, "arenas.bin.%u.size", bin);
        if (dpm_ctl(name, &size, &len, NULL, 0) != 0)
            return 3;
        if (size == 64)
            break;
    }
    for (int i = 0; i < NCONSUMED; i++)
        consumed[i] = malloc(64);
    uint64_t before = all_bins_lock_ops(bin);
    pthread_t t;
    pthread_create(&t, NULL, consume, NULL);
    pthread_join(t, NULL);
    printf("lock_ops=%llu\n", (unsigned long long)(all_bins_lock_ops(bin) - before));
    return 0;
}

static int child(const char *mode)
{
    if (strcmp(mode, "idle_threads") == 0)
        return child_idle_threads();
    if (strcmp(mode, "idle_cached") == 0)
        return child_idle_cached();
    if (strcmp(mode, "idle_cached_trim") == 0)
        return child_idle_cached_trim();
    if (strcmp(mode, "shrink") == 0)
        return child_shrink();
    if (strcmp(mode, "big_then_small") == 0)
        return child_big_then_small();
    if (strcmp(mode, "consumer") == 0)
        return child_consumer();
    return 2;
}

/* ---- parent ---- */

#define kv(key) spawn_kv(&res, key)

static bool run_mode(const char *mode, const char *conf)
{
    if (!spawn_mode(self_exe, mode, conf, 30, &res))
        return false;
    fprintf(stderr, "    [%s] %s:\n%s", mode, conf, res.out);
    return true;
}

TEST(idle_threads_give_memory_back)
{
    if (!run_mode("idle_threads", "dirty_decay_ms:0,muzzy_decay_ms:0,background_thread:true"))
        return;
    size_t base = kv("base");
    EXPECT(kv("after_2s") <= base + 8 * MiB, "4 idle threads freed 60 MiB each: RSS %zu MiB 2 s later (base %zu)",
           kv("after_2s") / MiB, base / MiB);
    EXPECT(kv("after_trim") <= base + 8 * MiB, "after malloc_trim(0): RSS %zu MiB (base %zu)",
           kv("after_trim") / MiB, base / MiB);
}

TEST(idle_thread_caches_reclaimed)
{
    if (!run_mode("idle_cached", "dirty_decay_ms:500,muzzy_decay_ms:0,background_thread:true,tcache_large_bytes:16777216"))
        return;
    size_t base = kv("base");
    EXPECT(kv("cached") >= 8 * MiB, "the idle threads' caches hold %zu bytes: the test does not exercise them",
           kv("cached"));
    int fell = (int)kv("fell_ms");
    /* within two decay periods (1000 ms) */
    EXPECT(fell >= 0 && fell <= 1000, "idle cached blocks: RSS back within 8 MiB after %d ms (final %zu MiB, base %zu)",
           fell, kv("final") / MiB, base / MiB);
    if (!run_mode("idle_cached_trim", "background_thread:false,tcache_large_bytes:16777216"))
        return;
    base = kv("base");
    EXPECT(kv("idle_start") >= base + 8 * MiB, "the idle threads hold only %zu MiB", (kv("idle_start") - base) / MiB);
    EXPECT(kv("after_trim") <= base + 8 * MiB, "after malloc_trim(0): RSS %zu MiB (base %zu)",
           kv("after_trim") / MiB, base / MiB);
    EXPECT_EQ_U(kv("trim_ret"), 1);
    EXPECT_EQ_U(kv("trim_again"), 0);
}

TEST(realloc_shrinks)
{
    if (!run_mode("shrink", ""))
        return;
    EXPECT(kv("rss") <= kv("base") + 4 * MiB, "256 MiB shrunk by 19 reallocs to %zu bytes: RSS %zu MiB (base %zu)",
           kv("last"), kv("rss") / MiB, kv("base") / MiB);
    EXPECT(kv("usable") <= kv("last") + kv("last") / 4, "usable %zu for a last request of %zu", kv("usable"),
           kv("last"));
}

TEST(big_block_does_not_serve_small_request)
{
    if (!run_mode("big_then_small", ""))
        return;
    EXPECT(kv("usable") <= 20 * MiB, "malloc(16 MiB) after free(64 MiB): usable %zu MiB", kv("usable") / MiB);
    EXPECT(kv("rss") <= kv("base") + 22 * MiB, "RSS %zu MiB (base %zu)", kv("rss") / MiB, kv("base") / MiB);
}

TEST(consumer_thread_frees_in_batches)
{
    if (!run_mode("consumer", ""))
        return;
    EXPECT(kv("lock_ops") <= NCONSUMED / 20, "a thread that only frees took the bin lock %zu times for %d frees",
           kv("lock_ops"), NCONSUMED);
}

/* docs/design.md: with the defaults a thread's small bins hold at most
 * 2.4 MiB (slots x class size over every small class), each CPU's large
 * cache at most tcache_large_bytes (4 MiB), so all of them at most CPUs x
 * 4 MiB, however many threads free. */
TEST(documented_cache_bounds)
{
    free(malloc(16));
    size_t total = 0;
    for (unsigned j = 0;; j++) {
        char name[64];
        size_t size = 0, len = sizeof size, n = 0, nlen = sizeof n;
        snprintf(name, sizeof name, "arenas.bin.%u.size", j);
        if (dpm_ctl(name, &size, &len, NULL, 0) != 0)
            break;
        size_t v = size;
        dpm_ctl("thread.tcache.ncached_max.read_sizeclass", &n, &nlen, &v, sizeof v);
        total += n * size;
    }
    EXPECT(total > 1 * MiB && total <= 2.5 * MiB, "small bins bound %zu bytes, documented 2.4 MiB", total);
    size_t budget = 0, len = sizeof budget;
    dpm_ctl("opt.tcache_large_bytes", &budget, &len, NULL, 0);
    EXPECT_EQ_U(budget, 4 * MiB);
    /* the per-CPU budgets hold whatever is freed (the thread may move
     * between CPUs meanwhile) */
    size_t cpus = (size_t)sysconf(_SC_NPROCESSORS_CONF);
    size_t before = 0, after = 0;
    len = sizeof before;
    uint64_t epoch = 1;
    size_t elen = sizeof epoch;
    dpm_ctl("epoch", &epoch, &elen, &epoch, sizeof epoch);
    dpm_ctl("stats.tcache_bytes", &before, &len, NULL, 0);
    void *v[40];
    for (int i = 0; i < 40; i++)
        v[i] = malloc(100000 + (size_t)i * 37000);
    for (int i = 0; i < 40; i++)
        free(v[i]);
    dpm_ctl("epoch", &epoch, &elen, &epoch, sizeof epoch);
    len = sizeof after;
    dpm_ctl("stats.tcache_bytes", &after, &len, NULL, 0);
    EXPECT(after <= before + budget * cpus, "40 large frees: the caches grew by %zu bytes, budget %zu x %zu CPUs",
           after - before, budget, cpus);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--child") == 0)
        return child(argv[2]);
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (n <= 0)
        return 2;
    self_exe[n] = '\0';
    RUN(idle_threads_give_memory_back);
    RUN(idle_thread_caches_reclaimed);
    RUN(realloc_shrinks);
    RUN(big_block_does_not_serve_small_request);
    RUN(consumer_thread_frees_in_batches);
    RUN(documented_cache_bounds);
    return test_done();
}
