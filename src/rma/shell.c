/* Window shells: what a window needs that does not depend on its memory,
 * kept when the window is freed and given to the next window created over
 * the same communicator.
 *
 * A shell holds the private duplicate of the program's communicator, its
 * group, the node communicator, the host MPI's window handle (which carries
 * the error handler, name, attributes and info) and the node's control
 * area (lock words, fence and PSCW counters, region tables), plus the data
 * segment of the last MPI_Win_allocate window. Building one costs a few
 * host collectives (more for the communicator's first: its duplicate and
 * node communicators) and, one shell in SLAB_AREAS, a shared segment;
 * reusing one costs none, so a program that creates a window per object
 * pays creation once.
 *
 * Shells are cached per communicator, through an attribute on the
 * program's communicator (not copied by MPI_Comm_dup). Every decision here
 * (reuse or build, keep or drop a segment) depends only on what all
 * processes of the communicator share, the order of collective window
 * creations and frees on it, so they all take the same shell: the
 * collectives a shell's handle and communicators take part in stay matched.
 * Spares (below) are the one exception: whether a freed shell stays a
 * spare depends on its data's size too, which only a node's processes
 * share, so the nodes agree with themselves, and a spare's path takes the
 * same collectives over the communicator as a new shell's (os_shell_get).
 * The caches are emptied when the program frees the communicator, and all
 * of them at MPI_Finalize.
 *
 * Host resources: a window costs the host MPI one communicator context, as
 * its own windows do (MPICH has 2048; Global Arrays keeps a window per
 * array): the handle, which the host makes by duplicating MPI_COMM_SELF
 * (os_self). The private duplicate and the node communicators are made
 * once per communicator and shared by all its windows, live or idle. That
 * is safe because the node communicators serve only window creation, and
 * the duplicate creation, free and the fences of windows spanning nodes:
 * creation and free are collective over the program's communicator, so MPI
 * orders them alike in every process. Fences of different windows are not
 * ordered against each other when threads make them at once (legal under
 * MPI_THREAD_MULTIPLE), so there each window keeps a duplicate of its own
 * (two contexts a window). At most IDLE_MAX freed shells per communicator
 * wait for the next window (a program that makes and frees a hundred
 * windows per step pays creation once, as the main job's window lifecycle
 * does). Past those a freed shell gives its handle (the host's context)
 * back but is kept as a spare, up to SPARE_MAX of them and SPARE_BYTES_MAX
 * of data: a new shell takes a spare's control area, data segment and
 * other nodes' keys to theirs, and makes only a handle. Destroying and
 * building those was 19 us of each MPI_Win_free and most of each
 * MPI_Win_create past the idle shells between virtual nodes (MPICH 5.0.2,
 * 1000 live MPI_Win_allocate windows: UCX unmapping a segment 7.6 us,
 * detaching the peers' 8.8, against 2.9 us for the host's whole free).
 */
#include "os_rma.h"

#include <stdlib.h>
#include <string.h>

#define PAGE 4096
/* A freed window's data segment is kept for the next window up to this size. */
#define KEEP_DATA_MAX ((size_t)64 << 20)

#define IDLE_MAX 128
/* Spare shells (no handle) per communicator and node kind, and their data. */
#define SPARE_MAX 1024
#define SPARE_BYTES_MAX ((size_t)256 << 20)

/* Control areas are cut from slabs: one shared segment holds up to
 * SLAB_AREAS of them, made when no slab of the node has a free one. A
 * segment of its own per shell cost more than all the rest of a new window
 * (shm_open, ftruncate, mmap and munmap, which UCX's memory hooks
 * intercept, and unlink: half of MPI_Win_create and a third of
 * MPI_Win_free with 1000 windows alive). Which area a shell takes and when
 * a slab is made or dropped follow the order of window creations and frees
 * on the communicator, as shells do, so every process of the node takes the
 * same area. A slab goes when its last area is given back (each process
 * unmaps its own mapping: nothing collective). */
