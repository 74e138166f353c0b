/*
 * onesided utilities: the one status type, error reporting, logging, the
 * configuration table, waiting with back-off, a small hash map, and the
 * copy RMA data takes.
 * This layer knows nothing about MPI.
 */
#ifndef OS_UTIL_H
#define OS_UTIL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* For the few helpers of the 8-byte fast paths that must be inline
 * whatever the compiler's budget: with link-time optimization GCC 12 made
 * calls of them once ops.c grew (an 8-byte fetch_and_op between virtual
 * nodes went from 0.022 to 0.024 us). */
#define OS_HOT static inline __attribute__((always_inline))

/* A sequentially consistent fence. On x86-64 it is the locked instruction
 * GCC makes of atomic_thread_fence(memory_order_seq_cst), but below the
 * stack pointer, as Linux's smp_mb() does: GCC's `lock orq $0,(%rsp)` is
 * on the return address when the function saved no register, and the
 * `ret` that loads it next waited for it. An 8-byte put + flush took 16 ns
 * instead of 12.5 then (Open MPI 5.0.11, os_microbench), and 19 instead of
 * 14 between virtual nodes. Or-ing 0 changes nothing in the red zone. */
OS_HOT void os_fence_seq_cst(void)
{
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__) /* TSan knows the fence, not the asm */
    __asm__ __volatile__("lock orl $0,-4(%%rsp)" ::: "memory", "cc");
#else
    atomic_thread_fence(memory_order_seq_cst);
#endif
}

/* ---------------------------------------------------------------- status */

/* The one status type used inside onesided. The MPI front end maps each value
 * to an MPI error class (os_status_to_mpi_class in src/mpi). */
typedef enum {
    OS_OK = 0,
    OS_ERR_ARG,         /* invalid argument of no more specific kind */
    OS_ERR_COMM,        /* invalid communicator */
    OS_ERR_RANK,        /* target rank outside the window's group */
    OS_ERR_COUNT,       /* negative count */
    OS_ERR_TYPE,        /* datatype invalid or not allowed here */
    OS_ERR_OP,          /* reduction op invalid or not allowed for the type */
    OS_ERR_DISP,        /* invalid displacement unit */
    OS_ERR_SIZE,        /* invalid window size */
    OS_ERR_INFO,        /* invalid info value */
    OS_ERR_ASSERT,      /* invalid assert bits */
    OS_ERR_LOCKTYPE,    /* lock type is neither shared nor exclusive */
    OS_ERR_WIN,         /* not a window */
    OS_ERR_RANGE,       /* access outside the target window */
    OS_ERR_TRUNCATE,    /* origin data larger than the target (or result) buffer */
    OS_ERR_SYNC,        /* call outside an epoch / mismatched synchronization */
    OS_ERR_CONFLICT,    /* an epoch conflicts with one already open */
    OS_ERR_ATTACH,      /* dynamic window attach/detach failure */
    OS_ERR_SHARED,      /* memory cannot be shared */
    OS_ERR_FLAVOR,      /* operation not valid for this window flavor */
    OS_ERR_NOMEM,       /* out of memory */
    OS_ERR_BASE,        /* not memory MPI_Alloc_mem gave out (MPI_Free_mem) */
    OS_ERR_UNSUPPORTED, /* valid MPI, not (yet) supported by onesided */
    OS_ERR_OTHER        /* a system or host-MPI call failed */
} os_status_t;

const char *os_status_name(os_status_t st);

/* Record an error where it is first seen: keeps a per-thread message for the
 * front end (which prints it under MPI_ERRORS_ARE_FATAL) and logs it once at
 * log level >= 2. Returns st so that it can be used as `st = OS_ERR(...)`. */
