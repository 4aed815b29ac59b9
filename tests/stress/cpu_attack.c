/*
 * cpu_attack.c - the malloc family under the interruptions a kernel deals
 * out: threads moved between CPUs, signals in the middle of any
 * instruction, other threads draining caches, fork and cancellation, all
 * at once.
 *
 * Written for per-CPU caches entered through restartable sequences (a
 * thread can lose its CPU, or take a signal, between any two instructions
 * of a cache operation, and other threads drain a CPU's cache under it),
 * but it uses only public interfaces, so it holds for the per-thread
 * caches as well. For a bounded time (default 6 s; argv[1] or
 * CPU_ATTACK_SECONDS for longer runs by hand):
 *  - workers (2 x online CPUs, at least 4) allocate blocks of 8 B .. 20 KiB
 *    (some 16-64 KiB), keep a bounded live set, hand blocks to each other
 *    through mutex mailboxes (about half of all frees are cross-thread)
 *    and realloc some; every block carries a pattern derived from its
 *    address, size, owner and a sequence number, checked before each free
 *    and realloc (the preserved prefix after a realloc);
 *  - a mover sets the workers' affinity to a random allowed CPU (sometimes
 *    all of them), without pause;
 *  - a signaller sends SIGUSR1 to three random workers every ~20 us; the
 *    handler allocates, fills, checks and frees a few blocks when the
 *    worker is outside every allocator call (each worker raises the
 *    thread-local in_alloc around its calls: allocating over an
 *    interrupted malloc is undefined, as with glibc) and only counts the
 *    signal otherwise (under restartable sequences such a signal still
 *    aborts and restarts the interrupted cache operation);
 *  - a trimmer calls malloc_trim(0) every ~1 ms;
 *  - the main thread forks every ~50 ms: the child checks and frees blocks
 *    it inherited, allocates and frees a few thousand more, trims and
 *    _exit(0)s; a child not gone within 10 s has hung and fails the test;
 *  - the main thread also starts a thread that loops on malloc_trim(0)
 *    and cancels it (deferred) at a random point, then allocates, frees
 *    and trims itself under a 10 s watchdog: a cancellation point inside
 *    malloc_trim with a lock held would hang that.
 * The run goes on past its time until the main thread forked 20 times
 * and cancelled 50 threads. Any wrong byte prints the block, the offset,
 * the expected and actual byte, and aborts. Timing decides nothing except
 * the hang watchdogs (>= 10 s each).
 */
#include "override.h"

#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/prctl.h>

#define MAX_WORKERS 256
#define LIVE_MAX 128     /* blocks a worker holds at most */
#define MBOX_CAP 256     /* blocks waiting in a worker's mailbox at most */
#define MAIN_LIVE 64     /* the main thread's blocks, inherited by each child */
#define CHILD_SLOTS 256
#define CHILD_OPS 3000
#define FORK_PERIOD_US 50000
#define SIGNAL_BURST 3   /* signals per ~20 us wake-up of the signaller */
#define HANG_S 10        /* a child or a cancelled thread's aftermath */
#define MIN_FORKS 20     /* the run goes on past its time until both done */
#define MIN_CANCELS 50
#define OVERTIME_S 120   /* past the run's time: the main loop is stuck */

struct blk {
    unsigned char *p;
    size_t n;
    uint64_t seed; /* the pattern's; from address, size, owner, sequence */
    int owner;     /* who allocated it: worker id, MAIN_OWNER, ... */
};
#define MAIN_OWNER 1000
#define CHILD_OWNER 1001
#define HANDLER_OWNER 2000 /* + worker id */

struct worker {
    pthread_t th;
    _Atomic pid_t tid; /* published once the worker has allocated */
    int id;
    uint64_t rng, hrng; /* the handler's own: it may interrupt rng's update */
    uint64_t seq;
    struct blk live[LIVE_MAX];
    int nlive;
    pthread_mutex_t mlock;
    struct blk mbox[MBOX_CAP];
    int mn;
    /* counts; the handler's are written only by the handler */
    unsigned long ops, allocs, frees, remote_frees, reallocs, sent, send_full, adopted;
    volatile unsigned long sig_seen, sig_in_alloc, sig_allocated;
} __attribute__((aligned(64)));

static struct worker workers[MAX_WORKERS];
static int nworkers;
static _Thread_local struct worker *self;
/* set around each malloc/free/realloc/calloc call of a worker */
static _Thread_local volatile sig_atomic_t in_alloc;

