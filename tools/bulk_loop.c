/*
 * bulk_loop.c - the DESIGN.md bulk workload (1000 allocs, memset each, free
 * all) over every bulk size and both alignments, through the dpm_ API; a
 * fixed amount of work for instruction counting (tools/stats_cost.sh).
 */
#include <dpmalloc.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    static const size_t sizes[] = {64, 128, 512, 1024, 3072, 4096, 8192, 16384, 32768, 131072};
    static const size_t aligns[] = {64, 4096};
    static void *blocks[1000];
    size_t checksum = 0;
    for (int round = 0; round < 3; round++)
        for (size_t a = 0; a < 2; a++)
            for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
                for (int i = 0; i < 1000; i++) {
                    blocks[i] = dpm_malloc_aligned(sizes[s], aligns[a]);
                    memset(blocks[i], i, sizes[s]);
                }
                for (int i = 0; i < 1000; i++) {
                    checksum += ((unsigned char *)blocks[i])[sizes[s] - 1];
                    dpm_free(blocks[i]);
                }
            }
    printf("checksum %zu\n", checksum);
    return 0;
}
