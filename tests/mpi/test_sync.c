/* Synchronization: fence sequences with asserts (immediate and queued paths,
 * counter parity reuse), PSCW patterns with test and NOCHECK, locks with
 * self-targets and notification through MPI_Win_sync. */
#include "common.h"
#include "onesided.h"

#include <unistd.h>

static void fence_sequences(int defer)
{
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "onesided_fence_defer", defer ? "1" : "0");
    t_win_t t = t_win_make(F_ALLOCATE, 16 * t_size, info);
    MPI_Info_free(&info);
    long *w = (long *)t.base, values[2];
    int ok = 1;
    /* Epoch kinds in a pattern that reuses both counter parities many times:
     * some epochs empty, some opened with NOPRECEDE, some all-to-all. Epochs
     * alternate between two slot areas: a neighbour may write area (it+1)%2
     * as soon as it leaves the fence, while this process still reads it%2. */
    MPI_Win_fence(MPI_MODE_NOPRECEDE, t.win);
    for (int it = 0; it < 60; it++) {
        int kind = it % 4, area = (it % 2) * t_size;
        if (kind != 3) {
            for (int r = 0; r < t_size; r++) {
                if (kind == 1 && r != (t_rank + 1) % t_size)
                    continue;
                /* The origin buffer must stay intact until the epoch ends:
                 * a queued put reads it only at the closing fence. */
                values[it % 2] = it * 1000 + t_rank;
                MPI_Put(&values[it % 2], 1, MPI_LONG, r, (area + t_rank) * 8, 1, MPI_LONG, t.win);
            }
        }
        MPI_Win_fence(kind == 3 ? MPI_MODE_NOSTORE : 0, t.win);
        for (int r = 0; r < t_size; r++) {
            int expect_new = kind == 0 || kind == 2 || (kind == 1 && (r + 1) % t_size == t_rank);
            if (expect_new && w[area + r] != it * 1000 + r) {
                ok = 0;
                fprintf(stderr, "[rank %d] epoch %d: slot %d holds %ld\n", t_rank, it, r, w[area + r]);
            }
        }
        if (kind == 3) {
            /* An empty epoch: next fence closes nothing, so NOPRECEDE is allowed. */
            MPI_Win_fence(MPI_MODE_NOPRECEDE, t.win);
        }
    }
    MPI_Win_fence(MPI_MODE_NOSUCCEED, t.win);
    CHECK(ok, "fence sequence (defer=%d)", defer);

    /* Gets and accumulates in a NOPRECEDE epoch complete at the closing fence. */
    for (int r = 0; r < t_size; r++)
        w[r] = 10 * t_rank + r;
    long got[64], one = 1;
    MPI_Win_fence(MPI_MODE_NOPRECEDE, t.win);
    for (int r = 0; r < t_size; r++)
        MPI_Get(&got[r], 1, MPI_LONG, r, t_rank * 8, 1, MPI_LONG, t.win);
    MPI_Win_fence(MPI_MODE_NOSTORE | MPI_MODE_NOPUT, t.win);
    for (int r = 0; r < t_size; r++)
        MPI_Accumulate(&one, 1, MPI_LONG, r, 0, 1, MPI_LONG, MPI_SUM, t.win);
    MPI_Win_fence(MPI_MODE_NOSUCCEED, t.win);
    ok = 1;
    for (int r = 0; r < t_size; r++)
        ok &= got[r] == 10 * r + t_rank;
    CHECK(ok, "gets queued to the fence (defer=%d)", defer);
    CHECK(w[0] == 10 * t_rank + t_size, "accumulates from all (defer=%d): %ld", defer, w[0]);
    t_win_free(&t);
}

/* Regression: a fence that executes queued operations (the epoch it closes
 * began with NOPRECEDE) must not let the next epoch run operations at once.
 * Rank 1 queues many puts to itself; rank 0, with nothing incoming, leaves
 * the fence early and puts to the same place in the next epoch: that later
 * put must be the one that stays. */
static void fence_queued_then_immediate(void)
{
    if (t_size < 2)
        return;
    t_win_t t = t_win_make(F_ALLOCATE, 64, MPI_INFO_NULL);
    long one = 1, two = 2;
    int ok = 1;
    for (int round = 0; round < 50; round++) {
        MPI_Win_fence(MPI_MODE_NOPRECEDE, t.win);
        if (t_rank == 1)
            for (int i = 0; i < 2000; i++)
                MPI_Put(&one, 1, MPI_LONG, 1, 0, 1, MPI_LONG, t.win);
        MPI_Win_fence(0, t.win);
        if (t_rank == 0)
            MPI_Put(&two, 1, MPI_LONG, 1, 0, 1, MPI_LONG, t.win);
        MPI_Win_fence(MPI_MODE_NOSUCCEED, t.win);
        if (t_rank == 1 && *(long *)t.base != 2) {
            ok = 0;
            fprintf(stderr, "[rank 1] round %d: the earlier epoch's put landed last\n", round);
        }
    }
    CHECK(ok, "epoch order across a fence that ran queued operations");
    t_win_free(&t);
}

