/*
 * planted_cxx.cpp - planted heap bugs in blocks of dpmalloc's C++
 * operators, for the Valgrind and ASan tests (tests/debug/run_valgrind.sh,
 * tests/debug/asan_reports.c):
 *   planted_cxx <bug>
 * bug:
 *   uaf        read a deleted new char[24] (the block sits in the thread cache)
 *   overflow   write 1 byte past new char[24]
 *   leak       lose the only pointer to a new char[100]
 *   none       use the operators correctly (no report expected); prints
 *              the usable size of new char[24], which tells whose
 *              operator new ran (dpmalloc: 32)
 * Before the bad access it prints "planted at <address>" on stderr (the
 * ASan test checks the report names it), and "planted: done" at the end.
 * The operators must be dpmalloc's: linked (the static library, or the
 * ASan test's object library) or preloaded.
 */
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include <new>

/* Keeps the compiler from proving the accesses out of bounds or dead. */
static char *volatile sink;

static void plant(char *at)
{
    fprintf(stderr, "planted at %p\n", static_cast<void *>(at));
    sink = at;
}

__attribute__((noinline)) static void leak_one()
{
    char *p = new char[100];
    memset(p, 1, 100);
    sink = p;
    sink = nullptr;
}

struct alignas(64) wide {
    char c[100];
};

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: planted_cxx uaf|overflow|leak|none\n");
        return 2;
    }
    const char *bug = argv[1];
    /* a few live blocks first, so the planted one is not the first object
     * of its slab (docs/debugging.md, leak check) */
    char *keep[4];
    for (int i = 0; i < 4; i++) {
        keep[i] = new char[i < 2 ? 24 : 100];
        memset(keep[i], 0, i < 2 ? 24 : 100);
    }
    if (strcmp(bug, "uaf") == 0) {
        char *p = new char[24];
        memset(p, 7, 24);
        sink = p + 3;   /* the pointer, kept past the delete */
        delete[] p;
        plant(sink);
        printf("read after delete: %d\n", *sink);
    } else if (strcmp(bug, "overflow") == 0) {
        char *p = new char[24];
        memset(p, 0, 24);
        plant(p + 24);
        *sink = 1;
        delete[] p;
    } else if (strcmp(bug, "leak") == 0) {
        leak_one();
    } else if (strcmp(bug, "none") == 0) {
        char *p = new char[24];
        printf("usable 24 -> %zu\n", malloc_usable_size(p));
        memset(p, 3, 24);
        delete[] p;
        int *i = new int(5);
        delete i;
        char *q = new (std::nothrow) char[40];
        memset(q, 1, 40);
        ::operator delete[](q, std::nothrow);
        wide *w = new wide;   /* the aligned operator */
        memset(w->c, 2, sizeof w->c);
        delete w;
        void *r = ::operator new(30, std::align_val_t(128), std::nothrow);
        memset(r, 4, 30);
        ::operator delete(r, 30, std::align_val_t(128));
        char *s = static_cast<char *>(::operator new(50));
        memset(s, 5, 50);
        ::operator delete(s, 50);   /* sized */
    } else {
        fprintf(stderr, "planted_cxx: unknown bug %s\n", bug);
        return 2;
    }
    for (int i = 0; i < 4; i++)
        delete[] keep[i];
    printf("planted: done\n");
    return 0;
}
