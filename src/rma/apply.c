/* Applying an operation to memory of this node: copies (mapped memory, or
 * CMA for memory only its owner maps), accumulates along their atomicity
 * paths (CPU atomics, the bulk handshake, the accumulate mutex, plain
 * updates under an exclusive lock) and compare-and-swap. The one owner of
 * these paths: the origin's operations (ops.c), coalesced batches
 * (coalesce.c) and requests other nodes send (net/serve.c) all come
 * here, so that every path on one location makes the same choice. */
#include "os_rma.h"

#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

/* ---------------------------------------------------------- data movement */

/* Pair the runs of two buffers in type-map order. */
typedef os_status_t (*run_fn)(void *ctx, char *a, char *b, size_t len);
static os_status_t walk_pair(os_cursor_t *ca, os_cursor_t *cb, run_fn fn, void *ctx)
{
    char *pa = NULL, *pb = NULL;
    size_t la = 0, lb = 0;
    for (;;) {
        if (!la)
            la = os_cursor_next(ca, SIZE_MAX, &pa);
        if (!lb)
            lb = os_cursor_next(cb, SIZE_MAX, &pb);
        if (!la || !lb)
            return OS_OK;
        size_t n = la < lb ? la : lb;
        os_status_t st = fn(ctx, pa, pb, n);
        if (st)
            return st;
        pa += n;
        pb += n;
        la -= n;
        lb -= n;
    }
}

static os_status_t copy_run(void *ctx, char *dst, char *src, size_t len)
{
    (void)ctx;
    os_copy(dst, src, len);
    return OS_OK;
}

/* Gathers run pairs into iovec batches for process_vm_{readv,writev};
 * runs in the peer's zone mapped here are copied at once instead. The
 * arrays are 32 KB: a batch is set up field by field (cma_batch_init),
 * never by an initializer, which would zero them on every operation. */
typedef struct {
    const os_peer_t *peer;
    bool write;
    bool used;  /* some run went by CMA */
    size_t n;
    struct iovec local[OS_CMA_IOV], remote[OS_CMA_IOV];
} cma_batch_t;

static void cma_batch_init(cma_batch_t *b, const os_peer_t *peer, bool write)
{
    b->peer = peer;
    b->write = write;
    b->used = false;
    b->n = 0;
}

static os_status_t cma_flush(cma_batch_t *b)
{
    os_status_t st = OS_OK;
    if (b->n)
        st = b->write ? os_cma_write(b->peer->pid, b->local, b->n, b->remote, b->n)
                      : os_cma_read(b->peer->pid, b->local, b->n, b->remote, b->n);
    b->n = 0;
    return st;
}

static os_status_t cma_run(void *ctx, char *remote, char *local, size_t len)
{
    cma_batch_t *b = ctx;
    char *here = os_peer_mapped(b->peer, remote, len);
    if (here) {
        os_copy(b->write ? here : local, b->write ? local : here, len);
        return OS_OK;
    }
    b->used = true;
    b->local[b->n] = (struct iovec){ local, len };
    b->remote[b->n] = (struct iovec){ remote, len };
    return ++b->n == OS_CMA_IOV ? cma_flush(b) : OS_OK;
}

/* Moves between target memory and local memory; *cma says whether some
 * run went by CMA (the caller counts the operation once). */
static os_status_t move(os_win_t *w, int target, bool to_target, char *taddr,
                        const os_dtype_t *ttype, size_t tcount, const void *laddr,
                        const os_dtype_t *ltype, size_t lcount, bool *cma)
{
    os_cursor_t tc, lc;
    os_cursor_init(&tc, ttype, taddr, tcount);
    os_cursor_init(&lc, ltype, laddr, lcount);
    if (w->peers[target].access == OS_PEER_DIRECT)
        return to_target ? walk_pair(&tc, &lc, copy_run, NULL) : walk_pair(&lc, &tc, copy_run, NULL);
    cma_batch_t b;
    cma_batch_init(&b, &w->peers[target], to_target);
    os_status_t st = walk_pair(&tc, &lc, cma_run, &b);
    if (!st)
        st = cma_flush(&b);
    *cma |= b.used;
    return st;
}

