/*
 * ops.c - the operation table: every allocation entry point, with the
 * checks each one's contract allows (alignment, usable size, zeroing,
 * the arena a block comes from, realloc keeping the prefix).
 */
#include "fuzz.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#if FUZZ_LIBC
#include <malloc.h>
#include <stdlib.h>
/* C23 names that glibc 2.36 does not declare; dpmalloc exports them. */
void free_sized(void *p, size_t size);
void free_aligned_sized(void *p, size_t align, size_t size);
#endif

const char *const op_names[OP_NKINDS] = {
    [OP_MALLOC] = "malloc",
    [OP_CALLOC] = "calloc",
    [OP_REALLOC] = "realloc",
    [OP_FREE] = "free",
    [OP_FREE_SIZED] = "free_sized",
    [OP_POSIX_MEMALIGN] = "posix_memalign",
    [OP_ALIGNED_ALLOC] = "aligned_alloc",
    [OP_MEMALIGN] = "memalign",
    [OP_VALLOC] = "valloc",
    [OP_USABLE] = "malloc_usable_size",
    [OP_DPM_MALLOC] = "dpm_malloc",
    [OP_DPM_CALLOC] = "dpm_calloc",
    [OP_DPM_REALLOC] = "dpm_realloc",
    [OP_DPM_FREE] = "dpm_free",
    [OP_DPM_FREE_SIZED] = "dpm_free_sized",
    [OP_DPM_ALIGNED] = "dpm_malloc_aligned",
    [OP_DPM_ALIGNED_AT] = "dpm_malloc_aligned_at",
    [OP_DPM_ZALLOC_ALIGNED] = "dpm_zalloc_aligned",
    [OP_DPM_REALLOC_ALIGNED] = "dpm_realloc_aligned",
    [OP_DPM_TYPED] = "dpm_malloc_typed",
    [OP_DPM_ZMALLOC_TYPED] = "dpm_zmalloc_typed",
    [OP_DPM_CALLOC_TYPED] = "dpm_calloc_typed",
    [OP_DPM_REALLOC_TYPED] = "dpm_realloc_typed",
    [OP_DPM_ARENA] = "dpm_malloc_arena",
    [OP_DPM_USABLE] = "dpm_usable_size",
    [OP_GIVE] = "exchange_give",
    [OP_TAKE] = "exchange_take",
    [OP_CHECK] = "check",
};

/* ---- choices ------------------------------------------------------------ */

/* Weighted to small: 0-1 KiB, up to 64 KiB, up to 8 MiB (both
 * log-uniform, so mostly the lower end), rarely up to 64 MiB; bigger ones only while the
 * thread's live bytes stay within the budget. */
static size_t rnd_size(fthread_t *t)
{
    unsigned r = (unsigned)rnd_below(&t->rng, 1000);
    size_t size;
    if (r < 600)
        size = (size_t)rnd_below(&t->rng, 1025);
    else if (r < 900) {
        unsigned lg = 10 + (unsigned)rnd_below(&t->rng, 6);   /* 1 KiB .. 64 KiB */
        size = ((size_t)1 << lg) + (size_t)rnd_below(&t->rng, ((size_t)1 << lg) + 1);
    }
    else if (r < 997) {
        unsigned lg = 16 + (unsigned)rnd_below(&t->rng, 7);   /* 64 KiB .. 8 MiB */
        size = ((size_t)1 << lg) + (size_t)rnd_below(&t->rng, (size_t)1 << lg);
    } else {
        size = ((size_t)8 << 20) + (size_t)rnd_below(&t->rng, (size_t)56 << 20);
    }
    if (size > ((size_t)64 << 10) && t->live + size > conf.budget)
        size = (size_t)rnd_below(&t->rng, 1025);
    return size;
}

/* A power of two from 1 to 64 KiB, now and then up to 2 MiB. */
static size_t rnd_align(fthread_t *t)
{
    unsigned lg = rnd_chance(&t->rng, 1, 32) ? 17 + (unsigned)rnd_below(&t->rng, 5)
                                             : (unsigned)rnd_below(&t->rng, 17);
    return (size_t)1 << lg;
}

static const char *rnd_type(fthread_t *t)
{
    static const char *const names[] = {"fuzz_pkt", "fuzz_flow", "fuzz_session", "fuzz_route",
                                        "fuzz_a_rather_long_type_name_used_by_the_fuzzer",
                                        "", NULL};
    return names[rnd_below(&t->rng, sizeof names / sizeof names[0])];
}