#define SLAB_AREAS 64
#define SLAB_BYTES_MAX ((size_t)8 << 20)

typedef struct os_ctl_slab {
    os_shm_seg_t seg;
    size_t area_bytes;
    int nareas;
    uint64_t free;              /* bit i: area i is free */
    uint64_t used;              /* bit i: area i served a shell before (not zero) */
    struct os_ctl_slab *next;
    struct os_ctl_slab **list;  /* the list it is on (its cache's, for its node kind) */
} os_ctl_slab_t;

typedef struct os_comm_cache {
    os_shell_t *idle[OS_NODES_KINDS]; /* [os_nodes_t]: shells ready for the next window */
    /* [os_nodes_t]: shells past the idle ones, without a handle (shell.c's
     * header); every process of a node holds the same, in the same order */
    os_shell_t *spare[OS_NODES_KINDS];
    int nspare[OS_NODES_KINDS];
    size_t spare_bytes[OS_NODES_KINDS];
    os_ctl_slab_t *slabs[OS_NODES_KINDS]; /* [os_nodes_t]: control-area slabs of the node */
    /* [os_nodes_t]: slabs of small data that UCX allocated (shell_data.c) */
    os_data_slab_t *data_slabs[OS_NODES_KINDS];
    int nidle[OS_NODES_KINDS];
    MPI_Comm comm;              /* the windows' shared private duplicate, or NULL */
    MPI_Comm node[OS_NODES_KINDS]; /* [os_nodes_t]: the node communicators, or NULL */
    bool comm_gone;             /* the program freed the communicator */
    int live;                   /* shells in use by windows */
    struct os_comm_cache *next; /* every cache, in creation order */
} os_comm_cache_t;

static pthread_mutex_t caches_lock = PTHREAD_MUTEX_INITIALIZER;
static os_comm_cache_t *caches;
static int cache_keyval = MPI_KEYVAL_INVALID;
/* The host MPI's info for a window handle created without hints, and
 * which of handle_make's two kinds that handle was. */
static MPI_Info pristine = MPI_INFO_NULL;
static bool pristine_fallback_kind;
/* MPICH: the hint a new handle for MPI_Win_allocate and
 * MPI_Win_allocate_shared is made with (handle_make), once pristine is
 * known. */
static MPI_Info shared_hint = MPI_INFO_NULL;

/* This process's part of the kept data, zeroed for the next window (when
 * the shell is taken again: zero_owed). Pages nobody touched are left
 * alone (os_zero_touched): they still read as zeros. When MPI_Win_free did
 * this, faulting in the untouched page of each window to clear it had made
 * the first free of windows whose memory the program never wrote 3.1-3.6
 * us instead of 0.9-1.0 (MPICH 5.0.2, one node, 100 windows of 4 KB). The
 * check is a system call (mincore, 0.3 us here), so a part found present
 * whole is remembered per shell and cleared at once the next time (a page
 * once present stays so: os_zero_touched needs no swap). A part with
 * absent pages is checked again each time: clearing a small one whole
 * (two pages: a memset of two present pages takes 17-33 ns in cache, the
 * call 250) faulted its absent pages in, and a fault of a new page costs
 * 3-4 us on a KVM guest, where it takes the host's own fault too (the
 * zeroing averaged 1.4 us a window with 1000 windows between virtual
 * nodes on MPICH 5.0.2, three rounds), besides the memory. */
static void zero_part(os_shell_t *s, void *part, size_t len)
{
    char *p = part;
    if (s->zeroed_present && p >= s->zeroed && p + len <= s->zeroed + s->zeroed_len) {
        memset(p, 0, len);
        s->zeroed = p; /* present whole, remembered as itself */
        s->zeroed_len = len;
        return;
    }
    s->zeroed = p;
    s->zeroed_len = len;
    s->zeroed_present = os_zero_touched(p, len);
}

