/* Review r23: a thread switching background_thread off is cancelled (pthread_cancel, deferred)
 * while it joins the background thread ("joiner") or waits for another caller's join ("waiter"):
 * both are cancellation points. The waiter left bg_lock held, the joiner left the thread stopping
 * and never joined: every later background_thread call hung (every run). background_set now runs
 * with cancellation disabled: the cancelled caller finishes its switch, and the ctl keeps working.
 * run: DPMALLOC_CONF=background_thread:true,dirty_decay_ms:100 test_r23_bg_cancel waiter|joiner */
#include "source_units.h"
static pthread_t mainthr; static volatile int in_cb, once;
static int nset(bool v){ return dpm_ctl("background_thread", NULL, NULL, &v, sizeof v); }
static void h(bool purge) {
    if (!purge || pthread_equal(pthread_self(), mainthr) || once) return;
    once = 1; in_cb = 1; sleep(1); in_cb = 2;   /* the background thread is slow to stop */
}
static void *off(void *a) { (void)a; int r = nset(false); printf("set(false) -> %d\n", r); return NULL; }
static int final_ok;
static void *final(void *a) {
    (void)a; int r1 = nset(false), r2 = nset(true); bool on = false; size_t l = sizeof on;
    dpm_ctl("background_thread", &on, &l, NULL, 0);
    printf("after: set(false) -> %d, set(true) -> %d, reads %d\n", r1, r2, on);
    final_ok = r1 == 0 && r2 == 0 && on;
    return NULL;
}
int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "waiter";
    setvbuf(stdout, NULL, _IONBF, 0); signal(SIGALRM, on_alarm); alarm(30);
    mainthr = pthread_self();
    unsigned M = make_sourced(); if (bind_to(M)) return 2;
    hook = h;
    churn_until(&in_cb, 50000);
    if (!in_cb) { printf("callback never ran\n"); return 3; }
    pthread_t j, w, f;
    pthread_create(&j, NULL, off, NULL); usleep(100000);
    pthread_create(&w, NULL, off, NULL); usleep(100000);
    pthread_t victim = strcmp(mode, "joiner") == 0 ? j : w;
    pthread_cancel(victim);
    pthread_join(victim, NULL);
    pthread_join(victim == j ? w : j, NULL);
    pthread_create(&f, NULL, final, NULL);
    struct timespec ts; clock_gettime(CLOCK_REALTIME, &ts); ts.tv_sec += 5;
    if (pthread_timedjoin_np(f, NULL, &ts) != 0) { printf("FAIL: background_thread ctl hangs 5 s after the cancel\n"); _exit(1); }
    printf("%s\n", final_ok ? "ok" : "FAIL");
    _exit(final_ok ? 0 : 1);
}
