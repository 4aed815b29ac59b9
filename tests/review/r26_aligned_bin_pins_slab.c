/* r26_aligned_bin_pins_slab: the aligned slabs of the large classes
 * (i20-seed, 4bc9ad3) are special bins of phase 0, so bin.c slab_settle's
 * rule "an idle special bin must not pin a slab" (bin->phase != 0) does not
 * apply: once every block is freed, each aligned bin keeps its current
 * 256 KiB slab. Nothing gives it back: thread.tcache.flush and
 * arena.<i>.purge leave it active and resident, and it keeps its segment
 * from being unmapped (design.md says of phased bins: "idle bins pin no
 * pages"; these special bins are not phased).
 * Note: the plain bins keep their current slab the same way (pre-existing:
 * malloc of 2-8 KiB sizes, freed, flushed, purged leaves 573440 bytes on
 * 28ac113), but their slabs are 4-128 KiB and the same requests on 326de92
 * left 0; the aligned bins add up to 7 x 256 KiB per arena, per arena
 * touched, that no ctl releases short of arena reset/destroy (manual only).
 *
 * One block each of the seven aligned classes 16 KiB .. 64 KiB (multiples
 * of 8 KiB: 16, 24, 32, 40, 48, 56, 64 KiB), freed, the
 * cache flushed, every arena purged: stats.active should come back to
 * where it was (a 4 KiB aligned_alloc does, and did for these on 326de92).
 * With 8 threads of random posix_memalign(8..64 KiB) traffic (tests review
 * run by hand, t7 in the report) the same leaves ~15.9 MB active after all
 * is freed and stats.mapped ~0.9-1 GB (10 MB on 326de92), retained.
 *
 * Build: cc -O1 -Iinclude -Itests/review tests/review/r26_aligned_bin_pins_slab.c build/libdpmalloc.a -pthread
 * Run:   ./a.out   (exit 0 when nothing is pinned)
 * 28ac113: "pinned 1835008 bytes of empty aligned slabs" (7 x 256 KiB per
 *          arena; 10 of 10 runs), exit 1
 * 326de92: pinned 0, exit 0.
 */
#include <dpmalloc.h>
#include "stat_bytes.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static void purge_all(void)
{
    unsigned n = 0;
    size_t l = sizeof n;
    dpm_ctl("arenas.narenas", &n, &l, NULL, 0);
    dpm_ctl("thread.tcache.flush", NULL, NULL, NULL, 0);
    for (unsigned i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof name, "arena.%u.purge", i);
        dpm_ctl(name, NULL, NULL, NULL, 0);
    }
}

int main(void)
{
    /* alignment 8 KiB (> a page): the classes that are multiples of it */
    static const size_t cls[][2] = {{16384, 8192}, {24576, 8192}, {32768, 8192}, {40960, 8192},
                                    {49152, 8192}, {57344, 8192}, {65536, 65536}};
    void *warm = aligned_alloc(4096, 4096);   /* the cache and arena exist */
    free(warm);
    purge_all();
    size_t before = stat_bytes("stats.active");
    for (unsigned i = 0; i < sizeof cls / sizeof *cls; i++) {
        void *p = aligned_alloc(cls[i][1], cls[i][0]);
        if (p == NULL)
            return 2;
        memset(p, 1, cls[i][0]);
        free(p);
    }
    purge_all();
    size_t after = stat_bytes("stats.active");
    printf("active before %zu after %zu: pinned %zu bytes of empty aligned slabs\n", before, after,
           after > before ? after - before : 0);
    return after > before ? 1 : 0;
}
