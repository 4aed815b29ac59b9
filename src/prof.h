/*
 * prof.h - heap profiling (prof:true, jemalloc's option names): about one
 * allocation per 2^lg_prof_sample bytes is sampled with its stack; the
 * samples, scaled back to estimates of every allocation, are written as a
 * gzipped pprof profile.proto (prof.dump, prof_final) and summarised at
 * exit (prof_leak).
 *
 * How allocations are counted without touching the fast paths: with
 * prof:true every thread pops through the all-locked CPU table, so each
 * small malloc leaves the inline sequence for alloc_front_miss, which
 * counts the bytes (prof_tick) before popping from the real table; frees
 * keep their fast path. Other allocations count on their slow paths. A
 * sampled allocation is served as a page run of its own (a large span
 * marked prof_sampled), so its free, which takes the large path, tells
 * the profile; no other free pays anything.
 *
 * Owns: the per-thread byte countdowns, the stack table, the sampled
 * blocks' records, the dump encoder. May call: os (its own memory, never
 * the heap's), error, conf. Called by the entry points (alloc.c), ctl and
 * init.
 */
#ifndef DPM_PROF_H
#define DPM_PROF_H

#include "span.h"
#include "util.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* opt.prof as init left it: allocations take the counting paths. */
extern bool prof_on;

/* At init, when opt.prof is set: reserves the tables; false (profiling
 * stays off, with a warning) without memory. */
bool prof_init(void);

/* Counts size bytes allocated by this thread; true when this allocation
 * is the sampled one (the caller then serves it as a page run of its own
 * and calls prof_record). Only where prof_on. The countdown starts at 0:
 * a thread's first count draws its first gap. */
extern __thread int64_t prof_countdown;
bool prof_tick_due(size_t size);
DPM_INLINE bool prof_tick(size_t size)
{
    if (likely((prof_countdown -= (int64_t)size) > 0))
        return false;
    return prof_tick_due(size);
}

/* Records the sampled block of span s (a large span of its own) for the
 * request of size bytes, with the caller's stack; marks s. */
void prof_record(span_t *s, size_t size);

/* The sampled block of span s leaves the program (free, realloc moved
 * it): drops its record and unmarks s. */
void prof_forget(span_t *s);

/* prof.active: sampling on or off at run time (counting goes on). */
bool prof_active_get(void);
void prof_active_set(bool on);

/* Writes a profile to path (NULL: <prof_prefix>.<pid>.<seq>.m<mseq>.heap);
 * 0, or an errno (ENOENT: prof is off; the file's open/write error). Takes
 * no allocator lock while it writes. */
int prof_dump(const char *path);

/* prof.prefix: the prefix of the default dump names from now on; EINVAL
 * if it does not fit opt.prof_prefix. */
int prof_prefix_set(const char *prefix);

/* Counters for the stats: samples taken, samples live now. */
uint64_t prof_samples_total(void);
uint64_t prof_samples_live(void);

/* At exit (atexit, registered at init): prof_final's dump, prof_leak's
 * report. */
void prof_at_exit(void);

void prof_prefork(void);
void prof_postfork_parent(void);
void prof_postfork_child(void);

#endif
