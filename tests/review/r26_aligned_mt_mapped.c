/* r26_aligned_mt_mapped: 8 threads x 20000 posix_memalign(8..64 KiB
 * alignment, 1..65536 bytes) with cross-thread frees through a shared
 * ring, 3 rounds; after each round every block is freed, the main cache
 * flushed, arena 0 purged and malloc_trim(0) run. Consequence of r26_aligned_bin_pins_slab and
 * r26_stash_pins_idle_threads (aligned special bins pin an empty 256 KiB
 * slab per class and arena, and nothing releases it), on a workload:
 * the segments holding those slabs are never unmapped.
 *
 * Build: cc -O1 -Iinclude -Itests/review tests/review/r26_aligned_mt_mapped.c build/libdpmalloc.a -pthread
 * Run:   ./a.out 3
 * 28ac113 (3 of 3 runs): with no block live, active 15925248, mapped
 *   0.87-1.17 GB (mostly retained), VmHWM 405-415 MB; exit 1.
 * 326de92 (3 of 3): active 196608, mapped 12582912, VmHWM 300-351 MB; exit 0.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dpmalloc.h>
#include "stat_bytes.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <pthread.h>
#include <malloc.h>
void free_sized(void *, size_t);
#define RING 4096
static void *ring[RING]; static size_t ringsz[RING];
static pthread_mutex_t rl = PTHREAD_MUTEX_INITIALIZER;
static long rss(void) { FILE *f = fopen("/proc/self/statm", "r"); long a, b; fscanf(f, "%ld %ld", &a, &b); fclose(f); return b * 4; }
static void *worker(void *arg) {
  unsigned s = (unsigned)(uintptr_t)arg;
  for (int i = 0; i < 20000; i++) {
    s = s * 1103515245 + 12345;
    size_t al = (size_t)8192 << ((s >> 8) % 4);
    size_t sz = 1 + (s >> 12) % 65536;
    void *p; if (posix_memalign(&p, al, sz)) abort();
    if ((uintptr_t)p & (al - 1)) { printf("misaligned\n"); abort(); }
    memset(p, (int)s, sz < 64 ? sz : 64);
    ((unsigned char *)p)[sz - 1] = 1;
    unsigned slot = (s >> 4) % RING;
    pthread_mutex_lock(&rl);
    void *old = ring[slot]; size_t osz = ringsz[slot];
    ring[slot] = p; ringsz[slot] = sz;
    pthread_mutex_unlock(&rl);
    if (old) { if (s & 1) free(old); else free_sized(old, osz); }
  }
  return NULL;
}
int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 3;
  for (int r = 0; r < rounds; r++) {
    pthread_t t[8];
    for (int i = 0; i < 8; i++) pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(r * 8 + i + 1));
    for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < RING; i++) { free(ring[i]); ring[i] = NULL; }
    dpm_ctl("thread.tcache.flush", NULL, NULL, NULL, 0);
    dpm_ctl("arena.0.purge", NULL, NULL, NULL, 0);
    malloc_trim(0);   /* every arena purged */
    printf("round %d rss %ld KiB active %zu mapped %zu retained %zu\n", r, rss(), stat_bytes("stats.active"), stat_bytes("stats.mapped"), stat_bytes("stats.retained"));
  }
  int probs = -1; size_t l = sizeof probs; dpm_ctl("debug.check_heap", &probs, &l, NULL, 0);
  size_t mapped = stat_bytes("stats.mapped"), active = stat_bytes("stats.active");
  printf("check_heap %d; no block live: active %zu mapped %zu\n", probs, active, mapped);
  return probs != 0 || mapped > ((size_t)100 << 20) || active > ((size_t)4 << 20);
}
__attribute__((destructor)) static void hwm(void) { char b[4096]; FILE *f = fopen("/proc/self/status", "r"); while (fgets(b, sizeof b, f)) if (!strncmp(b, "VmHWM", 5)) fputs(b, stdout); fclose(f); }
