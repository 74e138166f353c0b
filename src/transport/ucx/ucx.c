/* UCX transport: context, worker, endpoints, RDMA, atomics, active
 * messages and the progress thread. */
#define _GNU_SOURCE /* ppoll */
#include "os_ucx.h"

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <ucp/api/ucp.h>

#define MAX_AM_IDS 16

static struct {
    ucp_context_h ctx;
    ucp_worker_h worker;
    int npeers;
    char *addrs;       /* every process's worker address */
    size_t *off, *len;
    ucp_ep_h *eps;     /* created on first use */
    _Atomic int8_t *lanes; /* per peer, LANES_* of its endpoint: 0 not asked yet
                            * (windows of several threads may ask at once) */
    /* Every call into the worker, the context, endpoints, keys and requests
     * holds it (recursive: active-message handlers send under it). */
    pthread_mutex_t lock;
    struct { os_ucx_am_fn fn; void *arg; } am[MAX_AM_IDS];
    int (*idle_hook)(unsigned events);
    _Atomic int nendpoints; /* endpoints this process created */
    int efd;           /* the worker's event descriptor, -1 without one */
    pthread_t thread;
    bool thread_running;
    _Atomic bool stop;
    /* When (os_ticks) an application thread last waited in one of
     * onesided's own loops (a reply, a flush), when one last polled from the
     * host MPI, and until when the host MPI is taken to be in a poll loop:
     * the progress thread stays off while these say that an application
     * thread polls the worker. */
    _Atomic uint64_t app_waited, host_polled, host_loop_until;
    bool tcp_puts_stream; /* os_ucx_tcp_puts_stream, from the version at init */
    int idle_us;          /* the progress thread's longest sleep: OS_UCX_IDLE_US, or
                           * OS_UCX_QUIET_US on UCX 1.20 and later when it sleeps on
                           * the worker's descriptor (os_ucx.h) */
} U = { .lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP, .efd = -1 };

/* Why our own lock and a worker in UCS_THREAD_MODE_SERIALIZED, not UCX's
 * THREAD_MODE_MULTI: MULTI guards the worker with a spinlock. With more
 * threads than cores (the application's, the progress thread, the host
 * MPI's busy-polling), a thread that spins for a lock whose holder was
 * preempted spins for the holder's whole time slice: 40% of a virtual-node
 * benchmark's cycles went to pthread_spin_lock, and a 32 KB put took 150 us
 * instead of 2. A mutex sleeps and hands the core to the holder. */
#define LOCK() pthread_mutex_lock(&U.lock)
#define UNLOCK() pthread_mutex_unlock(&U.lock)

static __thread bool in_progress_thread;
static __thread bool in_host_progress;
static __thread int in_handler;
/* Set while wait_req backs off between its rounds, until the back-off's
 * own call of os_ucx_progress: see there. */
static __thread bool in_req_wait;

static void app_waits(void);

static os_status_t ucs_err(ucs_status_t s, const char *what)
{
    return OS_ERR(OS_ERR_OTHER, "UCX: %s: %s", what, ucs_status_string(s));
}

bool os_ucx_active(void)
{
    return U.worker != NULL;
}

os_status_t os_ucx_init(bool one_host, void **addr, size_t *len)
{
    ucp_config_t *config;
    /* ONESIDED_UCX_* variables configure our context apart from the host
     * MPI's (UCX_* variables apply to both). */
    ucs_status_t s = ucp_config_read("ONESIDED", NULL, &config);
    if (s != UCS_OK)
        return ucs_err(s, "reading the configuration");
    /* Network atomics must be coherent with the CPU atomics of the target's
     * node: the lock manager changes the network lock word with CPU atomics
     * when it migrates a lock, and accumulates applied by the target use CPU
     * atomics too. UCX's "cpu" atomic mode promises exactly that: it uses a
     * transport's atomics only where they are CPU atomics (shared memory)
     * and otherwise emulates them in the target's worker with CPU atomics.
     * The price, on fabrics with device atomics: those are not used. */
    s = ucp_config_modify(config, "ATOMIC_MODE", "cpu");
    if (s != UCS_OK) {
        ucp_config_release(config);
        return ucs_err(s, "setting the atomic mode");
    }
    /* Peers all on this host: shared-memory transports only, unless told
     * (ONESIDED_UCX_TLS, or UCX_TLS for both workers). Where CMA is refused
     * UCX otherwise adds TCP over loopback for large RDMA, and every flush
     * then waits on a socket: under a seccomp filter refusing CMA, a fence
     * epoch between two processes took 27.5 us with it and 7.6 without,
     * PSCW 23 and 2.7, put+flush 2.9 and 1.4. With CMA allowed UCX chose no
     * TCP lane here anyway. */
    if (one_host && !getenv("ONESIDED_UCX_TLS") && !getenv("UCX_TLS") &&
        (s = ucp_config_modify(config, "TLS", "sm,self")) != UCS_OK) {
        ucp_config_release(config);
        return ucs_err(s, "choosing shared-memory transports");
    }
    ucp_params_t params = {
        .field_mask = UCP_PARAM_FIELD_FEATURES,
        .features = UCP_FEATURE_RMA | UCP_FEATURE_AMO32 | UCP_FEATURE_AMO64 | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP,
    };
    s = ucp_init(&params, config, &U.ctx);
    ucp_config_release(config);
    if (s != UCS_OK)
        return ucs_err(s, "ucp_init");
    /* Two threads use the worker, the application's and ours, one at a
     * time under U.lock (above). */
    ucp_worker_params_t wp = { .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                               .thread_mode = UCS_THREAD_MODE_SERIALIZED };
    s = ucp_worker_create(U.ctx, &wp, &U.worker);
    if (s != UCS_OK) {
        ucp_cleanup(U.ctx);
        U.ctx = NULL;
        return ucs_err(s, "ucp_worker_create");
    }
    unsigned major, minor, release;
    ucp_get_version(&major, &minor, &release);
    U.tcp_puts_stream = major > 1 || (major == 1 && minor >= 20);
    /* The progress thread sleeps on it; without one it naps instead. */
    if (ucp_worker_get_efd(U.worker, &U.efd) != UCS_OK)
        U.efd = -1;
    U.idle_us = U.tcp_puts_stream && U.efd >= 0 ? OS_UCX_QUIET_US : OS_UCX_IDLE_US;
    ucp_address_t *a;
    s = ucp_worker_get_address(U.worker, &a, len);
    if (s != UCS_OK)
        return ucs_err(s, "ucp_worker_get_address");
    *addr = malloc(*len);
    if (!*addr) {
        ucp_worker_release_address(U.worker, a);
        return OS_ERR(OS_ERR_NOMEM, "worker address of %zu bytes", *len);
    }
    memcpy(*addr, a, *len);
    ucp_worker_release_address(U.worker, a);
    return OS_OK;
}

