/*
 * memory.c - the memory workload: what an allocator keeps resident after
 * programs that free, shrink, leave holes or free from another thread (the
 * table of issue 9):
 *   idle_threads    4 threads each allocate, touch and free 60 MiB, then
 *                   block on a condition variable: RSS 2 s later, then
 *                   after a trim; for dpmalloc's columns once more with
 *                   dirty_decay_ms:0,muzzy_decay_ms:0,background_thread:true;
 *   idle_threads_1000  1000 threads (64 KiB stacks) each allocate small
 *                   blocks (16..1024 B, random) in batches, touch, check
 *                   and free them until 4 MiB went through, then block on
 *                   a condition variable: RSS while all 1000 wait, then
 *                   after a trim (what idle threads' caches keep); the
 *                   smoke pass churns 256 KiB a thread;
 *   shrink          256 MiB touched, then 19 reallocs each to 0.6x the size
 *                   (down to ~16 KiB): RSS and usable size;
 *   big_then_small  free(malloc(64 MiB)), then malloc(16 MiB), both touched:
 *                   usable size and RSS;
 *   holes           1000 x 200 KiB touched, every other one freed, then
 *                   500 x 200 KiB touched: RSS after each round;
 *   offsets         64-byte blocks at 255 shifts from an alignment of 4096,
 *                   16 per shift, all live: RSS;
 *   consumer        a producer thread passes 64-byte blocks through a
 *                   bounded ring to a consumer thread that frees them: ns
 *                   per free, RSS at the end.
 * RSS is a state, not a rate: each program runs once, in a fresh process of
 * its own (this program re-executed with --program), so that no program's
 * heap colours another's figure. The child of the (memory, backend) pair
 * only starts those processes; their records go straight to the parent's
 * pipe, which they inherit.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dpmbench.h"

#define MiB ((size_t)1 << 20)
#define KiB ((size_t)1 << 10)

/* The configuration the idle-threads row gives dpmalloc. */
#define DPM_DECAY0_CONF "dirty_decay_ms:0,muzzy_decay_ms:0,background_thread:true"

static void run_idle_threads(struct bench_ctx *ctx, const char *case_name);
static void run_idle_threads_1000(struct bench_ctx *ctx, const char *case_name);
static void run_shrink(struct bench_ctx *ctx, const char *case_name);
static void run_big_then_small(struct bench_ctx *ctx, const char *case_name);
static void run_holes(struct bench_ctx *ctx, const char *case_name);
static void run_offsets(struct bench_ctx *ctx, const char *case_name);
static void run_consumer(struct bench_ctx *ctx, const char *case_name);

struct memory_program {
    const char *case_name;
    void (*run)(struct bench_ctx *ctx, const char *case_name);
    const char *dpm_conf; /* DPMALLOC_CONF for this case, dpmalloc's columns only */
};

static const struct memory_program programs[] = {
    {"idle_threads", run_idle_threads, NULL},
    {"idle_threads decay 0 + bg", run_idle_threads, DPM_DECAY0_CONF},
    {"idle_threads_1000", run_idle_threads_1000, NULL},
    {"shrink", run_shrink, NULL},
    {"big_then_small", run_big_then_small, NULL},
    {"holes", run_holes, NULL},
    {"offsets", run_offsets, NULL},
    {"consumer", run_consumer, NULL},
};

#define NPROGRAMS ((int)(sizeof programs / sizeof programs[0]))

static int is_dpmalloc_column(const struct bench_ctx *ctx)
{
    return ctx->kind == BACKEND_NATIVE_DPM || !strcmp(ctx->backend_name, "dpm-preload");
}

static void emit_rss(struct bench_ctx *ctx, const char *case_name, const char *metric)
{
    double rss = statm_rss_mib();
    if (rss < 0)
        fail("memory: /proc/self/statm unreadable");
    emit_value(ctx, case_name, metric, "MiB", '-', rss);
}

static void *resize(const struct backend *be, void *p, size_t size)
{
    return be->realloc ? be->realloc(p, size) : be->realloc_aligned(p, size, 16);
}

