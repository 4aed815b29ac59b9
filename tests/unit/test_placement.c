/*
 * test_placement.c - the page heap's placement and purge rules, driven
 * through ph_* on a fresh manual arena with ph_check after every step:
 *   - holes: freed runs that fit are reused before a new segment is
 *     mapped, and a run that fits exactly in the request's own length slot
 *     is taken over a much longer one (no room-to-grow reservation);
 *   - purging in batches: runs taken for a purge are busy (never handed
 *     out, grown into or merged) until filed back; a batch is bounded in
 *     runs and pages; the pages released are reported;
 *   - carving keeps age: what is left of a free run after a block is cut
 *     from it (aligned or not) keeps the run's place in the decay order,
 *     so decay still finds it oldest first;
 *   - hugetlb segments: runs without a whole huge page are retained with
 *     no kernel call and never retried; with real huge pages (if the
 *     system has some), a purge never destroys live data next to the run
 *     and a run is clean only if it reads as zero.
 */
#include "arena.h"
#include "dpmalloc.h"
#include "os.h"
#include "unit.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE ((size_t)2 << 20)

static page_heap_t *ph;
static arena_t *arena;

static page_heap_t *fresh_heap(bool hugepages)
{
    unsigned index;
    EXPECT_TRUE(arena_create_manual("placement", NULL, -1, &index) == 0, "arena_create_manual failed");
    arena = arena_get(index);
    arena->ph.options.hugepages = hugepages;
    arena->dirty_decay_ms = arena->muzzy_decay_ms = -1;   /* only the test purges */
    return &arena->ph;
}

static span_t *alloc_pages(size_t npages)
{
    page_request_t r = {.npages = npages, .align = PAGE, .phase = 0};
    bool zeroed;
    span_t *s = ph_alloc(ph, &r, &zeroed);
    EXPECT_TRUE(s != NULL, "ph_alloc(%zu pages) failed", npages);
    return s;
}

static void check(const char *when)
{
    EXPECT_TRUE(ph_check(ph), "page heap invariants broken %s", when);
}

/* 200 blocks of 56 pages, every other one freed, 100 allocated again:
 * every new block lands in a hole and no segment is mapped. */
static void test_holes_reused(void)
{
    enum { N = 200, LEN = 56 };
    static span_t *s[N];
    static uintptr_t hole[N / 2];
    mutex_lock(&arena->lock);
    for (int i = 0; i < N; i++)
        s[i] = alloc_pages(LEN);
    for (int i = 0; i < N; i += 2) {
        hole[i / 2] = s[i]->start;
        ph_free(ph, s[i], 1);
    }
    check("after freeing every other block");
    uint64_t segments = ph->nsegments_mapped;
    size_t mapped = ph->mapped_bytes;
    for (int i = 0; i < N; i += 2) {
        s[i] = alloc_pages(LEN);
        bool in_hole = false;
        for (int h = 0; h < N / 2; h++)
            in_hole |= s[i]->start == hole[h];
        EXPECT_TRUE(in_hole, "block %d placed at %#lx, not in one of the %d holes", i, (unsigned long)s[i]->start,
                    N / 2);
    }
    EXPECT_EQ_U(ph->nsegments_mapped, segments);
    EXPECT_EQ_U(ph->mapped_bytes, mapped);
    check("after refilling the holes");
    for (int i = 0; i < N; i++)
        ph_free(ph, s[i], 2);
    mutex_unlock(&arena->lock);
}

/* A 57-page hole between live blocks and a long free run after them: a
 * 57-page request takes the hole (its own slot's head), though the
 * rounded-up TLSF search would skip its slot and a room-to-grow search
 * would want 228 pages. */
static void test_exact_hole_first(void)
{
    mutex_lock(&arena->lock);
    span_t *left = alloc_pages(3), *mid = alloc_pages(57), *right = alloc_pages(3);
    uintptr_t at = mid->start;
    ph_free(ph, mid, 5);
    span_t *again = alloc_pages(57);
    EXPECT_TRUE(again->start == at, "57 pages placed at %#lx, the 57-page hole is at %#lx",
                (unsigned long)again->start, (unsigned long)at);
    /* a smaller request in the same slot also takes the hole first */
    ph_free(ph, again, 6);
    span_t *smaller = alloc_pages(56);
    EXPECT_TRUE(smaller->start == at, "56 pages placed at %#lx, the 57-page hole is at %#lx",
                (unsigned long)smaller->start, (unsigned long)at);
    check("after exact-fit placement");
    ph_free(ph, smaller, 7);
    ph_free(ph, left, 7);
    ph_free(ph, right, 7);
    mutex_unlock(&arena->lock);
}

static bool overlaps(const span_t *s, uintptr_t from, size_t bytes)
{
    return s->start < from + bytes && from < span_end(s);
}

