/*
 * dpdk_source.c - libdpmalloc_dpdk: a page source (dpm_page_source_t)
 * over DPDK memzones, and the rte_malloc layer's backend that makes its
 * heaps from it. Uses only dpmalloc's public API and DPDK's.
 *
 * Each segment is one memzone reserved with the segment's size and
 * alignment (IOVA-contiguity not required: blocks of a segment may span
 * pages of different IO addresses, as rte_malloc's large blocks may).
 * Memzones are named "dpm<n>" from a process-wide counter; on free the
 * memzone is found by its address with rte_memzone_walk (segments come
 * and go rarely: decay gives back only wholly free ones).
 *
 * The backend also answers for DPDK memory: IO addresses from the memseg
 * of an address (no syscall, unlike rte_mem_virt2iova in IOVA-as-PA
 * mode), and blocks of DPDK's own heap (rte_malloc of code that was not
 * switched) go back to DPDK's rte_free/rte_realloc_socket/
 * rte_malloc_validate: this file is not switched, so those names are
 * DPDK's.
 */
#include <rte_common.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_memory.h>
#include <rte_memzone.h>

#include <dpmalloc.h>
#include <dpmalloc/dpdk.h>
#include <dpmalloc/rte_compat.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define DPM_DPDK_EXPORT __attribute__((visibility("default")))

static unsigned long zone_counter;

/* One memzone per segment; not zeroed as far as dpmalloc knows (DPDK
 * zeroes freed memory lazily, and only for its own heap). */
static void *source_alloc(void *ctx, size_t size, size_t align, bool *zeroed)
{
    int socket = (int)(intptr_t)ctx;
    char name[RTE_MEMZONE_NAMESIZE];
    snprintf(name, sizeof name, "dpm%lu", __atomic_fetch_add(&zone_counter, 1, __ATOMIC_RELAXED));
    const struct rte_memzone *mz = rte_memzone_reserve_aligned(name, size, socket, 0, (unsigned)align);
    if (mz == NULL)
        return NULL;
    *zeroed = false;
    return mz->addr;
}

struct zone_search {
    void *addr;
    const struct rte_memzone *found;
};

static void match_zone(const struct rte_memzone *mz, void *arg)
{
    struct zone_search *s = arg;
    if (mz->addr == s->addr)
        s->found = mz;
}

static void source_free(void *ctx, void *addr, size_t size)
{
    (void)ctx;
    (void)size;
    struct zone_search s = {addr, NULL};
    rte_memzone_walk(match_zone, &s);
    if (s.found != NULL)
        rte_memzone_free(s.found);
}

DPM_DPDK_EXPORT int dpm_dpdk_arena_create(const char *name, int socket, unsigned *arena)
{
    if (arena == NULL)
        return EINVAL;
    dpm_page_source_t src = {
        .alloc = source_alloc,
        .free = source_free,
        .purge = NULL,   /* DPDK memory is pinned: never purged */
        .ctx = (void *)(intptr_t)socket,
    };
    return dpm_arena_create_sourced(name, &src, arena);
}

static int backend_create(void *ctx, const char *name, int socket, unsigned *arena)
{
    (void)ctx;
    char buf[32];
    if (name == NULL) {
        snprintf(buf, sizeof buf, "socket_%d", socket);
        return dpm_dpdk_arena_create(buf, socket, arena);
    }
    return dpm_dpdk_arena_create(name, SOCKET_ID_ANY, arena);
}

static int backend_node(void *ctx)
{
    (void)ctx;
    unsigned s = rte_socket_id();
    return s == (unsigned)SOCKET_ID_ANY ? 0 : (int)s;
}

/* As DPDK's rte_malloc_virt2iova does for its blocks: in IOVA-as-VA mode
 * the EAL's own memory is addressed by its virtual address; otherwise the
 * memseg's IOVA (none for memory the EAL could not pin) plus the offset. */
static uint64_t backend_virt2iova(void *ctx, const void *addr)
{
    (void)ctx;
    const struct rte_memseg_list *msl = rte_mem_virt2memseg_list(addr);
    const struct rte_memseg *ms = msl != NULL ? rte_mem_virt2memseg(addr, msl) : NULL;
    if (ms == NULL)
        return RTE_BAD_IOVA;
    if (!msl->external && rte_eal_iova_mode() == RTE_IOVA_VA)
        return (uintptr_t)addr;
    if (ms->iova == RTE_BAD_IOVA)
        return RTE_BAD_IOVA;
    return ms->iova + RTE_PTR_DIFF(addr, ms->addr);
}

/* A pointer that is not dpmalloc's (the layer checked its page map) and
 * lies in DPDK memory is a block of DPDK's heap: dpmalloc's segments are
 * the only other DPDK memory the layer hands out. */
static int backend_foreign_owns(void *ctx, const void *ptr)
{
    (void)ctx;
    return rte_mem_virt2memseg(ptr, NULL) != NULL;
}

static void backend_foreign_free(void *ctx, void *ptr)
{
    (void)ctx;
    rte_free(ptr);
}

static void *backend_foreign_realloc(void *ctx, void *ptr, size_t size, unsigned align, int socket)
{
    (void)ctx;
    void *p = rte_realloc_socket(ptr, size, align, socket);
    if (p == NULL && size != 0)
        errno = rte_errno != 0 ? rte_errno : ENOMEM;
    return p;
}

static int backend_foreign_validate(void *ctx, const void *ptr, size_t *size)
{
    (void)ctx;
    if (rte_malloc_validate(ptr, size) == 0)
        return 0;
    errno = EINVAL;
    return -1;
}

DPM_DPDK_EXPORT int dpm_dpdk_rte_compat_enable(void)
{
    unsigned n = rte_socket_count();
    dpm_rte_backend_t b = {
        .create = backend_create,
        .node_of_caller = backend_node,
        .nsockets = n == 0 ? 1 : (int)n,
        .ctx = NULL,
        .virt2iova = backend_virt2iova,
        .foreign_owns = backend_foreign_owns,
        .foreign_free = backend_foreign_free,
        .foreign_realloc = backend_foreign_realloc,
        .foreign_validate = backend_foreign_validate,
    };
    return dpm_rte_set_backend(&b);
}
