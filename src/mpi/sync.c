/* MPI_Win_fence, post/start/complete/wait/test, lock/unlock, flush, sync. */
#include "os_mpi.h"

#include <stdlib.h>

#define WIN_OR_RAISE(call)                                                                     \
    OS_WIN_ENTER(w, win);                                                                      \
    if (!w)                                                                                    \
        return os_mpi_raise_win(win, call, OS_ERR(OS_ERR_WIN, "%s: not a window", call));

static int done(MPI_Win win, const char *call, os_status_t st)
{
    return st ? os_mpi_raise_win(win, call, st) : MPI_SUCCESS;
}

int MPI_Win_fence(int assert, MPI_Win win)
{
    WIN_OR_RAISE("MPI_Win_fence");
    return done(win, "MPI_Win_fence", os_win_fence(w, assert));
}

/* Ranks of a group, as ranks of the window's group, into w->group_ranks
 * (no allocation per epoch: a post or start is a few hundred nanoseconds
 * inside a node, which a malloc and free of two arrays each showed in). A
 * group larger than the window's holds some process outside it. */
static os_status_t group_ranks(os_win_t *w, MPI_Group group, int *n)
{
    int size;
    if (group == MPI_GROUP_NULL)
        return OS_ERR(OS_ERR_ARG, "MPI_GROUP_NULL");
    PMPI_Group_size(group, &size);
    if (size > w->nranks)
        return OS_ERR(OS_ERR_RANK, "a group of %d processes, the window's has %d", size,
                      w->nranks);
    PMPI_Group_translate_ranks(group, size, w->rank_identity, w->group, w->group_ranks);
    for (int i = 0; i < size; i++)
        if (w->group_ranks[i] == MPI_UNDEFINED)
            return OS_ERR(OS_ERR_RANK, "process %d of the group is not in the window's group", i);
    *n = size;
    return OS_OK;
}

int MPI_Win_post(MPI_Group group, int assert, MPI_Win win)
{
    WIN_OR_RAISE("MPI_Win_post");
    int n = 0;
    os_status_t st = group_ranks(w, group, &n);
    if (!st)
        st = os_win_post(w, w->group_ranks, n, assert);
    return done(win, "MPI_Win_post", st);
}

int MPI_Win_start(MPI_Group group, int assert, MPI_Win win)
{
    WIN_OR_RAISE("MPI_Win_start");
    int n = 0;
    os_status_t st = group_ranks(w, group, &n);
    if (!st)
        st = os_win_start(w, w->group_ranks, n, assert);
    return done(win, "MPI_Win_start", st);
}

int MPI_Win_complete(MPI_Win win)
{
    WIN_OR_RAISE("MPI_Win_complete");
    return done(win, "MPI_Win_complete", os_win_complete(w));
}

int MPI_Win_wait(MPI_Win win)
{
    WIN_OR_RAISE("MPI_Win_wait");
    return done(win, "MPI_Win_wait", os_win_wait(w));
}

int MPI_Win_test(MPI_Win win, int *flag)
{
    WIN_OR_RAISE("MPI_Win_test");
    return done(win, "MPI_Win_test", os_win_test(w, flag));
}

/* MPI_Win_lock and MPI_Win_unlock past their inline cases, out of line. */
static __attribute__((noinline)) int win_lock(int lock_type, int rank, int assert, MPI_Win win)
{
    WIN_OR_RAISE("MPI_Win_lock");
    os_status_t st;
    if (lock_type != MPI_LOCK_SHARED && lock_type != MPI_LOCK_EXCLUSIVE)
        st = OS_ERR(OS_ERR_LOCKTYPE, "MPI_Win_lock: lock type %d is neither MPI_LOCK_SHARED "
                    "nor MPI_LOCK_EXCLUSIVE", lock_type);
    else if (rank == MPI_PROC_NULL)
        return MPI_SUCCESS;
    else
        st = os_win_lock(w, lock_type == MPI_LOCK_EXCLUSIVE, rank, assert);
    return done(win, "MPI_Win_lock", st);
}

/* A jump from MPI_Win_lock, which then keeps nothing across a call. */
static __attribute__((noinline)) int win_lock_queued(os_win_t *w, bool exclusive, int rank,
                                                     uint16_t ticket)
{
    os_win_lock_queued(w, exclusive, rank, ticket);
    return MPI_SUCCESS;
}

static __attribute__((noinline)) int win_unlock(int rank, MPI_Win win)
{
    WIN_OR_RAISE("MPI_Win_unlock");
    if (rank == MPI_PROC_NULL)
        return MPI_SUCCESS;
    return done(win, "MPI_Win_unlock", os_win_unlock(w, rank));
}

/* Jumps from MPI_Win_lock and MPI_Win_unlock on a window spanning nodes:
 * its lock word where it is free or nothing waits for its release, else
 * the general path. */
static __attribute__((noinline)) int win_lock_spanning(os_win_t *w, int lock_type, int rank,
                                                       int assert, MPI_Win win)
{
    if (os_win_lock_spanning_now(w, lock_type == MPI_LOCK_EXCLUSIVE, rank, assert))
        return MPI_SUCCESS;
    return win_lock(lock_type, rank, assert, win);
}

