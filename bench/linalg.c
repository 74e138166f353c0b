/*
 * RMA linear algebra (paper 002): SRUMMA matrix multiply and right-looking
 * LU without pivoting, written on MPI RMA only, against ScaLAPACK's pdgemm
 * and pdgetrf on the same processes, grid, block size and matrix.
 *
 *   mpiexec -n P linalg [--sizes 512,1024] [--nb 128] [--kernels dgemm,lu]
 *                       [--reps R] [--ablation] [--no-scalapack] [--impls LIST]
 *                       [--csv FILE] [--inject-error]
 *
 * Distribution: ScaLAPACK's 2-D block cyclic, blocks of nb x nb on a Pr x Pc
 * grid (Pr <= Pc, as square as P allows), block (I, J) on process
 * (I mod Pr, J mod Pc). The RMA kernels keep each block contiguous
 * (column-major inside), so that every transfer is one contiguous get or put
 * (paper 002's extension of SRUMMA); ScaLAPACK keeps its own local layout.
 *
 * RMA-dgemm (C = A B, owner computes): each process lists the block products
 * of its C blocks; products whose A and B blocks it can load directly (its own
 * memory, or a node-mate's through MPI_Win_shared_query: zero copy) come
 * first, so that the pipeline starts without waiting; the k order is
 * staggered by rank so that processes do not all read one owner at once
 * (contention handling); remote blocks arrive by MPI_Rget into a double
 * buffer, the next product's gets in flight while the current dgemm runs
 * (non-blocking). --ablation switches each of the three off (paper 002,
 * Table I).
 *
 * RMA-LU (no pivoting, diagonally dominant matrix): at step k the owner of
 * the diagonal block factors it and puts it to the processes of its row and
 * column, then notifies them (MPI_Accumulate REPLACE of a flag word, after a
 * flush); they solve their panel blocks with dtrsm and put them, with a
 * notify, to the processes that own the trailing blocks, which update them
 * with dgemm. No send/recv, no collective inside the kernel.
 *
 * Both kernels run with the host MPI's RMA (PMPI_*, "native") and with
 * onesided (MPI_*), in the same processes. References in the same run:
 * ScaLAPACK pdgemm/pdgetrf (Debian's libscalapack-mpich, message passing;
 * pdgetrf pivots, which costs it a pivot search per column even on this
 * matrix, where no row is swapped), and the single-process OpenBLAS ceiling
 * (dgemm, or LAPACK dgetrf, on rank 0 alone, times P); with --ablation
 * also that ceiling cut into the RMA kernel's nb x nb block products.
 *
 * Verification: C and the LU factors are gathered on rank 0 (after timing)
 * and checked against the generated matrices with a random vector:
 * |C x - A (B x)| / (|A| |B| |x| n eps) and |L (U x) - A x| / (|A| |x| n eps)
 * (infinity norms) must stay below 16. A failure aborts the run;
 * --inject-error changes one element of each RMA result before the check,
 * so that a test can see the check fail.
 */
#include "bench_impl.h"

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

/* Blocks of one process: `lr` x `lc` local blocks, local block (li, lj) at
 * ((li * lc) + lj) * nb * nb, column-major inside. */
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

/* Displacement (in doubles) of block (I, J) in its owner's window. */
static MPI_Aint block_disp(const layout_t *l, int I, int J)
{
    int lc_owner = count_of(l->nbk, pc, J % pc);
    return ((MPI_Aint)(I / pr) * lc_owner + J / pc) * l->nb * l->nb;
}

static void fill_blocks(const layout_t *l, double *mem, int which, bool dominant)
{
    const int nb = l->nb;
    for (int li = 0; li < l->lr; li++)
        for (int lj = 0; lj < l->lc; lj++) {
            double *b = mem + ((size_t)li * l->lc + lj) * nb * nb;
            long I = (long)li * pr + myrow, J = (long)lj * pc + mycol;
            for (int c = 0; c < nb; c++)
                for (int r = 0; r < nb; r++)
                    b[(size_t)c * nb + r] = entry(which, I * nb + r, J * nb + c, l->n, dominant);
        }
}

/* ---------------------------------------------------------------- windows */

