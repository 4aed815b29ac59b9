/*
 * ctl.c - dpm_ctl and its name table (see ctl.h). Value types follow
 * jemalloc's mallctl so that ported code only renames: const char * for
 * version, uint64_t for epoch and counters, unsigned for arena indices,
 * size_t for sizes, ssize_t for decay times, bool for flags.
 */
#include "ctl.h"
#include "alloc.h"
#include "typed_cache.h"
#include "background.h"
#include "conf.h"
#include "global.h"
#include "numa.h"
#include "stats.h"
#include "guarded.h"
#include "prof.h"
#include "memlimit.h"
#include "quarantine.h"
#include "zero_blocks.h"

#include <dpmalloc.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

/* ---- value plumbing ---------------------------------------------------- */

static bool wants_read(const ctl_call_t *c) { return c->oldp != NULL || c->oldlenp != NULL; }
static bool wants_write(const ctl_call_t *c) { return c->newp != NULL || c->newlen != 0; }

static int read_out(const ctl_call_t *c, const void *value, size_t len)
{
    if (!wants_read(c))
        return 0;
    if (c->oldp == NULL || c->oldlenp == NULL || *c->oldlenp != len)
        return EINVAL;
    memcpy(c->oldp, value, len);
    return 0;
}

/* 1 if a value was written into *value, 0 if none given, or -errno. */
static int write_in(const ctl_call_t *c, void *value, size_t len)
{
    if (!wants_write(c))
        return 0;
    if (c->newp == NULL || c->newlen != len)
        return -EINVAL;
    memcpy(value, c->newp, len);
    return 1;
}

static int read_only(const ctl_call_t *c, const void *value, size_t len)
{
    return wants_write(c) ? EPERM : read_out(c, value, len);
}

static int action_only(const ctl_call_t *c) { return wants_read(c) || wants_write(c) ? EINVAL : 0; }

/* ---- general ----------------------------------------------------------- */

static int h_version(const ctl_call_t *c, const void *arg)
{
    (void)arg;
    const char *v = DPMALLOC_VERSION;
    return read_only(c, &v, sizeof(v));
}

/* config.*: how this build was made, under jemalloc's names. */
#ifndef DPM_DEFAULT_CONF
#define DPM_DEFAULT_CONF ""
#endif
#ifndef DPM_DEBUG
#define DPM_DEBUG 0
#endif
static const bool config_true = true, config_false = false, config_debug = DPM_DEBUG != 0;

static int h_config_bool(const ctl_call_t *c, const void *arg) { return read_only(c, arg, sizeof(bool)); }

static int h_config_malloc_conf(const ctl_call_t *c, const void *arg)
{
    (void)arg;
    const char *v = DPM_DEFAULT_CONF;
    return read_only(c, &v, sizeof(v));
}

/* config.prof: whether the option table has heap profiling's "prof" */
static int h_config_prof(const ctl_call_t *c, const void *arg)
{
    (void)arg;
    bool v = false;
    for (unsigned i = 0; i < opt_table_len; i++)
        v |= strcmp(opt_table[i].name, "prof") == 0;
    return read_only(c, &v, sizeof(v));
}

/* "cpu": caches per CPU on rseq; "thread": every thread its own cache. */
static int h_front_end(const ctl_call_t *c, const void *arg)
{
    (void)arg;
    const char *v = cpu_caches_on ? "cpu" : "thread";
    return read_only(c, &v, sizeof(v));
}

static int h_epoch(const ctl_call_t *c, const void *arg)
{
    (void)arg;
    uint64_t e;
    int w = write_in(c, &e, sizeof(e));
    if (w < 0)
        return -w;
    if (w == 1)
        stats_refresh();
    stats_lock();
    e = stats_current()->epoch;
    stats_unlock();
    return read_out(c, &e, sizeof(e));
}

static int h_background(const ctl_call_t *c, const void *arg)
{
    (void)arg;
    bool old = background_enabled(), v;
    int w = write_in(c, &v, sizeof(v));
    if (w < 0)
        return -w;
    int err = read_out(c, &old, sizeof(old));
    if (err == 0 && w == 1)
        err = background_set(v);
    return err;
}

/* ---- prof.* (heap profiling, prof.h): ENOENT unless prof:true ----------- */

static int h_prof_dump(const ctl_call_t *c, const void *arg)
{
    (void)arg;
    const char *path = NULL;
    if (!prof_on)
        return ENOENT;
    if (wants_read(c))
        return EINVAL;
    int w = write_in(c, &path, sizeof(path));
    if (w < 0)
        return -w;
    return prof_dump(path);   /* NULL: the default name */
}

/* As jemalloc's: reads false without prof:true, where writing true is
 * ENOENT (nothing can be sampled) and writing false changes nothing. */
static int h_prof_active(const ctl_call_t *c, const void *arg)
{
    (void)arg;
    bool old = prof_on && prof_active_get(), v;
    int w = write_in(c, &v, sizeof(v));
    if (w < 0)
        return -w;
    if (w == 1 && v && !prof_on)
        return ENOENT;
    int err = read_out(c, &old, sizeof(old));
    if (err == 0 && w == 1 && prof_on)
        prof_active_set(v);
    return err;
}

static int h_prof_prefix(const ctl_call_t *c, const void *arg)
{
    (void)arg;
    const char *prefix = NULL;
    if (!prof_on)
        return ENOENT;
    if (wants_read(c) || write_in(c, &prefix, sizeof(prefix)) != 1 || prefix == NULL)
        return EINVAL;
    return prof_prefix_set(prefix);
}

