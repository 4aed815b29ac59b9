/*
 * pcv.c - per-core variables (include/dpmalloc/pcv.h; docs/pcv.md).
 *
 * Layout: one reservation of nslots * stride bytes of address space, made
 * at the first call; slot s's region starts at base + s * stride, where
 * stride is `pcv_size` rounded up to the kernel page, so regions are whole
 * pages apart and never share a line. A variable is one offset into every
 * region; its handle is offset + 1, so the all-zero handle names nothing.
 *
 * The offset space is tracked by two bitmaps over 8-byte granules (used,
 * and start-of-variable) and searched first fit: the only shared state,
 * under pcv_lock, touched by alloc and free alone.
 *
 * A slot is "open" once some thread held it or dpm_pcv_at touched it: its
 * region's first `committed` bytes are read-write, the rest PROT_NONE.
 * Growth commits more of every open region in place (mprotect), so no
 * variable ever moves. A slot is "owned" while a live thread holds it; a
 * thread gives its slot back from the destructor of pcv's own pthread key
 * (the thread cache's key belongs to tcache.c and carries the cache), and
 * the slot keeps its values.
 *
 * Owns: slots, the per-core regions, the offset space. Sits with the
 * entry points: may call os, conf, mutex, error and dpm_ready; allocates
 * nothing from the heap and never calls user code.
 */
#include "conf.h"
#include "error.h"
#include "global.h"
#include "mutex.h"
#include "os.h"

#include <dpmalloc/pcv.h>
#include <errno.h>
#include <string.h>

#define PCV_LG_GRANULE 3
#define PCV_GRANULE ((size_t)1 << PCV_LG_GRANULE)
#define PCV_DEFAULT_ALIGN 16
#define PCV_DEFAULT_SLOTS 256u
#define PCV_MAX_SLOTS 4096u
/* Regions grow by this much at a time (at least a kernel page). */
#define PCV_COMMIT_STEP ((size_t)64 << 10)
#define NO_GRANULE SIZE_MAX

typedef struct pcv_state {
    char *base;
    size_t stride;          /* bytes between two slots' regions */
    size_t limit;           /* offset space per slot: pcv_size, page rounded */
    size_t ngranules;
    unsigned nslots;
    pthread_key_t key;      /* its destructor gives the slot back */
    /* under pcv_lock */
    size_t committed;       /* bytes read-write at the start of every open region */
    size_t high;            /* end of the highest offset ever handed out */
    uint64_t *used;         /* granule belongs to a variable */
    uint64_t *starts;       /* granule starts a variable */
    uint8_t *owned;         /* slot held by a live thread */
    /* written under pcv_lock with release, read anywhere with acquire */
    uint8_t *opened;
    unsigned ready;         /* nslots once everything above is set */
} pcv_state_t;

static pcv_state_t pcv;
static dpm_mutex_t pcv_lock = DPM_MUTEX_INITIALIZER;
static bool atfork_registered;

/* The calling thread's slot region minus one (so that bias + handle id is
 * the variable; read inline by dpm_pcv_this in the header), and its slot
 * plus one; both 0 while it has no slot. */
DPM_EXPORT __thread size_t dpm_pcv_tls_bias_;
#define tls_bias dpm_pcv_tls_bias_
static __thread unsigned tls_slot1;
static __thread bool pcv_fork_locked;

/* ---- the offset space: bitmaps over granules ---------------------------- */

static bool bit_get(const uint64_t *m, size_t i) { return (m[i >> 6] >> (i & 63)) & 1; }
static void bit_put(uint64_t *m, size_t i, bool v)
{
    uint64_t b = (uint64_t)1 << (i & 63);
    m[i >> 6] = v ? m[i >> 6] | b : m[i >> 6] & ~b;
}

/* The first i in [from, end) whose bit is `want`, or end: a word at a time. */
static size_t next_bit(const uint64_t *m, size_t from, size_t end, bool want)
{
    size_t i = from;
    while (i < end) {
        uint64_t w = want ? m[i >> 6] : ~m[i >> 6];
        w &= ~(uint64_t)0 << (i & 63);
        if (w != 0) {
            size_t hit = (i & ~(size_t)63) + ctz64(w);
            return hit < end ? hit : end;
        }
        i = (i & ~(size_t)63) + 64;
    }
    return end;
}

/* First fit of n granules at a multiple of agran. Each round skips a free
 * run that is too short and the used run after it, so the search costs
 * O(granules / 64 + variables) word reads. */
