/*
 * r28_dlclose_rseq.c - a program that dlopen()s libdpmalloc.so for the
 * native API (RTLD_LOCAL: its own malloc stays glibc's), calls dpm_malloc
 * and dpm_free, and dlclose()s it must go on running.
 *
 * Every alloc_fast/free_fast runs a restartable sequence, in both front
 * ends (the thread-cache fallback runs it against the all-locked table),
 * and each leaves the thread's rseq area's rseq_cs pointing at its
 * descriptor in libdpmalloc's __rseq_cs section. dlclose unmaps the
 * library; at the thread's next preemption or signal the kernel reads
 * the dangling rseq_cs and kills the process with SIGSEGV (si_code
 * SI_KERNEL; strace shows it right after dlclose's munmap). Before the
 * CPU caches (a8d2566) nothing registered rseq with the library's
 * descriptors. The same program survives with
 * GLIBC_TUNABLES=glibc.pthread.rseq=0 DPMALLOC_CONF=percpu:false (no
 * area registered at all), and dies with percpu:false alone.
 * Expected: "ok"; actual on a4a03aa: "child killed by signal 11" (every
 * run). A child process runs it; the parent reports.
 * run: test_review_r28_dlclose_rseq path/to/libdpmalloc.so
 */
#include <dlfcn.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t got;
static void on_usr1(int sig)
{
    (void)sig;
    got++;
}

static int child(const char *lib)
{
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        fprintf(stderr, "dlopen %s: %s\n", lib, dlerror());
        return 2;
    }
    void *(*m)(size_t) = (void *(*)(size_t))dlsym(h, "dpm_malloc");
    void (*f)(void *) = (void (*)(void *))dlsym(h, "dpm_free");
    if (m == NULL || f == NULL)
        return 2;
    for (int i = 0; i < 1000; i++)
        f(m(32));
    if (dlclose(h) != 0)
        return 2;
    /* a signal and some preemptions: each makes the kernel look at rseq_cs */
    signal(SIGUSR1, on_usr1);
    raise(SIGUSR1);
    for (int i = 0; i < 20; i++) {
        usleep(1000);
        sched_yield();
    }
    return got == 1 ? 0 : 3;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s libdpmalloc.so\n", argv[0]);
        return 2;
    }
    pid_t pid = fork();
    if (pid == 0)
        _exit(child(argv[1]));
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        return 2;
    if (WIFSIGNALED(st)) {
        printf("child killed by signal %d after dlclose\n", WTERMSIG(st));
        return 1;
    }
    if (WEXITSTATUS(st) != 0) {
        printf("child exited %d\n", WEXITSTATUS(st));
        return 1;
    }
    printf("ok\n");
    return 0;
}
