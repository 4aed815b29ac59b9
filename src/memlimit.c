/*
 * memlimit.c - the charge, the hard and soft limits and their counters
 * (see memlimit.h). Everything is one atomic per figure: the rooms that
 * report here do so from slow paths that make a kernel call anyway.
 */
#include "memlimit.h"
#include "anchor_ref.h"
#include "os.h"

#include <errno.h>

static size_t charge;         /* bytes; atomic */
static size_t peak;           /* highest charge seen; atomic */
static size_t hard_limit;     /* 0: none; atomic */
static size_t soft_limit;     /* 0: none; atomic */
bool memlimit_above_soft_flag;   /* atomic; flips in step with soft_passes */
bool memlimit_soft_drain_due;    /* atomic; set by an upward passing */
static uint64_t above_since_ns;
static uint64_t n_refusals, n_reclaims, n_failures, n_soft_passes, soft_above_ns;
static bool (*reclaim_fn)(bool soft);

__thread bool memlimit_refused_here;
static __thread bool reclaiming_here;

/* Leaves the soft state at 7/8 of the soft limit, so that a charge
 * hovering at the limit does not flip it on every page. */
static size_t soft_low(size_t soft) { return soft - soft / 8; }

static void soft_update(size_t now)
{
    size_t soft = __atomic_load_n(&soft_limit, __ATOMIC_RELAXED);
    bool above = __atomic_load_n(&memlimit_above_soft_flag, __ATOMIC_RELAXED);
    if (!above && soft != 0 && now > soft) {
        if (__atomic_compare_exchange_n(&memlimit_above_soft_flag, &above, true, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            __atomic_store_n(&above_since_ns, os_now_ns(), __ATOMIC_RELAXED);
            __atomic_fetch_add(&n_soft_passes, 1, __ATOMIC_RELAXED);
            __atomic_store_n(&memlimit_soft_drain_due, true, __ATOMIC_RELAXED);
        }
    } else if (above && (soft == 0 || now <= soft_low(soft))) {
        if (__atomic_compare_exchange_n(&memlimit_above_soft_flag, &above, false, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            uint64_t since = __atomic_load_n(&above_since_ns, __ATOMIC_RELAXED);
            uint64_t t = os_now_ns();
            __atomic_fetch_add(&soft_above_ns, t > since ? t - since : 0, __ATOMIC_RELAXED);
        }
    }
}

static void peak_update(size_t now)
{
    size_t p = __atomic_load_n(&peak, __ATOMIC_RELAXED);
    while (now > p && !__atomic_compare_exchange_n(&peak, &p, now, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

bool memlimit_try_charge(size_t bytes)
{
    size_t limit = __atomic_load_n(&hard_limit, __ATOMIC_RELAXED);
    size_t cur = __atomic_load_n(&charge, __ATOMIC_RELAXED);
    size_t want;
    do {
        want = cur + bytes;
        if (limit != 0 && (want < cur || want > limit)) {
            memlimit_refused_here = true;
            __atomic_fetch_add(&n_refusals, 1, __ATOMIC_RELAXED);
            return false;
        }
    } while (!__atomic_compare_exchange_n(&charge, &cur, want, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    peak_update(want);
    soft_update(want);
    return true;
}

void memlimit_force_charge(size_t bytes)
{
    if (bytes == 0)
        return;
    size_t now = __atomic_add_fetch(&charge, bytes, __ATOMIC_RELAXED);
    peak_update(now);
    soft_update(now);
}

void memlimit_uncharge(size_t bytes)
{
    if (bytes == 0)
        return;
    soft_update(__atomic_sub_fetch(&charge, bytes, __ATOMIC_RELAXED));
}

size_t memlimit_charged(void) { return __atomic_load_n(&charge, __ATOMIC_RELAXED); }

bool memlimit_any(void)
{
    return __atomic_load_n(&hard_limit, __ATOMIC_RELAXED) != 0 || __atomic_load_n(&soft_limit, __ATOMIC_RELAXED) != 0;
}

size_t memlimit_get(void) { return __atomic_load_n(&hard_limit, __ATOMIC_RELAXED); }
size_t memlimit_soft_get(void) { return __atomic_load_n(&soft_limit, __ATOMIC_RELAXED); }
void memlimit_set(size_t bytes) { __atomic_store_n(&hard_limit, bytes, __ATOMIC_RELAXED); }

void memlimit_soft_set(size_t bytes)
{
    __atomic_store_n(&soft_limit, bytes, __ATOMIC_RELAXED);
    soft_update(memlimit_charged());
}

void memlimit_count_reclaim(void) { __atomic_fetch_add(&n_reclaims, 1, __ATOMIC_RELAXED); }

void memlimit_set_reclaim(bool (*fn)(bool soft)) { __atomic_store_n(&reclaim_fn, fn, __ATOMIC_RELEASE); }

static bool run_reclaim(bool soft)
{
    bool (*fn)(bool) = __atomic_load_n(&reclaim_fn, __ATOMIC_ACQUIRE);
    /* a drain's own allocator calls (a page source's callback, a
     * quarantine's verification) must not start another */
    if (fn == NULL || reclaiming_here)
        return false;
    reclaiming_here = true;
    int saved = errno;
    bool ran = fn(soft);
    errno = saved;
    reclaiming_here = false;
    return ran;
}

bool memlimit_reclaim(void)
{
    if (!run_reclaim(false))
        return false;
    __atomic_fetch_add(&n_reclaims, 1, __ATOMIC_RELAXED);
    return true;
}

__thread bool memlimit_failed_here;

void memlimit_count_failure(void)
{
    memlimit_failed_here = true;
    __atomic_fetch_add(&n_failures, 1, __ATOMIC_RELAXED);
}

void memlimit_soft_drain_now(void)
{
    if (__atomic_exchange_n(&memlimit_soft_drain_due, false, __ATOMIC_RELAXED))
        run_reclaim(true);
}

void memlimit_stats_read(memlimit_stats_t *out)
{
    out->charged = memlimit_charged();
    out->peak = __atomic_load_n(&peak, __ATOMIC_RELAXED);
    out->limit = memlimit_get();
    out->soft_limit = memlimit_soft_get();
    out->refusals = __atomic_load_n(&n_refusals, __ATOMIC_RELAXED);
    out->reclaims = __atomic_load_n(&n_reclaims, __ATOMIC_RELAXED);
    out->failures = __atomic_load_n(&n_failures, __ATOMIC_RELAXED);
    out->soft_passes = __atomic_load_n(&n_soft_passes, __ATOMIC_RELAXED);
    out->above_soft = memlimit_above_soft();
    out->soft_above_ns = __atomic_load_n(&soft_above_ns, __ATOMIC_RELAXED);
    if (out->above_soft) {
        uint64_t since = __atomic_load_n(&above_since_ns, __ATOMIC_RELAXED);
        uint64_t t = os_now_ns();
        out->soft_above_ns += t > since ? t - since : 0;
    }
}

void memlimit_peak_reset(void) { __atomic_store_n(&peak, memlimit_charged(), __ATOMIC_RELAXED); }

/* For dpmalloc-stat (anchor.h): where the figures are, read from outside
 * as memlimit_stats_read reads them here. */
extern const anchor_memlimit_t anchor_ref_memlimit;
const anchor_memlimit_t anchor_ref_memlimit = {
    &charge, &peak, &hard_limit, &soft_limit,
    &n_refusals, &n_reclaims, &n_failures, &n_soft_passes, &soft_above_ns, &above_since_ns,
    &memlimit_above_soft_flag,
};
