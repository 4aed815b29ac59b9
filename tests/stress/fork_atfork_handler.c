/*
 * fork_atfork_handler.c - fork() in a program whose own pthread_atfork
 * handlers allocate, registered from a constructor before any malloc.
 *
 * glibc runs prepare handlers in the reverse order of registration. If
 * dpmalloc registered its handlers after this program's (at its first
 * malloc), its prepare handler would take every allocator lock first and
 * this program's prepare handler would then block in malloc for ever once
 * the process has two threads. dpmalloc registers in a constructor that
 * runs before the program's, so the program's handlers run outside its
 * locks. A second thread allocates all the time so that the locks are real;
 * the main thread forks in a loop; each child allocates and exits. alarm()
 * turns a hang into a failure with a message.
 */
#include "override.h"

#include <pthread.h>
#include <stdatomic.h>

#define NFORKS 300
#define HANG_S 20

static atomic_int prepare_calls, parent_calls, child_calls;
static atomic_int stop;

static void *handler_alloc(size_t n)
{
    void *p = malloc(n);
    if (p != NULL)
        memset(p, 0x5a, n);
    return p;
}

static void prepare(void)
{
    void *a = handler_alloc(100), *b = handler_alloc(70000);
    if (a != NULL && b != NULL)
        atomic_fetch_add(&prepare_calls, 1);
    free(a);
    free(b);
}

static void parent(void)
{
    void *p = handler_alloc(200);
    if (p != NULL)
        atomic_fetch_add(&parent_calls, 1);
    free(p);
}

static void child(void)
{
    void *p = handler_alloc(300);
    if (p != NULL)
        atomic_fetch_add(&child_calls, 1);
    free(p);
}

/* Default priority: runs after dpmalloc's own constructor. */
__attribute__((constructor)) static void register_handlers(void)
{
    if (pthread_atfork(prepare, parent, child) != 0)
        abort();
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "fork_atfork_handler: fork did not return within "
                              "the time limit (deadlock in an atfork handler)\n";
    if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0) {
    }
    _exit(3);
}

static void *allocator(void *arg)
{
    (void)arg;
    uint64_t rng = 5;
    void *slot[64] = {0};
    while (!atomic_load(&stop)) {
        uint64_t r = test_rand(&rng);
        unsigned i = (unsigned)(r % 64);
        free(slot[i]);
        slot[i] = malloc(1 + (size_t)((r >> 8) % 20000));
    }
    for (unsigned i = 0; i < 64; i++)
        free(slot[i]);
    return NULL;
}

TEST(override_in_effect) { test_expect_override(); }

TEST(fork_with_allocating_handlers)
{
    pthread_t t;
    EXPECT_EQ_I(pthread_create(&t, NULL, allocator, NULL), 0);
    int bad = 0;
    for (int i = 0; i < NFORKS && bad < 5; i++) {
        pid_t pid = fork();
        if (pid < 0) {
            TEST_FAIL("fork: %s", strerror(errno));
            break;
        }
        if (pid == 0) {
            void *p = malloc(1000);
            _exit(p != NULL && atomic_load(&child_calls) == 1 ? 0 : 1);
        }
        int st = 0;
        if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            char d[128];
            TEST_FAIL("fork #%d: child %s", i, test_describe_status(st, d, sizeof d));
            bad++;
        }
    }
    atomic_store(&stop, 1);
    pthread_join(t, NULL);
    EXPECT_EQ_I(atomic_load(&prepare_calls), NFORKS);
    EXPECT_EQ_I(atomic_load(&parent_calls), NFORKS);
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(HANG_S);
    RUN(override_in_effect);
    RUN(fork_with_allocating_handlers);
    return test_done();
}
