/*
 * report.c - everything the parent writes: per-workload tables (text on
 * stdout, Markdown in reports) from one renderer, the summary of ratios,
 * CSV, JSON and the machine description.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "results.h"

static void format_value(double v, char *buf, size_t len)
{
    double a = fabs(v);
    if (a >= 1000 || v == 0)
        snprintf(buf, len, "%.0f", v);
    else if (a >= 100)
        snprintf(buf, len, "%.1f", v);
    else if (a >= 1)
        snprintf(buf, len, "%.2f", v);
    else
        snprintf(buf, len, "%.3f", v);
}

/* ---- one table renderer for text and Markdown ------------------------------ */

struct table_style {
    int markdown;
    int label_width;     /* text tables: width of the first column */
};

static void cell(FILE *out, const struct table_style *st, const char *text, int width, int first)
{
    if (st->markdown)
        fprintf(out, "| %s ", text);
    else if (first)
        fprintf(out, "%-*s", width, text);
    else
        fprintf(out, " %*s", width, text);
}

static void end_line(FILE *out, const struct table_style *st)
{
    fputs(st->markdown ? "|\n" : "\n", out);
}

static void header_line(FILE *out, const struct table_style *st, const struct run *run,
                        const struct workload_result *wr)
{
    cell(out, st, "case / metric [unit]", st->label_width, 1);
    for (int b = 0; b < run->nbe; b++)
        if (column_shown(run, wr, b))
            cell(out, st, run->be[b].name, 11, 0);
    end_line(out, st);
    if (!st->markdown)
        return;
    fputs("|---", out);
    for (int b = 0; b < run->nbe; b++)
        if (column_shown(run, wr, b))
            fputs("|--:", out);
    end_line(out, st);
}

/* A cell whose rounds spread over more than a quarter of the median. */
static int is_noisy(const struct metric_row *r, int b)
{
    return r->med[b] > 0 && (r->max[b] - r->min[b]) > 0.25 * r->med[b];
}

static void value_cell(FILE *out, const struct table_style *st, const struct workload_result *wr,
                       const struct metric_row *r, int b)
{
    char v[32];
    if (wr->status[b] == RUN_FAILED)
        snprintf(v, sizeof v, "FAILED");
    else if (!r->have[b])
        snprintf(v, sizeof v, "-");
    else {
        format_value(r->med[b], v, sizeof v);
        if (is_noisy(r, b))
            strcat(v, "~");
    }
    cell(out, st, v, 11, 0);
}

static void ratio_line(FILE *out, const struct table_style *st, const struct run *run,
                       const struct workload_result *wr)
{
    int ref = reference_backend(run, wr);
    char label[80];
    snprintf(label, sizeof label, st->markdown ? "**time vs %s** (geomean)" : "time vs %s (geomean)",
             ref >= 0 ? run->be[ref].name : "baseline");
    cell(out, st, label, st->label_width, 1);
    for (int b = 0; b < run->nbe; b++) {
        double ratio;
        char v[32] = "-";
        if (!column_shown(run, wr, b))
            continue;
        if (ratio_vs_reference(run, wr, b, &ratio) == 0)
            snprintf(v, sizeof v, "%.2fx", ratio);
        cell(out, st, v, 11, 0);
    }
    end_line(out, st);
}

/* Notes are grouped: backends with the same notes share one line. */
static void notes_lines(FILE *out, const struct table_style *st, const struct run *run,
                        const struct workload_result *wr)
{
    const char *dash = st->markdown ? "- " : "  ";
    if (wr->about[0])
        fprintf(out, "%s%s\n", dash, wr->about);
    for (int b = 0; b < run->nbe; b++) {
        if (!column_shown(run, wr, b))
            continue;
        if (wr->status[b] == RUN_FAILED)
            fprintf(out, "%s%s FAILED: %s\n", dash, run->be[b].name, wr->why[b]);
        int seen = 0;
        for (int e = 0; e < b && !seen; e++)
            seen = column_shown(run, wr, e) && !strcmp(wr->notes[e], wr->notes[b]);
        if (!wr->notes[b][0] || seen)
            continue;
        fputs(dash, out);
        for (int e = b, first = 1; e < run->nbe; e++)
            if (column_shown(run, wr, e) && !strcmp(wr->notes[e], wr->notes[b])) {
                fprintf(out, "%s%s", first ? "" : ", ", run->be[e].name);
                first = 0;
            }
        fprintf(out, ": %s\n", wr->notes[b]);
    }
}

