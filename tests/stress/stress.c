/*
 * stress.c - multi-threaded stress with cross-thread frees.
 *
 * Built against the dpm_ API (STRESS_DPM_API, dpmalloc_plain, also run
 * under ASan and TSan) and against the libc names (static link and
 * LD_PRELOAD). Proves that with 8+ threads:
 *  - shared_slots: objects allocated by one thread and freed (plain or
 *    sized free) or realloc'ed by another (random sizes 1 .. 64 KiB,
 *    sometimes 100 KiB .. 4 MiB, sometimes aligned, for the dpm_ API also
 *    aligned at an offset) keep their contents until freed;
 *  - producer_consumer: objects handed through mutex queues (4 pairs) and
 *    through lock-free single-producer rings (4 pairs) arrive intact;
 *  - exiting_owners: threads that allocate and exit at once, while other
 *    threads are still freeing their objects, lose nothing, round after
 *    round (thread-exit cleanup racing remote frees).
 * Every object's pattern is verified before it is freed.
 */
#include "test.h"

#include <pthread.h>
#include <stdatomic.h>

#ifdef STRESS_DPM_API
#include <dpmalloc.h>
#define T_MALLOC(n) dpm_malloc(n)
#define T_FREE(p) dpm_free(p)
#define T_REALLOC(p, n) dpm_realloc(p, n)
#define T_ALIGNED(n, a) dpm_malloc_aligned(n, a)
#define T_ALIGNED_AT(n, a, off) dpm_malloc_aligned_at(n, a, off)
#define T_FREE_SIZED(p, n) dpm_free_sized(p, n)
#define T_USABLE(p) dpm_usable_size(p)
#else
#include "override.h"
#define T_MALLOC(n) malloc(n)
#define T_FREE(p) free(p)
#define T_REALLOC(p, n) realloc(p, n)
#define T_ALIGNED(n, a) aligned_alloc(a, n)
#define T_ALIGNED_AT(n, a, off) aligned_alloc(a, n) /* no libc form */
#define T_FREE_SIZED(p, n) free_sized(p, n)
#define T_USABLE(p) malloc_usable_size(p)
TEST(override_in_effect) { test_expect_override(); }
#endif

/* Sanitizers run slower (ASan ~3x, TSan 10x+): scale the work down. */
#define SCALE(n) (TEST_TSAN ? (n) / 16 : TEST_SANITIZED ? (n) / 3 : (n))

/* Verification is word-wise to stay fast. Byte i of a block is always
 * byte i % 8 of the word for i & ~7 (little-endian), so a prefix of a block
 * checks out after a shrinking realloc. */
static unsigned char tail_byte(uint64_t tag, size_t i)
{
    uint64_t w = tag ^ ((i & ~(size_t)7) * 0x9e3779b97f4a7c15ULL);
    return (unsigned char)(w >> (i % 8 * 8));
}

static void obj_fill(void *p, size_t n, uint64_t tag)
{
    unsigned char *c = p;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w = tag ^ (i * 0x9e3779b97f4a7c15ULL);
        memcpy(c + i, &w, 8);
    }
    for (; i < n; i++)
        c[i] = tail_byte(tag, i);
}

static size_t obj_check(const void *p, size_t n, uint64_t tag)
{
    const unsigned char *c = p;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w = tag ^ (i * 0x9e3779b97f4a7c15ULL), v;
        memcpy(&v, c + i, 8);
        if (v != w)
            return i;
    }
    for (; i < n; i++)
        if (c[i] != tail_byte(tag, i))
            return i;
    return n;
}

/* Random size: log-uniform over 1 .. 64 KiB; 1 in 256 is 100 KiB .. 4 MiB. */
static size_t rand_size(uint64_t *rng)
{
    uint64_t r = test_rand(rng);
    if ((r & 255) == 0)
        return 100000 + (size_t)((r >> 8) % (4000000 - 100000));
    return 1 + (size_t)((r >> 8) % (1u << ((r >> 40) % 17)));
}

static atomic_int errors;

static void report_corrupt(const char *where, const void *p, size_t n,
                           size_t at)
{
    if (atomic_fetch_add(&errors, 1) < 10)
        fprintf(stderr, "%s: block %p (%zu bytes) corrupt at byte %zu\n", where,
                p, n, at);
}

