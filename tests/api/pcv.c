/*
 * pcv.c - per-core variables (include/dpmalloc/pcv.h, docs/pcv.md).
 *
 * Proves: slots are dense (the lowest free one at first use) and go back
 * at thread exit, keeping their values for the next thread; explicit slots
 * (EINVAL past the count, EBUSY while another live thread holds one, the
 * old slot freed on a move); dpm_pcv_at, dpm_pcv_this and
 * dpm_pcv_this_noinline agree; variables
 * of odd sizes and alignments honour the alignment in every slot, stay
 * inside their slot's region, and no 128-byte line (nor page) holds bytes
 * of two slots; new variables read zero in every slot, also when they
 * reuse a freed variable's space; pointers and values survive growth of
 * the regions; alignment and size errors, a full offset space (ENOMEM)
 * and a full slot table (EAGAIN); threads bumping their own counters sum
 * exactly over the slots in use, across thread exits; the first touch of
 * a slot's pages is made by the thread that takes it (resident before it
 * writes, on its CPU's NUMA node by get_mempolicy); a fork child frees the
 * other threads' slots; bad or double frees of handles abort with the
 * exact message.
 * Runs under the default options (api_pcv) and with 8 slots of 64 KiB
 * (api_pcv_small: DPMALLOC_CONF=pcv_slots:8,pcv_size:65536). dpm_ API
 * only: label sanitize.
 */
#include "test.h"

#include <dpmalloc.h>
#include <dpmalloc/pcv.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static unsigned nslots;
static size_t pcv_size;

typedef void *(*thread_fn)(void *);

static void run_thread(thread_fn fn, void *arg)
{
    pthread_t t;
    if (pthread_create(&t, NULL, fn, arg) != 0) {
        TEST_FAIL("pthread_create");
        return;
    }
    pthread_join(t, NULL);
}

/* A thread that takes a slot (its own choice or `want`), reports it and
 * holds it until released. */
struct holder {
    pthread_t t;
    unsigned want;       /* DPM_PCV_NO_SLOT: the lowest free one */
    int set_rc;
    unsigned slot;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool ready, release;
};

static void *holder_main(void *arg)
{
    struct holder *h = arg;
    unsigned slot;
    int rc = 0;
    if (h->want != DPM_PCV_NO_SLOT)
        rc = dpm_thread_set_slot(h->want);
    slot = dpm_thread_slot();
    pthread_mutex_lock(&h->lock);
    h->set_rc = rc;
    h->slot = slot;
    h->ready = true;
    pthread_cond_broadcast(&h->cond);
    while (!h->release)
        pthread_cond_wait(&h->cond, &h->lock);
    pthread_mutex_unlock(&h->lock);
    return NULL;
}

static void holder_start(struct holder *h, unsigned want)
{
    memset(h, 0, sizeof *h);
    h->want = want;
    pthread_mutex_init(&h->lock, NULL);
    pthread_cond_init(&h->cond, NULL);
    if (pthread_create(&h->t, NULL, holder_main, h) != 0) {
        TEST_FAIL("pthread_create");
        h->slot = DPM_PCV_NO_SLOT;
        return;
    }
    pthread_mutex_lock(&h->lock);
    while (!h->ready)
        pthread_cond_wait(&h->cond, &h->lock);
    pthread_mutex_unlock(&h->lock);
}

static void holder_stop(struct holder *h)
{
    pthread_mutex_lock(&h->lock);
    h->release = true;
    pthread_cond_broadcast(&h->cond);
    pthread_mutex_unlock(&h->lock);
    pthread_join(h->t, NULL);
    pthread_mutex_destroy(&h->lock);
    pthread_cond_destroy(&h->cond);
}

static void *report_slot(void *arg)
{
    *(unsigned *)arg = dpm_thread_slot();
    return NULL;
}

static bool slot_in_use(unsigned s) { return dpm_pcv_next_slot(s) == s; }

TEST(slots_dense_and_recycled)
{
    /* the first test: nothing held a slot before */
    EXPECT_EQ_U(dpm_pcv_next_slot(0), DPM_PCV_NO_SLOT);
    EXPECT_EQ_U(dpm_thread_slot(), 0);
    EXPECT_EQ_U(dpm_thread_slot(), 0);
    EXPECT_TRUE(slot_in_use(0));
    struct holder h[3];
    for (int i = 0; i < 3; i++)
        holder_start(&h[i], DPM_PCV_NO_SLOT);
    for (int i = 0; i < 3; i++)
        EXPECT_EQ_U(h[i].slot, (unsigned)i + 1);
    holder_stop(&h[1]);
    unsigned got = DPM_PCV_NO_SLOT;
    run_thread(report_slot, &got);
    EXPECT_EQ_U(got, 2);   /* h[1]'s slot came back at its exit */
    holder_stop(&h[0]);
    holder_stop(&h[2]);
    run_thread(report_slot, &got);
    EXPECT_EQ_U(got, 1);
    for (unsigned s = 0; s < 4; s++)
        EXPECT_TRUE(slot_in_use(s));
}

