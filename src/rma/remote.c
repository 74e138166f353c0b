/*
 * Between nodes: operations, synchronization and the lock manager for
 * targets on another (real or virtual) node, over the UCX transport.
 *
 *   put, get        RDMA on the target's registered window memory; complete
 *                   at the next flush (dynamic windows: by request, below)
 *   accumulates,    one element of 4 or 8 bytes: one network atomic, without
 *   fetch_and_op,   the target (direct accumulate, paper 001; below);
 *   compare_and_swap otherwise a request carrying the target runs and the
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
 * This file is the origin side; the target serves requests in
 * remote_serve.c (the protocol between them: os_remote.h).
 */
#include "os_remote.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* --------------------------------------------------------- the origin side */

static uint64_t next_id = 1;

/* An origin waiting for one reply. */
typedef struct {
    _Atomic int done;
    int32_t status;
    uint8_t grant;
    char *buf;
    size_t cap;
} reply_slot_t;

static void on_reply(void *arg, void *reply, const void *hdr, size_t hlen, const void *data,
                     size_t dlen)
{
    (void)arg;
    (void)reply;
    (void)hlen;
    /* Headers arrive 4-byte aligned: read them through an aligned copy. */
    reply_hdr_t copy;
    memcpy(&copy, hdr, sizeof copy);
    const reply_hdr_t *r = &copy;
    OS_DEBUG("reply token %llx ack %d", (unsigned long long)r->token, r->ack);
    if (r->ack) {
        atomic_fetch_sub_explicit((_Atomic int64_t *)(uintptr_t)r->token, 1,
                                  memory_order_release);
        return;
    }
    reply_slot_t *slot = (reply_slot_t *)(uintptr_t)r->token;
    if (slot->buf && dlen)
        memcpy(slot->buf, data, dlen < slot->cap ? dlen : slot->cap);
    slot->status = r->status;
    slot->grant = r->grant;
    atomic_store_explicit(&slot->done, 1, memory_order_release);
}


/* The backoff hook: progress the network, but never from inside a handler
 * (UCX does not allow recursive progress). */
static __thread int progress_depth;
static void progress_hook(void)
{
    if (progress_depth)
        return;
    progress_depth++;
    os_ucx_progress();
    progress_depth--;
}

os_status_t os_remote_init(void)
{
    os_status_t st;
    if ((st = os_ucx_am_register(AM_REQUEST, os_serve_request, NULL)) ||
        (st = os_ucx_am_register(AM_REPLY, on_reply, NULL)))
        return st;
    os_ucx_set_idle_hook(os_serve_retry);
    os_backoff_hook = progress_hook;
    return OS_OK;
}

/* Send a request and wait for its reply (into buf, up to cap bytes). */
static os_status_t call_grant(os_win_t *w, int target, req_hdr_t *h, const void *data,
                              size_t dlen, void *buf, size_t cap, uint8_t *grant)
{
    reply_slot_t slot = { .buf = buf, .cap = cap };
    h->win = w->id;
    h->src = w->rank;
    h->token = (uint64_t)(uintptr_t)&slot;
    h->ack = 0;
    OS_DEBUG("call kind %d to rank %d token %llx", h->kind, target, (unsigned long long)h->token);
    os_status_t st = os_ucx_am_send(w->peers[target].world, AM_REQUEST, h, sizeof *h, data, dlen);
    if (st)
        return st;
    os_backoff_t b = OS_BACKOFF_INIT;
    while (!atomic_load_explicit(&slot.done, memory_order_acquire)) {
        progress_hook();
        os_backoff_wait(&b);
    }
    if (grant)
        *grant = slot.grant;
    if (slot.status)
        return OS_ERR((os_status_t)slot.status, "rank %d refused the request (see its log)",
                      target);
    return OS_OK;
}

static os_status_t call(os_win_t *w, int target, req_hdr_t *h, const void *data, size_t dlen,
                        void *buf, size_t cap)
{
    return call_grant(w, target, h, data, dlen, buf, cap, NULL);
}

/* Send a request whose reply only decrements the target's ack counter. */
static os_status_t post_acked(os_win_t *w, int target, req_hdr_t *h, const void *data,
                              size_t dlen)
{
    h->win = w->id;
    h->src = w->rank;
    h->token = (uint64_t)(uintptr_t)&w->acks[target];
    h->ack = 1;
    atomic_fetch_add_explicit(&w->acks[target], 1, memory_order_relaxed);
    os_status_t st = os_ucx_am_send(w->peers[target].world, AM_REQUEST, h, sizeof *h, data, dlen);
    if (st)
        atomic_fetch_sub_explicit(&w->acks[target], 1, memory_order_relaxed);
    return st;
}

