/*
 * Multinode cooperation (paper 004) on virtual nodes: the request routes
 * side by side, with the host MPI's own RMA as a row of the same run.
 *
 *   latency     Figure 5: every process paired with one on another node
 *               (rank + P/2), all pairs at once: fetch_and_op (direct
 *               accumulate off: the request path), accumulate of a strided
 *               datatype, lock/unlock through the lock manager.
 *   contention  Figure 7: processes off rank 0's node take turns doing
 *               `--iters` fetch_and_ops (and strided puts) to rank 0 while
 *               the others wait; with 20 % contention one process in five
 *               meanwhile hammers rank 0 with `--burst` requests in flight
 *               (accumulates; strided puts in the put test).
 *   memory      Figure 6: every process sends a request to every process of
 *               every other node; then each reports its request peers,
 *               endpoints and aggregation-buffer bytes, compared with what
 *               the same routing code (os_route.h) computes for this job,
 *               and the computed table for N up to 8192, K = 16 and 32.
 *               Runs the job's route (ONESIDED_ROUTE): one job per route.
 *
 * Routes are chosen per window with the info key onesided_route, so
 * latency and contention compare them in one job; run it with
 * ONESIDED_ROUTE=cooperative (which starts the node servers) and
 * ONESIDED_NODE_SIZE=K. Waiting processes poll with a sleep, so that on an
 * oversubscribed machine the measured processes get the cores.
 *
 * Output: CSV rows figure,test,route,value,unit (--csv FILE, appended), a
 * table on stdout. Exits non-zero when a result is wrong or the measured
 * connection state differs from the computed one.
 */
#include "bench_impl.h"
#include "onesided.h"
#include "rma/net/os_route.h"

#include <math.h>
#include <unistd.h>

enum { NROUTES = 5 };
static const char *const route_names[NROUTES] = { "native", "direct", "server", "cooperative",
                                                  "cooperative+agg" };
static int rank, nprocs, node_size, group_size, iters = 200, agg_us = 50, reps = 3, burst = 64;
static FILE *csv;
static bool scale_table; /* memory: also the computed table at scale */
static int failures;

static void row(const char *figure, const char *test, const char *route, double value,
                const char *unit)
{
    if (rank)
        return;
    if (csv)
        fprintf(csv, "%s,\"%s\",%s,%.6g,%s\n", figure, test, route, value, unit);
    printf("  %-44s %-16s %12.3f %s\n", test, route, value, unit);
    fflush(stdout);
}

/* A row from every process's value (negative: not measured): the median
 * over the processes that measured. Collective. */