os_status_t os_ucx_set_peers(int n, const char *addrs, const size_t *off, const size_t *len)
{
    size_t total = n ? off[n - 1] + len[n - 1] : 0;
    U.addrs = malloc(total ? total : 1);
    U.off = malloc(sizeof *U.off * (size_t)n);
    U.len = malloc(sizeof *U.len * (size_t)n);
    U.eps = calloc((size_t)n, sizeof *U.eps);
    U.lanes = calloc((size_t)n, sizeof *U.lanes);
    if (!U.addrs || !U.off || !U.len || !U.eps || !U.lanes)
        return OS_ERR(OS_ERR_NOMEM, "address table of %d processes", n);
    memcpy(U.addrs, addrs, total);
    memcpy(U.off, off, sizeof *off * (size_t)n);
    memcpy(U.len, len, sizeof *len * (size_t)n);
    U.npeers = n;
    return OS_OK;
}

static os_status_t endpoint(int peer, ucp_ep_h *ep)
{
    os_status_t st = OS_OK;
    if (peer < 0 || peer >= U.npeers)
        return OS_ERR(OS_ERR_RANK, "UCX: no address for process %d", peer);
    if ((*ep = U.eps[peer]))
        return OS_OK;
    LOCK();
    if (!U.eps[peer]) {
        ucp_ep_params_t ep_params = {
            .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
            .address = (const ucp_address_t *)(U.addrs + U.off[peer]),
        };
        ucs_status_t s = ucp_ep_create(U.worker, &ep_params, &U.eps[peer]);
        if (s != UCS_OK)
            st = ucs_err(s, "ucp_ep_create");
        else
            atomic_fetch_add_explicit(&U.nendpoints, 1, memory_order_relaxed);
    }
    *ep = U.eps[peer];
    UNLOCK();
    return st;
}

static unsigned progress_round(void *req, ucs_status_t *s);

/* Wait for a request, progressing; frees it. */
static os_status_t wait_req(void *req, const char *what)
{
    if (req == NULL)
        return OS_OK;
    if (UCS_PTR_IS_ERR(req))
        return ucs_err(UCS_PTR_STATUS(req), what);
    os_backoff_t b = OS_BACKOFF_INIT;
    ucs_status_t s = UCS_INPROGRESS;
    for (;;) {
        const unsigned n = progress_round(req, &s);
        if (s != UCS_INPROGRESS)
            break; /* the worker held */
        if (!n) {
            /* The back-off hook serves node-mates' requests, then runs
             * a round of the worker of its own (os_ucx_progress): a second
             * round per poll, which doubled the time between two looks at
             * this request (a put + flush to MPI_Win_create memory between
             * virtual nodes, 1.01-1.12x the hosts' own; benchmarks.md).
             * This loop's rounds suffice. */
            in_req_wait = true;
            os_backoff_wait(&b);
            in_req_wait = false;
        }
    }
    ucp_request_free(req);
    UNLOCK();
    return s == UCS_OK ? OS_OK : ucs_err(s, what);
}

/* Let a nonblocking request finish on its own; flush completes it. */
static os_status_t release_req(void *req, const char *what)
{
    if (req == NULL)
        return OS_OK;
    if (UCS_PTR_IS_ERR(req))
        return ucs_err(UCS_PTR_STATUS(req), what);
    LOCK();
    ucp_request_free(req);
    UNLOCK();
    return OS_OK;
}

void os_ucx_quiesce(void)
{
    if (!U.worker)
        return;
    if (U.thread_running) {
        atomic_store(&U.stop, true);
        ucp_worker_signal(U.worker);
        pthread_join(U.thread, NULL);
        U.thread_running = false;
    }
    (void)os_ucx_flush(-1);
}

static void **closing;

void os_ucx_close_start(void)
{
    closing = calloc((size_t)U.npeers + 1, sizeof *closing);
    for (int i = 0; i < U.npeers; i++) {
        if (!U.eps[i])
            continue;
        ucp_request_param_t p = { .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = 0 };
        void *req = ucp_ep_close_nbx(U.eps[i], &p);
        U.eps[i] = NULL;
        if (req && !UCS_PTR_IS_ERR(req)) {
            if (closing)
                closing[i] = req;
            else
                ucp_request_free(req);
        }
    }
}

bool os_ucx_progress_closing(void)
{
    bool done = true;
    ucp_worker_progress(U.worker);
    for (int i = 0; closing && i < U.npeers; i++) {
        if (!closing[i])
            continue;
        if (ucp_request_check_status(closing[i]) == UCS_INPROGRESS) {
            done = false;
            continue;
        }
        ucp_request_free(closing[i]);
        closing[i] = NULL;
    }
    return done;
}

