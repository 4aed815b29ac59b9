/*
 * secure_mode.c - the hardened mode (DPMALLOC_CONF=secure:true, set by
 * CTest): a double free aborts at the second free itself, with no thread
 * cache in between; a sized free whose size does not fit the block aborts
 * (larger than the block, or smaller than a large block's request), while
 * every sized free with the size the block was asked for is accepted, for
 * malloc, calloc, realloc and every alignment and offset of the aligned
 * calls;
 * freed blocks are junk-filled; malloc(0) and other zero-size requests
 * return distinct addresses that fault when read or written, and whose
 * double free, use after free and wrong sized free abort; a write past a
 * small block's usable bytes aborts at its free or realloc (its slot's
 * canary); a freed small block waits in a quarantine, and a write into
 * it aborts when it leaves (or at arena.<i>.purge), a second free or a
 * usable-size call while it waits at once; slabs hand out slots at
 * random; a large block
 * has a page without access after its usable bytes, and a freed one waits
 * without access in a quarantine (reads, writes and a second free of it
 * fault or abort), while correct programs run with bounded memory. Also the
 * hugepages option without any huge
 * pages in the system: one warning, and allocation still works
 * (DPMALLOC_CONF=hugepages:true, argument "hugepages").
 */
#include <dpmalloc.h>
#include <pthread.h>
#include <sched.h>
#include <dpmalloc/rte_compat.h>
#include <sys/resource.h>
#include <signal.h>
#include <sys/mman.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int failures;

#define CHECK(cond, ...)                                                  \
    do {                                                                  \
        if (!(cond)) {                                                    \
            failures++;                                                   \
            fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, #cond);   \
            fprintf(stderr, __VA_ARGS__);                                 \
            fputc('\n', stderr);                                          \
        }                                                                 \
    } while (0)

/* Runs fn in a child with stderr captured; returns its wait status. */
static int run_child(void (*fn)(void), char *err, size_t len)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        fn();
        _exit(0);
    }
    close(fds[1]);
    size_t got = 0;
    ssize_t n;
    while (got < len - 1 && (n = read(fds[0], err + got, len - 1 - got)) > 0)
        got += (size_t)n;
    err[got] = '\0';
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
}

static void *volatile keep;

static void double_free(void)
{
    void *p = dpm_malloc(64);
    keep = dpm_malloc(64);
    dpm_free(p);
    dpm_free(p);
}

static void wrong_size(void)
{
    void *p = dpm_malloc(100);
    dpm_free_sized(p, 5000);
}

/* Every sized free with the size the block was requested with is
 * accepted, whatever call and alignment made the block. */
static const size_t sweep_sizes[] = {0,    1,     8,     16,    17,    24,    48,     63,     64,     100,
                                     255,  1000,  1024,  3000,  4096,  4097,  10000,  16384,  20000,  65536,
                                     70000, 200000, 1 << 20};
#define NSWEEP (sizeof(sweep_sizes) / sizeof(sweep_sizes[0]))

static void correct_sized_frees(void)
{
    for (size_t i = 0; i < NSWEEP; i++) {
        size_t size = sweep_sizes[i];
        dpm_free_sized(dpm_malloc(size), size);
        dpm_free_sized(dpm_calloc(1, size), size);
        for (size_t align = 1; align <= ((size_t)1 << 16); align *= 2) {
            dpm_free_sized(dpm_malloc_aligned(size, align), size);
            dpm_free_sized(dpm_zalloc_aligned(size, align), size);
            for (size_t off = 1; off < align; off = off * 3 + 1)
                dpm_free_sized(dpm_malloc_aligned_at(size, align, off), size);
        }
        /* realloc to every other size: the new size is the one to give */
        for (size_t j = 0; j < NSWEEP; j++) {
            void *p = dpm_malloc(size);
            p = dpm_realloc(p, sweep_sizes[j] == 0 ? 1 : sweep_sizes[j]);
            dpm_free_sized(p, sweep_sizes[j] == 0 ? 1 : sweep_sizes[j]);
        }
    }
    /* the two cases from the field */
    dpm_free_sized(dpm_malloc_aligned(100, 4096), 100);
    dpm_free_sized(dpm_malloc_aligned(16, 64), 16);
    fprintf(stderr, "all sized frees accepted\n");
}

static void too_small_for_aligned_block(void)
{
    void *p = dpm_malloc_aligned(100, 4096);
    dpm_free_sized(p, 100000);
}

static void smaller_than_large_request(void)
{
    void *p = dpm_malloc(300000);
    dpm_free_sized(p, 200000);
}

