/*
 * background.c - the decay thread (see background.h). It wakes every
 * 1/16 of the shortest decay time (at least 10 ms, at most 1 s), runs the
 * decay curve of each arena, and sleeps again.
 */
#include "background.h"
#include "mutex.h"
#include "conf.h"
#include "tcache.h"
#include "cpu_cache.h"
#include "large_cache.h"
#include "transfer.h"
#include "typed_cache.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <time.h>

bool background_pending;
/* Automatic mode (background_request_when_threaded) waits for an
 * allocation slow path of a threaded process; background_pending stays
 * set meanwhile. Under bg_lock. */
static bool auto_waiting;
/* The automatic thread found nothing to decay and sleeps until a free
 * slow path wakes it (background_wake) or a second passes. */
bool background_idle;
/* wanted: read without bg_lock by background_maybe_start's first test,
 * so written with relaxed atomic stores. */
static bool wanted, running, stopping;
/* The running thread came from automatic mode: it ends when no thread
 * that allocates is left, and a forked child waits again. */
static bool started_automatically;
/* The thread that forked, in the child: glibc keeps a process that once
 * had threads "not single-threaded" in its children, so there automatic
 * mode waits for a slow path of a thread the child made itself (a child
 * that only runs the forking thread, as most do before exec, gets no
 * thread; a child of a multi-threaded process may not even be able to
 * start one safely). */
static __thread bool forked_here;
static pthread_t thread;
static pthread_mutex_t bg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bg_cond = PTHREAD_COND_INITIALIZER;
/* Signalled when a stopped thread was joined (running and stopping both
 * false again): other callers that switched it off wait for that. */
static pthread_cond_t bg_stopped = PTHREAD_COND_INITIALIZER;
/* The background thread itself (a page source's purge callback it runs
 * may call the ctl): it cannot join itself. */
static __thread bool on_background_thread;

static uint64_t wake_interval_ns(void)
{
    int64_t ms = opt.dirty_decay_ms;
    if (opt.muzzy_decay_ms > 0 && (ms <= 0 || opt.muzzy_decay_ms < ms))
        ms = opt.muzzy_decay_ms;
    uint64_t ns = ms > 0 ? (uint64_t)ms * 1000000u / 16 : 100000000u;
    if (ns < 10000000u)
        ns = 10000000u;
    return ns > 1000000000u ? 1000000000u : ns;
}

/* Idle CPUs' large caches first (blocks unused for a whole pass go
 * home), so that their pages decay with the arena's. Not under the arena
 * table's lock: a sourced arena's purge calls its source, user code that
 * may read statistics or create arenas (both take that lock). A slot is
 * never freed, and its purge_lock, which the pass takes first, orders it
 * with a destroy or reuse of the slot (arena.h). */
/* Returns whether some arena still has pages a later pass may purge. */
static bool decay_work_anywhere(void);
static bool decay_every_arena(void)
{
    large_caches_flush(true, NULL);
    cpu_caches_drain(true);
    typed_caches_drain(true);
    unsigned n = __atomic_load_n(&narenas_total, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n; i++) {
        arena_t *a = __atomic_load_n(&arenas[i], __ATOMIC_ACQUIRE);
        if (a == NULL || __atomic_load_n(&a->destroyed, __ATOMIC_ACQUIRE))
            continue;
        arena_decay_pass(a);
    }
    return decay_work_anywhere();
}

static void *background_main(void *arg);

/* Whether some arena has pages a later decay pass may purge. */
static bool decay_work_anywhere(void)
{
    /* blocks in CPU, transfer and typed caches go home after two idle passes */
    if (cpu_caches_bytes() + transfer_bytes() + typed_caches_bytes() != 0)
        return true;
    unsigned n = __atomic_load_n(&narenas_total, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n; i++) {
        arena_t *a = __atomic_load_n(&arenas[i], __ATOMIC_ACQUIRE);
        if (a != NULL && arena_decay_work_left(a))
            return true;
    }
    return false;
}

/* The thread belongs to the process, not to whichever thread happened to
 * start it (the first allocation, a ctl switch, a fork child's restart).
 * Affinity: a starter pinned to one core (a DPDK lcore) would pin the
 * thread to that isolated core. It asks for every CPU number there could
 * be; the kernel keeps those that exist and that the cgroup's cpuset
 * allows. 8192 bits cover any machine Linux builds for by default; the
 * kernel ignores bits past its own CPU count. If nothing is left (EINVAL)
 * the inherited set stays. Set by the starter once pthread_create returns,
 * so that the thread is the process's before the start is reported, and
 * not through the attributes: glibc's pthread_attr_setaffinity_np
 * allocates, and the starter is inside the allocator. */
