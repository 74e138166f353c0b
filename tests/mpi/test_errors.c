/* Erroneous calls return the right MPI error class through the window's
 * error handler, write nothing outside the target window, and leave the
 * window working. */
#include "common.h"

static int handler_calls, handler_last;

static void count_errors(MPI_Win *win, int *code, ...)
{
    (void)win;
    handler_calls++;
    handler_last = *code;
}

static int cls(int rc)
{
    int c = rc;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &c);
    return c;
}

#define EXPECT(call, want)                                                                     \
    do {                                                                                       \
        int rc_ = cls(call);                                                                   \
        CHECK(rc_ == (want), "%s/%s: %s returned class %d, expected %s (%d)",                  \
              flavor_name[flavor], "errors", #call, rc_, #want, (want));                       \
    } while (0)

/* The window still works: a put and a get round trip to the right neighbour. */
static void still_works(t_win_t *t, int flavor, const char *after)
{
    int right = (t_rank + 1) % t_size, v = 4242 + t_rank, back = -1;
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, t->win);
    MPI_Put(&v, 1, MPI_INT, right, t_disp(t, right, 8), 1, MPI_INT, t->win);
    MPI_Win_flush(right, t->win);
    MPI_Get(&back, 1, MPI_INT, right, t_disp(t, right, 8), 1, MPI_INT, t->win);
    MPI_Win_unlock(right, t->win);
    CHECK(back == v, "%s: window broken after %s (got %d)", flavor_name[flavor], after, back);
}

