/*
 * prof.c - heap profiling (prof.h). Three parts: the sampler (a byte
 * countdown per thread, drawn from an exponential distribution so that
 * every byte has the same chance to be the sampled one), the tables (one
 * record per distinct stack with its estimates, one per live sampled
 * block, both in memory of their own under one lock that no user code
 * and no other allocator lock is ever taken under), and the writers (the
 * pprof profile.proto encoder in a stored-deflate gzip member, and the
 * leak summary at exit).
 *
 * Estimates: a block of s bytes is sampled with probability
 * p = 1 - exp(-s / R), R = 2^lg_prof_sample, so each sample stands for
 * 1/p blocks and s/p bytes (unbiased, as pprof expects of a heap profile).
 */
#include "prof.h"

#include "anchor_ref.h"
#include "conf.h"
#include "error.h"
#include "mutex.h"
#include "os.h"
#include "util.h"

#include <dpmalloc.h>
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PROF_DEPTH 64           /* frames kept of a stack */
#define STACK_BUCKETS 16384
#define BLOCK_BUCKETS 16384
#define TABLE_RESERVE ((size_t)256 << 20)   /* address space for the records */
#define COMMIT_STEP ((size_t)1 << 20)

typedef struct stack_rec {
    struct stack_rec *next_in_bucket, *next_all;
    uint64_t hash;
    uint32_t depth;
    uint64_t live_samples, total_samples;
    double live_count, live_bytes, alloc_count, alloc_bytes;
    uintptr_t frames[];
} stack_rec_t;

typedef struct block_rec {
    struct block_rec *next;
    uintptr_t addr;
    stack_rec_t *stack;
    double count, bytes;       /* what this sample added to its stack's live estimates */
} block_rec_t;

bool prof_on;
static bool active;
static double mean_bytes;       /* 2^lg_prof_sample */
static dpm_mutex_t prof_lock;
static stack_rec_t **stack_buckets;
static block_rec_t **block_buckets;
static stack_rec_t *all_stacks;
static size_t nstacks;
static block_rec_t *free_blocks;
static char *table_base;        /* bump area after the buckets */
static size_t table_used, table_committed;
static uint64_t samples_total, samples_live, samples_dropped;
static uint64_t dump_seq;       /* the <seq> of file names, per process */
static uint64_t seed_counter;

__thread int64_t prof_countdown;
static __thread bool countdown_started;
static __thread uint64_t rng_state;
static __thread bool inside;     /* sampling on this thread (backtrace may allocate) */

/* the allocator's own code, trimmed from stacks (a shared object apart
 * from the program; linked statically, pprof's drop_frames does it) */
static uintptr_t own_lo[4], own_hi[4];
static unsigned own_ranges;

/* ---- arithmetic without libm ------------------------------------------- */

/* e^x for x <= 0 (0 below -700): x = k ln2 + r, |r| <= ln2/2. */
static double exp_nonpositive(double x)
{
    if (x < -700.0)
        return 0.0;
    const double ln2 = 0.69314718055994530942;
    int k = (int)(x / ln2 - 0.5);
    double r = x - k * ln2, term = 1.0, sum = 1.0;
    for (int i = 1; i < 20; i++) {
        term *= r / i;
        sum += term;
    }
    for (; k < 0; k++)
        sum *= 0.5;
    return sum;
}

/* ln(u) for 0 < u <= 1: u = m 2^e with m in [1, 2), ln m by atanh's series. */
static double ln_unit(double u)
{
    uint64_t bits;
    memcpy(&bits, &u, sizeof bits);
    int e = (int)((bits >> 52) & 0x7ff) - 1023;
    bits = (bits & ((UINT64_C(1) << 52) - 1)) | (UINT64_C(1023) << 52);
    double m;
    memcpy(&m, &bits, sizeof m);
    double z = (m - 1.0) / (m + 1.0), z2 = z * z, term = z, sum = 0.0;
    for (int i = 1; i < 40; i += 2) {
        sum += term / i;
        term *= z2;
    }
    return 2.0 * sum + e * 0.69314718055994530942;
}