struct value_arg {
    dpm_pcv_t h;
    uint64_t write, seen;
    unsigned slot;
};

static void *write_value(void *arg)
{
    struct value_arg *a = arg;
    uint64_t *v = dpm_pcv_this(a->h);
    a->slot = dpm_thread_slot();
    a->seen = *v;
    *v = a->write;
    return NULL;
}

TEST(recycled_slot_keeps_values)
{
    dpm_pcv_t h = dpm_pcv_alloc(sizeof(uint64_t), 0);
    EXPECT_TRUE(dpm_pcv_valid(h));
    struct value_arg a = {.h = h, .write = 0xa11ce};
    run_thread(write_value, &a);
    EXPECT_EQ_U(a.seen, 0);
    struct value_arg b = {.h = h, .write = 0xb0b};
    run_thread(write_value, &b);
    EXPECT_EQ_U(b.slot, a.slot);
    EXPECT_EQ_U(b.seen, 0xa11ce);
    EXPECT_EQ_U(*(uint64_t *)dpm_pcv_at(h, a.slot), 0xb0b);
    dpm_pcv_free(h);
}

TEST(explicit_slots)
{
    unsigned mine = dpm_thread_slot(), last = nslots - 1;
    EXPECT_EQ_I(dpm_thread_set_slot(nslots), EINVAL);
    EXPECT_EQ_I(dpm_thread_set_slot(~0u), EINVAL);
    EXPECT_EQ_I(dpm_thread_set_slot(mine), 0);
    dpm_pcv_t v = dpm_pcv_alloc(4, 4);
    struct holder x;
    holder_start(&x, last);
    EXPECT_EQ_I(x.set_rc, 0);
    EXPECT_EQ_U(x.slot, last);
    EXPECT_EQ_I(dpm_thread_set_slot(last), EBUSY);
    EXPECT_EQ_U(dpm_thread_slot(), mine);
    holder_stop(&x);
    EXPECT_EQ_I(dpm_thread_set_slot(last), 0);
    EXPECT_EQ_U(dpm_thread_slot(), last);
    EXPECT_EQ_U((uintptr_t)dpm_pcv_this(v), dpm_pcv_at(v, last));
    unsigned got = DPM_PCV_NO_SLOT;
    run_thread(report_slot, &got);
    EXPECT_EQ_U(got, mine);   /* the move gave the old slot back */
    EXPECT_EQ_I(dpm_thread_set_slot(mine), 0);
    dpm_pcv_free(v);
}

#define NAGREE 6
static dpm_pcv_t agree_vars[NAGREE];

static void *check_agree(void *arg)
{
    int *bad = arg;
    unsigned s = dpm_thread_slot();
    for (int i = 0; i < NAGREE; i++) {
        char *p = dpm_pcv_this(agree_vars[i]);
        if (p == NULL || p != dpm_pcv_at(agree_vars[i], s) || p != dpm_pcv_this_noinline(agree_vars[i]))
            (*bad)++;
    }
    return NULL;
}

TEST(this_and_at_agree)
{
    for (int i = 0; i < NAGREE; i++)
        agree_vars[i] = dpm_pcv_alloc((size_t)i * 37 + 1, (size_t)1 << i);
    int bad[4] = {0};
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, check_agree, &bad[i]);
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        EXPECT_EQ_I(bad[i], 0);
    }
    check_agree(&bad[0]);
    EXPECT_EQ_I(bad[0], 0);
    for (int i = 0; i < NAGREE; i++)
        dpm_pcv_free(agree_vars[i]);
}

#define NVARS 150
static const size_t aligns[] = {0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 4096};

/* Open every slot; variables of odd sizes and alignments: aligned in
 * every slot, within the slot's own region, no 128-byte line or page
 * shared between two slots, and each slot's bytes its own. */