/* A window of `bytes` whose node-mates' memory this process may load
 * directly: MPI_Win_allocate plus MPI_Win_shared_query (MPI-4; onesided
 * answers it, for the processes of the same node only); an MPI that refuses
 * shared_query on such a window (MPICH) gets MPI_Win_allocate_shared when the
 * whole job is on one node. direct[r] is rank r's memory, or NULL. */
typedef struct {
    MPI_Win win;
    double *base;
    double **direct;
} dwin_t;

static dwin_t dwin_make(const impl_t *m, MPI_Aint bytes, bool zero_copy)
{
    dwin_t d = { .direct = calloc((size_t)nprocs, sizeof(double *)) };
    int (*set_errhandler)(MPI_Win, MPI_Errhandler) =
        m == &impls[IMPL_NATIVE] ? PMPI_Win_set_errhandler : MPI_Win_set_errhandler;
    m->win_allocate(bytes, sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &d.base, &d.win);
    set_errhandler(d.win, MPI_ERRORS_RETURN);
    MPI_Aint size;
    int du;
    double *p = NULL;
    int ok = m->shared_query(d.win, rank, &size, &du, &p) == MPI_SUCCESS, all;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (!all) {
        MPI_Comm node;
        int nsize;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
        MPI_Comm_size(node, &nsize);
        MPI_Comm_free(&node);
        if (nsize == nprocs) {
            m->win_free(&d.win);
            m->win_allocate_shared(bytes, sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &d.base,
                                   &d.win);
            set_errhandler(d.win, MPI_ERRORS_RETURN);
            all = 1;
        }
    }
    for (int r = 0; r < nprocs; r++) {
        p = NULL;
        size = 0;
        if (r == rank)
            d.direct[r] = d.base;
        else if (all && zero_copy && m->shared_query(d.win, r, &size, &du, &p) == MPI_SUCCESS &&
                 size > 0)
            d.direct[r] = p;
    }
    return d;
}

static void dwin_free(const impl_t *m, dwin_t *d)
{
    m->win_free(&d->win);
    free(d->direct);
}

/* ------------------------------------------------------------- RMA-dgemm */

typedef struct {
    bool zero_copy, nonblocking, stagger;
} dgemm_opts_t;

typedef struct {
    int li, lj, K;
} task_t;

typedef struct {
    const double *a, *b;   /* where the product reads its blocks */
    MPI_Request req[2];
} staged_t;

/* Start moving the blocks of task t (into buffer slot s) or point at them. */
static void stage(const impl_t *m, const layout_t *l, const dwin_t *A, const dwin_t *B,
                  const task_t *t, double *abuf, double *bbuf, staged_t *st)
{
    const int nb2 = l->nb * l->nb;
    int I = t->li * pr + myrow, J = t->lj * pc + mycol;
    int oa = owner(I, t->K), ob = owner(t->K, J);
    MPI_Aint da = block_disp(l, I, t->K), db = block_disp(l, t->K, J);
    st->req[0] = st->req[1] = MPI_REQUEST_NULL;
    if (A->direct[oa]) {
        st->a = A->direct[oa] + da;
    } else {
        m->rget(abuf, nb2, MPI_DOUBLE, oa, da, nb2, MPI_DOUBLE, A->win, &st->req[0]);
        st->a = abuf;
    }
    if (B->direct[ob]) {
        st->b = B->direct[ob] + db;
    } else {
        m->rget(bbuf, nb2, MPI_DOUBLE, ob, db, nb2, MPI_DOUBLE, B->win, &st->req[1]);
        st->b = bbuf;
    }
}

static bool task_direct(const dwin_t *A, const dwin_t *B, const task_t *t)
{
    int I = t->li * pr + myrow, J = t->lj * pc + mycol;
    return A->direct[owner(I, t->K)] && B->direct[owner(t->K, J)];
}