static void expect_abort(void (*fn)(void), const char *what)
{
    char err[512];
    int status = run_child(fn, err, sizeof(err));
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "status %d, stderr: %s", status, err);
    CHECK(strstr(err, what) != NULL, "expected \"%s\" in: %s", what, err);
}

/* ---- zero-size blocks (zero_blocks.h) ---- */
static volatile size_t zero_bytes;   /* 0, out of the compiler's sight */

static void read_zero_size(void)
{
    volatile char *p = dpm_malloc(zero_bytes);
    fprintf(stderr, "read %d\n", p[0]);
}

static void write_zero_size(void)
{
    volatile char *p = dpm_calloc(zero_bytes, 8);
    p[0] = 1;
    fprintf(stderr, "wrote\n");
}

static void read_freed_zero_size(void)
{
    volatile char *p = dpm_malloc(zero_bytes);
    dpm_free((void *)p);
    fprintf(stderr, "read %d\n", p[0]);
}

static void double_free_zero_size(void)
{
    void *p = dpm_malloc(0);
    dpm_free(p);
    dpm_free(keep = p);
}

static void usable_size_of_freed_zero_size(void)
{
    void *p = dpm_malloc(0);
    dpm_free(p);
    fprintf(stderr, "usable %zu\n", dpm_usable_size(keep = p));
}

static void sized_free_zero_size_wrong(void)
{
    dpm_free_sized(dpm_malloc(0), 1);
}

static void between_zero_size_slots(void)
{
    char *p = dpm_malloc(0);
    dpm_free(p + 8);
}

/* A fault in one of secure mode's pages without access ends in the
 * fault handler's report (fault.h): SIGABRT, "dpmalloc: <what> at <the
 * address> (<source>): the N-byte block at <block>". */
static void expect_fault_report_naming(void (*fn)(void), const char *what, const char *source, const char *named)
{
    char err[512];
    int status = run_child(fn, err, sizeof(err));
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "status %d, stderr: %s", status, err);
    CHECK(strstr(err, "dpmalloc: ") != NULL && strstr(err, what) != NULL && strstr(err, source) != NULL &&
              strstr(err, "-byte block at 0x") != NULL,
          "expected \"%s\" and \"%s\" in: %s", what, source, err);
    if (named != NULL) {
        /* the child printed "<named><pointer>" first: the report names that block */
        char want[64];
        const char *at = strstr(err, named);
        CHECK(at != NULL &&
                  sscanf(at + strlen(named), "%40s", want + strlen(strcpy(want, "-byte block at "))) == 1 &&
                  strstr(err, want) != NULL,
              "the report does not name the block after \"%s\": %s", named, err);
    }
}

static void expect_fault_report(void (*fn)(void), const char *what, const char *source)
{
    expect_fault_report_naming(fn, what, source, NULL);
}

/* Any other fault, or a SIGSEGV the program sends itself, meets the
 * disposition the program had (here the default): death by SIGSEGV,
 * with no report. */
static void fault_in_own_page(void)
{
    volatile char *p = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    fprintf(stderr, "read %d\n", p[0]);
}

static void segv_sent(void)
{
    raise(SIGSEGV);
    fprintf(stderr, "survived\n");
}

static void expect_plain_segv(void (*fn)(void))
{
    char err[512];
    int status = run_child(fn, err, sizeof(err));
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV && strstr(err, "dpmalloc") == NULL,
          "status %d, stderr: %s", status, err);
}

/* Distinct live addresses, none of which is a heap block's; each works
 * with usable size, realloc and sized free. */
