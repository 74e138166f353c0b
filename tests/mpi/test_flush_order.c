/* What MPI_Win_flush orders, on 2 processes (more wait in the collectives).
 *
 * A flush of mapped memory is a memory barrier where an operation since the
 * last one left plain stores in the CPU's store buffer (a put, a get of
 * more than 2048 bytes, a bulk or exclusive-lock accumulate), and nothing
 * at all on x86 where every operation since was a locked CPU atomic or a
 * get of up to 2048 bytes (stat flush_no_barrier, os_flush_barrier):
 *
 *  - decisions: which sequences of operations make the next flush skip
 *    the barrier, read from the counter, on one node and between virtual
 *    nodes (ONESIDED_NODE_SIZE=1), where the target's memory is UCX's
 *    mapping of it. There a bulk accumulate is bulk only once every
 *    process joined the handshake, and MPI_Win_flush_all takes the general
 *    path, which always fences: those two are not checked. Two windows
 *    flushed in turn decide as one does;
 *  - store buffering, the one reordering x86 allows (a store, then a load
 *    of another location, the load served first): each process writes its
 *    own word with the operation under test, flushes, then reads the
 *    other's word with MPI_Get. After a flush the write is complete at its
 *    target, so the two reads cannot both find 0. Without the barrier a
 *    put's store can still sit in the store buffer when the get reads, and
 *    both do find 0 (a put's flush without the barrier: in 19, 152 and 177
 *    of 20000 rounds, three runs on this machine). Fetch_and_op,
 *    compare_and_swap and accumulate, which skip the barrier, are checked
 *    the same way.
 * Each round starts both processes together (round_start), the words of
 * round i fresh in both windows. */
#include "common.h"
#include "stats.h"

#include <onesided.h>
#include <sched.h>

enum { ROUNDS = 20000 };
enum { OP_PUT, OP_FOP, OP_CAS, OP_ACC, NOPS };
static const char *const op_name[NOPS] = { "put", "fetch_and_op", "compare_and_swap",
                                           "accumulate" };

/* The flush after `what` skipped the barrier exactly when it may: never off
 * x86 (os_flush_barrier), else when `barrier` is false. `skipped` is the
 * count flush_no_barrier rose by. */
static void check_skip(uint64_t skipped, bool barrier, const char *flush, const char *what)
{
#if defined(__x86_64__) || defined(__i386__)
    const uint64_t want = barrier ? 0 : 1;
#else
    const uint64_t want = 0;
    (void)barrier;
#endif
    CHECK(skipped == want, "%s after %s: %s the barrier", flush, what,
          skipped ? "skipped" : "took");
}

/* Rank 0's flushes of rank 1's memory after each sequence: whether the
 * flush needed the barrier. vnode: between virtual nodes. */
