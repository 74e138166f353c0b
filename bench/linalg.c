/*
 * RMA linear algebra (paper 002): libonesided_la's SRUMMA matrix multiply
 * (onesided_pdgemm) and right-looking LU without pivoting
 * (onesided_pdgetrf_nopiv), against ScaLAPACK's pdgemm and pdgetrf on the
 * same processes, grid, block size and matrices, all in ScaLAPACK's own
 * 2-D block-cyclic layout and descriptors.
 *
 *   mpiexec -n P linalg [--sizes 512,1024] [--nb 128] [--kernels dgemm,lu]
 *                       [--reps R] [--ablation] [--no-scalapack] [--impls LIST]
 *                       [--csv FILE] [--inject-error]
 *
 * Grid: Pr x Pc (Pr <= Pc, as square as P allows), row-major.
 *
 * The library's kernels (src/la/) run with the host MPI's RMA (PMPI_*,
 * "native") and with onesided (MPI_*), in the same processes; the
 * "interposed" row is ScaLAPACK's own entry point pdgemm_ answered by the
 * library (ONESIDED_LA_PDGEMM=1). References in the same run: ScaLAPACK
 * pdgemm/pdgetrf (Debian's libscalapack-mpich, message passing; pdgetrf
 * pivots, which costs it a pivot search per column even on this matrix,
 * where no row is swapped), and the single-process OpenBLAS ceiling (dgemm,
 * or LAPACK dgetrf, on rank 0 alone, times P). --ablation adds the
 * multiply with each of paper 002's design choices switched off (Table I):
 * local panels in place, non-blocking gets, staggered order.
 *
 * Verification: C and the LU factors are gathered on rank 0 (after timing)
 * and checked against the generated matrices with a random vector:
 * |C x - A (B x)| / (|A| |B| |x| n eps) and |L (U x) - A x| / (|A| |x| n eps)
 * (infinity norms) must stay below 16. A failure aborts the run;
 * --inject-error changes one element of each RMA result before the check,
 * so that a test can see the check fail.
 */
#include "bench_impl.h"
#include "la/os_la.h"

#include <cblas.h>
#undef I /* <complex.h>, through OpenBLAS's cblas.h: I, J, K are block indices here */
#include <float.h>
#include <math.h>
#include <sched.h>

#define RESIDUAL_BOUND 16.0

/* ScaLAPACK, BLACS and LAPACK: Fortran symbols. */
void Cblacs_get(int ctxt, int what, int *val);
void Cblacs_gridinit(int *ctxt, const char *order, int nprow, int npcol);
void Cblacs_gridexit(int ctxt);
int numroc_(const int *n, const int *nb, const int *iproc, const int *isrc, const int *nprocs);
void descinit_(int *desc, const int *m, const int *n, const int *mb, const int *nb,
               const int *irsrc, const int *icsrc, const int *ictxt, const int *lld, int *info);
void pdgemm_(const char *ta, const char *tb, const int *m, const int *n, const int *k,
             const double *alpha, const double *a, const int *ia, const int *ja, const int *desca,
             const double *b, const int *ib, const int *jb, const int *descb, const double *beta,
             double *c, const int *ic, const int *jc, const int *descc);
void pdgetrf_(const int *m, const int *n, double *a, const int *ia, const int *ja,
              const int *desca, int *ipiv, int *info);
void dgetrf_(const int *m, const int *n, double *a, const int *lda, int *ipiv, int *info);
void openblas_set_num_threads(int n);
char *openblas_get_corename(void);

static int rank, nprocs, pr, pc, myrow, mycol;
static bool inject_error; /* --inject-error */

/* ------------------------------------------------------------ the matrices */

/* Entry (i, j) of A (which = 0) or B (which = 1): deterministic, in
 * [-0.5, 0.5); `dominant` adds n on the diagonal (LU without pivoting). */
