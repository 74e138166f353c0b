/* Node requests: a small operation on a node-mate's private memory, applied
 * by that node-mate while it polls, instead of by CMA system calls.
 *
 * MPI_Win_create over memory the program allocated itself that could not be
 * made shareable (a malloc smaller than a page, which shares its pages with
 * other objects; remap.c) is reached by process_vm_readv/writev: 1.5-2 us a
 * call on this VM, two calls and the accumulate mutex for an accumulate. A
 * native target that waits inside the host MPI answers such an operation
 * from its poll loop in well under a microsecond. So does onesided's, here:
 *
 *  - every window with such memory gets a mailbox in the node's control area
 *    (shell.c): a slot per (target, origin) pair of the node, and per target
 *    a line with the window's doorbell;
 *  - every process has one line for all its windows, in a segment of the
 *    node made at start-up (os_nreq_node_init): its heartbeat, and a
 *    doorbell that says some window's rang. A poll costs the same with one
 *    window or a thousand: it reads the process's doorbell, and walks its
 *    windows only when that rang (with a line per window, each poll wrote
 *    every window's heartbeat, and window creation, whose collectives poll,
 *    cost 138 us per window with 1000 alive against 8 with one);
 *  - a process that polls (the host MPI's waiting loop, host_progress.c;
 *    onesided's own waits, os_backoff_hook) serves the slots its doorbells
 *    point to, and while its polls come in a streak (a waiting loop, not
 *    one MPI_Iprobe between two computations) writes the time into its
 *    heartbeat;
 *  - an origin whose target's heartbeat is fresh posts the operation in its
 *    slot, rings the window's doorbell and then the process's, and waits for
 *    the answer, polling its own mailboxes (two
 *    processes may post to each other). If the heartbeat goes stale (the
 *    target went back to computing), it takes the slot back and uses CMA:
 *    exactly one of the two ever applies the operation (the slot's state
 *    word decides by compare-and-swap). A target that computes is not
 *    waited for longer than OS_NREQ_GIVE_UP_NS past its last poll.
 *
 * Measured (os_microbench --flavor create, 2 processes, target idle in
 * MPI_Barrier): 8-byte put, get, accumulate, fetch_and_op and
 * compare_and_swap + flush 0.21-0.27 us against CMA's 1.0-4.3 and native
 * MPICH's 0.41-0.90. A target that computes pays nothing; its origins pay
 * one clock reading per operation, and an origin that posted just as the
 * target left its loop waits up to OS_NREQ_GIVE_UP_NS once.
 *
 * Semantics: each request completes before the origin's call returns, as a
 * CMA access does, so completion and ordering are those of the CMA path.
 * The target applies accumulates with os_acc_try_apply, the path every
 * process of the node takes on this memory (the target's accumulate mutex:
 * some origin reaches it by CMA), so they stay atomic with the CMA ones. A
 * poll never blocks: a request that would wait for that mutex, or for the
 * window's call lock held by another thread, is left for the next poll.
 *
 * Stats: node_requests (origin), node_requests_served (target),
 * fallback_node_request_cma (taken back and done by CMA). */
#define _GNU_SOURCE
#include "os_rma.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A slot's life: EMPTY -> FILLING (origin) -> POSTED -> TAKEN (target) ->
 * DONE -> EMPTY (origin); POSTED -> EMPTY when the origin takes it back,
 * TAKEN -> POSTED when the target cannot apply it yet. */
enum { SLOT_EMPTY, SLOT_FILLING, SLOT_POSTED, SLOT_TAKEN, SLOT_DONE };

/* A heartbeat younger than this says the target polls: post. */
#define FRESH_NS 5000
/* Posted, and no heartbeat for this long: the target computes; take it back. */
#define OS_NREQ_GIVE_UP_NS 10000
/* Polls less than this apart, STREAK_MIN in a row, make a waiting loop. */
#define STREAK_GAP_NS 2000
#define STREAK_MIN 8
/* Posted this long, heartbeat or not (its polls skip the slot: the window's
 * call lock is held by another of its threads): take it back. */
#define CAP_NS 200000

/* The windows this process serves, in a list every poll that finds its
 * doorbell rung walks. */
