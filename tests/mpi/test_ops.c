/* Every RMA operation under every synchronization mode on every window
 * flavor, results checked element by element. */
#include "common.h"
#include "stats.h"

#include "onesided.h"

enum { N = 16 };
enum { S_FENCE, S_FENCE_NOPRECEDE, S_PSCW, S_PSCW_NOCHECK, S_LOCK, S_LOCK_ALL, S_COUNT };
static const char *const sync_name[S_COUNT] = { "fence", "fence+noprecede", "pscw",
                                                "pscw+nocheck", "lock", "lock_all" };

/* Window layout (bytes): [0,128) put area, [128,256) get source, [256,264) acc counter,
 * [264,272) fop counter, [272,280) cas word, [280,408) get_acc area, [408,536) raccumulate. */
#define PUT_OFF 0
#define GET_OFF 128
#define ACC_OFF 256
#define FOP_OFF 264
#define CAS_OFF 272
#define GACC_OFF 280
#define RACC_OFF 408
#define WIN_BYTES 544

static MPI_Group world_group, peers;

static void open_epoch(int sync, t_win_t *t, int target)
{
    switch (sync) {
    case S_FENCE: MPI_Win_fence(0, t->win); break;
    case S_FENCE_NOPRECEDE: MPI_Win_fence(MPI_MODE_NOPRECEDE, t->win); break;
    case S_PSCW:
        MPI_Win_post(peers, 0, t->win);
        MPI_Win_start(peers, 0, t->win);
        break;
    case S_PSCW_NOCHECK:
        /* NOCHECK promises the matching post happened: post, then synchronize. */
        MPI_Win_post(peers, MPI_MODE_NOCHECK, t->win);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Win_start(peers, MPI_MODE_NOCHECK, t->win);
        break;
    case S_LOCK: MPI_Win_lock(MPI_LOCK_SHARED, target, 0, t->win); break;
    case S_LOCK_ALL: MPI_Win_lock_all(0, t->win); break;
    }
}

static void close_epoch(int sync, t_win_t *t, int target)
{
    switch (sync) {
    case S_FENCE:
    case S_FENCE_NOPRECEDE: MPI_Win_fence(MPI_MODE_NOSUCCEED, t->win); break;
    case S_PSCW:
    case S_PSCW_NOCHECK:
        MPI_Win_complete(t->win);
        MPI_Win_wait(t->win);
        break;
    case S_LOCK: MPI_Win_unlock(target, t->win); break;
    case S_LOCK_ALL: MPI_Win_unlock_all(t->win); break;
    }
    MPI_Barrier(MPI_COMM_WORLD); /* passive epochs: targets read after all unlocked */
}

static void run(int flavor, int sync)
{
    const int right = (t_rank + 1) % t_size, left = (t_rank + t_size - 1) % t_size;
    const char *what = sync_name[sync];
    t_win_t t = t_win_make(flavor, WIN_BYTES, MPI_INFO_NULL);
    int *get_src = (int *)(t.base + GET_OFF);
    for (int i = 0; i < N; i++)
        get_src[i] = t_rank * 1000 + i;
    int ranks[2] = { left, right };
    MPI_Group_incl(world_group, left == right ? 1 : 2, ranks, &peers);
    MPI_Barrier(MPI_COMM_WORLD);

    int out[N], in[N], gacc_old[N];
    int64_t one = 1, fop_old = -1, cas_old = -1;
    for (int i = 0; i < N; i++) {
        out[i] = t_rank * 100 + i;
        in[i] = -1;
    }
    open_epoch(sync, &t, right);
    MPI_Put(out, N, MPI_INT, right, t_disp(&t, right, PUT_OFF), N, MPI_INT, t.win);
    MPI_Get(in, N, MPI_INT, right, t_disp(&t, right, GET_OFF), N, MPI_INT, t.win);
    MPI_Accumulate(&one, 1, MPI_INT64_T, right, t_disp(&t, right, ACC_OFF), 1, MPI_INT64_T,
                   MPI_SUM, t.win);
    MPI_Fetch_and_op(&one, &fop_old, MPI_INT64_T, right, t_disp(&t, right, FOP_OFF), MPI_SUM, t.win);
    int64_t cmp = 0, swap = t_rank + 1;
    MPI_Compare_and_swap(&swap, &cmp, &cas_old, MPI_INT64_T, right, t_disp(&t, right, CAS_OFF), t.win);
    MPI_Get_accumulate(out, N, MPI_INT, gacc_old, N, MPI_INT, right,
                       t_disp(&t, right, GACC_OFF), N, MPI_INT, MPI_SUM, t.win);
    if (sync == S_LOCK || sync == S_LOCK_ALL) {
        /* Request-based forms, passive target only. */
        MPI_Request req[3];
        int rin[N];
        int64_t racc = 5;
        MPI_Rput(out, 2, MPI_INT, right, t_disp(&t, right, RACC_OFF + 64), 2, MPI_INT, t.win, &req[0]);
        MPI_Rget(rin, N, MPI_INT, right, t_disp(&t, right, GET_OFF), N, MPI_INT, t.win, &req[1]);
        MPI_Raccumulate(&racc, 1, MPI_INT64_T, right, t_disp(&t, right, RACC_OFF), 1,
                        MPI_INT64_T, MPI_SUM, t.win, &req[2]);
        for (int k = 0; k < 3; k++)
            MPI_Wait(&req[k], MPI_STATUS_IGNORE);
        int ok = 1;
        for (int i = 0; i < N; i++)
            ok &= rin[i] == right * 1000 + i;
        CHECK(ok, "%s/%s: Rget data", flavor_name[flavor], what);
        int64_t rgacc = -1, add = 1;
        MPI_Request r;
        MPI_Rget_accumulate(&add, 1, MPI_INT64_T, &rgacc, 1, MPI_INT64_T, right,
                            t_disp(&t, right, RACC_OFF), 1, MPI_INT64_T, MPI_SUM, t.win, &r);
        int flag = 0;
        while (!flag)
            MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
        CHECK(rgacc == 5, "%s/%s: Rget_accumulate fetched %lld", flavor_name[flavor], what,
              (long long)rgacc);
        MPI_Win_flush(right, t.win);
        MPI_Win_flush_local(right, t.win);
        MPI_Win_flush_all(t.win);
        MPI_Win_flush_local_all(t.win);
    }
    close_epoch(sync, &t, right);

    /* Origin side. */
    int ok = 1;
    for (int i = 0; i < N; i++)
        ok &= in[i] == right * 1000 + i;
    CHECK(ok, "%s/%s: get data (in[0]=%d)", flavor_name[flavor], what, in[0]);
    CHECK(fop_old == 0, "%s/%s: fetch_and_op fetched %lld", flavor_name[flavor], what, (long long)fop_old);
    CHECK(cas_old == 0, "%s/%s: compare_and_swap fetched %lld", flavor_name[flavor], what, (long long)cas_old);
    ok = 1;
    for (int i = 0; i < N; i++)
        ok &= gacc_old[i] == 0;
    CHECK(ok, "%s/%s: get_accumulate fetched old values", flavor_name[flavor], what);

    /* Target side: written by `left`. */
    const int *put_area = (const int *)(t.base + PUT_OFF);
    const int *gacc_area = (const int *)(t.base + GACC_OFF);
    ok = 1;
    for (int i = 0; i < N; i++)
        ok &= put_area[i] == left * 100 + i && gacc_area[i] == left * 100 + i;
    CHECK(ok, "%s/%s: put and get_accumulate data (put[0]=%d)", flavor_name[flavor], what, put_area[0]);
    int64_t v;
    memcpy(&v, t.base + ACC_OFF, 8);
    CHECK(v == 1, "%s/%s: accumulate %lld", flavor_name[flavor], what, (long long)v);
    memcpy(&v, t.base + FOP_OFF, 8);
    CHECK(v == 1, "%s/%s: fetch_and_op target %lld", flavor_name[flavor], what, (long long)v);
    memcpy(&v, t.base + CAS_OFF, 8);
    CHECK(v == left + 1, "%s/%s: compare_and_swap target %lld", flavor_name[flavor], what, (long long)v);
    if (sync == S_LOCK || sync == S_LOCK_ALL) {
        memcpy(&v, t.base + RACC_OFF, 8);
        CHECK(v == 6, "%s/%s: Raccumulate+Rget_accumulate %lld", flavor_name[flavor], what, (long long)v);
        const int *rp = (const int *)(t.base + RACC_OFF + 64);
        CHECK(rp[0] == left * 100 && rp[1] == left * 100 + 1, "%s/%s: Rput", flavor_name[flavor], what);
    }
    MPI_Group_free(&peers);
    t_win_free(&t);
}

