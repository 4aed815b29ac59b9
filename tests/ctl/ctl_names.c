/*
 * ctl_names.c - every dpm_ctl name, its type, access and error codes.
 *
 * Proves: each name listed in docs/ctl.md reads with its documented C type
 * (an *oldlenp of any other size gives EINVAL); writable names take a value
 * of their type and reject other sizes with EINVAL and bad values with
 * EINVAL; read-only names give EPERM when written; actions ("--") given
 * oldp or newp give EINVAL; unknown names (and indices out of range) give
 * ENOENT. Values behave: the epoch advances by one per write and
 * statistics only move on an epoch write; stats.* grow and shrink with
 * allocations; stats.arenas.<i>.* and stats.arenas.<i>.bins.<j>.* /
 * lextents.<k>.* of a fresh manual arena count exactly the blocks the test
 * put there; decay times written through arena.<i>.*_decay_ms show in the
 * stats; arena.<i>.decay purges the runs older than the decay time and
 * only those; arena.<i>.purge empties the dirty pages; the background
 * thread switches on and off repeatedly; thread.tcache.flush
 * empties this thread's cache; a hot malloc/free loop counts as
 * nrequests with almost no tcache_misses; nthreads summed over the arenas
 * follows threads coming and going; ncached_max read/write round-trips and
 * rejects malformed specs. ncached_max 0 ("do not cache this class", as in
 * jemalloc) must be safe: checked in a child process, since it is not.
 * Uses only the dpm_ API (links dpmalloc_plain; label sanitize).
 */
#include "test.h"
#include "ctl_util.h"

#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>

static unsigned nbins, nlextents, narenas_auto_seen;

static unsigned bin_index_for(size_t size)
{
    for (unsigned j = 0; j < nbins; j++)
        if (CTL_SIZE(ctl_name("arenas.bin.%u.size", j)) >= size)
            return j;
    return nbins;
}

/* Reading with a wrong *oldlenp gives EINVAL and leaves oldp alone. */
static void expect_wrong_sizes_rejected(const char *name, size_t right)
{
    static const size_t sizes[] = {0, 1, 2, 4, 8, 16};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        if (sizes[i] == right)
            continue;
        unsigned char buf[16];
        memset(buf, 0xcc, sizeof buf);
        size_t len = sizes[i];
        int e = dpm_ctl(name, buf, &len, NULL, 0);
        EXPECT(e == EINVAL, "%s read with oldlen %zu (type size %zu): got %d, expected EINVAL", name, sizes[i],
               right, e);
        EXPECT(buf[0] == 0xcc, "%s: wrong-size read wrote into oldp", name);
    }
    /* oldlenp without oldp, oldp without oldlenp */
    size_t len = right;
    EXPECT_CTL(dpm_ctl(name, NULL, &len, NULL, 0), EINVAL);
    unsigned char buf[16];
    EXPECT_CTL(dpm_ctl(name, buf, NULL, NULL, 0), EINVAL);
}

/* A read-only name of the given size: reads, EPERM on write. */
static void expect_read_only(const char *name, size_t size)
{
    unsigned char buf[16], nv[16] = {0};
    size_t len = size;
    int e = dpm_ctl(name, buf, &len, NULL, 0);
    EXPECT(e == 0, "%s: read with size %zu failed: %d", name, size, e);
    e = dpm_ctl(name, NULL, NULL, nv, size);
    EXPECT(e == EPERM, "%s: write gave %d, expected EPERM", name, e);
    len = size;
    e = dpm_ctl(name, buf, &len, nv, size);
    EXPECT(e == EPERM, "%s: read+write gave %d, expected EPERM", name, e);
    expect_wrong_sizes_rejected(name, size);
}

static void expect_action(const char *name)
{
    unsigned char buf[16] = {0};
    size_t len = sizeof(unsigned);
    EXPECT_CTL(dpm_ctl(name, buf, &len, NULL, 0), EINVAL);
    EXPECT_CTL(dpm_ctl(name, NULL, NULL, buf, sizeof(unsigned)), EINVAL);
    EXPECT_CTL(dpm_ctl(name, NULL, &len, NULL, 0), EINVAL);
}

TEST(version_and_epoch)
{
    const char *v = NULL;
    EXPECT_CTL(ctl_get("version", &v, sizeof v), 0);
    EXPECT(v != NULL && strcmp(v, DPMALLOC_VERSION) == 0, "version \"%s\"", v ? v : "(null)");
    expect_read_only("version", sizeof(const char *));

    uint64_t e0 = CTL_U64("epoch");
    uint64_t e1 = ctl_refresh();
    EXPECT_EQ_U(e1, e0 + 1);
    EXPECT_EQ_U(CTL_U64("epoch"), e1);
    uint64_t one = 1, out = 0;
    size_t len = sizeof out;
    EXPECT_CTL(dpm_ctl("epoch", &out, &len, &one, sizeof one), 0);
    EXPECT_EQ_U(out, e1 + 1);
    EXPECT_CTL(dpm_ctl("epoch", NULL, NULL, &one, 4), EINVAL);
    EXPECT_CTL(dpm_ctl("epoch", NULL, NULL, NULL, 8), EINVAL);
    expect_wrong_sizes_rejected("epoch", sizeof(uint64_t));
}

