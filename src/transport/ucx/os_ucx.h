/*
 * UCX transport: one UCP worker per process, for processes of other (real
 * or virtual) nodes. RDMA put/get on registered memory, 64-bit network
 * atomics, and active messages for everything the target must do itself.
 *
 * Every function here may be called from any thread: one lock of ours
 * (ucx.c says why not UCX's own) serializes the calls into UCX, so that the
 * application thread sends while the progress thread, when it runs,
 * progresses the worker (otherwise the application thread progresses it
 * while it waits). Active-message handlers run in the progressing thread;
 * they must not block and must not wait for other messages. This layer
 * knows nothing about MPI: processes are named by their index in the
 * address table the caller installs (MPI_COMM_WORLD rank).
 */
#ifndef OS_UCX_H
#define OS_UCX_H

#include <stddef.h>
#include <stdint.h>

#include "../../util/os_util.h"

/* Create the context and worker; *addr (len bytes) is this worker's address,
 * to be exchanged with every process and freed with free(). one_host: every
 * peer is on this host (ucx.c says what that changes). */
os_status_t os_ucx_init(bool one_host, void **addr, size_t *len);
bool os_ucx_active(void);
/* Install every process's worker address: n entries, entry i at addrs+off[i]
 * with len[i] bytes. Copied; endpoints are created on first use. */
os_status_t os_ucx_set_peers(int n, const char *addrs, const size_t *off, const size_t *len);
/* Teardown in steps, so that the caller can keep every process progressing
 * until all are done: stop the progress thread and flush; start closing
 * every endpoint; progress (true once this process's closes completed; a
 * peer's closes need our progress too, so keep calling it until all peers
 * are done); destroy the worker. */
void os_ucx_quiesce(void);
void os_ucx_close_start(void);
bool os_ucx_progress_closing(void);
void os_ucx_finalize(void);

/* Memory registration: a handle and its packed remote key. */
typedef struct {
    void *memh;
    void *rkey_buf;
    size_t rkey_len;
} os_ucx_reg_t;
os_status_t os_ucx_mem_map(void *addr, size_t len, os_ucx_reg_t *reg);
/* Allocate len bytes through UCX and register them (*addr gets the memory):
 * for words that peers change with network atomics, which UCX can then do
 * with CPU atomics over shared memory, with no help from this process. */
os_status_t os_ucx_mem_alloc(size_t len, os_ucx_reg_t *reg, void **addr);
void os_ucx_mem_unmap(os_ucx_reg_t *reg);
/* Unpack process `peer`'s packed key; *rkey is an opaque ucp_rkey_h. */
os_status_t os_ucx_rkey_unpack(int peer, const void *buf, void **rkey);
void os_ucx_rkey_destroy(void *rkey);
/* This process's address of raddr in the memory behind rkey, when UCX can
 * map it here (memory UCX allocated in a shared-memory segment, on this
 * host); NULL otherwise. Node-mates share window memory this way, and a
 * process asks it of its own key to learn whether other processes of the
 * host reach its memory without its help. */
void *os_ucx_rkey_ptr(void *rkey, uint64_t raddr);
/* With ONESIDED_VERBOSE >= 1, the endpoint's lanes and protocols as UCX
 * chose them (ucp_ep_print_info), once per process. */
void os_ucx_report_transports(int peer);
/* UCX's own puts over TCP stream at its active messages' rate: UCX 1.20
 * and later (measured on 1.20.1; 1.13 streamed them at a third of it).
 * Large puts to a target reached over TCP alone are then left to UCX
 * (net/origin.c). */
bool os_ucx_tcp_puts_stream(void);
/* Every transport UCX uses toward peer is TCP (no RDMA: its worker carries
 * each put and get). */
bool os_ucx_tcp_only(int peer);
/* Every transport UCX uses toward peer is shared memory or a copy on this
 * host (what processes of one host use where CMA is refused, or between
 * virtual nodes). No order follows from that alone (on UCX 1.20 a message
 * overtook the RDMA before it); callers order with os_ucx_fence. */
bool os_ucx_on_host(int peer);

/* Operations in flight that the caller completes one by one (request-based
 * RMA): each put or get given one counts itself in `pending` until UCX
 * completes it locally (a put's buffer may be reused, a get's data is
 * here); `failed` is set when one failed. Updated by whichever thread
 * progresses the worker. */
typedef struct {
    _Atomic int pending;
    _Atomic int failed;
} os_ucx_done_t;

/* Nonblocking RDMA; complete (remotely, and the get's data arrived) after
 * os_ucx_flush of that peer, or locally when `done` (may be NULL) says so.
 * The buffers must stay valid until then. */
os_status_t os_ucx_put(int peer, const void *buf, size_t len, uint64_t raddr, void *rkey,
                       os_ucx_done_t *done);
os_status_t os_ucx_get(int peer, void *buf, size_t len, uint64_t raddr, void *rkey,
                       os_ucx_done_t *done);
/* Blocking network atomic on `size` (4 or 8) bytes, done at the target when
 * it returns and coherent with CPU atomics on the target's node (UCX atomic
 * mode "cpu"): op is one of OS_UCX_AMO_*; for CSWAP, *result holds the
 * compare value on entry. *result gets the old value (zero-extended).
 * AND, OR and XOR take a fetch and a CSWAP loop (a UCX 1.13 bug; ucx.c). */
