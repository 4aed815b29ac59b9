/*
 * auto_background.c - with no option set, memory freed by a program that
 * then goes quiet goes back (issue 19): the background thread starts once
 * the process has a second thread, never in a single-threaded process,
 * never when background_thread:false is given, and never keeps a process
 * alive after its last thread left with pthread_exit.
 *
 * usage: test_auto_background MODE   (exit 0: the promise holds)
 *   quiet      a second thread that never allocates; the main thread
 *              allocates 256 MiB of 4 KiB blocks, frees them and sleeps:
 *              RSS falls back within a few decay periods (run with
 *              dirty_decay_ms:200 by the test); then, after a quiet
 *              spell, a second round goes back too (the sleeping thread
 *              is woken by the frees)
 *   single     one thread: no background thread after the same churn
 *   off        background_thread:false (the test's DPMALLOC_CONF): none
 *   last_exit  the thread starts, then every program thread leaves with
 *              pthread_exit: the process ends (status 0) on its own
 *   fork       a child forked by a process whose thread started has one
 *              thread and no background thread while only the forking
 *              thread allocates; a thread the child makes starts it
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <dpmalloc.h>

#include "../review/rss.h"

static bool background_on(void)
{
    bool on = false;
    size_t l = sizeof(on);
    if (dpm_ctl("background_thread", &on, &l, NULL, 0) != 0)
        return false;
    return on;
}

/* Threads of this process, counted in /proc (the test may read it). */
static int live_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    if (d == NULL)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

static void churn(size_t bytes)
{
    size_t n = bytes / 4096;
    void **v = malloc(n * sizeof(void *));
    for (size_t i = 0; i < n; i++) {
        v[i] = malloc(4096);
        memset(v[i], 1, 4096);
    }
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static void *idle_thread(void *arg)
{
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

static void *churn_thread(void *arg)
{
    (void)arg;
    churn((size_t)16 << 20);
    return NULL;
}

static void *short_thread(void *arg)
{
    (void)arg;
    free(malloc(100));
    return NULL;
}

static int quiet(void)
{
    pthread_t t;
    pthread_create(&t, NULL, idle_thread, NULL);
    double base = rss_mib();
    churn((size_t)256 << 20);
    double peak = rss_mib();
    if (!background_on()) {
        printf("FAIL: no background thread after the churn with two threads\n");
        return 1;
    }
    /* dirty_decay_ms:200: gone within a few periods; 10 s is plenty */
    for (int i = 0; i < 100; i++) {
        if (rss_mib() < base + 32)
            break;
        usleep(100000);
    }
    double after = rss_mib();
    printf("rss: base %.1f MiB, peak %.1f, quiet %.1f\n", base, peak, after);
    if (peak < base + 200 || after >= base + 32) {
        printf("FAIL: freed memory did not go back (peak %.1f, after %.1f MiB)\n", peak, after);
        return 1;
    }
    /* frees after the quiet spell wake the sleeping thread: back again */
    churn((size_t)128 << 20);
    for (int i = 0; i < 100; i++) {
        if (rss_mib() < base + 32)
            break;
        usleep(100000);
    }
    if (rss_mib() >= base + 32) {
        printf("FAIL: the second round did not go back (%.1f MiB)\n", rss_mib());
        return 1;
    }
    return 0;
}

static int single(void)
{
    churn((size_t)64 << 20);
    usleep(300000);
    if (background_on() || live_threads() != 1) {
        printf("FAIL: a single-threaded process got a background thread (%d threads)\n", live_threads());
        return 1;
    }
    return 0;
}

static int off(void)
{
    pthread_t t;
    pthread_create(&t, NULL, idle_thread, NULL);
    churn((size_t)64 << 20);
    usleep(300000);
    if (background_on() || live_threads() != 2) {
        printf("FAIL: background_thread:false, yet %d threads\n", live_threads());
        return 1;
    }
    return 0;
}

static int last_exit(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        pthread_t t;
        pthread_create(&t, NULL, short_thread, NULL);
        churn((size_t)16 << 20);
        pthread_join(t, NULL);
        if (!background_on())
            _exit(3);
        pthread_exit(NULL);   /* the last program thread */
    }
    for (int i = 0; i < 100; i++) {
        int st;
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) {
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                printf("FAIL: child ended with status %#x\n", st);
                return 1;
            }
            return 0;
        }
        usleep(100000);
    }
    kill(pid, 9);
    waitpid(pid, NULL, 0);
    printf("FAIL: the background thread kept a process alive after its last thread's pthread_exit\n");
    return 1;
}

static int fork_child(void)
{
    pthread_t t;
    pthread_create(&t, NULL, short_thread, NULL);
    churn((size_t)16 << 20);
    pthread_join(t, NULL);
    if (!background_on()) {
        printf("FAIL: not started in the parent\n");
        return 1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        churn((size_t)16 << 20);
        usleep(200000);
        if (background_on() || live_threads() != 1)
            _exit(4);   /* only the forking thread allocated: none */
        pthread_create(&t, NULL, churn_thread, NULL);
        pthread_join(t, NULL);
        if (!background_on() || live_threads() != 2)
            _exit(5);   /* the child's own thread freed: started */
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        printf("FAIL: child status %#x (4: started by the forking thread, 5: not by a new thread)\n", st);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int rc = strcmp(mode, "quiet") == 0       ? quiet()
             : strcmp(mode, "single") == 0    ? single()
             : strcmp(mode, "off") == 0       ? off()
             : strcmp(mode, "last_exit") == 0 ? last_exit()
             : strcmp(mode, "fork") == 0      ? fork_child()
                                              : 2;
    printf("%s %s\n", rc == 0 ? "ok" : "FAIL", mode);
    fflush(stdout);
    _exit(rc);
}
