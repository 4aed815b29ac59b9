/* A bin fill (tcache_alloc_miss) pushes the got-1 blocks it brought
 * without looking at the bin: a page source's alloc callback run by that
 * fill (the arena grows) may meanwhile have filled the same bin with its
 * own malloc/free of the size. The bin ends over ncached_max, and since
 * tc_bin_full tests head == full_lo, it is never full again: later frees
 * push below the bin's slots.
 * build: cc -O1 -Iinclude -Itests/review tests/review/r14_fill_overflow.c build/libdpmalloc.a -lpthread -lm
 * run:   /tmp/r14_fo K   (K: blocks the callback mallocs then frees; try 1..300) */
#include "source_units.h"
#define S 2048
static int K;
static void churn(bool purge)
{
    if (purge) return;
    void **p = calloc(K, sizeof *p);
    for (int i = 0; i < K; i++) p[i] = malloc(S);
    for (int i = 0; i < K; i++) free(p[i]);
    free(p);
}
static size_t tcache_bytes(unsigned a)
{
    uint64_t ep = 1; dpm_ctl("epoch", NULL, NULL, &ep, sizeof ep);
    char nm[80]; size_t v = 0, l = sizeof v; snprintf(nm, sizeof nm, "stats.arenas.%u.tcache_bytes", a);
    dpm_ctl(nm, &v, &l, NULL, 0); return v;
}
int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    setvbuf(stdout, NULL, _IONBF, 0); signal(SIGALRM, on_alarm); alarm(20);
    K = atoi(argv[1]);
    unsigned m = make_sourced();
    if (bind_to(m) != 0) return 2;
    size_t sz = S, max = 0, l = sizeof max;
    dpm_ctl("thread.tcache.ncached_max.read_sizeclass", &max, &l, &sz, sizeof sz);
    /* malloc(S) (kept) until a fill of the bin needs a new segment: the
     * alloc callback then runs inside tcache_alloc_miss's arena_bin_fill */
    static void *kept[100000]; int nk = 0;
    static void *pre[3000];
    for (int i = 0; i < 3000; i++) { pre[i] = malloc(S); memset(pre[i], 0x5a, S); }
    unsigned before = nallocs;
    hook = churn;
    while (__atomic_load_n(&nallocs, __ATOMIC_SEQ_CST) == before && nk < 100000) kept[nk++] = malloc(S);
    void *first = kept[--nk];
    hook = NULL;
    size_t tb = tcache_bytes(m);
    printf("grow callbacks during the first malloc: %u\n", nallocs - before);
    printf("K=%d: ncached_max %zu; after the first malloc the cache holds %zu bytes = %zu blocks of %d%s\n", K, max, tb, tb / S, S,
           tb / S > max ? "  <-- OVER ncached_max" : "");
    free(first);
    /* free what was kept: an overfull bin is never 'full' again, every push goes below the last */
    for (int i = 0; i < nk; i++) free(kept[i]);
    for (int i = 0; i < 3000; i++) free(pre[i]);
    tb = tcache_bytes(m);
    printf("K=%d: after freeing the %d kept blocks + 3000 others the cache holds %zu blocks%s\n", K, nk, tb / S, tb / S > max ? "  <-- OVER ncached_max" : "");
    /* keep freeing: an overfull bin is never 'full' again */
    static void *v[20000];
    for (int i = 0; i < 20000; i++) v[i] = malloc(S);
    for (int i = 0; i < 20000; i++) free(v[i]);
    tb = tcache_bytes(m);
    printf("K=%d: after 20000 malloc+free: cache holds %zu blocks (ncached_max %zu)\n", K, tb / S, max);
    unsigned bad = 0; l = sizeof bad; dpm_ctl("debug.check_heap", &bad, &l, NULL, 0);
    printf("check_heap %u\n", bad);
    return tb / S > max;
}
