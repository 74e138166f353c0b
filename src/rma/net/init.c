/* Starting the network path at MPI_Init: the layer that moves messages
 * (forward.c) learns where to hand what arrives: requests to the request
 * server (serve.c), replies to the origin's reply handler (request.c). The
 * only file that knows both ends, so that neither calls the other. And
 * ending it at MPI_Finalize: what it keeps across windows. */
#include "os_net.h"

os_status_t os_net_init(int nprocs, int me, const int *server_of)
{
    static const os_fwd_handlers_t up = {
        .request = os_serve_request,
        .reply = os_req_on_reply,
        .serve_for = os_serve_for,
        .retry = os_serve_retry,
    };
    return os_fwd_setup(nprocs, me, server_of, &up);
}

void os_net_finalize(void)
{
    os_data_key_finalize();
    os_lockword_finalize();
}
