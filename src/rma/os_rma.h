/*
 * The RMA engine: windows, epochs, operations, locks.
 *
 * Inside a node every window lives in (or is reachable from) one shared
 * segment: the data of MPI_Win_allocate/allocate_shared windows, and for
 * every flavor a control area holding the per-target lock words, fence and
 * PSCW counters and the dynamic-window region tables. Operations on mapped
 * memory are loads, stores and CPU atomics done by the origin alone; memory
 * the origin cannot map (MPI_Win_create, dynamic windows) is reached with
 * single-copy CMA, or, while its owner polls anyway (waiting inside MPI),
 * applied by the owner (node_request.c). No target process ever has to run
 * for an origin to finish: a request to one that stops polling is taken back.
 */
#ifndef OS_RMA_H
#define OS_RMA_H

#include <mpi.h>
#include <pthread.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "../../include/onesided.h"
#include "../transport/shm/os_shm.h"
#include "../transport/ucx/os_ucx.h"
#include "../util/os_util.h"
#include "os_dtype.h"
#include "os_lock.h"
#include "os_netlock.h"
#include "os_reduce.h"

typedef enum { OS_FLAVOR_CREATE, OS_FLAVOR_ALLOCATE, OS_FLAVOR_SHARED, OS_FLAVOR_DYNAMIC } os_flavor_t;

typedef enum {
    OS_ACCESS_NONE,
    OS_ACCESS_FENCE,    /* between fences (no MPI_MODE_NOSUCCEED) */
    OS_ACCESS_PSCW,     /* between start and complete */
    OS_ACCESS_LOCK,     /* one or more MPI_Win_lock held */
    OS_ACCESS_LOCK_ALL, /* MPI_Win_lock_all held */
} os_access_t;

typedef enum { OS_EXPOSE_NONE, OS_EXPOSE_FENCE, OS_EXPOSE_POST } os_exposure_t;

/* Per-target state of the current access epoch (os_win_t.tstate). */
enum {
    OS_T_NONE = 0,
    OS_T_PSCW_AWAIT_POST, /* in the start group, the target's post not yet seen */
    OS_T_PSCW_READY,      /* in the start group, post seen (or MPI_MODE_NOCHECK) */
    OS_T_LOCK_SHARED,
    OS_T_LOCK_EXCL,
    OS_T_LOCK_NOCHECK = 8, /* flag: lock granted by assertion, no lock word taken */
};

/* How a held lock was taken (os_win_t.lock_how), so that unlock undoes it. */
typedef enum {
    OS_HOLD_NONE,     /* no lock epoch toward this target */
    OS_HOLD_CPU,      /* the CPU ticket lock, by this process */
    OS_HOLD_MANAGER,  /* the CPU ticket lock, by the target's lock manager for us */
    OS_HOLD_NET,      /* the network lock word */
    OS_HOLD_DEFERRED, /* manager design: not asked for yet (lock piggybacking, net/lock.c) */
} os_lock_hold_t;

/* How this process reaches a peer's window memory: mapped, by CMA system
 * calls (same node, not mapped), or over the network (another node). */
typedef enum { OS_PEER_DIRECT, OS_PEER_CMA, OS_PEER_REMOTE } os_peer_access_t;

typedef struct {
    char *base;       /* DIRECT: address here; CMA: address in the peer process */
    MPI_Aint size;    /* bytes (unused for dynamic windows) */
    int disp_unit;
    pid_t pid;
    uint8_t access;   /* os_peer_access_t */
    /* Accumulates into this peer serialize on its mutex whatever the element:
     * true where some origin reaches the memory only by CMA, which cannot do
     * atomics, so that every origin (the owner too) takes the same path. */
    bool acc_mutex_always;
    void *map;        /* our mapping of the peer's shareable region, if any */
    size_t map_size;
    /* CMA: the part of the peer's window that is mapped here after all (the
     * whole pages inside a heap block, made shareable in place; the first
     * and last page hold other objects): [zone, zone + zone_len) in the
     * peer's addresses, at zone_map here. Data moves there by load and
     * store; accumulates keep the mutex, as on the rest of the window. */
    char *zone;
    size_t zone_len;
    char *zone_map;
    int world;        /* MPI_COMM_WORLD rank: the network layer's name for the peer */
    void *rkey;       /* REMOTE: the peer's unpacked memory key */
    int rdma_world;   /* REMOTE: whose endpoint reaches the memory (the key's owner: the
                       * node's first process when UCX allocated the node's data) */
    bool zero_copy;   /* REMOTE: UCX reaches the memory without the peer's help */
    char *ucx_map;    /* REMOTE, zero_copy: where UCX maps the peer's base here
                       * (ucp_rkey_ptr: another virtual node of this host), or NULL */
    bool word_zero_copy; /* ... and the peer's network lock word */
    bool tcp_only;    /* REMOTE: UCX reaches the peer over TCP alone: its worker carries
                       * every put, get and atomic (net/origin.c sends small ones as
                       * requests, net/lock.c the lock release behind them) */
    bool fence_orders_rdma; /* REMOTE: a ucp_worker_fence orders RDMA toward it before a
                             * later request of ours (it owns the key, and one host's
                             * transports carry both: os_ucx_on_host; net/origin.c) */
    _Atomic bool lock_parked_seen; /* REMOTE, tcp_only: the last hybrid lock of this peer
                                    * found its network word parked (net/lock.c) */
} os_peer_t;

/* Where [remote, remote + len) of a CMA peer's memory is mapped here, or
 * NULL (os_peer_t.zone). */
static inline char *os_peer_mapped(const os_peer_t *p, const char *remote, size_t len)
{
    if (!p->zone_len || remote < p->zone)
        return NULL;
    const size_t off = (size_t)(remote - p->zone);
    return off <= p->zone_len && len <= p->zone_len - off ? p->zone_map + off : NULL;
}

/* Rounds of the node barrier (os_rank_ctl_t.bar_round): a node of up to
 * 2^16 processes. */
enum { OS_BAR_ROUNDS = 16 };

/* One per rank, each on its own cache lines. */
typedef struct {
    _Alignas(OS_CACHELINE) os_lockword_t lock; /* passive-target window lock */
    /* For the watchdog only: 1 + the rank holding `lock` exclusively, or 0.
     * On the lock's line, which its holder has just written anyway. */
    _Atomic uint64_t lock_holder;
    /* The accumulate mutex of this rank's memory (os_acc_mutex_*): 0 free,
     * OS_ACC_HELD, or OS_ACC_HELD_BULK while a bulk accumulate runs here,
     * which CPU-atomic accumulates read as their flag. */
    _Alignas(OS_CACHELINE) _Atomic uint64_t acc_mutex;
    /* Fence: origins add how many of them will write here (reduce-scatter of
     * per-target counts), then signal when done; indexed by the parity of the
     * synchronizing fence so that a fast process may start the next fence
     * while a slow one still drains this one. */
    _Alignas(OS_CACHELINE) _Atomic uint64_t fence_expect[2];
    _Atomic uint64_t fence_done[2];
    /* How many fences this rank had entered at its last MPI_MODE_NOPRECEDE
     * fence (os_win_t.fences), stored with release: after that fence an
     * origin accesses this rank's memory once it reads its own count here. */
    _Atomic uint64_t fence_entered;
    /* Bulk accumulates (os_acc_bulk_enter): acc_active and acc_active_main
     * count this rank's CPU-atomic accumulates in flight (as an origin; the
     * second its main thread's alone, apply.c). Separate lines: each is
     * written often by its owner and read by bulk accumulators. */
    _Alignas(OS_CACHELINE) _Atomic uint64_t acc_active;
    _Alignas(OS_CACHELINE) _Atomic uint64_t acc_active_main;
    /* Dynamic windows (dynamic.c): a sequence lock, odd while the owner
     * changes its regions; how many it has; where its own array of them is. */
    _Alignas(OS_CACHELINE) _Atomic uint64_t dyn_version;
    _Atomic uint64_t dyn_count;
    _Atomic uint64_t dyn_table;
    /* The hybrid lock (os_netlock.h): the mode the node's lockers read
     * (OS_LOCKMODE_*), and how many of them used the network word since the
     * lock migrated there (the history policy's count). */
    _Alignas(OS_CACHELINE) _Atomic uint64_t lock_mode;
    _Atomic uint64_t lock_local_count;
    /* The node barrier of synchronizing fences (sync.c), a dissemination
     * barrier: in its round k, rank (this - 2^k) mod n stores here the number
     * of the barrier it has reached. One writer per word, read by this rank
     * alone: a store and a load cross cores, where a shared counter takes
     * every process's locked instruction in turn and a broadcast after. */
    _Alignas(OS_CACHELINE) _Atomic uint64_t bar_round[OS_BAR_ROUNDS];
} os_rank_ctl_t;

