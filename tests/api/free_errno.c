/*
 * free_errno.c - every free path leaves errno alone (POSIX.1-2024 free:
 * "shall not modify errno"), also when the kernel refuses the munmap the
 * free makes.
 *
 * A freed block of 32 MiB or more goes back to the OS at once: its segment
 * is unmapped. Segments mapped next to each other share one kernel VMA, so
 * unmapping one in the middle splits that VMA, which needs one more VMA;
 * at vm.max_map_count the kernel refuses with ENOMEM. This test makes
 * that happen on purpose: it allocates the block, maps a page right below
 * and right above the VMA that holds it (same flags, so the kernel merges
 * them: the block's segment is then strictly inside one VMA), and fills
 * the process's VMA budget by splitting a region of its own page by page
 * (mprotect) until the kernel says ENOMEM. A control munmap of a page in
 * the middle of a mapping must then fail with ENOMEM (else the setup did
 * not reach the limit and the test fails). With errno set to a marker,
 * the free must leave the marker. Done for free, free_sized,
 * free_aligned_sized, realloc(p, 0) and, in the static build, dpm_free.
 * Unprivileged: max_map_count is only read.
 */
#include "override.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef TEST_PRELOAD
#include <dpmalloc.h>
#endif

#define BIG ((size_t)64 << 20)
/* segments are mapped at multiples of 4 MiB (SEG_UNIT, src/pages.h) */
#define SEG_ALIGN ((uintptr_t)4 << 20)
#define MARKER 4242

static size_t page;

static long max_map_count(void)
{
    FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
    long n = -1;
    if (f == NULL)
        return -1;
    if (fscanf(f, "%ld", &n) != 1)
        n = -1;
    fclose(f);
    return n;
}

/* The VMA that holds p, from /proc/self/maps. */
static bool vma_of(const void *p, uintptr_t *lo, uintptr_t *hi)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    bool found = false;
    if (f == NULL)
        return false;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long a, b;
        if (sscanf(line, "%lx-%lx", &a, &b) == 2 && (uintptr_t)p >= a && (uintptr_t)p < b) {
            *lo = a;
            *hi = b;
            found = true;
        }
    }
    fclose(f);
    return found;
}

