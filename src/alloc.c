/*
 * alloc.c - the dpm_ API and the slow paths behind the inline fast paths
 * (see alloc.h): first use of a thread, cache misses and overflows, large
 * blocks, aligned and at-offset requests, realloc, typed and per-arena
 * allocation, junk/zero options, cycle sampling, and misuse reports.
 */
#include "alloc.h"
#include "background.h"
#include "conf.h"
#include "error.h"
#include "types.h"
#include "typed_cache.h"
#include "numa.h"
#include "canary.h"
#include "guarded.h"
#include "prof.h"
#include "memlimit.h"
#include "quarantine.h"
#include "zero_blocks.h"

#include <dpmalloc.h>
#include <errno.h>
#include <string.h>

/* The thread asked for what only its own cache gives (thread_front_keep_own). */
static __thread bool keeps_own_cache;

#define JUNK_ALLOC 0xa5
#define JUNK_FREE 0x5a
#define SAMPLE_EVERY 64

/* The calling thread's own limits per large class, if it set any
 * (thread.tcache.ncached_max), for its puts into the large caches. */
static const uint8_t *large_limits_mine(void)
{
    const tcache_t *tc = tcache_mine();
    return tc->large_tuned ? tc->large_max : NULL;
}

static void *fail_nomem(void)
{
    errno = ENOMEM;
    return NULL;
}

/* A large block of a: arena_alloc_large, and in secure mode, when that
 * fails, again after the quarantines went home (they hold address space
 * that an RLIMIT_AS or a full map count may need); refused at the memory
 * limit, again after the limit's reclaim (memlimit.h: every cache drained,
 * every arena purged), which runs here with no lock held. */
static void *large_block(arena_t *a, const large_request_t *req)
{
    memlimit_refused_clear();
    int *err = &errno, saved = *err;   /* a retry that succeeds leaves errno as it was */
    void *p = arena_alloc_large(a, req);
    if (unlikely(p == NULL) && unlikely(opt.secure) && quarantine_drain("malloc") != 0)
        p = arena_alloc_large(a, req);
    if (unlikely(p == NULL) && memlimit_refused_take()) {
        bool ran = memlimit_reclaim();   /* none ran: the refusal stands (arena_bin_fill) */
        if (ran)
            p = arena_alloc_large(a, req);
        if (p == NULL && (!ran || memlimit_refused_take()))
            memlimit_count_failure();
    }
    if (p != NULL)
        *err = saved;
    memlimit_soft_drain_if_due();
    return p;
}

/* prof:true: counts a request of size bytes; when it is the sampled one,
 * serves it as a page run of its own, recorded in the profile (prof.h),
 * else NULL: the caller goes on. Only blocks of the automatic arenas and
 * the NUMA nodes' (never reset) are sampled: a manual arena's reset hands
 * back its pages wholesale. */
static bool prof_samples_arena(const arena_t *a) { return a != NULL && (!a->manual || a->node >= 0); }

static size_t slot_bytes(size_t size);
static unsigned request_class(size_t size);
static unsigned request_class_aligned(size_t size, size_t align);

#define PROF_NO_CLASS 0xffu
static bool secure_slab_class(unsigned c);
static unsigned aligned_slab_class(size_t size, size_t align);
/* The slab class (small, or an aligned slab's special bin) that the same
 * request takes unsampled, by the choice of aligned_at_raw (the caches)
 * or of arena_block_raw (arena_path: an arena's bins, past the caches);
 * PROF_NO_CLASS for a page run, whose usable bytes a sampled run of the
 * same size has too. */
static unsigned prof_unsampled_class(size_t size, size_t align, size_t off, bool arena_path)
{
    unsigned c = PROF_NO_CLASS;
    if (off != 0 || align <= QUANTUM) {
        c = request_class(size);
    } else if (arena_path) {
        if (align <= SMALL_MAX)
            c = request_class_aligned(size, align);
    } else if (align <= PAGE) {
        unsigned plain = request_class(size);
        c = (sc_size(plain) & (align - 1)) == 0 ? plain : request_class_aligned(size, align);
    } else if (align <= SC_ALIGNED_SLAB_MAX && size <= SC_ALIGNED_SLAB_MAX) {
        c = aligned_slab_class(size, align);
        if (c >= NSMALL && c < NCLASSES && c < PROF_NO_CLASS)
            return c;
    }
    return c < NSMALL || (secure_slab_class(c) && arena_path == false) ? c : PROF_NO_CLASS;
}

static DPM_NOINLINE void *prof_sampled_typed(arena_t *a, size_t size, size_t align, size_t off, bool zero,
                                             uint16_t type, bool arena_path)
{
    if (!prof_samples_arena(a) || size > ALLOC_MAX)
        return NULL;
    int *err = &errno, saved = *err;
    /* at least the bytes the same request has unsampled, which its
     * usable size reports (nallocx's, sallocx's, xallocx's alike) */
    unsigned c = prof_unsampled_class(size == 0 ? 1 : size, align, off, arena_path);
    size_t want = c == PROF_NO_CLASS ? size : sc_size(c) - canary_bytes();
    large_request_t req = {.size = want > size ? want : size, .align = align, .offset = off,
                           .zero = zero || opt.zero, .type_id = type};
    void *p = large_block(a, &req);
    *err = saved;   /* no memory for the sample: the allocation goes on unsampled */
    if (p == NULL)
        return NULL;
    DPM_ANN_OPEN(p, size);
    if (unlikely(opt.junk) && !req.zero)
        memset(p, JUNK_ALLOC, size);
    span_t *s = span_of(p);
    s->requested = size;
    prof_record(s, size);
    /* after prof_record, which marks the span (and clears this) */
    s->prof_class = (uint8_t)(c == PROF_NO_CLASS || sc_size(c) - canary_bytes() > s->usable ? 0 : c + 1);
    return p;
}
static void *prof_sampled(size_t size, size_t align, size_t off, bool zero)
{
    return prof_sampled_typed(thread_arena(), size, align, off, zero, 0, false);
}
DPM_INLINE void *prof_counted(size_t size, size_t align, size_t off, bool zero)
{
    return likely(!prof_tick(size)) ? NULL : prof_sampled(size, align, off, zero);
}

/* prof:true: realloc resized the large block of span s in place to size
 * bytes, which counts as freeing the old block and allocating the new
 * one: a sample of the old size is dropped, the new size counted (and
 * maybe sampled, in place). */
static DPM_NOINLINE void prof_resized(span_t *s, size_t size)
{
    if (s->prof_sampled)
        prof_forget(s);
    if (prof_tick(size) && prof_samples_arena(s->arena))
        prof_record(s, size);
}

/* The sampled allocation p (a large block from the usual path) recorded,
 * unless its arena's blocks are not sampled: a thread bound to a manual
 * arena allocates there, and that arena's reset discards its blocks
 * without their frees. */
static void prof_record_large(void *p, size_t size)
{
    span_t *s = p != NULL ? span_of(p) : NULL;   /* NULL: guard_sample's block */
    if (s != NULL && s->kind == SPAN_LARGE && (uintptr_t)p == s->base && prof_samples_arena(s->arena))
        prof_record(s, size);
}

/* ---- sampling (opt.stats_cycles): 1 in SAMPLE_EVERY slow calls --------- */

static __thread uint32_t sample_tick;

static bool sample_this_call(void)
{
    /* the samples live in the thread's own cache */
    return unlikely(opt.stats_cycles) && tls_state == THREAD_CACHED && tcache_mine() != &tcache_empty &&
           ++sample_tick % SAMPLE_EVERY == 0;
}

static void sample_record(bool is_alloc, uint64_t t0)
{
    uint64_t dt = cpu_cycles() - t0;
    slow_samples_t *s = &tcache_mine()->samples;
    if (is_alloc) {
        counter_add(&s->alloc_n, 1);
        counter_add(&s->alloc_cycles, dt);
    } else {
        counter_add(&s->free_n, 1);
        counter_add(&s->free_cycles, dt);
    }
}

/* ---- malloc / free slow paths ------------------------------------------ */

/* One block of a plain or typed bin (16-byte aligned objects), for a
 * caller that bypasses the thread caches: the block may have gone home
 * from a cache with the free key in it. */
static bool bin_block(bin_t *bin, void **p)
{
    if (arena_bin_fill(bin, p, 1, NULL) == 0)
        return false;
    tc_block_handed_out(*p);
    return true;
}

/* Bytes a zeroed block of class c asked for size needs cleared: opt.zero
 * zeroes the whole block, since realloc may grow into it. */
static size_t zero_bytes(unsigned c, size_t size) { return opt.zero ? sc_size(c) - canary_bytes() : size; }

/* The bytes a request of size bytes needs of its slot: secure mode
 * counts the slot's canary (canary.h) in, and skips the smallest class,
 * whose canary would cover bytes 8..11, which handouts clear (the free
 * key, tcache.h). */
static size_t slot_bytes(size_t size)
{
    if (likely(canary_bytes() == 0))
        return size;
    return size + CANARY_BYTES > QUANTUM ? size + CANARY_BYTES : QUANTUM + 1;
}

/* The class a request of size bytes takes (with an alignment). */
static unsigned request_class(size_t size) { return sc_of_size(slot_bytes(size)); }
static unsigned request_class_aligned(size_t size, size_t align) { return sc_of_size_aligned(slot_bytes(size), align); }

/* Secure mode takes the large classes up to 64 KiB from their slabs (the
 * aligned requests' special bins, sizeclass.h) for every request: a
 * canary and the small quarantine guard them, where a page run's guard
 * page and quarantine without access cost four system calls and its
 * pages' faults a block. */
static bool secure_slab_class(unsigned c)
{
    return unlikely(opt.secure) && c >= NSMALL && c < NCLASSES && sc_size(c) <= SC_ALIGNED_SLAB_MAX;
}
/* The slab class of an aligned request beyond a page (no offset; size
 * and alignment at most SC_ALIGNED_SLAB_MAX): a small class, or a large
 * class's special bin (sizeclass.h) where the slot is no bigger than the
 * alignment, or in secure mode (secure_slab_class); NCLASSES: a page run.
 * A bigger request takes the run because its descriptor records the size
 * asked for, so that a sized free or sized delete of it is checked
 * exactly (promise_holds), where a slot of a large class bounds the
 * promise by the class only (new of an alignas(8192) 16 KiB type,
 * deleted with 10 bytes less, went unnoticed). */
