/*
 * bin.h - slabs of one object size in one arena. A bin hands out objects
 * in batches (thread-cache fills) and takes them back in batches (flushes),
 * each under its own lock, so threads of one arena allocating different
 * sizes never contend. A "phased" bin lays its object grid at a fixed
 * offset inside each slab so that every object satisfies an
 * align-at-offset request with no per-object pad (the VPP case, seed 002).
 *
 * Owns: slab bitmaps, nonfull slab lists, bin statistics.
 * May call: the page map (span_of), error, types. The arena (arena.c)
 * drives fills and flushes: it hands a bin new slabs and takes back the
 * slabs that a flush emptied; a bin never allocates or frees pages.
 */
#ifndef DPM_BIN_H
#define DPM_BIN_H

#include "mutex.h"
#include "span.h"

typedef struct bin_stats {
    uint64_t nmalloc;        /* objects handed out */
    uint64_t nfree;          /* objects taken back */
    uint64_t nfills, nflushes;
    uint64_t nslabs_made, nslabs_freed;
    size_t curslabs;
} bin_stats_t;

typedef struct bin {
    dpm_mutex_t lock;
    struct arena *arena;
    span_t *current;         /* slab being carved */
    list_t nonfull;          /* of span_t by link: other slabs with free objects */
    uint32_t objsize;
    uint32_t phase;          /* bytes before the first object of a slab */
    uint32_t slab_pages;
    uint32_t slab_objs;
    uint32_t size_class;
    uint8_t tcache_class;
    bool typed;              /* slabs carry a type tag per object */
    uint64_t pick;           /* secure mode: the state of its random slot choice (bin lock) */
    bin_stats_t stats;
} CACHE_ALIGNED bin_t;

void bin_init(bin_t *bin, struct arena *arena, unsigned size_class, uint32_t phase, uint8_t tcache_class, bool typed);
/* Up to want objects of the bin's slabs into out; returns how many (fewer
 * when the bin needs a new slab). keyed (or NULL): keyed[i] is 1 if out[i]
 * may hold the free key (span_t.keyed_bits). Bin lock held. */
unsigned bin_take(bin_t *bin, void **out, unsigned want, uint8_t *keyed);
/* A fill handed out n objects (statistics). Bin lock held. */
DPM_INLINE void bin_count_fill(bin_t *bin, unsigned n)
{
    bin->stats.nmalloc += n;
    bin->stats.nfills++;
}
/* Lays bin's objects out in s, a run of bin->slab_pages pages not yet in
 * the page map (and, for a typed bin, with its type_ids array): every
 * object free, s tagged with the bin's tcache_class. Touches only s. */
void bin_format_slab(const bin_t *bin, span_t *s);
/* Makes formatted slab s, mapped, the bin's current one. Bin lock held. */
void bin_add_slab(bin_t *bin, span_t *s);
/* The bin of a small block that a free validated; aborts if p is no
 * longer in a slab. */
bin_t *bin_of_flushed(void *p);
/* Marks the blocks among objs[0..n) that belong to bin free in their
 * slabs (with bin's lock held as `held`) and moves the others, in order,
 * to the front of objs; returns how many others. Slabs left with no
 * object are detached onto *emptied (of span_t by link) for the arena to
 * take back. Aborts on a double free. */
unsigned bin_flush_locked(bin_t *bin, lock_elided_t held, void **objs, unsigned n, list_t *emptied);
/* The bin's current slab, if it holds no object, onto *emptied (bin
 * locked): a bin otherwise keeps its current slab when it empties, for
 * the next fill; an explicit purge gives it back. */
bool bin_detach_idle_current(bin_t *bin, list_t *emptied);
/* Empties the bin's lists after its arena's pages were all released
 * (arena reset); counts the dropped objects as freed. Bin lock held. */
void bin_forget_all(bin_t *bin);
/* Objects currently allocated from this bin (stats, racy read). */
size_t bin_live_objects(const bin_t *bin);
/* Checks slab lists and bitmaps; false and a message if broken. */
bool bin_check(bin_t *bin);

#endif