static uint64_t next_random(void)
{
    if (rng_state == 0)
        rng_state = ((uint64_t)(uintptr_t)&rng_state ^ __atomic_add_fetch(&seed_counter, 1, __ATOMIC_RELAXED) *
                                                            0x9e3779b97f4a7c15u) | 1;
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    rng_state = x;
    return x * 0x2545f4914f6cdd1du;
}

/* Bytes to the next sample: exponential with mean R, at least 1. */
static int64_t next_gap(void)
{
    double u = ((next_random() >> 11) + 1) * (1.0 / 9007199254740992.0);   /* (0, 1] */
    double gap = -ln_unit(u) * mean_bytes;
    return gap < 1.0 ? 1 : gap > 4e18 ? (int64_t)4e18 : (int64_t)gap;
}

/* ---- memory of the tables ---------------------------------------------- */

static void *table_take(size_t bytes)
{
    bytes = (bytes + 15) & ~(size_t)15;
    if (table_used + bytes > TABLE_RESERVE - 2 * COMMIT_STEP)
        return NULL;
    while (table_used + bytes > table_committed) {
        if (!os_commit(table_base + table_committed, COMMIT_STEP))
            return NULL;
        table_committed += COMMIT_STEP;
    }
    void *p = table_base + table_used;
    table_used += bytes;
    return p;
}

bool prof_init(void)
{
    mean_bytes = (double)((uint64_t)1 << opt.lg_prof_sample);
    size_t buckets = STACK_BUCKETS * sizeof(void *) + BLOCK_BUCKETS * sizeof(void *);
    char *base = os_reserve(TABLE_RESERVE);
    if (base == NULL || !os_commit(base, buckets)) {
        dpm_warn3("prof: no memory for the profile's tables: ", "heap profiling stays off", NULL);
        return false;
    }
    mutex_init(&prof_lock);
    stack_buckets = (stack_rec_t **)base;
    block_buckets = (block_rec_t **)(base + STACK_BUCKETS * sizeof(void *));
    table_base = base + ((buckets + COMMIT_STEP - 1) & ~(COMMIT_STEP - 1));
    active = opt.prof_active;
    prof_on = true;
    return true;
}

/* ---- the sampler --------------------------------------------------------- */

bool prof_tick_due(size_t size)
{
    if (!countdown_started) {
        /* a thread's first count: its first gap starts at this
         * allocation, which is sampled if it spans the gap (a thread that
         * makes one big block is seen) */
        countdown_started = true;
        prof_countdown = next_gap() - (int64_t)size;
        if (prof_countdown > 0)
            return false;
    }
    prof_countdown = next_gap();
    return __atomic_load_n(&active, __ATOMIC_RELAXED) && !inside && size != 0;
}

static int add_own_range(struct dl_phdr_info *info, size_t len, void *own_base)
{
    (void)len;
    if (info->dlpi_addr != (uintptr_t)own_base)
        return 0;
    for (unsigned i = 0; i < info->dlpi_phnum && own_ranges < 4; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            own_lo[own_ranges] = info->dlpi_addr + ph->p_vaddr;
            own_hi[own_ranges++] = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
        }
    }
    return 1;
}

/* Where the allocator's code is, when it is a shared object of its own
 * (preloaded, or linked as libdpmalloc.so). */
static void find_own_ranges(void)
{
    Dl_info own, program;
    uintptr_t entry = (uintptr_t)getauxval(AT_ENTRY);
    if (dladdr((void *)(uintptr_t)prof_init, &own) != 0 && entry != 0 && dladdr((void *)entry, &program) != 0 &&
        own.dli_fbase != program.dli_fbase)
        dl_iterate_phdr(add_own_range, own.dli_fbase);
}

/* Both steps take the loader's lock, and glibc's first backtrace loads
 * the unwinder with dlopen: done once the heap works (init's end), never
 * at a sample, which may run while another thread holds that lock in
 * dlopen and waits for this one (a library constructor waiting for a
 * thread it started). */
