/*
 * idle_return.c - does a quiet program give freed memory back with no
 * option set? A second thread exists and never allocates (as in
 * redis-server); the main thread allocates SIZE_MB of 4 KiB blocks
 * (touched), frees them all and sleeps, printing its resident set at the
 * given seconds. Run under each allocator with tools/idle_return.sh.
 *
 * usage: idle_return [size_mb] [seconds...]   (default: 1024  2 10 16 20 22)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double rss_mib(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL || fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = 0;
    if (f != NULL)
        fclose(f);
    return (double)resident * (double)sysconf(_SC_PAGESIZE) / 1048576.0;
}

static void *idle_thread(void *arg)
{
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    size_t mb = argc > 1 ? (size_t)atol(argv[1]) : 1024;
    static const int default_at[] = {2, 10, 16, 20, 22};
    pthread_t t;
    pthread_create(&t, NULL, idle_thread, NULL);
    size_t n = (mb << 20) / 4096;
    void **v = malloc(n * sizeof(void *));
    for (size_t i = 0; i < n; i++) {
        v[i] = malloc(4096);
        memset(v[i], 1, 4096);
    }
    printf("peak %.1f MiB\n", rss_mib());
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
    double t0 = now_s();
    int nat = argc > 2 ? argc - 2 : (int)(sizeof(default_at) / sizeof(default_at[0]));
    for (int k = 0; k < nat; k++) {
        double at = argc > 2 ? atof(argv[k + 2]) : default_at[k];
        double wait = t0 + at - now_s();
        if (wait > 0)
            usleep((useconds_t)(wait * 1e6));
        printf("%g s after the frees: %.1f MiB\n", at, rss_mib());
        fflush(stdout);
    }
    return 0;
}
