/*
 * r27_signal_malloc_first_start.c - NOT a ctest: a known limitation of
 * the automatic background thread, documented in docs/config.md
 * (background_thread row). A signal handler's malloc, arriving
 * while the program's first pthread_create runs, starts the automatic
 * background thread from inside that pthread_create and deadlocks on
 * glibc's own lock.
 *
 * glibc's pthread_create clears __libc_single_threaded first, then takes
 * __default_pthread_attr_lock (pthread_getattr_default_np) and the stack
 * cache lock (allocate_stack). A malloc from a signal handler landing in
 * that window is the first allocation slow path of a "threaded" process:
 * background_maybe_start -> background_create -> pthread_create ->
 * allocate_stack waits for the lock its own interrupted frame holds.
 * Only the handler allocates (main and the new thread do not), so no
 * dpmalloc lock is held by the interrupted code: with
 * background_thread:false (or glibc malloc) the same program never hangs.
 * (malloc is not async-signal-safe by POSIX, but programs do this, and the
 * interrupted code holds no allocator lock here.)
 *
 * build: cc -O2 -Iinclude -Itests/review tests/review/r27_signal_malloc_first_start.c \
 *           build/libdpmalloc.a -Wl,-u,dpm_ctl -pthread -o /tmp/r27_sigstart
 * run:   /tmp/r27_sigstart [children]     (default 3000; exit 0: no hang)
 *        DPMALLOC_CONF=background_thread:false /tmp/r27_sigstart   (control)
 * expected: "0 hangs of 3000 children" (as with background_thread:false:
 * 0 of 3000); actual on aaa6343: 3 of 3000 and 4 of 3000 children hang
 * (2 runs, 2 shared cores). The hung child's only program thread:
 *   __lll_lock_wait_private (__default_pthread_attr_lock), or
 *     (_rtld_global+4328: the stack cache lock) in get_cached_stack
 *   allocate_stack <- pthread_create(start_routine=background_main)
 *   background_create (background.c:121) <- background_maybe_start (:263)
 *   alloc_slow (alloc.c:125) <- handler <- <signal handler called>
 *   <- __pthread_attr_copy / allocate_stack of pthread_create(idle)
 * Each child takes one SIGALRM (one-shot timer, 1-61 us) during its first
 * pthread_create; a child that lives 5 s is reported with gdb's backtrace.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static void handler(int s)
{
    (void)s;
    void *volatile p = malloc(300000);
    free(p);
}

static void *idle(void *a)
{
    (void)a;
    pause();
    return NULL;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 3000, hangs = 0;
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = handler;
            sa.sa_flags = SA_RESTART;
            sigaction(SIGALRM, &sa, NULL);
            struct itimerval it = {{0, 0}, {0, 1 + i % 61}};   /* one signal */
            setitimer(ITIMER_REAL, &it, NULL);
            pthread_t t;
            pthread_create(&t, NULL, idle, NULL);
                        _exit(0);
        }
        int st;
        for (int w = 0; w < 500; w++) {   /* 5 s */
            if (waitpid(pid, &st, WNOHANG) == pid)
                goto next;
            usleep(10000);
        }
        hangs++;
        printf("child %d hung; ", pid);
        fflush(stdout);
        char cmd[256];
        snprintf(cmd, sizeof cmd,
                 "gdb -batch -p %d -ex 'thread apply all bt 10' 2>/dev/null | grep -E '^#|^Thread' | head -20", pid);
        if (system(cmd) != 0)
            printf("(no gdb)\n");
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
next:;
    }
    printf("%d hangs of %d children\n", hangs, n);
    return hangs != 0;
}