TEST(layout_alignment_and_lines)
{
    static dpm_pcv_t h[NVARS];
    static size_t size[NVARS], align[NVARS];
    uint64_t rng = 11;
    for (int i = 0; i < NVARS; i++) {
        size[i] = 1 + test_rand(&rng) % 300;
        align[i] = aligns[test_rand(&rng) % (sizeof aligns / sizeof aligns[0])];
        if (pcv_size <= 65536 && align[i] == 4096)
            align[i] = 64;   /* keep the small configuration from filling up */
        h[i] = dpm_pcv_alloc(size[i], align[i]);
        EXPECT(dpm_pcv_valid(h[i]), "var %d size %zu align %zu", i, size[i], align[i]);
    }
    uintptr_t *lo = calloc(nslots, sizeof *lo), *hi = calloc(nslots, sizeof *hi);
    for (unsigned s = 0; s < nslots; s++) {
        lo[s] = UINTPTR_MAX;
        for (int i = 0; i < NVARS; i++) {
            unsigned char *p = dpm_pcv_at(h[i], s);
            uintptr_t a = (uintptr_t)p;
            size_t want = align[i] ? align[i] : 16;
            EXPECT(a % want == 0, "slot %u var %d at %p not aligned to %zu", s, i, (void *)p, want);
            EXPECT(test_all_zero(p, size[i]), "slot %u var %d not zero", s, i);
            memset(p, (int)(s * 7 + (unsigned)i) | 1, size[i]);
            lo[s] = a < lo[s] ? a : lo[s];
            hi[s] = a + size[i] > hi[s] ? a + size[i] : hi[s];
        }
    }
    for (unsigned s = 0; s < nslots; s++) {
        EXPECT(hi[s] - lo[s] <= pcv_size, "slot %u spans %zu bytes", s, (size_t)(hi[s] - lo[s]));
        for (unsigned t = s + 1; t < nslots; t++) {
            /* lines (128 B) and pages (4 KiB) of the two slots are apart */
            for (uintptr_t unit = 128; unit <= 4096; unit *= 32) {
                uintptr_t s_first = lo[s] / unit, s_last = (hi[s] - 1) / unit;
                uintptr_t t_first = lo[t] / unit, t_last = (hi[t] - 1) / unit;
                EXPECT(s_last < t_first || t_last < s_first,
                       "slots %u and %u share a %zu-byte unit", s, t, (size_t)unit);
            }
        }
    }
    for (unsigned s = 0; s < nslots; s++)
        for (int i = 0; i < NVARS; i++) {
            unsigned char *p = dpm_pcv_at(h[i], s);
            unsigned char want = (unsigned char)((int)(s * 7 + (unsigned)i) | 1);
            size_t bad = 0;
            for (size_t k = 0; k < size[i]; k++)
                bad += p[k] != want;
            EXPECT(bad == 0, "slot %u var %d: %zu bytes overwritten", s, i, bad);
        }
    for (int i = 0; i < NVARS; i++)
        dpm_pcv_free(h[i]);
    free(lo);
    free(hi);
}

/* First fit puts a freed variable's successor of the same shape at the
 * same offset: it must read zero in every slot, written through this()
 * and at() before. Size 0 gets a unique handle. */
TEST(zero_on_alloc_and_reuse)
{
    for (int round = 0; round < 3; round++) {
        dpm_pcv_t a = dpm_pcv_alloc(200, 64);
        EXPECT_TRUE(dpm_pcv_valid(a));
        DPM_PCV_FOREACH_SLOT(s) {
            EXPECT(test_all_zero(dpm_pcv_at(a, s), 200), "round %d slot %u not zero", round, s);
            memset(dpm_pcv_at(a, s), 0xee, 200);
        }
        memset(dpm_pcv_this(a), 0xff, 200);
        dpm_pcv_free(a);
        dpm_pcv_t b = dpm_pcv_alloc(200, 64);
        EXPECT_EQ_U(b.id, a.id);
        DPM_PCV_FOREACH_SLOT(s)
            EXPECT(test_all_zero(dpm_pcv_at(b, s), 200), "round %d slot %u: reused bytes not zero", round, s);
        dpm_pcv_free(b);
    }
    dpm_pcv_t z1 = dpm_pcv_alloc(0, 1), z2 = dpm_pcv_alloc(0, 1);
    EXPECT_TRUE(dpm_pcv_valid(z1) && dpm_pcv_valid(z2));
    EXPECT_NE_U(z1.id, z2.id);
    dpm_pcv_free(z1);
    dpm_pcv_free(z2);
    dpm_pcv_free(DPM_PCV_INVALID);   /* ignored */
}