static os_status_t post_noreply(os_win_t *w, int target, req_hdr_t *h)
{
    h->win = w->id;
    h->src = w->rank;
    h->token = 0;
    return os_ucx_am_send(w->peers[target].world, AM_REQUEST, h, sizeof *h, NULL, 0);
}

/* Runs of the target type, as offsets in the target's window (addresses for
 * dynamic windows), followed by the packed origin data. */
static os_status_t build(os_win_t *w, const os_rma_op_t *op, char *taddr, bool with_data,
                         char **msg, size_t *mlen, uint32_t *nruns, size_t *total)
{
    os_cursor_t tc;
    char *run;
    size_t len, n = 0, bytes = 0;
    const os_peer_t *p = &w->peers[op->target];
    const uintptr_t origin0 = w->flavor == OS_FLAVOR_DYNAMIC ? 0 : (uintptr_t)p->base;
    os_cursor_init(&tc, op->ttype, taddr, op->tcount);
    while ((len = os_cursor_next(&tc, SIZE_MAX, &run))) {
        n++;
        bytes += len;
    }
    size_t extra = op->kind == OS_RMA_CAS ? op->ttype->size : 0;
    size_t size = n * sizeof(os_run_t) + (with_data ? bytes : 0) + extra;
    char *m = malloc(size ? size : 1);
    if (!m)
        return OS_ERR(OS_ERR_NOMEM, "request of %zu bytes", size);
    os_run_t *runs = (os_run_t *)m;
    os_cursor_init(&tc, op->ttype, taddr, op->tcount);
    for (size_t i = 0; (len = os_cursor_next(&tc, SIZE_MAX, &run)); i++)
        runs[i] = (os_run_t){ (uint64_t)((uintptr_t)run - origin0), len };
    if (with_data) {
        os_cursor_t oc;
        char *src, *dst = m + n * sizeof(os_run_t), *end = dst + bytes;
        os_cursor_init(&oc, op->otype, op->origin, op->ocount);
        while (dst < end && (len = os_cursor_next(&oc, (size_t)(end - dst), &src))) {
            memcpy(dst, src, len);
            dst += len;
        }
    }
    if (extra)
        memcpy(m + n * sizeof(os_run_t) + (with_data ? bytes : 0), op->compare, extra);
    *msg = m;
    *mlen = size;
    *nruns = (uint32_t)n;
    *total = bytes;
    return OS_OK;
}

static void scatter(void *base, const os_dtype_t *t, size_t count, const char *src, size_t bytes)
{
    os_cursor_t c;
    char *p;
    size_t n;
    os_cursor_init(&c, t, base, count);
    while (bytes && (n = os_cursor_next(&c, bytes, &p))) {
        memcpy(p, src, n);
        src += n;
        bytes -= n;
    }
}

/* RDMA between the origin's runs and the target's, pairwise. */
static os_status_t rdma(os_win_t *w, const os_rma_op_t *op, char *taddr)
{
    os_peer_t *p = &w->peers[op->target];
    os_cursor_t tc, lc;
    char *pt = NULL, *pl = NULL;
    size_t lt = 0, ll = 0;
    os_status_t st = OS_OK;
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
        st = op->kind == OS_RMA_PUT
                 ? os_ucx_put(p->rdma_world, pl, n, (uint64_t)(uintptr_t)pt, p->rkey, op->done)
                 : os_ucx_get(p->rdma_world, pl, n, (uint64_t)(uintptr_t)pt, p->rkey, op->done);
        pt += n;
        pl += n;
        lt -= n;
        ll -= n;
    }
    w->dirty[op->target] = 1;
    if (p->zero_copy)
        OS_STAT(w, REMOTE_RDMA, 1);
    else
        OS_STAT(w, FALLBACK_REMOTE_EMULATED, 1);
    return st;
}

bool os_remote_req_test(os_ucx_done_t *d, os_status_t *st)
{
    if (atomic_load_explicit(&d->pending, memory_order_acquire) > 0)
        progress_hook();
    if (atomic_load_explicit(&d->pending, memory_order_acquire) > 0)
        return false;
    *st = atomic_load_explicit(&d->failed, memory_order_relaxed)
              ? OS_ERR(OS_ERR_OTHER, "UCX: a request-based put or get failed")
              : OS_OK;
    return true;
}

/* Until every accumulate sent to target as a request has been applied. */
static void await_acks(os_win_t *w, int target)
{
    os_backoff_t b = OS_BACKOFF_INIT;
    while (atomic_load_explicit(&w->acks[target], memory_order_acquire) > 0) {
        progress_hook();
        os_backoff_wait(&b);
    }
}

