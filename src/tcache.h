/*
 * tcache.h - thread caches: per thread, per size class, a bounded stack of
 * free blocks. malloc pops, free pushes; a miss fills half a stack from the
 * arena's bin in one locked batch, an overflow flushes half a stack back.
 * Blocks of automatic arenas freed by a thread other than their allocator
 * simply join that thread's cache and go home in its next flush (batched
 * remote free); blocks of manual arenas join only the caches of threads
 * bound to their arena (see below).
 * Caches are trimmed by low water: every few slow-path events one bin
 * gives back 3/4 of the blocks it did not need since its last trim.
 * Large blocks are not here: they go to the CPUs' large caches
 * (large_cache.h), whichever front end a thread uses. Where the CPU
 * caches run, a thread makes its cache only when it needs one of its own
 * (tcache_make_own).
 *
 * The fast paths are inline in alloc.h; this room owns the slow halves,
 * creation at a thread's first allocation, binding to arenas, tuning,
 * teardown at thread exit, the fast path's size -> bin table, and what
 * the page-map tags of cached blocks mean (TC_MANUAL_BASE). May call:
 * arena, bin.
 */
#ifndef DPM_TCACHE_H
#define DPM_TCACHE_H

#include "annotate.h"
#include "arena.h"
#include "large_cache.h"

/* Indexed by a span's tcache_class, which is TC_NONE (255) for blocks no
 * cache takes: bin 255 is always empty and full. The free fast path
 * indexes the bins by page-map tag instead (tc_bin_of_tag), which is
 * tcache_class + 1, and 0 for TC_NONE and foreign pointers: the bin just
 * before bins[0] ("none") is always empty and full too. */
#define TC_NBINS 256
#define TC_MAX_CLASSES 72       /* classes a thread cache can hold (up to 8 MiB) */
/* Blocks of manual arenas carry tcache_class = class + TC_MANUAL_BASE, a
 * cache bin that never has slots: the free fast path finds it full and
 * leaves the block to the slow path, which caches it (in bin `class`) only
 * for a thread bound to the block's arena (see below). The arenas learn
 * these tags at init (tcache_init_bin_tags). */
#define TC_MANUAL_BASE 100
_Static_assert(TC_MANUAL_BASE >= TC_MAX_CLASSES && TC_MANUAL_BASE + TC_MAX_CLASSES <= TC_NONE,
               "manual tags name bins that no class uses");
_Static_assert(TC_MANUAL_BASE + NSMALL <= TC_NODE_BASE, "manual tags end before the node arenas' (span.h)");
_Static_assert(TC_PHASED_A_FIRST >= TC_MAX_CLASSES && TC_PHASED_A_END <= TC_MANUAL_BASE,
               "phased tags name bins that no class or manual-arena class uses (span.h)");
/* The thread caches' bin that may hold a cached block of tcache_class k
 * (the free key's lookup, tcache_bin_for): a plain class's own, a manual
 * arena's or a node arena's (span.h) its size class's; a phased tag's
 * own bin, which no thread cache gives slots (their frees go home). */
DPM_INLINE unsigned tc_class_of(unsigned k)
{
    if (k < TC_MANUAL_BASE || tc_class_is_phased(k))
        return k;
    return tc_class_is_node(k) ? tc_node_size_class(k) : k - TC_MANUAL_BASE;
}
#define TC_NCACHED_LIMIT 4096   /* a bin's slots must span less than 64 KiB */
#define TC_GC_EVERY 64          /* slow-path events between trims */

/* A bin's blocks sit in [head, top); pop is *head++, push is *--head.
 * Three marks are compared by their low 16 bits only (a bin spans less
 * than 64 KiB, so top itself is head plus the low 16 bits' distance):
 * low water (pops reaching it note a new minimum), empty (head == top)
 * and full (head == top - ncached_max).
 *
 * hot mirrors *head, the block the next pop returns: a pop hands out hot,
 * which the last push stored at a fixed address, so a malloc right after
 * a free waits for the free's bin (store forwarding) but not for the
 * free's load of head. */
typedef struct tc_bin {
    void **head;
    void *hot;                   /* == *head (NULL when empty: *top is NULL) */
    uint16_t low_lo;
    uint16_t top_lo;
    uint16_t full_lo;
    uint16_t ncached_max;
    uint64_t nrequests;          /* allocations asked of this bin */
} tc_bin_t;

/* A cache's counters per class; the sums of exited threads' caches are
 * kept per arena (tcaches_for_each_exited). */
typedef struct tc_totals {
    uint64_t nrequests, nmisses, nfills, nflushes;
} tc_totals_t;

