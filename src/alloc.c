/*
 * alloc.c - the dpm_ API and the slow paths behind the inline fast paths
 * (see alloc.h): first use of a thread, cache misses and overflows, large
 * blocks, aligned and at-offset requests, realloc, and misuse reports.
 */
#include "alloc.h"
#include "conf.h"
#include "error.h"

#include <dpmalloc.h>
#include <errno.h>
#include <string.h>

static void *fail_nomem(void)
{
    errno = ENOMEM;
    return NULL;
}

/* ---- malloc / free slow paths ------------------------------------------ */

static void *alloc_uncached(unsigned c, size_t size, bool zero)
{
    arena_t *a = thread_arena();
    if (a == NULL)
        return fail_nomem();
    if (c < NSMALL) {
        void *p;
        if (bin_fill(&a->bins[c], &p, 1) == 0)
            return fail_nomem();
        if (zero)
            memset(p, 0, size);
        return p;
    }
    large_request_t req = {.size = size, .align = 1, .zero = zero};
    return arena_alloc_large(a, &req);
}

void *alloc_slow(size_t size)
{
    if (unlikely(!dpm_ready()) || unlikely(size > ALLOC_MAX))
        return fail_nomem();
    if (tls_state == THREAD_NEW && tcache_create_for_thread())
        return alloc_fast(size);
    unsigned c = sc_of_size(size);
    tcache_t *tc = tls_tcache;
    if (c < TC_MAX_CLASSES && tc->bins[c].ncached_max != 0) {
        void *p = tcache_alloc_miss(tc, c);
        return p != NULL ? p : fail_nomem();
    }
    return alloc_uncached(c, size, false);
}

/* Validates p against its span; returns the span or aborts naming call. */
static span_t *checked_span(const void *p, const char *call)
{
    span_t *s = span_of(p);
    if (s == NULL)
        dpm_misuse(call, p, "invalid pointer");
    if (s->kind == SPAN_SLAB ? !span_is_block_start(s, (uintptr_t)p)
        : s->kind != SPAN_LARGE || (uintptr_t)p != s->base)
        dpm_misuse(call, p, s->kind == SPAN_FREE ? "invalid pointer or double free" : "invalid pointer");
    return s;
}

void free_slow(void *p, const char *call)
{
    if (p == NULL)
        return;
    span_t *s = checked_span(p, call);
    if (s->tcache_class != TC_NONE && tls_state == THREAD_CACHED) {
        tcache_t *tc = tls_tcache;
        tc_bin_t *b = &tc->bins[s->tcache_class];
        if (!tc_bin_full(b))
            tc_bin_push(b, p);
        else
            tcache_free_full(tc, s->tcache_class, p);
        return;
    }
    if (s->kind == SPAN_SLAB)
        bin_flush(&p, 1);
    else
        arena_free_large(s);
}

void *calloc_impl(size_t n, size_t size)
{
    size_t total;
    if (unlikely(__builtin_mul_overflow(n, size, &total)))
        return fail_nomem();
    if (total <= SMALL_MAX) {
        void *p = alloc_fast(total);
        if (p != NULL)
            memset(p, 0, total);
        return p;
    }
    if (unlikely(!dpm_ready()) || unlikely(total > ALLOC_MAX))
        return fail_nomem();
    /* Large: bypass the thread cache so that clean pages skip the memset. */
    return alloc_uncached(sc_of_size(total), total, true);
}

/* ---- sizes ------------------------------------------------------------- */

static size_t span_usable(const span_t *s) { return s->kind == SPAN_SLAB ? s->objsize : s->usable; }

size_t usable_size_impl(const void *p, const char *call)
{
    if (p == NULL)
        return 0;
    return span_usable(checked_span(p, call));
}

/* ---- realloc ----------------------------------------------------------- */

static void *move_block(void *p, size_t old_usable, size_t size, size_t align, const char *call)
{
    void *q = align <= QUANTUM ? alloc_fast(size) : aligned_at_impl(size, align, 0, false);
    if (q == NULL)
        return NULL;
    memcpy(q, p, old_usable < size ? old_usable : size);
    free_fast(p, call);
    return q;
}

static void *realloc_in_span(void *p, span_t *s, size_t size, size_t align, const char *call)
{
    size_t old = span_usable(s);
    bool aligned = ((uintptr_t)p & (align - 1)) == 0;
    if (aligned && size <= old && (size > old / 2 || old <= QUANTUM))
        return p;
    if (aligned && s->kind == SPAN_LARGE && size > SMALL_MAX && arena_resize_large_in_place(s, size))
        return p;
    return move_block(p, old, size, align, call);
}

