/* Between nodes: lock epochs toward a target on another node, in the three
 * designs (paper 000: manager, network, hybrid; origin.c's header comment
 * says how each works) and with lock piggybacking (paper 003). Sends its
 * requests through request.c. */
#include "os_net.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------ lock piggybacking */

/* Paper 003 section 4.3, for the manager design toward another node:
 * MPI_Win_lock only notes the epoch (OS_HOLD_DEFERRED). The epoch's first
 * operation, when short (its data; a target with holes sends its runs too)
 * and not an R* form, is
 * built into its request and kept here; at unlock it goes with the lock
 * request as one K_LOCK_OP, which the target queues like a lock request,
 * applies once the lock is granted and answers with the result: one round
 * trip for lock, operation and unlock instead of three. An epoch with no
 * operation sends nothing. Whatever cannot wait for unlock (a second
 * operation, a flush, an R* call, MPI_Win_sync) first asks for the lock, then sends what
 * was kept, so operations still reach the target in issue order.
 * Why MPI allows it: MPI_Win_lock need not block until the lock is acquired
 * (MPI-3.1 11.5.3), and before unlock or flush nothing the origin can see
 * tells whether it was. */

void os_kept_clear(os_kept_op_t *k)
{
    free(k->msg);
    if (k->rtype)
        os_dtype_release(k->rtype);
    *k = (os_kept_op_t){ .exclusive = k->exclusive };
}

/* Takes msg. */
void os_kept_keep(os_win_t *w, int target, const req_hdr_t *h, char *msg, size_t mlen,
                    void *rbuf, os_dtype_t *rtype, size_t rcount, size_t rbytes)
{
    os_kept_op_t *k = &w->kept[target];
    if (rtype)
        os_dtype_retain(rtype);
    *k = (os_kept_op_t){ .exclusive = k->exclusive, .h = *h, .msg = msg,
                         .mlen = mlen, .rbuf = rbuf, .rtype = rtype, .rcount = rcount,
                         .rbytes = rbytes };
}

/* Whether an operation toward a deferred lock can wait for unlock. */
bool os_kept_can_keep(const os_win_t *w, const os_rma_op_t *op)
{
    return !op->request && w->flavor != OS_FLAVOR_DYNAMIC && !w->kept[op->target].msg &&
           op->tcount * op->ttype->size <= (size_t)w->cfg.lock_piggyback;
}

static os_status_t manager_lock(os_win_t *w, int target, bool exclusive, bool hybrid,
                                uint8_t *grant)
{
    req_hdr_t h = { .kind = K_LOCK, .op = exclusive, .basic = hybrid };
    OS_STAT(w, LOCK_MANAGER, 1);
    return os_req_call_grant(w, target, &h, NULL, 0, NULL, 0, grant);
}

/* A deferred lock that cannot wait any more: ask for it, then send the kept
 * operation. After a failure the epoch holds nothing (unlock sends nothing). */
os_status_t os_kept_take(os_win_t *w, int target)
{
    os_kept_op_t *k = &w->kept[target];
    os_status_t st = manager_lock(w, target, k->exclusive, false, NULL);
    w->lock_how[target] = st ? OS_HOLD_NONE : OS_HOLD_MANAGER;
    if (!st && k->msg)
        st = os_req_send_op(w, target, &k->h, k->msg, k->mlen, k->rbuf, k->rtype, k->rcount,
                            k->rbytes, false);
    os_kept_clear(k);
    return st;
}

/* Unlock of a lock never asked for: the kept operation, if any, goes with
 * the lock request, and its reply completes the epoch at the target. */
static os_status_t unlock_deferred(os_win_t *w, int target)
{
    os_kept_op_t *k = &w->kept[target];
    os_status_t st = OS_OK;
    char *data = NULL;
    if (!k->msg) {
        OS_STAT(w, LOCK_ELIDED, 1);
        goto out;
    }
    const size_t dlen = sizeof k->h + k->mlen;
    if (!(data = malloc(dlen))) {
        st = OS_ERR(OS_ERR_NOMEM, "lock request of %zu bytes", dlen);
        goto out;
    }
    memcpy(data, &k->h, sizeof k->h);
    memcpy(data + sizeof k->h, k->msg, k->mlen);
    req_hdr_t h = { .kind = K_LOCK_OP, .op = k->exclusive };
    OS_STAT(w, LOCK_MANAGER, 1);
    OS_STAT(w, LOCK_PIGGYBACKED, 1);
    st = os_req_send_op(w, target, &h, data, dlen, k->rbuf, k->rtype, k->rcount, k->rbytes,
                        false);
out:
    free(data);
    os_kept_clear(k);
    return st;
}

