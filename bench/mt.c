/*
 * mt.c - the two multi-threaded workloads from the seeds:
 *   threads   one pinned thread per core, each N x alloc(4096, align 4096)
 *             with a 5 us busy wait between, then N frees; time per thread
 *             for N = 64 ... 4096 (the DPDK 16-thread table, seed 000);
 *   counters  per-thread 24-byte counters packed in one array (cores share
 *             lines, seed 001) vs padded to a cache line vs one allocator
 *             block per thread (does the allocator keep threads apart?)
 *             vs a dpmalloc per-core variable (dpm_pcv_this; dpmalloc's
 *             column only: the peers have no such facility).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpmbench.h"
#include <dpmalloc/pcv.h>

/* ---- threads --------------------------------------------------------------- */

struct threads_arg {
    struct member m;
    struct bench_ctx *ctx;
    int n;
    double alloc_us, free_us;
};

static void threads_body(struct member *m)
{
    struct threads_arg *a = (struct threads_arg *)m;
    const struct backend *be = a->ctx->be;
    void **blocks = calloc((size_t)a->n, sizeof(void *));
    uint64_t delay = ns_to_ticks(5000), spent = 0;
    if (!blocks)
        fail("out of memory");
    for (int i = 0; i < a->n; i++) {
        uint64_t t0 = ticks();
        blocks[i] = be->alloc_aligned(4096, 4096);
        uint64_t t1 = ticks();
        spent += ticks_between(t0, t1);
        must_alloc(blocks[i], 4096, 4096, 0);
        stamp_block(blocks[i], 4096, (uint64_t)m->index);
        busy_wait_ticks(delay);
    }
    for (int i = 0; i < a->n; i++)
        check_stamp(blocks[i], 4096, (uint64_t)m->index, "threads");
    uint64_t t2 = ticks();
    for (int i = 0; i < a->n; i++)
        be->free(blocks[i]);
    uint64_t t3 = ticks();
    a->alloc_us = ticks_to_ns(spent) / 1000;
    a->free_us = ticks_to_ns(t3 - t2) / 1000;
    free(blocks);
}

int run_threads(struct bench_ctx *ctx)
{
    static const int ns[] = {64, 128, 256, 512, 1024, 2048, 4096};
    enum { NN = sizeof ns / sizeof ns[0] };
    int t = ctx->threads, max_n = ctx->mode == MODE_SMOKE ? 128 : 4096;
    struct threads_arg *args = calloc((size_t)t, sizeof *args);
    struct samples alloc_us[NN] = {{0}}, free_us[NN] = {{0}};
    if (!args)
        fail("out of memory");
    emit_workload_note(ctx, "threads: %d pinned threads; time per thread, 5 us waits excluded", t);
    while (another_round(ctx)) {
        for (int k = 0; k < NN && ns[k] <= max_n; k++) {
            for (int i = 0; i < t; i++)
                args[i] = (struct threads_arg){.ctx = ctx, .n = ns[k]};
            run_team(&(struct thread_team){t, threads_body, args, sizeof *args});
            for (int i = 0; i < t; i++) {
                samples_add(&alloc_us[k], args[i].alloc_us);
                samples_add(&free_us[k], args[i].free_us);
            }
        }
    }
    for (int k = 0; k < NN && ns[k] <= max_n; k++) {
        char name[32];
        snprintf(name, sizeof name, "N=%d", ns[k]);
        emit_metric(ctx, name, "alloc", "us/thread", 'L', &alloc_us[k]);
        emit_metric(ctx, name, "free", "us/thread", 'L', &free_us[k]);
    }
    free(args);
    return 0;
}

/* ---- counters -------------------------------------------------------------- */

/* The seed's per-core statistics record: 24 bytes. */
struct counter24 {
    uint64_t packets;
    uint64_t bytes;
    uint32_t lcore;
    uint16_t utilisation;
    uint16_t role;
};

/* PER_CORE_VAR takes the counter's address once, as the other rows do;
 * PER_CORE_VAR_EACH asks dpm_pcv_this for it at every increment, as code
 * that keeps only the handle does (the cost of the lookup itself). */
