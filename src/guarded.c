/*
 * guarded.c - sampled guarded allocations (guarded.h). The pool is
 * 2 * GUARDED_SLOTS + 1 pages reserved without access: slot i's page is
 * page 2i + 1, every even page a guard. A slot is claimed with a
 * compare-and-swap on its state and found by a shared cursor, so a freed
 * slot waits a whole turn of the pool before its page is used again (a
 * dangling pointer keeps faulting that long). No lock: fork and threads
 * need nothing more. The fault handler (fault.h) reads the records with
 * no lock and writes with write(2) only.
 */
#include "guarded.h"

#include "error.h"
#include "fault.h"
#include "os.h"
#include "util.h"

#include <execinfo.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define TRACE_DEPTH 16
#define SLACK_FILL 0xab

enum slot_state { SLOT_NEVER, SLOT_TAKING, SLOT_LIVE, SLOT_FREED };

typedef struct slot {
    uint32_t state;
    size_t size;
    uintptr_t block;
    int alloc_depth, free_depth;
    void *alloc_trace[TRACE_DEPTH];
    void *free_trace[TRACE_DEPTH];
} slot_t;

static uintptr_t pool;          /* 0 until init */
static size_t page;
static slot_t *slots;
static size_t interval;         /* guard_sample */
static size_t cursor;
static size_t total, live;
static __thread int64_t countdown;
static __thread bool started;
static uint64_t gaps;           /* gaps drawn: varies the next */
static __thread bool inside;    /* a sample in progress on this thread (backtrace may allocate) */

static uintptr_t slot_page(size_t i) { return pool + (2 * i + 1) * page; }

/* ---- the fault report ---------------------------------------------------- */

static void say(const char *s) { dpm_write_stderr(s); }

static void say_trace(const char *what, void *const *trace, int depth)
{
    say(what);
    if (depth > 0)
        backtrace_symbols_fd(trace, depth, 2);
    else
        say("    (no stack recorded)\n");
}

static void report(const char *kind, uintptr_t addr, const slot_t *s)
{
    fault_report(kind, addr, "guard_sample", s->size, s->block);
    say_trace("  allocated at:\n", s->alloc_trace, s->alloc_depth);
    if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == SLOT_FREED)
        say_trace("  freed at:\n", s->free_trace, s->free_depth);
}

/* A fault in the pool: a slot's page (its block freed, or never there)
 * or a guard (past the block on its left, which ends at its page's end,
 * or before the one on its right). */
static bool guarded_explain(uintptr_t addr)
{
    uintptr_t base = __atomic_load_n(&pool, __ATOMIC_ACQUIRE);
    if (base == 0 || addr - base >= (2 * GUARDED_SLOTS + 1) * page)
        return false;
    size_t pg = (addr - base) / page;
    if (pg % 2 == 1) {
        report("use after free", addr, &slots[pg / 2]);
    } else {
        size_t left = pg / 2 - (pg != 0), right = pg / 2 < GUARDED_SLOTS ? pg / 2 : GUARDED_SLOTS - 1;
        bool past = pg != 0 && ((addr - base) % page < page / 2 || pg / 2 >= GUARDED_SLOTS);
        report(past ? "buffer overflow past the end" : "buffer underflow before the start", addr,
               &slots[past ? left : right]);
    }
    return true;
}

/* ---- the pool -------------------------------------------------------------- */

bool guarded_init(size_t sample_interval)
{
    if (sample_interval == 0 || pool != 0)
        return pool != 0;
    page = os_page_size();
    size_t bytes = (2 * GUARDED_SLOTS + 1) * page;
    void *p = os_reserve(bytes);
    size_t meta = (GUARDED_SLOTS * sizeof(slot_t) + page - 1) / page * page;
    void *m = os_reserve(meta);
    if (p == NULL || m == NULL || !os_commit(m, meta)) {
        if (p != NULL)
            os_unmap(p, bytes);
        if (m != NULL)
            os_unmap(m, meta);
        return false;
    }
    slots = m;
    interval = sample_interval;
    fault_explain_with(guarded_explain);
    __atomic_store_n(&pool, (uintptr_t)p, __ATOMIC_RELEASE);
    return true;
}

/* About interval, not a fixed stride: a program's periodic pattern
 * never hides from the sampler. */
static int64_t next_gap(void)
{
    uint64_t x = ((uint64_t)(uintptr_t)&countdown ^ __atomic_add_fetch(&gaps, 1, __ATOMIC_RELAXED)) *
                 0x9e3779b97f4a7c15u;
    x ^= x >> 29;
    return (int64_t)(interval / 2 + x % (interval + 1));
}

bool guarded_due(unsigned weight)
{
    if (likely(__atomic_load_n(&pool, __ATOMIC_ACQUIRE) == 0) || inside)
        return false;
    if (unlikely(!started)) {   /* a thread's first count starts anywhere in [interval/2, 1.5 interval] */
        started = true;
        countdown = next_gap();
    }
    countdown -= weight;
    if (countdown > 0)
        return false;
    countdown = next_gap();
    return true;
}

