/*
 * r16_bg_arena_only.c - review r16 side note: with background_thread:true
 * the background thread started at the first allocation slow path of the
 * malloc family, so a program that only allocates through the calls that
 * name an arena (dpm_malloc_arena) never got its decay: the pages it
 * freed stayed dirty for good once it stopped allocating.
 *
 * Allocates 32 MiB in 64 KiB blocks from a manual arena with
 * dpm_malloc_arena only, frees them, then sleeps without any allocation:
 * within 3 s (dirty_decay_ms:50, muzzy_decay_ms:0) the arena's dirty pages
 * must be gone.
 *
 * Build and run (from the worktree, after building build/):
 *   cc -O1 -Iinclude tests/review/r16_bg_arena_only.c build/libdpmalloc_plain.a -lpthread && \
 *   DPMALLOC_CONF=background_thread:true,dirty_decay_ms:50,muzzy_decay_ms:0 ./a.out
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dpmalloc.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static size_t arena_stat(unsigned a, const char *what)
{
    uint64_t e = 1;
    size_t l = sizeof(e), v = 0;
    dpm_ctl("epoch", &e, &l, &e, sizeof(e));
    char name[64];
    snprintf(name, sizeof name, "stats.arenas.%u.%s", a, what);
    l = sizeof(v);
    return dpm_ctl(name, &v, &l, NULL, 0) == 0 ? v : SIZE_MAX;
}

int main(void)
{
    unsigned a;
    size_t l = sizeof(a);
    if (dpm_ctl("arenas.create", &a, &l, NULL, 0) != 0)
        return 2;
    enum { N = 512, SIZE = 64 << 10 };
    static void *v[N];
    for (int i = 0; i < N; i++) {
        v[i] = dpm_malloc_arena(a, SIZE, 64);
        if (v[i] == NULL)
            return 2;
        memset(v[i], 1, SIZE);
    }
    for (int i = 0; i < N; i++)
        dpm_free(v[i]);
    size_t before = arena_stat(a, "pdirty"), after = before;
    for (int t = 0; t < 300 && after != 0; t++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
        after = arena_stat(a, "pdirty");
    }
    printf("arena %u: dirty pages %zu after the frees, %zu after up to 3 s idle: %s\n", a, before, after,
           after == 0 ? "ok" : "FAIL: no background decay");
    return after != 0;
}
