/*
 * typed_cache.h - caches of typed blocks, one per CPU. Typed blocks (of
 * dpm_malloc_typed and friends) carry a type tag per object in their slab
 * and no page-map tag of a cache class, so the CPU and thread caches never
 * see them; without a cache of their own every typed allocation and free
 * would take its bin's lock. A stash per CPU keeps, per small class, a few
 * typed blocks of the automatic arenas, under its own lock, which is held
 * only to copy pointers: a typed free pushes the block on its CPU's stash,
 * a typed allocation of that class pops one, and a stash that is empty or
 * full fills from or flushes to the bins in batches.
 *
 * A typed block is live while its type tag is non-zero: a free swaps the
 * tag for 0 (atomically: of two frees of one block, one sees 0 and is
 * reported as a double free) before the block enters a stash, and the
 * allocation that takes it out writes the new tag. So a stashed block is
 * never handed out untyped, and a free or realloc of it is caught by its
 * zero tag (check_not_cached) while its slab's bitmap still says taken.
 *
 * Owns: the stashes, their bounds and their drain. May call: arena, bin,
 * types, base, mutex, rseq.
 */
#ifndef DPM_TYPED_CACHE_H
#define DPM_TYPED_CACHE_H

#include "arena.h"

/* Stashes exist for CPU numbers modulo this; memory is made at a CPU's
 * first typed free or allocation. */
#define TYPED_STASH_CPUS 1024
/* Blocks a stash keeps per class, and about as many bytes: a class of
 * size z keeps min(TYPED_STASH_SLOTS, max(2, TYPED_STASH_BYTES / z)). */
#define TYPED_STASH_SLOTS 16
#define TYPED_STASH_BYTES 8192

/* Whether typed blocks of arena a go through the stashes: those of the
 * automatic arenas (manual and node arenas may be reset, destroyed or
 * asked for by name, so their blocks stay with them). Typed bins are all
 * of a small class at phase 0 (arena_special_bin(a, c, 0, true)). */
DPM_INLINE bool typed_cache_takes(const arena_t *a) { return !a->manual; }
/* A block of class c (< NSMALL) of a typed bin for an allocation of a
 * thread of arena a: from the CPU's stash, else from a batch that a's
 * typed bin of class c hands out (the rest stays in the stash). Handed out
 * (no free key) but untagged: the caller writes its type tag. NULL: no
 * memory. No lock held. */
void *typed_cache_take(arena_t *a, unsigned c);
/* A freed typed block p of slab s, a typed slab of an arena that
 * typed_cache_takes (p validated: a block start, taken per the bitmap;
 * its bytes scrubbed as free does): its type tag cleared and counted as
 * freed, then kept in the CPU's stash (the stash's older half flushed
 * home if it was full). False, with nothing done, if there is no memory
 * for the CPU's stash. Aborts naming call if another free took p's tag
 * first. No lock held. */
bool typed_cache_put(void *p, span_t *s, const char *call);
/* Sends every stashed block home (idle_only: of stashes that took no
 * block since the previous such call); returns the bytes. */
size_t typed_caches_drain(bool idle_only);
/* Bytes the stashes hold (stats; takes each stash's lock in turn). */
size_t typed_caches_bytes(void);
/* Calls fn on every stashed block (stats; under each stash's lock: fn
 * must not allocate). */
void typed_caches_for_each_block(void (*fn)(const void *p, void *arg), void *arg);
void typed_caches_prefork(void);
void typed_caches_postfork_parent(void);
void typed_caches_postfork_child(void);

#endif