static atomic_int stop_aux, stop_workers;
static atomic_ulong moves, move_errors, signals_sent, trims;
static atomic_ulong worker_progress; /* +1 every 256 steps of any worker */
static pthread_barrier_t end_barrier;
static const char *volatile phase = "start";

/* ---- patterns ---- */

static inline uint64_t mix64(uint64_t z)
{
    z ^= z >> 33;
    z *= 0xff51afd7ed558ccdULL;
    z ^= z >> 33;
    z *= 0xc4ceb9fe1a85ec53ULL;
    z ^= z >> 33;
    return z;
}
static uint64_t block_seed(const void *p, size_t n, int owner, uint64_t seq)
{
    return mix64((uint64_t)(uintptr_t)p ^ ((uint64_t)n << 40) ^
                 ((uint64_t)(unsigned)owner << 52) ^ mix64(seq + 1));
}
static inline uint64_t pattern_word(uint64_t seed, size_t k)
{
    return seed ^ ((uint64_t)(k + 1) * 0x9e3779b97f4a7c15ULL);
}
static unsigned char pattern_byte(uint64_t seed, size_t i)
{
    uint64_t w = pattern_word(seed, i / 8);
    unsigned char b[8];
    memcpy(b, &w, 8);
    return b[i % 8];
}
static void fill(unsigned char *p, size_t n, uint64_t seed)
{
    size_t k = 0;
    for (; (k + 1) * 8 <= n; k++) {
        uint64_t w = pattern_word(seed, k);
        memcpy(p + k * 8, &w, 8);
    }
    for (size_t i = k * 8; i < n; i++)
        p[i] = pattern_byte(seed, i);
}
/* Index of the first wrong byte among the first n, or n. */
static size_t check(const unsigned char *p, size_t n, uint64_t seed)
{
    size_t k = 0;
    for (; (k + 1) * 8 <= n; k++) {
        uint64_t w = pattern_word(seed, k), got;
        memcpy(&got, p + k * 8, 8);
        if (got != w)
            break;
    }
    for (size_t i = k * 8; i < n; i++)
        if (p[i] != pattern_byte(seed, i))
            return i;
    return n;
}

/* Reports through write(2), without stdio: also from a signal handler
 * and from a forked child. */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (len < 0)
        return;
    size_t l = (size_t)len < sizeof buf ? (size_t)len : sizeof buf - 1;
    if (write(STDERR_FILENO, buf, l) < 0) {
    }
}

