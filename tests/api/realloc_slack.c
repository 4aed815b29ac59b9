/*
 * realloc_slack.c - grow-by-realloc chains (alloc s, realloc 2s, realloc
 * 4s, free) run on the slack of the block that ended the last chain
 * (src/tcache_large.c): no copy when the chain size changes, no page-heap
 * work (arena lock) in steady state, and the slack is cached memory:
 * counted in the large cache's budget and cut off the live block by a
 * flush or an arena purge, also while another thread holds the block.
 */
#include "test.h"

#include <sched.h>
#include <dpmalloc.h>
#include <errno.h>
#include <pthread.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static size_t read_size_t(const char *name)
{
    uint64_t epoch = 1;
    size_t elen = sizeof epoch, v = 0, len = sizeof v;
    dpm_ctl("epoch", &epoch, &elen, &epoch, sizeof epoch);
    if (dpm_ctl(name, &v, &len, NULL, 0) != 0)
        return (size_t)-1;
    return v;
}

static unsigned my_arena(void)
{
    unsigned a = 0;
    size_t len = sizeof a;
    dpm_ctl("thread.arena", &a, &len, NULL, 0);
    return a;
}

static uint64_t arena_lock_ops(void)
{
    char name[96];
    snprintf(name, sizeof name, "stats.arenas.%u.mutexes.arena.num_ops", my_arena());
    uint64_t epoch = 1, v = 0;
    size_t elen = sizeof epoch, len = sizeof v;
    dpm_ctl("epoch", &epoch, &elen, &epoch, sizeof epoch);
    dpm_ctl(name, &v, &len, NULL, 0);
    return v;
}

static size_t active_bytes(void) { return read_size_t("stats.active"); }

/* One chain; returns how many of its two reallocs moved the block. */
static int chain(size_t s, size_t align)
{
    int moved = 0;
    unsigned char *p = dpm_malloc_aligned(s, align);
    if (p == NULL) {
        TEST_FAIL("dpm_malloc_aligned(%zu, %zu) = NULL", s, align);
        return 0;
    }
    memset(p, 1, s);
    for (size_t want = 2 * s, v = 1; want <= 4 * s; want *= 2, v++) {
        unsigned char *q = dpm_realloc_aligned(p, want, align);
        if (q == NULL) {
            TEST_FAIL("dpm_realloc_aligned(%zu) = NULL", want);
            dpm_free(p);
            return moved;
        }
        EXPECT(q[0] == v && q[want / 2 - 1] == v, "contents lost growing to %zu", want);
        moved += q != p;
        p = q;
        memset(p, (int)v + 1, want);
    }
    dpm_free(p);
    return moved;
}

static const size_t sizes[] = {3 * KiB, 4 * KiB, 8 * KiB, 16 * KiB, 32 * KiB, 128 * KiB, 512 * KiB, 1 * MiB};

/* Chains of every size in turn, as dpmbench's realloc workload runs them:
 * after the first pass, no chain of large blocks copies its block,
 * whatever size came before it (the page heap's neighbours of the block
 * do not matter). */
TEST(chains_of_changing_sizes_do_not_move)
{
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++)
        chain(sizes[z], 64);
    int moved = 0, reallocs = 0;
    for (int pass = 0; pass < 3; pass++)
        for (size_t align = 64; align <= 4096; align *= 64)
            for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++)
                for (int i = 0; i < 4; i++) {
                    int m = chain(sizes[z], align);
                    if (sizes[z] >= 16 * KiB) {   /* smaller ones start in slabs: they move */
                        moved += m;
                        reallocs += 2;
                    }
                }
    EXPECT(moved == 0, "%d of %d reallocs of large blocks copied their block", moved, reallocs);
}

/* 1 MiB -> 2 MiB -> 4 MiB chains in steady state: the growths use the
 * slack, the first block comes from the large cache; only the large
 * cache's decay tick (every 64 takes) reaches the arena. */
