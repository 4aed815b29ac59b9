/*
 * numa.c - NUMA socket heaps and reserves.
 *
 *   test_numa              real topology: dpm_malloc_socket(.., 0) pages
 *                          carry an MPOL_PREFERRED policy for node 0 and
 *                          sit on node 0 (get_mempolicy); socket variants;
 *                          per-node ctl; reserves take no page faults.
 *   test_numa fake <root>  with DPMALLOC_SYSFS_ROOT=<root> (a made-up
 *                          2-node tree, node0: cpu 0, node1: cpu 1) and
 *                          DPMALLOC_CONF=numa:true: threads pinned to cpu
 *                          0 / 1 take the arenas of node 0 / 1; node 1 is
 *                          unknown to the kernel, so its pages stay unbound
 *                          with exactly one warning on stderr; a thread
 *                          that took node 0's arena and then runs on cpu 1
 *                          gets node 1's blocks, and leaves none of node 0's
 *                          in cpu 1's cache for a thread pinned there.
 *   test_numa cached <root> the same tree, numa:false: a node's small
 *                          blocks freed on its CPU are cached there (stats)
 *                          and come back; freed on the other node's CPU,
 *                          that CPU never hands them out; a trim empties
 *                          the caches; a double free of a cached node block
 *                          aborts naming it.
 */
#include "test.h"

#include <dpmalloc.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MPOL_F_NODE_ (1 << 0)
#define MPOL_F_ADDR_ (1 << 1)
#define MPOL_DEFAULT_ 0
#define MPOL_PREFERRED_ 1

static unsigned ctl_u(const char *name)
{
    unsigned v = ~0u;
    size_t sz = sizeof(v);
    EXPECT_EQ_I(dpm_ctl(name, &v, &sz, NULL, 0), 0);
    return v;
}

static size_t ctl_z(const char *name)
{
    size_t v = 0;
    size_t sz = sizeof(v);
    EXPECT_EQ_I(dpm_ctl(name, &v, &sz, NULL, 0), 0);
    return v;
}

static int policy_of(void *addr, unsigned long *mask)
{
    int mode = -1;
    *mask = 0;
    if (syscall(SYS_get_mempolicy, &mode, mask, 8 * sizeof(*mask), addr, MPOL_F_ADDR_) != 0)
        return -1;
    return mode;
}

static int node_of(void *addr)
{
    int node = -1;
    if (syscall(SYS_get_mempolicy, &node, NULL, 0, addr, MPOL_F_NODE_ | MPOL_F_ADDR_) != 0)
        return -1;
    return node;
}

TEST(socket_blocks_are_bound_to_their_node)
{
    EXPECT_GE_U(ctl_u("arenas.nnodes"), 1);
    size_t sizes[] = {64, 4000, 40000, 3 << 20};
    for (unsigned i = 0; i < 4; i++) {
        char *p = dpm_malloc_socket(sizes[i], 0, 0);
        EXPECT_NONNULL(p);
        memset(p, 1, sizes[i]);   /* real pages */
        unsigned long mask;
        EXPECT_EQ_I(policy_of(p, &mask), MPOL_PREFERRED_);
        EXPECT_EQ_U(mask, 1);
        EXPECT_EQ_I(node_of(p), 0);
        dpm_free(p);
    }
    /* an ordinary block carries no policy */
    char *q = dpm_malloc(4000);
    memset(q, 1, 4000);
    unsigned long mask;
    EXPECT_EQ_I(policy_of(q, &mask), MPOL_DEFAULT_);
    dpm_free(q);
    /* DPM_SOCKET_ID_ANY: the caller's node (0 here) */
    char *r = dpm_malloc_socket(100, 64, DPM_SOCKET_ID_ANY);
    EXPECT_ALIGNED(r, 64);
    unsigned a0 = ctl_u("arenas.node.0.arena"), ar = ~0u;
    size_t sz = sizeof(ar);
    EXPECT_EQ_I(dpm_ctl("arenas.lookup", &ar, &sz, &r, sizeof(r)), 0);
    EXPECT_EQ_U(ar, a0);
    dpm_free(r);
}