/* Node requests (node_request.c), in a segment of the node made at start-up:
 * per process its heartbeat (when it last polled, in os_ticks), on a line
 * of its own; per (target, origin) pair of processes one slot, shared by
 * all of the target's windows (the request names its window by the
 * target's key). An operation of up to OS_NREQ_LINE_DATA bytes in and out
 * (8-byte put, get, accumulate, fetch_and_op, compare_and_swap) fits the
 * slot's first line with its header: one line goes to the target and back.
 * Longer payloads continue in the following lines, and runs after the
 * first after the payload. */
typedef struct {
    _Alignas(OS_CACHELINE) _Atomic uint64_t heartbeat;
} os_nreq_line_t;

typedef struct {
    uint64_t addr; /* in the target's address space */
    uint32_t len;
} os_nreq_run_t;

#define OS_NREQ_RUNS 4
#define OS_NREQ_PAYLOAD 192
typedef struct {
    _Alignas(OS_CACHELINE) _Atomic uint32_t state;
    uint8_t kind, op, basic, nruns;  /* os_rma_kind_t, os_op_t, os_basic_t */
    uint16_t esize;
    int16_t status;                  /* the target's answer: an os_status_t code */
    uint16_t bytes;                  /* target bytes, in the runs */
    uint16_t in;                     /* origin (and compare) bytes first in data; the
                                      * fetched bytes follow them */
    uint64_t window;                 /* the target's key of the window (os_nreq_reserve) */
    os_nreq_run_t run0;
    char data[OS_NREQ_PAYLOAD];
    os_nreq_run_t runs[OS_NREQ_RUNS - 1]; /* runs 1.. */
} os_nreq_slot_t;
#define OS_NREQ_LINE_DATA 24
_Static_assert(offsetof(os_nreq_slot_t, data) + OS_NREQ_LINE_DATA == OS_CACHELINE,
               "a one-element request and its header share the slot's first line");
/* Nodes of more processes get no node requests (their segment holds n^2 slots). */
#define OS_NREQ_MAX_NODE 64

/* A region attached to a dynamic window, as the node's origins read it. */
typedef struct {
    _Atomic uint64_t base, size;
} os_region_t;

/* The regions this process attached, sorted by base (dynamic.c). */
typedef struct {
    uint64_t base, size;
} os_dyn_region_t;

typedef struct {
    os_dyn_region_t *v;
    size_t n, cap;
    pthread_mutex_t lock; /* the progress thread checks requests against it */
    bool ready;
} os_dyn_table_t;

typedef enum {
    OS_RMA_PUT, OS_RMA_GET, OS_RMA_ACC, OS_RMA_GET_ACC, OS_RMA_FOP, OS_RMA_CAS
} os_rma_kind_t;

/* One RMA operation, as the front end decoded it. */
typedef struct {
    uint8_t kind;  /* os_rma_kind_t */
    uint8_t op;    /* os_op_t, accumulate kinds */
    bool request;  /* an R* form: valid only in passive-target epochs */
    int target;
    const void *origin;
    size_t ocount;
    os_dtype_t *otype;
    MPI_Aint tdisp;
    size_t tcount;
    os_dtype_t *ttype;
    void *result;
    size_t rcount;
    os_dtype_t *rtype;
    const void *compare;
    /* R* forms: the request's counter. Puts and gets to another node's
     * memory count themselves in it and complete at MPI_Wait or MPI_Test
     * (os_remote_req_test); every other path completes before returning. */
    os_ucx_done_t *done;
} os_rma_op_t;

/* How an accumulate keeps each element atomic (ops.c). */
typedef enum { OS_ACC_ATOMIC, OS_ACC_EXCLUSIVE, OS_ACC_MUTEX } os_acc_mode_t;

/* Small accumulates to one target, coalesced within a passive epoch and
 * applied together at the next flush, unlock or conflicting operation
 * (coalesce.c). Origin data is copied, so the caller's buffer is free at once. */
typedef struct {
    char *taddr;     /* first element at the target (a peer address under CMA) */
    uint8_t op;      /* os_op_t */
    uint8_t basic;   /* os_basic_t */
    uint16_t nelems;
    uint32_t data;   /* offset of the origin elements in the batch's data */
} os_acc_entry_t;

typedef struct {
    os_acc_entry_t *entries;
    size_t n, cap;
    char *data;
    size_t dlen, dcap;
    size_t esize;    /* element size shared by every entry (slots never overlap partially) */
    uint8_t mode;    /* os_acc_mode_t shared by every entry */
    /* scratch of the CMA path, kept between batches */
    uint32_t *slot;         /* per element: its distinct-element slot */
    struct iovec *local, *remote;
    char *stage;            /* the distinct elements, read from the target */
    size_t nscratch, nlocal, nremote, nstage;
    os_hmap_t slot_of;      /* element address -> slot + 1, long batches only */
} os_acc_batch_t;

/* Which processes form a window's node: they share its control area (CPU
 * locks, fence and PSCW counters) and reach each other's memory without the
 * network. */
typedef enum {
    OS_NODES_CONFIGURED, /* real nodes, or virtual ones (ONESIDED_NODE_SIZE) */
    OS_NODES_REAL,       /* the real host, always (MPI_Win_allocate_shared) */
    OS_NODES_SELF,       /* each process alone: private memory where the kernel refuses
                          * CMA, which the node's other processes then reach over UCX */
    OS_NODES_KINDS
} os_nodes_t;

/* What a window needs besides its memory, kept for the next window created
 * over the same communicator (shell.c). */
typedef struct os_shell {
    MPI_Comm comm;        /* private duplicate of the program's communicator ... */
    bool own_comm;        /* ... this shell's own (threads), or its cache's (shell.c) */
    MPI_Group group;
    MPI_Comm node;        /* this process's (real or virtual) node within comm (the cache's) */
    int rank, nranks, node_rank, node_size;
    int node_first;       /* MPI_COMM_WORLD rank of the node's first process: its name */
    bool multinode;       /* some process of comm is on another node */
    bool one_host;        /* every process of comm is on this (real) host */
    os_nodes_t nodes;     /* what `node` is */
    MPI_Win handle;       /* the host MPI's window handle (shell.c says which kind) */
    bool handle_fallback_kind; /* made by handle_make's second choice of kind */
    /* the name the host gave the handle ("" in MPICH, "rdma window N" in
     * Open MPI, as for its own windows): each new window starts with it */
    char handle_name[MPI_MAX_OBJECT_NAME];
    /* the hints the handle holds: the host's defaults as os_shell_set_hints
     * gives them, those plus alloc_shm, or others (a program's, or a new
     * handle's own, which may differ from them by the handle's kind) */
    enum { OS_HINTS_NONE, OS_HINTS_SHARED, OS_HINTS_OTHER } hints_held;
    os_shm_seg_t ctl;     /* the node's control area, laid out as below ... */
    struct os_ctl_slab *ctl_slab; /* ... an area of this slab (shell.c) */
    int ctl_area;
    size_t ctl_bytes, post_off, post_stride, complete_off, complete_stride, regions_off;
    int inline_regions;   /* dynamic-window region copies per process */
    os_shm_seg_t data;    /* allocate flavors: the node's data, kept for the next window */
    /* A shell spanning nodes has UCX allocate the data (shell_data.c), so
     * that other nodes reach it by RDMA without this node's processes. */
    bool data_ucx;        /* data came from UCX: other nodes may map it (net/window.c) */
    struct os_data_slab *data_slab; /* the segment the data is a piece of ... */
    int data_piece;       /* ... and which */
    const char *data_key; /* the segment's packed key, for other nodes, ... */
    uint64_t data_key_addr; /* ... and the data's address in the key's owner */
    size_t data_key_len;
    uint64_t data_serial; /* names the segment in the job (shell_data.c); 0: none */
    /* this process's part of the last window's data, which the shell's next
     * window clears (os_shell_zero_later), or 0 bytes */
    char *zero_owed;
    size_t zero_owed_len;
    /* this process's part of the data that was zeroed last, and whether
     * every page of it was present then: pages stay once present */
    char *zeroed;
    size_t zeroed_len;
    bool zeroed_present;
    /* Other nodes' data keys as the last window on this shell unpacked
     * them (net/window.c), one per rank of comm, or NULL. */
    struct os_peer_data_key *peer_data_keys;
    struct os_comm_cache *cache;
    struct os_shell *next;
} os_shell_t;

/* What a window's RDMA toward a target issued since the last flush: puts,
 * and gets or operations whose MPI request waits for UCX's completion
 * (those need UCX's answer before the epoch may end at the origin). */
