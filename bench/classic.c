/*
 * classic.c - the multi-threaded shapes allocator users know, written from
 * their published descriptions:
 *   larson         server threads replace random objects in their slot
 *                  arrays; each generation of threads hands its objects to
 *                  the next (frees of blocks another thread allocated);
 *   prodcons       a producer thread allocates batches of blocks that a
 *                  consumer thread checks and frees (1, 2 and 4 pairs);
 *   cache-scratch  passive false sharing: the main thread hands each thread
 *                  a small block to free, then each thread allocates,
 *                  writes and frees small blocks;
 *   cache-thrash   active false sharing: each thread allocates, writes and
 *                  frees small blocks of its own;
 *   churn          random sizes through a shared slot array, so blocks are
 *                  freed by whichever thread finds them.
 * Every block carries its size and a stamp, checked before it is freed.
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpmbench.h"

/* ---- tagged blocks: size in the first word, stamp after it ----------------- */

#define TAG_MIN 16

static void *tagged_alloc(const struct backend *be, size_t size)
{
    char *p = must_alloc(be->alloc(size), size, 8, 0);
    memcpy(p, &size, sizeof size);
    stamp_block(p + 8, size - 8, size);
    return p;
}

static void tagged_check_free(const struct backend *be, void *p, const char *where)
{
    size_t size;
    memcpy(&size, p, sizeof size);
    if (size < TAG_MIN || size > ((size_t)1 << 24))
        fail("%s: block %p has a corrupted size word (%zu)", where, p, size);
    check_stamp((char *)p + 8, size - 8, size, where);
    be->free(p);
}

/* Log-uniform sizes from 16 B to 8 KiB. */
static size_t random_size(uint64_t *rng, int max_shift)
{
    uint64_t r = rng_next(rng);
    size_t base = (size_t)TAG_MIN << (r % (uint64_t)max_shift);
    return base + (size_t)((r >> 16) % base);
}

static double median_mops(struct bench_ctx *ctx, double (*once)(struct bench_ctx *),
                          const char *case_name)
{
    struct samples s = {0};
    while (another_round(ctx)) {
        samples_add(&s, once(ctx));
    }
    emit_metric(ctx, case_name, "throughput", "Mops/s", 'H', &s);
    return samples_median(&s);
}

/* ---- larson ---------------------------------------------------------------- */

struct larson_arg {
    struct member m;
    const struct backend *be;
    void **slots;
    int nslots;
    long replacements;
    uint64_t rng;
};

static void larson_body(struct member *m)
{
    struct larson_arg *a = (struct larson_arg *)m;
    for (long i = 0; i < a->replacements; i++) {
        uint64_t r = rng_next(&a->rng);
        int k = (int)(r % (uint64_t)a->nslots);
        if (a->slots[k])
            tagged_check_free(a->be, a->slots[k], "larson");
        a->slots[k] = tagged_alloc(a->be, random_size(&a->rng, 6));
    }
}

static void free_slots(const struct backend *be, void **slots, int n, const char *where)
{
    for (int k = 0; k < n; k++)
        if (slots[k])
            tagged_check_free(be, slots[k], where);
    free(slots);
}

static double larson_once(struct bench_ctx *ctx)
{
    int t = ctx->threads, nslots = scaled(ctx, 4000, 2000, 100);
    int generations = scaled(ctx, 8, 4, 2);
    long per_gen = scaled(ctx, 500000, 200000, 2000);
    struct larson_arg *args = calloc((size_t)t, sizeof *args);
    void ***arrays = calloc((size_t)t, sizeof *arrays);
    double wall = 0;
    if (!args || !arrays)
        fail("out of memory");
    for (int i = 0; i < t; i++)
        if (!(arrays[i] = calloc((size_t)nslots, sizeof(void *))))
            fail("out of memory");
    for (int g = 0; g < generations; g++) {
        /* generation g's thread i takes over the objects of thread i+1 of
         * generation g-1: its first frees are of blocks another thread made */
        for (int i = 0; i < t; i++)
            args[i] = (struct larson_arg){.be = ctx->be, .slots = arrays[(i + g) % t],
                                          .nslots = nslots, .replacements = per_gen,
                                          .rng = (uint64_t)(g * t + i + 1)};
        wall += run_team(&(struct thread_team){t, larson_body, args, sizeof *args});
    }
    for (int i = 0; i < t; i++)
        free_slots(ctx->be, arrays[i], nslots, "larson");
    free(arrays);
    free(args);
    return (double)per_gen * generations * t / wall / 1e6;
}

