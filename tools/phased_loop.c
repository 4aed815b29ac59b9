/*
 * phased_loop.c - the hot path of aligned-at-offset blocks (issue 19,
 * item 6): batches of 64 dpm_malloc_aligned_at(44..104, 64, 4) (bench/
 * tunnels.c's rewrite vectors), then their 64 frees, rdtsc around each
 * batch; prints the best of 7 repetitions in cycles per call. With PLAIN
 * set in the environment, dpm_malloc of the same sizes instead (the
 * reference). Build and run (docs/benchmarks.md, "tunnels"):
 *   cc -O2 -Iinclude tools/phased_loop.c -o /tmp/phased_loop build/libdpmalloc.so -Wl,-rpath,$PWD/build
 *   taskset -c 1 /tmp/phased_loop 20000
 */
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <x86intrin.h>
#include "dpmalloc.h"
#define B 64
int main(int argc, char **argv){
    long iters = argc > 1 ? atol(argv[1]) : 200000;
    void *v[B];
    int plain = getenv("PLAIN") != NULL;
    double best_a = 1e9, best_f = 1e9;
    for (int rep = 0; rep < 7; rep++) {
        uint64_t ta = 0, tf = 0;
        for (long i = 0; i < iters; i++) {
            uint64_t t0 = __rdtsc();
            for (int k = 0; k < B; k++) v[k] = plain ? dpm_malloc(44 + 4 * (k % 16)) : dpm_malloc_aligned_at(44 + 4 * (k % 16), 64, 4);
            uint64_t t1 = __rdtsc();
            for (int k = 0; k < B; k++) dpm_free(v[k]);
            uint64_t t2 = __rdtsc();
            ta += t1 - t0; tf += t2 - t1;
        }
        double a = (double)ta / iters / B, f = (double)tf / iters / B;
        if (a < best_a) best_a = a;
        if (f < best_f) best_f = f;
    }
    printf("alloc %.1f free %.1f cycles (best of 7 reps, batches of %d)\n", best_a, best_f, B);
    return 0;
}