static pthread_mutex_t registry = PTHREAD_MUTEX_INITIALIZER;
static os_win_t *served;
static _Atomic int nserved;
static _Thread_local bool serving; /* no nested polls (a poll inside a poll's apply) */

/* One line per process of the node (os_nreq_node_init): heartbeat and
 * doorbell; world_line[r]: os_world rank r's line, -1 off this node. */
static os_shm_seg_t node_seg;
static os_nreq_line_t *node_lines;
static int *world_line, world_size, node_me = -1;

os_status_t os_nreq_node_init(MPI_Comm world, int node_size)
{
    os_status_t st = OS_OK;
    int wrank, nlocal, *members = NULL;
    if (!os_config.node_requests)
        return OS_OK;
    MPI_Comm node = os_node_comm(world, node_size);
    PMPI_Comm_rank(world, &wrank);
    PMPI_Comm_size(world, &world_size);
    PMPI_Comm_size(node, &nlocal);
    PMPI_Comm_rank(node, &node_me);
    members = malloc(sizeof *members * (size_t)nlocal);
    world_line = malloc(sizeof *world_line * (size_t)world_size);
    /* Collective whatever happens here: every process makes the same calls. */
    PMPI_Allgather(&wrank, 1, MPI_INT, members ? members : &wrank, members ? 1 : 0, MPI_INT,
                   node);
    if ((st = os_shm_create(node, sizeof *node_lines * (size_t)nlocal, &node_seg)))
        goto out;
    if (!members || !world_line) {
        st = OS_ERR(OS_ERR_NOMEM, "node request lines for %d processes", world_size);
        goto out;
    }
    for (int r = 0; r < world_size; r++)
        world_line[r] = -1;
    for (int i = 0; i < nlocal; i++)
        world_line[members[i]] = i;
    node_lines = node_seg.addr;
out:
    free(members);
    PMPI_Comm_free(&node);
    if (st) {
        /* Node requests stay off: CMA serves those windows. */
        os_shm_destroy(&node_seg);
        free(world_line);
        world_line = NULL;
        node_me = -1;
    }
    return st;
}

void os_nreq_node_finalize(void)
{
    node_lines = NULL;
    node_me = -1;
    os_shm_destroy(&node_seg);
    free(world_line);
    world_line = NULL;
}

/* The line of a window's rank r, or NULL off this node. */
static os_nreq_line_t *line_of(const os_win_t *w, int r)
{
    const int world = w->peers[r].world;
    if (!node_lines || world < 0 || world >= world_size || world_line[world] < 0)
        return NULL;
    return &node_lines[world_line[world]];
}

/* Heartbeats are ticks (os_ticks: comparable between the node's processes);
 * the limits above in ticks. */
static inline uint64_t ticks_of_ns(uint64_t ns)
{
    return ns * os_ticks_per_us / 1000;
}

static inline os_nreq_slot_t *slot_of(const os_win_t *w, int target_idx, int origin_idx)
{
    return &w->nreq.slots[(size_t)target_idx * (size_t)w->nreq.nlocal + (size_t)origin_idx];
}

/* ------------------------------------------------------------- window */

void os_nreq_attach(os_win_t *w, const int *node_index, int nlocal)
{
    const os_shell_t *sh = w->shell;
    if (!os_config.node_requests || !node_lines || w->flavor != OS_FLAVOR_CREATE ||
        nlocal < 2 || !sh->nreq_slots_off || nlocal != sh->node_size)
        return;
    /* Some process of the node reaches some node-mate's memory by CMA (then
     * that memory takes the accumulate mutex, as every process of the node
     * agreed): the same answer everywhere, so that targets serve whenever
     * origins may post. */
    bool cma = false;
    for (int r = 0; r < w->nranks; r++)
        cma |= node_index[r] >= 0 &&
               (w->peers[r].access == OS_PEER_CMA || w->peers[r].acc_mutex_always);
    if (!cma)
        return;
    w->nreq.index = malloc((size_t)w->nranks * sizeof *w->nreq.index);
    if (!w->nreq.index)
        return; /* CMA serves; nothing is lost but speed */
    memcpy(w->nreq.index, node_index, (size_t)w->nranks * sizeof *w->nreq.index);
    w->nreq.nlocal = nlocal;
    w->nreq.me = node_index[w->rank];
    w->nreq.lines = (os_nreq_line_t *)((char *)sh->ctl.addr + sh->nreq_lines_off);
    w->nreq.slots = (os_nreq_slot_t *)((char *)sh->ctl.addr + sh->nreq_slots_off);
    pthread_mutex_lock(&registry);
    w->nreq.next = served;
    w->nreq.prev = &served;
    if (served)
        served->nreq.prev = &w->nreq.next;
    served = w;
    atomic_fetch_add_explicit(&nserved, 1, memory_order_release);
    pthread_mutex_unlock(&registry);
}

