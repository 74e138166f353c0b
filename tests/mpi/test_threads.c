/* MPI_THREAD_MULTIPLE: several threads of every process use one window at
 * once.
 *  1. Under one lock_all, THREADS threads per process issue accumulates,
 *     fetch_and_op, puts and flushes to every process: counters exact, each
 *     thread's put slot holds its last value, fetched values in range.
 *  2. Each thread holds lock epochs of its own, on distinct targets at the
 *     same time (exclusive and shared), with fetch_and_op inside: exact.
 *  3. Threads create, use and free no windows concurrently, but they do
 *     decode datatypes at once (a vector type per thread).
 * Runs on one node and between (virtual) nodes.
 * With --sessions the program never calls MPI_Init: it asks a session for
 * MPI_THREAD_MULTIPLE (info key "thread_level") and runs the same over a
 * communicator from the mpi://WORLD process set. onesided must see the
 * threads there too. */
#include "common.h"

#include <pthread.h>

enum { THREADS = 4, ITERS = 600, EPOCHS = 200 };
/* Window layout per process, in int64 words. */
enum { W_ACC, W_FOP, W_LOCKED, W_VEC, W_SLOTS = W_VEC + 8 };

static MPI_Win win;
static MPI_Comm comm; /* comm, or the session's */
static int64_t *base;
static int64_t sent_acc[64], sent_fop[64]; /* per target, this process: sums over threads */
static pthread_mutex_t sent_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int thread_errors;

#define TCHECK(cond, ...)                                                                      \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            thread_errors++;                                                                   \
            fprintf(stderr, "[rank %d] thread check failed: ", t_rank);                         \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fputc('\n', stderr);                                                               \
        }                                                                                      \
    } while (0)

#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)
#define T_HAVE_SESSIONS 1
static MPI_Session session = MPI_SESSION_NULL;
#else
#define T_HAVE_SESSIONS 0
#endif

/* t_finish, over the program's communicator, ending what it started. */
static int finish(bool sessions)
{
    int fails = 0, passes = 0;
    MPI_Allreduce(&t_fail, &fails, 1, MPI_INT, MPI_SUM, comm);
    MPI_Allreduce(&t_pass, &passes, 1, MPI_INT, MPI_SUM, comm);
    if (t_rank == 0)
        printf("test_threads%s on %d processes: %d passed, %d failed\n",
               sessions ? " (sessions)" : "", t_size, passes, fails);
#if T_HAVE_SESSIONS
    if (sessions) {
        MPI_Comm_free(&comm);
        MPI_Session_finalize(&session);
        return fails ? 1 : 0;
    }
#endif
    MPI_Finalize();
    return fails ? 1 : 0;
}

static void *phase1(void *arg)
{
    int tid = (int)(intptr_t)arg;
    int64_t one = 1, old, acc[64] = { 0 }, fop[64] = { 0 };
    const int64_t max_fop = (int64_t)t_size * THREADS * ITERS;
    /* A strided type decoded by every thread at once: 2 of every 4 words. */
    MPI_Datatype vec;
    MPI_Type_vector(2, 1, 4, MPI_INT64_T, &vec);
    MPI_Type_commit(&vec);
    for (int i = 0; i < ITERS; i++) {
        int target = (t_rank + i + tid) % t_size;
        int rc = MPI_Accumulate(&one, 1, MPI_INT64_T, target, W_ACC, 1, MPI_INT64_T, MPI_SUM, win);
        TCHECK(rc == MPI_SUCCESS, "accumulate failed");
        acc[target]++;
        rc = MPI_Fetch_and_op(&one, &old, MPI_INT64_T, target, W_FOP, MPI_SUM, win);
        TCHECK(rc == MPI_SUCCESS, "fetch_and_op failed");
        fop[target]++;
        int64_t v = (int64_t)i * 1000 + tid;
        rc = MPI_Put(&v, 1, MPI_INT64_T, target, W_SLOTS + t_rank * THREADS + tid, 1,
                     MPI_INT64_T, win);
        TCHECK(rc == MPI_SUCCESS, "put failed");
        if (i % 8 == 0) {
            int64_t two[2] = { 1, 1 };
            rc = MPI_Accumulate(two, 2, MPI_INT64_T, target, W_VEC, 1, vec, MPI_SUM, win);
            TCHECK(rc == MPI_SUCCESS, "vector accumulate failed");
        }
        rc = MPI_Win_flush(target, win);
        TCHECK(rc == MPI_SUCCESS, "flush failed");
        TCHECK(old >= 0 && old < max_fop, "fetch_and_op fetched %lld", (long long)old);
    }
    MPI_Type_free(&vec);
    pthread_mutex_lock(&sent_lock);
    for (int r = 0; r < t_size; r++) {
        sent_acc[r] += acc[r];
        sent_fop[r] += fop[r];
    }
    pthread_mutex_unlock(&sent_lock);
    return NULL;
}

