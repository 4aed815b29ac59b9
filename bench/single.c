/*
 * single.c - the single-threaded workloads of DESIGN.md section 5, taken
 * from the DPDK fragmentation report (seeds 000/003):
 *   frag     5 batches x 2000 aligned allocations, no frees: ns per call
 *            per batch (flat is the goal);
 *   bulk     1000 allocations, memset each, free all: ns per alloc, free;
 *   nobulk   alloc, memset, 5 us busy wait, free: ns per alloc+free;
 *   realloc  alloc s, realloc 2s, realloc 4s, free (memset after each).
 * Every block is checked for alignment and contents.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "dpmbench.h"

struct size_align {
    size_t size, align;
};

static const struct size_align frag_pairs[] = {
    {64, 4096},   {1024, 4096},   {2048, 2048},   {4096, 4096},
    {4096, 64},   {8192, 8192},   {16384, 16384}, {65536, 65536},
};

static const size_t seed_sizes[] = {64,    128,    512,    1024,   3072,   4096,
                                    8192,  16384,  32768,  131072, 524288, 1048576};
static const size_t seed_aligns[] = {64, 4096};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
#define FRAG_BATCHES 5

static void **new_pointer_array(size_t n)
{
    void **a = calloc(n, sizeof(void *));
    if (!a)
        fail("out of memory for the pointer array");
    return a;
}

static void size_align_name(char *out, size_t len, size_t size, size_t align)
{
    snprintf(out, len, "%zu/%zu", size, align);
}

/* ---- frag ------------------------------------------------------------------ */

static void frag_one_pair(struct bench_ctx *ctx, struct size_align pa, int batch_len,
                          void **blocks, struct samples *per_batch)
{
    const struct backend *be = ctx->be;
    for (int b = 0; b < FRAG_BATCHES; b++) {
        void **batch = blocks + (size_t)b * (size_t)batch_len;
        uint64_t t0 = ticks();
        for (int i = 0; i < batch_len; i++)
            batch[i] = be->alloc_aligned(pa.size, pa.align);
        uint64_t t1 = ticks();
        samples_add(&per_batch[b], ticks_to_ns(t1 - t0) / batch_len);
        for (int i = 0; i < batch_len; i++) {
            must_alloc(batch[i], pa.size, pa.align, 0);
            stamp_block(batch[i], pa.size, (uint64_t)i);
        }
    }
    for (int i = 0; i < FRAG_BATCHES * batch_len; i++) {
        check_stamp(blocks[i], pa.size, (uint64_t)(i % batch_len), "frag");
        be->free(blocks[i]);
    }
}

int run_frag(struct bench_ctx *ctx)
{
    int batch_len = scaled(ctx, 2000, 2000, 50);
    void **blocks = new_pointer_array((size_t)FRAG_BATCHES * (size_t)batch_len);
    struct samples per_batch[COUNT(frag_pairs)][FRAG_BATCHES] = {{{0}}};
    while (another_round(ctx)) {
        for (size_t p = 0; p < COUNT(frag_pairs); p++)
            frag_one_pair(ctx, frag_pairs[p], batch_len, blocks, per_batch[p]);
    }
    for (size_t p = 0; p < COUNT(frag_pairs); p++)
        for (int b = 0; b < FRAG_BATCHES; b++) {
            char name[32], metric[16];
            size_align_name(name, sizeof name, frag_pairs[p].size, frag_pairs[p].align);
            snprintf(metric, sizeof metric, "batch %d", b + 1);
            emit_metric(ctx, name, metric, "ns/call", 'L', &per_batch[p][b]);
        }
    free(blocks);
    return 0;
}

/* ---- bulk ------------------------------------------------------------------ */

void bulk_one(const struct backend *be, size_t size, size_t align, int n, void **blocks,
              struct samples *alloc_ns, struct samples *free_ns)
{
    uint64_t t0 = ticks();
    for (int i = 0; i < n; i++)
        blocks[i] = be->alloc_aligned(size, align);
    uint64_t t1 = ticks();
    for (int i = 0; i < n; i++) {
        must_alloc(blocks[i], size, align, 0);
        fill_block(blocks[i], size, (uint64_t)i);
    }
    for (int i = 0; i < n; i++)
        check_fill(blocks[i], size, (uint64_t)i, "bulk");
    uint64_t t2 = ticks();
    for (int i = 0; i < n; i++)
        be->free(blocks[i]);
    uint64_t t3 = ticks();
    samples_add(alloc_ns, ticks_to_ns(t1 - t0) / n);
    samples_add(free_ns, ticks_to_ns(t3 - t2) / n);
}

/* 1000 blocks per size; quick mode caps a case at 128 MiB (128 x 1 MiB). */
static int bulk_count(const struct bench_ctx *ctx, size_t size)
{
    int n = scaled(ctx, 1000, 1000, 20);
    size_t cap = (size_t)128 << 20;
    if (ctx->mode == MODE_QUICK && (size_t)n * size > cap)
        n = (int)(cap / size);
    return n;
}

int run_bulk(struct bench_ctx *ctx)
{
    int n = scaled(ctx, 1000, 1000, 20);
    void **blocks = new_pointer_array((size_t)n);
    if (ctx->mode == MODE_QUICK)
        emit_workload_note(ctx, "bulk: quick mode caps a case at 128 MiB (fewer blocks from "
                                "256 KiB up; 1000 in --full)");
    struct samples a[COUNT(seed_aligns)][COUNT(seed_sizes)] = {{{0}}};
    struct samples f[COUNT(seed_aligns)][COUNT(seed_sizes)] = {{{0}}};
    while (another_round(ctx)) {
        for (size_t al = 0; al < COUNT(seed_aligns); al++)
            for (size_t s = 0; s < COUNT(seed_sizes); s++)
                bulk_one(ctx->be, seed_sizes[s], seed_aligns[al], bulk_count(ctx, seed_sizes[s]),
                         blocks, &a[al][s], &f[al][s]);
    }
    for (size_t al = 0; al < COUNT(seed_aligns); al++)
        for (size_t s = 0; s < COUNT(seed_sizes); s++) {
            char name[32];
            size_align_name(name, sizeof name, seed_sizes[s], seed_aligns[al]);
            emit_metric(ctx, name, "alloc", "ns/call", 'L', &a[al][s]);
            emit_metric(ctx, name, "free", "ns/call", 'L', &f[al][s]);
        }
    free(blocks);
    return 0;
}

