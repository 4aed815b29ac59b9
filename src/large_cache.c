/*
 * large_cache.c - the per-CPU large caches (see large_cache.h): put,
 * take, slack, drain, their bounds, and their state across fork.
 */
#include "large_cache.h"
#include "base.h"
#include "conf.h"
#include "global.h"
#include "memlimit.h"
#include "os.h"
#include "rseq.h"

#include <limits.h>
#include <sched.h>
#include <string.h>

_Static_assert(LARGE_SLOTS_MAX <= UINT8_MAX, "counts are uint8_t");
_Static_assert(LARGE_ROUND_MAX <= ((size_t)8 << 20), "cached classes index class_n below LARGE_CACHE_CLASSES");

#define LARGE_TICK_EVERY 64   /* takes between decay ticks of the taker's arena */

/* The caches made so far, by CPU (never freed: a CPU may come back). */
static large_cache_t *caches[LARGE_CPUS_MAX];
static dpm_mutex_t make_lock = DPM_MUTEX_INITIALIZER;
static unsigned ncpus = 1;     /* CPU numbers with a cache: possible CPUs, at most LARGE_CPUS_MAX */
static bool caches_on;         /* caching is on and some large class fits the budget */
static unsigned nslots;        /* tcache_nslots_large, at most LARGE_SLOTS_MAX */
static size_t block_max;       /* the largest usable size a cache takes */

void large_caches_init(void)
{
    unsigned n = os_possible_cpus();
    ncpus = n == 0 ? 1 : n > LARGE_CPUS_MAX ? LARGE_CPUS_MAX : n;
    nslots = opt.tcache_nslots_large < LARGE_SLOTS_MAX ? opt.tcache_nslots_large : LARGE_SLOTS_MAX;
    size_t m = opt.tcache_large_bytes < opt.tcache_max ? opt.tcache_large_bytes : opt.tcache_max;
    block_max = m < LARGE_ROUND_MAX ? m : LARGE_ROUND_MAX;
    /* g.tcache_nclasses is 0 without caching: tcache:false, junk, zero
     * and secure, whose blocks must take the slow paths */
    caches_on = g.tcache_nclasses != 0 && nslots != 0 && block_max > SMALL_MAX;
}

/* The CPU the caller runs on, as a cache index: a hint, right or not. */
static unsigned cpu_here(void) { return rseq_cpu_hint() % ncpus; }

static DPM_NOINLINE large_cache_t *cache_make(unsigned cpu)
{
    large_cache_t *lc;
    /* elided while the process has one thread, like every lock of a
     * same-size loop: a thread that moves to a CPU with no cache yet makes
     * it here, inside the loop */
    lock_elided_t held = mutex_lock_elidable_uncounted(&make_lock);
    lc = caches[cpu];
    if (lc == NULL && (lc = base_alloc(sizeof(*lc), CACHELINE)) != NULL) {
        mutex_init(&lc->lock);
        lc->cpu = (uint16_t)cpu;
        __atomic_store_n(&caches[cpu], lc, __ATOMIC_RELEASE);
    }
    mutex_unlock_elidable(&make_lock, held);
    return lc;
}

DPM_INLINE large_cache_t *cache_made(unsigned cpu)
{
    large_cache_t *lc = __atomic_load_n(&caches[cpu], __ATOMIC_ACQUIRE);
    return likely(lc != NULL) ? lc : cache_make(cpu);
}

/* The per-class index of a block in a cache: its span's class (that of
 * its usable bytes when it was last allocated or resized; a grown
 * block's usable size need not be a class size, and a page run below
 * the large classes, from an aligned small request, counts in the
 * first). Read from the span, not computed: nothing changes it while the
 * block is parked, so put and remove count it in the same class. */
DPM_INLINE unsigned class_of(const span_t *s) { return s->size_class < NSMALL ? 0 : s->size_class - NSMALL; }

