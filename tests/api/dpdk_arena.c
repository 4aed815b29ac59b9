/*
 * dpdk_arena.c - libdpmalloc_dpdk under a real EAL (--no-huge --no-pci
 * --no-shconf, a file prefix of its own so parallel runs do not collide;
 * with argument "huge": --in-memory on huge pages with IOVA as
 * physical addresses, as a NIC would see them): blocks of a DPDK-sourced
 * arena, small and large, are DPDK memory (rte_mem_virt2memseg finds them,
 * rte_mem_virt2iova gives a valid IO address, the physical one in
 * IOVA-as-PA mode); a thread bound to the arena
 * allocates through its thread cache; the rte_malloc layer's heaps come
 * from DPDK memory once enabled; destroying an arena frees its memzones.
 * Exits 77 (skipped) when the EAL cannot start here.
 */
#include "test.h"

#include <rte_eal.h>
#include <rte_memory.h>
#include <rte_memzone.h>

#include <dpmalloc.h>
#include <dpmalloc/dpdk.h>
#include <dpmalloc/rte_compat.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

/* Page size of the EAL's memory: normal pages with --no-huge; with "huge"
 * 0, meaning any huge page size (2 MiB or 1 GiB, whichever the EAL took). */
static uint64_t want_page_sz;
static bool iova_is_pa;

/* p is in a memseg of the EAL's page size, with a valid IO address; in
 * IOVA-as-PA mode that address is p's physical address (the kernel's
 * page map, read by rte_mem_virt2phy). */
static int is_dpdk_memory(const void *p)
{
    const struct rte_memseg *ms = rte_mem_virt2memseg(p, NULL);
    rte_iova_t iova = rte_mem_virt2iova(p);
    if (ms == NULL || iova == RTE_BAD_IOVA || (want_page_sz != 0 ? ms->hugepage_sz != want_page_sz
                                                                  : ms->hugepage_sz < ((uint64_t)2 << 20)))
        return 0;
    return !iova_is_pa || iova == rte_mem_virt2phy(p);
}

static void count_zone(const struct rte_memzone *mz, void *arg)
{
    (void)mz;
    (*(unsigned *)arg)++;
}

static unsigned memzones(void)
{
    unsigned n = 0;
    rte_memzone_walk(count_zone, &n);
    return n;
}

static unsigned arena_of(void *p)
{
    unsigned a = ~0u;
    size_t len = sizeof a;
    return dpm_ctl("arenas.lookup", &a, &len, &p, sizeof p) == 0 ? a : ~0u;
}

static int destroy_arena(unsigned a)
{
    char name[48];
    snprintf(name, sizeof name, "arena.%u.destroy", a);
    return dpm_ctl(name, NULL, NULL, NULL, 0);
}

TEST(blocks_are_dpdk_memory)
{
    unsigned zones0 = memzones(), a = ~0u;
    EXPECT_EQ_I(dpm_dpdk_arena_create("dpdk0", 0, &a), 0);
    static const size_t sizes[] = {16, 64, 1000, 4096, 20000, 100000, 1 << 20, 3 << 20, 9 << 20};
    void *p[sizeof sizes / sizeof *sizes];
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        p[i] = dpm_malloc_arena(a, sizes[i], i % 2 ? 4096 : 0);
        EXPECT_NONNULL(p[i]);
        if (p[i] == NULL)
            continue;
        memset(p[i], 0x5a, sizes[i]);
        EXPECT(is_dpdk_memory(p[i]) && is_dpdk_memory((char *)p[i] + sizes[i] - 1),
               "block of %zu at %p is not DPDK memory", sizes[i], p[i]);
        EXPECT_EQ_U(arena_of(p[i]), a);
    }
    EXPECT_GE_U(memzones(), zones0 + 2);   /* 9 MiB needs a segment of its own */
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        dpm_free(p[i]);
    EXPECT_EQ_I(destroy_arena(a), 0);
    EXPECT_EQ_U(memzones(), zones0);       /* every segment given back */
}

struct bound {
    unsigned arena;
    int ok;
};

static void *bound_thread(void *arg)
{
    struct bound *b = arg;
    if (dpm_ctl("thread.arena", NULL, NULL, &b->arena, sizeof b->arena) != 0)
        return NULL;
    int ok = 1;
    for (size_t size = 8; size <= (64 << 10); size *= 2) {
        void *p = dpm_malloc(size);
        ok &= p != NULL && is_dpdk_memory(p) && arena_of(p) == b->arena;
        dpm_free(p);
        void *q = dpm_malloc(size);   /* from the thread cache: the same block */
        ok &= q == p;
        dpm_free(q);
    }
    unsigned zero = 0;
    dpm_ctl("thread.arena", NULL, NULL, &zero, sizeof zero);
    b->ok = ok;
    return NULL;
}

