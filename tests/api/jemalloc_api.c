/*
 * jemalloc_api.c - jemalloc 5.3's API as libdpmalloc exports it
 * (include/dpmalloc/jemalloc.h): the flag values, mallocx/rallocx/
 * xallocx/sallocx/dallocx/sdallocx/nallocx, mallctl and its MIB forms
 * (round trips, partial names, errors), MALLCTL_ARENAS_ALL (merged
 * statistics equal the sum over arenas; purge and decay of all),
 * config.*, malloc_stats_print, misuse (sdallocx with a wrong size,
 * dallocx of a foreign pointer abort naming the call and the pointer),
 * and options in jemalloc's dialect: the program's malloc_conf below,
 * MALLOC_CONF (mapped names, one warning line per unknown name, ignored
 * when DPMALLOC_CONF is set), read back through opt.*.
 * Built against dpmalloc_static and the shared dpmalloc.
 *
 * usage: test_api_jemalloc            every test
 *        test_api_jemalloc opts       print opt.* values (for the re-exec)
 */
#include "test.h"

#include <dpmalloc.h>
#include <dpmalloc/jemalloc.h>
#include <malloc.h>
#include <stdint.h>
#include <sys/types.h>

#define JE_NELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* the program's options in jemalloc's dialect (read at initialisation) */
const char *malloc_conf = "muzzy_decay_ms:777";

static size_t read_size(const char *name)
{
    size_t v = 0, len = sizeof v;
    int e = mallctl(name, &v, &len, NULL, 0);
    if (e != 0)
        TEST_FAIL("mallctl(%s) = %d", name, e);
    return v;
}

static void refresh(void)
{
    uint64_t e = 1;
    EXPECT_EQ_I(mallctl("epoch", NULL, NULL, &e, sizeof e), 0);
}

TEST(flag_values)
{
    /* jemalloc 5.3's encodings: a binary built against its header passes these bits */
    EXPECT_EQ_I(MALLOCX_LG_ALIGN(12), 12);
    EXPECT_EQ_I(MALLOCX_ALIGN(4096), 12);
    EXPECT_EQ_I(MALLOCX_ALIGN((size_t)1 << 40), 40);
    EXPECT_EQ_I(MALLOCX_ZERO, 0x40);
    EXPECT_EQ_I(MALLOCX_TCACHE_NONE, 0x100);
    EXPECT_EQ_I(MALLOCX_TCACHE(0), 0x200);
    EXPECT_EQ_I(MALLOCX_ARENA(0), 1 << 20);
    EXPECT_EQ_I(MALLOCX_ARENA(5), 6 << 20);
    EXPECT_EQ_I(MALLCTL_ARENAS_ALL, 4096);
    EXPECT_EQ_I(MALLCTL_ARENAS_DESTROYED, 4097);
}

static const size_t sizes[] = {1, 7, 16, 24, 100, 1000, 4096, 5000, 14336, 20000, 65536, 100000,
                               (size_t)1 << 20, ((size_t)5 << 20) + 3};
static const size_t aligns[] = {0, 8, 32, 64, 256, 4096, 8192, 65536, (size_t)1 << 20};

TEST(mallocx_align_and_nallocx)
{
    for (unsigned i = 0; i < JE_NELEMS(sizes); i++)
        for (unsigned j = 0; j < JE_NELEMS(aligns); j++) {
            int flags = aligns[j] == 0 ? 0 : MALLOCX_ALIGN(aligns[j]);
            void *p = mallocx(sizes[i], flags);
            EXPECT_NONNULL(p);
            if (p == NULL)
                continue;
            if (aligns[j] != 0)
                EXPECT_ALIGNED(p, aligns[j]);
            size_t u = sallocx(p, 0);
            EXPECT_GE_U(u, sizes[i]);
            EXPECT_EQ_U(u, malloc_usable_size(p));
            /* nallocx: what mallocx gives, without allocating */
            if (nallocx(sizes[i], flags) != u)
                TEST_FAIL("size %zu align %zu: nallocx %zu, sallocx %zu", sizes[i], aligns[j],
                          nallocx(sizes[i], flags), u);
            memset(p, 0x5a, u);
            dallocx(p, flags);
        }
    /* size 0 is taken as 1 */
    EXPECT_EQ_U(nallocx(0, 0), nallocx(1, 0));
    void *p = mallocx(0, 0);
    EXPECT_NONNULL(p);
    EXPECT_EQ_U(sallocx(p, 0), nallocx(1, 0));
    dallocx(p, 0);
}