void os_ucx_finalize(void)
{
    if (!U.worker)
        return;
    os_ucx_quiesce();
    free(closing);
    closing = NULL;
    /* Under the lock: a host MPI's poll loop may be progressing it
     * (os_ucx_progress_for_host), in another thread. */
    LOCK();
    ucp_worker_destroy(U.worker);
    U.worker = NULL;
    UNLOCK();
    ucp_cleanup(U.ctx);
    free(U.addrs);
    free(U.off);
    free(U.len);
    free(U.eps);
    free((void *)U.lanes);
    U.lanes = NULL;
    U.worker = NULL;
    U.ctx = NULL;
    U.npeers = 0;
    U.efd = -1;
}

/* ------------------------------------------------------------ memory */

/* Map (or allocate) memory and pack its key; *addr gets its address. */
static os_status_t map_and_pack(const ucp_mem_map_params_t *mp, os_ucx_reg_t *reg, void **addr)
{
    ucp_mem_h memh;
    LOCK();
    ucs_status_t s = ucp_mem_map(U.ctx, mp, &memh);
    if (s != UCS_OK) {
        UNLOCK();
        return ucs_err(s, "ucp_mem_map");
    }
    ucp_mem_attr_t attr = { .field_mask = UCP_MEM_ATTR_FIELD_ADDRESS };
    void *buf;
    size_t blen;
    if ((s = ucp_mem_query(memh, &attr)) != UCS_OK ||
        (s = ucp_rkey_pack(U.ctx, memh, &buf, &blen)) != UCS_OK) {
        ucp_mem_unmap(U.ctx, memh);
        UNLOCK();
        return ucs_err(s, "registering memory");
    }
    UNLOCK();
    reg->memh = memh;
    reg->rkey_buf = buf;
    reg->rkey_len = blen;
    *addr = attr.address;
    return OS_OK;
}

os_status_t os_ucx_mem_map(void *addr, size_t len, os_ucx_reg_t *reg)
{
    ucp_mem_map_params_t mp = {
        .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
        .address = addr,
        .length = len ? len : 1,
    };
    void *mapped;
    return map_and_pack(&mp, reg, &mapped);
}

os_status_t os_ucx_mem_alloc(size_t len, os_ucx_reg_t *reg, void **addr)
{
    /* Allocated by UCX, so that a shared-memory transport can map it in the
     * peers and do their atomics on it with the CPU, without this process. */
    ucp_mem_map_params_t mp = {
        .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                      UCP_MEM_MAP_PARAM_FIELD_FLAGS,
        .address = NULL,
        .length = len,
        .flags = UCP_MEM_MAP_ALLOCATE,
    };
    return map_and_pack(&mp, reg, addr);
}

void os_ucx_mem_unmap(os_ucx_reg_t *reg)
{
    if (!reg->rkey_buf && !reg->memh)
        return; /* nothing registered (most windows' own reg: their data is the shell's) */
    LOCK();
    if (reg->rkey_buf)
        ucp_rkey_buffer_release(reg->rkey_buf);
    if (reg->memh)
        ucp_mem_unmap(U.ctx, reg->memh);
    UNLOCK();
    reg->memh = reg->rkey_buf = NULL;
}

os_status_t os_ucx_rkey_unpack(int peer, const void *buf, void **rkey)
{
    ucp_ep_h ep = NULL;
    os_status_t st = endpoint(peer, &ep);
    if (st)
        return st;
    LOCK();
    ucs_status_t s = ucp_ep_rkey_unpack(ep, buf, (ucp_rkey_h *)rkey);
    UNLOCK();
    return s == UCS_OK ? OS_OK : ucs_err(s, "ucp_ep_rkey_unpack");
}

void os_ucx_rkey_destroy(void *rkey)
{
    if (!rkey)
        return;
    LOCK();
    ucp_rkey_destroy(rkey);
    UNLOCK();
}

void *os_ucx_rkey_ptr(void *rkey, uint64_t raddr)
{
    void *p = NULL;
    if (!rkey)
        return NULL;
    LOCK();
    ucs_status_t s = ucp_rkey_ptr(rkey, raddr, &p);
    UNLOCK();
    return s == UCS_OK ? p : NULL;
}

void os_ucx_report_transports(int peer)
{
    static _Atomic bool done;
    ucp_ep_h ep = NULL;
    if (os_log_level < 1 || atomic_exchange(&done, true) || endpoint(peer, &ep))
        return;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return;
    LOCK();
    ucp_ep_print_info(ep, f);
    UNLOCK();
    fclose(f);
    os_log(1, "UCX transports toward process %d:\n%s", peer, text);
    free(text);
}

/* What the lanes UCX chose toward a peer are (os_ucx.h says what each
 * answer means). UCX 1.13 has no query for an endpoint's transports
 * (ucp_ep_query's came in 1.14), so this reads the lane table
 * ucp_ep_print_info writes ("lane[0]:  2:tcp/eth0.0 md[1] -> ..."); a table
 * it cannot read says no to both, which keeps UCX's own operations. Asked
 * once per peer (the lanes of an endpoint do not change). */
enum { LANES_KNOWN = 1, LANES_TCP = 2, LANES_ON_HOST = 4 };

/* Transports of this host that complete an RDMA operation inside the call
 * (CMA and KNEM copy, xpmem and the segments map) or have none, so that UCX
 * emulates it with active messages on the endpoint's active-message lane. */
static bool on_host_transport(const char *name)
{
    static const char *const names[] = { "sysv/", "posix/", "xpmem/", "cma/", "knem/", "self/" };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strncmp(name, names[i], strlen(names[i])))
            return true;
    return false;
}

