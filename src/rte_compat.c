/*
 * rte_compat.c - DPDK's rte_malloc API on dpmalloc (include/dpmalloc/
 * rte_compat.h): socket heaps, named heaps as manual arenas, per-type
 * counting through the typed allocation of alloc.c.
 *
 * A heap is an arena set: the socket heaps of libdpmalloc are the calling
 * thread's arena (whichever automatic arena it was given); with a backend
 * (libdpmalloc_dpdk) each socket gets one arena of the backend's, made at
 * its first use; a named heap is one manual arena. Heaps are looked up
 * without a lock (socket ids index tables whose entries are published with
 * release stores); create and destroy serialise on heaps_lock, which is
 * taken before any allocator lock and held across fork.
 *
 * With a backend, pointers that are not dpmalloc's (per the page map) but
 * that the backend says are blocks of its own allocator (DPDK's rte_malloc
 * heap: code that was not switched, a library) are handed to it by free,
 * realloc and validate, and virt2iova asks it for IO addresses.
 *
 * Owns: the heap registry. May call: alloc (heap_alloc_impl, free_fast),
 * arena (lookup, stats of a run index), stats (snapshot), types, ctl.
 */
#include "alloc.h"
#include "error.h"
#include "stats.h"
#include "types.h"
#include "canary.h"
#include "guarded.h"
#include "quarantine.h"

#include <dpmalloc.h>
#include <dpmalloc/rte_compat.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

#define CACHE_LINE DPM_RTE_CACHE_LINE_SIZE
#define MAX_SOCKETS 64        /* socket heaps a backend may ask for */
#define NO_ARENA UINT32_MAX

typedef struct named_heap {
    int socket;               /* its id; 0 while the slot is free */
    uint32_t arena;           /* written before socket is published */
    char name[DPM_RTE_HEAP_NAME_MAX_LEN];
} named_heap_t;

static named_heap_t named[DPM_RTE_MAX_NAMED_HEAPS];
/* ids given so far; a slot's heap has id MIN + k * MAX + slot */
static unsigned named_generation[DPM_RTE_MAX_NAMED_HEAPS];
static uint32_t socket_arena[MAX_SOCKETS];   /* backend mode: NO_ARENA until made */
static dpm_rte_backend_t backend;
static bool have_backend;
static pthread_mutex_t heaps_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void heaps_prefork(void) { pthread_mutex_lock(&heaps_lock); }
static void heaps_postfork_parent(void) { pthread_mutex_unlock(&heaps_lock); }
static void heaps_postfork_child(void) { pthread_mutex_init(&heaps_lock, NULL); }
static void register_atfork(void) { pthread_atfork(heaps_prefork, heaps_postfork_parent, heaps_postfork_child); }

static void lock_heaps(void)
{
    pthread_once(&atfork_once, register_atfork);
    pthread_mutex_lock(&heaps_lock);
}

static void *fail(int e)
{
    errno = e;
    return NULL;
}

static int fail_int(int e)
{
    errno = e;
    return -1;
}

/* ---- which heap ------------------------------------------------------- */

/* The heap a socket id names. kind NAMED: arena is the named heap's;
 * SOCKET with arena NULL: the calling thread's arena (libdpmalloc's own
 * socket heaps). */
typedef enum { HEAP_NONE, HEAP_SOCKET, HEAP_NAMED } heap_kind_t;
typedef struct heap_ref {
    heap_kind_t kind;
    int socket;               /* resolved: never SOCKET_ID_ANY */
    arena_t *arena;
} heap_ref_t;

static int nsockets(void) { return have_backend ? backend.nsockets : 1; }

static int caller_node(void)
{
    if (have_backend && backend.node_of_caller != NULL) {
        int n = backend.node_of_caller(backend.ctx);
        if (n >= 0 && n < nsockets())
            return n;
    }
    return 0;
}

static named_heap_t *named_of_socket(int socket)
{
    if (socket < DPM_RTE_NAMED_HEAP_MIN_SOCKET_ID)
        return NULL;
    named_heap_t *h = &named[(unsigned)(socket - DPM_RTE_NAMED_HEAP_MIN_SOCKET_ID) % DPM_RTE_MAX_NAMED_HEAPS];
    return __atomic_load_n(&h->socket, __ATOMIC_ACQUIRE) == socket ? h : NULL;
}

