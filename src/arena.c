/*
 * arena.c - arenas (see arena.h): creation and least-loaded choice, phased
 * bins, slabs for bin fills and from bin flushes, large blocks, and the
 * decay clock.
 */
#include "arena.h"

#include "annotate.h"
#include "conf.h"
#include "error.h"
#include "fault.h"
#include "memlimit.h"
#include "os.h"
#include "types.h"

#include <errno.h>
#include <string.h>

arena_t *arenas[MAX_ARENAS];
unsigned narenas_total;
unsigned narenas_auto;
static dpm_mutex_t arenas_lock = DPM_MUTEX_INITIALIZER;

static bool orphaned(const arena_t *a);
static size_t decay_with(arena_t *a, int64_t dirty_ms, int64_t muzzy_ms);

/* Automatic arenas whose orphan_pending is set. */
static unsigned orphans_pending;

/* How long an orphaned arena waits for a new thread to take it before the
 * growth of another arena purges it: a pool that replaces a thread does so
 * within milliseconds; git pack-objects reaches its peak a second after
 * its first delta thread exits. */
#define ORPHAN_GRACE_MS 50

static bool orphan_claim(arena_t *a)
{
    if (!__atomic_load_n(&a->orphan_pending, __ATOMIC_RELAXED) ||
        !__atomic_exchange_n(&a->orphan_pending, false, __ATOMIC_ACQ_REL))
        return false;
    __atomic_fetch_sub(&orphans_pending, 1, __ATOMIC_RELAXED);
    return true;
}

/* An allocation from a: if a is an orphan in its grace, the allocating
 * thread takes its pages over (no purge then). One relaxed load; only on
 * bin fills and large allocations. */
static void orphan_take(arena_t *a)
{
    if (unlikely(__atomic_load_n(&a->orphan_pending, __ATOMIC_RELAXED)))
        orphan_claim(a);
}

/* bin_tags[set][c] (arena_set_bin_tags); only meaningful once bin_tags_set. */
static uint8_t bin_tags[ARENA_TAG_SETS][NSMALL];
static bool bin_tags_set;

void arena_set_bin_tags(const uint8_t tags[ARENA_TAG_SETS][NSMALL])
{
    memcpy(bin_tags, tags, sizeof(bin_tags));
    bin_tags_set = true;
}

static uint8_t bin_tag(const arena_t *a, unsigned c)
{
    if (!bin_tags_set)
        return TC_NONE;
    unsigned set = a->node >= 0 && a->node < TC_NODE_GROUPS ? 2 + (unsigned)a->node : a->manual;
    return bin_tags[set][c];
}

/* The (class, phase) pair of each phased tag (span.h), by tc_phased_index:
 * its arena_phased_key, 0 while free. Taken with a compare-and-swap,
 * never given back (a tag names the same pair in every arena, so that the
 * caches above need no arena to find a block's bin): no lock, so a fork
 * cannot leave one held. */
uint32_t arena_phased_keys[TC_PHASED_NTAGS];
uint8_t arena_phased_index[ARENA_PHASED_INDEX];

/* Files tag index i under its key in arena_phased_index: after the key
 * is taken, so that a lookup that finds the entry finds the key. One
 * entry per tag, in a table with room for more than all: a free slot is
 * always found. */
static void phased_index_put(uint32_t key, unsigned i)
{
    for (uint32_t h = arena_phased_hash(key);; h++) {
        uint8_t *slot = &arena_phased_index[h % ARENA_PHASED_INDEX];
        uint8_t seen = 0;
        if (__atomic_compare_exchange_n(slot, &seen, (uint8_t)(i + 1), false, __ATOMIC_RELEASE, __ATOMIC_RELAXED) ||
            seen == i + 1)
            return;
    }
}

/* The tcache_class of a new special bin: a phased tag for an untyped
 * small class at a phase other than 0 in an automatic arena whose class
 * is cached at all (bin_tag), TC_NONE otherwise or once every tag is
 * taken. The phase must be a multiple of 4: a cache's slot keeps a flag
 * in a block address's low bit (CPU_FRESH), and the free key is a 32-bit
 * word at byte 8 (tc_key_word). */
static uint8_t special_tag(const arena_t *a, unsigned c, uint32_t phase, bool typed)
{
    if (typed || phase == 0 || phase % 4 != 0 || c >= NSMALL || a->manual || bin_tag(a, c) == TC_NONE)
        return TC_NONE;
    uint32_t key = arena_phased_key(c, phase);
    for (unsigned i = 0; i < TC_PHASED_NTAGS; i++) {
        uint32_t seen = __atomic_load_n(&arena_phased_keys[i], __ATOMIC_ACQUIRE);
        if ((seen == 0 && __atomic_compare_exchange_n(&arena_phased_keys[i], &seen, key, false, __ATOMIC_ACQ_REL,
                                                      __ATOMIC_ACQUIRE)) ||
            seen == key) {
            phased_index_put(key, i);
            return (uint8_t)tc_phased_class_at(i);
        }
    }
    return TC_NONE;
}

unsigned arena_phased_tag_class(unsigned k)
{
    uint32_t key = tc_class_is_phased(k) ? __atomic_load_n(&arena_phased_keys[tc_phased_index(k)], __ATOMIC_ACQUIRE) : 0;
    return key == 0 ? NSMALL : key >> 20;
}

static bool is_destroyed(const arena_t *a) { return __atomic_load_n(&a->destroyed, __ATOMIC_ACQUIRE); }

/* Fresh state, from ph on, for a new arena or a destroyed slot being
 * reused. A reused slot keeps only its descriptor pools (their memory is
 * metadata that was never given back); counters, special bins and names
 * start over. */
static void arena_fresh_state(arena_t *a, const char *name, bool reused, const page_source_t *src, int node)
{
    pool_t spans = a->ph.spans, type_arrays = a->ph.type_arrays;
    special_table_t *special = a->special;
    memset((char *)a + offsetof(arena_t, ph), 0, sizeof(*a) - offsetof(arena_t, ph));
    mutex_init(&a->special_lock);
    page_options_t po = {.hugepages = opt.hugepages && src == NULL,
                         .lg_hugepage = (uint8_t)opt.lg_hugepage,
                         .thp = (int8_t)(opt.thp == THP_ALWAYS ? 1 : opt.thp == THP_NEVER ? -1 : 0),
                         .node = node,
                         .sourced = src != NULL};
    if (src != NULL)
        po.source = *src;
    ph_init(&a->ph, a, &po);
    a->node = node;
    if (reused) {
        a->ph.spans = spans;
        a->ph.type_arrays = type_arrays;
        /* the table's memory is kept; its bins, like the heap's pages, are gone */
        if (special != NULL) {
            memset(special->slots, 0, (special->mask + 1) * sizeof(special_slot_t));
            special->count = 0;
        }
        a->special = special;
    }
    if (name != NULL)
        strncpy(a->name, name, sizeof(a->name) - 1);
    a->dirty_decay_ms = opt.dirty_decay_ms;
    a->muzzy_decay_ms = opt.muzzy_decay_ms;
    a->clock_ns = a->last_decay_ns = os_now_ns();
    for (unsigned c = 0; c < NSMALL; c++)
        bin_init(&a->bins[c], a, c, 0, bin_tag(a, c), false);
}

static arena_t *arena_create(unsigned index, bool manual, const char *name, const page_source_t *src, int node)
{
    /* a manual arena's descriptor is metadata a caller can be refused:
     * arenas.create fails at the memory limit (ENOMEM) rather than the
     * descriptors growing the charge past it unchecked */
    arena_t *a = manual ? base_alloc_checked(sizeof(arena_t), CACHELINE) : base_alloc(sizeof(arena_t), CACHELINE);
    if (a == NULL)
        return NULL;
    mutex_init(&a->lock);
    mutex_init(&a->purge_lock);
    a->index = index;
    a->manual = manual;
    a->destroyed = false;
    a->nthreads = 0;
    a->homing_in_flight = 0;
    a->incarnation = 0;
    arena_fresh_state(a, name, false, src, node);
    return a;
}

/* A destroyed slot made new, under arenas_lock. Its lock is held
 * meanwhile: an ENOMEM retry on another thread may be purging every
 * arena, this one included. */
