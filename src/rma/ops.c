/* RMA operations: checks, then the data movement. Everything completes
 * before the call returns (memory is mapped or reached by CMA), so flush and
 * unlock need only order memory. */
#include "os_rma.h"

#include <stdlib.h>
#include <string.h>

static const char *const kind_name[] = { "MPI_Put", "MPI_Get", "MPI_Accumulate",
                                         "MPI_Get_accumulate", "MPI_Fetch_and_op",
                                         "MPI_Compare_and_swap" };

/* ----------------------------------------------------------------- checks */

/* Resolve the target address and check that every byte the operation touches
 * lies inside the target's window. */
static os_status_t target_range(os_win_t *w, const os_rma_op_t *op, char **taddr)
{
    const os_peer_t *p = &w->peers[op->target];
    ptrdiff_t lo, hi;
    os_dtype_span(op->ttype, op->tcount, &lo, &hi);
    if (w->flavor == OS_FLAVOR_DYNAMIC) {
        uint64_t addr = (uint64_t)op->tdisp;
        *taddr = (char *)(uintptr_t)addr;
        if (hi == lo)
            return OS_OK;
        /* Another node's region table is not here: that target checks. */
        if (p->access == OS_PEER_REMOTE)
            return OS_OK;
        if ((lo < 0 && (uint64_t)-lo > addr) ||
            !os_dyn_find(w, op->target, addr + (uint64_t)lo, (uint64_t)(hi - lo)))
            return OS_ERR(OS_ERR_RANGE, "%s: target address 0x%lx%+ld..%+ld of rank %d is not "
                          "in memory attached to the dynamic window", kind_name[op->kind],
                          (unsigned long)addr, (long)lo, (long)hi, op->target);
        return OS_OK;
    }
    long long off;
    if (op->tdisp < 0 || __builtin_mul_overflow((long long)op->tdisp, (long long)p->disp_unit, &off))
        return OS_ERR(OS_ERR_RANGE, "%s: target displacement %ld at rank %d is negative or "
                      "overflows", kind_name[op->kind], (long)op->tdisp, op->target);
    *taddr = p->base + off;
    if (hi == lo)
        return OS_OK;
    if (off + lo < 0 || off + hi > (long long)p->size)
        return OS_ERR(OS_ERR_RANGE, "%s: bytes [%lld, %lld) at rank %d lie outside its window "
                      "of %ld bytes (displacement %ld x unit %d)", kind_name[op->kind],
                      off + lo, off + hi, op->target, (long)p->size, (long)op->tdisp,
                      p->disp_unit);
    return OS_OK;
}

static os_status_t check_acc_types(const os_rma_op_t *op)
{
    const os_dtype_t *t = op->ttype;
    const char *name = kind_name[op->kind];
    if (t->size && (t->basic == OS_B_MIXED || t->basic == OS_B_NONE))
        return OS_ERR(OS_ERR_TYPE, "%s: the target datatype mixes element types", name);
    if (op->op != OS_OP_NO_OP && op->otype->size && op->otype->basic != t->basic)
        return OS_ERR(OS_ERR_TYPE, "%s: origin elements (%s) differ from target elements (%s)",
                      name, os_basic_name(op->otype->basic), os_basic_name(t->basic));
    if (op->kind != OS_RMA_ACC && op->rtype->size && op->rtype->basic != t->basic)
        return OS_ERR(OS_ERR_TYPE, "%s: result elements (%s) differ from target elements (%s)",
                      name, os_basic_name(op->rtype->basic), os_basic_name(t->basic));
    /* An accumulate that moves nothing is valid whatever the pairing (MPICH
     * accepts it, and mpi4py probes for Get_accumulate exactly so). */
    if (op->tcount && t->size && !os_op_valid(op->op, t->cls))
        return OS_ERR(OS_ERR_OP, "%s: %s is not defined on %s elements", name,
                      os_op_name(op->op), os_basic_name(t->basic));
    return OS_OK;
}