TEST(socket_variants)
{
    unsigned n = ctl_u("arenas.nnodes");
    errno = 0;
    EXPECT_NULL(dpm_malloc_socket(64, 0, (int)n));
    EXPECT_ERRNO(EINVAL);
    errno = 0;
    EXPECT_NULL(dpm_malloc_socket(64, 0, -2));
    EXPECT_ERRNO(EINVAL);
    unsigned char *z = dpm_malloc_socket(5000, 0, 0);
    memset(z, 0xff, 5000);
    dpm_free(z);
    z = dpm_zmalloc_socket(5000, 0, 0);
    EXPECT_TRUE(z != NULL && test_all_zero(z, 5000));
    unsigned char *c = dpm_calloc_socket(100, 100, 4096, 0);
    EXPECT_TRUE(c != NULL && test_all_zero(c, 10000));
    EXPECT_ALIGNED(c, 4096);
    errno = 0;
    EXPECT_NULL(dpm_calloc_socket(SIZE_MAX / 2, 3, 0, 0));
    EXPECT_ERRNO(ENOMEM);
    /* realloc: a block of another arena moves to the node, contents kept */
    unsigned char *p = dpm_malloc(300);
    test_fill(p, 300, 7);
    unsigned char *q = dpm_realloc_socket(p, 1000, 0, 0);
    EXPECT_EQ_U(test_check(q, 300, 7), 300);
    unsigned a = ~0u;
    size_t sz = sizeof(a);
    dpm_ctl("arenas.lookup", &a, &sz, &q, sizeof(q));
    EXPECT_EQ_U(a, ctl_u("arenas.node.0.arena"));
    /* and stays put when it already fits there */
    EXPECT_TRUE(dpm_realloc_socket(q, 500, 0, 0) == q);
    EXPECT_NULL(dpm_realloc_socket(q, 0, 0, 0));
    dpm_free(z);
    dpm_free(c);
    /* node arenas serve every thread: never reset or destroyed */
    char name[64];
    snprintf(name, sizeof(name), "arena.%u.destroy", ctl_u("arenas.node.0.arena"));
    EXPECT_EQ_I(dpm_ctl(name, NULL, NULL, NULL, 0), EPERM);
    EXPECT_GE_U(ctl_u("arenas.node.0.ncpus"), 1);
    EXPECT_GE_U(ctl_z("arenas.node.0.mapped"), 4 << 20);
    EXPECT_EQ_I(dpm_ctl("arenas.node.99.mapped", NULL, NULL, NULL, 0), ENOENT);
}

/* Minor faults of the calling thread while it allocates and writes
 * blocks of many sizes adding up to about budget bytes (small and large),
 * through its cache. */
static long faults_while_allocating(size_t budget, void **keep, unsigned *nkeep)
{
    static const size_t sizes[] = {16, 48, 128, 256, 1024, 3072, 8192, 20000, 65536, 300000, 2 << 20};
    struct rusage r0, r1;
    getrusage(RUSAGE_THREAD, &r0);
    size_t used = 0;
    unsigned n = 0;
    for (unsigned round = 0; used < budget && n < 4000; round++) {
        size_t s = sizes[round % (sizeof(sizes) / sizeof(sizes[0]))];
        if (used + s > budget)
            break;
        char *p = dpm_malloc(s);
        if (p == NULL)
            break;
        memset(p, 0x3c, s);
        keep[n++] = p;
        used += s;
    }
    getrusage(RUSAGE_THREAD, &r1);
    *nkeep = n;
    return r1.ru_minflt - r0.ru_minflt;
}

/* "faults [reserve]": a fresh process (exec'd, so no heap state from the
 * other tests) prints the faults of faults_while_allocating, after a
 * 64 MiB reserve if asked. */
static int faults_main(bool reserve)
{
    static void *keep[4000];
    memset(keep, 0, sizeof(keep));
    void *w = dpm_malloc(16);   /* the thread's cache exists before the count */
    dpm_free(w);
    if (reserve && dpm_reserve(64 << 20, DPM_SOCKET_ID_ANY, DPM_RESERVE_NO_HUGEPAGES) != 0)
        return 3;
    unsigned n;
    long f = faults_while_allocating(48 << 20, keep, &n);
    printf("%ld %u\n", f, n);
    return 0;
}

