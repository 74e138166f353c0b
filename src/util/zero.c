/* os_zero_touched: zeroing window memory for the next window without
 * touching the pages nobody touched. */
#include "os_util.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <unistd.h>

/* Pages asked of mincore at a time (its vector on the stack). */
enum { BATCH = 512 };

static _Atomic unsigned long whole_count;

unsigned long os_zero_whole_count(void)
{
    return atomic_load_explicit(&whole_count, memory_order_relaxed);
}

/* Whether a page mincore reports absent reads as zeros: so when no swap
 * exists. With swap, a page of shared memory written and then swapped out
 * is absent too (mincore reports the page cache) and still holds its data.
 * Read once: swap added while the program runs is not seen. */
static bool absent_is_zero(void)
{
    static _Atomic int cached; /* 0 unknown, 1 no, 2 yes */
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (!v) {
        struct sysinfo si;
        v = sysinfo(&si) == 0 && si.totalswap == 0 ? 2 : 1;
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return v == 2;
}

static void zero_whole(void *addr, size_t len, int err)
{
    if (atomic_fetch_add_explicit(&whole_count, 1, memory_order_relaxed) == 0 && err)
        OS_WARN("mincore refused (%s): freed windows' memory is zeroed whole, untouched pages "
                "included", strerror(err));
    memset(addr, 0, len);
}

bool os_zero_touched(void *addr, size_t len)
{
    bool all_present = true;
    if (!len)
        return true;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), start = (uintptr_t)addr, end = start + len;
    if (!absent_is_zero()) {
        zero_whole(addr, len, 0);
        return true;
    }
    unsigned char vec[BATCH];
    for (uintptr_t p = start & ~(page - 1); p < end; p += BATCH * page) {
        const uintptr_t stop = p + BATCH * page < end ? p + BATCH * page : end;
        if (mincore((void *)p, stop - p, vec) != 0) {
            /* Refused (a seccomp filter) or memory mincore does not
             * know: the rest is cleared whole, untouched pages included. */
            const uintptr_t from = p > start ? p : start;
            zero_whole((void *)from, end - from, errno);
            return all_present;
        }
        for (uintptr_t q = p; q < stop; q += page) {
            if (!(vec[(q - p) / page] & 1)) {
                all_present = false;
                continue;
            }
            const uintptr_t a = q > start ? q : start, b = q + page < end ? q + page : end;
            memset((void *)a, 0, b - a);
        }
    }
    return all_present;
}
