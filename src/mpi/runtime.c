/* Process-wide state: initialization, the window registry, statistics. */
#include "os_mpi.h"

#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <unistd.h>

static bool initialized;
static os_hmap_t windows;
/* Under MPI_THREAD_MULTIPLE the registry changes under a write lock; each
 * change moves the generation on, which retires every thread's cached
 * lookup (os_mpi_win). */
static pthread_rwlock_t windows_lock = PTHREAD_RWLOCK_INITIALIZER;
_Atomic uint64_t os_windows_gen = 1;
_Thread_local os_win_cache_t os_win_cache;

static uintptr_t key_of(MPI_Win h)
{
    return (uintptr_t)h ^ (uintptr_t)0x5a5a0000u;
}

/* The end of onesided's part of the job (collective over os_world): pending
 * statistics, cached shells, the network. After MPI_Init it runs when
 * MPI_Finalize frees MPI_COMM_SELF's attributes (MPI guarantees this happens
 * first thing in MPI_Finalize); in a program of sessions only, when the
 * program finalizes its last session (MPI_Session_finalize below). */
static void finalize(void)
{
    os_mpi_host_finalize_begin();
    os_mpi_stats_report();
    os_shell_finalize();
    if (os_ucx_active()) {
        /* Close the network together: nothing of ours may be in flight when
         * endpoints close, and a close completes only when the peer answers,
         * so every process keeps progressing until all have finished. */
        MPI_Request req;
        int flag = 0;
        bool mine_done = false, entered = false;
        os_net_drain();
        os_ucx_quiesce();
        os_net_finalize();
        PMPI_Barrier(os_world);
        os_ucx_close_start();
        while (!flag) {
            if (!mine_done)
                mine_done = os_ucx_progress_closing();
            else
                (void)os_ucx_progress_closing();
            if (mine_done && !entered) {
                PMPI_Ibarrier(os_world, &req);
                entered = true;
            }
            if (entered)
                PMPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        }
        os_mpi_host_progress_stop();
        os_ucx_finalize();
    }
    /* On one node too: the opal_progress callback serves node requests. */
    os_mpi_host_progress_stop();
    os_nreq_node_finalize();
}

static int at_finalize(MPI_Comm comm, int keyval, void *val, void *extra)
{
    (void)comm;
    (void)keyval;
    (void)val;
    (void)extra;
    finalize();
    return MPI_SUCCESS;
}

/* Whether the real node's processes may reach each other's memory (CMA,
 * /proc/<pid>/fd), agreed by every process: a window's choice of path must
 * be the same everywhere, and a window may span nodes. Returns whether the
 * network must start for windows over private memory: CMA refused where a
 * node holds several processes. */
static bool probe_node_access(int rank)
{
    MPI_Comm host;
    int hsize = 1;
    os_shm_access_t a = { .cma = false, .peer_fd = false };
    PMPI_Comm_split_type(os_world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host);
    PMPI_Comm_size(host, &hsize);
    PMPI_Allreduce(&rank, &os_host_first, 1, MPI_INT, MPI_MIN, host);
    if (os_config.cma)
        a = os_shm_probe(host);
    PMPI_Comm_free(&host);
    int v[3] = { a.cma, a.peer_fd, hsize > 1 }, agreed[3];
    PMPI_Allreduce(v, agreed, 2, MPI_INT, MPI_LAND, os_world);
    PMPI_Allreduce(v + 2, agreed + 2, 1, MPI_INT, MPI_LOR, os_world);
    const int why = !a.cma ? a.cma_errno : a.peer_fd_errno;
    a.cma = agreed[0];
    a.peer_fd = agreed[1];
    os_shm_access_set(a);
    if (rank == 0 && (!a.cma || !a.peer_fd))
        OS_WARN("%s%s%s refused (%s): %s",
                !a.cma ? "cross-memory attach" : "", !a.cma && !a.peer_fd ? " and " : "",
                !a.peer_fd ? "opening another process's /proc/<pid>/fd" : "",
                !os_config.cma ? "ONESIDED_CMA=0" : why ? strerror(why) : "on another node",
                !a.cma ? "windows over memory the program allocated itself reach the node's "
                         "other processes through UCX and their progress threads (stat "
                         "fallback_no_cma)"
                       : "windows over MPI_Alloc_mem memory reach the node's other processes "
                         "by CMA instead of mapping it (stat fallback_cma)");
    return !a.cma && agreed[2];
}

