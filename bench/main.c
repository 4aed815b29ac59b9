/*
 * main.c - dpmbench's command line and the parent process: for every
 * selected workload and every available backend it starts a child (this
 * same program with --child, LD_PRELOAD set for the peers), shows a live
 * progress line, collects the child's records and reports tables, CSV, JSON,
 * Markdown and plots. The child side is run_child() at the bottom.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dpmbench.h"
#include "results.h"

#ifndef DPMBENCH_RESULTS_DIR
#define DPMBENCH_RESULTS_DIR "bench/results"
#endif
#ifndef DPMBENCH_PRELOAD_LIB
#define DPMBENCH_PRELOAD_LIB "build/libdpmalloc.so"
#endif

const struct workload workloads[] = {
    {"frag", "5 batches x 2000 aligned allocs, no frees: ns per call per batch (seed 000)",
     run_frag},
    {"bulk", "1000 allocs, memset each, free all: ns per alloc and per free", run_bulk},
    {"nobulk", "alloc, memset, 5 us busy wait, free: ns per alloc+free (wait excluded)",
     run_nobulk},
    {"realloc", "alloc s, realloc 2s, realloc 4s, free, memset after each: ns per iteration "
                "(memset excluded)", run_realloc},
    {"threads", "one pinned thread per core: N x alloc(4096, 4096) with 5 us waits, then N "
                "frees: us per thread", run_threads},
    {"tunnels", "VPP GTP-U: tunnel + rewrite vector (align 64 at offset 4) + route each: "
                "clocks per call, RSS over requested bytes (seed 002)", run_tunnels},
    {"counters", "per-thread 24-byte counters: packed, padded, one malloc(24) per thread: "
                 "increments per second (seed 001)", run_counters},
    {"larson", "Larson server: threads replace random 16-1024 B objects, each generation "
               "inherits the last one's objects", run_larson},
    {"prodcons", "producer/consumer: one thread allocates, another checks and frees",
     run_prodcons},
    {"cache-scratch", "passive false sharing: each thread frees a block handed to it, then "
                      "allocates, writes and frees 8-byte blocks", run_cache_scratch},
    {"cache-thrash", "active false sharing: each thread allocates, writes and frees 8-byte "
                     "blocks", run_cache_thrash},
    {"churn", "random sizes 16 B-16 KiB through shared slots: frees by any thread", run_churn},
};
const int workload_count = (int)(sizeof workloads / sizeof workloads[0]);

struct options {
    enum run_mode mode;
    int rounds, threads, plots, child;
    double budget_s;
    const char *workloads, *backends, *out_root, *docs, *dpm_preload;
    /* child only */
    const char *child_workload;
    enum backend_kind child_kind;
    double tsc_hz;
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: dpmbench [--quick | --full | --smoke] [options]\n"
            "  --quick            a few minutes over everything (default)\n"
            "  --full             the whole matrix (tunnels with 2 M objects)\n"
            "  --smoke            seconds-long pass over every workload and backend\n"
            "  --workloads a,b    only these workloads (see --list)\n"
            "  --backends a,b     only these backends (see --list)\n"
            "  --rounds N         measured rounds after the warm-up round\n"
            "  --threads N        threads for multi-threaded workloads (default: CPUs)\n"
            "  --budget SECONDS   time one workload may take on one backend before its\n"
            "                     rounds are cut (quick 15, full 60, smoke 10)\n"
            "  --out DIR          results root (default " DPMBENCH_RESULTS_DIR ")\n"
            "  --docs FILE.md     also write the report there, plots beside it\n"
            "  --dpm-preload LIB  libdpmalloc.so for the dpm-preload column\n"
            "  --no-plots         tables, CSV and JSON only\n"
            "  --list             workloads and backends found, then exit\n");
}

