/*
 * bin.c - slabs and bins (see bin.h). A slab's free objects are a bitmap
 * in its span descriptor, so the slab's own pages are never written by the
 * allocator: a fresh slab costs no page faults until the program touches
 * its objects, and a double free is caught when its bit is already set.
 * The pages of a slab come from, and go back to, the arena (arena.c):
 * nothing here allocates or frees pages or takes an arena lock.
 */
#include "bin.h"
#include "annotate.h"
#include "canary.h"
#include "error.h"
#include "types.h"

#include <string.h>

void bin_init(bin_t *bin, struct arena *arena, unsigned size_class, uint32_t phase, uint8_t tcache_class, bool typed)
{
    const sc_info_t *sc = &sc_table[size_class];
    memset(bin, 0, sizeof(*bin));
    mutex_init(&bin->lock);
    bin->arena = arena;
    bin->objsize = (uint32_t)sc->size;
    bin->phase = phase;
    bin->slab_pages = sc->slab_pages;
    bin->slab_objs = sc->slab_objs;
    bin->pick = (g.slot_canary ^ (uintptr_t)bin) | 1;   /* xorshift needs a state other than 0 */
    if (size_class >= NSMALL) {   /* an aligned bin of a large class (sizeclass.h) */
        dpm_assert(sc->size <= SC_ALIGNED_SLAB_MAX && phase == 0);
        bin->slab_pages = SC_ALIGNED_SLAB_PAGES;
        bin->slab_objs = (uint32_t)(SC_ALIGNED_SLAB_PAGES * PAGE / sc->size);
    }
    bin->size_class = size_class;
    bin->tcache_class = tcache_class;
    bin->typed = typed;
    if (phase != 0) {
        /* The shifted grid loses phase bytes; grow the slab if that would
         * leave it with no object at all. */
        while ((size_t)bin->slab_pages * PAGE < phase + bin->objsize)
            bin->slab_pages++;
        bin->slab_objs = (uint32_t)(((size_t)bin->slab_pages * PAGE - phase) / bin->objsize);
        if (bin->slab_objs > SLAB_MAX_OBJS)
            bin->slab_objs = SLAB_MAX_OBJS;
    }
}

/* ---- nonfull list ------------------------------------------------------ */

static void nonfull_push(bin_t *bin, span_t *s)
{
    list_push_front(&bin->nonfull, &s->link);
    s->on_list = 1;
}

static void nonfull_remove(bin_t *bin, span_t *s)
{
    list_remove(&bin->nonfull, &s->link);
    s->on_list = 0;
}

/* ---- slabs ------------------------------------------------------------- */

static void slab_init_bits(span_t *s, uint32_t nobjs)
{
    memset(s->free_bits, 0, sizeof(s->free_bits));
    for (uint32_t w = 0; w < nobjs / 64; w++)
        s->free_bits[w] = ~(uint64_t)0;
    if (nobjs % 64 != 0)
        s->free_bits[nobjs / 64] = ((uint64_t)1 << (nobjs % 64)) - 1;
}

void bin_format_slab(const bin_t *bin, span_t *s)
{
    const sc_info_t *sc = &sc_table[bin->size_class];
    s->kind = SPAN_SLAB;
    s->bin = (bin_t *)bin;
    s->objsize = bin->objsize;
    s->base = s->start + bin->phase;
    s->div_inv = sc->div_inv;
    s->div_shift = sc->div_shift;
    s->last_index = bin->slab_objs - 1;
    s->tcache_class = bin->tcache_class;
    s->nfree = bin->slab_objs;
    s->on_list = 0;
    memset(s->keyed_bits, 0, sizeof(s->keyed_bits));
    slab_init_bits(s, bin->slab_objs);
}

void bin_add_slab(bin_t *bin, span_t *s)
{
    bin->stats.nslabs_made++;
    bin->stats.curslabs++;
    bin->current = s;
}

/* Slab s holds no object any more: off the bin's books, and onto the
 * caller's list of slabs for the arena to take back. */
static void slab_detach(bin_t *bin, span_t *s, list_t *emptied)
{
    if (s->on_list)
        nonfull_remove(bin, s);
    bin->stats.nslabs_freed++;
    bin->stats.curslabs--;
    list_push_front(emptied, &s->link);
}

/* Secure mode: one free object of s (nfree > 0) at a random place, so the
 * next block's address does not follow from the last one's: the first
 * free bit at or after a random index, wrapping. Bin lock held. */