static double entry(int which, long i, long j, int n, bool dominant)
{
    uint64_t x = (uint64_t)i * 0x9e3779b97f4a7c15ull ^ (uint64_t)j * 0xc2b2ae3d27d4eb4full ^
                 (uint64_t)which * 0x165667b19e3779f9ull;
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    double v = (double)(x >> 11) / 9007199254740992.0 - 0.5;
    return dominant && i == j ? v + n : v;
}

/* ScaLAPACK's layout of an n x n matrix in nb x nb blocks: block (I, J) on
 * process (I mod Pr, J mod Pc); this process holds lr x lc of them. */
typedef struct {
    int n, nb, nbk; /* matrix order, block size, blocks per dimension */
    int lr, lc;     /* this process's local block rows and columns */
} layout_t;

static int count_of(int nbk, int np, int p)
{
    return nbk / np + (p < nbk % np);
}

static layout_t layout_make(int n, int nb)
{
    layout_t l = { .n = n, .nb = nb, .nbk = n / nb };
    l.lr = count_of(l.nbk, pr, myrow);
    l.lc = count_of(l.nbk, pc, mycol);
    return l;
}

static int owner(int I, int J)
{
    return (I % pr) * pc + J % pc;
}

/* ------------------------------------------------------------ verification */

/* Rank 0 receives the whole matrix, column-major n x n; `at` gives the
 * local address and leading dimension of block (I, J) on its owner. */
typedef double *(*block_at_fn)(void *ctx, int I, int J, int *ld);

static double *gather(const layout_t *l, block_at_fn at, void *ctx)
{
    const int nb = l->nb, n = l->n;
    double *full = rank == 0 ? malloc(sizeof(double) * (size_t)n * n) : NULL;
    double *tmp = malloc(sizeof(double) * (size_t)nb * nb);
    for (int I = 0; I < l->nbk; I++)
        for (int J = 0; J < l->nbk; J++) {
            int o = owner(I, J), ld;
            if (rank == o) {
                const double *b = at(ctx, I, J, &ld);
                for (int c = 0; c < nb; c++)
                    memcpy(tmp + (size_t)c * nb, b + (size_t)c * ld, sizeof(double) * nb);
                if (o != 0)
                    MPI_Send(tmp, nb * nb, MPI_DOUBLE, 0, 7, MPI_COMM_WORLD);
            } else if (rank == 0) {
                MPI_Recv(tmp, nb * nb, MPI_DOUBLE, o, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
            if (rank == 0)
                for (int c = 0; c < nb; c++)
                    memcpy(full + ((size_t)J * nb + c) * n + (size_t)I * nb, tmp + (size_t)c * nb,
                           sizeof(double) * nb);
        }
    free(tmp);
    return full;
}

static double *gen_full(int which, int n, bool dominant)
{
    double *a = malloc(sizeof(double) * (size_t)n * n);
    for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++)
            a[(size_t)j * n + i] = entry(which, i, j, n, dominant);
    return a;
}

static double norm_inf_mat(const double *a, int n)
{
    double best = 0;
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int j = 0; j < n; j++)
            s += fabs(a[(size_t)j * n + i]);
        best = s > best ? s : best;
    }
    return best;
}

static double norm_inf_vec(const double *x, int n)
{
    double best = 0;
    for (int i = 0; i < n; i++)
        best = fabs(x[i]) > best ? fabs(x[i]) : best;
    return best;
}

/* Scaled residual of C = A B (rank 0; 0 elsewhere). */
static double check_dgemm(const layout_t *l, block_at_fn at, void *ctx)
{
    const int n = l->n;
    double *C = gather(l, at, ctx), res = 0;
    if (rank == 0) {
        double *A = gen_full(0, n, false), *B = gen_full(1, n, false);
        double *x = malloc(sizeof(double) * n), *bx = malloc(sizeof(double) * n),
               *abx = malloc(sizeof(double) * n), *cx = malloc(sizeof(double) * n);
        for (int i = 0; i < n; i++)
            x[i] = entry(2, i, 0, n, false);
        cblas_dgemv(CblasColMajor, CblasNoTrans, n, n, 1.0, B, n, x, 1, 0.0, bx, 1);
        cblas_dgemv(CblasColMajor, CblasNoTrans, n, n, 1.0, A, n, bx, 1, 0.0, abx, 1);
        cblas_dgemv(CblasColMajor, CblasNoTrans, n, n, 1.0, C, n, x, 1, 0.0, cx, 1);
        for (int i = 0; i < n; i++)
            cx[i] -= abx[i];
        res = norm_inf_vec(cx, n) /
              (norm_inf_mat(A, n) * norm_inf_mat(B, n) * norm_inf_vec(x, n) * n * DBL_EPSILON);
        free(A); free(B); free(x); free(bx); free(abx); free(cx);
    }
    free(C);
    return res;
}