/* After the window's last barrier: no origin posts to it any more, and
 * every request it took has been answered (each completes inside the
 * origin's call). */
void os_nreq_detach(os_win_t *w)
{
    if (!w->nreq.slots)
        return;
    /* Unlinked by its neighbours' links, not by a walk: windows are freed
     * oldest first, the end of a list that grows at its head (with 1000
     * windows alive the walk was a third of MPI_Win_free). */
    pthread_mutex_lock(&registry);
    *w->nreq.prev = w->nreq.next;
    if (w->nreq.next)
        w->nreq.next->nreq.prev = w->nreq.prev;
    atomic_fetch_sub_explicit(&nserved, 1, memory_order_relaxed);
    pthread_mutex_unlock(&registry);
    w->nreq.slots = NULL;
    free(w->nreq.index);
    w->nreq.index = NULL;
}

/* ------------------------------------------------------------- target */

/* Apply one posted request to this process's own window memory; false, with
 * nothing done, when it would have to wait (the accumulate mutex). */
static bool apply(os_win_t *w, os_nreq_slot_t *s)
{
    const os_peer_t *me = &w->peers[w->rank];
    char *addr[OS_NREQ_RUNS];
    os_run_t runs[OS_NREQ_RUNS];
    const uint32_t bytes = s->bytes, in = s->in;
    uint32_t total = 0;

    /* The origin checked the range and the sizes; a request outside the
     * window or the slot is a bug of ours, answered with an error rather
     * than written anywhere. */
    const uint32_t out = s->kind == OS_RMA_PUT || s->kind == OS_RMA_ACC ? 0 : bytes;
    if (s->nruns > OS_NREQ_RUNS || in > OS_NREQ_PAYLOAD || out > OS_NREQ_PAYLOAD - in ||
        (s->kind == OS_RMA_PUT && bytes > in) || !s->esize) {
        s->status = OS_ERR_RANGE;
        return true;
    }
    for (uint32_t i = 0; i < s->nruns; i++) {
        const uint64_t a = s->addr[i], len = s->len[i];
        const uint64_t lo = (uint64_t)(uintptr_t)me->base;
        if (a < lo || len > (uint64_t)me->size || a - lo > (uint64_t)me->size - len) {
            s->status = OS_ERR_RANGE;
            return true;
        }
        addr[i] = (char *)(uintptr_t)a;
        runs[i] = (os_run_t){ a, len };
        total += (uint32_t)len;
    }
    if (total != bytes) {
        s->status = OS_ERR_RANGE;
        return true;
    }
    char *data = s->data, *result = s->data + in;
    size_t pos = 0;
    switch (s->kind) {
    case OS_RMA_PUT:
        for (uint32_t i = 0; i < s->nruns; pos += s->len[i], i++)
            os_copy(addr[i], data + pos, s->len[i]);
        break;
    case OS_RMA_GET:
        for (uint32_t i = 0; i < s->nruns; pos += s->len[i], i++)
            os_copy(result + pos, addr[i], s->len[i]);
        break;
    default: {
        const bool cas = s->kind == OS_RMA_CAS, fetch = s->kind != OS_RMA_ACC;
        const char *odata = in ? data : NULL, *compare = cas ? data + bytes : NULL;
        if (!os_acc_try_apply(w, w->rank, cas, fetch, (os_op_t)s->op, (os_basic_t)s->basic,
                              s->esize, addr, runs, s->nruns, odata, fetch ? result : NULL,
                              compare))
            return false;
        break;
    }
    }
    s->status = OS_OK;
    return true;
}

