/*
 * r9_fork_child_caches.c - review of issue 9: in a fork child, the other
 * threads' large caches (up to tcache_large_bytes_total = 128 MiB) are
 * lost for good, and their cap reservations too, so the child's own
 * large cache never works again.
 *
 * 40 threads each free 16 blocks of 256 KiB into their large caches (the
 * cap stops them at 128 MiB together) and block; the main thread forks.
 * The child calls malloc_trim(0), then runs a malloc/free loop of
 * 64..300 KiB blocks.
 *
 * Build and run (from the worktree, after building build/):
 *   gcc -O2 -fno-builtin -o /tmp/r9_fork tests/review/r9_fork_child_caches.c -Iinclude -Itests/review \
 *       -Lbuild -Wl,-rpath,$PWD/build -ldpmalloc -lpthread
 *   timeout 60 /tmp/r9_fork
 *
 * Expected: the child can reclaim what the dead threads' caches held
 * (dpmalloc knows every cache: tcaches_live) - RSS after malloc_trim(0)
 * near the parent's live data (glibc: 4 MiB; jemalloc 55, tcmalloc 79,
 * mimalloc 10 MiB, which do not trim) - and its own large cache works
 * (stats.tcache_bytes > 0.5 MiB after the loop).
 * Actual (HEAD 234f56d): child stats.allocated 128 MiB that nothing will
 * free, RSS 131.5 MiB after malloc_trim(0); child tcache_bytes 0.09 MiB
 * (nothing cached: 422 ns per pair vs 102 ns with 31 parent threads).
 * Exit status 1.
 *
 * Root cause: tcaches_postfork_child (tcache.c) drops the other caches
 * from tcaches_live without sending their blocks home, and large_reserved
 * (tcache_large.c) keeps their reservations: the cap stays taken in the
 * child for ever. A fix: in the child, flush the dead threads' large
 * caches (and small bins) home before dropping them, and set
 * large_reserved to the surviving cache's reservation.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "review.h"

enum { NHOLD = 40, NB = 16, SZ = 256 * 1024 };
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int ready, go;

static void *holder(void *arg)
{
    (void)arg;
    void *v[NB];
    for (int i = 0; i < NB; i++) {
        v[i] = malloc(SZ);
        memset(v[i], 1, SZ);
    }
    for (int i = 0; i < NB; i++)
        free(v[i]);
    pthread_mutex_lock(&m);
    ready++;
    pthread_cond_broadcast(&cv);
    while (!go)
        pthread_cond_wait(&cv, &m);
    pthread_mutex_unlock(&m);
    return NULL;
}

static int child(void)
{
    malloc_trim(0);
    double rss = rss_mib(), allocated = stat_mib("stats.allocated");
    static const size_t sz[4] = {65536, 100000, 200000, 300000};
    for (int i = 0; i < 100000; i++) {
        volatile char *p = malloc(sz[i & 3]);
        p[0] = 1;
        free((void *)p);
    }
    double cached = stat_mib("stats.tcache_bytes");
    printf("child: after malloc_trim(0) rss %.1f MiB, allocated %.1f MiB; tcache_bytes after its loop %.2f MiB\n",
           rss, allocated, cached);
    int bad = rss > 32 || (dpm_ctl && cached < 0.5);
    printf("%s\n", bad ? "FAIL: the child lost the other threads' caches and its own" : "ok");
    fflush(stdout);
    return bad;
}

int main(void)
{
    pthread_t t[NHOLD];
    for (int i = 0; i < NHOLD; i++)
        pthread_create(&t[i], NULL, holder, NULL);
    pthread_mutex_lock(&m);
    while (ready < NHOLD)
        pthread_cond_wait(&cv, &m);
    pthread_mutex_unlock(&m);
    printf("parent: rss %.1f MiB, tcache_bytes %.1f MiB\n", rss_mib(), stat_mib("stats.tcache_bytes"));
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        _exit(child());
    int status = 0;
    waitpid(pid, &status, 0);
    pthread_mutex_lock(&m);
    go = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&m);
    for (int i = 0; i < NHOLD; i++)
        pthread_join(t[i], NULL);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 2;
}