/* MPI_PROC_NULL targets are no-ops, also for request-based forms. */
static void proc_null(void)
{
    t_win_t t = t_win_make(F_ALLOCATE, 64, MPI_INFO_NULL);
    int x = 1;
    MPI_Request r;
    MPI_Win_lock_all(0, t.win);
    CHECK(MPI_Put(&x, 1, MPI_INT, MPI_PROC_NULL, 0, 1, MPI_INT, t.win) == MPI_SUCCESS, "put");
    CHECK(MPI_Rget(&x, 1, MPI_INT, MPI_PROC_NULL, 0, 1, MPI_INT, t.win, &r) == MPI_SUCCESS, "rget");
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    CHECK(x == 1, "PROC_NULL get leaves the buffer");
    MPI_Win_unlock_all(t.win);
    t_win_free(&t);
}

/* The R* forms of put, get and accumulate of one predefined type take the
 * fast lane exactly where their plain forms do (the node's memory, or
 * another virtual node's that UCX maps here, in lock and lock_all epochs,
 * where the configuration sends them there): each plain form goes first,
 * then its R* form, and both must raise the fast-path count alike. What the
 * lane takes is done when the call returns, so the first MPI_Test finds it
 * complete. Every R* operation counts as a request, and the data is
 * checked. An R* operation past the window's end still reports
 * MPI_ERR_RMA_RANGE from the general path. */
static void request_lane(int flavor)
{
    enum { RUN = 8, SLOTS = 2 * RUN, NCASE = 4 };
    static const char *const what[NCASE] = { "get of one element", "get of a run",
                                             "put of one element", "accumulate" };
    t_win_t t = t_win_make(flavor, SLOTS * 8, MPI_INFO_NULL);
    const int right = (t_rank + 1) % t_size, left = (t_rank + t_size - 1) % t_size;
    int64_t *mine = (int64_t *)t.base;
    for (int i = 0; i < SLOTS; i++)
        mine[i] = t_rank * 100 + i;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int mode = 0; mode < 2; mode++) { /* lock shared, lock_all */
        if (mode)
            MPI_Win_lock_all(0, t.win);
        else
            MPI_Win_lock(MPI_LOCK_SHARED, right, 0, t.win);
        const uint64_t reqs = t_stat(t.win, ONESIDED_STAT_REQUEST_OPS);
        int64_t one = -1, run[RUN], scratch[RUN], add = 1, put = 1000 + t_rank;
        int lanes = 0;
        for (int c = 0; c < NCASE; c++) {
            uint64_t took[2]; /* plain form, R* form */
            MPI_Request rq = MPI_REQUEST_NULL;
            for (int r = 0; r < 2; r++) {
                const uint64_t before = t_stat(t.win, ONESIDED_STAT_FAST_PATH_OPS);
                MPI_Request *req = r ? &rq : NULL;
                /* The plain forms write where the R* forms do, the same values. */
                switch (c) {
                case 0:
                    if (req)
                        MPI_Rget(&one, 1, MPI_INT64_T, right, t_disp(&t, right, 8), 1,
                                 MPI_INT64_T, t.win, req);
                    else
                        MPI_Get(scratch, 1, MPI_INT64_T, right, t_disp(&t, right, 8), 1,
                                MPI_INT64_T, t.win);
                    break;
                case 1:
                    if (req)
                        MPI_Rget(run, RUN, MPI_INT64_T, right, t_disp(&t, right, RUN * 8), RUN,
                                 MPI_INT64_T, t.win, req);
                    else
                        MPI_Get(scratch, RUN, MPI_INT64_T, right, t_disp(&t, right, RUN * 8), RUN,
                                MPI_INT64_T, t.win);
                    break;
                case 2:
                    if (req)
                        MPI_Rput(&put, 1, MPI_INT64_T, right, t_disp(&t, right, 0), 1,
                                 MPI_INT64_T, t.win, req);
                    else
                        MPI_Put(&put, 1, MPI_INT64_T, right, t_disp(&t, right, 0), 1,
                                MPI_INT64_T, t.win);
                    break;
                default:
                    if (req)
                        MPI_Raccumulate(&add, 1, MPI_INT64_T, right, t_disp(&t, right, 2 * 8), 1,
                                        MPI_INT64_T, MPI_SUM, t.win, req);
                    else
                        MPI_Accumulate(&add, 1, MPI_INT64_T, right, t_disp(&t, right, 2 * 8), 1,
                                       MPI_INT64_T, MPI_SUM, t.win);
                }
                took[r] = t_stat(t.win, ONESIDED_STAT_FAST_PATH_OPS) - before;
            }
            CHECK(took[1] == took[0], "%s mode %d: the R* %s took the fast lane %llu times, "
                  "its plain form %llu", flavor_name[flavor], mode, what[c],
                  (unsigned long long)took[1], (unsigned long long)took[0]);
            if (took[1]) {
                int done = 0;
                MPI_Test(&rq, &done, MPI_STATUS_IGNORE);
                CHECK(done, "%s mode %d: the R* %s of the fast lane was not complete at once",
                      flavor_name[flavor], mode, what[c]);
                lanes++;
            }
            MPI_Wait(&rq, MPI_STATUS_IGNORE);
        }
        CHECK(t_stat(t.win, ONESIDED_STAT_REQUEST_OPS) - reqs == NCASE,
              "%s mode %d: R* operations counted as requests", flavor_name[flavor], mode);
        CHECK(one == right * 100 + 1, "%s mode %d: Rget of one element read %lld",
              flavor_name[flavor], mode, (long long)one);
        int ok = 1;
        for (int i = 0; i < RUN; i++)
            ok &= run[i] == right * 100 + RUN + i;
        CHECK(ok, "%s mode %d: Rget of a run", flavor_name[flavor], mode);
        if (mode)
            MPI_Win_unlock_all(t.win);
        else
            MPI_Win_unlock(right, t.win);
        MPI_Allreduce(MPI_IN_PLACE, &lanes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (t_rank == 0 && flavor == F_ALLOCATE && mode)
            printf("test_ops: R* operations on the fast lane, allocate/lock_all: %d of %d\n",
                   lanes, NCASE * t_size);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    /* Two rounds of a plain and an R* accumulate of 1 each. */
    CHECK(mine[0] == 1000 + left && mine[2] == t_rank * 100 + 2 + 4,
          "%s: Rput wrote %lld, Raccumulate left %lld", flavor_name[flavor], (long long)mine[0],
          (long long)mine[2]);

    MPI_Win_set_errhandler(t.win, MPI_ERRORS_RETURN);
    MPI_Win_lock_all(0, t.win);
    int64_t x = 0;
    MPI_Request r;
    int rc = MPI_Rget(&x, 1, MPI_INT64_T, right, t_disp(&t, right, SLOTS * 8), 1, MPI_INT64_T,
                      t.win, &r), cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &cls);
    else
        MPI_Wait(&r, MPI_STATUS_IGNORE);
    MPI_Win_unlock_all(t.win);
    CHECK(cls == MPI_ERR_RMA_RANGE, "%s: Rget past the window's end gave class %d",
          flavor_name[flavor], cls);
    t_win_free(&t);
}

