/* os_copy's slow-distance path (os_util.h says when it is taken). */
#include "os_util.h"

#include <stdbool.h>
#include <string.h>
#include <unistd.h>

/* Copies of at most this many bytes never take glibc's `rep movsb`: its
 * threshold is 2112 on CPUs with FSRM, 4096 or more on the others. */
enum { PIECE = 2048 };

/* Above glibc 2.36's rep_movsb_stop_threshold, which on AMD is the L2
 * size (`ld.so --list-diagnostics`), memcpy takes its aligned vector loop
 * again, faster than pieces (2 MB here: 23.6 GB/s against 12.9). Read
 * once; a data race on first use only repeats the same sysconf. */
static size_t rep_movsb_stop(void)
{
    static _Atomic size_t cached;
    size_t v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (!v) {
        long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
        v = l2 > PIECE ? (size_t)l2 : 512 * 1024;
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return v;
}

/* Whether glibc's memcpy meets the slow short distance at all: not on
 * Intel, where glibc (2.33 and later) already avoids `rep movsb` at a short
 * distance on CPUs with FSRM (`ld.so --list-diagnostics`:
 * Avoid_Short_Distance_REP_MOVSB=1 on this project's Xeon), and the pieces
 * only cost: bursts of 256 KB and 1 MB gets into a malloc buffer ran at a
 * median 0.89 of Open MPI 5.0.11's bandwidth in pieces and 1.00 without
 * (rma_sweep, 4 alternating pairs of jobs). The vendor is read once. */
#if defined(__x86_64__)
#include <cpuid.h>
static bool pieces_needed(void)
{
    static _Atomic int cached; /* 0 unknown, 1 no, 2 yes */
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (!v) {
        unsigned a = 0, b = 0, c = 0, d = 0;
        bool intel = __get_cpuid(0, &a, &b, &c, &d) && b == 0x756e6547 && d == 0x49656e69 &&
                     c == 0x6c65746e; /* "GenuineIntel" */
        v = intel ? 1 : 2;
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return v == 2;
}
#else
static bool pieces_needed(void)
{
    return false; /* os_copy takes this path on x86-64 alone */
}
#endif

void os_copy_short_distance(void *dst, const void *src, size_t n)
{
    if (n > rep_movsb_stop() || !pieces_needed()) {
        memcpy(dst, src, n);
        return;
    }
    char *d = dst;
    const char *s = src;
    for (; n > PIECE; n -= PIECE, d += PIECE, s += PIECE)
        memcpy(d, s, PIECE);
    memcpy(d, s, n);
}
