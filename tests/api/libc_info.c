/*
 * libc_info.c - glibc's heap questions answered by dpmalloc (static link,
 * and LD_PRELOAD in the *_preload build): mallinfo2/mallinfo see the
 * program's allocations (~150 MiB in 1000 x 100 KiB + one 50 MiB block)
 * and fall back after they are freed; mallinfo saturates at INT_MAX;
 * malloc_stats prints arenas and totals on stderr; malloc_info writes XML
 * that python's xml.etree parses, per arena, with a manual arena's odd
 * name escaped, and answers EINVAL for options != 0; mallopt applies
 * M_ARENA_MAX (only while arena 0 alone exists) and M_MMAP_THRESHOLD
 * (opt.oversize_threshold), read back through dpm_ctl, and returns 0 for
 * every other parameter; cfree and the __libc_* names are dpmalloc's.
 * docs/libc.md documents each mapping checked here.
 */
#include "override.h"

#include <dpmalloc.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

/* glibc's own names (not declared by its headers); cfree is a
 * compatibility symbol that a new program cannot link against. */
void *__libc_malloc(size_t size);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t size);
void __libc_free(void *p);
void *__libc_memalign(size_t align, size_t size);
void *__libc_valloc(size_t size);
void *__libc_pvalloc(size_t size);

typedef int (*ctl_fn)(const char *, void *, size_t *, void *, size_t);
typedef size_t (*usable_fn)(const void *);
#ifdef TEST_PRELOAD
#define DPM_CTL ((ctl_fn)dlsym(RTLD_DEFAULT, "dpm_ctl"))
#define DPM_USABLE ((usable_fn)dlsym(RTLD_DEFAULT, "dpm_usable_size"))
#else
#define DPM_CTL dpm_ctl
#define DPM_USABLE dpm_usable_size
#endif

/* mallinfo is deprecated in glibc's header: called through a pointer. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static struct mallinfo (*volatile mallinfo_fn)(void) = mallinfo;
#pragma GCC diagnostic pop

static size_t ctl_size(const char *name)
{
    size_t v = 0, len = sizeof(v);
    int rc = DPM_CTL(name, &v, &len, NULL, 0);
    if (rc != 0)
        TEST_FAIL("dpm_ctl(%s) = %d", name, rc);
    return v;
}

static unsigned ctl_narenas(void)
{
    unsigned v = 0;
    size_t len = sizeof(v);
    EXPECT_EQ_I(DPM_CTL("arenas.narenas", &v, &len, NULL, 0), 0);
    return v;
}

TEST(entries_overridden)
{
    test_expect_override();
    test_expect_entry_overridden("mallinfo2", (void *)mallinfo2);
    test_expect_entry_overridden("mallinfo", (void *)mallinfo_fn);
    test_expect_entry_overridden("malloc_stats", (void *)malloc_stats);
    test_expect_entry_overridden("malloc_info", (void *)malloc_info);
    test_expect_entry_overridden("mallopt", (void *)mallopt);
    test_expect_entry_overridden("__libc_malloc", (void *)__libc_malloc);
    test_expect_entry_overridden("__libc_calloc", (void *)__libc_calloc);
    test_expect_entry_overridden("__libc_realloc", (void *)__libc_realloc);
    test_expect_entry_overridden("__libc_free", (void *)__libc_free);
    test_expect_entry_overridden("__libc_memalign", (void *)__libc_memalign);
    test_expect_entry_overridden("__libc_valloc", (void *)__libc_valloc);
    test_expect_entry_overridden("__libc_pvalloc", (void *)__libc_pvalloc);
#ifdef TEST_PRELOAD
    test_expect_entry_overridden("cfree", dlsym(RTLD_DEFAULT, "cfree"));
    test_expect_entry_overridden("dpm_good_size", dlsym(RTLD_DEFAULT, "dpm_good_size"));
#endif
}

static void *worker(void *arg)
{
    free(malloc((size_t)(uintptr_t)arg));
    return NULL;
}

/* First, while only arena 0 exists (no other thread has allocated yet). */
TEST(mallopt_arena_max)
{
    EXPECT_EQ_I(mallopt(M_ARENA_MAX, 0), 0);
    EXPECT_EQ_I(mallopt(M_ARENA_MAX, -4), 0);
    EXPECT_EQ_I(mallopt(M_ARENA_MAX, 3), 1);
    EXPECT_EQ_U(ctl_narenas(), 3);
    EXPECT_EQ_I(mallopt(M_ARENA_MAX, 2), 1);
    EXPECT_EQ_U(ctl_narenas(), 2);
    /* threads now spread over the 2 arenas, and no more are made */
    pthread_t t[8];
    for (int i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(64 + i));
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    EXPECT_EQ_U(ctl_narenas(), 2);
    /* arena 1 exists: too late to change */
    EXPECT_EQ_I(mallopt(M_ARENA_MAX, 6), 0);
    EXPECT_EQ_U(ctl_narenas(), 2);
}

