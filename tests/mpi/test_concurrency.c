/* All ranks against one location: accumulate, fetch_and_op and
 * compare_and_swap totals are exact; exclusive locks exclude; shared readers
 * never see a torn pair. On every flavor (atomics, mutex and CMA paths). */
#include "common.h"

#include "onesided.h"

enum { ROUNDS = 300 };

static void totals(int flavor)
{
    t_win_t t = t_win_make(flavor, 64, MPI_INFO_NULL);
    const int root = 0;
    int64_t one = 1;
    double half = 0.5;
    /* Accumulate and fetch_and_op under one shared lock_all epoch. */
    MPI_Win_lock_all(0, t.win);
    for (int i = 0; i < ROUNDS; i++) {
        int64_t old;
        MPI_Accumulate(&one, 1, MPI_INT64_T, root, t_disp(&t, root, 0), 1, MPI_INT64_T, MPI_SUM, t.win);
        MPI_Fetch_and_op(&one, &old, MPI_INT64_T, root, t_disp(&t, root, 8), MPI_SUM, t.win);
        MPI_Accumulate(&half, 1, MPI_DOUBLE, root, t_disp(&t, root, 16), 1, MPI_DOUBLE, MPI_SUM, t.win);
        /* A compare-and-swap increment loop. */
        int64_t seen = 0, want, got;
        MPI_Fetch_and_op(NULL, &seen, MPI_INT64_T, root, t_disp(&t, root, 24), MPI_NO_OP, t.win);
        MPI_Win_flush(root, t.win);
        for (;;) {
            want = seen + 1;
            MPI_Compare_and_swap(&want, &seen, &got, MPI_INT64_T, root, t_disp(&t, root, 24), t.win);
            MPI_Win_flush(root, t.win);
            if (got == seen)
                break;
            seen = got;
        }
        /* 16-byte elements take the mutex path even on shared memory. */
        long double ld = 1.0L;
        MPI_Accumulate(&ld, 1, MPI_LONG_DOUBLE, root, t_disp(&t, root, 32), 1, MPI_LONG_DOUBLE, MPI_SUM, t.win);
    }
    MPI_Win_unlock_all(t.win);
    MPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == root) {
        int64_t a, f, c;
        double d;
        long double ld;
        memcpy(&a, t.base, 8);
        memcpy(&f, t.base + 8, 8);
        memcpy(&d, t.base + 16, 8);
        memcpy(&c, t.base + 24, 8);
        memcpy(&ld, t.base + 32, sizeof ld);
        long want = (long)ROUNDS * t_size;
        CHECK(a == want, "%s: accumulate total %lld of %ld", flavor_name[flavor], (long long)a, want);
        CHECK(f == want, "%s: fetch_and_op total %lld of %ld", flavor_name[flavor], (long long)f, want);
        CHECK(d == want * 0.5, "%s: double accumulate total %f", flavor_name[flavor], d);
        CHECK(c == want, "%s: compare_and_swap increments %lld of %ld", flavor_name[flavor], (long long)c, want);
        CHECK(ld == (long double)want, "%s: long double total %Lf", flavor_name[flavor], ld);
    }
    t_win_free(&t);
}

