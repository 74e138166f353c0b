/*
 * Latency and bandwidth of every RMA operation from 8 B to 1 MB under each
 * synchronization mode, native host-MPI RMA against onesided in the same run.
 *
 *   mpiexec -n 2 rma_sweep [--max-size BYTES] [--reps R] [--scale S] [--csv FILE]
 *                          [--ops put,get,accumulate,fetch_and_op,compare_and_swap]
 *
 * Operations: put, get, accumulate (MPI_SUM on MPI_LONG) at every size;
 * fetch_and_op and compare_and_swap at 8 bytes (they move one element).
 * Synchronization modes, rank 0 the origin, rank 1 the target:
 *   flush  inside MPI_Win_lock_all: the operation, then MPI_Win_flush
 *   lock   MPI_Win_lock(SHARED), the operation, MPI_Win_unlock
 *   fence  MPI_Win_fence, the operation, MPI_Win_fence (both ranks)
 *   pscw   origin start/operation/complete, target post/wait
 * Latency: one operation per epoch (or per flush), microseconds per iteration.
 * Bandwidth: a burst of operations in one epoch, MB/s (10^6 bytes per second).
 * Each figure is the median over R repetitions, native's and onesided's
 * taken in turn. Every repetition is verified
 * (put: the target's bytes; get: the origin's bytes; accumulate and
 * fetch_and_op: exact totals; compare_and_swap: the chain of fetched values).
 */
#include "bench_impl.h"

enum { O_PUT, O_GET, O_ACC, O_FOP, O_CAS, NOPS };
static const char *const op_name[NOPS] = { "put", "get", "accumulate", "fetch_and_op",
                                           "compare_and_swap" };
enum { S_FLUSH, S_LOCK, S_FENCE, S_PSCW, NSYNC };
static const char *const sync_name[NSYNC] = { "flush", "lock", "fence", "pscw" };

static int rank;
static MPI_Group peer;

static void open_epoch(const impl_t *m, int s, MPI_Win win)
{
    switch (s) {
    case S_LOCK: if (rank == 0) m->lock(MPI_LOCK_SHARED, 1, 0, win); break;
    case S_FENCE: m->fence(0, win); break;
    case S_PSCW: if (rank == 0) m->start(peer, 0, win); else m->post(peer, 0, win); break;
    default: break;
    }
}

static void close_epoch(const impl_t *m, int s, MPI_Win win)
{
    switch (s) {
    case S_FLUSH: if (rank == 0) m->flush(1, win); break;
    case S_LOCK: if (rank == 0) m->unlock(1, win); break;
    case S_FENCE: m->fence(0, win); break;
    case S_PSCW: if (rank == 0) m->complete(win); else m->wait(win); break;
    }
}

/* One operation of `n` longs from rank 0 to rank 1. */
static void issue(const impl_t *m, int op, long *buf, long *res, int n, long iter, MPI_Win win)
{
    static const long one = 1;
    long cmp = iter, val = iter + 1;
    switch (op) {
    case O_PUT: m->put(buf, n, MPI_LONG, 1, 0, n, MPI_LONG, win); break;
    case O_GET: m->get(res, n, MPI_LONG, 1, 0, n, MPI_LONG, win); break;
    case O_ACC: m->acc(buf, n, MPI_LONG, 1, 0, n, MPI_LONG, MPI_SUM, win); break;
    case O_FOP: m->fop(&one, res, MPI_LONG, 1, 0, MPI_SUM, win); break;
    case O_CAS: m->cas(&val, &cmp, res, MPI_LONG, 1, 0, win); break;
    }
}

static void fail_if(bool bad, const char *what, const impl_t *m, int op, int s, int n, long got,
                    long want)
{
    if (bad)
        BENCH_FAIL("rma_sweep", "%s %s/%s, %d longs: %s: got %ld, expected %ld", m->name,
                   op_name[op], sync_name[s], n, what, got, want);
}