static void arena_reuse(arena_t *a, const char *name, const page_source_t *src, int node)
{
    mutex_lock(&a->purge_lock);   /* a purge that found the old arena is done */
    mutex_lock(&a->lock);
    a->incarnation++;
    arena_fresh_state(a, name, true, src, node);
    a->lock.n_acquired = a->lock.n_contended = a->lock.wait_ns_total = a->lock.wait_ns_max = 0;
    mutex_unlock(&a->lock);
    mutex_unlock(&a->purge_lock);
    __atomic_store_n(&a->destroyed, false, __ATOMIC_RELEASE);
}

static void arena_publish(unsigned index, arena_t *a)
{
    __atomic_store_n(&arenas[index], a, __ATOMIC_RELEASE);
    if (index >= narenas_total)
        __atomic_store_n(&narenas_total, index + 1, __ATOMIC_RELEASE);
}

arena_t *arena_get(unsigned index)
{
    if (index >= MAX_ARENAS)
        return NULL;
    arena_t *a = __atomic_load_n(&arenas[index], __ATOMIC_ACQUIRE);
    if (likely(a != NULL))
        return is_destroyed(a) ? NULL : a;
    if (index >= __atomic_load_n(&narenas_auto, __ATOMIC_RELAXED))
        return NULL;   /* manual arenas exist only through arenas.create */
    if (mutex_all_held_here)
        return NULL;   /* in fork's prepare window: no lock the handlers did not take */
    mutex_lock(&arenas_lock);
    a = arenas[index];
    /* again under the lock: mallopt(M_ARENA_MAX) may have lowered it */
    if (a == NULL && index < narenas_auto && (a = arena_create(index, false, NULL, NULL, -1)) != NULL)
        arena_publish(index, a);
    mutex_unlock(&arenas_lock);
    return a;
}

/* The automatic arena with the fewest threads, and among equals the
 * lowest index; an arena not created yet only while every created one has
 * threads. So a thread that starts after others exited takes over an arena
 * they left, whose slabs and free pages are resident, instead of an arena
 * that was never touched, where every fresh page it is handed would first
 * fault inside an allocation call (docs/design.md, "Arena choice"). No
 * lock: the count is raised by compare-and-swap from the value the scan
 * saw, so threads starting together see each other and spread; after a
 * few lost races the thread joins its last pick anyway. */
