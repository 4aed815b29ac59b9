/*
 * large_trim.c - malloc_trim(0) from any thread empties every CPU's large
 * cache (docs/design.md, "Large blocks: a large cache per CPU"): one
 * thread per CPU, pinned there, frees four 64 KiB blocks into its CPU's
 * large cache and waits, alive; another thread, pinned to CPU 0, calls
 * malloc_trim(0). Then stats.large_cache_bytes is 0, and malloc_trim
 * returned 1 (the blocks went home and their pages were released).
 * Before the trim the caches must hold the blocks (at least 64 KiB per
 * CPU), or the test exercises nothing.
 *
 * usage: test_large_trim   (exit 0 pass, 1 fail)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dpmalloc.h>

#define BLOCK 65536
#define NBLOCKS 4
#define MAXCPU 64

static pthread_barrier_t freed, done;

static size_t stat_size(const char *name)
{
    uint64_t e = 1;
    size_t l = sizeof e, v = 0;
    dpm_ctl("epoch", &e, &l, &e, sizeof e);
    l = sizeof v;
    return dpm_ctl(name, &v, &l, NULL, 0) == 0 ? v : (size_t)-1;
}

static void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void *holder(void *arg)
{
    pin((int)(intptr_t)arg);
    void *p[NBLOCKS];
    for (int i = 0; i < NBLOCKS; i++) {
        p[i] = malloc(BLOCK);
        memset(p[i], 1, BLOCK);
    }
    for (int i = 0; i < NBLOCKS; i++)
        free(p[i]);
    pthread_barrier_wait(&freed);
    pthread_barrier_wait(&done);   /* alive while the trim runs */
    return NULL;
}

static int trimmed;
static void *trimmer(void *arg)
{
    (void)arg;
    pin(0);
    trimmed = malloc_trim(0);
    return NULL;
}

int main(void)
{
    cpu_set_t allowed;
    sched_getaffinity(0, sizeof allowed, &allowed);
    int cpus[MAXCPU], n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < MAXCPU; c++)
        if (CPU_ISSET(c, &allowed))
            cpus[n++] = c;
    pthread_barrier_init(&freed, NULL, (unsigned)n + 1);
    pthread_barrier_init(&done, NULL, (unsigned)n + 1);
    pthread_t t[MAXCPU], tr;
    for (int i = 0; i < n; i++)
        pthread_create(&t[i], NULL, holder, (void *)(intptr_t)cpus[i]);
    pthread_barrier_wait(&freed);
    size_t before = stat_size("stats.large_cache_bytes");
    printf("%d CPUs: large caches hold %zu bytes before the trim\n", n, before);
    int fails = 0;
    if (before == (size_t)-1 || before < (size_t)BLOCK * (size_t)n) {
        printf("FAIL: the large caches hold %zu bytes, not the %d x %d KiB freed on each CPU\n", before, NBLOCKS,
               BLOCK >> 10);
        fails++;
    }
    pthread_create(&tr, NULL, trimmer, NULL);
    pthread_join(tr, NULL);
    size_t after = stat_size("stats.large_cache_bytes");
    printf("after malloc_trim(0) from another thread (returned %d): %zu bytes\n", trimmed, after);
    if (after != 0) {
        printf("FAIL: malloc_trim(0) left %zu bytes in the large caches\n", after);
        fails++;
    }
    if (trimmed != 1) {
        printf("FAIL: malloc_trim(0) returned %d, not 1: the blocks' pages were not released\n", trimmed);
        fails++;
    }
    pthread_barrier_wait(&done);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    printf("%s\n", fails ? "FAIL" : "ok");
    return fails != 0;
}
