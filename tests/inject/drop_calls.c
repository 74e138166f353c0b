/* A broken MPI on purpose: preloaded in front of onesided, it drops every
 * Nth MPI_Accumulate or MPI_Put (returning MPI_SUCCESS, as a library that
 * lost the update would), so that tests can show a verification catches a
 * lost update. The native side (PMPI_*) is left alone.
 *   ONESIDED_TEST_DROP=MPI_Accumulate|MPI_Put   which call (default: none)
 *   ONESIDED_TEST_DROP_EVERY=N                  drop calls N, 2N, ... (default 997)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_long calls;

static int drop(const char *name)
{
    const char *which = getenv("ONESIDED_TEST_DROP");
    if (!which || strcmp(which, name))
        return 0;
    const char *every = getenv("ONESIDED_TEST_DROP_EVERY");
    long n = every ? atol(every) : 997;
    return n > 0 && (atomic_fetch_add(&calls, 1) + 1) % n == 0;
}

static void *next(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) {
        fprintf(stderr, "drop_calls: no %s after the preload\n", name);
        abort();
    }
    return f;
}

int MPI_Accumulate(const void *oaddr, int ocount, MPI_Datatype otype, int target,
                   MPI_Aint disp, int tcount, MPI_Datatype ttype, MPI_Op op, MPI_Win win)
{
    static int (*real)(const void *, int, MPI_Datatype, int, MPI_Aint, int, MPI_Datatype, MPI_Op,
                       MPI_Win);
    if (!real)
        real = next("MPI_Accumulate");
    if (drop("MPI_Accumulate"))
        return MPI_SUCCESS;
    return real(oaddr, ocount, otype, target, disp, tcount, ttype, op, win);
}

int MPI_Put(const void *oaddr, int ocount, MPI_Datatype otype, int target, MPI_Aint disp,
            int tcount, MPI_Datatype ttype, MPI_Win win)
{
    static int (*real)(const void *, int, MPI_Datatype, int, MPI_Aint, int, MPI_Datatype,
                       MPI_Win);
    if (!real)
        real = next("MPI_Put");
    if (drop("MPI_Put"))
        return MPI_SUCCESS;
    return real(oaddr, ocount, otype, target, disp, tcount, ttype, win);
}