/* Scaled residual of A = L U, factors stored in place (rank 0; 0 elsewhere). */
static double check_lu(const layout_t *l, block_at_fn at, void *ctx)
{
    const int n = l->n;
    double *F = gather(l, at, ctx), res = 0;
    if (rank == 0) {
        double *A = gen_full(0, n, true);
        double *x = malloc(sizeof(double) * n), *y = malloc(sizeof(double) * n),
               *ax = malloc(sizeof(double) * n);
        for (int i = 0; i < n; i++)
            x[i] = y[i] = entry(2, i, 0, n, false);
        cblas_dtrmv(CblasColMajor, CblasUpper, CblasNoTrans, CblasNonUnit, n, F, n, y, 1);
        cblas_dtrmv(CblasColMajor, CblasLower, CblasNoTrans, CblasUnit, n, F, n, y, 1);
        cblas_dgemv(CblasColMajor, CblasNoTrans, n, n, 1.0, A, n, x, 1, 0.0, ax, 1);
        for (int i = 0; i < n; i++)
            y[i] -= ax[i];
        res = norm_inf_vec(y, n) / (norm_inf_mat(A, n) * norm_inf_vec(x, n) * n * DBL_EPSILON);
        free(A); free(x); free(y); free(ax);
    }
    free(F);
    return res;
}

/* --inject-error: one wrong element (local (1, 1)) on rank 0. */
static void maybe_corrupt(double *mem, int lld, const layout_t *l)
{
    if (inject_error && rank == 0 && l->lr && l->lc)
        mem[lld + 1] += 1e-3;
}

/* ---------------------------------------------------------------- ScaLAPACK */

typedef struct {
    const layout_t *l;
    double *mem;
    int lld;
} scal_t;

static double *scal_at(void *ctx, int I, int J, int *ld)
{
    scal_t *s = ctx;
    *ld = s->lld;
    return s->mem + (size_t)(J / pc) * s->l->nb * s->lld + (size_t)(I / pr) * s->l->nb;
}

static void scal_fill(scal_t *s, int which, bool dominant)
{
    const int nb = s->l->nb;
    for (int li = 0; li < s->l->lr; li++)
        for (int lj = 0; lj < s->l->lc; lj++) {
            long I = (long)li * pr + myrow, J = (long)lj * pc + mycol;
            int ld;
            double *b = scal_at(s, (int)I, (int)J, &ld);
            for (int c = 0; c < nb; c++)
                for (int r = 0; r < nb; r++)
                    b[(size_t)c * ld + r] = entry(which, I * nb + r, J * nb + c, s->l->n, dominant);
        }
}

static int blacs_ctx = -1;

static void scal_desc(const layout_t *l, int *desc, int *lld)
{
    int zero = 0, info, rows = numroc_(&l->n, &l->nb, &myrow, &zero, &pr);
    *lld = rows > 1 ? rows : 1;
    descinit_(desc, &l->n, &l->n, &l->nb, &l->nb, &zero, &zero, &blacs_ctx, lld, &info);
}

/* ------------------------------------------------------------------ driver */

static FILE *csv;

/* One kernel in one configuration; its repetitions interleave with the
 * other kernels' (round robin), so that this noisy machine's slow and fast
 * phases fall on every kernel alike. */
