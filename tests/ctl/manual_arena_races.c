/*
 * manual_arena_races.c - no block of a reset or destroyed manual arena is
 * ever handed out again, and reset, destroy, thread.arena and
 * arenas.create on one arena are atomic with respect to each other.
 *
 * Proves:
 *  - blocks of manual arena M1 (allocated by a thread bound to M1) that a
 *    thread bound to another manual arena M2 frees go home at once: after
 *    "arena.<M1>.destroy" or "arena.<M1>.reset" succeeds (nobody bound to
 *    M1), every block that thread allocates comes from M2 and is writable
 *    (small and cached large classes, many blocks, several rounds);
 *  - "arena.<i>.reset" gives EBUSY while another thread is bound to the
 *    arena (it may hold the arena's blocks in its cache), and succeeds for
 *    a caller that is itself the only bound thread (its own cache is
 *    flushed first: what it allocates afterwards is writable and from the
 *    arena);
 *  - "thread.arena" racing "arena.<i>.destroy" (or reset) of the same
 *    arena: never do both succeed; a thread bound successfully allocates
 *    only from that arena, which stays alive while it is bound;
 *  - two concurrent destroys of one arena: exactly one returns 0, the
 *    other ENOENT;
 *  - "arenas.create" racing two destroys of one index: a destroy that
 *    succeeds destroys one arena each (the first one, or the one created
 *    into the freed slot), and a thread bound to the created arena only
 *    ever allocates from it.
 * Each scenario runs in a child process: on a broken allocator it ends in
 * SIGSEGV (a block in unmapped memory) or a hang, reported as a failure.
 * dpm_ API only (links dpmalloc_plain; label sanitize).
 */
#include "test.h"
#include "ctl_util.h"

#include <pthread.h>
#include <stdbool.h>

/* index of the arena that owns p; 88888 if none does */
static unsigned lookup(void *p)
{
    unsigned idx = 99999;
    size_t len = sizeof idx;
    if (dpm_ctl("arenas.lookup", &idx, &len, &p, sizeof p) != 0)
        return 88888;
    return idx;
}

static unsigned create_arena(void)
{
    unsigned m = 0;
    int e = ctl_get("arenas.create", &m, sizeof m);
    if (e != 0) {
        fprintf(stderr, "arenas.create failed: %d\n", e);
        exit(3);
    }
    return m;
}

static int bind_to(unsigned a) { return ctl_set("thread.arena", &a, sizeof a); }

/* Runs fn in a child; the child's stderr explains a failure. */
static void expect_child_ok(int (*fn)(void *), void *arg, const char *what, unsigned timeout_s)
{
    if (TEST_TSAN && !tsan_fork_ok()) {
        fprintf(stderr, "    (skipped: ThreadSanitizer without detect_deadlocks=0)\n");
        return;
    }
    struct test_child c;
    EXPECT_EQ_I(test_run_child(fn, arg, &c, timeout_s), 0);
    char why[96];
    /* the child leaves by _exit: a sanitizer report shows only in its stderr */
    bool ok = WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0 && strstr(c.err, "Sanitizer") == NULL;
    EXPECT(ok, "%s: child %s:\n%s", what, test_describe_status(c.status, why, sizeof why), c.err);
    if (ok)
        fprintf(stderr, "%s", c.err);   /* the child's summary */
}

/* ---- blocks of M1 freed by a thread bound to M2 ------------------------ */

/* small classes, and large ones within the default tcache_max (128 KiB) */
static const size_t sizes[] = {16, 48, 208, 1024, 3072, 14336, 20480, 65536, 131072};
enum { NSIZES = sizeof sizes / sizeof sizes[0], PER_SIZE = 150, NBLK = NSIZES * PER_SIZE };

static void *m1_blocks[NBLK];
static unsigned m1, m2;
static pthread_barrier_t m_barrier;
struct m2_result {
    unsigned bind_err, not_m2, bad;
};

static size_t size_of_block(int i) { return sizes[i % NSIZES]; }

