/*
 * r24_trim_cancel.c - a thread cancelled anywhere inside malloc_trim
 * leaves nothing locked: the next thread's allocations go on.
 *
 * The reproduction of issue 19 against 2e0f49e: malloc_trim read
 * /proc/self/task/<tid>/{syscall,status} (open and read, cancellation
 * points) while it held the cache-list lock and a cache's lock; a thread
 * cancelled there died holding both, and the next thread's first malloc
 * (which registers its cache under the list lock) hung for ever.
 *
 * Rounds: a few threads keep caches of small blocks and sleep (so that a
 * trim has other threads' caches to look at); a trimmer thread calls
 * malloc_trim(0) in a loop with deferred cancellation enabled; it is
 * cancelled after a random short delay and joined; then a fresh thread
 * must malloc, free and exit within a second. An alarm turns a hang into
 * a failure.
 *
 * usage: test_review_r24_trim_cancel [rounds]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "review.h"

#define SLEEPERS 4
static pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int gate_open;

static void *sleeper(void *arg)
{
    (void)arg;
    void *p[256];
    for (int r = 0; r < 8; r++) {
        for (int i = 0; i < 256; i++)
            p[i] = malloc(16 + (size_t)(i % 32) * 16);
        for (int i = 0; i < 256; i++)
            free(p[i]);
    }
    pthread_mutex_lock(&gate);
    while (!gate_open)
        pthread_cond_wait(&gate_cv, &gate);
    pthread_mutex_unlock(&gate);
    return NULL;
}

static void *trimmer(void *arg)
{
    (void)arg;
    pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, NULL);
    for (;;) {
        malloc_trim(0);
        pthread_testcancel();
    }
    return NULL;
}

static void *newcomer(void *arg)
{
    (void)arg;
    for (int i = 0; i < 1000; i++)
        free(malloc(32 + (size_t)i % 512));
    return NULL;
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "FAIL: hang after a cancelled malloc_trim\n";
    ssize_t w = write(1, msg, sizeof(msg) - 1);
    (void)w;
    _exit(1);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 300;
    signal(SIGALRM, on_alarm);
    pthread_t sl[SLEEPERS];
    for (int i = 0; i < SLEEPERS; i++)
        pthread_create(&sl[i], NULL, sleeper, NULL);
    usleep(100000);
    unsigned seed = 12345;
    for (int r = 0; r < rounds; r++) {
        alarm(10);
        pthread_t t;
        pthread_create(&t, NULL, trimmer, NULL);
        usleep(rand_r(&seed) % 2000);
        pthread_cancel(t);
        pthread_join(t, NULL);
        pthread_t n;
        pthread_create(&n, NULL, newcomer, NULL);
        pthread_join(n, NULL);
        free(malloc(100));
        alarm(0);
    }
    pthread_mutex_lock(&gate);
    gate_open = 1;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate);
    for (int i = 0; i < SLEEPERS; i++)
        pthread_join(sl[i], NULL);
    printf("ok (%d cancelled trims)\n", rounds);
    return 0;
}
