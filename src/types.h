/*
 * types.h - type tags of typed allocations (dpm_malloc_typed, the
 * rte_malloc shape): a registry of names and, per name, the bytes and
 * blocks live, so stats can say which subsystem holds memory.
 * Typed allocation calls type_id_of on every block, and any thread may
 * count a typed block's free: so a name that is registered already is
 * found without a lock, and the counts are kept per CPU (one row of
 * MAX_TYPES counters per CPU that ever counted, made at its first count:
 * at most TYPE_CPU_SLOTS x 32 KiB) and summed when stats read them.
 * Owns: the registry and the counts. May call: base, mutex, rseq.
 */
#ifndef DPM_TYPES_H
#define DPM_TYPES_H

#include "util.h"

#define MAX_TYPES 1024
#define TYPE_NAME_MAX 48
/* Rows of counts: a CPU numbered past it shares the row of its number
 * modulo it (still exact: every count is an atomic add). */
#define TYPE_CPU_SLOTS 1024

typedef struct type_stats {
    char name[TYPE_NAME_MAX];
    uint64_t live_bytes, live_blocks;
    uint64_t nalloc, nfree;
} type_stats_t;

/* Id (1..MAX_TYPES-1) of a type name, registering it on first use; 0 when
 * the registry is full or name is NULL/empty (the block is then untyped). */
uint16_t type_id_of(const char *name);
/* A block of type id and that many bytes was allocated (freed): counted on
 * the calling thread's CPU. No lock; the first count on a CPU makes its
 * row (base_alloc). Counts are exact however threads move between CPUs. */
void type_count_alloc(uint16_t id, size_t bytes);
void type_count_free(uint16_t id, size_t bytes);
/* Number of registered types, and a copy of one's counters: the sums over
 * the CPUs, not taken at one instant while blocks come and go, but with
 * nfree <= nalloc and the live figures never negative. */
unsigned types_count(void);
void type_snapshot(uint16_t id, type_stats_t *out);
void types_prefork(void);
void types_postfork_parent(void);
void types_postfork_child(void);

#endif
