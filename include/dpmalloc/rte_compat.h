/*
 * dpmalloc/rte_compat.h - DPDK's rte_malloc API (22.11 signatures and
 * semantics) on top of dpmalloc, under dpm_rte_* names.
 *
 * Switching a DPDK/SPDK program: define DPM_RTE_COMPAT_NAMES and include
 * this header after every DPDK header, e.g.
 *
 *     #include <rte_eal.h>
 *     #include <rte_malloc.h>          // DPDK headers first (if any)
 *     #define DPM_RTE_COMPAT_NAMES
 *     #include <dpmalloc/rte_compat.h> // then rte_malloc() is dpm_rte_malloc()
 *
 * From there on rte_malloc, rte_zmalloc, rte_calloc, rte_realloc, rte_free,
 * their _socket variants, rte_malloc_validate, rte_malloc_get_socket_stats,
 * rte_malloc_dump_stats, rte_malloc_dump_heaps, rte_malloc_virt2iova and
 * the rte_malloc_heap_* calls listed below are macros naming the dpm_rte_*
 * functions (or, with DPDK's headers, inline wrappers of them that also
 * set rte_errno: see errors below). The order matters because only one
 * header may define struct rte_malloc_socket_stats: when <rte_malloc.h>
 * came first its struct is used (same fields, same layout), otherwise this
 * header defines it. A DPDK header included after this one with
 * DPM_RTE_COMPAT_NAMES fails to compile ("redefinition of struct
 * dpm_rte_malloc_socket_stats"). The four other calls of DPDK 22.11's
 * rte_malloc.h, rte_malloc_heap_memory_{add,remove,attach,detach}, are
 * refused at compile time ("rte_malloc_heap_memory_add() is not provided
 * by dpmalloc's rte_malloc layer ..."): dpmalloc's heaps get their memory
 * on their own (see heaps below).
 *
 * Semantics kept from DPDK: size 0 or an alignment that is not a power of
 * two returns NULL; every block is aligned to at least RTE_CACHE_LINE_SIZE
 * (64), align 0 included; rte_realloc keeps the requested alignment and
 * the block's heap, frees on size 0; rte_free(NULL) does nothing; socket
 * SOCKET_ID_ANY (-1) means the caller's node. Errors: every call that
 * fails sets errno; the switched names also set rte_errno, DPDK's own
 * variable when its headers came first, and otherwise rte_errno is a
 * macro for errno. Differences: a pointer dpmalloc never returned, or a
 * double free, given to dpm_rte_free/dpm_rte_realloc aborts with
 * "dpmalloc: dpm_rte_free(): invalid pointer 0x..." where DPDK logs and
 * returns; heap statistics are kept counters, not a walk of the heap.
 *
 * Blocks of DPDK's own heap (made by DPDK's rte_malloc: code that was not
 * switched, a DPDK library): with libdpmalloc_dpdk enabled, the layer's
 * free, realloc, validate and virt2iova hand them to DPDK's functions;
 * without it they are invalid pointers here (free aborts). The reverse is
 * never caught: a block of this layer must not reach DPDK's own rte_free
 * or rte_realloc (DPDK reads a malloc element header that is not there;
 * docs/dpdk.md, "Mixed blocks").
 *
 * Heaps. A socket heap serves each NUMA node: in libdpmalloc it is the
 * calling thread's arena (dpmalloc's own memory); when libdpmalloc_dpdk is
 * linked and enabled (dpmalloc/dpdk.h) it is an arena per socket whose
 * memory comes from DPDK memzones, so blocks are DMA-able DPDK memory. A
 * named heap (dpm_rte_malloc_heap_create) is a manual dpmalloc arena with
 * that name, reached through the socket id it is given (external heaps'
 * ids, as in DPDK); it grows on demand, from the same memory as the socket
 * heaps.
 *
 * The type string of an allocation is counted in dpmalloc's per-type
 * statistics (dpm_stats_print, section "types"); NULL or "" allocates an
 * untagged block, which takes the thread cache's fast path.
 *
 * Thread safety: every function may be called from any thread; a block
 * may be freed by any thread.
 */
