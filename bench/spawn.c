/*
 * spawn.c - the parent's side of one measurement: start a child (this
 * program with --child, LD_PRELOAD set for a peer, an alarm as the time
 * limit), read its records from the pipe while refreshing the progress
 * line, and record how it ended. A child runs one round (after its own
 * warm-up): the parent interleaves backends round by round (main.c), so
 * other load on the machine falls on every backend alike.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "results.h"

/* phase: the child's own round, 0 while it warms up */
static void show_progress(const struct progress *pr, const char *wl, const char *be,
                          int phase, int round, int rounds)
{
    if (!pr->tty)
        return;
    double now = now_seconds();
    fprintf(stderr, "\r\033[K[%d/%d] %-13s %-11s round %d/%d%s  %5.1fs  (total %.0fs)",
            pr->done + 1, pr->total, wl, be, round + 1, rounds, phase == 0 ? " warm-up" : "",
            now - pr->child_start, now - pr->run_start);
    fflush(stderr);
}

static void note_append(char *notes, size_t cap, const char *text)
{
    if (strstr(notes, text))
        return;
    size_t len = strlen(notes);
    snprintf(notes + len, cap - len, "%s%s", len ? "; " : "", text);
}

static void parse_record(struct workload_result *wr, int b, char *line, struct progress *pr,
                         const char *be_name, int round, int rounds)
{
    char *f[9];
    int n = 0;
    for (char *s = line; n < 9; n++) {
        f[n] = s;
        char *tab = strchr(s, '\t');
        if (!tab) {
            n++;
            break;
        }
        *tab = 0;
        s = tab + 1;
    }
    if (f[0][0] == 'P' && n >= 3) {
        show_progress(pr, wr->w->name, be_name, atoi(f[1]), round, rounds);
    } else if (f[0][0] == 'W' && n >= 2) {
        note_append(wr->about, sizeof wr->about, f[1]);
    } else if (f[0][0] == 'N' && n >= 2) {
        note_append(wr->notes[b], sizeof wr->notes[b], f[1]);
    } else if (f[0][0] == 'M' && n >= 8) {
        struct metric_row *row = row_for(wr, f[1], f[2], f[3], f[4][0]);
        double med = atof(f[5]), lo = atof(f[6]), hi = atof(f[7]);
        if (!row->have[b] || lo < row->min[b])
            row->min[b] = lo;
        if (!row->have[b] || hi > row->max[b])
            row->max[b] = hi;
        row->have[b] = 1;
        row->med[b] = med;
        if (row->nround[b] < MAX_ROUNDS)
            row->round_med[b][row->nround[b]++] = med;
    }
}

/* Reads the child's records until it closes the pipe; between records the
 * progress line is refreshed twice a second so the elapsed time moves. */
static void read_child_records(int fd, struct workload_result *wr, int b, struct progress *pr,
                               const char *be_name, int round, int rounds)
{
    char buf[8192];
    size_t have = 0;
    int phase = 0;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int ready = poll(&p, 1, 500);
        if (ready == 0) {
            show_progress(pr, wr->w->name, be_name, phase, round, rounds);
            continue;
        }
        if (ready < 0 && errno == EINTR)
            continue;
        ssize_t got = read(fd, buf + have, sizeof buf - 1 - have);
        if (got <= 0)
            break;
        have += (size_t)got;
        buf[have] = 0;
        char *line = buf, *nl;
        while ((nl = strchr(line, '\n'))) {
            *nl = 0;
            if (line[0] == 'P')
                phase = atoi(line + 2);
            parse_record(wr, b, line, pr, be_name, round, rounds);
            line = nl + 1;
        }
        have = strlen(line);
        memmove(buf, line, have + 1);
        if (have == sizeof buf - 1)
            have = 0; /* an overlong record: drop it */
    }
    close(fd);
}

static unsigned child_time_limit(enum run_mode mode)
{
    return mode == MODE_FULL ? 3600 : mode == MODE_QUICK ? 600 : 120;
}

