/*
 * source_units.h - what the page-source reproductions (review r13, r14,
 * r15) share: a page source of 4 MiB units of one reservation that makes
 * what it gets back PROT_NONE (any later use faults), a hook its
 * callbacks run (`purge`: from the purge callback), and small helpers
 * (thread.arena, arena operations, thread.tcache.enabled, stages).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dpmalloc.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#define UNIT ((size_t)4 << 20)
#define NUNITS 128
static char *units;
static unsigned char unit_used[NUNITS];
static pthread_mutex_t units_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned npurges, nallocs;
static void (*volatile hook)(bool purge);
static __thread bool in_hook;
static __attribute__((unused)) void run_hook(bool purge)
{
    void (*h)(bool) = hook;
    if (h != NULL && !in_hook) { in_hook = true; h(purge); in_hook = false; }
}
/* Frees 2000 8 KiB blocks of the bound arena per round, flushing the
 * cache after each, until *until is set or 100 rounds have passed: the
 * background thread then finds dirty pages to purge and runs the hook
 * from its purge calls. pause_us between rounds. */
static __attribute__((unused)) void churn_until(volatile int *until, useconds_t pause_us)
{
    /* up to 300 rounds (15 s at 50 ms): on a loaded 2-core machine the
     * background thread's decay pass can wait seconds for a CPU */
    for (int r = 0; r < 300 && !*until; r++) {
        void *v[2000];
        for (int i = 0; i < 2000; i++) v[i] = malloc(8192);
        for (int i = 0; i < 2000; i++) free(v[i]);
        dpm_ctl("thread.tcache.flush", NULL, NULL, NULL, 0);
        usleep(pause_us);
    }
}
static __attribute__((unused)) void *units_alloc(void *ctx, size_t size, size_t align, bool *zeroed)
{
    (void)ctx; *zeroed = false;
    if (size % UNIT != 0 || align % UNIT != 0) return NULL;
    __atomic_fetch_add(&nallocs, 1, __ATOMIC_RELAXED);
    run_hook(false);
    size_t n = size / UNIT, step = align / UNIT; char *got = NULL;
    pthread_mutex_lock(&units_lock);
    for (size_t i = 0; i + n <= NUNITS && got == NULL; i += step) {
        size_t k = 0; while (k < n && !unit_used[i + k]) k++;
        if (k == n) { memset(&unit_used[i], 1, n); got = units + i * UNIT; }
    }
    pthread_mutex_unlock(&units_lock);
    if (got != NULL && mprotect(got, size, PROT_READ | PROT_WRITE) != 0) return NULL;
    return got;
}
static __attribute__((unused)) void units_free(void *ctx, void *addr, size_t size)
{
    (void)ctx; run_hook(false);
    mprotect(addr, size, PROT_NONE);
    pthread_mutex_lock(&units_lock);
    memset(&unit_used[((char *)addr - units) / UNIT], 0, size / UNIT);
    pthread_mutex_unlock(&units_lock);
}
static __attribute__((unused)) bool units_purge(void *ctx, void *addr, size_t size)
{
    (void)ctx; __atomic_fetch_add(&npurges, 1, __ATOMIC_RELAXED);
    run_hook(true);
    return madvise(addr, size, MADV_DONTNEED) == 0;
}
static __attribute__((unused)) bool in_units(const void *p) { return (const char *)p >= units && (const char *)p < units + NUNITS * UNIT; }
static __attribute__((unused)) unsigned make_sourced(void)
{
    char *m = mmap(NULL, (NUNITS + 1) * UNIT, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    units = (char *)(((uintptr_t)m + UNIT - 1) & ~(UNIT - 1));
    dpm_page_source_t src = {units_alloc, units_free, units_purge, NULL};
    unsigned a; int e = dpm_arena_create_sourced("r14", &src, &a);
    if (e != 0) { printf("create_sourced %d\n", e); exit(2); }
    return a;
}
static __attribute__((unused)) int bind_to(unsigned a) { return dpm_ctl("thread.arena", NULL, NULL, &a, sizeof a); }
static __attribute__((unused)) int arena_op(unsigned a, const char *op)
{ char name[64]; snprintf(name, sizeof name, "arena.%u.%s", a, op); return dpm_ctl(name, NULL, NULL, NULL, 0); }
static __attribute__((unused)) int set_cache(bool on) { return dpm_ctl("thread.tcache.enabled", NULL, NULL, &on, sizeof on); }
static __attribute__((unused)) bool get_cache(void) { bool on = 0; size_t l = sizeof on; dpm_ctl("thread.tcache.enabled", &on, &l, NULL, 0); return on; }
static __attribute__((unused)) void fill_cache(size_t size, int n)
{
    void **v = calloc((size_t)n, sizeof *v);
    for (int i = 0; i < n; i++) v[i] = malloc(size);
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}
static __attribute__((unused)) void on_alarm(int sig) { (void)sig; static const char msg[] = "FAIL: hung 20 s\n"; ssize_t w = write(1, msg, sizeof msg - 1); (void)w; _exit(1); }
static pthread_mutex_t stage_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stage_cond = PTHREAD_COND_INITIALIZER;
static int stage;
static __attribute__((unused)) void wait_stage(int s) { pthread_mutex_lock(&stage_lock); while (stage < s) pthread_cond_wait(&stage_cond, &stage_lock); pthread_mutex_unlock(&stage_lock); }
static __attribute__((unused)) void set_stage(int s) { pthread_mutex_lock(&stage_lock); stage = s; pthread_cond_broadcast(&stage_cond); pthread_mutex_unlock(&stage_lock); }
/* 8 blocks of 16 bytes allocated, then freed: a callback's small traffic */
static __attribute__((unused)) void small_churn(bool purge)
{
    (void)purge;
    void *p[8];
    for (int i = 0; i < 8; i++)
        p[i] = malloc(16);
    for (int i = 0; i < 8; i++)
        free(p[i]);
}
