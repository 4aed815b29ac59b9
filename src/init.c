/*
 * init.c - bringing dpmalloc up: options, size classes, the first arena,
 * the thread-exit key and fork handlers.
 *
 * Initialisation runs in a library constructor, or earlier at the first
 * allocation if that comes first (another library's constructor, the
 * dynamic loader). Either way it happens before the program's own
 * constructors, so dpmalloc's fork handlers are registered before any the
 * program registers: glibc runs prepare handlers in reverse order of
 * registration, so the program's handlers run before dpmalloc takes its
 * locks and may allocate. Initialisation calls nothing that allocates
 * until g.initialized is set. A failed initialisation is final: later
 * allocations fail at once with ENOMEM, and its warnings are printed once.
 */
#include "conf.h"
#include "error.h"
#include "global.h"
#include "os.h"
#include "background.h"
#include "stats.h"
#include "types.h"
#include "numa.h"
#include "cpu_cache.h"
#include "large_cache.h"
#include "typed_cache.h"
#include "guarded.h"
#include "prof.h"
#include "limit_reclaim.h"
#include "memlimit.h"
#include "zero_blocks.h"
#include "fault.h"
#include "quarantine.h"
#include "anchor_ref.h"

#include <sys/auxv.h>
#include <sys/random.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread bool init_running_here;
static bool init_failed;

/* ---- fork ---------------------------------------------------------------
 *
 * Lock order at fork: glibc's list of open FILEs, then every dpmalloc lock
 * (bg_lock, stats, types, thread caches, CPU and transfer caches, arenas
 * and bins, page map, base).
 * glibc's fork takes that list lock itself, but only after the prepare
 * handlers; a thread in fflush(NULL) holds it while it waits for a FILE
 * whose holder (getline, a first buffered write) is in malloc. If dpmalloc
 * held its locks before the list lock, that malloc would wait for the
 * forking thread, which waits for fflush: a cycle. Taking the list lock
 * first gives glibc's own order (its malloc locks come after the list lock
 * too). The lock is recursive, so glibc's own acquisition still succeeds;
 * in the parent glibc releases its level before the parent handlers run,
 * in the child it re-initialises the lock before the child handlers run
 * (only when it took it; resetting it again here is harmless and right
 * either way). Weak references: another libc simply has no such lock.
 *
 * While the process has one thread, fork takes no lock at all, as glibc's
 * malloc does: nothing can hold one except the code fork interrupted (a
 * fork from a signal handler), and taking it would deadlock.
 *
 * prefork decides once and records the decision; both postfork handlers
 * follow the record and never test a condition again, so every lock taken
 * is released (parent) or re-initialised (child) exactly once. One record
 * suffices: in a multi-threaded process glibc serialises forks (its
 * atfork lock), and a fork nested in a signal handler happens only in a
 * single-threaded process, where both decisions are "nothing".
 */
extern void _IO_list_lock(void) __attribute__((weak));
extern void _IO_list_unlock(void) __attribute__((weak));
extern void _IO_list_resetlock(void) __attribute__((weak));

/* What this thread's running fork's prefork did. Per thread: the parent
 * and child handlers run in the forking thread, and a race detector,
 * blind to glibc's serialisation of forks, sees no shared write. */
static __thread bool fork_locked;

static bool fork_must_lock(void)
{
    return __atomic_load_n(&g.initialized, __ATOMIC_ACQUIRE) && !process_single_threaded();
}

/* The secret of secure mode's slot canaries (canary.h): from the kernel,
 * else from the 16 random bytes it gave the process at exec. */
static uint64_t canary_secret(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) != (ssize_t)sizeof v) {
        const uint64_t *at = (const uint64_t *)getauxval(AT_RANDOM);
        v = at != NULL ? at[0] ^ at[1] : (uint64_t)(uintptr_t)&v * 0x9e3779b97f4a7c15u;
    }
    return v;
}

static void prefork(void)
{
    fork_locked = fork_must_lock();
    if (!fork_locked)
        return;
    if (_IO_list_lock != NULL)
        _IO_list_lock();
    prof_prefork();
    background_prefork();
    stats_prefork();
    types_prefork();
    typed_caches_prefork();
    tcaches_prefork();
    cpu_caches_prefork();
    large_caches_prefork();
    arenas_prefork();
    pages_prefork();
    base_prefork();
    mutex_all_held_here = true;
}

static void postfork_parent(void)
{
    if (!fork_locked)
        return;
    mutex_all_held_here = false;
    base_postfork_parent();
    pages_postfork_parent();
    arenas_postfork_parent();
    large_caches_postfork_parent();
    cpu_caches_postfork_parent();
    tcaches_postfork_parent();
    typed_caches_postfork_parent();
    types_postfork_parent();
    stats_postfork_parent();
    background_postfork_parent();
    prof_postfork_parent();
    if (_IO_list_unlock != NULL)
        _IO_list_unlock();
}

static void postfork_child(void)
{
    if (!fork_locked)
        return;
    mutex_all_held_here = false;
    base_postfork_child();
    pages_postfork_child();
    arenas_postfork_child();
    large_caches_postfork_child();
    cpu_caches_postfork_child();
    tcaches_postfork_child();
    numa_postfork_child();
    typed_caches_postfork_child();
    types_postfork_child();
    stats_postfork_child();
    background_postfork_child();
    prof_postfork_child();
    if (_IO_list_resetlock != NULL)
        _IO_list_resetlock();
}

/* ---- initialisation ----------------------------------------------------- */

/* reserve_mb: the reserve goes to arena 0 (the first thread's, usually
 * main's), or with numa:true that much to every node's arena. */
