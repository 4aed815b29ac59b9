/*
 * bg_concurrent_off.c - review r22: two threads that switched
 * background_thread off at the same moment both joined the background
 * thread (background_set decided to join under its lock, but marked the
 * thread stopped only after the join): the second join was of a thread
 * already joined, and hung (5 of 5 runs). A switch back on during the
 * join could also be lost (wanted, and no thread). Now one caller joins,
 * the other waits for that join, and the joiner starts the thread again
 * if it was switched on meanwhile. Each round both threads switch it off
 * at once (then it must not run), then one or both switch it on (then it
 * must run).
 */
#include <dpmalloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#define ROUNDS 200

static pthread_barrier_t both;

static int set(bool v) { return dpm_ctl("background_thread", NULL, NULL, &v, sizeof v); }

static bool running(void)
{
    bool on = false;
    size_t len = sizeof on;
    dpm_ctl("background_thread", &on, &len, NULL, 0);
    return on;
}

static void *toggler(void *arg)
{
    long id = (long)arg;
    int *bad = malloc(sizeof *bad);
    *bad = 0;
    for (int i = 0; i < ROUNDS; i++) {
        pthread_barrier_wait(&both);
        *bad += set(false) != 0;   /* both at once */
        pthread_barrier_wait(&both);
        if (running()) {
            fprintf(stderr, "round %d: switched off twice, but the background thread runs\n", i);
            ++*bad;
        }
        pthread_barrier_wait(&both);
        if (id == 0 || i % 2 == 0)   /* on by one thread, or by both at once */
            *bad += set(true) != 0;
        pthread_barrier_wait(&both);
        if (id == 0 && !running()) {
            fprintf(stderr, "round %d: switched on, but no background thread runs\n", i);
            ++*bad;
        }
    }
    return bad;
}

int main(void)
{
    pthread_barrier_init(&both, NULL, 2);
    if (set(true) != 0) {
        printf("FAIL: background_thread could not be switched on\n");
        return 1;
    }
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, toggler, (void *)i);
    int bad = 0;
    for (int i = 0; i < 2; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad += *(int *)r;
        free(r);
    }
    set(false);
    if (bad != 0 || running()) {
        printf("FAIL: %d failed checks; running after the last switch off: %d\n", bad, running());
        return 1;
    }
    printf("ok\n");
    return 0;
}
