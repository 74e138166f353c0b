/* MPI-4 and 4.1 programs. Built twice: linked with onesided, and without it
 * (test_sessions_native), so that every expectation is checked against the
 * host MPI's own behaviour too.
 *
 * 1. Sessions: the program never calls MPI_Init. It makes a communicator
 *    from the mpi://WORLD process set and uses windows of every flavor on
 *    it: lock/put/get/accumulate, fetch_and_op, fence, PSCW. onesided may
 *    not touch MPI_COMM_WORLD or MPI_COMM_SELF, which do not exist here.
 * 2. MPI_Win_shared_query on every flavor (MPI-4.1): on MPI_Win_allocate
 *    and MPI_Win_create windows, a node-mate's answer is either its whole
 *    memory, loadable here (a store through it is seen by the owner), or
 *    size 0 and NULL; this process's own answer is its memory or, without
 *    any, size 0. Dynamic windows: MPI_ERR_RMA_FLAVOR.
 *
 * With --world the same runs after MPI_Init over MPI_COMM_WORLD (part 2 is
 * the point there: where onesided made the memory shareable it must say
 * so). On an MPI-3 library the program reports itself skipped (77). */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Open MPI 5 has sessions while its mpi.h says MPI 3.1. */
#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)
static int rank, size, fails, passes;

#define CHECK(cond, ...)                                                                       \
    do {                                                                                       \
        if (cond) {                                                                            \
            passes++;                                                                          \
        } else {                                                                               \
            fails++;                                                                           \
            fprintf(stderr, "[rank %d] %s:%d: CHECK(%s) failed: ", rank, __FILE__, __LINE__,   \
                    #cond);                                                                    \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fputc('\n', stderr);                                                               \
        }                                                                                      \
    } while (0)

enum { WORDS = 1024 };
/* K_MIXED: rank 0's block on a page boundary (its whole pages shared in
 * place, so the others map all of its window), everybody else's a heap
 * block sharing its pages (reached by CMA): the answers differ per target,
 * which a malloc'd window shows only when the heap happens to align. */
enum { K_ALLOCATE, K_SHARED, K_MALLOC, K_MIXED, K_ALLOC_MEM, K_BIG_MALLOC, K_DYNAMIC, K_COUNT };
static const char *const kind_name[K_COUNT] = { "MPI_Win_allocate", "MPI_Win_allocate_shared",
                                                "MPI_Win_create (malloc)",
                                                "MPI_Win_create (rank 0's block page-aligned)",
                                                "MPI_Win_create (MPI_Alloc_mem)",
                                                "MPI_Win_create (1 MB malloc)",
                                                "MPI_Win_create_dynamic" };

/* Operations of every synchronization kind on a window of WORDS int64 per
 * process (displacement unit 8; dynamic windows take addresses). */
static void operations(MPI_Comm comm, MPI_Win win, int64_t *mem, const MPI_Aint *addr,
                       const char *what)
{
    const int right = (rank + 1) % size, left = (rank + size - 1) % size;
    const MPI_Aint d0 = addr ? addr[right] : 0, unit = addr ? 8 : 1;
    int64_t v = rank + 1, got = -1, one = 1;
    /* Passive target. */
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win);
    MPI_Put(&v, 1, MPI_INT64_T, right, d0 + 0 * unit, 1, MPI_INT64_T, win);
    MPI_Win_unlock(right, win);
    MPI_Barrier(comm);
    MPI_Win_lock_all(0, win);
    MPI_Accumulate(&one, 1, MPI_INT64_T, right, d0 + 1 * unit, 1, MPI_INT64_T, MPI_SUM, win);
    MPI_Fetch_and_op(&one, &got, MPI_INT64_T, right, d0 + 2 * unit, MPI_SUM, win);
    /* A request-based get: its request is the host's, made without
     * MPI_COMM_SELF, which a program of sessions alone does not have. */
    int64_t rgot = -1;
    MPI_Request rq;
    MPI_Rget(&rgot, 1, MPI_INT64_T, right, d0 + 0 * unit, 1, MPI_INT64_T, win, &rq);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    MPI_Win_flush_all(win);
    MPI_Win_unlock_all(win);
    MPI_Barrier(comm);
    CHECK(mem[0] == left + 1 && mem[1] == 1 && mem[2] == 1 && got == 0 && rgot == rank + 1,
          "%s, lock epochs: %lld %lld %lld, fetched %lld, read %lld", what, (long long)mem[0],
          (long long)mem[1], (long long)mem[2], (long long)got, (long long)rgot);
    /* Fence. */
    MPI_Win_fence(0, win);
    v = 100 + rank;
    MPI_Put(&v, 1, MPI_INT64_T, right, d0 + 3 * unit, 1, MPI_INT64_T, win);
    MPI_Win_fence(0, win);
    MPI_Get(&got, 1, MPI_INT64_T, right, d0 + 3 * unit, 1, MPI_INT64_T, win);
    MPI_Win_fence(0, win);
    CHECK(mem[3] == 100 + left && got == 100 + rank, "%s, fence: %lld, got %lld", what,
          (long long)mem[3], (long long)got);
    /* PSCW. */
    MPI_Group g, to_right, from_left;
    MPI_Comm_group(comm, &g);
    MPI_Group_incl(g, 1, &right, &to_right);
    MPI_Group_incl(g, 1, &left, &from_left);
    MPI_Win_post(from_left, 0, win);
    MPI_Win_start(to_right, 0, win);
    v = 200 + rank;
    MPI_Put(&v, 1, MPI_INT64_T, right, d0 + 4 * unit, 1, MPI_INT64_T, win);
    MPI_Win_complete(win);
    MPI_Win_wait(win);
    CHECK(mem[4] == 200 + left, "%s, PSCW: %lld", what, (long long)mem[4]);
    MPI_Group_free(&to_right);
    MPI_Group_free(&from_left);
    MPI_Group_free(&g);
}

