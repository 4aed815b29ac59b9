/*
 * tcache_large.c - the thread cache's large blocks (see tcache.h): freed
 * blocks of the large classes (16 KiB up to tcache_max) kept per thread
 * for the thread's next request of the same class, within a byte budget
 * per thread (tcache_large_bytes) and a cap over all threads
 * (tcache_large_bytes_total).
 *
 * Unlike the small bins, which only their thread touches, a large cache
 * has a lock: its owner takes it on every put and take (elided while the
 * process has one thread), so that other threads — the background thread
 * once the cache sat idle for a decay pass, malloc_trim, arena.<i>.purge —
 * can send its blocks home without the owner's help. Blocks in a large
 * cache are marked parked: a free of one is a double free.
 *
 * May call: arena (sending blocks home, decay ticks). Lock order: the
 * cache list lock, then a large cache's lock, then arena locks.
 */
#include "conf.h"
#include "global.h"
#include "tcache.h"

#include <string.h>

_Static_assert(TC_LARGE_SLOTS_MAX <= UINT8_MAX, "per-class counts and limits are uint8_t");
_Static_assert(LARGE_ROUND_MAX <= ((size_t)8 << 20), "cached large classes must index class_n below TC_LARGE_CLASSES");

/* The cap over all threads is kept by reservation: a cache reserves what
 * it holds from tcache_large_bytes_total in steps of LARGE_RESERVE_STEP
 * (one compare-and-swap per step) before it holds it. A take that leaves
 * blocks in the cache keeps the reservation for the put that follows, so
 * the excess over what it holds plus a step is given back only now and
 * then: every LARGE_TICK_EVERY takes, at each pass of the idle reclaim
 * (tcache_large_flush, idle_only) and by every flush (all of it when the
 * flush empties the cache). A cache a take or the end of a slack leaves
 * empty keeps what it had (its block may well come back) only while the
 * cap is less than half reserved, so empty caches never lock the others
 * out. So a cache's reservation never exceeds its budget rounded up to a
 * step, plus a step, and neither a same-size loop nor a chain of growth
 * (take, resize, resize, put) makes an atomic read-modify-write but once
 * every LARGE_TICK_EVERY takes. A put that finds the cap taken sends the
 * cache's older blocks home to make room within what it has, or the
 * block goes home. large_reserved: bytes reserved by all caches (<= the
 * cap). */
static size_t large_reserved;

#define LARGE_RESERVE_STEP ((size_t)1 << 20)

#define LARGE_TICK_EVERY 64   /* takes between decay ticks of the arena */

static size_t large_block_max(void)
{
    size_t m = opt.tcache_large_bytes < opt.tcache_max ? opt.tcache_large_bytes : opt.tcache_max;
    return m < LARGE_ROUND_MAX ? m : LARGE_ROUND_MAX;
}

/* Caches are off for threads without one and for the junk and zero
 * options, which fill every block on its way. */
static bool large_cache_in_play(const tcache_t *tc)
{
    return tc != &tcache_empty && tc->large.nslots != 0 && !opt.junk && !opt.zero;
}

void tcache_large_init(large_cache_t *lc, bool recycled)
{
    if (!recycled)
        mutex_init(&lc->lock);
    lc->slack = NULL;
    lc->slack_bytes = 0;
    lc->n = 0;
    lc->bytes = 0;
    lc->reserved = 0;
    lc->used = false;
    lc->takes = 0;
    lc->nslots = opt.tcache_nslots_large < TC_LARGE_SLOTS_MAX ? opt.tcache_nslots_large : TC_LARGE_SLOTS_MAX;
    if (large_block_max() <= SMALL_MAX)
        lc->nslots = 0;
    memset(lc->class_n, 0, sizeof(lc->class_n));
    memset(lc->class_max, lc->nslots, sizeof(lc->class_max));
}

/* The per-class index of a block in the cache: its span's class (that
 * of its usable bytes when it was last allocated or resized; a grown
 * block's usable size need not be a class size, and a page run below the
 * large classes, from an aligned small request, counts in the first).
 * Read from the span, not computed from the size, which would cost a
 * put and a take some 20 instructions each; nothing changes it while the
 * block is parked, so put and remove count it in the same class. Below
 * TC_LARGE_CLASSES, as cached blocks are at most LARGE_ROUND_MAX. */