static unsigned aligned_slab_class(size_t size, size_t align)
{
    /* a power of two is a class of its own: size <= align needs no search */
    unsigned c = slot_bytes(size) <= align ? sc_compute(align) : request_class_aligned(size, align);
    if (c < NSMALL || secure_slab_class(c) || (slot_bytes(size) <= align && sc_size(c) <= SC_ALIGNED_SLAB_MAX))
        return c;
    return NCLASSES;
}
static void *phased_small(unsigned c, size_t size, uint32_t phase, bool zero);
/* A block of such a class c from its slab, junk-filled unless zeroed
 * (secure mode implies junk); NULL with errno ENOMEM. */
static void *secure_slab_block(unsigned c, size_t size, bool zero)
{
    void *p = phased_small(c, size, 0, zero);
    if (p == NULL)
        return fail_nomem();
    if (!zero && !opt.zero)
        memset(p, JUNK_ALLOC, size);
    return p;
}

/* With guard_sample: the sampled allocation of this slow path (weight:
 * the blocks it hands out or refills) from a guarded slot, or NULL. */
static void *maybe_guarded(size_t size, unsigned weight)
{
    if (likely(!guarded_due(weight)) || size == 0 || size > SMALL_MAX)
        return NULL;
    /* blocks of the automatic arenas only: a thread bound to a manual
     * arena allocates only from it (its page source's memory, its reset) */
    arena_t *a = thread_arena();
    if (a == NULL || a->manual)
        return NULL;
    /* its usable bytes are its class's, as dpm_good_size promises */
    unsigned c = request_class(size);
    return c < NSMALL ? guarded_alloc(sc_size(c) - canary_bytes()) : NULL;
}

static void *alloc_uncached(arena_t *a, unsigned c, size_t size, bool zero)
{
    void *p;
    if (a == NULL)
        return fail_nomem();
    if (c < NSMALL) {
        if (!bin_block(&a->bins[c], &p))
            return fail_nomem();
        DPM_ANN_OPEN(p, zero_bytes(c, size));
        if (zero)
            memset(p, 0, zero_bytes(c, size));
    } else {
        large_request_t req = {.size = size, .align = 1, .zero = zero};
        if ((p = large_block(a, &req)) == NULL)
            return NULL;
    }
    DPM_ANN_OPEN(p, size);
    if (unlikely(opt.junk) && !zero)
        memset(p, JUNK_ALLOC, size);
    return p;
}

/* Whether the CPU caches take blocks of tcache_class k: the cached
 * classes of the automatic arenas, and of node arenas with node tags
 * (which tag only their cached classes so), and the phased tags (only
 * automatic arenas' phased bins of cached classes get one, arena.c). */
static bool cpu_takes(unsigned k)
{
    return k < g.tcache_nclasses || tc_class_is_node(k) || tc_class_is_phased(k);
}

/* numa:true: the node of the CPU the calling thread runs on, whose table
 * its pops use from now on (cpu_cache_node_tables; the all-locked table
 * for a node without tags, whose blocks take the path below). */
static unsigned numa_pick_pop_table(void)
{
    unsigned node = numa_cpu_node(rseq_cpu_now());
    /* (prof:true: every pop through alloc_front_miss, which counts it;
     * secure mode: through its own path, secure_front_alloc) */
    tls_thread.pop_table =
        node < TC_NODE_GROUPS && !prof_on && !opt.secure ? cpu_cache_node_tables[node] : cpu_cache_none_table;
    return node;
}

/* A thread on the CPU caches found bin c (a cached class) of its CPU's
 * cache empty or locked: a block of class c from the slow half, handed
 * out, or NULL with errno ENOMEM. With numa:true, of the node of the CPU
 * it runs on (not of the arena it took at its first allocation: a
 * thread moved to another node's CPUs follows them); a node without
 * tags (span.h) gives it from its arena, uncached. */
static void *cpu_class_miss(unsigned c, size_t size)
{
    void *p;
    if (!opt.numa) {
        p = cpu_cache_alloc_miss(thread_arena(), c);
    } else {
        unsigned node = numa_pick_pop_table();
        arena_t *a = numa_node_arena(node);
        if (a != NULL && node >= TC_NODE_GROUPS)
            return alloc_uncached(a, c, size, opt.zero);
        p = a != NULL ? cpu_cache_alloc_miss(a, tc_node_class(node, c)) : NULL;
    }
    return p != NULL ? p : fail_nomem();
}

static void *alloc_slow_plain(size_t size)
{
    unsigned c = request_class(size);
    tcache_t *tc = tcache_mine();
    void *sampled;
    if (c < g.tcache_nclasses && tls_thread.cpu_table == cpu_cache_table)
        return (sampled = maybe_guarded(size, cpu_cache_fill_count(c))) != NULL ? sampled : cpu_class_miss(c, size);
    /* (a thread without a cache of its own reads none of tcache_empty's
     * 14 KiB: a page of it first touched inside a reserve would fault) */
    if (c < TC_MAX_CLASSES && tc != &tcache_empty && tc->bins[c].ncached_max != 0) {
        if ((sampled = maybe_guarded(size, tc->bins[c].ncached_max / 2 + 1)) != NULL)
            return sampled;
        counter_add(&tc->bins[c].nrequests, 1);
        tcache_event(tc);
        void *p = tcache_alloc_miss(tc, c);
        return p != NULL ? p : fail_nomem();
    }
    if ((sampled = maybe_guarded(size, 1)) != NULL)
        return sampled;
    if (secure_slab_class(c))
        return secure_slab_block(c, size, opt.zero);
    if (c >= NSMALL && tls_state == THREAD_CACHED) {
        void *p = large_cache_take(thread_arena(), size, c);
        if (p != NULL)
            return p;
    }
    return alloc_uncached(thread_arena(), c, size, opt.zero);
}

/* prof:true: the sampled allocation of the slow path. A small one is a
 * page run of its own (prof_sampled); a large one is whatever the path
 * gives, recorded. */
static DPM_NOINLINE void *prof_sampled_slow(size_t size)
{
    void *p;
    if ((request_class(size) < NSMALL || secure_slab_class(request_class(size))) &&
        (p = prof_sampled(size, 1, 0, false)) != NULL)
        return p;
    p = alloc_slow_plain(size);
    prof_record_large(p, size);
    return p;
}

static void *alloc_slow_body(size_t size)
{
    if (unlikely(prof_on) && unlikely(prof_tick(size)))
        return prof_sampled_slow(size);
    return alloc_slow_plain(size);
}

void *alloc_at_low_water(size_t size, tc_bin_t *b)
{
    tcache_t *tc = __atomic_load_n(&tls_thread.tcache, __ATOMIC_RELAXED);
    void *p = tc_bin_pop(tc, (unsigned)(b - tc->bins));
    DPM_ANN_SLOT_BELOW(b->head);
    if (p == NULL)
        return alloc_slow(size);
    counter_add(&b->nrequests, 1);
    thread_count_alloc(sc_size((unsigned)(b - tc->bins)));
    return p;
}

/* Secure mode's malloc(0) and aligned requests of 0 bytes: a block no
 * access reaches (zero_blocks.h); NULL where there is none to give. */
static void *zero_size_block(size_t align)
{
    return unlikely(opt.secure) ? zero_block_alloc(align) : NULL;
}

/* alloc_slow's body; *counted: the block was counted (alloc_fast's) */
static void *alloc_slow_raw(size_t size, bool *counted)
{
    if (unlikely(!dpm_ready()) || unlikely(size > ALLOC_MAX))
        return fail_nomem();
    void *z;
    if (unlikely(size == 0) && (z = zero_size_block(1)) != NULL)
        return z;
    if (unlikely(__atomic_load_n(&background_pending, __ATOMIC_RELAXED)) && !mutex_all_held_here)
        background_maybe_start();
    if (tls_state == THREAD_NEW && thread_cache_make()) {
        *counted = true;
        return alloc_fast(size);
    }
    if (!sample_this_call())
        return alloc_slow_body(size);
    uint64_t t0 = cpu_cycles();
    void *p = alloc_slow_body(size);
    sample_record(true, t0);
    return p;
}

void *alloc_slow(size_t size)
{
    bool counted = false;
    void *p = alloc_slow_raw(size, &counted);
    return counted ? p : thread_count_alloc_block(p);
}

/* Validates p against its span; returns the span or aborts naming call. */
/* Validates p against s, its span per the page map (NULL: none); returns
 * s or aborts naming call. */
DPM_INLINE span_t *checked_span_of(const void *p, span_t *s, const char *call)
{
    if (s == NULL)
        dpm_misuse(call, p, "invalid pointer");
    if (s->kind == SPAN_SLAB ? !span_is_block_start(s, (uintptr_t)p)
        : s->kind != SPAN_LARGE || (uintptr_t)p != s->base)
        dpm_misuse(call, p, s->kind == SPAN_FREE ? "invalid pointer or double free" : "invalid pointer");
    if (s->kind == SPAN_SLAB && span_block_is_free(s, span_block_index(s, (uintptr_t)p)))
        dpm_misuse(call, p, "double free or never-allocated pointer");
    if (s->kind == SPAN_LARGE && __atomic_load_n(&s->parked, __ATOMIC_RELAXED))
        dpm_misuse(call, p, "double free of");
    return s;
}

DPM_INLINE span_t *checked_span_inline(const void *p, const char *call) { return checked_span_of(p, span_of(p), call); }
static span_t *checked_span(const void *p, const char *call) { return checked_span_inline(p, call); }


/* Secure mode: a slab block whose canary (canary.h) is no longer what
 * the slab wrote aborts naming call. */
static void check_canary(const void *p, const span_t *s, const char *call)
{
    if (s->kind != SPAN_SLAB)
        return;
    uint64_t *w = canary_word(s, p);
    DPM_ANN_OPEN(w, CANARY_BYTES);
    uint64_t seen;
    memcpy(&seen, w, sizeof seen);   /* a phased block's slot may start at any byte */
    bool intact = seen == canary_of(p);
    DPM_ANN_CLOSE(w, CANARY_BYTES);
    if (!intact)
        dpm_misuse(call, p, "write past the end (canary overwritten) of");
}

/* What free does to a validated block's bytes before it leaves. */
static void free_scrub(void *p, const span_t *s)
{
    DPM_ANN_OPEN(p, span_usable(s));
    if (unlikely(opt.junk))
        memset(p, JUNK_FREE, span_usable(s));
    DPM_ANN_CLOSE(p, span_usable(s));
}

/* Secure mode: the block q of span s, verified as it left the
 * quarantine, goes to the CPU's cache if the CPU caches take its class
 * (g.secure_nclasses: a class bin of an automatic arena, as their fills
 * take), with the free key (tcache.h) the double-free look-up finds; else
 * home. */
