/* Small puts and gets to a target that UCX reaches over TCP alone travel as
 * onesided requests (net/origin.c, onesided_remote_request_max), and the
 * release of a network lock after them as one more request (net/lock.c).
 * Every rank targets the next one, on another node:
 *
 *  - gets in flight together: a burst of gets of every size around the
 *    threshold, contiguous and strided on both sides, some with an origin
 *    type freed right after the call, all completed by one flush;
 *  - puts likewise, read back by the target after a barrier;
 *  - R* calls: MPI_Rput and MPI_Rget, small and of 20000 bytes (an
 *    MPI_Rget above 8 KB keeps UCX's get), complete by MPI_Wait;
 *  - mutual exclusion: every rank increments rank 0's counter by get, flush,
 *    put under an exclusive lock; a release that overtook the put would
 *    lose increments;
 *  - an accumulate and a get scattered over many words (an indexed type:
 *    requests whose runs travel as 4-byte offsets);
 *  - accumulates over the whole window (64 KiB and more of data: over TCP
 *    they leave from the caller's buffer, os_ucx_am_send_wait), a burst of
 *    them, exact at the target, the origin buffer rewritten between calls
 *    as MPI allows after a flush;
 *  - everything again on a window with onesided_remote_request_max=8192,
 *    where the bursts' larger contiguous puts and gets go in several
 *    requests of at most 8192 bytes each (more requests than under the
 *    default bound, 1 MiB), their data checked as every time; and on one
 *    with onesided_remote_get_request_max=8192 (default 64 KiB): the gets
 *    alone in chunks, more requests again;
 *  - onesided_remote_get_request_max=0 on a window sends its gets by UCX:
 *    fewer requests than under the default, the data checked the same;
 *  - onesided_remote_put_request_max=8192 sends the larger puts whole by
 *    UCX's put (the automatic bound is 64 KiB on UCX 1.20, none on 1.13):
 *    fewer requests than under the default, the data checked the same;
 *  - onesided_remote_request_max=0 on a window turns the path off;
 *  - held requests (net/request.c: those the next synchronization
 *    completes wait at the origin and leave together): accumulate-kind
 *    calls on one word in issue order whichever way each travels (a 512-byte
 *    replace and a coalesced 8-byte sum held, then a fetch_and_op, held
 *    too, or by network atomic where nothing is held); MPI_Win_sync sends
 *    what is held (every rank writes a token to the next by accumulate
 *    without a flush and polls its own word with MPI_Win_sync: a request
 *    held for a flush that never comes would leave the ring waiting);
 *    a fence epoch of puts and gets to every other rank; a PSCW epoch's
 *    burst of gets; with --expect tcp some requests left in batches
 *    (requests_aggregated), and none under onesided_remote_batch_bytes=0
 *    or with --expect none;
 *  - bursts of 20000-byte puts in lock_all, fence, PSCW and lock epochs, read
 *    by the target right after the epoch: behind the first, unanswered,
 *    the others go by UCX's put (remote_burst_puts, UCX 1.20 and later),
 *    and every completion waits for both kinds;
 *  - which path ran: with --expect tcp (ONESIDED_UCX_TLS=tcp,self, or real
 *    hosts over TCP) the counters remote_small_requests and (but for the
 *    manager design) lock_release_by_request are non-zero, with --expect
 *    none (shared memory between virtual nodes) zero. So is
 *    lock_manager_first under the default hybrid design and history
 *    policy: a window's first remote locks find the word parked (no
 *    migration before a streak of remote requests), so each remote rank's
 *    next lock asks the manager at once; the exclusive counter above proves
 *    those locks still exclude each other and rank 0's own.
 */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include "common.h"
#include "stats.h"

#include <dlfcn.h>

#include <onesided.h>

enum { WIN_BYTES = 1 << 16, BURST = 120, LOCK_ITERS = 150 };
/* Around the bound the third run sets (8192: one size goes as one request,
 * the next in two) and the element sizes in between. */
static const int sizes[] = { 1, 8, 24, 1000, 4096, 8192, 8193, 20000 };
enum { NSIZES = sizeof sizes / sizeof sizes[0] };

