/*
 * Between nodes, the target side: the request server. Requests from
 * origins on other nodes (origin.c says which operations travel as
 * requests) are served during progress: by the progress thread, or by any
 * wait of the target process. Serving never blocks, because it may run
 * inside a wait of the same thread: a request that would have to wait (for
 * the accumulate mutex, a bulk accumulate, or its turn on the lock) is kept
 * and retried from the transport's idle hook.
 */
#include "os_net.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* -------------------------------------------------------------- registry */

/* The windows this process serves: a list for the hybrid managers' polls,
 * and by id for requests. With a window per array (Global Arrays) a
 * thousand may be alive, and a scan of them per request served and per
 * MPI_Win_free grew with their number. */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static os_win_t **reg_wins; /* reg_wins[w->serve_slot] == w; NULL: a slot freed since */
static int reg_n, reg_cap, reg_holes;
static os_hmap_t reg_by_id;

/* Requests kept for a retry, and lock requests waiting for their turn. */
typedef struct pending {
    struct pending *next;
    void *reply;      /* the connection to answer on */
    int target;       /* whose memory (window rank): ours, or a node-mate's (os_serve_for) */
    req_hdr_t h;
    uint16_t ticket;  /* K_LOCK, K_LOCK_OP: the ticket drawn on the target's lock */
    uint8_t wait;     /* K_LOCK: wait_t */
    bool granted;     /* K_LOCK_OP: the lock is held, the operation waits for the mutex */
    size_t dlen;
    char data[];
} pending_t;
static pending_t *pending_head, **pending_tail = &pending_head;
static _Atomic int npending;
/* Hybrid managers away from CPU mode: they must be polled even with no
 * request kept (a migration back starts when a local locker waits), soon
 * (busy) or at the progress thread's periodic wake-up (resting: hyb_class).
 * Each window counts in one of them, or none in CPU mode (w->hyb_class).
 * hyb_resting_mates counts the resting ones whose node has other
 * processes: only a node-mate can draw a CPU ticket that a resting manager
 * must notice, so only those ask for the wake-up (os_serve_retry). */
static _Atomic int hyb_busy, hyb_resting, hyb_resting_mates;
/* When the resting managers were last polled (os_ticks). */
static _Atomic uint64_t hyb_rest_polled;

/* What a kept lock request waits for. */
typedef enum {
    WAIT_TICKET,    /* its ticket on the CPU lock: then GRANT_CPU */
    WAIT_MIGRATED,  /* the migration it started: then GRANT_NET */
    WAIT_MIGRATION, /* the end of somebody else's migration: then GRANT_RETRY */
} wait_t;

static os_win_t *find_win(uint64_t id)
{
    return os_hmap_get(&reg_by_id, (uintptr_t)id);
}

/* --------------------------------------------------------------- replies */

/* Lock order: the transport's lock (ucx.c; held while a handler runs) before
 * reg_lock. Code that takes reg_lock outside a handler (the retry of kept
 * requests) must not call UCX until it lets go, so its replies wait in an
 * outbox of the thread. */
typedef struct outbox {
    struct outbox *next;
    void *reply;
    reply_hdr_t r;
    size_t dlen;
    char data[];
} outbox_t;
static __thread bool hold_replies;
static __thread outbox_t *outbox;

static void send_now(void *reply, const reply_hdr_t *r, const void *data, size_t dlen)
{
    os_status_t s = os_fwd_answer(reply, AM_REPLY, r, sizeof *r, data, dlen);
    if (s)
        os_log(1, "cannot answer a request: %s", os_status_name(s));
}

