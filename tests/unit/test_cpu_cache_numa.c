/*
 * test_cpu_cache_numa.c - NUMA node arenas through the CPU caches
 * (cpu_cache.h, span.h's node tags) on a made-up 2-node topology: the
 * test writes a copy of /sys where node 0 has CPU 0 and node 1 CPU 1 and
 * runs itself under DPMALLOC_SYSFS_ROOT, with numa:false and numa:true.
 * Checked: every block dpm_malloc_socket(.., k) hands out is node k's
 * (its span's arena and tag), also from the other node's CPU and across
 * frees on either CPU; a node's block freed on its own CPU stays in that
 * CPU's cache and comes back from it, one freed on the other node's CPU
 * goes to its node's transfer cache, never into that CPU's cache (so it
 * is never handed out there); with numa:true malloc gives the running
 * CPU's node's blocks; the per-arena stats count cached node blocks, and
 * arena.<i>.purge of a node arena and a drain empty every cache; a double
 * free of a node block in a CPU cache or a transfer cache aborts naming
 * it; a fork child finds the caches whole; aligned-at-offset (phased)
 * blocks share CPU 0's cache with node 0's bins, each at its own slots;
 * and the invariant checker (cpu_caches_check: a node bin holds only
 * its CPU's node's blocks) after pinned and migrating threads that free
 * each other's blocks. Then all of it again on a 4-node tree whose nodes 2
 * and 3 have no CPU: node 2 has tags (its blocks pass through its
 * transfer cache), node 3 none (the manual arenas' tags and path, see
 * span.h). Skips (77) with one CPU or on thread caches.
 */
#include "alloc.h"
#include "numa.h"
#include "transfer.h"
#include "dpmalloc.h"
#include "unit.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>

static bool numa_on;

static void pin(unsigned cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    (void)sched_setaffinity(0, sizeof(set), &set);
}

static int node_of(const void *p) { return span_of(p)->arena->node; }

static unsigned node_arena_index(unsigned node) { return numa_node_arena(node)->index; }

/* p came from dpm_malloc_socket(.., node): the node's arena and tag. */
static bool is_node_block(const void *p, unsigned node, size_t size)
{
    const span_t *s = span_of(p);
    return s != NULL && s->arena->node == (int)node && s->tcache_class == tc_node_class(node, sc_of_size(size));
}

static size_t stat_z(const char *name)
{
    uint64_t e = 1;
    size_t sz = sizeof(e);
    dpm_ctl("epoch", &e, &sz, &e, sizeof(e));
    size_t v = 0;
    sz = sizeof(v);
    EXPECT_TRUE(dpm_ctl(name, &v, &sz, NULL, 0) == 0, "%s unreadable", name);
    return v;
}

static size_t arena_cached(unsigned node)
{
    char name[64];
    snprintf(name, sizeof(name), "stats.arenas.%u.tcache_bytes", node_arena_index(node));
    return stat_z(name);
}