static void secure_pass_on(void *q, const span_t *s)
{
    unsigned c = s->bin->size_class;
    const arena_t *a = s->arena;
    /* (prof:true and numa:true threads pop no CPU cache: home) */
    if (c < g.secure_nclasses && s->bin == &a->bins[c] && !a->manual && a->node < 0 && !prof_on && !opt.numa) {
        DPM_ANN_OPEN_KEY(q);
        *tc_key_word(q) = TC_FREE_KEY;
        DPM_ANN_CLOSE_KEY(q);
        /* (which block comes next out of the quarantine is random:
         * quarantine.c, the mix) */
        if (!cpu_cache_push(cpu_cache_table, (c + 1) * sizeof(cpu_bin_t), q))
            cpu_cache_free_full(q, c);
        return;
    }
    arena_bin_flush(&q, 1);
}

bool secure_block_freed_lookup(const void *p, const span_t *s, uint32_t word)
{
    if (word == QUARANTINE_MARK)
        return quarantine_small_holds(p, s);
    return g.secure_nclasses != 0 && cpu_caches_hold(p, s->bin->size_class);
}

/* Sends a validated block back to its slab or page heap, past any cache
 * (secure mode: through a quarantine, quarantine.h, and from there
 * maybe a CPU's cache). */
static void free_home(void *p, span_t *s, const char *call)
{
    free_scrub(p, s);
    if (s->kind == SPAN_SLAB) {
        void *left;
        span_t *left_span;
        if (likely(!opt.secure) || !quarantine_small_put(p, s, JUNK_FREE, call, &left, &left_span))
            arena_bin_flush(&p, 1);
        else if (left != NULL)
            secure_pass_on(left, left_span);
    } else {
        if (unlikely(s->prof_sampled))
            prof_forget(s);
        large_cache_slack_detach(s);
        if (likely(!opt.secure) || !quarantine_large_put(s))
            arena_free_large(s);
    }
}

/* Blocks of manual arenas always come here (their tags name bins that are
 * always full); tcache_bin_for caches them only in their bound threads. */
static void free_slow_body(void *p, span_t *s, const char *call)
{
    /* frees make decay work: an idle automatic thread wakes up */
    if (unlikely(__atomic_load_n(&background_idle, __ATOMIC_RELAXED)))
        background_wake();
    unsigned c = TC_NONE;
    /* a block that holds the key may sit in some thread's cache, whether
     * or not this thread would cache it now */
    check_not_cached(p, s, call, "double free of");
    if (unlikely(opt.secure))
        check_canary(p, s, call);
    if (cpu_takes(s->tcache_class) && tls_thread.cpu_table == cpu_cache_table) {
        *tc_key_word(p) = TC_FREE_KEY;
        DPM_ANN_CLOSE_KEY(p);
        cpu_cache_free_full(p, s->tcache_class);
        return;
    }
    if (s->tcache_class != TC_NONE && tls_state == THREAD_CACHED && tcache_mine() != &tcache_empty)
        c = tcache_bin_for(tcache_mine(), s);
    if (c != TC_NONE) {
        tcache_t *tc = tcache_mine();
        tc_bin_t *b = &tc->bins[c];
        *tc_key_word(p) = TC_FREE_KEY;
        DPM_ANN_CLOSE_KEY(p);
        tcache_event(tc);
        if (!tc_bin_full(b))
            tc_bin_push(b, p);
        else
            tcache_free_full(tc, c, p);
        return;
    }
    DPM_ANN_CLOSE_KEY(p);
    if (s->type_ids != NULL && s->kind == SPAN_SLAB && typed_cache_takes(s->arena)) {
        free_scrub(p, s);
        if (!typed_cache_put(p, s, call))
            arena_bin_flush(&p, 1);
        return;
    }
    if (s->kind == SPAN_LARGE) {
        if (unlikely(s->prof_sampled))
            prof_forget(s);
        large_cache_slack_detach(s);   /* cached or freed whole */
    }
    if (s->kind == SPAN_LARGE && tls_state == THREAD_CACHED && large_cache_put(s, large_limits_mine()))
        return;
    free_home(p, s, call);
}

/* A large block's free (span per the page map, not NULL): the
 * CPU's large cache takes it, or it goes home. A chain of growth
 * ends here, most often with a cold cache right after the program wrote
 * the block: this path reads the span's two lines and the cache's first
 * line, and checks only what can fail for a large block. */
static void free_large(void *p, span_t *s, const char *call)
{
    if ((uintptr_t)p != s->base)
        dpm_misuse(call, p, "invalid pointer");
    if (__atomic_load_n(&s->parked, __ATOMIC_RELAXED))
        dpm_misuse(call, p, "double free of");
    DPM_ANN_CLOSE_KEY(p);
    if (unlikely(s->prof_sampled))
        prof_forget(s);
    large_cache_slack_detach(s);   /* cached or freed whole */
    if (tls_state == THREAD_CACHED && large_cache_put(s, large_limits_mine()))
        return;
    free_home(p, s, call);
}

/* Blocks the page map does not know: secure mode's zero-size blocks
 * (zero_blocks.h) and guard_sample's (guarded.h). Every entry path that
 * finds no span asks here before it calls the pointer invalid. */
static bool off_map_block(const void *p) { return zero_block_in_region(p) || guarded_in_pool(p); }

/* The usable bytes of the off-map block p; aborts naming call unless it
 * is live. */
static size_t off_map_usable(const void *p, const char *call)
{
    if (zero_block_in_region(p)) {
        zero_block_check_live(p, call);
        return 0;
    }
    return guarded_live_size(p, call);
}

/* Frees the off-map block p; promise: a sized free's size (SIZE_MAX: an
 * unsized free), at most its usable bytes. Keeps errno, as free does. */
static void off_map_free(void *p, size_t promise, const char *call)
{
    if (promise != SIZE_MAX && promise > off_map_usable(p, call))
        dpm_misuse(call, p, "size does not match the block at");
    int *err = &errno, saved = *err;
    if (zero_block_in_region(p))
        zero_block_free(p, call);   /* no usable byte to count */
    else
        thread_count_free(guarded_free(p, call));
    *err = saved;
}

/* A block the heap profile sampled reports what the same request would
 * have had unsampled (prof_unsampled_class, alignment and path included):
 * a slab class's bytes (dpm_good_size, nallocx), not its page run's, which
 * has at least those; after an in-place resize, its run's. */
static DPM_NOINLINE size_t prof_block_usable(const span_t *s)
{
    return s->prof_class != 0 ? sc_size(s->prof_class - 1u) - canary_bytes() : span_usable(s);
}

/* The usable bytes thread.allocated and thread.deallocated count for a
 * block of span s: malloc_usable_size's (a sampled block's class size). */
static size_t counted_usable(const span_t *s)
{
    return unlikely(s->prof_sampled) ? prof_block_usable(s) : span_usable(s);
}

/* No span: a block of an arena that another thread destroyed meanwhile
 * (a misuse dpm_malloc_arena's documentation forbids: the block is gone
 * already); the count must not be what crashes. */
void *thread_count_alloc_block(void *p)
{
    if (p == NULL)
        return p;
    if (off_map_block(p)) {
        thread_count_alloc(off_map_usable(p, "malloc"));
        return p;
    }
    const span_t *s = span_of(p);
    if (likely(s != NULL))
        thread_count_alloc(counted_usable(s));
    return p;
}

/* free keeps errno (POSIX.1-2024): the slow paths below may make system
 * calls that fail, such as a munmap that the kernel refuses at
 * vm.max_map_count, or sleep in a futex (EAGAIN, EINTR); free_fast makes
 * none. So both ways out of free_fast, free_slow and free_leaf_miss,
 * restore the caller's errno, and every free (free, free_sized,
 * free_aligned_sized, dpm_free, realloc to 0, operator delete) goes
 * through free_fast. */
void free_slow(void *p, span_t *span, const char *call)
{
    if (p == NULL)
        return;
    if (unlikely(span == NULL) && off_map_block(p)) {
        off_map_free(p, SIZE_MAX, call);
        return;
    }
    int *err = &errno, saved = *err;
    if (span != NULL && span->kind == SPAN_LARGE && likely(!opt.stats_cycles)) {
        free_large(p, span, call);
        *err = saved;
        return;
    }
    /* a large block's free reads the span's second line: with a cold
     * cache, its miss overlaps the first line's */
    __builtin_prefetch((char *)span + 64);
    span_t *s = checked_span_of(p, span, call);
    if (!sample_this_call()) {
        free_slow_body(p, s, call);
        *err = saved;
        return;
    }
    uint64_t t0 = cpu_cycles();
    free_slow_body(p, s, call);
    sample_record(false, t0);
    *err = saved;
}

static void free_leaf_miss_body(void *p, const char *call)
{
    uintptr_t a = (uintptr_t)p;
    const uintptr_t *leaf = radix_leaf(a);
    /* An empty leaf is not cached: one may be made for it later. */
    if (leaf == radix.empty_leaf) {
        free_slow(p, NULL, call);
        return;
    }
    if (tls_state != THREAD_CACHED) {
        /* A thread that frees before it allocates (a consumer) gets its
         * cache here, so its frees are batched like an allocating
         * thread's instead of each taking a bin lock. */
        if (tls_state == THREAD_NEW && thread_cache_make())
            free_fast(p, call);
        else
            free_slow_counted(p, span_of(p), call);
        return;
    }
    /* No ordering for signal handlers: like glibc's, dpmalloc's calls
     * are not async-signal-safe (include/dpmalloc.h). */
    thread_leaf_set(a, leaf);
    free_fast(p, call);
}

void free_slow_counted(void *p, span_t *s, const char *call)
{
    if (s != NULL)
        thread_count_free(counted_usable(s));
    free_slow(p, s, call);
}

void free_leaf_miss(void *p, const char *call)
{
    int *err = &errno, saved = *err;   /* as in free_slow */
    free_leaf_miss_body(p, call);
    *err = saved;
}

/* ---- the front ends ---------------------------------------------------- */

bool block_is_cached(const void *p, unsigned k)
{
    return tcache_holds_block(p, tc_class_of(k)) || cpu_caches_hold(p, k);
}

void confirm_not_cached(void *p, unsigned k, const char *call, const char *what)
{
    if (block_is_cached(p, k))
        dpm_misuse(call, p, what);
}

