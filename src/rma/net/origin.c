/*
 * Between nodes: operations, synchronization and the lock manager for
 * targets on another (real or virtual) node, over the UCX transport.
 *
 *   put, get        RDMA on the target's registered window memory; complete
 *                   at the next flush (dynamic windows: by request, below)
 *   accumulates,    one element of 4 or 8 bytes: one network atomic, without
 *   fetch_and_op,   the target (direct accumulate, paper 001; below); more
 *   compare_and_swap on memory UCX maps here (another virtual node of this
 *                   host): this process's CPU atomics on the mapping;
 *                   otherwise a request carrying the target runs and the
 *                   origin data, which the target applies to its own memory
 *                   with the same CPU atomics or mutex its node's origins
 *                   use, so every origin stays atomic with every other
 *   lock/unlock     three designs (ONESIDED_LOCK; paper 000), for every
 *                   locker of a window spanning nodes, the node's own too:
 *                   manager: a request to the target's lock manager, which
 *                   takes the target's CPU ticket lock on the origin's behalf
 *                   and grants it by reply (an epoch of one short operation
 *                   sends it with the lock request: lock piggybacking, paper
 *                   003; below); network: network atomics on the
 *                   target's lock word (os_netlock.h); hybrid: the node's
 *                   lockers use the CPU lock and the others the network word,
 *                   and the manager moves the lock between them without ever
 *                   making a reader wait for a reader (os_netlock.h)
 *   post, complete  one message each (complete waits for its reply), counted
 *                   into the same shared counters that origins of the
 *                   target's own node update
 *   fence           operations flushed, then one allreduce (and, when some
 *                   process queued operations, those and one barrier; sync.c)
 *
 * This file is the origin's operations and their completion (flush,
 * complete); lock epochs are lock.c, requests and replies request.c, a
 * window's keys window.c, and the target serves requests in serve.c
 * (os_net.h lists the layers and the protocol between them).
 */
#include "os_net.h"

#include <stdlib.h>
#include <string.h>

/* RDMA between the origin's runs and the target's, pairwise. On memory
 * UCX maps here (another virtual node of this host: UCX allocated it and
 * its shared-memory transport maps it, ucp_rkey_ptr), this CPU copies the
 * runs itself, as on its own node's windows: UCX 1.13 copies the same
 * bytes, but with its own copy, which meets glibc's slow distance (os_copy
 * in os_util.h): a 256 KB get between virtual nodes into a malloc'd buffer
 * took 150-160 us through UCX and 18.5 here, 64 KB 42 and 5.3. The copy is
 * complete on return (a put remotely, a get's data here), which every
 * completion rule (flush, MPI_Wait on an R* request) allows. */
static os_status_t rdma(os_win_t *w, const os_rma_op_t *op, char *taddr)
{
    os_peer_t *p = &w->peers[op->target];
    const bool put = op->kind == OS_RMA_PUT;
    const ptrdiff_t shift = p->ucx_map ? p->ucx_map - p->base : 0;
    os_cursor_t tc, lc;
    char *pt = NULL, *pl = NULL;
    size_t lt = 0, ll = 0;
    os_status_t st = OS_OK;
    /* The epoch's synchronization (a lock word, a post, a fence's
     * allreduce) came before: reads of the target's memory stay after it. */
    if (p->ucx_map && !put)
        atomic_thread_fence(memory_order_acquire);
    os_cursor_init(&tc, op->ttype, taddr, op->tcount);
    os_cursor_init(&lc, op->otype, op->origin, op->ocount);
    while (!st) {
        if (!lt)
            lt = os_cursor_next(&tc, SIZE_MAX, &pt);
        if (!ll)
            ll = os_cursor_next(&lc, SIZE_MAX, &pl);
        if (!lt || !ll)
            break;
        size_t n = lt < ll ? lt : ll;
        if (p->ucx_map && put)
            os_copy(pt + shift, pl, n);
        else if (p->ucx_map)
            os_copy(pl, pt + shift, n);
        else if (put)
            st = os_ucx_put(p->rdma_world, pl, n, (uint64_t)(uintptr_t)pt, p->rkey, op->done);
        else
            st = os_ucx_get(p->rdma_world, pl, n, (uint64_t)(uintptr_t)pt, p->rkey, op->done);
        pt += n;
        pl += n;
        lt -= n;
        ll -= n;
    }
    if (p->ucx_map) {
        /* The put's stores before whatever ends the epoch (a release of
         * the lock word, a complete, a fence), which other paths order
         * behind a UCX flush. */
        if (put)
            atomic_thread_fence(memory_order_release);
        OS_STAT(w, REMOTE_MAPPED, 1);
    } else {
        w->dirty[op->target] |= put && !op->done ? OS_DIRTY_PUT : OS_DIRTY_WAIT;
    }
    if (p->zero_copy)
        OS_STAT(w, REMOTE_RDMA, 1);
    else
        OS_STAT(w, FALLBACK_REMOTE_EMULATED, 1);
    return st;
}