os_status_t os_apply_move(os_win_t *w, int target, bool to_target, char *taddr,
                        const os_dtype_t *ttype, size_t tcount, const void *laddr,
                        const os_dtype_t *ltype, size_t lcount)
{
    bool cma = false;
    os_status_t st = move(w, target, to_target, taddr, ttype, tcount, laddr, ltype, lcount, &cma);
    if (cma)
        OS_STAT(w, FALLBACK_CMA, 1);
    return st;
}

/* Large accumulates on memory whose elements take CPU atomics ("bulk"):
 * one lock-prefixed instruction per element runs near 1 GB/s, while plain
 * vectorized reductions run ten times faster. The handshake that keeps them
 * apart from CPU-atomic accumulates is described at os_acc_atomic_try_enter
 * (os_rma.h). Bulk accumulates also hold the target's flag (its
 * accumulate mutex on one node, os_acc_flag), which orders them among
 * themselves. */
void os_acc_atomic_wait(os_win_t *w, int target)
{
    while (!os_acc_atomic_try_enter(w, target)) {
        os_backoff_t b = OS_BACKOFF_INIT;
        while (os_acc_bulk_running(w, target))
            os_backoff_wait(&b);
    }
}

void os_acc_mutex_acquire(os_win_t *w, int target, uint64_t how)
{
    os_backoff_t b = OS_BACKOFF_INIT;
    while (!os_acc_mutex_try(w, target, how))
        os_backoff_wait(&b);
}

uint64_t os_acc_flag_acquire(os_win_t *w, int target)
{
    os_backoff_t b = OS_BACKOFF_INIT;
    uint64_t was;
    while (!os_acc_word_take(os_acc_flag(w, target), OS_ACC_HELD_BULK, &was))
        os_backoff_wait(&b);
    return was;
}

bool os_acc_fence_switch(os_win_t *w, int target, uint64_t was)
{
    /* The flag is taken (non-zero): from here every CPU-atomic accumulate
     * that reads it fences. The barrier makes the count of every one that
     * read it zero before visible to the bulk side's read of the counts. */
    _Atomic uint64_t *f = os_acc_flag(w, target);
    if (!os_membarrier()) {
        OS_STAT(w, FALLBACK_ACC_MEMBARRIER, 1);
        atomic_store_explicit(f, was, memory_order_release);
        return false;
    }
    OS_STAT(w, ACC_FENCE_SWITCHES, 1);
    atomic_store_explicit(f, OS_ACC_FENCED | OS_ACC_HELD_BULK, memory_order_relaxed);
    return true;
}

void os_acc_unfence(os_win_t *w, int target)
{
    /* Only from fenced and free: a holder (a bulk accumulate, a switch in
     * progress) keeps it. Safe at any time, since every bulk accumulate
     * decides on the value it took the flag from (os_acc_bulk_enter). */
    uint64_t fenced = OS_ACC_FENCED;
    w->acc_fenced_entries = 0;
    if (atomic_compare_exchange_strong_explicit(os_acc_flag(w, target), &fenced, 0,
                                                memory_order_relaxed, memory_order_relaxed)) {
        OS_STAT(w, ACC_UNFENCED, 1);
        w->acc_unfenced_by_me = true;
        w->acc_fenceless_run = 0;
    }
}

void os_acc_refenced(os_win_t *w)
{
    /* A target this process cleared (any of the window's, counted
     * together) was fenced again: the fenceless entries since measure what
     * clearing saved against the membarrier it cost. */
    w->acc_unfenced_by_me = false;
    if (w->acc_fenceless_run < OS_ACC_REFENCE_SOON)
        w->acc_unfence_after = w->acc_unfence_after < OS_ACC_UNFENCE_MAX / 2
                                   ? 2 * w->acc_unfence_after
                                   : OS_ACC_UNFENCE_MAX;
    else if (w->acc_unfence_after > OS_ACC_UNFENCE_MIN)
        w->acc_unfence_after /= 2;
}

void os_acc_all_quiet_wait(const os_win_t *w)
{
    os_backoff_t b = OS_BACKOFF_INIT;
    while (!os_acc_all_quiet(w))
        os_backoff_wait(&b);
}

/* One run of an accumulate on a CMA peer's private memory, the accumulate
 * mutex held: read, combine, write back. */
