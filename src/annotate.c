/*
 * annotate.c - the out-of-line half of annotate.h: block states told to
 * memcheck (client requests) and ASan (manual poisoning). Empty unless the
 * build has one of them. May call: the page map (span_of), nothing that
 * allocates or locks.
 */
#include "annotate.h"

#if DPM_ANNOTATE
#include "span.h"

#if DPM_VALGRIND
#include <valgrind/memcheck.h>
#endif
#if DPM_ASAN
#include <sanitizer/asan_interface.h>
#endif

#define KEY_OFF 8
#define KEY_LEN 4
/* Blocks shorter than this have no key (at-offset blocks can be). */
#define KEY_END (KEY_OFF + KEY_LEN)

/* The usable size of the block that starts at p, or false if p starts no
 * live-looking block (foreign or interior pointers: the allocator reports
 * those itself). */
static bool block_usable(const void *p, size_t *usable)
{
    const span_t *s = p != NULL ? span_of(p) : NULL;
    if (s == NULL)
        return false;
    if (s->kind == SPAN_SLAB && span_is_block_start(s, (uintptr_t)p)) {
        *usable = s->objsize;
        return true;
    }
    if (s->kind == SPAN_LARGE && (uintptr_t)p == s->base) {
        *usable = s->usable;
        return true;
    }
    return false;
}

static void mark_noaccess(void *p, size_t n)
{
    if (n == 0)
        return;
#if DPM_VALGRIND
    VALGRIND_MAKE_MEM_NOACCESS(p, n);
#endif
#if DPM_ASAN
    ASAN_POISON_MEMORY_REGION(p, n);
#endif
}

/* Accessible, contents undefined (memcheck) */
static void mark_undefined(void *p, size_t n)
{
    if (n == 0)
        return;
#if DPM_VALGRIND
    VALGRIND_MAKE_MEM_UNDEFINED(p, n);
#endif
#if DPM_ASAN
    ASAN_UNPOISON_MEMORY_REGION(p, n);
#endif
}

static void mark_defined(void *p, size_t n)
{
#if DPM_VALGRIND
    VALGRIND_MAKE_MEM_DEFINED(p, n);
#endif
#if DPM_ASAN
    ASAN_UNPOISON_MEMORY_REGION(p, n);
#endif
}

#if DPM_VALGRIND
static bool vg_addressable(const char *a)
{
    char v;
    return VALGRIND_GET_VBITS(a, &v, 1) == 1;   /* 2: unaddressable, no error reported */
}
#endif

/* The size the program may use of a handed-out block: its accessible
 * prefix (the slack after it is closed, so the boundary is found by
 * bisection; ASan's shadow gives it exactly). */
static size_t requested_size(const void *p, size_t usable)
{
#if DPM_ASAN
    const char *bad = __asan_region_is_poisoned((void *)(uintptr_t)p, usable);
    return bad != NULL ? (size_t)(bad - (const char *)p) : usable;
#else
    if (!RUNNING_ON_VALGRIND)
        return usable;
    size_t lo = 0, hi = usable;   /* [0, lo) accessible, [hi, usable) not */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (vg_addressable((const char *)p + mid))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
#endif
}

void ann_alloc(void *p, size_t size, bool zeroed)
{
    size_t usable;
    if (!block_usable(p, &usable))
        return;
#if DPM_VALGRIND
    VALGRIND_MALLOCLIKE_BLOCK(p, size, 0, zeroed);
#else
    (void)zeroed;
    mark_undefined(p, size);
#endif
    mark_noaccess((char *)p + size, usable - size);
}

void ann_free(void *p)
{
    size_t usable;
    if (p == NULL)
        return;
#if DPM_VALGRIND
    VALGRIND_FREELIKE_BLOCK(p, 0);
#endif
    if (!block_usable(p, &usable))
        return;
    mark_noaccess(p, usable);
    if (usable >= KEY_END)
        mark_defined((char *)p + KEY_OFF, KEY_LEN);   /* for the free path's key check */
}

void ann_usable(const void *p)
{
    size_t usable;
    if (!block_usable(p, &usable))
        return;
    size_t req = requested_size(p, usable);
    if (req == usable)
        return;
#if DPM_VALGRIND
    VALGRIND_RESIZEINPLACE_BLOCK(p, req, usable, 0);
#else
    mark_undefined((char *)p + req, usable - req);
#endif
}