static void render_table(FILE *out, const struct table_style *st, const struct run *run,
                         const struct workload_result *wr)
{
    header_line(out, st, run, wr);
    for (int i = 0; i < wr->nrows; i++) {
        const struct metric_row *r = &wr->rows[i];
        char label[96];
        snprintf(label, sizeof label, "%s / %s [%s]", r->case_name, r->metric, r->unit);
        cell(out, st, label, st->label_width, 1);
        for (int b = 0; b < run->nbe; b++)
            if (column_shown(run, wr, b))
                value_cell(out, st, wr, r, b);
        end_line(out, st);
    }
    ratio_line(out, st, run, wr);
    if (st->markdown)
        fputs("\n", out);
    fprintf(out, "%s~ = rounds spread over more than 25 %% of the median (min/max in the CSV "
                 "and JSON)\n", st->markdown ? "- " : "  ");
    notes_lines(out, st, run, wr);
}

/* Wide enough for the longest "case / metric [unit]" label. */
static int label_width(const struct workload_result *wr)
{
    int width = 30;
    for (int i = 0; i < wr->nrows; i++) {
        const struct metric_row *r = &wr->rows[i];
        int len = (int)(strlen(r->case_name) + strlen(r->metric) + strlen(r->unit)) + 6;
        width = len > width ? len : width;
    }
    return width;
}

void print_workload_table(FILE *out, const struct run *run, const struct workload_result *wr)
{
    struct table_style st = {0, label_width(wr)};
    fprintf(out, "\n== %s: %s\n", wr->w->name, wr->w->what);
    render_table(out, &st, run, wr);
}

static void summary_table(FILE *out, const struct table_style *st, const struct run *run)
{
    cell(out, st, "workload", st->label_width, 1);
    for (int b = 0; b < run->nbe; b++)
        if (backend_usable(run, b))
            cell(out, st, run->be[b].name, 11, 0);
    end_line(out, st);
    if (st->markdown) {
        fputs("|---", out);
        for (int b = 0; b < run->nbe; b++)
            if (backend_usable(run, b))
                fputs("|--:", out);
        end_line(out, st);
    }
    for (int i = 0; i < run->nwr; i++) {
        cell(out, st, run->wr[i].w->name, st->label_width, 1);
        for (int b = 0; b < run->nbe; b++) {
            double ratio;
            char v[32] = "-";
            if (!backend_usable(run, b))
                continue;
            if (run->wr[i].status[b] == RUN_FAILED)
                snprintf(v, sizeof v, "FAILED");
            else if (ratio_vs_reference(run, &run->wr[i], b, &ratio) == 0)
                snprintf(v, sizeof v, "%.2fx", ratio);
            cell(out, st, v, 11, 0);
        }
        end_line(out, st);
    }
}

/* A peer, for the words under the summary: neither dpmalloc column. */
static int is_peer(const struct run *run, int b)
{
    return b != baseline_index(run) && run->be[b].kind != BACKEND_NATIVE_DPM &&
           run->be[b].kind != BACKEND_DPM_RTE;
}

/* Within 5 % either way is called even: the rounds of one cell often
 * spread that much. */
#define EVEN_BAND 0.05

/* Where dpmalloc (the preloaded library, the fair comparison) leads and
 * where it trails, worded from the ratios of this run. */