/* Take the target's network lock word with network atomics (os_netlock.h);
 * *parked when it lives on the CPU side (hybrid, CPU mode). */
static os_status_t net_lock(os_win_t *w, int target, bool exclusive, bool *parked,
                            bool *contended)
{
    static const int amo_op[] = { [OS_NL_ADD] = OS_UCX_AMO_ADD, [OS_NL_CSWAP] = OS_UCX_AMO_CSWAP,
                                  [OS_NL_OR] = OS_UCX_AMO_OR };
    os_nl_fsm_t f;
    os_nl_amo_t a;
    os_backoff_t b = OS_BACKOFF_INIT;
    os_nl_start(&f, exclusive);
    for (;;) {
        switch (os_nl_next(&f, &a)) {
        case OS_NL_DO_AMO: {
            uint64_t old = a.compare;
            if (w->nl_map[target]) {
                os_ucx_mapped_atomic(w->nl_map[target], amo_op[a.op], 8, a.value, &old);
            } else {
                os_status_t st = os_ucx_atomic(w->peers[target].world, amo_op[a.op], 8, a.value,
                                               &old, w->nl_addr[target], w->nl_rkey[target]);
                if (st)
                    return st;
            }
            os_nl_feed(&f, old);
            break;
        }
        case OS_NL_DO_BACKOFF:
            *contended = true;
            OS_STAT(w, LOCK_NET_RETRIES, 1);
            os_backoff_wait(&b);
            break;
        case OS_NL_DO_GOT:
            *parked = false;
            OS_STAT(w, LOCK_NETWORK, 1);
            return OS_OK;
        default:
            *parked = true;
            return OS_OK;
        }
    }
}

/* The release of a network lock goes right behind the epoch's operations,
 * ordered by a fence, and one flush completes them all: one round trip
 * instead of a flush and then a fetching atomic. Accumulates sent as
 * requests are applied first (their acknowledgements).
 * A fence orders operations toward one process along one kind of path only.
 * Where RDMA and the lock word take different paths, the epoch's RDMA is
 * flushed before the release is posted:
 *  - a put that UCX emulates (applied later by the target's worker) and a
 *    release done at once by a shared-memory atomic (a reader took the lock
 *    and saw half a put before this rule);
 *  - RDMA to memory whose key another process owns (the node's first
 *    process, for MPI_Win_allocate memory UCX allocated), emulated there by
 *    that process's worker while the target's worker applies the release:
 *    two processes, no order between them (a reader across hosts saw a
 *    writer's second put missing, and a reader's get could run after a
 *    writer had taken the lock it released).
 * Both paths zero-copy means the origin itself did both, in order. */
static bool release_ordered(const os_peer_t *p)
{
    if (p->zero_copy && p->word_zero_copy)
        return true;
    return p->rdma_world == p->world && p->zero_copy == p->word_zero_copy;
}

/* The release of a lock word UCX maps here: this CPU's atomic, seq_cst,
 * so the epoch's stores and loads (the fast path's, this CPU's) come
 * before it in every order another process can see. */
static inline void mapped_release(os_win_t *w, int target, bool exclusive)
{
    os_ucx_mapped_atomic(w->nl_map[target], OS_UCX_AMO_ADD, 8, os_nl_release(exclusive).value,
                         NULL);
    OS_STAT(w, LOCK_RELEASE_MAPPED, 1);
}