static void __attribute__((noreturn))
die_block(const char *who, const char *when, const struct blk *b, size_t off)
{
    say("cpu_attack: %s: %s: block %p size %zu owner %d seed 0x%llx: byte %zu "
        "is 0x%02x, expected 0x%02x\n",
        who, when, (void *)b->p, b->n, b->owner, (unsigned long long)b->seed, off,
        b->p[off], pattern_byte(b->seed, off));
    abort();
}
static void __attribute__((noreturn)) die(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static void __attribute__((noreturn)) die(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    say("cpu_attack: %s\n", buf);
    abort();
}

static void check_block(const char *who, const char *when, const struct blk *b)
{
    size_t bad = check(b->p, b->n, b->seed);
    if (bad != b->n)
        die_block(who, when, b, bad);
}

/* A new block: alignment, usable size, zeroes from calloc; then its
 * pattern. */
static void new_block(const char *who, struct blk *b, void *p, size_t n, int owner,
                      uint64_t seq, int zeroed)
{
    if (p == NULL)
        die("%s: allocation of %zu bytes failed: %s", who, n, strerror(errno));
    if ((uintptr_t)p % 16 != 0)
        die("%s: block %p of %zu bytes is not 16-byte aligned", who, p, n);
    if (malloc_usable_size(p) < n)
        die("%s: malloc_usable_size(%p) = %zu < %zu", who, p, malloc_usable_size(p), n);
    if (zeroed && !test_all_zero(p, n))
        die("%s: calloc block %p of %zu bytes is not zero", who, p, n);
    b->p = p;
    b->n = n;
    b->owner = owner;
    b->seed = block_seed(p, n, owner, seq);
    fill(b->p, n, b->seed);
}

/* Mostly small; some of the large classes (16-64 KiB). */
static size_t pick_size(uint64_t *rng)
{
    uint64_t r = test_rand(rng);
    unsigned c = (unsigned)(r % 100);
    r >>= 8;
    if (c < 60)
        return 8 + (size_t)(r % 249);
    if (c < 85)
        return 257 + (size_t)(r % (4096 - 256));
    if (c < 97)
        return 4097 + (size_t)(r % (20480 - 4096 + 1));
    return 16384 + (size_t)(r % (65536 - 16384 + 1));
}
/* A realloc's new size: anywhere, or near the old one (in place). */
static size_t resize(uint64_t *rng, size_t n)
{
    uint64_t r = test_rand(rng);
    if (r & 1)
        return pick_size(rng);
    size_t d = (size_t)((r >> 8) % (n / 4 + 8));
    return (r & 2) || n <= d + 8 ? n + d : n - d;
}

/* ---- the worker's allocator calls, flagged for the signal handler ---- */

static void *w_malloc(size_t n)
{
    in_alloc = 1;
    void *p = malloc(n);
    in_alloc = 0;
    return p;
}
static void *w_calloc(size_t k, size_t n)
{
    in_alloc = 1;
    void *p = calloc(k, n);
    in_alloc = 0;
    return p;
}
static void *w_realloc(void *q, size_t n)
{
    in_alloc = 1;
    void *p = realloc(q, n);
    in_alloc = 0;
    return p;
}
static void w_free(void *p)
{
    in_alloc = 1;
    free(p);
    in_alloc = 0;
}

/* ---- SIGUSR1: allocate over an interrupted worker ---- */

static void on_usr1(int sig)
{
    (void)sig;
    struct worker *w = self;
    if (w == NULL)
        return;
    w->sig_seen = w->sig_seen + 1;
    if (in_alloc) {
        w->sig_in_alloc = w->sig_in_alloc + 1;
        return;
    }
    int saved = errno;
    w->sig_allocated = w->sig_allocated + 1;
    struct blk b[4];
    uint64_t r = test_rand(&w->hrng);
    int k = 1 + (int)(r % 4);
    for (int i = 0; i < k; i++) {
        size_t n = (r >> (8 + i)) & 1 ? pick_size(&w->hrng)
                                      : 8 + (size_t)(test_rand(&w->hrng) % 512);
        int z = (r >> (16 + i) & 7) == 0;
        void *p = z ? calloc(1, n) : malloc(n);
        new_block("signal handler", &b[i], p, n, HANDLER_OWNER + w->id,
                  test_rand(&w->hrng), z);
    }
    if ((r >> 24) & 1) {
        struct blk *x = &b[k - 1];
        check_block("signal handler", "before realloc", x);
        size_t n = resize(&w->hrng, x->n);
        unsigned char *p = realloc(x->p, n);
        if (p == NULL)
            die("signal handler: realloc(%p, %zu) failed", (void *)x->p, n);
        struct blk old = *x;
        old.p = p;
        size_t keep = n < x->n ? n : x->n, bad = check(p, keep, old.seed);
        if (bad != keep)
            die_block("signal handler", "prefix after realloc", &old, bad);
        new_block("signal handler", x, p, n, HANDLER_OWNER + w->id,
                  test_rand(&w->hrng), 0);
    }
    for (int i = 0; i < k; i++) {
        check_block("signal handler", "before free", &b[i]);
        free(b[i].p);
    }
    errno = saved;
}

/* ---- workers ---- */

static void w_check_free(struct worker *w, const struct blk *b, const char *when)
{
    check_block("worker", when, b);
    w_free(b->p);
    w->frees++;
    if (b->owner != w->id)
        w->remote_frees++;
}

static void w_realloc_block(struct worker *w, struct blk *b)
{
    check_block("worker", "before realloc", b);
    size_t n = resize(&w->rng, b->n);
    unsigned char *p = w_realloc(b->p, n);
    if (p == NULL)
        die("worker %d: realloc(%p, %zu) failed: %s", w->id, (void *)b->p, n,
            strerror(errno));
    struct blk old = *b;
    old.p = p;
    size_t keep = n < b->n ? n : b->n, bad = check(p, keep, old.seed);
    if (bad != keep)
        die_block("worker", "prefix after realloc", &old, bad);
    new_block("worker", b, p, n, w->id, w->seq++, 0);
    w->reallocs++;
}

/* Takes what others sent: frees it (cross-thread), or keeps it. */
static void w_drain(struct worker *w, int keep_some)
{
    struct blk got[MBOX_CAP];
    pthread_mutex_lock(&w->mlock);
    int n = w->mn;
    memcpy(got, w->mbox, (size_t)n * sizeof got[0]);
    w->mn = 0;
    pthread_mutex_unlock(&w->mlock);
    for (int i = 0; i < n; i++) {
        if (keep_some && w->nlive < LIVE_MAX && (test_rand(&w->rng) & 3) == 0) {
            check_block("worker", "on receipt", &got[i]);
            w->live[w->nlive++] = got[i];
            w->adopted++;
        } else {
            w_check_free(w, &got[i], "before cross-thread free");
        }
    }
}

/* To a random other worker; the next ones when its mailbox is full. */
static int w_send(struct worker *w, const struct blk *b)
{
    int to = (w->id + 1 + (int)(test_rand(&w->rng) % (uint64_t)(nworkers - 1))) % nworkers;
    for (int tries = 0; tries < nworkers - 1; tries++, to = (to + 1) % nworkers) {
        if (to == w->id)
            continue;
        struct worker *t = &workers[to];
        int ok = 0;
        pthread_mutex_lock(&t->mlock);
        if (t->mn < MBOX_CAP) {
            t->mbox[t->mn++] = *b;
            ok = 1;
        }
        pthread_mutex_unlock(&t->mlock);
        if (ok) {
            w->sent++;
            return 1;
        }
    }
    return 0;
}

static void w_step(struct worker *w)
{
    uint64_t r = test_rand(&w->rng);
    unsigned op = (unsigned)(r % 100);
    if (w->nlive == 0 || (w->nlive < LIVE_MAX && op < 50)) {
        size_t n = pick_size(&w->rng);
        int z = ((r >> 8) % 10) == 0;
        void *p = z ? w_calloc(1, n) : w_malloc(n);
        new_block("worker", &w->live[w->nlive], p, n, w->id, w->seq++, z);
        w->nlive++;
        w->allocs++;
    } else {
        int i = (int)((r >> 16) % (uint64_t)w->nlive);
        struct blk b = w->live[i];
        unsigned sub = (unsigned)((r >> 32) % 100);
        if (sub < 15) {
            w_realloc_block(w, &w->live[i]);
        } else if (sub >= 65) {
            w->live[i] = w->live[--w->nlive];
            w_check_free(w, &b, "before free");
        } else {
            /* a full mailbox: the block stays, to go out later */
            if (w_send(w, &b))
                w->live[i] = w->live[--w->nlive];
            else
                w->send_full++;
        }
    }
    if ((w->ops & 3) == 0)
        w_drain(w, 1);
    if ((w->ops & 255) == 0)
        atomic_fetch_add_explicit(&worker_progress, 1, memory_order_relaxed);
    w->ops++;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    self = w;
    /* allocate once before the signals may come */
    w_free(w_malloc(64));
    atomic_store(&w->tid, gettid());
    while (!atomic_load_explicit(&stop_workers, memory_order_relaxed))
        w_step(w);
    /* the end: free all, wait until nobody sends, take the last ones */
    w_drain(w, 0);
    while (w->nlive > 0)
        w_check_free(w, &w->live[--w->nlive], "at the end");
    pthread_barrier_wait(&end_barrier);
    w_drain(w, 0);
    /* signals still pending only count from here (thread exit) */
    in_alloc = 1;
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &s, NULL);
    return NULL;
}

