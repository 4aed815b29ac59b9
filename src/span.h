/*
 * span.h - the two descriptors of the page layer.
 *
 * A segment is one OS mapping (a multiple of 4 MiB, 4 MiB aligned) owned by
 * one arena; its first page holds its header. A span describes a run of
 * pages that is either free (in a run index), a slab of small objects, or
 * one large block. The page map (radix.h) gives each page's span.
 *
 * Page-map invariant (what makes frees of bad pointers safe to check):
 * every non-NULL entry points to the span that currently covers that page
 * and is tagged with that span's tcache_class (span_entry). Slabs map all
 * their pages; large blocks and free runs map their first and last page
 * only; every other entry is NULL.
 *
 * Owns: the layouts and the pointer -> span lookup. Touches: radix, and
 * list.h for the links.
 */
#ifndef DPM_SPAN_H
#define DPM_SPAN_H

#include "list.h"
#include "radix.h"
#include "sizeclass.h"

enum span_kind { SPAN_FREE = 1, SPAN_SLAB = 2, SPAN_LARGE = 3 };
/* Free-run states. Dirty: freed, resident. Muzzy: MADV_FREE'd. Clean:
 * reads as zero. Retained: resident or partly released, contents unknown,
 * and a purge of it was refused or cannot work (hugetlb edges): decay
 * never retries it, allocation reuses it like a dirty run. Busy: out of
 * every index while a purge runs outside the arena lock; nothing may
 * allocate, grow into or coalesce with it. */
enum run_state { RUN_DIRTY = 0, RUN_MUZZY = 1, RUN_CLEAN = 2, RUN_RETAINED = 3, RUN_NSTATES = 4, RUN_BUSY = 5 };
#define TC_NONE 255   /* tcache_class of spans whose blocks bypass thread caches */
/* The tcache_class values of NUMA node arenas' blocks (page-map tags
 * 136..240): node k < TC_NODE_GROUPS tags its class c blocks
 * TC_NODE_BASE + k * NSMALL + c, so that a free finds the bin of the
 * block's node in a CPU's cache by the tag alone (cpu_cache.h). Nodes
 * from TC_NODE_GROUPS up keep the manual arenas' tags (tcache.h). The
 * tcache_class ranges: 0..34 small classes, 35..71 thread caches' large
 * classes, 72..99 and 240..254 aligned-at-offset blocks, 100..134 manual
 * arenas, 135..239 node arenas, 255 TC_NONE. */
#define TC_NODE_BASE 135
#define TC_NODE_GROUPS 3
#define TC_NODE_END (TC_NODE_BASE + TC_NODE_GROUPS * NSMALL)
_Static_assert(TC_NODE_BASE >= 100 + NSMALL && TC_NODE_END <= 240 && TC_NODE_END < TC_NONE,
               "node tags stay inside 135..239, past the manual arenas' 100..134, before 240..254");
/* Whether tcache_class k is a node arena's, and which node and class. */
DPM_INLINE bool tc_class_is_node(unsigned k) { return k - TC_NODE_BASE < TC_NODE_GROUPS * NSMALL; }
DPM_INLINE unsigned tc_node_class(unsigned node, unsigned c) { return TC_NODE_BASE + node * NSMALL + c; }
DPM_INLINE unsigned tc_node_of_class(unsigned k) { return (k - TC_NODE_BASE) / NSMALL; }
DPM_INLINE unsigned tc_node_size_class(unsigned k) { return (k - TC_NODE_BASE) % NSMALL; }
/* The tcache_class values of phased bins (aligned-at-offset blocks of
 * automatic arenas, arena_special_bin): two ranges, 72..99 and 240..254,
 * the ones no class, manual-arena class (tcache.h) or node tag uses. A
 * (class, phase) pair takes the next free value when its first bin is
 * made, for every arena's bin of that pair; once all are taken, new pairs
 * keep TC_NONE (their blocks bypass every cache). The CPU caches give
 * each such tag a bin of its own (cpu_cache.h); thread caches give them
 * none (always full: their frees go home). */