void thread_front_pick(void)
{
    bool cpu = cpu_caches_on && tls_state == THREAD_CACHED && !keeps_own_cache;
    if (cpu && !rseq_thread_ready())
        cpu = false, keeps_own_cache = true;   /* the kernel refused: asked once */
    bool was_cpu = tls_thread.cpu_table == cpu_cache_table;
    /* on its own cache: the thread makes it now if it ran without one */
    /* (prof:true: a thread cache's pops would go uncounted, prof.h; a
     * thread bound to a manual arena, which is not sampled, keeps one) */
    /* (and one that has a cache already, made while it was bound to a
     * manual arena, keeps it: taking a live cache away is
     * thread.tcache.enabled's work, not a front end's choice) */
    bool counted = prof_on && (tls_arena == NULL || prof_samples_arena(tls_arena)) && tcache_mine() == &tcache_empty;
    tcache_t *own = !cpu && tls_state == THREAD_CACHED && !counted ? tcache_make_own() : NULL;
    if (own != NULL)
        (void)tcache_ensure_slots(own);
    else if (!cpu && tls_state == THREAD_CACHED)
        tls_state = THREAD_NOCACHE;   /* no memory for it: uncached */
    tls_thread.cpu_table = cpu ? cpu_cache_table : cpu_cache_none_table;
    tls_thread.pop_table = prof_on || opt.secure ? cpu_cache_none_table : tls_thread.cpu_table;
    if (cpu && opt.numa)
        (void)numa_pick_pop_table();
    /* what the thread freed may sit in any CPU's cache: a thread that
     * leaves them (its cache disabled or tuned) sees them emptied, as a
     * thread cache's flush would */
    if (was_cpu && !cpu && ph_source_calls_here == 0)
        cpu_caches_drain(false);
}

void thread_front_keep_own(void)
{
    keeps_own_cache = true;
    thread_front_pick();
}

bool thread_cache_make(void)
{
    if (!tcache_create_for_thread())
        return false;
    thread_front_pick();
    return true;
}

/* A CPU cache's miss for cached class c: the thread's events, then a
 * block from the slow half, counted (thread.allocated). */
static void *cpu_front_miss(unsigned c, size_t size)
{
    if (unlikely(__atomic_load_n(&background_pending, __ATOMIC_RELAXED)) && !mutex_all_held_here)
        background_maybe_start();
    /* the thread's own stashes are trimmed by its events */
    if (tls_state == THREAD_CACHED && tcache_mine() != &tcache_empty)
        tcache_event(tcache_mine());
    void *sampled = maybe_guarded(size, cpu_cache_fill_count(c));
    return thread_count_alloc_block(sampled != NULL ? sampled : cpu_class_miss(c, size));
}

/* prof:true: every small malloc comes here (prof.h), is counted, then
 * popped as the inline sequence would have. Out of line, so that
 * alloc_front_miss's frame stays that of the thread cache's fast path. */
static DPM_NOINLINE void *prof_front_alloc(unsigned c, size_t size)
{
    void *p = prof_counted(size, 1, 0, false);
    if (p != NULL)
        return thread_count_alloc_block(p);
    uint64_t usable;   /* the bin's, as the inline sequence counts it (no page-map look-up) */
    if (!opt.numa && cpu_cache_pop_usable(cpu_cache_table, c * sizeof(cpu_bin_t), &p, &usable)) {
        thread_count_alloc(usable);
        return cpu_handout(p);
    }
    return cpu_front_miss(c, size);
}

/* Secure mode on the CPU caches: a block of class c (below
 * g.secure_nclasses) from the CPU's bin, whose blocks are fresh from a
 * slab (canary written there, slot picked at random) or left the
 * quarantine verified (secure_pass_on; the canary is the slot's and
 * stays), filled with zeros or junk (secure mode implies junk) over its
 * size bytes; not counted. NULL without memory. */
static void *secure_cached_block(unsigned c, size_t size, bool zero)
{
    void *p;
    if (!cpu_cache_pop(cpu_cache_table, c * sizeof(cpu_bin_t), &p) &&
        (p = cpu_cache_alloc_miss_slot(thread_arena(), c)) == NULL)
        return fail_nomem();
    /* every way out of the quarantine overwrites its mark, so a cached
     * block that holds it amid the junk of a free (bytes 0..15) was freed
     * again (its key overwritten first) and waits in the quarantine too.
     * (A slot fresh from a slab may hold anything its pages held before:
     * a program's own bytes 8..11 alone must not abort it.) */
    void *q = cpu_slot_block(p);
    DPM_ANN_OPEN(q, 16);
    uint64_t w[2];
    memcpy(w, q, sizeof w);
    DPM_ANN_CLOSE(q, 16);
    uint64_t junk = 0x0101010101010101u * JUNK_FREE;
    bool requarantined = w[0] == junk && w[1] == ((junk & ~(uint64_t)0xffffffffu) | QUARANTINE_MARK);
    if (unlikely(requarantined))
        dpm_misuse("malloc", q, "double free of");
    p = cpu_handout(p);
    DPM_ANN_OPEN(p, size);
    memset(p, zero ? 0 : JUNK_ALLOC, size);
    return p;
}

/* Whether the calling thread takes secure_cached_block's blocks: secure
 * threads on the CPU caches, unless profiled or under numa:true (their
 * blocks take the uncached slow path). */
static bool secure_thread_cached(void)
{
    return unlikely(g.secure_nclasses != 0) && tls_thread.cpu_table == cpu_cache_table && !prof_on && !opt.numa;
}

/* Every small malloc of a secure thread comes here (its threads pop
 * through the all-locked table) and takes the class with room for the
 * canary. Zero-size requests, profiled threads and numa:true take the
 * uncached slow path. */
static DPM_NOINLINE void *secure_front_alloc(size_t size)
{
    unsigned c = request_class(size);
    if (c >= g.secure_nclasses || size == 0 || prof_on || opt.numa)
        return alloc_slow(size);
    if (unlikely(__atomic_load_n(&background_pending, __ATOMIC_RELAXED)) && !mutex_all_held_here)
        background_maybe_start();
    void *p;
    if (unlikely(opt.guard_sample != 0) && (p = maybe_guarded(size, 1)) != NULL)
        return thread_count_alloc_block(p);
    p = secure_cached_block(c, size, false);
    if (p != NULL)
        thread_count_alloc(sc_size(c) - CANARY_BYTES);
    return p;
}

/* alloc_front_miss of a thread on the CPU caches; apart, so that the
 * thread cache's fast path keeps its few registers */
static DPM_NOINLINE void *cpu_alloc_miss(size_t size)
{
    if (unlikely(g.secure_nclasses != 0))
        return secure_front_alloc(size);
    unsigned c = sc_of_size(size);
    if (c >= g.tcache_nclasses)
        return alloc_slow(size);
    if (unlikely(prof_on))
        return prof_front_alloc(c, size);
    return cpu_front_miss(c, size);
}

void *alloc_front_miss(size_t size)
{
    if (tls_thread.cpu_table != cpu_cache_table)
        return thread_alloc_fast(size);
    return cpu_alloc_miss(size);
}

void free_front_miss(void *p, uintptr_t e, const char *call)
{
    uintptr_t tag = radix_entry_tag(e);
    if (tls_thread.cpu_table != cpu_cache_table) {
        /* the thread cache's push (thread_free_fast): free_fast made its
         * checks already if the tag is not 0 */
        tc_bin_t *b = tc_bin_of_tag(tls_thread.tcache, tag);
        if (likely(!tc_bin_full(b))) {
            *tc_key_word(p) = TC_FREE_KEY;
            DPM_ANN_CLOSE_KEY(p);
            tc_bin_push(b, p);
            return;
        }
        free_slow(p, radix_entry_span(e), call);
        return;
    }
    /* a class or phased tag the CPU caches take: the checks passed in
     * free_fast */
    if (tag != 0 && cpu_takes((unsigned)tag - 1)) {
        int *err = &errno, saved = *err;   /* free keeps errno (free_slow) */
        if (unlikely(__atomic_load_n(&background_idle, __ATOMIC_RELAXED)))
            background_wake();
        *tc_key_word(p) = TC_FREE_KEY;
        DPM_ANN_CLOSE_KEY(p);
        if (tls_state == THREAD_CACHED && tcache_mine() != &tcache_empty)
            tcache_event(tcache_mine());
        cpu_cache_free_full(p, (unsigned)tag - 1);
        *err = saved;
        return;
    }
    free_slow(p, radix_entry_span(e), call);
}

void *calloc_impl(size_t n, size_t size)
{
    size_t total;
    if (unlikely(__builtin_mul_overflow(n, size, &total)))
        return fail_nomem();
    if (total <= SMALL_MAX || (unlikely(opt.secure) && total <= SC_ALIGNED_SLAB_MAX)) {   /* (secure_slab_class) */
        void *p = alloc_fast(total);
        DPM_ANN_OPEN(p, total);
        if (p != NULL)
            memset(p, 0, total);
        return p;
    }
    if (unlikely(!dpm_ready()) || unlikely(total > ALLOC_MAX))
        return fail_nomem();
    /* Large: bypass the thread cache so that clean pages skip the memset. */
    bool sample = unlikely(prof_on) && prof_tick(total);
    void *p = alloc_uncached(thread_arena(), sc_of_size(total), total, true);
    if (unlikely(sample))
        prof_record_large(p, total);
    return thread_count_alloc_block(p);
}

size_t usable_size_impl(const void *p, const char *call)
{
    if (p == NULL)
        return 0;
    if (off_map_block(p))
        return off_map_usable(p, call);
    span_t *s = span_of(p);
    /* a freed block, in its slab or a large block in a CPU's large cache,
     * in this call's words (checked_span's are a free's) */
    if (s != NULL && (s->kind == SPAN_SLAB ? span_is_block_start(s, (uintptr_t)p) &&
                                                 span_block_is_free(s, span_block_index(s, (uintptr_t)p))
                                           : s->kind == SPAN_LARGE && (uintptr_t)p == s->base &&
                                                 __atomic_load_n(&s->parked, __ATOMIC_RELAXED)))
        dpm_misuse(call, p, "use after free of");
    s = checked_span_of(p, s, call);
    /* a freed block waiting in a cache (its slab still counts it taken) */
    DPM_ANN_KEY_PEEK((void *)p);   /* a live block's key bytes may be undefined */
    check_not_cached((void *)p, s, call, "use after free of");
    DPM_ANN_KEY_UNPEEK((void *)p);
    DPM_ANN_USABLE(p);
    if (unlikely(s->prof_sampled))
        return prof_block_usable(s);
    return span_usable(s);
}

/* ---- realloc ----------------------------------------------------------- */

/* Could a request of size bytes (with any alignment and offset, through
 * any entry point) have produced the block of span s? A slab object's
 * class is the one sc_of_size_aligned gives some power-of-two alignment
 * (alignment 1..16 is the plain class); a large block knows the size it
 * was last asked for (malloc, or realloc in place), and any size from
 * there up to its usable bytes is accepted, as malloc_usable_size allows
 * the program to use them. */