static void give_all_cpus(void)
{
    unsigned long all_cpus[8192 / (8 * sizeof(unsigned long))];
    memset(all_cpus, 0xff, sizeof(all_cpus));
    (void)pthread_setaffinity_np(thread, sizeof(all_cpus), (const cpu_set_t *)(void *)all_cpus);
}

/* Signals: created with every signal blocked (the creator blocks them
 * around pthread_create), so a signal meant for the program (a SIGTERM
 * every program thread blocks and one sigwaits for) never lands on this
 * thread, whose default action would kill the process. Scheduling:
 * SCHED_OTHER, priority 0, whatever the starter ran under (a SCHED_FIFO
 * starter would make the decay pass a real-time task). */
static int background_create(void)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    int err = pthread_attr_init(&attr);
    if (err == 0) {
        struct sched_param sp;
        memset(&sp, 0, sizeof(sp));
        pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
        pthread_attr_setschedpolicy(&attr, SCHED_OTHER);
        pthread_attr_setschedparam(&attr, &sp);
        err = pthread_create(&thread, &attr, background_main, NULL);
        pthread_attr_destroy(&attr);
    }
    /* An explicit policy can be refused (EPERM: leaving SCHED_IDLE past
     * RLIMIT_NICE, a seccomp filter): a thread with the inherited policy
     * still decays, which is better than none. */
    if (err == EPERM)
        err = pthread_create(&thread, NULL, background_main, NULL);
    if (err == 0)
        give_all_cpus();
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return err;
}

/* Threads that allocate (counted by the arenas they are bound to), the
 * background thread itself left out should a callback have made it
 * allocate. */
static unsigned allocating_threads(void)
{
    unsigned n = 0;
    unsigned na = __atomic_load_n(&narenas_total, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < na; i++) {
        arena_t *a = __atomic_load_n(&arenas[i], __ATOMIC_ACQUIRE);
        if (a != NULL)
            n += arena_threads(a);
    }
    return tls_arena != NULL && n > 0 ? n - 1 : n;
}

/* The automatic thread with nothing to decay (bg_lock held): it sleeps,
 * without its timer's wake-ups, until a free slow path finds it idle and
 * wakes it, checking once a second whether decay found work it missed
 * and whether any thread that allocates is left. With none left (every
 * program thread left with pthread_exit, or the allocating ones all
 * exited) it ends, so it never keeps a process alive; automatic mode
 * then waits for the next allocation slow path. Returns true if it ends. */
static bool idle_until_work(void)
{
    __atomic_store_n(&background_idle, true, __ATOMIC_RELAXED);
    for (;;) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&bg_cond, &bg_lock, &ts);
        if (stopping || !__atomic_load_n(&background_idle, __ATOMIC_RELAXED) || decay_work_anywhere())
            break;
        if (allocating_threads() == 0) {
            __atomic_store_n(&background_idle, false, __ATOMIC_RELAXED);
            running = started_automatically = false;
            __atomic_store_n(&wanted, false, __ATOMIC_RELAXED);
            auto_waiting = true;
            __atomic_store_n(&background_pending, true, __ATOMIC_RELAXED);
            pthread_detach(pthread_self());   /* nobody joins it now */
            return true;
        }
    }
    __atomic_store_n(&background_idle, false, __ATOMIC_RELAXED);
    return false;
}

void background_wake(void)
{
    /* No bg_lock: this runs inside free, which glibc may call with its
     * own locks held; a wake lost to the race with the thread's going to
     * sleep costs at most its one-second look. */
    if (__atomic_exchange_n(&background_idle, false, __ATOMIC_RELAXED))
        pthread_cond_signal(&bg_cond);
}

static void *background_main(void *arg)
{
    (void)arg;
    on_background_thread = true;
    /* Named by itself, with prctl: glibc names another thread by opening
     * a file of it in the starter's thread, which a sandbox may forbid
     * (review r25_last_exit_no_proc). */
    (void)pthread_setname_np(pthread_self(), "dpmalloc_bg");
    pthread_mutex_lock(&bg_lock);
    while (!stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t ns = (uint64_t)ts.tv_nsec + wake_interval_ns();
        ts.tv_sec += (time_t)(ns / 1000000000u);
        ts.tv_nsec = (long)(ns % 1000000000u);
        pthread_cond_timedwait(&bg_cond, &bg_lock, &ts);
        if (stopping)
            break;
        pthread_mutex_unlock(&bg_lock);
        bool work_left = decay_every_arena();
        pthread_mutex_lock(&bg_lock);
        if (started_automatically && !work_left && !stopping && idle_until_work())
            break;
    }
    pthread_mutex_unlock(&bg_lock);
    return NULL;
}