static int h_prof_lg_sample(const ctl_call_t *c, const void *arg)
{
    (void)arg;
    size_t v = opt.lg_prof_sample;
    return read_only(c, &v, sizeof(v));
}

static int h_prof_samples(const ctl_call_t *c, const void *arg)
{
    const char *which = arg;
    uint64_t v = which == NULL ? prof_samples_total() : which[0] == 'l' ? prof_samples_live() : prof_samples_dropped();
    return read_only(c, &v, sizeof(v));
}

/* ---- arenas.* ---------------------------------------------------------- */

static int h_nnodes(const ctl_call_t *c, const void *arg)
{
    (void)arg;
    unsigned n = numa_nnodes();
    return read_only(c, &n, sizeof(n));
}

/* arenas.node.<n>.*: the node's arena (made on first use), its CPUs and
 * its bytes, read live under the arena lock. */
static int h_node(const ctl_call_t *c, const void *arg)
{
    const char *what = arg;
    if (wants_write(c))
        return EPERM;
    if (c->idx[0] >= numa_nnodes() || !numa_node_online((unsigned)c->idx[0]))
        return ENOENT;
    unsigned node = (unsigned)c->idx[0];
    if (strcmp(what, "ncpus") == 0) {
        unsigned n = numa_node_ncpus(node);
        return read_out(c, &n, sizeof(n));
    }
    arena_t *a = numa_node_arena(node);
    if (a == NULL)
        return ENOMEM;
    if (strcmp(what, "arena") == 0) {
        unsigned index = a->index;
        return read_out(c, &index, sizeof(index));
    }
    mutex_lock(&a->lock);
    const page_heap_t *ph = &a->ph;
    size_t v = strcmp(what, "mapped") == 0     ? ph->mapped_bytes
               : strcmp(what, "reserved") == 0 ? ph->reserved_bytes
               : strcmp(what, "active") == 0   ? ph->active_pages << LG_PAGE
                                               : (ph->active_pages + ph->busy_pages + ph_decayable_pages(ph) +
                                                  ph->free_runs[RUN_RETAINED].npages)
                                                     << LG_PAGE;
    mutex_unlock(&a->lock);
    return read_out(c, &v, sizeof(v));
}

static unsigned narenas_now(void)
{
    unsigned n = __atomic_load_n(&narenas_total, __ATOMIC_ACQUIRE);
    unsigned n_auto = __atomic_load_n(&narenas_auto, __ATOMIC_RELAXED);   /* mallopt may set it */
    return n < n_auto ? n_auto : n;
}

static int h_narenas(const ctl_call_t *c, const void *arg)
{
    (void)arg;
    unsigned n = narenas_now();
    return read_only(c, &n, sizeof(n));
}

static int h_arenas_create(const ctl_call_t *c, const void *arg)
{
    (void)arg;
    const char *name = NULL;
    int w = write_in(c, &name, sizeof(name));
    if (w < 0)
        return -w;
    if (c->oldp == NULL || c->oldlenp == NULL || *c->oldlenp != sizeof(unsigned))
        return EINVAL;
    unsigned index;
    memlimit_refused_clear();
    int err = arena_create_manual(name, NULL, -1, &index);
    /* refused at the memory limit: once more after the limit's reclaim */
    if (err == ENOMEM && memlimit_refused_take() && memlimit_reclaim())
        err = arena_create_manual(name, NULL, -1, &index);
    memlimit_refused_clear();
    return err != 0 ? err : read_out(c, &index, sizeof(index));
}

static int h_arenas_lookup(const ctl_call_t *c, const void *arg)
{
    (void)arg;
    const void *ptr;
    if (write_in(c, &ptr, sizeof(ptr)) != 1)
        return EINVAL;
    span_t *s = span_of(ptr);
    /* secure mode's zero-size blocks and guard_sample's blocks hold no
     * arena's pages: arena 0's */
    bool zero = s == NULL && (zero_block_in_region(ptr) || guarded_in_pool(ptr));
    if (!zero && (s == NULL || s->kind == SPAN_FREE))
        return EINVAL;
    unsigned index = zero ? 0 : s->arena->index;
    return read_out(c, &index, sizeof(index));
}

static const size_t page_size = PAGE, quantum = QUANTUM;
static const unsigned nbins_small = NSMALL, nlextents = NLARGE_STATS;

static int h_const_size(const ctl_call_t *c, const void *arg) { return read_only(c, arg, sizeof(size_t)); }
static int h_const_unsigned(const ctl_call_t *c, const void *arg) { return read_only(c, arg, sizeof(unsigned)); }

static int h_bin_info(const ctl_call_t *c, const void *arg)
{
    if (c->idx[0] >= NSMALL)
        return ENOENT;
    const sc_info_t *sc = &sc_table[c->idx[0]];
    const char *what = arg;
    if (strcmp(what, "nregs") == 0) {
        uint32_t n = sc->slab_objs;
        return read_only(c, &n, sizeof(n));
    }
    size_t v = strcmp(what, "size") == 0 ? sc->size : (size_t)sc->slab_pages * PAGE;
    return read_only(c, &v, sizeof(v));
}

static int h_lextent_size(const ctl_call_t *c, const void *arg)
{
    (void)arg;
    if (c->idx[0] >= NLARGE_STATS)
        return ENOENT;
    size_t v = sc_size(NSMALL + (unsigned)c->idx[0]);
    return read_only(c, &v, sizeof(v));
}

/* ---- thread.* ---------------------------------------------------------- */