static void report(const char *figure, const char *test, const char *route, double mine)
{
    double *all = malloc(sizeof(double) * (size_t)nprocs);
    PMPI_Gather(&mine, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (!rank) {
        int n = 0;
        for (int p = 0; p < nprocs; p++)
            if (all[p] >= 0)
                all[n++] = all[p];
        row(figure, test, route, n ? bench_median(all, n) : NAN, "us");
    }
    free(all);
}

/* Wait for a request without burning a core the measured processes need. */
static void quiet_wait(MPI_Request *r)
{
    int done = 0;
    for (;;) {
        PMPI_Test(r, &done, MPI_STATUS_IGNORE);
        if (done)
            return;
        usleep(50);
    }
}

static void quiet_barrier(void)
{
    MPI_Request r;
    PMPI_Ibarrier(MPI_COMM_WORLD, &r);
    quiet_wait(&r);
}

static int node_of(int r)
{
    return node_size > 0 ? r / node_size : 0;
}

/* A window of route r (index into route_names; 0 = native). */
static MPI_Win make_win(int r, int64_t **base)
{
    MPI_Info info;
    MPI_Win win;
    char buf[32];
    PMPI_Info_create(&info);
    if (r > 0) {
        PMPI_Info_set(info, ONESIDED_INFO_ROUTE, r == 4 ? "cooperative" : route_names[r]);
        snprintf(buf, sizeof buf, "%d", r == 4 ? agg_us : 0);
        PMPI_Info_set(info, ONESIDED_INFO_AGG_WINDOW_US, buf);
        PMPI_Info_set(info, ONESIDED_INFO_ACC_DIRECT, "0");
        PMPI_Info_set(info, ONESIDED_INFO_LOCK, "manager");
        PMPI_Info_set(info, "onesided_lock_piggyback", "0");
    }
    const impl_t *im = &impls[r ? IMPL_ONESIDED : IMPL_NATIVE];
    im->win_allocate(4096, 8, info, MPI_COMM_WORLD, base, &win);
    PMPI_Info_free(&info);
    memset(*base, 0, 4096);
    quiet_barrier();
    return win;
}

/* ---------------------------------------------------------------- latency */

enum { T_FOP, T_ACC, T_LOCK, NTESTS };
static const char *const latency_names[NTESTS] = {
    "fetch_and_op", "accumulate, strided datatype", "lock/unlock (manager)" };

/* Mean microseconds per operation of this process, for one route. */
static double latency_once(int r, int test, MPI_Datatype strided)
{
    const impl_t *im = &impls[r ? IMPL_ONESIDED : IMPL_NATIVE];
    int64_t *base;
    MPI_Win win = make_win(r, &base);
    const int partner = (rank + nprocs / 2) % nprocs;
    double src[16], t0, t;
    int64_t one = 1, old;
    for (int i = 0; i < 16; i++)
        src[i] = 1.0;
    if (test != T_LOCK)
        im->lock_all(0, win);
    quiet_barrier();
    t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        if (test == T_FOP) {
            im->fop(&one, &old, MPI_INT64_T, partner, 0, MPI_SUM, win);
            im->flush(partner, win);
        } else if (test == T_ACC) {
            im->acc(src, 8, MPI_DOUBLE, partner, 8, 1, strided, MPI_SUM, win);
            im->flush(partner, win);
        } else {
            im->lock(MPI_LOCK_EXCLUSIVE, partner, 0, win);
            im->unlock(partner, win);
        }
    }
    t = (MPI_Wtime() - t0) / iters * 1e6;
    if (test != T_LOCK)
        im->unlock_all(win);
    quiet_barrier();
    /* Exactly one process targets each: its counter and its strided cells. */
    if (test == T_FOP && base[0] != iters) {
        fprintf(stderr, "cooperation: rank %d counter %lld, expected %d (%s)\n", rank,
                (long long)base[0], iters, route_names[r]);
        failures++;
    }
    if (test == T_ACC) {
        const double *d = (const double *)base;
        for (int i = 0; i < 8; i++)
            if (d[8 + 2 * i] != iters || d[9 + 2 * i] != 0) {
                fprintf(stderr, "cooperation: rank %d strided cell %d = %g (%s)\n", rank, i,
                        d[8 + 2 * i], route_names[r]);
                failures++;
                break;
            }
    }
    im->win_free(&win);
    return t;
}

static void latency(void)
{
    MPI_Datatype strided;
    PMPI_Type_vector(8, 1, 2, MPI_DOUBLE, &strided);
    PMPI_Type_commit(&strided);
    if (!rank)
        printf("Figure 5: latency, %d pairs across nodes at once, us per operation "
               "(median over processes of the median of %d runs)\n", nprocs / 2, reps);
    for (int test = 0; test < NTESTS; test++) {
        double v[NROUTES][8];
        for (int rep = 0; rep < reps; rep++)
            for (int r = 0; r < NROUTES; r++)
                v[r][rep] = latency_once(r, test, strided);
        for (int r = 0; r < NROUTES; r++)
            report("5", latency_names[test], route_names[r], bench_median(v[r], reps));
    }
    PMPI_Type_free(&strided);
}

/* ------------------------------------------------------------- contention */

/* One scenario: measured processes take turns; contenders hammer rank 0
 * until every turn is done. Returns this process's us per op (-1: not
 * measured). */