/* The network transport, when the job spans several (real or
 * virtual) nodes, or windows over private memory need it within a node
 * (CMA refused): one UCX worker per process, addresses exchanged here. A
 * failure is logged; windows that need it then report it when created. */
static void start_network(bool needed)
{
    int wsize, nsize, spans = 0;
    MPI_Comm node = os_node_comm(os_world, os_config.node_size);
    PMPI_Comm_size(os_world, &wsize);
    PMPI_Comm_size(node, &nsize);
    PMPI_Comm_free(&node);
    spans = nsize < wsize || needed;
    PMPI_Allreduce(MPI_IN_PLACE, &spans, 1, MPI_INT, MPI_LOR, os_world);
    if (!spans)
        return;
    /* Every process on this host (a job of virtual nodes, or one that needs
     * the network only because CMA is refused): no peer needs a network
     * transport. */
    MPI_Comm host;
    int hsize = 0, one_host;
    PMPI_Comm_split_type(os_world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host);
    PMPI_Comm_size(host, &hsize);
    PMPI_Comm_free(&host);
    one_host = hsize == wsize;
    PMPI_Allreduce(MPI_IN_PLACE, &one_host, 1, MPI_INT, MPI_LAND, os_world);
    void *addr = NULL;
    size_t len = 0;
    int ok = os_ucx_init(one_host, &addr, &len) == OS_OK, all_ok;
    PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, os_world);
    if (!all_ok) {
        os_log(1, "the UCX transport did not start everywhere: windows spanning nodes will "
                  "be refused");
        if (ok)
            os_ucx_finalize();
        free(addr);
        return;
    }
    int mylen = (int)len, *lens = malloc(sizeof(int) * (size_t)wsize);
    int *displs = malloc(sizeof(int) * (size_t)wsize);
    size_t *off = malloc(sizeof(size_t) * (size_t)wsize), *sz = malloc(sizeof(size_t) * (size_t)wsize);
    PMPI_Allgather(&mylen, 1, MPI_INT, lens, 1, MPI_INT, os_world);
    int total = 0;
    for (int r = 0; r < wsize; r++) {
        displs[r] = total;
        off[r] = (size_t)total;
        sz[r] = (size_t)lens[r];
        total += lens[r];
    }
    char *all = malloc((size_t)total);
    PMPI_Allgatherv(addr, mylen, MPI_BYTE, all, lens, displs, MPI_BYTE, os_world);
    /* Each process's node server (its node's first process), for routes. */
    int *server_of = malloc(sizeof(int) * (size_t)wsize), me, first;
    MPI_Comm nodes = os_node_comm(os_world, os_config.node_size);
    PMPI_Comm_rank(os_world, &me);
    first = me;
    PMPI_Bcast(&first, 1, MPI_INT, 0, nodes);
    PMPI_Comm_free(&nodes);
    PMPI_Allgather(&first, 1, MPI_INT, server_of, 1, MPI_INT, os_world);
    if (os_ucx_set_peers(wsize, all, off, sz) || os_net_init(wsize, me, server_of))
        os_log(1, "the UCX transport could not be set up");
    free(server_of);
    free(all);
    free(lens);
    free(displs);
    free(off);
    free(sz);
    free(addr);
}