TEST(mallopt_mmap_threshold)
{
    size_t old = ctl_size("opt.oversize_threshold");
    EXPECT_EQ_I(mallopt(M_MMAP_THRESHOLD, 1 << 20), 1);
    EXPECT_EQ_U(ctl_size("opt.oversize_threshold"), 1 << 20);
    EXPECT_EQ_I(mallopt(M_MMAP_THRESHOLD, -1), 0);
    EXPECT_EQ_U(ctl_size("opt.oversize_threshold"), 1 << 20);
    EXPECT_EQ_I(mallopt(M_MMAP_THRESHOLD, 0), 1);
    EXPECT_EQ_U(ctl_size("opt.oversize_threshold"), 1);
    /* blocks still come and go with every block purged at free */
    void *p = malloc(5 << 20);
    EXPECT_NONNULL(p);
    free(p);
    EXPECT_EQ_I(mallopt(M_MMAP_THRESHOLD, (int)old), 1);
    EXPECT_EQ_U(ctl_size("opt.oversize_threshold"), old);
}

TEST(mallopt_others_refused)
{
    static const int params[] = {M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_MAX, M_CHECK_ACTION,
                                 M_PERTURB, M_ARENA_TEST, M_MXFAST, 12345};
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++)
        if (mallopt(params[i], 1) != 0)
            TEST_FAIL("mallopt(%d, 1) accepted", params[i]);
}

static void expect_mallinfo_consistent(const struct mallinfo2 *m)
{
    EXPECT(m->arena >= m->uordblks, "arena %zu < uordblks %zu", m->arena, m->uordblks);
    EXPECT_EQ_U(m->fordblks, m->arena - m->uordblks);
    EXPECT_EQ_U(m->hblks, 0);
    EXPECT_EQ_U(m->hblkhd, 0);
    EXPECT_EQ_U(m->usmblks, 0);
    EXPECT(m->keepcost <= m->fordblks, "keepcost %zu > fordblks %zu", m->keepcost, m->fordblks);
}

TEST(mallinfo2_sees_allocations)
{
    enum { N = 1000 };
    static void *blocks[N];
    const size_t small = 100 << 10, big = (size_t)50 << 20;
    struct mallinfo2 m0 = mallinfo2();
    expect_mallinfo_consistent(&m0);
    size_t usable = 0;
    for (int i = 0; i < N; i++) {
        blocks[i] = malloc(small);
        EXPECT_NONNULL(blocks[i]);
        usable += malloc_usable_size(blocks[i]);
    }
    void *b = malloc(big);
    EXPECT_NONNULL(b);
    usable += malloc_usable_size(b);
    const size_t requested = N * small + big;
    struct mallinfo2 m1 = mallinfo2();
    expect_mallinfo_consistent(&m1);
    size_t grew = m1.uordblks - m0.uordblks;
    fprintf(stderr, "requested %zu, usable %zu, uordblks %zu -> %zu (+%zu), arena %zu\n", requested,
            usable, m0.uordblks, m1.uordblks, grew, m1.arena);
    /* the growth is the blocks' usable bytes (class rounding: <= 12.5 %
     * over the request for these sizes) */
    EXPECT(grew + usable / 100 >= usable && grew <= usable + usable / 100,
           "uordblks grew by %zu for %zu usable bytes", grew, usable);
    EXPECT(grew >= requested && grew <= requested + requested / 8, "uordblks grew by %zu for %zu requested",
           grew, requested);
    EXPECT(m1.arena >= m0.arena + requested, "arena %zu -> %zu", m0.arena, m1.arena);
    /* as stats.allocated says after an epoch */
    uint64_t epoch = 1;
    size_t len = sizeof(epoch);
    EXPECT_EQ_I(DPM_CTL("epoch", &epoch, &len, &epoch, sizeof(epoch)), 0);
    size_t allocated = ctl_size("stats.allocated");
    EXPECT_EQ_U(mallinfo2().uordblks, allocated);
    /* mallinfo: the same in int fields */
    struct mallinfo mi = mallinfo_fn();
    EXPECT_EQ_U((size_t)mi.uordblks, m1.uordblks);
    EXPECT_EQ_U((size_t)mi.arena, m1.arena);
    for (int i = 0; i < N; i++)
        free(blocks[i]);
    free(b);
    struct mallinfo2 m2 = mallinfo2();
    expect_mallinfo_consistent(&m2);
    EXPECT(m2.uordblks < m0.uordblks + (1 << 20), "uordblks %zu after freeing, %zu before", m2.uordblks,
           m0.uordblks);
    /* blocks kept in the thread cache for reuse are counted as free */
    EXPECT(m2.fsmblks + m2.fordblks >= m2.fsmblks, "fsmblks %zu", m2.fsmblks);
}

