/*
 * plot.c - PNG charts through gnuplot: for each chart a data file (one
 * gnuplot "index" block per panel, allocators as columns) and a script,
 * both kept next to the PNG so a chart can be restyled by hand. frag is a
 * line chart per size/align pair, bulk/nobulk/realloc are bars grouped by
 * size, threads is a line chart, the multi-threaded shapes get throughput
 * and peak-RSS bars, and summary.png draws the summary's ratios (one bar
 * per allocator per workload, dpm-preload = 1). Every axis names its unit,
 * legends sit outside the data, and each allocator keeps one colour in
 * every chart (dpm-preload hatched and dashed, so it is never mistaken for
 * dpmalloc's native column). gnuplot's messages are shown only when it
 * fails, and no log file is left behind.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

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

/* One look per allocator, the same in every chart. */
struct look {
    const char *name, *colour;
    int dash, point;
    const char *fill;
};

static const struct look looks[] = {
    {"dpmalloc", "#1f4e9e", 1, 7, "solid 0.9"},
    {"dpm-preload", "#e8710a", 2, 5, "pattern 4"},
    {"glibc", "#606060", 1, 9, "solid 0.6"},
    {"jemalloc", "#2ca02c", 1, 11, "solid 0.6"},
    {"mimalloc", "#9467bd", 1, 13, "solid 0.6"},
    {"tcmalloc", "#d62728", 1, 4, "solid 0.6"},
    {"rte_malloc", "#17becf", 1, 6, "solid 0.6"},
    {"dpm-rte", "#8c564b", 3, 8, "solid 0.6"},
};

static struct look look_of(const char *name)
{
    for (size_t i = 0; i < sizeof looks / sizeof looks[0]; i++)
        if (!strcmp(looks[i].name, name))
            return looks[i];
    return (struct look){name, "#000000", 1, 1, "solid 0.6"};
}

/* The data file's columns: 2.. in the order of the usable backends. */
static const char *column_name(const struct run *run, int column)
{
    for (int b = 0, c = 2; b < run->nbe; b++)
        if (backend_usable(run, b) && c++ == column)
            return run->be[b].name;
    return "";
}

static void script_preamble(FILE *gp, const char *name, int width, int height, int rows, int cols,
                            const char *title)
{
    fprintf(gp, "set terminal pngcairo size %d,%d font \",9\"\n", width, height);
    fprintf(gp, "set output '%s.png'\nset datafile missing '?'\n", name);
    /* outside the plot area: a key inside hid lines and bars */
    fprintf(gp, "set termoption noenhanced\nset key outside right top vertical font \",8\"\n"
                "set grid ytics\n");
    fprintf(gp, "set multiplot layout %d,%d title \"%s\"\n", rows, cols, title);
}

static void script_panel(FILE *gp, const struct run *run, const char *name, int index,
                         const struct panel *p, int columns, int lines, const char *xlabel,
                         const char *ylabel, int logy)
{
    fprintf(gp, "set title \"%s\"\nset xlabel \"%s\"\nset ylabel \"%s\"\n", p->title, xlabel,
            ylabel);
    fprintf(gp, logy ? "set logscale y\nset yrange [*:*]\n" : "unset logscale y\nset yrange [0:*]\n");
    if (lines)
        fprintf(gp, "unset style\nset xtics rotate by 0\nplot");
    else
        fprintf(gp, "set style data histograms\nset style histogram clustered gap 1\n"
                    "set xtics rotate by -40\nplot");
    for (int i = 2; i <= columns + 1; i++) {
        struct look k = look_of(column_name(run, i));
        if (lines)
            fprintf(gp, "%s '%s.dat' index %d using 0:%d:xtic(1) with linespoints lw 1.5 "
                        "lc rgb '%s' dt %d pt %d title columnheader(%d)",
                    i > 2 ? "," : "", name, index, i, k.colour, k.dash, k.point, i);
        else
            fprintf(gp, "%s '%s.dat' index %d using %d%s lc rgb '%s' fs %s border -1 "
                        "title columnheader(%d)",
                    i > 2 ? "," : "", name, index, i, i == 2 ? ":xtic(1)" : "", k.colour,
                    k.fill, i);
    }
    fputc('\n', gp);
}

/* Runs gnuplot on dir/name.gp; what it says is shown only if it fails,
 * so no log file is kept in the results directory or elsewhere. */
