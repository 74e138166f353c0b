/*
 * onesided.h: the public extensions of onesided.
 *
 * onesided provides MPI one-sided communication (every MPI_Win_* call and
 * every RMA operation) in place of the host MPI's own, through the MPI
 * profiling interface. Programs need no change: link -lonesided before the
 * MPI library, or run under the `onesided-run` launcher (LD_PRELOAD).
 * This header is only for programs that want more than the MPI standard
 * gives: statistics, the configuration table, and the info keys.
 *
 * Tunables are set with environment variables (process-wide defaults) and,
 * where a window-level info key exists, per window with MPI_Info at window
 * creation or MPI_Win_set_info. `ONESIDED_HELP=1` prints the table at
 * MPI_Init; onesided_print_config() prints it at any time.
 */
#ifndef ONESIDED_H
#define ONESIDED_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ONESIDED_VERSION_MAJOR 0
#define ONESIDED_VERSION_MINOR 1

/* ---------------------------------------------------------------- info keys
 * Window info keys onesided reads, besides the standard ones it honours
 * (no_locks, accumulate_ordering, accumulate_ops, same_size, same_disp_unit,
 * alloc_shared_noncontig). Values are integers; "true"/"false" also work. */

/* "1": queue every operation of a fence epoch to the closing fence, as in the
 * MPICH-2 design (paper 003). Default "0": operations run at once when the
 * opening fence synchronized; after MPI_MODE_NOPRECEDE, inside a node, once
 * their target has entered that fence, and between nodes they are queued. */
#define ONESIDED_INFO_FENCE_DEFER "onesided_fence_defer"
/* Coalescing of small accumulates (at most 64 bytes) to one target inside a
 * passive epoch: they are copied, queued in issue order and applied together
 * at the next flush, unlock, MPI_Win_sync, other operation to that target, or
 * when the batch is full. "-1" (default) = where each accumulate would cost a
 * system call or the accumulate mutex (memory reached by CMA); "1" = always;
 * "0" = never. Per-element atomicity and same-origin ordering are kept. */
#define ONESIDED_INFO_ACC_COALESCE "onesided_acc_coalesce"
/* Most accumulates queued for one target before they are applied (default 1024). */
#define ONESIDED_INFO_ACC_COALESCE_MAX "onesided_acc_coalesce_max"

/* Progress thread for windows spanning nodes: "1" (default) = a thread serves
 * other nodes' requests (lock manager, accumulates it must apply) while the
 * application computes; "0" = served only inside onesided's own calls.
 * The standard hint no_locks=true also declines it (paper 003). */
#define ONESIDED_INFO_PROGRESS "onesided_progress"
/* Passive-target lock design of a window spanning nodes (paper 000):
 * "hybrid" (default) = CPU atomics inside the target's node, network atomics
 * from other nodes, the lock migrating between the two through the target's
 * lock manager; "network" = network atomics on the target's lock word for
 * every locker; "manager" = every lock request goes to the target's lock
 * manager (two-sided). Agreed at window creation: if processes ask for
 * different designs, network beats manager beats hybrid. */
#define ONESIDED_INFO_LOCK "onesided_lock"
/* When a hybrid lock migrates: "paper" = on every request from the other
 * side; "history" (default) = after onesided_lock_streak requests in a row
 * from the other side, or, where every process's lock word is mapped into
 * every process (virtual nodes of one host), on the first remote request,
 * never to come back for the node's lockers; "random" = by coin flip
 * (tests). Agreed at creation. */
#define ONESIDED_INFO_LOCK_POLICY "onesided_lock_policy"
/* The history policy's streak (default 4). Agreed at creation. */
#define ONESIDED_INFO_LOCK_STREAK "onesided_lock_streak"
/* Direct accumulate (paper 001) on a window spanning nodes: "1" (default) =
 * a one-element accumulate of 4 or 8 bytes into another node's memory
 * (SUM, BAND, BOR, BXOR on integers; REPLACE and NO_OP also on floating
 * point; Compare_and_swap on integers) is one network atomic, done without
 * the target; the window then has no bulk accumulates. "0" = such
 * accumulates are applied by the target. Agreed at creation: any process
 * asking for "0" wins. Not used into memory that takes the accumulate mutex
 * (MPI_Win_create over memory another process of its node reaches by CMA)
 * or on dynamic windows. Counted as acc_direct / fallback_acc_request. */
