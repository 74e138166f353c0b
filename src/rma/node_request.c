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
 *  - at start-up the node gets a segment (os_nreq_node_init): per process a
 *    line with its heartbeat, and per (target, origin) pair of processes one
 *    slot, shared by all of the target's windows; a request names its window
 *    by the key the target gave it (os_nreq_reserve, spread by the window's
 *    creation). A one-element operation and its header fill the slot's
 *    first line: the request costs that line's trips between the two cores
 *    (origin writes, target reads and answers, origin reads: about five
 *    transfers). With a slot per window, two doorbells and a heartbeat
 *    written on every poll, it took about fourteen (0.5-0.7 us here, where
 *    a line's transfer takes 40-80 ns);
 *  - a process that polls (the host MPI's waiting loop, host_progress.c;
 *    onesided's own waits, os_backoff_hook) reads its row of slots, one
 *    line per node-mate, and serves what is posted. A poll costs the same
 *    with one window or a thousand. While its polls come in a streak (a
 *    waiting loop, not one MPI_Iprobe between two computations) it keeps
 *    its heartbeat fresh, writing it at most once per HEARTBEAT_EVERY_NS so
 *    that origins reading it seldom miss;
 *  - an origin whose target's heartbeat is fresh posts the operation in its
 *    slot and waits for the answer, polling its own row (two processes may
 *    post to each other). If the heartbeat goes stale (the target went back
 *    to computing), it takes the slot back and uses CMA: exactly one of the
 *    two ever applies the operation (the slot's state word decides by
 *    compare-and-swap). A target that computes is not waited for longer
 *    than OS_NREQ_GIVE_UP_NS past its last heartbeat.
 *
 * Measured (os_microbench --flavor create, 2 processes, target idle in
 * MPI_Barrier): see docs/benchmarks.md. A target that computes pays
 * nothing; its origins pay one clock reading per operation, and an origin
 * that posted just as the target left its loop waits up to
 * OS_NREQ_GIVE_UP_NS once.
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
/* A polling target refreshes its heartbeat this often, not on every poll:
 * each write costs the next origin that reads it a line transfer. */
#define HEARTBEAT_EVERY_NS 1000
/* Posted, and no heartbeat for this long: the target computes; take it back. */
#define OS_NREQ_GIVE_UP_NS 10000
/* Polls less than this apart, STREAK_MIN in a row, make a waiting loop. */
#define STREAK_GAP_NS 2000
#define STREAK_MIN 8
/* Posted this long, heartbeat or not (its polls skip the slot: the window's
 * call lock is held by another of its threads, or the window's creation
 * has not reached os_nreq_attach there yet): take it back. */
#define CAP_NS 200000

/* The node's segment (os_nreq_node_init): node_n lines, then node_n x
 * node_n slots, target-major (a target's row is contiguous); world_line[r]:
 * os_world rank r's position in it, -1 off this node. */
static os_shm_seg_t node_seg;
static os_nreq_line_t *node_lines;
static os_nreq_slot_t *node_slots;
static int *world_line, world_size, node_n, node_me = -1;
static _Thread_local bool serving; /* no nested polls (a poll inside a poll's apply) */

/* The windows this process serves, by the number in their key (the low 32
 * bits; the high ones count reservations, so that a number used again does
 * not take a stale request). Polls read the table without a lock: a slot
 * names a window only between the end of its creation and its free, whose
 * barriers order the entry's writes before and after every request to it.
 * A table outgrown is kept until finalize, for polls still reading it; the
 * capacity a poll trusts is the one of the table it read. */
typedef struct served {
    uint32_t cap;
    struct served *retired; /* the tables it replaced */
    struct {
        _Atomic uint64_t key;
        os_win_t *_Atomic w;
    } e[];
} served_t;
static pthread_mutex_t registry = PTHREAD_MUTEX_INITIALIZER; /* the writers' */
static served_t *_Atomic table;
static uint32_t *free_numbers, nfree, reservations;
static _Atomic int nserved;

os_status_t os_nreq_node_init(MPI_Comm world, int node_size)
{
    os_status_t st = OS_OK;
    int wrank, *members = NULL;
    if (!os_config.node_requests)
        return OS_OK;
    MPI_Comm node = os_node_comm(world, node_size);
    PMPI_Comm_rank(world, &wrank);
    PMPI_Comm_size(world, &world_size);
    PMPI_Comm_size(node, &node_n);
    PMPI_Comm_rank(node, &node_me);
    members = malloc(sizeof *members * (size_t)node_n);
    world_line = malloc(sizeof *world_line * (size_t)world_size);
    /* Collective whatever happens here: every process makes the same calls. */
    PMPI_Allgather(&wrank, 1, MPI_INT, members ? members : &wrank, members ? 1 : 0, MPI_INT,
                   node);
    if (node_n < 2 || node_n > OS_NREQ_MAX_NODE)
        goto out; /* nobody to serve, or n^2 slots too many: CMA */
    const size_t lines = sizeof *node_lines * (size_t)node_n;
    if ((st = os_shm_create(node, lines + sizeof *node_slots * (size_t)node_n * (size_t)node_n,
                            &node_seg)))
        goto out;
    if (!members || !world_line) {
        st = OS_ERR(OS_ERR_NOMEM, "node request lines for %d processes", world_size);
        goto out;
    }
    for (int r = 0; r < world_size; r++)
        world_line[r] = -1;
    for (int i = 0; i < node_n; i++)
        world_line[members[i]] = i;
    node_lines = node_seg.addr;
    node_slots = (os_nreq_slot_t *)((char *)node_seg.addr + lines);
out:
    free(members);
    PMPI_Comm_free(&node);
    if (st || !node_lines) {
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
    node_slots = NULL;
    node_me = -1;
    os_shm_destroy(&node_seg);
    free(world_line);
    world_line = NULL;
    for (served_t *t = atomic_load_explicit(&table, memory_order_relaxed), *next; t; t = next) {
        next = t->retired;
        free(t);
    }
    atomic_store_explicit(&table, NULL, memory_order_relaxed);
    free(free_numbers);
    free_numbers = NULL;
    nfree = 0;
}

/* Heartbeats are ticks (os_ticks: comparable between the node's processes);
 * the limits above in ticks. */
static inline uint64_t ticks_of_ns(uint64_t ns)
{
    return ns * os_ticks_per_us / 1000;
}

static inline os_nreq_slot_t *slot_of(int target_line, int origin_line)
{
    return &node_slots[(size_t)target_line * (size_t)node_n + (size_t)origin_line];
}

static inline os_nreq_run_t *run_of(os_nreq_slot_t *s, uint32_t i)
{
    return i ? &s->runs[i - 1] : &s->run0;
}

/* ------------------------------------------------------------- window */

/* Room for one more number, under the registry: the table doubles. */
static bool grow(void)
{
    served_t *old = atomic_load_explicit(&table, memory_order_relaxed);
    const uint32_t was = old ? old->cap : 0, cap = was ? 2 * was : 64;
    served_t *t = calloc(1, sizeof *t + cap * sizeof t->e[0]);
    uint32_t *numbers = realloc(free_numbers, cap * sizeof *numbers);
    if (numbers)
        free_numbers = numbers;
    if (!t || !numbers) {
        free(t);
        return false;
    }
    t->cap = cap;
    t->retired = old;
    for (uint32_t i = 0; i < was; i++) {
        atomic_init(&t->e[i].key, atomic_load_explicit(&old->e[i].key, memory_order_relaxed));
        atomic_init(&t->e[i].w, atomic_load_explicit(&old->e[i].w, memory_order_relaxed));
    }
    /* Number 0 is never given: key 0 says "none". */
    for (uint32_t n = cap - 1; n >= (was ? was : 1); n--)
        free_numbers[nfree++] = n;
    atomic_store_explicit(&table, t, memory_order_release);
    return true;
}

uint64_t os_nreq_reserve(os_win_t *w)
{
    if (!os_config.node_requests || node_me < 0)
        return 0;
    uint64_t key = 0;
    pthread_mutex_lock(&registry);
    if (nfree || grow()) {
        const uint32_t n = free_numbers[--nfree];
        key = (uint64_t)++reservations << 32 | n;
    }
    pthread_mutex_unlock(&registry);
    w->nreq.key = key; /* 0 (out of memory): nobody posts to this process */
    return key;
}

void os_nreq_attach(os_win_t *w, const int *node_index, int nlocal, const uint64_t *keys)
{
    if (!w->nreq.key || w->flavor != OS_FLAVOR_CREATE || nlocal < 2)
        goto none;
    /* Some process of the node reaches some node-mate's memory by CMA (then
     * that memory takes the accumulate mutex, as every process of the node
     * agreed): the same answer everywhere, so that targets serve whenever
     * origins may post. */
    bool cma = false;
    for (int r = 0; r < w->nranks; r++)
        cma |= node_index[r] >= 0 &&
               (w->peers[r].access == OS_PEER_CMA || w->peers[r].acc_mutex_always);
    if (!cma)
        goto none;
    /* Served first, whatever follows: origins post by what they know. */
    pthread_mutex_lock(&registry);
    served_t *t = atomic_load_explicit(&table, memory_order_relaxed);
    const uint32_t n = (uint32_t)w->nreq.key;
    atomic_store_explicit(&t->e[n].w, w, memory_order_relaxed);
    atomic_store_explicit(&t->e[n].key, w->nreq.key, memory_order_release);
    w->nreq.served = true;
    atomic_fetch_add_explicit(&nserved, 1, memory_order_release);
    pthread_mutex_unlock(&registry);
    w->nreq.peers = malloc((size_t)w->nranks * sizeof *w->nreq.peers);
    if (!w->nreq.peers)
        return; /* this process's operations go by CMA; nothing is lost but speed */
    for (int r = 0; r < w->nranks; r++) {
        const int world = w->peers[r].world;
        const int line = node_index[r] < 0 || r == w->rank || world < 0 || world >= world_size
                             ? -1
                             : world_line[world];
        w->nreq.peers[r] = (struct os_nreq_peer){ line < 0 ? 0 : keys[r], line };
    }
    return;
none:
    os_nreq_detach(w);
}

/* After the window's last barrier (no origin posts to it any more, and
 * every request it took has been answered: each completes inside the
 * origin's call), or when its creation failed or needs no requests. */
void os_nreq_detach(os_win_t *w)
{
    if (w->nreq.key) {
        pthread_mutex_lock(&registry);
        const uint32_t n = (uint32_t)w->nreq.key;
        if (w->nreq.served) {
            served_t *t = atomic_load_explicit(&table, memory_order_relaxed);
            atomic_store_explicit(&t->e[n].key, 0, memory_order_relaxed);
            atomic_store_explicit(&t->e[n].w, NULL, memory_order_relaxed);
            atomic_fetch_sub_explicit(&nserved, 1, memory_order_relaxed);
        }
        free_numbers[nfree++] = n;
        pthread_mutex_unlock(&registry);
    }
    w->nreq.key = 0;
    w->nreq.served = false;
    free(w->nreq.peers);
    w->nreq.peers = NULL;
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
        const uint64_t a = run_of(s, i)->addr, len = run_of(s, i)->len;
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
        for (uint32_t i = 0; i < s->nruns; pos += runs[i].len, i++)
            os_copy(addr[i], data + pos, runs[i].len);
        break;
    case OS_RMA_GET:
        for (uint32_t i = 0; i < s->nruns; pos += runs[i].len, i++)
            os_copy(result + pos, addr[i], runs[i].len);
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

/* The window a request names, if this process serves it. */
static os_win_t *window_of(uint64_t key)
{
    const served_t *t = atomic_load_explicit(&table, memory_order_acquire);
    const uint32_t n = (uint32_t)key;
    if (!t || n >= t->cap || atomic_load_explicit(&t->e[n].key, memory_order_acquire) != key)
        return NULL;
    return atomic_load_explicit(&t->e[n].w, memory_order_relaxed);
}

/* One posted request: applied, or left for a later poll. */
static void serve(os_nreq_slot_t *s)
{
    uint32_t expect = SLOT_POSTED;
    /* Acquire: the request is complete (the origin's release). */
    if (!atomic_compare_exchange_strong_explicit(&s->state, &expect, SLOT_TAKEN,
                                                 memory_order_acquire, memory_order_relaxed))
        return;
    os_win_t *w = window_of(s->window);
    bool done = false;
    /* Another thread of this process may be in a call on the window: its
     * state (stats) is that call's until it ends. Recursive: this thread's
     * own call may be what polls. */
    if (w && !(os_threaded && pthread_mutex_trylock(&w->mtx))) {
        if ((done = apply(w, s)))
            OS_STAT(w, NODE_REQUESTS_SERVED, 1);
        if (os_threaded)
            pthread_mutex_unlock(&w->mtx);
    }
    /* Release: the answer is written before DONE. Given back (POSTED), the
     * origin may take it back itself. */
    atomic_store_explicit(&s->state, done ? SLOT_DONE : SLOT_POSTED, memory_order_release);
}

void os_nreq_poll(void)
{
    if (!atomic_load_explicit(&nserved, memory_order_relaxed) || serving || node_me < 0)
        return;
    /* A streak of polls close together is a waiting loop; one MPI_Iprobe
     * between two stretches of computing is not, and must not draw requests
     * that would wait for the next one. Per thread. */
    static _Thread_local uint64_t last;
    static _Thread_local unsigned streak;
    const uint64_t now = os_ticks();
    streak = now - last < ticks_of_ns(STREAK_GAP_NS) ? streak + 1 : 0;
    last = now;
    os_nreq_line_t *line = &node_lines[node_me];
    if (streak >= STREAK_MIN &&
        now - atomic_load_explicit(&line->heartbeat, memory_order_relaxed) >=
            ticks_of_ns(HEARTBEAT_EVERY_NS))
        atomic_store_explicit(&line->heartbeat, now, memory_order_relaxed);
    /* A line per node-mate, read where nothing is posted. */
    os_nreq_slot_t *row = slot_of(node_me, 0);
    for (int o = 0; o < node_n; o++) {
        if (atomic_load_explicit(&row[o].state, memory_order_relaxed) != SLOT_POSTED)
            continue;
        serving = true;
        serve(&row[o]);
        serving = false;
    }
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
        *run_of(s, s->nruns++) = (os_nreq_run_t){ (uint64_t)(uintptr_t)p, (uint32_t)n };
        left -= n;
    }
    return !left;
}

/* Whether every target byte is in the part of the peer's memory mapped
 * here (then loads and stores do, without the target). */
static bool all_mapped(const os_peer_t *p, os_nreq_slot_t *s)
{
    for (uint32_t i = 0; i < s->nruns; i++)
        if (!os_peer_mapped(p, (const char *)(uintptr_t)run_of(s, i)->addr, run_of(s, i)->len))
            return false;
    return true;
}

/* The slot toward target, claimed for a request, if the target polls. */
static os_nreq_slot_t *claim(os_win_t *w, int target, uint64_t *t0)
{
    const struct os_nreq_peer *p = &w->nreq.peers[target];
    if (!p->key || w->peers[target].access != OS_PEER_CMA)
        return NULL;
    /* The heartbeat may be younger than our clock reading. */
    *t0 = os_ticks();
    const uint64_t heartbeat =
        atomic_load_explicit(&node_lines[p->line].heartbeat, memory_order_relaxed);
    if (heartbeat + ticks_of_ns(FRESH_NS) < *t0)
        return NULL;
    os_nreq_slot_t *s = slot_of(p->line, node_me);
    /* Empty, or DONE with its answer read (finish): each request completes
     * inside its call. Claimed all the same: two threads of this process
     * may reach the slot (all windows share it; the second goes by CMA). */
    uint32_t expect = SLOT_EMPTY;
    if (!atomic_compare_exchange_strong_explicit(&s->state, &expect, SLOT_FILLING,
                                                 memory_order_acquire, memory_order_relaxed) &&
        (os_threaded || expect != SLOT_DONE ||
         !atomic_compare_exchange_strong_explicit(&s->state, &expect, SLOT_FILLING,
                                                  memory_order_acquire, memory_order_relaxed)))
        return NULL;
    s->window = p->key;
    return s;
}

static void release(os_nreq_slot_t *s)
{
    atomic_store_explicit(&s->state, SLOT_EMPTY, memory_order_release);
}

/* An answered slot, read: free again. Single-threaded, it stays DONE, and
 * the next claim takes it from there: a store here would pull the line
 * back from the target, which reads it on every poll, only for the claim
 * to pull it again. Another thread could claim a DONE slot before its
 * owner read the answer, so threads empty it. */
static void finish(os_nreq_slot_t *s)
{
    if (os_threaded)
        release(s);
}

/* Post the filled slot and wait for the answer: true with the slot DONE
 * (the caller reads it, then finishes it), false when it was taken back
 * (nobody applied it; the slot is empty again). */
static bool post_and_wait(os_win_t *w, int target, os_nreq_slot_t *s, uint64_t t0)
{
    const os_nreq_line_t *line = &node_lines[w->nreq.peers[target].line];
    /* Release: the request is complete before the target can take it. */
    atomic_store_explicit(&s->state, SLOT_POSTED, memory_order_release);

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
    s->bytes = (uint16_t)bytes;
    s->in = (uint16_t)in;
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
    finish(s);
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
            *run_of(s, s->nruns++) = (os_nreq_run_t){ (uint64_t)(uintptr_t)x->taddr,
                                                      (uint32_t)len };
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
        s->bytes = s->in = (uint16_t)bytes;
        if (!post_and_wait(w, target, s, t0))
            break;
        *st = answer(s, target);
        finish(s);
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
