/*
 * stat_target.c - a process for dpmalloc-stat to read (tests/stat/
 * run_stat_test.py). It lets any process of its user read it (Yama
 * ptrace_scope 1), allocates a known pattern, writes what dpm_ctl says of
 * itself to a file (dpm_ctl's figures in FILE, dpm_stats_print's JSON in
 * FILE.json), prints "ready" and waits until its stdin closes.
 *
 *   stat_target pattern FILE   4 threads x 250 blocks of 100 bytes, 10
 *                              blocks of 1 MiB (the threads stay alive),
 *                              8 typed blocks of 200 bytes, 4 freed, 3
 *                              large blocks (about 100 KB) freed
 *   stat_target rate FILE      then 2000 blocks of 256 bytes a second,
 *                              held, until stdin closes
 *   stat_target churn FILE     then 2 threads allocate and free random
 *                              sizes without pause, and a third starts
 *                              short-lived threads, until stdin closes
 *   stat_target above FILE     (a memory limit set) 1 MiB blocks held
 *                              above the soft limit before the report,
 *                              until stdin closes
 *
 * With a memory limit (memory_limit_mb; memory_soft_limit_mb below it,
 * above the pattern's charge), before it reports the pattern passes the
 * soft limit with 1 MiB blocks and frees them (back below it), and three
 * allocations as large as the hard limit fail with ENOMEM (refusals,
 * reclaims, failures); in rate mode one such allocation fails every
 * 100 ms too. The memory limit's and the profiler's figures (stats.memory.*,
 * prof.active, stats.prof.*) are in FILE with the others.
 *
 * Built linked with dpmalloc_static and as a plain program run with
 * LD_PRELOAD (TEST_PRELOAD: dpm_ctl is looked up at run time).
 */
#include <dpmalloc.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#ifndef PR_SET_PTRACER
#define PR_SET_PTRACER 0x59616d61
#endif
#ifndef PR_SET_PTRACER_ANY
#define PR_SET_PTRACER_ANY ((unsigned long)-1)
#endif

static int (*ctl)(const char *, void *, size_t *, void *, size_t);
static void *(*malloc_typed)(const char *, size_t, size_t);
static void (*stats_print)(void (*)(void *, const char *), void *, const char *);
static void (*free_any)(void *);
static volatile int stop;
static pthread_barrier_t hold;

static void *holder(void *arg)
{
    (void)arg;
    void *blocks[250];
    for (int i = 0; i < 250; i++) {
        blocks[i] = malloc(100);
        if (blocks[i] == NULL)
            abort();
        memset(blocks[i], 1, 100);
    }
    pthread_barrier_wait(&hold);   /* allocated */
    pthread_barrier_wait(&hold);   /* stdin closed */
    for (int i = 0; i < 250; i++)
        free(blocks[i]);
    return NULL;
}

static void *churn(void *arg)
{
    uint64_t x = (uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;
    void *slots[256] = {0};
    while (!stop) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        unsigned k = x % 256;
        free(slots[k]);
        size_t size = (x >> 8) % 8 == 0 ? 16384 + (x >> 16) % 300000 : 8 + (x >> 16) % 2000;
        slots[k] = malloc(size);
    }
    for (int k = 0; k < 256; k++)
        free(slots[k]);
    return NULL;
}

static void write_piece(void *opaque, const char *text)
{
    int fd = *(int *)opaque;
    size_t n = strlen(text);
    if (write(fd, text, n) != (ssize_t)n)
        abort();
}

/* Until stdin closes; read(2) allocates nothing (getchar's buffer would). */
static void *read_stdin(void *arg)
{
    (void)arg;
    char buf[64];
    while (read(0, buf, sizeof(buf)) > 0)
        ;
    return NULL;
}