TEST(mallinfo_saturates)
{
    size_t n = (size_t)3 << 30;   /* mapped, never touched */
    void *p = malloc(n);
    if (p == NULL) {
        fprintf(stderr, "no 3 GiB of address space: skipped\n");
        return;
    }
    struct mallinfo mi = mallinfo_fn();
    struct mallinfo2 m2 = mallinfo2();
    EXPECT(m2.uordblks >= n, "uordblks %zu", m2.uordblks);
    EXPECT_EQ_I(mi.uordblks, INT_MAX);
    EXPECT_EQ_I(mi.arena, INT_MAX);
    free(p);
}

/* Runs fn with stderr (fd 2) sent to a temporary file; returns its text. */
static char *capture_stderr(void (*fn)(void))
{
    FILE *tmp = tmpfile();
    if (tmp == NULL)
        return NULL;
    fflush(stderr);
    int saved = dup(2);
    dup2(fileno(tmp), 2);
    fn();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    long len = ftell(tmp) >= 0 ? lseek(fileno(tmp), 0, SEEK_END) : 0;
    char *text = calloc(1, (size_t)len + 1);
    if (text != NULL && pread(fileno(tmp), text, (size_t)len, 0) != len)
        text[0] = 0;
    fclose(tmp);
    return text;
}

TEST(malloc_stats_summary)
{
    void *p = malloc(10 << 20);
    EXPECT_NONNULL(p);
    char *text = capture_stderr(malloc_stats);
    EXPECT_NONNULL(text);
    if (text == NULL)
        return;
    fprintf(stderr, "%s", text);
    EXPECT(strstr(text, "Arena 0:\nsystem bytes     = ") != NULL, "no arena 0 in: %s", text);
    const char *total = strstr(text, "Total:\nsystem bytes     = ");
    EXPECT(total != NULL, "no totals in: %s", text);
    const char *inuse = total ? strstr(total, "in use bytes     = ") : NULL;
    EXPECT(inuse != NULL, "no in-use line in: %s", text);
    if (inuse != NULL) {
        size_t v = strtoull(inuse + strlen("in use bytes     = "), NULL, 10);
        EXPECT(v >= (10 << 20), "in use bytes %zu with a 10 MiB block live", v);
    }
    free(text);
    free(p);
}

static const char *python(void)
{
    return access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
}

