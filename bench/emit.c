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

void samples_add(struct samples *s, double v)
{
    if (s->n < MAX_SAMPLES)
        s->v[s->n++] = v;
}

static void sorted_copy(const struct samples *s, double *out)
{
    memcpy(out, s->v, sizeof(double) * (size_t)s->n);
    for (int i = 1; i < s->n; i++)
        for (int j = i; j > 0 && out[j] < out[j - 1]; j--) {
            double t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
}

double samples_median(const struct samples *s)
{
    double v[MAX_SAMPLES];
    if (s->n == 0)
        return 0;
    sorted_copy(s, v);
    return s->n % 2 ? v[s->n / 2] : (v[s->n / 2 - 1] + v[s->n / 2]) / 2;
}

double samples_min(const struct samples *s)
{
    double m = s->n ? s->v[0] : 0;
    for (int i = 1; i < s->n; i++)
        m = s->v[i] < m ? s->v[i] : m;
    return m;
}

double samples_max(const struct samples *s)
{
    double m = s->n ? s->v[0] : 0;
    for (int i = 1; i < s->n; i++)
        m = s->v[i] > m ? s->v[i] : m;
    return m;
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

void emit_note(struct bench_ctx *ctx, const char *fmt, ...)
{
    char text[400], line[420];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    for (char *c = text; *c; c++)
        if (*c == '\n' || *c == '\t')
            *c = ' ';
    snprintf(line, sizeof line, "N\t%s\n", text);
    write_record(ctx, line);
}
