/*
 * backends.c - the allocators a workload can run against: dpmalloc's native
 * dpm_ API, the libc API (glibc itself, or a peer preloaded into the child),
 * and where each peer's Debian library lives. DPDK's rte_malloc is in
 * backend_rte.c.
 */
#define _GNU_SOURCE
#include <glob.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dpmalloc.h"
#include "dpmalloc/rte_compat.h"
#include "dpmbench.h"

/* ---- dpmalloc native ------------------------------------------------------ */

static void dpm_free_aligned_at(void *p, size_t align, size_t offset);
static size_t dpm_usable(void *p) { return dpm_usable_size(p); }

/* The native API's malloc_trim(0): arena.<i>.purge for every arena, which
 * also takes the arena's blocks out of every thread's large cache. */
static void dpm_trim(void)
{
    unsigned n = 0;
    size_t len = sizeof n;
    if (dpm_ctl("arenas.narenas", &n, &len, NULL, 0) != 0)
        return;
    for (unsigned i = 0; i < n; i++) {
        char name[48];
        snprintf(name, sizeof name, "arena.%u.purge", i);
        dpm_ctl(name, NULL, NULL, NULL, 0);
    }
}

static const struct backend dpm_backend = {
    .name = "dpmalloc",
    .alloc = dpm_malloc,
    .alloc_aligned = dpm_malloc_aligned,
    .alloc_aligned_at = dpm_malloc_aligned_at,
    .realloc_aligned = dpm_realloc_aligned,
    .free = dpm_free,
    .free_sized = dpm_free_sized,
    .free_aligned_at = dpm_free_aligned_at,
    .realloc = dpm_realloc,
    .usable_size = dpm_usable,
    .trim = dpm_trim,
    .note_trim = "trim = arena.<i>.purge for every arena",
};

/* ---- dpmalloc's rte_malloc layer ---------------------------------------------- */

static void *dpm_rte_alloc(size_t size) { return dpm_rte_malloc(NULL, size, 0); }

static void *dpm_rte_alloc_aligned(size_t size, size_t align)
{
    return dpm_rte_malloc(NULL, size, (unsigned)align);
}

/* As for rte_malloc: one alignment unit of slack, shifted by the offset. */
static void *dpm_rte_alloc_aligned_at(size_t size, size_t align, size_t offset)
{
    char *base = dpm_rte_malloc(NULL, size + align, (unsigned)align);
    return base ? base + (align - offset % align) % align : NULL;
}

static void *dpm_rte_realloc_aligned(void *p, size_t size, size_t align)
{
    return dpm_rte_realloc(p, size, (unsigned)align);
}

static void dpm_rte_free_sized(void *p, size_t size)
{
    (void)size;
    dpm_rte_free(p);
}

static void dpm_rte_free_aligned_at(void *p, size_t align, size_t offset)
{
    (void)offset;
    if (align < 64)
        align = 64;
    dpm_rte_free((void *)((uintptr_t)p & ~(uintptr_t)(align - 1)));
}

static const struct backend dpm_rte_backend = {
    .name = "dpm-rte",
    .alloc = dpm_rte_alloc,
    .alloc_aligned = dpm_rte_alloc_aligned,
    .alloc_aligned_at = dpm_rte_alloc_aligned_at,
    .realloc_aligned = dpm_rte_realloc_aligned,
    .free = dpm_rte_free,
    .free_sized = dpm_rte_free_sized,
    .free_aligned_at = dpm_rte_free_aligned_at,
    .note_aligned_at = "aligned_at = dpm_rte_malloc(size+align, align) shifted by the offset",
    .note_free_sized = "free_sized = dpm_rte_free",
};

/* ---- libc API ------------------------------------------------------------- */

static size_t at_least_pointer(size_t align)
{
    return align < sizeof(void *) ? sizeof(void *) : align;
}

static void *libc_alloc(size_t size) { return malloc(size); }

static void *libc_alloc_aligned(size_t size, size_t align)
{
    void *p;
    return posix_memalign(&p, at_least_pointer(align), size) ? NULL : p;
}

/* Nearest equivalent of aligned-at-offset: one alignment unit of slack,
 * the block shifted forward by (align - offset) % align. The base is found
 * again by rounding down, since the shift is less than the alignment. */
static void *libc_alloc_aligned_at(size_t size, size_t align, size_t offset)
{
    align = at_least_pointer(align);
    char *base = libc_alloc_aligned(size + align, align);
    return base ? base + (align - offset % align) % align : NULL;
}

static void *libc_realloc_aligned(void *p, size_t size, size_t align)
{
    void *q = realloc(p, size);
    if (!q || (uintptr_t)q % align == 0)
        return q;
    void *n = libc_alloc_aligned(size, align);
    if (n)
        memcpy(n, q, size);
    free(q);
    return n;
}

static void libc_free(void *p) { free(p); }
static void *libc_realloc(void *p, size_t size) { return realloc(p, size); }
static size_t libc_usable(void *p) { return malloc_usable_size(p); }

/* malloc_trim is glibc's: a preloaded peer that does not define it leaves
 * it trimming glibc's own (unused) heap, as in any program using it. */
static void libc_trim(void) { malloc_trim(0); }

/* The shift is less than the alignment, so rounding down finds the base. */
static void libc_free_aligned_at(void *p, size_t align, size_t offset)
{
    (void)offset;
    align = at_least_pointer(align);
    free((void *)((uintptr_t)p & ~(uintptr_t)(align - 1)));
}

static void dpm_free_aligned_at(void *p, size_t align, size_t offset)
{
    (void)align;
    (void)offset;
    dpm_free(p);
}

static void libc_free_sized(void *p, size_t size)
{
    (void)size;
    free(p);
}

