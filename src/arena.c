/*
 * arena.c - arenas (see arena.h): creation and round-robin choice, phased
 * bins, large blocks, and the decay clock.
 */
#include "arena.h"
#include "conf.h"
#include "error.h"
#include "global.h"
#include "os.h"
#include "types.h"

#include <errno.h>
#include <string.h>

arena_t *arenas[MAX_ARENAS];
unsigned narenas_total;
unsigned narenas_auto;
static dpm_mutex_t arenas_lock = DPM_MUTEX_INITIALIZER;
static unsigned next_arena;

/* Fresh state for a new arena or a destroyed slot being reused. A reused
 * slot keeps only its descriptor pools (their memory is metadata that was
 * never given back); counters, special bins and names start over. */
uint8_t arena_cache_class(const arena_t *a, unsigned c)
{
    if (c >= g.tcache_nclasses)
        return TC_NONE;
    return (uint8_t)(a->manual ? c + TC_MANUAL_BASE : c);
}

static void arena_init_fields(arena_t *a, unsigned index, bool manual, const char *name)
{
    pool_t spans = a->ph.spans, type_arrays = a->ph.type_arrays;
    special_table_t *special = a->special;
    bool reused = a->destroyed;
    memset(a, 0, sizeof(*a));
    mutex_init(&a->lock);
    mutex_init(&a->special_lock);
    mutex_init(&a->purge_lock);
    page_options_t po = {.hugepages = opt.hugepages,
                         .thp = (int8_t)(opt.thp == THP_ALWAYS ? 1 : opt.thp == THP_NEVER ? -1 : 0)};
    ph_init(&a->ph, a, &po);
    if (reused) {
        a->ph.spans = spans;
        a->ph.type_arrays = type_arrays;
        /* the table's memory is kept; its bins, like the heap's pages, are gone */
        if (special != NULL) {
            memset(special->slots, 0, (special->mask + 1) * sizeof(special_slot_t));
            special->count = 0;
        }
        a->special = special;
    }
    a->index = index;
    a->manual = manual;
    a->destroyed = false;
    a->nthreads = 0;
    memset(a->name, 0, sizeof(a->name));
    if (name != NULL)
        strncpy(a->name, name, sizeof(a->name) - 1);
    a->dirty_decay_ms = opt.dirty_decay_ms;
    a->muzzy_decay_ms = opt.muzzy_decay_ms;
    a->clock_ns = a->last_decay_ns = os_now_ns();
    for (unsigned c = 0; c < NSMALL; c++)
        bin_init(&a->bins[c], a, c, 0, arena_cache_class(a, c), false);
}

static arena_t *arena_create(unsigned index, bool manual, const char *name)
{
    arena_t *a = base_alloc(sizeof(arena_t), CACHELINE);
    if (a != NULL)
        arena_init_fields(a, index, manual, name);
    return a;
}

static void arena_publish(unsigned index, arena_t *a)
{
    __atomic_store_n(&arenas[index], a, __ATOMIC_RELEASE);
    if (index >= narenas_total)
        __atomic_store_n(&narenas_total, index + 1, __ATOMIC_RELEASE);
}

arena_t *arena_get(unsigned index)
{
    if (index >= MAX_ARENAS)
        return NULL;
    arena_t *a = __atomic_load_n(&arenas[index], __ATOMIC_ACQUIRE);
    if (likely(a != NULL))
        return a->destroyed ? NULL : a;
    if (index >= narenas_auto)
        return NULL;   /* manual arenas exist only through arenas.create */
    mutex_lock(&arenas_lock);
    a = arenas[index];
    if (a == NULL && (a = arena_create(index, false, NULL)) != NULL)
        arena_publish(index, a);
    mutex_unlock(&arenas_lock);
    return a;
}

arena_t *arena_choose(void)
{
    unsigned i = __atomic_fetch_add(&next_arena, 1, __ATOMIC_RELAXED) % narenas_auto;
    arena_t *a = arena_get(i);
    return a != NULL ? a : arena_get(0);
}

