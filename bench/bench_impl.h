/*
 * Shared by the benchmark programs: the two implementations side by side in
 * one process. The programs link onesided, so MPI_* one-sided calls reach
 * onesided while PMPI_* calls reach the host MPI's own RMA ("native").
 */
#ifndef BENCH_IMPL_H
#define BENCH_IMPL_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;
    int (*win_allocate)(MPI_Aint, int, MPI_Info, MPI_Comm, void *, MPI_Win *);
    int (*win_create)(void *, MPI_Aint, int, MPI_Info, MPI_Comm, MPI_Win *);
    int (*alloc_mem)(MPI_Aint, MPI_Info, void *);
    int (*free_mem)(void *);
    int (*win_free)(MPI_Win *);
    int (*put)(const void *, int, MPI_Datatype, int, MPI_Aint, int, MPI_Datatype, MPI_Win);
    int (*get)(void *, int, MPI_Datatype, int, MPI_Aint, int, MPI_Datatype, MPI_Win);
    int (*acc)(const void *, int, MPI_Datatype, int, MPI_Aint, int, MPI_Datatype, MPI_Op, MPI_Win);
    int (*fop)(const void *, void *, MPI_Datatype, int, MPI_Aint, MPI_Op, MPI_Win);
    int (*cas)(const void *, const void *, void *, MPI_Datatype, int, MPI_Aint, MPI_Win);
    int (*lock)(int, int, int, MPI_Win);
    int (*unlock)(int, MPI_Win);
    int (*lock_all)(int, MPI_Win);
    int (*unlock_all)(MPI_Win);
    int (*flush)(int, MPI_Win);
    int (*fence)(int, MPI_Win);
    int (*post)(MPI_Group, int, MPI_Win);
    int (*start)(MPI_Group, int, MPI_Win);
    int (*complete)(MPI_Win);
    int (*wait)(MPI_Win);
    int (*flush_all)(MPI_Win);
    int (*win_set_info)(MPI_Win, MPI_Info);
    int (*get_accumulate)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, int,
                          MPI_Aint, int, MPI_Datatype, MPI_Op, MPI_Win);
    int (*rget)(void *, int, MPI_Datatype, int, MPI_Aint, int, MPI_Datatype, MPI_Win,
                MPI_Request *);
    int (*win_allocate_shared)(MPI_Aint, int, MPI_Info, MPI_Comm, void *, MPI_Win *);
    int (*shared_query)(MPI_Win, int, MPI_Aint *, int *, void *);
    int (*win_sync)(MPI_Win);
} impl_t;

static const impl_t impls[2] = {
    { "native", PMPI_Win_allocate, PMPI_Win_create, PMPI_Alloc_mem, PMPI_Free_mem, PMPI_Win_free, PMPI_Put, PMPI_Get, PMPI_Accumulate,
      PMPI_Fetch_and_op, PMPI_Compare_and_swap, PMPI_Win_lock, PMPI_Win_unlock,
      PMPI_Win_lock_all, PMPI_Win_unlock_all, PMPI_Win_flush, PMPI_Win_fence, PMPI_Win_post,
      PMPI_Win_start, PMPI_Win_complete, PMPI_Win_wait, PMPI_Win_flush_all, PMPI_Win_set_info,
      PMPI_Get_accumulate, PMPI_Rget, PMPI_Win_allocate_shared, PMPI_Win_shared_query,
      PMPI_Win_sync },
    { "onesided", MPI_Win_allocate, MPI_Win_create, MPI_Alloc_mem, MPI_Free_mem, MPI_Win_free, MPI_Put, MPI_Get, MPI_Accumulate,
      MPI_Fetch_and_op, MPI_Compare_and_swap, MPI_Win_lock, MPI_Win_unlock, MPI_Win_lock_all,
      MPI_Win_unlock_all, MPI_Win_flush, MPI_Win_fence, MPI_Win_post, MPI_Win_start,
      MPI_Win_complete, MPI_Win_wait, MPI_Win_flush_all, MPI_Win_set_info, MPI_Get_accumulate,
      MPI_Rget, MPI_Win_allocate_shared, MPI_Win_shared_query, MPI_Win_sync },
};

enum { IMPL_NATIVE, IMPL_ONESIDED };

/* Is `name` one of the comma-separated words of `list`? */
static inline bool bench_in_list(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || !p[n]))
            return true;
    return false;
}

/* Which implementations run: a comma list of names ("native", "onesided")
 * given by a benchmark's own flag (bench_choose_impls) or else BENCH_IMPLS;
 * both when neither says. The main job runs one alone when the other
 * crashes the job (Open MPI's own RMA does on some programs), so that a
 * native crash costs the native column, not the run. A benchmark reports
 * NaN for what did not run. */
static const char *bench_impls_chosen;
static inline void bench_choose_impls(const char *list)
{
    bench_impls_chosen = list;
}
static inline bool bench_impl_on(int k)
{
    const char *list = bench_impls_chosen ? bench_impls_chosen : getenv("BENCH_IMPLS");
    return !list || !*list || bench_in_list(list, impls[k].name);
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of n samples (reorders them). */
static inline double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* A failed verification ends the whole run, loudly, with its own exit status
 * (mpiexec returns it): a launcher tearing the job down may lose the
 * message, and the status still tells a wrong result from a crash. */
#define BENCH_VERIFICATION_FAILED 86
#define BENCH_FAIL(prog, ...)                                                                  \
    do {                                                                                       \
        fprintf(stderr, prog ": VERIFICATION FAILED: " __VA_ARGS__);                           \
        fputc('\n', stderr);                                                                   \
        MPI_Abort(MPI_COMM_WORLD, BENCH_VERIFICATION_FAILED);                                  \
    } while (0)

#endif