void os_shell_zero_later(os_shell_t *s, void *part, size_t len)
{
    s->zero_owed = part;
    s->zero_owed_len = len;
}

/* The last window's part, zeroed as the shell is taken again: by each
 * process its own, before the collectives that make the next window, so
 * that no process can reach the new window before all are done (a part
 * may overlap a node-mate's part of the next window, which it can reach
 * through MPI_Win_shared_query once the window is made). It was zeroed in
 * MPI_Win_free: 0.7-1.0 us of each free, a third of it, between virtual
 * nodes with 1000 windows alive on MPICH 5.0.2, host on UCX (the page
 * faults and mincore calls of os_zero_touched); a window's creation has
 * time to spare there, and a shell never taken again (the program's last
 * windows) zeroes nothing. */
static void zero_owed(os_shell_t *s)
{
    if (!s->zero_owed_len)
        return;
    zero_part(s, s->zero_owed, s->zero_owed_len);
    s->zero_owed_len = 0;
}

/* Leaves the shell with no data segment (size 0 included: the next window
 * compares its size with it). */
static void data_release(os_shell_t *s)
{
    /* A piece goes back to its slab for another shell (shell_data.c):
     * zero, unless its slab goes with it. */
    if (s->data_ucx && !os_shell_data_ucx_last(s))
        zero_owed(s);
    s->zero_owed_len = 0;
    if (!s->data_ucx)
        os_shm_destroy(&s->data);
    else
        os_shell_data_ucx_release(s);
    s->data_key = NULL;
    s->data_key_len = 0;
    s->data_key_addr = 0;
    s->data_serial = 0;
    s->data_ucx = false;
    s->data = (os_shm_seg_t){ 0 };
    s->zeroed = NULL;
    s->zeroed_len = 0;
    s->zeroed_present = false;
}

/* Back to zero for the next window, by the node's first process: the rank
 * control blocks and the post and complete matrices. Not the region tables
 * after them, most of the area (ONESIDED_DYNAMIC_INLINE_REGIONS copies per
 * process): an origin reads no entry past the count in the owner's control
 * block, which its owner writes only after the entries (dynamic.c). Cleared
 * anyway, the tables' pages were faulted in by the next window over the
 * shell, 6.7 us of each MPI_Win_create that took a spare (1000 windows
 * alive, Debian's MPICH 4.0.2), and stayed resident for nothing. */
static void ctl_zero(os_shell_t *s)
{
    if (s->node_rank == 0)
        memset(s->ctl.addr, 0, s->regions_off);
}

/* A control area of s->ctl_bytes for s, from a slab with one free, else
 * from a new slab (collective over the node). The node's first process
 * clears an area that served before: as for a reused shell (os_shell_get),
 * every process of the node passed that window's final barrier, and none
 * touches the area before the creating collectives that follow. */
static os_status_t ctl_take(os_comm_cache_t *c, os_shell_t *s)
{
    os_ctl_slab_t **list = &c->slabs[s->nodes], *slab;
    for (slab = *list; slab; slab = slab->next)
        if (slab->free && slab->area_bytes == s->ctl_bytes)
            break;
    if (!slab) {
        os_status_t st;
        int n = (int)(SLAB_BYTES_MAX / s->ctl_bytes);
        n = n < 1 ? 1 : n > SLAB_AREAS ? SLAB_AREAS : n;
        if (!(slab = calloc(1, sizeof *slab)))
            return OS_ERR(OS_ERR_NOMEM, "control-area slab");
        if ((st = os_shm_create(s->node, (size_t)n * s->ctl_bytes, &slab->seg))) {
            free(slab);
            return st;
        }
        slab->area_bytes = s->ctl_bytes;
        slab->nareas = n;
        slab->free = os_low_bits(n);
        slab->list = list;
        slab->next = *list;
        *list = slab;
    }
    int i = __builtin_ctzll(slab->free);
    slab->free &= ~((uint64_t)1 << i);
    s->ctl_slab = slab;
    s->ctl_area = i;
    s->ctl.addr = (char *)slab->seg.addr + (size_t)i * slab->area_bytes;
    s->ctl.size = slab->area_bytes;
    if (slab->used >> i & 1)
        ctl_zero(s);
    slab->used |= (uint64_t)1 << i;
    return OS_OK;
}

