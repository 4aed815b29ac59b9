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

/* C23 free_sized / free_aligned_sized are not in glibc 2.36's headers. In
 * the preload build they are weak, resolved from libdpmalloc.so at load. */
#ifdef TEST_PRELOAD
#define TEST_WEAK __attribute__((weak))
#else
#define TEST_WEAK
#endif
void free_sized(void *p, size_t size) TEST_WEAK;
void free_aligned_sized(void *p, size_t align, size_t size) TEST_WEAK;

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
    static void (*volatile fs)(void *, size_t) = free_sized;
    static void (*volatile fas)(void *, size_t, size_t) = free_aligned_sized;
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
    test_expect_entry_overridden("free_sized", (void *)fs);
    test_expect_entry_overridden("free_aligned_sized", (void *)fas);
#ifdef TEST_PRELOAD
    if (!dlsym(RTLD_DEFAULT, "dpm_malloc"))
        TEST_FAIL("dlsym(RTLD_DEFAULT, \"dpm_malloc\") = NULL: "
                  "libdpmalloc.so is not preloaded");
#endif
}

#endif /* DPM_TEST_OVERRIDE_H */
