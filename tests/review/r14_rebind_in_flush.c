/* A purge callback run by the owner's uncached flush (thread.tcache.flush,
 * thread bound to sourced arena M) calls thread.arena 0: the nested bind
 * leaves M (nthreads 0) while the outer flush still holds M's blocks.
 * Another thread retries arena.M.destroy until it succeeds; the outer
 * flush then sends blocks home into the destroyed (PROT_NONE) arena.
 * build: cc -O1 -Iinclude -Itests/review tests/review/r14_rebind_in_flush.c build/libdpmalloc.a -lpthread -lm
 * run:   DPMALLOC_CONF=dirty_decay_ms:0 /tmp/r14_rb [flush|bind1]  */
#include "source_units.h"
static unsigned m; static const char *mode; static volatile int destroyed_during; static volatile bool flushing;
static volatile int destroy_rc = -1;
static void rebind_once(bool purge)
{
    static bool done;
    if (!purge || done) return;
    done = true;
    bind_to(0);
    usleep(1000);
}
static void *owner(void *arg)
{
    (void)arg;
    if (bind_to(m) != 0) exit(2);
    static const size_t sz[] = {2048, 3072, 4096, 6144, 8192, 12288, 14336};
    for (unsigned k = 0; k < sizeof sz / sizeof *sz; k++) fill_cache(sz[k], 3000);
    hook = rebind_once;
    set_stage(1);
    flushing = true;
    if (strcmp(mode, "bind1") == 0) { unsigned a1 = 1; dpm_ctl("thread.arena", NULL, NULL, &a1, sizeof a1); }
    else dpm_ctl("thread.tcache.flush", NULL, NULL, NULL, 0);
    flushing = false;
    hook = NULL;
    return NULL;
}
int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0); signal(SIGALRM, on_alarm); alarm(20);
    mode = argc > 1 ? argv[1] : "flush"; m = make_sourced();
    pthread_t t; pthread_create(&t, NULL, owner, NULL);
    wait_stage(1);
    int e;
    while ((e = arena_op(m, "destroy")) == EBUSY) ;
    destroy_rc = e;
    bool during = flushing;
    pthread_join(t, NULL);
    printf("%s: destroy -> %d, owner still flushing at that moment: %d, purges %u\n", mode, e, during, npurges);
    if (dpm_ctl("debug.check_heap", NULL, NULL, NULL, 0) == 0) {}
    unsigned bad = 0; size_t l = sizeof bad; dpm_ctl("debug.check_heap", &bad, &l, NULL, 0);
    printf("debug.check_heap: %u\n", bad);
    return during ? 1 : 0;
}
