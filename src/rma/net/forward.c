/*
 * Between nodes: moving requests and replies, the network path's lowest
 * layer (os_net.h). A message goes to its destination directly, or along a
 * request route with forwarding and aggregation (paper 004, multinode
 * cooperation; os_route.h says who forwards for whom). What arrives for this
 * process goes to the handlers the layers above gave os_fwd_setup, so that
 * this file calls none of them by name.
 *
 * A routed message is a batch of entries, each naming its final destination
 * and its first sender (MPI_COMM_WORLD ranks) around a request or reply as
 * request.c and serve.c build them. A process that receives a batch hands
 * the entries addressed to it to the request or reply handler; a node server applies data requests for its node-mates
 * itself, in the node's shared memory, as any process of the node may; it
 * queues the rest for their next hop. Replies go back
 * by the same routing function (no process remembers a request it passed
 * on), named by a reply handle that encodes the origin and the route.
 *
 * Aggregation: a queue per next hop. An entry that may wait (its window's
 * onesided_agg_window_us > 0) stays until its window ends or the queue
 * reaches ONESIDED_AGG_BYTES, so that entries bound for the same next
 * server travel as one message; an entry that may not wait leaves with the
 * next flush. A forwarding server blocks on its UCX worker's event
 * descriptor (the progress thread, ucx.c): the idle hook tells it when the
 * earliest held batch is due, or without that timer asks for the periodic
 * wake-up (OS_UCX_IDLE_US), which sends whatever is overdue (the stalemate
 * the paper breaks with an empty message between servers).
 *
 * Ordering: an origin's requests to one target all take one path; each
 * hop's queue is FIFO and UCX delivers one endpoint's eager messages in
 * order, so they arrive in issue order, as on the direct route (same-origin
 * accumulate ordering). Completion is unchanged: the target answers after
 * applying, and the answer travels back before flush or unlock returns.
 *
 * Threads and locks: handlers (transport lock held) only queue; sending
 * happens in the idle hook or in the application thread, under the send
 * lock but never under the queue lock (lock order: send lock, transport,
 * request server's registry, queue lock).
 */
#include "os_net.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* One entry of a routed batch, followed by hlen + dlen bytes, padded to 8. */
typedef struct {
    int32_t dst, src;  /* world ranks: where it goes, who sent it first */
    uint8_t am;        /* AM_REQUEST or AM_REPLY */
    uint8_t route;     /* os_route_t: the reply goes back the same way */
    uint16_t agg_us;   /* how long a forwarding server may hold it */
    uint32_t hlen, dlen;
    uint32_t pad;
} entry_t;

/* The active message's header: the previous hop and the entries. */
typedef struct {
    int32_t from;
    uint32_t count;
} batch_hdr_t;

/* Entries waiting for one next hop. */
typedef struct {
    int peer;
    char *buf;
    size_t len, cap;
    uint32_t count;
    bool due;         /* send at the next flush */
    double deadline;  /* the held entries' window ends (0: none held) */
} outq_t;

static struct {
    pthread_mutex_t lock;
    /* Held from taking a queue's entries until they are handed to UCX: two
     * threads that flushed at once could otherwise send a later batch of a
     * queue before an earlier one (the ordering test caught it). Taken
     * before `lock`, never inside a handler. */
    pthread_mutex_t send_lock;
    bool ready;
    int me;
    os_fwd_handlers_t up;     /* the layers above: where arriving messages go */
    os_route_t job;           /* ONESIDED_ROUTE: the servers run */
    os_route_topo_t topo;
    os_hmap_t queues;         /* peer + 1 -> outq_t */
    outq_t **list;            /* every queue, for flushing */
    int nlist, caplist;
    uint64_t *peers;          /* bitset: processes exchanged requests with */
    _Atomic uint64_t forwarded, aggregated, batches, messages, applied;
    _Atomic int npeers;
    /* Entries in the queues: the idle hook's test, one load per progress
     * round, since a target's replies to held batches (request.c) pass
     * through queues on the direct route too. */
    _Atomic uint64_t queued;
    size_t buffer_bytes;
} R = { .lock = PTHREAD_MUTEX_INITIALIZER, .send_lock = PTHREAD_MUTEX_INITIALIZER };

