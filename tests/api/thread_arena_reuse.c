/*
 * thread_arena_reuse.c - threads that start after others exited take over
 * the arenas those left, so the pages they are handed are resident and
 * allocation calls do not fault them in (the bench's threads workload:
 * each round starts new pinned threads that allocate N blocks of
 * 4096 bytes at 4096).
 *
 * Rounds of two threads, one after another. Each thread binds to its
 * arena with a first small allocation, waits until its partner has too,
 * then allocates N blocks of 4096 bytes aligned to 4096 with
 * dpm_malloc_aligned, counting the minor page faults inside the calls only
 * (getrusage(RUSAGE_THREAD) around each one), writes every block (the
 * program's first touch, outside the count) and frees them all. Checked:
 * - the two threads of a round, both alive when they chose, are in
 *   different arenas;
 * - every later round uses the same two arenas as the first;
 * - from the second round on, the calls of a thread fault at most N/4
 *   pages (a never-touched arena faults every block's page inside the
 *   call that hands it out: about N). Not under the thread sanitizer,
 *   whose shadow memory adds faults of its own.
 */
#include "test.h"

#include <dpmalloc.h>
#include <pthread.h>
#include <sys/resource.h>

#define ROUNDS 4
#define NTHREADS 2
#define NBLOCKS 256
#define BLOCK 4096

struct worker {
    pthread_barrier_t *bound;
    unsigned arena;
    long faults;      /* minor faults inside the allocation calls */
    int failed;       /* allocations that returned NULL or a misaligned block */
};

static long minor_faults(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) != 0)
        return 0;
    return ru.ru_minflt;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    void *blocks[NBLOCKS];
    size_t len = sizeof w->arena;
    dpm_free(dpm_malloc(16));   /* the thread chooses its arena */
    if (dpm_ctl("thread.arena", &w->arena, &len, NULL, 0) != 0)
        w->arena = ~0u;
    pthread_barrier_wait(w->bound);
    for (int i = 0; i < NBLOCKS; i++) {
        long before = minor_faults();
        blocks[i] = dpm_malloc_aligned(BLOCK, BLOCK);
        w->faults += minor_faults() - before;
        if (blocks[i] == NULL || (uintptr_t)blocks[i] % BLOCK != 0) {
            w->failed++;
            blocks[i] = NULL;
            continue;
        }
        memset(blocks[i], i & 0xff, BLOCK);
    }
    for (int i = 0; i < NBLOCKS; i++)
        dpm_free(blocks[i]);
    return NULL;
}

static void run_round(struct worker w[NTHREADS])
{
    pthread_barrier_t bound;
    pthread_t tid[NTHREADS];
    pthread_barrier_init(&bound, NULL, NTHREADS);
    for (int i = 0; i < NTHREADS; i++) {
        w[i] = (struct worker){.bound = &bound};
        if (pthread_create(&tid[i], NULL, worker_main, &w[i]) != 0) {
            TEST_FAIL("pthread_create failed");
            exit(1);
        }
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(tid[i], NULL);
    pthread_barrier_destroy(&bound);
}

static int has_arena(const struct worker w[NTHREADS], unsigned arena)
{
    for (int i = 0; i < NTHREADS; i++)
        if (w[i].arena == arena)
            return 1;
    return 0;
}

TEST(new_threads_reuse_the_arenas_of_exited_ones)
{
    struct worker first[NTHREADS], w[NTHREADS];
    run_round(first);
    fprintf(stderr, "round 0: arenas %u %u, faults in the calls %ld %ld\n", first[0].arena, first[1].arena,
            first[0].faults, first[1].faults);
    EXPECT(first[0].arena != first[1].arena, "two live threads share arena %u", first[0].arena);
    EXPECT_EQ_I(first[0].failed + first[1].failed, 0);
    for (int r = 1; r < ROUNDS; r++) {
        run_round(w);
        fprintf(stderr, "round %d: arenas %u %u, faults in the calls %ld %ld\n", r, w[0].arena, w[1].arena,
                w[0].faults, w[1].faults);
        EXPECT(w[0].arena != w[1].arena, "round %d: two live threads share arena %u", r, w[0].arena);
        for (int i = 0; i < NTHREADS; i++) {
            EXPECT_EQ_I(w[i].failed, 0);
            EXPECT(has_arena(first, w[i].arena), "round %d: thread %d went to arena %u, not to %u or %u", r, i,
                   w[i].arena, first[0].arena, first[1].arena);
            /* the thread sanitizer's shadow of the arena faults in on its own schedule */
            EXPECT(TEST_TSAN || w[i].faults <= NBLOCKS / 4,
                   "round %d: thread %d faulted %ld pages inside %d calls of dpm_malloc_aligned(%d, %d)", r, i,
                   w[i].faults, NBLOCKS, BLOCK, BLOCK);
        }
    }
}

int main(void)
{
    RUN(new_threads_reuse_the_arenas_of_exited_ones);
    return test_done();
}
