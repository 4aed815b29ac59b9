/*
 * canary.h - secure mode's slot canaries: each slab slot's last
 * CANARY_BYTES bytes hold a value derived from a per-process secret and
 * the slot's address, written when a slab hands the slot out (bin.c) and
 * checked at every free and realloc (alloc.c), so a write past a small
 * block's usable bytes (which exclude the canary) aborts at its free.
 * Its top byte is 0, so a string read past the block stops inside it;
 * its first byte never is, so a 1-byte overflow of a NUL is caught.
 * Header only: read by bin (writes), alloc and rte_compat (checks, the
 * usable size).
 */
#ifndef DPM_CANARY_H
#define DPM_CANARY_H

#include "conf.h"
#include "global.h"
#include "span.h"

#define CANARY_BYTES 8

/* Bytes of each slot the canary takes: 0 outside secure mode. */
DPM_INLINE size_t canary_bytes(void) { return unlikely(opt.secure) ? CANARY_BYTES : 0; }

/* A slab block's bytes for the program. */
DPM_INLINE size_t slab_usable(const span_t *s) { return s->objsize - canary_bytes(); }

/* A live block's bytes for the program: a slab's or a large block's. */
DPM_INLINE size_t span_usable(const span_t *s) { return s->kind == SPAN_SLAB ? slab_usable(s) : s->usable; }

DPM_INLINE uint64_t *canary_word(const span_t *s, const void *p)
{
    return (uint64_t *)((char *)p + s->objsize - CANARY_BYTES);
}

DPM_INLINE uint64_t canary_of(const void *p)
{
    uint64_t v = (g.slot_canary ^ (uintptr_t)p) & ~((uint64_t)0xff << 56);
    return (v & 0xff) != 0 ? v : v | 1;
}

#endif
