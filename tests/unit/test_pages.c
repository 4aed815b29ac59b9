/*
 * test_pages.c - the page-run allocator of one arena driven by random
 * allocations (any length, alignment and phase), frees, in-place grows
 * and shrinks, and decay passes, with the whole-heap invariant checker
 * after every step. A purge batch may stay in flight (its runs busy)
 * across many steps, as it does while madvise runs outside the lock. Also checks that results are aligned as asked, never
 * overlap, are found through the address map (with the page-map tag of
 * their tcache_class, also after ph_set_tcache_class), and that runs
 * reported clean really read as zero.
 */
#include "arena.h"
#include "dpmalloc.h"
#include "unit.h"

#include <string.h>

#define NLIVE 400
#ifdef DPM_TEST_SANITIZED
#define STEPS 3000
#else
#define STEPS 20000
#endif

static span_t *live[NLIVE];
static purge_batch_t pending;
static bool in_flight;

static page_request_t random_request(uint64_t *rng)
{
    page_request_t r = {.npages = 1 + unit_rand(rng) % 16, .align = PAGE, .phase = 0};
    unsigned kind = unit_rand(rng) % 10;
    if (kind >= 7)
        r.npages = 1 + unit_rand(rng) % 600;
    if (kind == 9)
        r.npages = 1 + unit_rand(rng) % 3000;
    if (unit_rand(rng) % 4 == 0) {
        r.align = PAGE << (unit_rand(rng) % 12);   /* up to 8 MiB */
        r.phase = (unit_rand(rng) % (r.align / PAGE)) * PAGE;
    }
    return r;
}

static bool overlaps(const span_t *a, const span_t *b)
{
    return a->start < span_end(b) && b->start < span_end(a);
}

static void check_new_span(span_t *s, const page_request_t *r, bool zeroed, int slot)
{
    EXPECT_TRUE(s->npages == r->npages, "got %zu pages for %zu", s->npages, r->npages);
    EXPECT_TRUE(s->start % r->align == r->phase, "start %#lx align %zu phase %zu", (unsigned long)s->start,
                r->align, r->phase);
    EXPECT_TRUE(span_of((void *)s->start) == s, "address map misses a new span");
    EXPECT_TRUE(span_of((void *)(span_end(s) - 1)) == s, "address map misses a new span's last page");
    EXPECT_TRUE(radix_entry(s->start) == span_entry(s) && radix_entry_tag(radix_entry(s->start)) == 0,
                "a new span's page-map tag is not that of TC_NONE");
    for (int i = 0; i < NLIVE; i++)
        if (i != slot && live[i] != NULL)
            EXPECT_TRUE(!overlaps(s, live[i]), "spans overlap");
    unsigned char *first = (unsigned char *)s->start, *last = (unsigned char *)span_end(s) - 1;
    if (zeroed)
        EXPECT_TRUE(*first == 0 && *last == 0, "a clean run reads %d/%d", *first, *last);
    *first = 0xa5;
    *last = 0x5a;
}

int main(void)
{
    dpm_free(dpm_malloc(1));  /* brings the allocator up */
    unsigned index;
    EXPECT_TRUE(arena_create_manual("test_pages", NULL, -1, &index) == 0, "arena_create_manual failed");
    arena_t *a = arena_get(index);
    EXPECT_TRUE(a != NULL, "no arena");
    page_heap_t *ph = &a->ph;
    uint64_t rng = 99, now = 1000000000;
    for (int step = 0; step < STEPS; step++) {
        int i = (int)(unit_rand(&rng) % NLIVE);
        unsigned op = unit_rand(&rng) % 10;
        now += unit_rand(&rng) % 3000000;
        mutex_lock(&a->lock);
        if (live[i] == NULL) {
            page_request_t r = random_request(&rng);
            bool zeroed;
            live[i] = ph_alloc(ph, &r, &zeroed);
            EXPECT_TRUE(live[i] != NULL, "out of memory at step %d", step);
            if (live[i] != NULL)
                check_new_span(live[i], &r, zeroed, i);
            /* as large blocks get: ph_check then checks the re-tagging */
            if (live[i] != NULL && op < 5)
                ph_set_tcache_class(live[i], op < 3 ? (uint8_t)(unit_rand(&rng) % TC_NONE) : TC_NONE);
        } else if (op < 5) {
            ph_free(ph, live[i], now);
            live[i] = NULL;
        } else if (op < 7) {
            size_t want = live[i]->npages + 1 + unit_rand(&rng) % 40;
            if (ph_grow(ph, live[i], want))
                EXPECT_EQ_U(live[i]->npages, want);
        } else if (op < 9 && live[i]->npages > 1) {
            size_t want = 1 + unit_rand(&rng) % (live[i]->npages - 1);
            ph_shrink(ph, live[i], want, now);
            EXPECT_EQ_U(live[i]->npages, want);
        } else if (in_flight) {
            ph_purge_run(&pending);
            ph_purge_finish(ph, &pending, now);
            in_flight = false;
        } else if (unit_rand(&rng) % 2) {
            ph_purge_take(ph, now, (int64_t)(unit_rand(&rng) % 3), (int64_t)(unit_rand(&rng) % 3) - 1,
                          1 + unit_rand(&rng) % 2000, &pending);
            in_flight = true;
        } else {
            ph_decay(ph, now, (int64_t)(unit_rand(&rng) % 3), (int64_t)(unit_rand(&rng) % 3) - 1);
        }
        bool ok = ph_check(ph);
        mutex_unlock(&a->lock);
        EXPECT_TRUE(ok, "page heap invariants broken at step %d (op %u)", step, op);
    }
    mutex_lock(&a->lock);
    if (in_flight) {
        ph_purge_run(&pending);
        ph_purge_finish(ph, &pending, now);
    }
    for (int i = 0; i < NLIVE; i++)
        if (live[i] != NULL)
            ph_free(ph, live[i], now);
    EXPECT_EQ_U(ph->active_pages, 0);
    ph_decay(ph, now + 1, 0, 0);
    EXPECT_TRUE(ph_check(ph), "invariants broken after freeing all");
    EXPECT_EQ_U(ph->nsegments, 0);   /* every fully free, purged segment went back */
    mutex_unlock(&a->lock);
    return unit_finish("test_pages");
}
