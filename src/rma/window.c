/* Windows: creation of every flavor, the node segment layout, dynamic
 * regions, shared queries and freeing. */
#include "os_rma.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096

typedef struct {
    uint64_t base;
    int64_t size;
    int32_t disp_unit;
    int32_t pid;
    int32_t fence_defer;   /* agreed: the fence's choice must be the same everywhere */
    int32_t region_fd;     /* MPI_Win_create over MPI_Alloc_mem memory: its memfd, else -1 */
    uint64_t region_size;  /* bytes of that region */
    uint64_t region_addr;  /* where the region starts in its owner */
    uint64_t region_id;    /* and its unique id (the key of peers' cached mappings) */
    int32_t region_adopted; /* the program's own memory, shareable while the window lives */
    int32_t world;         /* MPI_COMM_WORLD rank */
    int32_t node;          /* world rank of the first process of its (virtual) node */
    int32_t lock, lock_policy, lock_streak; /* agreed: every locker must use one design */
    int32_t acc_direct;    /* agreed: a network atomic is atomic only if no process bulk-stores */
    int32_t acc_fenceless; /* agreed, the lowest: 0 asked off, 1 not registered for membarrier, 2 */
    int32_t hints_stale;   /* agreed: the host handle needs the window's hints (collective) */
    uint64_t nreq_key;     /* MPI_Win_create: its key of the window in node requests */
} peer_info_t;

MPI_Comm os_world = MPI_COMM_NULL, os_self = MPI_COMM_NULL;
int os_host_first;

MPI_Comm os_node_comm(MPI_Comm comm, int virtual_size)
{
    MPI_Comm phys = MPI_COMM_NULL, node = MPI_COMM_NULL;
    int wrank;
    /* MPI_COMM_NULL when the host refuses (out of communicator contexts):
     * every process of comm gets the same answer, the host agreeing on
     * contexts collectively. */
    if (PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &phys) != MPI_SUCCESS)
        return MPI_COMM_NULL;
    if (virtual_size <= 0)
        return phys;
    /* Virtual nodes of K consecutive world ranks: processes of different
     * virtual nodes then use only the inter-node path. */
    PMPI_Comm_rank(os_world, &wrank);
    if (PMPI_Comm_split(phys, wrank / virtual_size, wrank, &node) != MPI_SUCCESS)
        node = MPI_COMM_NULL;
    PMPI_Comm_free(&phys);
    return node;
}

/* MPI_Win_create over memory in a shareable region (MPI_Alloc_mem's, or the
 * program's own made shareable): map every peer's region so that it is
 * reached by load/store instead of CMA. Whether accumulates into
 * a target may use CPU atomics must be the same answer in every process, so
 * it is agreed on: only where every process mapped the target. *cma_needed
 * (agreed) says some process must still reach a node-mate by CMA. */
static os_status_t map_alloc_mem_peers(os_win_t *w, const peer_info_t *all, bool *cma_needed)
{
    int *mapped = malloc(sizeof *mapped * (size_t)w->nranks);
    if (!mapped)
        return OS_ERR(OS_ERR_NOMEM, "window of %d processes", w->nranks);
    for (int r = 0; r < w->nranks; r++) {
        os_peer_t *p = &w->peers[r];
        /* A process of another node never reaches r by CMA: no vote against. */
        mapped[r] = r == w->rank || p->size == 0 || p->access == OS_PEER_REMOTE;
        if (mapped[r] || all[r].region_fd < 0)
            continue;
        const uint64_t wlo = all[r].base, whi = wlo + (uint64_t)all[r].size;
        const uint64_t rlo = all[r].region_addr, rhi = rlo + all[r].region_size;
        const bool whole = rlo <= wlo && whi <= rhi;
        /* An adopted region ends with its window: not worth keeping mapped. */
        char *m = os_shm_region_map_peer(p->pid, all[r].region_fd, all[r].region_size,
                                         all[r].region_id, !all[r].region_adopted);
        if (!m) {
            OS_DEBUG("rank %d: cannot map the shareable region of rank %d, using CMA",
                     w->rank, r);
            continue;
        }
        p->map = m;
        p->map_size = all[r].region_size;
        if (!whole) {
            /* Only the pages inside its heap block: a CMA peer with a zone
             * mapped here (os_peer_mapped), the mutex for accumulates. */
            p->zone = (char *)(uintptr_t)rlo;
            p->zone_len = all[r].region_size;
            p->zone_map = m;
            continue;
        }
        p->base = m + (wlo - rlo);
        p->access = OS_PEER_DIRECT;
        mapped[r] = 1;
    }
    PMPI_Allreduce(MPI_IN_PLACE, mapped, w->nranks, MPI_INT, MPI_LAND, w->comm);
    for (int r = 0; r < w->nranks; r++) {
        w->peers[r].acc_mutex_always = !mapped[r];
        *cma_needed |= !mapped[r];
    }
    free(mapped);
    return OS_OK;
}

