/*
 * r25_cancel_first_slow_path.c - a thread cancelled (deferred) inside its
 * first malloc leaves dpmalloc's bg_lock held: every later allocation
 * slow path of any thread, and fork(), hang for ever.
 *
 * Cause (c9d0540): with background_thread not given, the first slow path
 * that runs while the process has a second thread calls
 * background_maybe_start, which takes bg_lock and, under it, calls
 * os_process_threads: open/read/close of /proc/self/stat, which are
 * cancellation points. A thread with a pending deferred cancel is acted
 * upon in that open() and unwinds out of malloc with bg_lock held;
 * background_pending stays true, so the next slow path (or fork's
 * prepare handler) blocks on bg_lock.
 *
 * The main thread loads the unwinder (backtrace) and warms its bins
 * before pthread_create so that its own allocations (pthread_cancel's
 * dlopen of libgcc_s, the new thread's DTV) happen single-threaded or
 * on the fast path, and the worker's first malloc is the first
 * multi-threaded slow path. In a real program the window is the first
 * slow path after the process (or a forked child) gets a second thread.
 *
 * build: cc -O2 -Iinclude -Itests/review tests/review/r25_cancel_first_slow_path.c \
 *           build/libdpmalloc.a -pthread -o /tmp/r25_cancel
 * run:   /tmp/r25_cancel        (exit 0: ok; exit 2 / "HANG": the bug)
 * expected: "ok"; actual on c9d0540: HANG (5 of 5 runs); passes with
 * DPMALLOC_CONF=background_thread:false and on 2e0f49e.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <execinfo.h>

static volatile int cancelled;

static void *worker(void *arg)
{
    (void)arg;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
    while (!__atomic_load_n(&cancelled, __ATOMIC_ACQUIRE))
        ;
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
    /* a cancel is pending: the first cancellation point acts on it */
    void *volatile p = malloc(100);   /* thread's first malloc: the slow path */
    free(p);
    pthread_testcancel();
    return NULL;
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char m[] = "HANG: a later malloc slow path / fork blocked (bg_lock held by the cancelled thread)\n";
    write(2, m, sizeof(m) - 1);
    _exit(2);
}

int main(void)
{
    /* pthread_cancel dlopens libgcc_s (allocating) on first use: load it
     * now, while the process has one thread */
    void *bt[4];
    backtrace(bt, 4);
    /* warm the main thread's bins: pthread_create's own allocations stay fast */
    void *keep[64];
    for (size_t s = 8, i = 0; i < 64; i++, s += 64)
        keep[i] = malloc(s);
    for (size_t i = 0; i < 64; i++)
        free(keep[i]);
    signal(SIGALRM, on_alarm);
    alarm(5);
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_cancel(t);
    __atomic_store_n(&cancelled, 1, __ATOMIC_RELEASE);
    void *r;
    pthread_join(t, &r);
    printf("worker %s\n", r == PTHREAD_CANCELED ? "cancelled" : "returned");
    fflush(stdout);
    /* any slow path now: a fresh size class in bulk, and a fork */
    for (int i = 0; i < 100000; i++)
        free(malloc(1 << 20));
    void *big[2000];
    for (int i = 0; i < 2000; i++)
        big[i] = malloc(3000);
    for (int i = 0; i < 2000; i++)
        free(big[i]);
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    waitpid(pid, NULL, 0);
    printf("ok\n");
    return 0;
}
