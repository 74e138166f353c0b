/*
 * HPCC RandomAccess with MPI one-sided operations (paper 001).
 *
 *   mpiexec -n P randomaccess [--log2-local K] [--flavor allocate|create]
 *                             [--variants LIST] [--impl native|onesided]
 *                             [--reps R] [--csv FILE]
 *
 * The table and the update stream are HPCC's: a table of 2^K 64-bit words per
 * process, initialised to the global index; 4 x (table size) updates in all,
 * each process running its own segment of the 64-bit LFSR stream
 * (HPCC_starts, POLY = 7), an update xoring the random value into the word it
 * selects. Updates are taken in blocks of at most 1024, HPCC's look-ahead rule.
 *
 * Variants:
 *   two_sided   the reference: per 1024-update block, bucket by owner,
 *               MPI_Alltoall of counts, MPI_Alltoallv of updates, apply locally
 *   GMP         per update: lock(SHARED), MPI_Get, flush, xor, MPI_Put, unlock
 *               (not atomic: concurrent updates of one word may be lost,
 *               which HPCC tolerates up to 1% of the table)
 *   ACC         per update: lock(SHARED), MPI_Accumulate(BXOR), unlock
 *   ACC_EPOCH   one lock_all epoch, MPI_Accumulate(BXOR) per update,
 *               MPI_Win_flush_all after every 1024 updates (what onesided's
 *               automatic coalescing batches)
 *   ACC_AGG512, ACC_AGG1024
 *               per block of 512 / 1024 updates, one MPI_Accumulate per owner
 *               with an indexed-block target datatype, under lock/unlock
 *   DIRECT_ACC  as ACC_EPOCH with MPI_SUM on MPI_UINT64_T and the window hint
 *               accumulate_ops=same_op (paper 001's direct accumulate)
 * Every one-sided variant runs twice in the same processes: with the host
 * MPI's own RMA (PMPI_*, "native") and with onesided (MPI_*). A variant that
 * takes less than REPEAT_BELOW seconds runs R times (--reps, native and
 * onesided in turn, each on a fresh table) and reports the median: a run of
 * 30 ms moves by 30 % from one run to the next on a shared machine.
 *
 * Verification: every process replays every process's stream and undoes the
 * updates aimed at its part of the table (xor again, or subtract); a word that
 * is not then its global index is an error. Atomic variants must have 0
 * errors. GMP may lose an update only where two processes updated one word
 * (each process's own updates are ordered by its unlocks), so its words that
 * one process alone updated must be exact too; losses on shared words are
 * counted and reported (with HPCC's 1% rule as information), never judged:
 * how many races a run meets depends on the machine's load, not on the
 * library. A failure aborts the run.
 */
#include "bench_impl.h"

#define POLY 0x0000000000000007ULL
#define PERIOD 1317624576693539401LL
#define LOOKAHEAD 1024
#define REPEAT_BELOW 0.25
#define MAX_REPS 32

typedef uint64_t u64;

/* HPCC_starts: the n-th value of the stream, in O(log n). */
static u64 hpcc_starts(int64_t n)
{
    u64 m2[64], temp = 1, ran;
    int i;
    while (n < 0) n += PERIOD;
    while (n > PERIOD) n -= PERIOD;
    if (n == 0) return 1;
    for (i = 0; i < 64; i++) {
        m2[i] = temp;
        temp = (temp << 1) ^ ((int64_t)temp < 0 ? POLY : 0);
        temp = (temp << 1) ^ ((int64_t)temp < 0 ? POLY : 0);
    }
    for (i = 62; i >= 0; i--)
        if ((n >> i) & 1) break;
    ran = 2;
    while (i > 0) {
        temp = 0;
        for (int j = 0; j < 64; j++)
            if ((ran >> j) & 1) temp ^= m2[j];
        ran = temp;
        i -= 1;
        if ((n >> i) & 1) ran = (ran << 1) ^ ((int64_t)ran < 0 ? POLY : 0);
    }
    return ran;
}

static inline u64 next_ran(u64 r)
{
    return (r << 1) ^ ((int64_t)r < 0 ? POLY : 0);
}

enum { V_TWO_SIDED, V_GMP, V_ACC, V_ACC_EPOCH, V_ACC_AGG512, V_ACC_AGG1024, V_DIRECT_ACC, NV };
static const char *const vname[NV] = { "two_sided", "GMP", "ACC", "ACC_EPOCH", "ACC_AGG512",
                                       "ACC_AGG1024", "DIRECT_ACC" };

static int rank, nprocs;
static u64 local_size, table_size, nupdates; /* nupdates: per process */

static inline void locate(u64 ran, int *owner, u64 *off)
{
    u64 idx = ran % table_size;
    *owner = (int)(idx / local_size);
    *off = idx % local_size;
}