/* The requests of one window, if its doorbell rang; true when some had to
 * be left for a later poll. */
static bool serve_window(os_win_t *w)
{
    os_nreq_line_t *line = &w->nreq.lines[w->nreq.me];
    if (!atomic_load_explicit(&line->bell, memory_order_relaxed))
        return false;
    /* Another thread of this process may be in a call on the window: its
     * state (stats) is that call's until it ends. Recursive: this thread's
     * own call may be what polls. */
    if (os_threaded && pthread_mutex_trylock(&w->mtx))
        return true;
    /* Acquire: the slots posted before the ring are visible. Cleared before
     * the scan, so a post that rings after it is seen now or next time. */
    atomic_exchange_explicit(&line->bell, 0, memory_order_acq_rel);
    bool left = false;
    for (int o = 0; o < w->nreq.nlocal; o++) {
        os_nreq_slot_t *s = slot_of(w, w->nreq.me, o);
        uint32_t expect = SLOT_POSTED;
        if (atomic_load_explicit(&s->state, memory_order_relaxed) != SLOT_POSTED ||
            !atomic_compare_exchange_strong_explicit(&s->state, &expect, SLOT_TAKEN,
                                                     memory_order_acquire,
                                                     memory_order_relaxed))
            continue;
        if (!apply(w, s)) {
            /* Given back: the origin may now take it back itself. */
            atomic_store_explicit(&s->state, SLOT_POSTED, memory_order_release);
            left = true;
            continue;
        }
        OS_STAT(w, NODE_REQUESTS_SERVED, 1);
        atomic_store_explicit(&s->state, SLOT_DONE, memory_order_release);
    }
    if (left)
        atomic_store_explicit(&line->bell, 1, memory_order_release);
    if (os_threaded)
        pthread_mutex_unlock(&w->mtx);
    return left;
}

void os_nreq_poll(void)
{
    if (!atomic_load_explicit(&nserved, memory_order_relaxed) || serving || node_me < 0)
        return;
    os_nreq_line_t *line = &node_lines[node_me];
    /* A streak of polls close together is a waiting loop; one MPI_Iprobe
     * between two stretches of computing is not, and must not draw requests
     * that would wait for the next one. Per thread. */
    static _Thread_local uint64_t last;
    static _Thread_local unsigned streak;
    const uint64_t now = os_ticks();
    streak = now - last < ticks_of_ns(STREAK_GAP_NS) ? streak + 1 : 0;
    last = now;
    if (streak >= STREAK_MIN)
        atomic_store_explicit(&line->heartbeat, now, memory_order_relaxed);
    if (!atomic_load_explicit(&line->bell, memory_order_relaxed))
        return;
    /* Never blocks: a thread creating or freeing a window holds the list. */
    if (pthread_mutex_trylock(&registry))
        return;
    serving = true;
    /* Acquire, and cleared before the walk: a ring after it is seen now or
     * at the next poll (origins ring the window, then the process). */
    atomic_exchange_explicit(&line->bell, 0, memory_order_acq_rel);
    bool left = false;
    for (os_win_t *w = served; w; w = w->nreq.next)
        left |= serve_window(w);
    if (left)
        atomic_store_explicit(&line->bell, 1, memory_order_release);
    serving = false;
    pthread_mutex_unlock(&registry);
}

/* ------------------------------------------------------------- origin */

/* The target runs of an operation, at most OS_NREQ_RUNS of `bytes` in all;
 * false when there are more. */
static bool target_runs(const os_rma_op_t *op, char *taddr, size_t bytes, os_nreq_slot_t *s)
{
    os_cursor_t c;
    os_cursor_init(&c, op->ttype, taddr, op->tcount);
    char *p;
    size_t n, left = bytes;
    s->nruns = 0;
    while (left && (n = os_cursor_next(&c, left, &p))) {
        if (s->nruns == OS_NREQ_RUNS)
            return false;
        s->addr[s->nruns] = (uint64_t)(uintptr_t)p;
        s->len[s->nruns++] = (uint32_t)n;
        left -= n;
    }
    return !left;
}

