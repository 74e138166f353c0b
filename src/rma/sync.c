/* Synchronization: fence, post/start/complete/wait, lock/unlock, flush.
 * Designs from paper 003 (fence without barriers, PSCW with counters),
 * carried out on shared-memory counters rather than messages. */
#include "os_rma.h"

#include <stdlib.h>

#define ALL_ASSERTS (MPI_MODE_NOCHECK | MPI_MODE_NOSTORE | MPI_MODE_NOPUT | \
                     MPI_MODE_NOPRECEDE | MPI_MODE_NOSUCCEED)

static os_status_t check_assert(int assert, int allowed, const char *call)
{
    if (assert & ~allowed)
        return OS_ERR(OS_ERR_ASSERT, "%s: assert 0x%x has bits this call does not take", call,
                      (unsigned)assert);
    return OS_OK;
}

/* ------------------------------------------------------- watchdog reports */

static const char *design_name(const os_win_t *w)
{
    static const char *const design[] = { "hybrid", "manager", "network" };
    return design[w->cfg.lock % 3];
}

/* The rounds of the node barrier (os_rank_ctl_t.bar_round) whose signal
 * for barrier `seq` this process has received, of *rounds. */
static int node_barrier_rounds_heard(const os_win_t *w, uint64_t seq, int *rounds)
{
    int heard = 0, k = 0;
    for (int d = 1; d < w->nranks; k++, d <<= 1)
        heard += atomic_load(&w->ctl[w->rank].bar_round[k]) >= seq;
    *rounds = k;
    return heard;
}

/* This process's row of the complete matrix (os_win_t.complete). */
static inline const _Atomic uint64_t *complete_row(const os_win_t *w)
{
    return &w->complete[(size_t)w->node_index[w->rank] * w->complete_stride];
}

/* Whether node-mate o has called MPI_Win_complete for the exposure epoch
 * open here (acquire: its epoch's operations happen before). */
static inline bool complete_heard(const os_win_t *w, const _Atomic uint64_t *row, int o)
{
    return atomic_load_explicit(&row[w->node_index[o]], memory_order_acquire) >
           w->pscw[o].completes_seen;
}

static void describe_fence(const os_wait_site_t *s, char *buf, size_t len)
{
    const os_win_t *w = s->obj;
    const int p = (int)(w->fence_syncs & 1);
    const os_rank_ctl_t *me = &w->ctl[w->rank];
    int n = os_win_describe(w, buf, len);
    int rounds;
    const int heard = node_barrier_rounds_heard(w, w->fence_syncs + 1, &rounds);
    snprintf(buf + n, len - (size_t)n, ", fence %llu: heard from %d of the node barrier's %d "
             "rounds (%d processes); %llu origins announced operations to this process, "
             "%llu finished",
             (unsigned long long)w->fence_syncs, heard, rounds, w->nranks,
             (unsigned long long)atomic_load(&me->fence_expect[p]),
             (unsigned long long)atomic_load(&me->fence_done[p]));
}

static void describe_wait(const os_wait_site_t *s, char *buf, size_t len)
{
    const os_win_t *w = s->obj;
    const _Atomic uint64_t *row = complete_row(w);
    uint64_t heard = w->multinode ? atomic_load(os_win_remote_completes(w)) : 0;
    for (int i = 0; i < w->post_expect; i++) {
        const int o = w->post_ranks[i];
        heard += w->peers[o].access != OS_PEER_REMOTE && complete_heard(w, row, o);
    }
    int n = os_win_describe(w, buf, len);
    snprintf(buf + n, len - (size_t)n, ", %llu of the %d origins of the post group called "
             "MPI_Win_complete", (unsigned long long)heard, w->post_expect);
}

