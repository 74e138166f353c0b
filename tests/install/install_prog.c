/*
 * install_prog: the smallest RMA program built against an installed
 * onesided (tests/install/install_test.sh builds it with CMake's package and
 * with pkg-config). It fails unless onesided itself serves the windows and
 * every rank's put, accumulate and fetch_and_op landed.
 */
#include <mpi.h>
#include <onesided.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size, bad = 0, all_bad;
    long *base, one = 1, old;
    MPI_Win win;
    onesided_win_stats_t st;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Win_allocate(2 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    base[0] = base[1] = 0;
    MPI_Win_fence(0, win);
    long mine = 100 + rank;
    MPI_Put(&mine, 1, MPI_LONG, (rank + 1) % size, 0, 1, MPI_LONG, win);
    MPI_Win_fence(0, win);
    if (base[0] != 100 + (rank + size - 1) % size)
        bad++;
    MPI_Win_lock_all(0, win);
    MPI_Accumulate(&one, 1, MPI_LONG, 0, 1, 1, MPI_LONG, MPI_SUM, win);
    MPI_Win_flush(0, win);
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
    MPI_Fetch_and_op(&one, &old, MPI_LONG, 0, 1, MPI_NO_OP, win);
    MPI_Win_unlock(0, win);
    if (old != size)
        bad++;
    if (!onesided_active() || onesided_win_get_stats(win, &st) != MPI_SUCCESS || st.counter[ONESIDED_STAT_PUT_OPS] < 1)
        bad++;
    MPI_Win_free(&win);
    MPI_Allreduce(&bad, &all_bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("install_prog on %d processes: %s (onesided %s)\n", size,
               all_bad ? "FAILED" : "passed", onesided_active() ? "active" : "not active");
    MPI_Finalize();
    return all_bad != 0;
}