static const size_t sizes[] = {16, 64, 100, 640, 1000, 3000, 8192, 14000};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* On each node's CPU: its blocks come back from the CPU's cache. */
static void test_local(void)
{
    for (unsigned node = 0; node < 2; node++) {
        pin(node);
        for (unsigned i = 0; i < NSIZES; i++) {
            void *p = dpm_malloc_socket(sizes[i], 0, (int)node);
            EXPECT_TRUE(is_node_block(p, node, sizes[i]), "node %u, %zu bytes: %p is node %d's", node, sizes[i], p,
                        node_of(p));
            dpm_free(p);
            EXPECT_TRUE(cpu_caches_hold(p, span_of(p)->tcache_class), "node %u, %zu bytes: a freed block is not cached",
                        node, sizes[i]);
            /* with a block cached, bad arguments still fail */
            errno = 0;
            EXPECT_TRUE(dpm_malloc_socket(sizes[i], 3, (int)node) == NULL && errno == EINVAL,
                        "alignment 3 on node %u: errno %d", node, errno);
            errno = 0;
            EXPECT_TRUE(dpm_malloc_socket(sizes[i], 0, -2) == NULL && errno == EINVAL, "socket -2: errno %d", errno);
            void *q = dpm_malloc_socket(sizes[i], 0, (int)node);
            EXPECT_TRUE(q == p, "node %u, %zu bytes: the cached block did not come back (%p, then %p)", node,
                        sizes[i], p, q);
            dpm_free(q);
        }
        /* DPM_SOCKET_ID_ANY: the node of the CPU */
        void *p = dpm_malloc_socket(64, 0, DPM_SOCKET_ID_ANY);
        EXPECT_TRUE(is_node_block(p, node, 64), "any on CPU %u: node %d", node, node_of(p));
        dpm_free(p);
        /* malloc: with numa:true the CPU's node's, else an automatic arena's */
        p = dpm_malloc(64);
        EXPECT_TRUE(numa_on ? is_node_block(p, node, 64) : node_of(p) == -1, "malloc on CPU %u: node %d", node,
                    node_of(p));
        dpm_free(p);
        p = dpm_malloc_aligned(200, 64);
        EXPECT_TRUE(numa_on ? node_of(p) == (int)node : node_of(p) == -1, "aligned on CPU %u: node %d", node,
                    node_of(p));
        dpm_free(p);
    }
}

/* Node 1's blocks allocated and freed on node 0's CPU: node 1's, and
 * node 0's CPU hands out none of them afterwards. */
#define NREMOTE 3000
static void *remote[NREMOTE];

static void test_remote(void)
{
    pin(0);
    for (unsigned i = 0; i < NREMOTE; i++) {
        remote[i] = dpm_malloc_socket(64, 0, 1);
        EXPECT_TRUE(is_node_block(remote[i], 1, 64), "node 1 from CPU 0: node %d", node_of(remote[i]));
    }
    for (unsigned i = 0; i < NREMOTE; i++)
        dpm_free(remote[i]);
    const char *why = cpu_caches_check();
    EXPECT_TRUE(why == NULL, "after remote frees: %s", why);
    for (unsigned i = 0; i < NREMOTE; i++) {
        remote[i] = numa_on ? dpm_malloc(64) : dpm_malloc_socket(64, 0, 0);
        EXPECT_TRUE(is_node_block(remote[i], 0, 64), "node 0's CPU after remote frees: node %d", node_of(remote[i]));
    }
    for (unsigned i = 0; i < NREMOTE; i++)
        dpm_free(remote[i]);
    /* and node 1's CPU gets its blocks back */
    pin(1);
    for (unsigned i = 0; i < NREMOTE; i++) {
        remote[i] = dpm_malloc_socket(64, 0, 1);
        EXPECT_TRUE(is_node_block(remote[i], 1, 64), "node 1's CPU: node %d", node_of(remote[i]));
    }
    for (unsigned i = 0; i < NREMOTE; i++)
        dpm_free(remote[i]);
}

/* ---- threads: pinned ones that free each other's blocks, one moved ----- */

#define NWORKERS 3
#define MAILBOX 256
static struct mailbox {
    pthread_mutex_t lock;
    void *slot[MAILBOX];
    unsigned n;
} boxes[NWORKERS];
static unsigned wrong_node;

