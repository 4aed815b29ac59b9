/*
 * Found by the fuzzer under TSan (make tsan build, test_fuzz_native
 * --seed 3 with fork enabled): arenas_postfork_parent (src/arena.c)
 * unlocks in the order prefork locked, through the same for_each_lock,
 * so it releases every arena's special_lock first and only then walks
 * the special-bin table to unlock the bins' locks. A thread that was
 * waiting on special_lock during the fork creates a special bin
 * (arena_special_bin) in between; the walk then reads its slot unlocked
 * (the data race TSan reports) and unlocks the new bin's lock, which
 * prefork never locked - possibly while its creator holds it in arena_bin_fill,
 * letting a second thread into that bin. Unlocking in reverse order
 * (arena locks, bin locks, then special locks) closes it.
 *
 * One thread forks in a loop while another creates phased bins (a new
 * offset is a new bin) until the table is full.
 *
 * build: cc -fsanitize=thread -I include tests/fuzz/repro/postfork_special_bins.c \
 *           build-tsan/libdpmalloc_plain.a -lpthread
 * run:   TSAN_OPTIONS=detect_deadlocks=0 ./a.out
 *        (a "data race ... arena_special_bin / for_each_lock" report = the defect;
 *        it may take a few runs)
 */
#include <dpmalloc.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static int done;

static void *make_bins(void *arg)
{
    (void)arg;
    for (size_t k = 0; k < 4000 && !__atomic_load_n(&done, __ATOMIC_RELAXED); k++) {
        void *p = dpm_malloc_aligned_at(100 + 16 * (k % 16), 4096, 16 * (k + 1));
        dpm_free(p);
    }
    __atomic_store_n(&done, 1, __ATOMIC_RELAXED);
    return NULL;
}

int main(void)
{
    dpm_free(dpm_malloc(1));
    pthread_t th;
    pthread_create(&th, NULL, make_bins, NULL);
    for (int i = 0; i < 200 && !__atomic_load_n(&done, __ATOMIC_RELAXED); i++) {
        pid_t pid = fork();
        if (pid == 0)
            _exit(0);
        waitpid(pid, NULL, 0);
    }
    __atomic_store_n(&done, 1, __ATOMIC_RELAXED);
    pthread_join(th, NULL);
    printf("done\n");
    return 0;
}
