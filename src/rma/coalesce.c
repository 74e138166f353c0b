/*
 * Automatic coalescing of small accumulates (beyond paper 001's hand-built
 * aggregation). Inside a passive epoch, MPI_Accumulate calls of at most
 * OS_COALESCE_MAX_BYTES to one target are queued with a copy of their data
 * and applied together: at MPI_Win_flush*, unlock, unlock_all, MPI_Win_sync,
 * before any other operation to that target, or when the batch is full.
 *
 * Why it stays exact:
 *  - Completion: MPI completes an accumulate only at flush or unlock, which
 *    drain the batch first; the data is copied, so the origin buffer is free
 *    when the call returns (local completion).
 *  - Ordering: entries are applied in issue order, and any other operation to
 *    the same target drains the batch before it runs, so same-origin ordering
 *    of accumulate operations (MPI's default accumulate_ordering) holds.
 *  - Atomicity: each element takes exactly the path an uncoalesced accumulate
 *    would take (os_acc_mode): CPU atomics stay CPU atomics; mutex-path targets
 *    take the target's accumulate mutex once for the batch instead of once per
 *    call; under an exclusive lock nobody else may touch the window.
 *  - Overlap: every entry of a batch has the same element size and is
 *    naturally aligned, so two elements either coincide or do not overlap.
 *    Under CMA each distinct element is read once into a slot, all entries are
 *    combined into the slots in order, and each slot is written back once.
 *
 * The gain is on paths with a per-call cost: memory reached by CMA (two system
 * calls and the mutex per accumulate become two system calls per 1024
 * elements; a short batch to a target that polls goes to it as node
 * requests instead), and targets on another node (one message per batch). On mapped memory an uncoalesced accumulate is one CPU atomic, so
 * the automatic setting leaves it alone.
 */
#include "os_rma.h"

#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#define OS_COALESCE_MAX_BYTES 64 /* larger accumulates gain nothing from batching */

static bool wanted(const os_win_t *w, const os_rma_op_t *op, const char *taddr,
                   os_acc_mode_t mode)
{
    const os_dtype_t *tt = op->ttype, *ot = op->otype;
    size_t bytes = op->tcount * tt->size, e = tt->basic_size;
    if (w->cfg.acc_coalesce == 0 || op->kind != OS_RMA_ACC || op->op == OS_OP_NO_OP)
        return false;
    if (w->access != OS_ACCESS_LOCK && w->access != OS_ACCESS_LOCK_ALL)
        return false;
    if (!bytes || bytes > OS_COALESCE_MAX_BYTES || !e || !tt->contig || !ot->contig)
        return false;
    /* Another node's dynamic window checks each address itself: errors must
     * reach the erroneous call, so those go one by one. */
    if (w->peers[op->target].access == OS_PEER_REMOTE && w->flavor == OS_FLAVOR_DYNAMIC)
        return false;
    if ((uintptr_t)(taddr + tt->blocks[0].disp) & (e - 1) || (e & (e - 1)))
        return false; /* only naturally aligned power-of-two elements */
    if (w->cfg.acc_coalesce > 0)
        return true;
    /* automatic: where each call pays for system calls or the mutex (the
     * owner of memory others reach by CMA takes the mutex too), or for a
     * request to another node; not where it is one network atomic that
     * needs nothing of the target (a batch would wait for its progress). */
    if (w->peers[op->target].access == OS_PEER_REMOTE)
        return !os_remote_acc_one_sided(w, op, taddr);
    /* Inside a CMA peer's zone mapped here: the mutex and a load and store
     * each, no system call to save. */
    if (os_peer_mapped(&w->peers[op->target], taddr + tt->blocks[0].disp, bytes))
        return false;
    return w->peers[op->target].access != OS_PEER_DIRECT || mode == OS_ACC_MUTEX;
}

static os_status_t grow(void **buf, size_t *cap, size_t need, size_t unit)
{
    if (need <= *cap)
        return OS_OK;
    size_t n = *cap ? 2 * *cap : 64;
    while (n < need)
        n *= 2;
    void *p = realloc(*buf, n * unit);
    if (!p)
        return OS_ERR(OS_ERR_NOMEM, "accumulate batch of %zu entries", n);
    *buf = p;
    *cap = n;
    return OS_OK;
}