/* ------------------------------------------------------ lock piggybacking */

/* Paper 003 section 4.3, for the manager design toward another node:
 * MPI_Win_lock only notes the epoch (OS_HOLD_DEFERRED). The epoch's first
 * operation, when short, contiguous at the target and not an R* form, is
 * built into its request and kept here; at unlock it goes with the lock
 * request as one K_LOCK_OP, which the target queues like a lock request,
 * applies once the lock is granted and answers with the result: one round
 * trip for lock, operation and unlock instead of three. An epoch with no
 * operation sends nothing. Whatever cannot wait for unlock (a second
 * operation, a flush, an R* call, MPI_Win_sync) first asks for the lock, then sends what
 * was kept, so operations still reach the target in issue order.
 * Why MPI allows it: MPI_Win_lock need not block until the lock is acquired
 * (MPI-3.1 11.5.3), and before unlock or flush nothing the origin can see
 * tells whether it was. */
typedef struct os_kept_op {
    bool exclusive;    /* the epoch's lock type */
    req_hdr_t h;       /* the request the operation would be on its own... */
    char *msg;         /* ... its runs and origin data; NULL: no operation kept */
    size_t mlen;
    void *rbuf;        /* where fetched bytes go (get: the origin buffer) ... */
    os_dtype_t *rtype; /* ... in this type, retained: the program may free it */
    size_t rcount, rbytes;
} os_kept_op_t;

static void kept_clear(os_kept_op_t *k)
{
    free(k->msg);
    if (k->rtype)
        os_dtype_release(k->rtype);
    *k = (os_kept_op_t){ .exclusive = k->exclusive };
}

/* Takes msg. */
static void keep_op(os_win_t *w, int target, const req_hdr_t *h, char *msg, size_t mlen,
                    void *rbuf, os_dtype_t *rtype, size_t rcount, size_t rbytes)
{
    os_kept_op_t *k = &w->kept[target];
    if (rtype)
        os_dtype_retain(rtype);
    *k = (os_kept_op_t){ .exclusive = k->exclusive, .h = *h, .msg = msg,
                         .mlen = mlen, .rbuf = rbuf, .rtype = rtype, .rcount = rcount,
                         .rbytes = rbytes };
}

/* Whether an operation toward a deferred lock can wait for unlock. */
static bool can_keep(const os_win_t *w, const os_rma_op_t *op)
{
    return !op->request && w->flavor != OS_FLAVOR_DYNAMIC && !w->kept[op->target].msg &&
           op->ttype->contig && op->tcount * op->ttype->size <= (size_t)w->cfg.lock_piggyback;
}

/* A request that carries an operation, inside a held lock: puts and
 * accumulates are acknowledged at the next flush, the rest wait for their
 * reply here (fetched bytes, rbytes of them, scattered into rbuf). */
static os_status_t send_op(os_win_t *w, int target, req_hdr_t *h, const char *msg, size_t mlen,
                           void *rbuf, const os_dtype_t *rtype, size_t rcount, size_t rbytes)
{
    if ((h->kind == K_ACC || h->kind == K_PUT) && w->flavor != OS_FLAVOR_DYNAMIC)
        return post_acked(w, target, h, msg, mlen);
    char *fetched = NULL;
    if (rbytes && !(fetched = malloc(rbytes)))
        return OS_ERR(OS_ERR_NOMEM, "reply buffer of %zu bytes", rbytes);
    os_status_t st = call(w, target, h, msg, mlen, fetched, rbytes);
    if (!st && fetched)
        scatter(rbuf, rtype, rcount, fetched, rbytes);
    free(fetched);
    return st;
}

static os_status_t manager_lock(os_win_t *w, int target, bool exclusive, bool hybrid,
                                uint8_t *grant)
{
    req_hdr_t h = { .kind = K_LOCK, .op = exclusive, .basic = hybrid };
    OS_STAT(w, LOCK_MANAGER, 1);
    return call_grant(w, target, &h, NULL, 0, NULL, 0, grant);
}

/* A deferred lock that cannot wait any more: ask for it, then send the kept
 * operation. After a failure the epoch holds nothing (unlock sends nothing). */
static os_status_t take_deferred(os_win_t *w, int target)
{
    os_kept_op_t *k = &w->kept[target];
    os_status_t st = manager_lock(w, target, k->exclusive, false, NULL);
    w->lock_how[target] = st ? OS_HOLD_NONE : OS_HOLD_MANAGER;
    if (!st && k->msg)
        st = send_op(w, target, &k->h, k->msg, k->mlen, k->rbuf, k->rtype, k->rcount, k->rbytes);
    kept_clear(k);
    return st;
}