os_status_t os_error_set(os_status_t st, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define OS_ERR(st, ...) os_error_set((st), __func__, __VA_ARGS__)
/* The message of the last error recorded by this thread. */
const char *os_error_message(void);

/* --------------------------------------------------------------- logging */

extern int os_log_level; /* 0 silent, 1 warnings, 2 errors seen, 3 debug */
void os_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define OS_WARN(...) do { if (os_log_level >= 1) os_log(1, __VA_ARGS__); } while (0)
#define OS_DEBUG(...) do { if (os_log_level >= 3) os_log(3, __VA_ARGS__); } while (0)
void os_log_set_rank(int rank);

/* ---------------------------------------------------------- configuration */

/* Every tunable of the library, read in one place (os_config.c).
 * X(field, type, env var, window info key or NULL, default, help) */
#define OS_CONFIG_TABLE(X)                                                                    \
    X(stats, int, "ONESIDED_STATS", NULL, "0",                                                \
      "Print a statistics report per window at MPI_Finalize: 1 = summed over ranks, "        \
      "2 = also one line per rank.")                                                          \
    X(watchdog, int, "ONESIDED_WATCHDOG", NULL, "0",                                          \
      "Seconds after which a wait inside onesided (fence, PSCW, lock, flush, a reply) "     \
      "prints once what it waits for: the call, window, target, and the lock's tickets, "    \
      "holder or counters; it then keeps waiting. 0 = off.")                                 \
    X(verbose, int, "ONESIDED_VERBOSE", NULL, "0",                                            \
      "Log level: 0 quiet, 1 warnings, 2 also every error where first seen, 3 debug.")       \
    X(spin_count, int, "ONESIDED_SPIN_COUNT", NULL, "-1",                                     \
      "Polls of a waiting loop before it yields the core on every further poll. "            \
      "-1 = automatic: 2000 when the node has a core per process, 16 when oversubscribed.")  \
    X(dynamic_inline_regions, int, "ONESIDED_DYNAMIC_INLINE_REGIONS", NULL, "256",            \
      "Regions attached to a dynamic window that the node's origins check from shared "       \
      "memory; a process may attach any number, and beyond this many the others read its "  \
      "table by CMA (stat fallback_dyn_table_cma). The control area of a communicator's "   \
      "windows is laid out once, with the largest value any process gives.")               \
    X(fence_defer, int, "ONESIDED_FENCE_DEFER", "onesided_fence_defer", "0",                  \
      "1 = queue every operation of a fence epoch to the closing fence (paper 003); "        \
      "0 = do operations at once when the opening fence synchronized and closed an epoch "   \
      "with nothing queued, and after MPI_MODE_NOPRECEDE inside a node once their target "  \
      "has entered that fence. Fixed at window creation (any process asking for 1 wins).")  \
    X(acc_coalesce, int, "ONESIDED_ACC_COALESCE", "onesided_acc_coalesce", "-1",             \
      "Coalesce small MPI_Accumulate calls (up to 64 bytes) to one target inside a passive "   \
      "epoch and apply them together at the next flush or unlock: -1 = automatic (where "      \
      "each call would cost a system call or the accumulate mutex: memory reached by CMA), "   \
      "1 = every target, 0 = never.")                                                          \
    X(acc_coalesce_max, int, "ONESIDED_ACC_COALESCE_MAX", "onesided_acc_coalesce_max", "1024", \
      "Most accumulates coalesced for one target before they are applied (HPCC's look-ahead " \
      "is 1024).")                                                                             \
    X(acc_bulk_min, int, "ONESIDED_ACC_BULK_MIN", "onesided_acc_bulk_min", "-1",              \
      "Accumulates of at least this many bytes on memory that takes CPU atomics exclude the "  \
      "atomic ones for a moment and combine with plain vectorized loads and stores (ten "     \
      "times the bandwidth of one atomic per element); -1 = automatic (16 bytes per process " \
      "of the node, from 32 to 512), 0 = always one atomic per element.")                     \
    X(acc_membarrier, int, "ONESIDED_ACC_MEMBARRIER", "onesided_acc_membarrier", "1",        \
      "1 = a CPU-atomic accumulate (fetch_and_op, compare_and_swap, small accumulates) of "  \
      "the main thread tells large ones it runs with a plain store, and the first large "    \
      "accumulate on a target makes the others fence with a membarrier system call (about "  \
      "12 us; stat acc_fence_switches) until enough fenced ones clear it again (stat "       \
      "acc_unfenced: 256 at first, twice as many each time the target is fenced again soon " \
      "after, up to 65536), which saves every small accumulate a locked instruction; 0 = "   \
      "every CPU-atomic accumulate fences. Needs every process of the window registered "  \
      "for membarrier at MPI_Init (stat fallback_acc_membarrier). Agreed at window creation " \
      "(any process asking for 0 wins).")                                                    \
    X(acc_direct, int, "ONESIDED_ACC_DIRECT", "onesided_acc_direct", "1",                    \
      "Direct accumulate (paper 001) for windows spanning nodes: one element of 4 or 8 bytes "  \
      "to another node's memory (Fetch_and_op, Compare_and_swap, Get_accumulate and "          \
      "uncoalesced Accumulate with SUM, REPLACE, NO_OP, BAND, BOR or BXOR on the types UCX "    \
      "can take) is one network atomic, done without the target. Such windows give up bulk "   \
      "accumulates (onesided_acc_bulk_min), whose plain stores a network atomic cannot see, "  \
      "except between virtual nodes of one host whose memory UCX maps everywhere. "            \
      "Agreed at window creation (any process asking for 0 wins).")                            \
    X(alloc_mem_shared, int, "ONESIDED_ALLOC_MEM", NULL, "1",                                 \
      "1 = MPI_Alloc_mem returns memory other processes of the node can map, so that "       \
      "MPI_Win_create over it gets load/store and CPU atomics instead of CMA; 0 = the "       \
      "host MPI's MPI_Alloc_mem.")                                                            \
    X(alloc_mem_max_regions, int, "ONESIDED_ALLOC_MEM_MAX_REGIONS", NULL, "256",              \
      "Most shareable regions MPI_Alloc_mem holds at once, each a memfd (a file "             \
      "descriptor): one per block above 64 KiB, one per 1 MiB arena of blocks of up to "      \
      "64 KiB of one power-of-two size; beyond it the host MPI's MPI_Alloc_mem serves. "      \
      "MPI_Init grows the descriptor table for twice as many.")                               \
    X(create_share, int, "ONESIDED_CREATE_SHARE", "onesided_create_share", "1",               \
      "1 = MPI_Win_create over the program's own memory makes its pages shareable in place "   \
      "(copied into a memfd mapped over the same addresses, private again at MPI_Win_free), "  \
      "so that the node's other processes reach it by load, store and CPU atomics instead of " \
      "CMA: whole pages of the window, or a glibc mmapped chunk's (malloc of 128 KiB and "    \
      "up), all private anonymous memory; other memory (a small malloc sharing its pages) "   \
      "keeps CMA. Costs a copy of the pages at creation and at free (stat "                    \
      "create_shared_bytes). 0 = always CMA.")                                                  \
    X(cma, int, "ONESIDED_CMA", NULL, "1",                                                    \
      "1 = reach the node's other processes' private memory (MPI_Win_create over memory "    \
      "not from MPI_Alloc_mem, dynamic windows) by cross-memory attach (process_vm_readv/"   \
      "writev) and map their MPI_Alloc_mem blocks through /proc/<pid>/fd, where MPI_Init's "  \
      "probe finds the kernel allows it. Where it refuses (a container's seccomp profile, "   \
      "Yama ptrace_scope, no CAP_SYS_PTRACE), such windows reach the node's other "           \
      "processes through UCX and their progress threads (stat fallback_no_cma); "            \
      "MPI_Win_allocate windows stay in shared memory. 0 = behave as if refused.")           \
    X(host_finalize_flush, int, "ONESIDED_HOST_FINALIZE_FLUSH", NULL, "0",                    \
      "1 = let the host MPI close its own UCX endpoints in flush mode inside MPI_Finalize, "   \
      "as it would without onesided; over TCP that can hang the job forever (a close that "    \
      "waits for a peer that has already left). 0 = its ucp_worker_destroy releases them.")   \
    X(node_size, int, "ONESIDED_NODE_SIZE", NULL, "0",                                         \
      "Split each host into virtual nodes of this many consecutive MPI_COMM_WORLD ranks; "    \
      "processes of different virtual nodes then use only the inter-node path (UCX), never "  \
      "shared memory. 0 = real nodes. MPI_Win_allocate_shared windows keep real nodes.")      \
    X(progress, int, "ONESIDED_PROGRESS", "onesided_progress", "1",                          \
      "1 = a progress thread serves other nodes' requests (lock manager, accumulates) while "  \
      "the application computes; 0 = they are served only while the target is inside one "   \
      "of onesided's own calls (a target blocked in, say, MPI_Barrier serves nothing), so "   \
      "only for windows whose targets keep making RMA calls. Started by the first window "    \
      "spanning nodes that asks for it (info no_locks=true also declines).")                  \
    X(node_requests, int, "ONESIDED_NODE_REQUESTS", NULL, "1",                                \
      "1 = a small operation (up to 192 bytes in and out) on a node-mate's memory that only "  \
      "CMA reaches (MPI_Win_create over a malloc smaller than a page) goes to that process "  \
      "as a request while it polls (waits inside the host MPI or in onesided), as a native "  \
      "target would serve it; while it computes, CMA (stats node_requests, "                   \
      "node_requests_served, fallback_node_request_cma). Nodes of up to 64 processes. "        \
      "0 = always CMA.")                                                                       \
    X(fence_mapped, int, "ONESIDED_FENCE_MAPPED", NULL, "1",                                   \
      "1 = a synchronizing MPI_Win_fence of a window spanning nodes whose every process maps "  \
      "window rank 0's network lock word (virtual nodes of one host) meets on counters there, " \
      "by CPU atomics (stat fence_mapped); agreed by the window's first such fence. 0 = always " \
      "the host MPI's allreduce.")                                                              \
    X(host_progress, int, "ONESIDED_HOST_PROGRESS", NULL, "1",                                \
      "1 = while this process waits inside the host MPI (MPI_Barrier, MPI_Recv, ...), the "   \
      "host's poll loop also progresses onesided's worker (through ucp_worker_progress, and " \
      "opal_progress on Open MPI), so other nodes' requests are served at once, as native "   \
      "MPI serves its own; 0 = only the progress thread and onesided's calls serve them.")    \
    X(lock, int, "ONESIDED_LOCK", "onesided_lock", "hybrid",                                  \
      "Passive-target lock design for windows spanning nodes (paper 000): hybrid = CPU "      \
      "atomics inside the node, network atomics between nodes, the lock migrating between "   \
      "them through the lock manager; network = every locker uses network atomics on the "    \
      "target's lock word; manager = every locker asks the target's lock manager (two-sided). " \
      "Windows within one node always use the CPU lock. Agreed at window creation (the "     \
      "highest-numbered design any process asks for wins: hybrid 0, manager 1, network 2).")  \
    X(lock_policy, int, "ONESIDED_LOCK_POLICY", "onesided_lock_policy", "history",            \
      "When a hybrid lock migrates: paper = on every request from the other side (paper "    \
      "000); history = after onesided_lock_streak requests in a row from the other side "     \
      "(does not ping-pong under mixed traffic), or, where UCX maps every process's lock "    \
      "word (virtual nodes of one host), on the first remote request and never back for the " \
      "node's lockers; random = by coin flip (for tests).")                                  \
    X(lock_streak, int, "ONESIDED_LOCK_STREAK", "onesided_lock_streak", "4",                  \
      "The history policy's streak: requests from the other side before a lock migrates.")   \
    X(lock_piggyback, int, "ONESIDED_LOCK_PIGGYBACK", "onesided_lock_piggyback", "4096",      \
      "Manager design, target on another node (paper 003): MPI_Win_lock sends nothing; an "   \
      "epoch whose one operation carries at most this many bytes sends it with the lock "     \
      "request at unlock (one round trip, the reply brings the result), and an epoch with no " \
      "operation sends nothing. A second operation, a flush, MPI_Win_sync or an R* call asks " \
      "for the lock first. 0 = every MPI_Win_lock asks for the lock at once.")                \
    X(remote_request_max, int, "ONESIDED_REMOTE_REQUEST_MAX", "onesided_remote_request_max",  \
      "1048576",                                                                               \
      "Target on another node that UCX reaches only over TCP (its worker carries every put "   \
      "and get, which then costs a put and a flush round trip, and streams large puts at a "   \
      "third of what its active messages reach): puts of at most this many bytes, and gets "   \
      "of at most ONESIDED_REMOTE_GET_REQUEST_MAX, go as onesided requests instead, one message each way, and so do "     \
      "accumulates, fetch_and_op and compare_and_swap, whose results come with the reply by "  \
      "the next flush (stat remote_small_requests). A request's data is also buffered once "   \
      "at each end while in flight, hence the bound: larger contiguous puts (up to "          \
      "ONESIDED_REMOTE_PUT_REQUEST_MAX) go in requests of this many bytes, others by UCX. "   \
      "Not on RDMA hardware or shared memory, where UCX needs no help from the target. "      \
      "0 = always UCX (puts, gets, network atomics).")                                         \
    X(remote_put_request_max, int, "ONESIDED_REMOTE_PUT_REQUEST_MAX",                          \
      "onesided_remote_put_request_max", "-1",                                                 \
      "Of those requests, puts of at most this many bytes (and at most "                       \
      "ONESIDED_REMOTE_REQUEST_MAX); larger ones go whole by UCX's put instead of in requests. " \
      "-1 = automatic: 65536 on UCX 1.20 and later, whose own TCP puts stream at native "     \
      "MPI's rate (bursts of 256 KB and 1 MB puts across two hosts: 0.96-1.13x MPICH 5's "      \
      "bandwidth by UCX's put, 0.66-0.75x in requests); no bound of its own before (UCX 1.13 " \
      "streams TCP puts at a third of its active messages' rate). 0 = puts always by UCX. "   \
      "On UCX 1.20 and later a put of 16 KiB or more (not MPI_Rput) goes by UCX's put while "  \
      "a request to its target is unanswered, a burst (stat remote_burst_puts: 32 KB put "     \
      "bursts across two hosts 0.80-0.86x MPICH 5's rate by request, 0.93-1.02x so).")          \
    X(remote_get_request_max, int, "ONESIDED_REMOTE_GET_REQUEST_MAX",                          \
      "onesided_remote_get_request_max", "65536",                                              \
      "Of those requests, gets of at most this many bytes (and at most "                       \
      "ONESIDED_REMOTE_REQUEST_MAX); larger contiguous ones go in requests of this many "      \
      "bytes, others by UCX's get. Replies above it went by UCX's rendezvous, which ran at "   \
      "0.7-1.1x native in every other run; in 64 KB requests gets of 32 KB-1 MB across two "  \
      "hosts ran at 1.6-2.8x. MPI_Rget goes so only up to 8192 bytes (by request it is "       \
      "answered inside the call, giving up its overlap). 0 = every get by UCX.")               \
    X(remote_batch_bytes, int, "ONESIDED_REMOTE_BATCH_BYTES", "onesided_remote_batch_bytes",   \
      "16384",                                                                                 \
      "Those requests that the next synchronization completes (puts, gets, accumulate-kind "  \
      "calls; not R* calls or dynamic windows) wait at the origin and leave together, one "   \
      "message for up to this many bytes of requests and of their replies: at the next "      \
      "other request to the target, flush, unlock, fence, MPI_Win_complete or MPI_Win_sync "  \
      "(stats requests_aggregated, route_batches). Over TCP a message is a system call at "   \
      "each end: bursts of 8-byte puts and gets across two hosts went from 0.85-0.94x "       \
      "the MPICHs' rate to 9-15x, and fetch_and_op and compare_and_swap then go as requests " \
      "under lock_all and fence too (0.43-0.49x to 12-16x). 0 = each request leaves at once.") \
    X(route, int, "ONESIDED_ROUTE", "onesided_route", "direct",                               \
      "How requests between nodes (what the target's CPU must do: accumulates without a "     \
      "network atomic, non-contiguous or dynamic-window transfers, lock-manager requests, "   \
      "PSCW) travel (paper 004): direct = origin to target; server = through the "           \
      "communication server of each node (its first process's progress thread), so that "     \
      "request connections grow with the nodes, not the processes; cooperative = servers "    \
      "form groups of ONESIDED_GROUP_SIZE nodes and forward for each other, so that each "     \
      "keeps connections to its group and its share of the other nodes. RDMA put/get and "    \
      "network atomics always go direct. The environment variable starts the servers (every " \
      "process must set the same); the info key then picks a route per window (fixed at "    \
      "creation; a route other than direct when the job runs none falls back to direct, "    \
      "stat fallback_route_direct).")                                                          \
    X(group_size, int, "ONESIDED_GROUP_SIZE", NULL, "4",                                       \
      "Cooperative route: nodes per multinode group (consecutive nodes; the last group may "  \
      "be smaller). The same in every process.")                                              \
    X(agg_window_us, int, "ONESIDED_AGG_WINDOW_US", "onesided_agg_window_us", "0",            \
      "Server and cooperative routes: a forwarding server holds a request up to this many "   \
      "microseconds for more bound to the same next server, which then travel as one "        \
      "message (and their replies likewise); the window closes early when the batch reaches " \
      "ONESIDED_AGG_BYTES. 0 = every request travels on its own.")                            \
    X(agg_bytes, int, "ONESIDED_AGG_BYTES", NULL, "8192",                                      \
      "A held batch of forwarded requests leaves once it holds this many bytes.")             \
    X(agg_idle_close, int, "ONESIDED_AGG_IDLE_CLOSE", NULL, "1",                               \
      "1 = the aggregation window is event-driven: a held batch leaves as soon as its server " \
      "finds no more events to handle, so a lone request is never held and a burst travels " \
      "together; 0 = a batch stays for its whole window (the paper's held request).")        \
    X(agg_timer, int, "ONESIDED_AGG_TIMER", NULL, "1",                                         \
      "1 = a forwarding server wakes when a held batch's window ends; 0 = it does not, and "  \
      "held batches leave at its periodic wake-up (every millisecond) or with other traffic " \
      "(for the test of that stalemate breaker).")                                            \
    X(la_pdgemm, int, "ONESIDED_LA_PDGEMM", NULL, "0",                                        \
      "libonesided_la only: 1 = a program's own pdgemm_ calls are answered by onesided_pdgemm " \
      "(the library preloaded, or linked before ScaLAPACK); 0 = they go to ScaLAPACK.")       \
    X(la_panel, int, "ONESIDED_LA_PANEL", NULL, "256",                                        \
      "libonesided_la: columns of op(A) (rows of op(B)) that onesided_pdgemm multiplies in "  \
      "one dgemm call, at least (whole blocks are added until it is reached); wider panels "  \
      "run dgemm faster and cost more buffer memory (2 x (local rows + local columns of C) " \
      "x panel doubles).")                                                                    \
    X(help, int, "ONESIDED_HELP", NULL, "0",                                                  \
      "Print this table of tunables on rank 0 at MPI_Init.")

/* Named values some tunables accept besides integers. */
enum { OS_LOCK_HYBRID = 0, OS_LOCK_MANAGER = 1, OS_LOCK_NETWORK = 2 };

typedef struct {
#define OS_CONFIG_FIELD(field, type, env, info, def, help) type field;
    OS_CONFIG_TABLE(OS_CONFIG_FIELD)
#undef OS_CONFIG_FIELD
} os_config_t;

extern os_config_t os_config;       /* process-wide values: defaults and environment */
void os_config_load(void);          /* read the environment once, at MPI_Init */
void os_config_print(FILE *out);    /* the table with defaults, current values and help */
/* Look a window-level tunable up by its info key: sets *cfg's field from value.
 * Returns OS_ERR_INFO for a malformed value, OS_OK otherwise (unknown keys are ignored). */
os_status_t os_config_apply_info(os_config_t *cfg, const char *key, const char *value);
/* Iterate the info keys the table knows, for MPI_Win_get_info. */
typedef void (*os_config_info_fn)(const char *key, const char *value, void *ctx);
void os_config_each_info(const os_config_t *cfg, os_config_info_fn fn, void *ctx);

/* ------------------------------------------------------------- threads */

/* True when the program runs under MPI_THREAD_MULTIPLE: only then do the
 * window and registry locks cost anything (one predictable branch else). */
extern bool os_threaded;
/* True in the thread that started onesided (MPI_Init, or the first window
 * of a program of sessions): the thread that calls MPI unless the program
 * asked for MPI_THREAD_MULTIPLE (or SERIALIZED and uses another). */
extern _Thread_local bool os_main_thread;
/* The window mutex this thread's MPI call holds (NULL when none), and the
 * one it gives up while it yields in a wait (os_backoff_yield). Only waits
 * that another thread of the process may have to end (a lock held by this
 * process, a post or complete of its own exposure epoch) give it up, and
 * only where the window's state is consistent: os_wait_release_begin/end
 * around them. Waits in the middle of an operation (replies, flushes,
 * accumulate batches) keep it, so nobody sees their half-done state. */
extern _Thread_local pthread_mutex_t *os_call_mutex;
extern _Thread_local pthread_mutex_t *os_wait_mutex;
static inline pthread_mutex_t *os_wait_release_begin(void)
{
    pthread_mutex_t *prev = os_wait_mutex;
    os_wait_mutex = os_call_mutex;
    return prev;
}
static inline void os_wait_release_end(pthread_mutex_t *prev)
{
    os_wait_mutex = prev;
}

/* ------------------------------------------------------ waiting, back-off */

/* Seconds on the monotonic clock (clock.c). */
double os_now(void);

/* Ticks: a cheap clock for stamps taken on every poll, comparable between
 * the processes of one host; os_ticks_per_us of them to the microsecond.
 * TSC cycles where the kernel keeps time by the TSC, else nanoseconds.
 * os_clock_init (once, at MPI_Init, before any stamp) chooses. */
extern bool os_clock_tsc;
extern uint64_t os_ticks_per_us;
void os_clock_init(void);
uint64_t os_ticks_slow(void);
static inline uint64_t os_ticks(void)
{
#if defined(__x86_64__)
    if (os_clock_tsc)
        return __builtin_ia32_rdtsc();
#endif
    return os_ticks_slow();
}
static inline uint64_t os_us_to_ticks(uint64_t us)
{
    return us * os_ticks_per_us;
}

/* Spin briefly, then yield. Tests run with more processes than cores; a
 * waiter that never yields would keep the process it waits for off the CPU. */
extern int os_spin_limit;
/* This node runs more processes than it has cores (set at MPI_Init). */
extern bool os_oversubscribed;
/* Run on every back-off step when set (the RMA engine's os_rma_wait_poll):
 * a process waiting for a counter also serves node-mates' requests and, between
 * nodes, progresses the network, which may carry requests to itself. */
extern void (*os_backoff_hook)(void);
typedef struct {
    unsigned polls;
    bool reported; /* the watchdog spoke for this wait */
    double since;  /* when it began to yield (watchdog only) */
} os_backoff_t;
#define OS_BACKOFF_INIT { 0, false, 0 }
void os_backoff_yield(os_backoff_t *b);

/* The hang watchdog (ONESIDED_WATCHDOG=seconds): a wait that has yielded
 * for longer than that prints, once, what it waits for, then goes on
 * waiting. A blocking call names its wait with a site, on a stack per
 * thread (inner waits may name themselves more precisely); describe()
 * writes the details (ticket numbers, counters, the holder) when asked. */
typedef struct os_wait_site {
    const char *call;   /* e.g. "MPI_Win_lock" */
    int target;         /* the rank waited on, or -1 */
    const void *obj;    /* what describe() reads (a window) */
    void (*describe)(const struct os_wait_site *s, char *buf, size_t len);
    const void *arg;    /* and anything else it needs */
    const struct os_wait_site *prev;
} os_wait_site_t;
extern _Thread_local const os_wait_site_t *os_wait_top;
static inline void os_wait_push(os_wait_site_t *s)
{
    s->prev = os_wait_top;
    os_wait_top = s;
}
static inline void os_wait_pop(const os_wait_site_t *s)
{
    os_wait_top = s->prev;
}
static inline void os_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}
static inline void os_backoff_wait(os_backoff_t *b)
{
    if (os_backoff_hook)
        os_backoff_hook();
    if (b->polls < (unsigned)os_spin_limit) {
        b->polls++;
        os_cpu_relax();
    } else {
        os_backoff_yield(b);
    }
}