static int lanes_of(int peer)
{
    ucp_ep_h ep = NULL;
    char *text = NULL;
    size_t len = 0;
    int lanes = 0, tcp = 0, on_host = 0;
    if (peer < 0 || peer >= U.npeers || endpoint(peer, &ep))
        return 0;
    const int8_t known = atomic_load_explicit(&U.lanes[peer], memory_order_relaxed);
    if (known)
        return known;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return 0;
    LOCK();
    ucp_ep_print_info(ep, f);
    UNLOCK();
    fclose(f);
    for (const char *l = text; l && (l = strstr(l, "lane[")); l++) {
        const char *c = strstr(l, "]:");
        if (!c)
            break;
        c += 2;
        while (*c == ' ')
            c++;
        while (*c >= '0' && *c <= '9')
            c++;
        lanes++;
        if (*c == ':' && !strncmp(c + 1, "tcp/", 4))
            tcp++;
        if (*c == ':' && on_host_transport(c + 1))
            on_host++;
    }
    free(text);
    const int8_t v = (int8_t)(LANES_KNOWN | (lanes > 0 && tcp == lanes ? LANES_TCP : 0) |
                              (lanes > 0 && on_host == lanes ? LANES_ON_HOST : 0));
    atomic_store_explicit(&U.lanes[peer], v, memory_order_relaxed);
    return v;
}

bool os_ucx_tcp_puts_stream(void)
{
    return U.tcp_puts_stream;
}

bool os_ucx_tcp_only(int peer)
{
    return lanes_of(peer) & LANES_TCP;
}

bool os_ucx_on_host(int peer)
{
    return lanes_of(peer) & LANES_ON_HOST;
}

/* -------------------------------------------------------- RDMA, atomics */

static void rma_done(void *request, ucs_status_t status, void *user_data)
{
    os_ucx_done_t *d = user_data;
    if (status != UCS_OK)
        atomic_store_explicit(&d->failed, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&d->pending, 1, memory_order_release);
    ucp_request_free(request);
}

/* A put or get: released to finish on its own, or counted in `done`. */
static os_status_t rma(bool put, int peer, void *buf, size_t len, uint64_t raddr, void *rkey,
                       os_ucx_done_t *done)
{
    ucp_ep_h ep = NULL;
    os_status_t st = endpoint(peer, &ep);
    if (st)
        return st;
    ucp_request_param_t p = { .op_attr_mask = 0 };
    if (done) {
        p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
        p.cb.send = rma_done;
        p.user_data = done;
    }
    LOCK();
    void *req = put ? ucp_put_nbx(ep, buf, len, raddr, rkey, &p)
                    : ucp_get_nbx(ep, buf, len, raddr, rkey, &p);
    /* Counted under the lock: the callback cannot run before. */
    if (done && req && !UCS_PTR_IS_ERR(req))
        atomic_fetch_add_explicit(&done->pending, 1, memory_order_relaxed);
    UNLOCK();
    if (done)
        return UCS_PTR_IS_ERR(req) ? ucs_err(UCS_PTR_STATUS(req), put ? "ucp_put_nbx" : "ucp_get_nbx")
                                   : OS_OK;
    return release_req(req, put ? "ucp_put_nbx" : "ucp_get_nbx");
}

os_status_t os_ucx_put(int peer, const void *buf, size_t len, uint64_t raddr, void *rkey,
                       os_ucx_done_t *done)
{
    return rma(true, peer, (void *)buf, len, raddr, rkey, done);
}

os_status_t os_ucx_get(int peer, void *buf, size_t len, uint64_t raddr, void *rkey,
                       os_ucx_done_t *done)
{
    return rma(false, peer, buf, len, raddr, rkey, done);
}

static os_status_t atomic_native(int peer, int op, size_t size, uint64_t value,
                                 uint64_t *result, uint64_t raddr, void *rkey)
{
    /* AND, OR and XOR never come here (see os_ucx_atomic). */
    static const ucp_atomic_op_t ops[] = { [OS_UCX_AMO_ADD] = UCP_ATOMIC_OP_ADD,
                                           [OS_UCX_AMO_SWAP] = UCP_ATOMIC_OP_SWAP,
                                           [OS_UCX_AMO_CSWAP] = UCP_ATOMIC_OP_CSWAP };
    ucp_ep_h ep = NULL;
    if (size != 4 && size != 8)
        return OS_ERR(OS_ERR_ARG, "network atomic of %zu bytes", size);
    os_status_t st = endpoint(peer, &ep);
    if (st)
        return st;
    /* CSWAP: the reply buffer carries the swap value in and the old value
     * out, while `buffer` is the compare value; our callers pass the compare
     * value in *result and the new value in `value`, so swap the roles. */
    uint64_t in = value, out = result ? *result : 0;
    if (op == OS_UCX_AMO_CSWAP) {
        in = out;
        out = value;
    }
    /* UCX reads and writes operands of the operation's own width. */
    union { uint64_t u64; uint32_t u32; } buffer, reply;
    if (size == 8) {
        buffer.u64 = in;
        reply.u64 = out;
    } else {
        buffer.u32 = (uint32_t)in;
        reply.u32 = (uint32_t)out;
    }
    /* Always fetch, even when the caller wants no value: a posted atomic
     * completes when it leaves, and the caller may free the target's memory
     * (MPI_Win_free after an unlock) before an emulated one arrives. */
    ucp_request_param_t p = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_REPLY_BUFFER,
        .datatype = ucp_dt_make_contig(size),
        .reply_buffer = &reply,
    };
    LOCK();
    void *req = ucp_atomic_op_nbx(ep, ops[op], &buffer, 1, raddr, rkey, &p);
    UNLOCK();
    st = wait_req(req, "ucp_atomic_op_nbx");
    if (!st && result)
        *result = size == 8 ? reply.u64 : reply.u32;
    return st;
}

/* The operand width's mask and the three bitwise ops, for the CAS loop. */
static uint64_t apply_bitwise(int op, uint64_t old, uint64_t value, size_t size)
{
    uint64_t mask = size == 8 ? ~0ull : 0xffffffffull;
    uint64_t nw = op == OS_UCX_AMO_AND ? old & value : op == OS_UCX_AMO_OR ? old | value
                                                                           : old ^ value;
    return nw & mask;
}

