/*
 * r13_source_callback_reenter.c - page-source callbacks that allocate
 * while a thread's cache is being emptied, and forks while a callback
 * runs (review r13 of the manual-arena reclaim).
 *
 * With dirty_decay_ms:0, the slabs a flush empties are purged at once, so
 * a sourced arena's purge callback runs on the flushing thread. Before the
 * fix, whatever it allocated and freed landed in the very cache being
 * emptied, refilled from the arena the thread was leaving:
 * - bind: a thread bound to sourced arena M rebinds to arena 0; M is then
 *   destroyed (no thread bound) and the thread's next malloc(16) handed
 *   out M's memory, already given back to the source (SIGSEGV);
 * - reset: the only bound thread resets M; its next malloc(16) was a
 *   block of the old heap, unknown to arenas.lookup (SIGSEGV);
 * - disable / reenable: thread.tcache.enabled=false kept M's blocks in
 *   the disabled cache; M destroyed, the thread's exit flush aborted
 *   (disable) or its next malloc handed out M's memory (reenable);
 * - reclaim: such a thread (cache holding M's blocks, arena 0) asleep:
 *   malloc_trim's in-place flush ran M's purge callback under the cache
 *   list lock, and the callback's own malloc_trim(0) deadlocked;
 * - livelock: a callback that frees blocks of the size being flushed
 *   refilled the bin as fast as thread.tcache.flush emptied it;
 * - fork: a fork while another thread's purge callback ran left M's
 *   purge count (and the batch's runs) with the dead thread: destroy in
 *   the child returned EBUSY for ever, and with the count cleared it hit
 *   the heap's busy-page check;
 * - fork_in_callback: the forking thread is itself inside the callback:
 *   in the child the callback returns, its batch is finished, and M can
 *   then be destroyed.
 *
 * The source hands out 4 MiB units of one reservation and makes what it
 * gets back PROT_NONE, so any later use of M's old memory faults.
 * usage: test_r13_source_callback_reenter MODE (DPMALLOC_CONF=dirty_decay_ms:0
 * for all but the fork modes)
 * Exit 0 when the mode holds; a message and exit 1 (or a signal) when not.
 */
#include "source_units.h"

static unsigned arena_of(void *p)
{
    unsigned got = UINT32_MAX;
    size_t l = sizeof got;
    return dpm_ctl("arenas.lookup", &got, &l, &p, sizeof p) == 0 ? got : UINT32_MAX;
}

static unsigned m;

/* ---- a thread leaves M (rebind, or cache off), then M is destroyed ---- */

static const char *mode;

static int stale;

static void *leaver(void *arg)
{
    (void)arg;
    if (bind_to(m) != 0)
        exit(2);
    fill_cache(2048, 4000);
    hook = small_churn;
    if (strcmp(mode, "bind") == 0) {
        if (bind_to(0) != 0)
            exit(2);
    } else {
        if (set_cache(false) != 0)
            exit(2);
        if (bind_to(0) != 0)
            exit(2);
        if (strcmp(mode, "reenable") == 0 && set_cache(true) != 0)
            exit(2);
    }
    hook = NULL;
    set_stage(1);
    wait_stage(2);
    for (int i = 0; i < 64; i++) {
        char *p = malloc(16);
        if (in_units(p))
            stale++;
        else
            memset(p, 1, 16);
        /* not freed: a stale block's free would abort before the count */
    }
    return NULL;   /* the exit flush must find nothing of M */
}

static int run_leave(void)
{
    pthread_t t;
    pthread_create(&t, NULL, leaver, NULL);
    wait_stage(1);
    int e = arena_op(m, "destroy");
    set_stage(2);
    pthread_join(t, NULL);
    printf("%s: %u purge callbacks, destroy %d, stale blocks handed out %d\n", mode, npurges, e, stale);
    return npurges != 0 && e == 0 && stale == 0 ? 0 : 1;
}

/* ---- the bound thread resets its own arena ---- */

static void small_churn_in_purge(bool purge)
{
    if (purge)
        small_churn(purge);
}

static int run_reset(void)
{
    if (bind_to(m) != 0)
        return 2;
    fill_cache(2048, 4000);
    free(malloc(16));
    hook = small_churn_in_purge;
    int e = arena_op(m, "reset");
    hook = NULL;
    int foreign = 0;
    for (int i = 0; i < 16; i++) {
        void *p = malloc(16);
        if (arena_of(p) != m)
            foreign++;   /* a block of the old heap: not freed */
        else
            free(p);
    }
    printf("reset: %u purge callbacks, reset %d, blocks not of arena %u: %d\n", npurges, e, m, foreign);
    return npurges != 0 && e == 0 && foreign == 0 ? 0 : 1;
}

/* ---- a reclaimer meets a sleeping thread whose cache held M's blocks ---- */

static __thread bool is_sleeper;
static volatile bool sleeper_armed, main_trimming;