/* Large transfers (several pages, many runs) keep every byte. */
static void large(int flavor)
{
    const MPI_Aint bytes = 1 << 20;
    t_win_t t = t_win_make(flavor, bytes, MPI_INFO_NULL);
    const int right = (t_rank + 1) % t_size, left = (t_rank + t_size - 1) % t_size;
    unsigned char *src = malloc((size_t)bytes), *dst = malloc((size_t)bytes);
    for (MPI_Aint i = 0; i < bytes; i++)
        src[i] = (unsigned char)(i * 7 + t_rank);
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, t.win);
    MPI_Put(src, (int)bytes, MPI_BYTE, right, t_disp(&t, right, 0), (int)bytes, MPI_BYTE, t.win);
    MPI_Win_unlock(right, t.win);
    MPI_Barrier(MPI_COMM_WORLD);
    int ok = 1;
    for (MPI_Aint i = 0; i < bytes; i++)
        ok &= (unsigned char)t.base[i] == (unsigned char)(i * 7 + left);
    CHECK(ok, "%s: 1 MiB put", flavor_name[flavor]);
    MPI_Win_lock(MPI_LOCK_SHARED, right, 0, t.win);
    MPI_Get(dst, (int)bytes, MPI_BYTE, right, t_disp(&t, right, 0), (int)bytes, MPI_BYTE, t.win);
    MPI_Win_unlock(right, t.win);
    ok = 1;
    for (MPI_Aint i = 0; i < bytes; i++)
        ok &= dst[i] == (unsigned char)(i * 7 + t_rank);
    CHECK(ok, "%s: 1 MiB get", flavor_name[flavor]);
    free(src);
    free(dst);
    t_win_free(&t);
}

/* Puts and gets of 2 KB and more whose local buffer sits a few bytes past
 * or before the target's page offset, the distances os_copy copies with
 * its own vector loops on AMD CPUs (one direction for a put, the other for
 * a get): every byte arrives and comes back, and nothing past either end
 * of the get's buffer is written. */
static void page_distances(int flavor)
{
    const size_t sizes[] = { 2049, 4096 + 17, 65536 + 13, 200000 };
    const size_t offsets[] = { 0, 1, 16, 48, 63, 64, 4033, 4080, 4095 };
    enum { GUARD = 64 };
    const MPI_Aint bytes = 200000 + 4096;
    t_win_t t = t_win_make(flavor, bytes, MPI_INFO_NULL);
    const int right = (t_rank + 1) % t_size;
    const size_t span = ((size_t)bytes + 3 * 4096) / 4096 * 4096; /* aligned_alloc's rule */
    unsigned char *src = aligned_alloc(4096, span), *dst = aligned_alloc(4096, span);
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++)
        for (size_t k = 0; k < sizeof offsets / sizeof offsets[0]; k++) {
            const size_t n = sizes[z], o = 4096 + offsets[k]; /* GUARD bytes either side */
            for (size_t i = 0; i < n; i++)
                src[o + i] = (unsigned char)(i * 13 + z * 7 + k + (size_t)t_rank);
            memset(dst, 0xA5, span);
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, t.win);
            MPI_Put(src + o, (int)n, MPI_BYTE, right, t_disp(&t, right, 0), (int)n, MPI_BYTE,
                    t.win);
            MPI_Win_flush(right, t.win);
            MPI_Get(dst + o, (int)n, MPI_BYTE, right, t_disp(&t, right, 0), (int)n, MPI_BYTE,
                    t.win);
            MPI_Win_unlock(right, t.win);
            int good = !memcmp(dst + o, src + o, n);
            for (size_t g = 1; g <= GUARD; g++)
                good &= dst[o - g] == 0xA5 && dst[o + n + g - 1] == 0xA5;
            CHECK(good, "%s: %zu bytes at local page offset %zu", flavor_name[flavor], n,
                  offsets[k]);
        }
    free(src);
    free(dst);
    MPI_Barrier(MPI_COMM_WORLD);
    t_win_free(&t);
}

/* Many request-based operations in flight at once, completed by every
 * kind of test and wait call, one freed unfinished. Between nodes the puts
 * and gets complete at MPI_Test or MPI_Wait; over TCP (which cannot finish
 * a 64 KB get inside the call) some must have been deferred. */
