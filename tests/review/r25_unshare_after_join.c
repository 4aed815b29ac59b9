/*
 * r25_unshare_after_join.c - unshare(CLONE_NEWUSER) fails with EINVAL in
 * a program whose threads have all been joined: the background thread
 * that c9d0540 starts on its own (background_thread not given) stays, so
 * the process is still multi-threaded, and the kernel refuses to move a
 * multi-threaded process into a new user namespace (the same for
 * setns() into a user namespace, and unshare(CLONE_VM/CLONE_SIGHAND)).
 * Container runtimes and sandboxes (a helper thread at start, then
 * unshare in the main thread) break.
 *
 * Mode "forkchild" is worse: a child forked by a threaded parent has ONE
 * thread, yet its first allocation slow paths start a background thread
 * (glibc leaves __libc_single_threaded false in the child, the test
 * process_single_threaded() reads, and background_postfork_child re-arms
 * automatic mode), so the classic fork(); setup (allocates);
 * unshare(CLONE_NEWUSER) of a container runtime fails in the child. The
 * child's /proc/self/task shows 2 threads.
 *
 * build: cc -O2 -Iinclude tests/review/r25_unshare_after_join.c \
 *           build/libdpmalloc.a -pthread -o /tmp/r25_unshare
 * run:   /tmp/r25_unshare [join|forkchild]   (exit 0: unshare worked)
 * expected: "unshare(CLONE_NEWUSER): ok" (glibc, 2e0f49e,
 * DPMALLOC_CONF=background_thread:false); actual on c9d0540:
 * "unshare(CLONE_NEWUSER): Invalid argument, 2 threads" 5 of 5 runs,
 * in both modes.
 * (Needs a kernel that allows user namespaces: `unshare -U true`.)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void *helper(void *arg)
{
    (void)arg;
    char *volatile p = malloc(4096);
    free(p);
    return NULL;
}

static int threads(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    if (d != NULL)
        closedir(d);
    return n;
}

static void *sleeper(void *arg)
{
    (void)arg;
    pause();
    return NULL;
}

int main(int argc, char **argv)
{
    pthread_t t;
    if (argc > 1 && strcmp(argv[1], "forkchild") == 0) {
        pthread_create(&t, NULL, sleeper, NULL);   /* the parent stays threaded */
        char *volatile p = malloc(5000);
        free(p);
        pid_t pid = fork();
        if (pid != 0) {
            int st;
            waitpid(pid, &st, 0);
            return WIFEXITED(st) ? WEXITSTATUS(st) : 3;
        }
        /* the child (one thread): some setup that allocates */
        void *volatile v[1000];
        for (int i = 0; i < 1000; i++)
            v[i] = malloc(100 + (size_t)i * 40);
        for (int i = 0; i < 1000; i++)
            free(v[i]);
    } else {
        pthread_create(&t, NULL, helper, NULL);
        pthread_join(t, NULL);
    }
    int n = threads();
    if (unshare(CLONE_NEWUSER) != 0) {
        printf("unshare(CLONE_NEWUSER): %s, %d threads (FAIL)\n", strerror(errno), n);
        fflush(stdout);
        return 1;
    }
    printf("unshare(CLONE_NEWUSER): ok\n");
    return 0;
}