static os_status_t net_unlock(os_win_t *w, int target, bool exclusive)
{
    const os_peer_t *p = &w->peers[target];
    const bool remote = p->access == OS_PEER_REMOTE;
    os_nl_amo_t a = os_nl_release(exclusive);
    os_status_t st = OS_OK, st2;
    if (remote && p->tcp_only && !w->dirty[target] && w->route == OS_ROUTE_DIRECT) {
        /* Toward a target reached over TCP alone, UCX's atomic is a message
         * the target's worker applies, and the flush completing it another
         * round trip; the epoch's operations went as requests (puts and gets
         * there, accumulates) or as network atomics, which fetch and are
         * complete already. The target applies one origin's direct requests
         * in the order they were sent (serve.c keeps a later one behind a
         * kept one), so the release goes right behind them as one more,
         * applied with the CPU atomic the target's worker uses for every
         * atomic UCX emulates on that word: one round trip in all, instead
         * of the acknowledgements' and then the release's. */
        req_hdr_t h = { .kind = K_NET_RELEASE, .op = exclusive };
        OS_STAT(w, LOCK_RELEASE_BY_REQUEST, 1);
        st = os_req_call(w, target, &h, NULL, 0, NULL, 0);
        os_req_await_acks(w, target); /* answered before the release: arrived already */
        return st;
    }
    os_req_await_acks(w, target);
    if (w->nl_map[target]) {
        /* The word mapped here: the release is this CPU's atomic, done at
         * once, so whatever the epoch left to UCX (RDMA, even where the
         * origin's CPU did it, may wait in UCX's queues) is completed
         * first. Puts and gets of the fast path are this CPU's stores and
         * loads, before the release in program order (seq_cst). */
        if (remote && w->dirty[target]) {
            st = os_ucx_flush(p->rdma_world);
            if (!st && p->rdma_world != p->world)
                st = os_ucx_flush(p->world);
            w->dirty[target] = 0;
            if (st)
                return st;
        }
        mapped_release(w, target, exclusive);
        return OS_OK;
    }
    if (remote && w->dirty[target] && !release_ordered(p)) {
        OS_STAT(w, LOCK_RELEASE_FLUSHED, 1);
        st = os_ucx_flush(p->rdma_world);
        w->dirty[target] = 0;
        if (st)
            return st;
    }
    os_ucx_fence();
    st = os_ucx_atomic_post(p->world, OS_UCX_AMO_ADD, 8, a.value, w->nl_addr[target],
                            w->nl_rkey[target]);
    st2 = os_ucx_flush(p->world);
    if (remote && w->dirty[target] && p->rdma_world != p->world) {
        /* Zero-copy both ways: done already, but complete it for the epoch. */
        os_status_t st3 = os_ucx_flush(p->rdma_world);
        if (!st2)
            st2 = st3;
    }
    if (remote)
        w->dirty[target] = 0;
    return st ? st : st2;
}

/* The network lock word taken with one CPU atomic where UCX maps it here
 * (another virtual node of this host) and nobody holds it against us: the
 * first step of net_lock's state machine, without the machine, the wait's
 * bookkeeping or the hybrid design's checks (an 8-byte lock-put-unlock
 * between virtual nodes spent a third of its time there). A word found
 * held, wanted or parked is left as found (a shared locker's +1 taken back)
 * for os_remote_lock to decide.
 *
 * Under the hybrid design a locker of the target's own node takes the word
 * here too where os_remote_lock would: the lock in network mode, and a
 * policy that keeps it there (os_hyb_stays_on_word; it then never reads the
 * count of the node's lockers on the word, which os_remote_lock's path
 * raises with a locked instruction on the target's control line). On two
 * virtual nodes of two processes (Open MPI 5.0.11, callgrind) a node-mate's
 * exclusive lock + get + flush + put + unlock ran 404 instructions through
 * os_remote_lock where a remote locker's ran 248; here, 254. */