static void ctl_give_back(os_shell_t *s)
{
    os_ctl_slab_t *slab = s->ctl_slab;
    if (!slab)
        return;
    s->ctl_slab = NULL;
    s->ctl.addr = NULL;
    slab->free |= (uint64_t)1 << s->ctl_area;
    if (slab->free != os_low_bits(slab->nareas))
        return;
    for (os_ctl_slab_t **p = slab->list; *p; p = &(*p)->next)
        if (*p == slab) {
            *p = slab->next;
            break;
        }
    os_shm_destroy(&slab->seg);
    free(slab);
}

static void shell_destroy(os_shell_t *s)
{
    ctl_give_back(s);
    data_release(s);
    os_remote_shell_release(s);
    if (s->handle != MPI_WIN_NULL)
        PMPI_Win_free(&s->handle);
    if (s->group != MPI_GROUP_NULL)
        PMPI_Group_free(&s->group);
    if (s->own_comm && s->comm != MPI_COMM_NULL)
        PMPI_Comm_free(&s->comm);
    free(s);
}

/* Collective over the communicator: the shells of every cache go in the
 * same order everywhere; the shared communicators too once no window
 * uses them. */
static void cache_empty(os_comm_cache_t *c)
{
    for (int k = 0; k < OS_NODES_KINDS; k++) {
        while (c->idle[k]) {
            os_shell_t *s = c->idle[k];
            c->idle[k] = s->next;
            shell_destroy(s);
        }
        c->nidle[k] = 0;
        while (c->spare[k]) {
            os_shell_t *s = c->spare[k];
            c->spare[k] = s->next;
            shell_destroy(s);
        }
        c->nspare[k] = 0;
        c->spare_bytes[k] = 0;
    }
    if (c->live)
        return;
    for (int k = 0; k < OS_NODES_KINDS; k++)
        if (c->node[k] != MPI_COMM_NULL)
            PMPI_Comm_free(&c->node[k]);
    if (c->comm != MPI_COMM_NULL)
        PMPI_Comm_free(&c->comm);
}

static void cache_unlink(os_comm_cache_t *c)
{
    cache_empty(c);
    pthread_mutex_lock(&caches_lock);
    for (os_comm_cache_t **p = &caches; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    pthread_mutex_unlock(&caches_lock);
    free(c);
}

/* The program frees its communicator (MPI_Comm_free is collective). */
static int cache_delete(MPI_Comm comm, int keyval, void *val, void *extra)
{
    (void)comm;
    (void)keyval;
    (void)extra;
    os_comm_cache_t *c = val;
    cache_empty(c);
    c->comm_gone = true;
    if (!c->live)
        cache_unlink(c);
    return MPI_SUCCESS;
}

void os_shell_finalize(void)
{
    /* Every process runs this at MPI_Finalize, over the caches in the
     * order they were made: the handles' collective frees stay matched. */
    for (os_comm_cache_t *c = caches; c; c = c->next)
        cache_empty(c);
    if (pristine != MPI_INFO_NULL)
        PMPI_Info_free(&pristine);
    if (shared_hint != MPI_INFO_NULL)
        PMPI_Info_free(&shared_hint);
}

static void make_keyval(void)
{
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, cache_delete, &cache_keyval, NULL);
}

