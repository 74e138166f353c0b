/* MPI_Put ... MPI_Compare_and_swap, their R* and large-count forms. */
#include "os_mpi.h"

#include <pthread.h>
#include <stdlib.h>

/* Requests of R* operations are generalized requests. An operation that
 * completed inside the call gets one completed at once. A put or get to
 * another node completes later, when UCX has moved its data, and its
 * request is completed by whichever progress of the host's MPI_Test or
 * MPI_Wait (or any other call that waits) finds it done:
 *  - MPICH: an extended generalized request (MPIX_Grequest_start), whose
 *    poll function MPICH's progress calls, as for ROMIO's nonblocking I/O;
 *  - Open MPI: a plain generalized request on a list that the callback
 *    onesided registers with opal_progress walks (host_progress.c), which
 *    MPI_Test, MPI_Wait and their kin run in the thread that called them.
 *    (Open MPI's MPI_Test rechecks a request only when a progress round
 *    reports events: the walk counts the requests it completed.)
 * Where neither is there (another host, or ONESIDED_HOST_PROGRESS=0 on
 * Open MPI) the put or get completes inside the call. */
typedef struct rreq {
    os_ucx_done_t done;
    MPI_Request req;
    os_status_t st;
    /* Two owners, whichever lets go last frees it: the MPI request (its
     * free function) and the completion (the poll that calls
     * MPI_Grequest_complete). MPICH runs the free function at
     * MPI_Request_free even before the request is complete, while UCX may
     * still count the operation down in `done` and MPICH's progress may
     * still poll it. */
    _Atomic int owners;
    struct rreq *next; /* on the list of the opal_progress walk */
} rreq_t;

static void let_go(rreq_t *r)
{
    if (atomic_fetch_sub_explicit(&r->owners, 1, memory_order_acq_rel) == 1)
        free(r);
}

