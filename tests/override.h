/*
 * override.h - for tests of the libc entry points: prove that malloc and
 * friends in this process are dpmalloc's, not glibc's.
 *
 * The libc-level tests are built twice: linked with dpmalloc_static, and as
 * plain glibc programs run with LD_PRELOAD=libdpmalloc.so (TEST_PRELOAD=1).
 * Either way, a test that silently exercised glibc would prove nothing, so
 * each one calls test_expect_override() first.
 */
#ifndef DPM_TEST_OVERRIDE_H
#define DPM_TEST_OVERRIDE_H

#include "test.h"

#include <dlfcn.h>
#include <malloc.h>

/*
 * C23 free_sized / free_aligned_sized are not in glibc 2.36. The static
 * build links dpmalloc's; the preload build looks them up at run time
 * (a weak reference would be bound to 0 by the linker of a PIE).
 */
#ifdef TEST_PRELOAD
static inline void *test_lookup(const char *name)
{
    return dlsym(RTLD_DEFAULT, name);
}
static inline void test_free_sized(void *p, size_t size)
{
    void (*f)(void *, size_t) = (void (*)(void *, size_t))test_lookup("free_sized");
    if (!f) {
        fprintf(stderr, "free_sized is not defined\n");
        abort();
    }
    f(p, size);
}
static inline void test_free_aligned_sized(void *p, size_t align, size_t size)
{
    void (*f)(void *, size_t, size_t) =
        (void (*)(void *, size_t, size_t))test_lookup("free_aligned_sized");
    if (!f) {
        fprintf(stderr, "free_aligned_sized is not defined\n");
        abort();
    }
    f(p, align, size);
}
#define free_sized test_free_sized
#define free_aligned_sized test_free_aligned_sized
#define TEST_ADDR_FREE_SIZED test_lookup("free_sized")
#define TEST_ADDR_FREE_ALIGNED_SIZED test_lookup("free_aligned_sized")
#else
void free_sized(void *p, size_t size);
void free_aligned_sized(void *p, size_t align, size_t size);
#define TEST_ADDR_FREE_SIZED ((void *)free_sized)
#define TEST_ADDR_FREE_ALIGNED_SIZED ((void *)free_aligned_sized)
#endif

/* Where does the code of function f live? */
static inline const char *test_object_of(void *f)
{
    Dl_info info;
    if (!dladdr(f, &info) || !info.dli_fname)
        return "?";
    return info.dli_fname;
}

/* Check one entry point: not in glibc; in the preload build, inside
 * libdpmalloc.so. */
static inline void test_expect_entry_overridden(const char *name, void *f)
{
    const char *obj = test_object_of(f);
    if (f == NULL) {
        TEST_FAIL("%s is not defined at all", name);
        return;
    }
    if (strstr(obj, "libc.so") || strstr(obj, "libc-"))
        TEST_FAIL("%s resolves to glibc (%s): dpmalloc is not in effect", name,
                  obj);
#ifdef TEST_PRELOAD
    else if (!strstr(obj, "libdpmalloc"))
        TEST_FAIL("%s resolves to %s, not libdpmalloc.so", name, obj);
#endif
}

/* The addresses are taken through volatile pointers so that the compiler
 * cannot substitute its builtins. */
static inline void test_expect_override(void)
{
    static void *(*volatile m)(size_t) = malloc;
    static void (*volatile f)(void *) = free;
    static void *(*volatile c)(size_t, size_t) = calloc;
    static void *(*volatile r)(void *, size_t) = realloc;
    static int (*volatile pm)(void **, size_t, size_t) = posix_memalign;
    static void *(*volatile aa)(size_t, size_t) = aligned_alloc;
    static void *(*volatile ma)(size_t, size_t) = memalign;
    static void *(*volatile va)(size_t) = valloc;
    static void *(*volatile pv)(size_t) = pvalloc;
    static size_t (*volatile us)(void *) = malloc_usable_size;
    static void *(*volatile ra)(void *, size_t, size_t) = reallocarray;
    test_expect_entry_overridden("malloc", (void *)m);
    test_expect_entry_overridden("free", (void *)f);
    test_expect_entry_overridden("calloc", (void *)c);
    test_expect_entry_overridden("realloc", (void *)r);
    test_expect_entry_overridden("posix_memalign", (void *)pm);
    test_expect_entry_overridden("aligned_alloc", (void *)aa);
    test_expect_entry_overridden("memalign", (void *)ma);
    test_expect_entry_overridden("valloc", (void *)va);
    test_expect_entry_overridden("pvalloc", (void *)pv);
    test_expect_entry_overridden("malloc_usable_size", (void *)us);
    test_expect_entry_overridden("reallocarray", (void *)ra);
    test_expect_entry_overridden("free_sized", TEST_ADDR_FREE_SIZED);
    test_expect_entry_overridden("free_aligned_sized",
                                 TEST_ADDR_FREE_ALIGNED_SIZED);
#ifdef TEST_PRELOAD
    if (!dlsym(RTLD_DEFAULT, "dpm_malloc"))
        TEST_FAIL("dlsym(RTLD_DEFAULT, \"dpm_malloc\") = NULL: "
                  "libdpmalloc.so is not preloaded");
#endif
}

/*
 * Opaque calls. clang (14) knows the allocation family as library functions
 * that touch only memory the program cannot see, and so folds away a read
 * of errno after a failed call (valloc even with -fno-builtin-valloc). The
 * tests call them through volatile pointers, which it cannot see through.
 * (Function-like macros: `malloc` without parentheses, as used above to
 * take addresses, still names the real function.)
 */
static void *(*volatile test_malloc_fn)(size_t) = malloc;
static void *(*volatile test_calloc_fn)(size_t, size_t) = calloc;
static void *(*volatile test_realloc_fn)(void *, size_t) = realloc;
static void *(*volatile test_reallocarray_fn)(void *, size_t, size_t) = reallocarray;
static int (*volatile test_posix_memalign_fn)(void **, size_t, size_t) = posix_memalign;
static void *(*volatile test_aligned_alloc_fn)(size_t, size_t) = aligned_alloc;
static void *(*volatile test_memalign_fn)(size_t, size_t) = memalign;
static void *(*volatile test_valloc_fn)(size_t) = valloc;
static void *(*volatile test_pvalloc_fn)(size_t) = pvalloc;
#define malloc(n) test_malloc_fn(n)
#define calloc(n, s) test_calloc_fn(n, s)
#define realloc(p, n) test_realloc_fn(p, n)
#define reallocarray(p, n, s) test_reallocarray_fn(p, n, s)
#define posix_memalign(pp, a, n) test_posix_memalign_fn(pp, a, n)
#define aligned_alloc(a, n) test_aligned_alloc_fn(a, n)
#define memalign(a, n) test_memalign_fn(a, n)
#define valloc(n) test_valloc_fn(n)
#define pvalloc(n) test_pvalloc_fn(n)

#endif /* DPM_TEST_OVERRIDE_H */