static void reserve_at_start(void)
{
    if (opt.reserve_mb == 0)
        return;
    size_t bytes = opt.reserve_mb << 20;
    int err = 0;
    if (opt.numa) {
        for (unsigned n = 0; n < numa_nnodes() && err == 0; n++) {
            if (!numa_node_online(n))
                continue;
            arena_t *a = numa_node_arena(n);
            err = a != NULL ? numa_reserve(a, bytes, (int)n, 0) : ENOMEM;
        }
    } else {
        err = numa_reserve(arena_get(0), bytes, -1, 0);
    }
    if (err != 0)
        dpm_warn3("reserve_mb: could not map and prefault the reserve: ", strerror(err), NULL);
}

static bool init_locked(void)
{
    conf_init();
    /* before the first mapping: metadata and arena 0 count too */
    memlimit_set(opt.memory_limit_mb << 20);
    memlimit_soft_set(opt.memory_soft_limit_mb << 20);
    limit_reclaim_init();
    os_init();
    numa_init();
    g.ncpus = os_ncpus();
    narenas_auto = opt.narenas != 0 ? opt.narenas : 4 * g.ncpus;
    if (narenas_auto > OPT_NARENAS_MAX)
        narenas_auto = OPT_NARENAS_MAX;
    /* junk and zero fill every block on its way in and out, and secure
     * checks every free against its slab at once: their blocks take the
     * slow paths, which thread caches would skip. */
    bool caching = opt.tcache && !opt.junk && !opt.zero;
    g.tcache_nclasses = caching && !opt.secure ? tcache_classes_for(opt.tcache_max) : 0;
    /* secure mode's blocks pass the CPU caches only through its own slow
     * paths (the quarantine on the way in); the thread caches' fast paths
     * would skip its checks, so without CPU caches it caches nothing */
    unsigned secure_classes = caching && opt.secure ? tcache_classes_for(opt.tcache_max) : 0;
    if (opt.secure) {
        opt.junk = true;   /* freed blocks are poisoned: use-after-free shows */
        g.slot_canary = canary_secret();
        quarantine_init();
        (void)zero_blocks_init();   /* without address space, size 0 gets ordinary blocks */
        /* its pages without access explain their faults: a guard page
         * first (an underflow of the next block; a parked block's guard
         * page, part of its run, is left to the quarantine) */
        fault_explain_with(zero_block_explain);
        fault_explain_with(arena_guard_explain);
        fault_explain_with(quarantine_explain);
    }
    if (opt.guard_sample != 0)
        (void)guarded_init(opt.guard_sample);   /* without address space nothing is sampled */
    if (opt.prof)
        (void)prof_init();   /* with a warning, profiling stays off without memory */
    tcache_fill_lookup();
    tcache_init_bin_tags();
    /* (secure mode leaves node arenas uncached: no node bins) */
    bool cpu_caches = cpu_caches_init(opt.secure ? secure_classes : g.tcache_nclasses, !opt.secure);
    g.secure_nclasses = cpu_caches ? secure_classes : 0;
    if (!cpu_caches && prof_on) {
        /* a thread cache's pops would go uncounted (prof.h): profiled
         * threads without CPU caches take the counting slow paths */
        g.tcache_nclasses = 0;
        tcache_init_bin_tags();
    }
    tcache_set_small_slots_lazy(cpu_caches);
    large_caches_init();
    if (pthread_key_create(&g.thread_key, tcache_thread_exit) != 0)
        return false;
    if (arena_get(0) == NULL) {
        pthread_key_delete(g.thread_key);
        return false;
    }
    __atomic_store_n(&g.initialized, true, __ATOMIC_RELEASE);
    /* May allocate: only now that the heap works. */
    pthread_atfork(prefork, postfork_parent, postfork_child);
    prof_prime();   /* takes the loader's lock: not at a sample (prof.h) */
    guarded_prime();
    if (opt.stats_print)
        atexit(stats_print_at_exit);
    if (prof_on && (opt.prof_final || opt.prof_leak))
        atexit(prof_at_exit);
    if (opt.background_thread)
        background_request_at_start();
    else if (opt.background_thread_auto)
        background_request_when_threaded();
    reserve_at_start();
    return true;
}

bool dpm_init_slow(void)
{
    if (__atomic_load_n(&g.initialized, __ATOMIC_ACQUIRE))
        return true;
    /* An allocation from inside initialisation (a libc call that allocates)
     * fails instead of deadlocking on init_lock. */
    if (init_running_here)
        return false;
    /* Never retried: the same options and limits would fail the same way,
     * after warning about the options again. */
    if (__atomic_load_n(&init_failed, __ATOMIC_ACQUIRE))
        return false;
    pthread_mutex_lock(&init_lock);
    bool ok = g.initialized;
    if (!ok && !init_failed) {
        init_running_here = true;
        ok = init_locked();
        init_running_here = false;
        if (!ok)
            __atomic_store_n(&init_failed, true, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&init_lock);
    return ok;
}

extern const struct dpm_anchor *const anchor_keep;

/* 101: the first priority not reserved to the C implementation, so this
 * runs before the constructors of a program dpmalloc is linked into
 * (preloaded, it runs before the program's anyway). */
__attribute__((constructor(101))) static void init_at_load(void)
{
    /* the anchor reached from code a link always keeps (.init_array):
     * -Wl,--gc-sections and LTO drop unreferenced data (dpmalloc-stat) */
    __asm__ volatile("" : : "r"(anchor_keep));
    (void)dpm_ready();
}

/* Every program that links dpmalloc links init.o (dpm_ready's slow path):
 * this reference takes the anchor of dpmalloc-stat (anchor.c) out of
 * libdpmalloc.a with it. Data only: nothing reads it. */
const struct dpm_anchor *const anchor_keep = &dpmalloc_stat_anchor;
