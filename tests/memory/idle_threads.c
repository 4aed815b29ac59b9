/*
 * idle_threads.c - cached memory does not grow with the number of live
 * threads: with the per-CPU front end (stats.front_end "cpu") a thread
 * holds no cached small blocks, so 1000 idle threads that each churned
 * 4 MiB of small blocks cost no more cache than 10 do, the caches stay
 * within their per-CPU budgets, and malloc_trim(0) empties the CPU and
 * transfer caches while those threads still live.
 *
 * Two phases in one process, each with threads that allocate small blocks
 * (16..1024 B, random) in batches, touch and check them, free them, until
 * 4 MiB went through their hands, then wait at a barrier (a mutex and
 * condition variable: a thread there makes no allocator call) while the
 * main thread reads the statistics:
 *   small  max(10, CPUs this process may use) threads, joined afterwards
 *          (at least one per CPU, so that both phases can reach every
 *          CPU's cache);
 *   1000   1000 threads with 64 KiB stacks; malloc_trim(0) while they wait.
 * In mode "cpu" (PERCPU = opt.percpu_bytes, NCPU = CPUs configured):
 *   - stats.cpu_cache_bytes <= PERCPU x NCPU and stats.transfer_bytes <=
 *     PERCPU x NCPU at the 1000-thread barrier, and stats.tcache_bytes
 *     (every cache) <= their sum: the threads' caches hold nothing;
 *   - stats.tcache_bytes with 1000 threads <= 2 x the small phase's figure,
 *     or PERCPU x NCPU when that is larger (how full the CPU caches happen
 *     to be varies; growth past what the CPUs can hold may not happen);
 *   - stats.tcache_bytes <= stats.cpu_cache_bytes + stats.transfer_bytes
 *     at the 1000-thread barrier: the threads hold no cached bytes;
 *   - stats.metadata grows by at most 4 MiB from the small phase to the
 *     1000-thread barrier: threads on the CPU caches make no cache of
 *     their own (a tcache_t is some 14 KiB; 1000 of them made 12 MiB);
 *   - after malloc_trim(0), with the 1000 threads still waiting:
 *     stats.cpu_cache_bytes == 0, stats.transfer_bytes == 0 and
 *     stats.tcache_bytes == 0.
 * In mode "thread" (percpu:false) each thread keeps its own cache: the
 * figures are printed and no bound is checked. A build without
 * stats.front_end (or, in mode "cpu", without one of the statistics
 * above) prints the figures and exits 77 (skipped). So does a machine
 * whose thread limit refuses 1000 threads (pthread_create: EAGAIN).
 * RSS (/proc/self/statm) is printed at the start, at the 1000-thread
 * barrier and after the trim.
 *
 * usage: test_idle_threads   (exit 0 pass, 1 fail, 77 skipped)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dpmalloc.h>

#include "override.h"
#include "review/rss.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define CHURN_BYTES (4 * MiB)
#define BATCH 512 /* blocks a thread holds at once (~256 KiB) */
#define MANY 1000
#define STACK (64 * KiB)

/* ---- statistics ---- */

/* A size_t statistic after an epoch refresh; dpm_ctl's result (ENOENT: a
 * name this build does not know). */
static int stat_size(const char *name, size_t *v)
{
    uint64_t e = 1;
    size_t l = sizeof e;
    dpm_ctl("epoch", &e, &l, &e, sizeof e);
    *v = 0;
    l = sizeof *v;
    return dpm_ctl(name, v, &l, NULL, 0);
}

/* The statistics one reading takes; rc_* is dpm_ctl's result per name. */
struct reading {
    double rss;
    size_t tcache, cpu, transfer, metadata;
    int rc_tcache, rc_cpu, rc_transfer, rc_metadata;
};

static void take(struct reading *r)
{
    r->rc_tcache = stat_size("stats.tcache_bytes", &r->tcache);
    r->rc_cpu = stat_size("stats.cpu_cache_bytes", &r->cpu);
    r->rc_transfer = stat_size("stats.transfer_bytes", &r->transfer);
    r->rc_metadata = stat_size("stats.metadata", &r->metadata);
    r->rss = rss_mib();
}

