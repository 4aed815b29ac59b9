/*
 * stats.c - snapshot and report (see stats.h).
 */
#include "stats.h"
#include "prof.h"
#include "numa.h"
#include "conf.h"
#include "emitter.h"
#include "memlimit.h"
#include "global.h"
#include "os.h"
#include "types.h"
#include "cpu_cache.h"
#include "large_cache.h"
#include "transfer.h"
#include "typed_cache.h"
#include "guarded.h"

#include <dpmalloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static stats_snap_t snap;
static unsigned snap_capacity;
static bool snap_taken;
static dpm_mutex_t stats_mutex = DPM_MUTEX_INITIALIZER;

void stats_lock(void) { mutex_lock(&stats_mutex); }
void stats_unlock(void) { mutex_unlock(&stats_mutex); }
void stats_prefork(void) { mutex_lock(&stats_mutex); }
void stats_postfork_parent(void) { mutex_unlock(&stats_mutex); }
void stats_postfork_child(void) { mutex_init(&stats_mutex); }

/* ---- gathering --------------------------------------------------------- */

static void snap_bin(bin_snap_t *o, bin_t *b)
{
    mutex_lock(&b->lock);
    o->size_class = b->size_class;
    o->objsize = b->objsize;
    o->phase = b->phase;
    o->typed = b->typed;
    o->slab_pages = b->slab_pages;
    o->slab_objs = b->slab_objs;
    o->nmalloc = b->stats.nmalloc;
    o->nfree = b->stats.nfree;
    o->nfills = b->stats.nfills;
    o->nflushes = b->stats.nflushes;
    o->nslabs = b->stats.nslabs_made;
    o->curslabs = b->stats.curslabs;
    o->curobjs = (size_t)(b->stats.nmalloc - b->stats.nfree);
    mutex_unlock(&b->lock);
    mutex_stats_add(&b->lock, &o->lock);
}

static void snap_runs(run_list_snap_t *o, const run_index_t *ix)
{
    o->nruns = ix->nruns;
    o->npages = ix->npages;
    o->longest_list = 0;
    for (unsigned fl = 0; fl < RUNS_NFL; fl++)
        for (unsigned sl = 0; sl < RUNS_NSL; sl++) {
            size_t n = 0;
            list_for_each(const span_t, r, &ix->heads[fl][sl], link)
                n++;
            if (n > o->longest_list)
                o->longest_list = n;
        }
}

static void snap_page_heap(arena_snap_t *o, arena_t *a)
{
    const page_heap_t *ph = &a->ph;
    o->mapped = ph->mapped_bytes;
    o->reserved = ph->reserved_bytes;
    o->node = a->node;
    o->nsegments = ph->nsegments;
    o->active_pages = ph->active_pages;
    /* retained runs and runs being purged are (maybe) resident: dirty */
    o->dirty_pages = ph->free_runs[RUN_DIRTY].npages + ph->free_runs[RUN_RETAINED].npages + ph->busy_pages;
    o->muzzy_pages = ph->free_runs[RUN_MUZZY].npages;
    o->clean_pages = ph->free_runs[RUN_CLEAN].npages;
    o->npurge_passes = ph->npurge_passes;
    o->npurged_lazy = ph->npurged_lazy;
    o->npurged_now = ph->npurged_now;
    o->nsearches = ph->nsearches;
    o->nsearch_hits = ph->nsearch_hits;
    o->ncandidates = ph->ncandidates;
    for (int st = 0; st < RUN_NSTATES; st++)
        snap_runs(&o->runs[st], &ph->free_runs[st]);
}

static void add_tc_totals(arena_snap_t *o, unsigned c, uint64_t req, uint64_t miss, uint64_t fills,
                          uint64_t flushes)
{
    if (c < NSMALL) {
        o->bins[c].nrequests += req;
        o->bins[c].tc_misses += miss;
        o->bins[c].tc_fills += fills;
        o->bins[c].tc_flushes += flushes;
    }
}