/* After MPI_MODE_NOPRECEDE an origin may touch a target's memory only once
 * the target has entered that fence: the target's own loads and stores
 * before it come first. Each process in turn is late: it stores to its
 * window, sleeps, checks that nothing landed, stores again, and only then
 * enters the fence, while every other process puts into it at once. Inside
 * a node nothing is queued for this (each first access waits for its
 * target's entry instead): fallback_fence_deferred stays 0, unless
 * ONESIDED_FENCE_DEFER asks for the queued design. */
static void fence_noprecede_entry(void)
{
    const char *d = getenv("ONESIDED_FENCE_DEFER");
    const bool defer = d && atoi(d) != 0;
    T_FOR_EACH_FLAVOR(f) {
        t_win_t t = t_win_make(f, 8 * t_size, MPI_INFO_NULL);
        long *w = (long *)t.base, mine;
        int early = 0, lost = 0;
        onesided_win_stats_t before, after;
        onesided_win_get_stats(t.win, &before);
        for (int round = 0; round < 2 * t_size; round++) {
            const int late = round % t_size;
            if (t_rank == late) {
                for (int r = 0; r < t_size; r++)
                    w[r] = -1;
                usleep(3000);
                for (int r = 0; r < t_size; r++) {
                    early += w[r] != -1;
                    w[r] = -1;
                }
            }
            MPI_Win_fence(MPI_MODE_NOPRECEDE, t.win);
            mine = 1000L * round + t_rank;
            if (t_rank != late)
                MPI_Put(&mine, 1, MPI_LONG, late, t_disp(&t, late, 8 * t_rank), 1, MPI_LONG,
                        t.win);
            MPI_Win_fence(MPI_MODE_NOSUCCEED, t.win);
            if (t_rank == late)
                for (int r = 0; r < t_size; r++)
                    lost += w[r] != (r == late ? -1 : 1000L * round + r);
        }
        onesided_win_get_stats(t.win, &after);
        CHECK(!early && !lost, "%s: NOPRECEDE epochs: %d puts landed before their target "
              "entered the fence, %d slots wrong after it", flavor_name[f], early, lost);
        const uint64_t deferred = after.counter[ONESIDED_STAT_FALLBACK_FENCE_DEFERRED] -
                                  before.counter[ONESIDED_STAT_FALLBACK_FENCE_DEFERRED];
        if (!defer && t_node_size_of(f) == 0)
            CHECK(deferred == 0, "%s: %llu operations of NOPRECEDE epochs inside a node were "
                  "queued to the closing fence", flavor_name[f], (unsigned long long)deferred);
        t_win_free(&t);
    }
}