/* ---- arenas ------------------------------------------------------------- */

static unsigned lookup_raw(fthread_t *t, const void *p)
{
    unsigned idx = ~0u;
    size_t len = sizeof idx;
    int err = dpm_ctl("arenas.lookup", &idx, &len, &p, sizeof p);
    if (err != 0)
        fuzz_fail(t, "arenas.lookup(%p) of a live block: error %d", p, err);
    return idx;
}

int arena_of(fthread_t *t, const void *p)
{
    unsigned idx = lookup_raw(t, p);
    return idx < plan.nauto ? ARENA_AUTO : (int)idx;
}

/* The arena of a block the calling thread's context allocated (not
 * dpm_malloc_arena). A thread bound to manual arena M gets blocks of M or,
 * through its cache, of automatic arenas whose blocks it freed; never of
 * another manual arena. A thread on an automatic arena gets automatic
 * blocks only (checked on a sample: the lookup is a name search). */
static int context_arena(fthread_t *t, const void *p)
{
    if (t->bound == ARENA_AUTO && !rnd_chance(&t->rng, 1, 16))
        return ARENA_AUTO;
    int a = arena_of(t, p);
    if (a != ARENA_AUTO && a != t->bound)
        fuzz_fail(t, "block %p of manual arena %d handed to a thread bound to %s %d", p, a,
                  t->bound == ARENA_AUTO ? "automatic arena" : "manual arena",
                  t->bound == ARENA_AUTO ? (int)t->auto_arena : t->bound);
    return a;
}

/* ---- tracking ----------------------------------------------------------- */

static size_t usable(const void *p)
{
#if FUZZ_LIBC
    return malloc_usable_size((void *)p);
#else
    return dpm_usable_size(p);
#endif
}

/* Checks a new block, fills it and adds it to t's table. align is the
 * alignment the call promises for p + offset (16 for the unaligned calls). */
static void track(fthread_t *t, void *vp, size_t size, size_t align, size_t offset, uint8_t family, bool zeroed,
                  int arena)
{
    unsigned char *p = vp;
    if (p == NULL)
        fuzz_fail(t, "%s(size %zu, align %zu) returned NULL (errno %d: %s)", t->op, size, align, errno,
                  strerror(errno));
    if (((uintptr_t)p + offset) % align != 0)
        fuzz_fail(t, "%s(size %zu, align %zu, offset %zu) returned %p: misaligned", t->op, size, align, offset,
                  (void *)p);
    size_t u = usable(p);
    if (u < size)
        fuzz_fail(t, "usable size %zu of %p below the %zu bytes asked", u, (void *)p, size);
    unsigned char got;
    size_t bad = zeroed ? pat_check_zero(p, size, &got) : SIZE_MAX;
    if (bad != SIZE_MAX)
        fuzz_fail(t, "zeroed block %p size %zu has 0x%02x at offset %zu", (void *)p, size, got, bad);
    pat_fill(p, size);
    t->blk[t->nblk++] = (blk_t){.p = p, .size = size, .align = align, .arena = arena, .family = family,
                                .origin = t->op};
    t->live += size;
    t->bytes += size;
}

static void untrack(fthread_t *t, unsigned i)
{
    t->live -= t->blk[i].size;
    t->blk[i] = t->blk[--t->nblk];
}

/* Whether t may free or move block b: with AVOID_FOREIGN_MANUAL, a thread
 * bound to a manual arena leaves other manual arenas' blocks alone (their
 * frees would enter its cache: a known defect). */
static bool may_release(const fthread_t *t, const blk_t *b)
{
    return !(conf.avoid & AVOID_FOREIGN_MANUAL) || t->bound == ARENA_AUTO || b->arena == ARENA_AUTO ||
           b->arena == t->bound;
}

int pick_release(fthread_t *t)
{
    for (unsigned tries = 0; tries < 8 && t->nblk > 0; tries++) {
        unsigned i = (unsigned)rnd_below(&t->rng, t->nblk);
        if (may_release(t, &t->blk[i]))
            return (int)i;
    }
    return -1;
}