static os_status_t acc_run_cma(const os_peer_t *p, char *run, size_t len,
                               os_op_t rop, os_basic_t basic, size_t esize, const char *odata,
                               char *fdata)
{
    char stack[256], *tmp = len <= sizeof stack ? stack : malloc(len);
    os_status_t st;
    if (!tmp)
        return OS_ERR(OS_ERR_NOMEM, "accumulate buffer of %zu bytes", len);
    if (!(st = os_cma_get(p->pid, tmp, run, len))) {
        if (fdata)
            os_copy(fdata, tmp, len);
        if (rop != OS_OP_NO_OP) {
            os_reduce(rop, basic, esize, tmp, odata, len / esize);
            st = os_cma_put(p->pid, run, tmp, len);
        }
    }
    if (tmp != stack)
        free(tmp);
    return st;
}

/* The runs of one accumulate that fall on a CMA peer's private pages (the
 * edges of a heap block whose inside is mapped here), gathered so that
 * they cost two system calls in all instead of two each: a scattered
 * accumulate (RandomAccess's indexed types) touches those pages dozens of
 * times per call. */
typedef struct {
    size_t n, cap, bytes;
    struct { char *remote; size_t len, pos; } *run; /* pos: offset in the packed data */
} cma_runs_t;

static os_status_t cma_runs_add(cma_runs_t *c, char *remote, size_t len, size_t pos)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        void *r = realloc(c->run, cap * sizeof *c->run);
        if (!r)
            return OS_ERR(OS_ERR_NOMEM, "%zu accumulate runs", cap);
        c->run = r;
        c->cap = cap;
    }
    c->run[c->n].remote = remote;
    c->run[c->n].len = len;
    c->run[c->n++].pos = pos;
    c->bytes += len;
    return OS_OK;
}

static int by_remote(const void *a, const void *b)
{
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    return x < y ? -1 : x > y;
}

/* Whether two gathered runs overlap: then each must see the other's update,
 * and they go one by one. */
static bool cma_runs_overlap(const cma_runs_t *c)
{
    if (c->n < 2)
        return false;
    struct { char *remote; size_t len; } *v = malloc(c->n * sizeof *v);
    if (!v)
        return true; /* the slow path needs no memory */
    for (size_t i = 0; i < c->n; i++) {
        v[i].remote = c->run[i].remote;
        v[i].len = c->run[i].len;
    }
    qsort(v, c->n, sizeof *v, by_remote);
    bool overlap = false;
    for (size_t i = 1; i < c->n && !overlap; i++)
        overlap = v[i - 1].remote + v[i - 1].len > v[i].remote;
    free(v);
    return overlap;
}

static os_status_t cma_io(pid_t pid, bool write, struct iovec *local, struct iovec *remote,
                          size_t n)
{
    os_status_t st = OS_OK;
    for (size_t i = 0; i < n && !st; i += OS_CMA_IOV) {
        size_t k = n - i < OS_CMA_IOV ? n - i : OS_CMA_IOV;
        st = write ? os_cma_write(pid, local + i, k, remote + i, k)
                   : os_cma_read(pid, local + i, k, remote + i, k);
    }
    return st;
}

/* Apply the gathered runs, the accumulate mutex held. */
static os_status_t cma_runs_apply(const os_peer_t *p, const cma_runs_t *c,
                                  os_op_t rop, os_basic_t basic, size_t esize, const char *odata,
                                  char *fdata)
{
    os_status_t st = OS_OK;
    if (c->n == 1 || cma_runs_overlap(c)) {
        for (size_t i = 0; i < c->n && !st; i++)
            st = acc_run_cma(p, c->run[i].remote, c->run[i].len, rop, basic, esize,
                             odata ? odata + c->run[i].pos : NULL,
                             fdata ? fdata + c->run[i].pos : NULL);
        return st;
    }
    char *tmp = malloc(c->bytes);
    struct iovec *local = malloc(2 * c->n * sizeof *local), *remote;
    if (!tmp || !local) {
        st = OS_ERR(OS_ERR_NOMEM, "accumulate of %zu runs by CMA", c->n);
        goto out;
    }
    remote = local + c->n;
    size_t off = 0;
    for (size_t i = 0; i < c->n; off += c->run[i].len, i++) {
        local[i] = (struct iovec){ tmp + off, c->run[i].len };
        remote[i] = (struct iovec){ c->run[i].remote, c->run[i].len };
    }
    if ((st = cma_io(p->pid, false, local, remote, c->n)))
        goto out;
    off = 0;
    for (size_t i = 0; i < c->n; off += c->run[i].len, i++) {
        if (fdata)
            os_copy(fdata + c->run[i].pos, tmp + off, c->run[i].len);
        if (rop != OS_OP_NO_OP)
            os_reduce(rop, basic, esize, tmp + off, odata + c->run[i].pos,
                      c->run[i].len / esize);
    }
    if (rop != OS_OP_NO_OP)
        st = cma_io(p->pid, true, local, remote, c->n);
out:
    free(tmp);
    free(local);
    return st;
}

