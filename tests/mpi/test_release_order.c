/* An exclusive lock is released only after the epoch's puts are applied.
 * Rank 2 (another node) writes 1 MB blocks into rank 0's MPI_Win_create
 * window under an exclusive lock, a new value each round; ranks 1 (rank
 * 0's node-mate, reading by CMA) and 3 (another node) take shared locks in
 * a loop and read the block's first, middle and last words, which must
 * always be equal. UCX emulates puts to memory it did not allocate (the
 * target's worker applies them, fragment by fragment) while the network
 * lock word, which UCX allocated, is released by a shared-memory atomic at
 * once: a release not preceded by a flush lets a reader in while the block
 * is half written. Run on virtual nodes of 2, every lock design. */
#include "common.h"

enum { ROUNDS = 30, WORDS = 1 << 17 }; /* 1 MB of int64 */

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
    MPI_Win_free(&win);
    free(mem);
    return t_finish("test_release_order");
}