static void release_with(fthread_t *t, const blk_t *b, bool sized)
{
    if (sized && (conf.avoid & AVOID_SIZED_SLACK) && usable(b->p) / 4 >= b->size)
        sized = false;
#if FUZZ_LIBC
    if (sized && b->family == FAM_LIBC)
        free_sized(b->p, b->size);
    else if (sized && b->family == FAM_LIBC_AL)
        free_aligned_sized(b->p, b->align, b->size);
    else if (sized)
        dpm_free_sized(b->p, b->size);
    else if (rnd_chance(&t->rng, 1, 2))
        free(b->p);
    else
        dpm_free(b->p);
#else
    (void)t;
    if (sized)
        dpm_free_sized(b->p, b->size);
    else
        dpm_free(b->p);
#endif
}

void blk_release(fthread_t *t, unsigned i)
{
    blk_verify(t, &t->blk[i], "before free");
    release_with(t, &t->blk[i], rnd_chance(&t->rng, 1, 3));
    untrack(t, i);
}

void blk_free_any(fthread_t *t, blk_t *b)
{
    blk_verify(t, b, "before free");
    release_with(t, b, false);
}

/* ---- allocation ops ----------------------------------------------------- */

/* A free slot in t's table, freeing a block if the table is full. */
static bool room(fthread_t *t)
{
    if (t->nblk < FT_MAX_BLOCKS)
        return true;
    int i = pick_release(t);
    if (i >= 0)
        blk_release(t, (unsigned)i);
    return t->nblk < FT_MAX_BLOCKS;
}

static void op_dpm_malloc(fthread_t *t)
{
    size_t size = rnd_size(t);
    void *p = dpm_malloc(size);
    track(t, p, size, 16, 0, FAM_DPM, false, context_arena(t, p));
}

static void op_dpm_calloc(fthread_t *t)
{
    size_t n = 1 + (size_t)rnd_below(&t->rng, 8), size = rnd_size(t) / n;
    void *p = dpm_calloc(n, size);
    track(t, p, n * size, 16, 0, FAM_DPM, true, context_arena(t, p));
}

static void op_dpm_aligned(fthread_t *t)
{
    size_t size = rnd_size(t), align = rnd_align(t);
    void *p = dpm_malloc_aligned(size, align);
    track(t, p, size, align, 0, FAM_DPM, false, context_arena(t, p));
}

static void op_dpm_aligned_at(fthread_t *t)
{
    size_t size = rnd_size(t), align = rnd_align(t);
    size_t offset = (size_t)rnd_below(&t->rng, 2 * align + 1);
    void *p = dpm_malloc_aligned_at(size, align, offset);
    track(t, p, size, align, offset % align, FAM_DPM, false, p != NULL ? context_arena(t, p) : ARENA_AUTO);
}

static void op_dpm_zalloc_aligned(fthread_t *t)
{
    size_t size = rnd_size(t), align = rnd_align(t);
    void *p = dpm_zalloc_aligned(size, align);
    track(t, p, size, align, 0, FAM_DPM, true, context_arena(t, p));
}

/* align 0 asks for the default, 16 */
static size_t rnd_align_or_default(fthread_t *t) { return rnd_chance(&t->rng, 1, 2) ? 0 : rnd_align(t); }

static void op_dpm_typed(fthread_t *t)
{
    size_t size = rnd_size(t), align = rnd_align_or_default(t);
    void *p = dpm_malloc_typed(rnd_type(t), size, align);
    track(t, p, size, align ? align : 16, 0, FAM_DPM, false, context_arena(t, p));
}

static void op_dpm_zmalloc_typed(fthread_t *t)
{
    size_t size = rnd_size(t), align = rnd_align_or_default(t);
    void *p = dpm_zmalloc_typed(rnd_type(t), size, align);
    track(t, p, size, align ? align : 16, 0, FAM_DPM, true, context_arena(t, p));
}

static void op_dpm_calloc_typed(fthread_t *t)
{
    size_t n = 1 + (size_t)rnd_below(&t->rng, 8), size = rnd_size(t) / n, align = rnd_align_or_default(t);
    void *p = dpm_calloc_typed(rnd_type(t), n, size, align);
    track(t, p, n * size, align ? align : 16, 0, FAM_DPM, true, context_arena(t, p));
}