enum { OS_DIRTY_PUT = 1, OS_DIRTY_WAIT = 2 };

/* Post/start/complete/wait with one peer. Inside a node each signal is a
 * number only its sender writes and only its receiver reads (the post and
 * complete matrices): a release store that crosses the cores once, where a
 * shared counter takes a locked add and the receiver's own write to consume
 * it, which sends the line back. Each side keeps its counts here. */
typedef struct {
    uint64_t posts_seen;     /* as an origin: posts of this target consumed (post matrix) */
    uint64_t posts_flipped;  /* as an origin: posts of this target consumed (os_win_post_bits) */
    uint64_t posts_made;     /* as a target: posts made to this origin (node-mate) */
    uint64_t completes_made; /* as an origin: completes made to this target (node-mate) */
    uint64_t completes_seen; /* as a target: completes of this origin consumed (node-mate) */
} os_pscw_peer_t;

/* A hybrid lock manager away from CPU mode, polled soon (busy) or at the
 * progress thread's periodic wake-up (resting): net/serve.c. */
typedef enum { OS_HYB_CLASS_NONE, OS_HYB_CLASS_BUSY, OS_HYB_CLASS_RESTING } os_hyb_class_t;

typedef struct os_win {
    MPI_Win handle;  /* the shell's host handle: carries errhandler, attributes, name */
    pthread_mutex_t mtx; /* MPI_THREAD_MULTIPLE: held by the MPI call using the window */
    MPI_Comm comm;   /* private duplicate of the creation communicator */
    MPI_Group group;
    int rank, nranks;
    os_flavor_t flavor;
    void *base;      /* this process's window memory (MPI_WIN_BASE) */
    MPI_Aint size;
    int disp_unit;
    void *shared_pages; /* MPI_Win_create: the region its memory was made shareable in
                           (os_shm_region_adopt), given back at free; else NULL */
    os_config_t cfg; /* window-level tunables */
    bool noncontig;  /* alloc_shared_noncontig */

    os_peer_t *peers;
    os_shell_t *shell;
    os_rank_ctl_t *ctl;     /* [nranks] */
    int *node_ranks;        /* the ranks of this node, whose CPU-atomic counts a bulk
                             * accumulate reads (os_acc_node_quiet) */
    int nnode_ranks;
    int *node_index;        /* [nranks] position in node_ranks, or -1 off this node */
    size_t acc_bulk_bytes;  /* accumulates from this many bytes on memory that takes CPU
                             * atomics go bulk (os_acc_bulk); 0 = never */
    /* The bulk handshake's words (os_acc_atomic_try_enter): this process's
     * two counts, in its control line, or under acc_host in its network
     * word unit; under acc_host also where every process's unit is, with
     * its flag, joined count and counts (acc_host_join, net/window.c). */
    _Atomic uint64_t *acc_mine, *acc_mine_main;
    bool acc_fenceless; /* agreed: the main thread's count takes no fence (membarrier) */
    /* The main thread's unfencing (os_acc_unfence): fenced entries since
     * the last one, how many clear the flag, and whether it cleared one
     * and how many fenceless entries it has made since. */
    uint32_t acc_fenced_entries;
    uint32_t acc_unfence_after;
    bool acc_unfenced_by_me;
    uint64_t acc_fenceless_run;
    bool acc_host;
    _Atomic uint64_t **acc_host_units; /* [nranks] */
    _Atomic uint64_t *post; /* [nranks][post_stride]: post[o][t] counts posts by t for o */
    size_t post_stride;
    /* [nnode_ranks][complete_stride], by node positions: complete[t][o]
     * counts MPI_Win_complete calls by node-mate o for t */
    _Atomic uint64_t *complete;
    size_t complete_stride;
    os_region_t *regions;   /* [nranks][inline_regions]: copies of each rank's table */
    int inline_regions;
    os_dyn_table_t dyn;     /* this process's attached regions */

    /* epochs */
    os_access_t access;
    os_exposure_t exposure;
    bool fence_immediate;    /* operations of this fence epoch run at once (else queued) */
    bool fence_lazy;         /* ... or once their target has entered the fence that opened
                              * it (after MPI_MODE_NOPRECEDE, os_fence_await_entry) */
    uint64_t fences;         /* fences so far, the same count in every process */
    uint64_t *fence_seen;    /* [nranks] fences[target] when target was last seen entered */
    /* Operations issued in the fence epoch since the last fence, for
     * MPI_MODE_NOPRECEDE's check (fence_epoch_ops in sync.c): the count of
     * all operations (os_win_ops_issued) against its value at that fence,
     * plus those of a fence epoch the program left for another kind of
     * epoch without a fence. Counted at the fence, not per operation: a
     * test of the epoch per operation cost the 8-byte put 6 of its 150
     * instructions (callgrind, Open MPI 5.0.11). */
    uint64_t ops_at_fence;
    uint64_t fence_ops_left;
    /* An operation since the last full barrier stored into window or origin
     * memory with plain stores, which may still sit in this CPU's store
     * buffer: the next flush of mapped memory orders them before the loads
     * that follow (os_flush_barrier). Element atomics clear it: their
     * locked instruction drains every earlier store itself. */
    bool stores_unordered;
    uint64_t fence_syncs;    /* synchronizing fences so far */
    int8_t barrier_mapped;   /* windows spanning nodes, net/barrier.c: 0 until the first
                              * synchronizing fence agrees, then 1 = on rank 0's mapped lock
                              * word line, -1 = the host's allreduce */
    uint64_t barrier_seq;    /* barriers done on the mapped line */
    uint8_t *tstate;         /* [nranks] per-target epoch state */
    int nlocked;
    int *start_ranks;        /* current PSCW access group */
    int nstart;
    os_pscw_peer_t *pscw;    /* [nranks] */
    int *rank_identity;      /* [nranks] 0, 1, ...: for the MPI front end's ... */
    int *group_ranks;        /* [nranks] ... translation of a group to window ranks */
    int *post_ranks;         /* the current exposure group ... */
    int post_expect;         /* ... of this many origins, */
    int post_remote;         /* this many of them on other nodes, */
    int post_next;           /* and post_ranks[post_next] the first not yet heard complete */

    os_acc_batch_t *acc_batch; /* [nranks] coalesced accumulates, passive epochs only */

    /* between nodes (net/) */
    bool multinode;          /* some peer is on another (real or virtual) node */
    bool one_host;           /* every process is on this real host (what the host MPI sees) */
    uint64_t id;             /* the same in every process: names the window in requests */
    int serve_slot;          /* its place in net/serve.c's registry, while registered */
    os_ucx_reg_t reg;        /* this process's window memory, registered */
    uint8_t *dirty;          /* [nranks] RDMA issued since the last flush: OS_DIRTY_* bits */
    _Atomic int64_t *acks;   /* [nranks] accumulates sent and not yet acknowledged */
    _Atomic uint64_t served, served_thread, served_in_host, deferred; /* requests served as a target */
    int route;               /* os_route_t of its requests (net/forward.c) */
    size_t served_bulk_min;  /* accumulate requests served here of at least this many bytes
                              * may combine in bulk (os_acc_try_apply); 0 = never */
    bool amo_own_worker;     /* every network atomic on this process's memory is emulated
                              * by its own worker: the key is its own, and every endpoint
                              * of the window is TCP alone */
    os_hmap_t node_mates;    /* world rank + 1 -> window rank + 1 of the processes whose
                              * memory this one maps: its node server applies for them */
    /* passive-target locks of a window spanning nodes (net/lock.c) */
    _Atomic uint64_t *netword; /* this process's network lock word (UCX memory), and in its
                                  cache line os_win_remote_completes */
    struct os_lockword_block *netword_block; /* where it came from (net/lockword.c) */
    uint64_t *nl_addr;         /* [nranks] every process's lock word... */
    void **nl_rkey;            /* ... and key: the node's own lockers use it too */
    void **nl_map;             /* ... and where UCX maps it here, or NULL (os_ucx_mapped_atomic) */
    _Atomic bool words_mapped; /* UCX maps every process's word here (virtual nodes of one
                                * host): the hybrid lock stays on the word (net/lock.c) */
    os_hyb_mgr_t hyb;          /* this process's hybrid lock manager (under net/serve.c's lock) */
    bool hyb_ready;
    os_hyb_class_t hyb_class; /* which of serve.c's counts of managers away from CPU mode */
    uint64_t hyb_shared_next;  /* os_ticks of its next step in shared mode (net/serve.c) */
    uint8_t *lock_how;         /* [nranks] os_lock_hold_t of each held lock */
    struct os_kept_op *kept;   /* [nranks] a deferred lock's operation, kept for unlock */
    struct os_req_batch *req_batch; /* [nranks] requests held to leave together (net/request.c);
                                     * allocated by the first */
    uint64_t lock_rng;         /* the random policy's state, on the locking side */

    /* node requests (node_request.c): set on MPI_Win_create windows with
     * memory that some node-mate reaches by CMA */
    struct {
        uint64_t key;            /* this process's key of the window (0: none) */
        bool served;             /* its requests are served here */
        struct os_nreq_peer {
            uint64_t key;        /* the rank's key of the window, 0 off this node */
            int32_t line;        /* its position in the node segment */
        } *peers;                /* [nranks]; NULL: no requests on this window */
    } nreq;

    /* operations queued to the closing fence */
    os_rma_op_t *queue;
    size_t nqueue, capqueue;

    onesided_win_stats_t stats;

    /* front-end data kept with the window */
    int *attr_keys;      /* keyvals the program set on it: deleted at MPI_Win_free */
    int nattr_keys, capattr_keys;
    int attr_flavor;     /* storage for MPI_WIN_CREATE_FLAVOR */
    int attr_model;      /* storage for MPI_WIN_MODEL */
    MPI_Info host_info;  /* Open MPI: what MPI_Win_get_info reports (win_info.c) */
} os_win_t;

