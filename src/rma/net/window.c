/* Between nodes: a window's remote state over its lifetime. One exchange at
 * creation (the memory's packed key, the lock word's, whose endpoint reaches
 * the memory), the keys unpacked and probed for zero copy; undone at free.
 * The operations that use them are in origin.c. */
#include "os_net.h"

#include <stdlib.h>
#include <string.h>

/* Window ids, the same in every process of a window and unique in the job:
 * the window's rank 0 names it, by its MPI_COMM_WORLD rank and a count of
 * its own (atomic: threads may create windows over different communicators
 * at once; a largest count agreed over the window could give two windows
 * created at once in one process the same id). */
static _Atomic uint32_t windows_named;

/* ------------------------------------------------------- window lifetime */

/* What each process tells the others about its window, in one allgather;
 * the two packed keys follow in one allgatherv. */
typedef struct {
    uint64_t base;      /* window memory */
    uint64_t id;        /* the window's id, if this process names it (rank 0) */
    uint64_t word;      /* network lock word ... */
    uint64_t word_block; /* ... in the block whose key it is (lockword.c) */
    uint64_t data_serial; /* the memory's segment, if its key may be kept (datakey.c) */
    int32_t key_len;    /* the memory's packed key (0: none) */
    int32_t word_key_len;
    int32_t rdma_world; /* whose endpoint reaches the memory */
    int32_t ucx_allocated; /* UCX allocated the memory: a peer may map its key */
    int32_t tcp_only;   /* every endpoint to another node is TCP alone */
} remote_info_t;

/* Whether this process's hybrid lock starts in network mode: where the
 * history policy keeps it on the word once there (os_hyb_stays_on_word:
 * every process of one host, whose shared-memory transports map the word),
 * a first remote locker would otherwise ask this process's manager, whose
 * progress thread shares a core with a computing application: 300 us to 4
 * ms for the first of 1000 lock epochs whose others took 0.1 us each
 * (busy_epochs, Open MPI 5.0.11, virtual nodes). Decided before the keys
 * are exchanged, so from what every process knows of the job (one host) and
 * not from the mapping itself; where the word turns out not mapped (UCX
 * over TCP alone), network mode is the network design's, and the node's
 * lockers bring the lock back as the policy says. Network mode needs the
 * progress thread, which brings it back. */
static bool starts_on_word(const os_win_t *w)
{
    return w->one_host && w->cfg.progress && w->cfg.lock_policy == OS_LOCK_POLICY_HISTORY;
}

/* Allocations of the window's remote state, and this process's lock word:
 * allocated by UCX, so that other processes' network atomics on it need no
 * help from us (the node's own lockers take it too, in network mode). */
static os_status_t remote_alloc(os_win_t *w)
{
    const int n = w->nranks;
    os_status_t st;
    /* One block for the arrays of one entry per process, each on cache
     * lines of its own (acks change under the progress thread, the others
     * are the origin's): seven allocations were fourteen calls of malloc's
     * per window, whose chunk headers the free found cold. */
    size_t at[7], total = 0;
    const size_t bytes[7] = { (size_t)n, (size_t)n * sizeof *w->acks, (size_t)n,
                              (size_t)n * sizeof *w->kept, (size_t)n * sizeof *w->nl_addr,
                              (size_t)n * sizeof *w->nl_rkey, (size_t)n * sizeof *w->nl_map };
    for (int i = 0; i < 7; i++) {
        at[i] = total;
        total += OS_ALIGN_UP(bytes[i], OS_CACHELINE);
    }
    char *block = aligned_alloc(OS_CACHELINE, total);
    if (!block)
        return OS_ERR(OS_ERR_NOMEM, "window of %d processes", n);
    memset(block, 0, total);
    w->dirty = (uint8_t *)block; /* at[0] == 0: the block's start, which teardown frees */
    w->acks = (_Atomic int64_t *)(block + at[1]);
    w->lock_how = (uint8_t *)(block + at[2]);
    w->kept = (struct os_kept_op *)(block + at[3]);
    w->nl_addr = (uint64_t *)(block + at[4]);
    w->nl_rkey = (void **)(block + at[5]);
    w->nl_map = (void **)(block + at[6]);
    if ((st = os_lockword_get(&w->netword, &w->netword_block)))
        return st;
    /* The whole unit: lock word, completes, the fence's counters (barrier.c),
     * the bulk handshake's words (acc_host_join). */
    for (int i = 0; i < OS_NL_UNIT_WORDS; i++)
        atomic_store(w->netword + i, 0);
    w->lock_rng = (uint64_t)w->peers[w->rank].world * 0x9e3779b97f4a7c15ull + 1;
    if (w->cfg.lock == OS_LOCK_HYBRID) {
        /* Before anybody has the key: the word starts parked, CPU mode;
         * where every process will map it, open, network mode (below). */
        os_rank_ctl_t *c = &w->ctl[w->rank];
        os_hyb_init(&w->hyb, &c->lock, &c->lock_mode, &c->lock_local_count, w->netword,
                    w->lock_rng);
        if (starts_on_word(w))
            os_hyb_start_net(&w->hyb);
        w->hyb_ready = true;
    }
    return OS_OK;
}