static void op_dpm_arena(fthread_t *t)
{
    unsigned n = plan.nauto + plan.nmanual;
    unsigned k = (unsigned)rnd_below(&t->rng, n);
    unsigned idx = k < plan.nauto ? k : plan.manual[k - plan.nauto];
    size_t size = rnd_size(t), align = rnd_align_or_default(t);
    void *p = dpm_malloc_arena(idx, size, align);
    track(t, p, size, align ? align : 16, 0, FAM_DPM, false, k < plan.nauto ? ARENA_AUTO : (int)idx);
    unsigned got = lookup_raw(t, p);
    if (got != idx)
        fuzz_fail(t, "dpm_malloc_arena(%u, %zu, %zu) = %p belongs to arena %u", idx, size, align, p, got);
}

#if FUZZ_LIBC
static void op_malloc(fthread_t *t)
{
    size_t size = rnd_size(t);
    void *p = malloc(size);
    track(t, p, size, 16, 0, FAM_LIBC, false, context_arena(t, p));
}

static void op_calloc(fthread_t *t)
{
    size_t n = 1 + (size_t)rnd_below(&t->rng, 8), size = rnd_size(t) / n;
    void *p = calloc(n, size);
    track(t, p, n * size, 16, 0, FAM_LIBC, true, context_arena(t, p));
}

static void op_posix_memalign(fthread_t *t)
{
    size_t size = rnd_size(t), align = rnd_align(t);
    if (align < sizeof(void *))
        align = sizeof(void *);
    void *p = NULL;
    int err = posix_memalign(&p, align, size);
    if (err != 0)
        fuzz_fail(t, "posix_memalign(%zu, %zu) failed: %d", align, size, err);
    track(t, p, size, align, 0, FAM_LIBC_AL, false, context_arena(t, p));
}

static void op_aligned_alloc(fthread_t *t)
{
    size_t size = rnd_size(t), align = rnd_align(t);
    void *p = aligned_alloc(align, size);
    track(t, p, size, align, 0, FAM_LIBC_AL, false, context_arena(t, p));
}

/* glibc's memalign takes any alignment and rounds it up to a power of two. */
static void op_memalign(fthread_t *t)
{
    size_t size = rnd_size(t), align = rnd_align(t), asked = align;
    if (align > 2 && rnd_chance(&t->rng, 1, 8))
        asked = align / 2 + 1 + (size_t)rnd_below(&t->rng, align / 2 - 1);
    void *p = memalign(asked, size);
    track(t, p, size, align, 0, FAM_LIBC_AL, false, context_arena(t, p));
}

static void op_valloc(fthread_t *t)
{
    size_t size = rnd_size(t);
    void *p = valloc(size);
    track(t, p, size, 4096, 0, FAM_LIBC_AL, false, context_arena(t, p));
}
#endif

/* ---- realloc ------------------------------------------------------------ */

/* The new size of a realloc: any size, or a step up or down. */
static size_t realloc_size(fthread_t *t, size_t old)
{
    unsigned r = (unsigned)rnd_below(&t->rng, 10);
    if (r < 4 || old == 0)
        return rnd_size(t);
    if (r < 7) {
        size_t grow = 1 + (size_t)rnd_below(&t->rng, old / 2 + 64);
        return t->live + grow > conf.budget ? old : old + grow;
    }
    return (size_t)rnd_below(&t->rng, old);
}

enum realloc_kind { RK_PLAIN, RK_ALIGNED, RK_TYPED, RK_LIBC };

static void *do_realloc(fthread_t *t, enum realloc_kind k, void *p, size_t size, size_t align)
{
    switch (k) {
    case RK_ALIGNED: return dpm_realloc_aligned(p, size, align);
    case RK_TYPED: return dpm_realloc_typed(rnd_type(t), p, size, align == 16 ? 0 : align);
#if FUZZ_LIBC
    case RK_LIBC: return realloc(p, size);
#endif
    default: return dpm_realloc(p, size);
    }
}