static size_t find_fit(size_t n, size_t agran)
{
    size_t at = 0, end = pcv.ngranules;
    for (;;) {
        at = round_up(next_bit(pcv.used, at, end, false), agran);
        if (at >= end || end - at < n)
            return NO_GRANULE;
        size_t u = next_bit(pcv.used, at, at + n, true);
        if (u == at + n)
            return at;
        at = u;
    }
}

static void mark_variable(size_t first, size_t n)
{
    bit_put(pcv.starts, first, true);
    for (size_t i = first; i < first + n; i++)
        bit_put(pcv.used, i, true);
}

/* A variable runs from its start to the next start or free granule. */
static void clear_variable(size_t first)
{
    bit_put(pcv.starts, first, false);
    size_t i = first;
    do
        bit_put(pcv.used, i++, false);
    while (i < pcv.ngranules && bit_get(pcv.used, i) && !bit_get(pcv.starts, i));
}

/* ---- regions -------------------------------------------------------------- */

static char *slot_base(unsigned s) { return pcv.base + (size_t)s * pcv.stride; }

static bool slot_is_open(unsigned s) { return __atomic_load_n(&pcv.opened[s], __ATOMIC_ACQUIRE) != 0; }

/* The region's committed part becomes usable; then the slot counts as
 * open (iteration, zeroing on reuse, growth). */
static bool open_slot_locked(unsigned s)
{
    if (pcv.opened[s])
        return true;
    if (pcv.committed != 0 && !os_commit(slot_base(s), pcv.committed))
        return false;
    __atomic_store_n(&pcv.opened[s], 1, __ATOMIC_RELEASE);
    return true;
}

/* Every open region becomes usable up to at least `end`, in place. A
 * failure part way leaves some regions committed further than
 * pcv.committed says: harmless, the next growth commits them again. */
static bool commit_to_locked(size_t end)
{
    if (end <= pcv.committed)
        return true;
    size_t step = PCV_COMMIT_STEP > os_page_size() ? PCV_COMMIT_STEP : os_page_size();
    size_t want = round_up(end, step);
    if (want > pcv.limit)
        want = pcv.limit;
    for (unsigned s = 0; s < pcv.nslots; s++)
        if (pcv.opened[s] && !os_commit(slot_base(s) + pcv.committed, want - pcv.committed))
            return false;
    pcv.committed = want;
    return true;
}

static bool all_zero(const char *p, size_t n)
{
    const uint64_t *w = (const uint64_t *)(const void *)p;
    for (size_t i = 0; i < n / sizeof(uint64_t); i++)
        if (w[i] != 0)
            return false;
    return true;
}

/* A new variable at [off, end) reads as zero in every slot. Bytes above
 * pcv.high were never part of a variable, so only the part below it can
 * hold a freed variable's values; slots that are not open were never
 * written. Zero bytes are only read, not written: a page nobody wrote
 * stays unfaulted, to be placed later by its owner's first touch. */
static void zero_reused_locked(size_t off, size_t end)
{
    if (off >= pcv.high)
        return;
    if (end > pcv.high)
        end = pcv.high;
    for (unsigned s = 0; s < pcv.nslots; s++) {
        char *p = slot_base(s) + off;
        if (pcv.opened[s] && !all_zero(p, end - off))
            memset(p, 0, end - off);
    }
}

/* ---- set-up, fork, thread exit ---------------------------------------------- */

static void thread_exit(void *unused);

/* While the process has one thread nothing can hold the lock except code
 * the fork interrupted (fork from a signal handler): taking it would
 * deadlock, so then nothing is done, as in init.c. */
static void pcv_prefork(void)
{
    pcv_fork_locked = !process_single_threaded();
    if (pcv_fork_locked)
        mutex_lock(&pcv_lock);
}

static void pcv_postfork_parent(void)
{
    if (pcv_fork_locked)
        mutex_unlock(&pcv_lock);
}

/* Only the forking thread lives on: the other threads' slots are free in
 * the child (with their values, as at thread exit). */
static void pcv_postfork_child(void)
{
    if (!pcv_fork_locked)
        return;
    mutex_reinit(&pcv_lock);
    if (pcv.ready != 0) {
        memset(pcv.owned, 0, pcv.nslots);
        if (tls_slot1 != 0)
            pcv.owned[tls_slot1 - 1] = 1;
    }
}

static unsigned slots_wanted(void)
{
    if (opt.pcv_slots != 0)
        return opt.pcv_slots;
    unsigned n = PCV_DEFAULT_SLOTS;
    while (n < g.ncpus && n < PCV_MAX_SLOTS)
        n *= 2;
    return n;
}

