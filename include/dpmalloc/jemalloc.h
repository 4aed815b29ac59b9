/*
 * dpmalloc/jemalloc.h - jemalloc 5.3's non-standard API, served by
 * dpmalloc: a program written against <jemalloc/jemalloc.h> (unprefixed
 * names) builds against this header and links libdpmalloc, or runs
 * against libjemalloc with libdpmalloc.so preloaded, unchanged.
 *
 * The flag macros and MALLCTL_ARENAS_* have jemalloc 5.3's values, so a
 * binary compiled against jemalloc's header passes the same bits.
 * Differences from jemalloc (docs/ctl.md, "jemalloc compatibility"):
 *  - size 0 (mallocx, rallocx, xallocx, nallocx; undefined in jemalloc)
 *    is taken as 1;
 *  - rallocx(NULL, ...) acts as mallocx; dallocx(NULL), sdallocx(NULL)
 *    do nothing; sallocx(NULL) and xallocx(NULL, ...) return 0;
 *  - MALLOCX_TCACHE(n) for n >= 0 (tcache.create's caches, which
 *    dpmalloc has not) fails: NULL with errno EINVAL;
 *  - an allocation that fails sets errno (ENOMEM, or EINVAL for a bad
 *    arena or flag), as malloc does;
 *  - sdallocx checks its size as free_sized does: a size above the
 *    block's usable bytes aborts with "sdallocx(): size does not match
 *    the block at <p>";
 *  - mallctl's namespace is dpm_ctl's (docs/ctl.md), with jemalloc's
 *    names where dpmalloc has the thing they name.
 * These symbols are exported by libdpmalloc.so and libdpmalloc.a (not by
 * libdpmalloc_plain, which leaves the libc names alone too).
 */
#ifndef DPMALLOC_JEMALLOC_H
#define DPMALLOC_JEMALLOC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* log2 of the alignment in the low 6 bits; MALLOCX_ALIGN takes a power of two */
#define MALLOCX_LG_ALIGN(la) ((int)(la))
#define MALLOCX_ALIGN(a) ((int)__builtin_ctzll((unsigned long long)(a)))
#define MALLOCX_ZERO ((int)0x40)
/* bits 8..19: tcache id + 2 (0: the automatic cache, 1: none) */
#define MALLOCX_TCACHE(tc) ((int)(((tc) + 2) << 8))
#define MALLOCX_TCACHE_NONE MALLOCX_TCACHE(-1)
/* bits 20..31: arena index + 1 */
#define MALLOCX_ARENA(a) ((((int)(a)) + 1) << 20)

/* The arena index that stands for every arena ("stats.arenas.4096.*",
 * "arena.4096.purge") and the one for destroyed arenas' statistics,
 * which dpmalloc does not keep (ENOENT). */
#define MALLCTL_ARENAS_ALL 4096
#define MALLCTL_ARENAS_DESTROYED 4097

/* A block of at least size bytes, as flags ask; NULL with errno set. */
void *mallocx(size_t size, int flags) __attribute__((malloc, alloc_size(1)));
/* p resized (moved if need be) to at least size bytes; NULL with errno
 * set and p untouched on failure. */
void *rallocx(void *p, size_t size, int flags) __attribute__((alloc_size(2)));
/* p resized in place to at least size and at most size + extra bytes if
 * it can be; returns p's usable size afterwards (its old one if not). */
size_t xallocx(void *p, size_t size, size_t extra, int flags);
/* p's usable size (malloc_usable_size). */
size_t sallocx(const void *p, int flags);
void dallocx(void *p, int flags);
/* Sized free: size between the requested and the usable size. */
void sdallocx(void *p, size_t size, int flags);
/* The usable size mallocx(size, flags) would give, without allocating;
 * 0 if the size cannot be allocated. */
size_t nallocx(size_t size, int flags);

/* dpm_ctl under jemalloc's name. */
int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);
/* name -> one size_t per dotted component (a number for a numeric
 * component, an opaque code for a word); a prefix of a name is accepted.
 * *miblenp: in, the room in mibp; out, the components written. ENOENT
 * for an unknown name, EINVAL when it has more components than room. */
int mallctlnametomib(const char *name, size_t *mibp, size_t *miblenp);
/* mallctl on the name a MIB stands for (numeric components may be
 * changed between calls). ENOENT for a MIB that names nothing. */
int mallctlbymib(const size_t *mibp, size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen);
/* dpm_stats_print; opts as there, jemalloc's letters included. */
void malloc_stats_print(void (*write_cb)(void *cbopaque, const char *text), void *cbopaque, const char *opts);

/* Options in jemalloc's syntax, read when DPMALLOC_CONF and dpm_conf are
 * absent (docs/config.md, "MALLOC_CONF"): a program may define
 *   const char *malloc_conf = "narenas:2,dirty_decay_ms:5000";
 */
extern const char *malloc_conf;

#ifdef __cplusplus
}
#endif

#endif /* DPMALLOC_JEMALLOC_H */