static void snap_arena_locked(arena_snap_t *o, arena_t *a)
{
    snap_page_heap(o, a);
    o->dirty_decay_ms = a->dirty_decay_ms;
    o->muzzy_decay_ms = a->muzzy_decay_ms;
    for (unsigned c = 0; c < NLARGE_STATS; c++) {
        o->large[c].nmalloc = a->large[c].nmalloc;
        o->large[c].nfree = a->large[c].nfree;
        o->large[c].live_bytes = a->large[c].live_bytes;
        o->large_allocated += a->large[c].live_bytes;
        o->nmalloc_large += a->large[c].nmalloc;
        o->nfree_large += a->large[c].nfree;
    }
}

static void add_samples(arena_snap_t *o, const slow_samples_t *s)
{
    o->samples.alloc_n += s->alloc_n;
    o->samples.alloc_cycles += s->alloc_cycles;
    o->samples.free_n += s->free_n;
    o->samples.free_cycles += s->free_cycles;
}

/* Counters of exited threads' caches, for the life of the arena snapped. */
static void add_exited(unsigned index, const tc_exited_t *e, void *arg)
{
    (void)arg;
    if (index >= snap.narenas || !snap.arenas[index].exists || snap.arenas[index].incarnation != e->incarnation)
        return;
    arena_snap_t *o = &snap.arenas[index];
    for (unsigned c = 0; c < TC_MAX_CLASSES; c++) {
        const tc_totals_t *t = &e->totals[c];
        add_tc_totals(o, c, t->nrequests, t->nmisses, t->nfills, t->nflushes);
    }
    add_samples(o, &e->samples);
}

static void add_bin_totals(arena_snap_t *o, const bin_snap_t *b)
{
    o->small_allocated += b->curobjs * b->objsize;
    o->nmalloc_small += b->nmalloc;
    o->nfree_small += b->nfree;
    mutex_stats_merge(&b->lock, &o->bins_locks);
}

static void snap_special_bin(bin_t *bin, void *arg)
{
    arena_snap_t *o = arg;
    bin_snap_t extra;
    memset(&extra, 0, sizeof(extra));
    bin_snap_t *b = o->nbins < NSMALL + STATS_SPECIAL_ROWS ? &o->bins[o->nbins++] : &extra;
    if (b == &extra)
        o->nspecial_unlisted++;
    snap_bin(b, bin);
    add_bin_totals(o, b);
}

static void snap_arena(arena_snap_t *o, arena_t *a)
{
    memset(o, 0, sizeof(*o));
    o->exists = true;
    o->index = a->index;
    o->incarnation = a->incarnation;
    o->manual = a->manual;
    memcpy(o->name, a->name, sizeof(o->name));
    o->nthreads = __atomic_load_n(&a->nthreads, __ATOMIC_RELAXED);
    for (unsigned c = 0; c < NSMALL; c++)
        snap_bin(&o->bins[c], &a->bins[c]);
    o->nbins = NSMALL;
    for (unsigned i = 0; i < o->nbins; i++)
        add_bin_totals(o, &o->bins[i]);
    arena_for_each_special_bin(a, snap_special_bin, o);
    mutex_lock(&a->lock);
    snap_arena_locked(o, a);
    mutex_unlock(&a->lock);
    mutex_stats_add(&a->lock, &o->arena_lock);
}

/* Bytes (and, when nblocks is given, small blocks) a live thread cache
 * holds. Its owner moves the bins' heads meanwhile: read atomically, the
 * figure is a moment's view. */
static size_t tc_cached_bytes(const tcache_t *tc, size_t *nblocks)
{
    size_t bytes = 0, blocks = 0;
    for (unsigned c = 0; c < g.tcache_nclasses; c++) {
        const tc_bin_t *b = &tc->bins[c];
        void **head = __atomic_load_n(&((tc_bin_t *)b)->head, __ATOMIC_RELAXED);
        uint16_t top_lo = __atomic_load_n(&b->top_lo, __ATOMIC_RELAXED);
        size_t cached = (uint16_t)(top_lo - (uint16_t)(uintptr_t)head) / sizeof(void *);
        bytes += cached * sc_size(c);
        blocks += cached;
    }
    for (unsigned k = 0; k < TC_PHASED_STASHES; k++)
        bytes += __atomic_load_n(&tc->stashes[k].bytes, __ATOMIC_RELAXED);
    if (nblocks != NULL)
        *nblocks += blocks;
    return bytes;
}

