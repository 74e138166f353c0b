/*
 * onesided_la: RMA linear algebra (paper 002) on ScaLAPACK's own data.
 *
 * The functions take exactly ScaLAPACK's arguments: the caller's local
 * arrays in 2-D block-cyclic layout, each with its 9-integer descriptor
 * (DTYPE_ = 1, CTXT_, M_, N_, MB_, NB_, RSRC_, CSRC_, LLD_) on a BLACS grid,
 * and every argument passed by reference, Fortran style, so that a Fortran
 * program calls them as it calls PDGEMM:
 *
 *     CALL ONESIDED_PDGEMM('N', 'T', M, N, K, ALPHA, A, IA, JA, DESCA,
 *    $                     B, IB, JB, DESCB, BETA, C, IC, JC, DESCC)
 *
 * and a C program as it calls pdgemm_. Both are collective over the
 * processes of the descriptors' BLACS grid; a process outside the grid
 * returns at once, as in ScaLAPACK.
 *
 * Link: -lonesided_la -lonesided, with ScaLAPACK and a BLAS
 * (Debian: -lscalapack-mpich -lopenblas). Inside, remote blocks move by
 * MPI_Rget through onesided, so the calls are one-sided end to end; see the
 * README, "RMA linear algebra".
 */
#ifndef ONESIDED_LA_H
#define ONESIDED_LA_H

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * sub(C) := alpha op(sub(A)) op(sub(B)) + beta sub(C), as ScaLAPACK's
 * pdgemm_, with op(X) = X for 'N' and X^T for 'T' or 'C'; sub(C) is m x n,
 * op(sub(A)) m x k, op(sub(B)) k x n. Every m, n, k >= 0, every block size
 * (the three matrices need not share one), any RSRC_/CSRC_, any
 * submatrix offset and any grid shape are computed here (owner computes:
 * each process forms its own part of sub(C) from panels of op(A) and op(B)
 * it reads with MPI_Rget, double-buffered behind dgemm). Calls that are
 * not legal ScaLAPACK calls (a bad transpose letter, a negative size, a
 * submatrix outside its matrix, descriptors of different grids or of
 * another type) go to ScaLAPACK's pdgemm_ itself, which reports them as it
 * always does; those calls are counted (onesided_la_get_stats).
 * As in BLAS, beta = 0 means that C is not read.
 */
void onesided_pdgemm(const char *transa, const char *transb, const int *m, const int *n,
                     const int *k, const double *alpha, const double *a, const int *ia,
                     const int *ja, const int *desca, const double *b, const int *ib,
                     const int *jb, const int *descb, const double *beta, double *c,
                     const int *ic, const int *jc, const int *descc);
void onesided_pdgemm_(const char *transa, const char *transb, const int *m, const int *n,
                      const int *k, const double *alpha, const double *a, const int *ia,
                      const int *ja, const int *desca, const double *b, const int *ib,
                      const int *jb, const int *descb, const double *beta, double *c,
                      const int *ic, const int *jc, const int *descc);

/*
 * LU factorization WITHOUT pivoting of the m x n submatrix sub(A) =
 * A(ia:ia+m-1, ja:ja+n-1): sub(A) = L U, L unit lower triangular (its
 * diagonal not stored), U upper triangular, both overwriting sub(A), as
 * pdgetrf_ stores them but with no row interchanges. Only for matrices that
 * need no pivoting (diagonally dominant by rows or columns, symmetric
 * positive definite, ...): on others it is numerically unstable, and
 * pdgetrf_ is the right call.
 *
 * info (the same on every process of the grid):
 *   0     success;
 *   i > 0 U(i,i) is exactly zero (the first such i, counted in sub(A)); the
 *         factorization was completed, as LAPACK's dgetrf does, and U is
 *         singular;
 *   < 0   an illegal argument, ScaLAPACK's convention: -j for argument j,
 *         -(100 j + e) for entry e of the descriptor in argument j. This
 *         includes MB_ != NB_ (-606) and a submatrix that does not start on
 *         a block boundary (-4 for ia, -5 for ja).
 */
void onesided_pdgetrf_nopiv(const int *m, const int *n, double *a, const int *ia, const int *ja,
                            const int *desca, int *info);
void onesided_pdgetrf_nopiv_(const int *m, const int *n, double *a, const int *ia,
                             const int *ja, const int *desca, int *info);

/*
 * An unchanged ScaLAPACK program: run it with libonesided_la preloaded
 * (onesided-run --la ...) or linked before ScaLAPACK, and
 * ONESIDED_LA_PDGEMM=1: its pdgemm_ calls are then answered by
 * onesided_pdgemm (which still hands the calls it does not take to
 * ScaLAPACK's). Without the variable, pdgemm_ is ScaLAPACK's, untouched.
 */

/* What the calling process's calls did, since it started. */
typedef struct {
    uint64_t pdgemm_calls;          /* onesided_pdgemm (and interposed pdgemm_) calls */
    uint64_t pdgemm_rma;            /* ... computed by the RMA kernel */
    uint64_t pdgemm_scaled_only;    /* ... with k = 0 or alpha = 0: C scaled, nothing moved */
    uint64_t pdgemm_fallback;       /* ... handed to ScaLAPACK's pdgemm_ (illegal calls) */
    uint64_t pdgemm_interposed;     /* pdgemm_ calls answered here (ONESIDED_LA_PDGEMM=1) */
    uint64_t pdgemm_passed_through; /* pdgemm_ calls passed on to ScaLAPACK untouched */
    uint64_t pdgemm_gets;           /* MPI_Rget calls of the RMA kernel */
    uint64_t pdgemm_get_bytes;      /* bytes they moved */
    uint64_t pdgemm_local_panels;   /* panels read in place (this process's own blocks) */
    uint64_t pdgetrf_calls;         /* onesided_pdgetrf_nopiv calls */
    uint64_t pdgetrf_illegal;       /* ... that returned info < 0 */
} onesided_la_stats_t;

void onesided_la_get_stats(onesided_la_stats_t *stats);
void onesided_la_print_stats(FILE *out);

#ifdef __cplusplus
}
#endif
#endif
