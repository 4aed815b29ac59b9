/*
 * typed_cache.c - the per-CPU stashes of typed blocks (see
 * typed_cache.h).
 */
#include "typed_cache.h"
#include "anchor_ref.h"
#include "base.h"
#include "error.h"
#include "rseq.h"
#include "tcache.h"
#include "types.h"

typedef struct typed_stash {
    dpm_mutex_t lock;
    uint32_t events;       /* takes and puts, under the lock (drain reads it) */
    uint32_t events_seen;  /* events at the last idle drain */
    uint8_t n[NSMALL];     /* blocks in slots[c] */
    void *slots[NSMALL][TYPED_STASH_SLOTS];
} CACHE_ALIGNED typed_stash_t;

/* stashes[cpu % TYPED_STASH_CPUS], made at the CPU's first use; written
 * once, under make_lock. */
static typed_stash_t *stashes[TYPED_STASH_CPUS];
static dpm_mutex_t make_lock = DPM_MUTEX_INITIALIZER;
static uint8_t cap_of[NSMALL];   /* 0 until the first stash is made */

static void caps_init(void)
{
    for (unsigned c = 0; c < NSMALL; c++) {
        size_t k = TYPED_STASH_BYTES / sc_size(c);
        cap_of[c] = (uint8_t)(k > TYPED_STASH_SLOTS ? TYPED_STASH_SLOTS : k < 2 ? 2 : k);
    }
}

/* The stash of the CPU the thread runs on (a hint: a thread moved since
 * uses another CPU's stash, under that stash's lock). NULL if there is no
 * memory for it. */
static typed_stash_t *stash_here(void)
{
    unsigned cpu = rseq_cpu_hint() % TYPED_STASH_CPUS;
    typed_stash_t *st = __atomic_load_n(&stashes[cpu], __ATOMIC_ACQUIRE);
    if (likely(st != NULL))
        return st;
    mutex_lock(&make_lock);
    st = stashes[cpu];
    if (st == NULL && (st = base_alloc(sizeof(*st), CACHELINE)) != NULL) {
        mutex_init(&st->lock);
        if (cap_of[0] == 0)
            caps_init();
        __atomic_store_n(&stashes[cpu], st, __ATOMIC_RELEASE);
    }
    mutex_unlock(&make_lock);
    return st;
}

void *typed_cache_take(arena_t *a, unsigned c)
{
    typed_stash_t *st = stash_here();
    if (st != NULL) {
        mutex_lock(&st->lock);
        st->events++;
        void *p = st->n[c] != 0 ? st->slots[c][--st->n[c]] : NULL;
        mutex_unlock(&st->lock);
        if (p != NULL) {
            tc_block_handed_out(p);
            return p;
        }
    }
    bin_t *bin = arena_special_bin(a, c, 0, true);
    if (bin == NULL)
        return NULL;
    /* half a stash's worth: the next allocations of the class find them */
    void *batch[TYPED_STASH_SLOTS / 2 + 1];
    unsigned want = st != NULL ? cap_of[c] / 2 + 1u : 1u;
    unsigned got = arena_bin_fill(bin, batch, want, NULL);
    if (got == 0)
        return NULL;
    unsigned kept = 1;
    if (got > 1) {
        mutex_lock(&st->lock);
        while (kept < got && st->n[c] < cap_of[c])
            st->slots[c][st->n[c]++] = batch[kept++];
        mutex_unlock(&st->lock);
    }
    if (kept < got)   /* frees on this CPU filled the stash meanwhile */
        arena_bin_flush(batch + kept, got - kept);
    tc_block_handed_out(batch[0]);
    return batch[0];
}

bool typed_cache_put(void *p, span_t *s, const char *call)
{
    const bin_t *bin = s->bin;
    dpm_assert(bin->typed && bin->phase == 0 && bin->size_class < NSMALL && typed_cache_takes(s->arena));
    typed_stash_t *st = stash_here();
    if (st == NULL)
        return false;
    uint16_t type = __atomic_exchange_n(&s->type_ids[span_index_of(s, (uintptr_t)p)], 0, __ATOMIC_RELAXED);
    if (type == 0)
        dpm_misuse(call, p, "double free of");
    type_count_free(type, s->objsize);
    unsigned c = bin->size_class;
    void *out[TYPED_STASH_SLOTS];
    unsigned nout = 0;
    mutex_lock(&st->lock);
    st->events++;
    if (st->n[c] == cap_of[c]) {
        /* full: the older half goes home, so the stash keeps the blocks
         * most recently touched */
        nout = cap_of[c] / 2;
        for (unsigned i = 0; i < nout; i++)
            out[i] = st->slots[c][i];
        for (unsigned i = nout; i < st->n[c]; i++)
            st->slots[c][i - nout] = st->slots[c][i];
        st->n[c] = (uint8_t)(st->n[c] - nout);
    }
    st->slots[c][st->n[c]++] = p;
    mutex_unlock(&st->lock);
    if (nout != 0)
        arena_bin_flush(out, nout);
    return true;
}

