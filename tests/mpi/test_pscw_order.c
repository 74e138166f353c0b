/* The end of a PSCW epoch follows the epoch's operations, on every kind of
 * window memory. In a ring, each rank puts a block into its right neighbour
 * between MPI_Win_start and MPI_Win_complete (every other round behind an
 * accumulate into a counter there); the neighbour checks every word right
 * after MPI_Win_wait returns.
 * Then a second epoch gets the block back and the origin checks every word
 * right after MPI_Win_complete. Memory: MPI_Win_allocate(_shared), and
 * MPI_Win_create over a small and an 8 MB malloc, MPI_Alloc_mem and an
 * array on the stack.
 *
 * Between virtual nodes the complete is a message behind the epoch's RDMA.
 * Until it was ordered by ucp_worker_fence (what UCP's API promises) it
 * relied on one host's transports applying both in order, which held on
 * UCX 1.13 and not on 1.20: the target read old values in every run.
 * Toward another virtual node whose network words UCX maps, post and
 * complete are CPU atomics there (stats post_mapped, complete_mapped), and
 * fence and PSCW epochs' operations take the fast path (test_fast_epochs). */
#include "common.h"
#include "stats.h"

#include <onesided.h>
#include <string.h>

enum { ROUNDS = 40, STACK_WORDS = 8192, BIG_WORDS = 1 << 20 /* 8 MB of int64 */ };

/* Block sizes in words: one put, UCX's eager sizes, a large one (capped at
 * the window). */
static const int block_words[] = { 1, 1024, 65536 };

/* This rank's neighbours in the ring, and the one-rank groups of each:
 * epochs go to the right and are exposed to the left. */
typedef struct {
    int right, left;
    MPI_Group to_right, from_left;
} ring_t;

static ring_t ring_open(void)
{
    ring_t r = { (t_rank + 1) % t_size, (t_rank + t_size - 1) % t_size, MPI_GROUP_NULL,
                 MPI_GROUP_NULL };
    MPI_Group world;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 1, &r.right, &r.to_right);
    MPI_Group_incl(world, 1, &r.left, &r.from_left);
    MPI_Group_free(&world);
    return r;
}

static void ring_close(ring_t *r)
{
    MPI_Group_free(&r->to_right);
    MPI_Group_free(&r->from_left);
}

static long rounds_on(MPI_Win win, int64_t *mem, MPI_Aint words)
{
    ring_t g = ring_open();
    const int right = g.right, left = g.left;
    /* mem[0] is the counter the left neighbour accumulates into; blocks
     * start at word 1. */
    int64_t *block = malloc(sizeof *block * (size_t)words);
    long wrong = 0;
    for (int64_t r = 1; r <= ROUNDS; r++) {
        MPI_Aint n = block_words[r % 3];
        if (n > words - 1)
            n = words - 1;
        const int64_t tag = r * 1000003 + t_rank; /* what this rank writes this round */
        for (MPI_Aint i = 0; i < n; i++)
            block[i] = tag + i;
        const int64_t one = 1;
        /* Epoch 1: put to the right, and be written by the left. */
        MPI_Win_post(g.from_left, 0, win);
        MPI_Win_start(g.to_right, 0, win);
        if (r % 2)
            MPI_Put(block, (int)n, MPI_INT64_T, right, 1, (int)n, MPI_INT64_T, win);
        else {
            /* The put behind an accumulate (a request, where the put is RDMA). */
            MPI_Accumulate(&one, 1, MPI_INT64_T, right, 0, 1, MPI_INT64_T, MPI_SUM, win);
            MPI_Put(block, (int)n, MPI_INT64_T, right, 1, (int)n, MPI_INT64_T, win);
        }
        MPI_Win_complete(win);
        MPI_Win_wait(win);
        const int64_t ltag = r * 1000003 + left;
        for (MPI_Aint i = 0; i < n; i++)
            wrong += mem[1 + i] != ltag + i;
        wrong += mem[0] != r / 2;
        /* Epoch 2: get back what this rank put at the right. */
        memset(block, 0, sizeof *block * (size_t)n);
        MPI_Win_post(g.from_left, 0, win);
        MPI_Win_start(g.to_right, 0, win);
        MPI_Get(block, (int)n, MPI_INT64_T, right, 1, (int)n, MPI_INT64_T, win);
        MPI_Win_complete(win);
        for (MPI_Aint i = 0; i < n; i++)
            wrong += block[i] != tag + i;
        MPI_Win_wait(win);
    }
    free(block);
    ring_close(&g);
    return wrong;
}