static void *short_lived(void *arg)
{
    void *p[16];
    for (int i = 0; i < 16; i++)
        p[i] = malloc(16 + 64 * (size_t)i + (uintptr_t)arg % 7);
    for (int i = 0; i < 16; i++)
        free(p[i]);
    return NULL;
}

/* Threads that start, allocate and exit without pause: their caches join
 * and leave the live list while dpmalloc-stat walks it. */
static void *spawner(void *arg)
{
    (void)arg;
    for (uintptr_t n = 0; !stop; n++) {
        pthread_t t;
        if (pthread_create(&t, NULL, short_lived, (void *)n) == 0)
            pthread_join(t, NULL);
    }
    return NULL;
}

static uint64_t get(const char *name)
{
    uint64_t v = 0;
    size_t len = sizeof(v);
    if (sizeof(size_t) == sizeof(v) && ctl(name, &v, &len, NULL, 0) == 0)
        return v;
    unsigned u = 0;
    len = sizeof(u);
    if (ctl(name, &u, &len, NULL, 0) == 0)
        return u;
    fprintf(stderr, "stat_target: dpm_ctl(\"%s\") failed\n", name);
    exit(1);
}

static bool get_bool(const char *name)
{
    bool v = false;
    size_t len = sizeof(v);
    if (ctl(name, &v, &len, NULL, 0) != 0) {
        fprintf(stderr, "stat_target: dpm_ctl(\"%s\") failed\n", name);
        exit(1);
    }
    return v;
}

/* An allocation as large as the hard limit: refused, reclaimed, failed. */
static void fail_at_limit(size_t limit)
{
    errno = 0;
    void *p = malloc(limit);
    if (p != NULL || errno != ENOMEM) {
        fprintf(stderr, "stat_target: malloc(%zu) under memory.limit %zu: %p, errno %d\n", limit, limit, p, errno);
        exit(1);
    }
}

static void *above_blocks[1024];
static size_t nabove;

/* 1 MiB blocks, touched, until the charge is above the soft limit. */
static void go_above_soft(void)
{
    while (!get_bool("stats.memory.above_soft_limit") && nabove < 1024) {
        if ((above_blocks[nabove] = malloc(1 << 20)) == NULL)
            abort();
        memset(above_blocks[nabove++], 4, 1 << 20);
    }
}

/* Past the soft limit and back, then the hard limit hit three times. */
static void hit_limits(void)
{
    size_t limit = (size_t)get("memory.limit"), soft = (size_t)get("memory.soft_limit");
    if (limit == 0)
        return;
    if (soft == 0 || soft >= limit || get("stats.memory.charged") >= soft) {
        fprintf(stderr, "stat_target: want a soft limit between the charge and the hard limit\n");
        exit(1);
    }
    go_above_soft();
    for (size_t i = 0; i < nabove; i++)
        free(above_blocks[i]);
    nabove = 0;
    for (int i = 0; i < 3; i++)
        fail_at_limit(limit);
    if (get("stats.memory.soft_limit_passes") == 0 || get("stats.memory.limit_failures") < 3) {
        fprintf(stderr, "stat_target: the limits were not hit\n");
        exit(1);
    }
}