static void *alloc_obj(uint64_t *rng, size_t *n_out, uint64_t *tag_out)
{
    size_t n = rand_size(rng);
    uint64_t r = test_rand(rng);
    void *p;
    if (r % 8 == 0) {
        size_t a = (size_t)1 << (4 + (r >> 8) % 9); /* 16 .. 4096 */
        p = T_ALIGNED(n, a);
        if (p && (uintptr_t)p % a) {
            if (atomic_fetch_add(&errors, 1) < 10)
                fprintf(stderr, "aligned(%zu, %zu) = %p misaligned\n", n, a, p);
        }
    } else if (r % 8 == 1) {
#ifdef STRESS_DPM_API
        size_t a = (size_t)1 << (3 + (r >> 8) % 10); /* 8 .. 4096 */
        size_t off = (size_t)(r >> 24) % a;
#else
        size_t a = (size_t)1 << (3 + (r >> 8) % 10), off = 0;
#endif
        p = T_ALIGNED_AT(n, a, off);
        if (p && ((uintptr_t)p + off) % a) {
            if (atomic_fetch_add(&errors, 1) < 10)
                fprintf(stderr, "aligned_at(%zu, %zu, %zu) = %p misaligned\n",
                        n, a, off, p);
        }
    } else {
        p = T_MALLOC(n);
    }
    if (!p) {
        if (atomic_fetch_add(&errors, 1) < 10)
            fprintf(stderr, "allocation of %zu bytes failed: %s\n", n,
                    strerror(errno));
        return NULL;
    }
    if (T_USABLE(p) < n && atomic_fetch_add(&errors, 1) < 10)
        fprintf(stderr, "usable size %zu < %zu\n", (size_t)T_USABLE(p), n);
#ifndef STRESS_DPM_API
    if (r % 8 <= 1) /* C23: free_sized is for malloc/calloc/realloc blocks */
        r &= ~(uint64_t)0x100;
#endif
    obj_fill(p, n, r);
    *n_out = n;
    *tag_out = r;
    return p;
}

static void free_obj(void *p, size_t n, uint64_t tag, const char *where)
{
    size_t at = obj_check(p, n, tag);
    if (at != n)
        report_corrupt(where, p, n, at);
    if (tag & 0x100) /* half the frees say the size */
        T_FREE_SIZED(p, n);
    else
        T_FREE(p);
}

/* ---------------- shared slots ---------------- */
#define NSLOTS 2048
struct slot {
    pthread_mutex_t mu;
    void *p;
    size_t n;
    uint64_t tag;
    char pad[64];
};
static struct slot slots[NSLOTS];

struct worker_arg {
    int id;
    int ops;
};

static void *slot_worker(void *argp)
{
    struct worker_arg *arg = argp;
    uint64_t rng = 1000 + (uint64_t)arg->id;
    for (int op = 0; op < arg->ops; op++) {
        struct slot *s = &slots[test_rand(&rng) % NSLOTS];
        uint64_t r = test_rand(&rng);
        pthread_mutex_lock(&s->mu);
        if (s->p && r % 4 == 0) {
            /* realloc someone else's block */
            size_t at = obj_check(s->p, s->n, s->tag);
            if (at != s->n)
                report_corrupt("before realloc", s->p, s->n, at);
            size_t n = rand_size(&rng);
            void *q = T_REALLOC(s->p, n);
            if (!q) {
                atomic_fetch_add(&errors, 1);
                fprintf(stderr, "realloc(%p, %zu) failed\n", s->p, n);
            } else {
                size_t keep = n < s->n ? n : s->n;
                at = obj_check(q, keep, s->tag);
                if (at != keep)
                    report_corrupt("after realloc", q, keep, at);
                obj_fill(q, n, s->tag);
                s->p = q;
                s->n = n;
            }
        } else if (s->p) {
            free_obj(s->p, s->n, s->tag, "slot free");
            s->p = NULL;
        } else {
            s->p = alloc_obj(&rng, &s->n, &s->tag);
        }
        pthread_mutex_unlock(&s->mu);
    }
    return NULL;
}

