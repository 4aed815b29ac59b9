/*
 * verify.c - result checks shared by the workloads. A broken allocator must
 * not post a good time: misaligned blocks, NULL returns and overwritten
 * contents end the child with a message and exit status 3, which the parent
 * reports as FAILED for that (workload, backend) pair.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpmbench.h"

void fail(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "\ndpmbench: VERIFICATION FAILED: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(3);
}

void check_alignment(const void *p, size_t align, size_t offset, const char *where)
{
    if (align > 1 && ((uintptr_t)p + offset) % align != 0)
        fail("%s: block %p is not aligned to %zu at offset %zu", where, p, align, offset);
}

void *must_alloc(void *p, size_t size, size_t align, size_t offset)
{
    if (!p)
        fail("allocation of %zu bytes (align %zu, offset %zu) returned NULL", size, align,
             offset);
    check_alignment(p, align, offset, "allocation");
    return p;
}

static uint64_t stamp_word(const void *p, size_t size, uint64_t seed)
{
    return ((uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull) ^ (size << 20) ^ seed;
}

/* A cheap stamp: a word at the start and a byte at the end of the block.
 * Blocks shorter than 8 bytes get bytes only. */
void stamp_block(void *p, size_t size, uint64_t seed)
{
    uint64_t w = stamp_word(p, size, seed);
    unsigned char *b = p;
    if (size >= 8)
        memcpy(b, &w, 8);
    else if (size > 0)
        b[0] = (unsigned char)w;
    if (size > 0)
        b[size - 1] = (unsigned char)(w >> 56);
}

void check_stamp(const void *p, size_t size, uint64_t seed, const char *where)
{
    uint64_t w = stamp_word(p, size, seed), got = 0;
    const unsigned char *b = p;
    int ok = 1;
    if (size >= 8) {
        memcpy(&got, b, 8);
        ok = got == w;
    } else if (size > 0) {
        ok = b[0] == (unsigned char)w;
    }
    if (size > 0 && b[size - 1] != (unsigned char)(w >> 56))
        ok = 0;
    if (!ok)
        fail("%s: block %p (%zu bytes) was overwritten", where, p, size);
}

/* Full fill: every byte written, so every page is touched. */
void fill_block(void *p, size_t size, uint64_t seed)
{
    memset(p, (int)(seed & 0xff) | 1, size);
}

/* Checks the first, last and a middle byte of a filled block. */
void check_fill(const void *p, size_t size, uint64_t seed, const char *where)
{
    const unsigned char *b = p;
    unsigned char want = (unsigned char)((seed & 0xff) | 1);
    if (size == 0)
        return;
    if (b[0] != want || b[size - 1] != want || b[size / 2] != want)
        fail("%s: block %p (%zu bytes) lost its contents", where, p, size);
}