#define ONESIDED_INFO_ACC_DIRECT "onesided_acc_direct"
/* Accumulates of at least this many bytes on memory that takes CPU atomics
 * combine with plain loads and stores while atomic ones wait (default 512);
 * "0" = always one atomic per element. */
#define ONESIDED_INFO_ACC_BULK_MIN "onesided_acc_bulk_min"

/* Route of this window's requests between nodes (paper 004): "direct"
 * (default), "server" (through each node's communication server) or
 * "cooperative" (servers in groups of ONESIDED_GROUP_SIZE nodes forward for
 * each other). Needs ONESIDED_ROUTE set to a route other than direct in
 * every process's environment, which starts the servers; otherwise the
 * window goes direct (stat fallback_route_direct). Fixed at creation. */
#define ONESIDED_INFO_ROUTE "onesided_route"
/* Microseconds a forwarding server holds this window's requests for more
 * bound to the same next server (default 0: none); see ONESIDED_AGG_WINDOW_US. */
#define ONESIDED_INFO_AGG_WINDOW_US "onesided_agg_window_us"

/* --------------------------------------------------------------- statistics
 * Every window counts what it did; set ONESIDED_STATS=1 for a report at
 * MPI_Finalize, or read the counters with onesided_win_get_stats. Counters
 * whose name starts with "fallback" count uses of a slower path. */
