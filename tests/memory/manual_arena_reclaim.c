/*
 * manual_arena_reclaim.c - the small bins of a sleeping thread bound to a
 * manual arena on a page source of the user's are taken back without
 * that thread's help, and the blocks go home with no allocator lock held
 * (tcaches_reclaim / send_detached in tcache.c).
 *
 * Proves:
 * - trim: 4 threads bound (thread.arena) to one sourced arena fill their
 *   small bins with its blocks and sleep on a condition variable:
 *   malloc_trim(0) brings stats.tcache_bytes and the arena's tcache_bytes
 *   and small.allocated to 0 and its active pages to under a quarter, and
 *   the source's purge callback has taken the pages back (their large
 *   blocks, freed before they sleep, went home at once: large caches
 *   never hold a manual arena's blocks); the sleepers, woken, allocate, fill and
 *   check blocks of every class, and the heap checker finds nothing wrong;
 * - background: the same with background_thread:true,dirty_decay_ms:200
 *   and no trim: the bytes are gone within a few decay periods;
 * - reenter: with dirty_decay_ms:0 the source's callbacks run while the
 *   blocks go home; each (outermost) callback mallocs and frees, reads
 *   statistics through dpm_ctl and calls malloc_trim(0) itself, which
 *   would deadlock (the child's time limit fails the test) if the
 *   reclaimer held any allocator lock around the callback;
 * - pin: in the first purge callback of the trim, while blocks taken from
 *   the sleepers are on their way home, the sleepers wake, allocate and
 *   exit (the arena has no thread left) and another thread destroys the
 *   arena as soon as it may: it gets it only once the blocks are home,
 *   every block checks out and every unit goes back to the source.
 *
 * usage: test_manual_arena_reclaim   (re-executes itself for each child)
 */
#include "test.h"
#include "../ctl/ctl_util.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/mman.h>
#include <time.h>

#define NTHREADS 4
#define UNIT ((size_t)4 << 20)
#define NUNITS 256   /* a 1 GiB carve (address space; only touched pages cost) */

static char self_exe[4096];
static struct spawn_result res;

/* ---- the page source: a carve of one mapping in 4 MiB units ---- */

static struct carve {
    char *base;
    unsigned char used[NUNITS];
    pthread_mutex_t lock;
    size_t outstanding, purged;
    unsigned nalloc, nfree, npurge;
} carve = {.lock = PTHREAD_MUTEX_INITIALIZER};

static bool reenter_mode;
static unsigned reentries;
static __thread unsigned callback_depth;

/* Allocator traffic from inside a callback: if the thread that runs it
 * held any allocator lock, one of these would deadlock. */
static void reenter(void)
{
    if (!__atomic_load_n(&reenter_mode, __ATOMIC_RELAXED) || callback_depth != 0)
        return;
    callback_depth++;
    void *p = malloc(100);
    test_fill(p, 100, 5);
    free(p);
    uint64_t e = 1;
    size_t l = sizeof(e), allocated;
    dpm_ctl("epoch", &e, &l, &e, sizeof(e));
    l = sizeof(allocated);
    dpm_ctl("stats.allocated", &allocated, &l, NULL, 0);
    malloc_trim(0);
    __atomic_fetch_add(&reentries, 1, __ATOMIC_RELAXED);
    callback_depth--;
}

static void *carve_alloc(void *ctx, size_t size, size_t align, bool *zeroed)
{
    (void)ctx;
    *zeroed = false;
    if (align % UNIT != 0 || size % UNIT != 0)
        return NULL;
    reenter();
    char *got = NULL;
    size_t n = size / UNIT, step = align / UNIT;
    pthread_mutex_lock(&carve.lock);
    for (size_t i = 0; i + n <= NUNITS && got == NULL; i += step) {
        size_t k = 0;
        while (k < n && !carve.used[i + k])
            k++;
        if (k == n) {
            memset(&carve.used[i], 1, n);
            got = carve.base + i * UNIT;
            carve.nalloc++;
            carve.outstanding += size;
        }
    }
    pthread_mutex_unlock(&carve.lock);
    return got;
}