static void test_zero_size_blocks(void)
{
    enum { N = 5000 };
    static char *z[N];
    for (int i = 0; i < N; i++) {
        z[i] = i % 3 == 0 ? dpm_malloc(0) : i % 3 == 1 ? dpm_calloc(0, 0) : dpm_malloc_aligned(0, (size_t)16 << (i % 8));
        CHECK(z[i] != NULL, "zero-size block %d is NULL", i);
        CHECK(dpm_usable_size(z[i]) == 0, "usable size %zu", dpm_usable_size(z[i]));
        if (i % 3 == 2)
            CHECK(((uintptr_t)z[i] & (((uintptr_t)16 << (i % 8)) - 1)) == 0, "%p misaligned", (void *)z[i]);
    }
    for (int i = 1; i < N; i++)
        CHECK(z[i] != z[i - 1], "zero-size blocks %d and %d share %p", i - 1, i, (void *)z[i]);
    void *heap = dpm_malloc(16);
    CHECK(heap != z[0], "a zero-size block is a heap block");
    dpm_free(heap);
    for (int i = 0; i < N; i += 2)
        dpm_free_sized(z[i], 0);
    for (int i = 1; i < N; i += 2) {
        z[i] = dpm_realloc(z[i], 40);
        CHECK(z[i] != NULL && dpm_usable_size(z[i]) >= 40, "realloc of a zero-size block");
        memset(z[i], 1, 40);
        dpm_free(z[i]);
    }
    expect_fault_report(read_zero_size, "read or write through a block of size 0", "secure mode");
    expect_fault_report(write_zero_size, "read or write through a block of size 0", "secure mode");
    expect_fault_report(read_freed_zero_size, "use after free", "secure mode");
    expect_plain_segv(fault_in_own_page);
    expect_plain_segv(segv_sent);
    expect_abort(double_free_zero_size, "double free of");
    expect_abort(usable_size_of_freed_zero_size, "use after free of");
    expect_abort(sized_free_zero_size_wrong, "size does not match");
    expect_abort(between_zero_size_slots, "invalid pointer");
}

/* ---- small blocks: a canary after the usable bytes ---- */
static void overflow_small_by_one(void)
{
    char *p = dpm_malloc(8);
    /* a change of the byte: a fixed value would equal the canary's
     * first byte in one process of 255 (which is missed, as any canary
     * misses a write of its own value) */
    p[dpm_usable_size(p)] ^= 0x40;
    dpm_free(keep = p);
}

static void overflow_small_by_eight(void)
{
    char *p = dpm_malloc(100);
    p[dpm_usable_size(p) + 7] ^= 1;
    dpm_free(keep = p);
}

static void overflow_small_then_realloc(void)
{
    char *p = dpm_malloc(40);
    memset(p, 'x', dpm_usable_size(p) + 1);
    keep = p;
    keep = dpm_realloc(p, 4000);
}

static void test_small_canaries(void)
{
    /* every usable byte of every small size is the program's */
    for (size_t n = 0; n <= 20000; n += n < 600 ? 1 : 97) {
        char *p = dpm_malloc(n);
        size_t u = dpm_usable_size(p);
        CHECK(p != NULL && u >= n, "malloc(%zu): usable %zu", n, u);
        memset(p, 0xee, u);
        p = dpm_realloc(p, n + 1);
        memset(p, 0xdd, dpm_usable_size(p));
        dpm_free(p);
        p = dpm_malloc_aligned(n, 64);
        memset(p, 0xcc, dpm_usable_size(p));
        dpm_free_sized(p, n);
    }
    expect_abort(overflow_small_by_one, "write past the end");
    expect_abort(overflow_small_by_eight, "write past the end");
    expect_abort(overflow_small_then_realloc, "write past the end");
}

/* ---- small blocks: a quarantine after free, its junk verified ---- */
static void write_after_free_small(void)
{
    char *p = dpm_malloc(128);
    dpm_free(p);
    p[65] = 'a';
    for (int i = 0; i < 100000; i++)   /* pushes p out of the quarantine */
        dpm_free(dpm_malloc(128));
    fprintf(stderr, "not caught\n");
}

static void write_after_free_small_reused(void)
{
    char *p = dpm_malloc(128);
    dpm_free(p);
    keep = dpm_malloc(128);   /* not p: p waits in the quarantine */
    p[65] = 'a';
    for (int i = 0; i < 100000; i++)
        dpm_free(dpm_malloc(128));
    fprintf(stderr, "not caught\n");
}

static void write_after_free_found_by_trim(void)
{
    char *p = dpm_malloc(300);
    dpm_free(p);
    p[299] = 1;
    dpm_ctl("arena.0.purge", NULL, NULL, NULL, 0);   /* empties the quarantines (malloc_trim too) */
    fprintf(stderr, "not caught\n");
}

static void double_free_quarantined_small(void)
{
    void *p = dpm_malloc(48);
    dpm_free(p);
    dpm_free(dpm_malloc(48));
    dpm_free(keep = p);
}

static void usable_size_of_quarantined_small(void)
{
    void *p = dpm_malloc(48);
    dpm_free(p);
    fprintf(stderr, "usable %zu\n", dpm_usable_size(keep = p));
}

/* Slots are picked at random within a slab: the next block's address
 * rarely follows from the last one's (in order, 63 of 64 would). */
