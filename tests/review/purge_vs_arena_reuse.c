/*
 * purge_vs_arena_reuse.c - a purge of an arena (arena.<i>.purge, and the
 * same in malloc_trim and the ENOMEM retry) races with the destroy of that
 * manual arena and the reuse of its slot by arenas.create: arena_reuse ->
 * arena_fresh_state memsets the arena (page heap, purge_lock, special_lock)
 * while the purging thread holds purge_lock and works on the page heap.
 *
 * Every call here is legal: one thread creates, binds to, uses, unbinds
 * from and destroys its own manual arena; another purges arenas by index
 * (or calls malloc_trim). Purging a destroyed index must give ENOENT, and
 * purging a live one must not see it re-initialised under it.
 *
 * Root cause: src/ctl.c h_arena_purge takes the arena with arena_get()
 * and calls arena_decay_now() with no lock that keeps the slot from being
 * destroyed and reused; src/override.c malloc_trim and src/arena.c
 * arenas_release_free_memory iterate arenas[] the same way (only the
 * background thread and stats hold arenas_iteration_lock). arena_reuse
 * holds a->lock, but purges run outside a->lock now (purge_lock only), and
 * arena_fresh_state re-initialises purge_lock itself.
 * Suggested fix: purge under arenas_iteration_lock (as decay_every_arena
 * does) or pin the arena (a count that destroy/reuse wait for), and have
 * arena_reuse take purge_lock before re-initialising the state.
 *
 * Build (ThreadSanitizer, dpm_ API only):
 *   cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Release -DDPM_SANITIZE=thread
 *   cmake --build build-tsan --target dpmalloc_plain
 *   gcc -O1 -g -fsanitize=thread -Iinclude tests/review/purge_vs_arena_reuse.c \
 *       build-tsan/libdpmalloc_plain.a -lpthread -o /tmp/pvr
 * Run:   TSAN_OPTIONS="detect_deadlocks=0 halt_on_error=1" timeout 120 /tmp/pvr 20
 * Expected: "ok", exit 0.
 * Actual (main 234f56d): "WARNING: ThreadSanitizer: data race": write by
 * memset in arena_fresh_state (arena_reuse <- arena_create_manual) vs the
 * purging thread's pthread_mutex_unlock(purge_lock) in arena_decay_now
 * (<- h_arena_purge); usually within a few seconds.
 */
#include <dpmalloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int stop;   /* atomic: the test itself must be race-free under TSan */

static void *owner(void *arg)
{
    (void)arg;
    void *v[64];
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
        unsigned m, zero = 0;
        size_t len = sizeof(m);
        if (dpm_ctl("arenas.create", &m, &len, NULL, 0) != 0)
            abort();
        if (dpm_ctl("thread.arena", NULL, NULL, &m, sizeof(m)) != 0)
            abort();
        for (int i = 0; i < 64; i++)
            v[i] = dpm_malloc(i % 2 ? 40000 : 3000);
        for (int i = 0; i < 64; i++)
            dpm_free(v[i]);
        if (dpm_ctl("thread.arena", NULL, NULL, &zero, sizeof(zero)) != 0)
            abort();
        char name[40];
        snprintf(name, sizeof(name), "arena.%u.destroy", m);
        if (dpm_ctl(name, NULL, NULL, NULL, 0) != 0)
            abort();
    }
    return NULL;
}

static void *purger(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
        unsigned n;
        size_t len = sizeof(n);
        dpm_ctl("arenas.narenas", &n, &len, NULL, 0);
        for (unsigned i = 0; i < n; i++) {
            char name[40];
            snprintf(name, sizeof(name), "arena.%u.purge", i);
            dpm_ctl(name, NULL, NULL, NULL, 0);   /* 0, or ENOENT if destroyed */
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int secs = argc > 1 ? atoi(argv[1]) : 20;
    pthread_t a, b, c;
    pthread_create(&a, NULL, owner, NULL);
    pthread_create(&b, NULL, owner, NULL);
    pthread_create(&c, NULL, purger, NULL);
    struct timespec ts = {secs, 0};
    nanosleep(&ts, NULL);
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    pthread_join(c, NULL);
    printf("ok\n");
    return 0;
}