/* Live thread caches: their counters and the bytes they hold. */
static void add_tcache(const tcache_t *tc, void *arg)
{
    (void)arg;
    /* a rebind may switch it meanwhile: the counters go to one arena or
     * the other, never to a torn pointer */
    const arena_t *a = __atomic_load_n(&tc->arena, __ATOMIC_RELAXED);
    if (a->index >= snap.narenas || !snap.arenas[a->index].exists)
        return;
    arena_snap_t *o = &snap.arenas[a->index];
    for (unsigned c = 0; c < g.tcache_nclasses; c++) {
        const tc_bin_t *b = &tc->bins[c];
        add_tc_totals(o, c, counter_read(&b->nrequests), counter_read(&tc->stats[c].nmisses),
                      counter_read(&tc->stats[c].nfills), counter_read(&tc->stats[c].nflushes));
    }
    o->tcache_bytes += tc_cached_bytes(tc, NULL);
    add_samples(o, &tc->samples);
}

/* A block in a CPU, transfer or typed cache counts in its arena's
 * tcache_bytes (those caches hold blocks of every automatic arena). */
static void add_cached_block(const void *p, void *arg)
{
    (void)arg;
    const span_t *s = span_of(p);
    if (s == NULL || s->kind != SPAN_SLAB)
        return;
    const arena_t *a = s->arena;
    if (a->index < snap.narenas && snap.arenas[a->index].exists)
        snap.arenas[a->index].tcache_bytes += s->objsize;
}

/* A large cache's block or slack counts in its arena's tcache_bytes. */
static void add_large_cached(const span_t *s, size_t bytes, void *arg)
{
    (void)arg;
    const arena_t *a = s->arena;
    if (a->index < snap.narenas && snap.arenas[a->index].exists)
        snap.arenas[a->index].tcache_bytes += bytes;
}

static void add_typed_cached_block(const void *p, void *arg)
{
    add_cached_block(p, arg);
    const span_t *s = span_of(p);
    const arena_t *a = s->arena;
    if (a->index < snap.narenas && snap.arenas[a->index].exists) {
        snap.arenas[a->index].typed_cached_blocks++;
        snap.arenas[a->index].typed_cached_bytes += s->objsize;
    }
}

static bool ensure_capacity(unsigned n)
{
    if (n <= snap_capacity)
        return true;
    unsigned cap = snap_capacity ? snap_capacity : 8;
    while (cap < n)
        cap *= 2;
    arena_snap_t *mem = base_alloc(cap * sizeof(arena_snap_t), CACHELINE);
    if (mem == NULL)
        return false;
    snap.arenas = mem;   /* the old, smaller array stays with the metadata */
    snap_capacity = cap;
    return true;
}

static void sum_totals(void)
{
    size_t allocated = 0, active = 0, dirty = 0, clean = 0, mapped = 0, cached = 0, reserved = 0;
    for (unsigned i = 0; i < snap.narenas; i++) {
        const arena_snap_t *o = &snap.arenas[i];
        allocated += o->small_allocated + o->large_allocated;
        active += o->active_pages << LG_PAGE;
        dirty += (o->dirty_pages + o->muzzy_pages) << LG_PAGE;
        clean += o->clean_pages << LG_PAGE;
        mapped += o->mapped;
        reserved += o->reserved;
        cached += o->tcache_bytes;
    }
    snap.reserved = reserved;
    snap.metadata = base_mapped_bytes();
    snap.tcache_bytes = cached;
    snap.allocated = allocated > cached ? allocated - cached : 0;
    snap.active = active;
    snap.resident = active + dirty + snap.metadata;
    snap.mapped = mapped + snap.metadata;
    snap.retained = clean;
}