typedef enum {
    ONESIDED_STAT_PUT_OPS,          /* MPI_Put and MPI_Rput calls */
    ONESIDED_STAT_PUT_BYTES,        /* bytes they moved */
    ONESIDED_STAT_GET_OPS,          /* MPI_Get and MPI_Rget calls */
    ONESIDED_STAT_GET_BYTES,
    ONESIDED_STAT_ACC_OPS,          /* MPI_Accumulate and MPI_Raccumulate calls */
    ONESIDED_STAT_ACC_BYTES,
    ONESIDED_STAT_GET_ACC_OPS,      /* MPI_Get_accumulate and MPI_Rget_accumulate calls */
    ONESIDED_STAT_GET_ACC_BYTES,
    ONESIDED_STAT_FOP_OPS,          /* MPI_Fetch_and_op calls */
    ONESIDED_STAT_CAS_OPS,          /* MPI_Compare_and_swap calls */
    ONESIDED_STAT_REQUEST_OPS,      /* operations of the request-based R* forms */
    ONESIDED_STAT_FENCES,           /* MPI_Win_fence calls */
    ONESIDED_STAT_FENCE_SYNCS,      /* fences that synchronized (no MPI_MODE_NOPRECEDE) */
    ONESIDED_STAT_PSCW_ACCESS,      /* MPI_Win_start/complete epochs */
    ONESIDED_STAT_PSCW_EXPOSURE,    /* MPI_Win_post/wait epochs */
    ONESIDED_STAT_LOCK_SHARED,      /* MPI_Win_lock(MPI_LOCK_SHARED) epochs */
    ONESIDED_STAT_LOCK_EXCLUSIVE,   /* MPI_Win_lock(MPI_LOCK_EXCLUSIVE) epochs */
    ONESIDED_STAT_LOCK_ALL,         /* MPI_Win_lock_all epochs */
    ONESIDED_STAT_LOCK_ACQUIRED,    /* lock words taken (lock_all takes one per target) */
    ONESIDED_STAT_LOCK_CONTENDED,   /* ... of which had to wait for another holder */
    ONESIDED_STAT_FLUSHES,          /* MPI_Win_flush* calls */
    ONESIDED_STAT_ACC_ATOMIC_ELEMS, /* accumulate elements updated by one CPU atomic each */
    ONESIDED_STAT_ACC_EXCL_ELEMS,   /* ... updated with plain stores under an exclusive lock */
    ONESIDED_STAT_FALLBACK_CMA,     /* operations on memory this process cannot map (MPI_Win_create,
                                       dynamic windows): moved by process_vm_readv/writev */
    ONESIDED_STAT_FALLBACK_ACC_MUTEX, /* accumulates serialized by the target's accumulate mutex
                                         (elements wider than 8 bytes, misaligned, or not mapped) */
    ONESIDED_STAT_FALLBACK_FENCE_DEFERRED, /* operations queued to the closing fence */
    ONESIDED_STAT_FALLBACK_PACKED,  /* accumulates that packed a non-contiguous buffer first */
    ONESIDED_STAT_ACC_BULK_ELEMS,   /* accumulate elements combined with plain loads and stores by a large accumulate
                                       that excluded CPU-atomic ones (ONESIDED_ACC_BULK_MIN) */
    ONESIDED_STAT_ACC_COALESCED,    /* accumulates queued for coalescing (ONESIDED_ACC_COALESCE) */
    ONESIDED_STAT_ACC_BATCHES,      /* ... batches in which they were applied */
    ONESIDED_STAT_REMOTE_RDMA,      /* puts and gets to another node done by RDMA (UCX) on memory
                                       UCX allocated: done without the target (zero-copy) */
    ONESIDED_STAT_FALLBACK_AM,      /* operations to another node carried out by the target on
                                       request (active message): accumulates, dynamic windows */
    ONESIDED_STAT_LOCK_MANAGER,     /* lock requests sent to a lock manager (two-sided) */
    ONESIDED_STAT_AM_SERVED,        /* requests of other nodes this process served as a target */
    ONESIDED_STAT_AM_SERVED_THREAD, /* ... of which its progress thread served */
    ONESIDED_STAT_AM_DEFERRED,      /* ... of which had to wait for a local lock and were retried */
    ONESIDED_STAT_LOCK_NETWORK,     /* locks taken with network atomics on the lock word */
    ONESIDED_STAT_LOCK_NET_RETRIES, /* ... network lock attempts that found it held and backed off */
    ONESIDED_STAT_LOCK_TO_NETWORK,  /* this process's hybrid lock migrated to network mode (or started there) */
    ONESIDED_STAT_LOCK_TO_CPU,      /* ... migrated back to CPU mode */
    ONESIDED_STAT_ACC_DIRECT,       /* one-element accumulate-kind calls to another node done
                                       without it: one network atomic (direct accumulate,
                                       onesided_acc_direct), or this CPU's atomic where UCX maps
                                       the memory here (acc_mapped) */
    ONESIDED_STAT_FALLBACK_ACC_REQUEST, /* ... sent to the target as a request instead (coalesced
                                       batches count each accumulate they carry) */
    ONESIDED_STAT_LOCK_PIGGYBACKED, /* lock epochs whose one operation went with the lock request
                                       (manager design, onesided_lock_piggyback) */
    ONESIDED_STAT_LOCK_ELIDED,      /* ... lock epochs with no operation: nothing was sent */
    ONESIDED_STAT_FALLBACK_DYN_TABLE_CMA, /* dynamic-window address checks that read the target's
                                       region table by CMA (more regions than
                                       onesided_dynamic_inline_regions) */
    ONESIDED_STAT_FALLBACK_REMOTE_EMULATED, /* puts, gets and network atomics to another node on
                                       memory UCX did not allocate (MPI_Win_create, or UCX had
                                       no shareable memory), which UCX can only emulate in the
                                       target's worker: each waits for the target's progress */
    ONESIDED_STAT_REQUEST_DEFERRED, /* R* puts and gets to another node still moving when the call
                                       returned: completed by MPI_Test or MPI_Wait (MPICH hosts) */
    ONESIDED_STAT_FAST_PATH_OPS,    /* operations on one predefined element to mapped memory that
                                       skipped the datatype walk (the single-element fast path) */
    ONESIDED_STAT_DTYPE_DECODED,    /* derived datatypes this window's calls flattened anew */
    ONESIDED_STAT_DTYPE_REUSED,     /* ... found already flattened under the same layout (a type
                                       created, used and freed again, as each step of a loop does) */
    /* Request routes between nodes (ONESIDED_ROUTE, paper 004). The counters
     * from requests_forwarded on are the process's, not the window's (a
     * node's server forwards for every window), sampled when read. */
    ONESIDED_STAT_FALLBACK_ROUTE_DIRECT, /* windows that asked for a route the job does not run
                                            (ONESIDED_ROUTE unset) and went direct */
    ONESIDED_STAT_REQUESTS_FORWARDED, /* requests and replies this process passed on for others */
    ONESIDED_STAT_REQUESTS_APPLIED_FOR_NODE, /* requests for a process of its node that this
                                                process, as the node's server, applied itself */
    ONESIDED_STAT_REQUESTS_AGGREGATED, /* ... requests and replies that left in a batch of two or
                                          more (route_batches: how many such batches) */
    ONESIDED_STAT_ROUTE_BATCHES,
    ONESIDED_STAT_ROUTE_MESSAGES,   /* routed messages this process sent (batches included) */
    ONESIDED_STAT_REQUEST_PEERS,    /* processes this one exchanged requests or replies with:
                                       its connection state for requests */
    ONESIDED_STAT_ENDPOINTS,        /* UCX endpoints this process opened (RDMA included) */
    ONESIDED_STAT_REQUEST_BUFFER_BYTES, /* bytes of aggregation buffers it holds for next hops */
    ONESIDED_STAT_FALLBACK_NO_CMA,  /* 1 for a window over private memory whose node-mates this
                                       process reaches through UCX and their progress threads,
                                       because the kernel refuses CMA here (ONESIDED_CMA) */
    ONESIDED_STAT_LOCK_RELEASE_FLUSHED, /* network lock releases that first waited for the epoch's
                                       RDMA, which took another path than the lock word (emulated,
                                       or through the process that owns the memory's key) */
    ONESIDED_STAT_CREATE_SHARED_BYTES, /* MPI_Win_create: bytes of this process's own memory made
                                       shareable for the window (onesided_create_share), so that
                                       node-mates reach it without CMA */
    ONESIDED_STAT_AM_SERVED_IN_HOST, /* requests of other nodes served (am_served) while this
                                       process waited inside a call of the host MPI, whose poll
                                       loop progresses onesided too (ONESIDED_HOST_PROGRESS) */
    ONESIDED_STAT_NODE_REQUESTS,    /* operations on a node-mate's memory that only CMA reaches,
                                       applied by that process while it polled (ONESIDED_NODE_REQUESTS) */
    ONESIDED_STAT_NODE_REQUESTS_SERVED, /* ... such requests this process applied for node-mates */
    ONESIDED_STAT_FALLBACK_NODE_REQUEST_CMA, /* ... posted, taken back when the target stopped
                                       polling, and done by CMA */
    ONESIDED_STAT_ACC_MAPPED,       /* accumulate-kind calls to another node's memory that UCX
                                       maps here (a virtual node of this host), applied with this
                                       process's CPU atomics (one-element ones count in acc_direct
                                       too) */
    ONESIDED_STAT_REMOTE_SMALL_REQUESTS, /* small puts and gets, and accumulate-kind calls, to
                                       another node that UCX reaches only over TCP, sent as
                                       requests the target applies (onesided_remote_request_max) */
    ONESIDED_STAT_LOCK_RELEASE_BY_REQUEST, /* network lock releases sent behind the epoch's
                                       requests, applied by the target in order */
    ONESIDED_STAT_LOCK_MANAGER_FIRST, /* hybrid locks of a target reached over TCP alone that
                                       asked its lock manager at once, its network word having
                                       been parked at this origin's last lock */
    ONESIDED_STAT_REMOTE_MAPPED,    /* ... of remote_rdma: puts and gets to another node's memory
                                       that UCX maps here (a virtual node of this host), copied
                                       by this process's CPU */
    ONESIDED_STAT_COMPLETE_BEHIND_RDMA, /* MPI_Win_complete toward another node of this host
                                       ordered behind the epoch's RDMA by ucp_worker_fence
                                       instead of a flush */
    ONESIDED_STAT_FLUSH_NO_BARRIER, /* ... of flushes: those of mapped memory that needed no memory
                                       barrier, every operation since the last one having been a
                                       locked CPU atomic or a one-element get (x86) */
    ONESIDED_STAT_LOCK_RELEASE_MAPPED, /* network lock releases done by this process's CPU atomic
                                       on the lock word UCX maps here (a virtual node of this
                                       host), the epoch's UCX operations flushed first */
    ONESIDED_STAT_COMPLETE_MAPPED, /* MPI_Win_complete signals to another node done by this
                                      process's CPU atomic on the counter UCX maps here (a
                                      virtual node of this host), the epoch completed first */
    ONESIDED_STAT_DATA_KEYS_REUSED, /* MPI_Win_allocate windows: other nodes' keys to their
                                       data kept from the last window over the same
                                       communicator, whose data they still are, or held by
                                       another window for the same segment (a slab of small
                                       data, a node's data), instead of unpacked again (no
                                       segment attached and detached) */
    ONESIDED_STAT_FENCE_MAPPED,     /* fence barriers between nodes done on the counters UCX maps
                                       here (window rank 0's lock word line) instead of the host's
                                       allreduce (ONESIDED_FENCE_MAPPED) */
    ONESIDED_STAT_ACC_HOST_JOINED,  /* windows between virtual nodes of one host: targets for
                                       which this process joined the bulk accumulate handshake
                                       on the words UCX maps (every process joining for a
                                       target lets bulk accumulates run there) */
    ONESIDED_STAT_POST_MAPPED,      /* MPI_Win_post signals to another node done by this
                                       process's CPU atomic on the origin's post bits UCX maps
                                       here (a virtual node of this host) instead of a message */
    ONESIDED_STAT_HANDLE_HINTS_SET, /* 1 for a window whose creation gave the host MPI's window
                                       handle its hints (MPI_Win_set_info on the handle): the
                                       window has hints, or the handle held others */
    ONESIDED_STAT_ACC_FENCE_SWITCHES, /* targets on which this process's bulk accumulate was the
                                       first: a membarrier, after which CPU-atomic accumulates
                                       there fence (ONESIDED_ACC_MEMBARRIER) */
    ONESIDED_STAT_ACC_UNFENCED,     /* ... targets this process cleared again after 256 to 65536
                                       fenced CPU-atomic accumulates, a number that adapts to how
                                       soon bulk ones come back (the next one switches anew) */
    ONESIDED_STAT_FALLBACK_ACC_MEMBARRIER, /* 1 for a window whose CPU-atomic accumulates all
                                       fence because a process of it could not register for
                                       membarrier, plus bulk accumulates done one atomic per
                                       element because the call failed */
    ONESIDED_STAT_REMOTE_BURST_PUTS, /* puts to another node that UCX reaches only over TCP,
                                       small enough to go as requests, sent by UCX's put because
                                       a request to the target was still unanswered (a burst) */
    ONESIDED_STAT_COUNT
} onesided_stat_t;

typedef struct {
    uint64_t counter[ONESIDED_STAT_COUNT];
} onesided_win_stats_t;

/* Name of a counter, e.g. "put_ops"; NULL for an invalid index. */
const char *onesided_stat_name(int stat);

/* Copy the calling process's counters of a window created by onesided.
 * Returns MPI_SUCCESS, or MPI_ERR_WIN when win is not one of onesided's. */
int onesided_win_get_stats(MPI_Win win, onesided_win_stats_t *stats);

/* Print the table of tunables: variable, info key, current value, default, help. */
void onesided_print_config(FILE *out);

/* 1 when onesided is the RMA implementation of this process (after MPI_Init). */
int onesided_active(void);

#ifdef __cplusplus
}
#endif
#endif