/* "old-slab": blocks of a slab made before the reserve, which the fill
 * of the first malloc put untouched in the CPU's cache (a 3 KiB class's
 * slab spans pages that no block written so far lies on), are handed out
 * inside the reserve: their pages must be resident too. */
static int old_slab_main(void)
{
    static void *keep[64];
    dpm_free(dpm_malloc(3072));
    if (dpm_reserve(8 << 20, DPM_SOCKET_ID_ANY, DPM_RESERVE_NO_HUGEPAGES) != 0)
        return 3;
    struct rusage r0, r1;
    getrusage(RUSAGE_THREAD, &r0);
    for (unsigned i = 0; i < 64; i++) {
        keep[i] = dpm_malloc(3072);
        if (keep[i] != NULL)
            memset(keep[i], 0x3c, 3072);
    }
    getrusage(RUSAGE_THREAD, &r1);
    printf("%ld 64\n", r1.ru_minflt - r0.ru_minflt);
    return 0;
}

static long child_faults(bool reserve)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "/proc/%d/exe faults%s", (int)getpid(), reserve ? " reserve" : "");
    FILE *f = popen(cmd, "r");
    long faults = -1;
    unsigned n = 0;
    if (f == NULL || fscanf(f, "%ld %u", &faults, &n) != 2)
        faults = -1;
    if (f != NULL && pclose(f) != 0)
        faults = -1;
    printf("  %s: %ld minor faults over %u blocks (48 MiB)\n", reserve ? "reserved" : "no reserve", faults, n);
    return faults;
}

TEST(allocations_inside_a_reserve_take_no_page_faults)
{
    long without = child_faults(false);
    long with = child_faults(true);
    EXPECT_GE_U(without, 1000);   /* 48 MiB of fresh pages: ~12000 faults */
    EXPECT(with == 0, "with a reserve: %ld faults", with);
}

TEST(blocks_of_slabs_made_before_a_reserve_take_no_page_faults)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "/proc/%d/exe old-slab", (int)getpid());
    FILE *f = popen(cmd, "r");
    long faults = -1;
    unsigned n = 0;
    if (f == NULL || fscanf(f, "%ld %u", &faults, &n) != 2)
        faults = -1;
    if (f != NULL && pclose(f) != 0)
        faults = -1;
    EXPECT(faults == 0, "64 blocks of a slab made before the reserve: %ld faults", faults);
}

TEST(reserve_shows_in_stats)
{
    unsigned a0 = ctl_u("arenas.node.0.arena");
    (void)a0;
    size_t before = ctl_z("arenas.node.0.reserved");
    EXPECT_EQ_I(dpm_reserve(8 << 20, 0, 0), 0);
    EXPECT_EQ_U(ctl_z("arenas.node.0.reserved"), before + (8 << 20));
    uint64_t e = 1;
    size_t sz = sizeof(e);
    dpm_ctl("epoch", &e, &sz, &e, sizeof(e));
    EXPECT_GE_U(ctl_z("stats.reserved"), 8 << 20);
    EXPECT_EQ_I(dpm_reserve(0, 0, 0), EINVAL);
    EXPECT_EQ_I(dpm_reserve(1 << 20, 0, 0x80), EINVAL);
    EXPECT_EQ_I(dpm_reserve(1 << 20, 1000, 0), EINVAL);
}

/* A reserve larger than the machine can hold is ENOMEM at every size,
 * also past the 64 TiB cap (EINVAL there before) and near SIZE_MAX, where
 * rounding up to the page size would wrap; header and numa.md keep EINVAL
 * for 0 bytes, unknown flags and a node that is not online. */
TEST(reserve_too_big_is_enomem)
{
    static const size_t sizes[] = {(size_t)1 << 45, ((size_t)1 << 46) + 1, (size_t)1 << 47, (size_t)1 << 63,
                                   SIZE_MAX - (4 << 20), SIZE_MAX};
    static const int sockets[] = {DPM_SOCKET_ID_ANY, 0};
    static const unsigned flags[] = {0, DPM_RESERVE_NO_HUGEPAGES, DPM_RESERVE_MLOCK};
    size_t before = ctl_z("arenas.node.0.reserved");
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        for (size_t k = 0; k < sizeof(sockets) / sizeof(sockets[0]); k++)
            for (size_t f = 0; f < sizeof(flags) / sizeof(flags[0]); f++) {
                int r = dpm_reserve(sizes[i], sockets[k], flags[f]);
                EXPECT(r == ENOMEM, "dpm_reserve(%#zx, %d, %u) = %d (%s), want ENOMEM", sizes[i], sockets[k],
                       flags[f], r, strerror(r));
            }
    EXPECT_EQ_U(ctl_z("arenas.node.0.reserved"), before);
}

