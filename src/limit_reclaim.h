/*
 * limit_reclaim.h - the memory limit's reclaim (limit_reclaim.c): drains
 * every cache and purges every arena before an allocation fails at the
 * limit. Entry-point level; registered with memlimit at init.
 */
#ifndef DPM_LIMIT_RECLAIM_H
#define DPM_LIMIT_RECLAIM_H

/* Registers the reclaim with memlimit (memlimit_set_reclaim). At init. */
void limit_reclaim_init(void);

#endif
