/* Mixed lock traffic on one target from its own node and from others
 * (paper 000 Figures 9 and 12): every rank, the target too, takes
 * exclusive locks on rank 0 in turn, round robin by rank. Each reads a
 * counter by get/flush and, when the counter says it is its turn,
 * increments it by put; otherwise it unlocks and tries again. So remote
 * lockers never come more than size - node size in a row, and the node's
 * lockers come between them: the traffic the history policy's streak (4)
 * reads as mixed. The counter must come out exact.
 *
 * `--stays yes|no` says where the hybrid lock must settle. yes (the
 * history policy where UCX maps every process's lock word: virtual nodes of
 * one host): the lock starts on the word (net/window.c, starts_on_word)
 * and stays there, so the remote lockers take it with their own atomics
 * and never ask the manager (os_hyb_stays_on_word). Under the plain streak
 * the lock stayed in CPU mode here, with every remote lock served by the
 * manager: 5-10x osc/sm on Open MPI 5.0.11; moved there by the first
 * remote request, each origin's first lock waited for the target's
 * progress thread (up to 4 ms beside a computing application). moves (the
 * paper's policy on virtual nodes): the lock goes to the word for remote
 * lockers and back to the CPU for the node's, each at least once (the
 * node's lockers take the word themselves only where the policy keeps it
 * there: os_remote_lock_now). no: only the counter. */
#include "common.h"

#include <onesided.h>
#include <time.h>

enum { ROUNDS = 100 };

/* Not my turn: more processes than cores, so let the one whose turn it is run. */
static void nap(void)
{
    struct timespec ts = { 0, 20000 };
    nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    bool stays = false, moves = false;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--stays")) {
            stays = !strcmp(argv[i + 1], "yes");
            moves = !strcmp(argv[i + 1], "moves");
        }
    const int target = 0;
    long *base;
    MPI_Win win;
    MPI_Win_allocate(sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    *base = 0;
    MPI_Barrier(MPI_COMM_WORLD);

    long attempts = 0;
    for (int i = 0; i < ROUNDS; i++) {
        const long mine = (long)i * t_size + t_rank; /* the counter at my turn */
        for (;;) {
            long v, one;
            attempts++;
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, target, 0, win);
            MPI_Get(&v, 1, MPI_LONG, target, 0, 1, MPI_LONG, win);
            MPI_Win_flush(target, win);
            if (v == mine) {
                one = v + 1;
                MPI_Put(&one, 1, MPI_LONG, target, 0, 1, MPI_LONG, win);
            }
            MPI_Win_unlock(target, win);
            if (v == mine)
                break;
            CHECK(v < mine, "counter %ld past my turn %ld", v, mine);
            if (v > mine)
                break;
            nap();
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    long counter = -1;
    MPI_Win_lock(MPI_LOCK_SHARED, target, 0, win);
    MPI_Get(&counter, 1, MPI_LONG, target, 0, 1, MPI_LONG, win);
    MPI_Win_unlock(target, win);
    CHECK(counter == (long)ROUNDS * t_size, "counter %ld after %d exclusive sections", counter,
          ROUNDS * t_size);

    /* Lock requests to a manager (only ranks on other nodes than the
     * target send them), the target's migrations, and the lock epochs of
     * the ranks on other nodes. The stats are onesided's: without it
     * (native) there is nothing to check. */
    onesided_win_stats_t st;
    long mine[4] = { 0, 0, 0, 0 }, all[4];
    const bool counted = onesided_win_get_stats(win, &st) == MPI_SUCCESS;
    if (counted) {
        mine[0] = (long)st.counter[ONESIDED_STAT_LOCK_MANAGER];
        mine[1] = t_rank == target ? (long)st.counter[ONESIDED_STAT_LOCK_TO_NETWORK] : 0;
        mine[2] = t_rank == target ? (long)st.counter[ONESIDED_STAT_LOCK_TO_CPU] : 0;
    }
    const int nsize = t_virtual_node_size();
    mine[3] = nsize && t_rank / nsize != target / nsize ? attempts : 0;
    MPI_Allreduce(mine, all, 4, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (t_rank == 0)
        printf("remote locks %ld, served by the manager %ld; target's lock to network %ld, "
               "back %ld\n", all[3], all[0], all[1], all[2]);
    if (stays && counted && nsize) {
        const long remote_locks = all[3];
        CHECK(all[1] >= 1, "the target's lock never moved to the word");
        CHECK(all[0] == 0, "%ld of %ld remote locks asked the manager", all[0], remote_locks);
        CHECK(all[2] == 0, "the target's lock went back to the CPU %ld times", all[2]);
    }
    /* Strict turns bring a remote locker after a node's and a node's
     * after a remote one about once a round each (about 130 migrations each
     * way in 100 rounds on 4 processes), unless the node's lockers skip the
     * policy: then 2-3. */
    if (moves && counted && nsize)
        CHECK(all[1] >= ROUNDS / 10 && all[2] >= ROUNDS / 10,
              "the target's lock went to the word %ld times and back %ld in %d rounds: the "
              "policy migrates both ways", all[1], all[2], ROUNDS);
    MPI_Win_free(&win);
    return t_finish("test_lock_mixed");
}