static unsigned slab_take_random(bin_t *bin, span_t *s, void **out, uint8_t *keyed)
{
    uint64_t x = bin->pick;   /* xorshift64 */
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    bin->pick = x;
    unsigned nobjs = (unsigned)s->last_index + 1, i = nobjs;
    unsigned start = (unsigned)(((x >> 32) * nobjs) >> 32);   /* in [0, nobjs) without a division */
    /* the last round looks at start's word again, whole: bits before start */
    for (unsigned k = 0; k <= SLAB_BITMAP_WORDS && i == nobjs; k++) {
        unsigned w = (start / 64 + k) % SLAB_BITMAP_WORDS;
        uint64_t bits = s->free_bits[w];
        if (k == 0)
            bits &= ~(uint64_t)0 << (start % 64);   /* at or after start */
        if (bits != 0)
            i = w * 64 + ctz64(bits);
    }
    unsigned w = i / 64;
    uint64_t bit = (uint64_t)1 << (i % 64);
    if (keyed != NULL)
        keyed[0] = w >= SLAB_KEYED_WORDS || (s->keyed_bits[w] & bit) != 0;
    if (w < SLAB_KEYED_WORDS)
        s->keyed_bits[w] &= ~bit;
    __atomic_store_n(&s->free_bits[w], s->free_bits[w] & ~bit, __ATOMIC_RELAXED);   /* read racily by free */
    s->nfree--;
    out[0] = (void *)(s->base + (size_t)i * s->objsize);
    return 1;
}

static unsigned slab_take(span_t *s, void **out, unsigned want, uint8_t *keyed)
{
    unsigned n = 0;
    for (unsigned w = 0; w < SLAB_BITMAP_WORDS && n < want; w++) {
        uint64_t bits = s->free_bits[w];
        while (bits != 0 && n < want) {
            unsigned i = w * 64 + ctz64(bits);
            uint64_t bit = bits & -bits;
            bits &= bits - 1;
            bool tracked = w < SLAB_KEYED_WORDS;
            if (keyed != NULL)
                keyed[n] = !tracked || (s->keyed_bits[w] & bit) != 0;
            if (tracked)
                s->keyed_bits[w] &= ~bit;
            out[n++] = (void *)(s->base + (size_t)i * s->objsize);
        }
        __atomic_store_n(&s->free_bits[w], bits, __ATOMIC_RELAXED);   /* read racily by free */
    }
    s->nfree -= n;
    return n;
}

/* Marks objs[i..] free in their slab s for as long as they lie in s (a
 * run); returns the index after the run. The bin lock is held. The slab's
 * fields are read once: the bitmap stores would make the compiler reload
 * them per block. The count and lists are slab_settle's, once per run. */
static unsigned slab_mark_run(bin_t *bin, lock_elided_t held, span_t *s, void **objs, unsigned i, unsigned n)
{
    const uintptr_t start = s->start, base = s->base;
    const size_t bytes = span_bytes(s);
    const uint64_t inv = s->div_inv;
    const unsigned shift = s->div_shift;
    uint16_t *const type_ids = s->type_ids;
    do {
        void *p = objs[i++];
        size_t k = (size_t)rotate_right(((uintptr_t)p - base) * inv, shift);
        uint64_t bit = (uint64_t)1 << (k % 64);
        uint64_t word = s->free_bits[k / 64];
        if (unlikely(word & bit)) {
            mutex_unlock_elidable(&bin->lock, held);
            dpm_misuse("free", p, "double free of");
        }
        __atomic_store_n(&s->free_bits[k / 64], word | bit, __ATOMIC_RELAXED);   /* read racily by free */
        if (k < SLAB_KEYED_OBJS)
            s->keyed_bits[k / 64] |= bit;
        if (type_ids != NULL) {
            type_count_free(type_ids[k], s->objsize);
            type_ids[k] = 0;
        }
    } while (i < n && (uintptr_t)objs[i] - start < bytes);
    return i;
}

/* n objects of slab s were just marked free: counts them, files a slab
 * that had none on the nonfull list, and detaches a slab that has all of
 * them into *emptied. */
static void slab_settle(bin_t *bin, span_t *s, uint32_t n, list_t *emptied)
{
    uint32_t was = s->nfree;
    s->nfree = was + n;
    if (s == bin->current) {
        /* An arena can have any number of phased bins (one per class and
         * offset in use): an idle one must not pin a slab. Nor may an
         * aligned bin of a large class (sizeclass.h), whose slabs are
         * 256 KiB, 7 per arena. */
        if (bin->phase != 0 || bin->size_class >= NSMALL)
            bin_detach_idle_current(bin, emptied);
        return;
    }
    if (was == 0)
        nonfull_push(bin, s);
    if (s->nfree == bin->slab_objs)
        slab_detach(bin, s, emptied);
}

/* ---- bins -------------------------------------------------------------- */

