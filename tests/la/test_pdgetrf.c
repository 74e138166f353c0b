/*
 * onesided_pdgetrf_nopiv on every grid P processes make (1 x P, P x 1,
 * 2 x 2, one that leaves a process out): random diagonally dominant m x n
 * submatrices (square, tall and wide, odd sizes, block sizes 1 to 9 that do
 * not divide them, non-zero source processes, block-aligned offsets,
 * per-process padding). Checks, on every process:
 *   - the factors equal a serial LU without pivoting of the same matrix,
 *     element by element, within 64 (m + n) eps (|x| + 1);
 *   - the residual max|A - L U| / (max|A| (m + n) eps) stays below 16
 *     (the factors gathered from all processes);
 *   - nothing outside sub(A) changes (padding included);
 *   - info: 0; the index of an exactly zero pivot (identity matrices with one
 *     zero on the diagonal, in any block); -606 for MB_ != NB_; -4 and -5
 *     for a submatrix that does not start on a block boundary.
 */
#include "la_common.h"

typedef struct {
    int m, n, ioff, joff;
    int zero; /* identity with U(zero, zero) = 0 (0-based); -1: dominant random */
} gen_t;

static double f_a(int i, int j, void *ctx)
{
    const gen_t *g = ctx;
    const int si = i - g->ioff, sj = j - g->joff;
    const bool in = si >= 0 && sj >= 0 && si < g->m && sj < g->n;
    if (g->zero >= 0)
        return in ? (si == sj && si != g->zero ? 1.0 : 0.0) : t_entry(3, i, j);
    return t_entry(0, i, j) + (in && si == sj ? 4.0 * (g->m + g->n) : 0.0);
}

/* Serial LU without pivoting of the m x n column-major matrix a. */
static void lu_serial(double *a, int m, int n)
{
    for (int j = 0; j < (m < n ? m : n); j++) {
        for (int r = j + 1; r < m; r++)
            a[(size_t)j * m + r] /= a[(size_t)j * m + j];
        for (int c = j + 1; c < n; c++)
            for (int r = j + 1; r < m; r++)
                a[(size_t)c * m + r] -= a[(size_t)j * m + r] * a[(size_t)c * m + j];
    }
}

static void run_case(int ctxt, MPI_Comm grid, int m, int n, int nb, int rsrc, int csrc, int ia,
                     int ja, int pad, int zero)
{
    int nprow, npcol, myrow, mycol;
    Cblacs_gridinfo(ctxt, &nprow, &npcol, &myrow, &mycol);
    gen_t g = { m, n, ia - 1, ja - 1, zero };
    t_mat_t A = t_mat(ctxt, ia - 1 + m + 2, ja - 1 + n + 1, nb, nb, rsrc, csrc, pad);
    t_fill(&A, f_a, &g, 7.0);
    double *a0 = malloc(sizeof(double) * A.words);
    memcpy(a0, A.mem, sizeof(double) * A.words);
    int info = 12345;
    onesided_pdgetrf_nopiv(&m, &n, A.mem, &ia, &ja, A.desc, &info);
    char what[200];
    snprintf(what, sizeof what, "m=%d n=%d nb=%d src (%d,%d) at (%d,%d)%s", m, n, nb, rsrc, csrc,
             ia, ja, zero >= 0 ? " (zero pivot)" : "");
    int infos[2] = { info, -info }, range[2];
    MPI_Allreduce(infos, range, 2, MPI_INT, MPI_MAX, grid);
    T_CHECK(range[0] == -range[1], "%s: info differs between processes (%d .. %d)", what,
            -range[1], range[0]);
    if (zero >= 0) {
        T_CHECK(info == zero + 1, "%s: info %d, expected %d", what, info, zero + 1);
        goto out;
    }
    T_CHECK(info == 0, "%s: info %d", what, info);

    /* The serial factors, and the gathered distributed ones. */
    double *ref = malloc(sizeof(double) * (size_t)m * n), *got = calloc((size_t)m * n, sizeof(double)),
           *all = malloc(sizeof(double) * (size_t)m * n);
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++)
            ref[(size_t)j * m + i] = f_a(ia - 1 + i, ja - 1 + j, &g);
    double amax = 0;
    for (size_t i = 0; i < (size_t)m * n; i++)
        amax = fabs(ref[i]) > amax ? fabs(ref[i]) : amax;
    double *orig = malloc(sizeof(double) * (size_t)m * n);
    memcpy(orig, ref, sizeof(double) * (size_t)m * n);
    lu_serial(ref, m, n);
    size_t bad = 0, outside = 0;
    for (int lc = 0; lc < A.locc; lc++)
        for (int lr = 0; lr < A.desc[8]; lr++) {
            const size_t w = (size_t)lc * A.desc[8] + lr;
            const int gi = lr < A.locr ? t_l2g(lr, nb, myrow, rsrc, nprow) - (ia - 1) : -1;
            const int gj = t_l2g(lc, nb, mycol, csrc, npcol) - (ja - 1);
            if (gi >= 0 && gi < m && gj >= 0 && gj < n) {
                const double r = ref[(size_t)gj * m + gi];
                got[(size_t)gj * m + gi] = A.mem[w];
                bad += !(fabs(A.mem[w] - r) <= 64.0 * (m + n) * DBL_EPSILON * (fabs(r) + 1.0));
            } else {
                outside += A.mem[w] != a0[w];
            }
        }
    T_CHECK(!bad, "%s: %zu factor elements differ from the serial LU", what, bad);
    T_CHECK(!outside, "%s: %zu elements outside sub(A) changed", what, outside);
    MPI_Allreduce(got, all, m * n, MPI_DOUBLE, MPI_SUM, grid);
    double res = 0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0; /* (L U)(i, j), L unit lower m x min, U upper min x n */
            for (int k = 0; k <= (i < j ? i : j) && k < (m < n ? m : n); k++)
                s += (k == i ? 1.0 : all[(size_t)k * m + i]) * all[(size_t)j * m + k];
            const double d = fabs(s - orig[(size_t)j * m + i]);
            res = d > res ? d : res;
        }
    res /= amax * (m + n) * DBL_EPSILON;
    T_CHECK(res < 16.0, "%s: scaled residual %g", what, res);
    free(ref);
    free(got);
    free(all);
    free(orig);
