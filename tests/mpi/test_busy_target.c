/* Truly one-sided: rank 0 computes without calling MPI (it only reads its
 * own window memory) while the other ranks lock, put, accumulate, unlock and
 * flush on it. A design that needed the target's help would hang here; the
 * target gives up after 120 s and the test fails. No timing is judged. */
#include "common.h"

#include <time.h>

enum { ROUNDS = 200 };

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void run(int flavor)
{
    t_win_t t = t_win_make(flavor, 64, MPI_INFO_NULL);
    const int64_t expect = (int64_t)(t_size - 1) * ROUNDS;
    if (t_rank == 0) {
        /* "Compute" until every origin's updates have landed. */
        volatile int64_t *counter = (volatile int64_t *)t.base;
        volatile double sink = 0;
        double t0 = now();
        while (*counter < expect + (t_size - 1) && now() - t0 < 120)
            for (int k = 0; k < 10000; k++)
                sink += k * 0.5;
        int64_t got = *counter;
        CHECK(got == expect + (t_size - 1), "%s: busy target saw %lld of %lld updates",
              flavor_name[flavor], (long long)got, (long long)(expect + t_size - 1));
    } else {
        int64_t one = 1, old;
        for (int i = 0; i < ROUNDS; i++) {
            MPI_Win_lock(i % 2 ? MPI_LOCK_EXCLUSIVE : MPI_LOCK_SHARED, 0, 0, t.win);
            MPI_Accumulate(&one, 1, MPI_INT64_T, 0, t_disp(&t, 0, 0), 1, MPI_INT64_T, MPI_SUM, t.win);
            MPI_Win_unlock(0, t.win);
        }
        MPI_Win_lock_all(0, t.win);
        MPI_Fetch_and_op(&one, &old, MPI_INT64_T, 0, t_disp(&t, 0, 0), MPI_SUM, t.win);
        MPI_Win_flush_all(t.win);
        MPI_Win_unlock_all(t.win);
    }
    t_win_free(&t);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    T_FOR_EACH_FLAVOR(f)
        run(f);
    return t_finish("test_busy_target");
}