static void realloc_op(fthread_t *t, enum realloc_kind k)
{
    /* 16: the default alignment of realloc and of dpm_realloc_typed's align 0 */
    size_t align = k == RK_ALIGNED || (k == RK_TYPED && rnd_chance(&t->rng, 1, 2)) ? rnd_align(t) : 16;
    uint8_t family = k == RK_LIBC ? FAM_LIBC : FAM_DPM;
    int i = rnd_chance(&t->rng, 1, 10) ? -1 : pick_release(t);
    if (i < 0) {   /* from NULL: an allocation */
        if (!room(t))
            return;
        size_t size = rnd_size(t);
        void *p = do_realloc(t, k, NULL, size, align);
        track(t, p, size, align, 0, family, false, context_arena(t, p));
        return;
    }
    blk_t old = t->blk[i];
    blk_verify(t, &old, "before realloc");
    if (rnd_chance(&t->rng, 1, 20)) {   /* to 0: frees, returns NULL */
        void *q = do_realloc(t, k, old.p, 0, align);
        if (q != NULL)
            fuzz_fail(t, "%s(%p, 0) returned %p, not NULL", t->op, (void *)old.p, q);
        untrack(t, (unsigned)i);
        return;
    }
    size_t size = realloc_size(t, old.size);
    if (size == 0)
        size = 1;
    unsigned char *q = do_realloc(t, k, old.p, size, align);
    if (q == NULL)
        fuzz_fail(t, "%s(%p, %zu, align %zu) returned NULL (errno %d)", t->op, (void *)old.p, size, align, errno);
    unsigned char want, got;
    size_t keep = old.size < size ? old.size : size;
    size_t bad = pat_check(q, old.p, old.size, keep, &want, &got);
    if (bad != SIZE_MAX)
        fuzz_fail(t, "%s(%p size %zu -> %zu) = %p lost the prefix at offset %zu: want 0x%02x got 0x%02x", t->op,
                  (void *)old.p, old.size, size, (void *)q, bad, want, got);
    untrack(t, (unsigned)i);
    int arena = q == old.p ? old.arena : context_arena(t, q);
    track(t, q, size, align, 0, family, false, arena);
}

/* ---- the table ---------------------------------------------------------- */

#if FUZZ_LIBC
static void op_realloc(fthread_t *t) { realloc_op(t, RK_LIBC); }
#endif
static void op_dpm_realloc(fthread_t *t) { realloc_op(t, RK_PLAIN); }
static void op_dpm_realloc_aligned(fthread_t *t) { realloc_op(t, RK_ALIGNED); }
static void op_dpm_realloc_typed(fthread_t *t) { realloc_op(t, RK_TYPED); }

static void free_op(fthread_t *t, bool sized)
{
    int i = pick_release(t);
    if (i < 0)
        return;
    blk_verify(t, &t->blk[i], "before free");
    release_with(t, &t->blk[i], sized);
    untrack(t, (unsigned)i);
}

static void op_free(fthread_t *t) { free_op(t, false); }
static void op_free_sized(fthread_t *t) { free_op(t, true); }

/* usable >= requested, and the bytes past the request are the block's to
 * write: a usable size that reaches into a neighbour shows up when the
 * neighbour is checked. */
static void op_usable(fthread_t *t)
{
    if (t->nblk == 0)
        return;
    blk_t *b = &t->blk[rnd_below(&t->rng, t->nblk)];
    size_t u = usable(b->p);
    if (u < b->size)
        fuzz_fail(t, "usable size %zu of %p below the %zu bytes asked", u, (void *)b->p, b->size);
    size_t end = u - b->size > 4096 ? b->size + 4096 : u;
    memset(b->p + b->size, 0xa5, end - b->size);
    if (b->size < u && u - b->size > 4096)
        memset(b->p + u - 64, 0x5a, 64);
}

static void op_give(fthread_t *t)
{
    if (t->nblk == 0)
        return;
    unsigned i = (unsigned)rnd_below(&t->rng, t->nblk);
    blk_t mine = t->blk[i], theirs;
    blk_verify(t, &mine, "before handing over");
    untrack(t, i);
    if (xchg_give(&t->rng, &mine, &theirs)) {
        blk_verify(t, &theirs, "taken from the exchange");
        t->blk[t->nblk++] = theirs;
        t->live += theirs.size;
    }
}

static void op_take(fthread_t *t)
{
    blk_t b;
    if (t->nblk >= FT_MAX_BLOCKS || !xchg_take(&t->rng, &b))
        return;
    blk_verify(t, &b, "taken from the exchange");
    t->blk[t->nblk++] = b;
    t->live += b.size;
}

static void op_check(fthread_t *t)
{
    if (t->nblk == 0)
        return;
    const blk_t *b = &t->blk[rnd_below(&t->rng, t->nblk)];
    blk_verify(t, b, "on a check");
    int a = arena_of(t, b->p);
    if (a != b->arena)
        fuzz_fail(t, "block %p size %zu of arena %d is now in arena %d", (void *)b->p, b->size, b->arena, a);
}