/* ---- the mover, the signaller, the trimmer ---- */

static cpu_set_t allowed;
static int allowed_cpus[CPU_SETSIZE], nallowed;

static void *mover_main(void *arg)
{
    (void)arg;
    uint64_t rng = 99;
    while (!atomic_load_explicit(&stop_aux, memory_order_relaxed)) {
        uint64_t r = test_rand(&rng);
        struct worker *w = &workers[r % (uint64_t)nworkers];
        cpu_set_t set;
        if (((r >> 16) & 7) == 0) {
            set = allowed;
        } else {
            CPU_ZERO(&set);
            CPU_SET(allowed_cpus[(r >> 24) % (uint64_t)nallowed], &set);
        }
        if (sched_setaffinity(atomic_load(&w->tid), sizeof set, &set) == 0)
            atomic_fetch_add_explicit(&moves, 1, memory_order_relaxed);
        else
            atomic_fetch_add_explicit(&move_errors, 1, memory_order_relaxed);
    }
    return NULL;
}

static void *signaller_main(void *arg)
{
    (void)arg;
    prctl(PR_SET_TIMERSLACK, 1UL); /* ~20 us, not the default 50 us slack */
    uint64_t rng = 7;
    const struct timespec gap = {0, 20000};
    while (!atomic_load_explicit(&stop_aux, memory_order_relaxed)) {
        /* a few per wake-up: on a busy machine a wake-up takes longer */
        for (int k = 0; k < SIGNAL_BURST; k++) {
            struct worker *w = &workers[test_rand(&rng) % (uint64_t)nworkers];
            if (pthread_kill(w->th, SIGUSR1) == 0)
                atomic_fetch_add_explicit(&signals_sent, 1, memory_order_relaxed);
        }
        nanosleep(&gap, NULL);
    }
    return NULL;
}