static void send_reply_grant(void *reply, const req_hdr_t *h, os_status_t st, uint8_t grant,
                             const void *data, size_t dlen)
{
    if (!h->token)
        return;
    OS_DEBUG("reply kind %d to rank %d token %llx", h->kind, h->src, (unsigned long long)h->token);
    reply_hdr_t r = { .token = h->token, .status = st, .ack = h->ack, .grant = grant };
    if (!hold_replies) {
        send_now(reply, &r, data, dlen);
        return;
    }
    outbox_t *o = malloc(sizeof *o + dlen);
    if (!o) {
        os_log(1, "cannot answer rank %d: out of memory", h->src);
        return;
    }
    o->reply = reply;
    o->r = r;
    o->dlen = dlen;
    if (dlen)
        os_copy(o->data, data, dlen);
    o->next = outbox;
    outbox = o;
}

static void send_reply(void *reply, const req_hdr_t *h, os_status_t st, const void *data,
                       size_t dlen)
{
    send_reply_grant(reply, h, st, GRANT_CPU, data, dlen);
}

static void flush_outbox(void)
{
    /* Built newest first; send oldest first. */
    outbox_t *rev = NULL;
    while (outbox) {
        outbox_t *o = outbox;
        outbox = o->next;
        o->next = rev;
        rev = o;
    }
    while (rev) {
        outbox_t *o = rev;
        rev = o->next;
        send_now(o->reply, &o->r, o->data, o->dlen);
        free(o);
    }
}

/* ------------------------------------------------------- the target side */

static void count_served(os_win_t *w)
{
    atomic_fetch_add_explicit(&w->served, 1, memory_order_relaxed);
    if (os_ucx_in_progress_thread())
        atomic_fetch_add_explicit(&w->served_thread, 1, memory_order_relaxed);
    else if (os_ucx_in_host_progress())
        atomic_fetch_add_explicit(&w->served_in_host, 1, memory_order_relaxed);
}

/* Resolve and check the runs of a request against the memory of target
 * (this process, or a node-mate whose memory it maps). */
static os_status_t resolve(os_win_t *w, int target, const req_hdr_t *h, const os_run_t *runs,
                           char **addr)
{
    const os_peer_t *me = &w->peers[target];
    for (uint32_t i = 0; i < h->nruns; i++) {
        if (w->flavor == OS_FLAVOR_DYNAMIC) {
            if (!os_dyn_find(w, target, runs[i].addr, runs[i].len))
                return OS_ERR(OS_ERR_RANGE, "address 0x%lx+%lu of rank %d is not in memory "
                              "attached to the dynamic window", (unsigned long)runs[i].addr,
                              (unsigned long)runs[i].len, target);
            addr[i] = (char *)(uintptr_t)runs[i].addr;
        } else {
            if (runs[i].addr > (uint64_t)me->size || runs[i].len > (uint64_t)me->size - runs[i].addr)
                return OS_ERR(OS_ERR_RANGE, "bytes [%lu, %lu) lie outside the window of rank %d",
                              (unsigned long)runs[i].addr,
                              (unsigned long)(runs[i].addr + runs[i].len), target);
            addr[i] = me->base + runs[i].addr;
        }
    }
    return OS_OK;
}

/* Serve one data request on target's memory; false when it must wait
 * (kept for a retry). */
static bool serve_op_aligned(os_win_t *w, int target, void *reply, const req_hdr_t *h,
                             const char *data);
static bool serve_compact(os_win_t *w, int target, void *reply, const req_hdr_t *h,
                          const char *data, size_t dlen);
static bool serve_op(os_win_t *w, int target, void *reply, const req_hdr_t *h, const char *data,
                     size_t dlen)
{
    if (h->run_len)
        return serve_compact(w, target, reply, h, data, dlen);
    /* The network delivers bytes at any alignment; runs and elements are read
     * as 8-byte words and CPU atomics, so realign first when needed. */
    if (!((uintptr_t)data & 7))
        return serve_op_aligned(w, target, reply, h, data);
    char *copy = malloc(dlen ? dlen : 1);
    if (!copy) {
        send_reply(reply, h, OS_ERR(OS_ERR_NOMEM, "request of %zu bytes", dlen), NULL, 0);
        return true;
    }
    os_copy(copy, data, dlen);
    bool done = serve_op_aligned(w, target, reply, h, copy);
    free(copy);
    return done;
}