static void *worker(void *arg)
{
    unsigned me = (unsigned)(uintptr_t)arg;
    bool moved = me == 2;   /* workers 0 and 1 stay on CPU 0 and 1 */
    uint64_t rng = 0x9e3779b97f4a7c15ull * (me + 1);
    void *mine[512] = {0};
    pin(me % 2);
    for (long k = 0; k < 60000; k++) {
        if (moved && k % 397 == 0)
            pin((unsigned)(unit_rand(&rng) % 2));
        unsigned i = (unsigned)(unit_rand(&rng) % 512);
        if (mine[i] != NULL) {
            struct mailbox *b = &boxes[unit_rand(&rng) % NWORKERS];
            pthread_mutex_lock(&b->lock);
            if (b->n < MAILBOX) {
                b->slot[b->n++] = mine[i];
                mine[i] = NULL;
            }
            pthread_mutex_unlock(&b->lock);
            dpm_free(mine[i]);
        }
        uint64_t r = unit_rand(&rng);
        size_t size = 1 + r / 8 % 2048;
        unsigned how = (unsigned)(r % 4);   /* node 0, node 1, the CPU's node, malloc */
        if (how < 2) {
            mine[i] = dpm_malloc_socket(size, 0, (int)how);
            if (!is_node_block(mine[i], how, size))
                __atomic_fetch_add(&wrong_node, 1, __ATOMIC_RELAXED);
        } else if (how == 2) {
            mine[i] = dpm_malloc_socket(size, 0, DPM_SOCKET_ID_ANY);
            if (!moved && !is_node_block(mine[i], me, size))
                __atomic_fetch_add(&wrong_node, 1, __ATOMIC_RELAXED);
        } else {
            mine[i] = dpm_malloc(size);
            int want = numa_on ? (int)me : -1;
            if (!moved ? node_of(mine[i]) != want : numa_on && node_of(mine[i]) < 0)
                __atomic_fetch_add(&wrong_node, 1, __ATOMIC_RELAXED);
        }
        struct mailbox *own = &boxes[me];
        pthread_mutex_lock(&own->lock);
        while (own->n > 0)
            dpm_free(own->slot[--own->n]);
        pthread_mutex_unlock(&own->lock);
    }
    for (unsigned i = 0; i < 512; i++)
        dpm_free(mine[i]);
    return NULL;
}

#define MAX_CACHED (1u << 20)
static const void *seen[MAX_CACHED];
static size_t nseen, seen_bytes;

static void collect(const void *p, void *arg)
{
    (void)arg;
    if (nseen < MAX_CACHED)
        seen[nseen++] = p;
    seen_bytes += span_of(p)->objsize;
}

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (const void *const *)a, y = (uintptr_t) * (const void *const *)b;
    return x < y ? -1 : x > y;
}

static void check_whole(const char *when)
{
    const char *why = cpu_caches_check();
    EXPECT_TRUE(why == NULL, "%s: %s", when, why);
    nseen = seen_bytes = 0;
    cpu_caches_for_each_block(collect, NULL);
    qsort(seen, nseen, sizeof(seen[0]), cmp_ptr);
    size_t dups = 0;
    for (size_t i = 1; i < nseen; i++)
        dups += seen[i] == seen[i - 1];
    EXPECT_TRUE(dups == 0, "%s: %zu blocks cached twice", when, dups);
    EXPECT_EQ_U(seen_bytes, cpu_caches_bytes() + transfer_bytes());
    EXPECT_TRUE(transfer_bytes() <= transfer_bound(), "%s: transfer caches hold %zu, bound %zu", when,
                transfer_bytes(), transfer_bound());
}

static void test_threads(void)
{
    for (unsigned i = 0; i < NWORKERS; i++)
        pthread_mutex_init(&boxes[i].lock, NULL);
    pthread_t w[NWORKERS];
    for (unsigned i = 0; i < NWORKERS; i++)
        pthread_create(&w[i], NULL, worker, (void *)(uintptr_t)i);
    for (unsigned i = 0; i < NWORKERS; i++)
        pthread_join(w[i], NULL);
    for (unsigned i = 0; i < NWORKERS; i++)
        while (boxes[i].n > 0)
            dpm_free(boxes[i].slot[--boxes[i].n]);
    EXPECT_EQ_U(wrong_node, 0);
    check_whole("after pinned and moved threads");
}

/* Cached node blocks count in their arena's stats; a purge of the node
 * arena and a drain empty every cache. */
