/* An exclusive lock is released only after the epoch's puts are applied.
 * Rank 2 (another node) writes 1 MB blocks into rank 0's MPI_Win_create
 * window under an exclusive lock, a new value each round; ranks 1 (rank
 * 0's node-mate, reading by CMA) and 3 (another node) take shared locks in
 * a loop and read the block's first, middle and last words, which must
 * always be equal. UCX emulates puts to memory it did not allocate (the
 * target's worker applies them, fragment by fragment) while the network
 * lock word, which UCX allocated, is released by a shared-memory atomic at
 * once: a release not preceded by a flush lets a reader in while the block
 * is half written. Run on virtual nodes of 2, every lock design.
 *
 * Then the same for the end of a PSCW access epoch: rank 2 puts a block
 * into rank 0 between MPI_Win_start and MPI_Win_complete, and rank 0 reads
 * every word right after MPI_Win_wait; in a second epoch rank 2 gets the
 * block back and checks every word right after MPI_Win_complete. Between
 * virtual nodes the complete is this CPU's atomic on the target's count,
 * which UCX maps here, after the epoch's RDMA is flushed (stat
 * complete_mapped), or, where the count is not mapped, a request behind the
 * puts and gets ordered by ucp_worker_fence, without a flush (stat
 * complete_behind_rdma): one of the two is required here. Across real
 * hosts (TCP) it is a request after a flush (neither). test_pscw_order
 * covers every kind of memory. */
#include "common.h"

#include <onesided.h>

enum { ROUNDS = 30, WORDS = 1 << 17 }; /* 1 MB of int64 */

/* Block sizes of the PSCW rounds, in words: one put, UCX's eager sizes,
 * its largest. */
static const int pscw_words[] = { 1, 1024, WORDS };

static void pscw_rounds(MPI_Win win, int64_t *mem)
{
    MPI_Group world, peer;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    const int other = t_rank == 0 ? 2 : 0;
    MPI_Group_incl(world, 1, &other, &peer);
    long wrong_at_target = 0, wrong_at_origin = 0;
    int64_t *block = t_rank == 2 ? malloc(sizeof *block * WORDS) : NULL;
    for (int64_t r = 1; r <= ROUNDS; r++) {
        const int n = pscw_words[r % 3];
        for (int epoch = 0; epoch < 2 && (t_rank == 0 || t_rank == 2); epoch++) {
            if (t_rank == 0) {
                MPI_Win_post(peer, 0, win);
                MPI_Win_wait(win);
                for (int i = 0; i < n && epoch == 0; i++)
                    wrong_at_target += mem[i] != -r;
                continue;
            }
            for (int i = 0; i < n; i++)
                block[i] = epoch == 0 ? -r : 0;
            MPI_Win_start(peer, 0, win);
            if (epoch == 0)
                MPI_Put(block, n, MPI_INT64_T, 0, 0, n, MPI_INT64_T, win);
            else
                MPI_Get(block, n, MPI_INT64_T, 0, 0, n, MPI_INT64_T, win);
            MPI_Win_complete(win);
            for (int i = 0; i < n && epoch == 1; i++)
                wrong_at_origin += block[i] != -r;
        }
    }
    CHECK(wrong_at_target == 0, "rank 0 found %ld words of rank 2's PSCW puts missing after "
          "MPI_Win_wait", wrong_at_target);
    CHECK(wrong_at_origin == 0, "rank 2 found %ld words of its PSCW gets missing after "
          "MPI_Win_complete", wrong_at_origin);
    if (t_rank == 2) {
        /* The completes took the path under test on one host; across real
         * hosts (tests/across_hosts.sh) the path does not exist. */
        onesided_win_stats_t st;
        CHECK(onesided_win_get_stats(win, &st) == MPI_SUCCESS, "onesided_win_get_stats");
        const uint64_t behind = st.counter[ONESIDED_STAT_COMPLETE_BEHIND_RDMA];
        const uint64_t mapped = st.counter[ONESIDED_STAT_COMPLETE_MAPPED];
        const uint64_t expect = t_hosts == 1 ? 2 * ROUNDS : 0;
        CHECK(behind + mapped == expect, "%llu of %d PSCW completes went behind the RDMA "
              "without a flush and %llu by the mapped count, expected %llu in all",
              (unsigned long long)behind, 2 * ROUNDS, (unsigned long long)mapped,
              (unsigned long long)expect);
    }
    free(block);
    MPI_Group_free(&peer);
    MPI_Group_free(&world);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    if (t_size != 4) {
        if (!t_rank)
            fprintf(stderr, "test_release_order runs on 4 processes\n");
        return t_finish("test_release_order");
    }
    int64_t *mem = calloc(WORDS, sizeof *mem);
    MPI_Win win;
    MPI_Win_create(mem, (MPI_Aint)sizeof *mem * WORDS, sizeof *mem, MPI_INFO_NULL,
                   MPI_COMM_WORLD, &win);
    MPI_Barrier(MPI_COMM_WORLD);
    long torn = 0, reads = 0;
    if (t_rank == 2) {
        int64_t *block = malloc(sizeof *block * WORDS);
        for (int64_t r = 1; r <= ROUNDS; r++) {
            for (int i = 0; i < WORDS; i++)
                block[i] = r;
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
            MPI_Put(block, WORDS, MPI_INT64_T, 0, 0, WORDS, MPI_INT64_T, win);
            MPI_Win_unlock(0, win);
        }
        free(block);
    } else if (t_rank == 1 || t_rank == 3) {
        for (int64_t seen = 0; seen != ROUNDS; reads++) {
            int64_t v[3];
            MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
            MPI_Get(&v[0], 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T, win);
            MPI_Get(&v[1], 1, MPI_INT64_T, 0, WORDS / 2, 1, MPI_INT64_T, win);
            MPI_Get(&v[2], 1, MPI_INT64_T, 0, WORDS - 1, 1, MPI_INT64_T, win);
            MPI_Win_unlock(0, win);
            torn += v[0] != v[1] || v[1] != v[2];
            seen = v[0] == v[2] ? v[0] : seen;
        }
    }
    long all_torn = 0;
    MPI_Allreduce(&torn, &all_torn, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    CHECK(all_torn == 0, "readers saw %ld half-written blocks", all_torn);
    pscw_rounds(win, mem);
    MPI_Win_free(&win);
    free(mem);
    return t_finish("test_release_order");
}
