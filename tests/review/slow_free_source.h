/*
 * slow_free_source.h - the page source of the "destroy while src.free
 * runs" reproductions (review r16, r17): 4 MiB units of one reservation,
 * counted as given and returned; a free on any thread but the main one
 * sleeps 300 ms (in_free set), and every free after ctx_dead is set (the
 * program's "context released" moment) counts as late.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dpmalloc.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#define UNIT ((size_t)4 << 20)
static char *base; static size_t next_unit; static pthread_t mainthr;
static volatile int in_free, ctx_dead; static long given, returned, late;
static void *s_alloc(void *c, size_t size, size_t align, bool *z) {
    (void)c; (void)align; *z = true; char *p = base + next_unit * UNIT; next_unit += size / UNIT;
    mprotect(p, size, PROT_READ | PROT_WRITE); __atomic_add_fetch(&given, (long)(size / UNIT), __ATOMIC_SEQ_CST); return p;
}
static void s_free(void *c, void *addr, size_t size) {
    (void)c;
    if (ctx_dead) late++;
    if (!pthread_equal(pthread_self(), mainthr)) { in_free = 1; usleep(300000); if (ctx_dead) late++; }
    mprotect(addr, size, PROT_NONE); __atomic_add_fetch(&returned, (long)(size / UNIT), __ATOMIC_SEQ_CST);
}
static bool s_purge(void *c, void *addr, size_t size) { (void)c; return madvise(addr, size, MADV_DONTNEED) == 0; }
