/*
 * os.c - kernel memory calls (see os.h). Every range handed in here is a
 * multiple of dpmalloc's 4 KiB page; where the kernel's page is larger
 * (aarch64 with 16/64 KiB pages) purges shrink to whole kernel pages.
 */
#include "os.h"
#include "annotate.h"
#include "util.h"

#include <errno.h>
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

void *os_map_aligned(size_t size, size_t align)
{
    size_t span = size + align - PAGE;
    if (span < size) {
        errno = ENOMEM;
        return NULL;
    }
    void *raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
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

void *os_map_huge(size_t size, size_t align)
{
#ifdef MAP_HUGETLB
    /* Reserve aligned address space, then put huge pages over it. */
    void *at = os_map_aligned(size, align);
    if (at == NULL)
        return NULL;
    void *huge = mmap(at, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_HUGETLB, -1, 0);
    if (huge == MAP_FAILED) {
        munmap(at, size);
        return NULL;
    }
    return huge;
#else
    (void)size, (void)align;
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
