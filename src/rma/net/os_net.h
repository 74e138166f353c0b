/*
 * The network path's own header: how an origin on one node reaches a target
 * process on another. The node path (src/rma) calls into it through the
 * os_remote_* functions os_rma.h declares; nothing outside this folder
 * includes this header.
 *
 * Layers, each calling only those listed before it (as MPICH ch4 keeps its
 * netmod apart from its shm path):
 *   route_table.c  which process a message goes to next (os_route.h; pure)
 *   lockword.c     network lock words, pooled, and peers' keys to them
 *   datakey.c      other nodes' keys to their MPI_Win_allocate data, shared
 *   forward.c      moving messages: sending (direct or along a route),
 *                  forwarding and aggregating for others, answering, and
 *                  handing what arrives for this process to the handlers
 *                  the layers above give it; network progress
 *   request.c      the origin's requests and their replies
 *   serve.c        the target's side: serving requests
 *   lock.c         lock epochs toward another node (the three designs)
 *   barrier.c      the fence's barrier: on mapped counters, else the host's
 *   origin.c       the origin's operations and their completion
 *   window.c       a window's network state: keys, lock word, route
 *   init.c         starts the network path: wires request.c's reply
 *                  handler and serve.c's request server into forward.c
 * scripts/check_layers.sh checks that order on the object files (ctest
 * net_layers).
 */
#ifndef OS_NET_H
#define OS_NET_H

#include "../os_rma.h"
#include "os_route.h"

enum { AM_REQUEST = 1, AM_REPLY = 2, AM_ROUTED = 3 };

typedef enum {
    K_ACC, K_FETCH, K_CAS, K_PUT, K_GET, K_LOCK, K_UNLOCK, K_POST, K_COMPLETE,
    K_LOCK_OP, /* lock, one operation (an inner header and its data), unlock */
    K_NET_RELEASE /* release a network lock (op: 1 = exclusive) after this origin's
                   * earlier data requests */
} req_kind_t;

/* How a reply completes its request at the origin. */
typedef enum {
    ACK_NONE,  /* token is a waiting origin's reply slot */
    ACK_COUNT, /* token is an _Atomic int64_t counter to decrement (puts, accumulates) */
    ACK_GET    /* token is a get's slot: the reply's bytes go to the origin buffer,
                * then its counter is decremented */
} ack_t;

typedef struct {
    uint64_t win;   /* window id, the same in every process */
    uint64_t token; /* origin's reply slot; 0 = none */
    int32_t src;    /* sender's rank in the window */
    uint8_t kind;   /* req_kind_t */
    uint8_t op;     /* os_op_t; K_LOCK, K_UNLOCK, K_LOCK_OP: 1 = exclusive */
    uint8_t basic;
    uint8_t ack;    /* ack_t: how the reply completes */
    uint32_t esize;
    uint32_t nruns;
    uint64_t bytes; /* origin data bytes after the runs */
    uint32_t run_len; /* 0: the runs are os_run_t pairs; else each is run_len bytes long and
                       * the runs are uint32_t offsets (os_req_compact_runs) */
    uint32_t reserved;
} req_hdr_t;

typedef struct {
    uint64_t token;
    int32_t status; /* os_status_t at the target */
    uint8_t ack;    /* ack_t, the request's */
    uint8_t grant;  /* K_LOCK: grant_t */
    uint8_t pad[2];
} reply_hdr_t;

/* How the lock manager answered a lock request (K_LOCK's `basic` is 1 for a
 * hybrid request, one that found the network word parked). */
typedef enum { GRANT_CPU, GRANT_NET, GRANT_RETRY } grant_t;

/* The hybrid lock's history policy where every process's lock word is this
 * CPU's atomic away (w->words_mapped: virtual nodes of one host). There a
 * node locker pays the same for the network word as for the CPU lock, and
 * a remote locker on the word needs nobody, where in CPU mode it needs the
 * target's manager for every lock. So the first remote request migrates the
 * lock (a streak of 1) and the node's lockers stay on the word: mixed
 * traffic, which under the streak settles in CPU mode with every remote
 * lock served by the manager (5-10x osc/sm on Open MPI 5.0.11, paper 000
 * Figure 9), runs as in the network design. Only the policy changes, never
 * the protocol, so each process may decide this for itself. */
static inline bool os_hyb_stays_on_word(const os_win_t *w)
{
    return w->cfg.lock_policy == OS_LOCK_POLICY_HISTORY &&
           atomic_load_explicit(&w->words_mapped, memory_order_relaxed);
}

/* lockword.c: a window's network lock word in this process, from blocks
 * UCX allocated and kept until MPI_Finalize (why there); a cache line each,
 * not cleared (the window does it before its key is known). */
