/*
 * stats_types_mt.c - typed allocation from many threads: the per-CPU
 * counts of types.c stay exact, and names resolve to one type each while
 * threads register them at once.
 *
 * Proves: (1) workers that allocate typed blocks (small and large) and
 * free blocks other workers made, while a mover thread moves the workers
 * between the allowed CPUs (pthread_setaffinity_np) without pause and a
 * reader thread reads the type's row of dpm_stats_print over and over,
 * leave nalloc == nfree == the blocks made and live_bytes == live_blocks
 * == 0; every row the reader saw had nfree <= nalloc, live_blocks ==
 * nalloc - nfree, live_bytes below 2^63 (never negative), and nalloc never
 * went down. (2) Threads that register the same 600 names at once, each
 * in another order (names longer than 47 characters that share their
 * first 47 among them), leave one row per name whose nalloc and nfree
 * are the number of threads (a name registered twice would show two rows,
 * each with part of the count). (3) Typed allocation and free pairs of
 * one thread on one CPU go through the CPU's stash of typed blocks: 10000
 * pairs take the arena's bin locks fewer than 100 times (each took two
 * before the stashes). (4) A typed block freed into a stash is never
 * handed out untyped, and a typed allocation of another name that takes
 * it counts it under that name. (5) fork while other threads allocate and
 * free typed blocks: each child allocates and frees typed blocks of every
 * stashed class and exits (a stash lock left held across the fork would
 * hang it; a half-copied stash would hand out a bad block).
 * dpm_ API only (links dpmalloc_plain; label sanitize).
 */
#include "test.h"
#include "ctl_util.h"

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <unistd.h>

struct sbuf {
    char *text;
    size_t len, cap;
};

static void sbuf_write(void *opaque, const char *s)
{
    struct sbuf *b = opaque;
    size_t n = strlen(s);
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 65536;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *t = realloc(b->text, cap);   /* libc: never the allocator under test */
        if (t == NULL)
            return;
        b->text = t;
        b->cap = cap;
    }
    memcpy(b->text + b->len, s, n + 1);
    b->len += n;
}

struct type_row {
    unsigned rows;   /* rows of the name in the table */
    unsigned long long live_bytes, live_blocks, nalloc, nfree;
};

static struct type_row parse_row(const char *text, const char *name)
{
    struct type_row r = {0};
    char key[128];
    snprintf(key, sizeof key, "\"type\": \"%s\",", name);
    for (const char *p = text; p != NULL && (p = strstr(p, key)) != NULL; p += strlen(key)) {
        struct type_row one;
        if (sscanf(p + strlen(key), " \"live_bytes\": %llu, \"live_blocks\": %llu, \"nalloc\": %llu, \"nfree\": %llu",
                   &one.live_bytes, &one.live_blocks, &one.nalloc, &one.nfree) != 4)
            continue;
        r.rows++;
        r.live_bytes += one.live_bytes;
        r.live_blocks += one.live_blocks;
        r.nalloc += one.nalloc;
        r.nfree += one.nfree;
    }
    return r;
}

static char *stats_json(void)
{
    struct sbuf b = {0};
    dpm_stats_print(sbuf_write, &b, "Jgma");
    return b.text;
}

/* ---- (1) exact counts across threads and CPUs ---------------------------- */

enum { WORKERS = 4, SLOTS = 256, ROUNDS = 100000 };
static const char XTYPE[] = "cross_cpu_blocks";
static void *mailbox[SLOTS];
static unsigned reads_done;   /* rows the reader has checked */
static unsigned long long made[WORKERS];
static pthread_t workers[WORKERS];
static int stop;

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    return x ^ (x >> 29);
}