unsigned large_cache_class_index(size_t size) { return sc_compute(size) - NSMALL; }

/* Removes block i (lock held) and returns it, no longer parked. */
DPM_INLINE span_t *remove_at(large_cache_t *lc, unsigned i)
{
    span_t *s = lc->blocks[i];
    for (unsigned k = i + 1; k < lc->n; k++)
        lc->blocks[k - 1] = lc->blocks[k];
    lc->n--;
    lc->class_n[class_of(s)]--;
    __atomic_store_n(&lc->bytes, lc->bytes - s->usable, __ATOMIC_RELAXED);
    __atomic_store_n(&s->parked, 0, __ATOMIC_RELAXED);
    return s;
}

/* ---- slack ----
 * Whoever holds the block may read its span meanwhile: the cut changes
 * neither usable nor anything the holder reads before it looks at
 * slack_in; the holder ends or uses the slack only under the lock of the
 * cache slack_in names. One block per cache has slack. */

/* Forgets the slack of lc->slack (lock held): the pages are the block's
 * or the page heap's now. */
static void slack_forget(large_cache_t *lc)
{
    span_t *s = lc->slack;
    __atomic_store_n(&lc->bytes, lc->bytes - lc->slack_bytes, __ATOMIC_RELAXED);
    lc->slack = NULL;
    lc->slack_bytes = 0;
    __atomic_store_n(&s->slack_in, NULL, __ATOMIC_RELEASE);
}

/* Cuts the slack off its block into the page heap (lock held); false if
 * the page heap had no descriptor for the cut (the slack stays). */
DPM_INLINE bool slack_cut(large_cache_t *lc)
{
    if (lc->slack == NULL)
        return true;
    if (!arena_cut_slack(lc->slack))
        return false;
    slack_forget(lc);
    return true;
}

/* Sends the oldest blocks home until `need` more bytes fit in the budget
 * and a slot is free below `slots`; false if they cannot. */
static DPM_NOINLINE bool make_room(large_cache_t *lc, size_t need, unsigned slots)
{
    if (need > opt.tcache_large_bytes)
        return false;
    /* slack first: it only serves a growth that may never come */
    if (lc->bytes + need > opt.tcache_large_bytes && !slack_cut(lc))
        return false;
    while (lc->n != 0 && (lc->n >= slots || lc->bytes + need > opt.tcache_large_bytes))
        arena_free_large(remove_at(lc, 0));
    return lc->n < slots && lc->bytes + need <= opt.tcache_large_bytes;
}

/* Sends the oldest block of class index k home (lock held); false if the
 * class holds none. */
static DPM_NOINLINE bool class_make_room(large_cache_t *lc, unsigned k)
{
    for (unsigned i = 0; i < lc->n; i++)
        if (class_of(lc->blocks[i]) == k) {
            arena_free_large(remove_at(lc, i));
            return true;
        }
    return false;
}

/* A large class's size: arena_large_usable's formula. A page run below
 * the large classes (an aligned small request) is of no class: no take
 * could ever hand it out. */
static bool is_class_size(size_t usable) { return usable > SMALL_MAX && arena_large_usable(usable, 0) == usable; }