static void fence_with_load_store(void)
{
    /* Fences order direct stores into shared memory as well. */
    int *base, *right_mem;
    MPI_Win win;
    MPI_Aint sz;
    int du;
    if (t_hosts > 1)
        return; /* no memory is shared across hosts */
    MPI_Win_allocate_shared(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    MPI_Win_shared_query(win, (t_rank + 1) % t_size, &sz, &du, &right_mem);
    int ok = 1;
    MPI_Win_fence(0, win);
    for (int it = 0; it < 50; it++) {
        *right_mem = it * 100 + t_rank;
        MPI_Win_fence(0, win);
        ok &= *base == it * 100 + (t_rank + t_size - 1) % t_size;
        MPI_Win_fence(0, win);
    }
    MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
    CHECK(ok, "stores ordered by fences");
    MPI_Win_free(&win);
}

static void pscw_patterns(void)
{
    t_win_t t = t_win_make(F_ALLOCATE, 8 * t_size, MPI_INFO_NULL);
    long *w = (long *)t.base;
    MPI_Group world, g;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int ok = 1;
    onesided_win_stats_t before, after;
    onesided_win_get_stats(t.win, &before);
    /* All to rank 0, many epochs, alternating NOCHECK and test-polling. */
    for (int it = 0; it < 40; it++) {
        int nocheck = it % 2 && 0;
        if (t_rank == 0) {
            int n = t_size - 1, *others = malloc(sizeof(int) * (size_t)(n + 1));
            for (int i = 0; i < n; i++)
                others[i] = i + 1;
            MPI_Group_incl(world, n, others, &g);
            MPI_Win_post(g, nocheck, t.win);
            if (it % 3 == 0) {
                int flag = 0;
                while (!flag)
                    MPI_Win_test(t.win, &flag);
            } else {
                MPI_Win_wait(t.win);
            }
            for (int r = 1; r < t_size; r++)
                ok &= w[r] == it * 100 + r;
            free(others);
        } else {
            int zero = 0;
            MPI_Group_incl(world, 1, &zero, &g);
            MPI_Win_start(g, nocheck, t.win);
            long v = it * 100 + t_rank;
            MPI_Put(&v, 1, MPI_LONG, 0, t_rank * 8, 1, MPI_LONG, t.win);
            MPI_Win_complete(t.win);
        }
        MPI_Group_free(&g);
    }
    CHECK(ok, "all-to-one PSCW epochs");
    /* Each put is its epoch's first operation to rank 0, which waits for the
     * post: on one node it still takes the fast path (it waits there). */
    onesided_win_get_stats(t.win, &after);
    if (t_rank != 0 && t_node_size_of(F_ALLOCATE) == 0) {
        const uint64_t fast = after.counter[ONESIDED_STAT_FAST_PATH_OPS] -
                              before.counter[ONESIDED_STAT_FAST_PATH_OPS];
        CHECK(fast == 40, "PSCW epochs' first puts took the fast path %llu times, want 40",
              (unsigned long long)fast);
    }
    /* NOCHECK: posts are made, then a barrier guarantees they happened. */
    int right = (t_rank + 1) % t_size, left = (t_rank + t_size - 1) % t_size;
    for (int it = 0; it < 10; it++) {
        MPI_Group gl, gr;
        MPI_Group_incl(world, 1, &left, &gl);
        MPI_Group_incl(world, 1, &right, &gr);
        MPI_Win_post(gl, MPI_MODE_NOCHECK, t.win);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Win_start(gr, MPI_MODE_NOCHECK, t.win);
        long v = it + 1000 * t_rank;
        MPI_Put(&v, 1, MPI_LONG, right, 0, 1, MPI_LONG, t.win);
        MPI_Win_complete(t.win);
        MPI_Win_wait(t.win);
        ok &= w[0] == it + 1000 * left;
        MPI_Group_free(&gl);
        MPI_Group_free(&gr);
    }
    CHECK(ok, "ring PSCW with MPI_MODE_NOCHECK");
    /* A complete that returned is visible to the target's MPI_Win_test once
     * both have passed a barrier (mpi4py's testStartCompletePostTest): the
     * target learns of a completion from another node by a message, which
     * must have arrived before the origin's complete returns. */
    for (int it = 0; it < 20; it++) {
        if (t_rank == 0) {
            int n = t_size - 1, *others = malloc(sizeof(int) * (size_t)(n + 1));
            for (int i = 0; i < n; i++)
                others[i] = i + 1;
            MPI_Group_incl(world, n, others, &g);
            free(others);
            MPI_Win_start(g, 0, t.win);
            MPI_Barrier(MPI_COMM_WORLD);
            MPI_Win_complete(t.win);
            MPI_Barrier(MPI_COMM_WORLD);
        } else {
            int zero = 0, flag = 1;
            MPI_Group_incl(world, 1, &zero, &g);
            MPI_Win_post(g, 0, t.win);
            MPI_Win_test(t.win, &flag);
            ok &= !flag;
            MPI_Barrier(MPI_COMM_WORLD);
            MPI_Barrier(MPI_COMM_WORLD);
            MPI_Win_test(t.win, &flag);
            ok &= flag;
            if (!flag)
                MPI_Win_wait(t.win);
        }
        MPI_Group_free(&g);
    }
    CHECK(ok, "MPI_Win_test after the origin's complete and a barrier");
    /* An origin with an empty group, and a target exposed to nobody. */
    MPI_Group empty;
    MPI_Group_incl(world, 0, NULL, &empty);
    MPI_Win_post(empty, 0, t.win);
    MPI_Win_start(empty, 0, t.win);
    MPI_Win_complete(t.win);
    MPI_Win_wait(t.win);
    MPI_Group_free(&empty);
    MPI_Group_free(&world);
    t_win_free(&t);
}

static void locks(void)
{
    t_win_t t = t_win_make(F_ALLOCATE, 64, MPI_INFO_NULL);
    /* Locking one's own window blocks until granted, then local access is safe. */
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t_rank, 0, t.win);
    long v = 7 + t_rank, back = 0;
    MPI_Put(&v, 1, MPI_LONG, t_rank, 0, 1, MPI_LONG, t.win);
    MPI_Win_flush(t_rank, t.win);
    MPI_Get(&back, 1, MPI_LONG, t_rank, 0, 1, MPI_LONG, t.win);
    MPI_Win_unlock(t_rank, t.win);
    CHECK(back == v, "self lock");
    /* Several targets locked at once, released in another order. */
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, t.win);
    if (t_size > 1)
        MPI_Win_lock(MPI_LOCK_SHARED, t_size - 1, MPI_MODE_NOCHECK, t.win);
    MPI_Win_unlock(0, t.win);
    if (t_size > 1)
        MPI_Win_unlock(t_size - 1, t.win);
    MPI_Barrier(MPI_COMM_WORLD);
    /* Notification: rank 0 raises a flag in every window; the others poll
     * their own memory with MPI_Win_sync inside lock_all, as MPI-3 allows. */
    MPI_Win_lock_all(0, t.win);
    volatile long *flag = (volatile long *)(t.base + 8);
    if (t_rank == 0) {
        long one = 1;
        for (int r = 1; r < t_size; r++) {
            long data = 4200 + r;
            MPI_Put(&data, 1, MPI_LONG, r, 16, 1, MPI_LONG, t.win);
            MPI_Win_flush(r, t.win);
            MPI_Put(&one, 1, MPI_LONG, r, 8, 1, MPI_LONG, t.win);
            MPI_Win_flush(r, t.win);
        }
    } else {
        while (*flag == 0)
            MPI_Win_sync(t.win);
        long data;
        memcpy(&data, t.base + 16, 8);
        CHECK(data == 4200 + t_rank, "data before flag: %ld", data);
    }
    MPI_Win_unlock_all(t.win);
    t_win_free(&t);
}

