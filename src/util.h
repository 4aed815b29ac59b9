/*
 * util.h - small compiler and bit helpers every room of dpmalloc may use.
 * Owns: branch hints, cache-line alignment, bit scans, rounding, assertions.
 * Touches nothing else; includes only libc headers.
 */
#ifndef DPM_UTIL_H
#define DPM_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define DPM_INLINE static inline __attribute__((always_inline))
#define DPM_NOINLINE __attribute__((noinline))
#define DPM_COLD __attribute__((cold, noinline))
#define DPM_EXPORT __attribute__((visibility("default")))
/* For data the fast paths read: a direct PC-relative load, no GOT. */
#define DPM_HIDDEN __attribute__((visibility("hidden")))

/* DPM_STATS=0 compiles out the counters that sit on fast paths (thread
 * cache requests, lock acquisitions); only used to measure what they cost
 * (tools/stats_cost.sh). */
#ifndef DPM_STATS
#define DPM_STATS 1
#endif

#define CACHELINE 64
/* Per-thread and per-arena structures carry this so that no two cores ever
 * write the same line (false sharing; see docs/design.md, "Layers"). */
#define CACHE_ALIGNED __attribute__((aligned(CACHELINE)))

#define LG_PAGE 12
#define PAGE ((size_t)1 << LG_PAGE)
#define PAGE_MASK (PAGE - 1)

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

DPM_INLINE size_t round_up(size_t x, size_t pow2) { return (x + pow2 - 1) & ~(pow2 - 1); }
DPM_INLINE bool is_pow2(size_t x) { return x != 0 && (x & (x - 1)) == 0; }
DPM_INLINE unsigned lg_floor(size_t x) { return 63u - (unsigned)__builtin_clzll(x); }
DPM_INLINE unsigned lg_ceil(size_t x) { return x <= 1 ? 0 : lg_floor(x - 1) + 1; }
DPM_INLINE unsigned ctz64(uint64_t x) { return (unsigned)__builtin_ctzll(x); }
DPM_INLINE size_t pages_of(size_t bytes) { return (bytes + PAGE_MASK) >> LG_PAGE; }

/* A cheap cycle counter for sampled statistics (never on a fast path). */
DPM_INLINE uint64_t cpu_cycles(void)
{
#if defined(__x86_64__)
    return __builtin_ia32_rdtsc();
#elif defined(__aarch64__)
    uint64_t v;
    __asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
    return v;
#else
    return 0;
#endif
}

/* Counters and fields that one thread writes and others read without a
 * lock (statistics, another thread's cache bins): relaxed atomic accesses,
 * which compile to plain moves, so that readers see whole values and the
 * thread sanitizer sees no race. counter_bump_fast is for the fast paths:
 * a plain memory increment (one instruction) except under TSan, where the
 * atomic load-add-store (three) keeps the program race-free. */
#if defined(__SANITIZE_THREAD__)
#define DPM_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define DPM_TSAN 1
#endif
#endif
#ifndef DPM_TSAN
#define DPM_TSAN 0
#endif
DPM_INLINE void counter_add(uint64_t *c, uint64_t n)
{
    __atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}
DPM_INLINE uint64_t counter_read(const uint64_t *c) { return __atomic_load_n(c, __ATOMIC_RELAXED); }
DPM_INLINE void counter_bump_fast(uint64_t *c)
{
#if DPM_TSAN
    counter_add(c, 1);
#else
    (*c)++;
#endif
}

void dpm_assert_fail(const char *expr, const char *file, int line) __attribute__((noreturn));
#if defined(DPM_DEBUG) && DPM_DEBUG
#define dpm_assert(e) ((e) ? (void)0 : dpm_assert_fail(#e, __FILE__, __LINE__))
#else
#define dpm_assert(e) ((void)0)
#endif
/* Checked in every build: conditions whose failure would corrupt memory. */
#define dpm_check(e) (likely(e) ? (void)0 : dpm_assert_fail(#e, __FILE__, __LINE__))

#endif /* DPM_UTIL_H */
