/*
 * arena.h - an arena: a page heap, one bin per small class, a table of
 * phased and typed bins, large-block bookkeeping and decay. Threads are spread over
 * arenas (narenas, default 4 per CPU), each new one to the arena with the
 * fewest threads, so that live threads rarely share locks and new threads
 * reuse the arenas of exited ones.
 *
 * Owns: the arena table, large blocks, decay ticks, and the slabs' trips
 * between page heap and bins (bin fills and flushes). May call: bin,
 * pages, conf (options), types (counters), memlimit (a fill refused at
 * the memory limit runs its registered reclaim, then tries again), fault
 * (its guard pages' reports). Knows nothing of thread
 * caches: the tags its bins put on their blocks are told at init.
 */
#ifndef DPM_ARENA_H
#define DPM_ARENA_H

#include "bin.h"
#include "conf.h"
#include "pages.h"

#define MAX_ARENAS 4096
/* 1024 slots stay for manual arenas (arenas.create) and NUMA node arenas. */
_Static_assert(OPT_NARENAS_MAX + 1024 == MAX_ARENAS, "automatic arenas leave room for manual ones");
#define NLARGE_STATS (NCLASSES - NSMALL)
#define ARENA_NAME_MAX 32

/* Bins other than the plain one of their class: phased (objects laid at an
 * offset) and/or typed (objects carry a type tag), as many as asked for,
 * in an open-addressing hash table on (class, phase, typed). Lookups take
 * no lock: a slot's key is written before its bin pointer is published,
 * and a full table is replaced by a copy twice its size (the old one stays
 * valid for readers that still hold it: tables are metadata, never freed). */
typedef struct special_slot {
    uint32_t key;     /* special_key(); valid once bin is non-NULL */
    bin_t *bin;
} special_slot_t;

typedef struct special_table {
    uint32_t mask;    /* slots - 1, a power of two minus one */
    uint32_t count;   /* bins in it (at most 3/4 of the slots) */
    special_slot_t slots[];
} special_table_t;

typedef struct large_stats {
    uint64_t nmalloc, nfree;
    size_t live_bytes;
} large_stats_t;

typedef struct arena {
    /* A slot's identity: kept when a destroyed slot is reused, so that a
     * thread looking at a slot without arenas_lock reads no field that
     * the reuse rewrites (arena_get, arenas_release_free_memory). */
    dpm_mutex_t lock;              /* page heap, large stats, decay */
    unsigned index;
    bool manual;                   /* made by arenas.create: may be reset/destroyed */
    bool destroyed;                /* slot free for the next arenas.create; written
                                    * under arenas_lock, read atomically */
    /* Threads whose allocations go here (tls_arena); arena_choose picks
     * the automatic arena with the fewest. For a manual arena it
     * is raised only under arenas_lock (arena_bind_thread), and lowered
     * with release order after the thread's cache gave back the arena's
     * blocks: reset and destroy read it under arenas_lock. */
    uint32_t nthreads;
    /* Batches of blocks taken out of a sleeping bound thread's cache that
     * a reclaimer is sending home with no lock held (tcaches_reclaim):
     * reset and destroy refuse with EBUSY meanwhile, as while threads are
     * bound. Raised only while the owner is still bound. */
    uint32_t homing_in_flight;
    /* Held by whoever has runs out of the page heap being purged (the
     * madvise runs without `lock`); reset, destroy, reuse and fork take it
     * first, so they never see those runs missing. Part of the identity: a
     * purger that found the arena without arenas_lock may hold it while
     * the slot is destroyed and reused. */
    dpm_mutex_t purge_lock;
    /* Raised each time a destroyed slot is reused (under arenas_lock), so
     * that bookkeeping kept by index elsewhere can tell the arena's lives
     * apart. */
    uint32_t incarnation;
    /* ---- everything below starts over when a slot is reused ---- */
    page_heap_t ph;
    char name[ARENA_NAME_MAX];
    uint64_t clock_ns;             /* coarse clock, refreshed by ticks */
    uint64_t clock_at_cycles;      /* cpu_cycles() when clock_ns was read */
    uint64_t last_decay_ns;
    uint32_t ticks;
    int node;                      /* NUMA node arena (dpm_malloc_socket), else -1 */
    uint32_t purges_in_flight;     /* page-source purge and free calls under way (lock) */
    uint32_t grows_in_flight;      /* page-source alloc calls under way (lock) */
    int64_t dirty_decay_ms, muzzy_decay_ms;
    bool purge_due;                /* set under lock by ticks, read racily by arena_purge_if_due */
    /* Left by its last thread with its free pages kept (orphaned in
     * arena.c); counted in orphans_pending while set. */
    bool orphan_pending;
    uint64_t orphaned_ns;          /* when orphan_pending was set */
    large_stats_t large[NLARGE_STATS];
    dpm_mutex_t special_lock;      /* creation of special bins */
    special_table_t *special;      /* NULL until the first special bin */
    bin_t bins[NSMALL];
} CACHE_ALIGNED arena_t;

