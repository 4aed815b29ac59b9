/*
 * tunnels.c - the VPP case of seed 002: 2 M GTP-U tunnels, each a tunnel
 * record plus a `rewrite` vector of 44-104 bytes whose data starts a
 * cache line 4 bytes into the block (align 64 at offset 4), plus 2 M route
 * entries. Reports clocks per allocation and per free, as VPP's
 * "show memory verbose" did, and resident memory over requested bytes.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpmbench.h"

#define TUNNEL_BYTES 120
#define ROUTE_BYTES 56
#define REWRITE_ALIGN 64
#define REWRITE_OFFSET 4

#if defined(__x86_64__) || defined(__i386__)
#define CLOCK_UNIT "cycles/call"
static double per_call(uint64_t t, long calls) { return (double)t / (double)calls; }
#else
#define CLOCK_UNIT "ns/call"
static double per_call(uint64_t t, long calls) { return ticks_to_ns(t) / (double)calls; }
#endif

struct tunnel_set {
    long n;
    void **tunnel, **rewrite, **route;
    uint32_t *rewrite_bytes;
    uint32_t *free_order;
};

struct tunnel_result {
    uint64_t alloc_ticks, alloc_at_ticks, free_ticks, free_at_ticks;
    double requested, rss_growth;
};

/* Arrays are touched before the baseline RSS is read, so that only the
 * allocator's pages count as growth. */
static void *touched_array(long n, size_t elem)
{
    void *a = malloc((size_t)n * elem);
    if (!a)
        fail("out of memory for tunnel arrays");
    memset(a, 0, (size_t)n * elem);
    return a;
}

static void tunnel_set_init(struct tunnel_set *s, long n)
{
    uint64_t rng = 42;
    s->n = n;
    s->tunnel = touched_array(n, sizeof(void *));
    s->rewrite = touched_array(n, sizeof(void *));
    s->route = touched_array(n, sizeof(void *));
    s->rewrite_bytes = touched_array(n, sizeof(uint32_t));
    s->free_order = touched_array(n, sizeof(uint32_t));
    for (long i = 0; i < n; i++) {
        s->rewrite_bytes[i] = 44 + 4 * (uint32_t)(rng_next(&rng) % 16);
        s->free_order[i] = (uint32_t)i;
    }
    for (long i = n - 1; i > 0; i--) {
        long j = (long)(rng_next(&rng) % (uint64_t)(i + 1));
        uint32_t t = s->free_order[i];
        s->free_order[i] = s->free_order[j];
        s->free_order[j] = t;
    }
}

static void tunnel_set_release(struct tunnel_set *s)
{
    free(s->tunnel);
    free(s->rewrite);
    free(s->route);
    free(s->rewrite_bytes);
    free(s->free_order);
}

static void create_tunnels(const struct backend *be, struct tunnel_set *s,
                           struct tunnel_result *res)
{
    for (long i = 0; i < s->n; i++) {
        uint32_t rw = s->rewrite_bytes[i];
        uint64_t t0 = ticks();
        s->tunnel[i] = be->alloc(TUNNEL_BYTES);
        uint64_t t1 = ticks();
        s->rewrite[i] = be->alloc_aligned_at(rw, REWRITE_ALIGN, REWRITE_OFFSET);
        uint64_t t2 = ticks();
        s->route[i] = be->alloc(ROUTE_BYTES);
        uint64_t t3 = ticks();
        res->alloc_ticks += ticks_between(t0, t1) + ticks_between(t2, t3);
        res->alloc_at_ticks += ticks_between(t1, t2);
        must_alloc(s->tunnel[i], TUNNEL_BYTES, 16, 0);
        must_alloc(s->rewrite[i], rw, REWRITE_ALIGN, REWRITE_OFFSET);
        must_alloc(s->route[i], ROUTE_BYTES, 8, 0);
        stamp_block(s->tunnel[i], TUNNEL_BYTES, (uint64_t)i);
        stamp_block(s->rewrite[i], rw, (uint64_t)i);
        stamp_block(s->route[i], ROUTE_BYTES, (uint64_t)i);
        res->requested += TUNNEL_BYTES + ROUTE_BYTES + rw;
    }
}