/* A put or get of at most remote_request_max bytes, to a target UCX
 * reaches over TCP alone, travels as a request. There UCX's put is a
 * message the target's worker applies, and the flush that completes it
 * another round trip; its get is a request
 * and a reply, then the flush. A request of ours is one message each way:
 * the put is acknowledged (the next flush waits for the acknowledgement), the
 * get's reply brings the bytes. Across two hosts that was 17 us against
 * UCX's 31 for an 8-byte put or get with its flush. Either way the target's
 * CPU does the work, so nothing one-sided is given up; on RDMA hardware and
 * shared memory UCX needs no help from the target and keeps them. Large
 * puts gain most: UCX streams its TCP puts at a third of what its active
 * messages reach (remote_request_max bounds the data buffered at each end).
 * Gets go so up to remote_get_request_max bytes (64 KiB), and larger
 * contiguous ones in requests of that size, all in flight at once:
 *  - UCX sends a reply of more than 19.5 KB over TCP by rendezvous, which
 *    the origin completes with gets the target's worker has to serve: one
 *    reply of 128 KB or 1 MB ran at 0.7-1.1 of native's get bandwidth in
 *    about every other run (the whole run slow or fast, with or without
 *    the progress threads), while in 64 KB requests gets of 32 KB-1 MB
 *    ran at 1.6-2.8x native in 5 runs of 5 (32 KB requests: 1.6-2.4x, 16 KB:
 *    1.0-1.6x);
 *  - an MPI_Rget by request is answered inside the call, which would take
 *    away the overlap a program calls MPI_Rget for: R* gets go so only up
 *    to RGET_REQUEST_MAX (one eager message of UCX's), larger ones by
 *    UCX's get, which completes at MPI_Test or MPI_Wait.
 * Dynamic windows take the request path of their own. */
enum { RGET_REQUEST_MAX = 8192 };

/* The largest get that goes as one request. */
static size_t get_request_max(const os_win_t *w, const os_rma_op_t *op)
{
    size_t max = (size_t)w->cfg.remote_get_request_max;
    if (max > (size_t)w->cfg.remote_request_max)
        max = (size_t)w->cfg.remote_request_max;
    return op->request && max > RGET_REQUEST_MAX ? RGET_REQUEST_MAX : max;
}

/* The largest put that goes in requests (one, or chunks of
 * remote_request_max). Above it UCX's own put: on UCX 1.20 that streams at
 * native MPI's rate over TCP, where requests, each buffered once at both
 * ends and applied by the target's thread, moved bursts of 256 KB and 1 MB
 * puts across two hosts at 0.66-0.75 of it (MPICH 5.0.2, 4 jobs against 3
 * taken in turn); UCX 1.13's put streamed at a third. Up to 64 KiB a
 * request's one round trip keeps its lead in latency (32 KB with flush: 42
 * against 73 us). What it costs: a PSCW epoch's complete waits for UCX's
 * flush of such a put before its own request goes (os_remote_complete). */
enum { AUTO_PUT_REQUEST_MAX = 65536 };

static size_t put_request_max(const os_win_t *w)
{
    const int max = w->cfg.remote_put_request_max;
    if (max >= 0)
        return (size_t)max;
    return os_ucx_tcp_puts_stream() ? AUTO_PUT_REQUEST_MAX : SIZE_MAX;
}

/* A put of at least this many bytes while a request to its target is
 * still unanswered (a burst) goes by UCX's put, even where it would go as a
 * request alone. A request's data is copied out of UCX's receive buffer by
 * the target's thread and answered by a message of its own, where UCX's
 * put (on UCX 1.20 over TCP) lands from the socket into the window: bursts
 * of 32 KB puts across two hosts ran at 0.80-0.86 of MPICH 5.0.2's rate by
 * request, 0.93-1.02 with this (rma_sweep, 3 jobs each, every epoch kind);
 * one put with its flush keeps the request's single round trip (0.76-0.85
 * of MPICH's time either way). Below it held requests batch (request.c):
 * bursts of 4 KB puts ran at 2x. Not MPI_Rput: by UCX's put its request
 * would complete only with a flush of the whole target. */