DPM_INLINE unsigned large_class_of(const span_t *s)
{
    return s->size_class < NSMALL ? 0 : s->size_class - NSMALL;
}

/* The index a size's class has in class_max (size > SMALL_MAX). */
static unsigned large_class_index(size_t size) { return sc_compute(size) - NSMALL; }

/* Removes block i (lock held) and returns it, no longer parked. */
DPM_INLINE span_t *large_remove(large_cache_t *lc, unsigned i)
{
    span_t *s = lc->blocks[i];
    for (unsigned k = i + 1; k < lc->n; k++)
        lc->blocks[k - 1] = lc->blocks[k];
    lc->n--;
    lc->class_n[large_class_of(s)]--;
    __atomic_store_n(&lc->bytes, lc->bytes - s->usable, __ATOMIC_RELAXED);
    __atomic_store_n(&s->parked, 0, __ATOMIC_RELAXED);
    return s;
}

/* ---- slack ----
 * A grown block (the end of a chain of growth) that serves a smaller
 * request keeps all its pages: the pages past what a fresh block of the
 * request gets are its slack, which realloc grows into without touching
 * the page heap (the next chain s -> 2s -> 4s costs no page-heap work and
 * no copy, however the page heap is laid out around the block). Slack is
 * cached memory like the cache's blocks: it counts in `bytes`, so in both
 * budgets, and whoever empties the cache (a put that needs room, a flush:
 * thread exit, the idle reclaim, malloc_trim, arena purge) cuts it off
 * the live block and gives it to the page heap. One block per cache has
 * slack.
 *
 * Whoever holds the block may read its span meanwhile: the cut changes
 * neither usable nor anything the holder reads before it looks at
 * slack_in; the holder ends or uses the slack only under this cache's
 * lock (tcache_large_slack_resize, _detach). */

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

/* Grows the cache's reservation to cover `bytes` (lock held); false if
 * the cap over all threads has no room for it. */