os_status_t os_ucx_atomic(int peer, int op, size_t size, uint64_t value, uint64_t *result,
                          uint64_t raddr, void *rkey)
{
    if (op != OS_UCX_AMO_AND && op != OS_UCX_AMO_OR && op != OS_UCX_AMO_XOR)
        return atomic_native(peer, op, size, value, result, raddr, rkey);
    /* AND, OR and XOR as a compare-and-swap loop. UCX 1.13's shared-memory
     * transports (uct_sm_ep_atomic64_fetch and its 32-bit twin, as built in
     * Debian 12) ignore the operand of the fetching AND/OR/XOR: AND and OR
     * leave the word as it was and XOR clears it; ADD, SWAP and CSWAP are
     * right. Memory that UCX allocated (the lock words) takes that path
     * between processes of one host. A loop of ADD 0 and CSWAP is correct on
     * every transport and costs one more round trip.
     * Regression: test_ucx_atomics. */
    uint64_t old = 0, seen;
    os_status_t st = atomic_native(peer, OS_UCX_AMO_ADD, size, 0, &old, raddr, rkey);
    for (; !st; old = seen) {
        seen = old; /* CSWAP: compare value in, old value out */
        st = atomic_native(peer, OS_UCX_AMO_CSWAP, size, apply_bitwise(op, old, value, size),
                           &seen, raddr, rkey);
        if (!st && seen == old)
            break;
    }
    if (!st && result)
        *result = old;
    return st;
}

os_status_t os_ucx_atomic_post(int peer, int op, size_t size, uint64_t value, uint64_t raddr,
                               void *rkey)
{
    static const ucp_atomic_op_t ops[] = { [OS_UCX_AMO_ADD] = UCP_ATOMIC_OP_ADD,
                                           [OS_UCX_AMO_SWAP] = UCP_ATOMIC_OP_SWAP };
    ucp_ep_h ep = NULL;
    if ((size != 4 && size != 8) || (op != OS_UCX_AMO_ADD && op != OS_UCX_AMO_SWAP))
        return OS_ERR(OS_ERR_ARG, "posted network atomic %d of %zu bytes", op, size);
    os_status_t st = endpoint(peer, &ep);
    if (st)
        return st;
    union { uint64_t u64; uint32_t u32; } buffer;
    if (size == 8)
        buffer.u64 = value;
    else
        buffer.u32 = (uint32_t)value;
    /* The operand is copied before the call returns (UCX copies it into the
     * request when it cannot send at once). */
    ucp_request_param_t p = { .op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE,
                              .datatype = ucp_dt_make_contig(size) };
    LOCK();
    void *req = ucp_atomic_op_nbx(ep, ops[op], &buffer, 1, raddr, rkey, &p);
    UNLOCK();
    return release_req(req, "ucp_atomic_op_nbx");
}

void os_ucx_fence(void)
{
    LOCK();
    (void)ucp_worker_fence(U.worker);
    UNLOCK();
}

bool os_ucx_worker_try_hold(void)
{
    return U.worker && !pthread_mutex_trylock(&U.lock);
}

void os_ucx_worker_release(void)
{
    UNLOCK();
}

/* One round of the worker first: UCX 1.20's CMA transport (uct scopy)
 * copies a put's or get's data in the worker's progress, not in
 * ucp_put_nbx/ucp_get_nbx. After that round the endpoint's flush finds
 * nothing outstanding and completes at once, without a request, where
 * before it was posted first and completed only in wait_req's second round:
 * an 8-byte put + flush to MPI_Win_create memory between virtual nodes took
 * 0.84 us, now 0.67 (Open MPI 5.0.11; 1,235 instructions fewer, callgrind).
 * Where the round finds nothing to do it costs a poll. Not from a handler:
 * UCX forbids progress from its callbacks. */
os_status_t os_ucx_flush(int peer)
{
    ucp_request_param_t p = { .op_attr_mask = 0 };
    void *req;
    if (peer >= U.npeers || (peer >= 0 && !U.eps[peer]))
        return OS_OK; /* nothing was ever sent there */
    LOCK();
    if (!in_handler)
        (void)ucp_worker_progress(U.worker);
    req = peer < 0 ? ucp_worker_flush_nbx(U.worker, &p) : ucp_ep_flush_nbx(U.eps[peer], &p);
    UNLOCK();
    return wait_req(req, peer < 0 ? "ucp_worker_flush_nbx" : "ucp_ep_flush_nbx");
}

/* ------------------------------------------------------ active messages */

static ucs_status_t am_cb(void *arg, const void *header, size_t header_length, void *data,
                          size_t length, const ucp_am_recv_param_t *param)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
        /* Every sender forces the eager protocol; a rendezvous here is a bug. */
        os_log(1, "UCX: active message %u arrived by rendezvous; dropped", id);
        return UCS_OK;
    }
    void *reply = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ? param->reply_ep : NULL;
    in_handler++;
    U.am[id].fn(U.am[id].arg, reply, header, header_length, data, length);
    in_handler--;
    return UCS_OK;
}

os_status_t os_ucx_am_register(unsigned id, os_ucx_am_fn fn, void *arg)
{
    if (id >= MAX_AM_IDS)
        return OS_ERR(OS_ERR_OTHER, "UCX: active message id %u out of range", id);
    U.am[id].fn = fn;
    U.am[id].arg = arg;
    ucp_am_handler_param_t hp = {
        .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                      UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS,
        .id = id,
        .cb = am_cb,
        .arg = (void *)(uintptr_t)id,
        .flags = UCP_AM_FLAG_WHOLE_MSG,
    };
    LOCK();
    ucs_status_t s = ucp_worker_set_am_recv_handler(U.worker, &hp);
    UNLOCK();
    return s == UCS_OK ? OS_OK : ucs_err(s, "ucp_worker_set_am_recv_handler");
}