TEST(unknown_names)
{
    static const char *const names[] = {
        "", "nope", "version.x", "Version", "epoch ", "arenas", "arenas.narenasx", "arena", "arena.0",
        "arena..purge", "arena.x.purge", "arena.-1.purge", "arena.99999999999.purge", "arena.0.purge.x",
        "stats", "stats.arenas.0", "stats.arenas.0.nope", "stats.arenas.0.bins.0", "stats.arenas.0.bins.0.nope",
        "opt", "opt.", "opt.nope", "thread", "thread.tcache", "thread.tcache.ncached_max",
        "arenas.bin.0", "arenas.bin.99999.size", "arenas.lextent.99999.size",
        "stats.arenas.99999.pactive", "stats.arenas.0.bins.99999.nmalloc",
        "stats.arenas.0.lextents.99999.nmalloc", "stats.arenas.0.lextents.99999.curlextents",
        "arena.4095.name", "arena.4096.dirty_decay_ms",
    };
    /* actions on arenas that do not exist (a read would be EINVAL first) */
    static const char *const actions[] = {"arena.4095.purge", "arena.4095.decay", "arena.4095.reset",
                                          "arena.4095.destroy", "arena.5000.reset", "arena.5000.destroy"};
    for (size_t i = 0; i < sizeof actions / sizeof actions[0]; i++) {
        int e = dpm_ctl(actions[i], NULL, NULL, NULL, 0);
        EXPECT(e == ENOENT, "dpm_ctl(\"%s\") gave %d, expected ENOENT", actions[i], e);
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        uint64_t v;
        size_t len = sizeof v;
        int e = dpm_ctl(names[i], &v, &len, NULL, 0);
        EXPECT(e == ENOENT, "dpm_ctl(\"%s\") read gave %d, expected ENOENT", names[i], e);
        e = dpm_ctl(names[i], NULL, NULL, NULL, 0);
        EXPECT(e == ENOENT, "dpm_ctl(\"%s\") no-op gave %d, expected ENOENT", names[i], e);
    }
    EXPECT_CTL(dpm_ctl(NULL, NULL, NULL, NULL, 0), EINVAL);
    /* bins and lextents just past the end */
    EXPECT_CTL(dpm_ctl(ctl_name("arenas.bin.%u.size", nbins), NULL, NULL, NULL, 0), ENOENT);
    EXPECT_CTL(dpm_ctl(ctl_name("arenas.lextent.%u.size", nlextents), NULL, NULL, NULL, 0), ENOENT);
    EXPECT_CTL(dpm_ctl(ctl_name("stats.arenas.0.bins.%u.nmalloc", nbins), NULL, NULL, NULL, 0), ENOENT);
}

TEST(options_read_only)
{
    static const struct {
        const char *name;
        size_t size;
    } opts[] = {
        {"opt.narenas", sizeof(unsigned)},
        {"opt.tcache", sizeof(bool)},
        {"opt.tcache_max", sizeof(size_t)},
        {"opt.tcache_nslots_small_min", sizeof(unsigned)},
        {"opt.tcache_nslots_small_max", sizeof(unsigned)},
        {"opt.tcache_nslots_large", sizeof(unsigned)},
        {"opt.lg_tcache_nslots_mul", sizeof(unsigned)},
        {"opt.dirty_decay_ms", sizeof(ssize_t)},
        {"opt.muzzy_decay_ms", sizeof(ssize_t)},
        {"opt.background_thread", sizeof(bool)},
        {"opt.stats_print", sizeof(bool)},
        {"opt.stats_cycles", sizeof(bool)},
        {"opt.stats_print_opts", sizeof(const char *)},
        {"opt.junk", sizeof(bool)},
        {"opt.zero", sizeof(bool)},
        {"opt.thp", sizeof(const char *)},
        {"opt.slab_sizes", sizeof(const char *)},
    };
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
        expect_read_only(opts[i].name, opts[i].size);
    size_t tmax = 0;
    EXPECT_CTL(ctl_get("opt.tcache_max", &tmax, sizeof tmax), 0);
    EXPECT(tmax > 0 && tmax <= ((size_t)8 << 20), "opt.tcache_max %zu", tmax);
}

TEST(arenas_constants)
{
    expect_read_only("arenas.narenas", sizeof(unsigned));
    expect_read_only("arenas.page", sizeof(size_t));
    expect_read_only("arenas.quantum", sizeof(size_t));
    expect_read_only("arenas.nbins", sizeof(unsigned));
    expect_read_only("arenas.nlextents", sizeof(unsigned));
    EXPECT_EQ_U(CTL_SIZE("arenas.page"), 4096);
    EXPECT_EQ_U(CTL_SIZE("arenas.quantum"), 16);
    EXPECT(CTL_UNS("arenas.narenas") >= 1, "narenas 0");
    size_t prev = 0;
    for (unsigned j = 0; j < nbins; j++) {
        const char *n = ctl_name("arenas.bin.%u.size", j);
        expect_read_only(n, sizeof(size_t));
        size_t size = CTL_SIZE(ctl_name("arenas.bin.%u.size", j));
        uint32_t nregs = 0;
        EXPECT_CTL(ctl_get(ctl_name("arenas.bin.%u.nregs", j), &nregs, sizeof nregs), 0);
        expect_read_only(ctl_name("arenas.bin.%u.nregs", j), sizeof(uint32_t));
        size_t slab = CTL_SIZE(ctl_name("arenas.bin.%u.slab_size", j));
        expect_read_only(ctl_name("arenas.bin.%u.slab_size", j), sizeof(size_t));
        EXPECT(size > prev && size % 16 == 0, "bin %u size %zu after %zu", j, size, prev);
        EXPECT(nregs >= 1 && (size_t)nregs * size <= slab && slab % 4096 == 0,
               "bin %u: %u regs of %zu in a slab of %zu", j, nregs, size, slab);
        prev = size;
    }
    for (unsigned k = 0; k < nlextents; k += 7) {
        expect_read_only(ctl_name("arenas.lextent.%u.size", k), sizeof(size_t));
        size_t size = CTL_SIZE(ctl_name("arenas.lextent.%u.size", k));
        EXPECT(size > prev, "lextent %u size %zu after %zu", k, size, prev);
        prev = size;
    }
}

