/*
 * Found by the fuzzer (seed 42, DPMALLOC_CONF=secure:true,
 * --avoid foreign-manual-free): in the secure mode a sized free of an
 * aligned block aborts although the size is the one asked for: the check
 * "size <= usable / 4" takes the alignment's rounding for a wrong size.
 * The C23 form of the case, posix_memalign then free_aligned_sized, is
 * below in its dpm_ spelling (dpm_free_sized accepts any dpm_ block).
 *
 * build: cc -I include tests/fuzz/repro/secure_free_sized_aligned.c build/libdpmalloc_plain.a -lpthread
 * run:   DPMALLOC_CONF=secure:true ./a.out   (exit 0 = fixed; abort = the defect)
 */
#include <dpmalloc.h>
#include <stdio.h>

int main(void)
{
    void *p = dpm_malloc_aligned(16, 64);
    printf("p=%p size 16 usable %zu\n", p, dpm_usable_size(p));
    fflush(stdout);
    dpm_free_sized(p, 16);   /* aborts in the secure mode */
    void *q = dpm_malloc_aligned(100, 4096);
    printf("q=%p size 100 usable %zu\n", q, dpm_usable_size(q));
    fflush(stdout);
    dpm_free_sized(q, 100);
    printf("ok\n");
    return 0;
}