typedef struct {
    u64 off, val;
} upd_t;

/* Bucket `n` updates by owner into per-owner runs of `bucket` (counts in cnt). */
static void bucketize(u64 *ran, int n, upd_t *bucket, int *cnt, int cap)
{
    memset(cnt, 0, sizeof(int) * (size_t)nprocs);
    for (int i = 0; i < n; i++) {
        *ran = next_ran(*ran);
        int o;
        u64 off;
        locate(*ran, &o, &off);
        bucket[(size_t)o * (size_t)cap + (size_t)cnt[o]++] = (upd_t){ off, *ran };
    }
}

static void two_sided(u64 *table)
{
    upd_t *bucket = malloc(sizeof(upd_t) * (size_t)nprocs * LOOKAHEAD);
    upd_t *in = malloc(sizeof(upd_t) * (size_t)nprocs * LOOKAHEAD);
    int *cnt = malloc(sizeof(int) * (size_t)nprocs), *rcnt = malloc(sizeof(int) * (size_t)nprocs);
    int *sd = malloc(sizeof(int) * (size_t)nprocs), *rd = malloc(sizeof(int) * (size_t)nprocs);
    int *sc = malloc(sizeof(int) * (size_t)nprocs), *rc = malloc(sizeof(int) * (size_t)nprocs);
    u64 ran = hpcc_starts((int64_t)(4 * local_size * (u64)rank));
    for (u64 done = 0; done < nupdates; done += LOOKAHEAD) {
        int n = nupdates - done < LOOKAHEAD ? (int)(nupdates - done) : LOOKAHEAD;
        bucketize(&ran, n, bucket, cnt, LOOKAHEAD);
        MPI_Alltoall(cnt, 1, MPI_INT, rcnt, 1, MPI_INT, MPI_COMM_WORLD);
        int rtot = 0;
        for (int p = 0; p < nprocs; p++) {
            sc[p] = cnt[p] * 2;
            sd[p] = p * LOOKAHEAD * 2;
            rc[p] = rcnt[p] * 2;
            rd[p] = rtot * 2;
            rtot += rcnt[p];
        }
        MPI_Alltoallv(bucket, sc, sd, MPI_UINT64_T, in, rc, rd, MPI_UINT64_T, MPI_COMM_WORLD);
        for (int i = 0; i < rtot; i++)
            table[in[i].off] ^= in[i].val;
    }
    free(bucket); free(in); free(cnt); free(rcnt); free(sd); free(rd); free(sc); free(rc);
}

static void one_sided(int v, const impl_t *m, MPI_Win win)
{
    u64 ran = hpcc_starts((int64_t)(4 * local_size * (u64)rank));
    const bool epoch = v == V_ACC_EPOCH || v == V_DIRECT_ACC;
    /* Origin buffers stay untouched until the flush completes them (MPI's
     * rule; an MPI may send from them after the call returns). */
    u64 *vals = malloc(sizeof(u64) * LOOKAHEAD);
    if (epoch)
        m->lock_all(0, win);
    if (v == V_GMP || v == V_ACC || epoch) {
        for (u64 i = 0; i < nupdates; i++) {
            ran = next_ran(ran);
            int o;
            u64 off, old, *val = &vals[i % LOOKAHEAD];
            *val = ran;
            locate(ran, &o, &off);
            switch (v) {
            case V_GMP:
                m->lock(MPI_LOCK_SHARED, o, 0, win);
                m->get(&old, 1, MPI_UINT64_T, o, (MPI_Aint)off, 1, MPI_UINT64_T, win);
                m->flush(o, win);
                old ^= *val;
                m->put(&old, 1, MPI_UINT64_T, o, (MPI_Aint)off, 1, MPI_UINT64_T, win);
                m->unlock(o, win);
                break;
            case V_ACC:
                m->lock(MPI_LOCK_SHARED, o, 0, win);
                m->acc(val, 1, MPI_UINT64_T, o, (MPI_Aint)off, 1, MPI_UINT64_T, MPI_BXOR, win);
                m->unlock(o, win);
                break;
            default:
                m->acc(val, 1, MPI_UINT64_T, o, (MPI_Aint)off, 1, MPI_UINT64_T,
                       v == V_DIRECT_ACC ? MPI_SUM : MPI_BXOR, win);
                if (i % LOOKAHEAD == LOOKAHEAD - 1)
                    m->flush_all(win);
                break;
            }
        }
    } else {
        /* Aggregation with datatypes (paper 001, Section 4.1). Words hit twice
         * in one batch are combined first: a target datatype must not overlap.
         * A small open-addressing table (4 slots per update, so it stays in
         * cache) remembers where in this run each word went; entries are
         * stamped with the run, so it needs no clearing. */
        const int batch = v == V_ACC_AGG512 ? 512 : 1024, hbits = v == V_ACC_AGG512 ? 11 : 12;
        const u64 hmask = (1u << hbits) - 1;
        upd_t *bucket = malloc(sizeof(upd_t) * (size_t)nprocs * (size_t)batch);
        int *cnt = malloc(sizeof(int) * (size_t)nprocs), *disp = malloc(sizeof(int) * (size_t)batch);
        u64 *hoff = calloc(hmask + 1, sizeof *hoff), *hslot = calloc(hmask + 1, sizeof *hslot);
        u64 stamp = 0;
        for (u64 done = 0; done < nupdates; done += (u64)batch) {
            int n = nupdates - done < (u64)batch ? (int)(nupdates - done) : batch;
            bucketize(&ran, n, bucket, cnt, batch);
            for (int o = 0; o < nprocs; o++) {
                upd_t *b = bucket + (size_t)o * (size_t)batch;
                if (!cnt[o])
                    continue;
                int k = 0;
                stamp++;
                for (int i = 0; i < cnt[o]; i++) {
                    /* hslot: stamp in the high 32 bits, run index in the low */
                    u64 h = (b[i].off * 0x9e3779b97f4a7c15ull) >> (64 - hbits);
                    while (hslot[h] >> 32 == stamp && hoff[h] != b[i].off)
                        h = (h + 1) & hmask;
                    if (hslot[h] >> 32 == stamp) {
                        vals[hslot[h] & 0xffffffffu] ^= b[i].val;
                    } else {
                        hslot[h] = stamp << 32 | (u64)k;
                        hoff[h] = b[i].off;
                        disp[k] = (int)b[i].off;
                        vals[k++] = b[i].val;
                    }
                }
                MPI_Datatype tt;
                MPI_Type_create_indexed_block(k, 1, disp, MPI_UINT64_T, &tt);
                MPI_Type_commit(&tt);
                m->lock(MPI_LOCK_SHARED, o, 0, win);
                m->acc(vals, k, MPI_UINT64_T, o, 0, 1, tt, MPI_BXOR, win);
                m->unlock(o, win);
                MPI_Type_free(&tt);
            }
        }
        free(bucket); free(cnt); free(disp); free(hoff); free(hslot);
    }
    if (epoch)
        m->unlock_all(win);
    free(vals);
}