static bool expect_tcp;

static unsigned char pattern(int rank, int i, int salt)
{
    return (unsigned char)(rank * 131 + i * 7 + salt * 29 + (i >> 8));
}

static void fill_own(char *base, int salt)
{
    for (int i = 0; i < WIN_BYTES; i++)
        base[i] = (char)pattern(t_rank, i, salt);
}

/* A burst of gets from the next rank, then one flush. Odd iterations read a
 * strided target (every other 8-byte word) into a strided origin buffer
 * whose type is freed before the flush. */
static void test_get_burst(MPI_Win win, int salt)
{
    const int peer = (t_rank + 1) % t_size;
    char **bufs = malloc(sizeof *bufs * BURST);
    int *offs = malloc(sizeof *offs * BURST), *lens = malloc(sizeof *lens * BURST);
    MPI_Win_lock_all(0, win);
    for (int k = 0; k < BURST; k++) {
        const int len = sizes[k % NSIZES], strided = k % 2 && len % 8 == 0 && len <= 8192;
        const int span = strided ? 2 * len : len;
        offs[k] = (k * 977) % (WIN_BYTES - span);
        lens[k] = len;
        bufs[k] = calloc(1, (size_t)span);
        if (strided) {
            MPI_Datatype vec;
            MPI_Type_vector(len / 8, 8, 16, MPI_BYTE, &vec);
            MPI_Type_commit(&vec);
            MPI_Get(bufs[k], 1, vec, peer, offs[k], 1, vec, win);
            MPI_Type_free(&vec); /* before the flush: the get keeps what it needs */
            lens[k] = -len;
        } else {
            MPI_Get(bufs[k], len, MPI_BYTE, peer, offs[k], len, MPI_BYTE, win);
        }
    }
    MPI_Win_flush(peer, win);
    MPI_Win_unlock_all(win);
    int bad = 0;
    for (int k = 0; k < BURST && !bad; k++) {
        const bool strided = lens[k] < 0;
        const int len = strided ? -lens[k] : lens[k];
        for (int i = 0; i < (strided ? 2 * len : len) && !bad; i++) {
            const bool hole = strided && (i / 8) % 2;
            const unsigned char want = hole ? 0 : pattern(peer, offs[k] + i, salt);
            if ((unsigned char)bufs[k][i] != want) {
                CHECK(0, "get %d (%d bytes%s at %d) byte %d: %u, expected %u", k, len,
                      strided ? ", strided" : "", offs[k], i, (unsigned char)bufs[k][i], want);
                bad = 1;
            }
        }
    }
    CHECK(!bad, "a burst of %d gets", BURST);
    for (int k = 0; k < BURST; k++)
        free(bufs[k]);
    free(bufs);
    free(offs);
    free(lens);
}

/* A burst of puts of every size into disjoint slices of the next rank's
 * window, one flush; the target checks after a barrier. */
static void test_put_burst(MPI_Win win, char *base, int salt)
{
    const int peer = (t_rank + 1) % t_size, from = (t_rank + t_size - 1) % t_size;
    char *src = malloc(WIN_BYTES);
    for (int i = 0; i < WIN_BYTES; i++)
        src[i] = (char)pattern(t_rank, i, salt + 1);
    memset(base, 0, WIN_BYTES);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock_all(0, win);
    int off = 0;
    for (int k = 0; off + sizes[k % NSIZES] <= WIN_BYTES; k++) {
        const int len = sizes[k % NSIZES];
        MPI_Put(src + off, len, MPI_BYTE, peer, off, len, MPI_BYTE, win);
        off += len;
    }
    MPI_Win_flush(peer, win);
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t_rank, 0, win);
    int bad = -1;
    for (int i = 0; i < off && bad < 0; i++)
        if ((unsigned char)base[i] != pattern(from, i, salt + 1))
            bad = i;
    MPI_Win_unlock(t_rank, win);
    MPI_Barrier(MPI_COMM_WORLD); /* before the next test writes here */
    CHECK(bad < 0, "put burst: byte %d is %u, expected %u", bad,
          bad < 0 ? 0 : (unsigned char)base[bad], bad < 0 ? 0 : pattern(from, bad, salt + 1));
    free(src);
}

