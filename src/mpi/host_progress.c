/* The host MPI's waiting, made to serve other nodes' requests.
 *
 * A target that waits inside the host MPI (MPI_Barrier, MPI_Recv, MPI_Wait)
 * polls the host's own network in a loop; a request of another node for
 * onesided's worker (an accumulate, a lock-manager message) was served only
 * when onesided's progress thread woke up and was scheduled. On a machine
 * whose cores all run busy-polling processes that wake-up is what made an
 * 8-byte accumulate across hosts cost several times native MPICH's, whose
 * target answers from inside that same poll loop. Here the host's loop
 * progresses onesided's worker too:
 *
 *  - MPICH ch4:ucx (and Open MPI's pml ucx) poll with ucp_worker_progress on
 *    their own worker. This library comes before libucp in the symbol
 *    search order (linked first or preloaded), so its ucp_worker_progress
 *    below is the one they call: it progresses onesided's worker, then the
 *    host's. onesided's own calls on its worker reach libucp unchanged.
 *  - Open MPI progresses every transport through opal_progress, which runs
 *    the callbacks registered with opal_progress_register (libopen-pal's
 *    public component interface): onesided registers one.
 *
 * Either way each round of the host's poll also progresses onesided's
 * worker: a non-blocking epoll_wait over TCP, less over shared memory.
 * Measured, that costs the host's own operations nothing visible (native
 * 8-byte put+flush across hosts 24.6-35.6 us with a 2 us throttle, 26.0-28.5
 * without), while a throttle of 2 us (0.5 us) made a put to MPI_Win_create
 * memory between virtual nodes 2.4-2.6 us (1.9-2.1) instead of 1.4.
 * ONESIDED_HOST_PROGRESS=0 turns it off; the counter am_served_in_host says
 * how many requests were served this way.
 *
 * The same rounds serve requests of the node's own processes for windows
 * over memory they reach only by CMA (node_request.c), on one node too,
 * where onesided has no worker: MPICH ch4:ucx polls its worker there as
 * well, and Open MPI runs the opal_progress callbacks. */
#define _GNU_SOURCE
#include "os_mpi.h"
#include "../transport/ucx/os_ucx.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <ucp/api/ucp.h>

typedef unsigned (*worker_progress_fn)(ucp_worker_h);
static _Atomic(worker_progress_fn) libucp_progress;
static atomic_bool enabled, worker_enabled;

/* One round of the host's loop: node-mates' requests (node_request.c),
 * then one progress of onesided's worker (never nested:
 * os_ucx_progress_for_host does nothing inside a handler). */
static int poll_for_host(void)
{
    if (!atomic_load_explicit(&enabled, memory_order_relaxed))
        return 0;
    os_nreq_poll();
    if (!atomic_load_explicit(&worker_enabled, memory_order_relaxed))
        return 0;
    return (int)os_ucx_progress_for_host();
}

static worker_progress_fn find_libucp_progress(void)
{
    worker_progress_fn fn = atomic_load_explicit(&libucp_progress, memory_order_acquire);
    if (fn)
        return fn;
    /* RTLD_NEXT: the definition after this library's, libucp's. */
    fn = (worker_progress_fn)dlsym(RTLD_NEXT, "ucp_worker_progress");
    if (!fn) {
        void *ucp = dlopen("libucp.so.0", RTLD_LAZY | RTLD_NOLOAD);
        fn = ucp ? (worker_progress_fn)dlsym(ucp, "ucp_worker_progress") : NULL;
    }
    if (!fn) {
        /* Unreachable while libucp is linked (this library needs it); a
         * worker exists only if it is. */
        os_log(1, "ucp_worker_progress: libucp's definition not found");
        abort();
    }
    atomic_store_explicit(&libucp_progress, fn, memory_order_release);
    return fn;
}

unsigned ucp_worker_progress(ucp_worker_h worker)
{
    worker_progress_fn progress = find_libucp_progress();
    if (!os_ucx_is_own_worker(worker))
        (void)poll_for_host();
    return progress(worker);
}

/* Open MPI: opal_progress_register(int (*)(void)), looked up at run time so
 * that one binary serves both hosts. */
typedef int (*opal_callback_fn)(void);
static int (*opal_unregister)(opal_callback_fn);
static atomic_bool opal_registered;

static int opal_callback(void)
{
    /* Then R* requests whose operations this round (or an earlier one)
     * completed (rma.c): counted, so that MPI_Test looks at them again. */
    return poll_for_host() + os_mpi_requests_poll();
}

bool os_mpi_host_progress_completes_requests(void)
{
    return atomic_load_explicit(&opal_registered, memory_order_acquire);
}

void os_mpi_host_progress_start(void)
{
    if (!os_config.host_progress)
        return;
    atomic_store(&worker_enabled, os_ucx_active());
    atomic_store(&enabled, true);
    int (*opal_register)(opal_callback_fn) =
        (int (*)(opal_callback_fn))dlsym(RTLD_DEFAULT, "opal_progress_register");
    opal_unregister = (int (*)(opal_callback_fn))dlsym(RTLD_DEFAULT, "opal_progress_unregister");
    if (opal_register && opal_unregister && opal_register(opal_callback) == 0)
        atomic_store_explicit(&opal_registered, true, memory_order_release);
    OS_DEBUG("the host MPI's waiting calls progress onesided's worker (%s)",
             opal_registered ? "opal_progress callback and ucp_worker_progress"
                             : "ucp_worker_progress");
}

/* Before onesided's worker goes away. */
void os_mpi_host_progress_stop(void)
{
    atomic_store(&worker_enabled, false);
    atomic_store(&enabled, false);
    if (atomic_exchange(&opal_registered, false))
        (void)opal_unregister(opal_callback);
}
