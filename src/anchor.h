/*
 * anchor.h - where dpmalloc-stat (tools/dpmalloc_stat.c) finds the
 * statistics of another process: one exported constant,
 * dpmalloc_stat_anchor, whose address the tool resolves from the ELF
 * symbol tables of the library (.dynsym) or of a statically linked
 * program (.symtab), and which points at the counters the in-process
 * snapshot (stats.c) reads. The tool reads them with process_vm_readv
 * while the process runs; the process itself never reads the anchor.
 *
 * Owns: the anchor and its layout check. May point at: anything the
 * statistics read. May call: nothing (it is data; it adds no work).
 * The rooms whose counters are static export one constant reference
 * each (anchor_ref_*), defined beside the counter.
 */
#ifndef DPM_ANCHOR_H
#define DPM_ANCHOR_H

#include "anchor_ref.h"
#include "conf.h"
#include "cpu_cache.h"
#include "global.h"
#include "large_cache.h"
#include "numa.h"
#include "sizeclass.h"
#include "tcache.h"
#include "transfer.h"
#include "typed_cache.h"
#include "types.h"

#define DPM_ANCHOR_MAGIC 0x524f48434e414d44ull   /* "DMANCHOR" little-endian */
#define DPM_ANCHOR_LAYOUT 2u                      /* raised when the anchor itself changes */
#define DPM_ANCHOR_SYMBOL "dpmalloc_stat_anchor"

/* A fingerprint of the layouts the tool reads (sizes of the structs,
 * offsets of the parts it reads, the tables' bounds): the same headers
 * give the same value in the library and in the tool, and a struct that
 * grew, shrank or moved a part the tool reads a different one (the tool
 * refuses to read then). */
#define ANCHOR_MIX(h, v) (((h) ^ (uint64_t)(v)) * 0x100000001b3ull)
#define ANCHOR_ABI_0 0xcbf29ce484222325ull
#define ANCHOR_ABI_1 ANCHOR_MIX(ANCHOR_ABI_0, sizeof(arena_t))
#define ANCHOR_ABI_2 ANCHOR_MIX(ANCHOR_ABI_1, sizeof(bin_t))
#define ANCHOR_ABI_3 ANCHOR_MIX(ANCHOR_ABI_2, offsetof(arena_t, bins))
#define ANCHOR_ABI_4 ANCHOR_MIX(ANCHOR_ABI_3, offsetof(arena_t, ph))
#define ANCHOR_ABI_5 ANCHOR_MIX(ANCHOR_ABI_4, offsetof(arena_t, large))
#define ANCHOR_ABI_6 ANCHOR_MIX(ANCHOR_ABI_5, offsetof(arena_t, special))
#define ANCHOR_ABI_7 ANCHOR_MIX(ANCHOR_ABI_6, sizeof(page_heap_t))
#define ANCHOR_ABI_8 ANCHOR_MIX(ANCHOR_ABI_7, sizeof(tcache_t))
#define ANCHOR_ABI_9 ANCHOR_MIX(ANCHOR_ABI_8, offsetof(tcache_t, stats))
#define ANCHOR_ABI_10 ANCHOR_MIX(ANCHOR_ABI_9, offsetof(tcache_t, stashes))
#define ANCHOR_ABI_11 ANCHOR_MIX(ANCHOR_ABI_10, sizeof(tc_exited_t))
#define ANCHOR_ABI_12 ANCHOR_MIX(ANCHOR_ABI_11, sizeof(cpu_cache_t))
#define ANCHOR_ABI_13 ANCHOR_MIX(ANCHOR_ABI_12, sizeof(large_cache_t))
#define ANCHOR_ABI_14 ANCHOR_MIX(ANCHOR_ABI_13, sizeof(sc_info_t))
#define ANCHOR_ABI_15 ANCHOR_MIX(ANCHOR_ABI_14, sizeof(opt_desc_t))
#define ANCHOR_ABI_16 ANCHOR_MIX(ANCHOR_ABI_15, sizeof(global_t))
#define ANCHOR_ABI_17 ANCHOR_MIX(ANCHOR_ABI_16, MAX_ARENAS)
#define ANCHOR_ABI_18 ANCHOR_MIX(ANCHOR_ABI_17, NSMALL)
#define ANCHOR_ABI_19 ANCHOR_MIX(ANCHOR_ABI_18, NCLASSES)
#define ANCHOR_ABI_20 ANCHOR_MIX(ANCHOR_ABI_19, TC_MAX_CLASSES)
#define ANCHOR_ABI_21 ANCHOR_MIX(ANCHOR_ABI_20, CPU_SLOTS_MAX)
#define ANCHOR_ABI_22 ANCHOR_MIX(ANCHOR_ABI_21, CPU_NTAGS)
#define ANCHOR_ABI_23 ANCHOR_MIX(ANCHOR_ABI_22, TYPED_STASH_CPUS)
#define ANCHOR_ABI_24 ANCHOR_MIX(ANCHOR_ABI_23, LARGE_CPUS_MAX)
#define ANCHOR_ABI_25 ANCHOR_MIX(ANCHOR_ABI_24, offsetof(arena_t, incarnation))
#define ANCHOR_ABI_26 ANCHOR_MIX(ANCHOR_ABI_25, offsetof(arena_t, name))
#define ANCHOR_ABI_27 ANCHOR_MIX(ANCHOR_ABI_26, offsetof(bin_t, stats))
#define ANCHOR_ABI_28 ANCHOR_MIX(ANCHOR_ABI_27, offsetof(bin_t, objsize))
#define ANCHOR_ABI_29 ANCHOR_MIX(ANCHOR_ABI_28, offsetof(page_heap_t, free_runs))
#define ANCHOR_ABI_30 ANCHOR_MIX(ANCHOR_ABI_29, offsetof(page_heap_t, mapped_bytes))
#define ANCHOR_ABI_31 ANCHOR_MIX(ANCHOR_ABI_30, offsetof(tcache_t, bins))
#define ANCHOR_ABI_32 ANCHOR_MIX(ANCHOR_ABI_31, offsetof(tcache_t, arena))
#define ANCHOR_ABI_33 ANCHOR_MIX(ANCHOR_ABI_32, offsetof(large_cache_t, bytes))
#define ANCHOR_ABI_34 ANCHOR_MIX(ANCHOR_ABI_33, offsetof(opt_desc_t, value))
#define ANCHOR_ABI_35 ANCHOR_MIX(ANCHOR_ABI_34, sizeof(anchor_array_t))
#define ANCHOR_ABI_36 ANCHOR_MIX(ANCHOR_ABI_35, sizeof(anchor_ptr_table_t))
#define ANCHOR_ABI_37 ANCHOR_MIX(ANCHOR_ABI_36, sizeof(anchor_types_t))
#define ANCHOR_ABI_38 ANCHOR_MIX(ANCHOR_ABI_37, MAX_TYPES)
#define ANCHOR_ABI_39 ANCHOR_MIX(ANCHOR_ABI_38, TYPE_NAME_MAX)
#define ANCHOR_ABI_40 ANCHOR_MIX(ANCHOR_ABI_39, TYPE_CPU_SLOTS)
#define ANCHOR_ABI_41 ANCHOR_MIX(ANCHOR_ABI_40, TYPED_STASH_SLOTS)
#define ANCHOR_ABI_42 ANCHOR_MIX(ANCHOR_ABI_41, RUNS_NFL * 1000 + RUNS_NSL)
#define ANCHOR_ABI_43 ANCHOR_MIX(ANCHOR_ABI_42, NUMA_MAX_NODES)
#define ANCHOR_ABI_44 ANCHOR_MIX(ANCHOR_ABI_43, sizeof(anchor_memlimit_t))
#define ANCHOR_ABI_45 ANCHOR_MIX(ANCHOR_ABI_44, sizeof(anchor_prof_t))
#define DPM_ANCHOR_ABI ANCHOR_ABI_45

