/*
 * r24_reclaim_mask_unblocked.c - no block is handed out twice while
 * another thread trims and a signal handler sleeps in a futex wait on top
 * of an interrupted malloc or free.
 *
 * The reproduction of issue 19 against 2e0f49e: the reclaim of a sleeping
 * thread's small bins (since deleted) took "asleep in a futex wait, with
 * the signal mask the cache last recorded" as proof that the owner was in
 * no allocator call. A worker that had SIGUSR1 blocked when its cache
 * recorded its mask, and unblocked it since, sleeps in its SIGUSR1
 * handler with exactly that mask (a handler runs with its own signal
 * blocked), so the reclaimer emptied the bins under the interrupted push
 * or pop: a block handed out twice, or "double free" aborts of a correct
 * program (4 of 4 runs, 0.3 s).
 *
 * Each worker keeps a ring of live 64-byte blocks, each filled with its
 * own pattern and checked before it is freed: a block handed out twice is
 * overwritten by its second owner.
 *
 * usage: test_review_r24_reclaim_mask_unblocked [seconds]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <linux/futex.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "review.h"

#define RING 32
static volatile int stop;
static volatile int primed[2];
static unsigned long nsig;

static void fill(void *p, uint64_t tag)
{
    uint64_t *w = p;
    for (int i = 0; i < 8; i++)
        w[i] = tag ^ (uint64_t)i;
}

static int intact(const void *p, uint64_t tag)
{
    const uint64_t *w = p;
    for (int i = 0; i < 8; i++)
        if (w[i] != (tag ^ (uint64_t)i))
            return 0;
    return 1;
}

static void handler(int sig)
{
    (void)sig;
    static int word;
    struct timespec ts = {0, 2000000};
    syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
    __atomic_fetch_add(&nsig, 1, __ATOMIC_RELAXED);
}

static void *worker(void *arg)
{
    uint64_t id = (uint64_t)(uintptr_t)arg;
    /* The cache is made, and its slow paths run, with SIGUSR1 blocked;
     * then the signal is let in for the measured loop. */
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, NULL);
    void *warm[4096];
    for (int r = 0; r < 4; r++) {
        for (int i = 0; i < 4096; i++)
            warm[i] = malloc(16 + (size_t)(i % 64) * 16);
        for (int i = 0; i < 4096; i++)
            free(warm[i]);
    }
    pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);
    primed[id - 1] = 1;

    void *live[RING];
    uint64_t tag[RING];
    uint64_t n = 0;
    for (int i = 0; i < RING; i++) {
        tag[i] = id << 56 | n++;
        live[i] = malloc(64);
        fill(live[i], tag[i]);
    }
    for (unsigned i = 0; !stop; i = (i + 1) % RING) {
        if (!intact(live[i], tag[i])) {
            printf("FAIL: worker %llu: block %p overwritten: handed out twice\n", (unsigned long long)id, live[i]);
            fflush(stdout);
            _exit(1);
        }
        free(live[i]);
        tag[i] = id << 56 | n++;
        live[i] = malloc(64);
        fill(live[i], tag[i]);
    }
    for (int i = 0; i < RING; i++)
        free(live[i]);
    return NULL;
}

static void *trimmer(void *arg)
{
    (void)arg;
    while (!stop)
        malloc_trim(0);
    return NULL;
}

int main(int argc, char **argv)
{
    int secs = argc > 1 ? atoi(argv[1]) : 5;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = handler;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    pthread_t w1, w2, tr;
    pthread_create(&w1, NULL, worker, (void *)1);
    pthread_create(&w2, NULL, worker, (void *)2);
    pthread_create(&tr, NULL, trimmer, NULL);
    while (!primed[0] || !primed[1])
        usleep(1000);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        pthread_kill(w1, SIGUSR1);
        pthread_kill(w2, SIGUSR1);
        usleep(1000);
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while (t.tv_sec - t0.tv_sec < secs);
    stop = 1;
    pthread_join(w1, NULL);
    pthread_join(w2, NULL);
    pthread_join(tr, NULL);
    unsigned broken = 0;
    size_t l = sizeof(broken);
    if (dpm_ctl && dpm_ctl("debug.check_heap", &broken, &l, NULL, 0) == 0 && broken != 0) {
        printf("FAIL: debug.check_heap reports %u problems\n", broken);
        return 1;
    }
    printf("ok (%lu signals)\n", nsig);
    return 0;
}
