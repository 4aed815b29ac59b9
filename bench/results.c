/*
 * results.c - the parent's result store: rows of (case, metric) per
 * workload, the per-round values that make each median, and the ratio of
 * every backend against the baseline (dpm-preload: the library preloaded,
 * as every peer is) in the same run.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "results.h"

const char *mode_name(enum run_mode mode)
{
    return mode == MODE_FULL ? "full" : mode == MODE_QUICK ? "quick" : "smoke";
}

const struct metric_row *find_row(const struct workload_result *wr, const char *case_name,
                                  const char *metric)
{
    for (int i = 0; i < wr->nrows; i++)
        if (!strcmp(wr->rows[i].case_name, case_name) && !strcmp(wr->rows[i].metric, metric))
            return &wr->rows[i];
    return NULL;
}

/* The row for (case, metric), created in arrival order. */
struct metric_row *row_for(struct workload_result *wr, const char *case_name, const char *metric,
                           const char *unit, char dir)
{
    struct metric_row *row = (struct metric_row *)find_row(wr, case_name, metric);
    if (row)
        return row;
    if (wr->nrows == wr->cap) {
        wr->cap = wr->cap ? 2 * wr->cap : 32;
        wr->rows = realloc(wr->rows, (size_t)wr->cap * sizeof *wr->rows);
        if (!wr->rows) {
            fprintf(stderr, "dpmbench: out of memory\n");
            exit(1);
        }
    }
    row = &wr->rows[wr->nrows++];
    memset(row, 0, sizeof *row);
    snprintf(row->case_name, sizeof row->case_name, "%s", case_name);
    snprintf(row->metric, sizeof row->metric, "%s", metric);
    snprintf(row->unit, sizeof row->unit, "%s", unit);
    row->dir = dir;
    return row;
}

int backend_usable(const struct run *run, int b) { return !run->be[b].missing; }

/* A workload's table shows the usable backends that it ran on (opt-in
 * backends only run the workloads that name them). */
int column_shown(const struct run *run, const struct workload_result *wr, int b)
{
    return backend_usable(run, b) && wr->status[b] != RUN_NOT_RUN;
}

int workload_runs_on(const struct workload *w, const struct backend_spec *be)
{
    if (w->backends == NULL)
        return !be->opt_in;
    size_t len = strlen(be->name);
    for (const char *p = w->backends; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == len && !strncmp(p, be->name, len))
            return 1;
        p += n + (end ? 1 : 0);
    }
    return 0;
}

/* The baseline column: dpm-preload, the library loaded the way every peer
 * is (LD_PRELOAD, libc API), so a ratio compares allocators and not the
 * cost of a preloaded call against a static one. -1 when not selected. */
int baseline_index(const struct run *run)
{
    for (int b = 0; b < run->nbe; b++)
        if (!strcmp(run->be[b].name, "dpm-preload"))
            return b;
    return -1;
}

/* This workload's reference: dpm-preload if it ran successfully, else
 * dpmalloc's native column for the workloads dpm-preload does not run (the
 * seed tables), or -1. */
int reference_backend(const struct run *run, const struct workload_result *wr)
{
    int base = baseline_index(run);
    if (base >= 0 && wr->status[base] != RUN_NOT_RUN)
        return wr->status[base] == RUN_OK ? base : -1;
    for (int b = 0; b < run->nbe; b++)
        if (run->be[b].kind == BACKEND_NATIVE_DPM)
            return wr->status[b] == RUN_OK ? b : -1;
    return -1;
}

/* Geometric mean over the timed rows of backend/reference (time-like, so
 * throughput rows are inverted): 1.30 means 30 % slower than the reference. */
int ratio_vs_reference(const struct run *run, const struct workload_result *wr, int b,
                       double *ratio)
{
    int ref = reference_backend(run, wr), n = 0;
    double sum_log = 0;
    if (ref < 0 || wr->status[b] != RUN_OK)
        return -1;
    for (int i = 0; i < wr->nrows; i++) {
        const struct metric_row *r = &wr->rows[i];
        if (r->dir == '-' || !r->have[b] || !r->have[ref] || r->med[b] <= 0 || r->med[ref] <= 0)
            continue;
        double q = r->med[b] / r->med[ref];
        sum_log += log(r->dir == 'H' ? 1 / q : q);
        n++;
    }
    if (n == 0)
        return -1;
    *ratio = exp(sum_log / n);
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Each round's child reported its own median; a row's median is the median
 * of those (min and max were kept as the extremes over all rounds). */
void finish_rows(struct workload_result *wr)
{
    for (int i = 0; i < wr->nrows; i++)
        for (int b = 0; b < MAX_BACKENDS; b++) {
            struct metric_row *r = &wr->rows[i];
            int n = r->nround[b];
            if (n == 0)
                continue;
            double v[MAX_ROUNDS];
            memcpy(v, r->round_med[b], (size_t)n * sizeof v[0]);
            qsort(v, (size_t)n, sizeof v[0], cmp_double);
            r->med[b] = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
        }
}

/* The 1-minute load average: other work on the machine during a run. */
double load_average(void)
{
    double load = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &load) != 1)
            load = -1;
        fclose(f);
    }
    return load;
}
