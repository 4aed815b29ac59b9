/* thread.tcache.ncached_max.write flushes the bins it retunes with the
 * bounded flush_oldest (sends at most the blocks it found); a purge
 * callback that frees blocks of that size pushes them into the bin being
 * retuned, and bin_layout then drops them: blocks lost for good.
 * build: cc -O1 -Iinclude -Itests/review tests/review/r14_ncached_leak.c build/libdpmalloc.a -lpthread -lm
 * run:   DPMALLOC_CONF=dirty_decay_ms:0 /tmp/r14_nc */
#include "source_units.h"
static void same_size_churn(bool purge)
{
    if (!purge) return;
    void *p[8];
    for (int i = 0; i < 8; i++) p[i] = malloc(12288);
    for (int i = 0; i < 8; i++) free(p[i]);
}
static size_t small_alloc(unsigned a)
{
    uint64_t ep = 1; dpm_ctl("epoch", NULL, NULL, &ep, sizeof ep);
    char nm[80]; size_t v = 0, l = sizeof v; snprintf(nm, sizeof nm, "stats.arenas.%u.small.allocated", a);
    dpm_ctl(nm, &v, &l, NULL, 0); return v;
}
int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0); signal(SIGALRM, on_alarm); alarm(20);
    unsigned m = make_sourced();
    if (bind_to(m) != 0) return 2;
    int leaked_total = 0;
    for (int round = 0; round < 5; round++) {
        fill_cache(12288, 64);
        dpm_ctl("thread.tcache.flush", NULL, NULL, NULL, 0);
        size_t before = small_alloc(m);
        fill_cache(12288, 64);
        hook = same_size_churn;
        const char *spec = round % 2 ? "12288-12288:40" : "12288-12288:200";
        int e = dpm_ctl("thread.tcache.ncached_max.write", NULL, NULL, &spec, sizeof spec);
        hook = NULL;
        dpm_ctl("thread.tcache.flush", NULL, NULL, NULL, 0);
        size_t after = small_alloc(m);
        printf("round %d: ncached_max.write %d; M small.allocated with the cache flushed: before %zu, after %zu (%zd bytes = %zd blocks lost)\n",
               round, e, before, after, (ssize_t)(after - before), (ssize_t)(after - before) / 12288);
        leaked_total += after != before;
    }
    return leaked_total ? 1 : 0;
}