static os_comm_cache_t *cache_of(MPI_Comm comm)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    int flag = 0;
    os_comm_cache_t *c = NULL;
    /* Threads may create windows over different communicators at once. */
    pthread_once(&once, make_keyval);
    PMPI_Comm_get_attr(comm, cache_keyval, &c, &flag);
    if (flag)
        return c;
    if (!(c = calloc(1, sizeof *c)))
        return NULL;
    c->comm = MPI_COMM_NULL;
    for (int k = 0; k < OS_NODES_KINDS; k++)
        c->node[k] = MPI_COMM_NULL;
    PMPI_Comm_set_attr(comm, cache_keyval, c);
    pthread_mutex_lock(&caches_lock);
    os_comm_cache_t **p = &caches;
    while (*p)
        p = &(*p)->next;
    *p = c;
    pthread_mutex_unlock(&caches_lock);
    return c;
}

/* Lay the control area out, in this order:
 * rank control blocks | post matrix | complete matrix | region tables.
 * (Node requests have a segment of the node's own: node_request.c.) */
static void layout(os_shell_t *s)
{
    size_t off = (size_t)s->nranks * sizeof(os_rank_ctl_t);
    s->post_off = off;
    /* Row o of the post matrix is read only by origin o: pad rows to lines. */
    s->post_stride = OS_ALIGN_UP((size_t)s->nranks * sizeof(uint64_t), OS_CACHELINE) /
                     sizeof(uint64_t);
    off += (size_t)s->nranks * s->post_stride * sizeof(uint64_t);
    /* Row t of the complete matrix is read only by target t, among the
     * node's processes alone (completes from other nodes come as requests). */
    s->complete_off = off;
    s->complete_stride = OS_ALIGN_UP((size_t)s->node_size * sizeof(uint64_t), OS_CACHELINE) /
                         sizeof(uint64_t);
    off += (size_t)s->node_size * s->complete_stride * sizeof(uint64_t);
    s->regions_off = off;
    off += (size_t)s->nranks * (size_t)s->inline_regions * sizeof(os_region_t);
    s->ctl_bytes = OS_ALIGN_UP(off, PAGE);
}

/* The shell's host handle, for a window of an allocating flavor if
 * `shared`, and the agreement over the communicator on it and on what else
 * every process must share (one reduction). Collective. */