typedef enum {
    J_RMA_DGEMM, J_RMA_LU, J_PDGEMM, J_PDGETRF, J_DGEMM_CEILING, J_DGETRF_CEILING,
    J_INTERPOSED /* pdgemm_ answered by the library */
} job_kind_t;
typedef struct {
    job_kind_t kind;
    const os_la_rma_t *m; /* RMA kernels */
    os_la_opts_t o;       /* RMA-dgemm */
    const char *opts;   /* label of the configuration ("" for the default) */
    double t[16];
    double residual;
} job_t;

static job_t job(job_kind_t kind, const os_la_rma_t *m, os_la_opts_t o, const char *opts)
{
    return (job_t){ .kind = kind, .m = m, .o = o, .opts = opts };
}

static const char *const job_kernel[] = { "RMA-dgemm", "RMA-LU", "pdgemm", "pdgetrf", "dgemm",
                                          "dgetrf", "RMA-dgemm" };

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return v[n / 2];
}

static void report(const job_t *j, const layout_t *l, int reps)
{
    if (rank != 0)
        return;
    const bool lu = j->kind == J_RMA_LU || j->kind == J_PDGETRF || j->kind == J_DGETRF_CEILING;
    const char *impl = j->m ? j->m->name
                       : j->kind == J_PDGEMM || j->kind == J_PDGETRF ? "scalapack"
                       : j->kind == J_INTERPOSED                     ? "interposed"
                                                                     : "ceiling";
    double t[16];
    memcpy(t, j->t, sizeof t);
    double secs = median(t, reps), flops = (lu ? 2.0 / 3.0 : 2.0) * l->n * (double)l->n * l->n;
    double gf = flops / secs * 1e-9;
    printf("%-12s %-10s %6d %5d %10.2f %9.4f %10.3g  %s\n", job_kernel[j->kind], impl, l->n,
           l->nb, gf, secs, j->residual, j->opts);
    fflush(stdout);
    if (csv)
        fprintf(csv, "%s,%s,%d,%d,%.4f,%.5f,%.4g,\"%s\"\n", job_kernel[j->kind], impl, l->n, l->nb,
                gf, secs, j->residual, j->opts); /* options hold commas: quoted */
    if (!(j->residual < RESIDUAL_BOUND))
        BENCH_FAIL("linalg", "%s (%s) N=%d: scaled residual %g exceeds %g", job_kernel[j->kind],
                   impl, l->n, j->residual, RESIDUAL_BOUND);
}

/* One repetition of a distributed kernel on ScaLAPACK's layout (the RMA
 * kernels, the interposed pdgemm_, ScaLAPACK's own); the last one is verified. */