static void describe_lock(const os_wait_site_t *s, char *buf, size_t len)
{
    const os_win_t *w = s->obj;
    int n = os_win_describe(w, buf, len);
    if (w->multinode) {
        snprintf(buf + n, len - (size_t)n, ", lock design %s: waiting for the lock of rank %d "
                 "(its lock manager's reply or its network lock word)", design_name(w),
                 s->target);
        return;
    }
    const os_rank_ctl_t *c = &w->ctl[s->target];
    uint64_t word = atomic_load(&c->lock), holder = atomic_load(&c->lock_holder);
    uint16_t me = *(const uint16_t *)s->arg;
    uint16_t wr = os_lock_write_field(word), rd = os_lock_read_field(word);
    n += snprintf(buf + n, len - (size_t)n, ", ticket %u; serving writer ticket %u, reader "
                  "ticket %u; next ticket %u", me, wr, rd, os_lock_next_field(word));
    if (holder)
        snprintf(buf + n, len - (size_t)n, "; held by rank %d (exclusive)", (int)holder - 1);
    else if (rd != wr)
        snprintf(buf + n, len - (size_t)n, "; held shared by %u process(es)",
                 (unsigned)(uint16_t)(rd - wr));
}

/* A window spanning nodes: the wait is for replies (or a network lock word). */
static void describe_remote(const os_wait_site_t *s, char *buf, size_t len)
{
    const os_win_t *w = s->obj;
    int n = os_win_describe(w, buf, len);
    if (s->target >= 0)
        snprintf(buf + n, len - (size_t)n, ", waiting for rank %d's reply (lock design %s)",
                 s->target, design_name(w));
    else
        snprintf(buf + n, len - (size_t)n, ", waiting for replies (lock design %s)",
                 design_name(w));
}

bool os_win_fence_idle(const os_win_t *w)
{
    return w->nqueue == 0;
}

/* Operations issued in fence epochs since the last fence (os_win_t's
 * ops_at_fence). */
static uint64_t fence_epoch_ops(const os_win_t *w)
{
    uint64_t n = w->fence_ops_left;
    if (w->access == OS_ACCESS_FENCE)
        n += os_win_ops_issued(w) - w->ops_at_fence;
    return n;
}

/* A fence epoch with no queued operations ends quietly when the program moves
 * on to another kind of epoch (MPICH accepts this; MPI leaves it open). */
static os_status_t leave_fence(os_win_t *w, const char *call)
{
    if (w->access == OS_ACCESS_FENCE) {
        if (!os_win_fence_idle(w))
            return OS_ERR(OS_ERR_SYNC, "%s with operations of a fence epoch not yet completed "
                          "by a fence", call);
        w->fence_ops_left = fence_epoch_ops(w);
        w->access = OS_ACCESS_NONE;
    }
    if (w->exposure == OS_EXPOSE_FENCE)
        w->exposure = OS_EXPOSE_NONE;
    return OS_OK;
}

/* ------------------------------------------------------------------ fence */

/* All processes of the window (one node) reach it before any leaves:
 * barrier number seq, the same in every process (w->fence_syncs + 1). A
 * dissemination barrier: in round k each process signals rank + 2^k and
 * waits for rank - 2^k, so after ceil(log2 n) rounds each has heard from
 * every other, transitively. Release stores and acquire loads make that
 * chain a happens-before: every process's stores before the barrier are
 * visible to every process after it. The numbers only grow (the shell's
 * control area is cleared when it is reused), so a signal may be overwritten
 * by a fast neighbour's next barrier: that is at least seq too, and that
 * neighbour cannot pass its next barrier before this process signals it. */
static void node_barrier(os_win_t *w, uint64_t seq)
{
    const int n = w->nranks, me = w->rank;
    for (int k = 0, d = 1; d < n; k++, d <<= 1) {
        atomic_store_explicit(&w->ctl[(me + d) % n].bar_round[k], seq, memory_order_release);
        os_wait_until_geq(&w->ctl[me].bar_round[k], seq);
    }
}

