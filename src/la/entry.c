/*
 * The library's entry points: argument checks, the hand-off of what the
 * kernels do not take to ScaLAPACK, pdgemm_ interposition, the counters and
 * the RMA tables.
 */
#define _GNU_SOURCE
#include "os_la.h"
#include "util/os_util.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <stdlib.h>

onesided_la_stats_t os_la_stats;

#define COUNT(field) __atomic_fetch_add(&os_la_stats.field, 1, __ATOMIC_RELAXED)

/* ONESIDED_STATS=1: each process prints its counters when it exits, as
 * onesided prints its windows' at MPI_Finalize. Registered at the first call. */
static int stats_rank;
static void print_at_exit(void)
{
    char line[512] = "";
    FILE *f = fmemopen(line, sizeof line - 1, "w"); /* one write: processes' lines do not mix */
    if (f) {
        onesided_la_print_stats(f);
        fclose(f);
    }
    fprintf(stderr, "[%d] %s", stats_rank, line);
}

static void first_call(void)
{
    static int once;
    if (__atomic_exchange_n(&once, 1, __ATOMIC_ACQ_REL) || !os_config.stats)
        return;
    int init = 0;
    PMPI_Initialized(&init); /* a program of MPI-4 sessions has no MPI_COMM_WORLD */
    if (init)
        PMPI_Comm_rank(MPI_COMM_WORLD, &stats_rank);
    atexit(print_at_exit);
}

const os_la_opts_t os_la_default_opts = { .in_place = true, .nonblocking = true,
                                          .stagger = true, .panel = 0 };

#define RMA_TABLE(P)                                                                          \
    .win_create = P##MPI_Win_create, .win_allocate = P##MPI_Win_allocate,                      \
    .win_free = P##MPI_Win_free, .lock_all = P##MPI_Win_lock_all,                              \
    .unlock_all = P##MPI_Win_unlock_all, .rget = P##MPI_Rget, .get = P##MPI_Get,               \
    .put = P##MPI_Put, .acc = P##MPI_Accumulate, .fop = P##MPI_Fetch_and_op,                   \
    .flush = P##MPI_Win_flush, .win_sync = P##MPI_Win_sync
const os_la_rma_t os_la_rma_onesided = { .name = "onesided", RMA_TABLE() };
const os_la_rma_t os_la_rma_native = {
    .name = "native", RMA_TABLE(P),
#ifdef MPICH_VERSION
    .gets_complete_per_target_only = true, /* pmodels/mpich#7896, and flush_all */
#endif
};

/* ------------------------------------------------------- ScaLAPACK's own */

void pdgemm_(const char *transa, const char *transb, const int *m, const int *n, const int *k,
             const double *alpha, const double *a, const int *ia, const int *ja,
             const int *desca, const double *b, const int *ib, const int *jb, const int *descb,
             const double *beta, double *c, const int *ic, const int *jc, const int *descc);

/* ScaLAPACK's pdgemm_, never this library's: the next definition after this
 * library (it is preloaded, or linked before ScaLAPACK), else the one in the
 * ScaLAPACK this library was linked with (a program that links ScaLAPACK
 * first, where this library's pdgemm_ answers nobody). */
static pdgemm_fn *scalapack_pdgemm(void)
{
    static pdgemm_fn *real;
    pdgemm_fn *f = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
    if (f)
        return f;
    f = (pdgemm_fn *)dlsym(RTLD_NEXT, "pdgemm_");
    if (!f || f == pdgemm_) {
        void *h = dlopen(OS_LA_SCALAPACK_PATH, RTLD_LAZY | RTLD_LOCAL);
        f = h ? (pdgemm_fn *)dlsym(h, "pdgemm_") : NULL;
    }
    if (!f || f == pdgemm_) {
        fprintf(stderr, "onesided_la: ScaLAPACK's pdgemm_ was not found (%s); aborting\n",
                OS_LA_SCALAPACK_PATH);
        abort();
    }
    __atomic_store_n(&real, f, __ATOMIC_RELEASE);
    return f;
}

/* ------------------------------------------------------------- arguments */

static bool trans_letter(const char *t, char *out)
{
    switch (*t) {
    case 'N': case 'n': *out = 'N'; return true;
    case 'T': case 't': *out = 'T'; return true;
    case 'C': case 'c': *out = 'T'; return true; /* real matrices: C is T */
    default: return false;
    }
}

/* A descriptor of a block-cyclic matrix on the grid whose shape is given,
 * and a rows x cols submatrix at (i, j) inside it (ScaLAPACK's checks but
 * LLD_, which is per process and checked by the kernel). */