extern arena_t *arenas[MAX_ARENAS];
extern unsigned narenas_total;   /* arenas created so far */
extern unsigned narenas_auto;    /* arenas threads are assigned to (arena_choose) */

/* The tcache_class (page-map tag, span.h) that the blocks of each small
 * class carry: tags[0] in automatic arenas, tags[1] in manual ones,
 * tags[2 + k] in node k's arena (k < TC_NODE_GROUPS; other node arenas
 * take tags[1]). Told once at init by the room above (the thread cache,
 * which alone knows what the tags mean); TC_NONE for every class until
 * then. Bins made afterwards use them. */
#define ARENA_TAG_SETS (2 + TC_NODE_GROUPS)
void arena_set_bin_tags(const uint8_t tags[ARENA_TAG_SETS][NSMALL]);
/* The arena with this index, created on first use; NULL on OOM. */
arena_t *arena_get(unsigned index);
/* The automatic arena for a new thread: the one with the fewest threads
 * (lowest index among equals; a new arena only while all have threads).
 * bind: counts the thread in its nthreads. NULL on OOM. */
arena_t *arena_choose(bool bind);
/* Sets the number of automatic arenas (mallopt M_ARENA_MAX) while only
 * arena 0 exists: every thread so far chose it, so none is stranded in an
 * arena past the new count. False once other arenas exist, or for 0.
 * More than OPT_NARENAS_MAX sets OPT_NARENAS_MAX. */
bool arena_set_auto_count(unsigned n);
/* Bin for objects of class c laid at phase bytes into each slab, typed or
 * not, made on first use; NULL only when out of metadata memory. */
bin_t *arena_special_bin(arena_t *a, unsigned c, uint32_t phase, bool typed);
/* The small class of the blocks whose spans carry phased tcache_class k
 * (span.h), or NSMALL while no bin has that tag. Phased bins of automatic
 * arenas get their tag when made (special_tag in arena.c). */
unsigned arena_phased_tag_class(unsigned k);

/* The phased tags by (class, phase), for an allocation that needs only
 * the tag while its CPU's bin has blocks (no arena, no bin): the key of
 * each tag by tc_phased_index (0: free), and an open-addressing index of
 * the taken ones (entry: tag index + 1, 0: empty). Written once per tag
 * (arena.c), read without a lock. */
#define ARENA_PHASED_INDEX 128
_Static_assert(ARENA_PHASED_INDEX > TC_PHASED_NTAGS, "the index always has an empty entry");
extern uint32_t arena_phased_keys[TC_PHASED_NTAGS];
extern uint8_t arena_phased_index[ARENA_PHASED_INDEX];
DPM_INLINE uint32_t arena_phased_key(unsigned c, uint32_t phase) { return (uint32_t)c << 20 | phase << 1; }
DPM_INLINE uint32_t arena_phased_hash(uint32_t key) { return (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 57); }
/* The phased tcache_class of (class c, phase), or TC_NONE if no bin of
 * that pair has a tag yet. */
DPM_INLINE unsigned arena_phased_tag_find(unsigned c, uint32_t phase)
{
    uint32_t key = arena_phased_key(c, phase);
    for (uint32_t h = arena_phased_hash(key);; h++) {
        unsigned e = __atomic_load_n(&arena_phased_index[h % ARENA_PHASED_INDEX], __ATOMIC_ACQUIRE);
        if (e == 0)
            return TC_NONE;
        if (__atomic_load_n(&arena_phased_keys[e - 1], __ATOMIC_RELAXED) == key)
            return tc_phased_class_at(e - 1);
    }
}
/* Calls fn on every special bin of a: under a->special_lock for a stable
 * view (fork, reset), or racily (stats: a bin made meanwhile may be missed). */