os_status_t os_win_fence(os_win_t *w, int assert)
{
    /* Every call counts, even one that fails its checks below: the other
     * processes made the same collective call, and the first access of a
     * NOPRECEDE epoch compares their count with its target's. A target
     * that did not count it, or did not record its entry, would hold its
     * origins in that access while it waits for them in the next fence. */
    w->fences++;
    const bool sync = !(assert & MPI_MODE_NOPRECEDE);
    /* After MPI_MODE_NOPRECEDE, operations inside a node wait for their
     * target's entry into this fence (os_fence_await_entry) rather than
     * being queued, unless the paper's queued design is asked for. Between
     * nodes they are queued: the fence's allreduce orders them. Release:
     * this process's loads and stores of its window before the fence happen
     * before any access of an origin that reads this entry. */
    const bool lazy = !sync && !w->multinode && !w->cfg.fence_defer;
    if (lazy)
        atomic_store_explicit(&w->ctl[w->rank].fence_entered, w->fences, memory_order_release);
    os_status_t st = check_assert(assert, ALL_ASSERTS & ~MPI_MODE_NOCHECK, "MPI_Win_fence");
    if (st)
        return st;
    if (w->access != OS_ACCESS_NONE && w->access != OS_ACCESS_FENCE)
        return OS_ERR(OS_ERR_SYNC, "MPI_Win_fence inside a %s epoch",
                      w->access == OS_ACCESS_PSCW ? "post/start/complete/wait" : "lock");
    if (w->exposure == OS_EXPOSE_POST)
        return OS_ERR(OS_ERR_SYNC, "MPI_Win_fence inside a post/wait exposure epoch");
    const uint64_t epoch_ops = fence_epoch_ops(w);
    if ((assert & MPI_MODE_NOPRECEDE) && epoch_ops)
        return OS_ERR(OS_ERR_SYNC, "MPI_Win_fence(MPI_MODE_NOPRECEDE) after %llu operations "
                      "were issued in the epoch it closes",
                      (unsigned long long)epoch_ops);
    OS_STAT(w, FENCES, 1);
    WAIT_SITE(site, "MPI_Win_fence", -1, w->multinode ? describe_remote : describe_fence, NULL);

    /* Queued operations of the epoch this fence closes run after the node
     * barrier, while processes with nothing incoming may already have left
     * this fence. So the next epoch may run operations at once only if this
     * one queued nothing anywhere, or an early operation could be overtaken
     * by a late one from the epoch before. Every input here is the same in
     * every process (asserts are collective, fence_defer is agreed at
     * creation), so all processes make the same choice. */
    bool closes_queued_epoch =
        w->access == OS_ACCESS_FENCE && !w->fence_immediate && !w->fence_lazy;
    if (sync && w->multinode) {
        /* Between nodes: complete the operations done at once, then one
         * allreduce tells every process that all of them are done and
         * whether anybody queued operations. Queued ones may start only now
         * (every target has entered this fence, so its epoch's own stores are
         * done), and a barrier after them tells everybody they completed. */
        st = os_remote_flush(w, -1);
        os_fence_seq_cst();
        int queued = w->nqueue > 0;
        os_status_t bar = os_remote_barrier(w, &queued);
        if (!st)
            st = bar;
        if (queued) {
            for (size_t i = 0; i < w->nqueue && !st; i++)
                st = os_rma_execute(w, &w->queue[i]);
            os_status_t fl = os_remote_flush(w, -1);
            if (!st)
                st = fl;
            os_fence_seq_cst();
            int none = 0;
            bar = os_remote_barrier(w, &none);
            if (!st)
                st = bar;
        }
        w->fence_syncs++;
        OS_STAT(w, FENCE_SYNCS, 1);
    } else if (sync) {
        /* Reduce-scatter of the per-target counts of queued operations: each
         * origin adds one to the expected count of every target it queued
         * operations for; the node barrier then tells everybody that all
         * counts are in and that every process has entered this fence. No
         * barrier is needed after the transfers: each target waits only for
         * the origins that announced themselves. */
        const int p = (int)(w->fence_syncs & 1);
        uint8_t *mark = w->tstate; /* unused during a fence epoch: borrow it */
        for (size_t i = 0; i < w->nqueue; i++) {
            int t = w->queue[i].target;
            if (!mark[t]) {
                mark[t] = 1;
                atomic_fetch_add_explicit(&w->ctl[t].fence_expect[p], 1, memory_order_relaxed);
            }
        }
        /* Release: operations done at once in this epoch are visible to all. */
        node_barrier(w, w->fence_syncs + 1);
        for (size_t i = 0; i < w->nqueue && !st; i++)
            st = os_rma_execute(w, &w->queue[i]);
        for (int t = 0; t < w->nranks; t++) {
            if (mark[t]) {
                mark[t] = 0;
                atomic_fetch_add_explicit(&w->ctl[t].fence_done[p], 1, memory_order_release);
            }
        }
        /* Parity p is not touched again until the next synchronizing fence
         * but one, which cannot begin before this process arrives at the next. */
        os_rank_ctl_t *me = &w->ctl[w->rank];
        uint64_t expect = atomic_load_explicit(&me->fence_expect[p], memory_order_relaxed);
        os_wait_until_geq(&me->fence_done[p], expect);
        atomic_fetch_sub_explicit(&me->fence_expect[p], expect, memory_order_relaxed);
        atomic_fetch_sub_explicit(&me->fence_done[p], expect, memory_order_relaxed);
        w->fence_syncs++;
        OS_STAT(w, FENCE_SYNCS, 1);
    } else {
        os_fence_seq_cst();
    }
    for (size_t i = 0; i < w->nqueue; i++) {
        os_dtype_release(w->queue[i].otype);
        os_dtype_release(w->queue[i].ttype);
        if (w->queue[i].rtype)
            os_dtype_release(w->queue[i].rtype);
    }
    w->nqueue = 0;
    w->ops_at_fence = os_win_ops_issued(w);
    w->fence_ops_left = 0;
    if (assert & MPI_MODE_NOSUCCEED) {
        w->access = OS_ACCESS_NONE;
        w->exposure = OS_EXPOSE_NONE;
    } else {
        w->access = OS_ACCESS_FENCE;
        w->exposure = OS_EXPOSE_FENCE;
        /* Only a fence that synchronized guarantees that every target has
         * entered this epoch; after NOPRECEDE operations wait for their
         * target's entry (lazy) or are queued to the next fence. */
        w->fence_immediate = sync && !closes_queued_epoch && !w->cfg.fence_defer;
        w->fence_lazy = lazy;
    }
    os_wait_pop(&site);
    return st;
}

