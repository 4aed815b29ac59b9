/*
 * rseq.h - restartable sequences: where the calling thread's rseq area
 * is, the signature every abort handler carries, and the fence that
 * makes every sequence running in the process restart.
 *
 * glibc >= 2.35 reserves an rseq area in every thread's descriptor, at
 * __rseq_offset from the thread pointer (fixed before any code of ours
 * runs), and registers it with the kernel unless told not to
 * (GLIBC_TUNABLES=glibc.pthread.rseq=0, a kernel without rseq: then
 * __rseq_size is 0 and cpu_id holds -1 or -2). dpmalloc's sequences
 * always address that area. Where glibc did not register it, dpmalloc
 * registers it itself, per thread, before the thread's first use of a
 * CPU cache; the kernel drops a registration when its thread exits.
 * Only the fields the ABI defines are used: cpu_id (offset 4) and
 * rseq_cs (offset 8).
 * Owns: the registration and membarrier. May call: syscalls.
 */
#ifndef DPM_RSEQ_H
#define DPM_RSEQ_H

#include "util.h"

#include <stddef.h>

#if defined(__x86_64__) && defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35)) && \
    !DPM_TSAN
#define DPM_HAVE_RSEQ 1
#include <sys/rseq.h>
#else
#define DPM_HAVE_RSEQ 0
#endif

/* glibc's x86 signature: the four bytes before every abort handler. */
#define DPM_RSEQ_SIG 0x53053053
#define DPM_RSEQ_CPU_ID_OFFSET 4
#define DPM_RSEQ_CS_OFFSET 8

/* Whether restartable sequences and the membarrier fence they need work
 * here (x86-64 with glibc >= 2.35, a kernel with rseq and
 * MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, which this registers for the
 * process). At init; false leaves every thread on its own cache. */
bool rseq_init(void);
/* Makes sure the calling thread's area is registered. False if the
 * kernel refused. */
bool rseq_thread_ready(void);
/* The CPU the calling thread runs on now, per its rseq area (a hint:
 * only a sequence may rely on it; (unsigned)-1 or -2 where the area is
 * not registered, 0 without rseq). Inline: the large caches ask on every
 * put and take. */
DPM_INLINE unsigned rseq_cpu_now(void)
{
#if DPM_HAVE_RSEQ
    const struct rseq *area = (const struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
    return __atomic_load_n(&area->cpu_id, __ATOMIC_RELAXED);
#else
    return 0;
#endif
}
/* The CPU the calling thread runs on now, a hint for data kept per CPU
 * under locks or atomics: the kernel's cpu_id in the thread's area where
 * the area is registered (a load), else sched_getcpu() (the vDSO), else
 * 0. Unlike rseq_cpu_now, right in thread mode and without rseq. */
unsigned rseq_cpu_asked(void);
DPM_INLINE unsigned rseq_cpu_hint(void)
{
#if DPM_HAVE_RSEQ
    const struct rseq *area = (const struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
    int cpu = (int)__atomic_load_n(&area->cpu_id, __ATOMIC_RELAXED);
    if (likely(cpu >= 0))
        return (unsigned)cpu;
#endif
    return rseq_cpu_asked();
}
/* Restarts every restartable sequence that runs in the process now, on
 * CPU `cpu` only where the kernel can aim (>= 5.10), else on all: when it
 * returns, every sequence that began before the call has either committed
 * or will start over and see what the caller stored before the call. */
void rseq_fence(int cpu);
/* In a fork child: the process is a new one for membarrier. */
void rseq_postfork_child(void);

#endif
