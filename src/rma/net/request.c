/* Between nodes: requests and replies. An origin's request either waits for
 * its reply (os_req_call) or is acknowledged later by decrementing a counter
 * that flush and unlock wait on (os_req_post_acked); both carry the target
 * runs and origin data os_req_build packs. Used by the operations
 * (origin.c) and the lock epochs (lock.c); the target's side is serve.c,
 * the protocol os_net.h; forward.c moves the messages. */
#include "os_net.h"

#include <stdlib.h>
#include <string.h>

/* --------------------------------------------------------- the origin side */

/* An origin waiting for one reply. */
typedef struct {
    _Atomic int done;
    int32_t status;
    uint8_t grant;
    char *buf;
    size_t cap;
} reply_slot_t;

/* A get that does not wait for its reply (os_req_post_get): where the bytes
 * go, and the counter the next flush waits on. */
typedef struct {
    _Atomic int64_t *acks;
    void *rbuf;
    os_dtype_t *rtype; /* retained: the program may free its type before the flush */
    size_t rcount, rbytes;
} get_slot_t;

void os_req_on_reply(void *arg, void *reply, const void *hdr, size_t hlen, const void *data,
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
    if (r->ack == ACK_GET) {
        get_slot_t *g = (get_slot_t *)(uintptr_t)r->token;
        if (r->status)
            os_log(1, "a get sent as a request failed at its target: %s",
                   os_status_name((os_status_t)r->status));
        else if (dlen == g->rbytes)
            os_dtype_unpack(g->rbuf, g->rtype, g->rcount, data, dlen);
        else
            os_log(1, "a get's reply brought %zu bytes, not %zu", dlen, g->rbytes);
        _Atomic int64_t *acks = g->acks;
        os_dtype_release(g->rtype);
        free(g);
        atomic_fetch_sub_explicit(acks, 1, memory_order_release);
        return;
    }
    if (r->ack) {
        atomic_fetch_sub_explicit((_Atomic int64_t *)(uintptr_t)r->token, 1,
                                  memory_order_release);
        return;
    }
    reply_slot_t *slot = (reply_slot_t *)(uintptr_t)r->token;
    if (slot->buf && dlen)
        os_copy(slot->buf, data, dlen < slot->cap ? dlen : slot->cap);
    slot->status = r->status;
    slot->grant = r->grant;
    atomic_store_explicit(&slot->done, 1, memory_order_release);
}


/* ------------------------------------------------------- held requests
 *
 * Over TCP each message is a system call at each end, and the kernel's TCP
 * path is most of a small request's cost: in a burst of 8-byte gets across
 * two hosts, 82-85% of both processes' time was the kernel's (perf), and
 * onesided's gets ran at 0.85-0.90 of MPICH's bandwidth, one message each
 * way as UCX's. So a put, get or accumulate-kind request that needs no
 * answer before the next synchronization (every one that counts in
 * w->acks: the flush waits for it) is held, per target, and the held ones
 * leave as one message: when the next would make the batch or its replies
 * larger than remote_batch_bytes, before any other request to that target
 * (so that the target still applies this origin's requests in issue order:
 * same-origin accumulate ordering, the lock release and MPI_Win_complete
 * behind the epoch's data), at every wait for the target's acknowledgements
 * (flush, unlock, fence, complete: os_req_await_acks) and at MPI_Win_sync.
 * MPI completes none of them before such a call; the origin's buffers are
 * copied, so puts and accumulates are complete locally on return. The
 * target serves the batch in order and its replies travel back together
 * (forward.c). Not held: R* operations (their MPI_Test may be all the
 * program calls), dynamic windows (their errors belong to the call), other
 * routes (forwarding aggregates there), and targets not on TCP alone (RDMA
 * and shared memory need no message). */
struct os_req_batch {
    os_fwd_batch_t fwd;
    size_t reply_bytes;  /* what the replies will carry back, headers included */
    size_t nslots, cap;  /* the held gets' reply slots, freed if the batch cannot leave */
    get_slot_t **slots;
};

