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

uint8_t arena_cache_class(const arena_t *a, unsigned c)
{
    if (c >= g.tcache_nclasses)
        return TC_NONE;
    return (uint8_t)(a->manual ? c + TC_MANUAL_BASE : c);
}

static bool is_destroyed(const arena_t *a) { return __atomic_load_n(&a->destroyed, __ATOMIC_ACQUIRE); }

/* Fresh state, from ph on, for a new arena or a destroyed slot being
 * reused. A reused slot keeps only its descriptor pools (their memory is
 * metadata that was never given back); counters, special bins and names
 * start over. */
static void arena_fresh_state(arena_t *a, const char *name, bool reused)
{
    pool_t spans = a->ph.spans, type_arrays = a->ph.type_arrays;
    memset((char *)a + offsetof(arena_t, ph), 0, sizeof(*a) - offsetof(arena_t, ph));
    mutex_init(&a->special_lock);
    ph_init(&a->ph, a);
    if (reused) {
        a->ph.spans = spans;
        a->ph.type_arrays = type_arrays;
    }
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
    if (a == NULL)
        return NULL;
    mutex_init(&a->lock);
    a->index = index;
    a->manual = manual;
    a->destroyed = false;
    a->nthreads = 0;
    arena_fresh_state(a, name, false);
    return a;
}

/* A destroyed slot made new, under arenas_lock. Its lock is held
 * meanwhile: an ENOMEM retry on another thread may be purging every
 * arena, this one included. */
static void arena_reuse(arena_t *a, const char *name)
{
    mutex_lock(&a->lock);
    arena_fresh_state(a, name, true);
    a->lock.n_acquired = a->lock.n_contended = a->lock.wait_ns_total = a->lock.wait_ns_max = 0;
    mutex_unlock(&a->lock);
    __atomic_store_n(&a->destroyed, false, __ATOMIC_RELEASE);
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
        return is_destroyed(a) ? NULL : a;
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
            arena_reuse(a, name);
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

bin_t *arena_special_bin(arena_t *a, unsigned c, uint32_t phase, bool typed)
{
    unsigned h = (c * 31u + phase * 2654435761u + (typed ? 17u : 0u)) % ARENA_SPECIAL_SLOTS;
    for (unsigned probe = 0; probe < ARENA_SPECIAL_SLOTS; probe++) {
        special_slot_t *slot = &a->special[(h + probe) % ARENA_SPECIAL_SLOTS];
        bin_t *bin = __atomic_load_n(&slot->bin, __ATOMIC_ACQUIRE);
        if (bin == NULL) {
            mutex_lock(&a->special_lock);
            bin = slot->bin;
            if (bin == NULL) {
                bin = base_alloc(sizeof(bin_t), CACHELINE);
                if (bin != NULL) {
                    bin_init(bin, a, c, phase, TC_NONE, typed);
                    slot->size_class = c;
                    slot->phase = phase;
                    slot->typed = typed;
                    __atomic_store_n(&slot->bin, bin, __ATOMIC_RELEASE);
                }
            }
            mutex_unlock(&a->special_lock);
            if (bin == NULL)
                return NULL;
        }
        if (slot->size_class == c && slot->phase == phase && slot->typed == typed)
            return bin;
    }
    return NULL;
}

/* ---- reset and destroy ------------------------------------------------- */

static void lock_all_bins(arena_t *a, bool lock)
{
    for (unsigned c = 0; c < NSMALL; c++)
        lock ? mutex_lock(&a->bins[c].lock) : mutex_unlock(&a->bins[c].lock);
    for (unsigned s = 0; s < ARENA_SPECIAL_SLOTS; s++)
        if (a->special[s].bin != NULL)
            lock ? mutex_lock(&a->special[s].bin->lock) : mutex_unlock(&a->special[s].bin->lock);
}

static void forget_all_bins(arena_t *a)
{
    for (unsigned c = 0; c < NSMALL; c++)
        bin_forget_all(&a->bins[c]);
    for (unsigned s = 0; s < ARENA_SPECIAL_SLOTS; s++)
        if (a->special[s].bin != NULL)
            bin_forget_all(a->special[s].bin);
}

/* Gives every page of a back at once; arenas_lock held. */
static void release_all(arena_t *a)
{
    mutex_lock(&a->special_lock);
    lock_all_bins(a, true);
    mutex_lock(&a->lock);
    forget_all_bins(a);
    ph_release_all(&a->ph);
    for (unsigned c = 0; c < NLARGE_STATS; c++) {
        a->large[c].nfree = a->large[c].nmalloc;
        a->large[c].live_bytes = 0;
    }
    mutex_unlock(&a->lock);
    lock_all_bins(a, false);
    mutex_unlock(&a->special_lock);
}

/* Reset (destroy false) or destroy of the arena at index, refused while
 * more than may_be_bound threads are bound. The whole operation holds
 * arenas_lock, which binding (arena_bind_thread) and arenas.create take
 * too: no thread binds between the count and the release, no second
 * destroy releases the arena again, and no create reuses the slot before
 * the destroy is done. */
static int release_arena(unsigned index, uint32_t may_be_bound, bool destroy)
{
    if (index >= MAX_ARENAS)
        return ENOENT;
    int err = 0;
    mutex_lock(&arenas_lock);
    arena_t *a = arenas[index];
    if (a == NULL || a->destroyed)
        err = ENOENT;
    else if (!a->manual)
        err = EPERM;
    else if (__atomic_load_n(&a->nthreads, __ATOMIC_ACQUIRE) > may_be_bound)
        err = EBUSY;
    if (err == 0) {
        release_all(a);
        if (destroy)
            __atomic_store_n(&a->destroyed, true, __ATOMIC_RELEASE);
    }
    mutex_unlock(&arenas_lock);
    return err;
}

int arena_reset(unsigned index, const arena_t *callers)
{
    bool mine = index < MAX_ARENAS && callers != NULL && callers == __atomic_load_n(&arenas[index], __ATOMIC_ACQUIRE);
    return release_arena(index, mine ? 1 : 0, false);
}

int arena_destroy(unsigned index) { return release_arena(index, 0, true); }

bool arena_bind_thread(arena_t *a)
{
    mutex_lock(&arenas_lock);
    bool alive = !a->destroyed;
    if (alive)
        __atomic_fetch_add(&a->nthreads, 1, __ATOMIC_RELAXED);
    mutex_unlock(&arenas_lock);
    return alive;
}

void arena_unbind_thread(arena_t *a) { __atomic_fetch_sub(&a->nthreads, 1, __ATOMIC_RELEASE); }

/* ---- decay clock ------------------------------------------------------- */

#define DECAY_TICKS_PER_CLOCK 8
#define DECAY_RUNS_PER_TICK 64   /* bounds the purging one allocation call does */

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
        ph_decay_bounded(&a->ph, a->clock_ns, a->dirty_decay_ms, a->muzzy_decay_ms, DECAY_RUNS_PER_TICK);
    }
}

