/* Clocks: seconds for reports and deadlines, and ticks for the stamps that
 * waiting loops take on every poll.
 *
 * The host MPI's poll loop runs onesided's hook in every round (about 55 ns
 * of MPICH's own per round on the 2-core VM), and the hook stamps the time
 * to tell a waiting loop from one MPI_Iprobe between two stretches of
 * computing. clock_gettime took 31 ns there, against 12 for reading the
 * time-stamp counter: where the kernel itself keeps time by the TSC
 * (clocksource "tsc": it found the counter constant-rate and synchronized
 * across CPUs), a tick is one of the TSC's, and ticks taken by different
 * processes of the host compare (node_request.c's heartbeats). Elsewhere a
 * tick is a nanosecond of CLOCK_MONOTONIC. */
#define _GNU_SOURCE
#include "os_util.h"

#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

bool os_clock_tsc;
uint64_t os_ticks_per_us = 1000;

double os_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

uint64_t os_ticks_slow(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#if defined(__x86_64__)
static bool kernel_times_by_tsc(void)
{
    char name[32] = "";
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
    if (!f)
        return false;
    bool tsc = fgets(name, sizeof name, f) && !strcmp(name, "tsc\n");
    fclose(f);
    return tsc;
}
#endif

void os_clock_init(void)
{
#if defined(__x86_64__)
    if (!kernel_times_by_tsc())
        return;
    /* The TSC's rate against CLOCK_MONOTONIC over 2 ms: off by 1e-5 at
     * most, which only scales the thresholds. */
    const uint64_t n0 = os_ticks_slow(), t0 = __rdtsc();
    const struct timespec two_ms = { 0, 2000000 };
    nanosleep(&two_ms, NULL);
    const uint64_t n1 = os_ticks_slow(), t1 = __rdtsc();
    if (n1 <= n0 || t1 <= t0)
        return;
    const uint64_t per_us = (t1 - t0) * 1000 / (n1 - n0);
    if (per_us == 0)
        return;
    /* A hypervisor may trap the instruction: then it costs microseconds.
     * Taken only where it is the cheaper of the two. */
    uint64_t sink = 0;
    const uint64_t a = os_ticks_slow();
    for (int i = 0; i < 1000; i++)
        sink += __rdtsc();
    const uint64_t b = os_ticks_slow();
    for (int i = 0; i < 1000; i++)
        sink += os_ticks_slow();
    const uint64_t c = os_ticks_slow();
    if (b - a >= c - b || !sink)
        return;
    os_ticks_per_us = per_us;
    os_clock_tsc = true;
    OS_DEBUG("stamps read the TSC: %llu ticks per microsecond", (unsigned long long)per_us);
#endif
}