static void am_sent(void *request, ucs_status_t status, void *user_data)
{
    if (status != UCS_OK)
        os_log(1, "UCX: active message send failed: %s", ucs_status_string(status));
    free(user_data);
    ucp_request_free(request);
}

static os_status_t am_send_ep(ucp_ep_h ep, unsigned id, const void *hdr, size_t hlen,
                              const void *data, size_t dlen);

os_status_t os_ucx_am_send(int peer, unsigned id, const void *hdr, size_t hlen,
                           const void *data, size_t dlen)
{
    ucp_ep_h ep = NULL;
    os_status_t st = endpoint(peer, &ep);
    if (st)
        return st;
    return am_send_ep(ep, id, hdr, hlen, data, dlen);
}

/* Sent from the caller's buffers, which UCX may keep pointing at until the
 * send is done: the call waits for that. */
static os_status_t am_send_in_place(int peer, unsigned id, const void *hdr, size_t hlen,
                                    const void *data, size_t dlen)
{
    ucp_ep_h ep = NULL;
    os_status_t st = endpoint(peer, &ep);
    if (st)
        return st;
    ucp_request_param_t p = { .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                              .flags = UCP_AM_SEND_FLAG_EAGER | UCP_AM_SEND_FLAG_REPLY };
    LOCK();
    void *req = ucp_am_send_nbx(ep, id, hdr, hlen, data, dlen, &p);
    UNLOCK();
    return wait_req(req, "ucp_am_send_nbx");
}

os_status_t os_ucx_am_send_wait(int peer, unsigned id, const void *hdr, size_t hlen,
                                const void *data, size_t dlen)
{
    /* Where waiting is not allowed: a handler (UCX forbids progress from a
     * callback), the progress thread, the host MPI's poll loop. */
    if (dlen < OS_UCX_AM_IN_PLACE_MIN || in_handler || in_progress_thread || in_host_progress)
        return os_ucx_am_send(peer, id, hdr, hlen, data, dlen);
    return am_send_in_place(peer, id, hdr, hlen, data, dlen);
}

os_status_t os_ucx_am_reply(void *reply, unsigned id, const void *hdr, size_t hlen,
                            const void *data, size_t dlen)
{
    if (!reply)
        return OS_ERR(OS_ERR_OTHER, "UCX: a message to answer came without a reply path");
    return am_send_ep(reply, id, hdr, hlen, data, dlen);
}

static os_status_t am_send_ep(ucp_ep_h ep, unsigned id, const void *hdr, size_t hlen,
                              const void *data, size_t dlen)
{
    /* One copy, freed on completion: callers (handlers among them) never wait. */
    char *buf = malloc(hlen + dlen + 1);
    if (!buf)
        return OS_ERR(OS_ERR_NOMEM, "active message of %zu bytes", hlen + dlen);
    memcpy(buf, hdr, hlen);
    if (dlen)
        memcpy(buf + hlen, data, dlen);
    ucp_request_param_t p = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK |
                        UCP_OP_ATTR_FIELD_USER_DATA,
        .flags = UCP_AM_SEND_FLAG_EAGER | UCP_AM_SEND_FLAG_REPLY,
        .cb.send = am_sent,
        .user_data = buf,
    };
    LOCK();
    void *req = ucp_am_send_nbx(ep, id, buf, hlen, buf + hlen, dlen, &p);
    UNLOCK();
    if (req == NULL) {
        free(buf);
        return OS_OK;
    }
    if (UCS_PTR_IS_ERR(req)) {
        free(buf);
        return ucs_err(UCS_PTR_STATUS(req), "ucp_am_send_nbx");
    }
    return OS_OK;
}

/* ------------------------------------------------------------ progress */

/* An application thread waits in one of onesided's loops, polling. (Every
 * poll: a stamp every 16th leaves a short wait, of a few polls, unstamped,
 * and the progress thread may take the worker from it; measured between
 * virtual nodes, no row gained from the clock reads saved.) */
static void app_waits(void)
{
    if (!in_progress_thread)
        atomic_store_explicit(&U.app_waited, os_ticks(), memory_order_relaxed);
}

/* One round: the worker progressed by this thread unless another holds it,
 * then the idle hook. One thread at a time progresses the worker, whichever
 * takes the token: the progress thread when the application is busy, a
 * waiting application thread otherwise (it then needs no thread switch to
 * see its completion). Never two at once: with two threads progressing,
 * UCX 1.13's TCP transport left messages undelivered under load.
 * With a request (wait_req), *s is its status, looked at under the same hold
 * of the worker as the progress that may complete it, so a reply that
 * arrives in this round ends the wait at once; once it is complete the round
 * returns with the worker still held. Returns the events seen. */
static unsigned progress_round(void *req, ucs_status_t *s)
{
    unsigned n = 0, seen = 1; /* another thread progresses: it saw what came */
    app_waits();
    if (U.worker && !pthread_mutex_trylock(&U.lock)) {
        if (req && (*s = ucp_request_check_status(req)) != UCS_INPROGRESS)
            return 0;
        seen = n = ucp_worker_progress(U.worker);
        if (req && n && (*s = ucp_request_check_status(req)) != UCS_INPROGRESS)
            return n;
        UNLOCK();
        /* Again at the end: one progress may have taken a millisecond
         * (sending or receiving a megabyte over TCP). */
        app_waits();
    } else if (req) {
        LOCK(); /* the holder's progress may have completed it */
        if ((*s = ucp_request_check_status(req)) != UCS_INPROGRESS)
            return 0;
        UNLOCK();
    }
    if (U.idle_hook && !in_handler)
        (void)U.idle_hook(seen);
    return n;
}

