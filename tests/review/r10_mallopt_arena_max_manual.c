/*
 * r10_mallopt_arena_max_manual.c - mallopt(M_ARENA_MAX, n) with n >= 4096
 * (MAX_ARENAS) returns 1 and sets narenas_auto = MAX_ARENAS
 * (arena_set_auto_count clamps instead of refusing or leaving room), and
 * manual arenas are created only at indices >= narenas_auto
 * (arena_create_manual), so every later arenas.create / dpm_arena_create*
 * / NUMA node arena fails with EAGAIN although no manual arena exists.
 * (DPMALLOC_CONF=narenas:4096 has the same effect; mallopt is the new way
 * in, and glibc accepts any M_ARENA_MAX.) Low severity.
 *
 * Build: cc -O1 -Iinclude tests/review/r10_mallopt_arena_max_manual.c build/libdpmalloc.a \
 *           -lpthread -o /tmp/r10am
 * Run:   /tmp/r10am
 * Expected: arenas.create rc=0 (or mallopt refusing the value), exit 0.
 * Actual (70fb239): "mallopt(M_ARENA_MAX, 100000) = 1", "arenas.create
 *           rc=11" (EAGAIN), exit 1.
 */
#include <malloc.h>
#include <stdio.h>
#include <dpmalloc.h>
int main(void){
  printf("mallopt(M_ARENA_MAX, 100000) = %d\n", mallopt(M_ARENA_MAX, 100000));
  unsigned idx; size_t len = sizeof idx; const char *name = "mine";
  int rc = dpm_ctl("arenas.create", &idx, &len, &name, sizeof name);
  printf("arenas.create rc=%d\n", rc);
  return rc == 0 ? 0 : 1;
}