/* -------------------------------------------------- post/start/complete/wait */

os_status_t os_win_post(os_win_t *w, const int *ranks, int n, int assert)
{
    os_status_t st = check_assert(assert, MPI_MODE_NOCHECK | MPI_MODE_NOSTORE | MPI_MODE_NOPUT,
                                  "MPI_Win_post");
    if (st)
        return st;
    if (w->exposure == OS_EXPOSE_POST)
        return OS_ERR(OS_ERR_SYNC, "MPI_Win_post while a post/wait exposure epoch is open");
    if (w->access == OS_ACCESS_LOCK_ALL || w->access == OS_ACCESS_LOCK)
        return OS_ERR(OS_ERR_CONFLICT, "MPI_Win_post while holding a passive-target lock "
                      "on this window");
    if ((st = leave_fence(w, "MPI_Win_post")))
        return st;
    /* Release: this process's stores to its window happen before any origin
     * that sees the post accesses it. A node-mate's cell has this process
     * as its only writer (the origin's own server writes those of targets
     * on other nodes): a plain store of the count. */
    if (!(assert & MPI_MODE_NOCHECK))
        for (int i = 0; i < n && !st; i++) {
            const int o = ranks[i];
            if (w->peers[o].access == OS_PEER_REMOTE)
                st = os_remote_post(w, o);
            else
                atomic_store_explicit(&w->post[(size_t)o * w->post_stride + (size_t)w->rank],
                                      ++w->pscw[o].posts_made, memory_order_release);
        }
    if (st)
        return st;
    w->post_remote = 0;
    for (int i = 0; i < n; i++) {
        w->post_ranks[i] = ranks[i];
        w->post_remote += w->peers[ranks[i]].access == OS_PEER_REMOTE;
    }
    w->post_expect = n;
    w->post_next = 0;
    w->exposure = OS_EXPOSE_POST;
    OS_STAT(w, PSCW_EXPOSURE, 1);
    return OS_OK;
}