void arena_tick_now(arena_t *a)
{
    lock_elided_t held = mutex_lock_elidable(&a->lock);
    arena_tick(a);
    mutex_unlock_elidable(&a->lock, held);
}

void arena_after_free(arena_t *a)
{
    if (a->dirty_decay_ms == 0)
        ph_decay_bounded(&a->ph, a->clock_ns, 0, a->muzzy_decay_ms, DECAY_RUNS_PER_TICK);
    else
        arena_tick(a);
}

size_t arena_decay_now(arena_t *a, bool everything)
{
    size_t pages;
    mutex_lock(&a->lock);
    a->clock_ns = a->last_decay_ns = os_now_ns();
    if (everything)
        pages = ph_decay(&a->ph, a->clock_ns, 0, 0);
    else
        pages = ph_decay(&a->ph, a->clock_ns, a->dirty_decay_ms, a->muzzy_decay_ms);
    mutex_unlock(&a->lock);
    return pages;
}

size_t arena_purge_all(arena_t *a) { return arena_decay_now(a, true); }

void arenas_release_free_memory(void)
{
    unsigned n = __atomic_load_n(&narenas_total, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n; i++) {
        arena_t *a = __atomic_load_n(&arenas[i], __ATOMIC_ACQUIRE);
        if (a != NULL && !is_destroyed(a))
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
    if (size >= ZERO_BY_PURGE_MIN && in_page == 0 &&
        os_purge_now((void *)s->start, round_up(size, PAGE)) == PURGE_ZEROED)
        return;
    memset((void *)from, 0, size);
}

/* The usable bytes a fresh block of size bytes starting in_page bytes
 * into its first page gets: its class size (whole pages from 16 KiB up to
 * LARGE_ROUND_MAX), else whole pages. */
static size_t large_usable_for(size_t size, size_t in_page)
{
    unsigned c = sc_compute(size == 0 ? 1 : size);
    if (in_page == 0 && c >= NSMALL && size <= LARGE_ROUND_MAX)
        return sc_size(c);
    return round_up((size == 0 ? 1 : size) + in_page, PAGE) - in_page;
}

void *arena_alloc_large(arena_t *a, const large_request_t *req)
{
    size_t in_page;
    page_request_t pr = {.zero = req->zero};
    place_large(req, &in_page, &pr);
    unsigned c = sc_compute(req->size == 0 ? 1 : req->size);
    if (c < NSMALL)
        c = NSMALL;   /* small sizes with big alignments: counted as the first large class */
    size_t usable = large_usable_for(req->size, in_page);
    pr.npages = (usable + in_page) >> LG_PAGE;
    bool zeroed;
    lock_elided_t held = mutex_lock_elidable(&a->lock);
    span_t *s = ph_alloc(&a->ph, &pr, &zeroed);
    if (s == NULL) {
        int saved_errno = errno;   /* a failed first try must not leak ENOMEM into a success */
        mutex_unlock_elidable(&a->lock, held);
        arenas_release_free_memory();
        held = mutex_lock_elidable(&a->lock);
        s = ph_alloc(&a->ph, &pr, &zeroed);
        errno = saved_errno;
    }
    if (s == NULL) {
        mutex_unlock_elidable(&a->lock, held);
        errno = ENOMEM;
        return NULL;
    }
    s->base = s->start + in_page;
    s->div_inv = 1;
    s->usable = usable;
    s->requested = req->size;
    s->grew = 0;
    s->size_class = c;
    /* large blocks are cached by the thread cache's large cache, which
     * the free slow path reaches: no bin tag */
    ph_set_tcache_class(s, TC_NONE);
    s->type_id = req->type_id;
    type_count_alloc(req->type_id, usable);
    large_stats_t *ls = &a->large[c - NSMALL];
    ls->nmalloc++;
    ls->live_bytes += usable;
    arena_tick(a);
    mutex_unlock_elidable(&a->lock, held);
    if (req->zero && !zeroed)
        zero_large(s, opt.zero ? usable : req->size);   /* opt.zero: realloc may grow into it */
    return (void *)s->base;
}

/* A freed block of at least opt.oversize_threshold bytes goes back to the
 * OS at once (glibc unmaps such blocks at free); a realloc that cuts at
 * least SHRINK_PURGE_MIN off a block gives the cut pages back at once
 * (with the dirty run they joined): the program said it is done with
 * them. Smaller runs wait for decay, where a loop of big blocks finds
 * them still faulted in. */
#define SHRINK_PURGE_MIN ((size_t)1 << 20)

void arena_free_large(span_t *s)
{
    arena_t *a = s->arena;
    uintptr_t start = s->start;
    bool oversize = opt.oversize_threshold != 0 && span_bytes(s) >= opt.oversize_threshold;
    lock_elided_t held = mutex_lock_elidable(&a->lock);
    large_stats_t *ls = &a->large[s->size_class - NSMALL];
    ls->nfree++;
    ls->live_bytes -= s->usable;
    type_count_free(s->type_id, s->usable);
    arena_clock_refresh(a);
    ph_free(&a->ph, s, a->clock_ns);
    if (oversize)
        ph_purge_run_at(&a->ph, start, 0, a->clock_ns);
    arena_after_free(a);
    mutex_unlock_elidable(&a->lock, held);
}

bool arena_resize_large_in_place(span_t *s, size_t size)
{
    size_t in_page = s->base - s->start;
    size_t usable = large_usable_for(size, in_page);
    size_t npages = (usable + in_page) >> LG_PAGE;
    if (npages == s->npages)
        return true;
    arena_t *a = s->arena;
    bool ok = true;
    lock_elided_t held = mutex_lock_elidable(&a->lock);
    size_t before = s->usable;
    unsigned class_before = s->size_class;
    if (npages > s->npages) {
        ok = ph_grow(&a->ph, s, npages);
    } else {
        ph_shrink(&a->ph, s, npages, a->clock_ns);
        ph_purge_run_at(&a->ph, span_end(s), SHRINK_PURGE_MIN, a->clock_ns);
    }
    if (ok) {
        /* ph_grow/ph_shrink set usable to the end of the run */
        unsigned c = sc_compute(s->usable);
        s->size_class = c < NSMALL ? NSMALL : c;
        large_stats_t *from = &a->large[class_before - NSMALL], *to = &a->large[s->size_class - NSMALL];
        from->live_bytes -= before;
        to->live_bytes += s->usable;
        if (s->size_class != class_before) {
            from->nfree++;
            to->nmalloc++;
        }
        if (s->type_id != 0) {
            type_count_free(s->type_id, before);
            type_count_alloc(s->type_id, s->usable);
        }
        arena_tick(a);
    }
    mutex_unlock_elidable(&a->lock, held);
    return ok && s->usable >= size;
}

void arenas_iteration_lock(void) { mutex_lock(&arenas_lock); }
void arenas_iteration_unlock(void) { mutex_unlock(&arenas_lock); }

/* ---- fork -------------------------------------------------------------- */

/* Every lock of every arena, in the global lock order: all special
 * locks, then all bin locks, then all arena locks (a bin lock holder may
 * take any arena's lock: the ENOMEM retry purges every arena). */
static void for_each_lock(void (*fn)(dpm_mutex_t *))
{
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
        for (unsigned s = 0; s < ARENA_SPECIAL_SLOTS; s++)
            if (a->special[s].bin != NULL)
                fn(&a->special[s].bin->lock);
    }
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
