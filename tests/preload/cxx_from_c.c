/*
 * cxx_from_c.c - a C program with libdpmalloc.so preloaded: dpmalloc must
 * not bring the C++ runtime along (no libstdc++ or libgcc_s mapped,
 * although libdpmalloc.so exports operator new/delete); its operators
 * still work when called by their mangled names (nothrow new gives NULL),
 * and a throwing new that fails, with no C++ runtime to throw
 * std::bad_alloc, aborts with "dpmalloc: operator new(): out of memory,
 * and no C++ runtime (libstdc++, libc++) is loaded to throw std::bad_alloc".
 * Then a C++ library is dlopen()ed (RTLD_LOCAL, bringing libstdc++ in
 * late): bad_alloc, the new-handler and nothrow new work in it
 * (cxx_plugin.cpp).
 *
 *   test_preload_cxx_from_c <cxx_plugin.so>   (with LD_PRELOAD=libdpmalloc.so)
 */
#include "test.h"

#include <dlfcn.h>

static const char *plugin_path;

/* Is a file whose path contains name mapped into this process? */
static int mapped(const char *name)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[1024];
    int found = 0;
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (strstr(line, name) != NULL)
            found = 1;
    if (f != NULL)
        fclose(f);
    return found;
}

static void *lookup(const char *name)
{
    void *f = dlsym(RTLD_DEFAULT, name);
    Dl_info info;
    if (f == NULL || !dladdr(f, &info) || info.dli_fname == NULL || strstr(info.dli_fname, "libdpmalloc") == NULL) {
        fprintf(stderr, "%s is not libdpmalloc.so's\n", name);
        abort();
    }
    return f;
}

TEST(no_cxx_runtime_loaded)
{
    EXPECT(mapped("libdpmalloc"), "libdpmalloc.so is not preloaded");
    EXPECT(!mapped("libstdc++"), "libstdc++ is mapped into a C program");
    EXPECT(!mapped("libgcc_s"), "libgcc_s is mapped into a C program");
}

typedef void *(*new_fn)(size_t);
typedef void *(*new_nothrow_fn)(size_t, const void *);
typedef void (*delete_fn)(void *);
typedef void (*delete_sized_fn)(void *, size_t);
static volatile size_t huge_size = SIZE_MAX / 2;

TEST(operators_without_runtime)
{
    new_fn nw = (new_fn)lookup("_Znwm");
    new_nothrow_fn nw_nothrow = (new_nothrow_fn)lookup("_ZnwmRKSt9nothrow_t");
    delete_fn dl = (delete_fn)lookup("_ZdlPv");
    delete_sized_fn dl_sized = (delete_sized_fn)lookup("_ZdlPvm");
    size_t (*usable)(void *) = (size_t (*)(void *))lookup("malloc_usable_size");
    char tag = 0; /* std::nothrow_t is empty */
    void *p = nw(100);
    EXPECT_NONNULL(p);
    EXPECT_EQ_U(usable(p), 112);
    memset(p, 1, 100);
    dl(p);
    p = nw(5000);
    dl_sized(p, 5000);
    EXPECT_NULL(nw_nothrow(huge_size, &tag));
}

static int throwing_new_fails(void *arg)
{
    (void)arg;
    new_fn nw = (new_fn)lookup("_Znwm");
    nw(huge_size);
    return 0;
}

TEST(failing_new_aborts_without_runtime)
{
    struct test_child c;
    char desc[128];
    test_run_child(throwing_new_fails, NULL, &c, 30);
    EXPECT(WIFSIGNALED(c.status) && WTERMSIG(c.status) == SIGABRT, "child %s, stderr: %s",
           test_describe_status(c.status, desc, sizeof desc), c.err);
    EXPECT(strcmp(c.err, "dpmalloc: operator new(): out of memory, and no C++ runtime (libstdc++, libc++) "
                         "is loaded to throw std::bad_alloc\n") == 0,
           "stderr: %s", c.err);
}

TEST(cxx_library_loaded_late)
{
    void *lib = dlopen(plugin_path, RTLD_NOW | RTLD_LOCAL);
    EXPECT(lib != NULL, "dlopen %s: %s", plugin_path, dlerror());
    if (lib == NULL)
        return;
    EXPECT(mapped("libstdc++"), "libstdc++ did not come with the C++ library");
    int (*run)(void) = (int (*)(void))dlsym(lib, "plugin_run");
    EXPECT_NONNULL((void *)run);
    if (run != NULL)
        EXPECT_EQ_I(run(), 0);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s <cxx_plugin.so>\n", argv[0]);
        return 2;
    }
    plugin_path = argv[1];
    RUN(no_cxx_runtime_loaded);
    RUN(operators_without_runtime);
    RUN(failing_new_aborts_without_runtime);
    RUN(cxx_library_loaded_late);
    return test_done();
}
