/*
 * mutex.h - the lock every arena, bin and global table uses: a pthread
 * mutex that counts acquisitions and, only when it had to wait, how often
 * and for how long (clock reads happen on the contended path alone).
 *
 * mutex_lock always takes the pthread mutex. The hot locked paths (bin
 * fill and flush, slabs, large blocks) use mutex_lock_elidable instead:
 * while the process has one thread (glibc's __libc_single_threaded, the
 * flag glibc's own malloc uses for the same purpose) it takes nothing, so
 * single-threaded programs pay no atomic there. Whether an acquisition
 * was elided is decided per acquisition and returned to the caller, who
 * hands it back to mutex_unlock_elidable: no shared state records it, so
 * another thread's lock or unlock of the same mutex can never act on this
 * caller's decision. An elided critical section is only exclusive because
 * no second thread can start inside it: dpmalloc never creates a thread
 * and never calls user code while it holds a lock.
 * Owns: lock statistics. May call: pthreads, os_now_ns.
 */
#ifndef DPM_MUTEX_H
#define DPM_MUTEX_H

#include "util.h"
#include <pthread.h>
#if defined(__has_include)
#if __has_include(<sys/single_threaded.h>)
#include <sys/single_threaded.h>
#define DPM_HAVE_SINGLE_THREADED 1
#endif
#endif

typedef struct dpm_mutex {
    pthread_mutex_t lock;
    uint64_t n_acquired;       /* written under the lock */
    uint64_t n_contended;
    uint64_t wait_ns_total;
    uint64_t wait_ns_max;
} dpm_mutex_t;

#define DPM_MUTEX_INITIALIZER {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0}

typedef struct mutex_stats {
    uint64_t n_acquired, n_contended, wait_ns_total, wait_ns_max;
} mutex_stats_t;

void mutex_init(dpm_mutex_t *m);
/* A fresh lock in a fork child; the statistics are kept. */
void mutex_reinit(dpm_mutex_t *m);
void mutex_lock_contended(dpm_mutex_t *m);
/* Adds m's figures into out (read racily: stats, not synchronisation). */
void mutex_stats_add(const dpm_mutex_t *m, mutex_stats_t *out);
/* Adds one set of figures into another. */
void mutex_stats_merge(const mutex_stats_t *in, mutex_stats_t *out);

DPM_INLINE bool process_single_threaded(void)
{
#ifdef DPM_HAVE_SINGLE_THREADED
    return __libc_single_threaded != 0;
#else
    return false;
#endif
}

DPM_INLINE void mutex_count_acquired(dpm_mutex_t *m)
{
#if DPM_STATS
    /* Under the lock, so no RMW is needed; an atomic store because stats
     * read it from other threads. */
    __atomic_store_n(&m->n_acquired, m->n_acquired + 1, __ATOMIC_RELAXED);
#else
    (void)m;
#endif
}

/* Set in the thread that runs fork's prepare handler once it holds every
 * allocator lock, until the parent or child handler: other libraries'
 * prepare handlers that run after dpmalloc's (registered before it
 * initialised) may allocate in that thread, which already owns every lock
 * exclusively, so its lock operations are nothing (init.c). */
extern __thread bool mutex_all_held_here;

/* mutex_lock if the lock is free; false (and nothing done) if not. */
DPM_INLINE bool mutex_trylock(dpm_mutex_t *m)
{
    if (unlikely(mutex_all_held_here))
        return true;
    if (pthread_mutex_trylock(&m->lock) != 0)
        return false;
    mutex_count_acquired(m);
    return true;
}

DPM_INLINE void mutex_lock(dpm_mutex_t *m)
{
    if (unlikely(mutex_all_held_here))
        return;
    if (unlikely(pthread_mutex_trylock(&m->lock) != 0))
        mutex_lock_contended(m);
    mutex_count_acquired(m);
}

DPM_INLINE void mutex_unlock(dpm_mutex_t *m)
{
    if (likely(!mutex_all_held_here))
        pthread_mutex_unlock(&m->lock);
}

/* How the caller holds an elidable lock: true if nothing was taken. */
typedef bool lock_elided_t;

/* mutex_lock_elidable for a lock whose acquisitions nobody reports: an
 * elided one touches nothing, not even the lock's line. */
DPM_INLINE lock_elided_t mutex_lock_elidable_uncounted(dpm_mutex_t *m)
{
    if (likely(process_single_threaded()) || unlikely(mutex_all_held_here))
        return true;
    if (unlikely(pthread_mutex_trylock(&m->lock) != 0))
        mutex_lock_contended(m);
    return false;
}

DPM_INLINE lock_elided_t mutex_lock_elidable(dpm_mutex_t *m)
{
    lock_elided_t elided = mutex_lock_elidable_uncounted(m);
    mutex_count_acquired(m);
    return elided;
}

DPM_INLINE void mutex_unlock_elidable(dpm_mutex_t *m, lock_elided_t elided)
{
    if (!elided)
        pthread_mutex_unlock(&m->lock);
}

#endif