/* a size no allocator serves, out of the compiler's sight */
/* nallocx(s, f) == sallocx(mallocx(s, f)) for every size class boundary
 * region, every alignment up to 1 MiB, and the flags that choose the
 * path: the caches, or an arena's bins and pages (MALLOCX_ARENA,
 * MALLOCX_TCACHE_NONE); a program sizes its writes by nallocx. */
TEST(nallocx_sweep_all_paths)
{
    unsigned bad = 0;
    for (size_t s = 1; s < ((size_t)1 << 22); s = s < 4096 ? s + 1 : s * 5 / 4)
        for (int lg = 0; lg <= 20; lg++) {
            const int fl[] = {MALLOCX_LG_ALIGN(lg), MALLOCX_LG_ALIGN(lg) | MALLOCX_ZERO,
                              MALLOCX_LG_ALIGN(lg) | MALLOCX_TCACHE_NONE, MALLOCX_LG_ALIGN(lg) | MALLOCX_ARENA(0),
                              MALLOCX_LG_ALIGN(lg) | MALLOCX_ARENA(0) | MALLOCX_TCACHE_NONE};
            for (unsigned f = 0; f < JE_NELEMS(fl); f++) {
                void *p = mallocx(s, fl[f]);
                if (p == NULL) {
                    TEST_FAIL("mallocx(%zu, %#x) failed", s, fl[f]);
                    return;
                }
                size_t n = nallocx(s, fl[f]), u = sallocx(p, 0);
                if (n != u && bad++ < 5)
                    TEST_FAIL("size %zu lg_align %d flags %#x: nallocx %zu, sallocx %zu", s, lg, fl[f], n, u);
                if (n == u)
                    sdallocx(p, n, fl[f]);   /* legal with nallocx's size */
                else
                    dallocx(p, 0);
            }
        }
    EXPECT_EQ_U(bad, 0);
}

static volatile size_t huge_size = SIZE_MAX - 4096;

TEST(failures_set_errno)
{
    EXPECT_EQ_U(nallocx(SIZE_MAX, 0), 0);
    EXPECT_EQ_U(nallocx(SIZE_MAX / 2, 0), 0);
    errno = 0;
    EXPECT_NULL(mallocx(huge_size, 0));
    EXPECT_ERRNO(ENOMEM);
    errno = 0;
    EXPECT_NULL(mallocx(huge_size, MALLOCX_ALIGN(64) | MALLOCX_ZERO));
    EXPECT_ERRNO(ENOMEM);
    /* tcache.create's caches are not provided */
    errno = 0;
    EXPECT_NULL(mallocx(16, MALLOCX_TCACHE(0)));
    EXPECT_ERRNO(EINVAL);
    EXPECT_EQ_U(nallocx(16, MALLOCX_TCACHE(3)), 0);
    /* an arena that does not exist */
    errno = 0;
    EXPECT_NULL(mallocx(16, MALLOCX_ARENA(4000)));
    EXPECT_ERRNO(EINVAL);
    /* an alignment beyond DPM_MAX_ALIGN */
    errno = 0;
    EXPECT_NULL(mallocx(16, MALLOCX_LG_ALIGN(40)));
    EXPECT_ERRNO(EINVAL);
    void *p = mallocx(64, 0);
    errno = 0;
    EXPECT_NULL(rallocx(p, huge_size, 0));
    EXPECT_ERRNO(ENOMEM);
    EXPECT_EQ_U(sallocx(p, 0), nallocx(64, 0));   /* p untouched */
    dallocx(p, 0);
}

TEST(zero_flag)
{
    for (unsigned i = 0; i < JE_NELEMS(sizes); i++) {
        /* dirty a block of the size first so that a reuse would show */
        void *d = mallocx(sizes[i], 0);
        memset(d, 0xa5, sallocx(d, 0));
        dallocx(d, 0);
        for (unsigned j = 0; j < 3; j++) {
            int flags = MALLOCX_ZERO | (j == 1 ? MALLOCX_ALIGN(64) : j == 2 ? MALLOCX_TCACHE_NONE : 0);
            unsigned char *p = mallocx(sizes[i], flags);
            EXPECT_NONNULL(p);
            if (p == NULL)
                continue;
            EXPECT_TRUE(test_all_zero(p, sallocx(p, 0)));
            memset(p, 0xa5, sallocx(p, 0));
            dallocx(p, 0);
        }
    }
}