static int run_gnuplot(const char *dir, const char *name)
{
    char cmd[1200], out[4096];
    size_t len = 0;
    snprintf(cmd, sizeof cmd, "cd '%s' && gnuplot '%s.gp' 2>&1", dir, name);
    FILE *p = popen(cmd, "r");
    if (!p)
        return 0;
    size_t got;
    while ((got = fread(out + len, 1, sizeof out - 1 - len, p)) > 0)
        len += got;
    out[len] = 0;
    int status = pclose(p);
    if (status != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "dpmbench: gnuplot failed on %s/%s.gp:\n%s", dir, name, out);
        return 0;
    }
    return 1;
}

struct chart {
    const char *name, *title, *xlabel, *ylabel;
    int rows, cols, lines, logy;
    const struct panel *panels;
    int npanels;
};

static int render_chart(const struct run *run, const char *dir, const struct chart *c)
{
    char path[800];
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
    script_preamble(gp, c->name, 540 * c->cols + 100, 380 * c->rows + 60, c->rows, c->cols,
                    c->title);
    for (int i = 0; i < c->npanels; i++) {
        rows_total += write_panel_block(dat, run, &c->panels[i]);
        script_panel(gp, run, c->name, i, &c->panels[i], columns, c->lines, c->xlabel, c->ylabel,
                     c->logy);
    }
    fprintf(gp, "unset multiplot\n");
    fclose(dat);
    fclose(gp);
    if (rows_total == 0)
        return 0;
    return run_gnuplot(dir, c->name);
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
    {"frag", "frag: mean time per call by batch of 2000 (size/align in bytes)",
     "batch of 2000 calls (1st to 5th)", "time per call [ns]", 2, 4, 1, 1, frag_panels, 8},
    {"bulk", "bulk: 1000 allocs, memset, free all", "block size [bytes]", "time per call [ns]",
     2, 2, 0, 1, bulk_panels, 4},
    {"nobulk", "nobulk: alloc + free around a 5 us wait", "block size [bytes]",
     "alloc + free [ns]", 1, 2, 0, 1, nobulk_panels, 2},
    {"realloc", "realloc: s -> 2s -> 4s", "first size s [bytes]", "time per iteration [ns]", 1,
     2, 0, 1, realloc_panels, 2},
    {"threads", "threads: one pinned thread per core", "blocks per thread N [count]",
     "time per thread [us]", 1, 2, 1, 1, threads_panels, 2},
};

/* tunnels mixes units: clocks per call in one panel, the RSS ratio in the
 * other, each with its own y label. */
static const struct panel tunnels_clock_panel = {
    "alloc and free", "tunnels", NULL, NULL, NULL, 2, "/call"};
static const struct panel tunnels_rss_panel = {
    "RSS / requested bytes", "tunnels", "RSS/requested", NULL, NULL, 0, NULL};

static int render_tunnels(const struct run *run, const char *dir)
{
    char path[800], ylabel[64];
    int columns = usable_columns(run), rows = 0;
    const struct workload_result *wr = workload_result(run, "tunnels");
    const char *unit = "ns/call";
    for (int i = 0; wr && i < wr->nrows; i++)
        if (ends_with(wr->rows[i].unit, "/call"))
            unit = wr->rows[i].unit;
    snprintf(ylabel, sizeof ylabel, "cost per call [%.*s]", (int)(strlen(unit) - 5), unit);
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
    script_preamble(gp, "tunnels", 1240, 460, 1, 2, "tunnels (VPP GTP-U case)");
    script_panel(gp, run, "tunnels", 0, &tunnels_clock_panel, columns, 0, "object and call",
                 ylabel, 1);
    script_panel(gp, run, "tunnels", 1, &tunnels_rss_panel, columns, 0, "all objects",
                 "RSS / requested bytes [ratio]", 0);
    fprintf(gp, "unset multiplot\n");
    fclose(dat);
    fclose(gp);
    if (rows == 0)
        return 0;
    return run_gnuplot(dir, "tunnels");
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
    char path[800];
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
    script_panel(gp, run, name, 0, &p, usable_columns(run), 0, "workload",
                 rss ? "peak RSS [MiB]" : "throughput [Mops/s]", 1);
    fprintf(gp, "unset multiplot\n");
    fclose(gp);
    return run_gnuplot(dir, name);
}

/* The summary's ratios: a cluster per workload, a bar per allocator,
 * linear, dpm-preload = 1 drawn across. Bars past SUMMARY_CAP are cut
 * there and carry their value, so one slow peer does not flatten the rest. */