static double contention_once(int r, bool put, bool contend, MPI_Datatype strided)
{
    const impl_t *im = &impls[r ? IMPL_ONESIDED : IMPL_NATIVE];
    int64_t *base;
    MPI_Win win = make_win(r, &base);
    const bool measured = node_of(rank) != node_of(0);
    const bool contender = contend && measured && rank % 5 == 4;
    int64_t one = 1, old;
    double src[16], t = -1;
    for (int i = 0; i < 16; i++)
        src[i] = rank;
    im->lock_all(0, win);
    quiet_barrier();
    MPI_Request all_done;
    if (contender) {
        /* Joined at once: the barrier completes when the last turn ends. */
        PMPI_Ibarrier(MPI_COMM_WORLD, &all_done);
        int done = 0;
        /* Each contender keeps `burst` requests in flight (accumulates,
         * acknowledged at the flush): the paper's 20 % of 1024 processes,
         * each with one fetch-&-add outstanding, is ~200 requests in flight
         * at rank 0, which two contenders on this machine can only give
         * this way. */
        while (!done) {
            for (int i = 0; i < burst; i++) {
                if (put)
                    im->put(src, 8, MPI_DOUBLE, 0, 64, 1, strided, win);
                else
                    im->acc(&one, 1, MPI_INT64_T, 0, 1, 1, MPI_INT64_T, MPI_SUM, win);
            }
            im->flush(0, win);
            PMPI_Test(&all_done, &done, MPI_STATUS_IGNORE);
        }
    } else {
        if (measured) {
            /* My turn comes after the previous measured process's. */
            int prev = -1, next = -1;
            for (int p = rank - 1; p >= 0 && prev < 0; p--)
                if (node_of(p) != node_of(0) && !(contend && p % 5 == 4))
                    prev = p;
            for (int p = rank + 1; p < nprocs && next < 0; p++)
                if (node_of(p) != node_of(0) && !(contend && p % 5 == 4))
                    next = p;
            int token = 0;
            if (prev >= 0) {
                MPI_Request rq;
                PMPI_Irecv(&token, 1, MPI_INT, prev, 77, MPI_COMM_WORLD, &rq);
                quiet_wait(&rq);
            }
            double t0 = MPI_Wtime();
            for (int i = 0; i < iters; i++) {
                if (put)
                    im->put(src, 8, MPI_DOUBLE, 0, 64, 1, strided, win);
                else
                    im->fop(&one, &old, MPI_INT64_T, 0, 0, MPI_SUM, win);
                im->flush(0, win);
            }
            t = (MPI_Wtime() - t0) / iters * 1e6;
            if (next >= 0)
                PMPI_Send(&token, 1, MPI_INT, next, 77, MPI_COMM_WORLD);
        }
        PMPI_Ibarrier(MPI_COMM_WORLD, &all_done);
        quiet_wait(&all_done);
    }
    im->unlock_all(win);
    quiet_barrier();
    /* Rank 0's counter: every measured process's turn. */
    int nmeasured = 0;
    for (int p = 0; p < nprocs; p++)
        nmeasured += node_of(p) != node_of(0) && !(contend && p % 5 == 4);
    if (!rank && !put && base[0] != (int64_t)nmeasured * iters) {
        fprintf(stderr, "cooperation: rank 0 counter %lld, expected %d (%s)\n",
                (long long)base[0], nmeasured * iters, route_names[r]);
        failures++;
    }
    im->win_free(&win);
    return t;
}

static void contention(void)
{
    MPI_Datatype strided;
    PMPI_Type_vector(8, 1, 2, MPI_DOUBLE, &strided);
    PMPI_Type_commit(&strided);
    int ncontend = 0;
    for (int p = 0; p < nprocs; p++)
        ncontend += node_of(p) != node_of(0) && p % 5 == 4;
    if (!rank)
        printf("Figure 7: operations to rank 0, processes off its node taking turns, us per "
               "operation (median over them of the median of %d runs); 20%% = %d of %d "
               "processes contending\n", reps, ncontend, nprocs);
    for (int put = 0; put < 2; put++)
        for (int contend = 0; contend < 2; contend++) {
            double v[NROUTES][8];
            for (int rep = 0; rep < reps; rep++)
                for (int r = 0; r < NROUTES; r++)
                    v[r][rep] = contention_once(r, put, contend, strided);
            char test[96];
            snprintf(test, sizeof test, "%s to rank 0, %d%% contention",
                     put ? "strided put" : "fetch_and_op", contend ? 20 : 0);
            for (int r = 0; r < NROUTES; r++)
                report("7", test, route_names[r], v[r][0] < 0 ? -1 : bench_median(v[r], reps));
        }
    PMPI_Type_free(&strided);
}

/* ----------------------------------------------------------------- memory */

static const char *job_route_name(os_route_t *out)
{
    const char *e = getenv("ONESIDED_ROUTE");
    *out = !e ? OS_ROUTE_DIRECT : !strcmp(e, "server") ? OS_ROUTE_SERVER
           : !strcmp(e, "cooperative") ? OS_ROUTE_COOPERATIVE : OS_ROUTE_DIRECT;
    return os_route_name(*out);
}