/* Runs sent as 4-byte offsets of one length (os_req_compact_runs): expanded
 * to offset and length pairs, aligned, for the rest of the server. A request
 * kept for a retry keeps its compact form and is expanded again. */
static bool serve_compact(os_win_t *w, int target, void *reply, const req_hdr_t *h,
                          const char *data, size_t dlen)
{
    const size_t n = h->nruns, packed = n * sizeof(uint32_t);
    if (dlen < packed) {
        send_reply(reply, h, OS_ERR(OS_ERR_OTHER, "a request of %zu bytes from rank %d cannot "
                                    "hold its %zu runs", dlen, h->src, n), NULL, 0);
        return true;
    }
    const size_t rest = dlen - packed, size = n * sizeof(os_run_t) + rest;
    char *full = malloc(size ? size : 1);
    if (!full) {
        send_reply(reply, h, OS_ERR(OS_ERR_NOMEM, "request of %zu bytes", size), NULL, 0);
        return true;
    }
    os_run_t *runs = (os_run_t *)full;
    for (size_t i = 0; i < n; i++) {
        uint32_t off;
        memcpy(&off, data + i * sizeof off, sizeof off);
        runs[i] = (os_run_t){ off, h->run_len };
    }
    memcpy(full + n * sizeof(os_run_t), data + packed, rest);
    req_hdr_t x = *h;
    x.run_len = 0;
    bool done = serve_op_aligned(w, target, reply, &x, full);
    free(full);
    return done;
}

static bool serve_op_aligned(os_win_t *w, int target, void *reply, const req_hdr_t *h,
                             const char *data)
{
    /* Ends of epochs, served as data requests: in order behind this origin's
     * operations of the epoch (origin.c, lock.c). */
    if (h->kind == K_COMPLETE) {
        atomic_fetch_add_explicit(os_win_remote_completes(w), 1, memory_order_release);
        count_served(w);
        send_reply(reply, h, OS_OK, NULL, 0);
        return true;
    }
    if (h->kind == K_UNLOCK) {
        if (h->op)
            os_lock_release_excl(&w->ctl[w->rank].lock);
        else
            os_lock_release_shared(&w->ctl[w->rank].lock);
        count_served(w);
        send_reply(reply, h, OS_OK, NULL, 0);
        return true;
    }
    if (h->kind == K_NET_RELEASE) {
        /* Only origins that reach this process over TCP alone send it, and
         * there every atomic on the word is a CPU atomic: UCX's emulation
         * in this worker, or a node-mate's. */
        atomic_fetch_add_explicit(w->netword, os_nl_release(h->op).value, memory_order_acq_rel);
        count_served(w);
        send_reply(reply, h, OS_OK, NULL, 0);
        return true;
    }
    const os_run_t *runs = (const os_run_t *)data;
    const char *odata = data + h->nruns * sizeof(os_run_t);
    size_t total = 0;
    for (uint32_t i = 0; i < h->nruns; i++)
        total += runs[i].len;
    char *stack_addr[8], **addr = h->nruns <= 8 ? stack_addr : malloc(sizeof *addr * h->nruns);
    char *out = NULL;
    os_status_t st = addr ? resolve(w, target, h, runs, addr)
                          : OS_ERR(OS_ERR_NOMEM, "request of %u runs", h->nruns);
    bool fetch = h->kind == K_FETCH || h->kind == K_CAS || h->kind == K_GET;
    if (!st && fetch && !(out = malloc(total ? total : 1)))
        st = OS_ERR(OS_ERR_NOMEM, "reply of %zu bytes", total);
    if (!st) {
        switch (h->kind) {
        case K_PUT:
        case K_GET: {
            size_t pos = 0;
            for (uint32_t i = 0; i < h->nruns; pos += runs[i].len, i++) {
                if (h->kind == K_PUT)
                    os_copy(addr[i], odata + pos, runs[i].len);
                else
                    os_copy(out + pos, addr[i], runs[i].len);
            }
            break;
        }
        default:
            if (!os_acc_try_apply(w, target, h->kind == K_CAS, h->kind != K_ACC, (os_op_t)h->op,
                                  (os_basic_t)h->basic, h->esize, addr, runs, h->nruns,
                                  h->op == OS_OP_NO_OP && h->kind != K_CAS ? NULL : odata, out,
                                  h->kind == K_CAS ? odata + h->esize : NULL)) {
                if (addr != stack_addr)
                    free(addr);
                free(out);
                return false;
            }
            break;
        }
    }
    count_served(w);
    send_reply(reply, h, st, out, st ? 0 : (fetch ? total : 0));
    if (addr != stack_addr)
        free(addr);
    free(out);
    return true;
}