/* More ranks on this node than cores. */
static bool node_oversubscribed(void)
{
    MPI_Comm node;
    int local = 1;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    PMPI_Comm_split_type(os_world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    PMPI_Comm_size(node, &local);
    PMPI_Comm_free(&node);
    return cores > 0 && local > cores;
}

/* Open MPI 5.0's osc/ucx prints "OSC UCX component priority set inside
 * component query failed" for every window where the UCX PML is not in use,
 * natively too, and onesided's window handles would print it for each of
 * the program's windows. The host's windows here carry names, attributes,
 * info and error handlers, never data, and the handle falls back to
 * osc/rdma or osc/sm where osc/ucx declines anyway (shell.c): osc/ucx is
 * left out, before the host reads its parameters, unless the user chose
 * the components (OMPI_MCA_osc). The main job's native side runs in the
 * same processes: where osc/ucx would take its windows (the UCX PML in use,
 * across nodes with RDMA hardware), name the components for a fair
 * comparison (OMPI_MCA_osc=ucx,sm,rdma). */
static void quiet_host_osc(void)
{
#if defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5
    setenv("OMPI_MCA_osc", "^ucx", 0);
#endif
}

/* What must happen before the host MPI starts (its threads, its choice of
 * components): called first by MPI_Init, MPI_Init_thread and
 * MPI_Session_init. The environment is read once, at the first of them
 * (threads may make sessions at once, and a later one must not rewrite
 * the table under live windows). */
static bool config_loaded;
static void load_config_once(void)
{
    os_config_load();
    config_loaded = true;
    if (os_config.alloc_mem_shared || os_config.create_share)
        os_shm_region_reserve_fds(os_config.alloc_mem_max_regions);
}

static void before_host_init(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    quiet_host_osc();
    pthread_once(&once, load_config_once);
}

/* MPI-4 sessions (MPICH 4 and 5, Open MPI 5; not Open MPI 4.1). A program may never call MPI_Init: it makes communicators from
 * process sets of sessions of its own, and MPI_COMM_WORLD and MPI_COMM_SELF
 * do not exist. onesided then takes a session of its own at the program's
 * first window and makes its os_world and os_self from it: os_world from
 * the mpi://WORLD process set where the window's communicator spans it,
 * otherwise from that communicator's group (a later window with a process
 * outside it is refused). Either way the call is collective over exactly
 * the window's processes, which are all in the window's creation. */
#if OS_HAVE_SESSIONS
static MPI_Session own_session = MPI_SESSION_NULL;
static _Atomic int program_sessions; /* the program's sessions now open */

static int sessions_start(MPI_Comm comm)
{
    MPI_Group world = MPI_GROUP_NULL, self = MPI_GROUP_NULL, mine = MPI_GROUP_NULL;
    int rc, wsize = 0, csize = 0;
    if ((rc = PMPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &own_session)))
        goto out;
    if ((rc = PMPI_Group_from_session_pset(own_session, "mpi://WORLD", &world)) ||
        (rc = PMPI_Group_from_session_pset(own_session, "mpi://SELF", &self)))
        goto out;
    PMPI_Group_size(world, &wsize);
    PMPI_Comm_size(comm, &csize);
    if (csize != wsize && (rc = PMPI_Comm_group(comm, &mine)))
        goto out;
    /* Errors without an object are fatal by default, as on MPI_COMM_WORLD. */
    if ((rc = PMPI_Comm_create_from_group(csize == wsize ? world : mine, "org.onesided.world",
                                          MPI_INFO_NULL, MPI_ERRORS_ARE_FATAL, &os_world)) ||
        (rc = PMPI_Comm_create_from_group(self, "org.onesided.self", MPI_INFO_NULL,
                                          MPI_ERRORS_RETURN, &os_self)))
        goto out;
out:
    if (world != MPI_GROUP_NULL)
        PMPI_Group_free(&world);
    if (self != MPI_GROUP_NULL)
        PMPI_Group_free(&self);
    if (mine != MPI_GROUP_NULL)
        PMPI_Group_free(&mine);
    if (rc)
        os_log(1, "MPI-4 sessions: onesided could not make its communicators (MPI error %d)",
               rc);
    return rc;
}