#ifndef DPMALLOC_RTE_COMPAT_H
#define DPMALLOC_RTE_COMPAT_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Minimum alignment of every block of this layer (DPDK's cache line). */
#define DPM_RTE_CACHE_LINE_SIZE 64
/** "Any NUMA socket": the calling thread's node (DPDK's SOCKET_ID_ANY). */
#define DPM_RTE_SOCKET_ID_ANY (-1)
/** Longest heap name, terminating NUL included (DPDK's RTE_HEAP_NAME_MAX_LEN). */
#define DPM_RTE_HEAP_NAME_MAX_LEN 32
/** Most named heaps that may exist at once. */
#define DPM_RTE_MAX_NAMED_HEAPS 32
/** Socket id of the first named heap (DPDK's EXTERNAL_HEAP_MIN_SOCKET_ID). */
#define DPM_RTE_NAMED_HEAP_MIN_SOCKET_ID (2147483647 >> 1)
/** No IO address (DPDK's RTE_BAD_IOVA). */
#define DPM_RTE_BAD_IOVA ((uint64_t)-1)

#if defined(DPM_RTE_COMPAT_NAMES) && defined(_RTE_MALLOC_H_)
/* <rte_malloc.h> came first: its struct is the one (same layout). */
#define dpm_rte_malloc_socket_stats rte_malloc_socket_stats
#else
/** Heap statistics, the fields of DPDK's struct rte_malloc_socket_stats. */
struct dpm_rte_malloc_socket_stats {
    size_t heap_totalsz_bytes; /**< Bytes the heap has mapped (its segments). */
    size_t heap_freesz_bytes;  /**< heap_totalsz_bytes - heap_allocsz_bytes. */
    size_t greatest_free_size; /**< Longest free page run, within 1/8 (see dpm_rte_malloc_get_socket_stats). */
    unsigned free_count;       /**< Free page runs. */
    unsigned alloc_count;      /**< Live blocks (those held in thread caches included). */
    size_t heap_allocsz_bytes; /**< Usable bytes of the live blocks. */
};
#endif

/**
 * Allocate @p size bytes on the caller's socket heap.
 *
 * @param type
 *   Name counted in dpmalloc's per-type statistics, or NULL.
 * @param size
 *   Bytes wanted; 0 returns NULL.
 * @param align
 *   0 or a power of two; the block is aligned to the larger of @p align
 *   and 64.
 * @return
 *   The block, or NULL (errno EINVAL for size 0 or a bad @p align, ENOMEM).
 */
void *dpm_rte_malloc(const char *type, size_t size, unsigned align);
/** dpm_rte_malloc() whose block is zeroed. */
void *dpm_rte_zmalloc(const char *type, size_t size, unsigned align);
/** dpm_rte_zmalloc() of @p num * @p size bytes; NULL (ENOMEM) on overflow, NULL (EINVAL) if 0. */
void *dpm_rte_calloc(const char *type, size_t num, size_t size, unsigned align);
/**
 * Resize @p ptr to @p size bytes aligned to @p align (0: 64), keeping its
 * contents, its type and its heap.
 *
 * @param ptr
 *   A block of this layer, or NULL (then dpm_rte_malloc(NULL, size, align)).
 * @param size
 *   New size; 0 frees @p ptr and returns NULL.
 * @return
 *   The block (possibly @p ptr), or NULL with errno set and @p ptr
 *   untouched. A pointer dpmalloc never returned aborts.
 */
void *dpm_rte_realloc(void *ptr, size_t size, unsigned int align);
/**
 * dpm_rte_realloc() that also moves the block to the heap of @p socket
 * unless it is already there (DPM_RTE_SOCKET_ID_ANY: any heap will do).
 */
