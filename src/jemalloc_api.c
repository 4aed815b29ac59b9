/*
 * jemalloc_api.c - jemalloc 5.3's non-standard entry points under their
 * own names (include/dpmalloc/jemalloc.h): mallocx and its family over
 * the allocation impls of alloc.c, mallctl and its MIB forms over dpm_ctl,
 * malloc_stats_print over dpm_stats_print. Exported by the overriding
 * libraries only (DPM_OVERRIDE_LIBC), like the libc names: a program that
 * links libdpmalloc_plain next to libjemalloc keeps jemalloc's.
 *
 * May call: alloc (the impls), ctl (the node table, to build MIBs),
 * dpm_ctl, dpm_stats_print, arena (arena_get for MALLOCX_ARENA).
 */
#include "alloc.h"
#include "ctl.h"

#include <dpmalloc.h>
#include <dpmalloc/jemalloc.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#if DPM_OVERRIDE_LIBC

/* ---- flags --------------------------------------------------------------- */

typedef struct xflags {
    size_t align;      /* 0: none asked */
    bool zero;
    bool no_cache;     /* MALLOCX_TCACHE_NONE */
    int arena;         /* -1: none asked */
    bool bad;          /* an explicit tcache id: tcache.create's, which dpmalloc has not */
} xflags_t;

static xflags_t decode(int flags)
{
    unsigned f = (unsigned)flags;
    xflags_t x = {0};
    unsigned lg = f & 0x3f;
    x.align = lg == 0 ? 0 : lg < 63 ? (size_t)1 << lg : 0;
    x.bad = lg >= 63 || (lg != 0 && x.align > DPM_MAX_ALIGN);
    x.zero = (f & MALLOCX_ZERO) != 0;
    unsigned tc = (f >> 8) & 0xfff;
    x.no_cache = tc == 1;
    x.bad |= tc > 1;
    x.arena = (int)((f >> 20) & 0xfff) - 1;
    return x;
}

static void *fail(int err)
{
    errno = err;
    return NULL;
}

/* size 0 is undefined in jemalloc: taken as 1 here, everywhere alike */
static size_t nonzero(size_t size) { return size == 0 ? 1 : size; }

static void zero_tail(void *p, size_t from)
{
    size_t u = usable_size_impl(p, "mallocx");
    if (u > from)
        memset((char *)p + from, 0, u - from);
}

/* A block from arena index `arena`, or from the thread's arena past every
 * cache (MALLOCX_TCACHE_NONE). dpm_malloc_arena takes the arena's bins
 * and pages directly. */
static void *uncached_block(const xflags_t *x, size_t size)
{
    unsigned index;
    if (x->arena >= 0) {
        index = (unsigned)x->arena;
    } else {
        arena_t *a = thread_arena();
        if (a == NULL)
            return fail(ENOMEM);
        index = a->index;
    }
    void *p = dpm_malloc_arena(index, size, x->align);
    if (p != NULL && x->zero)
        zero_tail(p, 0);
    return p;
}

static void *xalloc(size_t size, const xflags_t *x)
{
    if (x->bad)
        return fail(EINVAL);
    if (x->arena >= 0 || x->no_cache)
        return uncached_block(x, size);
    void *p = x->align > QUANTUM ? aligned_at_impl(size, x->align, 0, x->zero)
              : x->zero          ? calloc_impl(1, size)
                                 : alloc_fast(size);
    if (p != NULL && x->zero)
        zero_tail(p, size);   /* jemalloc zeroes the usable bytes */
    return p;
}

DPM_EXPORT void *mallocx(size_t size, int flags)
{
    xflags_t x = decode(flags);
    return xalloc(nonzero(size), &x);
}

DPM_EXPORT void *rallocx(void *p, size_t size, int flags)
{
    xflags_t x = decode(flags);
    size = nonzero(size);
    if (p == NULL)
        return xalloc(size, &x);
    if (x.bad)
        return fail(EINVAL);
    size_t old = usable_size_impl(p, "rallocx");
    void *q;
    if (x.arena >= 0 || x.no_cache) {
        /* to the arena asked for, past the caches: a new block */
        q = uncached_block(&x, size);
        if (q == NULL)
            return NULL;
        memcpy(q, p, old < size ? old : size);
        free_fast(p, "rallocx");
    } else {
        q = realloc_aligned_impl(p, size, x.align > QUANTUM ? x.align : QUANTUM, "rallocx");
        if (q == NULL)
            return NULL;
    }
    if (x.zero)
        zero_tail(q, old);   /* the bytes past the old usable size */
    return q;
}