/* MPI_Rput and MPI_Rget complete by MPI_Wait inside a lock_all epoch, of
 * 32 bytes (requests) and of 20000 (an MPI_Rget above 8 KB goes by UCX's
 * get, completed at MPI_Wait). */
static void test_request_calls(MPI_Win win)
{
    enum { BIG = 20000, AT = 4096 };
    const int peer = (t_rank + 1) % t_size;
    int64_t out[4] = { t_rank * 10 + 1, t_rank * 10 + 2, t_rank * 10 + 3, t_rank * 10 + 4 };
    int64_t in[4] = { 0 };
    unsigned char *bout = malloc(BIG), *bin = calloc(1, BIG);
    for (int i = 0; i < BIG; i++)
        bout[i] = pattern(t_rank, i, 9);
    MPI_Request r, rr[2];
    MPI_Win_lock_all(0, win);
    MPI_Rput(out, 4, MPI_INT64_T, peer, 64, 4, MPI_INT64_T, win, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    MPI_Rput(bout, BIG, MPI_BYTE, peer, AT, BIG, MPI_BYTE, win, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    MPI_Win_flush(peer, win);
    MPI_Rget(in, 4, MPI_INT64_T, peer, 64, 4, MPI_INT64_T, win, &rr[0]);
    MPI_Rget(bin, BIG, MPI_BYTE, peer, AT, BIG, MPI_BYTE, win, &rr[1]);
    MPI_Wait(&rr[0], MPI_STATUS_IGNORE);
    MPI_Wait(&rr[1], MPI_STATUS_IGNORE);
    MPI_Win_unlock_all(win);
    CHECK(!memcmp(in, out, sizeof in), "MPI_Rget after MPI_Rput: %lld %lld %lld %lld",
          (long long)in[0], (long long)in[1], (long long)in[2], (long long)in[3]);
    CHECK(!memcmp(bin, bout, BIG), "MPI_Rget of %d bytes after MPI_Rput", BIG);
    free(bout);
    free(bin);
    MPI_Barrier(MPI_COMM_WORLD); /* before the next test writes there */
}

/* Read, increment, write rank 0's counter under an exclusive lock. */
static void test_exclusive_counter(MPI_Win win, int64_t *base)
{
    if (t_rank == 0)
        base[0] = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < LOCK_ITERS; i++) {
        int64_t v = -1;
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
        MPI_Get(&v, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T, win);
        MPI_Win_flush(0, win);
        v++;
        /* Two puts, both held (request.c), the counter's the second: it
         * must still land before the release. */
        MPI_Put(&v, 1, MPI_INT64_T, 0, 8, 1, MPI_INT64_T, win);
        MPI_Put(&v, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T, win);
        MPI_Win_unlock(0, win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == 0) {
        MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
        const int64_t total = base[0];
        MPI_Win_unlock(0, win);
        CHECK(total == (int64_t)t_size * LOCK_ITERS,
              "exclusive counter %lld, expected %lld (a release overtook its epoch)",
              (long long)total, (long long)t_size * LOCK_ITERS);
    }
}

/* An accumulate scattered over many words of the next rank (an indexed
 * type of single elements: runs of one length, sent as 4-byte offsets),
 * then a get of the same words through the same type. */
static void test_scattered(MPI_Win win, int64_t *base)
{
    enum { N = 300, FIRST = 1024 }; /* words */
    const int peer = (t_rank + 1) % t_size, from = (t_rank + t_size - 1) % t_size;
    int disp[N];
    int64_t add[N], got[N];
    for (int i = 0; i < N; i++) {
        disp[i] = FIRST + (i * 7919) % (WIN_BYTES / 8 - FIRST);
        add[i] = (int64_t)(t_rank + 1) * 1000 + i;
    }
    for (int i = 0; i < WIN_BYTES / 8; i++)
        base[i] = 5;
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Datatype tt;
    MPI_Type_create_indexed_block(N, 1, disp, MPI_INT64_T, &tt);
    MPI_Type_commit(&tt);
    MPI_Win_lock_all(0, win);
    MPI_Accumulate(add, N, MPI_INT64_T, peer, 0, 1, tt, MPI_SUM, win);
    MPI_Win_flush(peer, win);
    MPI_Get(got, N, MPI_INT64_T, peer, 0, 1, tt, win);
    MPI_Win_flush(peer, win);
    MPI_Win_unlock_all(win);
    MPI_Type_free(&tt);
    int bad = -1;
    for (int i = 0; i < N && bad < 0; i++)
        if (got[i] != 5 + add[i])
            bad = i;
    CHECK(bad < 0, "scattered get after accumulate: word %d is %lld, expected %lld", bad,
          bad < 0 ? 0LL : (long long)got[bad], bad < 0 ? 0LL : (long long)(5 + add[bad]));
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t_rank, 0, win);
    bad = -1;
    for (int i = 0; i < N && bad < 0; i++) {
        const int64_t want = 5 + (int64_t)(from + 1) * 1000 + i;
        if (base[FIRST + (i * 7919) % (WIN_BYTES / 8 - FIRST)] != want)
            bad = i;
    }
    MPI_Win_unlock(t_rank, win);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(bad < 0, "scattered accumulate: word %d wrong at the target", bad);
}

static void test_large_accumulates(MPI_Win win, int64_t *base)
{
    enum { N = WIN_BYTES / 8, ROUNDS = 3, BURST_ACC = 4 };
    const int peer = (t_rank + 1) % t_size, from = (t_rank + t_size - 1) % t_size;
    int64_t *src = malloc(sizeof *src * N);
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t_rank, 0, win);
    memset(base, 0, WIN_BYTES);
    MPI_Win_unlock(t_rank, win);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock_all(0, win);
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < N; i++)
            src[i] = (int64_t)t_rank * 100000 + i + r;
        for (int b = 0; b < BURST_ACC; b++)
            MPI_Accumulate(src, N, MPI_INT64_T, peer, 0, N, MPI_INT64_T, MPI_SUM, win);
        MPI_Win_flush(peer, win);
    }
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    int bad = 0;
    MPI_Win_lock(MPI_LOCK_SHARED, t_rank, 0, win);
    for (int i = 0; i < N; i++) {
        int64_t want = 0;
        for (int r = 0; r < ROUNDS; r++)
            want += BURST_ACC * ((int64_t)from * 100000 + i + r);
        bad += base[i] != want;
    }
    MPI_Win_unlock(t_rank, win);
    CHECK(!bad, "%d of %d words wrong after whole-window accumulates", bad, (int)N);
    free(src);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* Accumulate-kind calls of one origin on one word apply in issue order
 * (MPI's default accumulate_ordering), however each travels: a 512-byte
 * MPI_REPLACE and a coalesced 8-byte MPI_SUM as held requests, then a
 * fetch_and_op, held behind them, or where nothing is held
 * (onesided_remote_batch_bytes=0) a network atomic that must wait for
 * their acknowledgements. */
static void test_held_order(MPI_Win win, int64_t *base)
{
    enum { N = 64, ROUNDS = 25 };
    const int peer = (t_rank + 1) % t_size;
    int64_t vals[N];
    const int64_t one = 1, none = 0;
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t_rank, 0, win);
    memset(base, 0, N * sizeof *base);
    MPI_Win_unlock(t_rank, win);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock_all(0, win);
    int bad = -1;
    int64_t got = -1;
    for (int r = 0; r < ROUNDS && bad < 0; r++) {
        for (int i = 0; i < N; i++)
            vals[i] = r + 1;
        MPI_Accumulate(vals, N, MPI_INT64_T, peer, 0, N, MPI_INT64_T, MPI_REPLACE, win);
        MPI_Accumulate(&one, 1, MPI_INT64_T, peer, 0, 1, MPI_INT64_T, MPI_SUM, win);
        MPI_Fetch_and_op(&none, &got, MPI_INT64_T, peer, 0, MPI_NO_OP, win);
        MPI_Win_flush(peer, win);
        if (got != r + 2)
            bad = r;
    }
    MPI_Win_unlock_all(win);
    CHECK(bad < 0, "round %d: fetch_and_op after replace and sum read %lld, expected %lld", bad,
          (long long)got, (long long)bad + 2);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* MPI_Win_sync sends held requests: each rank writes a token into the next
 * rank's word by accumulate, with no flush, then polls its own word with
 * MPI_Win_sync (as mpi4py's MCS mutex joins its predecessor's queue). A put
 * would promise nothing before a flush; onesided sends its held requests
 * there anyway, as it does the accumulates it coalesces. */
static void test_sync_sends_held(MPI_Win win, int64_t *base)
{
    enum { WORD = 40 };
    const int peer = (t_rank + 1) % t_size, from = (t_rank + t_size - 1) % t_size;
    const int64_t token = 7000 + t_rank;
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t_rank, 0, win);
    base[WORD] = 0;
    MPI_Win_unlock(t_rank, win);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock_all(0, win);
    /* Coalesced, and sent by MPI_Win_sync as two requests (one per run of
     * one op), both held: the token's is the second. */
    const int64_t zero = 0;
    MPI_Accumulate(&zero, 1, MPI_INT64_T, peer, (WORD + 1) * 8, 1, MPI_INT64_T, MPI_SUM, win);
    MPI_Accumulate(&token, 1, MPI_INT64_T, peer, WORD * 8, 1, MPI_INT64_T, MPI_REPLACE, win);
    volatile int64_t *word = &base[WORD];
    do
        MPI_Win_sync(win);
    while (*word != 7000 + from);
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* A fence epoch: 8-byte puts to every other rank's slot for this rank and
 * gets of every other rank's first word, all completed by the fence. */
static void test_fence_all(MPI_Win win, int64_t *base)
{
    enum { SLOTS = 256, GETS = 30 };
    if (t_size * GETS > SLOTS)
        return; /* (the tests run 3 processes) */
    int64_t *got = calloc((size_t)t_size * GETS, sizeof *got);
    int64_t mine[GETS];
    for (int k = 0; k < GETS; k++)
        mine[k] = (int64_t)t_rank * 1000 + k;
    MPI_Win_fence(0, win);
    for (int i = 0; i < SLOTS + GETS; i++)
        base[i] = -1;
    base[SLOTS + GETS] = 0;
    for (int k = 0; k < GETS; k++)
        base[SLOTS + k] = (int64_t)t_rank * 77 + k;
    MPI_Win_fence(0, win);
    for (int p = 0; p < t_size; p++) {
        if (p == t_rank)
            continue;
        for (int k = 0; k < GETS; k++) {
            MPI_Put(&mine[k], 1, MPI_INT64_T, p, (t_rank * GETS + k) * 8, 1, MPI_INT64_T, win);
            MPI_Get(&got[p * GETS + k], 1, MPI_INT64_T, p, (SLOTS + k) * 8, 1, MPI_INT64_T, win);
        }
    }
    MPI_Win_fence(0, win);
    int bad = 0;
    for (int p = 0; p < t_size; p++)
        for (int k = 0; p != t_rank && k < GETS; k++)
            bad += got[p * GETS + k] != (int64_t)p * 77 + k;
    for (int p = 0; p < t_size; p++)
        for (int k = 0; p != t_rank && k < GETS; k++)
            bad += base[p * GETS + k] != (int64_t)p * 1000 + k;
    MPI_Win_fence(0, win);
    CHECK(!bad, "fence epoch of puts and gets to every rank: %d words wrong", bad);
    free(got);
}

/* A PSCW epoch: a burst of gets from the next rank, completed by
 * MPI_Win_complete. */
static void test_pscw_gets(MPI_Win win, int64_t *base)
{
    enum { GETS = 100 };
    const int peer = (t_rank + 1) % t_size, from = (t_rank + t_size - 1) % t_size;
    int64_t got[GETS];
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t_rank, 0, win);
    for (int k = 0; k < GETS; k++)
        base[k] = (int64_t)t_rank * 31 + k;
    MPI_Win_unlock(t_rank, win);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Group world, to, by;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 1, &peer, &to);
    MPI_Group_incl(world, 1, &from, &by);
    MPI_Win_post(by, 0, win);
    MPI_Win_start(to, 0, win);
    for (int k = 0; k < GETS; k++)
        MPI_Get(&got[k], 1, MPI_INT64_T, peer, (GETS - 1 - k) * 8, 1, MPI_INT64_T, win);
    MPI_Win_complete(win);
    MPI_Win_wait(win);
    int bad = 0;
    for (int k = 0; k < GETS; k++)
        bad += got[k] != (int64_t)peer * 31 + (GETS - 1 - k);
    CHECK(!bad, "PSCW burst of %d gets: %d wrong", GETS, bad);
    MPI_Group_free(&to);
    MPI_Group_free(&by);
    MPI_Group_free(&world);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* A burst of puts of at least 16 KiB (net/origin.c, BURST_PUT_MIN): the
 * first goes as a request, those behind it while it is unanswered by
 * UCX's put (on UCX 1.20 and later). In a lock_all epoch with its flush, a
 * fence epoch, a PSCW epoch and an exclusive lock epoch ended by the unlock
 * alone, each completion must wait for both kinds:
 * the target reads every byte right after the epoch's end (for PSCW,
 * MPI_Win_wait: a complete that overtook the UCX puts would leave some
 * missing). */
