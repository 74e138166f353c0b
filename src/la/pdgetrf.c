/*
 * RMA LU without pivoting (paper 002) on ScaLAPACK's layout: right-looking,
 * one block column per step, no send/recv and no collective inside.
 *
 * Step k: the owner of diagonal block (k, k) factors it in place and puts it
 * to the other processes of its grid row and column, then notifies them;
 * the processes of block column k solve their blocks below the diagonal (L)
 * with dtrsm and put that panel to the other processes of their grid row;
 * those of block row k solve theirs right of the diagonal (U) and put them
 * down their grid column; every process then updates its whole trailing
 * part with one dgemm (local trailing rows x local trailing columns x nb),
 * reading its own L and U blocks in place. With look-ahead: the processes
 * of block column k + 1 update that column first and factor step k + 1's
 * panel before the rest of their update.
 *
 * A notification is a flag word set by MPI_Accumulate(REPLACE) after a
 * flush of the data it announces (so the data is complete at the target
 * first); the receiver polls its own flag with MPI_Fetch_and_op(NO_OP) and
 * then MPI_Win_sync, which makes the announced data visible to its loads.
 * Every step has its own flags and slots in the receivers' panel window,
 * never reused within a call, so no slot is overwritten while it is read.
 * A sender computes a receiver's slot offsets from its own sizes: L panels
 * go along a grid row (same local row count), U panels down a grid column
 * (same local column count).
 */
#include "os_la.h"

#include <cblas.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

enum { FLAG_DIAG, FLAG_L, FLAG_U, FLAGS };

/* In-place LU of a rows x cols block without pivoting (unit lower L): the
 * first zero pivot's column (0-based), or -1. As LAPACK's dgetrf2, a zero
 * pivot leaves its column unscaled and the factorization goes on.
 * Recursive on the columns (LAPACK's dgetrf2 without the row swaps), so
 * that nearly all of its work is dtrsm and dgemm: the diagonal block is on
 * every step's critical path, and rank-1 updates would run it at a tenth
 * of the BLAS's rate. */
static int lu_block(double *a, int ld, int rows, int cols)
{
    const int mn = rows < cols ? rows : cols;
    if (mn <= 8) {
        int zero = -1;
        for (int j = 0; j < mn; j++) {
            double *col = a + (size_t)j * ld;
            const double pivot = col[j];
            if (pivot != 0.0) {
                for (int r = j + 1; r < rows; r++)
                    col[r] /= pivot;
            } else if (zero < 0) {
                zero = j;
            }
            if (j + 1 < rows && j + 1 < cols)
                cblas_dger(CblasColMajor, rows - j - 1, cols - j - 1, -1.0, col + j + 1, 1,
                           a + (size_t)(j + 1) * ld + j, ld, a + (size_t)(j + 1) * ld + j + 1,
                           ld);
        }
        return zero;
    }
    const int n1 = mn / 2;
    /* [A11; A21] = [L11; L21] U11, then U12 = L11^-1 A12, then
     * A22 -= L21 U12, then A22's own factorization. */
    int zero = lu_block(a, ld, rows, n1);
    double *a12 = a + (size_t)n1 * ld, *a21 = a + n1, *a22 = a12 + n1;
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasUnit, n1, cols - n1, 1.0,
                a, ld, a12, ld);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, rows - n1, cols - n1, n1, -1.0, a21, ld,
                a12, ld, 1.0, a22, ld);
    const int z2 = lu_block(a22, ld, rows - n1, cols - n1);
    return zero >= 0 ? zero : z2 >= 0 ? z2 + n1 : -1;
}

typedef struct {
    const os_la_rma_t *rma;
    MPI_Win win;
    double *base;
    int steps, nb;
    MPI_Aint *loff, *uoff; /* step k's L and U slots in this row's / column's receivers */
} panels_t;

static MPI_Aint flag_disp(int k, int which)
{
    return (MPI_Aint)k * FLAGS + which;
}

static MPI_Aint diag_disp(const panels_t *p, int k)
{
    return (MPI_Aint)p->steps * FLAGS + (MPI_Aint)k * p->nb * p->nb;
}

