/*
 * exchange.c - slots through which threads hand blocks to each other, so
 * that blocks are freed and reallocated by threads other than the one
 * that allocated them (remote frees into other threads' caches, frees of
 * another arena's blocks). One mutex: the exchange is a small part of
 * the operations and the fuzzer's own locking is not under test.
 */
#include "fuzz.h"

#define XCHG_SLOTS 128

static struct {
    pthread_mutex_t lock;
    bool used[XCHG_SLOTS];
    blk_t slot[XCHG_SLOTS];
} x = {.lock = PTHREAD_MUTEX_INITIALIZER};

void xchg_init(void)
{
    for (unsigned i = 0; i < XCHG_SLOTS; i++)
        x.used[i] = false;
}

bool xchg_give(uint64_t *rng, const blk_t *b, blk_t *out)
{
    unsigned i = (unsigned)rnd_below(rng, XCHG_SLOTS);
    pthread_mutex_lock(&x.lock);
    bool had = x.used[i];
    if (had)
        *out = x.slot[i];
    x.slot[i] = *b;
    x.used[i] = true;
    pthread_mutex_unlock(&x.lock);
    return had;
}

bool xchg_take(uint64_t *rng, blk_t *out)
{
    unsigned i = (unsigned)rnd_below(rng, XCHG_SLOTS);
    pthread_mutex_lock(&x.lock);
    bool had = x.used[i];
    if (had)
        *out = x.slot[i];
    x.used[i] = false;
    pthread_mutex_unlock(&x.lock);
    return had;
}

void xchg_sweep(bool (*fn)(blk_t *b, void *arg), void *arg)
{
    pthread_mutex_lock(&x.lock);
    for (unsigned i = 0; i < XCHG_SLOTS; i++)
        if (x.used[i] && fn(&x.slot[i], arg))
            x.used[i] = false;
    pthread_mutex_unlock(&x.lock);
}
