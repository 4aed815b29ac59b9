/* arena.M.reset by its bound thread: the flush of its own cache runs a
 * purge callback that turns the cache back on (thread.tcache.enabled=true)
 * and mallocs/frees 16 B: M's blocks land in the cache, the reset then
 * discards M's heap, and the next malloc(16)s hand out the stale cached
 * blocks AND the same addresses again from M's new heap: live blocks
 * handed out twice.
 * build: cc -O1 -Iinclude -Itests/review tests/review/r14_enable_in_reset.c build/libdpmalloc.a -lpthread -lm
 * run:   DPMALLOC_CONF=dirty_decay_ms:0 /tmp/r14_er */
#include "source_units.h"
static void enable_and_churn(bool purge)
{
    if (!purge) return;
    set_cache(true);
    small_churn(purge);
}
#define NB 20000
static int cmp(const void *a, const void *b) { uintptr_t x = *(uintptr_t *)a, y = *(uintptr_t *)b; return x < y ? -1 : x > y; }
int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0); signal(SIGALRM, on_alarm); alarm(20);
    unsigned m = make_sourced();
    if (bind_to(m) != 0) return 2;
    fill_cache(2048, 4000);
    free(malloc(16));
    hook = enable_and_churn;
    int e = arena_op(m, "reset");
    hook = NULL;
    /* first make M grow again (its source hands back the same units, RW) */
    char *q[64]; for (int i = 0; i < 64; i++) { q[i] = malloc(5000); memset(q[i], 3, 5000); }
    static uintptr_t v[NB]; int faults = 0;
    for (int i = 0; i < NB; i++) v[i] = (uintptr_t)malloc(16);
    uintptr_t s[NB]; memcpy(s, v, sizeof s); qsort(s, NB, sizeof *s, cmp);
    int dup = 0; for (int i = 1; i < NB; i++) dup += s[i] == s[i - 1];
    static char *q2[4000]; for (int i = 0; i < 4000; i++) { q2[i] = malloc(5000); memset(q2[i], 3, 5000); }
    int inside = 0;
    for (int i = 0; i < 2000; i++) { for (int k = 0; k < 64; k++) inside += v[i] >= (uintptr_t)q[k] && v[i] < (uintptr_t)q[k] + 5000;
        for (int k = 0; k < 4000; k++) inside += v[i] >= (uintptr_t)q2[k] && v[i] < (uintptr_t)q2[k] + 5000; }
    int stale = 0; for (int i = 0; i < NB; i++) stale += in_units((void *)v[i]) && 0;
    printf("of the first 2000 live malloc(16) blocks, %d lie inside live malloc(5000) blocks (handed out twice)\n", inside);
    printf("reset %d; %d live malloc(16) blocks: %d addresses handed out twice\n", e, NB, dup);
    (void)faults;
    return dup != 0;
}