/* One repetition; returns seconds. burst = operations per epoch (1 = latency). */
static double rep(const impl_t *m, int op, int s, long *base, long *buf, long *res, int n,
                  int iters, int burst, MPI_Win win)
{
    /* Fresh target state, published before the origin starts. */
    if (rank == 1)
        for (int i = 0; i < n; i++)
            base[i] = op == O_GET ? 1000 + i : 0;
    if (rank == 0)
        for (int i = 0; i < n; i++)
            buf[i] = op == O_ACC ? 1 : 7 * i + 3;
    m->fence(0, win);
    m->fence(MPI_MODE_NOSUCCEED, win);
    MPI_Barrier(MPI_COMM_WORLD);
    if (s == S_FLUSH && rank == 0)
        m->lock_all(0, win);
    double t0 = MPI_Wtime();
    long k = 0;
    for (int it = 0; it < iters; it++) {
        open_epoch(m, s, win);
        /* Fetching operations of one epoch get result slots of their own. */
        for (int b = 0; b < burst; b++, k++)
            if (rank == 0)
                issue(m, op, buf, op >= O_FOP ? res + b : res, n, k, win);
        close_epoch(m, s, win);
        if (rank == 0 && op == O_CAS)
            fail_if(res[burst - 1] != k - 1, "fetched value", m, op, s, n, res[burst - 1], k - 1);
    }
    double t = MPI_Wtime() - t0;
    if (s == S_FENCE)
        m->fence(MPI_MODE_NOSUCCEED, win);
    if (s == S_FLUSH && rank == 0)
        m->unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    /* Check the last element and the first. */
    const long total = (long)iters * burst;
    if (rank == 1) {
        m->lock(MPI_LOCK_EXCLUSIVE, 1, 0, win);
        for (int i = 0; i < n; i += n - 1 > 0 ? n - 1 : 1) {
            /* accumulate, fetch_and_op and compare_and_swap all add 1 per call */
            long want = op == O_PUT ? 7 * i + 3 : op == O_GET ? 1000 + i : total;
            fail_if(base[i] != want, "target value", m, op, s, n, base[i], want);
            if (n == 1) break;
        }
        m->unlock(1, win);
    }
    if (rank == 0 && op == O_GET)
        for (int i = 0; i < n; i += n - 1 > 0 ? n - 1 : 1) {
            fail_if(res[i] != 1000 + i, "fetched data", m, op, s, n, res[i], 1000 + i);
            if (n == 1) break;
        }
    MPI_Bcast(&t, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    return t;
}

int main(int argc, char **argv)
{
    long max_size = 1 << 20;
    int reps = 5, nprocs;
    double scale = 1.0;
    const char *csv = NULL, *ops = NULL;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--max-size") && i + 1 < argc) max_size = atol(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--scale") && i + 1 < argc) scale = atof(argv[++i]);
        else if (!strcmp(argv[i], "--csv") && i + 1 < argc) csv = argv[++i];
        else if (!strcmp(argv[i], "--ops") && i + 1 < argc) ops = argv[++i];
    }
    if (nprocs != 2) {
        if (rank == 0) fprintf(stderr, "rma_sweep runs on exactly 2 processes\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int other = 1 - rank;
    MPI_Group world;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 1, &other, &peer);

    const int maxn = (int)(max_size / (long)sizeof(long)) + 4096; /* + result slots of bursts */
    long *buf = malloc(sizeof(long) * (size_t)maxn), *res = malloc(sizeof(long) * (size_t)maxn);
    long *base[2];
    MPI_Win win[2];
    for (int k = 0; k < 2; k++)
        if (bench_impl_on(k))
            impls[k].win_allocate((MPI_Aint)max_size, sizeof(long), MPI_INFO_NULL,
                                  MPI_COMM_WORLD, &base[k], &win[k]);
    FILE *out = rank == 0 && csv ? fopen(csv, "w") : NULL;
    if (out)
        fprintf(out, "op,sync,bytes,metric,native,onesided,ratio\n");
    double *sample[2] = { malloc(sizeof(double) * (size_t)reps),
                          malloc(sizeof(double) * (size_t)reps) };
    for (int op = 0; op < NOPS; op++) {
        if (ops && !bench_in_list(ops, op_name[op]))
            continue;
        for (int s = 0; s < NSYNC; s++) {
            if (rank == 0) {
                printf("%s / %s\n", op_name[op], sync_name[s]);
                printf("  %8s | %10s %10s %7s | %10s %10s %7s\n", "bytes", "lat native",
                       "onesided", "ratio", "MB/s native", "onesided", "ratio");
            }
            static const long sizes[] = { 8, 64, 512, 4096, 32768, 262144, 1048576 };
            for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++) {
                long bytes = sizes[z];
                if (bytes > max_size || (op >= O_FOP && bytes > 8))
                    break;
                int n = (int)(bytes / (long)sizeof(long));
                double lat[2], bw[2];
                int iters = (int)(scale * (bytes <= 4096 ? 1000 : (double)(4 << 20) / bytes));
                int burst = (int)(scale * (bytes <= 4096 ? 200 : (double)(16 << 20) / bytes));
                if (iters < 8) iters = 8;
                if (burst < 4) burst = 4;
                if (burst > 4096) burst = 4096;
                /* The two implementations in turn, repetition by repetition,
                 * so that both see the same machine: one after the other,
                 * seconds apart, an 8-byte latency ratio across the
                 * namespace hosts moved by 30 % from run to run. */
                const int bi = iters / 8 > 2 ? iters / 8 : 2;
                for (int r = 0; r < reps; r++)
                    for (int k = 0; k < 2; k++)
                        if (bench_impl_on(k))
                            sample[k][r] = rep(&impls[k], op, s, base[k], buf, res, n, iters, 1,
                                               win[k]) * 1e6 / iters;
                for (int k = 0; k < 2; k++)
                    lat[k] = bench_impl_on(k) ? bench_median(sample[k], reps) : NAN;
                for (int r = 0; r < reps; r++)
                    for (int k = 0; k < 2; k++)
                        if (bench_impl_on(k))
                            sample[k][r] = (double)bytes * bi * burst * 1e-6 /
                                           rep(&impls[k], op, s, base[k], buf, res, n, bi, burst,
                                               win[k]);
                for (int k = 0; k < 2; k++)
                    bw[k] = bench_impl_on(k) ? bench_median(sample[k], reps) : NAN;
                if (rank == 0) {
                    printf("  %8ld | %10.3f %10.3f %7.3f | %10.1f %10.1f %7.2f\n", bytes, lat[0],
                           lat[1], lat[1] / lat[0], bw[0], bw[1], bw[1] / bw[0]);
                    if (out) {
                        fprintf(out, "%s,%s,%ld,latency_us,%.4f,%.4f,%.4f\n", op_name[op],
                                sync_name[s], bytes, lat[0], lat[1], lat[1] / lat[0]);
                        fprintf(out, "%s,%s,%ld,bandwidth_MBps,%.2f,%.2f,%.4f\n", op_name[op],
                                sync_name[s], bytes, bw[0], bw[1], bw[1] / bw[0]);
                    }
                    fflush(stdout);
                }
            }
        }
    }
    if (rank == 0)
        printf("(median of %d repetitions; latency ratio = onesided / native, lower is better; "
               "bandwidth ratio = onesided / native, higher is better)\n", reps);
    if (out)
        fclose(out);
    for (int k = 0; k < 2; k++)
        if (bench_impl_on(k))
            impls[k].win_free(&win[k]);
    free(buf);
    free(res);
    free(sample[0]);
    free(sample[1]);
    MPI_Group_free(&peer);
    MPI_Group_free(&world);
    MPI_Finalize();
    return 0;
}