TEST(steady_chains_leave_the_page_heap_alone)
{
    for (int i = 0; i < 4; i++)
        chain(MiB, 64);
    uint64_t ops0 = arena_lock_ops();
    int moved = 0;
    for (int i = 0; i < 128; i++)
        moved += chain(MiB, 64);
    uint64_t ops = arena_lock_ops() - ops0;
    EXPECT(moved == 0, "%d of 256 reallocs copied their block", moved);
    EXPECT(ops <= 4, "128 chains 1 -> 2 -> 4 MiB took the arena lock %llu times", (unsigned long long)ops);
}

/* The slack counts in the large cache's budget (stats.tcache_bytes), and
 * a flush cuts it off the live block, which keeps its contents and
 * usable size. */
TEST(slack_is_budgeted_and_flushed)
{
    size_t budget = read_size_t("opt.tcache_large_bytes");
    EXPECT_EQ_I(dpm_ctl("thread.tcache.flush", NULL, NULL, NULL, 0), 0);   /* small bins count too */
    chain(MiB, 64);   /* the cache now holds the 4 MiB block that ended it */
    unsigned char *p = dpm_malloc(16 * KiB);
    EXPECT_NONNULL(p);
    if (p == NULL)
        return;
    memset(p, 7, 16 * KiB);
    EXPECT_EQ_U(dpm_usable_size(p), 16 * KiB);
    size_t held = read_size_t("stats.tcache_bytes");
    EXPECT(held >= 4 * MiB - 16 * KiB && held <= budget, "a 16 KiB block with 4 MiB of slack: cache holds %zu bytes",
           held);
    size_t active = active_bytes();
    EXPECT_EQ_I(dpm_ctl("thread.tcache.flush", NULL, NULL, NULL, 0), 0);
    EXPECT_EQ_U(read_size_t("stats.tcache_bytes"), 0);
    size_t after = active_bytes();
    EXPECT(after + 3 * MiB <= active, "flush left %zu bytes active of %zu: slack not cut", after, active);
    EXPECT_EQ_U(dpm_usable_size(p), 16 * KiB);
    EXPECT(p[0] == 7 && p[16 * KiB - 1] == 7, "contents lost when the slack was cut");
    unsigned char *q = dpm_realloc(p, 64 * KiB);
    EXPECT(q != NULL && q[16 * KiB - 1] == 7, "realloc after the cut lost the contents");
    dpm_free(q);
}

/* A full cache makes room by cutting the slack first: the budget holds
 * with the slack's block live. */
TEST(a_put_cuts_the_slack_for_room)
{
    size_t budget = read_size_t("opt.tcache_large_bytes");
    EXPECT_EQ_I(dpm_ctl("thread.tcache.flush", NULL, NULL, NULL, 0), 0);
    chain(MiB, 64);
    void *p = dpm_malloc(16 * KiB);   /* slack of about 4 MiB */
    void *b[3];
    for (int i = 0; i < 3; i++)
        b[i] = dpm_malloc(MiB);
    for (int i = 0; i < 3; i++)
        dpm_free(b[i]);
    size_t held = read_size_t("stats.tcache_bytes");
    EXPECT(held <= budget, "cache holds %zu bytes, budget %zu", held, budget);
    EXPECT(held >= 3 * MiB, "the freed 1 MiB blocks were not cached (%zu bytes held)", held);
    dpm_free(p);
    EXPECT_LE_U(read_size_t("stats.tcache_bytes"), budget);
}

/* Each growth into the block's own slack moves bytes from the cache's
 * count to the block (stats.tcache_bytes counts the slack), ends the
 * slack when it takes all of it, and the block that ends the chain is
 * cached whole. Run once while the process has one thread (the cache's
 * lock elided) and once with a second thread alive (taken). */
