// cxx_plugin.cpp - a C++ library that a C program (cxx_from_c.c) dlopen()s
// with RTLD_LOCAL while libdpmalloc.so is preloaded: libstdc++ arrives
// only with it, after dpmalloc's weak references to the C++ runtime were
// bound (to nothing). Its operator new is dpmalloc's all the same, and
// must still throw std::bad_alloc, call the new-handler, and give nullptr
// from nothrow new when the handler throws.
#include <dlfcn.h>

#include <cstdint>
#include <cstring>
#include <new>

namespace {

volatile size_t huge_size = SIZE_MAX / 2;
int handler_calls;

void *keep(void *p)
{
    __asm__ volatile("" : "+r"(p));
    return p;
}

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

bool throws_bad_alloc(size_t size, size_t align)
{
    try {
        keep(align ? ::operator new(size, std::align_val_t(align)) : ::operator new(size));
    } catch (const std::bad_alloc &) {
        return true;
    }
    return false;
}

}  // namespace

// 0 when everything held, else the number of the first check that failed.
extern "C" __attribute__((visibility("default"))) int plugin_run()
{
    Dl_info info;
    void *(*volatile nw)(size_t) = &::operator new;
    if (!dladdr(reinterpret_cast<void *>(nw), &info) || !info.dli_fname || !std::strstr(info.dli_fname, "libdpmalloc"))
        return 1;   // the operators are not dpmalloc's: the test proves nothing
    int *v = new int[100];
    v[99] = 7;
    delete[] v;
    if (!throws_bad_alloc(huge_size, 0))
        return 2;
    if (!throws_bad_alloc(huge_size, 64))
        return 3;
    handler_calls = 0;
    std::set_new_handler(handler_gives_up);
    if (!throws_bad_alloc(huge_size, 0) || handler_calls != 1)
        return 4;
    handler_calls = 0;
    std::set_new_handler(handler_throws);
    if (keep(::operator new(huge_size, std::nothrow)) != nullptr)
        return 5;
    if (keep(::operator new[](huge_size, std::align_val_t(256), std::nothrow)) != nullptr)
        return 6;
    if (handler_calls != 2)
        return 7;
    std::set_new_handler(nullptr);
    if (keep(::operator new(huge_size, std::nothrow)) != nullptr)
        return 8;
    return 0;
}