os_status_t os_apply_accumulate(os_win_t *w, const os_rma_op_t *op, char *taddr)
{
    os_status_t st = OS_OK;
    const os_dtype_t *tt = op->ttype;
    const size_t bytes = op->tcount * tt->size, esize = tt->basic_size ? tt->basic_size : 1;
    const bool fetch = op->kind != OS_RMA_ACC;
    const os_op_t rop = (os_op_t)op->op;
    const os_basic_t basic = (os_basic_t)tt->basic;
    const char *odata = NULL;
    char *obuf = NULL, *fbuf = NULL, *tbuf = NULL, *fdata = NULL;
    os_peer_t *p = &w->peers[op->target];
    os_acc_mode_t mode = os_acc_mode(w, op->target, taddr, tt);
    bool bulk = mode == OS_ACC_ATOMIC && os_acc_bulk(w, op->target, bytes);
    bool locked = false, atomic_entered = false, bulk_entered = false;
    cma_runs_t edges = { 0 };

    if (!bytes)
        return OS_OK;
    if (rop != OS_OP_NO_OP) {
        st = os_dtype_view(op->origin, op->otype, op->ocount, bytes, &odata, &obuf);
        if (st)
            goto out;
    }
    if (fetch) {
        if (op->rtype->contig) {
            fdata = (char *)op->result + op->rtype->blocks[0].disp;
        } else {
            fbuf = fdata = malloc(bytes);
            if (!fbuf) {
                st = OS_ERR(OS_ERR_NOMEM, "fetch buffer of %zu bytes", bytes);
                goto out;
            }
        }
    }
    if (obuf || fbuf)
        OS_STAT(w, FALLBACK_PACKED, 1);
    if (mode == OS_ACC_MUTEX) {
        os_acc_mutex_acquire(w, op->target, OS_ACC_HELD);
        locked = true;
        OS_STAT(w, FALLBACK_ACC_MUTEX, 1);
    } else if (bulk && os_acc_bulk_enter(w, op->target)) {
        bulk_entered = true;
    } else if (mode == OS_ACC_ATOMIC) {
        bulk = false; /* where os_acc_bulk_enter could not */
        os_acc_atomic_enter(w, op->target);
        atomic_entered = true;
    }

    if (p->access == OS_PEER_DIRECT) {
        /* The runs of the target type, in type-map order: one call per copy
         * of the type, which prefetches scattered runs (os_reduce_runs). */
        const bool atomic = mode == OS_ACC_ATOMIC && !bulk;
        if (tt->contig) {
            const os_block_t whole = { tt->blocks[0].disp, bytes };
            os_reduce_runs(rop, basic, esize, taddr, &whole, 1, odata, fetch ? fdata : NULL,
                           atomic);
        } else {
            for (size_t rep = 0, pos = 0; rep < op->tcount; rep++, pos += tt->size)
                os_reduce_runs(rop, basic, esize, taddr + (ptrdiff_t)rep * tt->extent,
                               tt->blocks, tt->nblocks, odata ? odata + pos : NULL,
                               fetch ? fdata + pos : NULL, atomic);
        }
    } else if (p->zone_len) {
        /* A CMA peer's zone mapped here (the mutex is held): the runs in
         * place there, the private edges by CMA, gathered and applied after
         * the loop. Scattered runs are prefetched a few blocks ahead. */
        const size_t nblk = tt->contig ? 1 : tt->nblocks, ahead = 8;
        const bool scattered = nblk > ahead;
        size_t pos = 0;
        for (size_t rep = 0; rep < (tt->contig ? 1 : op->tcount); rep++) {
            char *rbase = taddr + (ptrdiff_t)rep * tt->extent;
            for (size_t b = 0; b < nblk; b++) {
                char *run = rbase + tt->blocks[b].disp;
                size_t len = tt->contig ? bytes : tt->blocks[b].len, n = len / esize;
                char *next = scattered && b + ahead < nblk ? rbase + tt->blocks[b + ahead].disp
                                                           : NULL;
                char *here = os_peer_mapped(p, run, len);
                if (!here) {
                    if ((st = cma_runs_add(&edges, run, len, pos)))
                        goto out;
                    pos += len;
                    continue;
                }
                run = here;
                next = next ? os_peer_mapped(p, next, 1) : NULL;
                if (next)
                    __builtin_prefetch(next, 1, 3);
                if (mode == OS_ACC_ATOMIC && !bulk) {
                    os_reduce_atomic(rop, basic, esize, run, odata ? odata + pos : NULL,
                                     fetch ? fdata + pos : NULL, n);
                } else {
                    if (fetch)
                        os_copy(fdata + pos, run, len);
                    if (rop != OS_OP_NO_OP)
                        os_reduce(rop, basic, esize, run, odata + pos, n);
                }
                pos += len;
            }
        }
        if (edges.n) {
            OS_STAT(w, FALLBACK_CMA, 1); /* once for the operation */
            if ((st = cma_runs_apply(p, &edges, rop, basic, esize, odata,
                                     fetch ? fdata : NULL)))
                goto out;
        }
    } else {
        /* Memory reached by CMA: read, combine here, write back, all under
         * the target's accumulate mutex (or an exclusive lock). */
        tbuf = malloc(bytes);
        if (!tbuf) {
            st = OS_ERR(OS_ERR_NOMEM, "accumulate buffer of %zu bytes", bytes);
            goto out;
        }
        bool cma = false; /* one operation, however many system calls */
        st = move(w, op->target, false, taddr, tt, op->tcount, tbuf, os_dtype_byte(), bytes, &cma);
        if (!st && fetch)
            os_copy(fdata, tbuf, bytes);
        if (!st && rop != OS_OP_NO_OP) {
            os_reduce(rop, basic, esize, tbuf, odata, bytes / esize);
            st = move(w, op->target, true, taddr, tt, op->tcount, tbuf, os_dtype_byte(), bytes,
                      &cma);
        }
        if (cma)
            OS_STAT(w, FALLBACK_CMA, 1);
    }
    if (!st && (p->access == OS_PEER_DIRECT || p->zone_len)) {
        if (bulk)
            OS_STAT(w, ACC_BULK_ELEMS, bytes / esize);
        else if (mode == OS_ACC_ATOMIC)
            OS_STAT(w, ACC_ATOMIC_ELEMS, bytes / esize);
        else if (mode == OS_ACC_EXCLUSIVE)
            OS_STAT(w, ACC_EXCL_ELEMS, bytes / esize);
    }
out:
    if (locked)
        os_acc_mutex_release(w, op->target);
    if (bulk_entered)
        os_acc_bulk_exit(w, op->target);
    if (atomic_entered)
        os_acc_atomic_exit(w);
    if (!st && fbuf)
        os_dtype_unpack(op->result, op->rtype, op->rcount, fbuf, bytes);
    free(edges.run);
    free(obuf);
    free(fbuf);
    free(tbuf);
    return st;
}

