/*
 * contention.c - the jemalloc tuning story of seed 004: many more threads
 * than arenas, all on one arena, then each thread on an exclusive arena of
 * its own ("arenas.create" + "thread.arena"). Reports throughput for both
 * and the allocator's own lock statistics (waits, wait time) read through
 * its control interface: dpm_ctl natively or in the dpm-preload child,
 * mallctl when jemalloc is preloaded (the names and types are the same).
 * Backends without a control interface run only the shared case, with the
 * threads on whatever arenas the allocator picks.
 *
 * Sizes are log-uniform from 64 B to 256 KiB, so that part of the traffic
 * goes past the thread caches to the arena's locks, where contention lives.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dpmalloc.h>

#include "dpmbench.h"

typedef int (*ctl_fn)(const char *, void *, size_t *, void *, size_t);

enum ctl_flavour { CTL_NONE, CTL_DPM, CTL_JEMALLOC };

struct ctl {
    ctl_fn call;
    enum ctl_flavour flavour;
};

static struct ctl find_ctl(const struct bench_ctx *ctx)
{
    if (strcmp(ctx->be->name, "dpmalloc") == 0)
        return (struct ctl){dpm_ctl, CTL_DPM};
    ctl_fn f = (ctl_fn)dlsym(RTLD_DEFAULT, "dpm_ctl");
    if (f != NULL)
        return (struct ctl){f, CTL_DPM};
    f = (ctl_fn)dlsym(RTLD_DEFAULT, "mallctl");
    if (f != NULL)
        return (struct ctl){f, CTL_JEMALLOC};
    return (struct ctl){NULL, CTL_NONE};
}

static uint64_t read_u64(const struct ctl *c, const char *fmt, unsigned a, unsigned b)
{
    char name[128];
    snprintf(name, sizeof name, fmt, a, b);
    uint64_t v = 0;
    size_t len = sizeof v;
    return c->call(name, &v, &len, NULL, 0) == 0 ? v : 0;
}

/* Lock waits and wait time (ns) of arena i so far. */
static void arena_lock_waits(const struct ctl *c, unsigned i, uint64_t *waits, uint64_t *wait_ns)
{
    if (c->flavour == CTL_DPM) {
        *waits = read_u64(c, "stats.arenas.%u.mutexes.arena.num_wait", i, 0) +
                 read_u64(c, "stats.arenas.%u.mutexes.bins.num_wait", i, 0);
        *wait_ns = read_u64(c, "stats.arenas.%u.mutexes.arena.total_wait_time", i, 0) +
                   read_u64(c, "stats.arenas.%u.mutexes.bins.total_wait_time", i, 0);
        return;
    }
    unsigned nbins = 0;
    size_t len = sizeof nbins;
    c->call("arenas.nbins", &nbins, &len, NULL, 0);
    *waits = read_u64(c, "stats.arenas.%u.mutexes.large.num_wait", i, 0);
    *wait_ns = read_u64(c, "stats.arenas.%u.mutexes.large.total_wait_time", i, 0);
    for (unsigned j = 0; j < nbins; j++) {
        *waits += read_u64(c, "stats.arenas.%u.bins.%u.mutex.num_wait", i, j);
        *wait_ns += read_u64(c, "stats.arenas.%u.bins.%u.mutex.total_wait_time", i, j);
    }
}

static void refresh_stats(const struct ctl *c)
{
    uint64_t epoch = 1;
    size_t len = sizeof epoch;
    c->call("epoch", &epoch, &len, &epoch, sizeof epoch);
}

/* Lock waits summed over the arenas a round used, from fresh statistics. */
static void used_arenas_lock_waits(const struct ctl *c, const unsigned *used, int nused, uint64_t *waits,
                                   uint64_t *wait_ns)
{
    refresh_stats(c);
    for (int k = 0; k < nused; k++) {
        uint64_t a, b;
        arena_lock_waits(c, used[k], &a, &b);
        *waits += a;
        *wait_ns += b;
    }
}

#define RING 32

struct worker {
    struct member m;
    const struct backend *be;
    const struct ctl *ctl;
    unsigned arena;       /* arena to bind to */
    int bind;             /* 0: leave the allocator's choice */
    int ops;
    uint64_t seed;
};

static size_t pick_size(uint64_t *rng)
{
    uint64_t r = rng_next(rng);
    size_t base = (size_t)64 << (r % 13);   /* 64 B .. 256 KiB */
    return base + (size_t)((r >> 20) % base) / 2;
}

