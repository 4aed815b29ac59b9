/* r16_bg_free_after_destroy.c - review r16: arena.<i>.destroy returned 0 while the background
 * thread was still inside src.free for that arena (decay's give_back_segments drops purge_lock
 * and counted nothing in flight, and the background pass no longer holds the arena table lock).
 * A user that releases its source context once destroy returns then got a free callback on a
 * dead context. Now a destroy meanwhile returns EBUSY (the user retries), and once it returns 0
 * every segment is back and no callback follows.
 * build: cc -O1 -g -Iinclude tests/review/r16_bg_free_after_destroy.c build/libdpmalloc.a -lpthread -lm
 * run:   DPMALLOC_CONF=background_thread:true,dirty_decay_ms:10,muzzy_decay_ms:0 ./a.out */
#include "slow_free_source.h"

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0); mainthr = pthread_self(); dpm_free(dpm_malloc(10));   /* starts the background thread */
    char *m = mmap(NULL, 65 * UNIT, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    base = (char *)(((uintptr_t)m + UNIT - 1) & ~(UNIT - 1));
    dpm_page_source_t src = {s_alloc, s_free, s_purge, NULL};
    unsigned a; if (dpm_arena_create_sourced("s", &src, &a)) return 2;
    void *small = dpm_malloc_arena(a, 1000, 16);          /* keeps the first segment */
    void *big = dpm_malloc_arena(a, 6 << 20, 4096);       /* a segment of its own */
    memset(big, 1, 6 << 20);
    dpm_free(big);
    dpm_ctl("thread.tcache.flush", NULL, NULL, NULL, 0);
    for (int i = 0; i < 300 && !in_free; i++) usleep(10000);   /* background decay gives the segment back */
    if (!in_free) { uint64_t ep = 1; dpm_ctl("epoch", NULL, NULL, &ep, sizeof ep); size_t v[4] = {0}; const char *k[4] = {"pactive", "pdirty", "pmuzzy", "pclean"};
        for (int j = 0; j < 4; j++) { char n2[64]; size_t l = sizeof v[j]; snprintf(n2, sizeof n2, "stats.arenas.%u.%s", a, k[j]); dpm_ctl(n2, &v[j], &l, NULL, 0); }
        printf("no give-back: pactive %zu pdirty %zu pmuzzy %zu pclean %zu\n", v[0], v[1], v[2], v[3]); }
    dpm_free(small);
    char nm[64]; snprintf(nm, sizeof nm, "arena.%u.destroy", a);
    int d, busy = 0;
    while ((d = dpm_ctl(nm, NULL, NULL, NULL, 0)) == EBUSY && busy < 500) {   /* a callback under way */
        busy++;
        usleep(10000);
    }
    long g = given, r = returned;
    ctx_dead = 1;   /* the user frees its source context: destroy said every segment is back */
    printf("bg free callback started: %d; destroy -> %d after %d EBUSY; right after destroy: given %ld units, returned %ld\n", in_free, d, busy, g, r);
    usleep(500000);
    printf("free callbacks on the dead context after destroy returned: %ld (expect 0); given %ld returned %ld\n", late, given, returned);
    return late != 0 || d != 0 || g != r;
}