bool request_could_make(const span_t *s, size_t size)
{
    if (s->kind == SPAN_LARGE)
        return size >= s->requested && size <= s->usable;
    if (size > span_usable(s))
        return false;
    unsigned c = s->bin->size_class;
    if (request_class(size) == c)
        return true;
    for (size_t align = 2 * QUANTUM; align <= PAGE || align <= sc_obj_align(c); align *= 2)
        if (request_class_aligned(size, align) == c)
            return true;
    return false;
}


/* A block of a page or more that realloc grows moves to a page run, not
 * to a slab, even below the large classes: a block on that path tends to
 * grow again, which a run can do in place. The cost is the run's page
 * rounding (a 6 KiB block in 8 KiB) for blocks that realloc grew. */
static void *grown_block(size_t size, size_t align)
{
    void *sampled;
    if (unlikely(prof_on) && (sampled = prof_counted(size, align, 0, opt.zero)) != NULL)
        return sampled;
    arena_t *a = thread_arena();
    void *p = tls_state == THREAD_CACHED ? large_cache_take_grown(a, size) : NULL;
    if (p != NULL)
        return p;
    large_request_t req = {.size = size, .align = align, .zero = opt.zero};
    p = a != NULL ? large_block(a, &req) : NULL;
    if (p == NULL)
        return fail_nomem();
    DPM_ANN_OPEN(p, size);
    if (unlikely(opt.junk) && !opt.zero)
        memset(p, JUNK_ALLOC, size);
    return p;
}

/* old_usable: p's usable bytes before realloc looked at it (a block
 * whose slack it ended has more now; their contents are not the
 * program's). Out of line: inlined, its allocation and free fast paths
 * would make every in-place resize save and restore their registers. */
static __attribute__((noinline)) void *move_block(void *p, span_t *old_span, size_t old_usable, size_t size,
                                                  size_t align, const char *call)
{
    void *q;
    /* (not in secure mode, whose malloc of such sizes may be a large
     * class's slab block: the block gets malloc's usable size) */
    if (size > old_usable && old_usable >= PAGE && size <= SMALL_MAX && align <= PAGE && !opt.secure)
        q = thread_count_alloc_block(grown_block(size, align));
    else
        q = align <= QUANTUM ? alloc_fast(size) : aligned_at_impl(size, align, 0, false);
    if (q == NULL)
        return NULL;
    DPM_ANN_ALLOC(q, size, false);
    DPM_ANN_COPY_FROM(p, old_usable);
    memcpy(q, p, old_usable < size ? old_usable : size);
    span_t *qs = span_of(q);   /* NULL for a block of guard_sample */
    if (size > old_usable && qs != NULL && qs->kind == SPAN_LARGE)
        qs->grew = 1;
    /* A large block left behind by a growing block goes home, not into
     * a large cache: it proved too small, and the next request
     * of its size would take it back from the cache, with its cramped
     * neighbours, and move again; from the page heap that request is
     * placed where its free neighbours coalesced, and grows in place. */
    DPM_ANN_FREE(p);
    if (old_span->kind == SPAN_LARGE) {
        /* the usable size the caller had (a slack that realloc_general
         * gave back to the block since is not the caller's); free_fast
         * would take free_slow for it too (tag 0) */
        thread_count_free(unlikely(old_span->prof_sampled) ? prof_block_usable(old_span) : old_usable);
        if (size > old_usable)
            free_home(p, old_span, call);
        else
            free_slow(p, old_span, call);
    } else {
        free_fast(p, call);
    }
    return q;
}

/* Realloc of block p, whose span per the page map is s (NULL: none),
 * validated here: one frame for the checks and the resize, which is most
 * of a large block's realloc. */
static DPM_NOINLINE void *realloc_general(void *p, span_t *s, size_t size, size_t align, const char *call)
{
    /* as in free_slow: a large block's resize reads both span lines */
    __builtin_prefetch((char *)s + 64);
    s = checked_span_of(p, s, call);
    if (unlikely(size > ALLOC_MAX))
        return fail_nomem();
    DPM_ANN_REALLOC_BEGIN(p);
    check_not_cached(p, s, call, "use after free of");
    if (unlikely(opt.secure))
        check_canary(p, s, call);
    size_t old = span_usable(s);
    bool aligned = ((uintptr_t)p & (align - 1)) == 0;
    /* secure mode checks sized frees against the class: a block stays in
     * place only while its class is one the new size could have */
    if (aligned && s->kind == SPAN_SLAB && size <= old && (size > old / 2 || old <= QUANTUM) &&
        (!opt.secure || request_could_make(s, size))) {
        thread_count_free(old);   /* a realloc counts both blocks, as jemalloc's */
        thread_count_alloc(old);
        return p;
    }
    /* A large block keeps its place while it is at most a quarter bigger
     * than the new size (the class rounding a fresh block would have);
     * otherwise it is resized in place to what a fresh block of the new
     * size would get — a shrink gives its tail back to the page heap, a
     * growth takes the free run after it — and only moves if that fails
     * or the new size is a small one. */
    if (aligned && s->kind == SPAN_LARGE) {
        /* what the thread's counters had for it: a sampled block's are its class's */
        size_t counted_old = counted_usable(s);
        bool keep = size <= old && old - size <= size / 4;
        /* slack (large_cache.h): a growth into pages the block has
         * (small sizes too: a block that grows moves to a page run). No
         * block has slack under opt.zero, which turns the cache off. */
        bool into_slack = !keep && (size > SMALL_MAX || size > old) && large_cache_slack_resize(s, size);
        keep |= into_slack;
        if (!keep && size > SMALL_MAX)
            keep = arena_resize_large_in_place(s, size, true);
        if (keep) {
            s->grew |= size > old;
            s->requested = size;
            s->prof_class = 0;   /* a sampled block reports its run's bytes from here */
            if (unlikely(prof_on))
                prof_resized(s, size);
            DPM_ANN_OPEN_RANGE(p, old, s->usable);
            if (!into_slack && unlikely(opt.zero) && s->usable > old)
                memset((char *)p + old, 0, s->usable - old);   /* pages it grew into */
            thread_count_free(counted_old);
            thread_count_alloc(counted_usable(s));
            return p;
        }
    }
    return move_block(p, s, old, size, align, call);
}

/* realloc of p to size bytes (not 0) at alignment align. The step of a
 * chain of growth, a live large block growing into the slack a CPU's
 * large cache keeps for it (large_cache.h), is taken before the
 * general path: it often runs with a cold cache, right after the program
 * wrote the block, and reads only the page-map entry, the span's two
 * lines and the cache's first line. Of the general path's checks only
 * two can fail there, and it makes them: p must be the block's base
 * (only a live large block has slack, but its last page maps the span
 * too), and the size must fit the block's pages, which also keeps the
 * class rounding of a size near SIZE_MAX from wrapping. No block has
 * slack under opt.zero. */
DPM_INLINE void *realloc_checked(void *p, size_t size, size_t align, const char *call)
{
    /* the page map through the thread's leaf when it covers p */
    uintptr_t a = (uintptr_t)p;
    span_t *s = likely(thread_leaf_covers(a)) ? radix_entry_span(thread_leaf_entry(a)) : span_of(p);
    if (unlikely(s == NULL) && off_map_block(p))
        return realloc_move(p, off_map_usable(p, call), aligned_at_impl(size, align, 0, false), size, call);
    if (s != NULL && s->kind == SPAN_LARGE && (uintptr_t)p == s->base && ((uintptr_t)p & (align - 1)) == 0 &&
        size > s->usable && __atomic_load_n(&s->slack_in, __ATOMIC_RELAXED) != NULL) {
        size_t old = s->usable;
        (void)old;   /* for the annotation */
        if (large_cache_slack_grow(s, size)) {
            /* only now: a growth the slack cannot serve goes on to
             * realloc_general, whose own begin would record the key
             * bytes as this one left them, defined. The annotation finds
             * the request before this one from what the block may touch,
             * which the growth did not change: the slack's pages were a
             * freed block's, marked inaccessible. */
            DPM_ANN_REALLOC_BEGIN(p);
            s->grew = 1;
            s->requested = size;
            s->prof_class = 0;   /* a sampled block reports its run's bytes from here */
            if (unlikely(prof_on))
                prof_resized(s, size);
            DPM_ANN_OPEN_RANGE(p, old, s->usable);
            thread_count_free(old);
            thread_count_alloc(s->usable);
            return p;
        }
    }
    return realloc_general(p, s, size, align, call);
}

/* realloc to 0 bytes frees p; out of line for the reason move_block is. */
static __attribute__((noinline)) void *realloc_to_zero(void *p, const char *call)
{
    DPM_ANN_FREE(p);
    free_fast(p, call);
    return NULL;
}

void *realloc_impl(void *p, size_t size, const char *call)
{
    if (p == NULL)
        return alloc_fast(size);
    if (size == 0)
        return realloc_to_zero(p, call);
    return realloc_checked(p, size, QUANTUM, call);
}

/* ---- aligned and at-offset --------------------------------------------- */

/* A block of cached class c from the calling thread's CPU cache (a
 * thread on the CPU caches), handed out; NULL without memory. */
static void *cpu_front_alloc(unsigned c, size_t size)
{
    void *p;
    /* (prof:true: aligned_at_impl counted it; the real table, not the
     * all-locked one malloc's pops use then) */
    if (cpu_cache_pop(prof_on && !opt.numa ? cpu_cache_table : tls_thread.pop_table, c * sizeof(cpu_bin_t), &p))
        return cpu_handout(p);
    return cpu_class_miss(c, size);
}

static void *aligned_small(unsigned c, size_t size, bool zero)
{
    if (c < g.secure_nclasses && secure_thread_cached())
        return secure_cached_block(c, size, zero);
    if (c < g.tcache_nclasses && tls_thread.cpu_table == cpu_cache_table) {
        void *q = cpu_front_alloc(c, size);
        if (q == NULL)
            return NULL;
        DPM_ANN_OPEN(q, size);
        if (zero)
            memset(q, 0, size);
        return q;
    }
    tcache_t *tc = tcache_mine();
    tc_bin_t *b = &tc->bins[c];
    void *p = c < TC_MAX_CLASSES ? tc_bin_pop(tc, c) : NULL;
    if (p == NULL && tls_state == THREAD_NEW && thread_cache_make())
        return aligned_small(c, size, zero);
    if (p == NULL && c < TC_MAX_CLASSES && b->ncached_max != 0) {
        tcache_event(tc);
        p = tcache_alloc_miss(tc, c);
        if (p == NULL)
            return fail_nomem();
    }
    if (p == NULL)
        return alloc_uncached(thread_arena(), c, size, zero || opt.zero);
    counter_add(&b->nrequests, 1);
    DPM_ANN_OPEN(p, size);
    if (zero)
        memset(p, 0, size);
    return p;
}