void arena_for_each_special_bin(arena_t *a, void (*fn)(bin_t *, void *), void *arg);
/* Gives back every bin's current slab that holds no object (bins keep an
 * emptied current slab for their next fill): arena.<i>.purge and
 * malloc_trim, so that an idle slab pins neither pages nor its segment.
 * Takes each bin's lock: not with one held. */
void arena_release_idle_slabs(arena_t *a);
/* arenas.create: a new arena (reusing a destroyed slot), index in *out;
 * its segments come from src (copied) if not NULL, and are bound to NUMA
 * node `node` if >= 0 (a node arena: never reset or destroyed).
 * 0, EAGAIN when all MAX_ARENAS exist, ENOMEM. */
int arena_create_manual(const char *name, const page_source_t *src, int node, unsigned *out);
/* Counts one more thread in a (thread.arena), unless a was destroyed:
 * then false. Atomic with respect to reset and destroy. */
bool arena_bind_thread(arena_t *a);
/* The thread that a counted no longer allocates from it, and its cache
 * holds none of a's blocks (release order: reset and destroy see that). */
void arena_unbind_thread(arena_t *a);
/* Discards every block of manual arena `index` at once; its segments go
 * back to the OS. Only the threads bound to an arena cache its blocks
 * (tcache.h), so the reset is refused while any thread but the caller is
 * bound; `callers` is the caller's arena, whose cache the caller flushed.
 * 0, EBUSY, EPERM for automatic arenas, ENOENT for unknown ones. */
int arena_reset(unsigned index, const arena_t *callers);
/* A reset, then the slot becomes free; EBUSY while any thread (the
 * caller too) is bound. Exactly one of concurrent destroys of one arena
 * returns 0. */
int arena_destroy(unsigned index);
typedef struct large_request {
    size_t size;       /* bytes the caller asked for */
    size_t align;      /* power of two; > PAGE means a page-run alignment */
    size_t offset;     /* (p + offset) % align == 0; already reduced mod align */
    bool zero;
    uint16_t type_id;  /* type tag, 0 for none */
} large_request_t;

/* Up to want objects of bin (a bin of some arena) into out, with new
 * slabs from the arena's page heap as needed; returns how many (0: out of
 * memory). keyed (or NULL): as bin_take's. Takes the bin lock, then the
 * arena lock for a new slab. */
unsigned arena_bin_fill(bin_t *bin, void **out, unsigned want, uint8_t *keyed);
/* Returns n validated small objects (any bins, any arenas) to their slabs,
 * one bin lock at a time; slabs left empty go back to their arena's page
 * heap. Reorders objs. Aborts on a double free. */
void arena_bin_flush(void **objs, unsigned n);

void *arena_alloc_large(arena_t *a, const large_request_t *req);
/* The usable bytes a fresh large block of size bytes starting in_page
 * bytes into its first page gets: its class size (whole pages from 16 KiB
 * up to LARGE_ROUND_MAX), else whole pages. */
DPM_INLINE size_t arena_large_usable(size_t size, size_t in_page)
{
    /* the class size by formula (SC_GROUP classes per doubling): realloc
     * asks on every growth, and the class table is one more page to
     * reach with a cold TLB */
    if (in_page == 0 && size > SMALL_MAX && size <= LARGE_ROUND_MAX)
        return round_up(size, (size_t)1 << (lg_floor(size - 1) - lg_floor(SC_GROUP)));
    return round_up((size == 0 ? 1 : size) + in_page, PAGE) - in_page;
}
void arena_free_large(span_t *s);
/* As arena_free_large, for a block whose whole run (its guard page too)
 * was discarded and has access again, and whose own pages were taken
 * out of the memory limit's charge (secure mode's quarantine): its run
 * is filed clean, uncharged. */
void arena_free_large_discarded(span_t *s);
/* The same for a block whose run has access again but kept its pages
 * (and its charge): its run is filed dirty, as arena_free_large's. */
void arena_free_large_reopened(span_t *s);
/* The fault handler's explainer (fault.h): a fault in the guard page
 * after a large block (secure mode) is an overflow past the end of that
 * block while it lives, or, in the guard's upper half right before
 * another large block, an underflow of that one; false for the guard of
 * a freed block otherwise (the quarantine explains it). */