static void *m1_owner(void *arg)
{
    unsigned *bad = arg;
    if (bind_to(m1) != 0)
        (*bad)++;
    for (int i = 0; i < NBLK; i++) {
        m1_blocks[i] = dpm_malloc(size_of_block(i));
        if (m1_blocks[i] == NULL || lookup(m1_blocks[i]) != m1)
            (*bad)++;
        else
            memset(m1_blocks[i], 0x11, size_of_block(i));
    }
    return NULL;   /* exits: no longer bound to M1 */
}

static void *m2_freer(void *arg)
{
    struct m2_result *r = arg;
    r->bind_err = (unsigned)bind_to(m2);
    dpm_free(dpm_malloc(100));   /* the thread has a cache */
    for (int i = 0; i < NBLK; i++)
        dpm_free(m1_blocks[i]);
    pthread_barrier_wait(&m_barrier);   /* main resets or destroys M1 */
    pthread_barrier_wait(&m_barrier);
    static void *mine[NBLK];
    for (int i = 0; i < NBLK; i++) {
        void *p = dpm_malloc(size_of_block(i));
        mine[i] = p;
        if (p == NULL) {
            r->bad++;
            continue;
        }
        if (lookup(p) != m2 && r->not_m2++ == 0)
            fprintf(stderr, "block %p of %zu bytes from arena %u, bound to %u\n", p, size_of_block(i), lookup(p), m2);
        memset(p, 0x22, size_of_block(i));   /* SIGSEGV if p is in M1's released memory */
    }
    for (int i = 0; i < NBLK; i++)
        dpm_free(mine[i]);
    return NULL;
}

static int foreign_free_child(void *arg)
{
    bool destroy = arg != NULL;
    int bad = 0;
    for (int round = 0; round < 4; round++) {
        m1 = create_arena();
        m2 = create_arena();
        unsigned owner_bad = 0;
        pthread_t t1, t2;
        pthread_create(&t1, NULL, m1_owner, &owner_bad);
        pthread_join(t1, NULL);
        struct m2_result r = {0, 0, 0};
        pthread_barrier_init(&m_barrier, NULL, 2);
        pthread_create(&t2, NULL, m2_freer, &r);
        pthread_barrier_wait(&m_barrier);
        int e = ctl_action(ctl_name(destroy ? "arena.%u.destroy" : "arena.%u.reset", m1));
        pthread_barrier_wait(&m_barrier);
        pthread_join(t2, NULL);
        pthread_barrier_destroy(&m_barrier);
        int e2 = ctl_action(ctl_name("arena.%u.destroy", m2));
        int e1 = destroy ? 0 : ctl_action(ctl_name("arena.%u.destroy", m1));
        if (owner_bad || r.bind_err || r.not_m2 || r.bad || e || e1 || e2) {
            fprintf(stderr,
                    "round %d: owner errors %u, bind %u, %u of %d blocks not from M2 %u, %u failed allocations, "
                    "%s M1 %d, destroy M2 %d, M1 %d\n",
                    round, owner_bad, r.bind_err, r.not_m2, NBLK, m2, r.bad, destroy ? "destroy" : "reset", e, e2, e1);
            bad++;
        }
    }
    return bad != 0;
}

TEST(foreign_manual_blocks_after_destroy)
{
    expect_child_ok(foreign_free_child, (void *)1, "M2 thread freed M1's blocks, M1 destroyed", 60);
}

TEST(foreign_manual_blocks_after_reset)
{
    expect_child_ok(foreign_free_child, NULL, "M2 thread freed M1's blocks, M1 reset", 60);
}

/* ---- reset while another thread is bound -------------------------------- */

static unsigned busy_arena;
static pthread_barrier_t busy_barrier;

static void *busy_holder(void *arg)
{
    unsigned *bad = arg;
    void *p[NBLK];
    if (bind_to(busy_arena) != 0)
        (*bad)++;
    for (int i = 0; i < NBLK; i++)
        p[i] = dpm_malloc(size_of_block(i));
    for (int i = 0; i < NBLK; i++)
        dpm_free(p[i]);   /* into this thread's cache */
    pthread_barrier_wait(&busy_barrier);   /* main tries the reset */
    pthread_barrier_wait(&busy_barrier);
    for (int i = 0; i < NBLK; i++) {
        p[i] = dpm_malloc(size_of_block(i));
        if (p[i] == NULL || lookup(p[i]) != busy_arena)
            (*bad)++;
        else
            memset(p[i], 0x44, size_of_block(i));   /* SIGSEGV if the reset went through */
    }
    for (int i = 0; i < NBLK; i++)
        dpm_free(p[i]);
    return NULL;
}