/* ---- idle_threads ------------------------------------------------------------ */

struct idle_group {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int ready, release;
    const struct backend *be;
};

/* a thread of the group: counts itself ready, then idles until the
 * measuring thread, having read the RSS, releases the group */
static void idle_until_released(struct idle_group *g)
{
    pthread_mutex_lock(&g->lock);
    g->ready++;
    pthread_cond_broadcast(&g->cond);
    while (!g->release)
        pthread_cond_wait(&g->cond, &g->lock);
    pthread_mutex_unlock(&g->lock);
}

/* the measuring thread: waits until n threads of the group are idle */
static void wait_ready(struct idle_group *g, int n)
{
    pthread_mutex_lock(&g->lock);
    while (g->ready < n)
        pthread_cond_wait(&g->cond, &g->lock);
    pthread_mutex_unlock(&g->lock);
}

static void release_group(struct idle_group *g)
{
    pthread_mutex_lock(&g->lock);
    g->release = 1;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

static void *free_then_idle(void *arg)
{
    struct idle_group *g = arg;
    size_t size = 60 * MiB;
    void *p = must_alloc(g->be->alloc(size), size, 16, 0);
    fill_block(p, size, 60);
    check_fill(p, size, 60, "idle_threads");
    g->be->free(p);
    idle_until_released(g);
    return NULL;
}

static void run_idle_threads(struct bench_ctx *ctx, const char *case_name)
{
    struct idle_group g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, ctx->be};
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        if (pthread_create(&t[i], NULL, free_then_idle, &g) != 0)
            fail("idle_threads: pthread_create failed");
    wait_ready(&g, 4);
    /* the smoke pass checks the program, not the decay: a shorter wait */
    useconds_t wait_us = ctx->mode == MODE_SMOKE ? 200 * 1000 : 2000 * 1000;
    usleep(wait_us);
    emit_rss(ctx, case_name, ctx->mode == MODE_SMOKE ? "RSS 0.2 s later" : "RSS 2 s later");
    if (ctx->be->trim) {
        ctx->be->trim();
        emit_rss(ctx, case_name, "RSS after trim");
    }
    release_group(&g);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
}

/* ---- idle_threads_1000 -------------------------------------------------------- */

#define MANY_THREADS 1000
#define MANY_CHURN (4 * MiB)
/* rte_malloc serialises its calls on one heap lock, and 1000 x 4 MiB
 * would take much of the smoke pass's time limit: the smoke pass, which
 * checks the program and not the figure, churns less */
#define MANY_CHURN_SMOKE (256 * KiB)
#define MANY_BATCH 512 /* blocks a thread holds at once (~256 KiB) */
#define MANY_STACK (64 * KiB)

struct churner {
    struct idle_group *g;
    uint64_t rng;
    size_t bytes; /* to churn */
};

/* The pointer array lives on the 64 KiB stack: the thread's only
 * allocations are the blocks it churns. */
static void *churn_then_idle(void *arg)
{
    struct churner *c = arg;
    struct idle_group *g = c->g;
    void *live[MANY_BATCH];
    size_t size[MANY_BATCH];
    size_t done = 0;
    while (done < c->bytes) {
        int n = 0;
        for (; n < MANY_BATCH && done < c->bytes; n++) {
            size[n] = 16 + (size_t)(rng_next(&c->rng) % 1009);
            live[n] = must_alloc(g->be->alloc(size[n]), size[n], 8, 0);
            fill_block(live[n], size[n], (uint64_t)n);
            done += size[n];
        }
        for (int i = 0; i < n; i++) {
            check_fill(live[i], size[i], (uint64_t)i, "idle_threads_1000");
            g->be->free(live[i]);
        }
    }
    idle_until_released(g);
    return NULL;
}

