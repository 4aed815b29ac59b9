#define _GNU_SOURCE
/*
 * prof_dlopen_lib.c - for prof_dlopen.c: a library whose constructor
 * starts a thread that allocates 8 MiB (sampled for certain at the
 * default rate) and waits, up to 5 s, until that thread is done, as a
 * library that starts a worker pool in its constructor does. The
 * constructor runs inside dlopen, holding the loader's lock.
 */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int done;
static void *volatile sink;
int prof_dlopen_worker_done;

static void *worker(void *a)
{
    (void)a;
    for (int i = 0; i < 8; i++)
        sink = malloc(1 << 20);
    pthread_mutex_lock(&m);
    done = 1;
    pthread_cond_signal(&c);
    pthread_mutex_unlock(&m);
    return NULL;
}

__attribute__((constructor)) static void start_pool(void)
{
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    pthread_mutex_lock(&m);
    while (!done)
        if (pthread_cond_timedwait(&c, &m, &until) != 0)
            break;
    prof_dlopen_worker_done = done;
    pthread_mutex_unlock(&m);
    if (done)
        pthread_join(t, NULL);
}
