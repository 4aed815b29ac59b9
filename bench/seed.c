/*
 * seed.c - seed 000's two tables, laid out as the report laid them out, for
 * DPDK rte_malloc, dpmalloc's rte_ layer (dpm-rte) and dpmalloc native:
 *   seed          single thread, per size (64 B ... 512 KiB, the report's
 *                 list) and alignment (64, 4096), with single.c's loops:
 *                 bulk (1000 allocs, a memset each outside the timing, then
 *                 1000 frees: ns per alloc, per free),
 *                 no-bulk (alloc, memset, 5 us wait, free: ns per
 *                 alloc+free), realloc (alloc s, realloc 2s, realloc 4s,
 *                 free, memset after each: ns per iteration);
 *   seed-threads  T threads, each N x alloc(4096, 4096) with a 5 us wait
 *                 between, then N frees: us per thread for the N allocs
 *                 (waits excluded) and ns per free, N = 64 ... 4096, with
 *                 T = the CPUs of the run and T = 16 (the report's count;
 *                 oversubscribed when there are fewer CPUs).
 * Blocks are checked (alignment, contents) outside the timed spans.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "dpmbench.h"

static const size_t sizes[] = {64, 128, 512, 1024, 3072, 4096, 8192, 16384, 32768, 131072, 524288};
static const size_t aligns[] = {64, 4096};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
enum { BULK_ALLOC, BULK_FREE, NOBULK, REALLOC, NMETRICS };
static const char *const metric_names[NMETRICS] = {"bulk alloc", "bulk free", "no-bulk", "realloc"};
static const char *const metric_units[NMETRICS] = {"ns/call", "ns/call", "ns/iter", "ns/iter"};

int run_seed_single(struct bench_ctx *ctx)
{
    int n_bulk = scaled(ctx, 1000, 1000, 20), n_nobulk = scaled(ctx, 10000, 1000, 20);
    int n_realloc = scaled(ctx, 1000, 300, 10);
    void **blocks = calloc((size_t)n_bulk, sizeof *blocks);
    struct samples (*s)[COUNT(sizes)][NMETRICS] = calloc(COUNT(aligns), sizeof *s);
    if (!blocks || !s)
        fail("out of memory");
    emit_workload_note(ctx, "seed: %d blocks per bulk case, %d no-bulk and %d realloc iterations "
                            "per case (the report: 1000, 10000, 1000)", n_bulk, n_nobulk, n_realloc);
    while (another_round(ctx)) {
        for (size_t a = 0; a < COUNT(aligns); a++)
            for (size_t z = 0; z < COUNT(sizes); z++) {
                bulk_one(ctx->be, sizes[z], aligns[a], n_bulk, blocks, &s[a][z][BULK_ALLOC],
                         &s[a][z][BULK_FREE]);
                samples_add(&s[a][z][NOBULK], nobulk_one(ctx->be, sizes[z], aligns[a], n_nobulk));
                samples_add(&s[a][z][REALLOC], realloc_one(ctx->be, sizes[z], aligns[a], n_realloc));
            }
    }
    for (size_t a = 0; a < COUNT(aligns); a++)
        for (size_t z = 0; z < COUNT(sizes); z++) {
            char name[32];
            snprintf(name, sizeof name, "%zu align %zu", sizes[z], aligns[a]);
            for (int m = 0; m < NMETRICS; m++)
                emit_metric(ctx, name, metric_names[m], metric_units[m], 'L', &s[a][z][m]);
        }
    free(s);
    free(blocks);
    return 0;
}

/* ---- the 16-thread table ------------------------------------------------- */

struct seed_thread {
    struct member m;
    const struct backend *be;
    int n;
    double alloc_us, free_ns;
};

static void seed_thread_body(struct member *m)
{
    struct seed_thread *a = (struct seed_thread *)m;
    void **blocks = calloc((size_t)a->n, sizeof *blocks);
    uint64_t delay = ns_to_ticks(5000), spent = 0;
    if (!blocks)
        fail("out of memory");
    for (int i = 0; i < a->n; i++) {
        uint64_t t0 = ticks();
        blocks[i] = a->be->alloc_aligned(4096, 4096);
        spent += ticks_between(t0, ticks());
        must_alloc(blocks[i], 4096, 4096, 0);
        stamp_block(blocks[i], 4096, (uint64_t)m->index);
        busy_wait_ticks(delay);
    }
    for (int i = 0; i < a->n; i++)
        check_stamp(blocks[i], 4096, (uint64_t)m->index, "seed-threads");
    uint64_t t2 = ticks();
    for (int i = 0; i < a->n; i++)
        a->be->free(blocks[i]);
    uint64_t t3 = ticks();
    a->alloc_us = ticks_to_ns(spent) / 1000;
    a->free_ns = ticks_to_ns(t3 - t2) / a->n;
    free(blocks);
}

int run_seed_threads(struct bench_ctx *ctx)
{
    static const int ns[] = {64, 128, 256, 512, 1024, 2048, 4096};
    enum { NN = COUNT(ns) };
    int teams[2] = {ctx->threads, 16}, nteams = ctx->threads == 16 ? 1 : 2;
    /* rte_malloc's 4 KiB-aligned search grows with the heap (the seed's
     * finding): 16 x 4096 blocks cost it seconds per round */
    int max_n = ctx->mode == MODE_SMOKE ? 128 : ctx->mode == MODE_QUICK ? 1024 : 4096;
    struct seed_thread *args = calloc(16 > ctx->threads ? 16 : (size_t)ctx->threads, sizeof *args);
    struct samples alloc_us[2][NN] = {{{0}}}, free_ns[2][NN] = {{{0}}};
    if (!args)
        fail("out of memory");
    emit_workload_note(ctx, "seed-threads: %d threads = the CPUs of this run (pinned one per CPU); "
                            "16 threads = the report's count%s; N up to %d in this mode (%d "
                            "oversubscribed)",
                       ctx->threads, ctx->threads < 16 ? ", oversubscribed (pinned round-robin)" : "",
                       max_n, ctx->mode == MODE_QUICK && 16 > ctx->threads ? 256 : max_n);
    /* oversubscribed, rte_malloc's spinlock is often held by a preempted
     * thread: seconds per thread from N = 512 on */
    int max_n_team[2] = {max_n, ctx->mode == MODE_QUICK && 16 > ctx->threads ? 256 : max_n};
    while (another_round(ctx)) {
        for (int t = 0; t < nteams; t++)
            for (int k = 0; k < NN && ns[k] <= max_n_team[t]; k++) {
                for (int i = 0; i < teams[t]; i++)
                    args[i] = (struct seed_thread){.be = ctx->be, .n = ns[k]};
                run_team(&(struct thread_team){teams[t], seed_thread_body, args, sizeof *args});
                for (int i = 0; i < teams[t]; i++) {
                    samples_add(&alloc_us[t][k], args[i].alloc_us);
                    samples_add(&free_ns[t][k], args[i].free_ns);
                }
            }
    }
    for (int t = 0; t < nteams; t++)
        for (int k = 0; k < NN && ns[k] <= max_n_team[t]; k++) {
            char name[40];
            snprintf(name, sizeof name, "%d threads%s N=%d", teams[t],
                     teams[t] > ctx->threads ? " (oversub.)" : "", ns[k]);
            emit_metric(ctx, name, "N allocs", "us/thread", 'L', &alloc_us[t][k]);
            emit_metric(ctx, name, "free", "ns/call", 'L', &free_ns[t][k]);
        }
    free(args);
    return 0;
}
