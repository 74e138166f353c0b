/* Lock piggybacking (paper 003 section 4.3): under the manager design, a lock
 * epoch toward another node that holds one short operation sends it with the
 * lock request at unlock; an epoch with none sends nothing.
 *
 * Every run checks the results of each kind of one-operation epoch (put, get,
 * accumulate, fetch_and_op, compare_and_swap, a get into a derived type freed
 * before unlock, an accumulate on a strided target), epochs that cannot wait (two operations, a flush, an R*
 * call), lock_all, and that a piggybacked operation still waits for the lock:
 * it must not touch the target's memory while the target holds the lock
 * itself, and must see what the target stored before its unlock.
 * Under ONESIDED_LOCK=manager it also checks, by the window's statistics,
 * which epochs were piggybacked, elided or asked for the lock first
 * (ONESIDED_LOCK_PIGGYBACK=0: none piggybacked, every epoch asks). */
#include "common.h"
#include "stats.h"

#include <onesided.h>
#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>

/* Counters of one block of epochs: piggybacked, elided, lock requests. */
typedef struct {
    uint64_t pig, elided, manager;
} counts_t;

static counts_t counts(MPI_Win win)
{
    return (counts_t){ t_stat(win, ONESIDED_STAT_LOCK_PIGGYBACKED),
                       t_stat(win, ONESIDED_STAT_LOCK_ELIDED),
                       t_stat(win, ONESIDED_STAT_LOCK_MANAGER) };
}

static int node_size;
static bool manager, piggyback;

static bool remote(int a, int b)
{
    return node_size && a / node_size != b / node_size;
}

/* Expected counter changes of a block toward target t, when the design is
 * the manager: `kept` epochs of one operation (piggybacked when the
 * operation can be kept), `empty` epochs with none, `asked` lock requests
 * sent before unlock (epochs that could not wait). */
static void expect(const char *what, counts_t before, counts_t after, int t, bool keepable,
                   unsigned kept, unsigned empty, unsigned asked)
{
    if (!manager || !remote(t_rank, t))
        return;
    const uint64_t pig = after.pig - before.pig, elided = after.elided - before.elided;
    const uint64_t mgr = after.manager - before.manager;
    unsigned want_pig = piggyback && keepable ? kept : 0, want_elided = piggyback ? empty : 0;
    /* Without piggybacking every epoch asks; with it, every epoch with an
     * operation sends exactly one lock request (kept or not). */
    unsigned want_mgr = piggyback ? kept + asked : kept + empty + asked;
    CHECK(pig == want_pig, "%s: %llu epochs piggybacked, expected %u", what,
          (unsigned long long)pig, want_pig);
    CHECK(elided == want_elided, "%s: %llu epochs elided, expected %u", what,
          (unsigned long long)elided, want_elided);
    CHECK(mgr == want_mgr, "%s: %llu lock requests, expected %u", what, (unsigned long long)mgr,
          want_mgr);
}

