/*
 * fork_preload_lib_ctor.c - fork() deadlocks under LD_PRELOAD when a shared
 * library the program links registers a pthread_atfork prepare handler
 * that allocates, from its constructor (no allocation before it).
 *
 * The dynamic loader initialises libfoo.so BEFORE the preloaded
 * libdpmalloc.so (LD_DEBUG=files: "calling init: libfoo.so" comes before
 * "calling init: libdpmalloc.so"; neither depends on the other), so
 * libfoo's handler is registered first; glibc runs prepare handlers in
 * reverse order, so dpmalloc's prefork (src/init.c prefork) takes every
 * lock first and libfoo's malloc then waits, in the forking thread, for a
 * bin lock that thread holds (bin_fill <- tcache_alloc_miss <- prepare).
 * src/init.c claims initialisation "happens before the program's own
 * constructors"; true for the executable's, not for its libraries'.
 * glibc malloc, jemalloc, mimalloc and tcmalloc_minimal (preloaded) all
 * finish this program.
 * A fix that holds whatever the registration order: let the thread that
 * runs prefork treat every dpmalloc lock as its own while the fork is in
 * progress (e.g. a thread-local "in fork" flag set by prefork and cleared
 * by the postfork handlers, making mutex_lock/mutex_lock_elidable no-ops
 * for that thread: it already holds them all, so its critical sections are
 * exclusive).
 *
 * Build (from the worktree root):
 *   gcc -shared -fPIC -DLIBFOO tests/review/fork_preload_lib_ctor.c -o /tmp/libfoo.so
 *   gcc tests/review/fork_preload_lib_ctor.c -o /tmp/forklib -L/tmp -lfoo \
 *       -Wl,-rpath,/tmp -lpthread
 * Run:   timeout 20 env LD_PRELOAD=$PWD/build/libdpmalloc.so /tmp/forklib
 * Expected: "forks done", exit 0 (as without LD_PRELOAD).
 * Actual (main 234f56d): hangs at the first fork (exit 124 from timeout).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef LIBFOO
static void *kept;
static void prepare(void) { kept = malloc(100); }
static void parent(void) { free(kept); }
static void child(void) { free(kept); }
__attribute__((constructor)) static void foo_init(void) { pthread_atfork(prepare, parent, child); }
int foo_dummy(void) { return 1; }
#else
int foo_dummy(void);
static volatile int stop;

static void *churn(void *a)
{
    (void)a;
    while (!stop)
        free(malloc(64));
    return NULL;
}

int main(void)
{
    pthread_t t;
    foo_dummy();
    pthread_create(&t, NULL, churn, NULL);
    for (int i = 0; i < 100; i++) {
        pid_t pid = fork();
        if (pid == 0)
            _exit(0);
        waitpid(pid, NULL, 0);
    }
    stop = 1;
    pthread_join(t, NULL);
    printf("forks done\n");
    return 0;
}
#endif
