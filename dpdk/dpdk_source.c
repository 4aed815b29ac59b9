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
 */
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
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

DPM_DPDK_EXPORT int dpm_dpdk_rte_compat_enable(void)
{
    unsigned n = rte_socket_count();
    dpm_rte_backend_t b = {
        .create = backend_create,
        .node_of_caller = backend_node,
        .nsockets = n == 0 ? 1 : (int)n,
        .ctx = NULL,
    };
    return dpm_rte_set_backend(&b);
}