static void test_random_slots(void)
{
    enum { N = 64 };
    char *p[N];
    int in_order = 0;
    /* a fresh arena: fresh slabs (a slab whose free slots form one run
     * at its end would give them in order whatever the start) */
    unsigned arena = 0;
    size_t len = sizeof arena;
    CHECK(dpm_ctl("arenas.create", &arena, &len, NULL, 0) == 0, "arenas.create");
    for (int i = 0; i < N; i++) {
        p[i] = dpm_malloc_arena(arena, 100, 0);
        if (i > 0 && p[i] == p[i - 1] + dpm_usable_size(p[i - 1]) + 8)
            in_order++;
    }
    for (int i = 0; i < N; i++)
        dpm_free(p[i]);
    CHECK(in_order < N / 4, "%d of %d blocks followed the one before", in_order, N - 1);
}

/* ---- small blocks past the quarantine: the CPU caches (mode cpu) ---- */
/* 100 frees of one class more than its ring holds (1024 blocks of 64
 * bytes): the first 100 have left the ring, and all but 16 its mix,
 * verified, for a CPU's cache, where they all fit (mode cpu), or their
 * slab (mode thread). The first is among the 16 in 1 run of 600 (then
 * found in the quarantine, with the same messages). */
#define PAST_RING (1024 + 100)
static void *freed_past_ring_aligned(size_t size, size_t align)
{
    static void *blocks[PAST_RING];
    /* empty rings and caches: the 100 fit the CPU's bin (no spill) */
    dpm_ctl("arena.0.purge", NULL, NULL, NULL, 0);
    for (int i = 0; i < PAST_RING; i++)
        blocks[i] = align != 0 ? dpm_malloc_aligned(size, align) : dpm_malloc(size);
    for (int i = 0; i < PAST_RING; i++)
        dpm_free(blocks[i]);
    return blocks[0];
}

static void *freed_past_ring(size_t size) { return freed_past_ring_aligned(size, 0); }

static void double_free_past_quarantine(void) { dpm_free(keep = freed_past_ring(64)); }
static void double_free_aligned_past_quarantine(void) { dpm_free(keep = freed_past_ring_aligned(100, 64)); }

static void usable_size_past_quarantine(void)
{
    void *p = freed_past_ring(64);
    fprintf(stderr, "usable %zu\n", dpm_usable_size(keep = p));
}

static void realloc_past_quarantine(void) { keep = dpm_realloc(freed_past_ring(64), 200); }

/* a block handed out again from a CPU's cache keeps its slot's canary */
static void overflow_reused_block(void)
{
    (void)freed_past_ring(64);
    char *p = dpm_malloc(64);
    p[dpm_usable_size(p)] ^= 0x40;
    dpm_free(keep = p);
}

/* Stays on the CPU it runs on: what it frees and then allocates meets in
 * one CPU's cache. */
static void pin_here(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(sched_getcpu(), &set);
    sched_setaffinity(0, sizeof set, &set);
}

/* A block that left the quarantine for a CPU's cache, its free key
 * overwritten by a write after free, then freed again: the second free
 * cannot tell (no mark, no key), but the quarantine's mark it writes is
 * found when the cache hands the block out: no block is handed out
 * twice. */
static void double_free_key_overwritten(void)
{
    pin_here();
    static char *blocks[1024 + 512];
    for (int i = 0; i < 1024 + 512; i++)
        blocks[i] = dpm_malloc(40);
    char *p = blocks[0];
    for (int i = 0; i < 1024 + 512; i++)
        dpm_free(blocks[i]);   /* p left the ring at the 1024th after it, and its mix by the 512th after that but for (15/16)^512 */
    memset(p + 8, 0x77, 4);    /* over the free key */
    dpm_free(p);               /* unnoticed here */
    for (int i = 0; i < 2048; i++)
        keep = dpm_malloc(40);
    fprintf(stderr, "no abort\n");
}

/* Slabs carved from pages a large block left (a cut under a purge's
 * minimum keeps its bytes) hand out fresh slots that hold whatever the
 * program wrote there, the quarantine's mark too: no abort (review r35). */
static void stale_mark_in_fresh_slots(void)
{
    static void *kept[64];
    for (int k = 0; k < 64; k++) {
        uint32_t *p = dpm_malloc(512 << 10);
        for (size_t i = 0; i < (512 << 10) / 4; i++)
            p[i] = 0x7e3d1f5bu;
        kept[k] = dpm_realloc(p, 100 << 10);   /* shrunk in place: 412 KiB cut off */
    }
    for (int i = 0; i < 20000; i++)
        keep = dpm_malloc(24);
    for (int k = 0; k < 64; k++)
        dpm_free(kept[k]);
    fprintf(stderr, "ok\n");
}