static void outstanding_requests(int flavor)
{
    enum { NREQ = 16, CHUNK = 16384 }; /* ints per request */
    const MPI_Aint bytes = (MPI_Aint)sizeof(int) * CHUNK * NREQ * 2;
    t_win_t t = t_win_make(flavor, bytes, MPI_INFO_NULL);
    int *win = (int *)t.base;
    for (int i = 0; i < CHUNK * NREQ; i++)
        win[i] = t_rank * 7 + i;
    MPI_Barrier(MPI_COMM_WORLD);
    const int right = (t_rank + 1) % t_size;
    int *in = malloc(sizeof(int) * CHUNK * NREQ), *out = malloc(sizeof(int) * CHUNK * NREQ);
    for (int i = 0; i < CHUNK * NREQ; i++) {
        in[i] = -1;
        out[i] = t_rank * 3 + i;
    }
    MPI_Request get[NREQ], put[NREQ];
    MPI_Status sts[NREQ]; /* not MPI_STATUSES_IGNORE: GCC 12 warns on it here */
    MPI_Win_lock_all(0, t.win);
    for (int k = 0; k < NREQ; k++) {
        MPI_Rget(in + k * CHUNK, CHUNK, MPI_INT, right, t_disp(&t, right, (MPI_Aint)sizeof(int) * k * CHUNK),
                 CHUNK, MPI_INT, t.win, &get[k]);
        MPI_Rput(out + k * CHUNK, CHUNK, MPI_INT, right,
                 t_disp(&t, right, (MPI_Aint)sizeof(int) * (NREQ + k) * CHUNK), CHUNK, MPI_INT,
                 t.win, &put[k]);
    }
    /* The last get freed unfinished: its data is there at the unlock
     * (Open MPI frees its request once onesided completes it). */
    MPI_Request_free(&get[NREQ - 1]);
    /* Gets: Testall until done, then the rest by Waitany, Waitsome, Waitall. */
    int flag = 0, idx, n, idxs[NREQ];
    for (int spins = 0; !flag && spins < 3; spins++)
        MPI_Testall(4, get, &flag, sts);
    if (!flag)
        MPI_Waitall(4, get, sts);
    MPI_Waitany(NREQ - 4, get + 4, &idx, MPI_STATUS_IGNORE);
    MPI_Waitsome(NREQ - 4, get + 4, &n, idxs, sts);
    MPI_Waitall(NREQ, get, sts);
    int ok = 1;
    for (int i = 0; i < CHUNK * (NREQ - 1); i++)
        ok &= in[i] == right * 7 + i;
    CHECK(ok, "%s: data of %d outstanding Rgets", flavor_name[flavor], NREQ - 1);
    /* Puts: one freed unfinished (unlock completes it), the others waited. */
    MPI_Request_free(&put[0]);
    MPI_Waitall(NREQ - 1, put + 1, sts);
    onesided_win_stats_t st;
    onesided_win_get_stats(t.win, &st);
    MPI_Win_unlock_all(t.win);
    ok = 1;
    for (int i = CHUNK * (NREQ - 1); i < CHUNK * NREQ; i++)
        ok &= in[i] == right * 7 + i;
    CHECK(ok, "%s: data of an Rget freed unfinished, after the unlock", flavor_name[flavor]);
    const char *tls = getenv("ONESIDED_UCX_TLS");
#if defined(MPICH_VERSION)
    /* MPICH lets a generalized request progress at MPI_Wait
     * (MPIX_Grequest_start); Open MPI runs onesided's opal_progress
     * callback there, which completes them unless ONESIDED_HOST_PROGRESS=0;
     * on other hosts R* operations complete inside the call (src/mpi/rma.c). */
    const bool defers = true;
#elif defined(OPEN_MPI)
    const char *hp = getenv("ONESIDED_HOST_PROGRESS");
    const bool defers = !hp || strcmp(hp, "0");
#else
    const bool defers = false;
#endif
    if (defers && t_virtual_node_size() && tls && !strncmp(tls, "tcp", 3))
        CHECK(st.counter[ONESIDED_STAT_REQUEST_DEFERRED] > 0,
              "%s: no Rget over TCP was left in flight", flavor_name[flavor]);
    MPI_Barrier(MPI_COMM_WORLD);
    const int left = (t_rank + t_size - 1) % t_size;
    ok = 1;
    for (int i = 0; i < CHUNK * NREQ; i++)
        ok &= win[NREQ * CHUNK + i] == left * 3 + i;
    CHECK(ok, "%s: data of %d outstanding Rputs", flavor_name[flavor], NREQ);
    free(in);
    free(out);
    t_win_free(&t);
}

/* Single predefined elements (the fast path), from every process to rank 0
 * at once, mixed with the same updates through a one-element derived type
 * (the general path): the two paths must stay atomic with each other under
 * shared locks, an exclusive lock (plain stores) and lock_all. The fast path
 * must also still catch a displacement outside the window. */
