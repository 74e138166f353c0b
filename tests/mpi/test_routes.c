/* Request routes between nodes (paper 004): what forwarding and
 * aggregation must keep, on real processes over virtual nodes.
 *
 *  - same-origin ordering: each process sends REPLACE accumulates of 1, 2,
 *    3 ... to one element of a process on another node, as requests (direct
 *    accumulate off), and every few a Get_accumulate(NO_OP) of it, which
 *    must return exactly the last value sent: accumulates of one origin to
 *    one location apply in issue order (MPI's default accumulate_ordering)
 *    through every hop and batch.
 *    The same with the target's accumulate mutex busy (MPI_Win_create
 *    memory a node-mate updates), where the target keeps requests for a
 *    retry: a newer request must wait behind a kept one.
 *  - completion and atomicity: every process adds to one counter of every
 *    other process, with Accumulate (acknowledged at flush) and
 *    Fetch_and_op; exact totals after a flush and after unlock_all, and the
 *    fetched values all distinct per target (no two saw the same).
 *  - strided and dynamic: a strided accumulate and a put to a dynamic
 *    window (both requests) land exactly.
 *  - statistics: on a job running routes, the windows use them (no
 *    fallback) and some process forwarded when the layout has processes
 *    that are not their node's server or more nodes than a group; on a job
 *    running none, a window asking for one goes direct and counts it.
 * The route comes from the environment (ONESIDED_ROUTE, ONESIDED_NODE_SIZE,
 * ONESIDED_GROUP_SIZE) and the window's info key; run it under each.
 */
#include "common.h"
#include "stats.h"

#include <onesided.h>

enum { ITERS = 400, READ_EVERY = 7 };

static const char *job_route(void)
{
    const char *r = getenv("ONESIDED_ROUTE");
    return r && *r ? r : "direct";
}

static MPI_Info route_info(void)
{
    MPI_Info info;
    MPI_Info_create(&info);
    /* The window asks for the job's route, or cooperative on a direct job
     * (which must fall back). */
    MPI_Info_set(info, ONESIDED_INFO_ROUTE,
                 strcmp(job_route(), "direct") ? job_route() : "cooperative");
    MPI_Info_set(info, ONESIDED_INFO_ACC_DIRECT, "0");
    return info;
}

/* The process this one sends to: half the job away (another node). */
static int partner(void)
{
    return (t_rank + t_size / 2) % t_size;
}

/* REPLACE accumulates of 1, 2, 3 ... to one element of t, as requests, with
 * a Get_accumulate(NO_OP) every READ_EVERY that must see the last value
 * sent; false (and one failed check) at the first that does not. */
static bool replace_in_order(MPI_Win win, int t, MPI_Aint disp, const char *what)
{
    int64_t seen = -1, zero = 0;
    for (int64_t i = 1; i <= ITERS; i++) {
        MPI_Accumulate(&i, 1, MPI_INT64_T, t, disp, 1, MPI_INT64_T, MPI_REPLACE, win);
        if (i % READ_EVERY)
            continue;
        MPI_Get_accumulate(&zero, 1, MPI_INT64_T, &seen, 1, MPI_INT64_T, t, disp, 1,
                           MPI_INT64_T, MPI_NO_OP, win);
        MPI_Win_flush(t, win);
        if (seen != i) {
            CHECK(0, "%s: read %lld after sending %lld to rank %d", what, (long long)seen,
                  (long long)i, t);
            return false;
        }
    }
    return true;
}

static void test_ordering(void)
{
    MPI_Info info = route_info();
    t_win_t tw = t_win_make(F_ALLOCATE, 8 * 64, info);
    MPI_Info_free(&info);
    const int t = partner();
    MPI_Win_lock_all(0, tw.win);
    const bool ordered = replace_in_order(tw.win, t, 8 * t_rank % (8 * 64), "route");
    MPI_Win_unlock_all(tw.win);
    CHECK(ordered, "same-origin accumulates in order through the route");
    MPI_Barrier(MPI_COMM_WORLD);
    /* Who sent to me: the process whose partner I am. */
    for (int r = 0; r < t_size; r++)
        if ((r + t_size / 2) % t_size == t_rank) {
            int64_t v;
            memcpy(&v, tw.base + 8 * r % (8 * 64), 8);
            CHECK(v == ITERS, "rank %d's last value here is %lld", r, (long long)v);
        }
    t_win_free(&tw);
}

