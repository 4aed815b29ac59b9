/*
 * quarantine.c - secure mode's ring of freed large blocks
 * (quarantine.h). A put takes the next slot with one atomic add and
 * swaps its block in, so no lock is held across the kernel calls and
 * fork needs nothing: a block another thread was letting go when the
 * process forked stays parked in the child (a leak there, never a block
 * handed out twice).
 */
#include "quarantine.h"

#include "annotate.h"
#include "arena.h"
#include "canary.h"
#include "error.h"
#include "fault.h"
#include "memlimit.h"
#include "conf.h"
#include "os.h"
#include "sizeclass.h"

#include <string.h>

static span_t *large_ring[QUARANTINE_SLOTS];
static unsigned next_slot;

/* The block's own pages: the run less its guard page (arena.c). */
static size_t block_bytes(const span_t *s) { return (s->npages - s->guarded) << LG_PAGE; }
/* Its run, guard page included: discarded and closed as one (a run filed
 * clean reads as zero, and the guard keeps what an earlier block wrote
 * there; one range is one system call each way). */
static size_t run_bytes(const span_t *s) { return s->npages << LG_PAGE; }

/* span_t.parked of a block in the ring: its pages discarded and out of
 * the memory limit's charge, or kept. A block keeps them when its run is
 * at most QUARANTINE_KEEP_MAX and no memory limit is set: its free
 * junk-filled its usable bytes already, so discarding them bought
 * nothing but the page faults of the next block there (a 128 KiB block:
 * 32 faults, most of its cost); the 64 slots hold at most 16 MiB so.
 * Under a limit they would count against it (a soft limit below 16 MiB
 * stayed passed, a hard one drained the ring at every refusal), so
 * there every block is discarded. Decided at the put and read back at
 * the release, so a limit set meanwhile changes nothing for a block
 * already parked. */
#define PARKED_DISCARDED 1
#define PARKED_KEPT 2

static void release(span_t *s)
{
    /* access back first: its pages go to the heap usable, or not at all */
    if (!os_commit((void *)s->start, run_bytes(s)))
        return;
    bool kept = __atomic_load_n(&s->parked, __ATOMIC_RELAXED) == PARKED_KEPT;
    __atomic_store_n(&s->parked, 0, __ATOMIC_RELAXED);
    if (kept) {
        arena_free_large_reopened(s);
        return;
    }
    /* its pages were discarded when it was parked: home as a clean run,
     * counted by the memory limit again only when handed out (charging
     * them here, unchecked, let a secure heap pass its limit) */
    arena_free_large_discarded(s);
}

bool quarantine_large_put(span_t *s)
{
    if (s->arena->manual || s->arena->ph.options.sourced || s->arena->ph.options.hugepages ||
        os_page_size() != PAGE)
        return false;   /* as for guard pages (arena.c) */
    /* a block that goes back to the OS at once without secure mode does
     * so here too: its address space is free for the next request (a
     * new_handler that frees a reserve under RLIMIT_AS counts on it) */
    size_t threshold = __atomic_load_n(&opt.oversize_threshold, __ATOMIC_RELAXED);
    if (threshold != 0 && (s->npages << LG_PAGE) >= threshold)
        return false;
    bool keep = run_bytes(s) <= QUARANTINE_KEEP_MAX && !memlimit_any();
    __atomic_store_n(&s->parked, keep ? PARKED_KEPT : PARKED_DISCARDED, __ATOMIC_RELAXED);
    if (!os_protect_none((void *)s->start, run_bytes(s), !keep)) {
        __atomic_store_n(&s->parked, 0, __ATOMIC_RELAXED);
        return false;
    }
    /* discarded and without access: out of the memory limit's charge
     * while parked, though its page heap counts the block as active */
    if (!keep)
        memlimit_uncharge(block_bytes(s));
    unsigned i = __atomic_fetch_add(&next_slot, 1, __ATOMIC_RELAXED) % QUARANTINE_SLOTS;
    span_t *old = __atomic_exchange_n(&large_ring[i], s, __ATOMIC_ACQ_REL);
    if (old != NULL)
        release(old);
    return true;
}