#define OS_STAT(w, s, n) ((w)->stats.counter[ONESIDED_STAT_##s] += (n))

/* shell.c */
/* A shell for a window over comm whose nodes are `nodes`: one left by a
 * freed window over comm, or a new one (collective over comm). shared: for
 * an allocating flavor (a handle made for it holds that flavor's hints). */
os_status_t os_shell_get(MPI_Comm comm, os_nodes_t nodes, bool shared, os_shell_t **out);
/* Give the host handle the window's hints (collective: called everywhere
 * when any process finds its handle stale); shared: its memory is in
 * shared memory (allocate flavors), which the host would say of its own
 * window of that flavor unless told otherwise. */
os_status_t os_shell_set_hints(os_shell_t *s, MPI_Info hints, bool shared);
/* Whether the handle must be given a new window's hints: it holds others. */
bool os_shell_hints_stale(const os_shell_t *s, MPI_Info hints, bool shared);
/* The program gave the window hints with MPI_Win_set_info. */
void os_shell_hints_from_program(os_shell_t *s);
/* A data segment of at least `bytes` for the node (collective over it). */
os_status_t os_shell_data(os_shell_t *s, size_t bytes);
/* Back to the cache, after the window's final barrier (collective). */
void os_shell_put(os_shell_t *s);
/* Whether os_shell_put keeps the data segment for the next window. */
bool os_shell_keeps_data(const os_shell_t *s);
/* The window's free: this process's part of the kept data, to be zeroed
 * before the next window over the shell may be reached (shell.c). */
void os_shell_zero_later(os_shell_t *s, void *part, size_t len);
/* MPI_Finalize: every cached shell goes (collective). */
void os_shell_finalize(void);

/* shell_data.c */
typedef struct os_data_slab os_data_slab_t;
/* The shell's data from UCX: a piece of a slab of `list` (the cache's, for
 * the shell's node kind), or for large data a segment of its own. False in
 * every process of the node where UCX cannot allocate shareable memory on
 * all of them (collective over the node). */
bool os_shell_data_ucx(os_shell_t *s, os_data_slab_t **list, size_t bytes);
/* The piece goes back to its slab, a slab with none left in use goes. */
void os_shell_data_ucx_release(os_shell_t *s);
/* Whether the release would end the segment (no other piece in use). */
bool os_shell_data_ucx_last(const os_shell_t *s);

/* window.c */
/* The processes onesided knows and names by rank ("world ranks" throughout:
 * the network layer's peer numbers, virtual nodes, node servers), and this
 * process alone. After MPI_Init: MPI_COMM_WORLD and MPI_COMM_SELF. A program
 * that uses MPI-4 sessions only has neither; the front end then makes both
 * from process sets of a session of its own (src/mpi/runtime.c). Set before
 * the first window. */
extern MPI_Comm os_world, os_self;
/* The os_world rank of the first process on this process's real host (what
 * the host MPI calls a node): the host's name. Set before the first window. */
extern int os_host_first;
/* The processes of comm on this process's node: real nodes, or virtual nodes
 * of virtual_size consecutive world ranks when it is positive. */
MPI_Comm os_node_comm(MPI_Comm comm, int virtual_size);
/* hints: the program's info, which the host MPI's window handle keeps. */
os_status_t os_win_create(os_flavor_t flavor, void *base, MPI_Aint size, int disp_unit,
                          const os_config_t *cfg, bool noncontig, MPI_Info hints,
                          MPI_Comm comm, os_win_t **out);
/* The bulk threshold in bytes (os_win_t.acc_bulk_bytes) that the setting
 * onesided_acc_bulk_min gives on this window: -1 automatic, 0 never. */
size_t os_acc_bulk_bytes(const os_win_t *w, int acc_bulk_min);
/* OS_OK when no epoch is open, so that the collective free may begin. */
os_status_t os_win_can_free(const os_win_t *w);
os_status_t os_win_free(os_win_t *w);
os_status_t os_win_shared_query(os_win_t *w, int rank, MPI_Aint *size, int *disp_unit,
                                void **baseptr);

/* dynamic.c */
os_status_t os_dyn_init(os_win_t *w);
void os_dyn_fini(os_win_t *w);
os_status_t os_win_attach(os_win_t *w, void *base, MPI_Aint size);
os_status_t os_win_detach(os_win_t *w, const void *base);
/* Is [addr, addr+len) inside memory `target` attached (the union of its
 * regions)? A node-mate's table is read from shared memory or by CMA; this
 * process's own is read under its mutex. */
bool os_dyn_find(os_win_t *w, int target, uint64_t addr, uint64_t len);

/* ops.c */
/* Wait until the target's post for this access epoch is visible. */
void os_pscw_await_post(os_win_t *w, int target);
/* "window 'name' (rank r of n)", for the watchdog's reports; returns its length. */
int os_win_describe(const os_win_t *w, char *buf, size_t len);
/* Declares a wait for the watchdog (`w` in scope); os_wait_pop ends it. */
#define WAIT_SITE(name, call_, target_, fn, arg_)                                              \
    os_wait_site_t name = { .call = (call_), .target = (target_), .obj = w,                   \
                            .describe = (fn), .arg = (arg_) };                                 \
    os_wait_push(&name)

/* In an epoch opened by a MPI_MODE_NOPRECEDE fence (os_win_t.fence_lazy):
 * waits until target has entered that fence, so that its loads and stores
 * of the epoch before happen before this process's access (ops.c). */
void os_fence_await_entry_slow(os_win_t *w, int target);
static inline void os_fence_await_entry(os_win_t *w, int target)
{
    if (w->fence_seen[target] != w->fences)
        os_fence_await_entry_slow(w, target);
}

/* Check an operation and do it, or queue it to the closing fence. */
os_status_t os_rma_issue(os_win_t *w, const os_rma_op_t *op);
/* Operations issued on w so far, of every kind and path (the statistics'
 * per-kind counts: an operation that moves nothing is not counted). */
uint64_t os_win_ops_issued(const os_win_t *w);
/* The fast path (ops.c): count contiguous elements of predefined type t (or
 * of a derived t that is one contiguous run of them) at the origin, the
 * target and (fetching kinds) the result, to memory this process maps, in
 * an epoch that already grants access to the target. True when done; false,
 * having done nothing, for anything else, errors included, which
 * os_rma_issue then decides and reports. */
bool os_rma_fast(os_win_t *w, os_rma_kind_t kind, os_op_t rop, const os_dtype_t *t,
                 size_t count, int target, MPI_Aint tdisp, const void *origin,
                 const void *compare, void *result, bool request);
/* os_rma_fast for one element of an 8-byte integer type t (OS_B_INT64 or
 * OS_B_UINT64, predefined) and an accumulate kind: the same contract. */
bool os_rma_fast_word(os_win_t *w, os_rma_kind_t kind, os_op_t rop, const os_dtype_t *t,
                      int target, MPI_Aint tdisp, const void *origin, const void *compare,
                      void *result, bool request);
/* os_rma_fast for a put or get (kind) of one element of a predefined t:
 * the same contract. */
bool os_rma_fast_elem(os_win_t *w, os_rma_kind_t kind, const os_dtype_t *t, int target,
                      MPI_Aint tdisp, const void *origin, bool request);
/* os_rma_fast for a put or get (kind) of count > 1 elements of a
 * predefined t: the same contract. */
bool os_rma_fast_run(os_win_t *w, os_rma_kind_t kind, const os_dtype_t *t, size_t count,
                     int target, MPI_Aint tdisp, const void *origin, bool request);