static void summary_words(FILE *out, const struct run *run, int markdown)
{
    const char *dash = markdown ? "- " : "  ";
    char lead[2048] = "", trail[2048] = "", even[1024] = "";
    size_t nl = 0, nt = 0, ne = 0;
    for (int i = 0; i < run->nwr; i++) {
        const struct workload_result *wr = &run->wr[i];
        int ref = reference_backend(run, wr), best = -1;
        double best_ratio = 0, ratio;
        if (ref < 0)
            continue;
        for (int b = 0; b < run->nbe; b++)
            if (is_peer(run, b) && ratio_vs_reference(run, wr, b, &ratio) == 0 &&
                (best < 0 || ratio < best_ratio)) {
                best = b;
                best_ratio = ratio;
            }
        if (best < 0)
            continue;
        if (best_ratio >= 1 + EVEN_BAND)
            nl += (size_t)snprintf(lead + nl, sizeof lead - nl, "%s%s (next: %s %.2fx)",
                                   nl ? ", " : "", wr->w->name, run->be[best].name, best_ratio);
        else if (best_ratio <= 1 - EVEN_BAND)
            nt += (size_t)snprintf(trail + nt, sizeof trail - nt, "%s%s (%s %.2fx)",
                                   nt ? ", " : "", wr->w->name, run->be[best].name, best_ratio);
        else
            ne += (size_t)snprintf(even + ne, sizeof even - ne, "%s%s (%s %.2fx)",
                                   ne ? ", " : "", wr->w->name, run->be[best].name, best_ratio);
        nl = nl < sizeof lead ? nl : sizeof lead - 1;
        nt = nt < sizeof trail ? nt : sizeof trail - 1;
        ne = ne < sizeof even ? ne : sizeof even - 1;
    }
    fprintf(out, "%sdpmalloc (dpm-preload) leads every peer in: %s\n", dash,
            nl ? lead : "none");
    fprintf(out, "%sdpmalloc (dpm-preload) trails the best peer in: %s\n", dash,
            nt ? trail : "none");
    fprintf(out, "%swithin %.0f %% of the best peer in: %s\n", dash, EVEN_BAND * 100,
            ne ? even : "none");
    int native = -1, n = 0;
    double sum_log = 0, ratio;
    for (int b = 0; b < run->nbe; b++)
        if (run->be[b].kind == BACKEND_NATIVE_DPM)
            native = b;
    for (int i = 0; native >= 0 && i < run->nwr; i++)
        if (reference_backend(run, &run->wr[i]) != native &&
            ratio_vs_reference(run, &run->wr[i], native, &ratio) == 0) {
            sum_log += log(ratio);
            n++;
        }
    if (n)
        fprintf(out, "%sthe native dpm_ API (dpmalloc, linked) against the preloaded library: "
                     "%.2fx over %d workloads (geometric mean; <1 = the native API is faster)\n",
                dash, exp(sum_log / n), n);
}

/* Workloads whose ratios are not against dpm-preload (it does not run
 * them, or was not selected): named under the summary. */
static void summary_other_references(FILE *out, const struct run *run, int markdown)
{
    int base = baseline_index(run);
    for (int i = 0; i < run->nwr; i++) {
        int ref = reference_backend(run, &run->wr[i]);
        if (ref >= 0 && ref != base)
            fprintf(out, "%s%s: against %s (dpm-preload %s)\n", markdown ? "- " : "  ",
                    run->wr[i].w->name, run->be[ref].name,
                    base < 0 ? "not selected" : "does not run it");
    }
}

void print_summary(FILE *out, const struct run *run)
{
    struct table_style st = {0, 16};
    fprintf(out, "\n== summary: time relative to dpm-preload (libdpmalloc.so preloaded, as every "
                 "peer is), geometric mean of each workload's timed rows (>1 = slower than "
                 "dpm-preload; dpmalloc = the native dpm_ API, linked)\n");
    summary_table(out, &st, run);
    summary_other_references(out, run, 0);
    summary_words(out, run, 0);
    if (run->loaded)
        print_load_warning(out, run, 0);
}

/* Other work on the machine shares the CPUs with the measured threads: the
 * figures then measure the scheduler as much as the allocator. */
void print_load_warning(FILE *out, const struct run *run, int markdown)
{
    fprintf(out, "%sWARNING%s: load average %.2f on %d CPUs, over half of them busy with other "
                 "work%s: these figures are unreliable; rerun on a quiet machine\n",
            markdown ? "> **" : "", markdown ? "**" : "", run->load_start, run->load_cpus,
            run->load_forced ? " (assumed: --assume-loaded)" : "");
}

/* ---- machine --------------------------------------------------------------- */

static void cpu_model(char *buf, size_t len)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256];
    snprintf(buf, len, "unknown");
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (colon && (!strncmp(line, "model name", 10) || !strncmp(line, "CPU part", 8))) {
            snprintf(buf, len, "%s", colon + 2);
            buf[strcspn(buf, "\n")] = 0;
            break;
        }
    }
    if (f)
        fclose(f);
}

