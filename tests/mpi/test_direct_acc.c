/* Direct accumulate (paper 001): one-element accumulates to another node
 * done by one network atomic, and why they stay exact.
 *
 *  - mixed paths: while every rank adds to one counter with Fetch_and_op (a
 *    network atomic from other nodes, a CPU atomic from the owner's node),
 *    the owner runs large accumulates over the same counter. A bulk
 *    accumulate's plain stores could lose network atomics (a window of a
 *    nanosecond per element, too narrow to catch reliably), so the test
 *    checks the rule itself: no element took the bulk path on a window with
 *    direct accumulates, while on one node the same program does use it.
 *  - compare-and-swap: every rank increments a counter with a CAS loop.
 *  - results and ordering from one origin: REPLACE, SUM, BAND, BOR, BXOR and
 *    NO_OP on 4- and 8-byte integers and on doubles, mixed with accumulates
 *    that go as requests (MAX, coalesced batches) on the same element.
 *  - which path ran: onesided_win_get_stats counts direct accumulates on
 *    windows spanning nodes, none when a process sets onesided_acc_direct=0,
 *    none into memory that takes the accumulate mutex (MPI_Win_create over
 *    malloc'd memory with a second process on the owner's node).
 *  - MPI_Win_set_info cannot change what was agreed at creation (lock design,
 *    direct accumulate) in one process only.
 *  - accumulates of several elements to memory UCX maps here (another
 *    virtual node of this host) are applied with this process's CPU atomics,
 *    exactly, beside the target's own.
 *  - served in bulk: large accumulates from other nodes, which the target
 *    applies as requests, race with everybody's Fetch_and_op on the same
 *    counter. The target combines them in bulk only where it can hold off
 *    every network atomic (all of them emulated by its own worker: TCP
 *    alone); `--served-bulk yes|no` says which this run must show.
 *  - mapped bulk: between virtual nodes whose memory and network words UCX
 *    maps in every process (MPI_Win_allocate over shared memory), every
 *    process joins the bulk handshake for every target, and large
 *    accumulates, the owner's and other nodes', run in bulk beside
 *    everybody's Fetch_and_op, exact; elsewhere (MPI_Win_create memory,
 *    TCP alone, onesided_acc_bulk_min=0) nobody joins for all and nothing
 *    runs in bulk. `--acc-host yes|no` says which this run must show on
 *    MPI_Win_allocate.
 */
#include "common.h"
#include "stats.h"

#include <onesided.h>
#include <stdbool.h>

enum { ITERS = 3000, BULK_ELEMS = 4096, BULK_EVERY = 4 };

/* Does this process have a target on another node in a window of all ranks
 * of this flavor? */
static bool has_remote_target(int flavor)
{
    return t_node_size_of(flavor) > 0;
}

static MPI_Info info_of(const char *key, const char *value)
{
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, key, value);
    return info;
}

/* Every rank adds 1 to rank 0's counter `iters` times with Fetch_and_op
 * while the ranks for which `bulks` is true also add 1 to BULK_ELEMS
 * elements starting at the counter every BULK_EVERY iterations; rank 0
 * checks the totals. Returns the window, for the caller's path checks. */