/* MPI_Win_create: whether accumulates into each process take the mutex.
 * Only where some process of its node reaches its memory by CMA, which
 * has no atomics. Without MPI_Alloc_mem memory anywhere this follows from
 * what every process knows (the node of each and the sizes); with some, it
 * takes the mapping and a vote. */
static os_status_t create_acc_paths(os_win_t *w, const peer_info_t *all, bool *cma_needed)
{
    bool shareable = false;
    for (int r = 0; r < w->nranks; r++)
        shareable |= all[r].region_fd >= 0;
    if (shareable)
        return map_alloc_mem_peers(w, all, cma_needed);
    os_hmap_t per_node = { 0 };
    os_status_t st = OS_OK;
    for (int r = 0; r < w->nranks && !st; r++) {
        uintptr_t key = (uintptr_t)all[r].node + 1;
        st = os_hmap_put(&per_node, key, (char *)os_hmap_get(&per_node, key) + 1);
    }
    for (int r = 0; r < w->nranks && !st; r++) {
        w->peers[r].acc_mutex_always =
            all[r].size > 0 && (uintptr_t)os_hmap_get(&per_node, (uintptr_t)all[r].node + 1) > 1;
        *cma_needed |= w->peers[r].acc_mutex_always;
    }
    os_hmap_destroy(&per_node);
    return st;
}

/* The nodes of a window. Private memory (MPI_Win_create, dynamic windows)
 * that the node's other processes would reach by CMA, where the kernel
 * refuses it, makes each process a node of its own: the others then reach
 * it as they reach another node's, through UCX and the owner's progress
 * thread (put, get, accumulates, the lock manager), and nothing needs a
 * system call on another process. MPI_Alloc_mem memory that every process
 * can map (/proc/<pid>/fd) keeps the shared node. The choice is agreed: an
 * allreduce over comm, only where CMA is refused. */
static os_nodes_t choose_nodes(os_flavor_t flavor, void *base, MPI_Aint size,
                               const os_config_t *cfg, MPI_Comm comm, os_shm_region_t *reg,
                               bool *have)
{
    const os_shm_access_t a = os_shm_access();
    if (flavor == OS_FLAVOR_SHARED)
        return OS_NODES_REAL;
    if (a.cma || flavor == OS_FLAVOR_ALLOCATE)
        return OS_NODES_CONFIGURED;
    if (flavor == OS_FLAVOR_DYNAMIC)
        return OS_NODES_SELF;
    /* The program's own memory counts if it can be made shareable whole
     * (not made so for virtual nodes of one process: nobody would map it). */
    if (size > 0 && a.peer_fd)
        *have = cfg->create_share && os_config.node_size != 1 ? os_shm_region_adopt(base, (size_t)size,
                                                        os_config.alloc_mem_max_regions, reg)
                                  : os_shm_region_find(base, (size_t)size, reg);
    int mappable = size == 0 || (*have && reg->base <= (char *)base &&
                                 (char *)base + size <= reg->base + reg->size);
    PMPI_Allreduce(MPI_IN_PLACE, &mappable, 1, MPI_INT, MPI_LAND, comm);
    if (!mappable && *have) {
        if (reg->adopted)
            os_shm_region_unadopt(reg->base);
        *have = false;
    }
    return mappable ? OS_NODES_CONFIGURED : OS_NODES_SELF;
}

/* MPI_Win_create: the node's mailbox for requests to memory reached by CMA
 * (node_request.c). Positions in the node follow window ranks, the same in
 * every process of it. */
