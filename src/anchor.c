/*
 * anchor.c - the anchor of anchor.h: constant data, resolved at load
 * time, that no code of the library reads. dpmalloc-stat finds it by its
 * symbol and follows its pointers in a running process.
 */
#include "anchor.h"

#include <dpmalloc.h>

DPM_EXPORT const dpm_anchor_t dpmalloc_stat_anchor = {
    .magic = DPM_ANCHOR_MAGIC,
    .layout = DPM_ANCHOR_LAYOUT,
    .size = sizeof(dpm_anchor_t),
    .abi = DPM_ANCHOR_ABI,
    .version = DPMALLOC_VERSION,
    .page = PAGE,
    .nlarge_stats = NLARGE_STATS,
    .arenas = arenas,
    .narenas_total = &narenas_total,
    .g = &g,
    .sc_table = sc_table,
    .cpu_caches_on = &cpu_caches_on,
    .opt_table = opt_table,
    .opt_table_len = &opt_table_len,
    .metadata_bytes = &anchor_ref_metadata_bytes,
    .guarded_total = &anchor_ref_guarded_total,
    .guarded_live = &anchor_ref_guarded_live,
    .tcaches_live = &anchor_ref_tcaches_live,
    .tcaches_exited = &anchor_ref_tcaches_exited,
    .cpu_caches = &anchor_ref_cpu_caches,
    .cpu_tag_objsize = &anchor_ref_cpu_tag_objsize,
    .large_caches = &anchor_ref_large_caches,
    .large_ncpus = &anchor_ref_large_ncpus,
    .transfer = &anchor_ref_transfer,
    .typed_stashes = &anchor_ref_typed_stashes,
    .types = &anchor_ref_types,
    .numa_nnodes = &anchor_ref_numa_nnodes,
    .numa_node_ncpus = &anchor_ref_numa_node_ncpus,
    .memlimit = &anchor_ref_memlimit,
    .prof = &anchor_ref_prof,
};
