/*
 * test_phased_cache.c - aligned-at-offset ("phased") blocks go through the
 * CPU caches on free as on allocation (issue 19, item 6): a phased bin of
 * an automatic arena carries a page-map tag of the phased ranges (span.h),
 * the free fast path pushes its blocks onto that tag's bin of the CPU's
 * cache, and dpm_malloc_aligned_at pops them from there.
 *
 * Checked: a block freed and asked for again on the same (pinned) CPU is
 * the same block, and sits in the CPU cache meanwhile; every block has
 * its alignment at its offset; a tag's bin holds at most its capacity
 * (cpu_caches_check); a double free of a cached phased block and a free
 * of an interior pointer (the aligned address, and the slab's first page,
 * which lies before the object grid) abort with their messages in a
 * child; a purge (arena.<i>.purge, malloc_trim's drain) empties the
 * tags' bins (stats.cpu_cache_bytes is 0 after it); threads that free each other's phased blocks, with a
 * pattern checked on every block, leave the caches whole; once every tag
 * is taken, new (class, phase) pairs keep TC_NONE and still work; a
 * manual arena's phased blocks carry no tag, and the arena is destroyed
 * after its thread's frees.
 * In mode thread (DPM_THREAD_CACHES_ONLY, percpu:false) phased blocks keep
 * the thread caches' path (stashes on allocation, frees home): the checks
 * of the CPU caches are skipped there, the others run.
 */
#include "alloc.h"
#include "dpmalloc.h"
#include "unit.h"

#include <pthread.h>
#include <sched.h>

#define ALIGN 64
#define OFFSET 4

static bool aligned_at(const void *p, size_t align, size_t offset)
{
    return ((uintptr_t)p + offset) % align == 0;
}

static void pin_here(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET((unsigned)sched_getcpu(), &set);
    EXPECT_TRUE(sched_setaffinity(0, sizeof(set), &set) == 0, "pin");
}

static void allow_all_cpus(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    for (unsigned c = 0; c < CPU_SETSIZE; c++)
        CPU_SET(c, &set);
    (void)sched_setaffinity(0, sizeof(set), &set);
}

/* What malloc_trim does, through the API this test links (the library
 * without the libc overrides): purge the thread's arena, which drains
 * every CPU's cache first. */
static bool trim_quietly(void)
{
    unsigned a = 0;
    size_t len = sizeof a;
    char name[64];
    if (dpm_ctl("thread.arena", &a, &len, NULL, 0) != 0)
        return false;
    snprintf(name, sizeof name, "arena.%u.purge", a);
    return dpm_ctl(name, NULL, NULL, NULL, 0) == 0;
}

static void trim(void) { EXPECT_TRUE(trim_quietly(), "thread.arena or arena.<i>.purge failed"); }

static size_t stat_size(const char *name)
{
    uint64_t e = 1;
    size_t v = 0, len = sizeof v;
    EXPECT_TRUE(dpm_ctl("epoch", NULL, NULL, &e, sizeof e) == 0, "epoch");
    EXPECT_TRUE(dpm_ctl(name, &v, &len, NULL, 0) == 0, "%s", name);
    return v;
}

/* The rewrite vectors of bench/tunnels.c: 44..104 bytes at 64 @ 4. */
static void test_round_trip(void)
{
    pin_here();
    for (size_t size = 44; size <= 104; size += 4) {
        void *p = dpm_malloc_aligned_at(size, ALIGN, OFFSET);
        EXPECT_TRUE(p != NULL && aligned_at(p, ALIGN, OFFSET), "%zu bytes at 64@4: %p", size, p);
        const span_t *s = span_of(p);
        unsigned k = s->tcache_class;
        EXPECT_TRUE(tc_class_is_phased(k), "%zu bytes at 64@4: tcache_class %u is no phased tag", size, k);
        EXPECT_TRUE(s->base != s->start, "a phased slab's grid starts past its first byte");
        memset(p, 0x5c, size);
        dpm_free(p);
        if (!cpu_caches_on)
            continue;
        EXPECT_TRUE(cpu_caches_hold(p, k), "%zu bytes: a freed phased block is not in a CPU cache", size);
        void *q = dpm_malloc_aligned_at(size, ALIGN, OFFSET);
        EXPECT_TRUE(q == p, "%zu bytes: freed %p, got %p back on the same CPU", size, p, q);
        EXPECT_TRUE(!cpu_caches_hold(q, k), "%zu bytes: a handed-out block is still cached", size);
        EXPECT_TRUE(*tc_key_word(q) != TC_FREE_KEY, "the handout cleared the free key");
        dpm_free(q);
    }
    allow_all_cpus();
}

