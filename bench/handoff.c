/*
 * handoff.c - a bounded queue of pointer batches between two threads that
 * blocks (mutex and condition variable) instead of spinning: a thread that
 * waits sleeps, so a workload that passes blocks between threads measures
 * the allocator and not how the scheduler treats a spinning thread when the
 * CPUs are shared. The lock is taken once per batch, not once per block.
 */
#define _GNU_SOURCE
#include <string.h>

#include "dpmbench.h"

void handoff_init(struct handoff *h)
{
    memset(h, 0, sizeof *h);
    pthread_mutex_init(&h->lock, NULL);
    pthread_cond_init(&h->filled, NULL);
    pthread_cond_init(&h->drained, NULL);
}

void handoff_destroy(struct handoff *h)
{
    pthread_mutex_destroy(&h->lock);
    pthread_cond_destroy(&h->filled);
    pthread_cond_destroy(&h->drained);
}

/* Waits while every slot is full, then queues n (<= HANDOFF_BATCH) pointers. */
void handoff_put(struct handoff *h, void *const *p, int n)
{
    pthread_mutex_lock(&h->lock);
    while (h->head - h->tail == HANDOFF_DEPTH)
        pthread_cond_wait(&h->drained, &h->lock);
    unsigned slot = h->head % HANDOFF_DEPTH;
    memcpy(h->batch[slot], p, (size_t)n * sizeof *p);
    h->count[slot] = n;
    h->head++;
    pthread_cond_signal(&h->filled);
    pthread_mutex_unlock(&h->lock);
}

/* No more batches: a waiting handoff_get returns 0. */
void handoff_close(struct handoff *h)
{
    pthread_mutex_lock(&h->lock);
    h->closed = 1;
    pthread_cond_signal(&h->filled);
    pthread_mutex_unlock(&h->lock);
}

/* Waits for a batch and copies it to out; returns its size, 0 once the
 * queue is closed and empty. */
int handoff_get(struct handoff *h, void **out)
{
    pthread_mutex_lock(&h->lock);
    while (h->head == h->tail && !h->closed)
        pthread_cond_wait(&h->filled, &h->lock);
    int n = 0;
    if (h->head != h->tail) {
        unsigned slot = h->tail % HANDOFF_DEPTH;
        n = h->count[slot];
        memcpy(out, h->batch[slot], (size_t)n * sizeof *out);
        h->tail++;
        pthread_cond_signal(&h->drained);
    }
    pthread_mutex_unlock(&h->lock);
    return n;
}
