/*
 * seed_cold.c - seed 000's loop as a program under LD_PRELOAD meets it:
 * posix_memalign in a fresh process, no warm-up, batches of 2000 calls
 * without frees, the seed's eight (size, alignment) pairs one after the
 * other (or one pair, given on the command line). Prints ns per call (of
 * the thread's CPU time, and of wall time) and the minor faults
 * (getrusage) of each batch, so that first touches of
 * fresh memory are reported apart from the allocator's own work, and last
 * ("# fault_ns") what one minor fault costs on this machine. The
 * blocks of one pair are freed before the next pair starts, as a program
 * that uses several sizes in turn would. With -t each block's first byte
 * is written after its batch (outside the timing), as dpmbench's frag
 * workload and a program that uses its blocks do. Used by
 * tools/seed_cold.sh. With -k nothing is freed (to profile the
 * allocations alone).
 *
 * Usage: seed_cold [-t] [-k] [-b batches] [-n calls] [size align ...]
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static const size_t seed_pairs[][2] = {
    {64, 4096}, {1024, 4096}, {2048, 2048}, {4096, 4096},
    {4096, 64}, {8192, 8192}, {16384, 16384}, {65536, 65536},
};

static double clock_ns(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static double now_ns(void) { return clock_ns(CLOCK_MONOTONIC); }
/* the thread's CPU time: on a machine shared with other work, the time
 * other processes ran on this CPU is not the allocator's */
static double cpu_ns(void) { return clock_ns(CLOCK_THREAD_CPUTIME_ID); }

static long minflt(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

/* What one minor fault costs here: the median of 5 rounds of touching
 * 256 fresh pages (the allocator's own first touches cost the same). */
static double fault_ns(void)
{
    double r[5];
    for (int k = 0; k < 5; k++) {
        size_t len = (size_t)256 << 12;
        volatile char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return 0;
        double t0 = cpu_ns();
        for (size_t i = 0; i < len; i += 4096)
            m[i] = 1;
        r[k] = (cpu_ns() - t0) / 256;
        munmap((void *)m, len);
    }
    for (int i = 1; i < 5; i++)
        for (int j = i; j > 0 && r[j - 1] > r[j]; j--) {
            double t = r[j];
            r[j] = r[j - 1];
            r[j - 1] = t;
        }
    return r[2];
}

int main(int argc, char **argv)
{
    int batches = 5, calls = 2000, opt;
    int touch = 0, keep = 0;
    while ((opt = getopt(argc, argv, "tkb:n:")) != -1) {
        if (opt == 't')
            touch = 1;
        else if (opt == 'k')
            keep = 1;
        else if (opt == 'b')
            batches = atoi(optarg);
        else if (opt == 'n')
            calls = atoi(optarg);
        else
            return 2;
    }
    size_t pairs[64][2];
    int npairs = 0;
    if (optind + 1 < argc) {
        for (int i = optind; i + 1 < argc && npairs < 64; i += 2, npairs++) {
            pairs[npairs][0] = strtoull(argv[i], NULL, 0);
            pairs[npairs][1] = strtoull(argv[i + 1], NULL, 0);
        }
    } else {
        for (; npairs < 8; npairs++) {
            pairs[npairs][0] = seed_pairs[npairs][0];
            pairs[npairs][1] = seed_pairs[npairs][1];
        }
    }
    if (batches < 1 || calls < 1)
        return 2;
    void **blocks = malloc(sizeof(void *) * (size_t)batches * (size_t)calls * (size_t)(keep ? npairs : 1));
    if (blocks == NULL)
        return 1;
    /* the table is written before any pair, so its faults are no batch's */
    size_t nslots = (size_t)batches * (size_t)calls * (size_t)(keep ? npairs : 1);
    for (size_t i = 0; i < nslots; i++)
        blocks[i] = NULL;
    size_t n = 0;
    /* measured after the pairs (a fresh process's first calls are the
     * point), printed last */
    printf("pair batch cpu_ns_per_call minflt wall_ns_per_call\n");
    for (int k = 0; k < npairs; k++) {
        if (!keep)
            n = 0;
        for (int b = 0; b < batches; b++) {
            long f0 = minflt();
            double c0 = cpu_ns();
            double t0 = now_ns();
            for (int i = 0; i < calls; i++)
                if (posix_memalign(&blocks[n++], pairs[k][1], pairs[k][0]) != 0)
                    return 1;
            double t1 = now_ns();
            double c1 = cpu_ns();
            long f1 = minflt();
            printf("%zu/%zu %d %.1f %ld %.1f\n", pairs[k][0], pairs[k][1], b + 1, (c1 - c0) / calls, f1 - f0,
                   (t1 - t0) / calls);
            if (touch)
                for (size_t i = n - (size_t)calls; i < n; i++)
                    *(volatile char *)blocks[i] = (char)i;
        }
        for (size_t i = 0; i < n && !keep; i++)
            free(blocks[i]);
    }
    if (!keep)
        free(blocks);
    printf("# fault_ns %.0f\n", fault_ns());
    return 0;
}
