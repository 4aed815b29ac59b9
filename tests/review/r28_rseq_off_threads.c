/*
 * r28_rseq_off_threads.c - with glibc's rseq registration turned off
 * (GLIBC_TUNABLES=glibc.pthread.rseq=0) dpmalloc registers the areas
 * itself (rseq.h), and the process reports stats.front_end "cpu"; every
 * thread should then use the CPU caches, not only the first.
 *
 * glibc's pthread_create hands its own registration to the new thread
 * whenever the creating thread's cpu_id is >= 0 (ATTR_FLAG_DO_RSEQ),
 * which it is once dpmalloc registered the creator. The new thread's
 * area is then registered by glibc (while __rseq_size stays 0), and
 * dpmalloc's own rseq(2) call in rseq_thread_ready fails with EBUSY
 * (strace: rseq(...) = -1 EBUSY), so thread_front_pick silently puts the
 * thread on its own thread cache.
 *
 * Shown here: a new thread frees 100 blocks of 40 bytes after the caches
 * were emptied; on the CPU caches, stats.tcache_bytes (which sums thread,
 * CPU and transfer caches) equals stats.cpu_cache_bytes +
 * stats.transfer_bytes. On a4a03aa the thread's own cache keeps bytes
 * too (e.g. tcache 18576 = cpu 14400 + 4176 in the thread's cache).
 * Expected: "ok"; actual: "thread cache holds N bytes".
 * Without the tunable the same program passes (glibc registers all).
 * run: GLIBC_TUNABLES=glibc.pthread.rseq=0 test_review_r28_rseq_off_threads
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dpm_ctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);

static size_t stat_of(const char *n)
{
    uint64_t e = 1;
    size_t l = sizeof(e), v = 0;
    dpm_ctl("epoch", &e, &l, &e, sizeof(e));
    l = sizeof(v);
    if (dpm_ctl(n, &v, &l, NULL, 0) != 0) {
        fprintf(stderr, "dpm_ctl(%s) failed\n", n);
        exit(1);
    }
    return v;
}

static size_t own_bytes;

static void *thread_main(void *arg)
{
    (void)arg;
    void *v[100];
    for (int i = 0; i < 100; i++)
        v[i] = malloc(40);
    for (int i = 0; i < 100; i++)
        free(v[i]);
    size_t all = stat_of("stats.tcache_bytes"), cpu = stat_of("stats.cpu_cache_bytes"),
           xfer = stat_of("stats.transfer_bytes");
    own_bytes = all - cpu - xfer;
    printf("thread: tcache_bytes %zu, cpu_cache_bytes %zu, transfer_bytes %zu\n", all, cpu, xfer);
    return NULL;
}

int main(void)
{
    const char *fe = "";
    size_t l = sizeof(fe);
    if (dpm_ctl("stats.front_end", &fe, &l, NULL, 0) != 0 || strcmp(fe, "cpu") != 0) {
        printf("skip: front end %s\n", fe);
        return 77;
    }
    free(malloc(40));
    dpm_ctl("thread.tcache.flush", NULL, NULL, NULL, 0);
    pthread_t t;
    if (pthread_create(&t, NULL, thread_main, NULL) != 0)
        return 1;
    pthread_join(t, NULL);
    if (own_bytes != 0) {
        printf("thread cache holds %zu bytes: the new thread is not on the CPU caches\n", own_bytes);
        return 1;
    }
    printf("ok\n");
    return 0;
}