/* In shared mode the manager's step reads the network word (has a network
 * writer set WANT?) and the CPU lock (is a node writer stalled?). Every read
 * takes the word's cache line from the network readers, whose next atomic on
 * it then misses; and the target's host MPI runs this step from its poll
 * loop, every fraction of a microsecond: a shared lock-put-unlock between
 * virtual nodes took 0.13-0.16 us instead of 0.06 (Open MPI 5.0.11, target
 * in MPI_Recv). The state is steady, and a writer that waits for it to end
 * waits for the readers anyway: look at most every OS_HYB_SHARED_POLL_US,
 * which adds at most that much to a writer's handover. */
enum { OS_HYB_SHARED_POLL_US = 10 };

/* A hybrid manager at rest: in network mode where this process's policy
 * keeps the lock on the word (os_hyb_stays_on_word), the node's lockers
 * take the word and draw no CPU ticket, so nothing comes for the manager
 * to do. It is polled at the progress thread's periodic wake-up only
 * (OS_UCX_IDLE_US), not every OS_UCX_RETRY_US: lock words start in network
 * mode on every window of virtual nodes of one host (net/window.c,
 * starts_on_word), and a wake-up every 50 us took the computing
 * application's core. A node-mate whose own policy differs and draws a
 * ticket waits up to that period for the lock to come back. A process alone
 * on its node has no such mate: its resting managers ask for no wake-up
 * (hyb_resting_mates), and are polled whenever the thread wakes. */
static bool hyb_resting_now(const os_win_t *w)
{
    return w->hyb.state == OS_HYB_NET && os_hyb_stays_on_word(w);
}

/* Which count the window's manager is in (hyb_busy, hyb_resting), kept up
 * to date after each of its steps; called with reg_lock held. */
static void hyb_account(os_win_t *w, bool registered)
{
    const os_hyb_class_t now = !registered || !w->hyb_ready || w->hyb.state == OS_HYB_CPU
                                   ? OS_HYB_CLASS_NONE
                               : hyb_resting_now(w) ? OS_HYB_CLASS_RESTING
                                                    : OS_HYB_CLASS_BUSY;
    if (now == w->hyb_class)
        return;
    const bool mates = w->nnode_ranks > 1;
    if (w->hyb_class != OS_HYB_CLASS_NONE)
        atomic_fetch_sub_explicit(w->hyb_class == OS_HYB_CLASS_BUSY ? &hyb_busy : &hyb_resting, 1,
                                  memory_order_relaxed);
    if (w->hyb_class == OS_HYB_CLASS_RESTING && mates)
        atomic_fetch_sub_explicit(&hyb_resting_mates, 1, memory_order_relaxed);
    if (now != OS_HYB_CLASS_NONE)
        atomic_fetch_add_explicit(now == OS_HYB_CLASS_BUSY ? &hyb_busy : &hyb_resting, 1,
                                  memory_order_relaxed);
    if (now == OS_HYB_CLASS_RESTING && mates)
        atomic_fetch_add_explicit(&hyb_resting_mates, 1, memory_order_relaxed);
    w->hyb_class = now;
}