enum { OS_UCX_AMO_ADD, OS_UCX_AMO_SWAP, OS_UCX_AMO_CSWAP, OS_UCX_AMO_AND, OS_UCX_AMO_OR,
       OS_UCX_AMO_XOR };
os_status_t os_ucx_atomic(int peer, int op, size_t size, uint64_t value, uint64_t *result,
                          uint64_t raddr, void *rkey);
/* The atomic os_ucx_atomic would do, same arguments and results, on memory
 * that os_ucx_rkey_ptr maps here at `addr` (aligned to size): one CPU atomic
 * of this process. Why it is the same operation: in atomic mode "cpu" UCX's
 * shared-memory transports carry out every atomic on such memory as the
 * origin's CPU atomic, and its other transports have the target's worker
 * emulate it with CPU atomics, so this one is coherent with all of them
 * and with the target node's own. It saves the UCX call, the endpoint's
 * lock and the wait for the request: an 8-byte MPI_Fetch_and_op between
 * virtual nodes took 0.24 us through UCX 1.20 and 0.03 this way. */
static inline void os_ucx_mapped_atomic(void *addr, int op, size_t size, uint64_t value,
                                        uint64_t *result)
{
    uint64_t old;
    if (size == 4) {
        uint32_t *a = addr, v = (uint32_t)value, o;
        switch (op) {
        case OS_UCX_AMO_ADD: o = __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); break;
        case OS_UCX_AMO_SWAP: o = __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST); break;
        case OS_UCX_AMO_AND: o = __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST); break;
        case OS_UCX_AMO_OR: o = __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST); break;
        case OS_UCX_AMO_XOR: o = __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST); break;
        default: /* CSWAP: o is the compare value in, the old value out */
            o = (uint32_t)*result;
            __atomic_compare_exchange_n(a, &o, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
            break;
        }
        old = o;
    } else {
        uint64_t *a = addr;
        switch (op) {
        case OS_UCX_AMO_ADD: old = __atomic_fetch_add(a, value, __ATOMIC_SEQ_CST); break;
        case OS_UCX_AMO_SWAP: old = __atomic_exchange_n(a, value, __ATOMIC_SEQ_CST); break;
        case OS_UCX_AMO_AND: old = __atomic_fetch_and(a, value, __ATOMIC_SEQ_CST); break;
        case OS_UCX_AMO_OR: old = __atomic_fetch_or(a, value, __ATOMIC_SEQ_CST); break;
        case OS_UCX_AMO_XOR: old = __atomic_fetch_xor(a, value, __ATOMIC_SEQ_CST); break;
        default:
            old = *result;
            __atomic_compare_exchange_n(a, &old, value, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST);
            break;
        }
    }
    if (result)
        *result = old;
}
/* A network atomic that fetches nothing and is not waited for: done at the
 * target once a later os_ucx_flush of `peer` returns. */
os_status_t os_ucx_atomic_post(int peer, int op, size_t size, uint64_t value, uint64_t raddr,
                               void *rkey);
/* Operations issued after it reach their targets after those issued
 * before it (to any peer). */
void os_ucx_fence(void);
/* Hold the worker, if no other thread progresses it now (the holder may be
 * this thread, inside a handler): while held, no atomic that UCX emulates
 * in this worker (every network atomic over TCP) changes memory. */
bool os_ucx_worker_try_hold(void);
void os_ucx_worker_release(void);
/* Remote completion of everything issued to `peer` (all peers when peer < 0). */
os_status_t os_ucx_flush(int peer);

/* Active messages: handler(arg, header, hlen, data, dlen), run during
 * progress. Sending copies header and data and never blocks; messages from
 * one process to another arrive in the order they were sent only if the
 * caller waits for replies (this layer promises no ordering). */
/* `reply` names the connection the message came in on (requests are sent
 * with a reply path): answers go back on it with os_ucx_am_reply, so a
 * handler never has to open a connection of its own. */
typedef void (*os_ucx_am_fn)(void *arg, void *reply, const void *hdr, size_t hlen,
                             const void *data, size_t dlen);
os_status_t os_ucx_am_register(unsigned id, os_ucx_am_fn fn, void *arg);
os_status_t os_ucx_am_send(int peer, unsigned id, const void *hdr, size_t hlen,
                           const void *data, size_t dlen);
/* The same, but a message of at least OS_UCX_AM_IN_PLACE_MIN data bytes is
 * sent from the caller's buffers, and the call waits until UCX is done with
 * them (local completion: in the socket or UCX's queue, not yet at the
 * peer), progressing the worker and running the idle hook meanwhile. So a
 * caller must hold no lock that the idle hook takes. Over TCP the copy of a
 * megabyte into a fresh allocation was most of a 1 MB accumulate's cost:
 * 0.6-0.8 of native MPICH's bandwidth across two hosts with it, 2.2-3.7x
 * without. Inside a handler, the progress thread or the host MPI's poll
 * loop, where waiting is not allowed, it copies as os_ucx_am_send. */
