/*
 * base.h - metadata memory: the allocator's own structures (span
 * descriptors, thread caches, arenas) never come from the heap they
 * describe. Owns: a bump allocator over OS chunks and fixed-size pools.
 * May call: os, memlimit (metadata counts in its charge), mutex.
 */
#ifndef DPM_BASE_H
#define DPM_BASE_H

#include "util.h"

/* Zeroed, never-freed metadata; NULL with errno = ENOMEM. Thread-safe. */
void *base_alloc(size_t size, size_t align);
/* As base_alloc, for metadata a caller may be refused (a manual arena):
 * NULL where a new chunk would pass the memory limit (the refusal is
 * memlimit's, memlimit_refused_take sees it). */
void *base_alloc_checked(size_t size, size_t align);
/* Bytes of metadata mapped so far (stats.metadata). */
size_t base_mapped_bytes(void);
void base_prefork(void);
void base_postfork_parent(void);
void base_postfork_child(void);

/* Fixed-size objects carved from base_alloc, kept free on a stack of
 * pointers (not a list threaded through them): a get can prefetch the
 * object it will hand out POOL_LOOKAHEAD gets later, so that descriptors
 * whose reuse order has been scattered by earlier frees cost no cache and
 * TLB misses on the allocation path. The stack has a slot for every object
 * ever carved, so a put never needs memory. Not locked: its owner
 * serialises access. */
typedef struct pool {
    void **stack;
    size_t nfree;       /* objects on the stack */
    size_t nobjs;       /* objects carved so far */
    size_t cap;         /* slots of the stack, at least nobjs */
    size_t obj_size;
    size_t live;
} pool_t;

#define POOL_LOOKAHEAD 8

void pool_init(pool_t *p, size_t obj_size);
/* An object of uninitialised contents (callers set every field). */
void *pool_get(pool_t *p);
void pool_put(pool_t *p, void *obj);

#endif
