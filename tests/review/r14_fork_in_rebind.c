/* fork() from a purge callback run by the flush of thread.arena M -> N
 * (M sourced, N a manual arena from arenas.create). In the child the
 * thread ends up bound to N, but N's nthreads is 0: arena.N.destroy by
 * the bound thread itself succeeds (documented: EBUSY while any thread,
 * the caller too, is bound), and the thread keeps allocating from the
 * destroyed arena, whose slot arenas.create then hands out again.
 * build: cc -O1 -Iinclude -Itests/review tests/review/r14_fork_in_rebind.c build/libdpmalloc.a -lpthread -lm
 * (an idle second thread exists: fork handlers run only then)
 * run:   DPMALLOC_CONF=dirty_decay_ms:0 /tmp/r14_fr  */
#include "source_units.h"
static unsigned m, n; static pid_t parent; static bool child_failed;
static void fork_once(bool purge)
{
    static bool done;
    if (!purge || done) return;
    done = true;
    pid_t pid = fork();
    if (pid == 0) { unsigned ep = 1; dpm_ctl("epoch", NULL, NULL, &ep, sizeof ep);
      char nm[64]; unsigned v = 0; size_t vl = sizeof v;
      snprintf(nm, sizeof nm, "stats.arenas.%u.nthreads", n); dpm_ctl(nm, &v, &vl, NULL, 0); printf("child in callback: N nthreads %u\n", v);
      snprintf(nm, sizeof nm, "stats.arenas.%u.nthreads", m); vl = sizeof v; dpm_ctl(nm, &v, &vl, NULL, 0); printf("child in callback: M nthreads %u\n", v); }
    if (pid != 0) { int st; waitpid(pid, &st, 0);
        child_failed = !WIFEXITED(st) || WEXITSTATUS(st) != 0;
        printf("parent: child %s %d\n", WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st)); }
}
static void *idle_thread(void *a) { (void)a; pause(); return NULL; }
int main(void)
{
    pthread_t it; pthread_create(&it, NULL, idle_thread, NULL);   /* fork's handlers run only with >1 thread */
    setvbuf(stdout, NULL, _IONBF, 0); signal(SIGALRM, on_alarm); alarm(20);
    parent = getpid();
    m = make_sourced();
    size_t l = sizeof n;
    if (dpm_ctl("arenas.create", &n, &l, NULL, 0) != 0) return 2;
    if (bind_to(m) != 0) return 2;
    fill_cache(2048, 4000);
    hook = fork_once;
    int e = bind_to(n);
    hook = NULL;
    if (getpid() == parent) {
        int d = arena_op(n, "destroy");
        printf("parent: bind %d, destroy N (bound: expect EBUSY) -> %d\n", e, d);
        return child_failed || d != EBUSY;
    }
    /* child */
    { unsigned ep = 1; size_t el = sizeof ep; dpm_ctl("epoch", NULL, NULL, &ep, el);
      char nm[64]; unsigned v = 0; size_t vl = sizeof v;
      snprintf(nm, sizeof nm, "stats.arenas.%u.nthreads", n); dpm_ctl(nm, &v, &vl, NULL, 0); printf("child: N nthreads %u\n", v);
      snprintf(nm, sizeof nm, "stats.arenas.%u.nthreads", m); vl = sizeof v; dpm_ctl(nm, &v, &vl, NULL, 0); printf("child: M nthreads %u\n", v); }
    int destroyed_bound = arena_op(n, "destroy");
    printf("child: bind %d; destroy N while bound to it (expect EBUSY) -> %d\n", e, destroyed_bound);
    unsigned n2 = 0; l = sizeof n2;
    dpm_ctl("arenas.create", &n2, &l, NULL, 0);
    printf("child: arenas.create -> %u (N was %u)\n", n2, n);
    unsigned got = 0; void *p = malloc(100); l = sizeof got;
    dpm_ctl("arenas.lookup", &got, &l, &p, sizeof p);
    printf("child: malloc(100) by the thread bound to N comes from arena %u\n", got);
    unsigned bad = 0; l = sizeof bad; dpm_ctl("debug.check_heap", &bad, &l, NULL, 0);
    void *v[64]; for (int i = 0; i < 64; i++) v[i] = malloc(100);
    for (int i = 0; i < 64; i++) free(v[i]);   /* cached: tc's arena is slot 9 */
    printf("child: debug.check_heap %u; destroy n2 (thread bound to slot %u, caching its blocks) -> %d\n", bad, n, arena_op(n2, "destroy"));
    printf("child: destroy M -> %d\n", arena_op(m, "destroy"));
    int unknown = 0, same = 0;
    for (int i = 0; i < 64; i++) { char *q = malloc(100); unsigned g2 = 0; size_t gl = sizeof g2;
        if (dpm_ctl("arenas.lookup", &g2, &gl, &q, sizeof q) != 0) unknown++;
        for (int k = 0; k < 64; k++) if (v[k] == q) { same++; break; }
        memset(q, 7, 100); }
    printf("child: after destroying slot 9, of 64 malloc(100): %d unknown to arenas.lookup, %d are blocks cached before the destroy\n", unknown, same);
    /* the thread now holds live blocks of destroyed slot 9; create reuses the slot */
    void *live[64]; for (int i = 0; i < 64; i++) { live[i] = malloc(100); memset(live[i], 0xAA, 100); }
    unsigned n3 = 0; l = sizeof n3; dpm_ctl("arenas.create", &n3, &l, NULL, 0);
    int dup = 0, corrupt = 0;
    for (int i = 0; i < 256; i++) { char *q = dpm_malloc_arena(n3, 100, 16); memset(q, 0x55, 100);
        for (int k = 0; k < 64; k++) if ((char *)live[k] < q + 100 && q < (char *)live[k] + 100) dup++; }
    for (int i = 0; i < 64; i++) for (int j = 0; j < 100; j++) if (((unsigned char *)live[i])[j] != 0xAA) { corrupt++; break; }
    printf("child: arenas.create -> %u; 256 dpm_malloc_arena(%u,100): %d overlap the thread's live blocks, %d live blocks overwritten\n", n3, n3, dup, corrupt);
    for (int i = 0; i < 64; i++) free(live[i]);
    printf("child: freed the live blocks\n");
    _exit(destroyed_bound != EBUSY || dup != 0 || corrupt != 0);
}
