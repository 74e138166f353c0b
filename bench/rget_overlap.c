/*
 * Overlap of MPI_Rget with computation: how much of a transfer is hidden.
 *
 *   mpiexec -n 2 rget_overlap [--reps R] [--csv FILE]
 *
 * Rank 0 reads 64 KB, 256 KB and 1 MB from rank 1 (which waits in a
 * barrier) inside one MPI_Win_lock_all epoch of a MPI_Win_allocate window.
 * For each size, median over R repetitions of:
 *   comm     MPI_Rget then MPI_Wait at once
 *   total    MPI_Rget, compute for `comm` microseconds, MPI_Wait
 *   call     the time spent inside MPI_Rget alone
 * hidden = (comm + compute - total) / comm, the fraction of the transfer
 * that ran under the computation (0: none, 1: all). A transfer the CPU
 * copies inside MPI_Rget (shared memory) cannot hide: it shows as `call`
 * close to `comm`, and nothing is left to wait for. One hidden by a NIC, or
 * by the target's progress thread (memory UCX emulates, TCP), shows a
 * short call and a high fraction. Native host-MPI RMA and onesided run in
 * the same processes; every read is checked. The two run one after the
 * other, not repetition by repetition as the other programs do: what an
 * MPI_Rget hides depends on which thread progresses onesided's worker, and
 * its progress thread stays off for a while after the host MPI polled
 * (native's MPI_Wait): in turn, 1 MB over TCP hid 0.23 instead of 0.69.
 */
#include "bench_impl.h"

static const int sizes[] = { 65536, 262144, 1048576 };
#define NSIZES (int)(sizeof sizes / sizeof sizes[0])

static void compute_us(double us)
{
    volatile double sink = 0;
    double t0 = MPI_Wtime();
    while ((MPI_Wtime() - t0) * 1e6 < us)
        for (int k = 0; k < 100; k++)
            sink += k;
}

typedef int (*rget_fn)(void *, int, MPI_Datatype, int, MPI_Aint, int, MPI_Datatype, MPI_Win,
                       MPI_Request *);

int main(int argc, char **argv)
{
    int reps = 11, rank;
    const char *csv = NULL;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--csv") && i + 1 < argc)
            csv = argv[++i];
    }
    const rget_fn rget[2] = { PMPI_Rget, MPI_Rget };
    const int maxn = sizes[NSIZES - 1] / (int)sizeof(long);
    long *buf = malloc(sizeof(long) * (size_t)maxn);
    double res[2][NSIZES][3]; /* comm, total, call (us) */
    double *s = malloc(sizeof(double) * (size_t)reps * 3);
    for (int k = 0; k < 2; k++) {
        const impl_t *m = &impls[k];
        long *base;
        MPI_Win win;
        m->win_allocate((MPI_Aint)sizeof(long) * maxn, sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD,
                        &base, &win);
        for (int i = 0; i < maxn; i++)
            base[i] = 1000 * (rank + 1) + i;
        MPI_Barrier(MPI_COMM_WORLD);
        for (int z = 0; z < NSIZES; z++) {
            const int n = sizes[z] / (int)sizeof(long);
            if (rank == 0) {
                m->lock_all(0, win);
                for (int phase = 0; phase < 2; phase++) {
                    for (int r = 0; r < reps; r++) {
                        MPI_Request req;
                        memset(buf, 0, sizeof(long) * (size_t)n);
                        double t0 = MPI_Wtime();
                        rget[k](buf, n, MPI_LONG, 1, 0, n, MPI_LONG, win, &req);
                        double t1 = MPI_Wtime();
                        if (phase == 1)
                            compute_us(res[k][z][0]);
                        MPI_Wait(&req, MPI_STATUS_IGNORE);
                        double t2 = MPI_Wtime();
                        if (buf[0] != 2000 || buf[n - 1] != 2000 + n - 1)
                            BENCH_FAIL("rget_overlap", "%s: %d bytes read %ld..%ld", m->name,
                                       sizes[z], buf[0], buf[n - 1]);
                        s[r] = (t2 - t0) * 1e6;
                        s[reps + r] = (t1 - t0) * 1e6;
                    }
                    res[k][z][phase] = bench_median(s, reps);
                    if (phase == 0)
                        res[k][z][2] = bench_median(s + reps, reps);
                }
                m->unlock_all(win);
            }
            MPI_Barrier(MPI_COMM_WORLD);
        }
        m->win_free(&win);
    }
    if (rank == 0) {
        FILE *f = csv ? fopen(csv, "w") : NULL;
        if (f)
            fprintf(f, "impl,bytes,comm_us,total_us,call_us,hidden\n");
        printf("MPI_Rget, compute as long as the transfer, then MPI_Wait (us, medians of %d)\n",
               reps);
        printf("%-9s %8s %10s %10s %10s %8s\n", "impl", "bytes", "comm", "total", "in call",
               "hidden");
        for (int k = 0; k < 2; k++)
            for (int z = 0; z < NSIZES; z++) {
                double comm = res[k][z][0], total = res[k][z][1];
                double hidden = (2 * comm - total) / comm;
                hidden = hidden < 0 ? 0 : hidden > 1 ? 1 : hidden;
                printf("%-9s %8d %10.1f %10.1f %10.1f %8.2f\n", impls[k].name, sizes[z], comm,
                       total, res[k][z][2], hidden);
                if (f)
                    fprintf(f, "%s,%d,%.3f,%.3f,%.3f,%.3f\n", impls[k].name, sizes[z], comm,
                            total, res[k][z][2], hidden);
            }
        if (f)
            fclose(f);
    }
    free(s);
    free(buf);
    MPI_Finalize();
    return 0;
}