static os_status_t check_sizes(const os_rma_op_t *op)
{
    size_t tbytes = op->tcount * op->ttype->size;
    const char *name = kind_name[op->kind];
    bool has_origin = op->kind == OS_RMA_PUT || op->kind == OS_RMA_ACC ||
                      ((op->kind == OS_RMA_GET_ACC || op->kind == OS_RMA_FOP) &&
                       op->op != OS_OP_NO_OP) || op->kind == OS_RMA_CAS;
    if (has_origin && op->ocount * op->otype->size > tbytes)
        return OS_ERR(OS_ERR_TRUNCATE, "%s: %zu origin bytes do not fit the %zu target bytes",
                      name, op->ocount * op->otype->size, tbytes);
    if (op->kind == OS_RMA_GET && tbytes > op->ocount * op->otype->size)
        return OS_ERR(OS_ERR_TRUNCATE, "%s: %zu target bytes do not fit the %zu origin bytes",
                      name, tbytes, op->ocount * op->otype->size);
    if ((op->kind == OS_RMA_ACC || op->kind == OS_RMA_GET_ACC) && op->op != OS_OP_NO_OP &&
        op->ocount * op->otype->size != tbytes)
        return OS_ERR(OS_ERR_TYPE, "%s: origin (%zu bytes) and target (%zu bytes) differ",
                      name, op->ocount * op->otype->size, tbytes);
    if ((op->kind == OS_RMA_GET_ACC || op->kind == OS_RMA_FOP || op->kind == OS_RMA_CAS) &&
        tbytes > op->rcount * op->rtype->size)
        return OS_ERR(OS_ERR_TRUNCATE, "%s: %zu target bytes do not fit the %zu result bytes",
                      name, tbytes, op->rcount * op->rtype->size);
    return OS_OK;
}

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
    memcpy(dst, src, len);
    return OS_OK;
}

/* Gathers run pairs into iovec batches for process_vm_{readv,writev}. */
typedef struct {
    pid_t pid;
    bool write;
    size_t n;
    struct iovec local[64], remote[64];
} cma_batch_t;

static os_status_t cma_flush(cma_batch_t *b)
{
    os_status_t st = OS_OK;
    if (b->n)
        st = b->write ? os_cma_write(b->pid, b->local, b->n, b->remote, b->n)
                      : os_cma_read(b->pid, b->local, b->n, b->remote, b->n);
    b->n = 0;
    return st;
}

static os_status_t cma_run(void *ctx, char *remote, char *local, size_t len)
{
    cma_batch_t *b = ctx;
    b->local[b->n] = (struct iovec){ local, len };
    b->remote[b->n] = (struct iovec){ remote, len };
    return ++b->n == 64 ? cma_flush(b) : OS_OK;
}

/* Move data between a target buffer (remote when cma) and a local one. */
static os_status_t move(os_win_t *w, int target, bool to_target, char *taddr,
                        const os_dtype_t *ttype, size_t tcount, const void *laddr,
                        const os_dtype_t *ltype, size_t lcount)
{
    os_cursor_t tc, lc;
    os_cursor_init(&tc, ttype, taddr, tcount);
    os_cursor_init(&lc, ltype, laddr, lcount);
    if (w->peers[target].access == OS_PEER_DIRECT)
        return to_target ? walk_pair(&tc, &lc, copy_run, NULL) : walk_pair(&lc, &tc, copy_run, NULL);
    cma_batch_t b = { .pid = w->peers[target].pid, .write = to_target };
    os_status_t st = walk_pair(&tc, &lc, cma_run, &b);
    if (!st)
        st = cma_flush(&b);
    OS_STAT(w, FALLBACK_CMA, 1);
    return st;
}

/* Contiguous view of `count` elements of t at addr, packing into *tmp if needed. */
static os_status_t packed(const void *addr, const os_dtype_t *t, size_t count, size_t bytes,
                          const char **view, char **tmp)
{
    *tmp = NULL;
    if (t->contig || count * t->size == 0) {
        *view = (const char *)addr + (t->nblocks ? t->blocks[0].disp : 0);
        return OS_OK;
    }
    *tmp = malloc(bytes ? bytes : 1);
    if (!*tmp)
        return OS_ERR(OS_ERR_NOMEM, "packing %zu bytes", bytes);
    os_cursor_t c;
    os_cursor_init(&c, t, addr, count);
    char *p, *out = *tmp;
    size_t n;
    while ((n = os_cursor_next(&c, SIZE_MAX, &p)) && out < *tmp + bytes) {
        if (n > (size_t)(*tmp + bytes - out))
            n = (size_t)(*tmp + bytes - out);
        memcpy(out, p, n);
        out += n;
    }
    *view = *tmp;
    return OS_OK;
}

