/* The host MPI's own teardown, made to end.
 *
 * MPICH 4.0's ch4:ucx closes every endpoint inside MPI_Finalize, after a PMI
 * barrier, with ucp_disconnect_nb (a flush-mode close), and progresses until
 * every close has completed. Over TCP a flush-mode close toward a peer whose
 * side of the connection is already closed (the peer finished its own
 * closes first) opens a new connection and waits for that peer's answer;
 * the peer, in the next PMI barrier, never progresses again, and the job
 * never ends. Native MPICH jobs hang the same way as soon as their
 * processes exchanged anything across hosts (a few collectives suffice);
 * onesided's own MPI_Init collectives exposed every onesided job.
 *
 * The fix: while the host MPI is inside MPI_Finalize, this library's
 * ucp_disconnect_nb (it comes before libucp in the symbol search order,
 * linked first or preloaded) leaves the endpoint open and reports the close
 * done; ucp_worker_destroy, which MPICH calls right after, releases the
 * worker's endpoints locally without asking any peer. Nothing is lost: the
 * PMI barrier before the closes means every process has entered
 * MPI_Finalize, so every message a process waits for has been received
 * (MPI requires matching receives to complete before it). Outside
 * MPI_Finalize (MPI_Comm_disconnect, say) the host's call runs unchanged.
 * ONESIDED_HOST_FINALIZE_FLUSH=1 restores the flush-mode close. */
#define _GNU_SOURCE
#include "os_mpi.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <ucp/api/ucp.h>

static atomic_bool host_finalizing;
static atomic_ulong closes_left_to_worker;

void os_mpi_host_finalize_begin(void)
{
    atomic_store(&host_finalizing, true);
}

ucs_status_ptr_t ucp_disconnect_nb(ucp_ep_h ep)
{
    static ucs_status_ptr_t (*host_disconnect)(ucp_ep_h);
    if (atomic_load(&host_finalizing) && !os_config.host_finalize_flush) {
        if (atomic_fetch_add(&closes_left_to_worker, 1) == 0)
            OS_DEBUG("MPI_Finalize: the host MPI's UCX endpoints are released by its "
                     "ucp_worker_destroy, not closed one by one (ONESIDED_HOST_FINALIZE_FLUSH)");
        return UCS_STATUS_PTR(UCS_OK);
    }
    if (!host_disconnect)
        host_disconnect = (ucs_status_ptr_t(*)(ucp_ep_h))dlsym(RTLD_NEXT, "ucp_disconnect_nb");
    /* libucp is loaded whenever the host MPI calls this, so the lookup succeeds */
    return host_disconnect(ep);
}