arena_t *arena_choose(bool bind)
{
    for (int attempt = 0;; attempt++) {
        unsigned n = __atomic_load_n(&narenas_auto, __ATOMIC_RELAXED), hole = n;
        arena_t *best = NULL;
        uint32_t load = UINT32_MAX;
        for (unsigned i = 0; i < n && load != 0; i++) {
            arena_t *a = __atomic_load_n(&arenas[i], __ATOMIC_ACQUIRE);
            uint32_t t = a != NULL ? __atomic_load_n(&a->nthreads, __ATOMIC_RELAXED) : UINT32_MAX;
            if (a == NULL && hole == n)
                hole = i;
            else if (a != NULL && t < load) {
                best = a;
                load = t;
            }
        }
        if (load != 0 && hole < n) {
            arena_t *a = arena_get(hole);   /* NULL on OOM or in fork's prepare window */
            if (a != NULL) {
                best = a;
                load = __atomic_load_n(&a->nthreads, __ATOMIC_RELAXED);
            }
        }
        if (best == NULL)
            best = arena_get(0);
        if (best == NULL || !bind)
            return best;
        /* an orphan's pages become this thread's at its first allocation
         * (orphan_take): a thread that only frees must not keep them */
        if (attempt >= 3) {
            __atomic_fetch_add(&best->nthreads, 1, __ATOMIC_RELAXED);
            return best;
        }
        if (__atomic_compare_exchange_n(&best->nthreads, &load, load + 1, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            return best;
    }
}

bool arena_set_auto_count(unsigned n)
{
    if (n == 0 || mutex_all_held_here)
        return false;
    if (n > OPT_NARENAS_MAX)
        n = OPT_NARENAS_MAX;   /* the slots above are manual arenas' */
    mutex_lock(&arenas_lock);
    bool ok = narenas_total <= 1;
    if (ok)
        __atomic_store_n(&narenas_auto, n, __ATOMIC_RELAXED);
    mutex_unlock(&arenas_lock);
    return ok;
}

int arena_create_manual(const char *name, const page_source_t *src, int node, unsigned *out)
{
    int err = EAGAIN;
    if (mutex_all_held_here)
        return EAGAIN;   /* in fork's prepare window: no new locks */
    mutex_lock(&arenas_lock);
    for (unsigned i = narenas_auto; i < MAX_ARENAS; i++) {
        arena_t *a = arenas[i];
        if (a != NULL && !a->destroyed)
            continue;
        if (a != NULL)
            arena_reuse(a, name, src, node);
        else if ((a = arena_create(i, true, name, src, node)) == NULL) {
            err = ENOMEM;
            break;
        }
        arena_publish(i, a);
        *out = i;
        err = 0;
        break;
    }
    mutex_unlock(&arenas_lock);
    return err;
}

/* ---- special (phased / typed) bins ------------------------------------- */

#define SPECIAL_TABLE_MIN 16

static uint32_t special_key(unsigned c, uint32_t phase, bool typed)
{
    return (uint32_t)c << 20 | phase << 1 | (typed ? 1u : 0u);
}

static uint32_t special_hash(uint32_t key) { return (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 32); }

/* The bin of key in t, or NULL; a lookup stops at the first empty slot. */
static bin_t *special_find(const special_table_t *t, uint32_t key)
{
    if (t == NULL)
        return NULL;
    for (uint32_t i = special_hash(key);; i++) {
        const special_slot_t *slot = &t->slots[i & t->mask];
        bin_t *bin = __atomic_load_n(&slot->bin, __ATOMIC_ACQUIRE);
        if (bin == NULL || slot->key == key)
            return bin;
    }
}

static void special_put(special_table_t *t, uint32_t key, bin_t *bin)
{
    uint32_t i = special_hash(key);
    while (t->slots[i & t->mask].bin != NULL)
        i++;
    special_slot_t *slot = &t->slots[i & t->mask];
    slot->key = key;
    __atomic_store_n(&slot->bin, bin, __ATOMIC_RELEASE);
    t->count++;
}

/* A table with room for one more bin: a's, or a copy twice its size
 * (published after it is filled); NULL on OOM. special_lock held. */
static special_table_t *special_room(arena_t *a)
{
    special_table_t *t = a->special;
    if (t != NULL && (t->count + 1) * 4 <= (t->mask + 1) * 3)
        return t;
    uint32_t slots = t == NULL ? SPECIAL_TABLE_MIN : (t->mask + 1) * 2;
    special_table_t *n = base_alloc(sizeof(*n) + slots * sizeof(special_slot_t), CACHELINE);
    if (n == NULL)
        return NULL;
    n->mask = slots - 1;
    for (uint32_t i = 0; t != NULL && i <= t->mask; i++)
        if (t->slots[i].bin != NULL)
            special_put(n, t->slots[i].key, t->slots[i].bin);
    __atomic_store_n(&a->special, n, __ATOMIC_RELEASE);
    return n;
}

bin_t *arena_special_bin(arena_t *a, unsigned c, uint32_t phase, bool typed)
{
    uint32_t key = special_key(c, phase, typed);
    bin_t *bin = special_find(__atomic_load_n(&a->special, __ATOMIC_ACQUIRE), key);
    if (likely(bin != NULL) || mutex_all_held_here)
        return bin;   /* (no new bin, and lock, in fork's prepare window) */
    mutex_lock(&a->special_lock);
    bin = special_find(a->special, key);
    if (bin == NULL) {
        special_table_t *t = special_room(a);
        bin = t != NULL ? base_alloc(sizeof(bin_t), CACHELINE) : NULL;
        if (bin != NULL) {
            bin_init(bin, a, c, phase, special_tag(a, c, phase, typed), typed);
            special_put(t, key, bin);
        }
    }
    mutex_unlock(&a->special_lock);
    return bin;
}

void arena_for_each_special_bin(arena_t *a, void (*fn)(bin_t *, void *), void *arg)
{
    const special_table_t *t = __atomic_load_n(&a->special, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; t != NULL && i <= t->mask; i++) {
        bin_t *bin = __atomic_load_n(&t->slots[i].bin, __ATOMIC_ACQUIRE);
        if (bin != NULL)
            fn(bin, arg);
    }
}

/* ---- slabs: bin fills and flushes -------------------------------------- */

/* The page-source calls under way in the calling thread, innermost last
 * (a callback may allocate, and so call another source). A forked child
 * has only the forking thread: arenas_postfork_child counts its recorded
 * calls in again and no other thread's. A call nested deeper than the
 * record began uncounted-for in a child: it ends without a decrement
 * there (its token's fork generation tells). */
#define SOURCE_CALLS_MAX 16
enum source_call_kind { SOURCE_GROW, SOURCE_PURGE, SOURCE_GIVE_BACK };
static __thread struct source_call {
    arena_t *arena;
    enum source_call_kind kind;
    const purge_batch_t *batch;   /* a purge's runs */
} source_calls_here[SOURCE_CALLS_MAX];
static __thread unsigned source_calls_depth;
static uint32_t fork_generation;   /* raised in each forked child */

typedef struct source_call_token {
    uint32_t fork_generation;
    bool recorded;
} source_call_token_t;

/* a's count of calls in flight of the kind given (lock held): a growth's
 * alloc, or a purge's purge and free calls and a reset's free calls */
static uint32_t *in_flight_count(arena_t *a, enum source_call_kind kind)
{
    return kind == SOURCE_GROW ? &a->grows_in_flight : &a->purges_in_flight;
}

static source_call_token_t source_call_begin(arena_t *a, enum source_call_kind kind, const purge_batch_t *batch)
{
    (*in_flight_count(a, kind))++;
    bool recorded = source_calls_depth < SOURCE_CALLS_MAX;
    if (recorded)
        source_calls_here[source_calls_depth] = (struct source_call){a, kind, batch};
    source_calls_depth++;
    return (source_call_token_t){fork_generation, recorded};
}

static void source_call_end(arena_t *a, enum source_call_kind kind, source_call_token_t token)
{
    source_calls_depth--;
    if (token.recorded || token.fork_generation == fork_generation)
        (*in_flight_count(a, kind))--;
}

/* The same, taking a->lock around the count (callers that hold no lock
 * of the arena but purge_lock or arenas_lock, which come before it). */
static source_call_token_t source_call_begin_locking(arena_t *a, enum source_call_kind kind,
                                                     const purge_batch_t *batch)
{
    mutex_lock(&a->lock);
    source_call_token_t call = source_call_begin(a, kind, batch);
    mutex_unlock(&a->lock);
    return call;
}

static void source_call_end_locking(arena_t *a, enum source_call_kind kind, source_call_token_t token)
{
    mutex_lock(&a->lock);
    source_call_end(a, kind, token);
    mutex_unlock(&a->lock);
}

/* A segment from a's page source, added to its heap: called with no lock
 * held (the source is user code), so the caller must look for room again
 * afterwards. False when the source had none (errno = ENOMEM). The call is
 * counted in grows_in_flight, which makes a reset or destroy of a refuse
 * with EBUSY meanwhile (as for a source purge: the callback itself may ask
 * for one), so the segment never lands in a released or reused heap. */
static bool arena_grow_from_source(arena_t *a, size_t bytes)
{
    lock_elided_t held = mutex_lock_elidable(&a->lock);
    if (is_destroyed(a)) {   /* an allocation racing its arena's destroy */
        mutex_unlock_elidable(&a->lock, held);
        errno = ENOMEM;
        return false;
    }
    page_source_t src = a->ph.options.source;
    source_call_token_t call = source_call_begin(a, SOURCE_GROW, NULL);
    mutex_unlock_elidable(&a->lock, held);
    bool zeroed;
    void *mem = ph_source_alloc(&src, bytes, &zeroed);
    held = mutex_lock_elidable(&a->lock);
    bool added = mem != NULL && ph_add_segment(&a->ph, mem, bytes, zeroed, true, false);
    if (mem != NULL && !added) {
        /* no metadata for it: back to the source, still counted */
        mutex_unlock_elidable(&a->lock, held);
        ph_source_free(&src, mem, bytes);
        held = mutex_lock_elidable(&a->lock);
    }
    source_call_end(a, SOURCE_GROW, call);
    mutex_unlock_elidable(&a->lock, held);
    if (!added)
        errno = ENOMEM;
    return added;
}

/* ph_alloc under a->lock (held: the caller's elision decision), with the
 * ENOMEM retry after purging every arena. A sourced arena's heap never
 * maps memory itself: it fails with *need_bytes set, and the caller,
 * once it has dropped its locks, calls arena_grow_from_source and tries
 * again. */
static span_t *heap_alloc(arena_t *a, lock_elided_t *held, const page_request_t *req, bool *zeroed,
                          size_t *need_bytes)
{
    span_t *s = ph_alloc_or_ask(&a->ph, req, zeroed, need_bytes);
    if (s == NULL && *need_bytes == 0 && !a->ph.options.sourced) {
        int saved_errno = errno;   /* a failed first try must not leak ENOMEM into a success */
        if (memlimit_refused_peek())   /* the memory limit's first reclaim step */
            memlimit_count_reclaim();
        mutex_unlock_elidable(&a->lock, *held);
        arenas_release_free_memory();
        *held = mutex_lock_elidable(&a->lock);
        s = ph_alloc(&a->ph, req, zeroed);
        errno = saved_errno;
    }
    /* pages for a live thread while an orphaned arena keeps its own:
     * those go (s is ours meanwhile; arena locks are leaves, bin -> purge).
     * Not from a manual arena: its destroy or reset must not find the lock
     * free in the middle of an allocation. */
    if (s != NULL && !a->manual && unlikely(__atomic_load_n(&orphans_pending, __ATOMIC_RELAXED) != 0)) {
        arena_clock_refresh(a);
        uint64_t now = a->clock_ns;
        if (arenas_orphans_due(a, now)) {
            mutex_unlock_elidable(&a->lock, *held);
            arenas_purge_orphans(a, now);
            *held = mutex_lock_elidable(&a->lock);
        }
    }
    return s;
}

/* A new slab for bin from a's page heap, formatted and mapped, or NULL
 * when out of memory (*need_bytes set: a sourced arena needs a segment
 * first). Bin lock held; takes the arena lock (bin -> arena). */
static span_t *slab_make(arena_t *a, const bin_t *bin, size_t *need_bytes)
{
    /* a phased grid is shifted off the slab's alignment anyway */
    size_t align = bin->phase == 0 ? sc_slab_align(bin->size_class) : PAGE;
    page_request_t req = {.npages = bin->slab_pages, .align = align, .phase = 0};
    bool zeroed;
    lock_elided_t held = mutex_lock_elidable(&a->lock);
    span_t *s = heap_alloc(a, &held, &req, &zeroed, need_bytes);
    if (s != NULL && bin->typed) {
        s->type_ids = pool_get(&a->ph.type_arrays);
        if (s->type_ids != NULL)
            memset(s->type_ids, 0, SLAB_MAX_OBJS * sizeof(uint16_t));
        if (s->type_ids == NULL) {
            ph_free(&a->ph, s, a->clock_ns);
            s = NULL;
        }
    }
    if (s != NULL) {
        bin_format_slab(bin, s);
        ph_map_all_pages(s);
        arena_tick(a);
    }
    mutex_unlock_elidable(&a->lock, held);
    if (!a->ph.options.sourced)   /* a source's purge runs once the bin lock is dropped */
        arena_purge_if_due(a);
    return s;
}

/* Takes back a slab that a flush emptied. Its bin's lock held. Blocks
 * that came home holding the thread caches' free key (bytes 8..11,
 * tcache.h) lose it first: pages reused by a new slab or a large block
 * hold no key, so fills of new slabs need not write their blocks. Those
 * blocks were written by the free that cached them. */
static void clear_free_key(span_t *s, size_t index)
{
    char *p = (char *)(s->base + index * s->objsize);
    DPM_ANN_KEY_PEEK(p);   /* a free block: its state stays as it was */
    memset(p + 8, 0, 4);
    DPM_ANN_KEY_UNPEEK(p);
}

static void slab_release(arena_t *a, span_t *s)
{
    for (unsigned w = 0; w < SLAB_KEYED_WORDS; w++)
        for (uint64_t bits = s->keyed_bits[w]; bits != 0; bits &= bits - 1)
            clear_free_key(s, w * 64 + ctz64(bits));
    /* untracked objects (span_t.keyed_bits) may hold it too */
    for (size_t i = SLAB_KEYED_OBJS; i <= s->last_index; i++)
        clear_free_key(s, i);
    lock_elided_t held = mutex_lock_elidable(&a->lock);
    ph_unmap_inner_pages(s);
    arena_clock_refresh(a);
    ph_free(&a->ph, s, a->clock_ns);
    arena_after_free(a);
    mutex_unlock_elidable(&a->lock, held);
    if (!a->ph.options.sourced)
        arena_purge_if_due(a);
}

static unsigned bin_fill_once(bin_t *bin, void **out, unsigned want, uint8_t *keyed);

/* A fill that found no page at the memory limit (memlimit.h) is tried
 * once more after the registered reclaim, which runs here because the
 * caller holds no lock (arena.h) and the bin lock is dropped. */
unsigned arena_bin_fill(bin_t *bin, void **out, unsigned want, uint8_t *keyed)
{
    memlimit_refused_clear();
    unsigned n = bin_fill_once(bin, out, want, keyed);
    if (unlikely(n == 0) && memlimit_refused_take()) {
        /* no reclaim (one runs on this thread already, or a page source's
         * callback is under way): the refusal stands, a failure too */
        bool ran = memlimit_reclaim();
        if (ran)
            n = bin_fill_once(bin, out, want, keyed);
        if (n == 0 && (!ran || memlimit_refused_take()))
            memlimit_count_failure();
    }
    memlimit_soft_drain_if_due();
    return n;
}

static unsigned bin_fill_once(bin_t *bin, void **out, unsigned want, uint8_t *keyed)
{
    arena_t *a = bin->arena;
    orphan_take(a);
    lock_elided_t held = mutex_lock_elidable(&bin->lock);
    unsigned n = bin_take(bin, out, want, keyed);
    while (n < want) {
        size_t need_bytes;
        span_t *s = slab_make(a, bin, &need_bytes);
        if (s == NULL && need_bytes != 0) {
            /* the page source is user code: called with no lock held */
            mutex_unlock_elidable(&bin->lock, held);
            bool grown = arena_grow_from_source(a, need_bytes);
            held = mutex_lock_elidable(&bin->lock);
            if (grown) {
                n += bin_take(bin, out + n, want - n, keyed != NULL ? keyed + n : NULL);   /* others may have filled it meanwhile */
                continue;
            }
        }
        if (s == NULL)
            break;
        bin_add_slab(bin, s);
        n += bin_take(bin, out + n, want - n, keyed != NULL ? keyed + n : NULL);
    }
    bin_count_fill(bin, n);
    mutex_unlock_elidable(&bin->lock, held);
    if (a->ph.options.sourced)
        arena_purge_if_due(a);
    return n;
}

void arena_bin_flush(void **objs, unsigned n)
{
    while (n > 0) {
        bin_t *bin = bin_of_flushed(objs[0]);
        list_t emptied = {0};
        lock_elided_t held = mutex_lock_elidable(&bin->lock);
        n = bin_flush_locked(bin, held, objs, n, &emptied);
        for (list_node_t *s; (s = list_pop_front(&emptied)) != NULL;)
            slab_release(bin->arena, list_item(s, span_t, link));
        mutex_unlock_elidable(&bin->lock, held);
        if (bin->arena->ph.options.sourced)
            arena_purge_if_due(bin->arena);
    }
}

/* With purge_lock held: a bin lock is only tried, never waited for (a
 * reset or destroy takes the bins before purge_lock); a busy bin keeps
 * its slab this time. */
static void release_idle_current(bin_t *bin, void *arg)
{
    (void)arg;
    list_t emptied = {0};
    if (!mutex_trylock(&bin->lock))
        return;
    if (bin_detach_idle_current(bin, &emptied))
        slab_release(bin->arena, list_item(list_pop_front(&emptied), span_t, link));
    mutex_unlock(&bin->lock);
}

void arena_release_idle_slabs(arena_t *a)
{
    /* Not from inside a page source's callback (one may ask for
     * arena.<i>.purge or malloc_trim): the slabs given back become runs
     * whose purge calls the source again, whose callback allocates a
     * slab and asks again, without end (test page_source). */
    if (ph_source_calls_here != 0)
        return;
    /* purge_lock orders this with a destroy or a reuse of the slot, which
     * rewrite the bins (TSan: review_purge_vs_arena_reuse) */
    mutex_lock(&a->purge_lock);
    if (!__atomic_load_n(&a->destroyed, __ATOMIC_ACQUIRE)) {
        for (unsigned c = 0; c < NSMALL; c++)
            release_idle_current(&a->bins[c], NULL);
        arena_for_each_special_bin(a, release_idle_current, NULL);
    }
    mutex_unlock(&a->purge_lock);
}

/* ---- reset and destroy ------------------------------------------------- */

static void lock_bin(bin_t *bin, void *arg) { (void)arg, mutex_lock(&bin->lock); }
static void unlock_bin(bin_t *bin, void *arg) { (void)arg, mutex_unlock(&bin->lock); }
static void forget_bin(bin_t *bin, void *arg) { (void)arg, bin_forget_all(bin); }

static void lock_all_bins(arena_t *a, bool lock)
{
    for (unsigned c = 0; c < NSMALL; c++)
        lock ? mutex_lock(&a->bins[c].lock) : mutex_unlock(&a->bins[c].lock);
    arena_for_each_special_bin(a, lock ? lock_bin : unlock_bin, NULL);
}

static void forget_all_bins(arena_t *a)
{
    for (unsigned c = 0; c < NSMALL; c++)
        bin_forget_all(&a->bins[c]);
    arena_for_each_special_bin(a, forget_bin, NULL);
}

/* Type tags of blocks that an arena reset discards stop counting as live. */
static void forget_typed_blocks(const span_t *s)
{
    if (s->kind == SPAN_LARGE)
        type_count_free(s->type_id, s->usable);
    if (s->kind != SPAN_SLAB || s->type_ids == NULL)
        return;
    for (uint32_t i = 0; i <= s->last_index; i++)
        if (s->type_ids[i] != 0)
            type_count_free(s->type_ids[i], s->objsize);
}

/* Gives every page of a back at once; arenas_lock held. A sourced
 * arena's segments go to *give_back (with a copy of its source in *src),
 * for the caller to hand to the source once arenas_lock is dropped.
 * EBUSY while a source's purge or alloc call for a is under way (it runs
 * without purge_lock or a->lock; it may be the caller). */
static int release_all(arena_t *a, list_t *give_back, page_source_t *src, bool destroy)
{
    int err = 0;
    mutex_lock(&a->special_lock);
    lock_all_bins(a, true);
    mutex_lock(&a->purge_lock);   /* no runs are out of the heap being purged */
    mutex_lock(&a->lock);
    if (a->purges_in_flight != 0 || a->grows_in_flight != 0) {
        err = EBUSY;
        goto out;
    }
    forget_all_bins(a);
    ph_release_all(&a->ph, forget_typed_blocks);
    for (unsigned c = 0; c < NLARGE_STATS; c++) {
        a->large[c].nfree = a->large[c].nmalloc;
        a->large[c].live_bytes = 0;
    }
    ph_take_given_back(&a->ph, give_back);
    *src = a->ph.options.source;
    /* under a->lock: a growth that takes it next sees the arena gone
     * (arena_grow_from_source) instead of starting a source call that no
     * count would hold the destroy for */
    if (destroy)
        __atomic_store_n(&a->destroyed, true, __ATOMIC_RELEASE);
out:
    mutex_unlock(&a->lock);
    mutex_unlock(&a->purge_lock);
    lock_all_bins(a, false);
    mutex_unlock(&a->special_lock);
    return err;
}

/* Reset (destroy false) or destroy of the arena at index, refused while
 * more than may_be_bound threads are bound. The whole operation holds
 * arenas_lock, which binding (arena_bind_thread) and arenas.create take
 * too: no thread binds between the count and the release, no second
 * destroy releases the arena again, and no create reuses the slot before
 * the destroy is done. */
static int release_arena(unsigned index, uint32_t may_be_bound, bool destroy)
{
    if (index >= MAX_ARENAS)
        return ENOENT;
    int err = 0;
    list_t give_back = {0};
    page_source_t src = {0};
    mutex_lock(&arenas_lock);
    arena_t *a = arenas[index];
    if (a == NULL || a->destroyed)
        err = ENOENT;
    else if (!a->manual || a->node >= 0)
        err = EPERM;   /* automatic and node arenas serve every thread */
    else if (__atomic_load_n(&a->nthreads, __ATOMIC_ACQUIRE) > may_be_bound ||
             __atomic_load_n(&a->homing_in_flight, __ATOMIC_ACQUIRE) != 0)
        err = EBUSY;
    if (err == 0)
        err = release_all(a, &give_back, &src, destroy);
    /* A reset's segments go back to the source after arenas_lock is
     * dropped: counted like a purge's, so that a destroy meanwhile is
     * refused (it would return before the source has them all back). A
     * destroy's own give-back ends before it returns. */
    bool counted = err == 0 && !destroy && !list_empty(&give_back);
    source_call_token_t call = {0};
    if (counted)
        call = source_call_begin_locking(a, SOURCE_GIVE_BACK, NULL);
    mutex_unlock(&arenas_lock);
    ph_source_give_back(&src, &give_back);
    if (counted)
        source_call_end_locking(a, SOURCE_GIVE_BACK, call);
    return err;
}

int arena_reset(unsigned index, const arena_t *callers)
{
    bool mine = index < MAX_ARENAS && callers != NULL && callers == __atomic_load_n(&arenas[index], __ATOMIC_ACQUIRE);
    return release_arena(index, mine ? 1 : 0, false);
}

int arena_destroy(unsigned index) { return release_arena(index, 0, true); }

bool arena_bind_thread(arena_t *a)
{
    mutex_lock(&arenas_lock);
    bool alive = !a->destroyed;
    if (alive)
        __atomic_fetch_add(&a->nthreads, 1, __ATOMIC_RELAXED);
    mutex_unlock(&arenas_lock);
    return alive;
}

/* The last thread leaving an automatic arena leaves its free pages for
 * the next thread that arena_choose gives it, or for
 * arenas_purge_orphans (see orphaned). */
void arena_unbind_thread(arena_t *a)
{
    if (__atomic_sub_fetch(&a->nthreads, 1, __ATOMIC_RELEASE) != 0 || !orphaned(a))
        return;
    __atomic_store_n(&a->orphaned_ns, os_now_ns(), __ATOMIC_RELAXED);
    if (!__atomic_exchange_n(&a->orphan_pending, true, __ATOMIC_ACQ_REL))
        __atomic_fetch_add(&orphans_pending, 1, __ATOMIC_RELAXED);
}

/* Slots that can hold an orphan: the automatic arenas created so far.
 * Manual arenas (never orphans) above them are re-initialised in place
 * by arenas.create, which a scan must not read. */
static unsigned automatic_arenas_made(void)
{
    unsigned total = __atomic_load_n(&narenas_total, __ATOMIC_ACQUIRE), nauto = __atomic_load_n(&narenas_auto, __ATOMIC_RELAXED);
    return total < nauto ? total : nauto;
}

static bool orphan_due(const arena_t *a, const arena_t *except, uint64_t now_ns)
{
    return a != NULL && a != except && __atomic_load_n(&a->orphan_pending, __ATOMIC_RELAXED) &&
           (int64_t)(now_ns - __atomic_load_n(&a->orphaned_ns, __ATOMIC_RELAXED)) >= (int64_t)ORPHAN_GRACE_MS * 1000000;
}

bool arenas_orphans_due(const arena_t *except, uint64_t now_ns)
{
    if (likely(__atomic_load_n(&orphans_pending, __ATOMIC_RELAXED) == 0))
        return false;
    unsigned n = automatic_arenas_made();
    for (unsigned i = 0; i < n; i++)
        if (orphan_due(__atomic_load_n(&arenas[i], __ATOMIC_ACQUIRE), except, now_ns))
            return true;
    return false;
}

void arenas_purge_orphans(const arena_t *except, uint64_t now_ns)
{
    if (likely(__atomic_load_n(&orphans_pending, __ATOMIC_RELAXED) == 0))
        return;
    unsigned n = automatic_arenas_made();
    for (unsigned i = 0; i < n; i++) {
        arena_t *a = __atomic_load_n(&arenas[i], __ATOMIC_ACQUIRE);
        /* nthreads may count a thread that took the arena but has not
         * allocated since (it only frees): its pages go all the same */
        if (orphan_due(a, except, now_ns) && orphan_claim(a) && __atomic_load_n(&a->dirty_decay_ms, __ATOMIC_RELAXED) > 0)
            decay_with(a, 0, a->muzzy_decay_ms);
    }
}

/* ---- decay clock ------------------------------------------------------- */

/* An automatic arena that no thread allocates from any more (its threads
 * exited or moved): its dirty pages would wait for the next new thread,
 * perhaps for ever, while the live threads fault in fresh pages of their
 * own arenas. The next new thread takes such an arena first (arena_choose:
 * it has the fewest threads, and its pages are resident), and once it has been orphaned
 * for ORPHAN_GRACE_MS without an allocation from it (orphan_take), the
 * next page-heap allocation of any other arena purges its dirty pages
 * (arenas_purge_orphans); the pages that frees of
 * its blocks by other threads give it wait with the rest until then, and
 * decay at once after. Manual
 * arenas serve dpm_malloc_arena without any thread bound, and -1 ("never
 * purge") is kept. Read without the arena lock (dirty_decay_ms may be
 * changed under it by the ctl). */
static bool orphaned(const arena_t *a)
{
    return __atomic_load_n(&a->dirty_decay_ms, __ATOMIC_RELAXED) > 0 && !a->manual &&
           __atomic_load_n(&a->nthreads, __ATOMIC_RELAXED) == 0;
}

/* An orphan still in its grace keeps its dirty pages for the thread that
 * may take it: a purge pass with decay 0 would take all of them, not just
 * the pages a remote free gave it. */
static int64_t dirty_ms_now(const arena_t *a)
{
    /* above the soft memory limit, decay is immediate (memlimit.h); a
     * page source's memory is not counted there */
    if (unlikely(memlimit_above_soft()) && !a->ph.options.sourced)
        return 0;
    if (!orphaned(a))
        return a->dirty_decay_ms;
    if (__atomic_load_n(&a->orphan_pending, __ATOMIC_RELAXED) && !orphan_due(a, NULL, os_now_ns()))
        return __atomic_load_n(&a->dirty_decay_ms, __ATOMIC_RELAXED);
    return 0;
}

static int64_t muzzy_ms_now(const arena_t *a)
{
    if (unlikely(memlimit_above_soft()) && !a->ph.options.sourced)
        return 0;
    return a->muzzy_decay_ms;
}

#define DECAY_TICKS_PER_CLOCK 8

static uint64_t decay_interval_ns(const arena_t *a)
{
    int64_t ms = a->dirty_decay_ms;
    if (a->muzzy_decay_ms > 0 && (ms <= 0 || a->muzzy_decay_ms < ms))
        ms = a->muzzy_decay_ms;
    if (ms <= 0)
        return 0;
    uint64_t ns = (uint64_t)ms * 1000000u / 16;   /* 16 passes per decay time */
    return ns < 1000000u ? 1000000u : ns;
}

/* ~0.3 ms at 3 GHz; 10-40 ms of an aarch64 generic timer */
#define CLOCK_STALE_CYCLES ((uint64_t)1 << 20)

static void arena_clock_read(arena_t *a)
{
    a->clock_ns = os_now_ns();
    a->clock_at_cycles = cpu_cycles();
}

void arena_clock_refresh(arena_t *a)
{
    if (cpu_cycles() - a->clock_at_cycles > CLOCK_STALE_CYCLES)
        arena_clock_read(a);
}

static void set_purge_due(arena_t *a) { __atomic_store_n(&a->purge_due, true, __ATOMIC_RELAXED); }

void arena_tick(arena_t *a)
{
    if (++a->ticks % DECAY_TICKS_PER_CLOCK != 0)
        return;
    arena_clock_read(a);
    if (a->dirty_decay_ms < 0 && a->muzzy_decay_ms < 0)
        return;
    uint64_t interval = decay_interval_ns(a);
    if (a->clock_ns - a->last_decay_ns >= interval) {
        a->last_decay_ns = a->clock_ns;
        set_purge_due(a);
    }
}

void arena_after_free(arena_t *a)
{
    if (dirty_ms_now(a) == 0)
        set_purge_due(a);
    else
        arena_tick(a);
}

/* Step 2 of a purge batch (purge_lock held by the caller). A page
 * source's purge is user code: for it purge_lock is dropped and the batch
 * counted in purges_in_flight instead, which makes a reset or destroy of a
 * refuse with EBUSY meanwhile (waiting could deadlock: the callback itself
 * may ask for one). Other purgers take disjoint runs, so batches may
 * overlap in time. */
static void run_purge_calls(arena_t *a, purge_batch_t *b)
{
    if (b->source == NULL) {
        ph_purge_run(b);
        return;
    }
    source_call_token_t call = source_call_begin_locking(a, SOURCE_PURGE, b);
    mutex_unlock(&a->purge_lock);
    ph_purge_run(b);
    mutex_lock(&a->purge_lock);
    source_call_end_locking(a, SOURCE_PURGE, call);
}

/* Hands segments a sourced arena let go to its source's free. Called with
 * purge_lock held, which keeps the source (the slot's) from being
 * rewritten by a reuse: the free runs with purge_lock dropped, on a copy. */
static void give_back_segments(arena_t *a, list_t *segments)
{
    if (list_empty(segments))
        return;
    page_source_t src = a->ph.options.source;
    /* counted like a purge's calls: a reset or destroy meanwhile would
     * return before the source has all its segments back */
    source_call_token_t call = source_call_begin_locking(a, SOURCE_GIVE_BACK, NULL);
    mutex_unlock(&a->purge_lock);
    ph_source_give_back(&src, segments);
    mutex_lock(&a->purge_lock);
    source_call_end_locking(a, SOURCE_GIVE_BACK, call);
}

/* Batches one due purge or background pass runs at most: a batch is
 * small (it lives on the stack of free's slow path), a pass purges up to
 * PURGE_BATCHES_PER_PASS * PH_PURGE_MAX_RUNS runs and PH_PURGE_MAX_PAGES
 * pages. */
#define PURGE_BATCHES_PER_PASS 4

/* One purge batch: runs are taken out of the heap under the arena lock,
 * purged with it dropped, and filed back under it again, at most
 * *pages_left pages (less what it took). purge_lock is held throughout
 * (the caller took it). Returns pages released; *taken says whether the
 * batch held anything (or settled runs without a call). */
static size_t purge_batch(arena_t *a, int64_t dirty_ms, int64_t muzzy_ms, size_t *pages_left, bool *taken)
{
    purge_batch_t batch;
    list_t give_back = {0};
    mutex_lock(&a->lock);
    uint64_t now = a->clock_ns;
    *pages_left -= ph_purge_take(&a->ph, now, dirty_ms, muzzy_ms, *pages_left, &batch);
    ph_take_given_back(&a->ph, &give_back);   /* runs retained at once may free segments */
    mutex_unlock(&a->lock);
    *taken = batch.n != 0;
    size_t released = 0;
    if (batch.n != 0) {
        run_purge_calls(a, &batch);
        mutex_lock(&a->lock);
        released = ph_purge_finish(&a->ph, &batch, now);
        ph_take_given_back(&a->ph, &give_back);
        mutex_unlock(&a->lock);
    }
    give_back_segments(a, &give_back);
    return released;
}

void arena_purge_if_due(arena_t *a)
{
    if (likely(!__atomic_load_n(&a->purge_due, __ATOMIC_RELAXED)))
        return;
    if (!mutex_trylock(&a->purge_lock))
        return;   /* another thread is purging; the flag stays for later */
    __atomic_store_n(&a->purge_due, false, __ATOMIC_RELAXED);
    bool taken = true;
    int64_t dirty_ms = dirty_ms_now(a);
    size_t pages = PH_PURGE_MAX_PAGES;
    for (unsigned i = 0; i < PURGE_BATCHES_PER_PASS && taken && pages > 0; i++)
        purge_batch(a, dirty_ms, muzzy_ms_now(a), &pages, &taken);
    /* a full batch may have left due runs behind: the next tick goes on */
    if (taken && dirty_ms == 0)
        set_purge_due(a);
    mutex_unlock(&a->purge_lock);
}

void arena_tick_now(arena_t *a)
{
    lock_elided_t held = mutex_lock_elidable(&a->lock);
    arena_tick(a);
    mutex_unlock_elidable(&a->lock, held);
    arena_purge_if_due(a);
}

size_t arena_decay_pass(arena_t *a)
{
    mutex_lock(&a->purge_lock);
    mutex_lock(&a->lock);
    a->clock_ns = a->last_decay_ns = os_now_ns();
    mutex_unlock(&a->lock);
    bool taken = true;
    size_t released = 0;
    size_t pages = PH_PURGE_MAX_PAGES;
    for (unsigned i = 0; i < PURGE_BATCHES_PER_PASS && taken && pages > 0; i++)
        released += purge_batch(a, dirty_ms_now(a), muzzy_ms_now(a), &pages, &taken);
    mutex_unlock(&a->purge_lock);
    return released;
}

bool arena_decay_work_left(arena_t *a)
{
    mutex_lock(&a->lock);
    const page_heap_t *ph = &a->ph;
    bool work = (ph->free_runs[RUN_DIRTY].npages != 0 && a->dirty_decay_ms >= 0) ||
                (ph->free_runs[RUN_MUZZY].npages != 0 && a->muzzy_decay_ms >= 0);
    mutex_unlock(&a->lock);
    return work;
}

unsigned arena_threads(arena_t *a)
{
    mutex_lock(&a->lock);
    unsigned n = __atomic_load_n(&a->nthreads, __ATOMIC_RELAXED);
    mutex_unlock(&a->lock);
    return n;
}

size_t arena_decay_now(arena_t *a, bool everything)
{
    return decay_with(a, everything ? 0 : dirty_ms_now(a), everything ? 0 : muzzy_ms_now(a));
}

static size_t decay_with(arena_t *a, int64_t dirty_ms, int64_t muzzy_ms)
{
    size_t released = 0;
    mutex_lock(&a->purge_lock);
    mutex_lock(&a->lock);
    a->clock_ns = a->last_decay_ns = os_now_ns();
    /* Batches for what is waiting now (twice: dirty, then muzzy), so that
     * frees racing with a purge cannot keep it going for ever. */
    size_t runs = a->ph.free_runs[RUN_DIRTY].nruns + a->ph.free_runs[RUN_MUZZY].nruns;
    size_t limit = 2 * (runs / PH_PURGE_MAX_RUNS + ph_decayable_pages(&a->ph) / PH_PURGE_MAX_PAGES + 2);
    mutex_unlock(&a->lock);
    bool taken = true;
    for (size_t i = 0; i < limit && taken; i++) {
        size_t pages = SIZE_MAX;
        released += purge_batch(a, dirty_ms, muzzy_ms, &pages, &taken);
    }
    mutex_unlock(&a->purge_lock);
    return released;
}

size_t arena_purge_all(arena_t *a) { return arena_decay_now(a, true); }

void arenas_no_thp(void)
{
    unsigned n = __atomic_load_n(&narenas_total, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n; i++) {
        arena_t *a = __atomic_load_n(&arenas[i], __ATOMIC_ACQUIRE);
        if (a == NULL || __atomic_load_n(&a->destroyed, __ATOMIC_ACQUIRE) || a->ph.options.sourced)
            continue;
        mutex_lock(&a->lock);
        if (!__atomic_load_n(&a->destroyed, __ATOMIC_ACQUIRE))
            ph_no_thp(&a->ph);
        mutex_unlock(&a->lock);
    }
}

bool arena_holds_pages(arena_t *a)
{
    mutex_lock(&a->lock);
    bool any = a->ph.nsegments != 0;
    mutex_unlock(&a->lock);
    return any;
}

void arenas_release_free_memory(void)
{
    unsigned n = __atomic_load_n(&narenas_total, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n; i++) {
        arena_t *a = __atomic_load_n(&arenas[i], __ATOMIC_ACQUIRE);
        /* a source's memory is not the kernel's: purging it frees no
         * address space, and its calls must not run under the caller's
         * locks (this runs with a bin lock held) */
        if (a != NULL && !is_destroyed(a) && !a->ph.options.sourced && arena_holds_pages(a))
            arena_purge_all(a);
    }
}

/* ---- large blocks ------------------------------------------------------ */

/* Where the block starts inside its first page, and the run alignment and
 * phase that make (p + offset) % align == 0 (see docs/design.md). */
static void place_large(const large_request_t *req, size_t *in_page, page_request_t *pr)
{
    size_t off = req->offset;
    if (req->align <= PAGE) {
        *in_page = (req->align - off) & (req->align - 1);
        pr->align = PAGE;
        pr->phase = 0;
    } else {
        *in_page = (PAGE - (off & PAGE_MASK)) & PAGE_MASK;
        pr->align = req->align;
        pr->phase = (req->align - ((off + *in_page) & (req->align - 1))) & (req->align - 1);
    }
}

/* Zeroes a large block that came from pages with old contents: big ranges
 * are handed back to the kernel (they read as zero and cost no memory until
 * touched, as a fresh calloc'd mapping would), small ones are cleared. */
#define ZERO_BY_PURGE_MIN ((size_t)256 << 10)

static void zero_large(span_t *s, size_t size)
{
    uintptr_t from = s->base;
    size_t in_page = s->base - s->start;
    /* (not in hugetlb segments: madvise there works on whole huge pages) */
    if (size >= ZERO_BY_PURGE_MIN && in_page == 0 && !s->seg->hugetlb && !s->seg->sourced && !s->seg->reserved &&
        os_purge_now((void *)s->start, round_up(size, PAGE)) == PURGE_ZEROED)
        return;
    DPM_ANN_OPEN((void *)from, size);
    memset((void *)from, 0, size);
}

/* Live guarded blocks, at most GUARDED_MAX: each splits its run's
 * mapping in two more kernel map entries, and vm.max_map_count (65530 by
 * default) is the whole process's budget (thread stacks, other mmaps, the
 * quarantined blocks): past it, blocks get no guard. */
#define GUARDED_MAX 16384
static size_t guarded_live;

/* Secure mode puts a page without access after each large block, so a
 * write or read past its usable bytes faults: in automatic arenas only
 * (a manual arena's reset hands its pages back wholesale), and not where
 * mprotect cannot split the pages (huge pages, a page source's memory,
 * kernel pages bigger than PAGE). */
static bool large_gets_guard(const arena_t *a)
{
    return unlikely(opt.secure) && !a->manual && !a->ph.options.sourced && !a->ph.options.hugepages &&
           os_page_size() == PAGE && __atomic_load_n(&guarded_live, __ATOMIC_RELAXED) < GUARDED_MAX;
}

static uintptr_t guard_page(const span_t *s) { return s->start + ((s->npages - 1) << LG_PAGE); }

bool arena_guard_explain(uintptr_t addr)
{
    if (addr >> RADIX_LG_VA != 0)
        return false;   /* the page map covers 2^48 bytes; it would wrap */
    const span_t *s = span_of((const void *)addr);
    if (s == NULL || s->kind != SPAN_LARGE || !s->guarded || addr - guard_page(s) >= PAGE)
        return false;
    /* the guard is also the page before the next run: its upper half,
     * with a large block starting right after it, is taken as an
     * underflow of that block (guard_sample's half-page rule; review
     * r38: q[-1] was reported as an overflow of the block before) */
    uintptr_t after = guard_page(s) + PAGE;
    const span_t *next = addr - guard_page(s) >= PAGE / 2 ? span_of((const void *)after) : NULL;
    if (next != NULL && next->kind == SPAN_LARGE && next->start == after) {
        fault_report("buffer underflow before the start", addr, "secure mode's guard page", next->requested,
                     next->base);
        return true;
    }
    if (__atomic_load_n(&s->parked, __ATOMIC_RELAXED))
        return false;   /* freed: the quarantine's report, a use after free */
    fault_report("buffer overflow past the end", addr, "secure mode's guard page", s->requested, s->base);
    return true;
}

void *arena_alloc_large(arena_t *a, const large_request_t *req)
{
    orphan_take(a);
    size_t in_page;
    page_request_t pr = {.zero = req->zero};
    place_large(req, &in_page, &pr);
    unsigned c = sc_compute(req->size == 0 ? 1 : req->size);
    if (c < NSMALL)
        c = NSMALL;   /* small sizes with big alignments: counted as the first large class */
    size_t usable = arena_large_usable(req->size, in_page);
    bool guard = large_gets_guard(a);
    pr.npages = ((usable + in_page) >> LG_PAGE) + guard;
    bool zeroed;
    size_t need_bytes;
    lock_elided_t held = mutex_lock_elidable(&a->lock);
    span_t *s;
    while ((s = heap_alloc(a, &held, &pr, &zeroed, &need_bytes)) == NULL && need_bytes != 0) {
        mutex_unlock_elidable(&a->lock, held);
        bool grown = arena_grow_from_source(a, need_bytes);
        held = mutex_lock_elidable(&a->lock);
        if (!grown)
            break;
    }
    if (s == NULL) {
        mutex_unlock_elidable(&a->lock, held);
        errno = ENOMEM;
        return NULL;
    }
    s->base = s->start + in_page;
    s->div_inv = 1;
    s->usable = usable;
    s->requested = req->size;
    s->grew = 0;
    s->size_class = c;
    /* large blocks are cached by the CPUs' large caches, which
     * the free slow path reaches: no bin tag (ph_alloc maps them so) */
    dpm_assert(s->tcache_class == TC_NONE);
    s->type_id = req->type_id;
    type_count_alloc(req->type_id, usable);
    large_stats_t *ls = &a->large[c - NSMALL];
    ls->nmalloc++;
    ls->live_bytes += usable;
    arena_tick(a);
    mutex_unlock_elidable(&a->lock, held);
    arena_purge_if_due(a);
    /* the kernel may refuse (map count): then the page is only slack */
    s->guarded = guard && os_protect_none((void *)guard_page(s), PAGE, false);
    if (s->guarded)
        __atomic_fetch_add(&guarded_live, 1, __ATOMIC_RELAXED);
    if (req->zero && !zeroed)
        zero_large(s, opt.zero ? usable : req->size);   /* opt.zero: realloc may grow into it */
    return (void *)s->base;
}

/* A freed block of at least opt.oversize_threshold bytes goes back to the
 * OS at once (glibc unmaps such blocks at free); a realloc that cuts at
 * least SHRINK_PURGE_MIN off a block gives the cut pages back at once
 * (with the dirty run they joined): the program said it is done with
 * them. Smaller runs wait for decay, where a loop of big blocks finds
 * them still faulted in. */
#define SHRINK_PURGE_MIN ((size_t)1 << 20)

/* With a->lock held: takes run r (if at least min_bytes, dirty) into b to
 * be purged at once, if no other thread is purging the arena (purge_lock
 * is only tried here: the arena lock is held). True if b holds runs and
 * purge_lock; purge_taken_runs finishes the job after a->lock is dropped. */
static bool take_run_for_purge(arena_t *a, span_t *r, size_t min_bytes, purge_batch_t *b)
{
    if (r == NULL || !mutex_trylock(&a->purge_lock))
        return false;
    if (ph_purge_take_run(&a->ph, r, min_bytes, b) != 0)
        return true;
    mutex_unlock(&a->purge_lock);
    return false;
}

/* Purges the runs take_run_for_purge took, and then, batch by batch,
 * the rest of a run longer than one batch (PH_PURGE_MAX_RUNS pieces):
 * a huge block's free or cut returns all of it. */
static void purge_taken_runs(arena_t *a, purge_batch_t *b)
{
    for (;;) {
        /* read before the finish files (and may merge) the pieces */
        uintptr_t rest = b->n == PH_PURGE_MAX_RUNS ? span_end(b->item[b->n - 1].run) : 0;
        list_t give_back = {0};
        run_purge_calls(a, b);
        lock_elided_t held = mutex_lock_elidable(&a->lock);
        ph_purge_finish(&a->ph, b, a->clock_ns);
        span_t *r = rest != 0 ? radix_span(rest) : NULL;
        bool more = r != NULL && ph_purge_take_run(&a->ph, r, 0, b) != 0;
        ph_take_given_back(&a->ph, &give_back);
        mutex_unlock_elidable(&a->lock, held);
        give_back_segments(a, &give_back);
        if (!more)
            break;
    }
    mutex_unlock(&a->purge_lock);
}

/* guard_open: the run's guard page has access again already (secure
 * mode's quarantine opened the whole run); discarded: its pages were
 * discarded too, and taken out of the memory limit's charge. */
static void free_large(span_t *s, bool guard_open, bool discarded)
{
    size_t uncharged = s->npages - s->guarded;
    if (unlikely(s->guarded)) {
        /* its pages go back to the heap usable, or not at all */
        if (!guard_open && !os_commit((void *)guard_page(s), PAGE))
            return;
        s->guarded = 0;
        __atomic_fetch_sub(&guarded_live, 1, __ATOMIC_RELAXED);
    }
    arena_t *a = s->arena;
    size_t threshold = __atomic_load_n(&opt.oversize_threshold, __ATOMIC_RELAXED);   /* mallopt may set it */
    bool oversize = !discarded && threshold != 0 && span_bytes(s) >= threshold;
    purge_batch_t batch;
    bool purge_now = false;
    lock_elided_t held = mutex_lock_elidable(&a->lock);
    large_stats_t *ls = &a->large[s->size_class - NSMALL];
    ls->nfree++;
    ls->live_bytes -= s->usable;
    type_count_free(s->type_id, s->usable);
    arena_clock_refresh(a);
    span_t *run = discarded ? ph_free_clean(&a->ph, s, a->clock_ns, uncharged) : ph_free(&a->ph, s, a->clock_ns);
    if (oversize)
        purge_now = take_run_for_purge(a, run, 0, &batch);
    arena_after_free(a);
    mutex_unlock_elidable(&a->lock, held);
    if (purge_now)
        purge_taken_runs(a, &batch);
    arena_purge_if_due(a);
}

void arena_free_large(span_t *s) { free_large(s, false, false); }

void arena_free_large_discarded(span_t *s) { free_large(s, true, true); }

void arena_free_large_reopened(span_t *s) { free_large(s, true, false); }

/* A live block's bytes went from before (class class_before) to after:
 * its class follows, and the per-class and per-type statistics move with
 * it. Arena lock held. */
static void large_restat(arena_t *a, span_t *s, unsigned class_before, size_t before, size_t after)
{
    unsigned c = sc_compute(after);
    s->size_class = c < NSMALL ? NSMALL : c;
    large_stats_t *from = &a->large[class_before - NSMALL], *to = &a->large[s->size_class - NSMALL];
    from->live_bytes -= before;
    to->live_bytes += after;
    if (s->size_class != class_before) {
        from->nfree++;
        to->nmalloc++;
    }
    if (s->type_id != 0) {
        type_count_free(s->type_id, before);
        type_count_alloc(s->type_id, after);
    }
}

bool arena_resize_large_in_place(span_t *s, size_t size, bool purge_cut)
{
    size_t in_page = s->base - s->start;
    size_t usable = arena_large_usable(size, in_page);
    size_t npages = (usable + in_page) >> LG_PAGE;
    /* a guarded block's run keeps its guard as its last page: the old
     * guard gets access back (a page of the block now, or cut off with
     * the tail), and the run's new last page becomes the guard */
    bool guarded = s->guarded;
    npages += guarded;
    if (npages == s->npages)
        return true;
    if (guarded && !os_commit((void *)guard_page(s), PAGE))
        return false;
    arena_t *a = s->arena;
    bool ok = true, purge_now = false;
    purge_batch_t batch;
    lock_elided_t held = mutex_lock_elidable(&a->lock);
    size_t before = s->usable;
    unsigned class_before = s->size_class;
    if (npages > s->npages) {
        ok = ph_grow(&a->ph, s, npages);
    } else {
        span_t *tail = ph_shrink(&a->ph, s, npages, a->clock_ns);
        if (purge_cut)
            purge_now = take_run_for_purge(a, tail, SHRINK_PURGE_MIN, &batch);
    }
    if (ok) {
        /* ph_grow/ph_shrink set usable to the end of the run */
        if (guarded)
            s->usable -= PAGE;
        large_restat(a, s, class_before, before, s->usable);
        arena_tick(a);
    }
    mutex_unlock_elidable(&a->lock, held);
    if (guarded && !os_protect_none((void *)guard_page(s), PAGE, false)) {
        s->guarded = 0;   /* the kernel refused: the block goes on unguarded */
        __atomic_fetch_sub(&guarded_live, 1, __ATOMIC_RELAXED);
    }
    if (purge_now)
        purge_taken_runs(a, &batch);
    arena_purge_if_due(a);
    return ok && s->usable >= size;
}

bool arena_cut_slack(span_t *s)
{
    arena_t *a = s->arena;
    size_t in_page = s->base - s->start;
    size_t full = span_end(s) - s->base;
    lock_elided_t held = mutex_lock_elidable(&a->lock);
    arena_clock_refresh(a);
    unsigned class_before = s->size_class;
    bool cut = ph_shrink(&a->ph, s, (s->usable + in_page) >> LG_PAGE, a->clock_ns) != NULL;
    if (cut) {
        large_restat(a, s, class_before, full, s->usable);
        arena_after_free(a);
    }
    mutex_unlock_elidable(&a->lock, held);
    arena_purge_if_due(a);
    return cut;
}

void arenas_iteration_lock(void) { mutex_lock(&arenas_lock); }
void arenas_iteration_unlock(void) { mutex_unlock(&arenas_lock); }

/* ---- fork -------------------------------------------------------------- */

typedef struct lock_fn {
    void (*fn)(dpm_mutex_t *);
} lock_fn_t;

static void apply_to_bin_lock(bin_t *bin, void *arg) { ((const lock_fn_t *)arg)->fn(&bin->lock); }

/* Every lock of every arena, in the global lock order: all special
 * locks, then all bin locks, then all purge locks, then all arena locks
 * (a bin lock holder may take any arena's purge and arena locks: the
 * ENOMEM retry purges every arena). The special locks are held while the
 * special bin tables are walked, so none grows meanwhile. */
/* In the global lock order (prefork), or in reverse (the parent after
 * fork releases the special locks last: while it walks the special bins
 * no thread may add one whose lock prefork never took). */
static void for_each_lock(void (*fn)(dpm_mutex_t *), bool reverse)
{
    lock_fn_t bin_fn = {fn};
    unsigned n = __atomic_load_n(&narenas_total, __ATOMIC_ACQUIRE);
    for (int step = 0; step < 4; step++) {
        int group = reverse ? 3 - step : step;
        for (unsigned i = 0; i < n; i++) {
            arena_t *a = arenas[i];
            if (a == NULL)
                continue;
            if (group == 0) {
                fn(&a->special_lock);
            } else if (group == 1) {
                for (unsigned c = 0; c < NSMALL; c++)
                    fn(&a->bins[c].lock);
                arena_for_each_special_bin(a, apply_to_bin_lock, &bin_fn);
            } else {
                fn(group == 2 ? &a->purge_lock : &a->lock);
            }
        }
    }
}

static void lock_one(dpm_mutex_t *m) { mutex_lock(m); }
static void unlock_one(dpm_mutex_t *m) { mutex_unlock(m); }
static void reinit_one(dpm_mutex_t *m) { mutex_reinit(m); }

void arenas_prefork(void)
{
    mutex_lock(&arenas_lock);
    for_each_lock(lock_one, false);
}

void arenas_postfork_parent(void)
{
    for_each_lock(unlock_one, true);
    mutex_unlock(&arenas_lock);
}

void arenas_postfork_child(void)
{
    fork_generation++;
    for_each_lock(reinit_one, false);
    mutex_init(&arenas_lock);
    unsigned n = narenas_total;
    for (unsigned i = 0; i < n; i++)
        if (arenas[i] != NULL) {
            /* only the forking thread lives on: no other thread is bound,
             * sends blocks home or runs a page source's callback here (the
             * runs of a batch another thread had taken out to purge come
             * back below; a segment it was growing the heap by, or handing
             * back to the source, is lost to the child with that thread) */
            arena_t *a = arenas[i];
            a->nthreads = a->homing_in_flight = 0;
            a->purges_in_flight = a->grows_in_flight = 0;
            /* the forking thread's own calls (it forked from inside a
             * callback) still end, and count out, in the child */
            const purge_batch_t *mine[SOURCE_CALLS_MAX];
            unsigned nmine = 0, depth = source_calls_depth < SOURCE_CALLS_MAX ? source_calls_depth : SOURCE_CALLS_MAX;
            for (unsigned k = 0; k < depth; k++) {
                if (source_calls_here[k].arena != a)
                    continue;
                (*in_flight_count(a, source_calls_here[k].kind))++;
                if (source_calls_here[k].batch != NULL)
                    mine[nmine++] = source_calls_here[k].batch;
            }
            if (a->ph.busy_pages != 0)
                ph_postfork_reclaim_busy(&a->ph, mine, nmine);
        }
}