static t_win_t race_on_counter(int flavor, int iters, bool (*bulks)(int rank), const char *what)
{
    t_win_t tw = t_win_make(flavor, (MPI_Aint)sizeof(int64_t) * BULK_ELEMS, MPI_INFO_NULL);
    int64_t one = 1, old, *ones = malloc(sizeof(int64_t) * BULK_ELEMS);
    for (int i = 0; i < BULK_ELEMS; i++)
        ones[i] = 1;
    MPI_Win_lock_all(0, tw.win);
    for (int i = 0; i < iters; i++) {
        MPI_Fetch_and_op(&one, &old, MPI_INT64_T, 0, t_disp(&tw, 0, 0), MPI_SUM, tw.win);
        if (bulks(t_rank) && i % BULK_EVERY == 0)
            MPI_Accumulate(ones, BULK_ELEMS, MPI_INT64_T, 0, t_disp(&tw, 0, 0), BULK_ELEMS,
                           MPI_INT64_T, MPI_SUM, tw.win);
        MPI_Win_flush(0, tw.win);
    }
    MPI_Win_unlock_all(tw.win);
    MPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == 0) {
        int nbulk = 0;
        for (int r = 0; r < t_size; r++)
            nbulk += bulks(r);
        const int64_t b = (int64_t)nbulk * ((iters + BULK_EVERY - 1) / BULK_EVERY);
        const int64_t *v = (const int64_t *)tw.base;
        CHECK(v[0] == (int64_t)t_size * iters + b,
              "%s, %s: counter %lld, expected %lld (updates lost between paths)",
              flavor_name[flavor], what, (long long)v[0], (long long)t_size * iters + b);
        CHECK(v[BULK_ELEMS - 1] == b, "%s, %s: last element %lld, expected %lld",
              flavor_name[flavor], what, (long long)v[BULK_ELEMS - 1], (long long)b);
    }
    free(ones);
    return tw;
}

static bool is_rank0(int rank)
{
    return rank == 0;
}

/* The node size of the window test_served_bulk races on. */
static int served_node_size;

static bool off_rank0_node(int rank)
{
    const int k = served_node_size;
    return k > 0 && rank / k != 0;
}

/* Whether this run must show every process joined to the bulk handshake
 * for every target on MPI_Win_allocate windows spanning nodes (--acc-host). */
static bool acc_host_expected;

/* Whether windows of this flavor must run bulk accumulates beside direct
 * ones: every process joined for every target (acc_host). */
static bool acc_host_of(int flavor)
{
    return acc_host_expected && flavor == F_ALLOCATE;
}

/* Every process joined for every target, or (acc_host_of false) not all
 * of them did (a process joins for all targets or for none). */
