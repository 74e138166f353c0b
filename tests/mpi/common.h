/* Shared helpers of the multi-process tests: checks, reporting, windows of
 * every flavor behind one interface. */
#ifndef TEST_COMMON_H
#define TEST_COMMON_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_rank, t_size, t_fail, t_pass;

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
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &t_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &t_size);
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

/* Virtual nodes (ONESIDED_NODE_SIZE) smaller than the job: some peers are
 * reached over the network. Returns the node size, or 0 when all share one. */
static inline int t_virtual_node_size(void)
{
    const char *v = getenv("ONESIDED_NODE_SIZE");
    int k = v ? atoi(v) : 0;
    return k > 0 && k < t_size ? k : 0;
}

/* The window flavors every test runs over. */
/* F_CREATE is MPI_Win_create over malloc'd memory (reached by CMA),
 * F_ALLOCMEM over MPI_Alloc_mem memory (mapped by every process). */
enum { F_ALLOCATE, F_SHARED, F_CREATE, F_ALLOCMEM, F_DYNAMIC, F_COUNT };
static const char *const flavor_name[F_COUNT] = { "allocate", "allocate_shared", "create",
                                                  "create_allocmem", "dynamic" };

typedef struct {
    MPI_Win win;
    int flavor;
    char *base;       /* this process's window memory */
    MPI_Aint bytes;
    MPI_Aint *origin; /* per rank: displacement of its first byte (addresses for dynamic) */
    void *own;        /* memory we allocated for create/dynamic */
} t_win_t;

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

#endif