static void run_idle_threads_1000(struct bench_ctx *ctx, const char *case_name)
{
    struct idle_group g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, ctx->be};
    pthread_t *t = calloc(MANY_THREADS, sizeof *t);
    struct churner *c = calloc(MANY_THREADS, sizeof *c);
    if (!t || !c)
        fail("idle_threads_1000: out of memory for the thread table");
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, MANY_STACK);
    int smoke = ctx->mode == MODE_SMOKE;
    size_t bytes = smoke ? MANY_CHURN_SMOKE : MANY_CHURN;
    int started = 0, err = 0;
    for (; started < MANY_THREADS; started++) {
        c[started] = (struct churner){&g, (uint64_t)started + 1, bytes};
        if ((err = pthread_create(&t[started], &attr, churn_then_idle, &c[started])) != 0)
            break;
    }
    pthread_attr_destroy(&attr);
    wait_ready(&g, started);
    if (started == MANY_THREADS) {
        emit_rss(ctx, case_name,
                 smoke ? "RSS at barrier (smoke)" : "RSS at the barrier");
        if (ctx->be->trim) {
            ctx->be->trim();
            emit_rss(ctx, case_name, smoke ? "RSS after trim (smoke)" : "RSS after trim");
        }
    } else {
        /* a thread limit (ulimit -u) below 1000: no figure rather than a
         * figure for fewer threads under this name */
        emit_note(ctx, "idle_threads_1000: not run, pthread_create refused thread %d: %s",
                  started + 1, strerror(err));
    }
    release_group(&g);
    for (int i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    free(c);
    free(t);
}

/* ---- shrink, big_then_small ------------------------------------------------------ */

static void run_shrink(struct bench_ctx *ctx, const char *case_name)
{
    const struct backend *be = ctx->be;
    size_t size = 256 * MiB;
    void *p = must_alloc(be->alloc(size), size, 16, 0);
    fill_block(p, size, 256);
    for (int i = 0; i < 19; i++) {
        size = size * 6 / 10;
        p = must_alloc(resize(be, p, size), size, 16, 0);
        check_fill(p, size, 256, "shrink (contents not kept)");
    }
    emit_rss(ctx, case_name, "RSS");
    if (be->usable_size)
        emit_value(ctx, case_name, "usable size", "B", '-', (double)be->usable_size(p));
    emit_value(ctx, case_name, "last request", "B", '-', (double)size);
    be->free(p);
}

static void run_big_then_small(struct bench_ctx *ctx, const char *case_name)
{
    const struct backend *be = ctx->be;
    void *big = must_alloc(be->alloc(64 * MiB), 64 * MiB, 16, 0);
    fill_block(big, 64 * MiB, 64);
    be->free(big);
    void *p = must_alloc(be->alloc(16 * MiB), 16 * MiB, 16, 0);
    fill_block(p, 16 * MiB, 16);
    if (be->usable_size)
        emit_value(ctx, case_name, "usable size", "MiB", '-',
                   (double)be->usable_size(p) / (double)MiB);
    emit_rss(ctx, case_name, "RSS");
    check_fill(p, 16 * MiB, 16, "big_then_small");
    be->free(p);
}

/* ---- holes --------------------------------------------------------------------- */

#define HOLES 1000
#define HOLE_SIZE (200 * KiB)

static void run_holes(struct bench_ctx *ctx, const char *case_name)
{
    const struct backend *be = ctx->be;
    void **blocks = calloc(HOLES, sizeof *blocks);
    if (!blocks)
        fail("holes: out of memory for the pointer array");
    for (int i = 0; i < HOLES; i++) {
        blocks[i] = must_alloc(be->alloc(HOLE_SIZE), HOLE_SIZE, 16, 0);
        fill_block(blocks[i], HOLE_SIZE, (uint64_t)i);
    }
    for (int i = 0; i < HOLES; i += 2) {
        be->free(blocks[i]);
        blocks[i] = NULL;
    }
    emit_rss(ctx, case_name, "RSS after round 1");
    for (int i = 0; i < HOLES; i += 2) {
        blocks[i] = must_alloc(be->alloc(HOLE_SIZE), HOLE_SIZE, 16, 0);
        fill_block(blocks[i], HOLE_SIZE, (uint64_t)i);
    }
    emit_rss(ctx, case_name, "RSS after round 2");
    for (int i = 0; i < HOLES; i++) {
        check_fill(blocks[i], HOLE_SIZE, (uint64_t)i, "holes");
        be->free(blocks[i]);
    }
    free(blocks);
}

