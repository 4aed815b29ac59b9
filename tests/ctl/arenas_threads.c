/*
 * arenas_threads.c - manual arenas under many threads.
 *
 * Proves: arenas made by "arenas.create" (named) can each be bound by
 * several threads through "thread.arena", which reads back the binding;
 * every block those threads allocate with dpm_malloc comes from their
 * arena, and blocks the main thread allocates for them with
 * dpm_malloc_arena from outside come from the arena asked for, as
 * "arenas.lookup" confirms for each block; "stats.arenas.<i>.nthreads"
 * counts the bound threads; "arena.<i>.destroy" and "arena.<i>.reset" give
 * EBUSY while other threads are bound (destroy also for a thread that
 * bound itself but has not allocated yet, and one whose cache is
 * disabled), and reset/destroy of an automatic arena give EPERM; blocks of
 * manual arenas sit only in the caches of their bound threads
 * (stats.arenas.<i>.tcache_bytes is what the workers freed and did not
 * flush, and a free of one by an unbound thread goes straight home); once
 * its threads moved to another arena, "arena.<i>.reset" drops the arena's
 * live bytes to zero, and they come back and allocate from it; after the threads exit, destroy
 * succeeds and the arena is gone (name, dpm_malloc_arena, thread.arena all
 * refuse it), and the next arenas.create reuses a destroyed slot; a
 * binding made while the thread's cache is disabled still holds once the
 * cache is enabled again; a bound thread unbinds at exit (allocated, cache
 * disabled or never allocated); in a forked child an arena bound only by the
 * parent's other threads has no threads and can be destroyed; statistics
 * taken while other threads create and destroy arenas work (and race-free
 * under ThreadSanitizer).
 * dpm_ API only (links dpmalloc_plain; label sanitize).
 */
#include "test.h"
#include "ctl_util.h"

#include <pthread.h>
#include <stdbool.h>

enum { NARENAS = 3, NTHREADS = 6, NBLOCKS = 400 };

static unsigned arena_ids[NARENAS];
static pthread_barrier_t barrier;

struct worker {
    int id;
    unsigned arena;           /* bound arena */
    unsigned seen_binding;    /* thread.arena after binding */
    int bind_err;
    void *own[NBLOCKS];       /* dpm_malloc'd by the worker */
    unsigned own_arena_bad;   /* lookups that disagreed */
    unsigned after_reset_bad;
    int flush_err;            /* flush, or the move away from the reset arena */
    int rebind_err;
};
static struct worker workers[NTHREADS];

static unsigned lookup(void *p)
{
    unsigned idx = 99999;
    size_t len = sizeof idx;
    if (dpm_ctl("arenas.lookup", &idx, &len, &p, sizeof p) != 0)
        return 88888;
    return idx;
}

static size_t block_size(int i) { return (size_t)(16 + (i * 37) % 3000) + (i % 50 == 0 ? 100000 : 0); }

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    w->bind_err = ctl_set("thread.arena", &w->arena, sizeof w->arena);
    ctl_get("thread.arena", &w->seen_binding, sizeof w->seen_binding);
    for (int i = 0; i < NBLOCKS; i++) {
        w->own[i] = dpm_malloc(block_size(i));
        if (w->own[i] != NULL)
            memset(w->own[i], w->id, block_size(i));
    }
    for (int i = 0; i < NBLOCKS; i++)
        if (lookup(w->own[i]) != w->arena)
            w->own_arena_bad++;
    /* free half: they enter this thread's cache */
    for (int i = 0; i < NBLOCKS; i += 2)
        dpm_free(w->own[i]);
    pthread_barrier_wait(&barrier);   /* 1: main checks bindings, EBUSY */
    pthread_barrier_wait(&barrier);   /* 2: the reset arena's threads leave it */
    unsigned away = 0;
    bool resetting = w->arena == arena_ids[0];
    w->flush_err = resetting ? ctl_set("thread.arena", &away, sizeof away) : ctl_action("thread.tcache.flush");
    pthread_barrier_wait(&barrier);   /* 3: main resets arena_ids[0] */
    pthread_barrier_wait(&barrier);   /* 4: reset done */
    if (resetting)
        w->rebind_err = ctl_set("thread.arena", &w->arena, sizeof w->arena);
    /* blocks of a reset arena are gone: never touch them again; the arena
     * itself keeps working */
    for (int i = 0; i < NBLOCKS; i++) {
        void *p = dpm_malloc(block_size(i));
        if (p == NULL || lookup(p) != w->arena)
            w->after_reset_bad++;
        if (p != NULL)
            memset(p, 0x33, block_size(i));
        dpm_free(p);
    }
    ctl_action("thread.tcache.flush");
    if (w->arena != arena_ids[0])
        for (int i = 1; i < NBLOCKS; i += 2)
            dpm_free(w->own[i]);
    ctl_action("thread.tcache.flush");
    return NULL;
}

