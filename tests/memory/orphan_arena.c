/*
 * orphan_arena.c - an automatic arena that no thread allocates from any
 * more (its last thread exited) gives its dirty pages back at once instead
 * of after dirty_decay_ms: nobody would reuse them, while the live threads
 * fault in fresh pages of their own arenas. The real-program case is git
 * pack-objects (git gc --aggressive): its delta-search threads exit and
 * the main thread writes the pack, and the exited threads' free pages
 * made dpmalloc's peak RSS 1.15x glibc's (docs/design.md, Decay).
 *
 * Proves (default options: dirty_decay_ms 10000):
 * - reuse: a thread that touched and freed 16 MiB of large blocks exits;
 *   the next thread created takes its arena (and its pages, no faults);
 * - grow: the same exit, then (after 200 ms: a grace period for a new
 *   thread to take the arena) the main thread allocates 6 MiB of fresh
 *   pages: the exited thread's arena then holds (almost) no dirty pages
 *   and the process's resident set is at least 10 MiB below what it was
 *   with the blocks;
 * - remote: a thread allocates 16 MiB of large blocks, hands them to the
 *   main thread and exits; main frees them (and flushes its cache): they
 *   go back to the orphaned arena, which keeps them for the grace period
 *   with the rest of its dirty pages (a new thread may take it), then
 *   purges them with the rest when the main thread grows;
 * - live: the same blocks freed by a thread that stays keep its arena's
 *   pages dirty (decay as usual: a live thread reuses them without page
 *   faults).
 */
#include "test.h"

#include <dpmalloc.h>
#include <pthread.h>
#include <stdbool.h>

#define NBLOCKS 64
#define BLOCK ((size_t)256 << 10)                /* a large class */
#define ALL_PAGES (NBLOCKS * BLOCK / 4096)       /* 4096 pages */
#define FEW_PAGES ((size_t)256)                  /* 1 MiB: "almost none" */
#define RSS_DROP ((size_t)10 << 20)
#define GROW ((size_t)6 << 20)                   /* more than the main arena holds free */

static size_t resident_bytes(void)
{
    long pages = 0, res = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL || fscanf(f, "%ld %ld", &pages, &res) != 2)
        res = 0;
    if (f != NULL)
        fclose(f);
    return (size_t)res * (size_t)sysconf(_SC_PAGESIZE);
}

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

static unsigned arena_nthreads(unsigned arena)
{
    uint64_t e = 1;
    size_t l = sizeof(e);
    unsigned v = 9999;
    dpm_ctl("epoch", &e, &l, &e, sizeof(e));
    char name[64];
    snprintf(name, sizeof name, "stats.arenas.%u.nthreads", arena);
    l = sizeof(v);
    if (dpm_ctl(name, &v, &l, NULL, 0) != 0)
        return 9999;
    return v;
}

static unsigned my_arena(void)
{
    unsigned a = 9999;
    size_t l = sizeof(a);
    if (dpm_ctl("thread.arena", &a, &l, NULL, 0) != 0)
        return 9999;
    return a;
}

static void *blocks[NBLOCKS];

static bool alloc_blocks(void)
{
    for (int i = 0; i < NBLOCKS; i++) {
        blocks[i] = dpm_malloc(BLOCK);
        if (blocks[i] == NULL)
            return false;
        memset(blocks[i], i + 1, BLOCK);
    }
    return true;
}

static void free_blocks(void)
{
    for (int i = 0; i < NBLOCKS; i++) {
        dpm_free(blocks[i]);
        blocks[i] = NULL;
    }
}

struct worker {
    bool free_them;        /* free the blocks before exiting, else leave them to main */
    bool ok;
    unsigned arena;
    size_t rss_with_blocks;
    size_t pdirty_before_exit;
};

static void *worker(void *arg)
{
    struct worker *w = arg;
    w->ok = alloc_blocks();
    w->arena = my_arena();
    w->rss_with_blocks = resident_bytes();
    if (w->free_them && w->ok) {
        free_blocks();
        dpm_ctl("thread.tcache.flush", NULL, NULL, NULL, 0);
        w->pdirty_before_exit = arena_stat(w->arena, "pdirty");
    }
    return NULL;
}

static bool run_worker(struct worker *w)
{
    pthread_t t;
    if (pthread_create(&t, NULL, worker, w) != 0 || pthread_join(t, NULL) != 0) {
        TEST_FAIL("pthread_create/join failed");
        return false;
    }
    if (!w->ok) {
        TEST_FAIL("dpm_malloc(%zu) failed", BLOCK);
        return false;
    }
    EXPECT(w->arena != my_arena(), "worker shares the main thread's arena %u", w->arena);
    return w->arena != my_arena();
}