static bool large_reserve(large_cache_t *lc, size_t bytes)
{
    if (bytes <= lc->reserved)
        return true;
    size_t want = round_up(bytes, LARGE_RESERVE_STEP) - lc->reserved;
    size_t had = __atomic_load_n(&large_reserved, __ATOMIC_RELAXED);
    do {
        if (had + want > opt.tcache_large_bytes_total || had + want < had)
            return false;
    } while (!__atomic_compare_exchange_n(&large_reserved, &had, had + want, true, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
    lc->reserved += want;
    return true;
}

/* Gives back all of the cache's reservation above keep (lock held). */
DPM_INLINE void large_keep_reservation(large_cache_t *lc, size_t keep)
{
    if (lc->reserved > keep) {
        __atomic_fetch_sub(&large_reserved, lc->reserved - keep, __ATOMIC_RELAXED);
        lc->reserved = keep;
    }
}

/* A cache keeps its whole reservation for the put that follows its take,
 * or the end of its slack, unless the cap is squeezed (more than half
 * reserved): then it keeps only what covers the bytes it holds (slack
 * included), nothing if it is empty, so that idle threads' caches, which
 * take no more ticks, never lock the others out. The shared counter is
 * read only when there is something to give back, and written only under
 * a squeeze (lock held). */
DPM_INLINE void large_release_if_squeezed(large_cache_t *lc)
{
    size_t needed = round_up(lc->bytes, LARGE_RESERVE_STEP);
    if (lc->reserved > needed &&
        __atomic_load_n(&large_reserved, __ATOMIC_RELAXED) > opt.tcache_large_bytes_total / 2)
        large_keep_reservation(lc, needed);
}

/* Gives back what the cache no longer needs (lock held): all but one step
 * of slack over what it holds; everything if it is empty and `all` (a
 * flush: the thread exits, or the cache sat idle, or it was asked to);
 * under a squeezed cap, the step too. */
DPM_INLINE void large_trim_reservation(large_cache_t *lc, bool all)
{
    bool empty = lc->n == 0 && lc->slack == NULL;
    large_keep_reservation(lc, all && empty ? 0 : round_up(lc->bytes, LARGE_RESERVE_STEP) + LARGE_RESERVE_STEP);
    large_release_if_squeezed(lc);
}

/* Sends the oldest blocks home until `need` more bytes fit in the budget,
 * in the cache's reservation and a free slot; false if they cannot (need
 * is over the budget, or the cap leaves no room even for `need` alone). */
static DPM_NOINLINE bool large_make_room(large_cache_t *lc, size_t need)
{
    if (need > opt.tcache_large_bytes)
        return false;
    /* slack first: it only serves a growth that may never come */
    if (lc->bytes + need > opt.tcache_large_bytes && !slack_cut(lc))
        return false;
    while (lc->n == lc->nslots || lc->bytes + need > opt.tcache_large_bytes)
        arena_free_large(large_remove(lc, 0));
    while (!large_reserve(lc, lc->bytes + need)) {
        if (lc->n == 0)
            return false;
        arena_free_large(large_remove(lc, 0));
    }
    return true;
}

/* Sends the oldest block of class index k home (lock held); false if the
 * class holds none (its limit is 0). */
static DPM_NOINLINE bool large_class_make_room(large_cache_t *lc, unsigned k)
{
    for (unsigned i = 0; i < lc->n; i++)
        if (large_class_of(lc->blocks[i]) == k) {
            arena_free_large(large_remove(lc, i));
            return true;
        }
    return false;
}

/* A large class's size (put takes blocks of at most LARGE_ROUND_MAX):
 * arena_large_usable's formula, as the class table is one more cold line */
static bool large_is_class_size(size_t usable)
{
    /* a page run below the large classes (an aligned small request) is
     * of no class: no take could ever hand it out */
    return usable > SMALL_MAX && arena_large_usable(usable, 0) == usable;
}

bool tcache_large_put(tcache_t *tc, span_t *s)
{
    large_cache_t *lc = &tc->large;
    /* Only whole, untyped blocks of the thread's own automatic arena, of a
     * class size (what a later request of that class is served with) or
     * grown by realloc (served cut down, below). */
    if (!large_cache_in_play(tc) || s->kind != SPAN_LARGE || s->arena != tc->arena || tc->arena_manual ||
        s->type_id != 0 || s->base != s->start || (!s->grew && !large_is_class_size(s->usable)) ||
        s->usable > large_block_max())
        return false;
    /* A block of at least oversize_threshold goes home to be purged at
     * once (arena_free_large), however small the threshold: mallopt's
     * M_MMAP_THRESHOLD may set it, at any time, below tcache_max. */
    size_t threshold = __atomic_load_n(&opt.oversize_threshold, __ATOMIC_RELAXED);
    if (threshold != 0 && span_bytes(s) >= threshold)
        return false;
    unsigned k = large_class_of(s);
    lock_elided_t held = mutex_lock_elidable_uncounted(&lc->lock);
    /* The class's own limit first: its oldest block goes home to make room
     * (none with a limit of 0: the block goes home). */
    if (lc->class_n[k] >= lc->class_max[k] && !large_class_make_room(lc, k)) {
        mutex_unlock_elidable(&lc->lock, held);
        return false;
    }
    /* what a put most often finds: a free slot, and room in the budget and
     * in the reservation (large_make_room's loops, out of line, would
     * send nothing home) */
    size_t after = lc->bytes + s->usable;
    bool ok = (lc->n < lc->nslots && after <= opt.tcache_large_bytes && after <= lc->reserved) ||
              large_make_room(lc, s->usable);
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
 * as slack (see above), or, if the cache's slack cannot move to it, has
 * them cut off into the page heap, dirty, right after it, where the
 * chain's next step takes them back. */
DPM_INLINE void *large_take(tcache_t *tc, size_t size, unsigned c, bool cut_only)
{
    large_cache_t *lc = &tc->large;
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
            s = large_remove(lc, i);
            break;
        }
        if (grown == lc->n && b->grew && b->usable > size)
            grown = i;
    }
    if (s == NULL && grown != lc->n)
        s = large_remove(lc, grown);
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
    if (tick)
        large_trim_reservation(lc, false);
    else
        large_release_if_squeezed(lc);
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
        arena_tick_now(tc->arena);
    s->requested = size;
    return (void *)s->base;
}

void *tcache_large_take(tcache_t *tc, size_t size, unsigned c)
{
    if (!large_cache_in_play(tc) || size > large_block_max() || size <= SMALL_MAX)
        return NULL;
    return large_take(tc, size, c, false);
}

void *tcache_large_take_grown(tcache_t *tc, size_t size)
{
    if (!large_cache_in_play(tc) || size > large_block_max())
        return NULL;
    return large_take(tc, size, sc_of_size(size), true);
}

/* The slack becomes the block's own pages again (lock held, s is
 * lc->slack). */
DPM_INLINE void slack_to_block(large_cache_t *lc, span_t *s)
{
    s->usable = span_end(s) - s->base;
    slack_forget(lc);
    large_release_if_squeezed(lc);
}

/* A growth (size > s->usable) of s into its slack in lc (lock held, or
 * elided): true if the slack served it (s->usable is now what a fresh block of size gets, and
 * the slack ends if that took all of it); false, the slack left as it
 * was, if a reclaimer cut it meanwhile or it is too small. */
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

bool tcache_large_slack_resize(span_t *s, size_t size)
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

/* The lock is elided (the process has one thread) on a path that calls
 * nothing: a growth step saves no registers. */
bool tcache_large_slack_grow(span_t *s, size_t size)
{
    large_cache_t *lc = &tls_thread.tcache->large;
    if (likely(process_single_threaded()))   /* mutex_lock_elidable's first test */
        return slack_grow_held(lc, s, size);
    return slack_grow_locked(lc, s, size);
}

/* tcache_large_slack_detach of a block that had slack when it looked. */
void tcache_large_slack_end(span_t *s)
{
    large_cache_t *lc = __atomic_load_n(&s->slack_in, __ATOMIC_ACQUIRE);
    if (lc == NULL)
        return;
    lock_elided_t held = mutex_lock_elidable_uncounted(&lc->lock);
    if (__atomic_load_n(&s->slack_in, __ATOMIC_RELAXED) == lc)
        slack_to_block(lc, s);
    mutex_unlock_elidable(&lc->lock, held);
}

size_t tcache_large_flush(tcache_t *tc, bool idle_only, const arena_t *only)
{
    large_cache_t *lc = &tc->large;
    size_t sent = 0;
    lock_elided_t held = mutex_lock_elidable_uncounted(&lc->lock);
    if (!idle_only || !lc->used) {
        size_t slack = lc->slack_bytes;
        if (lc->slack != NULL && (only == NULL || lc->slack->arena == only) && slack_cut(lc))
            sent += slack;
        for (unsigned i = lc->n; i-- > 0;)
            if (only == NULL || lc->blocks[i]->arena == only) {
                span_t *s = large_remove(lc, i);
                sent += s->usable;
                arena_free_large(s);
            }
        large_trim_reservation(lc, true);
    } else {
        large_trim_reservation(lc, false);   /* a busy cache's excess */
    }
    lc->used = false;
    mutex_unlock_elidable(&lc->lock, held);
    return sent;
}

unsigned tcache_large_slots_for(const tcache_t *tc, size_t size)
{
    if (!large_cache_in_play(tc) || size <= SMALL_MAX || size > large_block_max())
        return 0;
    return tc->large.class_max[large_class_index(size)];
}

bool tcache_large_range_cached(size_t lo, size_t hi)
{
    size_t max = large_block_max();
    for (unsigned c = NSMALL; c < NSMALL + TC_LARGE_CLASSES && sc_size(c) <= max; c++)
        if (sc_size(c) >= lo && sc_size(c) <= hi)
            return true;
    return false;
}

void tcache_large_set_slots(tcache_t *tc, size_t lo, size_t hi, unsigned n)
{
    tcache_large_flush(tc, false, NULL);
    large_cache_t *lc = &tc->large;
    size_t max = large_block_max();
    bool any = false;
    lock_elided_t held = mutex_lock_elidable_uncounted(&lc->lock);
    for (unsigned c = NSMALL; c < NSMALL + TC_LARGE_CLASSES && sc_size(c) <= max; c++)
        if (sc_size(c) >= lo && sc_size(c) <= hi) {
            lc->class_max[c - NSMALL] = (uint8_t)n;
            any = true;
        }
    /* honoured: the class can hold n blocks, not only the total's worth */
    if (any && n > lc->nslots)
        lc->nslots = (uint8_t)n;
    mutex_unlock_elidable(&lc->lock, held);
}

size_t tcache_large_bytes(const tcache_t *tc) { return __atomic_load_n(&tc->large.bytes, __ATOMIC_RELAXED); }