static void single_elements(int flavor)
{
    enum { W_FOP = 0, W_ACC = 1, W_CAS = 2, W_PUT = 3, NW = 4 };
    const int rounds = t_rounds(200);
    t_win_t t = t_win_make(flavor, NW * 8, MPI_INFO_NULL);
    MPI_Datatype one; /* same layout as MPI_INT64_T, but derived: the general path */
    MPI_Type_contiguous(1, MPI_INT64_T, &one);
    MPI_Type_commit(&one);
    const MPI_Datatype dt = t_rank % 2 ? one : MPI_INT64_T;
    const int64_t inc = 1;
    for (int mode = 0; mode < 3; mode++) { /* lock shared, lock exclusive, lock_all */
        memset(t.base, 0, NW * 8);
        MPI_Barrier(MPI_COMM_WORLD);
        for (int r = 0; r < rounds; r++) {
            int64_t old, seen, got;
            if (mode == 2)
                MPI_Win_lock_all(0, t.win);
            else
                MPI_Win_lock(mode ? MPI_LOCK_EXCLUSIVE : MPI_LOCK_SHARED, 0, 0, t.win);
            /* Fetch_and_op and Compare_and_swap take predefined types only:
             * the general path's form of them is Get_accumulate. */
            if (dt == MPI_INT64_T)
                MPI_Fetch_and_op(&inc, &old, dt, 0, t_disp(&t, 0, W_FOP * 8), MPI_SUM, t.win);
            else
                MPI_Get_accumulate(&inc, 1, dt, &old, 1, dt, 0, t_disp(&t, 0, W_FOP * 8), 1, dt,
                                   MPI_SUM, t.win);
            MPI_Accumulate(&inc, 1, dt, 0, t_disp(&t, 0, W_ACC * 8), 1, dt, MPI_SUM, t.win);
            /* Increment by compare-and-swap: read, then retry until it sticks. */
            MPI_Get_accumulate(NULL, 0, MPI_DATATYPE_NULL, &seen, 1, dt, 0,
                               t_disp(&t, 0, W_CAS * 8), 1, dt, MPI_NO_OP, t.win);
            MPI_Win_flush(0, t.win);
            t_cas_increment(t.win, 0, t_disp(&t, 0, W_CAS * 8), seen);
            int64_t mine = t_rank;
            MPI_Put(&mine, 1, dt, 0, t_disp(&t, 0, W_PUT * 8), 1, dt, t.win);
            MPI_Get(&got, 1, dt, 0, t_disp(&t, 0, W_PUT * 8), 1, dt, t.win);
            if (mode == 2)
                MPI_Win_unlock_all(t.win);
            else
                MPI_Win_unlock(0, t.win);
            CHECK(got >= 0 && got < t_size, "mode %d: get of the put word read %lld", mode,
                  (long long)got);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (t_rank == 0) {
            const int64_t *w = (const int64_t *)t.base, want = (int64_t)rounds * t_size;
            CHECK(w[W_FOP] == want && w[W_ACC] == want && w[W_CAS] == want,
                  "%s mode %d: fetch_and_op %lld, accumulate %lld, cas %lld, want %lld",
                  flavor_name[flavor], mode, (long long)w[W_FOP], (long long)w[W_ACC],
                  (long long)w[W_CAS], (long long)want);
        }
    }
    /* The bounds check of the fast path: one element just past the end. */
    MPI_Win_set_errhandler(t.win, MPI_ERRORS_RETURN);
    int64_t x = 1, cls = 0;
    MPI_Win_lock_all(0, t.win);
    int rc = MPI_Put(&x, 1, MPI_INT64_T, 0, t_disp(&t, 0, NW * 8), 1, MPI_INT64_T, t.win);
    int c = MPI_SUCCESS;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &c);
    cls = c;
    CHECK(cls == MPI_ERR_RMA_RANGE, "%s: put past the window's end gave class %lld",
          flavor_name[flavor], (long long)cls);
    rc = MPI_Fetch_and_op(&x, &cls, MPI_INT64_T, 0, t_disp(&t, 0, NW * 8 - 4), MPI_SUM, t.win);
    c = MPI_SUCCESS;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &c);
    CHECK(c == MPI_ERR_RMA_RANGE, "%s: fetch_and_op straddling the end gave class %d",
          flavor_name[flavor], c);
    onesided_win_stats_t st;
    onesided_win_get_stats(t.win, &st);
    MPI_Win_unlock_all(t.win);
    /* Rank 0's fast path serves its own memory on every configuration. */
    if (t_rank == 0 && flavor != F_CREATE && flavor != F_DYNAMIC &&
        (flavor != F_CREATE_BIG || t_flavor_mapped(F_CREATE_BIG)))
        CHECK(st.counter[ONESIDED_STAT_FAST_PATH_OPS] >= (uint64_t)(5 * rounds) &&
              st.counter[ONESIDED_STAT_ACC_EXCL_ELEMS] > 0,
              "%s: fast path taken %llu times, plain stores under the exclusive lock %llu",
              flavor_name[flavor], (unsigned long long)st.counter[ONESIDED_STAT_FAST_PATH_OPS],
              (unsigned long long)st.counter[ONESIDED_STAT_ACC_EXCL_ELEMS]);
    MPI_Type_free(&one);
    t_win_free(&t);
}

/* One element and a run of three of each size the put and get leaf takes
 * (1, 2, 4 and 8 bytes: os_rma_fast_move, which copies one element by
 * width and a run by os_copy), put into the right neighbour's window
 * between bytes that must not change, read back, and the runs on either
 * side read by gets of the same shape, under an exclusive lock and
 * lock_all; then the owner checks every byte of the area. A put that
 * copied the wrong width or length, or a get that read the wrong place,
 * shows here for sizes below 8, which single_elements (8-byte words)
 * cannot see. */
static void element_sizes(int flavor)
{
    enum { MAXRUN = 24, AREA = 3 * MAXRUN + 8, AT = MAXRUN, FILL = 0xA5, SLACK = 8 };
    static const MPI_Datatype types[] = { MPI_UINT8_T, MPI_UINT16_T, MPI_UINT32_T, MPI_UINT64_T };
    static const int counts[] = { 1, 3 };
    const int right = (t_rank + 1) % t_size;
    t_win_t t = t_win_make(flavor, AREA, MPI_INFO_NULL);
    for (int k = 0; k < 4; k++) {
        for (int c = 0; c < 2; c++) {
            const int e = 1 << k, n = counts[c], run = n * e;
            for (int mode = 0; mode < 2; mode++) { /* lock exclusive, lock_all */
                memset(t.base, FILL, AREA);
                MPI_Barrier(MPI_COMM_WORLD);
                /* The origin buffers' bytes past the run must stay too: a
                 * get that copied more would overwrite them. */
                unsigned char val[MAXRUN + SLACK], back[MAXRUN + SLACK],
                    before[MAXRUN + SLACK], after[MAXRUN + SLACK], fill[MAXRUN],
                    mark[MAXRUN + SLACK];
                memset(fill, FILL, sizeof fill);
                memset(mark, 0x5A, sizeof mark);
                for (int i = 0; i < run; i++)
                    val[i] = (unsigned char)(0x10 * (k + 1) + i + t_rank);
                memcpy(back, mark, sizeof mark);
                memcpy(before, mark, sizeof mark);
                memcpy(after, mark, sizeof mark);
                if (mode == 0)
                    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, t.win);
                else
                    MPI_Win_lock_all(0, t.win);
                MPI_Put(val, n, types[k], right, t_disp(&t, right, AT), n, types[k], t.win);
                MPI_Win_flush(right, t.win);
                MPI_Get(back, n, types[k], right, t_disp(&t, right, AT), n, types[k], t.win);
                MPI_Get(before, n, types[k], right, t_disp(&t, right, AT - run), n, types[k],
                        t.win);
                MPI_Get(after, n, types[k], right, t_disp(&t, right, AT + run), n, types[k],
                        t.win);
                if (mode == 0)
                    MPI_Win_unlock(right, t.win);
                else
                    MPI_Win_unlock_all(t.win);
                CHECK(!memcmp(back, val, (size_t)run) && !memcmp(before, fill, (size_t)run) &&
                          !memcmp(after, fill, (size_t)run),
                      "%s, %d elements of %d bytes, mode %d: read back the put wrong or saw "
                      "its neighbours changed", flavor_name[flavor], n, e, mode);
                CHECK(!memcmp(back + run, mark, (size_t)SLACK) &&
                          !memcmp(before + run, mark, (size_t)SLACK) &&
                          !memcmp(after + run, mark, (size_t)SLACK),
                      "%s, %d elements of %d bytes, mode %d: a get wrote past its run",
                      flavor_name[flavor], n, e, mode);
                MPI_Barrier(MPI_COMM_WORLD);
                const int left = (t_rank + t_size - 1) % t_size;
                int bad = -1;
                for (int i = 0; i < AREA && bad < 0; i++) {
                    unsigned char want = i >= AT && i < AT + run
                                             ? (unsigned char)(0x10 * (k + 1) + (i - AT) + left)
                                             : FILL;
                    if (t.base[i] != (char)want)
                        bad = i;
                }
                CHECK(bad < 0, "%s, %d elements of %d bytes, mode %d: byte %d of the target "
                      "area wrong", flavor_name[flavor], n, e, mode, bad);
            }
        }
    }
    t_win_free(&t);
}

