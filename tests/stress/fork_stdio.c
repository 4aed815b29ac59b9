/*
 * fork_stdio.c - fork() racing stdio that allocates under its own locks.
 *
 * Four threads fork in a loop (each child exits at once with status 17),
 * eight threads re-read a file holding one 50000-character line with
 * getline() (which reallocs while it holds the FILE's lock) and free the
 * line, and one thread calls fflush(NULL) in a loop (which holds glibc's
 * list-of-all-files lock while it waits for each FILE's lock). glibc's
 * fork takes that list lock after the atfork prepare handlers: an
 * allocator whose prepare handler took its own locks first closes the
 * cycle forker -> list lock -> fflush -> FILE lock -> getline -> realloc ->
 * allocator lock -> forker. Runs RUN_MS, then joins; alarm() turns a hang
 * into a failure with a message.
 */
#include "override.h"

#include <pthread.h>
#include <stdatomic.h>

#define NFORKERS 4
#define NREADERS 8
#define LINE_LEN 50000
#define RUN_MS 2500
#define HANG_S 30

static atomic_int stop;
static atomic_long nforks, nlines;
static atomic_int errors;
static char path[64];

static void fail(const char *what)
{
    fprintf(stderr, "fork_stdio: %s: %s\n", what, strerror(errno));
    atomic_fetch_add(&errors, 1);
}

static void *forker(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        pid_t pid = fork();
        if (pid < 0) {
            fail("fork");
            break;
        }
        if (pid == 0)
            _exit(17);
        int st = 0;
        if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 17) {
            fail("child status");
            break;
        }
        atomic_fetch_add(&nforks, 1);
    }
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fail("fopen");
        return NULL;
    }
    while (!atomic_load(&stop)) {
        rewind(f);
        char *line = NULL;
        size_t cap = 0;
        ssize_t n = getline(&line, &cap, f);
        if (n != LINE_LEN + 1) {
            fail("getline length");
            free(line);
            break;
        }
        free(line);
        atomic_fetch_add(&nlines, 1);
    }
    fclose(f);
    return NULL;
}

static void *flusher(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop))
        fflush(NULL);
    return NULL;
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "fork_stdio: threads did not finish within the "
                              "time limit (deadlock between fork and stdio)\n";
    if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0) {
    }
    _exit(3);
}

TEST(override_in_effect) { test_expect_override(); }

TEST(fork_against_getline_and_fflush)
{
    snprintf(path, sizeof path, "/tmp/dpm_fork_stdio.%d", (int)getpid());
    FILE *f = fopen(path, "w");
    EXPECT_NONNULL(f);
    if (f == NULL)
        return;
    for (int i = 0; i < LINE_LEN; i++)
        fputc('a' + i % 26, f);
    fputc('\n', f);
    fclose(f);

    pthread_t t[NFORKERS + NREADERS + 1];
    int n = 0;
    for (int i = 0; i < NFORKERS; i++)
        EXPECT_EQ_I(pthread_create(&t[n++], NULL, forker, NULL), 0);
    for (int i = 0; i < NREADERS; i++)
        EXPECT_EQ_I(pthread_create(&t[n++], NULL, reader, NULL), 0);
    EXPECT_EQ_I(pthread_create(&t[n++], NULL, flusher, NULL), 0);
    usleep(RUN_MS * 1000);
    atomic_store(&stop, 1);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    unlink(path);
    EXPECT_EQ_I(atomic_load(&errors), 0);
    EXPECT(atomic_load(&nforks) > 0 && atomic_load(&nlines) > 0, "forks %ld lines %ld",
           atomic_load(&nforks), atomic_load(&nlines));
    fprintf(stderr, "%ld forks, %ld lines read\n", atomic_load(&nforks), atomic_load(&nlines));
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(HANG_S);
    RUN(override_in_effect);
    RUN(fork_against_getline_and_fflush);
    return test_done();
}