static void check_joined(const t_win_t *tw, int flavor)
{
    const uint64_t joined = t_stat(tw->win, ONESIDED_STAT_ACC_HOST_JOINED);
    if (acc_host_of(flavor))
        CHECK(joined == (uint64_t)t_size, "%s: rank %d joined the bulk handshake for %llu "
              "targets, expected all %d", flavor_name[flavor], t_rank,
              (unsigned long long)joined, t_size);
    int all = joined == (uint64_t)t_size, every = 0;
    MPI_Allreduce(&all, &every, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (!acc_host_of(flavor) && has_remote_target(flavor))
        CHECK(!every, "%s: every process joined the bulk handshake, which this run must not "
              "allow", flavor_name[flavor]);
}

/* Rank 0 runs the large accumulates on its own memory: in bulk on one
 * node, and between nodes only where every process joined the handshake. */
static void test_mixed_paths(int flavor)
{
    t_win_t tw = race_on_counter(flavor, ITERS, is_rank0, "owner's accumulates");
    check_joined(&tw, flavor);
    if (t_rank == 0) {
        uint64_t bulk = t_stat(tw.win, ONESIDED_STAT_ACC_BULK_ELEMS);
        if (has_remote_target(flavor) && !acc_host_of(flavor))
            CHECK(bulk == 0, "%s: %llu elements took the bulk path beside direct accumulates",
                  flavor_name[flavor], (unsigned long long)bulk);
        else
            CHECK(bulk > 0, "%s: no bulk accumulate on %s", flavor_name[flavor],
                  has_remote_target(flavor) ? "memory every process joined for" : "one node");
    }
    if (has_remote_target(flavor) && t_rank != 0 && flavor == F_ALLOCATE) {
        int k = t_node_size_of(flavor);
        if (t_rank / k != 0)
            CHECK(t_stat(tw.win, ONESIDED_STAT_ACC_DIRECT) == ITERS,
                  "rank %d on another node than rank 0: %llu direct accumulates, expected %d",
                  t_rank, (unsigned long long)t_stat(tw.win, ONESIDED_STAT_ACC_DIRECT), ITERS);
    }
    t_win_free(&tw);
}

/* The ranks on other nodes than rank 0 run the large accumulates, which
 * rank 0 serves as requests. expect: 1 = rank 0 must have served some in
 * bulk, 0 = none, -1 = either. */
static void test_served_bulk(int flavor, int expect)
{
    if (!has_remote_target(flavor))
        return;
    served_node_size = t_node_size_of(flavor);
    t_win_t tw = race_on_counter(flavor, ITERS / 2, off_rank0_node, "served accumulates");
    if (t_rank == 0) {
        const uint64_t bulk = t_stat(tw.win, ONESIDED_STAT_ACC_BULK_ELEMS);
        if (expect == 1)
            CHECK(bulk > 0, "%s: no served accumulate combined in bulk over TCP alone",
                  flavor_name[flavor]);
        else if (expect == 0)
            CHECK(bulk == 0, "%s: %llu elements combined in bulk where network atomics may "
                  "bypass the worker", flavor_name[flavor], (unsigned long long)bulk);
    }
    t_win_free(&tw);
}

/* The ranks on other nodes than rank 0 run large accumulates on rank 0's
 * memory through UCX's mapping, in bulk where every process joined the
 * handshake, racing with everybody's Fetch_and_op; then each fetches the
 * whole block back in one Get_accumulate (in bulk too), which must see
 * every update. */
static void test_mapped_bulk(int flavor)
{
    if (!has_remote_target(flavor))
        return;
    served_node_size = t_node_size_of(flavor);
    t_win_t tw = race_on_counter(flavor, ITERS / 2, off_rank0_node, "mapped accumulates");
    check_joined(&tw, flavor);
    int nbulk = 0;
    for (int r = 0; r < t_size; r++)
        nbulk += off_rank0_node(r);
    const int64_t b = (int64_t)nbulk * ((ITERS / 2 + BULK_EVERY - 1) / BULK_EVERY);
    int64_t *got = calloc(BULK_ELEMS, sizeof *got), dummy = 0;
    MPI_Win_lock_all(0, tw.win);
    MPI_Get_accumulate(&dummy, 0, MPI_INT64_T, got, BULK_ELEMS, MPI_INT64_T, 0,
                       t_disp(&tw, 0, 0), BULK_ELEMS, MPI_INT64_T, MPI_NO_OP, tw.win);
    MPI_Win_unlock_all(tw.win);
    CHECK(got[0] == (int64_t)t_size * (ITERS / 2) + b && got[BULK_ELEMS - 1] == b,
          "%s: rank %d fetched %lld and %lld, expected %lld and %lld", flavor_name[flavor],
          t_rank, (long long)got[0], (long long)got[BULK_ELEMS - 1],
          (long long)t_size * (ITERS / 2) + b, (long long)b);
    if (off_rank0_node(t_rank)) {
        const uint64_t bulk = t_stat(tw.win, ONESIDED_STAT_ACC_BULK_ELEMS);
        if (acc_host_of(flavor))
            CHECK(bulk > 0, "%s: rank %d ran no accumulate on mapped memory in bulk",
                  flavor_name[flavor], t_rank);
        else
            CHECK(bulk == 0, "%s: rank %d ran %llu elements in bulk on memory not every "
                  "process joined for", flavor_name[flavor], t_rank, (unsigned long long)bulk);
    }
    free(got);
    t_win_free(&tw);
}

/* A lock-free increment: read, then compare-and-swap until it holds. */
static void test_cas_counter(void)
{
    t_win_t tw = t_win_make(F_ALLOCATE, 16, MPI_INFO_NULL);
    const int target = t_size - 1, rounds = ITERS / 10;
    int64_t zero = 0, cur, next, seen;
    long retries = 0;
    MPI_Win_lock_all(0, tw.win);
    for (int i = 0; i < rounds; i++) {
        MPI_Fetch_and_op(&zero, &cur, MPI_INT64_T, target, 8, MPI_NO_OP, tw.win);
        MPI_Win_flush(target, tw.win);
        for (;;) {
            next = cur + 1;
            MPI_Compare_and_swap(&next, &cur, &seen, MPI_INT64_T, target, 8, tw.win);
            MPI_Win_flush(target, tw.win);
            if (seen == cur)
                break;
            cur = seen;
            retries++;
        }
    }
    MPI_Win_unlock_all(tw.win);
    MPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == target)
        CHECK(((int64_t *)tw.base)[1] == (int64_t)t_size * rounds,
              "CAS counter %lld, expected %lld", (long long)((int64_t *)tw.base)[1],
              (long long)t_size * rounds);
    t_win_free(&tw);
}