void prof_prime(void)
{
    if (!prof_on)
        return;
    inside = true;
    find_own_ranges();
    void *one[2];
    (void)backtrace(one, 2);
    inside = false;
}

static bool own_frame(uintptr_t pc)
{
    for (unsigned i = 0; i < own_ranges; i++)
        if (pc >= own_lo[i] && pc < own_hi[i])
            return true;
    return false;
}

static uint64_t hash_frames(const uintptr_t *f, unsigned n)
{
    uint64_t h = 0xcbf29ce484222325u ^ n;
    for (unsigned i = 0; i < n; i++) {
        h ^= f[i];
        h *= 0x100000001b3u;
        h ^= h >> 31;
    }
    return h;
}

static stack_rec_t *stack_find_or_add(const uintptr_t *f, unsigned n)
{
    uint64_t h = hash_frames(f, n);
    stack_rec_t **slot = &stack_buckets[h % STACK_BUCKETS];
    for (stack_rec_t *s = *slot; s != NULL; s = s->next_in_bucket)
        if (s->hash == h && s->depth == n && memcmp(s->frames, f, n * sizeof(*f)) == 0)
            return s;
    stack_rec_t *s = table_take(sizeof(*s) + n * sizeof(*f));
    if (s == NULL)
        return NULL;
    memset(s, 0, sizeof(*s));
    s->hash = h;
    s->depth = n;
    memcpy(s->frames, f, n * sizeof(*f));
    s->next_in_bucket = *slot;
    *slot = s;
    s->next_all = all_stacks;
    all_stacks = s;
    nstacks++;
    return s;
}

void prof_record(span_t *s, size_t size)
{
    void *raw[PROF_DEPTH + 8];
    inside = true;
    int got = backtrace(raw, PROF_DEPTH + 8);
    inside = false;
    uintptr_t frames[PROF_DEPTH];
    unsigned n = 0;
    int i = 0;
    while (i < got && own_frame((uintptr_t)raw[i]))
        i++;
    for (; i < got && n < PROF_DEPTH; i++)
        frames[n++] = (uintptr_t)raw[i];
    double p = 1.0 - exp_nonpositive(-(double)size / mean_bytes);
    double count = p > 0.0 ? 1.0 / p : 1.0, bytes = count * (double)size;

    mutex_lock(&prof_lock);
    stack_rec_t *st = stack_find_or_add(frames, n);
    block_rec_t *b = free_blocks;
    if (b != NULL)
        free_blocks = b->next;
    else
        b = table_take(sizeof(*b));
    if (st == NULL || b == NULL) {
        if (b != NULL) {
            b->next = free_blocks;
            free_blocks = b;
        }
        bool first = __atomic_fetch_add(&samples_dropped, 1, __ATOMIC_RELAXED) == 0;
        mutex_unlock(&prof_lock);
        if (first)
            dpm_warn3("prof: the profile's tables are full (", "256 MiB of stacks and samples",
                      "): samples are dropped from now on (stats.prof.samples_dropped)");
        return;
    }
    st->live_samples++;
    st->total_samples++;
    st->live_count += count;
    st->live_bytes += bytes;
    st->alloc_count += count;
    st->alloc_bytes += bytes;
    b->addr = s->base;
    b->stack = st;
    b->count = count;
    b->bytes = bytes;
    block_rec_t **slot = &block_buckets[(s->base >> 12) % BLOCK_BUCKETS];
    b->next = *slot;
    *slot = b;
    __atomic_add_fetch(&samples_total, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&samples_live, 1, __ATOMIC_RELAXED);
    s->prof_class = 0;   /* its run's usable bytes unless its sampler says otherwise (alloc.c) */
    s->prof_sampled = 1;
    mutex_unlock(&prof_lock);
}