TEST(reserve_with_hugepages_when_the_system_has_them)
{
    FILE *f = fopen("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages", "r");
    unsigned long free_huge = 0;
    if (f != NULL) {
        if (fscanf(f, "%lu", &free_huge) != 1)
            free_huge = 0;
        fclose(f);
    }
    if (free_huge < 2) {
        printf("  no free 2 MiB huge pages (vm.nr_hugepages): hugepage reserve not tested\n");
        return;
    }
    size_t before = ctl_z("arenas.node.0.reserved");
    EXPECT_EQ_I(dpm_reserve(4 << 20, 0, 0), 0);
    EXPECT_EQ_U(ctl_z("arenas.node.0.reserved"), before + (4 << 20));
}

/* ---- fake topology ------------------------------------------------------ */

typedef struct pinned {
    int cpu;
    unsigned arena;
    void *block;
} pinned_t;

static void *pinned_thread(void *arg)
{
    pinned_t *t = arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(t->cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0)
        return NULL;
    t->block = dpm_malloc(1000);   /* the first allocation chooses the arena */
    memset(t->block, 1, 1000);
    size_t sz = sizeof(t->arena);
    dpm_ctl("thread.arena", &t->arena, &sz, NULL, 0);
    return NULL;
}

static void fake_topology(void)
{
    EXPECT_EQ_U(ctl_u("arenas.nnodes"), 2);
    EXPECT_EQ_U(ctl_u("arenas.node.0.ncpus"), 1);
    EXPECT_EQ_U(ctl_u("arenas.node.1.ncpus"), 1);
    unsigned a0 = ctl_u("arenas.node.0.arena"), a1 = ctl_u("arenas.node.1.arena");
    EXPECT_NE_U(a0, a1);
    for (int round = 0; round < 2; round++)
        for (int cpu = 0; cpu < 2; cpu++) {
            pinned_t t = {cpu, ~0u, NULL};
            pthread_t th;
            pthread_create(&th, NULL, pinned_thread, &t);
            pthread_join(th, NULL);
            EXPECT_EQ_U(t.arena, cpu == 0 ? a0 : a1);
            unsigned owner = ~0u;
            size_t sz = sizeof(owner);
            dpm_ctl("arenas.lookup", &owner, &sz, &t.block, sizeof(t.block));
            EXPECT_EQ_U(owner, t.arena);
            dpm_free(t.block);
        }
    /* node 1 exists only in the fake tree: its pages are unbound */
    char *p = dpm_malloc_socket(100000, 0, 1);
    EXPECT_NONNULL(p);
    memset(p, 2, 100000);
    unsigned long mask;
    EXPECT_EQ_I(policy_of(p, &mask), MPOL_DEFAULT_);
    dpm_free(p);
    p = dpm_malloc_socket(100000, 0, 0);
    EXPECT_EQ_I(policy_of(p, &mask), MPOL_PREFERRED_);
    dpm_free(p);
}

/* A thread that made its first allocation on cpu 0 (node 0's arena) and
 * moved to cpu 1: its small blocks are node 1's, and a thread pinned to
 * cpu 1 then finds no node 0 block in that CPU's cache. */
static void *moved_thread(void *arg)
{
    unsigned *owners = arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    sched_setaffinity(0, sizeof(set), &set);
    dpm_free(dpm_malloc(64));   /* takes node 0's arena */
    CPU_ZERO(&set);
    CPU_SET(1, &set);
    sched_setaffinity(0, sizeof(set), &set);
    void *p[100];
    for (int i = 0; i < 100; i++) {
        p[i] = dpm_malloc(64);
        size_t sz = sizeof(owners[i]);
        dpm_ctl("arenas.lookup", &owners[i], &sz, &p[i], sizeof(p[i]));
    }
    for (int i = 0; i < 100; i++)
        dpm_free(p[i]);
    return NULL;
}