void describe_machine(FILE *out, int markdown)
{
    struct utsname u;
    char cpu[160];
    const char *dash = markdown ? "- " : "  ";
    uname(&u);
    cpu_model(cpu, sizeof cpu);
    fprintf(out, "%sCPU: %s, %ld online CPUs (%d usable by this run)\n", dash, cpu,
            sysconf(_SC_NPROCESSORS_ONLN), allowed_cpu_count());
    fprintf(out, "%smemory: %.1f GiB; kernel %s %s %s\n", dash,
            (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE) / (1 << 30),
            u.sysname, u.release, u.machine);
    fprintf(out, "%sglibc %s; compiler %s\n", dash, libc_version(), __VERSION__);
    fprintf(out, "%sload average (1 min) when this was written: %.2f\n", dash, load_average());
    if (ticks_invariant() == 0)
        fprintf(out, "%sWARNING: the TSC is not invariant here (no constant_tsc/nonstop_tsc): "
                     "cycle counts may drift with frequency changes\n",
                dash);
}

/* ---- CSV ------------------------------------------------------------------- */

int write_csv(const struct run *run, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "workload,case,metric,unit,better,backend,status,median,min,max\n");
    for (int i = 0; i < run->nwr; i++) {
        const struct workload_result *wr = &run->wr[i];
        for (int k = 0; k < wr->nrows; k++)
            for (int b = 0; b < run->nbe; b++) {
                const struct metric_row *r = &wr->rows[k];
                if (!r->have[b])
                    continue;
                fprintf(f, "%s,\"%s\",\"%s\",%s,%c,%s,%s,%.6g,%.6g,%.6g\n", wr->w->name,
                        r->case_name, r->metric, r->unit, r->dir, run->be[b].name,
                        wr->status[b] == RUN_OK ? "ok" : "failed", r->med[b], r->min[b],
                        r->max[b]);
            }
    }
    return fclose(f);
}

/* ---- JSON ------------------------------------------------------------------ */

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

static const char *status_name(enum run_status s)
{
    return s == RUN_OK ? "ok" : s == RUN_FAILED ? "failed" : s == RUN_UNAVAILABLE ? "unavailable"
                                                                               : "not run";
}

static void json_backends(FILE *f, const struct run *run)
{
    fprintf(f, "  \"backends\": [\n");
    for (int b = 0; b < run->nbe; b++) {
        const struct backend_spec *s = &run->be[b];
        fprintf(f, "    {\"name\": ");
        json_string(f, s->name);
        fprintf(f, ", \"available\": %s, \"preload\": ", s->missing ? "false" : "true");
        json_string(f, s->preload ? s->preload : "");
        fprintf(f, ", \"missing\": ");
        json_string(f, s->missing ? s->missing : "");
        fprintf(f, ", \"version\": ");
        json_string(f, s->version);
        fprintf(f, "}%s\n", b + 1 < run->nbe ? "," : "");
    }
    fprintf(f, "  ],\n");
}

static void json_row(FILE *f, const struct run *run, const struct metric_row *r, int last)
{
    int first = 1;
    fprintf(f, "        {\"case\": ");
    json_string(f, r->case_name);
    fprintf(f, ", \"metric\": ");
    json_string(f, r->metric);
    fprintf(f, ", \"unit\": ");
    json_string(f, r->unit);
    fprintf(f, ", \"better\": \"%s\", \"values\": {",
            r->dir == 'L' ? "lower" : r->dir == 'H' ? "higher" : "info");
    for (int b = 0; b < run->nbe; b++) {
        if (!r->have[b])
            continue;
        if (!isfinite(r->med[b]) || !isfinite(r->min[b]) || !isfinite(r->max[b]))
            continue;
        fprintf(f, "%s\"%s\": {\"median\": %.6g, \"min\": %.6g, \"max\": %.6g}",
                first ? "" : ", ", run->be[b].name, r->med[b], r->min[b], r->max[b]);
        first = 0;
    }
    fprintf(f, "}}%s\n", last ? "" : ",");
}