static bool setup_locked(void)
{
    if (pcv.ready != 0)
        return true;
    size_t kp = os_page_size();
    size_t limit = round_up(opt.pcv_size, kp);
    unsigned n = slots_wanted();
    size_t ngranules = limit >> PCV_LG_GRANULE;   /* a multiple of 64: limit is whole pages */
    size_t map_bytes = ngranules / 8;
    size_t meta = round_up(2 * map_bytes + 2 * (size_t)n, PAGE);
    char *m = os_map_aligned(meta, PAGE);
    if (m == NULL)
        return false;
    char *base = os_reserve((size_t)n * limit);
    if (base == NULL) {
        os_unmap(m, meta);
        return false;
    }
    if (pthread_key_create(&pcv.key, thread_exit) != 0) {
        os_unmap(base, (size_t)n * limit);
        os_unmap(m, meta);
        errno = ENOMEM;
        return false;
    }
    if (!atfork_registered) {
        pthread_atfork(pcv_prefork, pcv_postfork_parent, pcv_postfork_child);
        atfork_registered = true;
    }
    pcv.base = base;
    pcv.stride = limit;
    pcv.limit = limit;
    pcv.ngranules = ngranules;
    pcv.nslots = n;
    pcv.used = (uint64_t *)(void *)m;
    pcv.starts = (uint64_t *)(void *)(m + map_bytes);
    pcv.owned = (uint8_t *)(m + 2 * map_bytes);
    pcv.opened = pcv.owned + n;
    __atomic_store_n(&pcv.ready, n, __ATOMIC_RELEASE);
    return true;
}

static bool pcv_ready(void)
{
    if (likely(__atomic_load_n(&pcv.ready, __ATOMIC_ACQUIRE) != 0))
        return true;
    if (!dpm_ready()) {
        errno = ENOMEM;
        return false;
    }
    mutex_lock(&pcv_lock);
    bool ok = setup_locked();
    mutex_unlock(&pcv_lock);
    return ok;
}

static void thread_exit(void *unused)
{
    (void)unused;
    mutex_lock(&pcv_lock);
    if (tls_slot1 != 0)
        pcv.owned[tls_slot1 - 1] = 0;
    tls_slot1 = 0;
    tls_bias = 0;
    mutex_unlock(&pcv_lock);
}

/* The key's value makes its destructor run at thread exit. glibc clears
 * it before calling the destructor, so a thread that takes a slot again
 * from a later destructor sets it again and gets another round. */
static bool ensure_exit_hook(void)
{
    if (pthread_getspecific(pcv.key) != NULL)
        return true;
    if (pthread_setspecific(pcv.key, &pcv) != 0) {
        errno = ENOMEM;
        return false;
    }
    return true;
}

static void hold_slot_locked(unsigned s)
{
    pcv.owned[s] = 1;
    tls_slot1 = s + 1;
    tls_bias = (uintptr_t)slot_base(s) - 1;
}

/* The pages of the variables allocated so far appear on this thread's
 * node (those already present, e.g. a recycled slot's, stay put). */
static void touch_own_region(unsigned s, size_t bytes)
{
    os_populate_here(slot_base(s), bytes);
}

static bool take_any_slot(void)
{
    if (!pcv_ready() || !ensure_exit_hook())
        return false;
    mutex_lock(&pcv_lock);
    unsigned s = 0;
    while (s < pcv.nslots && pcv.owned[s])
        s++;
    if (s == pcv.nslots) {
        mutex_unlock(&pcv_lock);
        errno = EAGAIN;
        return false;
    }
    if (!open_slot_locked(s)) {
        mutex_unlock(&pcv_lock);
        errno = ENOMEM;
        return false;
    }
    hold_slot_locked(s);
    size_t touch = round_up(pcv.high, os_page_size());
    mutex_unlock(&pcv_lock);
    touch_own_region(s, touch);
    return true;
}

/* ---- the API ----------------------------------------------------------------- */

