/*
 * bin.h - slabs of one object size in one arena. A bin hands out objects
 * in batches (thread-cache fills) and takes them back in batches (flushes),
 * each under its own lock, so threads of one arena allocating different
 * sizes never contend. A "phased" bin lays its object grid at a fixed
 * offset inside each slab so that every object satisfies an
 * align-at-offset request with no per-object pad (the VPP case, seed 002).
 *
 * Owns: slab bitmaps, nonfull slab lists, bin statistics.
 * May call: pages (under the arena lock, taken bin -> arena).
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
    span_t *nonfull;         /* other slabs with free objects */
    uint32_t objsize;
    uint32_t phase;          /* bytes before the first object of a slab */
    uint32_t slab_pages;
    uint32_t slab_objs;
    uint32_t size_class;
    uint8_t tcache_class;
    bool typed;              /* slabs carry a type tag per object */
    bin_stats_t stats;
} CACHE_ALIGNED bin_t;

void bin_init(bin_t *bin, struct arena *arena, unsigned size_class, uint32_t phase, uint8_t tcache_class, bool typed);
/* Up to want objects into out; returns how many (0: out of memory). */
unsigned bin_fill(bin_t *bin, void **out, unsigned want);
/* Returns n validated small objects (any bins, any arenas) to their slabs.
 * Reorders objs. Aborts on a double free. */
void bin_flush(void **objs, unsigned n);
/* Empties the bin's lists after its arena's pages were all released
 * (arena reset); counts the dropped objects as freed. Bin lock held. */
void bin_forget_all(bin_t *bin);
/* Objects currently allocated from this bin (stats, racy read). */
size_t bin_live_objects(const bin_t *bin);
/* Checks slab lists and bitmaps; false and a message if broken. */
bool bin_check(bin_t *bin);

#endif