static int h_thread_arena(const ctl_call_t *c, const void *arg)
{
    (void)arg;
    arena_t *cur = thread_arena();
    unsigned old = cur != NULL ? cur->index : 0, want;
    int w = write_in(c, &want, sizeof(want));
    if (w < 0)
        return -w;
    int err = read_out(c, &old, sizeof(old));
    if (err != 0 || w == 0)
        return err;
    arena_t *a = arena_get(want);
    err = a != NULL ? thread_bind_arena(a) : EINVAL;
    if (err == 0)
        thread_front_keep_own();
    return err;
}

static int h_tcache_flush(const ctl_call_t *c, const void *arg)
{
    (void)arg;
    int err = action_only(c);
    if (err == 0)
        err = tcache_flush_mine();
    /* what the thread freed may sit in any CPU's cache, large blocks in
     * any CPU's large cache */
    if (err == 0) {
        cpu_caches_drain(false);
        large_caches_flush(false, NULL);
        typed_caches_drain(false);
    }
    return err;
}

static int h_tcache_enabled(const ctl_call_t *c, const void *arg)
{
    (void)arg;
    bool old = tls_state == THREAD_CACHED || (tls_state == THREAD_NEW && opt.tcache && g.tcache_nclasses > 0), v;
    int w = write_in(c, &v, sizeof(v));
    if (w < 0)
        return -w;
    int err = read_out(c, &old, sizeof(old));
    if (err == 0 && w == 1)
        err = thread_tcache_enable(v);
    thread_front_pick();
    return err;
}

static int h_ncached_read(const ctl_call_t *c, const void *arg)
{
    (void)arg;
    size_t size, n;
    if (write_in(c, &size, sizeof(size)) != 1)
        return EINVAL;
    if (tls_state == THREAD_NEW)
        thread_cache_make();
    int err = thread_ncached_max_get(size, &n);
    return err != 0 ? err : read_out(c, &n, sizeof(n));
}

/* "lo-hi:n|lo-hi:n" */
static int h_ncached_write(const ctl_call_t *c, const void *arg)
{
    (void)arg;
    const char *spec;
    if (wants_read(c) || write_in(c, &spec, sizeof(spec)) != 1 || spec == NULL)
        return EINVAL;
    while (*spec != '\0') {
        unsigned long long lo, hi, n;
        int used = 0;
        if (sscanf(spec, "%llu-%llu:%llu%n", &lo, &hi, &n, &used) != 3 || used == 0)
            return EINVAL;
        if (tls_state == THREAD_NEW)
            thread_cache_make();
        thread_front_keep_own();   /* the tuned bins are the thread's own: they get their slots first */
        int err = thread_ncached_max_set((size_t)lo, (size_t)hi, n > 0xffffffffu ? 0xffffffffu : (unsigned)n);
        if (err != 0)
            return err;
        spec += used;
        if (*spec == '|')
            spec++;
        else if (*spec != '\0')
            return EINVAL;
    }
    return 0;
}

/* thread.allocated / thread.deallocated (arg "de"), and with "p" the
 * address of the calling thread's live counter (alloc.h) */
static int h_thread_counter(const ctl_call_t *c, const void *arg)
{
    const char *which = arg;
    uint64_t *counter = which[0] == 'd' ? &tls_thread.deallocated : &tls_thread.allocated;
    if (which[strlen(which) - 1] == 'p')
        return read_only(c, &counter, sizeof(counter));
    uint64_t v = *counter;
    return read_only(c, &v, sizeof(v));
}

/* ---- arena.<i>.* ------------------------------------------------------- */

#define CTL_ARENAS_ALL 4096
_Static_assert(CTL_ARENAS_ALL >= MAX_ARENAS, "the index for all arenas is no arena's");

/* arena.4096.purge / decay (and arena.<arenas.narenas>.*, jemalloc's
 * older spelling of "all", which redis's MEMORY PURGE uses): every arena's, the caches drained once; each
 * arena is taken as arena.<i>.purge takes it (no lock held over a page
 * source's callbacks). */
static int purge_all(const void *arg)
{
    if (arg == NULL) {
        if (opt.secure)
            quarantine_drain("arena.<i>.purge");
        tcache_reclaim_mine();
        large_caches_flush(false, NULL);
        cpu_caches_drain(false);
        typed_caches_drain(false);
    }
    unsigned n = __atomic_load_n(&narenas_total, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n && i < MAX_ARENAS; i++) {
        arena_t *a = __atomic_load_n(&arenas[i], __ATOMIC_ACQUIRE);   /* none made here */
        if (a == NULL || a->destroyed)
            continue;
        if (arg == NULL)
            arena_release_idle_slabs(a);
        arena_decay_now(a, arg == NULL);
    }
    return 0;
}

static arena_t *indexed_arena(const ctl_call_t *c)
{
    return c->idx[0] < MAX_ARENAS ? arena_get((unsigned)c->idx[0]) : NULL;
}

static int h_arena_purge(const ctl_call_t *c, const void *arg)
{
    int err = action_only(c);
    if (err == 0 && (c->idx[0] == CTL_ARENAS_ALL || c->idx[0] == narenas_now()))
        return purge_all(arg);
    arena_t *a = err == 0 ? indexed_arena(c) : NULL;
    if (err != 0 || a == NULL)
        return err != 0 ? err : ENOENT;
    /* arg "decay": follow the curves; purge also takes the arena's blocks
     * out of every CPU's large cache first */
    if (arg == NULL) {
        if (opt.secure)   /* its rings hold every arena's blocks: all go */
            quarantine_drain("arena.<i>.purge");
        tcache_reclaim_mine();
        large_caches_flush(false, a);
        cpu_caches_drain(false);
        typed_caches_drain(false);
        arena_release_idle_slabs(a);
    }
    arena_decay_now(a, arg == NULL);
    return 0;
}