static void decisions(bool vnode)
{
    bool vnode_unmapped = false;
    MPI_Win win, win2;
    enum { WORDS = 1024, LONG_GET = 512 }; /* 4096 bytes: past GET_ORDERED_MAX */
    long *base, *base2, one = 1, r[4] = { 0 }, big[64], got[LONG_GET];
    MPI_Win_allocate(WORDS * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base,
                     &win);
    MPI_Win_allocate(sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base2, &win2);
    *base2 = 0;
    memset(base, 0, WORDS * sizeof(long));
    for (int i = 0; i < 64; i++)
        big[i] = 1;
    MPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == 0) {
        const struct {
            const char *what;
            int ops[3]; /* a sequence of up to three, -1 ends it */
            bool barrier, node_only;
        } seq[] = {
            { "fetch_and_op", { 0, -1 }, false, false },
            { "compare_and_swap", { 1, -1 }, false, false },
            { "one-element accumulate", { 2, -1 }, false, false },
            { "one-element get", { 3, -1 }, false, false },
            { "put", { 4, -1 }, true, false },
            { "nothing since the last flush", { -1 }, false, false },
            /* Its stores are plain ones into this process's buffer. */
            { "four-element get", { 5, -1 }, false, false },
            { "4096-byte get", { 8, -1 }, true, false },
            { "four-element get, then put", { 5, 4, -1 }, true, false },
            { "put, then fetch_and_op", { 4, 0, -1 }, false, false },
            { "fetch_and_op, then put", { 0, 4, -1 }, true, false },
            /* A NO_OP fetch is a plain load, and entering the atomic
             * section need not be a locked instruction (a fenceless count):
             * the put's store may still be in the store buffer. */
            { "put, then a NO_OP fetch_and_op", { 4, 7, -1 }, true, false },
            { "bulk accumulate of 64 elements", { 6, -1 }, true, true },
        };
        MPI_Win_lock_all(0, win);
        MPI_Win_flush(1, win);
        if (vnode) {
            /* Mapped memory, or nothing to decide: every flush then takes
             * the general path. */
            const uint64_t mapped = t_stat(win, ONESIDED_STAT_REMOTE_MAPPED);
            MPI_Put(&one, 1, MPI_LONG, 1, 4, 1, MPI_LONG, win);
            MPI_Win_flush(1, win);
            if (t_stat(win, ONESIDED_STAT_REMOTE_MAPPED) == mapped) {
                printf("# decisions between virtual nodes not checked: UCX maps no memory here\n");
                vnode_unmapped = true;
            }
        }
        for (size_t s = 0; s < sizeof seq / sizeof seq[0]; s++) {
            const uint64_t before = t_stat(win, ONESIDED_STAT_FLUSH_NO_BARRIER);
            for (int k = 0; k < 3 && seq[s].ops[k] >= 0; k++) {
                switch (seq[s].ops[k]) {
                case 0: MPI_Fetch_and_op(&one, r, MPI_LONG, 1, 0, MPI_SUM, win); break;
                case 1: MPI_Compare_and_swap(&one, r, r + 1, MPI_LONG, 1, 1, win); break;
                case 2: MPI_Accumulate(&one, 1, MPI_LONG, 1, 2, 1, MPI_LONG, MPI_SUM, win); break;
                case 3: MPI_Get(r, 1, MPI_LONG, 1, 3, 1, MPI_LONG, win); break;
                case 4: MPI_Put(&one, 1, MPI_LONG, 1, 4, 1, MPI_LONG, win); break;
                case 5: MPI_Get(r, 4, MPI_LONG, 1, 8, 4, MPI_LONG, win); break;
                case 6: MPI_Accumulate(big, 64, MPI_LONG, 1, 64, 64, MPI_LONG, MPI_SUM, win); break;
                case 7: MPI_Fetch_and_op(NULL, r, MPI_LONG, 1, 0, MPI_NO_OP, win); break;
                case 8:
                    MPI_Get(got, LONG_GET, MPI_LONG, 1, WORDS - LONG_GET, LONG_GET, MPI_LONG,
                            win);
                    break;
                }
            }
            MPI_Win_flush(1, win);
            const uint64_t skipped = t_stat(win, ONESIDED_STAT_FLUSH_NO_BARRIER) - before;
            if (!vnode_unmapped && !(vnode && seq[s].node_only))
                check_skip(skipped, seq[s].barrier, "MPI_Win_flush", seq[s].what);
        }
        /* MPI_Win_flush_all and MPI_Win_flush_local decide alike. */
        for (int k = 0; k < 4; k++) {
            const bool put = k & 1, all = k & 2;
            const uint64_t before = t_stat(win, ONESIDED_STAT_FLUSH_NO_BARRIER);
            if (put)
                MPI_Put(&one, 1, MPI_LONG, 1, 5, 1, MPI_LONG, win);
            else
                MPI_Fetch_and_op(&one, r, MPI_LONG, 1, 6, MPI_SUM, win);
            if (all)
                MPI_Win_flush_all(win);
            else
                MPI_Win_flush_local(1, win);
            const uint64_t skipped = t_stat(win, ONESIDED_STAT_FLUSH_NO_BARRIER) - before;
            if (!vnode_unmapped && !(vnode && all))
                check_skip(skipped, put, all ? "MPI_Win_flush_all" : "MPI_Win_flush_local",
                           put ? "put" : "fetch_and_op");
        }
        /* Two windows flushed in turn, each flush of a window other than
         * the last one the program named: the same decision (between
         * virtual nodes such flushes took the general path, which always
         * fences). */
        MPI_Win_lock_all(0, win2);
        for (int k = 0; k < 2; k++) {
            const uint64_t before = t_stat(win, ONESIDED_STAT_FLUSH_NO_BARRIER),
                           before2 = t_stat(win2, ONESIDED_STAT_FLUSH_NO_BARRIER);
            MPI_Fetch_and_op(&one, r, MPI_LONG, 1, 6, MPI_SUM, win);
            MPI_Fetch_and_op(&one, r + 1, MPI_LONG, 1, 0, MPI_SUM, win2);
            MPI_Win_flush(1, win);
            MPI_Win_flush(1, win2);
            if (!vnode_unmapped) {
                check_skip(t_stat(win, ONESIDED_STAT_FLUSH_NO_BARRIER) - before, false,
                           "MPI_Win_flush of one of two windows", "fetch_and_op");
                check_skip(t_stat(win2, ONESIDED_STAT_FLUSH_NO_BARRIER) - before2, false,
                           "MPI_Win_flush of the other", "fetch_and_op");
            }
        }
        MPI_Win_unlock_all(win2);
        MPI_Win_unlock_all(win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == 1)
        CHECK(base[0] == 3 && base[4] == 1 && base[64] == 1 && base[127] == 1 && *base2 == 2,
              "the operations' results: %ld %ld %ld %ld %ld", base[0], base[4], base[64],
              base[127], *base2);
    MPI_Win_free(&win2);
    MPI_Win_free(&win);
}

