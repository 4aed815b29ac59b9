/*
 * socket_pair_loop.c - n x (dpm_malloc_socket(64, 0, socket), dpm_free),
 * or with socket -2 n x (dpm_malloc(64), dpm_free), through the native
 * API of the libdpmalloc.so it is linked with; prints the nanoseconds
 * per pair of the timed loop. For the node-cache figures of docs/numa.md:
 *   cc -O2 tools/socket_pair_loop.c -Iinclude -Lbuild -ldpmalloc \
 *      -Wl,-rpath,$PWD/build -o /tmp/socket_pair_loop
 *   taskset -c 0 /tmp/socket_pair_loop 5000000 0     (socket 0)
 *   DPMALLOC_CONF=numa:true taskset -c 0 /tmp/socket_pair_loop 5000000 -2
 */
#include <dpmalloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void *one(int socket)
{
    return socket == -2 ? dpm_malloc(64) : dpm_malloc_socket(64, 0, socket);
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 10000000;
    int socket = argc > 2 ? atoi(argv[2]) : 0;
    void *volatile sink;
    for (int i = 0; i < 1000; i++) {   /* warm the caches */
        sink = one(socket);
        dpm_free(sink);
    }
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) {
        void *p = one(socket);
        sink = p;
        dpm_free(p);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    (void)sink;
    printf("%.2f\n", ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / (double)n);
    return 0;
}
