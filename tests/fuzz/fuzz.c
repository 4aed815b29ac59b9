/*
 * fuzz.c - dpmalloc's randomized multi-threaded operation fuzzer: command
 * line, threads, phases, manual arenas, fork, failure reports.
 *
 * The run is a sequence of phases. In a phase every thread runs --ops
 * random operations (ops.c), bound to an automatic arena or to a manual
 * one. Between phases all threads wait at a barrier while the main thread
 * runs the heap invariant checker ("debug.check_heap"), retires manual
 * arenas (arena.<i>.reset or .destroy, after their threads unbound and
 * freed most of their blocks; the rest is discarded by the reset), checks
 * that a bound arena refuses destroy (EBUSY), creates new ones and plans
 * the next phase. In some phases one thread forks mid-phase: the child
 * checks and frees its blocks, runs a burst of operations and the heap
 * checker, and exits; the parent checks its exit status.
 *
 * usage: test_fuzz [--seed N] [--seconds S] [--threads N] [--ops N]
 *                  [--phases N] [--no-fork] [--avoid NAME[,NAME...]]
 * --avoid steps around known defects so that the rest can run (fuzz.h):
 * foreign-manual-free, sized-slack.
 * Prints the seed first; a failure prints "fuzz: FAILED seed=<N> ..." and
 * the command that reproduces the run. Thread interleavings are not
 * reproducible, each thread's sequence of choices is.
 */
#include "fuzz.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

fuzz_conf_t conf = {
    .nthreads = 4,
    .ops = 20000,
    .seconds = 10,
    .fork = true,
    .budget = (size_t)64 << 20,
};
arena_plan_t plan;

static char repro[1024];
static fthread_t *threads;
static fthread_t main_ctx;
static __thread fthread_t *self;
static double t_start, t_deadline;

/* Written by the main thread between phases, read by the others after the
 * barrier that starts a phase. */
static pthread_barrier_t barrier;
static bool stop;
static int assign[64];               /* arena each thread binds to for the phase */
static bool tcache_off[64];
static bool retiring[4096];          /* manual arenas retired at the end of the phase */
static unsigned fork_thread = ~0u;
static uint64_t fork_at;
static unsigned nphases, ncreated, nreset, ndestroyed, nchecks;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- failure ------------------------------------------------------------ */

/* write(2) rather than stdio: a forked child must not wait for a stdio
 * lock that another thread of its parent held at the fork. */
static void say(const char *s) { (void)!write(2, s, strlen(s)); }

static void describe(const fthread_t *t, char *buf, size_t n)
{
    if (t == NULL)
        snprintf(buf, n, "fuzz: FAILED seed=%llu", (unsigned long long)conf.seed);
    else if (t == &main_ctx)
        snprintf(buf, n, "fuzz: FAILED seed=%llu thread=main phase=%u (between phases, %s)",
                 (unsigned long long)conf.seed, t->phase, t->op ? t->op : "-");
    else
        snprintf(buf, n, "fuzz: FAILED seed=%llu thread=%u phase=%u op=%llu (%s)%s",
                 (unsigned long long)conf.seed, t->id, t->phase, (unsigned long long)t->opno,
                 t->op ? t->op : "-", t->in_child ? " in the fork child" : "");
}

void fuzz_fail(const fthread_t *t, const char *fmt, ...)
{
    char head[256], what[768], line[2200];
    describe(t, head, sizeof head);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(line, sizeof line, "%s: %s\nfuzz: reproduce with: %s\n0 passed, 1 failed\n", head, what, repro);
    say(line);
    _exit(1);
}