static void carve_free(void *ctx, void *addr, size_t size)
{
    (void)ctx;
    reenter();
    pthread_mutex_lock(&carve.lock);
    size_t i = (size_t)((char *)addr - carve.base) / UNIT;
    memset(&carve.used[i], 0, size / UNIT);
    carve.nfree++;
    carve.outstanding -= size;
    pthread_mutex_unlock(&carve.lock);
}

static bool pin_window(void);

static bool carve_purge(void *ctx, void *addr, size_t size)
{
    (void)ctx;
    reenter();
    if (pin_window())
        return false;   /* quick: the rest of the sends is the window */
    pthread_mutex_lock(&carve.lock);
    carve.npurge++;
    carve.purged += size;
    pthread_mutex_unlock(&carve.lock);
    return madvise(addr, size, MADV_DONTNEED) == 0;
}

/* ---- statistics ---- */

static unsigned arena_index;

static size_t arena_stat(const char *what)
{
    char name[96];
    snprintf(name, sizeof name, "stats.arenas.%u.%s", arena_index, what);
    return ctl_fresh_size(name);
}

/* ---- sleepers ---- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int ready, release_now, failures, bind_errors;
static pthread_t sleepers[NTHREADS];

static void *sleeper(void *arg)
{
    uintptr_t tag = (uintptr_t)arg * 1000003u;
    unsigned a = arena_index;
    int bad = dpm_ctl("thread.arena", NULL, NULL, &a, sizeof(a)) != 0;
    pthread_mutex_lock(&lock);
    bind_errors += bad;
    pthread_mutex_unlock(&lock);
    bad = churn_small_sizes(tag, 2);
    /* large blocks of a manual arena go home at once, never to the
     * thread's large cache: nothing there for a reclaimer to take */
    for (size_t size = (size_t)20 << 10; size <= ((size_t)320 << 10); size *= 2) {
        void *big = malloc(size);
        if (big == NULL)
            bad = 1;
        else
            test_fill(big, size, tag);
        free(big);
    }
    pthread_mutex_lock(&lock);
    ready++;
    pthread_cond_broadcast(&cond);
    while (!release_now)
        pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
    bad |= churn_small_sizes(tag + 7, 2);
    /* the blocks it gets now are still the arena's */
    void *p = malloc(64);
    unsigned got = 999;
    size_t l = sizeof(got);
    if (p == NULL || dpm_ctl("arenas.lookup", &got, &l, &p, sizeof(p)) != 0 || got != arena_index)
        bad = 1;
    free(p);
    pthread_mutex_lock(&lock);
    failures += bad;
    pthread_mutex_unlock(&lock);
    return NULL;
}

static void release_sleepers(void)
{
    pthread_mutex_lock(&lock);
    release_now = 1;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(sleepers[i], NULL);
}

/* ---- pin: the arena outlives the blocks on their way home ---- */

static pthread_t main_thread, destroyer;
static bool pin_armed;
static int destroy_result = -1;
static unsigned destroy_attempts;

/* Destroys the arena as soon as it may be destroyed. */
static void *destroyer_main(void *arg)
{
    (void)arg;
    char name[64];
    snprintf(name, sizeof name, "arena.%u.destroy", arena_index);
    double t0 = test_now_s();
    int err;
    /* tries all the time: the reclaimer's sends take a millisecond */
    while ((err = dpm_ctl(name, NULL, NULL, NULL, 0)) == EBUSY && test_now_s() - t0 < 20.0)
        __atomic_fetch_add(&destroy_attempts, 1, __ATOMIC_RELAXED);
    destroy_result = err;
    return NULL;
}

/* In the first purge callback of the trim, while blocks taken from the
 * sleepers are on their way home: the sleepers wake, allocate, exit and
 * so leave the arena, and another thread tries to destroy it. The
 * reclaimer's pin must refuse that until the last block is home. The
 * trim's later purges fail at once: the sends spend their time between
 * callbacks, where only the pin stands in the destroyer's way. */
static bool pin_opened;

