// r10_cxx_static_libstdcxx.cpp - a C++ program linked with libdpmalloc.a and
// a static libstdc++ (-static-libstdc++ or -static, common for shipped
// binaries) does not get std::bad_alloc from a failing operator new: it
// aborts with "dpmalloc: operator new(): out of memory, and no C++ runtime
// (libstdc++) is loaded to throw std::bad_alloc". And a nothrow new whose
// new-handler throws std::bad_alloc terminates the program instead of
// returning nullptr.
//
// Root cause (src/override_cxx.cc): std::__throw_bad_alloc and libstdc++'s
// nothrow operator new are reached through weak references or
// dlopen("libstdc++.so.6", RTLD_NOLOAD). A weak undefined reference does not
// pull an archive member out of libstdc++.a (functexcept.o holds
// __throw_bad_alloc; nothing else in a small program references it), and
// no libstdc++.so is loaded to dlsym from. So throw_bad_alloc() finds
// nothing and aborts; and cxx_new_retry's nothrow fallback ("the loop
// below, where a throwing handler's exception passes through") lets the
// handler's exception leave a noexcept operator: std::terminate.
// docs/libc.md says the abort happens only for "a C program calling _Znwm
// by name" and that nothrow forms return nullptr when the handler throws
// std::bad_alloc.
//
// Build/run (from the worktree, after building build/):
//   g++ -std=c++17 -O1 -static-libstdc++ tests/review/r10_cxx_static_libstdcxx.cpp \
//       build/libdpmalloc.a -o /tmp/r10s && /tmp/r10s throw; /tmp/r10s nothrow
//   (also with -static instead of -static-libstdc++)
// Expected: "ok: caught std::bad_alloc" / "ok: nothrow new -> nullptr", exit 0.
// Actual (70fb239): throw: the dpmalloc message above, abort (exit 134);
// nothrow: "terminate called after throwing an instance of
// 'std::bad_alloc'", abort (exit 134). Both pass with libstdc++ linked
// dynamically (no -static*).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>

static volatile size_t huge = SIZE_MAX / 2;
static int calls;
static void throwing_handler()
{
    calls++;
    throw std::bad_alloc();
}

int main(int argc, char **argv)
{
    if (argc > 1 && std::strcmp(argv[1], "nothrow") == 0) {
        std::set_new_handler(throwing_handler);
        void *p = ::operator new(huge, std::nothrow);
        std::printf("ok: nothrow new -> %p (handler calls %d)\n", p, calls);
        return p == nullptr ? 0 : 1;
    }
    try {
        char *p = new char[huge];
        std::printf("FAIL: new returned %p\n", static_cast<void *>(p));
        return 1;
    } catch (const std::bad_alloc &) {
        std::puts("ok: caught std::bad_alloc");
        return 0;
    }
}
