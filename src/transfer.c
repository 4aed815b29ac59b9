/*
 * transfer.c - the transfer caches (see transfer.h). Each class's lock is
 * held only to copy pointers: blocks go home (arena_bin_flush, which may
 * run a page source's callback) after it is released.
 */
#include "transfer.h"
#include "anchor_ref.h"
#include "base.h"
#include "os.h"

typedef struct transfer_class {
    dpm_mutex_t lock;
    void **slots;          /* [0, n) hold blocks; the last put on top */
    unsigned n, cap;
    uint32_t ops, ops_seen; /* puts and takes, and their count at the last idle drain */
} CACHE_ALIGNED transfer_class_t;

static transfer_class_t classes[TRANSFER_NSTACKS];

bool transfer_init(const unsigned caps[TRANSFER_NSTACKS])
{
    for (unsigned c = 0; c < TRANSFER_NSTACKS; c++) {
        transfer_class_t *t = &classes[c];
        mutex_init(&t->lock);
        t->n = 0;
        t->cap = caps[c];
        if (t->cap != 0 && (t->slots = base_alloc(t->cap * sizeof(void *), CACHELINE)) == NULL)
            return false;
    }
    return true;
}

unsigned transfer_put(unsigned c, void *const *objs, unsigned n)
{
    transfer_class_t *t = &classes[c];
    if (t->cap == 0)
        return 0;
    lock_elided_t el = mutex_lock_elidable(&t->lock);
    unsigned room = t->cap - t->n, k = n < room ? n : room;
    for (unsigned i = 0; i < k; i++)
        t->slots[t->n + i] = objs[i];
    __atomic_store_n(&t->n, t->n + k, __ATOMIC_RELAXED);   /* read racily by stats */
    t->ops++;
    mutex_unlock_elidable(&t->lock, el);
    return k;
}

unsigned transfer_take(unsigned c, void **out, unsigned want)
{
    transfer_class_t *t = &classes[c];
    if (__atomic_load_n(&t->n, __ATOMIC_RELAXED) == 0)
        return 0;   /* most misses of an empty class pay no lock */
    lock_elided_t el = mutex_lock_elidable(&t->lock);
    unsigned k = want < t->n ? want : t->n;
    for (unsigned i = 0; i < k; i++)
        out[i] = t->slots[t->n - 1 - i];
    __atomic_store_n(&t->n, t->n - k, __ATOMIC_RELAXED);
    t->ops++;
    mutex_unlock_elidable(&t->lock, el);
    return k;
}

#define DRAIN_CHUNK 128   /* on the stack: see CPU_CHUNK (cpu_cache.h) */

size_t transfer_drain(bool idle_only)
{
    size_t bytes = 0;
    for (unsigned c = 0; c < TRANSFER_NSTACKS; c++) {
        transfer_class_t *t = &classes[c];
        if (__atomic_load_n(&t->n, __ATOMIC_RELAXED) == 0)
            continue;
        void *chunk[DRAIN_CHUNK];
        for (;;) {
            lock_elided_t el = mutex_lock_elidable(&t->lock);
            if (idle_only && t->ops != t->ops_seen) {
                t->ops_seen = t->ops;
                mutex_unlock_elidable(&t->lock, el);
                break;
            }
            unsigned k = t->n < DRAIN_CHUNK ? t->n : DRAIN_CHUNK;
            for (unsigned i = 0; i < k; i++)
                chunk[i] = t->slots[t->n - 1 - i];
            __atomic_store_n(&t->n, t->n - k, __ATOMIC_RELAXED);
            mutex_unlock_elidable(&t->lock, el);
            if (k == 0)
                break;
            bytes += (size_t)k * sc_size(transfer_stack_class(c));
            arena_bin_flush(chunk, k);
        }
    }
    return bytes;
}

size_t transfer_bytes(void)
{
    size_t bytes = 0;
    for (unsigned c = 0; c < TRANSFER_NSTACKS; c++)
        bytes += (size_t)__atomic_load_n(&classes[c].n, __ATOMIC_RELAXED) * sc_size(transfer_stack_class(c));
    return bytes;
}

size_t transfer_bound(void)
{
    size_t bytes = 0;
    for (unsigned c = 0; c < TRANSFER_NSTACKS; c++)
        bytes += (size_t)classes[c].cap * sc_size(transfer_stack_class(c));
    return bytes;
}

bool transfer_holds(const void *p, unsigned c)
{
    if (c >= TRANSFER_NSTACKS)
        return false;
    transfer_class_t *t = &classes[c];
    bool found = false;
    lock_elided_t el = mutex_lock_elidable(&t->lock);
    for (unsigned i = 0; i < t->n && !found; i++)
        found = t->slots[i] == p;
    mutex_unlock_elidable(&t->lock, el);
    return found;
}

void transfer_for_each_block(void (*fn)(const void *p, void *arg), void *arg)
{
    for (unsigned c = 0; c < TRANSFER_NSTACKS; c++) {
        transfer_class_t *t = &classes[c];
        if (__atomic_load_n(&t->n, __ATOMIC_RELAXED) == 0)
            continue;
        lock_elided_t el = mutex_lock_elidable(&t->lock);
        for (unsigned i = 0; i < t->n; i++)
            fn(t->slots[i], arg);
        mutex_unlock_elidable(&t->lock, el);
    }
}

void transfer_prefault(void)
{
    for (unsigned c = 0; c < TRANSFER_NSTACKS; c++)
        if (classes[c].cap != 0)
            os_populate(classes[c].slots, classes[c].cap * sizeof(void *));
}

void transfer_prefork(void)
{
    for (unsigned c = 0; c < TRANSFER_NSTACKS; c++)
        mutex_lock(&classes[c].lock);
}

void transfer_postfork_parent(void)
{
    for (unsigned c = 0; c < TRANSFER_NSTACKS; c++)
        mutex_unlock(&classes[c].lock);
}

void transfer_postfork_child(void)
{
    for (unsigned c = 0; c < TRANSFER_NSTACKS; c++)
        mutex_reinit(&classes[c].lock);
}

/* For dpmalloc-stat (anchor.h): where each stack's count is. */
extern const anchor_array_t anchor_ref_transfer;
const anchor_array_t anchor_ref_transfer = {classes, sizeof(transfer_class_t), offsetof(transfer_class_t, n),
                                            TRANSFER_NSTACKS};