/* Unlock of a lock never asked for: the kept operation, if any, goes with
 * the lock request, and its reply completes the epoch at the target. */
static os_status_t unlock_deferred(os_win_t *w, int target)
{
    os_kept_op_t *k = &w->kept[target];
    os_status_t st = OS_OK;
    char *data = NULL;
    if (!k->msg) {
        OS_STAT(w, LOCK_ELIDED, 1);
        goto out;
    }
    const size_t dlen = sizeof k->h + k->mlen;
    if (!(data = malloc(dlen))) {
        st = OS_ERR(OS_ERR_NOMEM, "lock request of %zu bytes", dlen);
        goto out;
    }
    memcpy(data, &k->h, sizeof k->h);
    memcpy(data + sizeof k->h, k->msg, k->mlen);
    req_hdr_t h = { .kind = K_LOCK_OP, .op = k->exclusive };
    OS_STAT(w, LOCK_MANAGER, 1);
    OS_STAT(w, LOCK_PIGGYBACKED, 1);
    st = send_op(w, target, &h, data, dlen, k->rbuf, k->rtype, k->rcount, k->rbytes);
out:
    free(data);
    kept_clear(k);
    return st;
}

/* ------------------------------------------------------ direct accumulate */

/* The network atomic that carries out a one-element accumulate (paper 001),
 * or -1 when the target must apply it. Why one network atomic is atomic with
 * every other accumulate on that element: UCX runs its atomics in CPU mode,
 * so they are coherent with the CPU atomics by which the target's own node
 * and the target's request server update every aligned element of 4 or 8
 * bytes, and a window with direct accumulates has no bulk accumulates (the
 * only plain stores; window.c). What is left out: targets whose memory
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
    await_acks(w, op->target);
    os_status_t st = os_ucx_atomic(w->peers[op->target].rdma_world, amo, e, value, &old,
                                   (uint64_t)(uintptr_t)addr, w->peers[op->target].rkey);
    if (st)
        return st;
    if (op->kind != OS_RMA_ACC)
        store_word((char *)op->result + op->rtype->blocks[0].disp, old, e);
    OS_STAT(w, ACC_DIRECT, 1);
    if (!w->peers[op->target].zero_copy)
        OS_STAT(w, FALLBACK_REMOTE_EMULATED, 1);
    return OS_OK;
}

os_status_t os_remote_execute(os_win_t *w, const os_rma_op_t *op, char *taddr)
{
    const bool dynamic = w->flavor == OS_FLAVOR_DYNAMIC;
    os_status_t st;
    /* Under a deferred lock: kept as a request for unlock, or the lock now. */
    bool keep = false;
    if (w->lock_how[op->target] == OS_HOLD_DEFERRED) {
        keep = can_keep(w, op);
        if (!keep && (st = take_deferred(w, op->target)))
            return st;
    }
    if (op->kind >= OS_RMA_ACC) {
        const char *addr = op->ttype->nblocks ? taddr + op->ttype->blocks[0].disp : taddr;
        int amo = dynamic || keep ? -1 : direct_amo(w, op, addr);
        if (amo >= 0)
            return direct_acc(w, op, amo, addr);
        OS_STAT(w, FALLBACK_ACC_REQUEST, 1);
    }
    if ((op->kind == OS_RMA_PUT || op->kind == OS_RMA_GET) && !dynamic && !keep) {
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
    if ((st = build(w, op, taddr, with_data, &msg, &mlen, &h.nruns, &total)))
        return st;
    h.bytes = with_data ? total : 0;
    OS_STAT(w, FALLBACK_AM, 1);
    if (keep) {
        keep_op(w, op->target, &h, msg, mlen, rbuf, rtype, rcount, rbuf ? total : 0);
        return OS_OK;
    }
    st = send_op(w, op->target, &h, msg, mlen, rbuf, rtype, rcount, rbuf ? total : 0);
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
            memcpy(data, b->data + e[k].data, len);
            data += len;
        }
        req_hdr_t h = { .kind = K_ACC, .op = e[i].op, .basic = e[i].basic,
                        .esize = (uint32_t)b->esize, .nruns = (uint32_t)nruns, .bytes = bytes };
        OS_STAT(w, FALLBACK_AM, 1);
        OS_STAT(w, FALLBACK_ACC_REQUEST, nruns);
        if (w->lock_how[target] == OS_HOLD_DEFERRED) {
            /* The whole batch in one request: it can wait for unlock. */
            if (i == 0 && j == b->n && !w->kept[target].msg &&
                bytes <= (size_t)w->cfg.lock_piggyback) {
                keep_op(w, target, &h, m, mlen, NULL, NULL, 0, 0);
                return OS_OK;
            }
            if ((st = take_deferred(w, target))) {
                free(m);
                return st;
            }
        }
        st = post_acked(w, target, &h, m, mlen);
        free(m);
    }
    return st;
}

