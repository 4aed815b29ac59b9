/* r17_fork_deep_nesting.c - review r17: a page source's alloc callback allocates from its own arena (a nested
 * growth) 17 deep (SOURCE_CALLS_MAX is 16), then forks at the innermost level. The child
 * re-counts only the 16 recorded calls but all 17 end (source_call_end decrements): the
 * arena's grows_in_flight wraps below zero and reset/destroy return EBUSY for ever.
 * build+run: cc -O1 -g -Iinclude tests/review/r17_fork_deep_nesting.c build/libdpmalloc.a -lpthread -lm -o /tmp/r17e && /tmp/r17e [depth] */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dpmalloc.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <pthread.h>
static void *idle(void *x) { (void)x; pause(); return NULL; }
#define UNIT ((size_t)4 << 20)
#define NU 120
static char *base; static unsigned char used[NU]; static long given, returned;
static unsigned a; static int depth, maxdepth = 17, is_child; static pid_t child = -1; static void *blocks[64]; static int nb;
static void *s_alloc(void *c, size_t size, size_t align, bool *z) {
    (void)c; *z = false; size_t n = size / UNIT, step = align / UNIT ? align / UNIT : 1; char *got = NULL;
    for (size_t i = 0; i + n <= NU && !got; i += step) { size_t k = 0; while (k < n && !used[i + k]) k++;
        if (k == n) { memset(&used[i], 1, n); got = base + i * UNIT; given += n; } }
    if (got) mprotect(got, size, PROT_READ | PROT_WRITE);
    if (++depth < maxdepth) { void *p = dpm_malloc_arena(a, 5 << 20, 16); if (p) blocks[nb++] = p; }
    else if (child < 0) { child = fork(); if (child == 0) is_child = 1; }
    depth--;
    return got;
}
static void s_free(void *c, void *addr, size_t size) {
    (void)c; mprotect(addr, size, PROT_NONE); memset(&used[((char *)addr - base) / UNIT], 0, size / UNIT); returned += size / UNIT;
}
static bool s_purge(void *c, void *addr, size_t size) { (void)c; return madvise(addr, size, MADV_DONTNEED) == 0; }
int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0); if (argc > 1) maxdepth = atoi(argv[1]);
    char *m = mmap(NULL, (NU + 1) * UNIT, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    base = (char *)(((uintptr_t)m + UNIT - 1) & ~(UNIT - 1));
    dpm_page_source_t src = {s_alloc, s_free, s_purge, NULL};
    if (dpm_arena_create_sourced("s", &src, &a)) return 2;
    pthread_t it; pthread_create(&it, NULL, idle, NULL);   /* fork handlers only run in a multi-threaded process */
    void *p = dpm_malloc_arena(a, 5 << 20, 16);
    for (int i = 0; i < nb; i++) dpm_free(blocks[i]);
    dpm_free(p);
    dpm_ctl("thread.tcache.flush", NULL, NULL, NULL, 0);
    char nm[64]; snprintf(nm, sizeof nm, "arena.%u.destroy", a);
    int d, busy = 0;
    while ((d = dpm_ctl(nm, NULL, NULL, NULL, 0)) == EBUSY && busy < 100) { busy++; usleep(1000); }
    printf("%s (depth %d, nested blocks %d): destroy -> %d after %d EBUSY; given %ld returned %ld\n",
           is_child ? "child" : "parent", maxdepth, nb, d, busy, given, returned);
    if (is_child) _exit(d != 0);
    int st; waitpid(child, &st, 0);
    return d != 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0;
}