static bool desc_ok(const int *d, int nprow, int npcol)
{
    return d[DESC_DTYPE] == OS_LA_BLOCK_CYCLIC_2D && d[DESC_M] >= 0 && d[DESC_N] >= 0 &&
           d[DESC_MB] >= 1 && d[DESC_NB] >= 1 && d[DESC_RSRC] >= 0 && d[DESC_RSRC] < nprow &&
           d[DESC_CSRC] >= 0 && d[DESC_CSRC] < npcol;
}

static bool sub_ok(const int *d, int i, int j, int rows, int cols)
{
    return i >= 1 && j >= 1 && (rows == 0 || i - 1 + rows <= d[DESC_M]) &&
           (cols == 0 || j - 1 + cols <= d[DESC_N]);
}

/* ---------------------------------------------------------------- pdgemm */

void os_la_pdgemm_with(const os_la_rma_t *rma, os_la_opts_t o, const char *transa,
                       const char *transb, const int *m, const int *n, const int *k,
                       const double *alpha, const double *a, const int *ia, const int *ja,
                       const int *desca, const double *b, const int *ib, const int *jb,
                       const int *descb, const double *beta, double *c, const int *ic,
                       const int *jc, const int *descc)
{
    first_call();
    COUNT(pdgemm_calls);
    char ta, tb;
    int nprow, npcol, myrow, mycol;
    /* Every check uses arguments that are the same on every process of the
     * grid, so that all of them take the same path. */
    bool legal = trans_letter(transa, &ta) && trans_letter(transb, &tb) && *m >= 0 && *n >= 0 &&
                 *k >= 0 && desca[DESC_CTXT] == descc[DESC_CTXT] &&
                 descb[DESC_CTXT] == descc[DESC_CTXT];
    if (legal) {
        Cblacs_gridinfo(descc[DESC_CTXT], &nprow, &npcol, &myrow, &mycol);
        if (myrow < 0 || mycol < 0 || myrow >= nprow || mycol >= npcol)
            return; /* not in the grid */
        legal = desc_ok(desca, nprow, npcol) && desc_ok(descb, nprow, npcol) &&
                desc_ok(descc, nprow, npcol) &&
                sub_ok(desca, *ia, *ja, ta == 'N' ? *m : *k, ta == 'N' ? *k : *m) &&
                sub_ok(descb, *ib, *jb, tb == 'N' ? *k : *n, tb == 'N' ? *n : *k) &&
                sub_ok(descc, *ic, *jc, *m, *n);
    }
    /* ScaLAPACK's quick return. */
    if (legal && (*m == 0 || *n == 0 || ((*k == 0 || *alpha == 0.0) && *beta == 1.0)))
        return;
    if (legal && os_la_pdgemm_rma(rma, o, ta, tb, *m, *n, *k, *alpha, a, *ia, *ja, desca, b, *ib,
                                  *jb, descb, *beta, c, *ic, *jc, descc)) {
        if (*k == 0 || *alpha == 0.0)
            COUNT(pdgemm_scaled_only); /* C := beta C, nothing moved */
        else
            COUNT(pdgemm_rma);
        return;
    }
    COUNT(pdgemm_fallback);
    scalapack_pdgemm()(transa, transb, m, n, k, alpha, a, ia, ja, desca, b, ib, jb, descb, beta, c,
                       ic, jc, descc);
}

void onesided_pdgemm(const char *transa, const char *transb, const int *m, const int *n,
                     const int *k, const double *alpha, const double *a, const int *ia,
                     const int *ja, const int *desca, const double *b, const int *ib,
                     const int *jb, const int *descb, const double *beta, double *c,
                     const int *ic, const int *jc, const int *descc)
{
    os_la_pdgemm_with(&os_la_rma_onesided, os_la_default_opts, transa, transb, m, n, k, alpha, a,
                      ia, ja, desca, b, ib, jb, descb, beta, c, ic, jc, descc);
}

void onesided_pdgemm_(const char *transa, const char *transb, const int *m, const int *n,
                      const int *k, const double *alpha, const double *a, const int *ia,
                      const int *ja, const int *desca, const double *b, const int *ib,
                      const int *jb, const int *descb, const double *beta, double *c,
                      const int *ic, const int *jc, const int *descc)
{
    onesided_pdgemm(transa, transb, m, n, k, alpha, a, ia, ja, desca, b, ib, jb, descb, beta, c,
                    ic, jc, descc);
}

/* The interposer: a program's (and ScaLAPACK's own) pdgemm_ calls, when this
 * library comes first. The choice is read per call, from the configuration
 * loaded at MPI_Init, so it is the same on every process that shares the
 * environment. */