static void *worker(void *arg)
{
    int w = (int)(intptr_t)arg;
    uint64_t seed = (uint64_t)w * 0x9e3779b97f4a7c15ull + 1;
    /* at least ROUNDS blocks, and on until the reader has checked 100 rows */
    for (int i = 0; i < ROUNDS || __atomic_load_n(&reads_done, __ATOMIC_ACQUIRE) < 100; i++) {
        seed = mix(seed + (uint64_t)i);
        /* mostly small, some typed bins above a page alignment, some large */
        size_t size = seed % 64 == 0 ? 20000 + seed % 50000 : 16 + seed % 600;
        size_t align = seed % 16 == 1 ? 64 : 0;
        void *p = dpm_malloc_typed(XTYPE, size, align);
        if (p == NULL) {
            TEST_FAIL("dpm_malloc_typed(%zu, %zu) failed", size, align);
            break;
        }
        memset(p, w, size < 64 ? size : 64);
        made[w]++;
        /* a block another worker (or this one) left: freed here */
        void *old = __atomic_exchange_n(&mailbox[(seed >> 8) % SLOTS], p, __ATOMIC_ACQ_REL);
        dpm_free(old);
    }
    return NULL;
}

static void *mover(void *arg)
{
    (void)arg;
    cpu_set_t allowed;
    sched_getaffinity(0, sizeof allowed, &allowed);
    int cpus[CPU_SETSIZE], n = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &allowed))
            cpus[n++] = c;
    for (unsigned k = 0; !__atomic_load_n(&stop, __ATOMIC_ACQUIRE); k++) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpus[k % (unsigned)n], &one);
        pthread_setaffinity_np(workers[k % WORKERS], sizeof one, &one);
        sched_yield();
    }
    return NULL;
}

struct reader_result {
    unsigned reads;
    unsigned bad;
    char first_bad[256];
};

static void *reader(void *arg)
{
    struct reader_result *res = arg;
    unsigned long long last_nalloc = 0;
    while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
        char *text = stats_json();
        struct type_row r = parse_row(text, XTYPE);
        free(text);
        if (r.rows == 0)
            continue;   /* not registered yet */
        __atomic_store_n(&reads_done, ++res->reads, __ATOMIC_RELEASE);
        if (r.rows != 1 || r.nfree > r.nalloc || r.live_blocks != r.nalloc - r.nfree ||
            r.live_bytes >= (1ull << 63) || r.nalloc < last_nalloc) {
            if (res->bad++ == 0)
                snprintf(res->first_bad, sizeof res->first_bad,
                         "rows %u live_bytes %llu live_blocks %llu nalloc %llu nfree %llu (nalloc before %llu)",
                         r.rows, r.live_bytes, r.live_blocks, r.nalloc, r.nfree, last_nalloc);
        }
        last_nalloc = r.nalloc;
    }
    return NULL;
}

TEST(counts_exact_across_cpus)
{
    pthread_t mv, rd;
    struct reader_result res = {0};
    for (int w = 0; w < WORKERS; w++)
        pthread_create(&workers[w], NULL, worker, (void *)(intptr_t)w);
    pthread_create(&rd, NULL, reader, &res);
    pthread_create(&mv, NULL, mover, NULL);
    for (int w = 0; w < WORKERS; w++)
        pthread_join(workers[w], NULL);
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    pthread_join(mv, NULL);
    pthread_join(rd, NULL);
    for (int s = 0; s < SLOTS; s++)
        dpm_free(mailbox[s]);
    unsigned long long total = 0;
    for (int w = 0; w < WORKERS; w++)
        total += made[w];
    char *text = stats_json();
    struct type_row r = parse_row(text, XTYPE);
    free(text);
    EXPECT(r.rows == 1 && r.nalloc == total && r.nfree == total && r.live_blocks == 0 && r.live_bytes == 0,
           "%s after all %llu blocks were freed: %u rows, nalloc %llu nfree %llu live_blocks %llu live_bytes %llu",
           XTYPE, total, r.rows, r.nalloc, r.nfree, r.live_blocks, r.live_bytes);
    EXPECT(res.bad == 0, "%u of %u rows read during the run were inconsistent, first: %s", res.bad, res.reads,
           res.first_bad);
    fprintf(stderr, "  %llu blocks made, %u rows checked meanwhile\n", total, res.reads);
}

/* ---- (2) one type per name under concurrent registration ---------------- */

enum { NAMERS = 4, NNAMES = 600 };
static pthread_barrier_t names_go;