bool os_remote_lock_now(os_win_t *w, int target, bool exclusive)
{
    _Atomic uint64_t *word = (_Atomic uint64_t *)w->nl_map[target];
    const os_peer_t *p = &w->peers[target];
    if (!word)
        return false;
    if (w->cfg.lock == OS_LOCK_HYBRID) {
        /* The mode's acquire orders the word's atomic after it, as in
         * os_remote_lock; a migration back parks the word first, which the
         * atomic below then finds. */
        if (p->access != OS_PEER_REMOTE &&
            (!os_hyb_stays_on_word(w) ||
             atomic_load_explicit(&w->ctl[target].lock_mode, memory_order_acquire) !=
                 OS_LOCKMODE_NET))
            return false;
    } else if (w->cfg.lock != OS_LOCK_NETWORK) {
        return false;
    }
    if (exclusive) {
        uint64_t free_word = 0;
        if (!atomic_compare_exchange_strong_explicit(word, &free_word, OS_NL_WRITER,
                                                     memory_order_seq_cst, memory_order_relaxed))
            return false;
    } else if (atomic_fetch_add_explicit(word, 1, memory_order_seq_cst) &
               (OS_NL_WRITER | OS_NL_WANT | OS_NL_PARKED)) {
        atomic_fetch_sub_explicit(word, 1, memory_order_seq_cst);
        return false;
    }
    w->lock_how[target] = OS_HOLD_NET;
    OS_STAT(w, LOCK_NETWORK, 1);
    return true;
}

os_status_t os_remote_lock(os_win_t *w, int target, bool exclusive, bool *contended)
{
    uint8_t *how = &w->lock_how[target];
    os_rank_ctl_t *c = &w->ctl[target];
    const bool local = w->peers[target].access != OS_PEER_REMOTE;
    const os_lock_policy_t policy = (os_lock_policy_t)w->cfg.lock_policy;
    const unsigned streak = (unsigned)w->cfg.lock_streak;
    os_backoff_t b = OS_BACKOFF_INIT;
    os_status_t st = OS_OK;
    bool parked;
    uint8_t grant;

    if (w->cfg.lock == OS_LOCK_MANAGER) {
        /* Not under MPI_THREAD_MULTIPLE: a deferred lock is taken inside
         * unlock or an operation, waits the window's other threads could not
         * get past (they would hold up each other's unlocks across
         * processes); eager locks wait in MPI_Win_lock, which lets them. */
        if (!local && w->cfg.lock_piggyback > 0 && !os_threaded) {
            *how = OS_HOLD_DEFERRED; /* lock piggybacking, above */
            w->kept[target].exclusive = exclusive;
            return OS_OK;
        }
        *how = OS_HOLD_MANAGER;
        return manager_lock(w, target, exclusive, false, NULL);
    }
    if (w->cfg.lock == OS_LOCK_NETWORK) {
        *how = OS_HOLD_NET;
        if (!(st = net_lock(w, target, exclusive, &parked, contended)) && parked)
            st = OS_ERR(OS_ERR_OTHER, "the network lock word of rank %d is parked in a "
                        "window whose lock design is 'network'", target);
        return st;
    }
    /* Hybrid. */
    for (;;) {
        if (local) {
            /* The node's lockers use the CPU lock, unless the lock is in
             * network mode and the policy keeps it there. Drawing a CPU
             * ticket in network mode asks the manager to migrate it back
             * (it sees the ticket queue behind its park ticket). */
            if (atomic_load_explicit(&c->lock_mode, memory_order_acquire) == OS_LOCKMODE_NET &&
                (os_hyb_stays_on_word(w) ||
                 !os_lock_policy_migrate(policy, atomic_load(&c->lock_local_count), streak,
                                         &w->lock_rng))) {
                if ((st = net_lock(w, target, exclusive, &parked, contended)))
                    return st;
                if (!parked) {
                    atomic_fetch_add_explicit(&c->lock_local_count, 1, memory_order_relaxed);
                    *how = OS_HOLD_NET;
                    return OS_OK;
                }
                *contended = true; /* a migration back is under way */
                os_backoff_wait(&b);
                continue;
            }
            if (exclusive)
                os_lock_acquire_excl(&c->lock, contended);
            else
                os_lock_acquire_shared(&c->lock, contended);
            *how = OS_HOLD_CPU;
            return OS_OK;
        }
        /* Over TCP alone UCX emulates network atomics in the target's
         * worker, so trying a parked word costs one round trip (exclusive)
         * or two (shared: the add and its undo) before the manager is asked
         * anyway. Where this origin's last lock found it parked, the manager
         * is asked first: it answers "retry" when the word is open
         * (os_hyb_request), which costs one wasted round trip when the lock
         * has migrated since. With RDMA or shared memory the word's atomics
         * need no target CPU and cost far less than the manager: always
         * tried first there. */
        os_peer_t *p = &w->peers[target];
        const bool ask_first =
            p->tcp_only && atomic_load_explicit(&p->lock_parked_seen, memory_order_relaxed);
        if (!ask_first) {
            if ((st = net_lock(w, target, exclusive, &parked, contended)))
                return st;
            if (!parked) {
                *how = OS_HOLD_NET;
                return OS_OK;
            }
        } else {
            OS_STAT(w, LOCK_MANAGER_FIRST, 1);
        }
        if ((st = manager_lock(w, target, exclusive, true, &grant)))
            return st;
        atomic_store_explicit(&p->lock_parked_seen, grant == GRANT_CPU, memory_order_relaxed);
        if (grant != GRANT_RETRY) {
            *how = grant == GRANT_NET ? OS_HOLD_NET : OS_HOLD_MANAGER;
            return OS_OK;
        }
        if (!ask_first)
            *contended = true;
    }
}

