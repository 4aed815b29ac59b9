/*
 * cpu_held.h - what the review programs that catch a CPU cache while it is
 * held (r28_signal_held.c, r29_fork_child_waiting.c) share: pinning a
 * thread to one CPU, skipping (exit 77) unless the CPU caches are the
 * front end, and reading the static library's cpu_cache_table /
 * cpu_cache_locked (cpu_cache.h) to tell when a CPU's cache is locked;
 * and reading the mode argument that picks one of a program's two
 * scenarios.
 * Include it after defining _GNU_SOURCE (for CPU_SET and
 * pthread_setaffinity_np).
 */
#ifndef DPM_REVIEW_CPU_HELD_H
#define DPM_REVIEW_CPU_HELD_H

#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

int dpm_ctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);
/* not in the public headers: the programs link the static library to see
 * whether a CPU's table entry is the "locked" marker */
extern void *cpu_cache_table[1024];
extern char cpu_cache_locked[];

/* argv[1] picks the scenario: 0 for mode a, 1 for mode b; else prints the
 * usage (rest names the optional second argument) and returns -1 */
static inline int mode_arg(int argc, char **argv, const char *a, const char *b, const char *rest)
{
    if (argc > 1 && strcmp(argv[1], a) == 0)
        return 0;
    if (argc > 1 && strcmp(argv[1], b) == 0)
        return 1;
    fprintf(stderr, "usage: %s %s|%s [%s]\n", argv[0], a, b, rest);
    return -1;
}

/* pins the calling thread to cpu; nonzero when it cannot run there */
static inline int pin(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    return pthread_setaffinity_np(pthread_self(), sizeof(s), &s);
}

/* 1 when the CPU caches are the front end; else says "skip: ..." and
 * returns 0 (the caller exits 77: the scenarios need the CPU caches) */
static inline int cpu_front_end(void)
{
    const char *fe = "";
    size_t l = sizeof(fe);
    if (dpm_ctl("stats.front_end", &fe, &l, NULL, 0) != 0 || strcmp(fe, "cpu") != 0) {
        printf("skip: front end %s\n", fe);
        return 0;
    }
    return 1;
}

/* whether cpu's cache is locked (its table entry is the marker); safe in
 * a signal handler */
static inline int cpu_cache_held(int cpu)
{
    return __atomic_load_n(&cpu_cache_table[cpu], __ATOMIC_SEQ_CST) == (void *)cpu_cache_locked;
}

#endif
