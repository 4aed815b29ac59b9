/*
 * types.h - type tags of typed allocations (dpm_malloc_typed, the
 * rte_malloc shape): a registry of names and, per name, the bytes and
 * blocks live, so stats can say which subsystem holds memory.
 * Owns: the registry. May call: base, mutex.
 */
#ifndef DPM_TYPES_H
#define DPM_TYPES_H

#include "util.h"

#define MAX_TYPES 1024
#define TYPE_NAME_MAX 48

typedef struct type_stats {
    char name[TYPE_NAME_MAX];
    uint64_t live_bytes, live_blocks;
    uint64_t nalloc, nfree;
} type_stats_t;

/* Id (1..MAX_TYPES-1) of a type name, registering it on first use; 0 when
 * the registry is full or name is NULL/empty (the block is then untyped). */
uint16_t type_id_of(const char *name);
void type_count_alloc(uint16_t id, size_t bytes);
void type_count_free(uint16_t id, size_t bytes);
/* Number of registered types, and a racy copy of one's counters. */
unsigned types_count(void);
void type_snapshot(uint16_t id, type_stats_t *out);
void types_prefork(void);
void types_postfork_parent(void);
void types_postfork_child(void);

#endif