static void notify(const panels_t *p, int target, int k, int which)
{
    const double one = 1.0;
    p->rma->flush(target, p->win); /* the data first: complete at the target */
    p->rma->acc(&one, 1, MPI_DOUBLE, target, flag_disp(k, which), 1, MPI_DOUBLE, MPI_REPLACE,
                p->win);
    p->rma->flush(target, p->win);
}

static void await(const panels_t *p, int me, int k, int which)
{
    const double dummy = 0.0;
    double v = 0.0;
    for (int spins = 0;; spins++) {
        p->rma->fop(&dummy, &v, MPI_DOUBLE, me, flag_disp(k, which), MPI_NO_OP, p->win);
        p->rma->flush(me, p->win);
        if (v != 0.0)
            break;
        if (spins > 64)
            sched_yield(); /* more processes than cores: let the sender run */
    }
    p->rma->win_sync(p->win); /* what the flag announced is visible to loads */
}

/* One call's state. */
typedef struct {
    panels_t p;
    os_la_grid_t g;
    os_la_dist_t rdist, cdist; /* sub(A)'s rows over grid rows, columns over grid columns */
    double *sub;               /* sub(A)'s first local element */
    int lld, m, n, nb, P, Q, me, mloc, nloc;
    os_la_types_t types;
    int first_zero; /* in sub(A), 1-based; INT_MAX for none */
} lu_t;

/* Step k as this process sees it. */
typedef struct {
    int rk, ck;       /* the grid row and column of diagonal block (k, k) */
    int dr, dc;       /* its rows and columns */
    int r0, c0;       /* this process's trailing part: local rows [r0, mloc), columns [c0, nloc) */
    int lrows, lcols;
    int dlr, dlc;     /* block row k's local row, block column k's local column (where owned) */
    bool in_row, in_col;
} step_t;

static step_t step_of(const lu_t *lu, int k)
{
    const int nb = lu->nb, end_r = (k + 1) * nb < lu->m ? (k + 1) * nb : lu->m,
              end_c = (k + 1) * nb < lu->n ? (k + 1) * nb : lu->n;
    step_t s = { .rk = os_la_owner(&lu->rdist, k * nb), .ck = os_la_owner(&lu->cdist, k * nb) };
    s.dr = lu->m - k * nb < nb ? lu->m - k * nb : nb;
    s.dc = lu->n - k * nb < nb ? lu->n - k * nb : nb;
    s.r0 = os_la_count(&lu->rdist, end_r, lu->g.myrow);
    s.c0 = os_la_count(&lu->cdist, end_c, lu->g.mycol);
    s.lrows = lu->mloc - s.r0;
    s.lcols = lu->nloc - s.c0;
    s.dlr = os_la_local(&lu->rdist, k * nb);
    s.dlc = os_la_local(&lu->cdist, k * nb);
    s.in_row = lu->g.myrow == s.rk;
    s.in_col = lu->g.mycol == s.ck;
    return s;
}

/* Step k's diagonal block (its owner) and L panel (block column k's processes). */
static void lu_panel(lu_t *lu, int k)
{
    const step_t s = step_of(lu, k);
    const int nb = lu->nb, lld = lu->lld, P = lu->P, Q = lu->Q;
    panels_t *p = &lu->p;
    const bool owner = s.in_row && s.in_col;
    /* The diagonal block: the owner's own, or the copy it put here. */
    const double *diag = owner ? lu->sub + s.dlr + (size_t)s.dlc * lld : p->base + diag_disp(p, k);
    const int ldd = owner ? lld : nb;
    if (owner) {
        double *d = lu->sub + s.dlr + (size_t)s.dlc * lld;
        const int z = lu_block(d, lld, s.dr, s.dc);
        if (z >= 0 && k * nb + z + 1 < lu->first_zero)
            lu->first_zero = k * nb + z + 1;
        MPI_Datatype from = os_la_vtype(&lu->types, s.dr, s.dc, lld),
                     to = os_la_vtype(&lu->types, s.dr, s.dc, nb);
        for (int q = 0; q < P * Q; q++)
            if ((q / Q == s.rk || q % Q == s.ck) && q != lu->me)
                p->rma->put(d, 1, from, q, diag_disp(p, k), 1, to, p->win);
        for (int q = 0; q < P * Q; q++)
            if ((q / Q == s.rk || q % Q == s.ck) && q != lu->me)
                notify(p, q, k, FLAG_DIAG);
    }
    if (s.in_col && s.lrows > 0) {
        /* L: this process's blocks below the diagonal, times U11^-1; the
         * other processes of its grid row get a copy. */
        if (!owner)
            await(p, lu->me, k, FLAG_DIAG);
        double *l = lu->sub + s.r0 + (size_t)s.dlc * lld;
        cblas_dtrsm(CblasColMajor, CblasRight, CblasUpper, CblasNoTrans, CblasNonUnit, s.lrows,
                    s.dc, 1.0, diag, ldd, l, lld);
        MPI_Datatype from = os_la_vtype(&lu->types, s.lrows, s.dc, lld);
        for (int c = 0; c < Q; c++)
            if (c != lu->g.mycol)
                p->rma->put(l, 1, from, lu->g.myrow * Q + c, p->loff[k], s.lrows * s.dc,
                            MPI_DOUBLE, p->win);
        for (int c = 0; c < Q; c++)
            if (c != lu->g.mycol)
                notify(p, lu->g.myrow * Q + c, k, FLAG_L);
    }
}