/* One origin per slot: each rank works on its own slots at the next rank. */
static void test_results_and_order(int flavor)
{
    /* slots per origin: int64 a, int64 b, int32 c, int32 pad, double d */
    enum { SLOT = 32 };
    t_win_t tw = t_win_make(flavor, (MPI_Aint)SLOT * t_size, MPI_INFO_NULL);
    const int target = (t_rank + 1) % t_size;
    const MPI_Aint a = t_disp(&tw, target, (MPI_Aint)SLOT * t_rank), b = a + 8, c = a + 16,
                   d = a + 24;
    int64_t v64, r64, x64;
    int32_t v32, r32;
    double vd, rd;

    MPI_Win_lock(MPI_LOCK_SHARED, target, 0, tw.win);
    /* 8 bytes: REPLACE, then SUM (a coalesced batch under the default
     * settings), then a fetch that must see both. */
    v64 = 40;
    MPI_Accumulate(&v64, 1, MPI_INT64_T, target, a, 1, MPI_INT64_T, MPI_REPLACE, tw.win);
    v64 = 2;
    MPI_Accumulate(&v64, 1, MPI_INT64_T, target, a, 1, MPI_INT64_T, MPI_SUM, tw.win);
    v64 = 0;
    MPI_Fetch_and_op(&v64, &r64, MPI_INT64_T, target, a, MPI_NO_OP, tw.win);
    MPI_Win_flush(target, tw.win);
    CHECK(r64 == 42, "%s: REPLACE 40, SUM 2, then NO_OP read %lld", flavor_name[flavor],
          (long long)r64);
    /* a request (MAX has no network atomic) followed by a direct fetch-add */
    v64 = 100;
    MPI_Accumulate(&v64, 1, MPI_INT64_T, target, a, 1, MPI_INT64_T, MPI_MAX, tw.win);
    v64 = 1;
    MPI_Fetch_and_op(&v64, &r64, MPI_INT64_T, target, a, MPI_SUM, tw.win);
    MPI_Win_flush(target, tw.win);
    CHECK(r64 == 100, "%s: MAX 100 then SUM fetched %lld", flavor_name[flavor], (long long)r64);
    /* bitwise on 8 bytes */
    v64 = 0x0ff0;
    MPI_Fetch_and_op(&v64, &r64, MPI_INT64_T, target, b, MPI_REPLACE, tw.win);
    MPI_Win_flush(target, tw.win);
    v64 = 0x00ff;
    MPI_Fetch_and_op(&v64, &r64, MPI_INT64_T, target, b, MPI_BAND, tw.win);
    MPI_Win_flush(target, tw.win);
    CHECK(r64 == 0x0ff0, "%s: BAND fetched %llx after REPLACE 0x0ff0", flavor_name[flavor], (unsigned long long)r64);
    v64 = 0x1000;
    MPI_Fetch_and_op(&v64, &r64, MPI_INT64_T, target, b, MPI_BOR, tw.win);
    MPI_Win_flush(target, tw.win);
    CHECK(r64 == 0x00f0, "%s: BOR fetched %llx after BAND 0x00ff", flavor_name[flavor], (unsigned long long)r64);
    v64 = 0x10f0;
    MPI_Get_accumulate(&v64, 1, MPI_INT64_T, &r64, 1, MPI_INT64_T, target, b, 1, MPI_INT64_T,
                       MPI_BXOR, tw.win);
    MPI_Win_flush(target, tw.win);
    CHECK(r64 == 0x10f0, "%s: BXOR fetched %llx after BOR 0x1000", flavor_name[flavor], (unsigned long long)r64);
    x64 = 0;
    v64 = -5;
    MPI_Compare_and_swap(&v64, &x64, &r64, MPI_INT64_T, target, b, tw.win);
    MPI_Win_flush(target, tw.win);
    CHECK(r64 == 0, "%s: CAS fetched %llx after BXOR 0x10f0", flavor_name[flavor], (unsigned long long)r64);
    v64 = 0;
    MPI_Fetch_and_op(&v64, &r64, MPI_INT64_T, target, b, MPI_NO_OP, tw.win);
    MPI_Win_flush(target, tw.win);
    CHECK(r64 == -5, "%s: CAS 0 -> -5 left %lld", flavor_name[flavor], (long long)r64);
    /* 4 bytes: the neighbouring word must not change */
    v32 = -7;
    MPI_Fetch_and_op(&v32, &r32, MPI_INT32_T, target, c, MPI_SUM, tw.win);
    MPI_Win_flush(target, tw.win);
    CHECK(r32 == 0, "%s: int32 first fetch %d", flavor_name[flavor], r32);
    v32 = 10;
    MPI_Fetch_and_op(&v32, &r32, MPI_INT32_T, target, c, MPI_SUM, tw.win);
    MPI_Win_flush(target, tw.win);
    CHECK(r32 == -7, "%s: int32 SUM fetched %d", flavor_name[flavor], r32);
    uint32_t u = 0xffffffffu, ur, ux = 3u;
    MPI_Compare_and_swap(&u, &ux, &ur, MPI_UINT32_T, target, c, tw.win);
    MPI_Win_flush(target, tw.win);
    CHECK(ur == 3u, "%s: uint32 CAS saw %u", flavor_name[flavor], ur);
    int32_t pad;
    int32_t z32 = 0;
    MPI_Fetch_and_op(&z32, &pad, MPI_INT32_T, target, c + 4, MPI_NO_OP, tw.win);
    MPI_Win_flush(target, tw.win);
    CHECK(pad == 0, "%s: the word after an int32 atomic changed to %d", flavor_name[flavor], pad);
    /* doubles: REPLACE and NO_OP are bit patterns; SUM goes as a request */
    vd = 1.5;
    MPI_Fetch_and_op(&vd, &rd, MPI_DOUBLE, target, d, MPI_REPLACE, tw.win);
    MPI_Win_flush(target, tw.win);
    vd = 0.25;
    MPI_Accumulate(&vd, 1, MPI_DOUBLE, target, d, 1, MPI_DOUBLE, MPI_SUM, tw.win);
    MPI_Fetch_and_op(&vd, &rd, MPI_DOUBLE, target, d, MPI_NO_OP, tw.win);
    MPI_Win_flush(target, tw.win);
    CHECK(rd == 1.75, "%s: double REPLACE 1.5, SUM 0.25 read %g", flavor_name[flavor], rd);
    MPI_Win_unlock(target, tw.win);
    MPI_Barrier(MPI_COMM_WORLD);
    const char *mine = tw.base + (size_t)SLOT * ((t_rank + t_size - 1) % t_size);
    int32_t c32;
    memcpy(&c32, mine + 16, 4);
    CHECK(c32 == -1, "%s: int32 slot holds %d at the target", flavor_name[flavor], c32);
    t_win_free(&tw);
}