/* MPI_Win_sync: a program that polls its own memory may be waiting for
 * what it issued before (mpi4py's MCS mutex adds itself to its predecessor's
 * queue by an accumulate, then polls with MPI_Win_sync until granted), so kept
 * operations cannot wait for unlock any longer: their locks are asked for now. */
os_status_t os_remote_send_kept(os_win_t *w)
{
    os_status_t first = OS_OK;
    for (int t = 0; w->multinode && t < w->nranks; t++)
        if (w->lock_how[t] == OS_HOLD_DEFERRED && w->kept[t].msg) {
            os_status_t st = take_deferred(w, t);
            if (st && !first)
                first = st;
        }
    return first;
}

os_status_t os_remote_flush(os_win_t *w, int target)
{
    if (!w->multinode)
        return OS_OK;
    os_status_t first = OS_OK;
    for (int t = target < 0 ? 0 : target; t < (target < 0 ? w->nranks : target + 1); t++) {
        if (w->peers[t].access != OS_PEER_REMOTE)
            continue;
        if (w->lock_how[t] == OS_HOLD_DEFERRED && w->kept[t].msg) {
            /* A flush completes the kept operation: the lock is needed now. */
            os_status_t st = take_deferred(w, t);
            if (st && !first)
                first = st;
        }
        if (w->dirty[t]) {
            os_status_t st = os_ucx_flush(w->peers[t].rdma_world);
            if (st && !first)
                first = st;
            w->dirty[t] = 0;
        }
        await_acks(w, t);
    }
    return first;
}

/* Take the target's network lock word with network atomics (os_netlock.h);
 * *parked when it lives on the CPU side (hybrid, CPU mode). */
static os_status_t net_lock(os_win_t *w, int target, bool exclusive, bool *parked,
                            bool *contended)
{
    static const int amo_op[] = { [OS_NL_ADD] = OS_UCX_AMO_ADD, [OS_NL_CSWAP] = OS_UCX_AMO_CSWAP,
                                  [OS_NL_OR] = OS_UCX_AMO_OR };
    os_nl_fsm_t f;
    os_nl_amo_t a;
    os_backoff_t b = OS_BACKOFF_INIT;
    os_nl_start(&f, exclusive);
    for (;;) {
        switch (os_nl_next(&f, &a)) {
        case OS_NL_DO_AMO: {
            uint64_t old = a.compare;
            os_status_t st = os_ucx_atomic(w->peers[target].world, amo_op[a.op], 8, a.value, &old,
                                           w->nl_addr[target], w->nl_rkey[target]);
            if (st)
                return st;
            os_nl_feed(&f, old);
            break;
        }
        case OS_NL_DO_BACKOFF:
            *contended = true;
            OS_STAT(w, LOCK_NET_RETRIES, 1);
            os_backoff_wait(&b);
            break;
        case OS_NL_DO_GOT:
            *parked = false;
            OS_STAT(w, LOCK_NETWORK, 1);
            return OS_OK;
        default:
            *parked = true;
            return OS_OK;
        }
    }
}

/* The release of a network lock goes right behind the epoch's operations,
 * ordered by a fence, and one flush completes them all: one round trip
 * instead of a flush and then a fetching atomic. Accumulates sent as
 * requests are applied first (their acknowledgements). The fence orders
 * operations of one kind of path only: a put that UCX emulates (applied
 * later by the target's worker) and a release done by a shared-memory
 * atomic at once are not ordered by it, so that mix flushes the puts
 * first (a reader took the lock and saw half a put before this rule). */
static os_status_t net_unlock(os_win_t *w, int target, bool exclusive)
{
    const os_peer_t *p = &w->peers[target];
    os_nl_amo_t a = os_nl_release(exclusive);
    await_acks(w, target);
    if (p->access == OS_PEER_REMOTE && w->dirty[target] && p->zero_copy != p->word_zero_copy) {
        os_status_t st = os_ucx_flush(p->rdma_world);
        w->dirty[target] = 0;
        if (st)
            return st;
    }
    os_ucx_fence();
    os_status_t st = os_ucx_atomic_post(p->world, OS_UCX_AMO_ADD, 8, a.value,
                                        w->nl_addr[target], w->nl_rkey[target]);
    os_status_t st2 = os_ucx_flush(p->world);
    if (p->access == OS_PEER_REMOTE && w->dirty[target] && p->rdma_world != p->world) {
        os_status_t st3 = os_ucx_flush(p->rdma_world);
        if (!st2)
            st2 = st3;
    }
    if (p->access == OS_PEER_REMOTE)
        w->dirty[target] = 0;
    return st ? st : st2;
}