TEST(shared_slots)
{
    enum { NT = 8 };
    pthread_t t[NT];
    struct worker_arg a[NT];
    atomic_store(&errors, 0);
    for (int i = 0; i < NSLOTS; i++)
        pthread_mutex_init(&slots[i].mu, NULL);
    for (int i = 0; i < NT; i++) {
        a[i].id = i;
        a[i].ops = SCALE(150000);
        EXPECT_EQ_I(pthread_create(&t[i], NULL, slot_worker, &a[i]), 0);
    }
    for (int i = 0; i < NT; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < NSLOTS; i++) {
        if (slots[i].p)
            free_obj(slots[i].p, slots[i].n, slots[i].tag, "final free");
        slots[i].p = NULL;
        pthread_mutex_destroy(&slots[i].mu);
    }
    EXPECT_EQ_I(atomic_load(&errors), 0);
}

/* ---------------- producer / consumer ---------------- */
struct item {
    void *p;
    size_t n;
    uint64_t tag;
};

/* mutex + condvar bounded queue */
#define QCAP 256
struct mqueue {
    pthread_mutex_t mu;
    pthread_cond_t not_full, not_empty;
    struct item buf[QCAP];
    unsigned head, tail;
};

/* lock-free single-producer single-consumer ring */
struct ring {
    _Alignas(64) atomic_uint head;
    _Alignas(64) atomic_uint tail;
    struct item buf[QCAP];
};

struct pc_arg {
    struct mqueue *mq; /* exactly one of mq / ring */
    struct ring *ring;
    int count;
    int seed;
    long consumed;
};

static void mq_push(struct mqueue *q, struct item it)
{
    pthread_mutex_lock(&q->mu);
    while (q->tail - q->head == QCAP)
        pthread_cond_wait(&q->not_full, &q->mu);
    q->buf[q->tail++ % QCAP] = it;
    pthread_cond_signal(&q->not_empty);
    pthread_mutex_unlock(&q->mu);
}

static struct item mq_pop(struct mqueue *q)
{
    pthread_mutex_lock(&q->mu);
    while (q->tail == q->head)
        pthread_cond_wait(&q->not_empty, &q->mu);
    struct item it = q->buf[q->head++ % QCAP];
    pthread_cond_signal(&q->not_full);
    pthread_mutex_unlock(&q->mu);
    return it;
}

static void ring_push(struct ring *r, struct item it)
{
    unsigned t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    while (t - atomic_load_explicit(&r->head, memory_order_acquire) == QCAP)
        sched_yield();
    r->buf[t % QCAP] = it;
    atomic_store_explicit(&r->tail, t + 1, memory_order_release);
}

static struct item ring_pop(struct ring *r)
{
    unsigned h = atomic_load_explicit(&r->head, memory_order_relaxed);
    while (atomic_load_explicit(&r->tail, memory_order_acquire) == h)
        sched_yield();
    struct item it = r->buf[h % QCAP];
    atomic_store_explicit(&r->head, h + 1, memory_order_release);
    return it;
}

static void *producer(void *argp)
{
    struct pc_arg *a = argp;
    uint64_t rng = 5000 + (uint64_t)a->seed;
    for (int i = 0; i <= a->count; i++) {
        struct item it = {NULL, 0, 0};
        if (i < a->count) {
            it.p = alloc_obj(&rng, &it.n, &it.tag);
            if (!it.p)
                continue;
        } /* else: the NULL item ends the stream */
        if (a->mq)
            mq_push(a->mq, it);
        else
            ring_push(a->ring, it);
    }
    return NULL;
}

static void *consumer(void *argp)
{
    struct pc_arg *a = argp;
    for (;;) {
        struct item it = a->mq ? mq_pop(a->mq) : ring_pop(a->ring);
        if (!it.p)
            break;
        free_obj(it.p, it.n, it.tag, "consumer");
        a->consumed++;
    }
    return NULL;
}