bool quarantine_explain(uintptr_t addr)
{
    for (unsigned i = 0; i < QUARANTINE_SLOTS; i++) {
        const span_t *s = __atomic_load_n(&large_ring[i], __ATOMIC_ACQUIRE);
        if (s != NULL && addr - s->start < run_bytes(s)) {
            fault_report("use after free", addr, "secure mode's quarantine", s->requested, s->base);
            return true;
        }
    }
    return false;
}

unsigned quarantine_large_count(void)
{
    unsigned n = 0;
    for (unsigned i = 0; i < QUARANTINE_SLOTS; i++)
        n += __atomic_load_n(&large_ring[i], __ATOMIC_RELAXED) != NULL;
    return n;
}

/* ---- small blocks ------------------------------------------------------- */

/* Ring r of the small quarantine takes the blocks of small class r, the
 * last one those of the large classes' aligned slabs (sizeclass.h): its
 * first ring_len[r] slots of a row of QUARANTINE_SMALL_SLOTS (rows
 * beyond a ring's length are never touched, so cost no memory). A ring
 * holds whole blocks of QUARANTINE_SMALL_BYTES (1024 of the smallest
 * classes): a block waits for that many bytes of later frees of its
 * class, and the block that leaves, read whole to be verified, was
 * written recently enough to be in the CPU's caches still. */
static void *small_rings[QUARANTINE_RINGS][QUARANTINE_SMALL_SLOTS];
static unsigned ring_len[QUARANTINE_RINGS];
/* Each ring's next slot, shared by every thread (one line each): a
 * block waits for exactly ring_len later puts of its class, whichever
 * threads make them (a cursor per thread let a new thread, or one in
 * step with another, push a block out at its next put). */
static struct {
    unsigned next;
} CACHE_ALIGNED ring_next[QUARANTINE_RINGS];
/* Then each ring's mix: a block the ring lets go of takes the place of
 * a random one of QUARANTINE_MIX, which goes on instead. The block a
 * free pushes out, and so the one the next malloc of its class may get
 * back, is one of QUARANTINE_MIX candidates that the program cannot
 * tell apart (hardened_malloc's random quarantine before its queue). */
static void *small_mix[QUARANTINE_RINGS][QUARANTINE_MIX];
static unsigned char small_junk;   /* the byte free fills with (one for the process) */

/* Per thread, xorshift64 seeded from the canary secret and the thread's
 * own address: which mix slot a put takes. */
static __thread uint64_t mix_rng;
static unsigned mix_pick(void)
{
    uint64_t x = mix_rng;
    if (unlikely(x == 0))
        x = (g.slot_canary ^ (uintptr_t)&mix_rng) | 1;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    mix_rng = x;
    return (unsigned)((x * 0x2545f4914f6cdd1dull) >> 60) % QUARANTINE_MIX;
}

void quarantine_init(void)
{
    for (unsigned r = 0; r < QUARANTINE_RINGS; r++) {
        size_t size = r < NSMALL ? sc_size(r) : SC_ALIGNED_SLAB_MAX;
        /* a power of two (a mask, not a division, per put) */
        unsigned n = QUARANTINE_SMALL_MIN;
        while (n < QUARANTINE_SMALL_SLOTS && 2 * n * size <= QUARANTINE_SMALL_BYTES)
            n *= 2;
        ring_len[r] = n;
    }
}

static unsigned ring_of(const span_t *s)
{
    unsigned c = s->bin->size_class;
    return c < NSMALL ? c : NSMALL;
}

static uint32_t *mark_word(void *p) { return (uint32_t *)((char *)p + 8); }

/* Aborts naming call if a byte of p (leaving the ring) is no longer the
 * junk its free wrote, or its mark is gone; returns p's span. */
