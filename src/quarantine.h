/*
 * quarantine.h - secure mode's quarantine of freed large blocks: a freed
 * block of an automatic arena loses its pages' contents and every access
 * to them, and waits in a ring of QUARANTINE_SLOTS blocks before it goes
 * back to its page heap, so a read or write through a dangling pointer
 * faults (SIGSEGV) for the next QUARANTINE_SLOTS large frees, and a
 * second free, realloc or malloc_usable_size of it aborts (the span is
 * parked meanwhile). The ring costs address space only: at most
 * QUARANTINE_SLOTS blocks, each smaller than oversize_threshold (blocks
 * of that size go back to the OS at once, as in every mode).
 * Owns: the ring. May call: arena, os.
 */
#ifndef DPM_QUARANTINE_H
#define DPM_QUARANTINE_H

#include <stdbool.h>

#include "span.h"

#define QUARANTINE_SLOTS 64

/* Frees the validated large block s (secure mode) through the ring:
 * true if the ring took it, false if it is not one to quarantine (the
 * caller frees it as usual). The block the ring lets go of, if any, goes
 * home now. */
bool quarantine_large_put(span_t *s);
/* Blocks in the ring now (tests, stats). */
unsigned quarantine_large_count(void);

#endif