static void test_burst_puts(MPI_Win win, char *base)
{
    enum { PUT = 20000, PUTS = 3 };
    const int peer = (t_rank + 1) % t_size, from = (t_rank + t_size - 1) % t_size;
    char *src = malloc(PUT * PUTS);
    MPI_Group world, to, by;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 1, &peer, &to);
    MPI_Group_incl(world, 1, &from, &by);
    for (int epoch = 0; epoch < 4; epoch++) {
        const int salt = 40 + epoch;
        for (int i = 0; i < PUT * PUTS; i++)
            src[i] = (char)pattern(t_rank, i, salt);
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t_rank, 0, win);
        memset(base, 0, PUT * PUTS);
        MPI_Win_unlock(t_rank, win);
        MPI_Barrier(MPI_COMM_WORLD);
        if (epoch == 0)
            MPI_Win_lock_all(0, win);
        else if (epoch == 1)
            MPI_Win_fence(0, win);
        else if (epoch == 3)
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, peer, 0, win);
        else {
            MPI_Win_post(by, 0, win);
            MPI_Win_start(to, 0, win);
        }
        for (int k = 0; k < PUTS; k++)
            MPI_Put(src + k * PUT, PUT, MPI_BYTE, peer, k * PUT, PUT, MPI_BYTE, win);
        if (epoch == 0) {
            MPI_Win_flush(peer, win);
            MPI_Win_unlock_all(win);
            MPI_Barrier(MPI_COMM_WORLD);
        } else if (epoch == 1) {
            MPI_Win_fence(0, win);
        } else if (epoch == 3) {
            MPI_Win_unlock(peer, win);
            MPI_Barrier(MPI_COMM_WORLD);
        } else {
            MPI_Win_complete(win);
            MPI_Win_wait(win);
        }
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t_rank, 0, win);
        int bad = -1;
        for (int i = 0; i < PUT * PUTS && bad < 0; i++)
            if ((unsigned char)base[i] != pattern(from, i, salt))
                bad = i;
        MPI_Win_unlock(t_rank, win);
        CHECK(bad < 0, "burst of %d-byte puts (%s epoch): byte %d wrong", PUT,
              epoch == 0 ? "lock_all" : epoch == 1 ? "fence" : epoch == 2 ? "PSCW" : "lock",
              bad);
        if (epoch == 1)
            MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Group_free(&to);
    MPI_Group_free(&by);
    MPI_Group_free(&world);
    free(src);
}