/* The hybrid manager's step, keeping the counts up to date. */
static os_hyb_event_t hyb_poll(os_win_t *w)
{
    if (w->hyb.state == OS_HYB_SHARED) {
        const uint64_t now = os_ticks();
        if (now < w->hyb_shared_next)
            return OS_HYB_EV_NONE;
        w->hyb_shared_next = now + os_us_to_ticks(OS_HYB_SHARED_POLL_US);
    }
    os_hyb_event_t ev = os_hyb_poll(&w->hyb);
    hyb_account(w, true);
    return ev;
}

/* A lock request's turn has come when its ticket is served. */
static bool lock_ready(os_win_t *w, pending_t *p)
{
    if (p->wait == WAIT_MIGRATED || p->wait == WAIT_MIGRATION)
        return !os_hyb_migrating(&w->hyb);
    os_lockword_t *l = &w->ctl[w->rank].lock;
    if (p->h.op) /* exclusive */
        return os_lock_excl_ready(l, p->ticket);
    return os_lock_shared_enter(l, p->ticket);
}

/* A piggybacked epoch (K_LOCK_OP): once the lock is ours, the operation,
 * then the release. The operation's reply is the epoch's only answer: it
 * goes to the origin's slot, with the fetched data. False while it waits. */
static bool lock_op_step(os_win_t *w, pending_t *p)
{
    if (!p->granted) {
        if (!lock_ready(w, p))
            return false;
        p->granted = true;
    }
    req_hdr_t inner;
    memcpy(&inner, p->data, sizeof inner);
    inner.win = p->h.win;
    inner.src = p->h.src;
    inner.token = p->h.token;
    inner.ack = 0;
    if (!serve_op(w, w->rank, p->reply, &inner, p->data + sizeof inner, p->dlen - sizeof inner))
        return false; /* the accumulate mutex is busy: retried with the lock held */
    if (p->h.op)
        os_lock_release_excl(&w->ctl[w->rank].lock);
    else
        os_lock_release_shared(&w->ctl[w->rank].lock);
    return true;
}

static uint8_t grant_of(const pending_t *p)
{
    return p->wait == WAIT_MIGRATED ? GRANT_NET : p->wait == WAIT_MIGRATION ? GRANT_RETRY : GRANT_CPU;
}

/* A request to keep, with a copy of its data; NULL (and the requester told)
 * when out of memory. */
static pending_t *pending_new(void *reply, const req_hdr_t *h, const char *data, size_t dlen)
{
    pending_t *p = malloc(sizeof *p + dlen);
    if (!p) {
        send_reply(reply, h, OS_ERR(OS_ERR_NOMEM, "keeping a request of %zu bytes", dlen), NULL,
                   0);
        return NULL;
    }
    *p = (pending_t){ .reply = reply, .target = -1, .h = *h, .wait = WAIT_TICKET, .dlen = dlen };
    if (dlen)
        os_copy(p->data, data, dlen);
    return p;
}

/* Is a data request of this origin kept for a retry? Then a newer one must
 * wait behind it: accumulates of one origin apply in issue order. */
static bool origin_waits(uint64_t win, int32_t src, int target)
{
    if (!atomic_load_explicit(&npending, memory_order_relaxed))
        return false;
    for (const pending_t *p = pending_head; p; p = p->next)
        if (p->h.win == win && p->h.src == src && p->target == target)
            return true;
    return false;
}

/* Is a kept data request ahead of p from the same origin still waiting? */
static bool behind_same_origin(const pending_t *p)
{
    for (const pending_t *q = pending_head; q && q != p; q = q->next)
        if (q->h.win == p->h.win && q->h.src == p->h.src && q->target == p->target)
            return true;
    return false;
}

/* Keep p for a retry. */
static void keep(pending_t *p)
{
    p->next = NULL;
    *pending_tail = p;
    pending_tail = &p->next;
    atomic_fetch_add_explicit(&npending, 1, memory_order_relaxed);
}

/* A data request on target's memory: served now, or kept for a retry
 * (behind a kept request of the same origin, or while the accumulate mutex
 * or a bulk accumulate is busy). Called with reg_lock held. */