/* Keys to this process's window memory: the node's UCX-allocated data
 * segment (its first process owns the key), or a registration of memory
 * UCX did not allocate, which its transports reach through our worker.
 * Dynamic windows have none: their regions come and go, and are served by
 * request. */
static os_status_t memory_key(os_win_t *w, const void *base, size_t bytes, remote_info_t *me,
                              const char **key)
{
    const os_shell_t *sh = w->shell;
    os_status_t st;
    *key = NULL;
    me->base = (uint64_t)(uintptr_t)base;
    me->rdma_world = w->peers[w->rank].world;
    if (w->flavor == OS_FLAVOR_DYNAMIC || !bytes)
        return OS_OK;
    if (w->flavor == OS_FLAVOR_ALLOCATE && sh->data_ucx) {
        /* Each process of the node maps the segment at its own address;
         * the key names the owner's. */
        *key = sh->data_key;
        me->base = sh->data_key_addr + (uint64_t)((const char *)base - (char *)sh->data.addr);
        me->key_len = (int32_t)sh->data_key_len;
        me->rdma_world = sh->node_first;
        me->ucx_allocated = 1;
        /* A segment the shell gives back when the window is freed is not
         * worth keeping a key to (nor its memory, which a key holds). */
        me->data_serial = os_shell_keeps_data(sh) ? sh->data_serial : 0;
        return OS_OK;
    }
    if ((st = os_ucx_mem_map((void *)base, bytes, &w->reg)))
        return st;
    *key = w->reg.rkey_buf;
    me->key_len = (int32_t)w->reg.rkey_len;
    return OS_OK;
}

/* Bulk accumulates between virtual nodes of one host (acc_host). A window
 * with direct accumulates lets other nodes' processes change a target's
 * memory with atomics, which the node's handshake (os_acc_atomic_try_enter)
 * cannot see, so it gives up bulk accumulates: between virtual nodes a
 * 1 MB accumulate ran at a twentieth of the hosts' own shared memory. But
 * where UCX maps the memory here its atomics are this CPU's, and where it
 * maps every process's network words too, this process can take part in
 * the handshake with the words there: its counts in its own unit, the
 * flag of each target in the target's. It joins the handshake where it
 * changes every target's memory by CPU atomics alone (its own, a
 * node-mate's, one UCX maps here, one without memory), adding one to each
 * target's joined count; a bulk accumulate on a target waits for every
 * process of the window to have joined (os_acc_bulk). A process that
 * cannot, because some word or some memory is not mapped here
 * (MPI_Win_create memory, say), joins for nobody: nobody accumulates in
 * bulk on the window, its network atomics stay atomic, and no agreement is
 * needed. Left out as well: windows whose
 * network atomics some worker emulates (tcp_only anywhere: the served
 * bulk of os_acc_try_apply holds them off with the node's words). Each
 * joins before its window is made, so before any of its accumulates; the
 * joined counts were cleared before the keys went out (remote_alloc). */
static os_status_t acc_host_join(os_win_t *w, const remote_info_t *all)
{
    const int n = w->nranks;
    if (!w->cfg.acc_direct || w->flavor == OS_FLAVOR_DYNAMIC || !w->cfg.acc_bulk_min)
        return OS_OK;
    for (int r = 0; r < n; r++) {
        const os_peer_t *p = &w->peers[r];
        const bool cpu_only = r == w->rank || p->access == OS_PEER_DIRECT ||
                              (p->access == OS_PEER_REMOTE && (p->ucx_map || !all[r].key_len));
        if (all[r].tcp_only || (r != w->rank && !w->nl_map[r]) || !cpu_only)
            return OS_OK;
    }
    if (!(w->acc_host_units = malloc(sizeof *w->acc_host_units * (size_t)n)))
        return OS_ERR(OS_ERR_NOMEM, "bulk handshake of %d processes", n);
    for (int r = 0; r < n; r++)
        w->acc_host_units[r] = r == w->rank ? w->netword : (_Atomic uint64_t *)w->nl_map[r];
    w->acc_host = true;
    w->acc_mine = w->netword + OS_NL_ACC_ACTIVE_WORD;
    w->acc_mine_main = w->netword + OS_NL_ACC_ACTIVE_MAIN_WORD;
    for (int r = 0; r < n; r++)
        atomic_fetch_add_explicit(w->acc_host_units[r] + OS_NL_ACC_JOINED_WORD, 1,
                                  memory_order_seq_cst);
    w->acc_bulk_bytes = os_acc_bulk_bytes(w, w->cfg.acc_bulk_min);
    OS_STAT(w, ACC_HOST_JOINED, (uint64_t)n);
    return OS_OK;
}

