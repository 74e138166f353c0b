/* Errors: status -> MPI class, and delivery through the object's handler. */
#include "os_mpi.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

int os_mpi_error_class(os_status_t st)
{
    switch (st) {
    case OS_OK: return MPI_SUCCESS;
    case OS_ERR_ARG: return MPI_ERR_ARG;
    case OS_ERR_COMM: return MPI_ERR_COMM;
    case OS_ERR_RANK: return MPI_ERR_RANK;
    case OS_ERR_COUNT: return MPI_ERR_COUNT;
    case OS_ERR_TYPE: return MPI_ERR_TYPE;
    case OS_ERR_OP: return MPI_ERR_OP;
    case OS_ERR_DISP: return MPI_ERR_DISP;
    case OS_ERR_SIZE: return MPI_ERR_SIZE;
    case OS_ERR_INFO: return MPI_ERR_INFO_VALUE;
    case OS_ERR_ASSERT: return MPI_ERR_ASSERT;
    case OS_ERR_LOCKTYPE: return MPI_ERR_LOCKTYPE;
    case OS_ERR_WIN: return MPI_ERR_WIN;
    case OS_ERR_RANGE: return MPI_ERR_RMA_RANGE;
    case OS_ERR_TRUNCATE: return MPI_ERR_TRUNCATE;
    case OS_ERR_SYNC: return MPI_ERR_RMA_SYNC;
    case OS_ERR_CONFLICT: return MPI_ERR_RMA_CONFLICT;
    case OS_ERR_ATTACH: return MPI_ERR_RMA_ATTACH;
    case OS_ERR_SHARED: return MPI_ERR_RMA_SHARED;
    case OS_ERR_BASE: return MPI_ERR_BASE;
    case OS_ERR_FLAVOR: return MPI_ERR_RMA_FLAVOR;
    case OS_ERR_NOMEM: return MPI_ERR_NO_MEM;
    case OS_ERR_UNSUPPORTED: return MPI_ERR_UNSUPPORTED_OPERATION;
    default: return MPI_ERR_OTHER;
    }
}

static const char *class_name(int cls)
{
    static char buf[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (PMPI_Error_string(cls, buf, &len) != MPI_SUCCESS)
        snprintf(buf, sizeof buf, "error class %d", cls);
    return buf;
}

static bool is_fatal(MPI_Errhandler eh)
{
#ifdef MPI_ERRORS_ABORT
    if (eh == MPI_ERRORS_ABORT)
        return true;
#endif
    return eh == MPI_ERRORS_ARE_FATAL;
}

/* The job ends, not only the object's communicator: MPICH's MPI_Abort on a
 * communicator other than MPI_COMM_WORLD notifies that communicator's
 * processes through its progress engine, so processes waiting in onesided's
 * own loops (a fence or lock in shared memory) never hear of it and the job
 * hangs until the launcher's timeout. MPICH's own fatal handler aborts
 * MPI_COMM_WORLD too, through the process manager. */
static void die(const char *call, int cls)
{
    int rank = -1;
    if (os_world != MPI_COMM_NULL)
        PMPI_Comm_rank(os_world, &rank);
    fprintf(stderr, "onesided: fatal error in %s on rank %d: %s\n  %s\n", call, rank,
            os_error_message(), class_name(cls));
    fflush(stderr);
    /* Hydra kills the job as soon as the abort reaches it, and output still
     * in its forwarding pipes is lost with it (MPICH's own abort line too):
     * give the launcher a moment to carry the message out. */
    usleep(200000);
    PMPI_Abort(os_world != MPI_COMM_NULL ? os_world : MPI_COMM_WORLD, cls);
}

int os_mpi_raise_win(MPI_Win handle, const char *call, os_status_t st)
{
    int cls = os_mpi_error_class(st);
    os_win_t *w = os_mpi_win(handle);
    if (!w)
        return os_mpi_raise_comm(MPI_COMM_NULL, call, st);
    MPI_Errhandler eh;
    PMPI_Win_get_errhandler(handle, &eh);
    bool fatal = is_fatal(eh), returns = eh == MPI_ERRORS_RETURN;
    PMPI_Errhandler_free(&eh);
    if (fatal)
        die(call, cls);
    /* MPI_ERRORS_RETURN calls nothing, so neither do we: Intel MPI 2021.19's
     * MPI-5 ABI library ends the job in MPI_Win_call_errhandler even then. */
    if (!returns)
        PMPI_Win_call_errhandler(handle, cls);
    return cls;
}

int os_mpi_raise_comm(MPI_Comm comm, const char *call, os_status_t st)
{
    int cls = os_mpi_error_class(st);
    MPI_Errhandler eh;
    if (comm == MPI_COMM_NULL) /* no object: the job's handler (MPI_COMM_WORLD's after MPI_Init) */
        comm = os_world != MPI_COMM_NULL ? os_world : MPI_COMM_WORLD;
    PMPI_Comm_get_errhandler(comm, &eh);
    bool fatal = is_fatal(eh), returns = eh == MPI_ERRORS_RETURN;
    PMPI_Errhandler_free(&eh);
    if (fatal)
        die(call, cls);
    if (!returns) /* as for windows above */
        PMPI_Comm_call_errhandler(comm, cls);
    return cls;
}