void *dpm_rte_realloc_socket(void *ptr, size_t size, unsigned int align, int socket);
/**
 * dpm_rte_malloc() from the heap of @p socket: a NUMA node, a named
 * heap's socket id, or DPM_RTE_SOCKET_ID_ANY.
 * @return NULL with errno EINVAL for a socket that has no heap.
 */
void *dpm_rte_malloc_socket(const char *type, size_t size, unsigned align, int socket);
/** dpm_rte_malloc_socket() whose block is zeroed. */
void *dpm_rte_zmalloc_socket(const char *type, size_t size, unsigned align, int socket);
/** dpm_rte_zmalloc_socket() of @p num * @p size bytes. */
void *dpm_rte_calloc_socket(const char *type, size_t num, size_t size, unsigned align, int socket);
/**
 * Free a block of this layer (or of any dpmalloc call). NULL is ignored;
 * a pointer dpmalloc never returned, an interior pointer or a double free
 * aborts naming the pointer ("dpmalloc: dpm_rte_free(): ...").
 */
void dpm_rte_free(void *ptr);

/**
 * Check that @p ptr is a live block of dpmalloc; never aborts.
 *
 * @param size
 *   If non-NULL and @p ptr is valid, receives the block's usable size.
 * @return
 *   0 for a live block; -1 (errno EINVAL) for NULL, a pointer dpmalloc
 *   never returned, an interior pointer or a freed block (one freed into a
 *   thread cache included). A live block whose bytes hold any value is
 *   valid. With libdpmalloc_dpdk enabled, a block of DPDK's own heap is
 *   DPDK's rte_malloc_validate's answer.
 */
int dpm_rte_malloc_validate(const void *ptr, size_t *size);

/**
 * The IO address (what a device would DMA to) of @p addr, a byte of a
 * block of this layer.
 *
 * @return
 *   With libdpmalloc_dpdk enabled (dpm_dpdk_rte_compat_enable), the IOVA
 *   of a block in DPDK memory (the layer's heaps then, and blocks of
 *   DPDK's own heap), from its memseg; DPM_RTE_BAD_IOVA (errno EINVAL)
 *   for any other address, and for every address without that backend:
 *   dpmalloc's own memory is not device memory.
 */
uint64_t dpm_rte_malloc_virt2iova(const void *addr);

/**
 * Statistics of the heap of @p socket (a node or a named heap's id).
 *
 * Taken from dpmalloc's counters, not by walking the heap. In
 * libdpmalloc the socket heap's figures are those of the automatic
 * arenas together. greatest_free_size is the length of the first run of
 * the highest non-empty slot of the arena's free-run indexes, which is
 * within 1/8 of the longest free run.
 *
 * @return 0, or -1 with errno EINVAL (no such heap, or NULL @p socket_stats).
 */
int dpm_rte_malloc_get_socket_stats(int socket, struct dpm_rte_malloc_socket_stats *socket_stats);

/**
 * Print every heap's statistics to @p f in DPDK's format ("Heap id:...",
 * "\tHeap_size:...", ...), then the per-type counters: those of @p type
 * only, or of every type when @p type is NULL.
 */
void dpm_rte_malloc_dump_stats(FILE *f, const char *type);
/** Print every heap's name, socket id and arena index, with its statistics. */
void dpm_rte_malloc_dump_heaps(FILE *f);

/**
 * Create an empty named heap: a manual dpmalloc arena of that name, which
 * gets a socket id of its own (dpm_rte_malloc_heap_get_socket).
 *
 * @return 0, or -1 with errno EINVAL (@p heap_name NULL, empty or 32
 *   characters or more), EEXIST (a heap of that name exists), ENOSPC
 *   (DPM_RTE_MAX_NAMED_HEAPS exist, or no arena slot is free), ENOMEM.
 */