static int parse_kind(const char *s, enum backend_kind *kind)
{
    if (strcmp(s, "dpm") == 0)
        *kind = BACKEND_NATIVE_DPM;
    else if (strcmp(s, "libc") == 0)
        *kind = BACKEND_LIBC;
    else if (strcmp(s, "rte") == 0)
        *kind = BACKEND_RTE;
    else
        return -1;
    return 0;
}

static int parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){.mode = MODE_QUICK, .plots = 1, .out_root = DPMBENCH_RESULTS_DIR,
                          .dpm_preload = DPMBENCH_PRELOAD_LIB};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define VALUE() (v ? (i++, v) : (fprintf(stderr, "dpmbench: %s needs a value\n", a), exit(2), ""))
        if (!strcmp(a, "--quick"))
            o->mode = MODE_QUICK;
        else if (!strcmp(a, "--full"))
            o->mode = MODE_FULL;
        else if (!strcmp(a, "--smoke"))
            o->mode = MODE_SMOKE;
        else if (!strcmp(a, "--workloads"))
            o->workloads = VALUE();
        else if (!strcmp(a, "--backends"))
            o->backends = VALUE();
        else if (!strcmp(a, "--rounds"))
            o->rounds = atoi(VALUE());
        else if (!strcmp(a, "--budget"))
            o->budget_s = atof(VALUE());
        else if (!strcmp(a, "--threads"))
            o->threads = atoi(VALUE());
        else if (!strcmp(a, "--out"))
            o->out_root = VALUE();
        else if (!strcmp(a, "--docs"))
            o->docs = VALUE();
        else if (!strcmp(a, "--dpm-preload"))
            o->dpm_preload = VALUE();
        else if (!strcmp(a, "--no-plots"))
            o->plots = 0;
        else if (!strcmp(a, "--list"))
            o->child = -1;
        else if (!strcmp(a, "--child")) {
            o->child = 1;
            o->child_workload = VALUE();
        } else if (!strcmp(a, "--kind")) {
            if (parse_kind(VALUE(), &o->child_kind) != 0)
                return -1;
        } else if (!strcmp(a, "--tsc-hz"))
            o->tsc_hz = atof(VALUE());
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        } else {
            fprintf(stderr, "dpmbench: unknown option %s\n", a);
            return -1;
        }
#undef VALUE
    }
    if (o->rounds <= 0)
        o->rounds = o->mode == MODE_FULL ? 5 : o->mode == MODE_QUICK ? 3 : 1;
    if (o->rounds > 30)
        o->rounds = 30;
    if (o->budget_s <= 0)
        o->budget_s = o->mode == MODE_FULL ? 60 : o->mode == MODE_QUICK ? 15 : 10;
    if (o->threads <= 0)
        o->threads = allowed_cpu_count();
    return 0;
}

static const struct workload *workload_named(const char *name)
{
    for (int i = 0; i < workload_count; i++)
        if (!strcmp(workloads[i].name, name))
            return &workloads[i];
    return NULL;
}

/* Is `name` in the comma-separated list (NULL list = everything)? */
static int listed(const char *list, const char *name)
{
    size_t len = strlen(name);
    if (!list)
        return 1;
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == len && !strncmp(p, name, len))
            return 1;
        p += n + (end ? 1 : 0);
    }
    return 0;
}

/* ---- child side ------------------------------------------------------------ */

static int run_child(const struct options *o)
{
    const struct workload *w = workload_named(o->child_workload);
    struct bench_ctx ctx = {.mode = o->mode, .rounds = o->rounds, .threads = o->threads,
                            .result_fd = 3, .tsc_hz = o->tsc_hz, .round = -1,
                            .budget_s = o->budget_s};
    if (!w)
        return 2;
    set_ticks_hz(o->tsc_hz > 0 ? o->tsc_hz : calibrate_ticks_hz());
    ctx.be = backend_open(o->child_kind);
    if (!ctx.be)
        return 4;
    pin_to_cpu_index(allowed_cpu_count() - 1);
    tick_overhead();
    reset_peak_rss();
    long faults = minor_faults();
    int rc = w->run(&ctx);
    emit_value(&ctx, "process", "minor faults", "count", '-', (double)(minor_faults() - faults));
    emit_value(&ctx, "process", "peak RSS", "MiB", '-', rss_kb("VmHWM") / 1024.0);
    emit_value(&ctx, "process", "final RSS", "MiB", '-', rss_kb("VmRSS") / 1024.0);
    backend_close(o->child_kind);
    return rc;
}