void *realloc_impl(void *p, size_t size, const char *call)
{
    if (p == NULL)
        return alloc_fast(size);
    if (size == 0) {
        free_fast(p, call);
        return NULL;
    }
    span_t *s = checked_span(p, call);
    if (unlikely(size > ALLOC_MAX))
        return fail_nomem();
    return realloc_in_span(p, s, size, QUANTUM, call);
}

/* ---- aligned and at-offset --------------------------------------------- */

static void *aligned_small(unsigned c, size_t size, bool zero)
{
    tcache_t *tc = tls_tcache;
    tc_bin_t *b = &tc->bins[c];
    if (!tc_bin_empty(b)) {
        b->nrequests++;
        void *p = tc_bin_pop(b);
        if (zero)
            memset(p, 0, size);
        return p;
    }
    if (tls_state == THREAD_NEW && tcache_create_for_thread())
        return aligned_small(c, size, zero);
    if (c < TC_MAX_CLASSES && b->ncached_max != 0) {
        void *p = tcache_alloc_miss(tc, c);
        if (p != NULL && zero)
            memset(p, 0, size);
        return p != NULL ? p : fail_nomem();
    }
    return alloc_uncached(c, size, zero);
}

static void *phased_small(unsigned c, size_t size, uint32_t phase, bool zero)
{
    arena_t *a = thread_arena();
    bin_t *bin = a != NULL ? arena_phased_bin(a, c, phase) : NULL;
    void *p;
    if (bin == NULL || bin_fill(bin, &p, 1) == 0)
        return NULL;
    if (zero)
        memset(p, 0, size);
    return p;
}

void *aligned_at_impl(size_t size, size_t align, size_t offset, bool zero)
{
    if (unlikely(!dpm_ready()) || unlikely(size > ALLOC_MAX))
        return fail_nomem();
    size_t off = offset & (align - 1);
    if (align <= QUANTUM && off == 0)
        return zero ? calloc_impl(1, size) : alloc_fast(size);
    if (align <= PAGE) {
        unsigned c = sc_of_size_aligned(size, align);
        if (c < NSMALL && off == 0)
            return aligned_small(c, size, zero);
        if (c < NSMALL) {
            void *p = phased_small(c, size, (uint32_t)((align - off) & (align - 1)), zero);
            if (p != NULL)
                return p;
        }
    }
    arena_t *a = thread_arena();
    if (a == NULL)
        return fail_nomem();
    large_request_t req = {.size = size, .align = align, .offset = off, .zero = zero};
    void *p = arena_alloc_large(a, &req);
    return p != NULL ? p : fail_nomem();
}

static bool bad_alignment(size_t align)
{
    if (is_pow2(align) && align <= DPM_MAX_ALIGN)
        return false;
    errno = EINVAL;
    return true;
}

/* ---- public dpm_ API --------------------------------------------------- */

DPM_EXPORT void *dpm_malloc(size_t size) { return alloc_fast(size); }
DPM_EXPORT void dpm_free(void *p) { free_fast(p, "free"); }
DPM_EXPORT void dpm_free_sized(void *p, size_t size)
{
    (void)size;
    free_fast(p, "free_sized");
}
DPM_EXPORT void *dpm_calloc(size_t n, size_t size) { return calloc_impl(n, size); }
DPM_EXPORT void *dpm_realloc(void *p, size_t size) { return realloc_impl(p, size, "realloc"); }
DPM_EXPORT size_t dpm_usable_size(const void *p) { return usable_size_impl(p, "dpm_usable_size"); }

DPM_EXPORT void *dpm_malloc_aligned(size_t size, size_t align)
{
    return bad_alignment(align) ? NULL : aligned_at_impl(size, align, 0, false);
}

DPM_EXPORT void *dpm_malloc_aligned_at(size_t size, size_t align, size_t offset)
{
    return bad_alignment(align) ? NULL : aligned_at_impl(size, align, offset, false);
}

DPM_EXPORT void *dpm_zalloc_aligned(size_t size, size_t align)
{
    return bad_alignment(align) ? NULL : aligned_at_impl(size, align, 0, true);
}

DPM_EXPORT void *dpm_realloc_aligned(void *p, size_t size, size_t align)
{
    if (bad_alignment(align))
        return NULL;
    if (p == NULL)
        return aligned_at_impl(size, align, 0, false);
    if (size == 0) {
        free_fast(p, "dpm_realloc_aligned");
        return NULL;
    }
    span_t *s = checked_span(p, "dpm_realloc_aligned");
    if (unlikely(size > ALLOC_MAX))
        return fail_nomem();
    return realloc_in_span(p, s, size, align, "dpm_realloc_aligned");
}