int arena_create_manual(const char *name, unsigned *out)
{
    int err = EAGAIN;
    mutex_lock(&arenas_lock);
    for (unsigned i = narenas_auto; i < MAX_ARENAS; i++) {
        arena_t *a = arenas[i];
        if (a != NULL && !a->destroyed)
            continue;
        if (a != NULL)
            arena_init_fields(a, i, true, name);
        else if ((a = arena_create(i, true, name)) == NULL) {
            err = ENOMEM;
            break;
        }
        arena_publish(i, a);
        *out = i;
        err = 0;
        break;
    }
    mutex_unlock(&arenas_lock);
    return err;
}

/* ---- special (phased / typed) bins ------------------------------------- */

#define SPECIAL_TABLE_MIN 16

static uint32_t special_key(unsigned c, uint32_t phase, bool typed)
{
    return (uint32_t)c << 20 | phase << 1 | (typed ? 1u : 0u);
}

static uint32_t special_hash(uint32_t key) { return (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 32); }

/* The bin of key in t, or NULL; a lookup stops at the first empty slot. */
static bin_t *special_find(const special_table_t *t, uint32_t key)
{
    if (t == NULL)
        return NULL;
    for (uint32_t i = special_hash(key);; i++) {
        const special_slot_t *slot = &t->slots[i & t->mask];
        bin_t *bin = __atomic_load_n(&slot->bin, __ATOMIC_ACQUIRE);
        if (bin == NULL || slot->key == key)
            return bin;
    }
}

static void special_put(special_table_t *t, uint32_t key, bin_t *bin)
{
    uint32_t i = special_hash(key);
    while (t->slots[i & t->mask].bin != NULL)
        i++;
    special_slot_t *slot = &t->slots[i & t->mask];
    slot->key = key;
    __atomic_store_n(&slot->bin, bin, __ATOMIC_RELEASE);
    t->count++;
}

/* A table with room for one more bin: a's, or a copy twice its size
 * (published after it is filled); NULL on OOM. special_lock held. */
static special_table_t *special_room(arena_t *a)
{
    special_table_t *t = a->special;
    if (t != NULL && (t->count + 1) * 4 <= (t->mask + 1) * 3)
        return t;
    uint32_t slots = t == NULL ? SPECIAL_TABLE_MIN : (t->mask + 1) * 2;
    special_table_t *n = base_alloc(sizeof(*n) + slots * sizeof(special_slot_t), CACHELINE);
    if (n == NULL)
        return NULL;
    n->mask = slots - 1;
    for (uint32_t i = 0; t != NULL && i <= t->mask; i++)
        if (t->slots[i].bin != NULL)
            special_put(n, t->slots[i].key, t->slots[i].bin);
    __atomic_store_n(&a->special, n, __ATOMIC_RELEASE);
    return n;
}

bin_t *arena_special_bin(arena_t *a, unsigned c, uint32_t phase, bool typed)
{
    uint32_t key = special_key(c, phase, typed);
    bin_t *bin = special_find(__atomic_load_n(&a->special, __ATOMIC_ACQUIRE), key);
    if (likely(bin != NULL))
        return bin;
    mutex_lock(&a->special_lock);
    bin = special_find(a->special, key);
    if (bin == NULL) {
        special_table_t *t = special_room(a);
        bin = t != NULL ? base_alloc(sizeof(bin_t), CACHELINE) : NULL;
        if (bin != NULL) {
            bin_init(bin, a, c, phase, TC_NONE, typed);
            special_put(t, key, bin);
        }
    }
    mutex_unlock(&a->special_lock);
    return bin;
}

void arena_for_each_special_bin(arena_t *a, void (*fn)(bin_t *, void *), void *arg)
{
    const special_table_t *t = __atomic_load_n(&a->special, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; t != NULL && i <= t->mask; i++) {
        bin_t *bin = __atomic_load_n(&t->slots[i].bin, __ATOMIC_ACQUIRE);
        if (bin != NULL)
            fn(bin, arg);
    }
}

/* ---- reset and destroy ------------------------------------------------- */