/* The key bytes of a block opened for a check of the allocator (the
 * block's requested size, whether it has a key, and the definedness of
 * the key bytes inside the request), to be put back as they were. */
typedef struct key_state {
    size_t req;
    bool has_key;
#if DPM_VALGRIND
    unsigned char vbits[KEY_LEN];
#endif
} key_state_t;

/* The realloc in progress on this thread (realloc runs no user code, so
 * one is enough), and the key a check is peeking at. */
static __thread void *realloc_p;
static __thread key_state_t realloc_key;
static __thread key_state_t peek_key;

static void key_open(void *p, size_t usable, key_state_t *k)
{
    k->req = requested_size(p, usable);
    k->has_key = usable >= KEY_END;
    if (!k->has_key)
        return;
#if DPM_VALGRIND
    if (k->req > KEY_OFF)
        VALGRIND_GET_VBITS((char *)p + KEY_OFF, k->vbits, k->req < KEY_OFF + KEY_LEN ? k->req - KEY_OFF : KEY_LEN);
#endif
    mark_defined((char *)p + KEY_OFF, KEY_LEN);   /* the double-free check reads it */
}

void ann_realloc_begin(void *p)
{
    size_t usable;
    realloc_p = NULL;
    if (!block_usable(p, &usable))
        return;
    realloc_p = p;
    key_open(p, usable, &realloc_key);
}

/* Puts the key bytes of p back as k recorded them. */
static void key_restore(void *p, const key_state_t *k)
{
    if (!k->has_key)
        return;
    char *key = (char *)p + KEY_OFF;
    size_t req = k->req;
    size_t in_block = req <= KEY_OFF ? 0 : req - KEY_OFF < KEY_LEN ? req - KEY_OFF : KEY_LEN;
#if DPM_VALGRIND
    if (in_block != 0)
        VALGRIND_SET_VBITS(key, k->vbits, in_block);
#endif
    mark_noaccess(key + in_block, KEY_LEN - in_block);
}

void ann_key_peek(void *p)
{
    size_t usable;
    peek_key.has_key = false;
    if (block_usable(p, &usable))
        key_open(p, usable, &peek_key);
}

void ann_key_unpeek(void *p)
{
    key_restore(p, &peek_key);
    peek_key.has_key = false;
}

void ann_realloc_done(void *old, void *p, size_t size)
{
    size_t usable;
    if (old == NULL) {
        ann_alloc(p, size, false);
        return;
    }
    if (realloc_p != old)   /* freed (size 0), moved, or failed before the block was looked at */
        return;
    realloc_p = NULL;
    key_restore(old, &realloc_key);
    if (p != old || !block_usable(p, &usable))   /* failed: old is as it was */
        return;
#if DPM_VALGRIND
    VALGRIND_RESIZEINPLACE_BLOCK(p, realloc_key.req, size, 0);
#else
    mark_undefined((char *)p + realloc_key.req, size > realloc_key.req ? size - realloc_key.req : 0);
#endif
    mark_noaccess((char *)p + size, usable - size);
}

void ann_copy_from(void *p, size_t usable)
{
    size_t req;
    if (realloc_p == p) {
        realloc_p = NULL;
        req = realloc_key.req;
        key_restore(p, &realloc_key);
    } else {
        req = requested_size(p, usable);
    }
    mark_undefined((char *)p + req, usable - req);
}

void ann_open(void *p, size_t n)
{
    if (p != NULL)
        mark_undefined(p, n);
}
void ann_close(void *p, size_t n) { mark_noaccess(p, n); }

void ann_close_key(void *p)
{
    size_t usable;
    if (block_usable(p, &usable) && usable >= KEY_END)
        mark_noaccess((char *)p + KEY_OFF, KEY_LEN);
}

void ann_slot_below(void *head)
{
#if DPM_VALGRIND
    if (head != NULL)
        VALGRIND_MAKE_MEM_UNDEFINED((char *)head - sizeof(void *), sizeof(void *));
#else
    (void)head;
#endif
}

void ann_unmap(void *p, size_t n)
{
#if DPM_ASAN
    ASAN_UNPOISON_MEMORY_REGION(p, n);
#else
    (void)p, (void)n;
#endif
}

#endif
