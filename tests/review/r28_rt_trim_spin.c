/*
 * r28_rt_trim_spin.c - malloc_trim(0) from a SCHED_FIFO thread must not
 * wait on a lower-priority thread of its own CPU by spinning.
 *
 * cpu_caches_drain(false) locks every CPU's cache with lock_remote(cpu,
 * wait), which loops on compare-and-swap + sched_yield() while the
 * cache's holder (a slow path between lock_here and unlock) is away. A
 * SCHED_FIFO caller's sched_yield never lets a SCHED_OTHER thread of the
 * same CPU run, so when it preempts such a holder it spins until RT
 * throttling (kernel.sched_rt_runtime_us, 950 ms of each second by
 * default) stops it; with throttling off (-1, usual on DPDK-style real-
 * time hosts) it spins forever. The same wait sits in fork's prepare
 * handler (cpu_caches_prefork), thread.tcache.flush, arena.<i>.purge and
 * thread.tcache.enabled. The thread caches' reclaim waits on mutexes,
 * which hand the CPU over.
 *
 * Here a SCHED_OTHER thread churns small blocks on CPU 0 while the main
 * thread, SCHED_FIFO on CPU 0, trims every 200 us for 3 s.
 * Expected: every trim ends within 250 ms (percpu:false: worst 8.4 ms);
 * actual on a4a03aa: worst 1002 ms (73 trims in 5 s against 19545).
 * Needs SCHED_FIFO (root or CAP_SYS_NICE) and CPU 0, else exit 77. A
 * watchdog on another CPU fails the run after 30 s (throttling off).
 * run: test_review_r28_rt_trim_spin [seconds]   (default 3)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define LIMIT_S 0.25

static atomic_int stop;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int pin(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    return pthread_setaffinity_np(pthread_self(), sizeof(s), &s);
}

static void *churn(void *arg)
{
    (void)arg;
    pin(0);
    static void *v[4096];
    while (!atomic_load(&stop)) {
        for (int i = 0; i < 4096; i++)
            v[i] = malloc(16 + (i % 8) * 16);
        for (int i = 0; i < 4096; i++)
            free(v[i]);
    }
    return NULL;
}

static void *watchdog(void *arg)
{
    (void)arg;
    pin(1);   /* may fail on one CPU: then it shares CPU 0 and RT throttling */
    sleep(30);
    fprintf(stderr, "hang: a trim from the SCHED_FIFO thread did not end within 30 s\n");
    _exit(1);
}

int main(int argc, char **argv)
{
    int secs = argc > 1 ? atoi(argv[1]) : 3;
    if (pin(0) != 0) {
        printf("skip: needs CPU 0\n");
        return 77;
    }
    struct sched_param sp = {.sched_priority = 10};
    if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) != 0) {
        printf("skip: no SCHED_FIFO here\n");
        return 77;
    }
    sp.sched_priority = 0;
    pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp);
    pthread_t c, w;
    pthread_create(&w, NULL, watchdog, NULL);
    pthread_create(&c, NULL, churn, NULL);
    usleep(100000);
    sp.sched_priority = 10;
    pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
    double worst = 0, end = now() + secs;
    long n = 0;
    while (now() < end) {
        double t0 = now();
        malloc_trim(0);
        double d = now() - t0;
        if (d > worst)
            worst = d;
        n++;
        usleep(200);
    }
    sp.sched_priority = 0;
    pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp);
    atomic_store(&stop, 1);
    pthread_join(c, NULL);
    printf("%ld trims from a SCHED_FIFO thread, worst %.1f ms\n", n, worst * 1e3);
    if (worst > LIMIT_S) {
        printf("a trim waited %.0f ms for a lower-priority thread of its CPU\n", worst * 1e3);
        return 1;
    }
    return 0;
}