int dpm_rte_malloc_heap_create(const char *heap_name);
/**
 * Destroy a named heap; its arena is destroyed and its socket id is not
 * given out again.
 *
 * @return 0, or -1 with errno EINVAL (bad name), ENOENT (no such heap),
 *   EPERM (a socket heap's name, "socket_<n>"), EBUSY (blocks of the heap
 *   are live, or a thread is bound to its arena).
 */
int dpm_rte_malloc_heap_destroy(const char *heap_name);
/**
 * Socket id of the heap named @p name ("socket_<n>" for the socket heaps).
 * @return the id (>= 0), or -1 with errno EINVAL (NULL) or ENOENT.
 */
int dpm_rte_malloc_heap_get_socket(const char *name);
/**
 * @return 1 if @p socket_id is a named heap's, 0 for a NUMA node's heap
 *   and for DPM_RTE_SOCKET_ID_ANY, -1 (errno EINVAL) otherwise.
 */
int dpm_rte_malloc_heap_socket_is_external(int socket_id);

/**
 * The dpmalloc arena index behind the heap of @p socket (for dpm_ctl's
 * "thread.arena", to bind a thread so that its untyped allocations from
 * that heap go through its thread cache).
 * @return 0, or -1 with errno EINVAL. In libdpmalloc the socket heaps are
 *   the automatic arenas and have no single index: -1 (ENOENT).
 */
int dpm_rte_heap_arena(int socket, unsigned *arena);

/* ---- where heaps get their memory (used by libdpmalloc_dpdk) ---------- */

/**
 * A provider of heap arenas. create makes the arena that serves socket
 * heap @p socket (name NULL) or named heap @p name (socket = its id) and
 * stores its index; it returns 0 or an errno value. node_of_caller gives
 * the caller's socket (NULL: node 0). nsockets is the number of socket
 * heaps (ids 0 .. nsockets-1).
 *
 * The rest may be NULL. virt2iova gives the IO address of a byte of a
 * block (DPM_RTE_BAD_IOVA: none). foreign_owns says whether a pointer that
 * is not dpmalloc's is a block of the backend's own allocator (DPDK's
 * heap); such blocks go to foreign_free, foreign_realloc (which sets
 * errno when it fails) and foreign_validate, which must then be set.
 */
typedef struct dpm_rte_backend {
    int (*create)(void *ctx, const char *name, int socket, unsigned *arena);
    int (*node_of_caller)(void *ctx);
    int nsockets;
    void *ctx;
    uint64_t (*virt2iova)(void *ctx, const void *addr);
    int (*foreign_owns)(void *ctx, const void *ptr);
    void (*foreign_free)(void *ctx, void *ptr);
    void *(*foreign_realloc)(void *ctx, void *ptr, size_t size, unsigned align, int socket);
    int (*foreign_validate)(void *ctx, const void *ptr, size_t *size);
} dpm_rte_backend_t;

/**
 * Route every heap made from now on through @p backend (NULL: back to
 * dpmalloc's own memory). Socket heaps are then made on first use, one
 * arena per socket. Heaps made earlier keep their arenas.
 * @return 0, or -1 with errno EBUSY if a named heap exists.
 */
int dpm_rte_set_backend(const dpm_rte_backend_t *backend);

#if defined(DPM_RTE_COMPAT_NAMES)
#if !defined(_RTE_MALLOC_H_)
#define rte_malloc_socket_stats dpm_rte_malloc_socket_stats
#endif

/* Errors. Every dpm_rte_* call that fails sets errno. DPDK callers read
 * rte_errno: with DPDK's headers (rte_malloc.h or rte_errno.h came first)
 * each switched name is a wrapper that also copies errno into DPDK's
 * rte_errno when the call fails; without them, rte_errno is errno. */
#if defined(_RTE_MALLOC_H_) || defined(_RTE_ERRNO_H_)
#include <rte_errno.h>
#define DPM_RTE_NAME_(fn) dpm_rte_names_##fn
#define DPM_RTE_WRAP_(ret, fn, params, args, failed)                                                \
    static inline ret dpm_rte_names_##fn params                                                   \
    {                                                                                              \
        ret r_ = dpm_##fn args;                                                                    \
        if (failed)                                                                                \
            rte_errno = errno;                                                                     \
        return r_;                                                                                 \
    }
