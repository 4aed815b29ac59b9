/*
 * rte_compat_proto.c - every dpm_rte_* function has the type of DPDK's
 * function of the same name (checked by the compiler: a pointer of one
 * type initialised with the other), and struct dpm_rte_malloc_socket_stats
 * has DPDK's layout. Compiled only when libdpdk-dev is present.
 */
#include <rte_malloc.h>
#include <dpmalloc/rte_compat.h>

#include <assert.h>
#include <stddef.h>

#define SAME_FIELD(f)                                                                              \
    static_assert(offsetof(struct rte_malloc_socket_stats, f) ==                                   \
                          offsetof(struct dpm_rte_malloc_socket_stats, f) &&                       \
                      sizeof(((struct rte_malloc_socket_stats *)0)->f) ==                          \
                          sizeof(((struct dpm_rte_malloc_socket_stats *)0)->f),                    \
                  "field " #f " differs from DPDK's")
SAME_FIELD(heap_totalsz_bytes);
SAME_FIELD(heap_freesz_bytes);
SAME_FIELD(greatest_free_size);
SAME_FIELD(free_count);
SAME_FIELD(alloc_count);
SAME_FIELD(heap_allocsz_bytes);
static_assert(sizeof(struct rte_malloc_socket_stats) == sizeof(struct dpm_rte_malloc_socket_stats),
              "struct size differs from DPDK's");
static_assert(DPM_RTE_SOCKET_ID_ANY == SOCKET_ID_ANY, "SOCKET_ID_ANY");
static_assert(DPM_RTE_CACHE_LINE_SIZE == RTE_CACHE_LINE_SIZE, "cache line");
static_assert(DPM_RTE_BAD_IOVA == RTE_BAD_IOVA, "bad IOVA");

int rte_compat_proto_checked(void);

int rte_compat_proto_checked(void)
{
    int n = 0;
#define SAME_TYPE(f)                                                                               \
    do {                                                                                           \
        __typeof__(&f) volatile p_ = &dpm_##f;                                                     \
        n += p_ != NULL;                                                                           \
    } while (0)
    SAME_TYPE(rte_malloc);
    SAME_TYPE(rte_zmalloc);
    SAME_TYPE(rte_calloc);
    SAME_TYPE(rte_realloc);
    SAME_TYPE(rte_realloc_socket);
    SAME_TYPE(rte_malloc_socket);
    SAME_TYPE(rte_zmalloc_socket);
    SAME_TYPE(rte_calloc_socket);
    SAME_TYPE(rte_free);
    SAME_TYPE(rte_malloc_validate);
    SAME_TYPE(rte_malloc_dump_stats);
    SAME_TYPE(rte_malloc_dump_heaps);
    SAME_TYPE(rte_malloc_heap_create);
    SAME_TYPE(rte_malloc_heap_destroy);
    SAME_TYPE(rte_malloc_heap_get_socket);
    SAME_TYPE(rte_malloc_heap_socket_is_external);
    SAME_TYPE(rte_malloc_virt2iova);
    /* the stats call differs only in the struct's tag: same layout (above) */
    int (*volatile stats)(int, struct dpm_rte_malloc_socket_stats *) = &dpm_rte_malloc_get_socket_stats;
    n += stats != NULL;
    return n;
}