/* One operation per epoch, every kind, alternating lock types. */
static void one_op_epochs(t_win_t *tw, int t)
{
    MPI_Win win = tw->win;
    const bool keepable = tw->flavor != F_DYNAMIC;
    const int64_t me = t_rank;
    int64_t v, old = -1, cmp, got[4] = { -1, -1, -1, -1 };
    counts_t c0 = counts(win);

    v = 100 + me;
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, win);
    MPI_Put(&v, 1, MPI_INT64_T, t, t_disp(tw, t, 0), 1, MPI_INT64_T, win);
    MPI_Win_unlock(t, win);

    MPI_Win_lock(MPI_LOCK_SHARED, t, 0, win);
    MPI_Get(&got[0], 1, MPI_INT64_T, t, t_disp(tw, t, 0), 1, MPI_INT64_T, win);
    MPI_Win_unlock(t, win);
    CHECK(got[0] == 100 + me, "%s: get after put read %lld, expected %lld",
          flavor_name[tw->flavor], (long long)got[0], (long long)(100 + me));

    v = 5;
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, win);
    MPI_Accumulate(&v, 1, MPI_INT64_T, t, t_disp(tw, t, 0), 1, MPI_INT64_T, MPI_SUM, win);
    MPI_Win_unlock(t, win);

    v = 1;
    MPI_Win_lock(MPI_LOCK_SHARED, t, 0, win);
    MPI_Fetch_and_op(&v, &old, MPI_INT64_T, t, t_disp(tw, t, 0), MPI_SUM, win);
    MPI_Win_unlock(t, win);
    CHECK(old == 105 + me, "%s: fetch_and_op read %lld, expected %lld", flavor_name[tw->flavor],
          (long long)old, (long long)(105 + me));

    v = 7;
    cmp = 106 + me;
    old = -1;
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, win);
    MPI_Compare_and_swap(&v, &cmp, &old, MPI_INT64_T, t, t_disp(tw, t, 0), win);
    MPI_Win_unlock(t, win);
    CHECK(old == 106 + me, "%s: compare_and_swap read %lld, expected %lld",
          flavor_name[tw->flavor], (long long)old, (long long)(106 + me));

    /* Slot 1 holds 1000 + the origin's rank (stored by the target below);
     * the get lands in every other element of got, through a type the
     * program frees before the epoch completes. */
    MPI_Datatype every_other;
    MPI_Type_vector(2, 1, 2, MPI_INT64_T, &every_other);
    MPI_Type_commit(&every_other);
    got[0] = got[1] = got[2] = got[3] = -1;
    MPI_Win_lock(MPI_LOCK_SHARED, t, 0, win);
    MPI_Get(got, 1, every_other, t, t_disp(tw, t, 0), 2, MPI_INT64_T, win);
    MPI_Type_free(&every_other);
    MPI_Win_unlock(t, win);
    CHECK(got[0] == 7 && got[1] == -1 && got[2] == 1000 + me && got[3] == -1,
          "%s: get into a freed vector type read %lld %lld %lld %lld", flavor_name[tw->flavor],
          (long long)got[0], (long long)got[1], (long long)got[2], (long long)got[3]);

    /* Three accumulates coalesce into one batch (onesided_acc_coalesce's
     * automatic setting covers targets on other nodes): still one request. */
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, win);
    for (int64_t a = 1; a <= 3; a++)
        MPI_Accumulate(&a, 1, MPI_INT64_T, t, t_disp(tw, t, 40), 1, MPI_INT64_T, MPI_SUM, win);
    MPI_Win_unlock(t, win);

    /* A target type with holes (every other word) is kept too: its runs
     * travel in the request. Read back whole, by a kept get. */
    MPI_Datatype strided;
    MPI_Type_vector(2, 1, 2, MPI_INT64_T, &strided);
    MPI_Type_commit(&strided);
    int64_t pair[2] = { 21 + me, 22 + me }, three[3] = { -1, -1, -1 };
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, win);
    MPI_Accumulate(pair, 2, MPI_INT64_T, t, t_disp(tw, t, 48), 1, strided, MPI_REPLACE, win);
    MPI_Win_unlock(t, win);
    MPI_Type_free(&strided);
    MPI_Win_lock(MPI_LOCK_SHARED, t, 0, win);
    MPI_Get(three, 3, MPI_INT64_T, t, t_disp(tw, t, 48), 3, MPI_INT64_T, win);
    MPI_Win_unlock(t, win);
    CHECK(three[0] == 21 + me && three[2] == 22 + me,
          "%s: accumulate on a strided target then get read %lld _ %lld, expected %lld _ %lld",
          flavor_name[tw->flavor], (long long)three[0], (long long)three[2],
          (long long)(21 + me), (long long)(22 + me));

    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, win);
    MPI_Win_unlock(t, win);

    expect(flavor_name[tw->flavor], c0, counts(win), t, keepable, 9, 1, 0);
}