/* Runs taken for a purge are out of reach until they are filed back. */
static void test_busy_runs(void)
{
    enum { N = 2 * PH_PURGE_MAX_RUNS };   /* every other one freed: a batch takes them all */
    span_t *s[N];
    static purge_batch_t b;
    mutex_lock(&arena->lock);
    ph_decay(ph, 50000000, 0, 0);
    for (int i = 0; i < N; i++)
        s[i] = alloc_pages(4 + i % 5);
    for (int i = 0; i < N; i += 2)
        ph_free(ph, s[i], 10);
    size_t dirty = ph->free_runs[RUN_DIRTY].npages;
    size_t taken = ph_purge_take(ph, 100000000, 0, 0, SIZE_MAX, &b);
    EXPECT_TRUE(taken == dirty && b.n >= N / 2, "took %zu pages in %u runs of %zu dirty", taken, b.n, dirty);
    EXPECT_EQ_U(ph->busy_pages, taken);
    check("with busy runs");
    /* allocations never get busy pages, grows never take them, frees next
     * to them do not merge with them */
    for (int k = 0; k < 20; k++) {
        span_t *t = alloc_pages(1 + k % 9);
        for (unsigned j = 0; j < b.n; j++)
            EXPECT_TRUE(!overlaps(t, b.item[j].run->start, span_bytes(b.item[j].run)),
                        "allocation overlaps a run being purged");
        ph_free(ph, t, 11);
    }
    EXPECT_TRUE(!ph_grow(ph, s[1], s[1]->npages + 1), "grew into a run being purged");
    ph_free(ph, s[1], 12);
    s[1] = NULL;
    check("after a free next to busy runs");
    ph_purge_run(&b);
    size_t released = ph_purge_finish(ph, &b, 100000000);
    EXPECT_EQ_U(released, taken);
    EXPECT_EQ_U(ph->busy_pages, 0);
    EXPECT_EQ_U(b.n, 0);
    check("after the batch is filed back");
    for (int i = 3; i < N; i += 2)
        ph_free(ph, s[i], 13);
    mutex_unlock(&arena->lock);
}

/* One batch takes at most PH_PURGE_MAX_RUNS runs and PH_PURGE_MAX_PAGES
 * pages (a longer run is cut, its rest stays first in line). */
static void test_batch_bounds(void)
{
    enum { N = 2 * PH_PURGE_MAX_RUNS + 10 };
    static span_t *s[2 * N];
    static purge_batch_t b;
    mutex_lock(&arena->lock);
    ph_decay(ph, 200000000, 0, 0);
    for (int i = 0; i < 2 * N; i++)
        s[i] = alloc_pages(2);
    for (int i = 0; i < 2 * N; i += 2)
        ph_free(ph, s[i], 20);
    ph_purge_take(ph, 300000000, 0, 0, SIZE_MAX, &b);
    EXPECT_EQ_U(b.n, PH_PURGE_MAX_RUNS);
    ph_purge_run(&b);
    EXPECT_EQ_U(ph_purge_finish(ph, &b, 300000000), 2 * PH_PURGE_MAX_RUNS);
    EXPECT_EQ_U(ph->free_runs[RUN_DIRTY].nruns, N - PH_PURGE_MAX_RUNS);
    check("after a bounded batch of runs");
    for (int i = 1; i < 2 * N; i += 2)
        ph_free(ph, s[i], 21);
    ph_decay(ph, 300000000, 0, 0);

    span_t *big = alloc_pages(PH_PURGE_MAX_PAGES + 1000), *guard = alloc_pages(1);
    ph_free(ph, big, 22);
    ph_decay(ph, 300000000, -1, -1);   /* nothing due: nothing taken */
    size_t dirty = ph->free_runs[RUN_DIRTY].npages;
    size_t taken = ph_purge_take(ph, 400000000, 0, 0, SIZE_MAX, &b);
    EXPECT_EQ_U(taken, PH_PURGE_MAX_PAGES);
    check("with a cut run busy");
    ph_purge_run(&b);
    ph_purge_finish(ph, &b, 400000000);
    EXPECT_EQ_U(ph->free_runs[RUN_DIRTY].npages, dirty - PH_PURGE_MAX_PAGES);
    EXPECT_EQ_U(ph_decay(ph, 500000000, 0, 0), dirty - PH_PURGE_MAX_PAGES);
    EXPECT_EQ_U(ph->free_runs[RUN_DIRTY].npages, 0);
    check("after purging the rest");
    ph_free(ph, guard, 23);
    mutex_unlock(&arena->lock);
}

/* A segment marked hugetlb (whatever backs it): runs with no whole huge
 * page become retained with no kernel call and are not retried; a run
 * with some has only those purged. */