bool large_cache_put(span_t *s, const uint8_t *limits)
{
    /* whole, untyped blocks of automatic arenas, of a class size (what a
     * later request of that class gets) or grown by realloc (served cut
     * down) */
    if (!caches_on || s->kind != SPAN_LARGE || s->arena->manual || s->type_id != 0 || s->base != s->start ||
        (!s->grew && !is_class_size(s->usable)) || s->usable > block_max)
        return false;
    /* A block of at least oversize_threshold goes home to be purged at
     * once: mallopt's M_MMAP_THRESHOLD may set it below tcache_max. */
    size_t threshold = __atomic_load_n(&opt.oversize_threshold, __ATOMIC_RELAXED);
    if (threshold != 0 && span_bytes(s) >= threshold)
        return false;
    /* above the soft memory limit every large block goes home, where
     * decay, immediate there, purges it */
    if (unlikely(memlimit_above_soft()))
        return false;
    large_cache_t *lc = cache_made(cpu_here());
    if (lc == NULL)
        return false;
    unsigned k = class_of(s);
    unsigned class_max = limits != NULL ? limits[k] : nslots;
    /* a class the thread lets hold more than the total: honoured */
    unsigned slots = class_max > nslots ? class_max : nslots;
    lock_elided_t held = mutex_lock_elidable_uncounted(&lc->lock);
    /* the class's own limit first: its oldest block goes home to make
     * room (none with a limit of 0: the block goes home) */
    bool ok = lc->class_n[k] < class_max || class_make_room(lc, k);
    if (ok) {
        size_t after = lc->bytes + s->usable;
        ok = (lc->n < slots && after <= opt.tcache_large_bytes) || make_room(lc, s->usable, slots);
    }
    if (ok) {
        __atomic_store_n(&s->parked, 1, __ATOMIC_RELAXED);
        lc->class_n[k]++;
        lc->blocks[lc->n++] = s;
        __atomic_store_n(&lc->bytes, lc->bytes + s->usable, __ATOMIC_RELAXED);
        lc->used = true;
    }
    mutex_unlock_elidable(&lc->lock, held);
    return ok;
}

/* A block for a request of size bytes: one of its class as it is, else
 * (cut_only: only) one that realloc grew, handed out with the usable size
 * a fresh block of size gets. A grown block ended a chain of growth (s,
 * 2s, 4s ...); the next chain's first block keeps the rest of its pages
 * as slack, or, if the cache's slack cannot move to it, has them cut off
 * into the page heap, dirty, right after it, where the chain's next step
 * takes them back. */
DPM_INLINE void *take(arena_t *a, size_t size, unsigned c, bool cut_only)
{
    if (a == NULL || a->manual)
        return NULL;   /* a bound thread's blocks come from its arena */
    large_cache_t *lc = __atomic_load_n(&caches[cpu_here()], __ATOMIC_ACQUIRE);
    if (lc == NULL)
        return NULL;
    size_t exact = c >= NSMALL ? sc_size(c) : 0;
    span_t *s = NULL;
    bool with_slack = false;
    lock_elided_t held = mutex_lock_elidable_uncounted(&lc->lock);
    /* newest first: the newest block of the class, else the newest grown
     * block that is big enough, in one pass */
    unsigned grown = lc->n;
    for (unsigned i = lc->n; i-- > 0;) {
        const span_t *b = lc->blocks[i];
        if (b->usable == exact && !cut_only) {
            s = remove_at(lc, i);
            break;
        }
        if (grown == lc->n && b->grew && b->usable > size)
            grown = i;
    }
    if (s == NULL && grown != lc->n)
        s = remove_at(lc, grown);
    if (s != NULL && s->usable != exact) {
        size_t usable = arena_large_usable(size, 0);   /* cached blocks start on a page */
        /* one block has slack: an older one's is cut first */
        if (usable < s->usable && slack_cut(lc)) {
            lc->slack = s;
            lc->slack_bytes = s->usable - usable;
            __atomic_store_n(&lc->bytes, lc->bytes + lc->slack_bytes, __ATOMIC_RELAXED);
            __atomic_store_n(&s->slack_in, lc, __ATOMIC_RELAXED);
            s->usable = usable;
            with_slack = true;
        }
    }
    lc->used |= s != NULL;
    bool tick = s != NULL && ++lc->takes % LARGE_TICK_EVERY == 0;
    mutex_unlock_elidable(&lc->lock, held);
    if (s == NULL)
        return NULL;
    /* otherwise cut to exactly what a fresh block of size gets */
    if (!with_slack && s->usable != exact && !arena_resize_large_in_place(s, size, false)) {
        arena_free_large(s);
        return NULL;
    }
    /* a block with slack is still the end of a chain of growth: freed,
     * it is cached whole to serve the next chain */
    s->grew = with_slack;
    /* Arenas run decay from their own operations: a thread whose big
     * blocks all come from here still ticks its arena now and then. */
    if (tick)
        arena_tick_now(a);
    s->requested = size;
    return (void *)s->base;
}