static os_status_t attach_node_requests(os_win_t *w, const peer_info_t *all, int node)
{
    int *index = malloc((size_t)w->nranks * sizeof *index), n = 0;
    uint64_t *keys = malloc((size_t)w->nranks * sizeof *keys);
    os_status_t st = OS_OK;
    if (!index || !keys) {
        st = OS_ERR(OS_ERR_NOMEM, "node positions of %d ranks", w->nranks);
        goto out;
    }
    for (int r = 0; r < w->nranks; r++) {
        index[r] = all[r].node == node ? n++ : -1;
        keys[r] = all[r].nreq_key;
    }
    os_nreq_attach(w, index, n, keys);
out:
    free(index);
    free(keys);
    return st;
}

static void unmap_peers(os_win_t *w)
{
    for (int r = 0; w->peers && r < w->nranks; r++)
        if (w->peers[r].map)
            os_shm_region_unmap_peer(w->peers[r].map, w->peers[r].map_size);
}

/* The window's arrays of one entry per rank, cleared, in one block that
 * w->peers heads (free_parts frees it). As ten allocations of a few bytes
 * each, their frees (libc now and then consolidating its heap in one) took
 * 12% of MPI_Win_free's time between virtual nodes on MPICH 4.0.2 (perf:
 * 16 of its 136 samples). */
static bool alloc_rank_arrays(os_win_t *w)
{
    const size_t n = (size_t)w->nranks, align = _Alignof(max_align_t);
#define RANK_ARRAYS(X)                                                                     \
    X(peers) X(fence_seen) X(pscw) X(start_ranks) X(post_ranks) X(group_ranks)              \
    X(rank_identity) X(node_ranks) X(node_index) X(tstate)
#define BYTES(field) ((n * sizeof *w->field + align - 1) / align * align)
#define COUNT(field) total += BYTES(field);
#define PLACE(field) w->field = (void *)at, at += BYTES(field);
    size_t total = 0;
    RANK_ARRAYS(COUNT)
    char *at = calloc(1, total);
    if (!at)
        return false;
    RANK_ARRAYS(PLACE)
#undef PLACE
#undef COUNT
#undef BYTES
#undef RANK_ARRAYS
    return true;
}

static void free_parts(os_win_t *w)
{
    unmap_peers(w);
    free(w->peers); /* and the other arrays of its block (alloc_rank_arrays) */
    free(w->queue);
    free(w->attr_keys);
    os_acc_batches_free(w);
    os_dyn_fini(w);
    pthread_mutex_destroy(&w->mtx);
    free(w);
}

/* Automatic: a bulk accumulate's own cost is one locked instruction and a
 * read of two counts per process of the node (of the window, acc_host), while each element it saves
 * is one locked instruction (about 9 ns on a 2022 server core). With few
 * processes the handshake wins from a few elements; it reads more counts,
 * each a cache miss when its owner accumulates meanwhile, as the node
 * grows, and then the threshold grows with it, up to 512 bytes, where
 * plain reductions run ten times the atomic rate whatever the node. */
size_t os_acc_bulk_bytes(const os_win_t *w, int acc_bulk_min)
{
    enum { AUTO_PER_PROCESS = 16, AUTO_MIN = 32, AUTO_MAX = 512 };
    if (acc_bulk_min >= 0)
        return (size_t)acc_bulk_min;
    size_t b = (size_t)(w->acc_host ? w->nranks : w->nnode_ranks) * AUTO_PER_PROCESS;
    return b < AUTO_MIN ? AUTO_MIN : b > AUTO_MAX ? AUTO_MAX : b;
}

