/* A purge callback run by the owner's uncached flush turns the cache back
 * on (thread.tcache.enabled=true) and mallocs/frees 16 B: the cache being
 * emptied is refilled from M. MODE: disable (outer thread.tcache.enabled=false,
 * then thread.arena 0) | bind (outer thread.arena 0). Then M is destroyed and
 * the thread mallocs 16 B: any block inside M's (PROT_NONE) units is stale.
 * build: cc -O1 -Iinclude -Itests/review tests/review/r14_enable_in_flush.c build/libdpmalloc.a -lpthread -lm
 * run:   DPMALLOC_CONF=dirty_decay_ms:0 /tmp/r14_en disable ; ... bind */
#include "source_units.h"
static unsigned m; static const char *mode; static int stale; static bool cached_after;
static void enable_and_churn(bool purge)
{
    if (!purge) return;
    set_cache(true);
    small_churn(purge);
}
static void *leaver(void *arg)
{
    (void)arg;
    if (bind_to(m) != 0) exit(2);
    fill_cache(2048, 4000);
    hook = enable_and_churn;
    if (strcmp(mode, "disable") == 0) {
        set_cache(false);
        hook = NULL;
        cached_after = get_cache();
        bind_to(0);
    } else {
        bind_to(0);
        hook = NULL;
        cached_after = get_cache();
    }
    set_stage(1); wait_stage(2);
    for (int i = 0; i < 64; i++) {
        char *p = malloc(16);
        if (in_units(p)) stale++; else memset(p, 1, 16);
    }
    return NULL;
}
int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    setvbuf(stdout, NULL, _IONBF, 0); signal(SIGALRM, on_alarm); alarm(20);
    mode = argv[1]; m = make_sourced();
    pthread_t t; pthread_create(&t, NULL, leaver, NULL);
    wait_stage(1);
    int e = arena_op(m, "destroy");
    printf("%s: purges %u, thread.tcache.enabled after outer call=%d, destroy M -> %d; now malloc(16) x64 in that thread\n", mode, npurges, cached_after, e);
    set_stage(2);
    pthread_join(t, NULL);
    printf("%s: purges %u, thread.tcache.enabled after=%d, destroy %d, stale blocks %d\n", mode, npurges, cached_after, e, stale);
    return stale ? 1 : 0;
}
