/*
 * mutex.h - the lock every arena, bin and global table uses: a pthread
 * mutex that counts acquisitions and, only when it had to wait, how often
 * and for how long (clock reads happen on the contended path alone).
 *
 * While the process has one thread (glibc's __libc_single_threaded, the
 * flag glibc's own malloc uses for the same purpose) a lock is only marked
 * taken, without an atomic: single-threaded programs pay no lock prefix on
 * the locked paths. The mark travels with the mutex, so an unlock always
 * matches its lock even if a thread was created in between (the flag only
 * flips inside pthread_create, which no critical section calls).
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
    bool elided;               /* taken while the process had one thread */
    uint64_t n_acquired;       /* written under the lock */
    uint64_t n_contended;
    uint64_t wait_ns_total;
    uint64_t wait_ns_max;
} dpm_mutex_t;

#define DPM_MUTEX_INITIALIZER {PTHREAD_MUTEX_INITIALIZER, false, 0, 0, 0, 0}

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

DPM_INLINE void mutex_lock(dpm_mutex_t *m)
{
    if (likely(process_single_threaded()))
        m->elided = true;
    else if (unlikely(pthread_mutex_trylock(&m->lock) != 0))
        mutex_lock_contended(m);
#if DPM_STATS
    /* Under the lock, so no RMW is needed; an atomic store because stats
     * read it from other threads. */
    __atomic_store_n(&m->n_acquired, m->n_acquired + 1, __ATOMIC_RELAXED);
#endif
}

/* mutex_lock if the lock is free; false (and nothing done) if not. */
DPM_INLINE bool mutex_trylock(dpm_mutex_t *m)
{
    if (likely(process_single_threaded()))
        m->elided = true;
    else if (pthread_mutex_trylock(&m->lock) != 0)
        return false;
#if DPM_STATS
    __atomic_store_n(&m->n_acquired, m->n_acquired + 1, __ATOMIC_RELAXED);
#endif
    return true;
}

DPM_INLINE void mutex_unlock(dpm_mutex_t *m)
{
    if (m->elided)
        m->elided = false;
    else
        pthread_mutex_unlock(&m->lock);
}

#endif