/* Whether UCX maps every process's network lock word into this one, so
 * that every lock word of the window is this CPU's atomic away (virtual
 * nodes of one host). Asked of this process alone: it steers the hybrid
 * lock's migration policy (os_hyb_stays_on_word), which any process may
 * choose for itself, so no agreement is needed. */
static bool words_mapped(const os_win_t *w)
{
    for (int r = 0; r < w->nranks; r++)
        if (r != w->rank && !w->nl_map[r])
            return false;
    return true;
}

os_status_t os_remote_win_setup(os_win_t *w, const void *base, size_t bytes)
{
    const int n = w->nranks;
    os_status_t st = OS_OK;
    remote_info_t me = { 0 }, *all = NULL;
    const char *key;
    char *mykeys = NULL, *keys = NULL;
    int *lens = NULL, *displs = NULL;
    if ((st = remote_alloc(w)))
        return st;
    w->route = w->cfg.route;
    if (w->route < OS_ROUTE_DIRECT || w->route > OS_ROUTE_COOPERATIVE)
        return OS_ERR(OS_ERR_INFO, "onesided_route=%d is not a route", w->route);
    if (w->route != OS_ROUTE_DIRECT && os_fwd_job() == OS_ROUTE_DIRECT) {
        /* No server runs: they start with the job (ONESIDED_ROUTE). */
        static bool told;
        if (!told)
            os_log(1, "a window asks for route %s, but the job runs none (ONESIDED_ROUTE): "
                   "direct (stat fallback_route_direct)", os_route_name((os_route_t)w->route));
        told = true;
        OS_STAT(w, FALLBACK_ROUTE_DIRECT, 1);
        w->route = OS_ROUTE_DIRECT;
    }

    /* The processes whose memory we map: as their node's server we apply
     * routed requests for them. */
    for (int r = 0; r < n && !st; r++)
        if (r != w->rank && w->peers[r].access == OS_PEER_DIRECT)
            st = os_hmap_put(&w->node_mates, (uintptr_t)w->peers[r].world + 1,
                             (void *)(intptr_t)(r + 1));
    if (st || (st = memory_key(w, base, bytes, &me, &key)))
        return st;
    /* Over TCP alone, UCX emulates network atomics in the worker of the
     * key's owner. Asked of every endpoint here and agreed below: lanes are
     * chosen at each end, so every process answers for its own. */
    me.tcp_only = w->route == OS_ROUTE_DIRECT;
    for (int r = 0; r < n && me.tcp_only; r++)
        if (w->peers[r].access == OS_PEER_REMOTE)
            me.tcp_only = os_ucx_tcp_only(w->peers[r].world);
    const void *word_key;
    size_t word_key_len;
    os_lockword_key(w->netword_block, &word_key, &word_key_len, &me.word_block);
    me.word = (uint64_t)(uintptr_t)w->netword;
    me.word_key_len = (int32_t)word_key_len;
    const int mylen = me.key_len + me.word_key_len;
    all = malloc(sizeof *all * (size_t)n);
    lens = malloc(sizeof *lens * (size_t)n);
    displs = malloc(sizeof *displs * (size_t)n);
    mykeys = malloc((size_t)mylen + 1);
    if (!all || !lens || !displs || !mykeys) {
        st = OS_ERR(OS_ERR_NOMEM, "key exchange of %d processes", n);
        goto out;
    }
    if (me.key_len)
        memcpy(mykeys, key, (size_t)me.key_len);
    memcpy(mykeys + me.key_len, word_key, (size_t)me.word_key_len);
    if (w->rank == 0)
        me.id = (uint64_t)(w->peers[0].world + 1) << 32 | atomic_fetch_add(&windows_named, 1);
    PMPI_Allgather(&me, sizeof me, MPI_BYTE, all, sizeof me, MPI_BYTE, w->comm);
    /* Registered before the keys go out (the allgatherv below): no request
     * can arrive for a window we do not know. */
    w->id = all[0].id;
    if ((st = os_serve_register(w)))
        goto out;
    int total = 0;
    for (int r = 0; r < n; r++) {
        displs[r] = total;
        lens[r] = all[r].key_len + all[r].word_key_len;
        total += lens[r];
    }
    if (!(keys = malloc((size_t)total + 1))) {
        st = OS_ERR(OS_ERR_NOMEM, "keys of %d processes", n);
        goto out;
    }
    PMPI_Allgatherv(mykeys, mylen, MPI_BYTE, keys, lens, displs, MPI_BYTE, w->comm);
    w->amo_own_worker = me.rdma_world == w->peers[w->rank].world;
    for (int r = 0; r < n; r++)
        w->amo_own_worker = w->amo_own_worker && all[r].tcp_only;
    /* Served accumulates combine in bulk only where nothing but CPU
     * atomics can touch the memory meanwhile (os_acc_try_apply). */
    if (w->cfg.acc_direct && !w->amo_own_worker)
        w->served_bulk_min = 0;
    for (int r = 0; r < n && !st; r++) {
        os_peer_t *p = &w->peers[r];
        w->nl_addr[r] = all[r].word;
        st = os_lockword_rkey(p->world, all[r].word_block, keys + displs[r] + all[r].key_len,
                              &w->nl_rkey[r]);
        w->nl_map[r] = st ? NULL : os_ucx_rkey_ptr(w->nl_rkey[r], all[r].word);
        p->word_zero_copy = w->nl_map[r] != NULL;
        if (st || p->access != OS_PEER_REMOTE)
            continue;
        if (w->flavor != OS_FLAVOR_DYNAMIC)
            p->base = (char *)(uintptr_t)all[r].base;
        p->rdma_world = all[r].rdma_world;
        /* Unpacked toward the key's owner, whose endpoint carries the RDMA:
         * on RDMA hardware a key is valid only there. */
        if (all[r].key_len && w->flavor == OS_FLAVOR_ALLOCATE)
            st = os_data_key(w, r, all[r].data_serial, keys + displs[r]);
        else if (all[r].key_len) /* the program's memory, registered for this window alone */
            st = os_ucx_rkey_unpack(p->rdma_world, keys + displs[r], &p->rkey);
        /* Zero-copy as far as this process's UCX shows it: memory UCX
         * allocated, which one of its shared-memory transports maps here
         * (not with ONESIDED_UCX_TLS=tcp,self, say, which emulates it).
         * UCX 1.13 cannot tell which lane an RDMA operation takes, so on
         * RDMA hardware between real hosts the count says emulated. */
        p->ucx_map = !st && all[r].ucx_allocated ? os_ucx_rkey_ptr(p->rkey, all[r].base) : NULL;
        p->zero_copy = p->ucx_map != NULL;
        /* Asked of the key owner's endpoint, which exists already (the key
         * was unpacked toward it): it shares the target's host, hence its
         * transports, and a routed window opens no endpoint to the target. */
        p->tcp_only = !st && os_ucx_tcp_only(p->rdma_world);
        p->fence_orders_rdma = !st && p->rdma_world == p->world && os_ucx_on_host(p->world);
        os_ucx_report_transports(p->rdma_world);
    }
    if (!st)
        atomic_store_explicit(&w->words_mapped, words_mapped(w), memory_order_relaxed);
    if (!st)
        st = acc_host_join(w, all);
    if (!st && w->cfg.progress)
        st = os_ucx_progress_thread_start();
out:
    free(keys);
    free(mykeys);
    free(all);
    free(lens);
    free(displs);
    return st;
}