static void own_slack_growth_accounting(void)
{
    EXPECT_EQ_I(dpm_ctl("thread.tcache.flush", NULL, NULL, NULL, 0), 0);
    chain(MiB, 64);   /* the cache holds the 4 MiB block that ended it */
    EXPECT_EQ_U(read_size_t("stats.tcache_bytes"), 4 * MiB);
    unsigned char *p = dpm_malloc(MiB);
    EXPECT_NONNULL(p);
    if (p == NULL)
        return;
    memset(p, 3, MiB);
    EXPECT_EQ_U(dpm_usable_size(p), MiB);
    EXPECT_EQ_U(read_size_t("stats.tcache_bytes"), 3 * MiB);   /* the slack */
    /* sizes no block can have: the class rounding of SIZE_MAX wraps */
    for (volatile size_t huge = SIZE_MAX; huge > SIZE_MAX - 2 * 4096; huge -= 4095) {
        errno = 0;
        EXPECT(dpm_realloc(p, huge) == NULL && errno == ENOMEM, "dpm_realloc(%zu): not NULL/ENOMEM", huge);
    }
    EXPECT_EQ_U(dpm_usable_size(p), MiB);
    EXPECT_EQ_U(read_size_t("stats.tcache_bytes"), 3 * MiB);
    unsigned char *q = dpm_realloc(p, MiB + 1);
    EXPECT(q == p, "a growth into slack moved the block");
    size_t usable = dpm_usable_size(q);
    EXPECT(usable >= MiB + 1 && usable <= MiB + MiB / 4, "MiB + 1 bytes got %zu usable", usable);
    EXPECT_EQ_U(read_size_t("stats.tcache_bytes"), 4 * MiB - usable);
    q = dpm_realloc(q, 3 * MiB);
    EXPECT(q == p && dpm_usable_size(q) == 3 * MiB, "3 MiB: %p (was %p), usable %zu", (void *)q, (void *)p,
           dpm_usable_size(q));
    EXPECT_EQ_U(read_size_t("stats.tcache_bytes"), MiB);
    EXPECT(q[0] == 3 && q[MiB - 1] == 3, "contents lost growing into slack");
    q = dpm_realloc(q, 4 * MiB);   /* takes all of the slack: it ends */
    EXPECT(q == p && dpm_usable_size(q) == 4 * MiB, "4 MiB: %p (was %p), usable %zu", (void *)q, (void *)p,
           dpm_usable_size(q));
    EXPECT_EQ_U(read_size_t("stats.tcache_bytes"), 0);
    q = dpm_realloc(q, 4 * MiB + 4096);   /* past the block's pages: the general path */
    EXPECT(q != NULL && q[0] == 3 && q[MiB - 1] == 3, "growth past the slack lost the contents");
    EXPECT(dpm_usable_size(q) >= 4 * MiB + 4096, "usable %zu", dpm_usable_size(q));
    dpm_free(q);
    EXPECT_LE_U(read_size_t("stats.tcache_bytes"), read_size_t("opt.tcache_large_bytes"));
    EXPECT_EQ_I(dpm_ctl("thread.tcache.flush", NULL, NULL, NULL, 0), 0);
    EXPECT_EQ_U(read_size_t("stats.tcache_bytes"), 0);
}

static void *sleep_until_told(void *arg)
{
    int *stop = arg;
    while (!__atomic_load_n(stop, __ATOMIC_ACQUIRE)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

TEST(own_slack_growth_is_accounted)
{
    own_slack_growth_accounting();
    int stop = 0;
    pthread_t t;
    EXPECT_EQ_I(pthread_create(&t, NULL, sleep_until_told, &stop), 0);
    own_slack_growth_accounting();
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
}

/* A growth at an alignment the block's pages do not have is no growth
 * into slack: the block moves to the alignment, with its contents. */
TEST(aligned_growth_past_the_block_alignment_moves)
{
    EXPECT_EQ_I(dpm_ctl("thread.tcache.flush", NULL, NULL, NULL, 0), 0);
    for (int i = 0; i < 8; i++) {
        chain(MiB, 64);
        unsigned char *p = dpm_malloc(MiB);   /* page aligned, with slack */
        EXPECT_NONNULL(p);
        if (p == NULL)
            return;
        memset(p, 9, MiB);
        size_t align = (size_t)65536 << (i % 4);
        unsigned char *q = dpm_realloc_aligned(p, 2 * MiB, align);
        EXPECT(q != NULL && (uintptr_t)q % align == 0, "dpm_realloc_aligned(2 MiB, %zu) = %p", align, (void *)q);
        if (q == NULL)
            return;
        EXPECT(q[0] == 9 && q[MiB - 1] == 9, "contents lost moving to alignment %zu", align);
        EXPECT(((uintptr_t)p % align == 0) == (q == p), "block %p at alignment %zu: moved to %p", (void *)p, align,
               (void *)q);
        dpm_free(q);
    }
    EXPECT_LE_U(read_size_t("stats.tcache_bytes"), read_size_t("opt.tcache_large_bytes"));
}

/* Blocks with slack handed to another thread, grown and freed there while
 * a third thread purges the arena (which cuts slack) in a loop. */
#define HANDOFFS 300

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    unsigned char *slot;
    int done;
} box = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0};

