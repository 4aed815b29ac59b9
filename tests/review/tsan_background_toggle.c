/*
 * tsan_background_toggle.c - review r21: ThreadSanitizer reported a data
 * race on background_pending, read plainly by the allocation slow paths
 * (alloc.c) while background_maybe_start, run by a thread that switches
 * the background thread on through "background_thread", writes it under
 * bg_lock. The flag is now read and written with relaxed atomics: a slow
 * path that misses a fresh request starts the thread at its next one.
 * Under the release build this is a stress of toggling against slow
 * paths; under `make tsan` (label sanitize) it fails on the race.
 */
#include <dpmalloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>

static int stop;   /* atomic: the test itself must be race-free under TSan */

/* large blocks and aligned ones: every call takes a slow path */
static void *churn(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
        void *p = dpm_malloc((size_t)3 << 20);
        void *q = dpm_malloc_aligned(100, 8192);
        dpm_free(p);
        dpm_free(q);
    }
    return NULL;
}

int main(void)
{
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, churn, NULL);
    int bad = 0;
    for (int i = 0; i < 200; i++) {
        bool on = i % 2 == 0;
        if (dpm_ctl("background_thread", NULL, NULL, &on, sizeof on) != 0)
            bad++;
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    if (bad != 0) {
        printf("FAIL: %d of 200 background_thread writes failed\n", bad);
        return 1;
    }
    printf("ok\n");
    return 0;
}