enum { K_ALLOCATE, K_SHARED, K_MALLOC, K_MALLOC_8MB, K_ALLOC_MEM, K_STACK, K_COUNT };
static const char *const kind_name[K_COUNT] = { "MPI_Win_allocate", "MPI_Win_allocate_shared",
                                                "small malloc", "8 MB malloc", "MPI_Alloc_mem",
                                                "stack" };

static void run_kind(int k)
{
    int64_t stack[STACK_WORDS];
    const MPI_Aint words = k == K_MALLOC_8MB ? BIG_WORDS : k == K_STACK ? STACK_WORDS : 65537;
    const MPI_Aint bytes = words * (MPI_Aint)sizeof(int64_t);
    int64_t *mem = NULL;
    MPI_Win win;
    switch (k) {
    case K_ALLOCATE:
        MPI_Win_allocate(bytes, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win);
        break;
    case K_SHARED:
        MPI_Win_allocate_shared(bytes, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win);
        break;
    case K_ALLOC_MEM:
        MPI_Alloc_mem(bytes, MPI_INFO_NULL, &mem);
        MPI_Win_create(mem, bytes, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
        break;
    case K_STACK:
        mem = stack;
        MPI_Win_create(mem, bytes, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
        break;
    default:
        mem = malloc((size_t)bytes);
        MPI_Win_create(mem, bytes, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
        break;
    }
    memset(mem, 0, (size_t)bytes);
    MPI_Barrier(MPI_COMM_WORLD);
    const long wrong = rounds_on(win, mem, words);
    CHECK(wrong == 0, "%s: %ld words wrong after MPI_Win_wait or MPI_Win_complete",
          kind_name[k], wrong);
    MPI_Win_free(&win);
    if (k == K_ALLOC_MEM)
        MPI_Free_mem(mem);
    else if (k == K_MALLOC || k == K_MALLOC_8MB)
        free(mem);
}

/* Once MPI_Win_complete has returned (and a barrier says so), the target's
 * MPI_Win_test sees it at its first call. Toward another virtual node of
 * this host the complete is this CPU's atomic on the target's count, which
 * UCX maps here (stat complete_mapped); elsewhere a request and its reply. */
static void test_complete_seen(void)
{
    ring_t g = ring_open();
    const int right = g.right, left = g.left;
    const int k = t_virtual_node_size();
    const char *tls = getenv("ONESIDED_UCX_TLS");
    const bool remote = k > 0 && right / k != t_rank / k, tcp = tls && strstr(tls, "tcp");
    int64_t *mem;
    MPI_Win win;
    MPI_Win_allocate(sizeof *mem, sizeof *mem, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win);
    *mem = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    long unseen = 0, wrong = 0;
    for (int64_t r = 1; r <= ROUNDS; r++) {
        const int64_t v = r * 1000003 + t_rank;
        MPI_Win_post(g.from_left, 0, win);
        MPI_Win_start(g.to_right, 0, win);
        MPI_Put(&v, 1, MPI_INT64_T, right, 0, 1, MPI_INT64_T, win);
        MPI_Win_complete(win);
        MPI_Barrier(MPI_COMM_WORLD);
        int flag = 0;
        MPI_Win_test(win, &flag);
        unseen += !flag;
        if (!flag)
            MPI_Win_wait(win);
        wrong += *mem != r * 1000003 + left;
    }
    CHECK(unseen == 0 && wrong == 0, "rank %d: MPI_Win_test missed %ld completes that had "
          "returned, %ld values wrong", t_rank, unseen, wrong);
    const uint64_t mapped = t_stat(win, ONESIDED_STAT_COMPLETE_MAPPED);
    if (t_hosts == 1 && !tcp)
        CHECK(mapped == (remote ? (uint64_t)ROUNDS : 0u), "rank %d: %llu completes by the "
              "mapped count, expected %d", t_rank, (unsigned long long)mapped,
              remote ? ROUNDS : 0);
    /* This rank posts to its left neighbour, by flipping its bit there when
     * that is another virtual node (stat post_mapped), else by message or
     * (a node-mate) in the post matrix. */
    const bool left_remote = k > 0 && left / k != t_rank / k;
    const uint64_t posts = t_stat(win, ONESIDED_STAT_POST_MAPPED);
    if (t_hosts == 1 && !tcp)
        CHECK(posts == (left_remote ? (uint64_t)ROUNDS : 0u), "rank %d: %llu posts by the "
              "mapped bit, expected %d", t_rank, (unsigned long long)posts,
              left_remote ? ROUNDS : 0);
    MPI_Win_free(&win);
    ring_close(&g);
}

/* Fence and PSCW epochs, alternately, on MPI_Win_allocate memory: a put, an
 * accumulate and a get to the right neighbour each, checked when the epoch
 * ends. On one host, where every process maps every other's memory (its
 * node's, or another virtual node's through UCX), each takes the fast
 * path, the epoch's first one after waiting for the post. Between virtual
 * nodes these went the general path until fence and PSCW epochs joined
 * lock epochs there (45 against 11 ns per 8-byte put in a burst). */
static void test_fast_epochs(void)
{
    ring_t g = ring_open();
    const int right = g.right, left = g.left;
    const char *tls = getenv("ONESIDED_UCX_TLS"), *defer = getenv("ONESIDED_FENCE_DEFER");
    const bool tcp = tls && strstr(tls, "tcp"), deferred = defer && atoi(defer);
    int64_t *mem;
    MPI_Win win;
    MPI_Win_allocate(3 * sizeof *mem, sizeof *mem, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win);
    mem[0] = mem[1] = mem[2] = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    const uint64_t before = t_stat(win, ONESIDED_STAT_FAST_PATH_OPS);
    long wrong = 0;
    for (int64_t r = 1; r <= ROUNDS; r++) {
        const int64_t v = r * 1000003 + t_rank, one = 1;
        int64_t got = -1;
        mem[2] = r * 7 + t_rank; /* what the left neighbour reads this round */
        if (r % 2) {
            MPI_Win_fence(0, win);
        } else {
            MPI_Win_post(g.from_left, 0, win);
            MPI_Win_start(g.to_right, 0, win);
        }
        MPI_Put(&v, 1, MPI_INT64_T, right, 0, 1, MPI_INT64_T, win);
        MPI_Accumulate(&one, 1, MPI_INT64_T, right, 1, 1, MPI_INT64_T, MPI_SUM, win);
        MPI_Get(&got, 1, MPI_INT64_T, right, 2, 1, MPI_INT64_T, win);
        if (r % 2) {
            MPI_Win_fence(0, win);
        } else {
            MPI_Win_complete(win);
            MPI_Win_wait(win);
        }
        wrong += (mem[0] != r * 1000003 + left) + (mem[1] != r) + (got != r * 7 + right);
    }
    MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
    CHECK(wrong == 0, "rank %d: %ld values wrong after fence and PSCW epochs", t_rank, wrong);
    const uint64_t fast = t_stat(win, ONESIDED_STAT_FAST_PATH_OPS) - before;
    if (t_hosts == 1 && !tcp && !deferred)
        CHECK(fast == 3u * ROUNDS, "rank %d: %llu operations of fence and PSCW epochs took the "
              "fast path, expected %d", t_rank, (unsigned long long)fast, 3 * ROUNDS);
    MPI_Win_free(&win);
    ring_close(&g);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    if (t_size < 2) {
        fprintf(stderr, "test_pscw_order needs 2 or more processes\n");
        return t_finish("test_pscw_order");
    }
    for (int k = 0; k < K_COUNT; k++)
        if (k != K_SHARED || t_hosts == 1) /* shared windows span one host only */
            run_kind(k);
    test_complete_seen();
    test_fast_epochs();
    return t_finish("test_pscw_order");
}