static double rep_distributed(job_t *j, const layout_t *l, bool verify)
{
    const bool lu = j->kind == J_RMA_LU || j->kind == J_PDGETRF;
    int desc[9], lld, one = 1, info = 0, zero_src = 0;
    scal_desc(l, desc, &lld);
    int cols = numroc_(&l->n, &l->nb, &mycol, &zero_src, &pc);
    size_t words = (size_t)lld * (cols > 0 ? cols : 1);
    scal_t a = { l, malloc(sizeof(double) * words), lld }, b = { l, NULL, lld },
           c = { l, NULL, lld };
    double alpha = 1.0, zero = 0.0, t;
    int *ipiv = malloc(sizeof(int) * (size_t)(lld + l->nb));
    scal_fill(&a, 0, lu);
    if (!lu) {
        b.mem = malloc(sizeof(double) * words);
        c.mem = malloc(sizeof(double) * words);
        scal_fill(&b, 1, false);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    switch (j->kind) {
    case J_RMA_DGEMM:
        os_la_pdgemm_with(j->m, j->o, "N", "N", &l->n, &l->n, &l->n, &alpha, a.mem, &one, &one,
                          desc, b.mem, &one, &one, desc, &zero, c.mem, &one, &one, desc);
        break;
    case J_RMA_LU:
        os_la_pdgetrf_nopiv_with(j->m, &l->n, &l->n, a.mem, &one, &one, desc, &info);
        break;
    case J_INTERPOSED: /* the program's call, as an unchanged ScaLAPACK program makes it */
        os_la_set_interposition(true);
        pdgemm_("N", "N", &l->n, &l->n, &l->n, &alpha, a.mem, &one, &one, desc, b.mem, &one, &one,
                desc, &zero, c.mem, &one, &one, desc);
        os_la_set_interposition(false);
        break;
    case J_PDGEMM:
        pdgemm_("N", "N", &l->n, &l->n, &l->n, &alpha, a.mem, &one, &one, desc, b.mem, &one, &one,
                desc, &zero, c.mem, &one, &one, desc);
        break;
    default:
        pdgetrf_(&l->n, &l->n, a.mem, &one, &one, desc, ipiv, &info);
        break;
    }
    double dt = MPI_Wtime() - t0;
    MPI_Allreduce(&dt, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (verify) {
        const bool rma = j->kind == J_RMA_DGEMM || j->kind == J_RMA_LU || j->kind == J_INTERPOSED;
        if (rma)
            maybe_corrupt(lu ? a.mem : c.mem, lld, l);
        j->residual = info ? INFINITY : lu ? check_lu(l, scal_at, &a) : check_dgemm(l, scal_at, &c);
    }
    free(ipiv);
    free(a.mem);
    free(b.mem);
    free(c.mem);
    return t;
}

/* The ceiling: one process's OpenBLAS on the whole matrix, divided by P
 * (P processes would each do 1/P of the work). */
static double rep_ceiling(job_t *j, const layout_t *l)
{
    const int n = l->n;
    const bool lu = j->kind == J_DGETRF_CEILING;
    double dt = 0;
    if (rank == 0) {
        double *a = gen_full(0, n, lu), *b = NULL, *c = NULL;
        int *ipiv = NULL, info = 0;
        if (lu) {
            ipiv = malloc(sizeof(int) * (size_t)n);
        } else {
            b = gen_full(1, n, false);
            c = malloc(sizeof(double) * (size_t)n * n);
        }
        double t0 = MPI_Wtime();
        if (lu) {
            dgetrf_(&n, &n, a, &n, ipiv, &info);
        } else {
            cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a, n, b, n, 0.0,
                        c, n);
        }
        dt = (MPI_Wtime() - t0) / nprocs;
        free(a);
        free(b);
        free(c);
        free(ipiv);
    }
    MPI_Bcast(&dt, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    return dt;
}

static void run_jobs(job_t *jobs, int njobs, const layout_t *l, int reps)
{
    for (int r = 0; r < reps; r++)
        for (int k = 0; k < njobs; k++) {
            job_t *j = &jobs[k];
            const bool last = r == reps - 1;
            switch (j->kind) {
            case J_DGEMM_CEILING:
            case J_DGETRF_CEILING: j->t[r] = rep_ceiling(j, l); break;
            default: j->t[r] = rep_distributed(j, l, last); break;
            }
        }
    for (int k = 0; k < njobs; k++)
        report(&jobs[k], l, reps);
}


int main(int argc, char **argv)
{
    const char *sizes = "512,1024", *kernels = "dgemm,lu", *csv_path = NULL;
    int nb = 128, reps = 3, panel = 0;
    bool ablation = false, scalapack = true;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--sizes") && i + 1 < argc) sizes = argv[++i];
        else if (!strcmp(argv[i], "--nb") && i + 1 < argc) nb = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--panel") && i + 1 < argc) panel = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--kernels") && i + 1 < argc) kernels = argv[++i];
        else if (!strcmp(argv[i], "--impls") && i + 1 < argc) bench_choose_impls(argv[++i]);
        else if (!strcmp(argv[i], "--csv") && i + 1 < argc) csv_path = argv[++i];
        else if (!strcmp(argv[i], "--ablation")) ablation = true;
        else if (!strcmp(argv[i], "--no-scalapack")) scalapack = false;
        else if (!strcmp(argv[i], "--inject-error")) inject_error = true;
    }
    if (reps < 1 || reps > 16)
        reps = reps < 1 ? 1 : 16;
    openblas_set_num_threads(1); /* one BLAS thread per process */
    for (pr = (int)sqrt((double)nprocs); nprocs % pr; pr--)
        ;
    pc = nprocs / pr;
    myrow = rank / pc;
    mycol = rank % pc;
    Cblacs_get(0, 0, &blacs_ctx); /* the library's kernels run on a BLACS grid too */
    Cblacs_gridinit(&blacs_ctx, "Row", pr, pc);
    if (rank == 0 && csv_path) {
        csv = fopen(csv_path, "w");
        if (csv)
            fprintf(csv, "kernel,impl,n,nb,gflops,seconds,residual,options\n");
    }
    if (rank == 0) {
        printf("RMA linear algebra: %d processes on a %d x %d grid, blocks of %d, median of %d; "
               "OpenBLAS kernels for %s\n", nprocs, pr, pc, nb, reps, openblas_get_corename());
        printf("%-12s %-10s %6s %5s %10s %9s %10s  %s\n", "kernel", "impl", "N", "nb", "GFLOP/s",
               "seconds", "residual", "options");
    }
    os_la_opts_t all_on = os_la_default_opts;
    all_on.panel = panel;
    const char *const ceiling = "OpenBLAS, 1 process, x P";
    /* Paper 002, Table I, on onesided. */
    struct {
        os_la_opts_t o;
        const char *name;
    } abl[] = {
        { all_on, "in place off, non-blocking off" },
        { all_on, "in place off, non-blocking on" },
        { all_on, "in place on, non-blocking off" },
        { all_on, "in place on, non-blocking on, contention order off" },
    };
    abl[0].o.in_place = abl[0].o.nonblocking = false;
    abl[1].o.in_place = false;
    abl[2].o.nonblocking = false;
    abl[3].o.stagger = false;
    const os_la_rma_t *rmas[2] = { &os_la_rma_native, &os_la_rma_onesided };
    for (const char *s = sizes; s && *s; s = strchr(s, ',') ? strchr(s, ',') + 1 : NULL) {
        int n = atoi(s);
        if (n < nb || n % nb) {
            if (rank == 0)
                fprintf(stderr, "linalg: N=%d is not a multiple of the block size %d; skipped\n",
                        n, nb);
            continue;
        }
        layout_t l = layout_make(n, nb);
        job_t jobs[16];
        int nj = 0;
        if (bench_in_list(kernels, "dgemm")) {
            for (int k = 0; k < 2; k++)
                if (bench_impl_on(k))
                    jobs[nj++] = job(J_RMA_DGEMM, rmas[k], all_on, "");
            if (bench_impl_on(IMPL_ONESIDED))
                jobs[nj++] = job(J_INTERPOSED, NULL, all_on, "pdgemm_ answered by onesided_pdgemm");
            for (size_t a = 0; ablation && a < sizeof abl / sizeof abl[0]; a++)
                jobs[nj++] = job(J_RMA_DGEMM, rmas[IMPL_ONESIDED], abl[a].o, abl[a].name);
            if (scalapack)
                jobs[nj++] = job(J_PDGEMM, NULL, all_on, "");
            jobs[nj++] = job(J_DGEMM_CEILING, NULL, all_on, ceiling);
        }
        if (bench_in_list(kernels, "lu")) {
            for (int k = 0; k < 2; k++)
                if (bench_impl_on(k))
                    jobs[nj++] = job(J_RMA_LU, rmas[k], all_on, "");
            if (scalapack)
                jobs[nj++] = job(J_PDGETRF, NULL, all_on, "");
            jobs[nj++] = job(J_DGETRF_CEILING, NULL, all_on, ceiling);
        }
        run_jobs(jobs, nj, &l, reps);
    }
    if (csv)
        fclose(csv);
    Cblacs_gridexit(blacs_ctx);
    MPI_Finalize();
    return 0;
}