/* Vectors of one predefined type, the same count on both sides: the fast
 * path moves them whole (a halo row, a block of doubles), accumulates below
 * the bulk threshold by CPU atomics and from it in bulk (automatic: 64-byte
 * vectors go bulk up to 4 processes, by CPU atomics at 8). Odd ranks name
 * the origin as one contiguous type instead: the general path on the same
 * words, which must stay exact with the fast one. Every rank puts its row
 * and reads it back, accumulates a short and a long vector and fetches one,
 * under a shared lock, an exclusive lock and lock_all; then a vector that
 * ends one element past the window must be refused. */
static void vectors(int flavor)
{
    enum { ROUNDS = 50, SHORT = 8, LONG = 192, ROW = 16 };
    /* Layout (elements): the short sums, the long sums, the fetched sums,
     * then a row per rank. */
    const int rows = SHORT + LONG + SHORT, nw = rows + ROW * t_size;
    t_win_t t = t_win_make(flavor, (size_t)nw * 8, MPI_INFO_NULL);
    int64_t ones[LONG], row[ROW], back[ROW], fetched[SHORT];
    MPI_Datatype shortv, longv, rowv;
    MPI_Type_contiguous(SHORT, MPI_INT64_T, &shortv);
    MPI_Type_contiguous(LONG, MPI_INT64_T, &longv);
    MPI_Type_contiguous(ROW, MPI_INT64_T, &rowv);
    MPI_Type_commit(&shortv);
    MPI_Type_commit(&longv);
    MPI_Type_commit(&rowv);
    const bool general = t_rank % 2;
    for (int i = 0; i < LONG; i++)
        ones[i] = 1;
    onesided_win_stats_t before, after;
    onesided_win_get_stats(t.win, &before);
    int bad_rows = 0, bad_fetch = 0;
    for (int mode = 0; mode < 3; mode++) { /* lock shared, lock exclusive, lock_all */
        memset(t.base, 0, (size_t)nw * 8);
        MPI_Barrier(MPI_COMM_WORLD);
        for (int r = 0; r < ROUNDS; r++) {
            if (mode == 2)
                MPI_Win_lock_all(0, t.win);
            else
                MPI_Win_lock(mode ? MPI_LOCK_EXCLUSIVE : MPI_LOCK_SHARED, 0, 0, t.win);
            const MPI_Aint mine = t_disp(&t, 0, 8 * (rows + ROW * t_rank));
            for (int i = 0; i < ROW; i++)
                row[i] = 1000 * t_rank + 10 * r + i;
            if (general) {
                MPI_Put(row, 1, rowv, 0, mine, ROW, MPI_INT64_T, t.win);
                MPI_Accumulate(ones, 1, shortv, 0, t_disp(&t, 0, 0), SHORT, MPI_INT64_T,
                               MPI_SUM, t.win);
                MPI_Accumulate(ones, 1, longv, 0, t_disp(&t, 0, 8 * SHORT), LONG, MPI_INT64_T,
                               MPI_SUM, t.win);
                MPI_Get_accumulate(ones, 1, shortv, fetched, SHORT, MPI_INT64_T, 0,
                                   t_disp(&t, 0, 8 * (SHORT + LONG)), SHORT, MPI_INT64_T,
                                   MPI_SUM, t.win);
            } else {
                MPI_Put(row, ROW, MPI_INT64_T, 0, mine, ROW, MPI_INT64_T, t.win);
                MPI_Accumulate(ones, SHORT, MPI_INT64_T, 0, t_disp(&t, 0, 0), SHORT,
                               MPI_INT64_T, MPI_SUM, t.win);
                MPI_Accumulate(ones, LONG, MPI_INT64_T, 0, t_disp(&t, 0, 8 * SHORT), LONG,
                               MPI_INT64_T, MPI_SUM, t.win);
                MPI_Get_accumulate(ones, SHORT, MPI_INT64_T, fetched, SHORT, MPI_INT64_T, 0,
                                   t_disp(&t, 0, 8 * (SHORT + LONG)), SHORT, MPI_INT64_T,
                                   MPI_SUM, t.win);
            }
            MPI_Win_flush(0, t.win);
            MPI_Get(back, ROW, MPI_INT64_T, 0, mine, ROW, MPI_INT64_T, t.win);
            if (mode == 2)
                MPI_Win_unlock_all(t.win);
            else
                MPI_Win_unlock(0, t.win);
            bad_rows += memcmp(back, row, sizeof row) != 0;
            /* Elements of one fetch were updated together only under the
             * exclusive lock; each is a count of earlier updates anyway. */
            for (int i = 0; i < SHORT; i++)
                bad_fetch += fetched[i] < r || fetched[i] >= (int64_t)t_size * ROUNDS ||
                             (mode == 1 && fetched[i] != fetched[0]);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (t_rank == 0) {
            const int64_t *w = (const int64_t *)t.base, want = (int64_t)ROUNDS * t_size;
            int bad = 0;
            for (int i = 0; i < SHORT + LONG + SHORT; i++)
                bad += w[i] != want;
            CHECK(!bad, "%s mode %d: %d of %d accumulated elements wrong (element 0: %lld, "
                  "want %lld)", flavor_name[flavor], mode, bad, SHORT + LONG + SHORT,
                  (long long)w[0], (long long)want);
        }
    }
    CHECK(!bad_rows && !bad_fetch, "%s: %d rows read back wrong, %d fetched elements wrong",
          flavor_name[flavor], bad_rows, bad_fetch);
    onesided_win_get_stats(t.win, &after);
    /* Rank 0's fast path serves its own memory on every configuration: its
     * vector puts and gets at least. Its accumulates take it only where
     * their path allows: across hosts over the heap on Open MPI 5, 450 of
     * the 750 operations did; ONESIDED_ACC_COALESCE queues them. */
    if (t_rank == 0 && flavor != F_CREATE && flavor != F_DYNAMIC &&
        (flavor != F_CREATE_BIG || t_flavor_mapped(F_CREATE_BIG))) {
        const uint64_t fast = after.counter[ONESIDED_STAT_FAST_PATH_OPS] -
                              before.counter[ONESIDED_STAT_FAST_PATH_OPS];
        CHECK(fast >= 3 * 2 * ROUNDS, "%s: vectors took the fast path %llu times, want %d",
              flavor_name[flavor], (unsigned long long)fast, 3 * 2 * ROUNDS);
    }
    /* A vector whose last element lies past the window's end. */
    MPI_Win_set_errhandler(t.win, MPI_ERRORS_RETURN);
    MPI_Win_lock_all(0, t.win);
    int rc = MPI_Put(ones, ROW + 1, MPI_INT64_T, 0, t_disp(&t, 0, 8 * (nw - ROW)), ROW + 1,
                     MPI_INT64_T, t.win), c = MPI_SUCCESS;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &c);
    CHECK(c == MPI_ERR_RMA_RANGE, "%s: a vector put one element past the end gave class %d",
          flavor_name[flavor], c);
    rc = MPI_Accumulate(ones, ROW + 1, MPI_INT64_T, 0, t_disp(&t, 0, 8 * (nw - ROW)), ROW + 1,
                        MPI_INT64_T, MPI_SUM, t.win);
    c = MPI_SUCCESS;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &c);
    CHECK(c == MPI_ERR_RMA_RANGE,
          "%s: a vector accumulate one element past the end gave class %d",
          flavor_name[flavor], c);
    MPI_Win_unlock_all(t.win);
    MPI_Type_free(&shortv);
    MPI_Type_free(&longv);
    MPI_Type_free(&rowv);
    t_win_free(&t);
}