static void delete_tunnels(const struct backend *be, struct tunnel_set *s,
                           struct tunnel_result *res)
{
    for (long i = 0; i < s->n; i++) {
        uint32_t k = s->free_order[i];
        check_stamp(s->tunnel[k], TUNNEL_BYTES, k, "tunnels");
        check_stamp(s->rewrite[k], s->rewrite_bytes[k], k, "tunnels (rewrite)");
        check_stamp(s->route[k], ROUTE_BYTES, k, "tunnels (route)");
        uint64_t t0 = ticks();
        be->free_aligned_at(s->rewrite[k], REWRITE_ALIGN, REWRITE_OFFSET);
        uint64_t t1 = ticks();
        be->free_sized(s->tunnel[k], TUNNEL_BYTES);
        be->free_sized(s->route[k], ROUTE_BYTES);
        uint64_t t2 = ticks();
        res->free_ticks += ticks_between(t0, t2);
        res->free_at_ticks += ticks_between(t0, t1);
    }
}

/* RSS growth is measured from the RSS before the first round, so memory an
 * allocator kept from an earlier round still counts. */
static struct tunnel_result tunnels_once(struct bench_ctx *ctx, struct tunnel_set *s,
                                         long baseline_kb)
{
    struct tunnel_result res = {0};
    create_tunnels(ctx->be, s, &res);
    res.rss_growth = (double)(rss_kb("VmRSS") - baseline_kb) * 1024;
    delete_tunnels(ctx->be, s, &res);
    return res;
}

int run_tunnels(struct bench_ctx *ctx)
{
    long n = scaled(ctx, 2000000, 200000, 2000);
    struct tunnel_set set;
    struct samples alloc = {0}, alloc_at = {0}, frees = {0}, frees_at = {0}, rss = {0};
    double requested = 0;
    tunnel_set_init(&set, n);
    long baseline_kb = rss_kb("VmRSS");
    if (ctx->be->note_aligned_at)
        emit_note(ctx, "%s", ctx->be->note_aligned_at);
    if (ctx->be->note_free_sized)
        emit_note(ctx, "%s", ctx->be->note_free_sized);
    emit_workload_note(ctx, "tunnels: %ld tunnels + %ld routes; rewrite vectors 44-104 B at align 64 "
                   "offset 4", n, n);
    while (another_round(ctx)) {
        struct tunnel_result res = tunnels_once(ctx, &set, baseline_kb);
        samples_add(&alloc, per_call(res.alloc_ticks, 2 * n));
        samples_add(&alloc_at, per_call(res.alloc_at_ticks, n));
        samples_add(&frees, per_call(res.free_ticks, 3 * n));
        samples_add(&frees_at, per_call(res.free_at_ticks, n));
        samples_add(&rss, res.rss_growth / res.requested);
        requested = res.requested;
    }
    emit_metric(ctx, "tunnel+route", "alloc", CLOCK_UNIT, 'L', &alloc);
    emit_metric(ctx, "rewrite 64@4", "alloc", CLOCK_UNIT, 'L', &alloc_at);
    emit_metric(ctx, "all", "free", CLOCK_UNIT, 'L', &frees);
    /* the rewrite vectors' own frees (issue 19: phased blocks cached on free) */
    emit_metric(ctx, "rewrite 64@4", "free", CLOCK_UNIT, 'L', &frees_at);
    emit_metric(ctx, "all", "RSS/requested", "ratio", '-', &rss);
    emit_value(ctx, "all", "requested", "MiB", '-', requested / (1 << 20));
    tunnel_set_release(&set);
    return 0;
}