static void json_workload(FILE *f, const struct run *run, const struct workload_result *wr,
                          int last)
{
    fprintf(f, "    {\"name\": ");
    json_string(f, wr->w->name);
    fprintf(f, ", \"description\": ");
    json_string(f, wr->w->what);
    int ref = reference_backend(run, wr);
    fprintf(f, ", \"baseline\": ");
    json_string(f, ref >= 0 ? run->be[ref].name : "");
    fprintf(f, ",\n      \"runs\": {");
    for (int b = 0; b < run->nbe; b++) {
        double ratio;
        fprintf(f, "%s\n        \"%s\": {\"status\": \"%s\", \"seconds\": %.3f, \"ratio_vs_baseline\": ",
                b ? "," : "", run->be[b].name, status_name(wr->status[b]), wr->seconds[b]);
        if (ratio_vs_reference(run, wr, b, &ratio) == 0)
            fprintf(f, "%.4f", ratio);
        else
            fprintf(f, "null");
        fprintf(f, ", \"why\": ");
        json_string(f, wr->why[b]);
        fprintf(f, ", \"notes\": ");
        json_string(f, wr->notes[b]);
        fprintf(f, "}");
    }
    fprintf(f, "},\n      \"results\": [\n");
    for (int k = 0; k < wr->nrows; k++)
        json_row(f, run, &wr->rows[k], k + 1 == wr->nrows);
    fprintf(f, "      ]}%s\n", last ? "" : ",");
}

static void json_machine(FILE *f)
{
    struct utsname u;
    char cpu[160];
    uname(&u);
    cpu_model(cpu, sizeof cpu);
    fprintf(f, "  \"machine\": {\"cpu\": ");
    json_string(f, cpu);
    fprintf(f, ", \"online_cpus\": %ld, \"usable_cpus\": %d, \"memory_bytes\": %.0f, "
               "\"kernel\": ",
            sysconf(_SC_NPROCESSORS_ONLN), allowed_cpu_count(),
            (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE));
    json_string(f, u.release);
    fprintf(f, ", \"arch\": ");
    json_string(f, u.machine);
    fprintf(f, ", \"glibc\": ");
    json_string(f, libc_version());
    fprintf(f, ", \"compiler\": ");
    json_string(f, __VERSION__);
    fprintf(f, ", \"load_average_end\": %.2f},\n", load_average());
}

int write_json(const struct run *run, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "{\n  \"program\": \"dpmbench\",\n  \"format\": 1,\n  \"mode\": \"%s\",\n",
            mode_name(run->mode));
    fprintf(f, "  \"started\": \"%s\",\n  \"rounds\": %d,\n  \"threads\": %d,\n", run->started,
            run->rounds, run->threads);
    fprintf(f, "  \"ticks_hz\": %.0f,\n  \"load_average\": %.2f,\n  \"load_cpus\": %d,\n"
               "  \"load_warning\": %s,\n  \"command\": ",
            run->tsc_hz, run->load_start, run->load_cpus, run->loaded ? "true" : "false");
    json_string(f, run->command);
    fprintf(f, ",\n");
    json_machine(f);
    json_backends(f, run);
    fprintf(f, "  \"workloads\": [\n");
    for (int i = 0; i < run->nwr; i++)
        json_workload(f, run, &run->wr[i], i + 1 == run->nwr);
    fprintf(f, "  ]\n}\n");
    return fclose(f);
}

/* ---- Markdown report ------------------------------------------------------- */

static const char *const plot_of[][2] = {
    {"frag", "frag.png"},       {"bulk", "bulk.png"},       {"nobulk", "nobulk.png"},
    {"realloc", "realloc.png"}, {"threads", "threads.png"}, {"tunnels", "tunnels.png"},
};

static void markdown_plot(FILE *f, const char *workload, const char *plot_dir)
{
    for (size_t i = 0; plot_dir && i < sizeof plot_of / sizeof plot_of[0]; i++)
        if (!strcmp(plot_of[i][0], workload))
            fprintf(f, "![%s](%s/%s)\n\n", workload, plot_dir, plot_of[i][1]);
}

#ifndef DPMBENCH_SOURCE_DIR
#define DPMBENCH_SOURCE_DIR ""
#endif

/* Paths inside the source tree are shown relative to it. */
static const char *display_path(const char *path)
{
    size_t len = strlen(DPMBENCH_SOURCE_DIR);
    if (len && !strncmp(path, DPMBENCH_SOURCE_DIR, len) && path[len] == '/')
        return path + len + 1;
    return path;
}