/* The bulk split of `count` elements accumulated into this rank's own
 * memory of win (lock_all), from the window's counters. */
static void bulk_split(MPI_Win win, int count, uint64_t *bulk, uint64_t *atomic)
{
    const int64_t ones[64] = { [0 ... 63] = 1 };
    onesided_win_stats_t before, after;
    onesided_win_get_stats(win, &before);
    MPI_Win_lock_all(0, win);
    MPI_Accumulate(ones, count, MPI_INT64_T, t_rank, 0, count, MPI_INT64_T, MPI_SUM, win);
    MPI_Win_unlock_all(win);
    onesided_win_get_stats(win, &after);
    *bulk = after.counter[ONESIDED_STAT_ACC_BULK_ELEMS] - before.counter[ONESIDED_STAT_ACC_BULK_ELEMS];
    *atomic = after.counter[ONESIDED_STAT_ACC_ATOMIC_ELEMS] -
              before.counter[ONESIDED_STAT_ACC_ATOMIC_ELEMS];
}

/* The automatic bulk threshold: 16 bytes per process of the node, at least
 * 32. On a window of one process, 3 elements of 8 bytes take one CPU atomic
 * each and 4 go bulk; onesided_acc_bulk_min set on the window moves the
 * threshold, and 0 turns bulk off. On a window of the whole job on one node
 * the threshold follows the node's size (it was once computed before the
 * window knew its node, and stayed at 32 bytes whatever the node). Skipped
 * where accumulates are queued (onesided_acc_coalesce=1), which apply them
 * later by another path. */
static void bulk_threshold(void)
{
    int64_t *base, ones[8] = { 1, 1, 1, 1, 1, 1, 1, 1 };
    MPI_Win win;
    MPI_Win_allocate(64, 8, MPI_INFO_NULL, MPI_COMM_SELF, &base, &win);
    MPI_Info used, set;
    char value[MPI_MAX_INFO_VAL + 1] = "";
    int flag = 0;
    MPI_Win_get_info(win, &used);
    MPI_Info_get(used, "onesided_acc_coalesce", MPI_MAX_INFO_VAL, value, &flag);
    MPI_Info_free(&used);
    if (flag && !strcmp(value, "1")) {
        MPI_Win_free(&win);
        return;
    }
    /* {count, bulk threshold set (-2: none), elements expected in bulk} */
    static const int cases[][3] = { { 3, -2, 0 }, { 4, -2, 4 }, { 8, 128, 0 },
                                    { 8, 64, 8 }, { 8, 0, 0 }, { 4, -1, 4 } };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        if (cases[c][1] != -2) {
            snprintf(value, sizeof value, "%d", cases[c][1]);
            MPI_Info_create(&set);
            MPI_Info_set(set, "onesided_acc_bulk_min", value);
            MPI_Win_set_info(win, set);
            MPI_Info_free(&set);
        }
        onesided_win_stats_t before, after;
        onesided_win_get_stats(win, &before);
        MPI_Win_lock_all(0, win);
        MPI_Accumulate(ones, cases[c][0], MPI_INT64_T, 0, 0, cases[c][0], MPI_INT64_T, MPI_SUM,
                       win);
        MPI_Win_unlock_all(win);
        onesided_win_get_stats(win, &after);
        const uint64_t bulk = after.counter[ONESIDED_STAT_ACC_BULK_ELEMS] -
                              before.counter[ONESIDED_STAT_ACC_BULK_ELEMS],
                       atomic = after.counter[ONESIDED_STAT_ACC_ATOMIC_ELEMS] -
                                before.counter[ONESIDED_STAT_ACC_ATOMIC_ELEMS];
        CHECK(bulk == (uint64_t)cases[c][2] && bulk + atomic == (uint64_t)cases[c][0],
              "%d elements, threshold %d: %llu in bulk and %llu by atomics, want %d in bulk",
              cases[c][0], cases[c][1], (unsigned long long)bulk, (unsigned long long)atomic,
              cases[c][2]);
    }
    MPI_Win_free(&win);

    if (t_node_size_of(F_ALLOCATE) != 0 || t_size < 3)
        return; /* on a node of 2 or fewer, the threshold is the least, as above */
    const int bytes = 16 * t_size < 32 ? 32 : 16 * t_size > 512 ? 512 : 16 * t_size;
    MPI_Win_allocate(512, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    for (int below = 1; below >= 0; below--) {
        const int count = bytes / 8 - below;
        uint64_t bulk, atomic;
        bulk_split(win, count, &bulk, &atomic);
        CHECK(bulk == (below ? 0 : (uint64_t)count) && bulk + atomic == (uint64_t)count,
              "a node of %d processes: %d elements, %llu in bulk and %llu by atomics, want "
              "bulk from %d bytes", t_size, count, (unsigned long long)bulk,
              (unsigned long long)atomic, bytes);
    }
    MPI_Win_free(&win);
}

/* Derived types that are one contiguous run of one predefined type, the
 * same type on both sides (a ghost cell, MPI_Type_contiguous of longs, a
 * vector of one block), take the fast path as vectors of their elements
 * do, and stay exact: every rank puts cells into its row at rank 0 and
 * reads them back, accumulates cells into shared sums and fetches one with
 * get_accumulate, under lock_all. Types that are not such a run go the
 * general way, exact too: one whose data starts 8 bytes into the buffer (a
 * true lower bound of 8), and a struct of a long and a double (put and get
 * only: it has no single element type). Fetch_and_op refuses a derived
 * type. */