/* C = A B on the blocks of A, B, C; returns seconds (max over processes). */
static double rma_dgemm(const impl_t *m, const layout_t *l, const dwin_t *A, const dwin_t *B,
                        double *C, dgemm_opts_t o)
{
    const int nb = l->nb, nb2 = nb * nb;
    const size_t ntask = (size_t)l->lr * l->lc * l->nbk;
    task_t *tasks = malloc(sizeof *tasks * (ntask ? ntask : 1));
    double *buf = malloc(sizeof(double) * 4 * (size_t)nb2); /* A and B, two slots each */
    size_t n = 0;
    /* Owner computes: the products of this process's C blocks. */
    for (int li = 0; li < l->lr; li++)
        for (int lj = 0; lj < l->lc; lj++)
            for (int k = 0; k < l->nbk; k++)
                tasks[n++] = (task_t){ li, lj, o.stagger ? (k + rank) % l->nbk : k };
    /* Zero-copy products first (stable), so the pipeline starts at once. */
    task_t *sorted = malloc(sizeof *sorted * (ntask ? ntask : 1));
    size_t s = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < n; i++)
            if (task_direct(A, B, &tasks[i]) == (pass == 0))
                sorted[s++] = tasks[i];
    memset(C, 0, sizeof(double) * (size_t)l->lr * l->lc * nb2);

    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    m->lock_all(MPI_MODE_NOCHECK, A->win);
    m->lock_all(MPI_MODE_NOCHECK, B->win);
    staged_t cur = { .req = { MPI_REQUEST_NULL, MPI_REQUEST_NULL } }, next = cur;
    if (n)
        stage(m, l, A, B, &sorted[0], buf, buf + nb2, &cur);
    for (size_t i = 0; i < n; i++) {
        const int slot = (int)(i + 1) % 2;
        /* Non-blocking: the next product's blocks move during this dgemm. */
        if (o.nonblocking && i + 1 < n)
            stage(m, l, A, B, &sorted[i + 1], buf + 2 * slot * nb2, buf + (2 * slot + 1) * nb2,
                  &next);
        MPI_Wait(&cur.req[0], MPI_STATUS_IGNORE);
        MPI_Wait(&cur.req[1], MPI_STATUS_IGNORE);
        const task_t *t = &sorted[i];
        double *c = C + ((size_t)t->li * l->lc + t->lj) * nb2;
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, nb, nb, nb, 1.0, cur.a, nb, cur.b,
                    nb, 1.0, c, nb);
        if (i + 1 < n) {
            if (!o.nonblocking)
                stage(m, l, A, B, &sorted[i + 1], buf + 2 * slot * nb2,
                      buf + (2 * slot + 1) * nb2, &next);
            cur = next;
        }
    }
    m->unlock_all(B->win);
    m->unlock_all(A->win);
    double t = MPI_Wtime() - t0, tmax;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    free(tasks);
    free(sorted);
    free(buf);
    return tmax;
}

/* ---------------------------------------------------------------- RMA-LU */

/* In-place LU of one nb x nb block, no pivoting (unit lower L, upper U). */
static void lu_block(double *a, int nb)
{
    for (int k = 0; k < nb; k++) {
        const double pivot = a[(size_t)k * nb + k];
        for (int r = k + 1; r < nb; r++)
            a[(size_t)k * nb + r] /= pivot;
        if (k + 1 < nb)
            cblas_dger(CblasColMajor, nb - k - 1, nb - k - 1, -1.0, a + (size_t)k * nb + k + 1, 1,
                       a + (size_t)(k + 1) * nb + k, nb, a + (size_t)(k + 1) * nb + k + 1, nb);
    }
}

/* The panel window: notify flags (3 per step: diagonal, L, U), then the
 * received blocks, indexed by step so that no slot is ever reused. */
typedef struct {
    MPI_Win win;
    double *base;
    int nbk, lr, lc, nb2;
} panels_t;

enum { FLAG_DIAG, FLAG_L, FLAG_U };

static MPI_Aint flag_disp(const panels_t *p, int k, int which)
{
    (void)p;
    return (MPI_Aint)k * 3 + which;
}
static MPI_Aint diag_disp(const panels_t *p, int k)
{
    return (MPI_Aint)p->nbk * 3 + (MPI_Aint)k * p->nb2;
}
static MPI_Aint lslot_disp(const panels_t *p, int k, int li)
{
    return diag_disp(p, p->nbk) + ((MPI_Aint)k * p->lr + li) * p->nb2;
}
static MPI_Aint uslot_disp(const panels_t *p, int k, int lj)
{
    return lslot_disp(p, p->nbk, 0) + ((MPI_Aint)k * p->lc + lj) * p->nb2;
}