static inline size_t pad8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

static void on_routed(void *arg, void *reply, const void *hdr, size_t hlen, const void *data,
                      size_t dlen);

/* ------------------------------------------------------------ bookkeeping */

void os_fwd_note_peer(int world)
{
    if (!R.peers || world < 0 || world >= R.topo.nprocs || world == R.me)
        return;
    _Atomic uint64_t *word = (_Atomic uint64_t *)&R.peers[world / 64];
    const uint64_t bit = 1ull << (world % 64);
    if (!(atomic_fetch_or_explicit(word, bit, memory_order_relaxed) & bit))
        atomic_fetch_add_explicit(&R.npeers, 1, memory_order_relaxed);
}

static bool is_server(void)
{
    return R.topo.server[R.topo.node_of[R.me]] == R.me;
}

/* The backoff hook: progress the network, but never from inside a handler
 * (UCX does not allow recursive progress). */
static __thread int progress_depth;
void os_fwd_progress(void)
{
    if (progress_depth)
        return;
    progress_depth++;
    os_ucx_progress();
    progress_depth--;
}

void os_net_wait_poll(void)
{
    if (R.ready)
        os_fwd_progress();
}

static int idle(unsigned events);

os_status_t os_fwd_setup(int nprocs, int me, const int *server_of, const os_fwd_handlers_t *h)
{
    os_status_t st;
    R.me = me;
    R.up = *h;
    R.job = (os_route_t)os_config.route;
    if (R.job < OS_ROUTE_DIRECT || R.job > OS_ROUTE_COOPERATIVE) {
        os_log(1, "ONESIDED_ROUTE=%d is not a route: direct", os_config.route);
        R.job = OS_ROUTE_DIRECT;
    }
    if ((st = os_route_topo_init(&R.topo, nprocs, server_of, os_config.group_size)))
        return st;
    R.peers = calloc((size_t)(nprocs + 63) / 64, sizeof *R.peers);
    if (!R.peers)
        return OS_ERR(OS_ERR_NOMEM, "request peer set of %d processes", nprocs);
    if ((st = os_ucx_am_register(AM_REQUEST, h->request, NULL)) ||
        (st = os_ucx_am_register(AM_REPLY, h->reply, NULL)) ||
        (st = os_ucx_am_register(AM_ROUTED, on_routed, NULL)))
        return st;
    os_ucx_set_idle_hook(idle);
    R.ready = true;
    /* A server forwards while its application computes or waits in the
     * host MPI: only a thread of its own can. */
    if (R.job != OS_ROUTE_DIRECT && is_server())
        st = os_ucx_progress_thread_start();
    return st;
}

os_route_t os_fwd_job(void)
{
    return R.ready ? R.job : OS_ROUTE_DIRECT;
}

/* ------------------------------------------------------------------ queues */

static outq_t *queue_of(int peer)
{
    outq_t *q = os_hmap_get(&R.queues, (uintptr_t)peer + 1);
    if (q)
        return q;
    if (R.nlist == R.caplist) {
        int cap = R.caplist ? 2 * R.caplist : 8;
        outq_t **l = realloc(R.list, sizeof *l * (size_t)cap);
        if (!l)
            return NULL;
        R.list = l;
        R.caplist = cap;
    }
    if (!(q = calloc(1, sizeof *q)))
        return NULL;
    q->peer = peer;
    if (os_hmap_put(&R.queues, (uintptr_t)peer + 1, q)) {
        free(q);
        return NULL;
    }
    R.list[R.nlist++] = q;
    return q;
}

