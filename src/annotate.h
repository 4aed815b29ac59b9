/*
 * annotate.h - what Valgrind's memcheck (-DDPM_VALGRIND=ON) and
 * AddressSanitizer (-DDPM_SANITIZE=address) are told about dpmalloc's
 * blocks, so that they report use after free, and reads or writes past the
 * requested size, inside dpmalloc's heap as they do for glibc's.
 *
 * Every hook is a macro here; without either tool they expand to nothing
 * and the allocator's code is the same as if they were not there.
 *
 * The states a block goes through (docs/debugging.md):
 *  - handed out: [p, p + requested) accessible, [p + requested, block end)
 *    not (memcheck: a MALLOCLIKE block of the requested size; ASan: the
 *    slack poisoned). Set by DPM_ANN_ALLOC at each public entry point once
 *    the block is chosen, so whatever the allocator wrote into it before
 *    (the free key, zeroing, junk) happened under DPM_ANN_OPEN*.
 *  - freed, cached or back in its slab: not accessible (FREELIKE,
 *    poisoned). DPM_ANN_FREE, at the entry point before the free path runs,
 *    leaves only the free key's 4 bytes at p + 8 open, for the free path
 *    (tcache.h, TC_FREE_KEY), which closes them before it publishes the
 *    block (DPM_ANN_CLOSE_KEY).
 *  - dpm_usable_size / malloc_usable_size make the whole usable size
 *    accessible: the API lets the program use it (DPM_ANN_USABLE).
 * realloc: DPM_ANN_REALLOC_BEGIN (before the double-free check reads the
 * key of the live block) remembers the old requested size; in place,
 * DPM_ANN_REALLOC_DONE at the entry point resizes; a move annotates the
 * new block before the copy (DPM_ANN_ALLOC), lets the copy read the old
 * block's slack (DPM_ANN_COPY_FROM) and frees the old one (DPM_ANN_FREE).
 *
 * A new entry point that hands out, frees or resizes blocks (a libc name,
 * a C++ operator) calls these macros as override.c's do; without them
 * memcheck reports the block as never allocated, or as leaked.
 *
 * Never built with both tools: Valgrind cannot run ASan binaries.
 */
#ifndef DPM_ANNOTATE_H
#define DPM_ANNOTATE_H

#include "util.h"

#if defined(__SANITIZE_ADDRESS__)
#define DPM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DPM_ASAN 1
#endif
#endif
#ifndef DPM_ASAN
#define DPM_ASAN 0
#endif
#ifndef DPM_VALGRIND
#define DPM_VALGRIND 0
#endif
#define DPM_ANNOTATE (DPM_VALGRIND || DPM_ASAN)

#if DPM_ANNOTATE
/* annotate.c */
void ann_alloc(void *p, size_t size, bool zeroed);
void ann_free(void *p);
void ann_usable(const void *p);
void ann_realloc_begin(void *p);
void ann_realloc_done(void *old, void *p, size_t size);
void ann_copy_from(void *p, size_t usable);
void ann_open(void *p, size_t n);
void ann_close(void *p, size_t n);
void ann_close_key(void *p);
void ann_key_peek(void *p);
void ann_key_unpeek(void *p);
void ann_slot_below(void *head);
void ann_unmap(void *p, size_t n);

/* p (NULL allowed) was handed out for size bytes; zeroed: they read 0. */
#define DPM_ANN_ALLOC(p, size, zeroed) ann_alloc((p), (size), (zeroed))
/* p (NULL allowed) is about to be freed. */
#define DPM_ANN_FREE(p) ann_free(p)
/* The program may use all of p's usable size from now on. */
#define DPM_ANN_USABLE(p) ann_usable(p)
#define DPM_ANN_REALLOC_BEGIN(p) ann_realloc_begin(p)
/* At realloc's entry points: old was passed, p returned. */
#define DPM_ANN_REALLOC_DONE(old, p, size) ann_realloc_done((old), (p), (size))
/* realloc copies up to usable bytes out of p. */
#define DPM_ANN_COPY_FROM(p, usable) ann_copy_from((p), (usable))
/* The allocator writes [p, p + n) of a block not handed out yet. */
#define DPM_ANN_OPEN(p, n) ann_open((p), (n))
/* ... or [p + from, p + to) of a block it resizes (nothing if to <= from). */
#define DPM_ANN_OPEN_RANGE(p, from, to) ann_open((char *)(p) + (from), (to) > (from) ? (to) - (from) : 0)
/* The allocator reads or writes the free key of p (tcache.h). */
#define DPM_ANN_OPEN_KEY(p) ann_open((char *)(p) + 8, 4)
#define DPM_ANN_CLOSE(p, n) ann_close((p), (n))
#define DPM_ANN_CLOSE_KEY(p) ann_close_key(p)
/* A check reads the free key of p, which may be live: the key bytes are
 * readable between the two, and as they were after DPM_ANN_KEY_UNPEEK. */
#define DPM_ANN_KEY_PEEK(p) ann_key_peek(p)
#define DPM_ANN_KEY_UNPEEK(p) ann_key_unpeek(p)
/* The thread-cache slot just below head no longer holds a cached block:
 * the pointer left in it must not make a leaked block look reachable to
 * memcheck's leak check (head NULL: a bin without slots). */
#if DPM_VALGRIND
#define DPM_ANN_SLOT_BELOW(head) ann_slot_below(head)
#else
#define DPM_ANN_SLOT_BELOW(head) ((void)0)
#endif
/* [p, p + n) goes back to the kernel: whatever maps there next starts clean. */
#define DPM_ANN_UNMAP(p, n) ann_unmap((p), (n))
#else
#define DPM_ANN_ALLOC(p, size, zeroed) ((void)0)
#define DPM_ANN_FREE(p) ((void)0)
#define DPM_ANN_USABLE(p) ((void)0)
#define DPM_ANN_REALLOC_BEGIN(p) ((void)0)
#define DPM_ANN_REALLOC_DONE(old, p, size) ((void)0)
#define DPM_ANN_COPY_FROM(p, usable) ((void)0)
#define DPM_ANN_OPEN(p, n) ((void)0)
#define DPM_ANN_OPEN_RANGE(p, from, to) ((void)0)
#define DPM_ANN_OPEN_KEY(p) ((void)0)
#define DPM_ANN_CLOSE(p, n) ((void)0)
#define DPM_ANN_CLOSE_KEY(p) ((void)0)
#define DPM_ANN_KEY_PEEK(p) ((void)0)
#define DPM_ANN_KEY_UNPEEK(p) ((void)0)
#define DPM_ANN_SLOT_BELOW(head) ((void)0)
#define DPM_ANN_UNMAP(p, n) ((void)0)
#endif

#endif
