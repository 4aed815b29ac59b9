/*
 * dpmalloc/pcv.h - per-core variables (in the spirit of DPDK's rte_lcore_var).
 *
 * A per-core variable exists once per core slot. Every variable of one
 * slot lives in that slot's own region of memory, packed together; the
 * regions are whole pages apart, so no cache line (64 or 128 bytes, or an
 * adjacent-line prefetch pair) and no page is ever shared between two
 * slots. A variable sits at the same offset in every region: the handle is
 * that offset, and dpm_pcv_this() is a thread-local load and an add.
 *
 * Slots are small dense ids, 0 .. dpm_pcv_slot_count() - 1 (option
 * `pcv_slots`). A thread gets the lowest free slot at its first
 * dpm_pcv_this() / dpm_thread_slot(), or the one it asks for with
 * dpm_thread_set_slot() (e.g. its DPDK lcore id), and gives it back when it
 * exits. A slot given back keeps its variables' values, as DPDK's lcore
 * variables do: sums over all slots stay exact when threads come and go,
 * and the next thread that takes the slot sees what its predecessor left.
 *
 * The region of a slot is mapped lazily and its pages are first touched
 * by the thread that takes the slot (MADV_POPULATE_WRITE where the kernel
 * has it), so they sit on that thread's NUMA node. docs/pcv.md has the
 * layout, the bounds and what each call costs.
 *
 * Thread safety: every function may be called from any thread. A variable
 * must not be used after dpm_pcv_free(); accesses to a slot's variables
 * from other threads (dpm_pcv_at) need the program's own synchronisation
 * (e.g. atomics), as with any shared data.
 */
#ifndef DPMALLOC_PCV_H
#define DPMALLOC_PCV_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * A per-core variable: small, passed by value. Treat it as opaque. The
 * all-zero value (DPM_PCV_INVALID, also what a static dpm_pcv_t starts as)
 * names no variable.
 */
typedef struct dpm_pcv {
    size_t id;
} dpm_pcv_t;

#define DPM_PCV_INVALID ((dpm_pcv_t){0})
/** Largest alignment dpm_pcv_alloc accepts. */
#define DPM_PCV_MAX_ALIGN 4096
/** "No slot": returned by dpm_thread_slot() and dpm_pcv_next_slot(). */
#define DPM_PCV_NO_SLOT (~0u)

/** Non-zero if @p h names a variable (i.e. is not DPM_PCV_INVALID). */
static inline int dpm_pcv_valid(dpm_pcv_t h) { return h.id != 0; }

/**
 * Allocate a per-core variable: @p size bytes in every slot, at the same
 * offset in each slot's region, reading as zero in every slot.
 *
 * Not for hot paths: it takes a process-wide lock and its search is linear
 * in the per-slot space (docs/pcv.md, "Bounds").
 *
 * @param size
 *   Bytes per slot; 0 is allowed and gives a unique handle.
 * @param align
 *   A power of two up to DPM_PCV_MAX_ALIGN, or 0 for 16 (any scalar type).
 * @return
 *   The handle, or DPM_PCV_INVALID with errno = EINVAL for a bad @p align,
 *   ENOMEM when the per-slot space (option `pcv_size`) has no room left or
 *   the kernel refuses memory.
 */
dpm_pcv_t dpm_pcv_alloc(size_t size, size_t align);

/**
 * Free a per-core variable in every slot. Its space is reused by later
 * allocations, which read as zero again. DPM_PCV_INVALID is ignored.
 * A handle dpm_pcv_alloc never returned, or one already freed, aborts with
 * "dpmalloc: dpm_pcv_free(): invalid handle 0x...".
 */
void dpm_pcv_free(dpm_pcv_t h);

/**
 * The calling thread's copy of variable @p h.
 *
 * Inline with GCC and clang: a thread-local load, a test and an add; the
 * first call of a thread without a slot goes out of line and takes the
 * lowest free slot (a lock, and a system call that faults the slot's
 * pages in on this thread's NUMA node). dpm_pcv_this_noinline is the same
 * as a function (other compilers, other languages).
 *
 * @return
 *   The address, or NULL with errno = EAGAIN when every slot is held by a
 *   live thread (or ENOMEM when the per-core memory cannot be set up).
 */
void *dpm_pcv_this_noinline(dpm_pcv_t h);

#if defined(__GNUC__)
/* Not API: the calling thread's slot region minus one, 0 without a slot.
 * Initial-exec like the rest of dpmalloc's thread-locals: dpmalloc is
 * linked or preloaded, not dlopen'ed. */
extern __thread size_t dpm_pcv_tls_bias_ __attribute__((tls_model("initial-exec")));
static inline void *dpm_pcv_this(dpm_pcv_t h)
{
    size_t b = dpm_pcv_tls_bias_;
    if (__builtin_expect(b != 0, 1))
        return (void *)(b + h.id);
    return dpm_pcv_this_noinline(h);
}
#else
#define dpm_pcv_this(h) dpm_pcv_this_noinline(h)
#endif

/**
 * Slot @p slot's copy of variable @p h. The address is stable for the
 * life of the variable. The first access to a slot no thread ever had
 * makes its region appear (zero) and the slot "in use" for iteration.
 *
 * @return
 *   The address, or NULL with errno = EINVAL if @p slot is not below
 *   dpm_pcv_slot_count() (ENOMEM when the memory cannot be set up).
 */
void *dpm_pcv_at(dpm_pcv_t h, unsigned slot);

/** @p slot's copy of @p h, typed: DPM_PCV_AT(struct stats, h, 3)->packets. */
#define DPM_PCV_AT(type, h, slot) ((type *)dpm_pcv_at((h), (slot)))
/** The calling thread's copy of @p h, typed. */
#define DPM_PCV_THIS(type, h) ((type *)dpm_pcv_this(h))

/**
 * Number of slots: every slot id is below it (option `pcv_slots`).
 * @return the count, or 0 if the per-core memory cannot be set up.
 */
unsigned dpm_pcv_slot_count(void);

/**
 * The first slot in use at or after @p from: a slot some thread has held
 * (now or earlier) or that dpm_pcv_at() touched. Slots never go out of use,
 * so an exited thread's values are still visited.
 *
 * @return the slot, or DPM_PCV_NO_SLOT when there is none.
 */
unsigned dpm_pcv_next_slot(unsigned from);

/** Visit every slot in use in increasing order: DPM_PCV_FOREACH_SLOT(s) sum += ... */
#define DPM_PCV_FOREACH_SLOT(s)                                                            \
    for (unsigned s = dpm_pcv_next_slot(0); s != DPM_PCV_NO_SLOT; s = dpm_pcv_next_slot(s + 1))

/**
 * Bind the calling thread to slot @p id (e.g. its DPDK lcore id), giving
 * back the slot it held before, if any (that slot keeps its values).
 *
 * @return
 *   0 (also when the thread already holds @p id); EINVAL if @p id is not
 *   below dpm_pcv_slot_count(); EBUSY if another live thread holds it;
 *   ENOMEM if the slot's memory cannot be set up. On error the thread
 *   keeps its slot.
 */
int dpm_thread_set_slot(unsigned id);

/**
 * The calling thread's slot, taking the lowest free one if it has none.
 * @return the slot, or DPM_PCV_NO_SLOT with errno as dpm_pcv_this().
 */
unsigned dpm_thread_slot(void);

#ifdef __cplusplus
}
#endif

#endif