/* MPI_Win_shared_query's answers (MPI-4.1), checked by storing through
 * every pointer given and reading at the owner. */
static void shared_query(MPI_Comm comm, MPI_Win win, int kind, int64_t *mem, MPI_Comm node,
                         int *mapped)
{
    MPI_Aint sz = -1;
    int du = -1;
    int64_t *p = NULL;
#ifdef T_NATIVE
    /* Intel MPI 2021 (an MPI-3.1 library) refuses shared_query on windows
     * not from MPI_Win_allocate_shared, and ends the job doing so whatever
     * the window's handler: not asked there. */
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len;
    MPI_Get_library_version(version, &len);
    if (kind != K_SHARED && !strncmp(version, "Intel(R) MPI", 12))
        return;
#endif
    MPI_Errhandler old;
    MPI_Win_get_errhandler(win, &old);
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    int rc = MPI_Win_shared_query(win, rank, &sz, &du, &p), cls = MPI_SUCCESS;
    MPI_Error_class(rc, &cls);
    if (kind == K_DYNAMIC) {
        CHECK(cls == MPI_ERR_RMA_FLAVOR, "%s: shared_query gave error class %d, expected "
              "MPI_ERR_RMA_FLAVOR", kind_name[kind], cls);
        MPI_Win_set_errhandler(win, old);
        MPI_Errhandler_free(&old);
        return;
    }
#if defined(T_NATIVE) && (defined(OMPI_MAJOR_VERSION) || MPI_VERSION * 10 + MPI_SUBVERSION < 41)
    /* MPICH 4.0 and Open MPI 5.0 themselves answer as MPI-4.0 did: only on
     * shared windows (an error of their choice on the others). */
    if (kind != K_SHARED) {
        CHECK(rc != MPI_SUCCESS, "%s: Open MPI's shared_query answered", kind_name[kind]);
        MPI_Win_set_errhandler(win, old);
        MPI_Errhandler_free(&old);
        return;
    }
#endif
    CHECK(rc == MPI_SUCCESS, "%s: shared_query of this rank failed (%d)", kind_name[kind], rc);
    CHECK((sz == WORDS * 8 && p == mem && du == 8) || (sz == 0 && p == NULL),
          "%s: own memory answered as %p, %ld bytes, unit %d (memory at %p)", kind_name[kind],
          (void *)p, (long)sz, du, (void *)mem);
    /* Every node-mate (same node as the host MPI sees it): store our rank
     * + 1000 in a word of its memory that only we write. */
    int nrank, nsize, wrank;
    MPI_Comm_rank(node, &nrank);
    MPI_Comm_size(node, &nsize);
    MPI_Group ng, cg;
    MPI_Comm_group(node, &ng);
    MPI_Comm_group(comm, &cg);
    int count = 0;
    /* Loads and stores through shared_query's pointers: inside a passive
     * epoch, made visible by MPI_Win_sync and a barrier (MPI's shared-memory
     * idiom; MPICH refuses MPI_Win_sync outside an epoch). */
    int *stored = calloc((size_t)size, sizeof *stored); /* into whom this rank stored */
    MPI_Win_lock_all(MPI_MODE_NOCHECK, win);
    for (int r = 0; r < nsize; r++) {
        MPI_Group_translate_ranks(ng, 1, &r, cg, &wrank);
        if (wrank == rank)
            continue;
        rc = MPI_Win_shared_query(win, wrank, &sz, &du, &p);
        CHECK(rc == MPI_SUCCESS, "%s: shared_query of rank %d failed (%d)", kind_name[kind],
              wrank, rc);
        CHECK((sz == WORDS * 8 && p && du == 8) || (sz == 0 && p == NULL),
              "%s: rank %d answered as %p, %ld bytes, unit %d", kind_name[kind], wrank,
              (void *)p, (long)sz, du);
        if (rc == MPI_SUCCESS && p && sz == WORDS * 8) {
            p[16 + rank] = 1000 + rank;
            stored[wrank] = 1;
            count++;
        }
    }
    MPI_Win_sync(win);
    MPI_Barrier(comm);
    MPI_Win_sync(win);
    MPI_Win_unlock_all(win);
    /* Which node-mates stored here, by their own account: the answer may
     * differ per target (one process's memory mapped here, another's not). */
    int *did = calloc((size_t)size, sizeof *did);
    MPI_Alltoall(stored, 1, MPI_INT, did, 1, MPI_INT, comm);
    for (int r = 0; r < nsize; r++) {
        MPI_Group_translate_ranks(ng, 1, &r, cg, &wrank);
        if (wrank != rank && did[wrank])
            CHECK(mem[16 + wrank] == 1000 + wrank, "%s: rank %d's store through "
                  "shared_query's pointer is not in the owner's memory (%lld)",
                  kind_name[kind], wrank, (long long)mem[16 + wrank]);
    }
    *mapped = count;
    free(did);
    free(stored);
    MPI_Group_free(&ng);
    MPI_Group_free(&cg);
    MPI_Win_set_errhandler(win, old);
    MPI_Errhandler_free(&old);
}

