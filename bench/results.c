/*
 * results.c - the parent's result store: rows of (case, metric) per
 * workload, and the ratio of every backend against dpmalloc in the same run.
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

/* dpmalloc's native column, if it ran successfully for this workload. */
int reference_backend(const struct run *run, const struct workload_result *wr)
{
    for (int b = 0; b < run->nbe; b++)
        if (run->be[b].kind == BACKEND_NATIVE_DPM)
            return wr->status[b] == RUN_OK ? b : -1;
    return -1;
}

/* Geometric mean over the timed rows of backend/dpmalloc (time-like, so
 * throughput rows are inverted): 1.30 means 30 % slower than dpmalloc. */
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