/* Threads that come and go share the quarantine's order: a block waits
 * for 1024 later frees of its class, whichever threads make them. */
static void *free_one(void *arg)
{
    dpm_free(arg);
    return NULL;
}
static void *free_some(void *arg)
{
    (void)arg;
    for (int i = 0; i < 10; i++)
        dpm_free(dpm_malloc(40));
    return NULL;
}

static void test_quarantine_order(void)
{
    void *p = dpm_malloc(40);
    pthread_t t;
    pthread_create(&t, NULL, free_one, p);
    pthread_join(t, NULL);
    for (int i = 0; i < 3; i++) {
        pthread_create(&t, NULL, free_some, NULL);
        pthread_join(t, NULL);
    }
    static void *blocks[600];
    int seen = 0;
    for (int i = 0; i < 600; i++)
        seen += (blocks[i] = dpm_malloc(40)) == p;
    CHECK(seen == 0, "a block freed 30 frees ago was handed out again");
    for (int i = 0; i < 600; i++)
        dpm_free(blocks[i]);
}

/* The block that leaves the quarantine goes to a random place in its
 * CPU's bin: the next malloc of its class returns it about once in the
 * bin's count, not always. */
static void test_reuse_order(void)
{
    pin_here();
    static void *blocks[1025];
    int next_is_p = 0;
    for (int trial = 0; trial < 40; trial++) {
        for (int i = 0; i < 1025; i++)
            blocks[i] = dpm_malloc(40);
        for (int i = 0; i < 1025; i++)
            dpm_free(blocks[i]);   /* blocks[0] leaves at the last */
        void *q = dpm_malloc(40);
        next_is_p += q == blocks[0];
        dpm_free(q);
    }
    CHECK(next_is_p <= 20, "the block that left the quarantine came next %d times of 40", next_is_p);
}

static size_t stat_size(const char *name)
{
    uint64_t e = 1;
    size_t v = 0, len = sizeof e;
    dpm_ctl("epoch", &e, &len, &e, sizeof e);
    len = sizeof v;
    CHECK(dpm_ctl(name, &v, &len, NULL, 0) == 0, "%s", name);
    return v;
}

static void test_past_quarantine(void)
{
    const char *front = NULL;
    size_t len = sizeof front;
    CHECK(dpm_ctl("stats.front_end", &front, &len, NULL, 0) == 0 && front != NULL, "stats.front_end");
    /* in mode cpu the blocks that left the quarantine wait in the CPU
     * caches, and malloc takes them from there; without CPU caches
     * (percpu:false) they go home */
    dpm_ctl("arena.0.purge", NULL, NULL, NULL, 0);
    CHECK(stat_size("stats.cpu_cache_bytes") + stat_size("stats.transfer_bytes") == 0, "caches not empty after purge");
    (void)freed_past_ring(64);
    size_t cached = stat_size("stats.cpu_cache_bytes") + stat_size("stats.transfer_bytes");
    if (front != NULL && strcmp(front, "cpu") == 0)
        CHECK(cached >= 64 * 50, "front end cpu: %zu bytes cached after %d frees", cached, PAST_RING);
    else
        CHECK(cached == 0, "front end %s: %zu bytes cached", front, cached);
    /* every block of a round of mallocs is live and distinct, whichever
     * cache it came from */
    static char *blocks[PAST_RING];
    for (int i = 0; i < PAST_RING; i++) {
        blocks[i] = dpm_malloc(64);
        memset(blocks[i], i & 0xff, 64);
    }
    for (int i = 0; i < PAST_RING; i++) {
        for (int j = 0; j < 64; j++)
            if ((unsigned char)blocks[i][j] != (i & 0xff)) {
                CHECK(0, "block %d byte %d changed: handed out twice", i, j);
                break;
            }
        dpm_free(blocks[i]);
    }
    /* found in a CPU's cache; in mode thread the block went home, where
     * its slab may be gone with it (then "invalid pointer") */
    bool cpu = front != NULL && strcmp(front, "cpu") == 0;
    expect_abort(double_free_past_quarantine, cpu ? "free(): double free of" : "free(): ");
    expect_abort(usable_size_past_quarantine, cpu ? "dpm_usable_size(): use after free of" : "dpm_usable_size(): ");
    expect_abort(realloc_past_quarantine, cpu ? "realloc(): use after free of" : "realloc(): ");
    expect_abort(overflow_reused_block, "write past the end");
    {
        char err[512];
        int status = run_child(stale_mark_in_fresh_slots, err, sizeof err);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0 && strstr(err, "ok") != NULL,
              "stale mark in fresh slots: status %d, stderr: %s", status, err);
    }
    if (cpu) {
        /* aligned requests take the CPU caches too: a round of them
         * empties what their frees left there, and a second free of one
         * is found there */
        (void)freed_past_ring_aligned(100, 64);
        size_t before = stat_size("stats.cpu_cache_bytes") + stat_size("stats.transfer_bytes");
        for (int i = 0; i < PAST_RING; i++) {
            blocks[i] = dpm_malloc_aligned(100, 64);
            CHECK(((uintptr_t)blocks[i] & 63) == 0, "aligned block %p", (void *)blocks[i]);
            memset(blocks[i], i & 0xff, 100);
        }
        size_t after = stat_size("stats.cpu_cache_bytes") + stat_size("stats.transfer_bytes");
        CHECK(before >= 128 * 50 && after + 128 * 50 <= before,
              "aligned mallocs took %zu of %zu cached bytes, want at least %d", before - after, before, 128 * 50);
        for (int i = 0; i < PAST_RING; i++) {
            CHECK((unsigned char)blocks[i][0] == (i & 0xff) && (unsigned char)blocks[i][99] == (i & 0xff),
                  "aligned block %d changed: handed out twice", i);
            dpm_free(blocks[i]);
        }
        expect_abort(double_free_aligned_past_quarantine, "free(): double free of");
        expect_abort(double_free_key_overwritten, "malloc(): double free of");
        test_reuse_order();
    }
    test_quarantine_order();
    dpm_ctl("arena.0.purge", NULL, NULL, NULL, 0);
    CHECK(stat_size("stats.cpu_cache_bytes") + stat_size("stats.transfer_bytes") == 0, "purge left blocks cached");
}

