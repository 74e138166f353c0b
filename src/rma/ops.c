/* RMA operations: checks, epochs, the single-element fast path, then the
 * data movement (apply.c on this node, or node_request.c when a node-mate
 * that polls applies it; net/ to others). On this node everything completes
 * before the call returns (memory is mapped, reached by CMA, or the request
 * answered), so flush and unlock need only order memory. */
#include "os_rma.h"

#include <limits.h>
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

os_status_t os_rma_execute(os_win_t *w, const os_rma_op_t *op)
{
    char *taddr = NULL;
    os_status_t st = target_range(w, op, &taddr);
    if (st)
        return st;
    w->stores_unordered = true; /* whatever path applies it (os_flush_barrier) */
    if (w->peers[op->target].access == OS_PEER_REMOTE)
        return os_remote_execute(w, op, taddr);
    if (w->nreq.peers && os_nreq_execute(w, op, taddr, &st))
        return st;
    switch (op->kind) {
    case OS_RMA_PUT:
        return os_apply_move(w, op->target, true, taddr, op->ttype, op->tcount, op->origin,
                             op->otype, op->ocount);
    case OS_RMA_GET:
        return os_apply_move(w, op->target, false, taddr, op->ttype, op->tcount, op->origin,
                             op->otype, op->ocount);
    case OS_RMA_CAS:
        return os_apply_cas(w, op, taddr);
    default:
        return os_apply_accumulate(w, op, taddr);
    }
}

/* ------------------------------------------------------- PSCW, lazily */

/* MPI_Win_start does not wait (paper 003): the first operation to a target,
 * or MPI_Win_complete (sync.c), waits here for that target's post. */
int os_win_describe(const os_win_t *w, char *buf, size_t len)
{
    char name[MPI_MAX_OBJECT_NAME] = "";
    int n = 0;
    PMPI_Win_get_name(w->handle, name, &n);
    return snprintf(buf, len, "window %s%s%s(rank %d of %d)", n ? "'" : "", n ? name : "",
                    n ? "' " : "", w->rank, w->nranks);
}

static void describe_post(const os_wait_site_t *s, char *buf, size_t len)
{
    const os_win_t *w = s->obj;
    int n = os_win_describe(w, buf, len);
    snprintf(buf + n, len - (size_t)n, ", waiting for MPI_Win_post by rank %d (%llu posts "
             "seen before, %llu made; %llu seen by its post bit)", s->target,
             (unsigned long long)w->pscw[s->target].posts_seen,
             (unsigned long long)atomic_load(&w->post[(size_t)w->rank * w->post_stride +
                                                       (size_t)s->target]),
             (unsigned long long)w->pscw[s->target].posts_flipped);
}

void os_pscw_await_post(os_win_t *w, int target)
{
    os_pscw_peer_t *p = &w->pscw[target];
    _Atomic uint64_t *cell = &w->post[(size_t)w->rank * w->post_stride + (size_t)target];
    const uint64_t want = p->posts_seen + 1;
    /* A target on another node posts by message (counted in the cell) or,
     * where it maps this process's network words, by flipping its post bit
     * (os_win_post_bits); either may come. A node-mate stores the cell. */
    const _Atomic uint64_t *bits = NULL;
    uint64_t mask = 0, want_bits = 0;
    if (w->peers[target].access == OS_PEER_REMOTE && target < OS_NL_POST_BITS) {
        bits = os_win_post_bits(w, target);
        mask = 1ull << (target % 64);
        want_bits = (p->posts_flipped + 1) & 1 ? mask : 0;
    }
    WAIT_SITE(site, "a MPI_Win_start epoch", target, describe_post, NULL);
    /* The post may come from another thread of this process. Threads of
     * the epoch may wait for one post together: the first consumes it (the
     * others computed `want` before, and find it reached). Acquire: the
     * target's stores to its window happen before our accesses. */
    pthread_mutex_t *held = os_wait_release_begin();
    os_backoff_t b = OS_BACKOFF_INIT;
    bool by_message;
    while (!(by_message = atomic_load_explicit(cell, memory_order_acquire) >= want) &&
           (!bits || (atomic_load_explicit(bits, memory_order_acquire) & mask) != want_bits))
        os_backoff_wait(&b);
    os_wait_release_end(held);
    os_wait_pop(&site);
    if (w->tstate[target] == OS_T_PSCW_AWAIT_POST) {
        if (by_message)
            p->posts_seen++;
        else
            p->posts_flipped++;
        w->tstate[target] = OS_T_PSCW_READY;
    }
}

static void describe_fence_entry(const os_wait_site_t *s, char *buf, size_t len)
{
    const os_win_t *w = s->obj;
    int n = os_win_describe(w, buf, len);
    snprintf(buf + n, len - (size_t)n, ", waiting for rank %d to enter MPI_Win_fence number "
             "%llu (it entered number %llu last)", s->target, (unsigned long long)w->fences,
             (unsigned long long)atomic_load(&w->ctl[s->target].fence_entered));
}

/* After MPI_MODE_NOPRECEDE the fence does not synchronize (paper 003): the
 * first access to each target waits here, as an access after a lazy
 * MPI_Win_start waits for the post, instead of queueing the epoch's
 * operations to the closing fence. Fences are collective, so the target's
 * count of them equals this process's when it enters the same one. */
