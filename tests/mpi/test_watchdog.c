/* The hang watchdog (ONESIDED_WATCHDOG=1): a process stalls for 2.5 s while
 * another waits for it inside onesided; the waiter reports, once, what it
 * waits for, then goes on and the program completes. ctest matches the
 * report. argv[1]: lock | fence | pscw (the origin waits for the post) |
 * pscw_wait (the target waits for the complete). */
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank, size, *base, one = 1;
    MPI_Win win;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Win_allocate(16, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    MPI_Win_set_name(win, "watched");
    const char *mode = argc > 1 ? argv[1] : "lock";
    const useconds_t stall = 2500000;
    if (!strcmp(mode, "lock")) {
        /* rank 0 holds rank 1's lock while it computes; rank 1 waits for it */
        if (rank == 0)
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win);
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            usleep(stall);
            MPI_Put(&one, 1, MPI_INT, 1, 0, 1, MPI_INT, win);
            MPI_Win_unlock(1, win);
        } else if (rank == 1) {
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win);
            MPI_Win_unlock(1, win);
        }
    } else if (!strcmp(mode, "fence")) {
        MPI_Win_fence(0, win);
        if (rank == 0)
            usleep(stall);
        MPI_Win_fence(0, win);
    } else if (!strncmp(mode, "pscw", 4)) {
        /* pscw: the target stalls before its post, which the origin's put
         * awaits; pscw_wait: the origin stalls before its complete, which
         * the target's MPI_Win_wait awaits. */
        const bool stall_post = !strcmp(mode, "pscw");
        MPI_Group world, peer;
        int other = 1 - rank;
        MPI_Comm_group(MPI_COMM_WORLD, &world);
        MPI_Group_incl(world, 1, &other, &peer);
        if (rank == 1) {
            if (stall_post)
                usleep(stall);
            MPI_Win_post(peer, 0, win);
            MPI_Win_wait(win);
        } else if (rank == 0) {
            MPI_Win_start(peer, 0, win);
            MPI_Put(&one, 1, MPI_INT, 1, 0, 1, MPI_INT, win);
            if (!stall_post)
                usleep(stall);
            MPI_Win_complete(win);
        }
        MPI_Group_free(&peer);
        MPI_Group_free(&world);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_free(&win);
    if (rank == 0)
        printf("test_watchdog %s: completed\n", mode);
    MPI_Finalize();
    return 0;
}