static uint64_t refresh_locked(void)
{
    unsigned n = __atomic_load_n(&narenas_total, __ATOMIC_ACQUIRE);
    if (!ensure_capacity(n))
        return snap.epoch;
    snap.narenas = n;
    arenas_iteration_lock();
    for (unsigned i = 0; i < n; i++) {
        arena_t *a = __atomic_load_n(&arenas[i], __ATOMIC_ACQUIRE);
        if (a != NULL && !a->destroyed)
            snap_arena(&snap.arenas[i], a);
        else
            memset(&snap.arenas[i], 0, sizeof(arena_snap_t));
    }
    arenas_iteration_unlock();
    tcaches_for_each_exited(add_exited, NULL);
    tcaches_for_each(add_tcache, NULL);
    cpu_caches_for_each_block(add_cached_block, NULL);
    large_caches_for_each(add_large_cached, NULL);
    typed_caches_for_each_block(add_typed_cached_block, NULL);
    snap.cpu_cache_bytes = cpu_caches_bytes();
    snap.transfer_bytes = transfer_bytes();
    snap.large_cache_bytes = large_caches_bytes();
    snap.guarded_total = guarded_count_total();
    snap.guarded_live = guarded_count_live();
    sum_totals();
    snap_taken = true;
    return ++snap.epoch;
}

uint64_t stats_refresh(void)
{
    stats_lock();
    uint64_t e = refresh_locked();
    stats_unlock();
    return e;
}

const stats_snap_t *stats_current(void)
{
    if (!snap_taken)
        refresh_locked();
    return &snap;
}

/* ---- report ------------------------------------------------------------ */

static double ratio(uint64_t a, uint64_t b) { return b == 0 ? 0.0 : (double)a / (double)b; }

static void print_options(emitter_t *em)
{
    em_obj_begin(em, "options");
    for (unsigned i = 0; i < opt_table_len; i++) {
        const opt_desc_t *d = &opt_table[i];
        switch (d->type) {
        case OPT_BOOL: em_bool(em, d->name, *(bool *)d->value); break;
        case OPT_UNSIGNED: em_u64(em, d->name, *(unsigned *)d->value); break;
        case OPT_SIZE: em_u64(em, d->name, *(size_t *)d->value); break;
        case OPT_SSIZE: em_i64(em, d->name, *(int64_t *)d->value); break;
        case OPT_STRING: em_str(em, d->name, (const char *)d->value); break;
        }
    }
    em_obj_end(em);
}

/* Per NUMA node: its CPUs and the bytes of its arena (from the snapshot;
 * zero for a node whose arena was never made). */
static void print_nodes(emitter_t *em)
{
    em_obj_begin(em, "nodes");
    em_u64(em, "nnodes", numa_nnodes());
    for (unsigned n = 0; n < numa_nnodes(); n++) {
        char key[32];
        snprintf(key, sizeof(key), em->json ? "%u" : "node %u", n);
        em_obj_begin(em, key);
        em_u64(em, "node_cpus", numa_node_ncpus(n));
        size_t mapped = 0, active = 0, resident = 0, reserved = 0;
        int64_t arena = -1;
        for (unsigned i = 0; i < snap.narenas; i++) {
            const arena_snap_t *o = &snap.arenas[i];
            if (!o->exists || o->node != (int)n)
                continue;
            arena = i;
            mapped += o->mapped;
            reserved += o->reserved;
            active += o->active_pages << LG_PAGE;
            resident += (o->active_pages + o->dirty_pages + o->muzzy_pages) << LG_PAGE;
        }
        em_i64(em, "arena", arena);
        em_u64(em, "mapped", mapped);
        em_u64(em, "active", active);
        em_u64(em, "resident", resident);
        em_u64(em, "reserved", reserved);
        em_obj_end(em);
    }
    em_obj_end(em);
}

/* The memory limit's charge, limits and counters (memlimit.h), read now
 * rather than at the epoch: they are atomics of their own. */