static int h_arena_reset(const ctl_call_t *c, const void *arg)
{
    int err = action_only(c);
    if (err != 0)
        return err;
    if (c->idx[0] >= MAX_ARENAS)
        return ENOENT;
    /* Of all caches only the caller's may hold the arena's blocks now
     * (arena_reset refuses while other threads are bound): they go first. */
    err = tcache_flush_mine();
    if (err != 0)
        return err;
    return arg != NULL ? arena_destroy((unsigned)c->idx[0]) : arena_reset((unsigned)c->idx[0], tls_arena);
}

static int h_arena_decay_ms(const ctl_call_t *c, const void *arg)
{
    arena_t *a = indexed_arena(c);
    if (a == NULL)
        return ENOENT;
    bool dirty = arg == NULL;
    ssize_t old = (ssize_t)(dirty ? a->dirty_decay_ms : a->muzzy_decay_ms), v;
    int w = write_in(c, &v, sizeof(v));
    if (w < 0)
        return -w;
    if (w == 1 && (v < -1 || v > INT32_MAX))
        return EINVAL;
    int err = read_out(c, &old, sizeof(old));
    if (err == 0 && w == 1) {
        mutex_lock(&a->lock);
        if (dirty)
            __atomic_store_n(&a->dirty_decay_ms, (int64_t)v, __ATOMIC_RELAXED);   /* read racily by orphaned() */
        else
            a->muzzy_decay_ms = v;
        mutex_unlock(&a->lock);
    }
    return err;
}

static int h_arena_name(const ctl_call_t *c, const void *arg)
{
    (void)arg;
    arena_t *a = indexed_arena(c);
    if (a == NULL)
        return ENOENT;
    const char *name = a->name;
    return read_only(c, &name, sizeof(name));
}

/* ---- debug.* ----------------------------------------------------------- */

/* Structures of arena a (every bin, then the page heap) whose invariant
 * check fails. Each check holds its own lock only: bin_check takes the
 * bin lock, ph_check wants the arena lock, and bins come first in the
 * lock order (bin -> arena). */
static void check_special_bin(bin_t *b, void *bad) { *(unsigned *)bad += !bin_check(b); }

static unsigned check_arena(arena_t *a)
{
    unsigned bad = 0;
    for (unsigned c = 0; c < NSMALL; c++)
        bad += !bin_check(&a->bins[c]);
    arena_for_each_special_bin(a, check_special_bin, &bad);
    mutex_lock(&a->lock);
    bad += !ph_check(&a->ph);
    mutex_unlock(&a->lock);
    return bad;
}

/* The iteration lock keeps arenas from being created, destroyed or
 * re-initialised under the walk. */
static int h_check_heap(const ctl_call_t *c, const void *arg)
{
    (void)arg;
    if (wants_write(c))
        return EPERM;
    unsigned bad = 0;
    arenas_iteration_lock();
    unsigned n = __atomic_load_n(&narenas_total, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n; i++) {
        arena_t *a = __atomic_load_n(&arenas[i], __ATOMIC_ACQUIRE);
        if (a != NULL && !a->destroyed)
            bad += check_arena(a);
    }
    arenas_iteration_unlock();
    return read_out(c, &bad, sizeof(bad));
}

/* ---- memory.* (memory limit, memlimit.h) -------------------------------- */

/* memory.limit, memory.soft_limit: bytes, 0 = none. A new value below the
 * charge frees no live memory: it runs the limit's reclaim once now (this
 * handler holds no lock), and the next growth past it is refused. */
static int h_memory_limit(const ctl_call_t *c, const void *arg)
{
    bool soft = arg != NULL;
    size_t old = soft ? memlimit_soft_get() : memlimit_get(), v;
    int w = write_in(c, &v, sizeof(v));
    if (w < 0)
        return -w;
    int err = read_out(c, &old, sizeof(old));
    if (err != 0 || w != 1)
        return err;
    if (soft) {
        memlimit_soft_set(v);
        memlimit_soft_drain_if_due();
    } else {
        memlimit_set(v);
        /* segments mapped before the limit lose THP too (pages.c) */
        if (v != 0 && old == 0)
            arenas_no_thp();
        if (v != 0 && memlimit_charged() > v)
            memlimit_reclaim();
    }
    return 0;
}

static int h_memory_peak_reset(const ctl_call_t *c, const void *arg)
{
    (void)arg;
    int err = action_only(c);
    if (err == 0)
        memlimit_peak_reset();
    return err;
}

static int h_memory_stat(const ctl_call_t *c, const void *arg)
{
    memlimit_stats_t st;
    memlimit_stats_read(&st);
    const char *what = arg;
    if (strcmp(what, "above_soft_limit") == 0)
        return read_only(c, &st.above_soft, sizeof(st.above_soft));
    if (strcmp(what, "soft_limit_above_ms") == 0) {
        uint64_t ms = st.soft_above_ns / 1000000u;
        return read_only(c, &ms, sizeof(ms));
    }
    static const struct {
        const char *name;
        size_t off;
        bool u64;
    } fields[] = {
        {"charged", offsetof(memlimit_stats_t, charged), false},
        {"peak", offsetof(memlimit_stats_t, peak), false},
        {"limit", offsetof(memlimit_stats_t, limit), false},
        {"soft_limit", offsetof(memlimit_stats_t, soft_limit), false},
        {"limit_refusals", offsetof(memlimit_stats_t, refusals), true},
        {"limit_reclaims", offsetof(memlimit_stats_t, reclaims), true},
        {"limit_failures", offsetof(memlimit_stats_t, failures), true},
        {"soft_limit_passes", offsetof(memlimit_stats_t, soft_passes), true},
    };
    for (unsigned i = 0; i < ARRAY_LEN(fields); i++)
        if (strcmp(what, fields[i].name) == 0)
            return read_only(c, (const char *)&st + fields[i].off, fields[i].u64 ? sizeof(uint64_t) : sizeof(size_t));
    return ENOENT;
}

