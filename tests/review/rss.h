/*
 * rss.h - the calling process's resident memory in MiB, from
 * /proc/self/statm (for tests and review programs that measure it).
 */
#ifndef DPM_REVIEW_RSS_H
#define DPM_REVIEW_RSS_H

#include <stdio.h>
#include <unistd.h>

static inline double rss_mib(void)
{
    long a = 0, b = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f != NULL) {
        if (fscanf(f, "%ld %ld", &a, &b) != 2)
            b = 0;
        fclose(f);
    }
    return (double)b * (double)sysconf(_SC_PAGESIZE) / 1048576.0;
}

#endif
