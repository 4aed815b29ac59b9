/*
 * stat_fake.c - a process that is not dpmalloc but carries an anchor
 * symbol for dpmalloc-stat:
 *   FAKE_ABI      the layout fingerprint of another build  -> version mismatch
 *   FAKE_SIZE     an anchor of another size                -> version mismatch
 *   FAKE_MAGIC    a wrong magic                            -> not a dpmalloc process
 *   FAKE_GARBAGE  a valid anchor whose every pointer leads into 4 MiB of
 *                 random words, half of them pointers back into it: the
 *                 tool must neither crash nor hang
 * Prints "ready", waits until stdin closes.
 */
#include "anchor.h"

#include <stdio.h>
#include <sys/prctl.h>

#define GARBAGE_WORDS (1u << 19)
static uintptr_t garbage[GARBAGE_WORDS] __attribute__((aligned(4096)));

#ifdef FAKE_GARBAGE
#define AT(i) ((void *)&garbage[(i) * 4096])
#endif

DPM_EXPORT const dpm_anchor_t dpmalloc_stat_anchor = {
#ifdef FAKE_MAGIC
    .magic = DPM_ANCHOR_MAGIC ^ 0xff,
#else
    .magic = DPM_ANCHOR_MAGIC,
#endif
#ifdef FAKE_ABI
    .abi = DPM_ANCHOR_ABI ^ 1,
#else
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
#ifdef FAKE_GARBAGE
    .arenas = AT(1),
    .narenas_total = AT(2),
    .g = AT(3),
    .sc_table = AT(4),
    .cpu_caches_on = AT(5),
    .metadata_bytes = AT(6),
    .guarded_total = AT(7),
    .guarded_live = AT(8),
    .tcaches_live = AT(9),
    .tcaches_exited = AT(10),
    .cpu_caches = AT(11),
    .cpu_tag_objsize = AT(12),
    .large_caches = AT(13),
    .large_ncpus = AT(14),
    .transfer = AT(15),
    .typed_stashes = AT(16),
    .opt_table = AT(17),
    .opt_table_len = AT(18),
    .types = AT(19),
    .memlimit = AT(20),
    .prof = AT(21),
#endif
};

int main(void)
{
    prctl(0x59616d61 /* PR_SET_PTRACER */, -1UL /* any */, 0, 0, 0);
    uint64_t x = 88172645463325252ull;
    for (unsigned i = 0; i < GARBAGE_WORDS; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        /* a pointer into the garbage (at a cache line, as the tool wants
         * them) or a random word */
        garbage[i] = x % 2 ? (uintptr_t)&garbage[(x >> 8) % GARBAGE_WORDS] & ~(uintptr_t)63 : (uintptr_t)(x >> 3);
    }
    printf("ready %llx\n", (unsigned long long)dpmalloc_stat_anchor.magic);
    fflush(stdout);
    while (getchar() != EOF)
        ;
    return 0;
}