TEST(producer_consumer)
{
    enum { NPAIRS = 8 };
    static struct mqueue mq[NPAIRS / 2];
    static struct ring rings[NPAIRS / 2];
    pthread_t pt[NPAIRS], ct[NPAIRS];
    struct pc_arg pa[NPAIRS], ca[NPAIRS];
    atomic_store(&errors, 0);
    int count = SCALE(40000);
    for (int i = 0; i < NPAIRS; i++) {
        memset(&pa[i], 0, sizeof pa[i]);
        if (i % 2) {
            struct mqueue *q = &mq[i / 2];
            pthread_mutex_init(&q->mu, NULL);
            pthread_cond_init(&q->not_full, NULL);
            pthread_cond_init(&q->not_empty, NULL);
            q->head = q->tail = 0;
            pa[i].mq = q;
        } else {
            atomic_store(&rings[i / 2].head, 0);
            atomic_store(&rings[i / 2].tail, 0);
            pa[i].ring = &rings[i / 2];
        }
        pa[i].count = count;
        pa[i].seed = i;
        ca[i] = pa[i];
        EXPECT_EQ_I(pthread_create(&ct[i], NULL, consumer, &ca[i]), 0);
        EXPECT_EQ_I(pthread_create(&pt[i], NULL, producer, &pa[i]), 0);
    }
    for (int i = 0; i < NPAIRS; i++) {
        pthread_join(pt[i], NULL);
        pthread_join(ct[i], NULL);
        EXPECT(ca[i].consumed == count, "pair %d: consumed %ld of %d objects",
               i, ca[i].consumed, count);
    }
    EXPECT_EQ_I(atomic_load(&errors), 0);
}

/* ---------------- owners that exit early ---------------- */
/* Allocator threads push their objects onto a shared stack and exit at
 * once; freer threads pop and free concurrently, so frees to a dead (or
 * dying) thread's memory race with its exit. */
static pthread_mutex_t stack_mu = PTHREAD_MUTEX_INITIALIZER;
static struct item *stack_items;
static size_t stack_len, stack_cap;
static atomic_int owners_alive;
static atomic_long freed_total;

static void *short_lived_owner(void *argp)
{
    int seed = *(int *)argp;
    uint64_t rng = 9000 + (uint64_t)seed;
    for (int i = 0; i < SCALE(1500); i++) {
        struct item it;
        it.p = alloc_obj(&rng, &it.n, &it.tag);
        if (!it.p)
            continue;
        pthread_mutex_lock(&stack_mu);
        if (stack_len < stack_cap)
            stack_items[stack_len++] = it;
        else
            free_obj(it.p, it.n, it.tag, "overflow");
        pthread_mutex_unlock(&stack_mu);
    }
    atomic_fetch_sub(&owners_alive, 1);
    return NULL;
}

static void *freer(void *argp)
{
    (void)argp;
    for (;;) {
        struct item it = {NULL, 0, 0};
        /* read before looking at the stack: if no owner was alive then, an
         * empty stack means done */
        int alive = atomic_load(&owners_alive);
        pthread_mutex_lock(&stack_mu);
        if (stack_len)
            it = stack_items[--stack_len];
        pthread_mutex_unlock(&stack_mu);
        if (it.p) {
            free_obj(it.p, it.n, it.tag, "freer");
            atomic_fetch_add(&freed_total, 1);
        } else if (alive == 0) {
            return NULL;
        } else {
            sched_yield();
        }
    }
}

TEST(exiting_owners)
{
    enum { NOWN = 6, NFREE = 3, ROUNDS = 6 };
    atomic_store(&errors, 0);
    stack_cap = (size_t)NOWN * 1500;
    stack_items = T_MALLOC(stack_cap * sizeof *stack_items);
    EXPECT_NONNULL(stack_items);
    if (!stack_items)
        return;
    long expected = 0;
    atomic_store(&freed_total, 0);
    for (int round = 0; round < ROUNDS; round++) {
        pthread_t own[NOWN], fr[NFREE];
        int seeds[NOWN];
        atomic_store(&owners_alive, NOWN);
        for (int i = 0; i < NFREE; i++)
            EXPECT_EQ_I(pthread_create(&fr[i], NULL, freer, NULL), 0);
        for (int i = 0; i < NOWN; i++) {
            seeds[i] = round * NOWN + i;
            EXPECT_EQ_I(pthread_create(&own[i], NULL, short_lived_owner,
                                       &seeds[i]),
                        0);
        }
        for (int i = 0; i < NOWN; i++)
            pthread_join(own[i], NULL);
        for (int i = 0; i < NFREE; i++)
            pthread_join(fr[i], NULL);
        EXPECT_EQ_U(stack_len, 0);
        expected += (long)NOWN * SCALE(1500);
    }
    EXPECT(atomic_load(&freed_total) == expected, "freed %ld of %ld objects",
           atomic_load(&freed_total), expected);
    T_FREE(stack_items);
    EXPECT_EQ_I(atomic_load(&errors), 0);
}