/* Append an entry for next hop `peer`; under R.lock. */
static os_status_t enqueue(int peer, const entry_t *e, const void *hdr, const void *data)
{
    outq_t *q = queue_of(peer);
    const size_t need = sizeof *e + pad8((size_t)e->hlen + e->dlen);
    if (!q)
        return OS_ERR(OS_ERR_NOMEM, "route queue for process %d", peer);
    if (q->len + need > q->cap) {
        size_t cap = q->cap ? q->cap : (size_t)(os_config.agg_bytes > 0 ? os_config.agg_bytes : 4096);
        while (cap < q->len + need)
            cap *= 2;
        char *b = realloc(q->buf, cap);
        if (!b)
            return OS_ERR(OS_ERR_NOMEM, "route queue of %zu bytes", cap);
        R.buffer_bytes += cap - q->cap;
        q->buf = b;
        q->cap = cap;
    }
    char *p = q->buf + q->len;
    memcpy(p, e, sizeof *e);
    memcpy(p + sizeof *e, hdr, e->hlen);
    if (e->dlen)
        memcpy(p + sizeof *e + e->hlen, data, e->dlen);
    q->len += need;
    q->count++;
    atomic_fetch_add_explicit(&R.queued, 1, memory_order_relaxed);
    /* Only a forwarding server holds entries: the process that sends a
     * request or reply first has nothing to gather it with. */
    if (!e->agg_us || e->src == R.me || q->len >= (size_t)os_config.agg_bytes) {
        q->due = true;
    } else {
        const double end = os_now() + e->agg_us * 1e-6;
        if (!q->deadline || end < q->deadline)
            q->deadline = end;
    }
    os_fwd_note_peer(peer);
    return OS_OK;
}

/* A detached queue's contents, to send outside the lock. */
typedef struct {
    int peer;
    char *buf;
    size_t len;
    uint32_t count;
} sendable_t;

/* Send a detached queue: runs of entries that may wait go as one batch,
 * each entry that may not goes on its own (forwarding without aggregation
 * is one message per request, as the paper's). Order is kept. */
static void send_entries(const sendable_t *s)
{
    size_t pos = 0;
    while (pos < s->len) {
        size_t start = pos, end = pos;
        uint32_t n = 0;
        for (;;) {
            entry_t e;
            memcpy(&e, s->buf + end, sizeof e);
            const size_t size = sizeof e + pad8((size_t)e.hlen + e.dlen);
            if (n && !e.agg_us)
                break; /* a lone entry starts its own message */
            end += size;
            n++;
            if (!e.agg_us || end >= s->len)
                break;
            entry_t next;
            memcpy(&next, s->buf + end, sizeof next);
            if (!next.agg_us)
                break;
        }
        batch_hdr_t bh = { .from = R.me, .count = n };
        os_status_t st = os_ucx_am_send(s->peer, AM_ROUTED, &bh, sizeof bh, s->buf + start,
                                        end - start);
        if (st)
            os_log(1, "cannot forward %u request(s) to process %d: %s", n, s->peer,
                   os_status_name(st));
        atomic_fetch_add_explicit(&R.messages, 1, memory_order_relaxed);
        if (n > 1) {
            atomic_fetch_add_explicit(&R.batches, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&R.aggregated, n, memory_order_relaxed);
        }
        pos = end;
    }
}

/* Send every queue that is due (all of them with `all`); returns the
 * microseconds until the earliest held batch is due, -1 when none is held. */