static void *pinned_small(void *arg)
{
    unsigned *owners = arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(1, &set);
    sched_setaffinity(0, sizeof(set), &set);
    void *p[1000];
    for (int i = 0; i < 1000; i++) {
        p[i] = dpm_malloc(64);
        size_t sz = sizeof(owners[i]);
        dpm_ctl("arenas.lookup", &owners[i], &sz, &p[i], sizeof(p[i]));
    }
    for (int i = 0; i < 1000; i++)
        dpm_free(p[i]);
    return NULL;
}

/* stats.front_end: "cpu" or "thread" ("" where the name is unknown) */
static const char *front_end(void)
{
    const char *fp = "";
    size_t sz = sizeof(fp);
    dpm_ctl("stats.front_end", &fp, &sz, NULL, 0);
    return fp;
}

static void moved_topology(void)
{
    unsigned a0 = ctl_u("arenas.node.0.arena"), a1 = ctl_u("arenas.node.1.arena");
    static unsigned owners[1000];
    pthread_t th;
    pthread_create(&th, NULL, moved_thread, owners);
    pthread_join(th, NULL);
    /* on thread caches a thread keeps the arena of its first allocation
     * (numa.md); on the CPU caches its small blocks are its CPU's node's */
    bool thread_mode = strcmp(front_end(), "thread") == 0;
    unsigned wrong = 0;
    for (int i = 0; i < 100; i++)
        wrong += owners[i] != (thread_mode ? a0 : a1);
    EXPECT(wrong == 0, "%u of 100 blocks malloc gave on cpu 1 are not node %d's", wrong, thread_mode ? 0 : 1);
    pthread_create(&th, NULL, pinned_small, owners);
    pthread_join(th, NULL);
    wrong = 0;
    for (int i = 0; i < 1000; i++)
        wrong += owners[i] != a1;
    EXPECT(wrong == 0, "%u of 1000 blocks a thread pinned to cpu 1 got are not node 1's", wrong);
}

/* ---- numa:false: node blocks through the CPU caches ---------------------- */

static size_t stat_z(const char *name)
{
    uint64_t e = 1;
    size_t sz = sizeof(e);
    dpm_ctl("epoch", &e, &sz, &e, sizeof(e));
    return ctl_z(name);
}

static size_t arena_cached(unsigned arena)
{
    char name[64];
    snprintf(name, sizeof(name), "stats.arenas.%u.tcache_bytes", arena);
    return stat_z(name);
}

static void pin_cpu(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof(set), &set);
}

static int free_again(void *p)
{
    dpm_free(p);
    return 0;
}

