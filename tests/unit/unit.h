/*
 * unit.h - the little harness of the unit tests: expectations that print
 * the failing values and count, and a closing "N passed, N failed" line.
 */
#ifndef DPM_UNIT_H
#define DPM_UNIT_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

static unsigned long unit_passed, unit_failed;

#define EXPECT_TRUE(cond, ...)                                                                   \
    do {                                                                                          \
        if (cond) {                                                                               \
            unit_passed++;                                                                        \
        } else {                                                                                  \
            unit_failed++;                                                                        \
            fprintf(stderr, "%s:%d: expected %s: ", __FILE__, __LINE__, #cond);                 \
            fprintf(stderr, __VA_ARGS__);                                                         \
            fputc('\n', stderr);                                                                  \
            if (unit_failed > 20) {                                                               \
                fprintf(stderr, "too many failures\n");                                           \
                exit(1);                                                                          \
            }                                                                                     \
        }                                                                                         \
    } while (0)

#define EXPECT_EQ_U(a, b)                                                                          \
    EXPECT_TRUE((uint64_t)(a) == (uint64_t)(b), "%s = %" PRIu64 ", %s = %" PRIu64, #a, (uint64_t)(a), #b, \
                (uint64_t)(b))

static inline int unit_finish(const char *name)
{
    printf("%s: %lu passed, %lu failed\n", name, unit_passed, unit_failed);
    return unit_failed == 0 ? 0 : 1;
}

/* xorshift64*: deterministic randomness with a seed per test. */
static inline uint64_t unit_rand(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

#endif
