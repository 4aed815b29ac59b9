/*
 * os.h - the only room that talks to the kernel about memory.
 * Owns: reserving aligned address space, returning it, purging pages
 * (MADV_FREE / MADV_DONTNEED), CPU count and the clock used by decay.
 * May call: mmap, munmap, madvise, sched_getaffinity, clock_gettime.
 */
#ifndef DPM_OS_H
#define DPM_OS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Fresh zeroed memory of size bytes at a multiple of align (both multiples
 * of the page). NULL with errno = ENOMEM when the kernel says no. */
void *os_map_aligned(size_t size, size_t align);
void os_unmap(void *addr, size_t size);
/* Give pages back lazily: contents may survive until the kernel needs the
 * memory (MADV_FREE); falls back to os_purge_now where unsupported.
 * Returns true if the pages are now known to read back as zero. */
bool os_purge_lazy(void *addr, size_t size);
/* Give pages back now: they read back as zero on the next touch. */
void os_purge_now(void *addr, size_t size);
unsigned os_ncpus(void);
/* The kernel's page size (4 KiB on x86-64; 4, 16 or 64 KiB on aarch64). */
size_t os_page_size(void);
uint64_t os_now_ns(void);
/* Transparent huge page hint for a range ("thp" option). */
void os_hint_hugepage(void *addr, size_t size, bool want);

#endif
