/*
 * decay_test.c - freed memory goes back to the OS on the decay schedule.
 *
 * Proves, in child processes (this program re-executed with DPMALLOC_CONF
 * set) that allocate 200 MiB in 4 MiB blocks, touch every page, free them
 * and watch the resident set size (/proc/self/statm):
 *   - dirty_decay_ms:200,muzzy_decay_ms:0: RSS stays up right after the
 *     frees, then falls below baseline + 48 MiB within 1.5 s while the
 *     program keeps allocating (activity drives decay);
 *   - the same plus background_thread:true: RSS falls within 1.5 s while
 *     the program only sleeps (the background thread drives decay);
 *   - the same in a child forked after the background thread started;
 *   - dirty_decay_ms:-1 (with the background thread on and activity): RSS
 *     does not fall within 0.8 s; "arena.<i>.purge" then drops it at once;
 *   - dirty_decay_ms:-1 at start, then "arena.<i>.dirty_decay_ms" = 100
 *     written at run time: RSS falls within 1.5 s of activity;
 *   - dirty_decay_ms:200 after 400 ms without allocator activity: the
 *     frees still keep their pages for the decay time (none purged at
 *     once), then RSS falls;
 *   - dirty_decay_ms:100,muzzy_decay_ms:300: the arena's pdirty pages
 *     become pmuzzy (lazily purged) after ~100 ms and leave the muzzy
 *     state ~300 ms later (stats.arenas.<i>.*, since MADV_FREE pages stay
 *     in the RSS);
 *   - dirty_decay_ms:0: RSS is down as soon as the frees return.
 * Each child prints key=value lines; the parent checks them.
 */
#include "test.h"
#include "ctl_util.h"

#include <stdbool.h>

#define MiB ((size_t)1 << 20)
enum { NBLOCKS = 50 };
#define BLOCK (4 * MiB)

static char self_exe[4096];

/* Allocation activity that reaches the arena: small blocks kept a while,
 * and a large block taken from the thread's arena directly
 * (dpm_malloc_arena bypasses the thread cache, whatever its limits). */
static void activity(void)
{
    static void *keep[256];
    static unsigned next;
    unsigned arena = 0;
    size_t len = sizeof arena;
    dpm_ctl("thread.arena", &arena, &len, NULL, 0);
    for (int i = 0; i < 64; i++) {
        unsigned k = next++ % 256;
        dpm_free(keep[k]);
        keep[k] = dpm_malloc(16 + (size_t)(next * 37 % 2000));
    }
    void *big = dpm_malloc_arena(arena, 40000 + (next % 8) * 4096, 0);
    dpm_free(big);
}

static size_t arena_stat(unsigned a, const char *what)
{
    char name[96];
    size_t v = 0, len = sizeof v;
    snprintf(name, sizeof name, "stats.arenas.%u.%s", a, what);
    if (dpm_ctl(name, &v, &len, NULL, 0) != 0)
        return (size_t)-1;
    return v;
}

/* dirty -> muzzy -> clean, followed through the arena's page counts. */
static int child_muzzy(void)
{
    static void *blocks[NBLOCKS];
    unsigned a = 0;
    size_t len = sizeof a;
    for (int i = 0; i < NBLOCKS; i++) {
        blocks[i] = dpm_malloc(BLOCK);
        if (blocks[i] == NULL)
            return 1;
        memset(blocks[i], 0x77, BLOCK);
    }
    dpm_ctl("thread.arena", &a, &len, NULL, 0);
    double t0 = test_now_s();
    for (int i = 0; i < NBLOCKS; i++)
        dpm_free(blocks[i]);
    static const double marks[] = {0.0, 0.25, 0.85};
    for (int m = 0; m < 3; m++) {
        while (test_now_s() - t0 < marks[m]) {
            for (int k = 0; k < 20; k++)
                activity();
            usleep(2000);
        }
        ctl_refresh();
        printf("t%d_ms=%d\nt%d_dirty=%zu\nt%d_muzzy=%zu\nt%d_clean=%zu\n", m,
               (int)((test_now_s() - t0) * 1000), m, arena_stat(a, "pdirty"), m, arena_stat(a, "pmuzzy"), m,
               arena_stat(a, "pclean"));
    }
    fflush(stdout);
    return 0;
}

static int child(const char *mode);

/* The background thread does not survive fork; it must start again in
 * the child. */
static int child_fork_idle(void)
{
    void *warm = dpm_malloc(100000);   /* the parent's background thread starts */
    dpm_free(warm);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int rc = child("idle");
        fflush(stdout);
        _exit(rc);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        return 3;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 4;
}