TEST(rallocx_keeps_and_zeroes)
{
    unsigned char *p = mallocx(100, MALLOCX_ZERO);
    test_fill(p, 100, 1);
    size_t old = sallocx(p, 0);
    for (size_t to = 200; to <= ((size_t)4 << 20); to *= 3) {
        unsigned char *q = rallocx(p, to, MALLOCX_ZERO);
        EXPECT_NONNULL(q);
        if (q == NULL)
            break;
        EXPECT_EQ_U(test_check(q, 100, 1), 100);
        size_t now = sallocx(q, 0);
        EXPECT_GE_U(now, to);
        EXPECT_TRUE(test_all_zero(q + old, now - old));   /* past the old usable size */
        memset(q + 100, 0, now - 100);
        p = q;
        old = now;
    }
    /* an alignment kept across a move */
    unsigned char *q = rallocx(p, 300000, MALLOCX_ALIGN(65536));
    EXPECT_NONNULL(q);
    EXPECT_ALIGNED(q, 65536);
    EXPECT_EQ_U(test_check(q, 100, 1), 100);
    /* to another arena: contents follow */
    unsigned arena;
    size_t alen = sizeof arena;
    EXPECT_EQ_I(mallctl("arenas.create", &arena, &alen, NULL, 0), 0);
    unsigned char *r = rallocx(q, 5000, MALLOCX_ARENA(arena));
    EXPECT_NONNULL(r);
    EXPECT_EQ_U(test_check(r, 100, 1), 100);
    unsigned in = 0;
    size_t ilen = sizeof in;
    const void *rp = r;
    EXPECT_EQ_I(mallctl("arenas.lookup", &in, &ilen, &rp, sizeof rp), 0);
    EXPECT_EQ_U(in, arena);
    sdallocx(r, 5000, 0);
    /* NULL: as mallocx */
    p = rallocx(NULL, 50, 0);
    EXPECT_NONNULL(p);
    dallocx(p, 0);
}

TEST(xallocx_in_place_only)
{
    void *p = mallocx(100, 0);
    size_t u = sallocx(p, 0);
    /* a slab block keeps its class */
    EXPECT_EQ_U(xallocx(p, 50, 0, 0), u);
    EXPECT_EQ_U(xallocx(p, u + 1000, 0, 0), u);
    EXPECT_EQ_U(sallocx(p, 0), u);
    dallocx(p, 0);
    /* a large block shrinks in place, and grows in place where its pages allow */
    unsigned char *big = mallocx((size_t)1 << 20, 0);
    test_fill(big, (size_t)1 << 19, 2);
    size_t got = xallocx(big, (size_t)1 << 19, 0, 0);
    EXPECT_GE_U(got, (size_t)1 << 19);
    EXPECT_LT_U(got, (size_t)1 << 20);
    EXPECT_EQ_U(sallocx(big, 0), got);
    EXPECT_EQ_U(test_check(big, (size_t)1 << 19, 2), (size_t)1 << 19);
    size_t again = xallocx(big, (size_t)1 << 19, (size_t)1 << 19, MALLOCX_ZERO);
    EXPECT_GE_U(again, (size_t)1 << 19);
    EXPECT_EQ_U(sallocx(big, 0), again);
    if (again > got)
        EXPECT_TRUE(test_all_zero(big + got, again - got));
    EXPECT_EQ_U(test_check(big, (size_t)1 << 19, 2), (size_t)1 << 19);
    sdallocx(big, again, 0);
    EXPECT_EQ_U(xallocx(NULL, 10, 0, 0), 0);
    EXPECT_EQ_U(sallocx(NULL, 0), 0);
    dallocx(NULL, 0);
    sdallocx(NULL, 0, 0);
}

/* review r38: an xallocx that answers at least the size asked for,
 * without resizing, lets a sized free name that size (it aborted: the
 * block's recorded request stayed the bigger one) */
TEST(xallocx_unchanged_then_sized_free)
{
    static const struct {
        size_t align, size, to, extra;
    } cases[] = {
        {8192, 8193, 8000, 0},      /* a page run below the large classes: never resized */
        {8192, 12000, 10000, 4000}, /* its usable bytes already within [to, to + extra] */
        {8192, 20000, 17000, 4000},
        {16, 20000, 17000, 4000},   /* a plain large block */
        {16, 300000, 200000, 200000},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        void *p = mallocx(cases[i].size, MALLOCX_ALIGN(cases[i].align));
        EXPECT_NONNULL(p);
        size_t got = xallocx(p, cases[i].to, cases[i].extra, 0);
        EXPECT_GE_U(got, cases[i].to);
        EXPECT_EQ_U(sallocx(p, 0), got);
        sdallocx(p, cases[i].to, 0);   /* aborts if the promise is refused */
    }
    /* the size asked for first stays a valid promise too */
    void *p = mallocx(20000, 0);
    EXPECT_GE_U(xallocx(p, 17000, 4000, 0), 17000);
    sdallocx(p, 20000, 0);
}