void *large_cache_take(arena_t *a, size_t size, unsigned c)
{
    if (!caches_on || size > block_max || size <= SMALL_MAX)
        return NULL;
    return take(a, size, c, false);
}

void *large_cache_take_grown(arena_t *a, size_t size)
{
    if (!caches_on || size > block_max)
        return NULL;
    return take(a, size, sc_of_size(size), true);
}

/* The slack becomes the block's own pages again (lock held, s is
 * lc->slack). */
DPM_INLINE void slack_to_block(large_cache_t *lc, span_t *s)
{
    s->usable = span_end(s) - s->base;
    slack_forget(lc);
}

/* A growth (size > s->usable) of s into its slack in lc (lock held):
 * true if the slack served it (s->usable is now what a fresh block of
 * size gets, and the slack ends if that took all of it); false, the
 * slack left as it was, if a reclaimer cut it meanwhile or it is too
 * small. */
DPM_INLINE bool slack_grow_held(large_cache_t *lc, span_t *s, size_t size)
{
    size_t full = span_end(s) - s->base;
    /* size first: the class rounding of a size near SIZE_MAX wraps */
    if (__atomic_load_n(&s->slack_in, __ATOMIC_RELAXED) != lc || size > full)
        return false;
    size_t usable = arena_large_usable(size, s->base - s->start);
    if (usable > full)
        return false;
    __atomic_store_n(&lc->bytes, lc->bytes - (usable - s->usable), __ATOMIC_RELAXED);
    lc->slack_bytes = full - usable;
    s->usable = usable;
    lc->used = true;
    if (usable == full)
        slack_to_block(lc, s);
    return true;
}

bool large_cache_slack_resize(span_t *s, size_t size)
{
    large_cache_t *lc = __atomic_load_n(&s->slack_in, __ATOMIC_ACQUIRE);
    if (lc == NULL)
        return false;
    lock_elided_t held = mutex_lock_elidable_uncounted(&lc->lock);
    bool served = size > s->usable && slack_grow_held(lc, s, size);
    /* not served (a shrink, or a growth past the pages): the slack goes
     * back to the block, and the caller cuts what the program is done
     * with, and may purge it */
    if (!served && __atomic_load_n(&s->slack_in, __ATOMIC_RELAXED) == lc)   /* else cut meanwhile */
        slack_to_block(lc, s);
    mutex_unlock_elidable(&lc->lock, held);
    return served;
}

static DPM_NOINLINE bool slack_grow_locked(large_cache_t *lc, span_t *s, size_t size)
{
    lock_elided_t held = mutex_lock_elidable_uncounted(&lc->lock);
    bool served = slack_grow_held(lc, s, size);
    mutex_unlock_elidable(&lc->lock, held);
    return served;
}

/* The lock is elided while the process has one thread, on a path that
 * calls nothing: a step of a chain of growth saves no registers. */
bool large_cache_slack_grow(span_t *s, size_t size)
{
    large_cache_t *lc = __atomic_load_n(&s->slack_in, __ATOMIC_ACQUIRE);
    if (lc == NULL)
        return false;
    if (likely(process_single_threaded()))   /* mutex_lock_elidable's first test */
        return slack_grow_held(lc, s, size);
    return slack_grow_locked(lc, s, size);
}