bool arena_guard_explain(uintptr_t addr);
/* Resize a large block in place to the usable size a fresh block of size
 * bytes would get (grow into the next free run, or give the tail back;
 * purge_cut: a cut of SHRINK_PURGE_MIN or more is purged at once); true
 * if its usable size is now at least size. */
bool arena_resize_large_in_place(span_t *s, size_t size, bool purge_cut);
/* Gives the pages of live block s past its usable bytes (its slack, see
 * large_cache.h) back to the page heap, dirty, without changing s->usable
 * (its holder may read it meanwhile). False if no descriptor could be had
 * for the cut: s keeps its pages. */
bool arena_cut_slack(span_t *s);
/* Decay bookkeeping, called with the arena lock held: notes when a purge
 * pass is due. The caller runs it with arena_purge_if_due after dropping
 * the arena lock (madvise never runs under it). */
void arena_tick(arena_t *a);
void arena_after_free(arena_t *a);
/* One bounded purge pass if a tick asked for one and no other thread is
 * purging this arena. Called without a->lock (bin locks may be held). */
void arena_purge_if_due(arena_t *a);
/* arena_tick and arena_purge_if_due for a caller that does not hold
 * a->lock (an operation that did not reach the arena, such as a large cache
 * block's reuse). */
void arena_tick_now(arena_t *a);
/* Brings a->clock_ns up to date (under a->lock) when it may be stale by
 * more than a fraction of a millisecond: a cycle-counter read, and a clock
 * read only after an idle spell. Frees stamp runs with it, so decay counts
 * from the free itself without a clock read per free. */
void arena_clock_refresh(arena_t *a);
/* Purge all free pages now ("arena.<i>.purge"); fully free segments go
 * back to the OS. Returns the pages the kernel released. */
size_t arena_purge_all(arena_t *a);
/* Runs a's decay curves now until nothing more is due (everything: purge
 * all free pages), in bounded batches. Returns the pages released. */
size_t arena_decay_now(arena_t *a, bool everything);
/* A hard memory limit was set at run time: no transparent huge pages in
 * any arena's segments mapped so far (ph_no_thp). Takes each arena lock. */
void arenas_no_thp(void);
/* Whether a has mapped a segment it still holds: an arena without one has
 * no page to purge and no slab to give back, so a refusal's sweep over
 * every arena (idle manual arenas by the thousand) skips it for one lock
 * round trip. Takes a->lock. */
bool arena_holds_pages(arena_t *a);
/* A bounded pass of a's decay curves (a few batches of at most
 * PH_PURGE_MAX_RUNS runs and PH_PURGE_MAX_PAGES pages each): the
 * background thread's pass. */
size_t arena_decay_pass(arena_t *a);
/* Whether a later decay pass of a has pages to purge: dirty pages while
 * dirty decay is on, muzzy pages while muzzy decay is (under a's lock;
 * for the background thread). */
bool arena_decay_work_left(arena_t *a);
/* The threads bound to a (its nthreads, read under its lock: a reuse of
 * the slot rewrites it there). */
unsigned arena_threads(arena_t *a);
/* arena_purge_all on every arena: the last resort before ENOMEM, since
 * free runs of other states or arenas may hold the address space that a
 * new mapping needs (RLIMIT_AS). Takes arena locks one at a time; arena
 * locks are leaves, so callers may hold a bin lock. */
void arenas_release_free_memory(void);
/* Purges the dirty pages of the automatic arenas that their last thread
 * left at least ORPHAN_GRACE_MS before now_ns and that no thread
 * allocated from since (but except's); nothing when there are none (one relaxed load).
 * Called without any arena lock held. */
void arenas_purge_orphans(const arena_t *except, uint64_t now_ns);
/* Whether arenas_purge_orphans(except, now_ns) would purge anything. */
bool arenas_orphans_due(const arena_t *except, uint64_t now_ns);
/* Held while visiting every arena (stats, background decay): arenas are
 * not created, destroyed or re-initialised meanwhile. Never take it while
 * holding a bin or arena lock (fork takes it first). */
void arenas_iteration_lock(void);
void arenas_iteration_unlock(void);
/* Every lock of every arena, for fork. */
void arenas_prefork(void);
void arenas_postfork_parent(void);
void arenas_postfork_child(void);

#endif