static int flush(bool all)
{
    sendable_t stack[8], *out = stack;
    int nout = 0, cap = 8, wait_us = -1;
    const double now = os_now();
    pthread_mutex_lock(&R.send_lock);
    pthread_mutex_lock(&R.lock);
    for (int i = 0; i < R.nlist; i++) {
        outq_t *q = R.list[i];
        if (!q->count)
            continue;
        if (!all && !q->due && q->deadline > now) {
            int us = (int)((q->deadline - now) * 1e6) + 1;
            if (wait_us < 0 || us < wait_us)
                wait_us = us;
            continue;
        }
        if (nout == cap) {
            sendable_t *bigger = malloc(sizeof *bigger * (size_t)cap * 2);
            if (!bigger)
                break; /* the rest leaves at the next flush */
            memcpy(bigger, out, sizeof *out * (size_t)nout);
            if (out != stack)
                free(out);
            out = bigger;
            cap *= 2;
        }
        /* Hand the buffer over; the queue starts a new one of the same size. */
        out[nout++] = (sendable_t){ q->peer, q->buf, q->len, q->count };
        atomic_fetch_sub_explicit(&R.queued, q->count, memory_order_relaxed);
        char *fresh = malloc(q->cap);
        if (!fresh)
            R.buffer_bytes -= q->cap;
        q->buf = fresh;
        q->cap = fresh ? q->cap : 0;
        q->len = 0;
        q->count = 0;
        q->due = false;
        q->deadline = 0;
    }
    pthread_mutex_unlock(&R.lock);
    for (int i = 0; i < nout; i++) {
        send_entries(&out[i]);
        free(out[i].buf);
    }
    pthread_mutex_unlock(&R.send_lock);
    if (out != stack)
        free(out);
    return wait_us;
}

/* ---------------------------------------------------------------- sending */

static os_status_t route_send(os_route_t route, int agg_us, int dst, unsigned am, const void *hdr,
                          size_t hlen, const void *data, size_t dlen)
{
    const entry_t e = { .dst = dst, .src = R.me, .am = (uint8_t)am, .route = (uint8_t)route,
                        .agg_us = (uint16_t)(agg_us < 0 ? 0 : agg_us > 65535 ? 65535 : agg_us),
                        .hlen = (uint32_t)hlen, .dlen = (uint32_t)dlen };
    const int next = os_route_next(&R.topo, route, R.me, dst);
    pthread_mutex_lock(&R.lock);
    os_status_t st = enqueue(next, &e, hdr, data);
    pthread_mutex_unlock(&R.lock);
    if (st)
        return st;
    /* Inside a handler the idle hook sends it (ucx.c: handlers never open
     * endpoints); elsewhere now, and the progress thread learns of a held
     * batch's deadline. */
    if (!os_ucx_in_handler() && flush(false) >= 0)
        os_ucx_wake();
    return OS_OK;
}

os_status_t os_fwd_send(os_route_t route, int agg_us, int dst, unsigned am, const void *hdr,
                        size_t hlen, const void *data, size_t dlen)
{
    if (!R.ready)
        return OS_ERR(OS_ERR_OTHER, "the network path was not set up");
    if (route == OS_ROUTE_DIRECT) {
        /* Only origins' requests come here, sent by a thread that holds
         * none of this layer's locks: a large one may wait for UCX to have
         * sent it from the caller's buffer (route_send's flush may not: it
         * holds send_lock, which the idle hook takes). */
        os_fwd_note_peer(dst);
        return os_ucx_am_send_wait(dst, am, hdr, hlen, data, dlen);
    }
    return route_send(route, agg_us, dst, am, hdr, hlen, data, dlen);
}

/* ------------------------------------------------- an origin's held batch */

size_t os_fwd_batch_entry_bytes(size_t hlen, size_t dlen)
{
    return sizeof(entry_t) + pad8(hlen + dlen);
}

