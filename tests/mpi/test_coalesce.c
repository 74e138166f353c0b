/* Automatic accumulate coalescing (ONESIDED_ACC_COALESCE / onesided_acc_coalesce):
 * exact totals under concurrent coalesced updates from every rank, issue
 * order against later accumulates and fetching operations, copy semantics
 * for the origin buffer, range errors at the erroneous call, and the
 * statistics that show the batches were really formed (or not, when off). */
#include "common.h"

#include <onesided.h>
#include <stdbool.h>

#define NWORDS 64   /* few words: a batch holds many updates of one element */
#define NUPD 3000
#define FLUSH_EVERY 700

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 11;
}

/* The update stream of rank r: (target, word, value, xor?) */
static void update(int r, int i, uint64_t *seed, int *t, int *word, uint64_t *val, int *use_xor)
{
    (void)r;
    (void)i;
    *t = (int)(lcg(seed) % (uint64_t)t_size);
    *word = (int)(lcg(seed) % NWORDS);
    *val = lcg(seed) & 0xffff;
    *use_xor = (*word & 1); /* odd words take BXOR, even words SUM: ops never mix per word */
}

static void totals(t_win_t *tw, int coalesce)
{
    uint64_t seed = 1000 + (uint64_t)t_rank;
    MPI_Win_lock_all(0, tw->win);
    for (int i = 0; i < NUPD; i++) {
        int t, word, x;
        uint64_t v;
        update(t_rank, i, &seed, &t, &word, &v, &x);
        MPI_Accumulate(&v, 1, MPI_UINT64_T, t, t_disp(tw, t, word * 8), 1, MPI_UINT64_T,
                       x ? MPI_BXOR : MPI_SUM, tw->win);
        v = 0xdeadbeef; /* the call copied it: changing it now must not matter */
        if (i % FLUSH_EVERY == FLUSH_EVERY - 1)
            MPI_Win_flush_all(tw->win);
    }
    MPI_Win_unlock_all(tw->win);
    MPI_Barrier(MPI_COMM_WORLD);

    /* Every rank replays every stream and checks its own words. */
    uint64_t want[NWORDS] = { 0 };
    for (int r = 0; r < t_size; r++) {
        uint64_t s = 1000 + (uint64_t)r;
        for (int i = 0; i < NUPD; i++) {
            int t, word, x;
            uint64_t v;
            update(r, i, &s, &t, &word, &v, &x);
            if (t == t_rank)
                want[word] = x ? want[word] ^ v : want[word] + v;
        }
    }
    int bad = 0;
    for (int k = 0; k < NWORDS; k++)
        bad += ((uint64_t *)tw->base)[k] != want[k];
    CHECK(!bad, "%s coalesce=%d: %d of %d words differ from the replayed totals",
          flavor_name[tw->flavor], coalesce, bad, NWORDS);

    onesided_win_stats_t st;
    CHECK(onesided_win_get_stats(tw->win, &st) == MPI_SUCCESS, "stats");
    uint64_t queued = st.counter[ONESIDED_STAT_ACC_COALESCED];
    uint64_t batches = st.counter[ONESIDED_STAT_ACC_BATCHES];
    bool expect = coalesce == 1 || (coalesce == -1 && (tw->flavor == F_CREATE ||
                                                       tw->flavor == F_DYNAMIC ||
                                                       (tw->flavor == F_CREATE_BIG &&
                                                        !t_flavor_mapped(F_CREATE_BIG))) &&
                                    t_size > 1);
    /* Dynamic windows on other (virtual) nodes check every address at the
     * target, one request per call: nothing to count on there. */
    if (tw->flavor == F_DYNAMIC && t_virtual_node_size())
        expect = false;
    if (expect)
        CHECK(queued > NUPD / 4 && batches * 10 < queued,
              "%s coalesce=%d: %llu accumulates coalesced in %llu batches", flavor_name[tw->flavor],
              coalesce, (unsigned long long)queued, (unsigned long long)batches);
    else if (coalesce == 0)
        CHECK(queued == 0, "%s coalesce=0: %llu accumulates coalesced",
              flavor_name[tw->flavor], (unsigned long long)queued);
}

