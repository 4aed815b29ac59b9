/*
 * conf.h - run-time options. One table lists every key with its type,
 * bounds and default; DPMALLOC_CONF, a compiled-in default string and an
 * application-defined `dpm_conf` string are parsed against it once, before
 * the first allocation is served. Unknown keys and bad values get one
 * warning line on stderr and leave the default in place.
 *
 * Owns: the opt struct. May call: error (warnings), getenv.
 */
#ifndef DPM_CONF_H
#define DPM_CONF_H

#include "sizeclass.h"

enum thp_mode { THP_DEFAULT = 0, THP_ALWAYS = 1, THP_NEVER = 2 };

/* The first line holds what the slow paths of malloc, realloc and free
 * read (the large ones run with a cold cache: one line, one miss). */
typedef struct dpm_opts {
    bool junk;
    bool zero;
    bool secure;                      /* hardened: no caching, every check at once */
    size_t guard_sample;              /* about 1 allocation in this many from a guarded slot (0: off) */
    bool stats_cycles;                /* sample cycles of slow-path calls */
    bool tcache;
    unsigned narenas;                 /* 0: 4 per CPU; at most OPT_NARENAS_MAX */
    size_t tcache_max;
    size_t tcache_large_bytes;        /* bytes in one CPU's large cache */
    size_t oversize_threshold;        /* freed blocks this big are purged at once */
    unsigned tcache_nslots_small_min;
    unsigned tcache_nslots_small_max;
    unsigned tcache_nslots_large;     /* blocks in one CPU's large cache */
    unsigned lg_tcache_nslots_mul;
    int64_t dirty_decay_ms;
    int64_t muzzy_decay_ms;
    bool background_thread;
    /* background_thread was not given: the thread starts once the process
     * has a second thread (background_request_when_threaded). */
    bool background_thread_auto;
    bool stats_print;
    char stats_print_opts[32];
    bool hugepages;                   /* segments from explicit huge pages */
    unsigned lg_hugepage;             /* their size: 21 (2 MiB) or 30 (1 GiB, hugepages:1g) */
    unsigned thp;
    bool numa;                        /* threads take their node's arena */
    size_t reserve_mb;                /* dpm_reserve at init (MiB) */
    bool percpu;                      /* caches per CPU on rseq where they work */
    size_t percpu_bytes;              /* small blocks a CPU's cache may hold */
    uint32_t slab_pages[NSMALL];      /* 0: default shape */
    char slab_sizes[256];             /* as given, for opt.slab_sizes */
    unsigned pcv_slots;               /* per-core variable slots; 0: automatic */
    size_t pcv_size;                  /* bytes of per-core variables per slot */
    /* heap profiling (prof.h), with jemalloc's names */
    bool prof;                        /* sample allocations with their stacks */
    bool prof_active;                 /* sampling at start (prof.active at run time) */
    bool prof_final;                  /* dump a profile at exit */
    bool prof_leak;                   /* report what is still allocated at exit */
    size_t lg_prof_sample;            /* about one sample per 2^this bytes (jemalloc: size_t) */
    char prof_prefix[256];            /* dump files: <prefix>.<pid>.<seq>.<kind>.heap */
    size_t memory_limit_mb;           /* hard memory limit at init (memlimit.h); 0: none */
    size_t memory_soft_limit_mb;      /* soft memory limit at init; 0: none */
} CACHE_ALIGNED dpm_opts_t;

extern dpm_opts_t opt;

/* The most automatic arenas (narenas, mallopt M_ARENA_MAX, 4 per CPU):
 * the arena table's slots above them (MAX_ARENAS, arena.h) are left to
 * manual and NUMA node arenas. */
#define OPT_NARENAS_MAX 3072

/* Defaults, then the compiled-in string, dpm_conf, malloc_conf and
 * MALLOC_CONF (conf_jemalloc.c), DPMALLOC_CONF. */
void conf_init(void);
/* getenv(name), but NULL when the program runs with more privileges than
 * its invoker (AT_SECURE: setuid, setgid, file capabilities). For every
 * variable that steers dpmalloc (DPMALLOC_CONF, DPMALLOC_SYSFS_ROOT). */
const char *conf_secure_getenv(const char *name);
/* Parses one "k:v,k:v" string into opt; returns the number of errors.
 * Exposed for tests. */
int conf_parse(const char *conf);

/* jemalloc's dialect (conf_jemalloc.c): the next item of a MALLOC_CONF
 * string at *cursor (advanced past it) translated into dpmalloc's
 * "key:value" in out ("" for an empty item, or a name dpmalloc has not,
 * which was warned about); false at the string's end (cursor NULL too).
 * conf_jemalloc_program: the program's malloc_conf, or NULL. */
bool conf_jemalloc_item(const char **cursor, char *out, size_t room);
const char *conf_jemalloc_program(void);

/* Description of one option for ctl and docs: name, and how to print it. */
typedef enum { OPT_BOOL, OPT_UNSIGNED, OPT_SIZE, OPT_SSIZE, OPT_STRING } opt_type_t;
typedef struct opt_desc {
    const char *name;
    opt_type_t type;
    void *value;
    int64_t min, max;
} opt_desc_t;
extern const opt_desc_t opt_table[];
extern const unsigned opt_table_len;

#endif
