/*
 * anchor_ref.h - what a room needs to be pointed at by the anchor of
 * dpmalloc-stat (anchor.h) without including it: anchor.h sits above
 * every room it points at.
 * Owns: nothing. Includes nothing of the allocator.
 */
#ifndef DPM_ANCHOR_REF_H
#define DPM_ANCHOR_REF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* An array of records of which the tool reads one field each. */
typedef struct anchor_array {
    const void *base;
    uint32_t stride, field, count;
} anchor_array_t;

/* A table of pointers to records (NULL: none), of which the tool reads
 * the bytes from `field` on in each record. */
typedef struct anchor_ptr_table {
    const void *const *table;
    uint32_t count, field;
} anchor_ptr_table_t;

/* The type-tag registry (types.c): names, and per CPU a row of counts
 * per type id; the offsets of each count in a type's record. */
typedef struct anchor_types {
    const void *names;                 /* [max_types] records of name_stride bytes, the name at 0 */
    const unsigned *ntypes;            /* ids below it are in use (0: untyped) */
    const void *const *rows;           /* [row_slots] rows, NULL or 1 (being made) if none */
    const unsigned *rows_end;
    const void *spill_row;             /* counts made while a CPU had no row */
    uint32_t name_stride, max_types, row_slots, counts_stride;
    uint32_t nalloc, nfree, bytes_alloc, bytes_freed;   /* offsets in a record */
} anchor_types_t;

/* The memory limit's charge, limits and counters (memlimit.c), each an
 * atomic of its own; soft_above_ns lacks the ongoing spell above the soft
 * limit, which the reader adds from above_since_ns (CLOCK_MONOTONIC ns)
 * while above_soft is set, as memlimit_stats_read does. */
typedef struct anchor_memlimit {
    const size_t *charged, *peak, *limit, *soft_limit;
    const uint64_t *refusals, *reclaims, *failures, *soft_passes, *soft_above_ns, *above_since_ns;
    const bool *above_soft;
} anchor_memlimit_t;

/* The heap profiler's switches and counters (prof.c); prof.active in
 * the process is on && active. */
typedef struct anchor_prof {
    const bool *on, *active;
    const uint64_t *samples_total, *samples_live, *samples_dropped;
} anchor_prof_t;

struct dpm_anchor;
extern const struct dpm_anchor dpmalloc_stat_anchor;

#endif