/* ---- parent side: one child per (workload, backend) ------------------------ */

struct progress {
    int tty;
    double run_start, child_start;
    int done, total;
};

static void show_progress(const struct progress *pr, const char *wl, const char *be,
                          int round, int rounds)
{
    if (!pr->tty)
        return;
    double now = now_seconds();
    fprintf(stderr, "\r\033[K[%d/%d] %-13s %-11s %s %d/%d  %5.1fs  (total %.0fs)", pr->done + 1,
            pr->total, wl, be, round == 0 ? "warm-up" : "round", round == 0 ? 0 : round, rounds,
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
                         const char *be_name, int rounds)
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
        show_progress(pr, wr->w->name, be_name, atoi(f[1]), rounds);
    } else if (f[0][0] == 'W' && n >= 2) {
        note_append(wr->about, sizeof wr->about, f[1]);
    } else if (f[0][0] == 'N' && n >= 2) {
        note_append(wr->notes[b], sizeof wr->notes[b], f[1]);
    } else if (f[0][0] == 'M' && n >= 8) {
        struct metric_row *row = row_for(wr, f[1], f[2], f[3], f[4][0]);
        row->have[b] = 1;
        row->med[b] = atof(f[5]);
        row->min[b] = atof(f[6]);
        row->max[b] = atof(f[7]);
    }
}

/* Reads the child's records until it closes the pipe; between records the
 * progress line is refreshed twice a second so the elapsed time moves. */
static void read_child_records(int fd, struct workload_result *wr, int b, struct progress *pr,
                               const char *be_name, int rounds)
{
    char buf[8192];
    size_t have = 0;
    int round = 0;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int ready = poll(&p, 1, 500);
        if (ready == 0) {
            show_progress(pr, wr->w->name, be_name, round, rounds);
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
                round = atoi(line + 2);
            parse_record(wr, b, line, pr, be_name, rounds);
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
                                                        : "libc";
    const char *mode = o->mode == MODE_FULL ? "--full" : o->mode == MODE_QUICK ? "--quick"
                                                                               : "--smoke";
    snprintf(rounds, sizeof rounds, "%d", o->rounds);
    snprintf(threads, sizeof threads, "%d", o->threads);
    snprintf(hz, sizeof hz, "%.0f", tsc_hz);
    snprintf(budget, sizeof budget, "%.1f", o->budget_s);
    if (dup2(result_fd, 3) < 0)
        _exit(5);
    if (spec->preload)
        setenv("LD_PRELOAD", spec->preload, 1);
    else
        unsetenv("LD_PRELOAD");
    alarm(child_time_limit(o->mode));
    execl("/proc/self/exe", "dpmbench", "--child", workload, "--kind", kind, mode, "--rounds",
          rounds, "--threads", threads, "--tsc-hz", hz, "--budget", budget, (char *)NULL);
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

static void run_one(const struct options *o, struct run *run, struct workload_result *wr, int b,
                    struct progress *pr)
{
    int fds[2];
    if (pipe(fds) != 0) {
        perror("pipe");
        exit(1);
    }
    fflush(NULL);
    pr->child_start = now_seconds();
    show_progress(pr, wr->w->name, run->be[b].name, 0, o->rounds);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        exec_child(o, &run->be[b], wr->w->name, fds[1], run->tsc_hz);
    }
    close(fds[1]);
    read_child_records(fds[0], wr, b, pr, run->be[b].name, o->rounds);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    record_exit(wr, b, status);
    wr->seconds[b] = now_seconds() - pr->child_start;
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
        fprintf(stderr, "dpmbench: %-13s %-11s done in %.1fs\n", wr->w->name, run->be[b].name,
                wr->seconds[b]);
}

/* ---- output ------------------------------------------------------------------ */

static void make_outdir(struct run *run, const char *root)
{
    time_t t = time(NULL);
    struct tm tm;
    char stamp[32];
    gmtime_r(&t, &tm);
    strftime(run->started, sizeof run->started, "%Y-%m-%dT%H:%M:%SZ", &tm);
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    mkdir(root, 0755);
    snprintf(run->outdir, sizeof run->outdir, "%s/%s-%s", root, stamp, mode_name(run->mode));
    if (mkdir(run->outdir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "dpmbench: cannot create %s: %s\n", run->outdir, strerror(errno));
        exit(1);
    }
}

/* results/latest-<mode> points at this run's directory. */
static void link_latest(const struct run *run, const char *root)
{
    char link[600];
    const char *base = strrchr(run->outdir, '/');
    snprintf(link, sizeof link, "%s/latest-%s", root, mode_name(run->mode));
    unlink(link);
    if (symlink(base ? base + 1 : run->outdir, link) != 0)
        fprintf(stderr, "dpmbench: note: cannot link %s\n", link);
}

static int copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
    char buf[65536];
    size_t n;
    int ok = in && out;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0)
        ok = fwrite(buf, 1, n, out) == n;
    if (in)
        fclose(in);
    if (out)
        ok = fclose(out) == 0 && ok;
    return ok ? 0 : -1;
}

