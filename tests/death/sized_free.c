/*
 * sized_free.c - sized frees are checked in every mode (docs/design.md,
 * "Misuse checks"), and malloc_usable_size refuses a freed block that
 * waits in a cache.
 *
 * A promise a block could not have been allocated with aborts, naming
 * the call and the pointer: more bytes than a small block has (a
 * `new char` deleted as a 32-byte struct, an over-aligned struct
 * deleted with its size plus 64), a large block's size below what it
 * was asked for or past its usable bytes. Promises a correct program
 * makes pass: the size asked for, any size up to the usable bytes, a
 * size 0 block, an aligned block's size, calloc's product, a large
 * block realloc shrank in place. Each case runs in a forked child.
 * ctest runs it by default, with secure:true and with percpu:false.
 */
#include "test.h"

#include <dpmalloc.h>
#include <dpmalloc/rte_compat.h>
#include <sys/mman.h>

static volatile uintptr_t *shared_ptr;

static void *launder(void *p)
{
    __asm__ volatile("" : "+r"(p));
    return p;
}

static void sized(void *p, size_t size)
{
    *shared_ptr = (uintptr_t)p;
    dpm_free_sized(launder(p), size);
}

/* ---- promises that must abort ---- */
static int bigger_than_a_small_block(void *arg)
{
    (void)arg;
    sized(dpm_malloc(1), 32);   /* hardened_malloc's delete_type_size_mismatch */
    return 0;
}

static int over_aligned_plus_64(void *arg)
{
    (void)arg;
    sized(dpm_malloc_aligned(64, 64), 64 + 64);   /* invalid_aligned_sized_delete_small */
    return 0;
}

static int large_below_its_request(void *arg)
{
    (void)arg;
    sized(dpm_malloc_aligned(300000, 8192), 300000 - 10);
    return 0;
}

/* hardened_malloc's invalid_aligned_sized_delete_large: new of an
 * alignas(8192) struct of 16 KiB, deleted with 10 bytes less. An aligned
 * request bigger than its alignment takes a page run, which records the
 * size asked for (docs/design.md, "Size classes") */
static int aligned_16k_below_its_request(void *arg)
{
    (void)arg;
    sized(dpm_malloc_aligned(16384, 8192), 16384 - 10);
    return 0;
}

static int large_past_its_bytes(void *arg)
{
    (void)arg;
    void *p = dpm_malloc(300000);
    sized(p, dpm_usable_size(p) + 1);
    return 0;
}

static int small_after_other_frees(void *arg)
{
    /* the promise is checked on the fast path too: the thread's leaf
     * cached by earlier frees, the CPU's bin with room */
    size_t size = (size_t)(uintptr_t)arg;
    void *warm[8];
    for (int i = 0; i < 8; i++)
        warm[i] = dpm_malloc(size);
    void *p = dpm_malloc(size);
    for (int i = 0; i < 8; i++)
        dpm_free_sized(warm[i], size);
    sized(p, dpm_usable_size(p) + 1);
    return 0;
}

/* ---- malloc_usable_size of a freed block ---- */
static int usable_size_of_a_cached_block(void *arg)
{
    size_t size = (size_t)(uintptr_t)arg;
    void *p = dpm_malloc(size), *q = dpm_malloc(size);
    dpm_free(p);   /* into a cache (or home, where the mode caches none) */
    dpm_free(q);
    *shared_ptr = (uintptr_t)p;
    volatile size_t n = dpm_usable_size(launder(p));
    (void)n;
    return 0;
}

static void expect_abort(const char *name, int (*fn)(void *), void *arg, const char *call, const char *what)
{
    struct test_child c;
    *shared_ptr = 0;
    if (test_run_child(fn, arg, &c, 30) != 0) {
        TEST_FAIL("%s: fork failed", name);
        return;
    }
    char desc[128];
    uintptr_t p = *shared_ptr;
    if (!WIFSIGNALED(c.status) || WTERMSIG(c.status) != SIGABRT)
        TEST_FAIL("%s: child %s, want SIGABRT", name, test_describe_status(c.status, desc, sizeof desc));
    else if (!strstr(c.err, "dpmalloc") || !strstr(c.err, call) || (what != NULL && !strstr(c.err, what)))
        TEST_FAIL("%s: stderr does not say dpmalloc, \"%s\" and \"%s\": %s", name, call, what, c.err);
    else if (!p || !test_text_has_pointer(c.err, p))
        TEST_FAIL("%s: stderr does not print the pointer %p: %s", name, (void *)p, c.err);
}

