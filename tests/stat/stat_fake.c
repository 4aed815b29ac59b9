/*
 * stat_fake.c - a process that is not dpmalloc but carries an anchor
 * symbol dpmalloc-stat must refuse: FAKE_ABI, the layout fingerprint of
 * another build, FAKE_SIZE, an anchor of another size ("version
 * mismatch" both); otherwise a wrong magic ("not a dpmalloc process"). Prints "ready", waits until stdin closes.
 */
#include "anchor.h"

#include <stdio.h>
#include <sys/prctl.h>

DPM_EXPORT const dpm_anchor_t dpmalloc_stat_anchor = {
#if defined(FAKE_ABI) || defined(FAKE_SIZE)
    .magic = DPM_ANCHOR_MAGIC,
#ifdef FAKE_ABI
    .abi = DPM_ANCHOR_ABI ^ 1,
#else
    .abi = DPM_ANCHOR_ABI,
#endif
#else
    .magic = DPM_ANCHOR_MAGIC ^ 0xff,
    .abi = DPM_ANCHOR_ABI,
#endif
    .layout = DPM_ANCHOR_LAYOUT,
#ifdef FAKE_SIZE
    .size = sizeof(dpm_anchor_t) + 8,
#else
    .size = sizeof(dpm_anchor_t),
#endif
    .version = "9.9.9",
    .page = PAGE,
    .nlarge_stats = NLARGE_STATS,
};

int main(void)
{
    prctl(0x59616d61 /* PR_SET_PTRACER */, -1UL /* any */, 0, 0, 0);
    printf("ready %llx\n", (unsigned long long)dpmalloc_stat_anchor.magic);
    fflush(stdout);
    while (getchar() != EOF)
        ;
    return 0;
}