/* Whether every target byte is in the part of the peer's memory mapped
 * here (then loads and stores do, without the target). */
static bool all_mapped(const os_peer_t *p, const os_nreq_slot_t *s)
{
    for (uint32_t i = 0; i < s->nruns; i++)
        if (!os_peer_mapped(p, (const char *)(uintptr_t)s->addr[i], s->len[i]))
            return false;
    return true;
}

/* The slot toward target, claimed for a request, if the target polls. */
static os_nreq_slot_t *claim(os_win_t *w, int target, uint64_t *t0)
{
    const int ti = w->nreq.index[target];
    const os_nreq_line_t *line = line_of(w, target);
    if (ti < 0 || !line || w->peers[target].access != OS_PEER_CMA)
        return NULL;
    /* The heartbeat may be younger than our clock reading. */
    *t0 = os_ticks();
    const uint64_t heartbeat = atomic_load_explicit(&line->heartbeat, memory_order_relaxed);
    if (heartbeat + ticks_of_ns(FRESH_NS) < *t0)
        return NULL;
    os_nreq_slot_t *s = slot_of(w, ti, w->nreq.me);
    /* Empty: each request completes inside its call. Claimed all the same,
     * in case two threads of this process reach the same slot. */
    uint32_t expect = SLOT_EMPTY;
    if (!atomic_compare_exchange_strong_explicit(&s->state, &expect, SLOT_FILLING,
                                                 memory_order_acquire, memory_order_relaxed))
        return NULL;
    return s;
}

static void release(os_nreq_slot_t *s)
{
    atomic_store_explicit(&s->state, SLOT_EMPTY, memory_order_release);
}

/* Post the filled slot and wait for the answer: true with the slot DONE
 * (the caller reads it, then releases it), false when it was taken back
 * (nobody applied it; the slot is empty again). */
static bool post_and_wait(os_win_t *w, int target, os_nreq_slot_t *s, uint64_t t0)
{
    os_nreq_line_t *bell = &w->nreq.lines[w->nreq.index[target]];
    os_nreq_line_t *line = line_of(w, target); /* claim found it */
    /* Release: the request is complete before the target can take it; the
     * rings after it, the window's before the process's, so that a target
     * that sees a ring sees the slot. */
    atomic_store_explicit(&s->state, SLOT_POSTED, memory_order_release);
    atomic_store_explicit(&bell->bell, 1, memory_order_release);
    atomic_store_explicit(&line->bell, 1, memory_order_release);

    os_backoff_t b = OS_BACKOFF_INIT;
    for (unsigned i = 1;; i++) {
        const uint32_t state = atomic_load_explicit(&s->state, memory_order_acquire);
        if (state == SLOT_DONE)
            return true;
        if (state == SLOT_POSTED && !(i & 31)) {
            const uint64_t now = os_ticks();
            const uint64_t hb = atomic_load_explicit(&line->heartbeat, memory_order_relaxed);
            const uint64_t seen = hb > t0 ? hb : t0; /* may be younger than now */
            uint32_t expect = SLOT_POSTED;
            if ((seen + ticks_of_ns(OS_NREQ_GIVE_UP_NS) < now || t0 + ticks_of_ns(CAP_NS) < now) &&
                atomic_compare_exchange_strong_explicit(&s->state, &expect, SLOT_EMPTY,
                                                        memory_order_acq_rel,
                                                        memory_order_relaxed)) {
                OS_STAT(w, FALLBACK_NODE_REQUEST_CMA, 1);
                return false;
            }
        }
        /* Polls this process's own mailboxes too (os_backoff_hook): two
         * processes that post to each other both get answered. */
        os_backoff_wait(&b);
    }
}

static os_status_t answer(os_nreq_slot_t *s, int target)
{
    return s->status ? OS_ERR(OS_ERR_RANGE, "rank %d refused a request outside its window",
                              target)
                     : OS_OK;
}