void prof_forget(span_t *s)
{
    mutex_lock(&prof_lock);
    if (!s->prof_sampled) {
        mutex_unlock(&prof_lock);
        return;
    }
    s->prof_sampled = 0;
    for (block_rec_t **slot = &block_buckets[(s->base >> 12) % BLOCK_BUCKETS]; *slot != NULL;
         slot = &(*slot)->next) {
        block_rec_t *b = *slot;
        if (b->addr != s->base)
            continue;
        *slot = b->next;
        b->stack->live_samples--;
        b->stack->live_count -= b->count;
        b->stack->live_bytes -= b->bytes;
        if (b->stack->live_samples == 0)   /* no rounding residue on an empty stack */
            b->stack->live_count = b->stack->live_bytes = 0.0;
        b->next = free_blocks;
        free_blocks = b;
        __atomic_sub_fetch(&samples_live, 1, __ATOMIC_RELAXED);
        break;
    }
    mutex_unlock(&prof_lock);
}

bool prof_active_get(void) { return __atomic_load_n(&active, __ATOMIC_RELAXED); }
void prof_active_set(bool on) { __atomic_store_n(&active, on, __ATOMIC_RELAXED); }
uint64_t prof_samples_total(void) { return __atomic_load_n(&samples_total, __ATOMIC_RELAXED); }
uint64_t prof_samples_live(void) { return __atomic_load_n(&samples_live, __ATOMIC_RELAXED); }
uint64_t prof_samples_dropped(void) { return __atomic_load_n(&samples_dropped, __ATOMIC_RELAXED); }

void prof_prefork(void)
{
    if (prof_on)
        mutex_lock(&prof_lock);
}
void prof_postfork_parent(void)
{
    if (prof_on)
        mutex_unlock(&prof_lock);
}
void prof_postfork_child(void)
{
    if (prof_on)
        mutex_reinit(&prof_lock);
}

/* ---- a growable buffer in memory of its own ------------------------------ */

typedef struct buf {
    uint8_t *p;
    size_t len, cap;
    bool failed;
} buf_t;

static void buf_need(buf_t *b, size_t more)
{
    if (b->failed || b->len + more <= b->cap)
        return;
    size_t cap = b->cap != 0 ? b->cap : 65536;
    while (cap < b->len + more)
        cap *= 2;
    void *q = b->p == NULL ? mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                           : mremap(b->p, b->cap, cap, MREMAP_MAYMOVE);
    if (q == MAP_FAILED) {
        b->failed = true;
        return;
    }
    b->p = q;
    b->cap = cap;
}

