/* An unchanged MPI program, not linked with onesided, run under
 * onesided-run: the preloaded library must serve its RMA calls. */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size, fails = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "onesided_active");
    if (!active || !active()) {
        fprintf(stderr, "rank %d: onesided is not the RMA implementation\n", rank);
        fails++;
    }
    long *base, one = 1;
    MPI_Win win;
    MPI_Win_allocate(sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    *base = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock_all(0, win);
    for (int i = 0; i < 100; i++)
        MPI_Accumulate(&one, 1, MPI_LONG, 0, 0, 1, MPI_LONG, MPI_SUM, win);
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0 && *base != 100L * size) {
        fprintf(stderr, "accumulate total %ld\n", *base);
        fails++;
    }
    MPI_Win_free(&win);
    int all = 0;
    MPI_Allreduce(&fails, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("test_preload on %d processes: %d passed, %d failed\n", size, all ? 0 : 1, all ? 1 : 0);
    MPI_Finalize();
    return all != 0;
}
