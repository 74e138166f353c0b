/* Under the default MPI_ERRORS_ARE_FATAL an erroneous call aborts with a
 * readable message. ctest matches the message; argv[1] picks the error. */
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
    if (rank == 0) {
        if (!strcmp(which, "sync")) {
            MPI_Put(&x, 1, MPI_INT, 1 % size, 0, 1, MPI_INT, win);
        } else if (!strcmp(which, "range")) {
            MPI_Win_lock_all(0, win);
            MPI_Put(&x, 1, MPI_INT, 1 % size, 1000, 1, MPI_INT, win);
        }
        printf("no error raised\n");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