void os_fence_await_entry_slow(os_win_t *w, int target)
{
    _Atomic uint64_t *entered = &w->ctl[target].fence_entered;
    if (atomic_load_explicit(entered, memory_order_acquire) < w->fences) {
        WAIT_SITE(site, "a MPI_Win_fence(MPI_MODE_NOPRECEDE) epoch", target,
                  describe_fence_entry, NULL);
        pthread_mutex_t *held = os_wait_release_begin();
        os_wait_until_geq(entered, w->fences);
        os_wait_release_end(held);
        os_wait_pop(&site);
    }
    w->fence_seen[target] = w->fences;
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

/* Per kind (os_rma_kind_t): its count of calls and of bytes (-1: none). */
static const int8_t ops_stat[] = {
    ONESIDED_STAT_PUT_OPS, ONESIDED_STAT_GET_OPS, ONESIDED_STAT_ACC_OPS,
    ONESIDED_STAT_GET_ACC_OPS, ONESIDED_STAT_FOP_OPS, ONESIDED_STAT_CAS_OPS,
};
static const int8_t bytes_stat[] = {
    ONESIDED_STAT_PUT_BYTES, ONESIDED_STAT_GET_BYTES, ONESIDED_STAT_ACC_BYTES,
    ONESIDED_STAT_GET_ACC_BYTES, -1, -1,
};

static inline __attribute__((always_inline)) void count_kind(os_win_t *w, os_rma_kind_t kind,
                                                           size_t bytes, bool request)
{
    w->stats.counter[ops_stat[kind]]++;
    if (bytes_stat[kind] >= 0)
        w->stats.counter[bytes_stat[kind]] += bytes;
    if (request)
        OS_STAT(w, REQUEST_OPS, 1);
}

static void count_op(os_win_t *w, const os_rma_op_t *op)
{
    count_kind(w, (os_rma_kind_t)op->kind, op->tcount * op->ttype->size, op->request);
}

uint64_t os_win_ops_issued(const os_win_t *w)
{
    uint64_t n = 0;
    for (size_t k = 0; k < sizeof ops_stat / sizeof ops_stat[0]; k++)
        n += w->stats.counter[ops_stat[k]];
    return n;
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

/* One element: a constant size is one move, where memcpy of a size known
 * only at run time is a call. */
static inline __attribute__((always_inline)) void copy_element(void *dst, const void *src,
                                                               size_t e)
{
    switch (e) {
    case 1: memcpy(dst, src, 1); break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    case 8: memcpy(dst, src, 8); break;
    default: memcpy(dst, src, e); break;
    }
}

/* Up to how many bytes a get's copy into the origin's buffer (os_copy)
 * makes only stores that x86 keeps in order with every later store, so
 * that, as for one element, the flush needs no barrier for it
 * (os_flush_barrier): plain moves, or a string move, whose stores Intel
 * orders before a later flag's store (SDM vol. 3, "out-of-order stores for
 * string operations"). What is not ordered are non-temporal stores, and
 * glibc's memcpy takes them only from its non-temporal threshold, which its
 * tunable cannot set below 16448 bytes; os_copy's own loop starts above
 * 2048. A 64-byte get + flush that fenced took 0.88-0.98x osc/sm's time
 * (Open MPI 5.0.11, rma_sweep, 6 jobs), 0.83-0.86x without (3 jobs), one
 * element's 0.70x. */
#define GET_ORDERED_MAX 2048

/* The commonest single-element atomics, on 64-bit integers (counters,
 * RandomAccess, queues), inline: the same instructions os_reduce_atomic
 * would choose, without its dispatch on size, type and op. False for
 * anything else. The target is aligned (os_acc_mode said atomic). */
OS_HOT bool atomic_word(os_op_t op, os_basic_t basic, char *taddr, const void *origin,
                        void *fetch)
{
    uint64_t v = 0, old;
    if (basic != OS_B_INT64 && basic != OS_B_UINT64)
        return false;
    if (origin)
        memcpy(&v, origin, sizeof v);
    uint64_t *t = (uint64_t *)(void *)taddr;
    switch (op) {
    case OS_OP_SUM: old = __atomic_fetch_add(t, v, __ATOMIC_ACQ_REL); break;
    case OS_OP_REPLACE: old = __atomic_exchange_n(t, v, __ATOMIC_ACQ_REL); break;
    case OS_OP_NO_OP: old = __atomic_load_n(t, __ATOMIC_ACQUIRE); break;
    default: return false;
    }
    if (fetch)
        memcpy(fetch, &old, sizeof old);
    return true;
}

/* The fast paths' last checks: the target's byte offset for `bytes` at
 * `tdisp`, false where it falls outside the window (the general path
 * reports it) or where coalesced accumulates to this target must run first
 * (same-origin ordering; forced coalescing queues even what one CPU atomic
 * would do). */
static inline __attribute__((always_inline)) bool
fast_target_offset(const os_win_t *w, const os_peer_t *p, os_rma_kind_t kind, int target,
                   MPI_Aint tdisp, size_t bytes, long long *off)
{
    if (w->acc_batch && (w->acc_batch[target].n ||
                         (kind == OS_RMA_ACC && w->cfg.acc_coalesce > 0)))
        return false;
    return tdisp >= 0 &&
           !__builtin_mul_overflow((long long)tdisp, (long long)p->disp_unit, off) &&
           *off <= (long long)p->size - (long long)bytes;
}

/* Where a bulk accumulate could not make CPU-atomic accumulates fence
 * (os_acc_bulk_enter false: the membarrier failed): one atomic per
 * element, as below the bulk threshold. */
static __attribute__((noinline, cold)) void
acc_atomic_contig(os_win_t *w, int target, os_op_t rop, const os_dtype_t *t, size_t count,
                  char *taddr, const void *origin, void *fetch)
{
    os_acc_atomic_enter(w, target);
    os_reduce_atomic(origin ? rop : OS_OP_NO_OP, (os_basic_t)t->basic, t->basic_size, taddr,
                     origin, fetch, count);
    os_acc_atomic_exit(w);
    OS_STAT(w, ACC_ATOMIC_ELEMS, count);
}

/* A bulk accumulate of count contiguous elements at taddr (the fast
 * paths': this node's memory, or another virtual node's that UCX maps
 * here): the handshake holds off CPU atomics, then plain reductions, whose
 * stores the next flush orders. origin NULL: no reduction (NO_OP). */
static void acc_bulk_contig(os_win_t *w, int target, os_op_t rop, const os_dtype_t *t,
                            size_t count, char *taddr, const void *origin, void *fetch)
{
    const size_t e = t->basic_size;
    os_reduce_fn loop = origin ? os_reduce_loop(rop, (os_basic_t)t->basic, e) : NULL;
    if (!os_acc_bulk_enter(w, target)) {
        acc_atomic_contig(w, target, rop, t, count, taddr, origin, fetch);
        return;
    }
    w->stores_unordered = true;
    if (fetch)
        os_copy(fetch, taddr, count * e);
    if (loop)
        loop(taddr, origin, count);
    else if (origin)
        os_reduce(rop, (os_basic_t)t->basic, e, taddr, origin, count);
    os_acc_bulk_exit(w, target);
    OS_STAT(w, ACC_BULK_ELEMS, count);
}

/* What the epoch asks of a fast-path operation to target before it touches
 * the memory, for both fast paths: whether the epoch grants access to it
 * now (FAST_NOW), after the target's post (the PSCW epoch's first
 * operation to it) or after the target entered the fence that opened the
 * epoch (MPI_MODE_NOPRECEDE: fence_lazy, on windows of one node only), or
 * not on the fast path (FAST_NO): fence epochs that queue their operations
 * to the closing fence, a lock the manager design defers to the unlock
 * (mapped memory only), and R* requests outside lock epochs. */
typedef enum { FAST_NO, FAST_NOW, FAST_AWAIT_POST, FAST_AWAIT_FENCE_ENTRY } fast_epoch_t;

static inline __attribute__((always_inline)) fast_epoch_t
fast_epoch(const os_win_t *w, int target, bool request)
{
    uint8_t s;
    switch (w->access) {
    case OS_ACCESS_LOCK_ALL:
        return FAST_NOW;
    case OS_ACCESS_LOCK:
        return w->tstate[target] != OS_T_NONE ? FAST_NOW : FAST_NO;
    case OS_ACCESS_FENCE:
        if (request)
            return FAST_NO;
        if (w->fence_immediate)
            return FAST_NOW;
        return w->fence_lazy ? FAST_AWAIT_FENCE_ENTRY : FAST_NO;
    case OS_ACCESS_PSCW:
        s = w->tstate[target];
        if (request)
            return FAST_NO;
        if (s == OS_T_PSCW_READY)
            return FAST_NOW;
        return s == OS_T_PSCW_AWAIT_POST ? FAST_AWAIT_POST : FAST_NO;
    default:
        return FAST_NO;
    }
}

/* Past every check of a fast-path operation, as the general path waits
 * (an erroneous call reports without waiting): the wait fast_epoch asked
 * for, whose acquire orders the accesses after, and the count of the
 * operation. */
static inline __attribute__((always_inline)) void
fast_begin(os_win_t *w, fast_epoch_t how, int target, os_rma_kind_t kind, size_t bytes,
           bool request)
{
    if (how == FAST_AWAIT_POST)
        os_pscw_await_post(w, target);
    else if (how == FAST_AWAIT_FENCE_ENTRY)
        os_fence_await_entry(w, target);
    count_kind(w, kind, bytes, request);
    OS_STAT(w, FAST_PATH_OPS, 1);
}

/* The leaves below (os_rma_fast_word, _elem, _run, _acc) take the node's
 * memory in every epoch that grants access to the target now (fast_epoch's
 * FAST_NOW): a lock or lock_all epoch, a fence epoch begun by a
 * synchronizing fence, a PSCW epoch after the target's post. Until stop 80
 * they took lock and lock_all epochs alone, and in the others every
 * operation went to os_rma_fast after the leaf's checks had failed: an
 * 8-byte put in a fence epoch ran 233 instructions where one in a lock_all
 * epoch ran 147 (callgrind, Open MPI 5.0.11, MPI_Put alone), and bursts of
 * 8- and 64-byte accumulates and of fetch_and_ops in fence epochs took
 * 1.10-1.17x osc/sm's time (rma_sweep, medians of 8 jobs). Memory UCX
 * maps here they take in the same epochs (mapped_elem, and the word and
 * bulk accumulate leaves themselves); an operation that must first wait
 * (a PSCW epoch's first to its target) goes through os_rma_fast, whose
 * mapped_fast takes one element in lock and lock_all epochs only
 * (passive_epoch) and mapped_move the rest, waits included. Until stop 87
 * the leaves, too, left mapped memory outside lock and lock_all epochs to
 * os_rma_fast: between virtual nodes a burst of 8-byte accumulates in a
 * fence epoch took 24 ns each against 15 in a lock_all epoch (0.85x
 * osc/sm's rate, Open MPI 5.0.11). */
static inline __attribute__((always_inline)) bool passive_epoch(const os_win_t *w)
{
    return w->access == OS_ACCESS_LOCK_ALL || w->access == OS_ACCESS_LOCK;
}

/* Where this process reaches target's memory at tdisp through UCX's mapping
 * of it, for the mapped path in an epoch that grants access to it (how):
 * NULL when the fast path does not take the operation. An R* request is
 * taken in a lock or lock_all epoch (fast_epoch): the copy or atomic is
 * complete at return, as the node path's is, so its request is one
 * completed at once. */
static inline __attribute__((always_inline)) char *
mapped_target(const os_win_t *w, os_rma_kind_t kind, int target, MPI_Aint tdisp, size_t bytes,
              bool request, fast_epoch_t *how)
{
    const os_peer_t *p = &w->peers[target];
    long long off;
    if (w->lock_how[target] == OS_HOLD_DEFERRED)
        return NULL;
    *how = fast_epoch(w, target, request);
    if (*how == FAST_NO || !fast_target_offset(w, p, kind, target, tdisp, bytes, &off))
        return NULL;
    return p->ucx_map + off;
}

/* Where this process applies an accumulate-kind call itself, with its CPU
 * atomics, on target's memory that UCX maps here (mapped_target's answer),
 * or NULL: on a window with direct accumulates, into memory without the
 * accumulate mutex, and none of this origin's accumulates still on their
 * way as requests, which must apply first (same-origin ordering). The
 * checks of mapped_acc and of the two accumulate leaves, which add their
 * own (the element's alignment; the leaves take only how == FAST_NOW). */
static inline __attribute__((always_inline)) char *
mapped_acc_target(const os_win_t *w, os_rma_kind_t kind, int target, MPI_Aint tdisp,
                  size_t bytes, bool request, fast_epoch_t *how)
{
    const os_peer_t *p = &w->peers[target];
    if (!p->ucx_map || !w->cfg.acc_direct || p->acc_mutex_always ||
        atomic_load_explicit(&w->acks[target], memory_order_acquire) > 0)
        return NULL;
    return mapped_target(w, kind, target, tdisp, bytes, request, how);
}

/* Accumulates of the mapped path (puts and gets: mapped_fast), where
 * mapped_acc_target allows. They are this CPU's atomics, as the network path's would be (direct_acc,
 * acc_in_place), in bulk or inside the handshake where every process
 * joined it (acc_host: net/window.c). Same arguments and contract as
 * mapped_fast. */
static __attribute__((noinline)) bool
mapped_acc(os_win_t *w, os_rma_kind_t kind, os_op_t rop, const os_dtype_t *t, size_t count,
           int target, MPI_Aint tdisp, const void *origin, const void *compare, void *result,
           bool request)
{
    const bool fetch = kind >= OS_RMA_GET_ACC;
    const size_t e = t->basic_size, bytes = count * e; /* os_rma_fast checked it */
    fast_epoch_t how;
    char *local = mapped_acc_target(w, kind, target, tdisp, bytes, request, &how);
    if (!local || t->basic == OS_B_NONE || !os_op_valid(rop, (os_class_t)t->cls) ||
        !os_reduce_atomic_ok(e, local))
        return false;

    fast_begin(w, how, target, kind, bytes, request);
    if (rop == OS_OP_NO_OP)
        origin = NULL;
    OS_STAT(w, ACC_MAPPED, 1);
    if (kind != OS_RMA_CAS && os_acc_bulk(w, target, bytes)) {
        /* Every process joined the handshake (acc_host): in bulk, as the
         * target's node does. */
        acc_bulk_contig(w, target, rop, t, count, local, origin, fetch ? result : NULL);
        return true;
    }
    /* Under acc_host inside the handshake, which bulk accumulates of any
     * node may hold; otherwise none runs on the window. */
    if (w->acc_host)
        os_acc_atomic_enter(w, target);
    if (kind == OS_RMA_CAS)
        os_cas_atomic(e, local, compare, origin, result);
    else if (count > 1 ||
             !atomic_word(rop, (os_basic_t)t->basic, local, origin, fetch ? result : NULL))
        os_reduce_atomic(rop, (os_basic_t)t->basic, e, local, origin, fetch ? result : NULL,
                         count);
    if (w->acc_host)
        os_acc_atomic_exit(w);
    /* Every update of the target was a locked instruction after every
     * earlier store (os_flush_barrier), as on the node path; a NO_OP
     * fetch is a plain load, which drains nothing. */
    if (rop != OS_OP_NO_OP || kind == OS_RMA_CAS)
        w->stores_unordered = false;
    if (count == 1)
        OS_STAT(w, ACC_DIRECT, 1);
    return true;
}

/* os_rma_fast's puts and gets for another node's memory that UCX maps here
 * (another virtual node of this host, ucp_rkey_ptr), kept out of the node
 * path so that path stays as short as it was; mapped_acc takes the
 * accumulates. They take os_rma_fast's arguments, so that each call is a
 * jump (count in basic elements for an accumulate of a derived type).
 * Puts and gets copy the memory as the network path would (rdma() in
 * net/origin.c), in every epoch that grants access to the target now:
 * lock and lock_all epochs whose lock is held (not one the manager design
 * defers to the unlock), fence epochs begun by a synchronizing fence
 * (between nodes the others queue their operations to the next fence:
 * sync.c), and PSCW epochs, after the target's post. What ends the epoch
 * needs nothing more of them than of rdma()'s copies: they are complete at
 * return, the release below orders them before the unlock, complete or
 * fence. The general path cost 45 ns per 8-byte put in a burst between
 * virtual nodes inside a fence or PSCW epoch, 11 in a lock_all epoch, where
 * Open MPI 5.0.11's osc/sm takes 17 (rma_sweep). Same contract as
 * os_rma_fast: false, having done nothing, for anything it does not take.
 * mapped_move takes what mapped_fast, the one-element lane, leaves. */
static __attribute__((noinline)) bool
mapped_move(os_win_t *w, os_rma_kind_t kind, os_op_t rop, const os_dtype_t *t, size_t count,
            int target, MPI_Aint tdisp, const void *origin, const void *compare, void *result,
            bool request)
{
    (void)rop, (void)compare, (void)result;
    const size_t bytes = count * t->size; /* os_rma_fast checked it */
    fast_epoch_t how;
    char *local = mapped_target(w, kind, target, tdisp, bytes, request, &how);
    if (!local)
        return false;

    fast_begin(w, how, target, kind, bytes, request);
    /* Ordered as rdma() orders them: the epoch's lock came before the get's
     * loads, the put's stores come before what ends the epoch. */
    if (kind == OS_RMA_PUT) {
        w->stores_unordered = true;
        os_copy(local, origin, bytes);
        atomic_thread_fence(memory_order_release);
    } else {
        if (bytes > GET_ORDERED_MAX)
            w->stores_unordered = true;
        atomic_thread_fence(memory_order_acquire);
        os_copy((void *)origin, local, bytes);
    }
    OS_STAT(w, REMOTE_MAPPED, 1);
    OS_STAT(w, REMOTE_RDMA, 1);
    return true;
}

/* The copy of one element of a predefined type of at most 8 bytes at
 * local, UCX's mapping of the target's memory, in an epoch that grants the
 * access now: plain stores the next flush must order (os_flush_barrier),
 * as on the node path; a put's, not a get's. */
static inline __attribute__((always_inline)) bool
mapped_element(os_win_t *w, os_rma_kind_t kind, size_t e, char *local, const void *origin,
               bool request)
{
    count_kind(w, kind, e, request);
    OS_STAT(w, FAST_PATH_OPS, 1);
    if (kind == OS_RMA_PUT) {
        w->stores_unordered = true;
        copy_element(local, origin, e);
        atomic_thread_fence(memory_order_release);
    } else {
        atomic_thread_fence(memory_order_acquire);
        copy_element((void *)origin, local, e);
    }
    OS_STAT(w, REMOTE_MAPPED, 1);
    OS_STAT(w, REMOTE_RDMA, 1);
    return true;
}

/* One element of a predefined type of at most 8 bytes in a lock or
 * lock_all epoch: mapped_move's commonest case, as a leaf that saves two
 * registers where mapped_move saves six (about 1 ns of an 8-byte put +
 * flush between virtual nodes, Open MPI 5.0.11, os_microbench). */
static __attribute__((noinline)) bool
mapped_fast(os_win_t *w, os_rma_kind_t kind, os_op_t rop, const os_dtype_t *t, size_t count,
            int target, MPI_Aint tdisp, const void *origin, const void *compare, void *result,
            bool request)
{
    const size_t e = t->size;
    fast_epoch_t how;
    char *local;
    if (count != 1 || !t->predefined || e > 8 || (e & (e - 1)) ||
        (w->access != OS_ACCESS_LOCK_ALL && w->access != OS_ACCESS_LOCK) ||
        !(local = mapped_target(w, kind, target, tdisp, e, request, &how)))
        return mapped_move(w, kind, rop, t, count, target, tdisp, origin, compare, result,
                           request);
    return mapped_element(w, kind, e, local, origin, request);
}

/* mapped_fast for os_rma_fast_elem, which made the element's and the
 * epoch's checks: only the target's. An 8-byte put through mapped_fast
 * spent 83 instructions there, 11 of them on those checks again (an
 * exclusive lock, the put and the unlock between virtual nodes took 451
 * against osc/sm's 409, callgrind, Open MPI 5.0.11). False where
 * mapped_target refuses, as mapped_move then would. */
static __attribute__((noinline)) bool
mapped_elem(os_win_t *w, os_rma_kind_t kind, const os_dtype_t *t, int target, MPI_Aint tdisp,
            const void *origin, bool request)
{
    fast_epoch_t how;
    char *local = mapped_target(w, kind, target, tdisp, t->size, request, &how);
    return local && how == FAST_NOW && mapped_element(w, kind, t->size, local, origin, request);
}

/* Fast path: count elements of one predefined type (or of a derived type
 * that is one contiguous run of them), contiguous at the origin, the target
 * and (fetching kinds) the result, to memory this process maps, in an
 * epoch that already grants access to the target. It
 * is the common case of fine-grained RMA (RandomAccess updates, counters,
 * queues built on fetch_and_op, halo rows and vectors of doubles), and
 * there the general path's operation record, datatype walk and per-block
 * decisions cost as much as the memory access. Accumulates take exactly
 * the path the general code would choose (os_acc_mode, and the bulk
 * handshake from os_win_t.acc_bulk_bytes), so the two stay atomic with each
 * other. Returns false, having done nothing, for anything it does
 * not handle, every error included: the general path then decides and
 * reports. */
bool os_rma_fast(os_win_t *w, os_rma_kind_t kind, os_op_t rop, const os_dtype_t *t,
                 size_t count, int target, MPI_Aint tdisp, const void *origin,
                 const void *compare, void *result, bool request)
{
    const bool fetch = kind >= OS_RMA_GET_ACC, acc = kind >= OS_RMA_ACC;
    size_t e = t->size, bytes;
    long long off;

    if (!t->predefined) {
        /* A derived type whose copies form one run from the buffer address
         * (MPI_Type_contiguous of a predefined type, a halo's ghost cell)
         * is that run: a put or get copies it, an accumulate treats it as
         * its basic elements, the choice the general path makes for them
         * (os_acc_mode: aligned for the first, aligned for all). Fetch_and_op
         * and compare_and_swap take predefined types only; the general path
         * reports it. */
        if (!t->contig || t->true_lb != 0 || kind == OS_RMA_FOP || kind == OS_RMA_CAS)
            return false;
        if (acc) {
            e = t->basic_size;
            if (t->basic == OS_B_MIXED || !e || t->size % e ||
                __builtin_mul_overflow(count, t->size / e, &count))
                return false;
        }
    } else if (t->basic_size != e) {
        return false;
    }
    if (target < 0 || target >= w->nranks || !e || !count ||
        __builtin_mul_overflow(count, e, &bytes) || bytes > (size_t)LLONG_MAX)
        return false;
    const os_peer_t *p = &w->peers[target];
    if (p->access != OS_PEER_DIRECT || w->flavor == OS_FLAVOR_DYNAMIC) {
        if (p->access != OS_PEER_REMOTE || !p->ucx_map || w->flavor == OS_FLAVOR_DYNAMIC)
            return false;
        if (acc)
            return mapped_acc(w, kind, rop, t, count, target, tdisp, origin, compare, result,
                              request);
        return mapped_fast(w, kind, rop, t, count, target, tdisp, origin, compare, result,
                           request);
    }
    fast_epoch_t how = fast_epoch(w, target, request);
    if (how == FAST_NO)
        return false;
    if (!fast_target_offset(w, p, kind, target, tdisp, bytes, &off))
        return false;
    char *taddr = p->base + off;
    os_acc_mode_t mode = OS_ACC_ATOMIC;
    if (acc) {
        if (t->basic == OS_B_NONE || !os_op_valid(rop, (os_class_t)t->cls))
            return false;
        mode = os_acc_mode(w, target, taddr, t);
        if (mode == OS_ACC_MUTEX)
            return false;
    }

    fast_begin(w, how, target, kind, bytes, request);
    /* Plain stores the next flush must order (os_flush_barrier): all but
     * a get's move of up to GET_ORDERED_MAX bytes and the element atomics
     * below. */
    switch (kind) {
    case OS_RMA_PUT:
        w->stores_unordered = true;
        if (count == 1 && t->predefined)
            copy_element(taddr, origin, e);
        else
            os_copy(taddr, origin, bytes);
        return true;
    case OS_RMA_GET:
        if (count == 1 && t->predefined) {
            copy_element((void *)origin, taddr, e);
        } else {
            if (bytes > GET_ORDERED_MAX)
                w->stores_unordered = true;
            os_copy((void *)origin, taddr, bytes);
        }
        return true;
    default:
        break;
    }
    if (rop == OS_OP_NO_OP)
        origin = NULL;
    if (mode == OS_ACC_ATOMIC && kind != OS_RMA_CAS && os_acc_bulk(w, target, bytes)) {
        acc_bulk_contig(w, target, rop, t, count, taddr, origin, fetch ? result : NULL);
        return true;
    }
    if (mode == OS_ACC_ATOMIC) {
        os_acc_atomic_enter(w, target);
        if (kind == OS_RMA_CAS)
            os_cas_atomic(e, taddr, compare, origin, result);
        else if (count > 1 ||
                 !atomic_word(rop, (os_basic_t)t->basic, taddr, origin, fetch ? result : NULL))
            os_reduce_atomic(rop, (os_basic_t)t->basic, e, taddr, origin,
                             fetch ? result : NULL, count);
        os_acc_atomic_exit(w);
        /* The update of the target was a locked instruction after every
         * earlier store (os_flush_barrier). Entering need not have been
         * one (a fenceless count, os_acc_atomic_try_enter), and a NO_OP
         * fetch is a plain load: those leave the stores as they were. */
        if (rop != OS_OP_NO_OP || kind == OS_RMA_CAS)
            w->stores_unordered = false;
        OS_STAT(w, ACC_ATOMIC_ELEMS, count);
        return true;
    }
    /* Exclusive lock: nobody else may touch the target window, so plain
     * loads and stores are atomic enough. */
    w->stores_unordered = true;
    if (kind == OS_RMA_CAS) {
        char old[64];
        memcpy(old, taddr, e);
        if (!memcmp(old, compare, e))
            memcpy(taddr, origin, e);
        memcpy(result, old, e);
        OS_STAT(w, ACC_EXCL_ELEMS, 1);
        return true;
    }
    if (fetch)
        memcpy(result, taddr, bytes);
    if (origin)
        os_reduce(rop, (os_basic_t)t->basic, e, taddr, origin, count);
    OS_STAT(w, ACC_EXCL_ELEMS, count);
    return true;
}

/* One 8-byte integer element of an accumulate-kind call in an epoch that
 * grants access now (passive_epoch's comment), the commonest atomic of all
 * (counters, RandomAccess, queues built on fetch_and_op), as a leaf: the
 * checks os_rma_fast and mapped_acc make, in the same order, for this one
 * case only, without the general ones (derived types, counts, operations CPU
 * atomics cannot do) and with fewer registers to save. On the node's memory
 * os_rma_fast spent 247 instructions on an 8-byte fetch_and_op (callgrind),
 * where Open MPI 5.0.11's whole osc/sm fetch_and_op with its flush took 304;
 * between virtual nodes, through mapped_acc, the call + flush was 1.15-1.3x
 * osc/sm. Anything else, and every check that fails, goes to os_rma_fast,
 * which decides. */
bool os_rma_fast_word(os_win_t *w, os_rma_kind_t kind, os_op_t rop, const os_dtype_t *t,
                      int target, MPI_Aint tdisp, const void *origin, const void *compare,
                      void *result, bool request)
{
    const bool fetch = kind >= OS_RMA_GET_ACC;
    const bool mapped_ok = kind == OS_RMA_CAS || rop == OS_OP_SUM || rop == OS_OP_REPLACE ||
                           rop == OS_OP_NO_OP; /* ops atomic_word does */
    fast_epoch_t how;
    char *taddr;
    long long off;
    if (target < 0 || target >= w->nranks || w->flavor == OS_FLAVOR_DYNAMIC || !mapped_ok)
        goto general;
    const os_peer_t *p = &w->peers[target];
    const bool remote = p->access == OS_PEER_REMOTE;
    if (remote) {
        /* mapped_acc's checks, in an epoch that grants access now (the
         * first operation of a PSCW epoch, which waits for the post, goes
         * through mapped_acc). */
        if (!(taddr = mapped_acc_target(w, kind, target, tdisp, 8, request, &how)) ||
            how != FAST_NOW || ((uintptr_t)taddr & 7))
            goto general;
    } else {
        if (p->access != OS_PEER_DIRECT || fast_epoch(w, target, request) != FAST_NOW ||
            !fast_target_offset(w, p, kind, target, tdisp, 8, &off))
            goto general;
        taddr = p->base + off;
        if (os_acc_mode(w, target, taddr, t) != OS_ACC_ATOMIC)
            goto general;
    }
    if (kind != OS_RMA_CAS && os_acc_bulk(w, target, 8))
        goto general;
    fast_begin(w, FAST_NOW, target, kind, 8, request);
    /* Between virtual nodes inside the bulk handshake only where every
     * process joined it (acc_host); otherwise no bulk accumulate runs on
     * the window (mapped_acc). */
    const bool handshake = !remote || w->acc_host;
    if (handshake)
        os_acc_atomic_enter(w, target);
    if (kind == OS_RMA_CAS)
        os_cas_atomic(8, taddr, compare, origin, result);
    else
        atomic_word(rop, (os_basic_t)t->basic, taddr, rop == OS_OP_NO_OP ? NULL : origin,
                    fetch ? result : NULL);
    if (handshake)
        os_acc_atomic_exit(w);
    /* A locked instruction after every earlier store (os_flush_barrier); a
     * NO_OP fetch is a plain load, which drains nothing. */
    if (rop != OS_OP_NO_OP || kind == OS_RMA_CAS)
        w->stores_unordered = false;
    if (remote) {
        OS_STAT(w, ACC_MAPPED, 1);
        OS_STAT(w, ACC_DIRECT, 1);
    } else {
        OS_STAT(w, ACC_ATOMIC_ELEMS, 1);
    }
    return true;
general:
    return os_rma_fast(w, kind, rop, t, 1, target, tdisp, origin, compare, result, request);
}

/* One element of a predefined type of 1, 2, 4 or 8 bytes put or got in an
 * epoch that grants access now (a flag, a counter read, a queue slot, a
 * pointer),
 * as a leaf, as os_rma_fast_word is for the atomics: os_rma_fast's checks
 * for this case only, in its order. On the node's memory os_rma_fast spent
 * 131 of the 373 instructions of an exclusive lock, an 8-byte put and the
 * unlock (callgrind, Open MPI 5.0.11), 28 of them saving and restoring
 * registers for branches this case never takes; this leaf takes 81.
 * Memory UCX maps here goes to mapped_elem, the leaf for it. Anything
 * else, and every check that fails, goes to os_rma_fast, which decides. */
bool os_rma_fast_elem(os_win_t *w, os_rma_kind_t kind, const os_dtype_t *t, int target,
                      MPI_Aint tdisp, const void *origin, bool request)
{
    const size_t e = t->size;
    long long off;
    if (target < 0 || target >= w->nranks || w->flavor == OS_FLAVOR_DYNAMIC || e - 1 >= 8 ||
        (e & (e - 1)) || t->basic_size != e)
        goto general;
    const os_peer_t *p = &w->peers[target];
    if (p->access != OS_PEER_DIRECT) {
        if (p->access == OS_PEER_REMOTE && p->ucx_map)
            return mapped_elem(w, kind, t, target, tdisp, origin, request);
        goto general;
    }
    if (fast_epoch(w, target, request) != FAST_NOW ||
        !fast_target_offset(w, p, kind, target, tdisp, e, &off))
        goto general;
    fast_begin(w, FAST_NOW, target, kind, e, request);
    /* A put's plain store is one the next flush must order
     * (os_flush_barrier); a get's load is not. */
    if (kind == OS_RMA_PUT) {
        w->stores_unordered = true;
        copy_element(p->base + off, origin, e);
    } else {
        copy_element((void *)origin, p->base + off, e);
    }
    return true;
general:
    return os_rma_fast(w, kind, OS_OP_NO_OP, t, 1, target, tdisp, origin, NULL, NULL, request);
}

/* A put or get of a run of elements of one predefined type in an epoch that
 * grants access now (a halo row, a block of doubles), as os_rma_fast_elem is
 * for one element: os_rma_fast's checks for this case only, in its order,
 * then os_copy. A leaf of its own, not os_rma_fast_elem with a count: the
 * one-element leaf then kept more registers and took 6 more instructions,
 * and an 8-byte get + flush went from 0.69-0.71x osc/sm to 0.75-0.77x
 * (rma_sweep, Open MPI 5.0.11, 3 jobs each). Through os_rma_fast a put of 8
 * longs took 136 instructions where one element takes 81, and a shared lock,
 * that put and the unlock took 399 against osc/sm's 409, 1.09-1.14x its time
 * in the main job. Memory UCX maps here goes to mapped_move. Anything else,
 * and every check that fails, goes to os_rma_fast, which decides. */
bool os_rma_fast_run(os_win_t *w, os_rma_kind_t kind, const os_dtype_t *t, size_t count,
                     int target, MPI_Aint tdisp, const void *origin, bool request)
{
    const size_t e = t->size;
    size_t bytes;
    long long off;
    if (target < 0 || target >= w->nranks || w->flavor == OS_FLAVOR_DYNAMIC || !e ||
        t->basic_size != e || __builtin_mul_overflow(count, e, &bytes) ||
        bytes > (size_t)LLONG_MAX)
        goto general;
    const os_peer_t *p = &w->peers[target];
    if (p->access != OS_PEER_DIRECT) {
        if (p->access == OS_PEER_REMOTE && p->ucx_map)
            return mapped_move(w, kind, OS_OP_NO_OP, t, count, target, tdisp, origin, NULL,
                               NULL, request);
        goto general;
    }
    if (fast_epoch(w, target, request) != FAST_NOW ||
        !fast_target_offset(w, p, kind, target, tdisp, bytes, &off))
        goto general;
    fast_begin(w, FAST_NOW, target, kind, bytes, request);
    if (kind == OS_RMA_PUT || bytes > GET_ORDERED_MAX)
        w->stores_unordered = true;
    if (kind == OS_RMA_PUT)
        os_copy(p->base + off, origin, bytes);
    else
        os_copy((void *)origin, p->base + off, bytes);
    return true;
general:
    return os_rma_fast(w, kind, OS_OP_NO_OP, t, count, target, tdisp, origin, NULL, NULL,
                       request);
}

/* A plain accumulate (MPI_Accumulate, MPI_Raccumulate) of more than one
 * element of a predefined type on the node's memory, or memory UCX maps
 * here (mapped_acc's case), in an epoch that grants access now, large
 * enough for the bulk handshake (a vector of
 * doubles, a row of a histogram), as a leaf, as os_rma_fast_word is for
 * one element: os_rma_fast's checks for this case only, in its order, and
 * acc_bulk_contig's work inline. On 64 bytes of longs through os_rma_fast
 * and acc_bulk_contig the call + flush ran 446 instructions where Open MPI
 * 5.0.11's osc/sm ran 378 (callgrind), 1.1-1.16x its time; about 60 of
 * them were the two functions' register saves and restores and the call
 * between them. Through this leaf: 348. Between virtual nodes, through
 * os_rma_fast, mapped_acc and acc_bulk_contig, the same accumulate in a
 * burst took 27-30 ns against 17.5 on the node's memory (Open MPI 5.0.11,
 * 0.73x osc/sm's rate in rma_sweep's bursts of 64 bytes). Anything else
 * (below the threshold, MPI_NO_OP, exclusive locks, memory of other nodes
 * that this process does not map, types without a reduction loop), and
 * every check that fails, goes to os_rma_fast, which decides. */
bool os_rma_fast_acc(os_win_t *w, os_op_t rop, const os_dtype_t *t, size_t count, int target,
                     MPI_Aint tdisp, const void *origin, bool request)
{
    const size_t e = t->size;
    size_t bytes;
    long long off;
    os_reduce_fn loop;
    if (target < 0 || target >= w->nranks || w->flavor == OS_FLAVOR_DYNAMIC ||
        t->basic_size != e || __builtin_mul_overflow(count, e, &bytes) ||
        bytes > (size_t)LLONG_MAX || rop == OS_OP_NO_OP || t->basic == OS_B_NONE)
        goto general;
    const os_peer_t *p = &w->peers[target];
    const bool remote = p->access == OS_PEER_REMOTE;
    char *taddr;
    if (remote) {
        /* mapped_acc's checks, as os_rma_fast_word makes them. */
        fast_epoch_t how;
        if (!(taddr = mapped_acc_target(w, OS_RMA_ACC, target, tdisp, bytes, request, &how)) ||
            how != FAST_NOW || !os_op_valid(rop, (os_class_t)t->cls) ||
            !os_reduce_atomic_ok(e, taddr))
            goto general;
    } else {
        if (p->access != OS_PEER_DIRECT || fast_epoch(w, target, request) != FAST_NOW ||
            !fast_target_offset(w, p, OS_RMA_ACC, target, tdisp, bytes, &off) ||
            !os_op_valid(rop, (os_class_t)t->cls))
            goto general;
        taddr = p->base + off;
        if (os_acc_mode(w, target, taddr, t) != OS_ACC_ATOMIC)
            goto general;
    }
    if (!os_acc_bulk(w, target, bytes) || !(loop = os_reduce_loop(rop, (os_basic_t)t->basic, e)))
        goto general;
    fast_begin(w, FAST_NOW, target, OS_RMA_ACC, bytes, request);
    if (remote)
        OS_STAT(w, ACC_MAPPED, 1);
    if (!os_acc_bulk_enter(w, target)) {
        acc_atomic_contig(w, target, rop, t, count, taddr, origin, NULL);
        return true;
    }
    /* Plain stores, which the next flush orders (os_flush_barrier), and
     * the flag's release orders before the next holder's loads. */
    w->stores_unordered = true;
    loop(taddr, origin, count);
    os_acc_bulk_exit(w, target);
    OS_STAT(w, ACC_BULK_ELEMS, count);
    return true;
general:
    return os_rma_fast(w, OS_RMA_ACC, rop, t, count, target, tdisp, origin, NULL, NULL, request);
}

/* An operation the fast path takes: as many elements of one predefined
 * type at the origin, the target and (fetching kinds) the result. */
static bool fast_path(os_win_t *w, const os_rma_op_t *op)
{
    const os_dtype_t *t = op->ttype;
    if (op->ocount != op->tcount || op->otype != t ||
        (op->kind >= OS_RMA_GET_ACC && (op->rcount != op->tcount || op->rtype != t)))
        return false;
    return os_rma_fast(w, (os_rma_kind_t)op->kind, (os_op_t)op->op, t, op->tcount, op->target,
                       op->tdisp, op->origin, op->compare, op->result, op->request);
}

os_status_t os_rma_issue(os_win_t *w, const os_rma_op_t *op)
{
    if (fast_path(w, op))
        return OS_OK;

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
        defer = !w->fence_immediate && !w->fence_lazy;
        if (w->fence_lazy && !empty)
            os_fence_await_entry(w, op->target);
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