/* Which path: direct on windows spanning nodes, unless a process declines
 * or the target's memory takes the accumulate mutex. */
static void test_paths(void)
{
    int64_t one = 1, old;
    for (int variant = 0; variant < 3; variant++) {
        /* 0: default; 1: rank 0 declines; 2: malloc'd memory (CMA on the owner's node) */
        const int flavor = variant == 2 ? F_CREATE : F_ALLOCATE;
        /* Where CMA is refused, each process is a node of its own on malloc'd
         * memory: the others reach it over UCX, with its network atomics. */
        const int k = t_node_size_of(flavor);
        MPI_Info info = info_of(ONESIDED_INFO_ACC_DIRECT, variant == 1 && t_rank == 0 ? "0" : "1");
        t_win_t tw = t_win_make(flavor, 64, info);
        MPI_Info_free(&info);
        const int target = 0;
        MPI_Win_lock(MPI_LOCK_SHARED, target, 0, tw.win);
        for (int i = 0; i < 10; i++)
            MPI_Fetch_and_op(&one, &old, MPI_INT64_T, target, t_disp(&tw, target, 0), MPI_SUM,
                             tw.win);
        MPI_Win_unlock(target, tw.win);
        uint64_t direct = t_stat(tw.win, ONESIDED_STAT_ACC_DIRECT);
        uint64_t fallback = t_stat(tw.win, ONESIDED_STAT_FALLBACK_ACC_REQUEST);
        const bool remote = k > 0 && t_rank / k != target / k;
        const bool cma_node = k > 1; /* a second process on the owner's node uses CMA */
        const bool expect_direct = remote && (variant == 0 || (variant == 2 && !cma_node));
        CHECK(direct == (expect_direct ? 10u : 0u),
              "variant %d: %llu direct accumulates, expected %d", variant,
              (unsigned long long)direct, expect_direct ? 10 : 0);
        CHECK(fallback == (remote && !expect_direct ? 10u : 0u),
              "variant %d: %llu accumulates sent as requests", variant,
              (unsigned long long)fallback);
        MPI_Barrier(MPI_COMM_WORLD);
        if (t_rank == target)
            CHECK(*(int64_t *)tw.base == 10 * t_size, "variant %d: counter %lld", variant,
                  (long long)*(int64_t *)tw.base);
        t_win_free(&tw);
    }
}

