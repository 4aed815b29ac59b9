/*
 * main.c - dpmbench's command line, its table of workloads, and both
 * roles of the program: the parent (run_parent) runs every selected
 * (workload, backend) pair in children through spawn.c, round-major (round
 * r runs every backend once, in an order rotated by r, so a burst of other
 * load lands on all of them alike), and reports through report.c, plot.c
 * and output.c; the child (run_child, started with --child) runs one round
 * of one workload against one backend.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
     run_frag, 0, NULL},
    {"bulk", "1000 allocs, memset each, free all: ns per alloc and per free", run_bulk, 0, NULL},
    {"nobulk", "alloc, memset, 5 us busy wait, free: ns per alloc+free (wait excluded)",
     run_nobulk, 0, NULL},
    {"realloc", "alloc s, realloc 2s, realloc 4s, free, memset after each: ns per iteration "
                "(memset excluded)", run_realloc, 0, NULL},
    {"threads", "one pinned thread per core: N x alloc(4096, 4096) with 5 us waits, then N "
                "frees: us per thread", run_threads, 0, NULL},
    {"tunnels", "VPP GTP-U: tunnel + rewrite vector (align 64 at offset 4) + route each: "
                "clocks per call, RSS over requested bytes (seed 002)", run_tunnels, 0, NULL},
    {"counters", "per-thread 24-byte counters: packed, padded, one malloc(24) per thread, and "
                 "a per-core variable (dpm_pcv, dpmalloc's column): increments per second "
                 "(seed 001)", run_counters, 0, NULL},
    {"larson", "Larson server: threads replace random 16-1024 B objects, each generation "
               "inherits the last one's objects", run_larson, 0, NULL},
    {"prodcons", "producer/consumer: a producer thread allocates batches of blocks (16-512 B) "
                 "that a consumer thread frees; 1, 2 and 4 pairs",
     run_prodcons, 0, NULL},
    {"cache-scratch", "passive false sharing: each thread frees a block handed to it, then "
                      "allocates, writes and frees 8-byte blocks", run_cache_scratch, 0, NULL},
    {"cache-thrash", "active false sharing: each thread allocates, writes and frees 8-byte "
                     "blocks", run_cache_thrash, 0, NULL},
    {"churn", "random sizes 16 B-16 KiB through shared slots: frees by any thread", run_churn, 0, NULL},
    {"contention", "4 threads per CPU on one arena, then on exclusive arenas (arenas.create + "
                   "thread.arena): throughput and lock waits (seed 004)", run_contention, 0, NULL},
    {"seed", "seed 000's single-thread table: bulk alloc/free, no-bulk, realloc x sizes 64 B-512 "
             "KiB x align 64/4096; DPDK rte_malloc, dpmalloc's rte_ layer, dpmalloc native",
     run_seed_single, 0, "rte_malloc,dpm-rte,dpmalloc"},
    {"seed-threads", "seed 000's 16-thread table: T threads, each N x alloc(4096, 4096) with 5 us "
                     "waits, then N frees; T = cores and T = 16", run_seed_threads, 0,
     "rte_malloc,dpm-rte,dpmalloc"},
    {"memory", "what stays resident: idle threads, 1000 idle threads after small-block "
               "churn, stepwise shrink, big then small, holes, aligned-at offsets, a consumer "
               "thread; each program in a fresh process, RSS from /proc/self/statm",
     run_memory, 1, NULL},
};
const int workload_count = (int)(sizeof workloads / sizeof workloads[0]);

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
            "  --assume-loaded    report as if the load average were over half the CPUs\n"
            "                     (tests the unreliable-figures warning)\n"
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
    else if (strcmp(s, "dpm-rte") == 0)
        *kind = BACKEND_DPM_RTE;
    else
        return -1;
    return 0;
}

static int parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){.mode = MODE_QUICK, .plots = 1, .out_root = DPMBENCH_RESULTS_DIR,
                          .dpm_preload = DPMBENCH_PRELOAD_LIB, .child_program = -1};
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
        else if (!strcmp(a, "--assume-loaded"))
            o->force_load_warning = 1;
        else if (!strcmp(a, "--list"))
            o->child = -1;
        else if (!strcmp(a, "--child")) {
            o->child = 1;
            o->child_workload = VALUE();
        } else if (!strcmp(a, "--kind")) {
            if (parse_kind(VALUE(), &o->child_kind) != 0)
                return -1;
        } else if (!strcmp(a, "--backend"))
            o->child_backend = VALUE();
        else if (!strcmp(a, "--program"))
            o->child_program = atoi(VALUE());
        else if (!strcmp(a, "--tsc-hz"))
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
                            .budget_s = o->budget_s, .kind = o->child_kind,
                            .backend_name = o->child_backend ? o->child_backend : "",
                            .program = o->child_program};
    if (!w || (ctx.program >= 0 && !w->own_processes))
        return 2;
    set_ticks_hz(o->tsc_hz > 0 ? o->tsc_hz : calibrate_ticks_hz());
    ctx.be = backend_open(o->child_kind);
    if (!ctx.be)
        return 4;
    pin_to_cpu_index(allowed_cpu_count() - 1);
    tick_overhead();
    reset_peak_rss();
    long faults = minor_faults();
    int rc = ctx.program >= 0 ? run_memory_program(&ctx) : w->run(&ctx);
    if (w->own_processes) {
        backend_close(o->child_kind);
        return rc;
    }
    emit_value(&ctx, "process", "minor faults", "count", '-', (double)(minor_faults() - faults));
    emit_value(&ctx, "process", "peak RSS", "MiB", '-', rss_kb("VmHWM") / 1024.0);
    emit_value(&ctx, "process", "final RSS", "MiB", '-', rss_kb("VmRSS") / 1024.0);
    backend_close(o->child_kind);
    return rc;
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
                : s->kind == BACKEND_DPM_RTE    ? "dpmalloc's rte_malloc layer (dpm_rte_*), seed tables only"
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
    /* a closed stdout (| head) must not lose the result files */
    signal(SIGPIPE, SIG_IGN);
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
    describe_machine(stdout, 0);
    print_backends(stdout, &run);
    run.load_cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
    run.load_start = load_average();
    run.load_forced = o->force_load_warning;
    run.loaded = o->force_load_warning || run.load_start > run.load_cpus / 2.0;
    if (run.loaded)
        print_load_warning(stdout, &run, 0);
    for (int b = 0; b < run.nbe; b++)
        for (int i = 0; i < run.nwr; i++)
            pr.total += (!run.be[b].missing && workload_runs_on(run.wr[i].w, &run.be[b])) *
                        o->rounds;
    for (int i = 0; i < run.nwr; i++) {
        struct workload_result *wr = &run.wr[i];
        for (int b = 0; b < run.nbe; b++)
            if (workload_runs_on(wr->w, &run.be[b]) && run.be[b].missing)
                wr->status[b] = RUN_UNAVAILABLE;
        for (int r = 0; r < o->rounds; r++)
            for (int k = 0; k < run.nbe; k++) {
                int b = (k + r) % run.nbe;
                if (!workload_runs_on(wr->w, &run.be[b]) || run.be[b].missing ||
                    wr->status[b] == RUN_FAILED || wr->status[b] == RUN_UNAVAILABLE)
                    continue;
                /* the per-pair time budget: stop before a round that would
                 * take the pair past it (judged by its rounds so far) */
                int done = wr->rounds_done[b];
                if (done > 0 && wr->seconds[b] + wr->seconds[b] / done > o->budget_s) {
                    if (r == done) {
                        char note[120];
                        snprintf(note, sizeof note, "rounds cut to %d by the %.0f s time budget",
                                 done, o->budget_s);
                        size_t len = strlen(wr->notes[b]);
                        snprintf(wr->notes[b] + len, sizeof wr->notes[b] - len, "%s%s",
                                 len ? "; " : "", note);
                        pr.total -= o->rounds - done;
                    }
                    continue;
                }
                run_one(o, &run, wr, b, r, &pr);
            }
        finish_rows(wr);
        if (pr.tty)
            fprintf(stderr, "\r\033[K");
        print_workload_table(stdout, &run, wr);
        fflush(stdout);
    }
    /* the load at the end counts too: a run that became loaded is as
     * unreliable as one that started so */
    double load_end = load_average();
    if (!run.loaded && load_end > run.load_cpus / 2.0) {
        run.loaded = 1;
        run.load_start = load_end;
        print_load_warning(stdout, &run, 0);
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