void *guarded_alloc(size_t size)
{
    if (size == 0 || size > page)
        return NULL;   /* size: the block's usable bytes (its class's, dpm_good_size) */
    for (size_t tries = 0; tries < GUARDED_SLOTS; tries++) {
        size_t i = __atomic_fetch_add(&cursor, 1, __ATOMIC_RELAXED) % GUARDED_SLOTS;
        slot_t *s = &slots[i];
        uint32_t st = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
        if (st != SLOT_NEVER && st != SLOT_FREED)
            continue;
        if (!__atomic_compare_exchange_n(&s->state, &st, SLOT_TAKING, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            continue;
        if (!os_commit((void *)slot_page(i), page)) {   /* zero pages: a freed slot's were discarded */
            __atomic_store_n(&s->state, st, __ATOMIC_RELEASE);
            return NULL;
        }
        s->size = size;
        s->block = slot_page(i) + page - ((size + 15) & ~(size_t)15);   /* against the guard */
        /* the alignment leaves up to 15 bytes before the guard: filled,
         * and checked at free */
        memset((char *)s->block + size, SLACK_FILL, slot_page(i) + page - s->block - size);
        inside = true;
        s->alloc_depth = backtrace(s->alloc_trace, TRACE_DEPTH);   /* may allocate: not sampled */
        inside = false;
        s->free_depth = 0;
        __atomic_fetch_add(&total, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&live, 1, __ATOMIC_RELAXED);
        __atomic_store_n(&s->state, SLOT_LIVE, __ATOMIC_RELEASE);
        return (void *)s->block;
    }
    return NULL;
}

/* glibc's first backtrace loads the unwinder with dlopen, which takes
 * the loader's lock and allocates: done once the heap works (init's
 * end), not at the first sample, which may run while another thread
 * holds that lock (and whose allocations would land on the sampled
 * thread's thread.allocated). */
void guarded_prime(void)
{
    if (__atomic_load_n(&pool, __ATOMIC_ACQUIRE) == 0)
        return;
    void *one[2];
    inside = true;
    (void)backtrace(one, 2);
    inside = false;
}

bool guarded_in_pool(const void *p)
{
    uintptr_t base = __atomic_load_n(&pool, __ATOMIC_ACQUIRE);
    return base != 0 && (uintptr_t)p - base < (2 * GUARDED_SLOTS + 1) * page;
}

/* The slot whose live block is p, or aborts naming call. */
static slot_t *live_slot(const void *p, const char *call, const char *freed_words)
{
    size_t pg = ((uintptr_t)p - pool) / page;
    slot_t *s = pg % 2 == 1 ? &slots[pg / 2] : NULL;
    uint32_t st = s != NULL ? __atomic_load_n(&s->state, __ATOMIC_ACQUIRE) : SLOT_NEVER;
    if (s == NULL || s->block != (uintptr_t)p || (st != SLOT_LIVE && st != SLOT_FREED))
        dpm_misuse(call, p, "invalid pointer");
    if (st == SLOT_FREED)
        dpm_misuse(call, p, freed_words);
    return s;
}

size_t guarded_free(void *p, const char *call)
{
    slot_t *s = live_slot(p, call, "double free of");
    size_t size = s->size;
    const unsigned char *end = (const unsigned char *)p + s->size;
    for (const unsigned char *b = end; (uintptr_t)b % page != 0; b++)
        if (*b != SLACK_FILL) {
            report("buffer overflow past the end (found at its free)", (uintptr_t)b, s);
            dpm_misuse(call, p, "write past the end of");
        }
    uint32_t st = SLOT_LIVE;
    if (!__atomic_compare_exchange_n(&s->state, &st, SLOT_TAKING, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        dpm_misuse(call, p, "double free of");   /* another thread's free won */
    inside = true;
    s->free_depth = backtrace(s->free_trace, TRACE_DEPTH);
    inside = false;
    uintptr_t pg = (uintptr_t)p & ~(uintptr_t)(page - 1);
    if (!os_protect_none((void *)pg, page, true))
        (void)madvise((void *)pg, page, MADV_DONTNEED);   /* the kernel refused: no fault, but no old bytes */
    __atomic_fetch_sub(&live, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&s->state, SLOT_FREED, __ATOMIC_RELEASE);
    return size;
}

size_t guarded_live_size(const void *p, const char *call)
{
    return live_slot(p, call, "use after free of")->size;
}

size_t guarded_count_total(void) { return __atomic_load_n(&total, __ATOMIC_RELAXED); }
size_t guarded_count_live(void) { return __atomic_load_n(&live, __ATOMIC_RELAXED); }

/* For dpmalloc-stat (anchor.h): where the sample counters live. */
extern const size_t *const anchor_ref_guarded_total;
extern const size_t *const anchor_ref_guarded_live;
const size_t *const anchor_ref_guarded_total = &total;
const size_t *const anchor_ref_guarded_live = &live;
