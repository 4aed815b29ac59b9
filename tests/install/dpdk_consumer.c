/*
 * dpdk_consumer.c - a DPDK program built by run_install_test.sh against
 * the staged install with `pkg-config --cflags --libs dpmalloc-dpdk` alone
 * (libdpmalloc_dpdk, libdpmalloc and libdpdk through Requires). It starts
 * an EAL without huge pages, puts the rte_malloc layer on DPDK memory and
 * allocates through the switched rte_ names.
 * Exit 0 and print "dpdk consumer ok ..."; 77 when the EAL cannot start.
 */
#include <rte_eal.h>
#include <rte_malloc.h>
#include <rte_memory.h>
#define DPM_RTE_COMPAT_NAMES
#include <dpmalloc/rte_compat.h>
#include <dpmalloc/dpdk.h>
#include <dpmalloc.h>

#include <stdio.h>
#include <unistd.h>

int main(void)
{
    char prefix[32];
    snprintf(prefix, sizeof prefix, "dpminst%d", (int)getpid());
    char *argv[] = {"dpdk_consumer", "--no-huge", "--no-pci", "-m", "256", "--no-shconf", "--file-prefix", prefix,
                    "--no-telemetry", "--iova-mode=va", "-l", "0", "--log-level=error", NULL};
    if (rte_eal_init((int)(sizeof argv / sizeof *argv) - 1, argv) < 0) {
        fprintf(stderr, "dpdk consumer: rte_eal_init failed here\n");
        return 77;
    }
    int rc = 1;
    if (dpm_dpdk_rte_compat_enable() != 0) {
        fprintf(stderr, "dpdk consumer: dpm_dpdk_rte_compat_enable failed\n");
    } else {
        char *p = rte_malloc("consumer", 4096, 0);
        if (p == NULL || rte_mem_virt2memseg(p, NULL) == NULL || dpm_usable_size(p) < 4096) {
            fprintf(stderr, "dpdk consumer: rte_malloc's block is not dpmalloc's on DPDK memory\n");
        } else {
            printf("dpdk consumer ok, dpmalloc %s\n", DPMALLOC_VERSION);
            rc = 0;
        }
        rte_free(p);
    }
    rte_eal_cleanup();
    return rc;
}
