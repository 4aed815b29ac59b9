/*
 * override_cxx.h - the seam between the C++ operators (override_cxx.cc)
 * and the C allocation paths (override.c). The operators are one jump
 * each into these functions, which inline the malloc/free fast paths; only
 * a failed allocation goes back into C++ (cxx_new_retry), for the
 * new-handler and std::bad_alloc. Hidden: not part of any interface.
 * Plain C declarations, so that both languages include this file.
 */
#ifndef DPM_OVERRIDE_CXX_H
#define DPM_OVERRIDE_CXX_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DPM_CXX_HIDDEN __attribute__((visibility("hidden")))
/* Cannot throw: lets the noexcept operators jump to them. */
#define DPM_CXX_NOTHROW __attribute__((nothrow))

/* operator new / new[]: a block, or whatever cxx_new_retry gives (it
 * throws). align 0: the default alignment. */
DPM_CXX_HIDDEN void *cxx_new(size_t size);
DPM_CXX_HIDDEN DPM_CXX_NOTHROW void *cxx_new_nothrow(size_t size);
DPM_CXX_HIDDEN void *cxx_new_aligned(size_t size, size_t align);
DPM_CXX_HIDDEN DPM_CXX_NOTHROW void *cxx_new_aligned_nothrow(size_t size, size_t align);
/* One allocation attempt, NULL on failure (no handler, no throw). */
DPM_CXX_HIDDEN DPM_CXX_NOTHROW void *cxx_try_alloc(size_t size, size_t align);
DPM_CXX_HIDDEN DPM_CXX_NOTHROW void cxx_delete(void *p);
/* Sized forms: the size promise is checked in the secure mode. */
DPM_CXX_HIDDEN DPM_CXX_NOTHROW void cxx_delete_sized(void *p, size_t size);

/* In override_cxx.cc: calls the new-handler until cxx_try_alloc
 * succeeds; without a handler throws std::bad_alloc (through libstdc++,
 * aborting with a message where none is loaded), or, nothrow, returns
 * NULL (also when the handler throws std::bad_alloc). */
DPM_CXX_HIDDEN void *cxx_new_retry(size_t size, size_t align, bool nothrow);

#ifdef __cplusplus
}
#endif

#endif