/* A block of the thread's arena's phased bin (class c, phase): on the
 * CPU caches, from the CPU's bin of the pair's tag, as malloc's fast path
 * does (a free pushes it there through free_fast), with no arena or bin
 * looked up unless that bin is empty; on a thread cache, through the
 * thread's stash; else (an untagged bin, no cache) from the bin itself.
 * NULL without memory. */
static void *phased_small(unsigned c, size_t size, uint32_t phase, bool zero)
{
    void *p = NULL;
    unsigned k = arena_phased_tag_find(c, phase);
    if (likely(k != TC_NONE) && tls_thread.cpu_table == cpu_cache_table &&
        cpu_cache_pop(cpu_cache_table, k * sizeof(cpu_bin_t), &p)) {
        p = cpu_handout(p);
        goto got;
    }
    if (tls_state == THREAD_NEW)
        (void)thread_cache_make();
    arena_t *a = thread_arena();
    bin_t *bin = a != NULL ? arena_special_bin(a, c, phase, false) : NULL;
    if (bin == NULL)
        return NULL;
    tcache_t *tc;
    if (tls_thread.cpu_table == cpu_cache_table && bin->tcache_class != TC_NONE) {
        p = cpu_cache_phased_miss(bin);
    } else if (tls_thread.cpu_table != cpu_cache_table && tls_state == THREAD_CACHED &&
               (tc = tcache_make_own()) != NULL) {
        /* a stash is the thread's own: made with its cache at its first use */
        p = tcache_phased_alloc(tc, bin);
    } else if (arena_bin_fill(bin, &p, 1, NULL) == 0) {
        p = NULL;
    } else if (bin->tcache_class != TC_NONE) {
        tc_block_handed_out(p);   /* a CPU cache may have sent it home with the free key */
    }
    if (p == NULL)
        return NULL;
got:
    DPM_ANN_OPEN(p, zero_bytes(c, size));
    if (zero || opt.zero)
        memset(p, 0, zero_bytes(c, size));
    return p;
}

/* What an aligned-at-offset request's shape (its size's plain class, the
 * alignment, the offset) comes to in phased tags: a request whose shape
 * is here pops its tag's CPU bin without working out the class, the
 * phase or the tag. A shape determines the class and phase, and a pair's
 * tag never changes, so an entry is valid once written; one 64-bit word
 * (shape << 8 | tag) is stored and loaded whole, so a racing writer of
 * another shape at the same slot leaves one or the other. */
#define SHAPE_MEMO 256
static uint64_t shape_memo[SHAPE_MEMO];

DPM_INLINE uint64_t shape_of(unsigned plain, size_t align, size_t off)
{
    return (uint64_t)plain << 40 | (uint64_t)align << 16 | off;   /* align <= PAGE, off < align */
}
DPM_INLINE uint64_t *shape_slot(uint64_t shape)
{
    return &shape_memo[(shape * 0x9e3779b97f4a7c15ull) >> 56];
}
_Static_assert(SHAPE_MEMO == 256 && PAGE < (1u << 24), "shape_slot takes the hash's top 8 bits; shapes fit 56 bits");

/* aligned_at_impl's body; *counted: the block was counted (alloc_fast's
 * or calloc's) */
static void *aligned_at_raw(size_t size, size_t align, size_t offset, bool zero, bool *counted)
{
    size_t off = offset & (align - 1);
    if (off != 0 && align <= PAGE && size <= SMALL_MAX && tls_thread.cpu_table == cpu_cache_table) {
        /* a phased block from the CPU's bin of a shape seen before */
        uint64_t shape = shape_of(sc_of_size(size), align, off);
        uint64_t e = __atomic_load_n(shape_slot(shape), __ATOMIC_RELAXED);
        void *p;
        if (likely(e >> 8 == shape) && likely(cpu_cache_pop(cpu_cache_table, (e & 0xff) * sizeof(cpu_bin_t), &p))) {
            p = cpu_handout(p);
            DPM_ANN_OPEN(p, size);
            if (zero)
                memset(p, 0, size);
            return p;
        }
    }
    if (unlikely(!dpm_ready()) || unlikely(size > ALLOC_MAX))
        return fail_nomem();
    void *z;
    if (unlikely(size == 0) && off == 0 && (z = zero_size_block(align)) != NULL)
        return z;
    if (align <= QUANTUM && off == 0) {
        *counted = true;
        return zero ? calloc_impl(1, size) : alloc_fast(size);
    }
    if (unlikely(prof_on) && (z = prof_counted(size, align, off, zero)) != NULL)
        return z;
    if (align <= PAGE) {
        /* the plain class when its size is a multiple of align (every
         * large class is): sc_of_size_aligned starts from it and would
         * stop there */
        unsigned plain = request_class(size);
        unsigned c = (sc_size(plain) & (align - 1)) == 0 ? plain : request_class_aligned(size, align);
        /* cached large classes are page aligned, so they serve too */
        if ((c < NSMALL || c < g.tcache_nclasses) && off == 0)
            return aligned_small(c, size, zero);
        /* (objects of these slabs are page aligned) */
        if (secure_slab_class(c) && off == 0)
            return secure_slab_block(c, size, zero);
        if (c < NSMALL) {
            uint32_t phase = (uint32_t)((align - off) & (align - 1));
            void *p = phased_small(c, size, phase, zero);
            /* the shape for the next request (only mode cpu reads it) */
            /* (not under prof:true: the memo's pops would go uncounted) */
            unsigned k = tls_thread.cpu_table == cpu_cache_table && !prof_on ? arena_phased_tag_find(c, phase) : TC_NONE;
            if (k != TC_NONE)
                __atomic_store_n(shape_slot(shape_of(plain, align, off)), shape_of(plain, align, off) << 8 | k,
                                 __ATOMIC_RELAXED);
            if (p != NULL)
                return p;
        }
        if (off == 0 && !zero && tls_state == THREAD_CACHED) {
            void *p = large_cache_take(thread_arena(), size, plain);
            if (p != NULL)
                return p;
        }
    } else if (off == 0 && align <= SC_ALIGNED_SLAB_MAX && size <= SC_ALIGNED_SLAB_MAX) {
        /* slabs of such a class start at a multiple of its alignment
         * (sc_slab_align): aligned_alloc(8192, 8192) is a slab object */
        unsigned c = aligned_slab_class(size, align);
        if (c < NSMALL)
            return aligned_small(c, size, zero);
        if (c < NCLASSES) {   /* its special bin (sizeclass.h), through the thread's stash */
            void *p = phased_small(c, size, 0, zero);
            if (p != NULL)
                return p;
        }
    }
    arena_t *a = thread_arena();
    if (a == NULL)
        return fail_nomem();
    large_request_t req = {.size = size, .align = align, .offset = off, .zero = zero || opt.zero};
    void *p = large_block(a, &req);
    return p != NULL ? p : fail_nomem();
}

void *aligned_at_impl(size_t size, size_t align, size_t offset, bool zero)
{
    bool counted = false;
    void *p = aligned_at_raw(size, align, offset, zero, &counted);
    return counted ? p : thread_count_alloc_block(p);
}

static bool bad_alignment(size_t align)
{
    if (is_pow2(align) && align <= DPM_MAX_ALIGN)
        return false;
    errno = EINVAL;
    return true;
}

/* ---- typed and per-arena allocation ------------------------------------ */

/* A small block of class c of arena a for a typed allocation: through
 * the CPU's stash of typed blocks for an automatic arena, else from the
 * typed bin. */
static bool typed_block(arena_t *a, unsigned c, void **p)
{
    if (typed_cache_takes(a))
        return (*p = typed_cache_take(a, c)) != NULL;
    bin_t *bin = arena_special_bin(a, c, 0, true);
    return bin != NULL && bin_block(bin, p);
}

/* A block of arena a from its typed bins (typed: type != 0; small ones
 * through the stashes of typed blocks) or plain bins, never through a
 * thread or CPU cache. align is a power of two. */
static void *arena_block_raw(arena_t *a, size_t size, size_t align, bool zero, bool typed, uint16_t type)
{
    size_t bytes = size == 0 ? 1 : size;
    if (align <= SMALL_MAX) {   /* beyond a page: classes whose slabs are aligned (sc_slab_align) */
        unsigned c = align <= QUANTUM ? request_class(bytes) : request_class_aligned(bytes, align);
        void *p;
        memlimit_failed_here = false;
        if (c < NSMALL && (typed ? typed_block(a, c, &p) : bin_block(&a->bins[c], &p))) {
            span_t *s = span_of(p);
            if (s->type_ids != NULL) {
                /* live from here: a typed block's free takes its tag (typed_cache.h) */
                __atomic_store_n(&s->type_ids[span_index_of(s, (uintptr_t)p)], type, __ATOMIC_RELAXED);
                type_count_alloc(type, s->objsize);
            }
            DPM_ANN_OPEN(p, zero_bytes(c, size));
            if (zero || opt.zero)
                memset(p, 0, zero_bytes(c, size));
            DPM_ANN_ALLOC(p, size, zero);
            return p;
        }
        /* refused at the memory limit even after its reclaim (counted
         * there): a large block, more pages, would be refused again and
         * counted twice */
        if (memlimit_failed_here)
            return fail_nomem();
    }
    large_request_t req = {.size = size, .align = align, .zero = zero || opt.zero, .type_id = type};
    void *p = large_block(a, &req);
    DPM_ANN_ALLOC(p, size, zero);
    return p != NULL ? p : fail_nomem();
}

static void *arena_block(arena_t *a, size_t size, size_t align, bool zero, bool typed, uint16_t type)
{
    return thread_count_alloc_block(arena_block_raw(a, size, align, zero, typed, type));
}

/* The checks of the rte_malloc-shaped calls that name an arena, a type
 * or a node (align 0 = default): false with errno set if the call must
 * fail. They bypass alloc_slow, so they also start a requested background
 * thread: a program that only allocates this way still gets its decay. */
static bool arena_call_ok(size_t size, size_t *align)
{
    if (*align == 0)
        *align = QUANTUM;
    if (bad_alignment(*align))
        return false;
    if (unlikely(!dpm_ready()) || unlikely(size > ALLOC_MAX)) {
        errno = ENOMEM;
        return false;
    }
    if (unlikely(__atomic_load_n(&background_pending, __ATOMIC_RELAXED)) && !mutex_all_held_here)
        background_maybe_start();
    return true;
}