static void exclusion(int flavor)
{
    t_win_t t = t_win_make(flavor, 64, MPI_INFO_NULL);
    const int root = t_size - 1;
    long torn = 0;
    for (int i = 0; i < ROUNDS; i++) {
        if ((i + t_rank) % 4) {
            /* Read-increment-write of a counter and a mirror, under an exclusive lock. */
            int64_t v[2];
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, root, 0, t.win);
            MPI_Get(v, 2, MPI_INT64_T, root, t_disp(&t, root, 0), 2, MPI_INT64_T, t.win);
            MPI_Win_flush(root, t.win);
            v[0]++;
            MPI_Put(&v[0], 1, MPI_INT64_T, root, t_disp(&t, root, 0), 1, MPI_INT64_T, t.win);
            MPI_Win_flush(root, t.win);
            MPI_Put(&v[0], 1, MPI_INT64_T, root, t_disp(&t, root, 8), 1, MPI_INT64_T, t.win);
            MPI_Win_unlock(root, t.win);
        } else {
            /* Readers share the lock: the pair must never be half updated. */
            int64_t v[2];
            MPI_Win_lock(MPI_LOCK_SHARED, root, 0, t.win);
            MPI_Get(v, 2, MPI_INT64_T, root, t_disp(&t, root, 0), 2, MPI_INT64_T, t.win);
            MPI_Win_unlock(root, t.win);
            torn += v[0] != v[1];
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    long writes = 0, all_torn = 0;
    for (int r = 0; r < t_size; r++)
        for (int i = 0; i < ROUNDS; i++)
            writes += (i + r) % 4 != 0;
    MPI_Allreduce(&torn, &all_torn, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    CHECK(all_torn == 0, "%s: readers saw %ld torn pairs", flavor_name[flavor], all_torn);
    if (t_rank == root) {
        int64_t v;
        memcpy(&v, t.base, 8);
        CHECK(v == writes, "%s: exclusive increments %lld of %ld", flavor_name[flavor], (long long)v, writes);
    }
    t_win_free(&t);
}

/* Large accumulates (plain loads and stores after excluding CPU-atomic ones,
 * ONESIDED_ACC_BULK_MIN) racing single-element accumulates, fetch_and_op and
 * compare_and_swap on the same words: every update must land exactly once.
 * The large ones alternate between the fast path (the same type and count
 * on both sides) and the general one (the origin as one contiguous type). */
enum { BULK_N = 512, BULK_ROUNDS = 60 };
static void bulk_mixed(int flavor)
{
    t_win_t t = t_win_make(flavor, BULK_N * 8, MPI_INFO_NULL);
    const int root = 0;
    int64_t *ones = malloc(BULK_N * sizeof *ones), one = 1, old, cas_seen = 0, got;
    MPI_Datatype row;
    MPI_Type_contiguous(BULK_N, MPI_INT64_T, &row);
    MPI_Type_commit(&row);
    for (int i = 0; i < BULK_N; i++)
        ones[i] = 1;
    MPI_Win_lock_all(0, t.win);
    for (int r = 0; r < BULK_ROUNDS; r++) {
        if ((r + t_rank) % 2) {
            if (r % 4 < 2)
                MPI_Accumulate(ones, BULK_N, MPI_INT64_T, root, t_disp(&t, root, 0), BULK_N,
                               MPI_INT64_T, MPI_SUM, t.win);
            else
                MPI_Accumulate(ones, 1, row, root, t_disp(&t, root, 0), BULK_N, MPI_INT64_T,
                               MPI_SUM, t.win);
        } else {
            for (int i = 0; i < BULK_N; i += 7) {
                if (i % 3 == 0)
                    MPI_Accumulate(&one, 1, MPI_INT64_T, root, t_disp(&t, root, 8 * i), 1,
                                   MPI_INT64_T, MPI_SUM, t.win);
                else
                    MPI_Fetch_and_op(&one, &old, MPI_INT64_T, root, t_disp(&t, root, 8 * i),
                                     MPI_SUM, t.win);
            }
            /* One compare-and-swap increment on the last word. */
            MPI_Fetch_and_op(NULL, &cas_seen, MPI_INT64_T, root, t_disp(&t, root, 8 * (BULK_N - 1)),
                             MPI_NO_OP, t.win);
            MPI_Win_flush(root, t.win);
            for (;;) {
                int64_t want = cas_seen + 1;
                MPI_Compare_and_swap(&want, &cas_seen, &got, MPI_INT64_T, root,
                                     t_disp(&t, root, 8 * (BULK_N - 1)), t.win);
                MPI_Win_flush(root, t.win);
                if (got == cas_seen)
                    break;
                cas_seen = got;
            }
        }
        MPI_Win_flush(root, t.win);
    }
    MPI_Win_unlock_all(t.win);
    MPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == root) {
        /* Per rank: BULK_ROUNDS/2 bulk rounds (+1 on every word) and as many
         * small rounds (+1 on every 7th word, +1 by CAS on the last word). */
        int bad = 0;
        for (int i = 0; i < BULK_N; i++) {
            long want = (long)t_size * (BULK_ROUNDS / 2) * (1 + (i % 7 == 0) + (i == BULK_N - 1));
            int64_t v;
            memcpy(&v, t.base + 8 * i, 8);
            bad += v != want;
        }
        CHECK(!bad, "%s: %d of %d words wrong after bulk and atomic accumulates raced",
              flavor_name[flavor], bad, BULK_N);
    }
    MPI_Type_free(&row);
    free(ones);
    t_win_free(&t);
}

/* fence_switch's unfencing steps on one target, after the switch: the
 * first 256 fenced fetch_and_ops clear the flag (acc_unfenced), and the
 * next bulk accumulate switches again. Fenced again right away, the
 * threshold doubles to 512; after 4096 fenceless ones (clearing paid for
 * its membarrier) it halves back to 256 (os_acc_refenced). */
static const struct {
    int fops;          /* fetch_and_ops */
    uint64_t unfenced; /* acc_unfenced after them */
    int switches;      /* of a bulk accumulate after them; -1: none */
} unfence_step[] = {
    { 257, 1, 1 },  /* the 256th clears, the 257th is fenceless */
    { 257, 1, 0 },  /* fenced again at once: 512 now */
    { 254, 1, -1 }, /* 511 fenced */
    { 1, 2, -1 },   /* the 512th clears */
    { 4096, 2, 1 }, /* fenceless */
    { 256, 3, 1 },  /* clearing paid: 256 again */
};

/* The first bulk accumulate on a target makes that target's CPU-atomic
 * accumulates fence from then on (ONESIDED_ACC_MEMBARRIER,
 * os_acc_fence_switch): single-element accumulates switch nothing, one
 * bulk accumulate switches its target once, a second one finds it
 * switched. Where membarrier is refused (no_cma --membarrier), or
 * ONESIDED_ACC_MEMBARRIER=0, nothing switches, and a refusal is counted on
 * every process. Where an accumulate does not go bulk (memory reached by
 * CMA, network atomics) there is nothing to switch either. */
static void fence_switch(int flavor)
{
    const char *asked = getenv("ONESIDED_ACC_MEMBARRIER");
    const bool refused = getenv("ONESIDED_TEST_NO_MEMBARRIER") != NULL;
    const bool off = asked && !strcmp(asked, "0"), fenceless = !refused && !off;
    const int root = 0, bulker = t_size - 1;
    t_win_t t = t_win_make(flavor, BULK_N * 8, MPI_INFO_NULL);
    int64_t *ones = malloc(BULK_N * sizeof *ones), one = 1, old;
    onesided_win_stats_t s0, s1, s2;
    for (int i = 0; i < BULK_N; i++)
        ones[i] = 1;
    onesided_win_get_stats(t.win, &s0);
    MPI_Win_lock_all(0, t.win);
    for (int i = 0; i < 16; i++) {
        MPI_Accumulate(&one, 1, MPI_INT64_T, root, t_disp(&t, root, 8 * i), 1, MPI_INT64_T,
                       MPI_SUM, t.win);
        MPI_Fetch_and_op(&one, &old, MPI_INT64_T, root, t_disp(&t, root, 8 * i), MPI_SUM, t.win);
    }
    MPI_Win_flush_all(t.win);
    onesided_win_get_stats(t.win, &s1);
    MPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == bulker)
        for (int k = 0; k < 2; k++) {
            MPI_Accumulate(ones, BULK_N, MPI_INT64_T, root, t_disp(&t, root, 0), BULK_N,
                           MPI_INT64_T, MPI_SUM, t.win);
            MPI_Win_flush(root, t.win);
        }
    MPI_Win_unlock_all(t.win);
    onesided_win_get_stats(t.win, &s2);
    const uint64_t small_switches = s1.counter[ONESIDED_STAT_ACC_FENCE_SWITCHES] -
                                    s0.counter[ONESIDED_STAT_ACC_FENCE_SWITCHES];
    const uint64_t switches = s2.counter[ONESIDED_STAT_ACC_FENCE_SWITCHES] -
                              s1.counter[ONESIDED_STAT_ACC_FENCE_SWITCHES];
    const bool went_bulk = s2.counter[ONESIDED_STAT_ACC_BULK_ELEMS] >
                           s1.counter[ONESIDED_STAT_ACC_BULK_ELEMS];
    CHECK(small_switches == 0, "%s: single-element accumulates switched %llu targets",
          flavor_name[flavor], (unsigned long long)small_switches);
    /* The process that went bulk switched: the origin, or the target
     * where it served them as requests. */
    const uint64_t want = went_bulk && fenceless ? 1 : 0;
    CHECK(switches == want, "%s: %llu fence switches on rank %d after two bulk accumulates "
          "(want %llu; bulk here %d)", flavor_name[flavor], (unsigned long long)switches, t_rank,
          (unsigned long long)want, went_bulk);
    /* Where the bulker switched its target itself, its own CPU-atomic
     * accumulates there fence now, and clear it (unfence_step). */
    MPI_Barrier(MPI_COMM_WORLD);
    int again = t_rank == bulker && switches == 1;
    MPI_Bcast(&again, 1, MPI_INT, bulker, MPI_COMM_WORLD);
    if (again) {
        MPI_Win_lock_all(0, t.win);
        if (t_rank == bulker) {
            int64_t total = 0;
            for (size_t k = 0; k < sizeof unfence_step / sizeof *unfence_step; k++) {
                onesided_win_stats_t s3;
                for (int i = 0; i < unfence_step[k].fops; i++, total++)
                    MPI_Fetch_and_op(&one, &old, MPI_INT64_T, root,
                                     t_disp(&t, root, 8 * 16), MPI_SUM, t.win);
                MPI_Win_flush(root, t.win);
                onesided_win_get_stats(t.win, &s3);
                const uint64_t unfenced = s3.counter[ONESIDED_STAT_ACC_UNFENCED] -
                                          s2.counter[ONESIDED_STAT_ACC_UNFENCED];
                CHECK(unfenced == unfence_step[k].unfenced, "%s: step %zu: acc_unfenced %llu after "
                      "%lld fetch_and_ops, want %llu", flavor_name[flavor], k,
                      (unsigned long long)unfenced, (long long)total,
                      (unsigned long long)unfence_step[k].unfenced);
                if (unfence_step[k].switches < 0)
                    continue;
                const uint64_t before = s3.counter[ONESIDED_STAT_ACC_FENCE_SWITCHES];
                MPI_Accumulate(ones, BULK_N, MPI_INT64_T, root, t_disp(&t, root, 0), BULK_N,
                               MPI_INT64_T, MPI_SUM, t.win);
                MPI_Win_flush(root, t.win);
                onesided_win_get_stats(t.win, &s3);
                const uint64_t sw = s3.counter[ONESIDED_STAT_ACC_FENCE_SWITCHES] - before;
                CHECK(sw == (uint64_t)unfence_step[k].switches, "%s: step %zu: the bulk accumulate "
                      "switched %llu targets, want %d", flavor_name[flavor], k,
                      (unsigned long long)sw, unfence_step[k].switches);
            }
        }
        MPI_Win_unlock_all(t.win);
    }
    const uint64_t fallback = s2.counter[ONESIDED_STAT_FALLBACK_ACC_MEMBARRIER];
    CHECK(fallback == (refused && !off ? 1u : 0u), "%s: fallback_acc_membarrier %llu "
          "(membarrier %s)", flavor_name[flavor], (unsigned long long)fallback,
          refused ? "refused" : "allowed");
    MPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == root) {
        int64_t fops = 0, bulks = 2;
        for (size_t k = 0; again && k < sizeof unfence_step / sizeof *unfence_step; k++) {
            fops += unfence_step[k].fops;
            bulks += unfence_step[k].switches >= 0;
        }
        int bad = 0;
        for (int i = 0; i < BULK_N; i++) {
            int64_t v;
            memcpy(&v, t.base + 8 * i, 8);
            bad += v != (i < 16 ? 2 * t_size : i == 16 ? fops : 0) + bulks;
        }
        CHECK(!bad, "%s: %d of %d words wrong after the switch", flavor_name[flavor], bad,
              BULK_N);
    }
    free(ones);
    t_win_free(&t);
}

