/*
 * r25_last_exit_no_proc.c - a process whose threads all leave with
 * pthread_exit never ends once /proc/self/stat cannot be opened any more
 * (or, with a seccomp filter, is killed by the automatic background
 * thread's open).
 *
 * c9d0540 starts the background thread on its own (background_thread
 * not given) once the process has a second thread; the thread ends
 * itself only when os_process_threads() == 1, which opens and reads
 * /proc/self/stat and returns 0 when it cannot. The check at start
 * ("no /proc: no automatic start") is made once; a program that later
 * loses access to /proc - daemons and sandboxes do exactly this after
 * starting threads - leaves the background thread alive for ever after
 * its last thread's pthread_exit. Modes (each in a forked child; the
 * parent waits 5 s):
 *   nofile   setrlimit(RLIMIT_NOFILE, 0) after the threads exist (the
 *            OpenSSH rlimit sandbox pattern): open fails with EMFILE
 *   chroot   chroot into an empty directory (privilege-dropping daemon;
 *            needs root)
 *   seccomp  a TSYNC seccomp filter that makes open/openat fail EPERM
 *   seccomp_kill  the same filter with SECCOMP_RET_KILL_PROCESS for
 *            open/openat (a whitelist sandbox): the process dies of
 *            SIGSYS although no program thread opens anything
 *   seccomp_kill_first  the KILL filter installed while the process
 *            has one thread, before it creates its worker: the first
 *            malloc slow path with two threads (background_maybe_start,
 *            os_process_threads' open, in the program's own thread)
 *            kills the process with SIGSYS
 * In each mode the program itself makes no system call that the
 * restriction forbids after installing it.
 *
 * build: cc -O2 -Iinclude tests/review/r25_last_exit_no_proc.c \
 *           build/libdpmalloc.a -pthread -o /tmp/r25_noproc
 * run:   /tmp/r25_noproc MODE    (exit 0: the child ended by itself, 0)
 * expected: "child exited 0"; actual on c9d0540: nofile, chroot,
 * seccomp: "HANG: child still alive after 5 s" (5 of 5 runs each);
 * seccomp_kill and seccomp_kill_first: "child killed by signal 31" (5 of
 * 5 each). All pass with
 * DPMALLOC_CONF=background_thread:false, on 2e0f49e and with glibc.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <execinfo.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *mode;
static pthread_barrier_t ready;

static void *worker(void *arg)
{
    (void)arg;
    void *volatile keep[256];
    for (int r = 0; r < 50; r++) {
        for (int i = 0; i < 256; i++)
            keep[i] = malloc(64 + i * 16);
        for (int i = 0; i < 256; i++)
            free(keep[i]);
    }
    pthread_barrier_wait(&ready);   /* the restriction is in place */
    for (int r = 0; r < 10; r++) {
        char *volatile p = malloc(1000);
        free(p);
        usleep(20000);
    }
    pthread_exit(NULL);
}

static int install_seccomp(bool kill)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_open, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, kill ? SECCOMP_RET_KILL_PROCESS : (SECCOMP_RET_ERRNO | EPERM)),
    };
    struct sock_fprog prog = {sizeof(f) / sizeof(f[0]), f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -1;
    return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog);
}

static void child(void)
{
    void *bt[4];
    backtrace(bt, 4);   /* loads libgcc_s now: pthread_exit needs it later */
    pthread_barrier_init(&ready, NULL, 2);
    if (strcmp(mode, "seccomp_kill_first") == 0) {
        /* the sandbox is set up while single-threaded; threads come after */
        if (install_seccomp(true) != 0) {
            perror("seccomp");
            _exit(3);
        }
        mode = "none";
    }
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    usleep(100000);
    int rc = 0;
    if (strcmp(mode, "nofile") == 0) {
        struct rlimit rl = {0, 0};
        rc = setrlimit(RLIMIT_NOFILE, &rl);
    } else if (strcmp(mode, "chroot") == 0) {
        char dir[] = "/tmp/r25_emptyXXXXXX";
        rc = mkdtemp(dir) == NULL ? -1 : chroot(dir) != 0 ? -1 : chdir("/");
    } else if (strcmp(mode, "seccomp") == 0) {
        rc = install_seccomp(false);
    } else if (strcmp(mode, "seccomp_kill") == 0) {
        rc = install_seccomp(true);
    }
    if (rc != 0) {
        perror("setting up the restriction");
        _exit(3);
    }
    pthread_barrier_wait(&ready);
    pthread_exit(NULL);   /* the worker ends the process when it leaves */
}

int main(int argc, char **argv)
{
    mode = argc > 1 ? argv[1] : "nofile";
    pid_t pid = fork();
    if (pid == 0)
        child();
    for (int i = 0; i < 500; i++) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            if (WIFSIGNALED(st)) {
                printf("%s: child killed by signal %d (FAIL)\n", mode, WTERMSIG(st));
                return 1;
            }
            printf("%s: child exited %d\n", mode, WEXITSTATUS(st));
            return WEXITSTATUS(st);
        }
        usleep(10000);
    }
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    char line[256];
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, "Threads:", 8) == 0)
            printf("%s: HANG: child still alive after 5 s, %s", mode, line);
    if (f != NULL)
        fclose(f);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return 2;
}