static void serve_data(os_win_t *w, int target, void *reply, const req_hdr_t *h,
                       const char *data, size_t dlen)
{
    if (!origin_waits(h->win, h->src, target) && serve_op(w, target, reply, h, data, dlen))
        return;
    pending_t *p = pending_new(reply, h, data, dlen);
    if (!p)
        return;
    p->target = target;
    atomic_fetch_add_explicit(&w->deferred, 1, memory_order_relaxed);
    keep(p);
}

/* Serve a request now or keep it; called with reg_lock held. */
static void serve(os_win_t *w, void *reply, const req_hdr_t *h, const char *data, size_t dlen)
{
    pending_t *p = NULL;
    switch (h->kind) {
    case K_LOCK:
        /* FIFO with the node's own lockers: the ticket is drawn on arrival. */
        if (!(p = pending_new(reply, h, NULL, 0)))
            return;
        count_served(w);
        if (h->basic && w->hyb_ready) {
            /* Hybrid: the requester found the network word parked. Migrate
             * only with a progress thread: in network mode the node's own
             * lockers need this process to bring the lock back. */
            os_hyb_reply_t r = os_hyb_request(&w->hyb, h->op, os_ucx_progress_thread_running(),
                                              (os_lock_policy_t)w->cfg.lock_policy,
                                              os_hyb_stays_on_word(w) ? 1u
                                                  : (unsigned)w->cfg.lock_streak);
            hyb_account(w, true);
            if (r == OS_HYB_R_RETRY) {
                send_reply_grant(reply, h, OS_OK, GRANT_RETRY, NULL, 0);
                free(p);
                return;
            }
            p->ticket = os_hyb_last_ticket(&w->hyb);
            p->wait = r == OS_HYB_R_MANAGER ? WAIT_TICKET
                      : r == OS_HYB_R_MIGRATING ? WAIT_MIGRATED : WAIT_MIGRATION;
            if (r == OS_HYB_R_MIGRATING)
                hyb_poll(w); /* often nobody of the node holds the lock */
        } else {
            p->ticket = os_lock_ticket(&w->ctl[w->rank].lock);
        }
        if (lock_ready(w, p)) {
            send_reply_grant(reply, h, OS_OK, grant_of(p), NULL, 0);
            free(p);
            return;
        }
        break;
    case K_LOCK_OP:
        if (w->hyb_ready || dlen < sizeof(req_hdr_t)) {
            /* Only origins of the manager design send these. */
            send_reply(reply, h, OS_ERR(OS_ERR_OTHER, "a piggybacked lock request from rank %d "
                       "for a window whose lock design is not 'manager'", h->src), NULL, 0);
            return;
        }
        if (!(p = pending_new(reply, h, data, dlen)))
            return;
        p->ticket = os_lock_ticket(&w->ctl[w->rank].lock); /* FIFO, as K_LOCK */
        if (lock_op_step(w, p)) {
            free(p);
            return;
        }
        break;
    case K_POST:
        /* The target h->src posted an exposure epoch that includes us. */
        atomic_fetch_add_explicit(&w->post[(size_t)w->rank * w->post_stride + (size_t)h->src], 1,
                                  memory_order_release);
        count_served(w);
        return;
    default:
        serve_data(w, w->rank, reply, h, data, dlen);
        return;
    }
    keep(p);
}

bool os_serve_for(int world, void *reply, const void *hdr, size_t hlen, const void *data,
                  size_t dlen)
{
    req_hdr_t h;
    if (hlen < sizeof h)
        return false;
    memcpy(&h, hdr, sizeof h);
    /* Data requests only: locks, PSCW and the hybrid manager's state belong
     * to the target process; dynamic windows' regions to its table. */
    if (h.kind != K_ACC && h.kind != K_FETCH && h.kind != K_CAS && h.kind != K_PUT &&
        h.kind != K_GET)
        return false;
    bool served = false;
    pthread_mutex_lock(&reg_lock);
    os_win_t *w = find_win(h.win);
    if (w && w->flavor != OS_FLAVOR_DYNAMIC) {
        const int t = (int)(intptr_t)os_hmap_get(&w->node_mates, (uintptr_t)world + 1) - 1;
        if (t >= 0 && w->peers[t].access == OS_PEER_DIRECT) {
            serve_data(w, t, reply, &h, data, dlen);
            served = true;
        }
    }
    pthread_mutex_unlock(&reg_lock);
    return served;
}

