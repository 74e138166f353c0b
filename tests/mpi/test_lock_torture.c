/* Lock torture: every rank takes exclusive and shared locks (and lock_all)
 * on one target, over and over, across virtual nodes, with the lock design
 * and migration policy the environment selects (ONESIDED_LOCK,
 * ONESIDED_LOCK_POLICY=random forces migrations at random).
 *   - exclusive: read-modify-write of a counter by get/flush/put, then a
 *     pair of words written one after the other with a flush between, so
 *     that a holder overlapping another would lose an update or see the pair
 *     half written;
 *   - shared / lock_all: read the pair; both halves must be equal and no
 *     larger than the number of exclusive sections that can have run.
 * Each holder gives up its core once inside the epoch (sched_yield), as a
 * process computing under a lock is descheduled: with 8 processes on 2
 * cores, a lock that let two holders in would otherwise seldom show it,
 * since an epoch of a few microseconds rarely spans a time slice (a broken
 * exclusive lock passed three of these runs before the yields).
 * At the end the counter equals the number of exclusive sections exactly. */
#include "common.h"

#include <onesided.h>
#include <sched.h>
#include <stdbool.h>

enum { ROUNDS = 150 };

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    const int target = 0;
    long *base;
    MPI_Win win;
    MPI_Win_allocate(4 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    memset(base, 0, 4 * sizeof(long));
    MPI_Barrier(MPI_COMM_WORLD);

    unsigned seed = 12345u + 977u * (unsigned)t_rank;
    long exclusive = 0, torn = 0, impossible = 0;
    long bound = (long)ROUNDS * t_size; /* no more exclusive sections than this */
    for (int i = 0; i < ROUNDS; i++) {
        seed = seed * 1103515245u + 12345u;
        int kind = (int)((seed >> 16) % 6);
        if (kind < 4) {
            long v, one;
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, target, 0, win);
            MPI_Get(&v, 1, MPI_LONG, target, 0, 1, MPI_LONG, win);
            MPI_Win_flush(target, win);
            sched_yield();
            one = v + 1;
            MPI_Put(&one, 1, MPI_LONG, target, 0, 1, MPI_LONG, win);
            MPI_Put(&one, 1, MPI_LONG, target, 1, 1, MPI_LONG, win);
            MPI_Win_flush(target, win);
            MPI_Put(&one, 1, MPI_LONG, target, 2, 1, MPI_LONG, win);
            MPI_Win_unlock(target, win);
            exclusive++;
        } else {
            long pair[3];
            if (kind == 4)
                MPI_Win_lock(MPI_LOCK_SHARED, target, 0, win);
            else
                MPI_Win_lock_all(0, win);
            MPI_Get(pair, 2, MPI_LONG, target, 0, 2, MPI_LONG, win);
            MPI_Win_flush(target, win);
            sched_yield();
            MPI_Get(&pair[2], 1, MPI_LONG, target, 2, 1, MPI_LONG, win);
            if (kind == 4)
                MPI_Win_unlock(target, win);
            else
                MPI_Win_unlock_all(win);
            if (pair[1] != pair[2] || pair[0] != pair[1])
                torn++;
            if (pair[0] < 0 || pair[0] > bound)
                impossible++;
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);

    long total = 0, counter = -1;
    MPI_Allreduce(&exclusive, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Win_lock(MPI_LOCK_SHARED, target, 0, win);
    MPI_Get(&counter, 1, MPI_LONG, target, 0, 1, MPI_LONG, win);
    MPI_Win_unlock(target, win);
    CHECK(counter == total, "counter %ld after %ld exclusive sections", counter, total);
    CHECK(torn == 0, "%ld reads saw a half-written pair", torn);
    CHECK(impossible == 0, "%ld reads saw an impossible value", impossible);

    /* With virtual nodes and the hybrid design, the target's lock must have
     * migrated (the random and paper policies migrate on remote requests). */
    onesided_win_stats_t st;
    const char *design = getenv("ONESIDED_LOCK"), *policy = getenv("ONESIDED_LOCK_POLICY");
    bool hybrid = !design || !strcmp(design, "hybrid");
    if (t_rank == target && t_virtual_node_size() && hybrid && policy &&
        strcmp(policy, "history") && onesided_win_get_stats(win, &st) == MPI_SUCCESS) {
        uint64_t to_net = st.counter[ONESIDED_STAT_LOCK_TO_NETWORK];
        uint64_t to_cpu = st.counter[ONESIDED_STAT_LOCK_TO_CPU];
        printf("target's lock migrated %llu times to network mode, %llu back\n",
               (unsigned long long)to_net, (unsigned long long)to_cpu);
        CHECK(to_net > 0, "no migration to network mode");
    }
    MPI_Win_free(&win);
    return t_finish("test_lock_torture");
}
