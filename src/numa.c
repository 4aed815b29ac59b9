/*
 * numa.c - NUMA topology, node arenas and reserves (see numa.h).
 */
#include "numa.h"
#include "conf.h"
#include "error.h"
#include "os.h"

#include <dpmalloc.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static unsigned nnodes = 1;
static uint16_t cpu_node[NUMA_MAX_CPUS];      /* node of each CPU (0 if unlisted) */
static uint16_t node_ncpus[NUMA_MAX_NODES];
/* Listed in the online file; nodes below nnodes may be missing from it. */
static bool node_online[NUMA_MAX_NODES];
/* 0: no arena yet; 1: being made; index + 2 once made. */
static unsigned node_arena_state[NUMA_MAX_NODES];

/* Reads a small sysfs file into buf (NUL-terminated); false if absent. */
static bool read_small_file(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    return true;
}

/* Calls fn(arg, i) for each i of a kernel list such as "0-3,8,10-11". */
static void for_each_in_list(const char *s, void (*fn)(void *, unsigned), void *arg)
{
    while (*s != '\0') {
        if (*s < '0' || *s > '9') {
            s++;
            continue;
        }
        char *end;
        unsigned long lo = strtoul(s, &end, 10), hi = lo;
        if (*end == '-')
            hi = strtoul(end + 1, &end, 10);
        for (unsigned long i = lo; i <= hi && i < NUMA_MAX_CPUS; i++)
            fn(arg, (unsigned)i);
        s = end;
    }
}

static void path_of(char *out, size_t cap, const char *root, const char *tail, int node)
{
    char num[16] = "";
    size_t k = 0;
    if (node >= 0) {
        char rev[16];
        unsigned v = (unsigned)node, r = 0;
        do {
            rev[r++] = (char)('0' + v % 10);
            v /= 10;
        } while (v != 0);
        while (r > 0)
            num[k++] = rev[--r];
        num[k] = '\0';
    }
    out[0] = '\0';
    strncat(out, root, cap - 1);
    strncat(out, "/devices/system/node/", cap - strlen(out) - 1);
    if (node >= 0) {
        strncat(out, "node", cap - strlen(out) - 1);
        strncat(out, num, cap - strlen(out) - 1);
        strncat(out, "/", cap - strlen(out) - 1);
    }
    strncat(out, tail, cap - strlen(out) - 1);
}

typedef struct node_walk {
    const char *root;
    unsigned node;
} node_walk_t;

static void note_cpu(void *arg, unsigned cpu)
{
    unsigned node = *(const unsigned *)arg;
    cpu_node[cpu] = (uint16_t)node;
    node_ncpus[node]++;
}

static void note_node(void *arg, unsigned node)
{
    const node_walk_t *w = arg;
    if (node >= NUMA_MAX_NODES)
        return;
    /* static: init runs once, under the init lock, and may run on a
     * signal handler's small stack (docs/design.md, "Stack") */
    static char path[512], list[4096];
    path_of(path, sizeof(path), w->root, "cpulist", (int)node);
    if (node + 1 > nnodes)
        nnodes = node + 1;
    node_online[node] = true;
    if (read_small_file(path, list, sizeof(list)))
        for_each_in_list(list, note_cpu, &node);
}

void numa_init(void)
{
    /* A debugging and test knob: a copy of /sys with a made-up topology.
     * Ignored under AT_SECURE like DPMALLOC_CONF: the invoker must not
     * choose which files a privileged program reads its topology from. */
    const char *root = conf_secure_getenv("DPMALLOC_SYSFS_ROOT");
    if (root == NULL || root[0] == '\0')
        root = "/sys";
    static char path[512], list[1024];   /* as note_node's */
    nnodes = 0;
    memset(cpu_node, 0, sizeof(cpu_node));
    memset(node_ncpus, 0, sizeof(node_ncpus));
    memset(node_online, 0, sizeof(node_online));
    path_of(path, sizeof(path), root, "online", -1);
    node_walk_t w = {root, 0};
    if (read_small_file(path, list, sizeof(list)))
        for_each_in_list(list, note_node, &w);
    if (nnodes == 0) {   /* no file, or one that names no node */
        nnodes = 1;
        node_online[0] = true;
        memset(node_ncpus, 0, sizeof(node_ncpus));
        node_ncpus[0] = (uint16_t)os_ncpus();
        return;
    }
    /* CPUs that no online node lists (node 0 if it is not online: none
     * listed there) count as the first online node's */
    unsigned first = 0;
    while (!node_online[first])
        first++;
    for (unsigned c = 0; first != 0 && c < NUMA_MAX_CPUS; c++)
        if (cpu_node[c] == 0)
            cpu_node[c] = (uint16_t)first;
}

