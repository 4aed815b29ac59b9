/*
 * fuzz.h - dpmalloc's randomized operation fuzzer, shared declarations.
 *
 * Threads run random sequences of every allocation entry point on blocks
 * they track (fuzz.c runs them in phases, ops.c is the operation table,
 * pattern.c fills and checks block contents, exchange.c hands blocks to
 * other threads). Built twice: FUZZ_LIBC=1 links the libc-overriding
 * library and also drives malloc & co.; FUZZ_LIBC=0 drives only the dpm_
 * API against dpmalloc_plain (the sanitizer builds).
 */
#ifndef DPM_FUZZ_H
#define DPM_FUZZ_H

#include <dpmalloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifndef FUZZ_LIBC
#define FUZZ_LIBC 0
#endif

/* ---- blocks ------------------------------------------------------------ */

/* How a block may be freed with a size (C23 free_sized rules). */
enum blk_family {
    FAM_LIBC,      /* malloc, calloc, realloc: free_sized(p, size) is correct */
    FAM_LIBC_AL,   /* aligned_alloc & co.: free_aligned_sized(p, align, size) */
    FAM_DPM,       /* dpm_ calls: dpm_free_sized(p, size) (any dpm_ block) */
};

#define ARENA_AUTO (-1)

typedef struct blk {
    unsigned char *p;
    size_t size;      /* bytes requested: the pattern covers them */
    size_t align;     /* alignment asked for (1: none beyond the default) */
    int arena;        /* ARENA_AUTO or the index of a manual arena */
    uint8_t family;   /* enum blk_family */
    const char *origin;  /* the call that returned it (failure reports) */
} blk_t;

/* ---- run configuration ------------------------------------------------- */

/* Known defects the fuzzer can step around (--avoid NAME[,NAME]). */
enum {
    AVOID_FOREIGN_MANUAL = 1u << 0,  /* "foreign-manual-free": a thread bound to a manual
                                        arena frees no block of another manual arena */
    AVOID_SIZED_SLACK = 1u << 1,     /* "sized-slack": no sized free of a block whose usable
                                        size is 4 times its size or more (secure mode
                                        misreads such sizes as wrong) */
};

typedef struct fuzz_conf {
    uint64_t seed;
    unsigned nthreads;
    unsigned ops;          /* per thread per phase */
    unsigned max_phases;   /* 0: until the time limit */
    double seconds;
    bool fork;
    unsigned avoid;        /* AVOID_* */
    size_t budget;         /* live bytes per thread */
} fuzz_conf_t;

extern fuzz_conf_t conf;

/* ---- threads ------------------------------------------------------------ */

enum op_kind {
    OP_MALLOC, OP_CALLOC, OP_REALLOC, OP_FREE, OP_FREE_SIZED, OP_POSIX_MEMALIGN,
    OP_ALIGNED_ALLOC, OP_MEMALIGN, OP_VALLOC, OP_USABLE,
    OP_DPM_MALLOC, OP_DPM_CALLOC, OP_DPM_REALLOC, OP_DPM_FREE, OP_DPM_FREE_SIZED,
    OP_DPM_ALIGNED, OP_DPM_ALIGNED_AT, OP_DPM_ZALLOC_ALIGNED, OP_DPM_REALLOC_ALIGNED,
    OP_DPM_TYPED, OP_DPM_ZMALLOC_TYPED, OP_DPM_CALLOC_TYPED, OP_DPM_REALLOC_TYPED,
    OP_DPM_ARENA, OP_DPM_USABLE, OP_GIVE, OP_TAKE, OP_CHECK,
    OP_NKINDS
};

#define FT_MAX_BLOCKS 2048