/* arena_block for the typed calls and the rte_* heaps: under prof:true
 * counted where the arena's blocks are sampled, the sampled one a page
 * run of its own with its type tag. */
static void *arena_block_counted(arena_t *a, size_t size, size_t align, bool zero, uint16_t type)
{
    void *p;
    if (unlikely(prof_on) && prof_samples_arena(a) && prof_tick(size) &&
        (p = prof_sampled_typed(a, size, align, 0, zero, type, true)) != NULL)
        return thread_count_alloc_block(p);   /* its free subtracts it, as arena_block's */
    return arena_block(a, size, align, zero, type != 0, type);
}

static void *typed_alloc(const char *type, size_t size, size_t align, bool zero)
{
    if (!arena_call_ok(size, &align))
        return NULL;
    arena_t *a = thread_arena();
    if (a == NULL)
        return fail_nomem();
    uint16_t id = type_id_of(type);   /* 0 (no name, or the table full): an untyped block */
    return arena_block_counted(a, size, align, zero, id);
}

/* Like arena_block, hands out an annotated block (DPM_ANN_ALLOC): its
 * callers are the rte_malloc entry points. */
static void *annotated_aligned(size_t size, size_t align, bool zero)
{
    void *p = aligned_at_impl(size, align, 0, zero);
    DPM_ANN_ALLOC(p, size, zero);
    return p;
}

void *heap_alloc_impl(arena_t *a, uint16_t type, size_t size, size_t align, bool zero)
{
    if (unlikely(!dpm_ready()) || unlikely(size > ALLOC_MAX))
        return fail_nomem();
    if (a == NULL && type == 0)
        return annotated_aligned(size, align, zero);
    arena_t *mine = thread_arena();
    if (a == NULL)
        a = mine;
    if (a == NULL)
        return fail_nomem();
    if (type == 0 && a == mine)
        return annotated_aligned(size, align, zero);
    return arena_block_counted(a, size, align, zero, type);
}

/* ---- public dpm_ API --------------------------------------------------- */

DPM_EXPORT void *dpm_malloc(size_t size)
{
    void *p = alloc_fast(size);
    DPM_ANN_ALLOC(p, size, false);
    return p;
}

DPM_EXPORT void dpm_free(void *p)
{
    DPM_ANN_FREE(p);
    free_fast(p, "free");
}

/* The promise of a sized free. By default, what costs nothing more than
 * the span free already reads: a slab block's promise is at most its
 * bytes, a large block's between the size it was last asked for and its
 * usable bytes; secure mode asks whether any request could have made
 * the block (request_could_make). */
static bool promise_holds(const span_t *s, size_t size)
{
    if (unlikely(opt.secure))
        return request_could_make(s, size);
    if (s->kind == SPAN_LARGE)   /* (a sampled block: what it reports, prof.h) */
        return size >= s->requested && size <= (unlikely(s->prof_sampled) ? counted_usable(s) : s->usable);
    return size <= s->objsize;
}

void free_sized_miss(void *p, size_t size, const char *call)
{
    if (p == NULL)
        return;
    if (off_map_block(p)) {
        off_map_free(p, size, call);
        return;
    }
    int *err = &errno, saved = *err;   /* as in free_slow */
    span_t *s = checked_span(p, call);
    check_not_cached(p, s, call, "double free of");
    if (!promise_holds(s, size))
        dpm_misuse(call, p, "size does not match the block at");
    *err = saved;
    if (!thread_leaf_covers((uintptr_t)p))
        free_leaf_miss(p, call);   /* caches the leaf for the next frees */
    else
        free_slow_counted(p, s, call);
}

void free_sized_impl(void *p, size_t size, const char *call)
{
    DPM_ANN_FREE(p);
    if (unlikely(opt.secure))   /* the whole check, whatever path the block would take */
        free_sized_miss(p, size, call);
    else
        free_fast_promised(p, true, size, call);
}

DPM_EXPORT void dpm_free_sized(void *p, size_t size) { free_sized_impl(p, size, "free_sized"); }
DPM_EXPORT void *dpm_calloc(size_t n, size_t size)
{
    void *p = calloc_impl(n, size);
    DPM_ANN_ALLOC(p, n * size, true);
    return p;
}

DPM_EXPORT void *dpm_realloc(void *p, size_t size)
{
    void *q = realloc_impl(p, size, "realloc");
    DPM_ANN_REALLOC_DONE(p, q, size);
    return q;
}

DPM_EXPORT size_t dpm_usable_size(const void *p) { return usable_size_impl(p, "dpm_usable_size"); }

/* What malloc(size) hands out: the class size for slab classes and large
 * classes up to LARGE_ROUND_MAX, whole pages above (arena_large_usable);
 * every cache and the large-block cut give exactly that. */
DPM_EXPORT size_t dpm_good_size(size_t size)
{
    if (unlikely(!dpm_ready()) || unlikely(size > ALLOC_MAX))
        return 0;
    if (size == 0 && unlikely(opt.secure) && zero_blocks_available())
        return 0;   /* a zero-size block has no usable byte */
    if (size <= SC_ALIGNED_SLAB_MAX && (request_class(size) < NSMALL || secure_slab_class(request_class(size))))
        return sc_size(request_class(size)) - canary_bytes();
    return arena_large_usable(size, 0);
}

/* What aligned_at_impl(size, align, 0, ...) hands out, by its own
 * choice of class (nallocx; size > 0, align a power of two up to
 * DPM_MAX_ALIGN); 0 if it cannot be allocated. A block of guard_sample
 * has exactly its requested bytes instead. */
size_t aligned_usable_impl(size_t size, size_t align)
{
    if (unlikely(!dpm_ready()) || unlikely(size > ALLOC_MAX))
        return 0;
    if (align <= QUANTUM)
        return dpm_good_size(size);
    if (align <= PAGE) {
        unsigned plain = request_class(size);
        unsigned c = (sc_size(plain) & (align - 1)) == 0 ? plain : request_class_aligned(size, align);
        if (c < NSMALL || secure_slab_class(c))
            return sc_size(c) - canary_bytes();
        if (c < g.tcache_nclasses)   /* a cached large class */
            return sc_size(c);
    } else if (align <= SC_ALIGNED_SLAB_MAX && size <= SC_ALIGNED_SLAB_MAX) {
        unsigned c = aligned_slab_class(size, align);
        if (c < NCLASSES)   /* a slab (a special bin's too), canary included */
            return sc_size(c) - canary_bytes();
    }
    return arena_large_usable(size, 0);
}

/* What arena_block(a, size, align, ...) hands out (dpm_malloc_arena,
 * and mallocx with MALLOCX_ARENA or MALLOCX_TCACHE_NONE): its own choice
 * of class, past every cache, so no cached large class and no aligned
 * slab beyond SMALL_MAX as aligned_at_impl has (nallocx; size > 0, align
 * a power of two up to DPM_MAX_ALIGN, 0 taken as QUANTUM); 0 if it
 * cannot be allocated. */
size_t arena_usable_impl(size_t size, size_t align)
{
    if (unlikely(!dpm_ready()) || unlikely(size > ALLOC_MAX))
        return 0;
    if (align <= SMALL_MAX) {
        unsigned c = align <= QUANTUM ? request_class(size) : request_class_aligned(size, align);
        if (c < NSMALL)
            return sc_size(c) - canary_bytes();
    }
    return arena_large_usable(size, 0);
}

/* resize_in_place_impl's body, for p of span s (checked): the usable
 * bytes afterwards. */
static size_t resize_span_in_place(void *p, span_t *s, size_t size, size_t extra)
{
    /* a sampled block: the usable bytes sallocx reports (its class's)
     * until a resize makes it its run's */
    size_t old = counted_usable(s);
    /* a sampled block with a slab class's bytes keeps them, as the slab
     * block it stands for would */
    if (s->kind != SPAN_LARGE || (s->prof_sampled && s->prof_class != 0) || (uintptr_t)p != s->base ||
        size > ALLOC_MAX)
        return old;
    size_t most = extra > ALLOC_MAX - size ? ALLOC_MAX : size + extra;
    if (old >= size && old <= most)
        return old;
    size_t run_old = span_usable(s);
    /* the slack a large cache keeps for a growing block serves first (or
     * goes back to the block), as in realloc; then the largest the caller
     * takes, then the least it needs */
    bool done = large_cache_slack_resize(s, most) && s->usable >= size;
    if (!done && most > SMALL_MAX)
        done = arena_resize_large_in_place(s, most, true);
    if (!done && size > SMALL_MAX && run_old < size)
        done = arena_resize_large_in_place(s, size, true);
    if (done) {
        s->grew |= s->usable > run_old;
        s->requested = size;   /* a sized free may name any size from here up to usable */
        s->prof_class = 0;
    }
    DPM_ANN_OPEN_RANGE(p, run_old, s->usable);
    if (unlikely(opt.zero) && s->usable > run_old)
        memset((char *)p + run_old, 0, s->usable - run_old);
    size_t now = counted_usable(s);
    if (now != old) {   /* a resize counts both sizes, as jemalloc's xallocx */
        thread_count_free(old);
        thread_count_alloc(now);
    }
    return now;
}

/* xallocx: p resized in place only, to at least size and at most
 * size + extra bytes where the block allows; returns its usable bytes
 * afterwards. A slab block keeps its class; a large block is resized
 * as realloc resizes it in place. */
size_t resize_in_place_impl(void *p, size_t size, size_t extra, const char *call)
{
    if (off_map_block(p))
        return off_map_usable(p, call);
    span_t *s = checked_span(p, call);
    check_not_cached(p, s, call, "use after free of");
    size_t now = resize_span_in_place(p, s, size, extra);
    /* answered at least size, resized or not: a sized free may name size
     * from now on, with every size it could name before (review r38:
     * xallocx(p, 10000, 4000) of a 12000-byte block said 12288, then
     * sdallocx(p, 10000) aborted) */
    if (now >= size && s->kind == SPAN_LARGE && size < s->requested)
        s->requested = size;
    return now;
}

/* realloc at an alignment, naming call (rallocx). */
void *realloc_aligned_impl(void *p, size_t size, size_t align, const char *call)
{
    if (p == NULL)
        return aligned_at_impl(size, align, 0, false);
    if (size == 0)
        return realloc_to_zero(p, call);
    return realloc_checked(p, size, align, call);
}

DPM_EXPORT void *dpm_malloc_aligned(size_t size, size_t align)
{
    void *p = bad_alignment(align) ? NULL : aligned_at_impl(size, align, 0, false);
    DPM_ANN_ALLOC(p, size, false);
    return p;
}