static void test_small_quarantine(void)
{
    /* a live block that holds the mark's value is no freed block */
    uint32_t *p = dpm_malloc(64);
    p[2] = 0x7e3d1f5bu;
    CHECK(dpm_usable_size(p) >= 64, "usable size of a live block holding the mark");
    dpm_free(p);
    expect_abort(write_after_free_small, "write after free of");
    expect_abort(write_after_free_small_reused, "write after free of");
    expect_abort(write_after_free_found_by_trim, "write after free of");
    expect_abort(double_free_quarantined_small, "double free of");
    expect_abort(usable_size_of_quarantined_small, "use after free of");
}

/* ---- large blocks: a guard page after each, a quarantine after free ---- */
#define LARGE (256 * 1024)

static void overflow_large_by_one(void)
{
    char *p = dpm_malloc(LARGE);
    volatile char *end = p + dpm_usable_size(p);
    end[0] = 1;
    fprintf(stderr, "wrote past the block\n");
}

static void overflow_grown_large(void)
{
    char *p = dpm_malloc(LARGE);
    for (size_t n = LARGE + 4096; n <= 2 * LARGE; n += 4096)
        p = dpm_realloc(p, n);
    volatile char *end = p + dpm_usable_size(p);
    end[0] = 1;
    fprintf(stderr, "wrote past a grown block\n");
}

/* review r38: q[-1] falls in the guard page of the block before q; an
 * access in a guard's upper half right before a large block is an
 * underflow of that block, not an overflow of the one before (the first
 * pair of blocks laid back to back is used) */
static void underflow_large(void)
{
    for (int i = 0; i < 64; i++) {
        char *p = dpm_malloc(200000), *q = dpm_malloc(200000);
        if (q == p + dpm_usable_size(p) + 4096) {   /* p's run: its usable bytes, then its guard */
            fprintf(stderr, "q at %p\n", (void *)q);
            volatile char *before = (volatile char *)((uintptr_t)q - 1);
            fprintf(stderr, "read %d\n", *before);
        }
    }
    fprintf(stderr, "no two blocks back to back\n");
    abort();
}

static void read_after_free_large(void)
{
    volatile char *p = dpm_malloc(LARGE);
    memset((char *)p, 'a', 16);
    dpm_free((void *)p);
    fprintf(stderr, "read %d\n", p[0]);
}

static void write_after_free_large_reuse(void)
{
    char *p = dpm_malloc(LARGE);
    dpm_free(p);
    keep = dpm_malloc(LARGE);   /* not p's pages: p waits in the quarantine */
    ((volatile char *)p)[64 * 1024 + 1] = 'a';
    fprintf(stderr, "wrote into a freed block\n");
}

static void double_free_quarantined_large(void)
{
    void *p = dpm_malloc(LARGE);
    dpm_free(p);
    for (int i = 0; i < 10; i++)
        dpm_free(dpm_malloc(LARGE));
    dpm_free(keep = p);
}

