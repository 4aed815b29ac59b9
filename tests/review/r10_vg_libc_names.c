/* r10_vg_libc_names.c - a bug-free C program that mixes glibc's other names
 * (__libc_malloc/calloc/realloc/free, cfree) with malloc/free, for
 * r10_valgrind_entry_points.sh: memcheck must report no error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
void cfree(void *);
void *__libc_malloc(size_t);
void *__libc_calloc(size_t, size_t);
void *__libc_realloc(void *, size_t);
void __libc_free(void *);
int main(void) {
  /* no bugs: blocks from glibc's names and from malloc, freed crosswise */
  for (int i = 0; i < 100; i++) {
    char *a = __libc_malloc(64); memset(a, 1, 64);
    char *b = malloc(64); memset(b, 2, 64);
    char *c = __libc_calloc(4, 16);
    c = __libc_realloc(c, 200); memset(c, 3, 200);
    free(a);            /* __libc_malloc block freed by free */
    __libc_free(b);     /* malloc block freed by __libc_free */
    cfree(c);
  }
  char *d = malloc(32); strcpy(d, "hello");
  cfree(d);
  puts("done");
  return 0;
}