/* Many blocks at once: each aligned, distinct; their frees overflow the
 * tag's bin (its capacity is CPU_PHASED_SLOTS at most), which stays
 * whole. */
#define MANY 5000
static void *many[MANY];
static void test_many(void)
{
    for (int round = 0; round < 3; round++) {
        for (unsigned i = 0; i < MANY; i++) {
            size_t size = 44 + 4 * (i % 16);
            many[i] = dpm_malloc_aligned_at(size, ALIGN, OFFSET);
            EXPECT_TRUE(many[i] != NULL && aligned_at(many[i], ALIGN, OFFSET), "block %u: %p", i, many[i]);
            memset(many[i], (int)i, size);
        }
        for (unsigned i = 0; i < MANY; i++) {
            size_t size = 44 + 4 * (i % 16);
            for (size_t b = 0; b < size; b++)
                if (((unsigned char *)many[i])[b] != (unsigned char)i) {
                    EXPECT_TRUE(false, "block %u overwritten at byte %zu", i, b);
                    break;
                }
        }
        for (unsigned i = 0; i < MANY; i++)
            dpm_free(many[round % 2 == 0 ? i : MANY - 1 - i]);
        const char *why = cpu_caches_check();
        EXPECT_TRUE(why == NULL, "after %d rounds: %s", round + 1, why);
    }
}

static void free_twice(void *p) { dpm_free(p); }
static void free_it(void *p) { dpm_free(p); }

static void test_misuse(void)
{
    pin_here();
    void *p = dpm_malloc_aligned_at(60, ALIGN, OFFSET);
    const span_t *s = span_of(p);
    /* interior pointers: the aligned address, and the slab's first page,
     * which lies before the first object */
    expect_child_aborts(free_it, (char *)p + OFFSET, "invalid pointer");
    expect_child_aborts(free_it, (void *)s->start, "invalid pointer");
    dpm_free(p);
    if (cpu_caches_on)
        EXPECT_TRUE(cpu_caches_hold(p, s->tcache_class), "the freed block sits in a CPU cache");
    /* in mode thread it went home: the slab's bit finds the second free */
    expect_child_aborts(free_twice, p, "double free");
    allow_all_cpus();
}

static void test_trim(void)
{
    void *v[200];
    for (unsigned i = 0; i < 200; i++)
        v[i] = dpm_malloc_aligned_at(44 + 4 * (i % 16), ALIGN, OFFSET);
    for (unsigned i = 0; i < 200; i++)
        dpm_free(v[i]);
    if (cpu_caches_on)
        EXPECT_TRUE(stat_size("stats.cpu_cache_bytes") != 0, "the frees left blocks in the CPU caches");
    trim();
    EXPECT_TRUE(stat_size("stats.cpu_cache_bytes") == 0, "arena.<i>.purge left %zu bytes in the CPU caches",
                stat_size("stats.cpu_cache_bytes"));
    const char *why = cpu_caches_check();
    EXPECT_TRUE(why == NULL, "after arena.<i>.purge: %s", why);
}

/* ---- threads that free each other's phased blocks ---------------------- */

#define NWORKERS 4
#define MAILBOX 128
#define OPS 60000
static struct mailbox {
    pthread_mutex_t lock;
    void *slot[MAILBOX];
    uint32_t tag[MAILBOX];
    unsigned n;
} boxes[NWORKERS];

/* (align, offset) pairs: several tags per thread. Under ASan, offsets
 * that leave block starts 8-byte aligned only: ASan's shadow byte covers
 * 8 bytes, so two blocks that share one (a phase of 4 mod 8) have their
 * annotations race on it when two threads allocate and free them at
 * once, and a live block can read as poisoned; the single-threaded tests
 * above keep offset 4. */