static void unpack(void *addr, const os_dtype_t *t, size_t count, const char *src, size_t bytes)
{
    os_cursor_t c;
    os_cursor_init(&c, t, addr, count);
    char *p;
    size_t n;
    while (bytes && (n = os_cursor_next(&c, bytes, &p))) {
        memcpy(p, src, n);
        src += n;
        bytes -= n;
    }
}

os_acc_mode_t os_acc_mode(const os_win_t *w, int target, const char *taddr, const os_dtype_t *t)
{
    const os_peer_t *p = &w->peers[target];
    uint8_t s = w->tstate[target] & ~OS_T_LOCK_NOCHECK;
    if (w->access == OS_ACCESS_LOCK && s == OS_T_LOCK_EXCL)
        return OS_ACC_EXCLUSIVE; /* nobody else may touch the target window */
    if (p->acc_mutex_always || p->access != OS_PEER_DIRECT)
        return OS_ACC_MUTEX;
    /* Elements that fit one CPU atomic and are aligned for it, wherever the
     * type puts them; any origin accumulating the same type at the same place
     * makes the same choice, which is what keeps mixed paths out. */
    size_t e = t->basic_size;
    if (!os_reduce_atomic_ok(e, taddr))
        return OS_ACC_MUTEX;
    for (size_t i = 0; i < t->nblocks; i++)
        if ((t->blocks[i].disp | (ptrdiff_t)t->blocks[i].len) & (ptrdiff_t)(e - 1))
            return OS_ACC_MUTEX;
    if (t->extent & (ptrdiff_t)(e - 1))
        return OS_ACC_MUTEX;
    return OS_ACC_ATOMIC;
}

/* Large accumulates on memory whose elements take CPU atomics ("bulk"):
 * one lock-prefixed instruction per element runs near 1 GB/s, while plain
 * vectorized reductions run ten times faster. A bulk accumulate may use plain
 * loads and stores only while no CPU-atomic accumulate can touch the same
 * memory, so the two sides do a Dekker handshake with sequentially consistent
 * accesses: an atomic accumulator raises its own acc_active count and then
 * checks the target's acc_bulk flag; a bulk accumulator raises acc_bulk and
 * then waits until every process's acc_active count is zero. At least one side
 * sees the other's flag, so they never overlap. Bulk accumulates also hold
 * the target's accumulate mutex, which orders them among themselves. */
/* acc_active counts this process's CPU-atomic accumulates in flight: two
 * threads of one process (the application's and the progress thread serving
 * remote origins) may both be inside one. */
bool os_acc_atomic_try_enter(os_win_t *w, int target)
{
    _Atomic uint64_t *mine = &w->ctl[w->rank].acc_active;
    atomic_fetch_add_explicit(mine, 1, memory_order_seq_cst);
    if (!atomic_load_explicit(&w->ctl[target].acc_bulk, memory_order_seq_cst))
        return true;
    atomic_fetch_sub_explicit(mine, 1, memory_order_release);
    return false;
}

void os_acc_atomic_enter(os_win_t *w, int target)
{
    while (!os_acc_atomic_try_enter(w, target)) {
        os_backoff_t b = OS_BACKOFF_INIT;
        while (atomic_load_explicit(&w->ctl[target].acc_bulk, memory_order_acquire))
            os_backoff_wait(&b);
    }
}

void os_acc_atomic_exit(os_win_t *w)
{
    atomic_fetch_sub_explicit(&w->ctl[w->rank].acc_active, 1, memory_order_release);
}

static void acc_bulk_enter(os_win_t *w, int target)
{
    os_lock_acquire_excl(&w->ctl[target].acc_mutex, NULL);
    atomic_store_explicit(&w->ctl[target].acc_bulk, 1, memory_order_seq_cst);
    for (int r = 0; r < w->nranks; r++) {
        os_backoff_t b = OS_BACKOFF_INIT;
        while (atomic_load_explicit(&w->ctl[r].acc_active, memory_order_seq_cst))
            os_backoff_wait(&b);
    }
}

static void acc_bulk_exit(os_win_t *w, int target)
{
    atomic_store_explicit(&w->ctl[target].acc_bulk, 0, memory_order_release);
    os_lock_release_excl(&w->ctl[target].acc_mutex);
}