static void *trimmer_main(void *arg)
{
    (void)arg;
    const struct timespec gap = {0, 1000000};
    while (!atomic_load_explicit(&stop_aux, memory_order_relaxed)) {
        malloc_trim(0);
        atomic_fetch_add_explicit(&trims, 1, memory_order_relaxed);
        nanosleep(&gap, NULL);
    }
    return NULL;
}

/* ---- cancellation ---- */

static atomic_ulong victim_trims;

static void *victim_main(void *arg)
{
    uintptr_t n = (uintptr_t)arg;
    for (;;) {
        malloc_trim(0);
        atomic_fetch_add_explicit(&victim_trims, 1, memory_order_relaxed);
        void *p = malloc(n);
        if (p == NULL)
            die("cancel victim: malloc(%zu) failed", (size_t)n);
        memset(p, 0x5a, n);
        free(p);
        pthread_testcancel();
    }
    return NULL;
}

static void on_alarm(int sig)
{
    (void)sig;
    say("cpu_attack: watchdog: %s did not finish within its time (hang)\n", phase);
    _exit(3);
}

/* Cancels a thread looping on malloc_trim at a random point, then
 * allocates, frees and trims here: a lock left held by the cancelled
 * thread hangs one of these and the watchdog fails the test. */
static void cancel_round(uint64_t *rng)
{
    pthread_t t;
    uint64_t r = test_rand(rng);
    size_t vn = 8 + (size_t)(r % 30000);
    phase = "cancellation: pthread_create";
    alarm(HANG_S);
    int e = pthread_create(&t, NULL, victim_main, (void *)(uintptr_t)vn);
    if (e != 0)
        die("pthread_create: %s", strerror(e));
    struct timespec d = {0, (long)((r >> 20) % 2000) * 1000};
    nanosleep(&d, NULL);
    phase = "cancellation: pthread_cancel + join of a thread looping on malloc_trim";
    pthread_cancel(t);
    void *ret = NULL;
    pthread_join(t, &ret);
    if (ret != PTHREAD_CANCELED)
        die("cancelled thread returned %p, not PTHREAD_CANCELED", ret);
    phase = "cancellation: malloc/free/malloc_trim after a cancelled malloc_trim";
    for (int i = 0; i < 16; i++) {
        struct blk b;
        size_t n = pick_size(rng);
        new_block("after cancel", &b, malloc(n), n, MAIN_OWNER, test_rand(rng), 0);
        check_block("after cancel", "before free", &b);
        free(b.p);
    }
    malloc_trim(0);
    alarm(0);
}

/* ---- fork ---- */

static struct blk main_live[MAIN_LIVE];

static void main_churn(uint64_t *rng, int k)
{
    for (int j = 0; j < k; j++) {
        struct blk *b = &main_live[test_rand(rng) % MAIN_LIVE];
        if (b->p) {
            check_block("main", "before free", b);
            free(b->p);
        }
        size_t n = pick_size(rng);
        new_block("main", b, malloc(n), n, MAIN_OWNER, test_rand(rng), 0);
    }
}

/* The forked child: its inherited blocks hold their patterns, it can
 * allocate, free, realloc and trim; half of the inherited blocks are
 * freed first, the others checked again after the churn and the trim. */
