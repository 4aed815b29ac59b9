/*
 * r38_fault_chain.c - review r38: a SIGSEGV disposition the program set
 * before dpmalloc started keeps working under secure mode's fault handler
 * (src/fault.c), which passes every fault that is not in its own pages on
 * to it.
 *
 * A library the program links sets the disposition in its constructor,
 * which the dynamic loader runs before the preloaded dpmalloc's (as in
 * fork_preload_lib_ctor.c), from FAULT_CHAIN:
 *   handler: a crash handler without SA_NODEFER that says so, takes a
 *     lock and faults again. The kernel blocks SIGSEGV while it runs, so
 *     the second fault kills the process (SIGSEGV) after one line. Before
 *     the fix dpmalloc called it with SIGSEGV unblocked: it re-entered
 *     itself and hung on its own lock.
 *   ignore: SIG_IGN. Two raised SIGSEGVs are ignored, as without
 *     dpmalloc. Before the fix the first reset it to the default and the
 *     second killed the process.
 * The test program runs the case in a child and checks how it ended.
 */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* an address nothing maps, out of the compiler's sight */
static int *volatile unmapped = (int *)8;

#ifdef LIBFOO
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void crash_handler(int sig)
{
    (void)sig;
    static const char line[] = "[crash handler]\n";
    if (write(2, line, sizeof line - 1) < 0)
        _exit(3);
    pthread_mutex_lock(&lock);
    *unmapped = 1;   /* a crash handler that crashes */
    pthread_mutex_unlock(&lock);
}

__attribute__((constructor)) static void set_disposition(void)
{
    const char *mode = getenv("FAULT_CHAIN");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    if (mode != NULL && strcmp(mode, "handler") == 0)
        sa.sa_handler = crash_handler;
    else if (mode != NULL && strcmp(mode, "ignore") == 0)
        sa.sa_handler = SIG_IGN;
    else
        return;
    sigaction(SIGSEGV, &sa, NULL);
}

void libfoo_touch(void);
void libfoo_touch(void) {}
#else
void libfoo_touch(void);

int main(void)
{
    libfoo_touch();   /* links the library, whose constructor ran first */
    const char *mode = getenv("FAULT_CHAIN");
    if (mode == NULL) {
        fprintf(stderr, "FAULT_CHAIN unset\n");
        return 2;
    }
    free(malloc(100));   /* dpmalloc is started (and its handler installed) */
    int fds[2];
    if (pipe(fds) != 0)
        return 2;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        alarm(10);   /* a hang ends in SIGALRM, not a stuck test */
        if (strcmp(mode, "handler") == 0) {
            *unmapped = 1;
        } else {
            raise(SIGSEGV);
            raise(SIGSEGV);
            static const char ok[] = "ignored twice\n";
            if (write(2, ok, sizeof ok - 1) < 0)
                _exit(3);
        }
        _exit(0);
    }
    close(fds[1]);
    char err[512];
    size_t got = 0;
    ssize_t n;
    while (got < sizeof err - 1 && (n = read(fds[0], err + got, sizeof err - 1 - got)) > 0)
        got += (size_t)n;
    err[got] = '\0';
    int status;
    waitpid(pid, &status, 0);
    if (strcmp(mode, "handler") == 0) {
        const char *first = strstr(err, "[crash handler]");
        bool once = first != NULL && strstr(first + 1, "[crash handler]") == NULL;
        if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGSEGV || !once) {
            fprintf(stderr, "FAIL: want death by SIGSEGV after one handler line; status %#x, stderr: %s\n",
                    status, err);
            return 1;
        }
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || strstr(err, "ignored twice") == NULL) {
        fprintf(stderr, "FAIL: want both raised SIGSEGVs ignored; status %#x, stderr: %s\n", status, err);
        return 1;
    }
    printf("ok (%s)\n", mode);
    return 0;
}
#endif