TEST(arenas_create_and_lookup)
{
    unsigned before = CTL_UNS("arenas.narenas");
    unsigned a = 0, b = 0;
    size_t len = sizeof a;
    EXPECT_CTL(dpm_ctl("arenas.create", &a, &len, NULL, 0), 0);
    EXPECT(a >= narenas_auto_seen, "manual arena index %u among the automatic ones (%u)", a, narenas_auto_seen);
    (void)before;
    const char *name = "ctl-names-arena";
    len = sizeof b;
    EXPECT_CTL(dpm_ctl("arenas.create", &b, &len, &name, sizeof name), 0);
    EXPECT_NE_U(a, b);
    EXPECT(CTL_UNS("arenas.narenas") > (a > b ? a : b), "arenas.narenas %u not above the new indices %u, %u",
           CTL_UNS("arenas.narenas"), a, b);
    const char *got = NULL;
    EXPECT_CTL(ctl_get(ctl_name("arena.%u.name", a), &got, sizeof got), 0);
    EXPECT(got != NULL && got[0] == '\0', "unnamed arena has name \"%s\"", got ? got : "(null)");
    EXPECT_CTL(ctl_get(ctl_name("arena.%u.name", b), &got, sizeof got), 0);
    EXPECT(got != NULL && strcmp(got, name) == 0, "arena %u name \"%s\"", b, got ? got : "(null)");
    expect_read_only(ctl_name("arena.%u.name", b), sizeof(const char *));
    /* a long name is cut, not overflowed */
    const char *longname = "0123456789012345678901234567890123456789";
    unsigned c = 0;
    len = sizeof c;
    EXPECT_CTL(dpm_ctl("arenas.create", &c, &len, &longname, sizeof longname), 0);
    EXPECT_CTL(ctl_get(ctl_name("arena.%u.name", c), &got, sizeof got), 0);
    EXPECT(got != NULL && strncmp(got, longname, strlen(got)) == 0 && strlen(got) < 40 && strlen(got) > 0,
           "long name became \"%s\"", got ? got : "(null)");
    /* arenas.create needs somewhere to put the index */
    EXPECT_CTL(dpm_ctl("arenas.create", NULL, NULL, NULL, 0), EINVAL);
    len = sizeof(uint64_t);
    uint64_t big;
    EXPECT_CTL(dpm_ctl("arenas.create", &big, &len, NULL, 0), EINVAL);
    len = sizeof a;
    EXPECT_CTL(dpm_ctl("arenas.create", &a, &len, &name, 4), EINVAL);

    /* lookup */
    void *p = dpm_malloc_arena(b, 100, 0), *q = dpm_malloc_arena(a, 1 << 20, 0);
    EXPECT_NONNULL(p);
    EXPECT_NONNULL(q);
    unsigned idx = 12345;
    len = sizeof idx;
    EXPECT_CTL(dpm_ctl("arenas.lookup", &idx, &len, &p, sizeof p), 0);
    EXPECT_EQ_U(idx, b);
    len = sizeof idx;
    EXPECT_CTL(dpm_ctl("arenas.lookup", &idx, &len, &q, sizeof q), 0);
    EXPECT_EQ_U(idx, a);
    int local = 0;
    void *stack = &local, *null = NULL;
    len = sizeof idx;
    EXPECT_CTL(dpm_ctl("arenas.lookup", &idx, &len, &stack, sizeof stack), EINVAL);
    len = sizeof idx;
    EXPECT_CTL(dpm_ctl("arenas.lookup", &idx, &len, &null, sizeof null), EINVAL);
    len = sizeof idx;
    EXPECT_CTL(dpm_ctl("arenas.lookup", &idx, &len, NULL, 0), EINVAL);
    len = sizeof idx;
    EXPECT_CTL(dpm_ctl("arenas.lookup", &idx, &len, &p, 4), EINVAL);
    len = 8;
    uint64_t wide;
    EXPECT_CTL(dpm_ctl("arenas.lookup", &wide, &len, &p, sizeof p), EINVAL);
    dpm_free(p);
    dpm_free(q);
    /* dpm_malloc_arena refuses unknown arenas */
    errno = 0;
    EXPECT_NULL(dpm_malloc_arena(4095, 10, 0));
    EXPECT_ERRNO(EINVAL);
    errno = 0;
    EXPECT_NULL(dpm_malloc_arena(100000, 10, 0));
    EXPECT_ERRNO(EINVAL);
    EXPECT_CTL(ctl_action(ctl_name("arena.%u.destroy", a)), 0);
    EXPECT_CTL(ctl_action(ctl_name("arena.%u.destroy", b)), 0);
    EXPECT_CTL(ctl_action(ctl_name("arena.%u.destroy", c)), 0);
}

TEST(thread_arena)
{
    unsigned cur = 9999;
    EXPECT_CTL(ctl_get("thread.arena", &cur, sizeof cur), 0);
    EXPECT(cur < CTL_UNS("arenas.narenas"), "thread.arena %u", cur);
    expect_wrong_sizes_rejected("thread.arena", sizeof(unsigned));
    unsigned m = 0;
    EXPECT_CTL(ctl_get("arenas.create", &m, sizeof m), 0);
    unsigned old = 9999;
    size_t len = sizeof old;
    EXPECT_CTL(dpm_ctl("thread.arena", &old, &len, &m, sizeof m), 0);
    EXPECT_EQ_U(old, cur);
    EXPECT_EQ_U(CTL_UNS("thread.arena"), m);
    void *p = dpm_malloc(200);
    unsigned idx = 0;
    len = sizeof idx;
    EXPECT_CTL(dpm_ctl("arenas.lookup", &idx, &len, &p, sizeof p), 0);
    EXPECT_EQ_U(idx, m);
    dpm_free(p);
    ctl_refresh();
    EXPECT_EQ_U(CTL_UNS(ctl_name("stats.arenas.%u.nthreads", m)), 1);
    unsigned bad = 4095, worse = 1u << 31;
    EXPECT_CTL(ctl_set("thread.arena", &bad, sizeof bad), EINVAL);
    EXPECT_CTL(ctl_set("thread.arena", &worse, sizeof worse), EINVAL);
    EXPECT_CTL(ctl_set("thread.arena", &m, 8), EINVAL);
    EXPECT_EQ_U(CTL_UNS("thread.arena"), m);
    /* while bound, the manual arena cannot be destroyed */
    EXPECT_CTL(ctl_action(ctl_name("arena.%u.destroy", m)), EBUSY);
    EXPECT_CTL(ctl_set("thread.arena", &cur, sizeof cur), 0);
    ctl_refresh();
    EXPECT_EQ_U(CTL_UNS(ctl_name("stats.arenas.%u.nthreads", m)), 0);
    EXPECT_CTL(ctl_action(ctl_name("arena.%u.destroy", m)), 0);
    EXPECT_CTL(ctl_set("thread.arena", &m, sizeof m), EINVAL);
}

