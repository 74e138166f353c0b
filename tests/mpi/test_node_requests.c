/* Node requests (src/rma/node_request.c): operations on a node-mate's
 * memory that only CMA reaches (MPI_Win_create over a malloc smaller than a
 * page), applied by the target while it polls.
 *
 *  1. every operation kind, contiguous and strided, with the target waiting
 *     in MPI_Barrier: exact results, and (where the path exists) the
 *     origins counted node_requests;
 *  2. processes posting to each other at once, nobody inside the host MPI:
 *     each origin's wait serves its own mailbox (no stall), exact counter;
 *  3. a target that alternates a polling streak with computing: requests
 *     posted as it leaves its loop are taken back and done by CMA
 *     (fallback_node_request_cma), others are served, and fetch_and_op
 *     from every process (the target's own included, on its local path)
 *     stays atomic across the three paths: exact total;
 *  4. with ONESIDED_NODE_REQUESTS=0 the same results with no request;
 *  5. and there, every operation kind (strided accumulates, fetch_and_op
 *     and compare_and_swap included) counted once in fallback_cma, the
 *     path it took, however many system calls it made;
 *  6. windows sharing a process's slots (one per pair of processes, for
 *     all its windows; a request names its window by the target's key):
 *     three windows alive, requests alternating between them, then the
 *     middle one freed and another made in its place, which takes its
 *     number again; each word lands in its own window, and with the path
 *     there some went as requests.
 *
 * The path exists where the node shares memory and CMA is allowed (not
 * under the no-CMA wrapper, not between virtual nodes or hosts); for a
 * target waiting inside the host MPI, where the host's poll loop is one
 * onesided serves from (not Intel MPI's). */
#include "common.h"
#include "stats.h"

#include <onesided.h>
#include <time.h>
#include <unistd.h>

#define WORDS 32 /* 256 bytes: a heap block that shares its page */

static bool path_expected(void)
{
    const char *v = getenv("ONESIDED_NODE_REQUESTS");
    return !(v && atoi(v) == 0) && !t_cma_refused() && t_virtual_node_size() == 0 &&
           t_hosts == 1;
}

/* ... for a target waiting inside the host MPI (not inside onesided). */
static bool path_expected_in_host(void)
{
    return path_expected() && t_host_loop_serves();
}

static uint64_t sum_stat(MPI_Win win, int which)
{
    uint64_t mine = t_stat(win, which), all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    return all;
}

static void spin_us(double us)
{
    double end = MPI_Wtime() + us * 1e-6;
    while (MPI_Wtime() < end)
        ;
}

/* Whether a part's rounds may end, from a count (summed over processes)
 * the path should make positive: zero where the path does not exist; more,
 * given a core per process, in some round. The last round fails and ends
 * the loop (returning false there repeated rounds forever: a timeout
 * instead of the failure). */
static bool rounds_done(uint64_t all, bool expected, bool last, const char *counted,
                        const char *missing)
{
    if (!expected) {
        CHECK(all == 0, "%llu %s where the path does not exist", (unsigned long long)all,
              counted);
        return true;
    }
    if (t_size > sysconf(_SC_NPROCESSORS_ONLN) || all > 0)
        return true;
    if (last) {
        CHECK(all > 0, "%s, in any round", missing);
        return true;
    }
    return false;
}