os_status_t os_win_start(os_win_t *w, const int *ranks, int n, int assert)
{
    os_status_t st = check_assert(assert, MPI_MODE_NOCHECK, "MPI_Win_start");
    if (st)
        return st;
    if (w->access == OS_ACCESS_PSCW)
        return OS_ERR(OS_ERR_SYNC, "MPI_Win_start while a start/complete epoch is open");
    if (w->access == OS_ACCESS_LOCK || w->access == OS_ACCESS_LOCK_ALL)
        return OS_ERR(OS_ERR_CONFLICT, "MPI_Win_start while holding a passive-target lock");
    if ((st = leave_fence(w, "MPI_Win_start")))
        return st;
    /* Nothing is waited for here (paper 003): the first operation to a target,
     * or MPI_Win_complete, waits for that target's post. */
    for (int i = 0; i < n; i++) {
        w->start_ranks[i] = ranks[i];
        w->tstate[ranks[i]] = (assert & MPI_MODE_NOCHECK) ? OS_T_PSCW_READY : OS_T_PSCW_AWAIT_POST;
    }
    w->nstart = n;
    w->access = OS_ACCESS_PSCW;
    OS_STAT(w, PSCW_ACCESS, 1);
    return OS_OK;
}

os_status_t os_win_complete(os_win_t *w)
{
    if (w->access != OS_ACCESS_PSCW)
        return OS_ERR(OS_ERR_SYNC, "MPI_Win_complete without a matching MPI_Win_start");
    os_status_t st = OS_OK;
    for (int i = 0; i < w->nstart; i++) {
        int t = w->start_ranks[i];
        if (w->tstate[t] == OS_T_PSCW_AWAIT_POST)
            os_pscw_await_post(w, t);
        w->tstate[t] = OS_T_NONE;
        /* Release: every operation of this epoch is complete before the
         * target's MPI_Win_wait can see the count. */
        if (w->peers[t].access == OS_PEER_REMOTE) {
            WAIT_SITE(site, "MPI_Win_complete", t, describe_remote, NULL);
            os_status_t s2 = os_remote_complete(w, t);
            os_wait_pop(&site);
            if (!st)
                st = s2;
        } else {
            /* One writer: this process (the row's reader is t alone). */
            atomic_store_explicit(&w->complete[(size_t)w->node_index[t] * w->complete_stride +
                                               (size_t)w->node_index[w->rank]],
                                  ++w->pscw[t].completes_made, memory_order_release);
        }
    }
    w->nstart = 0;
    w->access = OS_ACCESS_NONE;
    return st;
}

/* Whether every origin of the exposure group has called MPI_Win_complete:
 * node-mates by their cells in this process's row of the complete matrix,
 * read in group order from the first not yet heard (post_next), origins on
 * other nodes by the count they raise (os_win_remote_completes). Acquire: their
 * epochs' operations happen before. */
static bool pscw_all_complete(os_win_t *w)
{
    const _Atomic uint64_t *row = complete_row(w);
    for (; w->post_next < w->post_expect; w->post_next++) {
        const int o = w->post_ranks[w->post_next];
        if (w->peers[o].access != OS_PEER_REMOTE && !complete_heard(w, row, o))
            return false;
    }
    return !w->post_remote ||
           atomic_load_explicit(os_win_remote_completes(w), memory_order_acquire) >=
               (uint64_t)w->post_remote;
}

static os_status_t wait_or_test(os_win_t *w, int *flag, const char *call)
{
    if (w->exposure != OS_EXPOSE_POST)
        return OS_ERR(OS_ERR_SYNC, "%s without a matching MPI_Win_post", call);
    if (flag) {
        if (!(*flag = pscw_all_complete(w)))
            return OS_OK;
    } else if (!pscw_all_complete(w)) {
        WAIT_SITE(site, call, -1, describe_wait, NULL);
        /* Origins of this process's other threads may yet complete. */
        pthread_mutex_t *held = os_wait_release_begin();
        os_backoff_t b = OS_BACKOFF_INIT;
        while (!pscw_all_complete(w))
            os_backoff_wait(&b);
        os_wait_release_end(held);
        os_wait_pop(&site);
    }
    /* An origin's complete for the next epoch needs our next post, so no
     * count runs ahead of what is consumed here. */
    for (int i = 0; i < w->post_expect; i++)
        if (w->peers[w->post_ranks[i]].access != OS_PEER_REMOTE)
            w->pscw[w->post_ranks[i]].completes_seen++;
    if (w->post_remote)
        atomic_fetch_sub_explicit(os_win_remote_completes(w), (uint64_t)w->post_remote,
                                  memory_order_relaxed);
    w->exposure = OS_EXPOSE_NONE;
    return OS_OK;
}