void background_request_at_start(void)
{
    __atomic_store_n(&wanted, true, __ATOMIC_RELAXED);
    __atomic_store_n(&background_pending, true, __ATOMIC_RELAXED);
}

void background_request_when_threaded(void)
{
    auto_waiting = true;
    __atomic_store_n(&background_pending, true, __ATOMIC_RELAXED);
}

void background_maybe_start(void)
{
    /* Automatic mode starts the thread in a process that has threads;
     * until then allocation slow paths pay these tests (no lock, no
     * store), and background_pending stays set. Only allocation slow
     * paths start it: glibc frees thread stacks' TLS with its stack-cache
     * lock held, which pthread_create takes (a start from free deadlocked
     * pthread_join: review_r9_cap_reservation_chain). */
    bool explicit_request = __atomic_load_n(&wanted, __ATOMIC_RELAXED);
    if (!explicit_request && (process_single_threaded() || forked_here))
        return;
    /* No cancellation point runs under bg_lock here, but a caller
     * cancelled in pthread_create's setup must not leave it held. */
    int cancel_state;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
    pthread_mutex_lock(&bg_lock);
    if (auto_waiting && !wanted) {
        __atomic_store_n(&wanted, true, __ATOMIC_RELAXED);
        started_automatically = true;
        auto_waiting = false;
    }
    bool start = wanted && !running;
    __atomic_store_n(&background_pending, false, __ATOMIC_RELAXED);
    if (start) {
        stopping = false;
        running = background_create() == 0;
    }
    pthread_mutex_unlock(&bg_lock);
    pthread_setcancelstate(cancel_state, NULL);
}

int background_set(bool on)
{
    /* In fork's prepare window this thread holds bg_lock, and no thread
     * may be started or joined (mutex.h). */
    if (mutex_all_held_here)
        return EAGAIN;
    if (on_background_thread)
        return EBUSY;
    /* pthread_join and the wait for another caller's join are
     * cancellation points: a caller cancelled there would leave bg_lock
     * held, or the thread stopping and never joined */
    int cancel_state;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
    pthread_mutex_lock(&bg_lock);
    __atomic_store_n(&wanted, on, __ATOMIC_RELAXED);
    started_automatically = auto_waiting = false;   /* the program decided */
    /* One caller stops the thread and joins it (a thread joined twice is
     * undefined: it hung); another that switches it off meanwhile
     * returns once it is joined, like the one that joins. */
    bool join = !on && running && !stopping;
    if (join) {
        stopping = true;
        pthread_cond_signal(&bg_cond);
    } else if (!on) {
        while (stopping)
            pthread_cond_wait(&bg_stopped, &bg_lock);
    }
    pthread_mutex_unlock(&bg_lock);
    bool restart = false;
    if (join) {
        pthread_join(thread, NULL);
        pthread_mutex_lock(&bg_lock);
        running = false;
        stopping = false;
        /* switched on again while it stopped: that caller found it
         * running and left the start to this one */
        restart = wanted;
        pthread_cond_broadcast(&bg_stopped);
        pthread_mutex_unlock(&bg_lock);
    }
    if (on || restart)
        background_maybe_start();
    pthread_setcancelstate(cancel_state, NULL);
    return 0;
}

bool background_enabled(void)
{
    if (mutex_all_held_here)   /* fork's prepare window: bg_lock is ours already */
        return wanted && running;
    pthread_mutex_lock(&bg_lock);
    bool on = wanted && running;
    pthread_mutex_unlock(&bg_lock);
    return on;
}

void background_prefork(void) { pthread_mutex_lock(&bg_lock); }
void background_postfork_parent(void) { pthread_mutex_unlock(&bg_lock); }

void background_postfork_child(void)
{
    pthread_mutex_init(&bg_lock, NULL);
    pthread_cond_init(&bg_cond, NULL);
    pthread_cond_init(&bg_stopped, NULL);
    running = false;   /* threads do not survive fork: restart on demand */
    stopping = false;
    on_background_thread = false;   /* forked from a callback it ran: the child's only thread */
    forked_here = true;
    if (started_automatically) {   /* the child has one thread: wait for a second again */
        __atomic_store_n(&wanted, false, __ATOMIC_RELAXED);
        started_automatically = false;
        auto_waiting = true;
    }
    __atomic_store_n(&background_pending, wanted || auto_waiting, __ATOMIC_RELAXED);
}
