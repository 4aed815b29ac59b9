/*
 * tcache.h - thread caches: per thread, per size class, a bounded stack of
 * free blocks. malloc pops, free pushes; a miss fills half a stack from the
 * arena's bin in one locked batch, an overflow flushes half a stack back.
 * Blocks freed by a thread other than their allocator simply join that
 * thread's cache and go home in its next flush (batched remote free).
 *
 * The fast paths are inline in alloc.c; this room owns the slow halves,
 * creation at a thread's first allocation and teardown at its exit.
 * May call: arena, bin.
 */
#ifndef DPM_TCACHE_H
#define DPM_TCACHE_H

#include "arena.h"

/* Indexed by a span's tcache_class, which is TC_NONE (255) for blocks no
 * cache takes: bin 255 always has ncached_max 0, so the free fast path
 * needs no separate test for it. */
#define TC_NBINS 256
#define TC_MAX_CLASSES 72   /* up to the class of 8 MiB (tcache_max limit) */

/* A bin's blocks sit in slots[k .. ncached_max) with head = &slots[k]:
 * pop is *head++, push is *--head. Empty and full are told by the low 16
 * bits of head alone (a bin's slots span less than 64 KiB), which keeps
 * both fast paths to one load and one compare. */
typedef struct tc_bin {
    void **head;
    uint16_t empty_lo;       /* low bits of &slots[ncached_max] */
    uint16_t full_lo;        /* low bits of &slots[0] */
    uint16_t ncached_max;
    uint16_t low_water;      /* least count since the last trim */
    void **slots;
    uint64_t nrequests;      /* allocations asked of this bin */
} tc_bin_t;

typedef struct tc_bin_stats {
    uint64_t nmisses, nfills, nflushes, nflushed_objs;
} tc_bin_stats_t;

DPM_INLINE bool tc_bin_empty(const tc_bin_t *b) { return (uint16_t)(uintptr_t)b->head == b->empty_lo; }
DPM_INLINE bool tc_bin_full(const tc_bin_t *b) { return (uint16_t)(uintptr_t)b->head == b->full_lo; }
DPM_INLINE void *tc_bin_pop(tc_bin_t *b) { return *b->head++; }
DPM_INLINE void tc_bin_push(tc_bin_t *b, void *p) { *--b->head = p; }
DPM_INLINE unsigned tc_bin_count(const tc_bin_t *b)
{
    return b->slots == NULL ? 0 : (unsigned)(b->slots + b->ncached_max - b->head);
}

typedef struct tcache {
    tc_bin_t bins[TC_NBINS];
    arena_t *arena;
    struct tcache *next, *prev;
    void **slot_storage;
    size_t nslots_total;
    tc_bin_stats_t stats[TC_MAX_CLASSES];
} CACHE_ALIGNED tcache_t;

enum thread_state { THREAD_NEW = 0, THREAD_CACHED = 1, THREAD_EXITING = 2 };

extern __thread tcache_t *tls_tcache;
extern __thread uint8_t tls_state;
extern __thread arena_t *tls_arena;
extern tcache_t tcache_empty;

/* Number of cached classes for a tcache_max. */
unsigned tcache_classes_for(size_t tcache_max);
/* Gives the calling thread a cache; false if it cannot (exiting, OOM). */
bool tcache_create_for_thread(void);
/* A miss in bin c: fills the bin and returns one block, or NULL. */
void *tcache_alloc_miss(tcache_t *tc, unsigned c);
/* Bin c is full: flushes half of it and pushes p. */
void tcache_free_full(tcache_t *tc, unsigned c, void *p);
/* Empties every bin of tc back to the arenas. */
void tcache_flush_all(tcache_t *tc);
/* The arena this thread allocates from. */
arena_t *thread_arena(void);
void tcache_thread_exit(void *tc);
void tcaches_prefork(void);
void tcaches_postfork_parent(void);
void tcaches_postfork_child(void);

#endif