os_status_t os_win_wait(os_win_t *w)
{
    return wait_or_test(w, NULL, "MPI_Win_wait");
}

os_status_t os_win_test(os_win_t *w, int *flag)
{
    return wait_or_test(w, flag, "MPI_Win_test");
}

/* ------------------------------------------------------------ lock/unlock */

/* The rest of take_lock: across nodes the window's lock design; on one
 * node the wait for the turn of the ticket os_lock_take_local drew. */
static __attribute__((noinline)) os_status_t take_lock_wait(os_win_t *w, int target,
                                                            bool exclusive, uint16_t ticket,
                                                            const char *call)
{
    bool contended = false;
    WAIT_SITE(site, call, target, describe_lock, &ticket);
    /* Another thread of this process may hold the lock waited for. */
    pthread_mutex_t *held = os_wait_release_begin();
    if (w->multinode) {
        /* Every target of a window spanning nodes: the window's lock design. */
        os_status_t st = os_remote_lock(w, target, exclusive, &contended);
        os_wait_release_end(held);
        os_wait_pop(&site);
        OS_STAT(w, LOCK_ACQUIRED, 1);
        if (contended)
            OS_STAT(w, LOCK_CONTENDED, 1);
        /* Acquire: the epoch's accesses come after the grant. */
        atomic_thread_fence(memory_order_acquire);
        return st;
    }
    /* The ticket drawn above was not served at once: wait for its turn. */
    os_rank_ctl_t *c = &w->ctl[target];
    if (exclusive) {
        os_lock_wait_excl(&c->lock, ticket, NULL);
        atomic_store_explicit(&c->lock_holder, (uint64_t)w->rank + 1, memory_order_relaxed);
    } else {
        os_lock_wait_shared(&c->lock, ticket, NULL);
    }
    os_wait_release_end(held);
    os_wait_pop(&site);
    OS_STAT(w, LOCK_ACQUIRED, 1);
    OS_STAT(w, LOCK_CONTENDED, 1);
    return OS_OK;
}

/* Take the target's lock for an epoch: at once when it is free (inline, the
 * common case), else by waiting. */
static inline os_status_t take_lock(os_win_t *w, int target, bool exclusive, const char *call)
{
    uint16_t ticket = 0;
    if (w->multinode ? os_remote_lock_now(w, target, exclusive)
                     : os_lock_take_local(w, target, exclusive, &ticket)) {
        OS_STAT(w, LOCK_ACQUIRED, 1);
        return OS_OK;
    }
    return take_lock_wait(w, target, exclusive, ticket, call);
}

/* A window spanning nodes: the lock held as `s` (a tstate) given back where
 * nothing waits for its release; false, nothing done, otherwise. */
static inline bool drop_remote_lock_now(os_win_t *w, int target, uint8_t s)
{
    /* Release: the epoch's operations are visible before the lock is free. */
    atomic_thread_fence(memory_order_release);
    return (s == OS_T_LOCK_EXCL || s == OS_T_LOCK_SHARED) &&
           os_remote_unlock_now(w, target, s == OS_T_LOCK_EXCL);
}

static inline os_status_t drop_lock(os_win_t *w, int target)
{
    uint8_t s = w->tstate[target];
    if (!w->multinode) {
        os_lock_drop_local(w, target, s);
        return OS_OK;
    }
    if (drop_remote_lock_now(w, target, s))
        return OS_OK;
    WAIT_SITE(site, "MPI_Win_unlock", target, describe_remote, NULL);
    os_status_t st = (s & OS_T_LOCK_NOCHECK) ? os_remote_flush(w, target)
                                             : os_remote_unlock(w, target, s == OS_T_LOCK_EXCL);
    os_wait_pop(&site);
    return st;
}

