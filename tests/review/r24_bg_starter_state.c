/* Review r24 (issue 20, item 2): the background thread took whatever the thread that started it
 * had. Its signal mask: a program that allocates first, then blocks SIGTERM in every thread and
 * sigwaits for it in one, was killed by SIGTERM (the kernel delivered it to the background thread,
 * the only one not blocking it: 3 of 3 runs, rc 143). Its CPU affinity: a starter pinned to one
 * core pinned the thread there. Its scheduling policy: a SCHED_FIFO or SCHED_BATCH starter gave
 * it that policy. Each for the first start, a switch-on through the ctl, and the restart in a fork
 * child. The thread is now created with every signal blocked, SCHED_OTHER, every CPU the process
 * may use, and named dpmalloc_bg.
 * idle_unpriv: a SCHED_IDLE starter without CAP_SYS_NICE and with RLIMIT_NICE 0, which may not
 * raise a thread to SCHED_OTHER (EPERM): the thread starts all the same, with the starter's policy.
 * run: test_r24_bg_starter_state first|ctl|fork batch|idle|idle_unpriv|fifo
 *      (first and fork: DPMALLOC_CONF=background_thread:true); exit 77: fifo refused (no
 *      privilege) or only one CPU usable */
#include <dpmalloc.h>

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static pid_t gettid_(void) { return (pid_t)syscall(SYS_gettid); }

/* The thread named dpmalloc_bg; without one (the old code did not name it), the only thread
 * other than this one, so that the other checks still report. 0: none (yet). */
static pid_t find_bg(bool *named)
{
    pid_t self = gettid_(), other = 0;
    int others = 0;
    *named = false;
    DIR *d = opendir("/proc/self/task");
    if (d == NULL)
        return 0;
    struct dirent *e;
    pid_t found = 0;
    while ((e = readdir(d)) != NULL) {
        pid_t t = (pid_t)atoi(e->d_name);
        if (t <= 0 || t == self)
            continue;
        char path[64], comm[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)t);
        FILE *f = fopen(path, "r");
        if (f != NULL) {
            if (fgets(comm, sizeof comm, f) == NULL)
                comm[0] = 0;
            fclose(f);
        }
        comm[strcspn(comm, "\n")] = 0;
        if (strcmp(comm, "dpmalloc_bg") == 0) {
            found = t;
            *named = true;
        }
        other = t;
        others++;
    }
    closedir(d);
    return found != 0 ? found : others == 1 ? other : 0;
}

static unsigned long long sigblk(pid_t t)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/self/task/%d/status", (int)t);
    FILE *f = fopen(path, "r");
    unsigned long long m = 0;
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, "SigBlk:", 7) == 0)
            m = strtoull(line + 7, NULL, 16);
    if (f != NULL)
        fclose(f);
    return m;
}

static cpu_set_t allowed;   /* this thread's set before it pinned itself */
static int policy;          /* the starter's policy */
static bool unpriv;         /* idle_unpriv: SCHED_OTHER is out of the starter's reach */

/* No CAP_SYS_NICE (as root too) and RLIMIT_NICE 0: leaving SCHED_IDLE is EPERM. */
static int drop_nice_rights(void)
{
    struct rlimit rl = {0, 0};
    if (setrlimit(RLIMIT_NICE, &rl) != 0)
        return -1;
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &h, d) != 0)
        return -1;
    for (int i = 0; i < 2; i++) {
        d[i].effective &= ~(i == CAP_SYS_NICE / 32 ? 1u << (CAP_SYS_NICE % 32) : 0u);
        d[i].permitted &= ~(i == CAP_SYS_NICE / 32 ? 1u << (CAP_SYS_NICE % 32) : 0u);
    }
    return (int)syscall(SYS_capset, &h, d);
}

/* What the starter is: pinned to one CPU of its set, under `policy`. Signals: unblocked here;
 * blocked after the start, as a program that allocates before it sets up its signal thread. */
static int become_starter(void)
{
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) < 2) {
        printf("skip: fewer than 2 CPUs usable\n");
        return 77;
    }
    cpu_set_t one;
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &allowed)) {
            CPU_SET(c, &one);
            break;
        }
    if (sched_setaffinity(0, sizeof one, &one) != 0)
        return 2;
    struct sched_param sp = {.sched_priority = policy == SCHED_FIFO ? 1 : 0};
    if (unpriv && drop_nice_rights() != 0) {
        printf("skip: cannot drop CAP_SYS_NICE: %s\n", strerror(errno));
        return 77;
    }
    if (sched_setscheduler(0, policy, &sp) != 0) {
        printf("skip: sched_setscheduler(%d): %s\n", policy, strerror(errno));
        return 77;
    }
    return 0;
}

static void back_to_normal(void)
{
    struct sched_param sp = {.sched_priority = 0};
    sched_setscheduler(0, SCHED_OTHER, &sp);
    sched_setaffinity(0, sizeof allowed, &allowed);
}