TEST(bound_threads_reset_destroy)
{
    const char *names[NARENAS] = {"net-rx", "net-tx", "control"};
    unsigned before = CTL_UNS("arenas.narenas");
    for (int a = 0; a < NARENAS; a++) {
        size_t len = sizeof arena_ids[a];
        EXPECT_CTL(dpm_ctl("arenas.create", &arena_ids[a], &len, &names[a], sizeof names[a]), 0);
        const char *got = NULL;
        EXPECT_CTL(ctl_get(ctl_name("arena.%u.name", arena_ids[a]), &got, sizeof got), 0);
        EXPECT(got != NULL && strcmp(got, names[a]) == 0, "arena %u name \"%s\"", arena_ids[a], got ? got : "");
    }
    (void)before;
    EXPECT(CTL_UNS("arenas.narenas") > arena_ids[NARENAS - 1],
           "arenas.narenas %u", CTL_UNS("arenas.narenas"));
    pthread_barrier_init(&barrier, NULL, NTHREADS + 1);
    pthread_t th[NTHREADS];
    for (int t = 0; t < NTHREADS; t++) {
        workers[t].id = t + 1;
        workers[t].arena = arena_ids[t % NARENAS];
        pthread_create(&th[t], NULL, worker_main, &workers[t]);
    }
    /* meanwhile, the main thread allocates into each arena from outside */
    static void *outside[NARENAS][NBLOCKS];
    unsigned outside_bad = 0;
    for (int a = 0; a < NARENAS; a++)
        for (int i = 0; i < NBLOCKS; i++) {
            outside[a][i] = dpm_malloc_arena(arena_ids[a], block_size(i), i % 3 == 0 ? 64 : 0);
            if (outside[a][i] == NULL || lookup(outside[a][i]) != arena_ids[a])
                outside_bad++;
        }
    EXPECT_EQ_U(outside_bad, 0);
    pthread_barrier_wait(&barrier);   /* 1 */
    for (int t = 0; t < NTHREADS; t++) {
        EXPECT_EQ_I(workers[t].bind_err, 0);
        EXPECT_EQ_U(workers[t].seen_binding, workers[t].arena);
        EXPECT_EQ_U(workers[t].own_arena_bad, 0);
    }
    ctl_refresh();
    for (int a = 0; a < NARENAS; a++) {
        /* the workers freed half their blocks into their own caches */
        EXPECT(CTL_SIZE(ctl_name("stats.arenas.%u.tcache_bytes", arena_ids[a])) > 0,
               "arena %u: bound threads cached nothing", arena_ids[a]);
        EXPECT_EQ_U(CTL_UNS(ctl_name("stats.arenas.%u.nthreads", arena_ids[a])), NTHREADS / NARENAS);
        EXPECT_CTL(ctl_action(ctl_name("arena.%u.destroy", arena_ids[a])), EBUSY);
        EXPECT_CTL(ctl_action(ctl_name("arena.%u.reset", arena_ids[a])), EBUSY);
    }
    /* automatic arenas are never reset or destroyed */
    EXPECT_CTL(ctl_action("arena.0.reset"), EPERM);
    EXPECT_CTL(ctl_action("arena.0.destroy"), EPERM);
    pthread_barrier_wait(&barrier);   /* 2 */
    pthread_barrier_wait(&barrier);   /* 3: every worker flushed or left arena_ids[0] */
    unsigned r = arena_ids[0];
    ctl_refresh();
    size_t live_before = CTL_SIZE(ctl_name("stats.arenas.%u.small.allocated", r)) +
                         CTL_SIZE(ctl_name("stats.arenas.%u.large.allocated", r));
    EXPECT(live_before > 0, "arena %u had no live bytes before the reset", r);
    EXPECT_CTL(ctl_action(ctl_name("arena.%u.reset", r)), 0);
    ctl_refresh();
    EXPECT_EQ_U(CTL_SIZE(ctl_name("stats.arenas.%u.small.allocated", r)), 0);
    EXPECT_EQ_U(CTL_SIZE(ctl_name("stats.arenas.%u.large.allocated", r)), 0);
    EXPECT_EQ_U(CTL_SIZE(ctl_name("stats.arenas.%u.pactive", r)), 0);
    for (int i = 0; i < NBLOCKS; i++)
        outside[0][i] = NULL;   /* gone with the reset */
    /* the reset arena serves again, from outside too */
    void *again = dpm_malloc_arena(r, 1000, 0);
    EXPECT_NONNULL(again);
    EXPECT_EQ_U(lookup(again), r);
    dpm_free(again);
    pthread_barrier_wait(&barrier);   /* 4 */
    for (int t = 0; t < NTHREADS; t++) {
        pthread_join(th[t], NULL);
        EXPECT_EQ_I(workers[t].flush_err, 0);
        EXPECT_EQ_I(workers[t].rebind_err, 0);
        EXPECT_EQ_U(workers[t].after_reset_bad, 0);
    }
    for (int a = 1; a < NARENAS; a++)
        for (int i = 0; i < NBLOCKS; i++)
            dpm_free(outside[a][i]);
    ctl_refresh();
    for (int a = 0; a < NARENAS; a++)
        EXPECT_EQ_U(CTL_UNS(ctl_name("stats.arenas.%u.nthreads", arena_ids[a])), 0);
    /* threads gone: destroy works, and the arenas are gone */
    for (int a = 0; a < NARENAS; a++) {
        unsigned id = arena_ids[a];
        EXPECT_CTL(ctl_action(ctl_name("arena.%u.destroy", id)), 0);
        const char *nm;
        EXPECT_CTL(ctl_get(ctl_name("arena.%u.name", id), &nm, sizeof nm), ENOENT);
        errno = 0;
        EXPECT_NULL(dpm_malloc_arena(id, 64, 0));
        EXPECT_ERRNO(EINVAL);
        EXPECT_CTL(ctl_set("thread.arena", &id, sizeof id), EINVAL);
    }
    unsigned again_id = 0;
    EXPECT_CTL(ctl_get("arenas.create", &again_id, sizeof again_id), 0);
    bool reused = false;
    for (int a = 0; a < NARENAS; a++)
        reused |= again_id == arena_ids[a];
    EXPECT(reused, "arenas.create gave %u, not one of the destroyed slots", again_id);
    EXPECT_CTL(ctl_action(ctl_name("arena.%u.destroy", again_id)), 0);
    pthread_barrier_destroy(&barrier);
}