/* Epochs whose operations cannot all wait for unlock. */
static void asking_epochs(t_win_t *tw, int t)
{
    MPI_Win win = tw->win;
    const bool keepable = tw->flavor != F_DYNAMIC;
    int64_t v[2], got[2] = { -1, -1 };
    counts_t c0 = counts(win);

    /* A flush completes the kept put: the lock is taken then. */
    v[0] = 11;
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, win);
    MPI_Put(v, 1, MPI_INT64_T, t, t_disp(tw, t, 16), 1, MPI_INT64_T, win);
    MPI_Win_flush(t, win);
    MPI_Get(got, 1, MPI_INT64_T, t, t_disp(tw, t, 16), 1, MPI_INT64_T, win);
    MPI_Win_unlock(t, win);
    CHECK(got[0] == 11, "%s: get after flushed put read %lld", flavor_name[tw->flavor],
          (long long)got[0]);

    /* Two operations: the second asks for the lock and sends the first. */
    v[0] = 12;
    v[1] = 13;
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, win);
    MPI_Put(&v[0], 1, MPI_INT64_T, t, t_disp(tw, t, 24), 1, MPI_INT64_T, win);
    MPI_Put(&v[1], 1, MPI_INT64_T, t, t_disp(tw, t, 32), 1, MPI_INT64_T, win);
    MPI_Win_unlock(t, win);

    /* An R* operation completes by itself: it asks at once. */
    MPI_Request req;
    got[0] = got[1] = -1;
    MPI_Win_lock(MPI_LOCK_SHARED, t, 0, win);
    MPI_Rget(got, 2, MPI_INT64_T, t, t_disp(tw, t, 24), 2, MPI_INT64_T, win, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Win_unlock(t, win);
    CHECK(got[0] == 12 && got[1] == 13, "%s: rget after two puts read %lld %lld",
          flavor_name[tw->flavor], (long long)got[0], (long long)got[1]);

    /* Larger than ONESIDED_LOCK_PIGGYBACK's default: asks for the lock. */
    enum { BIG = 4096 / 8 + 1 };
    int64_t *big = malloc(BIG * sizeof *big);
    for (int i = 0; i < BIG; i++)
        big[i] = i;
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, win);
    MPI_Put(big, BIG, MPI_INT64_T, t, t_disp(tw, t, 64), BIG, MPI_INT64_T, win);
    MPI_Win_unlock(t, win);
    MPI_Win_lock(MPI_LOCK_SHARED, t, 0, win);
    MPI_Get(big, 1, MPI_INT64_T, t, t_disp(tw, t, 64 + 8 * (BIG - 1)), 1, MPI_INT64_T, win);
    MPI_Win_unlock(t, win);
    CHECK(big[0] == BIG - 1, "%s: large put's last element read %lld", flavor_name[tw->flavor],
          (long long)big[0]);
    free(big);

    /* Epochs: flush, two puts, rget and the large put asked (4); the last
     * get was kept (1). Without piggybacking all five ask. */
    counts_t c1 = counts(win);
    if (manager && remote(t_rank, t) && piggyback) {
        CHECK(c1.pig - c0.pig == (keepable ? 1u : 0u), "%s: %llu piggybacked, expected %u",
              flavor_name[tw->flavor], (unsigned long long)(c1.pig - c0.pig), keepable ? 1 : 0);
        CHECK(c1.manager - c0.manager == 5, "%s: %llu lock requests, expected 5",
              flavor_name[tw->flavor], (unsigned long long)(c1.manager - c0.manager));
    } else {
        expect(flavor_name[tw->flavor], c0, c1, t, keepable, 0, 0, 5);
    }
}

/* The target holds its own exclusive lock; a piggybacked fetch_and_op from
 * another node must wait for it. */
static void waits_for_lock(t_win_t *tw)
{
    const int origin = node_size ? node_size : 1;
    int64_t *slot = (int64_t *)(tw->base + 48);
    MPI_Win win = tw->win;
    if (t_rank == 0) {
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
        *(volatile int64_t *)slot = 1;
        MPI_Win_sync(win);
        MPI_Barrier(MPI_COMM_WORLD);
        usleep(300 * 1000); /* time for a lock-ignoring request to arrive */
        MPI_Win_sync(win);
        CHECK(*(volatile int64_t *)slot == 1,
              "%s: rank %d's fetch_and_op changed memory while rank 0 held the lock (%lld)",
              flavor_name[tw->flavor], origin, (long long)*slot);
        *(volatile int64_t *)slot = 2;
        MPI_Win_unlock(0, win);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
        CHECK(*(volatile int64_t *)slot == 12, "%s: after rank %d's fetch_and_op: %lld",
              flavor_name[tw->flavor], origin, (long long)*slot);
        MPI_Win_unlock(0, win);
    } else if (t_rank == origin) {
        int64_t add = 10, old = -1;
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
        MPI_Fetch_and_op(&add, &old, MPI_INT64_T, 0, t_disp(tw, 0, 48), MPI_SUM, win);
        MPI_Win_unlock(0, win);
        CHECK(old == 2, "%s: fetch_and_op under rank 0's lock read %lld, expected 2",
              flavor_name[tw->flavor], (long long)old);
        MPI_Barrier(MPI_COMM_WORLD);
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
    }
}

/* Polling after an operation, as mpi4py's MCS mutex does: an origin puts a
 * request flag into the target under a lock it keeps, then waits for the
 * target's answer polling its own memory with MPI_Win_sync. The flag must
 * not wait for the origin's unlock (it would wait forever). Both sides give
 * up after 20 s so that a regression fails instead of hanging. */
