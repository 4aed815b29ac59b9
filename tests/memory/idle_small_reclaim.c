/*
 * idle_small_reclaim.c - the small bins of a sleeping thread's cache are
 * taken back without that thread's help (tcaches_reclaim in tcache.c),
 * and a thread whose cache was taken works on correctly.
 *
 * Proves:
 * - trim: 4 threads fill their small bins (blocks of 16 B .. 14 KiB,
 *   freed), then sleep on a condition variable: malloc_trim(0) in the main
 *   thread brings stats.tcache_bytes from megabytes to what the main
 *   thread itself holds (0), and the sleepers, woken, allocate, fill and
 *   check blocks of every class, with the heap checker finding nothing
 *   wrong;
 * - background: the same with background_thread:true,dirty_decay_ms:200
 *   and no trim: the bytes are gone within a few decay periods;
 * - not_when_running / not_in_nanosleep: a thread that spins outside the
 *   allocator, or sleeps in nanosleep (a call a signal handler may make),
 *   keeps its bins (the documented limits: docs/design.md);
 * - race: threads that allocate, check and free random small blocks and
 *   often sleep on a contended mutex or condition variable, while another
 *   thread calls malloc_trim(0) in a loop: every block keeps its pattern
 *   and the heap checker finds nothing wrong.
 *
 * usage: test_idle_small_reclaim   (re-executes itself for each child)
 */
#include "test.h"
#include "../ctl/ctl_util.h"

#include <malloc.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NTHREADS 4

static char self_exe[4096];
static struct spawn_result res;

/* ---- sleepers ---- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int ready, release_now, failures;
static volatile int spin_stop;
static const char *sleep_kind = "cond";
static pid_t sleeper_tid[NTHREADS];

static void *sleeper(void *arg)
{
    uintptr_t tag = (uintptr_t)arg * 1000003u;
    int bad = churn_small_sizes(tag, 2);
    pthread_mutex_lock(&lock);
    sleeper_tid[ready] = (pid_t)syscall(SYS_gettid);
    ready++;
    pthread_cond_broadcast(&cond);
    if (strcmp(sleep_kind, "cond") == 0) {
        while (!release_now)
            pthread_cond_wait(&cond, &lock);
        pthread_mutex_unlock(&lock);
    } else if (strcmp(sleep_kind, "spin") == 0) {
        pthread_mutex_unlock(&lock);
        while (!spin_stop)
            __asm__ __volatile__("" ::: "memory");
    } else {   /* nanosleep */
        pthread_mutex_unlock(&lock);
        while (!spin_stop) {
            struct timespec ts = {0, 50 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    bad |= churn_small_sizes(tag + 7, 2);
    pthread_mutex_lock(&lock);
    failures += bad;
    pthread_mutex_unlock(&lock);
    return NULL;
}

/* True if thread tid sleeps in the kernel in a futex wait, the state a
 * reclaimer requires (docs/design.md, "Small bins of sleeping threads"). */
static bool asleep_in_futex(pid_t tid)
{
    char path[64], line[64] = "";
    snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)tid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return false;
    bool got = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    return got && atol(line) == SYS_futex && strchr(line, ' ') != NULL;
}