/* The backend's arena for socket s, made at first use. Made outside
 * heaps_lock's fast check, published once: a loser of a race destroys
 * nothing (the backend makes one arena per call, so the loser's stays
 * unused but valid). */
static arena_t *backend_socket_arena(int s)
{
    uint32_t a = __atomic_load_n(&socket_arena[s], __ATOMIC_ACQUIRE);
    if (a == NO_ARENA) {
        lock_heaps();
        a = socket_arena[s];
        unsigned made;
        if (a == NO_ARENA && backend.create(backend.ctx, NULL, s, &made) == 0) {
            a = made;
            __atomic_store_n(&socket_arena[s], a, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&heaps_lock);
        if (a == NO_ARENA)
            return NULL;
    }
    return arena_get(a);
}

static bool resolve(int socket, heap_ref_t *h)
{
    *h = (heap_ref_t){.kind = HEAP_NONE};
    if (socket == DPM_RTE_SOCKET_ID_ANY)
        socket = caller_node();
    if (socket >= 0 && socket < nsockets()) {
        h->kind = HEAP_SOCKET;
        h->socket = socket;
        if (have_backend && (h->arena = backend_socket_arena(socket)) == NULL)
            h->kind = HEAP_NONE;
        return h->kind != HEAP_NONE;
    }
    named_heap_t *n = named_of_socket(socket);
    if (n == NULL || (h->arena = arena_get(__atomic_load_n(&n->arena, __ATOMIC_RELAXED))) == NULL)
        return false;
    h->kind = HEAP_NAMED;
    h->socket = socket;
    return true;
}

/* The one place where a socket heap of libdpmalloc's own memory hands
 * out a block. With the NUMA API (dpm_malloc_socket) this becomes, for
 * untyped blocks, dpm_malloc_socket(size, align, socket) or its zeroing
 * variant; typed ones stay on heap_alloc_impl of the node's arena. */
static void *own_socket_alloc(uint16_t type, size_t size, size_t align, int socket, bool zero)
{
    (void)socket;   /* one node: resolve() accepted only node 0 */
    return heap_alloc_impl(NULL, type, size, align, zero);
}

static void *heap_alloc(const heap_ref_t *h, uint16_t type, size_t size, size_t align, bool zero)
{
    if (h->kind == HEAP_SOCKET && h->arena == NULL)
        return own_socket_alloc(type, size, align, h->socket, zero);
    return heap_alloc_impl(h->arena, type, size, align, zero);
}

/* Does arena a belong to heap h? */
static bool heap_has_arena(const heap_ref_t *h, const arena_t *a)
{
    if (h->arena != NULL)
        return a == h->arena;
    return !a->manual;   /* libdpmalloc's socket heap: the automatic arenas */
}

/* ---- allocation ------------------------------------------------------- */

/* DPDK's argument rules: size 0 and non-power-of-two alignments fail;
 * every block is at least cache-line aligned. */
static bool args_ok(size_t size, unsigned align, size_t *out_align)
{
    if (size == 0 || (align & (align - 1)) != 0) {
        errno = EINVAL;
        return false;
    }
    *out_align = align < CACHE_LINE ? CACHE_LINE : align;
    return true;
}

static void *rte_alloc(const char *type, size_t size, unsigned align, int socket, bool zero)
{
    size_t al;
    heap_ref_t h;
    if (!args_ok(size, align, &al))
        return NULL;
    /* the common call: untyped, any socket, dpmalloc's own memory */
    if (socket == DPM_RTE_SOCKET_ID_ANY && !have_backend && (type == NULL || type[0] == '\0'))
        return own_socket_alloc(0, size, al, 0, zero);
    if (!resolve(socket, &h))
        return fail(EINVAL);
    return heap_alloc(&h, type_id_of(type), size, al, zero);
}

DPM_EXPORT void *dpm_rte_malloc(const char *type, size_t size, unsigned align)
{
    return rte_alloc(type, size, align, DPM_RTE_SOCKET_ID_ANY, false);
}

DPM_EXPORT void *dpm_rte_zmalloc(const char *type, size_t size, unsigned align)
{
    return rte_alloc(type, size, align, DPM_RTE_SOCKET_ID_ANY, true);
}

DPM_EXPORT void *dpm_rte_malloc_socket(const char *type, size_t size, unsigned align, int socket)
{
    return rte_alloc(type, size, align, socket, false);
}

DPM_EXPORT void *dpm_rte_zmalloc_socket(const char *type, size_t size, unsigned align, int socket)
{
    return rte_alloc(type, size, align, socket, true);
}

DPM_EXPORT void *dpm_rte_calloc_socket(const char *type, size_t num, size_t size, unsigned align, int socket)
{
    size_t total;
    if (__builtin_mul_overflow(num, size, &total))
        return fail(ENOMEM);
    return rte_alloc(type, total, align, socket, true);
}

DPM_EXPORT void *dpm_rte_calloc(const char *type, size_t num, size_t size, unsigned align)
{
    return dpm_rte_calloc_socket(type, num, size, align, DPM_RTE_SOCKET_ID_ANY);
}

/* A block of the backend's own allocator: not dpmalloc's, and the backend
 * claims it. Only with a backend that has foreign blocks. */
static bool foreign_block(const void *p)
{
    return have_backend && backend.foreign_owns != NULL && p != NULL && span_of(p) == NULL &&
           backend.foreign_owns(backend.ctx, p);
}

DPM_EXPORT void dpm_rte_free(void *ptr)
{
    if (unlikely(have_backend) && foreign_block(ptr)) {
        backend.foreign_free(backend.ctx, ptr);
        return;
    }
    DPM_ANN_FREE(ptr);
    free_fast(ptr, "dpm_rte_free");
}

/* ---- blocks ----------------------------------------------------------- */

/* The span of a live block starting at p, or NULL: the checks of a free,
 * without the abort. */
static const span_t *live_block(const void *p)
{
    const span_t *s = p != NULL ? span_of(p) : NULL;
    if (s == NULL)
        return NULL;
    if (s->kind == SPAN_SLAB) {
        uint64_t idx = span_block_index(s, (uintptr_t)p);
        if (idx > s->last_index || span_block_is_free(s, idx))
            return NULL;
    } else if (s->kind != SPAN_LARGE || (uintptr_t)p != s->base || __atomic_load_n(&s->parked, __ATOMIC_RELAXED)) {
        return NULL;
    }
    bool keyed = false;
    if (s->tcache_class != TC_NONE) {
        DPM_ANN_KEY_PEEK((void *)p);   /* the key of a live block lies in its slack */
        keyed = *tc_key_word((void *)p) == TC_FREE_KEY;
        DPM_ANN_KEY_UNPEEK((void *)p);
    }
    /* The key only says "maybe cached": a program may store its value in
     * bytes 8..11 of a live block. As free does (check_not_cached),
     * a keyed block is looked up in the caches; only a block found there
     * was freed. */
    if (keyed && block_is_cached(p, s->tcache_class))
        return NULL;   /* freed into a thread cache */
    if (s->kind == SPAN_SLAB && s->type_ids != NULL && typed_block_stashed(p, s))
        return NULL;   /* freed into a stash of typed blocks */
    if (opt.secure && s->kind == SPAN_SLAB && secure_block_freed(p, s))
        return NULL;   /* freed into secure mode's quarantine, or through it into a cache */
    return s;
}


static uint16_t block_type(const span_t *s, const void *p)
{
    if (s->kind == SPAN_LARGE)
        return s->type_id;
    return s->type_ids != NULL ? s->type_ids[span_index_of(s, (uintptr_t)p)] : 0;
}

DPM_EXPORT int dpm_rte_malloc_validate(const void *ptr, size_t *size)
{
    if (guarded_in_pool(ptr)) {   /* a block of guard_sample (malloc's) */
        size_t n = guarded_live_size(ptr, "dpm_rte_malloc_validate");
        if (size != NULL)
            *size = n;
        return 0;
    }
    const span_t *s = live_block(ptr);
    if (s == NULL) {
        if (foreign_block(ptr))
            return backend.foreign_validate(backend.ctx, ptr, size);
        return fail_int(EINVAL);
    }
    if (size != NULL)
        *size = span_usable(s);
    return 0;
}

/* A block stays where it is while it is in the wanted heap, aligned, big
 * enough and not more than twice too big (slabs) or a quarter too big
 * (page runs), as dpm_realloc keeps blocks. */
static bool keeps_place(const span_t *s, const void *p, size_t size, size_t align)
{
    size_t usable = span_usable(s);
    if (((uintptr_t)p & (align - 1)) != 0 || size > usable)
        return false;
    if (opt.secure && !request_could_make(s, size))
        return false;   /* a sized free of the new size must pass the check */
    return s->kind == SPAN_SLAB ? size > usable / 2 : usable - size <= size / 4;
}

DPM_EXPORT void *dpm_rte_realloc_socket(void *ptr, size_t size, unsigned int align, int socket)
{
    if (ptr == NULL)
        return dpm_rte_malloc_socket(NULL, size, align, socket);
    if (foreign_block(ptr)) {
        /* stays in its allocator; size 0 frees, as the layer's realloc and
         * DPDK's documentation say (DPDK 22.11's rte_realloc does not) */
        if (size == 0) {
            backend.foreign_free(backend.ctx, ptr);
            return NULL;
        }
        return backend.foreign_realloc(backend.ctx, ptr, size, align, socket);
    }
    if (size == 0) {
        DPM_ANN_FREE(ptr);
        free_fast(ptr, "dpm_rte_realloc");
        return NULL;
    }
    size_t al;
    if (!args_ok(size, align, &al))
        return NULL;
    if (guarded_in_pool(ptr)) {   /* a block of guard_sample (malloc's): moves to the heap asked for */
        size_t old = guarded_live_size(ptr, "dpm_rte_realloc");
        return realloc_move(ptr, old, dpm_rte_malloc_socket(NULL, size, align, socket), size, "dpm_rte_realloc");
    }
    const span_t *s = live_block(ptr);
    if (s == NULL)
        dpm_misuse("dpm_rte_realloc", ptr, "invalid pointer or freed block");
    heap_ref_t h;
    if (socket == DPM_RTE_SOCKET_ID_ANY) {
        /* keep the block's heap */
        h = (heap_ref_t){.kind = s->arena->manual ? HEAP_NAMED : HEAP_SOCKET, .arena = s->arena};
        if (!have_backend && !s->arena->manual)
            h.arena = NULL;
    } else if (!resolve(socket, &h)) {
        return fail(EINVAL);
    }
    uint16_t type = block_type(s, ptr);
    if (heap_has_arena(&h, s->arena) && keeps_place(s, ptr, size, al)) {
        if (s->kind == SPAN_LARGE)
            ((span_t *)s)->requested = size;   /* the caller's block: what a sized free of it promises now */
        DPM_ANN_REALLOC_BEGIN(ptr);   /* records the old size, for the resize */
        DPM_ANN_REALLOC_DONE(ptr, ptr, size);
        return ptr;
    }
    /* Untyped blocks of libdpmalloc's socket heap: dpmalloc's realloc,
     * which grows page runs in place. */
    if (h.arena == NULL && type == 0 && heap_has_arena(&h, s->arena))
        return dpm_realloc_aligned(ptr, size, al);
    return realloc_move(ptr, span_usable(s), heap_alloc(&h, type, size, al, false), size, "dpm_rte_realloc");
}

DPM_EXPORT void *dpm_rte_realloc(void *ptr, size_t size, unsigned int align)
{
    return dpm_rte_realloc_socket(ptr, size, align, DPM_RTE_SOCKET_ID_ANY);
}

/* The IO address of a byte of a block: the backend's answer for dpmalloc's
 * blocks and its own; without a backend no block is device memory. */
DPM_EXPORT uint64_t dpm_rte_malloc_virt2iova(const void *addr)
{
    uint64_t iova = DPM_RTE_BAD_IOVA;
    if (addr != NULL && have_backend && backend.virt2iova != NULL && (span_of(addr) != NULL || foreign_block(addr)))
        iova = backend.virt2iova(backend.ctx, addr);
    if (iova == DPM_RTE_BAD_IOVA)
        errno = EINVAL;
    return iova;
}

/* ---- named heaps ------------------------------------------------------ */

static bool name_ok(const char *name)
{
    return name != NULL && name[0] != '\0' && strnlen(name, DPM_RTE_HEAP_NAME_MAX_LEN) < DPM_RTE_HEAP_NAME_MAX_LEN;
}

/* "socket_<n>", DPDK's names of the socket heaps: n, or -1. */
static int socket_heap_of_name(const char *name)
{
    if (strncmp(name, "socket_", 7) != 0 || name[7] < '0' || name[7] > '9')
        return -1;
    long n = 0;
    for (const char *c = name + 7; *c != '\0'; c++) {
        if (*c < '0' || *c > '9' || n > MAX_SOCKETS)
            return -1;
        n = n * 10 + (*c - '0');
    }
    return n < nsockets() ? (int)n : -1;
}

/* Caller holds heaps_lock. */
static named_heap_t *named_of_name(const char *name)
{
    for (unsigned i = 0; i < DPM_RTE_MAX_NAMED_HEAPS; i++)
        if (named[i].socket != 0 && strcmp(named[i].name, name) == 0)
            return &named[i];
    return NULL;
}

static int make_arena(const char *name, int socket, unsigned *arena)
{
    if (have_backend)
        return backend.create(backend.ctx, name, socket, arena);
    size_t len = sizeof *arena;
    return dpm_ctl("arenas.create", arena, &len, &name, sizeof name);
}

DPM_EXPORT int dpm_rte_malloc_heap_create(const char *heap_name)
{
    if (!name_ok(heap_name))
        return fail_int(EINVAL);
    if (!dpm_ready())
        return fail_int(ENOMEM);
    lock_heaps();
    int err = 0;
    unsigned slot = DPM_RTE_MAX_NAMED_HEAPS;
    if (named_of_name(heap_name) != NULL || socket_heap_of_name(heap_name) >= 0)
        err = EEXIST;
    for (unsigned i = 0; err == 0 && i < DPM_RTE_MAX_NAMED_HEAPS && slot == DPM_RTE_MAX_NAMED_HEAPS; i++)
        if (named[i].socket == 0 &&
            named_generation[i] < (unsigned)(DPM_RTE_NAMED_HEAP_MIN_SOCKET_ID / DPM_RTE_MAX_NAMED_HEAPS))
            slot = i;
    if (err == 0 && slot == DPM_RTE_MAX_NAMED_HEAPS)
        err = ENOSPC;
    if (err == 0) {
        int id = DPM_RTE_NAMED_HEAP_MIN_SOCKET_ID + (int)(named_generation[slot] * DPM_RTE_MAX_NAMED_HEAPS + slot);
        unsigned a;
        err = make_arena(heap_name, id, &a);
        if (err == EAGAIN)
            err = ENOSPC;
        if (err == 0) {
            named_heap_t *h = &named[slot];
            strcpy(h->name, heap_name);
            __atomic_store_n(&h->arena, a, __ATOMIC_RELAXED);
            __atomic_store_n(&h->socket, id, __ATOMIC_RELEASE);
            named_generation[slot]++;
        }
    }
    pthread_mutex_unlock(&heaps_lock);
    return err == 0 ? 0 : fail_int(err);
}

static bool arena_live_blocks(unsigned index, size_t *live);

DPM_EXPORT int dpm_rte_malloc_heap_destroy(const char *heap_name)
{
    if (!name_ok(heap_name))
        return fail_int(EINVAL);
    lock_heaps();
    int err = 0;
    named_heap_t *h = named_of_name(heap_name);
    size_t live = 0;
    if (h == NULL)
        err = socket_heap_of_name(heap_name) >= 0 ? EPERM : ENOENT;
    else if (!arena_live_blocks(h->arena, &live) || live != 0)
        err = EBUSY;
    if (err == 0) {
        char name[32];
        snprintf(name, sizeof name, "arena.%u.destroy", h->arena);
        int r = dpm_ctl(name, NULL, NULL, NULL, 0);
        if (r == 0)
            __atomic_store_n(&h->socket, 0, __ATOMIC_RELEASE);
        else
            err = r == EBUSY ? EBUSY : EINVAL;
    }
    pthread_mutex_unlock(&heaps_lock);
    return err == 0 ? 0 : fail_int(err);
}

DPM_EXPORT int dpm_rte_malloc_heap_get_socket(const char *name)
{
    if (name == NULL)
        return fail_int(EINVAL);
    int s = socket_heap_of_name(name);
    if (s >= 0)
        return s;
    lock_heaps();
    named_heap_t *h = named_of_name(name);
    s = h != NULL ? h->socket : -1;
    pthread_mutex_unlock(&heaps_lock);
    return s >= 0 ? s : fail_int(ENOENT);
}

DPM_EXPORT int dpm_rte_malloc_heap_socket_is_external(int socket_id)
{
    if (socket_id == DPM_RTE_SOCKET_ID_ANY || (socket_id >= 0 && socket_id < nsockets()))
        return 0;
    return named_of_socket(socket_id) != NULL ? 1 : fail_int(EINVAL);
}

DPM_EXPORT int dpm_rte_heap_arena(int socket, unsigned *arena)
{
    heap_ref_t h;
    if (arena == NULL || !resolve(socket, &h))
        return fail_int(EINVAL);
    if (h.arena == NULL)
        return fail_int(ENOENT);
    *arena = h.arena->index;
    return 0;
}

DPM_EXPORT int dpm_rte_set_backend(const dpm_rte_backend_t *b)
{
    if (b != NULL && (b->create == NULL || b->nsockets < 1 || b->nsockets > MAX_SOCKETS))
        return fail_int(EINVAL);
    /* foreign blocks need all four calls */
    if (b != NULL && b->foreign_owns != NULL &&
        (b->foreign_free == NULL || b->foreign_realloc == NULL || b->foreign_validate == NULL))
        return fail_int(EINVAL);
    lock_heaps();
    int err = 0;
    for (unsigned i = 0; i < DPM_RTE_MAX_NAMED_HEAPS; i++)
        if (named[i].socket != 0)
            err = EBUSY;
    if (err == 0) {
        have_backend = false;
        if (b != NULL) {
            backend = *b;
            for (unsigned s = 0; s < MAX_SOCKETS; s++)
                socket_arena[s] = NO_ARENA;
            have_backend = true;
        }
    }
    pthread_mutex_unlock(&heaps_lock);
    return err == 0 ? 0 : fail_int(err);
}

/* ---- statistics -------------------------------------------------------- */

static size_t longest_free_run(arena_t *a)
{
    size_t pages = 0;
    mutex_lock(&a->lock);
    for (unsigned st = 0; st < RUN_NSTATES; st++) {
        size_t n = runs_longest_hint(&a->ph.free_runs[st]);
        if (n > pages)
            pages = n;
    }
    mutex_unlock(&a->lock);
    return pages << LG_PAGE;
}

static void add_arena_stats(const arena_snap_t *as, struct dpm_rte_malloc_socket_stats *st)
{
    /* typed blocks are counted one by one: those in a stash are free (the
     * stashes are read after the bins: one filled meanwhile may hold more
     * than the bins' counts say are out) */
    size_t alloc = as->small_allocated + as->large_allocated;
    uint64_t live = (as->nmalloc_small - as->nfree_small) + (as->nmalloc_large - as->nfree_large);
    alloc = alloc > as->typed_cached_bytes ? alloc - as->typed_cached_bytes : 0;
    live = live > as->typed_cached_blocks ? live - as->typed_cached_blocks : 0;
    st->heap_totalsz_bytes += as->mapped;
    st->heap_allocsz_bytes += alloc;
    st->alloc_count += (unsigned)live;
    for (unsigned r = 0; r < RUN_NSTATES; r++)
        st->free_count += (unsigned)as->runs[r].nruns;
    size_t longest = longest_free_run(arenas[as->index]);
    if (longest > st->greatest_free_size)
        st->greatest_free_size = longest;
}

/* Statistics of heap h from a fresh snapshot. */
static void heap_stats(const heap_ref_t *h, struct dpm_rte_malloc_socket_stats *st)
{
    *st = (struct dpm_rte_malloc_socket_stats){0};
    stats_refresh();
    stats_lock();
    const stats_snap_t *snap = stats_current();
    for (unsigned i = 0; i < snap->narenas; i++) {
        const arena_snap_t *as = &snap->arenas[i];
        if (as->exists && (h->arena != NULL ? as->index == h->arena->index : !as->manual))
            add_arena_stats(as, st);
    }
    stats_unlock();
    st->heap_freesz_bytes =
        st->heap_totalsz_bytes > st->heap_allocsz_bytes ? st->heap_totalsz_bytes - st->heap_allocsz_bytes : 0;
}

static bool arena_live_blocks(unsigned index, size_t *live)
{
    arena_t *a = arena_get(index);
    if (a == NULL)
        return false;
    heap_ref_t h = {.kind = HEAP_NAMED, .arena = a};
    struct dpm_rte_malloc_socket_stats st;
    heap_stats(&h, &st);
    *live = st.alloc_count;
    return true;
}

DPM_EXPORT int dpm_rte_malloc_get_socket_stats(int socket, struct dpm_rte_malloc_socket_stats *socket_stats)
{
    heap_ref_t h;
    if (socket_stats == NULL || socket == DPM_RTE_SOCKET_ID_ANY || !resolve(socket, &h))
        return fail_int(EINVAL);
    if (!dpm_ready())
        return fail_int(ENOMEM);
    heap_stats(&h, socket_stats);
    return 0;
}

static void print_heap(FILE *f, unsigned id, const char *name, int socket, const heap_ref_t *h)
{
    struct dpm_rte_malloc_socket_stats st;
    heap_stats(h, &st);
    fprintf(f, "Heap id:%u\n", id);
    fprintf(f, "\tHeap name:%s\n", name);
    fprintf(f, "\tSocket id:%d\n", socket);
    if (h->arena != NULL)
        fprintf(f, "\tArena:%u\n", h->arena->index);
    fprintf(f, "\tHeap_size:%zu,\n", st.heap_totalsz_bytes);
    fprintf(f, "\tFree_size:%zu,\n", st.heap_freesz_bytes);
    fprintf(f, "\tAlloc_size:%zu,\n", st.heap_allocsz_bytes);
    fprintf(f, "\tGreatest_free_size:%zu,\n", st.greatest_free_size);
    fprintf(f, "\tAlloc_count:%u,\n", st.alloc_count);
    fprintf(f, "\tFree_count:%u,\n", st.free_count);
}

static void print_heaps(FILE *f)
{
    unsigned id = 0;
    for (int s = 0; s < nsockets(); s++) {
        heap_ref_t h;
        char name[24];
        snprintf(name, sizeof name, "socket_%d", s);
        if (resolve(s, &h))
            print_heap(f, id, name, s, &h);
        id++;
    }
    for (unsigned i = 0; i < DPM_RTE_MAX_NAMED_HEAPS; i++) {
        named_heap_t copy;
        lock_heaps();
        copy = named[i];
        pthread_mutex_unlock(&heaps_lock);
        heap_ref_t h = {.kind = HEAP_NAMED, .socket = copy.socket};
        if (copy.socket != 0 && (h.arena = arena_get(copy.arena)) != NULL)
            print_heap(f, id++, copy.name, copy.socket, &h);
    }
}

DPM_EXPORT void dpm_rte_malloc_dump_heaps(FILE *f)
{
    if (dpm_ready())
        print_heaps(f);
}

DPM_EXPORT void dpm_rte_malloc_dump_stats(FILE *f, const char *type)
{
    if (!dpm_ready())
        return;
    print_heaps(f);
    unsigned n = types_count();
    for (unsigned id = 1; id < n; id++) {
        type_stats_t t;
        type_snapshot((uint16_t)id, &t);
        if (type != NULL && strncmp(type, t.name, TYPE_NAME_MAX - 1) != 0)
            continue;
        fprintf(f, "Type:%s\n", t.name);
        fprintf(f, "\tAlloc_size:%llu,\n", (unsigned long long)t.live_bytes);
        fprintf(f, "\tAlloc_count:%llu,\n", (unsigned long long)t.live_blocks);
        fprintf(f, "\tMallocs:%llu,\n", (unsigned long long)t.nalloc);
        fprintf(f, "\tFrees:%llu,\n", (unsigned long long)t.nfree);
    }
}
