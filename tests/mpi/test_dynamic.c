/* Dynamic windows as MPI defines them:
 *  - an access may span regions attached separately that are adjacent in the
 *    target's memory (put, get, accumulate, get_accumulate);
 *  - a process may attach thousands of regions (one per object);
 *  - the synchronization that orders a target's MPI_Win_attach before an
 *    access makes the access valid: a fence after MPI_MODE_NOPRECEDE, a post,
 *    a barrier before a lock;
 *  - an access outside attached memory, or after MPI_Win_detach, is still an
 *    MPI_ERR_RMA_RANGE error (at the call, or at the fence that runs it).
 * Run on one node and between (virtual) nodes. */
#include "common.h"

#include <unistd.h>

#define N 1000 /* elements of each of the two adjacent halves */
#define SPAN (N + N / 10)

static int error_class(int rc)
{
    int cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &cls);
    return cls;
}

/* Every process attaches a[0..N) and a[N..2N) separately; its left neighbour
 * accesses SPAN = 1.1 N elements from a[0], across the seam. */
static void spanning(void)
{
    int *a = calloc(2 * N, sizeof(int));
    MPI_Win win;
    MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    MPI_Win_attach(win, a, N * sizeof(int));
    MPI_Win_attach(win, a + N, N * sizeof(int));
    MPI_Aint mine, *addr = malloc(sizeof(MPI_Aint) * (size_t)t_size);
    MPI_Get_address(a, &mine);
    MPI_Allgather(&mine, 1, MPI_AINT, addr, 1, MPI_AINT, MPI_COMM_WORLD);
    int right = (t_rank + 1) % t_size, left = (t_rank + t_size - 1) % t_size;
    int *src = malloc(SPAN * sizeof(int)), *got = calloc(SPAN, sizeof(int));
    int *old = calloc(SPAN, sizeof(int));
    for (int i = 0; i < SPAN; i++)
        src[i] = 1000 * t_rank + i;

    /* put, then get it back */
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win);
    int rc = MPI_Put(src, SPAN, MPI_INT, right, addr[right], SPAN, MPI_INT, win);
    CHECK(rc == MPI_SUCCESS, "put across two adjacent regions: class %d", error_class(rc));
    MPI_Win_flush(right, win);
    rc = MPI_Get(got, SPAN, MPI_INT, right, addr[right], SPAN, MPI_INT, win);
    CHECK(rc == MPI_SUCCESS, "get across two adjacent regions: class %d", error_class(rc));
    MPI_Win_unlock(right, win);
    CHECK(!memcmp(got, src, SPAN * sizeof(int)), "get across the seam returned other data");

    /* accumulate, then get_accumulate: each element gets 2 * src[i] */
    MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win);
    rc = MPI_Accumulate(src, SPAN, MPI_INT, right, addr[right], SPAN, MPI_INT, MPI_SUM, win);
    CHECK(rc == MPI_SUCCESS, "accumulate across two regions: class %d", error_class(rc));
    MPI_Win_flush(right, win);
    rc = MPI_Get_accumulate(src, SPAN, MPI_INT, old, SPAN, MPI_INT, right, addr[right], SPAN,
                            MPI_INT, MPI_SUM, win);
    CHECK(rc == MPI_SUCCESS, "get_accumulate across two regions: class %d", error_class(rc));
    MPI_Win_unlock(right, win);
    int bad = -1;
    for (int i = 0; i < SPAN && bad < 0; i++)
        if (old[i] != 2 * src[i])
            bad = i;
    CHECK(bad < 0, "get_accumulate fetched %d at %d, expected %d", bad < 0 ? 0 : old[bad], bad,
          bad < 0 ? 0 : 2 * src[bad]);
    MPI_Barrier(MPI_COMM_WORLD);
    bad = -1;
    for (int i = 0; i < 2 * N && bad < 0; i++)
        if (a[i] != (i < SPAN ? 3 * (1000 * left + i) : 0))
            bad = i;
    CHECK(bad < 0, "target memory at %d is %d", bad, bad < 0 ? 0 : a[bad]);

    /* Past the second region: still an error, and nothing is written. */
    MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win);
    rc = MPI_Put(src, 2, MPI_INT, right, addr[right] + (2 * N - 1) * (MPI_Aint)sizeof(int), 2,
                 MPI_INT, win);
    int cls = error_class(rc);
    if (rc == MPI_SUCCESS) /* between nodes the target checks: the flush reports */
        cls = error_class(MPI_Win_flush(right, win));
    MPI_Win_unlock(right, win);
    CHECK(cls == MPI_ERR_RMA_RANGE, "a put past the attached memory gave class %d", cls);

    /* After detaching the second half, an access into it is an error. */
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_detach(win, a + N);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win);
    rc = MPI_Put(src, SPAN, MPI_INT, right, addr[right], SPAN, MPI_INT, win);
    cls = error_class(rc);
    if (rc == MPI_SUCCESS)
        cls = error_class(MPI_Win_flush(right, win));
    MPI_Win_unlock(right, win);
    CHECK(cls == MPI_ERR_RMA_RANGE, "a put into detached memory gave class %d", cls);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_detach(win, a);
    MPI_Win_free(&win);
    free(a);
    free(addr);
    free(src);
    free(got);
    free(old);
}