static bool pin_window(void)
{
    if (!pthread_equal(pthread_self(), main_thread))
        return false;
    if (__atomic_exchange_n(&pin_armed, false, __ATOMIC_RELAXED)) {
        release_sleepers();
        pthread_create(&destroyer, NULL, destroyer_main, NULL);
        while (__atomic_load_n(&destroy_attempts, __ATOMIC_RELAXED) == 0) {   /* refused: this purge */
            struct timespec ts = {0, 100 * 1000};
            nanosleep(&ts, NULL);
        }
        pin_opened = true;
    }
    return pin_opened;
}

static int child(const char *mode)
{
    bool pin = strcmp(mode, "pin") == 0;
    main_thread = pthread_self();
    carve.base = mmap(NULL, (NUNITS + 1) * UNIT, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                      -1, 0);
    if (carve.base == MAP_FAILED)
        return 2;
    carve.base = (char *)(((uintptr_t)carve.base + UNIT - 1) & ~(uintptr_t)(UNIT - 1));
    dpm_page_source_t src = {carve_alloc, carve_free, carve_purge, NULL};
    if (dpm_arena_create_sourced("reclaimed", &src, &arena_index) != 0)
        return 3;
    /* the main thread polls the statistics: it caches nothing itself */
    bool off = false;
    dpm_ctl("thread.tcache.enabled", NULL, NULL, &off, sizeof(off));
    for (uintptr_t i = 0; i < NTHREADS; i++)
        pthread_create(&sleepers[i], NULL, sleeper, (void *)(i + 1));
    pthread_mutex_lock(&lock);
    while (ready < NTHREADS)
        pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
    struct timespec nap = {0, 100 * 1000 * 1000};   /* let them fall asleep */
    nanosleep(&nap, NULL);
    size_t cached_before = ctl_fresh_size("stats.tcache_bytes");
    printf("before=%zu\narena_tcache_before=%zu\npactive_before=%zu\nlarge_before=%zu\n", cached_before,
           arena_stat("tcache_bytes"), arena_stat("pactive"), arena_stat("large.allocated"));
    if (strcmp(mode, "background") == 0) {
        /* the bins go first, their pages one decay period (200 ms) later:
         * up to 5 s for both, under any load */
        double t0 = test_now_s();
        while (test_now_s() - t0 < 5.0) {
            pthread_mutex_lock(&carve.lock);
            size_t purged_now = carve.purged;
            pthread_mutex_unlock(&carve.lock);
            if (ctl_fresh_size("stats.tcache_bytes") == 0 && purged_now >= cached_before / 2)
                break;
            struct timespec ts = {0, 20 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    } else {
        /* callbacks reenter from now on: earlier, a sleeper's trim would
         * take the bins of the others already asleep */
        __atomic_store_n(&reenter_mode, strcmp(mode, "reenter") == 0, __ATOMIC_RELAXED);
        __atomic_store_n(&pin_armed, pin, __ATOMIC_RELAXED);
        printf("trim=%d\n", malloc_trim(0));
        if (pin) {
            pthread_join(destroyer, NULL);
            printf("destroyed=%d\n", destroy_result);
        }
    }
    pthread_mutex_lock(&carve.lock);
    size_t purged = carve.purged;
    pthread_mutex_unlock(&carve.lock);
    printf("after=%zu\narena_tcache_after=%zu\nsmall_allocated=%zu\npactive=%zu\npurged=%zu\n",
           ctl_fresh_size("stats.tcache_bytes"), arena_stat("tcache_bytes"), arena_stat("small.allocated"),
           arena_stat("pactive"), purged);
    if (!pin)
        release_sleepers();
    uint64_t reclaims = 0;
    size_t l = sizeof(reclaims);
    dpm_ctl("stats.tcache_reclaims", &reclaims, &l, NULL, 0);
    printf("reclaims=%llu\nreentries=%u\nbind_errors=%d\nfailures=%d\nbroken=%u\n", (unsigned long long)reclaims,
           __atomic_load_n(&reentries, __ATOMIC_RELAXED), bind_errors, failures, ctl_heap_broken());
    /* every thread left: the arena goes, and every unit back to the source */
    char name[64];
    snprintf(name, sizeof name, "arena.%u.destroy", arena_index);
    printf("destroy=%d\n", pin ? destroy_result : dpm_ctl(name, NULL, NULL, NULL, 0));
    printf("outstanding=%zu\n", carve.outstanding);
    return 0;
}

/* ---- parent ---- */

static void expect_reclaimed(const char *mode)
{
    size_t before = spawn_kv(&res, "before");
    EXPECT(before >= NTHREADS * ((size_t)1 << 18), "%s: the sleepers' bins hold %zu bytes", mode, before);
    EXPECT_EQ_U(spawn_kv(&res, "bind_errors"), 0);
    EXPECT_EQ_U(spawn_kv(&res, "large_before"), 0);
    EXPECT_EQ_U(spawn_kv(&res, "after"), 0);
    EXPECT_EQ_U(spawn_kv(&res, "arena_tcache_after"), 0);
    EXPECT_EQ_U(spawn_kv(&res, "small_allocated"), 0);
    /* what stays active is at most a slab per class the bins keep */
    EXPECT(spawn_kv(&res, "pactive") * 4 < spawn_kv(&res, "pactive_before"), "%s: %zu of %zu pages still active",
           mode, spawn_kv(&res, "pactive"), spawn_kv(&res, "pactive_before"));
    EXPECT(spawn_kv(&res, "purged") >= before / 2, "%s: the source purged %zu bytes of %zu cached", mode,
           spawn_kv(&res, "purged"), before);
    EXPECT_GE_U(spawn_kv(&res, "reclaims"), NTHREADS);
    EXPECT_EQ_U(spawn_kv(&res, "failures"), 0);
    EXPECT_EQ_U(spawn_kv(&res, "broken"), 0);
    EXPECT_EQ_U(spawn_kv(&res, "destroy"), 0);
    EXPECT_EQ_U(spawn_kv(&res, "outstanding"), 0);
}

TEST(trim_takes_bound_sleepers_bins_to_the_source)
{
    if (!spawn_mode(self_exe, "trim", "", 60, &res))
        return;
    EXPECT_EQ_U(spawn_kv(&res, "trim"), 1);
    expect_reclaimed("trim");
}

TEST(background_thread_takes_bound_sleepers_bins)
{
    if (!spawn_mode(self_exe, "background", "background_thread:true,dirty_decay_ms:200", 60, &res))
        return;
    expect_reclaimed("background");
}

TEST(callbacks_run_with_no_allocator_lock_held)
{
    if (!spawn_mode(self_exe, "reenter", "dirty_decay_ms:0", 60, &res))
        return;
    EXPECT_GE_U(spawn_kv(&res, "reentries"), 1);
    expect_reclaimed("reenter");
}

TEST(arena_outlives_blocks_on_their_way_home)
{
    /* a few times: the destroyer may miss the sends (without the pin it
     * broke the heap in about two runs of three) */
    for (int run = 0; run < 4; run++) {
        if (!spawn_mode(self_exe, "pin", "dirty_decay_ms:0", 60, &res))
            return;
        EXPECT_EQ_U(spawn_kv(&res, "destroyed"), 0);
        EXPECT_GE_U(spawn_kv(&res, "reclaims"), NTHREADS);
        EXPECT_EQ_U(spawn_kv(&res, "bind_errors"), 0);
        EXPECT_EQ_U(spawn_kv(&res, "failures"), 0);
        EXPECT_EQ_U(spawn_kv(&res, "broken"), 0);
        EXPECT_EQ_U(spawn_kv(&res, "outstanding"), 0);
    }
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--child") == 0)
        return child(argv[2]);
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (n <= 0)
        return 2;
    self_exe[n] = '\0';
    RUN(trim_takes_bound_sleepers_bins_to_the_source);
    RUN(background_thread_takes_bound_sleepers_bins);
    RUN(callbacks_run_with_no_allocator_lock_held);
    RUN(arena_outlives_blocks_on_their_way_home);
    return test_done();
}