os_status_t os_remote_lock(os_win_t *w, int target, bool exclusive, bool *contended)
{
    uint8_t *how = &w->lock_how[target];
    os_rank_ctl_t *c = &w->ctl[target];
    const bool local = w->peers[target].access != OS_PEER_REMOTE;
    const os_lock_policy_t policy = (os_lock_policy_t)w->cfg.lock_policy;
    const unsigned streak = (unsigned)w->cfg.lock_streak;
    os_backoff_t b = OS_BACKOFF_INIT;
    os_status_t st = OS_OK;
    bool parked;
    uint8_t grant;

    if (w->cfg.lock == OS_LOCK_MANAGER) {
        /* Not under MPI_THREAD_MULTIPLE: a deferred lock is taken inside
         * unlock or an operation, waits the window's other threads could not
         * get past (they would hold up each other's unlocks across
         * processes); eager locks wait in MPI_Win_lock, which lets them. */
        if (!local && w->cfg.lock_piggyback > 0 && !os_threaded) {
            *how = OS_HOLD_DEFERRED; /* lock piggybacking, above */
            w->kept[target].exclusive = exclusive;
            return OS_OK;
        }
        *how = OS_HOLD_MANAGER;
        return manager_lock(w, target, exclusive, false, NULL);
    }
    if (w->cfg.lock == OS_LOCK_NETWORK) {
        *how = OS_HOLD_NET;
        if (!(st = net_lock(w, target, exclusive, &parked, contended)) && parked)
            st = OS_ERR(OS_ERR_OTHER, "the network lock word of rank %d is parked in a "
                        "window whose lock design is 'network'", target);
        return st;
    }
    /* Hybrid. */
    for (;;) {
        if (local) {
            /* The node's lockers use the CPU lock, unless the lock is in
             * network mode and the policy keeps it there. Drawing a CPU
             * ticket in network mode asks the manager to migrate it back
             * (it sees the ticket queue behind its park ticket). */
            if (atomic_load_explicit(&c->lock_mode, memory_order_acquire) == OS_LOCKMODE_NET &&
                !os_lock_policy_migrate(policy, atomic_load(&c->lock_local_count), streak,
                                       &w->lock_rng)) {
                if ((st = net_lock(w, target, exclusive, &parked, contended)))
                    return st;
                if (!parked) {
                    atomic_fetch_add_explicit(&c->lock_local_count, 1, memory_order_relaxed);
                    *how = OS_HOLD_NET;
                    return OS_OK;
                }
                *contended = true; /* a migration back is under way */
                os_backoff_wait(&b);
                continue;
            }
            if (exclusive)
                os_lock_acquire_excl(&c->lock, contended);
            else
                os_lock_acquire_shared(&c->lock, contended);
            *how = OS_HOLD_CPU;
            return OS_OK;
        }
        if ((st = net_lock(w, target, exclusive, &parked, contended)))
            return st;
        if (!parked) {
            *how = OS_HOLD_NET;
            return OS_OK;
        }
        if ((st = manager_lock(w, target, exclusive, true, &grant)))
            return st;
        if (grant != GRANT_RETRY) {
            *how = grant == GRANT_NET ? OS_HOLD_NET : OS_HOLD_MANAGER;
            return OS_OK;
        }
        *contended = true;
    }
}

os_status_t os_remote_unlock(os_win_t *w, int target, bool exclusive)
{
    if (w->lock_how[target] == OS_HOLD_DEFERRED) {
        /* Nothing was sent before: nothing to flush. */
        w->lock_how[target] = OS_HOLD_NONE;
        return unlock_deferred(w, target);
    }
    if (w->lock_how[target] == OS_HOLD_NET) {
        w->lock_how[target] = OS_HOLD_NONE;
        return net_unlock(w, target, exclusive); /* flushes too */
    }
    os_status_t st = os_remote_flush(w, target), st2 = OS_OK;
    switch (w->lock_how[target]) {
    case OS_HOLD_NONE: /* a deferred lock whose request failed */
        break;
    case OS_HOLD_CPU:
        if (exclusive)
            os_lock_release_excl(&w->ctl[target].lock);
        else
            os_lock_release_shared(&w->ctl[target].lock);
        break;
    default: {
        req_hdr_t h = { .kind = K_UNLOCK, .op = exclusive };
        st2 = call(w, target, &h, NULL, 0, NULL, 0);
        break;
    }
    }
    w->lock_how[target] = OS_HOLD_NONE;
    return st ? st : st2;
}