static void lock_bin(bin_t *bin, void *arg) { (void)arg, mutex_lock(&bin->lock); }
static void unlock_bin(bin_t *bin, void *arg) { (void)arg, mutex_unlock(&bin->lock); }
static void forget_bin(bin_t *bin, void *arg) { (void)arg, bin_forget_all(bin); }

static void lock_all_bins(arena_t *a, bool lock)
{
    for (unsigned c = 0; c < NSMALL; c++)
        lock ? mutex_lock(&a->bins[c].lock) : mutex_unlock(&a->bins[c].lock);
    arena_for_each_special_bin(a, lock ? lock_bin : unlock_bin, NULL);
}

static void forget_all_bins(arena_t *a)
{
    for (unsigned c = 0; c < NSMALL; c++)
        bin_forget_all(&a->bins[c]);
    arena_for_each_special_bin(a, forget_bin, NULL);
}

/* Type tags of blocks that an arena reset discards stop counting as live. */
static void forget_typed_blocks(const span_t *s)
{
    if (s->kind == SPAN_LARGE)
        type_count_free(s->type_id, s->usable);
    if (s->kind != SPAN_SLAB || s->type_ids == NULL)
        return;
    for (uint32_t i = 0; i <= s->last_index; i++)
        if (s->type_ids[i] != 0)
            type_count_free(s->type_ids[i], s->objsize);
}

int arena_reset(unsigned index)
{
    arena_t *a = index < MAX_ARENAS ? __atomic_load_n(&arenas[index], __ATOMIC_ACQUIRE) : NULL;
    if (a == NULL || a->destroyed)
        return ENOENT;
    if (!a->manual)
        return EPERM;
    mutex_lock(&a->special_lock);
    lock_all_bins(a, true);
    mutex_lock(&a->purge_lock);   /* no runs are out of the heap being purged */
    mutex_lock(&a->lock);
    forget_all_bins(a);
    ph_release_all(&a->ph, forget_typed_blocks);
    for (unsigned c = 0; c < NLARGE_STATS; c++) {
        a->large[c].nfree = a->large[c].nmalloc;
        a->large[c].live_bytes = 0;
    }
    mutex_unlock(&a->lock);
    mutex_unlock(&a->purge_lock);
    lock_all_bins(a, false);
    mutex_unlock(&a->special_lock);
    return 0;
}

int arena_destroy(unsigned index)
{
    arena_t *a = index < MAX_ARENAS ? __atomic_load_n(&arenas[index], __ATOMIC_ACQUIRE) : NULL;
    if (a != NULL && a->manual && __atomic_load_n(&a->nthreads, __ATOMIC_RELAXED) != 0)
        return EBUSY;
    int err = arena_reset(index);
    if (err == 0) {
        mutex_lock(&arenas_lock);
        a->destroyed = true;
        mutex_unlock(&arenas_lock);
    }
    return err;
}

/* ---- decay clock ------------------------------------------------------- */

#define DECAY_TICKS_PER_CLOCK 8

static uint64_t decay_interval_ns(const arena_t *a)
{
    int64_t ms = a->dirty_decay_ms;
    if (a->muzzy_decay_ms > 0 && (ms <= 0 || a->muzzy_decay_ms < ms))
        ms = a->muzzy_decay_ms;
    if (ms <= 0)
        return 0;
    uint64_t ns = (uint64_t)ms * 1000000u / 16;   /* 16 passes per decay time */
    return ns < 1000000u ? 1000000u : ns;
}

/* ~0.3 ms at 3 GHz; 10-40 ms of an aarch64 generic timer */
#define CLOCK_STALE_CYCLES ((uint64_t)1 << 20)

static void arena_clock_read(arena_t *a)
{
    a->clock_ns = os_now_ns();
    a->clock_at_cycles = cpu_cycles();
}

void arena_clock_refresh(arena_t *a)
{
    if (cpu_cycles() - a->clock_at_cycles > CLOCK_STALE_CYCLES)
        arena_clock_read(a);
}

