/*
 * r29_fork_child_waiter.c - a fork child must not inherit a CPU cache
 * locked forever by a thread that does not exist in it.
 *
 * cpu_caches_postfork_child (cpu_cache.c) abandons a cache still locked
 * at fork "by a thread that does not exist there", but only when
 * !held_here(cpu). lock_remote sets the held bit BEFORE it waits for the
 * holder (and keeps it while it sleeps on the futex), so a thread that
 * is waiting for another thread's cache looks, to the child, like that
 * cache's holder. Here: a victim thread U holds CPU 0's cache (a
 * SIGUSR1 handler that landed while U held it blocks on a pipe); thread
 * T calls malloc_trim and sleeps in lock_remote(0, wait); a SIGUSR2
 * handler in T forks. prefork skips CPU 0 (held_here: T's waiting
 * frame), the child keeps CPU 0's cache locked by U (absent there) and
 * does not replace it (held_here again), the handler returns in the
 * child to T's malloc_trim, which sleeps on the futex forever: nobody in
 * the child will ever unlock it.
 *
 * Expected: "ok" (the child's malloc_trim returns). Actual on a477e1f (5 of 5
 * runs, 2 shared cores; 1st try each time):
 * "deadlock: ..." (the child sits in futex wait, gdb: lock_remote(cpu=0)
 * <- drain_one <- cpu_caches_drain <- malloc_trim).
 *
 * Needs the CPU caches (else exit 77). Reads cpu_cache_table /
 * cpu_cache_locked (cpu_cache.h) from the static library to know when U
 * holds CPU 0's cache. Everything runs pinned to CPU 0.
 * run: test_review_r29_fork_child_waiter [tries]   (default 20)
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

/* in T: fork; the child goes back to T's malloc_trim */
static void on_fork(int sig)
{
    (void)sig;
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
    if (getpid() != parent)
        _exit(0);   /* the child: its malloc_trim returned */
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
    int tries = argc > 1 ? atoi(argv[1]) : 20;
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
        if (asleep) {
            pthread_kill(tt, SIGUSR2);
            /* the fork happens while U holds the cache; a fork that waits
             * for U instead (as it may once this is fixed) gets it after
             * the gate opens below */
            for (int i = 0; i < 1000 && atomic_load(&child_pid) == 0; i++)
                usleep(1000);
        }
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
    printf("ok: %d fork children of a waiting trimmer finished their malloc_trim\n", ok);
    return 0;
}