os_status_t os_apply_cas(os_win_t *w, const os_rma_op_t *op, char *taddr)
{
    os_status_t st = OS_OK;
    const size_t e = op->ttype->size;
    os_peer_t *p = &w->peers[op->target];
    os_acc_mode_t mode = os_acc_mode(w, op->target, taddr, op->ttype);
    char old[64];

    if (mode == OS_ACC_ATOMIC) {
        os_acc_atomic_enter(w, op->target);
        os_cas_atomic(e, taddr, op->compare, op->origin, op->result);
        os_acc_atomic_exit(w);
        OS_STAT(w, ACC_ATOMIC_ELEMS, 1);
        return OS_OK;
    }
    if (mode == OS_ACC_MUTEX) {
        os_acc_mutex_acquire(w, op->target, OS_ACC_HELD);
        OS_STAT(w, FALLBACK_ACC_MUTEX, 1);
    }
    /* Mapped: here, or in the peer's zone mapped here. */
    char *here = p->access == OS_PEER_DIRECT ? taddr : os_peer_mapped(p, taddr, e);
    if (here)
        memcpy(old, here, e);
    else
        st = os_cma_get(p->pid, old, taddr, e);
    if (!st && !memcmp(old, op->compare, e))
        st = here ? (memcpy(here, op->origin, e), OS_OK) : os_cma_put(p->pid, taddr, op->origin, e);
    if (!here)
        OS_STAT(w, FALLBACK_CMA, 1);
    if (mode == OS_ACC_MUTEX)
        os_acc_mutex_release(w, op->target);
    if (!st)
        memcpy(op->result, old, e);
    return st;
}