#define DPM_RTE_ALLOC_ARGS_ (const char *type, size_t size, unsigned align)
#define DPM_RTE_SOCKET_ARGS_ (const char *type, size_t size, unsigned align, int socket)
DPM_RTE_WRAP_(void *, rte_malloc, DPM_RTE_ALLOC_ARGS_, (type, size, align), r_ == NULL)
DPM_RTE_WRAP_(void *, rte_zmalloc, DPM_RTE_ALLOC_ARGS_, (type, size, align), r_ == NULL)
DPM_RTE_WRAP_(void *, rte_calloc, (const char *type, size_t num, size_t size, unsigned align),
              (type, num, size, align), r_ == NULL)
DPM_RTE_WRAP_(void *, rte_realloc, (void *ptr, size_t size, unsigned int align), (ptr, size, align),
              r_ == NULL && size != 0)
DPM_RTE_WRAP_(void *, rte_realloc_socket, (void *ptr, size_t size, unsigned int align, int socket),
              (ptr, size, align, socket), r_ == NULL && size != 0)
DPM_RTE_WRAP_(void *, rte_malloc_socket, DPM_RTE_SOCKET_ARGS_, (type, size, align, socket), r_ == NULL)
DPM_RTE_WRAP_(void *, rte_zmalloc_socket, DPM_RTE_SOCKET_ARGS_, (type, size, align, socket), r_ == NULL)
DPM_RTE_WRAP_(void *, rte_calloc_socket, (const char *type, size_t num, size_t size, unsigned align, int socket),
              (type, num, size, align, socket), r_ == NULL)
DPM_RTE_WRAP_(int, rte_malloc_validate, (const void *ptr, size_t *size), (ptr, size), r_ != 0)
DPM_RTE_WRAP_(int, rte_malloc_get_socket_stats, (int socket, struct dpm_rte_malloc_socket_stats *st),
              (socket, st), r_ != 0)
DPM_RTE_WRAP_(int, rte_malloc_heap_create, (const char *heap_name), (heap_name), r_ != 0)
DPM_RTE_WRAP_(int, rte_malloc_heap_destroy, (const char *heap_name), (heap_name), r_ != 0)
DPM_RTE_WRAP_(int, rte_malloc_heap_get_socket, (const char *name), (name), r_ < 0)
DPM_RTE_WRAP_(int, rte_malloc_heap_socket_is_external, (int socket_id), (socket_id), r_ < 0)
DPM_RTE_WRAP_(uint64_t, rte_malloc_virt2iova, (const void *addr), (addr), r_ == DPM_RTE_BAD_IOVA)
#undef DPM_RTE_ALLOC_ARGS_
#undef DPM_RTE_SOCKET_ARGS_
#else
#define DPM_RTE_NAME_(fn) dpm_##fn
#ifndef rte_errno
#define rte_errno errno
#endif
#endif

/* The four calls that give DPDK's heaps external memory are not
 * provided: dpmalloc's heaps take their memory on their own (from DPDK
 * memzones with libdpmalloc_dpdk). A switched program that names one
 * fails to compile with this message instead of reaching DPDK's function
 * with a heap name DPDK does not know. */
#if defined(__has_attribute)
#if __has_attribute(unavailable)
#define DPM_RTE_REFUSED_(fn)                                                                       \
    __attribute__((unavailable(#fn "() is not provided by dpmalloc's rte_malloc layer (its heaps get " \
                                   "their memory on their own: see docs/dpdk.md)")))
#elif __has_attribute(error)
#define DPM_RTE_REFUSED_(fn)                                                                       \
    __attribute__((error(#fn "() is not provided by dpmalloc's rte_malloc layer (its heaps get "  \
                             "their memory on their own: see docs/dpdk.md)")))