/* MPI_Win_create over a block in the heap: its first and last page hold
 * other objects and stay private (CMA), the pages inside are made shareable
 * and mapped by the node's processes (a block that starts on a page, head 0,
 * has no private first part). Every rank accumulates on words in both parts
 * and on one that the boundary between them splits a put of: exact totals,
 * since every origin (the owner too) takes the accumulate mutex on either
 * part; only what lies inside moves without CMA. */
static void heap_block(size_t head)
{
    enum { BYTES = 48 * 1024 }; /* under glibc's mmap threshold: the heap */
    const int root = 0;
    /* The window starts `head` bytes after a page boundary: 0 (no private
     * part before the pages inside, as glibc returns now and then) or not. */
    char *mem = malloc(BYTES + 8192);
    char *block = (char *)(((uintptr_t)mem + 4095) / 4096 * 4096) + head;
    memset(block, 0, BYTES);
    MPI_Win win;
    MPI_Win_create(block, BYTES, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    /* Words: the first (edge), the first page boundary after it minus 8
     * (edge, next to the zone), that boundary (zone), the middle (zone), the
     * last (edge). The boundaries come from the root's address. */
    uint64_t first_page = ((uintptr_t)block + 4096) / 4096 * 4096 - (uintptr_t)block;
    MPI_Bcast(&first_page, 1, MPI_UINT64_T, root, MPI_COMM_WORLD);
    const MPI_Aint at[5] = { 0, (MPI_Aint)first_page - 8, (MPI_Aint)first_page,
                             (MPI_Aint)(BYTES / 2 / 8 * 8), BYTES - 8 };
    int64_t one = 1, old, ones[3] = { 1, 1, 1 };
    /* One accumulate on a private word and a shared one at once, and one on
     * three private words (by CMA: gathered into one read and one write). */
    MPI_Datatype both, edges;
    const int idx[2] = { (int)(at[0] / 8), (int)(at[3] / 8) };
    const int eidx[3] = { (int)(at[0] / 8), (int)(at[1] / 8), (int)(at[4] / 8) };
    MPI_Type_create_indexed_block(2, 1, idx, MPI_INT64_T, &both);
    MPI_Type_commit(&both);
    MPI_Type_create_indexed_block(3, 1, eidx, MPI_INT64_T, &edges);
    MPI_Type_commit(&edges);
    MPI_Win_lock_all(0, win);
    for (int i = 0; i < ROUNDS; i++) {
        for (int k = 0; k < 5; k++) {
            if (k % 2)
                MPI_Accumulate(&one, 1, MPI_INT64_T, root, at[k], 1, MPI_INT64_T, MPI_SUM, win);
            else
                MPI_Fetch_and_op(&one, &old, MPI_INT64_T, root, at[k], MPI_SUM, win);
        }
        MPI_Accumulate(ones, 2, MPI_INT64_T, root, 0, 1, both, MPI_SUM, win);
        MPI_Accumulate(ones, 3, MPI_INT64_T, root, 0, 1, edges, MPI_SUM, win);
    }
    MPI_Win_unlock_all(win);
    MPI_Type_free(&both);
    MPI_Type_free(&edges);
    /* A put across the boundary at the end of the pages inside (the words
     * above are elsewhere), read back whole. */
    int64_t pair[2] = { 7, 9 }, back[2] = { 0, 0 };
    /* The last page boundary inside (not the window's end, where head is 0). */
    uint64_t last_page = ((uintptr_t)block + BYTES - 1) / 4096 * 4096 - (uintptr_t)block;
    MPI_Bcast(&last_page, 1, MPI_UINT64_T, root, MPI_COMM_WORLD);
    const MPI_Aint across = (MPI_Aint)last_page;
    MPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == t_size - 1) {
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, root, 0, win);
        MPI_Put(pair, 2, MPI_INT64_T, root, across - 8, 2, MPI_INT64_T, win);
        MPI_Win_flush(root, win);
        MPI_Get(back, 2, MPI_INT64_T, root, across - 8, 2, MPI_INT64_T, win);
        MPI_Win_unlock(root, win);
        CHECK(back[0] == 7 && back[1] == 9, "heap block: a put across the boundary reads back "
              "%lld %lld", (long long)back[0], (long long)back[1]);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == root) {
        MPI_Win_lock(MPI_LOCK_SHARED, root, 0, win);
        for (int k = 0; k < 5; k++) {
            int64_t v;
            static const int per_round[5] = { 3, 2, 1, 2, 2 };
            const long want = (long)ROUNDS * t_size * per_round[k];
            memcpy(&v, block + at[k], 8);
            CHECK(v == want, "heap block: word at %ld holds %lld of %ld", (long)at[k],
                  (long long)v, want);
        }
        MPI_Win_unlock(root, win);
    }
    MPI_Win_free(&win);
    free(mem);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    T_FOR_EACH_FLAVOR(f) {
        totals(f);
        exclusion(f);
        bulk_mixed(f);
        fence_switch(f);
    }
    heap_block(0);
    heap_block(64);
    return t_finish("test_concurrency");
}