/* The same ordering while the target's accumulate mutex is busy, so that
 * the target keeps requests for a retry: MPI_Win_create memory of a node
 * with two processes (its node-mate reaches it by CMA, so every accumulate
 * takes the mutex), which the node-mate holds with large accumulates. A
 * newer request must not overtake a kept one. Nodes of 2 or more only. */
static void test_ordering_busy_target(void)
{
    const int k = t_virtual_node_size();
    const int nodes = k ? t_size / k : 0; /* whole nodes only */
    if (k < 2 || nodes < 2)
        return;
    enum { BIG = 4096 };
    MPI_Info info = route_info();
    t_win_t tw = t_win_make(F_CREATE, 8 * (64 + BIG), info);
    MPI_Info_free(&info);
    const int node = t_rank / k;
    const bool origin = node < nodes && t_rank % k == 0;
    const bool hammer = node < nodes && t_rank % k == 1;
    MPI_Request done;
    MPI_Win_lock_all(0, tw.win);
    if (origin) {
        const int t = ((node + 1) % nodes) * k;
        const bool ordered = replace_in_order(tw.win, t, 8 * t_rank, "busy target");
        CHECK(ordered, "same-origin order while the target keeps requests");
        MPI_Ibarrier(MPI_COMM_WORLD, &done);
        MPI_Wait(&done, MPI_STATUS_IGNORE);
    } else {
        double *ones = malloc(sizeof(double) * BIG);
        for (int i = 0; i < BIG; i++)
            ones[i] = 1;
        int flag = 0;
        MPI_Ibarrier(MPI_COMM_WORLD, &done);
        while (!flag) {
            if (hammer) {
                MPI_Accumulate(ones, BIG, MPI_DOUBLE, t_rank - 1, 8 * 64, BIG, MPI_DOUBLE,
                               MPI_SUM, tw.win);
                MPI_Win_flush(t_rank - 1, tw.win);
            }
            MPI_Test(&done, &flag, MPI_STATUS_IGNORE);
        }
        free(ones);
    }
    MPI_Win_unlock_all(tw.win);
    MPI_Barrier(MPI_COMM_WORLD);
    t_win_free(&tw);
}

static void test_counters(void)
{
    MPI_Info info = route_info();
    t_win_t tw = t_win_make(F_ALLOCATE, 16, info);
    MPI_Info_free(&info);
    const int64_t one = 1;
    int64_t *fetched = malloc(sizeof(int64_t) * (size_t)t_size * 20);
    MPI_Win_lock_all(0, tw.win);
    for (int k = 0; k < 20; k++)
        for (int r = 0; r < t_size; r++) {
            MPI_Accumulate(&one, 1, MPI_INT64_T, r, 0, 1, MPI_INT64_T, MPI_SUM, tw.win);
            MPI_Fetch_and_op(&one, &fetched[(size_t)r * 20 + (size_t)k], MPI_INT64_T, r, 8,
                             MPI_SUM, tw.win);
        }
    MPI_Win_flush_all(tw.win);
    MPI_Win_unlock_all(tw.win);
    MPI_Barrier(MPI_COMM_WORLD);
    int64_t v[2];
    memcpy(v, tw.base, 16);
    CHECK(v[0] == 20 * t_size && v[1] == 20 * t_size, "counters %lld %lld, want %d",
          (long long)v[0], (long long)v[1], 20 * t_size);
    /* Every fetch of one counter saw a different value: gather them at the
     * owner and check 0 .. 20P-1 each appear once. */
    int64_t *all = malloc(sizeof(int64_t) * (size_t)t_size * 20);
    for (int r = 0; r < t_size; r++)
        MPI_Gather(&fetched[(size_t)r * 20], 20, MPI_INT64_T, all, 20, MPI_INT64_T, r,
                   MPI_COMM_WORLD);
    char *hit = calloc((size_t)t_size * 20, 1);
    bool distinct = true;
    for (int i = 0; i < t_size * 20; i++) {
        if (all[i] < 0 || all[i] >= t_size * 20 || hit[all[i]])
            distinct = false;
        else
            hit[all[i]] = 1;
    }
    CHECK(distinct, "fetch_and_op results at rank %d are 0..%d, each once", t_rank,
          t_size * 20 - 1);
    free(hit);
    free(all);
    free(fetched);
    t_win_free(&tw);
}

