/*
 * runs.h - the free-run index: TLSF-style segregated fit over run lengths
 * in pages. Lengths map to (first level = power of two, second level = one
 * of 8 slices); two bitmaps say which lists are non-empty. A search rounds
 * the request up to the next slice boundary, so the head of the first
 * non-empty list at or above it always fits: O(1), no list is ever scanned
 * (a scan of split-off tails is what made seed 000 slow: docs/design.md,
 * "Page runs").
 *
 * Owns: membership of free runs in lists. Touches: span links only.
 */
#ifndef DPM_RUNS_H
#define DPM_RUNS_H

#include "span.h"

#define RUNS_LG_SL 3
#define RUNS_NSL (1u << RUNS_LG_SL)
#define RUNS_NFL 48

typedef struct run_index {
    uint64_t fl_bits;
    uint8_t sl_bits[RUNS_NFL];
    list_t heads[RUNS_NFL][RUNS_NSL];   /* of span_t by link */
    size_t nruns;
    size_t npages;
} run_index_t;

void runs_init(run_index_t *ix);
void runs_insert(run_index_t *ix, span_t *run);
void runs_remove(run_index_t *ix, span_t *run);
/* Changes the length of a filed run to npages (its start is the
 * caller's): it moves to another list only if its slot changes, and keeps
 * its place otherwise. O(1). */
void runs_resize(run_index_t *ix, span_t *run, size_t npages);
/* A run of at least npages pages, or NULL: the head of the request's own
 * length slot if it fits, else the head of the first slot whose members
 * all fit. No smaller slot can hold a fitting run, so the result is the
 * best fit except that fitting runs behind the own slot's head are not
 * seen (that would be a list scan). The run stays in the index. */
span_t *runs_find(run_index_t *ix, size_t npages);
/* Length of the first run of the highest non-empty slot, 0 if none: the
 * longest run within one slot (1/8 of its length), in O(1). */
size_t runs_longest_hint(const run_index_t *ix);
/* Walks everything; returns false (and names the broken rule on stderr)
 * if an invariant fails. For tests and debug builds. */
bool runs_check(const run_index_t *ix, uint8_t state);

#endif