/* ---- offsets ------------------------------------------------------------------- */

#define OFFSET_ALIGN 4096
#define OFFSET_SHIFTS 255
#define OFFSET_PER_SHIFT 16
#define OFFSET_SIZE 64

/* Block k of shift s starts 16*s bytes past a multiple of 4096. Natively
 * that is dpm_malloc_aligned_at(64, 4096, 4096 - 16*s); elsewhere what a
 * user writes: posix_memalign(4096) of 64 + 16*s bytes, pointer + 16*s. */
static void *shifted_alloc(const struct backend *be, size_t shift)
{
    if (!be->note_aligned_at)
        return be->alloc_aligned_at(OFFSET_SIZE, OFFSET_ALIGN, OFFSET_ALIGN - shift);
    char *base = be->alloc_aligned(OFFSET_SIZE + shift, OFFSET_ALIGN);
    return base ? base + shift : NULL;
}

static void shifted_free(const struct backend *be, void *p, size_t shift)
{
    be->free(be->note_aligned_at ? (char *)p - shift : p);
}

static void run_offsets(struct bench_ctx *ctx, const char *case_name)
{
    const struct backend *be = ctx->be;
    void **blocks = calloc(OFFSET_SHIFTS * OFFSET_PER_SHIFT, sizeof *blocks);
    if (!blocks)
        fail("offsets: out of memory for the pointer array");
    if (be->note_aligned_at)
        emit_note(ctx, "offsets: posix_memalign(4096) of 64 + shift bytes, pointer + shift");
    double before = statm_rss_mib();
    for (int k = 0; k < OFFSET_PER_SHIFT; k++)
        for (int s = 0; s < OFFSET_SHIFTS; s++) {
            size_t shift = (size_t)(s + 1) * 16, i = (size_t)s * OFFSET_PER_SHIFT + (size_t)k;
            blocks[i] = must_alloc(shifted_alloc(be, shift), OFFSET_SIZE, OFFSET_ALIGN,
                                   OFFSET_ALIGN - shift);
            stamp_block(blocks[i], OFFSET_SIZE, i);
        }
    double after = statm_rss_mib();
    emit_rss(ctx, case_name, "RSS");
    emit_value(ctx, case_name, "RSS growth", "KiB", '-', (after - before) * 1024);
    for (int s = 0; s < OFFSET_SHIFTS; s++)
        for (int k = 0; k < OFFSET_PER_SHIFT; k++) {
            size_t i = (size_t)s * OFFSET_PER_SHIFT + (size_t)k;
            check_stamp(blocks[i], OFFSET_SIZE, i, "offsets");
            shifted_free(be, blocks[i], (size_t)(s + 1) * 16);
        }
    free(blocks);
}

/* ---- consumer ------------------------------------------------------------------ */

/* The blocks travel in batches through a blocking handoff (handoff.c): a
 * spinning consumer would share its CPU with the producer it waits for. */
struct consumer_arg {
    struct member m;
    const struct backend *be;
    struct handoff *queue;
    long count;
    uint64_t free_ticks;
};

static void consumer_body(struct member *m)
{
    struct consumer_arg *a = (struct consumer_arg *)m;
    void *batch[HANDOFF_BATCH];
    long i = 0;
    if (m->index == 0) {
        while (i < a->count) {
            int n = 0;
            for (; n < HANDOFF_BATCH && i < a->count; n++, i++) {
                batch[n] = must_alloc(a->be->alloc(OFFSET_SIZE), OFFSET_SIZE, 16, 0);
                stamp_block(batch[n], OFFSET_SIZE, (uint64_t)i);
            }
            handoff_put(a->queue, batch, n);
        }
        handoff_close(a->queue);
        return;
    }
    for (int n; (n = handoff_get(a->queue, batch)) > 0;)
        for (int k = 0; k < n; k++, i++) {
            check_stamp(batch[k], OFFSET_SIZE, (uint64_t)i, "consumer");
            uint64_t t0 = ticks();
            a->be->free(batch[k]);
            uint64_t t1 = ticks();
            a->free_ticks += ticks_between(t0, t1);
        }
    if (i != a->count)
        fail("consumer: %ld blocks freed of %ld", i, a->count);
}