static void set_purge_due(arena_t *a) { __atomic_store_n(&a->purge_due, true, __ATOMIC_RELAXED); }

void arena_tick(arena_t *a)
{
    if (++a->ticks % DECAY_TICKS_PER_CLOCK != 0)
        return;
    arena_clock_read(a);
    if (a->dirty_decay_ms < 0 && a->muzzy_decay_ms < 0)
        return;
    uint64_t interval = decay_interval_ns(a);
    if (a->clock_ns - a->last_decay_ns >= interval) {
        a->last_decay_ns = a->clock_ns;
        set_purge_due(a);
    }
}

void arena_after_free(arena_t *a)
{
    if (a->dirty_decay_ms == 0)
        set_purge_due(a);
    else
        arena_tick(a);
}

/* One purge batch: runs are taken out of the heap under the arena lock,
 * purged with it dropped, and filed back under it again. purge_lock is
 * held throughout (the caller took it). Returns pages released; *taken
 * says whether the batch held anything (or settled runs without a call). */
static size_t purge_batch(arena_t *a, int64_t dirty_ms, int64_t muzzy_ms, bool *taken)
{
    purge_batch_t batch;
    mutex_lock(&a->lock);
    uint64_t now = a->clock_ns;
    ph_purge_take(&a->ph, now, dirty_ms, muzzy_ms, SIZE_MAX, &batch);
    mutex_unlock(&a->lock);
    *taken = batch.n != 0;
    if (batch.n == 0)
        return 0;
    ph_purge_run(&batch);
    mutex_lock(&a->lock);
    size_t released = ph_purge_finish(&a->ph, &batch, now);
    mutex_unlock(&a->lock);
    return released;
}

void arena_purge_if_due(arena_t *a)
{
    if (likely(!__atomic_load_n(&a->purge_due, __ATOMIC_RELAXED)))
        return;
    if (!mutex_trylock(&a->purge_lock))
        return;   /* another thread is purging; the flag stays for later */
    __atomic_store_n(&a->purge_due, false, __ATOMIC_RELAXED);
    bool taken;
    purge_batch(a, a->dirty_decay_ms, a->muzzy_decay_ms, &taken);
    /* a full batch may have left due runs behind: the next tick goes on */
    if (taken && a->dirty_decay_ms == 0)
        set_purge_due(a);
    mutex_unlock(&a->purge_lock);
}

void arena_tick_now(arena_t *a)
{
    mutex_lock(&a->lock);
    arena_tick(a);
    mutex_unlock(&a->lock);
    arena_purge_if_due(a);
}

size_t arena_decay_pass(arena_t *a)
{
    mutex_lock(&a->purge_lock);
    mutex_lock(&a->lock);
    a->clock_ns = a->last_decay_ns = os_now_ns();
    mutex_unlock(&a->lock);
    bool taken;
    size_t released = purge_batch(a, a->dirty_decay_ms, a->muzzy_decay_ms, &taken);
    mutex_unlock(&a->purge_lock);
    return released;
}

size_t arena_decay_now(arena_t *a, bool everything)
{
    int64_t dirty_ms = everything ? 0 : a->dirty_decay_ms, muzzy_ms = everything ? 0 : a->muzzy_decay_ms;
    size_t released = 0;
    mutex_lock(&a->purge_lock);
    mutex_lock(&a->lock);
    a->clock_ns = a->last_decay_ns = os_now_ns();
    /* Batches for what is waiting now (twice: dirty, then muzzy), so that
     * frees racing with a purge cannot keep it going for ever. */
    size_t runs = a->ph.free_runs[RUN_DIRTY].nruns + a->ph.free_runs[RUN_MUZZY].nruns;
    size_t limit = 2 * (runs / PH_PURGE_MAX_RUNS + ph_decayable_pages(&a->ph) / PH_PURGE_MAX_PAGES + 2);
    mutex_unlock(&a->lock);
    bool taken = true;
    for (size_t i = 0; i < limit && taken; i++)
        released += purge_batch(a, dirty_ms, muzzy_ms, &taken);
    mutex_unlock(&a->purge_lock);
    return released;
}