TEST(thread_tcache)
{
    expect_action("thread.tcache.flush");
    expect_wrong_sizes_rejected("thread.tcache.enabled", sizeof(bool));
    bool en = false;
    EXPECT_CTL(ctl_get("thread.tcache.enabled", &en, sizeof en), 0);
    EXPECT(en, "thread.tcache.enabled false by default");
    /* cached frees show in stats.tcache_bytes; flush returns them */
    enum { N = 64 };
    void *p[N];
    for (int i = 0; i < N; i++)
        p[i] = dpm_malloc(48);
    for (int i = 0; i < N; i++)
        dpm_free(p[i]);
    ctl_refresh();
    size_t cached = CTL_SIZE("stats.tcache_bytes");
    EXPECT(cached >= 48, "stats.tcache_bytes %zu after %d frees of 48 bytes", cached, N);
    EXPECT_CTL(ctl_action("thread.tcache.flush"), 0);
    ctl_refresh();
    EXPECT_EQ_U(CTL_SIZE("stats.tcache_bytes"), 0);
    /* disable: frees go straight home */
    bool off = false, on = true, old = false;
    size_t len = sizeof old;
    EXPECT_CTL(dpm_ctl("thread.tcache.enabled", &old, &len, &off, sizeof off), 0);
    EXPECT(old, "old value of thread.tcache.enabled should be true");
    EXPECT_CTL(ctl_get("thread.tcache.enabled", &en, sizeof en), 0);
    EXPECT(!en, "thread.tcache.enabled still true after writing false");
    for (int i = 0; i < N; i++)
        p[i] = dpm_malloc(48);
    for (int i = 0; i < N; i++)
        dpm_free(p[i]);
    ctl_refresh();
    EXPECT_EQ_U(CTL_SIZE("stats.tcache_bytes"), 0);
    EXPECT_CTL(ctl_set("thread.tcache.enabled", &on, 4), EINVAL);
    EXPECT_CTL(ctl_set("thread.tcache.enabled", &on, sizeof on), 0);
    EXPECT_CTL(ctl_get("thread.tcache.enabled", &en, sizeof en), 0);
    EXPECT(en, "thread.tcache.enabled false after writing true");
}

static size_t ncached(size_t size, int *err)
{
    size_t n = 77777, len = sizeof n;
    *err = dpm_ctl("thread.tcache.ncached_max.read_sizeclass", &n, &len, &size, sizeof size);
    return n;
}

static int ncached_write(const char *spec)
{
    return dpm_ctl("thread.tcache.ncached_max.write", NULL, NULL, &spec, sizeof spec);
}

TEST(tcache_ncached_max)
{
    int e;
    size_t n64 = ncached(64, &e);
    EXPECT_EQ_I(e, 0);
    EXPECT(n64 > 0 && n64 <= 4096, "ncached_max(64) = %zu", n64);
    size_t n256 = ncached(256, &e);
    EXPECT_CTL(ncached_write("1-64:5"), 0);
    EXPECT_EQ_U(ncached(16, &e), 5);
    EXPECT_EQ_U(ncached(64, &e), 5);
    EXPECT_EQ_U(ncached(256, &e), n256);
    EXPECT_CTL(ncached_write("65-128:7|129-256:9"), 0);
    EXPECT_EQ_U(ncached(128, &e), 7);
    EXPECT_EQ_U(ncached(256, &e), 9);
    EXPECT_CTL(ncached_write("1-64:4096"), 0);
    EXPECT_EQ_U(ncached(64, &e), 4096);
    /* the cache honours the limit: 5 slots, 100 frees -> at most 5 kept */
    EXPECT_CTL(ncached_write("1-64:5"), 0);
    void *p[100];
    for (int i = 0; i < 100; i++)
        p[i] = dpm_malloc(64);
    EXPECT_CTL(ctl_action("thread.tcache.flush"), 0);
    for (int i = 0; i < 100; i++)
        dpm_free(p[i]);
    ctl_refresh();
    size_t cached = CTL_SIZE("stats.tcache_bytes");
    EXPECT(cached <= 5 * 64, "stats.tcache_bytes %zu with ncached_max 5 for 64-byte blocks", cached);
    /* a size beyond the cached classes reads 0 */
    EXPECT_EQ_U(ncached((size_t)64 << 20, &e), 0);
    EXPECT_EQ_I(e, 0);
    /* errors */
    size_t size = 64, n, len = sizeof n;
    EXPECT_CTL(dpm_ctl("thread.tcache.ncached_max.read_sizeclass", &n, &len, NULL, 0), EINVAL);
    len = sizeof n;
    size = 0;
    EXPECT_CTL(dpm_ctl("thread.tcache.ncached_max.read_sizeclass", &n, &len, &size, sizeof size), EINVAL);
    len = 4;
    size = 64;
    EXPECT_CTL(dpm_ctl("thread.tcache.ncached_max.read_sizeclass", &n, &len, &size, sizeof size), EINVAL);
    len = sizeof n;
    EXPECT_CTL(dpm_ctl("thread.tcache.ncached_max.read_sizeclass", &n, &len, &size, 4), EINVAL);
    static const char *const bad[] = {"bad", "1-64", "1-64:", "64-1:5", "0-64:5", "1-64:4097",
                                      "1-64:5,", "1-64:5|x", "-5", ":5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        e = ncached_write(bad[i]);
        EXPECT(e == EINVAL, "ncached_max.write \"%s\" gave %d, expected EINVAL", bad[i], e);
    }
    const char *spec = "1-64:5";
    len = sizeof(size_t);
    EXPECT_CTL(dpm_ctl("thread.tcache.ncached_max.write", &n, &len, &spec, sizeof spec), EINVAL);
    EXPECT_CTL(dpm_ctl("thread.tcache.ncached_max.write", NULL, NULL, &spec, 4), EINVAL);
    const char *nullspec = NULL;
    EXPECT_CTL(dpm_ctl("thread.tcache.ncached_max.write", NULL, NULL, &nullspec, sizeof nullspec), EINVAL);
    char restore[64];
    snprintf(restore, sizeof restore, "1-64:%zu", n64);
    EXPECT_CTL(ncached_write(restore), 0);
    EXPECT_EQ_U(ncached(64, &e), n64);
    EXPECT_CTL(ctl_action("thread.tcache.flush"), 0);
}

/* ncached_max 0: the class must simply not be cached. Run in a child:
 * if the cache overruns its slots the child crashes, not the test. */
static int ncached_zero_child(void *arg)
{
    (void)arg;
    const char *spec = "1-128:0";
    if (dpm_ctl("thread.tcache.ncached_max.write", NULL, NULL, &spec, sizeof spec) != 0)
        return 3;
    size_t size = 64, n = 99, len = sizeof n;
    if (dpm_ctl("thread.tcache.ncached_max.read_sizeclass", &n, &len, &size, sizeof size) != 0 || n != 0)
        return 4;
    enum { N = 20000 };
    static void *p[N];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++)
            if ((p[i] = dpm_malloc(64)) == NULL)
                return 5;
        for (int i = 0; i < N; i++)
            dpm_free(p[i]);
    }
    uint64_t one = 1;
    dpm_ctl("epoch", NULL, NULL, &one, sizeof one);
    size_t cached = 1;
    len = sizeof cached;
    dpm_ctl("stats.tcache_bytes", &cached, &len, NULL, 0);
    if (cached != 0) {
        fprintf(stderr, "stats.tcache_bytes %zu with ncached_max 0\n", cached);
        return 6;
    }
    return 0;
}