os_status_t os_remote_post(os_win_t *w, int origin)
{
    req_hdr_t h = { .kind = K_POST };
    return post_noreply(w, origin, &h);
}

/* A call, not a posted message: once MPI_Win_complete returns, the target's
 * MPI_Win_test must see it (after, say, a barrier of both). */
os_status_t os_remote_complete(os_win_t *w, int target)
{
    os_status_t st = os_remote_flush(w, target);
    req_hdr_t h = { .kind = K_COMPLETE };
    os_status_t st2 = call(w, target, &h, NULL, 0, NULL, 0);
    return st ? st : st2;
}

/* ------------------------------------------------------- window lifetime */

/* What each process tells the others about its window, in one allgather;
 * the two packed keys follow in one allgatherv. */
typedef struct {
    uint64_t base;      /* window memory */
    uint64_t word;      /* network lock word */
    int32_t key_len;    /* the memory's packed key (0: none) */
    int32_t word_key_len;
    int32_t rdma_world; /* whose endpoint reaches the memory */
    int32_t zero_copy;
} remote_info_t;

/* Allocations of the window's remote state, and this process's lock word:
 * allocated by UCX, so that other processes' network atomics on it need no
 * help from us (the node's own lockers take it too, in network mode). */
static os_status_t remote_alloc(os_win_t *w)
{
    const int n = w->nranks;
    void *word;
    os_status_t st;
    w->dirty = calloc((size_t)n, 1);
    w->acks = calloc((size_t)n, sizeof *w->acks);
    w->lock_how = calloc((size_t)n, 1);
    w->kept = calloc((size_t)n, sizeof *w->kept);
    w->nl_addr = calloc((size_t)n, sizeof *w->nl_addr);
    w->nl_rkey = calloc((size_t)n, sizeof *w->nl_rkey);
    if (!w->dirty || !w->acks || !w->lock_how || !w->kept || !w->nl_addr || !w->nl_rkey)
        return OS_ERR(OS_ERR_NOMEM, "window of %d processes", n);
    if ((st = os_ucx_mem_alloc(OS_CACHELINE, &w->netreg, &word)))
        return st;
    w->netword = word;
    atomic_store(w->netword, 0);
    w->lock_rng = (uint64_t)w->peers[w->rank].world * 0x9e3779b97f4a7c15ull + 1;
    if (w->cfg.lock == OS_LOCK_HYBRID) {
        /* Before anybody has the key: the word starts parked, CPU mode. */
        os_rank_ctl_t *c = &w->ctl[w->rank];
        os_hyb_init(&w->hyb, &c->lock, &c->lock_mode, &c->lock_local_count, w->netword,
                    w->lock_rng);
        w->hyb_ready = true;
    }
    return OS_OK;
}

/* Keys to this process's window memory: the node's UCX-allocated data
 * segment (its first process owns the key), or a registration of memory
 * UCX did not allocate, which its transports reach through our worker.
 * Dynamic windows have none: their regions come and go, and are served by
 * request. */
static os_status_t memory_key(os_win_t *w, const void *base, size_t bytes, remote_info_t *me,
                              const char **key)
{
    const os_shell_t *sh = w->shell;
    os_status_t st;
    *key = NULL;
    me->base = (uint64_t)(uintptr_t)base;
    me->rdma_world = w->peers[w->rank].world;
    if (w->flavor == OS_FLAVOR_DYNAMIC || !bytes)
        return OS_OK;
    if (w->flavor == OS_FLAVOR_ALLOCATE && sh->data_ucx) {
        /* Each process of the node maps the segment at its own address;
         * the key names the owner's. */
        *key = sh->data_key;
        me->base = sh->data_key_addr + (uint64_t)((const char *)base - (char *)sh->data.addr);
        me->key_len = (int32_t)sh->data_key_len;
        me->rdma_world = sh->node_first;
        me->zero_copy = sh->data_zero_copy;
        return OS_OK;
    }
    if ((st = os_ucx_mem_map((void *)base, bytes, &w->reg)))
        return st;
    *key = w->reg.rkey_buf;
    me->key_len = (int32_t)w->reg.rkey_len;
    return OS_OK;
}

