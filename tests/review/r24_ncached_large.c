/* Review r24 (issue 20, item 3): thread.tcache.ncached_max.write on a range of large classes set
 * one count for the whole large cache ("1048576-2097152:0" stopped caching 16 KiB blocks too), and
 * capped a count above the cache's 64 slots at 64, returning 0. Each large class now has its own
 * limit, checked on every put (the class's oldest block goes home to make room); a count above 64
 * for a range with a large class the cache holds is EINVAL and changes nothing; a count above the
 * cache's total (tcache_nslots_large) raises the total, so the class really holds it.
 * thread.tcache.ncached_max.read_sizeclass reports each class's own limit.
 * run: test_r24_ncached_large (default options) */
#include <sched.h>
#include <dpmalloc.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

static size_t nmax(size_t size)
{
    size_t n = 9999, l = sizeof n;
    if (dpm_ctl("thread.tcache.ncached_max.read_sizeclass", &n, &l, &size, sizeof size) != 0)
        return 9999;
    return n;
}

static int nwrite(const char *spec) { return dpm_ctl("thread.tcache.ncached_max.write", NULL, NULL, &spec, sizeof spec); }

static size_t cached_bytes(void)
{
    uint64_t e = 1;
    size_t l = sizeof e, v = 0;
    dpm_ctl("epoch", &e, &l, &e, sizeof e);
    l = sizeof v;
    dpm_ctl("stats.tcache_bytes", &v, &l, NULL, 0);
    return v;
}

/* Bytes the thread's cache keeps of k freed blocks of `size` (a class size). */
static size_t keeps(size_t size, unsigned k)
{
    void *p[64];
    dpm_ctl("thread.tcache.flush", NULL, NULL, NULL, 0);
    for (unsigned i = 0; i < k; i++)
        p[i] = malloc(size);
    size_t before = cached_bytes();
    for (unsigned i = 0; i < k; i++)
        free(p[i]);
    return cached_bytes() - before;
}

/* Large blocks sit in the large cache of the CPU that freed them: pinned
 * to the CPU it runs on, the thread's frees and mallocs meet one cache. */
static void pin_to_this_cpu(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(sched_getcpu(), &set);
    (void)sched_setaffinity(0, sizeof set, &set);
}

int main(void)
{
    pin_to_this_cpu();
    setvbuf(stdout, NULL, _IONBF, 0);
    free(malloc(1));
    const size_t K16 = 16384, K32 = 32768, M1 = 1 << 20, M2 = 2 << 20;
    size_t def = nmax(K16);
    printf("default: %zu blocks per large class\n", def);
    CHECK(def == 16, "default limit of 16 KiB is %zu, tcache_nslots_large is 16", def);
    CHECK(keeps(K16, 4) == 4 * K16, "4 freed 16 KiB blocks: %zu bytes kept before any write", keeps(K16, 4));

    /* a range of large classes: only those */
    CHECK(nwrite("1048576-2097152:0") == 0, "write 1-2 MiB:0 failed");
    CHECK(nmax(K16) == def, "after 1-2 MiB:0, 16 KiB reads %zu (was %zu)", nmax(K16), def);
    CHECK(nmax(M1) == 0 && nmax(M2) == 0 && nmax(M1 + M1 / 4) == 0, "after 1-2 MiB:0, 1 MiB reads %zu, 2 MiB %zu",
          nmax(M1), nmax(M2));
    size_t k16 = keeps(K16, 4);
    CHECK(k16 == 4 * K16, "after 1-2 MiB:0, 4 freed 16 KiB blocks: %zu bytes kept, not %zu", k16, 4 * K16);
    size_t k1 = keeps(M1, 2);
    CHECK(k1 == 0, "after 1-2 MiB:0, 2 freed 1 MiB blocks: %zu bytes kept, not 0", k1);

    /* one class's limit, the others untouched */
    CHECK(nwrite("16384-16384:2") == 0, "write 16 KiB:2 failed");
    CHECK(nmax(K16) == 2 && nmax(K32) == def, "after 16 KiB:2: 16 KiB reads %zu, 32 KiB %zu", nmax(K16), nmax(K32));
    k16 = keeps(K16, 5);
    CHECK(k16 == 2 * K16, "after 16 KiB:2, 5 freed 16 KiB blocks: %zu bytes kept, not %zu", k16, 2 * K16);
    size_t k32 = keeps(K32, 5);
    CHECK(k32 == 5 * K32, "after 16 KiB:2, 5 freed 32 KiB blocks: %zu bytes kept, not %zu", k32, 5 * K32);

    /* more than the cache can hold: refused, nothing changed */
    int r = nwrite("16384-16384:100");
    CHECK(r == EINVAL, "write 16 KiB:100 returned %d, not EINVAL (%d): the large cache holds 64", r, EINVAL);
    CHECK(nmax(K16) == 2, "after the refused write, 16 KiB reads %zu, not 2", nmax(K16));
    size_t small = nmax(64);
    r = nwrite("1-1000000000:100");
    CHECK(r == EINVAL, "write 1-1e9:100 returned %d, not EINVAL", r);
    CHECK(nmax(64) == small && nmax(K32) == def, "after the refused write: 64 B reads %zu (was %zu), 32 KiB %zu",
          nmax(64), small, nmax(K32));
    CHECK(nwrite("1-8192:100") == 0, "write 1-8192:100 (small classes only, up to 4096) failed");
    CHECK(nmax(64) == 100, "after 1-8192:100, 64 B reads %zu", nmax(64));

    /* above the cache's total but within its 64 slots: honoured */
    CHECK(nwrite("16384-16384:40") == 0, "write 16 KiB:40 failed");
    CHECK(nmax(K16) == 40, "after 16 KiB:40, 16 KiB reads %zu", nmax(K16));
    k16 = keeps(K16, 40);
    CHECK(k16 == 40 * K16, "after 16 KiB:40, 40 freed 16 KiB blocks: %zu bytes kept, not %zu", k16, 40 * K16);
    CHECK(nmax(K32) == def, "after 16 KiB:40, 32 KiB reads %zu", nmax(K32));
    CHECK(nwrite("16384-16384:64") == 0 && nmax(K16) == 64, "write 16 KiB:64 (the most) failed or reads %zu",
          nmax(K16));

    printf("%s\n", fails ? "FAIL" : "ok");
    return fails ? 1 : 0;
}