/* 1. Every kind, rank 0 the target, waiting in MPI_Barrier. */
static bool every_kind(int64_t *mem, MPI_Win win, bool last)
{
    const int me = t_rank;
    MPI_Datatype every_other;
    MPI_Type_vector(2, 1, 2, MPI_INT64_T, &every_other);
    MPI_Type_commit(&every_other);
    for (int i = 0; i < WORDS; i++)
        mem[i] = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (me != 0 && me <= 7) {
        /* Origin me owns words own .. own + 2; words 0-3 are everybody's. */
        const MPI_Aint own = 8 + 3 * (me - 1);
        int64_t v[2] = { 100 + me, 200 + me }, got[2] = { -1, -1 }, old = -1;
        MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
        for (int round = 0; round < 50; round++) {
            MPI_Put(v, 2, MPI_INT64_T, 0, own, 2, MPI_INT64_T, win);
            MPI_Win_flush(0, win);
            MPI_Get(got, 2, MPI_INT64_T, 0, own, 2, MPI_INT64_T, win);
            MPI_Win_flush(0, win);
            CHECK(got[0] == v[0] && got[1] == v[1], "get after put: %lld %lld",
                  (long long)got[0], (long long)got[1]);
            /* strided: words own+0 and own+2 */
            int64_t s[2] = { me, -me };
            MPI_Put(s, 2, MPI_INT64_T, 0, own, 1, every_other, win);
            MPI_Win_flush(0, win);
            MPI_Get(got, 2, MPI_INT64_T, 0, own, 1, every_other, win);
            MPI_Win_flush(0, win);
            CHECK(got[0] == me && got[1] == -me, "strided get: %lld %lld", (long long)got[0],
                  (long long)got[1]);
            int64_t one = 1;
            MPI_Accumulate(&one, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T, MPI_SUM, win);
            MPI_Win_flush(0, win);
            MPI_Fetch_and_op(&one, &old, MPI_INT64_T, 0, 1, MPI_SUM, win);
            MPI_Win_flush(0, win);
            int64_t two[2] = { 1, 1 }, before[2];
            MPI_Get_accumulate(two, 2, MPI_INT64_T, before, 2, MPI_INT64_T, 0, 2, 2, MPI_INT64_T,
                               MPI_SUM, win);
            MPI_Win_flush(0, win);
            CHECK(before[0] == before[1], "get_accumulate fetched %lld %lld", (long long)before[0],
                  (long long)before[1]);
            /* compare_and_swap on this origin's own word: deterministic */
            int64_t cmp = me, swap = me + 1000, res = -1;
            MPI_Compare_and_swap(&swap, &cmp, &res, MPI_INT64_T, 0, own, win);
            MPI_Win_flush(0, win);
            CHECK(res == me, "compare_and_swap found %lld, expected %d", (long long)res, me);
            MPI_Fetch_and_op(NULL, &res, MPI_INT64_T, 0, own, MPI_NO_OP, win);
            MPI_Win_flush(0, win);
            CHECK(res == me + 1000, "swapped word holds %lld", (long long)res);
        }
        MPI_Win_unlock(0, win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const int origins = (t_size < 8 ? t_size : 8) - 1;
    if (me == 0) {
        CHECK(mem[0] == 50 * origins, "accumulates: %lld, expected %d", (long long)mem[0],
              50 * origins);
        CHECK(mem[1] == 50 * origins, "fetch_and_op: %lld", (long long)mem[1]);
        CHECK(mem[2] == 50 * origins && mem[3] == 50 * origins, "get_accumulate: %lld %lld",
              (long long)mem[2], (long long)mem[3]);
    }
    const uint64_t sent = sum_stat(win, ONESIDED_STAT_NODE_REQUESTS);
    const uint64_t served = sum_stat(win, ONESIDED_STAT_NODE_REQUESTS_SERVED);
    CHECK(sent == served, "%llu requests sent, %llu served", (unsigned long long)sent,
          (unsigned long long)served);
    MPI_Type_free(&every_other);
    /* With more processes than cores, a target's polls come between other
     * processes' time slices, too far apart to make a streak: CMA then. On
     * a loaded machine even a core each may not give one: rounds repeat. */
    return rounds_done(sent, path_expected_in_host(), last, "node requests",
                       "no operation went as a node request");
}

/* 2. Everybody increments its right neighbour's word, nobody in the host MPI. */
static void crossing(int64_t *mem, MPI_Win win)
{
    const int n = 2000, right = (t_rank + 1) % t_size;
    mem[5] = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock_all(0, win);
    int64_t one = 1, old;
    for (int i = 0; i < n; i++) {
        MPI_Fetch_and_op(&one, &old, MPI_INT64_T, right, 5, MPI_SUM, win);
        MPI_Win_flush(right, win);
    }
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(mem[5] == n, "neighbour increments: %lld, expected %d", (long long)mem[5], n);
}

/* 3. Rank 0 alternates a polling streak with computing; every process
 *    (rank 0 too) fetch_and_ops word 6 of rank 0. */
static bool on_and_off(int64_t *mem, MPI_Win win, bool last)
{
    const double seconds = 0.3;
    mem[6] = 0;
    uint64_t gave_up0 = t_stat(win, ONESIDED_STAT_FALLBACK_NODE_REQUEST_CMA);
    MPI_Barrier(MPI_COMM_WORLD);
    int64_t one = 1, old, mine = 0;
    MPI_Win_lock_all(0, win);
    const double end = MPI_Wtime() + seconds;
    if (t_rank == 0) {
        int flag;
        while (MPI_Wtime() < end) {
            for (int i = 0; i < 50; i++) /* a streak of polls */
                MPI_Iprobe(MPI_ANY_SOURCE, 77, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
            spin_us(30);
            MPI_Fetch_and_op(&one, &old, MPI_INT64_T, 0, 6, MPI_SUM, win);
            MPI_Win_flush(0, win);
            mine++;
        }
    } else {
        while (MPI_Wtime() < end) {
            MPI_Fetch_and_op(&one, &old, MPI_INT64_T, 0, 6, MPI_SUM, win);
            MPI_Win_flush(0, win);
            mine++;
        }
    }
    MPI_Win_unlock_all(win);
    int64_t total = 0;
    MPI_Allreduce(&mine, &total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == 0)
        CHECK(mem[6] == total, "fetch_and_op across paths: %lld, expected %lld",
              (long long)mem[6], (long long)total);
    uint64_t gave_up = t_stat(win, ONESIDED_STAT_FALLBACK_NODE_REQUEST_CMA) - gave_up0, all = 0;
    MPI_Allreduce(&gave_up, &all, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    /* Thousands of chances in 0.3 s; only with a core per process is the
     * timing certain enough to require one (rounds repeat on a loaded
     * machine). */
    return rounds_done(all, path_expected(), last, "requests taken back",
                       "no request was taken back from a target that computes");
}

/* 5. Node requests off, CMA allowed, one host: each operation by CMA, one
 *    count each. Rank 1 is the origin, rank 0 the target in MPI_Barrier. */
static void counted_once(int64_t *mem, MPI_Win win)
{
    const char *v = getenv("ONESIDED_NODE_REQUESTS");
    if (!(v && atoi(v) == 0) || t_cma_refused() || t_virtual_node_size() || t_hosts > 1)
        return;
    MPI_Datatype every_other;
    MPI_Type_vector(2, 1, 2, MPI_INT64_T, &every_other);
    MPI_Type_commit(&every_other);
    static const char *const kind[] = { "put", "get", "accumulate", "strided accumulate",
                                        "get_accumulate", "fetch_and_op", "compare_and_swap" };
    if (t_rank == 1) {
        int64_t one[2] = { 1, 1 }, got[2], cmp = 0, swap = 0;
        MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
        for (int k = 0; k < 7; k++) {
            const uint64_t before = t_stat(win, ONESIDED_STAT_FALLBACK_CMA);
            switch (k) {
            case 0: MPI_Put(one, 1, MPI_INT64_T, 0, 20, 1, MPI_INT64_T, win); break;
            case 1: MPI_Get(got, 1, MPI_INT64_T, 0, 20, 1, MPI_INT64_T, win); break;
            case 2: MPI_Accumulate(one, 1, MPI_INT64_T, 0, 20, 1, MPI_INT64_T, MPI_SUM, win); break;
            case 3: MPI_Accumulate(one, 2, MPI_INT64_T, 0, 20, 1, every_other, MPI_SUM, win); break;
            case 4: MPI_Get_accumulate(one, 1, MPI_INT64_T, got, 1, MPI_INT64_T, 0, 20, 1,
                                       MPI_INT64_T, MPI_SUM, win); break;
            case 5: MPI_Fetch_and_op(one, got, MPI_INT64_T, 0, 20, MPI_SUM, win); break;
            case 6: MPI_Compare_and_swap(&swap, &cmp, got, MPI_INT64_T, 0, 24, win); break;
            }
            MPI_Win_flush(0, win);
            const uint64_t n = t_stat(win, ONESIDED_STAT_FALLBACK_CMA) - before;
            CHECK(n == 1, "%s by CMA counted %llu times in fallback_cma, expected once", kind[k],
                  (unsigned long long)n);
        }
        MPI_Win_unlock(0, win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Type_free(&every_other);
}

/* 6. Rank 0 the target, waiting in MPI_Barrier; every other rank puts
 *    and accumulates into words of its own in each window. */
static bool shared_slots(bool last)
{
    enum { NWIN = 3, ROUNDS = 200 };
    int64_t *mem[NWIN];
    MPI_Win win[NWIN];
    uint64_t sent = 0;
    for (int k = 0; k < NWIN; k++) {
        mem[k] = calloc(WORDS, sizeof *mem[k]);
        MPI_Win_create(mem[k], WORDS * sizeof *mem[k], sizeof *mem[k], MPI_INFO_NULL,
                       MPI_COMM_WORLD, &win[k]);
    }
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) { /* the middle window again: its number is given again */
            sent += t_stat(win[1], ONESIDED_STAT_NODE_REQUESTS);
            MPI_Win_free(&win[1]);
            memset(mem[1], 0, WORDS * sizeof *mem[1]);
            MPI_Win_create(mem[1], WORDS * sizeof *mem[1], sizeof *mem[1], MPI_INFO_NULL,
                           MPI_COMM_WORLD, &win[1]);
        }
        const MPI_Aint own = 8 + t_rank % (WORDS - 8);
        if (t_rank != 0) {
            for (int k = 0; k < NWIN; k++)
                MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win[k]);
            for (int i = 0; i < ROUNDS; i++)
                for (int k = 0; k < NWIN; k++) {
                    const int64_t v = 1000 * (k + 1) + i, one = 1;
                    MPI_Put(&v, 1, MPI_INT64_T, 0, own, 1, MPI_INT64_T, win[k]);
                    MPI_Win_flush(0, win[k]);
                    MPI_Accumulate(&one, 1, MPI_INT64_T, 0, k, 1, MPI_INT64_T, MPI_SUM, win[k]);
                    MPI_Win_flush(0, win[k]);
                }
            for (int k = 0; k < NWIN; k++)
                MPI_Win_unlock(0, win[k]);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (t_rank == 0)
            for (int k = 0; k < NWIN; k++)
                for (int j = 0; j < NWIN; j++) {
                    /* window k's counter k holds every origin's rounds of
                     * both passes (window 1: of this pass alone) */
                    const int64_t want =
                        j != k ? 0 : (int64_t)(t_size - 1) * ROUNDS * (k == 1 ? 1 : pass + 1);
                    CHECK(mem[k][j] == want, "pass %d: window %d word %d holds %lld, expected %lld",
                          pass, k, j, (long long)mem[k][j], (long long)want);
                }
        for (int o = 1; t_rank == 0 && o < t_size && o < WORDS - 8; o++)
            for (int k = 0; k < NWIN; k++) {
                const int64_t want = 1000 * (k + 1) + ROUNDS - 1;
                CHECK(mem[k][8 + o] == want, "pass %d: window %d, origin %d's word holds %lld, "
                      "expected %lld", pass, k, o, (long long)mem[k][8 + o], (long long)want);
            }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    for (int k = 0; k < NWIN; k++) {
        sent += t_stat(win[k], ONESIDED_STAT_NODE_REQUESTS);
        MPI_Win_free(&win[k]);
        free(mem[k]);
    }
    uint64_t all = 0;
    MPI_Allreduce(&sent, &all, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    return rounds_done(all, path_expected_in_host(), last, "node requests",
                       "no operation on three windows went as a node request");
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    int64_t *mem = calloc(WORDS, sizeof *mem);
    MPI_Win win;
    MPI_Win_create(mem, WORDS * sizeof *mem, sizeof *mem, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    for (int round = 0; !every_kind(mem, win, round == 19); round++)
        ;
    crossing(mem, win);
    for (int round = 0; !on_and_off(mem, win, round == 9); round++)
        ;
    counted_once(mem, win);
    MPI_Win_free(&win);
    free(mem);
    for (int round = 0; !shared_slots(round == 9); round++)
        ;
    return t_finish("test_node_requests");
}