static int reset_busy_child(void *arg)
{
    (void)arg;
    int bad = 0;
    busy_arena = create_arena();
    unsigned holder_bad = 0;
    pthread_barrier_init(&busy_barrier, NULL, 2);
    pthread_t t;
    pthread_create(&t, NULL, busy_holder, &holder_bad);
    pthread_barrier_wait(&busy_barrier);
    int e = ctl_action(ctl_name("arena.%u.reset", busy_arena));
    pthread_barrier_wait(&busy_barrier);
    pthread_join(t, NULL);
    pthread_barrier_destroy(&busy_barrier);
    if (e != EBUSY || holder_bad != 0) {
        fprintf(stderr, "reset with a bound thread holding cached blocks: %d (expected EBUSY %d); %u bad blocks\n", e,
                EBUSY, holder_bad);
        bad++;
    }
    /* the thread is gone: reset works; then the caller binds itself, fills
     * its cache with the arena's blocks and resets: allowed, and its cache
     * was flushed */
    int e_idle = ctl_action(ctl_name("arena.%u.reset", busy_arena));
    int e_bind = bind_to(busy_arena);
    void *p[NBLK];
    for (int i = 0; i < NBLK; i++)
        p[i] = dpm_malloc(size_of_block(i));
    for (int i = 0; i < NBLK; i++)
        dpm_free(p[i]);
    int e_own = ctl_action(ctl_name("arena.%u.reset", busy_arena));
    unsigned not_own = 0;
    for (int i = 0; i < NBLK; i++) {
        p[i] = dpm_malloc(size_of_block(i));
        if (p[i] == NULL || lookup(p[i]) != busy_arena)
            not_own++;
        else
            memset(p[i], 0x55, size_of_block(i));
    }
    for (int i = 0; i < NBLK; i++)
        dpm_free(p[i]);
    int e_busy_self = ctl_action(ctl_name("arena.%u.destroy", busy_arena));
    int e_away = bind_to(0);
    int e_destroy = ctl_action(ctl_name("arena.%u.destroy", busy_arena));
    if (e_idle || e_bind || e_own || not_own || e_busy_self != EBUSY || e_away || e_destroy) {
        fprintf(stderr,
                "idle reset %d, bind %d, reset by its only bound thread %d (then %u bad blocks), destroy by it %d "
                "(expected EBUSY), unbind %d, destroy %d\n",
                e_idle, e_bind, e_own, not_own, e_busy_self, e_away, e_destroy);
        bad++;
    }
    return bad != 0;
}

TEST(reset_busy_while_another_thread_is_bound)
{
    expect_child_ok(reset_busy_child, NULL, "reset with another thread bound", 60);
}

/* ---- races: bind / create against destroy -------------------------------- */

enum { ROUNDS = TEST_TSAN ? 300 : 3000 };

enum race_kind { RACE_BIND_DESTROY, RACE_BIND_RESET, RACE_DOUBLE_DESTROY, RACE_CREATE_DESTROY };

static struct race {
    enum race_kind kind;
    pthread_barrier_t start, done, after;
    unsigned target;           /* the arena the round is about */
    int bind_err;              /* RACE_BIND_*: thread.arena */
    int release_err[2];        /* destroys (or the reset) */
    unsigned created;          /* RACE_CREATE_DESTROY: arenas.create's index */
    int create_err;
    int create_bind_err;
    unsigned bound_bad;        /* blocks of a bound thread not from its arena */
    bool stop;
} race;

/* A thread bound to arena a allocates a few blocks (small and large),
 * writes them, and counts those not from a. */
