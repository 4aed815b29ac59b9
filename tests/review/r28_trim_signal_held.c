/*
 * r28_trim_signal_held.c - malloc_trim(0) from a signal handler that
 * interrupted a CPU cache's slow path while that path holds its CPU's
 * cache locked must not wait for the interrupted holder (cpu_cache.c,
 * held_here: "a signal handler that drains or forks must not wait for its
 * own interrupted holder").
 *
 * The victim (main, pinned to CPU 1) churns small blocks, so it keeps
 * entering cpu_cache_alloc_miss / cpu_cache_free_full, which lock CPU 1's
 * cache (lock_here). A refiller pinned to CPU 0 keeps CPU 0's cache
 * non-empty. A sender signals the victim every ~50 us; the handler trims
 * only when CPU 1's table entry is locked, which here means the victim
 * itself holds it (nothing else locks CPU 1's entry: background thread
 * off, the refiller only locks its own CPU's), i.e. only inside the
 * pointer-copying window, never over a bin lock.
 *
 * On a4a03aa the trim drains CPU 0 first: lock_remote(0) sets held_here
 * to 1 and unlock() clears it to 0, so drain_one(1) no longer recognises
 * the interrupted frame as the holder and lock_remote(1, wait) spins in
 * sched_yield forever (gdb: lock_remote <- drain_one(cpu=1) <-
 * cpu_caches_drain <- malloc_trim <- on_sig <- cpu_cache_alloc_miss).
 * The run stops after 2000 trims in the window or 10 s. Expected: "ok";
 * actual on a4a03aa: "deadlock" within ~1 s (every run, 7 of 7). Making
 * drain_one restore held_here is not enough: the handler then also lands
 * between lock_here's committing cmpxchg and its store of held_here
 * (gdb: lock_here <- lock_here_made <- cpu_cache_free_full), so held_here
 * must be set before the commit and cleared after the release.
 *
 * Needs the CPU caches and CPUs 0 and 1 (else exit 77). Reads
 * cpu_cache_table / cpu_cache_locked (cpu_cache.h) from the static
 * library to know when the victim holds its cache.
 * run: test_review_r28_trim_signal_held [seconds]   (default 10)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int dpm_ctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);
extern void *cpu_cache_table[1024];
extern char cpu_cache_locked[];

static atomic_long progress, hits;
static atomic_int stop;
static pthread_t victim;

static int pin(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    return pthread_setaffinity_np(pthread_self(), sizeof(s), &s);
}

static void on_sig(int sig)
{
    (void)sig;
    if (__atomic_load_n(&cpu_cache_table[1], __ATOMIC_RELAXED) != (void *)cpu_cache_locked)
        return;
    malloc_trim(0);
    atomic_fetch_add(&hits, 1);
}

static void *refill(void *arg)
{
    (void)arg;
    pin(0);
    void *v[64];
    while (!atomic_load(&stop)) {
        for (int i = 0; i < 64; i++)
            v[i] = malloc(16 + (i % 8) * 16);
        for (int i = 0; i < 64; i++)
            free(v[i]);
    }
    return NULL;
}

static void *sender(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        pthread_kill(victim, SIGUSR1);
        usleep(50);
    }
    return NULL;
}

static void *watch(void *arg)
{
    (void)arg;
    long last = -1;
    for (;;) {
        sleep(3);
        long now = atomic_load(&progress);
        if (now == last) {
            fprintf(stderr, "deadlock: the victim made no progress for 3 s (%ld trims in the window)\n",
                    atomic_load(&hits));
            _exit(1);
        }
        last = now;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int secs = argc > 1 ? atoi(argv[1]) : 10;
    const char *fe = "";
    size_t l = sizeof(fe);
    if (dpm_ctl("stats.front_end", &fe, &l, NULL, 0) != 0 || strcmp(fe, "cpu") != 0) {
        printf("skip: front end %s\n", fe);
        return 77;
    }
    if (pin(1) != 0 || pin(0) != 0) {
        printf("skip: needs CPUs 0 and 1\n");
        return 77;
    }
    victim = pthread_self();
    struct sigaction sa = {.sa_handler = on_sig};
    sigaction(SIGUSR1, &sa, NULL);
    pthread_t r, s, w;
    pthread_create(&w, NULL, watch, NULL);
    pthread_create(&r, NULL, refill, NULL);
    pin(1);
    pthread_create(&s, NULL, sender, NULL);
    enum { N = 4096 };
    static void *v[N];
    time_t end = time(NULL) + secs;
    while (time(NULL) < end && atomic_load(&hits) < 2000) {
        for (int i = 0; i < N; i++)
            v[i] = malloc(16 + (i % 8) * 16);
        for (int i = 0; i < N; i++)
            free(v[i]);
        atomic_fetch_add(&progress, 1);
    }
    atomic_store(&stop, 1);
    pthread_join(s, NULL);
    pthread_join(r, NULL);
    if (atomic_load(&hits) == 0) {
        printf("skip: no signal landed while the victim held its cache (%ld rounds)\n", atomic_load(&progress));
        return 77;
    }
    printf("ok: %ld rounds, %ld trims while the victim held its CPU's cache\n", atomic_load(&progress),
           atomic_load(&hits));
    return 0;
}