#define TC_PHASED_A_FIRST 72
#define TC_PHASED_A_END 100
#define TC_PHASED_B_FIRST 240
#define TC_PHASED_B_END 255
#define TC_PHASED_NTAGS ((TC_PHASED_A_END - TC_PHASED_A_FIRST) + (TC_PHASED_B_END - TC_PHASED_B_FIRST))
_Static_assert(TC_PHASED_B_FIRST >= TC_NODE_END && TC_PHASED_B_END <= TC_NONE,
               "the phased tags' high range lies past the node tags (135..239) and below TC_NONE");
DPM_INLINE bool tc_class_is_phased(unsigned k)
{
    return (k >= TC_PHASED_A_FIRST && k < TC_PHASED_A_END) || (k >= TC_PHASED_B_FIRST && k < TC_PHASED_B_END);
}
/* The i-th phased tcache_class (i < TC_PHASED_NTAGS), and back. */
DPM_INLINE unsigned tc_phased_class_at(unsigned i)
{
    return i < TC_PHASED_A_END - TC_PHASED_A_FIRST ? TC_PHASED_A_FIRST + i
                                                    : TC_PHASED_B_FIRST + i - (TC_PHASED_A_END - TC_PHASED_A_FIRST);
}
DPM_INLINE unsigned tc_phased_index(unsigned k)
{
    return k < TC_PHASED_A_END ? k - TC_PHASED_A_FIRST : k - TC_PHASED_B_FIRST + (TC_PHASED_A_END - TC_PHASED_A_FIRST);
}

struct arena;
struct bin;
struct segment;

#define SLAB_KEYED_WORDS 2
#define SLAB_KEYED_OBJS (SLAB_KEYED_WORDS * 64)

typedef struct span {
    /* Read by the free fast path; fixed while any block of the span lives. */
    uintptr_t base;          /* slab: first object; large: the user pointer */
    uint64_t div_inv;        /* (p - base) -> object index, see span_index_of */
    uint64_t last_index;     /* slab: objects - 1; large: 0 (64 bits: compared in place) */
    uint8_t div_shift;
    uint8_t tcache_class;    /* the cache bin that takes the block (its class's, a manual
                                arena's class + TC_MANUAL_BASE, a phased tag); set before
                                the span is mapped, or by ph_set_tcache_class, which re-tags
                                its page-map entries */
    uint8_t kind;            /* enum span_kind */
    uint8_t state;           /* free runs: enum run_state */
    uint8_t guarded;         /* large, secure mode: its last page has no access (arena.c) */
    uint8_t prof_sampled;    /* large: a sampled block of the heap profile (prof.h) */

    uintptr_t start;         /* first page */
    size_t npages;
    struct segment *seg;
    struct arena *arena;
    list_node_t link;                  /* run-index slot, or a bin's nonfull or emptied slabs */
    list_node_t lru;                   /* decay order of dirty/muzzy runs */

    /* Large blocks (here, so that a large block's descriptor is its first
     * two cache lines: large operations often run with a cold cache, and
     * every line they touch costs a miss) */
    size_t usable;           /* bytes from base to the end of the run */
    size_t requested;        /* bytes last asked for (malloc or realloc) */
    uint32_t size_class;
    uint16_t type_id;        /* typed large blocks: their type tag */
    uint8_t parked;          /* freed into a CPU's large cache (large_cache.h) or secure mode's
                                quarantine (quarantine.c: how it holds the pages); 0: live */
    uint8_t grew;            /* realloc grew it: cached whole when freed (large_cache.h) */
    uint8_t prof_class;      /* prof_sampled: 1 + the slab class the same request would have
                                had unsampled, whose usable bytes it reports (0: its run's) */
    /* Live large blocks: the CPU's large cache whose budget holds the
     * block's slack, its pages past `usable` (kept for realloc to grow
     * into, large_cache.h), or NULL. Written under that cache's lock,
     * released when cleared: readers of npages load it with acquire. */
    struct large_cache *slack_in;

    uint64_t freed_at_ns;              /* free runs: when they became dirty/muzzy */

    /* Slabs */
    struct bin *bin;
    uint16_t *type_ids;      /* typed slabs: the type tag of each object */
    uint32_t nfree;
    uint32_t objsize;
    uint64_t free_bits[SLAB_BITMAP_WORDS];  /* 1 = free object */
    /* 1 = a flush brought the free object home: it may hold the thread
     * caches' free key (tcache.h) until a fill takes it or the slab goes
     * back (slab_release clears it then). Only the first SLAB_KEYED_OBJS
     * objects are tracked (a descriptor per span stays small: every page
     * run has one); later objects of the small classes' big slabs count as
     * keyed always, cleared at handout. Bin lock. */
    uint64_t keyed_bits[SLAB_KEYED_WORDS];
    uint8_t on_list;         /* slab is on its bin's nonfull list */
} CACHE_ALIGNED span_t;      /* its lines are the lines a look-up touches */