DPM_EXPORT void *dpm_malloc_aligned_at(size_t size, size_t align, size_t offset)
{
    void *p = bad_alignment(align) ? NULL : aligned_at_impl(size, align, offset, false);
    DPM_ANN_ALLOC(p, size, false);
    return p;
}

DPM_EXPORT void *dpm_zalloc_aligned(size_t size, size_t align)
{
    void *p = bad_alignment(align) ? NULL : aligned_at_impl(size, align, 0, true);
    DPM_ANN_ALLOC(p, size, true);
    return p;
}

DPM_EXPORT void *dpm_realloc_aligned(void *p, size_t size, size_t align)
{
    if (bad_alignment(align))
        return NULL;
    if (p == NULL) {
        void *q = aligned_at_impl(size, align, 0, false);
        DPM_ANN_ALLOC(q, size, false);
        return q;
    }
    if (size == 0)
        return realloc_to_zero(p, "dpm_realloc_aligned");
    void *q = realloc_checked(p, size, align, "dpm_realloc_aligned");
    DPM_ANN_REALLOC_DONE(p, q, size);
    return q;
}

DPM_EXPORT void *dpm_malloc_typed(const char *type, size_t size, size_t align)
{
    return typed_alloc(type, size, align, false);
}

DPM_EXPORT void *dpm_zmalloc_typed(const char *type, size_t size, size_t align)
{
    return typed_alloc(type, size, align, true);
}

DPM_EXPORT void *dpm_calloc_typed(const char *type, size_t n, size_t size, size_t align)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total))
        return fail_nomem();
    return typed_alloc(type, total, align, true);
}

/* The bytes a realloc that moves p copies out of it: its usable size,
 * 0 for a zero-size block of secure mode; aborts naming call if p is no
 * live block. */
static size_t moving_usable(void *p, const char *call)
{
    if (off_map_block(p))
        return off_map_usable(p, call);
    return span_usable(checked_span(p, call));
}

void *realloc_move(void *p, size_t old, void *q, size_t size, const char *call)
{
    if (q == NULL)
        return NULL;
    DPM_ANN_COPY_FROM(p, old);
    memcpy(q, p, old < size ? old : size);
    DPM_ANN_FREE(p);
    free_fast(p, call);
    return q;
}

DPM_EXPORT void *dpm_realloc_typed(const char *type, void *p, size_t size, size_t align)
{
    if (p == NULL)
        return typed_alloc(type, size, align, false);
    if (size == 0) {
        DPM_ANN_FREE(p);
        free_fast(p, "dpm_realloc_typed");
        return NULL;
    }
    size_t old = moving_usable(p, "dpm_realloc_typed");
    return realloc_move(p, old, typed_alloc(type, size, align, false), size, "dpm_realloc_typed");
}

DPM_EXPORT void *dpm_malloc_arena(unsigned arena, size_t size, size_t align)
{
    if (!arena_call_ok(size, &align))
        return NULL;
    arena_t *a = arena_get(arena);
    if (a == NULL) {
        errno = EINVAL;
        return NULL;
    }
    return arena_block_counted(a, size, align, false, 0);
}

DPM_EXPORT int dpm_arena_create_sourced(const char *name, const dpm_page_source_t *src, unsigned *arena)
{
    if (src == NULL || src->alloc == NULL || arena == NULL)
        return EINVAL;
    if (!dpm_ready())
        return ENOMEM;
    page_source_t ps = {.alloc = src->alloc, .free = src->free, .purge = src->purge, .ctx = src->ctx};
    return arena_create_manual(name, &ps, -1, arena);
}

/* ---- NUMA socket heaps and reserves -------------------------------------- */

/* The arena of socket (DPM_SOCKET_ID_ANY: the caller's node), or NULL with
 * errno = EINVAL (no such node online) or ENOMEM. */
static arena_t *socket_arena(int socket)
{
    if (socket < DPM_SOCKET_ID_ANY) {
        errno = EINVAL;
        return NULL;
    }
    unsigned node = socket == DPM_SOCKET_ID_ANY ? numa_current_node() : (unsigned)socket;
    arena_t *a = numa_node_online(node) ? numa_node_arena(node) : NULL;
    if (a == NULL)
        errno = numa_node_online(node) ? ENOMEM : EINVAL;
    return a;
}

/* A small block of the node's bin of the calling thread's CPU cache, as
 * the pop of socket_alloc gives it. */
static void *socket_handout(void *slot, size_t size, bool zero)
{
    void *p = thread_count_alloc_block(cpu_handout(slot));
    DPM_ANN_OPEN(p, size);
    if (zero)
        memset(p, 0, size);
    DPM_ANN_ALLOC(p, size, zero);
    return p;
}

/* socket_alloc past the pop: every check, and the miss. A thread on the
 * CPU caches takes a small block of a node with tags (span.h) from the
 * node's bin of the cache of the CPU it runs on, which has slots only if
 * that CPU is on the node; from another node's CPU the miss path serves
 * it from the node's transfer cache or arena. Either way the block is
 * the node's. */
static DPM_NOINLINE void *socket_alloc_slow(size_t size, size_t align, int socket, bool zero)
{
    if (!arena_call_ok(size, &align))
        return NULL;
    arena_t *a = socket_arena(socket);
    if (a == NULL)
        return NULL;
    if (tls_state == THREAD_NEW)
        (void)thread_cache_make();
    bool on_cpu_caches = tls_thread.cpu_table == cpu_cache_table;
    unsigned node = (unsigned)a->node;
    if (on_cpu_caches && node < TC_NODE_GROUPS && align <= SMALL_MAX) {
        size_t bytes = size == 0 ? 1 : size;
        /* arena_block's class: its slabs serve the alignment */
        unsigned c = align <= QUANTUM ? request_class(bytes) : request_class_aligned(bytes, align);
        if (c < g.tcache_nclasses) {
            void *slot;
            if (cpu_cache_pop(cpu_cache_node_tables[node], c * sizeof(cpu_bin_t), &slot))
                return socket_handout(slot, size, zero);
            void *p = thread_count_alloc_block(cpu_cache_alloc_miss(a, tc_node_class(node, c)));
            if (p == NULL)
                return fail_nomem();
            DPM_ANN_OPEN(p, size);
            if (zero)
                memset(p, 0, size);
            DPM_ANN_ALLOC(p, size, zero);
            return p;
        }
    }
    /* a thread on its own cache, bound to the node's arena, takes the
     * block there; on the CPU caches a thread's arena says nothing of
     * the node of the CPU it runs on now */
    if (!on_cpu_caches && tls_arena == a)
        return annotated_aligned(size, align, zero);
    return arena_block_counted(a, size, align, zero, 0);
}

/* An annotated block (DPM_ANN_ALLOC), as arena_block's. The pop first: a
 * node's table has an unlocked entry only for a CPU of that node, which
 * is online and has its arena, so a pop that succeeds needs none of the
 * checks (a size past the small classes, a node without tags or not
 * online, an alignment above the quantum or not a power of two all take
 * socket_alloc_slow). */
static void *socket_alloc(size_t size, size_t align, int socket, bool zero)
{
    size_t off;
    void *slot;
    /* align 0 (the default) or a power of two up to the quantum */
    if (likely(tls_thread.cpu_table == cpu_cache_table) && align <= QUANTUM && (align & (align - 1)) == 0 &&
        small_bin_offset(size, &off)) {
        unsigned node = socket == DPM_SOCKET_ID_ANY ? numa_cpu_node(rseq_cpu_now()) : (unsigned)socket;
        if (node < TC_NODE_GROUPS && cpu_cache_pop(cpu_cache_node_tables[node], off, &slot))
            return socket_handout(slot, size, zero);
    }
    return socket_alloc_slow(size, align, socket, zero);
}

DPM_EXPORT void *dpm_malloc_socket(size_t size, size_t align, int socket)
{
    return socket_alloc(size, align, socket, false);
}

DPM_EXPORT void *dpm_zmalloc_socket(size_t size, size_t align, int socket)
{
    return socket_alloc(size, align, socket, true);
}

DPM_EXPORT void *dpm_calloc_socket(size_t n, size_t size, size_t align, int socket)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total))
        return fail_nomem();
    return socket_alloc(total, align, socket, true);
}

DPM_EXPORT void *dpm_realloc_socket(void *p, size_t size, size_t align, int socket)
{
    if (p == NULL)
        return socket_alloc(size, align, socket, false);
    if (size == 0) {
        DPM_ANN_FREE(p);
        free_fast(p, "dpm_realloc_socket");
        return NULL;
    }
    if (off_map_block(p))
        return realloc_move(p, moving_usable(p, "dpm_realloc_socket"), socket_alloc(size, align, socket, false),
                            size, "dpm_realloc_socket");
    span_t *s = checked_span(p, "dpm_realloc_socket");
    DPM_ANN_KEY_PEEK(p);   /* a live block's key bytes may be undefined */
    check_not_cached(p, s, "dpm_realloc_socket", "use after free of");
    DPM_ANN_KEY_UNPEEK(p);
    arena_t *a = socket_arena(socket);
    if (a == NULL)
        return NULL;
    size_t old = span_usable(s);
    size_t al = align == 0 ? QUANTUM : align;
    if (s->arena == a && old >= size && (al & (al - 1)) == 0 && ((uintptr_t)p & (al - 1)) == 0 &&
        (!opt.secure || request_could_make(s, size))) {
        if (s->kind == SPAN_LARGE) {
            s->requested = size;   /* what a sized free of it promises now */
            s->prof_class = 0;     /* a sampled block: its run's bytes from here */
        }
        DPM_ANN_REALLOC_BEGIN(p);   /* records the old size, for the resize */
        DPM_ANN_REALLOC_DONE(p, p, size);
        return p;
    }
    return realloc_move(p, old, socket_alloc(size, align, socket, false), size, "dpm_realloc_socket");
}

DPM_EXPORT int dpm_reserve(size_t bytes, int socket, unsigned flags)
{
    if (!dpm_ready())
        return ENOMEM;
    if (bytes == 0 || (flags & ~(DPM_RESERVE_NO_HUGEPAGES | DPM_RESERVE_MLOCK)) != 0)
        return EINVAL;
    arena_t *a;
    if (socket == DPM_SOCKET_ID_ANY) {
        a = thread_arena();
        if (a == NULL)
            return ENOMEM;
    } else if ((a = socket_arena(socket)) == NULL) {
        return errno;
    }
    int err = numa_reserve(a, bytes, a->node, flags);
    if (err == 0) {
        tcache_prefault();
        cpu_cache_prefault();
        large_caches_prefault();
    }
    return err;
}
