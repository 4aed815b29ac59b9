/*
 * r9_cap_reservation.c - review of issue 9: 32 threads whose large caches
 * hold NOTHING take the whole tcache_large_bytes_total cap, and every other
 * thread loses its large cache (a performance cliff, not a memory bound).
 *
 * 40 "holder" threads each free one 16 KiB block (the cache reserves its
 * whole 4 MiB budget from the 128 MiB cap), malloc 16 KiB again (the block
 * comes back out: the cache is empty, the reservation stays) and block on a
 * condition variable. Then a fresh worker thread runs a malloc/free loop of
 * 64 KiB..300 KiB blocks (well inside its 4 MiB budget).
 *
 * Build and run (from the worktree, after building build/):
 *   gcc -O2 -fno-builtin -o /tmp/r9_cap tests/review/r9_cap_reservation.c -Iinclude \
 *       -Lbuild -Wl,-rpath,$PWD/build -ldpmalloc -lpthread
 *   timeout 60 /tmp/r9_cap
 *
 * Expected: the worker's blocks are cached (stats.tcache_bytes > 0.5 MiB
 * while the loop's last blocks sit in its cache); the loop costs what it
 * costs with no holders (41 ns per pair here; glibc 20 ns).
 * Actual (HEAD 234f56d): tcache_bytes 0.09 MiB (small bins only): the
 * worker caches nothing, 155-295 ns per pair (4-7x slower; with 31
 * holders 41 ns). Exit status 1. Default config (no background thread):
 * it lasts as long as the holders stay idle.
 *
 * Root cause: tcache_large.c large_reserve() reserves the full
 * opt.tcache_large_bytes at a cache's first put, and
 * large_release_reservation() gives it back only from tcache_large_flush()
 * (thread exit, flush, reclaim, or the owner's own idle trim in
 * tcache_event), never when takes empty the cache. So
 * tcache_large_bytes_total / tcache_large_bytes = 32 threads that ever
 * freed one large block lock every other thread out. A reservation that
 * follows what is held (reserve per put in budget-sized steps, release when
 * n drops to 0 in large_take) would bound the same bytes.
 */
#ifndef _GNU_SOURCE
#ifndef _GNU_SOURCE
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#endif
#endif
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int dpm_ctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen) __attribute__((weak));

static double stat_mib(const char *name)
{
    if (!dpm_ctl)
        return 0;
    uint64_t e = 1;
    size_t l = sizeof(e), v = 0;
    dpm_ctl("epoch", &e, &l, &e, sizeof(e));
    l = sizeof(v);
    return dpm_ctl(name, &v, &l, NULL, 0) == 0 ? (double)v / 1048576.0 : 0;
}

enum { NHOLD = 40 };
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int ready, go;

static void *holder(void *arg)
{
    (void)arg;
    char *p = malloc(16384);
    memset(p, 1, 16384);
    free(p);
    p = malloc(16384);   /* out of the cache again: the cache is empty */
    memset(p, 1, 16384);
    pthread_mutex_lock(&m);
    ready++;
    pthread_cond_broadcast(&cv);
    while (!go)
        pthread_cond_wait(&cv, &m);
    pthread_mutex_unlock(&m);
    free(p);
    return NULL;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cached_mib, ns_per_pair;

static void *worker(void *arg)
{
    (void)arg;
    static const size_t sz[4] = {65536, 100000, 200000, 300000};
    enum { N = 1000000 };
    double t0 = now();
    for (int i = 0; i < N; i++) {
        volatile char *p = malloc(sz[i & 3]);
        p[0] = 1;
        free((void *)p);
    }
    ns_per_pair = (now() - t0) / N * 1e9;
    cached_mib = stat_mib("stats.tcache_bytes");
    return NULL;
}

int main(void)
{
    pthread_t t[NHOLD], w;
    for (int i = 0; i < NHOLD; i++)
        pthread_create(&t[i], NULL, holder, NULL);
    pthread_mutex_lock(&m);
    while (ready < NHOLD)
        pthread_cond_wait(&cv, &m);
    pthread_mutex_unlock(&m);
    printf("holders idle with empty large caches: tcache_bytes %.2f MiB\n", stat_mib("stats.tcache_bytes"));
    pthread_create(&w, NULL, worker, NULL);
    pthread_join(w, NULL);
    printf("worker: %.1f ns per malloc+free pair, tcache_bytes at its end %.2f MiB\n", ns_per_pair, cached_mib);
    pthread_mutex_lock(&m);
    go = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&m);
    for (int i = 0; i < NHOLD; i++)
        pthread_join(t[i], NULL);
    int bad = dpm_ctl && cached_mib < 0.5;
    printf("%s\n", bad ? "FAIL: the worker's large cache is locked out by empty caches" : "ok");
    return bad;
}
