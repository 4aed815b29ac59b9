/*
 * review.h - what the standalone review reproductions share: resident
 * memory from /proc/self/statm, and dpmalloc's statistics through a weak
 * dpm_ctl, so that each program also builds and runs (reporting 0 for the
 * statistics) under any other allocator. Each program still builds alone:
 * cc -Itests/review ... (see its header comment).
 */
#ifndef DPM_REVIEW_H
#define DPM_REVIEW_H

#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "rss.h"

int dpm_ctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen) __attribute__((weak));


/* A size_t statistic ("stats.mapped", ...) after an epoch refresh, in MiB;
 * 0 without dpmalloc. */
static inline double stat_mib(const char *name)
{
    if (!dpm_ctl)
        return 0;
    uint64_t e = 1;
    size_t l = sizeof(e), v = 0;
    dpm_ctl("epoch", &e, &l, &e, sizeof(e));
    l = sizeof(v);
    if (dpm_ctl(name, &v, &l, NULL, 0) != 0)
        return 0;
    return (double)v / 1048576.0;
}

#endif