static void name_of(int i, char *out, size_t n)
{
    if (i % 10 == 9)   /* 60 names of 52+ characters: 20 distinct 47-character prefixes */
        snprintf(out, n, "long_type_name_prefix_that_runs_past_limit_%04d_tail%d", i / 30, i);
    else
        snprintf(out, n, "concurrent_type_%d", i);
}

/* The row a name counts under: its first 47 characters. */
static void row_name_of(int i, char *out, size_t n)
{
    char full[80];
    name_of(i, full, sizeof full);
    snprintf(out, n, "%.47s", full);
}

static void *namer(void *arg)
{
    int t = (int)(intptr_t)arg;
    char name[80];
    pthread_barrier_wait(&names_go);
    for (int k = 0; k < NNAMES; k++) {
        /* each thread in another order: forwards or backwards from its own start */
        int i = t % 2 == 0 ? (k + t * 150) % NNAMES : (NNAMES - 1 - k + t * 150) % NNAMES;
        name_of(i, name, sizeof name);
        void *p = dpm_malloc_typed(name, 24 + (size_t)(i % 5) * 100, 0);
        if (p == NULL) {
            TEST_FAIL("dpm_malloc_typed(%s) failed", name);
            continue;
        }
        dpm_free(p);
    }
    return NULL;
}

TEST(names_resolve_once_under_concurrent_insertion)
{
    pthread_t th[NAMERS];
    pthread_barrier_init(&names_go, NULL, NAMERS);
    for (int t = 0; t < NAMERS; t++)
        pthread_create(&th[t], NULL, namer, (void *)(intptr_t)t);
    for (int t = 0; t < NAMERS; t++)
        pthread_join(th[t], NULL);
    pthread_barrier_destroy(&names_go);
    char *text = stats_json();
    unsigned bad = 0;
    for (int i = 0; i < NNAMES; i++) {
        char row[80];
        row_name_of(i, row, sizeof row);
        /* a long name's row: its prefix's 3 names x NAMERS */
        unsigned long long want = i % 10 == 9 ? 3ull * NAMERS : NAMERS;
        struct type_row r = parse_row(text, row);
        if (r.rows != 1 || r.nalloc != want || r.nfree != want || r.live_blocks != 0) {
            if (bad++ < 5)
                TEST_FAIL("type %s: %u rows, nalloc %llu nfree %llu live_blocks %llu; expected 1 row, %llu", row,
                          r.rows, r.nalloc, r.nfree, r.live_blocks, want);
        }
    }
    EXPECT(bad == 0, "%u of %d names resolved inconsistently", bad, NNAMES);
    free(text);
}

/* ---- (3) and (4): the stashes of typed blocks --------------------------- */

static unsigned thread_arena(void)
{
    unsigned arena = 0;
    EXPECT_CTL(ctl_get("thread.arena", &arena, sizeof arena), 0);
    return arena;
}

static uint64_t bin_lock_ops(unsigned arena)
{
    ctl_refresh();
    return CTL_U64(ctl_name("stats.arenas.%u.mutexes.bins.num_ops", arena));
}

/* Pins the calling thread to the CPU it runs on; returns the old mask. */
static cpu_set_t pin_here(void)
{
    cpu_set_t old, one;
    sched_getaffinity(0, sizeof old, &old);
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    sched_setaffinity(0, sizeof one, &one);
    return old;
}

static void typed_pairs(const char *type, size_t size, int n)
{
    for (int i = 0; i < n; i++) {
        void *p = dpm_malloc_typed(type, size, 0);
        if (p == NULL) {
            TEST_FAIL("dpm_malloc_typed(%s, %zu) failed", type, size);
            return;
        }
        *(volatile char *)p = 1;
        dpm_free(p);
    }
}

TEST(typed_pairs_take_no_bin_lock)
{
    cpu_set_t old = pin_here();
    unsigned arena = thread_arena();
    static const size_t sizes[] = {16, 64, 1000, 14336};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        typed_pairs("stash_pairs", sizes[k], 64);   /* the stash has blocks of the class */
        /* what reading the stats takes itself (the refresh locks every bin) */
        uint64_t r0 = bin_lock_ops(arena), r1 = bin_lock_ops(arena);
        typed_pairs("stash_pairs", sizes[k], 10000);
        uint64_t ops = bin_lock_ops(arena) - r1 - (r1 - r0);
        EXPECT(ops < 100, "10000 typed pairs of %zu bytes took the bin locks %llu times", sizes[k],
               (unsigned long long)ops);
    }
    sched_setaffinity(0, sizeof old, &old);
}