os_status_t os_fwd_batch_add(os_fwd_batch_t *b, int dst, const void *hdr, size_t hlen,
                             const void *data, size_t dlen)
{
    /* agg_us 1: the target's replies to these may travel together
     * (send_entries); no server holds them, the route being direct. */
    const entry_t e = { .dst = dst, .src = R.me, .am = AM_REQUEST, .route = OS_ROUTE_DIRECT,
                        .agg_us = 1, .hlen = (uint32_t)hlen, .dlen = (uint32_t)dlen };
    const size_t need = os_fwd_batch_entry_bytes(hlen, dlen);
    if (b->len + need > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + need)
            cap *= 2;
        char *p = realloc(b->buf, cap);
        if (!p)
            return OS_ERR(OS_ERR_NOMEM, "request batch of %zu bytes", cap);
        b->buf = p;
        b->cap = cap;
    }
    char *p = b->buf + b->len;
    memcpy(p, &e, sizeof e);
    memcpy(p + sizeof e, hdr, hlen);
    if (dlen)
        memcpy(p + sizeof e + hlen, data, dlen);
    b->len += need;
    b->count++;
    return OS_OK;
}

os_status_t os_fwd_batch_send(os_fwd_batch_t *b, int dst)
{
    os_status_t st = OS_OK;
    if (b->count == 1) {
        /* Alone, as it would have gone unheld: the target answers it
         * straight from its handler, with no queue of replies to pass. */
        entry_t e;
        memcpy(&e, b->buf, sizeof e);
        const char *hdr = b->buf + sizeof e;
        st = os_fwd_send(OS_ROUTE_DIRECT, 0, dst, e.am, hdr, e.hlen, hdr + e.hlen, e.dlen);
    } else if (b->count > 1) {
        const batch_hdr_t bh = { .from = R.me, .count = b->count };
        os_fwd_note_peer(dst);
        st = os_ucx_am_send_wait(dst, AM_ROUTED, &bh, sizeof bh, b->buf, b->len);
        atomic_fetch_add_explicit(&R.messages, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&R.batches, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&R.aggregated, b->count, memory_order_relaxed);
    }
    b->len = 0;
    b->count = 0;
    return st;
}

void os_fwd_batch_free(os_fwd_batch_t *b)
{
    free(b->buf);
    *b = (os_fwd_batch_t){ 0 };
}

/* Reply handles: the transport's (a reply endpoint, an aligned pointer) or
 * ours, odd: bit 0 set, route in bits 1-2, the window in 3-18, the origin
 * above. */
static void *route_handle(int src, int route, int agg_us)
{
    return (void *)(((uintptr_t)(unsigned)src << 19) | ((uintptr_t)(agg_us & 0xffff) << 3) |
                    ((uintptr_t)(route & 3) << 1) | 1);
}

bool os_fwd_is_handle(const void *reply)
{
    return (uintptr_t)reply & 1;
}

os_status_t os_fwd_answer(void *reply, unsigned am, const void *hdr, size_t hlen,
                            const void *data, size_t dlen)
{
    const uintptr_t v = (uintptr_t)reply;
    if (!(v & 1))
        return os_ucx_am_reply(reply, am, hdr, hlen, data, dlen);
    return route_send((os_route_t)((v >> 1) & 3), (int)((v >> 3) & 0xffff), (int)(v >> 19), am,
                      hdr, hlen, data, dlen);
}

/* -------------------------------------------------------------- receiving */