int run_larson(struct bench_ctx *ctx)
{
    median_mops(ctx, larson_once, "replace 16-1024 B");
    return 0;
}

/* ---- prodcons -------------------------------------------------------------- */

/* Producer and consumer meet in a blocking handoff of 64-block batches
 * (handoff.c): a spinning wait measured how the scheduler runs two
 * spinning threads on shared CPUs (the figure moved sevenfold between two
 * runs), not the allocator. */
struct prodcons_arg {
    struct member m;
    const struct backend *be;
    struct handoff *queue;
    long count;
};

/* Even members produce, odd members consume their partner's batches. */
static void prodcons_body(struct member *m)
{
    struct prodcons_arg *a = (struct prodcons_arg *)m;
    void *batch[HANDOFF_BATCH];
    if (m->index % 2 == 0) {
        uint64_t rng = (uint64_t)m->index + 7;
        for (long i = 0; i < a->count;) {
            int n = 0;
            for (; n < HANDOFF_BATCH && i < a->count; n++, i++)
                batch[n] = tagged_alloc(a->be, random_size(&rng, 5));
            handoff_put(a->queue, batch, n);
        }
        handoff_close(a->queue);
    } else {
        long freed = 0;
        for (int n; (n = handoff_get(a->queue, batch)) > 0; freed += n)
            for (int k = 0; k < n; k++)
                tagged_check_free(a->be, batch[k], "prodcons");
        if (freed != a->count)
            fail("prodcons: consumer freed %ld blocks of %ld", freed, a->count);
    }
}

static double prodcons_once(struct bench_ctx *ctx, int pairs)
{
    long count = scaled(ctx, 2000000, 200000, 5000);
    struct prodcons_arg *args = calloc((size_t)pairs * 2, sizeof *args);
    struct handoff *queues = calloc((size_t)pairs, sizeof *queues);
    if (!args || !queues)
        fail("out of memory");
    for (int p = 0; p < pairs; p++) {
        handoff_init(&queues[p]);
        for (int k = 0; k < 2; k++)
            args[2 * p + k] = (struct prodcons_arg){.be = ctx->be, .queue = &queues[p],
                                                    .count = count};
    }
    double wall = run_team(&(struct thread_team){pairs * 2, prodcons_body, args, sizeof *args});
    for (int p = 0; p < pairs; p++)
        handoff_destroy(&queues[p]);
    free(queues);
    free(args);
    return (double)count * pairs / wall / 1e6;
}

/* 1, 2 and 4 pairs whatever the CPU count: the threads block when they
 * wait, so more threads than CPUs costs switches, not spinning. */
int run_prodcons(struct bench_ctx *ctx)
{
    static const int pairs[] = {1, 2, 4};
    struct samples s[3] = {{0}};
    while (another_round(ctx))
        for (int i = 0; i < 3; i++)
            samples_add(&s[i], prodcons_once(ctx, pairs[i]));
    for (int i = 0; i < 3; i++) {
        char name[48];
        snprintf(name, sizeof name, "%d pair%s 16-512 B", pairs[i], pairs[i] > 1 ? "s" : "");
        emit_metric(ctx, name, "throughput", "Mops/s", 'H', &s[i]);
    }
    return 0;
}

/* ---- cache-scratch and cache-thrash ----------------------------------------- */

struct scratch_arg {
    struct member m;
    const struct backend *be;
    void *handed;        /* freed first (scratch) or NULL (thrash) */
    long iterations, writes;
    size_t size;
};