unsigned os_ucx_progress(void)
{
    /* wait_req backs off, and its next round comes at once. Skipped once
     * only: a wait nested in the back-off (a node-mate's request served
     * there; none waits today) must progress the worker itself. */
    if (in_req_wait) {
        in_req_wait = false;
        return 0;
    }
    return progress_round(NULL, NULL);
}

unsigned os_ucx_progress_for_host(void)
{
    unsigned n = 0, seen = 1;
    if (!U.worker || in_handler)
        return 0;
    /* A streak of polls close together: a blocking call's loop, not one
     * MPI_Iprobe between two stretches of computing (which may poll twice
     * or three times). Per thread: another thread's polls say nothing about
     * this one's. (Only application threads get here: the progress thread
     * never calls into the host MPI.) */
    static __thread unsigned streak;
    static __thread uint64_t last_start, last_end;
    const uint64_t t = os_ticks(), gap = os_us_to_ticks(OS_UCX_HOST_GAP_US);
    /* The gap is the time spent outside this function since the last
     * poll ended: a poll that itself took long (it received a megabyte
     * over TCP, or sent one) is no sign that the loop stopped. Measured
     * from start to start, such polls broke every streak during a large
     * transfer, and the progress thread then competed with this loop for
     * the worker: 1 MB puts across hosts at 0.55 of native's bandwidth.
     * Not where processes outnumber cores: there a long poll is more often
     * one that lost its core midway, and the loop is as good as stopped
     * (8 processes on 2 cores: lock/unlock through a node server 10-20 %
     * slower when such polls kept the thread napping). */
    streak = t - last_start < gap || (!os_oversubscribed && t - last_end < gap)
                 ? streak + 1
                 : 0;
    last_start = t;
    if (streak >= OS_UCX_HOST_STREAK)
        atomic_store_explicit(&U.host_loop_until, t + os_us_to_ticks(OS_UCX_HOST_LOOP_US),
                              memory_order_relaxed);
    atomic_store_explicit(&U.host_polled, t, memory_order_relaxed);
    if (!pthread_mutex_trylock(&U.lock)) {
        /* Checked again under the lock: finalize clears it under the lock. */
        if (U.worker) {
            in_host_progress = true;
            seen = n = ucp_worker_progress(U.worker);
            in_host_progress = false;
        }
        UNLOCK();
    }
    /* A poll that found nothing took well under a microsecond: its start
     * is its end. One clock read per empty poll instead of two (30 ns each
     * on this VM, against a host poll of about 100: the hook runs in every
     * round of every host collective, onesided's barriers included). */
    last_end = n ? os_ticks() : t;
    if (!os_oversubscribed && streak >= OS_UCX_HOST_STREAK && last_end > t + gap)
        atomic_store_explicit(&U.host_loop_until, last_end + os_us_to_ticks(OS_UCX_HOST_LOOP_US),
                              memory_order_relaxed);
    /* Every round, as os_ucx_progress: the progress thread stays off while
     * this loop polls, and the idle hook's timed retries must still run. */
    if (U.idle_hook)
        (void)U.idle_hook(seen);
    return n;
}

bool os_ucx_in_host_progress(void)
{
    return in_host_progress;
}

bool os_ucx_is_own_worker(const void *worker)
{
    return worker != NULL && worker == (const void *)U.worker;
}

void os_ucx_set_idle_hook(int (*fn)(unsigned events))
{
    U.idle_hook = fn;
}

bool os_ucx_in_handler(void)
{
    return in_handler > 0;
}

int os_ucx_endpoints(void)
{
    return atomic_load_explicit(&U.nendpoints, memory_order_relaxed);
}

void os_ucx_wake(void)
{
    if (U.thread_running && !in_progress_thread)
        (void)ucp_worker_signal(U.worker);
}

static void nap(long us)
{
    struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };
    nanosleep(&ts, NULL);
}

/* Sleep until the worker has an event, or for at most timeout_us. The
 * worker is armed under the progress token, so that no other thread
 * progresses (and consumes the event that arming would report) between our
 * last empty progress and the arm. Arming fails with BUSY when events are
 * already pending: then we do not sleep at all. */
static void sleep_on_worker(int timeout_us)
{
    if (U.efd < 0) {
        usleep((useconds_t)timeout_us);
        return;
    }
    ucs_status_t s;
    /* Never wait for the worker here: its holder is an application thread
     * sending or polling, which sees what arrives; nap, then look again.
     * (Blocking on the mutex cost that thread a futex wake per message.) */
    if (pthread_mutex_trylock(&U.lock)) {
        nap(OS_UCX_NAP_MIN_US);
        return;
    }
    /* Whatever this progress delivers may leave work for the idle hook (a
     * forwarded request to send on): then do not sleep, run the hook. */
    if (ucp_worker_progress(U.worker)) {
        UNLOCK();
        return;
    }
    s = ucp_worker_arm(U.worker);
    UNLOCK();
    if (s != UCS_OK)
        return; /* UCS_ERR_BUSY: something arrived; progress it */
    struct pollfd pfd = { .fd = U.efd, .events = POLLIN };
    struct timespec ts = { .tv_sec = timeout_us / 1000000,
                           .tv_nsec = (long)(timeout_us % 1000000) * 1000 };
    (void)ppoll(&pfd, 1, &ts, NULL);
}

/* The progress thread. Why it sleeps on the worker's event descriptor and
 * never spins with sched_yield: on a node whose cores are taken by
 * processes that busy-poll inside the host MPI (MPICH does, in every
 * blocking call), a thread that only yields stays runnable but gets the
 * core back at the scheduler's next tick (4 ms at HZ=250), after every
 * busy-polling thread of its run queue had its slice; a thread that sleeps
 * and is woken by an event is run at once (the scheduler favours a waking
 * sleeper). That tick was the 4 ms per operation of the first inter-node
 * measurements. The timeout bounds two things: the idle hook's retries
 * (lock requests wait for a CPU unlock, which sends no message), and a
 * lost wake-up, which UCX 1.13's TCP transport has shown under load
 * (U.idle_us). */
