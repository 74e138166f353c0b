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
/* A waiting step of the threaded tests: a 20 us sleep, not a yield. The
 * tests run more threads than cores; beside other busy jobs, a waiter that
 * yields hands the CPU to them for whole time slices each time, and a test
 * of two seconds took over three minutes beside six busy loops. A sleeper
 * is woken ahead of them (the scheduler credits sleep), so the thread that
 * holds the lock, or is next for it, runs. The interleavings the tests
 * provoke stay; the library's own waits take the same step in these tests
 * (os_backoff_hook). */
#include <time.h>
static inline void unit_wait_step(void)
{
    struct timespec pause = { 0, 20000 };
    nanosleep(&pause, NULL);
}
#define UNIT_REPORT()                                                                          \
    (printf("%d passed, %d failed\n", unit_pass, unit_fail), unit_fail ? 1 : 0)
#endif