#ifdef DPM_TEST_SANITIZED
static const size_t shapes[][2] = {{64, 8}, {64, 24}, {32, 16}, {128, 8}, {64, 40}};
#else
static const size_t shapes[][2] = {{64, 4}, {64, 12}, {32, 4}, {128, 8}, {64, 36}};
#endif

static void fill(void *p, size_t size, uint32_t tag)
{
    for (size_t b = 0; b < size; b++)
        ((unsigned char *)p)[b] = (unsigned char)(tag + b);
}

static bool intact(const void *p, size_t size, uint32_t tag)
{
    for (size_t b = 0; b < size; b++)
        if (((const unsigned char *)p)[b] != (unsigned char)(tag + b))
            return false;
    return true;
}

/* tag: shape in bits 0..7, size in bits 8..15, sequence above */
static size_t tag_size(uint32_t tag) { return 20 + (tag >> 8 & 0xff) % 90; }

static void *worker(void *arg)
{
    unsigned me = (unsigned)(uintptr_t)arg;
    uint64_t rng = 1234 + me;
    unsigned bad = 0;
    for (long k = 0; k < OPS; k++) {
        uint32_t tag = (uint32_t)unit_rand(&rng);
        unsigned shape = (tag & 0xff) % (sizeof shapes / sizeof shapes[0]);
        size_t size = tag_size(tag);
        void *p = dpm_malloc_aligned_at(size, shapes[shape][0], shapes[shape][1]);
        if (p == NULL || !aligned_at(p, shapes[shape][0], shapes[shape][1])) {
            bad++;
            continue;
        }
        fill(p, size, tag);
        struct mailbox *to = &boxes[(me + 1 + k % (NWORKERS - 1)) % NWORKERS];
        void *old = NULL;
        uint32_t old_tag = 0;
        pthread_mutex_lock(&to->lock);
        if (to->n == MAILBOX) {
            unsigned i = (unsigned)(unit_rand(&rng) % MAILBOX);
            old = to->slot[i], old_tag = to->tag[i];
            to->slot[i] = p, to->tag[i] = tag;
        } else {
            to->slot[to->n] = p, to->tag[to->n++] = tag;
        }
        pthread_mutex_unlock(&to->lock);
        if (old != NULL) {
            bad += !intact(old, tag_size(old_tag), old_tag);
            dpm_free(old);
        }
        /* take back from our own box now and then: frees by the thread
         * that did not allocate */
        struct mailbox *mine = &boxes[me];
        pthread_mutex_lock(&mine->lock);
        void *got = mine->n > 0 && k % 3 == 0 ? mine->slot[--mine->n] : NULL;
        uint32_t got_tag = got != NULL ? mine->tag[mine->n] : 0;
        pthread_mutex_unlock(&mine->lock);
        if (got != NULL) {
            bad += !intact(got, tag_size(got_tag), got_tag);
            dpm_free(got);
        }
        /* drains every CPU's cache meanwhile (a worker counts its own
         * failures: the checks' counters belong to the main thread) */
        if (k % 5003 == 0 && me == 0)
            bad += !trim_quietly();
    }
    return (void *)(uintptr_t)bad;
}

static void test_threads(void)
{
    pthread_t t[NWORKERS];
    /* every box's lock before the first worker, which sends to the others */
    for (unsigned i = 0; i < NWORKERS; i++)
        pthread_mutex_init(&boxes[i].lock, NULL);
    for (unsigned i = 0; i < NWORKERS; i++)
        EXPECT_TRUE(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i) == 0, "pthread_create");
    uintptr_t bad = 0;
    for (unsigned i = 0; i < NWORKERS; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad += (uintptr_t)r;
    }
    EXPECT_TRUE(bad == 0, "%lu blocks misaligned, missing or overwritten", (unsigned long)bad);
    for (unsigned i = 0; i < NWORKERS; i++)
        while (boxes[i].n > 0) {
            boxes[i].n--;
            EXPECT_TRUE(intact(boxes[i].slot[boxes[i].n], tag_size(boxes[i].tag[boxes[i].n]), boxes[i].tag[boxes[i].n]),
                        "a block left in a mailbox was overwritten");
            dpm_free(boxes[i].slot[boxes[i].n]);
        }
    const char *why = cpu_caches_check();
    EXPECT_TRUE(why == NULL, "after the threads: %s", why);
}

