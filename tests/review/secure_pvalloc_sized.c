/*
 * secure_pvalloc_sized.c - secure:true aborts a sized free of a pvalloc'd
 * block with the size the program asked pvalloc for, when the rounded size
 * is a large (page-run) block: pvalloc(20000); free_sized(p, 20000) ->
 * "dpmalloc: free_sized(): size does not match the block at 0x...".
 * pvalloc(5000) (a slab block) is accepted, so the rule differs by size.
 *
 * Root cause: src/override.c pvalloc passes the page-rounded size to
 * aligned_at_impl, so the large span's `requested` is 20480, and
 * src/alloc.c size_fits_block accepts only [requested, usable] for large
 * blocks. The brief says secure sized frees accept every size the block
 * could have been requested with, for every allocation call. (Minor:
 * pvalloc is obsolete and C23 ties free_sized to malloc/calloc/realloc;
 * either record the caller's size or document the exception.)
 *
 * Build: gcc -O2 -Iinclude tests/review/secure_pvalloc_sized.c build/libdpmalloc.a \
 *            -lpthread -o /tmp/spv
 * Run:   DPMALLOC_CONF=secure:true /tmp/spv
 * Expected: "ok", exit 0.   Actual (main 234f56d): abort, exit 134.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>

void free_sized(void *p, size_t size);

int main(void)
{
    void *small = pvalloc(5000);
    free_sized(small, 5000);   /* accepted */
    void *large = pvalloc(20000);
    free_sized(large, 20000);  /* aborts */
    printf("ok\n");
    return 0;
}