TEST(arena_and_tcache_flags)
{
    unsigned arena;
    size_t alen = sizeof arena;
    EXPECT_EQ_I(mallctl("arenas.create", &arena, &alen, NULL, 0), 0);
    for (unsigned i = 0; i < JE_NELEMS(sizes); i++) {
        void *p = mallocx(sizes[i], MALLOCX_ARENA(arena) | MALLOCX_ALIGN(64));
        EXPECT_NONNULL(p);
        EXPECT_ALIGNED(p, 64);
        unsigned in = 0;
        size_t ilen = sizeof in;
        EXPECT_EQ_I(mallctl("arenas.lookup", &in, &ilen, &p, sizeof p), 0);
        EXPECT_EQ_U(in, arena);
        dallocx(p, MALLOCX_TCACHE_NONE);
        void *q = mallocx(sizes[i], MALLOCX_TCACHE_NONE);
        EXPECT_NONNULL(q);
        dallocx(q, 0);
    }
}

TEST(mallctl_is_dpm_ctl)
{
    const char *v = NULL, *w = NULL;
    size_t len = sizeof v;
    EXPECT_EQ_I(mallctl("version", &v, &len, NULL, 0), 0);
    EXPECT_EQ_I(dpm_ctl("version", &w, &len, NULL, 0), 0);
    EXPECT_TRUE(v != NULL && strcmp(v, DPMALLOC_VERSION) == 0 && v == w);
    EXPECT_EQ_I(mallctl("no.such.name", NULL, NULL, NULL, 0), ENOENT);
    bool b = false;
    size_t blen = sizeof b;
    EXPECT_EQ_I(mallctl("config.stats", &b, &blen, NULL, 0), 0);
    EXPECT_TRUE(b);
    EXPECT_EQ_I(mallctl("config.fill", &b, &blen, NULL, 0), 0);
    EXPECT_TRUE(b);
    EXPECT_EQ_I(mallctl("config.xmalloc", &b, &blen, NULL, 0), 0);
    EXPECT_TRUE(!b);
    EXPECT_EQ_I(mallctl("config.prof", &b, &blen, NULL, 0), 0);
    size_t olen = sizeof(bool);
    bool prof_opt;
    EXPECT_EQ_I(mallctl("opt.prof", &prof_opt, &olen, NULL, 0), b ? 0 : ENOENT);
    EXPECT_EQ_I(mallctl("config.stats", NULL, NULL, &b, sizeof b), EPERM);
    EXPECT_EQ_I(mallctl("config.malloc_conf", &v, &len, NULL, 0), 0);
    EXPECT_NONNULL(v);
}