/* Takes every block out of st into out (room for a stash's worth). */
static unsigned take_all(typed_stash_t *st, void **out, size_t *bytes)
{
    unsigned k = 0;
    for (unsigned c = 0; c < NSMALL; c++) {
        for (unsigned i = 0; i < st->n[c]; i++)
            out[k++] = st->slots[c][i];
        *bytes += st->n[c] * sc_size(c);
        st->n[c] = 0;
    }
    return k;
}

size_t typed_caches_drain(bool idle_only)
{
    size_t bytes = 0;
    void *out[NSMALL * TYPED_STASH_SLOTS];
    for (unsigned cpu = 0; cpu < TYPED_STASH_CPUS; cpu++) {
        typed_stash_t *st = __atomic_load_n(&stashes[cpu], __ATOMIC_ACQUIRE);
        if (st == NULL)
            continue;
        mutex_lock(&st->lock);
        unsigned k = 0;
        /* only the background thread passes idle_only: one writer of events_seen */
        if (!idle_only || st->events == st->events_seen)
            k = take_all(st, out, &bytes);
        st->events_seen = st->events;
        mutex_unlock(&st->lock);
        if (k != 0)
            arena_bin_flush(out, k);
    }
    return bytes;
}

/* Calls fn on every CPU's stash under its lock (statistics). */
static void for_each_stash(void (*fn)(typed_stash_t *st, void *arg), void *arg)
{
    for (unsigned cpu = 0; cpu < TYPED_STASH_CPUS; cpu++) {
        typed_stash_t *st = __atomic_load_n(&stashes[cpu], __ATOMIC_ACQUIRE);
        if (st == NULL)
            continue;
        mutex_lock(&st->lock);
        fn(st, arg);
        mutex_unlock(&st->lock);
    }
}

static void add_stash_bytes(typed_stash_t *st, void *arg)
{
    for (unsigned c = 0; c < NSMALL; c++)
        *(size_t *)arg += st->n[c] * sc_size(c);
}

size_t typed_caches_bytes(void)
{
    size_t bytes = 0;
    for_each_stash(add_stash_bytes, &bytes);
    return bytes;
}

struct stash_visit {
    void (*fn)(const void *p, void *arg);
    void *arg;
};

static void visit_stash_blocks(typed_stash_t *st, void *arg)
{
    const struct stash_visit *v = arg;
    for (unsigned c = 0; c < NSMALL; c++)
        for (unsigned i = 0; i < st->n[c]; i++)
            v->fn(st->slots[c][i], v->arg);
}

void typed_caches_for_each_block(void (*fn)(const void *p, void *arg), void *arg)
{
    struct stash_visit v = {fn, arg};
    for_each_stash(visit_stash_blocks, &v);
}

/* Every stash's lock is held across fork, so the child's stashes are
 * whole (the lock is held only to copy pointers, with no other lock
 * taken under it). */
void typed_caches_prefork(void)
{
    mutex_lock(&make_lock);
    for (unsigned cpu = 0; cpu < TYPED_STASH_CPUS; cpu++)
        if (stashes[cpu] != NULL)
            mutex_lock(&stashes[cpu]->lock);
}

void typed_caches_postfork_parent(void)
{
    for (unsigned cpu = 0; cpu < TYPED_STASH_CPUS; cpu++)
        if (stashes[cpu] != NULL)
            mutex_unlock(&stashes[cpu]->lock);
    mutex_unlock(&make_lock);
}

void typed_caches_postfork_child(void)
{
    for (unsigned cpu = 0; cpu < TYPED_STASH_CPUS; cpu++)
        if (stashes[cpu] != NULL)
            mutex_reinit(&stashes[cpu]->lock);
    mutex_reinit(&make_lock);
}

/* For dpmalloc-stat (anchor.h): where each stash's counts are. */
extern const anchor_ptr_table_t anchor_ref_typed_stashes;
const anchor_ptr_table_t anchor_ref_typed_stashes = {(const void *const *)stashes, TYPED_STASH_CPUS,
                                                      offsetof(typed_stash_t, n)};