static void usable_size_of_quarantined_large(void)
{
    void *p = dpm_malloc(LARGE);
    dpm_free(p);
    fprintf(stderr, "usable %zu\n", dpm_usable_size(keep = p));
}

/* A block whose run is at most 256 KiB keeps its pages while it waits
 * (without access: a read after its free faults), so at most 64 such runs
 * stay resident in the quarantine: 300 frees of 128 KiB blocks, each
 * written whole, leave the quarantine's 64 and the runs it let go of,
 * which the next blocks reuse (in a fresh process: what earlier tests
 * left in the heap decides where blocks land). */
static void read_after_free_kept_large(void)
{
    volatile char *p = dpm_malloc(128 * 1024);
    memset((char *)p, 'a', 128 * 1024);
    dpm_free((void *)p);
    fprintf(stderr, "read %d\n", p[100 * 1024]);
}

static void test_large_kept_pages(void)
{
    dpm_ctl("arena.0.purge", NULL, NULL, NULL, 0);
    size_t before = stat_size("stats.resident");
    for (int i = 0; i < 300; i++) {
        char *p = dpm_malloc(128 * 1024);
        CHECK(p != NULL, "malloc(128 KiB)");
        memset(p, i, 128 * 1024);
        dpm_free(p);
    }
    size_t grown = stat_size("stats.resident") - before, run = 128 * 1024 + 4096;
    CHECK(grown <= 2 * 64 * run, "resident grew by %zu bytes over 300 frees of 128 KiB, want at most %zu", grown,
          2 * 64 * run);
    expect_fault_report(read_after_free_kept_large, "use after free", "secure mode's quarantine");
}

/* Correct programs run: every usable byte writable, realloc keeps the
 * contents, and the quarantine holds a bounded number of blocks (their
 * pages still count as active; runs over 256 KiB, as here, lose their
 * memory). */
static void test_large_guards(void)
{
    size_t before = stat_size("stats.active");
    for (int round = 0; round < 500; round++) {
        size_t n = LARGE + (size_t)round * 4099;
        char *p = dpm_malloc(n);
        CHECK(p != NULL, "malloc(%zu)", n);
        memset(p, round, dpm_usable_size(p));
        p = dpm_realloc(p, n * 2);
        CHECK(p != NULL && p[n - 1] == (char)round && p[0] == (char)round, "realloc kept the contents");
        memset(p, 1, dpm_usable_size(p));
        p = dpm_realloc(p, n / 2 + 20000);
        CHECK(p != NULL && p[n / 2] == 1, "realloc down kept the contents");
        dpm_free_sized(p, n / 2 + 20000);
    }
    size_t grown = stat_size("stats.active") - before;
    /* 64 quarantined blocks of at most ~4.4 MiB each, plus their guards */
    CHECK(grown <= (size_t)64 * (5u << 20), "active grew by %zu bytes over 500 large frees", grown);
    expect_fault_report(overflow_large_by_one, "buffer overflow past the end", "secure mode's guard page");
    /* the block it names is q, the one after the guard */
    expect_fault_report_naming(underflow_large, "buffer underflow before the start", "secure mode's guard page",
                               "q at ");
    expect_fault_report(read_after_free_large, "use after free", "secure mode's quarantine");
    expect_fault_report(write_after_free_large_reuse, "use after free", "secure mode's quarantine");
    expect_abort(double_free_quarantined_large, "double free of");
    expect_abort(usable_size_of_quarantined_large, "use after free of");
}

/* ---- review r32: address space, map entries, growth in place ---- */

/* A loop of big blocks, one live at a time, under an address-space limit
 * the quarantine would exhaust: a failed allocation empties it. */
static void big_blocks_under_rlimit_as(void)
{
    long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL || fscanf(f, "%ld", &pages) != 1)
        _exit(3);
    fclose(f);
    size_t vm = (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
    struct rlimit rl = {vm + (512u << 20), vm + (512u << 20)};
    if (setrlimit(RLIMIT_AS, &rl) != 0)
        _exit(3);
    for (int i = 0; i < 40; i++) {
        char *p = dpm_malloc((size_t)24 << 20);
        if (p == NULL) {
            fprintf(stderr, "NULL at pass %d\n", i);
            _exit(1);
        }
        memset(p, i, (size_t)24 << 20);
        dpm_free(p);
    }
    fprintf(stderr, "all passes\n");
}

static size_t map_entries(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    size_t n = 0;
    for (int c; f != NULL && (c = fgetc(f)) != EOF;)
        n += c == '\n';
    if (f != NULL)
        fclose(f);
    return n;
}