TEST(mib_round_trips)
{
    size_t mib[8], miblen = 8;
    EXPECT_EQ_I(mallctlnametomib("stats.arenas.0.pactive", mib, &miblen), 0);
    EXPECT_EQ_U(miblen, 4);
    EXPECT_EQ_U(mib[2], 0);
    unsigned narenas = 0;
    size_t nlen = sizeof narenas;
    EXPECT_EQ_I(mallctl("arenas.narenas", &narenas, &nlen, NULL, 0), 0);
    refresh();
    for (unsigned i = 0; i < narenas; i++) {
        char name[64];
        snprintf(name, sizeof name, "stats.arenas.%u.pactive", i);
        size_t a = 1, b = 2, la = sizeof a, lb = sizeof b;
        mib[2] = i;
        int ea = mallctl(name, &a, &la, NULL, 0), eb = mallctlbymib(mib, miblen, &b, &lb, NULL, 0);
        EXPECT_EQ_I(eb, ea);
        if (ea == 0)
            EXPECT_EQ_U(a, b);
    }
    /* the bin table by MIB, as jemalloc's users walk it */
    unsigned nbins = 0;
    EXPECT_EQ_I(mallctl("arenas.nbins", &nbins, &nlen, NULL, 0), 0);
    miblen = 4;
    EXPECT_EQ_I(mallctlnametomib("arenas.bin.0.size", mib, &miblen), 0);
    for (unsigned j = 0; j < nbins; j++) {
        mib[2] = j;
        size_t sz = 0, slen = sizeof sz;
        EXPECT_EQ_I(mallctlbymib(mib, miblen, &sz, &slen, NULL, 0), 0);
        char name[64];
        snprintf(name, sizeof name, "arenas.bin.%u.size", j);
        EXPECT_EQ_U(sz, read_size(name));
    }
    mib[2] = nbins;
    size_t sz, slen = sizeof sz;
    EXPECT_EQ_I(mallctlbymib(mib, miblen, &sz, &slen, NULL, 0), ENOENT);
    /* a prefix, completed by hand from another name's MIB */
    size_t pre[8], prelen = 8, full[8], fulllen = 8;
    EXPECT_EQ_I(mallctlnametomib("arenas.bin", pre, &prelen), 0);
    EXPECT_EQ_U(prelen, 2);
    EXPECT_EQ_I(mallctlnametomib("arenas.bin.3.nregs", full, &fulllen), 0);
    EXPECT_TRUE(pre[0] == full[0] && pre[1] == full[1]);
    EXPECT_EQ_I(mallctlbymib(pre, prelen, &sz, &slen, NULL, 0), ENOENT);   /* not a leaf */
    /* writes and actions through a MIB */
    uint64_t e = 1;
    miblen = 8;
    EXPECT_EQ_I(mallctlnametomib("epoch", mib, &miblen), 0);
    EXPECT_EQ_U(miblen, 1);
    EXPECT_EQ_I(mallctlbymib(mib, miblen, NULL, NULL, &e, sizeof e), 0);
    miblen = 8;
    EXPECT_EQ_I(mallctlnametomib("arena.0.decay", mib, &miblen), 0);
    mib[1] = MALLCTL_ARENAS_ALL;
    EXPECT_EQ_I(mallctlbymib(mib, miblen, NULL, NULL, NULL, 0), 0);
    /* opt.* names are in the MIB space too */
    miblen = 8;
    EXPECT_EQ_I(mallctlnametomib("opt.narenas", mib, &miblen), 0);
    unsigned on = 0, on2 = 1;
    size_t olen = sizeof on;
    EXPECT_EQ_I(mallctlbymib(mib, miblen, &on, &olen, NULL, 0), 0);
    EXPECT_EQ_I(mallctl("opt.narenas", &on2, &olen, NULL, 0), 0);
    EXPECT_EQ_U(on, on2);
}

TEST(mib_errors)
{
    size_t mib[8], miblen = 8;
    EXPECT_EQ_I(mallctlnametomib("no.such", mib, &miblen), ENOENT);
    miblen = 8;
    EXPECT_EQ_I(mallctlnametomib("arenas.bin.x.size", mib, &miblen), ENOENT);
    miblen = 8;
    EXPECT_EQ_I(mallctlnametomib("stats.arenas.0.pactive.more", mib, &miblen), ENOENT);
    miblen = 8;
    EXPECT_EQ_I(mallctlnametomib("", mib, &miblen), ENOENT);
    /* room for fewer components than the name has: jemalloc's partial
     * MIB of that many, completed by the caller */
    size_t whole[8], wlen = 8;
    EXPECT_EQ_I(mallctlnametomib("stats.arenas.0.pactive", whole, &wlen), 0);
    size_t part[4] = {0, 0, 77, 77};
    miblen = 2;
    EXPECT_EQ_I(mallctlnametomib("stats.arenas.0.pactive", part, &miblen), 0);
    EXPECT_EQ_U(miblen, 2);
    EXPECT_EQ_U(part[0], whole[0]);
    EXPECT_EQ_U(part[1], whole[1]);
    EXPECT_EQ_U(part[2], 77);   /* nothing written past *miblenp */
    part[2] = 0, part[3] = whole[3];
    size_t pa = 0, pb = 1, plen = sizeof pa;
    refresh();
    EXPECT_EQ_I(mallctlbymib(part, 4, &pa, &plen, NULL, 0), 0);
    EXPECT_EQ_I(mallctl("stats.arenas.0.pactive", &pb, &plen, NULL, 0), 0);
    EXPECT_EQ_U(pa, pb);
    miblen = 3;
    EXPECT_EQ_I(mallctlnametomib("stats.arenas.0.pactive", mib, &miblen), 0);
    EXPECT_EQ_U(miblen, 3);
    EXPECT_EQ_U(mib[2], 0);
    miblen = 0;
    EXPECT_EQ_I(mallctlnametomib("epoch", mib, &miblen), 0);
    EXPECT_EQ_U(miblen, 0);
    EXPECT_EQ_I(mallctlnametomib(NULL, mib, &miblen), EINVAL);
    EXPECT_EQ_I(mallctlnametomib("epoch", NULL, &miblen), EINVAL);
    miblen = 8;
    EXPECT_EQ_I(mallctlnametomib("stats.arenas.0.pactive", mib, &miblen), 0);
    size_t v, len = sizeof v;
    size_t bad[4] = {mib[0], mib[1], mib[2], 100000};   /* no such word */
    EXPECT_EQ_I(mallctlbymib(bad, 4, &v, &len, NULL, 0), ENOENT);
    EXPECT_EQ_I(mallctlbymib(mib, 0, &v, &len, NULL, 0), ENOENT);
    EXPECT_EQ_I(mallctlbymib(mib, 9, &v, &len, NULL, 0), ENOENT);
    size_t huge[4] = {mib[0], mib[1], SIZE_MAX, mib[3]};   /* no such arena */
    EXPECT_EQ_I(mallctlbymib(huge, 4, &v, &len, NULL, 0), ENOENT);
    /* the value's size is checked as mallctl checks it */
    unsigned small;
    size_t slen = sizeof small;
    EXPECT_EQ_I(mallctlbymib(mib, 4, &small, &slen, NULL, 0), EINVAL);
}