typedef struct segment {
    uintptr_t base;
    size_t size;
    size_t npages;
    size_t first_page;       /* pages before it hold this header */
    struct arena *arena;
    size_t free_pages;
    bool hugetlb;            /* MAP_HUGETLB: only whole huge pages can be purged */
    uint8_t lg_hugepage;     /* hugetlb: log2 of its huge page size (21, 30) */
    bool sourced;            /* from the heap's page source: its calls, never the kernel's */
    bool reserved;           /* dpm_reserve: prefaulted, never purged or given back */
    list_node_t link;        /* the page heap's segments (or its list to give back) */
} segment_t;

DPM_INLINE span_t *span_of(const void *p) { return radix_span((uintptr_t)p); }

/* The tag of a page-map entry: tcache_class + 1, so that TC_NONE wraps to
 * 0, the tag of an empty entry. The thread cache keeps the bin of tag t at
 * index t of its bins-by-tag view (tcache.h), where bin 0 is a dummy that
 * is always empty and full: a free sees "full" for foreign pointers and
 * uncached blocks alike, with no separate NULL test. */
DPM_INLINE unsigned tc_tag_of_class(unsigned tcache_class) { return (tcache_class + 1) & RADIX_TAG_MASK; }

/* The page-map entry of span s (NULL: no span). */
DPM_INLINE uintptr_t span_entry(const span_t *s)
{
    dpm_assert((uintptr_t)s >> (64 - RADIX_TAG_BITS) == 0);
    return s == NULL ? 0 : (uintptr_t)s << RADIX_TAG_BITS | tc_tag_of_class(s->tcache_class);
}

DPM_INLINE uint64_t rotate_right(uint64_t x, unsigned n) { return (x >> n) | (x << ((-n) & 63)); }

/* True if p is the start of a live-or-cached block of span s: one multiply,
 * one rotate, one compare (divisibility by the object size, exact). */
DPM_INLINE bool span_is_block_start(const span_t *s, uintptr_t p)
{
    uint64_t x = (uint64_t)(p - s->base) * s->div_inv;
    return rotate_right(x, s->div_shift) <= s->last_index;
}

/* Index of the block at p, or a value above last_index if p is not a
 * block start of s. */
DPM_INLINE uint64_t span_block_index(const span_t *s, uintptr_t p)
{
    return rotate_right((uint64_t)(p - s->base) * s->div_inv, s->div_shift);
}

/* True if block idx sits free in its slab (large blocks: never). A racy
 * read by design: it is only a misuse check, re-done under the bin lock. */
DPM_INLINE bool span_block_is_free(const span_t *s, uint64_t idx)
{
    const uint64_t *w = s->free_bits + idx / 64;
    return (__atomic_load_n(w, __ATOMIC_RELAXED) >> (idx % 64)) & 1;
}

DPM_INLINE size_t span_index_of(const span_t *s, uintptr_t p)
{
    uint64_t x = (uint64_t)(p - s->base) * s->div_inv;
    return (size_t)rotate_right(x, s->div_shift);
}

DPM_INLINE size_t span_bytes(const span_t *s) { return s->npages << LG_PAGE; }
DPM_INLINE uintptr_t span_end(const span_t *s) { return s->start + span_bytes(s); }

#endif