TEST(bound_thread_cache)
{
    struct bound b = {0, 0};
    EXPECT_EQ_I(dpm_dpdk_arena_create("dpdk_bound", SOCKET_ID_ANY, &b.arena), 0);
    pthread_t t;
    pthread_create(&t, NULL, bound_thread, &b);
    pthread_join(t, NULL);
    EXPECT_TRUE(b.ok);
    EXPECT_EQ_I(destroy_arena(b.arena), 0);
}

TEST(rte_layer_on_dpdk_memory)
{
    EXPECT_EQ_I(dpm_dpdk_rte_compat_enable(), 0);
    char *p = dpm_rte_malloc("dpdk", 1000, 0), *q = dpm_rte_zmalloc_socket(NULL, 2 << 20, 4096, 0);
    EXPECT_TRUE(p != NULL && is_dpdk_memory(p));
    EXPECT_TRUE(q != NULL && is_dpdk_memory(q) && test_all_zero(q, 2 << 20));
    unsigned heap0 = ~0u;
    EXPECT_EQ_I(dpm_rte_heap_arena(0, &heap0), 0);
    EXPECT_EQ_U(arena_of(p), heap0);
    p = dpm_rte_realloc(p, 300000, 0);
    EXPECT_TRUE(p != NULL && is_dpdk_memory(p));
    EXPECT_EQ_I(dpm_rte_malloc_heap_create("dma"), 0);
    int id = dpm_rte_malloc_heap_get_socket("dma");
    char *d = dpm_rte_malloc_socket("dma", 50000, 64, id);
    EXPECT_TRUE(d != NULL && is_dpdk_memory(d));
    struct dpm_rte_malloc_socket_stats st;
    EXPECT_EQ_I(dpm_rte_malloc_get_socket_stats(id, &st), 0);
    EXPECT_EQ_U(st.alloc_count, 1);
    EXPECT_EQ_U(st.heap_totalsz_bytes, st.heap_freesz_bytes + st.heap_allocsz_bytes);
    unsigned zones = memzones();
    dpm_rte_free(d);
    EXPECT_EQ_I(dpm_rte_malloc_heap_destroy("dma"), 0);
    EXPECT_LT_U(memzones(), zones);
    dpm_rte_free(p);
    dpm_rte_free(q);
}

int main(int argc, char **argv_in)
{
    char prefix[32];
    snprintf(prefix, sizeof prefix, "dpmtest%d", (int)getpid());
    bool huge = argc > 1 && strcmp(argv_in[1], "huge") == 0;
    char *argv_plain[] = {"test_dpdk_arena", "--no-huge", "--no-pci", "-m", "512", "--no-shconf",
                          "--file-prefix", prefix, "--no-telemetry", "--iova-mode=va", "-l", "0",
                          "--log-level=error", NULL};
    char *argv_huge[] = {"test_dpdk_arena", "--in-memory", "--no-pci", "-m", "64", "--file-prefix", prefix,
                         "--no-telemetry", "--iova-mode=pa", "-l", "0", "--log-level=error", NULL};
    char **argv = huge ? argv_huge : argv_plain;
    int nargs = huge ? (int)(sizeof argv_huge / sizeof *argv_huge) - 1 : (int)(sizeof argv_plain / sizeof *argv_plain) - 1;
    if (rte_eal_init(nargs, argv) < 0) {
        fprintf(stderr, "SKIP: rte_eal_init failed here (DPDK EAL cannot start)\n");
        return 77;
    }
    want_page_sz = huge ? 0 : (uint64_t)sysconf(_SC_PAGESIZE);
    iova_is_pa = rte_eal_iova_mode() == RTE_IOVA_PA;
    printf("  EAL on %s pages, IOVA as %s\n", huge ? "huge" : "normal", iova_is_pa ? "PA" : "VA");
    EXPECT(!huge || iova_is_pa, "huge-page EAL not in IOVA-as-PA mode");
    RUN(blocks_are_dpdk_memory);
    RUN(bound_thread_cache);
    RUN(rte_layer_on_dpdk_memory);
    int rc = test_done();
    rte_eal_cleanup();
    return rc;
}