unsigned numa_nnodes(void) { return nnodes; }
bool numa_node_online(unsigned n) { return n < nnodes && node_online[n]; }
unsigned numa_node_ncpus(unsigned n) { return n < nnodes ? node_ncpus[n] : 0; }

unsigned numa_current_node(void)
{
    int cpu = os_current_cpu();
    return cpu >= 0 && cpu < NUMA_MAX_CPUS ? cpu_node[cpu] : 0;
}

unsigned numa_cpu_node(unsigned cpu) { return cpu < NUMA_MAX_CPUS ? cpu_node[cpu] : 0; }

arena_t *numa_node_arena(unsigned n)
{
    if (!numa_node_online(n))
        return NULL;
    unsigned *st = &node_arena_state[n];
    for (;;) {
        unsigned v = __atomic_load_n(st, __ATOMIC_ACQUIRE);
        if (v >= 2)
            return arena_get(v - 2);
        unsigned none = 0;
        if (v == 0 && __atomic_compare_exchange_n(st, &none, 1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            char name[16] = "node";
            name[4] = (char)('0' + n / 10 % 10);
            name[n >= 10 ? 5 : 4] = (char)('0' + n % 10);
            unsigned index;
            int err = arena_create_manual(name, NULL, (int)n, &index);
            __atomic_store_n(st, err == 0 ? index + 2 : 0, __ATOMIC_RELEASE);
            if (err != 0)
                return NULL;
            continue;
        }
        sched_yield();   /* another thread is making it */
    }
}

arena_t *numa_thread_arena(void) { return numa_node_arena(numa_current_node()); }

void numa_postfork_child(void)
{
    /* a thread that was making a node arena does not exist in the child */
    for (unsigned n = 0; n < NUMA_MAX_NODES; n++)
        if (node_arena_state[n] == 1)
            node_arena_state[n] = 0;
}

/* ---- reserves ----------------------------------------------------------- */

/* Huge pages of the size 1 << lg free in the system's pool (sysfs). */
static size_t free_hugepages(unsigned lg)
{
    char buf[64];
    const char *path = lg == 30 ? "/sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages"
                                : "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages";
    return read_small_file(path, buf, sizeof(buf)) ? (size_t)strtoull(buf, NULL, 10) : 0;
}

/* MemAvailable of /proc/meminfo in bytes (SIZE_MAX if unreadable): more
 * than that cannot be faulted in without swapping or the OOM killer, and
 * under vm.overcommit_memory 1 (or 0, below RAM + swap) the mapping alone
 * is not refused. */
static size_t available_memory(void)
{
    char buf[4096];
    if (!read_small_file("/proc/meminfo", buf, sizeof(buf)))
        return SIZE_MAX;
    const char *p = strstr(buf, "MemAvailable:");
    if (p == NULL)
        return SIZE_MAX;
    unsigned long long kb = strtoull(p + strlen("MemAvailable:"), NULL, 10);
    return kb > SIZE_MAX / 1024 ? SIZE_MAX : (size_t)kb * 1024;
}

/* A mapping of *bytes for a reserve: 1 GiB pages when *bytes is at least
 * 1 GiB and the pool has enough, else 2 MiB pages, else normal pages
 * (DPM_RESERVE_NO_HUGEPAGES: normal only). *bytes is rounded up to the
 * page size used; *lg_huge gets it (0: normal). */
static void *map_reserve(size_t *bytes, unsigned flags, unsigned *lg_huge)
{
    static const unsigned lgs[2] = {30, 21};
    for (int i = 0; i < 2 && !(flags & DPM_RESERVE_NO_HUGEPAGES); i++) {
        size_t huge = (size_t)1 << lgs[i];
        size_t want = round_up(*bytes, huge > SEG_UNIT ? huge : SEG_UNIT);
        if ((lgs[i] == 30 && *bytes < huge) || free_hugepages(lgs[i]) < want / huge)
            continue;
        void *m = os_map_huge_sized(want, huge > SEG_UNIT ? huge : SEG_UNIT, lgs[i]);
        if (m != NULL) {
            *bytes = want;
            *lg_huge = lgs[i];
            return m;
        }
    }
    *bytes = round_up(*bytes, SEG_UNIT);
    *lg_huge = 0;
    if (*bytes > available_memory())
        return NULL;
    return os_map_aligned_committed(*bytes, SEG_UNIT);
}

/* The allocator's own first touches that allocations in a fresh reserve
 * would make, made now (a->lock held): the page-map pages covering it
 * (rewriting an entry with its own value) and a stock of span
 * descriptors (written whole, then put back). */
#define RESERVE_WARM_SPANS 2048

static void warm_metadata(arena_t *a, uintptr_t base, size_t bytes)
{
    size_t per_map_page = (PAGE / sizeof(uintptr_t)) << LG_PAGE;
    for (uintptr_t p = base; p < base + bytes; p += per_map_page)
        radix_set(p, radix_entry(p));
    radix_set(base + bytes - PAGE, radix_entry(base + bytes - PAGE));
    /* the taken descriptors wait in a list through their first words */
    void *stock = NULL;
    size_t want = bytes >> (LG_PAGE + 4);
    if (want > RESERVE_WARM_SPANS)
        want = RESERVE_WARM_SPANS;
    for (void *d; want > 0 && (d = pool_get(&a->ph.spans)) != NULL; want--) {
        memset(d, 0, sizeof(span_t));
        *(void **)d = stock;
        stock = d;
    }
    while (stock != NULL) {
        void *d = stock;
        stock = *(void **)d;
        pool_put(&a->ph.spans, d);
    }
    os_populate(a, sizeof(*a));   /* bins and large stats not used yet */
}

int numa_reserve(arena_t *a, size_t bytes, int node, unsigned flags)
{
    if (bytes == 0)
        return EINVAL;
    /* Too big is ENOMEM, as for malloc: no machine has the 64 TiB this
     * cap allows, and rounding a size near SIZE_MAX up would wrap. */
    if (bytes > ((size_t)1 << 46))
        return ENOMEM;
    unsigned lg_huge;
    void *m = map_reserve(&bytes, flags, &lg_huge);
    if (m == NULL)
        return ENOMEM;
    if (node >= 0)
        os_bind_node(m, bytes, node);
    int err = os_prefault(m, bytes, (flags & DPM_RESERVE_MLOCK) != 0);
    if (err != 0) {
        os_unmap(m, bytes);
        return err;
    }
    lock_elided_t held = mutex_lock_elidable(&a->lock);
    bool ok = ph_add_segment(&a->ph, m, bytes, true, false, true);
    if (ok) {
        warm_metadata(a, (uintptr_t)m, bytes);
        ph_populate_active(&a->ph);
    }
    mutex_unlock_elidable(&a->lock, held);
    if (!ok) {
        os_unmap(m, bytes);
        return ENOMEM;
    }
    return 0;
}

/* For dpmalloc-stat (anchor.h): where the node count and each node's CPU
 * count are. */
extern const unsigned *const anchor_ref_numa_nnodes;
extern const uint16_t *const anchor_ref_numa_node_ncpus;
const unsigned *const anchor_ref_numa_nnodes = &nnodes;
const uint16_t *const anchor_ref_numa_node_ncpus = node_ncpus;
