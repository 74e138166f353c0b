/*
 * 8-byte latency of one-sided operations, native host-MPI RMA against
 * onesided in the same run. The binary is linked with onesided, so MPI_*
 * calls reach onesided while PMPI_* calls reach the host MPI's own RMA.
 *
 *   mpiexec -n 2 os_microbench [--iters N] [--reps R] [--csv FILE]
 *                              [--flavor allocate|create|create_allocmem]
 *                              [--busy-target USEC] [--only ROWS] [--windows N]
 *                              [--roundtrip] [--samples] [--pad STRING]
 *
 * --flavor picks how both implementations get their window: MPI_Win_allocate
 * (default), MPI_Win_create over malloc'd memory, or MPI_Win_create over
 * memory from MPI_Alloc_mem (each implementation's own).
 *
 * Rank 0 is the origin, rank 1 the target. The target idles in a barrier,
 * inside MPI, or with --busy-target computes in chunks of USEC microseconds
 * and enters MPI (one MPI_Iprobe) only between chunks, like an application
 * that is busy: then the passive-target rows show whether the origin has to
 * wait for the target (fence and PSCW need the target and are skipped).
 * Each row is the median over R repetitions of the mean over N iterations,
 * the two implementations' repetitions taken in turn on windows that exist
 * side by side.
 * The last rows time window creation and free themselves: --windows N
 * windows (default 100) of 4 KB of the chosen flavor made one after
 * another, all alive at once, then freed (for create_allocmem, MPI_Alloc_mem
 * and MPI_Free_mem are included), per window: the cost of a window with N
 * others alive, as in programs that keep a window per array (Global
 * Arrays, NWChem). Rows "window create" and "window free" are the median
 * round; the "first round" rows are each library's first, which finds
 * nothing made by an earlier round (a program that makes its windows once),
 * for N of 100 and more (a round of fewer is mostly the barriers' skew).
 * Every result is verified; a wrong value aborts the run. --only runs the
 * rows named in a comma list ("put+flush,window create"), the others are
 * NaN; with BENCH_IMPLS (bench_impl.h) the main job runs a host's own RMA
 * one row per job where it crashes.
 * --roundtrip adds the machine's own reference, row "cache-line round
 * trip": one cache line passed back and forth between the two processes
 * with plain loads and stores (the host MPI's shared memory, no MPI call in
 * the loop), in both columns. On a VM it tells a job whose two processes
 * landed far apart (on this 2-core KVM guest 60-200 ns in some jobs and
 * 600-700 in others) from a slow library. It adds the origin's own speed
 * too, rows "add loop at start" and "add loop at end" (ns per dependent
 * add of a register-free loop, rank 0 alone, before and after the rows):
 * on that guest the same loop takes 0.33 ns in some jobs and 0.66 in
 * others, and changes within a job.
 * --samples prints each repetition of the 8-byte rows, both columns, to
 * tell a row slow in every repetition from one that a millisecond of the
 * machine's own noise hit, and the page offset of the origin's stack
 * buffer: with address randomization off (setarch -R) it moves with the
 * length of the arguments (--pad, ignored otherwise), and
 * bench/stack_offsets.py sweeps it to tell a job slow for where its stack
 * landed from one slow for the machine.
 */
#include "bench_impl.h"

enum { B_PUT, B_GET, B_ACC, B_FOP, B_CAS, B_LOCK_PUT_UNLOCK, B_FENCE, B_PSCW, B_WIN_CREATE,
       B_WIN_FREE, B_WIN_CREATE_FIRST, B_WIN_FREE_FIRST, NBENCH };
static const char *const bench_name[NBENCH] = {
    "put+flush", "get+flush", "accumulate+flush", "fetch_and_op", "compare_and_swap",
    "lock-put-unlock", "fence epoch", "pscw epoch", "window create", "window free",
    "window create (first round)", "window free (first round)",
};
static int nwins = 100; /* --windows */
static bool roundtrip;  /* --roundtrip */
static bool print_samples; /* --samples */
static unsigned stack_offset; /* page offset of the origin's buffer in run(), for --samples */

static int rank, size, busy_us;
static const char *only; /* --only: a comma list of row names, or NULL for all */

static bool row_on(int b)
{
    return !only || bench_in_list(only, bench_name[b]);
}

