/* fork() from a purge callback run by the flush of thread.arena M -> M (rebind to the arena the
 * thread is already bound to). arena_bind_thread counted M twice; in the child
 * tcaches_postfork_child sets M's nthreads to 1 (tls_arena) and to 1 again (tls_arena_joining),
 * then the rebind's leave_thread_arena takes it to 0 while the thread is bound to M.
 * build: cc -O1 -g -Iinclude -Itests/review tests/review/r15_fork_rebind_same.c build/libdpmalloc.a -lpthread -lm -o /tmp/frs
 * run:   DPMALLOC_CONF=dirty_decay_ms:0 /tmp/frs */
#include "source_units.h"
static unsigned m; static pid_t parent; static int child_rc = -1;
static void fork_once(bool purge) {
    static bool done;
    if (!purge || done) return;
    done = true;
    pid_t pid = fork();
    if (pid != 0) { int st; waitpid(pid, &st, 0); child_rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st); }
}
static unsigned nthreads_of(unsigned a) {
    uint64_t ep = 1; dpm_ctl("epoch", NULL, NULL, &ep, sizeof ep);
    char nm[64]; unsigned v = 0; size_t vl = sizeof v; snprintf(nm, sizeof nm, "stats.arenas.%u.nthreads", a);
    dpm_ctl(nm, &v, &vl, NULL, 0); return v;
}
static void *idle_thread(void *a) { (void)a; pause(); return NULL; }
int main(void) {
    pthread_t it; pthread_create(&it, NULL, idle_thread, NULL);
    setvbuf(stdout, NULL, _IONBF, 0); signal(SIGALRM, on_alarm); alarm(20);
    parent = getpid();
    m = make_sourced();
    if (bind_to(m) != 0) return 2;
    fill_cache(2048, 4000);
    hook = fork_once;
    int e = bind_to(m);
    hook = NULL;
    const char *who = getpid() == parent ? "parent" : "child";
    unsigned nt = nthreads_of(m);
    int d = arena_op(m, "destroy");
    printf("%s: rebind M->M %d; M nthreads %u (expect 1); destroy M while bound to it -> %d (expect EBUSY=%d)\n", who, e, nt, d, EBUSY);
    if (d == 0) {
        void *p = malloc(3000); unsigned got = 99; size_t l = sizeof got;
        int le = dpm_ctl("arenas.lookup", &got, &l, &p, sizeof p);
        printf("%s: after the destroy, malloc(3000) = %p, arenas.lookup -> %d arena %u\n", who, p, le, got);
    }
    if (getpid() != parent) _exit(d != EBUSY);
    printf("parent: child rc %d\n", child_rc);
    return d != EBUSY || child_rc != 0;
}