/* docs/benchmarks.md plus its PNGs in docs/benchmarks/ (copied from the
 * run's directory: the data and scripts stay with the results). */
static void write_docs(const struct run *run, const char *docs, int plots)
{
    static const char *const pngs[] = {"frag",    "bulk",          "nobulk", "realloc",
                                       "threads", "tunnels",       "mt-throughput",
                                       "mt-rss"};
    char dir[600], plotdir[1024], rel[300], from[1024], to[1400];
    const char *slash = strrchr(docs, '/');
    const char *base = slash ? slash + 1 : docs;
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - docs) : 1, slash ? docs : ".");
    snprintf(rel, sizeof rel, "%.*s", (int)strcspn(base, "."), base);
    snprintf(plotdir, sizeof plotdir, "%s/%s", dir, rel);
    if (plots) {
        mkdir(plotdir, 0755);
        for (size_t i = 0; i < sizeof pngs / sizeof pngs[0]; i++) {
            snprintf(from, sizeof from, "%s/%s.png", run->outdir, pngs[i]);
            snprintf(to, sizeof to, "%s/%s.png", plotdir, pngs[i]);
            if (access(from, R_OK) == 0 && copy_file(from, to) != 0)
                fprintf(stderr, "dpmbench: cannot copy %s to %s\n", from, to);
        }
    }
    write_markdown(run, docs, plots ? rel : NULL);
    fprintf(stderr, "dpmbench: wrote %s\n", docs);
}

static void write_outputs(const struct options *o, struct run *run)
{
    char path[700];
    int plots = 0;
    snprintf(path, sizeof path, "%s/results.csv", run->outdir);
    write_csv(run, path);
    snprintf(path, sizeof path, "%s/results.json", run->outdir);
    write_json(run, path);
    if (o->plots && gnuplot_available())
        plots = write_plots(run, run->outdir);
    else if (o->plots)
        fprintf(stderr, "dpmbench: gnuplot not found (apt-get install gnuplot-nox): tables "
                        "only\n");
    snprintf(path, sizeof path, "%s/report.md", run->outdir);
    write_markdown(run, path, plots ? "." : NULL);
    link_latest(run, o->out_root);
    fprintf(stderr, "dpmbench: results in %s (results.csv, results.json, report.md, %d plots)\n",
            run->outdir, plots);
    if (o->docs)
        write_docs(run, o->docs, plots > 0);
}