TEST(stashed_typed_block_stays_typed)
{
    cpu_set_t old = pin_here();
    /* few enough that every one stays in the stash (16 slots for 96 B,
     * half of which a refill may take): blocks an overflow sent home may
     * come back through an emptied slab made plain, legitimately */
    enum { K = 4 };
    void *typed[K], *plain[4 * K];
    for (int i = 0; i < K; i++)
        typed[i] = dpm_malloc_typed("stash_first", 96, 0);
    for (int i = 0; i < K; i++)
        dpm_free(typed[i]);
    /* untyped allocations of the class never get a stashed block */
    for (int i = 0; i < 4 * K; i++) {
        plain[i] = dpm_malloc(96);
        for (int j = 0; j < K; j++)
            if (plain[i] == typed[j])
                TEST_FAIL("dpm_malloc(96) handed out %p, a typed block in a stash", plain[i]);
    }
    for (int i = 0; i < 4 * K; i++)
        dpm_free(plain[i]);
    /* a typed allocation of another name reuses them, counted under it */
    void *again = dpm_malloc_typed("stash_second", 96, 0);
    bool reused = false;
    for (int j = 0; j < K; j++)
        reused |= again == typed[j];
    EXPECT(reused, "dpm_malloc_typed(96) on the same CPU did not reuse a stashed block");
    char *text = stats_json();
    struct type_row first = parse_row(text, "stash_first"), second = parse_row(text, "stash_second");
    free(text);
    EXPECT(first.live_blocks == 0 && first.nfree == K && first.live_bytes == 0,
           "stash_first: live_blocks %llu nfree %llu live_bytes %llu", first.live_blocks, first.nfree,
           first.live_bytes);
    EXPECT(second.live_blocks == 1 && second.nalloc == 1 && second.live_bytes == dpm_usable_size(again),
           "stash_second: live_blocks %llu nalloc %llu live_bytes %llu", second.live_blocks, second.nalloc,
           second.live_bytes);
    dpm_free(again);
    sched_setaffinity(0, sizeof old, &old);
}

static int fork_stop;

static void *typed_churn(void *arg)
{
    (void)arg;
    for (unsigned i = 0; !__atomic_load_n(&fork_stop, __ATOMIC_ACQUIRE); i++) {
        void *p = dpm_malloc_typed("fork_churn", 16 + (i * 40) % 3000, 0);
        dpm_free(p);
    }
    return NULL;
}

TEST(fork_during_typed_traffic)
{
    if (TEST_TSAN && !tsan_fork_ok())
        return;
    pthread_t th[2];
    for (int t = 0; t < 2; t++)
        pthread_create(&th[t], NULL, typed_churn, NULL);
    for (int k = 0; k < 40; k++) {
        pid_t pid = fork();
        if (pid == 0) {
            alarm(20);   /* a lock held across the fork: killed, not hung */
            void *keep[64];
            for (int i = 0; i < 64; i++) {
                keep[i] = dpm_malloc_typed("fork_child", 16 + (size_t)i * 200, 0);
                if (keep[i] == NULL)
                    _exit(3);
                memset(keep[i], 0x5a, 16);
            }
            for (int i = 0; i < 64; i++)
                dpm_free(keep[i]);
            _exit(0);
        }
        int status = 0;
        EXPECT(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
               "fork child %d: status 0x%x", k, status);
    }
    __atomic_store_n(&fork_stop, 1, __ATOMIC_RELEASE);
    for (int t = 0; t < 2; t++)
        pthread_join(th[t], NULL);
}

int main(void)
{
    RUN(counts_exact_across_cpus);
    RUN(names_resolve_once_under_concurrent_insertion);
    RUN(typed_pairs_take_no_bin_lock);
    RUN(stashed_typed_block_stays_typed);
    RUN(fork_during_typed_traffic);
    return test_done();
}