static void report(const char *path)
{
    uint64_t epoch = 1;
    size_t len = sizeof(epoch);
    ctl("epoch", &epoch, &len, &epoch, sizeof(epoch));
    /* read every figure before the file is opened: fopen allocates */
    static const char *const totals[] = {"allocated", "active", "resident", "mapped", "retained", "metadata",
                                         "tcache_bytes", "cpu_cache_bytes", "transfer_bytes", "large_cache_bytes"};
    uint64_t tv[10], sums[6] = {0};
    char name[96];
    for (int i = 0; i < 10; i++) {
        snprintf(name, sizeof(name), "stats.%s", totals[i]);
        tv[i] = get(name);
    }
    unsigned narenas = (unsigned)get("arenas.narenas");
    const char *front = NULL;
    size_t flen = sizeof(front);
    if (ctl("stats.front_end", &front, &flen, NULL, 0) != 0 || front == NULL) {
        fprintf(stderr, "stat_target: dpm_ctl(\"stats.front_end\") failed\n");
        exit(1);
    }
    static const char *const per[] = {"small.nmalloc", "small.ndalloc", "large.nmalloc",
                                      "large.ndalloc", "small.allocated", "large.allocated"};
    for (unsigned a = 0; a < narenas; a++)
        for (int k = 0; k < 6; k++) {
            snprintf(name, sizeof(name), "stats.arenas.%u.%s", a, per[k]);
            uint64_t v = 0;
            size_t l = sizeof(v);
            if (ctl(name, &v, &l, NULL, 0) == 0)   /* arenas never made answer an error */
                sums[k] += v;
        }
    /* the memory limit's and the profiler's figures */
    static const char *const mem[] = {"charged", "peak", "limit", "soft_limit", "limit_refusals", "limit_reclaims",
                                      "limit_failures", "soft_limit_passes", "soft_limit_above_ms"};
    static const char *const prof[] = {"samples_total", "samples_live", "samples_dropped"};
    uint64_t mv[9], pv[3];
    for (int i = 0; i < 9; i++) {
        snprintf(name, sizeof(name), "stats.memory.%s", mem[i]);
        mv[i] = get(name);
    }
    bool above = get_bool("stats.memory.above_soft_limit");
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof(name), "stats.prof.%s", prof[i]);
        pv[i] = get(name);
    }
    bool prof_active = get_bool("prof.active");
    /* written with write(2) from a stack buffer: no allocation after
     * the figures were read, so they stay the process's figures */
    char text[2048];
    size_t at = 0;
    for (int i = 0; i < 10; i++)
        at += (size_t)snprintf(text + at, sizeof(text) - at, "%s=%llu\n", totals[i], (unsigned long long)tv[i]);
    for (int k = 0; k < 6; k++)
        at += (size_t)snprintf(text + at, sizeof(text) - at, "%s=%llu\n", per[k], (unsigned long long)sums[k]);
    at += (size_t)snprintf(text + at, sizeof(text) - at, "front_end_cpu=%d\n", strcmp(front, "cpu") == 0);
    for (int i = 0; i < 9; i++)
        at += (size_t)snprintf(text + at, sizeof(text) - at, "memory.%s=%llu\n", mem[i], (unsigned long long)mv[i]);
    at += (size_t)snprintf(text + at, sizeof(text) - at, "memory.above_soft_limit=%d\n", above);
    for (int i = 0; i < 3; i++)
        at += (size_t)snprintf(text + at, sizeof(text) - at, "prof.%s=%llu\n", prof[i], (unsigned long long)pv[i]);
    at += (size_t)snprintf(text + at, sizeof(text) - at, "prof.active=%d\n", prof_active);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, text, at) != (ssize_t)at || close(fd) != 0) {
        perror(path);
        exit(1);
    }
    /* and the in-process report (JSON) to FILE.json: its callback
     * writes with write(2), allocating nothing */
    char json[4096 + 8];
    snprintf(json, sizeof(json), "%s.json", path);
    fd = open(json, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        perror(json);
        exit(1);
    }
    stats_print(write_piece, &fd, "J");
    close(fd);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: stat_target pattern|rate|churn|above FILE\n");
        return 2;
    }
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);   /* EINVAL without Yama: nothing to do */
#ifdef TEST_PRELOAD
    ctl = (int (*)(const char *, void *, size_t *, void *, size_t))dlsym(RTLD_DEFAULT, "dpm_ctl");
    malloc_typed = (void *(*)(const char *, size_t, size_t))dlsym(RTLD_DEFAULT, "dpm_malloc_typed");
    free_any = (void (*)(void *))dlsym(RTLD_DEFAULT, "dpm_free");
    stats_print = (void (*)(void (*)(void *, const char *), void *, const char *))dlsym(RTLD_DEFAULT,
                                                                                       "dpm_stats_print");
    if (ctl == NULL || malloc_typed == NULL || free_any == NULL || stats_print == NULL) {
        fprintf(stderr, "stat_target: dpm_ctl not found: run with LD_PRELOAD=libdpmalloc.so\n");
        return 1;
    }
