/*
 * os.c - kernel memory calls (see os.h). Every range handed in here is a
 * multiple of dpmalloc's 4 KiB page; where the kernel's page is larger
 * (aarch64 with 16/64 KiB pages) purges shrink to whole kernel pages.
 */
#include "os.h"
#include "annotate.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <sched.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static size_t kernel_page;   /* atomic: the first purges of several threads may race to set it */

size_t os_page_size(void)
{
    size_t k = __atomic_load_n(&kernel_page, __ATOMIC_RELAXED);
    if (unlikely(k == 0)) {
        long p = sysconf(_SC_PAGESIZE);
        k = p > 0 ? (size_t)p : PAGE;
        __atomic_store_n(&kernel_page, k, __ATOMIC_RELAXED);
    }
    return k;
}

static void *map_aligned(size_t size, size_t align, int extra_flags)
{
    size_t span = size + align - PAGE;
    if (span < size) {
        errno = ENOMEM;
        return NULL;
    }
    void *raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | extra_flags, -1, 0);
    if (raw == MAP_FAILED) {
        errno = ENOMEM;
        return NULL;
    }
    uintptr_t start = (uintptr_t)raw;
    uintptr_t aligned = (start + align - 1) & ~(uintptr_t)(align - 1);
    size_t head = aligned - start;
    size_t tail = span - head - size;
    if (head != 0)
        munmap(raw, head);
    if (tail != 0)
        munmap((void *)(aligned + size), tail);
    return (void *)aligned;
}

void *os_map_aligned(size_t size, size_t align) { return map_aligned(size, align, MAP_NORESERVE); }

void *os_map_aligned_committed(size_t size, size_t align) { return map_aligned(size, align, 0); }

void *os_map_huge(size_t size, size_t align) { return os_map_huge_sized(size, align, 21); }

void *os_map_huge_sized(size_t size, size_t align, unsigned lg_hugepage)
{
#ifdef MAP_HUGETLB
#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif
    int page_flag = (int)lg_hugepage << MAP_HUGE_SHIFT;
    if (size == 0 || (size & (((size_t)1 << lg_hugepage) - 1)) != 0)
        return NULL;
    /* Reserve aligned address space, then put huge pages over it: a
     * hugetlb mapping must start on a boundary of its page size. */
    if (align < ((size_t)1 << lg_hugepage))
        align = (size_t)1 << lg_hugepage;
    void *at = os_map_aligned(size, align);
    if (at == NULL)
        return NULL;
    void *huge = mmap(at, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_HUGETLB | page_flag,
                      -1, 0);
    if (huge == MAP_FAILED) {
        munmap(at, size);
        return NULL;
    }
    return huge;
#else
    (void)size, (void)align, (void)lg_hugepage;
    return NULL;
#endif
}

void os_unmap(void *addr, size_t size)
{
    DPM_ANN_UNMAP(addr, size);
    munmap(addr, size);
}

/* Shrink [addr, addr+size) to whole kernel pages; false if none remain. */
static bool kernel_pages_within(void **addr, size_t *size)
{
    size_t kp = os_page_size();
    uintptr_t lo = ((uintptr_t)*addr + kp - 1) & ~(uintptr_t)(kp - 1);
    uintptr_t hi = ((uintptr_t)*addr + *size) & ~(uintptr_t)(kp - 1);
    if (hi <= lo)
        return false;
    *addr = (void *)lo;
    *size = hi - lo;
    return true;
}

/* MADV_FREE support, decided once by os_init: errors of later calls
 * (EINVAL for locked or hugetlb ranges, which an old kernel also gives
 * for an advice it does not know) say nothing about support. */
static bool lazy_purge_works;

/* MADV_FREE on a private anonymous page of our own: succeeds wherever the
 * kernel knows the advice. */
static bool probe_lazy_purge(void)
{
#ifdef MADV_FREE
    size_t kp = os_page_size();
    void *p = mmap(NULL, kp, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return false;
    *(volatile char *)p = 1;
    bool ok = madvise(p, kp, MADV_FREE) == 0;
    munmap(p, kp);
    return ok;
#else
    return false;
#endif
}

void os_init(void)
{
    os_page_size();
    lazy_purge_works = probe_lazy_purge();
}

bool os_lazy_purge_supported(void) { return lazy_purge_works; }

enum purge_result os_purge_lazy(void *addr, size_t size)
{
#ifdef MADV_FREE
    if (lazy_purge_works) {
        void *a = addr;
        size_t n = size;
        if (!kernel_pages_within(&a, &n))
            return PURGE_NONE;
        return madvise(a, n, MADV_FREE) == 0 ? PURGE_LAZY : PURGE_NONE;
    }
#endif
    return os_purge_now(addr, size);
}

enum purge_result os_purge_now(void *addr, size_t size)
{
    void *a = addr;
    size_t n = size;
    if (!kernel_pages_within(&a, &n))
        return PURGE_NONE;
    if (madvise(a, n, MADV_DONTNEED) != 0)
        return PURGE_NONE;
    /* Pages at the edges that share a kernel page with live data keep
     * their contents: the range reads as zero only if all of it went. */
    return a == addr && n == size ? PURGE_ZEROED : PURGE_LAZY;
}

unsigned os_ncpus(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0)
            return (unsigned)n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1;
}