TEST(malloc_info_xml)
{
    EXPECT_EQ_I(malloc_info(1, stdout), EINVAL);
    unsigned idx = 0;
    size_t len = sizeof(idx);
    const char *name = "odd<&\"'>name";
    EXPECT_EQ_I(DPM_CTL("arenas.create", &idx, &len, &name, sizeof(name)), 0);
    void *p = malloc(3 << 20);
    char path[] = "/tmp/dpm_malloc_info_XXXXXX";
    int fd = mkstemp(path);
    EXPECT(fd >= 0, "mkstemp: %s", strerror(errno));
    FILE *f = fdopen(fd, "w");
    EXPECT_EQ_I(malloc_info(0, f), 0);
    fclose(f);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "%s -c 'import sys, xml.etree.ElementTree as ET\n"
             "r = ET.parse(sys.argv[1]).getroot()\n"
             "assert r.tag == \"malloc\" and r.get(\"version\").startswith(\"dpmalloc-\"), r.attrib\n"
             "heaps = r.findall(\"heap\")\n"
             "assert heaps and heaps[0].get(\"nr\") == \"0\", heaps\n"
             "assert any(h.get(\"name\") == sys.argv[2] and h.get(\"manual\") == \"1\" for h in heaps), [h.attrib for h in heaps]\n"
             "tot = {t.get(\"type\"): int(t.get(\"size\")) for t in r.findall(\"total\")}\n"
             "assert tot[\"allocated\"] >= 3 << 20, tot\n"
             "sysb = {t.get(\"type\"): int(t.get(\"size\")) for t in r.findall(\"system\")}\n"
             "assert sysb[\"current\"] >= tot[\"allocated\"], (sysb, tot)\n"
             "for h in heaps:\n"
             "    for s in h.find(\"sizes\"):\n"
             "        assert int(s.get(\"from\")) <= int(s.get(\"to\")) and int(s.get(\"count\")) > 0, s.attrib\n"
             "print(\"malloc_info: %%d heaps, allocated %%d\" %% (len(heaps), tot[\"allocated\"]))' %s '%s'",
             python(), path, "odd<&\"'\"'\"'>name");
    int rc = system(cmd);
    EXPECT(rc == 0, "python rejected malloc_info output (status %d): see %s", rc, path);
    if (rc == 0)
        unlink(path);
    free(p);
}

TEST(libc_names_are_dpmalloc)
{
    struct mallinfo2 m0 = mallinfo2();
    void *a = __libc_malloc(8 << 20);
    EXPECT_NONNULL(a);
    struct mallinfo2 m1 = mallinfo2();
    EXPECT(m1.uordblks >= m0.uordblks + (8 << 20), "uordblks %zu -> %zu after __libc_malloc(8 MiB)", m0.uordblks,
           m1.uordblks);
    EXPECT_GE_U(DPM_USABLE(a), 8 << 20);
    unsigned char *c = __libc_calloc(1000, 10);
    EXPECT_NONNULL(c);
    EXPECT_TRUE(c && test_all_zero(c, 10000));
    EXPECT_GE_U(DPM_USABLE(c), 10000);
    c = __libc_realloc(c, 50000);
    EXPECT_NONNULL(c);
    EXPECT_GE_U(DPM_USABLE(c), 50000);
    void *m = __libc_memalign(4096, 100);
    EXPECT_ALIGNED(m, 4096);
    EXPECT_GE_U(DPM_USABLE(m), 100);
    void *v = __libc_valloc(100);
    EXPECT_ALIGNED(v, (size_t)sysconf(_SC_PAGESIZE));
    void *pv = __libc_pvalloc(100);
    EXPECT_ALIGNED(pv, (size_t)sysconf(_SC_PAGESIZE));
    EXPECT_GE_U(DPM_USABLE(pv), (size_t)sysconf(_SC_PAGESIZE));
    __libc_free(a);
    __libc_free(c);
    free(m);
    __libc_free(v);
#ifdef TEST_PRELOAD
    void (*cfree_fn)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT, "cfree");
#else
    extern void cfree(void *);
    void (*cfree_fn)(void *) = cfree;
#endif
    cfree_fn(pv);
    struct mallinfo2 m2 = mallinfo2();
    EXPECT(m2.uordblks < m0.uordblks + (1 << 20), "uordblks %zu after the frees, %zu before", m2.uordblks,
           m0.uordblks);
}

int main(void)
{
    RUN(entries_overridden);
    RUN(mallopt_arena_max);
    RUN(mallopt_mmap_threshold);
    RUN(mallopt_others_refused);
    RUN(mallinfo2_sees_allocations);
    RUN(mallinfo_saturates);
    RUN(malloc_stats_summary);
    RUN(malloc_info_xml);
    RUN(libc_names_are_dpmalloc);
    return test_done();
}