static int child(const char *mode)
{
    if (strcmp(mode, "muzzy") == 0)
        return child_muzzy();
    if (strcmp(mode, "fork_idle") == 0)
        return child_fork_idle();
    bool idle = strcmp(mode, "idle") == 0, never = strcmp(mode, "never") == 0;
    bool immediate = strcmp(mode, "immediate") == 0, runtime = strcmp(mode, "runtime") == 0;
    if (runtime) {
        /* started with decay off; switch this thread's arena to 100 ms */
        unsigned a = 0;
        size_t len = sizeof a;
        ssize_t ms = 100;
        char name[64];
        int e = dpm_ctl("thread.arena", &a, &len, NULL, 0);
        snprintf(name, sizeof name, "arena.%u.dirty_decay_ms", a);
        if (e == 0)
            e = dpm_ctl(name, NULL, NULL, &ms, sizeof ms);
        printf("set_err=%d\n", e);
    }
    double wait_s = never ? 0.8 : 1.5;
    for (int i = 0; i < 100; i++)
        activity();
    size_t base = rss_bytes();
    static void *blocks[NBLOCKS];
    for (int i = 0; i < NBLOCKS; i++) {
        blocks[i] = dpm_malloc(BLOCK);
        if (blocks[i] == NULL) {
            printf("error=allocation failed\n");
            return 1;
        }
        memset(blocks[i], 0x77, BLOCK);
    }
    size_t peak = rss_bytes();
    if (strcmp(mode, "after_idle") == 0)
        usleep(400 * 1000);   /* no allocator activity: the arena's clock is not read */
    for (int i = 0; i < NBLOCKS; i++)
        dpm_free(blocks[i]);
    size_t after_free = rss_bytes();
    double t0 = test_now_s(), fell_at = -1;
    size_t now = after_free;
    if (!immediate) {
        while (test_now_s() - t0 < wait_s) {
            if (idle) {
                usleep(20000);
            } else {
                for (int k = 0; k < 20; k++)
                    activity();
                usleep(1000);
            }
            now = rss_bytes();
            if (now < base + 48 * MiB && fell_at < 0) {
                fell_at = test_now_s() - t0;
                if (!never)
                    break;
            }
        }
    }
    printf("base=%zu\npeak=%zu\nafter_free=%zu\nfinal=%zu\nfell_at_ms=%d\n", base, peak, after_free, now,
           fell_at < 0 ? -1 : (int)(fell_at * 1000));
    if (never) {
        unsigned a = 0;
        size_t len = sizeof a;
        int e = dpm_ctl("thread.arena", &a, &len, NULL, 0);
        char name[64];
        snprintf(name, sizeof name, "arena.%u.purge", a);
        int p = dpm_ctl(name, NULL, NULL, NULL, 0);
        printf("purge_err=%d\nafter_purge=%zu\n", e != 0 ? e : p, rss_bytes());
    }
    fflush(stdout);
    return 0;
}

static struct spawn_result res;

#define kv(key) spawn_kv(&res, key)

static bool run_mode(const char *mode, const char *conf)
{
    if (!spawn_mode(self_exe, mode, conf, 20, &res))
        return false;
    fprintf(stderr, "    [%s] %s: base %zu MiB, peak %zu, after free %zu, final %zu, fell at %d ms\n", mode, conf,
            kv("base") / MiB, kv("peak") / MiB, kv("after_free") / MiB, kv("final") / MiB, (int)kv("fell_at_ms"));
    size_t base = kv("base"), peak = kv("peak");
    EXPECT(peak >= base + 180 * MiB, "[%s] peak RSS %zu MiB not 180 MiB above the baseline %zu MiB", mode,
           peak / MiB, base / MiB);
    return true;
}

TEST(activity_drives_decay)
{
    if (!run_mode("activity", "dirty_decay_ms:200,muzzy_decay_ms:0"))
        return;
    size_t base = kv("base"), after = kv("after_free"), final = kv("final");
    int fell = (int)kv("fell_at_ms");
    EXPECT(after >= base + 150 * MiB, "RSS %zu MiB right after the frees: purged before the 200 ms decay time",
           after / MiB);
    EXPECT(final < base + 48 * MiB && fell >= 0, "RSS still %zu MiB (baseline %zu) after 1.5 s of activity",
           final / MiB, base / MiB);
}

TEST(background_thread_decays_idle_process)
{
    if (!run_mode("idle", "dirty_decay_ms:200,muzzy_decay_ms:0,background_thread:true"))
        return;
    size_t base = kv("base"), final = kv("final");
    EXPECT(final < base + 48 * MiB && (int)kv("fell_at_ms") >= 0,
           "RSS still %zu MiB (baseline %zu) after 1.5 s idle with the background thread", final / MiB,
           base / MiB);
}

TEST(background_thread_restarts_after_fork)
{
    if (!run_mode("fork_idle", "dirty_decay_ms:200,muzzy_decay_ms:0,background_thread:true"))
        return;
    size_t base = kv("base"), final = kv("final");
    EXPECT(final < base + 48 * MiB && (int)kv("fell_at_ms") >= 0,
           "forked child: RSS still %zu MiB (baseline %zu) after 1.5 s idle with the background thread", final / MiB,
           base / MiB);
}