unsigned os_possible_cpus(void)
{
    int fd = open("/sys/devices/system/cpu/possible", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return UINT32_MAX;
    char buf[256];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return UINT32_MAX;
    /* "0-63", "0,2-5": the last number is the highest */
    unsigned last = UINT32_MAX;
    for (ssize_t i = 0; i < n;) {
        if (buf[i] < '0' || buf[i] > '9') {
            i++;
            continue;
        }
        unsigned v = 0;
        while (i < n && buf[i] >= '0' && buf[i] <= '9' && v < 1000000)
            v = v * 10 + (unsigned)(buf[i++] - '0');
        last = v;
    }
    return last == UINT32_MAX ? last : last + 1;
}

uint64_t os_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void os_hint_hugepage(void *addr, size_t size, bool want)
{
#if defined(MADV_HUGEPAGE) && defined(MADV_NOHUGEPAGE)
    madvise(addr, size, want ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
#else
    (void)addr, (void)size, (void)want;
#endif
}

/* From <linux/mempolicy.h>, which a libc build need not have. */
#define DPM_MPOL_PREFERRED 1
#define DPM_MAX_NODES 1024

bool os_bind_node(void *addr, size_t size, int node)
{
    if (node < 0 || node >= DPM_MAX_NODES)
        return false;
    unsigned long mask[DPM_MAX_NODES / (8 * sizeof(unsigned long))] = {0};
    mask[(unsigned)node / (8 * sizeof(unsigned long))] = 1ul << ((unsigned)node % (8 * sizeof(unsigned long)));
#ifdef SYS_mbind
    if (syscall(SYS_mbind, addr, size, DPM_MPOL_PREFERRED, mask, (unsigned long)DPM_MAX_NODES + 1, 0ul) == 0)
        return true;
#else
    (void)addr, (void)size;
#endif
    return false;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23   /* Linux 5.14 */
#endif

int os_prefault(void *addr, size_t size, bool lock)
{
    /* mlock first: over RLIMIT_MEMLOCK it fails before any page is touched */
    if (lock && mlock(addr, size) != 0)
        return errno == 0 ? EPERM : errno;
    /* A failed populate returns an error to report, where a failed store
     * faults; writing breaks the shared zero page too. */
    if (madvise(addr, size, MADV_POPULATE_WRITE) == 0)
        return 0;
    if (errno != EINVAL)
        return ENOMEM;
    size_t kp = os_page_size();   /* kernels before 5.14: touch each page */
    for (size_t off = 0; off < size; off += kp) {
        volatile char *p = (volatile char *)addr + off;
        *p = *p;
    }
    return 0;
}

void os_populate(void *addr, size_t size)
{
    size_t kp = os_page_size();
    uintptr_t lo = (uintptr_t)addr & ~(uintptr_t)(kp - 1);
    uintptr_t hi = ((uintptr_t)addr + size + kp - 1) & ~(uintptr_t)(kp - 1);
    madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);
}

int os_current_cpu(void)
{
    unsigned cpu = 0;
#ifdef SYS_getcpu
    if (syscall(SYS_getcpu, &cpu, NULL, NULL) == 0)
        return (int)cpu;
#endif
    return -1;
}

void *os_reserve(size_t size)
{
    void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        errno = ENOMEM;
        return NULL;
    }
    return p;
}

bool os_commit(void *addr, size_t size)
{
    if (mprotect(addr, size, PROT_READ | PROT_WRITE) != 0) {
        errno = ENOMEM;
        return false;
    }
    return true;
}

bool os_protect_none(void *addr, size_t size, bool discard)
{
    if (discard)
        (void)madvise(addr, size, MADV_DONTNEED);
    return mprotect(addr, size, PROT_NONE) == 0;
}

bool os_populate_here(void *addr, size_t size)
{
    return size == 0 || madvise(addr, size, MADV_POPULATE_WRITE) == 0;
}