enum { BURST_PUT_MIN = 16384 };

static bool transfer_by_request(os_win_t *w, const os_rma_op_t *op)
{
    const size_t bytes = op->tcount * op->ttype->size;
    if (!w->peers[op->target].tcp_only || bytes > (size_t)w->cfg.remote_request_max ||
        (op->kind == OS_RMA_GET && bytes > get_request_max(w, op)) ||
        (op->kind == OS_RMA_PUT && bytes > put_request_max(w)))
        return false;
    if (op->kind == OS_RMA_PUT && bytes >= BURST_PUT_MIN && !op->request &&
        os_ucx_tcp_puts_stream() &&
        atomic_load_explicit(&w->acks[op->target], memory_order_relaxed) > 0) {
        OS_STAT(w, REMOTE_BURST_PUTS, 1);
        return false;
    }
    OS_STAT(w, REMOTE_SMALL_REQUESTS, 1);
    return true;
}

/* A larger put or get to such a target, contiguous on both sides (the
 * common case of large transfers), goes in requests of the largest size
 * that goes as one: puts stream at the active messages' rate, gets' replies
 * stay below a rendezvous of many fragments (above), and the data buffered
 * at each end stays bounded. Not the R* forms (a request counts one
 * operation). */
static size_t chunk_max(const os_win_t *w, const os_rma_op_t *op)
{
    return op->kind == OS_RMA_GET ? get_request_max(w, op) : (size_t)w->cfg.remote_request_max;
}

static bool in_chunks(const os_win_t *w, const os_rma_op_t *op)
{
    const size_t max = chunk_max(w, op);
    const size_t bytes = op->tcount * op->ttype->size;
    return (op->kind == OS_RMA_GET || (op->kind == OS_RMA_PUT && bytes <= put_request_max(w))) &&
           w->peers[op->target].tcp_only && max > 0 && !op->request && op->otype->contig &&
           op->ttype->contig && bytes > max;
}

static os_status_t execute_in_chunks(os_win_t *w, const os_rma_op_t *op, char *taddr)
{
    const size_t bytes = op->tcount * op->ttype->size, max = chunk_max(w, op);
    const char *origin = (const char *)op->origin + op->otype->true_lb;
    char *target = taddr + op->ttype->true_lb;
    os_status_t st = OS_OK;
    for (size_t off = 0; off < bytes && !st; off += max) {
        os_rma_op_t chunk = *op;
        chunk.origin = origin + off;
        chunk.otype = chunk.ttype = os_dtype_byte();
        chunk.ocount = chunk.tcount = bytes - off < max ? bytes - off : max;
        st = os_remote_execute(w, &chunk, target + off);
    }
    return st;
}

/* The same target: an accumulate-kind call goes as a request too, not as
 * the network atomic UCX would emulate there (one round trip either way, and
 * the same CPU atomics at the target). A request need not be waited for in
 * the call: a plain accumulate is acknowledged at the next flush, a
 * fetching one returns its result with its reply (MPI makes the result
 * defined only at the end of the epoch or a flush), and both are held to
 * leave with the target's next requests (request.c). UCX's fetching atomic
 * waits for its answer inside the call, so a burst of them took a round
 * trip each: bursts of 8-byte fetch_and_op and compare_and_swap under
 * lock_all or fence across two hosts ran at 0.44-0.49 of MPICH's rate
 * (MPICH 5.0.2 and 4.0.2), by held requests at 11-14x. One of them with
 * its flush costs 0.93-0.97 of MPICH's time by request, 0.86-0.94 by UCX's
 * atomic (the same jobs). Where requests are not held (remote_batch_bytes
 * 0), fetching ones go so only where the epoch ends with a request of its
 * own that follows them (MPI_Win_complete, MPI_Win_unlock): an epoch of one
 * fetch_and_op is then one round trip instead of two. Not on another
 * route: its hops cost more than the one round trip of UCX's atomic, which
 * goes direct (puts and gets do travel the route: a strided one is one
 * request there, against a UCX put per block). */