DPM_EXPORT size_t xallocx(void *p, size_t size, size_t extra, int flags)
{
    xflags_t x = decode(flags);
    if (p == NULL)
        return 0;
    size_t old = usable_size_impl(p, "xallocx");
    if (x.align > 1 && ((uintptr_t)p & (x.align - 1)) != 0)
        return old;   /* it could not stay where it is */
    size_t now = resize_in_place_impl(p, nonzero(size), extra, "xallocx");
    if (x.zero && now > old)
        memset((char *)p + old, 0, now - old);
    return now;
}

DPM_EXPORT size_t sallocx(const void *p, int flags)
{
    (void)flags;
    return usable_size_impl(p, "sallocx");
}

/* The caches the flags name are no matter to a free: the block goes
 * wherever free sends it. */
DPM_EXPORT void dallocx(void *p, int flags)
{
    (void)flags;
    free_fast(p, "dallocx");
}

DPM_EXPORT void sdallocx(void *p, size_t size, int flags)
{
    (void)flags;
    free_sized_impl(p, size, "sdallocx");
}

DPM_EXPORT size_t nallocx(size_t size, int flags)
{
    xflags_t x = decode(flags);
    if (x.bad)
        return 0;
    /* the same choice of path as xalloc's: the arena's bins and pages,
     * or the caches */
    if (x.arena >= 0 || x.no_cache)
        return arena_usable_impl(nonzero(size), x.align > QUANTUM ? x.align : QUANTUM);
    return aligned_usable_impl(nonzero(size), x.align > QUANTUM ? x.align : 1);
}

/* ---- mallctl and MIBs ---------------------------------------------------- */

DPM_EXPORT int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen)
{
    return dpm_ctl(name, oldp, oldlenp, newp, newlen);
}

/* A MIB has one size_t per dotted component: a numeric component (a '#'
 * in the node's pattern) holds its number, a word the word's index in
 * the table below, which lists every word of every pattern once. Which
 * of the two a component is follows from the components before it, as
 * in the patterns. */
#define MIB_MAX_WORDS 1024
#define MIB_MAX_DEPTH 8
#define MIB_NAME_MAX 256

typedef struct word {
    const char *p;
    size_t len;
} word_t;

static word_t words[MIB_MAX_WORDS];
static unsigned nwords;
static pthread_once_t words_once = PTHREAD_ONCE_INIT;

static size_t component_len(const char *s) { return strcspn(s, "."); }

static unsigned word_index(const char *p, size_t len)
{
    for (unsigned i = 0; i < nwords; i++)
        if (words[i].len == len && memcmp(words[i].p, p, len) == 0)
            return i;
    return MIB_MAX_WORDS;
}

static void build_words(void)
{
    unsigned n = ctl_node_count();
    for (unsigned i = 0; i < n; i++) {
        for (const char *s = ctl_node_at(i)->pattern; *s != '\0';) {
            size_t len = component_len(s);
            if (!(len == 1 && *s == '#') && word_index(s, len) == MIB_MAX_WORDS && nwords < MIB_MAX_WORDS)
                words[nwords++] = (word_t){s, len};
            s += len + (s[len] == '.');
        }
    }
}

/* Whether pattern's first n components agree with mib[0..n-1]; *next:
 * its component n ("" past its end). */
static bool pattern_agrees(const char *pattern, const size_t *mib, size_t n, const char **next)
{
    const char *s = pattern;
    for (size_t k = 0; k < n; k++) {
        if (*s == '\0')
            return false;
        size_t len = component_len(s);
        bool numeric = len == 1 && *s == '#';
        if (!numeric && (mib[k] >= nwords || words[mib[k]].len != len || memcmp(words[mib[k]].p, s, len) != 0))
            return false;
        s += len + (s[len] == '.');
    }
    *next = s;
    return true;
}

/* What component k is after mib[0..k-1] in some pattern: 1 a number,
 * 0 the word (p, len), -1 neither. */