static void derived_runs(int flavor)
{
    enum { ROUNDS = 40, CELL = 4 };
    /* Layout (longs): sums of cells, sums of 1-block vectors, fetched sums,
     * then a row per rank: a cell, a shifted cell (1 + CELL), a struct (2). */
    const int row_len = CELL + 1 + CELL + 2, sums = 3 * CELL, nw = sums + row_len * t_size;
    t_win_t t = t_win_make(flavor, (MPI_Aint)nw * 8, MPI_INFO_NULL);
    MPI_Datatype cell, vec1, shifted, pair, tmp;
    MPI_Type_contiguous(CELL, MPI_INT64_T, &cell);
    MPI_Type_vector(1, CELL, 2 * CELL, MPI_INT64_T, &vec1);
    int one_block = CELL;
    MPI_Aint at8 = 8, pair_disp[2] = { 0, 8 };
    MPI_Type_create_hindexed(1, &one_block, &at8, MPI_INT64_T, &tmp);
    MPI_Type_create_resized(tmp, 8, 8 * CELL, &shifted);
    MPI_Type_free(&tmp);
    int pair_len[2] = { 1, 1 };
    MPI_Datatype pair_types[2] = { MPI_INT64_T, MPI_DOUBLE };
    MPI_Type_create_struct(2, pair_len, pair_disp, pair_types, &pair);
    MPI_Datatype all[] = { cell, vec1, shifted, pair };
    for (int i = 0; i < 4; i++)
        MPI_Type_commit(&all[i]);
    cell = all[0], vec1 = all[1], shifted = all[2], pair = all[3];

    int64_t ones[CELL], row[CELL], back[CELL], fetched[CELL], srow[1 + CELL], sback[1 + CELL];
    struct { int64_t l; double d; } p = { 0, 0 }, pback;
    for (int i = 0; i < CELL; i++)
        ones[i] = 1;
    const MPI_Aint mine = t_disp(&t, 0, 8 * (sums + row_len * t_rank));
    onesided_win_stats_t before, after;
    onesided_win_get_stats(t.win, &before);
    int bad = 0;
    MPI_Win_lock_all(0, t.win);
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < CELL; i++)
            row[i] = 1000 * t_rank + 10 * r + i;
        for (int i = 0; i <= CELL; i++)
            srow[i] = -(1000 * t_rank + 10 * r + i);
        p.l = 7 * r + t_rank;
        p.d = 0.5 * r + t_rank;
        MPI_Put(row, 1, cell, 0, mine, 1, cell, t.win);
        MPI_Accumulate(ones, 1, cell, 0, t_disp(&t, 0, 0), 1, cell, MPI_SUM, t.win);
        MPI_Accumulate(ones, 1, vec1, 0, t_disp(&t, 0, 8 * CELL), 1, vec1, MPI_SUM, t.win);
        MPI_Get_accumulate(ones, 1, cell, fetched, 1, cell, 0, t_disp(&t, 0, 8 * 2 * CELL), 1,
                           cell, MPI_SUM, t.win);
        /* The shifted type's data is the buffer's longs 1..CELL, at mine+8+8.. */
        MPI_Put(srow, 1, shifted, 0, mine + 8 * CELL, 1, shifted, t.win);
        MPI_Put(&p, 1, pair, 0, mine + 8 * (2 * CELL + 1), 1, pair, t.win);
        MPI_Win_flush(0, t.win);
        MPI_Get(back, 1, cell, 0, mine, 1, cell, t.win);
        memset(sback, 0, sizeof sback);
        MPI_Get(sback, 1, shifted, 0, mine + 8 * CELL, 1, shifted, t.win);
        MPI_Get(&pback, 1, pair, 0, mine + 8 * (2 * CELL + 1), 1, pair, t.win);
        MPI_Win_flush(0, t.win);
        bad += memcmp(back, row, sizeof row) != 0;
        bad += sback[0] != 0 || memcmp(sback + 1, srow + 1, 8 * CELL) != 0;
        bad += pback.l != p.l || pback.d != p.d;
        for (int i = 0; i < CELL; i++)
            bad += fetched[i] < r || fetched[i] >= (int64_t)t_size * ROUNDS;
    }
    MPI_Win_unlock_all(t.win);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(!bad, "%s: %d derived-type results read back wrong", flavor_name[flavor], bad);
    if (t_rank == 0) {
        const int64_t *w = (const int64_t *)t.base, want = (int64_t)ROUNDS * t_size;
        int wrong = 0;
        for (int i = 0; i < 3 * CELL; i++)
            wrong += w[i] != want;
        CHECK(!wrong, "%s: %d of %d accumulated elements wrong (element 0: %lld, want %lld)",
              flavor_name[flavor], wrong, 3 * CELL, (long long)w[0], (long long)want);
    }
    onesided_win_get_stats(t.win, &after);
    /* Rank 0 reaches its own memory by the fast path on every configuration
     * where it maps it: the cells' and vectors' 6 calls a round at least
     * (ONESIDED_ACC_COALESCE queues accumulates). */
    if (t_rank == 0 && t_flavor_mapped(flavor)) {
        const uint64_t fast = after.counter[ONESIDED_STAT_FAST_PATH_OPS] -
                              before.counter[ONESIDED_STAT_FAST_PATH_OPS];
        const char *c = getenv("ONESIDED_ACC_COALESCE");
        const uint64_t want = (c && atoi(c) > 0 ? 3 : 6) * ROUNDS;
        CHECK(fast >= want, "%s: derived runs took the fast path %llu times, want %llu",
              flavor_name[flavor], (unsigned long long)fast, (unsigned long long)want);
    }
    MPI_Win_set_errhandler(t.win, MPI_ERRORS_RETURN);
    MPI_Win_lock_all(0, t.win);
    int rc = MPI_Fetch_and_op(ones, fetched, cell, 0, t_disp(&t, 0, 0), MPI_SUM, t.win), c = 0;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &c);
    MPI_Win_unlock_all(t.win);
    CHECK(c == MPI_ERR_TYPE, "%s: fetch_and_op on a derived type gave class %d",
          flavor_name[flavor], c);
    for (int i = 0; i < 4; i++)
        MPI_Type_free(&all[i]);
    t_win_free(&t);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    T_FOR_EACH_FLAVOR(f) {
        for (int s = 0; s < S_COUNT; s++)
            run(f, s);
        large(f);
        page_distances(f);
    }
    proc_null();
    bulk_threshold();
    T_FOR_EACH_FLAVOR(f) {
        single_elements(f);
        element_sizes(f);
        vectors(f);
        derived_runs(f);
        request_lane(f);
    }
    outstanding_requests(F_ALLOCATE);
    outstanding_requests(F_CREATE);
    MPI_Group_free(&world_group);
    return t_finish("test_ops");
}
