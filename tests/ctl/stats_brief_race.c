/*
 * stats_brief_race.c - the counters behind mallinfo2 (stats_brief, src/
 * stats.c) read by one thread while three others allocate, free each
 * other's blocks and grow large blocks: under `make tsan` no data race is
 * reported; in every build mapped covers allocated throughout, and once
 * the others stop the main thread's 8 MiB block is what is allocated.
 */
#include "stats.h"
#include "test.h"

#include <dpmalloc.h>
#include <pthread.h>

static int stop;   /* atomic */

static void *churn(void *arg)
{
    uint64_t rng = (uint64_t)(uintptr_t)arg;
    void *keep[64] = {0};
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
        unsigned i = (unsigned)(test_rand(&rng) % 64);
        dpm_free(keep[i]);
        size_t n = test_rand(&rng) % 7 == 0 ? 20000 + test_rand(&rng) % 300000 : test_rand(&rng) % 2000;
        keep[i] = dpm_malloc(n);
    }
    for (unsigned i = 0; i < 64; i++)
        dpm_free(keep[i]);
    return NULL;
}

TEST(brief_while_allocating)
{
    void *own = dpm_malloc(8 << 20);
    pthread_t t[3];
    for (uintptr_t i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, churn, (void *)(i + 1));
    double until = test_now_s() + (TEST_SANITIZED ? 3.0 : 1.0);
    unsigned calls = 0;
    while (test_now_s() < until && test_failures < 5) {
        stats_brief_t b;
        stats_brief(&b);
        calls++;
        EXPECT(b.mapped >= b.allocated, "mapped %zu < allocated %zu", b.mapped, b.allocated);
        EXPECT(b.narenas >= 1 && b.metadata > 0, "narenas %u metadata %zu", b.narenas, b.metadata);
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    fprintf(stderr, "%u stats_brief calls\n", calls);
    /* quiet now: the figure is exact (during the churn, blocks moving
     * between a thread cache and its arena mid-call can be missed) */
    stats_brief_t b;
    stats_brief(&b);
    EXPECT(b.allocated >= (8 << 20) && b.allocated <= (9 << 20), "allocated %zu with an 8 MiB block live",
           b.allocated);
    dpm_free(own);
}

int main(void)
{
    RUN(brief_while_allocating);
    return test_done();
}