static void cached_topology(void)
{
    const char *fp = front_end();
    size_t sz;
    if (strcmp(fp, "thread") == 0) {
        printf("  front end %s: node blocks take the thread caches' path\n", fp);
        return;
    }
    unsigned a[2] = {ctl_u("arenas.node.0.arena"), ctl_u("arenas.node.1.arena")};
    for (int node = 0; node < 2; node++) {
        pin_cpu(node);
        size_t before = arena_cached(a[node]);
        void *p = dpm_malloc_socket(64, 0, node);
        unsigned owner = ~0u;
        sz = sizeof(owner);
        dpm_ctl("arenas.lookup", &owner, &sz, &p, sizeof(p));
        EXPECT_EQ_U(owner, a[node]);
        dpm_free(p);
        EXPECT(arena_cached(a[node]) >= before + 64, "node %d: a block freed on its CPU is not cached (%zu -> %zu)",
               node, before, arena_cached(a[node]));
        EXPECT(dpm_malloc_socket(64, 0, node) == p, "node %d: the cached block did not come back", node);
        dpm_free(p);
    }
    /* node 1's blocks freed on cpu 0: cpu 0 never hands them out */
    pin_cpu(0);
    static void *q[2000];
    for (int i = 0; i < 2000; i++)
        q[i] = dpm_malloc_socket(64, 0, 1);
    for (int i = 0; i < 2000; i++)
        dpm_free(q[i]);
    unsigned wrong = 0;
    for (int i = 0; i < 2000; i++) {
        q[i] = dpm_malloc_socket(64, 0, 0);
        unsigned owner = ~0u;
        sz = sizeof(owner);
        dpm_ctl("arenas.lookup", &owner, &sz, &q[i], sizeof(q[i]));
        wrong += owner != a[0];
    }
    EXPECT(wrong == 0, "%u of 2000 node 0 blocks on cpu 0 are not node 0's", wrong);
    for (int i = 0; i < 2000; i++)
        dpm_free(q[i]);
    /* a double free of a cached node block */
    void *p = dpm_malloc_socket(64, 0, 0);
    dpm_free(p);
    struct test_child ch;
    EXPECT_EQ_I(test_run_child((int (*)(void *))free_again, p, &ch, 30), 0);
    EXPECT(WIFSIGNALED(ch.status) && WTERMSIG(ch.status) == SIGABRT && strstr(ch.err, "double free") != NULL,
           "a double free of a cached node block: status %d, stderr:\n%s", ch.status, ch.err);
    char want[64];
    snprintf(want, sizeof(want), "%p", p);
    EXPECT(strstr(ch.err, want) != NULL, "the message names no %s:\n%s", want, ch.err);
    /* a purge empties every cache */
    char name[64];
    snprintf(name, sizeof(name), "arena.%u.purge", a[0]);
    EXPECT_EQ_I(dpm_ctl(name, NULL, NULL, NULL, 0), 0);
    EXPECT_EQ_U(stat_z("stats.cpu_cache_bytes") + stat_z("stats.transfer_bytes"), 0);
    EXPECT_EQ_U(arena_cached(a[0]) + arena_cached(a[1]), 0);
}

/* online "0,2": node 1 is offline (or absent) yet below arenas.nnodes */
static void offline_topology(void)
{
    EXPECT_EQ_U(ctl_u("arenas.nnodes"), 3);
    errno = 0;
    EXPECT_NULL(dpm_malloc_socket(64, 0, 1));
    EXPECT_ERRNO(EINVAL);
    errno = 0;
    EXPECT_NULL(dpm_zmalloc_socket(64, 0, 1));
    EXPECT_ERRNO(EINVAL);
    EXPECT_EQ_I(dpm_reserve(4 << 20, 1, DPM_RESERVE_NO_HUGEPAGES), EINVAL);
    unsigned v;
    size_t sz = sizeof(v);
    EXPECT_EQ_I(dpm_ctl("arenas.node.1.arena", &v, &sz, NULL, 0), ENOENT);
    void *p = dpm_malloc_socket(64, 0, 0);
    EXPECT_NONNULL(p);
    dpm_free(p);
}

/* an online file naming no node: one node holding every CPU, as without it */
static void no_node_topology(void)
{
    EXPECT_EQ_U(ctl_u("arenas.nnodes"), 1);
    EXPECT_EQ_U(ctl_u("arenas.node.0.ncpus"), (unsigned)sysconf(_SC_NPROCESSORS_CONF));
    void *p = dpm_malloc_socket(100000, 0, 0);
    EXPECT_NONNULL(p);
    dpm_free(p);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f != NULL) {
        fputs(text, f);
        fclose(f);
    }
}

TEST(multi_node_arena_choice_on_a_fake_topology)
{
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
        printf("  one CPU: fake topology test skipped\n");
        return;
    }
    char root[] = "/tmp/dpm_sysfs_XXXXXX";
    EXPECT_NONNULL(mkdtemp(root));
    char path[256];
    const char *dirs[] = {"/devices", "/devices/system", "/devices/system/node", "/devices/system/node/node0",
                          "/devices/system/node/node1"};
    for (int i = 0; i < 5; i++) {
        snprintf(path, sizeof(path), "%s%s", root, dirs[i]);
        mkdir(path, 0700);
    }
    snprintf(path, sizeof(path), "%s/devices/system/node/online", root);
    write_file(path, "0-1\n");
    snprintf(path, sizeof(path), "%s/devices/system/node/node0/cpulist", root);
    write_file(path, "0\n");
    snprintf(path, sizeof(path), "%s/devices/system/node/node1/cpulist", root);
    write_file(path, "1\n");

    char cmd[512], out[4096] = "";
    snprintf(cmd, sizeof(cmd), "DPMALLOC_SYSFS_ROOT=%s DPMALLOC_CONF=numa:true /proc/%d/exe fake 2>&1", root,
             (int)getpid());
    FILE *f = popen(cmd, "r");
    size_t n = f != NULL ? fread(out, 1, sizeof(out) - 1, f) : 0;
    out[n] = '\0';
    int st = f != NULL ? pclose(f) : -1;
    EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child failed:\n%s", out);
    const char *warn = "dpmalloc: numa: mbind to a node failed (no such node or no NUMA support), using unbound pages";
    const char *w = strstr(out, warn);
    EXPECT(w != NULL && strstr(w + 1, warn) == NULL, "want exactly one warning:\n%s", out);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    if (system(cmd) != 0)
        TEST_FAIL("rm failed");
}