/* Growth commits more of each region in place: earlier pointers keep
 * their address and value; the new variables work in every open slot. */
TEST(pointers_stable_across_growth)
{
    dpm_pcv_t first = dpm_pcv_alloc(64, 64);
    unsigned me = dpm_thread_slot();
    uint64_t *p_me = dpm_pcv_this(first), *p_last = dpm_pcv_at(first, nslots - 1);
    *p_me = 111;
    *p_last = 222;
    size_t chunk = pcv_size / 16, n = 0;
    dpm_pcv_t big[16];
    for (; n < 12; n++) {
        big[n] = dpm_pcv_alloc(chunk, 4096);
        EXPECT(dpm_pcv_valid(big[n]), "chunk %zu of %zu bytes", n, chunk);
        if (!dpm_pcv_valid(big[n]))
            break;
        DPM_PCV_FOREACH_SLOT(s) {
            char *q = dpm_pcv_at(big[n], s);
            q[0] = 1;
            q[chunk - 1] = 2;
        }
    }
    EXPECT_EQ_U((uintptr_t)dpm_pcv_this(first), p_me);
    EXPECT_EQ_U((uintptr_t)dpm_pcv_at(first, me), p_me);
    EXPECT_EQ_U((uintptr_t)dpm_pcv_at(first, nslots - 1), p_last);
    EXPECT_EQ_U(*p_me, 111);
    EXPECT_EQ_U(*p_last, 222);
    for (size_t i = 0; i < n; i++)
        dpm_pcv_free(big[i]);
    dpm_pcv_free(first);
}

TEST(errors_and_full_space)
{
    errno = 0;
    EXPECT_EQ_U(dpm_pcv_alloc(8, 3).id, 0);
    EXPECT_ERRNO(EINVAL);
    errno = 0;
    EXPECT_EQ_U(dpm_pcv_alloc(8, 8192).id, 0);
    EXPECT_ERRNO(EINVAL);
    errno = 0;
    EXPECT_EQ_U(dpm_pcv_alloc(pcv_size + 1, 8).id, 0);
    EXPECT_ERRNO(ENOMEM);
    errno = 0;
    EXPECT_NULL(dpm_pcv_at(DPM_PCV_INVALID, nslots));
    EXPECT_ERRNO(EINVAL);
    /* fill the offset space with 4 KiB variables, then nothing fits */
    size_t max = pcv_size / 4096 + 1, n = 0;
    dpm_pcv_t *v = calloc(max, sizeof *v);
    while (n < max) {
        dpm_pcv_t h = dpm_pcv_alloc(4096, 4096);
        if (!dpm_pcv_valid(h))
            break;
        v[n++] = h;
    }
    EXPECT_ERRNO(ENOMEM);
    EXPECT_EQ_U(n, pcv_size / 4096);
    errno = 0;
    EXPECT_EQ_U(dpm_pcv_alloc(1, 1).id, 0);
    EXPECT_ERRNO(ENOMEM);
    dpm_pcv_free(v[n / 2]);
    dpm_pcv_t again = dpm_pcv_alloc(4096, 8);
    EXPECT_EQ_U(again.id, v[n / 2].id);
    dpm_pcv_free(again);
    for (size_t i = 0; i < n; i++)
        if (i != n / 2)
            dpm_pcv_free(v[i]);
    free(v);
    dpm_pcv_t h = dpm_pcv_alloc(pcv_size, 4096);   /* the whole space, once empty */
    EXPECT_TRUE(dpm_pcv_valid(h));
    dpm_pcv_free(h);
}

struct bump_arg {
    dpm_pcv_t h;
    long iterations;
};

static void *bump(void *arg)
{
    struct bump_arg *a = arg;
    for (long i = 0; i < a->iterations; i++) {
        uint64_t *c = dpm_pcv_this(a->h);
        c[0]++;
        c[1] += 3;
    }
    return NULL;
}

/* Waves of threads bump their own counters; slots of exited threads keep
 * theirs, so the sums over the slots in use are exact. */
