/* fork() from a page-source purge callback run by tcache_thread_exit's flush.
 * In the child the exiting thread (tls_state EXITING) is not the survivor: its
 * cache goes to tcaches_exited while that thread is still flushing it; threads
 * the child creates recycle it, and the exiting thread then list_remove()s it
 * from tcaches_live and pushes it on tcaches_exited again.
 * build: cc -O1 -g -Iinclude -Itests/review tests/review/r15_fork_in_exit.c build/libdpmalloc.a -lpthread -lm -o /tmp/fie
 * run:   DPMALLOC_CONF=dirty_decay_ms:0 /tmp/fie        (child threads run while the exiting thread flushes)
 *        DPMALLOC_CONF=dirty_decay_ms:0 /tmp/fie flush  (control: fork from the callback of thread.tcache.flush instead of exit)
 *        DPMALLOC_CONF=dirty_decay_ms:0 /tmp/fie join   (child threads finish first, inside the callback) */
#include "source_units.h"
#define S 2048
static int join_first, flush_mode; static unsigned M; static volatile int armed; static pid_t parent;
static _Atomic int corrupt;
static void *child_thread(void *arg) {
    (void)arg;
    enum { N = 400 };
    static __thread unsigned char *v[N];
    for (int r = 0; r < 300; r++) {
        for (int i = 0; i < N; i++) { v[i] = malloc(S); memset(v[i], (unsigned char)(uintptr_t)v[i] ^ 0x3c, S); }
        for (int i = 0; i < N; i++) for (int j = 0; j < S; j += 128) if (v[i][j] != (unsigned char)((uintptr_t)v[i] ^ 0x3c)) { corrupt++; break; }
        for (int i = 0; i < N; i++) free(v[i]);
    }
    return NULL;
}
static pthread_t ct[4];
static void on_purge(bool purge) {
    if (!purge || !armed) return;
    armed = 0;
    pid_t pid = fork();
    if (pid == 0) {
        /* child: only the exiting thread lives; start threads that allocate */
        for (int i = 0; i < 4; i++) pthread_create(&ct[i], NULL, child_thread, NULL);
        if (join_first) { for (int i = 0; i < 4; i++) pthread_join(ct[i], NULL); memset(ct, 0, sizeof ct); printf("child: threads done before the exiting thread resumed: corrupt %d\n", (int)corrupt); }
        return;   /* go on flushing the exiting thread's cache */
    }
    int st; waitpid(pid, &st, 0);
    printf("parent: child %s %d\n", WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) _exit(1);
}
static void child_atexit(void) {
    if (getpid() == parent) return;
    for (int i = 0; i < 4; i++) if (ct[i] && !pthread_equal(ct[i], pthread_self())) pthread_join(ct[i], NULL);
    unsigned bad = 0; size_t l = sizeof bad; dpm_ctl("debug.check_heap", &bad, &l, NULL, 0);
    printf("child: corrupt %d check_heap %u\n", (int)corrupt, bad);
    _exit(corrupt || bad ? 3 : 0);
}
static void *worker(void *a) {
    (void)a;
    if (bind_to(M) != 0) exit(2);
    static __thread void *v[6000];
    for (int i = 0; i < 6000; i++) v[i] = malloc(S);
    for (int i = 0; i < 6000; i += 2) free(v[i]);   /* many slabs half empty */
    for (int i = 1; i < 6000; i += 2) free(v[i]);   /* the last ones cached: flush at exit empties slabs */
    armed = 1;
    if (flush_mode) { dpm_ctl("thread.tcache.flush", NULL, NULL, NULL, 0); if (getpid() != parent) { bind_to(0); sleep(3); } }
    return NULL;
}
int main(int argc, char **argv) {
    flush_mode = argc > 1 && strcmp(argv[1], "flush") == 0;
    join_first = argc > 1 && strcmp(argv[1], "join") == 0;
    setvbuf(stdout, NULL, _IONBF, 0); signal(SIGALRM, on_alarm); alarm(40);
    parent = getpid(); atexit(child_atexit);
    M = make_sourced(); hook = on_purge;
    void *warm = malloc(100); free(warm);
    pthread_t t; pthread_create(&t, NULL, worker, NULL); pthread_join(t, NULL);
    printf("parent: purges %u armed-left %d\n", npurges, armed);
    return armed;   /* 1 = callback never ran during exit */
}
