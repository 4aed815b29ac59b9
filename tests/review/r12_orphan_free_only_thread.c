/*
 * r12_orphan_free_only_thread.c - a thread that only frees takes an
 * orphaned arena's pages away from the purge, for as long as it lives.
 *
 * A thread's first free creates its cache, and with it chooses its arena
 * (arena_choose, with the thread counted): the orphan, which has the
 * fewest threads. arena_choose claimed the orphan there (orphan_pending
 * cleared), so arenas_purge_orphans skips it, and orphaned() is false
 * while the thread counts. A thread that never allocates (a reaper, a
 * logger that frees what others allocated) never reuses those pages and
 * never ticks the arena's decay: the exited thread's footprint stays
 * resident until the freeing thread exits.
 *
 * A worker allocates and touches 64 blocks of 256 KiB, frees them (its
 * cache flushed) and exits. A second thread then frees 100 small blocks
 * that the main thread allocated, and waits. After 200 ms (the grace is
 * 50 ms) the main thread allocates 6 MiB (page-heap growth of its arena).
 * Checked: the exited worker's arena then holds at most 256 dirty pages
 * (observed at 3b797d9: all of them, about 7000, kept for the thread that
 * took the arena only to free).
 */
#include <dpmalloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define NBLOCKS 64
#define BLOCK ((size_t)256 << 10)
#define NSMALL_BLOCKS 100
#define FEW_PAGES 256

static unsigned worker_arena = 9999;
static int go_exit;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

static size_t arena_stat(unsigned arena, const char *what)
{
    uint64_t e = 1;
    size_t l = sizeof(e), v = 0;
    dpm_ctl("epoch", &e, &l, &e, sizeof(e));
    char name[64];
    snprintf(name, sizeof name, "stats.arenas.%u.%s", arena, what);
    l = sizeof(v);
    if (dpm_ctl(name, &v, &l, NULL, 0) != 0)
        return (size_t)-1;
    return v;
}

static void *worker(void *arg)
{
    bool *ok = arg;
    void *b[NBLOCKS];
    for (int i = 0; i < NBLOCKS; i++) {
        if ((b[i] = dpm_malloc(BLOCK)) == NULL)
            return NULL;
        memset(b[i], i + 1, BLOCK);
    }
    size_t l = sizeof(worker_arena);
    dpm_ctl("thread.arena", &worker_arena, &l, NULL, 0);
    for (int i = 0; i < NBLOCKS; i++)
        dpm_free(b[i]);
    dpm_ctl("thread.tcache.flush", NULL, NULL, NULL, 0);
    *ok = true;
    return NULL;
}

static void *freer(void *arg)
{
    void **blocks = arg;
    for (int i = 0; i < NSMALL_BLOCKS; i++)
        dpm_free(blocks[i]);
    pthread_mutex_lock(&mu);
    while (!go_exit)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return NULL;
}

int main(void)
{
    void *mine[NSMALL_BLOCKS];
    for (int i = 0; i < NSMALL_BLOCKS; i++)
        if ((mine[i] = dpm_malloc(100)) == NULL)
            return 2;
    bool ok = false;
    pthread_t t, f;
    if (pthread_create(&t, NULL, worker, &ok) != 0 || pthread_join(t, NULL) != 0 || !ok)
        return 2;
    size_t before = arena_stat(worker_arena, "pdirty");
    if (pthread_create(&f, NULL, freer, mine) != 0)
        return 2;
    struct timespec ts = {0, 200 * 1000000};
    nanosleep(&ts, NULL);
    char *grow = dpm_malloc((size_t)6 << 20);
    if (grow == NULL)
        return 2;
    size_t after = arena_stat(worker_arena, "pdirty");
    pthread_mutex_lock(&mu);
    go_exit = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
    pthread_join(f, NULL);
    dpm_free(grow);
    printf("exited worker's arena %u: %zu dirty pages at its exit, %zu after the grace and a growth (expected <= %d)\n",
           worker_arena, before, after, FEW_PAGES);
    if (before < NBLOCKS * BLOCK / 4096 / 2) {
        printf("the worker's arena kept too few pages to tell\n");
        return 2;
    }
    printf(after <= FEW_PAGES ? "ok\n" : "FAIL\n");
    return after <= FEW_PAGES ? 0 : 1;
}