TEST(threads_sum_exactly)
{
    dpm_pcv_t h = dpm_pcv_alloc(24, 8);
    int nthreads = nslots > 8 ? 6 : (int)nslots - 2, waves = 3;
    long iterations = TEST_SANITIZED ? 20000 : 1000000;
    struct bump_arg a = {h, iterations};
    for (int w = 0; w < waves; w++) {
        pthread_t t[8];
        for (int i = 0; i < nthreads; i++)
            pthread_create(&t[i], NULL, bump, &a);
        for (int i = 0; i < nthreads; i++)
            pthread_join(t[i], NULL);
    }
    bump(&a);
    uint64_t sum = 0, sum3 = 0;
    DPM_PCV_FOREACH_SLOT(s) {
        uint64_t *c = dpm_pcv_at(h, s);
        sum += c[0];
        sum3 += c[1];
    }
    uint64_t want = (uint64_t)iterations * (uint64_t)(nthreads * waves + 1);
    EXPECT_EQ_U(sum, want);
    EXPECT_EQ_U(sum3, 3 * want);
    dpm_pcv_free(h);
}

struct try_arg {
    dpm_pcv_t h;
    void *p;
    int err;
    unsigned slot;
};

static void *try_take(void *arg)
{
    struct try_arg *a = arg;
    errno = 0;
    a->p = dpm_pcv_this(a->h);
    a->err = errno;
    a->slot = dpm_thread_slot();
    return NULL;
}

/* Every slot held by a live thread: the next thread gets NULL / EAGAIN,
 * and a slot once free again. Only with few slots (api_pcv_small). */
TEST(slot_table_full)
{
    if (nslots > 16) {
        fprintf(stderr, "  (skipped: %u slots; api_pcv_small runs it)\n", nslots);
        return;
    }
    dpm_pcv_t h = dpm_pcv_alloc(8, 8);
    struct holder *hold = calloc(nslots, sizeof *hold);
    unsigned n = 0;
    for (unsigned s = 0; s < nslots; s++)
        if (s != dpm_thread_slot())
            holder_start(&hold[n++], DPM_PCV_NO_SLOT);
    struct try_arg a = {.h = h};
    run_thread(try_take, &a);
    EXPECT_NULL(a.p);
    EXPECT_EQ_I(a.err, EAGAIN);
    EXPECT_EQ_U(a.slot, DPM_PCV_NO_SLOT);
    unsigned freed = hold[n - 1].slot;
    holder_stop(&hold[--n]);
    run_thread(try_take, &a);
    EXPECT_NONNULL(a.p);
    EXPECT_EQ_U(a.slot, freed);
    while (n > 0)
        holder_stop(&hold[--n]);
    free(hold);
    dpm_pcv_free(h);
}

/* ---- NUMA first touch --------------------------------------------------- */

#ifndef MPOL_F_NODE
#define MPOL_F_NODE (1 << 0)
#define MPOL_F_ADDR (1 << 1)
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static bool kernel_populates(void)
{
    void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    bool ok = p != MAP_FAILED && madvise(p, 4096, MADV_POPULATE_WRITE) == 0;
    if (p != MAP_FAILED)
        munmap(p, 4096);
    return ok;
}

struct touch_arg {
    dpm_pcv_t h;
    unsigned slot;
    int rc, resident, page_node, cpu_node;
    long mempolicy_rc;
};

static void *take_and_look(void *arg)
{
    struct touch_arg *a = arg;
    a->rc = dpm_thread_set_slot(a->slot);
    char *p = dpm_pcv_this(a->h);   /* looked at, never written */
    uintptr_t page = (uintptr_t)p & ~(uintptr_t)4095;
    unsigned char vec = 0;
    a->resident = mincore((void *)page, 4096, &vec) == 0 && (vec & 1);
    int node = -1;
    a->mempolicy_rc = syscall(SYS_get_mempolicy, &node, NULL, 0UL, (void *)p, (unsigned long)(MPOL_F_NODE | MPOL_F_ADDR));
    a->page_node = node;
    unsigned cpu = 0, cpu_node = 0;
    syscall(SYS_getcpu, &cpu, &cpu_node, NULL);
    a->cpu_node = (int)cpu_node;
    return NULL;
}

TEST(first_touch_by_owner)
{
    dpm_pcv_t h = dpm_pcv_alloc(64, 64);
    unsigned fresh = DPM_PCV_NO_SLOT;
    for (unsigned s = nslots; s-- > 0;)
        if (!slot_in_use(s)) {
            fresh = s;
            break;
        }
    if (fresh == DPM_PCV_NO_SLOT) {
        fprintf(stderr, "  (skipped: every slot is in use)\n");
        dpm_pcv_free(h);
        return;
    }
    struct touch_arg a = {.h = h, .slot = fresh};
    run_thread(take_and_look, &a);
    EXPECT_EQ_I(a.rc, 0);
    if (kernel_populates())
        EXPECT(a.resident, "slot %u's page not faulted in by its thread", fresh);
    else
        fprintf(stderr, "  (kernel without MADV_POPULATE_WRITE: residency not checked)\n");
    if (a.mempolicy_rc == 0)
        EXPECT_EQ_I(a.page_node, a.cpu_node);
    else
        fprintf(stderr, "  (get_mempolicy unavailable: %s)\n", strerror(errno));
    EXPECT_TRUE(test_all_zero(dpm_pcv_at(h, fresh), 64));
    dpm_pcv_free(h);
}

