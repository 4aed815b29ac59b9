/*
 * r29_fork_child_waiters.c - a fork child's CPU cache must keep an honest
 * count of its sleeping remote lockers (cpu_cache_t.waiters).
 *
 * cpu_caches_postfork_child sets every cache's waiters to 0 ("the
 * waiters were other threads"), but the forking thread itself may be one
 * of them: a signal handler that forks from a thread asleep in
 * lock_remote (malloc_trim waiting for another thread's hold). Here U
 * holds CPU 0's cache (a SIGUSR1 handler that landed while U held it
 * blocks on a pipe), T's malloc_trim sleeps in lock_remote(0, wait), a
 * SIGUSR2 handler in T waits until U lets go and forks. In the child,
 * T's frame returns from the futex and decrements waiters from the 0
 * postfork_child stored: 0xffffffff. From then on every unlock of CPU
 * 0's cache in the child (each slow path of each thread on CPU 0) makes a
 * FUTEX_WAKE system call for sleepers that do not exist.
 *
 * Expected: "ok" (the child reads waiters 0 after its malloc_trim).
 * Actual on a477e1f, 5 of 5 runs: "the child's CPU 0 cache counts 4294967295
 * waiters".
 *
 * Needs the CPU caches (else exit 77). Reads cpu_cache_table /
 * cpu_cache_locked and the waiters field (cpu_cache.h: cpu_cache_t,
 * uint32_t at byte 16) from the static library. Pinned to CPU 0.
 * run: test_review_r29_fork_child_waiters [tries]   (default 5)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
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

int dpm_ctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);
extern void *cpu_cache_table[1024];
extern char cpu_cache_locked[];

static int gate[2];
static atomic_int holding, stop, t_tid, t_done;
static atomic_int child_pid;
static pid_t parent;

static int pin(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    return pthread_setaffinity_np(pthread_self(), sizeof(s), &s);
}

/* in U: stay inside the slow path while it holds CPU 0's cache */
static void on_hold(int sig)
{
    (void)sig;
    if (__atomic_load_n(&cpu_cache_table[0], __ATOMIC_SEQ_CST) != (void *)cpu_cache_locked)
        return;
    atomic_store(&holding, 1);
    char c;
    while (read(gate[0], &c, 1) != 1) {
    }
    atomic_store(&holding, 0);
}

/* in T: wait until U lets go of CPU 0's cache, then fork; the child goes
 * back to T's malloc_trim, asleep in lock_remote an instant ago */
static void on_fork(int sig)
{
    (void)sig;
    for (int i = 0; i < 200000 && __atomic_load_n(&cpu_cache_table[0], __ATOMIC_SEQ_CST) == (void *)cpu_cache_locked;
         i++)
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
        void *cc = __atomic_load_n(&cpu_cache_table[0], __ATOMIC_SEQ_CST);
        uint32_t waiters = cc != (void *)cpu_cache_locked ? __atomic_load_n((uint32_t *)((char *)cc + 16), __ATOMIC_SEQ_CST) : 0;
        if (waiters != 0) {
            fprintf(stderr, "the child's CPU 0 cache counts %u waiters (it has one thread, awake)\n", waiters);
            _exit(3);
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
    int tries = argc > 1 ? atoi(argv[1]) : 5;
    const char *fe = "";
    size_t l = sizeof(fe);
    if (dpm_ctl("stats.front_end", &fe, &l, NULL, 0) != 0 || strcmp(fe, "cpu") != 0) {
        printf("skip: front end %s\n", fe);
        return 77;
    }
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
    for (int t = 0; t < tries * 1000 && caught < tries; t++) {
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
            asleep = tid != 0 && !atomic_load(&t_done) && in_futex(tid) &&
                     __atomic_load_n(&cpu_cache_table[0], __ATOMIC_SEQ_CST) == (void *)cpu_cache_locked;
        }
        if (asleep)
            pthread_kill(tt, SIGUSR2);
        char c = 1;
        if (write(gate[1], &c, 1) != 1)
            return 2;
        while (asleep && atomic_load(&child_pid) == 0)
            usleep(100);
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
            fprintf(stderr, "the fork child did not finish in 5 s (try %d)\n", caught);
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
    printf("ok: %d fork children of a waiting trimmer count no waiters\n", ok);
    return 0;
}
