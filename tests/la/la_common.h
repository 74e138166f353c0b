/*
 * Shared by the linear-algebra tests: BLACS grids, block-cyclic matrices
 * generated from their global indices, a generator every process runs in
 * step (so that all draw the same cases), and the pass/fail tally.
 */
#ifndef LA_COMMON_H
#define LA_COMMON_H

#define _GNU_SOURCE
#include "onesided_la.h"

#include <dlfcn.h>
#include <float.h>
#include <math.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void Cblacs_get(int ctxt, int what, int *val);
void Cblacs_gridinit(int *ctxt, const char *order, int nprow, int npcol);
void Cblacs_gridinfo(int ctxt, int *nprow, int *npcol, int *myrow, int *mycol);
void Cblacs_gridexit(int ctxt);
int numroc_(const int *n, const int *nb, const int *iproc, const int *isrc, const int *nprocs);

static int t_rank, t_size, t_failed, t_passed;

#define T_CHECK(cond, ...)                                                                     \
    do {                                                                                       \
        if (cond) {                                                                            \
            t_passed++;                                                                        \
        } else {                                                                               \
            t_failed++;                                                                        \
            fprintf(stderr, "[%d] FAIL %s:%d: ", t_rank, __FILE__, __LINE__);                  \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fputc('\n', stderr);                                                               \
        }                                                                                      \
    } while (0)

/* The same stream on every process: cases are drawn in step. */
static uint64_t t_seed = 0x2545f4914f6cdd1dull;
static uint64_t t_next(void)
{
    t_seed ^= t_seed << 13;
    t_seed ^= t_seed >> 7;
    t_seed ^= t_seed << 17;
    return t_seed;
}
static int t_between(int lo, int hi) /* inclusive */
{
    return lo + (int)(t_next() % (uint64_t)(hi - lo + 1));
}

/* Entry (i, j) (0-based, global) of matrix `which`: in [-1, 1). */
static double t_entry(int which, int i, int j)
{
    uint64_t x = (uint64_t)i * 0x9e3779b97f4a7c15ull ^ (uint64_t)j * 0xc2b2ae3d27d4eb4full ^
                 (uint64_t)(which + 1) * 0x165667b19e3779f9ull;
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    return (double)(x >> 11) / 4503599627370496.0 - 1.0;
}

/* A distributed matrix: its descriptor and this process's local array
 * (LLD_ = local rows + pad, so that leading dimensions differ by process). */
typedef struct {
    int desc[9];
    double *mem;
    size_t words;
    int locr, locc;
} t_mat_t;

static t_mat_t t_mat(int ctxt, int m, int n, int mb, int nb, int rsrc, int csrc, int pad)
{
    t_mat_t x = { .mem = NULL };
    int nprow, npcol, myrow, mycol;
    Cblacs_gridinfo(ctxt, &nprow, &npcol, &myrow, &mycol);
    x.locr = numroc_(&m, &mb, &myrow, &rsrc, &nprow);
    x.locc = numroc_(&n, &nb, &mycol, &csrc, &npcol);
    int lld = x.locr + pad > 1 ? x.locr + pad : 1;
    x.desc[0] = 1; x.desc[1] = ctxt; x.desc[2] = m; x.desc[3] = n; x.desc[4] = mb;
    x.desc[5] = nb; x.desc[6] = rsrc; x.desc[7] = csrc; x.desc[8] = lld;
    x.words = (size_t)lld * (size_t)(x.locc > 0 ? x.locc : 1);
    x.mem = malloc(sizeof(double) * x.words);
    return x;
}

/* Global index of local index l along one dimension (ScaLAPACK's INDXL2G). */
static int t_l2g(int l, int b, int p, int src, int np)
{
    return ((l / b) * np + (p - src + np) % np) * b + l % b;
}

/* Fill with f(i, j) (global indices); padding rows get `pad_value`. */
static void t_fill(t_mat_t *x, double (*f)(int, int, void *), void *ctx, double pad_value)
{
    int nprow, npcol, myrow, mycol;
    Cblacs_gridinfo(x->desc[1], &nprow, &npcol, &myrow, &mycol);
    for (int lc = 0; lc < x->locc; lc++)
        for (int lr = 0; lr < x->desc[8]; lr++) {
            double v = pad_value;
            if (lr < x->locr)
                v = f(t_l2g(lr, x->desc[4], myrow, x->desc[6], nprow),
                      t_l2g(lc, x->desc[5], mycol, x->desc[7], npcol), ctx);
            x->mem[(size_t)lc * x->desc[8] + lr] = v;
        }
}

/* The grids P processes make: 1 x P, P x 1, 2 x 2 at 4, and 1 x 2 (which
 * leaves processes out) at 3 and more. Returns how many. */
static int t_grids(int grids[4][2])
{
    int n = 0;
    grids[n][0] = 1, grids[n++][1] = t_size;
    if (t_size > 1)
        grids[n][0] = t_size, grids[n++][1] = 1;
    if (t_size == 4)
        grids[n][0] = 2, grids[n++][1] = 2;
    if (t_size >= 3)
        grids[n][0] = 1, grids[n++][1] = 2;
    return n;
}

/* A BLACS grid of pr x pc processes, row-major: ranks 0 .. pr pc - 1. */
static int t_grid(int pr, int pc)
{
    int ctxt;
    Cblacs_get(0, 0, &ctxt);
    Cblacs_gridinit(&ctxt, "Row", pr, pc);
    return ctxt;
}

static int t_finish(const char *name)
{
    int failed, passed;
    MPI_Allreduce(&t_failed, &failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&t_passed, &passed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (t_rank == 0)
        printf("%s: %d passed, %d failed (%d processes)\n", name, passed, failed, t_size);
    MPI_Finalize();
    return failed ? 1 : 0;
}

#endif
