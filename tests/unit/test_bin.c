/*
 * test_bin.c - slabs and bins driven by random fills and flushes (plain
 * and phased bins), with the bin and page-heap checkers after each step:
 * objects are unique, are object starts of their slab, honour the phase,
 * and a slab that empties goes back to the page heap. A double free is
 * caught when the object returns to its slab (in a child process).
 */
#include "arena.h"
#include "dpmalloc.h"
#include "unit.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOBJ 5000

static void *objs[NOBJ];
static unsigned nobjs;

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

static void check_unique(void)
{
    static void *sorted[NOBJ];
    memcpy(sorted, objs, nobjs * sizeof(void *));
    qsort(sorted, nobjs, sizeof(void *), cmp_ptr);
    for (unsigned i = 1; i < nobjs; i++)
        EXPECT_TRUE(sorted[i] != sorted[i - 1], "object %p handed out twice", sorted[i]);
}

static void exercise_bin(arena_t *a, bin_t *bin, size_t align, uint64_t *rng)
{
    nobjs = 0;
    for (int step = 0; step < 3000; step++) {
        if (unit_rand(rng) % 2 == 0 && nobjs < NOBJ - 600) {
            unsigned got = arena_bin_fill(bin, objs + nobjs, 1 + (unsigned)(unit_rand(rng) % 300), NULL);
            for (unsigned k = 0; k < got; k++) {
                void *p = objs[nobjs + k];
                span_t *s = span_of(p);
                EXPECT_TRUE(s != NULL && s->kind == SPAN_SLAB && s->bin == bin, "object %p not in a slab of its bin",
                            p);
                EXPECT_TRUE(s != NULL && span_is_block_start(s, (uintptr_t)p), "%p is not an object start", p);
                EXPECT_TRUE(((uintptr_t)p - bin->phase) % align == 0, "%p misses phase %u of %zu", p, bin->phase,
                            align);
                memset(p, 0x77, bin->objsize);
            }
            nobjs += got;
        } else if (nobjs > 0) {
            unsigned n = 1 + (unsigned)(unit_rand(rng) % nobjs);
            arena_bin_flush(objs + nobjs - n, n);
            nobjs -= n;
        }
        if (step % 50 == 0) {
            check_unique();
            EXPECT_TRUE(bin_check(bin), "bin invariants broken at step %d", step);
            mutex_lock(&a->lock);
            EXPECT_TRUE(ph_check(&a->ph), "page heap invariants broken at step %d", step);
            mutex_unlock(&a->lock);
        }
    }
    arena_bin_flush(objs, nobjs);
    EXPECT_EQ_U(bin_live_objects(bin), 0);
    EXPECT_TRUE(bin->stats.curslabs <= 1, "%zu empty slabs kept", bin->stats.curslabs);
}

static void flush_one_block_twice(void *arg)
{
    arena_t *a = arg;
    void *p;
    arena_bin_fill(&a->bins[3], &p, 1, NULL);
    void *again[2] = {p, p};
    arena_bin_flush(again, 2);
}

static void test_double_free_caught(arena_t *a) { expect_child_aborts(flush_one_block_twice, a, "double free"); }

int main(void)
{
    dpm_free(dpm_malloc(1));
    unsigned index;
    EXPECT_TRUE(arena_create_manual("test_bin", NULL, -1, &index) == 0, "arena_create_manual failed");
    arena_t *a = arena_get(index);
    uint64_t rng = 5;
    for (unsigned c = 0; c < NSMALL; c += 1 + (unsigned)(unit_rand(&rng) % 3))
        exercise_bin(a, &a->bins[c], 16, &rng);
    /* phased bins: the VPP shape (64-byte lines at a 4-byte offset) and others */
    size_t aligns[] = {64, 64, 256, 4096};
    uint32_t phases[] = {60, 4, 200, 16};
    for (unsigned k = 0; k < 4; k++) {
        unsigned c = sc_of_size_aligned(100, aligns[k]);
        bin_t *bin = arena_special_bin(a, c, phases[k], false);
        EXPECT_TRUE(bin != NULL && bin->phase == phases[k], "no phased bin");
        if (bin != NULL)
            exercise_bin(a, bin, aligns[k], &rng);
    }
    test_double_free_caught(a);
    return unit_finish("test_bin");
}
