/*
 * output.c - where a run's files go: the results directory with its
 * latest-<mode> link, CSV, JSON, plots and report.md, and the --docs copy
 * (Markdown plus PNGs) for docs/benchmarks.md.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "results.h"

void make_outdir(struct run *run, const char *root)
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
                                       "mt-rss",  "summary"};
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
    fprintf(stderr, "dpmbench: wrote %s%s%s\n", docs, plots ? ", plots in " : " (no plots)",
            plots ? plotdir : "");
}

void write_outputs(const struct options *o, struct run *run)
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
    fprintf(stderr,
            "dpmbench: results in %s (results.csv, results.json, report.md, %d PNG plots), "
            "linked as %s/latest-%s\n",
            run->outdir, plots, o->out_root, mode_name(run->mode));
    if (o->docs)
        write_docs(run, o->docs, plots > 0);
}