static void test_stats_and_drain(void)
{
    pin(0);
    void *p[64];
    for (unsigned i = 0; i < 64; i++)
        p[i] = dpm_malloc_socket(128, 0, 0);
    for (unsigned i = 0; i < 64; i++)
        dpm_free(p[i]);
    EXPECT_TRUE(arena_cached(0) >= 64 * 128, "node 0's arena counts %zu cached bytes", arena_cached(0));
    char name[64];
    snprintf(name, sizeof(name), "arena.%u.purge", node_arena_index(0));
    EXPECT_TRUE(dpm_ctl(name, NULL, NULL, NULL, 0) == 0, "%s", name);
    EXPECT_EQ_U(cpu_caches_bytes(), 0);
    EXPECT_EQ_U(transfer_bytes(), 0);
    EXPECT_EQ_U(arena_cached(0), 0);
    EXPECT_EQ_U(arena_cached(1), 0);
    EXPECT_EQ_U(stat_z("stats.cpu_cache_bytes") + stat_z("stats.transfer_bytes"), 0);
    /* node 1's blocks: some in CPU 1's cache, some in node 1's transfer cache */
    pin(1);
    for (unsigned i = 0; i < 64; i++)
        p[i] = dpm_malloc_socket(128, 0, 1);
    for (unsigned i = 0; i < 32; i++)
        dpm_free(p[i]);
    pin(0);
    for (unsigned i = 32; i < 64; i++)
        dpm_free(p[i]);
    EXPECT_TRUE(arena_cached(1) >= 64 * 128, "node 1's arena counts %zu cached bytes", arena_cached(1));
    size_t bytes = cpu_caches_bytes() + transfer_bytes();
    EXPECT_EQ_U(cpu_caches_drain(false), bytes);
    EXPECT_EQ_U(cpu_caches_bytes() + transfer_bytes(), 0);
    check_whole("after a drain");
}

/* A fork while both CPUs' node bins and a transfer cache hold blocks:
 * the child finds every cache whole and allocates on both nodes. */
static void test_fork(void)
{
    void *p[64];
    pin(1);
    for (unsigned i = 0; i < 64; i++)
        p[i] = dpm_malloc_socket(256, 0, i % 2);
    for (unsigned i = 0; i < 64; i++)
        dpm_free(p[i]);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        const char *why = cpu_caches_check();
        if (why != NULL) {
            fprintf(stderr, "child: %s\n", why);
            _exit(2);
        }
        for (unsigned cpu = 0; cpu < 2; cpu++) {
            pin(cpu);
            for (unsigned i = 0; i < 64; i++) {
                p[i] = dpm_malloc_socket(256, 0, i % 2);
                if (!is_node_block(p[i], i % 2, 256))
                    _exit(3);
            }
            for (unsigned i = 0; i < 64; i++)
                dpm_free(p[i]);
        }
        _exit(cpu_caches_check() == NULL ? 0 : 4);
    }
    int st;
    waitpid(pid, &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork child: status %d", st);
    const char *why = cpu_caches_check();
    EXPECT_TRUE(why == NULL, "after fork: %s", why);
}

static void free_twice(void *p) { dpm_free(p); }

static void test_double_free(void)
{
    pin(0);
    void *p = dpm_malloc_socket(64, 0, 0);
    dpm_free(p);
    EXPECT_TRUE(cpu_caches_hold(p, span_of(p)->tcache_class), "node 0's block is not in CPU 0's cache");
    expect_child_aborts(free_twice, p, "double free");
    /* a node 1 block freed on node 0's CPU: in node 1's transfer cache */
    void *q = dpm_malloc_socket(64, 0, 1);
    dpm_free(q);
    EXPECT_TRUE(cpu_caches_hold(q, span_of(q)->tcache_class), "node 1's block is not in its transfer cache");
    expect_child_aborts(free_twice, q, "double free");
}

/* Aligned-at-offset (phased) blocks beside the node bins on one CPU: a
 * phased tag's bin takes its slots from the reserve after the classes'
 * and the node's bins (placed after the classes' alone, the first tag's
 * would lie on node 0's bins of the first classes), so node blocks and
 * phased blocks freed on CPU 0 come back as what they were; the layout,
 * the pool and the bound hold (cpu_caches_check, cpu_cache_bound); a
 * double free of a cached phased block aborts; a drain empties both.
 * With numa:true the thread's arena is its node's, a manual arena whose
 * phased bins have no tag: its phased blocks bypass the caches. */