static span_t *verify(void *p, const char *call)
{
    span_t *s = span_of(p);
    size_t n = slab_usable(s);   /* a multiple of 8: objsize is one of 16 */
    DPM_ANN_OPEN(p, n);
    /* word by word; word 1 holds the mark in its bytes 8..11 */
    uint64_t junk = 0x0101010101010101u * small_junk, marked = junk;
    uint32_t mark = QUARANTINE_MARK;
    memcpy(&marked, &mark, sizeof mark);
    const uint64_t *w = p;
    uint64_t diff = (w[0] ^ junk) | (w[1] ^ marked);
    /* four words a step, in two 16-byte vectors (SSE2 on x86-64, NEON on
     * aarch64): the block is read whole, so a step per word would make
     * the check cost more than the read */
    typedef uint64_t words2 __attribute__((vector_size(16)));
    words2 acc0 = {0, 0}, acc1 = {0, 0}, junk2 = {junk, junk};
    size_t i = 2, nw = n / 8;
    for (; i + 4 <= nw; i += 4) {
        words2 v0, v1;
        memcpy(&v0, w + i, sizeof v0);
        memcpy(&v1, w + i + 2, sizeof v1);
        acc0 |= v0 ^ junk2;
        acc1 |= v1 ^ junk2;
    }
    for (; i < nw; i++)
        diff |= w[i] ^ junk;
    acc0 |= acc1;
    diff |= acc0[0] | acc0[1];
    bool intact = diff == 0;
    DPM_ANN_CLOSE(p, n);
    if (!intact)
        dpm_misuse(call, p, "write after free of");
    return s;
}

/* Verifies p as it leaves and takes its mark away: no block outside the
 * rings holds the mark (the handout's check in alloc.c relies on it). */
static span_t *let_go(void *p, const char *call)
{
    span_t *s = verify(p, call);
    DPM_ANN_OPEN(mark_word(p), 4);
    memset(mark_word(p), small_junk, 4);
    DPM_ANN_CLOSE(mark_word(p), 4);
    return s;
}

static void release_small(void *p, const char *call)
{
    let_go(p, call);
    arena_bin_flush(&p, 1);
}

bool quarantine_small_put(void *p, const span_t *s, unsigned char junk, const char *call, void **out,
                          span_t **out_span)
{
    /* a manual arena's reset or destroy takes its slabs back wholesale,
     * with whatever the ring holds; no room for the mark: none such in
     * secure mode */
    if (s->arena->manual || slab_usable(s) < 16)
        return false;
    if (unlikely(small_junk != junk))
        small_junk = junk;
    DPM_ANN_OPEN(mark_word(p), 4);
    *mark_word(p) = QUARANTINE_MARK;
    DPM_ANN_CLOSE(mark_word(p), 4);
    unsigned r = ring_of(s), mask = ring_len[r] - 1;
    void **ring = small_rings[r];
    unsigned i = __atomic_fetch_add(&ring_next[r].next, 1, __ATOMIC_RELAXED) & mask;
    void *old = __atomic_exchange_n(&ring[i], p, __ATOMIC_ACQ_REL);
    if (old != NULL)
        old = __atomic_exchange_n(&small_mix[r][mix_pick()], old, __ATOMIC_ACQ_REL);
    *out = old;
    if (old != NULL)
        *out_span = let_go(old, call);
    return true;
}

bool quarantine_small_holds(const void *p, const span_t *s)
{
    uint32_t *w = mark_word((void *)p);
    DPM_ANN_KEY_PEEK((void *)p);
    bool marked = *w == QUARANTINE_MARK;
    DPM_ANN_KEY_UNPEEK((void *)p);
    if (!marked)
        return false;
    unsigned r = ring_of(s);
    for (unsigned i = 0; i < ring_len[r]; i++)
        if (__atomic_load_n(&small_rings[r][i], __ATOMIC_RELAXED) == p)
            return true;
    for (unsigned i = 0; i < QUARANTINE_MIX; i++)
        if (__atomic_load_n(&small_mix[r][i], __ATOMIC_RELAXED) == p)
            return true;
    return false;
}

unsigned quarantine_drain(const char *call)
{
    unsigned n = 0;
    for (unsigned r = 0; r < QUARANTINE_RINGS; r++) {
        for (unsigned i = 0; i < ring_len[r]; i++) {
            void *p = __atomic_exchange_n(&small_rings[r][i], NULL, __ATOMIC_ACQ_REL);
            if (p != NULL)
                release_small(p, call);
        }
        for (unsigned i = 0; i < QUARANTINE_MIX; i++) {
            void *p = __atomic_exchange_n(&small_mix[r][i], NULL, __ATOMIC_ACQ_REL);
            if (p != NULL)
                release_small(p, call);
        }
    }
    for (unsigned i = 0; i < QUARANTINE_SLOTS; i++) {
        span_t *s = __atomic_exchange_n(&large_ring[i], NULL, __ATOMIC_ACQ_REL);
        if (s != NULL)
            release(s), n++;
    }
    return n;
}