/* A thread that bound itself to an arena is bound, whether or not it has
 * allocated yet and whether or not its cache is enabled. */
static unsigned bind_target;
static int bind_mode;   /* 0: bind only; 1: allocate, disable cache, bind */
static pthread_barrier_t bind_barrier;

static void *binder_main(void *arg)
{
    (void)arg;
    if (bind_mode == 1) {
        void *p = dpm_malloc(32);
        dpm_free(p);
        bool off = false;
        ctl_set("thread.tcache.enabled", &off, sizeof off);
    }
    ctl_set("thread.arena", &bind_target, sizeof bind_target);
    pthread_barrier_wait(&bind_barrier);   /* bound */
    pthread_barrier_wait(&bind_barrier);   /* main has tried destroy */
    void *p = dpm_malloc(64);              /* still bound: from the arena */
    unsigned where = p != NULL ? lookup(p) : 77777;
    dpm_free(p);
    ctl_action("thread.tcache.flush");
    return (void *)(uintptr_t)where;
}

static void bind_then_destroy(int mode)
{
    bind_mode = mode;
    EXPECT_CTL(ctl_get("arenas.create", &bind_target, sizeof bind_target), 0);
    pthread_barrier_init(&bind_barrier, NULL, 2);
    pthread_t t;
    pthread_create(&t, NULL, binder_main, NULL);
    pthread_barrier_wait(&bind_barrier);
    ctl_refresh();
    unsigned nthreads = CTL_UNS(ctl_name("stats.arenas.%u.nthreads", bind_target));
    int e = ctl_action(ctl_name("arena.%u.destroy", bind_target));
    EXPECT(e == EBUSY && nthreads == 1,
           "%s: thread bound to arena %u: nthreads %u, arena.%u.destroy gave %d (expected 1 and EBUSY %d)",
           mode == 0 ? "bound before its first allocation" : "bound with its cache disabled", bind_target,
           nthreads, bind_target, e, EBUSY);
    pthread_barrier_wait(&bind_barrier);
    void *ret;
    pthread_join(t, &ret);
    if (e == EBUSY) {
        EXPECT_EQ_U((uintptr_t)ret, bind_target);
        EXPECT_CTL(ctl_action(ctl_name("arena.%u.destroy", bind_target)), 0);
    }
    pthread_barrier_destroy(&bind_barrier);
}

