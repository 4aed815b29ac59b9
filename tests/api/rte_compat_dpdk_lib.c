/*
 * rte_compat_dpdk_lib.c - the part of test_rte_compat_dpdk that is not
 * switched: a "library" that calls DPDK's own rte_malloc functions, as
 * code built without DPM_RTE_COMPAT_NAMES (or a DPDK library) does.
 */
#include <rte_malloc.h>

#include <stddef.h>

void *lib_rte_malloc(size_t size);
void lib_rte_free(void *p);
int lib_rte_validate(const void *p, size_t *size);
unsigned lib_rte_heap_blocks(void);
rte_iova_t lib_rte_virt2iova(const void *p);

void *lib_rte_malloc(size_t size) { return rte_malloc("lib", size, 0); }
void lib_rte_free(void *p) { rte_free(p); }
int lib_rte_validate(const void *p, size_t *size) { return rte_malloc_validate(p, size); }
rte_iova_t lib_rte_virt2iova(const void *p) { return rte_malloc_virt2iova(p); }

/* Live blocks of DPDK's heap on socket 0. */
unsigned lib_rte_heap_blocks(void)
{
    struct rte_malloc_socket_stats st;
    return rte_malloc_get_socket_stats(0, &st) == 0 ? st.alloc_count : ~0u;
}