typedef struct os_lockword_block os_lockword_block_t;
os_status_t os_lockword_get(_Atomic uint64_t **word, os_lockword_block_t **block);
/* Back to the pool once nobody may touch it (the window's free). */
void os_lockword_put(_Atomic uint64_t *word, os_lockword_block_t *block);
/* The block's packed key and its address in this process, for the peers. */
void os_lockword_key(const os_lockword_block_t *b, const void **key, size_t *len,
                     uint64_t *block_addr);
/* Process `peer`'s block at block_addr: its key, unpacked on first use and
 * kept (the cache owns *rkey). */
os_status_t os_lockword_rkey(int peer, uint64_t block_addr, const void *key, void **rkey);
/* Destroys the keys and gives the blocks back to UCX (MPI_Finalize, before
 * the endpoints close). */
void os_lockword_finalize(void);

/* datakey.c: rank r's key to its MPI_Win_allocate data in w->peers[r].rkey.
 * serial names the owner's segment where it keeps it for later windows:
 * the key is then unpacked once in this process and held by w's shell
 * (os_data_key_kept); 0: the window's alone, destroyed with it. */
os_status_t os_data_key(os_win_t *w, int r, uint64_t serial, const void *packed);
bool os_data_key_kept(const os_win_t *w, int r);
/* Destroys the keys windows never freed still hold (MPI_Finalize, before
 * the endpoints close). */
void os_data_key_finalize(void);

/* forward.c: moving messages (the lowest layer; see above). */
/* What forward.c hands messages addressed to this process to. */
typedef struct {
    /* A request, answered through `reply` with os_fwd_answer. */
    os_ucx_am_fn request;
    /* A reply to one of this process's requests. */
    os_ucx_am_fn reply;
    /* A routed request for node-mate `world` (a world rank) that its node
     * server may apply itself, in memory it maps: true when taken. */
    bool (*serve_for)(int world, void *reply, const void *hdr, size_t hlen, const void *data,
                      size_t dlen);
    /* The idle hook's part above: microseconds until it wants to run
     * again (OS_UCX_RETRY_US while requests wait for a retry), -1 for
     * never. */
    int (*retry)(void);
} os_fwd_handlers_t;
/* At network start, once UCX knows every process: server_of[p] is the
 * MPI_COMM_WORLD rank of p's (real or virtual) node's first process, its
 * communication server, which starts its progress thread when
 * ONESIDED_ROUTE is not direct. */
os_status_t os_fwd_setup(int nprocs, int me, const int *server_of, const os_fwd_handlers_t *h);
/* Send a request or reply to dst (world rank) along route; agg_us: how long
 * a forwarding server may hold it for a batch. On the direct route a large
 * one may wait until it has left the caller's buffers (os_ucx_am_send_wait):
 * callers hold none of this layer's locks. */
os_status_t os_fwd_send(os_route_t route, int agg_us, int dst, unsigned am, const void *hdr,
                        size_t hlen, const void *data, size_t dlen);
/* An origin's requests to one target held to leave as one message (a
 * routed batch on the direct route, which the target's on_routed serves in
 * order, its replies gathered the same way): request.c's held requests. */
typedef struct os_fwd_batch {
    char *buf;
    size_t len, cap;
    uint32_t count;
} os_fwd_batch_t;
/* What one request of hlen + dlen bytes adds to a batch, headers included. */
size_t os_fwd_batch_entry_bytes(size_t hlen, size_t dlen);
/* Append a request for dst (world rank); the data is copied. */
os_status_t os_fwd_batch_add(os_fwd_batch_t *b, int dst, const void *hdr, size_t hlen,
                             const void *data, size_t dlen);
/* Send what b holds to dst (one request as a plain one) and empty it; may
 * wait until UCX has sent it from b's buffer (the caller holds none of this
 * layer's locks, as for os_fwd_send). */
os_status_t os_fwd_batch_send(os_fwd_batch_t *b, int dst);
void os_fwd_batch_free(os_fwd_batch_t *b);
/* Answer a request on the path it came: a transport reply handle, or one
 * of ours (a routed request; os_fwd_is_handle). */
os_status_t os_fwd_answer(void *reply, unsigned am, const void *hdr, size_t hlen,
                          const void *data, size_t dlen);
bool os_fwd_is_handle(const void *reply);
/* The route the job's servers run (direct: none run). */
os_route_t os_fwd_job(void);
/* Count world rank as a process this one exchanges requests with. */
void os_fwd_note_peer(int world);
/* Progress the network (never from inside a handler: UCX does not allow
 * recursive progress). */
void os_fwd_progress(void);
/* The process-wide route counters into a window's statistics. */
void os_fwd_stats(onesided_win_stats_t *s);

/* request.c: requests to a target on another node. */
/* Send a request and wait for its reply (fetched bytes into buf, up to cap);
 * the _grant form also returns a lock request's grant_t. */
os_status_t os_req_call_grant(os_win_t *w, int target, req_hdr_t *h, const void *data,
                              size_t dlen, void *buf, size_t cap, uint8_t *grant);
