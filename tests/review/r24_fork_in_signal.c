/* Review r24 (issue 20, item 7): what README's "fork() works from a signal handler of a
 * single-threaded process" holds to. A 1 ms timer's handler forks while the main loop mallocs and
 * frees (1 B - 20 KiB). A child that allocated inside the handler, over the allocator call the
 * signal had interrupted, died in 1-8 of 3000 forks (SIGSEGV in the page-run index that an
 * interrupted free had half updated) or hung: inside a handler that may have interrupted malloc,
 * only async-signal-safe functions are allowed (POSIX; the same for glibc's malloc), in the parent
 * and in such a child alike, and README now promises exactly what holds: fork takes no allocator
 * lock there (no deadlock), the child may call async-signal-safe functions in the handler
 * (_exit, execve: tests/stress/fork_signal.c), and once the handler returns, the interrupted call
 * completes in the child as it would have in the parent and the child allocates and frees freely,
 * the parent's blocks included. This program checks the last part: every child returns from the
 * handler, then frees and allocates (checking every block's contents) and exits 0; the parent
 * counts children that died, hung (a 10 s watchdog in each) or found a block corrupted.
 * run: test_r24_fork_in_signal [forks]   (default 3000; ctest runs 2000; 30000 by hand) */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NSLOTS 1009

static volatile sig_atomic_t in_child, forks, fork_errors;

static void on_timer(int sig)
{
    (void)sig;
    int saved = errno;
    if (!in_child) {
        pid_t p = fork();
        if (p == 0)
            in_child = 1;   /* returns: the interrupted call completes first */
        else if (p > 0)
            forks = forks + 1;
        else
            fork_errors = fork_errors + 1;
    }
    errno = saved;
}

static void *slot[NSLOTS];
static size_t slot_size[NSLOTS];
static uint64_t rng = 88172645463325252ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* first and last byte carry the slot and size: a block handed out twice or overwritten shows (a
 * 1-byte block: its one byte, the last tag) */
static void fill(unsigned i)
{
    unsigned char *p = slot[i];
    p[0] = (unsigned char)(i ^ slot_size[i]);
    p[slot_size[i] - 1] = (unsigned char)(i + slot_size[i]);
}
static int intact(unsigned i)
{
    const unsigned char *p = slot[i];
    return p == NULL || ((slot_size[i] == 1 || p[0] == (unsigned char)(i ^ slot_size[i])) &&
                         p[slot_size[i] - 1] == (unsigned char)(i + slot_size[i]));
}

/* one free and one allocation of a random slot; 0 if a block was not what it held, -1 if malloc
 * failed */
static int step(void)
{
    unsigned i = (unsigned)(next() % NSLOTS);
    if (!intact(i))
        return 0;
    free(slot[i]);
    slot[i] = NULL;
    size_t n = 1 + (size_t)(next() % 20480);
    slot[i] = malloc(n);
    if (slot[i] == NULL)
        return -1;
    slot_size[i] = n;
    fill(i);
    return 1;
}

static void child_main(void)
{
    signal(SIGALRM, SIG_DFL);   /* a hang: killed by the watchdog, counted by the parent */
    alarm(10);
    for (int k = 0; k < 200; k++) {
        int r = step();
        if (r <= 0)
            _exit(r == 0 ? 2 : 3);
    }
    for (unsigned i = 0; i < NSLOTS; i++) {
        if (!intact(i))
            _exit(2);
        free(slot[i]);
    }
    _exit(0);
}

static long died, hung, corrupt, nomem, reaped;
static void account(int st)
{
    reaped++;
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
        hung++;
    else if (WIFSIGNALED(st))
        died++;
    else if (WEXITSTATUS(st) == 3)
        nomem++;
    else if (WEXITSTATUS(st) != 0)
        corrupt++;
}

int main(int argc, char **argv)
{
    long want = argc > 1 ? atol(argv[1]) : 3000;
    setvbuf(stdout, NULL, _IONBF, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_timer;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct timeval one_ms = {0, 1000};
    struct itimerval it = {one_ms, one_ms};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    setitimer(ITIMER_REAL, &it, NULL);
    int parent_bad = 0;
    while (forks < want && !parent_bad) {
        for (int k = 0; k < 64 && !parent_bad; k++) {
            int r = step();
            if (r <= 0) {
                parent_bad = r == 0 ? 1 : 2;
                if (r < 0)
                    perror("parent: malloc");
            }
            if (in_child)
                child_main();
        }
        int st;
        pid_t w;
        while ((w = waitpid(-1, &st, WNOHANG)) > 0)
            account(st);
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    /* a child forked by a tick that came after the loop's last check (a
     * pending one is delivered as setitimer returns, none after) */
    if (in_child)
        child_main();
    int st;
    while (waitpid(-1, &st, 0) > 0 || errno == EINTR)
        account(st);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("%ld forks (%ld reaped, %d fork errors) in %.1f s: %ld died, %ld hung, %ld found a block corrupted, "
           "%ld got NULL from malloc%s\n",
           (long)forks, reaped, (int)fork_errors, s, died, hung, corrupt, nomem,
           parent_bad == 1 ? "; the PARENT's blocks are corrupted" : parent_bad == 2 ? "; the PARENT got NULL" : "");
    int ok = !parent_bad && died == 0 && hung == 0 && corrupt == 0 && nomem == 0 && reaped == forks;
    printf("%s\n", ok ? "ok" : "FAIL");
    return ok ? 0 : 1;
}