size_t arena_purge_all(arena_t *a) { return arena_decay_now(a, true); }

void arenas_release_free_memory(void)
{
    unsigned n = __atomic_load_n(&narenas_total, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n; i++) {
        arena_t *a = __atomic_load_n(&arenas[i], __ATOMIC_ACQUIRE);
        if (a != NULL)
            arena_purge_all(a);
    }
}

/* ---- large blocks ------------------------------------------------------ */

/* Where the block starts inside its first page, and the run alignment and
 * phase that make (p + offset) % align == 0 (see docs/design.md). */
static void place_large(const large_request_t *req, size_t *in_page, page_request_t *pr)
{
    size_t off = req->offset;
    if (req->align <= PAGE) {
        *in_page = (req->align - off) & (req->align - 1);
        pr->align = PAGE;
        pr->phase = 0;
    } else {
        *in_page = (PAGE - (off & PAGE_MASK)) & PAGE_MASK;
        pr->align = req->align;
        pr->phase = (req->align - ((off + *in_page) & (req->align - 1))) & (req->align - 1);
    }
}

/* Zeroes a large block that came from pages with old contents: big ranges
 * are handed back to the kernel (they read as zero and cost no memory until
 * touched, as a fresh calloc'd mapping would), small ones are cleared. */
#define ZERO_BY_PURGE_MIN ((size_t)256 << 10)

static void zero_large(span_t *s, size_t size)
{
    uintptr_t from = s->base;
    size_t in_page = s->base - s->start;
    /* (not in hugetlb segments: madvise there works on whole huge pages) */
    if (size >= ZERO_BY_PURGE_MIN && in_page == 0 && !s->seg->hugetlb &&
        os_purge_now((void *)s->start, round_up(size, PAGE)) == PURGE_ZEROED)
        return;
    memset((void *)from, 0, size);
}

void *arena_alloc_large(arena_t *a, const large_request_t *req)
{
    size_t in_page;
    page_request_t pr = {.zero = req->zero};
    place_large(req, &in_page, &pr);
    unsigned c = sc_compute(req->size);
    bool class_rounded = in_page == 0 && c >= NSMALL && req->size <= LARGE_ROUND_MAX;
    if (c < NSMALL)
        c = NSMALL;   /* small sizes with big alignments: counted as the first large class */
    size_t bytes = req->size == 0 ? 1 : req->size;
    size_t usable = class_rounded ? sc_size(c) : round_up(bytes + in_page, PAGE) - in_page;
    pr.npages = (usable + in_page) >> LG_PAGE;
    bool zeroed;
    mutex_lock(&a->lock);
    span_t *s = ph_alloc(&a->ph, &pr, &zeroed);
    if (s == NULL) {
        int saved_errno = errno;   /* a failed first try must not leak ENOMEM into a success */
        mutex_unlock(&a->lock);
        arenas_release_free_memory();
        mutex_lock(&a->lock);
        s = ph_alloc(&a->ph, &pr, &zeroed);
        errno = saved_errno;
    }
    if (s == NULL) {
        mutex_unlock(&a->lock);
        errno = ENOMEM;
        return NULL;
    }
    s->base = s->start + in_page;
    s->div_inv = 1;
    s->usable = usable;
    s->requested = s->asked = req->size;
    s->size_class = c;
    ph_set_tcache_class(s, class_rounded && !req->no_tcache ? arena_cache_class(a, c) : TC_NONE);
    s->type_id = req->type_id;
    type_count_alloc(req->type_id, usable);
    large_stats_t *ls = &a->large[c - NSMALL];
    ls->nmalloc++;
    ls->live_bytes += usable;
    arena_tick(a);
    mutex_unlock(&a->lock);
    arena_purge_if_due(a);
    if (req->zero && !zeroed)
        zero_large(s, req->size);
    return (void *)s->base;
}

