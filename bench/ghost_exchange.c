/*
 * Nearest-neighbour ghost-area exchange (paper 003, Section 5 and Table 1).
 *
 *   mpiexec -n P ghost_exchange [--sizes 16,64,...] [--reps R] [--scale S] [--csv FILE]
 *
 * The processes form a periodic 2-D grid (MPI_Dims_create); in each step every
 * process sends one message of `size` bytes to each of its 4 neighbours. Four
 * versions of the step, as in the paper:
 *   p2p   MPI_Irecv x4, MPI_Isend x4, MPI_Waitall
 *   fence MPI_Win_fence(NOPRECEDE), MPI_Put x4, MPI_Win_fence(NOSTORE|NOPUT|NOSUCCEED)
 *         (the paper's Figure 3, asserts included)
 *   pscw  MPI_Win_post, MPI_Win_start, MPI_Put x4, MPI_Win_complete, MPI_Win_wait
 *   lock  (MPI_Win_lock(EXCLUSIVE), MPI_Put, MPI_Win_unlock) x4, MPI_Barrier
 * The one-sided versions run twice in the same processes: with the host MPI's
 * own RMA (PMPI_*, "native") and with onesided (MPI_*). The paper's metric is
 * the one-sided time divided by the point-to-point time.
 *
 * With fewer than 4 distinct neighbours (2 or 3 processes) some neighbours are
 * the process itself; the step still moves 4 messages. Ghost cells are double
 * buffered by step parity so that a neighbour one step ahead never overwrites
 * cells still being checked. Every step checks the first and last element of
 * each ghost cell, and the last step of each run checks every element: a
 * wrong value aborts the run.
 */
#include "bench_impl.h"

enum { V_P2P, V_FENCE, V_PSCW, V_LOCK, NVERSION };
static const char *const version_name[NVERSION] = { "p2p", "fence", "pscw", "lock" };

static int rank, nprocs, nbr[4];
static MPI_Group nbr_group;

/* Direction j's neighbour sees this process in the opposite direction. */
static int opposite(int j)
{
    return j ^ 1;
}

static int pattern(int step, int from, int dir, size_t idx)
{
    return (int)((unsigned)step * 2654435761u + (unsigned)from * 40503u + (unsigned)dir * 977u +
                 (unsigned)idx);
}

static void fill(int *sbuf, size_t n, int step)
{
    for (int j = 0; j < 4; j++)
        for (size_t i = 0; i < n; i++)
            sbuf[(size_t)j * n + i] = pattern(step, rank, j, i);
}

/* Ghost cell k of parity p holds what neighbour nbr[k] sent in direction opposite(k). */
static void check(const int *ghost, size_t n, int step, bool full, const char *what)
{
    const int *cells = ghost + (size_t)(step & 1) * 4 * n;
    for (int k = 0; k < 4; k++) {
        const int *c = cells + (size_t)k * n;
        for (size_t i = 0; i < n; i = full || i + 1 == n ? i + 1 : n - 1) {
            int want = pattern(step, nbr[k], opposite(k), i);
            if (c[i] != want)
                BENCH_FAIL("ghost_exchange", "%s, step %d, rank %d, ghost cell %d element %zu: "
                           "got %d, expected %d", what, step, rank, k, i, c[i], want);
        }
    }
}

