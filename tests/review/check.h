/*
 * check.h - a failed check prints "FAIL: <message>" and is counted in
 * `fails`; the program ends with a nonzero status if any failed. For the
 * review programs that check many things in one run.
 */
#ifndef DPM_REVIEW_CHECK_H
#define DPM_REVIEW_CHECK_H

#include <stdio.h>

static int fails;
#define CHECK(c, ...)                                                                              \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            printf("FAIL: " __VA_ARGS__);                                                          \
            printf("\n");                                                                          \
            fails++;                                                                               \
        }                                                                                          \
    } while (0)

#endif
