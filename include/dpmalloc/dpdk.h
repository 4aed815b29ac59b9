/*
 * dpmalloc/dpdk.h - dpmalloc arenas on DPDK memory (libdpmalloc_dpdk,
 * built only when libdpdk is found; the core libdpmalloc never depends on
 * DPDK).
 *
 * A DPDK-sourced arena takes its 4 MiB-multiple segments from DPDK
 * memzones (rte_memzone_reserve_aligned on the wanted socket), so every
 * block it hands out is DPDK memory: rte_mem_virt2memseg finds it and
 * rte_mem_virt2iova gives its IO address. Segments are never purged
 * (DPDK memory is pinned); they go back with rte_memzone_free when the
 * arena has them wholly free or is destroyed. Call these after
 * rte_eal_init.
 */
#ifndef DPMALLOC_DPDK_H
#define DPMALLOC_DPDK_H

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Create a manual arena whose memory comes from DPDK memzones on @p socket.
 *
 * @param name
 *   Arena name for the statistics (NULL: none).
 * @param socket
 *   A NUMA socket id, or -1 (SOCKET_ID_ANY) for any.
 * @param arena
 *   Receives the arena index: allocate with dpm_malloc_arena, or bind a
 *   thread with dpm_ctl("thread.arena") so that its thread cache serves it.
 * @return
 *   0, or an errno value: EINVAL (arena NULL), EAGAIN (no arena slot),
 *   ENOMEM.
 */
int dpm_dpdk_arena_create(const char *name, int socket, unsigned *arena);

/**
 * Back the rte_malloc layer (dpmalloc/rte_compat.h) with DPDK memory:
 * from now on each socket heap is a DPDK-sourced arena on that socket
 * (made at its first use) and each named heap a DPDK-sourced arena on any
 * socket; SOCKET_ID_ANY means the caller's rte_socket_id(). Call after
 * rte_eal_init and before the first dpm_rte_malloc_heap_create.
 *
 * @return 0, or -1 with errno EBUSY (a named heap exists).
 */
int dpm_dpdk_rte_compat_enable(void);

#ifdef __cplusplus
}
#endif

#endif /* DPMALLOC_DPDK_H */