static os_status_t handle_make(os_shell_t *s, bool shared)
{
    /* The host MPI's window is only a handle: it serves locally (name,
     * error handler, attributes, info; MPI_Win_get_group and the window's
     * attributes answer from the shell), so it is made over this process
     * alone. That takes no collective and none of the host's per-window
     * set-up between processes: 5-20 us where one over the communicator
     * costs what the host's own window does (100-230 us on MPICH 5.0.2 and
     * Open MPI 5.0.11 with 2 processes), which past the idle shells is paid
     * once per window. It still costs the host one communicator context, as
     * its own windows do. The kind: MPICH's dynamic window, whose reported
     * hints os_shell_set_hints builds on; Open MPI (whose info win_info.c
     * models) an allocated window of no memory, the one its osc/sm takes
     * over one process (4.1's osc/rdma refuses one process; the other kind
     * is the fallback either way). Errors come back to us, not to the
     * program's handler; being local, a failure is agreed on below, so that
     * every process gives up alike. */
    MPI_Errhandler self_inherited;
    PMPI_Comm_get_errhandler(os_self, &self_inherited);
    PMPI_Comm_set_errhandler(os_self, MPI_ERRORS_RETURN);
    void *none;
    /* MPICH: a handle for an allocated window is made holding the hints
     * os_shell_set_hints would give it (the host's defaults and alloc_shm),
     * so that its first window sets none: an info copy, merge and
     * MPI_Win_set_info, 2-2.5 us of each MPI_Win_allocate that makes a
     * handle (past the idle shells). Not before the defaults were read from
     * a handle made without hints. */
    pthread_mutex_lock(&caches_lock);
    const MPI_Info made_with = shared ? shared_hint : MPI_INFO_NULL;
    pthread_mutex_unlock(&caches_lock);
#ifdef OMPI_MAJOR_VERSION
    int rc = PMPI_Win_allocate(0, 1, MPI_INFO_NULL, os_self, &none, &s->handle);
    s->handle_fallback_kind = rc != MPI_SUCCESS;
    if (rc != MPI_SUCCESS)
        rc = PMPI_Win_create_dynamic(MPI_INFO_NULL, os_self, &s->handle);
#else
    int rc = PMPI_Win_create_dynamic(made_with, os_self, &s->handle);
    s->handle_fallback_kind = rc != MPI_SUCCESS;
    if (rc != MPI_SUCCESS)
        rc = PMPI_Win_allocate(0, 1, MPI_INFO_NULL, os_self, &none, &s->handle);
#endif
    PMPI_Comm_set_errhandler(os_self, self_inherited);
    PMPI_Errhandler_free(&self_inherited);
    if (rc != MPI_SUCCESS)
        s->handle = MPI_WIN_NULL;
    /* What every process must agree on, in one reduction: whether some
     * process is on another node, the region-table layout, whether all are
     * on one real host (the highest and the lowest host name agree), and
     * whether some process has no handle. */
    int mine[5] = { s->node_size == s->nranks ? 0 : 1, os_config.dynamic_inline_regions,
                    os_host_first, -os_host_first, s->handle == MPI_WIN_NULL };
    PMPI_Allreduce(MPI_IN_PLACE, mine, 5, MPI_INT, MPI_MAX, s->comm);
    s->multinode = mine[0];
    s->inline_regions = mine[1] > 0 ? mine[1] : 0;
    s->one_host = mine[2] == -mine[3];
    if (mine[4])
        return OS_ERR(OS_ERR_OTHER, "the host MPI could not create a window handle%s",
                      s->handle == MPI_WIN_NULL ? " (out of communicator contexts?)"
                                                : " in another process");
    int name_len;
    PMPI_Win_get_name(s->handle, s->handle_name, &name_len);
    /* A new handle of the kind the defaults were read from holds them: its
     * first window needs no MPI_Win_set_info (an info copy and merge, 1.2-1.5
     * us of each MPI_Win_create past the idle shells). Another kind's own
     * hints may differ: its first window sets them. */
    pthread_mutex_lock(&caches_lock);
    /* (The second kind is made without the hint.) */
    s->hints_held = pristine == MPI_INFO_NULL || s->handle_fallback_kind != pristine_fallback_kind
                        ? OS_HINTS_OTHER
                    : made_with != MPI_INFO_NULL && !s->handle_fallback_kind ? OS_HINTS_SHARED
                                                                             : OS_HINTS_NONE;
    pthread_mutex_unlock(&caches_lock);
    return OS_OK;
}

