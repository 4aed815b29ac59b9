/*
 * double_free_uncached_thread.c - a double free of a block that sits in a
 * thread's cache is NOT caught when the second free comes from a thread
 * that does not cache that block; the block is then handed out twice.
 *
 * Case "nocache": main frees p (cached, key written); a thread with
 * thread.tcache.enabled=false frees p again.
 * Case "manual": a thread bound to manual arena M frees p (a block of M: it
 * caches it); the unbound main thread frees p again.
 * (A thread past its exit hook, THREAD_EXITING, behaves the same.)
 *
 * Root cause: src/alloc.c free_slow_body() checks the free key only when
 * this thread would cache the block (c != TC_NONE); otherwise the block
 * goes straight to free_home(), is marked free in its slab while still in
 * the other thread's bin, and both the bin and the slab hand it out.
 * include/dpmalloc.h and docs/design.md claim "a second free ... of a block
 * that sits in any thread's cache" is caught in every build.
 * Suggested fix: in free_slow_body, for any block with s->tcache_class !=
 * TC_NONE whose key word holds tc_free_key, call
 * tcache_confirm_not_cached(p, s->tcache_class % TC_MANUAL_BASE, ...)
 * before anything else (as realloc_in_span already does).
 *
 * Build: gcc -O2 -Iinclude tests/review/double_free_uncached_thread.c \
 *            build/libdpmalloc.a -lpthread -o /tmp/dfu
 * Run:   /tmp/dfu nocache; /tmp/dfu manual
 * Expected: abort "dpmalloc: free(): double free of 0x..." (exit 134).
 * Actual (main 234f56d): "BUG: p handed out 2 times", exit 1.
 */
#include <dpmalloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 20000
static void *p;
static void *blk[N];
static unsigned m;
static pthread_barrier_t b1, b2;

static int count_handouts(void)
{
    int hits = 0;
    for (int i = 0; i < N; i++) {
        blk[i] = malloc(64);
        hits += blk[i] == p;
    }
    printf("%s: p handed out %d times\n", hits > 1 ? "BUG" : "ok", hits);
    return hits > 1;
}

static void *nocache_second_free(void *arg)
{
    (void)arg;
    bool off = false;
    if (dpm_ctl("thread.tcache.enabled", NULL, NULL, &off, sizeof(off)) != 0)
        exit(2);
    free(p);   /* double free: p sits in main's cache */
    return NULL;
}

static void *bound_thread(void *arg)
{
    (void)arg;
    if (dpm_ctl("thread.arena", NULL, NULL, &m, sizeof(m)) != 0)
        exit(2);
    p = malloc(64);
    free(p);   /* cached: this thread is bound to M */
    pthread_barrier_wait(&b1);
    pthread_barrier_wait(&b2);   /* main has freed p again */
    exit(count_handouts());
}

int main(int argc, char **argv)
{
    pthread_t t;
    if (argc > 1 && strcmp(argv[1], "manual") == 0) {
        size_t sz = sizeof(m);
        if (dpm_ctl("arenas.create", &m, &sz, NULL, 0) != 0)
            return 2;
        pthread_barrier_init(&b1, NULL, 2);
        pthread_barrier_init(&b2, NULL, 2);
        pthread_create(&t, NULL, bound_thread, NULL);
        pthread_barrier_wait(&b1);
        free(p);   /* double free from a thread not bound to M */
        pthread_barrier_wait(&b2);
        pthread_join(t, NULL);
        return 0;
    }
    p = malloc(64);
    free(p);
    pthread_create(&t, NULL, nocache_second_free, NULL);
    pthread_join(t, NULL);
    return count_handouts();
}
