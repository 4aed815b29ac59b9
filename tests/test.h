/*
 * test.h - the shared harness of dpmalloc's api, stress and death tests.
 *
 * Expect-style checks that print the expression, the failing values and the
 * place, and count failures instead of stopping, so one run shows every
 * broken case. A test program is a list of TEST(name) functions run from
 * main() with RUN(name); test_done() prints "N passed, N failed" and returns
 * the exit status. Also: a child-process runner that captures stderr (for
 * death tests and rlimit tests) and a small deterministic PRNG.
 */
#ifndef DPM_TEST_H
#define DPM_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TEST_SANITIZED 1
#endif
#endif
#ifndef TEST_SANITIZED
#define TEST_SANITIZED 0
#endif
#if defined(__SANITIZE_THREAD__)
#define TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TEST_TSAN 1
#endif
#endif
#ifndef TEST_TSAN
#define TEST_TSAN 0
#endif

#define TEST_UNUSED __attribute__((unused))
static int test_failures TEST_UNUSED; /* failed checks in the current test */
static int tests_passed TEST_UNUSED, tests_failed TEST_UNUSED;
static const char *test_current TEST_UNUSED = "";

#define TEST_FAIL_AT(file, line, ...)                                          \
    do {                                                                       \
        fprintf(stderr, "%s:%d: [%s] ", file, line, test_current);             \
        fprintf(stderr, __VA_ARGS__);                                          \
        fputc('\n', stderr);                                                   \
        fflush(stderr);                                                        \
        test_failures++;                                                       \
    } while (0)
#define TEST_FAIL(...) TEST_FAIL_AT(__FILE__, __LINE__, __VA_ARGS__)