static os_status_t shell_build(MPI_Comm comm, os_comm_cache_t *c, os_nodes_t nodes, bool shared,
                               os_shell_t **out)
{
    os_status_t st = OS_OK;
    os_shell_t *s = calloc(1, sizeof *s);
    if (!s)
        return OS_ERR(OS_ERR_NOMEM, "window shell");
    s->comm = MPI_COMM_NULL;
    s->group = MPI_GROUP_NULL;
    s->handle = MPI_WIN_NULL;
    s->nodes = nodes;
    /* Every process decides alike: os_threaded is the same everywhere
     * (MPI_Init_thread's answer), and the cache's state follows the
     * communicator's collective history. */
    s->own_comm = os_threaded;
    MPI_Comm *dup = s->own_comm ? &s->comm : &c->comm;
    if (*dup == MPI_COMM_NULL && PMPI_Comm_dup(comm, dup) != MPI_SUCCESS) {
        *dup = MPI_COMM_NULL;
        st = OS_ERR(OS_ERR_OTHER, "the host MPI cannot duplicate the communicator "
                                  "(out of communicator contexts?)");
        goto fail;
    }
    s->comm = *dup;
    PMPI_Comm_rank(s->comm, &s->rank);
    PMPI_Comm_size(s->comm, &s->nranks);
    PMPI_Comm_group(s->comm, &s->group);
    const int virtual_size = nodes == OS_NODES_REAL ? 0
                             : nodes == OS_NODES_SELF ? 1
                                                      : os_config.node_size;
    if (c->node[nodes] == MPI_COMM_NULL &&
        (c->node[nodes] = os_node_comm(s->comm, virtual_size)) == MPI_COMM_NULL) {
        st = OS_ERR(OS_ERR_OTHER, "the host MPI cannot make the node communicator "
                                  "(out of communicator contexts?)");
        goto fail;
    }
    s->node = c->node[nodes];
    PMPI_Comm_rank(s->node, &s->node_rank);
    PMPI_Comm_size(s->node, &s->node_size);
    if ((st = handle_make(s, shared)))
        goto fail;
    int world;
    PMPI_Comm_rank(os_world, &world);
    s->node_first = world;
    PMPI_Bcast(&s->node_first, 1, MPI_INT, 0, s->node);
    layout(s);
    if ((st = ctl_take(c, s)))
        goto fail;
    pthread_mutex_lock(&caches_lock);
    if (pristine == MPI_INFO_NULL) {
        PMPI_Win_get_info(s->handle, &pristine);
        pristine_fallback_kind = s->handle_fallback_kind;
#ifndef OMPI_MAJOR_VERSION
        PMPI_Info_create(&shared_hint);
        PMPI_Info_set(shared_hint, "alloc_shm", "true");
#endif
    }
    pthread_mutex_unlock(&caches_lock);
    *out = s;
    return OS_OK;
fail:
    shell_destroy(s);
    return st;
}

os_status_t os_shell_get(MPI_Comm comm, os_nodes_t nodes, bool shared, os_shell_t **out)
{
    os_comm_cache_t *c = cache_of(comm);
    if (!c)
        return OS_ERR(OS_ERR_NOMEM, "window shell cache");
    os_shell_t *s = c->idle[nodes];
    if (s) {
        c->idle[nodes] = s->next;
        c->nidle[nodes]--;
        /* Reused: the previous window's counters and lock words go back to
         * zero. Every process of the node has passed that window's final
         * barrier, and none touches this area before the next collective
         * (the creating allgather), so the node's first process clears it. */
        ctl_zero(s);
        zero_owed(s);
    } else if ((s = c->spare[nodes])) {
        /* A spare: as an idle shell, and a new handle. Its node-mates take
         * the same spare (os_shell_put); processes of other nodes may build
         * instead, which takes the same reduction over the communicator
         * (handle_make) and otherwise only collectives of their node. */
        c->spare[nodes] = s->next;
        c->nspare[nodes]--;
        c->spare_bytes[nodes] -= s->data.size;
        ctl_zero(s);
        zero_owed(s); /* before handle_make's reduction */
        os_status_t st = handle_make(s, shared);
        if (st) {
            shell_destroy(s);
            return st;
        }
    } else {
        os_status_t st = shell_build(comm, c, nodes, shared, &s);
        if (st)
            return st;
    }
    s->cache = c;
    s->next = NULL;
    c->live++;
    *out = s;
    return OS_OK;
}

bool os_shell_hints_stale(const os_shell_t *s, MPI_Info hints, bool shared)
{
    /* A window without hints, over a handle whose last window had none
     * either, saves the host's MPI_Win_set_info (an info copy and merge).
     * Open MPI's handle never reports them (win_info.c models what its
     * components would): there only the program's own hints go to the
     * host, which may refuse them. */
#ifdef OMPI_MAJOR_VERSION
    (void)s, (void)shared;
    return hints != MPI_INFO_NULL;
#else
    return hints != MPI_INFO_NULL || s->hints_held != (shared ? OS_HINTS_SHARED : OS_HINTS_NONE);
#endif
}

void os_shell_hints_from_program(os_shell_t *s)
{
    s->hints_held = OS_HINTS_OTHER;
}