static void test_hugetlb_rules(void)
{
    mutex_lock(&arena->lock);
    ph_decay(ph, 600000000, 0, 0);
    span_t *a = alloc_pages(16);
    segment_t *seg = a->seg;
    bool was = seg->hugetlb;
    seg->hugetlb = true;
    span_t *b = alloc_pages(16), *c = alloc_pages(2 * HUGE / PAGE), *d = alloc_pages(1);
    ph_free(ph, b, 30);
    uint64_t calls = ph->npurge_calls, retained = ph->nretained;
    size_t released = ph_decay(ph, 700000000, 0, 0);
    EXPECT_EQ_U(released, 0);
    EXPECT_EQ_U(ph->npurge_calls, calls);
    EXPECT_EQ_U(ph->nretained, retained + 1);
    EXPECT_EQ_U(ph->free_runs[RUN_RETAINED].npages, 16);
    check("with a retained run");
    ph_decay(ph, 800000000, 0, 0);
    EXPECT_EQ_U(ph->npurge_calls, calls);   /* not retried */
    EXPECT_EQ_U(ph->nretained, retained + 1);
    /* still reused by allocation */
    span_t *again = alloc_pages(16);
    EXPECT_EQ_U(ph->free_runs[RUN_RETAINED].npages, 0);
    ph_free(ph, again, 31);
    ph_decay(ph, 900000000, 0, 0);
    /* 2 huge pages of c, not aligned: only the whole one inside is purged */
    uintptr_t lo = (c->start + HUGE - 1) & ~(HUGE - 1);
    size_t whole = (((span_end(c)) & ~(HUGE - 1)) - lo) / PAGE;
    ph_free(ph, c, 32);
    released = ph_decay(ph, 1000000000, 0, 0);
    EXPECT_TRUE(released >= whole && released % (HUGE / PAGE) == 0, "released %zu pages, %zu in whole huge pages",
                released, whole);
    check("after a partial hugetlb purge");
    ph_free(ph, a, 33);
    ph_free(ph, d, 33);
    seg->hugetlb = was;
    mutex_unlock(&arena->lock);
}

static size_t huge_pages_free(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[128];
    size_t n = 0;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "HugePages_Free: %zu", &n) == 1)
            break;
    if (f != NULL)
        fclose(f);
    return n;
}

/* With real huge pages: a purge result claims "zeroed" only for memory
 * that reads as zero, and never touches live data beside the range. */
static void test_real_hugetlb(void)
{
    if (huge_pages_free() < 1) {
        printf("test_placement: no free huge pages (vm.nr_hugepages): real hugetlb checks skipped\n");
        return;
    }
    unsigned char *m = os_map_huge(HUGE, HUGE);
    EXPECT_TRUE(m != NULL, "os_map_huge failed though huge pages are free");
    if (m == NULL)
        return;
    memset(m, 0xab, HUGE);
    enum purge_result got = os_purge_lazy(m, 16 * PAGE);
    if (got == PURGE_ZEROED)
        EXPECT_TRUE(m[0] == 0 && m[16 * PAGE - 1] == 0, "lazy purge of hugetlb pages said zeroed, reads %#x",
                    m[0]);
    EXPECT_TRUE(m[16 * PAGE] == 0xab && m[HUGE - 1] == 0xab, "purging 64 KiB of a huge page lost live data");
    got = os_purge_now(m, HUGE);
    EXPECT_TRUE(got == PURGE_NONE || (m[0] == 0 && m[HUGE - 1] == 0), "purge of a whole huge page: %d, reads %#x",
                (int)got, m[0]);
    os_unmap(m, HUGE);

    /* through a page heap whose segments come from huge pages */
    unsigned index;
    EXPECT_TRUE(arena_create_manual("placement-huge", NULL, -1, &index) == 0, "arena_create_manual failed");
    arena_t *h = arena_get(index);
    h->ph.options.hugepages = true;
    mutex_lock(&h->lock);
    page_heap_t *hp = &h->ph;
    page_request_t r = {.npages = 16, .align = HUGE, .phase = 0};
    bool zeroed;
    span_t *p = ph_alloc(hp, &r, &zeroed);
    r.align = PAGE;
    span_t *q = ph_alloc(hp, &r, &zeroed);
    EXPECT_TRUE(p != NULL && q != NULL && p->seg->hugetlb, "no hugetlb segment though huge pages are free");
    if (p != NULL && q != NULL && p->seg->hugetlb) {
        EXPECT_TRUE(p->start % HUGE == 0, "aligned request at %#lx", (unsigned long)p->start);
        memset((void *)p->start, 0xcd, span_bytes(p));
        memset((void *)q->start, 0xef, span_bytes(q));
        uintptr_t pstart = p->start;
        size_t pool = huge_pages_free();
        ph_free(hp, p, 1);
        uint64_t calls = hp->npurge_calls;
        ph_decay(hp, 2000000000, 0, 0);
        EXPECT_TRUE(((unsigned char *)q->start)[0] == 0xef, "live data next to a purged hugetlb run lost");
        ph_decay(hp, 13000000000u, 0, 0);
        /* q sits in the segment's first huge page; the free run from q to
         * the segment's end holds whole huge pages: decay purged them in
         * one call, and they went back to the system's pool */
        EXPECT_EQ_U(hp->npurge_calls, calls + 1);
        EXPECT_TRUE(huge_pages_free() >= pool + 1, "pool had %zu free, now %zu", pool, huge_pages_free());
        EXPECT_TRUE(((unsigned char *)q->start)[0] == 0xef, "live data next to a purged hugetlb run lost");
        /* what is left of the run (edges inside q's huge page) stays
         * retained: no later decay tries it again */
        calls = hp->npurge_calls;
        ph_decay(hp, 30000000000u, 0, 0);
        EXPECT_EQ_U(hp->npurge_calls, calls);
        r.npages = 16;
        span_t *z = ph_alloc(hp, &r, &zeroed);
        if (z != NULL && z->start == pstart)
            EXPECT_TRUE(!zeroed || ((unsigned char *)z->start)[0] == 0, "a run said clean reads %#x",
                        ((unsigned char *)z->start)[0]);
        EXPECT_TRUE(ph_check(hp), "hugetlb heap invariants broken");
        if (z != NULL)
            ph_free(hp, z, 4);
    }
    if (q != NULL)
        ph_free(hp, q, 4);
    ph_decay(hp, 4000000000u, 0, 0);
    EXPECT_EQ_U(hp->nsegments, 0);   /* a wholly free hugetlb segment goes back */
    mutex_unlock(&h->lock);
}