out:
    free(a0);
    free(A.mem);
}

static void illegal(int ctxt)
{
    int m = 6, n = 6, one = 1, two = 2, info;
    t_mat_t A = t_mat(ctxt, 8, 8, 2, 3, 0, 0, 0); /* MB_ != NB_ */
    onesided_pdgetrf_nopiv(&m, &n, A.mem, &one, &one, A.desc, &info);
    T_CHECK(info == -606, "MB_ != NB_: info %d, expected -606", info);
    free(A.mem);
    A = t_mat(ctxt, 8, 8, 2, 2, 0, 0, 0);
    onesided_pdgetrf_nopiv(&m, &n, A.mem, &two, &one, A.desc, &info);
    T_CHECK(info == -4, "ia off a block boundary: info %d, expected -4", info);
    onesided_pdgetrf_nopiv(&m, &n, A.mem, &one, &two, A.desc, &info);
    T_CHECK(info == -5, "ja off a block boundary: info %d, expected -5", info);
    free(A.mem);
}

int main(int argc, char **argv)
{
    int cases = 30;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--cases") && i + 1 < argc)
            cases = atoi(argv[++i]);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &t_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &t_size);
    int grids[4][2];
    const int ngrids = t_grids(grids);
    for (int gi = 0; gi < ngrids; gi++) {
        const int pr = grids[gi][0], pc = grids[gi][1];
        const int ctxt = t_grid(pr, pc);
        const bool in_grid = t_rank < pr * pc;
        MPI_Comm grid;
        MPI_Comm_split(MPI_COMM_WORLD, in_grid, t_rank, &grid);
        for (int i = 0; i < cases; i++) {
            const int shape = t_between(0, 2);
            const int m = t_between(1, 37), n = shape == 0 ? m : shape == 1 ? t_between(1, m) : t_between(m, 41);
            const int nb = t_between(1, 9);
            const int rsrc = t_between(0, pr - 1), csrc = t_between(0, pc - 1);
            const int ia = 1 + nb * t_between(0, 2), ja = 1 + nb * t_between(0, 2);
            const int pad = t_between(0, 3);
            const int zero = i % 5 == 4 ? t_between(0, (m < n ? m : n) - 1) : -1;
            if (in_grid)
                run_case(ctxt, grid, m, n, nb, rsrc, csrc, ia, ja, pad, zero);
        }
        if (in_grid) {
            illegal(ctxt);
            Cblacs_gridexit(ctxt);
        }
        MPI_Comm_free(&grid);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (t_rank == 0)
        onesided_la_print_stats(stdout);
    return t_finish("test_pdgetrf");
}