#define SUMMARY_CAP 4.0

static int render_summary(const struct run *run, const char *dir)
{
    char path[800];
    int cols[MAX_BACKENDS], ncols = 0, nrows = 0, base = baseline_index(run);
    for (int b = 0; b < run->nbe; b++)
        if (backend_usable(run, b) && b != base && run->be[b].kind != BACKEND_DPM_RTE)
            cols[ncols++] = b;
    snprintf(path, sizeof path, "%s/summary.dat", dir);
    FILE *dat = fopen(path, "w");
    if (!dat)
        return 0;
    fputs("\"workload\"", dat);
    for (int c = 0; c < ncols; c++)
        fprintf(dat, " \"%s\"", run->be[cols[c]].name);
    fputc('\n', dat);
    for (int i = 0; i < run->nwr; i++) {
        const struct workload_result *wr = &run->wr[i];
        int ref = reference_backend(run, wr), any = 0;
        double ratio;
        if (ref < 0 || ref != base)
            continue; /* only ratios against dpm-preload share this axis */
        for (int c = 0; c < ncols; c++)
            any |= ratio_vs_reference(run, wr, cols[c], &ratio) == 0;
        if (!any)
            continue;
        fprintf(dat, "\"%s\"", wr->w->name);
        for (int c = 0; c < ncols; c++)
            if (ratio_vs_reference(run, wr, cols[c], &ratio) == 0)
                fprintf(dat, " %.4f", ratio);
            else
                fputs(" ?", dat);
        fputc('\n', dat);
        nrows++;
    }
    fclose(dat);
    if (nrows == 0 || ncols == 0)
        return 0;
    snprintf(path, sizeof path, "%s/summary.gp", dir);
    FILE *gp = fopen(path, "w");
    if (!gp)
        return 0;
    struct look bl = look_of("dpm-preload");
    int width = 300 + 22 * nrows * (ncols + 1);
    fprintf(gp, "set terminal pngcairo size %d,560 font \",9\"\n", width < 1800 ? width : 1800);
    /* autotitle columnheader: the label plots must skip the header line too */
    fprintf(gp, "set output 'summary.png'\nset datafile missing '?'\nset termoption noenhanced\n"
                "set key outside right top vertical font \",8\" autotitle columnheader\n"
                "set grid ytics\n");
    fprintf(gp, "set title \"time relative to dpm-preload (geometric mean of each workload's "
                "timed rows; >1 = slower; bars over %.0f are cut and labelled)\"\n",
            SUMMARY_CAP);
    fprintf(gp, "set xlabel \"workload\"\nset ylabel \"time relative to dpm-preload [ratio]\"\n"
                "set yrange [0:%.1f]\nset xtics rotate by -30\n", SUMMARY_CAP + 0.4);
    fprintf(gp, "set arrow from graph 0, first 1 to graph 1, first 1 nohead front lw 2 dt 2 "
                "lc rgb '%s'\n", bl.colour);
    fprintf(gp, "set label 'dpm-preload = 1' at graph 0.01, first 1.08 front textcolor rgb '%s'\n",
            bl.colour);
    fprintf(gp, "set style data histograms\nset style histogram clustered gap 1\n");
    fprintf(gp, "cap(v) = v > %.1f ? %.1f : v\nplot", SUMMARY_CAP, SUMMARY_CAP);
    for (int c = 0; c < ncols; c++) {
        struct look k = look_of(run->be[cols[c]].name);
        fprintf(gp, "%s 'summary.dat' using (cap($%d))%s lc rgb '%s' fs %s border -1 "
                    "title columnheader(%d)",
                c ? "," : "", c + 2, c == 0 ? ":xtic(1)" : "", k.colour, k.fill, c + 2);
    }
    /* a clustered histogram puts bar c of row i at i + (c - (n-1)/2) / (n + gap) */
    for (int c = 0; c < ncols; c++)
        fprintf(gp, ", 'summary.dat' using ($0 + (%d - %.1f) / %d.0):($%d > %.1f ? %.1f : 1/0):"
                    "(sprintf('%%.1f', $%d)) with labels rotate by 90 right offset 0,-0.3 "
                    "font ',7' notitle",
                c, (ncols - 1) / 2.0, ncols + 1, c + 2, SUMMARY_CAP, SUMMARY_CAP, c + 2);
    fputc('\n', gp);
    fclose(gp);
    return run_gnuplot(dir, "summary");
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
    n += render_summary(run, dir);
    return n;
}
