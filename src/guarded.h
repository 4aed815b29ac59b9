/*
 * guarded.h - sampled guarded allocations (what tcmalloc and Android ship
 * as GWP-ASan), in any mode: with guard_sample:N, about one allocation in
 * N (counted as the blocks the slow paths hand out or refill, so the
 * malloc and free fast paths are the same instructions with the option on
 * or off) is served from a pool of slots, each a page between pages
 * without access, its block placed against the page's end. A write or
 * read past the block, or any access after its free (its page then has
 * no access either), faults; the fault handler reports the block, the
 * stack that allocated it and, after a free, the stack that freed it, and
 * aborts. A double free or an invalid free of a slot's block aborts with
 * the usual message. Blocks up to a page with an alignment up to 16.
 * Owns: the pool, its slot records, their faults' reports.
 * May call: os, error, fault.
 */
#ifndef DPM_GUARDED_H
#define DPM_GUARDED_H

#include <stdbool.h>
#include <stddef.h>

/* Slots in the pool: the most sampled blocks live at once. */
#define GUARDED_SLOTS 256

/* At init, when guard_sample is set: reserves the pool, has its faults
 * explained (fault.h). false without address space (nothing is sampled). */
bool guarded_init(size_t sample_interval);
/* Whether this allocation is the sampled one: the calling thread's
 * countdown loses weight (the blocks this slow path hands out); false
 * when the option is off or the thread is already inside a sample. */
bool guarded_due(unsigned weight);
/* A block of size bytes (1..page) from a free slot, zeroed, its
 * allocating stack recorded; NULL if every slot is live. */
void *guarded_alloc(size_t size);
/* Whether p points into the pool. Safe before init: false. */
bool guarded_in_pool(const void *p);
/* At init's end, when the pool exists: loads the unwinder (guarded.c). */
void guarded_prime(void);
/* Frees p (in the pool), recording the freeing stack; aborts naming
 * call if p is no live block of a slot. Returns its size (usable: exact). */
size_t guarded_free(void *p, const char *call);
/* Aborts naming call unless p (in the pool) is a live block; returns its
 * size (its usable size: exact). */
size_t guarded_live_size(const void *p, const char *call);
/* Blocks sampled so far and live now (stats.guarded.*). */
size_t guarded_count_total(void);
size_t guarded_count_live(void);

#endif