TEST(destroy_busy_when_bound_before_first_allocation) { bind_then_destroy(0); }
TEST(destroy_busy_when_bound_with_cache_disabled) { bind_then_destroy(1); }

/* A binding made while the thread's cache is disabled holds after the
 * cache is enabled again: blocks come from the bound arena. */
static void *toggle_main(void *arg)
{
    unsigned target = *(unsigned *)arg;
    static unsigned result[4];
    void *p = dpm_malloc(64);   /* the thread gets a cache, on some arena */
    dpm_free(p);
    bool off = false, on = true;
    ctl_set("thread.tcache.enabled", &off, sizeof off);
    ctl_set("thread.arena", &target, sizeof target);
    p = dpm_malloc(64);
    result[0] = lookup(p);
    dpm_free(p);
    ctl_set("thread.tcache.enabled", &on, sizeof on);
    ctl_get("thread.arena", &result[1], sizeof result[1]);
    p = dpm_malloc(64);
    result[2] = lookup(p);
    dpm_free(p);
    p = dpm_malloc(3000);
    result[3] = lookup(p);
    dpm_free(p);
    ctl_action("thread.tcache.flush");
    return result;
}

TEST(binding_survives_cache_toggle)
{
    unsigned m = 0;
    EXPECT_CTL(ctl_get("arenas.create", &m, sizeof m), 0);
    pthread_t t;
    pthread_create(&t, NULL, toggle_main, &m);
    void *ret = NULL;
    pthread_join(t, &ret);
    const unsigned *r = ret;
    EXPECT(r[0] == m, "cache disabled, bound to %u: block from arena %u", m, r[0]);
    EXPECT(r[1] == m, "thread.arena reads %u after re-enabling the cache, bound to %u", r[1], m);
    EXPECT(r[2] == m && r[3] == m,
           "cache re-enabled, thread.arena %u: 64-byte block from arena %u, 3000-byte block from arena %u", r[1],
           r[2], r[3]);
    EXPECT_CTL(ctl_action(ctl_name("arena.%u.destroy", m)), 0);
}

/* After fork only the forking thread exists: in the child an arena bound
 * by other parent threads has no threads and can be destroyed, while the
 * parent's threads keep it busy in the parent. */
static unsigned fork_arena;
static pthread_barrier_t fork_barrier;

