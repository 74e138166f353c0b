/* A busy target does not delay lock/put/unlock from other nodes: rank 0
 * computes without calling MPI (it only reads its own window memory) while
 * every other rank takes exclusive and shared locks on it and puts into its
 * own slot. Run in the network design and in the hybrid design (the first
 * remote request migrates the lock to network mode; the progress thread does
 * that, never the application thread). A design that needed the target's
 * application thread would hang here; the
 * target gives up after 120 s and the test fails. No timing is judged. */
#include "common.h"

#include <time.h>

enum { ROUNDS = 100 };

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    int64_t *base;
    MPI_Win win;
    MPI_Win_allocate((MPI_Aint)sizeof(int64_t) * t_size, sizeof(int64_t), MPI_INFO_NULL,
                     MPI_COMM_WORLD, &base, &win);
    memset(base, 0, sizeof(int64_t) * (size_t)t_size);
    MPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == 0) {
        volatile int64_t *slot = base;
        volatile double sink = 0;
        double t0 = now();
        int done = 0;
        while (!done && now() - t0 < 120) {
            for (int k = 0; k < 10000; k++)
                sink += k * 0.5;
            done = 1;
            for (int r = 1; r < t_size; r++)
                done &= slot[r] == ROUNDS;
        }
        for (int r = 1; r < t_size; r++)
            CHECK(slot[r] == ROUNDS, "busy target saw %lld of %d rounds of rank %d",
                  (long long)slot[r], ROUNDS, r);
    } else {
        for (int64_t i = 1; i <= ROUNDS; i++) {
            MPI_Win_lock(i % 3 ? MPI_LOCK_EXCLUSIVE : MPI_LOCK_SHARED, 0, 0, win);
            MPI_Put(&i, 1, MPI_INT64_T, 0, t_rank, 1, MPI_INT64_T, win);
            MPI_Win_unlock(0, win);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_free(&win);
    return t_finish("test_busy_lock");
}