enum counter_layout { PACKED, PADDED, PER_THREAD_BLOCK, PER_CORE_VAR, PER_CORE_VAR_EACH };

struct counters_arg {
    struct member m;
    struct bench_ctx *ctx;
    enum counter_layout layout;
    char *shared;        /* the packed or padded array */
    dpm_pcv_t var;       /* the per-core variable */
    long iterations;
    int ok;
};

static struct counter24 *counter_for(struct counters_arg *a)
{
    switch (a->layout) {
    case PACKED:
        return (struct counter24 *)(a->shared + (size_t)a->m.index * sizeof(struct counter24));
    case PADDED:
        return (struct counter24 *)(a->shared + (size_t)a->m.index * 64);
    case PER_CORE_VAR:
    case PER_CORE_VAR_EACH:
        return must_alloc(dpm_pcv_this(a->var), 24, 8, 0);
    case PER_THREAD_BLOCK:
        break;
    }
    return must_alloc(a->ctx->be->alloc(sizeof(struct counter24)), 24, 8, 0);
}

static void counters_body(struct member *m)
{
    struct counters_arg *a = (struct counters_arg *)m;
    volatile struct counter24 *c = counter_for(a);
    c->packets = 0;
    c->bytes = 0;
    if (a->layout == PER_CORE_VAR_EACH) {
        for (long i = 0; i < a->iterations; i++) {
            volatile struct counter24 *mine = dpm_pcv_this(a->var);
            mine->packets++;
            mine->bytes += 64;
        }
    } else {
        for (long i = 0; i < a->iterations; i++) {
            c->packets++;
            c->bytes += 64;
        }
    }
    a->ok = c->packets == (uint64_t)a->iterations && c->bytes == 64 * (uint64_t)a->iterations;
    if (a->layout == PER_THREAD_BLOCK)
        a->ctx->be->free((void *)c);
}

static double counters_once(struct bench_ctx *ctx, enum counter_layout layout, long iterations)
{
    int t = ctx->threads;
    struct counters_arg *args = calloc((size_t)t, sizeof *args);
    char *shared = must_alloc(ctx->be->alloc_aligned((size_t)t * 64, 64), (size_t)t * 64, 64, 0);
    dpm_pcv_t var = DPM_PCV_INVALID;
    if (!args)
        fail("out of memory");
    if (layout >= PER_CORE_VAR && !dpm_pcv_valid(var = dpm_pcv_alloc(sizeof(struct counter24), 8)))
        fail("dpm_pcv_alloc failed");
    memset(shared, 0, (size_t)t * 64);
    for (int i = 0; i < t; i++)
        args[i] = (struct counters_arg){.ctx = ctx, .layout = layout, .shared = shared,
                                        .var = var, .iterations = iterations};
    double wall = run_team(&(struct thread_team){t, counters_body, args, sizeof *args});
    for (int i = 0; i < t; i++)
        if (!args[i].ok)
            fail("counters: thread %d lost increments", i);
    ctx->be->free(shared);
    dpm_pcv_free(var);
    free(args);
    return (double)iterations * t / wall / 1e6;
}

int run_counters(struct bench_ctx *ctx)
{
    static const char *const names[] = {"packed 24 B", "padded 64 B", "malloc(24) per thread",
                                        "per-core variable (dpm_pcv)",
                                        "per-core variable, dpm_pcv_this each time"};
    long iterations = scaled(ctx, 20000000, 4000000, 20000);
    /* dpm_pcv is dpmalloc's API, not an allocator call: its row is
     * measured once, in dpmalloc's own column */
    int last = ctx->kind == BACKEND_NATIVE_DPM ? PER_CORE_VAR_EACH : PER_THREAD_BLOCK;
    struct samples mops[5] = {{0}};
    while (another_round(ctx)) {
        for (int l = PACKED; l <= last; l++) {
            samples_add(&mops[l], counters_once(ctx, (enum counter_layout)l, iterations));
        }
    }
    for (int l = PACKED; l <= last; l++)
        emit_metric(ctx, names[l], "throughput", "Mops/s", l == PER_THREAD_BLOCK ? 'H' : '-',
                    &mops[l]);
    return 0;
}