TEST(node_blocks_go_through_the_cpu_caches_on_a_fake_topology)
{
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
        printf("  one CPU: fake topology test skipped\n");
        return;
    }
    char root[] = "/tmp/dpm_sysfs_XXXXXX";
    EXPECT_NONNULL(mkdtemp(root));
    char path[256];
    const char *dirs[] = {"/devices", "/devices/system", "/devices/system/node", "/devices/system/node/node0",
                          "/devices/system/node/node1"};
    for (int i = 0; i < 5; i++) {
        snprintf(path, sizeof(path), "%s%s", root, dirs[i]);
        mkdir(path, 0700);
    }
    snprintf(path, sizeof(path), "%s/devices/system/node/online", root);
    write_file(path, "0-1\n");
    snprintf(path, sizeof(path), "%s/devices/system/node/node0/cpulist", root);
    write_file(path, "0\n");
    snprintf(path, sizeof(path), "%s/devices/system/node/node1/cpulist", root);
    write_file(path, "1\n");
    char cmd[512], out[8192] = "";
    snprintf(cmd, sizeof(cmd), "DPMALLOC_SYSFS_ROOT=%s DPMALLOC_CONF= /proc/%d/exe cached 2>&1", root, (int)getpid());
    FILE *f = popen(cmd, "r");
    size_t n = f != NULL ? fread(out, 1, sizeof(out) - 1, f) : 0;
    out[n] = '\0';
    int st = f != NULL ? pclose(f) : -1;
    EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child failed:\n%s", out);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    if (system(cmd) != 0)
        TEST_FAIL("rm failed");
}

/* Runs `test_numa <mode>` on a made-up tree whose online file says
 * online, node0 (cpu 0) and node2 (cpu 1) existing; the child's output. */
static int run_on_tree(const char *mode, const char *online, char *out, size_t cap)
{
    char root[] = "/tmp/dpm_sysfs_XXXXXX";
    if (mkdtemp(root) == NULL)
        return -1;
    char path[256];
    const char *dirs[] = {"/devices", "/devices/system", "/devices/system/node", "/devices/system/node/node0",
                          "/devices/system/node/node2"};
    for (int i = 0; i < 5; i++) {
        snprintf(path, sizeof(path), "%s%s", root, dirs[i]);
        mkdir(path, 0700);
    }
    snprintf(path, sizeof(path), "%s/devices/system/node/online", root);
    write_file(path, online);
    snprintf(path, sizeof(path), "%s/devices/system/node/node0/cpulist", root);
    write_file(path, "0\n");
    snprintf(path, sizeof(path), "%s/devices/system/node/node2/cpulist", root);
    write_file(path, "1\n");
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "DPMALLOC_SYSFS_ROOT=%s /proc/%d/exe %s 2>&1", root, (int)getpid(), mode);
    FILE *f = popen(cmd, "r");
    size_t n = f != NULL ? fread(out, 1, cap - 1, f) : 0;
    out[n] = '\0';
    int st = f != NULL ? pclose(f) : -1;
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    if (system(cmd) != 0)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(sockets_of_offline_nodes_are_rejected)
{
    char out[4096];
    int rc = run_on_tree("offline", "0,2\n", out, sizeof(out));
    EXPECT(rc == 0, "child failed (%d):\n%s", rc, out);
}