/* Accumulate, Get_accumulate and Fetch_and_op. */
static os_status_t accumulate(os_win_t *w, const os_rma_op_t *op, char *taddr)
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
    const bool bulk = mode == OS_ACC_ATOMIC && w->cfg.acc_bulk_min > 0 &&
                      bytes >= (size_t)w->cfg.acc_bulk_min;
    bool locked = false, atomic_entered = false, bulk_entered = false;

    if (!bytes)
        return OS_OK;
    if (rop != OS_OP_NO_OP) {
        st = packed(op->origin, op->otype, op->ocount, bytes, &odata, &obuf);
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
        os_lock_acquire_excl(&w->ctl[op->target].acc_mutex, NULL);
        locked = true;
        OS_STAT(w, FALLBACK_ACC_MUTEX, 1);
    } else if (bulk) {
        acc_bulk_enter(w, op->target);
        bulk_entered = true;
    } else if (mode == OS_ACC_ATOMIC) {
        os_acc_atomic_enter(w, op->target);
        atomic_entered = true;
    }

    if (p->access == OS_PEER_DIRECT) {
        /* The runs of the target type, in type-map order. Scattered runs
         * (an indexed type of single elements, as RandomAccess aggregates)
         * mostly miss in this core's cache: prefetching the run a few blocks
         * ahead overlaps those misses instead of taking them one by one. */
        const size_t nblk = tt->contig ? 1 : tt->nblocks, ahead = 8;
        const bool scattered = nblk > ahead;
        size_t pos = 0;
        for (size_t rep = 0; rep < (tt->contig ? 1 : op->tcount); rep++) {
            char *rbase = taddr + (ptrdiff_t)rep * tt->extent;
            for (size_t b = 0; b < nblk; b++) {
                char *run = rbase + tt->blocks[b].disp;
                size_t len = tt->contig ? bytes : tt->blocks[b].len, n = len / esize;
                if (scattered && b + ahead < nblk)
                    __builtin_prefetch(rbase + tt->blocks[b + ahead].disp, 1, 3);
                if (mode == OS_ACC_ATOMIC && !bulk) {
                    os_reduce_atomic(rop, basic, esize, run, odata ? odata + pos : NULL,
                                     fetch ? fdata + pos : NULL, n);
                } else {
                    if (fetch)
                        memcpy(fdata + pos, run, len);
                    if (rop != OS_OP_NO_OP)
                        os_reduce(rop, basic, esize, run, odata + pos, n);
                }
                pos += len;
            }
        }
        if (bulk)
            OS_STAT(w, ACC_BULK_ELEMS, bytes / esize);
        else if (mode == OS_ACC_ATOMIC)
            OS_STAT(w, ACC_ATOMIC_ELEMS, bytes / esize);
        else if (mode == OS_ACC_EXCLUSIVE)
            OS_STAT(w, ACC_EXCL_ELEMS, bytes / esize);
    } else {
        /* Memory reached by CMA: read, combine here, write back, all under
         * the target's accumulate mutex (or an exclusive lock). */
        tbuf = malloc(bytes);
        if (!tbuf) {
            st = OS_ERR(OS_ERR_NOMEM, "accumulate buffer of %zu bytes", bytes);
            goto out;
        }
        st = move(w, op->target, false, taddr, tt, op->tcount, tbuf, os_dtype_byte(), bytes);
        if (st)
            goto out;
        if (fetch)
            memcpy(fdata, tbuf, bytes);
        if (rop != OS_OP_NO_OP) {
            os_reduce(rop, basic, esize, tbuf, odata, bytes / esize);
            st = move(w, op->target, true, taddr, tt, op->tcount, tbuf, os_dtype_byte(), bytes);
        }
    }
out:
    if (locked)
        os_lock_release_excl(&w->ctl[op->target].acc_mutex);
    if (bulk_entered)
        acc_bulk_exit(w, op->target);
    if (atomic_entered)
        os_acc_atomic_exit(w);
    if (!st && fbuf)
        unpack(op->result, op->rtype, op->rcount, fbuf, bytes);
    free(obuf);
    free(fbuf);
    free(tbuf);
    return st;
}

