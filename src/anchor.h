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
#include "cpu_cache.h"
#include "global.h"
#include "large_cache.h"
#include "sizeclass.h"
#include "tcache.h"
#include "transfer.h"
#include "typed_cache.h"

#define DPM_ANCHOR_MAGIC 0x524f48434e414d44ull   /* "DMANCHOR" little-endian */
#define DPM_ANCHOR_LAYOUT 1u                      /* raised when the anchor itself changes */
#define DPM_ANCHOR_SYMBOL "dpmalloc_stat_anchor"

/* A fingerprint of every layout the tool reads: the same headers give the
 * same value in the library and in the tool, and a changed struct a
 * different one (the tool refuses to read then). */
#define ANCHOR_MIX(h, v) (((h) ^ (uint64_t)(v)) * 0x100000001b3ull)
#define DPM_ANCHOR_ABI                                                                                  \
    ANCHOR_MIX(ANCHOR_MIX(ANCHOR_MIX(ANCHOR_MIX(ANCHOR_MIX(ANCHOR_MIX(ANCHOR_MIX(ANCHOR_MIX(            \
    ANCHOR_MIX(ANCHOR_MIX(ANCHOR_MIX(ANCHOR_MIX(ANCHOR_MIX(ANCHOR_MIX(ANCHOR_MIX(ANCHOR_MIX(            \
    0xcbf29ce484222325ull, sizeof(arena_t)), sizeof(bin_t)), offsetof(arena_t, bins)),                 \
    offsetof(arena_t, ph)), offsetof(arena_t, large)), sizeof(page_heap_t)), sizeof(tcache_t)),        \
    offsetof(tcache_t, stats)), offsetof(tcache_t, stashes)), sizeof(tc_exited_t)),                    \
    sizeof(cpu_cache_t)), sizeof(large_cache_t)), sizeof(sc_info_t)), MAX_ARENAS * 1000 + NSMALL),     \
    NCLASSES * 1000 + TC_MAX_CLASSES), CPU_SLOTS_MAX * 1000 + CPU_NTAGS + TYPED_STASH_CPUS * 1000000ull)

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


#endif
