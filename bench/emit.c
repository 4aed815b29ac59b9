/*
 * emit.c - the child's side of the result pipe: samples (median, min, max)
 * and the tab-separated records the parent parses (format in dpmbench.h).
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dpmbench.h"

static int current_round;

int another_round(struct bench_ctx *ctx)
{
    double now = now_seconds();
    if (ctx->round < 0) {
        ctx->started = now;
    } else {
        double last = now - ctx->round_started, spent = now - ctx->started;
        if (ctx->round >= ctx->rounds)
            return 0;
        if (ctx->round == 0 && last > ctx->budget_s / 2) {
            emit_note(ctx, "warm-up round over half the time budget: it is the only "
                                    "round measured");
            return 0;
        }
        if (ctx->round > 0 && spent + last > ctx->budget_s) {
            emit_note(ctx, "rounds cut to %d by the %.0f s time budget", ctx->round,
                               ctx->budget_s);
            return 0;
        }
    }
    ctx->round++;
    current_round = ctx->round;
    ctx->round_started = now;
    emit_progress(ctx, ctx->round, ctx->rounds);
    return 1;
}

void samples_add(struct samples *s, double v)
{
    if (s->n < MAX_SAMPLES) {
        s->round[s->n] = current_round;
        s->v[s->n++] = v;
    }
}

/* The values that count: measured rounds, or the warm-up if it was alone. */
static int counted_values(const struct samples *s, double *out)
{
    int measured = 0, n = 0;
    for (int i = 0; i < s->n; i++)
        measured |= s->round[i] > 0;
    for (int i = 0; i < s->n; i++)
        if (s->round[i] > 0 || !measured)
            out[n++] = s->v[i];
    return n;
}

static int sorted_values(const struct samples *s, double *v)
{
    int n = counted_values(s, v);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n;
}

double samples_median(const struct samples *s)
{
    double v[MAX_SAMPLES];
    int n = sorted_values(s, v);
    if (n == 0)
        return 0;
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double samples_min(const struct samples *s)
{
    double v[MAX_SAMPLES];
    return sorted_values(s, v) ? v[0] : 0;
}

double samples_max(const struct samples *s)
{
    double v[MAX_SAMPLES];
    int n = sorted_values(s, v);
    return n ? v[n - 1] : 0;
}

static void write_record(struct bench_ctx *ctx, const char *line)
{
    size_t len = strlen(line);
    while (len > 0) {
        ssize_t w = write(ctx->result_fd, line, len);
        if (w <= 0)
            return;
        line += w;
        len -= (size_t)w;
    }
}

void emit_progress(struct bench_ctx *ctx, int round, int rounds)
{
    char line[64];
    snprintf(line, sizeof line, "P\t%d\t%d\n", round, rounds);
    write_record(ctx, line);
}

/* Names travel in tab-separated records and end up in CSV cells: tabs,
 * commas and quotes become spaces. */
static void clean_name(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s", name);
    for (char *c = out; *c; c++)
        if (*c == '\t' || *c == ',' || *c == '"' || *c == '\n')
            *c = ' ';
}

void emit_metric(struct bench_ctx *ctx, const char *case_name, const char *metric,
                 const char *unit, char dir, const struct samples *s)
{
    char line[512], c[48], m[24];
    clean_name(c, sizeof c, case_name);
    clean_name(m, sizeof m, metric);
    snprintf(line, sizeof line, "M\t%s\t%s\t%s\t%c\t%.6g\t%.6g\t%.6g\n", c, m, unit, dir,
             samples_median(s), samples_min(s), samples_max(s));
    write_record(ctx, line);
}

void emit_value(struct bench_ctx *ctx, const char *case_name, const char *metric,
                const char *unit, char dir, double v)
{
    struct samples s = {0};
    samples_add(&s, v);
    emit_metric(ctx, case_name, metric, unit, dir, &s);
}

static void note_record(struct bench_ctx *ctx, char kind, const char *fmt, va_list ap)
{
    char text[400], line[420];
    vsnprintf(text, sizeof text, fmt, ap);
    for (char *c = text; *c; c++)
        if (*c == '\n' || *c == '\t')
            *c = ' ';
    snprintf(line, sizeof line, "%c\t%s\n", kind, text);
    write_record(ctx, line);
}

void emit_note(struct bench_ctx *ctx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    note_record(ctx, 'N', fmt, ap);
    va_end(ap);
}

void emit_workload_note(struct bench_ctx *ctx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    note_record(ctx, 'W', fmt, ap);
    va_end(ap);
}