void large_cache_slack_end(span_t *s)
{
    large_cache_t *lc = __atomic_load_n(&s->slack_in, __ATOMIC_ACQUIRE);
    if (lc == NULL)
        return;
    lock_elided_t held = mutex_lock_elidable_uncounted(&lc->lock);
    if (__atomic_load_n(&s->slack_in, __ATOMIC_RELAXED) == lc)
        slack_to_block(lc, s);
    mutex_unlock_elidable(&lc->lock, held);
}

/* Every CPU the thread may run on, as cpu_cache_prefault: it may be moved
 * between the reserve and its allocations. */
void large_caches_prefault(void)
{
    if (!caches_on)
        return;
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
        CPU_ZERO(&allowed);
        CPU_SET(cpu_here(), &allowed);
    }
    for (unsigned cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &allowed))
            continue;
        large_cache_t *lc = cache_made(cpu % ncpus);
        if (lc != NULL)
            os_populate(lc, sizeof(*lc));
    }
}

/* ---- drain, stats, checks ---------------------------------------------- */

static size_t flush_one(large_cache_t *lc, bool idle_only, const arena_t *only)
{
    size_t sent = 0;
    lock_elided_t held = mutex_lock_elidable_uncounted(&lc->lock);
    if (!idle_only || !lc->used) {
        size_t slack = lc->slack_bytes;
        if (lc->slack != NULL && (only == NULL || lc->slack->arena == only) && slack_cut(lc))
            sent += slack;
        for (unsigned i = lc->n; i-- > 0;)
            if (only == NULL || lc->blocks[i]->arena == only) {
                span_t *s = remove_at(lc, i);
                sent += s->usable;
                arena_free_large(s);
            }
    }
    if (idle_only)
        lc->used = false;
    mutex_unlock_elidable(&lc->lock, held);
    return sent;
}

size_t large_caches_flush(bool idle_only, const arena_t *only)
{
    size_t sent = 0;
    for (unsigned cpu = 0; cpu < ncpus; cpu++) {
        large_cache_t *lc = __atomic_load_n(&caches[cpu], __ATOMIC_ACQUIRE);
        if (lc != NULL)
            sent += flush_one(lc, idle_only, only);
    }
    return sent;
}

size_t large_caches_bytes(void)
{
    size_t bytes = 0;
    for (unsigned cpu = 0; cpu < ncpus; cpu++) {
        const large_cache_t *lc = __atomic_load_n(&caches[cpu], __ATOMIC_ACQUIRE);
        if (lc != NULL)
            bytes += __atomic_load_n(&lc->bytes, __ATOMIC_RELAXED);
    }
    return bytes;
}

void large_caches_for_each(void (*fn)(const span_t *s, size_t bytes, void *arg), void *arg)
{
    for (unsigned cpu = 0; cpu < ncpus; cpu++) {
        large_cache_t *lc = __atomic_load_n(&caches[cpu], __ATOMIC_ACQUIRE);
        if (lc == NULL)
            continue;
        lock_elided_t held = mutex_lock_elidable_uncounted(&lc->lock);
        for (unsigned i = 0; i < lc->n; i++)
            fn(lc->blocks[i], lc->blocks[i]->usable, arg);
        if (lc->slack != NULL)
            fn(lc->slack, lc->slack_bytes, arg);
        mutex_unlock_elidable(&lc->lock, held);
    }
}

unsigned large_cache_default_slots(size_t size)
{
    return caches_on && size > SMALL_MAX && size <= block_max ? nslots : 0;
}

bool large_cache_range_cached(size_t lo, size_t hi)
{
    if (!caches_on)
        return false;
    for (unsigned c = NSMALL; c < NSMALL + LARGE_CACHE_CLASSES && sc_size(c) <= block_max; c++)
        if (sc_size(c) >= lo && sc_size(c) <= hi)
            return true;
    return false;
}