static int req_query(void *extra, MPI_Status *status)
{
    (void)extra;
    PMPI_Status_set_elements(status, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_UNDEFINED;
    status->MPI_TAG = MPI_UNDEFINED;
    return MPI_SUCCESS;
}

/* Called when the program frees the request (MPI_Wait, MPI_Test or
 * MPI_Request_free): by MPICH at once, by Open MPI once it is complete too. */
static int req_free(void *extra)
{
    let_go(extra);
    return MPI_SUCCESS;
}

static int req_cancel(void *extra, int complete)
{
    (void)extra;
    (void)complete;
    return MPI_SUCCESS;
}

/* The request of an operation done inside the call: the host's own request
 * of a send to MPI_PROC_NULL, complete from the start (Open MPI's osc/sm
 * returns the same for its own R* operations). Of an RMA request's status
 * MPI defines only MPI_ERROR. A generalized request, started and completed
 * here and its two callbacks run at MPI_Wait, cost about 0.1 us of an
 * MPI_Rget of 64 KB between virtual nodes (rget_overlap, Open MPI 5.0.11:
 * the call 1.85 -> 1.76 us, osc/sm 1.66). The window's own communicator:
 * MPI_COMM_SELF does not exist in a program of sessions alone. */
static int completed_request(const os_win_t *w, MPI_Request *req)
{
    return PMPI_Isend(NULL, 0, MPI_BYTE, MPI_PROC_NULL, 0, w->comm, req);
}

/* A request that gets no MPI handle: what it started still writes into r
 * (its counter, UCX's completion callback): wait for that, then free it. */
static void forget(rreq_t *r)
{
    os_status_t ignored;
    os_backoff_t b = OS_BACKOFF_INIT;
    while (r && !os_remote_req_test(&r->done, &ignored))
        os_backoff_wait(&b);
    free(r);
}

#ifdef MPICH_VERSION
/* Called by MPICH's progress in MPI_Test, MPI_Wait and their kin, in
 * whichever thread runs them; it completes the request at most once. */
static int req_poll(void *extra, MPI_Status *status)
{
    (void)status;
    rreq_t *r = extra;
    if (r->req != MPI_REQUEST_NULL && os_remote_req_test(&r->done, &r->st)) {
        MPI_Request req = r->req;
        r->req = MPI_REQUEST_NULL;
        int rc = PMPI_Grequest_complete(req);
        let_go(r); /* a wait on it holds the other owner: r stays */
        return rc;
    }
    return MPI_SUCCESS;
}

/* MPI_Wait and its kin on requests of this kind: until each is complete. */
static int req_wait(int count, void **states, double timeout, MPI_Status *status)
{
    (void)timeout;
    for (int i = 0; i < count; i++) {
        rreq_t *r = states[i];
        os_backoff_t b = OS_BACKOFF_INIT;
        while (r->req != MPI_REQUEST_NULL) {
            int rc = req_poll(r, status);
            if (rc != MPI_SUCCESS)
                return rc;
            if (r->req != MPI_REQUEST_NULL)
                os_backoff_wait(&b);
        }
    }
    return MPI_SUCCESS;
}

static bool can_defer(void)
{
    return true;
}

int os_mpi_requests_poll(void)
{
    return 0; /* MPICH polls each request itself (req_poll) */
}

static int deferred_request(rreq_t *r, MPI_Request *req)
{
    atomic_init(&r->owners, 2);
    int rc = MPIX_Grequest_start(req_query, req_free, req_cancel, req_poll, req_wait, r, req);
    if (rc != MPI_SUCCESS) {
        forget(r);
        return rc;
    }
    r->req = *req;
    return MPI_SUCCESS;
}
#else
/* The requests left in flight, for os_mpi_requests_poll. The walk only
 * tries the lock: a progress round never waits for another thread's. */
static pthread_mutex_t listed_lock = PTHREAD_MUTEX_INITIALIZER;
static rreq_t *listed;
static atomic_bool any_listed;

static bool can_defer(void)
{
    return os_mpi_host_progress_completes_requests();
}

static int deferred_request(rreq_t *r, MPI_Request *req)
{
    atomic_init(&r->owners, 2);
    int rc = PMPI_Grequest_start(req_query, req_free, req_cancel, r, req);
    if (rc != MPI_SUCCESS) {
        forget(r);
        return rc;
    }
    /* On the list only with its handle set: the walk may complete it at once. */
    r->req = *req;
    pthread_mutex_lock(&listed_lock);
    r->next = listed;
    listed = r;
    atomic_store_explicit(&any_listed, true, memory_order_release);
    pthread_mutex_unlock(&listed_lock);
    return MPI_SUCCESS;
}

int os_mpi_requests_poll(void)
{
    if (!atomic_load_explicit(&any_listed, memory_order_acquire) ||
        pthread_mutex_trylock(&listed_lock))
        return 0;
    rreq_t *done = NULL;
    for (rreq_t **p = &listed; *p;) {
        rreq_t *r = *p;
        /* (The round that called this progressed the network already.) */
        if (atomic_load_explicit(&r->done.pending, memory_order_acquire) > 0) {
            p = &r->next;
            continue;
        }
        *p = r->next;
        r->next = done;
        done = r;
    }
    atomic_store_explicit(&any_listed, listed != NULL, memory_order_relaxed);
    pthread_mutex_unlock(&listed_lock);
    /* Outside the lock: completing runs the free function of a request
     * the program freed already. */
    int n = 0;
    while (done) {
        rreq_t *r = done;
        done = r->next;
        (void)PMPI_Grequest_complete(r->req);
        let_go(r);
        n++;
    }
    return n;
}
#endif

/* A datatype's flattened form, counting in the window's statistics what
 * it took to get it. */
static os_status_t dtype(os_win_t *w, MPI_Datatype dt, os_dtype_t **out)
{
    os_dtype_how_t how;
    os_status_t st = os_mpi_dtype(dt, out, &how);
    if (how == OS_DTYPE_DECODED)
        OS_STAT(w, DTYPE_DECODED, 1);
    else if (how == OS_DTYPE_REUSED)
        OS_STAT(w, DTYPE_REUSED, 1);
    return st;
}

/* Types whose elements MPI_Compare_and_swap may compare. */
static bool cas_comparable(const os_dtype_t *t)
{
    os_class_t c = (os_class_t)t->cls;
    return c == OS_CLASS_CINT || c == OS_CLASS_FINT || c == OS_CLASS_LOGICAL ||
           c == OS_CLASS_BYTE || c == OS_CLASS_CHAR;
}

/* The fast lane of the calls that move elements of one predefined type,
 * or of a derived type that is one contiguous run of them, the same type
 * and count on both sides (counters, RandomAccess updates, queues built on
 * fetch_and_op, vectors of doubles, ghost cells): straight from the
 * arguments to the engine's fast path, without an operation record or the
 * general checks. Whatever it does not take, every error
 * included, goes the general way (issue), which checks and reports. Not
 * under MPI_THREAD_MULTIPLE, where the general path holds the window's
 * mutex. An R* form (request) takes it too: what the fast path takes is
 * complete at return (its epochs for requests are lock and lock_all), so
 * the request is the completed one (lane_done). */
static inline bool fast_lane(MPI_Win win, os_rma_kind_t kind, MPI_Op mop, MPI_Datatype dt,
                             MPI_Count count, int target, MPI_Aint tdisp, const void *origin,
                             const void *compare, void *result, bool request)
{
    os_win_t *w;
    os_dtype_t *t;
    int rop = 0;
    if (os_threaded || count < 1 || !(w = os_mpi_win(win)) || dtype(w, dt, &t))
        return false;
    if (kind == OS_RMA_CAS) {
        if (!cas_comparable(t))
            return false;
        rop = OS_OP_REPLACE;
    } else if (kind >= OS_RMA_ACC) {
        /* The commonest ops compared inline (Open MPI's handles are
         * addresses, so os_mpi_op's table walk is a load and a compare per
         * entry, behind a call). */
        rop = mop == MPI_SUM ? OS_OP_SUM : mop == MPI_NO_OP ? OS_OP_NO_OP : os_mpi_op(mop);
        if (rop < 0)
            return false;
    }
    if (kind <= OS_RMA_GET && t->predefined)
        return count == 1
                   ? os_rma_fast_elem(w, kind, t, target, tdisp, origin, request)
                   : os_rma_fast_run(w, kind, t, (size_t)count, target, tdisp, origin, request);
    if (kind == OS_RMA_ACC && count > 1 && t->predefined)
        return os_rma_fast_acc(w, (os_op_t)rop, t, (size_t)count, target, tdisp, origin,
                               request);
    if (kind >= OS_RMA_ACC && count == 1 && t->predefined &&
        (t->basic == OS_B_INT64 || t->basic == OS_B_UINT64))
        return os_rma_fast_word(w, kind, (os_op_t)rop, t, target, tdisp, origin, compare, result,
                                request);
    return os_rma_fast(w, kind, (os_op_t)rop, t, (size_t)count, target, tdisp, origin, compare,
                       result, request);
}

/* What an operation the fast lane took returns: nothing more for the plain
 * forms; for an R* form the host's completed request. Before this lane an
 * MPI_Rget of 8 bytes between virtual nodes and its MPI_Wait took 0.069 us
 * against osc/sm's 0.020 (Open MPI 5.0.11): a third of it the calloc and
 * free of the state of a request that might complete later, the rest the
 * general path. */
static inline int lane_done(MPI_Win win, MPI_Request *req)
{
    return req ? completed_request(os_mpi_win(win), req) : MPI_SUCCESS;
}

/* The operation record, every field set by hand: a designated initializer
 * clears the whole record with `rep stos`, whose start-up alone cost a
 * quarter of an 8-byte put's time in the front end (bench/fastpath_profile.py). */
static inline os_rma_op_t rma_op(os_rma_kind_t kind, int target, const void *origin,
                                 const void *compare, void *result, MPI_Aint tdisp)
{
    os_rma_op_t op;
    op.kind = (uint8_t)kind;
    op.op = 0;
    op.request = false;
    op.target = target;
    op.origin = origin;
    op.ocount = op.tcount = op.rcount = 0;
    op.otype = op.ttype = op.rtype = NULL;
    op.tdisp = tdisp;
    op.result = result;
    op.compare = compare;
    op.done = NULL;
    return op;
}

/* Common path of every operation: handles, counts, types, op, then the engine. */
static int issue(const char *call, MPI_Win win, os_rma_op_t *op, MPI_Datatype odt,
                 MPI_Datatype tdt, MPI_Datatype rdt, MPI_Op mop, MPI_Count ocount,
                 MPI_Count tcount, MPI_Count rcount, MPI_Request *req)
{
    os_status_t st = OS_OK;
    rreq_t *r = NULL;
    OS_WIN_ENTER(w, win);
    if (!w)
        return os_mpi_raise_win(win, call, OS_ERR(OS_ERR_WIN, "%s: not a window", call));
    if (ocount < 0 || tcount < 0 || rcount < 0) {
        st = OS_ERR(OS_ERR_COUNT, "%s: negative count", call);
        goto out;
    }
    if (op->target == MPI_PROC_NULL)
        goto out;
    op->ocount = (size_t)ocount;
    op->tcount = (size_t)tcount;
    op->rcount = (size_t)rcount;
    op->request = req != NULL;
    /* A counter for puts and gets that may complete after the call. */
    if (req && w->multinode && can_defer() &&
        (op->kind == OS_RMA_PUT || op->kind == OS_RMA_GET) && !(r = calloc(1, sizeof *r))) {
        st = OS_ERR(OS_ERR_NOMEM, "%s: request", call);
        goto out;
    }
    op->done = r ? &r->done : NULL;
    if (mop != MPI_OP_NULL || op->kind >= OS_RMA_ACC) {
        int o = op->kind == OS_RMA_CAS ? OS_OP_REPLACE : os_mpi_op(mop);
        if (o < 0) {
            st = OS_ERR(OS_ERR_OP, "%s: only predefined reduction operations are allowed", call);
            goto out;
        }
        op->op = (uint8_t)o;
    }
    if ((st = dtype(w, tdt, &op->ttype)))
        goto out;
    /* The origin buffer of MPI_NO_OP is ignored, datatype included. One
     * handle named twice (Fetch_and_op names it three times) is looked up once. */
    if ((odt == MPI_DATATYPE_NULL && op->op == OS_OP_NO_OP && op->kind >= OS_RMA_ACC) ||
        odt == tdt)
        op->otype = op->ttype;
    else if ((st = dtype(w, odt, &op->otype)))
        goto out;
    if (rdt == tdt)
        op->rtype = op->ttype;
    else if (rdt != MPI_DATATYPE_NULL && (st = dtype(w, rdt, &op->rtype)))
        goto out;
    if ((op->kind == OS_RMA_FOP || op->kind == OS_RMA_CAS) && !op->ttype->predefined) {
        st = OS_ERR(OS_ERR_TYPE, "%s needs a predefined datatype", call);
        goto out;
    }
    if (op->kind == OS_RMA_CAS) {
        if (!cas_comparable(op->ttype)) {
            st = OS_ERR(OS_ERR_TYPE, "%s: elements of type %s cannot be compared", call,
                        os_basic_name(op->ttype->basic));
            goto out;
        }
    }
    st = os_rma_issue(w, op);
out:
    if (st) {
        forget(r); /* what the failed call started still writes into r */
        return os_mpi_raise_win(win, call, st);
    }
    if (!req)
        return MPI_SUCCESS;
    if (r && atomic_load_explicit(&r->done.pending, memory_order_acquire) > 0) {
        OS_STAT(w, REQUEST_DEFERRED, 1);
        return deferred_request(r, req);
    }
    if (r && os_remote_req_test(&r->done, &st) && st) {
        free(r);
        return os_mpi_raise_win(win, call, st);
    }
    free(r);
    return completed_request(w, req);
}

#define PUT_LIKE(NAME, KIND, CT, ORIGIN_CONST, REQ_DECL, REQ)                                  \
    int NAME(ORIGIN_CONST void *origin_addr, CT origin_count, MPI_Datatype origin_datatype,    \
             int target_rank, MPI_Aint target_disp, CT target_count,                           \
             MPI_Datatype target_datatype, MPI_Win win REQ_DECL)                               \
    {                                                                                          \
        if (origin_count == target_count && origin_datatype == target_datatype &&              \
            fast_lane(win, KIND, MPI_OP_NULL, target_datatype, target_count, target_rank,      \
                      target_disp, origin_addr, NULL, NULL, (REQ) != NULL))                    \
            return lane_done(win, REQ);                                                        \
        os_rma_op_t op = rma_op(KIND, target_rank, origin_addr, NULL, NULL, target_disp);     \
        return issue(#NAME, win, &op, origin_datatype, target_datatype, MPI_DATATYPE_NULL,     \
                     MPI_OP_NULL, origin_count, target_count, 0, REQ);                         \
    }
#define COMMA ,
PUT_LIKE(MPI_Put, OS_RMA_PUT, int, const, , NULL)
PUT_LIKE(MPI_Put_c, OS_RMA_PUT, MPI_Count, const, , NULL)
PUT_LIKE(MPI_Get, OS_RMA_GET, int, , , NULL)
PUT_LIKE(MPI_Get_c, OS_RMA_GET, MPI_Count, , , NULL)
PUT_LIKE(MPI_Rput, OS_RMA_PUT, int, const, COMMA MPI_Request *request, request)
PUT_LIKE(MPI_Rput_c, OS_RMA_PUT, MPI_Count, const, COMMA MPI_Request *request, request)
PUT_LIKE(MPI_Rget, OS_RMA_GET, int, , COMMA MPI_Request *request, request)
PUT_LIKE(MPI_Rget_c, OS_RMA_GET, MPI_Count, , COMMA MPI_Request *request, request)

#define ACC_LIKE(NAME, CT, REQ_DECL, REQ)                                                      \
    int NAME(const void *origin_addr, CT origin_count, MPI_Datatype origin_datatype,           \
             int target_rank, MPI_Aint target_disp, CT target_count,                           \
             MPI_Datatype target_datatype, MPI_Op mpi_op, MPI_Win win REQ_DECL)                \
    {                                                                                          \
        if (origin_count == target_count && origin_datatype == target_datatype &&              \
            fast_lane(win, OS_RMA_ACC, mpi_op, target_datatype, target_count, target_rank,     \
                      target_disp, origin_addr, NULL, NULL, (REQ) != NULL))                    \
            return lane_done(win, REQ);                                                        \
        os_rma_op_t op = rma_op(OS_RMA_ACC, target_rank, origin_addr, NULL, NULL, target_disp); \
        return issue(#NAME, win, &op, origin_datatype, target_datatype, MPI_DATATYPE_NULL,     \
                     mpi_op, origin_count, target_count, 0, REQ);                              \
    }
ACC_LIKE(MPI_Accumulate, int, , NULL)
ACC_LIKE(MPI_Accumulate_c, MPI_Count, , NULL)
ACC_LIKE(MPI_Raccumulate, int, COMMA MPI_Request *request, request)
ACC_LIKE(MPI_Raccumulate_c, MPI_Count, COMMA MPI_Request *request, request)

#define GET_ACC_LIKE(NAME, CT, REQ_DECL, REQ)                                                  \
    int NAME(const void *origin_addr, CT origin_count, MPI_Datatype origin_datatype,           \
             void *result_addr, CT result_count, MPI_Datatype result_datatype,                 \
             int target_rank, MPI_Aint target_disp, CT target_count,                           \
             MPI_Datatype target_datatype, MPI_Op mpi_op, MPI_Win win REQ_DECL)                \
    {                                                                                          \
        os_rma_op_t op = rma_op(OS_RMA_GET_ACC, target_rank, origin_addr, NULL, result_addr,  \
                                target_disp);                                                  \
        return issue(#NAME, win, &op, origin_datatype, target_datatype, result_datatype,       \
                     mpi_op, origin_count, target_count, result_count, REQ);                   \
    }
GET_ACC_LIKE(MPI_Get_accumulate, int, , NULL)
GET_ACC_LIKE(MPI_Get_accumulate_c, MPI_Count, , NULL)
GET_ACC_LIKE(MPI_Rget_accumulate, int, COMMA MPI_Request *request, request)
GET_ACC_LIKE(MPI_Rget_accumulate_c, MPI_Count, COMMA MPI_Request *request, request)

int MPI_Fetch_and_op(const void *origin_addr, void *result_addr, MPI_Datatype datatype,
                     int target_rank, MPI_Aint target_disp, MPI_Op mpi_op, MPI_Win win)
{
    if (fast_lane(win, OS_RMA_FOP, mpi_op, datatype, 1, target_rank, target_disp, origin_addr, NULL,
                  result_addr, false))
        return MPI_SUCCESS;
    os_rma_op_t op = rma_op(OS_RMA_FOP, target_rank, origin_addr, NULL, result_addr, target_disp);
    return issue("MPI_Fetch_and_op", win, &op, datatype, datatype, datatype, mpi_op, 1, 1, 1,
                 NULL);
}

int MPI_Compare_and_swap(const void *origin_addr, const void *compare_addr, void *result_addr,
                         MPI_Datatype datatype, int target_rank, MPI_Aint target_disp,
                         MPI_Win win)
{
    if (fast_lane(win, OS_RMA_CAS, MPI_OP_NULL, datatype, 1, target_rank, target_disp, origin_addr,
                  compare_addr, result_addr, false))
        return MPI_SUCCESS;
    os_rma_op_t op = rma_op(OS_RMA_CAS, target_rank, origin_addr, compare_addr, result_addr,
                            target_disp);
    return issue("MPI_Compare_and_swap", win, &op, datatype, datatype, datatype, MPI_OP_NULL,
                 1, 1, 1, NULL);
}