/* Thread tid locks target (rank + tid) % size: distinct targets in one
 * process at a time (MPI allows one lock per target and process). */
static void *phase2(void *arg)
{
    int tid = (int)(intptr_t)arg, target = (t_rank + tid) % t_size;
    int64_t one = 1, old;
    for (int e = 0; e < EPOCHS; e++) {
        int type = e % 3 ? MPI_LOCK_EXCLUSIVE : MPI_LOCK_SHARED;
        int rc = MPI_Win_lock(type, target, 0, win);
        TCHECK(rc == MPI_SUCCESS, "lock of %d failed", target);
        MPI_Fetch_and_op(&one, &old, MPI_INT64_T, target, W_LOCKED, MPI_SUM, win);
        rc = MPI_Win_unlock(target, win);
        TCHECK(rc == MPI_SUCCESS, "unlock of %d failed", target);
    }
    return NULL;
}

static void run_threads(void *(*fn)(void *), int n)
{
    pthread_t th[THREADS];
    for (int t = 0; t < n; t++)
        pthread_create(&th[t], NULL, fn, (void *)(intptr_t)t);
    for (int t = 0; t < n; t++)
        pthread_join(th[t], NULL);
}

int main(int argc, char **argv)
{
    int provided;
    (void)t_init; /* this program asks for threads itself */
    (void)t_finish;
    const bool sessions = argc > 1 && !strcmp(argv[1], "--sessions");
    if (sessions) {
#if T_HAVE_SESSIONS
        MPI_Info ask, got;
        MPI_Group group;
        char level[64] = "";
        int len = (int)sizeof level, flag = 0;
        MPI_Info_create(&ask);
        MPI_Info_set(ask, "thread_level", "MPI_THREAD_MULTIPLE");
        MPI_Session_init(ask, MPI_ERRORS_ARE_FATAL, &session);
        MPI_Info_free(&ask);
        /* What the session provides: the same key, in its info (MPICH 4.0
         * and 5.0, Open MPI 5.0). */
        MPI_Session_get_info(session, &got);
        MPI_Info_get_string(got, "thread_level", &len, level, &flag);
        MPI_Info_free(&got);
        provided = flag && !strcmp(level, "MPI_THREAD_MULTIPLE") ? MPI_THREAD_MULTIPLE
                                                                  : MPI_THREAD_SINGLE;
        MPI_Group_from_session_pset(session, "mpi://WORLD", &group);
        MPI_Comm_create_from_group(group, "org.onesided.test_threads", MPI_INFO_NULL,
                                   MPI_ERRORS_ARE_FATAL, &comm);
        MPI_Group_free(&group);
#else
        printf("test_threads --sessions: skipped (an MPI-%d library without sessions)\n",
               MPI_VERSION);
        return 77;
#endif
    } else {
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
        comm = MPI_COMM_WORLD;
    }
    MPI_Comm_rank(comm, &t_rank);
    MPI_Comm_size(comm, &t_size);
    if (provided != MPI_THREAD_MULTIPLE || t_size > 64) {
        if (t_rank == 0)
            printf("test_threads: MPI_THREAD_MULTIPLE not provided: nothing to test\n");
        return finish(sessions) | 1;
    }
    const int words = W_SLOTS + t_size * THREADS;
    /* Mapped memory (loads, stores, CPU atomics), then memory reached by
     * CMA, where accumulates are coalesced in per-window batches. */
    for (int kind = 0; kind < 2; kind++) {
    if (kind == 0) {
        MPI_Win_allocate(words * 8, 8, MPI_INFO_NULL, comm, &base, &win);
    } else {
        base = calloc((size_t)words, 8);
        MPI_Win_create(base, words * 8, 8, MPI_INFO_NULL, comm, &win);
    }
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    memset(base, 0, (size_t)words * 8);
    memset(sent_acc, 0, sizeof sent_acc);
    memset(sent_fop, 0, sizeof sent_fop);
    MPI_Barrier(comm);

    MPI_Win_lock_all(0, win);
    run_threads(phase1, THREADS);
    MPI_Win_unlock_all(win);
    MPI_Barrier(comm);

    int64_t want_acc[64], want_fop[64];
    MPI_Allreduce(sent_acc, want_acc, t_size, MPI_INT64_T, MPI_SUM, comm);
    MPI_Allreduce(sent_fop, want_fop, t_size, MPI_INT64_T, MPI_SUM, comm);
    MPI_Win_lock(MPI_LOCK_SHARED, t_rank, 0, win);
    CHECK(base[W_ACC] == want_acc[t_rank], "%s window: accumulate total %lld, expected %lld",
          kind ? "created" : "allocated", (long long)base[W_ACC], (long long)want_acc[t_rank]);
    CHECK(base[W_FOP] == want_fop[t_rank], "fetch_and_op total %lld, expected %lld",
          (long long)base[W_FOP], (long long)want_fop[t_rank]);
    /* Each (origin, thread) last put here its highest i with this target. */
    int bad = 0;
    for (int o = 0; o < t_size; o++)
        for (int tid = 0; tid < THREADS; tid++) {
            int last = -1;
            for (int i = 0; i < ITERS; i++)
                if ((o + i + tid) % t_size == t_rank)
                    last = i;
            bad += base[W_SLOTS + o * THREADS + tid] != (int64_t)last * 1000 + tid;
        }
    CHECK(!bad, "%d put slots hold another value than their thread's last put", bad);
    int64_t vec_want = 0;
    for (int o = 0; o < t_size; o++)
        for (int tid = 0; tid < THREADS; tid++)
            for (int i = 0; i < ITERS; i += 8)
                vec_want += (o + i + tid) % t_size == t_rank;
    CHECK(base[W_VEC] == vec_want && base[W_VEC + 4] == vec_want && base[W_VEC + 1] == 0,
          "vector accumulate: %lld %lld %lld, expected %lld %lld 0", (long long)base[W_VEC],
          (long long)base[W_VEC + 4], (long long)base[W_VEC + 1], (long long)vec_want,
          (long long)vec_want);
    MPI_Win_unlock(t_rank, win);
    MPI_Barrier(comm);

    int nthreads = t_size < THREADS ? t_size : THREADS;
    run_threads(phase2, nthreads);
    MPI_Barrier(comm);
    /* Every process's thread tid increments target (rank + tid) % size. */
    int64_t locked_want = 0;
    for (int o = 0; o < t_size; o++)
        for (int tid = 0; tid < nthreads; tid++)
            locked_want += (o + tid) % t_size == t_rank ? EPOCHS : 0;
    MPI_Win_lock(MPI_LOCK_SHARED, t_rank, 0, win);
    CHECK(base[W_LOCKED] == locked_want, "increments under locks: %lld, expected %lld",
          (long long)base[W_LOCKED], (long long)locked_want);
    MPI_Win_unlock(t_rank, win);

    MPI_Win_free(&win);
    if (kind == 1)
        free(base);
    }
    CHECK(thread_errors == 0, "%d failed checks in threads", (int)thread_errors);
    return finish(sessions);
}