TEST(no_decay_keeps_pages_until_purge)
{
    if (!run_mode("never", "dirty_decay_ms:-1,muzzy_decay_ms:-1,background_thread:true"))
        return;
    size_t base = kv("base"), final = kv("final"), purged = kv("after_purge");
    EXPECT(final >= base + 150 * MiB && (int)kv("fell_at_ms") < 0,
           "dirty_decay_ms:-1: RSS fell to %zu MiB (baseline %zu) within 0.8 s", final / MiB, base / MiB);
    EXPECT_EQ_U(kv("purge_err"), 0);
    EXPECT(purged < base + 48 * MiB, "RSS %zu MiB (baseline %zu) right after arena.<i>.purge", purged / MiB,
           base / MiB);
}

TEST(decay_time_set_at_run_time)
{
    if (!run_mode("runtime", "dirty_decay_ms:-1,muzzy_decay_ms:0"))
        return;
    size_t base = kv("base"), final = kv("final");
    EXPECT_EQ_U(kv("set_err"), 0);
    EXPECT(final < base + 48 * MiB && (int)kv("fell_at_ms") >= 0,
           "arena.<i>.dirty_decay_ms set to 100 at run time: RSS still %zu MiB (baseline %zu) after 1.5 s of "
           "activity",
           final / MiB, base / MiB);
}

/* The decay time counts from the free, even when the arena was idle
 * before it. */
TEST(decay_counts_from_the_free_after_idle)
{
    if (!run_mode("after_idle", "dirty_decay_ms:200,muzzy_decay_ms:0"))
        return;
    size_t peak = kv("peak"), after = kv("after_free"), base = kv("base");
    EXPECT(after + 8 * MiB >= peak,
           "dirty_decay_ms:200, 400 ms idle, then 200 MiB freed: RSS %zu MiB right after the frees (peak %zu): "
           "%zu MiB purged at once instead of 200 ms later",
           after / MiB, peak / MiB, (peak - after) / MiB);
    EXPECT(kv("final") < base + 48 * MiB, "RSS still %zu MiB after 1.5 s of activity", kv("final") / MiB);
}

/* dirty_decay_ms:100, muzzy_decay_ms:300: freed pages turn muzzy after
 * about 100 ms and clean about 300 ms later (page counts from
 * stats.arenas.<i>.pdirty / pmuzzy). */
TEST(dirty_then_muzzy_then_clean)
{
    char *argv[] = {self_exe, "--child", "muzzy", NULL};
    const char *envp[] = {"DPMALLOC_CONF=dirty_decay_ms:100,muzzy_decay_ms:300", NULL};
    spawn_capture(argv, envp, 20, &res);
    if (!SPAWN_OK(&res))
        return;
    size_t pages = NBLOCKS * BLOCK / 4096;
    fprintf(stderr, "    [muzzy] dirty/muzzy pages at %d ms: %zu/%zu, at %d ms: %zu/%zu, at %d ms: %zu/%zu\n",
            (int)kv("t0_ms"), kv("t0_dirty"), kv("t0_muzzy"), (int)kv("t1_ms"), kv("t1_dirty"), kv("t1_muzzy"),
            (int)kv("t2_ms"), kv("t2_dirty"), kv("t2_muzzy"));
    EXPECT(kv("t0_dirty") >= pages * 9 / 10, "right after the frees: %zu dirty pages, expected ~%zu",
           kv("t0_dirty"), pages);
    EXPECT(kv("t1_dirty") < pages / 10 && kv("t1_muzzy") >= pages * 9 / 10,
           "at %d ms: %zu dirty, %zu muzzy pages; expected ~0 and ~%zu (MADV_FREE)", (int)kv("t1_ms"),
           kv("t1_dirty"), kv("t1_muzzy"), pages);
    EXPECT(kv("t2_muzzy") < pages / 10, "at %d ms: still %zu muzzy pages", (int)kv("t2_ms"), kv("t2_muzzy"));
}

TEST(zero_decay_purges_at_once)
{
    if (!run_mode("immediate", "dirty_decay_ms:0,muzzy_decay_ms:0"))
        return;
    size_t base = kv("base"), after = kv("after_free");
    EXPECT(after < base + 48 * MiB, "dirty_decay_ms:0: RSS %zu MiB (baseline %zu) right after the frees",
           after / MiB, base / MiB);
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "--child") == 0)
        return child(argv[2]);
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (n <= 0) {
        fprintf(stderr, "readlink /proc/self/exe failed\n");
        return 2;
    }
    self_exe[n] = '\0';
    RUN(activity_drives_decay);
    RUN(background_thread_decays_idle_process);
    RUN(background_thread_restarts_after_fork);
    RUN(no_decay_keeps_pages_until_purge);
    RUN(decay_time_set_at_run_time);
    RUN(decay_counts_from_the_free_after_idle);
    RUN(dirty_then_muzzy_then_clean);
    RUN(zero_decay_purges_at_once);
    return test_done();
}
