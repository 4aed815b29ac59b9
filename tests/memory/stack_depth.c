/*
 * stack_depth.c - malloc, free and their slow paths use at most
 * STACK_BOUND bytes of the caller's stack (docs/design.md, "Stack"),
 * once the library is initialised: a thread's first allocation, fills and
 * overflows of its cache (CPU or thread mode, whichever the environment
 * picks), spills to the transfer caches and the slabs, slabs made and
 * released, purges run on the free path (decay 0), large blocks through
 * the large caches and the page heap, realloc, aligned and calloc.
 *
 * How: the work runs on a stack this program maps and fills with a
 * pattern, once on a thread (pthread_attr_setstack) and once in a signal
 * handler on an alternate stack (sigaltstack); afterwards the lowest
 * byte that is no longer the pattern is the deepest the stack went,
 * measured from the frame that called the allocator. The calling
 * function keeps its pointers in a static table, so its own frame is a
 * few dozen bytes.
 *
 * usage: test_stack_depth   (exit 0 pass, 1 fail)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <dpmalloc.h>

/* docs/design.md, "Stack": the most any allocation call uses, measured
 * from the caller's frame (the allocator's frames and the C library's
 * calls it makes: locks, futex, madvise, mmap) */
#define STACK_BOUND 4096
#define STACK_SIZE (1u << 20)
#define PATTERN 0xa5
#define NBLOCKS 6000

static void *blocks[NBLOCKS];
static int failures;

static unsigned long rng = 88172645463325252ul;
static size_t next_size(size_t max)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return 1 + rng % max;
}

/* Every slow path the entry points reach: many blocks of many classes
 * (fills from new slabs, overflows to the transfer caches and home,
 * slabs released and purged at once), large blocks (large caches full,
 * the page heap, purges), realloc across classes, aligned and zeroed. */
__attribute__((noinline)) static void exercise(void)
{
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < NBLOCKS; i++)
            blocks[i] = malloc(next_size(i % 7 == 0 ? 4096 : 512));
        for (int i = 0; i < NBLOCKS; i += 2)
            free(blocks[i]);
        for (int i = 1; i < NBLOCKS; i += 2)
            blocks[i] = realloc(blocks[i], next_size(2048));
        for (int i = 1; i < NBLOCKS; i += 2)
            free(blocks[i]);
        for (int i = 0; i < 64; i++)
            blocks[i] = malloc(16384 + next_size(1 << 20));
        for (int i = 0; i < 64; i++)
            blocks[i] = realloc(blocks[i], next_size(1 << 21));
        for (int i = 0; i < 64; i++)
            free(blocks[i]);
        for (int i = 0; i < 256; i++)
            blocks[i] = aligned_alloc((size_t)64 << (i % 7), 64);
        for (int i = 256; i < 512; i++)
            blocks[i] = calloc(1, next_size(8192));
        for (int i = 256; i < 512; i++)
            free(blocks[i]);
        for (int i = 0; i < 256; i++)
            free(blocks[i]);
        for (int i = 0; i < 256; i++)
            blocks[i] = dpm_malloc_aligned_at(48, 64, 4);
        for (int i = 0; i < 256; i++)
            dpm_free(blocks[i]);
    }
}

static unsigned char *map_stack(void)
{
    unsigned char *s = mmap(NULL, STACK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    memset(s, PATTERN, STACK_SIZE);
    return s;
}

/* How far below `frame` the stack s was written. */
static size_t depth_below(const unsigned char *s, uintptr_t frame)
{
    size_t i = 0;
    while (i < STACK_SIZE && s[i] == PATTERN)
        i++;
    return frame > (uintptr_t)(s + i) ? frame - (uintptr_t)(s + i) : 0;
}

static void check(const char *where, size_t depth)
{
    printf("%s: %zu bytes of stack below the caller's frame (bound %d)\n", where, depth, STACK_BOUND);
    if (depth > STACK_BOUND) {
        printf("FAIL %s: %zu > %d\n", where, depth, STACK_BOUND);
        failures++;
    }
    if (depth < 256) {   /* the allocator ran on that stack at all */
        printf("FAIL %s: only %zu bytes used: the work did not run there\n", where, depth);
        failures++;
    }
}

static uintptr_t thread_frame;

static void *on_thread(void *arg)
{
    (void)arg;
    thread_frame = (uintptr_t)__builtin_frame_address(0);
    exercise();
    return NULL;
}

static volatile uintptr_t handler_frame;

static void on_signal(int sig)
{
    (void)sig;
    handler_frame = (uintptr_t)__builtin_frame_address(0);
    exercise();
}

int main(void)
{
    /* decay 0 (ctest sets DPMALLOC_CONF): frees purge at once, on the
     * free path */
    ssize_t dirty = -1;
    size_t len = sizeof dirty;
    if (dpm_ctl("opt.dirty_decay_ms", &dirty, &len, NULL, 0) != 0 || dirty != 0) {
        printf("FAIL: run with DPMALLOC_CONF=dirty_decay_ms:0 (opt.dirty_decay_ms is %zd)\n", dirty);
        return 1;
    }

    unsigned char *s = map_stack();
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstack(&attr, s, STACK_SIZE);
    pthread_t t;
    if (pthread_create(&t, &attr, on_thread, NULL) != 0) {
        printf("FAIL: pthread_create\n");
        return 1;
    }
    pthread_join(t, NULL);
    check("a thread's allocations", depth_below(s, thread_frame));

    /* the main thread, in a handler on an alternate stack */
    unsigned char *alt = map_stack();
    stack_t ss = {.ss_sp = alt, .ss_size = STACK_SIZE};
    struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_ONSTACK};
    sigemptyset(&sa.sa_mask);
    if (sigaltstack(&ss, NULL) != 0 || sigaction(SIGUSR1, &sa, NULL) != 0) {
        printf("FAIL: sigaltstack or sigaction\n");
        return 1;
    }
    raise(SIGUSR1);
    check("a signal handler's allocations", depth_below(alt, handler_frame));

    printf("%s\n", failures ? "FAILED" : "passed");
    return failures ? 1 : 0;
}