/* ---- stats.* ----------------------------------------------------------- */

enum field_kind { F_U32, F_U64, F_SIZE, F_I64_AS_SSIZE };
typedef struct field {
    size_t offset;
    enum field_kind kind;
} field_t;

#define FIELD(type, member, kind) (&(const field_t){offsetof(type, member), kind})

static int read_field(const ctl_call_t *c, const void *base, const field_t *f)
{
    const char *p = (const char *)base + f->offset;
    switch (f->kind) {
    case F_U32: {
        unsigned v = *(const uint32_t *)p;
        return read_only(c, &v, sizeof(v));
    }
    case F_U64: return read_only(c, p, sizeof(uint64_t));
    case F_SIZE: return read_only(c, p, sizeof(size_t));
    default: {
        ssize_t v = (ssize_t) * (const int64_t *)p;
        return read_only(c, &v, sizeof(v));
    }
    }
}

/* ---- MALLCTL_ARENAS_ALL (CTL_ARENAS_ALL): every arena at once --------- */

/* The snapshot object of depth (1 arena, 2 bin idx1, 3 large class idx1)
 * in arena snapshot a, or NULL if idx1 is out of range. */
static const void *snap_object(const arena_snap_t *a, int depth, size_t idx1)
{
    if (depth == 2)
        return idx1 < NSMALL ? (const void *)&a->bins[idx1] : NULL;
    if (depth == 3)
        return idx1 < NLARGE_STATS ? (const void *)&a->large[idx1] : NULL;
    return a;
}

/* A field merged over every arena of the snapshot: the sum, the largest
 * of the longest lock waits, and for the decay times the automatic
 * arenas' setting (they are per arena, not amounts). */
static int read_merged(const ctl_call_t *c, const stats_snap_t *s, int depth, const field_t *f)
{
    if (depth == 1 && (f->offset == offsetof(arena_snap_t, dirty_decay_ms) ||
                       f->offset == offsetof(arena_snap_t, muzzy_decay_ms))) {
        ssize_t v = (ssize_t)(f->offset == offsetof(arena_snap_t, dirty_decay_ms) ? opt.dirty_decay_ms
                                                                                  : opt.muzzy_decay_ms);
        return read_only(c, &v, sizeof(v));
    }
    bool max = depth == 1 && (f->offset == offsetof(arena_snap_t, arena_lock.wait_ns_max) ||
                              f->offset == offsetof(arena_snap_t, bins_locks.wait_ns_max));
    uint64_t v = 0;
    for (unsigned i = 0; i < s->narenas; i++) {
        if (!s->arenas[i].exists)
            continue;
        const char *p = (const char *)snap_object(&s->arenas[i], depth, c->idx[1]);
        if (p == NULL)
            return ENOENT;
        p += f->offset;
        uint64_t x = f->kind == F_U32 ? *(const uint32_t *)p : f->kind == F_U64 ? *(const uint64_t *)p : *(const size_t *)p;
        v = max ? (x > v ? x : v) : v + x;
    }
    if (f->kind == F_U32) {
        unsigned u = (unsigned)v;
        return read_only(c, &u, sizeof(u));
    }
    if (f->kind == F_SIZE) {
        size_t z = (size_t)v;
        return read_only(c, &z, sizeof(z));
    }
    return read_only(c, &v, sizeof(v));
}

/* Resolves the snapshot object the name's indices point at. */
static int h_stat(const ctl_call_t *c, const void *arg, int depth)
{
    if (depth >= 1 && c->idx[0] == CTL_ARENAS_ALL) {
        stats_lock();
        int err = read_merged(c, stats_current(), depth, arg);
        stats_unlock();
        return err;
    }
    stats_lock();
    const stats_snap_t *s = stats_current();
    const void *base = s;
    int err = 0;
    if (depth >= 1) {
        if (c->idx[0] >= s->narenas || !s->arenas[c->idx[0]].exists)
            err = ENOENT;
        else
            base = &s->arenas[c->idx[0]];
    }
    if (err == 0 && depth == 2)
        base = c->idx[1] < NSMALL ? (const void *)&((const arena_snap_t *)base)->bins[c->idx[1]] : NULL;
    if (err == 0 && depth == 3)
        base = c->idx[1] < NLARGE_STATS ? (const void *)&((const arena_snap_t *)base)->large[c->idx[1]] : NULL;
    if (err == 0 && base == NULL)
        err = ENOENT;
    if (err == 0)
        err = read_field(c, base, arg);
    stats_unlock();
    return err;
}

static int h_stat_global(const ctl_call_t *c, const void *arg) { return h_stat(c, arg, 0); }
static int h_stat_arena(const ctl_call_t *c, const void *arg) { return h_stat(c, arg, 1); }
static int h_stat_bin(const ctl_call_t *c, const void *arg) { return h_stat(c, arg, 2); }
static int h_stat_large(const ctl_call_t *c, const void *arg) { return h_stat(c, arg, 3); }