static void wait_ready(void)
{
    pthread_mutex_lock(&lock);
    while (ready < NTHREADS)
        pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
    /* let them fall asleep: the condition-variable sleepers until the
     * kernel shows each in its futex wait (a loaded machine may take far
     * longer than a fixed pause to get them there), the others a pause */
    double t0 = test_now_s();
    for (int i = 0; strcmp(sleep_kind, "cond") == 0 && i < NTHREADS && test_now_s() - t0 < 20.0;) {
        if (asleep_in_futex(sleeper_tid[i])) {
            i++;
            continue;
        }
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

static int child_sleepers(const char *mode)
{
    pthread_t t[NTHREADS];
    bool spinning = strcmp(mode, "not_when_running") == 0, napping = strcmp(mode, "not_in_nanosleep") == 0;
    sleep_kind = spinning ? "spin" : napping ? "nanosleep" : "cond";
    /* the main thread polls the statistics: it caches nothing itself */
    bool off = false;
    dpm_ctl("thread.tcache.enabled", NULL, NULL, &off, sizeof(off));
    for (uintptr_t i = 0; i < NTHREADS; i++)
        pthread_create(&t[i], NULL, sleeper, (void *)(i + 1));
    wait_ready();
    printf("before=%zu\n", ctl_fresh_size("stats.tcache_bytes"));
    if (strcmp(mode, "background") == 0) {
        /* no trim: the background thread's passes (dirty_decay_ms:200) */
        size_t left = 0;
        double t0 = test_now_s();
        while (test_now_s() - t0 < 5.0) {
            left = ctl_fresh_size("stats.tcache_bytes");
            if (left == 0)
                break;
            struct timespec ts = {0, 20 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        printf("after=%zu\nseconds_ms=%.0f\n", left, (test_now_s() - t0) * 1000);
    } else {
        int r = malloc_trim(0);
        printf("trim=%d\nafter=%zu\n", r, ctl_fresh_size("stats.tcache_bytes"));
    }
    pthread_mutex_lock(&lock);
    release_now = 1;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
    spin_stop = 1;
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    uint64_t reclaims = 0;
    size_t l = sizeof(reclaims);
    dpm_ctl("stats.tcache_reclaims", &reclaims, &l, NULL, 0);
    printf("reclaims=%llu\nfailures=%d\nbroken=%u\n", (unsigned long long)reclaims, failures, ctl_heap_broken());
    return 0;
}

/* ---- race ---- */

static pthread_mutex_t race_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t race_cond = PTHREAD_COND_INITIALIZER;
static volatile int race_stop;
static int race_failures;

static void *racer(void *arg)
{
    uint64_t seed = (uintptr_t)arg * 0x9e3779b97f4a7c15u + 1;
    enum { N = 256 };
    void *live[N] = {0};
    size_t sizes[N] = {0};
    int bad = 0;
    for (unsigned long it = 0; !race_stop; it++) {
        unsigned k = (unsigned)(test_rand(&seed) % N);
        if (live[k] != NULL) {
            if (test_check(live[k], sizes[k], (uintptr_t)live[k] ^ k) != sizes[k])
                bad++;
            free(live[k]);
            live[k] = NULL;
        } else {
            sizes[k] = 16 + test_rand(&seed) % 3000;
            live[k] = malloc(sizes[k]);
            if (live[k] == NULL) {
                bad++;
                continue;
            }
            test_fill(live[k], sizes[k], (uintptr_t)live[k] ^ k);
        }
        if (it % 97 == 0) {   /* sleep in a futex now and then */
            pthread_mutex_lock(&race_lock);
            if (it % 3 == 0) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_nsec += 200 * 1000;
                if (ts.tv_nsec >= 1000000000) {
                    ts.tv_sec++;
                    ts.tv_nsec -= 1000000000;
                }
                pthread_cond_timedwait(&race_cond, &race_lock, &ts);
            }
            pthread_mutex_unlock(&race_lock);
        }
    }
    for (unsigned k = 0; k < N; k++) {
        if (live[k] != NULL && test_check(live[k], sizes[k], (uintptr_t)live[k] ^ k) != sizes[k])
            bad++;
        free(live[k]);
    }
    pthread_mutex_lock(&race_lock);
    race_failures += bad;
    pthread_mutex_unlock(&race_lock);
    return NULL;
}

static int child_race(void)
{
    pthread_t t[NTHREADS];
    for (uintptr_t i = 0; i < NTHREADS; i++)
        pthread_create(&t[i], NULL, racer, (void *)(i + 1));
    double t0 = test_now_s();
    unsigned long trims = 0;
    while (test_now_s() - t0 < 3.0) {
        malloc_trim(0);
        trims++;
        pthread_mutex_lock(&race_lock);
        pthread_cond_broadcast(&race_cond);
        pthread_mutex_unlock(&race_lock);
    }
    race_stop = 1;
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    uint64_t reclaims = 0;
    size_t l = sizeof(reclaims);
    dpm_ctl("stats.tcache_reclaims", &reclaims, &l, NULL, 0);
    printf("trims=%lu\nreclaims=%llu\nfailures=%d\nbroken=%u\n", trims, (unsigned long long)reclaims, race_failures,
           ctl_heap_broken());
    return 0;
}

static int child(const char *mode)
{
    if (strcmp(mode, "race") == 0)
        return child_race();
    return child_sleepers(mode);
}

/* ---- parent ---- */

TEST(trim_takes_sleeping_threads_small_bins)
{
    if (!spawn_mode(self_exe, "trim", "", 60, &res))
        return;
    size_t before = spawn_kv(&res, "before"), after = spawn_kv(&res, "after");
    EXPECT(before >= NTHREADS * ((size_t)1 << 19), "the sleepers' bins hold %zu bytes", before);
    EXPECT_EQ_U(after, 0);
    EXPECT_EQ_U(spawn_kv(&res, "trim"), 1);
    EXPECT_EQ_U(spawn_kv(&res, "failures"), 0);
    EXPECT_EQ_U(spawn_kv(&res, "broken"), 0);
}

TEST(background_thread_takes_idle_small_bins)
{
    if (!spawn_mode(self_exe, "background", "background_thread:true,dirty_decay_ms:200", 60, &res))
        return;
    /* on a loaded machine the first sleepers may be reclaimed before the
     * last one is asleep: "before" may already be low, the count is not */
    EXPECT_GE_U(spawn_kv(&res, "reclaims"), NTHREADS);
    EXPECT_EQ_U(spawn_kv(&res, "after"), 0);
    EXPECT_EQ_U(spawn_kv(&res, "failures"), 0);
    EXPECT_EQ_U(spawn_kv(&res, "broken"), 0);
}

/* The documented limits: these threads keep their bins. */
TEST(running_or_napping_threads_keep_their_bins)
{
    const char *modes[] = {"not_when_running", "not_in_nanosleep"};
    for (int m = 0; m < 2; m++) {
        if (!spawn_mode(self_exe, modes[m], "", 60, &res))
            return;
        size_t before = spawn_kv(&res, "before"), after = spawn_kv(&res, "after");
        EXPECT(before >= NTHREADS * ((size_t)1 << 19), "%s: the bins hold %zu bytes", modes[m], before);
        EXPECT(after >= before / 2, "%s: %zu of %zu bytes left", modes[m], after, before);
        EXPECT_EQ_U(spawn_kv(&res, "failures"), 0);
        EXPECT_EQ_U(spawn_kv(&res, "broken"), 0);
    }
}

TEST(reclaim_races_with_busy_threads)
{
    if (!spawn_mode(self_exe, "race", "", 120, &res))
        return;
    EXPECT_GE_U(spawn_kv(&res, "trims"), 10);
    EXPECT_GE_U(spawn_kv(&res, "reclaims"), 10);   /* the race did happen */
    EXPECT_EQ_U(spawn_kv(&res, "failures"), 0);
    EXPECT_EQ_U(spawn_kv(&res, "broken"), 0);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--child") == 0)
        return child(argv[2]);
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (n <= 0)
        return 2;
    self_exe[n] = '\0';
    RUN(trim_takes_sleeping_threads_small_bins);
    RUN(background_thread_takes_idle_small_bins);
    RUN(running_or_napping_threads_keep_their_bins);
    RUN(reclaim_races_with_busy_threads);
    return test_done();
}