TEST(next_thread_takes_the_orphaned_arena)
{
    struct worker a = {.free_them = true}, b = {.free_them = true};
    if (!run_worker(&a))
        return;
    EXPECT_EQ_U(arena_nthreads(a.arena), 0);
    if (!run_worker(&b))
        return;
    fprintf(stderr, "reuse: first thread's arena %u, next thread's %u\n", a.arena, b.arena);
    EXPECT_EQ_U(b.arena, a.arena);
}

TEST(orphaned_pages_go_when_the_process_grows)
{
    struct worker w = {.free_them = true};
    if (!run_worker(&w))
        return;
    /* while the thread lived, its arena kept them (decay as usual) */
    EXPECT_GE_U(w.pdirty_before_exit, ALL_PAGES / 2);
    EXPECT_EQ_U(arena_nthreads(w.arena), 0);
    /* fresh pages for the main thread's arena, once a new thread had
     * time to take the orphaned one (ORPHAN_GRACE_MS) */
    struct timespec ts = {0, 200 * 1000000};
    nanosleep(&ts, NULL);
    char *grow = dpm_malloc(GROW);
    if (grow == NULL) {
        TEST_FAIL("dpm_malloc(%zu) failed", GROW);
        return;
    }
    size_t pdirty = arena_stat(w.arena, "pdirty"), rss = resident_bytes();
    fprintf(stderr, "grow: arena %u dirty pages %zu -> %zu, RSS %zu -> %zu KiB\n", w.arena, w.pdirty_before_exit,
            pdirty, w.rss_with_blocks >> 10, rss >> 10);
    EXPECT_LE_U(pdirty, FEW_PAGES);
    EXPECT(rss + RSS_DROP <= w.rss_with_blocks, "RSS %zu KiB after the thread left, %zu KiB with the blocks",
           rss >> 10, w.rss_with_blocks >> 10);
    dpm_free(grow);
}

TEST(blocks_freed_after_their_thread_left_are_purged)
{
    struct worker w = {.free_them = false};
    if (!run_worker(&w))
        return;
    free_blocks();
    dpm_ctl("thread.tcache.flush", NULL, NULL, NULL, 0);   /* the large cache sends them home */
    size_t kept = arena_stat(w.arena, "pdirty");
    struct timespec ts = {0, 200 * 1000000};
    nanosleep(&ts, NULL);
    char *grow = dpm_malloc(GROW);
    if (grow == NULL) {
        TEST_FAIL("dpm_malloc(%zu) failed", GROW);
        return;
    }
    size_t pdirty = arena_stat(w.arena, "pdirty"), rss = resident_bytes();
    fprintf(stderr, "remote: arena %u dirty pages %zu in the grace, %zu after, RSS %zu -> %zu KiB\n", w.arena, kept,
            pdirty, w.rss_with_blocks >> 10, rss >> 10);
    EXPECT_GE_U(kept, ALL_PAGES / 2);
    EXPECT_LE_U(pdirty, FEW_PAGES);
    EXPECT(rss + RSS_DROP <= w.rss_with_blocks, "RSS %zu KiB after the frees, %zu KiB with the blocks", rss >> 10,
           w.rss_with_blocks >> 10);
    dpm_free(grow);
}

TEST(live_thread_keeps_its_dirty_pages)
{
    unsigned a = my_arena();
    size_t before = arena_stat(a, "pdirty");
    if (!alloc_blocks()) {
        TEST_FAIL("dpm_malloc(%zu) failed", BLOCK);
        return;
    }
    free_blocks();
    dpm_ctl("thread.tcache.flush", NULL, NULL, NULL, 0);
    size_t after = arena_stat(a, "pdirty");
    fprintf(stderr, "live: arena %u dirty pages %zu -> %zu\n", a, before, after);
    EXPECT_GE_U(after, before + ALL_PAGES / 2);
}

int main(void)
{
    dpm_free(dpm_malloc(1));   /* the main thread takes its arena first */
    RUN(next_thread_takes_the_orphaned_arena);
    RUN(orphaned_pages_go_when_the_process_grows);
    RUN(blocks_freed_after_their_thread_left_are_purged);
    RUN(live_thread_keeps_its_dirty_pages);
    return test_done();
}