/* net_unlock's mapped release where it has nothing to wait for first (no
 * acknowledgement outstanding, nothing left to UCX): true when done. */
bool os_remote_unlock_now(os_win_t *w, int target, bool exclusive)
{
    const os_peer_t *p = &w->peers[target];
    if (w->lock_how[target] != OS_HOLD_NET || !w->nl_map[target] ||
        (p->access == OS_PEER_REMOTE && (w->dirty[target] || p->tcp_only)) ||
        atomic_load_explicit(&w->acks[target], memory_order_acquire) > 0)
        return false;
    w->lock_how[target] = OS_HOLD_NONE;
    mapped_release(w, target, exclusive);
    return true;
}

os_status_t os_remote_unlock(os_win_t *w, int target, bool exclusive)
{
    if (w->lock_how[target] == OS_HOLD_DEFERRED) {
        /* Nothing was sent before: nothing to flush. */
        w->lock_how[target] = OS_HOLD_NONE;
        return unlock_deferred(w, target);
    }
    if (w->lock_how[target] == OS_HOLD_NET) {
        w->lock_how[target] = OS_HOLD_NONE;
        return net_unlock(w, target, exclusive); /* flushes too */
    }
    /* The manager's unlock is served in order behind this origin's data
     * requests (serve.c), so that with only requests in the epoch (no RDMA,
     * direct route) it need not wait for their acknowledgements first. */
    const bool behind = w->lock_how[target] == OS_HOLD_MANAGER && !w->dirty[target] &&
                        w->route == OS_ROUTE_DIRECT;
    os_status_t st = behind ? OS_OK : os_req_flush(w, target), st2 = OS_OK;
    switch (w->lock_how[target]) {
    case OS_HOLD_NONE: /* a deferred lock whose request failed */
        break;
    case OS_HOLD_CPU:
        if (exclusive)
            os_lock_release_excl(&w->ctl[target].lock);
        else
            os_lock_release_shared(&w->ctl[target].lock);
        break;
    default: {
        req_hdr_t h = { .kind = K_UNLOCK, .op = exclusive };
        st2 = os_req_call(w, target, &h, NULL, 0, NULL, 0);
        if (behind)
            os_req_await_acks(w, target); /* answered before the unlock: arrived already */
        break;
    }
    }
    w->lock_how[target] = OS_HOLD_NONE;
    return st ? st : st2;
}

/* MPI_Win_sync: a program that polls its own memory may be waiting for
 * what it issued before (mpi4py's MCS mutex adds itself to its predecessor's
 * queue by an accumulate, then polls with MPI_Win_sync until granted), so kept
 * operations cannot wait for unlock any longer: their locks are asked for now,
 * and requests held for a batch (request.c) leave. */
os_status_t os_remote_send_kept(os_win_t *w)
{
    os_status_t first = w->multinode ? os_req_drain_all(w) : OS_OK;
    for (int t = 0; w->multinode && t < w->nranks; t++)
        if (w->lock_how[t] == OS_HOLD_DEFERRED && w->kept[t].msg) {
            os_status_t st = os_kept_take(w, t);
            if (st && !first)
                first = st;
        }
    return first;
}