#define EXPECT(cond, ...)                                                      \
    do {                                                                       \
        if (!(cond)) {                                                         \
            TEST_FAIL("expected %s: ", #cond);                                 \
            fprintf(stderr, "    " __VA_ARGS__);                               \
            fputc('\n', stderr);                                               \
        }                                                                      \
    } while (0)
#define EXPECT_TRUE(cond) EXPECT(cond, "(false)")

/* Comparisons of unsigned integers, pointers, errno values. */
#define EXPECT_OP_U(a, op, b)                                                  \
    do {                                                                       \
        unsigned long long a_ = (unsigned long long)(a);                       \
        unsigned long long b_ = (unsigned long long)(b);                       \
        if (!(a_ op b_))                                                       \
            TEST_FAIL("expected %s %s %s: %llu (0x%llx) vs %llu (0x%llx)", #a, \
                      #op, #b, a_, a_, b_, b_);                                \
    } while (0)
#define EXPECT_EQ_U(a, b) EXPECT_OP_U(a, ==, b)
#define EXPECT_NE_U(a, b) EXPECT_OP_U(a, !=, b)
#define EXPECT_GE_U(a, b) EXPECT_OP_U(a, >=, b)
#define EXPECT_LE_U(a, b) EXPECT_OP_U(a, <=, b)
#define EXPECT_LT_U(a, b) EXPECT_OP_U(a, <, b)

#define EXPECT_EQ_I(a, b)                                                      \
    do {                                                                       \
        long long a_ = (long long)(a), b_ = (long long)(b);                    \
        if (a_ != b_)                                                          \
            TEST_FAIL("expected %s == %s: %lld vs %lld", #a, #b, a_, b_);      \
    } while (0)

#define EXPECT_NULL(p)                                                         \
    do {                                                                       \
        const void *p_ = (const void *)(p);                                    \
        if (p_ != NULL)                                                        \
            TEST_FAIL("expected %s == NULL, got %p", #p, p_);                  \
    } while (0)
#define EXPECT_NONNULL(p)                                                      \
    do {                                                                       \
        if ((const void *)(p) == NULL)                                         \
            TEST_FAIL("expected %s != NULL (errno %d: %s)", #p, errno,         \
                      strerror(errno));                                        \
    } while (0)
#define EXPECT_ERRNO(e)                                                        \
    do {                                                                       \
        int e_ = errno;                                                        \
        if (e_ != (e))                                                         \
            TEST_FAIL("expected errno == %s (%d), got %d (%s)", #e, (e), e_,   \
                      strerror(e_));                                           \
    } while (0)
#define EXPECT_ALIGNED(p, a)                                                   \
    do {                                                                       \
        uintptr_t p_ = (uintptr_t)(p);                                         \
        size_t a_ = (size_t)(a);                                               \
        if (p_ % a_ != 0)                                                      \
            TEST_FAIL("expected %s aligned to %zu: %p (misaligned by %zu)",    \
                      #p, a_, (void *)p_, (size_t)(p_ % a_));                  \
    } while (0)

static inline double test_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Run one test function; a test that has failed checks is counted failed. */
#define TEST(name) static void test_##name(void)
#define RUN(name)                                                              \
    do {                                                                       \
        test_current = #name;                                                  \
        test_failures = 0;                                                     \
        double t0_ = test_now_s();                                             \
        test_##name();                                                         \
        double dt_ = test_now_s() - t0_;                                       \
        if (test_failures) {                                                   \
            tests_failed++;                                                    \
            fprintf(stderr, "FAIL %s (%d failed checks, %.2f s)\n", #name,     \
                    test_failures, dt_);                                       \
        } else {                                                               \
            tests_passed++;                                                    \
            fprintf(stderr, "ok   %s (%.2f s)\n", #name, dt_);                 \
        }                                                                      \
    } while (0)

static inline int test_done(void)
{
    fprintf(stderr, "%d passed, %d failed\n", tests_passed, tests_failed);
    return tests_failed ? 1 : 0;
}

/* Hide a pointer's origin from the compiler: for calls that must not be
 * folded away or that gcc would flag (e.g. use after a realloc that is
 * expected to fail). */
static inline void *test_launder(void *p)
{
    __asm__ volatile("" : "+r"(p));
    return p;
}

/* ---- deterministic PRNG (splitmix64 seeded xorshift*) ---- */
static inline uint64_t test_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Fill / verify a block with a pattern derived from a tag and the offset. */
static inline unsigned char test_pattern_byte(uintptr_t tag, size_t i)
{
    return (unsigned char)((tag * 131u) ^ (i * 7u) ^ (i >> 8));
}
static inline void test_fill(void *p, size_t n, uintptr_t tag)
{
    unsigned char *c = (unsigned char *)p;
    for (size_t i = 0; i < n; i++)
        c[i] = test_pattern_byte(tag, i);
}
/* Returns the index of the first wrong byte, or n when all match. */
static inline size_t test_check(const void *p, size_t n, uintptr_t tag)
{
    const unsigned char *c = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++)
        if (c[i] != test_pattern_byte(tag, i))
            return i;
    return n;
}
static inline int test_all_zero(const void *p, size_t n)
{
    const unsigned char *c = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++)
        if (c[i])
            return 0;
    return 1;
}

/* ---- child processes ---- */
struct test_child {
    int status;        /* from waitpid */
    char err[16384];   /* captured stderr (truncated) */
    size_t errlen;
};

/*
 * Run fn(arg) in a forked child with its stderr captured through a pipe;
 * the child exits with fn's return value. The parent waits at most
 * timeout_s seconds, then kills the child with SIGKILL (reported as such).
 */
static inline int test_run_child(int (*fn)(void *), void *arg,
                                 struct test_child *out, unsigned timeout_s)
{
    int fds[2];
    memset(out, 0, sizeof *out);
    if (pipe(fds) != 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        close(fds[1]);
        _exit(fn(arg));
    }
    close(fds[1]);
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    unsigned waited_ms = 0;
    for (;;) {
        ssize_t r;
        char spill[4096]; /* past the buffer: drain so the child never blocks */
        while ((r = out->errlen < sizeof out->err - 1
                        ? read(fds[0], out->err + out->errlen,
                               sizeof out->err - 1 - out->errlen)
                        : read(fds[0], spill, sizeof spill)) > 0)
            if (out->errlen < sizeof out->err - 1)
                out->errlen += (size_t)r;
        out->err[out->errlen] = 0;
        pid_t w = waitpid(pid, &out->status, WNOHANG);
        if (w == pid)
            break;
        if (waited_ms >= timeout_s * 1000u) {
            kill(pid, SIGKILL);
            waitpid(pid, &out->status, 0);
            break;
        }
        usleep(2000);
        waited_ms += 2;
    }
    ssize_t r;
    while (out->errlen < sizeof out->err - 1 &&
           (r = read(fds[0], out->err + out->errlen,
                     sizeof out->err - 1 - out->errlen)) > 0)
        out->errlen += (size_t)r;
    out->err[out->errlen] = 0;
    close(fds[0]);
    return 0;
}

static inline const char *test_describe_status(int st, char *buf, size_t n)
{
    if (WIFEXITED(st))
        snprintf(buf, n, "exited with status %d", WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        snprintf(buf, n, "killed by signal %d (%s)", WTERMSIG(st),
                 strsignal(WTERMSIG(st)));
    else
        snprintf(buf, n, "status 0x%x", st);
    return buf;
}

/* Does text contain a "0x..." number equal to v (any case, any padding)? */
static inline int test_text_has_pointer(const char *text, uintptr_t v)
{
    for (const char *s = text; (s = strstr(s, "0x")) != NULL; s += 2) {
        char *end;
        unsigned long long x = strtoull(s + 2, &end, 16);
        if (end != s + 2 && x == (unsigned long long)v)
            return 1;
    }
    return 0;
}

#endif /* DPM_TEST_H */