static void print_size(const char *name, int rc, size_t v)
{
    if (rc == 0)
        printf("  %s %.2f MiB", name, (double)v / (double)MiB);
    else
        printf("  %s (%s)", name, rc == ENOENT ? "ENOENT" : strerror(rc));
}

static void print_reading(const char *when, const struct reading *r)
{
    printf("%-34s rss %7.1f MiB", when, r->rss);
    print_size("tcache_bytes", r->rc_tcache, r->tcache);
    print_size("cpu_cache_bytes", r->rc_cpu, r->cpu);
    print_size("transfer_bytes", r->rc_transfer, r->transfer);
    print_size("metadata", r->rc_metadata, r->metadata);
    printf("\n");
    fflush(stdout);
}

/* ---- the churning threads ---- */

struct phase {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int arrived, release;
    atomic_int bad; /* blocks that came back wrong */
};

struct worker {
    struct phase *ph;
    unsigned seed;
};

/* Batches of small blocks, each touched whole and checked before its free,
 * until CHURN_BYTES went through; everything is freed at the end. The
 * pointer array lives on the stack: the thread allocates nothing else. */
static void churn(struct worker *w)
{
    void *live[BATCH];
    size_t size[BATCH];
    size_t done = 0;
    unsigned seed = w->seed;
    while (done < CHURN_BYTES) {
        int n = 0;
        for (; n < BATCH && done < CHURN_BYTES; n++) {
            size[n] = 16 + (size_t)(rand_r(&seed) % 1009);
            live[n] = malloc(size[n]);
            if (live[n] == NULL) {
                atomic_fetch_add(&w->ph->bad, 1);
                size[n] = 0;
                continue;
            }
            memset(live[n], (int)(n & 0xff), size[n]);
            done += size[n];
        }
        for (int i = 0; i < n; i++) {
            if (live[i] == NULL)
                continue;
            const unsigned char *p = live[i];
            if (p[0] != (unsigned char)(i & 0xff) || p[size[i] - 1] != (unsigned char)(i & 0xff))
                atomic_fetch_add(&w->ph->bad, 1);
            free(live[i]);
        }
    }
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    churn(w);
    struct phase *ph = w->ph;
    pthread_mutex_lock(&ph->lock);
    ph->arrived++;
    pthread_cond_broadcast(&ph->cond);
    while (!ph->release)
        pthread_cond_wait(&ph->cond, &ph->lock);
    pthread_mutex_unlock(&ph->lock);
    return NULL;
}

/* Starts n churning threads (64 KiB stacks) and waits until all of them
 * are at the barrier; returns how many started (fewer: pthread_create's
 * error in *err). */
static int start(struct phase *ph, pthread_t *t, struct worker *w, int n, unsigned seed0, int *err)
{
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, STACK);
    int started = 0;
    *err = 0;
    for (; started < n; started++) {
        w[started] = (struct worker){ph, seed0 + (unsigned)started};
        int rc = pthread_create(&t[started], &a, worker_main, &w[started]);
        if (rc != 0) {
            *err = rc;
            break;
        }
    }
    pthread_attr_destroy(&a);
    pthread_mutex_lock(&ph->lock);
    while (ph->arrived < started)
        pthread_cond_wait(&ph->cond, &ph->lock);
    pthread_mutex_unlock(&ph->lock);
    return started;
}

static void finish(struct phase *ph, pthread_t *t, int started)
{
    pthread_mutex_lock(&ph->lock);
    ph->release = 1;
    pthread_cond_broadcast(&ph->cond);
    pthread_mutex_unlock(&ph->lock);
    for (int i = 0; i < started; i++)
        pthread_join(t[i], NULL);
}

static void phase_init(struct phase *ph)
{
    pthread_mutex_init(&ph->lock, NULL);
    pthread_cond_init(&ph->cond, NULL);
    ph->arrived = ph->release = 0;
    atomic_init(&ph->bad, 0);
}

/* ---- main ---- */

static int fails;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("FAIL: " __VA_ARGS__);                                                          \
            printf("\n");                                                                          \
            fails++;                                                                               \
        }                                                                                          \
    } while (0)