static void on_signal(int sig)
{
    char head[256], line[1600];
    _Static_assert(sizeof line > sizeof head + sizeof repro + 100, "room for the report");
    describe(self, head, sizeof head);
    const blk_t *b = self != NULL ? &self->cur : NULL;
    snprintf(line, sizeof line,
             "%s: signal %d (%s); last block checked: %p (from %s) size %zu align %zu arena %d\n"
             "fuzz: reproduce with: %s\n0 passed, 1 failed\n",
             head, sig, strsignal(sig), b ? (void *)b->p : NULL, b && b->origin ? b->origin : "-", b ? b->size : 0,
             b ? b->align : 0, b ? b->arena : 0, repro);   /* no allocator call: the block may be freed */
    say(line);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* ---- command line ------------------------------------------------------- */

static void usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s [--seed N] [--seconds S] [--threads N] [--ops N] [--phases N] [--no-fork]\n"
            "          [--avoid foreign-manual-free,sized-slack]\n",
            argv0);
    exit(2);
}

static unsigned parse_avoid(const char *s, const char *argv0)
{
    unsigned mask = 0;
    while (*s != '\0') {
        size_t n = strcspn(s, ",");
        if (n == strlen("foreign-manual-free") && strncmp(s, "foreign-manual-free", n) == 0)
            mask |= AVOID_FOREIGN_MANUAL;
        else if (n == strlen("sized-slack") && strncmp(s, "sized-slack", n) == 0)
            mask |= AVOID_SIZED_SLACK;
        else
            usage(argv0);
        s += n + (s[n] == ',');
    }
    return mask;
}

/* The --avoid argument that repeats conf.avoid, after prefix; "" for none. */
static void avoid_names(char *buf, size_t n, const char *prefix)
{
    static const char *const names[] = {"foreign-manual-free", "sized-slack"};
    buf[0] = '\0';
    for (unsigned k = 0; k < 2; k++)
        if (conf.avoid & (1u << k)) {
            size_t used = strlen(buf);
            snprintf(buf + used, n - used, "%s%s", used == 0 ? prefix : ",", names[k]);
        }
}

static void parse_args(int argc, char **argv)
{
    bool seeded = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--no-fork") == 0) {
            conf.fork = false;
            continue;
        }
        if (v == NULL)
            usage(argv[0]);
        i++;
        if (strcmp(a, "--seed") == 0) {
            conf.seed = strtoull(v, NULL, 0);
            seeded = true;
        } else if (strcmp(a, "--seconds") == 0)
            conf.seconds = strtod(v, NULL);
        else if (strcmp(a, "--threads") == 0)
            conf.nthreads = (unsigned)strtoul(v, NULL, 0);
        else if (strcmp(a, "--ops") == 0)
            conf.ops = (unsigned)strtoul(v, NULL, 0);
        else if (strcmp(a, "--phases") == 0)
            conf.max_phases = (unsigned)strtoul(v, NULL, 0);
        else if (strcmp(a, "--avoid") == 0)
            conf.avoid = parse_avoid(v, argv[0]);
        else
            usage(argv[0]);
    }
    if (conf.nthreads < 1 || conf.nthreads > 64 || conf.ops < 1 || conf.seconds <= 0)
        usage(argv[0]);
    if (!seeded)
        conf.seed = ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid();

    const char *env = getenv("DPMALLOC_CONF");
    char avoid[96] = "";
    avoid_names(avoid, sizeof avoid, " --avoid ");
    char phases[32] = "";
    if (conf.max_phases != 0)
        snprintf(phases, sizeof phases, " --phases %u", conf.max_phases);
    snprintf(repro, sizeof repro, "%s%s%s%s --seed %llu --seconds %g --threads %u --ops %u%s%s%s",
             env ? "DPMALLOC_CONF='" : "", env ? env : "", env ? "' " : "", argv[0],
             (unsigned long long)conf.seed, conf.seconds, conf.nthreads, conf.ops, phases,
             conf.fork ? "" : " --no-fork", avoid);
}

/* ---- ctl helpers --------------------------------------------------------- */

