/* Shared helpers of the multi-process tests: checks, reporting, windows of
 * every flavor behind one interface. */
#ifndef TEST_COMMON_H
#define TEST_COMMON_H

#include <malloc.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_rank, t_size, t_fail, t_pass;
static int t_hosts = 1; /* real hosts the job spans (the host MPI's shared-memory nodes) */
static int t_host_block; /* across hosts: K when every host holds K consecutive ranks
                            (the last may hold fewer), else 0 */

#define CHECK(cond, ...)                                                                       \
    do {                                                                                       \
        if (cond) {                                                                            \
            t_pass++;                                                                          \
        } else {                                                                               \
            t_fail++;                                                                          \
            fprintf(stderr, "[rank %d] %s:%d: CHECK(%s) failed: ", t_rank, __FILE__, __LINE__, \
                    #cond);                                                                    \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fputc('\n', stderr);                                                               \
        }                                                                                      \
    } while (0)

static void t_init(int *argc, char ***argv)
{
    /* glibc raises its mmap threshold after freeing a large block, after
     * which the next one comes from the heap, sharing its edge pages: the
     * create_big flavor's memory is then not made shareable. Fixed here so
     * that the flavor tests the same path every time. */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &t_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &t_size);
    MPI_Comm node;
    int node_rank, leader;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &node_rank);
    leader = node_rank == 0;
    MPI_Allreduce(&leader, &t_hosts, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    /* Placed in blocks (mpiexec -ppn K), hosts make the layout virtual nodes
     * of K make (ONESIDED_NODE_SIZE=K), and the tests expect the same paths. */
    int first = t_rank, k = 0, *firsts = malloc(sizeof(int) * (size_t)t_size);
    MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, node);
    MPI_Allgather(&first, 1, MPI_INT, firsts, 1, MPI_INT, MPI_COMM_WORLD);
    while (k < t_size && firsts[k] == 0)
        k++;
    bool blocks = t_hosts > 1;
    for (int r = 0; r < t_size; r++)
        blocks &= firsts[r] == r / k * k;
    t_host_block = blocks ? k : 0;
    free(firsts);
    MPI_Comm_free(&node);
}