static void *fork_binder(void *arg)
{
    (void)arg;
    ctl_set("thread.arena", &fork_arena, sizeof fork_arena);
    void *p = dpm_malloc(100);
    pthread_barrier_wait(&fork_barrier);   /* bound */
    pthread_barrier_wait(&fork_barrier);   /* fork done */
    dpm_free(p);
    return NULL;
}

static int fork_child(void *arg)
{
    (void)arg;
    ctl_refresh();
    unsigned n = CTL_UNS(ctl_name("stats.arenas.%u.nthreads", fork_arena));
    int e = ctl_action(ctl_name("arena.%u.destroy", fork_arena));
    unsigned m = 0;
    int c = ctl_get("arenas.create", &m, sizeof m);
    void *p = c == 0 ? dpm_malloc_arena(m, 5000, 0) : NULL;
    unsigned where = p != NULL ? lookup(p) : 99999;
    fprintf(stderr, "child: nthreads %u, destroy %d, create %d, new arena %u serves %u\n", n, e, c, m, where);
    return n == 0 && e == 0 && c == 0 && where == m ? 0 : 1;
}

TEST(fork_child_sees_only_its_thread)
{
    enum { T = 3 };
    if (TEST_TSAN && !tsan_fork_ok()) {
        /* the fork handlers hold every arena lock at once: more than
         * ThreadSanitizer's deadlock detector tracks (64) */
        fprintf(stderr, "    (skipped: ThreadSanitizer without detect_deadlocks=0)\n");
        return;
    }
    EXPECT_CTL(ctl_get("arenas.create", &fork_arena, sizeof fork_arena), 0);
    pthread_barrier_init(&fork_barrier, NULL, T + 1);
    pthread_t th[T];
    for (int i = 0; i < T; i++)
        pthread_create(&th[i], NULL, fork_binder, NULL);
    pthread_barrier_wait(&fork_barrier);
    struct test_child c;
    EXPECT_EQ_I(test_run_child(fork_child, NULL, &c, 20), 0);
    char why[96];
    EXPECT(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0, "fork child %s:\n%s",
           test_describe_status(c.status, why, sizeof why), c.err);
    ctl_refresh();
    EXPECT_EQ_U(CTL_UNS(ctl_name("stats.arenas.%u.nthreads", fork_arena)), T);
    EXPECT_CTL(ctl_action(ctl_name("arena.%u.destroy", fork_arena)), EBUSY);
    pthread_barrier_wait(&fork_barrier);
    for (int i = 0; i < T; i++)
        pthread_join(th[i], NULL);
    EXPECT_CTL(ctl_action(ctl_name("arena.%u.destroy", fork_arena)), 0);
    pthread_barrier_destroy(&fork_barrier);
}

/* A thread bound to an arena unbinds when it exits, whether it allocated,
 * ran without a cache, or never allocated at all. */
static unsigned exit_target;
static void *exit_main(void *arg)
{
    int mode = (int)(intptr_t)arg;
    if (mode == 1) {
        bool off = false;
        ctl_set("thread.tcache.enabled", &off, sizeof off);
    }
    ctl_set("thread.arena", &exit_target, sizeof exit_target);
    if (mode != 2) {
        void *p = dpm_malloc(100);
        dpm_free(p);
    }
    return NULL;
}

TEST(exited_threads_unbind)
{
    static const char *const how[] = {"allocated", "cache disabled", "never allocated"};
    for (int mode = 0; mode < 3; mode++) {
        EXPECT_CTL(ctl_get("arenas.create", &exit_target, sizeof exit_target), 0);
        pthread_t t;
        pthread_create(&t, NULL, exit_main, (void *)(intptr_t)mode);
        pthread_join(t, NULL);
        ctl_refresh();
        unsigned n = CTL_UNS(ctl_name("stats.arenas.%u.nthreads", exit_target));
        int e = ctl_action(ctl_name("arena.%u.destroy", exit_target));
        EXPECT(n == 0 && e == 0, "thread (%s) exited: nthreads %u, destroy %d", how[mode], n, e);
    }
}