static void test_strided_and_dynamic(void)
{
    MPI_Info info = route_info();
    t_win_t tw = t_win_make(F_ALLOCATE, sizeof(double) * 64, info);
    t_win_t dw = t_win_make(F_DYNAMIC, 64, info);
    MPI_Info_free(&info);
    MPI_Datatype strided;
    MPI_Type_vector(8, 1, 3, MPI_DOUBLE, &strided);
    MPI_Type_commit(&strided);
    double src[8];
    for (int i = 0; i < 8; i++)
        src[i] = i + 1;
    const int t = partner();
    char msg[64];
    snprintf(msg, sizeof msg, "from rank %d", t_rank);
    MPI_Win_lock_all(0, tw.win);
    MPI_Win_lock_all(0, dw.win);
    for (int k = 0; k < 5; k++)
        MPI_Accumulate(src, 8, MPI_DOUBLE, t, 0, 1, strided, MPI_SUM, tw.win);
    MPI_Put(msg, (int)sizeof msg, MPI_CHAR, t, dw.origin[t], (int)sizeof msg, MPI_CHAR, dw.win);
    MPI_Win_unlock_all(dw.win);
    MPI_Win_unlock_all(tw.win);
    MPI_Barrier(MPI_COMM_WORLD);
    const double *d = (const double *)tw.base;
    bool ok = true;
    for (int i = 0; i < 8; i++)
        ok &= d[3 * i] == 5.0 * (i + 1) && d[3 * i + 1] == 0;
    CHECK(ok, "strided accumulate through the route");
    int from = -1;
    for (int r = 0; r < t_size; r++)
        if ((r + t_size / 2) % t_size == t_rank)
            from = r;
    snprintf(msg, sizeof msg, "from rank %d", from);
    CHECK(!strcmp(dw.base, msg), "dynamic put through the route: '%s'", dw.base);
    MPI_Type_free(&strided);

    /* Which path: a routed job's windows use its route; a direct job's
     * window that asks for one goes direct and says so. */
    const bool routed = strcmp(job_route(), "direct") != 0;
    const int k = t_virtual_node_size();
    CHECK(t_stat(tw.win, ONESIDED_STAT_FALLBACK_ROUTE_DIRECT) == (!routed && k ? 1u : 0u),
          "fallback_route_direct");
    uint64_t fwd = t_stat(tw.win, ONESIDED_STAT_REQUESTS_FORWARDED), all_fwd = 0;
    MPI_Allreduce(&fwd, &all_fwd, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    const char *g = getenv("ONESIDED_GROUP_SIZE");
    const int nodes = k ? (t_size + k - 1) / k : 1, group = g ? atoi(g) : 4;
    const bool forwards = routed && k && (k > 1 || (!strcmp(job_route(), "cooperative") &&
                                                    nodes > group));
    CHECK(forwards ? all_fwd > 0 : all_fwd == 0, "%llu requests forwarded",
          (unsigned long long)all_fwd);
    if (k)
        CHECK(t_stat(tw.win, ONESIDED_STAT_REQUEST_PEERS) > 0, "request peers counted");
    t_win_free(&dw);
    t_win_free(&tw);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    test_ordering();
    test_ordering_busy_target();
    test_counters();
    test_strided_and_dynamic();
    return t_finish("test_routes");
}
