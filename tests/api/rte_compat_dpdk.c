/*
 * rte_compat_dpdk.c - a program switched to the rte_malloc layer
 * (DPM_RTE_COMPAT_NAMES after DPDK's headers) under a real EAL (--no-huge
 * --no-pci --no-shconf, as dpdk_arena), with libdpmalloc_dpdk enabled,
 * beside an unswitched "library" (rte_compat_dpdk_lib.c) that uses DPDK's
 * own rte_malloc:
 * - rte_malloc_virt2iova of the layer's blocks is their IO address (the
 *   memseg's), RTE_BAD_IOVA for blocks of dpmalloc's own memory made
 *   before the backend (DPDK's own function crashed on them);
 * - a block of DPDK's heap given to the switched rte_free, rte_realloc,
 *   rte_malloc_validate, rte_malloc_virt2iova is DPDK's business (the
 *   layer aborted: "invalid pointer");
 * - failing calls set DPDK's rte_errno.
 * Exits 77 (skipped) when the EAL cannot start here.
 */
#include "test.h"

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_malloc.h>
#include <rte_memory.h>
#define DPM_RTE_COMPAT_NAMES
#include <dpmalloc/rte_compat.h>
#include <dpmalloc/dpdk.h>
#include <dpmalloc.h>

#include <errno.h>
#include <string.h>
#include <unistd.h>

void *lib_rte_malloc(size_t size);
void lib_rte_free(void *p);
int lib_rte_validate(const void *p, size_t *size);
unsigned lib_rte_heap_blocks(void);
rte_iova_t lib_rte_virt2iova(const void *p);

static char *before_backend;   /* a layer block of dpmalloc's own memory */

/* The IO address a device would use for p: in IOVA-as-VA mode (this
 * EAL's) p itself, if p is DPDK memory at all. */
static rte_iova_t expected_iova(const void *p)
{
    return rte_mem_virt2memseg(p, NULL) != NULL ? rte_mem_virt2iova(p) : RTE_BAD_IOVA;
}

TEST(virt2iova)
{
    static const size_t sizes[] = {16, 1000, 70000, 3 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        char *p = rte_malloc("iova", sizes[i], 0);
        EXPECT_NONNULL(p);
        rte_iova_t iova = rte_malloc_virt2iova(p);
        EXPECT_TRUE(iova != RTE_BAD_IOVA);
        EXPECT_TRUE(iova == expected_iova(p));
        /* a byte inside the block: its own address */
        EXPECT_TRUE(rte_malloc_virt2iova(p + sizes[i] - 1) == expected_iova(p + sizes[i] - 1));
        rte_free(p);
    }
    /* dpmalloc's own memory is no device's */
    EXPECT_TRUE(rte_malloc_virt2iova(before_backend) == RTE_BAD_IOVA);
    int on_stack = 0;
    rte_errno = 0;
    EXPECT_TRUE(rte_malloc_virt2iova(&on_stack) == RTE_BAD_IOVA);
    EXPECT_EQ_I(rte_errno, EINVAL);
}

TEST(dpdk_blocks_go_back_to_dpdk)
{
    /* the socket heap's first segment is a memzone, which DPDK counts as
     * a block of its heap: made before counting */
    char *warm = rte_malloc("mine", 64, 0);
    unsigned blocks0 = lib_rte_heap_blocks();
    char *d = lib_rte_malloc(3000);
    EXPECT_NONNULL(d);
    EXPECT_EQ_U(lib_rte_heap_blocks(), blocks0 + 1);
    memset(d, 0x77, 3000);
    size_t sz = 0;
    EXPECT_EQ_I(rte_malloc_validate(d, &sz), 0);
    EXPECT_GE_U(sz, 3000);
    EXPECT_TRUE(rte_malloc_virt2iova(d) == lib_rte_virt2iova(d));
    /* realloc keeps it in DPDK's heap, contents kept */
    d = rte_realloc(d, 100000, 0);
    EXPECT_TRUE(d != NULL && d[0] == 0x77 && d[2999] == 0x77);
    EXPECT_EQ_I(lib_rte_validate(d, NULL), 0);
    EXPECT_EQ_U(lib_rte_heap_blocks(), blocks0 + 1);
    rte_free(d);   /* DPDK's rte_free: the heap has it back */
    EXPECT_EQ_U(lib_rte_heap_blocks(), blocks0);
    char *e = lib_rte_malloc(500);
    EXPECT_NULL(rte_realloc(e, 0, 0));   /* size 0 frees (as DPDK's documentation says) */
    EXPECT_EQ_U(lib_rte_heap_blocks(), blocks0);
    /* the layer's blocks stay the layer's */
    char *m = rte_malloc("mine", 3000, 0);
    EXPECT_GE_U(dpm_usable_size(m), 3000);
    rte_free(m);
    EXPECT_EQ_U(lib_rte_heap_blocks(), blocks0);
    rte_free(warm);
}