static void run(int flavor)
{
    /* 64 usable bytes; the create/dynamic flavors get guard bytes after them. */
    const MPI_Aint bytes = 64;
    t_win_t t;
    char *guarded = NULL;
    if (flavor == F_CREATE) {
        guarded = malloc(bytes + 64);
        memset(guarded, 0x5a, bytes + 64);
        t = (t_win_t){ .flavor = F_CREATE, .bytes = bytes, .base = guarded };
        t.origin = calloc((size_t)t_size, sizeof(MPI_Aint));
        MPI_Win_create(guarded, bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &t.win);
    } else {
        t = t_win_make(flavor, bytes, MPI_INFO_NULL);
    }
    MPI_Win_set_errhandler(t.win, MPI_ERRORS_RETURN);
    const int right = (t_rank + 1) % t_size;
    int x[32] = { 0 };
    int64_t l = 1, r;

    /* Operations outside any epoch. */
    EXPECT(MPI_Put(x, 1, MPI_INT, right, t_disp(&t, right, 0), 1, MPI_INT, t.win), MPI_ERR_RMA_SYNC);
    EXPECT(MPI_Fetch_and_op(&l, &r, MPI_INT64_T, right, t_disp(&t, right, 0), MPI_SUM, t.win), MPI_ERR_RMA_SYNC);
    EXPECT(MPI_Accumulate(x, 16, MPI_INT, right, t_disp(&t, right, 0), 16, MPI_INT, MPI_SUM, t.win), MPI_ERR_RMA_SYNC);
    EXPECT(MPI_Win_unlock(right, t.win), MPI_ERR_RMA_SYNC);
    EXPECT(MPI_Win_unlock_all(t.win), MPI_ERR_RMA_SYNC);
    EXPECT(MPI_Win_complete(t.win), MPI_ERR_RMA_SYNC);
    EXPECT(MPI_Win_wait(t.win), MPI_ERR_RMA_SYNC);
    EXPECT(MPI_Win_flush(right, t.win), MPI_ERR_RMA_SYNC);
    EXPECT(MPI_Win_lock(99, right, 0, t.win), MPI_ERR_LOCKTYPE);
    EXPECT(MPI_Win_lock(MPI_LOCK_SHARED, right, 0x7fff0000, t.win), MPI_ERR_ASSERT);
    still_works(&t, flavor, "sync errors");

    MPI_Win_lock_all(0, t.win);
    /* Wrong rank. */
    EXPECT(MPI_Put(x, 1, MPI_INT, t_size, 0, 1, MPI_INT, t.win), MPI_ERR_RANK);
    EXPECT(MPI_Get(x, 1, MPI_INT, -5, 0, 1, MPI_INT, t.win), MPI_ERR_RANK);
    /* Outside the target window, which must not be written. */
    EXPECT(MPI_Put(x, 2, MPI_INT, right, t_disp(&t, right, bytes - 4), 2, MPI_INT, t.win), MPI_ERR_RMA_RANGE);
    EXPECT(MPI_Put(x, 32, MPI_INT, right, t_disp(&t, right, 0), 32, MPI_INT, t.win), MPI_ERR_RMA_RANGE);
    /* Vectors past the end, at sizes that go in bulk (os_rma_fast_acc). */
    EXPECT(MPI_Accumulate(x, 32, MPI_INT, right, t_disp(&t, right, 0), 32, MPI_INT, MPI_SUM, t.win), MPI_ERR_RMA_RANGE);
    EXPECT(MPI_Accumulate(x, 12, MPI_INT, right, t_disp(&t, right, bytes - 40), 12, MPI_INT, MPI_SUM, t.win), MPI_ERR_RMA_RANGE);
    if (flavor != F_DYNAMIC)
        EXPECT(MPI_Put(x, 1, MPI_INT, right, -4, 1, MPI_INT, t.win), MPI_ERR_RMA_RANGE);
    EXPECT(MPI_Accumulate(&l, 1, MPI_INT64_T, right, t_disp(&t, right, bytes), 1, MPI_INT64_T, MPI_SUM, t.win), MPI_ERR_RMA_RANGE);
    EXPECT(MPI_Fetch_and_op(&l, &r, MPI_INT64_T, right, t_disp(&t, right, bytes - 4), MPI_SUM, t.win), MPI_ERR_RMA_RANGE);
    /* Ops and types that do not go together. */
    int pair[2] = { 1, 2 };
    float f = 1;
    EXPECT(MPI_Accumulate(pair, 1, MPI_2INT, right, t_disp(&t, right, 0), 1, MPI_2INT, MPI_SUM, t.win), MPI_ERR_OP);
    EXPECT(MPI_Accumulate(&f, 1, MPI_FLOAT, right, t_disp(&t, right, 0), 1, MPI_FLOAT, MPI_BAND, t.win), MPI_ERR_OP);
    EXPECT(MPI_Accumulate(&l, 1, MPI_INT64_T, right, t_disp(&t, right, 0), 1, MPI_INT64_T, MPI_OP_NULL, t.win), MPI_ERR_OP);
    EXPECT(MPI_Compare_and_swap(&f, &f, &f, MPI_FLOAT, right, t_disp(&t, right, 0), t.win), MPI_ERR_TYPE);
    {
        int lens[2] = { 1, 1 };
        MPI_Aint displs[2] = { 0, 8 };
        MPI_Datatype types[2] = { MPI_INT, MPI_DOUBLE }, mixed, vec;
        MPI_Type_create_struct(2, lens, displs, types, &mixed);
        MPI_Type_commit(&mixed);
        char buf[16] = { 0 };
        EXPECT(MPI_Accumulate(buf, 1, mixed, right, t_disp(&t, right, 0), 1, mixed, MPI_SUM, t.win), MPI_ERR_TYPE);
        MPI_Type_vector(2, 1, 2, MPI_INT64_T, &vec);
        MPI_Type_commit(&vec);
        EXPECT(MPI_Fetch_and_op(&l, &r, vec, right, t_disp(&t, right, 0), MPI_SUM, t.win), MPI_ERR_TYPE);
        MPI_Type_free(&mixed);
        MPI_Type_free(&vec);
        MPI_Op user;
        MPI_Op_create((MPI_User_function *)(void (*)(void))count_errors, 1, &user);
        EXPECT(MPI_Accumulate(&l, 1, MPI_INT64_T, right, t_disp(&t, right, 0), 1, MPI_INT64_T, user, t.win), MPI_ERR_OP);
        MPI_Op_free(&user);
    }
    /* Zero elements: no pairing to check (as in MPICH); a user op still is not allowed. */
    EXPECT(MPI_Get_accumulate(x, 0, MPI_BYTE, x, 0, MPI_BYTE, right, t_disp(&t, right, 0), 0,
                              MPI_BYTE, MPI_SUM, t.win), MPI_SUCCESS);
    EXPECT(MPI_Put(x, -1, MPI_INT, right, t_disp(&t, right, 0), 1, MPI_INT, t.win), MPI_ERR_COUNT);
    EXPECT(MPI_Put(x, 1, MPI_DATATYPE_NULL, right, t_disp(&t, right, 0), 1, MPI_INT, t.win), MPI_ERR_TYPE);
    EXPECT(MPI_Put(x, 4, MPI_INT, right, t_disp(&t, right, 0), 2, MPI_INT, t.win), MPI_ERR_TRUNCATE);
    /* Conflicting epochs. */
    EXPECT(MPI_Win_lock(MPI_LOCK_SHARED, right, 0, t.win), MPI_ERR_RMA_CONFLICT);
    EXPECT(MPI_Win_lock_all(0, t.win), MPI_ERR_RMA_SYNC);
    EXPECT(MPI_Win_fence(0, t.win), MPI_ERR_RMA_SYNC);
    EXPECT(MPI_Win_free(&t.win), MPI_ERR_RMA_SYNC);
    MPI_Win_unlock_all(t.win);
    MPI_Barrier(MPI_COMM_WORLD);
    if (flavor == F_CREATE) {
        int clean = 1;
        for (int i = 0; i < 64; i++)
            clean &= (unsigned char)guarded[bytes + i] == 0x5a;
        CHECK(clean, "create: bytes past the window were written");
    }
    still_works(&t, flavor, "operation errors");

    MPI_Group world, none;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 0, NULL, &none);
    MPI_Win_start(none, 0, t.win);
    EXPECT(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, t.win), MPI_ERR_RMA_CONFLICT);
    EXPECT(MPI_Win_lock_all(0, t.win), MPI_ERR_RMA_CONFLICT);
    EXPECT(MPI_Put(x, 1, MPI_INT, right, t_disp(&t, right, 0), 1, MPI_INT, t.win), MPI_ERR_RMA_SYNC);
    EXPECT(MPI_Win_start(none, 0, t.win), MPI_ERR_RMA_SYNC);
    MPI_Win_complete(t.win);
    if (t_size > 1) {
        /* Groups holding a process outside the window: larger than the
         * window's group, or as large and another process. */
        MPI_Win self;
        MPI_Group one_other;
        int *self_base, other = right;
        MPI_Win_allocate(8, 1, MPI_INFO_NULL, MPI_COMM_SELF, &self_base, &self);
        MPI_Win_set_errhandler(self, MPI_ERRORS_RETURN);
        MPI_Group_incl(world, 1, &other, &one_other);
        EXPECT(MPI_Win_post(world, 0, self), MPI_ERR_RANK);
        EXPECT(MPI_Win_start(world, 0, self), MPI_ERR_RANK);
        EXPECT(MPI_Win_post(one_other, 0, self), MPI_ERR_RANK);
        EXPECT(MPI_Win_start(one_other, 0, self), MPI_ERR_RANK);
        MPI_Group_free(&one_other);
        MPI_Win_free(&self);
    }
    MPI_Win_lock(MPI_LOCK_SHARED, right, 0, t.win);
    EXPECT(MPI_Win_lock(MPI_LOCK_SHARED, right, 0, t.win), MPI_ERR_RMA_SYNC);
    {
        /* Request-based operation to a target this process has not locked. */
        int other = (right + 1) % t_size;
        MPI_Request rq;
        EXPECT(MPI_Rput(x, 1, MPI_INT, other, t_disp(&t, other, 0), 1, MPI_INT, t.win, &rq),
               MPI_ERR_RMA_SYNC);
    }
    MPI_Win_unlock(right, t.win);
    MPI_Request req;
    EXPECT(MPI_Rput(x, 1, MPI_INT, right, t_disp(&t, right, 0), 1, MPI_INT, t.win, &req), MPI_ERR_RMA_SYNC);
    MPI_Group_free(&none);
    MPI_Group_free(&world);

    /* Fence: operations after NOSUCCEED, and NOPRECEDE after operations. */
    MPI_Win_fence(0, t.win);
    MPI_Put(x, 1, MPI_INT, right, t_disp(&t, right, 0), 1, MPI_INT, t.win);
    MPI_Win_fence(MPI_MODE_NOSUCCEED, t.win);
    EXPECT(MPI_Put(x, 1, MPI_INT, right, t_disp(&t, right, 0), 1, MPI_INT, t.win), MPI_ERR_RMA_SYNC);
    MPI_Win_fence(MPI_MODE_NOPRECEDE, t.win); /* a queued epoch */
    MPI_Put(x, 1, MPI_INT, right, t_disp(&t, right, 0), 1, MPI_INT, t.win);
    EXPECT(MPI_Win_fence(MPI_MODE_NOPRECEDE, t.win), MPI_ERR_RMA_SYNC);
    MPI_Win_fence(MPI_MODE_NOSUCCEED, t.win);
    MPI_Win_fence(0, t.win); /* an epoch whose operations run at once */
    MPI_Put(x, 1, MPI_INT, right, t_disp(&t, right, 0), 1, MPI_INT, t.win);
    EXPECT(MPI_Win_fence(MPI_MODE_NOPRECEDE, t.win), MPI_ERR_RMA_SYNC);
    MPI_Win_fence(MPI_MODE_NOSUCCEED, t.win);
    /* The same after each of the fast path's leaves, which take fence
     * epochs too and count what they issue the way every path does: a
     * fetch_and_op of a 64-bit integer, an accumulate of a run, a get of
     * a run. */
    int run_in[4];
    for (int lane = 0; lane < 3; lane++) {
        MPI_Win_fence(0, t.win);
        if (lane == 0)
            MPI_Fetch_and_op(&l, &r, MPI_INT64_T, right, t_disp(&t, right, 8), MPI_SUM, t.win);
        else if (lane == 1)
            MPI_Accumulate(x, 4, MPI_INT, right, t_disp(&t, right, 0), 4, MPI_INT, MPI_SUM, t.win);
        else
            MPI_Get(run_in, 4, MPI_INT, right, t_disp(&t, right, 0), 4, MPI_INT, t.win);
        EXPECT(MPI_Win_fence(MPI_MODE_NOPRECEDE, t.win), MPI_ERR_RMA_SYNC);
        MPI_Win_fence(MPI_MODE_NOSUCCEED, t.win);
    }
    /* A lock epoch between two fences: its operations are not the fence
     * epoch's. */
    MPI_Win_lock(MPI_LOCK_SHARED, right, 0, t.win);
    MPI_Put(x, 1, MPI_INT, right, t_disp(&t, right, 0), 1, MPI_INT, t.win);
    MPI_Win_unlock(right, t.win);
    EXPECT(MPI_Win_fence(MPI_MODE_NOPRECEDE, t.win), MPI_SUCCESS);
    MPI_Win_fence(MPI_MODE_NOSUCCEED, t.win);
    /* A fence epoch left for a lock epoch without a fence (allowed where
     * its operations ran at once, as MPICH allows it): they still count. */
    MPI_Win_fence(0, t.win);
    MPI_Put(x, 1, MPI_INT, right, t_disp(&t, right, 0), 1, MPI_INT, t.win);
    if (MPI_Win_lock(MPI_LOCK_SHARED, right, 0, t.win) == MPI_SUCCESS) {
        MPI_Put(x, 1, MPI_INT, right, t_disp(&t, right, 0), 1, MPI_INT, t.win);
        MPI_Win_unlock(right, t.win);
    } /* else queued for the next fence, another node's memory: still in the epoch */
    EXPECT(MPI_Win_fence(MPI_MODE_NOPRECEDE, t.win), MPI_ERR_RMA_SYNC);
    MPI_Win_fence(MPI_MODE_NOSUCCEED, t.win);
    /* The same error on rank 0 alone: the others' NOPRECEDE fence succeeds.
     * A NOPRECEDE epoch after it must neither hang (an origin waiting at its
     * put for rank 0's entry into the fence, while rank 0 waits for it in
     * the closing one) nor lose the puts. */
    MPI_Win_fence(0, t.win);
    if (t_rank == 0)
        MPI_Put(x, 1, MPI_INT, right, t_disp(&t, right, 0), 1, MPI_INT, t.win);
    EXPECT(MPI_Win_fence(MPI_MODE_NOPRECEDE, t.win), t_rank == 0 ? MPI_ERR_RMA_SYNC : MPI_SUCCESS);
    MPI_Win_fence(MPI_MODE_NOSUCCEED, t.win);
    int mark = 4242 + t_rank, *own = (int *)(t.base + 4);
    MPI_Win_fence(MPI_MODE_NOPRECEDE, t.win);
    MPI_Put(&mark, 1, MPI_INT, right, t_disp(&t, right, 4), 1, MPI_INT, t.win);
    MPI_Win_fence(MPI_MODE_NOSUCCEED, t.win);
    const int left = (t_rank + t_size - 1) % t_size;
    CHECK(*own == 4242 + left, "%s: after one process's failed NOPRECEDE fence, a NOPRECEDE "
          "epoch's put from rank %d holds %d", flavor_name[flavor], left, *own);

    /* Flavor-specific calls. */
    MPI_Aint sz;
    int du;
    void *bp;
    /* MPI-4.1: every flavor but dynamic answers (test_shared_query). */
    if (flavor == F_DYNAMIC)
        EXPECT(MPI_Win_shared_query(t.win, 0, &sz, &du, &bp), MPI_ERR_RMA_FLAVOR);
    else
        EXPECT(MPI_Win_shared_query(t.win, t_size, &sz, &du, &bp), MPI_ERR_RANK);
    if (flavor == F_DYNAMIC)
        EXPECT(MPI_Win_detach(t.win, x), MPI_ERR_RMA_ATTACH);
    else
        EXPECT(MPI_Win_attach(t.win, x, 4), MPI_ERR_RMA_FLAVOR);
    still_works(&t, flavor, "epoch errors");

    /* A user-defined handler is called with the class. */
    MPI_Errhandler eh;
    MPI_Win_create_errhandler(count_errors, &eh);
    MPI_Win_set_errhandler(t.win, eh);
    MPI_Errhandler_free(&eh);
    handler_calls = 0;
    int rc = MPI_Put(x, 1, MPI_INT, right, t_disp(&t, right, 0), 1, MPI_INT, t.win);
    CHECK(rc == MPI_ERR_RMA_SYNC && handler_calls == 1 && handler_last == MPI_ERR_RMA_SYNC,
          "%s: user handler calls %d, code %d", flavor_name[flavor], handler_calls, handler_last);
    still_works(&t, flavor, "the user handler");
    if (flavor == F_CREATE) {
        MPI_Win_free(&t.win);
        free(guarded);
        free(t.origin);
    } else {
        t_win_free(&t);
    }
}