/* Step k's U panel (block row k's processes). */
static void lu_upanel(lu_t *lu, int k)
{
    const step_t s = step_of(lu, k);
    if (!s.in_row || s.lcols <= 0)
        return;
    panels_t *p = &lu->p;
    const bool owner = s.in_col; /* and in_row */
    if (!owner)
        await(p, lu->me, k, FLAG_DIAG);
    double *u = lu->sub + s.dlr + (size_t)s.c0 * lu->lld;
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasUnit, s.dr, s.lcols, 1.0,
                owner ? lu->sub + s.dlr + (size_t)s.dlc * lu->lld : p->base + diag_disp(p, k),
                owner ? lu->lld : lu->nb, u, lu->lld);
    MPI_Datatype from = os_la_vtype(&lu->types, s.dr, s.lcols, lu->lld),
                 to = os_la_vtype(&lu->types, s.dr, s.lcols, lu->nb);
    for (int r = 0; r < lu->P; r++)
        if (r != lu->g.myrow)
            p->rma->put(u, 1, from, r * lu->Q + lu->g.mycol, p->uoff[k], 1, to, p->win);
    for (int r = 0; r < lu->P; r++)
        if (r != lu->g.myrow)
            notify(p, r * lu->Q + lu->g.mycol, k, FLAG_U);
}

/* Step k's trailing update of local columns [c0 + from, c0 + to), owner
 * computes. Both dimensions go on past block k, so block k is nb x nb. */
static void lu_update(lu_t *lu, const step_t *s, int k, int from, int to)
{
    const panels_t *p = &lu->p;
    /* L and U where they are: this process's own blocks, or the copies
     * their owners put here. */
    const double *l = s->in_col ? lu->sub + s->r0 + (size_t)s->dlc * lu->lld : p->base + p->loff[k];
    const int ldl = s->in_col ? lu->lld : s->lrows;
    const double *u = s->in_row ? lu->sub + s->dlr + (size_t)s->c0 * lu->lld : p->base + p->uoff[k];
    const int ldu = s->in_row ? lu->lld : lu->nb;
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, s->lrows, to - from, lu->nb, -1.0, l,
                ldl, u + (size_t)from * ldu, ldu, 1.0,
                lu->sub + s->r0 + (size_t)(s->c0 + from) * lu->lld, lu->lld);
}