static void info_value(MPI_Win win, const char *key, char *v)
{
    MPI_Info used;
    int flag = 0;
    MPI_Win_get_info(win, &used);
    MPI_Info_get(used, key, MPI_MAX_INFO_VAL, v, &flag);
    MPI_Info_free(&used);
    if (!flag)
        strcpy(v, "(unset)");
}

/* Choices every process must share stay as agreed at creation. */
static void test_set_info_keeps_agreed(void)
{
    t_win_t tw = t_win_make(F_ALLOCATE, 64, MPI_INFO_NULL);
    char lock0[MPI_MAX_INFO_VAL + 1], direct0[MPI_MAX_INFO_VAL + 1];
    char lock1[MPI_MAX_INFO_VAL + 1], direct1[MPI_MAX_INFO_VAL + 1];
    info_value(tw.win, ONESIDED_INFO_LOCK, lock0);
    info_value(tw.win, ONESIDED_INFO_ACC_DIRECT, direct0);
    CHECK(!strcmp(direct0, has_remote_target(F_ALLOCATE) ? "1" : "0"),
          "direct accumulate reported as %s", direct0);
    /* Collective, with a different info object on rank 0. */
    MPI_Info info;
    MPI_Info_create(&info);
    if (t_rank == 0) {
        MPI_Info_set(info, ONESIDED_INFO_LOCK, strcmp(lock0, "network") ? "network" : "manager");
        MPI_Info_set(info, ONESIDED_INFO_ACC_DIRECT, "0");
    }
    MPI_Win_set_info(tw.win, info);
    MPI_Info_free(&info);
    info_value(tw.win, ONESIDED_INFO_LOCK, lock1);
    info_value(tw.win, ONESIDED_INFO_ACC_DIRECT, direct1);
    CHECK(!strcmp(lock0, lock1), "MPI_Win_set_info changed the lock design from %s to %s", lock0,
          lock1);
    CHECK(!strcmp(direct0, direct1), "MPI_Win_set_info changed direct accumulate from %s to %s",
          direct0, direct1);
    int64_t one = 1;
    for (int i = 0; i < 20; i++) {
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t_size - 1, 0, tw.win);
        MPI_Accumulate(&one, 1, MPI_INT64_T, t_size - 1, 0, 1, MPI_INT64_T, MPI_SUM, tw.win);
        MPI_Win_unlock(t_size - 1, tw.win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == t_size - 1)
        CHECK(*(int64_t *)tw.base == 20 * t_size, "counter %lld after set_info",
              (long long)*(int64_t *)tw.base);
    t_win_free(&tw);
}