static bool may_hold(const os_win_t *w, int target)
{
    return w->cfg.remote_batch_bytes > 0 && w->route == OS_ROUTE_DIRECT &&
           w->peers[target].tcp_only && w->flavor != OS_FLAVOR_DYNAMIC;
}

/* Send target's held requests. If they cannot leave, their acknowledgements
 * will never come: the counter forgets them, so no flush waits for ever. */
static os_status_t drain(os_win_t *w, int target)
{
    struct os_req_batch *b = w->req_batch ? &w->req_batch[target] : NULL;
    if (!b || !b->fwd.count)
        return OS_OK;
    const uint32_t n = b->fwd.count;
    os_status_t st = os_fwd_batch_send(&b->fwd, w->peers[target].world);
    if (st) {
        atomic_fetch_sub_explicit(&w->acks[target], n, memory_order_relaxed);
        for (size_t i = 0; i < b->nslots; i++) {
            os_dtype_release(b->slots[i]->rtype);
            free(b->slots[i]);
        }
    }
    b->nslots = 0;
    b->reply_bytes = 0;
    return st;
}

os_status_t os_req_drain_all(os_win_t *w)
{
    os_status_t first = OS_OK;
    for (int t = 0; w->req_batch && t < w->nranks; t++) {
        os_status_t st = drain(w, t);
        if (st && !first)
            first = st;
    }
    return first;
}

void os_req_batches_free(os_win_t *w)
{
    for (int t = 0; w->req_batch && t < w->nranks; t++) {
        os_fwd_batch_free(&w->req_batch[t].fwd);
        free(w->req_batch[t].slots);
    }
    free(w->req_batch);
    w->req_batch = NULL;
}

/* A request to target, on the window's route, behind those held for it. */
static os_status_t req_send(os_win_t *w, int target, const req_hdr_t *h, const void *data,
                            size_t dlen)
{
    os_status_t st = drain(w, target);
    if (st)
        return st;
    return os_fwd_send((os_route_t)w->route, w->cfg.agg_window_us, w->peers[target].world,
                       AM_REQUEST, h, sizeof *h, data, dlen);
}

/* A request counted in w->acks[target] (slot: a get's, or NULL), held when
 * it may be (above), else sent. */
static os_status_t req_send_counted(os_win_t *w, int target, const req_hdr_t *h,
                                    const void *data, size_t dlen, size_t rbytes,
                                    get_slot_t *slot)
{
    const size_t max = (size_t)w->cfg.remote_batch_bytes;
    const size_t need = os_fwd_batch_entry_bytes(sizeof *h, dlen);
    const size_t reply = os_fwd_batch_entry_bytes(sizeof(reply_hdr_t), rbytes);
    if (!may_hold(w, target) || need > max || reply > max)
        return req_send(w, target, h, data, dlen);
    if (!w->req_batch && !(w->req_batch = calloc((size_t)w->nranks, sizeof *w->req_batch)))
        return req_send(w, target, h, data, dlen);
    struct os_req_batch *b = &w->req_batch[target];
    os_status_t st;
    if (b->fwd.count && (b->fwd.len + need > max || b->reply_bytes + reply > max) &&
        (st = drain(w, target)))
        return st;
    if (slot && b->nslots == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        get_slot_t **p = realloc(b->slots, cap * sizeof *p);
        if (!p)
            return req_send(w, target, h, data, dlen);
        b->slots = p;
        b->cap = cap;
    }
    if ((st = os_fwd_batch_add(&b->fwd, w->peers[target].world, h, sizeof *h, data, dlen)))
        return st;
    b->reply_bytes += reply;
    if (slot)
        b->slots[b->nslots++] = slot;
    return OS_OK;
}

