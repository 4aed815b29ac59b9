/*
 * base.c - metadata allocator (see base.h). Chunks of 2 MiB are mapped as
 * needed; a request larger than a chunk gets its own mapping.
 */
#include "base.h"
#include "memlimit.h"
#include "mutex.h"
#include "os.h"

#include <errno.h>
#include <string.h>

#define BASE_CHUNK ((size_t)2 << 20)
#define POOL_BATCH 64

static dpm_mutex_t base_lock = DPM_MUTEX_INITIALIZER;
static uintptr_t bump_cur, bump_end;
static size_t mapped_total;

/* checked: the mapping that grows the metadata is charged against the
 * memory limit first, or the call fails (NULL) at the limit. */
static void *alloc_meta(size_t size, size_t align, bool checked)
{
    size = round_up(size, 16);
    if (size > BASE_CHUNK / 4) {
        size_t bytes = round_up(size, PAGE);
        if (checked && !memlimit_try_charge(bytes)) {
            errno = ENOMEM;
            return NULL;
        }
        void *big = os_map_aligned(bytes, PAGE);
        if (big != NULL) {
            __atomic_fetch_add(&mapped_total, bytes, __ATOMIC_RELAXED);
            if (!checked)
                memlimit_force_charge(bytes);
        } else if (checked) {
            memlimit_uncharge(bytes);
        }
        return big;
    }
    lock_elided_t held = mutex_lock_elidable_uncounted(&base_lock);
    uintptr_t at = (bump_cur + align - 1) & ~(uintptr_t)(align - 1);
    if (bump_cur == 0 || at + size > bump_end) {
        if (checked && !memlimit_try_charge(BASE_CHUNK)) {
            mutex_unlock_elidable(&base_lock, held);
            errno = ENOMEM;
            return NULL;
        }
        void *chunk = os_map_aligned(BASE_CHUNK, PAGE);
        if (chunk == NULL) {
            if (checked)
                memlimit_uncharge(BASE_CHUNK);
            mutex_unlock_elidable(&base_lock, held);
            return NULL;
        }
        __atomic_fetch_add(&mapped_total, BASE_CHUNK, __ATOMIC_RELAXED);
        /* other metadata is never refused at the memory limit (the
         * structures it holds describe memory already charged, or let a
         * purge run): counted, as a whole chunk, from its mapping */
        if (!checked)
            memlimit_force_charge(BASE_CHUNK);
        bump_cur = (uintptr_t)chunk;
        bump_end = bump_cur + BASE_CHUNK;
        at = (bump_cur + align - 1) & ~(uintptr_t)(align - 1);
    }
    bump_cur = at + size;
    mutex_unlock_elidable(&base_lock, held);
    return (void *)at;
}

void *base_alloc(size_t size, size_t align) { return alloc_meta(size, align, false); }

void *base_alloc_checked(size_t size, size_t align) { return alloc_meta(size, align, true); }

size_t base_mapped_bytes(void) { return __atomic_load_n(&mapped_total, __ATOMIC_RELAXED); }

void base_prefork(void) { mutex_lock(&base_lock); }
void base_postfork_parent(void) { mutex_unlock(&base_lock); }
void base_postfork_child(void) { mutex_init(&base_lock); }

void pool_init(pool_t *p, size_t obj_size)
{
    *p = (pool_t){.obj_size = round_up(obj_size, 16)};
}

/* Carves POOL_BATCH more objects, growing the stack first so that every
 * object has a slot (old stacks stay behind as metadata: together less
 * than the current one). */
static bool pool_refill(pool_t *p)
{
    size_t nobjs = p->nobjs + POOL_BATCH;
    if (nobjs > p->cap) {
        size_t cap = p->cap * 2 > nobjs ? p->cap * 2 : nobjs;
        void **stack = base_alloc(cap * sizeof(void *), CACHELINE);
        if (stack == NULL)
            return false;
        if (p->nfree != 0)
            memcpy(stack, p->stack, p->nfree * sizeof(void *));
        p->stack = stack;
        p->cap = cap;
    }
    char *batch = base_alloc(p->obj_size * POOL_BATCH, CACHELINE);
    if (batch == NULL)
        return false;
    /* lowest address on top: a fresh batch is handed out in address order */
    for (size_t i = POOL_BATCH; i-- > 0;)
        p->stack[p->nfree++] = batch + i * p->obj_size;
    p->nobjs += POOL_BATCH;
    return true;
}

void *pool_get(pool_t *p)
{
    if (p->nfree == 0 && !pool_refill(p))
        return NULL;
    void *obj = p->stack[--p->nfree];
    p->live++;
    if (p->nfree >= POOL_LOOKAHEAD) {
        const char *ahead = p->stack[p->nfree - POOL_LOOKAHEAD];
        __builtin_prefetch(ahead, 1);
        __builtin_prefetch(ahead + CACHELINE, 1);
    }
    return obj;
}

void pool_put(pool_t *p, void *obj)
{
    dpm_assert(p->nfree < p->nobjs);
    p->stack[p->nfree++] = obj;
    p->live--;
}

/* For dpmalloc-stat (anchor.h): where the metadata counter lives. */
extern const size_t *const anchor_ref_metadata_bytes;
const size_t *const anchor_ref_metadata_bytes = &mapped_total;