#else
    ctl = dpm_ctl;
    malloc_typed = dpm_malloc_typed;
    free_any = dpm_free;
    stats_print = dpm_stats_print;
#endif
    pthread_barrier_init(&hold, NULL, 5);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, holder, NULL);
    pthread_barrier_wait(&hold);
    void *big[10];
    for (int i = 0; i < 10; i++) {
        big[i] = malloc(1 << 20);
        if (big[i] == NULL)
            abort();
        memset(big[i], 2, 4096);
    }
    /* slow paths (cache fills and flushes), for the cycle samples of
     * stats_cycles:true: 20000 blocks of 3 classes held, then freed */
    static void *burst[20000];
    for (int i = 0; i < 20000; i++)
        if ((burst[i] = malloc(512 + 512 * (size_t)(i % 3))) == NULL)
            abort();
    for (int i = 0; i < 20000; i++)
        free(burst[i]);
    /* large blocks freed: they wait in a CPU's large cache (counted in
     * stats.tcache_bytes) */
    for (int i = 0; i < 3; i++) {
        void *p = malloc(100000 + 4096 * (size_t)i);
        if (p == NULL)
            abort();
        memset(p, 3, 64);
        free(p);
    }
    /* typed blocks: the freed ones wait in a per-CPU stash (counted in
     * stats.tcache_bytes) */
    void *typed[8];
    for (int i = 0; i < 8; i++)
        if ((typed[i] = malloc_typed("stat_test", 200, 0)) == NULL)
            abort();
    for (int i = 0; i < 4; i++)
        free_any(typed[i]);
    hit_limits();
    if (strcmp(argv[1], "above") == 0)
        go_above_soft();
    report(argv[2]);
    pthread_t ch[3];
    int nch = 0;
    if (strcmp(argv[1], "churn") == 0) {
        for (; nch < 2; nch++)
            pthread_create(&ch[nch], NULL, churn, (void *)(uintptr_t)(nch + 1));
        pthread_create(&ch[nch++], NULL, spawner, NULL);
    }
    if (write(1, "ready\n", 6) != 6)
        return 1;
    if (strcmp(argv[1], "rate") == 0) {
        /* 200 blocks every 100 ms until stdin closes (a thread waits on it) */
        static void *held[1 << 20];
        size_t n = 0;
        pthread_t reader;
        pthread_create(&reader, NULL, read_stdin, NULL);
        struct timespec next;
        clock_gettime(CLOCK_MONOTONIC, &next);
        size_t limit = (size_t)get("memory.limit");
        while (n + 200 <= sizeof(held) / sizeof(held[0])) {
            for (int i = 0; i < 200; i++)
                held[n++] = malloc(256);
            if (limit != 0)
                fail_at_limit(limit);
            next.tv_nsec += 100 * 1000 * 1000;
            if (next.tv_nsec >= 1000000000) {
                next.tv_nsec -= 1000000000;
                next.tv_sec++;
            }
            clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
            if (pthread_tryjoin_np(reader, NULL) == 0)
                break;
        }
        for (size_t i = 0; i < n; i++)
            free(held[i]);
    } else {
        read_stdin(NULL);
    }
    stop = 1;
    for (int i = 0; i < nch; i++)
        pthread_join(ch[i], NULL);
    pthread_barrier_wait(&hold);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 10; i++)
        free(big[i]);
    for (int i = 4; i < 8; i++)
        free_any(typed[i]);
    for (size_t i = 0; i < nabove; i++)
        free(above_blocks[i]);
    return 0;
}
