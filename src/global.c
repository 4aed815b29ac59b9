/*
 * global.c - the process-wide state of global.h. Defined apart from the
 * initialisation (init.c), which every entry point reaches through
 * dpm_ready(), so that the rooms that only read the derived settings do
 * not depend on the room that wires them all together.
 */
#include "global.h"

global_t g;

/* Every program that links dpmalloc links global.o: this reference takes
 * the anchor (anchor.c, for dpmalloc-stat) out of libdpmalloc.a with it. */
#include "anchor_ref.h"
extern const struct dpm_anchor *const anchor_keep;
const struct dpm_anchor *const anchor_keep = &dpmalloc_stat_anchor;