static int stop_purging;

static void *producer(void *arg)
{
    (void)arg;
    for (int i = 0; i < HANDOFFS; i++) {
        chain(256 * KiB, 64);   /* a 1 MiB grown block in this thread's cache */
        unsigned char *p = dpm_malloc(32 * KiB);
        if (p == NULL)
            continue;
        memset(p, (int)(i & 0x7f) + 1, 32 * KiB);
        pthread_mutex_lock(&box.lock);
        while (box.slot != NULL)
            pthread_cond_wait(&box.cond, &box.lock);
        box.slot = p;
        pthread_cond_broadcast(&box.cond);
        pthread_mutex_unlock(&box.lock);
    }
    pthread_mutex_lock(&box.lock);
    box.done = 1;
    pthread_cond_broadcast(&box.cond);
    pthread_mutex_unlock(&box.lock);
    return NULL;
}

static void *consumer(void *arg)
{
    int *bad = arg;
    for (int i = 0;; i++) {
        pthread_mutex_lock(&box.lock);
        while (box.slot == NULL && !box.done)
            pthread_cond_wait(&box.cond, &box.lock);
        unsigned char *p = box.slot;
        box.slot = NULL;
        pthread_cond_broadcast(&box.cond);
        pthread_mutex_unlock(&box.lock);
        if (p == NULL)
            return NULL;
        unsigned char v = (unsigned char)((i & 0x7f) + 1);
        unsigned char *q = dpm_realloc(p, (i % 2 ? 128 : 512) * KiB);
        if (q == NULL || q[0] != v || q[32 * KiB - 1] != v)
            (*bad)++;
        if (q != NULL) {
            memset(q, 0, dpm_usable_size(q));
            dpm_free(q);
        }
    }
}

static void *purger(void *arg)
{
    (void)arg;
    unsigned n = 0;
    size_t len = sizeof n;
    dpm_ctl("arenas.narenas", &n, &len, NULL, 0);
    while (!__atomic_load_n(&stop_purging, __ATOMIC_RELAXED)) {
        for (unsigned a = 0; a < n; a++) {
            char name[64];
            snprintf(name, sizeof name, "arena.%u.purge", a);
            dpm_ctl(name, NULL, NULL, NULL, 0);
        }
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

TEST(slack_across_threads_and_purges)
{
    pthread_t prod, cons, purge;
    int bad = 0;
    pthread_create(&purge, NULL, purger, NULL);
    pthread_create(&cons, NULL, consumer, &bad);
    pthread_create(&prod, NULL, producer, NULL);
    pthread_join(prod, NULL);
    pthread_join(cons, NULL);
    __atomic_store_n(&stop_purging, 1, __ATOMIC_RELAXED);
    pthread_join(purge, NULL);
    EXPECT(bad == 0, "%d of %d handed-off blocks lost their contents", bad, HANDOFFS);
}

/* Large blocks sit in the large cache of the CPU that freed them: pinned
 * to the CPU it runs on, the thread's frees and mallocs meet one cache. */
static void pin_to_this_cpu(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(sched_getcpu(), &set);
    (void)sched_setaffinity(0, sizeof set, &set);
}

int main(void)
{
    pin_to_this_cpu();
    RUN(chains_of_changing_sizes_do_not_move);
    RUN(steady_chains_leave_the_page_heap_alone);
    RUN(slack_is_budgeted_and_flushed);
    RUN(a_put_cuts_the_slack_for_room);
    RUN(own_slack_growth_is_accounted);
    RUN(aligned_growth_past_the_block_alignment_moves);
    RUN(slack_across_threads_and_purges);
    return test_done();
}
