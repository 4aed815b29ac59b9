/*
 * runs.c - TLSF index of free runs (see runs.h).
 *
 * Mapping: a length n < 8 pages lives at (0, n); otherwise at
 * (lg(n) - 2, the three bits below the top bit of n). So every list holds
 * lengths within 1/8 of each other, and rounding a request up by that
 * slice width makes any member of the target list big enough.
 */
#include "runs.h"
#include "error.h"

typedef struct slot {
    unsigned fl, sl;
} slot_t;

static slot_t slot_of_length(size_t n)
{
    slot_t s;
    if (n < RUNS_NSL) {
        s.fl = 0;
        s.sl = (unsigned)n;
        return s;
    }
    unsigned lg = lg_floor(n);
    s.fl = lg - (RUNS_LG_SL - 1);
    s.sl = (unsigned)(n >> (lg - RUNS_LG_SL)) - RUNS_NSL;
    return s;
}

/* The first slot whose every member is at least n pages long. */
static slot_t slot_for_request(size_t n)
{
    if (n >= RUNS_NSL)
        n += ((size_t)1 << (lg_floor(n) - RUNS_LG_SL)) - 1;
    return slot_of_length(n);
}

void runs_init(run_index_t *ix)
{
    *ix = (run_index_t){0};
}

void runs_insert(run_index_t *ix, span_t *run)
{
    slot_t s = slot_of_length(run->npages);
    list_push_front(&ix->heads[s.fl][s.sl], &run->link);
    ix->sl_bits[s.fl] |= (uint8_t)(1u << s.sl);
    ix->fl_bits |= (uint64_t)1 << s.fl;
    ix->nruns++;
    ix->npages += run->npages;
}

void runs_remove(run_index_t *ix, span_t *run)
{
    slot_t s = slot_of_length(run->npages);
    list_t *slot = &ix->heads[s.fl][s.sl];
    list_remove(slot, &run->link);
    if (list_empty(slot)) {
        ix->sl_bits[s.fl] &= (uint8_t) ~(1u << s.sl);
        if (ix->sl_bits[s.fl] == 0)
            ix->fl_bits &= ~((uint64_t)1 << s.fl);
    }
    ix->nruns--;
    ix->npages -= run->npages;
}

void runs_resize(run_index_t *ix, span_t *run, size_t npages)
{
    slot_t from = slot_of_length(run->npages), to = slot_of_length(npages);
    if (from.fl != to.fl || from.sl != to.sl) {
        runs_remove(ix, run);
        run->npages = npages;
        runs_insert(ix, run);
        return;
    }
    ix->npages = ix->npages - run->npages + npages;
    run->npages = npages;
}

/* Best fit in two O(1) steps. The list of the request's own length slot
 * may hold runs shorter than the request (a slot spans 1/8 of its length
 * class), so only its head is looked at: if it fits, no run in a smaller
 * slot could, and it is within one slice of the best fit. Otherwise the first
 * non-empty slot above the request's rounded-up length, where every member
 * fits (TLSF good fit). Among runs of one slot the most recently filed one
 * is taken (LIFO); ordering a slot's list by address would cost a scan or a
 * tree per insert. */
span_t *runs_find(run_index_t *ix, size_t npages)
{
    slot_t own = slot_of_length(npages);
    if (own.fl < RUNS_NFL) {
        span_t *head = list_item(list_first(&ix->heads[own.fl][own.sl]), span_t, link);
        if (head != NULL && head->npages >= npages)
            return head;
    }
    slot_t s = slot_for_request(npages);
    if (s.fl >= RUNS_NFL)
        return NULL;
    unsigned sl_map = ix->sl_bits[s.fl] & (~0u << s.sl);
    if (sl_map == 0) {
        uint64_t fl_map = s.fl + 1 < 64 ? ix->fl_bits & (~(uint64_t)0 << (s.fl + 1)) : 0;
        if (fl_map == 0)
            return NULL;
        s.fl = ctz64(fl_map);
        sl_map = ix->sl_bits[s.fl];
    }
    s.sl = (unsigned)__builtin_ctz(sl_map);
    span_t *run = list_item(list_first(&ix->heads[s.fl][s.sl]), span_t, link);
    dpm_assert(run != NULL && run->npages >= npages);
    return run;
}

size_t runs_longest_hint(const run_index_t *ix)
{
    if (ix->fl_bits == 0)
        return 0;
    unsigned fl = 63 - (unsigned)__builtin_clzll(ix->fl_bits);
    unsigned sl = 31 - (unsigned)__builtin_clz(ix->sl_bits[fl]);
    return list_item(list_first(&ix->heads[fl][sl]), span_t, link)->npages;
}

static bool fail(const char *rule)
{
    dpm_warn3("run index check failed: ", rule, NULL);
    return false;
}

bool runs_check(const run_index_t *ix, uint8_t state)
{
    size_t nruns = 0, npages = 0;
    for (unsigned fl = 0; fl < RUNS_NFL; fl++) {
        bool fl_set = (ix->fl_bits >> fl) & 1;
        if (fl_set != (ix->sl_bits[fl] != 0))
            return fail("first-level bit disagrees with second-level bits");
        for (unsigned sl = 0; sl < RUNS_NSL; sl++) {
            const list_t *slot = &ix->heads[fl][sl];
            if (((ix->sl_bits[fl] >> sl) & 1) != !list_empty(slot))
                return fail("second-level bit disagrees with list");
            if (list_check(slot) < 0)
                return fail("broken back link");
            list_for_each(const span_t, r, slot, link) {
                slot_t s = slot_of_length(r->npages);
                if (s.fl != fl || s.sl != sl)
                    return fail("run filed under the wrong length");
                if (r->kind != SPAN_FREE || r->state != state)
                    return fail("run in index is not free in this state");
                nruns++;
                npages += r->npages;
            }
        }
    }
    if (nruns != ix->nruns || npages != ix->npages)
        return fail("totals disagree with lists");
    return true;
}