static void print_memory_limit(emitter_t *em)
{
    memlimit_stats_t m;
    memlimit_stats_read(&m);
    em_obj_begin(em, "memory");
    em_u64(em, "charged", m.charged);
    em_u64(em, "peak", m.peak);
    em_u64(em, "limit", m.limit);
    em_u64(em, "soft_limit", m.soft_limit);
    em_u64(em, "limit_refusals", m.refusals);
    em_u64(em, "limit_reclaims", m.reclaims);
    em_u64(em, "limit_failures", m.failures);
    em_u64(em, "soft_limit_passes", m.soft_passes);
    em_u64(em, "soft_limit_above_ms", m.soft_above_ns / 1000000u);
    em_bool(em, "above_soft_limit", m.above_soft);
    em_obj_end(em);
}

/* The heap profile's counters (prof.h), read now; only with prof:true. */
static void print_prof(emitter_t *em)
{
    if (!prof_on)
        return;
    em_obj_begin(em, "prof");
    em_bool(em, "active", prof_active_get());
    em_u64(em, "samples_total", prof_samples_total());
    em_u64(em, "samples_live", prof_samples_live());
    em_u64(em, "samples_dropped", prof_samples_dropped());
    em_obj_end(em);
}

static void print_totals(emitter_t *em)
{
    em_obj_begin(em, "totals");
    em_u64(em, "allocated", snap.allocated);
    em_u64(em, "active", snap.active);
    em_u64(em, "resident", snap.resident);
    em_u64(em, "mapped", snap.mapped);
    em_u64(em, "retained", snap.retained);
    em_u64(em, "reserved", snap.reserved);
    em_u64(em, "metadata", snap.metadata);
    em_u64(em, "tcache_bytes", snap.tcache_bytes);
    em_u64(em, "narenas", snap.narenas);
    em_obj_end(em);
    print_memory_limit(em);
    print_prof(em);
    print_nodes(em);
}

static void print_types(emitter_t *em)
{
    static const char *const cols[] = {"type", "live_bytes", "live_blocks", "nalloc", "nfree"};
    em_table_begin(em, "types", cols, 5);
    unsigned n = types_count();
    for (unsigned id = 1; id < n; id++) {
        type_stats_t t;
        type_snapshot((uint16_t)id, &t);
        em_row_begin(em);
        em_cell_str(em, t.name);
        em_cell_u64(em, t.live_bytes);
        em_cell_u64(em, t.live_blocks);
        em_cell_u64(em, t.nalloc);
        em_cell_u64(em, t.nfree);
        em_row_end(em);
    }
    em_table_end(em);
}

static void print_lock(emitter_t *em, const char *key, const mutex_stats_t *m)
{
    em_obj_begin(em, key);
    em_u64(em, "num_ops", m->n_acquired);
    em_u64(em, "num_wait", m->n_contended);
    em_u64(em, "total_wait_ns", m->wait_ns_total);
    em_u64(em, "max_wait_ns", m->wait_ns_max);
    em_obj_end(em);
}

static void print_bins(emitter_t *em, const arena_snap_t *o, bool locks)
{
    static const char *const cols[] = {"size",     "phase",    "typed",      "nmalloc",   "ndalloc",
                                       "nrequests", "curregs", "curslabs",   "nslabs",    "util",
                                       "nfills",   "nflushes", "tc_hit_rate", "lock_ops", "lock_waits",
                                       "lock_wait_ns"};
    em_table_begin(em, "bins", cols, locks ? 16 : 13);
    for (unsigned i = 0; i < o->nbins; i++) {
        const bin_snap_t *b = &o->bins[i];
        if (b->nmalloc == 0 && b->nrequests == 0)
            continue;
        em_row_begin(em);
        em_cell_u64(em, b->objsize);
        em_cell_u64(em, b->phase);
        em_cell_u64(em, b->typed);
        em_cell_u64(em, b->nmalloc);
        em_cell_u64(em, b->nfree);
        em_cell_u64(em, b->nrequests);
        em_cell_u64(em, b->curobjs);
        em_cell_u64(em, b->curslabs);
        em_cell_u64(em, b->nslabs);
        em_cell_double(em, ratio(b->curobjs, (uint64_t)b->curslabs * b->slab_objs));
        em_cell_u64(em, b->nfills);
        em_cell_u64(em, b->nflushes);
        em_cell_double(em, b->nrequests ? 1.0 - ratio(b->tc_misses, b->nrequests) : 0.0);
        em_cell_u64(em, b->lock.n_acquired);
        em_cell_u64(em, b->lock.n_contended);
        em_cell_u64(em, b->lock.wait_ns_total);
        em_row_end(em);
    }
    em_table_end(em);
}