static int h_stat_lextent_cur(const ctl_call_t *c, const void *arg)
{
    (void)arg;
    stats_lock();
    const stats_snap_t *s = stats_current();
    int err = ENOENT;
    if (c->idx[0] == CTL_ARENAS_ALL && c->idx[1] < NLARGE_STATS) {
        size_t cur = 0;
        for (unsigned i = 0; i < s->narenas; i++)
            if (s->arenas[i].exists)
                cur += (size_t)(s->arenas[i].large[c->idx[1]].nmalloc - s->arenas[i].large[c->idx[1]].nfree);
        err = read_only(c, &cur, sizeof(cur));
    } else if (c->idx[0] < s->narenas && s->arenas[c->idx[0]].exists && c->idx[1] < NLARGE_STATS) {
        const large_snap_t *l = &s->arenas[c->idx[0]].large[c->idx[1]];
        size_t cur = (size_t)(l->nmalloc - l->nfree);
        err = read_only(c, &cur, sizeof(cur));
    }
    stats_unlock();
    return err;
}

/* ---- opt.* ------------------------------------------------------------- */

static int h_opt(const ctl_call_t *c, const void *arg)
{
    const opt_desc_t *d = arg;
    switch (d->type) {
    case OPT_BOOL: return read_only(c, d->value, sizeof(bool));
    case OPT_UNSIGNED: return read_only(c, d->value, sizeof(unsigned));
    case OPT_SIZE: return read_only(c, d->value, sizeof(size_t));
    case OPT_SSIZE: {
        ssize_t v = (ssize_t) * (const int64_t *)d->value;
        return read_only(c, &v, sizeof(v));
    }
    default: {
        const char *v = d->value;
        return read_only(c, &v, sizeof(v));
    }
    }
}

/* ---- the table --------------------------------------------------------- */