/* The sizes above are the receiver's; every process of a row has the same lr,
 * every process of a column the same lc, which is what senders rely on. */

static void notify(const impl_t *m, const panels_t *p, int target, int k, int which)
{
    const double one = 1.0;
    m->flush(target, p->win); /* the blocks first: complete at the target */
    m->acc(&one, 1, MPI_DOUBLE, target, flag_disp(p, k, which), 1, MPI_DOUBLE, MPI_REPLACE,
           p->win);
    m->flush(target, p->win);
}

static void await(const impl_t *m, const panels_t *p, int k, int which)
{
    const double dummy = 0.0;
    double v = 0.0;
    for (int spins = 0;; spins++) {
        m->fop(&dummy, &v, MPI_DOUBLE, rank, flag_disp(p, k, which), MPI_NO_OP, p->win);
        m->flush(rank, p->win);
        if (v != 0.0)
            break;
        if (spins > 64)
            sched_yield(); /* more processes than cores: let the sender run */
    }
    m->win_sync(p->win); /* the blocks the flag announced are visible to loads */
}

static double rma_lu(const impl_t *m, const layout_t *l, double *A)
{
    const int nb = l->nb, nb2 = nb * nb, nbk = l->nbk;
    panels_t p = { .nbk = nbk, .lr = l->lr, .lc = l->lc, .nb2 = nb2 };
    MPI_Aint words = uslot_disp(&p, nbk, 0);
    m->win_allocate(words * (MPI_Aint)sizeof(double), sizeof(double), MPI_INFO_NULL,
                    MPI_COMM_WORLD, &p.base, &p.win);
    memset(p.base, 0, sizeof(double) * (size_t)nbk * 3);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    m->lock_all(MPI_MODE_NOCHECK, p.win);
    for (int k = 0; k < nbk; k++) {
        const int rk = k % pr, ck = k % pc;
        /* Rows and columns of this process that the trailing update touches. */
        int li0 = count_of(k + 1, pr, myrow), lj0 = count_of(k + 1, pc, mycol);
        const bool in_row = myrow == rk, in_col = mycol == ck;
        if (in_row && in_col) {
            double *d = A + ((size_t)(k / pr) * l->lc + k / pc) * nb2;
            lu_block(d, nb);
            /* Put the factored block to its row and column, then notify. */
            for (int q = 0; q < nprocs; q++)
                if (q / pc == rk || q % pc == ck)
                    m->put(d, nb2, MPI_DOUBLE, q, diag_disp(&p, k), nb2, MPI_DOUBLE, p.win);
            for (int q = 0; q < nprocs; q++)
                if (q / pc == rk || q % pc == ck)
                    notify(m, &p, q, k, FLAG_DIAG);
        }
        if (in_col && li0 < l->lr) {
            await(m, &p, k, FLAG_DIAG);
            const double *d = p.base + diag_disp(&p, k);
            for (int li = li0; li < l->lr; li++) {
                double *b = A + ((size_t)li * l->lc + k / pc) * nb2;
                cblas_dtrsm(CblasColMajor, CblasRight, CblasUpper, CblasNoTrans, CblasNonUnit, nb,
                            nb, 1.0, d, nb, b, nb);
                for (int c = 0; c < pc; c++)
                    m->put(b, nb2, MPI_DOUBLE, myrow * pc + c, lslot_disp(&p, k, li), nb2,
                           MPI_DOUBLE, p.win);
            }
            for (int c = 0; c < pc; c++)
                notify(m, &p, myrow * pc + c, k, FLAG_L);
        }
        if (in_row && lj0 < l->lc) {
            await(m, &p, k, FLAG_DIAG);
            const double *d = p.base + diag_disp(&p, k);
            for (int lj = lj0; lj < l->lc; lj++) {
                double *b = A + ((size_t)(k / pr) * l->lc + lj) * nb2;
                cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasUnit, nb, nb,
                            1.0, d, nb, b, nb);
                for (int r = 0; r < pr; r++)
                    m->put(b, nb2, MPI_DOUBLE, r * pc + mycol, uslot_disp(&p, k, lj), nb2,
                           MPI_DOUBLE, p.win);
            }
            for (int r = 0; r < pr; r++)
                notify(m, &p, r * pc + mycol, k, FLAG_U);
        }
        /* Trailing update, owner computes: A(I,J) -= L(I,k) U(k,J). */
        if (li0 < l->lr && lj0 < l->lc) {
            await(m, &p, k, FLAG_L);
            await(m, &p, k, FLAG_U);
            for (int lj = lj0; lj < l->lc; lj++)
                for (int li = li0; li < l->lr; li++)
                    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, nb, nb, nb, -1.0,
                                p.base + lslot_disp(&p, k, li), nb,
                                p.base + uslot_disp(&p, k, lj), nb, 1.0,
                                A + ((size_t)li * l->lc + lj) * nb2, nb);
        }
    }
    m->unlock_all(p.win);
    double t = MPI_Wtime() - t0, tmax;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    m->win_free(&p.win);
    return tmax;
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

