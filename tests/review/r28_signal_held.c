/*
 * r28_signal_held.c - malloc_trim(0) (mode "trim") or fork() (mode
 * "fork") from a signal handler that interrupted a CPU cache's slow path
 * while that path holds its CPU's cache locked must not wait for the
 * interrupted holder (cpu_cache.c, held_here: "a signal handler that
 * drains or forks must not wait for its own interrupted holder";
 * cpu_caches_prefork: "The cache this thread holds itself (a fork from a
 * signal handler) stays with the interrupted code"; the thread-cache
 * equivalent of the fork is review_r24_fork_in_signal).
 *
 * The victim (main, pinned to CPU 1) churns small blocks, so it keeps
 * entering cpu_cache_alloc_miss / cpu_cache_free_full, which lock CPU 1's
 * cache (lock_here). A refiller pinned to CPU 0 keeps CPU 0's cache
 * non-empty. A sender signals the victim; the handler acts only when CPU
 * 1's table entry is locked, which here means the victim itself holds it
 * (nothing else locks CPU 1's entry: background thread off, the refiller
 * only locks its own CPU's), i.e. only inside the pointer-copying window,
 * never over a bin lock.
 *
 * trim: signals every ~50 us; the handler trims. On a4a03aa the trim
 * drains CPU 0 first: lock_remote(0) sets held_here to 1 and unlock()
 * clears it to 0, so drain_one(1) no longer recognises the interrupted
 * frame as the holder and lock_remote(1, wait) spins in sched_yield
 * forever (gdb: lock_remote <- drain_one(cpu=1) <- cpu_caches_drain <-
 * malloc_trim <- on_sig <- cpu_cache_alloc_miss). The run stops after
 * 2000 trims in the window or 10 s. Expected: "ok"; actual on a4a03aa:
 * "deadlock" within ~1 s (every run, 7 of 7). Making drain_one restore
 * held_here is not enough: the handler then also lands between
 * lock_here's committing cmpxchg and its store of held_here (gdb:
 * lock_here <- lock_here_made <- cpu_cache_free_full), so held_here must
 * be set before the commit and cleared after the release.
 *
 * fork: signals every ~500 us (a fork takes longer than 50 us); the
 * handler forks (the child _exits at once). held_here, the only record
 * that the interrupted frame is the holder, is wrong in three windows:
 * lock_here stores it only after its cmpxchg committed, unlock() clears
 * it before the entry is released, and draining or locking another CPU
 * clears it. In any of them cpu_caches_prefork's lock_remote(1, wait)
 * spins in sched_yield forever (gdb: lock_remote(cpu=1) <-
 * cpu_caches_prefork <- prefork <- __run_prefork_handlers <- fork <-
 * on_sig). The run stops after 2000 forks in the window or 10 s.
 * Expected: "ok"; actual on a4a03aa: "deadlock" in 6 of 6 runs (2 shared
 * cores); 4 of 4 pass once held_here is set before the commit and
 * cleared after the release.
 *
 * Needs the CPU caches and CPUs 0 and 1 (else exit 77). Reads
 * cpu_cache_table / cpu_cache_locked (cpu_cache.h, through cpu_held.h)
 * from the static library to know when the victim holds its cache.
 * run: test_review_r28_signal_held trim|fork [seconds]   (default 10)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cpu_held.h"

static atomic_long progress, hits;
static atomic_int stop;
static pthread_t victim;
static int forking;        /* mode "fork"; else "trim" */
static const char *what;   /* "trims" or "forks", for the messages */

static void on_sig(int sig)
{
    (void)sig;
    if (!cpu_cache_held(1))
        return;
    if (forking) {
        pid_t c = fork();
        if (c == 0)
            _exit(0);
        if (c > 0)
            waitpid(c, NULL, 0);
    } else {
        malloc_trim(0);
    }
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
    useconds_t gap = forking ? 500 : 50;
    while (!atomic_load(&stop)) {
        pthread_kill(victim, SIGUSR1);
        usleep(gap);
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
            fprintf(stderr, "deadlock: the victim made no progress for 3 s (%ld %s in the window)\n",
                    atomic_load(&hits), what);
            _exit(1);
        }
        last = now;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    forking = mode_arg(argc, argv, "trim", "fork", "seconds");
    if (forking < 0)
        return 2;
    what = forking ? "forks" : "trims";
    int secs = argc > 2 ? atoi(argv[2]) : 10;
    if (!cpu_front_end())
        return 77;
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
    printf("ok: %ld rounds, %ld %s while the victim held its CPU's cache\n", atomic_load(&progress),
           atomic_load(&hits), what);
    return 0;
}