/* One region per object, thousands of them, attached in a shuffled order;
 * every process updates objects of every other process. */
static void many_regions(int nobj)
{
    long **obj = malloc(sizeof(long *) * (size_t)nobj);
    MPI_Aint *mine = malloc(sizeof(MPI_Aint) * (size_t)nobj);
    MPI_Aint *all = malloc(sizeof(MPI_Aint) * (size_t)nobj * (size_t)t_size);
    MPI_Win win;
    MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    int attach_fail = 0;
    for (int i = 0; i < nobj; i++) {
        obj[i] = calloc(2, sizeof(long));
        MPI_Get_address(obj[i], &mine[i]);
    }
    for (int k = 0; k < nobj; k++) {
        int i = (int)(((long)k * 7919) % nobj); /* 7919 is prime: a permutation */
        attach_fail += MPI_Win_attach(win, obj[i], 2 * sizeof(long)) != MPI_SUCCESS;
    }
    CHECK(!attach_fail, "%d of %d MPI_Win_attach calls failed", attach_fail, nobj);
    MPI_Allgather(mine, nobj, MPI_AINT, all, nobj, MPI_AINT, MPI_COMM_WORLD);
    int errors = 0;
    MPI_Win_lock_all(0, win);
    for (int t = 0; t < t_size; t++) {
        if (t == t_rank)
            continue;
        for (int i = 0; i < nobj; i += 97) {
            long one = 1;
            errors += MPI_Accumulate(&one, 1, MPI_LONG, t, all[(size_t)t * nobj + i], 1, MPI_LONG,
                                     MPI_SUM, win) != MPI_SUCCESS;
        }
        long one = 1; /* the last object too */
        errors += MPI_Accumulate(&one, 1, MPI_LONG, t, all[(size_t)t * nobj + nobj - 1] +
                                 (MPI_Aint)sizeof(long), 1, MPI_LONG, MPI_SUM, win) != MPI_SUCCESS;
    }
    errors += MPI_Win_unlock_all(win) != MPI_SUCCESS;
    CHECK(!errors, "%d accumulates into %d attached objects failed", errors, nobj);
    MPI_Barrier(MPI_COMM_WORLD);
    int bad = -1;
    for (int i = 0; i < nobj && bad < 0; i++)
        if (obj[i][0] != (i % 97 ? 0 : t_size - 1))
            bad = i;
    CHECK(bad < 0, "object %d holds %ld", bad, bad < 0 ? 0L : obj[bad][0]);
    CHECK(obj[nobj - 1][1] == t_size - 1, "the last object's second word is %ld",
          obj[nobj - 1][1]);
    for (int i = 0; i < nobj; i++) {
        MPI_Win_detach(win, obj[i]);
        free(obj[i]);
    }
    MPI_Win_free(&win);
    free(obj);
    free(mine);
    free(all);
}

/* The target attaches late (after a nap); the synchronization that follows
 * its attach is what makes the origin's access valid. */