/* Accumulates to another node: on memory UCX maps here (virtual nodes of
 * one host, over its shared-memory transport) this process's CPU atomics
 * apply them (acc_mapped), those of one element too, elsewhere a request
 * or a network atomic does. Every rank, rank 0 too, adds to rank 0's
 * elements at once, with Accumulate, Get_accumulate and single
 * Fetch_and_ops on the first element: exact totals. Long doubles (no CPU
 * atomic) still go as requests. */
static void test_in_place(void)
{
    enum { N = 64, ROUNDS = 200 };
    const int k = t_virtual_node_size();
    const char *tls = getenv("ONESIDED_UCX_TLS");
    const bool remote = k > 0 && t_rank / k != 0;
    const bool mapped = remote && t_hosts == 1 && !(tls && strstr(tls, "tcp"));
    t_win_t tw = t_win_make(F_ALLOCATE, N * sizeof(int64_t) + N * sizeof(long double),
                            MPI_INFO_NULL);
    int64_t ones[N], before[N], one = 1, old;
    long double lones[N];
    for (int i = 0; i < N; i++) {
        ones[i] = 1;
        lones[i] = 1.0L;
    }
    const MPI_Aint longs = t_disp(&tw, 0, N * sizeof(int64_t));
    MPI_Win_lock_all(0, tw.win);
    for (int r = 0; r < ROUNDS; r++) {
        MPI_Accumulate(ones, N, MPI_INT64_T, 0, t_disp(&tw, 0, 0), N, MPI_INT64_T, MPI_SUM,
                       tw.win);
        MPI_Get_accumulate(ones, N, MPI_INT64_T, before, N, MPI_INT64_T, 0, t_disp(&tw, 0, 0), N,
                           MPI_INT64_T, MPI_SUM, tw.win);
        MPI_Fetch_and_op(&one, &old, MPI_INT64_T, 0, t_disp(&tw, 0, 0), MPI_SUM, tw.win);
        MPI_Win_flush(0, tw.win);
        CHECK(before[N - 1] >= r && before[N - 1] < 2 * ROUNDS * t_size,
              "get_accumulate fetched %lld in round %d", (long long)before[N - 1], r);
        if (r % 20 == 0) {
            MPI_Accumulate(lones, N, MPI_LONG_DOUBLE, 0, longs, N, MPI_LONG_DOUBLE, MPI_SUM,
                           tw.win);
            MPI_Win_flush(0, tw.win);
        }
    }
    MPI_Win_unlock_all(tw.win);
    MPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == 0) {
        const int64_t *v = (const int64_t *)tw.base;
        long double lv;
        memcpy(&lv, (const char *)tw.base + N * sizeof(int64_t) + (N - 1) * sizeof lv, sizeof lv);
        CHECK(v[0] == 3LL * ROUNDS * t_size && v[N - 1] == 2LL * ROUNDS * t_size,
              "in place: %lld and %lld, expected %lld and %lld", (long long)v[0],
              (long long)v[N - 1], 3LL * ROUNDS * t_size, 2LL * ROUNDS * t_size);
        CHECK(lv == (long double)(ROUNDS / 20 * t_size), "long doubles: %Lg", lv);
    }
    const uint64_t in_place = t_stat(tw.win, ONESIDED_STAT_ACC_MAPPED);
    CHECK(in_place == (mapped ? 3u * ROUNDS : 0u), "rank %d: %llu accumulates in place, "
          "expected %d", t_rank, (unsigned long long)in_place, mapped ? 3 * ROUNDS : 0);
    t_win_free(&tw);
}

