/*
 * override.c - the libc allocation family, exported when dpmalloc is
 * preloaded or linked (DPM_OVERRIDE_LIBC). Every entry point is here:
 * a block from any of them may reach any other, so none may be left to
 * glibc (a pvalloc'd glibc block handed to our free would be a crash).
 * Semantics follow glibc's documentation, including its edge cases.
 */
#include "alloc.h"
#include "typed_cache.h"
#include "annotate.h"
#include "os.h"
#include "override_cxx.h"
#include "quarantine.h"

#include <dpmalloc.h>
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>

#if DPM_OVERRIDE_LIBC

/* C23 names that glibc 2.36 does not declare yet. */
void free_sized(void *p, size_t size);
void free_aligned_sized(void *p, size_t align, size_t size);

/* Symbols the compiler treats specially must keep their plain names. */
#define LIBC_ENTRY DPM_EXPORT

LIBC_ENTRY void *malloc(size_t size)
{
    void *p = alloc_fast(size);
    DPM_ANN_ALLOC(p, size, false);
    return p;
}

LIBC_ENTRY void free(void *p)
{
    DPM_ANN_FREE(p);
    free_fast(p, "free");
}

LIBC_ENTRY void *calloc(size_t n, size_t size)
{
    void *p = calloc_impl(n, size);
    DPM_ANN_ALLOC(p, n * size, true);
    return p;
}

LIBC_ENTRY void *realloc(void *p, size_t size)
{
    void *q = realloc_impl(p, size, "realloc");
    DPM_ANN_REALLOC_DONE(p, q, size);
    return q;
}

LIBC_ENTRY void *reallocarray(void *p, size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    void *q = realloc_impl(p, total, "reallocarray");
    DPM_ANN_REALLOC_DONE(p, q, total);
    return q;
}

/* POSIX reserves EINVAL for alignments that are not a power of two
 * multiple of sizeof(void *); a valid alignment beyond what dpmalloc
 * serves (DPM_MAX_ALIGN) is a request it cannot meet: ENOMEM. */
LIBC_ENTRY int posix_memalign(void **out, size_t align, size_t size)
{
    if (!is_pow2(align) || align % sizeof(void *) != 0)
        return EINVAL;
    /* Out of memory also sets errno, as malloc's does (and glibc's,
     * jemalloc's, mimalloc's posix_memalign): a caller that reports
     * strerror(errno) or perror() after the failure sees why. EINVAL
     * leaves errno alone, as glibc does. */
    if (align > DPM_MAX_ALIGN) {
        errno = ENOMEM;
        return ENOMEM;
    }
    void *p = aligned_at_impl(size, align, 0, false);
    if (p == NULL) {
        errno = ENOMEM;
        return ENOMEM;
    }
    DPM_ANN_ALLOC(p, size, false);
    *out = p;
    return 0;
}

LIBC_ENTRY void *aligned_alloc(size_t align, size_t size)
{
    if (!is_pow2(align)) {
        errno = EINVAL;
        return NULL;
    }
    if (align > DPM_MAX_ALIGN) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = aligned_at_impl(size, align, 0, false);
    DPM_ANN_ALLOC(p, size, false);
    return p;
}

/* glibc's memalign rounds a non-power-of-two alignment up, and answers
 * EINVAL only where that rounding would overflow. */
LIBC_ENTRY void *memalign(size_t align, size_t size)
{
    if (align > SIZE_MAX / 2 + 1) {
        errno = EINVAL;
        return NULL;
    }
    if (align > DPM_MAX_ALIGN) {
        errno = ENOMEM;
        return NULL;
    }
    if (!is_pow2(align))
        align = align == 0 ? 1 : (size_t)1 << lg_ceil(align);
    void *p = aligned_at_impl(size, align, 0, false);
    DPM_ANN_ALLOC(p, size, false);
    return p;
}

LIBC_ENTRY void *valloc(size_t size)
{
    void *p = aligned_at_impl(size, os_page_size(), 0, false);
    DPM_ANN_ALLOC(p, size, false);
    return p;
}

/* The block is asked for with the caller's size (so that a sized free
 * with that size matches it): page alignment gives it a usable size that
 * is a whole number of pages anyway (malloc_usable_size shows it). */
LIBC_ENTRY void *pvalloc(size_t size)
{
    size_t page = os_page_size();
    size_t rounded = round_up(size == 0 ? 1 : size, page);
    if (rounded < size) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = aligned_at_impl(size == 0 ? 1 : size, page, 0, false);
    DPM_ANN_ALLOC(p, size == 0 ? 1 : size, false);
    return p;
}

LIBC_ENTRY size_t malloc_usable_size(void *p) { return usable_size_impl(p, "malloc_usable_size"); }
LIBC_ENTRY void free_sized(void *p, size_t size) { free_sized_impl(p, size, "free_sized"); }
LIBC_ENTRY void free_aligned_sized(void *p, size_t align, size_t size)
{
    (void)align;
    free_sized_impl(p, size, "free_aligned_sized");
}

