/*
 * unit.h - the little harness of the unit tests: expectations that print
 * the failing values and count, and a closing "N passed, N failed" line.
 */
#ifndef DPM_UNIT_H
#define DPM_UNIT_H

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Counted atomically: worker threads of the threaded tests check too. */
static unsigned long unit_passed, unit_failed;

#define EXPECT_TRUE(cond, ...)                                                                   \
    do {                                                                                          \
        if (cond) {                                                                               \
            __atomic_fetch_add(&unit_passed, 1, __ATOMIC_RELAXED);                                \
        } else {                                                                                  \
            __atomic_fetch_add(&unit_failed, 1, __ATOMIC_RELAXED);                                \
            fprintf(stderr, "%s:%d: expected %s: ", __FILE__, __LINE__, #cond);                 \
            fprintf(stderr, __VA_ARGS__);                                                         \
            fputc('\n', stderr);                                                                  \
            if (__atomic_load_n(&unit_failed, __ATOMIC_RELAXED) > 20) {                          \
                fprintf(stderr, "too many failures\n");                                           \
                exit(1);                                                                          \
            }                                                                                     \
        }                                                                                         \
    } while (0)

#define EXPECT_EQ_U(a, b)                                                                          \
    EXPECT_TRUE((uint64_t)(a) == (uint64_t)(b), "%s = %" PRIu64 ", %s = %" PRIu64, #a, (uint64_t)(a), #b, \
                (uint64_t)(b))

static inline int unit_finish(const char *name)
{
    unsigned long passed = __atomic_load_n(&unit_passed, __ATOMIC_RELAXED);
    unsigned long failed = __atomic_load_n(&unit_failed, __ATOMIC_RELAXED);
    printf("%s: %lu passed, %lu failed\n", name, passed, failed);
    return failed == 0 ? 0 : 1;
}

/* Runs misuse(arg) in a child process, which must die of SIGABRT with
 * `message` on stderr (the misuse report). */
static inline void expect_child_aborts(void (*misuse)(void *), void *arg, const char *message)
{
    fflush(stdout);
    int fds[2];
    EXPECT_TRUE(pipe(fds) == 0, "pipe");
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        misuse(arg);
        _exit(0);
    }
    close(fds[1]);
    char buf[256] = {0};
    ssize_t n = read(fds[0], buf, sizeof(buf) - 1);
    (void)n;
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "%s not fatal (status %d)", message, status);
    EXPECT_TRUE(strstr(buf, message) != NULL, "message was: %s", buf);
}

/* xorshift64*: deterministic randomness with a seed per test. */
static inline uint64_t unit_rand(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

#endif
