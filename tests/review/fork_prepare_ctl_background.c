/*
 * fork_prepare_ctl_background.c - fork() deadlocks when an atfork prepare
 * handler that runs after dpmalloc's (registered before dpmalloc
 * initialised: a linked library's constructor, dpmalloc preloaded) reads
 * dpm_ctl("background_thread").
 *
 * Every other ctl name works from that handler (all 38 names of ctl.c's
 * table, read and write, were tried; also malloc_trim, dpm_stats_print,
 * arenas.create (EAGAIN), arena.<i>.reset/destroy, aligned-at-offset and
 * typed allocations, frees of other threads' blocks).
 *
 * Build (from the worktree root, after building build/):
 *   gcc -shared -fPIC -DLIBFOO tests/review/fork_prepare_ctl_background.c -o /tmp/libbgctl.so
 *   gcc tests/review/fork_prepare_ctl_background.c -o /tmp/bgctl -L/tmp -lbgctl \
 *       -Wl,-rpath,/tmp -lpthread
 * Run:   timeout 10 env LD_PRELOAD=$PWD/build/libdpmalloc.so /tmp/bgctl; echo $?
 * Expected: "fork done", exit 0 (as without LD_PRELOAD, or with the
 *   handler reading any other ctl).
 * Actual (main e8c1404): hangs at the fork (exit 124 from timeout).
 *
 * Root cause: src/background.c's bg_lock is a plain pthread mutex, taken
 * by prefork (background_prefork) but not covered by the "owner" flag
 * mutex_all_held_here (src/mutex.h only short-cuts dpm_mutex_t). The
 * forking thread then calls background_enabled() from h_background
 * (src/ctl.c) and blocks on the non-recursive bg_lock it already holds.
 * alloc_slow avoids background_maybe_start in the window; h_background /
 * background_set / background_enabled do not. (A write of
 * background_thread:false there would also pthread_join a decay thread
 * that is blocked on locks the forking thread holds.)
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int dpm_ctl(const char *, void *, size_t *, void *, size_t) __attribute__((weak));

#ifdef LIBFOO
static void prepare(void)
{
    bool on = false;
    size_t len = sizeof on;
    if (dpm_ctl)
        dpm_ctl("background_thread", &on, &len, NULL, 0);
}
static void nothing(void) {}
__attribute__((constructor)) static void foo_init(void) { pthread_atfork(prepare, nothing, nothing); }
int foo_dummy(void) { return 1; }
#else
int foo_dummy(void);

static void *idle(void *arg)
{
    (void)arg;
    free(malloc(10));
    pause();
    return NULL;
}

int main(void)
{
    pthread_t t;
    foo_dummy();
    pthread_create(&t, NULL, idle, NULL);   /* fork must lock: more than one thread */
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    waitpid(pid, NULL, 0);
    printf("fork done\n");
    return 0;
}
#endif