/* Both processes at round i: a spin barrier on the two words of a window
 * both map (a plain store, then loads with back-off), or MPI_Barrier where
 * they map none (between nodes: the rounds start loosely, and the
 * forbidden outcome is checked all the same). */
static void round_start(volatile long *go, MPI_Comm pair, long i)
{
    if (!go) {
        MPI_Barrier(pair);
        return;
    }
    __atomic_store_n(&go[t_rank], i, __ATOMIC_RELEASE);
    for (int spins = 0; __atomic_load_n(&go[1 - t_rank], __ATOMIC_ACQUIRE) < i; spins++)
        if (spins > 1000)
            sched_yield();
}

/* Store buffering through `op` and MPI_Get: the rounds where both reads
 * found 0. Word i of each process's window is written by that process
 * itself in round i, through the operation, and read by the other. */
static long store_buffering(int op, MPI_Win win, volatile long *go, MPI_Comm pair)
{
    const int me = t_rank, other = 1 - t_rank;
    long one = 1, res = 0, zero = 0, lost = 0;
    char *found = calloc(ROUNDS + 1, 1), *theirs = calloc(ROUNDS + 1, 1);
    MPI_Win_lock_all(0, win);
    for (long i = 1; i <= ROUNDS; i++) {
        long seen = 0;
        round_start(go, pair, (long)op * ROUNDS + i);
        switch (op) {
        case OP_PUT: MPI_Put(&one, 1, MPI_LONG, me, i, 1, MPI_LONG, win); break;
        case OP_FOP: MPI_Fetch_and_op(&one, &res, MPI_LONG, me, i, MPI_SUM, win); break;
        case OP_CAS: MPI_Compare_and_swap(&one, &zero, &res, MPI_LONG, me, i, win); break;
        case OP_ACC: MPI_Accumulate(&one, 1, MPI_LONG, me, i, 1, MPI_LONG, MPI_SUM, win); break;
        }
        MPI_Win_flush(me, win);
        MPI_Get(&seen, 1, MPI_LONG, other, i, 1, MPI_LONG, win);
        MPI_Win_flush(other, win);
        found[i] = seen != 0;
    }
    MPI_Win_unlock_all(win);
    MPI_Sendrecv(found, ROUNDS + 1, MPI_CHAR, other, 0, theirs, ROUNDS + 1, MPI_CHAR, other, 0,
                 pair, MPI_STATUS_IGNORE);
    for (long i = 1; i <= ROUNDS; i++)
        lost += !found[i] && !theirs[i];
    free(found);
    free(theirs);
    return lost;
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    if (t_virtual_node_size() <= 1)
        decisions(t_virtual_node_size() == 1);
    /* The litmus on ranks 0 and 1; the others take part in the collectives. */
    MPI_Comm pair;
    MPI_Comm_split(MPI_COMM_WORLD, t_rank < 2 ? 0 : MPI_UNDEFINED, t_rank, &pair);
    if (pair != MPI_COMM_NULL) {
        MPI_Comm node;
        MPI_Win win, sync;
        long *base, *sbase;
        MPI_Aint sz;
        int nn, du;
        MPI_Comm_split_type(pair, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
        MPI_Comm_size(node, &nn);
        MPI_Win_allocate_shared(t_rank == 0 ? 2 * 64 : 0, 1, MPI_INFO_NULL, node, &sbase, &sync);
        MPI_Win_shared_query(sync, 0, &sz, &du, &sbase);
        volatile long *go = nn == 2 ? sbase : NULL;
        if (go && t_rank == 0)
            go[0] = go[1] = 0;
        const size_t words = ROUNDS + 1;
        MPI_Win_allocate((MPI_Aint)(words * sizeof(long)), sizeof(long), MPI_INFO_NULL, pair,
                         &base, &win);
        for (int op = 0; op < NOPS; op++) {
            memset(base, 0, words * sizeof(long));
            MPI_Barrier(pair);
            const long lost = store_buffering(op, win, go, pair);
            CHECK(lost == 0, "%s + flush, then a get of the other's word: both found 0 in %ld of "
                  "%d rounds", op_name[op], lost, ROUNDS);
            if (t_rank == 0)
                printf("store buffering through %s + flush: %ld of %d rounds both found 0\n",
                       op_name[op], lost, ROUNDS);
            MPI_Barrier(pair);
        }
        MPI_Win_free(&win);
        MPI_Win_free(&sync);
        MPI_Comm_free(&node);
        MPI_Comm_free(&pair);
    }
    return t_finish("test_flush_order");
}
