/*
 * ctl_util.h - helpers shared by the tests in tests/ctl/: typed dpm_ctl
 * wrappers that report the name and the error on failure, running a helper
 * program with an environment and capturing its stdout and stderr, reading
 * the resident set size, and a line counter for captured output.
 * Include after test.h.
 */
#ifndef DPM_CTL_UTIL_H
#define DPM_CTL_UTIL_H

#include <string.h>
#include "test.h"

#include <dpmalloc.h>
#include <poll.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- dpm_ctl wrappers ---- */

/* Formats a ctl name into a per-thread buffer (one at a time per thread). */
static inline const char *ctl_name(const char *fmt, ...)
{
    static _Thread_local char buf[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return buf;
}

/* Reads a value of the given size; returns the dpm_ctl result. */
static inline int ctl_get(const char *name, void *out, size_t len)
{
    size_t l = len;
    int e = dpm_ctl(name, out, &l, NULL, 0);
    if (e == 0 && l != len)
        return -1;
    return e;
}

static inline int ctl_set(const char *name, const void *in, size_t len)
{
    return dpm_ctl(name, NULL, NULL, (void *)in, len);
}

static inline int ctl_action(const char *name) { return dpm_ctl(name, NULL, NULL, NULL, 0); }

static inline uint64_t ctl_refresh(void)
{
    uint64_t e = 1, out = 0;
    size_t l = sizeof out;
    int r = dpm_ctl("epoch", &out, &l, &e, sizeof e);
    if (r != 0)
        fprintf(stderr, "epoch refresh failed: %d\n", r);
    return out;
}

/* A size_t statistic after an epoch refresh; (size_t)-1 if the read
 * fails (for children that report values rather than check them). */
static inline size_t ctl_fresh_size(const char *name)
{
    uint64_t e = 1;
    size_t l = sizeof(e), v = 0;
    dpm_ctl("epoch", &e, &l, &e, sizeof(e));
    l = sizeof(v);
    if (dpm_ctl(name, &v, &l, NULL, 0) != 0)
        return (size_t)-1;
    return v;
}

/* debug.check_heap: 0 when every arena's invariants hold; 999 if the call
 * fails. */
static inline unsigned ctl_heap_broken(void)
{
    unsigned broken = 1;
    size_t l = sizeof(broken);
    if (dpm_ctl("debug.check_heap", &broken, &l, NULL, 0) != 0)
        return 999;
    return broken;
}

/* Allocates and frees blocks of every small size (64 at a time, each
 * pattern-filled and checked before its free), leaving the thread's bins
 * full; 1 if a block is missing or lost its pattern. */
static inline int churn_small_sizes(uintptr_t tag, int rounds)
{
    enum { N = 64 };
    void *live[N];
    for (int r = 0; r < rounds; r++) {
        for (size_t size = 16; size <= 14336; size += size / 4 + 8) {
            for (int i = 0; i < N; i++) {
                live[i] = malloc(size);
                if (live[i] == NULL)
                    return 1;
                test_fill(live[i], size, tag + size + (uintptr_t)i);
            }
            for (int i = 0; i < N; i++) {
                if (test_check(live[i], size, tag + size + (uintptr_t)i) != size)
                    return 1;
                free(live[i]);
            }
        }
    }
    return 0;
}

/* Reads a size_t statistic, recording a failure (and returning 0) when the
 * call fails. */
#define CTL_SIZE(name) ctl_size_at(__FILE__, __LINE__, (name))
static inline size_t ctl_size_at(const char *file, int line, const char *name)
{
    size_t v = 0;
    int e = ctl_get(name, &v, sizeof v);
    if (e != 0)
        TEST_FAIL_AT(file, line, "dpm_ctl(\"%s\") as size_t failed: %d", name, e);
    return v;
}
#define CTL_U64(name) ctl_u64_at(__FILE__, __LINE__, (name))
static inline uint64_t ctl_u64_at(const char *file, int line, const char *name)
{
    uint64_t v = 0;
    int e = ctl_get(name, &v, sizeof v);
    if (e != 0)
        TEST_FAIL_AT(file, line, "dpm_ctl(\"%s\") as uint64_t failed: %d", name, e);
    return v;
}
#define CTL_UNS(name) ctl_uns_at(__FILE__, __LINE__, (name))
static inline unsigned ctl_uns_at(const char *file, int line, const char *name)
{
    unsigned v = 0;
    int e = ctl_get(name, &v, sizeof v);
    if (e != 0)
        TEST_FAIL_AT(file, line, "dpm_ctl(\"%s\") as unsigned failed: %d", name, e);
    return v;
}

/* Expect dpm_ctl(...) == err, printing the name and both values. */
#define EXPECT_CTL(call, err)                                                  \
    do {                                                                       \
        int got_ = (call);                                                     \
        if (got_ != (err))                                                     \
            TEST_FAIL("%s: expected %s (%d), got %d (%s)", #call, #err,        \
                      (err), got_, got_ > 0 ? strerror(got_) : "-");           \
    } while (0)

/* Under ThreadSanitizer fork works only with detect_deadlocks=0 (make tsan
 * sets it): fork's prepare handler holds every arena and bin lock, more
 * than the deadlock detector tracks. */
static inline bool tsan_fork_ok(void)
{
    const char *o = getenv("TSAN_OPTIONS");
    return o != NULL && strstr(o, "detect_deadlocks=0") != NULL;
}

/* ---- running a helper program ---- */

struct spawn_result {
    int status;          /* waitpid status; -1 if it could not run */
    bool timed_out;
    char out[65536];     /* stdout, NUL-terminated, truncated */
    size_t outlen;
    char err[65536];     /* stderr */
    size_t errlen;
};

/*
 * Runs argv[0] (a path) with argv, the current environment plus env
 * entries "K=V" (NULL-terminated list; an entry "K=" with empty value
 * unsets nothing, it sets K to ""), and "-K" entries removed from the
 * environment. Captures stdout and stderr; kills it after timeout_s.
 */
static inline void spawn_capture(char *const argv[], const char *const env[], double timeout_s,
                                 struct spawn_result *r)
{
    int po[2], pe[2];
    memset(r, 0, sizeof *r);
    r->status = -1;
    if (pipe(po) != 0 || pipe(pe) != 0)
        return;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return;
    if (pid == 0) {
        dup2(po[1], 1);
        dup2(pe[1], 2);
        close(po[0]);
        close(po[1]);
        close(pe[0]);
        close(pe[1]);
        for (const char *const *e = env; e != NULL && *e != NULL; e++) {
            if ((*e)[0] == '-') {
                unsetenv(*e + 1);
                continue;
            }
            char kv[4096];
            snprintf(kv, sizeof kv, "%s", *e);
            char *eq = strchr(kv, '=');
            if (eq == NULL)
                continue;
            *eq = '\0';
            setenv(kv, eq + 1, 1);
        }
        execv(argv[0], argv);
        fprintf(stderr, "execv %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    double t0 = test_now_s();
    int fd[2] = {po[0], pe[0]};
    while (fd[0] >= 0 || fd[1] >= 0) {
        struct pollfd fds[2] = {{fd[0], POLLIN, 0}, {fd[1], POLLIN, 0}};
        double left = timeout_s - (test_now_s() - t0);
        if (left <= 0) {
            r->timed_out = true;
            kill(pid, SIGKILL);
            break;
        }
        int n = poll(fds, 2, (int)(left * 1000) + 1);
        if (n < 0 && errno != EINTR)
            break;
        for (int i = 0; i < 2; i++) {
            if (fd[i] < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            char *buf = i == 0 ? r->out : r->err;
            size_t *len = i == 0 ? &r->outlen : &r->errlen;
            char scratch[4096];
            ssize_t got = read(fd[i], scratch, sizeof scratch);
            if (got <= 0) {
                close(fd[i]);
                fd[i] = -1;
                continue;
            }
            size_t room = sizeof r->out - 1 - *len;
            size_t take = (size_t)got < room ? (size_t)got : room;
            memcpy(buf + *len, scratch, take);
            *len += take;
            buf[*len] = '\0';
        }
    }
    for (int i = 0; i < 2; i++)
        if (fd[i] >= 0)
            close(fd[i]);
    waitpid(pid, &r->status, 0);
}

/* Spawn, and record a failure if the helper did not exit with status 0. */
#define SPAWN_OK(r) spawn_ok_at(__FILE__, __LINE__, (r))
static inline bool spawn_ok_at(const char *file, int line, const struct spawn_result *r)
{
    if (!r->timed_out && r->status != -1 && WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0)
        return true;
    char why[96];
    TEST_FAIL_AT(file, line, "helper %s%s; stdout:\n%s\nstderr:\n%s",
                 r->timed_out ? "timed out, " : "", test_describe_status(r->status, why, sizeof why),
                 r->out, r->err);
    return false;
}

/* Lines of text containing needle. */
static inline unsigned count_lines_with(const char *text, const char *needle)
{
    unsigned n = 0;
    const char *line = text;
    while (*line != '\0') {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[1024];
        size_t l = len < sizeof buf - 1 ? len : sizeof buf - 1;
        memcpy(buf, line, l);
        buf[l] = '\0';
        if (strstr(buf, needle) != NULL)
            n++;
        line += len + (end ? 1 : 0);
    }
    return n;
}

/* "key=value" line in text; copies value into out, false if missing. */
static inline bool find_kv(const char *text, const char *key, char *out, size_t outlen)
{
    size_t kl = strlen(key);
    for (const char *line = text; line != NULL && *line != '\0';) {
        if (strncmp(line, key, kl) == 0 && line[kl] == '=') {
            const char *v = line + kl + 1;
            const char *end = strchr(v, '\n');
            size_t vl = end ? (size_t)(end - v) : strlen(v);
            if (vl >= outlen)
                vl = outlen - 1;
            memcpy(out, v, vl);
            out[vl] = '\0';
            return true;
        }
        line = strchr(line, '\n');
        if (line != NULL)
            line++;
    }
    return false;
}

/* ---- re-executed children ---- */

/* The number a child printed as "key=value" (0, and a failure naming the
 * key and the child's output, if it printed none). */
#define spawn_kv(r, key) spawn_kv_at(__FILE__, __LINE__, (r), (key))
static inline size_t spawn_kv_at(const char *file, int line, const struct spawn_result *r, const char *key)
{
    char v[64];
    if (!find_kv(r->out, key, v, sizeof v)) {
        TEST_FAIL_AT(file, line, "%s missing from the child's output:\n%s\n%s", key, r->out, r->err);
        return 0;
    }
    return (size_t)strtoll(v, NULL, 10);
}

/* Runs `self --child mode` with DPMALLOC_CONF=conf and a time limit;
 * false (and a failure) if it did not run to a 0 exit. */
#define spawn_mode(self, mode, conf, timeout_s, r) spawn_mode_at(__FILE__, __LINE__, (self), (mode), (conf), (timeout_s), (r))
static inline bool spawn_mode_at(const char *file, int line, char *self, const char *mode, const char *conf,
                                 double timeout_s, struct spawn_result *r)
{
    char *argv[] = {self, "--child", (char *)mode, NULL};
    char env[256];
    snprintf(env, sizeof env, "DPMALLOC_CONF=%s", conf);
    const char *envp[] = {env, NULL};
    spawn_capture(argv, envp, timeout_s, r);
    return spawn_ok_at(file, line, r);
}

/* ---- memory ---- */

/* Resident set size of this process in bytes (from /proc/self/statm). */
/* Resident bytes from /proc/self/statm, read without allocating (stdio
 * would malloc and free a FILE, which callers that measure the heap must
 * not do). */
static inline size_t rss_bytes(void)
{
    char buf[128];
    int fd = open("/proc/self/statm", O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    unsigned long size = 0, res = 0;
    if (sscanf(buf, "%lu %lu", &size, &res) != 2)
        res = 0;
    return (size_t)res * (size_t)sysconf(_SC_PAGESIZE);
}

/* Strips the characters of `chars` from both ends of s, in place (cells
 * of the markdown tables the docs tests read). */
static inline void trim_chars(char *s, const char *chars)
{
    size_t n = strlen(s);
    while (n > 0 && strchr(chars, s[n - 1]) != NULL)
        s[--n] = '\0';
    size_t k = strspn(s, chars);
    memmove(s, s + k, strlen(s + k) + 1);
}

#endif /* DPM_CTL_UTIL_H */