/* Send a request and wait for its reply (into buf, up to cap bytes). */
os_status_t os_req_call_grant(os_win_t *w, int target, req_hdr_t *h, const void *data,
                              size_t dlen, void *buf, size_t cap, uint8_t *grant)
{
    reply_slot_t slot = { .buf = buf, .cap = cap };
    h->win = w->id;
    h->src = w->rank;
    h->token = (uint64_t)(uintptr_t)&slot;
    h->ack = 0;
    OS_DEBUG("call kind %d to rank %d token %llx", h->kind, target, (unsigned long long)h->token);
    os_status_t st = req_send(w, target, h, data, dlen);
    if (st)
        return st;
    /* Each back-off progresses the worker and serves node-mates
     * (os_rma_wait_poll); a round of our own before it was a second per
     * poll. */
    os_backoff_t b = OS_BACKOFF_INIT;
    while (!atomic_load_explicit(&slot.done, memory_order_acquire))
        os_backoff_wait(&b);
    if (grant)
        *grant = slot.grant;
    if (slot.status)
        return OS_ERR((os_status_t)slot.status, "rank %d refused the request (see its log)",
                      target);
    return OS_OK;
}

os_status_t os_req_call(os_win_t *w, int target, req_hdr_t *h, const void *data, size_t dlen,
                        void *buf, size_t cap)
{
    return os_req_call_grant(w, target, h, data, dlen, buf, cap, NULL);
}

/* Send a request whose reply only decrements the target's ack counter. */
os_status_t os_req_post_acked(os_win_t *w, int target, req_hdr_t *h, const void *data,
                              size_t dlen, bool hold)
{
    h->win = w->id;
    h->src = w->rank;
    h->token = (uint64_t)(uintptr_t)&w->acks[target];
    h->ack = ACK_COUNT;
    atomic_fetch_add_explicit(&w->acks[target], 1, memory_order_relaxed);
    os_status_t st = hold ? req_send_counted(w, target, h, data, dlen, 0, NULL)
                          : req_send(w, target, h, data, dlen);
    if (st)
        atomic_fetch_sub_explicit(&w->acks[target], 1, memory_order_relaxed);
    return st;
}

/* A get whose reply scatters the bytes into rbuf and decrements the target's
 * ack counter, so that many can be in flight until the flush. */
os_status_t os_req_post_get(os_win_t *w, int target, req_hdr_t *h, const void *data,
                            size_t dlen, void *rbuf, os_dtype_t *rtype, size_t rcount,
                            size_t rbytes, bool hold)
{
    get_slot_t *g = malloc(sizeof *g);
    if (!g)
        return OS_ERR(OS_ERR_NOMEM, "a get's reply slot");
    *g = (get_slot_t){ .acks = &w->acks[target], .rbuf = rbuf, .rtype = rtype,
                       .rcount = rcount, .rbytes = rbytes };
    os_dtype_retain(rtype);
    h->win = w->id;
    h->src = w->rank;
    h->token = (uint64_t)(uintptr_t)g;
    h->ack = ACK_GET;
    atomic_fetch_add_explicit(&w->acks[target], 1, memory_order_relaxed);
    os_status_t st = hold ? req_send_counted(w, target, h, data, dlen, rbytes, g)
                          : req_send(w, target, h, data, dlen);
    if (st) {
        atomic_fetch_sub_explicit(&w->acks[target], 1, memory_order_relaxed);
        os_dtype_release(rtype);
        free(g);
    }
    return st;
}

os_status_t os_req_post_noreply(os_win_t *w, int target, req_hdr_t *h)
{
    h->win = w->id;
    h->src = w->rank;
    h->token = 0;
    return req_send(w, target, h, NULL, 0);
}

/* Runs of the target type, as offsets in the target's window (addresses for
 * dynamic windows), followed by the packed origin data. */