bool os_acc_coalesce(os_win_t *w, const os_rma_op_t *op, char *taddr, os_status_t *st)
{
    const os_dtype_t *tt = op->ttype;
    os_acc_mode_t mode = os_acc_mode(w, op->target, taddr, tt);
    os_acc_batch_t *b = &w->acc_batch[op->target];
    size_t bytes = op->tcount * tt->size;

    *st = OS_OK;
    if (!wanted(w, op, taddr, mode))
        return false;
    if (b->n && (b->esize != tt->basic_size || b->mode != mode ||
                 b->n >= (size_t)w->cfg.acc_coalesce_max)) {
        if ((*st = os_acc_drain(w, op->target)))
            return true;
    }
    if ((*st = grow((void **)&b->entries, &b->cap, b->n + 1, sizeof *b->entries)) ||
        (*st = grow((void **)&b->data, &b->dcap, b->dlen + bytes, 1)))
        return true;
    b->esize = tt->basic_size;
    b->mode = (uint8_t)mode;
    b->entries[b->n++] = (os_acc_entry_t){ .taddr = taddr + tt->blocks[0].disp,
                                           .op = op->op, .basic = tt->basic,
                                           .nelems = (uint16_t)(bytes / b->esize),
                                           .data = (uint32_t)b->dlen };
    os_copy(b->data + b->dlen, (const char *)op->origin + op->otype->blocks[0].disp, bytes);
    b->dlen += bytes;
    OS_STAT(w, ACC_COALESCED, 1);
    return true;
}

/* Mapped memory: each element as os_acc_mode says, the mutex once. */
static void apply_direct(os_win_t *w, int target, os_acc_batch_t *b, os_acc_mode_t mode)
{
    const size_t e = b->esize;
    if (mode == OS_ACC_ATOMIC)
        os_acc_atomic_enter(w, target);
    for (size_t i = 0; i < b->n; i++) {
        const os_acc_entry_t *x = &b->entries[i];
        if (mode == OS_ACC_ATOMIC)
            os_reduce_atomic(x->op, x->basic, e, x->taddr, b->data + x->data, NULL, x->nelems);
        else
            os_reduce(x->op, x->basic, e, x->taddr, b->data + x->data, x->nelems);
    }
    if (mode == OS_ACC_ATOMIC) {
        os_acc_atomic_exit(w);
        OS_STAT(w, ACC_ATOMIC_ELEMS, b->dlen / e);
    }
    else if (mode == OS_ACC_EXCLUSIVE)
        OS_STAT(w, ACC_EXCL_ELEMS, b->dlen / e);
}

/* Slot of the element at addr among the first n distinct ones; linear for
 * the short batches of lock/unlock epochs, hashed for long ones. */
static os_status_t find_slot(os_acc_batch_t *b, char *addr, size_t e, size_t *nslots,
                             uint32_t *slot)
{
    uintptr_t s = 0;
    if (b->n <= 16) {
        for (size_t i = 0; i < *nslots && !s; i++)
            if (b->remote[i].iov_base == addr)
                s = i + 1;
    } else {
        s = (uintptr_t)os_hmap_get(&b->slot_of, (uintptr_t)addr);
    }
    if (!s) {
        s = ++*nslots; /* stored +1: the map's empty value is NULL */
        if (b->n > 16) {
            os_status_t st = os_hmap_put(&b->slot_of, (uintptr_t)addr, (void *)s);
            if (st)
                return st;
        }
        b->local[s - 1] = (struct iovec){ b->stage + (s - 1) * e, e };
        b->remote[s - 1] = (struct iovec){ addr, e };
    }
    *slot = (uint32_t)(s - 1);
    return OS_OK;
}

/* Memory reached by CMA: read every distinct element once, combine in issue
 * order, write each back once. */