/* Undo every update aimed at this process; count the words that are then
 * wrong, apart (in *raced) those that more than one process updated. */
static long long verify(u64 *table, bool sum, long long *raced)
{
    enum { NOBODY = -1, SEVERAL = -2 };
    int *writer = malloc(sizeof(int) * local_size);
    for (u64 i = 0; i < local_size; i++)
        writer[i] = NOBODY;
    for (int r = 0; r < nprocs; r++) {
        u64 ran = hpcc_starts((int64_t)(4 * local_size * (u64)r));
        for (u64 i = 0; i < nupdates; i++) {
            ran = next_ran(ran);
            int o;
            u64 off;
            locate(ran, &o, &off);
            if (o != rank)
                continue;
            table[off] = sum ? table[off] - ran : table[off] ^ ran;
            writer[off] = writer[off] == NOBODY || writer[off] == r ? r : SEVERAL;
        }
    }
    long long bad[2] = { 0, 0 }, total[2];
    for (u64 i = 0; i < local_size; i++)
        if (table[i] != local_size * (u64)rank + i)
            bad[writer[i] == SEVERAL]++;
    free(writer);
    MPI_Allreduce(bad, total, 2, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    *raced = total[1];
    return total[0];
}

int main(int argc, char **argv)
{
    int log2_local = 16, reps = 1;
    const char *flavor = "allocate", *csv = NULL, *vlist = NULL;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--log2-local") && i + 1 < argc) log2_local = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--flavor") && i + 1 < argc) flavor = argv[++i];
        else if (!strcmp(argv[i], "--variants") && i + 1 < argc) vlist = argv[++i];
        else if (!strcmp(argv[i], "--csv") && i + 1 < argc) csv = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--impl") && i + 1 < argc) bench_choose_impls(argv[++i]);
    }
    local_size = 1ull << log2_local;
    table_size = local_size * (u64)nprocs;
    nupdates = 4 * local_size;
    const bool create = !strcmp(flavor, "create");
    if (rank == 0)
        printf("RandomAccess: %d processes, table 2^%d words per process, %llu updates, "
               "window by %s\n", nprocs, log2_local, (unsigned long long)(nupdates * (u64)nprocs),
               create ? "MPI_Win_create over malloc" : "MPI_Win_allocate");

    FILE *out = NULL;
    if (rank == 0 && csv) {
        out = fopen(csv, "w");
        if (out) fprintf(out, "variant,impl,flavor,gups,seconds,errors\n");
    }
    if (rank == 0)
        printf("%-12s %-9s %12s %10s %8s %10s\n", "variant", "impl", "GUP/s", "seconds", "errors",
               "ns/update");
    if (reps < 1) reps = 1;
    if (reps > MAX_REPS) reps = MAX_REPS;
    for (int v = 0; v < NV; v++) {
        if (vlist && !bench_in_list(vlist, vname[v]))
            continue;
        double gups_of[2][MAX_REPS], secs_of[2][MAX_REPS];
        long long errors_of[2] = { 0, 0 };
        int done = 0;
        for (int r = 0; r < reps; r++) {
            double slowest = 0;
            for (int k = 0; k < (v == V_TWO_SIDED ? 1 : 2); k++) {
                const impl_t *m = &impls[k];
                if (v != V_TWO_SIDED && !bench_impl_on(k))
                    continue; /* profiling one implementation */
                MPI_Info info;
                MPI_Info_create(&info);
                if (v == V_DIRECT_ACC)
                    MPI_Info_set(info, "accumulate_ops", "same_op");
                u64 *table = NULL;
                MPI_Win win = MPI_WIN_NULL;
                if (v == V_TWO_SIDED) {
                    table = malloc(local_size * sizeof(u64));
                } else if (create) {
                    table = malloc(local_size * sizeof(u64));
                    m->win_create(table, (MPI_Aint)(local_size * sizeof(u64)), sizeof(u64), info,
                                  MPI_COMM_WORLD, &win);
                } else {
                    m->win_allocate((MPI_Aint)(local_size * sizeof(u64)), sizeof(u64), info,
                                    MPI_COMM_WORLD, &table, &win);
                }
                MPI_Info_free(&info);
                if (win != MPI_WIN_NULL)
                    m->lock(MPI_LOCK_EXCLUSIVE, rank, 0, win);
                for (u64 i = 0; i < local_size; i++)
                    table[i] = local_size * (u64)rank + i;
                if (win != MPI_WIN_NULL)
                    m->unlock(rank, win);
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = MPI_Wtime();
                if (v == V_TWO_SIDED)
                    two_sided(table);
                else
                    one_sided(v, m, win);
                MPI_Barrier(MPI_COMM_WORLD);
                double t = MPI_Wtime() - t0, tmax;
                MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                if (win != MPI_WIN_NULL)
                    m->lock(MPI_LOCK_EXCLUSIVE, rank, 0, win);
                long long raced = 0, exact_errors = verify(table, v == V_DIRECT_ACC, &raced);
                /* only GMP is allowed to lose updates, and only to races */
                long long errors = exact_errors + raced, forbidden = v == V_GMP ? exact_errors : errors;
                if (win != MPI_WIN_NULL)
                    m->unlock(rank, win);
                gups_of[k][r] = (double)(nupdates * (u64)nprocs) / tmax * 1e-9;
                secs_of[k][r] = tmax;
                errors_of[k] += errors;
                if (tmax > slowest) slowest = tmax;
                const char *impl = v == V_TWO_SIDED ? "mpich" : m->name;
                if (v == V_GMP && rank == 0 && raced)
                    printf("  %s (%s): %lld words lost an update to a race (words several "
                           "processes updated; %.3f%% of the table, HPCC tolerates 1%%)\n", vname[v], impl, raced,
                           100.0 * (double)raced / (double)table_size);
                if (forbidden && rank == 0)
                    BENCH_FAIL("randomaccess", "%s (%s): %lld wrong words%s", vname[v], impl, forbidden,
                               v == V_GMP ? " that only one process updated" : "");
                if (win != MPI_WIN_NULL)
                    m->win_free(&win);
                if (v == V_TWO_SIDED || create)
                    free(table);
            }
            done = r + 1;
            if (slowest >= REPEAT_BELOW) /* the same on every rank: an allreduced time */
                break;
        }
        for (int k = 0; k < (v == V_TWO_SIDED ? 1 : 2) && rank == 0; k++) {
            if (v != V_TWO_SIDED && !bench_impl_on(k))
                continue;
            const char *impl = v == V_TWO_SIDED ? "mpich" : impls[k].name;
            const double gups = bench_median(gups_of[k], done);
            const double secs = bench_median(secs_of[k], done);
            /* ns/update: per process, as each runs its own stream */
            printf("%-12s %-9s %12.6f %10.3f %8lld %10.1f%s\n", vname[v], impl, gups, secs,
                   errors_of[k], secs * 1e9 / (double)nupdates,
                   done > 1 ? "  (median of runs)" : "");
            if (out)
                fprintf(out, "%s,%s,%s,%.6f,%.4f,%lld\n", vname[v], impl, flavor, gups, secs,
                        errors_of[k]);
            fflush(stdout);
        }
    }
    if (out)
        fclose(out);
    MPI_Finalize();
    return 0;
}
