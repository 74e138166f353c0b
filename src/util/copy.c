/* os_copy's slow-distance path (os_util.h says when it is taken). */
#include "os_util.h"

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

void os_copy_short_distance(void *dst, const void *src, size_t n)
{
    if (n > rep_movsb_stop()) {
        memcpy(dst, src, n);
        return;
    }
    char *d = dst;
    const char *s = src;
    for (; n > PIECE; n -= PIECE, d += PIECE, s += PIECE)
        memcpy(d, s, PIECE);
    memcpy(d, s, n);
}