/* The thread level a session provides, from its info ("thread_level", as
 * MPICH 4.0 and 5.0 and Open MPI 5.0 report it): MPI_THREAD_MULTIPLE there
 * is what MPI_Init_thread's would be to the engine (os_threaded). A session
 * asking for it after windows exist is not seen: os_threaded must not
 * change under live windows (shells decide by it alike in every process). */
static bool session_multiple(MPI_Session session)
{
    MPI_Info got = MPI_INFO_NULL;
    char level[32] = "";
    int len = (int)sizeof level, flag = 0;
    if (PMPI_Session_get_info(session, &got) != MPI_SUCCESS || got == MPI_INFO_NULL)
        return false;
    PMPI_Info_get_string(got, "thread_level", &len, level, &flag);
    PMPI_Info_free(&got);
    return flag && !strcmp(level, "MPI_THREAD_MULTIPLE");
}

int MPI_Session_init(MPI_Info info, MPI_Errhandler errhandler, MPI_Session *session)
{
    before_host_init();
    int rc = PMPI_Session_init(info, errhandler, session);
    if (rc == MPI_SUCCESS) {
        atomic_fetch_add(&program_sessions, 1);
        if (!os_threaded && session_multiple(*session)) {
            if (!initialized)
                os_threaded = true;
            else
                OS_WARN("a session asked for MPI_THREAD_MULTIPLE after onesided started; "
                        "its windows stay single-threaded (make the threaded session first)");
        }
    }
    return rc;
}

/* The program's last session ends: onesided's part ends with it, while the
 * processes can still talk (finalize's barriers are over os_world). */
int MPI_Session_finalize(MPI_Session *session)
{
    if (atomic_fetch_sub(&program_sessions, 1) == 1 && own_session != MPI_SESSION_NULL) {
        finalize();
        PMPI_Comm_free(&os_world);
        PMPI_Comm_free(&os_self);
        PMPI_Session_finalize(&own_session);
        initialized = false;
    }
    return PMPI_Session_finalize(session);
}
#endif

void os_mpi_init(MPI_Comm comm)
{
    int flag = 0, rank = 0, keyval;
    if (initialized)
        return;
    os_main_thread = true;
    PMPI_Initialized(&flag);
    if (flag) {
        os_world = MPI_COMM_WORLD;
        os_self = MPI_COMM_SELF;
    } else {
#if OS_HAVE_SESSIONS
        /* Sessions only: started by the first window's collective creation
         * (MPI_Alloc_mem, a local call, can not). */
        if (comm == MPI_COMM_NULL || sessions_start(comm))
            return;
#else
        return;
#endif
    }
    initialized = true;
    if (!config_loaded)
        os_config_load(); /* MPI_Init was the host's own (not through onesided) */
    PMPI_Comm_rank(os_world, &rank);
    os_log_set_rank(rank);
    os_clock_init(); /* before any stamp */
    /* Oversubscribed nodes want waiters to yield at once; otherwise
     * spinning a little is cheaper than a system call. */
    os_oversubscribed = node_oversubscribed();
    os_spin_limit = os_config.spin_count >= 0 ? os_config.spin_count
                                              : os_oversubscribed ? 16 : 2000;
    os_cma_enable();
    /* Always: a window may ask for it by its info key. */
    os_membarrier_register(os_config.acc_membarrier);
    os_mpi_dtype_init();
    os_backoff_hook = os_rma_wait_poll;
    start_network(probe_node_access(rank));
    os_status_t st = os_nreq_node_init(os_world, os_config.node_size);
    if (st)
        OS_DEBUG("node requests off: %s", os_error_message());
    os_mpi_host_progress_start();
    if (flag) {
        PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, at_finalize, &keyval, NULL);
        PMPI_Comm_set_attr(MPI_COMM_SELF, keyval, NULL);
    }
    if (os_config.help && rank == 0)
        os_config_print(stdout);
}