/* A large served accumulate in bulk, if everything that could change the
 * same elements meanwhile can be excluded without waiting: the node's CPU
 * atomics by the handshake of os_acc_bulk_enter (tried once: a served request
 * must not wait), and on windows with direct accumulates the network
 * atomics as well. Those are excluded only where all of them are emulated
 * by this process's worker (amo_own_worker) and it holds the worker: an
 * atomic that RDMA hardware carries out cannot be held off. True when
 * applied. */
static bool try_apply_bulk(os_win_t *w, int target, bool fetch, os_op_t op, os_basic_t basic,
                           size_t esize, char *const *addr, const os_run_t *runs,
                           uint32_t nruns, const char *odata, char *fdata)
{
    size_t bytes = 0;
    for (uint32_t i = 0; i < nruns; i++)
        bytes += runs[i].len;
    if (!w->served_bulk_min || bytes < w->served_bulk_min)
        return false;
    const bool hold = w->cfg.acc_direct;
    if (hold && (target != w->rank || !w->amo_own_worker || !os_ucx_worker_try_hold()))
        return false;
    bool done = false;
    uint64_t was;
    if (os_acc_word_take(os_acc_flag(w, target), OS_ACC_HELD_BULK, &was) &&
        (!w->acc_fenceless || (was & OS_ACC_FENCED) || os_acc_fence_switch(w, target, was))) {
        if (os_acc_all_quiet(w)) {
            size_t pos = 0;
            for (uint32_t i = 0; i < nruns; pos += runs[i].len, i++) {
                if (fetch)
                    os_copy(fdata + pos, addr[i], runs[i].len);
                if (odata && op != OS_OP_NO_OP)
                    os_reduce(op, basic, esize, addr[i], odata + pos, runs[i].len / esize);
            }
            OS_STAT(w, ACC_BULK_ELEMS, bytes / esize);
            done = true;
        }
        os_acc_bulk_exit(w, target);
    }
    if (hold)
        os_ucx_worker_release();
    return done;
}

bool os_acc_try_apply(os_win_t *w, int target, bool cas, bool fetch, os_op_t op,
                      os_basic_t basic, size_t esize, char *const *addr, const os_run_t *runs,
                      uint32_t nruns, const char *odata, char *fdata, const char *compare)
{
    /* The path a process of this node would take for these elements, so
     * that the request stays atomic with their accumulates. */
    bool mutex = w->peers[target].acc_mutex_always;
    for (uint32_t i = 0; i < nruns && !mutex; i++)
        mutex = !os_reduce_atomic_ok(esize, addr[i]) || (runs[i].len % esize);
    if (!mutex && !cas &&
        try_apply_bulk(w, target, fetch, op, basic, esize, addr, runs, nruns, odata, fdata))
        return true;
    if (mutex ? !os_acc_mutex_try(w, target, OS_ACC_HELD)
              : !os_acc_atomic_try_enter(w, target))
        return false;
    size_t pos = 0;
    for (uint32_t i = 0; i < nruns; pos += runs[i].len, i++) {
        size_t n = runs[i].len / esize;
        /* Scattered runs (an aggregated indexed accumulate) miss in cache:
         * the run a few ahead is prefetched, as os_reduce_runs does. */
        if (i + 16 < nruns)
            __builtin_prefetch(addr[i + 16], 1, 3);
        char *f = fetch ? fdata + pos : NULL;
        const char *o = odata ? odata + pos : NULL;
        if (cas && !mutex) {
            os_cas_atomic(esize, addr[i], compare, o, f);
        } else if (cas) {
            memcpy(f, addr[i], esize);
            if (!memcmp(addr[i], compare, esize))
                memcpy(addr[i], o, esize);
        } else if (!mutex) {
            os_reduce_atomic(op, basic, esize, addr[i], o, f, n);
        } else {
            if (f)
                os_copy(f, addr[i], runs[i].len);
            if (o && op != OS_OP_NO_OP)
                os_reduce(op, basic, esize, addr[i], o, n);
        }
    }
    if (mutex)
        os_acc_mutex_release(w, target);
    else
        os_acc_atomic_exit(w);
    return true;
}

