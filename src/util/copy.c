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
    WAY_MEMCPY,   /* Intel: glibc's memcpy as it is (copy_way says why) */
    WAY_PIECES,   /* no AVX2: 2 KB pieces glibc copies with forward vector loops */
    WAY_VECTOR,   /* AVX2: copy_backward_avx2 or copy_forward_avx2 */
} copy_way_t;

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>

/* Whether glibc's memcpy meets the slow short distance at all: not on
 * Intel, where the pieces only cost when measured on 2026-12-01 (bursts of
 * 256 KB and 1 MB gets into a malloc buffer ran at a median 0.89 of Open
 * MPI 5.0.11's bandwidth in pieces and 1.00 without, rma_sweep, 4
 * alternating pairs of jobs on a Xeon). Elsewhere the vector copies below
 * where the CPU has AVX2, pieces where it has not. Decided once. */
static copy_way_t copy_way(void)
{
    static _Atomic int cached;
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v == WAY_UNKNOWN) {
        unsigned a = 0, b = 0, c = 0, d = 0;
        bool intel = __get_cpuid(0, &a, &b, &c, &d) && b == 0x756e6547 && d == 0x49656e69 &&
                     c == 0x6c65746e; /* "GenuineIntel" */
        __builtin_cpu_init();
        v = intel ? WAY_MEMCPY : __builtin_cpu_supports("avx2") ? WAY_VECTOR : WAY_PIECES;
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

void os_copy_short_distance(void *dst, const void *src, size_t n)
{
    copy_way_t way = n > rep_movsb_stop() ? WAY_MEMCPY : copy_way();
    char *d = dst;
    const char *s = src;
    switch (way) {
#if defined(__x86_64__)
    case WAY_VECTOR:
        if ((((uintptr_t)d - (uintptr_t)s) & 4095) < 64)
            copy_backward_avx2(d, s, n); /* the destination past the source */
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