/* os_rma_fast for a plain accumulate of count > 1 elements of a
 * predefined t (MPI_NO_OP excluded): the same contract. */
bool os_rma_fast_acc(os_win_t *w, os_op_t rop, const os_dtype_t *t, size_t count, int target,
                     MPI_Aint tdisp, const void *origin, bool request);
os_status_t os_rma_execute(os_win_t *w, const os_rma_op_t *op);

/* Runs per process_vm_readv/writev call: the kernel's limit (UIO_MAXIOV),
 * so that a scattered accumulate of 1024 elements costs one system call
 * each way (apply.c, coalesce.c). */
#define OS_CMA_IOV 1024

/* apply.c: operations on memory of this node (taddr resolved and checked). */
os_status_t os_apply_move(os_win_t *w, int target, bool to_target, char *taddr,
                          const os_dtype_t *ttype, size_t tcount, const void *laddr,
                          const os_dtype_t *ltype, size_t lcount);
/* Accumulate, Get_accumulate and Fetch_and_op. */
os_status_t os_apply_accumulate(os_win_t *w, const os_rma_op_t *op, char *taddr);
os_status_t os_apply_cas(os_win_t *w, const os_rma_op_t *op, char *taddr);

/* apply.c: the atomicity path of an accumulate on `t` elements at taddr. */
static inline os_acc_mode_t os_acc_mode(const os_win_t *w, int target, const char *taddr,
                                        const os_dtype_t *t)
{
    const os_peer_t *p = &w->peers[target];
    uint8_t s = w->tstate[target] & ~OS_T_LOCK_NOCHECK;
    if (w->access == OS_ACCESS_LOCK && s == OS_T_LOCK_EXCL)
        return OS_ACC_EXCLUSIVE; /* nobody else may touch the target window */
    if (p->acc_mutex_always || p->access != OS_PEER_DIRECT)
        return OS_ACC_MUTEX;
    /* Elements that fit one CPU atomic and are aligned for it, wherever the
     * type puts them; any origin accumulating the same type at the same place
     * makes the same choice, which is what keeps mixed paths out. A
     * predefined type is one element. */
    bool ok = t->predefined ? os_reduce_atomic_ok(t->basic_size, taddr)
                            : os_reduce_atomic_ok_type(t, taddr);
    return ok ? OS_ACC_ATOMIC : OS_ACC_MUTEX;
}

/* A window's network words in each process (net/lockword.c): a unit of
 * OS_NL_UNIT_LINES cache lines of UCX memory. The first holds the lock
 * word, os_win_remote_completes and the fence's counters (net/barrier.c);
 * the next three the bulk handshake's words between virtual nodes of one
 * host (acc_host, net/window.c), each on a line of its own as in the
 * control area: the flag that bulk accumulates on this process's memory
 * hold and how many processes joined the handshake for it (written rarely,
 * read by every CPU-atomic accumulate on it), and this process's two
 * counts (written by it at every CPU-atomic accumulate, by different
 * threads). The last holds the post bits (os_win_post_bits): a line of its
 * own, since every MPI_Win_post toward this process writes it. */
enum {
    OS_NL_LINE_WORDS = OS_CACHELINE / 8,
    OS_NL_UNIT_LINES = 5,
    OS_NL_UNIT_WORDS = OS_NL_UNIT_LINES * OS_NL_LINE_WORDS,
    OS_NL_ACC_FLAG_WORD = OS_NL_LINE_WORDS,
    OS_NL_ACC_JOINED_WORD = OS_NL_LINE_WORDS + 1,
    OS_NL_ACC_ACTIVE_WORD = 2 * OS_NL_LINE_WORDS,
    OS_NL_ACC_ACTIVE_MAIN_WORD = 3 * OS_NL_LINE_WORDS,
    OS_NL_POSTS_WORD = 4 * OS_NL_LINE_WORDS,
    OS_NL_POST_BITS = OS_NL_LINE_WORDS * 64, /* targets of ranks below this post by bit */
};

/* The accumulate mutex of a target (os_rank_ctl_t.acc_mutex), a
 * test-and-set word as the host MPIs' own: taking it is one locked
 * instruction and giving it back a store, where a ticket lock's release is
 * a second one, a tenth of a small accumulate. Its holder says why
 * (OS_ACC_STATE bits): OS_ACC_HELD around accumulates that are not CPU
 * atomics (wide elements, memory reached by CMA), OS_ACC_HELD_BULK around
 * bulk ones, which CPU-atomic accumulates must wait out (below; under
 * acc_host bulk ones hold a flag of their own instead, os_acc_flag).
 * OS_ACC_FENCED, set by a holder (os_acc_fence_switch) and kept by every
 * later one, says that CPU-atomic accumulates on the target fence
 * (os_acc_atomic_try_enter); only a free word is cleared of it
 * (os_acc_unfence). */
enum {
    OS_ACC_FREE = 0,
    OS_ACC_HELD = 1,
    OS_ACC_HELD_BULK = 2,
    OS_ACC_STATE = 3,
    OS_ACC_FENCED = 4,
};

/* Takes a test-and-set word (the accumulate mutex, or under acc_host a
 * bulk flag) for `how`, keeping its OS_ACC_FENCED bit; *was gets the word
 * as it was. seq_cst: taking it for a bulk accumulate is the store of the
 * Dekker handshake below, ordered before the loads of the counts. */
static inline bool os_acc_word_take(_Atomic uint64_t *m, uint64_t how, uint64_t *was)
{
    uint64_t cur = atomic_load_explicit(m, memory_order_relaxed);
    *was = cur;
    return (cur & OS_ACC_STATE) == OS_ACC_FREE &&
           atomic_compare_exchange_strong_explicit(m, &cur, cur | how, memory_order_seq_cst,
                                                   memory_order_relaxed);
}

static inline bool os_acc_word_try(_Atomic uint64_t *m, uint64_t how)
{
    uint64_t was;
    return os_acc_word_take(m, how, &was);
}

/* Gives a word back, its OS_ACC_FENCED bit kept: nobody else changes a
 * held word, so a load and a store. */
static inline void os_acc_word_release(_Atomic uint64_t *m)
{
    const uint64_t held = atomic_load_explicit(m, memory_order_relaxed);
    atomic_store_explicit(m, held & OS_ACC_FENCED, memory_order_release);
}

static inline bool os_acc_mutex_try(os_win_t *w, int target, uint64_t how)
{
    return os_acc_word_try(&w->ctl[target].acc_mutex, how);
}

/* Waits with back-off (apply.c). */
void os_acc_mutex_acquire(os_win_t *w, int target, uint64_t how);

static inline void os_acc_mutex_release(os_win_t *w, int target)
{
    os_acc_word_release(&w->ctl[target].acc_mutex);
}

/* The word a bulk accumulate on target holds, which CPU-atomic accumulates
 * there read as their flag: the target's accumulate mutex, or under
 * acc_host the flag in its network words, which other virtual nodes map. */
OS_HOT _Atomic uint64_t *os_acc_flag(const os_win_t *w, int target)
{
    return w->acc_host ? w->acc_host_units[target] + OS_NL_ACC_FLAG_WORD
                       : &w->ctl[target].acc_mutex;
}

/* Whether a bulk accumulate runs on target (the CPU-atomic side's flag). */
OS_HOT bool os_acc_bulk_running(const os_win_t *w, int target)
{
    return (atomic_load_explicit(os_acc_flag(w, target), memory_order_seq_cst) &
            OS_ACC_STATE) == OS_ACC_HELD_BULK;
}

