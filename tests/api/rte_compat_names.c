/*
 * rte_compat_names.c - a program written against DPDK's rte_malloc names,
 * switched to dpmalloc by defining DPM_RTE_COMPAT_NAMES before including
 * dpmalloc/rte_compat.h. Built twice: alone, and (RTE_COMPAT_WITH_DPDK)
 * with <rte_malloc.h> included first, where DPDK's struct
 * rte_malloc_socket_stats is the one used; that build also links
 * rte_compat_proto.c, which checks every dpm_rte_* prototype against
 * DPDK's declaration. Every function of DPDK 22.11's rte_malloc.h that
 * the layer provides is called here; the four it refuses are
 * api/rte_compat_refused.sh's. A failing call sets rte_errno as DPDK's
 * would (DPDK's variable with its headers, errno without) and errno.
 */
#include "test.h"

#ifdef RTE_COMPAT_WITH_DPDK
#include <rte_malloc.h>
#endif
#define DPM_RTE_COMPAT_NAMES
#include <dpmalloc/rte_compat.h>
#include <dpmalloc.h>
#include <errno.h>
#include <stdint.h>

#ifdef RTE_COMPAT_WITH_DPDK
int rte_compat_proto_checked(void);
#endif

TEST(program_uses_rte_names)
{
    char *p = rte_malloc("app", 1000, 0);
    EXPECT_NONNULL(p);
    EXPECT_ALIGNED(p, 64);
    /* the block is dpmalloc's */
    EXPECT_GE_U(dpm_usable_size(p), 1000);
    char *z = rte_zmalloc_socket("app", 5000, 4096, SOCKET_ID_ANY);
    EXPECT_TRUE(z != NULL && test_all_zero(z, 5000));
    EXPECT_ALIGNED(z, 4096);
    char *c = rte_calloc("app", 10, 10, 0);
    p = rte_realloc(p, 20000, 128);
    EXPECT_ALIGNED(p, 128);
    size_t sz = 0;
    EXPECT_EQ_I(rte_malloc_validate(p, &sz), 0);
    EXPECT_GE_U(sz, 20000);
    struct rte_malloc_socket_stats st;
    EXPECT_EQ_I(rte_malloc_get_socket_stats(0, &st), 0);
    EXPECT_EQ_U(st.heap_totalsz_bytes, st.heap_freesz_bytes + st.heap_allocsz_bytes);
    EXPECT_GE_U(st.alloc_count, 3);
    EXPECT_EQ_I(rte_malloc_heap_create("app_heap"), 0);
    int id = rte_malloc_heap_get_socket("app_heap");
    EXPECT_EQ_I(rte_malloc_heap_socket_is_external(id), 1);
    void *h = rte_malloc_socket(NULL, 64, 0, id);
    EXPECT_NONNULL(h);
    h = rte_realloc_socket(h, 128, 0, id);
    rte_free(h);
    EXPECT_EQ_I(rte_malloc_heap_destroy("app_heap"), 0);
    FILE *f = fopen("/dev/null", "w");
    rte_malloc_dump_stats(f, NULL);
    rte_malloc_dump_heaps(f);
    fclose(f);
    /* dpmalloc's own memory (no backend here) is no device's: DPDK's
     * "no IO address", not a walk of a malloc element that is not there */
    EXPECT_TRUE(rte_malloc_virt2iova(p) == RTE_BAD_IOVA);
    rte_free(p);
    rte_free(z);
    rte_free(c);
    rte_free(NULL);
}

/* Each failing call sets rte_errno and errno (cleared before it). */
#define EXPECT_FAILS_WITH(call, bad, e)                                                            \
    do {                                                                                           \
        rte_errno = 0;                                                                             \
        errno = 0;                                                                                 \
        EXPECT_TRUE((call) == (bad));                                                              \
        EXPECT_EQ_I(rte_errno, e);                                                                 \
        EXPECT_EQ_I(errno, e);                                                                     \
    } while (0)

TEST(failures_set_rte_errno)
{
    int on_stack = 0;
    struct rte_malloc_socket_stats st;
    EXPECT_FAILS_WITH(rte_malloc("e", 0, 0), NULL, EINVAL);
    EXPECT_FAILS_WITH(rte_zmalloc("e", 100, 3), NULL, EINVAL);
    EXPECT_FAILS_WITH(rte_calloc("e", SIZE_MAX / 2, 4, 0), NULL, ENOMEM);
    EXPECT_FAILS_WITH(rte_malloc_socket("e", 100, 0, 1000), NULL, EINVAL);
    EXPECT_FAILS_WITH(rte_zmalloc_socket("e", (size_t)1 << 62, 0, SOCKET_ID_ANY), NULL, ENOMEM);
    EXPECT_FAILS_WITH(rte_calloc_socket("e", 1, 0, 0, SOCKET_ID_ANY), NULL, EINVAL);
    char *p = rte_malloc("e", 100, 0);
    EXPECT_FAILS_WITH(rte_realloc(p, 200, 7), NULL, EINVAL);
    EXPECT_FAILS_WITH(rte_realloc_socket(p, 200, 0, 1000), NULL, EINVAL);
    EXPECT_FAILS_WITH(rte_malloc_validate(&on_stack, NULL), -1, EINVAL);
    EXPECT_FAILS_WITH(rte_malloc_get_socket_stats(1000, &st), -1, EINVAL);
    EXPECT_FAILS_WITH(rte_malloc_heap_create(NULL), -1, EINVAL);
    EXPECT_FAILS_WITH(rte_malloc_heap_destroy("no_such_heap"), -1, ENOENT);
    EXPECT_FAILS_WITH(rte_malloc_heap_get_socket("no_such_heap"), -1, ENOENT);
    EXPECT_FAILS_WITH(rte_malloc_heap_socket_is_external(1000), -1, EINVAL);
    EXPECT_FAILS_WITH(rte_malloc_virt2iova(p), RTE_BAD_IOVA, EINVAL);
    /* a successful call leaves rte_errno alone; realloc to 0 frees */
    rte_errno = 0;
    EXPECT_NULL(rte_realloc(p, 0, 0));
    EXPECT_EQ_I(rte_errno, 0);
#ifdef RTE_COMPAT_WITH_DPDK
    EXPECT_EQ_I(rte_compat_proto_checked(), 18);
#endif
}

int main(void)
{
    RUN(program_uses_rte_names);
    RUN(failures_set_rte_errno);
    return test_done();
}
