/*
 * test_cpu_cache.c - the CPU caches (cpu_cache.h) and transfer caches
 * (transfer.h) kept whole: random allocations and frees, single-threaded
 * and with threads that free each other's blocks while they are moved
 * between CPUs and other threads drain the caches; after each phase the
 * invariant checker (cpu_caches_check) and the checks here: no block in
 * two places, the byte counts add up and stay within the bounds, a drain empties everything, and a double
 * free of a block that sits in a CPU cache aborts naming it.
 * Skips (77) where the process runs on thread caches.
 */
#include "alloc.h"
#include "transfer.h"
#include "dpmalloc.h"
#include "unit.h"

#include <pthread.h>
#include <sched.h>

#define MAX_CACHED (1u << 20)
static const void *seen[MAX_CACHED];
static size_t nseen, seen_bytes;

static void collect(const void *p, void *arg)
{
    (void)arg;
    if (nseen < MAX_CACHED)
        seen[nseen++] = p;
    seen_bytes += span_of(p)->objsize;
}

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (const void *const *)a, y = (uintptr_t) * (const void *const *)b;
    return x < y ? -1 : x > y;
}

static unsigned ncpus_made(void)
{
    unsigned n = 0;
    for (unsigned cpu = 0; cpu < CPU_SLOTS_MAX; cpu++)
        n += cpu_cache_table[cpu] != &cpu_cache_locked;
    return n;
}

/* Only while no other thread allocates. */
static void check_whole(const char *when)
{
    const char *why = cpu_caches_check();
    EXPECT_TRUE(why == NULL, "%s: %s", when, why);
    nseen = seen_bytes = 0;
    cpu_caches_for_each_block(collect, NULL);
    EXPECT_TRUE(nseen < MAX_CACHED, "%s: too many cached blocks to check", when);
    qsort(seen, nseen, sizeof(seen[0]), cmp_ptr);
    size_t dups = 0;
    for (size_t i = 1; i < nseen; i++)
        dups += seen[i] == seen[i - 1];
    EXPECT_TRUE(dups == 0, "%s: %zu blocks cached twice", when, dups);
    EXPECT_EQ_U(seen_bytes, cpu_caches_bytes() + transfer_bytes());
    EXPECT_TRUE(cpu_caches_bytes() <= cpu_cache_bound() * ncpus_made(), "%s: %zu bytes in %u CPU caches, bound %zu each",
                when, cpu_caches_bytes(), ncpus_made(), cpu_cache_bound());
    EXPECT_TRUE(transfer_bytes() <= transfer_bound(), "%s: transfer caches hold %zu, bound %zu", when,
                transfer_bytes(), transfer_bound());
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

static size_t random_size(uint64_t *rng)
{
    uint64_t r = unit_rand(rng);
    return r % 8 != 0 ? 1 + r / 8 % 512 : 1 + r / 8 % SMALL_MAX;
}

#define SLOTS 4096
static void churn(uint64_t seed, long ops, bool move)
{
    static __thread void *live[SLOTS];
    uint64_t rng = seed;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    for (long k = 0; k < ops; k++) {
        if (move && k % 997 == 0)
            move_to_cpu((unsigned)(unit_rand(&rng) % (uint64_t)ncpu));
        unsigned i = (unsigned)(unit_rand(&rng) % SLOTS);
        dpm_free(live[i]);
        live[i] = dpm_malloc(random_size(&rng));
    }
    for (unsigned i = 0; i < SLOTS; i++) {
        dpm_free(live[i]);
        live[i] = NULL;
    }
    allow_all_cpus();
}

/* ---- threads that free each other's blocks, moved and drained ---------- */

#define NWORKERS 4
#define MAILBOX 256
static struct mailbox {
    pthread_mutex_t lock;
    void *slot[MAILBOX];
    unsigned n;
} boxes[NWORKERS];
static volatile bool stop_draining;

static void *worker(void *arg)
{
    unsigned me = (unsigned)(uintptr_t)arg;
    uint64_t rng = 0x9e3779b97f4a7c15ull * (me + 1);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    void *mine[512] = {0};
    for (long k = 0; k < 200000; k++) {
        if (k % 499 == 0)
            move_to_cpu((unsigned)(unit_rand(&rng) % (uint64_t)ncpu));
        unsigned i = (unsigned)(unit_rand(&rng) % 512);
        if (mine[i] != NULL) {
            /* half the blocks go to another worker, who frees them */
            struct mailbox *b = &boxes[unit_rand(&rng) % NWORKERS];
            pthread_mutex_lock(&b->lock);
            if (b->n < MAILBOX) {
                b->slot[b->n++] = mine[i];
                mine[i] = NULL;
            }
            pthread_mutex_unlock(&b->lock);
            dpm_free(mine[i]);
        }
        mine[i] = dpm_malloc(random_size(&rng));
        struct mailbox *own = &boxes[me];
        pthread_mutex_lock(&own->lock);
        while (own->n > 0)
            dpm_free(own->slot[--own->n]);
        pthread_mutex_unlock(&own->lock);
    }
    for (unsigned i = 0; i < 512; i++)
        dpm_free(mine[i]);
    allow_all_cpus();
    return NULL;
}

static void *drainer(void *arg)
{
    (void)arg;
    for (unsigned k = 0; !__atomic_load_n(&stop_draining, __ATOMIC_RELAXED); k++) {
        cpu_caches_drain(k % 2 == 0);
        usleep(200);
    }
    return NULL;
}

static void test_threads(void)
{
    for (unsigned i = 0; i < NWORKERS; i++)
        pthread_mutex_init(&boxes[i].lock, NULL);
    pthread_t w[NWORKERS], d;
    pthread_create(&d, NULL, drainer, NULL);
    for (unsigned i = 0; i < NWORKERS; i++)
        pthread_create(&w[i], NULL, worker, (void *)(uintptr_t)i);
    for (unsigned i = 0; i < NWORKERS; i++)
        pthread_join(w[i], NULL);
    __atomic_store_n(&stop_draining, true, __ATOMIC_RELAXED);
    pthread_join(d, NULL);
    for (unsigned i = 0; i < NWORKERS; i++)
        while (boxes[i].n > 0)
            dpm_free(boxes[i].slot[--boxes[i].n]);
    check_whole("after threads, drains and migrations");
}

static void free_twice(void *p)
{
    dpm_free(p);
}

int main(void)
{
    dpm_free(dpm_malloc(1));   /* initialise */
    if (!cpu_caches_on) {
        printf("test_cpu_cache: skipped: the process runs on thread caches (stats.front_end \"thread\")\n");
        return 77;
    }
    check_whole("at start");
    churn(1, 300000, false);
    check_whole("after churn on one thread");
    churn(2, 300000, true);
    check_whole("after churn moving between CPUs");
    test_threads();
    size_t bytes = cpu_caches_bytes() + transfer_bytes();
    EXPECT_EQ_U(cpu_caches_drain(false), bytes);
    EXPECT_EQ_U(cpu_caches_bytes(), 0);
    EXPECT_EQ_U(transfer_bytes(), 0);
    check_whole("after a drain");
    /* a block in this CPU's cache, freed again */
    void *p = dpm_malloc(64);
    dpm_free(p);
    EXPECT_TRUE(cpu_caches_hold(p, span_of(p)->tcache_class), "a freed block is not in a CPU cache");
    expect_child_aborts(free_twice, p, "double free");
    return unit_finish("test_cpu_cache");
}