bool os_nreq_execute(os_win_t *w, const os_rma_op_t *op, char *taddr, os_status_t *st)
{
    const os_dtype_t *tt = op->ttype;
    const size_t tbytes = op->tcount * tt->size, obytes = op->ocount * op->otype->size;
    const bool acc = op->kind >= OS_RMA_ACC, cas = op->kind == OS_RMA_CAS;
    const bool fetch = op->kind == OS_RMA_GET || op->kind >= OS_RMA_GET_ACC;
    /* A put moves what both sides have (ops.c checked the origin fits). */
    const size_t bytes = op->kind == OS_RMA_PUT && obytes < tbytes ? obytes : tbytes;
    const bool has_origin = op->kind == OS_RMA_PUT || cas || (acc && op->op != OS_OP_NO_OP);
    const size_t in = has_origin ? (cas ? 2 * bytes : bytes) : 0, out = fetch ? bytes : 0;
    uint64_t t0;
    os_nreq_slot_t *s;
    if (!bytes || in + out > OS_NREQ_PAYLOAD || !(s = claim(w, op->target, &t0)))
        return false;
    if (!target_runs(op, taddr, bytes, s) || all_mapped(&w->peers[op->target], s)) {
        release(s);
        return false;
    }
    s->kind = (uint8_t)op->kind;
    s->op = (uint8_t)op->op;
    s->basic = tt->basic;
    s->esize = (uint16_t)(acc ? tt->basic_size : 1);
    s->bytes = (uint32_t)bytes;
    s->in = (uint32_t)in;
    if (has_origin)
        os_dtype_pack(s->data, op->otype, op->origin, op->ocount, bytes);
    if (cas)
        memcpy(s->data + bytes, op->compare, bytes);
    if (!post_and_wait(w, op->target, s, t0))
        return false;
    const bool get = op->kind == OS_RMA_GET;
    if (!(*st = answer(s, op->target)) && fetch)
        os_dtype_unpack(get ? (void *)op->origin : op->result, get ? op->otype : op->rtype,
                        get ? op->ocount : op->rcount, s->data + in, bytes);
    release(s);
    OS_STAT(w, NODE_REQUESTS, 1);
    return true;
}

size_t os_nreq_acc_batch(os_win_t *w, int target, const os_acc_batch_t *b, os_status_t *st)
{
    const size_t e = b->esize;
    size_t i = 0;
    *st = OS_OK;
    /* More than OS_NREQ_BATCH_MAX requests' worth: two system calls for
     * the whole batch cost less (coalesce.c). */
    if (b->n > OS_NREQ_BATCH_MAX * OS_NREQ_RUNS)
        return 0;
    while (i < b->n) {
        uint64_t t0;
        os_nreq_slot_t *s = claim(w, target, &t0);
        if (!s)
            break;
        /* Consecutive entries of one op and type, in issue order: the target
         * applies the runs in order, so same-origin ordering holds. */
        const os_acc_entry_t *first = &b->entries[i];
        size_t j = i, bytes = 0;
        s->nruns = 0;
        while (j < b->n && s->nruns < OS_NREQ_RUNS && b->entries[j].op == first->op &&
               b->entries[j].basic == first->basic &&
               bytes + b->entries[j].nelems * e <= OS_NREQ_PAYLOAD) {
            const os_acc_entry_t *x = &b->entries[j++];
            const size_t len = x->nelems * e;
            s->addr[s->nruns] = (uint64_t)(uintptr_t)x->taddr;
            s->len[s->nruns++] = (uint32_t)len;
            os_copy(s->data + bytes, b->data + x->data, len);
            bytes += len;
        }
        if (all_mapped(&w->peers[target], s)) {
            release(s);
            break;
        }
        s->kind = OS_RMA_ACC;
        s->op = first->op;
        s->basic = first->basic;
        s->esize = (uint16_t)e;
        s->bytes = s->in = (uint32_t)bytes;
        if (!post_and_wait(w, target, s, t0))
            break;
        *st = answer(s, target);
        release(s);
        OS_STAT(w, NODE_REQUESTS, 1);
        if (*st)
            return b->n;
        i = j;
    }
    return i;
}

void os_rma_wait_poll(void)
{
    os_nreq_poll();
    os_net_wait_poll();
}