/* Until *v reaches target, backing off (spin, then yield). */
static inline void os_wait_until_geq(_Atomic uint64_t *v, uint64_t target)
{
    os_backoff_t b = OS_BACKOFF_INIT;
    while (atomic_load_explicit(v, memory_order_acquire) < target)
        os_backoff_wait(&b);
}

/* --------------------------------------------------------------- hash map */

/* Open-addressing map from a non-zero integer key (an MPI handle) to a pointer. */
typedef struct {
    uintptr_t *keys;
    void **vals;
    size_t cap, used, tombs;
} os_hmap_t;
void *os_hmap_get(const os_hmap_t *m, uintptr_t key);
os_status_t os_hmap_put(os_hmap_t *m, uintptr_t key, void *val);
void *os_hmap_del(os_hmap_t *m, uintptr_t key);
void os_hmap_destroy(os_hmap_t *m);

/* ------------------------------------------------------------ membarrier */

/* Registers this process for membarrier's global expedited command (at
 * MPI_Init, membarrier.c): from then on every os_membarrier, by any
 * process, runs a memory barrier on this process's running threads. False
 * (with a warning if `warn`) where the kernel lacks the command or a
 * filter refuses it. */
bool os_membarrier_register(bool warn);
bool os_membarrier_registered(void);
/* A memory barrier on every running thread of every registered process:
 * the slow side of an asymmetric Dekker handshake, whose fast side then
 * needs only a compiler barrier between its store and its load. 11-14 us
 * on this 2-vCPU machine while another registered process runs (an IPI),
 * 0.12 us otherwise. False if the call fails. */
