/*
 * dpmbench.h - shared declarations of the dpmalloc benchmark program.
 *
 * The program has two halves. The parent (main.c) picks workloads and
 * backends, runs every (workload, backend) pair in a child process of its
 * own (LD_PRELOAD set for the peers) and reports. The child runs one
 * workload against one backend and writes tab-separated records to a pipe:
 *   P <round> <rounds>                         progress
 *   M <case> <metric> <unit> <dir> <med> <min> <max>   a measurement
 *   N <text>                                   a note on this backend (nearest
 *                                              equivalents)
 *   W <text>                                   a note on the workload itself
 *   E <text>                                   a failure
 * dir is L (lower is better), H (higher is better) or - (information only,
 * kept out of the ratio row).
 */
#ifndef DPMBENCH_H
#define DPMBENCH_H

#include <stddef.h>
#include <pthread.h>
#include <stdint.h>

/* ---- allocator backends (backends.c, backend_rte.c) ---------------------- */

/* One allocator as the workloads see it. Calls a backend lacks are mapped
 * onto the nearest equivalent and the `notes` field says how. */
struct backend {
    const char *name;
    void *(*alloc)(size_t size);
    void *(*alloc_aligned)(size_t size, size_t align);
    void *(*alloc_aligned_at)(size_t size, size_t align, size_t offset);
    void *(*realloc_aligned)(void *p, size_t size, size_t align);
    void (*free)(void *p);
    void (*free_sized)(void *p, size_t size);
    void (*free_aligned_at)(void *p, size_t align, size_t offset);
    /* plain realloc and the usable size of a block; NULL when the backend
     * has none (realloc then goes through realloc_aligned) */
    void *(*realloc)(void *p, size_t size);
    size_t (*usable_size)(void *p);
    /* give free memory back to the OS now (malloc_trim(0) or equivalent);
     * NULL when the backend has no such call */
    void (*trim)(void);
    /* NULL when native; else how the nearest equivalent works */
    const char *note_aligned_at, *note_realloc_aligned, *note_free_sized, *note_trim;
};

/* How a backend is run: natively in the child, or by preloading a library
 * into a child that uses the libc API. */
enum backend_kind { BACKEND_NATIVE_DPM, BACKEND_LIBC, BACKEND_RTE, BACKEND_DPM_RTE };

struct backend_spec {
    const char *name;        /* column name */
    enum backend_kind kind;
    const char *preload;     /* LD_PRELOAD path or NULL */
    const char *missing;     /* why it is unavailable, or NULL */
    char version[48];        /* package or library version when known */
    int opt_in;              /* runs only the workloads that name it */
};

#define MAX_BACKENDS 10
int discover_backends(struct backend_spec *out, int max, const char *dpm_preload);
const struct backend *backend_open(enum backend_kind kind);
void backend_close(enum backend_kind kind);
int rte_backend_available(void);
const struct backend *rte_backend_open(void);
void rte_backend_close(void);

/* ---- run mode and child context ------------------------------------------ */

enum run_mode { MODE_SMOKE, MODE_QUICK, MODE_FULL };

struct bench_ctx {
    const struct backend *be;
    enum backend_kind kind;
    const char *backend_name; /* the column this child measures */
    int program;         /* memory workload: the program this process runs, or -1 */
    enum run_mode mode;
    int rounds;          /* measured rounds after one warm-up */
    int threads;         /* threads for multi-threaded workloads */
    int result_fd;
    double tsc_hz;
    double budget_s;     /* wall time the rounds of one child may take */
    int round;           /* current round, -1 before the first */
    double started, round_started;
};

/* A workload: run() measures and emits records, returns 0 or exits on a
 * verification failure. */
struct workload {
    const char *name;
    const char *what;
    int (*run)(struct bench_ctx *ctx);
    /* runs its programs in fresh processes of its own and reports their
     * RSS itself: the child's process rows would describe only the driver */
    int own_processes;
    /* comma-separated backends it runs on; NULL: every backend but the
     * opt-in ones */
    const char *backends;
};

extern const struct workload workloads[];
extern const int workload_count;

int run_frag(struct bench_ctx *ctx);
struct samples;
/* One case of seed 000's single-thread loops (single.c; seed.c lays them
 * out as the report's table): bulk (n allocs timed together, then n frees),
 * no-bulk (alloc, fill, 5 us wait, free; ns per alloc+free), realloc
 * (alloc s, realloc 2s, realloc 4s, free; ns per iteration). Contents and
 * alignment are checked outside the timed spans. */
void bulk_one(const struct backend *be, size_t size, size_t align, int n, void **blocks,
              struct samples *alloc_ns, struct samples *free_ns);