#define CTYPE_F_U32 "unsigned"
#define CTYPE_F_U64 "uint64_t"
#define CTYPE_F_SIZE "size_t"
#define CTYPE_F_I64_AS_SSIZE "ssize_t"
#define ARENA_STAT(name, member, kind) \
    {"stats.arenas.#." name, CTYPE_##kind, "r-", h_stat_arena, FIELD(arena_snap_t, member, kind)}
#define BIN_STAT(name, member, kind) \
    {"stats.arenas.#.bins.#." name, CTYPE_##kind, "r-", h_stat_bin, FIELD(bin_snap_t, member, kind)}

static const ctl_node_t fixed_nodes[] = {
    {"version", "const char *", "r-", h_version, NULL},
    {"epoch", "uint64_t", "rw", h_epoch, NULL},
    {"background_thread", "bool", "rw", h_background, NULL},
    {"prof.dump", "const char *", "-w", h_prof_dump, NULL},
    {"prof.active", "bool", "rw", h_prof_active, NULL},
    {"prof.lg_sample", "size_t", "r-", h_prof_lg_sample, NULL},
    {"prof.prefix", "const char *", "-w", h_prof_prefix, NULL},
    {"stats.prof.samples_total", "uint64_t", "r-", h_prof_samples, NULL},
    {"stats.prof.samples_live", "uint64_t", "r-", h_prof_samples, "live"},
    {"stats.prof.samples_dropped", "uint64_t", "r-", h_prof_samples, "dropped"},
    {"arenas.narenas", "unsigned", "r-", h_narenas, NULL},
    {"arenas.nnodes", "unsigned", "r-", h_nnodes, NULL},
    {"arenas.node.#.arena", "unsigned", "r-", h_node, "arena"},
    {"arenas.node.#.ncpus", "unsigned", "r-", h_node, "ncpus"},
    {"arenas.node.#.mapped", "size_t", "r-", h_node, "mapped"},
    {"arenas.node.#.active", "size_t", "r-", h_node, "active"},
    {"arenas.node.#.resident", "size_t", "r-", h_node, "resident"},
    {"arenas.node.#.reserved", "size_t", "r-", h_node, "reserved"},
    {"arenas.create", "unsigned", "rw", h_arenas_create, NULL},
    {"arenas.lookup", "unsigned", "rw", h_arenas_lookup, NULL},
    {"arenas.page", "size_t", "r-", h_const_size, &page_size},
    {"arenas.quantum", "size_t", "r-", h_const_size, &quantum},
    {"arenas.nbins", "unsigned", "r-", h_const_unsigned, &nbins_small},
    {"arenas.nlextents", "unsigned", "r-", h_const_unsigned, &nlextents},
    {"arenas.bin.#.size", "size_t", "r-", h_bin_info, "size"},
    {"arenas.bin.#.nregs", "uint32_t", "r-", h_bin_info, "nregs"},
    {"arenas.bin.#.slab_size", "size_t", "r-", h_bin_info, "slab_size"},
    {"arenas.lextent.#.size", "size_t", "r-", h_lextent_size, NULL},
    {"thread.arena", "unsigned", "rw", h_thread_arena, NULL},
    {"thread.tcache.flush", "void", "--", h_tcache_flush, NULL},
    {"thread.allocated", "uint64_t", "r-", h_thread_counter, "a"},
    {"thread.allocatedp", "uint64_t *", "r-", h_thread_counter, "ap"},
    {"thread.deallocated", "uint64_t", "r-", h_thread_counter, "d"},
    {"thread.deallocatedp", "uint64_t *", "r-", h_thread_counter, "dp"},
    {"thread.tcache.enabled", "bool", "rw", h_tcache_enabled, NULL},
    {"thread.tcache.ncached_max.read_sizeclass", "size_t", "rw", h_ncached_read, NULL},
    {"thread.tcache.ncached_max.write", "const char *", "-w", h_ncached_write, NULL},
    {"arena.#.purge", "void", "--", h_arena_purge, NULL},
    {"arena.#.decay", "void", "--", h_arena_purge, "decay"},
    {"arena.#.reset", "void", "--", h_arena_reset, NULL},
    {"arena.#.destroy", "void", "--", h_arena_reset, "destroy"},
    {"arena.#.dirty_decay_ms", "ssize_t", "rw", h_arena_decay_ms, NULL},
    {"arena.#.muzzy_decay_ms", "ssize_t", "rw", h_arena_decay_ms, "muzzy"},
    {"arena.#.name", "const char *", "r-", h_arena_name, NULL},
    {"debug.check_heap", "unsigned", "r-", h_check_heap, NULL},
    {"stats.allocated", "size_t", "r-", h_stat_global, FIELD(stats_snap_t, allocated, F_SIZE)},
    {"stats.active", "size_t", "r-", h_stat_global, FIELD(stats_snap_t, active, F_SIZE)},
    {"stats.resident", "size_t", "r-", h_stat_global, FIELD(stats_snap_t, resident, F_SIZE)},
    {"stats.mapped", "size_t", "r-", h_stat_global, FIELD(stats_snap_t, mapped, F_SIZE)},
    {"stats.retained", "size_t", "r-", h_stat_global, FIELD(stats_snap_t, retained, F_SIZE)},
    {"stats.reserved", "size_t", "r-", h_stat_global, FIELD(stats_snap_t, reserved, F_SIZE)},
    {"stats.metadata", "size_t", "r-", h_stat_global, FIELD(stats_snap_t, metadata, F_SIZE)},
    {"stats.tcache_bytes", "size_t", "r-", h_stat_global, FIELD(stats_snap_t, tcache_bytes, F_SIZE)},
    {"stats.cpu_cache_bytes", "size_t", "r-", h_stat_global, FIELD(stats_snap_t, cpu_cache_bytes, F_SIZE)},
    {"stats.transfer_bytes", "size_t", "r-", h_stat_global, FIELD(stats_snap_t, transfer_bytes, F_SIZE)},
    {"stats.large_cache_bytes", "size_t", "r-", h_stat_global, FIELD(stats_snap_t, large_cache_bytes, F_SIZE)},
    {"stats.guarded.total", "size_t", "r-", h_stat_global, FIELD(stats_snap_t, guarded_total, F_SIZE)},
    {"stats.guarded.live", "size_t", "r-", h_stat_global, FIELD(stats_snap_t, guarded_live, F_SIZE)},
    {"stats.front_end", "const char *", "r-", h_front_end, NULL},
    {"memory.limit", "size_t", "rw", h_memory_limit, NULL},
    {"memory.soft_limit", "size_t", "rw", h_memory_limit, "soft"},
    {"memory.peak_reset", "void", "--", h_memory_peak_reset, NULL},
    {"stats.memory.charged", "size_t", "r-", h_memory_stat, "charged"},
    {"stats.memory.peak", "size_t", "r-", h_memory_stat, "peak"},
    {"stats.memory.limit", "size_t", "r-", h_memory_stat, "limit"},
    {"stats.memory.soft_limit", "size_t", "r-", h_memory_stat, "soft_limit"},
    {"stats.memory.limit_refusals", "uint64_t", "r-", h_memory_stat, "limit_refusals"},
    {"stats.memory.limit_reclaims", "uint64_t", "r-", h_memory_stat, "limit_reclaims"},
    {"stats.memory.limit_failures", "uint64_t", "r-", h_memory_stat, "limit_failures"},
    {"stats.memory.soft_limit_passes", "uint64_t", "r-", h_memory_stat, "soft_limit_passes"},
    {"stats.memory.soft_limit_above_ms", "uint64_t", "r-", h_memory_stat, "soft_limit_above_ms"},
    {"stats.memory.above_soft_limit", "bool", "r-", h_memory_stat, "above_soft_limit"},
    ARENA_STAT("nthreads", nthreads, F_U32),
    ARENA_STAT("dirty_decay_ms", dirty_decay_ms, F_I64_AS_SSIZE),
    ARENA_STAT("muzzy_decay_ms", muzzy_decay_ms, F_I64_AS_SSIZE),
    ARENA_STAT("pactive", active_pages, F_SIZE),
    ARENA_STAT("pdirty", dirty_pages, F_SIZE),
    ARENA_STAT("pmuzzy", muzzy_pages, F_SIZE),
    ARENA_STAT("pclean", clean_pages, F_SIZE),
    ARENA_STAT("mapped", mapped, F_SIZE),
    ARENA_STAT("small.allocated", small_allocated, F_SIZE),
    ARENA_STAT("small.nmalloc", nmalloc_small, F_U64),
    ARENA_STAT("small.ndalloc", nfree_small, F_U64),
    ARENA_STAT("large.allocated", large_allocated, F_SIZE),
    ARENA_STAT("large.nmalloc", nmalloc_large, F_U64),
    ARENA_STAT("large.ndalloc", nfree_large, F_U64),
    ARENA_STAT("tcache_bytes", tcache_bytes, F_SIZE),
    ARENA_STAT("npurge", npurge_passes, F_U64),
    ARENA_STAT("purged", npurged_now, F_U64),
    ARENA_STAT("purged_lazy", npurged_lazy, F_U64),
    ARENA_STAT("searches", nsearches, F_U64),
    ARENA_STAT("search_hits", nsearch_hits, F_U64),
    ARENA_STAT("search_candidates", ncandidates, F_U64),
    ARENA_STAT("mutexes.arena.num_ops", arena_lock.n_acquired, F_U64),
    ARENA_STAT("mutexes.arena.num_wait", arena_lock.n_contended, F_U64),
    ARENA_STAT("mutexes.arena.total_wait_time", arena_lock.wait_ns_total, F_U64),
    ARENA_STAT("mutexes.arena.max_wait_time", arena_lock.wait_ns_max, F_U64),
    ARENA_STAT("mutexes.bins.num_ops", bins_locks.n_acquired, F_U64),
    ARENA_STAT("mutexes.bins.num_wait", bins_locks.n_contended, F_U64),
    ARENA_STAT("mutexes.bins.total_wait_time", bins_locks.wait_ns_total, F_U64),
    ARENA_STAT("mutexes.bins.max_wait_time", bins_locks.wait_ns_max, F_U64),
    BIN_STAT("nmalloc", nmalloc, F_U64),
    BIN_STAT("ndalloc", nfree, F_U64),
    BIN_STAT("nrequests", nrequests, F_U64),
    BIN_STAT("curregs", curobjs, F_SIZE),
    BIN_STAT("curslabs", curslabs, F_SIZE),
    BIN_STAT("nslabs", nslabs, F_U64),
    BIN_STAT("nfills", nfills, F_U64),
    BIN_STAT("nflushes", nflushes, F_U64),
    BIN_STAT("tcache_misses", tc_misses, F_U64),
    BIN_STAT("mutex.num_ops", lock.n_acquired, F_U64),
    BIN_STAT("mutex.num_wait", lock.n_contended, F_U64),
    BIN_STAT("mutex.total_wait_time", lock.wait_ns_total, F_U64),
    {"stats.arenas.#.lextents.#.nmalloc", "uint64_t", "r-", h_stat_large, FIELD(large_snap_t, nmalloc, F_U64)},
    {"stats.arenas.#.lextents.#.ndalloc", "uint64_t", "r-", h_stat_large, FIELD(large_snap_t, nfree, F_U64)},
    {"stats.arenas.#.lextents.#.curlextents", "size_t", "r-", h_stat_lextent_cur, NULL},
    {"config.debug", "bool", "r-", h_config_bool, &config_debug},
    {"config.fill", "bool", "r-", h_config_bool, &config_true},
    {"config.lazy_lock", "bool", "r-", h_config_bool, &config_false},
    {"config.malloc_conf", "const char *", "r-", h_config_malloc_conf, NULL},
    {"config.prof", "bool", "r-", h_config_prof, NULL},
    {"config.prof_libgcc", "bool", "r-", h_config_prof, NULL},   /* backtrace(3): libgcc's unwinder */
    {"config.prof_libunwind", "bool", "r-", h_config_bool, &config_false},
    {"config.stats", "bool", "r-", h_config_bool, &config_true},
    {"config.utrace", "bool", "r-", h_config_bool, &config_false},
    {"config.xmalloc", "bool", "r-", h_config_bool, &config_false},
};

#define MAX_OPT_NODES 64
static ctl_node_t opt_nodes[MAX_OPT_NODES];
static char opt_names[MAX_OPT_NODES][48];
static pthread_once_t opt_nodes_once = PTHREAD_ONCE_INIT;

static const char *opt_type_name(opt_type_t t)
{
    static const char *const names[] = {"bool", "unsigned", "size_t", "ssize_t", "const char *"};
    return names[t];
}

static void build_opt_nodes(void)
{
    for (unsigned i = 0; i < opt_table_len && i < MAX_OPT_NODES; i++) {
        snprintf(opt_names[i], sizeof(opt_names[i]), "opt.%s", opt_table[i].name);
        opt_nodes[i] = (ctl_node_t){opt_names[i], opt_type_name(opt_table[i].type), "r-", h_opt, &opt_table[i]};
    }
}

unsigned ctl_node_count(void)
{
    pthread_once(&opt_nodes_once, build_opt_nodes);
    return (unsigned)ARRAY_LEN(fixed_nodes) + (opt_table_len < MAX_OPT_NODES ? opt_table_len : MAX_OPT_NODES);
}

const ctl_node_t *ctl_node_at(unsigned i)
{
    pthread_once(&opt_nodes_once, build_opt_nodes);
    return i < ARRAY_LEN(fixed_nodes) ? &fixed_nodes[i] : &opt_nodes[i - ARRAY_LEN(fixed_nodes)];
}

/* Matches name against pattern, collecting the numbers at '#'. */
static bool name_matches(const char *pattern, const char *name, size_t *idx)
{
    unsigned k = 0;
    while (*pattern != '\0' && *name != '\0') {
        if (*pattern == '#') {
            size_t v = 0;
            int digits = 0;
            while (*name >= '0' && *name <= '9' && digits < 10) {
                v = v * 10 + (size_t)(*name++ - '0');
                digits++;
            }
            if (digits == 0 || (*name >= '0' && *name <= '9') || k >= CTL_MAX_INDICES)
                return false;
            idx[k++] = v;
            pattern++;
        } else if (*pattern++ != *name++) {
            return false;
        }
    }
    return *pattern == '\0' && *name == '\0';
}

DPM_EXPORT int dpm_ctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen)
{
    if (name == NULL)
        return EINVAL;
    if (!dpm_ready())
        return EAGAIN;
    ctl_call_t call = {.oldp = oldp, .oldlenp = oldlenp, .newp = newp, .newlen = newlen};
    unsigned n = ctl_node_count();
    for (unsigned i = 0; i < n; i++) {
        const ctl_node_t *node = ctl_node_at(i);
        if (name_matches(node->pattern, name, call.idx))
            return node->handler(&call, node->arg);
    }
    return ENOENT;
}
