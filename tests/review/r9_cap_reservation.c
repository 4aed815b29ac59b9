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
 * argv[1] sets the number of holders (ctest runs 40 and 128: with 1 MiB of
 * slack kept per empty cache, 128 idle threads once took the whole cap
 * again; an empty cache now keeps its slack only while the cap is less
 * than half reserved).
 *
 * Build and run (from the worktree, after building build/):
 *   gcc -O2 -fno-builtin -o /tmp/r9_cap tests/review/r9_cap_reservation.c -Iinclude -Itests/review \
 *       -Lbuild -Wl,-rpath,$PWD/build -ldpmalloc -lpthread
 *   timeout 60 /tmp/r9_cap
 *
 * Expected: the worker's blocks are cached: its free of a 300000-byte
 * block serves its next malloc of that size; the loop costs what it costs
 * with no holders (41 ns per pair here; glibc 20 ns).
 * Actual (HEAD 234f56d): the worker caches nothing, 155-295 ns per pair
 * (4-7x slower; with 31 holders 41 ns). Exit status 1.
 *
 * Root cause then: every thread's large cache reserved its budget from
 * the shared tcache_large_bytes_total cap and gave it back only when
 * flushed, so 32 threads that ever freed one large block locked every
 * other thread out. Now (issue 19, item 5) large blocks sit in per-CPU
 * caches, each bounded by tcache_large_bytes alone: nothing is reserved
 * or shared between caches, so idle threads cannot lock a worker out, and
 * the test checks that they do not (every mode: empty holders, "chain",
 * "holding", "holding_small").
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "review.h"

enum { NHOLD_MAX = 256 };
static int nhold = 40;   /* argv[1]: how many idle holders */
/* argv[2] "chain": each holder ends a chain of growth instead. Its cache
 * keeps its reservation across the chain (for the block's put), which
 * must not lock the others out either once the cap is half reserved. */
static int chain_mode;
/* argv[2] "holding" / "holding_small": each holder frees three big
 * blocks and one more (1 MiB, or 16 KiB), which reserves its whole 4 MiB
 * budget, then takes the three big ones back and sleeps: its cache is not
 * empty, and its takes must still give back what its one block does not
 * need once the cap is half reserved (review r13: 32 such threads held
 * the whole cap, the worker cached nothing, 117-143 ns per pair). */
static int holding_mode;
static size_t held_bytes;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int ready, go;

/* Counts the holder in and sleeps until the worker is done. */
static void idle_until_go(void)
{
    pthread_mutex_lock(&m);
    ready++;
    pthread_cond_broadcast(&cv);
    while (!go)
        pthread_cond_wait(&cv, &m);
    pthread_mutex_unlock(&m);
}

static void *holder(void *arg)
{
    (void)arg;
    char *p;
    if (holding_mode) {
        size_t big = holding_mode == 2 ? (size_t)1280 << 10 : (size_t)1 << 20, last = held_bytes;
        char *q[4];
        for (int i = 0; i < 4; i++) {
            q[i] = malloc(i == 3 ? last : big);
            memset(q[i], 1, 4096);
        }
        for (int i = 3; i >= 0; i--)
            free(q[i]);
        for (int i = 0; i < 3; i++)
            q[i] = malloc(big);   /* the cache keeps the last block */
        idle_until_go();
        for (int i = 0; i < 3; i++)
            free(q[i]);
        return NULL;
    }
    if (chain_mode) {
        /* a grown block goes to the cache, a smaller request takes it
         * with slack, and realloc grows into all of it: the cache is
         * empty and its block is live */
        p = malloc(65536);
        p = realloc(p, 1 << 20);
        memset(p, 1, 1 << 20);
        free(p);
        p = malloc(65536);
        p = realloc(p, 1 << 20);
        memset(p, 1, 1 << 20);
    } else {
        p = malloc(16384);
        memset(p, 1, 16384);
        free(p);
        p = malloc(16384);   /* out of the cache again: the cache is empty */
        memset(p, 1, 16384);
    }
    idle_until_go();
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
static int reused;

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
    /* the worker's own free serves its next malloc of the class (three
     * tries: the thread may move to another CPU's cache in between) */
    for (int i = 0; i < 3 && !reused; i++) {
        void *p = malloc(300000);
        free(p);
        void *q = malloc(300000);
        reused = q == p;
        free(q);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        nhold = atoi(argv[1]) > 0 && atoi(argv[1]) <= NHOLD_MAX ? atoi(argv[1]) : nhold;
    chain_mode = argc > 2 && strcmp(argv[2], "chain") == 0;
    if (argc > 2 && strcmp(argv[2], "holding") == 0)
        holding_mode = 1, held_bytes = (size_t)1 << 20;
    if (argc > 2 && strcmp(argv[2], "holding_small") == 0)
        holding_mode = 2, held_bytes = 16384;
    pthread_t t[NHOLD_MAX], w;
    for (int i = 0; i < nhold; i++)
        pthread_create(&t[i], NULL, holder, NULL);
    pthread_mutex_lock(&m);
    while (ready < nhold)
        pthread_cond_wait(&cv, &m);
    pthread_mutex_unlock(&m);
    printf("holders idle: tcache_bytes %.2f MiB\n", stat_mib("stats.tcache_bytes"));
    pthread_create(&w, NULL, worker, NULL);
    pthread_join(w, NULL);
    printf("worker: %.1f ns per malloc+free pair, tcache_bytes at its end %.2f MiB\n", ns_per_pair, cached_mib);
    pthread_mutex_lock(&m);
    go = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&m);
    for (int i = 0; i < nhold; i++)
        pthread_join(t[i], NULL);
    int bad = dpm_ctl && !reused;
    printf("%s\n", bad ? "FAIL: the worker's large cache is locked out by idle caches" : "ok");
    return bad;
}
