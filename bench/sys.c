/*
 * sys.c - time, CPUs and process usage for the benchmark: the tick counter
 * calibrated against CLOCK_MONOTONIC, busy waits, CPU pinning, minor page
 * faults and resident set sizes, and a small deterministic RNG.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <features.h>
#ifdef __GLIBC__
#include <gnu/libc-version.h>
#endif
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "dpmbench.h"

static double ticks_hz = 1e9;

double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t ticks_fallback(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Tick rate measured over a few 20 ms windows; the median resists a
 * preempted window on a noisy VM. */
double calibrate_ticks_hz(void)
{
    double rates[5];
    for (int i = 0; i < 5; i++) {
        double t0 = now_seconds();
        uint64_t c0 = ticks();
        while (now_seconds() - t0 < 0.02)
            ;
        uint64_t c1 = ticks();
        double t1 = now_seconds();
        rates[i] = (double)(c1 - c0) / (t1 - t0);
    }
    for (int i = 1; i < 5; i++)
        for (int j = i; j > 0 && rates[j] < rates[j - 1]; j--) {
            double t = rates[j];
            rates[j] = rates[j - 1];
            rates[j - 1] = t;
        }
    return rates[2];
}

void set_ticks_hz(double hz) { ticks_hz = hz; }
double ticks_to_ns(uint64_t t) { return (double)t * 1e9 / ticks_hz; }
uint64_t ns_to_ticks(double ns) { return (uint64_t)(ns * ticks_hz / 1e9); }

void busy_wait_ticks(uint64_t t)
{
    uint64_t end = ticks() + t;
    while (ticks() < end)
        ;
}

/* The CPUs this process may run on, read once (before any pinning narrows
 * the calling thread's mask). */
static int allowed_cpus(const int **list)
{
    static int cpus[CPU_SETSIZE];
    static int n = -1;
    if (n < 0) {
        cpu_set_t set;
        n = 0;
        if (sched_getaffinity(0, sizeof set, &set) == 0)
            for (int c = 0; c < CPU_SETSIZE; c++)
                if (CPU_ISSET(c, &set))
                    cpus[n++] = c;
    }
    *list = cpus;
    return n;
}

int allowed_cpu_count(void)
{
    const int *list;
    int n = allowed_cpus(&list);
    return n > 0 ? n : 1;
}

/* Pin the calling thread to the index-th CPU it may run on (modulo). */
int pin_to_cpu_index(int index)
{
    const int *list;
    int n = allowed_cpus(&list);
    if (n == 0)
        return -1;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(list[index % n], &set);
    return sched_setaffinity(0, sizeof set, &set);
}

long minor_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

/* Writing 5 to clear_refs resets VmHWM (Linux >= 4.0). */
void reset_peak_rss(void)
{
    int fd = open("/proc/self/clear_refs", O_WRONLY);
    if (fd < 0)
        return;
    if (write(fd, "5", 1) != 1)
        errno = 0;
    close(fd);
}

long rss_kb(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    size_t len = strlen(field);
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, len) == 0 && line[len] == ':') {
            sscanf(line + len + 1, "%ld", &kb);
            break;
        }
    fclose(f);
    return kb;
}

/* Resident set from /proc/self/statm (pages, second field), in MiB; -1
 * when it cannot be read. */
double statm_rss_mib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, resident = -1;
    if (!f)
        return -1;
    if (fscanf(f, "%ld %ld", &size, &resident) != 2)
        resident = -1;
    fclose(f);
    return resident < 0 ? -1 : (double)resident * (double)sysconf(_SC_PAGESIZE) / (1 << 20);
}

/* splitmix64: deterministic, so every backend sees the same sequence. */
uint64_t rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Smallest cost of reading the tick counter twice, subtracted from
 * intervals that time a single call. */
uint64_t tick_overhead(void)
{
    static uint64_t overhead = UINT64_MAX;
    if (overhead != UINT64_MAX)
        return overhead;
    for (int i = 0; i < 2000; i++) {
        uint64_t a = ticks();
        uint64_t b = ticks();
        if (b - a < overhead)
            overhead = b - a;
    }
    return overhead;
}

/* Ticks between two reads, less the cost of reading. */
uint64_t ticks_between(uint64_t start, uint64_t end)
{
    uint64_t d = end - start, o = tick_overhead();
    return d > o ? d - o : 0;
}

/* A workload size for the current mode. */
int scaled(const struct bench_ctx *ctx, int full, int quick, int smoke)
{
    switch (ctx->mode) {
    case MODE_FULL:
        return full;
    case MODE_QUICK:
        return quick;
    case MODE_SMOKE:
        break;
    }
    return smoke;
}

/* The C library's version, for reports. */
const char *libc_version(void)
{
#ifdef __GLIBC__
    return gnu_get_libc_version();
#else
    return "unknown";
#endif
}

/* Is the tick counter invariant (x86: constant_tsc and nonstop_tsc)?
 * 1 yes, 0 no, -1 not known (other architectures use a fixed-rate
 * counter). */
int ticks_invariant(void)
{
#if defined(__x86_64__) || defined(__i386__)
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[4096];
    int found = -1;
    while (f && found < 0 && fgets(line, sizeof line, f))
        if (!strncmp(line, "flags", 5))
            found = strstr(line, " constant_tsc") && strstr(line, " nonstop_tsc");
    if (f)
        fclose(f);
    return found;
#else
    return -1;
#endif
}