static const char *check_one(const large_cache_t *lc)
{
    if (lc->n > LARGE_SLOTS_MAX)
        return "a cache holds more blocks than it has slots";
    if (lc->bytes > opt.tcache_large_bytes)
        return "a cache holds more bytes than tcache_large_bytes";
    size_t bytes = 0;
    unsigned per_class[LARGE_CACHE_CLASSES] = {0};
    for (unsigned i = 0; i < lc->n; i++) {
        const span_t *s = lc->blocks[i];
        if (s->kind != SPAN_LARGE || s->arena->manual || s->base != s->start)
            return "a cached block is not a whole large block of an automatic arena";
        if (!__atomic_load_n(&s->parked, __ATOMIC_RELAXED))
            return "a cached block is not marked parked";
        if (s->usable > block_max)
            return "a cached block is bigger than a cache takes";
        if (__atomic_load_n(&s->slack_in, __ATOMIC_RELAXED) != NULL)
            return "a cached block has slack";
        for (unsigned j = 0; j < i; j++)
            if (lc->blocks[j] == s)
                return "a block is cached twice";
        bytes += s->usable;
        per_class[class_of(s)]++;
    }
    for (unsigned k = 0; k < LARGE_CACHE_CLASSES; k++)
        if (per_class[k] != lc->class_n[k])
            return "a class's count does not match its blocks";
    if ((lc->slack == NULL) != (lc->slack_bytes == 0))
        return "slack bytes without a block, or a block without slack";
    if (lc->slack != NULL) {
        if (__atomic_load_n(&lc->slack->slack_in, __ATOMIC_RELAXED) != lc)
            return "the block with slack names another cache";
        if (__atomic_load_n(&lc->slack->parked, __ATOMIC_RELAXED))
            return "the block with slack is parked";
        if (lc->slack->usable + lc->slack_bytes != span_end(lc->slack) - lc->slack->base)
            return "the slack is not the block's pages past its usable bytes";
        bytes += lc->slack_bytes;
    }
    if (bytes != lc->bytes)
        return "a cache's bytes do not match its blocks and slack";
    return NULL;
}

const char *large_caches_check(void)
{
    for (unsigned cpu = 0; cpu < LARGE_CPUS_MAX; cpu++) {
        large_cache_t *lc = __atomic_load_n(&caches[cpu], __ATOMIC_ACQUIRE);
        if (lc == NULL)
            continue;
        if (cpu >= ncpus || lc->cpu != cpu)
            return "a cache sits at another CPU's index";
        mutex_lock(&lc->lock);
        const char *why = check_one(lc);
        mutex_unlock(&lc->lock);
        if (why != NULL)
            return why;
    }
    return NULL;
}

/* ---- fork ----------------------------------------------------------------
 * Every cache's lock is taken across fork (after the thread caches' and
 * CPU caches' locks, before the arenas', as in every put), so the child
 * finds every cache whole: no put, take or drain was halfway. The child
 * keeps them with their blocks; their locks are made anew. */

void large_caches_prefork(void)
{
    mutex_lock(&make_lock);
    for (unsigned cpu = 0; cpu < ncpus; cpu++)
        if (caches[cpu] != NULL)
            mutex_lock(&caches[cpu]->lock);
}

void large_caches_postfork_parent(void)
{
    for (unsigned cpu = 0; cpu < ncpus; cpu++)
        if (caches[cpu] != NULL)
            mutex_unlock(&caches[cpu]->lock);
    mutex_unlock(&make_lock);
}

void large_caches_postfork_child(void)
{
    for (unsigned cpu = 0; cpu < ncpus; cpu++)
        if (caches[cpu] != NULL)
            mutex_reinit(&caches[cpu]->lock);
    mutex_reinit(&make_lock);
}

/* For dpmalloc-stat (anchor.h): where the CPUs' large caches are. */
extern large_cache_t *const *const anchor_ref_large_caches;
extern const unsigned *const anchor_ref_large_ncpus;
large_cache_t *const *const anchor_ref_large_caches = caches;
const unsigned *const anchor_ref_large_ncpus = &ncpus;
