/*
 * backend_rte.c - DPDK's rte_malloc as a backend, compiled only when
 * pkg-config finds libdpdk. The EAL runs without hugepages, PCI or
 * telemetry (--no-huge -m 2048 ...). rte_malloc has no aligned-at-offset
 * call and no sized free: the nearest equivalents are used and noted.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <rte_eal.h>
#include <rte_malloc.h>

#include "dpmbench.h"

int rte_backend_available(void) { return 1; }

static void *rte_alloc(size_t size) { return rte_malloc(NULL, size, 0); }

static void *rte_alloc_aligned(size_t size, size_t align)
{
    return rte_malloc(NULL, size, (unsigned)align);
}

/* One alignment unit of slack, shifted by the offset (as for libc). */
static void *rte_alloc_aligned_at(size_t size, size_t align, size_t offset)
{
    char *base = rte_malloc(NULL, size + align, (unsigned)align);
    return base ? base + (align - offset % align) % align : NULL;
}

static void *rte_realloc_aligned(void *p, size_t size, size_t align)
{
    return rte_realloc(p, size, (unsigned)align);
}

static void rte_free_sized(void *p, size_t size)
{
    (void)size;
    rte_free(p);
}

static void rte_free_aligned_at(void *p, size_t align, size_t offset)
{
    (void)offset;
    if (align < 64)
        align = 64;
    rte_free((void *)((uintptr_t)p & ~(uintptr_t)(align - 1)));
}

static const struct backend rte_backend = {
    .name = "rte_malloc",
    .alloc = rte_alloc,
    .alloc_aligned = rte_alloc_aligned,
    .alloc_aligned_at = rte_alloc_aligned_at,
    .realloc_aligned = rte_realloc_aligned,
    .free = rte_free,
    .free_sized = rte_free_sized,
    .free_aligned_at = rte_free_aligned_at,
    .note_aligned_at = "aligned_at = rte_malloc(size+align, align) shifted by the offset",
    .note_realloc_aligned = NULL,
    .note_free_sized = "free_sized = rte_free",
};

const struct backend *rte_backend_open(void)
{
    /* its own file prefix keeps clear of a DPDK application on the machine */
    char *argv[] = {"dpmbench", "--no-huge",        "-m",          "2048",
                    "--no-pci", "--no-telemetry",   "-l",          "0",
                    "--no-shconf", "--file-prefix", "dpmbench",    "--log-level=error",
                    NULL};
    /* EAL pins the calling thread to lcore 0; the workloads' threads pin
     * themselves over every CPU this process was given, as for the
     * other backends */
    cpu_set_t allowed;
    int have_allowed = sched_getaffinity(0, sizeof allowed, &allowed) == 0;
    if (rte_eal_init((int)(sizeof argv / sizeof argv[0]) - 1, argv) < 0) {
        fprintf(stderr, "dpmbench: rte_eal_init failed (run as root?)\n");
        return NULL;
    }
    if (have_allowed)
        sched_setaffinity(0, sizeof allowed, &allowed);
    return &rte_backend;
}

void rte_backend_close(void) { rte_eal_cleanup(); }