static void run_consumer(struct bench_ctx *ctx, const char *case_name)
{
    long count = scaled(ctx, 1000000, 1000000, 20000);
    struct consumer_arg args[2];
    struct handoff *queue = malloc(sizeof *queue);
    struct samples per_free = {0};
    if (!queue)
        fail("consumer: out of memory for the queue");
    while (another_round(ctx)) {
        handoff_init(queue);
        for (int i = 0; i < 2; i++)
            args[i] = (struct consumer_arg){.be = ctx->be, .queue = queue, .count = count};
        struct thread_team team = {2, consumer_body, args, sizeof args[0]};
        run_team(&team);
        handoff_destroy(queue);
        samples_add(&per_free, ticks_to_ns(args[1].free_ticks) / (double)count);
    }
    emit_metric(ctx, case_name, "free in consumer", "ns/call", 'L', &per_free);
    emit_rss(ctx, case_name, "RSS at the end");
    free(queue);
}

/* ---- the driver: one fresh process per program ------------------------------- */

static void exec_program(const struct bench_ctx *ctx, int index)
{
    char program[16], rounds[16], threads[16], hz[32], budget[32];
    const char *kind = ctx->kind == BACKEND_NATIVE_DPM ? "dpm"
                       : ctx->kind == BACKEND_RTE      ? "rte"
                       : ctx->kind == BACKEND_DPM_RTE  ? "dpm-rte"
                                                       : "libc";
    const char *mode = ctx->mode == MODE_FULL    ? "--full"
                       : ctx->mode == MODE_QUICK ? "--quick"
                                                 : "--smoke";
    snprintf(program, sizeof program, "%d", index);
    snprintf(rounds, sizeof rounds, "%d", ctx->rounds);
    snprintf(threads, sizeof threads, "%d", ctx->threads);
    snprintf(hz, sizeof hz, "%.0f", ctx->tsc_hz);
    snprintf(budget, sizeof budget, "%.1f", ctx->budget_s);
    if (programs[index].dpm_conf)
        setenv("DPMALLOC_CONF", programs[index].dpm_conf, 1);
    execl("/proc/self/exe", "dpmbench", "--child", "memory", "--program", program, "--kind", kind,
          "--backend", ctx->backend_name, mode, "--rounds", rounds, "--threads", threads,
          "--tsc-hz", hz, "--budget", budget, (char *)NULL);
    _exit(5);
}

int run_memory(struct bench_ctx *ctx)
{
    emit_workload_note(ctx, "memory: RSS and usable sizes are information (kept out of the time "
                            "ratio, which is the consumer's free alone); one process per program");
    if (ctx->be->note_trim)
        emit_note(ctx, "%s", ctx->be->note_trim);
    else if (ctx->be->trim)
        emit_note(ctx, "trim = malloc_trim(0) (glibc's unless the allocator defines it)");
    if (is_dpmalloc_column(ctx))
        emit_note(ctx, "idle_threads decay 0 + bg: DPMALLOC_CONF=" DPM_DECAY0_CONF);
    for (int i = 0; i < NPROGRAMS; i++) {
        if (programs[i].dpm_conf && !is_dpmalloc_column(ctx))
            continue;
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0)
            fail("memory: fork failed");
        if (pid == 0)
            exec_program(ctx, i);
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        if (WIFSIGNALED(status))
            fail("memory: %s killed by signal %d", programs[i].case_name, WTERMSIG(status));
        if (WEXITSTATUS(status) != 0)
            fail("memory: %s exited with status %d", programs[i].case_name, WEXITSTATUS(status));
    }
    return 0;
}

/* One program in this (fresh) process. */
int run_memory_program(struct bench_ctx *ctx)
{
    if (ctx->program >= NPROGRAMS)
        return 2;
    programs[ctx->program].run(ctx, programs[ctx->program].case_name);
    return 0;
}