/* stats.arenas.4096.<x> is the sum over arenas of stats.arenas.<i>.<x> */
static void expect_merged(const char *fmt, unsigned narenas, size_t width)
{
    char name[96];
    uint64_t sum = 0;
    for (unsigned i = 0; i < narenas; i++) {
        snprintf(name, sizeof name, fmt, i);
        uint64_t v = 0;
        size_t len = width;
        int e = mallctl(name, &v, &len, NULL, 0);
        if (e == ENOENT)
            continue;
        EXPECT_EQ_I(e, 0);
        sum += width == 4 ? (uint64_t)(uint32_t)v : v;
    }
    snprintf(name, sizeof name, fmt, MALLCTL_ARENAS_ALL);
    uint64_t all = 0;
    size_t len = width;
    EXPECT_EQ_I(mallctl(name, &all, &len, NULL, 0), 0);
    if ((width == 4 ? (uint64_t)(uint32_t)all : all) != sum)
        TEST_FAIL("%s: %llu, sum over arenas %llu", name, (unsigned long long)all, (unsigned long long)sum);
}

TEST(arenas_all)
{
    /* something in two arenas */
    unsigned arena;
    size_t alen = sizeof arena;
    EXPECT_EQ_I(mallctl("arenas.create", &arena, &alen, NULL, 0), 0);
    void *a = mallocx(100, MALLOCX_ARENA(arena)), *b = mallocx(1 << 20, MALLOCX_ARENA(arena));
    void *c = malloc(300), *d = malloc(1 << 20);
    refresh();
    unsigned narenas = 0;
    size_t nlen = sizeof narenas;
    EXPECT_EQ_I(mallctl("arenas.narenas", &narenas, &nlen, NULL, 0), 0);
    expect_merged("stats.arenas.%u.pactive", narenas, sizeof(size_t));
    expect_merged("stats.arenas.%u.pdirty", narenas, sizeof(size_t));
    expect_merged("stats.arenas.%u.mapped", narenas, sizeof(size_t));
    expect_merged("stats.arenas.%u.small.allocated", narenas, sizeof(size_t));
    expect_merged("stats.arenas.%u.large.allocated", narenas, sizeof(size_t));
    expect_merged("stats.arenas.%u.small.nmalloc", narenas, sizeof(uint64_t));
    expect_merged("stats.arenas.%u.large.ndalloc", narenas, sizeof(uint64_t));
    expect_merged("stats.arenas.%u.nthreads", narenas, sizeof(unsigned));
    expect_merged("stats.arenas.%u.bins.3.nmalloc", narenas, sizeof(uint64_t));
    expect_merged("stats.arenas.%u.bins.3.curregs", narenas, sizeof(size_t));
    expect_merged("stats.arenas.%u.lextents.2.nmalloc", narenas, sizeof(uint64_t));
    expect_merged("stats.arenas.%u.lextents.2.curlextents", narenas, sizeof(size_t));
    EXPECT_GE_U(read_size("stats.arenas.4096.small.allocated"), 400);
    ssize_t dms = 0;
    size_t dlen = sizeof dms;
    EXPECT_EQ_I(mallctl("stats.arenas.4096.dirty_decay_ms", &dms, &dlen, NULL, 0), 0);
    EXPECT_EQ_I(mallctl("stats.arenas.4096.bins.100000.nmalloc", &dms, &dlen, NULL, 0), ENOENT);
    EXPECT_EQ_I(mallctl("stats.arenas.4097.pactive", &dms, &dlen, NULL, 0), ENOENT);
    dallocx(a, 0), dallocx(b, 0), free(c), free(d);
    /* purge of all: every arena's dirty pages go */
    EXPECT_EQ_I(mallctl("arena.4096.purge", NULL, NULL, NULL, 0), 0);
    refresh();
    EXPECT_EQ_U(read_size("stats.arenas.4096.pdirty"), 0);
    EXPECT_EQ_I(mallctl("arena.4096.decay", NULL, NULL, NULL, 0), 0);
    /* jemalloc's older spelling of all: arena.<narenas>.purge */
    char name[48];
    EXPECT_EQ_I(mallctl("arenas.narenas", &narenas, &nlen, NULL, 0), 0);
    snprintf(name, sizeof name, "arena.%u.purge", narenas);
    EXPECT_EQ_I(mallctl(name, NULL, NULL, NULL, 0), 0);
    EXPECT_EQ_I(mallctl("arena.4096.purge", &narenas, &nlen, NULL, 0), EINVAL);
}