/* Two dirty runs, A (40 pages, freed at 11 s) and B (64 pages, 12 s),
 * kept apart by live blocks; a block is cut from A (best fit), once
 * plainly and once aligned. At 12.5 s a 1 s dirty decay is due for what is
 * left of A but not for B: decay walks oldest first and stops at the first
 * run that is not due, so A's rest must still come before B. */
static void test_carve_keeps_age(size_t npages, size_t align)
{
    page_heap_t *saved_ph = ph;
    arena_t *saved_arena = arena;
    ph = fresh_heap(false);   /* nothing else to merge with or to fit */
    mutex_lock(&arena->lock);
    span_t *a = alloc_pages(40), *sep1 = alloc_pages(1), *b = alloc_pages(64), *sep2 = alloc_pages(1);
    uintptr_t a_start = a->start;
    ph_free(ph, a, 11000000000u);
    ph_free(ph, b, 12000000000u);
    page_request_t r = {.npages = npages, .align = align, .phase = 0};
    bool zeroed;
    span_t *cut = ph_alloc(ph, &r, &zeroed);
    EXPECT_TRUE(cut != NULL && cut->start >= a_start && span_end(cut) <= a_start + 40 * PAGE,
                "the block was not cut from the best-fitting run");
    check("after a carve");
    purge_batch_t batch;
    size_t taken = ph_purge_take(ph, 12500000000u, 1000, 0, PH_PURGE_MAX_PAGES, &batch);
    EXPECT_TRUE(taken == 40 - npages, "decay took %zu pages, expected the %zu left of the older run", taken,
                40 - npages);
    ph_purge_run(&batch);
    ph_purge_finish(ph, &batch, 12500000000u);
    check("after the purge");
    ph_free(ph, cut, 13000000000u);
    ph_free(ph, sep1, 13000000000u);
    ph_free(ph, sep2, 13000000000u);
    ph_decay(ph, 15000000000u, 0, 0);
    EXPECT_EQ_U(ph->active_pages, 0);
    EXPECT_EQ_U(ph->nsegments, 0);
    check("after freeing all");
    mutex_unlock(&arena->lock);
    ph = saved_ph;
    arena = saved_arena;
}

int main(void)
{
    dpm_free(dpm_malloc(1));   /* brings the allocator up */
    ph = fresh_heap(false);
    test_holes_reused();
    test_exact_hole_first();
    test_busy_runs();
    test_batch_bounds();
    test_hugetlb_rules();
    test_carve_keeps_age(20, PAGE);
    test_carve_keeps_age(4, 4 * PAGE);
    EXPECT_TRUE(os_lazy_purge_supported(), "MADV_FREE probe failed on a kernel that has it");
    mutex_lock(&arena->lock);
    ph_decay(ph, 5000000000u, 0, 0);
    EXPECT_EQ_U(ph->active_pages, 0);
    EXPECT_EQ_U(ph->nsegments, 0);
    check("at the end");
    mutex_unlock(&arena->lock);
    test_real_hugetlb();
    return unit_finish("test_placement");
}