static volatile int got_term;
static void *sigwaiter(void *a)
{
    (void)a;
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGTERM);
    int sig = 0;
    if (sigwait(&s, &sig) == 0 && sig == SIGTERM)
        got_term = 1;
    return NULL;
}

/* The checks, run in the process whose background thread the starter (this thread) started. */
static int check_bg(void)
{
    pid_t bg = 0;
    bool named = false;
    for (int i = 0; i < 500 && bg == 0; i++) {
        void *p = malloc((size_t)(i % 40 + 1) << 14);   /* slow paths: where a pending start runs */
        free(p);
        bg = find_bg(&named);
        if (bg == 0)
            usleep(10000);
    }
    /* the thread names itself as it begins: give it a moment */
    for (int i = 0; i < 200 && bg != 0 && !named; i++) {
        usleep(10000);
        bg = find_bg(&named);
    }
    back_to_normal();
    if (bg == 0) {
        printf("FAIL: no background thread\n");
        return 1;
    }
    CHECK(named, "the background thread (tid %d) is not named dpmalloc_bg", (int)bg);

    cpu_set_t s;
    CPU_ZERO(&s);
    CHECK(sched_getaffinity(bg, sizeof s, &s) == 0, "sched_getaffinity(%d): %s", (int)bg, strerror(errno));
    /* at least every CPU the starter had before it pinned itself (the thread asks for all; the
     * kernel leaves those the cpuset allows, which may be more than a taskset'd parent gave) */
    cpu_set_t both;
    CPU_AND(&both, &s, &allowed);
    CHECK(CPU_EQUAL(&both, &allowed), "its affinity has %d of the %d CPUs the starter had before it pinned itself",
          CPU_COUNT(&both), CPU_COUNT(&allowed));
    int pol = sched_getscheduler(bg);
    if (unpriv)   /* SCHED_OTHER refused: the starter's policy, and a thread all the same */
        CHECK(pol == SCHED_IDLE, "its policy is %d, not the starter's SCHED_IDLE (%d)", pol, SCHED_IDLE);
    else
        CHECK(pol == SCHED_OTHER, "its policy is %d, not SCHED_OTHER (%d); the starter's was %d", pol, SCHED_OTHER,
              policy);
    unsigned long long m = sigblk(bg);
    int must[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGALRM, SIGCHLD, SIGPIPE};
    for (unsigned i = 0; i < sizeof must / sizeof must[0]; i++)
        CHECK(m & (1ull << (must[i] - 1)), "signal %d is not blocked in it (SigBlk %llx)", must[i], m);

    /* The usual pattern: every thread blocks SIGTERM, one sigwaits for it. */
    sigset_t t;
    sigemptyset(&t);
    sigaddset(&t, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &t, NULL);
    pthread_t w;
    pthread_create(&w, NULL, sigwaiter, NULL);
    kill(getpid(), SIGTERM);   /* the old code: the process dies here (143) */
    for (int i = 0; i < 500 && !got_term; i++)
        usleep(10000);
    CHECK(got_term, "the sigwait thread did not receive SIGTERM");
    if (!got_term)
        pthread_cancel(w);
    pthread_join(w, NULL);
    printf("%s (bg tid %d)\n", fails ? "FAIL" : "ok", (int)bg);
    return fails ? 1 : 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "first";
    const char *pol = argc > 2 ? argv[2] : "batch";
    unpriv = strcmp(pol, "idle_unpriv") == 0;
    policy = strcmp(pol, "fifo") == 0 ? SCHED_FIFO : strncmp(pol, "idle", 4) == 0 ? SCHED_IDLE : SCHED_BATCH;
    setvbuf(stdout, NULL, _IONBF, 0);
    alarm(30);
    if (strcmp(mode, "first") == 0) {
        /* before the first allocation (background_thread:true starts it there) */
        int r = become_starter();
        return r != 0 ? r : check_bg();
    }
    if (strcmp(mode, "ctl") == 0) {
        free(malloc(100));
        int r = become_starter();
        if (r != 0)
            return r;
        bool on = true;
        int e = dpm_ctl("background_thread", NULL, NULL, &on, sizeof on);
        if (e != 0) {
            printf("FAIL: background_thread -> %d\n", e);
            return 1;
        }
        return check_bg();
    }
    /* fork: the parent's thread runs; the child restarts its own at its first slow path */
    bool named;
    for (int i = 0; i < 500 && find_bg(&named) == 0; i++) {
        free(malloc((size_t)(i % 40 + 1) << 14));
        usleep(10000);
    }
    if (find_bg(&named) == 0) {
        printf("FAIL: no background thread in the parent\n");
        return 1;
    }
    pid_t c = fork();
    if (c == 0) {
        int r = become_starter();
        _exit(r != 0 ? r : check_bg());
    }
    int st = 0;
    waitpid(c, &st, 0);
    if (WIFSIGNALED(st)) {
        printf("FAIL: the child was killed by signal %d\n", WTERMSIG(st));
        return 1;
    }
    return WEXITSTATUS(st);
}