typedef struct dpm_anchor {
    uint64_t magic;                   /* DPM_ANCHOR_MAGIC */
    uint32_t layout;                  /* DPM_ANCHOR_LAYOUT */
    uint32_t size;                    /* sizeof(dpm_anchor_t) */
    uint64_t abi;                     /* DPM_ANCHOR_ABI */
    char version[16];                 /* DPMALLOC_VERSION */
    uint32_t page;                    /* PAGE */
    uint32_t nlarge_stats;            /* NLARGE_STATS */
    /* data the other rooms export anyway */
    arena_t *const *arenas;           /* [MAX_ARENAS] */
    const unsigned *narenas_total;
    const global_t *g;
    const sc_info_t *sc_table;        /* [NCLASSES] */
    const bool *cpu_caches_on;
    const opt_desc_t *opt_table;      /* [*opt_table_len]: the options in effect */
    const unsigned *opt_table_len;
    /* references to static counters (each a pointer to read first) */
    const size_t *const *metadata_bytes;        /* base.c */
    const size_t *const *guarded_total;         /* guarded.c */
    const size_t *const *guarded_live;
    const list_t *const *tcaches_live;          /* tcache.c: of tcache_t by link */
    tc_exited_t *const *const *tcaches_exited;  /* [MAX_ARENAS] */
    cpu_cache_t *const *const *cpu_caches;      /* cpu_cache.c: [CPU_SLOTS_MAX] */
    const uint32_t *const *cpu_tag_objsize;     /* [CPU_NTAGS] */
    large_cache_t *const *const *large_caches;  /* large_cache.c: [ncpus] */
    const unsigned *const *large_ncpus;
    const anchor_array_t *transfer;             /* transfer.c: the stacks' counts */
    const anchor_ptr_table_t *typed_stashes;    /* typed_cache.c: each stash's n[NSMALL] (uint8_t) */
    const anchor_types_t *types;                /* types.c: the type-tag registry */
    const unsigned *const *numa_nnodes;         /* numa.c */
    const uint16_t *const *numa_node_ncpus;     /* [NUMA_MAX_NODES] */
    const anchor_memlimit_t *memlimit;          /* memlimit.c (layout 2) */
    const anchor_prof_t *prof;                  /* prof.c (layout 2) */
} dpm_anchor_t;

/* The references, defined beside their counters. */
extern const size_t *const anchor_ref_metadata_bytes;
extern const size_t *const anchor_ref_guarded_total;
extern const size_t *const anchor_ref_guarded_live;
extern const list_t *const anchor_ref_tcaches_live;
extern tc_exited_t *const *const anchor_ref_tcaches_exited;
extern cpu_cache_t *const *const anchor_ref_cpu_caches;
extern const uint32_t *const anchor_ref_cpu_tag_objsize;
extern large_cache_t *const *const anchor_ref_large_caches;
extern const unsigned *const anchor_ref_large_ncpus;
extern const anchor_array_t anchor_ref_transfer;
extern const anchor_ptr_table_t anchor_ref_typed_stashes;
extern const anchor_types_t anchor_ref_types;
extern const unsigned *const anchor_ref_numa_nnodes;
extern const uint16_t *const anchor_ref_numa_node_ncpus;
extern const anchor_memlimit_t anchor_ref_memlimit;
extern const anchor_prof_t anchor_ref_prof;


#endif
