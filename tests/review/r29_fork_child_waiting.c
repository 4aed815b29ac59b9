/*
 * r29_fork_child_waiting.c - a fork child must not inherit a CPU cache
 * locked forever by a thread that does not exist in it (mode "waiter"),
 * and its CPU caches must keep an honest count of their sleeping remote
 * lockers, cpu_cache_t.waiters (mode "waiters").
 *
 * Both modes: a victim thread U holds CPU 0's cache (a SIGUSR1 handler
 * that landed while U held it blocks on a pipe); thread T calls
 * malloc_trim and sleeps in lock_remote(0, wait); a SIGUSR2 handler in T
 * forks, and in the child the handler returns to T's malloc_trim.
 * Everything runs pinned to CPU 0.
 *
 * waiter: cpu_caches_postfork_child (cpu_cache.c) abandons a cache still
 * locked at fork "by a thread that does not exist there", but only when
 * !held_here(cpu). lock_remote sets the held bit BEFORE it waits for the
 * holder (and keeps it while it sleeps on the futex), so a thread that
 * is waiting for another thread's cache looks, to the child, like that
 * cache's holder. The handler forks at once: prefork skips CPU 0
 * (held_here: T's waiting frame), the child keeps CPU 0's cache locked
 * by U (absent there) and does not replace it (held_here again), and
 * T's malloc_trim in the child sleeps on the futex forever: nobody in
 * the child will ever unlock it.
 * Expected: "ok" (the child's malloc_trim returns). Actual on a477e1f (5
 * of 5 runs, 2 shared cores; 1st try each time): "deadlock: ..." (the
 * child sits in futex wait, gdb: lock_remote(cpu=0) <- drain_one <-
 * cpu_caches_drain <- malloc_trim).
 *
 * waiters: cpu_caches_postfork_child sets every cache's waiters to 0
 * ("the waiters were other threads"), but the forking thread itself may
 * be one of them. The handler waits until U lets go and forks. In the
 * child, T's frame returns from the futex and decrements waiters from the
 * 0 postfork_child stored: 0xffffffff. From then on every unlock of CPU
 * 0's cache in the child (each slow path of each thread on CPU 0) makes a
 * FUTEX_WAKE system call for sleepers that do not exist.
 * Expected: "ok" (the child reads waiters 0 after its malloc_trim).
 * Actual on a477e1f, 5 of 5 runs: "the child's CPU 0 cache counts
 * 4294967295 waiters".
 *
 * Needs the CPU caches (else exit 77). Reads cpu_cache_table /
 * cpu_cache_locked (cpu_cache.h, through cpu_held.h) from the static
 * library to know when U holds CPU 0's cache, and in mode waiters the
 * waiters field (cpu_cache.h: cpu_cache_t, uint32_t at byte 16).
 * run: test_review_r29_fork_child_waiting waiter|waiters [tries]
 *      (default 20 for waiter, 5 for waiters)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cpu_held.h"

static int gate[2];
static atomic_int holding, stop, t_tid, t_done;
static atomic_int child_pid;
static pid_t parent;
static int counting;   /* mode "waiters"; else "waiter" */

/* in U: stay inside the slow path while it holds CPU 0's cache */
static void on_hold(int sig)
{
    (void)sig;
    if (!cpu_cache_held(0))
        return;
    atomic_store(&holding, 1);
    char c;
    while (read(gate[0], &c, 1) != 1) {
    }
    atomic_store(&holding, 0);
}

/* in T: fork (waiters: once U has let go of CPU 0's cache); the child
 * goes back to T's malloc_trim, asleep in lock_remote an instant ago */
static void on_fork(int sig)
{
    (void)sig;
    if (counting)
        for (int i = 0; i < 200000 && cpu_cache_held(0); i++)
            sched_yield();
    pid_t c = fork();
    if (c > 0)
        atomic_store(&child_pid, c);
}

static void *churn(void *arg)
{
    (void)arg;
    pin(0);
    enum { N = 2048 };
    static void *v[N];
    while (!atomic_load(&stop)) {
        for (int i = 0; i < N; i++)
            v[i] = malloc(16 + (i % 16) * 16);
        for (int i = 0; i < N; i++)
            free(v[i]);
    }
    return NULL;
}

static void *trimmer(void *arg)
{
    (void)arg;
    pin(0);
    atomic_store(&t_tid, (int)syscall(SYS_gettid));
    malloc_trim(0);
    if (getpid() != parent) {
        /* the child: its malloc_trim returned; nobody sleeps on any cache */
        if (counting) {
            void *cc = __atomic_load_n(&cpu_cache_table[0], __ATOMIC_SEQ_CST);
            uint32_t waiters =
                cc != (void *)cpu_cache_locked ? __atomic_load_n((uint32_t *)((char *)cc + 16), __ATOMIC_SEQ_CST) : 0;
            if (waiters != 0) {
                fprintf(stderr, "the child's CPU 0 cache counts %u waiters (it has one thread, awake)\n", waiters);
                _exit(3);
            }
        }
        _exit(0);
    }
    atomic_store(&t_done, 1);
    return NULL;
}