int MPI_Init(int *argc, char ***argv)
{
    before_host_init();
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS)
        os_mpi_init(MPI_COMM_NULL);
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    before_host_init();
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS) {
        os_threaded = *provided == MPI_THREAD_MULTIPLE;
        os_mpi_init(MPI_COMM_NULL);
    }
    return rc;
}

os_win_t *os_mpi_win_lookup(MPI_Win handle)
{
    uint64_t gen = atomic_load_explicit(&os_windows_gen, memory_order_acquire);
    if (os_threaded)
        pthread_rwlock_rdlock(&windows_lock);
    os_win_t *w = os_hmap_get(&windows, key_of(handle));
    if (os_threaded)
        pthread_rwlock_unlock(&windows_lock);
    if (w) {
        os_win_cache.handle = handle;
        os_win_cache.win = w;
        os_win_cache.gen = gen;
    }
    return w;
}

static _Thread_local int win_depth;

void os_mpi_win_lock(os_win_t *w)
{
    pthread_mutex_lock(&w->mtx);
    if (win_depth++ == 0)
        os_call_mutex = &w->mtx;
}

void os_mpi_win_unlock(os_win_t *w)
{
    if (--win_depth == 0)
        os_call_mutex = NULL;
    pthread_mutex_unlock(&w->mtx);
}

static void registry_change(void)
{
    atomic_fetch_add_explicit(&os_windows_gen, 1, memory_order_release);
}

os_status_t os_mpi_win_register(os_win_t *w)
{
    if (os_threaded)
        pthread_rwlock_wrlock(&windows_lock);
    os_status_t st = os_hmap_put(&windows, key_of(w->handle), w);
    registry_change();
    if (os_threaded)
        pthread_rwlock_unlock(&windows_lock);
    return st;
}

void os_mpi_win_unregister(os_win_t *w)
{
    if (os_threaded)
        pthread_rwlock_wrlock(&windows_lock);
    os_hmap_del(&windows, key_of(w->handle));
    registry_change();
    if (os_threaded)
        pthread_rwlock_unlock(&windows_lock);
}

/* ------------------------------------------------------------- statistics */

const char *onesided_stat_name(int stat)
{
    static const char *const names[ONESIDED_STAT_COUNT] = {
        "put_ops", "put_bytes", "get_ops", "get_bytes", "acc_ops", "acc_bytes",
        "get_acc_ops", "get_acc_bytes", "fop_ops", "cas_ops", "request_ops", "fences",
        "fence_syncs", "pscw_access_epochs", "pscw_exposure_epochs", "lock_shared_epochs",
        "lock_exclusive_epochs", "lock_all_epochs", "lock_acquired", "lock_contended",
        "flushes", "acc_atomic_elems", "acc_exclusive_elems", "fallback_cma",
        "fallback_acc_mutex", "fallback_fence_deferred", "fallback_packed", "acc_bulk_elems", "acc_coalesced",
        "acc_batches", "remote_rdma", "fallback_am", "lock_manager", "am_served",
        "am_served_by_thread", "am_deferred", "lock_network", "lock_net_retries",
        "lock_to_network", "lock_to_cpu", "acc_direct", "fallback_acc_request",
        "lock_piggybacked", "lock_elided", "fallback_dyn_table_cma",
        "fallback_remote_emulated", "request_deferred", "fast_path_ops", "dtype_decoded",
        "dtype_reused", "fallback_route_direct", "requests_forwarded", "requests_applied_for_node",
        "requests_aggregated",
        "route_batches", "route_messages", "request_peers", "endpoints",
        "request_buffer_bytes", "fallback_no_cma", "lock_release_flushed",
        "create_shared_bytes", "am_served_in_host", "node_requests", "node_requests_served",
        "fallback_node_request_cma", "acc_mapped", "remote_small_requests",
        "lock_release_by_request", "lock_manager_first", "remote_mapped",
        "complete_behind_rdma", "flush_no_barrier", "lock_release_mapped",
        "complete_mapped", "data_keys_reused", "fence_mapped", "acc_host_joined", "post_mapped",
        "handle_hints_set", "acc_fence_switches", "acc_unfenced", "fallback_acc_membarrier",
        "remote_burst_puts",
    };
    return stat >= 0 && stat < ONESIDED_STAT_COUNT ? names[stat] : NULL;
}