static os_status_t win_create(os_flavor_t flavor, void *base, MPI_Aint size, int disp_unit,
                              const os_config_t *cfg, bool noncontig, MPI_Info hints,
                              MPI_Comm comm, const os_shm_region_t *region, os_nodes_t nodes,
                              os_win_t **out)
{
    os_status_t st = OS_OK;
    bool cma_needed = false;
    peer_info_t mine, *all = NULL;
    size_t data_bytes = 0, *data_off = NULL;
    os_shell_t *sh = NULL;

    os_win_t *w = calloc(1, sizeof *w);
    if (!w)
        return OS_ERR(OS_ERR_NOMEM, "window object");
    w->handle = MPI_WIN_NULL;
    /* Recursive: an error handler called under it may use the window. */
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&w->mtx, &ma);
    pthread_mutexattr_destroy(&ma);
    w->flavor = flavor;
    w->cfg = *cfg;
    w->noncontig = noncontig;
    w->size = size;
    w->disp_unit = disp_unit;

    /* Processes of this (real or virtual) node share the control area and,
     * for allocated windows, the data; the others are reached over the
     * network. allocate_shared keeps real nodes: MPI requires its memory to
     * be shared. */
    if ((st = os_shell_get(comm, nodes,
                           flavor == OS_FLAVOR_ALLOCATE || flavor == OS_FLAVOR_SHARED, &sh)))
        goto fail;
    w->shell = sh;
    w->comm = sh->comm;
    w->group = sh->group;
    w->handle = sh->handle;
    w->rank = sh->rank;
    w->nranks = sh->nranks;
    w->multinode = sh->multinode;
    w->one_host = sh->one_host;
    w->inline_regions = flavor == OS_FLAVOR_DYNAMIC ? sh->inline_regions : 0;
    /* MPI_Win_create: memory in a shareable region (MPI_Alloc_mem's), or the
     * program's own, made shareable in place where that is safe
     * (onesided_create_share; region.c says which memory) and some process
     * of the node would map it. */
    os_shm_region_t own;
    if (flavor == OS_FLAVOR_CREATE && size > 0 && !region) {
        if (cfg->create_share && sh->node_size > 1
                ? os_shm_region_adopt(base, (size_t)size, os_config.alloc_mem_max_regions, &own)
                : os_shm_region_find(base, (size_t)size, &own))
            region = &own;
    }
    if (region && region->adopted) {
        w->shared_pages = region->base;
        OS_STAT(w, CREATE_SHARED_BYTES, region->size);
    }
    if (w->multinode && flavor == OS_FLAVOR_SHARED) {
        st = OS_ERR(OS_ERR_SHARED, "MPI_Win_allocate_shared over processes of different nodes");
        goto fail;
    }
    if (w->multinode && !os_ucx_active()) {
        st = OS_ERR(OS_ERR_UNSUPPORTED, "a window spanning several nodes needs the UCX "
                                        "transport, which did not start (see the log)");
        goto fail;
    }

    int world_rank;
    PMPI_Comm_rank(os_world, &world_rank);
    const bool shared_flavor = flavor == OS_FLAVOR_ALLOCATE || flavor == OS_FLAVOR_SHARED;
    mine = (peer_info_t){ .base = (uint64_t)(uintptr_t)base, .size = size,
                          .disp_unit = disp_unit, .pid = (int32_t)getpid(),
                          .fence_defer = cfg->fence_defer, .region_fd = -1,
                          .world = world_rank, .node = sh->node_first, .lock = cfg->lock,
                          .lock_policy = cfg->lock_policy, .lock_streak = cfg->lock_streak,
                          .acc_direct = cfg->acc_direct,
                          .acc_fenceless = !cfg->acc_membarrier         ? 0
                                           : os_membarrier_registered() ? 2
                                                                        : 1,
                          .hints_stale = os_shell_hints_stale(sh, hints, shared_flavor),
                          .nreq_key = flavor == OS_FLAVOR_CREATE ? os_nreq_reserve(w) : 0 };
    if (region) {
        mine.region_fd = region->fd;
        mine.region_size = region->size;
        mine.region_addr = (uint64_t)(uintptr_t)region->base;
        mine.region_id = region->id;
        mine.region_adopted = region->adopted;
    }
    all = malloc((size_t)w->nranks * sizeof *all);
    data_off = calloc((size_t)w->nranks, sizeof *data_off);
    if (!all || !data_off || !alloc_rank_arrays(w)) {
        st = OS_ERR(OS_ERR_NOMEM, "window of %d processes", w->nranks);
        goto fail;
    }
    for (int r = 0; r < w->nranks; r++)
        w->rank_identity[r] = r;
    /* Everything the window needs from the others, in one collective. */
    PMPI_Allgather(&mine, sizeof mine, MPI_BYTE, all, sizeof mine, MPI_BYTE, w->comm);
    /* The node's processes, in rank order: before anything sized by the
     * node (the bulk threshold below). */
    for (int r = 0; r < w->nranks; r++) {
        w->node_index[r] = all[r].node == mine.node ? w->nnode_ranks : -1;
        if (all[r].node == mine.node)
            w->node_ranks[w->nnode_ranks++] = r;
    }
    if (w->nnode_ranks != sh->node_size) { /* the shell's node is the window's */
        st = OS_ERR(OS_ERR_OTHER, "internal: %d processes share the node, the control area "
                    "was laid out for %d", w->nnode_ranks, sh->node_size);
        goto fail;
    }

    /* Agreed values: every process must make the same choice. */
    bool hints_stale = false;
    int32_t fenceless = 2;
    for (int r = 0; r < w->nranks; r++) {
        hints_stale |= all[r].hints_stale != 0;
        if (all[r].fence_defer)
            w->cfg.fence_defer = 1;
        if (all[r].lock > w->cfg.lock)
            w->cfg.lock = all[r].lock;
        if (all[r].lock_policy > w->cfg.lock_policy)
            w->cfg.lock_policy = all[r].lock_policy;
        if (all[r].lock_streak > w->cfg.lock_streak)
            w->cfg.lock_streak = all[r].lock_streak;
        if (!all[r].acc_direct)
            w->cfg.acc_direct = 0;
        if (all[r].acc_fenceless < fenceless)
            fenceless = all[r].acc_fenceless;
    }
    /* Only where every process's threads take part in the bulk side's
     * membarrier may the main threads' counts skip the fence (os_rma.h). */
    w->cfg.acc_membarrier = fenceless > 0;
    w->acc_fenceless = fenceless == 2;
    w->acc_unfence_after = OS_ACC_UNFENCE_MIN;
    if (fenceless == 1)
        OS_STAT(w, FALLBACK_ACC_MEMBARRIER, 1);
    /* Direct accumulates change target memory with network atomics, which
     * cannot take part in the bulk accumulate's handshake (ops.c): on a
     * window that has them, every accumulate stays one atomic per element.
     * Dynamic windows have no keys: their accumulates are requests. The
     * target serving those requests may still combine in bulk where it can
     * exclude the network atomics too (net/window.c decides). */
    w->served_bulk_min = os_acc_bulk_bytes(w, w->cfg.acc_bulk_min);
    if (w->multinode && w->cfg.acc_direct && flavor != OS_FLAVOR_DYNAMIC)
        w->acc_bulk_bytes = 0; /* unless every process joins (net/window.c, acc_host) */
    else
        w->cfg.acc_direct = 0;
    if (!w->cfg.acc_direct)
        w->acc_bulk_bytes = os_acc_bulk_bytes(w, w->cfg.acc_bulk_min);
    if (flavor == OS_FLAVOR_DYNAMIC && (st = os_dyn_init(w)))
        goto fail;

    char *ctl = sh->ctl.addr;
    w->ctl = (os_rank_ctl_t *)ctl;
    w->acc_mine = &w->ctl[w->rank].acc_active;
    w->acc_mine_main = &w->ctl[w->rank].acc_active_main;
    w->post = (_Atomic uint64_t *)(ctl + sh->post_off);
    w->post_stride = sh->post_stride;
    w->complete = (_Atomic uint64_t *)(ctl + sh->complete_off);
    w->complete_stride = sh->complete_stride;
    w->regions = (os_region_t *)(ctl + sh->regions_off);

    if (flavor == OS_FLAVOR_ALLOCATE || flavor == OS_FLAVOR_SHARED) {
        /* allocate_shared is contiguous across ranks unless asked otherwise,
         * as MPI specifies; MPI_Win_allocate gets page-aligned pieces. */
        bool pad = flavor == OS_FLAVOR_ALLOCATE || noncontig;
        for (int r = 0; r < w->nranks; r++) {
            if (all[r].node != mine.node)
                continue; /* its memory lives on its own node */
            data_off[r] = data_bytes;
            data_bytes += (size_t)all[r].size;
            if (pad)
                data_bytes = OS_ALIGN_UP(data_bytes, PAGE);
        }
        if ((st = os_shell_data(sh, data_bytes)))
            goto fail;
    }

    for (int r = 0; r < w->nranks; r++) {
        os_peer_t *p = &w->peers[r];
        p->size = (MPI_Aint)all[r].size;
        p->disp_unit = all[r].disp_unit;
        p->pid = (pid_t)all[r].pid;
        p->world = all[r].world;
        if (all[r].node != mine.node) {
            p->access = OS_PEER_REMOTE; /* base and key come with os_remote_win_setup */
            continue;
        }
        switch (flavor) {
        case OS_FLAVOR_ALLOCATE:
        case OS_FLAVOR_SHARED:
            p->base = (char *)sh->data.addr + data_off[r];
            p->access = OS_PEER_DIRECT;
            break;
        case OS_FLAVOR_CREATE:
        case OS_FLAVOR_DYNAMIC:
            /* User memory: mapped only in its owner. */
            p->base = r == w->rank ? (char *)base : (char *)(uintptr_t)all[r].base;
            p->access = r == w->rank ? OS_PEER_DIRECT : OS_PEER_CMA;
            if (flavor == OS_FLAVOR_DYNAMIC) {
                p->acc_mutex_always = w->nranks > 1;
                p->base = NULL; /* displacements are absolute addresses */
            }
            break;
        }
    }
    /* This process's part of the data starts zeroed, as in a new segment:
     * each process of the shell's last window zeroed its part of that one
     * as it took the shell (os_shell_get), before the collectives that made
     * this one. Zeroed here, a part could be cleared after a node-mate
     * that finished creating first had stored into it through
     * MPI_Win_shared_query (once MPI_Win_set_info's barrier no longer ended
     * every creation: os_shell_hints_stale). */
    if (flavor == OS_FLAVOR_CREATE && (st = create_acc_paths(w, all, &cma_needed)))
        goto fail;
    if (cma_needed && !os_shm_access().cma) {
        /* A region the probe said could be mapped could not be (out of
         * descriptors, say): start again, each process a node of its own.
         * Every process learned it from the same vote. */
        os_win_t *retry = NULL;
        free(all);
        free(data_off);
        all = NULL;
        data_off = NULL;
        os_nreq_detach(w);
        os_shell_put(sh);
        free_parts(w);
        st = win_create(flavor, base, size, disp_unit, cfg, noncontig, hints, comm, region,
                        OS_NODES_SELF, &retry);
        *out = retry;
        return st;
    }
    if (nodes == OS_NODES_SELF)
        OS_STAT(w, FALLBACK_NO_CMA, 1);
    if (flavor == OS_FLAVOR_CREATE && (st = attach_node_requests(w, all, mine.node)))
        goto fail;
    if (w->multinode &&
        (st = os_remote_win_setup(w, w->peers[w->rank].base,
                                  flavor == OS_FLAVOR_DYNAMIC ? 0 : (size_t)w->size)))
        goto fail;
    /* Batches for accumulate coalescing only where some target can use them,
     * so that mapped windows pay nothing on their fast path. */
    bool coalesce = w->cfg.acc_coalesce > 0;
    for (int r = 0; r < w->nranks && w->cfg.acc_coalesce < 0; r++)
        coalesce |= w->peers[r].access != OS_PEER_DIRECT;
    if (coalesce && !(w->acc_batch = calloc((size_t)w->nranks, sizeof *w->acc_batch))) {
        st = OS_ERR(OS_ERR_NOMEM, "accumulate batches for %d ranks", w->nranks);
        goto fail;
    }
    /* A process without memory gets NULL, as from MPICH (programs check it). */
    if (flavor == OS_FLAVOR_ALLOCATE || flavor == OS_FLAVOR_SHARED)
        w->base = w->size ? w->peers[w->rank].base : NULL;
    else
        w->base = base;
    /* The host handle keeps the hints, so MPI_Win_get_info reports them as
     * the host does. */
    if (hints_stale) {
        if ((st = os_shell_set_hints(sh, hints, shared_flavor)))
            goto fail;
        OS_STAT(w, HANDLE_HINTS_SET, 1);
    }
    free(all);
    free(data_off);
    *out = w;
    return OS_OK;