static bool atomic_by_request(os_win_t *w, const os_rma_op_t *op)
{
    if (!w->peers[op->target].tcp_only || w->cfg.remote_request_max <= 0 ||
        w->route != OS_ROUTE_DIRECT)
        return false;
    if (op->kind != OS_RMA_ACC && w->access != OS_ACCESS_PSCW && w->access != OS_ACCESS_LOCK &&
        w->cfg.remote_batch_bytes <= 0)
        return false;
    OS_STAT(w, REMOTE_SMALL_REQUESTS, 1);
    return true;
}

/* ------------------------------------------------------ direct accumulate */

/* The network atomic that carries out a one-element accumulate (paper 001),
 * or -1 when the target must apply it. Why one network atomic is atomic with
 * every other accumulate on that element: UCX runs its atomics in CPU mode,
 * so they are coherent with the CPU atomics by which the target's own node
 * and the target's request server update every aligned element of 4 or 8
 * bytes, and a window with direct accumulates has no bulk accumulates (the
 * only plain stores; window.c) unless every process takes part in their
 * handshake, which an atomic UCX does rather than this CPU cannot
 * (acc_host, net/window.c). What is left out: targets whose memory
 * takes the accumulate mutex (some process of their node reaches it by
 * CMA, which has no atomics), dynamic windows (no keys), ops with no network
 * atomic, elements of other sizes or misaligned, and buffers of more than
 * one block. */
static int direct_amo(const os_win_t *w, const os_rma_op_t *op, const char *addr)
{
    const os_dtype_t *tt = op->ttype;
    const size_t e = tt->basic_size;
    if (!w->cfg.acc_direct || w->peers[op->target].acc_mutex_always || !w->peers[op->target].rkey)
        return -1;
    if ((e != 4 && e != 8) || op->tcount * tt->size != e || tt->nblocks != 1 ||
        ((uintptr_t)addr & (e - 1)))
        return -1;
    if (op->otype && op->otype->size && op->otype->nblocks != 1)
        return -1;
    if (op->kind != OS_RMA_ACC && op->rtype->nblocks != 1)
        return -1;
    const os_basic_t b = (os_basic_t)tt->basic;
    const bool integer = b == OS_B_INT32 || b == OS_B_INT64 || b == OS_B_UINT32 || b == OS_B_UINT64;
    if (op->kind == OS_RMA_CAS)
        return integer || b == OS_B_LOGICAL ? OS_UCX_AMO_CSWAP : -1;
    switch ((os_op_t)op->op) {
    case OS_OP_SUM: return integer ? OS_UCX_AMO_ADD : -1;
    case OS_OP_BAND: return integer ? OS_UCX_AMO_AND : -1;
    case OS_OP_BOR: return integer ? OS_UCX_AMO_OR : -1;
    case OS_OP_BXOR: return integer ? OS_UCX_AMO_XOR : -1;
    /* Bit patterns: any element type of one 4- or 8-byte word. */
    case OS_OP_REPLACE:
        return integer || b == OS_B_FLOAT || b == OS_B_DOUBLE || b == OS_B_LOGICAL
                   ? OS_UCX_AMO_SWAP : -1;
    case OS_OP_NO_OP: /* an atomic read: add zero */
        return integer || b == OS_B_FLOAT || b == OS_B_DOUBLE || b == OS_B_LOGICAL
                   ? OS_UCX_AMO_ADD : -1;
    default:
        return -1;
    }
}

bool os_remote_acc_one_sided(const os_win_t *w, const os_rma_op_t *op, const char *taddr)
{
    const char *addr = op->ttype->nblocks ? taddr + op->ttype->blocks[0].disp : taddr;
    return w->flavor != OS_FLAVOR_DYNAMIC && w->peers[op->target].zero_copy &&
           w->lock_how[op->target] != OS_HOLD_DEFERRED && direct_amo(w, op, addr) >= 0;
}

