/* os_copy's slow-distance path (os_util.h says when it is taken). */
#include "os_util.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* Copies of at most this many bytes never take glibc's `rep movsb`: its
 * threshold is 2112 on CPUs with FSRM, 4096 or more on the others. */
enum { PIECE = 2048 };

/* Above glibc 2.36's rep_movsb_stop_threshold, which on AMD is the L2
 * size (`ld.so --list-diagnostics`), memcpy takes its own vector loop,
 * which checks for page aliasing and copies backward then. Read once; a
 * data race on first use only repeats the same sysconf. */
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

typedef enum {
    WAY_UNKNOWN,
    WAY_MEMCPY,   /* glibc's memcpy as it is */
    WAY_PIECES,   /* no AVX2: 2 KB pieces glibc copies with forward vector loops */
    WAY_VECTOR,   /* AVX2: copy_backward_avx2 or copy_forward_avx2 */
    WAY_INTEL,    /* Intel with AVX2: copy_backward_avx2 up to INTEL_BACKWARD_MAX */
} copy_way_t;

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>

/* Where glibc's memcpy meets the slow short distance. Elsewhere than on
 * Intel: the vector copies below where the CPU has AVX2, pieces where it
 * has not. On Intel glibc (2.33+) already avoids `rep movsb` at a short
 * distance, and pieces only cost (bursts of 256 KB and 1 MB gets into a
 * malloc buffer, 0.89 of Open MPI 5.0.11's bandwidth in pieces and 1.00
 * without, 2026-12-01), but its forward loop still meets the aliasing
 * below where the destination is past the source: Intel copies those
 * backward up to the size where that was measured faster (WAY_INTEL).
 * Decided once. */
static copy_way_t copy_way(void)
{
    static _Atomic int cached;
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v == WAY_UNKNOWN) {
        unsigned a = 0, b = 0, c = 0, d = 0;
        bool intel = __get_cpuid(0, &a, &b, &c, &d) && b == 0x756e6547 && d == 0x49656e69 &&
                     c == 0x6c65746e; /* "GenuineIntel" */
        __builtin_cpu_init();
        bool avx2 = __builtin_cpu_supports("avx2");
        v = intel ? (avx2 ? WAY_INTEL : WAY_MEMCPY) : avx2 ? WAY_VECTOR : WAY_PIECES;
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return (copy_way_t)v;
}

/* The two directions, each chosen so that no load has the page offset of
 * a store issued just before it (4 KB aliasing: the CPU holds such a load
 * until the store is done). Where the destination sits 1-63 bytes past the
 * source within a page, a forward copy's load of src[i + 32] has the page
 * offset of the store to dst[i] just before it; glibc's forward vector
 * loop in 2 KB pieces still ran at a third of its usual speed. Going down,
 * every load's page offset lies below those of the stores already issued.
 * Where the destination sits 1-63 bytes before the source, the same holds
 * going up (`rep movsb` is 1.1-1.4 times slower there, not 27). The stores
 * are aligned to 32 bytes, the loads not: a store that splits a cache line
 * costs more than a load that does. n > 128; source and destination do
 * not overlap (memcpy's contract), so the unaligned edge vectors may
 * rewrite bytes the loop wrote, with the same values. */
__attribute__((target("avx2"))) static void copy_backward_avx2(char *d, const char *s, size_t n)
{
    size_t off = n;
    size_t mis = (uintptr_t)(d + n) & 31;
    if (mis) {
        __m256i last = _mm256_loadu_si256((const __m256i *)(s + n - 32));
        _mm256_storeu_si256((__m256i *)(d + n - 32), last);
        off -= mis;
    }
    while (off >= 128) {
        off -= 128;
        __m256i v3 = _mm256_loadu_si256((const __m256i *)(s + off + 96));
        __m256i v2 = _mm256_loadu_si256((const __m256i *)(s + off + 64));
        __m256i v1 = _mm256_loadu_si256((const __m256i *)(s + off + 32));
        __m256i v0 = _mm256_loadu_si256((const __m256i *)(s + off));
        _mm256_store_si256((__m256i *)(d + off + 96), v3);
        _mm256_store_si256((__m256i *)(d + off + 64), v2);
        _mm256_store_si256((__m256i *)(d + off + 32), v1);
        _mm256_store_si256((__m256i *)(d + off), v0);
    }
    while (off >= 32) {
        off -= 32;
        _mm256_store_si256((__m256i *)(d + off), _mm256_loadu_si256((const __m256i *)(s + off)));
    }
    if (off)
        _mm256_storeu_si256((__m256i *)d, _mm256_loadu_si256((const __m256i *)s));
}