os_status_t os_remote_win_setup(os_win_t *w, const void *base, size_t bytes)
{
    const int n = w->nranks;
    os_status_t st = OS_OK;
    remote_info_t me = { 0 }, *all = NULL;
    const char *key;
    char *mykeys = NULL, *keys = NULL;
    int *lens = NULL, *displs = NULL;
    uint64_t id = next_id;
    PMPI_Allreduce(MPI_IN_PLACE, &id, 1, MPI_UINT64_T, MPI_MAX, w->comm);
    next_id = id + 1;
    w->id = id;
    if ((st = remote_alloc(w)))
        return st;

    /* Registered before anybody can learn our keys: no request can arrive
     * for a window we do not know. */
    if ((st = os_serve_register(w)))
        return st;

    if ((st = memory_key(w, base, bytes, &me, &key)))
        return st;
    me.word = (uint64_t)(uintptr_t)w->netword;
    me.word_key_len = (int32_t)w->netreg.rkey_len;
    const int mylen = me.key_len + me.word_key_len;
    all = malloc(sizeof *all * (size_t)n);
    lens = malloc(sizeof *lens * (size_t)n);
    displs = malloc(sizeof *displs * (size_t)n);
    mykeys = malloc((size_t)mylen + 1);
    if (!all || !lens || !displs || !mykeys) {
        st = OS_ERR(OS_ERR_NOMEM, "key exchange of %d processes", n);
        goto out;
    }
    if (me.key_len)
        memcpy(mykeys, key, (size_t)me.key_len);
    memcpy(mykeys + me.key_len, w->netreg.rkey_buf, (size_t)me.word_key_len);
    PMPI_Allgather(&me, sizeof me, MPI_BYTE, all, sizeof me, MPI_BYTE, w->comm);
    int total = 0;
    for (int r = 0; r < n; r++) {
        displs[r] = total;
        lens[r] = all[r].key_len + all[r].word_key_len;
        total += lens[r];
    }
    if (!(keys = malloc((size_t)total + 1))) {
        st = OS_ERR(OS_ERR_NOMEM, "keys of %d processes", n);
        goto out;
    }
    PMPI_Allgatherv(mykeys, mylen, MPI_BYTE, keys, lens, displs, MPI_BYTE, w->comm);
    for (int r = 0; r < n && !st; r++) {
        os_peer_t *p = &w->peers[r];
        w->nl_addr[r] = all[r].word;
        st = os_ucx_rkey_unpack(p->world, keys + displs[r] + all[r].key_len, &w->nl_rkey[r]);
        p->word_zero_copy = !st && os_ucx_rkey_ptr(w->nl_rkey[r], all[r].word) != NULL;
        if (st || p->access != OS_PEER_REMOTE)
            continue;
        if (w->flavor != OS_FLAVOR_DYNAMIC)
            p->base = (char *)(uintptr_t)all[r].base;
        p->rdma_world = all[r].rdma_world;
        /* Unpacked toward the key's owner, whose endpoint carries the RDMA:
         * on RDMA hardware a key is valid only there. */
        if (all[r].key_len)
            st = os_ucx_rkey_unpack(p->rdma_world, keys + displs[r], &p->rkey);
        /* Zero-copy as far as this process's UCX shows it: memory UCX
         * allocated, which one of its shared-memory transports maps here
         * (not with ONESIDED_UCX_TLS=tcp,self, say, which emulates it).
         * UCX 1.13 cannot tell which lane an RDMA operation takes, so on
         * RDMA hardware between real hosts the count says emulated. */
        p->zero_copy = !st && all[r].zero_copy &&
                       os_ucx_rkey_ptr(p->rkey, all[r].base) != NULL;
        os_ucx_report_transports(p->rdma_world);
    }
    if (!st && w->cfg.progress)
        st = os_ucx_progress_thread_start();
out:
    free(keys);
    free(mykeys);
    free(all);
    free(lens);
    free(displs);
    return st;
}

void os_remote_win_teardown(os_win_t *w)
{
    os_serve_unregister(w);
    for (int r = 0; w->peers && r < w->nranks; r++)
        if (w->peers[r].rkey) {
            os_ucx_rkey_destroy(w->peers[r].rkey);
            w->peers[r].rkey = NULL;
        }
    os_ucx_mem_unmap(&w->reg);
    for (int r = 0; w->nl_rkey && r < w->nranks; r++)
        os_ucx_rkey_destroy(w->nl_rkey[r]);
    os_ucx_mem_unmap(&w->netreg);
    free(w->nl_rkey);
    free(w->nl_addr);
    free(w->lock_how);
    for (int r = 0; w->kept && r < w->nranks; r++)
        kept_clear(&w->kept[r]);
    free(w->kept);
    w->kept = NULL;
    w->nl_rkey = NULL;
    w->nl_addr = NULL;
    w->lock_how = NULL;
    free(w->dirty);
    free((void *)w->acks);
    w->dirty = NULL;
    w->acks = NULL;
}

void os_remote_stats_sync(os_win_t *w)
{
    os_serve_stats_sync(w);
}