void os_serve_request(void *arg, void *reply, const void *hdr, size_t hlen, const void *data,
                       size_t dlen)
{
    (void)arg;
    (void)hlen;
    req_hdr_t copy;
    memcpy(&copy, hdr, sizeof copy);
    const req_hdr_t *h = &copy;
    OS_DEBUG("request kind %d from rank %d token %llx", h->kind, h->src,
             (unsigned long long)h->token);
    pthread_mutex_lock(&reg_lock);
    os_win_t *w = find_win(h->win);
    /* The direct route's sender is a peer; a routed request's is its last
     * hop, which the route counted. */
    if (w && !os_fwd_is_handle(reply) && h->src >= 0 && h->src < w->nranks)
        os_fwd_note_peer(w->peers[h->src].world);
    if (w)
        serve(w, reply, h, data, dlen);
    else
        os_log(1, "request for unknown window %llu from rank %d dropped",
               (unsigned long long)h->win, h->src);
    pthread_mutex_unlock(&reg_lock);
}

/* Retry what was kept: lock requests whose turn may have come (a process of
 * the target's node may have unlocked), requests that waited for a mutex.
 * Returns OS_UCX_RETRY_US while something wants the next retry soon,
 * OS_UCX_IDLE_US while resting managers with node-mates want the periodic
 * poll, -1 otherwise. */
int os_serve_retry(void)
{
    const uint64_t now = os_ticks();
    const int rest_us = atomic_load_explicit(&hyb_resting_mates, memory_order_relaxed)
                            ? OS_UCX_IDLE_US
                            : -1;
    const bool rest_due = atomic_load_explicit(&hyb_resting, memory_order_relaxed) &&
                          now - atomic_load_explicit(&hyb_rest_polled, memory_order_relaxed) >=
                              os_us_to_ticks(OS_UCX_IDLE_US);
    if (!atomic_load_explicit(&npending, memory_order_relaxed) &&
        !atomic_load_explicit(&hyb_busy, memory_order_relaxed) && !rest_due)
        return rest_us;
    if (pthread_mutex_trylock(&reg_lock))
        return OS_UCX_RETRY_US; /* another thread is at it */
    hold_replies = true;
    /* Resting managers only when due: a thousand windows of virtual nodes
     * rest, and a sweep over them all at each call held reg_lock against
     * every window's creation (MPI_Win_allocate between virtual nodes with
     * 1000 alive: 1.69x Open MPI 5.0.11's own, 3.47x on its UCX path;
     * 0.40-0.43 and 0.58-0.63 without). */
    if (rest_due)
        atomic_store_explicit(&hyb_rest_polled, now, memory_order_relaxed);
    if (atomic_load_explicit(&hyb_busy, memory_order_relaxed) || rest_due)
        for (int i = 0; i < reg_n; i++) {
            os_win_t *w = reg_wins[i];
            if (w && (w->hyb_class == OS_HYB_CLASS_BUSY ||
                      (w->hyb_class == OS_HYB_CLASS_RESTING && rest_due)))
                hyb_poll(w);
        }
    for (pending_t **pp = &pending_head; *pp;) {
        pending_t *p = *pp;
        os_win_t *w = find_win(p->h.win);
        bool done;
        if (!w)
            done = true;
        else if (p->h.kind == K_LOCK)
            done = lock_ready(w, p) &&
                   (send_reply_grant(p->reply, &p->h, OS_OK, grant_of(p), NULL, 0), true);
        else if (p->h.kind == K_LOCK_OP)
            done = lock_op_step(w, p);
        else
            done = !behind_same_origin(p) &&
                   serve_op(w, p->target, p->reply, &p->h, p->data, p->dlen);
        if (done) {
            *pp = p->next;
            if (!*pp)
                pending_tail = pp;
            free(p);
            atomic_fetch_sub_explicit(&npending, 1, memory_order_relaxed);
        } else {
            pp = &p->next;
        }
    }
    pthread_mutex_unlock(&reg_lock);
    hold_replies = false;
    flush_outbox();
    if (atomic_load_explicit(&npending, memory_order_relaxed) ||
        atomic_load_explicit(&hyb_busy, memory_order_relaxed))
        return OS_UCX_RETRY_US;
    return atomic_load_explicit(&hyb_resting_mates, memory_order_relaxed) ? OS_UCX_IDLE_US : -1;
}