static void test_address_space(void)
{
    char err[512];
    int status = run_child(big_blocks_under_rlimit_as, err, sizeof(err));
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0 && strstr(err, "all passes") != NULL,
          "a loop of 24 MiB blocks under RLIMIT_AS failed: status %d, stderr: %s", status, err);

    /* guard pages stop at a budget of map entries (16384 blocks) */
    enum { N = 20000 };
    static void *big[N];
    size_t before = map_entries();
    for (int i = 0; i < N; i++)
        big[i] = dpm_malloc(20000);
    size_t during = map_entries();
    CHECK(during < before + 2 * 16384 + 1000, "%zu map entries with %d guarded blocks (%zu before)", during, N,
          before);
    for (int i = 0; i < N; i++)
        dpm_free(big[i]);

    /* a chain of growth grows in place, its guard moving along */
    char *p = dpm_malloc((size_t)1 << 20);
    int moved = 0;
    for (size_t n = ((size_t)1 << 20) + 4096; n <= ((size_t)4 << 20); n += 4096) {
        char *q = dpm_realloc(p, n);
        CHECK(q != NULL, "realloc to %zu", n);
        moved += q != p;
        p = q;
    }
    CHECK(moved < 64, "a chain of 768 growths by 4 KiB moved %d times", moved);
    dpm_free(p);
    expect_fault_report(overflow_grown_large, "buffer overflow past the end", "secure mode's guard page");
}

static void test_secure(void)
{
    bool secure = false;
    size_t len = sizeof(secure);
    CHECK(dpm_ctl("opt.secure", &secure, &len, NULL, 0) == 0 && secure, "opt.secure is off");
    expect_abort(double_free, "double free");
    expect_abort(wrong_size, "size does not match");
    expect_abort(too_small_for_aligned_block, "size does not match");
    expect_abort(smaller_than_large_request, "size does not match");
    char err[512];
    int status = run_child(correct_sized_frees, err, sizeof(err));
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0 && strstr(err, "all sized frees accepted") != NULL,
          "a correct sized free aborted: status %d, stderr: %s", status, err);
    unsigned char *p = dpm_malloc(256);
    memset(p, 0x11, 256);
    dpm_free_sized(p, 256);
    /* junk: the slab still holds the block; its bytes now read 0x5a */
    CHECK(p[17] == 0x5a, "freed block reads %#x", p[17]);
    test_zero_size_blocks();
    test_small_canaries();
    test_small_quarantine();
    test_past_quarantine();
    test_random_slots();
    test_large_guards();
    test_address_space();
    /* rte_malloc_validate: a block in the quarantine is no live block */
    void *r = dpm_rte_malloc(NULL, 64, 0);
    dpm_free(r);
    CHECK(dpm_rte_malloc_validate(r, NULL) != 0, "a quarantined block validates");
}

static void allocate_some(void)
{
    for (int i = 0; i < 1000; i++) {
        char *p = dpm_malloc(4096 + (size_t)i);
        memset(p, i, 4096);
        dpm_free(p);
    }
    fprintf(stderr, "allocated fine\n");
}

static void test_hugepages(void)
{
    /* the pool of the page size DPMALLOC_CONF asks for */
    const char *conf = getenv("DPMALLOC_CONF");
    FILE *f = fopen(conf != NULL && strstr(conf, "1g") != NULL
                        ? "/sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages"
                        : "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages",
                    "r");
    long n = 0;
    if (f != NULL) {
        if (fscanf(f, "%ld", &n) != 1)
            n = 0;
        fclose(f);
    }
    char err[1024];
    int status = run_child(allocate_some, err, sizeof(err));
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d: %s", status, err);
    CHECK(strstr(err, "allocated fine") != NULL, "stderr: %s", err);
    if (n == 0) {
        const char *w = strstr(err, "hugepages: no huge pages");
        CHECK(w != NULL && strstr(w + 1, "hugepages: no huge pages") == NULL, "want one warning: %s", err);
    }
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "stale-mark") == 0) {   /* in a fresh process, as a program meets it */
        stale_mark_in_fresh_slots();
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "hugepages") == 0)
        test_hugepages();
    else if (argc > 1 && strcmp(argv[1], "kept-pages") == 0)
        test_large_kept_pages();
    else
        test_secure();
    printf("secure_mode %s: %d passed, %d failed\n", argc > 1 ? argv[1] : "secure", failures == 0 ? 1 : 0,
           failures);
    return failures == 0 ? 0 : 1;
}