static unsigned alloc_while_bound(unsigned a, void **p, int n)
{
    unsigned bad = 0, seen = 77777;
    if (ctl_get("thread.arena", &seen, sizeof seen) != 0 || seen != a)
        bad++;
    for (int i = 0; i < n; i++) {
        size_t sz = i % 2 ? 48 : 40000;
        p[i] = dpm_malloc(sz);
        if (p[i] == NULL || lookup(p[i]) != a)
            bad++;
        else
            memset(p[i], 0x66, sz);
    }
    return bad;
}

static unsigned recheck_and_free(unsigned a, void **p, int n)
{
    unsigned bad = 0;
    for (int i = 0; i < n; i++) {
        if (p[i] == NULL)
            continue;
        if (lookup(p[i]) != a)
            bad++;
        else
            memset(p[i], 0x77, i % 2 ? 48 : 40000);
        dpm_free(p[i]);
    }
    return bad;
}

/* Thread 0: binds to the target (bind races) or destroys it; thread 1
 * destroys/resets it; thread 2 (create race) creates an arena and binds to
 * it. A bound thread leaves its arena only after the "done" barrier, when
 * every release attempt of the round is over. */
static void *racer(void *arg)
{
    int role = (int)(intptr_t)arg;
    enum { N = 4 };
    for (;;) {
        pthread_barrier_wait(&race.start);
        if (race.stop)
            return NULL;
        void *p[N] = {0};
        unsigned bound_to = 0;
        bool bound = false;
        if (role == 0 && (race.kind == RACE_BIND_DESTROY || race.kind == RACE_BIND_RESET)) {
            race.bind_err = bind_to(race.target);
            bound = race.bind_err == 0;
            bound_to = race.target;
        } else if (role == 2) {
            unsigned c = 0;
            race.create_err = ctl_get("arenas.create", &c, sizeof c);
            race.created = c;
            race.create_bind_err = race.create_err == 0 ? bind_to(c) : -1;
            bound = race.create_bind_err == 0;
            bound_to = c;
        } else {
            const char *op = race.kind == RACE_BIND_RESET ? "arena.%u.reset" : "arena.%u.destroy";
            race.release_err[role] = ctl_action(ctl_name(op, race.target));
        }
        unsigned bad = bound ? alloc_while_bound(bound_to, p, N) : 0;
        pthread_barrier_wait(&race.done);
        if (bound) {
            bad += recheck_and_free(bound_to, p, N);
            if (bind_to(0) != 0)   /* leave the arena (flushes the cache) */
                bad++;
        }
        __atomic_fetch_add(&race.bound_bad, bad, __ATOMIC_RELAXED);
        pthread_barrier_wait(&race.after);
    }
}

/* Arena exists at index i (arena.<i>.name answers)? */
static bool arena_alive(unsigned i)
{
    const char *nm;
    return ctl_get(ctl_name("arena.%u.name", i), &nm, sizeof nm) == 0;
}

/* Checks one round's results; returns false (after printing) on a broken
 * invariant, and destroys what is left. */
static bool round_ok(int round)
{
    int r0 = race.release_err[0], r1 = race.release_err[1];
    unsigned t = race.target;
    bool ok = race.bound_bad == 0;
    char what[200] = "";
    switch (race.kind) {
    case RACE_BIND_DESTROY:
    case RACE_BIND_RESET:
        /* exactly one wins: the bind (then EBUSY) or the release (then the
         * bind fails, for destroy; for reset the bind may follow it) */
        if (race.kind == RACE_BIND_DESTROY)
            ok &= (race.bind_err == 0 && r1 == EBUSY) || (race.bind_err == EINVAL && r1 == 0);
        else
            ok &= (race.bind_err == 0 && (r1 == EBUSY || r1 == 0)) && race.bound_bad == 0;
        snprintf(what, sizeof what, "thread.arena %d, %s %d", race.bind_err,
                 race.kind == RACE_BIND_RESET ? "reset" : "destroy", r1);
        break;
    case RACE_DOUBLE_DESTROY:
        ok &= (r0 == 0 && r1 == ENOENT) || (r0 == ENOENT && r1 == 0);
        snprintf(what, sizeof what, "destroys %d and %d", r0, r1);
        break;
    case RACE_CREATE_DESTROY: {
        bool reused = race.create_err == 0 && race.created == t;
        int wins = (r0 == 0) + (r1 == 0);
        /* a destroy that succeeds ends one arena: the first, or the one
         * created into its slot, which is not bound when destroyed */
        ok &= race.create_err == 0 && wins >= 1 && wins <= 1 + reused;
        ok &= (r0 == 0 || r0 == ENOENT || r0 == EBUSY) && (r1 == 0 || r1 == ENOENT || r1 == EBUSY);
        if (wins == 2)
            ok &= race.create_bind_err == EINVAL;
        snprintf(what, sizeof what, "destroys %d and %d, create %d -> %u (%s), its bind %d", r0, r1,
                 race.create_err, race.created, reused ? "the slot" : "another slot", race.create_bind_err);
        break;
    }
    }
    if (!ok)
        fprintf(stderr, "round %d, arena %u: %s; %u bad blocks of a bound thread\n", round, t, what,
                race.bound_bad);
    /* clean up: the bound threads left; whatever is still alive goes */
    if (arena_alive(t) && ctl_action(ctl_name("arena.%u.destroy", t)) != 0)
        ok = false;
    if (race.kind == RACE_CREATE_DESTROY && race.create_err == 0 && race.created != t && arena_alive(race.created) &&
        ctl_action(ctl_name("arena.%u.destroy", race.created)) != 0)
        ok = false;
    return ok;
}