/* The slots freed since (NULL) go, the windows after them move down. */
static void reg_compact(void)
{
    int n = 0;
    for (int i = 0; i < reg_n; i++)
        if (reg_wins[i]) {
            reg_wins[n] = reg_wins[i];
            reg_wins[n]->serve_slot = n;
            n++;
        }
    reg_n = n;
    reg_holes = 0;
}

os_status_t os_serve_register(os_win_t *w)
{
    os_status_t st = OS_OK;
    pthread_mutex_lock(&reg_lock);
    if (reg_n == reg_cap && reg_holes >= reg_n / 2)
        reg_compact();
    if (reg_n == reg_cap) {
        int cap = reg_cap ? 2 * reg_cap : 8;
        os_win_t **r = realloc(reg_wins, sizeof *r * (size_t)cap);
        if (r) {
            reg_wins = r;
            reg_cap = cap;
        }
    }
    if (reg_n == reg_cap)
        st = OS_ERR(OS_ERR_NOMEM, "window registry");
    else if (!(st = os_hmap_put(&reg_by_id, (uintptr_t)w->id, w))) {
        w->serve_slot = reg_n;
        reg_wins[reg_n++] = w;
        w->hyb_class = OS_HYB_CLASS_NONE;
        hyb_account(w, true); /* net/window.c's starts_on_word */
    }
    pthread_mutex_unlock(&reg_lock);
    return st;
}

void os_serve_unregister(os_win_t *w)
{
    pthread_mutex_lock(&reg_lock);
    const int i = w->serve_slot;
    if (i >= 0 && i < reg_n && reg_wins[i] == w) {
        /* A hole, not the last window moved in: that touched another
         * window's memory, cold with a thousand alive (0.1-0.2 us of each
         * MPI_Win_free between virtual nodes); os_serve_register compacts. */
        reg_wins[i] = NULL;
        reg_holes++;
        os_hmap_del(&reg_by_id, (uintptr_t)w->id);
        if (reg_holes == reg_n) {
            reg_n = reg_holes = 0;
            os_hmap_destroy(&reg_by_id); /* nothing left behind at the end */
        }
    }
    w->serve_slot = -1;
    hyb_account(w, false);
    w->hyb_ready = false;
    pthread_mutex_unlock(&reg_lock);
}

void os_serve_stats_sync(os_win_t *w)
{
    w->stats.counter[ONESIDED_STAT_AM_SERVED] = atomic_load(&w->served);
    w->stats.counter[ONESIDED_STAT_AM_SERVED_THREAD] = atomic_load(&w->served_thread);
    w->stats.counter[ONESIDED_STAT_AM_SERVED_IN_HOST] = atomic_load(&w->served_in_host);
    w->stats.counter[ONESIDED_STAT_AM_DEFERRED] = atomic_load(&w->deferred);
    pthread_mutex_lock(&reg_lock);
    w->stats.counter[ONESIDED_STAT_LOCK_TO_NETWORK] = w->hyb.to_net;
    w->stats.counter[ONESIDED_STAT_LOCK_TO_CPU] = w->hyb.to_cpu;
    pthread_mutex_unlock(&reg_lock);
}
