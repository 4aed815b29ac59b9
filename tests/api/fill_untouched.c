/*
 * fill_untouched.c - a thread cache hands out the blocks of a fill without
 * writing into them unless a flush brought them home (those hold the free
 * key), and blocks handed out after a flush do not carry the key.
 *
 * A store per handout into a 4 KiB block touched a new page and a cold
 * line per call: the frag workload's 4096-byte pairs got slower once their
 * blocks fell out of the last-level cache (docs/design.md, "The free
 * key"). The check is structural: the blocks a fill cached are made
 * read-only before they are handed out, so any write faults.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "dpmalloc.h"
#include "test.h"

static sigjmp_buf fault_jmp;
static volatile sig_atomic_t faulted;

static void on_fault(int sig)
{
    (void)sig;
    faulted = 1;
    siglongjmp(fault_jmp, 1);
}

/* The first alloc of a fresh bin fills it from a fresh slab, lowest
 * address first, so the next NEXT calls return p0 + k * size. Those
 * blocks' pages are read-only while they are handed out. */
#define NEXT 3
static void handouts_do_not_write(size_t size, bool aligned)
{
    void *p0 = aligned ? dpm_malloc_aligned(size, size) : dpm_malloc(size);
    EXPECT_TRUE(p0 != NULL);
    EXPECT_TRUE(((uintptr_t)p0 & 4095) == 0);
    char *next = (char *)p0 + size;
    EXPECT_EQ_I(mprotect(next, NEXT * size, PROT_READ), 0);
    struct sigaction sa, old_segv, old_bus;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fault;
    sigaction(SIGSEGV, &sa, &old_segv);
    sigaction(SIGBUS, &sa, &old_bus);
    void *got[NEXT] = {0};
    faulted = 0;
    int k = 0;
    if (sigsetjmp(fault_jmp, 1) == 0)
        for (; k < NEXT; k++)
            got[k] = aligned ? dpm_malloc_aligned(size, size) : dpm_malloc(size);
    sigaction(SIGSEGV, &old_segv, NULL);
    sigaction(SIGBUS, &old_bus, NULL);
    EXPECT_EQ_I(mprotect(next, NEXT * size, PROT_READ | PROT_WRITE), 0);
    if (faulted)
        TEST_FAIL("handout %d of size %zu wrote into a block a fill cached", k + 1, size);
    for (int i = 0; i < NEXT && !faulted; i++)
        EXPECT_EQ_U((uintptr_t)got[i], (uintptr_t)(next + (size_t)i * size));
    for (int i = 0; i < NEXT; i++)
        dpm_free(got[i]);
    dpm_free(p0);
}

TEST(aligned_4096_fill_is_not_written) { handouts_do_not_write(4096, true); }
TEST(malloc_8192_fill_is_not_written) { handouts_do_not_write(8192, false); }

/* A block freed into the cache holds the key, and keeps it in its slab
 * after a flush (a double free of it, once a fill brings it back into a
 * cache, must still be found); handed out again, it must not hold it: a
 * key left in it would send its next free through the double-free
 * lookup. */
TEST(flushed_block_holds_no_key)
{
    enum { N = 64 };
    void *b[N];
    for (int i = 0; i < N; i++) {
        b[i] = dpm_malloc(4096);
        EXPECT_TRUE(b[i] != NULL);
    }
    for (int i = 0; i < N; i++)
        dpm_free(b[i]);
    EXPECT_EQ_I(dpm_ctl("thread.tcache.flush", NULL, NULL, NULL, 0), 0);
    int seen = 0;
    for (int i = 0; i < N; i++) {
        b[i] = dpm_malloc(4096);
        uint32_t key;
        memcpy(&key, (char *)b[i] + 8, sizeof key);
        if (key == 0xa3d95e17u)
            seen++;
    }
    EXPECT_EQ_I(seen, 0);
    for (int i = 0; i < N; i++)
        dpm_free(b[i]);
}

int main(void)
{
    RUN(aligned_4096_fill_is_not_written);
    RUN(malloc_8192_fill_is_not_written);
    RUN(flushed_block_holds_no_key);
    return test_done();
}