/* One step; slot (parity*4 + k) of a window is ghost cell k of that parity. */
static void step_once(int v, const impl_t *m, MPI_Win win, int *sbuf, int *rbuf, size_t n,
                      int step, MPI_Datatype cell)
{
    const int p = step & 1;
    MPI_Request req[8];
    MPI_Status stat[8];
    switch (v) {
    case V_P2P:
        for (int k = 0; k < 4; k++)
            MPI_Irecv(rbuf + (size_t)(p * 4 + k) * n, (int)n, MPI_INT, nbr[k], opposite(k),
                      MPI_COMM_WORLD, &req[k]);
        for (int j = 0; j < 4; j++)
            MPI_Isend(sbuf + (size_t)j * n, (int)n, MPI_INT, nbr[j], j, MPI_COMM_WORLD,
                      &req[4 + j]);
        MPI_Waitall(8, req, stat);
        break;
    case V_FENCE:
        m->fence(MPI_MODE_NOPRECEDE, win);
        for (int j = 0; j < 4; j++)
            m->put(sbuf + (size_t)j * n, 1, cell, nbr[j], p * 4 + opposite(j), 1, cell, win);
        m->fence(MPI_MODE_NOSTORE | MPI_MODE_NOPUT | MPI_MODE_NOSUCCEED, win);
        break;
    case V_PSCW:
        m->post(nbr_group, 0, win);
        m->start(nbr_group, 0, win);
        for (int j = 0; j < 4; j++)
            m->put(sbuf + (size_t)j * n, 1, cell, nbr[j], p * 4 + opposite(j), 1, cell, win);
        m->complete(win);
        m->wait(win);
        break;
    case V_LOCK:
        for (int j = 0; j < 4; j++) {
            m->lock(MPI_LOCK_EXCLUSIVE, nbr[j], 0, win);
            m->put(sbuf + (size_t)j * n, 1, cell, nbr[j], p * 4 + opposite(j), 1, cell, win);
            m->unlock(nbr[j], win);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        break;
    }
}

/* Mean microseconds per step over `iters` steps. */
static double run(int v, const impl_t *m, MPI_Win win, int *wbase, int *sbuf, int *rbuf,
                  size_t n, int iters, MPI_Datatype cell, const char *what)
{
    const int *ghost = v == V_P2P ? rbuf : wbase;
    double busy = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int s = 0; s < iters; s++) {
        fill(sbuf, n, s);
        double t0 = MPI_Wtime();
        step_once(v, m, win, sbuf, rbuf, n, s, cell);
        busy += MPI_Wtime() - t0;
        check(ghost, n, s, s == iters - 1, what);
    }
    double t = busy / iters, tmax;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return tmax * 1e6;
}

static size_t parse_sizes(const char *s, size_t *out, size_t max)
{
    size_t n = 0;
    while (*s && n < max) {
        char *end;
        out[n++] = strtoul(s, &end, 10);
        s = *end == ',' ? end + 1 : end;
        if (end == s && *s) break;
    }
    return n;
}

