/* A minimal harness for the unit tests: CHECK records, main reports. */
#ifndef UNIT_H
#define UNIT_H
#include <stdio.h>
static int unit_pass, unit_fail;
#define CHECK(cond, ...)                                                                       \
    do {                                                                                       \
        if (cond) {                                                                            \
            unit_pass++;                                                                       \
        } else {                                                                               \
            unit_fail++;                                                                       \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);           \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fputc('\n', stderr);                                                               \
        }                                                                                      \
    } while (0)
#define UNIT_REPORT()                                                                          \
    (printf("%d passed, %d failed\n", unit_pass, unit_fail), unit_fail ? 1 : 0)
#endif
