/*
 * base.c - metadata allocator (see base.h). Chunks of 2 MiB are mapped as
 * needed; a request larger than a chunk gets its own mapping.
 */
#include "base.h"
#include "mutex.h"
#include "os.h"

#include <string.h>

#define BASE_CHUNK ((size_t)2 << 20)
#define POOL_BATCH 64

static dpm_mutex_t base_lock = DPM_MUTEX_INITIALIZER;
static uintptr_t bump_cur, bump_end;
static size_t mapped_total;

void *base_alloc(size_t size, size_t align)
{
    size = round_up(size, 16);
    if (size > BASE_CHUNK / 4) {
        void *big = os_map_aligned(round_up(size, PAGE), PAGE);
        if (big != NULL)
            __atomic_fetch_add(&mapped_total, round_up(size, PAGE), __ATOMIC_RELAXED);
        return big;
    }
    mutex_lock(&base_lock);
    uintptr_t at = (bump_cur + align - 1) & ~(uintptr_t)(align - 1);
    if (bump_cur == 0 || at + size > bump_end) {
        void *chunk = os_map_aligned(BASE_CHUNK, PAGE);
        if (chunk == NULL) {
            mutex_unlock(&base_lock);
            return NULL;
        }
        __atomic_fetch_add(&mapped_total, BASE_CHUNK, __ATOMIC_RELAXED);
        bump_cur = (uintptr_t)chunk;
        bump_end = bump_cur + BASE_CHUNK;
        at = (bump_cur + align - 1) & ~(uintptr_t)(align - 1);
    }
    bump_cur = at + size;
    mutex_unlock(&base_lock);
    return (void *)at;
}

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
