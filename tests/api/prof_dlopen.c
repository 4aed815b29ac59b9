/*
 * prof_dlopen.c - a sample taken while another thread holds the loader's
 * lock (review of issue 22's profiler): the library dlopened here starts
 * a thread from its constructor and waits for it; that thread's first
 * sample must not wait for the loader's lock (finding the allocator's
 * own code and loading the unwinder take it: prof_prime does both at
 * init). On c094345 the worker hung in dladdr and the constructor gave up
 * after 5 s.
 *   test_prof_dlopen <path of libprof_dlopen_lib.so>
 */
#include "test.h"

#include <dlfcn.h>
#include <dpmalloc.h>

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    void *h = dlopen(argv[1], RTLD_NOW);
    if (h == NULL) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    int *done = dlsym(h, "prof_dlopen_worker_done");
    uint64_t samples = 0;
    size_t len = sizeof samples;
    dpm_ctl("stats.prof.samples_total", &samples, &len, NULL, 0);
    printf("worker %s, %llu samples\n", done != NULL && *done ? "finished" : "STUCK", (unsigned long long)samples);
    return done != NULL && *done && samples >= 2 ? 0 : 1;   /* 8 blocks of 1 MiB: each sampled with p = 0.86 */
}