/* Statistics taken while other threads create, fill and destroy arenas
 * (a monitoring thread next to a pool manager): no crash, no hang, every
 * call succeeds, and in the ThreadSanitizer build no data race is
 * reported (it would fail this test's exit status). */
static int churn_stop;   /* __atomic accesses */
struct churn_result {
    unsigned long cycles;
    int bad;
};

static void *churn_main(void *arg)
{
    struct churn_result *r = arg;
    while (!__atomic_load_n(&churn_stop, __ATOMIC_RELAXED)) {
        unsigned m = 0;
        if (ctl_get("arenas.create", &m, sizeof m) != 0) {
            r->bad++;
            continue;
        }
        for (int i = 0; i < 8; i++)
            if (dpm_malloc_arena(m, i % 2 ? 100 : 50000, 0) == NULL)
                r->bad++;
        if (ctl_action(ctl_name("arena.%u.destroy", m)) != 0)
            r->bad++;
        r->cycles++;
    }
    return NULL;
}

/* Counts braces of a JSON report as it streams by. */
struct brace_count {
    long depth, min_depth, chars;
};
static void count_braces(void *opaque, const char *text)
{
    struct brace_count *b = opaque;
    for (; *text != '\0'; text++) {
        b->chars++;
        if (*text == '{' || *text == '[')
            b->depth++;
        else if (*text == '}' || *text == ']')
            b->depth--;
        if (b->depth < b->min_depth)
            b->min_depth = b->depth;
    }
}

static void *epoch_main(void *arg)
{
    struct churn_result *r = arg;
    while (!__atomic_load_n(&churn_stop, __ATOMIC_RELAXED)) {
        if (r->cycles % 8 == 0) {   /* a whole JSON report now and then */
            struct brace_count b = {0, 0, 0};
            dpm_stats_print(count_braces, &b, "Jg");
            if (b.depth != 0 || b.min_depth < 0 || b.chars < 100)
                r->bad++;
        }
        uint64_t one = 1, e = 0;
        size_t len = sizeof e;
        if (dpm_ctl("epoch", &e, &len, &one, sizeof one) != 0)
            r->bad++;
        size_t v = 0;
        if (ctl_get("stats.allocated", &v, sizeof v) != 0)
            r->bad++;
        r->cycles++;
    }
    return NULL;
}

TEST(stats_during_create_destroy)
{
    struct churn_result c1 = {0, 0}, c2 = {0, 0}, ep = {0, 0};
    pthread_t t1, t2, t3;
    __atomic_store_n(&churn_stop, 0, __ATOMIC_RELAXED);
    pthread_create(&t1, NULL, churn_main, &c1);
    pthread_create(&t2, NULL, churn_main, &c2);
    pthread_create(&t3, NULL, epoch_main, &ep);
    usleep(300 * 1000);
    __atomic_store_n(&churn_stop, 1, __ATOMIC_RELAXED);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    pthread_join(t3, NULL);
    fprintf(stderr, "    %lu + %lu create/fill/destroy cycles, %lu epochs\n", c1.cycles, c2.cycles, ep.cycles);
    EXPECT(c1.bad == 0 && c2.bad == 0 && ep.bad == 0,
           "failed calls: %d, %d (churn), %d (epoch, stats.allocated, unbalanced JSON reports)", c1.bad, c2.bad,
           ep.bad);
    EXPECT(c1.cycles > 0 && c2.cycles > 0 && ep.cycles > 0, "a thread made no progress");
}

int main(void)
{
    void *warm = dpm_malloc(1);
    dpm_free(warm);
    RUN(bound_threads_reset_destroy);
    RUN(destroy_busy_when_bound_before_first_allocation);
    RUN(destroy_busy_when_bound_with_cache_disabled);
    RUN(binding_survives_cache_toggle);
    RUN(exited_threads_unbind);
    RUN(fork_child_sees_only_its_thread);
    RUN(stats_during_create_destroy);
    return test_done();
}