os_status_t os_shell_set_hints(os_shell_t *s, MPI_Info hints, bool shared)
{
    /* From the host's defaults, so nothing of the previous window's hints
     * stays; the handle is a dynamic window, which the host reports as not
     * in shared memory unless told (the program's own alloc_shm wins). */
    MPI_Info all;
    int n = 0;
    char key[MPI_MAX_INFO_KEY + 1];
    PMPI_Info_dup(pristine, &all);
    if (shared)
        PMPI_Info_set(all, "alloc_shm", "true");
    if (hints != MPI_INFO_NULL)
        PMPI_Info_get_nkeys(hints, &n);
    for (int i = 0; i < n; i++) {
        int len, flag;
        PMPI_Info_get_nthkey(hints, i, key);
        PMPI_Info_get_valuelen(hints, key, &len, &flag);
        char *val = malloc((size_t)len + 1);
        if (!val) {
            PMPI_Info_free(&all);
            return OS_ERR(OS_ERR_NOMEM, "info value");
        }
        PMPI_Info_get(hints, key, len, val, &flag);
        PMPI_Info_set(all, key, val);
        free(val);
    }
    int rc = PMPI_Win_set_info(s->handle, all);
    PMPI_Info_free(&all);
    s->hints_held = hints != MPI_INFO_NULL ? OS_HINTS_OTHER
                    : shared               ? OS_HINTS_SHARED
                                           : OS_HINTS_NONE;
    return rc == MPI_SUCCESS ? OS_OK
                             : OS_ERR(OS_ERR_INFO, "the host MPI refused the window's hints");
}

os_status_t os_shell_data(os_shell_t *s, size_t bytes)
{
    /* Collective over the node; `bytes` is the same in all its processes. */
    if (bytes <= s->data.size)
        return OS_OK;
    data_release(s);
    bytes = OS_ALIGN_UP(bytes, PAGE);
    if (s->multinode && os_ucx_active() &&
        os_shell_data_ucx(s, &s->cache->data_slabs[s->nodes], bytes))
        return OS_OK;
    return os_shm_create(s->node, bytes, &s->data);
}

bool os_shell_keeps_data(const os_shell_t *s)
{
    return s->data.size <= KEEP_DATA_MAX;
}

void os_shell_put(os_shell_t *s)
{
    os_comm_cache_t *c = s->cache;
    if (s->data.size > KEEP_DATA_MAX)
        data_release(s);
    c->live--;
    if (c->comm_gone) {
        shell_destroy(s);
        if (!c->live)
            cache_unlink(c);
        return;
    }
    if (c->nidle[s->nodes] >= IDLE_MAX) {
        /* Its handle's context goes back to the host MPI, the rest stays a
         * spare while there is room. Whether there is depends on the data's
         * size, which is the same in every process of the node (not of the
         * communicator): spares are what a node's processes agree on. A
         * shell with a duplicate of its own (threads) keeps none: that is a
         * context too. */
        const size_t bytes = s->data.size;
        if (s->own_comm || c->nspare[s->nodes] >= SPARE_MAX ||
            c->spare_bytes[s->nodes] + bytes > SPARE_BYTES_MAX) {
            shell_destroy(s);
            return;
        }
        PMPI_Win_free(&s->handle);
        s->next = c->spare[s->nodes];
        c->spare[s->nodes] = s;
        c->nspare[s->nodes]++;
        c->spare_bytes[s->nodes] += bytes;
        return;
    }
    /* Kept with its handle, which forgets the window: name and error
     * handler as new (its attributes were deleted by MPI_Win_free, its info
     * is reset by the next window). A handle freed above needs neither. */
    PMPI_Win_set_name(s->handle, s->handle_name);
    PMPI_Win_set_errhandler(s->handle, MPI_ERRORS_ARE_FATAL);
    s->next = c->idle[s->nodes];
    c->idle[s->nodes] = s;
    c->nidle[s->nodes]++;
}