/* MPI_Free_mem of what onesided's MPI_Alloc_mem gave out: a second free
 * or a pointer inside a block is MPI_ERR_BASE through MPI_COMM_WORLD's
 * handler, not the host's free() (which aborts), and the blocks around it
 * stay good. Small blocks share an arena, so such pointers are inside one. */
static void free_mem_errors(void)
{
    const char *served = getenv("ONESIDED_ALLOC_MEM");
    if (served && !strcmp(served, "0"))
        return; /* the host's blocks: its free() decides */
    char *a, *b;
    MPI_Alloc_mem(100, MPI_INFO_NULL, &a);
    MPI_Alloc_mem(100, MPI_INFO_NULL, &b);
    memset(b, 7, 100);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int c1 = cls(MPI_Free_mem(a + 8));
    CHECK(c1 == MPI_ERR_BASE, "MPI_Free_mem inside a block: class %d, expected MPI_ERR_BASE", c1);
    CHECK(MPI_Free_mem(a) == MPI_SUCCESS, "MPI_Free_mem of the block");
    int c2 = cls(MPI_Free_mem(a));
    CHECK(c2 == MPI_ERR_BASE, "second MPI_Free_mem: class %d, expected MPI_ERR_BASE", c2);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    CHECK(b[0] == 7 && b[99] == 7, "the block beside kept its bytes");
    MPI_Free_mem(b);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    T_FOR_EACH_FLAVOR(f)
        run(f);
    free_mem_errors();
    return t_finish("test_errors");
}