static void buf_put(buf_t *b, const void *src, size_t n)
{
    buf_need(b, n);
    if (b->failed)
        return;
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

static void buf_free(buf_t *b)
{
    if (b->p != NULL)
        munmap(b->p, b->cap);
    memset(b, 0, sizeof(*b));
}

/* ---- protobuf ------------------------------------------------------------ */

static void pb_varint(buf_t *b, uint64_t v)
{
    uint8_t tmp[10];
    size_t n = 0;
    do {
        tmp[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v != 0);
    buf_put(b, tmp, n);
}

static void pb_key(buf_t *b, unsigned field, unsigned wire) { pb_varint(b, (uint64_t)field << 3 | wire); }
static void pb_uint(buf_t *b, unsigned field, uint64_t v)
{
    pb_key(b, field, 0);
    pb_varint(b, v);
}
static void pb_bytes(buf_t *b, unsigned field, const void *p, size_t n)
{
    pb_key(b, field, 2);
    pb_varint(b, n);
    buf_put(b, p, n);
}
/* A nested message: its body written to tmp by the caller, then framed. */
static void pb_message(buf_t *b, unsigned field, buf_t *body)
{
    pb_bytes(b, field, body->p, body->len);
    body->failed |= b->failed;
    body->len = 0;
}

/* ---- the profile ----------------------------------------------------------- */

#define MAX_MAPPINGS 4096
typedef struct mapping {
    uintptr_t start, limit, offset;
    uint64_t filename;   /* string index */
} mapping_t;

typedef struct strings {
    buf_t table;         /* the encoded string_table fields */
    uint64_t count;
} strings_t;

static uint64_t str_add(strings_t *s, const char *text)
{
    pb_bytes(&s->table, 6, text, strlen(text));
    return s->count++;
}

/* The executable mappings of this process, from /proc/self/maps. */
static size_t read_mappings(mapping_t *out, size_t max, strings_t *strs, buf_t *raw)
{
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    for (;;) {
        buf_need(raw, 65536);
        if (raw->failed)
            break;
        ssize_t r = read(fd, raw->p + raw->len, raw->cap - raw->len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        raw->len += (size_t)r;
    }
    close(fd);
    buf_put(raw, "", 1);
    if (raw->failed)
        return 0;
    size_t n = 0;
    for (char *line = (char *)raw->p; *line != '\0' && n < max;) {
        char *end = strchr(line, '\n');
        if (end != NULL)
            *end = '\0';
        char *rest;
        uintptr_t lo = strtoull(line, &rest, 16), hi = 0, off = 0;
        if (*rest == '-')
            hi = strtoull(rest + 1, &rest, 16);
        char perms[5] = "";
        while (*rest == ' ')
            rest++;
        memcpy(perms, rest, 4);
        rest += 4;
        off = strtoull(rest, &rest, 16);
        /* device, inode, then the path (after spaces) */
        for (int field = 0; field < 2; field++) {
            while (*rest == ' ')
                rest++;
            while (*rest != ' ' && *rest != '\0')
                rest++;
        }
        while (*rest == ' ')
            rest++;
        if (perms[2] == 'x' && hi > lo) {
            out[n].start = lo;
            out[n].limit = hi;
            out[n].offset = off;
            out[n].filename = str_add(strs, rest);
            n++;
        }
        if (end == NULL)
            break;
        line = end + 1;
    }
    return n;
}

typedef struct snap_stack {
    uint32_t depth;
    int64_t values[4];   /* alloc_objects, alloc_space, inuse_objects, inuse_space */
    uintptr_t frames[PROF_DEPTH];
} snap_stack_t;

/* Location ids: one per distinct frame address, found through an open
 * hash of the addresses (ids are 1-based indices into it). */
typedef struct locations {
    uintptr_t *addr;
    uint64_t *id;
    size_t cap, n;
    buf_t mem;
} locations_t;

static uint64_t location_of(locations_t *l, uintptr_t a)
{
    size_t i = (size_t)((a * 0x9e3779b97f4a7c15u) >> 20) % l->cap;
    while (l->addr[i] != 0 && l->addr[i] != a)
        i = (i + 1) % l->cap;
    if (l->addr[i] == 0) {
        l->addr[i] = a;
        l->id[i] = ++l->n;
    }
    return l->id[i];
}

static int64_t round_estimate(double v) { return v <= 0.0 ? 0 : (int64_t)(v + 0.5); }

/* The whole profile, encoded into out (uncompressed). */
static bool encode_profile(buf_t *out)
{
    buf_t snap = {0}, tmp = {0}, inner = {0}, raw = {0};
    strings_t strs = {{0}, 0};
    locations_t locs = {0};
    bool ok = false;

    mutex_lock(&prof_lock);
    size_t n = nstacks;
    buf_need(&snap, (n + 1) * sizeof(snap_stack_t));
    if (!snap.failed) {
        snap_stack_t *ss = (snap_stack_t *)snap.p;
        size_t i = 0;
        for (stack_rec_t *s = all_stacks; s != NULL && i < n; s = s->next_all, i++) {
            ss[i].depth = s->depth;
            ss[i].values[0] = round_estimate(s->alloc_count);
            ss[i].values[1] = round_estimate(s->alloc_bytes);
            ss[i].values[2] = round_estimate(s->live_count);
            ss[i].values[3] = round_estimate(s->live_bytes);
            memcpy(ss[i].frames, s->frames, s->depth * sizeof(uintptr_t));
        }
        n = i;
    }
    mutex_unlock(&prof_lock);
    if (snap.failed)
        goto out;
    snap_stack_t *ss = (snap_stack_t *)snap.p;

    str_add(&strs, "");
    static const char *const names[] = {"alloc_objects", "count", "alloc_space", "bytes",
                                        "inuse_objects", "count", "inuse_space", "bytes"};
    uint64_t idx[8];
    for (unsigned i = 0; i < 8; i++)
        idx[i] = str_add(&strs, names[i]);
    uint64_t space = str_add(&strs, "space");
    /* the allocator's entry points, and the functions they jump to (a
     * tail call leaves no frame of the entry point): what pprof cuts
     * from stacks when dpmalloc is linked statically */
    uint64_t drop = str_add(&strs, "^(malloc|calloc|realloc|free|valloc|pvalloc|memalign|aligned_alloc|"
                                   "posix_memalign|reallocarray|mallocx|rallocx|dpm_.*|rte_.*|operator new.*|"
                                   "__libc_.*|alloc_front_miss|alloc_slow|alloc_slow_body|alloc_slow_plain|"
                                   "alloc_at_low_water|prof_front_alloc|prof_sampled|prof_sampled_slow|"
                                   "prof_resized|prof_record|aligned_at_impl|aligned_small|phased_small|"
                                   "calloc_impl|realloc_impl|realloc_checked|realloc_general|move_block|"
                                   "grown_block|heap_alloc_impl|annotated_aligned|typed_alloc|prof_typed)$");
    uint64_t comment = str_add(&strs, "dpmalloc heap profile (" DPMALLOC_VERSION ")");

    /* sample types */
    for (unsigned i = 0; i < 4; i++) {
        pb_uint(&inner, 1, idx[2 * i]);
        pb_uint(&inner, 2, idx[2 * i + 1]);
        pb_message(out, 1, &inner);
    }

    size_t total_frames = 0;
    for (size_t i = 0; i < n; i++)
        total_frames += ss[i].depth;
    locs.cap = 2 * total_frames + 16;
    buf_need(&locs.mem, locs.cap * (sizeof(uintptr_t) + sizeof(uint64_t)));
    if (locs.mem.failed)
        goto out;
    memset(locs.mem.p, 0, locs.cap * (sizeof(uintptr_t) + sizeof(uint64_t)));
    locs.addr = (uintptr_t *)locs.mem.p;
    locs.id = (uint64_t *)(locs.mem.p + locs.cap * sizeof(uintptr_t));

    /* samples: leaf first; return addresses less one, inside the call */
    for (size_t i = 0; i < n; i++) {
        for (uint32_t f = 0; f < ss[i].depth; f++)
            pb_varint(&tmp, location_of(&locs, ss[i].frames[f] - 1));
        pb_message(&inner, 1, &tmp);
        for (unsigned v = 0; v < 4; v++)
            pb_varint(&tmp, (uint64_t)ss[i].values[v]);
        pb_message(&inner, 2, &tmp);
        pb_message(out, 2, &inner);
    }

    buf_t maps_mem = {0};
    buf_need(&maps_mem, MAX_MAPPINGS * sizeof(mapping_t));
    if (maps_mem.failed)
        goto out;
    mapping_t *maps = (mapping_t *)maps_mem.p;
    size_t nmaps = read_mappings(maps, MAX_MAPPINGS, &strs, &raw);
    for (size_t m = 0; m < nmaps; m++) {
        pb_uint(&inner, 1, m + 1);
        pb_uint(&inner, 2, maps[m].start);
        pb_uint(&inner, 3, maps[m].limit);
        pb_uint(&inner, 4, maps[m].offset);
        pb_uint(&inner, 5, maps[m].filename);
        pb_message(out, 3, &inner);
    }
    for (size_t i = 0; i < locs.cap; i++) {
        if (locs.addr[i] == 0)
            continue;
        pb_uint(&inner, 1, locs.id[i]);
        for (size_t m = 0; m < nmaps; m++)
            if (locs.addr[i] >= maps[m].start && locs.addr[i] < maps[m].limit) {
                pb_uint(&inner, 2, m + 1);
                break;
            }
        pb_uint(&inner, 3, locs.addr[i]);
        pb_message(out, 4, &inner);
    }
    buf_put(out, strs.table.p, strs.table.len);
    pb_uint(out, 7, drop);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    pb_uint(out, 9, (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec);
    pb_uint(&inner, 1, space);
    pb_uint(&inner, 2, idx[3]);
    pb_message(out, 11, &inner);
    pb_uint(out, 12, (uint64_t)mean_bytes);
    pb_uint(out, 13, comment);
    pb_uint(out, 14, idx[6]);
    ok = !out->failed && !tmp.failed && !inner.failed && !strs.table.failed;
    buf_free(&maps_mem);
out:
    buf_free(&snap);
    buf_free(&tmp);
    buf_free(&inner);
    buf_free(&raw);
    buf_free(&strs.table);
    buf_free(&locs.mem);
    return ok;
}

/* ---- gzip with stored deflate blocks ------------------------------------------ */

static uint32_t crc32_of(const uint8_t *p, size_t n)
{
    static uint32_t table[256];
    static bool ready;
    if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
        __atomic_store_n(&ready, true, __ATOMIC_RELEASE);
    }
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++)
        c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

static void put_le32(buf_t *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    buf_put(b, x, 4);
}

static void gzip_stored(buf_t *out, const buf_t *in)
{
    static const uint8_t header[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
    buf_put(out, header, sizeof header);
    size_t at = 0;
    do {
        size_t chunk = in->len - at > 65535 ? 65535 : in->len - at;
        uint8_t h[5] = {(uint8_t)(at + chunk == in->len), (uint8_t)chunk, (uint8_t)(chunk >> 8),
                        (uint8_t)~chunk, (uint8_t)(~chunk >> 8)};
        buf_put(out, h, 5);
        buf_put(out, in->p + at, chunk);
        at += chunk;
    } while (at < in->len);
    put_le32(out, crc32_of(in->p, in->len));
    put_le32(out, (uint32_t)in->len);
}

static int write_all(const char *path, const buf_t *b)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return errno;
    size_t at = 0;
    while (at < b->len) {
        ssize_t w = write(fd, b->p + at, b->len - at);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            close(fd);
            return e;
        }
        at += (size_t)w;
    }
    return close(fd) == 0 ? 0 : errno;
}

int prof_prefix_set(const char *prefix)
{
    size_t len = strlen(prefix);
    if (len + 1 > sizeof(opt.prof_prefix))
        return EINVAL;
    mutex_lock(&prof_lock);
    memcpy(opt.prof_prefix, prefix, len + 1);
    mutex_unlock(&prof_lock);
    return 0;
}

/* <prof_prefix>.<pid>.<seq>.<kind><n>.heap, as jemalloc names its dumps */
static void default_name(char *out, size_t cap, char kind, uint64_t n)
{
    char prefix[sizeof(opt.prof_prefix)];
    mutex_lock(&prof_lock);
    memcpy(prefix, opt.prof_prefix, sizeof prefix);
    mutex_unlock(&prof_lock);
    char pid[24], seq[24], num[24];
    dpm_format_dec(pid, (size_t)getpid());
    dpm_format_dec(seq, (size_t)__atomic_fetch_add(&dump_seq, 1, __ATOMIC_RELAXED));
    dpm_format_dec(num, (size_t)n);
    out[0] = '\0';
    const char *parts[] = {prefix, ".", pid, ".", seq, ".", NULL, kind == 'f' ? "" : num, ".heap"};
    char k[2] = {kind, '\0'};
    parts[6] = k;
    size_t len = 0;
    for (unsigned i = 0; i < ARRAY_LEN(parts); i++) {
        size_t l = strlen(parts[i]);
        if (len + l + 1 > cap)
            break;
        memcpy(out + len, parts[i], l + 1);
        len += l;
    }
}

static int dump_to(const char *path)
{
    buf_t proto = {0}, gz = {0};
    int err = encode_profile(&proto) ? 0 : ENOMEM;
    if (err == 0) {
        gzip_stored(&gz, &proto);
        err = gz.failed ? ENOMEM : write_all(path, &gz);
    }
    buf_free(&proto);
    buf_free(&gz);
    return err;
}

int prof_dump(const char *path)
{
    static uint64_t manual_seq;
    if (!prof_on)
        return ENOENT;
    char name[512];
    if (path == NULL) {
        default_name(name, sizeof name, 'm', __atomic_fetch_add(&manual_seq, 1, __ATOMIC_RELAXED));
        path = name;
    }
    bool was = inside;
    inside = true;   /* the dump's own libc calls are not sampled */
    int err = dump_to(path);
    inside = was;
    return err;
}

/* ---- at exit -------------------------------------------------------------- */

static void say(const char *s) { dpm_write_stderr(s); }
static void say_num(size_t v)
{
    char d[24];
    say(dpm_format_dec(d, v));
}

/* prof_leak: the live estimates by stack, largest first (at most 20),
 * copied out first: printing symbols takes the loader's lock, under which
 * a dlopen may allocate and sample, so never under prof_lock. */
#define LEAK_SHOWN 20
static void leak_report(void)
{
    buf_t mem = {0};
    buf_need(&mem, LEAK_SHOWN * sizeof(snap_stack_t));
    if (mem.failed)
        return;
    snap_stack_t *shown = (snap_stack_t *)mem.p;
    const stack_rec_t *picked[LEAK_SHOWN];
    unsigned nshown = 0;
    double bytes = 0, objs = 0;
    size_t contexts = 0;
    mutex_lock(&prof_lock);
    for (stack_rec_t *s = all_stacks; s != NULL; s = s->next_all)
        if (s->live_samples != 0) {
            bytes += s->live_bytes;
            objs += s->live_count;
            contexts++;
        }
    for (; nshown < LEAK_SHOWN; nshown++) {
        const stack_rec_t *best = NULL;
        for (stack_rec_t *s = all_stacks; s != NULL; s = s->next_all) {
            bool taken = false;
            for (unsigned i = 0; i < nshown; i++)
                taken |= picked[i] == s;
            if (s->live_samples != 0 && !taken && (best == NULL || s->live_bytes > best->live_bytes))
                best = s;
        }
        if (best == NULL)
            break;
        picked[nshown] = best;
        shown[nshown].depth = best->depth;
        shown[nshown].values[2] = round_estimate(best->live_count);
        shown[nshown].values[3] = round_estimate(best->live_bytes);
        memcpy(shown[nshown].frames, best->frames, best->depth * sizeof(uintptr_t));
    }
    mutex_unlock(&prof_lock);
    say("<dpmalloc>: Leak approximation summary: ~");
    say_num((size_t)round_estimate(bytes));
    say(" bytes, ~");
    say_num((size_t)round_estimate(objs));
    say(" objects, >= ");
    say_num(contexts);
    say(contexts == 1 ? " context\n" : " contexts\n");
    for (unsigned i = 0; i < nshown; i++) {
        say("<dpmalloc>: ~");
        say_num((size_t)shown[i].values[3]);
        say(" bytes in ~");
        say_num((size_t)shown[i].values[2]);
        say(" objects allocated at:\n");
        if (shown[i].depth > 0)
            backtrace_symbols_fd((void *const *)shown[i].frames, (int)shown[i].depth, 2);
    }
    buf_free(&mem);
}

void prof_at_exit(void)
{
    if (!prof_on)
        return;
    inside = true;
    if (opt.prof_final) {
        char name[512];
        default_name(name, sizeof name, 'f', 0);
        int err = dump_to(name);
        if (err != 0)
            dpm_warn3("prof_final: could not write ", name, err == ENOENT ? ": no such directory" : ": write failed");
    }
    if (opt.prof_leak)
        leak_report();
}

/* For dpmalloc-stat (anchor.h): the switches and the counters that
 * stats.prof.* and prof.active read. */
extern const anchor_prof_t anchor_ref_prof;
const anchor_prof_t anchor_ref_prof = {&prof_on, &active, &samples_total, &samples_live, &samples_dropped};
