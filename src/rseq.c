/*
 * rseq.c - registering the calling thread's rseq area where glibc did
 * not, and the membarrier fence (see rseq.h).
 */
#include "rseq.h"
#include "error.h"

#include <errno.h>
#include <sched.h>
#include <linux/membarrier.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#if DPM_HAVE_RSEQ
static bool glibc_registered;
static __thread bool registered_here;
#endif
/* Whether membarrier can aim at one CPU (MEMBARRIER_CMD_FLAG_CPU). */
static bool fence_one_cpu;

static long membarrier(int cmd, unsigned flags, int cpu)
{
    return syscall(__NR_membarrier, cmd, flags, cpu);
}

static bool register_membarrier(void)
{
    long cmds = membarrier(MEMBARRIER_CMD_QUERY, 0, 0);
    if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ))
        return false;
    return membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ, 0, 0) == 0;
}

#if DPM_HAVE_RSEQ
static struct rseq *area_here(void) { return (struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset); }
#endif

bool rseq_init(void)
{
#if DPM_HAVE_RSEQ
    if (!register_membarrier())
        return false;
    fence_one_cpu = membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, MEMBARRIER_CMD_FLAG_CPU, 0) == 0;
    glibc_registered = __rseq_size >= 20;
    return rseq_thread_ready();
#else
    return false;
#endif
}

bool rseq_thread_ready(void)
{
#if DPM_HAVE_RSEQ
    if (glibc_registered || registered_here)
        return true;
    /* glibc's reserved area is a whole struct rseq (32 bytes), aligned */
    /* EBUSY: registered already with this very area, length and
     * signature (the kernel says EINVAL or EPERM otherwise). glibc does
     * that itself for threads it creates once the main thread's area
     * holds a CPU number, even with its tunable off. */
    if (syscall(__NR_rseq, area_here(), sizeof(struct rseq), 0, DPM_RSEQ_SIG) != 0 && errno != EBUSY)
        return false;
    registered_here = true;
    return true;
#else
    return false;
#endif
}

unsigned rseq_cpu_asked(void)
{
    int cpu = sched_getcpu();
    return cpu < 0 ? 0 : (unsigned)cpu;
}

void rseq_fence(int cpu)
{
    if (cpu >= 0 && fence_one_cpu &&
        membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, MEMBARRIER_CMD_FLAG_CPU, cpu) == 0)
        return;
    /* registered at init, so the kernel has no reason to refuse; going on
     * without the fence could hand a block out twice */
    if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, 0, 0) != 0) {
        dpm_write_stderr("dpmalloc: membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ) failed\n");
        abort();
    }
}

void rseq_postfork_child(void)
{
    /* registrations belong to the memory map; the child has a new one */
    (void)register_membarrier();
}