#define PH_ALIGN 64
#define PH_OFFSET 4
#define PH_SIZE 60
#define NNODE_BLOCKS 2048
static void test_phased_beside_nodes(void)
{
    static void *nb[NNODE_BLOCKS], *ph[64];
    pin(0);
    for (unsigned round = 0; round < 2; round++) {
        for (unsigned i = 0; i < NNODE_BLOCKS; i++) {
            size_t size = 16 * (1 + i % 2);   /* node 0's bins of the first classes */
            nb[i] = dpm_malloc_socket(size, 0, 0);
            EXPECT_TRUE(nb[i] != NULL && is_node_block(nb[i], 0, size), "round %u: block %u of %zu bytes: %p", round,
                        i, size, nb[i]);
        }
        for (unsigned i = 0; i < 64; i++) {
            ph[i] = dpm_malloc_aligned_at(PH_SIZE, PH_ALIGN, PH_OFFSET);
            EXPECT_TRUE(ph[i] != NULL && ((uintptr_t)ph[i] + PH_OFFSET) % PH_ALIGN == 0, "round %u: phased %u: %p",
                        round, i, ph[i]);
            unsigned k = span_of(ph[i])->tcache_class;
            EXPECT_TRUE(numa_on ? k == TC_NONE : tc_class_is_phased(k), "round %u: phased block's tcache_class %u",
                        round, k);
            memset(ph[i], 0xa5, PH_SIZE);
        }
        for (unsigned i = 0; i < NNODE_BLOCKS; i++)
            dpm_free(nb[i]);
        for (unsigned i = 0; i < 64; i++)
            dpm_free(ph[i]);
        check_whole("phased blocks beside node bins");
        EXPECT_TRUE(cpu_caches_bytes() <= 2 * cpu_cache_bound(), "%zu bytes in 2 CPU caches, bound %zu each",
                    cpu_caches_bytes(), cpu_cache_bound());
    }
    const span_t *s = span_of(ph[63]);
    if (!numa_on) {
        EXPECT_TRUE(cpu_caches_hold(ph[63], s->tcache_class), "the phased block is not in CPU 0's cache");
        expect_child_aborts(free_twice, ph[63], "double free");
    }
    EXPECT_TRUE(cpu_caches_hold(nb[NNODE_BLOCKS - 1], span_of(nb[NNODE_BLOCKS - 1])->tcache_class),
                "the node block is not in a cache");
    cpu_caches_drain(false);
    EXPECT_EQ_U(cpu_caches_bytes() + transfer_bytes(), 0);
    check_whole("phased and node bins drained");
}

/* Four nodes, CPUs on nodes 0 and 1 only: node 2 has tags but no CPU
 * (its blocks pass through its transfer cache), node 3 has none (the
 * manual arenas' tags and the older path). Every block is its node's,
 * wherever it is freed; a double free of either aborts. */
static void test_four_nodes(void)
{
    static void *p[4][500];
    for (unsigned cpu = 0; cpu < 2; cpu++) {
        pin(cpu);
        for (unsigned node = 0; node < 4; node++)
            for (unsigned i = 0; i < 500; i++) {
                p[node][i] = dpm_malloc_socket(64 + 16 * (i % 4), 0, (int)node);
                const span_t *s = span_of(p[node][i]);
                unsigned c = sc_of_size(64 + 16 * (i % 4));
                unsigned want = node < TC_NODE_GROUPS ? tc_node_class(node, c) : TC_MANUAL_BASE + c;
                EXPECT_TRUE(s->arena->node == (int)node && s->tcache_class == want,
                            "cpu %u, node %u: a block of node %d, tcache_class %u (want %u)", cpu, node,
                            s->arena->node, s->tcache_class, want);
            }
        pin(1 - cpu);   /* freed on the other CPU */
        for (unsigned node = 0; node < 4; node++)
            for (unsigned i = 0; i < 500; i++)
                dpm_free(p[node][i]);
        const char *why = cpu_caches_check();
        EXPECT_TRUE(why == NULL, "four nodes, cpu %u: %s", cpu, why);
    }
    void *q = dpm_malloc_socket(64, 0, 2);
    dpm_free(q);
    EXPECT_TRUE(cpu_caches_hold(q, span_of(q)->tcache_class), "node 2's block is not in its transfer cache");
    expect_child_aborts(free_twice, q, "double free");
    q = dpm_malloc_socket(64, 0, 3);
    dpm_free(q);
    expect_child_aborts(free_twice, q, "double free");
    check_whole("four nodes");
}