static int component_kind(const size_t *mib, size_t k, const char *p, size_t len)
{
    unsigned n = ctl_node_count();
    int kind = -1;
    for (unsigned i = 0; i < n && kind != 0; i++) {
        const char *next;
        if (!pattern_agrees(ctl_node_at(i)->pattern, mib, k, &next) || *next == '\0')
            continue;
        size_t nlen = component_len(next);
        if (nlen == 1 && *next == '#')
            kind = 1;
        else if (nlen == len && memcmp(next, p, len) == 0)
            kind = 0;
    }
    return kind;
}

static bool all_digits(const char *p, size_t len)
{
    if (len == 0 || len > 19)
        return false;
    for (size_t i = 0; i < len; i++)
        if (p[i] < '0' || p[i] > '9')
            return false;
    return true;
}

DPM_EXPORT int mallctlnametomib(const char *name, size_t *mibp, size_t *miblenp)
{
    if (name == NULL || mibp == NULL || miblenp == NULL)
        return EINVAL;
    if (!dpm_ready())
        return EAGAIN;
    pthread_once(&words_once, build_words);
    /* as jemalloc's: a *miblenp shorter than the name gives a partial MIB
     * of its first *miblenp components (the rest not looked at), to be
     * completed by the caller */
    size_t mib[MIB_MAX_DEPTH], k = 0;
    for (const char *s = name;; k++) {
        if (k == *miblenp) {
            memcpy(mibp, mib, k * sizeof(size_t));
            return 0;
        }
        size_t len = component_len(s);
        if (k == MIB_MAX_DEPTH)
            return ENOENT;
        unsigned w = word_index(s, len);
        int kind = component_kind(mib, k, s, len);
        if (kind == 0 && w < MIB_MAX_WORDS) {
            mib[k] = w;
        } else if (kind == 1 && all_digits(s, len)) {
            size_t v = 0;
            for (size_t i = 0; i < len; i++)
                v = v * 10 + (size_t)(s[i] - '0');
            mib[k] = v;
        } else {
            return ENOENT;
        }
        if (s[len] == '\0')
            break;
        s += len + 1;
    }
    memcpy(mibp, mib, (k + 1) * sizeof(size_t));
    *miblenp = k + 1;
    return 0;
}

DPM_EXPORT int mallctlbymib(const size_t *mibp, size_t miblen, void *oldp, size_t *oldlenp, void *newp,
                            size_t newlen)
{
    if (mibp == NULL || miblen == 0 || miblen > MIB_MAX_DEPTH)
        return mibp == NULL ? EINVAL : ENOENT;
    if (!dpm_ready())
        return EAGAIN;
    pthread_once(&words_once, build_words);
    unsigned n = ctl_node_count();
    for (unsigned i = 0; i < n; i++) {
        const char *pattern = ctl_node_at(i)->pattern, *end;
        if (!pattern_agrees(pattern, mibp, miblen, &end) || *end != '\0')
            continue;
        /* the name the MIB stands for, in this pattern's words */
        char name[MIB_NAME_MAX];
        size_t at = 0;
        const char *s = pattern;
        for (size_t k = 0; k < miblen; k++) {
            size_t len = component_len(s);
            int w = len == 1 && *s == '#' ? snprintf(name + at, sizeof(name) - at, "%zu", mibp[k])
                                          : snprintf(name + at, sizeof(name) - at, "%.*s", (int)len, s);
            if (w < 0 || (size_t)w >= sizeof(name) - at - 1)
                return ENOENT;
            at += (size_t)w;
            name[at++] = k + 1 < miblen ? '.' : '\0';
            s += len + (s[len] == '.');
        }
        return dpm_ctl(name, oldp, oldlenp, newp, newlen);
    }
    return ENOENT;
}

/* ---- statistics ---------------------------------------------------------- */

/* jemalloc's letters mean the same here (J, g, m, a, b, l, x); d (destroyed
 * arenas), e (extents) and h (HPA) name sections dpmalloc has not. */
DPM_EXPORT void malloc_stats_print(void (*write_cb)(void *, const char *), void *cbopaque, const char *opts)
{
    dpm_stats_print(write_cb, cbopaque, opts);
}

#endif
