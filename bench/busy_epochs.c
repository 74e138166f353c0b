/*
 * Lock epochs against a target that computes: does the origin wait for it?
 *
 *   mpiexec -n 2 busy_epochs [--epochs N] [--compute SEC] [--flavor allocate|create]
 *                            [--csv FILE]
 *
 * Rank 1 computes for SEC seconds (default 3) without calling MPI, then
 * enters a barrier. Meanwhile rank 0 runs N (default 1000) pairs of epochs
 * on it: lock(exclusive)/put/unlock, then lock(shared)/accumulate/unlock,
 * and times them. An implementation that needs the target's application
 * thread finishes only after the target stops computing (about SEC
 * seconds); a truly one-sided one finishes in N times its epoch latency.
 * Native host-MPI RMA and onesided run in the same processes, one after the
 * other; the target's window holds the last put value and the accumulated
 * sum, checked after each run. Run it on virtual nodes to time the
 * inter-node path (ONESIDED_NODE_SIZE=1, and ONESIDED_UCX_TLS=tcp,self for
 * TCP).
 */
#include "bench_impl.h"

#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Compute for sec seconds without entering MPI. */
static void compute(double sec)
{
    volatile double sink = 0;
    double t0 = now();
    while (now() - t0 < sec)
        for (int k = 0; k < 1000; k++)
            sink += k * 0.5;
}

/* Seconds rank 0 spent on `epochs` pairs of epochs while rank 1 computed. */
static double run(const impl_t *m, bool create, int epochs, double sec, int rank)
{
    MPI_Win win;
    long *base = NULL;
    if (create) {
        base = calloc(2, sizeof *base);
        m->win_create(base, 2 * sizeof *base, sizeof *base, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    } else {
        m->win_allocate(2 * sizeof *base, sizeof *base, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
        base[0] = base[1] = 0;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t = 0;
    if (rank == 0) {
        long one = 1;
        double t0 = MPI_Wtime();
        for (long i = 1; i <= epochs; i++) {
            m->lock(MPI_LOCK_EXCLUSIVE, 1, 0, win);
            m->put(&i, 1, MPI_LONG, 1, 0, 1, MPI_LONG, win);
            m->unlock(1, win);
            m->lock(MPI_LOCK_SHARED, 1, 0, win);
            m->acc(&one, 1, MPI_LONG, 1, 1, 1, MPI_LONG, MPI_SUM, win);
            m->unlock(1, win);
        }
        t = MPI_Wtime() - t0;
    } else if (rank == 1) {
        compute(sec);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        /* The epochs are complete at the target once unlock returned. */
        m->lock(MPI_LOCK_SHARED, 1, 0, win);
        long v0 = base[0], v1 = base[1];
        m->unlock(1, win);
        if (v0 != epochs || v1 != epochs)
            BENCH_FAIL("busy_epochs", "%s: target holds put %ld and sum %ld, expected %d and %d",
                       m->name, v0, v1, epochs, epochs);
    }
    m->win_free(&win);
    if (create)
        free(base);
    MPI_Bcast(&t, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    return t;
}

int main(int argc, char **argv)
{
    int epochs = 1000, rank;
    double sec = 3.0;
    const char *csv = NULL, *flavor = "allocate";
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--epochs") && i + 1 < argc)
            epochs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--compute") && i + 1 < argc)
            sec = atof(argv[++i]);
        else if (!strcmp(argv[i], "--flavor") && i + 1 < argc)
            flavor = argv[++i];
        else if (!strcmp(argv[i], "--csv") && i + 1 < argc)
            csv = argv[++i];
    }
    const bool create = !strcmp(flavor, "create");
    double t[2];
    for (int k = 0; k < 2; k++)
        t[k] = bench_impl_on(k) ? run(&impls[k], create, epochs, sec, rank) : NAN;
    if (rank == 0) {
        printf("%d lock/put/unlock + lock/accumulate/unlock epoch pairs, target computing "
               "%.1f s, window by %s\n", epochs, sec, flavor);
        printf("%-28s %12s %12s %8s\n", "seconds", "native", "onesided", "ratio");
        printf("%-28s %12.4f %12.4f %8.4f\n", "all epochs", t[0], t[1], t[1] / t[0]);
        if (csv) {
            FILE *f = fopen(csv, "w");
            if (f) {
                fprintf(f, "benchmark,native_us,onesided_us\n");
                fprintf(f, "%d epoch pairs vs %g s compute,%.3f,%.3f\n", epochs, sec,
                        t[0] * 1e6, t[1] * 1e6);
                fclose(f);
            }
        }
    }
    MPI_Finalize();
    return 0;
}