static double mib(size_t b) { return (double)b / (double)MiB; }

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    test_expect_override();
    if (test_failures != 0) {
        printf("FAIL: malloc is not dpmalloc's in this program\n");
        return 1;
    }
    cpu_set_t set;
    int allowed = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    long nconf = sysconf(_SC_NPROCESSORS_CONF);
    if (nconf < 1)
        nconf = 1;
    int nsmall = allowed > 10 ? allowed : 10;

    struct reading start_r, small_r, many_r, trimmed_r;
    take(&start_r);
    print_reading("start", &start_r);

    static pthread_t t[MANY];
    static struct worker w[MANY];
    static struct phase ph;
    int err;

    phase_init(&ph);
    int started = start(&ph, t, w, nsmall, 1, &err);
    if (started == nsmall)
        take(&small_r);
    finish(&ph, t, started);
    if (started < nsmall) {
        printf("FAIL: pthread_create of thread %d of %d: %s\n", started + 1, nsmall, strerror(err));
        return 1;
    }
    char label[64];
    snprintf(label, sizeof label, "%d threads at the barrier", nsmall);
    print_reading(label, &small_r);
    CHECK(atomic_load(&ph.bad) == 0, "%d blocks NULL or overwritten in the %d-thread phase",
          atomic_load(&ph.bad), nsmall);

    phase_init(&ph);
    started = start(&ph, t, w, MANY, 100000, &err);
    if (started < MANY) {
        finish(&ph, t, started);
        if (err == EAGAIN) {
            printf("SKIP: pthread_create refused thread %d of %d (EAGAIN: the thread limit, "
                   "ulimit -u or kernel.threads-max, is too low for this test)\n",
                   started + 1, MANY);
            return 77;
        }
        printf("FAIL: pthread_create of thread %d of %d: %s\n", started + 1, MANY, strerror(err));
        return 1;
    }
    take(&many_r);
    print_reading("1000 threads at the barrier", &many_r);
    int trimmed = malloc_trim(0);
    take(&trimmed_r);
    snprintf(label, sizeof label, "after malloc_trim(0) (returned %d)", trimmed);
    print_reading(label, &trimmed_r);
    finish(&ph, t, started);
    CHECK(atomic_load(&ph.bad) == 0, "%d blocks NULL or overwritten in the 1000-thread phase",
          atomic_load(&ph.bad));
    CHECK(many_r.rc_tcache == 0, "stats.tcache_bytes: %s", strerror(many_r.rc_tcache));

    /* which front end, and its budget */
    const char *front = NULL;
    size_t len = sizeof front;
    int rc = dpm_ctl("stats.front_end", &front, &len, NULL, 0);
    if (rc == ENOENT) {
        printf("SKIP: stats.front_end is not known to this build (ENOENT): the per-CPU front end "
               "is not there; figures printed, no bound checked\n");
        return fails ? 1 : 77;
    }
    if (rc != 0 || front == NULL) {
        printf("FAIL: stats.front_end: %s\n", rc ? strerror(rc) : "NULL");
        return 1;
    }
    printf("front end \"%s\", %d CPUs allowed, %ld configured\n", front, allowed, nconf);
    if (strcmp(front, "cpu") != 0) {
        if (strcmp(front, "thread") != 0) {
            printf("FAIL: stats.front_end is \"%s\", neither \"cpu\" nor \"thread\"\n", front);
            return 1;
        }
        /* every thread keeps a cache of its own: no bound independent of
         * the number of threads to check */
        printf("mode thread: per-thread caches, figures printed, no bound checked\n");
        return fails ? 1 : 0;
    }

    size_t percpu = 0;
    len = sizeof percpu;
    rc = dpm_ctl("opt.percpu_bytes", &percpu, &len, NULL, 0);
    const char *missing = rc == ENOENT                 ? "opt.percpu_bytes"
                          : many_r.rc_cpu == ENOENT      ? "stats.cpu_cache_bytes"
                          : many_r.rc_transfer == ENOENT ? "stats.transfer_bytes"
                                                         : NULL;
    if (missing != NULL) {
        printf("SKIP: mode cpu, but %s is not known to this build (ENOENT): no bound checked\n",
               missing);
        return fails ? 1 : 77;
    }
    CHECK(rc == 0, "opt.percpu_bytes: %s", strerror(rc));
    CHECK(many_r.rc_cpu == 0 && many_r.rc_transfer == 0 && trimmed_r.rc_cpu == 0 &&
              trimmed_r.rc_transfer == 0,
          "stats.cpu_cache_bytes / stats.transfer_bytes unreadable");
    size_t bound = percpu * (size_t)nconf;
    printf("opt.percpu_bytes %.2f MiB: CPU caches and transfer caches each at most %.2f MiB\n",
           mib(percpu), mib(bound));

    CHECK(many_r.cpu <= bound, "1000 idle threads: stats.cpu_cache_bytes %.2f MiB > %.2f MiB "
          "(opt.percpu_bytes x %ld CPUs)", mib(many_r.cpu), mib(bound), nconf);
    CHECK(many_r.transfer <= bound, "1000 idle threads: stats.transfer_bytes %.2f MiB > %.2f MiB "
          "(opt.percpu_bytes x %ld CPUs)", mib(many_r.transfer), mib(bound), nconf);
    CHECK(many_r.tcache <= 2 * bound, "1000 idle threads: stats.tcache_bytes %.2f MiB > %.2f MiB "
          "(CPU caches' bound + transfer caches' bound): threads hold cached blocks",
          mib(many_r.tcache), mib(2 * bound));
    /* how full the caches happen to be varies from run to run: what may
     * not happen is growth past what the CPUs' caches can hold, whatever
     * the 10 threads left */
    size_t growth_limit = 2 * small_r.tcache > bound ? 2 * small_r.tcache : bound;
    CHECK(many_r.tcache <= growth_limit, "stats.tcache_bytes grows with threads: %.2f MiB with "
          "1000 threads, %.2f MiB with %d (limit %.2f MiB)", mib(many_r.tcache),
          mib(small_r.tcache), nsmall, mib(growth_limit));
    CHECK(trimmed_r.cpu == 0, "after malloc_trim(0), 1000 idle threads: stats.cpu_cache_bytes "
          "%zu, expected 0", trimmed_r.cpu);
    CHECK(trimmed_r.transfer == 0, "after malloc_trim(0), 1000 idle threads: "
          "stats.transfer_bytes %zu, expected 0", trimmed_r.transfer);
    /* every cache: thread caches hold nothing and the large caches were
     * emptied too */
    CHECK(trimmed_r.tcache == 0, "after malloc_trim(0), 1000 idle threads: stats.tcache_bytes %zu, "
          "expected 0", trimmed_r.tcache);
    /* The threads hold no cached bytes at all: every cached byte is in a
     * CPU or transfer cache (their small blocks; nothing large went
     * through). A background pass may drain a CPU cache between the two
     * sums of one reading, so a few readings are taken. */
    bool only_cpu = many_r.tcache <= many_r.cpu + many_r.transfer;
    for (int i = 0; i < 3 && !only_cpu; i++) {
        struct reading again;
        take(&again);
        only_cpu = again.tcache <= again.cpu + again.transfer;
    }
    CHECK(only_cpu, "1000 idle threads: stats.tcache_bytes %.2f MiB > CPU caches %.2f MiB + transfer "
          "caches %.2f MiB: threads hold cached blocks", mib(many_r.tcache), mib(many_r.cpu),
          mib(many_r.transfer));
    /* and no cache of their own: a thread's cache (its tcache_t, some 14
     * KiB of metadata) is made only for a thread that needs one, which
     * none of these does */
    CHECK(many_r.rc_metadata == 0 && small_r.rc_metadata == 0, "stats.metadata unreadable");
    CHECK(many_r.metadata <= small_r.metadata + 4 * MiB, "stats.metadata grew by %.2f MiB from %d to "
          "1000 threads: more than 4 KiB per thread", mib(many_r.metadata - small_r.metadata), nsmall);
    if (fails == 0)
        printf("ok: mode cpu, cached memory bounded and independent of the thread count\n");
    return fails ? 1 : 0;
}