static os_status_t compare_and_swap(os_win_t *w, const os_rma_op_t *op, char *taddr)
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
        os_lock_acquire_excl(&w->ctl[op->target].acc_mutex, NULL);
        OS_STAT(w, FALLBACK_ACC_MUTEX, 1);
    }
    if (p->access == OS_PEER_DIRECT)
        memcpy(old, taddr, e);
    else
        st = os_cma_get(p->pid, old, taddr, e);
    if (!st && !memcmp(old, op->compare, e))
        st = p->access == OS_PEER_DIRECT ? (memcpy(taddr, op->origin, e), OS_OK)
                                         : os_cma_put(p->pid, taddr, op->origin, e);
    if (mode == OS_ACC_MUTEX)
        os_lock_release_excl(&w->ctl[op->target].acc_mutex);
    if (!st)
        memcpy(op->result, old, e);
    return st;
}

bool os_acc_try_apply(os_win_t *w, bool cas, bool fetch, os_op_t op, os_basic_t basic,
                      size_t esize, char *const *addr, const os_run_t *runs, uint32_t nruns,
                      const char *odata, char *fdata, const char *compare)
{
    /* The path a process of this node would take for these elements, so
     * that the request stays atomic with their accumulates. */
    bool mutex = w->peers[w->rank].acc_mutex_always;
    for (uint32_t i = 0; i < nruns && !mutex; i++)
        mutex = !os_reduce_atomic_ok(esize, addr[i]) || (runs[i].len % esize);
    if (mutex ? !os_lock_try_excl(&w->ctl[w->rank].acc_mutex)
              : !os_acc_atomic_try_enter(w, w->rank))
        return false;
    size_t pos = 0;
    for (uint32_t i = 0; i < nruns; pos += runs[i].len, i++) {
        size_t n = runs[i].len / esize;
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
                memcpy(f, addr[i], runs[i].len);
            if (o && op != OS_OP_NO_OP)
                os_reduce(op, basic, esize, addr[i], o, n);
        }
    }
    if (mutex)
        os_lock_release_excl(&w->ctl[w->rank].acc_mutex);
    else
        os_acc_atomic_exit(w);
    return true;
}

os_status_t os_rma_execute(os_win_t *w, const os_rma_op_t *op)
{
    char *taddr = NULL;
    os_status_t st = target_range(w, op, &taddr);
    if (st)
        return st;
    if (w->peers[op->target].access == OS_PEER_REMOTE)
        return os_remote_execute(w, op, taddr);
    switch (op->kind) {
    case OS_RMA_PUT:
        return move(w, op->target, true, taddr, op->ttype, op->tcount, op->origin, op->otype,
                    op->ocount);
    case OS_RMA_GET:
        return move(w, op->target, false, taddr, op->ttype, op->tcount, op->origin, op->otype,
                    op->ocount);
    case OS_RMA_CAS:
        return compare_and_swap(w, op, taddr);
    default:
        return accumulate(w, op, taddr);
    }
}

/* ------------------------------------------------------------------ issue */

static os_status_t enqueue(os_win_t *w, const os_rma_op_t *op)
{
    if (w->nqueue == w->capqueue) {
        size_t cap = w->capqueue ? 2 * w->capqueue : 64;
        os_rma_op_t *q = realloc(w->queue, cap * sizeof *q);
        if (!q)
            return OS_ERR(OS_ERR_NOMEM, "queue of %zu operations", cap);
        w->queue = q;
        w->capqueue = cap;
    }
    /* MPI lets the program free its datatypes before the fence completes. */
    os_dtype_retain(op->otype);
    os_dtype_retain(op->ttype);
    if (op->rtype)
        os_dtype_retain(op->rtype);
    w->queue[w->nqueue++] = *op;
    OS_STAT(w, FALLBACK_FENCE_DEFERRED, 1);
    return OS_OK;
}

static void count_op(os_win_t *w, const os_rma_op_t *op)
{
    size_t bytes = op->tcount * op->ttype->size;
    switch (op->kind) {
    case OS_RMA_PUT: OS_STAT(w, PUT_OPS, 1); OS_STAT(w, PUT_BYTES, bytes); break;
    case OS_RMA_GET: OS_STAT(w, GET_OPS, 1); OS_STAT(w, GET_BYTES, bytes); break;
    case OS_RMA_ACC: OS_STAT(w, ACC_OPS, 1); OS_STAT(w, ACC_BYTES, bytes); break;
    case OS_RMA_GET_ACC: OS_STAT(w, GET_ACC_OPS, 1); OS_STAT(w, GET_ACC_BYTES, bytes); break;
    case OS_RMA_FOP: OS_STAT(w, FOP_OPS, 1); break;
    default: OS_STAT(w, CAS_OPS, 1); break;
    }
    if (op->request)
        OS_STAT(w, REQUEST_OPS, 1);
}