enum { S_FENCE_NOPRECEDE, S_FENCE, S_PSCW, S_LOCK_AFTER_BARRIER, S_COUNT };
static const char *const sname[S_COUNT] = { "fence(MPI_MODE_NOPRECEDE)", "fence", "post/start",
                                            "barrier, then lock" };

static void attach_then_sync(int how)
{
    int *a = calloc(4, sizeof(int));
    MPI_Aint mine, *addr = malloc(sizeof(MPI_Aint) * (size_t)t_size);
    MPI_Get_address(a, &mine);
    MPI_Allgather(&mine, 1, MPI_AINT, addr, 1, MPI_AINT, MPI_COMM_WORLD);
    MPI_Win win;
    MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    int right = (t_rank + 1) % t_size, left = (t_rank + t_size - 1) % t_size;
    int value = 100 + t_rank, rc = MPI_SUCCESS, rc2;
    MPI_Group world, g;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    usleep(t_rank % 2 ? 50000 : 0); /* odd ranks attach late */
    MPI_Win_attach(win, a, 4 * sizeof(int));
    switch (how) {
    case S_FENCE_NOPRECEDE:
    case S_FENCE:
        MPI_Win_fence(how == S_FENCE_NOPRECEDE ? MPI_MODE_NOPRECEDE : 0, win);
        rc = MPI_Put(&value, 1, MPI_INT, right, addr[right], 1, MPI_INT, win);
        rc2 = MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
        if (rc == MPI_SUCCESS)
            rc = rc2;
        break;
    case S_PSCW: {
        int both[2] = { left, right };
        MPI_Group_incl(world, left == right ? 1 : 2, both, &g);
        MPI_Win_post(g, 0, win);
        MPI_Win_start(g, 0, win);
        rc = MPI_Put(&value, 1, MPI_INT, right, addr[right], 1, MPI_INT, win);
        MPI_Win_complete(win);
        MPI_Win_wait(win);
        MPI_Group_free(&g);
        break;
    }
    case S_LOCK_AFTER_BARRIER:
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win);
        rc = MPI_Put(&value, 1, MPI_INT, right, addr[right], 1, MPI_INT, win);
        rc2 = MPI_Win_unlock(right, win);
        if (rc == MPI_SUCCESS)
            rc = rc2;
        break;
    }
    CHECK(rc == MPI_SUCCESS, "attach, then %s: the put failed with class %d", sname[how],
          error_class(rc));
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(a[0] == 100 + left, "attach, then %s: target holds %d", sname[how], a[0]);
    MPI_Win_detach(win, a);
    MPI_Group_free(&world);
    MPI_Win_free(&win);
    free(a);
    free(addr);
}

/* An access outside attached memory in a fence epoch queued after
 * MPI_MODE_NOPRECEDE: checked when it runs, reported by the closing fence. */
static void deferred_error(void)
{
    int *a = calloc(4, sizeof(int)), *never = calloc(4, sizeof(int));
    MPI_Aint *addr = malloc(sizeof(MPI_Aint) * (size_t)t_size), mine;
    MPI_Get_address(never, &mine);
    MPI_Allgather(&mine, 1, MPI_AINT, addr, 1, MPI_AINT, MPI_COMM_WORLD);
    MPI_Win win;
    MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    MPI_Win_attach(win, a, 4 * sizeof(int));
    int right = (t_rank + 1) % t_size, v = 5;
    MPI_Win_fence(MPI_MODE_NOPRECEDE, win);
    int rc = MPI_Put(&v, 1, MPI_INT, right, addr[right], 1, MPI_INT, win);
    int rc2 = MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
    int cls = error_class(rc != MPI_SUCCESS ? rc : rc2);
    CHECK(cls == MPI_ERR_RMA_RANGE, "a put to unattached memory in a fence epoch: class %d", cls);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(never[0] == 0, "unattached memory was written (%d)", never[0]);
    MPI_Win_detach(win, a);
    MPI_Win_free(&win);
    free(a);
    free(never);
    free(addr);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    spanning();
    many_regions(3000);
    for (int s = 0; s < S_COUNT; s++)
        attach_then_sync(s);
    deferred_error();
    return t_finish("test_dynamic");
}