DPM_EXPORT dpm_pcv_t dpm_pcv_alloc(size_t size, size_t align)
{
    if (align == 0)
        align = PCV_DEFAULT_ALIGN;
    if (!is_pow2(align) || align > DPM_PCV_MAX_ALIGN) {
        errno = EINVAL;
        return DPM_PCV_INVALID;
    }
    if (!pcv_ready())
        return DPM_PCV_INVALID;
    if (size > pcv.limit) {
        errno = ENOMEM;
        return DPM_PCV_INVALID;
    }
    size_t n = size == 0 ? 1 : (size + PCV_GRANULE - 1) >> PCV_LG_GRANULE;
    size_t agran = align > PCV_GRANULE ? align >> PCV_LG_GRANULE : 1;
    mutex_lock(&pcv_lock);
    size_t gr = find_fit(n, agran);
    size_t off = gr << PCV_LG_GRANULE, end = off + (n << PCV_LG_GRANULE);
    if (gr == NO_GRANULE || !commit_to_locked(end)) {
        mutex_unlock(&pcv_lock);
        errno = ENOMEM;
        return DPM_PCV_INVALID;
    }
    zero_reused_locked(off, end);
    mark_variable(gr, n);
    if (end > pcv.high)
        pcv.high = end;
    mutex_unlock(&pcv_lock);
    return (dpm_pcv_t){off + 1};
}

static DPM_COLD void bad_handle(dpm_pcv_t h)
{
    dpm_misuse("dpm_pcv_free", (const void *)(uintptr_t)h.id, "invalid handle");
}

DPM_EXPORT void dpm_pcv_free(dpm_pcv_t h)
{
    if (h.id == 0)
        return;
    size_t off = h.id - 1;
    if (__atomic_load_n(&pcv.ready, __ATOMIC_ACQUIRE) == 0 || off >= pcv.limit || (off & (PCV_GRANULE - 1)) != 0)
        bad_handle(h);
    mutex_lock(&pcv_lock);
    size_t gr = off >> PCV_LG_GRANULE;
    if (!bit_get(pcv.starts, gr)) {
        mutex_unlock(&pcv_lock);
        bad_handle(h);
    }
    clear_variable(gr);
    mutex_unlock(&pcv_lock);
}

static DPM_NOINLINE void *this_slow(dpm_pcv_t h)
{
    if (!take_any_slot())
        return NULL;
    return (void *)(tls_bias + h.id);
}

/* The header's inline dpm_pcv_this, as a function. */
DPM_EXPORT void *dpm_pcv_this_noinline(dpm_pcv_t h)
{
    uintptr_t b = tls_bias;
    if (likely(b != 0))
        return (void *)(b + h.id);
    return this_slow(h);
}

static DPM_NOINLINE void *at_slow(dpm_pcv_t h, unsigned slot)
{
    if (!pcv_ready())
        return NULL;
    if (slot >= pcv.nslots) {
        errno = EINVAL;
        return NULL;
    }
    mutex_lock(&pcv_lock);
    bool ok = open_slot_locked(slot);
    mutex_unlock(&pcv_lock);
    if (!ok) {
        errno = ENOMEM;
        return NULL;
    }
    return slot_base(slot) + h.id - 1;
}

DPM_EXPORT void *dpm_pcv_at(dpm_pcv_t h, unsigned slot)
{
    if (likely(slot < __atomic_load_n(&pcv.ready, __ATOMIC_ACQUIRE)) && likely(slot_is_open(slot)))
        return (void *)((uintptr_t)slot_base(slot) + h.id - 1);
    return at_slow(h, slot);
}

DPM_EXPORT unsigned dpm_pcv_slot_count(void) { return pcv_ready() ? pcv.nslots : 0; }

DPM_EXPORT unsigned dpm_pcv_next_slot(unsigned from)
{
    unsigned n = __atomic_load_n(&pcv.ready, __ATOMIC_ACQUIRE);
    for (unsigned s = from; s < n; s++)
        if (slot_is_open(s))
            return s;
    return DPM_PCV_NO_SLOT;
}

DPM_EXPORT int dpm_thread_set_slot(unsigned id)
{
    if (!pcv_ready())
        return ENOMEM;
    if (id >= pcv.nslots)
        return EINVAL;
    if (!ensure_exit_hook())
        return ENOMEM;
    mutex_lock(&pcv_lock);
    if (tls_slot1 == id + 1) {
        mutex_unlock(&pcv_lock);
        return 0;
    }
    if (pcv.owned[id]) {
        mutex_unlock(&pcv_lock);
        return EBUSY;
    }
    if (!open_slot_locked(id)) {
        mutex_unlock(&pcv_lock);
        return ENOMEM;
    }
    if (tls_slot1 != 0)
        pcv.owned[tls_slot1 - 1] = 0;
    hold_slot_locked(id);
    size_t touch = round_up(pcv.high, os_page_size());
    mutex_unlock(&pcv_lock);
    touch_own_region(id, touch);
    return 0;
}

DPM_EXPORT unsigned dpm_thread_slot(void)
{
    if (likely(tls_slot1 != 0) || take_any_slot())
        return tls_slot1 - 1;
    return DPM_PCV_NO_SLOT;
}
