/*
 * r28_fork_signal_held.c - fork() from a signal handler that interrupted
 * a CPU cache's slow path while that path holds its CPU's cache locked
 * must not wait for the interrupted holder (cpu_cache.c,
 * cpu_caches_prefork: "The cache this thread holds itself (a fork from a
 * signal handler) stays with the interrupted code"; the thread-cache
 * equivalent is review_r24_fork_in_signal).
 *
 * Same set-up as r28_trim_signal_held (victim pinned to CPU 1 churning
 * small blocks, refiller on CPU 0, handler acting only while CPU 1's
 * table entry is locked, i.e. while the victim holds it), but the handler
 * forks (the child _exits at once) and signals come every ~500 us (a fork
 * takes longer than 50 us). held_here, the only record that the
 * interrupted frame is the holder, is wrong in three windows: lock_here
 * stores it only after its cmpxchg committed, unlock() clears it before
 * the entry is released, and draining or locking another CPU clears it.
 * In any of them cpu_caches_prefork's lock_remote(1, wait) spins in
 * sched_yield forever (gdb: lock_remote(cpu=1) <- cpu_caches_prefork <-
 * prefork <- __run_prefork_handlers <- fork <- on_sig).
 * The run stops after 2000 forks in the window or 10 s. Expected: "ok";
 * actual on a4a03aa: "deadlock" in 6 of 6 runs (2 shared cores); 4 of 4
 * pass once held_here is set before the commit and cleared after the
 * release.
 *
 * Needs the CPU caches and CPUs 0 and 1 (else exit 77). Reads
 * cpu_cache_table / cpu_cache_locked (cpu_cache.h) from the static
 * library to know when the victim holds its cache.
 * run: test_review_r28_fork_signal_held [seconds]   (default 10)
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
#include <sys/wait.h>
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
    pid_t c = fork();
    if (c == 0)
        _exit(0);
    if (c > 0)
        waitpid(c, NULL, 0);
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
        usleep(500);
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
            fprintf(stderr, "deadlock: the victim made no progress for 3 s (%ld forks in the window)\n",
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
    printf("ok: %ld rounds, %ld forks while the victim held its CPU's cache\n", atomic_load(&progress),
           atomic_load(&hits));
    return 0;
}