static void markdown_backends(FILE *f, const struct run *run)
{
    for (int b = 0; b < run->nbe; b++) {
        const struct backend_spec *s = &run->be[b];
        fprintf(f, "- **%s** %s: %s%s\n", s->name, s->version, s->missing ? "not measured, " : "",
                s->missing  ? s->missing
                : s->preload ? display_path(s->preload)
                : s->kind == BACKEND_NATIVE_DPM ? "dpm_ API, linked statically (dpmalloc_plain)"
                : s->kind == BACKEND_RTE ? "DPDK rte_malloc, EAL --no-huge -m 2048 --no-pci"
                : s->kind == BACKEND_DPM_RTE ? "dpmalloc's rte_malloc layer (dpm_rte_*, dpmalloc/rte_compat.h), linked; seed tables only"
                                         : "the system's malloc (LD_PRELOAD unset)");
    }
}

int write_markdown(const struct run *run, const char *path, const char *plot_dir)
{
    struct table_style st = {1, 0};
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "# dpmalloc benchmarks\n\n");
    fprintf(f, "Generated by `%s` (%s mode) on %s. Each cell is the median of up to %d rounds "
               "(fewer when a pair exceeds its time budget, as noted); min and max are in "
               "`results.json`/`results.csv`. Every round of every (workload, allocator) pair "
               "ran in a child process of its own, after a warm-up round in that child; peers "
               "were loaded with LD_PRELOAD, and the rounds ran round-major (each round runs every "
               "allocator once, in a rotating order). Ratios compare each allocator with "
               "dpm-preload, libdpmalloc.so loaded with LD_PRELOAD like every peer, in the same "
               "run (geometric mean of the timed rows; >1 = slower than dpm-preload); the "
               "dpmalloc column is the native dpm_ API, linked statically.\n\n",
            run->command, mode_name(run->mode), run->started, run->rounds);
    if (run->loaded) {
        print_load_warning(f, run, 1);
        fputs("\n", f);
    }
    fprintf(f, "## Machine\n\n");
    describe_machine(f, 1);
    fprintf(f, "- %d threads for multi-threaded workloads, ticks at %.3f GHz (calibrated "
               "against CLOCK_MONOTONIC)\n\n## Allocators\n\n", run->threads, run->tsc_hz / 1e9);
    markdown_backends(f, run);
    fprintf(f, "\n## Running it\n\n"
               "`make bench` (quick, a few minutes), `make bench-full` (the whole matrix), "
               "`make bench-docs` (full run, rewrites this page); run as root on Debian, each "
               "first apt-gets the missing peers, DPDK and gnuplot (`make bench-deps` does only "
               "that). The program is `build/bench/dpmbench`; "
               "`--workloads a,b`, `--backends a,b`, `--rounds N`, `--threads N`, `--budget S` "
               "narrow a run, `--list` shows what is available. Results go to "
               "`bench/results/<time>-<mode>/` (CSV, JSON, Markdown, PNG, gnuplot scripts). "
               "What stays resident (the `memory` workload) and real programs under the "
               "preload (`make bench-real`) are discussed in "
               "[benchmarks-memory.md](benchmarks-memory.md). Seed 000's tables (DPDK "
               "`rte_malloc`, dpmalloc's `rte_` layer and dpmalloc side by side) and seed 001's "
               "counters with per-core variables: [benchmarks-seed.md](benchmarks-seed.md) "
               "(`dpmbench --quick --workloads seed,seed-threads,counters --docs "
               "docs/benchmarks-seed.md`).\n");
    fprintf(f, "\n## Summary\n\nTime relative to dpm-preload (>1 = slower than "
               "dpm-preload).\n\n");
    summary_table(f, &st, run);
    fputs("\n", f);
    summary_other_references(f, run, 1);
    summary_words(f, run, 1);
    if (plot_dir)
        fprintf(f, "\n![time relative to dpm-preload](%s/summary.png)\n\n"
                   "![multi-threaded throughput](%s/mt-throughput.png)\n\n"
                   "![multi-threaded peak RSS](%s/mt-rss.png)\n",
                plot_dir, plot_dir, plot_dir);
    for (int i = 0; i < run->nwr; i++) {
        fprintf(f, "\n## %s\n\n%s.\n\n", run->wr[i].w->name, run->wr[i].w->what);
        markdown_plot(f, run->wr[i].w->name, plot_dir);
        render_table(f, &st, run, &run->wr[i]);
    }
    return fclose(f);
}