/* ---------------- thread churn ---------------- */
/* Many short-lived threads, each with a thread cache: what they leave
 * behind must be reused, so a second wave of threads does not grow the
 * resident set the way the first did. */
#define CHURN_OBJS 64
struct churn_arg {
    int seed;
    struct item keep[CHURN_OBJS / 2];
};

static void *churn_thread(void *argp)
{
    struct churn_arg *a = argp;
    uint64_t rng = 31337 + (uint64_t)a->seed;
    struct item local[CHURN_OBJS];
    for (int i = 0; i < CHURN_OBJS; i++) {
        local[i].p = alloc_obj(&rng, &local[i].n, &local[i].tag);
        if (local[i].n > 65536 && local[i].p) { /* keep churn small */
            free_obj(local[i].p, local[i].n, local[i].tag, "churn big");
            local[i].p = T_MALLOC(64);
            local[i].n = local[i].p ? 64 : 0;
            local[i].tag = 0;
            if (local[i].p)
                obj_fill(local[i].p, 64, 0);
        }
    }
    for (int i = 0; i < CHURN_OBJS; i++) {
        if (i % 2 && local[i].p)
            free_obj(local[i].p, local[i].n, local[i].tag, "churn local");
        else
            a->keep[i / 2] = local[i]; /* freed by the main thread */
    }
    return NULL;
}

/* The process's resident set; under TSan, dpmalloc's active pages
 * (stats.active: slabs, cached blocks included, and large blocks): there
 * the resident set moves by tens of MiB from run to run with TSan's
 * per-thread state and the free pages waiting for decay (three waves of
 * 200 threads: +41, -13, +45 MiB; once +66 MiB failed CI; dpmalloc's
 * stats.resident +65 MiB), where stats.active stayed within 14-19 MiB. */
static size_t resident_bytes(void)
{
#if TEST_TSAN && defined(STRESS_DPM_API)
    uint64_t e = 1;
    size_t v = 0, len = sizeof e;
    dpm_ctl("epoch", &e, &len, &e, sizeof e);
    len = sizeof v;
    if (dpm_ctl("stats.active", &v, &len, NULL, 0) != 0)
        atomic_fetch_add(&errors, 1);
    return v;
#endif
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%lu %lu", &size, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return (size_t)rss * (size_t)sysconf(_SC_PAGESIZE);
}

static void churn_wave(int wave, int nthreads)
{
    enum { BATCH = 8 };
    static struct churn_arg args[BATCH];
    for (int base = 0; base < nthreads; base += BATCH) {
        pthread_t t[BATCH];
        for (int i = 0; i < BATCH; i++) {
            args[i].seed = wave * 100000 + base + i;
            if (pthread_create(&t[i], NULL, churn_thread, &args[i]) != 0) {
                atomic_fetch_add(&errors, 1);
                t[i] = pthread_self();
            }
        }
        for (int i = 0; i < BATCH; i++) {
            if (pthread_equal(t[i], pthread_self()))
                continue;
            pthread_join(t[i], NULL);
            for (int k = 0; k < CHURN_OBJS / 2; k++)
                if (args[i].keep[k].p)
                    free_obj(args[i].keep[k].p, args[i].keep[k].n,
                             args[i].keep[k].tag, "churn remote");
        }
    }
}

TEST(thread_churn)
{
    int n = TEST_TSAN ? 200 : 1000;
    atomic_store(&errors, 0);
    churn_wave(0, n); /* warm-up: caches, arenas, stacks */
    size_t r1 = resident_bytes();
    churn_wave(1, n);
    size_t r2 = resident_bytes();
    churn_wave(2, n);
    size_t r3 = resident_bytes();
    fprintf(stderr, "resident after waves: %zu, %zu, %zu KiB\n", r1 >> 10,
            r2 >> 10, r3 >> 10);
    /* thousands of dead threads' caches must not pile up */
    EXPECT(r3 < r1 + ((size_t)64 << 20),
           "resident set grew from %zu to %zu KiB over %d more threads", r1 >> 10,
           r3 >> 10, 2 * n);
    EXPECT_EQ_I(atomic_load(&errors), 0);
}

int main(void)
{
#ifndef STRESS_DPM_API
    RUN(override_in_effect);
#endif
    RUN(shared_slots);
    RUN(producer_consumer);
    RUN(exiting_owners);
    RUN(thread_churn);
    return test_done();
}