/* Around CPU-atomic accumulates on `target` (waits while a bulk one runs
 * there; the try form returns false instead of waiting). Inline: they are
 * most of an 8-byte accumulate's own cost.
 *
 * Large accumulates on memory whose elements take CPU atomics ("bulk",
 * apply.c) use plain loads and stores, which is safe only while no
 * CPU-atomic accumulate can touch the same memory: the two sides do a
 * Dekker handshake with sequentially consistent accesses. An atomic
 * accumulator raises its own count and then checks whether the target's
 * flag is held for a bulk accumulate; a bulk accumulator takes the flag
 * (a locked compare-and-swap) and then waits until the count of every
 * process that can reach the memory is zero. At least one side sees the
 * other's write. On one node the words are in the control area: the flag
 * is the target's accumulate mutex, the counts are the node's. Between
 * virtual nodes of one host (acc_host, net/window.c) other nodes' CPU
 * atomics reach the memory through UCX's mapping too: the words are then
 * in the network word units every process maps, and a bulk accumulate
 * reads every process's counts.
 *
 * The main thread, when no other thread may call MPI (not
 * MPI_THREAD_MULTIPLE), keeps its own count, acc_mine_main: one writer,
 * so raising it is an exchange (a locked instruction, the fence Dekker
 * needs) and lowering it a plain store, one locked instruction fewer per
 * accumulate than the shared count's fetch-and-add and fetch-and-sub.
 * Any other thread (the progress thread serving remote origins, a host MPI
 * thread that progresses onesided's worker, every thread under
 * MPI_THREAD_MULTIPLE) shares acc_mine. Both nest (a wait inside a
 * section may serve a request that enters again), hence counts.
 *
 * On a window whose processes all registered for membarrier
 * (acc_fenceless), the main thread raises its count with a plain store and
 * no fence at all while the target's flag is zero: no bulk accumulate has
 * run there yet. The fence moves to the bulk side, once: the first bulk
 * accumulate on the target takes the flag, runs a membarrier (a barrier on
 * every thread of every registered process, os_acc_fence_switch) and sets
 * OS_ACC_FENCED, which stays until many fenced entries clear it
 * (os_acc_unfence; every bulk accumulate checks the value it took the flag
 * from, so clearing is safe at any time). The handshake still holds for an
 * accumulator that read a zero flag: if its store came before the barrier
 * on its core, the barrier made it visible before the bulk side reads the
 * counts; if after, its load came after too and saw the flag taken. One
 * that reads a non-zero flag fences (the exchange) and reads it again.
 * The locked exchange was 29% of a small accumulate between virtual nodes
 * (perf annotate of mapped_acc, Open MPI 5.0.11), as much as the atomic
 * itself. */
OS_HOT bool os_acc_own_count(void)
{
    return os_main_thread && !os_threaded;
}

/* After acc_unfence_after fenced entries, the main thread clears the flag
 * it found fenced and free (os_acc_unfence), so that a window whose large
 * accumulates came once (a sweep of sizes, an initialization) does not
 * fence its small ones for the rest of its life. The next bulk accumulate
 * there pays a membarrier again: 11-14 us here, what about 3500 small
 * ones save by not fencing (4 ns each). So the threshold adapts, per window
 * (os_acc_refenced): it starts low, doubles whenever the target was fenced
 * again within OS_ACC_REFENCE_SOON fenceless entries (clearing did not pay
 * for its membarrier), and halves when it paid. Where the two sizes
 * alternate it grows until the small ones stay fenced; where the large
 * ones are rare, they stop fencing after a few hundred. */
enum {
    OS_ACC_UNFENCE_MIN = 1 << 8,
    OS_ACC_UNFENCE_MAX = 1 << 16,
    OS_ACC_REFENCE_SOON = 1 << 12,
};

/* apply.c */
void os_acc_unfence(os_win_t *w, int target);
void os_acc_refenced(os_win_t *w);

OS_HOT bool os_acc_atomic_try_enter(os_win_t *w, int target)
{
    if (os_acc_own_count()) {
        _Atomic uint64_t *c = w->acc_mine_main;
        uint64_t n = atomic_load_explicit(c, memory_order_relaxed);
        if (w->acc_fenceless) {
            /* A first look keeps a fenced target's entry at the exchange
             * alone; the load after the store decides. */
            _Atomic uint64_t *f = os_acc_flag(w, target);
            uint64_t flag = atomic_load_explicit(f, memory_order_relaxed);
            if (flag == 0) {
                atomic_store_explicit(c, n + 1, memory_order_relaxed);
                /* The compiler keeps the store before the load; the CPU
                 * need not (above). */
                atomic_signal_fence(memory_order_seq_cst);
                if (atomic_load_explicit(f, memory_order_relaxed) == 0) {
                    w->acc_fenceless_run++;
                    return true;
                }
            } else if (flag == OS_ACC_FENCED) {
                if (w->acc_unfenced_by_me)
                    os_acc_refenced(w);
                if (++w->acc_fenced_entries >= w->acc_unfence_after)
                    os_acc_unfence(w, target);
            }
        }
        atomic_exchange_explicit(c, n + 1, memory_order_seq_cst);
        if (!os_acc_bulk_running(w, target))
            return true;
        atomic_store_explicit(c, n, memory_order_release);
        return false;
    }
    atomic_fetch_add_explicit(w->acc_mine, 1, memory_order_seq_cst);
    if (!os_acc_bulk_running(w, target))
        return true;
    atomic_fetch_sub_explicit(w->acc_mine, 1, memory_order_release);
    return false;
}

/* No CPU-atomic accumulate in flight by the process whose two counts
 * these are (the bulk side's check). */
static inline bool os_acc_counts_quiet(_Atomic uint64_t *active, _Atomic uint64_t *active_main)
{
    return !atomic_load_explicit(active, memory_order_seq_cst) &&
           !atomic_load_explicit(active_main, memory_order_seq_cst);
}

/* Every process that can have CPU atomics in flight on memory this process
 * bulk-accumulates on is quiet: the node's, which alone map its memory, or
 * under acc_host every process of the window. */
static inline bool os_acc_all_quiet(const os_win_t *w)
{
    if (w->acc_host) {
        for (int r = 0; r < w->nranks; r++)
            if (!os_acc_counts_quiet(w->acc_host_units[r] + OS_NL_ACC_ACTIVE_WORD,
                                     w->acc_host_units[r] + OS_NL_ACC_ACTIVE_MAIN_WORD))
                return false;
        return true;
    }
    for (int i = 0; i < w->nnode_ranks; i++) {
        os_rank_ctl_t *c = &w->ctl[w->node_ranks[i]];
        if (!os_acc_counts_quiet(&c->acc_active, &c->acc_active_main))
            return false;
    }
    return true;
}

/* Waits with back-off (apply.c). */
void os_acc_all_quiet_wait(const os_win_t *w);

/* Takes target's flag for a bulk accumulate, waiting with back-off
 * (apply.c). */
uint64_t os_acc_flag_acquire(os_win_t *w, int target);

/* Holding target's flag taken from `was`, which lacks OS_ACC_FENCED on a
 * window with fenceless counts: makes CPU-atomic accumulates there fence
 * from now on (os_acc_atomic_try_enter), with a membarrier, and keeps the
 * flag. False, with the flag given back as it was, when the call fails
 * (stat fallback_acc_membarrier): the caller goes one atomic per element.
 * apply.c. */
bool os_acc_fence_switch(os_win_t *w, int target, uint64_t was);

/* Around a bulk accumulate on target: its flag taken, then every CPU-atomic
 * accumulate that can reach it waited out. False when it could not make
 * them fence (os_acc_fence_switch): nothing held, the caller goes one
 * atomic per element. Inline: from 32 bytes the handshake replaces one
 * locked instruction per element, so its own cost (one locked instruction
 * and a read of each process's counts) must stay at a host MPI's lock. */
static inline bool os_acc_bulk_enter(os_win_t *w, int target)
{
    uint64_t was;
    if (!os_acc_word_take(os_acc_flag(w, target), OS_ACC_HELD_BULK, &was))
        was = os_acc_flag_acquire(w, target);
    /* The value the flag was taken from decides, not an earlier look: a
     * CPU-atomic accumulate may have cleared OS_ACC_FENCED meanwhile. */
    if (w->acc_fenceless && !(was & OS_ACC_FENCED) && !os_acc_fence_switch(w, target, was))
        return false;
    if (!os_acc_all_quiet(w))
        os_acc_all_quiet_wait(w);
    return true;
}

static inline void os_acc_bulk_exit(os_win_t *w, int target)
{
    os_acc_word_release(os_acc_flag(w, target));
}

/* Whether an accumulate of `bytes` on target's memory, whose elements take
 * CPU atomics, goes bulk (os_win_t.acc_bulk_bytes). Under acc_host only
 * once every process of the window joined the handshake for the target:
 * one that did not may change the memory with atomics the handshake cannot
 * hold off (net/window.c). */
OS_HOT bool os_acc_bulk(const os_win_t *w, int target, size_t bytes)
{
    return w->acc_bulk_bytes && bytes >= w->acc_bulk_bytes &&
           (!w->acc_host ||
            atomic_load_explicit(w->acc_host_units[target] + OS_NL_ACC_JOINED_WORD,
                                 memory_order_acquire) ==
                (uint64_t)w->nranks);
}

/* Until no bulk accumulate runs on target, then entered (apply.c). */
void os_acc_atomic_wait(os_win_t *w, int target);

OS_HOT void os_acc_atomic_enter(os_win_t *w, int target)
{
    if (!os_acc_atomic_try_enter(w, target))
        os_acc_atomic_wait(w, target);
}