/* An operation with nothing to move: a zero count or a zero-size datatype
 * on any buffer it uses. MPI (and MPICH) make it a no-op whatever the other
 * buffers' datatypes, counts or addresses are: there is nothing to match. */
static bool moves_nothing(const os_rma_op_t *op)
{
    if (!op->tcount || !op->ttype->size)
        return true;
    bool uses_origin = op->kind != OS_RMA_GET && !(op->kind >= OS_RMA_GET_ACC &&
                                                   op->op == OS_OP_NO_OP);
    if (op->kind == OS_RMA_GET || uses_origin)
        if (!op->ocount || !op->otype->size)
            return true;
    if (op->kind >= OS_RMA_GET_ACC && (!op->rcount || !op->rtype || !op->rtype->size))
        return true;
    return false;
}

/* Fast path: one predefined element to memory this process maps, in an
 * epoch that already grants access to the target. It is the common case of
 * fine-grained RMA (RandomAccess updates, counters, queues built on
 * fetch_and_op), and there the general path's datatype walk, packing and
 * per-block decisions cost as much as the memory access. The element takes
 * exactly the path the general code would choose (os_acc_mode), so the two
 * stay atomic with each other. Returns false, having done nothing, for
 * anything it does not handle, every error included: the general path then
 * decides and reports. */
static bool single_element(os_win_t *w, const os_rma_op_t *op)
{
    const os_dtype_t *t = op->ttype;
    const os_peer_t *p = &w->peers[op->target];
    const bool fetch = op->kind >= OS_RMA_GET_ACC, acc = op->kind >= OS_RMA_ACC;
    const size_t e = t->size;
    long long off;

    if (op->tcount != 1 || op->ocount != 1 || op->otype != t || !t->predefined || !e ||
        (fetch && (op->rcount != 1 || op->rtype != t)))
        return false;
    if (p->access != OS_PEER_DIRECT || w->flavor == OS_FLAVOR_DYNAMIC)
        return false;
    switch (w->access) {
    case OS_ACCESS_LOCK_ALL:
        break;
    case OS_ACCESS_LOCK:
        if (w->tstate[op->target] == OS_T_NONE)
            return false;
        break;
    case OS_ACCESS_FENCE:
        if (!w->fence_immediate || op->request)
            return false;
        break;
    case OS_ACCESS_PSCW:
        if (w->tstate[op->target] != OS_T_PSCW_READY || op->request)
            return false;
        break;
    default:
        return false;
    }
    /* Coalesced accumulates to this target run first (same-origin ordering),
     * and forced coalescing queues even what one CPU atomic would do. */
    if (w->acc_batch && (w->acc_batch[op->target].n ||
                         (op->kind == OS_RMA_ACC && w->cfg.acc_coalesce > 0)))
        return false;
    if (op->tdisp < 0 ||
        __builtin_mul_overflow((long long)op->tdisp, (long long)p->disp_unit, &off) ||
        off > (long long)p->size - (long long)e)
        return false;
    char *taddr = p->base + off;
    os_acc_mode_t mode = OS_ACC_ATOMIC;
    if (acc) {
        if (t->basic == OS_B_NONE || !os_op_valid((os_op_t)op->op, (os_class_t)t->cls))
            return false;
        mode = os_acc_mode(w, op->target, taddr, t);
        if (mode == OS_ACC_MUTEX || (w->cfg.acc_bulk_min > 0 && e >= (size_t)w->cfg.acc_bulk_min))
            return false;
    }

    count_op(w, op);
    if (w->access == OS_ACCESS_FENCE)
        w->fence_epoch_ops++;
    const os_op_t rop = (os_op_t)op->op;
    const void *origin = rop == OS_OP_NO_OP && acc ? NULL : op->origin;
    switch (op->kind) {
    case OS_RMA_PUT:
        memcpy(taddr, op->origin, e);
        return true;
    case OS_RMA_GET:
        memcpy((void *)op->origin, taddr, e);
        return true;
    default:
        break;
    }
    if (mode == OS_ACC_ATOMIC) {
        os_acc_atomic_enter(w, op->target);
        if (op->kind == OS_RMA_CAS)
            os_cas_atomic(e, taddr, op->compare, op->origin, op->result);
        else
            os_reduce_atomic(rop, (os_basic_t)t->basic, e, taddr, origin,
                             fetch ? op->result : NULL, 1);
        os_acc_atomic_exit(w);
        OS_STAT(w, ACC_ATOMIC_ELEMS, 1);
        return true;
    }
    /* Exclusive lock: nobody else may touch the target window, so plain
     * loads and stores are atomic enough. */
    if (op->kind == OS_RMA_CAS) {
        char old[64];
        memcpy(old, taddr, e);
        if (!memcmp(old, op->compare, e))
            memcpy(taddr, op->origin, e);
        memcpy(op->result, old, e);
        OS_STAT(w, ACC_EXCL_ELEMS, 1);
        return true;
    }
    if (fetch)
        memcpy(op->result, taddr, e);
    if (origin) {
        os_reduce(rop, (os_basic_t)t->basic, e, taddr, origin, 1);
    }
    OS_STAT(w, ACC_EXCL_ELEMS, 1);
    return true;
}