void os_remote_win_teardown(os_win_t *w)
{
    os_serve_unregister(w);
    os_hmap_destroy(&w->node_mates);
    for (int r = 0; w->peers && r < w->nranks; r++)
        if (w->peers[r].rkey) {
            if (!os_data_key_kept(w, r)) /* the shell's stay for its next window */
                os_ucx_rkey_destroy(w->peers[r].rkey);
            w->peers[r].rkey = NULL;
        }
    os_ucx_mem_unmap(&w->reg);
    /* Nobody touches the word any more: the others' operations ended before
     * MPI_Win_free's barrier, this process's progress thread stopped
     * serving the window above. The keys to the others' words stay in
     * lockword.c's cache. */
    os_lockword_put(w->netword, w->netword_block);
    w->netword = NULL;
    free(w->acc_host_units);
    w->acc_host_units = NULL;
    w->acc_host = false;
    atomic_store_explicit(&w->words_mapped, false, memory_order_relaxed);
    for (int r = 0; w->kept && r < w->nranks; r++)
        os_kept_clear(&w->kept[r]);
    os_req_batches_free(w);
    free(w->dirty); /* remote_alloc's block, every array below */
    w->kept = NULL;
    w->nl_rkey = NULL;
    w->nl_map = NULL;
    w->nl_addr = NULL;
    w->lock_how = NULL;
    w->dirty = NULL;
    w->acks = NULL;
}

