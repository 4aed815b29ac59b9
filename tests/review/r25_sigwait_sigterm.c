/*
 * r25_sigwait_sigterm.c - a program that handles SIGTERM with sigwait is
 * killed by SIGTERM instead: the background thread that dpmalloc now
 * starts on its own (background_thread not given) has SIGTERM unblocked.
 *
 * The program: main starts a worker thread (which blocks every signal
 * first thing), then blocks SIGTERM itself and waits for it with sigwait
 * to shut down cleanly (exit status 0). With glibc malloc, and with
 * dpmalloc at 2e0f49e, every thread of the process blocks SIGTERM, so
 * the kernel leaves it pending for sigwait. On c9d0540 the first slow
 * path after the process got its second thread (here inside
 * pthread_create itself, in main, before main blocked SIGTERM) created
 * the background thread, which inherits main's mask of that moment
 * (nothing blocked): the kernel delivers the process-directed SIGTERM to
 * it, the default action kills the process.
 *
 * build: cc -O2 -Iinclude tests/review/r25_sigwait_sigterm.c \
 *           build/libdpmalloc.a -pthread -o /tmp/r25_sigterm
 * run:   /tmp/r25_sigterm     (exit 0: clean shutdown; 1: killed)
 * expected: "child shut down cleanly"; actual on c9d0540 (no
 * DPMALLOC_CONF): "child killed by signal 15" 10 of 10 runs; clean with
 * DPMALLOC_CONF=background_thread:false and on 2e0f49e.
 * (The same holds for SIGINT, SIGHUP, SIGUSR1, ... and for a handler
 * that must run on one thread.)
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

static void *worker(void *arg)
{
    (void)arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);   /* workers never take signals */
    for (;;) {
        char *volatile p = malloc(64);
        free(p);
        usleep(1000);
    }
    return NULL;
}

static int child(void)
{
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &term, NULL);
    /* some work; then the shutdown request arrives */
    char *volatile buf = malloc(1 << 20);
    memset(buf, 1, 1 << 20);
    free(buf);
    usleep(200000);
    kill(getpid(), SIGTERM);
    int sig = 0;
    sigwait(&term, &sig);
    /* clean shutdown: flush state, exit 0 */
    return 0;
}

int main(void)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(child());
    int st;
    waitpid(pid, &st, 0);
    if (WIFSIGNALED(st)) {
        printf("child killed by signal %d (FAIL)\n", WTERMSIG(st));
        return 1;
    }
    printf("child shut down cleanly, status %d\n", WEXITSTATUS(st));
    return WEXITSTATUS(st) == 0 ? 0 : 1;
}