os_status_t os_rma_issue(os_win_t *w, const os_rma_op_t *op)
{
    if (op->target >= 0 && op->target < w->nranks && single_element(w, op)) {
        OS_STAT(w, FAST_PATH_OPS, 1);
        return OS_OK;
    }

    os_status_t st;
    const char *name = kind_name[op->kind];
    char *taddr;

    if (op->target < 0 || op->target >= w->nranks)
        return OS_ERR(OS_ERR_RANK, "%s: target rank %d is not in the window's group of %d",
                      name, op->target, w->nranks);
    /* Epoch rules still apply to an empty operation (MPICH checks them first). */
    const bool empty = moves_nothing(op);
    if (!empty && op->kind >= OS_RMA_ACC && (st = check_acc_types(op)))
        return st;
    if (!empty && (st = check_sizes(op)))
        return st;

    bool defer = false;
    switch (w->access) {
    case OS_ACCESS_NONE:
        return OS_ERR(OS_ERR_SYNC, "%s to rank %d outside an access epoch", name, op->target);
    case OS_ACCESS_FENCE:
        defer = !w->fence_immediate;
        break;
    case OS_ACCESS_PSCW:
        if (w->tstate[op->target] == OS_T_NONE)
            return OS_ERR(OS_ERR_SYNC, "%s to rank %d, which is not in the MPI_Win_start group",
                          name, op->target);
        if (w->tstate[op->target] == OS_T_PSCW_AWAIT_POST && !empty)
            os_pscw_await_post(w, op->target);
        break;
    case OS_ACCESS_LOCK:
        if (w->tstate[op->target] == OS_T_NONE)
            return OS_ERR(OS_ERR_SYNC, "%s to rank %d, which this process has not locked", name,
                          op->target);
        break;
    case OS_ACCESS_LOCK_ALL:
        break;
    }
    if (op->request && w->access != OS_ACCESS_LOCK && w->access != OS_ACCESS_LOCK_ALL)
        return OS_ERR(OS_ERR_SYNC, "request-based %s outside a passive-target epoch", name);
    if (empty)
        return OS_OK;
    count_op(w, op);
    if (w->access == OS_ACCESS_FENCE)
        w->fence_epoch_ops++;
    if (defer) {
        /* Check the range now, so that the error reaches the erroneous call.
         * Not on dynamic windows: the fence that will run the operation is
         * what orders the target's MPI_Win_attach before it (after
         * MPI_MODE_NOPRECEDE the target may not have attached yet), so
         * the check belongs to the execution, and an error to that fence. */
        if (w->flavor != OS_FLAVOR_DYNAMIC && (st = target_range(w, op, &taddr)))
            return st;
        return enqueue(w, op);
    }
    if (w->acc_batch) {
        if (op->kind == OS_RMA_ACC) {
            if ((st = target_range(w, op, &taddr)))
                return st;
            if (os_acc_coalesce(w, op, taddr, &st))
                return st;
        }
        /* Anything else to this target comes after what is queued for it. */
        if ((st = os_acc_drain(w, op->target)))
            return st;
    }
    return os_rma_execute(w, op);
}