static void on_routed(void *arg, void *reply, const void *hdr, size_t hlen, const void *data,
                      size_t dlen)
{
    (void)arg;
    (void)reply;
    batch_hdr_t bh;
    if (hlen < sizeof bh) {
        os_log(1, "a routed message without its header dropped");
        return;
    }
    memcpy(&bh, hdr, sizeof bh);
    os_fwd_note_peer(bh.from);
    const char *p = data, *end = p + dlen;
    for (uint32_t i = 0; i < bh.count; i++) {
        entry_t e;
        if ((size_t)(end - p) < sizeof e) {
            os_log(1, "a routed message from process %d ends early; %u entries lost", bh.from,
                   bh.count - i);
            return;
        }
        memcpy(&e, p, sizeof e);
        const char *eh = p + sizeof e, *ed = eh + e.hlen;
        p += sizeof e + pad8((size_t)e.hlen + e.dlen);
        if (p > end) {
            os_log(1, "a routed message from process %d ends early", bh.from);
            return;
        }
        if (e.dst != R.me && e.am == AM_REQUEST &&
            R.topo.node_of[e.dst] == R.topo.node_of[R.me] &&
            R.up.serve_for(e.dst, route_handle(e.src, e.route, e.agg_us), eh, e.hlen, ed,
                           e.dlen)) {
            /* The node server applies it to its node-mate's memory: one hop,
             * and the target's thread, saved. */
            atomic_fetch_add_explicit(&R.applied, 1, memory_order_relaxed);
            continue;
        }
        if (e.dst != R.me) {
            /* Passing on. */
            const int next = os_route_next(&R.topo, (os_route_t)e.route, R.me, e.dst);
            pthread_mutex_lock(&R.lock);
            os_status_t st = enqueue(next, &e, eh, ed);
            pthread_mutex_unlock(&R.lock);
            if (st)
                os_log(1, "a request from process %d to %d dropped: %s", e.src, e.dst,
                       os_status_name(st));
            else
                atomic_fetch_add_explicit(&R.forwarded, 1, memory_order_relaxed);
            continue;
        }
        /* Ours: a request to serve (answered by route), or a reply. Both
         * read their header through an aligned copy. */
        if (e.am == AM_REQUEST)
            R.up.request(NULL, route_handle(e.src, e.route, e.agg_us), eh, e.hlen, ed, e.dlen);
        else
            R.up.reply(NULL, NULL, eh, e.hlen, ed, e.dlen);
    }
}

/* Routed batches held for more: send what is due (everything when the
 * last progress round delivered no event); microseconds until a held batch
 * is due, -1 when none is held. */
static int route_idle(unsigned events)
{
    if (!atomic_load_explicit(&R.queued, memory_order_relaxed))
        return -1;
    /* The event-driven window: a server holds entries only while events
     * keep coming (more requests to gather); once a progress round finds
     * nothing new, what it holds leaves. A lone request is never held. */
    const int wait_us = flush(events == 0 && os_config.agg_idle_close);
    /* Without the timer, a held batch waits for the periodic wake-up. */
    if (os_config.agg_timer)
        return wait_us;
    return wait_us >= 0 ? OS_UCX_IDLE_US : -1;
}

/* The transport's idle hook: the retries of the layers above (a lock
 * request waits for a CPU unlock, which sends no message: every
 * OS_UCX_RETRY_US) and the forwarding queues' held batches. */
static int idle(unsigned events)
{
    const int retry = R.up.retry ? R.up.retry() : -1;
    const int route = route_idle(events);
    return retry < 0 ? route : route < 0 || retry < route ? retry : route;
}

void os_net_drain(void)
{
    if (R.ready)
        (void)flush(true);
}

void os_fwd_stats(onesided_win_stats_t *s)
{
    s->counter[ONESIDED_STAT_REQUESTS_FORWARDED] = atomic_load(&R.forwarded);
    s->counter[ONESIDED_STAT_REQUESTS_APPLIED_FOR_NODE] = atomic_load(&R.applied);
    s->counter[ONESIDED_STAT_REQUESTS_AGGREGATED] = atomic_load(&R.aggregated);
    s->counter[ONESIDED_STAT_ROUTE_BATCHES] = atomic_load(&R.batches);
    s->counter[ONESIDED_STAT_ROUTE_MESSAGES] = atomic_load(&R.messages);
    s->counter[ONESIDED_STAT_REQUEST_PEERS] = (uint64_t)atomic_load(&R.npeers);
    s->counter[ONESIDED_STAT_ENDPOINTS] = (uint64_t)os_ucx_endpoints();
    pthread_mutex_lock(&R.lock);
    s->counter[ONESIDED_STAT_REQUEST_BUFFER_BYTES] = R.buffer_bytes;
    pthread_mutex_unlock(&R.lock);
}
