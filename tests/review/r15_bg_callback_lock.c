/* A sourced arena's purge run by the background thread (decay_every_arena) calls the source with
 * arenas_lock held (arenas_iteration_lock around arena_decay_pass). A purge callback that calls
 * arenas.create (or fork(), or dpm_arena_create_sourced) then waits on arenas_lock for ever.
 * build: cc -O1 -g -Iinclude -Itests/review tests/review/r15_bg_callback_lock.c build/libdpmalloc.a -lpthread -lm -o /tmp/bgcl
 * run:   DPMALLOC_CONF=background_thread:true,dirty_decay_ms:200 /tmp/bgcl stats|create|fork|purge|trim|malloc  (malloc: control, passes) */
#include "source_units.h"
/* bgoff (review r22): the background thread switching itself off from a purge callback must get EBUSY
 * (it cannot join itself) and keep running. */
static int bgoff_err = -1;
static unsigned Mid; static pthread_t mainthr; static const char *what; static volatile int done_in_bg, entered;
static void h(bool purge) {
    if (!purge || pthread_equal(pthread_self(), mainthr) || done_in_bg) return;
    entered = 1;
    if (strcmp(what, "create") == 0) { unsigned n; size_t l = sizeof n; int e = dpm_ctl("arenas.create", &n, &l, NULL, 0); printf("bg callback: arenas.create -> %d\n", e); }
    else if (strcmp(what, "fork") == 0) { pid_t p = fork(); if (p == 0) _exit(0); int st; waitpid(p, &st, 0); printf("bg callback: fork ok\n"); }
    else if (strcmp(what, "purge") == 0) { char nm[64]; snprintf(nm, sizeof nm, "arena.%u.purge", Mid); int e = dpm_ctl(nm, NULL, NULL, NULL, 0); printf("bg callback: %s -> %d\n", nm, e); }
    else if (strcmp(what, "trim") == 0) { int r = malloc_trim(0); printf("bg callback: malloc_trim -> %d\n", r); }
    else if (strcmp(what, "bgoff") == 0) { bool off = false; bgoff_err = dpm_ctl("background_thread", NULL, NULL, &off, sizeof off); printf("bg callback: background_thread=false -> %d\n", bgoff_err); }
    else if (strcmp(what, "malloc") == 0) { void *v[100]; for (int i = 0; i < 100; i++) v[i] = malloc(100 + i * 1000); for (int i = 0; i < 100; i++) free(v[i]); printf("bg callback: malloc ok\n"); }
    else { uint64_t ep = 1; dpm_ctl("epoch", NULL, NULL, &ep, sizeof ep); printf("bg callback: epoch ok\n"); }
    done_in_bg = 1;
}
int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0); signal(SIGALRM, on_alarm); alarm(15);
    what = argc > 1 ? argv[1] : "create";
    mainthr = pthread_self();
    unsigned M = make_sourced(); Mid = M;
    if (bind_to(M)) return 2;
    hook = h;
    churn_until(&done_in_bg, 100000);
    printf("main: done_in_bg %d (entered %d)\n", done_in_bg, entered);
    if (strcmp(what, "bgoff") == 0) {
        bool on = false; size_t l = sizeof on;
        dpm_ctl("background_thread", &on, &l, NULL, 0);
        printf("main: background_thread=false from the callback -> %d (EBUSY %d), still on: %d\n", bgoff_err, EBUSY, on);
        if (bgoff_err != EBUSY || !on) return 1;
    }
    return !done_in_bg;
}