int onesided_win_get_stats(MPI_Win win, onesided_win_stats_t *stats)
{
    OS_WIN_ENTER(w, win);
    if (!w)
        return MPI_ERR_WIN;
    os_remote_stats_sync(w);
    *stats = w->stats;
    return MPI_SUCCESS;
}

void onesided_print_config(FILE *out)
{
    os_config_print(out);
}

int onesided_active(void)
{
    return initialized;
}

/* Reports of freed windows, kept on the window's rank 0 until MPI_Finalize. */
static char *report;
static size_t report_len;

static void append(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void append(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n <= 0)
        return;
    if ((size_t)n >= sizeof line)
        n = sizeof line - 1;
    char *r = realloc(report, report_len + (size_t)n + 1);
    if (!r)
        return;
    report = r;
    memcpy(report + report_len, line, (size_t)n + 1);
    report_len += (size_t)n;
}

void os_mpi_stats_collect(os_win_t *w, MPI_Win handle)
{
    if (!os_config.stats)
        return;
    static const char *const flavor[] = { "create", "allocate", "shared", "dynamic" };
    uint64_t sum[ONESIDED_STAT_COUNT];
    char name[MPI_MAX_OBJECT_NAME] = "";
    int len = 0;
    PMPI_Win_get_name(handle, name, &len);
    os_remote_stats_sync(w);
    PMPI_Reduce(w->stats.counter, sum, ONESIDED_STAT_COUNT, MPI_UINT64_T, MPI_SUM, 0, w->comm);
    if (os_config.stats >= 2) {
        /* One line per rank, gathered so that rank 0 prints them in order. */
        uint64_t *all = w->rank == 0 ? malloc(sizeof(uint64_t) * ONESIDED_STAT_COUNT * (size_t)w->nranks) : NULL;
        PMPI_Gather(w->stats.counter, ONESIDED_STAT_COUNT, MPI_UINT64_T, all,
                    ONESIDED_STAT_COUNT, MPI_UINT64_T, 0, w->comm);
        if (w->rank == 0 && all) {
            append("onesided stats: window '%s' (%s, %d processes) per rank:\n", name,
                   flavor[w->flavor], w->nranks);
            for (int r = 0; r < w->nranks; r++) {
                append("  rank %d:", r);
                for (int s = 0; s < ONESIDED_STAT_COUNT; s++)
                    if (all[(size_t)r * ONESIDED_STAT_COUNT + (size_t)s])
                        append(" %s=%llu", onesided_stat_name(s),
                               (unsigned long long)all[(size_t)r * ONESIDED_STAT_COUNT + (size_t)s]);
                append("\n");
            }
        }
        free(all);
    }
    if (w->rank != 0)
        return;
    append("onesided stats: window '%s' (%s, %d processes), summed over ranks:\n", name,
           flavor[w->flavor], w->nranks);
    for (int s = 0; s < ONESIDED_STAT_COUNT; s++)
        if (sum[s] || strncmp(onesided_stat_name(s), "fallback", 8) == 0)
            append("  %-26s %llu\n", onesided_stat_name(s), (unsigned long long)sum[s]);
}

void os_mpi_stats_report(void)
{
    /* Not a window's: counted at MPI_Win_free, after its report was made. */
    const unsigned long whole = os_zero_whole_count();
    if (os_config.stats && whole)
        append("onesided stats: process: %lu freed windows' memory zeroed whole, untouched pages "
               "included (fallback_zero_whole: swap present, or mincore refused)\n", whole);
    if (report) {
        fputs(report, stdout);
        fflush(stdout);
    }
    free(report);
    report = NULL;
    report_len = 0;
}