static void reclaim_hook(bool purge)
{
    if (!purge)
        return;
    if (is_sleeper && sleeper_armed) {
        void *p[8];
        for (int i = 0; i < 8; i++)
            p[i] = malloc(3072);
        for (int i = 0; i < 8; i++)
            free(p[i]);
    }
    if (!is_sleeper && main_trimming)
        malloc_trim(0);   /* allowed from a callback (docs/numa.md) */
}

static void *sleeper(void *arg)
{
    (void)arg;
    is_sleeper = true;
    if (bind_to(m) != 0)
        exit(2);
    fill_cache(12288, 1000);
    sleeper_armed = true;
    set_cache(false);
    sleeper_armed = false;
    bind_to(0);   /* its (disabled) cache now says arena 0 */
    set_stage(1);
    wait_stage(2);
    return NULL;
}

static int run_reclaim(void)
{
    hook = reclaim_hook;
    pthread_t t;
    pthread_create(&t, NULL, sleeper, NULL);
    wait_stage(1);
    usleep(50 * 1000);
    main_trimming = true;
    malloc_trim(0);
    main_trimming = false;
    set_stage(2);
    pthread_join(t, NULL);
    hook = NULL;
    int e = arena_op(m, "destroy");
    printf("reclaim: trim returned, destroy %d\n", e);
    return e == 0 ? 0 : 1;
}

/* ---- a callback that frees what the flush sends home ---- */

static void same_size_churn(bool purge)
{
    if (!purge)
        return;
    void *p[8];
    for (int i = 0; i < 8; i++)
        p[i] = malloc(12288);
    for (int i = 0; i < 8; i++)
        free(p[i]);
}

static int run_livelock(void)
{
    if (bind_to(m) != 0)
        return 2;
    fill_cache(12288, 64);
    hook = same_size_churn;
    int e = dpm_ctl("thread.tcache.flush", NULL, NULL, NULL, 0);
    hook = NULL;
    printf("livelock: flush returned %d after %u purge callbacks\n", e, npurges);
    return e == 0 ? 0 : 1;
}

/* ---- fork while a purge callback runs ---- */

static volatile bool in_purge;
static bool fork_inside;
static int child_status = -1;

static int destroy_in_child(void)
{
    int e = arena_op(m, "destroy");
    printf("child: destroy %d\n", e);
    fflush(stdout);
    return e;
}

static void slow_purge(bool purge)
{
    if (!purge || in_purge)
        return;
    in_purge = true;
    if (fork_inside) {
        /* the child goes on inside this callback; it destroys M once the
         * trim that called it has returned (in run_fork) */
        pid_t pid = fork();
        if (pid == 0) {
            /* still inside: refused, the callback's batch is under way */
            int e = arena_op(m, "destroy");
            printf("child, inside the callback: destroy %d\n", e);
            if (e != EBUSY)
                _exit(1);
            return;
        }
        int st;
        waitpid(pid, &st, 0);
        child_status = st;
        return;
    }
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

static void *purger(void *arg)
{
    (void)arg;
    malloc_trim(0);
    return NULL;
}

static int run_fork(bool inside)
{
    fork_inside = inside;
    static void *v[3000];
    for (int i = 0; i < 3000; i++) {
        v[i] = dpm_malloc_arena(m, 4096, 16);
        memset(v[i], 1, 4096);
    }
    for (int i = 0; i < 3000; i++)
        free(v[i]);
    hook = slow_purge;
    pid_t self = getpid();
    if (inside) {
        malloc_trim(0);
        if (getpid() != self) {   /* the child, back from the callback */
            hook = NULL;
            _exit(destroy_in_child() == 0 ? 0 : 1);
        }
    } else {
        pthread_t t;
        pthread_create(&t, NULL, purger, NULL);
        while (!in_purge)
            ;
        pid_t pid = fork();
        if (pid == 0)
            _exit(destroy_in_child() == 0 ? 0 : 1);
        waitpid(pid, &child_status, 0);
        pthread_join(t, NULL);
    }
    hook = NULL;
    int e = arena_op(m, "destroy");
    printf("parent: destroy %d, child %s %d\n", e, WIFEXITED(child_status) ? "exit" : "signal",
           WIFEXITED(child_status) ? WEXITSTATUS(child_status) : WTERMSIG(child_status));
    return e == 0 && WIFEXITED(child_status) && WEXITSTATUS(child_status) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    setvbuf(stdout, NULL, _IONBF, 0);
    signal(SIGALRM, on_alarm);
    alarm(20);
    mode = argv[1];
    m = make_sourced();
    if (strcmp(mode, "bind") == 0 || strcmp(mode, "disable") == 0 || strcmp(mode, "reenable") == 0)
        return run_leave();
    if (strcmp(mode, "reset") == 0)
        return run_reset();
    if (strcmp(mode, "reclaim") == 0)
        return run_reclaim();
    if (strcmp(mode, "livelock") == 0)
        return run_livelock();
    if (strcmp(mode, "fork") == 0)
        return run_fork(false);
    if (strcmp(mode, "fork_in_callback") == 0)
        return run_fork(true);
    return 2;
}
