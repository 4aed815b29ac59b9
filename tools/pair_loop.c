/*
 * pair_loop.c - n x (malloc(size), free) through the libc API, for the
 * malloc/free pair measurements of tools/pair_cost.sh (run with each
 * allocator preloaded). Prints the nanoseconds per pair of the timed loop.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 10000000;
    size_t size = argc > 2 ? (size_t)atol(argv[2]) : 64;
    void *volatile sink;
    for (int i = 0; i < 1000; i++) {   /* warm the thread cache */
        sink = malloc(size);
        free(sink);
    }
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) {
        void *p = malloc(size);
        sink = p;
        free(p);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    (void)sink;
    double ns = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / (double)n;
    printf("%.2f\n", ns);
    return 0;
}