static os_status_t apply_cma(os_win_t *w, int target, os_acc_batch_t *b)
{
    const size_t e = b->esize, nel = b->dlen / e;
    const pid_t pid = w->peers[target].pid;
    os_status_t st;
    size_t nslots = 0, k = 0;

    if ((st = grow((void **)&b->slot, &b->nscratch, nel, sizeof *b->slot)))
        return st;
    if ((st = grow((void **)&b->local, &b->nlocal, nel, sizeof *b->local)) ||
        (st = grow((void **)&b->remote, &b->nremote, nel, sizeof *b->remote)) ||
        (st = grow((void **)&b->stage, &b->nstage, nel * e, 1)))
        return st;
    for (size_t i = 0; i < b->n; i++)
        for (size_t j = 0; j < b->entries[i].nelems; j++, k++)
            if ((st = find_slot(b, b->entries[i].taddr + j * e, e, &nslots, &b->slot[k])))
                goto out;
    for (size_t i = 0; i < nslots && !st; i += OS_CMA_IOV) {
        size_t n = nslots - i < OS_CMA_IOV ? nslots - i : OS_CMA_IOV;
        st = os_cma_read(pid, b->local + i, n, b->remote + i, n);
    }
    if (st)
        goto out;
    k = 0;
    for (size_t i = 0; i < b->n; i++) {
        const os_acc_entry_t *x = &b->entries[i];
        for (size_t j = 0; j < x->nelems; j++, k++)
            os_reduce(x->op, x->basic, e, b->stage + (size_t)b->slot[k] * e,
                      b->data + x->data + j * e, 1);
    }
    for (size_t i = 0; i < nslots && !st; i += OS_CMA_IOV) {
        size_t n = nslots - i < OS_CMA_IOV ? nslots - i : OS_CMA_IOV;
        st = os_cma_write(pid, b->local + i, n, b->remote + i, n);
    }
    OS_STAT(w, FALLBACK_CMA, 1);
out:
    if (b->n > 16)
        os_hmap_destroy(&b->slot_of);
    return st;
}

static os_status_t drain_one(os_win_t *w, int target)
{
    os_acc_batch_t *b = &w->acc_batch[target];
    os_status_t st = OS_OK;
    if (!b->n)
        return OS_OK;
    if (w->peers[target].access == OS_PEER_REMOTE) {
        /* Another node: one request per run of entries with the same op and
         * type; the target applies them in order, on its own path. */
        st = os_remote_acc_batch(w, target, b);
        OS_STAT(w, ACC_BATCHES, 1);
        b->n = 0;
        b->dlen = 0;
        return st;
    }
    /* A short batch to a node-mate that polls: applied by it as requests
     * (node_request.c), without the mutex held here, which it takes. */
    if (w->nreq.peers) {
        size_t done = os_nreq_acc_batch(w, target, b, &st);
        if (done == b->n || st) {
            OS_STAT(w, ACC_BATCHES, 1);
            b->n = 0;
            b->dlen = 0;
            return st;
        }
        /* What is left follows by CMA, in order (its data stays in place). */
        memmove(b->entries, b->entries + done, (b->n - done) * sizeof *b->entries);
        b->n -= done;
    }
    /* Entries of one batch share their path (a differing one drains first). */
    os_acc_mode_t mode = (os_acc_mode_t)b->mode;
    if (mode == OS_ACC_MUTEX) {
        os_acc_mutex_acquire(w, target, OS_ACC_HELD);
        OS_STAT(w, FALLBACK_ACC_MUTEX, 1);
    }
    if (w->peers[target].access == OS_PEER_DIRECT)
        apply_direct(w, target, b, mode);
    else
        st = apply_cma(w, target, b);
    if (mode == OS_ACC_MUTEX)
        os_acc_mutex_release(w, target);
    OS_STAT(w, ACC_BATCHES, 1);
    b->n = 0;
    b->dlen = 0;
    return st;
}

os_status_t os_acc_drain(os_win_t *w, int target)
{
    if (!w->acc_batch)
        return OS_OK;
    /* Most unlocks and flushes find nothing queued: no call then (the
     * call and drain_one's prologue were 25 instructions of each lock
     * epoch between virtual nodes). */
    if (target >= 0)
        return w->acc_batch[target].n ? drain_one(w, target) : OS_OK;
    os_status_t first = OS_OK;
    for (int t = 0; t < w->nranks; t++) {
        os_status_t st = drain_one(w, t);
        if (st && !first)
            first = st;
    }
    return first;
}

void os_acc_batches_free(os_win_t *w)
{
    if (!w->acc_batch)
        return;
    for (int t = 0; t < w->nranks; t++) {
        os_acc_batch_t *b = &w->acc_batch[t];
        free(b->entries);
        free(b->data);
        free(b->slot);
        free(b->local);
        free(b->remote);
        free(b->stage);
    }
    free(w->acc_batch);
    w->acc_batch = NULL;
}