static int in_futex(int tid)
{
    char path[64], buf[128];
    snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    int ok = fgets(buf, sizeof(buf), f) != NULL && strncmp(buf, "202 ", 4) == 0;
    fclose(f);
    return ok;
}

int main(int argc, char **argv)
{
    counting = mode_arg(argc, argv, "waiter", "waiters", "tries");
    if (counting < 0)
        return 2;
    int tries = argc > 2 ? atoi(argv[2]) : counting ? 5 : 20;
    if (!cpu_front_end())
        return 77;
    if (pin(0) != 0 || pipe(gate) != 0) {
        printf("skip: needs CPU 0\n");
        return 77;
    }
    parent = getpid();
    struct sigaction sa = {.sa_handler = on_hold};
    sigaction(SIGUSR1, &sa, NULL);
    struct sigaction sb = {.sa_handler = on_fork, .sa_flags = SA_RESTART};
    sigaction(SIGUSR2, &sb, NULL);
    pthread_t u;
    pthread_create(&u, NULL, churn, NULL);
    int caught = 0, ok = 0;
    /* a wall-clock bound as well: under a loaded CI each usleep(300)
     * lasts milliseconds, and 10000 tries that rarely catch U holding
     * the cache outran ctest's 120 s (twice; never a hang: the child's
     * wait below is bounded too) */
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (int t = 0; t < tries * 1000 && caught < tries; t++) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec > 60)
            break;
        pthread_kill(u, SIGUSR1);
        usleep(300);
        if (!atomic_load(&holding))
            continue;
        caught++;
        atomic_store(&t_tid, 0), atomic_store(&t_done, 0), atomic_store(&child_pid, 0);
        pthread_t tt;
        pthread_create(&tt, NULL, trimmer, NULL);
        /* T asleep in lock_remote (a futex) while U holds the cache */
        int asleep = 0;
        for (int i = 0; i < 200 && !asleep; i++) {
            usleep(1000);
            int tid = atomic_load(&t_tid);
            asleep = tid != 0 && !atomic_load(&t_done) && in_futex(tid) && cpu_cache_held(0);
        }
        if (asleep) {
            pthread_kill(tt, SIGUSR2);
            /* waiter: the fork happens while U holds the cache; a fork
             * that waits for U instead (as it may once this is fixed) gets
             * it after the gate opens below. waiters: the handler waits for
             * U, so the gate opens at once */
            for (int i = 0; !counting && i < 1000 && atomic_load(&child_pid) == 0; i++)
                usleep(1000);
        }
        char c = 1;
        if (write(gate[1], &c, 1) != 1)
            return 2;
        for (int i = 0; asleep && atomic_load(&child_pid) == 0; i++) {
            if (i == 100000) {   /* 10 s: a diagnosis, not a ctest timeout */
                fprintf(stderr, "the trimmer's fork did not return in 10 s after the cache was let go (try %d)\n",
                        caught);
                _exit(1);
            }
            usleep(100);
        }
        pthread_join(tt, NULL);
        if (!asleep)
            continue;
        pid_t ch = atomic_load(&child_pid);
        int st = 0, done = 0;
        for (int i = 0; i < 500 && !done; i++) {
            if (waitpid(ch, &st, WNOHANG) == ch)
                done = 1;
            else
                usleep(10000);
        }
        if (!done) {
            kill(ch, SIGKILL);
            waitpid(ch, NULL, 0);
            atomic_store(&stop, 1);
            pthread_join(u, NULL);
            if (counting)
                fprintf(stderr, "the fork child did not finish in 5 s (try %d)\n", caught);
            else
                fprintf(stderr,
                        "deadlock: the fork child's malloc_trim waited 5 s for CPU 0's cache, locked by a thread "
                        "that does not exist in the child (try %d)\n",
                        caught);
            return 1;
        }
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "the fork child ended with status %#x\n", st);
            return 1;
        }
        ok++;
    }
    atomic_store(&stop, 1);
    pthread_join(u, NULL);
    if (ok == 0) {
        printf("skip: never caught the trimmer asleep on a held cache (%d holds)\n", caught);
        return 77;
    }
    printf("ok: %d fork children of a waiting trimmer %s\n", ok,
           counting ? "count no waiters" : "finished their malloc_trim");
    return 0;
}