static void print_backends(FILE *out, const struct run *run)
{
    for (int b = 0; b < run->nbe; b++) {
        const struct backend_spec *s = &run->be[b];
        fprintf(out, "  %-12s %-10s %s%s\n", s->name, s->version, s->missing ? "unavailable: " : "",
                s->missing  ? s->missing
                : s->preload ? s->preload
                : s->kind == BACKEND_NATIVE_DPM ? "native dpm_ API (linked)"
                : s->kind == BACKEND_RTE        ? "DPDK rte_malloc, EAL in the child"
                                                : "libc malloc of this system");
    }
}

static void select_backends(struct run *run, const struct options *o)
{
    struct backend_spec all[MAX_BACKENDS];
    int n = discover_backends(all, MAX_BACKENDS, o->dpm_preload);
    run->nbe = 0;
    for (int i = 0; i < n; i++)
        if (listed(o->backends, all[i].name))
            run->be[run->nbe++] = all[i];
}

static void command_line(struct run *run, int argc, char **argv)
{
    size_t len = 0;
    for (int i = 0; i < argc && len < sizeof run->command - 1; i++)
        len += (size_t)snprintf(run->command + len, sizeof run->command - len, "%s%s",
                                i ? " " : "", i ? argv[i] : "dpmbench");
}

static int run_parent(const struct options *o, int argc, char **argv)
{
    struct run run = {.mode = o->mode, .rounds = o->rounds, .threads = o->threads};
    struct progress pr = {.tty = isatty(2), .run_start = now_seconds()};
    command_line(&run, argc, argv);
    select_backends(&run, o);
    run.wr = calloc((size_t)workload_count, sizeof *run.wr);
    for (int i = 0; i < workload_count; i++)
        if (listed(o->workloads, workloads[i].name))
            run.wr[run.nwr++].w = &workloads[i];
    if (run.nwr == 0 || run.nbe == 0) {
        fprintf(stderr, "dpmbench: nothing selected (see --list)\n");
        return 2;
    }
    run.tsc_hz = calibrate_ticks_hz();
    make_outdir(&run, o->out_root);
    printf("dpmbench %s mode: %d rounds after a warm-up, %d threads, ticks %.3f GHz\n",
           mode_name(o->mode), o->rounds, o->threads, run.tsc_hz / 1e9);
    print_backends(stdout, &run);
    for (int b = 0; b < run.nbe; b++)
        pr.total += run.be[b].missing ? 0 : run.nwr;
    for (int i = 0; i < run.nwr; i++) {
        for (int b = 0; b < run.nbe; b++) {
            if (run.be[b].missing)
                run.wr[i].status[b] = RUN_UNAVAILABLE;
            else
                run_one(o, &run, &run.wr[i], b, &pr);
        }
        if (pr.tty)
            fprintf(stderr, "\r\033[K");
        print_workload_table(stdout, &run, &run.wr[i]);
        fflush(stdout);
    }
    print_summary(stdout, &run);
    write_outputs(o, &run);
    int failed = 0;
    for (int i = 0; i < run.nwr; i++)
        for (int b = 0; b < run.nbe; b++)
            failed += run.wr[i].status[b] == RUN_FAILED;
    if (failed)
        fprintf(stderr, "dpmbench: %d workload runs FAILED\n", failed);
    return failed ? 1 : 0;
}

static void list_everything(const struct options *o)
{
    struct run run = {0};
    select_backends(&run, o);
    printf("workloads:\n");
    for (int i = 0; i < workload_count; i++)
        printf("  %-13s %s\n", workloads[i].name, workloads[i].what);
    printf("backends:\n");
    print_backends(stdout, &run);
}

int main(int argc, char **argv)
{
    struct options o;
    if (parse_options(argc, argv, &o) != 0) {
        usage(stderr);
        return 2;
    }
    if (o.child == 1)
        return run_child(&o);
    if (o.child == -1) {
        list_everything(&o);
        return 0;
    }
    return run_parent(&o, argc, argv);
}