static int child_main(int iteration)
{
    uint64_t rng = 5000 + (uint64_t)iteration;
    for (int i = 0; i < MAIN_LIVE; i += 2)
        if (main_live[i].p) {
            check_block("child", "inherited, before free", &main_live[i]);
            free(main_live[i].p);
            main_live[i].p = NULL;
        }
    static struct blk slot[CHILD_SLOTS];
    memset(slot, 0, sizeof slot);
    for (int op = 0; op < CHILD_OPS; op++) {
        uint64_t r = test_rand(&rng);
        struct blk *b = &slot[r % CHILD_SLOTS];
        if (b->p == NULL) {
            size_t n = pick_size(&rng);
            int z = ((r >> 12) & 7) == 0;
            new_block("child", b, z ? calloc(1, n) : malloc(n), n, CHILD_OWNER,
                      test_rand(&rng), z);
        } else if (((r >> 16) & 7) == 0) {
            check_block("child", "before realloc", b);
            size_t n = resize(&rng, b->n);
            unsigned char *p = realloc(b->p, n);
            if (p == NULL)
                die("child: realloc(%p, %zu) failed", (void *)b->p, n);
            struct blk old = *b;
            old.p = p;
            size_t keep = n < b->n ? n : b->n, bad = check(p, keep, old.seed);
            if (bad != keep)
                die_block("child", "prefix after realloc", &old, bad);
            new_block("child", b, p, n, CHILD_OWNER, test_rand(&rng), 0);
        } else {
            check_block("child", "before free", b);
            free(b->p);
            b->p = NULL;
        }
    }
    malloc_trim(0);
    for (int i = 0; i < CHILD_SLOTS; i++)
        if (slot[i].p) {
            check_block("child", "at the end", &slot[i]);
            free(slot[i].p);
        }
    for (int i = 1; i < MAIN_LIVE; i += 2)
        if (main_live[i].p) {
            check_block("child", "inherited, after churn and trim", &main_live[i]);
            free(main_live[i].p);
        }
    malloc_trim(0);
    return 0;
}

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* Forks while the workers run; 0, or 1 when the child failed or hung.
 * *overlapped: the workers made progress while the child lived. */
static int fork_round(int it, long *slowest, int *overlapped)
{
    unsigned long before = atomic_load(&worker_progress);
    fflush(NULL);
    phase = "fork (parent side)";
    alarm(3 * HANG_S); /* fork itself, and the wait below, bounded */
    long t0 = now_ms();
    pid_t pid = fork();
    if (pid < 0)
        die("fork: %s", strerror(errno));
    if (pid == 0)
        _exit(child_main(it));
    int st = 0;
    pid_t got;
    while ((got = waitpid(pid, &st, WNOHANG)) == 0 && now_ms() - t0 < HANG_S * 1000L)
        usleep(1000);
    long dt = now_ms() - t0;
    alarm(0);
    if (atomic_load(&worker_progress) != before)
        ++*overlapped;
    if (dt > *slowest)
        *slowest = dt;
    if (got == 0) {
        TEST_FAIL("fork #%d: child %d hung: not gone after %d s", it, (int)pid, HANG_S);
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        return 1;
    }
    if (got != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        char d[128];
        TEST_FAIL("fork #%d: child %s", it, test_describe_status(st, d, sizeof d));
        return 1;
    }
    return 0;
}

static double run_seconds = 6.0;

TEST(override_in_effect) { test_expect_override(); }

