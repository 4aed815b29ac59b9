/* Idle threads whose last take left slack keep their whole large-cache
 * reservation: large_release_if_squeezed skips a cache with slack. Each of
 * NIDLE threads runs a chain 1 -> 2 -> 4 MiB, frees it (a grown 4 MiB block
 * cached, 4 MiB reserved), then mallocs MODE-size and holds it, idle:
 *   slack: malloc(3.5 MiB) (the grown block, 0.5 MiB slack: bytes 0.5 MiB)
 *   exact: malloc(4 MiB)   (the block as it is: bytes 0)
 * Then a worker does 2000 x (malloc 1 MiB, free). docs/design.md: idle
 * threads "hold at most half the cap plus their own bytes rounded up, and
 * never lock the others out".
 * build: cc -O1 -Iinclude -Itests/review tests/review/r14_slack_idle.c build/libdpmalloc.a -lpthread -lm
 * run:   /tmp/r14_si slack ; /tmp/r14_si exact   */
#include "source_units.h"
#define NIDLE 32
static const char *mode;
static pthread_barrier_t bar;
static volatile bool done;
static size_t worker_saw;
static void *idle(void *a)
{
    (void)a;
    char *p = malloc(1 << 20); memset(p, 1, 4096);
    p = realloc(p, 2 << 20); p = realloc(p, 4 << 20);
    free(p);
    size_t s = strcmp(mode, "slack") == 0 ? (7u << 19) : (4u << 20);
    char *q = malloc(s); memset(q, 2, 4096);
    pthread_barrier_wait(&bar);
    while (!done) usleep(10000);
    free(q);
    return NULL;
}
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static size_t tcache_bytes_all(void)
{ uint64_t ep = 1; dpm_ctl("epoch", NULL, NULL, &ep, sizeof ep); size_t v = 0, l = sizeof v; dpm_ctl("stats.tcache_bytes", &v, &l, NULL, 0); return v; }
static void *worker(void *a)
{
    (void)a;
    double t0 = now();
    for (int i = 0; i < 2000; i++) { char *p = malloc(1 << 20); p[0] = 1; p[(1 << 20) - 1] = 1; free(p); }
    double t1 = now();
    worker_saw = tcache_bytes_all();   /* with its own cache, before it exits */
    printf("%s: worker 2000 x malloc(1 MiB)+free: %.0f ns each; stats.tcache_bytes %zu\n", mode, (t1 - t0) / 2000 * 1e9, worker_saw);
    return NULL;
}
int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    setvbuf(stdout, NULL, _IONBF, 0); signal(SIGALRM, on_alarm); alarm(50);
    mode = argv[1];
    pthread_barrier_init(&bar, NULL, NIDLE + 1);
    pthread_t t[NIDLE];
    for (int i = 0; i < NIDLE; i++) pthread_create(&t[i], NULL, idle, NULL);
    pthread_barrier_wait(&bar);
    printf("%s: %d idle threads; stats.tcache_bytes %zu\n", mode, NIDLE, tcache_bytes_all());
    size_t before = tcache_bytes_all();
    pthread_t w; pthread_create(&w, NULL, worker, NULL); pthread_join(w, NULL);
    size_t after = worker_saw;
    done = true;
    for (int i = 0; i < NIDLE; i++) pthread_join(t[i], NULL);
    /* the worker's 1 MiB block is cached: the idle caches left it room */
    int bad = after < before + (1u << 19);
    printf("%s\n", bad ? "FAIL: the worker's large cache is locked out" : "ok");
    return bad;
}