typedef struct {
    const layout_t *l;
    double *mem;
} blocked_t;

/* --inject-error: one wrong element in the first block rank 0 owns. */
static void maybe_corrupt(double *blocks, const layout_t *l)
{
    if (inject_error && rank == 0 && l->lr && l->lc)
        blocks[l->nb + 1] += 1e-3; /* row 1, column 1 */
}

static double *blocked_at(void *ctx, int I, int J, int *ld)
{
    blocked_t *b = ctx;
    *ld = b->l->nb;
    return b->mem + ((size_t)(I / pr) * b->l->lc + J / pc) * b->l->nb * b->l->nb;
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
    J_BLOCKS_CEILING /* the ceiling's work as the RMA kernel cuts it: nb x nb block products */
} job_kind_t;
typedef struct {
    job_kind_t kind;
    const impl_t *m;    /* RMA kernels */
    dgemm_opts_t o;     /* RMA-dgemm */
    const char *opts;   /* label of the configuration ("" for the default) */
    double t[16];
    double residual;
} job_t;

static job_t job(job_kind_t kind, const impl_t *m, dgemm_opts_t o, const char *opts)
{
    return (job_t){ .kind = kind, .m = m, .o = o, .opts = opts };
}

static const char *const job_kernel[] = { "RMA-dgemm", "RMA-LU", "pdgemm", "pdgetrf", "dgemm",
                                          "dgetrf", "dgemm-blocks" };

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
                       : j->kind == J_PDGEMM || j->kind == J_PDGETRF ? "scalapack" : "ceiling";
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

/* One repetition of an RMA kernel; the last one is verified. */
static double rep_rma(job_t *j, const layout_t *l, bool verify)
{
    const size_t bytes = sizeof(double) * (size_t)l->lr * l->lc * l->nb * l->nb;
    double t;
    if (j->kind == J_RMA_DGEMM) {
        dwin_t A = dwin_make(j->m, (MPI_Aint)bytes, j->o.zero_copy),
               B = dwin_make(j->m, (MPI_Aint)bytes, j->o.zero_copy);
        double *C = malloc(bytes ? bytes : 1);
        fill_blocks(l, A.base, 0, false);
        fill_blocks(l, B.base, 1, false);
        MPI_Barrier(MPI_COMM_WORLD);
        t = rma_dgemm(j->m, l, &A, &B, C, j->o);
        if (verify) {
            maybe_corrupt(C, l);
            blocked_t ctx = { l, C };
            j->residual = check_dgemm(l, blocked_at, &ctx);
        }
        free(C);
        dwin_free(j->m, &B);
        dwin_free(j->m, &A);
    } else {
        double *A = malloc(bytes ? bytes : 1);
        fill_blocks(l, A, 0, true);
        t = rma_lu(j->m, l, A);
        if (verify) {
            maybe_corrupt(A, l);
            blocked_t ctx = { l, A };
            j->residual = check_lu(l, blocked_at, &ctx);
        }
        free(A);
    }
    return t;
}