TEST(tcache_ncached_max_zero)
{
    if (TEST_TSAN && !tsan_fork_ok()) {
        /* no fork under ThreadSanitizer (the fork handlers hold more locks
         * than its deadlock detector tracks): run it here */
        int e;
        size_t keep[9];
        for (size_t sz = 16; sz <= 128; sz += 16)
            keep[sz / 16] = ncached(sz, &e);
        int rc = ncached_zero_child(NULL);
        EXPECT(rc == 0, "ncached_max 0: check %d failed (3: write, 4: read back, 6: blocks cached)", rc);
        for (size_t sz = 16; sz <= 128; sz += 16) {   /* as it was, for the tests that follow */
            char spec[64];
            snprintf(spec, sizeof spec, "%zu-%zu:%zu", sz, sz, keep[sz / 16]);
            EXPECT_CTL(ncached_write(spec), 0);
        }
        return;
    }
    struct test_child c;
    EXPECT_EQ_I(test_run_child(ncached_zero_child, NULL, &c, 20), 0);
    char why[96];
    EXPECT(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0,
           "after ncached_max.write \"1-128:0\", 60000 malloc/free of 64 bytes: child %s "
           "(3: write failed, 4: read back not 0, 6: blocks still cached)\n%s",
           test_describe_status(c.status, why, sizeof why), c.err);
}


/* Sets manual arena m's decay times, allocates n touched 256 KiB blocks
 * into blocks[] and frees the even-numbered ones (dirty runs between
 * live blocks, so they cannot merge into one). */
static void set_decay_and_free_alternate(unsigned m, ssize_t dirty_ms, ssize_t muzzy_ms, void **blocks, int n,
                                         int fill)
{
    EXPECT_CTL(ctl_set(ctl_name("arena.%u.dirty_decay_ms", m), &dirty_ms, sizeof dirty_ms), 0);
    EXPECT_CTL(ctl_set(ctl_name("arena.%u.muzzy_decay_ms", m), &muzzy_ms, sizeof muzzy_ms), 0);
    for (int i = 0; i < n; i++) {
        blocks[i] = dpm_malloc_arena(m, 256 << 10, 0);
        if (blocks[i] != NULL)
            memset(blocks[i], fill, 256 << 10);
    }
    for (int i = 0; i < n; i += 2)
        dpm_free(blocks[i]);
}

TEST(arena_actions_and_decay_times)
{
    unsigned na = CTL_UNS("arenas.narenas");
    for (unsigned i = 0; i < na && i < 4; i++) {
        const char *n = ctl_name("arena.%u.purge", i);
        char name[64];
        snprintf(name, sizeof name, "%s", n);
        expect_action(name);
        EXPECT_CTL(ctl_action(name), 0);
        snprintf(name, sizeof name, "arena.%u.decay", i);
        expect_action(name);
        EXPECT_CTL(ctl_action(name), 0);
        snprintf(name, sizeof name, "arena.%u.reset", i);
        expect_action(name);
        EXPECT_CTL(ctl_action(name), EPERM);
        snprintf(name, sizeof name, "arena.%u.destroy", i);
        expect_action(name);
        EXPECT_CTL(ctl_action(name), EPERM);
    }
    unsigned m = 0;
    EXPECT_CTL(ctl_get("arenas.create", &m, sizeof m), 0);
    for (int muzzy = 0; muzzy < 2; muzzy++) {
        char name[64], sname[64];
        snprintf(name, sizeof name, "arena.%u.%s_decay_ms", m, muzzy ? "muzzy" : "dirty");
        snprintf(sname, sizeof sname, "stats.arenas.%u.%s_decay_ms", m, muzzy ? "muzzy" : "dirty");
        ssize_t v = 0, w = 1234, old = 0;
        EXPECT_CTL(ctl_get(name, &v, sizeof v), 0);
        EXPECT_EQ_I(v, muzzy ? 0 : 10000);   /* opt defaults */
        size_t len = sizeof old;
        EXPECT_CTL(dpm_ctl(name, &old, &len, &w, sizeof w), 0);
        EXPECT_EQ_I(old, v);
        EXPECT_CTL(ctl_get(name, &v, sizeof v), 0);
        EXPECT_EQ_I(v, 1234);
        ctl_refresh();
        ssize_t sv = 0;
        EXPECT_CTL(ctl_get(sname, &sv, sizeof sv), 0);
        EXPECT_EQ_I(sv, 1234);
        expect_read_only(sname, sizeof(ssize_t));
        w = -1;
        EXPECT_CTL(ctl_set(name, &w, sizeof w), 0);
        w = 0;
        EXPECT_CTL(ctl_set(name, &w, sizeof w), 0);
        w = -2;
        EXPECT_CTL(ctl_set(name, &w, sizeof w), EINVAL);
        w = (ssize_t)INT32_MAX + 1;
        EXPECT_CTL(ctl_set(name, &w, sizeof w), EINVAL);
        int small = 5;
        EXPECT_CTL(ctl_set(name, &small, sizeof small), EINVAL);
        EXPECT_CTL(ctl_get(name, &v, sizeof v), 0);
        EXPECT_EQ_I(v, 0);
        expect_wrong_sizes_rejected(name, sizeof(ssize_t));
    }
    /* purge of a manual arena with dirty pages: pdirty drops to 0 */
    void *big[8];
    set_decay_and_free_alternate(m, -1, -1, big, 8, 1);
    EXPECT_CTL(ctl_action("thread.tcache.flush"), 0);
    ctl_refresh();
    size_t dirty = CTL_SIZE(ctl_name("stats.arenas.%u.pdirty", m));
    EXPECT(dirty >= 4 * (256 << 10) / 4096, "pdirty %zu after freeing 1 MiB with decay off", dirty);
    EXPECT_CTL(ctl_action(ctl_name("arena.%u.purge", m)), 0);
    ctl_refresh();
    EXPECT_EQ_U(CTL_SIZE(ctl_name("stats.arenas.%u.pdirty", m)), 0);
    EXPECT_EQ_U(CTL_SIZE(ctl_name("stats.arenas.%u.pmuzzy", m)), 0);
    for (int i = 1; i < 8; i += 2)
        dpm_free(big[i]);
    /* decay: runs younger than the decay time stay, older ones go */
    void *dk[6];
    set_decay_and_free_alternate(m, 100, 0, dk, 6, 2);
    EXPECT_CTL(ctl_action(ctl_name("arena.%u.decay", m)), 0);
    ctl_refresh();
    size_t young = CTL_SIZE(ctl_name("stats.arenas.%u.pdirty", m));
    EXPECT(young >= 3 * (256 << 10) / 4096, "arena.%u.decay right after the frees left %zu dirty pages", m, young);
    usleep(150 * 1000);
    EXPECT_CTL(ctl_action(ctl_name("arena.%u.decay", m)), 0);
    ctl_refresh();
    EXPECT_EQ_U(CTL_SIZE(ctl_name("stats.arenas.%u.pdirty", m)), 0);
    for (int i = 1; i < 6; i += 2)
        dpm_free(dk[i]);
    /* reset / destroy of a manual arena; then it is gone */
    EXPECT_CTL(ctl_action(ctl_name("arena.%u.reset", m)), 0);
    EXPECT_CTL(ctl_action(ctl_name("arena.%u.destroy", m)), 0);
    EXPECT_CTL(ctl_action(ctl_name("arena.%u.destroy", m)), ENOENT);
    EXPECT_CTL(ctl_action(ctl_name("arena.%u.reset", m)), ENOENT);
    EXPECT_CTL(ctl_action(ctl_name("arena.%u.purge", m)), ENOENT);
    ssize_t v;
    EXPECT_CTL(ctl_get(ctl_name("arena.%u.dirty_decay_ms", m), &v, sizeof v), ENOENT);
    const char *nm;
    EXPECT_CTL(ctl_get(ctl_name("arena.%u.name", m), &nm, sizeof nm), ENOENT);
    ctl_refresh();
    EXPECT_CTL(ctl_get(ctl_name("stats.arenas.%u.pactive", m), &v, sizeof v), ENOENT);
}

