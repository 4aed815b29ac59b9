/*
 * fork_stress.c - fork() while other threads are inside malloc and stdio.
 *
 * Four threads loop on malloc/realloc/free of random sizes (handing blocks
 * to each other), printf to /dev/null and fopen/fclose, while the main
 * thread forks 200 times. Each child must allocate (small, large, aligned,
 * a block inherited from the parent), use stdio, start and join a thread,
 * and exit() cleanly within 10 s. This is where allocators whose locks are
 * not taken and released around fork (pthread_atfork) deadlock in the
 * child. A deadlocked child fails the test (it is killed after 10 s), and
 * alarm() bounds the whole run in case the parent itself hangs.
 */
#include "override.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#define NWORKERS 4
#define NFORKS 200
#define CHILD_TIMEOUT_MS 10000

static atomic_int stop;
static atomic_int worker_errors;

/* one handoff slot per worker, taken by the next worker */
static _Atomic(unsigned char *) handoff[NWORKERS];

static void *worker(void *argp)
{
    int id = (int)(intptr_t)argp;
    uint64_t rng = 77 + (uint64_t)id;
    FILE *null = fopen("/dev/null", "w");
    if (!null) {
        atomic_fetch_add(&worker_errors, 1);
        return NULL;
    }
    unsigned long iter = 0;
    while (!atomic_load(&stop)) {
        uint64_t r = test_rand(&rng);
        size_t n = 1 + (size_t)(r % (1u << ((r >> 32) % 18)));
        unsigned char *p = malloc(n);
        if (!p) {
            atomic_fetch_add(&worker_errors, 1);
            continue;
        }
        p[0] = (unsigned char)id;
        p[n - 1] = 0xa5;
        if (r & 1) {
            unsigned char *q = realloc(p, n * 2);
            if (q)
                p = q;
            else
                atomic_fetch_add(&worker_errors, 1);
        }
        /* pass the block to the next worker, free what we were given */
        unsigned char *old = atomic_exchange(&handoff[(id + 1) % NWORKERS], p);
        free(old);
        if (iter % 16 == 0)
            fprintf(null, "worker %d iteration %lu size %zu %s\n", id, iter, n,
                    "some text to format");
        if (iter % 64 == 0) {
            FILE *f = fopen("/dev/null", "r");
            if (f)
                fclose(f);
            else
                atomic_fetch_add(&worker_errors, 1);
        }
        iter++;
    }
    fclose(null);
    return NULL;
}

static void *child_thread(void *arg)
{
    (void)arg;
    void *v[100];
    for (int i = 0; i < 100; i++)
        v[i] = malloc((size_t)(i * 37 + 1));
    for (int i = 0; i < 100; i++)
        free(v[i]);
    return (void *)1;
}

/* Runs in the child right after fork. Returns the exit status. */
static int child_main(int iteration)
{
    void *small[64];
    for (int i = 0; i < 64; i++) {
        small[i] = malloc((size_t)(16 + i * 24));
        if (!small[i])
            return 10;
        memset(small[i], i, (size_t)(16 + i * 24));
    }
    void *big = malloc((size_t)3 << 20);
    void *al = aligned_alloc(4096, 10000);
    void *cz = calloc(1000, 8);
    if (!big || !al || !cz || (uintptr_t)al % 4096 || !test_all_zero(cz, 8000))
        return 11;
    memset(big, 1, (size_t)3 << 20);
    /* free blocks the parent's threads allocated before the fork */
    for (int i = 0; i < NWORKERS; i++)
        free(atomic_exchange(&handoff[i], NULL));
    char *s = NULL;
    size_t slen = 0;
    FILE *mem = open_memstream(&s, &slen);
    if (!mem)
        return 12;
    for (int i = 0; i < 200; i++)
        fprintf(mem, "child %d line %d\n", iteration, i);
    fclose(mem);
    if (!s || slen < 200 * 14)
        return 13;
    free(s);
    pthread_t t;
    void *ret = NULL;
    if (pthread_create(&t, NULL, child_thread, NULL) != 0)
        return 14;
    pthread_join(t, &ret);
    if (ret != (void *)1)
        return 15;
    for (int i = 0; i < 64; i++)
        free(small[i]);
    free(big);
    free(al);
    free(cz);
    printf("%s", ""); /* stdio usable */
    return 0;
}

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

TEST(override_in_effect) { test_expect_override(); }

TEST(fork_under_load)
{
    pthread_t t[NWORKERS];
    atomic_store(&stop, 0);
    for (int i = 0; i < NWORKERS; i++)
        EXPECT_EQ_I(pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i),
                    0);
    int hung = 0, bad = 0;
    long slowest = 0;
    for (int it = 0; it < NFORKS && hung + bad < 5; it++) {
        usleep(500); /* let the workers get back into malloc/stdio */
        fflush(stdout);
        long t0 = now_ms();
        pid_t pid = fork();
        if (pid < 0) {
            TEST_FAIL("fork: %s", strerror(errno));
            break;
        }
        if (pid == 0)
            exit(child_main(it)); /* exit(), not _exit(): atexit + stdio */
        int st = 0;
        pid_t w;
        while ((w = waitpid(pid, &st, WNOHANG)) == 0 &&
               now_ms() - t0 < CHILD_TIMEOUT_MS)
            usleep(1000);
        long dt = now_ms() - t0;
        if (dt > slowest)
            slowest = dt;
        if (w == 0) {
            TEST_FAIL("fork #%d: child %d still running after %d ms: deadlock "
                      "after fork",
                      it, (int)pid, CHILD_TIMEOUT_MS);
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            hung++;
        } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            char d[128];
            TEST_FAIL("fork #%d: child %s", it,
                      test_describe_status(st, d, sizeof d));
            bad++;
        }
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < NWORKERS; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < NWORKERS; i++)
        free(atomic_exchange(&handoff[i], NULL));
    EXPECT_EQ_I(atomic_load(&worker_errors), 0);
    fprintf(stderr, "slowest child: %ld ms\n", slowest);
}

int main(void)
{
    alarm(240); /* a hang in the parent fails (SIGALRM) instead of blocking */
    RUN(override_in_effect);
    RUN(fork_under_load);
    return test_done();
}