static int t_finish(const char *name)
{
    int fails = 0, passes = 0;
    MPI_Allreduce(&t_fail, &fails, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&t_pass, &passes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (t_rank == 0)
        printf("%s on %d processes: %d passed, %d failed\n", name, t_size, passes, fails);
    MPI_Finalize();
    return fails ? 1 : 0;
}

/* Nodes of K consecutive ranks, smaller than the job: virtual nodes
 * (ONESIDED_NODE_SIZE), or real hosts placed in blocks. Some peers are then
 * reached over the network. Returns K, or 0 when all share one node. A job
 * spread over hosts any other way (round robin) is not a layout these tests
 * know: they stop at once rather than expect the wrong paths. */
static inline int t_virtual_node_size(void)
{
    if (t_hosts > 1) {
        if (!t_host_block) {
            if (t_rank == 0)
                fprintf(stderr, "tests: across hosts, place ranks in blocks (mpiexec -ppn K)\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        return t_host_block;
    }
    const char *v = getenv("ONESIDED_NODE_SIZE");
    int k = v ? atoi(v) : 0;
    return k > 0 && k < t_size ? k : 0;
}

/* Rounds of a contention loop: `full`, or full / ONESIDED_TEST_ROUNDS_DIVISOR
 * (at least 10). A configuration sets it where every request waits for the
 * target's CPU and more processes than cores run (the request routes of 5
 * and 8 processes, over TCP too): each round costs a scheduling slice
 * there, and the paths the loop covers are the same at fewer rounds. */
static inline int t_rounds(int full)
{
    const char *v = getenv("ONESIDED_TEST_ROUNDS_DIVISOR");
    const int div = v ? atoi(v) : 1;
    const int n = div > 1 ? full / div : full;
    return n < 10 && full >= 10 ? 10 : n;
}

/* The kernel refuses cross-memory attach here: the suite runs under the
 * no_cma wrapper (tests/inject/no_cma.c, which says so in the environment),
 * or onesided is told to behave as if (ONESIDED_CMA=0). Windows over
 * private memory then reach the node's other processes over UCX. */
static inline bool t_cma_refused(void)
{
    const char *v = getenv("ONESIDED_CMA");
    return getenv("ONESIDED_TEST_NO_CMA") || (v && atoi(v) == 0);
}

/* The host MPI at run time is Intel MPI (through the MPICH or MPI-5 ABI). */
static inline bool t_host_is_intel(void)
{
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(v, &len);
    return strncmp(v, "Intel(R) MPI", 12) == 0;
}

/* The host MPI waits in a poll loop onesided can serve from (MPICH's and
 * Open MPI's: UCX or opal_progress), which node requests and host progress
 * need. Intel MPI's is libfabric's, which calls neither. */
static inline bool t_host_loop_serves(void)
{
    return !t_host_is_intel();
}

/* MPI_Win_create makes the program's own memory shareable where it can
 * (onesided_create_share, on unless ONESIDED_CREATE_SHARE=0). */
static inline bool t_create_share(void)
{
    const char *v = getenv("ONESIDED_CREATE_SHARE");
    return !(v && atoi(v) == 0);
}

/* The window flavors every test runs over. */
/* F_CREATE is MPI_Win_create over a small malloc (its pages hold other
 * objects too: reached by CMA), F_ALLOCMEM over MPI_Alloc_mem memory
 * (mapped by every process), F_CREATE_BIG over a large malloc (glibc's own
 * mmap: its pages made shareable in place and mapped, t_create_share). */
enum { F_ALLOCATE, F_SHARED, F_CREATE, F_ALLOCMEM, F_DYNAMIC, F_CREATE_BIG, F_COUNT };
static const char *const flavor_name[F_COUNT] = { "allocate", "allocate_shared", "create",
                                                  "create_allocmem", "dynamic", "create_big" };
enum { T_BIG_EXTRA = 256 * 1024 }; /* over glibc's mmap threshold */

/* glibc's malloc serves a large block from an mmap of its own, which
 * onesided shares whole; a sanitizer's allocator puts its own header there
 * instead, and only the whole pages inside a block get shared. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define T_GLIBC_MALLOC 0
#else
#define T_GLIBC_MALLOC 1
#endif

/* The flavor's memory is mapped by the node's processes: no CMA. */
static inline bool t_flavor_mapped(int flavor)
{
    return flavor == F_ALLOCATE || flavor == F_SHARED || flavor == F_ALLOCMEM ||
           (flavor == F_CREATE_BIG && t_create_share() && T_GLIBC_MALLOC);
}

/* The node size windows of this flavor see: t_virtual_node_size(), except
 * that where CMA is refused, windows over private memory make each process
 * a node of its own. MPI_Alloc_mem memory stays shared where the node's
 * processes may open each other's /proc/<pid>/fd (under no_cma; not with
 * ONESIDED_CMA=0). */
static inline int t_node_size_of(int flavor)
{
    const char *v = getenv("ONESIDED_CMA");
    const bool all_refused = v && atoi(v) == 0;
    const bool shareable =
        flavor == F_ALLOCMEM || (flavor == F_CREATE_BIG && t_create_share() && T_GLIBC_MALLOC);
    if (t_size > 1 && t_cma_refused() &&
        (flavor == F_CREATE || flavor == F_DYNAMIC || flavor == F_ALLOCMEM ||
         flavor == F_CREATE_BIG) &&
        (!shareable || all_refused))
        return 1;
    return t_virtual_node_size();
}

/* Whether a flavor can run on this job: MPI_Win_allocate_shared over
 * processes of several hosts is erroneous (MPI_ERR_RMA_SHARED), so tests
 * that make their windows over MPI_COMM_WORLD skip it there. */
static inline bool t_flavor_runs(int flavor)
{
    return !(flavor == F_SHARED && t_hosts > 1);
}
/* for (int f ...) over every flavor this job can run */
#define T_FOR_EACH_FLAVOR(f)                                                                   \
    for (int f = 0; f < F_COUNT; f++)                                                          \
        if (t_flavor_runs(f))

typedef struct {
    MPI_Win win;
    int flavor;
    char *base;       /* this process's window memory */
    MPI_Aint bytes;
    MPI_Aint *origin; /* per rank: displacement of its first byte (addresses for dynamic) */
    void *own;        /* memory we allocated for create/dynamic */
} t_win_t;

/* The create_big flavor's memory: a zeroed block glibc serves from an mmap
 * of its own. The fixed threshold (t_init) is not enough alone: a free
 * chunk of the heap that large (the host MPI's allocations, freed and
 * merged) is reused before glibc considers mmap, and its memory then
 * shares its edge pages, so it is not made shareable. Such blocks are set
 * aside (glibc's chunk header says which is which: IS_MMAPPED, 0x2 in the
 * size word before the memory) until an mmapped one comes. */
#if T_GLIBC_MALLOC
/* The size word of glibc's chunk header, just before the memory (read
 * through an integer address: GCC's -Warray-bounds takes p[-1] for a read
 * before the start of the object calloc returned). */
static inline size_t t_chunk_size_word(const void *p)
{
    size_t word;
    memcpy(&word, (const void *)((uintptr_t)p - sizeof word), sizeof word);
    return word;
}
#endif

static inline void *t_big_calloc(size_t bytes)
{
    void *p = calloc(1, bytes), *aside[8];
    int n = 0;
#if T_GLIBC_MALLOC
    while (p && !(t_chunk_size_word(p) & 2) && n < 8) {
        aside[n++] = p;
        p = calloc(1, bytes);
    }
#endif
    while (n > 0)
        free(aside[--n]);
    return p;
}

/* A window of `bytes` bytes per process, displacement unit 1, zero-filled. */
static inline t_win_t t_win_make(int flavor, MPI_Aint bytes, MPI_Info info)
{
    t_win_t t = { .flavor = flavor, .bytes = bytes };
    t.origin = calloc((size_t)t_size, sizeof(MPI_Aint));
    switch (flavor) {
    case F_ALLOCATE:
        MPI_Win_allocate(bytes, 1, info, MPI_COMM_WORLD, &t.base, &t.win);
        break;
    case F_SHARED:
        MPI_Win_allocate_shared(bytes, 1, info, MPI_COMM_WORLD, &t.base, &t.win);
        break;
    case F_CREATE:
        t.own = t.base = calloc(1, (size_t)bytes + 1);
        MPI_Win_create(t.base, bytes, 1, info, MPI_COMM_WORLD, &t.win);
        break;
    case F_ALLOCMEM:
        MPI_Alloc_mem(bytes + 1, MPI_INFO_NULL, &t.base);
        MPI_Win_create(t.base, bytes, 1, info, MPI_COMM_WORLD, &t.win);
        break;
    case F_CREATE_BIG:
        t.own = t.base = t_big_calloc((size_t)bytes + T_BIG_EXTRA);
        MPI_Win_create(t.base, bytes, 1, info, MPI_COMM_WORLD, &t.win);
        break;
    case F_DYNAMIC: {
        t.own = t.base = calloc(1, (size_t)bytes + 1);
        MPI_Win_create_dynamic(info, MPI_COMM_WORLD, &t.win);
        MPI_Win_attach(t.win, t.base, bytes);
        MPI_Aint mine;
        MPI_Get_address(t.base, &mine);
        MPI_Allgather(&mine, 1, MPI_AINT, t.origin, 1, MPI_AINT, MPI_COMM_WORLD);
        break;
    }
    }
    memset(t.base, 0, (size_t)bytes);
    MPI_Barrier(MPI_COMM_WORLD);
    return t;
}

static inline void t_win_free(t_win_t *t)
{
    if (t->flavor == F_DYNAMIC) {
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Win_detach(t->win, t->base);
    }
    MPI_Win_free(&t->win);
    if (t->flavor == F_ALLOCMEM)
        MPI_Free_mem(t->base);
    free(t->own);
    free(t->origin);
}

/* Target displacement of byte `off` in rank r's window. */
static inline MPI_Aint t_disp(const t_win_t *t, int r, MPI_Aint off)
{
    return t->origin[r] + off;
}

/* Increment the int64 at disp of rank r by compare-and-swap, from the value
 * `seen` believed there: retry with what was found until it sticks (inside
 * a passive-target epoch). */
static inline void t_cas_increment(MPI_Win win, int r, MPI_Aint disp, int64_t seen)
{
    for (;;) {
        int64_t next = seen + 1, got;
        MPI_Compare_and_swap(&next, &seen, &got, MPI_INT64_T, r, disp, win);
        MPI_Win_flush(r, win);
        if (got == seen)
            return;
        seen = got;
    }
}

#endif
