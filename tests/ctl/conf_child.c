/*
 * conf_child.c - helper of conf_test: starts dpmalloc (one allocation), then
 * prints every option as "opt.<key>=<value>" read back through dpm_ctl, plus
 * a few derived values ("bin.<j>.slab_size", "ncached.<size>",
 * "tcache.enabled", "narenas") on stdout, one per line. Built twice: plain,
 * and with CONF_DEFINE_SYMBOL, where it also defines the application string
 * `dpm_conf` (which DPMALLOC_CONF must override key by key). With
 * CONF_PUBLIC_ONLY it uses no internal header, so that it can link the
 * shared, libc-overriding library too.
 */
#include <dpmalloc.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#ifdef CONF_PUBLIC_ONLY
/* Linked against the shared library, whose internal symbols are hidden:
 * the option names are listed here instead of read from the ctl table. */
typedef struct ctl_node {
    const char *pattern, *type;
} ctl_node_t;
static const ctl_node_t opt_nodes[] = {
    {"opt.narenas", "unsigned"},
    {"opt.tcache", "bool"},
    {"opt.tcache_max", "size_t"},
    {"opt.percpu", "bool"},
    {"opt.percpu_bytes", "size_t"},
    {"opt.tcache_nslots_small_min", "unsigned"},
    {"opt.tcache_nslots_small_max", "unsigned"},
    {"opt.tcache_nslots_large", "unsigned"},
    {"opt.tcache_large_bytes", "size_t"},
    {"opt.lg_tcache_nslots_mul", "unsigned"},
    {"opt.oversize_threshold", "size_t"},
    {"opt.dirty_decay_ms", "ssize_t"},
    {"opt.muzzy_decay_ms", "ssize_t"},
    {"opt.background_thread", "bool"},
    {"opt.stats_print", "bool"},
    {"opt.stats_cycles", "bool"},
    {"opt.stats_print_opts", "const char *"},
    {"opt.junk", "bool"},
    {"opt.zero", "bool"},
    {"opt.secure", "bool"},
    {"opt.guard_sample", "size_t"},
    {"opt.hugepages", "bool"},
    {"opt.thp", "const char *"},
    {"opt.numa", "bool"},
    {"opt.reserve_mb", "size_t"},
    {"opt.slab_sizes", "const char *"},
    {"opt.pcv_slots", "unsigned"},
    {"opt.pcv_size", "size_t"},
    {"opt.prof", "bool"},
    {"opt.prof_active", "bool"},
    {"opt.prof_final", "bool"},
    {"opt.prof_leak", "bool"},
    {"opt.lg_prof_sample", "size_t"},
    {"opt.prof_prefix", "const char *"},
    {"opt.memory_limit_mb", "size_t"},
    {"opt.memory_soft_limit_mb", "size_t"},
};
static unsigned ctl_node_count(void) { return sizeof opt_nodes / sizeof opt_nodes[0]; }
static const ctl_node_t *ctl_node_at(unsigned i) { return &opt_nodes[i]; }
#else
#include "ctl.h"
#endif

#ifdef CONF_DEFINE_SYMBOL
const char *dpm_conf = "narenas:3,tcache_max:4096,dirty_decay_ms:777,no_such_key:1";
#endif

static int print_opt(const ctl_node_t *n)
{
    size_t len;
    int e;
    if (strcmp(n->type, "bool") == 0) {
        bool v;
        len = sizeof v;
        if ((e = dpm_ctl(n->pattern, &v, &len, NULL, 0)) == 0)
            printf("%s=%d\n", n->pattern, v ? 1 : 0);
    } else if (strcmp(n->type, "unsigned") == 0) {
        unsigned v;
        len = sizeof v;
        if ((e = dpm_ctl(n->pattern, &v, &len, NULL, 0)) == 0)
            printf("%s=%u\n", n->pattern, v);
    } else if (strcmp(n->type, "size_t") == 0) {
        size_t v;
        len = sizeof v;
        if ((e = dpm_ctl(n->pattern, &v, &len, NULL, 0)) == 0)
            printf("%s=%zu\n", n->pattern, v);
    } else if (strcmp(n->type, "ssize_t") == 0) {
        ssize_t v;
        len = sizeof v;
        if ((e = dpm_ctl(n->pattern, &v, &len, NULL, 0)) == 0)
            printf("%s=%zd\n", n->pattern, v);
    } else if (strcmp(n->type, "const char *") == 0) {
        const char *v;
        len = sizeof v;
        if ((e = dpm_ctl(n->pattern, &v, &len, NULL, 0)) == 0)
            printf("%s=%s\n", n->pattern, v != NULL ? v : "(null)");
    } else {
        fprintf(stderr, "conf_child: %s has unknown type %s\n", n->pattern, n->type);
        return 1;
    }
    if (e != 0) {
        fprintf(stderr, "conf_child: dpm_ctl(%s) as %s failed: %d\n", n->pattern, n->type, e);
        return 1;
    }
    return 0;
}

int main(void)
{
    int bad = 0;
    void *p = dpm_malloc(24);   /* initialise: the options are parsed now */
    if (p == NULL)
        return 2;
    dpm_free(p);
    for (unsigned i = 0; i < ctl_node_count(); i++) {
        const ctl_node_t *n = ctl_node_at(i);
        if (strncmp(n->pattern, "opt.", 4) == 0)
            bad |= print_opt(n);
    }
    for (unsigned j = 0; j < 8; j++) {
        size_t v;
        char name[64];
        snprintf(name, sizeof name, "arenas.bin.%u.slab_size", j);
        if (dpm_ctl(name, &v, &(size_t){sizeof v}, NULL, 0) == 0)
            printf("bin.%u.slab_size=%zu\n", j, v);
    }
    static const size_t sizes[] = {16, 64, 1024, 4096, 16384, 32768, 65536};
    for (unsigned k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t sz = sizes[k], n = 0, len = sizeof n;
        if (dpm_ctl("thread.tcache.ncached_max.read_sizeclass", &n, &len, &sz, sizeof sz) == 0)
            printf("ncached.%zu=%zu\n", sz, n);
    }
    bool en = false;
    if (dpm_ctl("thread.tcache.enabled", &en, &(size_t){sizeof en}, NULL, 0) == 0)
        printf("tcache.enabled=%d\n", en ? 1 : 0);
    unsigned na = 0;
    if (dpm_ctl("arenas.narenas", &na, &(size_t){sizeof na}, NULL, 0) == 0)
        printf("narenas=%u\n", na);
    /* the kernel's view of a large block's mapping (thp option) */
    void *big = dpm_malloc((size_t)8 << 20);
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    unsigned long lo = 0, hi = 0;
    bool inside = false;
    while (big != NULL && f != NULL && fgets(line, sizeof line, f) != NULL) {
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            inside = (uintptr_t)big >= lo && (uintptr_t)big < hi;
        else if (inside && strncmp(line, "VmFlags:", 8) == 0) {
            line[strcspn(line, "\n")] = '\0';
            printf("vmflags=%s \n", line + 8);
            inside = false;
        }
    }
    if (f != NULL)
        fclose(f);
    dpm_free(big);
    fflush(stdout);
    return bad;
}