static void memory(void)
{
    os_route_t route;
    const char *rname = job_route_name(&route);
    int agg_bytes = getenv("ONESIDED_AGG_BYTES") ? atoi(getenv("ONESIDED_AGG_BYTES")) : 8192;
    /* Every process requests from every process of every other node. */
    int64_t *base;
    MPI_Win win;
    MPI_Info info;
    PMPI_Info_create(&info);
    PMPI_Info_set(info, ONESIDED_INFO_ACC_DIRECT, "0");
    MPI_Win_allocate(4096, 8, info, MPI_COMM_WORLD, &base, &win);
    PMPI_Info_free(&info);
    memset(base, 0, 4096);
    quiet_barrier();
    MPI_Win_lock_all(MPI_MODE_NOCHECK, win);
    int64_t one = 1, old;
    for (int k = 1; k < nprocs; k++) {
        int t = (rank + k) % nprocs;
        if (node_of(t) == node_of(rank))
            continue;
        MPI_Fetch_and_op(&one, &old, MPI_INT64_T, t, 0, MPI_SUM, win);
        MPI_Win_flush(t, win);
    }
    MPI_Win_unlock_all(win);
    quiet_barrier();
    int expect = 0;
    for (int p = 0; p < nprocs; p++)
        expect += node_of(p) != node_of(rank);
    if (base[0] != expect) {
        fprintf(stderr, "cooperation: rank %d got %lld requests, expected %d\n", rank,
                (long long)base[0], expect);
        failures++;
    }
    onesided_win_stats_t s;
    onesided_win_get_stats(win, &s);
    long long mine[3] = { (long long)s.counter[ONESIDED_STAT_REQUEST_PEERS],
                          (long long)s.counter[ONESIDED_STAT_ENDPOINTS],
                          (long long)s.counter[ONESIDED_STAT_REQUEST_BUFFER_BYTES] };
    long long *all = malloc(sizeof(long long) * 3 * (size_t)nprocs);
    PMPI_Gather(mine, 3, MPI_LONG_LONG, all, 3, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    MPI_Win_free(&win);
    if (rank) {
        free(all);
        quiet_barrier(); /* while rank 0 computes, without taking its core */
        return;
    }
    /* The same code computes it. */
    os_route_topo_t topo;
    int *peers = malloc(sizeof(int) * (size_t)nprocs), *outp = malloc(sizeof(int) * (size_t)nprocs);
    if (os_route_topo_uniform(&topo, nprocs, node_size, group_size) ||
        os_route_peers(&topo, route, peers, outp)) {
        fprintf(stderr, "cooperation: cannot compute the routes\n");
        exit(1);
    }
    printf("Figure 6: connection state, route %s, %d processes, nodes of %d, groups of %d: "
           "request peers measured / computed per process\n", rname, nprocs, node_size,
           group_size);
    long long node_meas = 0, node_comp = 0, max_meas = 0, max_comp = 0, ep_max = 0, buf_max = 0,
              buf_node = 0;
    for (int p = 0; p < nprocs; p++) {
        const long long m = all[3 * p], c = peers[p];
        printf("    rank %d: %lld / %lld, endpoints %lld, buffers %lld B\n", p, m, c,
               all[3 * p + 1], all[3 * p + 2]);
        if (m != c) {
            fprintf(stderr, "cooperation: rank %d measured %lld request peers, the route "
                    "computes %lld\n", p, m, c);
            failures++;
        }
        if (node_of(p) == 0) {
            node_meas += m;
            node_comp += c;
            buf_node += all[3 * p + 2];
        }
        max_meas = m > max_meas ? m : max_meas;
        max_comp = c > max_comp ? c : max_comp;
        ep_max = all[3 * p + 1] > ep_max ? all[3 * p + 1] : ep_max;
        buf_max = all[3 * p + 2] > buf_max ? all[3 * p + 2] : buf_max;
    }
    char test[96];
    snprintf(test, sizeof test, "N=%d K=%d G=%d measured, most per process", nprocs, node_size,
             group_size);
    row("6", test, rname, (double)max_meas, "request peers");
    snprintf(test, sizeof test, "N=%d K=%d G=%d computed, most per process", nprocs, node_size,
             group_size);
    row("6", test, rname, (double)max_comp, "request peers");
    snprintf(test, sizeof test, "N=%d K=%d G=%d measured, node 0", nprocs, node_size, group_size);
    row("6", test, rname, (double)node_meas, "request peers");
    snprintf(test, sizeof test, "N=%d K=%d G=%d computed, node 0", nprocs, node_size, group_size);
    row("6", test, rname, (double)node_comp, "request peers");
    snprintf(test, sizeof test, "N=%d K=%d G=%d measured, node 0", nprocs, node_size, group_size);
    row("6", test, rname, (double)buf_node, "buffer bytes");
    snprintf(test, sizeof test, "N=%d K=%d G=%d measured, most per process", nprocs, node_size,
             group_size);
    row("6", test, rname, (double)ep_max, "endpoints");
    os_route_topo_free(&topo);
    free(peers);
    free(outp);
    free(all);

    /* The computed table at scale, by the same routing code. */
    if (!scale_table) {
        quiet_barrier();
        return;
    }
    printf("Figure 6 at scale (computed): request peers of the busiest process, of a whole "
           "node, and a node's aggregation buffers (%d B per next hop)\n", agg_bytes);
    const int ns[] = { 256, 1024, 4096 }, ks[] = { 16, 32 };
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (size_t j = 0; j < sizeof ks / sizeof ks[0]; j++) {
            const int n = ns[i], k = ks[j];
            int *pp = malloc(sizeof(int) * (size_t)n), *op = malloc(sizeof(int) * (size_t)n);
            for (int r = OS_ROUTE_DIRECT; r <= OS_ROUTE_COOPERATIVE; r++) {
                if (os_route_topo_uniform(&topo, n, k, group_size) ||
                    os_route_peers(&topo, (os_route_t)r, pp, op))
                    exit(1);
                long long most = 0, node = 0, bufs = 0;
                for (int p = 0; p < n; p++) {
                    most = pp[p] > most ? pp[p] : most;
                    if (p < k) {
                        node += pp[p];
                        bufs += r == OS_ROUTE_DIRECT ? 0 : (long long)op[p] * agg_bytes;
                    }
                }
                snprintf(test, sizeof test, "N=%d K=%d G=%d computed, most per process", n, k,
                         group_size);
                row("6", test, os_route_name((os_route_t)r), (double)most, "request peers");
                snprintf(test, sizeof test, "N=%d K=%d G=%d computed, per node", n, k,
                         group_size);
                row("6", test, os_route_name((os_route_t)r), (double)node, "request peers");
                row("6", test, os_route_name((os_route_t)r), (double)bufs, "buffer bytes");
                os_route_topo_free(&topo);
            }
            free(pp);
            free(op);
        }
    quiet_barrier();
}

int main(int argc, char **argv)
{
    const char *figures = "latency,contention";
    const char *csv_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--figures") && i + 1 < argc)
            figures = argv[++i];
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--burst") && i + 1 < argc)
            burst = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--agg-us") && i + 1 < argc)
            agg_us = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--scale-table"))
            scale_table = true;
        else if (!strcmp(argv[i], "--csv") && i + 1 < argc)
            csv_path = argv[++i];
        else {
            fprintf(stderr, "usage: cooperation [--figures latency,contention,memory] "
                    "[--scale-table] [--iters N] [--reps N] [--burst N] [--agg-us US] [--csv FILE]\n");
            return 2;
        }
    }
    if (reps < 1 || reps > 8)
        reps = 3;
    MPI_Init(&argc, &argv);
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    node_size = getenv("ONESIDED_NODE_SIZE") ? atoi(getenv("ONESIDED_NODE_SIZE")) : 0;
    group_size = getenv("ONESIDED_GROUP_SIZE") ? atoi(getenv("ONESIDED_GROUP_SIZE")) : 4;
    if (node_size < 1 || node_size > nprocs / 2) {
        if (!rank)
            fprintf(stderr, "cooperation: run on virtual nodes of at most half the processes "
                    "(ONESIDED_NODE_SIZE)\n");
        MPI_Finalize();
        return 2;
    }
    if (!rank && csv_path && !(csv = fopen(csv_path, "a"))) {
        perror(csv_path);
        PMPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (csv && ftell(csv) == 0)
        fprintf(csv, "figure,test,route,value,unit\n");
    if (bench_in_list(figures, "latency"))
        latency();
    if (bench_in_list(figures, "contention"))
        contention();
    if (bench_in_list(figures, "memory"))
        memory();
    int bad = failures, any;
    PMPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (csv)
        fclose(csv);
    MPI_Finalize();
    if (any && !rank)
        fprintf(stderr, "cooperation: %d wrong results\n", any);
    return any ? 1 : 0;
}