/* Cycle samples of slow-path calls (stats: cycles per call, VPP style). */
typedef struct slow_samples {
    uint64_t alloc_n, alloc_cycles, free_n, free_cycles;
} slow_samples_t;

typedef struct tc_bin_stats {
    uint64_t nmisses, nfills, nflushes;   /* owner writes, stats read (counter_*) */
    uint32_t cap;                /* slots below top that belong to the bin */
    /* Bytes below top whose slots a fill of the empty bin wrote with
     * blocks no flush had brought home, and no push has written since
     * (they are at or above the low-water mark, which pushes never
     * reach): their blocks hold no free key, so a low-water pop hands
     * them out without a store (tc_bin_pop). Owner only. */
    uint16_t fresh;
} tc_bin_stats_t;

/* A thread caches a block of a manual arena only while it is bound to
 * that arena; every other thread's free of such a block goes home at
 * once. So reset and destroy, refused while other threads are bound
 * (arena.h), leave no cached block in released memory, whichever thread
 * freed what. The free fast path never decides this: a manual arena's
 * blocks carry tag class + TC_MANUAL_BASE + 1, whose bin never has slots
 * (always full), and the slow path picks the bin (tcache_bin_for). */
/* A few blocks of one phased bin (aligned-at-offset requests), fetched in
 * one locked batch: the VPP case allocates many such blocks in a row. Only
 * allocation is cached; their frees go home directly. Threads on their own
 * cache only: on the CPU caches, a phased bin's tag has a bin of its own
 * (span.h, cpu_cache.h), for frees too. A batch is at most
 * TC_PHASED_BATCH blocks and TC_STASH_BYTES, so a thread's stashes hold at
 * most 4 x 64 KiB: an idle thread, which nothing but itself may flush,
 * keeps no more. The aligned bins of the large classes (sizeclass.h) go
 * through a stash one block at a time, so that an idle thread keeps none
 * of theirs, whose 256 KiB slabs it would pin in its arena. The owner's
 * idle trim (tcache_event) sends home a stash unused for a round. */
#define TC_PHASED_STASHES 4
#define TC_PHASED_BATCH 16
#define TC_STASH_BYTES ((size_t)65536)
typedef struct phased_stash {
    bin_t *bin;
    unsigned n;
    bool used;                  /* served a block since the last trim round */
    size_t bytes;               /* n x the bin's object size (read racily by stats) */
    void *objs[TC_PHASED_BATCH];
} phased_stash_t;

typedef struct tcache {
    /* Set at creation and exit only, so it may share the line a free
     * reads first. */
    list_node_t link;           /* on the live or the exited caches */
    arena_t *arena;             /* set with tcache_set_arena */
    bool arena_manual;          /* arena->manual, in the line a free reads first */
    unsigned stash_next;        /* round-robin victim among the stashes */
    /* In the first line: a free whose tag is 0 (a large block, a
     * foreign pointer) reads nothing else of the cache. Bins
     * are 32 bytes from here, so none straddles two lines. */
    tc_bin_t none;              /* tag 0: all zero, so empty and full */
    tc_bin_t bins[TC_NBINS];
    phased_stash_t stashes[TC_PHASED_STASHES];
    uint32_t events;
    uint32_t gc_next;
    tc_bin_stats_t stats[TC_MAX_CLASSES];
    slow_samples_t samples;
    /* thread.tcache.ncached_max for the large classes: the thread's own
     * limit per class in the CPUs' large caches (large_tuned; otherwise
     * tcache_nslots_large each) */
    bool large_tuned;
    uint8_t large_max[LARGE_CACHE_CLASSES];
} CACHE_ALIGNED tcache_t;
_Static_assert(TC_MAX_CLASSES - NSMALL == LARGE_CACHE_CLASSES, "the large caches count the large classes a bin names");

/* Indexed by the size itself, the offset in tcache_t.bins of the bin of
 * the size's class (class * sizeof(tc_bin_t)): the malloc fast path gets
 * its bin with one load, saving the rounding (size + 15) >> 4 and the
 * scaling of the class for the most common sizes. Built from the size
 * classes before main and at init (tcache_fill_lookup). 2 KiB. */
#define TC_LOOKUP_MAX 1024
extern uint16_t tc_bin_offset_of_size[TC_LOOKUP_MAX + 1];
_Static_assert(NSMALL * sizeof(tc_bin_t) <= UINT16_MAX, "bin offsets fit the table");

/* The bin of a page-map tag (radix.h): "none" for tag 0, bins[tag - 1]
 * otherwise, with one scaled add. */