TEST(background_thread_ctl)
{
    bool v = true, on = true, off = false;
    EXPECT_CTL(ctl_get("background_thread", &v, sizeof v), 0);
    EXPECT(!v, "background_thread on without background_thread:true");
    expect_wrong_sizes_rejected("background_thread", sizeof(bool));
    EXPECT_CTL(ctl_set("background_thread", &on, 4), EINVAL);
    EXPECT_CTL(ctl_set("background_thread", &on, sizeof on), 0);
    EXPECT_CTL(ctl_get("background_thread", &v, sizeof v), 0);
    EXPECT(v, "background_thread reads false after writing true");
    EXPECT_CTL(ctl_set("background_thread", &off, sizeof off), 0);
    EXPECT_CTL(ctl_get("background_thread", &v, sizeof v), 0);
    EXPECT(!v, "background_thread reads true after writing false");
    /* on/off in quick succession: no hang, no leftover thread */
    for (int i = 0; i < 20; i++) {
        EXPECT_CTL(ctl_set("background_thread", i % 2 ? &off : &on, sizeof on), 0);
        EXPECT_CTL(ctl_get("background_thread", &v, sizeof v), 0);
        EXPECT(v == (i % 2 == 0), "round %d: background_thread reads %d", i, v);
    }
}

TEST(global_stats)
{
    static const char *const names[] = {"stats.allocated", "stats.active", "stats.resident", "stats.mapped",
                                        "stats.retained", "stats.metadata", "stats.tcache_bytes"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        expect_read_only(names[i], sizeof(size_t));
    ctl_refresh();
    size_t a0 = CTL_SIZE("stats.allocated");
    enum { N = 10 };
    void *p[N];
    for (int i = 0; i < N; i++) {
        p[i] = dpm_malloc(1 << 20);
        if (p[i] != NULL)
            memset(p[i], 0x5a, 1 << 20);
    }
    /* no epoch, no change: the numbers are a snapshot */
    EXPECT_EQ_U(CTL_SIZE("stats.allocated"), a0);
    ctl_refresh();
    size_t a1 = CTL_SIZE("stats.allocated"), act = CTL_SIZE("stats.active"), res = CTL_SIZE("stats.resident"),
           map = CTL_SIZE("stats.mapped"), meta = CTL_SIZE("stats.metadata");
    EXPECT(a1 >= a0 + N * (1u << 20), "allocated %zu -> %zu after %d MiB", a0, a1, N);
    EXPECT(a1 <= a0 + N * (1u << 20) + (1u << 20), "allocated %zu -> %zu: more than %d MiB + 1 MiB", a0, a1, N);
    EXPECT(act >= a1, "active %zu < allocated %zu", act, a1);
    EXPECT(res >= act, "resident %zu < active %zu", res, act);
    EXPECT(map >= act, "mapped %zu < active %zu", map, act);
    EXPECT(meta > 0, "metadata 0");
    for (int i = 0; i < N; i++)
        dpm_free(p[i]);
    ctl_refresh();
    size_t a2 = CTL_SIZE("stats.allocated");
    EXPECT(a2 + N * (1u << 20) <= a1 + (64u << 10), "allocated %zu -> %zu after freeing %d MiB", a1, a2, N);
}

TEST(arena_and_bin_stats)
{
    unsigned m = 0;
    EXPECT_CTL(ctl_get("arenas.create", &m, sizeof m), 0);
    static const char *const size_names[] = {"pactive", "pdirty", "pmuzzy", "pclean", "mapped",
                                             "small.allocated", "large.allocated", "tcache_bytes"};
    static const char *const u64_names[] = {
        "small.nmalloc", "small.ndalloc", "large.nmalloc", "large.ndalloc", "npurge", "purged",
        "purged_lazy", "searches", "search_hits", "search_candidates", "mutexes.arena.num_ops",
        "mutexes.arena.num_wait", "mutexes.arena.total_wait_time", "mutexes.arena.max_wait_time",
        "mutexes.bins.num_ops", "mutexes.bins.num_wait", "mutexes.bins.total_wait_time",
        "mutexes.bins.max_wait_time"};
    ctl_refresh();
    char name[128];
    for (size_t i = 0; i < sizeof size_names / sizeof size_names[0]; i++) {
        snprintf(name, sizeof name, "stats.arenas.%u.%s", m, size_names[i]);
        expect_read_only(name, sizeof(size_t));
        EXPECT(strcmp(size_names[i], "pclean") == 0 || strcmp(size_names[i], "mapped") == 0 ||
                   CTL_SIZE(name) == 0,
               "%s = %zu in a fresh arena", name, CTL_SIZE(name));
    }
    for (size_t i = 0; i < sizeof u64_names / sizeof u64_names[0]; i++) {
        snprintf(name, sizeof name, "stats.arenas.%u.%s", m, u64_names[i]);
        expect_read_only(name, sizeof(uint64_t));
    }
    snprintf(name, sizeof name, "stats.arenas.%u.nthreads", m);
    expect_read_only(name, sizeof(unsigned));
    snprintf(name, sizeof name, "stats.arenas.%u.dirty_decay_ms", m);
    expect_read_only(name, sizeof(ssize_t));

    /* small blocks: exact counts in the arena and its bin */
    unsigned j = bin_index_for(100);
    size_t objsize = CTL_SIZE(ctl_name("arenas.bin.%u.size", j));
    enum { N = 300 };
    void *p[N];
    for (int i = 0; i < N; i++)
        p[i] = dpm_malloc_arena(m, 100, 0);
    ctl_refresh();
    EXPECT_EQ_U(CTL_U64(ctl_name("stats.arenas.%u.small.nmalloc", m)), N);
    EXPECT_EQ_U(CTL_SIZE(ctl_name("stats.arenas.%u.small.allocated", m)), N * objsize);
    EXPECT_EQ_U(CTL_U64(ctl_name("stats.arenas.%u.bins.%u.nmalloc", m, j)), N);
    EXPECT_EQ_U(CTL_SIZE(ctl_name("stats.arenas.%u.bins.%u.curregs", m, j)), N);
    uint32_t nregs = 0;
    ctl_get(ctl_name("arenas.bin.%u.nregs", j), &nregs, sizeof nregs);
    size_t slabs = CTL_SIZE(ctl_name("stats.arenas.%u.bins.%u.curslabs", m, j));
    EXPECT(nregs > 0 && slabs == (N + nregs - 1) / nregs, "curslabs %zu for %d blocks of %u per slab", slabs, N,
           nregs);
    EXPECT(CTL_U64(ctl_name("stats.arenas.%u.bins.%u.nslabs", m, j)) >= slabs, "nslabs < curslabs");
    EXPECT(CTL_U64(ctl_name("stats.arenas.%u.bins.%u.mutex.num_ops", m, j)) > 0, "bin lock never taken");
    EXPECT(CTL_SIZE(ctl_name("stats.arenas.%u.pactive", m)) >= slabs, "pactive below the slab count");
    EXPECT(CTL_U64(ctl_name("stats.arenas.%u.mutexes.arena.num_ops", m)) > 0, "arena lock never taken");
    for (int i = 0; i < N / 2; i++)
        dpm_free(p[i]);
    EXPECT_CTL(ctl_action("thread.tcache.flush"), 0);
    ctl_refresh();
    EXPECT_EQ_U(CTL_U64(ctl_name("stats.arenas.%u.small.ndalloc", m)), N / 2);
    EXPECT_EQ_U(CTL_U64(ctl_name("stats.arenas.%u.bins.%u.ndalloc", m, j)), N / 2);
    EXPECT_EQ_U(CTL_SIZE(ctl_name("stats.arenas.%u.bins.%u.curregs", m, j)), N - N / 2);
    EXPECT_EQ_U(CTL_SIZE(ctl_name("stats.arenas.%u.small.allocated", m)), (N - N / 2) * objsize);
    static const char *const bin_u64[] = {"nmalloc", "ndalloc", "nrequests", "nslabs", "nfills", "nflushes",
                                          "tcache_misses", "mutex.num_ops", "mutex.num_wait",
                                          "mutex.total_wait_time"};
    for (size_t i = 0; i < sizeof bin_u64 / sizeof bin_u64[0]; i++) {
        snprintf(name, sizeof name, "stats.arenas.%u.bins.%u.%s", m, j, bin_u64[i]);
        expect_read_only(name, sizeof(uint64_t));
    }
    snprintf(name, sizeof name, "stats.arenas.%u.bins.%u.curregs", m, j);
    expect_read_only(name, sizeof(size_t));
    snprintf(name, sizeof name, "stats.arenas.%u.bins.%u.curslabs", m, j);
    expect_read_only(name, sizeof(size_t));

    /* large blocks: the 1 MiB class */
    unsigned k = 0;
    for (; k < nlextents; k++)
        if (CTL_SIZE(ctl_name("arenas.lextent.%u.size", k)) == (1u << 20))
            break;
    EXPECT(k < nlextents, "no 1 MiB large class");
    /* counters as deltas: a reused arena slot may carry old large counts
     * (see recreated_arena_starts_clean) */
    uint64_t lm0 = CTL_U64(ctl_name("stats.arenas.%u.large.nmalloc", m));
    uint64_t ld0 = CTL_U64(ctl_name("stats.arenas.%u.large.ndalloc", m));
    uint64_t km0 = CTL_U64(ctl_name("stats.arenas.%u.lextents.%u.nmalloc", m, k));
    size_t kc0 = CTL_SIZE(ctl_name("stats.arenas.%u.lextents.%u.curlextents", m, k));
    void *q[3];
    for (int i = 0; i < 3; i++)
        q[i] = dpm_malloc_arena(m, 1 << 20, 0);
    ctl_refresh();
    EXPECT_EQ_U(CTL_U64(ctl_name("stats.arenas.%u.large.nmalloc", m)) - lm0, 3);
    EXPECT_EQ_U(CTL_SIZE(ctl_name("stats.arenas.%u.large.allocated", m)), 3u << 20);
    EXPECT_EQ_U(CTL_U64(ctl_name("stats.arenas.%u.lextents.%u.nmalloc", m, k)) - km0, 3);
    EXPECT_EQ_U(CTL_SIZE(ctl_name("stats.arenas.%u.lextents.%u.curlextents", m, k)) - kc0, 3);
    snprintf(name, sizeof name, "stats.arenas.%u.lextents.%u.nmalloc", m, k);
    expect_read_only(name, sizeof(uint64_t));
    snprintf(name, sizeof name, "stats.arenas.%u.lextents.%u.ndalloc", m, k);
    expect_read_only(name, sizeof(uint64_t));
    snprintf(name, sizeof name, "stats.arenas.%u.lextents.%u.curlextents", m, k);
    expect_read_only(name, sizeof(size_t));
    dpm_free(q[0]);
    ctl_refresh();
    EXPECT_EQ_U(CTL_U64(ctl_name("stats.arenas.%u.large.ndalloc", m)) - ld0, 1);
    EXPECT_EQ_U(CTL_SIZE(ctl_name("stats.arenas.%u.lextents.%u.curlextents", m, k)) - kc0, 2);
    EXPECT_EQ_U(CTL_SIZE(ctl_name("stats.arenas.%u.large.allocated", m)), 2u << 20);
    EXPECT_CTL(ctl_action(ctl_name("arena.%u.destroy", m)), 0);
}

/* Thread-cache counters: a hot malloc/free loop is nearly all cache hits. */
TEST(tcache_counters)
{
    unsigned a = CTL_UNS("thread.arena");
    unsigned j = bin_index_for(64);
    ctl_refresh();
    uint64_t req0 = CTL_U64(ctl_name("stats.arenas.%u.bins.%u.nrequests", a, j));
    uint64_t miss0 = CTL_U64(ctl_name("stats.arenas.%u.bins.%u.tcache_misses", a, j));
    enum { LOOPS = 20000 };
    for (int i = 0; i < LOOPS; i++) {
        void *p = dpm_malloc(64);
        *(volatile char *)p = 1;
        dpm_free(p);
    }
    ctl_refresh();
    uint64_t req = CTL_U64(ctl_name("stats.arenas.%u.bins.%u.nrequests", a, j)) - req0;
    uint64_t miss = CTL_U64(ctl_name("stats.arenas.%u.bins.%u.tcache_misses", a, j)) - miss0;
    if (req < LOOPS) {   /* say where the requests went */
        unsigned n = CTL_UNS("arenas.narenas");
        for (unsigned i = 0; i < n; i++) {
            uint64_t v = 0;
            if (ctl_get(ctl_name("stats.arenas.%u.bins.%u.nrequests", i, j), &v, sizeof v) == 0 && v != 0)
                fprintf(stderr, "    arena %u bin %u: nrequests %llu\n", i, j, (unsigned long long)v);
        }
    }
    EXPECT(req >= LOOPS && req <= LOOPS + 100, "thread.arena %u, bin %u: nrequests grew by %llu for %d allocations",
           a, j, (unsigned long long)req, LOOPS);
    EXPECT(miss <= LOOPS / 100, "%llu cache misses in a malloc/free loop of %d", (unsigned long long)miss, LOOPS);
}

/* nthreads over all arenas counts the threads that have allocated. */
static pthread_barrier_t nt_barrier;
static void *nt_thread(void *arg)
{
    (void)arg;
    void *p = dpm_malloc(100);
    pthread_barrier_wait(&nt_barrier);
    pthread_barrier_wait(&nt_barrier);
    dpm_free(p);
    return NULL;
}

static unsigned total_nthreads(void)
{
    ctl_refresh();
    unsigned n = CTL_UNS("arenas.narenas"), sum = 0;
    for (unsigned i = 0; i < n; i++) {
        unsigned v = 0;
        if (ctl_get(ctl_name("stats.arenas.%u.nthreads", i), &v, sizeof v) == 0)
            sum += v;
    }
    return sum;
}

TEST(nthreads_counts_threads)
{
    enum { T = 5 };
    unsigned before = total_nthreads();
    pthread_barrier_init(&nt_barrier, NULL, T + 1);
    pthread_t th[T];
    for (int i = 0; i < T; i++)
        pthread_create(&th[i], NULL, nt_thread, NULL);
    pthread_barrier_wait(&nt_barrier);
    unsigned during = total_nthreads();
    pthread_barrier_wait(&nt_barrier);
    for (int i = 0; i < T; i++)
        pthread_join(th[i], NULL);
    unsigned after = total_nthreads();
    EXPECT(during == before + T && after == before, "nthreads summed over arenas: %u before, %u with %d more "
           "threads, %u after they exit", before, during, T, after);
    pthread_barrier_destroy(&nt_barrier);
}

/* An arena made in the slot of a destroyed one starts with zero counters. */
TEST(recreated_arena_starts_clean)
{
    unsigned m = 0, m2 = 0;
    EXPECT_CTL(ctl_get("arenas.create", &m, sizeof m), 0);
    for (int i = 0; i < 5; i++)
        (void)dpm_malloc_arena(m, 1 << 20, 0);
    for (int i = 0; i < 50; i++)
        (void)dpm_malloc_arena(m, 100, 0);
    EXPECT_CTL(ctl_action(ctl_name("arena.%u.destroy", m)), 0);
    EXPECT_CTL(ctl_get("arenas.create", &m2, sizeof m2), 0);
    EXPECT_EQ_U(m2, m);   /* the slot is reused */
    ctl_refresh();
    EXPECT_EQ_U(CTL_U64(ctl_name("stats.arenas.%u.small.nmalloc", m2)), 0);
    EXPECT_EQ_U(CTL_U64(ctl_name("stats.arenas.%u.small.ndalloc", m2)), 0);
    EXPECT_EQ_U(CTL_U64(ctl_name("stats.arenas.%u.large.nmalloc", m2)), 0);
    EXPECT_EQ_U(CTL_U64(ctl_name("stats.arenas.%u.large.ndalloc", m2)), 0);
    EXPECT_CTL(ctl_action(ctl_name("arena.%u.destroy", m2)), 0);
}

int main(void)
{
    void *warm = dpm_malloc(1);
    dpm_free(warm);
    if (ctl_get("arenas.nbins", &nbins, sizeof nbins) != 0 ||
        ctl_get("arenas.nlextents", &nlextents, sizeof nlextents) != 0) {
        fprintf(stderr, "arenas.nbins / arenas.nlextents unreadable\n");
        return 1;
    }
    narenas_auto_seen = CTL_UNS("arenas.narenas");   /* before any arenas.create */
    RUN(version_and_epoch);
    RUN(unknown_names);
    RUN(options_read_only);
    RUN(arenas_constants);
    RUN(arenas_create_and_lookup);
    RUN(thread_arena);
    RUN(thread_tcache);
    RUN(tcache_ncached_max);
    RUN(tcache_ncached_max_zero);
    RUN(arena_actions_and_decay_times);
    RUN(background_thread_ctl);
    RUN(global_stats);
    RUN(arena_and_bin_stats);
    RUN(tcache_counters);
    RUN(nthreads_counts_threads);
    RUN(recreated_arena_starts_clean);
    return test_done();
}
