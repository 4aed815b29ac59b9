/*
 * reclaim_signal_futex.c - a signal handler that sleeps in a futex wait
 * makes its thread look idle to a reclaimer even when the signal
 * interrupted malloc or free in the middle of a bin push or pop: the
 * reclaimer flushes the bins under the interrupted fast path, which then
 * finishes its push/pop on the emptied bin when the handler returns.
 *
 * The design (docs/design.md, "Small bins of sleeping threads") excludes
 * this with "a signal handler may not sleep in those waits (they are not
 * async-signal-safe)". A raw futex(2) or epoll_wait(2) system call is
 * what a handler may make (they are plain system calls, like read or
 * nanosleep, which the same design treats as legitimate in a handler);
 * sem_wait-style waits built on raw futex calls are common in profilers,
 * crash handlers and stop-the-world collectors.
 *
 * Owner thread: malloc(64)/free in a ring of live blocks, each filled with
 * its own pattern and checked before its free; it gets SIGUSR1 every ms,
 * and the handler sleeps 2 ms in syscall(SYS_futex, FUTEX_WAIT). A
 * consumer thread does the same with its own patterns; a third thread
 * calls malloc_trim(0) in a loop.
 *
 * Build: cc -O2 -pthread -Iinclude tests/review/reclaim_signal_futex.c \
 *           build/libdpmalloc.a -o /tmp/rsf
 * Run:   /tmp/rsf [seconds]   (default 20)
 * Expected: "ok ..." exit 0.
 * Actual (f12cda5): 5 of 6 runs of "/tmp/rsf 5" failed, after about 1 s:
 * "dpmalloc: free(): double free of 0x..." (exit 134, the program has no
 * double free) or a segfault. Controls: the same program with
 * malloc_trim replaced by usleep, or with nanosleep in the handler
 * instead of the futex wait, passes (0 and 1 reclaims).
 *
 * Root cause: reclaim_small (src/tcache.c) takes "asleep in a futex or
 * epoll wait, mutex_blocking_here 0" as proof that the owner is in no
 * allocator call. A handler's sleep sits on top of the interrupted
 * alloc_fast/free_fast, which already loaded tls_thread.tcache (the real cache)
 * and the bin's head; the switch to tcache_empty does not reach it, and
 * after flush_small it completes its pop/push with the stale head, so
 * blocks sent home stay in (or return to) the bin. /proc/<tid>/syscall
 * does not say whether the wait is made from a signal handler. Fix
 * options: have the fast paths publish "inside malloc" (stores on the hot
 * path), or document that a handler must not make futex/epoll waits
 * while malloc_trim, arena.<i>.purge or the background thread may run,
 * instead of claiming it cannot happen.
 *
 * First fixed by comparing the thread's blocked signals (/proc SigBlk)
 * with the mask the owner last recorded. Mode "mask-unblocked" defeats
 * that (issue 19's reproduction, 4 of 4 runs on 2e0f49e): each worker makes
 * its cache and runs its slow paths with SIGUSR1 blocked, then unblocks
 * it, so its handler sleeps with exactly the mask the cache recorded.
 * Now fixed by construction: no thread touches another's small bins
 * (docs/design.md, "Small bins belong to their thread alone").
 *
 * usage: test_review_reclaim_signal_futex [seconds] [mask-unblocked]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dpmalloc.h>
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

#define K 32
static volatile int stop;
static unsigned long nsig;

static void fill(void *p, uint64_t tag)
{
    uint64_t *w = p;
    for (int i = 0; i < 8; i++)
        w[i] = tag ^ (uint64_t)i;
}

static int check(const void *p, uint64_t tag)
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
    nsig++;
}

static int mask_unblocked;
static volatile int primed[2];

/* The cache is made, and its slow paths run, with SIGUSR1 blocked; then
 * the signal is let in. */
static void prime_with_usr1_blocked(void)
{
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, NULL);
    static __thread void *warm[4096];
    for (int r = 0; r < 4; r++) {
        for (int i = 0; i < 4096; i++)
            warm[i] = malloc(16 + (size_t)(i % 64) * 16);
        for (int i = 0; i < 4096; i++)
            free(warm[i]);
    }
    pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);
}

static void *loop(void *arg)
{
    uint64_t id = (uint64_t)(uintptr_t)arg;
    if (mask_unblocked)
        prime_with_usr1_blocked();
    primed[id - 1] = 1;
    void *live[K];
    uint64_t tag[K];
    uint64_t n = 0;
    for (int i = 0; i < K; i++) {
        tag[i] = id << 56 | n++;
        live[i] = malloc(64);
        fill(live[i], tag[i]);
    }
    for (unsigned i = 0; !stop; i = (i + 1) % K) {
        if (!check(live[i], tag[i])) {
            printf("BUG: thread %llu: block %p overwritten: handed out twice\n", (unsigned long long)id, live[i]);
            fflush(stdout);
            _exit(1);
        }
        free(live[i]);
        tag[i] = id << 56 | n++;
        live[i] = malloc(64);
        fill(live[i], tag[i]);
    }
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
    int secs = argc > 1 ? atoi(argv[1]) : 20;
    mask_unblocked = argc > 2 && strcmp(argv[2], "mask-unblocked") == 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = handler;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    pthread_t owner, consumer, tr;
    pthread_create(&owner, NULL, loop, (void *)1);
    pthread_create(&consumer, NULL, loop, (void *)2);
    pthread_create(&tr, NULL, trimmer, NULL);
    while (!primed[0] || !primed[1])
        usleep(1000);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        pthread_kill(owner, SIGUSR1);
        pthread_kill(consumer, SIGUSR1);
        usleep(1000);
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while (t.tv_sec - t0.tv_sec < secs);
    stop = 1;
    pthread_join(owner, NULL);
    pthread_join(consumer, NULL);
    pthread_join(tr, NULL);
    unsigned broken = 0;
    size_t l = sizeof(broken);
    if (dpm_ctl("debug.check_heap", &broken, &l, NULL, 0) == 0 && broken != 0) {
        printf("BUG: debug.check_heap reports %u problems\n", broken);
        return 1;
    }
    printf("ok (%lu signals)\n", nsig);
    return 0;
}
