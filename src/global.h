/*
 * global.h - process-wide state: whether dpmalloc is initialised, derived
 * settings, and the per-thread state. Owns: initialisation order, fork
 * handlers, thread-exit hook. May call: every lower room.
 */
#ifndef DPM_GLOBAL_H
#define DPM_GLOBAL_H

#include "util.h"
#include <pthread.h>

/* Largest request served at all; above it malloc fails with ENOMEM. */
#define ALLOC_MAX ((size_t)1 << 46)

typedef struct global {
    bool initialized;
    unsigned ncpus;
    unsigned tcache_nclasses;   /* classes 0..n-1 go through thread caches */
    /* secure mode on CPU caches: its blocks of classes 0..n-1 of the
     * automatic arenas come from the CPU caches and go back to them
     * through the quarantine, both on slow paths (docs/design.md, "Misuse
     * checks"); 0 otherwise */
    unsigned secure_nclasses;
    pthread_key_t thread_key;   /* its destructor flushes the thread cache */
    uint64_t slot_canary;       /* secure mode: the secret of the slots' canaries (canary.h) */
} global_t;

extern global_t g;

bool dpm_init_slow(void);
DPM_INLINE bool dpm_ready(void) { return likely(__atomic_load_n(&g.initialized, __ATOMIC_ACQUIRE)) || dpm_init_slow(); }

#endif