OS_HOT void os_acc_atomic_exit(os_win_t *w)
{
    if (os_acc_own_count()) {
        _Atomic uint64_t *c = w->acc_mine_main;
        uint64_t n = atomic_load_explicit(c, memory_order_relaxed);
        atomic_store_explicit(c, n - 1, memory_order_release);
        return;
    }
    atomic_fetch_sub_explicit(w->acc_mine, 1, memory_order_release);
}

/* apply.c: for net/serve.c */
/* A contiguous piece of a target buffer in a request from another node:
 * a byte offset in the window, or an address for dynamic windows. */
typedef struct {
    uint64_t addr;
    uint64_t len;
} os_run_t;
/* Apply an accumulate-kind request of another node to the memory of target
 * (this process, or a node-mate whose memory it maps, for which its node
 * server applies; run i resolved to addr[i]); false, with nothing done, when
 * it would have to wait for the accumulate mutex or a bulk accumulate. */
bool os_acc_try_apply(os_win_t *w, int target, bool cas, bool fetch, os_op_t op,
                      os_basic_t basic, size_t esize, char *const *addr, const os_run_t *runs,
                      uint32_t nruns, const char *odata, char *fdata, const char *compare);

/* net/: the network path, toward targets on other nodes (net/os_net.h).
 * Started at MPI_Init, once UCX knows every process: server_of[p] is the
 * MPI_COMM_WORLD rank of p's (real or virtual) node's first process, its
 * communication server for request routes (paper 004). */
os_status_t os_net_init(int nprocs, int me, const int *server_of);
/* One progress of the network, once it runs (every back-off step of a wait:
 * a process waiting for a counter also serves requests to itself). */
void os_net_wait_poll(void);
/* Send what forwarding queues still hold (MPI_Finalize). */
void os_net_drain(void);
/* Give back what the network path keeps across windows (MPI_Finalize,
 * after os_net_drain, before the endpoints close). */
void os_net_finalize(void);
os_status_t os_remote_win_setup(os_win_t *w, const void *base, size_t bytes);
void os_remote_win_teardown(os_win_t *w);
/* Give back the other nodes' data keys a shell keeps (shell.c, as the
 * shell goes). */
void os_remote_shell_release(os_shell_t *s);
os_status_t os_remote_execute(os_win_t *w, const os_rma_op_t *op, char *taddr);
/* Whether the accumulate would be one network atomic done without the
 * target (direct accumulate on memory UCX allocated): then batching it
 * would only make it wait for the target. */
bool os_remote_acc_one_sided(const os_win_t *w, const os_rma_op_t *op, const char *taddr);
/* Progress the network once; true when nothing counted in d is in flight
 * (*st then says whether one failed). Any thread, any time. */
bool os_remote_req_test(os_ucx_done_t *d, os_status_t *st);
/* Remote completion of everything issued to target (all when target < 0). */
os_status_t os_remote_flush(os_win_t *w, int target);
/* A barrier over the window's processes that also ORs *queued (net/barrier.c). */
os_status_t os_remote_barrier(os_win_t *w, int *queued);
/* Send operations kept under deferred locks, and requests held for a batch
 * (MPI_Win_sync). */
os_status_t os_remote_send_kept(os_win_t *w);
/* Passive-target locks of a window spanning nodes, for every target (the
 * node's own too): the design of w->cfg.lock. *contended is set when the
 * lock was not free. */
os_status_t os_remote_lock(os_win_t *w, int target, bool exclusive, bool *contended);
os_status_t os_remote_unlock(os_win_t *w, int target, bool exclusive);
/* Their quick forms (net/lock.c): the network word where it is mapped here
 * and free (lock) or nothing waits before its release (unlock); true when
 * done, false with nothing changed. */
bool os_remote_lock_now(os_win_t *w, int target, bool exclusive);
bool os_remote_unlock_now(os_win_t *w, int target, bool exclusive);
os_status_t os_remote_post(os_win_t *w, int origin);
/* Send a batch of coalesced accumulates (coalesce.c) to another node. */
os_status_t os_remote_acc_batch(os_win_t *w, int target, const os_acc_batch_t *b);
os_status_t os_remote_complete(os_win_t *w, int target);
void os_remote_stats_sync(os_win_t *w);

/* node_request.c */
/* The node's lines and slots, collective over world at start-up; node_size
 * as os_node_comm. On failure node requests stay off. */
os_status_t os_nreq_node_init(MPI_Comm world, int node_size);
void os_nreq_node_finalize(void);
/* This process's key for a new MPI_Win_create window, for the others to name
 * it in requests (0 when node requests are off); before the creation's
 * collective that spreads it. */
uint64_t os_nreq_reserve(os_win_t *w);
/* Give the window node requests when its memory needs them (node_index[r]:
 * r's position among the node's nlocal processes, -1 elsewhere; keys[r]:
 * r's key of it); then this process serves it. Detach after the window's
 * last barrier, or when its creation fails (it gives the key back). */
void os_nreq_attach(os_win_t *w, const int *node_index, int nlocal, const uint64_t *keys);
void os_nreq_detach(os_win_t *w);
/* A small operation on a CMA peer whose heartbeat says it polls: applied by
 * it, complete on return (*st). false: nothing was done, use CMA. */
bool os_nreq_execute(os_win_t *w, const os_rma_op_t *op, char *taddr, os_status_t *st);
/* The first entries of a short coalesced batch (at most OS_NREQ_BATCH_MAX
 * requests' worth) sent the same way, in order; returns how many were
 * applied (all of them on an error, in *st); the rest go by CMA. */
#define OS_NREQ_BATCH_MAX 4
size_t os_nreq_acc_batch(os_win_t *w, int target, const os_acc_batch_t *b, os_status_t *st);
/* Serve the requests posted to this process; never blocks. Every poll of
 * the host MPI's waiting loop and every back-off step of onesided's waits. */
void os_nreq_poll(void);
/* What every back-off step of a wait runs (os_backoff_hook): node requests,
 * and the network when it runs. */
void os_rma_wait_poll(void);

/* coalesce.c */
/* Queue a small accumulate when the window coalesces it; false = do it now. */
bool os_acc_coalesce(os_win_t *w, const os_rma_op_t *op, char *taddr, os_status_t *st);
/* Apply what is queued for one target, or for all (target < 0). */
os_status_t os_acc_drain(os_win_t *w, int target);
void os_acc_batches_free(os_win_t *w);

/* sync.c */
os_status_t os_win_fence(os_win_t *w, int assert);
os_status_t os_win_post(os_win_t *w, const int *ranks, int n, int assert);
os_status_t os_win_start(os_win_t *w, const int *ranks, int n, int assert);
os_status_t os_win_complete(os_win_t *w);
os_status_t os_win_wait(os_win_t *w);
os_status_t os_win_test(os_win_t *w, int *flag);
os_status_t os_win_lock(os_win_t *w, int exclusive, int target, int assert);
os_status_t os_win_unlock(os_win_t *w, int target);

/* A node-mate's lock word (a window of one node: CPU atomics alone touch
 * it), taken at once when nobody holds it or waits for it; false with the
 * ticket drawn otherwise, whose turn the caller then waits for. */
OS_HOT bool os_lock_take_local(os_win_t *w, int target, bool exclusive, uint16_t *ticket)
{
    os_rank_ctl_t *c = &w->ctl[target];
    *ticket = os_lock_ticket(&c->lock);
    if (exclusive ? !os_lock_excl_ready(&c->lock, *ticket)
                  : !os_lock_shared_enter(&c->lock, *ticket))
        return false;
    if (exclusive)
        atomic_store_explicit(&c->lock_holder, (uint64_t)w->rank + 1, memory_order_relaxed);
    return true;
}

/* Gives back a node-mate's lock held as `s` (a tstate). Release: the
 * epoch's operations are visible before the lock is free. */
OS_HOT void os_lock_drop_local(os_win_t *w, int target, uint8_t s)
{
    atomic_thread_fence(memory_order_release);
    if (s & OS_T_LOCK_NOCHECK)
        return;
    if (s == OS_T_LOCK_EXCL) {
        atomic_store_explicit(&w->ctl[target].lock_holder, 0, memory_order_relaxed);
        os_lock_release_excl_local(&w->ctl[target].lock);
    } else
        os_lock_release_shared(&w->ctl[target].lock);
}

/* The lock epoch opened (os_win_lock_now's OS_LOCK_QUEUED case, once the
 * ticket's turn came, or os_win_lock): the target's state, the count of
 * held locks, the statistics. */
OS_HOT void os_win_lock_opened(os_win_t *w, bool exclusive, int target, int assert)
{
    w->tstate[target] = (uint8_t)((exclusive ? OS_T_LOCK_EXCL : OS_T_LOCK_SHARED) |
                                  ((assert & MPI_MODE_NOCHECK) ? OS_T_LOCK_NOCHECK : 0));
    w->nlocked++;
    w->access = OS_ACCESS_LOCK;
    if (exclusive)
        OS_STAT(w, LOCK_EXCLUSIVE, 1);
    else
        OS_STAT(w, LOCK_SHARED, 1);
}

