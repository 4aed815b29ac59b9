/*
 * test_runs.c - the TLSF free-run index driven by random inserts, removals
 * and searches, with the invariant checker after every step: searches
 * return a run that fits (never scanning), fail only when no run is
 * comfortably large enough, and the bitmaps always match the lists.
 */
#include "runs.h"
#include "unit.h"

#define NSPANS 2000

static span_t spans[NSPANS];
static bool filed[NSPANS];

static size_t random_length(uint64_t *rng)
{
    switch (unit_rand(rng) % 4) {
    case 0:
        return 1 + unit_rand(rng) % 8;
    case 1:
        return 1 + unit_rand(rng) % 100;
    case 2:
        return 1 + unit_rand(rng) % 5000;
    default:
        return 1 + unit_rand(rng) % ((size_t)1 << (unit_rand(rng) % 34));
    }
}

static size_t longest_filed(void)
{
    size_t m = 0;
    for (int i = 0; i < NSPANS; i++)
        if (filed[i] && spans[i].npages > m)
            m = spans[i].npages;
    return m;
}

static void search_once(run_index_t *ix, uint64_t *rng)
{
    size_t want = random_length(rng);
    span_t *r = runs_find(ix, want);
    if (r != NULL) {
        EXPECT_TRUE(r->npages >= want, "asked %zu pages, got a run of %zu", want, r->npages);
        EXPECT_TRUE(filed[r - spans], "found a run that is not in the index");
    } else {
        /* good fit rounds up by at most 1/8: a run twice as long must be found */
        EXPECT_TRUE(longest_filed() < 2 * want, "no run found for %zu pages though %zu is free", want,
                    longest_filed());
    }
}

int main(void)
{
    static run_index_t ix;
    runs_init(&ix);
    uint64_t rng = 7;
    for (int step = 0; step < 60000; step++) {
        int i = (int)(unit_rand(&rng) % NSPANS);
        if (!filed[i]) {
            spans[i] = (span_t){.kind = SPAN_FREE, .state = RUN_DIRTY, .npages = random_length(&rng)};
            runs_insert(&ix, &spans[i]);
            filed[i] = true;
        } else if (unit_rand(&rng) % 3 != 0) {
            runs_remove(&ix, &spans[i]);
            filed[i] = false;
        }
        search_once(&ix, &rng);
        if (step % 97 == 0)
            EXPECT_TRUE(runs_check(&ix, RUN_DIRTY), "invariants broken at step %d", step);
    }
    EXPECT_TRUE(runs_check(&ix, RUN_DIRTY), "invariants broken at the end");
    for (int i = 0; i < NSPANS; i++)
        if (filed[i])
            runs_remove(&ix, &spans[i]);
    EXPECT_EQ_U(ix.nruns, 0);
    EXPECT_EQ_U(ix.fl_bits, 0);
    return unit_finish("test_runs");
}