static void collect(void *opaque, const char *text)
{
    size_t *n = opaque;
    if (*n == 0 && text[0] != '\0')
        *n = (size_t)(unsigned char)text[0] << 8 | (strstr(text, "dpmalloc") != NULL);
}

TEST(stats_print)
{
    size_t first = 0;
    malloc_stats_print(collect, &first, NULL);
    EXPECT_EQ_U(first & 1, 1);   /* dpmalloc's report */
    first = 0;
    malloc_stats_print(collect, &first, "J");
    EXPECT_EQ_U(first >> 8, '{');
}

static int bad_sdallocx(void *arg)
{
    (void)arg;
    void *p = mallocx(100, 0);
    fprintf(stderr, "ptr %p\n", p);
    sdallocx(p, sallocx(p, 0) + 64, 0);
    return 0;
}

static int foreign_dallocx(void *arg)
{
    (void)arg;
    static char not_ours[64];
    fprintf(stderr, "ptr %p\n", (void *)not_ours);
    dallocx(not_ours, 0);
    return 0;
}

static void expect_abort_naming(int (*fn)(void *), const char *call)
{
    struct test_child ch;
    EXPECT_EQ_I(test_run_child(fn, NULL, &ch, 30), 0);
    EXPECT_TRUE(WIFSIGNALED(ch.status) && WTERMSIG(ch.status) == SIGABRT);
    char ptr[32] = "";
    sscanf(ch.err, "ptr %31s", ptr);
    if (strstr(ch.err, call) == NULL || ptr[0] == '\0' || strstr(strchr(ch.err, '\n'), ptr) == NULL)
        TEST_FAIL("want a message naming %s and %s, got: %s", call, ptr, ch.err);
}

TEST(misuse_aborts)
{
    expect_abort_naming(bad_sdallocx, "sdallocx()");
    expect_abort_naming(foreign_dallocx, "dallocx()");
}

/* ---- options in jemalloc's dialect ---- */

static void run_opts(const char *env, char *out, size_t n)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "env -u DPMALLOC_CONF -u MALLOC_CONF %s /proc/%d/exe opts 2>&1", env, (int)getpid());
    FILE *f = popen(cmd, "r");
    size_t got = f != NULL ? fread(out, 1, n - 1, f) : 0;
    out[got] = '\0';
    if (f != NULL)
        pclose(f);
}