static void worker_body(struct member *m)
{
    struct worker *w = (struct worker *)m;
    if (w->bind)
        w->ctl->call("thread.arena", NULL, NULL, &w->arena, sizeof w->arena);
    void *ring[RING] = {0};
    size_t sizes[RING] = {0};
    uint64_t rng = w->seed;
    for (int i = 0; i < w->ops; i++) {
        int k = i % RING;
        if (ring[k] != NULL) {
            check_stamp(ring[k], sizes[k] < 64 ? sizes[k] : 64, sizes[k], "contention");
            w->be->free(ring[k]);
        }
        sizes[k] = pick_size(&rng);
        ring[k] = must_alloc(w->be->alloc(sizes[k]), sizes[k], 8, 0);
        stamp_block(ring[k], sizes[k] < 64 ? sizes[k] : 64, sizes[k]);
    }
    for (int k = 0; k < RING; k++)
        if (ring[k] != NULL)
            w->be->free(ring[k]);
}

struct phase {
    const char *name;
    int exclusive;
};

/* Exclusive arenas are made once per child and kept across rounds, as a
 * server keeps them; destroyed after the last round. */
#define MAX_EXCLUSIVE 1024
static unsigned exclusive_arena[MAX_EXCLUSIVE];
static int nexclusive;

static unsigned exclusive_arena_for(const struct ctl *c, int i)
{
    while (nexclusive <= i) {
        unsigned a = 0;
        size_t len = sizeof a;
        if (nexclusive == MAX_EXCLUSIVE || c->call("arenas.create", &a, &len, NULL, 0) != 0)
            fail("contention: arenas.create failed");
        exclusive_arena[nexclusive++] = a;
    }
    return exclusive_arena[i];
}

static void destroy_exclusive_arenas(const struct ctl *c)
{
    for (int k = 0; k < nexclusive; k++) {
        char name[64];
        snprintf(name, sizeof name, "arena.%u.destroy", exclusive_arena[k]);
        if (c->call(name, NULL, NULL, NULL, 0) != 0)
            fail("contention: %s failed", name);
    }
    nexclusive = 0;
}

/* One round of a phase: returns Mops/s and adds the lock figures of the
 * arenas used to *waits / *wait_ns. */
static double run_phase(struct bench_ctx *ctx, const struct ctl *c, int exclusive, uint64_t *waits,
                        uint64_t *wait_ns)
{
    int t = ctx->threads * 4;   /* threads >> arenas: four per CPU, one arena */
    int ops = scaled(ctx, 200000, 40000, 2000);
    struct worker *w = calloc((size_t)t, sizeof *w);
    unsigned *used = calloc((size_t)t, sizeof *used);
    int nused = 0;
    for (int i = 0; i < t; i++) {
        unsigned a = 0;
        if (c->call != NULL && exclusive)
            a = exclusive_arena_for(c, i);
        if (c->call != NULL && (exclusive || i == 0))
            used[nused++] = a;
        w[i] = (struct worker){.be = ctx->be, .ctl = c, .arena = a, .bind = c->call != NULL, .ops = ops,
                               .seed = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1)};
    }
    uint64_t w0 = 0, ns0 = 0, w1 = 0, ns1 = 0;
    if (c->call != NULL)
        used_arenas_lock_waits(c, used, nused, &w0, &ns0);
    double wall = run_team(&(struct thread_team){t, worker_body, w, sizeof *w});
    if (c->call != NULL) {
        used_arenas_lock_waits(c, used, nused, &w1, &ns1);
        *waits += w1 - w0;
        *wait_ns += ns1 - ns0;
    }
    free(used);
    free(w);
    return (double)t * ops / wall / 1e6;
}

int run_contention(struct bench_ctx *ctx)
{
    struct ctl c = find_ctl(ctx);
    static const struct phase phases[] = {{"shared arena", 0}, {"exclusive arenas", 1}};
    int nphases = c.call != NULL ? 2 : 1;
    if (c.call == NULL)
        emit_note(ctx, "no control interface: shared case only, threads on the allocator's own arenas");
    emit_workload_note(ctx, "contention: %d threads (4 per CPU), sizes 64 B-256 KiB, 32 live per thread",
                       ctx->threads * 4);
    struct samples s[2] = {{0}};
    uint64_t waits[2] = {0}, wait_ns[2] = {0};
    int rounds = 0;
    while (another_round(ctx)) {
        for (int p = 0; p < nphases; p++)
            samples_add(&s[p], run_phase(ctx, &c, phases[p].exclusive, &waits[p], &wait_ns[p]));
        rounds++;
    }
    if (c.call != NULL)
        destroy_exclusive_arenas(&c);
    for (int p = 0; p < nphases; p++) {
        emit_metric(ctx, phases[p].name, "throughput", "Mops/s", 'H', &s[p]);
        if (c.call != NULL && rounds > 0) {
            emit_value(ctx, phases[p].name, "lock waits per round", "count", '-', (double)waits[p] / rounds);
            emit_value(ctx, phases[p].name, "lock wait per round", "ms", '-', (double)wait_ns[p] / rounds / 1e6);
        }
    }
    return 0;
}