static double rep_scalapack(job_t *j, const layout_t *l, bool verify)
{
    const bool lu = j->kind == J_PDGETRF;
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
    if (lu)
        pdgetrf_(&l->n, &l->n, a.mem, &one, &one, desc, ipiv, &info);
    else
        pdgemm_("N", "N", &l->n, &l->n, &l->n, &alpha, a.mem, &one, &one, desc, b.mem, &one, &one,
                desc, &zero, c.mem, &one, &one, desc);
    double dt = MPI_Wtime() - t0;
    MPI_Allreduce(&dt, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (verify)
        j->residual = info ? INFINITY : lu ? check_lu(l, scal_at, &a) : check_dgemm(l, scal_at, &c);
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
        } else if (j->kind == J_BLOCKS_CEILING) {
            /* nbk^3 products of nb x nb blocks, contiguous as the RMA kernel
             * keeps them (the matrices' memory reused as blocks). */
            const int nb = l->nb, nbk = l->nbk;
            const size_t nb2 = (size_t)nb * nb;
            memset(c, 0, sizeof(double) * (size_t)n * n);
            for (int bi = 0; bi < nbk; bi++)
                for (int bj = 0; bj < nbk; bj++)
                    for (int bk = 0; bk < nbk; bk++)
                        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, nb, nb, nb, 1.0,
                                    a + ((size_t)bi * nbk + bk) * nb2, nb,
                                    b + ((size_t)bk * nbk + bj) * nb2, nb, 1.0,
                                    c + ((size_t)bi * nbk + bj) * nb2, nb);
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
            case J_RMA_DGEMM:
            case J_RMA_LU: j->t[r] = rep_rma(j, l, last); break;
            case J_PDGEMM:
            case J_PDGETRF: j->t[r] = rep_scalapack(j, l, last); break;
            default: j->t[r] = rep_ceiling(j, l); break;
            }
        }
    for (int k = 0; k < njobs; k++)
        report(&jobs[k], l, reps);
}


int main(int argc, char **argv)
{
    const char *sizes = "512,1024", *kernels = "dgemm,lu", *csv_path = NULL;
    int nb = 128, reps = 3;
    bool ablation = false, scalapack = true;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--sizes") && i + 1 < argc) sizes = argv[++i];
        else if (!strcmp(argv[i], "--nb") && i + 1 < argc) nb = atoi(argv[++i]);
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
    if (scalapack) {
        Cblacs_get(0, 0, &blacs_ctx);
        Cblacs_gridinit(&blacs_ctx, "Row", pr, pc);
    }
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
    const dgemm_opts_t all_on = { true, true, true };
    const char *const ceiling = "OpenBLAS, 1 process, x P";
    /* Paper 002, Table I, on onesided. */
    static const struct {
        dgemm_opts_t o;
        const char *name;
    } abl[] = {
        { { false, false, true }, "zero-copy off, non-blocking off" },
        { { false, true, true }, "zero-copy off, non-blocking on" },
        { { true, false, true }, "zero-copy on, non-blocking off" },
        { { true, true, false }, "zero-copy on, non-blocking on, contention order off" },
    };
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
                    jobs[nj++] = job(J_RMA_DGEMM, &impls[k], all_on, "");
            for (size_t a = 0; ablation && a < sizeof abl / sizeof abl[0]; a++)
                jobs[nj++] = job(J_RMA_DGEMM, &impls[IMPL_ONESIDED], abl[a].o, abl[a].name);
            if (scalapack)
                jobs[nj++] = job(J_PDGEMM, NULL, all_on, "");
            jobs[nj++] = job(J_DGEMM_CEILING, NULL, all_on, ceiling);
            if (ablation) /* what cutting the work into blocks costs by itself */
                jobs[nj++] = job(J_BLOCKS_CEILING, NULL, all_on, "as the ceiling, in RMA-dgemm's blocks");
        }
        if (bench_in_list(kernels, "lu")) {
            for (int k = 0; k < 2; k++)
                if (bench_impl_on(k))
                    jobs[nj++] = job(J_RMA_LU, &impls[k], all_on, "");
            if (scalapack)
                jobs[nj++] = job(J_PDGETRF, NULL, all_on, "");
            jobs[nj++] = job(J_DGETRF_CEILING, NULL, all_on, ceiling);
        }
        run_jobs(jobs, nj, &l, reps);
    }
    if (csv)
        fclose(csv);
    if (scalapack)
        Cblacs_gridexit(blacs_ctx);
    MPI_Finalize();
    return 0;
}