/* Scattered operations (an indexed type of many single elements, RandomAccess's
 * aggregated updates, strided transfers) send as many runs as elements: as
 * offset and length pairs, 16 bytes of runs per 8-byte element. Over TCP
 * the message's size is most of its cost, so runs of one length go as
 * 4-byte offsets; the target expands them (serve.c). */
enum { COMPACT_MIN_RUNS = 8 };

uint32_t os_req_compact_runs(char *m, size_t n, size_t *mlen)
{
    const os_run_t *runs = (const os_run_t *)m;
    if (n < COMPACT_MIN_RUNS || runs[0].len == 0 || runs[0].len > UINT32_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (runs[i].len != runs[0].len || runs[i].addr > UINT32_MAX)
            return 0;
    const uint32_t len = (uint32_t)runs[0].len;
    const size_t rest = *mlen - n * sizeof(os_run_t);
    /* In place, front to back: offset i goes to byte 4i, read from 16i. */
    for (size_t i = 0; i < n; i++) {
        uint32_t off = (uint32_t)runs[i].addr;
        memcpy(m + i * sizeof off, &off, sizeof off);
    }
    memmove(m + n * sizeof(uint32_t), m + n * sizeof(os_run_t), rest);
    *mlen = n * sizeof(uint32_t) + rest;
    return len;
}

os_status_t os_req_build(os_win_t *w, const os_rma_op_t *op, char *taddr, bool with_data,
                         char **msg, size_t *mlen, uint32_t *nruns, uint32_t *run_len,
                         size_t *total)
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
    if (with_data)
        os_dtype_pack(m + n * sizeof(os_run_t), op->otype, op->origin, op->ocount, bytes);
    if (extra)
        memcpy(m + n * sizeof(os_run_t) + (with_data ? bytes : 0), op->compare, extra);
    *msg = m;
    *mlen = size;
    *nruns = (uint32_t)n;
    *run_len = w->flavor == OS_FLAVOR_DYNAMIC ? 0 : os_req_compact_runs(m, n, mlen);
    *total = bytes;
    return OS_OK;
}

/* Until every accumulate sent to target as a request has been applied. */
void os_req_await_acks(os_win_t *w, int target)
{
    /* Those held leave first (a failed send is logged, and forgotten by
     * the counter). */
    (void)drain(w, target);
    os_backoff_t b = OS_BACKOFF_INIT;
    while (atomic_load_explicit(&w->acks[target], memory_order_acquire) > 0)
        os_backoff_wait(&b); /* progresses the worker (above) */
}

/* A request that carries an operation, inside a held lock: puts and
 * accumulates are acknowledged at the next flush, the rest wait for their
 * reply here (fetched bytes, rbytes of them, scattered into rbuf). */
os_status_t os_req_send_op(os_win_t *w, int target, req_hdr_t *h, const char *msg, size_t mlen,
                           void *rbuf, const os_dtype_t *rtype, size_t rcount, size_t rbytes,
                           bool hold)
{
    if ((h->kind == K_ACC || h->kind == K_PUT) && w->flavor != OS_FLAVOR_DYNAMIC)
        return os_req_post_acked(w, target, h, msg, mlen, hold);
    char *fetched = NULL;
    if (rbytes && !(fetched = malloc(rbytes)))
        return OS_ERR(OS_ERR_NOMEM, "reply buffer of %zu bytes", rbytes);
    os_status_t st = os_req_call(w, target, h, msg, mlen, fetched, rbytes);
    if (!st && fetched)
        os_dtype_unpack(rbuf, rtype, rcount, fetched, rbytes);
    free(fetched);
    return st;
}


/* What was sent to target is complete there: RDMA flushed, requests acknowledged. */
os_status_t os_req_flush(os_win_t *w, int target)
{
    os_status_t st = OS_OK;
    if (w->dirty[target]) {
        st = os_ucx_flush(w->peers[target].rdma_world);
        w->dirty[target] = 0;
    }
    os_status_t st2 = drain(w, target);
    os_req_await_acks(w, target);
    return st ? st : st2;
}