/* ---- nobulk ---------------------------------------------------------------- */

double nobulk_one(const struct backend *be, size_t size, size_t align, int n)
{
    uint64_t delay = ns_to_ticks(5000), spent = 0;
    for (int i = 0; i < n; i++) {
        uint64_t t0 = ticks();
        void *p = be->alloc_aligned(size, align);
        uint64_t t1 = ticks();
        must_alloc(p, size, align, 0);
        fill_block(p, size, (uint64_t)i);
        busy_wait_ticks(delay);
        check_fill(p, size, (uint64_t)i, "nobulk");
        uint64_t t2 = ticks();
        be->free(p);
        uint64_t t3 = ticks();
        spent += ticks_between(t0, t1) + ticks_between(t2, t3);
    }
    return ticks_to_ns(spent) / n;
}

int run_nobulk(struct bench_ctx *ctx)
{
    int n = scaled(ctx, 10000, 1000, 20);
    struct samples s[COUNT(seed_aligns)][COUNT(seed_sizes)] = {{{0}}};
    if (n != 10000)
        emit_workload_note(ctx, "nobulk: %d iterations per size in this mode (10000 in --full)", n);
    while (another_round(ctx)) {
        for (size_t al = 0; al < COUNT(seed_aligns); al++)
            for (size_t z = 0; z < COUNT(seed_sizes); z++) {
                samples_add(&s[al][z], nobulk_one(ctx->be, seed_sizes[z], seed_aligns[al], n));
            }
    }
    for (size_t al = 0; al < COUNT(seed_aligns); al++)
        for (size_t z = 0; z < COUNT(seed_sizes); z++) {
            char name[32];
            size_align_name(name, sizeof name, seed_sizes[z], seed_aligns[al]);
            emit_metric(ctx, name, "alloc+free", "ns/iter", 'L', &s[al][z]);
        }
    return 0;
}

/* ---- realloc --------------------------------------------------------------- */

/* Grow p (holding `have` filled bytes) to `want` bytes and refill it. */
static void *grow_and_refill(const struct backend *be, void *p, size_t have, size_t want,
                             size_t align, uint64_t seed, uint64_t *spent)
{
    uint64_t t0 = ticks();
    void *q = be->realloc_aligned(p, want, align);
    uint64_t t1 = ticks();
    *spent += ticks_between(t0, t1);
    must_alloc(q, want, align, 0);
    check_fill(q, have, seed, "realloc (contents not kept)");
    fill_block(q, want, seed + 1);
    return q;
}

double realloc_one(const struct backend *be, size_t size, size_t align, int n)
{
    uint64_t spent = 0;
    for (int i = 0; i < n; i++) {
        uint64_t seed = (uint64_t)i * 4;
        uint64_t t0 = ticks();
        void *p = be->alloc_aligned(size, align);
        uint64_t t1 = ticks();
        spent += ticks_between(t0, t1);
        must_alloc(p, size, align, 0);
        fill_block(p, size, seed);
        p = grow_and_refill(be, p, size, 2 * size, align, seed, &spent);
        p = grow_and_refill(be, p, 2 * size, 4 * size, align, seed + 1, &spent);
        check_fill(p, 4 * size, seed + 2, "realloc");
        uint64_t t2 = ticks();
        be->free(p);
        uint64_t t3 = ticks();
        spent += ticks_between(t2, t3);
    }
    return ticks_to_ns(spent) / n;
}

/* Iterations per size: 1000 in full mode; quick mode caps the bytes
 * written so the 1 MiB case stays short. */
static int realloc_iterations(const struct bench_ctx *ctx, size_t size)
{
    int n = scaled(ctx, 1000, 1000, 10);
    size_t cap = (size_t)64 << 20;
    if (ctx->mode == MODE_QUICK && (size_t)n * 7 * size > cap)
        n = (int)(cap / (7 * size)) < 20 ? 20 : (int)(cap / (7 * size));
    return n;
}

int run_realloc(struct bench_ctx *ctx)
{
    struct samples s[COUNT(seed_aligns)][COUNT(seed_sizes)] = {{{0}}};
    if (ctx->be->note_realloc_aligned)
        emit_note(ctx, "%s", ctx->be->note_realloc_aligned);
    if (ctx->mode == MODE_QUICK)
        emit_workload_note(ctx, "realloc: quick mode caps iterations at 64 MiB written per size");
    while (another_round(ctx)) {
        for (size_t al = 0; al < COUNT(seed_aligns); al++)
            for (size_t z = 0; z < COUNT(seed_sizes); z++) {
                size_t size = seed_sizes[z];
                samples_add(&s[al][z],
                            realloc_one(ctx->be, size, seed_aligns[al], realloc_iterations(ctx, size)));
            }
    }
    for (size_t al = 0; al < COUNT(seed_aligns); al++)
        for (size_t z = 0; z < COUNT(seed_sizes); z++) {
            char name[32];
            size_align_name(name, sizeof name, seed_sizes[z], seed_aligns[al]);
            emit_metric(ctx, name, "iteration", "ns/iter", 'L', &s[al][z]);
        }
    return 0;
}
