/* A purge callback run by the owner's uncached flush (thread.arena 0 or
 * thread.tcache.flush, thread bound to sourced M) turns the cache off
 * (thread.tcache.enabled=false, returns 0); cache_resume then turns it back
 * on: the thread's request is silently lost. Also malloc_trim(0) in the callback.
 * build: cc -O1 -Iinclude -Itests/review tests/review/r14_disable_in_flush.c build/libdpmalloc.a -lpthread -lm
 * run:   DPMALLOC_CONF=dirty_decay_ms:0 /tmp/r14_di */
#include "source_units.h"
static int rc_in_cb = -1;
static void disable(bool purge) { if (!purge || rc_in_cb != -1) return; malloc_trim(0); rc_in_cb = set_cache(false); }
int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0); signal(SIGALRM, on_alarm); alarm(20);
    unsigned m = make_sourced();
    const char *what[2] = {"thread.arena 0", "thread.tcache.flush"};
    int wrong = 0;
    for (int k = 0; k < 2; k++) {
        set_cache(true); bind_to(m); fill_cache(2048, 4000); rc_in_cb = -1;
        hook = disable;
        if (k == 0) bind_to(0); else dpm_ctl("thread.tcache.flush", NULL, NULL, NULL, 0);
        hook = NULL;
        bool on = get_cache();
        printf("%s: callback's thread.tcache.enabled=false returned %d; afterwards thread.tcache.enabled reads %d (0 if the call was honoured; EBUSY leaves it on)\n", what[k], rc_in_cb, on);
        wrong += on && rc_in_cb == 0;
    }
    return wrong != 0;
}