TEST(impossible_promises_abort)
{
    expect_abort("new char deleted as 32 bytes", bigger_than_a_small_block, NULL, "free_sized",
                 "size does not match");
    expect_abort("aligned 64 deleted as 128", over_aligned_plus_64, NULL, "free_sized", "size does not match");
    expect_abort("large aligned, 10 bytes short", large_below_its_request, NULL, "free_sized",
                 "size does not match");
    expect_abort("16 KiB aligned to 8 KiB, 10 bytes short", aligned_16k_below_its_request, NULL, "free_sized",
                 "size does not match");
    expect_abort("large, a byte past its bytes", large_past_its_bytes, NULL, "free_sized", "size does not match");
    static const size_t sizes[] = {16, 64, 100, 1024, 3000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char name[80];
        snprintf(name, sizeof name, "%zu B, usable + 1, after sized frees", sizes[i]);
        expect_abort(name, small_after_other_frees, (void *)(uintptr_t)sizes[i], "free_sized",
                     "size does not match");
    }
}

/* review r32: dpm_realloc_socket of a block freed into a cache kept it
 * in place, and the cache handed it out again */
static int socket_realloc_of_a_freed_block(void *arg)
{
    (void)arg;
    void *p = dpm_malloc_socket(64, 0, 0), *q = dpm_malloc_socket(64, 0, 0);
    dpm_free(p);
    dpm_free(q);
    *shared_ptr = (uintptr_t)p;
    void *volatile r = dpm_realloc_socket(launder(p), 50, 0, 0);
    (void)r;
    return 0;
}

TEST(usable_size_of_freed_blocks_aborts)
{
    /* in words that depend on where the block waits: a cache ("use after
     * free of") or its slab ("double free or never-allocated pointer") */
    expect_abort("dpm_realloc_socket of a freed block", socket_realloc_of_a_freed_block, NULL, "dpm_realloc_socket",
                 NULL);
    static const size_t sizes[] = {16, 64, 1024};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char name[80];
        snprintf(name, sizeof name, "dpm_usable_size of a freed %zu B block", sizes[i]);
        expect_abort(name, usable_size_of_a_cached_block, (void *)(uintptr_t)sizes[i], "dpm_usable_size",
                     "use after free of");
    }
}

/* ---- promises that pass (in this process: an abort fails the test) ---- */
TEST(true_promises_pass)
{
    for (size_t size = 0; size <= 70000; size += size < 512 ? 1 : 997) {
        void *p = dpm_malloc(size);
        EXPECT_TRUE(p != NULL);
        dpm_free_sized(p, size);
        p = dpm_malloc(size);
        dpm_free_sized(p, dpm_usable_size(p));   /* every usable byte may be promised */
    }
    static const size_t aligns[] = {16, 32, 64, 256, 4096, 8192, 65536};
    for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; i++)
        for (size_t size = 0; size <= 20000; size += 61) {
            void *p = dpm_malloc_aligned(size, aligns[i]);
            EXPECT_TRUE(p != NULL);
            dpm_free_sized(p, size);
        }
    void *p = dpm_calloc(10, 100);
    dpm_free_sized(p, 1000);
    p = dpm_malloc(1 << 20);
    p = dpm_realloc(p, (1 << 20) - 4096);   /* shrunk in place: its request is the new size */
    dpm_free_sized(p, (1 << 20) - 4096);
    p = dpm_malloc(100000);
    p = dpm_realloc(p, 200000);
    p = dpm_realloc(p, 400000);
    dpm_free_sized(p, 400000);
    p = dpm_malloc(100000);   /* from the large cache, with slack */
    dpm_free_sized(p, 100000);
    /* shrunk in place by the socket and rte_malloc-shaped reallocs
     * (review r31: their requests were not recorded) */
    p = dpm_malloc_socket(300000, 0, 0);
    void *q = dpm_realloc_socket(p, 100000, 0, 0);
    EXPECT_TRUE(q != NULL);
    dpm_free_sized(q, 100000);
    p = dpm_rte_malloc(NULL, 300000, 0);
    q = dpm_rte_realloc(p, 290000, 0);
    EXPECT_TRUE(q == p);
    dpm_free_sized(q, 290000);
    /* small blocks shrunk in place by them (review r32: secure mode's
     * class check refused the new size) */
    p = dpm_malloc_socket(40, 0, 0);
    q = dpm_realloc_socket(p, 11, 0, 0);
    EXPECT_TRUE(q != NULL);
    dpm_free_sized(q, 11);
    p = dpm_rte_malloc(NULL, 121, 0);
    q = dpm_rte_realloc(p, 93, 0);
    EXPECT_TRUE(q != NULL);
    dpm_free_sized(q, 93);
    /* an aligned page run (size above its alignment, beyond a page)
     * shrunk or grown in place: its request is the new size */
    p = dpm_malloc_aligned(40000, 8192);
    q = dpm_realloc_aligned(p, 30000, 8192);
    EXPECT_TRUE(q != NULL);
    dpm_free_sized(q, 30000);
    p = dpm_malloc_aligned(40000, 8192);
    q = dpm_realloc(p, 20000);
    EXPECT_TRUE(q != NULL);
    dpm_free_sized(q, 20000);
}

int main(void)
{
    shared_ptr = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared_ptr == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    RUN(impossible_promises_abort);
    RUN(usable_size_of_freed_blocks_aborts);
    RUN(true_promises_pass);
    return test_done();
}
