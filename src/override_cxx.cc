/*
 * override_cxx.cc - every global operator new and delete, exported by the
 * overriding libraries (preloaded or linked) when a C++ compiler built
 * them. Without them, libstdc++'s operator new calls malloc through the
 * PLT and loops there; here each operator is one jump into override.c,
 * which inlines dpmalloc's fast paths.
 *
 * Failure follows the standard: new calls the new-handler until the
 * allocation succeeds and throws std::bad_alloc when there is none; the
 * nothrow forms return nullptr instead. Sized deletes hand their size to
 * the sized free, so the secure mode checks it.
 *
 * libdpmalloc.so must not depend on the C++ runtime: preloaded into a C
 * program it may not load libstdc++. So its build of this file is without
 * exceptions and RTTI and reaches the runtime (libstdc++, or libc++ with
 * libc++abi: the names below are the Itanium ABI's, which both export)
 * only through weak references (a C++ program has it loaded, so they
 * resolve) or by looking it up when needed (runtime_lookup).
 * The handler's exception and the one thrown here unwind through these
 * frames by their .eh_frame tables (-fasynchronous-unwind-tables), which
 * need nothing from the runtime.
 *
 * libdpmalloc.a gets a second build (DPM_CXX_STATIC_LIB): a weak
 * reference does not pull a member out of libstdc++.a, so with libstdc++
 * linked statically the weak references stay null and there is no .so to
 * look up. There this object references libstdc++ strongly and catches
 * the handler's std::bad_alloc itself (built with exceptions). That is
 * harmless for C programs: the linker pulls this object out of the
 * archive only for a reference to one of the operators (override.c
 * references cxx_new_retry weakly), i.e. only for C++ code, which links
 * libstdc++ anyway.
 */
#include "override_cxx.h"

extern "C" {
#include "error.h"
}

#include <dlfcn.h>
#include <stdlib.h>

#include <new>

#define CXX_EXPORT __attribute__((visibility("default")))

/* The mangled names below are those of LP64 Linux (size_t is unsigned long: "m"). */
static_assert(sizeof(size_t) == sizeof(unsigned long), "mangled names assume LP64");

typedef void (*handler_fn)();
typedef handler_fn (*get_handler_fn)();
typedef void (*throw_fn)();
typedef void *(*nothrow_new_fn)(size_t, const std::nothrow_t &);
typedef void *(*nothrow_new_aligned_fn)(size_t, std::align_val_t, const std::nothrow_t &);

#if DPM_CXX_STATIC_LIB
#if !defined(__cpp_exceptions)
#error "the static-library build of override_cxx.cc needs -fexceptions"
#endif
/* Strong: pulls new_handler.o and functexcept.o out of libstdc++.a. */
extern "C" {
handler_fn stdcxx_get_new_handler() __asm__("_ZSt15get_new_handlerv");
[[noreturn]] void stdcxx_throw_bad_alloc() __asm__("_ZSt17__throw_bad_allocv");
}
#else
/* The runtime's std::get_new_handler() and std::__throw_bad_alloc()
 * (libstdc++ and libc++ both define them): weak, so null where no C++
 * runtime was loaded with the program. */
extern "C" {
__attribute__((weak, visibility("default"))) handler_fn stdcxx_get_new_handler() __asm__("_ZSt15get_new_handlerv");
__attribute__((weak, visibility("default"), noreturn)) void stdcxx_throw_bad_alloc() __asm__("_ZSt17__throw_bad_allocv");
}
#endif

#if DPM_CXX_STATIC_LIB
static handler_fn current_handler() { return stdcxx_get_new_handler(); }
[[noreturn]] static void throw_bad_alloc() { stdcxx_throw_bad_alloc(); }
#else
/* Weak too: a fully static program has no dlopen (and then no libstdc++
 * that could come later). */
#pragma weak dlopen
#pragma weak dlsym
#pragma weak dlclose

/* name as the C++ runtime defines it, or nullptr where none is loaded.
 * First in the runtimes known by soname, libstdc++ and libc++ with
 * libc++abi, through their own handles: their definitions, never one of
 * ours that interposes them, and found also when a dlopen()ed library
 * brought the runtime with RTLD_LOCAL (outside the global scope a weak
 * reference is bound in). Then, for a runtime of another name, the
 * definition that follows ours in the global scope (RTLD_NEXT). Known
 * names come first so that another allocator preloaded after dpmalloc,
 * which may define the operators too, is not taken for the runtime. */
static void *runtime_lookup(const char *name)
{
    if (dlsym == nullptr)
        return nullptr;
    if (dlopen != nullptr && dlclose != nullptr) {
        static const char *const runtimes[] = {"libstdc++.so.6", "libc++abi.so.1", "libc++.so.1"};
        for (const char *soname : runtimes) {
            void *lib = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD);
            if (lib == nullptr)
                continue;
            void *sym = dlsym(lib, name);
            dlclose(lib);   /* only drops the reference RTLD_NOLOAD took */
            if (sym != nullptr)
                return sym;
        }
    }
    return dlsym(RTLD_NEXT, name);
}

static handler_fn current_handler()
{
    get_handler_fn get = stdcxx_get_new_handler;
    if (get == nullptr)
        get = reinterpret_cast<get_handler_fn>(runtime_lookup("_ZSt15get_new_handlerv"));
    return get != nullptr ? get() : nullptr;
}