/* One page at exactly addr, with the flags of dpmalloc's segments. */
static void *page_at(uintptr_t addr)
{
    void *m = mmap((void *)addr, page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    if (m != (void *)addr) {   /* a kernel before 4.17 took it as a hint */
        munmap(m, page);
        return NULL;
    }
    return m;
}

struct budget {
    char *region;       /* filler: split page by page */
    size_t bytes;
    char *control;      /* three pages: the middle one's munmap must fail */
    void *below, *above;
};

/* Puts p's segment strictly inside one VMA and spends the VMA budget.
 * false (with a failure reported) when that could not be set up. */
static bool exhaust_around(void *p, struct budget *bg)
{
    memset(bg, 0, sizeof(*bg));
    uintptr_t lo, hi;
    if (!vma_of(p, &lo, &hi)) {
        TEST_FAIL("%p is in no mapping of /proc/self/maps", p);
        return false;
    }
    /* the block's segment: from the SEG_ALIGN boundary at or below its
     * header to the one at or above its end */
    uintptr_t seg_lo = ((uintptr_t)p - 1) & ~(SEG_ALIGN - 1);
    uintptr_t seg_hi = ((uintptr_t)p + BIG + SEG_ALIGN - 1) & ~(SEG_ALIGN - 1);
    if (lo >= seg_lo)
        bg->below = page_at(lo - page);
    if (hi <= seg_hi)
        bg->above = page_at(hi);
    uintptr_t nlo, nhi;
    if (!vma_of(p, &nlo, &nhi) || nlo >= seg_lo || nhi <= seg_hi) {
        TEST_FAIL("the block %p (VMA %#lx-%#lx) could not be put strictly inside one VMA (now %#lx-%#lx)", p,
                  (unsigned long)lo, (unsigned long)hi, (unsigned long)nlo, (unsigned long)nhi);
        return false;
    }
    long limit = max_map_count();
    void *control = mmap(NULL, 3 * page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    bg->control = control == MAP_FAILED ? NULL : control;
    bg->bytes = ((size_t)limit + 16) * page;
    void *region = mmap(NULL, bg->bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    bg->region = region == MAP_FAILED ? NULL : region;
    if (bg->control == NULL || bg->region == NULL) {
        TEST_FAIL("mmap of the filler: %s", strerror(errno));
        return false;
    }
    /* Page i leaves the region's tail VMA with a protection that differs
     * from its neighbour's and from the tail's: +1 VMA per step, until the
     * kernel refuses the split. */
    size_t i = 0;
    for (; i + 1 < bg->bytes / page; i++)
        if (mprotect(bg->region + i * page, page, (i & 1) ? PROT_READ | PROT_WRITE : PROT_NONE) != 0)
            break;
    if (i + 1 >= bg->bytes / page || errno != ENOMEM) {
        TEST_FAIL("filling the VMA budget (max_map_count %ld) stopped after %zu splits: %s", limit, i,
                  strerror(errno));
        return false;
    }
    if (munmap(bg->control + page, page) == 0 || errno != ENOMEM) {
        TEST_FAIL("at the VMA limit, munmap of a page inside a mapping did not fail with ENOMEM (%s)",
                  strerror(errno));
        return false;
    }
    return true;
}

static void release(struct budget *bg)
{
    if (bg->region != NULL)
        munmap(bg->region, bg->bytes);
    if (bg->control != NULL)
        munmap(bg->control, 3 * page);
    if (bg->below != NULL)
        munmap(bg->below, page);
    if (bg->above != NULL)
        munmap(bg->above, page);
}

enum how { BY_FREE, BY_FREE_SIZED, BY_FREE_ALIGNED_SIZED, BY_REALLOC_ZERO, BY_DPM_FREE };
static const char *const names[] = {"free", "free_sized", "free_aligned_sized", "realloc(p, 0)", "dpm_free"};

static void free_at_vma_limit(enum how how)
{
    void *p = how == BY_FREE_ALIGNED_SIZED ? aligned_alloc(4096, BIG) : malloc(BIG);
    if (p == NULL) {
        TEST_FAIL("allocating %zu bytes for %s failed", BIG, names[how]);
        return;
    }
    memset(p, 1, page);
    struct budget bg;
    if (!exhaust_around(p, &bg)) {
        release(&bg);
        free(p);
        return;
    }
    errno = MARKER;
    switch (how) {
    case BY_FREE:
        free(p);
        break;
    case BY_FREE_SIZED:
        free_sized(p, BIG);
        break;
    case BY_FREE_ALIGNED_SIZED:
        free_aligned_sized(p, 4096, BIG);
        break;
    case BY_REALLOC_ZERO: {
        void *r = realloc(p, 0);
        if (r != NULL) {   /* dpmalloc frees and returns NULL */
            release(&bg);
            TEST_FAIL("realloc(p, 0) = %p, not NULL", r);
            return;
        }
        break;
    }
    case BY_DPM_FREE:
#ifndef TEST_PRELOAD
        dpm_free(p);
#endif
        break;
    }
    int after = errno;
    release(&bg);
    EXPECT(after == MARKER, "%s of a %zu-byte block at the VMA limit changed errno from %d to %d (%s)", names[how],
           BIG, MARKER, after, strerror(after));
}

TEST(override_in_effect) { test_expect_override(); }
TEST(free_keeps_errno) { free_at_vma_limit(BY_FREE); }
TEST(free_sized_keeps_errno) { free_at_vma_limit(BY_FREE_SIZED); }
TEST(free_aligned_sized_keeps_errno) { free_at_vma_limit(BY_FREE_ALIGNED_SIZED); }
TEST(realloc_to_zero_keeps_errno) { free_at_vma_limit(BY_REALLOC_ZERO); }
#ifndef TEST_PRELOAD
TEST(dpm_free_keeps_errno) { free_at_vma_limit(BY_DPM_FREE); }
#endif

int main(void)
{
    page = (size_t)sysconf(_SC_PAGESIZE);
    long limit = max_map_count();
    /* one page of address space per VMA: beyond 16 Mi VMAs (64 GiB of
     * address space) the filler is not worth it */
    if (limit <= 0 || limit > (16L << 20)) {
        printf("SKIP: vm.max_map_count is %ld (unreadable or too large to fill)\n", limit);
        return 77;
    }
    RUN(override_in_effect);
    RUN(free_keeps_errno);
    RUN(free_sized_keeps_errno);
    RUN(free_aligned_sized_keeps_errno);
    RUN(realloc_to_zero_keeps_errno);
#ifndef TEST_PRELOAD
    RUN(dpm_free_keeps_errno);
#endif
    return test_done();
}
