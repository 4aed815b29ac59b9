/*
 * Found by the fuzzer (seed 42, DPMALLOC_CONF=secure:true, --avoid
 * foreign-manual-free,sized-aligned,sized-realloc): in the secure mode a
 * correct dpm_free_sized of a small typed block aborts once the arena's
 * table of special bins (phased and typed, ARENA_SPECIAL_SLOTS) is full.
 *
 * Typed (and phased) requests then fall back to a large block, a page
 * run (usable 4096 for 22 bytes), and the secure check "size <= usable / 4
 * while usable <= SMALL_MAX" takes the size asked for as a wrong one.
 * Here the table fills with phased bins of dpm_malloc_aligned_at calls
 * at many offsets, as any program using align-at-offset may do.
 *
 * build: cc -I include tests/fuzz/repro/secure_free_sized_typed.c build/libdpmalloc_plain.a -lpthread
 * run:   DPMALLOC_CONF=secure:true ./a.out   (exit 0 = fixed; abort = the defect)
 */
#include <dpmalloc.h>
#include <stdio.h>

int main(void)
{
    /* one phased bin per (class, phase): 200 of them overflow the table */
    for (size_t k = 0; k < 200; k++)
        dpm_free(dpm_malloc_aligned_at(100 + 16 * (k % 8), 4096, 16 * (k + 1)));
    void *p = dpm_calloc_typed("pkt", 2, 11, 0);
    printf("p=%p size 22 usable %zu\n", p, dpm_usable_size(p));
    fflush(stdout);
    dpm_free_sized(p, 22);   /* aborts in the secure mode */
    printf("ok\n");
    return 0;
}
