/*
 * plot.c - PNG charts through gnuplot: for each chart a data file (one
 * gnuplot "index" block per panel, allocators as columns) and a script,
 * both kept next to the PNG so a chart can be restyled by hand. frag is a
 * line chart per size/align pair, bulk/nobulk/realloc are bars grouped by
 * size, threads is a line chart, the multi-threaded shapes get throughput
 * and peak-RSS bars.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "results.h"

int gnuplot_available(void) { return system("command -v gnuplot >/dev/null 2>&1") == 0; }

/* A panel is a selection of rows from one workload. */
struct panel {
    const char *title;
    const char *workload;
    const char *metric;          /* NULL: any */
    const char *case_suffix;     /* NULL: any; else kept rows end with it */
    const char *exact_case;      /* NULL: any */
    int label_is_metric;         /* x labels: 0 the case, 1 the metric, 2 both */
    const char *unit_suffix;     /* NULL: any; else kept rows' units end with it */
};

static const struct workload_result *workload_result(const struct run *run, const char *name)
{
    for (int i = 0; i < run->nwr; i++)
        if (!strcmp(run->wr[i].w->name, name))
            return &run->wr[i];
    return NULL;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

static int row_selected(const struct panel *p, const struct metric_row *r)
{
    if (p->metric && strcmp(r->metric, p->metric))
        return 0;
    if (p->exact_case && strcmp(r->case_name, p->exact_case))
        return 0;
    if (p->unit_suffix && !ends_with(r->unit, p->unit_suffix))
        return 0;
    return !p->case_suffix || ends_with(r->case_name, p->case_suffix);
}

static void write_header(FILE *dat, const struct run *run)
{
    fputs("\"x\"", dat);
    for (int b = 0; b < run->nbe; b++)
        if (backend_usable(run, b))
            fprintf(dat, " \"%s\"", run->be[b].name);
    fputc('\n', dat);
}

static void write_values(FILE *dat, const struct run *run, const struct workload_result *wr,
                         const struct metric_row *r)
{
    for (int b = 0; b < run->nbe; b++)
        if (backend_usable(run, b)) {
            if (r && r->have[b] && wr->status[b] == RUN_OK)
                fprintf(dat, " %.6g", r->med[b]);
            else
                fputs(" ?", dat);
        }
    fputc('\n', dat);
}

/* One index block; returns the number of rows written. */
static int write_panel_block(FILE *dat, const struct run *run, const struct panel *p)
{
    const struct workload_result *wr = workload_result(run, p->workload);
    int n = 0;
    write_header(dat, run);
    for (int i = 0; wr && i < wr->nrows; i++) {
        const struct metric_row *r = &wr->rows[i];
        if (!row_selected(p, r))
            continue;
        char label[96];
        if (p->label_is_metric == 2)
            snprintf(label, sizeof label, "%s %s", r->case_name, r->metric);
        else if (p->label_is_metric)
            snprintf(label, sizeof label, "%s", r->metric);
        else
            snprintf(label, sizeof label, "%.*s", (int)(strlen(r->case_name) -
                                                        (p->case_suffix ? strlen(p->case_suffix)
                                                                        : 0)),
                     r->case_name);
        fprintf(dat, "\"%s\"", label);
        write_values(dat, run, wr, r);
        n++;
    }
    if (n == 0) {
        fputs("\"none\"", dat);
        write_values(dat, run, wr, NULL);
    }
    fputs("\n\n", dat);
    return n;
}

static int usable_columns(const struct run *run)
{
    int n = 0;
    for (int b = 0; b < run->nbe; b++)
        n += backend_usable(run, b);
    return n;
}

static void script_preamble(FILE *gp, const char *name, int width, int height, int rows, int cols,
                            const char *title)
{
    fprintf(gp, "set terminal pngcairo size %d,%d font \",9\"\n", width, height);
    fprintf(gp, "set output '%s.png'\nset datafile missing '?'\n", name);
    fprintf(gp, "set termoption noenhanced\nset key top left opaque font \",8\"\nset grid ytics\n");
    fprintf(gp, "set multiplot layout %d,%d title \"%s\"\n", rows, cols, title);
}

static void script_panel(FILE *gp, const char *name, int index, const struct panel *p,
                         int columns, int lines, const char *ylabel, int logy)
{
    fprintf(gp, "set title \"%s\"\nset ylabel \"%s\"\n", p->title, ylabel);
    fprintf(gp, logy ? "set logscale y\nset yrange [*:*]\n" : "unset logscale y\nset yrange [0:*]\n");
    if (lines) {
        fprintf(gp, "unset style\nset xtics rotate by 0\n");
        fprintf(gp, "plot for [i=2:%d] '%s.dat' index %d using 0:i:xtic(1) with linespoints "
                    "title columnheader(i)\n",
                columns + 1, name, index);
    } else {
        fprintf(gp, "set style data histograms\nset style histogram clustered gap 1\n"
                    "set style fill solid 0.85 border -1\nset xtics rotate by -40\n");
        fprintf(gp, "plot for [i=2:%d] '%s.dat' index %d using i:xtic(1) title "
                    "columnheader(i)\n",
                columns + 1, name, index);
    }
}

struct chart {
    const char *name, *title, *ylabel;
    int rows, cols, lines, logy;
    const struct panel *panels;
    int npanels;
};

static int render_chart(const struct run *run, const char *dir, const struct chart *c)
{
    char path[800], cmd[1000];
    int columns = usable_columns(run), rows_total = 0;
    snprintf(path, sizeof path, "%s/%s.dat", dir, c->name);
    FILE *dat = fopen(path, "w");
    snprintf(path, sizeof path, "%s/%s.gp", dir, c->name);
    FILE *gp = fopen(path, "w");
    if (!dat || !gp) {
        if (dat)
            fclose(dat);
        if (gp)
            fclose(gp);
        return 0;
    }
    script_preamble(gp, c->name, 420 * c->cols + 200, 360 * c->rows + 60, c->rows, c->cols,
                    c->title);
    for (int i = 0; i < c->npanels; i++) {
        rows_total += write_panel_block(dat, run, &c->panels[i]);
        script_panel(gp, c->name, i, &c->panels[i], columns, c->lines, c->ylabel, c->logy);
    }
    fprintf(gp, "unset multiplot\n");
    fclose(dat);
    fclose(gp);
    if (rows_total == 0)
        return 0;
    snprintf(cmd, sizeof cmd, "cd '%s' && gnuplot '%s.gp' 2>'%s.log'", dir, c->name, c->name);
    return system(cmd) == 0;
}

/* ---- the charts ------------------------------------------------------------- */

static const struct panel frag_panels[] = {
    {"64/4096", "frag", NULL, NULL, "64/4096", 1, NULL},
    {"1024/4096", "frag", NULL, NULL, "1024/4096", 1, NULL},
    {"2048/2048", "frag", NULL, NULL, "2048/2048", 1, NULL},
    {"4096/4096", "frag", NULL, NULL, "4096/4096", 1, NULL},
    {"4096/64", "frag", NULL, NULL, "4096/64", 1, NULL},
    {"8192/8192", "frag", NULL, NULL, "8192/8192", 1, NULL},
    {"16384/16384", "frag", NULL, NULL, "16384/16384", 1, NULL},
    {"65536/65536", "frag", NULL, NULL, "65536/65536", 1, NULL},
};

static const struct panel bulk_panels[] = {
    {"alloc, align 64", "bulk", "alloc", "/64", NULL, 0, NULL},
    {"alloc, align 4096", "bulk", "alloc", "/4096", NULL, 0, NULL},
    {"free, align 64", "bulk", "free", "/64", NULL, 0, NULL},
    {"free, align 4096", "bulk", "free", "/4096", NULL, 0, NULL},
};

static const struct panel nobulk_panels[] = {
    {"align 64", "nobulk", NULL, "/64", NULL, 0, NULL},
    {"align 4096", "nobulk", NULL, "/4096", NULL, 0, NULL},
};

static const struct panel realloc_panels[] = {
    {"align 64", "realloc", NULL, "/64", NULL, 0, NULL},
    {"align 4096", "realloc", NULL, "/4096", NULL, 0, NULL},
};

static const struct panel threads_panels[] = {
    {"N x alloc(4096, 4096), per thread", "threads", "alloc", NULL, NULL, 0, NULL},
    {"N frees, per thread", "threads", "free", NULL, NULL, 0, NULL},
};

static const struct chart charts[] = {
    {"frag", "frag: mean time per call by batch of 2000 (size/align)", "ns per call", 2, 4, 1,
     1, frag_panels, 8},
    {"bulk", "bulk: 1000 allocs, memset, free all", "ns per call", 2, 2, 0, 1, bulk_panels, 4},
    {"nobulk", "nobulk: alloc + free around a 5 us wait", "ns per alloc+free", 1, 2, 0, 1,
     nobulk_panels, 2},
    {"realloc", "realloc: s -> 2s -> 4s", "ns per iteration", 1, 2, 0, 1, realloc_panels, 2},
    {"threads", "threads: one pinned thread per core", "us per thread", 1, 2, 1, 1,
     threads_panels, 2},
};

/* tunnels mixes units: clocks per call in one panel, the RSS ratio in the
 * other, each with its own y label. */
static const struct panel tunnels_clock_panel = {
    "alloc and free", "tunnels", NULL, NULL, NULL, 2, "/call"};
static const struct panel tunnels_rss_panel = {
    "RSS / requested bytes", "tunnels", "RSS/requested", NULL, NULL, 0, NULL};

static int render_tunnels(const struct run *run, const char *dir)
{
    char path[800], cmd[1000];
    int columns = usable_columns(run), rows = 0;
    snprintf(path, sizeof path, "%s/tunnels.dat", dir);
    FILE *dat = fopen(path, "w");
    snprintf(path, sizeof path, "%s/tunnels.gp", dir);
    FILE *gp = fopen(path, "w");
    if (!dat || !gp) {
        if (dat)
            fclose(dat);
        if (gp)
            fclose(gp);
        return 0;
    }
    rows += write_panel_block(dat, run, &tunnels_clock_panel);
    rows += write_panel_block(dat, run, &tunnels_rss_panel);
    script_preamble(gp, "tunnels", 1040, 420, 1, 2, "tunnels (VPP GTP-U case)");
    script_panel(gp, "tunnels", 0, &tunnels_clock_panel, columns, 0, "cost per call", 1);
    script_panel(gp, "tunnels", 1, &tunnels_rss_panel, columns, 0, "ratio", 0);
    fprintf(gp, "unset multiplot\n");
    fclose(dat);
    fclose(gp);
    if (rows == 0)
        return 0;
    snprintf(cmd, sizeof cmd, "cd '%s' && gnuplot tunnels.gp 2>tunnels.log", dir);
    return system(cmd) == 0;
}

/* Multi-threaded summary: one block, a cluster per workload. */
static const char *const mt_workloads[] = {"larson", "prodcons", "cache-scratch",
                                           "cache-thrash", "churn", "counters"};

static const struct metric_row *mt_row(const struct workload_result *wr, int rss)
{
    if (rss)
        return find_row(wr, "process", "peak RSS");
    if (!strcmp(wr->w->name, "counters"))
        return find_row(wr, "malloc(24) per thread", "throughput");
    return wr->nrows ? &wr->rows[0] : NULL;
}

static int render_mt(const struct run *run, const char *dir, int rss)
{
    const char *name = rss ? "mt-rss" : "mt-throughput";
    char path[800], cmd[1000];
    int n = 0;
    snprintf(path, sizeof path, "%s/%s.dat", dir, name);
    FILE *dat = fopen(path, "w");
    if (!dat)
        return 0;
    write_header(dat, run);
    for (size_t i = 0; i < sizeof mt_workloads / sizeof mt_workloads[0]; i++) {
        const struct workload_result *wr = workload_result(run, mt_workloads[i]);
        if (!wr)
            continue;
        fprintf(dat, "\"%s\"", mt_workloads[i]);
        write_values(dat, run, wr, mt_row(wr, rss));
        n++;
    }
    fclose(dat);
    snprintf(path, sizeof path, "%s/%s.gp", dir, name);
    FILE *gp = fopen(path, "w");
    if (!gp || n == 0) {
        if (gp)
            fclose(gp);
        return 0;
    }
    struct panel p = {rss ? "peak RSS per workload" : "throughput (higher is better)", "", NULL,
                      NULL, NULL, 0, NULL};
    script_preamble(gp, name, 900, 460, 1, 1,
                    rss ? "multi-threaded workloads: peak RSS"
                        : "multi-threaded workloads: throughput");
    script_panel(gp, name, 0, &p, usable_columns(run), 0, rss ? "MiB" : "Mops/s", 1);
    fprintf(gp, "unset multiplot\n");
    fclose(gp);
    snprintf(cmd, sizeof cmd, "cd '%s' && gnuplot '%s.gp' 2>'%s.log'", dir, name, name);
    return system(cmd) == 0;
}

int write_plots(const struct run *run, const char *dir)
{
    int n = 0;
    if (!gnuplot_available())
        return 0;
    for (size_t i = 0; i < sizeof charts / sizeof charts[0]; i++)
        if (workload_result(run, charts[i].panels[0].workload))
            n += render_chart(run, dir, &charts[i]);
    if (workload_result(run, "tunnels"))
        n += render_tunnels(run, dir);
    n += render_mt(run, dir, 0);
    n += render_mt(run, dir, 1);
    return n;
}
