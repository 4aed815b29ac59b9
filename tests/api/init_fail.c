/*
 * init_fail.c - a failed initialisation is final: every later allocation
 * fails at once with ENOMEM, and the warnings about a bad DPMALLOC_CONF
 * are printed once, not once per attempt.
 *
 * The test re-executes itself as "child" with DPMALLOC_CONF naming an
 * unknown option. The child's preinit function (it runs before every
 * constructor, dpmalloc's included) sets RLIMIT_AS to the address space
 * already in use plus 64 KiB, so dpmalloc's first mapping fails. The child
 * then calls malloc, calloc, realloc and posix_memalign several times,
 * raises the limit again and tries once more, and reports through write(2)
 * (stdio would allocate). The parent checks the child's exit status and
 * that the warning appears exactly once in its stderr.
 */
#include "override.h"

#include <sys/resource.h>

#define ATTEMPTS 5
#define BAD_CONF "bogus_option:1"
#define WARNING "dpmalloc: unknown option bogus_option:1 (ignored, default kept)\n"

static struct rlimit saved_as;

/* Address space in use, from /proc/self/statm, without allocating. */
static size_t vm_bytes(void)
{
    char buf[128];
    int fd = open("/proc/self/statm", O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    return (size_t)strtoull(buf, NULL, 10) * (size_t)sysconf(_SC_PAGESIZE);
}

static void limit_address_space(int argc, char **argv, char **envp)
{
    (void)envp;
    if (argc < 2 || strcmp(argv[1], "child") != 0)
        return;
    size_t used = vm_bytes();
    getrlimit(RLIMIT_AS, &saved_as);
    struct rlimit r = {used + ((size_t)64 << 10), saved_as.rlim_max};
    if (used == 0 || setrlimit(RLIMIT_AS, &r) != 0)
        _exit(90);
}
__attribute__((section(".preinit_array"), used)) static void (*const preinit)(int, char **, char **) =
    limit_address_space;

static void say(const char *s)
{
    if (write(STDOUT_FILENO, s, strlen(s)) < 0) {
    }
}

/* Each call must fail with ENOMEM; returns the number that did not. */
static int attempt_all(void)
{
    int wrong = 0;
    errno = 0;
    wrong += malloc(64) != NULL || errno != ENOMEM;
    errno = 0;
    wrong += calloc(4, 100) != NULL || errno != ENOMEM;
    errno = 0;
    wrong += realloc(NULL, 5000) != NULL || errno != ENOMEM;
    void *p = NULL;
    wrong += posix_memalign(&p, 64, 128) != ENOMEM;
    return wrong;
}

static int child_main(void)
{
    int wrong = 0;
    for (int i = 0; i < ATTEMPTS; i++)
        wrong += attempt_all();
    /* With memory available again the failure still stands. */
    if (setrlimit(RLIMIT_AS, &saved_as) != 0)
        return 91;
    wrong += attempt_all();
    say(wrong == 0 ? "child: every allocation failed with ENOMEM\n"
                   : "child: an allocation succeeded or errno was not ENOMEM\n");
    return wrong == 0 ? 0 : 1;
}

static int exec_child(void *exe)
{
    setenv("DPMALLOC_CONF", BAD_CONF, 1);
    char *argv[] = {exe, "child", NULL};
    execv(exe, argv);
    return 92;
}

static size_t count_of(const char *text, const char *what)
{
    size_t n = 0;
    for (const char *p = strstr(text, what); p != NULL; p = strstr(p + 1, what))
        n++;
    return n;
}

TEST(override_in_effect) { test_expect_override(); }

TEST(failed_init_is_final)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    EXPECT(n > 0, "readlink: %s", strerror(errno));
    if (n <= 0)
        return;
    exe[n] = '\0';
    struct test_child c;
    EXPECT_EQ_I(test_run_child(exec_child, exe, &c, 30), 0);
    char d[128];
    EXPECT(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0, "child %s; stderr:\n%s",
           test_describe_status(c.status, d, sizeof d), c.err);
    EXPECT(count_of(c.err, WARNING) == 1, "warning printed %zu times; stderr:\n%s",
           count_of(c.err, WARNING), c.err);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "child") == 0)
        return child_main();
    RUN(override_in_effect);
    RUN(failed_init_is_final);
    return test_done();
}