static __attribute__((noinline)) int win_unlock_spanning(os_win_t *w, int rank, MPI_Win win)
{
    if (os_win_unlock_spanning_now(w, rank))
        return MPI_SUCCESS;
    return win_unlock(rank, win);
}

/* The lock and unlock that neither fail nor wait (os_win_lock_now,
 * os_win_unlock_now): a window not the last one looked up, another thread
 * that may call MPI, and everything else go out of line, so that these
 * keep no register to save. */
int MPI_Win_lock(int lock_type, int rank, int assert, MPI_Win win)
{
    os_win_t *w = os_mpi_win_cached(win);
    if (!w || os_threaded || (lock_type != MPI_LOCK_SHARED && lock_type != MPI_LOCK_EXCLUSIVE))
        return win_lock(lock_type, rank, assert, win);
    const bool exclusive = lock_type == MPI_LOCK_EXCLUSIVE;
    uint16_t ticket;
    switch (os_win_lock_now(w, exclusive, rank, assert, &ticket)) {
    case OS_LOCK_TAKEN:
        return MPI_SUCCESS;
    case OS_LOCK_QUEUED:
        return win_lock_queued(w, exclusive, rank, ticket);
    case OS_LOCK_SPANNING:
        return win_lock_spanning(w, lock_type, rank, assert, win);
    default:
        return win_lock(lock_type, rank, assert, win);
    }
}

int MPI_Win_unlock(int rank, MPI_Win win)
{
    os_win_t *w = os_mpi_win_cached(win);
    if (!w || os_threaded)
        return win_unlock(rank, win);
    switch (os_win_unlock_now(w, rank)) {
    case OS_UNLOCK_DONE:
        return MPI_SUCCESS;
    case OS_UNLOCK_SPANNING:
        return win_unlock_spanning(w, rank, win);
    default:
        return win_unlock(rank, win);
    }
}

int MPI_Win_lock_all(int assert, MPI_Win win)
{
    WIN_OR_RAISE("MPI_Win_lock_all");
    return done(win, "MPI_Win_lock_all", os_win_lock_all(w, assert));
}

int MPI_Win_unlock_all(MPI_Win win)
{
    WIN_OR_RAISE("MPI_Win_unlock_all");
    return done(win, "MPI_Win_unlock_all", os_win_unlock_all(w));
}

/* MPI_Win_flush and MPI_Win_flush_local of one rank past the quick case
 * (flush_quick), out of line: a window not the last one looked up (a
 * program flushing two windows in turn) still takes the quick check. */
static __attribute__((noinline)) int flush_rank(int rank, MPI_Win win, bool local)
{
    const char *call = local ? "MPI_Win_flush_local" : "MPI_Win_flush";
    WIN_OR_RAISE(call);
    if (rank == MPI_PROC_NULL)
        return MPI_SUCCESS;
    if (!os_threaded && (w->acc_batch || w->multinode ? os_win_flush_done_spanning(w, rank)
                                                      : os_win_flush_done(w, rank)))
        return MPI_SUCCESS;
    return done(win, call, os_win_flush(w, rank, false));
}

static __attribute__((noinline)) int flush_spanning(int rank, MPI_Win win, os_win_t *w,
                                                    bool local)
{
    if (os_win_flush_done_spanning(w, rank))
        return MPI_SUCCESS;
    return flush_rank(rank, win, local); /* which checks again, before it waits */
}

/* The flush of one rank whose operations all completed when they were
 * issued (os_win_flush_done): its checks and the barrier, with no call and
 * no register saved. Anything else jumps out of line. */
static inline __attribute__((always_inline)) int flush_quick(int rank, MPI_Win win, bool local)
{
    os_win_t *w = os_mpi_win_cached(win);
    if (!w || os_threaded)
        return flush_rank(rank, win, local);
    if (w->acc_batch || w->multinode)
        return flush_spanning(rank, win, w, local);
    if (!os_win_flush_done(w, rank))
        return flush_rank(rank, win, local);
    return MPI_SUCCESS;
}

int MPI_Win_flush(int rank, MPI_Win win)
{
    return flush_quick(rank, win, false);
}

int MPI_Win_flush_all(MPI_Win win)
{
    WIN_OR_RAISE("MPI_Win_flush_all");
    return done(win, "MPI_Win_flush_all", os_win_flush(w, 0, true));
}

int MPI_Win_flush_local(int rank, MPI_Win win)
{
    return flush_quick(rank, win, true);
}

int MPI_Win_flush_local_all(MPI_Win win)
{
    WIN_OR_RAISE("MPI_Win_flush_local_all");
    return done(win, "MPI_Win_flush_local_all", os_win_flush(w, 0, true));
}

int MPI_Win_sync(MPI_Win win)
{
    WIN_OR_RAISE("MPI_Win_sync");
    return done(win, "MPI_Win_sync", os_win_sync(w));
}