/* Whether the UCX this process runs streams puts over TCP (1.20 and
 * later), where bursts of large puts leave the request path
 * (test_burst_puts). */
static bool ucx_puts_stream(void)
{
    void (*version)(unsigned *, unsigned *, unsigned *) =
        (void (*)(unsigned *, unsigned *, unsigned *))dlsym(RTLD_DEFAULT, "ucp_get_version");
    unsigned major = 0, minor = 0, release = 0;
    if (version)
        version(&major, &minor, &release);
    return major > 1 || (major == 1 && minor >= 20);
}

/* remote_small_requests of the last run, and the requests that left in
 * batches during it (a process-wide counter: the change). */
static uint64_t last_small, last_batched, batched_total;
/* Off for the run with onesided_remote_batch_bytes=0. */
static bool batches_on = true;
/* Off for the runs that bound puts by request below 20000 bytes. */
static bool put_bound_default = true;

static void run(int flavor, MPI_Info info, bool path_on)
{
    t_win_t tw = t_win_make(flavor, WIN_BYTES, info);
    for (int salt = 0; salt < 2; salt++) {
        fill_own(tw.base, salt);
        MPI_Barrier(MPI_COMM_WORLD);
        test_get_burst(tw.win, salt);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    test_put_burst(tw.win, tw.base, 5);
    test_request_calls(tw.win);
    test_exclusive_counter(tw.win, (int64_t *)tw.base);
    test_scattered(tw.win, (int64_t *)tw.base);
    test_large_accumulates(tw.win, (int64_t *)tw.base);
    test_held_order(tw.win, (int64_t *)tw.base);
    test_sync_sends_held(tw.win, (int64_t *)tw.base);
    test_fence_all(tw.win, (int64_t *)tw.base);
    test_pscw_gets(tw.win, (int64_t *)tw.base);
    test_burst_puts(tw.win, tw.base);
    const uint64_t burst = t_stat(tw.win, ONESIDED_STAT_REMOTE_BURST_PUTS);
    if (expect_tcp && path_on && put_bound_default && ucx_puts_stream())
        CHECK(burst > 0, "%s: no put of a burst went by UCX's put over TCP",
              flavor_name[flavor]);
    if (!expect_tcp || !path_on || !ucx_puts_stream())
        CHECK(burst == 0, "%s: %llu puts of bursts by UCX's put (%s)", flavor_name[flavor],
              (unsigned long long)burst,
              !expect_tcp ? "off TCP" : !path_on ? "with the path off" : "on UCX before 1.20");
    const uint64_t small = t_stat(tw.win, ONESIDED_STAT_REMOTE_SMALL_REQUESTS);
    last_small = small;
    const uint64_t aggregated = t_stat(tw.win, ONESIDED_STAT_REQUESTS_AGGREGATED);
    last_batched = aggregated - batched_total;
    batched_total = aggregated;
    const uint64_t release = t_stat(tw.win, ONESIDED_STAT_LOCK_RELEASE_BY_REQUEST);
    const uint64_t first = t_stat(tw.win, ONESIDED_STAT_LOCK_MANAGER_FIRST);
    const char *design = getenv("ONESIDED_LOCK"), *policy = getenv("ONESIDED_LOCK_POLICY");
    const bool hybrid_history = (!design || !strcmp(design, "hybrid")) &&
                                (!policy || !strcmp(policy, "history"));
    if (expect_tcp && hybrid_history && t_rank != 0)
        CHECK(first > 0, "%s: no hybrid lock asked the manager first over TCP",
              flavor_name[flavor]);
    if (!expect_tcp)
        CHECK(first == 0, "%s: %llu hybrid locks asked the manager first off TCP",
              flavor_name[flavor], (unsigned long long)first);
    if (expect_tcp && path_on) {
        CHECK(small > 0, "%s: no put or get went as a request over TCP", flavor_name[flavor]);
        /* Routes other than direct aggregate on their own: the test's
         * environment sets none. */
        if (!getenv("ONESIDED_ROUTE") && batches_on)
            CHECK(last_batched > 0, "%s: no request left in a batch over TCP",
                  flavor_name[flavor]);
        /* Rank 0's own epochs on itself release its CPU lock; the manager
         * design releases through its manager. */
        if (t_rank != 0 && !(design && !strcmp(design, "manager")))
            CHECK(release > 0, "%s: no lock release went behind the epoch's requests",
                  flavor_name[flavor]);
    } else {
        CHECK(small == 0, "%s: %llu puts and gets went as requests %s", flavor_name[flavor],
              (unsigned long long)small, path_on ? "off TCP" : "with the path off");
        /* (With the path off, accumulates UCX has no atomic for still go
         * as requests over TCP, held as any.) */
        if (!expect_tcp)
            CHECK(last_batched == 0, "%s: %llu requests left in batches off TCP",
                  flavor_name[flavor], (unsigned long long)last_batched);
        /* The release by request does not depend on the knob: over TCP it
         * ends every epoch with no RDMA pending (one of atomics only). */
        if (!expect_tcp)
            CHECK(release == 0, "%s: %llu releases by request off TCP", flavor_name[flavor],
                  (unsigned long long)release);
    }
    t_win_free(&tw);
}

/* run() on an MPI_Win_allocate window with one info key set. */
static void run_with(const char *key, const char *value, bool path_on)
{
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, key, value);
    run(F_ALLOCATE, info, path_on);
    MPI_Info_free(&info);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--expect"))
            expect_tcp = !strcmp(argv[i + 1], "tcp");
    if (!t_virtual_node_size()) {
        if (t_rank == 0)
            fprintf(stderr, "test_small_requests: needs several nodes (ONESIDED_NODE_SIZE)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    run(F_ALLOCATE, MPI_INFO_NULL, true);
    const uint64_t small_default = last_small;
    run(F_CREATE, MPI_INFO_NULL, true);
    /* The same operations. Under the default bound (1 MiB) every put of
     * the bursts is one request; under 8192 the contiguous 8193- and
     * 20000-byte ones go in 2 and 3 requests of at most 8192 bytes, so
     * there are more (gets too: a get goes as one request up to the
     * smaller of the two bounds). Were the default still 8192 they would
     * be equal; without the chunks, those puts would take UCX's path:
     * fewer. */
    put_bound_default = false;
    run_with("onesided_remote_request_max", "8192", true);
    put_bound_default = true;
    if (expect_tcp)
        CHECK(last_small > small_default,
              "%llu requests under the default bound, %llu under 8192: expected more "
              "there, large contiguous puts in chunks",
              (unsigned long long)small_default, (unsigned long long)last_small);
    /* Gets as one request up to 8192 bytes: the bursts' contiguous 8193-
     * and 20000-byte gets go in 2 and 3 requests (one each under the
     * default, 64 KiB), their data checked as every time. */
    run_with("onesided_remote_get_request_max", "8192", true);
    if (expect_tcp)
        CHECK(last_small > small_default,
              "%llu requests under the default, %llu with gets of at most 8192 bytes per "
              "request: expected more there, large contiguous gets in chunks",
              (unsigned long long)small_default, (unsigned long long)last_small);
    run_with("onesided_remote_get_request_max", "0", true);
    if (expect_tcp)
        CHECK(last_small < small_default,
              "%llu requests under the default, %llu with gets by UCX: expected fewer there",
              (unsigned long long)small_default, (unsigned long long)last_small);
    /* Puts as requests up to 8192 bytes, larger ones by UCX's put, whole:
     * the bursts' 8193- and 20000-byte puts leave the request path (under
     * the default they are one request each). */
    put_bound_default = false;
    run_with("onesided_remote_put_request_max", "8192", true);
    put_bound_default = true;
    if (expect_tcp)
        CHECK(last_small < small_default,
              "%llu requests under the default, %llu with puts above 8192 bytes by UCX: "
              "expected fewer there",
              (unsigned long long)small_default, (unsigned long long)last_small);
    /* Each request on its own: the same results, no batch. */
    batches_on = false;
    run_with("onesided_remote_batch_bytes", "0", true);
    batches_on = true;
    if (expect_tcp)
        CHECK(last_batched == 0, "%llu requests left in batches under "
              "onesided_remote_batch_bytes=0", (unsigned long long)last_batched);
    run_with("onesided_remote_request_max", "0", false);
    return t_finish("test_small_requests");
}
