/*
 * pattern.c - block contents derived from the block's address and size.
 *
 * Byte i of block (key, size) is byte i % 8 of word(h, i / 8), h a hash of
 * (key, size): two live blocks that overlap, a block handed out twice, a
 * stale write through a freed block or a realloc that loses its prefix all
 * show up as a wrong byte. Blocks up to PAT_FULL_MAX are covered whole;
 * bigger ones in windows (head, tail and a 64-byte stamp at a hashed place
 * in every 32 KiB), so a 64 MiB block costs a few hundred KiB of writes
 * yet any overlap of two big blocks still hits a stamp.
 */
#include "fuzz.h"

#include <stdio.h>
#include <string.h>

#define HEAD_TAIL 4096
#define STRIDE ((size_t)32 << 10)
#define STAMP 64

static uint64_t pat_hash(const void *key, size_t size)
{
    uint64_t z = (uint64_t)(uintptr_t)key * 0x9e3779b97f4a7c15ULL ^ (uint64_t)size * 0xc2b2ae3d27d4eb4fULL;
    z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ULL;
    return z ^ (z >> 29);
}

static inline uint64_t pat_word(uint64_t h, size_t k)
{
    uint64_t w = (h ^ (k * 0x9e3779b97f4a7c15ULL)) * 0xd6e8feb86659fd93ULL;
    return w ^ (w >> 32);
}

/* Byte i is byte i % 8 of word i / 8 as stored in memory, so that whole
 * words are written and compared at once. */
static inline unsigned char pat_byte(uint64_t h, size_t i)
{
    uint64_t w = pat_word(h, i >> 3);
    unsigned char b[8];
    memcpy(b, &w, 8);
    return b[i & 7];
}

/* Window n of a block: [*off, *off + *len). Returns false past the last. */
static bool window(size_t size, uint64_t h, size_t n, size_t *off, size_t *len)
{
    if (size <= PAT_FULL_MAX) {
        *off = 0;
        *len = size;
        return n == 0;
    }
    if (n == 0) {
        *off = 0;
        *len = HEAD_TAIL;
        return true;
    }
    if (n == 1) {
        *off = size - HEAD_TAIL;
        *len = HEAD_TAIL;
        return true;
    }
    size_t stride = n - 2, start = stride * STRIDE;
    if (start >= size)
        return false;
    size_t room = (size - start < STRIDE ? size - start : STRIDE);
    *len = room < STAMP ? room : STAMP;
    *off = start + (size_t)(pat_word(h, ~stride) % (room - *len + 1));
    return true;
}

static void fill_range(unsigned char *p, uint64_t h, size_t i, size_t end)
{
    for (; i < end && (i & 7) != 0; i++)
        p[i] = pat_byte(h, i);
    for (; i + 8 <= end; i += 8) {
        uint64_t w = pat_word(h, i >> 3);
        memcpy(p + i, &w, 8);
    }
    for (; i < end; i++)
        p[i] = pat_byte(h, i);
}

static size_t check_range(const unsigned char *p, uint64_t h, size_t i, size_t end, unsigned char *want,
                          unsigned char *got)
{
    for (; i < end && (i & 7) != 0; i++)
        if (p[i] != pat_byte(h, i))
            goto bad;
    for (; i + 8 <= end; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        if (w != pat_word(h, i >> 3))
            break;
    }
    for (; i < end; i++)
        if (p[i] != pat_byte(h, i))
            goto bad;
    return SIZE_MAX;
bad:
    *want = pat_byte(h, i);
    *got = p[i];
    return i;
}

void pat_fill(unsigned char *p, size_t size)
{
    uint64_t h = pat_hash(p, size);
    size_t off, len;
    for (size_t n = 0; window(size, h, n, &off, &len); n++)
        fill_range(p, h, off, off + len);
}

size_t pat_check(const unsigned char *at, const unsigned char *key, size_t size, size_t limit,
                 unsigned char *want, unsigned char *got)
{
    uint64_t h = pat_hash(key, size);
    size_t off, len;
    for (size_t n = 0; window(size, h, n, &off, &len); n++) {
        size_t end = off + len < limit ? off + len : limit;
        if (off < end) {
            size_t bad = check_range(at, h, off, end, want, got);
            if (bad != SIZE_MAX)
                return bad;
        }
    }
    return SIZE_MAX;
}

size_t pat_check_zero(const unsigned char *p, size_t size, unsigned char *got)
{
    uint64_t h = pat_hash(p, size);
    size_t off, len;
    for (size_t n = 0; window(size, h, n, &off, &len); n++) {
        size_t i = off, end = off + len;
        for (uint64_t w; i + 8 <= end; i += 8) {
            memcpy(&w, p + i, 8);
            if (w != 0)
                break;
        }
        for (; i < end; i++)
            if (p[i] != 0) {
                *got = p[i];
                return i;
            }
    }
    return SIZE_MAX;
}

void blk_verify(fthread_t *t, const blk_t *b, const char *when)
{
    unsigned char want, got;
    t->cur = *b;
    size_t bad = pat_check(b->p, b->p, b->size, b->size, &want, &got);
    if (bad != SIZE_MAX)
        fuzz_fail(t, "pattern mismatch %s: block %p (from %s) size %zu align %zu arena %d offset %zu: "
                  "want 0x%02x got 0x%02x", when, (void *)b->p, b->origin, b->size, b->align, b->arena, bad, want, got);
}