static uint64_t load_word(const void *p, size_t e)
{
    if (e == 4) {
        uint32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static void store_word(void *p, uint64_t v, size_t e)
{
    if (e == 4) {
        uint32_t x = (uint32_t)v;
        memcpy(p, &x, 4);
    } else {
        memcpy(p, &v, 8);
    }
}

static os_status_t direct_acc(os_win_t *w, const os_rma_op_t *op, int amo, const char *addr)
{
    const size_t e = op->ttype->basic_size;
    uint64_t value = 0, old = 0;
    if (op->op != OS_OP_NO_OP || op->kind == OS_RMA_CAS)
        value = load_word((const char *)op->origin + op->otype->blocks[0].disp, e);
    if (op->kind == OS_RMA_CAS)
        old = load_word(op->compare, e);
    /* Accumulates of one origin on one location apply in order (MPI's
     * default accumulate_ordering): those sent before as requests first. */
    os_req_await_acks(w, op->target);
    const os_peer_t *p = &w->peers[op->target];
    if (p->ucx_map) {
        /* The same atomic as this process's CPU atomic on the mapping,
         * inside the bulk handshake where this process joined it. */
        if (w->acc_host)
            os_acc_atomic_enter(w, op->target);
        os_ucx_mapped_atomic((char *)addr + (p->ucx_map - p->base), amo, e, value, &old);
        if (w->acc_host)
            os_acc_atomic_exit(w);
        OS_STAT(w, ACC_MAPPED, 1);
    } else {
        os_status_t st = os_ucx_atomic(p->rdma_world, amo, e, value, &old,
                                       (uint64_t)(uintptr_t)addr, p->rkey);
        if (st)
            return st;
    }
    if (op->kind != OS_RMA_ACC)
        store_word((char *)op->result + op->rtype->blocks[0].disp, old, e);
    OS_STAT(w, ACC_DIRECT, 1);
    if (!w->peers[op->target].zero_copy)
        OS_STAT(w, FALLBACK_REMOTE_EMULATED, 1);
    return OS_OK;
}

/* An accumulate of several elements on memory UCX maps here (another
 * virtual node of this host: UCX allocated it, and its shared-memory
 * transport maps it, ucp_rkey_ptr): applied by this process's CPU atomics,
 * one per element, exactly as the target's request server would apply it
 * (os_acc_try_apply), instead of sending the data over to be applied. The
 * conditions are those of the direct accumulate: every element of 1, 2, 4
 * or 8 bytes and aligned (else the target's mutex, which only its node
 * reaches, would be needed: a request), a window with direct accumulates
 * (whose bulk accumulates, where there are any, this process's take part
 * in: acc_host), not under a deferred lock. *done is false, with
 * nothing done, when it does not apply. */
static os_status_t acc_in_place(os_win_t *w, const os_rma_op_t *op, char *taddr, bool *done)
{
    const os_peer_t *p = &w->peers[op->target];
    const os_dtype_t *tt = op->ttype;
    const size_t esize = tt->basic_size, bytes = op->tcount * tt->size;
    const bool fetch = op->kind != OS_RMA_ACC;
    const os_op_t rop = (os_op_t)op->op;
    const char *odata = NULL;
    char *obuf = NULL, *fbuf = NULL;
    size_t pos = 0;
    os_status_t st = OS_OK;

    *done = false;
    if (!p->ucx_map || !w->cfg.acc_direct || p->acc_mutex_always || op->kind == OS_RMA_CAS ||
        !esize || !bytes)
        return OS_OK;
    const ptrdiff_t shift = p->ucx_map - p->base;
    if (!os_reduce_atomic_ok_type(tt, taddr + shift))
        return OS_OK;
    if (rop != OS_OP_NO_OP &&
        (st = os_dtype_view(op->origin, op->otype, op->ocount, bytes, &odata, &obuf)))
        goto out;
    if (fetch && !(fbuf = malloc(bytes))) {
        st = OS_ERR(OS_ERR_NOMEM, "accumulate of %zu bytes", bytes);
        goto out;
    }
    /* Accumulates of one origin on one location apply in order: those sent
     * before as requests first. */
    os_req_await_acks(w, op->target);
    /* As apply.c does for the target's own node: in bulk where every
     * process joined the handshake (acc_host), else one CPU atomic per
     * element, inside the handshake where this process joined it; one call
     * per copy of the type, scattered runs prefetched (os_reduce_runs). */
    bool bulk = os_acc_bulk(w, op->target, bytes) && os_acc_bulk_enter(w, op->target);
    if (!bulk && w->acc_host)
        os_acc_atomic_enter(w, op->target);
    if (tt->contig) {
        const os_block_t whole = { tt->blocks[0].disp, bytes };
        os_reduce_runs(rop, (os_basic_t)tt->basic, esize, taddr + shift, &whole, 1, odata, fbuf,
                       !bulk);
    } else {
        for (size_t rep = 0; rep < op->tcount; rep++, pos += tt->size)
            os_reduce_runs(rop, (os_basic_t)tt->basic, esize,
                           taddr + shift + (ptrdiff_t)rep * tt->extent, tt->blocks, tt->nblocks,
                           odata ? odata + pos : NULL, fbuf ? fbuf + pos : NULL, !bulk);
    }
    if (bulk) {
        os_acc_bulk_exit(w, op->target);
        w->stores_unordered = true;
        OS_STAT(w, ACC_BULK_ELEMS, bytes / esize);
    } else if (w->acc_host) {
        os_acc_atomic_exit(w);
    }
    if (fbuf)
        os_dtype_unpack(op->result, op->rtype, op->rcount, fbuf, bytes);
    OS_STAT(w, ACC_MAPPED, 1);
    if (bytes == esize) /* one element, done without the target */
        OS_STAT(w, ACC_DIRECT, 1);
    *done = true;
out:
    free(obuf);
    free(fbuf);
    return st;
}

os_status_t os_remote_execute(os_win_t *w, const os_rma_op_t *op, char *taddr)
{
    const bool dynamic = w->flavor == OS_FLAVOR_DYNAMIC;
    os_status_t st;
    /* Under a deferred lock: kept as a request for unlock, or the lock now. */
    bool keep = false;
    if (w->lock_how[op->target] == OS_HOLD_DEFERRED) {
        keep = os_kept_can_keep(w, op);
        if (!keep && (st = os_kept_take(w, op->target)))
            return st;
    }
    if (op->kind >= OS_RMA_ACC) {
        const char *addr = op->ttype->nblocks ? taddr + op->ttype->blocks[0].disp : taddr;
        int amo = dynamic || keep || atomic_by_request(w, op) ? -1 : direct_amo(w, op, addr);
        if (amo >= 0)
            return direct_acc(w, op, amo, addr);
        bool done = false;
        if (!dynamic && !keep && ((st = acc_in_place(w, op, taddr, &done)) || done))
            return st;
        OS_STAT(w, FALLBACK_ACC_REQUEST, 1);
    }
    if (!dynamic && !keep && in_chunks(w, op))
        return execute_in_chunks(w, op, taddr);
    if ((op->kind == OS_RMA_PUT || op->kind == OS_RMA_GET) && !dynamic && !keep &&
        !transfer_by_request(w, op)) {
        st = rdma(w, op, taddr);
        /* An R* request without a counter is complete when it returns: the
         * get's data is here and the put's buffer is free. */
        if (!st && op->request && !op->done)
            st = os_remote_flush(w, op->target);
        return st;
    }

    req_hdr_t h = { .op = op->op, .basic = op->ttype->basic,
                    .esize = (uint32_t)(op->ttype->basic_size ? op->ttype->basic_size : 1) };
    bool with_data;
    switch (op->kind) {
    case OS_RMA_PUT: h.kind = K_PUT; with_data = true; break;
    case OS_RMA_GET: h.kind = K_GET; with_data = false; break;
    case OS_RMA_ACC: h.kind = K_ACC; with_data = true; break;
    case OS_RMA_CAS: h.kind = K_CAS; with_data = true; break;
    default: h.kind = K_FETCH; with_data = op->op != OS_OP_NO_OP; break;
    }
    /* Where fetched bytes go. */
    void *rbuf = NULL;
    os_dtype_t *rtype = NULL;
    size_t rcount = 0;
    if (h.kind == K_GET) {
        rbuf = (void *)op->origin;
        rtype = op->otype;
        rcount = op->ocount;
    } else if (h.kind == K_FETCH || h.kind == K_CAS) {
        rbuf = op->result;
        rtype = op->rtype;
        rcount = op->rcount;
    }
    char *msg = NULL;
    size_t mlen = 0, total = 0;
    if ((st = os_req_build(w, op, taddr, with_data, &msg, &mlen, &h.nruns, &h.run_len,
                           &total)))
        return st;
    h.bytes = with_data ? total : 0;
    OS_STAT(w, FALLBACK_AM, 1);
    if (keep) {
        os_kept_keep(w, op->target, &h, msg, mlen, rbuf, rtype, rcount, rbuf ? total : 0);
        return OS_OK;
    }
    if (rbuf && !dynamic && !op->request &&
        (h.kind == K_GET || (w->peers[op->target].tcp_only && w->route == OS_ROUTE_DIRECT)))
        st = os_req_post_get(w, op->target, &h, msg, mlen, rbuf, rtype, rcount, total, true);
    else
        st = os_req_send_op(w, op->target, &h, msg, mlen, rbuf, rtype, rcount, rbuf ? total : 0,
                            !op->request);
    free(msg);
    return st;
}

os_status_t os_remote_acc_batch(os_win_t *w, int target, const os_acc_batch_t *b)
{
    const uintptr_t base = (uintptr_t)w->peers[target].base;
    os_status_t st = OS_OK;
    for (size_t i = 0, j; i < b->n && !st; i = j) {
        const os_acc_entry_t *e = b->entries;
        size_t bytes = 0;
        for (j = i; j < b->n && e[j].op == e[i].op && e[j].basic == e[i].basic; j++)
            bytes += (size_t)e[j].nelems * b->esize;
        size_t nruns = j - i, mlen = nruns * sizeof(os_run_t) + bytes;
        char *m = malloc(mlen);
        if (!m)
            return OS_ERR(OS_ERR_NOMEM, "accumulate batch of %zu bytes", mlen);
        os_run_t *runs = (os_run_t *)m;
        char *data = m + nruns * sizeof(os_run_t);
        for (size_t k = i; k < j; k++) {
            size_t len = (size_t)e[k].nelems * b->esize;
            runs[k - i] = (os_run_t){ (uint64_t)((uintptr_t)e[k].taddr - base), len };
            os_copy(data, b->data + e[k].data, len);
            data += len;
        }
        req_hdr_t h = { .kind = K_ACC, .op = e[i].op, .basic = e[i].basic,
                        .esize = (uint32_t)b->esize, .nruns = (uint32_t)nruns, .bytes = bytes,
                        .run_len = os_req_compact_runs(m, nruns, &mlen) };
        OS_STAT(w, FALLBACK_AM, 1);
        OS_STAT(w, FALLBACK_ACC_REQUEST, nruns);
        if (w->lock_how[target] == OS_HOLD_DEFERRED) {
            /* The whole batch in one request: it can wait for unlock. */
            if (i == 0 && j == b->n && !w->kept[target].msg &&
                bytes <= (size_t)w->cfg.lock_piggyback) {
                os_kept_keep(w, target, &h, m, mlen, NULL, NULL, 0, 0);
                return OS_OK;
            }
            if ((st = os_kept_take(w, target))) {
                free(m);
                return st;
            }
        }
        st = os_req_post_acked(w, target, &h, m, mlen, true);
        free(m);
    }
    return st;
}

bool os_remote_req_test(os_ucx_done_t *d, os_status_t *st)
{
    if (atomic_load_explicit(&d->pending, memory_order_acquire) > 0)
        os_fwd_progress();
    if (atomic_load_explicit(&d->pending, memory_order_acquire) > 0)
        return false;
    *st = atomic_load_explicit(&d->failed, memory_order_relaxed)
              ? OS_ERR(OS_ERR_OTHER, "UCX: a request-based put or get failed")
              : OS_OK;
    return true;
}


os_status_t os_remote_flush(os_win_t *w, int target)
{
    if (!w->multinode)
        return OS_OK;
    /* Every target's held requests leave before the first wait, so that
     * they are served at once, not one target after another's answers. */
    os_status_t first = target < 0 ? os_req_drain_all(w) : OS_OK;
    for (int t = target < 0 ? 0 : target; t < (target < 0 ? w->nranks : target + 1); t++) {
        if (w->peers[t].access != OS_PEER_REMOTE)
            continue;
        if (w->lock_how[t] == OS_HOLD_DEFERRED && w->kept[t].msg) {
            /* A flush completes the kept operation: the lock is needed now. */
            os_status_t st = os_kept_take(w, t);
            if (st && !first)
                first = st;
        }
        os_status_t st = os_req_flush(w, t);
        if (st && !first)
            first = st;
    }
    return first;
}

os_status_t os_remote_post(os_win_t *w, int origin)
{
    if (w->nl_map[origin] && w->rank < OS_NL_POST_BITS) {
        /* The origin's post bit (os_win_post_bits), mapped here as its lock
         * word is: a sequentially consistent CPU atomic, visible at once and
         * ordered after this process's stores to its window, the release
         * MPI_Win_post owes.
         * It replaces a message the origin's progress had to serve: an
         * 8-byte put's PSCW epoch between virtual nodes took 0.62 us where
         * Open MPI 5.0.11's osc/sm takes 0.40 (rma_sweep). */
        os_ucx_mapped_atomic((_Atomic uint64_t *)w->nl_map[origin] + OS_NL_POSTS_WORD +
                                 w->rank / 64,
                             OS_UCX_AMO_XOR, 8, 1ull << (w->rank % 64), NULL);
        OS_STAT(w, POST_MAPPED, 1);
        return OS_OK;
    }
    req_hdr_t h = { .kind = K_POST };
    return os_req_post_noreply(w, origin, &h);
}

/* Once MPI_Win_complete returns, the target's MPI_Win_test must see it
 * (after, say, a barrier of both; mpi4py tests that): the complete is a
 * call, whose reply says it was served. The target serves it as a data
 * request, in order behind this origin's earlier ones (serve.c), so where
 * the epoch's operations all went as requests on the direct route, it goes
 * right behind them without waiting for their acknowledgements first.
 *
 * RDMA of the epoch is ordered before the complete by ucp_worker_fence,
 * the one ordering UCP's API promises between operations of a worker:
 * "communication operations issued on the worker prior to this call are
 * guaranteed to be completed before any subsequent communication
 * operations to the same worker" (ucp.h). Completed covers a get's data
 * at this side too, which the call's reply then follows. It needs the RDMA
 * and the complete to go to one process: RDMA to memory whose key another
 * process owns (MPI_Win_allocate memory UCX allocated, served by the node's
 * first process) is flushed first, as are requests on another route, which
 * the target node's server applies rather than the target. So is RDMA over
 * other hosts' transports (fence_orders_rdma, os_rma.h): there RDMA may
 * take lanes of its own, and UCX's weak fence orders operations within a
 * lane (lock.c's release saw that on UCX 1.13 between two paths).
 * No ordering of transports is assumed: until this release a complete went
 * behind RDMA with neither fence nor flush where one host's transports had
 * applied them in order (UCX 1.13), and on UCX 1.20 rank 0's MPI_Win_wait
 * returned before rank 2's puts had landed (test_release_order). */
os_status_t os_remote_complete(os_win_t *w, int target)
{
    os_status_t st = OS_OK, st2;
    const os_peer_t *p = &w->peers[target];
    if (w->nl_map[target]) {
        /* The target's count of completes (os_win_remote_completes) is
         * mapped here, as its lock word is (another virtual node of this
         * host): this CPU's atomic raises it, visible at once, so the
         * target's MPI_Win_test sees it when this returns, as the call's
         * reply would promise. First everything of the epoch completes at
         * the target, as for the mapped lock release (lock.c): its requests
         * acknowledged, on every route, and its UCX operations flushed,
         * toward the key's owner and toward the target. Its CPU stores to
         * mapped memory come before the locked add in program order. This
         * replaces a request and its reply: an 8-byte put's PSCW epoch
         * between virtual nodes took 1.00-1.55 us, now 0.86-1.28 (Open MPI
         * 5.0.11, whose osc/sm takes 0.53-0.56). */
        const bool dirty = w->dirty[target];
        st = os_remote_flush(w, target);
        if (!st && dirty && p->rdma_world != p->world)
            st = os_ucx_flush(p->world);
        if (st)
            return st;
        os_ucx_mapped_atomic((_Atomic uint64_t *)w->nl_map[target] + OS_NL_COMPLETES_WORD,
                             OS_UCX_AMO_ADD, 8, 1, NULL);
        OS_STAT(w, COMPLETE_MAPPED, 1);
        return OS_OK;
    }
    if (w->route != OS_ROUTE_DIRECT || (w->dirty[target] && !p->fence_orders_rdma))
        st = os_remote_flush(w, target);
    if (w->dirty[target]) {
        OS_STAT(w, COMPLETE_BEHIND_RDMA, 1);
        os_ucx_fence();
    }
    req_hdr_t h = { .kind = K_COMPLETE };
    st2 = os_req_call(w, target, &h, NULL, 0, NULL, 0);
    os_req_await_acks(w, target); /* answered before the complete: arrived already */
    if (!st2)
        w->dirty[target] = 0; /* completed before the call was served */
    return st ? st : st2;
}

void os_remote_stats_sync(os_win_t *w)
{
    os_serve_stats_sync(w);
    if (w->multinode)
        os_fwd_stats(&w->stats);
}