static void scratch_body(struct member *m)
{
    struct scratch_arg *a = (struct scratch_arg *)m;
    if (a->handed)
        a->be->free(a->handed);
    for (long i = 0; i < a->iterations; i++) {
        volatile unsigned char *p = must_alloc(a->be->alloc(a->size), a->size, 8, 0);
        for (size_t b = 0; b < a->size; b++)
            p[b] = 0;
        for (long w = 0; w < a->writes; w++)
            for (size_t b = 0; b < a->size; b++)
                p[b]++;
        if (p[0] != (unsigned char)a->writes || p[a->size - 1] != (unsigned char)a->writes)
            fail("cache workload: block %p lost writes", (void *)p);
        a->be->free((void *)p);
    }
}

static double scratch_once(struct bench_ctx *ctx, int hand_over)
{
    int t = ctx->threads;
    long iterations = scaled(ctx, 1000, 500, 20), writes = scaled(ctx, 20000, 10000, 50);
    struct scratch_arg *args = calloc((size_t)t, sizeof *args);
    if (!args)
        fail("out of memory");
    for (int i = 0; i < t; i++) {
        args[i] = (struct scratch_arg){.be = ctx->be, .iterations = iterations,
                                       .writes = writes, .size = 8};
        if (hand_over)
            args[i].handed = must_alloc(ctx->be->alloc(8), 8, 8, 0);
    }
    for (int i = 0; i < t; i++)
        if (hand_over)
            memset(args[i].handed, 0, 8);
    double wall = run_team(&(struct thread_team){t, scratch_body, args, sizeof *args});
    free(args);
    return (double)iterations * writes * t / wall / 1e6;
}

static double cache_scratch_once(struct bench_ctx *ctx) { return scratch_once(ctx, 1); }
static double cache_thrash_once(struct bench_ctx *ctx) { return scratch_once(ctx, 0); }

int run_cache_scratch(struct bench_ctx *ctx)
{
    median_mops(ctx, cache_scratch_once, "8 B objects");
    return 0;
}

int run_cache_thrash(struct bench_ctx *ctx)
{
    median_mops(ctx, cache_thrash_once, "8 B objects");
    return 0;
}

/* ---- churn ----------------------------------------------------------------- */

struct churn_arg {
    struct member m;
    const struct backend *be;
    _Atomic(void *) *slots;
    int nslots;
    long ops;
};

static void churn_body(struct member *m)
{
    struct churn_arg *a = (struct churn_arg *)m;
    uint64_t rng = (uint64_t)m->index * 977 + 1;
    for (long i = 0; i < a->ops; i++) {
        int k = (int)(rng_next(&rng) % (uint64_t)a->nslots);
        void *old = atomic_exchange(&a->slots[k], NULL);
        if (old)
            tagged_check_free(a->be, old, "churn");
        void *fresh = tagged_alloc(a->be, random_size(&rng, 10));
        old = atomic_exchange(&a->slots[k], fresh);
        if (old)
            tagged_check_free(a->be, old, "churn");
    }
}

static double churn_once(struct bench_ctx *ctx)
{
    int t = ctx->threads, nslots = 1024 * t;
    long ops = scaled(ctx, 2000000, 300000, 3000);
    _Atomic(void *) *slots = calloc((size_t)nslots, sizeof *slots);
    struct churn_arg *args = calloc((size_t)t, sizeof *args);
    if (!slots || !args)
        fail("out of memory");
    for (int i = 0; i < t; i++)
        args[i] = (struct churn_arg){.be = ctx->be, .slots = slots, .nslots = nslots, .ops = ops};
    double wall = run_team(&(struct thread_team){t, churn_body, args, sizeof *args});
    for (int k = 0; k < nslots; k++) {
        void *p = atomic_load(&slots[k]);
        if (p)
            tagged_check_free(ctx->be, p, "churn");
    }
    free(slots);
    free(args);
    return (double)ops * t / wall / 1e6;
}

int run_churn(struct bench_ctx *ctx)
{
    median_mops(ctx, churn_once, "16 B-16 KiB shared slots");
    return 0;
}