static void print_large(emitter_t *em, const arena_snap_t *o)
{
    static const char *const cols[] = {"size", "nmalloc", "ndalloc", "curlextents", "live_bytes"};
    em_table_begin(em, "large", cols, 5);
    for (unsigned c = 0; c < NLARGE_STATS; c++) {
        const large_snap_t *l = &o->large[c];
        if (l->nmalloc == 0)
            continue;
        em_row_begin(em);
        em_cell_u64(em, sc_size(NSMALL + c));
        em_cell_u64(em, l->nmalloc);
        em_cell_u64(em, l->nfree);
        em_cell_u64(em, l->nmalloc - l->nfree);
        em_cell_u64(em, l->live_bytes);
        em_row_end(em);
    }
    em_table_end(em);
}

static void print_page_runs(emitter_t *em, const arena_snap_t *o)
{
    static const char *const names[RUN_NSTATES] = {"dirty", "muzzy", "clean", "retained"};
    static const char *const cols[] = {"state", "runs", "pages", "longest_list"};
    em_obj_begin(em, "page_runs");
    em_u64(em, "searches", o->nsearches);
    em_u64(em, "hits", o->nsearch_hits);
    em_double(em, "hit_rate", ratio(o->nsearch_hits, o->nsearches));
    em_double(em, "considered_per_search", ratio(o->ncandidates, o->nsearches));
    em_table_begin(em, "free_runs", cols, 4);
    for (int st = 0; st < RUN_NSTATES; st++) {
        em_row_begin(em);
        em_cell_str(em, names[st]);
        em_cell_u64(em, o->runs[st].nruns);
        em_cell_u64(em, o->runs[st].npages);
        em_cell_u64(em, o->runs[st].longest_list);
        em_row_end(em);
    }
    em_table_end(em);
    em_obj_end(em);
}

static void print_arena_summary(emitter_t *em, const arena_snap_t *o)
{
    em_str(em, "name", o->name);
    em_bool(em, "manual", o->manual);
    em_u64(em, "nthreads", o->nthreads);
    em_i64(em, "dirty_decay_ms", o->dirty_decay_ms);
    em_i64(em, "muzzy_decay_ms", o->muzzy_decay_ms);
    em_i64(em, "node", o->node);
    em_u64(em, "mapped", o->mapped);
    em_u64(em, "reserved", o->reserved);
    em_u64(em, "segments", o->nsegments);
    em_u64(em, "pactive", o->active_pages);
    em_u64(em, "pdirty", o->dirty_pages);
    em_u64(em, "pmuzzy", o->muzzy_pages);
    em_u64(em, "pclean", o->clean_pages);
    em_u64(em, "small_allocated", o->small_allocated);
    em_u64(em, "large_allocated", o->large_allocated);
    em_u64(em, "tcache_bytes", o->tcache_bytes);
    em_u64(em, "nmalloc_small", o->nmalloc_small);
    em_u64(em, "ndalloc_small", o->nfree_small);
    em_u64(em, "nmalloc_large", o->nmalloc_large);
    em_u64(em, "ndalloc_large", o->nfree_large);
    em_u64(em, "purge_passes", o->npurge_passes);
    em_u64(em, "purged_lazy_pages", o->npurged_lazy);
    em_u64(em, "purged_pages", o->npurged_now);
    em_u64(em, "slow_alloc_samples", o->samples.alloc_n);
    em_double(em, "slow_alloc_cycles_per_call", ratio(o->samples.alloc_cycles, o->samples.alloc_n));
    em_u64(em, "slow_free_samples", o->samples.free_n);
    em_double(em, "slow_free_cycles_per_call", ratio(o->samples.free_cycles, o->samples.free_n));
}

