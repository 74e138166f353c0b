/* BLACS grids as MPI communicators, block-cyclic index arithmetic, block datatypes. */
#include "os_la.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

int os_la_count(const os_la_dist_t *d, int n, int p)
{
    const int dist = (p - d->src + d->np) % d->np; /* p's place in the deal */
    const int blocks = n / d->b;
    int count = blocks / d->np * d->b;
    const int extra = blocks % d->np;
    if (dist < extra)
        count += d->b;
    else if (dist == extra)
        count += n % d->b;
    return count;
}

/* A context's communicator is made once and kept: every call on the grid
 * needs it, and making it is a collective call. BLACS may hand a freed
 * context's number to a new grid, so an entry is reused only when its grid
 * has the same shape and the same processes. Nothing is ever evicted: the
 * grid's processes must all find an entry, or all make one, and an eviction
 * would depend on each process's own history of other grids. Programs have
 * a handful of grids. */
typedef struct {
    int ctxt, nprow, npcol;
    int *pnum; /* system-communicator rank of each grid position */
    MPI_Comm sys, comm;
} grid_entry_t;
static grid_entry_t *cache;
static int cached, capacity;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static bool same_grid(int i, int ctxt, int nprow, int npcol, MPI_Comm sys, const int *pnum)
{
    if (cache[i].ctxt != ctxt || cache[i].nprow != nprow || cache[i].npcol != npcol)
        return false;
    int cmp;
    MPI_Comm_compare(cache[i].sys, sys, &cmp);
    if (cmp != MPI_IDENT && cmp != MPI_CONGRUENT)
        return false;
    for (int p = 0; p < nprow * npcol; p++)
        if (cache[i].pnum[p] != pnum[p])
            return false;
    return true;
}

bool os_la_grid_of(int ctxt, os_la_grid_t *g)
{
    *g = (os_la_grid_t){ .ctxt = ctxt, .comm = MPI_COMM_NULL };
    Cblacs_gridinfo(ctxt, &g->nprow, &g->npcol, &g->myrow, &g->mycol);
    if (g->myrow < 0 || g->mycol < 0 || g->myrow >= g->nprow || g->mycol >= g->npcol)
        return false;
    int sysctxt;
    Cblacs_get(ctxt, 10, &sysctxt); /* 10: the system context the grid was made from */
    MPI_Comm sys = Cblacs2sys_handle(sysctxt);
    const int np = g->nprow * g->npcol;
    int *pnum = malloc(sizeof(int) * (size_t)np);
    for (int p = 0; p < np; p++)
        pnum[p] = Cblacs_pnum(ctxt, p / g->npcol, p % g->npcol);

    pthread_mutex_lock(&cache_lock);
    for (int i = 0; i < cached; i++)
        if (same_grid(i, ctxt, g->nprow, g->npcol, sys, pnum)) {
            g->comm = cache[i].comm;
            pthread_mutex_unlock(&cache_lock);
            free(pnum);
            return true;
        }
    /* Collective over the grid's processes only (not the whole system
     * communicator, some of whose processes may not be in this grid). */
    MPI_Group sysgroup, group;
    MPI_Comm_group(sys, &sysgroup);
    MPI_Group_incl(sysgroup, np, pnum, &group);
    MPI_Comm_create_group(sys, group, 0x05a1, &g->comm);
    MPI_Group_free(&group);
    MPI_Group_free(&sysgroup);
    if (cached == capacity) {
        capacity = capacity ? 2 * capacity : 8;
        cache = realloc(cache, sizeof *cache * (size_t)capacity);
    }
    cache[cached++] = (grid_entry_t){ ctxt, g->nprow, g->npcol, pnum, sys, g->comm };
    pthread_mutex_unlock(&cache_lock);
    return true;
}

MPI_Datatype os_la_vtype(os_la_types_t *tc, int rows, int cols, int ld)
{
    for (int i = 0; i < tc->n; i++)
        if (tc->v[i].rows == rows && tc->v[i].cols == cols && tc->v[i].ld == ld)
            return tc->v[i].t;
    MPI_Datatype t;
    MPI_Type_vector(cols, rows, ld, MPI_DOUBLE, &t);
    MPI_Type_commit(&t);
    if (tc->n == OS_LA_TYPE_CACHE) { /* full: the oldest goes (its transfers have started,
                                        which is all MPI asks of a freed type) */
        MPI_Type_free(&tc->v[0].t);
        memmove(tc->v, tc->v + 1, sizeof tc->v[0] * (OS_LA_TYPE_CACHE - 1));
        tc->n--;
    }
    tc->v[tc->n].rows = rows;
    tc->v[tc->n].cols = cols;
    tc->v[tc->n].ld = ld;
    tc->v[tc->n++].t = t;
    return t;
}

void os_la_types_free(os_la_types_t *tc)
{
    for (int i = 0; i < tc->n; i++)
        MPI_Type_free(&tc->v[i].t);
    tc->n = 0;
}
