// operators.cpp - dpmalloc's global operator new/delete (src/override_cxx.cc),
// linked (dpmalloc_static) and preloaded (TEST_PRELOAD, LD_PRELOAD):
// operator new resolves to libdpmalloc (not the C++ runtime); every form
// round-trips (plain, array, nothrow, sized, aligned up to 2 MiB,
// aligned nothrow, sized+aligned); new of an impossible size throws
// std::bad_alloc (also aligned and array), nothrow forms return nullptr;
// the new-handler is called, may throw bad_alloc into a nothrow new
// (nullptr), and may free a reserve under RLIMIT_AS so that the
// allocation succeeds. Built with g++ (libstdc++) and, where available,
// with clang++ -stdlib=libc++ (libc++ and libc++abi: the
// cxx_operators_libcxx_* tests). Under DPMALLOC_CONF=secure:true ("secure"
// argument) a sized delete with a wrong size aborts in a child with
// "dpmalloc: operator delete(): size does not match the block at 0x...".
#include <dlfcn.h>
#include <malloc.h>
#include <sys/resource.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <new>

#include "test.h"

#ifndef TEST_PRELOAD
#include <dpmalloc.h>
#endif

namespace {

bool secure_mode;   // run as "secure" (DPMALLOC_CONF=secure:true)

volatile size_t huge_size = SIZE_MAX / 2;

void *keep(void *p)
{
    __asm__ volatile("" : "+r"(p));
    return p;
}

const char *object_of(void *f)
{
    Dl_info info;
    if (!dladdr(f, &info) || !info.dli_fname)
        return "?";
    return info.dli_fname;
}

TEST(operator_new_is_dpmalloc)
{
    void *(*volatile nw)(size_t) = &::operator new;
    void (*volatile dl)(void *, size_t) noexcept = &::operator delete;
    void *(*volatile nwa)(size_t, std::align_val_t) = &::operator new[];
    void *fns[] = {reinterpret_cast<void *>(nw), reinterpret_cast<void *>(dl), reinterpret_cast<void *>(nwa)};
    for (void *f : fns) {
        const char *obj = object_of(f);
        if (std::strstr(obj, "libstdc++") || std::strstr(obj, "libc++"))
            TEST_FAIL("operator new/delete at %p resolves to %s", f, obj);
#ifdef TEST_PRELOAD
        else if (!std::strstr(obj, "libdpmalloc"))
            TEST_FAIL("operator new/delete at %p resolves to %s, not libdpmalloc.so", f, obj);
#endif
    }
    // and the block is dpmalloc's: its usable size is the class size
#ifdef TEST_PRELOAD
    size_t (*usable)(const void *) =
        reinterpret_cast<size_t (*)(const void *)>(dlsym(RTLD_DEFAULT, "dpm_usable_size"));
#else
    size_t (*usable)(const void *) = dpm_usable_size;
#endif
    EXPECT_NONNULL(reinterpret_cast<void *>(usable));
    if (usable != nullptr) {
        void *p = keep(::operator new(100));
        EXPECT_EQ_U(usable(p), secure_mode ? 112 - 8 : 112);   // secure: the slot's canary
        ::operator delete(p);
    }
}

struct Obj {
    char bytes[200];
};
struct alignas(256) Aligned256 {
    char bytes[300];
};
struct alignas(4096) Aligned4k {
    char bytes[5000];
};

TEST(every_form_round_trips)
{
    for (size_t n : {size_t(0), size_t(1), size_t(24), size_t(4096), size_t(20000), size_t(1) << 22}) {
        void *p = keep(::operator new(n));
        std::memset(p, 1, n);
        ::operator delete(p);
        p = keep(::operator new[](n));
        std::memset(p, 2, n);
        ::operator delete[](p);
        p = keep(::operator new(n, std::nothrow));
        EXPECT_NONNULL(p);
        ::operator delete(p, std::nothrow);
        p = keep(::operator new[](n, std::nothrow));
        EXPECT_NONNULL(p);
        ::operator delete[](p, std::nothrow);
        p = keep(::operator new(n));
        ::operator delete(p, n);
        p = keep(::operator new[](n));
        ::operator delete[](p, n);
        for (size_t a = 1; a <= (size_t(1) << 21); a *= 2) {
            std::align_val_t al{a};
            p = keep(::operator new(n, al));
            EXPECT_ALIGNED(p, a);
            std::memset(p, 3, n);
            ::operator delete(p, al);
            p = keep(::operator new[](n, al));
            EXPECT_ALIGNED(p, a);
            ::operator delete[](p, n, al);
            p = keep(::operator new(n, al, std::nothrow));
            EXPECT_ALIGNED(p, a);
            EXPECT_NONNULL(p);
            ::operator delete(p, al, std::nothrow);
            p = keep(::operator new[](n, al, std::nothrow));
            EXPECT_ALIGNED(p, a);
            ::operator delete[](p, al, std::nothrow);
            p = keep(::operator new(n, al));
            ::operator delete(p, n, al);
        }
    }
    // the expressions the compiler turns into these calls
    Obj *o = new Obj;
    delete o;
    Obj *arr = new Obj[17];
    delete[] arr;
    Aligned256 *a256 = new Aligned256;
    EXPECT_ALIGNED(a256, 256);
    delete a256;
    Aligned4k *a4k = new Aligned4k[3];
    EXPECT_ALIGNED(a4k, 4096);
    delete[] a4k;
}

TEST(failure_throws_or_returns_null)
{
    bool threw = false;
    try {
        keep(::operator new(huge_size));
    } catch (const std::bad_alloc &) {
        threw = true;
    }
    EXPECT_TRUE(threw);
    threw = false;
    try {
        keep(::operator new[](huge_size, std::align_val_t(64)));
    } catch (const std::bad_alloc &) {
        threw = true;
    }
    EXPECT_TRUE(threw);
    threw = false;
    try {
        keep(::operator new(64, std::align_val_t(size_t(1) << 31)));   // beyond DPM_MAX_ALIGN
    } catch (const std::bad_alloc &) {
        threw = true;
    }
    EXPECT_TRUE(threw);
    EXPECT_NULL(keep(::operator new(huge_size, std::nothrow)));
    EXPECT_NULL(keep(::operator new[](huge_size, std::nothrow)));
    EXPECT_NULL(keep(::operator new(huge_size, std::align_val_t(4096), std::nothrow)));
}

int handler_calls;

void handler_gives_up()
{
    handler_calls++;
    std::set_new_handler(nullptr);
}

void handler_throws()
{
    handler_calls++;
    throw std::bad_alloc();
}

TEST(new_handler_called)
{
    handler_calls = 0;
    std::set_new_handler(handler_gives_up);
    bool threw = false;
    try {
        keep(::operator new(huge_size));
    } catch (const std::bad_alloc &) {
        threw = true;
    }
    EXPECT_TRUE(threw);
    EXPECT_EQ_I(handler_calls, 1);
    handler_calls = 0;
    std::set_new_handler(handler_throws);
    EXPECT_NULL(keep(::operator new(huge_size, std::nothrow)));
    EXPECT_NULL(keep(::operator new[](huge_size, std::nothrow)));
    EXPECT_NULL(keep(::operator new(huge_size, std::align_val_t(64), std::nothrow)));
    EXPECT_NULL(keep(::operator new[](huge_size, std::align_val_t(64), std::nothrow)));
    EXPECT_EQ_I(handler_calls, 4);
    std::set_new_handler(nullptr);
}

// Under RLIMIT_AS a 48 MiB new fails until the handler frees a 64 MiB
// reserve; then it succeeds.
void *reserve;

void handler_frees_reserve()
{
    handler_calls++;
    ::operator delete(reserve);
    reserve = nullptr;
    std::set_new_handler(nullptr);
}

size_t vm_size()
{
    FILE *f = std::fopen("/proc/self/status", "r");
    char line[256];
    size_t kb = 0;
    while (f && std::fgets(line, sizeof line, f))
        if (std::sscanf(line, "VmSize: %zu kB", &kb) == 1)
            break;
    if (f)
        std::fclose(f);
    return kb << 10;
}

int reserve_child(void *)
{
    reserve = keep(::operator new(size_t(64) << 20));
    void *probe = keep(::operator new(1 << 20));   // warm every cache and arena
    ::operator delete(probe);
    // secure mode's quarantines hold freed blocks' address space, and a
    // failed allocation empties them: empty now, so the limit bites
    malloc_trim(0);
    size_t vm = vm_size();
    struct rlimit rl = {vm + (size_t(24) << 20), vm + (size_t(24) << 20)};
    if (vm == 0 || setrlimit(RLIMIT_AS, &rl) != 0)
        return 2;
    // free runs of mapped segments may still serve a block or two (the
    // limit counts address space): take them, until the limit bites
    void *p = nullptr;
    for (int i = 0; i < 8 && (p = ::operator new(size_t(48) << 20, std::nothrow)) != nullptr; i++)
        keep(p);
    if (p != nullptr)
        return 3;   // the limit never bit: the test proves nothing
    handler_calls = 0;
    std::set_new_handler(handler_frees_reserve);
    try {
        p = keep(::operator new(size_t(48) << 20));
    } catch (const std::bad_alloc &) {
        return 4;
    }
    std::memset(p, 7, size_t(48) << 20);
    ::operator delete(p);
    return handler_calls == 1 && reserve == nullptr ? 0 : 5;
}

TEST(new_handler_frees_reserve)
{
    test_child c;
    test_run_child(reserve_child, nullptr, &c, 60);
    char desc[128];
    EXPECT(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0, "child %s, stderr: %s",
           test_describe_status(c.status, desc, sizeof desc), c.err);
}

// ---- secure mode: DPMALLOC_CONF=secure:true --------------------------------

int wrong_size_delete(void *)
{
    Obj *o = new Obj;
    ::operator delete(o, 5000);
    return 0;
}

int wrong_size_aligned_delete(void *)
{
    void *p = ::operator new(100, std::align_val_t(4096));
    ::operator delete(p, 100000, std::align_val_t(4096));
    return 0;
}

int wrong_size_array_delete(void *)
{
    void *p = ::operator new[](300000);
    ::operator delete[](p, 200000);
    return 0;
}

void expect_size_abort(int (*fn)(void *), const char *what)
{
    test_child c;
    test_run_child(fn, nullptr, &c, 30);
    char desc[128];
    if (!(WIFSIGNALED(c.status) && WTERMSIG(c.status) == SIGABRT))
        TEST_FAIL("%s: child %s, stderr: %s", what, test_describe_status(c.status, desc, sizeof desc), c.err);
    if (!std::strstr(c.err, "dpmalloc: operator delete(): size does not match the block at 0x"))
        TEST_FAIL("%s: stderr: %s", what, c.err);
}

TEST(secure_sized_delete_checked)
{
    expect_size_abort(wrong_size_delete, "sized delete");
    expect_size_abort(wrong_size_aligned_delete, "sized aligned delete");
    expect_size_abort(wrong_size_array_delete, "sized array delete");
}

}  // namespace

int main(int argc, char **argv)
{
    bool secure = argc > 1 && std::strcmp(argv[1], "secure") == 0;
    secure_mode = secure;
    RUN(operator_new_is_dpmalloc);
    RUN(every_form_round_trips);
    RUN(failure_throws_or_returns_null);
    RUN(new_handler_called);
    RUN(new_handler_frees_reserve);
    if (secure)
        RUN(secure_sized_delete_checked);
    return test_done();
}