os_status_t os_req_call(os_win_t *w, int target, req_hdr_t *h, const void *data, size_t dlen,
                        void *buf, size_t cap);
/* Send a request whose reply only decrements w->acks[target]. */
os_status_t os_req_post_acked(os_win_t *w, int target, req_hdr_t *h, const void *data,
                              size_t dlen, bool hold);
os_status_t os_req_post_noreply(os_win_t *w, int target, req_hdr_t *h);
/* A get whose reply scatters rbytes into rbuf and decrements w->acks[target]
 * (flush waits for it): gets in flight together, as UCX's. */
os_status_t os_req_post_get(os_win_t *w, int target, req_hdr_t *h, const void *data,
                            size_t dlen, void *rbuf, os_dtype_t *rtype, size_t rcount,
                            size_t rbytes, bool hold);
/* Pack an operation's target runs (offsets; addresses for dynamic windows)
 * and, with_data, its origin data: *msg is malloc'd. */
os_status_t os_req_build(os_win_t *w, const os_rma_op_t *op, char *taddr, bool with_data,
                         char **msg, size_t *mlen, uint32_t *nruns, uint32_t *run_len,
                         size_t *total);
/* A message of n os_run_t runs (window offsets) and then *mlen - n * 16
 * bytes, rewritten in place with the runs as 4-byte offsets when they are
 * many, all of one length and every offset fits: returns that length (the
 * header's run_len; *mlen shrinks), or 0 with the message left as it was. */
uint32_t os_req_compact_runs(char *m, size_t n, size_t *mlen);
/* A request that carries an operation inside a held lock: puts and
 * accumulates are acknowledged at the next flush, the rest wait for their
 * reply (rbytes fetched bytes scattered into rbuf). */
os_status_t os_req_send_op(os_win_t *w, int target, req_hdr_t *h, const char *msg, size_t mlen,
                           void *rbuf, const os_dtype_t *rtype, size_t rcount, size_t rbytes,
                           bool hold);
/* With hold, the counted requests above (puts, gets, accumulates whose
 * reply only completes them) may wait at this origin to leave with the
 * target's next ones, as one message (request.c's held requests): until
 * the next request to the target, wait for its acknowledgements, or
 * os_req_drain_all. */
os_status_t os_req_drain_all(os_win_t *w);
void os_req_batches_free(os_win_t *w);
/* Until every request posted to target has been applied. */
void os_req_await_acks(os_win_t *w, int target);
/* RDMA to target flushed and its requests acknowledged. */
os_status_t os_req_flush(os_win_t *w, int target);

/* The reply handler, for replies that came direct or by route. */
void os_req_on_reply(void *arg, void *reply, const void *hdr, size_t hlen, const void *data,
                     size_t dlen);

/* serve.c: the target side. */
/* The active-message handler of requests. */
void os_serve_request(void *arg, void *reply, const void *hdr, size_t hlen, const void *data,
                      size_t dlen);
/* A routed request for node-mate `world` (a world rank) that its node server
 * can apply itself, in memory it maps (a data request on a window it belongs
 * to): served or kept, true; false when the target must serve it. */
bool os_serve_for(int world, void *reply, const void *hdr, size_t hlen, const void *data,
                  size_t dlen);
/* The transport's idle hook: retry kept requests; microseconds until the
 * next retry is due (os_fwd_handlers_t.retry), -1 for none. */
int os_serve_retry(void);
/* Make w known to the request server (before any process can learn its
 * keys), and forget it (its hybrid lock no longer needs polling). */
os_status_t os_serve_register(os_win_t *w);
void os_serve_unregister(os_win_t *w);
/* The target-side counters of w into its statistics. */
void os_serve_stats_sync(os_win_t *w);

/* lock.c: an operation kept for lock piggybacking (lock.c explains), one per
 * target of a window (os_win_t.kept); window.c frees them. */
typedef struct os_kept_op {
    bool exclusive;    /* the epoch's lock type */
    req_hdr_t h;       /* the request the operation would be on its own... */
    char *msg;         /* ... its runs and origin data; NULL: no operation kept */
    size_t mlen;
    void *rbuf;        /* where fetched bytes go (get: the origin buffer) ... */
    os_dtype_t *rtype; /* ... in this type, retained: the program may free it */
    size_t rcount, rbytes;
} os_kept_op_t;
void os_kept_clear(os_kept_op_t *k);
/* Can an operation toward a deferred lock wait for unlock? Then keep it
 * (takes msg; rtype is retained). */
bool os_kept_can_keep(const os_win_t *w, const os_rma_op_t *op);
void os_kept_keep(os_win_t *w, int target, const req_hdr_t *h, char *msg, size_t mlen,
                  void *rbuf, os_dtype_t *rtype, size_t rcount, size_t rbytes);
/* A deferred lock that cannot wait any more: ask for it, send the kept
 * operation. */
os_status_t os_kept_take(os_win_t *w, int target);

#endif
