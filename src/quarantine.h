/*
 * quarantine.h - secure mode's quarantine of freed large blocks: a freed
 * block of an automatic arena (junk-filled by its free) loses every
 * access to its pages, and their contents if its run is bigger than
 * QUARANTINE_KEEP_MAX or a memory limit is set, and waits in a ring of
 * QUARANTINE_SLOTS blocks before it goes back to its page heap, so a
 * read or write through a dangling pointer faults (and is reported:
 * fault.h) for the next QUARANTINE_SLOTS large frees, and a second free,
 * realloc or malloc_usable_size of it aborts (the span is parked
 * meanwhile). The ring holds at most
 * QUARANTINE_SLOTS blocks, each smaller than oversize_threshold (blocks
 * of that size go back to the OS at once, as in every mode): resident,
 * at most QUARANTINE_SLOTS x QUARANTINE_KEEP_MAX (16 MiB), the rest
 * address space only.
 * Owns: the rings. May call: arena, os, error, fault, memlimit (parked
 * blocks leave the memory limit's charge).
 */
#ifndef DPM_QUARANTINE_H
#define DPM_QUARANTINE_H

#include <stdbool.h>

#include "span.h"
#include "sizeclass.h"

#define QUARANTINE_SLOTS 64
/* Runs up to this size keep their (junk-filled) pages while they wait,
 * where no memory limit is set; bigger ones are discarded. */
#define QUARANTINE_KEEP_MAX ((size_t)256 << 10)

/* Frees the validated large block s (secure mode) through the ring:
 * true if the ring took it, false if it is not one to quarantine (the
 * caller frees it as usual). The block the ring lets go of, if any, goes
 * home now. */
bool quarantine_large_put(span_t *s);
/* The fault handler's explainer (fault.h): a fault in the pages of a
 * large block in the ring is a use after free. */
bool quarantine_explain(uintptr_t addr);
/* Blocks in the ring now (tests, stats). */
unsigned quarantine_large_count(void);

/* Secure mode's rings of freed small blocks: a freed block of an
 * automatic arena, junk-filled (every usable byte junk, bytes 8..11 the
 * mark below), waits in its class's ring before it goes on (home, or a
 * CPU's cache); when it leaves, a byte that is no longer junk aborts
 * ("write after free of", naming the call that pushed it out), and while
 * it waits a second free, realloc or malloc_usable_size finds it by its
 * mark and a look in its ring. A ring has as many of its class's blocks
 * as fit QUARANTINE_SMALL_BYTES, rounded down to a power of two, at
 * least QUARANTINE_SMALL_MIN and at most QUARANTINE_SMALL_SLOTS; one
 * more ring takes the large classes' aligned slabs (up to 64 KiB blocks,
 * QUARANTINE_SMALL_MIN of them). */
#define QUARANTINE_SMALL_SLOTS 1024
#define QUARANTINE_SMALL_MIN 16
#define QUARANTINE_SMALL_BYTES ((size_t)256 << 10)
#define QUARANTINE_RINGS (NSMALL + 1)
/* A ring's mix (quarantine.c): the blocks it lets go of wait there
 * again, and leave in random order. */
#define QUARANTINE_MIX 16
#define QUARANTINE_MARK 0x7e3d1f5bu

/* At init, in secure mode: the rings' lengths. */
void quarantine_init(void);
/* Takes the validated, junk-filled (junk: the byte) slab block p of
 * span s; the block it lets go of, if any, is verified and left in *out
 * (NULL if none, its mark taken away: no block outside the rings holds
 * the mark) with its span in *out_span, for the caller to send on.
 * false if it does not quarantine p (the caller sends it home). */
bool quarantine_small_put(void *p, const span_t *s, unsigned char junk, const char *call, void **out,
                          span_t **out_span);
/* Whether p, a block of slab s, waits in its ring (its mark read, then
 * a look at every slot of its class's ring). */
bool quarantine_small_holds(const void *p, const span_t *s);
/* Verifies and sends home every block of both rings (malloc_trim, and
 * a large allocation that failed); returns how many large blocks went
 * (the address space a retry may use). */
unsigned quarantine_drain(const char *call);

#endif