static void print_arena(emitter_t *em, const arena_snap_t *o, const char *opts)
{
    char key[32];
    snprintf(key, sizeof(key), em->json ? "%u" : "arena %u", o->index);
    em_obj_begin(em, key);
    print_arena_summary(em, o);
    print_page_runs(em, o);
    if (strchr(opts, 'x') == NULL) {
        print_lock(em, "arena_lock", &o->arena_lock);
        print_lock(em, "bin_locks", &o->bins_locks);
    }
    if (strchr(opts, 'b') == NULL)
        print_bins(em, o, strchr(opts, 'x') == NULL);
    if (strchr(opts, 'l') == NULL)
        print_large(em, o);
    em_obj_end(em);
}

static void write_stderr(void *opaque, const char *text)
{
    (void)opaque;
    size_t n = strlen(text);
    while (n > 0) {
        ssize_t w = write(STDERR_FILENO, text, n);
        if (w <= 0)
            return;
        text += w;
        n -= (size_t)w;
    }
}

/* The report is rendered into mapped memory of its own while the stats
 * lock is held, and handed to the caller's callback only after the lock
 * is released: the callback is user code, which may allocate, call
 * dpm_ctl (epoch refreshes take this lock) or create threads. */
static void text_buf_append(void *opaque, const char *piece)
{
    text_buf_t *b = opaque;
    size_t n = strlen(piece);
    if (b->failed)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = round_up((b->len + n + 1) * 2, PAGE);
        char *grown = os_map_aligned(cap, PAGE);
        if (grown == NULL) {
            b->failed = true;
            return;
        }
        if (b->text != NULL) {
            memcpy(grown, b->text, b->len);
            os_unmap(b->text, b->cap);
        }
        b->text = grown;
        b->cap = cap;
    }
    memcpy(b->text + b->len, piece, n + 1);
    b->len += n;
}

static void render_report(emitter_t *em, const char *opts)
{
    em_obj_begin(em, em->json ? "dpmalloc" : "___ dpmalloc statistics ___");
    if (strchr(opts, 'g') == NULL) {
        em_str(em, "version", DPMALLOC_VERSION);
        em_u64(em, "epoch", snap.epoch);
        em_u64(em, "ncpus", g.ncpus);
        em_u64(em, "page", PAGE);
        print_options(em);
    }
    if (strchr(opts, 'm') == NULL)
        print_totals(em);
    if (strchr(opts, 't') == NULL)
        print_types(em);
    if (strchr(opts, 'a') == NULL) {
        em_obj_begin(em, "arenas");
        for (unsigned i = 0; i < snap.narenas; i++)
            if (snap.arenas[i].exists)
                print_arena(em, &snap.arenas[i], opts);
        em_obj_end(em);
    }
    em_obj_end(em);
    em_finish(em);
}

/* Calls write_cb with the text in pieces of at most 4 KiB (callbacks
 * such as jemalloc's examples copy into fixed buffers). */
#define STATS_PIECE 4096

static void deliver(void (*write_cb)(void *, const char *), void *cbopaque, char *text, size_t len)
{
    for (size_t at = 0; at < len; at += STATS_PIECE) {
        size_t n = len - at < STATS_PIECE ? len - at : STATS_PIECE;
        char saved = text[at + n];
        text[at + n] = '\0';
        write_cb(cbopaque, text + at);
        text[at + n] = saved;
    }
}

DPM_EXPORT void dpm_stats_print(void (*write_cb)(void *, const char *), void *cbopaque, const char *opts)
{
    if (!dpm_ready())
        return;
    if (opts == NULL)
        opts = "";
    if (write_cb == NULL)
        write_cb = write_stderr;
    text_buf_t buf = {0};
    emitter_t em;
    stats_lock();
    refresh_locked();
    em_init(&em, strchr(opts, 'J') != NULL, text_buf_append, &buf);
    render_report(&em, opts);
    stats_unlock();
    if (buf.text == NULL)
        return;
    deliver(write_cb, cbopaque, buf.text, buf.len);
    if (buf.failed)
        write_cb(cbopaque, "\n<dpmalloc: statistics cut short: out of memory>\n");
    os_unmap(buf.text, buf.cap);
}