[[noreturn]] static void throw_bad_alloc()
{
    throw_fn thrower = stdcxx_throw_bad_alloc;
    if (thrower == nullptr)
        thrower = reinterpret_cast<throw_fn>(runtime_lookup("_ZSt17__throw_bad_allocv"));
    if (thrower != nullptr)
        thrower();
    /* Only a C caller that looked the operator up by its mangled name
     * gets here: no C++ code runs without a C++ runtime loaded. */
    dpm_warn3("operator new(): out of memory, and no C++ runtime (libstdc++, libc++) is loaded to throw std::bad_alloc",
              NULL, NULL);
    abort();
}
#endif

static void *new_loop(size_t size, size_t align, bool nothrow);

void *cxx_new_retry(size_t size, size_t align, bool nothrow)
{
#if DPM_CXX_STATIC_LIB
    if (!nothrow)
        return new_loop(size, align, false);
    /* The standard's nothrow new: the handler may throw std::bad_alloc,
     * which becomes nullptr. */
    try {
        return new_loop(size, align, true);
    } catch (const std::bad_alloc &) {
        return nullptr;
    }
#else
    if (nothrow) {
        if (current_handler() == nullptr)
            return nullptr;
        const std::nothrow_t tag{};   /* not std::nothrow: that is the runtime's object */
        /* The handler may throw std::bad_alloc, which a nothrow new turns
         * into nullptr: that takes a catch, and with it the runtime's
         * personality routine and typeinfo, which this build must not
         * depend on. Every C++ runtime's nothrow operator new (libstdc++'s,
         * libc++abi's) is that catch around the throwing operator new,
         * i.e. around ours (the loop below): the runtime the program
         * uses catches its own exception. */
        if (align == 0) {
            nothrow_new_fn f = reinterpret_cast<nothrow_new_fn>(runtime_lookup("_ZnwmRKSt9nothrow_t"));
            if (f != nullptr)
                return f(size, tag);
        } else {
            nothrow_new_aligned_fn f =
                reinterpret_cast<nothrow_new_aligned_fn>(runtime_lookup("_ZnwmSt11align_val_tRKSt9nothrow_t"));
            if (f != nullptr)
                return f(size, std::align_val_t(align), tag);
        }
        /* A handler but no runtime to look up: no C++ code runs then,
         * only a C program calling the operator by name gets here (the
         * handler is someone's get_new_handler override). The loop below,
         * where a throwing handler's exception passes through. */
    }
    return new_loop(size, align, nothrow);
#endif
}

/* nothrow: nullptr rather than std::bad_alloc when there is no handler. */
static void *new_loop(size_t size, size_t align, bool nothrow)
{
    for (;;) {
        handler_fn handler = current_handler();
        if (handler == nullptr) {
            if (nothrow)
                return nullptr;
            throw_bad_alloc();
        }
        handler();
        void *p = cxx_try_alloc(size, align);
        if (p != nullptr)
            return p;
    }
}

static inline size_t align_of(std::align_val_t al) { return static_cast<size_t>(al); }

CXX_EXPORT void *operator new(size_t size) { return cxx_new(size); }
CXX_EXPORT void *operator new[](size_t size) { return cxx_new(size); }
CXX_EXPORT void *operator new(size_t size, const std::nothrow_t &) noexcept { return cxx_new_nothrow(size); }
CXX_EXPORT void *operator new[](size_t size, const std::nothrow_t &) noexcept { return cxx_new_nothrow(size); }

CXX_EXPORT void operator delete(void *p) noexcept { cxx_delete(p); }
CXX_EXPORT void operator delete[](void *p) noexcept { cxx_delete(p); }
CXX_EXPORT void operator delete(void *p, const std::nothrow_t &) noexcept { cxx_delete(p); }
CXX_EXPORT void operator delete[](void *p, const std::nothrow_t &) noexcept { cxx_delete(p); }
CXX_EXPORT void operator delete(void *p, size_t size) noexcept { cxx_delete_sized(p, size); }
CXX_EXPORT void operator delete[](void *p, size_t size) noexcept { cxx_delete_sized(p, size); }

CXX_EXPORT void *operator new(size_t size, std::align_val_t al) { return cxx_new_aligned(size, align_of(al)); }
CXX_EXPORT void *operator new[](size_t size, std::align_val_t al) { return cxx_new_aligned(size, align_of(al)); }
CXX_EXPORT void *operator new(size_t size, std::align_val_t al, const std::nothrow_t &) noexcept
{
    return cxx_new_aligned_nothrow(size, align_of(al));
}
CXX_EXPORT void *operator new[](size_t size, std::align_val_t al, const std::nothrow_t &) noexcept
{
    return cxx_new_aligned_nothrow(size, align_of(al));
}

/* An aligned block is freed like any other: its span knows its size. */
CXX_EXPORT void operator delete(void *p, std::align_val_t) noexcept { cxx_delete(p); }
CXX_EXPORT void operator delete[](void *p, std::align_val_t) noexcept { cxx_delete(p); }
CXX_EXPORT void operator delete(void *p, std::align_val_t, const std::nothrow_t &) noexcept { cxx_delete(p); }
CXX_EXPORT void operator delete[](void *p, std::align_val_t, const std::nothrow_t &) noexcept { cxx_delete(p); }
CXX_EXPORT void operator delete(void *p, size_t size, std::align_val_t) noexcept { cxx_delete_sized(p, size); }
CXX_EXPORT void operator delete[](void *p, size_t size, std::align_val_t) noexcept { cxx_delete_sized(p, size); }
