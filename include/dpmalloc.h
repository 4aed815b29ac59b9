/*
 * dpmalloc.h - the public interface of dpmalloc.
 *
 * dpmalloc is a general purpose memory allocator for data-plane and server
 * software. Linked or preloaded, it replaces the libc allocation family
 * (malloc, free, ...). This header declares its native API, prefixed dpm_,
 * which adds what libc lacks: alignment at an offset, sized frees and usable
 * sizes for every block.
 *
 * Thread safety: every function here may be called from any thread at any
 * time, including from a thread other than the one that allocated the block.
 *
 * Signals: as glibc's, these functions are not async-signal-safe. A signal
 * handler that interrupts one of them must not call into dpmalloc (the
 * libc names included); fork() from such a handler in a single-threaded
 * process returns in both processes, and the child may only call
 * async-signal-safe functions (e.g. _exit, execve).
 */
#ifndef DPMALLOC_H
#define DPMALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>   /* the ctl values: "epoch" and the stats.* counters are uint64_t */

#ifdef __cplusplus
extern "C" {
#endif

#define DPMALLOC_VERSION_MAJOR 0
#define DPMALLOC_VERSION_MINOR 1
#define DPMALLOC_VERSION_PATCH 0
#define DPMALLOC_VERSION "0.1.0"

/** Largest alignment any dpm_ call accepts: 1 GiB. */
#define DPM_MAX_ALIGN ((size_t)1 << 30)

#if defined(__GNUC__)
#define DPM_ATTR_MALLOC __attribute__((malloc))
#define DPM_ATTR_ALLOC_SIZE(n) __attribute__((alloc_size(n)))
#define DPM_ATTR_ALLOC_SIZE2(n, m) __attribute__((alloc_size(n, m)))
#else
#define DPM_ATTR_MALLOC
#define DPM_ATTR_ALLOC_SIZE(n)
#define DPM_ATTR_ALLOC_SIZE2(n, m)
#endif

/**
 * Allocate @p size bytes aligned to 16 bytes.
 *
 * @param size
 *   Bytes wanted. 0 is allowed and returns a unique, freeable pointer.
 * @return
 *   The block, or NULL with errno = ENOMEM when memory is exhausted or
 *   @p size exceeds PTRDIFF_MAX.
 */
void *dpm_malloc(size_t size) DPM_ATTR_MALLOC DPM_ATTR_ALLOC_SIZE(1);

/**
 * Allocate @p n * @p size zeroed bytes.
 *
 * @return
 *   The block, or NULL with errno = ENOMEM when the product overflows or
 *   memory is exhausted.
 */
void *dpm_calloc(size_t n, size_t size) DPM_ATTR_MALLOC DPM_ATTR_ALLOC_SIZE2(1, 2);

/**
 * Resize the block @p p to @p size bytes, moving it if needed.
 *
 * @param p
 *   A block from any dpm_ allocation call, or NULL (then same as dpm_malloc).
 * @param size
 *   New size. 0 with a non-NULL @p p frees @p p and returns NULL, as
 *   glibc's realloc does.
 * @return
 *   The resized block (alignment of the original call is not kept: use
 *   dpm_realloc_aligned for that), or NULL with errno = ENOMEM and @p p
 *   untouched.
 */
void *dpm_realloc(void *p, size_t size) DPM_ATTR_ALLOC_SIZE(2);

/**
 * Return a block to the allocator. NULL is ignored.
 *
 * A pointer dpmalloc never returned, an interior pointer or a double free
 * is reported on stderr, naming the call and the pointer, and aborts
 * ("dpmalloc: free(): double free of 0x..."). A double free is caught at
 * the second free while the block sits in any thread's cache or in its
 * slab; docs/design.md ("Misuse checks") says exactly what is and is not
 * caught.
 */
void dpm_free(void *p);

/**
 * Free @p p, promising it was allocated (or last realloc'd) with @p size
 * bytes. In the secure mode the promise is checked: any size the block
 * could have been requested with, by any call and alignment, is accepted;
 * another aborts naming the call and the pointer.
 */
void dpm_free_sized(void *p, size_t size);

/**
 * Allocate @p size bytes at an address that is a multiple of @p align.
 *
 * Small requests come from a size class that is a multiple of @p align (at
 * most one alignment unit of waste, no header); large ones from a page-run
 * search that always fits on the first candidate. Time is bounded for every
 * alignment.
 *
 * @param size
 *   Bytes wanted.
 * @param align
 *   A power of two from 1 to DPM_MAX_ALIGN.
 * @return
 *   The block, or NULL with errno = EINVAL for a bad @p align, ENOMEM when
 *   memory is exhausted.
 */
void *dpm_malloc_aligned(size_t size, size_t align) DPM_ATTR_MALLOC DPM_ATTR_ALLOC_SIZE(1);

/**
 * Allocate @p size bytes at an address p with (p + @p offset) % @p align == 0.
 *
 * This is the VPP "align at offset" request: a structure whose field at
 * @p offset must start a cache line. Small requests come from slabs whose
 * object grid is shifted ("phased") by the offset, so no object carries a
 * pad. The block is freed with dpm_free like any other.
 *
 * @param size
 *   Bytes wanted.
 * @param align
 *   A power of two from 1 to DPM_MAX_ALIGN.
 * @param offset
 *   Any value; it is taken modulo @p align.
 * @return
 *   The block, or NULL with errno = EINVAL / ENOMEM as dpm_malloc_aligned.
 */
void *dpm_malloc_aligned_at(size_t size, size_t align, size_t offset) DPM_ATTR_MALLOC
    DPM_ATTR_ALLOC_SIZE(1);

/** dpm_malloc_aligned() whose block is zeroed. */
void *dpm_zalloc_aligned(size_t size, size_t align) DPM_ATTR_MALLOC DPM_ATTR_ALLOC_SIZE(1);

/**
 * Resize @p p to @p size bytes keeping the alignment @p align.
 *
 * @return
 *   The block (possibly @p p itself), or NULL with errno set and @p p
 *   untouched. @p p NULL behaves as dpm_malloc_aligned.
 */
void *dpm_realloc_aligned(void *p, size_t size, size_t align) DPM_ATTR_ALLOC_SIZE(2);

/**
 * Bytes usable at @p p: at least the size requested, up to the end of the
 * block. 0 for NULL.
 */
size_t dpm_usable_size(const void *p);

/**
 * The usable size dpm_malloc(@p size) (and malloc, under the override)
 * would give: dpm_usable_size(dpm_malloc(size)) == dpm_good_size(size)
 * for every size, in every configuration. A caller that grows a buffer
 * can ask for this much and use all of it. Like jemalloc's nallocx(size, 0)
 * and macOS's malloc_good_size.
 *
 * @return
 *   The usable size, >= @p size; 0 if no allocation of @p size bytes can
 *   succeed (beyond the largest request served, 2^46 bytes), and 0 for
 *   size 0 in the secure mode, whose zero-size blocks have no usable byte.
 */
size_t dpm_good_size(size_t size);

/* ---- typed allocation (the rte_malloc shape) ---------------------------- */

/**
 * Allocate @p size bytes tagged with @p type, a name under which the
 * statistics (dpm_stats_print, section "types") count the bytes and
 * blocks live. Typed blocks are freed with dpm_free like any other.
 *
 * @param type
 *   A short name (first 47 characters count), e.g. "mbuf_pool". NULL or ""
 *   allocates an untagged block. At most 1023 distinct names are counted;
 *   beyond that blocks are allocated untagged.
 * @param size
 *   Bytes wanted.
 * @param align
 *   0 for the default (16), otherwise a power of two up to DPM_MAX_ALIGN.
 * @return
 *   The block, or NULL with errno = EINVAL (bad @p align) or ENOMEM.
 */
void *dpm_malloc_typed(const char *type, size_t size, size_t align) DPM_ATTR_MALLOC DPM_ATTR_ALLOC_SIZE(2);
/** dpm_malloc_typed() whose block is zeroed. */
void *dpm_zmalloc_typed(const char *type, size_t size, size_t align) DPM_ATTR_MALLOC DPM_ATTR_ALLOC_SIZE(2);
/** dpm_zmalloc_typed() of @p n * @p size bytes; NULL/ENOMEM on overflow. */
void *dpm_calloc_typed(const char *type, size_t n, size_t size, size_t align) DPM_ATTR_MALLOC;
/**
 * Resize @p p (any dpmalloc block) to a typed block of @p size bytes.
 * @return the new block (contents kept up to the smaller size) or NULL with
 *   errno set and @p p untouched. @p size 0 frees @p p and returns NULL.
 */
void *dpm_realloc_typed(const char *type, void *p, size_t size, size_t align) DPM_ATTR_ALLOC_SIZE(3);

/* ---- arenas -------------------------------------------------------------- */

/**
 * Allocate from arena @p arena (an index from "arenas.create" or one of
 * the automatic arenas 0 .. "opt.narenas"-1), bypassing thread caches.
 *
 * @param align
 *   0 for the default (16), otherwise a power of two up to DPM_MAX_ALIGN.
 * @return
 *   The block, or NULL with errno = EINVAL (no such arena, bad @p align)
 *   or ENOMEM.
 */
void *dpm_malloc_arena(unsigned arena, size_t size, size_t align) DPM_ATTR_MALLOC DPM_ATTR_ALLOC_SIZE(2);

/* ---- page sources ---------------------------------------------------------- */

/**
 * Where a sourced arena's memory comes from (jemalloc's extent hooks in
 * spirit): the arena asks for segments of 4 MiB multiples, carves every
 * block (small and large) out of them, and gives whole segments back.
 *
 * The callbacks are user code and are called with no dpmalloc lock held:
 * they may allocate (from any arena, this one too: then beware of
 * recursing into alloc without bound), call dpm_ctl and dpm_stats_print.
 * alloc is called by the thread whose allocation needs a new segment;
 * free and purge by whichever thread runs the arena's decay, purge or
 * destroy. A destroy or reset of the arena while one of its alloc or
 * purge callbacks runs (asked for from inside it, or from another thread)
 * fails with EBUSY. See docs/numa.md ("Page sources").
 */
typedef struct dpm_page_source {
    /* size bytes at a multiple of align (both multiples of 4 MiB), or NULL.
     * Set *zeroed to true when the memory reads as zero. */
    void *(*alloc)(void *ctx, size_t size, size_t align, bool *zeroed);
    /* Takes back a whole range alloc returned (same addr and size). May be NULL: never given back. */
    void (*free)(void *ctx, void *addr, size_t size);
    /* Drops the contents of whole pages inside an allocated range; true if
     * they now read as zero. May be NULL: such pages are never purged (pinned/DMA memory). */
    bool (*purge)(void *ctx, void *addr, size_t size);
    void *ctx;
} dpm_page_source_t;

/**
 * Creates a manual arena whose segments come from src (copied). 0 and the new index in *arena, or an errno value.
 *
 * The arena is a manual arena like one from "arenas.create": allocate from
 * it with dpm_malloc_arena, or bind a thread to it ("thread.arena"), whose
 * thread cache then serves it; reset and destroy it with
 * "arena.<i>.reset" / "arena.<i>.destroy", which give every segment back
 * through src->free (EBUSY while the source's alloc or purge is being
 * called for the arena). Allocations that need a segment the source refuses
 * fail with ENOMEM. Decay purges free pages through src->purge (never, if
 * NULL) and gives wholly free segments back through src->free.
 *
 * @param name
 *   A name for the statistics (NULL: none; first 31 characters count).
 * @param src
 *   The source; alloc must not be NULL.
 * @param arena
 *   Where the new arena's index is stored.
 * @return
 *   0, EINVAL (src or its alloc NULL, arena NULL), EAGAIN (all 4096
 *   arenas exist) or ENOMEM.
 */
int dpm_arena_create_sourced(const char *name, const dpm_page_source_t *src, unsigned *arena);

/* ---- NUMA socket heaps ------------------------------------------------------ */

/** "Any socket" as in DPDK: the node of the CPU the caller runs on. */
#define DPM_SOCKET_ID_ANY (-1)

/**
 * Allocate @p size bytes aligned to @p align from the heap of NUMA node
 * @p socket: an arena of that node whose pages are bound to it with
 * mbind (MPOL_PREFERRED; docs/numa.md). A thread whose own arena is that
 * node's (numa:true) allocates through its thread cache; others go to the
 * node's arena directly. Nodes are numbered as in
 * /sys/devices/system/node ("arenas.nnodes" is the highest online node +
 * 1; a node not listed online is refused, as DPDK refuses such sockets).
 *
 * @param align
 *   0 for the default (16), otherwise a power of two up to DPM_MAX_ALIGN.
 * @param socket
 *   A node, or DPM_SOCKET_ID_ANY (-1) for the caller's current node.
 * @return
 *   The block (freed with dpm_free), or NULL with errno = EINVAL (no such
 *   node online, bad @p align) or ENOMEM.
 */
void *dpm_malloc_socket(size_t size, size_t align, int socket) DPM_ATTR_MALLOC DPM_ATTR_ALLOC_SIZE(1);
/** dpm_malloc_socket() whose block is zeroed. */
void *dpm_zmalloc_socket(size_t size, size_t align, int socket) DPM_ATTR_MALLOC DPM_ATTR_ALLOC_SIZE(1);
/** dpm_zmalloc_socket() of @p n * @p size bytes; NULL/ENOMEM on overflow. */
void *dpm_calloc_socket(size_t n, size_t size, size_t align, int socket) DPM_ATTR_MALLOC;
/**
 * Resize @p p to @p size bytes on node @p socket with alignment @p align:
 * @p p itself if it already lives in that node's arena, is aligned and
 * large enough (as rte_realloc_socket, shrinking keeps the block), else
 * a new block with the contents copied (up to the smaller size) and @p p
 * freed. @p p NULL: dpm_malloc_socket. @p size 0: frees @p p, NULL.
 * @return the block, or NULL with errno set and @p p untouched.
 */
void *dpm_realloc_socket(void *p, size_t size, size_t align, int socket) DPM_ATTR_ALLOC_SIZE(2);

/* ---- reserved, prefaulted memory -------------------------------------------- */

/** dpm_reserve flag: normal pages only (no MAP_HUGETLB attempt). */
#define DPM_RESERVE_NO_HUGEPAGES 1u
/** dpm_reserve flag: also mlock the reserve (never swapped out). */
#define DPM_RESERVE_MLOCK 2u

/**
 * Map @p bytes ahead of time, fault every page in, and hand them to an
 * arena, whose allocations then take pages from the reserve before any
 * that would fault (docs/numa.md, "Reserves"). Reserved pages are never
 * purged, and unmapped only when the arena goes: a reset or destroy of a
 * manual arena (DPM_SOCKET_ID_ANY from a thread bound to it) releases its
 * reserve. Normal-page reserves larger than the memory available
 * (MemAvailable) or than the kernel's overcommit accounting allows are
 * refused with ENOMEM before anything is mapped. Pages: 1 GiB huge pages when @p bytes is at least
 * 1 GiB and the system's pool has enough free, else 2 MiB huge pages when
 * it has enough, else normal pages; @p bytes is rounded up to 4 MiB (or
 * the huge page).
 *
 * @param socket
 *   A node: the reserve goes to that node's arena (dpm_malloc_socket) and
 *   is bound to the node. DPM_SOCKET_ID_ANY: to the arena the calling
 *   thread allocates from (with numa:true, its node's).
 * @param flags
 *   0 or DPM_RESERVE_NO_HUGEPAGES | DPM_RESERVE_MLOCK.
 * @return
 *   0, EINVAL (0 bytes, a flag not listed above, no such node online),
 *   ENOMEM (more than the system can give, any size however large, or
 *   past the memory limit, memory.limit: a reserve counts whole), or
 *   mlock's errno (EPERM, ENOMEM), with nothing reserved.
 */
int dpm_reserve(size_t bytes, int socket, unsigned flags);

/* ---- control and statistics ---------------------------------------------- */

/**
 * Read and/or write a control or statistics value by name, jemalloc's
 * mallctl shape: code written against mallctl ports by renaming.
 * docs/ctl.md lists every name, its type and access.
 *
 * @param name
 *   Dotted name, e.g. "stats.allocated", "arena.3.purge", "thread.arena".
 * @param oldp, oldlenp
 *   Where to store the current value and its size; *oldlenp must equal the
 *   size of the name's type. Both NULL to read nothing.
 * @param newp, newlen
 *   The value to write and its size; NULL/0 to write nothing.
 * @return
 *   0, ENOENT (unknown name), EINVAL (wrong size or bad value), EPERM
 *   (read-only name written, or operation not allowed on that object),
 *   EFAULT (an action failed), EBUSY, EAGAIN or ENOMEM.
 */
int dpm_ctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);

/**
 * Write the statistics through @p write_cb (stderr when NULL).
 *
 * @param write_cb
 *   Called with @p cbopaque and each NUL-terminated piece of text, at most
 *   4096 characters each. The report is rendered first and the callback
 *   runs with no allocator lock held: it may allocate, call dpm_ctl or
 *   dpm_stats_print, or start threads.
 * @param opts
 *   NULL or a string of letters: "J" JSON instead of tables; "g" omit
 *   general information (version, options); "m" omit merged totals;
 *   "a" omit per-arena sections; "b" omit per-bin tables; "l" omit
 *   large-class tables; "x" omit lock statistics; "t" omit type tags.
 *   Thread-safe; takes each arena's locks briefly.
 */
void dpm_stats_print(void (*write_cb)(void *cbopaque, const char *text), void *cbopaque, const char *opts);

#ifdef __cplusplus
}
#endif

#endif /* DPMALLOC_H */
