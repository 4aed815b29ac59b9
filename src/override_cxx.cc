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
 * the sized free, so the secure mode checks it. The one piece of C++ is
 * the failure path (cxx_new_retry); the core stays C.
 */
#include "override_cxx.h"

#include <new>

#define CXX_EXPORT __attribute__((visibility("default")))

void *cxx_new_retry(size_t size, size_t align, bool nothrow)
{
    for (;;) {
        std::new_handler handler = std::get_new_handler();
        if (handler == nullptr) {
            if (nothrow)
                return nullptr;
            throw std::bad_alloc();
        }
        if (nothrow) {
            try {
                handler();
            } catch (const std::bad_alloc &) {
                return nullptr;
            }
        } else {
            handler();
        }
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