double nobulk_one(const struct backend *be, size_t size, size_t align, int n);
double realloc_one(const struct backend *be, size_t size, size_t align, int n);
int run_bulk(struct bench_ctx *ctx);
int run_nobulk(struct bench_ctx *ctx);
int run_realloc(struct bench_ctx *ctx);
int run_threads(struct bench_ctx *ctx);
int run_counters(struct bench_ctx *ctx);
int run_tunnels(struct bench_ctx *ctx);
int run_larson(struct bench_ctx *ctx);
int run_prodcons(struct bench_ctx *ctx);
int run_cache_scratch(struct bench_ctx *ctx);
int run_cache_thrash(struct bench_ctx *ctx);
int run_churn(struct bench_ctx *ctx);
int run_contention(struct bench_ctx *ctx);
int run_memory(struct bench_ctx *ctx);
int run_memory_program(struct bench_ctx *ctx);
int run_seed_single(struct bench_ctx *ctx);
int run_seed_threads(struct bench_ctx *ctx);

/* ---- time, CPUs, process usage (sys.c) ------------------------------------ */

double calibrate_ticks_hz(void);
double now_seconds(void);
void set_ticks_hz(double hz);
double ticks_to_ns(uint64_t t);
uint64_t ns_to_ticks(double ns);
void busy_wait_ticks(uint64_t t);
int allowed_cpu_count(void);
int pin_to_cpu_index(int index);
long minor_faults(void);
void reset_peak_rss(void);
long rss_kb(const char *field); /* "VmRSS" or "VmHWM" */
double statm_rss_mib(void);     /* resident pages from /proc/self/statm */
uint64_t rng_next(uint64_t *state);
const char *libc_version(void);
int ticks_invariant(void);
uint64_t tick_overhead(void);
uint64_t ticks_fallback(void);
uint64_t ticks_between(uint64_t start, uint64_t end);
int scaled(const struct bench_ctx *ctx, int full, int quick, int smoke);

#if defined(__x86_64__) || defined(__i386__)
static inline uint64_t ticks(void)
{
    uint32_t lo, hi;
    __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
}
#elif defined(__aarch64__)
static inline uint64_t ticks(void)
{
    uint64_t v;
    __asm__ __volatile__("isb; mrs %0, cntvct_el0" : "=r"(v));
    return v;
}
#else
static inline uint64_t ticks(void) { return ticks_fallback(); }
#endif

/* ---- samples and emission (emit.c) ----------------------------------------- */

#define MAX_SAMPLES 256

/* Values of one measurement, each tagged with its round. Round 0 is the
 * warm-up: its values count only when no later round ran. */
struct samples {
    int n;
    double v[MAX_SAMPLES];
    int round[MAX_SAMPLES];
};

/* The round loop of every workload: while (another_round(ctx)) { ... }.
 * Runs the warm-up and ctx->rounds measured rounds, fewer when the child's
 * time budget would be exceeded (then a note says so). */
int another_round(struct bench_ctx *ctx);

void samples_add(struct samples *s, double v);
double samples_median(const struct samples *s);
double samples_min(const struct samples *s);
double samples_max(const struct samples *s);

void emit_progress(struct bench_ctx *ctx, int round, int rounds);
void emit_metric(struct bench_ctx *ctx, const char *case_name, const char *metric,
                 const char *unit, char dir, const struct samples *s);
void emit_value(struct bench_ctx *ctx, const char *case_name, const char *metric,
                const char *unit, char dir, double v);
void emit_note(struct bench_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void emit_workload_note(struct bench_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- result checks (verify.c): a wrong answer exits the child loudly ------ */

void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void *must_alloc(void *p, size_t size, size_t align, size_t offset);
void check_alignment(const void *p, size_t align, size_t offset, const char *where);
void stamp_block(void *p, size_t size, uint64_t seed);
void check_stamp(const void *p, size_t size, uint64_t seed, const char *where);
void fill_block(void *p, size_t size, uint64_t seed);
void check_fill(const void *p, size_t size, uint64_t seed, const char *where);

/* ---- helpers for multi-threaded workloads (team.c) ------------------------- */

/* Every per-thread argument struct starts with a member. run_team pins
 * thread i to the i-th allowed CPU, starts all bodies together and returns
 * the wall time from the first start to the last end. */
struct member {
    int index;
    double begin, end;
};

struct thread_team {
    int count;
    void (*body)(struct member *m);
    void *args;          /* array of count structs, each starting with a member */
    size_t arg_size;
};

double run_team(const struct thread_team *team);

/* ---- a blocking queue of pointer batches between two threads (handoff.c) -- */

#define HANDOFF_BATCH 64
#define HANDOFF_DEPTH 16

struct handoff {
    pthread_mutex_t lock;
    pthread_cond_t filled, drained;
    unsigned head, tail;         /* batches queued, batches taken */
    int closed;
    int count[HANDOFF_DEPTH];
    void *batch[HANDOFF_DEPTH][HANDOFF_BATCH];
};

void handoff_init(struct handoff *h);
void handoff_destroy(struct handoff *h);
void handoff_put(struct handoff *h, void *const *p, int n);
void handoff_close(struct handoff *h);
int handoff_get(struct handoff *h, void **out);

#endif