_Static_assert(offsetof(tcache_t, bins) == offsetof(tcache_t, none) + sizeof(tc_bin_t), "none precedes bins[0]");
_Static_assert(offsetof(tcache_t, none) == 32 && sizeof(tc_bin_t) == 32, "the arena and none share a line; bins never straddle two");
DPM_INLINE tc_bin_t *tc_bin_of_tag(tcache_t *tc, uintptr_t tag)
{
    return (tc_bin_t *)((char *)tc + offsetof(tcache_t, none) + tag * sizeof(tc_bin_t));
}

#define TC_LEAF_SHIFT (LG_PAGE + RADIX_LG_LEAF)
#define TC_NO_LEAF UINTPTR_MAX

DPM_INLINE bool tc_bin_full(const tc_bin_t *b) { return (uint16_t)(uintptr_t)b->head == b->full_lo; }
/* head and the slots are written with relaxed atomic stores (plain
 * moves): other threads read them racily (statistics, the double-free
 * lookup in confirm_not_cached, alloc.h). */
DPM_INLINE void tc_bin_push(tc_bin_t *b, void *p)
{
    void **h = b->head - 1;
    __atomic_store_n(h, p, __ATOMIC_RELAXED);
    /* release: a reader that sees the new head sees p in its slot (a plain
     * move on x86) */
    __atomic_store_n(&b->head, h, __ATOMIC_RELEASE);
    b->hot = p;
}

/* Every move of head other than push goes through here (alloc_fast
 * inlines it: its h[1] is the new *head). */
DPM_INLINE void tc_bin_set_head(tc_bin_t *b, void **h)
{
    __atomic_store_n(&b->head, h, __ATOMIC_RELAXED);
    b->hot = *h;
}
/* The free key: a free that caches a block writes TC_FREE_KEY (not the
 * golden-ratio constant many hash functions store) into the
 * block's bytes 8..11 (every class is at least 16 bytes); a handout
 * clears them. A flush sends the block home with the key (its slab marks
 * it: span_t.keyed_bits), so a double free of a block a fill brought back
 * is found too; a fill's other blocks hold no key and need no store. A free
 * that finds the key there is probably a double free of a cached block;
 * confirm_not_cached (alloc.h) looks the block up in the caches before it
 * aborts, so a program that
 * happens to store that 32-bit value there only pays a lookup. A constant
 * (odd, so that the low half of no aligned pointer equals it), compared
 * and stored as an immediate: the key costs the free fast path one
 * compare and one store, no load. */
#define TC_FREE_KEY 0xa3d95e17u
DPM_INLINE uint32_t *tc_key_word(void *p) { return (uint32_t *)((char *)p + 8); }
DPM_INLINE void tc_block_handed_out(void *p)
{
    DPM_ANN_OPEN_KEY(p);
    *tc_key_word(p) = 0;
}

/* Bins without slots have head NULL and marks 0: count 0, top NULL. */
DPM_INLINE unsigned tc_bin_count(const tc_bin_t *b)
{
    return (uint16_t)(b->top_lo - (uint16_t)(uintptr_t)b->head) / sizeof(void *);
}
DPM_INLINE void **tc_bin_top(const tc_bin_t *b)
{
    return (void **)((uintptr_t)b->head + (uint16_t)(b->top_lo - (uint16_t)(uintptr_t)b->head));
}

/* Pop from bin c of tc for a handout (the key is cleared unless the
 * block is a fill's, untouched since: tc_bin_stats_t.fresh), noting a new
 * low water if this pop makes one. NULL when empty. */
DPM_INLINE void *tc_bin_pop(tcache_t *tc, unsigned c)
{
    tc_bin_t *b = &tc->bins[c];
    void **h = b->head;
    if (likely((uint16_t)(uintptr_t)h != b->low_lo)) {
        tc_bin_set_head(b, h + 1);
        tc_block_handed_out(*h);
        return *h;
    }
    if (likely((uint16_t)(uintptr_t)h != b->top_lo)) {
        void *p = *h;
        bool fresh = (uint16_t)(b->top_lo - (uint16_t)(uintptr_t)h) <= tc->stats[c].fresh;
        tc_bin_set_head(b, h + 1);
        b->low_lo = (uint16_t)(uintptr_t)(h + 1);
        if (fresh)
            DPM_ANN_OPEN_KEY(p);
        else
            tc_block_handed_out(p);
        return p;
    }
    return NULL;
}

/* The bin of tc that may hold a block of span s (bin c for class c), or
 * TC_NONE: a block no thread cache takes (a phased bin's too), or one of
 * a manual or node arena other than the one tc's thread is bound to. */