fail:
    free(all);
    free(data_off);
    if (w->multinode)
        os_remote_win_teardown(w);
    os_nreq_detach(w);
    if (sh)
        os_shell_put(sh);
    if (w->shared_pages)
        os_shm_region_unadopt(w->shared_pages);
    free_parts(w);
    return st;
}

os_status_t os_win_create(os_flavor_t flavor, void *base, MPI_Aint size, int disp_unit,
                          const os_config_t *cfg, bool noncontig, MPI_Info hints,
                          MPI_Comm comm, os_win_t **out)
{
    /* Where CMA is refused, the program's own memory is made shareable
     * before the nodes are chosen: shareable memory keeps them. */
    os_shm_region_t reg;
    bool have = false;
    const os_nodes_t nodes = choose_nodes(flavor, base, size, cfg, comm, &reg, &have);
    return win_create(flavor, base, size, disp_unit, cfg, noncontig, hints, comm,
                      have ? &reg : NULL, nodes, out);
}

os_status_t os_win_can_free(const os_win_t *w)
{
    if (w->access == OS_ACCESS_PSCW || w->access == OS_ACCESS_LOCK ||
        w->access == OS_ACCESS_LOCK_ALL || w->exposure == OS_EXPOSE_POST ||
        (w->access == OS_ACCESS_FENCE && !os_win_fence_idle(w)))
        return OS_ERR(OS_ERR_SYNC, "MPI_Win_free with an epoch still open (%s)",
                      w->access == OS_ACCESS_PSCW       ? "MPI_Win_start without MPI_Win_complete"
                      : w->access == OS_ACCESS_LOCK     ? "a lock is held"
                      : w->access == OS_ACCESS_LOCK_ALL ? "MPI_Win_lock_all is held"
                      : w->exposure == OS_EXPOSE_POST   ? "MPI_Win_post without MPI_Win_wait"
                                                        : "operations after the last fence");
    return OS_OK;
}