typedef struct fthread {
    unsigned id;
    uint64_t rng;
    pthread_t th;
    blk_t blk[FT_MAX_BLOCKS];
    unsigned nblk;
    size_t live;             /* requested bytes of the tracked blocks */
    unsigned auto_arena;     /* the automatic arena the thread started on */
    int bound;               /* ARENA_AUTO or the manual arena it is bound to */
    bool tcache_off;         /* thread.tcache.enabled false for this phase */
    unsigned phase;
    uint64_t opno;           /* operation number within the phase */
    const char *op;          /* the operation running (failure reports) */
    blk_t cur;               /* the block it last checked (before a free or realloc) */
    bool in_child;           /* the fork child's burst */
    uint64_t count[OP_NKINDS];
    uint64_t bytes;          /* bytes requested by allocations */
    uint64_t forks;
} fthread_t;

/* The arenas usable in the running phase (set between phases). */
#define FUZZ_MAX_MANUAL 8
typedef struct arena_plan {
    unsigned nauto;
    unsigned nmanual;
    unsigned manual[FUZZ_MAX_MANUAL];
} arena_plan_t;

extern arena_plan_t plan;

/* ---- failure ------------------------------------------------------------ */

/* Prints "fuzz: FAILED seed=..." with the thread's position and the
 * command that reproduces the run, then exits with status 1. */
__attribute__((noreturn, format(printf, 2, 3))) void fuzz_fail(const fthread_t *t, const char *fmt, ...);

/* ---- random numbers ----------------------------------------------------- */

static inline uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
/* Uniform in [0, n); n > 0. */
static inline uint64_t rnd_below(uint64_t *s, uint64_t n) { return rnd(s) % n; }
/* True with probability num/den. */
static inline bool rnd_chance(uint64_t *s, unsigned num, unsigned den) { return rnd_below(s, den) < num; }

/* ---- pattern.c ---------------------------------------------------------- */

/* Blocks up to this size are filled and checked whole; bigger ones in
 * windows: head, tail and a stamp in every stride (see pattern.c). */
#define PAT_FULL_MAX ((size_t)64 << 10)

/* Fills the checked windows of (p, size) with the pattern of (p, size). */
void pat_fill(unsigned char *p, size_t size);
/* Offset of the first byte in the checked windows of (key, size) within
 * [0, limit) that differs from the pattern of (key, size) when read at
 * at; SIZE_MAX if none. Reading at another address than key checks a
 * moved prefix (realloc). */
size_t pat_check(const unsigned char *at, const unsigned char *key, size_t size, size_t limit,
                 unsigned char *want, unsigned char *got);
/* Offset of the first nonzero byte in the checked windows, SIZE_MAX if none. */
size_t pat_check_zero(const unsigned char *p, size_t size, unsigned char *got);
/* Checks the whole block's pattern, failing the run on a mismatch. */
void blk_verify(fthread_t *t, const blk_t *b, const char *when);

/* ---- exchange.c --------------------------------------------------------- */

void xchg_init(void);
/* Puts b into a random slot; if the slot held a block, it is returned in
 * *out (true). */
bool xchg_give(uint64_t *rng, const blk_t *b, blk_t *out);
/* Takes the block of a random slot into *out; false if the slot is empty. */
bool xchg_take(uint64_t *rng, blk_t *out);
/* Between phases (no thread running): calls fn on every block held, and
 * drops those for which fn returns true. */
void xchg_sweep(bool (*fn)(blk_t *b, void *arg), void *arg);

/* ---- ops.c -------------------------------------------------------------- */

extern const char *const op_names[OP_NKINDS];
/* Before the threads start. */
void ops_init(void);
/* One random operation. */
void op_random(fthread_t *t);
/* A random block of t's table that t may free or move (see --avoid), or -1. */
int pick_release(fthread_t *t);
/* Frees block i of t (swapping the last one into its place). */
void blk_release(fthread_t *t, unsigned i);
/* Frees a block that is not in any table (exchange sweep, child). */
void blk_free_any(fthread_t *t, blk_t *b);
/* Mallocs/reallocs/frees in a tight loop with checks (the fork child). */
void op_burst(fthread_t *t, unsigned n);
/* Runs "debug.check_heap" and fails on a violation. */
void fuzz_check_heap(fthread_t *t, const char *when);
/* The arena a block belongs to by "arenas.lookup": ARENA_AUTO for an
 * automatic one. */
int arena_of(fthread_t *t, const void *p);

#endif
