/* Between nodes: the barrier of a synchronizing MPI_Win_fence, which also
 * tells every process whether any of them queued operations (sync.c).
 *
 * The host's allreduce was most of a fence epoch between virtual nodes of
 * one host: on Open MPI 5.0.11 its ob1 point-to-point, 1.0-1.2 us of a
 * 1.5 us epoch, where osc/sm's own fence is a shared-memory barrier. Where
 * every process of the window reaches the cache line of window rank 0's
 * network lock word (net/lockword.c) through UCX's mapping (virtual nodes
 * of one host, and real processes of one node), the barrier is a counter
 * there: each process adds its arrival, rank 0 waits for all of them and
 * publishes the release. Anywhere else (another host, a transport that maps
 * nothing) it stays the host's allreduce. Whether every process maps the
 * line is agreed by the window's first synchronizing fence, which is an
 * allreduce anyway.
 *
 * Words of rank 0's line, after the lock word and os_win_remote_completes:
 *   ARRIVE_WORD + (seq & 1)  arrivals of barrier seq: +1 each, +2^32 with a
 *                            queued operation; rank 0 clears it before the
 *                            release. Barrier seq + 2 uses the word again,
 *                            which no process reaches before every process
 *                            has left barrier seq + 1, whose release rank 0
 *                            gives only after clearing this one.
 *   RELEASE_WORD             seq << 1 | (some process queued), stored once
 *                            all arrived; it only grows, and cannot pass seq
 *                            before this process arrives at seq + 1.
 * Ordering: each arrival is a release read-modify-write, so rank 0's
 * acquire load of the full count synchronizes with every arrival (a release
 * sequence), and its release store of the release word with every waiter's
 * acquire load. Everything a process did before the barrier (its epoch's
 * operations, completed by os_remote_flush) happens before everything any
 * process does after it, as after the host's allreduce. */
#include "os_net.h"

enum { ARRIVE_WORD = 2, RELEASE_WORD = 4 };
#define ARRIVAL_COUNT 0xffffffffull
#define ARRIVAL_QUEUED (1ull << 32)

static _Atomic uint64_t *root_line(const os_win_t *w)
{
    return w->rank == 0 ? w->netword : (_Atomic uint64_t *)w->nl_map[0];
}

/* Until *word passes the test, backing off; other threads of this process
 * may use the window meanwhile, and requests of others are served by the
 * back-off's poll (os_backoff_hook). */
static uint64_t wait_root(_Atomic uint64_t *word, uint64_t target, bool count)
{
    uint64_t v = atomic_load_explicit(word, memory_order_acquire);
    if (count ? (v & ARRIVAL_COUNT) >= target : v >> 1 >= target)
        return v;
    pthread_mutex_t *held = os_wait_release_begin();
    os_backoff_t b = OS_BACKOFF_INIT;
    for (;;) {
        os_backoff_wait(&b);
        v = atomic_load_explicit(word, memory_order_acquire);
        if (count ? (v & ARRIVAL_COUNT) >= target : v >> 1 >= target)
            break;
    }
    os_wait_release_end(held);
    return v;
}

static void mapped_barrier(os_win_t *w, int *queued)
{
    _Atomic uint64_t *line = root_line(w);
    const uint64_t seq = ++w->barrier_seq;
    _Atomic uint64_t *arrive = line + ARRIVE_WORD + (seq & 1);
    uint64_t release;

    atomic_fetch_add_explicit(arrive, 1 + (*queued ? ARRIVAL_QUEUED : 0), memory_order_acq_rel);
    if (w->rank == 0) {
        const uint64_t all = wait_root(arrive, (uint64_t)w->nranks, true);
        atomic_store_explicit(arrive, 0, memory_order_relaxed);
        release = seq << 1 | ((all >> 32) != 0);
        atomic_store_explicit(line + RELEASE_WORD, release, memory_order_release);
    } else {
        release = wait_root(line + RELEASE_WORD, seq, false);
    }
    *queued = (int)(release & 1);
    OS_STAT(w, FENCE_MAPPED, 1);
}

os_status_t os_remote_barrier(os_win_t *w, int *queued)
{
    if (w->barrier_mapped > 0) {
        mapped_barrier(w, queued);
        return OS_OK;
    }
    if (w->barrier_mapped < 0) {
        PMPI_Allreduce(MPI_IN_PLACE, queued, 1, MPI_INT, MPI_LOR, w->comm);
        return OS_OK;
    }
    /* The first: bit 0 the queued operations, bit 1 a process that cannot
     * reach rank 0's line (or was told not to). */
    const bool reach = os_config.fence_mapped && (w->rank == 0 || w->nl_map[0]);
    int v = (*queued ? 1 : 0) | (reach ? 0 : 2);
    PMPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_BOR, w->comm);
    *queued = v & 1;
    w->barrier_mapped = v & 2 ? -1 : 1;
    return OS_OK;
}