DPM_INLINE unsigned tcache_bin_for(const tcache_t *tc, const span_t *s)
{
    unsigned k = s->tcache_class;
    if (likely(k < TC_MAX_CLASSES))
        return k;
    if (k == TC_NONE || tc_class_is_phased(k) || s->arena != tc->arena)
        return TC_NONE;
    return tc_class_of(k);
}

enum thread_state { THREAD_NEW = 0, THREAD_CACHED = 1, THREAD_EXITING = 2, THREAD_NOCACHE = 3 };

/* What the free fast path reads of the calling thread: one TLS object,
 * so that a shared object reaches it through one address. */
typedef struct thread_hot {
    /* The page-map leaf of the thread's last free through its cache: the
     * leaf covering the 4 GiB of addresses p with p >> TC_LEAF_SHIFT ==
     * leaf_key, stored as leaf_base, the leaf minus leaf_key's first
     * entry index, so that the entry of p is leaf_base[p >> LG_PAGE].
     * Kept here, apart from the cache, so that a free's page-map entry
     * and then its span are the second and third loads of its dependency
     * chain, not the third and fourth (the cache's own line is loaded
     * meanwhile): a free that runs with a cold cache, a large block's
     * after the program wrote megabytes, pays one miss less. Leaves are
     * never freed, so a key stays valid whichever cache the thread uses;
     * frees that alternate between two leaves pay a mispredicted branch
     * and free_leaf_miss each, which is why leaves are that large.
     * TC_NO_LEAF (no pointer matches it): a thread that never freed
     * through a cache, or whose next free must reach free_leaf_miss (a
     * thread that may make its cache there). */
    uintptr_t leaf_key;
    uintptr_t leaf_base;
    /* The thread's cache, &tcache_empty while it has none in use (not
     * made yet, disabled, being emptied by its owner, exiting). Only the
     * owner writes it: no other thread touches a cache's small bins. */
    tcache_t *tcache;
    /* The CPU caches' table the thread's sequences index (cpu_cache.h):
     * cpu_cache_table, or the all-locked table while the thread uses
     * its own cache or none. */
    struct cpu_cache *const *cpu_table;
    /* The table malloc's pop indexes: cpu_table, or with numa:true the
     * table of the node of the CPU the thread last missed on
     * (cpu_cache_node_tables): on another node's CPU its entry is
     * locked, and the miss picks the new node's. */
    struct cpu_cache *const *pop_table;
    /* jemalloc's thread.allocated / thread.deallocated: the usable bytes
     * of the blocks this thread was handed and gave back (every entry
     * point, counted where the block's size is at hand: alloc.h). Here,
     * beside the fields the fast paths use, so that the count is one add
     * through the TLS address they already hold. Read by other threads
     * only through thread.allocatedp, racily, as in jemalloc. */
    uint64_t allocated, deallocated;
} thread_hot_t;
extern __thread thread_hot_t tls_thread;
extern __thread uint8_t tls_state;   /* enum thread_state */

/* True if the thread's leaf covers address a: thread_leaf_entry(a) is
 * then a's page-map entry. */
DPM_INLINE bool thread_leaf_covers(uintptr_t a) { return a >> TC_LEAF_SHIFT == tls_thread.leaf_key; }
DPM_INLINE uintptr_t thread_leaf_entry(uintptr_t a)
{
    return __atomic_load_n((const uintptr_t *)(tls_thread.leaf_base + (a >> LG_PAGE) * sizeof(uintptr_t)),
                           __ATOMIC_RELAXED);
}
/* Makes leaf, the page map's leaf of address a, the thread's leaf. */
DPM_INLINE void thread_leaf_set(uintptr_t a, const uintptr_t *leaf)
{
    tls_thread.leaf_base = (uintptr_t)leaf - ((a >> TC_LEAF_SHIFT) << RADIX_LG_LEAF) * sizeof(uintptr_t);
    tls_thread.leaf_key = a >> TC_LEAF_SHIFT;
}
extern __thread arena_t *tls_arena;
extern tcache_t tcache_empty;

/* The calling thread's cache (&tcache_empty when it has none in use). */
DPM_INLINE tcache_t *tcache_mine(void) { return tls_thread.tcache; }

/* Number of cached classes for a tcache_max. */
unsigned tcache_classes_for(size_t tcache_max);
/* At init: whether threads' caches get small-bin slots only on demand
 * (tcache_ensure_slots): when the CPU caches hold the small blocks. */
