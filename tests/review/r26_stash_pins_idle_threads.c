/* r26_stash_pins_idle_threads: aligned requests of the large classes up to
 * 64 KiB (posix_memalign/aligned_alloc with alignment > 4 KiB, i20-seed
 * 4bc9ad3) are served through the thread's phased stashes, which fetch 16
 * blocks at a time (TC_PHASED_BATCH) from 256 KiB aligned slabs. A thread
 * that makes one such allocation per class and frees it keeps the other 15
 * blocks of each class in its stash: up to 4 stashes x 15 blocks, e.g.
 * 15 x 64 KiB = 960 KiB for the 64 KiB class alone. Nothing takes them
 * back while the thread lives: not the background thread's idle reclaim
 * (tcaches_reclaim only flushes other threads' large caches), not
 * arena.<i>.purge, not decay. They are also counted wrongly: stats.allocated
 * counts them as handed to the program (ctl.md: it excludes blocks in
 * thread caches) and stats.tcache_bytes does not count them.
 * On 326de92 the same requests were page runs whose frees went to the large
 * cache, which the background thread empties for idle threads.
 *
 * 32 threads: each does aligned_alloc(16384, n) + free for n = 16, 32, 48
 * and 64 KiB, then sleeps; main waits 3 s (background_thread:true,
 * decay 0 ms), flushes its cache and purges every arena, then reads stats.
 *
 * Build: cc -O1 -Iinclude -Itests/review tests/review/r26_stash_pins_idle_threads.c build/libdpmalloc.a -pthread
 * Run:   DPMALLOC_CONF=background_thread:true,dirty_decay_ms:0,muzzy_decay_ms:0 ./a.out
 * Expected: allocated and active near their starting values, exit 0.
 * 28ac113 (3 of 3 runs): allocated 70789440 (15 blocks x (16+32+48+64) KiB
 * per thread, 2.4 MiB), active ~76 MiB, tcache_bytes 0
 * while the program holds no block; exit 1.
 * 326de92: allocated/active back near 0.
 * RSS: these stashed blocks were never written, so VmRSS stays ~3 MB here;
 * blocks that were written by a former owner, freed and fetched again into
 * an idle thread's stash stay resident (and unusable by other threads).
 */
#include <dpmalloc.h>
#include "stat_bytes.h"
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NT 32


static pthread_barrier_t ready, done;

static void *worker(void *arg)
{
    (void)arg;
    for (size_t n = 16384; n <= 65536; n += 16384) {
        void *p = aligned_alloc(16384, n);
        if (p == NULL)
            abort();
        memset(p, 1, n);
        free(p);
    }
    pthread_barrier_wait(&ready);   /* idle from here on */
    pthread_barrier_wait(&done);
    return NULL;
}

int main(void)
{
    pthread_t t[NT];
    free(malloc(1));
    size_t a0 = stat_bytes("stats.allocated"), c0 = stat_bytes("stats.active");
    pthread_barrier_init(&ready, NULL, NT + 1);
    pthread_barrier_init(&done, NULL, NT + 1);
    for (int i = 0; i < NT; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    pthread_barrier_wait(&ready);
    sleep(3);
    unsigned n = 0;
    size_t l = sizeof n;
    dpm_ctl("arenas.narenas", &n, &l, NULL, 0);
    dpm_ctl("thread.tcache.flush", NULL, NULL, NULL, 0);
    for (unsigned i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof name, "arena.%u.purge", i);
        dpm_ctl(name, NULL, NULL, NULL, 0);
    }
    size_t a1 = stat_bytes("stats.allocated"), c1 = stat_bytes("stats.active"), tc = stat_bytes("stats.tcache_bytes");
    printf("no block live: allocated %zu -> %zu, active %zu -> %zu, tcache_bytes %zu\n", a0, a1, c0, c1, tc);
    pthread_barrier_wait(&done);
    for (int i = 0; i < NT; i++)
        pthread_join(t[i], NULL);
    int bad = a1 > a0 + ((size_t)1 << 20) || c1 > c0 + ((size_t)4 << 20);
    printf("%s\n", bad ? "FAIL: freed aligned blocks stay held by idle threads" : "ok");
    return bad;
}
