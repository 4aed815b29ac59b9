/*
 * mutex.c - the contended half of dpm_mutex (see mutex.h).
 */
#include "mutex.h"
#include "os.h"

__thread bool mutex_all_held_here;

void mutex_init(dpm_mutex_t *m)
{
    mutex_reinit(m);
    m->n_acquired = m->n_contended = m->wait_ns_total = m->wait_ns_max = 0;
}

void mutex_reinit(dpm_mutex_t *m)
{
    pthread_mutex_init(&m->lock, NULL);
}

void mutex_lock_contended(dpm_mutex_t *m)
{
    uint64_t t0 = os_now_ns();
    pthread_mutex_lock(&m->lock);
    uint64_t waited = os_now_ns() - t0;
    __atomic_store_n(&m->n_contended, m->n_contended + 1, __ATOMIC_RELAXED);
    __atomic_store_n(&m->wait_ns_total, m->wait_ns_total + waited, __ATOMIC_RELAXED);
    if (waited > m->wait_ns_max)
        __atomic_store_n(&m->wait_ns_max, waited, __ATOMIC_RELAXED);
}

void mutex_stats_add(const dpm_mutex_t *m, mutex_stats_t *out)
{
    out->n_acquired += __atomic_load_n(&m->n_acquired, __ATOMIC_RELAXED);
    out->n_contended += __atomic_load_n(&m->n_contended, __ATOMIC_RELAXED);
    out->wait_ns_total += __atomic_load_n(&m->wait_ns_total, __ATOMIC_RELAXED);
    uint64_t mx = __atomic_load_n(&m->wait_ns_max, __ATOMIC_RELAXED);
    if (mx > out->wait_ns_max)
        out->wait_ns_max = mx;
}

void mutex_stats_merge(const mutex_stats_t *in, mutex_stats_t *out)
{
    out->n_acquired += in->n_acquired;
    out->n_contended += in->n_contended;
    out->wait_ns_total += in->wait_ns_total;
    if (in->wait_ns_max > out->wait_ns_max)
        out->wait_ns_max = in->wait_ns_max;
}