/* glibc's own names for the same calls, which some programs and
 * libraries (and glibc's own dlopen/atfork code in old versions) call
 * directly: a block from them reaches our free. cfree is glibc's
 * compatibility name for free (no longer declared). */
void cfree(void *p);
void *__libc_malloc(size_t size);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t size);
void __libc_free(void *p);
void *__libc_memalign(size_t align, size_t size);
void *__libc_valloc(size_t size);
void *__libc_pvalloc(size_t size);
LIBC_ENTRY void *__libc_malloc(size_t size)
{
    void *p = alloc_fast(size);
    DPM_ANN_ALLOC(p, size, false);
    return p;
}

LIBC_ENTRY void *__libc_calloc(size_t n, size_t size)
{
    void *p = calloc_impl(n, size);
    DPM_ANN_ALLOC(p, n * size, true);
    return p;
}

LIBC_ENTRY void *__libc_realloc(void *p, size_t size)
{
    void *q = realloc_impl(p, size, "realloc");
    DPM_ANN_REALLOC_DONE(p, q, size);
    return q;
}

LIBC_ENTRY void __libc_free(void *p)
{
    DPM_ANN_FREE(p);
    free_fast(p, "free");
}

/* memalign, valloc and pvalloc annotate the block themselves. */
LIBC_ENTRY void *__libc_memalign(size_t align, size_t size) { return memalign(align, size); }
LIBC_ENTRY void *__libc_valloc(size_t size) { return valloc(size); }
LIBC_ENTRY void *__libc_pvalloc(size_t size) { return pvalloc(size); }

LIBC_ENTRY void cfree(void *p)
{
    DPM_ANN_FREE(p);
    free_fast(p, "free");
}

#endif /* DPM_OVERRIDE_LIBC */

/* ---- the C side of the C++ operators (override_cxx.cc) ---------------- */
/* Only where override_cxx.cc is built: cxx_new_retry lives there. The
 * reference is weak so that it does not pull override_cxx.o out of
 * libdpmalloc.a: only the operators there call these functions, and its
 * static-library build references libstdc++ strongly (override_cxx.cc),
 * which a C program linking libdpmalloc.a must not need. The overriding
 * libraries have these functions; so does the ASan build's C++ test
 * (tests/debug), which links the operators without the libc family. */
#if DPM_HAVE_CXX
#pragma weak cxx_new_retry

/* Every block the operators hand out comes from cxx_new* fast paths or
 * from here (the aligned operators, and each retry after the
 * new-handler), which annotate it. */
void *cxx_try_alloc(size_t size, size_t align)
{
    if (align == 0) {
        void *p = alloc_fast(size);
        DPM_ANN_ALLOC(p, size, false);
        return p;
    }
    if (!is_pow2(align) || align > DPM_MAX_ALIGN)
        return NULL;
    void *p = aligned_at_impl(size, align, 0, false);
    DPM_ANN_ALLOC(p, size, false);
    return p;
}

void *cxx_new(size_t size)
{
    void *p = alloc_fast(size);
    if (likely(p != NULL)) {
        DPM_ANN_ALLOC(p, size, false);
        return p;
    }
    return cxx_new_retry(size, 0, false);
}

void *cxx_new_nothrow(size_t size)
{
    void *p = alloc_fast(size);
    if (likely(p != NULL)) {
        DPM_ANN_ALLOC(p, size, false);
        return p;
    }
    return cxx_new_retry(size, 0, true);
}

void *cxx_new_aligned(size_t size, size_t align)
{
    void *p = cxx_try_alloc(size, align);
    return likely(p != NULL) ? p : cxx_new_retry(size, align, false);
}

void *cxx_new_aligned_nothrow(size_t size, size_t align)
{
    void *p = cxx_try_alloc(size, align);
    return likely(p != NULL) ? p : cxx_new_retry(size, align, true);
}

void cxx_delete(void *p)
{
    DPM_ANN_FREE(p);
    free_fast(p, "operator delete");
}

/* free_sized_impl annotates the free. */
void cxx_delete_sized(void *p, size_t size) { free_sized_impl(p, size, "operator delete"); }
#endif

#if DPM_OVERRIDE_LIBC

/* Sends every thread's cached large blocks home (idle threads' too) and
 * returns every arena's free pages to the OS now; 1 if memory was
 * released, 0 if there was none to release, as glibc's. */
LIBC_ENTRY int malloc_trim(size_t pad)
{
    (void)pad;
    if (!dpm_ready())
        return 0;
    if (opt.secure)
        quarantine_drain("malloc_trim");
    tcache_reclaim_mine();
    large_caches_flush(false, NULL);
    cpu_caches_drain(false);
    typed_caches_drain(false);
    size_t pages = 0;
    unsigned n = __atomic_load_n(&narenas_total, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n; i++) {
        arena_t *a = __atomic_load_n(&arenas[i], __ATOMIC_ACQUIRE);
        if (a != NULL && !a->destroyed) {
            arena_release_idle_slabs(a);
            pages += arena_purge_all(a);
        }
    }
    return pages != 0;
}

#endif