static void poll_after_op(t_win_t *tw)
{
    const int origin = node_size ? node_size : 1;
    volatile int64_t *mine = (volatile int64_t *)(tw->base + 32);
    MPI_Win win = tw->win;
    int64_t one = 1;
    double t0 = MPI_Wtime();
    MPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == origin) {
        MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
        MPI_Accumulate(&one, 1, MPI_INT64_T, 0, t_disp(tw, 0, 24), 1, MPI_INT64_T, MPI_REPLACE,
                       win);
        MPI_Win_lock(MPI_LOCK_SHARED, origin, 0, win);
        MPI_Win_sync(win);
        while (*mine != 1 && MPI_Wtime() - t0 < 20)
            MPI_Win_sync(win);
        CHECK(*mine == 1, "%s: no answer to a flag put before polling with MPI_Win_sync",
              flavor_name[tw->flavor]);
        MPI_Win_unlock(origin, win);
        MPI_Win_unlock(0, win);
    } else if (t_rank == 0) {
        volatile int64_t *flag = (volatile int64_t *)(tw->base + 24);
        MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
        MPI_Win_sync(win);
        while (*flag != 1 && MPI_Wtime() - t0 < 20)
            MPI_Win_sync(win);
        MPI_Win_unlock(0, win);
        if (*flag == 1) {
            MPI_Win_lock(MPI_LOCK_SHARED, origin, 0, win);
            MPI_Accumulate(&one, 1, MPI_INT64_T, origin, t_disp(tw, origin, 32), 1, MPI_INT64_T,
                           MPI_REPLACE, win);
            MPI_Win_unlock(origin, win);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* lock_all: one accumulate to every other process, then unlock_all. */
static void lock_all_epoch(t_win_t *tw)
{
    MPI_Win win = tw->win;
    int64_t one = 1;
    unsigned nremote = 0;
    uint64_t pig0 = t_stat(win, ONESIDED_STAT_LOCK_PIGGYBACKED);
    MPI_Win_lock_all(0, win);
    for (int q = 0; q < t_size; q++) {
        if (q == t_rank)
            continue;
        nremote += remote(t_rank, q);
        MPI_Accumulate(&one, 1, MPI_INT64_T, q, t_disp(tw, q, 56), 1, MPI_INT64_T, MPI_SUM, win);
    }
    MPI_Win_unlock_all(win);
    uint64_t pig = t_stat(win, ONESIDED_STAT_LOCK_PIGGYBACKED) - pig0;
    unsigned want = manager && piggyback && tw->flavor != F_DYNAMIC ? nremote : 0;
    CHECK(pig == want, "%s: lock_all piggybacked %llu epochs, expected %u",
          flavor_name[tw->flavor], (unsigned long long)pig, want);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock(MPI_LOCK_SHARED, t_rank, 0, win);
    int64_t sum = *(volatile int64_t *)(tw->base + 56);
    MPI_Win_unlock(t_rank, win);
    CHECK(sum == t_size - 1, "%s: lock_all accumulates summed to %lld, expected %d",
          flavor_name[tw->flavor], (long long)sum, t_size - 1);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    const char *lock = getenv("ONESIDED_LOCK"), *pb = getenv("ONESIDED_LOCK_PIGGYBACK");
    manager = lock && !strcmp(lock, "manager");
    piggyback = !pb || atoi(pb) > 0;
    const int flavors[] = { F_ALLOCATE, F_CREATE, F_ALLOCMEM, F_DYNAMIC };
    for (size_t f = 0; f < sizeof flavors / sizeof flavors[0]; f++) {
        node_size = t_node_size_of(flavors[f]);
        /* A target on another node when there is one: the origin from rank+K. */
        const int t = (t_rank + (node_size ? node_size : 1)) % t_size;
        const int from = (t_rank - (node_size ? node_size : 1) + t_size) % t_size;
        t_win_t tw = t_win_make(flavors[f], 64 + 4096 + 8, MPI_INFO_NULL);
        /* Slot 1 of every window: 1000 + the rank whose epochs target it. */
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t_rank, 0, tw.win);
        ((int64_t *)tw.base)[1] = 1000 + from;
        MPI_Win_unlock(t_rank, tw.win);
        MPI_Barrier(MPI_COMM_WORLD);

        one_op_epochs(&tw, t);
        asking_epochs(&tw, t);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Win_lock(MPI_LOCK_SHARED, t_rank, 0, tw.win);
        int64_t s0 = ((volatile int64_t *)tw.base)[0], s5 = ((volatile int64_t *)tw.base)[5];
        MPI_Win_unlock(t_rank, tw.win);
        CHECK(s0 == 7, "%s: the target's own view of slot 0 is %lld, expected 7",
              flavor_name[tw.flavor], (long long)s0);
        CHECK(s5 == 6, "%s: three accumulates summed to %lld, expected 6",
              flavor_name[tw.flavor], (long long)s5);
        waits_for_lock(&tw);
        poll_after_op(&tw);
        lock_all_epoch(&tw);
        t_win_free(&tw);
    }
    return t_finish("test_lock_piggyback");
}