/* A thread bound to a manual arena: its phased blocks carry no tag (no
 * cache may hold them past a reset or destroy), and the arena can be
 * destroyed once the thread let go of it. */
static void *manual_thread(void *arg)
{
    unsigned a = *(unsigned *)arg;
    EXPECT_TRUE(dpm_ctl("thread.arena", NULL, NULL, &a, sizeof a) == 0, "thread.arena");
    void *v[100];
    for (unsigned i = 0; i < 100; i++) {
        v[i] = dpm_malloc_aligned_at(44 + 4 * (i % 16), ALIGN, OFFSET);
        EXPECT_TRUE(v[i] != NULL && aligned_at(v[i], ALIGN, OFFSET), "manual block %u: %p", i, v[i]);
        const span_t *s = span_of(v[i]);
        EXPECT_TRUE(s->arena->manual && s->tcache_class == TC_NONE, "a manual arena's phased block has tag %u",
                    s->tcache_class);
    }
    for (unsigned i = 0; i < 100; i++) {
        const span_t *s = span_of(v[i]);
        dpm_free(v[i]);
        /* straight home: free in its slab at once, in no cache (or its
         * slab, emptied, went back to the arena's pages) */
        EXPECT_TRUE(s->kind != SPAN_SLAB || span_block_is_free(s, span_block_index(s, (uintptr_t)v[i])),
                    "a manual arena's phased block did not go home");
    }
    return NULL;
}

static void test_manual_arena(void)
{
    unsigned a = 0;
    size_t len = sizeof a;
    EXPECT_TRUE(dpm_ctl("arenas.create", &a, &len, NULL, 0) == 0, "arenas.create");
    pthread_t t;
    EXPECT_TRUE(pthread_create(&t, NULL, manual_thread, &a) == 0, "pthread_create");
    pthread_join(t, NULL);
    char name[64];
    snprintf(name, sizeof name, "arena.%u.destroy", a);
    EXPECT_TRUE(dpm_ctl(name, NULL, NULL, NULL, 0) == 0, "%s", name);
}

/* Past the last tag: (class, phase) pairs beyond TC_PHASED_NTAGS keep
 * TC_NONE and bypass the caches, correctly aligned all the same; so do
 * phases that are not a multiple of 4 (odd offsets: a slot's low bit is
 * a flag). */
static void test_tags_used_up(void)
{
    unsigned untagged = 0;
    for (size_t off = 1; off < 256; off++) {
        void *p = dpm_malloc_aligned_at(100, 256, off);
        EXPECT_TRUE(p != NULL && aligned_at(p, 256, off), "100 bytes at 256@%zu: %p", off, p);
        unsigned k = span_of(p)->tcache_class;
        EXPECT_TRUE(k == TC_NONE || tc_class_is_phased(k), "tcache_class %u", k);
        EXPECT_TRUE(off % 4 == 0 || k == TC_NONE, "offset %zu: tagged %u", off, k);
        untagged += k == TC_NONE;
        memset(p, 1, 100);
        dpm_free(p);
        void *q = dpm_malloc_aligned_at(100, 256, off);
        EXPECT_TRUE(q != NULL && aligned_at(q, 256, off), "again at 256@%zu: %p", off, q);
        dpm_free(q);
    }
    EXPECT_TRUE(untagged > 255 - 255 / 4, "the 63 pairs at offsets 4, 8, .. 252 all got one of %u tags",
                (unsigned)TC_PHASED_NTAGS);
    for (unsigned i = 0; i < TC_PHASED_NTAGS; i++)
        EXPECT_TRUE(arena_phased_tag_class(tc_phased_class_at(i)) < NSMALL, "phased tag %u unused",
                    tc_phased_class_at(i));
    const char *why = cpu_caches_check();
    EXPECT_TRUE(why == NULL, "after the tags ran out: %s", why);
}

int main(void)
{
    dpm_free(dpm_malloc(1));   /* initialise */
    printf("test_phased_cache: front end %s\n", cpu_caches_on ? "cpu" : "thread");
    test_round_trip();
    test_many();
    test_misuse();
    test_trim();
    test_threads();
    test_manual_arena();
    test_tags_used_up();
    return unit_finish("test_phased_cache");
}