bool os_membarrier(void);

/* ------------------------------------------------------------ zeroing */

/* Zero [addr, addr + len) as a new mapping of it would read, writing only
 * the pages present in memory (mincore): a page nobody touched stays
 * untouched, instead of being faulted in to be cleared (3 us a page in the
 * first round of MPI_Win_free here, and a whole kept window's memory for a
 * program that used a corner of it). Where an absent page may hold data
 * (swap exists) or mincore is refused, every byte is written, as
 * os_zero_whole_count counts (zero.c). True when every page was present
 * (and is now zero): a later zeroing of the same pages needs no check. */
bool os_zero_touched(void *addr, size_t len);
/* How often os_zero_touched wrote every byte, the absent pages included. */
unsigned long os_zero_whole_count(void);

/* ------------------------------------------------------------ copying */

/* memcpy for the data RMA moves between the program's buffers and window
 * memory. glibc 2.36 (Debian 12) copies 2113 bytes up to the L2 size with
 * `rep movsb` on CPUs with FSRM, and AMD Zen runs that at 2 GB/s instead of
 * 25-45 when the destination's offset in its page is 1 to 63 bytes past the
 * source's (glibc bug 30994, fixed in 2.39 by not taking `rep movsb` on
 * Zen), and 1.1-1.4 times slower when it is 1 to 63 bytes before. A buffer
 * from malloc (a page plus 16 bytes) read from page-aligned window memory
 * is the first case, written to it the second: a 64 KB copy took 22 and
 * 1.41 us instead of 1.30. Such copies go with AVX2 in the direction that
 * avoids 4 KB aliasing (1.28 and 1.29 us; on Intel only the first case,
 * up to the size where that beats glibc's own loop), or in 2 KB pieces
 * glibc copies with vector loops (3.9 us) where the CPU has no AVX2
 * (copy.c says why). */
void os_copy_short_distance(void *dst, const void *src, size_t n);
OS_HOT void os_copy(void *dst, const void *src, size_t n)
{
#if defined(__x86_64__)
    /* x is 64..126 for a distance of 1..63 bytes within a page, 0..62 for
     * one of -63..-1, and 63 for none. */
    const uintptr_t x = ((uintptr_t)dst - (uintptr_t)src + 63) & 4095;
    if (n > 2048 && x < 127 && x != 63) {
        os_copy_short_distance(dst, src, n);
        return;
    }
#endif
    memcpy(dst, src, n);
}

#define OS_ALIGN_UP(x, a) ((((x) + (a) - 1) / (a)) * (a))
/* The n lowest bits set (all 64 from n = 64): a slab's bitmap of n free
 * slots (rma/shell.c's control areas, rma/shell_data.c's pieces). */
static inline uint64_t os_low_bits(int n)
{
    return n >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << n) - 1;
}
#define OS_CACHELINE 64

#endif