static unsigned ctl_get_unsigned(fthread_t *t, const char *name)
{
    unsigned v = 0;
    size_t len = sizeof v;
    int err = dpm_ctl(name, &v, &len, NULL, 0);
    if (err != 0)
        fuzz_fail(t, "dpm_ctl(\"%s\") read: error %d", name, err);
    return v;
}

static void bind_arena(fthread_t *t, int arena)
{
    unsigned idx = arena == ARENA_AUTO ? t->auto_arena : (unsigned)arena;
    int err = dpm_ctl("thread.arena", NULL, NULL, &idx, sizeof idx);
    if (err != 0)
        fuzz_fail(t, "thread.arena = %u: error %d", idx, err);
    if (ctl_get_unsigned(t, "thread.arena") != idx)
        fuzz_fail(t, "thread.arena reads %u after binding to %u", ctl_get_unsigned(t, "thread.arena"), idx);
    t->bound = arena;
}

static void set_tcache(fthread_t *t, bool on)
{
    int err = dpm_ctl("thread.tcache.enabled", NULL, NULL, &on, sizeof on);
    if (err != 0)
        fuzz_fail(t, "thread.tcache.enabled = %d: error %d", on, err);
}

static void ctl_action(fthread_t *t, const char *name, int want)
{
    int err = dpm_ctl(name, NULL, NULL, NULL, 0);
    if (err != want)
        fuzz_fail(t, "dpm_ctl(\"%s\"): error %d, expected %d", name, err, want);
}

static void arena_action(fthread_t *t, unsigned idx, const char *what, int want)
{
    char name[64];
    snprintf(name, sizeof name, "arena.%u.%s", idx, what);
    ctl_action(t, name, want);
}

/* ---- fork ---------------------------------------------------------------- */

static void fork_child(fthread_t *t)
{
    t->in_child = true;
    t->op = "fork child: checking inherited blocks";
    for (unsigned i = 0; i < t->nblk; i++)
        blk_verify(t, &t->blk[i], "in the fork child");
    t->op = "fork child: freeing inherited blocks";
    for (unsigned i = t->nblk / 2; i > 0; i--) {
        int k = pick_release(t);
        if (k >= 0)
            blk_release(t, (unsigned)k);
    }
    op_burst(t, 3000);
    t->op = "fork child: heap check";
    fuzz_check_heap(t, "in the fork child");
    while (t->nblk > 0)
        blk_release(t, t->nblk - 1);
    fuzz_check_heap(t, "in the fork child after freeing everything");
    _exit(0);
}