os_status_t os_win_lock(os_win_t *w, int exclusive, int target, int assert)
{
    os_status_t st = check_assert(assert, MPI_MODE_NOCHECK, "MPI_Win_lock");
    if (st)
        return st;
    if (target < 0 || target >= w->nranks)
        return OS_ERR(OS_ERR_RANK, "MPI_Win_lock: rank %d is not in the window's group of %d",
                      target, w->nranks);
    if (w->access == OS_ACCESS_PSCW)
        return OS_ERR(OS_ERR_CONFLICT, "MPI_Win_lock inside a start/complete epoch");
    if (w->access == OS_ACCESS_LOCK_ALL)
        return OS_ERR(OS_ERR_CONFLICT, "MPI_Win_lock while MPI_Win_lock_all is held");
    if (w->access == OS_ACCESS_LOCK && w->tstate[target] != OS_T_NONE)
        return OS_ERR(OS_ERR_SYNC, "MPI_Win_lock of rank %d, which this process already locked",
                      target);
    if ((st = leave_fence(w, "MPI_Win_lock")))
        return st;
    if (!(assert & MPI_MODE_NOCHECK) && (st = take_lock(w, target, exclusive, "MPI_Win_lock")))
        return st;
    os_win_lock_opened(w, exclusive, target, assert);
    return OS_OK;
}

void os_win_lock_queued(os_win_t *w, bool exclusive, int target, uint16_t ticket)
{
    /* One node: the wait cannot fail. */
    (void)take_lock_wait(w, target, exclusive, ticket, "MPI_Win_lock");
    os_win_lock_opened(w, exclusive, target, 0);
}

bool os_win_lock_spanning_now(os_win_t *w, bool exclusive, int target, int assert)
{
    /* MPI_MODE_NOCHECK is rare enough to leave to os_win_lock. */
    if ((assert & MPI_MODE_NOCHECK) || !os_remote_lock_now(w, target, exclusive))
        return false;
    OS_STAT(w, LOCK_ACQUIRED, 1);
    os_win_lock_opened(w, exclusive, target, 0);
    return true;
}

bool os_win_unlock_spanning_now(os_win_t *w, int target)
{
    if (!drop_remote_lock_now(w, target, w->tstate[target]))
        return false;
    os_win_lock_closed(w, target);
    return true;
}

os_status_t os_win_unlock(os_win_t *w, int target)
{
    if (target < 0 || target >= w->nranks)
        return OS_ERR(OS_ERR_RANK, "MPI_Win_unlock: rank %d is not in the window's group of %d",
                      target, w->nranks);
    if (w->access != OS_ACCESS_LOCK || w->tstate[target] == OS_T_NONE)
        return OS_ERR(OS_ERR_SYNC, "MPI_Win_unlock of rank %d, which this process has not locked",
                      target);
    /* Coalesced accumulates complete before the lock is given up. */
    os_status_t st = w->acc_batch ? os_acc_drain(w, target) : OS_OK;
    os_status_t st2 = drop_lock(w, target);
    if (!st)
        st = st2;
    os_win_lock_closed(w, target);
    return st;
}

os_status_t os_win_lock_all(os_win_t *w, int assert)
{
    os_status_t st = check_assert(assert, MPI_MODE_NOCHECK, "MPI_Win_lock_all");
    if (st)
        return st;
    if (w->access == OS_ACCESS_LOCK_ALL)
        return OS_ERR(OS_ERR_SYNC, "MPI_Win_lock_all while MPI_Win_lock_all is already held");
    if (w->access == OS_ACCESS_LOCK || w->access == OS_ACCESS_PSCW)
        return OS_ERR(OS_ERR_CONFLICT, "MPI_Win_lock_all inside a %s epoch",
                      w->access == OS_ACCESS_LOCK ? "lock" : "start/complete");
    if ((st = leave_fence(w, "MPI_Win_lock_all")))
        return st;
    /* Shared locks in rank order: every lock_all takes them in the same order. */
    for (int t = 0; t < w->nranks; t++) {
        if (!(assert & MPI_MODE_NOCHECK) && (st = take_lock(w, t, false, "MPI_Win_lock_all"))) {
            /* Give back what was taken; the epoch does not open. */
            while (--t >= 0) {
                drop_lock(w, t);
                w->tstate[t] = OS_T_NONE;
            }
            return st;
        }
        w->tstate[t] = (uint8_t)(OS_T_LOCK_SHARED | ((assert & MPI_MODE_NOCHECK) ? OS_T_LOCK_NOCHECK : 0));
    }
    w->access = OS_ACCESS_LOCK_ALL;
    OS_STAT(w, LOCK_ALL, 1);
    return OS_OK;
}