/* ---- fork and misuse ------------------------------------------------------ */

static unsigned held_by_thread;
static dpm_pcv_t fork_var;

static int child_after_fork(void *arg)
{
    (void)arg;
    unsigned mine = dpm_thread_slot();
    if (*(uint64_t *)dpm_pcv_at(fork_var, held_by_thread) != 77)
        return 1;
    if (dpm_thread_set_slot(held_by_thread) != 0)   /* its thread is gone */
        return 2;
    if (*(uint64_t *)dpm_pcv_this(fork_var) != 77)
        return 3;
    return dpm_thread_set_slot(mine) == 0 ? 0 : 4;
}

TEST(fork_child_frees_other_threads_slots)
{
    fork_var = dpm_pcv_alloc(8, 8);
    struct holder x;
    holder_start(&x, DPM_PCV_NO_SLOT);
    held_by_thread = x.slot;
    *(uint64_t *)dpm_pcv_at(fork_var, x.slot) = 77;
    struct test_child c;
    EXPECT_EQ_I(test_run_child(child_after_fork, NULL, &c, 30), 0);
    char why[96];
    EXPECT(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0, "child %s: %s",
           test_describe_status(c.status, why, sizeof why), c.err);
    EXPECT_EQ_I(dpm_thread_set_slot(x.slot), EBUSY);   /* in the parent it still lives */
    holder_stop(&x);
    dpm_pcv_free(fork_var);
}

static int free_twice(void *arg)
{
    (void)arg;
    dpm_pcv_t h = dpm_pcv_alloc(24, 8);
    dpm_pcv_free(h);
    dpm_pcv_free(h);
    return 0;
}

static int free_bogus(void *arg)
{
    (void)arg;
    dpm_pcv_t h = dpm_pcv_alloc(24, 8);
    dpm_pcv_free((dpm_pcv_t){h.id + 8});   /* inside the variable, not its start */
    return 0;
}

static void expect_abort(int (*fn)(void *), const char *want)
{
    struct test_child c;
    EXPECT_EQ_I(test_run_child(fn, NULL, &c, 30), 0);
    char why[96];
    EXPECT(WIFSIGNALED(c.status) && WTERMSIG(c.status) == SIGABRT, "child %s",
           test_describe_status(c.status, why, sizeof why));
    EXPECT(strstr(c.err, want) != NULL, "stderr \"%s\" lacks \"%s\"", c.err, want);
}

TEST(bad_frees_abort)
{
    /* the child allocates first in a fresh space of its own copy: the
     * handle it frees is predictable from the parent's free space */
    dpm_pcv_t probe = dpm_pcv_alloc(24, 8);
    dpm_pcv_free(probe);
    char want[96];
    snprintf(want, sizeof want, "dpmalloc: dpm_pcv_free(): invalid handle 0x%zx\n", probe.id);
    expect_abort(free_twice, want);
    snprintf(want, sizeof want, "dpmalloc: dpm_pcv_free(): invalid handle 0x%zx\n", probe.id + 8);
    expect_abort(free_bogus, want);
}

int main(void)
{
    nslots = dpm_pcv_slot_count();
    size_t len = sizeof pcv_size;
    if (nslots == 0 || dpm_ctl("opt.pcv_size", &pcv_size, &len, NULL, 0) != 0) {
        fprintf(stderr, "per-core variables unavailable\n");
        return 1;
    }
    fprintf(stderr, "%u slots of %zu bytes\n", nslots, pcv_size);
    RUN(slots_dense_and_recycled);
    RUN(recycled_slot_keeps_values);
    RUN(explicit_slots);
    RUN(this_and_at_agree);
    RUN(first_touch_by_owner);   /* before layout_... opens every slot */
    RUN(zero_on_alloc_and_reuse);
    RUN(pointers_stable_across_growth);
    RUN(errors_and_full_space);
    RUN(threads_sum_exactly);
    RUN(slot_table_full);
    RUN(fork_child_frees_other_threads_slots);
    RUN(layout_alignment_and_lines);
    RUN(bad_frees_abort);
    return test_done();
}