static const struct backend libc_backend = {
    .name = "libc",
    .alloc = libc_alloc,
    .alloc_aligned = libc_alloc_aligned,
    .alloc_aligned_at = libc_alloc_aligned_at,
    .realloc_aligned = libc_realloc_aligned,
    .free = libc_free,
    .free_sized = libc_free_sized,
    .free_aligned_at = libc_free_aligned_at,
    .realloc = libc_realloc,
    .usable_size = libc_usable,
    .trim = libc_trim,
    .note_aligned_at = "aligned_at = posix_memalign(size+align) shifted by the offset",
    .note_realloc_aligned = "aligned realloc = realloc, then copy if misaligned",
    .note_free_sized = "free_sized = free",
};

const struct backend *backend_open(enum backend_kind kind)
{
    switch (kind) {
    case BACKEND_NATIVE_DPM:
        return &dpm_backend;
    case BACKEND_LIBC:
        return &libc_backend;
    case BACKEND_RTE:
        return rte_backend_open();
    case BACKEND_DPM_RTE:
        return &dpm_rte_backend;
    }
    return NULL;
}

void backend_close(enum backend_kind kind)
{
    if (kind == BACKEND_RTE)
        rte_backend_close();
}

/* ---- finding the peers ---------------------------------------------------- */

#ifndef DPMBENCH_DPDK_VERSION
#define DPMBENCH_DPDK_VERSION ""
#endif

#if defined(__x86_64__)
#define MULTIARCH "x86_64-linux-gnu"
#elif defined(__aarch64__)
#define MULTIARCH "aarch64-linux-gnu"
#else
#define MULTIARCH "*-linux-gnu*"
#endif

/* First existing match of lib*.so* patterns in the usual library dirs,
 * this machine's multiarch dir first. */
static char *find_library(const char *const *names)
{
    static const char *const dirs[] = {
        "/usr/lib/" MULTIARCH, "/lib/" MULTIARCH, "/usr/lib64", "/usr/lib",
        "/usr/local/lib",      "/usr/lib/*-linux-gnu*",
    };
    for (size_t d = 0; d < sizeof dirs / sizeof dirs[0]; d++)
        for (const char *const *n = names; *n; n++) {
            char pattern[512];
            glob_t g;
            snprintf(pattern, sizeof pattern, "%s/%s", dirs[d], *n);
            if (glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc > 0) {
                char *path = strdup(g.gl_pathv[0]);
                globfree(&g);
                return path;
            }
            globfree(&g);
        }
    return NULL;
}

/* The Debian package's version, or "" without dpkg-query. */
static void package_version(const char *package, char *out, size_t len)
{
    char cmd[200];
    FILE *p;
    out[0] = 0;
    snprintf(cmd, sizeof cmd, "dpkg-query -W -f '${Version}' %s 2>/dev/null", package);
    if (!(p = popen(cmd, "r")))
        return;
    if (!fgets(out, (int)len, p))
        out[0] = 0;
    pclose(p);
}

struct peer {
    const char *name;
    const char *package;
    const char *libs[4];
};

static const struct peer peers[] = {
    {"jemalloc", "libjemalloc2", {"libjemalloc.so.2", NULL}},
    {"mimalloc", "libmimalloc2.0", {"libmimalloc.so.2", "libmimalloc.so.2.*", NULL}},
    {"tcmalloc", "libtcmalloc-minimal4",
     {"libtcmalloc_minimal.so.4", "libtcmalloc.so.4", NULL}},
};

static void add_spec(struct backend_spec *out, int *n, int max, struct backend_spec s)
{
    if (*n < max)
        out[(*n)++] = s;
}

/* Every backend this run knows of, in column order; unavailable ones carry
 * the reason in `missing`. */
int discover_backends(struct backend_spec *out, int max, const char *dpm_preload)
{
    int n = 0;
    add_spec(out, &n, max,
             (struct backend_spec){"dpmalloc", BACKEND_NATIVE_DPM, NULL, NULL, DPMALLOC_VERSION, 0});
    add_spec(out, &n, max,
             (struct backend_spec){"dpm-preload", BACKEND_LIBC, dpm_preload,
                                   dpm_preload && access(dpm_preload, R_OK) == 0
                                       ? NULL
                                       : "build/libdpmalloc.so not built",
                                   DPMALLOC_VERSION, 0});
    add_spec(out, &n, max, (struct backend_spec){"glibc", BACKEND_LIBC, NULL, NULL, "", 0});
    snprintf(out[n - 1].version, sizeof out[n - 1].version, "%s", libc_version());
    for (size_t i = 0; i < sizeof peers / sizeof peers[0]; i++) {
        char *path = find_library(peers[i].libs);
        static char why[3][160];
        snprintf(why[i], sizeof why[i], "not found: apt-get install %s (or make bench-deps)",
                 peers[i].package);
        add_spec(out, &n, max,
                 (struct backend_spec){peers[i].name, BACKEND_LIBC, path,
                                       path ? NULL : why[i], "", 0});
        if (path)
            package_version(peers[i].package, out[n - 1].version, sizeof out[n - 1].version);
    }
    add_spec(out, &n, max,
             (struct backend_spec){"rte_malloc", BACKEND_RTE, NULL,
                                   rte_backend_available()
                                       ? NULL
                                       : "not compiled: install libdpdk-dev (pkg-config "
                                         "libdpdk) and re-run cmake",
                                   DPMBENCH_DPDK_VERSION, 0});
    add_spec(out, &n, max,
             (struct backend_spec){"dpm-rte", BACKEND_DPM_RTE, NULL, NULL, DPMALLOC_VERSION, 1});
    return n;
}