/* Ask the scheduler for a short slice (Linux 6.12+ EEVDF: sched_runtime of
 * a SCHED_OTHER thread). A thread with a short slice gets an early deadline
 * and preempts the running one when it wakes, instead of waiting for that
 * one's slice to end: a request is served within microseconds of its
 * arrival although every core runs a busy-polling or computing thread. The
 * thread is runnable for microseconds per request, so it takes little from
 * the others. Older kernels refuse the call or ignore the field. */
static void ask_short_slice(void)
{
#ifdef SYS_sched_setattr
    struct {
        uint32_t size, policy;
        uint64_t flags;
        int32_t nice;
        uint32_t priority;
        uint64_t runtime, deadline, period;
    } attr = { .size = 48, .policy = 0 /* SCHED_OTHER */, .runtime = 100000 /* ns */ };
    (void)syscall(SYS_sched_setattr, 0, &attr, 0);
#endif
}

static void *progress_main(void *arg)
{
    (void)arg;
    in_progress_thread = true;
    ask_short_slice();
    uint64_t last_event = 0;
    long nap_us = OS_UCX_NAP_MIN_US;
    while (!atomic_load_explicit(&U.stop, memory_order_acquire)) {
        /* An application thread that polls the worker itself sees its
         * events at once and runs the idle hook: one inside the host MPI's
         * poll loop (which progresses it too), or one that issues
         * operations and waits for their replies in onesided's loops (it
         * will be back within microseconds). Competing with it only costs
         * both a context switch per message: across hosts, waking on the
         * worker's descriptor and lingering after events made an 8-byte
         * put+flush 33-40 us instead of 28 without the thread. Stay off
         * meanwhile, napping (not sleeping on the descriptor, which that
         * thread drains); each nap's end takes a core from a polling
         * thread, so nap longer the longer the polling lasts. */
        const uint64_t t = os_ticks(), active = os_us_to_ticks(OS_UCX_APP_ACTIVE_US);
        const uint64_t waited = atomic_load_explicit(&U.app_waited, memory_order_relaxed);
        const uint64_t polled = atomic_load_explicit(&U.host_polled, memory_order_relaxed);
        if (t < atomic_load_explicit(&U.host_loop_until, memory_order_relaxed) ||
            t < waited + active) {
            /* An application that waited in onesided's loops stays active
             * until waited + active, and each wait renews that: no nap ends
             * sooner. Naps doubling from 20 us instead woke the thread five
             * times at the start of every active stretch, each time taking
             * the core of the thread that issues the operations (Open MPI
             * binds a rank and its threads to one core): bursts of 1 MB
             * gets and puts between virtual nodes ran at 0.75-0.85 of Open
             * MPI 5.0.11's bandwidth, at 0.90-1.03 with these naps (medians
             * of alternating jobs; benchmarks.md). Never later
             * than the window's end either, so the thread serves as soon
             * as it may. */
            long us = nap_us;
            if (t < waited + active) {
                const long left = (long)((waited + active - t) / os_ticks_per_us) + 1;
                us = left > us ? left : us;
            }
            nap(us);
            nap_us = nap_us * 2 > OS_UCX_NAP_MAX_US ? OS_UCX_NAP_MAX_US : nap_us * 2;
            continue;
        }
        /* The worker's holder is an application thread, and it sees what
         * arrives: stay off as above. (It can hold the worker for a
         * millisecond, sending a megabyte over TCP, the kernel delivering
         * it to the receiving socket in the same call; naps of 20 us then
         * took the core from it and from the peer, thousands of times a
         * second: 1 MB puts across hosts at 0.78 of native's bandwidth.)
         * Where processes outnumber cores the holder may have lost its core
         * holding it: run the idle hook's retries and look again soon. */
        unsigned n = 0;
        if (pthread_mutex_trylock(&U.lock)) {
            if (!os_oversubscribed) {
                nap(nap_us);
                nap_us = nap_us * 2 > OS_UCX_NAP_MAX_US ? OS_UCX_NAP_MAX_US : nap_us * 2;
                continue;
            }
        } else {
            nap_us = OS_UCX_NAP_MIN_US;
            n = ucp_worker_progress(U.worker);
            UNLOCK();
        }
        const int wait_us = U.idle_hook ? U.idle_hook(n) : -1;
        const uint64_t now = os_ticks();
        if (n) {
            last_event = now;
            continue;
        }
        /* A request is often followed by the next (lock, then unlock): poll
         * on for a moment, pausing the core (never sched_yield, above),
         * before paying a wake-up for it. Not where processes outnumber
         * cores: there the core it holds is one another process needs. Not
         * either while an application thread of ours polls now and then
         * (the host MPI's loop, preempted): the spinning took its core and
         * kept it away, so that this thread caught every message. */
        if (!os_oversubscribed && now - last_event < os_us_to_ticks(OS_UCX_LINGER_US) &&
            t > polled + active) {
            os_cpu_relax();
            continue;
        }
        sleep_on_worker(wait_us < 0 || wait_us > U.idle_us ? U.idle_us : wait_us);
    }
    return NULL;
}

os_status_t os_ucx_progress_thread_start(void)
{
    if (U.thread_running || !U.worker)
        return OS_OK;
    atomic_store(&U.stop, false);
    if (pthread_create(&U.thread, NULL, progress_main, NULL))
        return OS_ERR(OS_ERR_OTHER, "cannot start the progress thread");
    U.thread_running = true;
    return OS_OK;
}

bool os_ucx_progress_thread_running(void)
{
    return U.thread_running;
}

bool os_ucx_in_progress_thread(void)
{
    return in_progress_thread;
}