os_status_t os_win_free(os_win_t *w)
{
    os_status_t st = os_win_can_free(w);
    if (st)
        return st;
    /* No process may leave while another may still touch its memory, and
     * the shell's control area is cleared for the next window only after
     * every process has left this one. */
    PMPI_Barrier(w->comm);
    /* The shell keeps the data for the next window, which zeroes it (see
     * win_create), by each process its own part, as it takes the shell. */
    if ((w->flavor == OS_FLAVOR_ALLOCATE || w->flavor == OS_FLAVOR_SHARED) && w->size > 0 &&
        os_shell_keeps_data(w->shell))
        os_shell_zero_later(w->shell, w->peers[w->rank].base, (size_t)w->size);
    if (w->multinode) {
        /* A progress thread may still be serving this window's lock (a
         * migration of the hybrid lock moves tickets on the node's CPU
         * lock) until its process unregisters the window: the control area
         * may be cleared for the next window only after every process of
         * the node has. Other nodes never touch it, and their operations
         * on this node ended before the barrier above: the node's barrier
         * suffices (across hosts one round trip less per MPI_Win_free). */
        os_remote_win_teardown(w);
        PMPI_Barrier(w->shell->node);
    }
    /* No origin posts any more, and this process stops serving the window
     * before its control area may go to the next one. */
    os_nreq_detach(w);
    os_shell_put(w->shell);
    /* Every process has left the window (the barrier): its pages become
     * private again. */
    void *shared_pages = w->shared_pages;
    free_parts(w);
    if (shared_pages)
        os_shm_region_unadopt(shared_pages);
    return OS_OK;
}

