/*
 * typed_pair_loop.c - n x (dpm_malloc_typed(type, size, 0), dpm_free) in
 * each of t threads, thread i pinned to CPU i % (CPUs allowed), all on the
 * same type name (so they share its counters), for the typed-pair figures
 * of tools/typed_pair_cost.sh. Prints the nanoseconds per pair of the timed
 * loop, the median over the threads: wall time, then the thread's CPU time
 * (which leaves out the time other processes had the CPU, on a busy
 * machine).
 * Usage: typed_pair_loop [pairs per thread] [threads] [size]
 */
#define _GNU_SOURCE
#include <dpmalloc.h>

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long npairs;
static size_t size;
static pthread_barrier_t start;

static double now_ns(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void *loop(void *arg)
{
    double *out = arg;
    void *volatile sink;
    for (int i = 0; i < 1000; i++) {   /* register the name, make the slabs */
        sink = dpm_malloc_typed("typed_pair", size, 0);
        dpm_free(sink);
    }
    pthread_barrier_wait(&start);
    double a = now_ns(CLOCK_MONOTONIC), c = now_ns(CLOCK_THREAD_CPUTIME_ID);
    for (long i = 0; i < npairs; i++) {
        void *p = dpm_malloc_typed("typed_pair", size, 0);
        sink = p;
        dpm_free(p);
    }
    out[0] = (now_ns(CLOCK_MONOTONIC) - a) / (double)npairs;
    out[1] = (now_ns(CLOCK_THREAD_CPUTIME_ID) - c) / (double)npairs;
    (void)sink;
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    npairs = argc > 1 ? atol(argv[1]) : 2000000;
    int nthreads = argc > 2 ? atoi(argv[2]) : 1;
    size = argc > 3 ? (size_t)atol(argv[3]) : 64;
    if (nthreads < 1 || nthreads > 64)
        return 2;
    cpu_set_t allowed;
    sched_getaffinity(0, sizeof allowed, &allowed);
    int cpus[CPU_SETSIZE], ncpus = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &allowed))
            cpus[ncpus++] = c;
    pthread_barrier_init(&start, NULL, (unsigned)nthreads);
    pthread_t th[64];
    double ns[64][2], wall[64], cpu[64];
    for (int i = 0; i < nthreads; i++) {
        pthread_attr_t at;
        pthread_attr_init(&at);
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpus[i % ncpus], &one);
        pthread_attr_setaffinity_np(&at, sizeof one, &one);
        if (pthread_create(&th[i], &at, loop, ns[i]) != 0)
            return 1;
        pthread_attr_destroy(&at);
    }
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < nthreads; i++) {
        wall[i] = ns[i][0];
        cpu[i] = ns[i][1];
    }
    qsort(wall, (size_t)nthreads, sizeof wall[0], cmp);
    qsort(cpu, (size_t)nthreads, sizeof cpu[0], cmp);
    printf("%.2f %.2f\n", wall[nthreads / 2], cpu[nthreads / 2]);
    return 0;
}