TEST(cpu_attack)
{
    EXPECT_EQ_I(sched_getaffinity(0, sizeof allowed, &allowed), 0);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &allowed))
            allowed_cpus[nallowed++] = c;
    EXPECT(nallowed > 0, "no CPU allowed");
    if (nallowed == 0)
        return;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    nworkers = online > 2 ? (int)(2 * online) : 4;
    if (nworkers > MAX_WORKERS)
        nworkers = MAX_WORKERS;

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);

    pthread_barrier_init(&end_barrier, NULL, (unsigned)nworkers);
    for (int i = 0; i < nworkers; i++) {
        struct worker *w = &workers[i];
        w->id = i;
        w->rng = 1 + (uint64_t)i;
        w->hrng = 100001 + (uint64_t)i;
        pthread_mutex_init(&w->mlock, NULL);
    }
    for (int i = 0; i < nworkers; i++) {
        int e = pthread_create(&workers[i].th, NULL, worker_main, &workers[i]);
        if (e != 0)
            die("pthread_create(worker %d): %s", i, strerror(e));
    }
    for (int i = 0; i < nworkers; i++)
        while (atomic_load(&workers[i].tid) == 0)
            sched_yield();
    pthread_t mover, signaller, trimmer;
    if (pthread_create(&mover, NULL, mover_main, NULL) != 0 ||
        pthread_create(&signaller, NULL, signaller_main, NULL) != 0 ||
        pthread_create(&trimmer, NULL, trimmer_main, NULL) != 0)
        die("pthread_create of the mover, signaller or trimmer failed");

    uint64_t rng = 4242;
    int forks = 0, cancels = 0, failed_children = 0, overlapped = 0;
    long slowest = 0;
    long t0 = now_ms(), end = t0 + (long)(run_seconds * 1000);
    for (;;) {
        long t = now_ms();
        if (t >= end && forks >= MIN_FORKS && cancels >= MIN_CANCELS)
            break;
        if (t >= end + OVERTIME_S * 1000L) {
            TEST_FAIL("only %d forks and %d cancellations %d s past the run's time", forks,
                      cancels, OVERTIME_S);
            break;
        }
        main_churn(&rng, 8);
        cancel_round(&rng);
        cancels++;
        failed_children += fork_round(forks, &slowest, &overlapped);
        forks++;
        if (failed_children >= 3)
            break;
        long spent = now_ms() - t;
        if (spent * 1000 < FORK_PERIOD_US) {
            struct timespec d = {0, (FORK_PERIOD_US - spent * 1000) * 1000};
            nanosleep(&d, NULL);
        }
    }
    long ran_ms = now_ms() - t0;

    phase = "the end (joining threads, freeing everything)";
    alarm(60);
    atomic_store(&stop_aux, 1);
    pthread_join(mover, NULL);
    pthread_join(signaller, NULL);
    pthread_join(trimmer, NULL);
    atomic_store(&stop_workers, 1);
    for (int i = 0; i < nworkers; i++)
        pthread_join(workers[i].th, NULL);
    unsigned long allocs = 0, frees = 0, remote = 0, reallocs = 0, ops = 0, sent = 0,
                  full = 0, adopted = 0, seen = 0, in_alloc_n = 0, allocated = 0;
    for (int i = 0; i < nworkers; i++) {
        struct worker *w = &workers[i];
        allocs += w->allocs;
        frees += w->frees;
        remote += w->remote_frees;
        reallocs += w->reallocs;
        ops += w->ops;
        sent += w->sent;
        full += w->send_full;
        adopted += w->adopted;
        seen += w->sig_seen;
        in_alloc_n += w->sig_in_alloc;
        allocated += w->sig_allocated;
        EXPECT(w->ops > 0, "worker %d never ran", i);
        EXPECT(w->nlive == 0 && w->mn == 0, "worker %d kept %d live, %d in its mailbox", i,
               w->nlive, w->mn);
    }
    for (int i = 0; i < MAIN_LIVE; i++)
        if (main_live[i].p) {
            check_block("main", "at the end", &main_live[i]);
            free(main_live[i].p);
            main_live[i].p = NULL;
        }
    malloc_trim(0);
    alarm(0);
    EXPECT_EQ_U(frees, allocs);
    EXPECT_EQ_I(failed_children, 0);
    EXPECT(overlapped > 0, "the workers never ran while a child lived (%d forks)", forks);
    fprintf(stderr,
            "cpu_attack: %.1f s, %d workers on %d allowed CPUs: %lu ops, %lu allocs, "
            "%lu frees (%.0f%% cross-thread), %lu reallocs, %lu sent (%lu to a full "
            "mailbox), %lu adopted; "
            "%lu affinity moves (%lu failed); %lu signals sent, %lu handled "
            "(%lu allocated, %lu inside an allocator call); %lu trims, %lu by "
            "cancelled threads; %d forks (%d while the workers ran, slowest child %ld ms), "
            "%d cancellations\n",
            (double)ran_ms / 1000, nworkers, nallowed, ops, allocs, frees,
            frees ? 100.0 * (double)remote / (double)frees : 0.0, reallocs, sent, full,
            adopted,
            atomic_load(&moves), atomic_load(&move_errors), atomic_load(&signals_sent), seen,
            allocated, in_alloc_n, atomic_load(&trims), atomic_load(&victim_trims), forks,
            overlapped, slowest, cancels);
}

int main(int argc, char **argv)
{
    const char *s = argc > 1 ? argv[1] : getenv("CPU_ATTACK_SECONDS");
    if (s != NULL && atof(s) > 0)
        run_seconds = atof(s);
    signal(SIGALRM, on_alarm);
    RUN(override_in_effect);
    RUN(cpu_attack);
    return test_done();
}