unsigned bin_take(bin_t *bin, void **out, unsigned want, uint8_t *keyed)
{
    unsigned n = 0;
    while (n < want) {
        span_t *s = bin->current;
        if (s == NULL || s->nfree == 0) {
            s = list_item(list_first(&bin->nonfull), span_t, link);
            if (s == NULL)
                break;
            nonfull_remove(bin, s);
            bin->current = s;
        }
        unsigned got = unlikely(opt.secure) ? slab_take_random(bin, s, out + n, keyed != NULL ? keyed + n : NULL)
                                            : slab_take(s, out + n, want - n, keyed != NULL ? keyed + n : NULL);
        if (unlikely(opt.secure))
            for (unsigned i = n; i < n + got; i++) {
                uint64_t *w = canary_word(s, out[i]);
                DPM_ANN_OPEN(w, CANARY_BYTES);
                uint64_t v = canary_of(out[i]);
                memcpy(w, &v, sizeof v);   /* a phased slot may start at any byte */
                DPM_ANN_CLOSE(w, CANARY_BYTES);
            }
        n += got;
    }
    return n;
}

/* The slab of a block that a free already validated (every caller of
 * the flush did: the free paths check before a block enters a cache). */
static span_t *flushed_slab_of(void *p)
{
    span_t *s = span_of(p);
    if (unlikely(s == NULL || s->kind != SPAN_SLAB))
        dpm_misuse("free", p, "invalid pointer or double free");
    return s;
}

bin_t *bin_of_flushed(void *p) { return flushed_slab_of(p)->bin; }

/* Flushes come in runs of one slab (a cache pushes blocks in the order it
 * got or freed them), so each run is marked block by block and settled
 * once: one count update and list check per run. A slab of the locked bin
 * cannot change under us until slab_settle may detach it. */
unsigned bin_flush_locked(bin_t *bin, lock_elided_t held, void **objs, unsigned n, list_t *emptied)
{
    unsigned left = 0;
    for (unsigned i = 0; i < n;) {
        span_t *s = flushed_slab_of(objs[i]);
        if (s->bin != bin) {
            /* objs may be a thread cache's slots, which other threads
             * read racily (tcache.h): a relaxed store, a plain move */
            __atomic_store_n(&objs[left++], objs[i++], __ATOMIC_RELAXED);
            continue;
        }
        unsigned end = slab_mark_run(bin, held, s, objs, i, n);
        slab_settle(bin, s, end - i, emptied);
        i = end;
    }
    bin->stats.nfree += n - left;
    bin->stats.nflushes++;
    return left;
}

bool bin_detach_idle_current(bin_t *bin, list_t *emptied)
{
    span_t *s = bin->current;
    if (s == NULL || s->nfree != bin->slab_objs)
        return false;
    bin->current = NULL;
    slab_detach(bin, s, emptied);
    return true;
}

void bin_forget_all(bin_t *bin)
{
    bin->current = NULL;
    bin->nonfull = (list_t){0};
    bin->stats.nfree = bin->stats.nmalloc;
    bin->stats.nslabs_freed += bin->stats.curslabs;
    bin->stats.curslabs = 0;
}

size_t bin_live_objects(const bin_t *bin)
{
    uint64_t m = __atomic_load_n(&bin->stats.nmalloc, __ATOMIC_RELAXED);
    uint64_t f = __atomic_load_n(&bin->stats.nfree, __ATOMIC_RELAXED);
    return m > f ? (size_t)(m - f) : 0;
}

static bool bin_fail(const char *rule)
{
    dpm_warn3("bin check failed: ", rule, NULL);
    return false;
}

static unsigned popcount_bits(const span_t *s)
{
    unsigned n = 0;
    for (unsigned w = 0; w < SLAB_BITMAP_WORDS; w++)
        n += (unsigned)__builtin_popcountll(s->free_bits[w]);
    return n;
}

bool bin_check(bin_t *bin)
{
    mutex_lock(&bin->lock);
    bool ok = true;
    if (list_check(&bin->nonfull) < 0)
        ok = bin_fail("broken nonfull list link");
    list_for_each(span_t, s, &bin->nonfull, link) {
        if (!ok)
            break;
        if (s->kind != SPAN_SLAB || s->bin != bin || !s->on_list)
            ok = bin_fail("foreign span on nonfull list");
        else if (s->nfree == 0 || s->nfree >= bin->slab_objs)
            ok = bin_fail("full or empty slab on nonfull list");
        else if (popcount_bits(s) != s->nfree)
            ok = bin_fail("free count disagrees with bitmap");
    }
    if (ok && bin->current != NULL && popcount_bits(bin->current) != bin->current->nfree)
        ok = bin_fail("current slab free count disagrees with bitmap");
    mutex_unlock(&bin->lock);
    return ok;
}