/* The network lock word where UCX maps it here (virtual nodes of one host
 * over its shared memory): taken and released with this CPU's atomics.
 * Every rank increments rank 0's counter under its exclusive lock, by a get,
 * a flush and a put (fast-path copies into the mapping, which the release
 * must follow): exact only if the lock excludes and its release comes after
 * the put. */
static void test_lock_word_mapped(void)
{
    enum { EPOCHS = 50 };
    const char *tls = getenv("ONESIDED_UCX_TLS");
    const bool spans = has_remote_target(F_ALLOCATE), tcp = tls && strstr(tls, "tcp");
    MPI_Info info = info_of("onesided_lock", "network");
    t_win_t tw = t_win_make(F_ALLOCATE, sizeof(int64_t), info);
    MPI_Info_free(&info);
    for (int i = 0; i < EPOCHS; i++) {
        int64_t v;
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, tw.win);
        MPI_Get(&v, 1, MPI_INT64_T, 0, t_disp(&tw, 0, 0), 1, MPI_INT64_T, tw.win);
        MPI_Win_flush(0, tw.win);
        v++;
        MPI_Put(&v, 1, MPI_INT64_T, 0, t_disp(&tw, 0, 0), 1, MPI_INT64_T, tw.win);
        MPI_Win_unlock(0, tw.win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == 0)
        CHECK(*(int64_t *)tw.base == (int64_t)EPOCHS * t_size, "lock word: counter %lld, "
              "expected %lld", (long long)*(int64_t *)tw.base, (long long)EPOCHS * t_size);
    const uint64_t released = t_stat(tw.win, ONESIDED_STAT_LOCK_RELEASE_MAPPED);
    /* Over TCP alone rank 0's own word may still be mapped (UCX 1.20 maps
     * a process's own memory whatever the transports), the others' not. */
    if (!spans || (tcp && t_rank != 0) || (!tcp && t_hosts == 1))
        CHECK(released == (spans && !tcp ? (uint64_t)EPOCHS : 0u),
              "rank %d: %llu lock releases on the mapped word", t_rank,
              (unsigned long long)released);
    t_win_free(&tw);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    int served_bulk = -1;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--served-bulk"))
            served_bulk = !strcmp(argv[i + 1], "yes");
        else if (!strcmp(argv[i], "--acc-host"))
            acc_host_expected = !strcmp(argv[i + 1], "yes");
    test_served_bulk(F_ALLOCATE, served_bulk);
    test_served_bulk(F_ALLOCMEM, served_bulk);
    test_mixed_paths(F_ALLOCATE);
    test_mixed_paths(F_ALLOCMEM);
    test_mapped_bulk(F_ALLOCATE);
    test_mapped_bulk(F_ALLOCMEM);
    test_cas_counter();
    test_results_and_order(F_ALLOCATE);
    test_results_and_order(F_CREATE);
    test_paths();
    test_set_info_keeps_agreed();
    test_in_place();
    test_lock_word_mapped();
    return t_finish("test_direct_acc");
}