static void do_fork(fthread_t *t)
{
    t->op = "fork";
    pid_t pid = fork();
    if (pid < 0)
        fuzz_fail(t, "fork: %s", strerror(errno));
    if (pid == 0)
        fork_child(t);
    int st = 0;
    for (double until = now_s() + 60;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            break;
        if (w < 0)
            fuzz_fail(t, "waitpid: %s", strerror(errno));
        if (now_s() > until) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            fuzz_fail(t, "the fork child hung for 60 s (killed)");
        }
        usleep(1000);
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fuzz_fail(t, "the fork child %s %d", WIFEXITED(st) ? "exited with status" : "was killed by signal",
                  WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    t->forks++;
}

/* ---- threads ------------------------------------------------------------- */

static void run_phase(fthread_t *t)
{
    for (t->opno = 0; t->opno < conf.ops; t->opno++) {
        if ((t->opno & 63) == 0 && now_s() > t_deadline)
            break;
        if (t->id == fork_thread && t->opno == fork_at)
            do_fork(t);
        op_random(t);
    }
}

/* After the phase: leave a retiring arena, free most blocks of retiring
 * arenas (a reset discards the rest), sometimes flush the cache. */
static void end_phase(fthread_t *t)
{
    t->op = "end of phase";
    if (t->tcache_off) {
        set_tcache(t, true);
        t->tcache_off = false;
    }
    if (t->bound != ARENA_AUTO && retiring[t->bound])
        bind_arena(t, ARENA_AUTO);
    for (unsigned i = 0; i < t->nblk;) {
        const blk_t *b = &t->blk[i];
        bool foreign = t->bound != ARENA_AUTO && b->arena != t->bound;
        if (b->arena != ARENA_AUTO && retiring[b->arena] && rnd_chance(&t->rng, 3, 4) &&
            !(foreign && (conf.avoid & AVOID_FOREIGN_MANUAL)))
            blk_release(t, i);
        else
            i++;
    }
    if (rnd_chance(&t->rng, 1, 2))
        ctl_action(t, "thread.tcache.flush", 0);
}

static void *thread_main(void *arg)
{
    fthread_t *t = arg;
    self = t;
    t->op = "start";
    t->auto_arena = ctl_get_unsigned(t, "thread.arena");
    for (;;) {
        pthread_barrier_wait(&barrier);
        if (stop)
            break;
        t->op = "start of phase";
        if (assign[t->id] != t->bound)
            bind_arena(t, assign[t->id]);
        if (tcache_off[t->id]) {
            set_tcache(t, false);
            t->tcache_off = true;
        }
        run_phase(t);
        pthread_barrier_wait(&barrier);
        end_phase(t);
        pthread_barrier_wait(&barrier);
        t->phase++;
    }
    t->op = "exit";
    if (t->bound != ARENA_AUTO)
        bind_arena(t, ARENA_AUTO);
    while (t->nblk > 0)
        blk_release(t, t->nblk - 1);
    return NULL;
}

/* ---- between phases (main thread) ---------------------------------------- */

static bool sweep_retiring(blk_t *b, void *arg)
{
    fthread_t *m = arg;
    if (b->arena == ARENA_AUTO || !retiring[b->arena])
        return false;
    if (rnd_chance(&m->rng, 1, 2))
        blk_free_any(m, b);   /* else discarded by the reset */
    return true;
}

static bool arena_bound(int arena)
{
    for (unsigned i = 0; i < conf.nthreads; i++)
        if (threads[i].bound == arena)
            return true;
    return false;
}

static void retire_arenas(fthread_t *m)
{
    m->op = "retiring manual arenas";
    xchg_sweep(sweep_retiring, m);
    for (unsigned i = 0; i < conf.nthreads; i++) {
        fthread_t *t = &threads[i];
        for (unsigned j = 0; j < t->nblk;) {
            if (t->blk[j].arena != ARENA_AUTO && retiring[t->blk[j].arena]) {
                t->live -= t->blk[j].size;
                t->blk[j] = t->blk[--t->nblk];
            } else {
                j++;
            }
        }
    }
    /* a bound arena refuses destroy */
    for (unsigned k = 0; k < plan.nmanual; k++)
        if (!retiring[plan.manual[k]] && arena_bound((int)plan.manual[k])) {
            m->op = "destroy of a bound arena";
            arena_action(m, plan.manual[k], "destroy", EBUSY);
            break;
        }
    for (unsigned k = 0; k < plan.nmanual;) {
        unsigned idx = plan.manual[k];
        if (!retiring[idx]) {
            k++;
            continue;
        }
        retiring[idx] = false;
        if (rnd_chance(&m->rng, 1, 2)) {
            m->op = "arena reset";
            arena_action(m, idx, "reset", 0);
            nreset++;
            k++;
        } else {
            m->op = "arena destroy";
            arena_action(m, idx, "destroy", 0);
            arena_action(m, idx, "purge", ENOENT);
            ndestroyed++;
            plan.manual[k] = plan.manual[--plan.nmanual];
        }
    }
}

static void create_arenas(fthread_t *m)
{
    m->op = "arenas.create";
    unsigned want = 1 + (unsigned)rnd_below(&m->rng, 3);
    while (plan.nmanual < want) {
        char name[32];
        snprintf(name, sizeof name, "fuzz%u", ncreated);
        const char *np = name;
        unsigned idx = 0;
        size_t len = sizeof idx;
        bool named = rnd_chance(&m->rng, 1, 2);
        int err = dpm_ctl("arenas.create", &idx, &len, named ? (void *)&np : NULL, named ? sizeof np : 0);
        if (err != 0)
            fuzz_fail(m, "arenas.create: error %d", err);
        if (idx < plan.nauto || idx >= sizeof retiring)
            fuzz_fail(m, "arenas.create returned arena %u (automatic arenas: %u)", idx, plan.nauto);
        char q[64];
        const char *got = NULL;
        len = sizeof got;
        snprintf(q, sizeof q, "arena.%u.name", idx);
        if (dpm_ctl(q, &got, &len, NULL, 0) != 0 || strcmp(got, named ? name : "") != 0)
            fuzz_fail(m, "%s reads \"%s\", expected \"%s\"", q, got ? got : "(null)", named ? name : "");
        plan.manual[plan.nmanual++] = idx;
        ncreated++;
    }
}

/* Some ctl traffic that runs alongside nothing: purges, a stats snapshot. */
static void poke(fthread_t *m)
{
    m->op = "purge/decay/stats";
    unsigned n = plan.nauto + plan.nmanual;
    unsigned k = (unsigned)rnd_below(&m->rng, n);
    unsigned idx = k < plan.nauto ? k : plan.manual[k - plan.nauto];
    arena_action(m, idx, rnd_chance(&m->rng, 1, 2) ? "purge" : "decay", 0);
    uint64_t epoch = 1;
    if (dpm_ctl("epoch", NULL, NULL, &epoch, sizeof epoch) != 0)
        fuzz_fail(m, "epoch refresh failed");
}

static void plan_phase(fthread_t *m)
{
    m->op = "planning";
    for (unsigned k = 0; k < plan.nmanual; k++)
        retiring[plan.manual[k]] = rnd_chance(&m->rng, 1, 3);
    for (unsigned i = 0; i < conf.nthreads; i++) {
        int cur = threads[i].bound;
        if (cur != ARENA_AUTO && rnd_chance(&m->rng, 1, 2))
            assign[i] = cur;   /* stays bound across the barrier */
        else if (plan.nmanual > 0 && rnd_chance(&m->rng, 2, 5))
            assign[i] = (int)plan.manual[rnd_below(&m->rng, plan.nmanual)];
        else
            assign[i] = ARENA_AUTO;
        tcache_off[i] = rnd_chance(&m->rng, 1, 10);
    }
    fork_thread = ~0u;
    if (conf.fork && nphases % 2 == 1) {
        fork_thread = (unsigned)rnd_below(&m->rng, conf.nthreads);
        fork_at = rnd_below(&m->rng, conf.ops);
    }
}

static void between_phases(fthread_t *m)
{
    m->op = "heap check";
    fuzz_check_heap(m, "between phases");
    nchecks++;
    retire_arenas(m);
    create_arenas(m);
    poke(m);
    m->op = "heap check";
    fuzz_check_heap(m, "after retiring and creating arenas");
    nchecks++;
}

/* ---- main ----------------------------------------------------------------- */

static void print_summary(void)
{
    uint64_t count[OP_NKINDS] = {0}, total = 0, bytes = 0, forks = 0;
    for (unsigned i = 0; i < conf.nthreads; i++) {
        for (unsigned k = 0; k < OP_NKINDS; k++)
            count[k] += threads[i].count[k];
        bytes += threads[i].bytes;
        forks += threads[i].forks;
    }
    printf("fuzz: operations:\n");
    for (unsigned k = 0; k < OP_NKINDS; k++) {
        if (count[k] == 0)
            continue;
        printf("  %-24s %12llu\n", op_names[k], (unsigned long long)count[k]);
        total += count[k];
    }
    printf("fuzz: %llu operations, %.1f MiB requested, %u phases, %llu forks, %u heap checks,\n"
           "      manual arenas: %u created, %u reset, %u destroyed; %.1f s\n",
           (unsigned long long)total, (double)bytes / (1 << 20), nphases, (unsigned long long)forks, nchecks,
           ncreated, nreset, ndestroyed, now_s() - t_start);
    printf("fuzz: passed seed=%llu\n", (unsigned long long)conf.seed);
    fflush(stdout);
}

static bool free_all_swept(blk_t *b, void *arg)
{
    blk_free_any(arg, b);
    return true;
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    t_start = now_s();
    t_deadline = t_start + conf.seconds;
    char avoid[96];
    avoid_names(avoid, sizeof avoid, " avoid=");
    printf("fuzz: seed=%llu threads=%u ops=%u seconds=%g fork=%s%s DPMALLOC_CONF=%s\n",
           (unsigned long long)conf.seed, conf.nthreads, conf.ops, conf.seconds, conf.fork ? "yes" : "no", avoid,
           getenv("DPMALLOC_CONF") ? getenv("DPMALLOC_CONF") : "(unset)");
    printf("fuzz: reproduce with: %s\n", repro);
    fflush(stdout);

    signal(SIGSEGV, on_signal);
    signal(SIGBUS, on_signal);
    signal(SIGABRT, on_signal);
    signal(SIGILL, on_signal);
    signal(SIGFPE, on_signal);

    fthread_t *m = &main_ctx;
    self = m;
    m->id = conf.nthreads;
    m->rng = conf.seed ^ 0x5bd1e995u;
    m->op = "start";
    plan.nauto = ctl_get_unsigned(m, "arenas.narenas");
#if FUZZ_LIBC
    {
        void *p = malloc(100);
        unsigned idx;
        size_t len = sizeof idx;
        if (p == NULL || dpm_ctl("arenas.lookup", &idx, &len, &p, sizeof p) != 0)
            fuzz_fail(m, "malloc is not dpmalloc's");
        free(p);
    }
#endif
    xchg_init();
    ops_init();
    if (pthread_barrier_init(&barrier, NULL, conf.nthreads + 1) != 0)
        fuzz_fail(m, "pthread_barrier_init failed");
    /* every table is allocated before any thread binds to a manual arena */
    threads = calloc(conf.nthreads, sizeof *threads);
    if (threads == NULL)
        fuzz_fail(m, "no memory for the thread tables");
    for (unsigned i = 0; i < conf.nthreads; i++) {
        threads[i].id = i;
        threads[i].rng = conf.seed * 0x9e3779b97f4a7c15ULL + i + 1;
        threads[i].bound = ARENA_AUTO;
        assign[i] = ARENA_AUTO;
        if (pthread_create(&threads[i].th, NULL, thread_main, &threads[i]) != 0)
            fuzz_fail(m, "pthread_create failed");
    }
    create_arenas(m);
    for (;;) {
        plan_phase(m);
        stop = (conf.max_phases != 0 && nphases >= conf.max_phases) || (nphases > 0 && now_s() > t_deadline);
        pthread_barrier_wait(&barrier);   /* phase starts */
        if (stop)
            break;
        pthread_barrier_wait(&barrier);   /* operations done */
        pthread_barrier_wait(&barrier);   /* end-of-phase work done */
        m->phase = ++nphases;
        between_phases(m);
    }
    for (unsigned i = 0; i < conf.nthreads; i++)
        pthread_join(threads[i].th, NULL);
    m->op = "final cleanup";
    xchg_sweep(free_all_swept, m);
    fuzz_check_heap(m, "at the end");
    nchecks++;
    for (unsigned k = 0; k < plan.nmanual; k++) {
        arena_action(m, plan.manual[k], "destroy", 0);
        ndestroyed++;
    }
    fuzz_check_heap(m, "after destroying every manual arena");
    nchecks++;
    print_summary();
    printf("1 passed, 0 failed\n");
    free(threads);
    return 0;
}
