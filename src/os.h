/*
 * os.h - the only room that talks to the kernel about memory.
 * Owns: reserving aligned address space, returning it, purging pages
 * (MADV_FREE / MADV_DONTNEED), CPU count and the clock used by decay.
 * May call: mmap, munmap, mprotect, madvise, sched_getaffinity,
 * clock_gettime.
 */
#ifndef DPM_OS_H
#define DPM_OS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Fresh zeroed memory of size bytes at a multiple of align (both multiples
 * of the page). NULL with errno = ENOMEM when the kernel says no. */
void *os_map_aligned(size_t size, size_t align);
/* The same without MAP_NORESERVE: the kernel's overcommit accounting
 * applies (refused at once under vm.overcommit_memory 2, or beyond RAM +
 * swap under 0), for memory that is about to be faulted in whole. */
void *os_map_aligned_committed(size_t size, size_t align);
/* The same from explicit huge pages (MAP_HUGETLB, 2 MiB); size and align
 * must be multiples of 2 MiB. NULL if the system has none to give. */
void *os_map_huge(size_t size, size_t align);
/* os_map_huge with huge pages of 1 << lg_hugepage bytes (21: 2 MiB, 30:
 * 1 GiB, MAP_HUGE_2MB / MAP_HUGE_1GB); size and align multiples of it. */
void *os_map_huge_sized(size_t size, size_t align, unsigned lg_hugepage);
void os_unmap(void *addr, size_t size);
/* Binds [addr, addr+size) to NUMA node `node` with the raw mbind syscall
 * (MPOL_PREFERRED: see docs/numa.md). False if the kernel refused (no
 * such node, no NUMA support): the pages then stay unbound, and the
 * first refusal prints one warning. */
bool os_bind_node(void *addr, size_t size, int node);
/* Faults every page of the range in now for writing, keeping its
 * contents, and with lock mlocks it first. 0, mlock's errno, or ENOMEM
 * when the kernel could not populate it (MADV_POPULATE_WRITE; older
 * kernels touch each page instead). */
int os_prefault(void *addr, size_t size, bool lock);
/* Makes the pages of a live range resident and writable without
 * changing a byte (MADV_POPULATE_WRITE, Linux 5.14; nothing on older
 * kernels): metadata other threads may be writing. */
void os_populate(void *addr, size_t size);
/* The CPU the caller runs on now (getcpu syscall); -1 if unknown. */
int os_current_cpu(void);
/* What a purge achieved: nothing (the kernel refused, e.g. locked pages),
 * pages handed back whose contents may survive, or a range that now reads
 * as zero. Only the last lets a run count as clean. */
enum purge_result { PURGE_NONE = 0, PURGE_LAZY = 1, PURGE_ZEROED = 2 };
/* Reads the kernel page size and probes MADV_FREE once (at init). */
void os_init(void);
/* Whether os_init found MADV_FREE working. */
bool os_lazy_purge_supported(void);
/* Give pages back lazily: contents may survive until the kernel needs the
 * memory (MADV_FREE); os_purge_now where os_init found it unsupported. */
enum purge_result os_purge_lazy(void *addr, size_t size);
/* Give pages back now (MADV_DONTNEED). In a MAP_HUGETLB mapping only
 * whole huge pages may be passed: the kernel fails an unaligned start and
 * silently skips a partial huge page at the end (so "zeroed" would lie). */
enum purge_result os_purge_now(void *addr, size_t size);
unsigned os_ncpus(void);
/* How many CPU numbers the kernel may ever give (the last number in
 * /sys/devices/system/cpu/possible, plus one; read once, at init, without
 * allocating); UINT32_MAX if unknown. */
unsigned os_possible_cpus(void);
/* The kernel's page size (4 KiB on x86-64; 4, 16 or 64 KiB on aarch64). */
size_t os_page_size(void);
uint64_t os_now_ns(void);
/* Transparent huge page hint for a range ("thp" option). */
void os_hint_hugepage(void *addr, size_t size, bool want);

/* Address space only (PROT_NONE, no commit charge), page aligned; NULL
 * with errno = ENOMEM. os_commit makes parts of it usable. */
void *os_reserve(size_t size);
/* Makes [addr, addr+size) of a reservation readable and writable (whole
 * kernel pages); its pages appear, zero, at first touch. false with errno
 * = ENOMEM when the kernel refuses (commit limit, map count). */
bool os_commit(void *addr, size_t size);
/* Takes every access away from [addr, addr+size) (whole kernel pages),
 * first dropping their contents if discard; false if the kernel refused
 * (errno kept: callers on free paths restore it anyway). Secure mode's
 * guard pages and quarantine; os_commit gives access back. */
bool os_protect_none(void *addr, size_t size, bool discard);
/* Faults the pages of [addr, addr+size) in for writing from the calling
 * thread, without changing their contents, so new pages are placed by
 * this thread's memory policy (its NUMA node). Pages already present stay
 * where they are. false if the kernel lacks MADV_POPULATE_WRITE (< 5.14):
 * the pages then appear where they are first written. */
bool os_populate_here(void *addr, size_t size);

#endif