void stats_print_at_exit(void)
{
    dpm_stats_print(NULL, NULL, opt.stats_print_opts);
}

/* ---- libc-shaped views (mallinfo, malloc_stats, malloc_info) ------------ */

void text_buf_printf(text_buf_t *b, const char *fmt, ...)
{
    char piece[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(piece, sizeof(piece), fmt, ap);
    va_end(ap);
    if (n >= 0)
        text_buf_append(b, piece);
}

void text_buf_release(text_buf_t *b)
{
    if (b->text != NULL)
        os_unmap(b->text, b->cap);
    b->text = NULL;
    b->len = b->cap = 0;
}

bool stats_render(void (*render)(const stats_snap_t *, text_buf_t *, void *), void *arg, text_buf_t *buf)
{
    memset(buf, 0, sizeof(*buf));
    if (!dpm_ready())
        return false;
    stats_lock();
    refresh_locked();
    render(&snap, buf, arg);
    stats_unlock();
    return buf->text != NULL && !buf->failed;
}

/* One arena's share of the brief: the same counters the snapshot reads
 * (bins' live objects, the page heap's gauges, large blocks), without
 * walking the free-run lists or copying per-bin rows. */
static void brief_bin(bin_t *bin, void *arg)
{
    stats_brief_t *o = arg;
    mutex_lock(&bin->lock);
    o->allocated += (size_t)(bin->stats.nmalloc - bin->stats.nfree) * bin->objsize;
    mutex_unlock(&bin->lock);
}

static void brief_arena(stats_brief_t *o, arena_t *a)
{
    for (unsigned c = 0; c < NSMALL; c++)
        brief_bin(&a->bins[c], o);
    arena_for_each_special_bin(a, brief_bin, o);
    mutex_lock(&a->lock);
    const page_heap_t *ph = &a->ph;
    o->mapped += ph->mapped_bytes;
    for (int st = 0; st < RUN_NSTATES; st++)
        o->free_runs += ph->free_runs[st].nruns;
    o->free_resident += (ph->free_runs[RUN_DIRTY].npages + ph->free_runs[RUN_RETAINED].npages +
                         ph->free_runs[RUN_MUZZY].npages)
                        << LG_PAGE;
    for (unsigned c = 0; c < NLARGE_STATS; c++) {
        o->allocated += a->large[c].live_bytes;
        o->large_blocks += (size_t)(a->large[c].nmalloc - a->large[c].nfree);
    }
    mutex_unlock(&a->lock);
    o->narenas++;
}

static void brief_tcache(const tcache_t *tc, void *arg)
{
    stats_brief_t *o = arg;
    o->tcache_bytes += tc_cached_bytes(tc, &o->tcache_blocks);
}

void stats_brief(stats_brief_t *out)
{
    memset(out, 0, sizeof(*out));
    if (!dpm_ready())
        return;
    unsigned n = __atomic_load_n(&narenas_total, __ATOMIC_ACQUIRE);
    arenas_iteration_lock();
    for (unsigned i = 0; i < n; i++) {
        arena_t *a = __atomic_load_n(&arenas[i], __ATOMIC_ACQUIRE);
        if (a != NULL && !a->destroyed)
            brief_arena(out, a);
    }
    arenas_iteration_unlock();
    tcaches_for_each(brief_tcache, out);
    out->tcache_bytes += cpu_caches_bytes() + transfer_bytes() + large_caches_bytes() + typed_caches_bytes();
    size_t held = out->allocated;   /* blocks out of the bins and page heaps */
    out->allocated = held > out->tcache_bytes ? held - out->tcache_bytes : 0;
    out->metadata = base_mapped_bytes();
    out->mapped += out->metadata;
}