static int count_lines(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

static int print_opts(void)
{
    unsigned narenas;
    size_t ulen = sizeof narenas, tmax, zlen = sizeof tmax;
    ssize_t dirty, muzzy;
    size_t slen = sizeof dirty;
    bool junk, tcache;
    size_t blen = sizeof junk;
    if (mallctl("opt.narenas", &narenas, &ulen, NULL, 0) || mallctl("opt.tcache_max", &tmax, &zlen, NULL, 0) ||
        mallctl("opt.dirty_decay_ms", &dirty, &slen, NULL, 0) ||
        mallctl("opt.muzzy_decay_ms", &muzzy, &slen, NULL, 0) || mallctl("opt.junk", &junk, &blen, NULL, 0) ||
        mallctl("opt.tcache", &tcache, &blen, NULL, 0))
        return 1;
    printf("narenas=%u tcache_max=%zu dirty=%zd muzzy=%zd junk=%d tcache=%d\n", narenas, tmax, dirty, muzzy,
           (int)junk, (int)tcache);
    return 0;
}

TEST(malloc_conf_dialect)
{
    char out[4096];
    run_opts("", out, sizeof out);
    /* the program's malloc_conf: muzzy_decay_ms:777 */
    EXPECT_TRUE(strstr(out, "muzzy=777") != NULL && strstr(out, "dpmalloc:") == NULL);
    run_opts("MALLOC_CONF=narenas:3,dirty_decay_ms:1234,lg_tcache_max:16,junk:alloc,tcache:false", out, sizeof out);
    if (strstr(out, "narenas=3 tcache_max=65536 dirty=1234 muzzy=777 junk=1 tcache=0") == NULL ||
        strstr(out, "dpmalloc:") != NULL)
        TEST_FAIL("mapped names: %s", out);
    /* lg_tcache_max past the bound of tcache_max (8 MiB), or no number:
     * a warning, the default kept (never tcache_max:N bytes) */
    run_opts("MALLOC_CONF=lg_tcache_max:23", out, sizeof out);
    if (strstr(out, "tcache_max=8388608 ") == NULL || strstr(out, "dpmalloc:") != NULL)
        TEST_FAIL("lg_tcache_max:23: %s", out);
    static const struct {
        const char *env, *applied, *warning;
    } refused[] = {
        {"MALLOC_CONF=lg_tcache_max:48", "tcache_max=4194304 ",
         "dpmalloc: bad value for option tcache_max:281474976710656 (ignored, default kept)\n"},
        {"MALLOC_CONF=lg_tcache_max:100,narenas:2", "narenas=2 tcache_max=4194304 ",
         "dpmalloc: bad value for option lg_tcache_max:100 (ignored, default kept)\n"},
        {"MALLOC_CONF=lg_tcache_max:x", "tcache_max=4194304 ",
         "dpmalloc: bad value for option lg_tcache_max:x (ignored, default kept)\n"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        run_opts(refused[i].env, out, sizeof out);
        if (strstr(out, refused[i].applied) == NULL || count_lines(out, refused[i].warning) != 1)
            TEST_FAIL("%s: %s", refused[i].env, out);
    }
    run_opts("MALLOC_CONF=tcache_max:32768,muzzy_decay_ms:5,junk:false", out, sizeof out);
    if (strstr(out, "tcache_max=32768 dirty=10000 muzzy=5 junk=0") == NULL)
        TEST_FAIL("same names: %s", out);
    /* a name dpmalloc has not: one warning line each, the rest applied */
    run_opts("MALLOC_CONF=abort_conf:true,narenas:2,retain:false,metadata_thp:auto", out, sizeof out);
    if (count_lines(out, "dpmalloc: unknown option abort_conf:true (ignored, default kept)\n") != 1 ||
        count_lines(out, "dpmalloc: unknown option retain:false (ignored, default kept)\n") != 1 ||
        count_lines(out, "dpmalloc: unknown option metadata_thp:auto (ignored, default kept)\n") != 1 ||
        count_lines(out, "dpmalloc:") != 3 || strstr(out, "narenas=2 ") == NULL)
        TEST_FAIL("unknown names: %s", out);
    /* a bad value of a known name: conf_parse's warning */
    run_opts("MALLOC_CONF=narenas:lots", out, sizeof out);
    EXPECT_EQ_I(count_lines(out, "dpmalloc: bad value for option narenas:lots"), 1);
    /* dpmalloc's own names are not jemalloc's */
    run_opts("MALLOC_CONF=percpu:false", out, sizeof out);
    EXPECT_EQ_I(count_lines(out, "dpmalloc: unknown option percpu:false"), 1);
    /* DPMALLOC_CONF set: MALLOC_CONF is not read at all */
    run_opts("MALLOC_CONF=narenas:3,abort_conf:true DPMALLOC_CONF=narenas:5", out, sizeof out);
    if (strstr(out, "narenas=5 ") == NULL || strstr(out, "dpmalloc:") != NULL)
        TEST_FAIL("DPMALLOC_CONF over MALLOC_CONF: %s", out);
    run_opts("MALLOC_CONF=muzzy_decay_ms:9", out, sizeof out);   /* the environment over the program */
    EXPECT_TRUE(strstr(out, "muzzy=9 ") != NULL);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "opts") == 0)
        return print_opts();
    RUN(flag_values);
    RUN(mallocx_align_and_nallocx);
    RUN(nallocx_sweep_all_paths);
    RUN(failures_set_errno);
    RUN(zero_flag);
    RUN(rallocx_keeps_and_zeroes);
    RUN(xallocx_in_place_only);
    RUN(xallocx_unchanged_then_sized_free);
    RUN(arena_and_tcache_flags);
    RUN(mallctl_is_dpm_ctl);
    RUN(mib_round_trips);
    RUN(mib_errors);
    RUN(arenas_all);
    RUN(stats_print);
    RUN(misuse_aborts);
    RUN(malloc_conf_dialect);
    return test_done();
}