static void run(MPI_Comm comm)
{
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    MPI_Comm node;
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    for (int k = 0; k < K_COUNT; k++) {
        int nsize;
        MPI_Comm_size(node, &nsize);
        if (k == K_SHARED && nsize != size)
            continue; /* shared windows span one node */
        int64_t *mem = NULL;
        MPI_Aint *addr = NULL;
        MPI_Win win;
        const MPI_Aint bytes = WORDS * 8;
        switch (k) {
        case K_ALLOCATE:
            MPI_Win_allocate(bytes, 8, MPI_INFO_NULL, comm, &mem, &win);
            break;
        case K_SHARED:
            MPI_Win_allocate_shared(bytes, 8, MPI_INFO_NULL, comm, &mem, &win);
            break;
        case K_ALLOC_MEM:
            MPI_Alloc_mem(bytes, MPI_INFO_NULL, &mem);
            MPI_Win_create(mem, bytes, 8, MPI_INFO_NULL, comm, &win);
            break;
        case K_BIG_MALLOC:
            mem = malloc(1 << 20); /* its own mmap: whole pages */
            MPI_Win_create(mem, bytes, 8, MPI_INFO_NULL, comm, &win);
            break;
        case K_MIXED:
            mem = rank == 0 ? aligned_alloc(4096, (size_t)bytes) : malloc((size_t)bytes);
            MPI_Win_create(mem, bytes, 8, MPI_INFO_NULL, comm, &win);
            break;
        case K_DYNAMIC:
            mem = malloc((size_t)bytes);
            MPI_Win_create_dynamic(MPI_INFO_NULL, comm, &win);
            MPI_Win_attach(win, mem, bytes);
            addr = malloc(sizeof *addr * (size_t)size);
            MPI_Aint a;
            MPI_Get_address(mem, &a);
            MPI_Allgather(&a, 1, MPI_AINT, addr, 1, MPI_AINT, comm);
            break;
        default:
            mem = malloc((size_t)bytes);
            MPI_Win_create(mem, bytes, 8, MPI_INFO_NULL, comm, &win);
            break;
        }
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win);
        memset(mem, 0, (size_t)bytes);
        MPI_Win_unlock(rank, win);
        MPI_Barrier(comm);
        operations(comm, win, mem, addr, kind_name[k]);
        int mapped = 0, total = 0;
        shared_query(comm, win, k, mem, node, &mapped);
        MPI_Reduce(&mapped, &total, 1, MPI_INT, MPI_SUM, 0, comm);
        if (rank == 0 && k != K_DYNAMIC)
            printf("%s: %d node-mates' memory loadable through MPI_Win_shared_query\n",
                   kind_name[k], total);
        if (k == K_DYNAMIC)
            MPI_Win_detach(win, mem);
        MPI_Win_free(&win);
        if (k == K_ALLOC_MEM)
            MPI_Free_mem(mem);
        else if (k != K_ALLOCATE && k != K_SHARED)
            free(mem);
        free(addr);
    }
    MPI_Comm_free(&node);
}

static int report(MPI_Comm comm)
{
    int all[2] = { passes, fails }, sum[2];
    MPI_Allreduce(all, sum, 2, MPI_INT, MPI_SUM, comm);
    if (rank == 0)
        printf("test_sessions on %d processes: %d passed, %d failed\n", size, sum[0], sum[1]);
    return sum[1] != 0;
}

int main(int argc, char **argv)
{
    int bad;
    if (argc > 1 && !strcmp(argv[1], "--world")) {
        MPI_Init(&argc, &argv);
        run(MPI_COMM_WORLD);
        bad = report(MPI_COMM_WORLD);
        MPI_Finalize();
        return bad;
    }
    MPI_Session session;
    MPI_Group group;
    MPI_Comm comm;
    MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_ARE_FATAL, &session);
    MPI_Group_from_session_pset(session, "mpi://WORLD", &group);
    MPI_Comm_create_from_group(group, "org.onesided.test_sessions", MPI_INFO_NULL,
                               MPI_ERRORS_ARE_FATAL, &comm);
    MPI_Group_free(&group);
    run(comm);
    bad = report(comm);
    MPI_Comm_free(&comm);
    MPI_Session_finalize(&session);
    return bad;
}
#else
int main(void)
{
    printf("test_sessions: skipped (an MPI-%d library without sessions)\n", MPI_VERSION);
    return 77;
}
#endif
