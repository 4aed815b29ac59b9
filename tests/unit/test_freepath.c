/*
 * test_freepath.c - what the free fast path (alloc.h) relies on: page-map
 * entries tagged with their span's tcache_class (slabs on every page;
 * large blocks, tag 0, also when grown in place), and
 * the thread's cached page-map leaf following frees across 4 GiB
 * regions, with frees still landing in their bin and an immediate double
 * free still caught right after a leaf switch (in a child process); and
 * the bin's hot block mirroring *head through pushes, pops, flushes and
 * refills; the free key written by caching frees, cleared by handouts
 * (fast pop, low water, refill), and a live block holding the key's value
 * freed and realloc'd without an abort.
 */
#include "alloc.h"
#include "dpmalloc.h"
#include "unit.h"

#include <signal.h>
#include <string.h>
#if DPM_ASAN
#include <sanitizer/asan_interface.h>
#endif
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* The thread caches' free path: this program runs on them (its CPU
 * caches' counterpart is test_cpu_cache). */
const char *dpm_conf = "percpu:false";

#define MAX_BLOCKS 400000
/* Address space reserved (not committed) below the heap: more than a leaf */
#define HOG (((size_t)1 << (LG_PAGE + RADIX_LG_LEAF)) + ((size_t)1 << 30))

static void expect_tagged_pages(void *p, const char *what)
{
    span_t *s = span_of(p);
    EXPECT_TRUE(s != NULL, "%s %p has no span", what, p);
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->npages; i++) {
        uintptr_t e = radix_entry(s->start + (i << LG_PAGE));
        bool mapped = s->kind == SPAN_SLAB || i == 0 || i + 1 == s->npages;
        EXPECT_TRUE(e == (mapped ? span_entry(s) : 0), "%s %p page %zu: entry %#lx, span %p class %u", what, p, i,
                    (unsigned long)e, (void *)s, s->tcache_class);
    }
}

static uintptr_t leaf_of(const void *p) { return (uintptr_t)p >> TC_LEAF_SHIFT; }

static void test_tags(void)
{
    void *small = dpm_malloc(64);
    expect_tagged_pages(small, "64-byte block");
    EXPECT_TRUE(radix_entry_tag(radix_entry((uintptr_t)small)) == tc_tag_of_class(sc_of_size(64)),
                "a 64-byte block's tag is not its class's");
    /* large blocks carry tag 0: their frees reach the large cache through
     * the slow path */
    void *cached = dpm_malloc(20 << 10);
    expect_tagged_pages(cached, "cacheable large block");
    EXPECT_TRUE(radix_entry_tag(radix_entry((uintptr_t)cached)) == 0, "a large block has a tag");
    void *big = dpm_malloc(4 << 20);
    expect_tagged_pages(big, "large block");
    EXPECT_TRUE(radix_entry_tag(radix_entry((uintptr_t)big)) == 0, "a large block has a tag");
    void *grown = dpm_realloc(cached, 300 << 10);
    if (grown == cached)
        expect_tagged_pages(grown, "large block grown in place");
    dpm_free(small);
    dpm_free(grown);
    dpm_free(big);
}

static void **blocks;
static size_t nblocks;

/* Two 64-byte blocks in different page-map leaves: the address space below
 * the heap is reserved away so that new segments land elsewhere. False if
 * the layout did not give any. */