/* The lock epoch toward target closed (os_win_unlock, os_win_unlock_now),
 * its lock given back. */
OS_HOT void os_win_lock_closed(os_win_t *w, int target)
{
    w->tstate[target] = OS_T_NONE;
    if (--w->nlocked == 0)
        w->access = OS_ACCESS_NONE;
}

/* MPI_Win_lock and MPI_Win_unlock, inline in the front end with no call
 * and no register saved: the cases that can neither fail nor wait, checked
 * as os_win_lock and os_win_unlock check them. The two front-end functions
 * had 21 and 18 instructions of register saves and restores around
 * os_win_lock's and os_win_unlock's bodies inlined into them, of 100 and 84
 * (callgrind, a shared lock, Open MPI 5.0.11), where osc/sm's lock and
 * unlock take 88 and 72; the leaves take 110 for the pair.
 *
 * os_win_lock_now: OS_LOCK_GENERAL, nothing done, for anything but an
 * assert of 0 or MPI_MODE_NOCHECK toward a target of this window with no
 * epoch open or a lock epoch on other targets; OS_LOCK_TAKEN with the epoch
 * open; OS_LOCK_QUEUED with a ticket drawn that was not served at once,
 * which os_win_lock_queued waits for (out of line); OS_LOCK_SPANNING,
 * nothing done, where the checks passed on a window spanning nodes, whose
 * lock os_win_lock_spanning_now then tries (out of line: it calls into the
 * network layer). */
typedef enum { OS_LOCK_GENERAL, OS_LOCK_TAKEN, OS_LOCK_QUEUED, OS_LOCK_SPANNING } os_lock_now_t;
OS_HOT os_lock_now_t os_win_lock_now(os_win_t *w, bool exclusive, int target, int assert,
                                     uint16_t *ticket)
{
    if ((unsigned)target >= (unsigned)w->nranks || (assert & ~MPI_MODE_NOCHECK) ||
        w->exposure == OS_EXPOSE_FENCE ||
        !(w->access == OS_ACCESS_NONE ||
          (w->access == OS_ACCESS_LOCK && w->tstate[target] == OS_T_NONE)))
        return OS_LOCK_GENERAL;
    if (w->multinode)
        return OS_LOCK_SPANNING;
    if (!(assert & MPI_MODE_NOCHECK)) {
        if (!os_lock_take_local(w, target, exclusive, ticket))
            return OS_LOCK_QUEUED;
        OS_STAT(w, LOCK_ACQUIRED, 1);
    }
    os_win_lock_opened(w, exclusive, target, assert);
    return OS_LOCK_TAKEN;
}
/* The ticket os_win_lock_now drew, waited for; then the epoch opens. */
void os_win_lock_queued(os_win_t *w, bool exclusive, int target, uint16_t ticket);
/* os_win_lock_now's OS_LOCK_SPANNING: the epoch opened where the target's
 * lock was taken at once (os_remote_lock_now); false, nothing done, for
 * MPI_MODE_NOCHECK and a lock not free, which os_win_lock decides. */
bool os_win_lock_spanning_now(os_win_t *w, bool exclusive, int target, int assert);

/* os_win_unlock_now: OS_UNLOCK_GENERAL, nothing done, for a target not
 * locked alone by MPI_Win_lock or with accumulates still coalesced for it;
 * OS_UNLOCK_DONE; OS_UNLOCK_SPANNING, nothing done, on a window spanning
 * nodes, for os_win_unlock_spanning_now. */
typedef enum { OS_UNLOCK_GENERAL, OS_UNLOCK_DONE, OS_UNLOCK_SPANNING } os_unlock_now_t;
OS_HOT os_unlock_now_t os_win_unlock_now(os_win_t *w, int target)
{
    if ((unsigned)target >= (unsigned)w->nranks || w->access != OS_ACCESS_LOCK ||
        w->tstate[target] == OS_T_NONE || (w->acc_batch && w->acc_batch[target].n))
        return OS_UNLOCK_GENERAL;
    if (w->multinode)
        return OS_UNLOCK_SPANNING;
    os_lock_drop_local(w, target, w->tstate[target]);
    os_win_lock_closed(w, target);
    return OS_UNLOCK_DONE;
}
/* os_win_unlock_now's OS_UNLOCK_SPANNING: the epoch closed where the lock
 * is given back with nothing to wait for (os_remote_unlock_now); false,
 * nothing done, otherwise. */
bool os_win_unlock_spanning_now(os_win_t *w, int target);
os_status_t os_win_lock_all(os_win_t *w, int assert);
os_status_t os_win_unlock_all(os_win_t *w);
os_status_t os_win_flush(os_win_t *w, int target, bool all);

/* MPI_Win_complete calls received from origins on other nodes (node-mates
 * signal in the complete matrix, os_win_t.complete): the word after the
 * network lock word, in the cache line of UCX memory that is the window's
 * own (net/lockword.c). An origin that UCX maps the line into raises it
 * with a CPU atomic (net/origin.c), the others by request; MPI_Win_wait
 * consumes it. Windows spanning nodes only. */
enum { OS_NL_COMPLETES_WORD = 1 };
static inline _Atomic uint64_t *os_win_remote_completes(const os_win_t *w)
{
    return w->netword + OS_NL_COMPLETES_WORD;
}

/* MPI_Win_post signals from targets on other nodes that map this process's
 * network words (another virtual node of this host; os_win_t.nl_map): each
 * target of rank below OS_NL_POST_BITS owns bit (rank % 64) of word
 * (rank / 64) of the posts line, and flips it with a CPU atomic at each
 * post toward this process (net/origin.c). A flip, not a set, so that
 * nobody has to clear it: this process sees post number k of that target
 * when the bit is k's parity. One bit is enough because a target posts
 * again only after MPI_Win_wait saw this process's MPI_Win_complete, which
 * comes after the post was consumed (os_pscw_await_post). The others send
 * a message, which this process's server counts in the post matrix.
 * Windows spanning nodes only. */
static inline _Atomic uint64_t *os_win_post_bits(const os_win_t *w, int target)
{
    return w->netword + OS_NL_POSTS_WORD + target / 64;
}

/* The memory barrier of a flush whose operations all completed when they
 * were issued (mapped memory, no coalesced accumulates, no other node).
 * It orders this process's loads after its puts, as the host MPIs' own
 * flush does (x86 keeps stores in order, not a store and a later load).
 * On x86 a flush after locked CPU atomics and gets of up to 2048 bytes
 * alone needs none (a locked instruction, which costs what the barrier
 * costs, 10-15 ns here, is one): each atomic's update of the target is its
 * locked instruction, which waited for every earlier store and which no
 * later load passes; a get's loads are ordered before everything after
 * them, and its stores, none of them non-temporal (ops.c,
 * GET_ORDERED_MAX), land in the origin's buffer, which others read only
 * after a later synchronization that x86's store order carries. What is
 * left in the store buffer then is that and the atomic's fetched value:
 * the origin's own memory. Threads (MPI_THREAD_MULTIPLE) share no store
 * buffer, and their operations keep the barrier. */
static inline void os_flush_barrier(os_win_t *w)
{
#if defined(__x86_64__) || defined(__i386__)
    if (!w->stores_unordered && !os_threaded) {
        OS_STAT(w, FLUSH_NO_BARRIER, 1);
        return;
    }
#endif
    os_fence_seq_cst();
    w->stores_unordered = false;
}

/* The flush of one target whose operations all completed when they were
 * issued (mapped memory, none coalesced for it) in a passive-target
 * epoch: the barrier alone, inline in the front end. False, having done
 * nothing, for anything else, which os_win_flush decides. Windows that
 * coalesce accumulates or span nodes take os_win_flush_done_spanning, out
 * of line (the front end chooses): its extra loads and branches made the
 * node's 8-byte put+flush 2 ns (10%) slower on MPICH 5.0.2. */
bool os_win_flush_done_spanning(os_win_t *w, int target);
static inline bool os_win_flush_done(os_win_t *w, int target)
{
    if (target < 0 || target >= w->nranks ||
        !(w->access == OS_ACCESS_LOCK_ALL ||
          (w->access == OS_ACCESS_LOCK && w->tstate[target] != OS_T_NONE)))
        return false;
    OS_STAT(w, FLUSHES, 1);
    os_flush_barrier(w);
    return true;
}
os_status_t os_win_sync(os_win_t *w);
/* A fence epoch with nothing queued may give way to another epoch kind. */
bool os_win_fence_idle(const os_win_t *w);

#endif