__attribute__((target("avx2"))) static void copy_forward_avx2(char *d, const char *s, size_t n)
{
    size_t off = (32 - ((uintptr_t)d & 31)) & 31;
    if (off)
        _mm256_storeu_si256((__m256i *)d, _mm256_loadu_si256((const __m256i *)s));
    for (; off + 128 <= n; off += 128) {
        __m256i v0 = _mm256_loadu_si256((const __m256i *)(s + off));
        __m256i v1 = _mm256_loadu_si256((const __m256i *)(s + off + 32));
        __m256i v2 = _mm256_loadu_si256((const __m256i *)(s + off + 64));
        __m256i v3 = _mm256_loadu_si256((const __m256i *)(s + off + 96));
        _mm256_store_si256((__m256i *)(d + off), v0);
        _mm256_store_si256((__m256i *)(d + off + 32), v1);
        _mm256_store_si256((__m256i *)(d + off + 64), v2);
        _mm256_store_si256((__m256i *)(d + off + 96), v3);
    }
    for (; off + 32 <= n; off += 32)
        _mm256_store_si256((__m256i *)(d + off), _mm256_loadu_si256((const __m256i *)(s + off)));
    if (off < n) {
        __m256i last = _mm256_loadu_si256((const __m256i *)(s + n - 32));
        _mm256_storeu_si256((__m256i *)(d + n - 32), last);
    }
}
#else
static copy_way_t copy_way(void)
{
    return WAY_MEMCPY; /* os_copy takes this path on x86-64 alone */
}
#endif

/* On Intel (a Xeon, KVM, glibc 2.36, `__memmove_avx512_unaligned_erms`),
 * the largest copy with the destination past the source (a get into a
 * malloc buffer, 16 bytes past a page start, from a window at one) that
 * copy_backward_avx2 takes. Measured 2026-12-07 between two processes
 * against the host's own memcpy of the same bytes at the same page
 * offsets, onesided's time / the host's (Open MPI 5.0.11):
 * - 16 KB gets 0.78-0.98 instead of 1.36-1.70; bursts of 4 KB gets (Open
 *   MPI 5.0.11 and MPICH 5.0.2, rma_sweep) 1.11-1.18 and 2.23-2.34 of the
 *   host's bandwidth instead of 0.99-1.01 and 1.93-2.02;
 * - above 16 KB it depends on the destination: into a buffer the program
 *   had just written, 32 KB to 256 KB took 0.83-0.98 instead of 0.94-1.13;
 *   but bursts of 32 KB gets into one buffer ran at a median 0.987 of the
 *   host's bandwidth instead of 1.004 (80 rows), and single 32 KB gets
 *   + flush took 0.62-0.93 of its time instead of 0.59-0.93 (medians of
 *   four sets of jobs). Those stay with glibc.
 * The other direction (a put from the buffer) stays with memcpy: forward,
 * single 4 KB puts + flush took a median 1.10 of the host's time (0.91-
 * 1.52, 12 jobs) instead of 1.00 (0.91-1.11), 16 KB 1.33-1.37 instead of
 * 0.88-0.97. */
enum { INTEL_BACKWARD_MAX = 16 * 1024 };

void os_copy_short_distance(void *dst, const void *src, size_t n)
{
    copy_way_t way = n > rep_movsb_stop() ? WAY_MEMCPY : copy_way();
    char *d = dst;
    const char *s = src;
    const bool past = (((uintptr_t)d - (uintptr_t)s) & 4095) < 64; /* dst past src */
    if (way == WAY_INTEL)
        way = past && n <= INTEL_BACKWARD_MAX ? WAY_VECTOR : WAY_MEMCPY;
    switch (way) {
#if defined(__x86_64__)
    case WAY_VECTOR:
        if (past)
            copy_backward_avx2(d, s, n);
        else
            copy_forward_avx2(d, s, n);
        return;
#endif
    case WAY_PIECES:
        for (; n > PIECE; n -= PIECE, d += PIECE, s += PIECE)
            memcpy(d, s, PIECE);
        memcpy(d, s, n);
        return;
    default: memcpy(d, s, n); return;
    }
}
