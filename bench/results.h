/*
 * results.h - what the parent collects from its children and reports:
 * per workload, rows of (case, metric) with one median/min/max per backend.
 */
#ifndef DPMBENCH_RESULTS_H
#define DPMBENCH_RESULTS_H

#include "dpmbench.h"

enum run_status { RUN_NOT_RUN, RUN_OK, RUN_FAILED, RUN_UNAVAILABLE };

#define MAX_ROUNDS 30

struct metric_row {
    char case_name[48];
    char metric[24];
    char unit[16];
    char dir;                        /* L, H or - */
    int have[MAX_BACKENDS];
    double med[MAX_BACKENDS], min[MAX_BACKENDS], max[MAX_BACKENDS];
    /* one value per round: each round is a child of its own (round-major
     * runs), med is their median once the workload is done */
    int nround[MAX_BACKENDS];
    double round_med[MAX_BACKENDS][MAX_ROUNDS];
};

struct workload_result {
    const struct workload *w;
    struct metric_row *rows;
    int nrows, cap;
    enum run_status status[MAX_BACKENDS];
    char why[MAX_BACKENDS][160];     /* failure reason */
    char notes[MAX_BACKENDS][600];
    char about[600];                 /* workload notes, the same for every backend */
    double seconds[MAX_BACKENDS];
    int rounds_done[MAX_BACKENDS];
};

struct run {
    enum run_mode mode;
    int rounds, threads;
    double tsc_hz;
    char started[32];                /* UTC, ISO 8601 */
    char outdir[512];
    char command[512];
    double load_start;               /* 1-min load average when the run began */
    int load_cpus;                   /* CPUs it is compared with */
    int loaded;                      /* load over half the CPUs: figures unreliable */
    int load_forced;                 /* --assume-loaded */
    struct backend_spec be[MAX_BACKENDS];
    int nbe;
    struct workload_result *wr;
    int nwr;
};

/* The command line (main.c). */
struct options {
    enum run_mode mode;
    int rounds, threads, plots, child;
    int force_load_warning;          /* --assume-loaded: the warning path, for tests */
    double budget_s;
    const char *workloads, *backends, *out_root, *docs, *dpm_preload;
    /* child only */
    const char *child_workload, *child_backend;
    enum backend_kind child_kind;
    int child_program;               /* memory workload: one program, or -1 */
    double tsc_hz;
};

/* The live progress line on stderr (spawn.c). */
struct progress {
    int tty;
    double run_start, child_start;
    int done, total;
};

/* spawn.c: run one (workload, backend) pair in a child */
void run_one(const struct options *o, struct run *run, struct workload_result *wr, int b,
             int round, struct progress *pr);

/* output.c */
void make_outdir(struct run *run, const char *root);
void write_outputs(const struct options *o, struct run *run);

/* results.c */
struct metric_row *row_for(struct workload_result *wr, const char *case_name,
                           const char *metric, const char *unit, char dir);
const struct metric_row *find_row(const struct workload_result *wr, const char *case_name,
                                  const char *metric);
int backend_usable(const struct run *run, int b);
int column_shown(const struct run *run, const struct workload_result *wr, int b);
int workload_runs_on(const struct workload *w, const struct backend_spec *be);
int reference_backend(const struct run *run, const struct workload_result *wr);
int baseline_index(const struct run *run);
int ratio_vs_reference(const struct run *run, const struct workload_result *wr, int b,
                       double *ratio);
void finish_rows(struct workload_result *wr);
double load_average(void);
const char *mode_name(enum run_mode mode);

/* report.c */
void print_workload_table(FILE *out, const struct run *run, const struct workload_result *wr);
void print_summary(FILE *out, const struct run *run);
void print_load_warning(FILE *out, const struct run *run, int markdown);
int write_csv(const struct run *run, const char *path);
int write_json(const struct run *run, const char *path);
int write_markdown(const struct run *run, const char *path, const char *plot_dir_rel);
void describe_machine(FILE *out, int markdown);

/* plot.c: PNGs via gnuplot; returns the number of plots written */
int write_plots(const struct run *run, const char *dir);
int gnuplot_available(void);

#endif