static int race_child(void *arg)
{
    race.kind = (enum race_kind)(intptr_t)arg;
    int nthreads = race.kind == RACE_CREATE_DESTROY ? 3 : 2;
    pthread_barrier_init(&race.start, NULL, (unsigned)nthreads + 1);
    pthread_barrier_init(&race.done, NULL, (unsigned)nthreads);
    pthread_barrier_init(&race.after, NULL, (unsigned)nthreads + 1);
    pthread_t th[3];
    for (int i = 0; i < nthreads; i++)
        pthread_create(&th[i], NULL, racer, (void *)(intptr_t)i);
    int failed = 0;
    unsigned first_won = 0, second_won = 0;   /* thread 0's call, thread 1's call succeeded */
    for (int round = 0; round < ROUNDS && failed < 5; round++) {
        race.target = create_arena();
        /* something for the release to unmap */
        void *p = dpm_malloc_arena(race.target, 100000, 0), *q = dpm_malloc_arena(race.target, 64, 0);
        if (p == NULL || q == NULL)
            failed++;
        race.bind_err = race.create_err = race.create_bind_err = -1;
        race.release_err[0] = race.release_err[1] = -1;
        race.bound_bad = 0;
        pthread_barrier_wait(&race.start);
        pthread_barrier_wait(&race.after);
        first_won += race.bind_err == 0 || race.release_err[0] == 0;
        second_won += race.release_err[1] == 0;
        if (!round_ok(round))
            failed++;
    }
    fprintf(stderr, "    %d rounds: thread 0's call succeeded in %u, thread 1's in %u\n", ROUNDS, first_won,
            second_won);
    race.stop = true;
    pthread_barrier_wait(&race.start);
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    return failed != 0;
}

TEST(bind_races_destroy)
{
    expect_child_ok(race_child, (void *)(intptr_t)RACE_BIND_DESTROY, "thread.arena vs arena.<i>.destroy", 120);
}

TEST(bind_races_reset)
{
    expect_child_ok(race_child, (void *)(intptr_t)RACE_BIND_RESET, "thread.arena vs arena.<i>.reset", 120);
}

TEST(double_destroy)
{
    expect_child_ok(race_child, (void *)(intptr_t)RACE_DOUBLE_DESTROY, "two arena.<i>.destroy", 120);
}

TEST(create_races_destroys)
{
    expect_child_ok(race_child, (void *)(intptr_t)RACE_CREATE_DESTROY, "arenas.create vs two destroys", 120);
}

int main(void)
{
    void *warm = dpm_malloc(1);
    dpm_free(warm);
    RUN(foreign_manual_blocks_after_destroy);
    RUN(foreign_manual_blocks_after_reset);
    RUN(reset_busy_while_another_thread_is_bound);
    RUN(bind_races_destroy);
    RUN(bind_races_reset);
    RUN(double_destroy);
    RUN(create_races_destroys);
    return test_done();
}
