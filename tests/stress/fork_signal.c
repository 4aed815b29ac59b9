/*
 * fork_signal.c - fork() from a signal handler that interrupts malloc.
 *
 * A single-threaded process frees and allocates random blocks (up to
 * 70000 bytes, 1009 slots) in a loop and forks itself every 7th
 * iteration. NHELPERS helper processes send it SIGUSR1 in every iteration
 * (a process-shared barrier before and after keeps them in step), and the
 * handler forks a child that exits at once, and waits for it. The signal
 * lands anywhere, also inside malloc or free: as glibc does, fork in a
 * single-threaded process must take no allocator lock (the interrupted
 * call may hold one), so it is async-signal-safe with respect to malloc.
 * Forks are many, so the test also bounds what each fork costs: an
 * allocator that makes fork slow runs into the time limit.
 *
 * Usage: test [iterations]   (default NITER; prints the time it took)
 */
#include "override.h"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/prctl.h>

#define NHELPERS 5
#define NSLOTS 1009
#define NITER 1500
#ifndef LIMIT_S
#define LIMIT_S 20
#endif

static pthread_barrier_t *barrier;
static volatile sig_atomic_t handler_forks, handler_errors;

static void on_usr1(int sig)
{
    (void)sig;
    int saved = errno;
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        handler_errors = handler_errors + 1;
    else
        handler_forks = handler_forks + 1;
    errno = saved;
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "fork_signal: not done within the time limit "
                              "(fork from a signal handler hung or is too slow)\n";
    if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0) {
    }
    _exit(3);
}

static int barrier_wait(void)
{
    int r = pthread_barrier_wait(barrier);
    return r == 0 || r == PTHREAD_BARRIER_SERIAL_THREAD ? 0 : -1;
}

static void helper(pid_t target, long niter)
{
    /* Die with the test: a test killed by its time limit must not leave
     * helpers blocked on the barrier. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != target)
        _exit(1);
    for (long i = 0; i < niter; i++) {
        if (barrier_wait() != 0 || kill(target, SIGUSR1) != 0 || barrier_wait() != 0)
            _exit(1);
    }
    _exit(0);
}

static long niter = NITER;

TEST(override_in_effect) { test_expect_override(); }

TEST(fork_from_signal_handler)
{
    barrier = mmap(NULL, sizeof *barrier, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    EXPECT(barrier != MAP_FAILED, "mmap: %s", strerror(errno));
    if (barrier == MAP_FAILED)
        return;
    pthread_barrierattr_t ba;
    pthread_barrierattr_init(&ba);
    pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
    EXPECT_EQ_I(pthread_barrier_init(barrier, &ba, NHELPERS + 1), 0);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);

    pid_t helpers[NHELPERS], self = getpid();
    for (int i = 0; i < NHELPERS; i++) {
        helpers[i] = fork();
        if (helpers[i] == 0)
            helper(self, niter);
        EXPECT(helpers[i] > 0, "fork: %s", strerror(errno));
    }

    void *slot[NSLOTS] = {0};
    uint64_t rng = 2024;
    long main_forks = 0, bad = 0;
    for (long i = 0; i < niter; i++) {
        if (barrier_wait() != 0) {
            TEST_FAIL("barrier failed at iteration %ld", i);
            break;
        }
        uint64_t r = test_rand(&rng);
        unsigned k = (unsigned)(r % NSLOTS);
        free(slot[k]);
        size_t n = (size_t)((r >> 16) % 70000);
        slot[k] = malloc(n);
        if (slot[k] == NULL && n != 0)
            bad++;
        else if (n != 0)
            memset(slot[k], (int)i, n < 64 ? n : 64);
        if (i % 7 == 0) {
            pid_t pid = fork();
            if (pid == 0)
                _exit(0);
            int st = 0;
            if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
                bad++;
            else
                main_forks++;
        }
        if (barrier_wait() != 0) {
            TEST_FAIL("barrier failed at iteration %ld", i);
            break;
        }
    }
    for (int i = 0; i < NHELPERS; i++) {
        int st = 0;
        EXPECT_EQ_I(waitpid(helpers[i], &st, 0), helpers[i]);
        EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "helper status 0x%x", st);
    }
    for (unsigned k = 0; k < NSLOTS; k++)
        free(slot[k]);
    EXPECT_EQ_I(bad, 0);
    EXPECT_EQ_I(handler_errors, 0);
    EXPECT(handler_forks > 0, "no fork in the signal handler");
    fprintf(stderr, "%ld iterations, %ld forks in the loop, %d in the handler\n", niter, main_forks,
            (int)handler_forks);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        niter = atol(argv[1]);
    signal(SIGALRM, on_alarm);
    alarm(LIMIT_S);
    RUN(override_in_effect);
    RUN(fork_from_signal_handler);
    return test_done();
}
