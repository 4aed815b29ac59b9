/*
 * r25_nproc_thread_budget.c - a program that sizes its threads to its
 * limit (RLIMIT_NPROC, a cgroup's pids.max, a container's thread quota)
 * cannot create its last thread: the automatic background thread of
 * c9d0540 takes one of the slots.
 *
 * A forked child becomes user nobody (65534), sets RLIMIT_NPROC to 3
 * (itself + 2 threads, nobody owning no other task) and creates two
 * threads. The first thread's allocations start dpmalloc's background
 * thread (background_thread not given), which counts against the limit,
 * so the second pthread_create fails with EAGAIN.
 *
 * build: cc -O2 tests/review/r25_nproc_thread_budget.c build/libdpmalloc.a \
 *           -pthread -o /tmp/r25_nproc
 * run:   /tmp/r25_nproc   as root, with no task of uid 65534 running
 *        (exit 0: both threads created)
 * expected: "create 1: Success, create 2: Success" (2e0f49e, glibc,
 * DPMALLOC_CONF=background_thread:false); actual on c9d0540: "create 2:
 * Resource temporarily unavailable" 5 of 5 runs.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
static void *w(void*a){(void)a;char *volatile p=malloc(3000);free(p);pause();return NULL;}
int main(void){
    pid_t pid=fork();
    if(pid==0){
        if (setgid(65534) || setuid(65534)) { perror("setuid"); _exit(3); }
        struct rlimit rl={3,3}; setrlimit(RLIMIT_NPROC,&rl);
        pthread_t t1,t2;
        int r1=pthread_create(&t1,NULL,w,NULL);
        usleep(100000);
        int r2=pthread_create(&t2,NULL,w,NULL);
        printf("create 1: %s, create 2: %s\n", strerror(r1), strerror(r2)); fflush(stdout);
        _exit(r1||r2);
    }
    int st; waitpid(pid,&st,0); return WEXITSTATUS(st);
}