enum { OS_UCX_AM_IN_PLACE_MIN = 65536 };
os_status_t os_ucx_am_send_wait(int peer, unsigned id, const void *hdr, size_t hlen,
                                const void *data, size_t dlen);
os_status_t os_ucx_am_reply(void *reply, unsigned id, const void *hdr, size_t hlen,
                            const void *data, size_t dlen);

/* Progress the worker once, then run the idle hook; returns events seen.
 * Its first call from the back-off of a wait of this transport's own
 * (which progresses the worker itself) returns 0 at once. */
unsigned os_ucx_progress(void);
/* A function run after every progress round, in any thread, never inside a
 * handler (the lock manager retries its waiting requests there, the
 * forwarding engine sends what handlers queued), with the number of events
 * that round delivered (0: nothing more has arrived). It returns the
 * microseconds after which it wants to run again although no message
 * arrives (0 = at once), or -1 when it waits for nothing. */
void os_ucx_set_idle_hook(int (*fn)(unsigned events));
/* One progress round for a host MPI that waits (src/mpi/host_progress.c):
 * skipped, returning 0, when another thread holds the worker or inside a
 * handler; otherwise as os_ucx_progress. */
unsigned os_ucx_progress_for_host(void);
/* True while this thread runs os_ucx_progress_for_host. */
bool os_ucx_in_host_progress(void);
/* True for onesided's own worker (not the host MPI's). */
bool os_ucx_is_own_worker(const void *worker);
/* True inside an active-message handler of this thread. */
bool os_ucx_in_handler(void);
/* Endpoints this process opened (to send to a peer, first use). */
int os_ucx_endpoints(void);
/* Wake the progress thread from its sleep (it then runs the idle hook and
 * sleeps again with the hook's new timeout); no-op inside it. */
void os_ucx_wake(void);
/* The progress thread: serves active messages while the application
 * computes. When idle it sleeps on the worker's event descriptor, so that
 * a request is served as soon as it arrives and an idle process uses no
 * CPU; it wakes every OS_UCX_IDLE_US regardless (OS_UCX_QUIET_US below),
 * or when the idle hook asks (it returns the microseconds until it wants
 * to run again, OS_UCX_RETRY_US while the lock manager has requests
 * waiting, -1 for never). After serving something it keeps polling
 * for OS_UCX_LINGER_US before it sleeps again (not on an oversubscribed
 * node). An application thread that waits for the
 * network progresses the worker itself (os_ucx_progress) whenever the
 * progress thread is not at it. */
enum { OS_UCX_IDLE_US = 1000, OS_UCX_RETRY_US = 50, OS_UCX_LINGER_US = 30 };
/* Where the idle hook asks for no wake-up (it returns -1) and UCX is 1.20
 * or later, whose transports lost no wake-up here, the thread sleeps up to
 * OS_UCX_QUIET_US instead: each wake-up of an idle thread took a tenth of
 * the bandwidth of 1 MB copies between virtual nodes from the process
 * whose core it woke on (Open MPI 5.0.11, bursts of 16 gets: 27.5-31.4
 * GB/s against 31.1-36.1 with the thread never waking, 31.9-36.3 with a
 * 10 ms period, osc/sm 28.7-35.6). */
enum { OS_UCX_QUIET_US = 10000 };
/* While an application thread polls the worker, the progress thread leaves
 * it alone and naps (OS_UCX_NAP_MIN_US, doubling to OS_UCX_NAP_MAX_US while
 * the polling lasts). An application that waited in onesided's own loops (a
 * reply, a flush) within the last OS_UCX_APP_ACTIVE_US is issuing
 * operations: it polls again soon, and the nap lasts at least until that
 * window ends (progress_main says why). The host MPI is in a blocking call's
 * poll loop for OS_UCX_HOST_LOOP_US after OS_UCX_HOST_STREAK polls in a row
 * came less than OS_UCX_HOST_GAP_US apart (its loop polls every 2-3 us,
 * with gaps of up to 10-20 while it serves a request); one MPI_Iprobe
 * between two stretches of computing is no loop, and the thread keeps
 * serving at once. The thread lingers after an event (OS_UCX_LINGER_US)
 * only where the host MPI did not poll within OS_UCX_APP_ACTIVE_US.
 * Each nap's end costs a context switch on a core that a polling process
 * holds: with naps of at most 200 us an 8-byte request across two hosts
 * took 20-21 us against 16.5 without a progress thread; at most 1000 us,
 * 16-18 (5000 gained nothing more). The price: a target that stops polling
 * to compute may leave requests waiting until the current nap ends. */
enum { OS_UCX_APP_ACTIVE_US = 1000, OS_UCX_HOST_GAP_US = 20, OS_UCX_HOST_STREAK = 8,
       OS_UCX_HOST_LOOP_US = 100, OS_UCX_NAP_MIN_US = 20, OS_UCX_NAP_MAX_US = 1000 };
os_status_t os_ucx_progress_thread_start(void);
bool os_ucx_progress_thread_running(void);
/* True in the progress thread. */
bool os_ucx_in_progress_thread(void);

#endif