static void compute_for(int usec)
{
    double t0 = MPI_Wtime();
    volatile double sink = 0;
    while (MPI_Wtime() - t0 < usec * 1e-6)
        for (int k = 0; k < 100; k++)
            sink += k;
}

/* The busy target: compute, poke MPI once, until the origin says it is done. */
static void busy_target(void)
{
    int done = 0;
    while (!done) {
        compute_for(busy_us);
        MPI_Iprobe(0, 99, MPI_COMM_WORLD, &done, MPI_STATUS_IGNORE);
    }
    MPI_Recv(NULL, 0, MPI_BYTE, 0, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

static void fail(const char *what, long got, long want)
{
    fprintf(stderr, "os_microbench: VERIFICATION FAILED: %s: got %ld, expected %ld\n", what, got,
            want);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

/* One timed repetition of `iters` iterations; returns microseconds per iteration. */
static double run(const impl_t *m, int bench, MPI_Win win, long *base, int iters, MPI_Group peer)
{
    const int target = 1;
    long one = 1, val = 0, res = 0, cmp = 0;
    double t0 = 0, t = 0;
    stack_offset = (unsigned)((uintptr_t)&val & 4095);
    MPI_Barrier(MPI_COMM_WORLD);
    if (busy_us && rank == 1 && bench < B_FENCE) {
        busy_target();
        goto done;
    }
    switch (bench) {
    case B_PUT: case B_GET: case B_ACC: case B_FOP: case B_CAS:
        if (rank == 0) {
            m->lock_all(0, win);
            t0 = MPI_Wtime();
            for (int i = 0; i < iters; i++) {
                switch (bench) {
                case B_PUT: val = i; m->put(&val, 1, MPI_LONG, target, 0, 1, MPI_LONG, win); m->flush(target, win); break;
                case B_GET: m->get(&res, 1, MPI_LONG, target, 1, 1, MPI_LONG, win); m->flush(target, win); break;
                case B_ACC: m->acc(&one, 1, MPI_LONG, target, 2, 1, MPI_LONG, MPI_SUM, win); m->flush(target, win); break;
                case B_FOP: m->fop(&one, &res, MPI_LONG, target, 3, MPI_SUM, win); m->flush(target, win); break;
                case B_CAS: cmp = i; val = i + 1; m->cas(&val, &cmp, &res, MPI_LONG, target, 4, win); m->flush(target, win);
                    if (res != i) fail("compare_and_swap fetched value", res, i);
                    break;
                }
            }
            t = MPI_Wtime() - t0;
            m->unlock_all(win);
        }
        break;
    case B_LOCK_PUT_UNLOCK:
        if (rank == 0) {
            t0 = MPI_Wtime();
            for (int i = 0; i < iters; i++) {
                val = i;
                m->lock(MPI_LOCK_EXCLUSIVE, target, 0, win);
                m->put(&val, 1, MPI_LONG, target, 5, 1, MPI_LONG, win);
                m->unlock(target, win);
            }
            t = MPI_Wtime() - t0;
        }
        break;
    case B_FENCE:
        /* The paper's pattern: every process puts to its neighbour. */
        t0 = MPI_Wtime();
        for (int i = 0; i < iters; i++) {
            val = i;
            m->fence(MPI_MODE_NOPRECEDE, win);
            m->put(&val, 1, MPI_LONG, (rank + 1) % size, 6, 1, MPI_LONG, win);
            m->fence(MPI_MODE_NOSTORE | MPI_MODE_NOPUT | MPI_MODE_NOSUCCEED, win);
        }
        t = MPI_Wtime() - t0;
        if (base[6] != iters - 1)
            fail("fence epoch put", base[6], iters - 1);
        break;
    case B_PSCW:
        t0 = MPI_Wtime();
        for (int i = 0; i < iters; i++) {
            val = i;
            m->post(peer, 0, win);
            m->start(peer, 0, win);
            m->put(&val, 1, MPI_LONG, (rank + 1) % size, 7, 1, MPI_LONG, win);
            m->complete(win);
            m->wait(win);
        }
        t = MPI_Wtime() - t0;
        if (base[7] != iters - 1)
            fail("pscw epoch put", base[7], iters - 1);
        break;
    }
    if (busy_us && rank == 0 && bench < B_FENCE)
        MPI_Send(NULL, 0, MPI_BYTE, 1, 99, MPI_COMM_WORLD);
done:
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Bcast(&t, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    return t * 1e6 / iters;
}

/* One repetition of window creation and free: microseconds per window of
 * each, measured by rank 0 between barriers. */
static void window_lifecycle(const impl_t *m, const char *flavor, double *create_us,
                             double *free_us)
{
    MPI_Win *wins = malloc(sizeof *wins * (size_t)nwins);
    void **mem = malloc(sizeof *mem * (size_t)nwins);
    if (!wins || !mem)
        fail("window lifecycle: memory for the handles", 0, nwins);
    const MPI_Aint bytes = 4096;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < nwins; i++) {
        if (!strcmp(flavor, "create")) {
            mem[i] = calloc(1, (size_t)bytes);
            m->win_create(mem[i], bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &wins[i]);
        } else if (!strcmp(flavor, "create_allocmem")) {
            m->alloc_mem(bytes, MPI_INFO_NULL, &mem[i]);
            m->win_create(mem[i], bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &wins[i]);
        } else {
            m->win_allocate(bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem[i], &wins[i]);
        }
    }
    double t1 = MPI_Wtime();
    MPI_Barrier(MPI_COMM_WORLD);
    double t2 = MPI_Wtime();
    for (int i = 0; i < nwins; i++) {
        m->win_free(&wins[i]);
        if (!strcmp(flavor, "create"))
            free(mem[i]);
        else if (!strcmp(flavor, "create_allocmem"))
            m->free_mem(mem[i]);
    }
    double t3 = MPI_Wtime();
    MPI_Barrier(MPI_COMM_WORLD);
    double t[2] = { (t1 - t0) * 1e6 / nwins, (t3 - t2) * 1e6 / nwins };
    free(wins);
    free(mem);
    MPI_Bcast(t, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    *create_us = t[0];
    *free_us = t[1];
}

static void verify(int bench, long *base, long iters_total)
{
    /* On the target, after the last repetition of a benchmark. */
    if (rank != 1)
        return;
    switch (bench) {
    case B_ACC: if (base[2] != iters_total) fail("accumulate total", base[2], iters_total); break;
    case B_FOP: if (base[3] != iters_total) fail("fetch_and_op total", base[3], iters_total); break;
    default: break;
    }
}

/* Nanoseconds per add of a loop with nothing but a dependent add through
 * memory, on rank 0 (the origin of every row): the median of `reps` runs,
 * the speed of the core the origin runs on, no MPI and no shared memory. */
static double origin_add_loop(int reps)
{
    double *t = malloc(sizeof(double) * (size_t)reps), med = NAN;
    if (rank == 0) {
        enum { ADDS = 2000000 };
        volatile unsigned long x = 0;
        for (int r = 0; r < reps; r++) {
            double t0 = MPI_Wtime();
            for (unsigned long i = 0; i < ADDS; i++)
                x += i;
            t[r] = (MPI_Wtime() - t0) * 1e9 / ADDS;
        }
        med = bench_median(t, reps);
    }
    free(t);
    return med;
}

/* Microseconds per round trip of one cache line between the two processes
 * (--roundtrip): rank 0 stores i, rank 1 answers i; the median of `reps`
 * runs of `iters` round trips. The host MPI's shared window, with nothing
 * of either implementation inside the loop. */
static double line_round_trip(int iters, int reps)
{
    MPI_Comm node;
    MPI_Win win;
    long *mine, *line;
    MPI_Aint sz;
    int du;
    double *t = malloc(sizeof(double) * (size_t)reps), med;
    PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    PMPI_Win_allocate_shared(rank == 0 ? 128 : 0, 1, MPI_INFO_NULL, node, &mine, &win);
    PMPI_Win_shared_query(win, 0, &sz, &du, &line);
    long *ping = line, *pong = line + 8; /* a cache line apart */
    *ping = *pong = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    long n = 0;
    for (int r = 0; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < iters; i++) {
            n++;
            if (rank == 0) {
                __atomic_store_n(ping, n, __ATOMIC_RELEASE);
                while (__atomic_load_n(pong, __ATOMIC_ACQUIRE) != n)
                    ;
            } else {
                while (__atomic_load_n(ping, __ATOMIC_ACQUIRE) != n)
                    ;
                __atomic_store_n(pong, n, __ATOMIC_RELEASE);
            }
        }
        t[r] = (MPI_Wtime() - t0) * 1e6 / iters;
    }
    PMPI_Bcast(t, reps, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    med = bench_median(t, reps);
    free(t);
    PMPI_Win_free(&win);
    PMPI_Comm_free(&node);
    return med;
}

int main(int argc, char **argv)
{
    int iters = 2000, reps = 7;
    const char *csv = NULL, *flavor = "allocate";
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--csv") && i + 1 < argc) csv = argv[++i];
        else if (!strcmp(argv[i], "--flavor") && i + 1 < argc) flavor = argv[++i];
        else if (!strcmp(argv[i], "--busy-target") && i + 1 < argc) busy_us = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--windows") && i + 1 < argc) nwins = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--roundtrip")) roundtrip = true;
        else if (!strcmp(argv[i], "--samples")) print_samples = true;
        else if (!strcmp(argv[i], "--pad") && i + 1 < argc) i++; /* moves the stack (stack_offsets.py) */
    }
    if (nwins < 1)
        nwins = 1;
    if (size != 2) {
        if (rank == 0)
            fprintf(stderr, "os_microbench runs on exactly 2 processes\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Group world, peer;
    int other = 1 - rank;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 1, &other, &peer);
    const double line_us = roundtrip ? line_round_trip(20000, reps) : NAN;
    const double add_start_ns = roundtrip ? origin_add_loop(reps) : NAN;

    /* Both implementations' windows side by side, their repetitions taken in
     * turn, so that both see the same machine. Measured one after the other
     * (every native row, then every onesided row, seconds apart), the ratio
     * of one row moved by up to 30 % from run to run across the namespace
     * hosts: the machine's load drifts within a run. */
    double med[2][NBENCH];
    MPI_Win win[2] = { MPI_WIN_NULL, MPI_WIN_NULL };
    long *base[2] = { NULL, NULL };
    const MPI_Aint wbytes = 16 * sizeof(long);
    for (int k = 0; k < 2; k++) {
        const impl_t *m = &impls[k];
        for (int b = 0; b < NBENCH; b++)
            med[k][b] = NAN;
        if (!bench_impl_on(k))
            continue;
        if (!strcmp(flavor, "create")) {
            base[k] = calloc(16, sizeof(long));
            m->win_create(base[k], wbytes, sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &win[k]);
        } else if (!strcmp(flavor, "create_allocmem")) {
            m->alloc_mem(wbytes, MPI_INFO_NULL, &base[k]);
            m->win_create(base[k], wbytes, sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &win[k]);
        } else {
            m->win_allocate(wbytes, sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base[k], &win[k]);
        }
    }
    double *samples[2] = { malloc(sizeof(double) * (size_t)reps),
                           malloc(sizeof(double) * (size_t)reps) };
    for (int b = 0; b < B_WIN_CREATE; b++) {
        if ((busy_us && b >= B_FENCE) || !row_on(b)) {
            for (int k = 0; k < 2; k++)
                med[k][b] = busy_us && b >= B_FENCE && bench_impl_on(k) ? 0 : NAN;
            continue;
        }
        for (int k = 0; k < 2; k++) {
            if (!bench_impl_on(k))
                continue;
            memset(base[k], 0, 16 * sizeof(long));
            MPI_Barrier(MPI_COMM_WORLD);
            impls[k].fence(0, win[k]); /* warm-up and clean epoch boundary */
            impls[k].fence(MPI_MODE_NOSUCCEED, win[k]);
        }
        for (int r = 0; r < reps; r++)
            for (int k = 0; k < 2; k++) {
                if (!bench_impl_on(k))
                    continue;
                if (b == B_CAS) { /* restart the compare chain each repetition */
                    MPI_Barrier(MPI_COMM_WORLD);
                    base[k][4] = 0;
                    MPI_Barrier(MPI_COMM_WORLD);
                }
                samples[k][r] = run(&impls[k], b, win[k], base[k], iters, peer);
            }
        MPI_Barrier(MPI_COMM_WORLD);
        for (int k = 0; k < 2; k++) {
            if (!bench_impl_on(k))
                continue;
            if (print_samples && rank == 0) {
                printf("samples %-18s %-8s", bench_name[b], k ? "onesided" : "native");
                for (int r = 0; r < reps; r++)
                    printf(" %.4f", samples[k][r]);
                printf("\n");
            }
            verify(b, base[k], (long)iters * reps);
            med[k][b] = bench_median(samples[k], reps);
        }
    }
    free(samples[0]);
    free(samples[1]);
    for (int k = 0; k < 2; k++) {
        if (!bench_impl_on(k))
            continue;
        impls[k].win_free(&win[k]);
        if (!strcmp(flavor, "create"))
            free(base[k]);
        else if (!strcmp(flavor, "create_allocmem"))
            impls[k].free_mem(base[k]);
    }
    /* Window lifecycle, the two implementations alternating repetition by
     * repetition so that both see the same machine load. */
    for (int k = 0; k < 2; k++)
        med[k][B_WIN_CREATE] = med[k][B_WIN_FREE] = med[k][B_WIN_CREATE_FIRST] =
            med[k][B_WIN_FREE_FIRST] = NAN;
    if (!busy_us && (row_on(B_WIN_CREATE) || row_on(B_WIN_FREE))) {
        double *cs[2], *fs[2];
        for (int k = 0; k < 2; k++) {
            cs[k] = malloc(sizeof(double) * (size_t)reps);
            fs[k] = malloc(sizeof(double) * (size_t)reps);
        }
        for (int r = 0; r < reps; r++)
            for (int k = 0; k < 2; k++)
                if (bench_impl_on(k))
                    window_lifecycle(&impls[k], flavor, &cs[k][r], &fs[k][r]);
        for (int k = 0; k < 2; k++) {
            const bool first = bench_impl_on(k) && nwins >= 100;
            med[k][B_WIN_CREATE_FIRST] = first ? cs[k][0] : NAN;
            med[k][B_WIN_FREE_FIRST] = first ? fs[k][0] : NAN;
            med[k][B_WIN_CREATE] = bench_impl_on(k) ? bench_median(cs[k], reps) : NAN;
            med[k][B_WIN_FREE] = bench_impl_on(k) ? bench_median(fs[k], reps) : NAN;
            free(cs[k]);
            free(fs[k]);
        }
    }
    const double add_end_ns = roundtrip ? origin_add_loop(reps) : NAN;
    if (rank == 0) {
        FILE *out = csv ? fopen(csv, "w") : NULL;
        printf("window flavor: %s\n", flavor);
        printf("%-20s %12s %12s %8s\n", "8-byte latency (us)", "native", "onesided", "ratio");
        if (out)
            fprintf(out, "benchmark,native_us,onesided_us,ratio\n");
        if (busy_us)
            printf("target busy: computes %d us between MPI calls\n", busy_us);
        for (int b = 0; b < NBENCH; b++) {
            if ((busy_us && b >= B_FENCE) ||
                ((b == B_WIN_CREATE_FIRST || b == B_WIN_FREE_FIRST) && nwins < 100))
                continue;
            if (b == B_WIN_CREATE)
                printf("%-20s (per window, %d windows of 4 KB)\n", "window lifecycle", nwins);
            double ratio = med[1][b] / med[0][b];
            printf("%-20s %12.3f %12.3f %8.4f\n", bench_name[b], med[0][b], med[1][b], ratio);
            if (out)
                fprintf(out, "%s,%.4f,%.4f,%.4f\n", bench_name[b], med[0][b], med[1][b], ratio);
        }
        if (roundtrip) {
            printf("%-20s %12.3f %12s (the machine: one cache line, no MPI)\n",
                   "cache-line round trip", line_us, "");
            printf("%-20s %12.3f %12.3f (ns per add on the origin's core, before and after)\n",
                   "add loop", add_start_ns, add_end_ns);
            if (out) {
                fprintf(out, "cache-line round trip,%.4f,%.4f,1.0000\n", line_us, line_us);
                fprintf(out, "add loop at start,%.4f,%.4f,1.0000\n", add_start_ns, add_start_ns);
                fprintf(out, "add loop at end,%.4f,%.4f,1.0000\n", add_end_ns, add_end_ns);
            }
        }
        if (print_samples)
            printf("origin stack page offset 0x%03x\n", stack_offset);
        printf("(median of %d repetitions x %d iterations; ratio = onesided / native)\n", reps, iters);
        if (out)
            fclose(out);
    }
    MPI_Group_free(&peer);
    MPI_Group_free(&world);
    MPI_Finalize();
    return 0;
}
