/*
 * r10_mallopt_mmap_threshold.c - mallopt(M_MMAP_THRESHOLD, 64 KiB) returns
 * 1, and docs/libc.md says "freed blocks of at least `value` bytes go back
 * to the OS at once (glibc unmaps blocks this big at free)". That holds
 * only for blocks above the thread cache's reach: a freed block of 128 KiB
 * .. 4 MiB (tcache_max, default 4 MiB) goes into the freeing thread's large
 * cache (free_fast/tcache) and never reaches arena_free_large(), the only
 * reader of opt.oversize_threshold (src/arena.c); its pages stay resident.
 * glibc unmaps every such block at free. With DPMALLOC_CONF=tcache:false
 * the pages do go back, which pins the cause on the cache.
 *
 * Build: cc -O1 -Iinclude tests/review/r10_mallopt_mmap_threshold.c build/libdpmalloc.a \
 *           -lpthread -o /tmp/r10mt
 * Run:   /tmp/r10mt
 * Expected: for 128 KiB, 1 MiB and 4 MiB blocks the resident size falls by
 *           about the block's size at free; "ok", exit 0.
 * Actual (70fb239): resident fell by -4 KiB (128 KiB block), 0 KiB (1 MiB),
 *           1152 KiB (4 MiB): FAIL, exit 1 (3 of 3 runs). The same binary run with
 *           DPMALLOC_CONF=tcache:false, or plain glibc (build without the
 *           library), passes.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long resident_kib(void)
{
    long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL || fscanf(f, "%ld %ld", &size, &resident) != 2)
        exit(2);
    fclose(f);
    return resident * 4;
}

int main(void)
{
    if (mallopt(M_MMAP_THRESHOLD, 64 << 10) != 1) {
        printf("FAIL: mallopt(M_MMAP_THRESHOLD, 65536) refused\n");
        return 1;
    }
    /* warm up what resident_kib() and printf allocate themselves */
    printf("warm-up: %ld KiB resident\n", resident_kib());
    int fail = 0;
    size_t sizes[] = {128 << 10, 1 << 20, 4 << 20};
    for (unsigned i = 0; i < 3; i++) {
        char *p = malloc(sizes[i]);
        memset(p, 1, sizes[i]);
        __asm__ volatile("" : : "r"(p) : "memory");
        long before = resident_kib();
        free(p);
        long drop = before - resident_kib();
        printf("%zu KiB: resident fell by %ld KiB\n", sizes[i] >> 10, drop);
        if (drop < (long)(sizes[i] >> 10) * 3 / 4)
            fail = 1;
    }
    puts(fail ? "FAIL: freed blocks above M_MMAP_THRESHOLD stayed resident" : "ok");
    return fail;
}