void arena_free_large(span_t *s)
{
    arena_t *a = s->arena;
    mutex_lock(&a->lock);
    large_stats_t *ls = &a->large[s->size_class - NSMALL];
    ls->nfree++;
    ls->live_bytes -= s->usable;
    type_count_free(s->type_id, s->usable);
    arena_clock_refresh(a);
    ph_free(&a->ph, s, a->clock_ns);
    arena_after_free(a);
    mutex_unlock(&a->lock);
    arena_purge_if_due(a);
}

bool arena_resize_large_in_place(span_t *s, size_t size)
{
    size_t in_page = s->base - s->start;
    size_t npages = pages_of(size + in_page);
    if (npages == s->npages)
        return true;
    arena_t *a = s->arena;
    bool ok = true;
    mutex_lock(&a->lock);
    size_t before = s->usable;
    if (npages > s->npages)
        ok = ph_grow(&a->ph, s, npages);
    else if (npages * 2 <= s->npages || s->npages - npages >= 64)
        ph_shrink(&a->ph, s, npages, a->clock_ns);
    if (ok && s->usable != before) {
        large_stats_t *ls = &a->large[s->size_class - NSMALL];
        ls->live_bytes += s->usable - before;
        if (s->type_id != 0) {
            type_count_free(s->type_id, before);
            type_count_alloc(s->type_id, s->usable);
        }
        /* No longer its class's size; and a block that grew is better back
         * in the page heap than in a cache, where it would hem in the next
         * block that wants to grow. */
        ph_set_tcache_class(s, TC_NONE);
        arena_tick(a);
    }
    mutex_unlock(&a->lock);
    arena_purge_if_due(a);
    return ok && s->usable >= size;
}

void arenas_iteration_lock(void) { mutex_lock(&arenas_lock); }
void arenas_iteration_unlock(void) { mutex_unlock(&arenas_lock); }

/* ---- fork -------------------------------------------------------------- */

typedef struct lock_fn {
    void (*fn)(dpm_mutex_t *);
} lock_fn_t;

static void apply_to_bin_lock(bin_t *bin, void *arg) { ((const lock_fn_t *)arg)->fn(&bin->lock); }

/* Every lock of every arena, in the global lock order: all special
 * locks, then all bin locks, then all purge locks, then all arena locks
 * (a bin lock holder may take any arena's purge and arena locks: the
 * ENOMEM retry purges every arena). The special locks are held while the
 * special bin tables are walked, so none grows meanwhile. */
static void for_each_lock(void (*fn)(dpm_mutex_t *))
{
    lock_fn_t bin_fn = {fn};
    unsigned n = __atomic_load_n(&narenas_total, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n; i++)
        if (arenas[i] != NULL)
            fn(&arenas[i]->special_lock);
    for (unsigned i = 0; i < n; i++) {
        arena_t *a = arenas[i];
        if (a == NULL)
            continue;
        for (unsigned c = 0; c < NSMALL; c++)
            fn(&a->bins[c].lock);
        arena_for_each_special_bin(a, apply_to_bin_lock, &bin_fn);
    }
    for (unsigned i = 0; i < n; i++)
        if (arenas[i] != NULL)
            fn(&arenas[i]->purge_lock);
    for (unsigned i = 0; i < n; i++)
        if (arenas[i] != NULL)
            fn(&arenas[i]->lock);
}

static void lock_one(dpm_mutex_t *m) { mutex_lock(m); }
static void unlock_one(dpm_mutex_t *m) { mutex_unlock(m); }
static void reinit_one(dpm_mutex_t *m) { mutex_reinit(m); }

void arenas_prefork(void)
{
    mutex_lock(&arenas_lock);
    for_each_lock(lock_one);
}

void arenas_postfork_parent(void)
{
    for_each_lock(unlock_one);
    mutex_unlock(&arenas_lock);
}

void arenas_postfork_child(void)
{
    for_each_lock(reinit_one);
    mutex_init(&arenas_lock);
    unsigned n = narenas_total;
    for (unsigned i = 0; i < n; i++)
        if (arenas[i] != NULL)
            arenas[i]->nthreads = 0;
}