static void exec_child(const struct options *o, const struct backend_spec *spec,
                       const char *workload, int result_fd, double tsc_hz)
{
    char rounds[16], threads[16], hz[32], budget[32];
    const char *kind = spec->kind == BACKEND_NATIVE_DPM ? "dpm"
                       : spec->kind == BACKEND_RTE      ? "rte"
                       : spec->kind == BACKEND_DPM_RTE  ? "dpm-rte"
                                                        : "libc";
    const char *mode = o->mode == MODE_FULL ? "--full" : o->mode == MODE_QUICK ? "--quick"
                                                                               : "--smoke";
    /* one measured round per child: the parent runs the rounds */
    snprintf(rounds, sizeof rounds, "%d", 1);
    snprintf(threads, sizeof threads, "%d", o->threads);
    snprintf(hz, sizeof hz, "%.0f", tsc_hz);
    snprintf(budget, sizeof budget, "%.1f", o->budget_s);
    if (dup2(result_fd, 3) < 0)
        _exit(5);
    signal(SIGPIPE, SIG_DFL);
    if (spec->preload)
        setenv("LD_PRELOAD", spec->preload, 1);
    else
        unsetenv("LD_PRELOAD");
    alarm(child_time_limit(o->mode));
    execl("/proc/self/exe", "dpmbench", "--child", workload, "--kind", kind, "--backend",
          spec->name, mode, "--rounds", rounds, "--threads", threads, "--tsc-hz", hz, "--budget",
          budget, (char *)NULL);
    _exit(5);
}

static void record_exit(struct workload_result *wr, int b, int status)
{
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        wr->status[b] = RUN_OK;
        return;
    }
    wr->status[b] = RUN_FAILED;
    if (WIFSIGNALED(status))
        snprintf(wr->why[b], sizeof wr->why[b], "killed by signal %d (%s)", WTERMSIG(status),
                 WTERMSIG(status) == SIGALRM ? "time limit" : strsignal(WTERMSIG(status)));
    else if (WEXITSTATUS(status) == 3)
        snprintf(wr->why[b], sizeof wr->why[b], "verification failed");
    else if (WEXITSTATUS(status) == 4) {
        wr->status[b] = RUN_UNAVAILABLE;
        snprintf(wr->why[b], sizeof wr->why[b], "backend could not start");
    }
    else
        snprintf(wr->why[b], sizeof wr->why[b], "exit status %d", WEXITSTATUS(status));
}

void run_one(const struct options *o, struct run *run, struct workload_result *wr, int b,
             int round, struct progress *pr)
{
    int fds[2];
    if (pipe(fds) != 0) {
        perror("pipe");
        exit(1);
    }
    fflush(NULL);
    pr->child_start = now_seconds();
    show_progress(pr, wr->w->name, run->be[b].name, 0, round, o->rounds);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        exec_child(o, &run->be[b], wr->w->name, fds[1], run->tsc_hz);
    }
    close(fds[1]);
    read_child_records(fds[0], wr, b, pr, run->be[b].name, round, o->rounds);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    record_exit(wr, b, status);
    wr->seconds[b] += now_seconds() - pr->child_start;
    wr->rounds_done[b]++;
    if (wr->status[b] == RUN_UNAVAILABLE) {
        /* e.g. rte_eal_init refused (not root): drop the column for the run */
        run->be[b].missing = "could not start in the child (for rte_malloc: rte_eal_init "
                             "failed; run as root)";
        fprintf(stderr, "%sdpmbench: %s: %s\n", pr->tty ? "\r\033[K" : "", run->be[b].name,
                run->be[b].missing);
        return;
    }
    pr->done++;
    if (wr->status[b] == RUN_FAILED)
        fprintf(stderr, "%sdpmbench: %s on %s FAILED: %s\n", pr->tty ? "\r\033[K" : "",
                wr->w->name, run->be[b].name, wr->why[b]);
    else if (!pr->tty)
        fprintf(stderr, "dpmbench: %-13s %-11s round %d/%d done in %.1fs\n", wr->w->name,
                run->be[b].name, round + 1, o->rounds, now_seconds() - pr->child_start);
}