/* ---- the made-up tree ---------------------------------------------------- */

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f != NULL) {
        fputs(text, f);
        fclose(f);
    }
}

static int run_child(const char *root, const char *conf)
{
    pid_t pid = fork();
    if (pid == 0) {
        setenv("DPMALLOC_SYSFS_ROOT", root, 1);
        setenv("DPMALLOC_CONF", conf, 1);
        execl("/proc/self/exe", "test_cpu_cache_numa", (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* A tree with nodes 0..nnodes-1 online, cpu 0 on node 0 and cpu 1 on
 * node 1 (the others without CPUs); false if it cannot be written. */
static bool make_tree(char *root, unsigned nnodes)
{
    if (mkdtemp(root) == NULL)
        return false;
    char path[256];
    const char *dirs[] = {"/devices", "/devices/system", "/devices/system/node"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "%s%s", root, dirs[i]);
        mkdir(path, 0700);
    }
    for (unsigned n = 0; n < nnodes; n++) {
        snprintf(path, sizeof(path), "%s/devices/system/node/node%u", root, n);
        mkdir(path, 0700);
        snprintf(path, sizeof(path), "%s/devices/system/node/node%u/cpulist", root, n);
        write_file(path, n == 0 ? "0\n" : n == 1 ? "1\n" : "\n");
    }
    snprintf(path, sizeof(path), "%s/devices/system/node/online", root);
    write_file(path, nnodes == 2 ? "0-1\n" : "0-3\n");
    return true;
}

static int parent(void)
{
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
        printf("test_cpu_cache_numa: skipped: one CPU\n");
        return 77;
    }
    int rc = 0;
    const char *confs[] = {"numa:false", "numa:true"};
    for (unsigned nnodes = 2; nnodes <= 4; nnodes += 2) {
        char root[] = "/tmp/dpm_numa_XXXXXX";
        if (!make_tree(root, nnodes))
            return 1;
        for (int i = 0; i < 2; i++) {
            int r = run_child(root, confs[i]);
            printf("test_cpu_cache_numa, %u nodes, %s: exit %d\n", nnodes, confs[i], r);
            if (r != 0)
                rc = rc == 0 || rc == 77 ? r : rc;
        }
        char cmd[300];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
        if (system(cmd) != 0)
            return 1;
    }
    return rc;
}

int main(void)
{
    if (getenv("DPMALLOC_SYSFS_ROOT") == NULL)
        return parent();
    const char *conf = getenv("DPMALLOC_CONF");
    numa_on = conf != NULL && strstr(conf, "numa:true") != NULL;
    dpm_free(dpm_malloc(1));   /* initialise */
    if (!cpu_caches_on) {
        printf("test_cpu_cache_numa: skipped: the process runs on thread caches\n");
        return 77;
    }
    EXPECT_TRUE(numa_nnodes() == 2 || numa_nnodes() == 4, "%u nodes", numa_nnodes());
    EXPECT_EQ_U(numa_cpu_node(0), 0);
    EXPECT_EQ_U(numa_cpu_node(1), 1);
    test_local();
    test_remote();
    test_threads();
    test_fork();
    test_stats_and_drain();
    test_double_free();
    test_phased_beside_nodes();
    if (numa_nnodes() == 4)
        test_four_nodes();
    check_whole("at the end");
    return unit_finish(numa_on ? "test_cpu_cache_numa numa:true" : "test_cpu_cache_numa numa:false");
}