os_status_t os_win_shared_query(os_win_t *w, int rank, MPI_Aint *size, int *disp_unit,
                                void **baseptr)
{
    /* MPI-4.1 allows every flavor but dynamic: the answer is the peer's
     * memory where this process can load and store it, otherwise size 0
     * and NULL. onesided maps most MPI_Win_create memory of node-mates
     * (MPI_Alloc_mem's regions, pages made shareable in place). */
    if (w->flavor == OS_FLAVOR_DYNAMIC)
        return OS_ERR(OS_ERR_FLAVOR, "MPI_Win_shared_query on a dynamic window (MPI-4.1 "
                                     "defines it for the other flavors)");
    if (rank == MPI_PROC_NULL) {
        /* The lowest rank with memory, as MPI defines it. */
        for (rank = 0; rank < w->nranks - 1 && w->peers[rank].size == 0; rank++)
            ;
    } else if (rank < 0 || rank >= w->nranks) {
        return OS_ERR(OS_ERR_RANK, "rank %d is not in the window's group of %d", rank,
                      w->nranks);
    }
    /* Memory on another node cannot be shared, and a process without memory
     * has none to share: size 0 and a NULL base, as MPICH returns. A
     * node-mate's window reached by CMA is shared where all of it lies in
     * the part mapped here after all (its zone). */
    const os_peer_t *p = &w->peers[rank];
    char *here = NULL;
    if (p->size > 0 && p->access == OS_PEER_DIRECT)
        here = p->base;
    else if (p->size > 0 && p->access == OS_PEER_CMA)
        here = os_peer_mapped(p, p->base, (size_t)p->size);
    *size = here ? p->size : 0;
    *disp_unit = p->disp_unit;
    *baseptr = here;
    return OS_OK;
}