void pdgemm_(const char *transa, const char *transb, const int *m, const int *n, const int *k,
             const double *alpha, const double *a, const int *ia, const int *ja,
             const int *desca, const double *b, const int *ib, const int *jb, const int *descb,
             const double *beta, double *c, const int *ic, const int *jc, const int *descc)
{
    if (os_config.la_pdgemm) {
        first_call();
        COUNT(pdgemm_interposed);
        onesided_pdgemm(transa, transb, m, n, k, alpha, a, ia, ja, desca, b, ib, jb, descb, beta,
                        c, ic, jc, descc);
        return;
    }
    first_call();
    COUNT(pdgemm_passed_through);
    scalapack_pdgemm()(transa, transb, m, n, k, alpha, a, ia, ja, desca, b, ib, jb, descb, beta, c,
                       ic, jc, descc);
}

void os_la_set_interposition(bool on)
{
    os_config.la_pdgemm = on;
}

/* --------------------------------------------------------------- pdgetrf */

void os_la_pdgetrf_nopiv_with(const os_la_rma_t *rma, const int *m, const int *n, double *a,
                              const int *ia, const int *ja, const int *desca, int *info)
{
    first_call();
    COUNT(pdgetrf_calls);
    int nprow, npcol, myrow, mycol;
    Cblacs_gridinfo(desca[DESC_CTXT], &nprow, &npcol, &myrow, &mycol);
    if (myrow < 0 || mycol < 0 || myrow >= nprow || mycol >= npcol) {
        *info = -(600 + DESC_CTXT + 1); /* not a grid this process belongs to */
        COUNT(pdgetrf_illegal);
        return;
    }
    /* ScaLAPACK's order of checks: the sizes, the offsets, the descriptor. */
    *info = 0;
    if (*m < 0)
        *info = -1;
    else if (*n < 0)
        *info = -2;
    else if (desca[DESC_DTYPE] != OS_LA_BLOCK_CYCLIC_2D)
        *info = -(600 + DESC_DTYPE + 1);
    else if (!desc_ok(desca, nprow, npcol))
        *info = -(600 + DESC_M + 1);
    else if (desca[DESC_MB] != desca[DESC_NB])
        *info = -(600 + DESC_NB + 1);
    else if (*ia < 1 || (*ia - 1) % desca[DESC_MB] || (*m && *ia - 1 + *m > desca[DESC_M]))
        *info = -4;
    else if (*ja < 1 || (*ja - 1) % desca[DESC_NB] || (*n && *ja - 1 + *n > desca[DESC_N]))
        *info = -5;
    if (*info) {
        COUNT(pdgetrf_illegal);
        return;
    }
    if (*m == 0 || *n == 0)
        return;
    *info = os_la_pdgetrf_rma(rma, *m, *n, a, *ia, *ja, desca);
    if (*info < 0)
        COUNT(pdgetrf_illegal);
}

void onesided_pdgetrf_nopiv(const int *m, const int *n, double *a, const int *ia, const int *ja,
                            const int *desca, int *info)
{
    os_la_pdgetrf_nopiv_with(&os_la_rma_onesided, m, n, a, ia, ja, desca, info);
}

void onesided_pdgetrf_nopiv_(const int *m, const int *n, double *a, const int *ia,
                             const int *ja, const int *desca, int *info)
{
    onesided_pdgetrf_nopiv(m, n, a, ia, ja, desca, info);
}

/* -------------------------------------------------------------- counters */

void onesided_la_get_stats(onesided_la_stats_t *stats)
{
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    *stats = os_la_stats;
}

void onesided_la_print_stats(FILE *out)
{
    onesided_la_stats_t s;
    onesided_la_get_stats(&s);
    fprintf(out,
            "onesided_la: pdgemm %" PRIu64 " calls (%" PRIu64 " RMA, %" PRIu64
            " scaled only, %" PRIu64 " to ScaLAPACK), pdgemm_ %" PRIu64 " interposed, %" PRIu64
            " passed through; %" PRIu64 " gets, %" PRIu64 " bytes, %" PRIu64
            " panels in place; pdgetrf_nopiv %" PRIu64 " calls, %" PRIu64 " illegal\n",
            s.pdgemm_calls, s.pdgemm_rma, s.pdgemm_scaled_only, s.pdgemm_fallback,
            s.pdgemm_interposed, s.pdgemm_passed_through, s.pdgemm_gets, s.pdgemm_get_bytes,
            s.pdgemm_local_panels, s.pdgetrf_calls, s.pdgetrf_illegal);
}