#endif
#endif
#ifdef DPM_RTE_REFUSED_
int dpm_rte_refused_heap_memory_add(const char *heap_name, void *va_addr, size_t len, uint64_t iova_addrs[],
                                    unsigned int n_pages, size_t page_sz)
    DPM_RTE_REFUSED_(rte_malloc_heap_memory_add);
int dpm_rte_refused_heap_memory_remove(const char *heap_name, void *va_addr, size_t len)
    DPM_RTE_REFUSED_(rte_malloc_heap_memory_remove);
int dpm_rte_refused_heap_memory_attach(const char *heap_name, void *va_addr, size_t len)
    DPM_RTE_REFUSED_(rte_malloc_heap_memory_attach);
int dpm_rte_refused_heap_memory_detach(const char *heap_name, void *va_addr, size_t len)
    DPM_RTE_REFUSED_(rte_malloc_heap_memory_detach);
#define rte_malloc_heap_memory_add dpm_rte_refused_heap_memory_add
#define rte_malloc_heap_memory_remove dpm_rte_refused_heap_memory_remove
#define rte_malloc_heap_memory_attach dpm_rte_refused_heap_memory_attach
#define rte_malloc_heap_memory_detach dpm_rte_refused_heap_memory_detach
#else
/* no attribute: the names are left undeclared (an error in C99 and later) */
#define rte_malloc_heap_memory_add rte_malloc_heap_memory_add_is_not_provided_by_dpmalloc
#define rte_malloc_heap_memory_remove rte_malloc_heap_memory_remove_is_not_provided_by_dpmalloc
#define rte_malloc_heap_memory_attach rte_malloc_heap_memory_attach_is_not_provided_by_dpmalloc
#define rte_malloc_heap_memory_detach rte_malloc_heap_memory_detach_is_not_provided_by_dpmalloc
#endif

#define rte_malloc DPM_RTE_NAME_(rte_malloc)
#define rte_zmalloc DPM_RTE_NAME_(rte_zmalloc)
#define rte_calloc DPM_RTE_NAME_(rte_calloc)
#define rte_realloc DPM_RTE_NAME_(rte_realloc)
#define rte_realloc_socket DPM_RTE_NAME_(rte_realloc_socket)
#define rte_malloc_socket DPM_RTE_NAME_(rte_malloc_socket)
#define rte_zmalloc_socket DPM_RTE_NAME_(rte_zmalloc_socket)
#define rte_calloc_socket DPM_RTE_NAME_(rte_calloc_socket)
#define rte_free dpm_rte_free
#define rte_malloc_validate DPM_RTE_NAME_(rte_malloc_validate)
#define rte_malloc_get_socket_stats DPM_RTE_NAME_(rte_malloc_get_socket_stats)
#define rte_malloc_dump_stats dpm_rte_malloc_dump_stats
#define rte_malloc_dump_heaps dpm_rte_malloc_dump_heaps
#define rte_malloc_heap_create DPM_RTE_NAME_(rte_malloc_heap_create)
#define rte_malloc_heap_destroy DPM_RTE_NAME_(rte_malloc_heap_destroy)
#define rte_malloc_heap_get_socket DPM_RTE_NAME_(rte_malloc_heap_get_socket)
#define rte_malloc_heap_socket_is_external DPM_RTE_NAME_(rte_malloc_heap_socket_is_external)
#define rte_malloc_virt2iova DPM_RTE_NAME_(rte_malloc_virt2iova)
#ifndef SOCKET_ID_ANY
#define SOCKET_ID_ANY DPM_RTE_SOCKET_ID_ANY
#endif
#ifndef RTE_BAD_IOVA
#define RTE_BAD_IOVA DPM_RTE_BAD_IOVA
#endif
#endif

#ifdef __cplusplus
}
#endif

#endif /* DPMALLOC_RTE_COMPAT_H */