os_status_t os_win_unlock_all(os_win_t *w)
{
    if (w->access != OS_ACCESS_LOCK_ALL)
        return OS_ERR(OS_ERR_SYNC, "MPI_Win_unlock_all without MPI_Win_lock_all");
    os_status_t st = os_acc_drain(w, -1);
    for (int t = 0; t < w->nranks; t++) {
        os_status_t s2 = drop_lock(w, t);
        if (!st)
            st = s2;
        w->tstate[t] = OS_T_NONE;
    }
    w->access = OS_ACCESS_NONE;
    return st;
}

/* os_win_flush_done for windows that coalesce accumulates or span nodes:
 * none coalesced for this target, and on another node memory UCX maps here
 * with nothing of this origin's on its way there: no UCX operation to flush
 * (dirty), no request unacknowledged, no lock deferred to an operation. */
bool os_win_flush_done_spanning(os_win_t *w, int target)
{
    if (target < 0 || target >= w->nranks || (w->acc_batch && w->acc_batch[target].n) ||
        !(w->access == OS_ACCESS_LOCK_ALL ||
          (w->access == OS_ACCESS_LOCK && w->tstate[target] != OS_T_NONE)))
        return false;
    if (w->multinode && w->peers[target].access == OS_PEER_REMOTE &&
        (w->dirty[target] || w->lock_how[target] == OS_HOLD_DEFERRED ||
         atomic_load_explicit(&w->acks[target], memory_order_acquire) > 0))
        return false;
    OS_STAT(w, FLUSHES, 1);
    os_flush_barrier(w);
    return true;
}

os_status_t os_win_flush(os_win_t *w, int target, bool all)
{
    if (w->access != OS_ACCESS_LOCK && w->access != OS_ACCESS_LOCK_ALL)
        return OS_ERR(OS_ERR_SYNC, "MPI_Win_flush outside a passive-target epoch");
    if (!all) {
        if (target < 0 || target >= w->nranks)
            return OS_ERR(OS_ERR_RANK, "MPI_Win_flush: rank %d is not in the window's group "
                          "of %d", target, w->nranks);
        if (w->tstate[target] == OS_T_NONE)
            return OS_ERR(OS_ERR_SYNC, "MPI_Win_flush of rank %d, which is not locked", target);
    }
    /* Operations to mapped memory completed when they were issued: with no
     * coalesced accumulates and no other node to wait for, the flush is the
     * memory barrier alone (the common case of one node, kept short). */
    if (!w->acc_batch && !w->multinode) {
        OS_STAT(w, FLUSHES, 1);
        os_flush_barrier(w);
        return OS_OK;
    }
    /* Otherwise complete coalesced accumulates and remote operations too,
     * and order them all before what follows. */
    WAIT_SITE(site, all ? "MPI_Win_flush_all" : "MPI_Win_flush", all ? -1 : target,
              describe_remote, NULL);
    os_status_t st = os_acc_drain(w, all ? -1 : target);
    os_status_t st2 = os_remote_flush(w, all ? -1 : target);
    os_wait_pop(&site);
    if (!st)
        st = st2;
    os_fence_seq_cst();
    OS_STAT(w, FLUSHES, 1);
    return st;
}

os_status_t os_win_sync(os_win_t *w)
{
    /* Not required by MPI (only a flush completes operations), but a program
     * that polls its window after MPI_Win_sync sees its own accumulates, and
     * one that polls for an answer to what it issued under a deferred lock
     * gets it (os_remote_send_kept). */
    os_status_t st = os_acc_drain(w, -1), st2 = os_remote_send_kept(w);
    os_fence_seq_cst();
    return st ? st : st2;
}