int main(int argc, char **argv)
{
    size_t sizes[32] = { 16, 64, 256, 1024, 16384, 65536, 262144 }, nsizes = 7;
    int reps = 5;
    double scale = 1.0;
    const char *csv = NULL;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--sizes") && i + 1 < argc) nsizes = parse_sizes(argv[++i], sizes, 32);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--scale") && i + 1 < argc) scale = atof(argv[++i]);
        else if (!strcmp(argv[i], "--csv") && i + 1 < argc) csv = argv[++i];
    }

    /* The periodic 2-D grid; world ranks are kept (no reordering). */
    int dims[2] = { 0, 0 }, periods[2] = { 1, 1 };
    MPI_Comm cart;
    MPI_Dims_create(nprocs, 2, dims);
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart);
    MPI_Cart_shift(cart, 0, 1, &nbr[0], &nbr[1]);
    MPI_Cart_shift(cart, 1, 1, &nbr[2], &nbr[3]);
    int uniq[4], nuniq = 0;
    for (int j = 0; j < 4; j++) {
        bool seen = false;
        for (int u = 0; u < nuniq; u++) seen |= uniq[u] == nbr[j];
        if (!seen) uniq[nuniq++] = nbr[j];
    }
    MPI_Group world;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, nuniq, uniq, &nbr_group);
    if (rank == 0)
        printf("ghost-area exchange: %d processes in a %d x %d periodic grid, 4 neighbours each\n",
               nprocs, dims[0], dims[1]);

    /* results[size][impl][version] in microseconds per step */
    double (*res)[2][NVERSION] = calloc(nsizes, sizeof *res);
    double *samples[2] = { malloc(sizeof(double) * (size_t)reps),
                           malloc(sizeof(double) * (size_t)reps) };
    for (size_t z = 0; z < nsizes; z++) {
        size_t n = sizes[z] / sizeof(int) ? sizes[z] / sizeof(int) : 1;
        size_t bytes = n * sizeof(int);
        int iters = (int)(scale * (double)(bytes <= 1024 ? 1000 : 4000000 / bytes));
        if (iters < 10) iters = 10;
        MPI_Datatype cell;
        MPI_Type_contiguous((int)n, MPI_INT, &cell);
        MPI_Type_commit(&cell);
        int *sbuf = malloc(4 * bytes), *rbuf = calloc(8, bytes);
        int *wbase[2];
        MPI_Win win[2];
        for (int k = 0; k < 2; k++)
            impls[k].win_allocate((MPI_Aint)(8 * bytes), (int)bytes, MPI_INFO_NULL,
                                  MPI_COMM_WORLD, &wbase[k], &win[k]);
        /* Native and onesided in turn, run by run, so that both see the same
         * machine (its load drifts within a job). */
        for (int v = 0; v < NVERSION; v++) {
            const int nk = v == V_P2P ? 1 : 2;
            char what[2][64];
            for (int k = 0; k < nk; k++) {
                snprintf(what[k], sizeof what[k], "%s %s, %zu bytes", impls[k].name,
                         version_name[v], bytes);
                run(v, &impls[k], win[k], wbase[k], sbuf, rbuf, n, iters / 10 + 1, cell, what[k]);
            }
            for (int r = 0; r < reps; r++)
                for (int k = 0; k < nk; k++)
                    samples[k][r] = run(v, &impls[k], win[k], wbase[k], sbuf, rbuf, n, iters,
                                        cell, what[k]);
            for (int k = 0; k < nk; k++)
                res[z][k][v] = bench_median(samples[k], reps);
            if (v == V_P2P)
                res[z][1][v] = res[z][0][v];
        }
        for (int k = 0; k < 2; k++)
            impls[k].win_free(&win[k]);
        free(sbuf);
        free(rbuf);
        MPI_Type_free(&cell);
    }

    if (rank == 0) {
        printf("Table 1: one-sided time / point-to-point time (smaller is better)\n");
        printf("%10s %10s | %-23s | %-23s\n", "", "p2p", "native MPICH", "onesided");
        printf("%10s %10s | %7s %7s %7s | %7s %7s %7s\n", "size (B)", "us/step", "fence",
               "pscw", "lock", "fence", "pscw", "lock");
        FILE *out = csv ? fopen(csv, "w") : NULL;
        if (out)
            fprintf(out, "size,impl,version,us_per_step,ratio_to_p2p\n");
        for (size_t z = 0; z < nsizes; z++) {
            size_t bytes = (sizes[z] / sizeof(int) ? sizes[z] / sizeof(int) : 1) * sizeof(int);
            double p2p = res[z][0][V_P2P];
            printf("%10zu %10.2f |", bytes, p2p);
            for (int k = 0; k < 2; k++) {
                for (int v = V_FENCE; v < NVERSION; v++)
                    printf(" %7.2f", res[z][k][v] / p2p);
                printf(k ? "\n" : " |");
            }
            if (out) {
                fprintf(out, "%zu,p2p,p2p,%.4f,1.0\n", bytes, p2p);
                for (int k = 0; k < 2; k++)
                    for (int v = V_FENCE; v < NVERSION; v++)
                        fprintf(out, "%zu,%s,%s,%.4f,%.4f\n", bytes, impls[k].name,
                                version_name[v], res[z][k][v], res[z][k][v] / p2p);
            }
        }
        printf("(median of %d runs; every ghost cell verified)\n", reps);
        if (out)
            fclose(out);
    }
    free(res);
    free(samples[0]);
    free(samples[1]);
    MPI_Group_free(&nbr_group);
    MPI_Group_free(&world);
    MPI_Comm_free(&cart);
    MPI_Finalize();
    return 0;
}
