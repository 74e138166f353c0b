/*
 * The linear-algebra library's internal header: the BLACS grid as an MPI
 * communicator, ScaLAPACK's block-cyclic index arithmetic, the RMA calls the
 * kernels make (a table, so that the benchmark can run the same kernels on
 * the host MPI's own RMA), ScaLAPACK/BLACS prototypes and the counters.
 *
 * Layering: grid.c (contexts, distribution) <- pdgemm.c, pdgetrf.c (the
 * kernels) <- interpose.c (the public entry points, pdgemm_ interposition,
 * the counters). Nothing here calls back into a higher file.
 */
#ifndef OS_LA_H
#define OS_LA_H

#include "onesided_la.h"

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>

/* ---------------------------------------------------- ScaLAPACK and BLACS */

enum { DESC_DTYPE, DESC_CTXT, DESC_M, DESC_N, DESC_MB, DESC_NB, DESC_RSRC, DESC_CSRC, DESC_LLD };
#define OS_LA_BLOCK_CYCLIC_2D 1

void Cblacs_gridinfo(int ctxt, int *nprow, int *npcol, int *myrow, int *mycol);
void Cblacs_get(int ctxt, int what, int *val);
int Cblacs_pnum(int ctxt, int prow, int pcol);
MPI_Comm Cblacs2sys_handle(int sysctxt);

typedef void pdgemm_fn(const char *, const char *, const int *, const int *, const int *,
                       const double *, const double *, const int *, const int *, const int *,
                       const double *, const int *, const int *, const int *, const double *,
                       double *, const int *, const int *, const int *);

/* ------------------------------------------------------------------ grid */

/* One BLACS grid as MPI sees it: comm's rank of process (prow, pcol) is
 * prow * npcol + pcol. */
typedef struct {
    int ctxt, nprow, npcol, myrow, mycol;
    MPI_Comm comm; /* MPI_COMM_NULL for a process outside the grid */
} os_la_grid_t;

/* The grid of a BLACS context (a cached communicator; creating one is
 * collective over the grid's processes, as every call that asks is).
 * Returns false for a process outside the grid. */
bool os_la_grid_of(int ctxt, os_la_grid_t *g);

/* One dimension of a block-cyclic distribution: blocks of `b` indices
 * dealt round robin to `np` process coordinates from `src`. */
typedef struct {
    int b, src, np;
} os_la_dist_t;

static inline int os_la_owner(const os_la_dist_t *d, int g)
{
    return (g / d->b + d->src) % d->np;
}
/* Local index of global index g on its owner. */
static inline int os_la_local(const os_la_dist_t *d, int g)
{
    return (g / (d->b * d->np)) * d->b + g % d->b;
}
/* How many of the global indices [0, n) coordinate p owns (ScaLAPACK's NUMROC);
 * p's indices of [g0, g1) are its local indices [count(g0), count(g1)). */
int os_la_count(const os_la_dist_t *d, int n, int p);

/* A cache of the vector datatypes of rows x cols blocks with leading
 * dimension ld: a call's transfers share few shapes. */
enum { OS_LA_TYPE_CACHE = 32 };
typedef struct {
    struct {
        int rows, cols, ld;
        MPI_Datatype t;
    } v[OS_LA_TYPE_CACHE];
    int n;
} os_la_types_t;

MPI_Datatype os_la_vtype(os_la_types_t *tc, int rows, int cols, int ld);
void os_la_types_free(os_la_types_t *tc);

/* ------------------------------------------------------------ RMA calls */

typedef struct {
    const char *name;
    int (*win_create)(void *, MPI_Aint, int, MPI_Info, MPI_Comm, MPI_Win *);
    int (*win_allocate)(MPI_Aint, int, MPI_Info, MPI_Comm, void *, MPI_Win *);
    int (*win_free)(MPI_Win *);
    int (*lock_all)(int, MPI_Win);
    int (*unlock_all)(MPI_Win);
    int (*rget)(void *, int, MPI_Datatype, int, MPI_Aint, int, MPI_Datatype, MPI_Win,
                MPI_Request *);
    int (*get)(void *, int, MPI_Datatype, int, MPI_Aint, int, MPI_Datatype, MPI_Win);
    /* The RMA's get completion cannot be trusted but per target (MPICH
     * 4.0.2, ch4:ucx): MPI_Rget's request completes before a non-contiguous
     * transfer's data has landed (pmodels/mpich#7896), and MPI_Win_flush_all
     * returns before an outstanding MPI_Get of megabytes has (while
     * MPI_Win_flush of its target waits for it). The kernel then uses
     * MPI_Get and MPI_Win_flush per target. */
    bool gets_complete_per_target_only;
    int (*put)(const void *, int, MPI_Datatype, int, MPI_Aint, int, MPI_Datatype, MPI_Win);
    int (*acc)(const void *, int, MPI_Datatype, int, MPI_Aint, int, MPI_Datatype, MPI_Op, MPI_Win);
    int (*fop)(const void *, void *, MPI_Datatype, int, MPI_Aint, MPI_Op, MPI_Win);
    int (*flush)(int, MPI_Win);
    int (*win_sync)(MPI_Win);
} os_la_rma_t;

extern const os_la_rma_t os_la_rma_onesided; /* MPI_*: onesided */
extern const os_la_rma_t os_la_rma_native;   /* PMPI_*: the host MPI's own RMA */

/* The RMA kernel's design choices (paper 002, Table I); all on by default. */
typedef struct {
    bool in_place;    /* this process's own blocks are read where they are, first */
    bool nonblocking; /* the next panel's gets are in flight during this panel's dgemm */
    bool stagger;     /* processes start their k loop at different panels */
    int panel;        /* k columns per dgemm, at least; 0: the configured default */
} os_la_opts_t;

extern const os_la_opts_t os_la_default_opts;

/* The kernels, on a valid call (checked by the caller). They return false
 * when the call is not theirs to compute (the caller then hands it to
 * ScaLAPACK); the decision is the same on every process of the grid. */
bool os_la_pdgemm_rma(const os_la_rma_t *rma, os_la_opts_t o, char ta, char tb, int m, int n,
                      int k, double alpha, const double *a, int ia, int ja, const int *desca,
                      const double *b, int ib, int jb, const int *descb, double beta, double *c,
                      int ic, int jc, const int *descc);
int os_la_pdgetrf_rma(const os_la_rma_t *rma, int m, int n, double *a, int ia, int ja,
                      const int *desca);

/* The same entry points the public functions use, on a chosen RMA (the
 * benchmark's native column). */
void os_la_pdgemm_with(const os_la_rma_t *rma, os_la_opts_t o, const char *transa,
                       const char *transb, const int *m, const int *n, const int *k,
                       const double *alpha, const double *a, const int *ia, const int *ja,
                       const int *desca, const double *b, const int *ib, const int *jb,
                       const int *descb, const double *beta, double *c, const int *ic,
                       const int *jc, const int *descc);
void os_la_pdgetrf_nopiv_with(const os_la_rma_t *rma, const int *m, const int *n, double *a,
                              const int *ia, const int *ja, const int *desca, int *info);

/* Turn pdgemm_ interposition on or off in this process (the benchmark's
 * interposed row; a program sets ONESIDED_LA_PDGEMM instead). */
void os_la_set_interposition(bool on);

/* ------------------------------------------------------------- counters */

extern onesided_la_stats_t os_la_stats;

#endif