TEST(errors_in_rte_errno)
{
    rte_errno = 0;
    EXPECT_NULL(rte_malloc_socket("e", 64, 0, 1000));
    EXPECT_EQ_I(rte_errno, EINVAL);
    rte_errno = 0;
    EXPECT_NULL(rte_malloc("e", 64, 3));
    EXPECT_EQ_I(rte_errno, EINVAL);
    rte_errno = 0;
    EXPECT_EQ_I(rte_malloc_heap_get_socket("none"), -1);
    EXPECT_EQ_I(rte_errno, ENOENT);
    rte_errno = 0;
    EXPECT_EQ_I(rte_malloc_heap_destroy("socket_0"), -1);
    EXPECT_EQ_I(rte_errno, EPERM);
}

/* every provided function of rte_malloc.h, through the switched names */
TEST(every_function)
{
    char *a = rte_malloc(NULL, 100, 0), *b = rte_zmalloc(NULL, 100, 0), *c = rte_calloc(NULL, 10, 10, 0);
    char *d = rte_malloc_socket(NULL, 100, 0, 0), *e = rte_zmalloc_socket(NULL, 100, 0, SOCKET_ID_ANY);
    char *f = rte_calloc_socket(NULL, 10, 10, 0, 0);
    EXPECT_TRUE(a && b && c && d && e && f);
    a = rte_realloc(a, 5000, 0);
    b = rte_realloc_socket(b, 5000, 0, 0);
    EXPECT_EQ_I(rte_malloc_validate(a, NULL), 0);
    EXPECT_TRUE(rte_malloc_virt2iova(b) != RTE_BAD_IOVA);
    struct rte_malloc_socket_stats st;
    EXPECT_EQ_I(rte_malloc_get_socket_stats(0, &st), 0);
    EXPECT_GE_U(st.alloc_count, 6);
    EXPECT_EQ_I(rte_malloc_heap_create("every"), 0);
    int id = rte_malloc_heap_get_socket("every");
    EXPECT_EQ_I(rte_malloc_heap_socket_is_external(id), 1);
    char *h = rte_malloc_socket(NULL, 100, 0, id);
    EXPECT_TRUE(h != NULL && rte_malloc_virt2iova(h) != RTE_BAD_IOVA);
    rte_free(h);
    EXPECT_EQ_I(rte_malloc_heap_destroy("every"), 0);
    FILE *out = fopen("/dev/null", "w");
    rte_malloc_dump_stats(out, NULL);
    rte_malloc_dump_heaps(out);
    fclose(out);
    rte_free(a);
    rte_free(b);
    rte_free(c);
    rte_free(d);
    rte_free(e);
    rte_free(f);
}

int main(void)
{
    char prefix[32];
    snprintf(prefix, sizeof prefix, "dpmrte%d", (int)getpid());
    char *argv[] = {"test_rte_compat_dpdk", "--no-huge", "--no-pci", "-m", "512", "--no-shconf",
                    "--file-prefix", prefix, "--no-telemetry", "--iova-mode=va", "-l", "0",
                    "--log-level=error", NULL};
    if (rte_eal_init((int)(sizeof argv / sizeof *argv) - 1, argv) < 0) {
        fprintf(stderr, "SKIP: rte_eal_init failed here (DPDK EAL cannot start)\n");
        return 77;
    }
    before_backend = rte_malloc("own", 1000, 0);
    EXPECT_EQ_I(dpm_dpdk_rte_compat_enable(), 0);
    RUN(dpdk_blocks_go_back_to_dpdk);
    RUN(virt2iova);
    RUN(errors_in_rte_errno);
    RUN(every_function);
    rte_free(before_backend);
    int rc = test_done();
    rte_eal_cleanup();
    return rc;
}