/* One origin, one target: the order of its own operations. */
static void ordering(t_win_t *tw, int coalesce)
{
    const int t = (t_rank + 1) % t_size;
    const MPI_Aint d = t_disp(tw, t, 8 * NWORDS); /* past the totals words */
    int64_t one = 1, two = 2, five = 5, res = -1, zero = 0;
    int32_t i3 = 3, i32res = -1;

    MPI_Win_lock(MPI_LOCK_SHARED, t, 0, tw->win);
    /* A fetching operation sees every accumulate issued before it. */
    MPI_Accumulate(&five, 1, MPI_INT64_T, t, d, 1, MPI_INT64_T, MPI_REPLACE, tw->win);
    for (int k = 0; k < 3; k++)
        MPI_Accumulate(&one, 1, MPI_INT64_T, t, d, 1, MPI_INT64_T, MPI_SUM, tw->win);
    MPI_Fetch_and_op(&zero, &res, MPI_INT64_T, t, d, MPI_NO_OP, tw->win);
    MPI_Win_flush(t, tw->win);
    CHECK(res == 8, "%s coalesce=%d: fetch after REPLACE 5 and 3 x SUM 1 read %lld",
          flavor_name[tw->flavor], coalesce, (long long)res);
    /* An element of another size starts a new batch and keeps order. */
    MPI_Accumulate(&two, 1, MPI_INT64_T, t, d, 1, MPI_INT64_T, MPI_PROD, tw->win);
    MPI_Accumulate(&i3, 1, MPI_INT32_T, t, d + 8, 1, MPI_INT32_T, MPI_REPLACE, tw->win);
    MPI_Accumulate(&i3, 1, MPI_INT32_T, t, d + 8, 1, MPI_INT32_T, MPI_SUM, tw->win);
    MPI_Get_accumulate(&i3, 1, MPI_INT32_T, &i32res, 1, MPI_INT32_T, t, d + 8, 1, MPI_INT32_T,
                       MPI_NO_OP, tw->win);
    MPI_Win_flush(t, tw->win);
    CHECK(i32res == 6, "%s coalesce=%d: int32 REPLACE 3 then SUM 3 read %d",
          flavor_name[tw->flavor], coalesce, i32res);
    /* A get after accumulates, within the epoch and after flush. */
    MPI_Get(&res, 1, MPI_INT64_T, t, d, 1, MPI_INT64_T, tw->win);
    MPI_Win_unlock(t, tw->win);
    CHECK(res == 16, "%s coalesce=%d: 8 x PROD 2 read %lld", flavor_name[tw->flavor], coalesce,
          (long long)res);

    /* Under an exclusive lock, then visible to the target after unlock. */
    int64_t many[4] = { 1, 2, 3, 4 };
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, tw->win);
    MPI_Accumulate(many, 4, MPI_INT64_T, t, d + 16, 4, MPI_INT64_T, MPI_REPLACE, tw->win);
    MPI_Accumulate(many, 4, MPI_INT64_T, t, d + 16, 4, MPI_INT64_T, MPI_SUM, tw->win);
    MPI_Win_unlock(t, tw->win);
    MPI_Barrier(MPI_COMM_WORLD);
    int64_t *mine = (int64_t *)(tw->base + 8 * NWORDS + 16);
    CHECK(mine[0] == 2 && mine[1] == 4 && mine[2] == 6 && mine[3] == 8,
          "%s coalesce=%d: 4-element REPLACE then SUM left %lld %lld %lld %lld",
          flavor_name[tw->flavor], coalesce, (long long)mine[0], (long long)mine[1],
          (long long)mine[2], (long long)mine[3]);
}

/* A bad accumulate is refused at the call, not at the flush. */
static void errors(t_win_t *tw)
{
    const int t = (t_rank + 1) % t_size;
    int64_t one = 1;
    MPI_Win_set_errhandler(tw->win, MPI_ERRORS_RETURN);
    MPI_Win_lock_all(0, tw->win);
    int rc = MPI_Accumulate(&one, 1, MPI_INT64_T, t, t_disp(tw, t, tw->bytes), 1, MPI_INT64_T,
                            MPI_SUM, tw->win);
    int cls = -1;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_RMA_RANGE, "%s: out-of-range accumulate gave class %d",
          flavor_name[tw->flavor], cls);
    CHECK(MPI_Win_flush_all(tw->win) == MPI_SUCCESS, "flush after a refused accumulate");
    MPI_Win_unlock_all(tw->win);
    MPI_Win_set_errhandler(tw->win, MPI_ERRORS_ARE_FATAL);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    static const int settings[] = { -1, 1, 0 };
    T_FOR_EACH_FLAVOR(f) {
        for (int s = 0; s < 3; s++) {
            MPI_Info info;
            char v[8];
            MPI_Info_create(&info);
            snprintf(v, sizeof v, "%d", settings[s]);
            MPI_Info_set(info, ONESIDED_INFO_ACC_COALESCE, v);
            MPI_Info_set(info, ONESIDED_INFO_ACC_COALESCE_MAX, "256");
            t_win_t tw = t_win_make(f, 8 * NWORDS + 64, info);
            MPI_Info_free(&info);
            totals(&tw, settings[s]);
            MPI_Barrier(MPI_COMM_WORLD);
            ordering(&tw, settings[s]);
            MPI_Barrier(MPI_COMM_WORLD);
            errors(&tw);
            t_win_free(&tw);
        }
    }
    return t_finish("test_coalesce");
}
