/* A target blocked inside the host MPI serves other nodes' requests.
 *
 * Run between virtual nodes with no progress thread (ONESIDED_PROGRESS=0):
 * rank 0 sits in a blocking MPI_Recv, a call onesided does not define, while
 * the other ranks lock, put, get, accumulate (a derived type: served by the
 * target), fetch_and_op, compare_and_swap and unlock on its window; then
 * they send it the message it waits for. Only the host MPI's poll loop can
 * serve those requests (src/mpi/host_progress.c): without it the origins
 * wait forever and the test times out. Every value is checked, and the
 * target's counters must say its requests were served inside the host. */
#include "common.h"

#include <onesided.h>

enum { ROUNDS = 50, W_ACC = 0, W_FOP = 1, W_CAS = 2, W_PUT = 3, NW = 4 };

static void run(int flavor)
{
    t_win_t t = t_win_make(flavor, NW * 8, MPI_INFO_NULL);
    memset(t.base, 0, NW * 8);
    MPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == 0) {
        /* Blocked in the host MPI until every origin is done. */
        for (int r = 1; r < t_size; r++) {
            int done;
            MPI_Recv(&done, 1, MPI_INT, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        const int64_t *w = (const int64_t *)t.base, want = (int64_t)ROUNDS * (t_size - 1);
        CHECK(w[W_ACC] == want && w[W_FOP] == want && w[W_CAS] == want,
              "%s: accumulate %lld, fetch_and_op %lld, cas %lld, want %lld", flavor_name[flavor],
              (long long)w[W_ACC], (long long)w[W_FOP], (long long)w[W_CAS], (long long)want);
        CHECK(w[W_PUT] >= 1 && w[W_PUT] < t_size, "%s: the put word holds %lld",
              flavor_name[flavor], (long long)w[W_PUT]);
        onesided_win_stats_t st;
        onesided_win_get_stats(t.win, &st);
        /* A shared-memory window's node is real: nothing to serve there. */
        if (t_virtual_node_size() && flavor != F_SHARED)
            CHECK(st.counter[ONESIDED_STAT_AM_SERVED_THREAD] == 0 &&
                      st.counter[ONESIDED_STAT_AM_SERVED_IN_HOST] > 0,
                  "%s: requests served by the thread %llu, inside the host MPI %llu",
                  flavor_name[flavor],
                  (unsigned long long)st.counter[ONESIDED_STAT_AM_SERVED_THREAD],
                  (unsigned long long)st.counter[ONESIDED_STAT_AM_SERVED_IN_HOST]);
    } else {
        MPI_Datatype one; /* derived: an accumulate the target applies */
        MPI_Type_contiguous(1, MPI_INT64_T, &one);
        MPI_Type_commit(&one);
        const int64_t inc = 1, mine = t_rank;
        for (int i = 0; i < ROUNDS; i++) {
            int64_t old, got;
            MPI_Win_lock(i % 2 ? MPI_LOCK_EXCLUSIVE : MPI_LOCK_SHARED, 0, 0, t.win);
            MPI_Accumulate(&inc, 1, one, 0, t_disp(&t, 0, W_ACC * 8), 1, one, MPI_SUM, t.win);
            MPI_Fetch_and_op(&inc, &old, MPI_INT64_T, 0, t_disp(&t, 0, W_FOP * 8), MPI_SUM, t.win);
            MPI_Put(&mine, 1, MPI_INT64_T, 0, t_disp(&t, 0, W_PUT * 8), 1, MPI_INT64_T, t.win);
            MPI_Get(&got, 1, MPI_INT64_T, 0, t_disp(&t, 0, W_PUT * 8), 1, MPI_INT64_T, t.win);
            MPI_Win_flush(0, t.win);
            t_cas_increment(t.win, 0, t_disp(&t, 0, W_CAS * 8), 0);
            MPI_Win_unlock(0, t.win);
        }
        MPI_Type_free(&one);
        int done = 1;
        MPI_Send(&done, 1, MPI_INT, 0, 7, MPI_COMM_WORLD);
    }
    t_win_free(&t);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    /* Intel MPI waits in libfabric's poll loop, which never calls UCX or
     * opal_progress: no host loop to serve from (there the progress thread,
     * on by default, serves; ONESIDED_PROGRESS=0 means no server). */
    if (!t_host_loop_serves()) {
        if (t_rank == 0)
            printf("test_host_progress: skipped (the host's poll loop is not one onesided serves from)\n");
        MPI_Finalize();
        return 77;
    }
    T_FOR_EACH_FLAVOR(f)
        run(f);
    return t_finish("test_host_progress");
}