void tcache_set_small_slots_lazy(bool lazy);
/* Gives tc's small bins their slots if they have none (a thread that
 * starts using its own cache); false without memory (those bins stay
 * empty and full: their blocks bypass the cache). */
bool tcache_ensure_slots(tcache_t *tc);
/* Starts caching for the calling (THREAD_NEW) thread: THREAD_CACHED,
 * with its own cache where the CPU caches do not run, with none (it
 * keeps &tcache_empty) where they do; false if it cannot (exiting, OOM,
 * disabled). */
bool tcache_create_for_thread(void);
/* The calling THREAD_CACHED thread's own cache, made now if it has none
 * (a thread on the CPU caches that needs a stash, a binding, tuned bins);
 * NULL without memory or outside THREAD_CACHED. */
tcache_t *tcache_make_own(void);
/* Bin c is empty: fills it and returns one block, or NULL. */
void *tcache_alloc_miss(tcache_t *tc, unsigned c);
/* Bin c (< TC_MAX_CLASSES) is full: flushes half of it and pushes p
 * (keyed by the caller). */
void tcache_free_full(tcache_t *tc, unsigned c, void *p);
/* The thread caches' part of the lookup of confirm_not_cached: does p sit in
 * bin `bin` of some thread's cache? For callers that must answer, not
 * abort (dpm_rte_malloc_validate). Takes tcaches_lock. */
bool tcache_holds_block(const void *p, unsigned bin);
/* Fills tc_bin_offset_of_size (init; idempotent). */
void tcache_fill_lookup(void);
/* Tells the arenas the tag of each small class's blocks
 * (arena_set_bin_tags): its cache bin, for the g.tcache_nclasses cached
 * classes (plus TC_MANUAL_BASE in manual arenas); TC_NONE for the rest.
 * At init, before the first arena. */
void tcache_init_bin_tags(void);
/* A block of phased bin `bin` from the calling thread's stash, refilled
 * in a batch when empty; NULL when the bin has nothing to give. */
void *tcache_phased_alloc(tcache_t *tc, bin_t *bin);
/* Sends the calling thread's small bins and stashes home (malloc_trim,
 * arena.<i>.purge) and returns the bytes. Another thread's are never
 * touched: its fast paths take no lock, so only its owner may move them.
 * Nothing from inside a page source's callback. */
size_t tcache_reclaim_mine(void);
/* Empties every bin of tc back to the arenas. */
void tcache_flush_all(tcache_t *tc);
/* Empties the calling thread's cache (if it has one in use) so that it
 * holds no block on return, also when a page source's callback allocates
 * and frees during the flush: thread.tcache.flush, and before an arena
 * reset by its bound thread. EBUSY from inside a page source's callback
 * (as for thread_bind_arena, thread_tcache_enable, thread_ncached_max_set). */
int tcache_flush_mine(void);
/* Counts a slow-path event; every TC_GC_EVERY trims one bin. */
void tcache_event(tcache_t *tc);
/* The arena this thread allocates from. */
arena_t *thread_arena(void);
/* Makes the calling thread's cache (its bins' slots) resident now
 * (dpm_reserve: allocations afterwards take no fault in it). */
void tcache_prefault(void);
/* Moves the calling thread (and its cache, flushed first) to arena a:
 * 0, or EINVAL if a was destroyed (the thread stays where it was). */
int thread_bind_arena(arena_t *a);
/* Turns the calling thread's cache on or off (thread.tcache.enabled). */
int thread_tcache_enable(bool on);
/* ncached_max of the calling thread's bin for size; set it (0..4096).
 * Return 0 or an errno value. */
int thread_ncached_max_get(size_t size, size_t *out);
int thread_ncached_max_set(size_t size_lo, size_t size_hi, unsigned n);
void tcache_thread_exit(void *tc);
/* Calls fn on every live thread cache with the list lock held. */
void tcaches_for_each(void (*fn)(const tcache_t *, void *), void *arg);
/* The counters that exited threads' caches left in one life of an arena
 * (arena_t.incarnation). */
typedef struct tc_exited {
    uint32_t incarnation;
    tc_totals_t totals[TC_MAX_CLASSES];
    slow_samples_t samples;
} tc_exited_t;
/* Calls fn on the exited-thread counters of every arena index that has
 * some, with the list lock held; fn compares the incarnation with the one
 * it knows (the counters of an earlier life of a reused slot are stale). */
void tcaches_for_each_exited(void (*fn)(unsigned arena_index, const tc_exited_t *, void *), void *arg);
void tcaches_prefork(void);
void tcaches_postfork_parent(void);
void tcaches_postfork_child(void);

#endif
