/*
 * ctl.h - the control namespace behind dpm_ctl: one table of names with
 * their type, access and handler; numeric components ("arena.3.purge")
 * match '#' in a pattern. The table is also what docs/ctl.md lists and a
 * unit test holds the two together.
 * Owns: name resolution and value checking. May call: stats, arena,
 * tcache, conf, background.
 */
#ifndef DPM_CTL_H
#define DPM_CTL_H

#include "util.h"

#define CTL_MAX_INDICES 3

typedef struct ctl_call {
    size_t idx[CTL_MAX_INDICES];   /* the numbers matched by '#', in order */
    void *oldp;
    size_t *oldlenp;
    void *newp;
    size_t newlen;
} ctl_call_t;

typedef int (*ctl_handler_t)(const ctl_call_t *call, const void *arg);

typedef struct ctl_node {
    const char *pattern;           /* e.g. "stats.arenas.#.pactive" */
    const char *type;              /* C type of the value, or "void" */
    const char *access;            /* "r-", "rw", "-w" or "--" */
    ctl_handler_t handler;
    const void *arg;               /* handler-specific (offset, option) */
} ctl_node_t;

/* Every fixed node, then one "opt.<key>" per option. */
unsigned ctl_node_count(void);
const ctl_node_t *ctl_node_at(unsigned i);

#endif