TEST(an_online_file_without_nodes_means_one_node)
{
    const char *texts[] = {"\n", "none\n"};
    for (int i = 0; i < 2; i++) {
        char out[4096];
        int rc = run_on_tree("nonode", texts[i], out, sizeof(out));
        EXPECT(rc == 0, "online file \"%s\": child failed (%d):\n%s", texts[i], rc, out);
        EXPECT(strstr(out, "mbind") == NULL, "node 0 must bind:\n%s", out);
    }
}

/* A reserve made for a manual arena (the thread's, DPM_SOCKET_ID_ANY)
 * goes with the arena's destroy: unmapped, out of stats.reserved. */
TEST(destroying_a_manual_arena_releases_its_reserve)
{
    unsigned idx = 0, zero = 0, old = 0;
    size_t sz = sizeof(idx);
    EXPECT_EQ_I(dpm_ctl("arenas.create", &idx, &sz, NULL, 0), 0);
    sz = sizeof(old);
    EXPECT_EQ_I(dpm_ctl("thread.arena", &old, &sz, &idx, sizeof(idx)), 0);
    uint64_t e = 1;
    size_t esz = sizeof(e);
    dpm_ctl("epoch", &e, &esz, &e, sizeof(e));
    size_t before = ctl_z("stats.reserved");
    EXPECT_EQ_I(dpm_reserve(8 << 20, DPM_SOCKET_ID_ANY, DPM_RESERVE_NO_HUGEPAGES), 0);
    char *p = dpm_malloc(100000);   /* from the reserve */
    EXPECT_NONNULL(p);
    unsigned char vec = 0;
    EXPECT_EQ_I(mincore((void *)((uintptr_t)p & ~(uintptr_t)4095), 4096, &vec), 0);
    dpm_ctl("epoch", &e, &esz, &e, sizeof(e));
    EXPECT_EQ_U(ctl_z("stats.reserved"), before + (8 << 20));
    dpm_free(p);
    EXPECT_EQ_I(dpm_ctl("thread.arena", NULL, NULL, &zero, sizeof(zero)), 0);
    char name[64];
    snprintf(name, sizeof(name), "arena.%u.destroy", idx);
    EXPECT_EQ_I(dpm_ctl(name, NULL, NULL, NULL, 0), 0);
    dpm_ctl("epoch", &e, &esz, &e, sizeof(e));
    EXPECT_EQ_U(ctl_z("stats.reserved"), before);
    errno = 0;   /* the reserve's pages are unmapped */
    EXPECT(mincore((void *)((uintptr_t)p & ~(uintptr_t)4095), 4096, &vec) == -1 && errno == ENOMEM,
           "the reserve is still mapped");
    EXPECT_EQ_I(dpm_ctl("thread.arena", NULL, NULL, &old, sizeof(old)), 0);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "faults") == 0)
        return faults_main(argc > 2);
    if (argc > 1 && strcmp(argv[1], "old-slab") == 0)
        return old_slab_main();
    if (argc > 1 && strcmp(argv[1], "offline") == 0) {
        offline_topology();
        return test_failures != 0;
    }
    if (argc > 1 && strcmp(argv[1], "nonode") == 0) {
        no_node_topology();
        return test_failures != 0;
    }
    if (argc > 1 && strcmp(argv[1], "fake") == 0) {
        fake_topology();
        moved_topology();
        return test_failures != 0;
    }
    if (argc > 1 && strcmp(argv[1], "cached") == 0) {
        cached_topology();
        return test_failures != 0;
    }
    RUN(socket_blocks_are_bound_to_their_node);
    RUN(socket_variants);
    RUN(allocations_inside_a_reserve_take_no_page_faults);
    RUN(blocks_of_slabs_made_before_a_reserve_take_no_page_faults);
    RUN(reserve_shows_in_stats);
    RUN(reserve_too_big_is_enomem);
    RUN(reserve_with_hugepages_when_the_system_has_them);
    RUN(multi_node_arena_choice_on_a_fake_topology);
    RUN(node_blocks_go_through_the_cpu_caches_on_a_fake_topology);
    RUN(sockets_of_offline_nodes_are_rejected);
    RUN(an_online_file_without_nodes_means_one_node);
    RUN(destroying_a_manual_arena_releases_its_reserve);
    return test_done();
}
