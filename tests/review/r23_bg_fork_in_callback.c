/* Review r23: the background thread forks from a page source's purge callback. In the child that
 * thread is the only thread, and must be able to switch background_thread on and off: the flag
 * that makes the background thread's own switch-off EBUSY (it cannot join itself) was inherited,
 * and every switch in the child returned EBUSY (3 of 3 runs). background_postfork_child clears it.
 * run: DPMALLOC_CONF=background_thread:true,dirty_decay_ms:200 test_r23_bg_fork_in_callback */
#include "source_units.h"
static pthread_t mainthr; static volatile int done_in_bg;
static void h(bool purge) {
    if (!purge || pthread_equal(pthread_self(), mainthr) || done_in_bg) return;
    done_in_bg = 1;
    pid_t p = fork();
    if (p == 0) {
        bool v = true; int r1 = dpm_ctl("background_thread", NULL, NULL, &v, sizeof v);
        bool on = false; size_t l = sizeof on; dpm_ctl("background_thread", &on, &l, NULL, 0);
        v = false; int r2 = dpm_ctl("background_thread", NULL, NULL, &v, sizeof v);
        printf("child (forked on the background thread): set(true) -> %d, reads %d, set(false) -> %d (EBUSY=%d)\n", r1, on, r2, EBUSY);
        _exit(r1 || r2 || !on);
    }
    int st; waitpid(p, &st, 0);
    printf("bg callback: child exit status %d\n", WEXITSTATUS(st));
    done_in_bg = WEXITSTATUS(st) ? 2 : 3;
}
int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0); signal(SIGALRM, on_alarm); alarm(15);
    mainthr = pthread_self();
    unsigned M = make_sourced();
    if (bind_to(M)) return 2;
    hook = h;
    churn_until(&done_in_bg, 100000);
    while (done_in_bg == 1) usleep(1000);
    printf("main: %s\n", done_in_bg == 3 ? "ok" : done_in_bg == 2 ? "FAIL" : "callback never ran");
    return done_in_bg != 3;
}
