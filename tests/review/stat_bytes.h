/*
 * stat_bytes.h - a size_t statistic ("stats.active", ...) after an epoch
 * refresh, for review programs linked with dpmalloc itself (review.h's
 * weak dpm_ctl is for programs that also run under other allocators).
 */
#ifndef DPM_REVIEW_STAT_BYTES_H
#define DPM_REVIEW_STAT_BYTES_H

#include <dpmalloc.h>
#include <stdint.h>

static inline size_t stat_bytes(const char *name)
{
    uint64_t e = 1;
    size_t l = sizeof e;
    dpm_ctl("epoch", &e, &l, &e, sizeof e);
    size_t v = 0;
    l = sizeof v;
    dpm_ctl(name, &v, &l, NULL, 0);
    return v;
}

#endif