int os_la_pdgetrf_rma(const os_la_rma_t *rma, int m, int n, double *a, int ia, int ja,
                      const int *desca)
{
    lu_t lu = { .m = m, .n = n, .lld = desca[DESC_LLD], .nb = desca[DESC_MB],
                .first_zero = INT_MAX };
    if (!os_la_grid_of(desca[DESC_CTXT], &lu.g))
        return 0;
    const int P = lu.P = lu.g.nprow, Q = lu.Q = lu.g.npcol, nb = lu.nb;
    lu.me = lu.g.myrow * Q + lu.g.mycol;
    /* sub(A) starts on a block boundary (checked): it is itself a
     * block-cyclic matrix, whose first block lies on the grid row and
     * column that own block ((ia-1)/nb, (ja-1)/nb) of A. */
    const os_la_dist_t arow = { nb, desca[DESC_RSRC], P }, acol = { nb, desca[DESC_CSRC], Q };
    lu.rdist = (os_la_dist_t){ nb, os_la_owner(&arow, ia - 1), P };
    lu.cdist = (os_la_dist_t){ nb, os_la_owner(&acol, ja - 1), Q };
    lu.sub = a + os_la_count(&arow, ia - 1, lu.g.myrow) +
             (size_t)os_la_count(&acol, ja - 1, lu.g.mycol) * lu.lld;
    lu.mloc = os_la_count(&lu.rdist, m, lu.g.myrow);
    lu.nloc = os_la_count(&lu.cdist, n, lu.g.mycol);
    const int mn = m < n ? m : n, steps = (mn + nb - 1) / nb;

    /* The panel window: flags, diagonal blocks, then L and U slots by step. */
    panels_t *p = &lu.p;
    *p = (panels_t){ .rma = rma, .steps = steps, .nb = nb };
    p->loff = malloc(sizeof(MPI_Aint) * (size_t)(steps + 1));
    p->uoff = malloc(sizeof(MPI_Aint) * (size_t)(steps + 1));
    MPI_Aint words = diag_disp(p, steps);
    for (int k = 0; k < steps; k++) {
        p->loff[k] = words;
        words += (MPI_Aint)step_of(&lu, k).lrows * nb;
    }
    /* The U slots start after the largest L region of any grid row: a U
     * panel's sender (another grid row) must find them where its own are. */
    for (int r = 0; r < P; r++) {
        MPI_Aint end_l = diag_disp(p, steps);
        const int rows = os_la_count(&lu.rdist, m, r);
        for (int k = 0; k < steps; k++) {
            const int end = (k + 1) * nb;
            end_l += (MPI_Aint)(rows - os_la_count(&lu.rdist, end < m ? end : m, r)) * nb;
        }
        words = end_l > words ? end_l : words;
    }
    for (int k = 0; k < steps; k++) {
        p->uoff[k] = words;
        words += (MPI_Aint)step_of(&lu, k).lcols * nb;
    }
    rma->win_allocate(words * (MPI_Aint)sizeof(double), sizeof(double), MPI_INFO_NULL, lu.g.comm,
                      &p->base, &p->win);
    memset(p->base, 0, sizeof(double) * (size_t)steps * FLAGS);
    MPI_Barrier(lu.g.comm); /* every flag is clear before anyone may set one */

    rma->lock_all(MPI_MODE_NOCHECK, p->win);
    int panel_done = -1;
    for (int k = 0; k < steps; k++) {
        if (panel_done < k)
            lu_panel(&lu, k);
        lu_upanel(&lu, k);
        const step_t s = step_of(&lu, k);
        if (s.lrows <= 0 || s.lcols <= 0)
            continue;
        if (!s.in_col)
            await(p, lu.me, k, FLAG_L);
        if (!s.in_row)
            await(p, lu.me, k, FLAG_U);
        /* Look-ahead: the processes of the next block column update it
         * first and factor the next panel, so that the others find it
         * ready when their own update of this step ends, instead of
         * waiting for this whole update and then the panel. */
        int done = 0;
        if (k + 1 < steps && lu.g.mycol == os_la_owner(&lu.cdist, (k + 1) * nb)) {
            done = n - (k + 1) * nb < nb ? n - (k + 1) * nb : nb;
            lu_update(&lu, &s, k, 0, done);
            lu_panel(&lu, k + 1);
            panel_done = k + 1;
        }
        lu_update(&lu, &s, k, done, s.lcols);
    }
    rma->unlock_all(p->win);
    rma->win_free(&p->win); /* collective: every put to this process has landed */
    os_la_types_free(&lu.types);
    free(p->loff);
    free(p->uoff);
    int info;
    MPI_Allreduce(&lu.first_zero, &info, 1, MPI_INT, MPI_MIN, lu.g.comm);
    return info == INT_MAX ? 0 : info;
}
