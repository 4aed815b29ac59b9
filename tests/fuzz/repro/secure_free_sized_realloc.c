/*
 * Found by the fuzzer (seed 42, DPMALLOC_CONF=secure:true,
 * --avoid foreign-manual-free,sized-aligned): in the secure mode a correct
 * free_sized aborts after realloc shrank a block in place.
 *
 * realloc keeps a large block in place while the new size exceeds half of
 * the size last asked for, so a block grown to a page run and then shrunk
 * step by step stays in its run; free_sized(p, <the size of the last
 * realloc>) then fails the secure check "size <= usable / 4" and aborts,
 * although C23 makes that size the right one to pass.
 *
 * build: cc -I include tests/fuzz/repro/secure_free_sized_realloc.c build/libdpmalloc_plain.a -lpthread
 * run:   DPMALLOC_CONF=secure:true ./a.out   (exit 0 = fixed; abort = the defect)
 */
#include <dpmalloc.h>
#include <stdio.h>

int main(void)
{
    char *p = dpm_malloc(4096);
    p = dpm_realloc(p, 5000);   /* grows into a page run (usable 8192) */
    p = dpm_realloc(p, 2600);   /* stays: 2600 > 5000 / 2 */
    p = dpm_realloc(p, 1400);   /* stays: 1400 > 2600 / 2 */
    printf("p=%p size 1400 usable %zu\n", (void *)p, dpm_usable_size(p));
    fflush(stdout);
    dpm_free_sized(p, 1400);    /* aborts in the secure mode */
    printf("ok\n");
    return 0;
}