typedef struct op_desc {
    void (*fn)(fthread_t *t);
    unsigned weight;
    bool allocates;
} op_desc_t;

static const op_desc_t ops[OP_NKINDS] = {
#if FUZZ_LIBC
    [OP_MALLOC] = {op_malloc, 14, true},
    [OP_CALLOC] = {op_calloc, 4, true},
    [OP_REALLOC] = {op_realloc, 8, false},
    [OP_FREE] = {op_free, 12, false},
    [OP_FREE_SIZED] = {op_free_sized, 5, false},
    [OP_POSIX_MEMALIGN] = {op_posix_memalign, 2, true},
    [OP_ALIGNED_ALLOC] = {op_aligned_alloc, 2, true},
    [OP_MEMALIGN] = {op_memalign, 2, true},
    [OP_VALLOC] = {op_valloc, 1, true},
    [OP_USABLE] = {op_usable, 2, false},
#endif
    [OP_DPM_MALLOC] = {op_dpm_malloc, 12, true},
    [OP_DPM_CALLOC] = {op_dpm_calloc, 3, true},
    [OP_DPM_REALLOC] = {op_dpm_realloc, 6, false},
    [OP_DPM_FREE] = {op_free, 12, false},
    [OP_DPM_FREE_SIZED] = {op_free_sized, 5, false},
    [OP_DPM_ALIGNED] = {op_dpm_aligned, 3, true},
    [OP_DPM_ALIGNED_AT] = {op_dpm_aligned_at, 3, true},
    [OP_DPM_ZALLOC_ALIGNED] = {op_dpm_zalloc_aligned, 2, true},
    [OP_DPM_REALLOC_ALIGNED] = {op_dpm_realloc_aligned, 2, false},
    [OP_DPM_TYPED] = {op_dpm_typed, 1, true},
    [OP_DPM_ZMALLOC_TYPED] = {op_dpm_zmalloc_typed, 1, true},
    [OP_DPM_CALLOC_TYPED] = {op_dpm_calloc_typed, 1, true},
    [OP_DPM_REALLOC_TYPED] = {op_dpm_realloc_typed, 1, false},
    [OP_DPM_ARENA] = {op_dpm_arena, 3, true},
    [OP_DPM_USABLE] = {op_usable, 2, false},
    [OP_GIVE] = {op_give, 4, false},
    [OP_TAKE] = {op_take, 4, false},
    [OP_CHECK] = {op_check, 1, false},
};

static unsigned weight_total;

void ops_init(void)
{
    weight_total = 0;
    for (unsigned k = 0; k < OP_NKINDS; k++)
        weight_total += ops[k].weight;
}

static unsigned pick_kind(fthread_t *t)
{
    unsigned r = (unsigned)rnd_below(&t->rng, weight_total);
    for (unsigned k = 0; k < OP_NKINDS; k++) {
        if (r < ops[k].weight)
            return k;
        r -= ops[k].weight;
    }
    return OP_DPM_MALLOC;
}

void op_random(fthread_t *t)
{
    unsigned k = pick_kind(t);
    /* over the budget: free instead of allocating more */
    if (ops[k].allocates && t->live > conf.budget)
        k = OP_DPM_FREE;
    if (ops[k].allocates && !room(t))
        return;
    t->op = op_names[k];
    t->count[k]++;
    ops[k].fn(t);
}

void op_burst(fthread_t *t, unsigned n)
{
    for (unsigned j = 0; j < n; j++, t->opno++) {
        unsigned r = (unsigned)rnd_below(&t->rng, 3);
        if (r == 0 && t->nblk > 0) {
            t->op = "burst free";
            free_op(t, false);
        } else if (r == 1 && t->nblk > 0) {
            t->op = "burst realloc";
            realloc_op(t, RK_PLAIN);
        } else if (room(t)) {
            t->op = "burst malloc";
            op_dpm_malloc(t);
        }
    }
}

void fuzz_check_heap(fthread_t *t, const char *when)
{
    unsigned bad = ~0u;
    size_t len = sizeof bad;
    int err = dpm_ctl("debug.check_heap", &bad, &len, NULL, 0);
    if (err != 0 || bad != 0)
        fuzz_fail(t, "debug.check_heap %s: error %d, %u structures broken", when, err, bad);
}
