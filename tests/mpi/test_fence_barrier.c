/* The fence's barrier between nodes (src/rma/net/barrier.c): with every
 * peer on another virtual node of this host it meets on counters in window
 * rank 0's mapped lock word line instead of the host's allreduce.
 *  - Every fence orders: each process puts the epoch number into its own
 *    slot of every other process and adds it to a sum there; after the
 *    fence every slot and the sum must be exact, for many fences in a row
 *    (both parities of the arrival words, rank 0 clearing and releasing).
 *  - Queued operations (onesided_fence_defer): the barrier's OR tells all
 *    processes someone queued, and the second barrier completes them.
 *  - Which barrier ran: with --expect mapped, fence_mapped counts every
 *    fence after the first; with --expect host, none.
 * Fails without the mapped barrier (--expect mapped) and with a barrier
 * that releases early (the slots). */
#include "common.h"
#include "stats.h"

#include <onesided.h>

enum { EPOCHS = 1000 };

static void run(const char *expect, bool defer)
{
    MPI_Info info = MPI_INFO_NULL;
    if (defer) {
        MPI_Info_create(&info);
        MPI_Info_set(info, "onesided_fence_defer", "1");
    }
    int64_t *base;
    MPI_Win win;
    MPI_Win_allocate((MPI_Aint)(t_size + 1) * 8, 8, info, MPI_COMM_WORLD, &base, &win);
    if (info != MPI_INFO_NULL)
        MPI_Info_free(&info);
    for (int i = 0; i <= t_size; i++)
        base[i] = 0;
    MPI_Win_fence(0, win);
    int bad = 0;
    int64_t sum = 0;
    for (int64_t e = 1; e <= EPOCHS; e++) {
        for (int r = 0; r < t_size; r++) {
            MPI_Put(&e, 1, MPI_INT64_T, r, t_rank, 1, MPI_INT64_T, win);
            MPI_Accumulate(&e, 1, MPI_INT64_T, r, t_size, 1, MPI_INT64_T, MPI_SUM, win);
        }
        MPI_Win_fence(0, win);
        sum += e * t_size;
        for (int i = 0; i < t_size && !bad; i++)
            if (base[i] != e)
                bad = 1;
        if (!bad && base[t_size] != sum)
            bad = 2;
        if (bad) {
            CHECK(0, "after fence %lld: slot %d is %lld, sum %lld (expected %lld)", (long long)e,
                  bad == 1 ? 0 : t_size, (long long)base[bad == 1 ? 0 : t_size],
                  (long long)base[t_size], (long long)sum);
            break;
        }
        /* The next epoch's puts must not land before everybody checked. */
        MPI_Win_fence(0, win);
    }
    CHECK(!bad, "%d fence epochs exact (defer %d)", EPOCHS, defer);
    const uint64_t mapped = t_stat(win, ONESIDED_STAT_FENCE_MAPPED);
    if (!strcmp(expect, "mapped"))
        CHECK(mapped >= 2 * EPOCHS, "fence_mapped %llu, expected at least %d",
              (unsigned long long)mapped, 2 * EPOCHS);
    else if (!strcmp(expect, "host"))
        CHECK(mapped == 0, "fence_mapped %llu, expected 0", (unsigned long long)mapped);
    MPI_Win_free(&win);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    const char *expect = "any";
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--expect"))
            expect = argv[i + 1];
    run(expect, false);
    run(expect, true);
    return t_finish("test_fence_barrier");
}
