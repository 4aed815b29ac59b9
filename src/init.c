/*
 * init.c - bringing dpmalloc up: options, size classes, the first arena,
 * the thread-exit key and fork handlers. Runs on the first allocation of
 * the process (possibly before main, possibly from the dynamic loader), so
 * it calls nothing that allocates until g.initialized is set.
 */
#include "conf.h"
#include "error.h"
#include "global.h"
#include "os.h"
#include "background.h"
#include "stats.h"
#include "tcache.h"
#include "types.h"

#include <stdlib.h>

global_t g;
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread bool init_running_here;

static void prefork(void)
{
    if (!g.initialized)
        return;
    background_prefork();
    stats_prefork();
    types_prefork();
    tcaches_prefork();
    arenas_prefork();
    pages_prefork();
    base_prefork();
}

static void postfork_parent(void)
{
    if (!g.initialized)
        return;
    base_postfork_parent();
    pages_postfork_parent();
    arenas_postfork_parent();
    tcaches_postfork_parent();
    types_postfork_parent();
    stats_postfork_parent();
    background_postfork_parent();
}

static void postfork_child(void)
{
    if (!g.initialized)
        return;
    base_postfork_child();
    pages_postfork_child();
    arenas_postfork_child();
    tcaches_postfork_child();
    types_postfork_child();
    stats_postfork_child();
    background_postfork_child();
}

static bool init_locked(void)
{
    conf_init();
    os_init();
    g.ncpus = os_ncpus();
    narenas_auto = opt.narenas != 0 ? opt.narenas : 4 * g.ncpus;
    if (narenas_auto > MAX_ARENAS)
        narenas_auto = MAX_ARENAS;
    /* junk and zero fill every block on its way in and out, and secure
     * checks every free against its slab at once: their blocks take the
     * slow paths, which thread caches would skip. */
    g.tcache_nclasses =
        opt.tcache && !opt.junk && !opt.zero && !opt.secure ? tcache_classes_for(opt.tcache_max) : 0;
    if (opt.secure)
        opt.junk = true;   /* freed blocks are poisoned: use-after-free shows */
    tcache_init_free_key();
    if (pthread_key_create(&g.thread_key, tcache_thread_exit) != 0)
        return false;
    if (arena_get(0) == NULL)
        return false;
    __atomic_store_n(&g.initialized, true, __ATOMIC_RELEASE);
    /* May allocate: only now that the heap works. */
    pthread_atfork(prefork, postfork_parent, postfork_child);
    if (opt.stats_print)
        atexit(stats_print_at_exit);
    if (opt.background_thread)
        background_request_at_start();
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
    pthread_mutex_lock(&init_lock);
    bool ok = g.initialized;
    if (!ok) {
        init_running_here = true;
        ok = init_locked();
        init_running_here = false;
    }
    pthread_mutex_unlock(&init_lock);
    return ok;
}
