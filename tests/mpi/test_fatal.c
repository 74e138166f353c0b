/* Under the default MPI_ERRORS_ARE_FATAL an erroneous call aborts with a
 * readable message, and the whole job ends at once, whatever the other
 * processes are waiting in. argv[1] picks the error and where the others wait:
 *   sync   rank 0 puts outside an epoch; the others wait in MPI_Barrier
 *   range  rank 0 puts outside the window in lock_all; the others in MPI_Barrier
 *   fence  rank 0 puts outside the window between fences; the others wait in
 *          the closing fence (onesided's own loop, not the host MPI's)
 *   lock   rank 0 holds rank 1's exclusive lock and errs; the others wait for
 *          that lock (onesided's own loop, or its lock manager between nodes) */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rank, size, x = 0, *base;
    MPI_Win win;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Win_allocate(16, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    const char *which = argc > 1 ? argv[1] : "sync";
    int peer = 1 % size;
    if (!strcmp(which, "fence")) {
        MPI_Win_fence(0, win);
        if (rank == 0)
            MPI_Put(&x, 1, MPI_INT, peer, 1000, 1, MPI_INT, win);
        MPI_Win_fence(0, win);
    } else if (!strcmp(which, "lock")) {
        if (rank == 0)
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, peer, 0, win);
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0)
            MPI_Put(&x, 1, MPI_INT, peer, 1000, 1, MPI_INT, win);
        else
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, peer, 0, win);
    } else if (rank == 0) {
        if (!strcmp(which, "sync")) {
            MPI_Put(&x, 1, MPI_INT, peer, 0, 1, MPI_INT, win);
        } else if (!strcmp(which, "range")) {
            MPI_Win_lock_all(0, win);
            MPI_Put(&x, 1, MPI_INT, peer, 1000, 1, MPI_INT, win);
        }
    }
    if (rank == 0)
        printf("no error raised\n");
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