static bool blocks_in_two_leaves(void **a, void **b)
{
    void *hog = mmap(NULL, HOG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    blocks = mmap(NULL, MAX_BLOCKS * sizeof(void *), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_TRUE(blocks != MAP_FAILED, "mmap");
    if (blocks == MAP_FAILED)
        return false;
    bool found = false;
    blocks[0] = dpm_malloc(64);
    for (nblocks = 1; nblocks < MAX_BLOCKS && !found; nblocks++) {
        blocks[nblocks] = dpm_malloc(64);
        found = leaf_of(blocks[nblocks]) != leaf_of(blocks[0]);
    }
    *a = blocks[0];
    *b = blocks[nblocks - 1];
    if (hog != MAP_FAILED)
        munmap(hog, HOG);
    return found;
}

struct two_blocks {
    void *a, *b;
};

static void free_after_switch_twice(void *arg)
{
    struct two_blocks *t = arg;
    dpm_free(t->a);
    dpm_free(t->b);   /* leaf switch */
    dpm_free(t->b);
}

static void test_double_free_after_switch(void *a, void *b)
{
    struct two_blocks t = {a, b};
    expect_child_aborts(free_after_switch_twice, &t, "double free");
}

static void test_leaf_switch(void)
{
    void *a, *b;
    if (!blocks_in_two_leaves(&a, &b)) {
        printf("test_freepath: no blocks in two page-map leaves, leaf switch not tested\n");
        return;
    }
    test_double_free_after_switch(a, b);
    tcache_t *tc = tls_thread.tcache;
    tc_bin_t *bin = &tc->bins[span_of(a)->tcache_class];
    EXPECT_TRUE(span_of(b)->tcache_class == span_of(a)->tcache_class, "blocks of one class in two bins");
    unsigned before = tc_bin_count(bin);
    dpm_free(a);
    EXPECT_EQ_U(tls_thread.leaf_key, leaf_of(a));
    dpm_free(b);
    EXPECT_EQ_U(tls_thread.leaf_key, leaf_of(b));
    EXPECT_EQ_U(tc_bin_count(bin), before + 2);
    EXPECT_TRUE(bin->head[0] == b && bin->head[1] == a, "the frees did not land in their bin");
    EXPECT_TRUE(bin->hot == b, "hot is not the block just freed");
    EXPECT_TRUE(dpm_malloc(64) == b && dpm_malloc(64) == a, "pops are not last in, first out");
    /* through flushes (bin full), refills (empty) and trims */
    for (size_t i = 1; i + 1 < nblocks; i++) {
        dpm_free(blocks[i]);
        if (i % 1000 == 0)
            EXPECT_TRUE(bin->hot == *bin->head, "hot is not *head after %zu frees", i);
    }
    for (size_t i = 1; i + 1 < nblocks; i++) {
        blocks[i] = dpm_malloc(64);
        if (i % 1000 == 0)
            EXPECT_TRUE(bin->hot == *bin->head, "hot is not *head after %zu mallocs", i);
    }
    for (size_t i = 1; i + 1 < nblocks; i++)
        dpm_free(blocks[i]);
    EXPECT_TRUE(bin->hot == *bin->head, "hot is not *head");
}

/* The key word of p as the allocator sees it. In ASan builds a freed
 * block is poisoned, key included, outside the allocator's own accesses
 * (src/annotate.h): the test peeks through a window it closes again. */
static uint32_t peek_key(void *p)
{
#if DPM_ASAN
    char *k = (char *)tc_key_word(p);
    bool poisoned = __asan_region_is_poisoned(k, sizeof(uint32_t)) != NULL;
    ASAN_UNPOISON_MEMORY_REGION(k, sizeof(uint32_t));
    uint32_t v = *tc_key_word(p);
    if (poisoned)
        ASAN_POISON_MEMORY_REGION(k, sizeof(uint32_t));
    return v;
#else
    return *tc_key_word(p);
#endif
}

/* The free key: written by a caching free, cleared by every handout from
 * a cache, and never a reason to abort by itself. */
static void test_free_key(void)
{
    EXPECT_TRUE((TC_FREE_KEY & 1) == 1, "the key is odd: %#x", TC_FREE_KEY);
    void *p = dpm_malloc(64);
    dpm_free(p);
    EXPECT_TRUE(peek_key(p) == TC_FREE_KEY, "a cached block holds the key");
    void *q = dpm_malloc(64);
    EXPECT_TRUE(q == p, "the cache hands the block back");
    EXPECT_TRUE(peek_key(q) == 0, "a handout clears the key");
    /* A live block that holds the key's value (as a program might by
     * chance) frees normally: the lookup finds it in no cache. */
    *tc_key_word(q) = TC_FREE_KEY;
    dpm_free(q);
    EXPECT_TRUE(dpm_malloc(64) == q, "the block was cached as usual");
    /* Through the slow paths too: a bin at low water, a miss refill, a
     * large cached class, and realloc of a live keyed block. */
    void *v[300];
    for (int i = 0; i < 300; i++) {
        v[i] = dpm_malloc(96);
        EXPECT_TRUE(peek_key(v[i]) != TC_FREE_KEY, "handout %d of 96 B holds the key", i);
        *tc_key_word(v[i]) = TC_FREE_KEY;
    }
    for (int i = 0; i < 300; i++)
        dpm_free(v[i]);
    for (int i = 0; i < 300; i++) {
        v[i] = dpm_malloc(96);
        EXPECT_TRUE(peek_key(v[i]) != TC_FREE_KEY, "re-handout %d of 96 B holds the key", i);
    }
    for (int i = 0; i < 300; i++)
        dpm_free(v[i]);
    void *big = dpm_malloc(40000);
    *tc_key_word(big) = TC_FREE_KEY;
    big = dpm_realloc(big, 50000);
    EXPECT_TRUE(big != NULL, "realloc of a live keyed block");
    dpm_free(big);
    dpm_free(q);
}

int main(void)
{
    dpm_free(dpm_malloc(1));   /* brings the allocator and this thread's cache up */
    test_tags();
    test_leaf_switch();
    test_free_key();
    return unit_finish("test_freepath");
}