/* A lock asked for while another process holds the target's exclusive lock
 * waits for it, shared or exclusive, and its epoch sees what the holder put
 * before its unlock. On one node the front end's inline lock then draws a
 * ticket that is not served at once and waits for its turn out of line
 * (os_win_lock_now's OS_LOCK_QUEUED, os_win_lock_queued): a lock that did
 * not wait reads the word before the holder's put. */
static void lock_waits(void)
{
    if (t_size < 2)
        return;
    t_win_t t = t_win_make(F_ALLOCATE, 64, MPI_INFO_NULL);
    const bool one_node = t_virtual_node_size() == 0 && t_hosts == 1;
    for (int type = 0; type < 2; type++) {
        const int lock_type = type ? MPI_LOCK_EXCLUSIVE : MPI_LOCK_SHARED;
        const long want = 500 + type;
        if (t_rank == 1) {
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, t.win);
            MPI_Barrier(MPI_COMM_WORLD);
            usleep(50000);
            MPI_Put(&want, 1, MPI_LONG, 0, 0, 1, MPI_LONG, t.win);
            MPI_Win_unlock(0, t.win);
        } else {
            MPI_Barrier(MPI_COMM_WORLD);
        }
        if (t_rank == 0) {
            onesided_win_stats_t before, after;
            onesided_win_get_stats(t.win, &before);
            long got = 0;
            MPI_Win_lock(lock_type, 0, 0, t.win);
            MPI_Get(&got, 1, MPI_LONG, 0, 0, 1, MPI_LONG, t.win);
            MPI_Win_unlock(0, t.win);
            onesided_win_get_stats(t.win, &after);
            CHECK(got == want, "%s lock behind an exclusive one read %ld, want %ld",
                  type ? "exclusive" : "shared", got, want);
            if (one_node)
                CHECK(after.counter[ONESIDED_STAT_LOCK_CONTENDED] ==
                          before.counter[ONESIDED_STAT_LOCK_CONTENDED] + 1,
                      "%s lock behind an exclusive one: %llu contended locks, want 1",
                      type ? "exclusive" : "shared",
                      (unsigned long long)(after.counter[ONESIDED_STAT_LOCK_CONTENDED] -
                                           before.counter[ONESIDED_STAT_LOCK_CONTENDED]));
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    t_win_free(&t);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    fence_sequences(0);
    fence_sequences(1);
    fence_queued_then_immediate();
    fence_noprecede_entry();
    fence_with_load_store();
    pscw_patterns();
    locks();
    lock_waits();
    return t_finish("test_sync");
}
